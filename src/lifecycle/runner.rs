//! Runs planned stages through a [`HookExecutor`]: stages in order, each source's command in
//! order, object-form entries concurrently; stops at the first failing stage
//! ([spec: lifecycle](https://containers.dev/implementors/spec/#lifecycle),
//! [parallel execution](https://containers.dev/implementors/spec/#parallel-lifecycle-script-execution)).

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use futures_util::future::join_all;
use serde::Serialize;

use super::error::{LifecycleError, Result};
use super::executor::{ExecRequest, HookEnv, HookExecutor, HostExecutor};
use super::hook::{LifecycleHook, SimpleCommand};
use super::marker::{self, MarkerContext};
use super::plan::{Plan, RunCondition, SkipReason, SkippedHook, SourcedCommand, Stage};
use crate::progress::{Event, Reporter};

/// How many trailing output lines a failed command keeps for its report.
pub const OUTPUT_TAIL_LINES: usize = 20;

/// Who, where and with what environment container hooks run, and the marker keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookContext {
    /// `remoteUser` (falling back to the container user); `None` = the container's default.
    pub user: Option<String>,
    /// The remote `workspaceFolder`; `None` = the user's home (as the reference CLI).
    pub working_dir: Option<String>,
    /// remoteEnv ⊕ secrets (later wins); passed to the executor's env only.
    pub env: HookEnv,
    /// Container times for run-once markers; required when any stage has a marker
    /// ([`RunCondition::Due`] or [`RunCondition::UnlessMarked`]).
    pub markers: Option<MarkerContext>,
}

/// One command that ran: a source's command, or one entry of an object-form command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    /// The hook.
    pub hook: LifecycleHook,
    /// 0-based index of the source (see [`SourcedCommand::source`]).
    pub source: usize,
    /// The source as named in messages (`devcontainer.json`, `Feature '…'`, or its path).
    pub origin: String,
    /// The object-form entry name, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// One-line summary of the command (never contains env values).
    pub command: String,
    /// Exit code (128 + n when killed by signal n).
    pub exit_code: i64,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Last [`OUTPUT_TAIL_LINES`] output lines, kept only when the command failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_tail: Vec<String>,
}

/// What ran and what did not, in order; for the result JSON and the hand-off context file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleReport {
    /// Commands that ran, in the order they were started (entries of one object-form command
    /// in document order).
    pub runs: Vec<HookRun>,
    /// Hooks not run, with the reason.
    pub skipped: Vec<SkippedHook>,
}

impl LifecycleReport {
    fn extend(&mut self, other: LifecycleReport) {
        self.runs.extend(other.runs);
        self.skipped.extend(other.skipped);
    }
}

/// A failed stage: the hook and source whose command exited non-zero, and everything that
/// ran up to and including it. Hooks after it were not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFailure {
    /// The failing hook.
    pub hook: LifecycleHook,
    /// 0-based index of the failing source.
    pub source: usize,
    /// The failing source as named in messages.
    pub origin_label: String,
    /// All runs so far, including the failed one(s) (whose `output_tail` is filled).
    pub report: LifecycleReport,
}

impl HookFailure {
    /// The failed runs of the failing source (several for an object-form command).
    pub fn failed_runs(&self) -> impl Iterator<Item = &HookRun> {
        self.report
            .runs
            .iter()
            .filter(|r| r.hook == self.hook && r.source == self.source && r.exit_code != 0)
    }

    /// The exit code of the (first) failed run.
    pub fn exit_code(&self) -> i64 {
        self.failed_runs().next().map(|r| r.exit_code).unwrap_or(-1)
    }
}

/// Runs a whole plan: [`Plan::blocking`] then [`Plan::background`], as the reference CLI's
/// `up` does before printing its result. The report's `skipped` holds the plan's skipped
/// hooks followed by those skipped at run time.
///
/// Errors: as [`run_stages`].
pub async fn run_plan<E: HookExecutor>(
    executor: &E,
    plan: &Plan,
    context: &HookContext,
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    let mut report = LifecycleReport {
        runs: Vec::new(),
        skipped: plan.skipped.clone(),
    };
    let stages: Vec<Stage> = plan.stages().cloned().collect();
    match run_stages(executor, &stages, context, reporter).await {
        Ok(ran) => {
            report.extend(ran);
            Ok(report)
        }
        Err(LifecycleError::HookFailed(mut failure)) => {
            let ran = std::mem::take(&mut failure.report);
            report.extend(ran);
            failure.report = report;
            Err(LifecycleError::HookFailed(failure))
        }
        Err(other) => Err(other),
    }
}

