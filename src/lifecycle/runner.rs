//! Runs planned stages through a [`HookExecutor`]: stages in order, each source's command in
//! order, object-form entries concurrently; stops at the first failing stage
//! ([spec: lifecycle](https://containers.dev/implementors/spec/#lifecycle),
//! [parallel execution](https://containers.dev/implementors/spec/#parallel-lifecycle-script-execution)).

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::error::{LifecycleError, Result};
use super::executor::{ExecRequest, HookEnv, HookExecutor, HostExecutor};
use super::hook::{HookCommand, SimpleCommand};
use super::hook_name::LifecycleHook;
use super::marker::{self, MarkerContext};
use super::plan::{Plan, RunCondition, SourcedCommand, Stage};
use super::report::{HookFailure, HookRun, LifecycleReport, SkipReason, SkippedHook};
use crate::diagnostics::{LINE_CUT_MARKER, MAX_OUTPUT_LINE, SecretMask};
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
    /// The remote environment (probed user env ⊕ `remoteEnv`); passed to the executor's env.
    pub env: HookEnv,
    /// Secrets (`--secrets-file`): added to the executor's env after `env` (secrets win), and
    /// their values are replaced by `********` in reported output, output tails and command
    /// summaries. Never put on a command line.
    pub secrets: HookEnv,
    /// Container times for run-once markers; required when any stage has a marker
    /// ([`RunCondition::Due`] or [`RunCondition::UnlessMarked`]).
    pub markers: Option<MarkerContext>,
    /// The container was created by this bring-up and nothing ran in it yet: no hook of an
    /// earlier devcell can be left running, so the check for those starts no process
    /// (spec-note 0471).
    pub new_container: bool,
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
    let stages: Vec<Stage> = plan.stages().cloned().collect();
    run_all(executor, &plan.skipped, &stages, context, reporter).await
}

