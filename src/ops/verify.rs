//! `devcell verify`: the verification commands of an environment (its record's `verify`, or
//! the configuration's `customizations.devcell.verify`) run in the workspace's running
//! container, one after the other, each reported with its exit code, duration and the tail
//! of its output (spec-note 0520): the CI step "did the agent's work pass in the agent's
//! environment".

use std::time::Instant;

use serde::Serialize;

use crate::ops::error::Result;
use crate::ops::exec::{ExecOptions, ExecStreams, exec_with};
use crate::progress::{Event, Reporter};

/// How much of a command's output is kept (its end), in bytes.
const TAIL_BYTES: usize = 4096;

/// One verification command's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandResult {
    /// The command, run with `sh -c`.
    pub command: String,
    /// Its exit code (128 + n when killed by signal n).
    pub exit_code: i64,
    /// How long it ran.
    pub duration_ms: u64,
    /// The last [`TAIL_BYTES`] of its stdout, then of its stderr (lossy UTF-8).
    pub output_tail: String,
}

/// The results of every verification command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// One result per command, in order.
    pub results: Vec<CommandResult>,
}

impl VerifyReport {
    /// Whether every command exited 0 (and there was at least one).
    pub fn passed(&self) -> bool {
        !self.results.is_empty() && self.results.iter().all(|r| r.exit_code == 0)
    }
}

/// The end of `bytes`, at most [`TAIL_BYTES`], as text.
fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Runs each of `commands` with `sh -c` in the running dev container of `opts.target`
/// (as `exec` does: the remote user, folder and environment), every one even after a
/// failure.
///
/// Errors: as [`crate::ops::exec::exec`] (no running container, the engine).
pub async fn verify(
    opts: &ExecOptions,
    commands: &[String],
    reporter: &dyn Reporter,
) -> Result<VerifyReport> {
    let engine = crate::engine::connect().await?;
    let mut results = Vec::with_capacity(commands.len());
    for command in commands {
        reporter.report(Event::Status(format!("verify: {command}")));
        let one = ExecOptions {
            argv: vec!["sh".into(), "-c".into(), command.clone()],
            tty: false,
            tty_size: None,
            ..opts.clone()
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let started = Instant::now();
        let exit_code = exec_with(
            &*engine,
            &one,
            ExecStreams {
                stdin: None,
                stdout: Box::new(&mut stdout),
                stderr: Box::new(&mut stderr),
            },
            reporter,
        )
        .await?;
        let mut output_tail = tail(&stdout);
        output_tail.push_str(&tail(&stderr));
        results.push(CommandResult {
            command: command.clone(),
            exit_code,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            output_tail,
        });
    }
    Ok(VerifyReport { results })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_end_and_a_report_passes_only_when_all_do() {
        let long = vec![b'x'; TAIL_BYTES + 10];
        assert_eq!(tail(&long).len(), TAIL_BYTES);
        assert_eq!(tail(b"ok\n"), "ok\n");
        let result = |code| CommandResult {
            command: "c".into(),
            exit_code: code,
            duration_ms: 1,
            output_tail: String::new(),
        };
        assert!(
            VerifyReport {
                results: vec![result(0), result(0)]
            }
            .passed()
        );
        assert!(
            !VerifyReport {
                results: vec![result(0), result(3)]
            }
            .passed()
        );
        assert!(!VerifyReport { results: vec![] }.passed());
    }
}