/// Runs `stages` in order through `executor`.
///
/// For each stage: skip it if its condition is [`RunCondition::UnlessMarked`] and its marker
/// already holds the current value (markers are read once, in one exec, before the first
/// stage); else run each source's command in order, each finishing before the next, an
/// object-form command's entries concurrently (their output lines prefixed `[name] `);
/// when every command succeeded, write the stage's marker (a marker that cannot be written
/// is reported as a status line, not an error).
///
/// Errors:
/// - [`LifecycleError::HookFailed`] at the first command exiting non-zero (after all
///   entries of its object-form command have finished), carrying the runs so far;
/// - [`LifecycleError::MarkersUnavailable`] if a stage needs markers and
///   `context.markers` is `None` (checked before anything runs);
/// - [`LifecycleError::MarkerRead`] / [`LifecycleError::Executor`] when the executor fails.
pub async fn run_stages<E: HookExecutor>(
    executor: &E,
    stages: &[Stage],
    context: &HookContext,
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    for stage in stages {
        if stage.condition != RunCondition::Always
            && context
                .markers
                .as_ref()
                .and_then(|m| m.value_for(stage.hook))
                .is_none()
        {
            return Err(LifecycleError::MarkersUnavailable { hook: stage.hook });
        }
    }
    let existing = if stages
        .iter()
        .any(|s| s.condition == RunCondition::UnlessMarked)
    {
        read_markers(executor, context).await?
    } else {
        HashMap::new()
    };

    let mut report = LifecycleReport::default();
    for stage in stages {
        let current = context
            .markers
            .as_ref()
            .and_then(|m| m.value_for(stage.hook));
        if stage.condition == RunCondition::UnlessMarked
            && current.is_some()
            && existing.get(&stage.hook).map(String::as_str) == current
        {
            report.skipped.push(SkippedHook {
                hook: stage.hook,
                reason: SkipReason::AlreadyRan,
            });
            continue;
        }
        for sourced in &stage.commands {
            reporter.report(Event::Status(format!(
                "running the {} from {}",
                stage.hook,
                sourced.origin_label()
            )));
            let runs = run_sourced(executor, stage.hook, sourced, context, reporter).await?;
            let failed = runs.iter().any(|r| r.exit_code != 0);
            report.runs.extend(runs);
            if failed {
                let failure = HookFailure {
                    hook: stage.hook,
                    source: sourced.source,
                    origin_label: sourced.origin_label(),
                    report,
                };
                reporter.report(Event::Status(format!(
                    "{failure}; skipping any further lifecycle hooks"
                )));
                return Err(LifecycleError::HookFailed(Box::new(failure)));
            }
        }
        if let (Some(value), Some(markers)) = (current, context.markers.as_ref())
            && stage.condition != RunCondition::Always
        {
            write_marker(executor, stage.hook, value, markers, context, reporter).await?;
        }
    }
    Ok(report)
}

/// Runs `initializeCommand` on the host with [`HostExecutor`]: in `local_workspace_folder`,
/// with the host environment plus `env`, as the invoking user.
///
/// Errors: as [`run_stages`]; a missing folder is [`LifecycleError::Executor`].
pub async fn run_initialize_command(
    stage: &Stage,
    local_workspace_folder: &Path,
    env: HookEnv,
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    let executor = HostExecutor {
        default_working_dir: Some(local_workspace_folder.to_path_buf()),
    };
    let context = HookContext {
        user: None,
        working_dir: None,
        env,
        markers: None,
    };
    run_stages(&executor, std::slice::from_ref(stage), &context, reporter).await
}

/// Runs one source's command (all entries of an object-form command concurrently).
async fn run_sourced<E: HookExecutor>(
    executor: &E,
    hook: LifecycleHook,
    sourced: &SourcedCommand,
    context: &HookContext,
    reporter: &dyn Reporter,
) -> Result<Vec<HookRun>> {
    let entries = sourced.command.entries();
    let runs = join_all(entries.iter().map(|(name, command)| {
        run_one(executor, hook, sourced, *name, command, context, reporter)
    }))
    .await;
    runs.into_iter().collect()
}