/// Runs `stages` ([`run_stages`]); the report starts with `skipped` (the plan's).
pub(super) async fn run_all<E: HookExecutor>(
    executor: &E,
    skipped: &[SkippedHook],
    stages: &[Stage],
    context: &HookContext,
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    let mut report = LifecycleReport {
        runs: Vec::new(),
        skipped: skipped.to_vec(),
        dotfiles: None,
    };
    if stages.is_empty() {
        return Ok(report);
    }
    // The whole line is masked, as the reference masks its log (a secret may be any text).
    tracing::trace!(
        "{}",
        SecretMask::new(context.secrets.0.values()).apply(&format!(
            "LifecycleCommandExecutionMap: {}",
            execution_map(stages)
        ))
    );
    match run_stages(executor, stages, context, reporter).await {
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

/// The commands of `stages` by hook, each with its origin, as the reference CLI logs them at
/// trace level (`LifecycleCommandExecutionMap: …`, JSON indented by four spaces; tools match
/// on the line, secrets masked).
fn execution_map(stages: &[Stage]) -> String {
    use serde::Serialize as _;
    use serde_json::{Value, json};
    let simple = |c: &SimpleCommand| match c {
        SimpleCommand::Shell(s) => json!(s),
        SimpleCommand::Exec(v) => json!(v),
    };
    let map: serde_json::Map<String, Value> = stages
        .iter()
        .map(|stage| {
            let commands: Vec<Value> = stage
                .commands
                .iter()
                .map(|c| {
                    let command = match &c.command {
                        HookCommand::Shell(s) => json!(s),
                        HookCommand::Exec(v) => json!(v),
                        HookCommand::Parallel(entries) => Value::Object(
                            entries
                                .iter()
                                .map(|(k, v)| (k.clone(), simple(v)))
                                .collect(),
                        ),
                    };
                    json!({"origin": c.origin_label(), "command": command})
                })
                .collect();
            (stage.hook.to_string(), Value::Array(commands))
        })
        .collect();
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    match Value::Object(map).serialize(&mut serializer) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => String::new(),
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
    // Container hooks: stop what a killed devcell left running before starting anything
    // again (spec-note 0423).
    if context.markers.is_some()
        && !context.new_container
        && stages.iter().any(|s| !s.commands.is_empty())
    {
        reap_left_behind(executor, context, reporter, REAP_DEADLINE).await?;
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
                // The reference CLI's log line, word for word (tools match on it).
                "Running the {} from {}...",
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
        secrets: HookEnv::default(),
        markers: None,
        new_container: false,
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
    let mut env = context.env.clone();
    env.0.extend(context.secrets.0.clone());
    // In a container, the command runs under the wrapper that records its process group
    // (spec-note 0423); the marker folder and the id go through the environment.
    let argv = match &context.markers {
        Some(markers) => {
            env.0.extend(markers.env());
            env.0.insert(
                marker::HOOK_ID_ENV.to_string(),
                marker::hook_id(hook, sourced.source, entry),
            );
            let mut argv = vec![
                "/bin/sh".to_string(),
                "-c".to_string(),
                marker::HOOK_WRAPPER_SCRIPT.to_string(),
                marker::HOOK_WRAPPER_NAME.to_string(),
            ];
            argv.extend(command.argv());
            argv
        }
        None => command.argv(),
    };
    let request = ExecRequest {
        argv,
        user: context.user.clone(),
        working_dir: context.working_dir.clone(),
        env,
    };
    let mask = SecretMask::new(context.secrets.0.values());
    if let Some(name) = entry {
        reporter.report(Event::Status(format!(
            // The reference CLI's line for one entry of an object-form hook, word for word.
            "Running {name} of {hook} from {}...",
            sourced.origin_label()
        )));
    }
    let output = TailReporter::new(reporter, entry.map(|name| format!("[{name}] ")), &mask);
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
        command: mask.apply(&command.summary()),
        exit_code,
        duration_ms,
        output_tail: if exit_code == 0 {
            Vec::new()
        } else {
            output.into_tail()
        },
    })
}

/// Runs one of devcell's own scripts (`script`, through `/bin/sh -c`) as the hooks' user with
/// `env`, and returns its exit code and output lines; an executor failure is an error about
/// `what` the script is.
async fn run_script<E: HookExecutor>(
    executor: &E,
    script: &str,
    context: &HookContext,
    env: HookEnv,
    what: impl FnOnce() -> String,
) -> Result<(i64, Vec<String>)> {
    let request = ExecRequest {
        argv: SimpleCommand::Shell(script.to_string()).argv(),
        user: context.user.clone(),
        working_dir: None,
        env,
    };
    let capture = Capture::default();
    let code =
        executor
            .exec(&request, &capture)
            .await
            .map_err(|source| LifecycleError::Executor {
                what: what(),
                source,
            })?;
    Ok((code, capture.into_lines()))
}

/// How long devcell waits for [`marker::REAP_SCRIPT`] before it stops waiting (spec-note
/// 0662). The script gives each process group it stops up to 10 s before `SIGKILL`, so 30 s
/// lets it stop three stubborn groups (more than one interrupted bring-up leaves: one stage's
/// commands); a container whose shell never ends (a hostile image's `/bin/sh`, a pid file
/// naming a process that survives `SIGKILL`) no longer holds `up` for ever.
pub const REAP_DEADLINE: Duration = Duration::from_secs(30);

/// How long the stop of a reap past its deadline ([`marker::STOP_REAP_SCRIPT`]) is waited for,
/// at most (never longer than the reap's own deadline): it only reads `/proc` and kills.
const REAP_STOP_DEADLINE: Duration = Duration::from_secs(5);

/// Runs [`marker::REAP_SCRIPT`] as the hooks' user: hook process groups a killed devcell left
/// behind are stopped (each one a status line). A reap that cannot run, or does not end within
/// `deadline`, is a status line, not an error: the hooks then run as before, beside anything
/// left running (what the reap is for is tidiness inside the container, not a guarantee: the
/// container's processes are its own either way; spec-note 0662). Past the deadline, devcell
/// kills the reap's processes ([`marker::STOP_REAP_SCRIPT`]) when it can, and says whether it
/// could.
async fn reap_left_behind<E: HookExecutor>(
    executor: &E,
    context: &HookContext,
    reporter: &dyn Reporter,
    deadline: Duration,
) -> Result<()> {
    let Some(markers) = context.markers.as_ref() else {
        return Ok(());
    };
    let token = reap_token();
    let mut env: HookEnv = markers.env().into_iter().collect();
    env.0
        .insert(marker::REAP_TOKEN_ENV.to_string(), token.clone());
    let reap = run_script(executor, marker::REAP_SCRIPT, context, env, || {
        "the check for hooks left running".to_string()
    });
    let Ok(reaped) = tokio::time::timeout(deadline, reap).await else {
        let stop_env: HookEnv = [(marker::REAP_STOP_ENV, token.as_str())]
            .into_iter()
            .collect();
        let stop = run_script(
            executor,
            marker::STOP_REAP_SCRIPT,
            context,
            stop_env,
            || "stopping the check for hooks left running".to_string(),
        );
        let stopped = matches!(
            tokio::time::timeout(deadline.min(REAP_STOP_DEADLINE), stop).await,
            Ok(Ok((0, _)))
        );
        reporter.report(Event::Status(format!(
            "warning: the check for hooks left running by an interrupted devcell did not end within {} s ({}); the hooks run now, beside anything still running from before",
            deadline.as_secs_f32(),
            if stopped {
                "devcell stopped it"
            } else {
                "devcell could not stop it: it may still run in the container"
            }
        )));
        return Ok(());
    };
    let (code, lines) = reaped?;
    for line in lines {
        if let Some(id) = line.strip_prefix("stopped ") {
            reporter.report(Event::Status(format!(
                "stopped `{id}`, left running by an interrupted devcell, before starting the hooks again"
            )));
        }
    }
    if code != 0 {
        reporter.report(Event::Status(format!(
            "warning: the check for hooks left running exited with {code}"
        )));
    }
    Ok(())
}

/// A token unique to one reap run (this process's id and the time), for
/// [`marker::REAP_TOKEN_ENV`].
fn reap_token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

/// The markers of an explicit marker folder read by the executor without a process; `None`
/// when there is no such folder or the executor cannot.
async fn read_markers_directly<E: HookExecutor>(
    executor: &E,
    markers: &MarkerContext,
) -> Option<Result<HashMap<LifecycleHook, String>>> {
    let folder = markers.folder.as_deref()?;
    let read = executor.read_files(folder).await?;
    Some(
        read.map(|files| marker::parse_files(&files))
            .map_err(|source| LifecycleError::Executor {
                what: "the lifecycle marker read".to_string(),
                source,
            }),
    )
}

/// When every stage of `plan` is a run-once stage whose marker already holds the current
/// value, the report of skipping them all (as [`run_plan`] would give it), decided without
/// running a process in the container: the executor reads `markers.folder` directly. `None`
/// when some stage is due, when there is no marker folder, or when the executor cannot read
/// it that way (the caller then probes and runs the plan). A read error is `None` too: the
/// plan's own read reports it.
pub async fn already_ran<E: HookExecutor>(
    executor: &E,
    plan: &Plan,
    markers: &MarkerContext,
) -> Option<LifecycleReport> {
    let stages: Vec<&Stage> = plan.stages().collect();
    if stages.is_empty()
        || stages
            .iter()
            .any(|s| s.condition != RunCondition::UnlessMarked)
    {
        return None;
    }
    let existing = read_markers_directly(executor, markers).await?.ok()?;
    let mut report = LifecycleReport {
        runs: Vec::new(),
        skipped: plan.skipped.clone(),
        dotfiles: None,
    };
    for stage in stages {
        let current = markers.value_for(stage.hook)?;
        if existing.get(&stage.hook).map(String::as_str) != Some(current) {
            return None;
        }
        report.skipped.push(SkippedHook {
            hook: stage.hook,
            reason: SkipReason::AlreadyRan,
        });
    }
    Some(report)
}

async fn read_markers<E: HookExecutor>(
    executor: &E,
    context: &HookContext,
) -> Result<HashMap<LifecycleHook, String>> {
    let Some(markers) = context.markers.as_ref() else {
        return Ok(HashMap::new());
    };
    if let Some(read) = read_markers_directly(executor, markers).await {
        return read;
    }
    let env = markers.env().into_iter().collect();
    let (exit_code, lines) = run_script(executor, marker::READ_SCRIPT, context, env, || {
        "the lifecycle marker read".to_string()
    })
    .await?;
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
    // Through the engine when it can (no process; the folder need not be the user's),
    // else the write script as the hook user.
    if let Some(folder) = &markers.folder
        && let Some(Ok(())) = executor
            .write_file(
                folder,
                &marker::file_name(hook),
                format!("{value}\n").as_bytes(),
            )
            .await
    {
        return Ok(());
    }
    let mut env: HookEnv = markers.env().into_iter().collect();
    env.0.insert(
        marker::MARKER_NAME_ENV.to_string(),
        hook.property().to_string(),
    );
    env.0
        .insert(marker::MARKER_VALUE_ENV.to_string(), value.to_string());
    let (exit_code, lines) = run_script(executor, marker::WRITE_SCRIPT, context, env, || {
        format!("the `{hook}` marker write")
    })
    .await?;
    if exit_code != 0 {
        let detail = lines.last().cloned().unwrap_or_default();
        reporter.report(Event::Status(format!(
            "warning: cannot write the `{hook}` marker (exit code {exit_code}{}{detail}); it will run again next time",
            if detail.is_empty() { "" } else { ": " }
        )));
    }
    Ok(())
}

/// Forwards output lines (optionally prefixed, secrets masked) and keeps the last
/// [`OUTPUT_TAIL_LINES`].
pub(super) struct TailReporter<'a> {
    inner: &'a dyn Reporter,
    prefix: Option<String>,
    mask: &'a SecretMask,
    tail: Mutex<VecDeque<String>>,
}

