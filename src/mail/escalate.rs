//! The user's escalation command (`[mail] escalate_command`, spec-note 0533): run on the host
//! once per message the policy escalates, after the message is held in the log.
//!
//! The message's text is the sandbox's: it reaches the command only as environment values of
//! a program started without a shell (never interpolated into a command line), with nothing
//! else of devcell's environment. The command runs in its own process group, with a deadline
//! (past it the group is killed) and its output bounded; what happened is logged. Whatever the
//! command does, the message stays held for the host user: the command only tells.

use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{MailError, Result};
use super::model::{EscalationEnd, GroupName, Message, TaskName};
use crate::settings::MailSettings;

/// Longest deadline: the sender's answer waits for the command, and the in-container client
/// gives up on a read after 60 s.
pub const MAX_TIMEOUT_SECONDS: u64 = 50;
/// Bytes kept of each of the command's stdout and stderr (the rest is read and counted).
pub const KEPT_OUTPUT_BYTES: usize = 1024;
/// `PATH` of the command: the system's folders only, not the user's or devcell's.
pub const COMMAND_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The compiled `escalate_command`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    argv: Vec<String>,
    deadline: Duration,
}

/// What one run of the command did, as logged (`escalation-ran`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EscalationRun {
    /// The command's program (`argv[0]`).
    pub command: String,
    /// How it ended (its keys at this level, as before they were one type).
    #[serde(flatten)]
    pub end: EscalationEnd,
    /// How long it ran, in milliseconds.
    pub millis: u64,
    /// The first [`KEPT_OUTPUT_BYTES`] of its stdout (lossy UTF-8).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    /// The first [`KEPT_OUTPUT_BYTES`] of its stderr (lossy UTF-8).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
    /// All it wrote on both, in bytes.
    #[serde(default)]
    pub output_bytes: u64,
}

impl EscalationRun {
    /// Whether the command ran to a zero exit within its deadline.
    pub fn succeeded(&self) -> bool {
        self.end.exit == Some(0) && !self.end.timed_out
    }
}

impl Escalation {
    /// The command of `[mail]`, `None` when `escalate_command` is empty.
    ///
    /// # Errors
    /// [`MailError::Policy`] for an empty program, a relative path with a `/` (it would depend
    /// on the folder devcell runs in), an argument with a NUL, or a timeout outside 1–50 s.
    pub fn from_settings(settings: &MailSettings) -> Result<Option<Escalation>> {
        let bad = |field: &str, why: String| MailError::Policy {
            field: field.to_string(),
            why,
        };
        let Some(program) = settings.escalate_command.first() else {
            return Ok(None);
        };
        if program.is_empty() {
            return Err(bad(
                "escalate_command[0]",
                "empty (expected a program: an absolute path or a name found on /usr/local/bin:/usr/bin:/bin)".into(),
            ));
        }
        if program.contains('/') && !program.starts_with('/') {
            return Err(bad(
                "escalate_command[0]",
                format!(
                    "`{program}` is a relative path (expected an absolute path or a bare name)"
                ),
            ));
        }
        if let Some(i) = settings
            .escalate_command
            .iter()
            .position(|a| a.contains('\0'))
        {
            return Err(bad(
                &format!("escalate_command[{i}]"),
                "has a NUL character".into(),
            ));
        }
        let secs = settings.escalate_timeout_seconds;
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&secs) {
            return Err(bad(
                "escalate_timeout_seconds",
                format!(
                    "{secs} (expected 1 to {MAX_TIMEOUT_SECONDS} seconds: the sender waits for it)"
                ),
            ));
        }
        Ok(Some(Escalation {
            argv: settings.escalate_command.clone(),
            deadline: Duration::from_secs(secs),
        }))
    }

    /// The same command with another deadline (tests).
    pub fn with_deadline(mut self, deadline: Duration) -> Escalation {
        self.deadline = deadline;
        self
    }

    /// The environment the command gets for `message` escalated to `to`: these variables
    /// and `PATH` ([`COMMAND_PATH`]), nothing else.
    pub fn environment(
        group: &GroupName,
        message: &Message,
        to: &[TaskName],
    ) -> Vec<(&'static str, String)> {
        let to: Vec<&str> = to.iter().map(TaskName::as_str).collect();
        vec![
            ("PATH", COMMAND_PATH.to_string()),
            ("DEVCELL_MAIL_GROUP", group.as_str().to_string()),
            ("DEVCELL_MAIL_ID", message.id.as_str().to_string()),
            ("DEVCELL_MAIL_FROM", message.from.to_string()),
            ("DEVCELL_MAIL_TO", to.join(",")),
            ("DEVCELL_MAIL_TYPE", message.kind.as_str().to_string()),
            ("DEVCELL_MAIL_SUBJECT", message.subject.clone()),
        ]
    }

    /// Runs the command for `message` (escalated to `to`) to its end or its deadline; never
    /// fails (what went wrong is in the result).
    pub fn run(&self, group: &GroupName, message: &Message, to: &[TaskName]) -> EscalationRun {
        let mut command = Command::new(&self.argv[0]);
        command
            .args(&self.argv[1..])
            .env_clear()
            .envs(Escalation::environment(group, message, to))
            .current_dir("/");
        let mut run = run_bounded(&mut command, self.deadline);
        run.command.clone_from(&self.argv[0]);
        run
    }
}

/// Runs `command` with [`crate::process::run_bounded_tied`] (its own process group, killed
/// if devcell ends while it runs, `SIGKILL` included; no stdin, the first
/// [`KEPT_OUTPUT_BYTES`] of each pipe kept, the rest counted) for at most `deadline`, as the
/// log records it.
fn run_bounded(command: &mut Command, deadline: Duration) -> EscalationRun {
    let run = match crate::process::run_bounded_tied(command, None, deadline, KEPT_OUTPUT_BYTES) {
        Ok(run) => run,
        Err(e) => {
            return EscalationRun {
                end: EscalationEnd {
                    error: Some(format!("could not start it: {e}")),
                    ..EscalationEnd::default()
                },
                ..EscalationRun::default()
            };
        }
    };
    use std::os::unix::process::ExitStatusExt as _;
    EscalationRun {
        command: String::new(),
        end: EscalationEnd {
            exit: run.status.and_then(|s| s.code()),
            signal: run.status.and_then(|s| s.signal()),
            timed_out: run.timed_out,
            error: None,
        },
        millis: u64::try_from(run.elapsed.as_millis()).unwrap_or(u64::MAX),
        stdout: String::from_utf8_lossy(&run.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&run.stderr).into_owned(),
        output_bytes: run.stdout_bytes + run.stderr_bytes,
    }
}

#[cfg(test)]
mod tests;
