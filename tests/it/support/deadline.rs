//! A deadline for every program a test waits for (the engine CLI, Compose, the reference CLI):
//! a `docker exec` whose container's shim died never returns, and one such test held CI until
//! the job's own limit. Run through [`Bounded::bounded_output`], the program gets its own process
//! group, and past [`cli_deadline`] the whole group is killed and the call fails with an error
//! that names the command, so a hang becomes a failure of the test that caused it.

use std::io;
use std::process::{Command, Output};
use std::time::Duration;

/// How long a test waits for one engine CLI call unless [`DEADLINE_VAR`] says otherwise: far
/// above the slowest real call (a cold `docker build` of a test image under load), far below
/// CI's own limit.
pub const CLI_DEADLINE: Duration = Duration::from_secs(300);

/// The variable that sets [`cli_deadline`], in whole seconds.
pub const DEADLINE_VAR: &str = "DEVCELL_TEST_CLI_DEADLINE";

/// How long a test waits for one run of devcell or of the reference CLI, which do whole
/// builds (Features, a Compose project) that one engine CLI call does not.
pub const LONG_DEADLINE: Duration = Duration::from_secs(20 * 60);

/// [`CLI_DEADLINE`], or the seconds in [`DEADLINE_VAR`].
pub fn cli_deadline() -> Duration {
    devcell::process::deadline_from_env(DEADLINE_VAR, CLI_DEADLINE)
}

/// `program arg…` as a reader would type it (for messages).
pub fn shown(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `command` like [`Command::output`] (stdin closed, stdout and stderr captured) for at
/// most `deadline`; past it the program's process group is killed and the error (kind
/// [`io::ErrorKind::TimedOut`]) names the command.
pub fn output_within(command: &mut Command, deadline: Duration) -> io::Result<Output> {
    run(command, None, deadline)
}

/// [`output_within`] with `input` written to the program's stdin (then closed).
pub fn input_within(command: &mut Command, input: &[u8], deadline: Duration) -> io::Result<Output> {
    run(command, Some(input), deadline)
}

fn run(command: &mut Command, input: Option<&[u8]>, deadline: Duration) -> io::Result<Output> {
    let named = shown(command);
    devcell::process::output_within_std(command, input, deadline).map_err(|e| {
        if e.kind() == io::ErrorKind::TimedOut {
            io::Error::new(io::ErrorKind::TimedOut, format!("`{named}` {e}"))
        } else {
            e
        }
    })
}

/// [`Command::output`] and [`Command::status`] with the test deadline ([`cli_deadline`]).
pub trait Bounded {
    /// [`output_within`] with [`cli_deadline`].
    fn bounded_output(&mut self) -> io::Result<Output>;
    /// The exit status of [`Bounded::bounded_output`] (the output is dropped).
    fn bounded_status(&mut self) -> io::Result<std::process::ExitStatus>;
    /// [`output_within`] with [`LONG_DEADLINE`]: for devcell and the reference CLI.
    fn long_output(&mut self) -> io::Result<Output>;
}

impl Bounded for Command {
    fn bounded_output(&mut self) -> io::Result<Output> {
        output_within(self, cli_deadline())
    }

    fn bounded_status(&mut self) -> io::Result<std::process::ExitStatus> {
        self.bounded_output().map(|o| o.status)
    }

    fn long_output(&mut self) -> io::Result<Output> {
        output_within(self, LONG_DEADLINE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether process `pid` is still there (and not a zombie waiting for its reaper).
    fn alive(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| !r.trim_start().starts_with('Z'))
        })
    }

    /// The hang CI saw, in small: a program (and a child of its own) that never returns. The
    /// call fails at the deadline naming the command, and the child is killed with it.
    #[test]
    fn a_hung_program_fails_at_the_deadline_naming_the_command_and_its_group_dies() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child.pid");
        let script = format!("sleep 600 & echo $! > {}; wait", pid_file.display());
        let started = std::time::Instant::now();
        let err = output_within(
            Command::new("sh").args(["-c", &script]),
            Duration::from_millis(500),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(
            err.to_string().contains(&format!("`sh -c {script}`")),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(60), "returned late");
        let child = std::fs::read_to_string(&pid_file).unwrap();
        let child = child.trim();
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            !alive(child)
        });
        assert!(
            gone,
            "the program's own child {child} outlived the deadline"
        );
    }

    #[test]
    fn a_program_within_the_deadline_is_its_output() {
        let out = Command::new("sh")
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .bounded_output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }
}