impl<'a> TailReporter<'a> {
    pub(super) fn new(
        inner: &'a dyn Reporter,
        prefix: Option<String>,
        mask: &'a SecretMask,
    ) -> Self {
        TailReporter {
            inner,
            prefix,
            mask,
            tail: Mutex::new(VecDeque::with_capacity(OUTPUT_TAIL_LINES)),
        }
    }

    pub(super) fn into_tail(self) -> Vec<String> {
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
                let line = mask_line(self.mask, &line);
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
            Event::Status(text) => self.inner.report(Event::Status(self.mask.apply(&text))),
            Event::Warning(mut warning) => {
                warning.message = self.mask.apply(&warning.message);
                self.inner.report(Event::Warning(warning));
            }
        }
    }
}

/// `line` with the secret values masked, and kept within the bound (spec-note 0658): a line the
/// engine cut at [`MAX_OUTPUT_LINE`] loses the end that could begin a value (its rest was
/// dropped, so that beginning would show unmasked); one longer than the bound (another
/// source's) is cut the same way.
fn mask_line(mask: &SecretMask, line: &str) -> String {
    let (body, cut) = match line.strip_suffix(LINE_CUT_MARKER) {
        Some(body) => (body, true),
        None if line.len() > MAX_OUTPUT_LINE => {
            let mut end = MAX_OUTPUT_LINE;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            (&line[..end], true)
        }
        None => (line, false),
    };
    if !cut {
        return mask.apply(line);
    }
    let mut stream = mask.stream();
    let mut shown = String::from_utf8_lossy(&stream.push(body.as_bytes())).into_owned();
    shown.push_str(LINE_CUT_MARKER);
    shown
}

/// Collects output lines of internal commands (marker scripts, the environment probe) without
/// showing them, at most [`CAPTURE_CAP`] bytes of them (spec-note 0658): later lines are
/// dropped, so an answer that passed it reads as incomplete (its end marker missing).
#[derive(Default)]
pub(super) struct Capture(Mutex<(Vec<String>, usize)>);

/// The most bytes of lines a [`Capture`] keeps: a large environment fits many times.
pub(super) const CAPTURE_CAP: usize = 8 * 1024 * 1024;

impl Capture {
    /// The lines collected, in order.
    pub(super) fn into_lines(self) -> Vec<String> {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner()).0
    }
}