async fn run_one<E: HookExecutor>(
    executor: &E,
    hook: LifecycleHook,
    sourced: &SourcedCommand,
    entry: Option<&str>,
    command: &SimpleCommand,
    context: &HookContext,
    reporter: &dyn Reporter,
) -> Result<HookRun> {
    let request = ExecRequest {
        argv: command.argv(),
        user: context.user.clone(),
        working_dir: context.working_dir.clone(),
        env: context.env.clone(),
    };
    let output = TailReporter::new(reporter, entry.map(|name| format!("[{name}] ")));
    let started = Instant::now();
    let exit_code =
        executor
            .exec(&request, &output)
            .await
            .map_err(|source| LifecycleError::Executor {
                what: match entry {
                    Some(name) => format!(
                        "`{name}` of `{hook}` from {} (source {})",
                        sourced.origin_label(),
                        sourced.source
                    ),
                    None => format!(
                        "`{hook}` from {} (source {})",
                        sourced.origin_label(),
                        sourced.source
                    ),
                },
                source,
            })?;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(HookRun {
        hook,
        source: sourced.source,
        origin: sourced.origin_label(),
        entry: entry.map(str::to_string),
        command: command.summary(),
        exit_code,
        duration_ms,
        output_tail: if exit_code == 0 {
            Vec::new()
        } else {
            output.into_tail()
        },
    })
}

async fn read_markers<E: HookExecutor>(
    executor: &E,
    context: &HookContext,
) -> Result<HashMap<LifecycleHook, String>> {
    let Some(markers) = context.markers.as_ref() else {
        return Ok(HashMap::new());
    };
    let request = ExecRequest {
        argv: SimpleCommand::Shell(marker::READ_SCRIPT.to_string()).argv(),
        user: context.user.clone(),
        working_dir: None,
        env: markers.env().into_iter().collect(),
    };
    let capture = Capture::default();
    let exit_code =
        executor
            .exec(&request, &capture)
            .await
            .map_err(|source| LifecycleError::Executor {
                what: "the lifecycle marker read".to_string(),
                source,
            })?;
    let lines = capture.into_lines();
    if exit_code != 0 {
        let skip = lines.len().saturating_sub(OUTPUT_TAIL_LINES);
        return Err(LifecycleError::MarkerRead {
            exit_code,
            output_tail: lines[skip..].to_vec(),
        });
    }
    Ok(marker::parse_read_output(&lines))
}

async fn write_marker<E: HookExecutor>(
    executor: &E,
    hook: LifecycleHook,
    value: &str,
    markers: &MarkerContext,
    context: &HookContext,
    reporter: &dyn Reporter,
) -> Result<()> {
    let mut env: HookEnv = markers.env().into_iter().collect();
    env.0.insert(
        marker::MARKER_NAME_ENV.to_string(),
        hook.property().to_string(),
    );
    env.0
        .insert(marker::MARKER_VALUE_ENV.to_string(), value.to_string());
    let request = ExecRequest {
        argv: SimpleCommand::Shell(marker::WRITE_SCRIPT.to_string()).argv(),
        user: context.user.clone(),
        working_dir: None,
        env,
    };
    let capture = Capture::default();
    let exit_code =
        executor
            .exec(&request, &capture)
            .await
            .map_err(|source| LifecycleError::Executor {
                what: format!("the `{hook}` marker write"),
                source,
            })?;
    if exit_code != 0 {
        let detail = capture.into_lines().last().cloned().unwrap_or_default();
        reporter.report(Event::Status(format!(
            "warning: cannot write the `{hook}` marker (exit code {exit_code}{}{detail}); it will run again next time",
            if detail.is_empty() { "" } else { ": " }
        )));
    }
    Ok(())
}

/// Forwards output lines (optionally prefixed) and keeps the last [`OUTPUT_TAIL_LINES`].
struct TailReporter<'a> {
    inner: &'a dyn Reporter,
    prefix: Option<String>,
    tail: Mutex<VecDeque<String>>,
}

impl<'a> TailReporter<'a> {
    fn new(inner: &'a dyn Reporter, prefix: Option<String>) -> Self {
        TailReporter {
            inner,
            prefix,
            tail: Mutex::new(VecDeque::with_capacity(OUTPUT_TAIL_LINES)),
        }
    }

    fn into_tail(self) -> Vec<String> {
        self.tail
            .into_inner()
            .map(Vec::from)
            .unwrap_or_else(|poisoned| Vec::from(poisoned.into_inner()))
    }
}

impl Reporter for TailReporter<'_> {
    fn report(&self, event: Event) {
        match event {
            Event::Output(line) => {
                {
                    let mut tail = self.tail.lock().unwrap_or_else(|p| p.into_inner());
                    if tail.len() == OUTPUT_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line.clone());
                }
                let line = match &self.prefix {
                    Some(prefix) => format!("{prefix}{line}"),
                    None => line,
                };
                self.inner.report(Event::Output(line));
            }
            other => self.inner.report(other),
        }
    }
}

/// Collects output lines of internal commands (marker scripts) without showing them.
#[derive(Default)]
struct Capture(Mutex<Vec<String>>);

impl Capture {
    fn into_lines(self) -> Vec<String> {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

impl Reporter for Capture {
    fn report(&self, event: Event) {
        if let Event::Output(line) = event {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
    }
}
