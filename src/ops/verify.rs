//! `devcell verify`: the verification commands of an environment (its record's `verify`, or
//! the configuration's `customizations.devcell.verify`) run in the workspace's running
//! container, one after the other, each reported with its exit code, duration and the tail
//! of its output (spec-note 0520): the CI step "did the agent's work pass in the agent's
//! environment".

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::AsyncWrite;

use crate::lifecycle::marker::{
    HOOK_ID_ENV, HOOK_WRAPPER_NAME, HOOK_WRAPPER_SCRIPT, REAP_SCRIPT, RUNNING_FOLDER_ENV,
};
use crate::ops::error::Result;
use crate::ops::exec::{ExecOptions, ExecStreams, exec_with};
use crate::progress::{Event, Reporter};

/// How much of each of a command's streams is kept (its end), in bytes: the rest is counted
/// and dropped as it arrives, so a command printing without end costs the host no memory
/// (issue 25, class 6).
const TAIL_BYTES: usize = 4096;

/// How long one verification command may run unless the caller says otherwise: a real test
/// suite takes minutes; `sleep infinity` must not hold devcell (or a CI job) for ever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How long stopping a command past its deadline may take (the stop script gives the
/// process group 10 s between `SIGTERM` and `SIGKILL`).
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// One verification command's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandResult {
    /// The command, run with `sh -c`.
    pub command: String,
    /// Its exit code (128 + n when killed by signal n; 124 when stopped at its deadline).
    pub exit_code: i64,
    /// How long it ran.
    pub duration_ms: u64,
    /// The last [`TAIL_BYTES`] of its stdout, then of its stderr (lossy UTF-8), each after a
    /// marker line naming the bytes dropped before it, when any were.
    pub output_tail: String,
    /// The bytes of output not kept (stdout and stderr together).
    pub dropped_bytes: u64,
    /// Whether the command ran past its deadline and was stopped.
    pub timed_out: bool,
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

/// A writer that keeps only the last `cap` bytes written to it and counts the others: the
/// bound on what a verification command's output costs the host.
#[derive(Debug)]
struct Tail {
    kept: VecDeque<u8>,
    cap: usize,
    dropped: u64,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Self {
            kept: VecDeque::with_capacity(cap.min(64 * 1024)),
            cap,
            dropped: 0,
        }
    }

    /// Keeps the end of `bytes` (linear in `bytes`, whatever was kept before).
    fn push(&mut self, bytes: &[u8]) {
        let skip = bytes.len().saturating_sub(self.cap);
        self.dropped += skip as u64;
        self.kept.extend(&bytes[skip..]);
        let over = self.kept.len().saturating_sub(self.cap);
        self.kept.drain(..over);
        self.dropped += over as u64;
    }

    /// What was kept, as text, after a marker line when anything was dropped.
    fn text(&self, stream: &str) -> String {
        let (a, b) = self.kept.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        let kept = String::from_utf8_lossy(&bytes);
        if self.dropped == 0 {
            kept.into_owned()
        } else {
            format!(
                "[devcell: {} earlier bytes of {stream} dropped]\n{kept}",
                self.dropped
            )
        }
    }
}

impl AsyncWrite for Tail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut().push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The argv running `command` under the hook wrapper (spec-note 0423), which records its
/// process group in `folder` as `id`, so [`stop_argv`] can stop it and everything it started.
/// `folder` and `id` are devcell's own (hex and ASCII), never the repository's.
fn wrapped_argv(folder: &str, id: &str, command: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "export {RUNNING_FOLDER_ENV}='{folder}' {HOOK_ID_ENV}='{id}'\n{HOOK_WRAPPER_SCRIPT}"
        ),
        HOOK_WRAPPER_NAME.into(),
        "sh".into(),
        "-c".into(),
        command.into(),
    ]
}

/// The argv stopping every process group [`wrapped_argv`] recorded in `folder`
/// (`SIGTERM`, up to 10 s, `SIGKILL`), then removing the folder.
fn stop_argv(folder: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "export {RUNNING_FOLDER_ENV}='{folder}'\n{REAP_SCRIPT}\nrmdir \"${RUNNING_FOLDER_ENV}\" 2>/dev/null; :"
        ),
    ]
}