impl Reporter for Capture {
    fn report(&self, event: Event) {
        if let Event::Output(line) = event {
            let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
            // each line counts with its newline, so a flood of empty lines reaches the cap too
            // (attack 27, R2: `yes ""` in a profile grew devcell by gigabytes)
            let cost = line.len() + 1;
            if kept.1 + cost <= CAPTURE_CAP {
                kept.1 += cost;
                kept.0.push(line);
            } else {
                kept.1 = CAPTURE_CAP;
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! Orchestration only: a recording executor stands in for the container so the order,
    //! stop-on-failure and marker bookkeeping can be checked exactly. Real execution is tested
    //! against the Docker engine in `tests/it/lifecycle.rs`.
    use super::*;
    use crate::lifecycle::plan::{BringUpKind, HookSources, PlanOptions};
    use serde_json::{Value, json};

    /// Records calls as `start <label>` / `end <label>` events; `exit <n>` anywhere in a
    /// command makes it exit `n`. Keeps markers in memory, answering the marker scripts.
    /// Commands a test answers itself (the dotfiles' scripts, in `dotfiles`' tests): the
    /// event recorded and the exit code, by the command's text.
    #[derive(Default)]
    pub(in crate::lifecycle) struct Recorder {
        events: Mutex<Vec<String>>,
        pub(in crate::lifecycle) requests: Mutex<Vec<ExecRequest>>,
        markers: Mutex<HashMap<String, String>>,
        reaps: Mutex<usize>,
        answers: HashMap<&'static str, (&'static str, i64)>,
    }

    impl Recorder {
        /// A recorder that answers the commands in `answers` itself.
        pub(in crate::lifecycle) fn answering(
            answers: impl IntoIterator<Item = (&'static str, (&'static str, i64))>,
        ) -> Self {
            Recorder {
                answers: answers.into_iter().collect(),
                ..Recorder::default()
            }
        }

        pub(in crate::lifecycle) fn events(&self) -> Vec<String> {
            self.events.lock().unwrap().clone()
        }

        /// Runs the plan of `config` for a `kind` bring-up with the default context.
        async fn run(&self, config: Value, kind: BringUpKind) -> Result<LifecycleReport> {
            self.run_in(config, kind, &context()).await
        }

        /// The events of running the plan of `config`, which succeeds.
        async fn events_of(&self, config: Value, kind: BringUpKind) -> Vec<String> {
            self.run(config, kind).await.unwrap();
            self.events()
        }

        async fn run_in(
            &self,
            config: Value,
            kind: BringUpKind,
            ctx: &HookContext,
        ) -> Result<LifecycleReport> {
            run_plan(self, &plan(config, kind), ctx, &Lines::default()).await
        }
    }

    impl HookExecutor for Recorder {
        async fn exec(
            &self,
            request: &ExecRequest,
            output: &dyn Reporter,
        ) -> std::result::Result<i64, crate::lifecycle::ExecutorError> {
            let label = request.argv.last().cloned().unwrap_or_default();
            if label == marker::REAP_SCRIPT {
                *self.reaps.lock().unwrap() += 1;
                return Ok(0);
            }
            self.requests.lock().unwrap().push(request.clone());
            if let Some(&(event, code)) = self.answers.get(label.as_str()) {
                self.events.lock().unwrap().push(event.into());
                return Ok(code);
            }
            if label == marker::READ_SCRIPT {
                for (hook, value) in self.markers.lock().unwrap().iter() {
                    output.report(Event::Output(format!("{hook}={value}")));
                }
                self.events.lock().unwrap().push("read markers".into());
                return Ok(0);
            }
            if label == marker::WRITE_SCRIPT {
                let name = request.env.0[marker::MARKER_NAME_ENV].clone();
                let value = request.env.0[marker::MARKER_VALUE_ENV].clone();
                self.events.lock().unwrap().push(format!("mark {name}"));
                self.markers.lock().unwrap().insert(name, value);
                return Ok(0);
            }
            self.events.lock().unwrap().push(format!("start {label}"));
            output.report(Event::Output(format!("out {label}")));
            // Let concurrent siblings run: sequential code would not interleave here.
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            self.events.lock().unwrap().push(format!("end {label}"));
            let code = label
                .split("exit ")
                .nth(1)
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            Ok(code)
        }
    }

    /// An executor whose execs never end (a container whose shell never returns), but for
    /// [`marker::STOP_REAP_SCRIPT`] when `stops`, which exits 0.
    #[derive(Default)]
    struct NeverEnds {
        requests: Mutex<Vec<ExecRequest>>,
        stops: bool,
    }

    impl HookExecutor for NeverEnds {
        async fn exec(
            &self,
            request: &ExecRequest,
            _output: &dyn Reporter,
        ) -> std::result::Result<i64, crate::lifecycle::ExecutorError> {
            self.requests.lock().unwrap().push(request.clone());
            if self.stops
                && request.argv.last().map(String::as_str) == Some(marker::STOP_REAP_SCRIPT)
            {
                return Ok(0);
            }
            std::future::pending().await
        }
    }

    /// Spec-note 0662: a reap script that never ends no longer holds the bring-up: past its
    /// deadline devcell runs the stop script for that reap's token and goes on with a status
    /// line saying whether it could stop it.
    #[tokio::test]
    async fn a_reap_that_never_ends_is_given_up_at_its_deadline() {
        for stops in [false, true] {
            let executor = NeverEnds {
                stops,
                ..NeverEnds::default()
            };
            let mut ctx = context();
            ctx.markers = Some(markers());
            let lines = Lines::default();
            let reaped = tokio::time::timeout(
                Duration::from_secs(60),
                reap_left_behind(&executor, &ctx, &lines, Duration::from_millis(50)),
            )
            .await;
            assert!(matches!(reaped, Ok(Ok(()))), "it returned: {reaped:?}");
            let requests = executor.requests.lock().unwrap();
            assert_eq!(requests.len(), 2, "{requests:?}");
            assert_eq!(
                requests[0].argv.last().map(String::as_str),
                Some(marker::REAP_SCRIPT)
            );
            assert_eq!(
                requests[1].argv.last().map(String::as_str),
                Some(marker::STOP_REAP_SCRIPT)
            );
            let token = &requests[0].env.0[marker::REAP_TOKEN_ENV];
            assert_eq!(&requests[1].env.0[marker::REAP_STOP_ENV], token);
            let said = lines.texts(|e| match e {
                Event::Status(s) => Some(s),
                _ => None,
            });
            let expected = if stops {
                "devcell stopped it"
            } else {
                "devcell could not stop it"
            };
            assert!(
                said.iter()
                    .any(|l| l.contains("did not end within") && l.contains(expected)),
                "{said:?}"
            );
        }
    }

    #[derive(Default)]
    pub(in crate::lifecycle) struct Lines(Mutex<Vec<Event>>);
    impl Lines {
        /// The texts of the reported events `pick` chooses, in order.
        fn texts(&self, pick: impl Fn(&Event) -> Option<&String>) -> Vec<String> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .filter_map(pick)
                .cloned()
                .collect()
        }
    }
    impl Reporter for Lines {
        fn report(&self, event: Event) {
            self.0.lock().unwrap().push(event);
        }
    }

