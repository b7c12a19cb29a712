//! What a run of hooks did: the commands that ran, the hooks skipped and why, and the failed
//! stage a [`LifecycleError::HookFailed`](super::LifecycleError::HookFailed) carries.

use std::fmt;

use serde::Serialize;

use super::hook_name::LifecycleHook;

/// One command that ran: a source's command, or one entry of an object-form command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    /// The hook.
    pub hook: LifecycleHook,
    /// 0-based index of the source (see [`SourcedCommand::source`](super::SourcedCommand::source)).
    pub source: usize,
    /// The source as named in messages (`devcontainer.json`, `Feature '…'`, or its path).
    pub origin: String,
    /// The object-form entry name, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// One-line summary of the command, secret values masked.
    pub command: String,
    /// Exit code (128 + n when killed by signal n).
    pub exit_code: i64,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Last [`OUTPUT_TAIL_LINES`](super::runner::OUTPUT_TAIL_LINES) output lines, kept only when the command failed.
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
    /// The dotfiles step (`--dotfiles-repository`), when it was asked for and reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dotfiles: Option<DotfilesRun>,
}

impl LifecycleReport {
    pub(super) fn extend(&mut self, other: LifecycleReport) {
        self.runs.extend(other.runs);
        self.skipped.extend(other.skipped);
        self.dotfiles = self.dotfiles.take().or(other.dotfiles);
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

/// Why a hook is not in a plan, or was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "reason", content = "flag")]
pub enum SkipReason {
    /// No source configures it (or only empty values).
    NotConfigured,
    /// A flag excludes it (the flag's name, e.g. `--skip-post-attach`).
    Flag(&'static str),
    /// Its marker shows it already ran for this container (or this start).
    AlreadyRan,
}

/// A hook that is not run, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SkippedHook {
    /// The hook.
    pub hook: LifecycleHook,
    /// Why.
    #[serde(flatten)]
    pub reason: SkipReason,
}

impl fmt::Display for HookFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed: Vec<&HookRun> = self.failed_runs().collect();
        let subject = format!(
            "`{}` from {} (source {})",
            self.hook, self.origin_label, self.source
        );
        match failed.as_slice() {
            [one] if one.entry.is_none() => {
                write!(f, "{subject} failed with exit code {}", one.exit_code)
            }
            runs => {
                let list: Vec<String> = runs
                    .iter()
                    .map(|r| {
                        format!(
                            "`{}` (exit code {})",
                            r.entry.as_deref().unwrap_or("?"),
                            r.exit_code
                        )
                    })
                    .collect();
                let noun = if list.len() == 1 { "entry" } else { "entries" };
                write!(f, "{noun} {} of {subject} failed", list.join(", "))
            }
        }
    }
}

/// What the dotfiles step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DotfilesOutcome {
    /// Cloned (or found) and installed in this run.
    Installed,
    /// Its marker shows they were installed in this home before: nothing ran.
    AlreadyInstalled,
    /// The clone or the install failed (the bring-up goes on; it runs again next time).
    Failed,
}

/// The dotfiles step of a bring-up, for the result JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DotfilesRun {
    /// The repository cloned, as shown (a token in its URL hidden).
    pub repository: String,
    /// `--dotfiles-target-path` as given.
    pub target_path: String,
    /// What happened.
    pub outcome: DotfilesOutcome,
    /// The install's exit code; `None` when nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Its last output lines (secrets masked), kept only when it failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_tail: Vec<String>,
}