/// Runs each of `commands` with `sh -c` in the running dev container of `opts.target`
/// (as `exec` does: the remote user, folder and environment), every one even after a
/// failure. Each may run for at most `timeout`: past it, its process group is stopped in the
/// container and its result says `timed_out` (exit code 124). Only the last [`TAIL_BYTES`]
/// of each output stream are kept.
///
/// Errors: as [`crate::ops::exec::exec`] (no running container, the engine).
pub async fn verify(
    opts: &ExecOptions,
    commands: &[String],
    timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<VerifyReport> {
    let engine = crate::engine::connect().await?;
    // One folder per run (devcell's process id and the time): the pid files of this run only.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let folder = format!("/tmp/.devcell-verify-{}-{stamp}", std::process::id());
    let mut results = Vec::with_capacity(commands.len());
    for (index, command) in commands.iter().enumerate() {
        reporter.report(Event::Status(format!("verify: {command}")));
        let one = ExecOptions {
            argv: wrapped_argv(&folder, &format!("verify-{index}"), command),
            tty: false,
            tty_size: None,
            ..opts.clone()
        };
        let (mut stdout, mut stderr) = (Tail::new(TAIL_BYTES), Tail::new(TAIL_BYTES));
        let started = Instant::now();
        let run = exec_with(
            &*engine,
            &one,
            ExecStreams {
                stdin: None,
                stdout: Box::new(&mut stdout),
                stderr: Box::new(&mut stderr),
            },
            reporter,
        );
        let (exit_code, timed_out) = match tokio::time::timeout(timeout, run).await {
            Ok(code) => (code?, false),
            Err(_) => {
                reporter.report(warning(format!(
                    "verify: `{command}` ran past its {} s deadline; stopping it",
                    timeout.as_secs()
                )));
                stop(&*engine, opts, &folder, reporter).await;
                (124, true)
            }
        };
        let mut output_tail = stdout.text("stdout");
        output_tail.push_str(&stderr.text("stderr"));
        results.push(CommandResult {
            command: command.clone(),
            exit_code,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            output_tail,
            dropped_bytes: stdout.dropped + stderr.dropped,
            timed_out,
        });
    }
    Ok(VerifyReport { results })
}

/// A warning event without a location.
fn warning(message: String) -> Event {
    Event::Warning(crate::diagnostics::Warning {
        location: None,
        message,
    })
}

/// Stops the process groups of the commands recorded in `folder` (a command past its
/// deadline), within [`STOP_TIMEOUT`]; a failure is a warning: the report already says the
/// command timed out.
async fn stop(
    engine: &dyn crate::engine::Engine,
    opts: &ExecOptions,
    folder: &str,
    reporter: &dyn Reporter,
) {
    let stopper = ExecOptions {
        argv: stop_argv(folder),
        tty: false,
        tty_size: None,
        ..opts.clone()
    };
    let (mut out, mut err) = (Tail::new(TAIL_BYTES), Tail::new(TAIL_BYTES));
    let run = exec_with(
        engine,
        &stopper,
        ExecStreams {
            stdin: None,
            stdout: Box::new(&mut out),
            stderr: Box::new(&mut err),
        },
        reporter,
    );
    match tokio::time::timeout(STOP_TIMEOUT, run).await {
        Ok(Ok(0)) => {}
        Ok(Ok(code)) => reporter.report(warning(format!(
            "verify: stopping the command exited {code}: {}",
            err.text("stderr").trim()
        ))),
        Ok(Err(e)) => reporter.report(warning(format!("verify: could not stop the command: {e}"))),
        Err(_) => reporter.report(warning(
            "verify: stopping the command did not end in time".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;

    #[test]
    fn the_tail_keeps_the_end_and_a_report_passes_only_when_all_do() {
        let mut short = Tail::new(TAIL_BYTES);
        short.push(b"ok\n");
        assert_eq!(short.text("stdout"), "ok\n");
        let result = |code| CommandResult {
            command: "c".into(),
            exit_code: code,
            duration_ms: 1,
            output_tail: String::new(),
            dropped_bytes: 0,
            timed_out: false,
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

    /// Output without end, in one write or in many: only the last [`TAIL_BYTES`] are kept,
    /// the rest counted, and the text says so first (before, everything was kept in memory).
    #[test]
    fn the_tail_is_bounded_and_names_what_it_dropped() {
        let mut one = Tail::new(TAIL_BYTES);
        let mut big = vec![b'a'; 3 * TAIL_BYTES];
        big.extend_from_slice(b"END");
        one.push(&big);
        assert_eq!(one.kept.len(), TAIL_BYTES);
        assert_eq!(one.dropped, (2 * TAIL_BYTES + 3) as u64);
        let text = one.text("stdout");
        assert!(
            text.starts_with(&format!(
                "[devcell: {} earlier bytes of stdout dropped]\n",
                2 * TAIL_BYTES + 3
            )),
            "{text}"
        );
        assert!(text.ends_with("aEND"), "{text}");

        let mut many = Tail::new(TAIL_BYTES);
        for i in 0..100_000u32 {
            many.push(format!("{i:08}").as_bytes());
        }
        assert_eq!(many.kept.len(), TAIL_BYTES);
        assert_eq!(many.dropped, (800_000 - TAIL_BYTES) as u64);
        assert!(many.text("stderr").ends_with("00099999"));
    }

    /// The wrapped command runs as the verify command would, and the stop script ends its
    /// whole process group (a child in the background included) and removes the folder: what
    /// a command past its deadline gets. Run with the host's `/bin/sh`.
    #[test]
    fn a_wrapped_command_and_its_children_are_stopped_by_the_stop_script() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("run");
        let folder = folder.to_str().unwrap();
        let marker = dir.path().join("child-pid");
        let command = format!("sleep 300 & echo $! > '{}'; wait", marker.display());
        let argv = wrapped_argv(folder, "verify-0", &command);
        let child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .process_group(0)
            .spawn()
            .unwrap();
        // reaped as soon as it ends, as the engine reaps an exec's process
        let waiter = std::thread::spawn(move || {
            let mut child = child;
            child.wait().unwrap()
        });
        let pidfile = std::path::Path::new(folder).join("verify-0.pid");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(pidfile.exists() && marker.exists()) {
            assert!(Instant::now() < deadline, "the wrapper wrote no pid file");
            std::thread::sleep(Duration::from_millis(20));
        }
        let sleeper = std::fs::read_to_string(&marker).unwrap();
        let sleeper = sleeper.trim();
        assert!(std::path::Path::new(&format!("/proc/{sleeper}")).exists());

        let stop = stop_argv(folder);
        let out = std::process::Command::new(&stop[0])
            .args(&stop[1..])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("stopped verify-0"),
            "{out:?}"
        );
        let status = waiter.join().unwrap();
        assert!(!status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(Instant::now() < deadline, "the background child still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !std::path::Path::new(folder).exists(),
            "the folder was left"
        );
    }
}