    fn markers() -> MarkerContext {
        MarkerContext {
            created_at: "created-1".into(),
            started_at: "started-1".into(),
            folder: None,
            running_folder: None,
        }
    }

    pub(in crate::lifecycle) fn context() -> HookContext {
        HookContext {
            user: Some("vscode".into()),
            working_dir: Some("/workspaces/app".into()),
            env: [("LANG", "C.UTF-8"), ("SECRET_TOKEN", "overridden")]
                .into_iter()
                .collect(),
            secrets: [("SECRET_TOKEN", "s3cret-value")].into_iter().collect(),
            markers: Some(markers()),
            new_container: false,
        }
    }

    pub(in crate::lifecycle) fn plan(config: Value, kind: BringUpKind) -> Plan {
        Plan::from_merged_configuration(&config, kind, PlanOptions::default()).unwrap()
    }

    /// The events of the hook command `label` running, then of the marker `marked` (if any)
    /// being written.
    fn ran(label: &str, marked: Option<&str>) -> Vec<String> {
        let mut events = vec![format!("start {label}"), format!("end {label}")];
        events.extend(marked.map(|m| format!("mark {m}")));
        events
    }

    pub(in crate::lifecycle) fn all_hooks() -> Value {
        json!({
            "onCreateCommands": ["on-create feature", ["on-create", "json"]],
            "updateContentCommands": ["update"],
            "postCreateCommands": ["post-create"],
            "postStartCommands": ["post-start"],
            "postAttachCommands": ["post-attach"],
        })
    }

    #[tokio::test]
    async fn stages_and_sources_run_in_order_each_finishing_before_the_next() {
        let recorder = Recorder::default();
        let report = recorder
            .run(all_hooks(), BringUpKind::Created)
            .await
            .unwrap();
        assert_eq!(
            recorder.events(),
            [
                ran("on-create feature", None),
                ran("json", Some("onCreateCommand")),
                ran("update", Some("updateContentCommand")),
                ran("post-create", Some("postCreateCommand")),
                ran("post-start", Some("postStartCommand")),
                ran("post-attach", None),
            ]
            .concat()
        );
        let hooks: Vec<(LifecycleHook, usize)> =
            report.runs.iter().map(|r| (r.hook, r.source)).collect();
        assert_eq!(
            hooks,
            vec![
                (LifecycleHook::OnCreateCommand, 0),
                (LifecycleHook::OnCreateCommand, 1),
                (LifecycleHook::UpdateContentCommand, 0),
                (LifecycleHook::PostCreateCommand, 0),
                (LifecycleHook::PostStartCommand, 0),
                (LifecycleHook::PostAttachCommand, 0),
            ]
        );
        assert_eq!(report.runs[1].command, "on-create json");
        assert!(
            report
                .runs
                .iter()
                .all(|r| r.exit_code == 0 && r.output_tail.is_empty())
        );
        assert!(report.skipped.is_empty());
    }

    #[tokio::test]
    async fn hook_processes_get_user_dir_and_env_never_secrets_in_argv() {
        let recorder = Recorder::default();
        let stages = plan(all_hooks(), BringUpKind::Created).blocking;
        run_stages(&recorder, &stages, &context(), &Lines::default())
            .await
            .unwrap();
        let requests = recorder.requests.lock().unwrap().clone();
        let hook_requests: Vec<&ExecRequest> = requests
            .iter()
            .filter(|r| !r.argv.iter().any(|a| a == marker::WRITE_SCRIPT))
            .collect();
        assert_eq!(hook_requests.len(), 3);
        for request in hook_requests {
            assert_eq!(request.user.as_deref(), Some("vscode"));
            assert_eq!(request.working_dir.as_deref(), Some("/workspaces/app"));
            // Secrets are added after the remote env and win.
            assert_eq!(request.env.0["SECRET_TOKEN"], "s3cret-value");
            assert_eq!(request.env.0["LANG"], "C.UTF-8");
        }
        for request in &requests {
            assert!(
                request.argv.iter().all(|a| !a.contains("s3cret-value")),
                "{:?}",
                request.argv
            );
        }
        // String form goes through /bin/sh -c; array form does not; both under the wrapper
        // that records the process group, whose id comes through the environment.
        let wrapper = [
            "/bin/sh",
            "-c",
            marker::HOOK_WRAPPER_SCRIPT,
            marker::HOOK_WRAPPER_NAME,
        ];
        assert_eq!(requests[0].argv[..4], wrapper);
        assert_eq!(
            requests[0].argv[4..],
            ["/bin/sh", "-c", "on-create feature"]
        );
        assert_eq!(requests[1].argv[4..], ["on-create", "json"]);
        assert_eq!(requests[0].env.0[marker::HOOK_ID_ENV], "onCreateCommand-0");
        assert_eq!(requests[1].env.0[marker::HOOK_ID_ENV], "onCreateCommand-1");
        // Left-behind hooks were looked for once, before the first hook.
        assert_eq!(*recorder.reaps.lock().unwrap(), 1);
    }

    /// A container this bring-up created has no hook of an earlier devcell left running: the
    /// hooks run without the check for those (one process fewer; spec-note 0471).
    #[tokio::test]
    async fn a_new_container_is_not_checked_for_left_behind_hooks() {
        let recorder = Recorder::default();
        let stages = plan(all_hooks(), BringUpKind::Created).blocking;
        let context = HookContext {
            new_container: true,
            ..context()
        };
        let report = run_stages(&recorder, &stages, &context, &Lines::default())
            .await
            .unwrap();
        assert_eq!(*recorder.reaps.lock().unwrap(), 0);
        assert!(!report.runs.is_empty());
    }

    #[tokio::test]
    async fn parallel_entries_overlap_and_prefix_their_output() {
        let recorder = Recorder::default();
        let lines = Lines::default();
        let stages = plan(
            json!({"postAttachCommands": [{"a": "task-a", "b": ["task-b"]}, "after"]}),
            BringUpKind::Created,
        )
        .background;
        let report = run_stages(&recorder, &stages, &context(), &lines)
            .await
            .unwrap();
        assert_eq!(
            recorder.events(),
            vec![
                "start task-a",
                "start task-b",
                "end task-a",
                "end task-b",
                "start after",
                "end after"
            ]
        );
        assert_eq!(report.runs[0].entry.as_deref(), Some("a"));
        assert_eq!(report.runs[1].entry.as_deref(), Some("b"));
        let outputs = lines.texts(|e| match e {
            Event::Output(l) => Some(l),
            Event::Status(_) | Event::Warning(_) => None,
        });
        assert_eq!(
            outputs,
            vec!["[a] out task-a", "[b] out task-b", "out after"]
        );
        // The reference CLI's log lines, word for word: one per source, one per entry.
        let statuses = lines.texts(|e| match e {
            Event::Status(s) if s.starts_with("Running ") => Some(s),
            _ => None,
        });
        assert_eq!(
            statuses,
            [
                "Running the postAttachCommand from `postAttachCommands[0]`...",
                "Running a of postAttachCommand from `postAttachCommands[0]`...",
                "Running b of postAttachCommand from `postAttachCommands[0]`...",
                "Running the postAttachCommand from `postAttachCommands[1]`...",
            ]
        );
    }

    #[test]
    fn the_execution_map_lists_every_command_with_its_origin() {
        let stages = plan(
            json!({"postCreateCommands": [{"a": "task-a", "b": ["task", "b"]}, "after"]}),
            BringUpKind::Created,
        )
        .background;
        let map: serde_json::Value = serde_json::from_str(&execution_map(&stages)).unwrap();
        assert_eq!(
            map,
            json!({"postCreateCommand": [
                {"origin": "`postCreateCommands[0]`", "command": {"a": "task-a", "b": ["task", "b"]}},
                {"origin": "`postCreateCommands[1]`", "command": "after"},
            ]})
        );
        assert!(execution_map(&stages).contains("\n    \"postCreateCommand\""));
    }

    #[tokio::test]
    async fn failing_parallel_entry_waits_for_siblings_and_reports_all_failures() {
        let recorder = Recorder::default();
        let stages = plan(
            json!({"postCreateCommands": [{"ok": "fine", "x": "x exit 3", "y": "y exit 4"}]}),
            BringUpKind::Created,
        )
        .stages()
        .cloned()
        .collect::<Vec<_>>();
        let err = run_stages(&recorder, &stages, &context(), &Lines::default())
            .await
            .unwrap_err();
        let LifecycleError::HookFailed(failure) = &err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(failure.report.runs.len(), 3);
        assert_eq!(failure.failed_runs().count(), 2);
        assert_eq!(failure.exit_code(), 3);
        assert_eq!(
            err.to_string(),
            "entries `x` (exit code 3), `y` (exit code 4) of `postCreateCommand` from `postCreateCommands[0]` (source 0) failed"
        );
        // All three finished; no marker for the failed stage.
        let events = recorder.events();
        assert_eq!(events.iter().filter(|e| e.starts_with("end ")).count(), 3);
        assert!(!events.iter().any(|e| e.starts_with("mark")));
    }

    #[tokio::test]
    async fn failing_post_create_stops_post_start_and_post_attach() {
        let recorder = Recorder::default();
        let sources = HookSources::from_metadata(
            &[
                json!({"id": "ghcr.io/x/f:1", "postCreateCommand": "feature ok"}),
                json!({"postCreateCommand": "json exit 7", "postStartCommand": "post-start",
                       "postAttachCommand": "post-attach"}),
            ],
            None,
        )
        .unwrap();
        let plan = Plan::new(
            &sources,
            LifecycleHook::UpdateContentCommand,
            BringUpKind::Created,
            PlanOptions::default(),
        );
        let lines = Lines::default();
        let err = run_plan(&recorder, &plan, &context(), &lines)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`postCreateCommand` from devcontainer.json (source 1) failed with exit code 7"
        );
        let LifecycleError::HookFailed(failure) = &err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(failure.hook, LifecycleHook::PostCreateCommand);
        assert_eq!(failure.source, 1);
        assert_eq!(failure.exit_code(), 7);
        assert_eq!(failure.report.runs.len(), 2);
        assert_eq!(failure.report.runs[0].origin, "Feature 'ghcr.io/x/f:1'");
        assert_eq!(failure.report.runs[1].output_tail, vec!["out json exit 7"]);
        assert_eq!(
            failure
                .report
                .skipped
                .iter()
                .map(|s| s.hook)
                .collect::<Vec<_>>(),
            vec![
                LifecycleHook::OnCreateCommand,
                LifecycleHook::UpdateContentCommand
            ]
        );
        let events = recorder.events();
        assert!(
            !events
                .iter()
                .any(|e| e.contains("post-start") || e.contains("post-attach"))
        );
        assert!(!events.iter().any(|e| e.starts_with("mark")));
        assert!(lines.0.lock().unwrap().iter().any(|e| matches!(e,
            Event::Status(s) if s.ends_with("skipping any further lifecycle hooks"))));
        // The reference CLI's log line, exactly (spec-note 0454), for both sources.
        let statuses = lines.texts(|e| match e {
            Event::Status(s) if s.starts_with("Running the postCreateCommand") => Some(s),
            _ => None,
        });
        assert_eq!(
            statuses,
            [
                "Running the postCreateCommand from Feature 'ghcr.io/x/f:1'...",
                "Running the postCreateCommand from devcontainer.json...",
            ]
        );
    }

    #[tokio::test]
    async fn markers_skip_completed_hooks_and_retry_failed_ones() {
        let recorder = Recorder::default();
        recorder.markers.lock().unwrap().extend([
            ("onCreateCommand".to_string(), "created-1".to_string()),
            ("updateContentCommand".to_string(), "created-1".to_string()),
            // postCreate failed last time: no marker. postStart ran for an older start.
            ("postStartCommand".to_string(), "started-0".to_string()),
        ]);
        let report = recorder
            .run(all_hooks(), BringUpKind::Running)
            .await
            .unwrap();
        assert_eq!(
            recorder.events(),
            [
                vec!["read markers".to_string()],
                ran("post-create", Some("postCreateCommand")),
                ran("post-start", Some("postStartCommand")),
                ran("post-attach", None),
            ]
            .concat()
        );
        assert_eq!(
            report.skipped,
            vec![
                SkippedHook {
                    hook: LifecycleHook::OnCreateCommand,
                    reason: SkipReason::AlreadyRan
                },
                SkippedHook {
                    hook: LifecycleHook::UpdateContentCommand,
                    reason: SkipReason::AlreadyRan
                },
            ]
        );
        // Second re-attach: only postAttach runs.
        recorder.events.lock().unwrap().clear();
        assert_eq!(
            recorder.events_of(all_hooks(), BringUpKind::Running).await,
            vec!["read markers", "start post-attach", "end post-attach"]
        );
    }

    #[tokio::test]
    async fn a_new_container_reads_no_markers() {
        let recorder = Recorder::default();
        recorder
            .markers
            .lock()
            .unwrap()
            .insert("onCreateCommand".into(), "created-1".into());
        assert_eq!(
            recorder
                .events_of(json!({"onCreateCommands": ["x"]}), BringUpKind::Created)
                .await,
            vec!["start x", "end x", "mark onCreateCommand"]
        );
    }

    #[tokio::test]
    async fn marker_stages_without_container_times_are_refused_before_running() {
        let recorder = Recorder::default();
        let mut ctx = context();
        ctx.markers = None;
        let err = recorder
            .run_in(all_hooks(), BringUpKind::Created, &ctx)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            LifecycleError::MarkersUnavailable {
                hook: LifecycleHook::OnCreateCommand
            }
        ));
        assert!(recorder.events().is_empty());
        // postAttach alone needs no markers.
        let report = recorder
            .run_in(
                json!({"postAttachCommands": ["a"]}),
                BringUpKind::Running,
                &ctx,
            )
            .await
            .unwrap();
        assert_eq!(report.runs.len(), 1);
    }

    #[tokio::test]
    async fn initialize_command_runs_on_the_host_in_the_workspace_folder() {
        let dir = tempfile::tempdir().unwrap();
        let sources = HookSources::from_merged_configuration(&json!({
            "initializeCommand": {"one": "echo one > one.txt", "two": ["touch", "two.txt"]}
        }))
        .unwrap();
        let stage = crate::lifecycle::initialize_stage(&sources).unwrap();
        let report =
            run_initialize_command(&stage, dir.path(), HookEnv::default(), &Lines::default())
                .await
                .unwrap();
        assert_eq!(report.runs.len(), 2);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("one.txt")).unwrap(),
            "one\n"
        );
        assert!(dir.path().join("two.txt").exists());

        let sources = HookSources::from_merged_configuration(&json!({
            "initializeCommand": "echo \"$DEVCELL_T\"; exit 5"
        }))
        .unwrap();
        let stage = crate::lifecycle::initialize_stage(&sources).unwrap();
        let env: HookEnv = [("DEVCELL_T", "from-env")].into_iter().collect();
        let err = run_initialize_command(&stage, dir.path(), env, &Lines::default())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`initializeCommand` from devcontainer.json (source 0) failed with exit code 5"
        );
        let LifecycleError::HookFailed(failure) = err else {
            unreachable!()
        };
        assert_eq!(failure.report.runs[0].output_tail, vec!["from-env"]);
    }

    #[tokio::test]
    async fn secret_values_are_masked_in_output_tails_and_summaries() {
        let recorder = Recorder::default();
        let lines = Lines::default();
        let stages = plan(
            json!({"postAttachCommands": ["echo s3cret-value; exit 1"]}),
            BringUpKind::Running,
        )
        .background;
        let err = run_stages(&recorder, &stages, &context(), &lines)
            .await
            .unwrap_err();
        let LifecycleError::HookFailed(failure) = err else {
            panic!("expected a hook failure");
        };
        let run = &failure.report.runs[0];
        assert_eq!(run.command, "echo ********; exit 1");
        assert_eq!(run.output_tail, vec!["out echo ********; exit 1"]);
        for event in lines.0.lock().unwrap().iter() {
            let (Event::Output(text) | Event::Status(text)) = event else {
                continue;
            };
            assert!(!text.contains("s3cret-value"), "{text}");
        }
    }

    #[tokio::test]
    async fn background_stages_can_be_spawned() {
        // `up` runs the stages after `waitFor` in a spawned task: the future must be Send.
        let executor = std::sync::Arc::new(Recorder::default());
        let stages = plan(
            json!({"postAttachCommands": ["late"]}),
            BringUpKind::Running,
        )
        .background;
        let ctx = context();
        let task = tokio::spawn({
            let executor = executor.clone();
            async move { run_stages(&executor, &stages, &ctx, &crate::progress::NoopReporter).await }
        });
        let report = task.await.unwrap().unwrap();
        assert_eq!(report.runs.len(), 1);
        assert_eq!(executor.events(), vec!["start late", "end late"]);
    }

    #[test]
    fn report_serialises_for_the_context_file() {
        let report = LifecycleReport {
            runs: vec![HookRun {
                hook: LifecycleHook::PostCreateCommand,
                source: 1,
                origin: "devcontainer.json".into(),
                entry: None,
                command: "npm ci".into(),
                exit_code: 0,
                duration_ms: 12,
                output_tail: Vec::new(),
            }],
            skipped: vec![SkippedHook {
                hook: LifecycleHook::PostAttachCommand,
                reason: SkipReason::Flag("--skip-post-attach"),
            }],
            dotfiles: None,
        };
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            json!({
                "runs": [{"hook": "postCreateCommand", "source": 1, "origin": "devcontainer.json",
                          "command": "npm ci", "exitCode": 0, "durationMs": 12}],
                "skipped": [{"hook": "postAttachCommand", "reason": "flag", "flag": "--skip-post-attach"}]
            })
        );
    }
}

#[cfg(test)]
mod mask_line_tests {
    use super::*;

    /// A line cut in the middle of a secret value shows none of it; a long line of another
    /// source is cut (spec-note 0658).
    #[test]
    fn a_cut_line_never_shows_the_beginning_of_a_value() {
        let secret = "s3cr3t-value".to_string();
        let mask = SecretMask::new([&secret]);
        let body = format!("{}{}", "a".repeat(MAX_OUTPUT_LINE - 6), &secret[..6]);
        let shown = mask_line(&mask, &format!("{body}{LINE_CUT_MARKER}"));
        assert!(!shown.contains("s3cr3t"), "{}", &shown[shown.len() - 60..]);
        assert!(shown.ends_with(&format!("a{LINE_CUT_MARKER}")));
        let long = "b".repeat(3 * MAX_OUTPUT_LINE);
        let shown = mask_line(&mask, &long);
        assert_eq!(shown.len(), MAX_OUTPUT_LINE + LINE_CUT_MARKER.len());
        assert_eq!(mask_line(&mask, "x s3cr3t-value y"), "x ******** y");
    }
}

#[cfg(test)]
mod capture_tests {
    use super::*;

    /// An internal command's flood of lines is kept within the bound (spec-note 0658).
    #[test]
    fn a_capture_keeps_at_most_its_cap() {
        let capture = Capture::default();
        let line = "x".repeat(60 * 1024);
        for _ in 0..(3 * CAPTURE_CAP / line.len()) {
            capture.report(Event::Output(line.clone()));
        }
        capture.report(Event::Output("late".into()));
        let lines = capture.into_lines();
        assert!(lines.iter().map(String::len).sum::<usize>() <= CAPTURE_CAP);
        assert_ne!(
            lines.last().map(String::as_str),
            Some("late"),
            "nothing after the cap"
        );
    }

    /// Attack 27, R2: empty lines cost their newline, so a flood of them stops at the cap.
    #[test]
    fn a_flood_of_empty_lines_stops_at_the_cap() {
        let capture = Capture::default();
        for _ in 0..(CAPTURE_CAP + 10) {
            capture.report(Event::Output(String::new()));
        }
        assert_eq!(capture.into_lines().len(), CAPTURE_CAP);
    }
}
