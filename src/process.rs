//! Programs devcell starts and waits for (the Compose CLI, Docker credential helpers, host
//! git): each runs in its own process group, dies with devcell, and has a deadline that fits
//! its job (spec-note 0425).
//!
//! - [`contain`] / [`contain_tokio`]: a new process group (`setpgid(0, 0)`), so the program's
//!   own children can be killed with it (`kill_on_drop` for tokio).
//! - While it runs, its group is known ([`kill_running`]): when a signal ends devcell
//!   (`SIGTERM`, `SIGINT`, `SIGHUP`; the command line's handler) every such group gets
//!   `SIGKILL` on the way out. A devcell killed with `SIGKILL` cannot do that (the crate has no
//!   `unsafe`, so no `PR_SET_PDEATHSIG` in a `pre_exec`): its programs then end with their
//!   deadline or their work, except those run with [`run_bounded_tied`] (the mail escalation
//!   command), whose group a watchdog kills when devcell's end closes its pipe.
//! - [`output_within`] (tokio) and [`output_within_std`]: run a contained program to its end,
//!   for at most a deadline; past it, or when the future is dropped (a stop request), the whole
//!   group gets `SIGKILL` (a Compose that ignored `SIGTERM` for minutes while it expanded a YAML
//!   alias bomb was seen).

use std::io;
use std::process::Output;
use std::time::Duration;

pub mod bounded;

pub use bounded::{BoundedRun, run_bounded, run_bounded_tied};

/// The variable that sets the deadline of Compose's quick commands (`config`, `ps`, `version`),
/// in seconds ([`deadline_from_env`]).
pub const COMPOSE_CONFIG_TIMEOUT_VAR: &str = "DEVCELL_COMPOSE_CONFIG_TIMEOUT";

/// The deadline of Compose's quick commands unless [`COMPOSE_CONFIG_TIMEOUT_VAR`] says
/// otherwise: `config` of a real project takes well under a second; a minute is generous.
pub const COMPOSE_CONFIG_TIMEOUT: Duration = Duration::from_secs(60);

/// The variable that sets the deadline of Compose's long commands (`up`, `build`, `start`,
/// `stop`, `down`), in whole seconds.
pub const COMPOSE_TIMEOUT_VAR: &str = "DEVCELL_COMPOSE_TIMEOUT";

/// The deadline of Compose's long commands unless [`COMPOSE_TIMEOUT_VAR`] says otherwise: a
/// cold build of a real project takes minutes, but a health check that never passes (a
/// `depends_on` on `service_healthy`) or a `stop_grace_period` of days must not hold devcell
/// for ever (issue 25, class 6).
pub const COMPOSE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The deadline of a Docker credential helper (`docker-credential-<helper> get`): it may ask
/// the user to unlock a keychain, so it gets longer than a configuration read.
pub const CREDENTIAL_HELPER_TIMEOUT: Duration = Duration::from_secs(60);

/// `default`, or the whole seconds of variable `var` when it is set to a positive integer.
pub fn deadline_from_env(var: &str, default: Duration) -> Duration {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(default, Duration::from_secs)
}

/// Whether process `pid` still runs with each of `words` among its arguments
/// (`/proc/<pid>/cmdline`): how devcell tells a program it started in the background (the egress
/// proxy, a detached `ports` forwarder) from an exited one or a process that reused its pid.
/// An exited pid has no command line, a zombie (exited, not yet reaped) an empty one: neither
/// carries anything.
pub fn carries(pid: u32, words: &[&str]) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    words.iter().all(|w| args.contains(&w.as_bytes()))
}

/// Stops process `pid` while it [`carries`] `words` (a program devcell started in the
/// background: the egress proxy, a detached `ports` forwarder): `SIGTERM`, then `SIGKILL` if it
/// still carries them after 2 s. A pid that no longer carries them (exited, or reused by
/// another program) is never signalled. Returns whether it carried them at first.
pub async fn stop_carrier(pid: u32, words: &[&str]) -> bool {
    let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    if !carries(pid, words) {
        return false;
    }
    let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
    for _ in 0..100 {
        if !carries(pid, words) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if carries(pid, words) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
    true
}

/// Removes from `base` each folder named `<prefix><pid>-…` that this user owns and whose
/// process no longer runs: the private folder of a devcell that was killed before it could
/// remove it (a Compose working folder, the copies of a granted host command). A link, a file,
/// another user's entry, another name and the folder of a process that still runs (this one
/// included) are never touched. Failures are ignored: the next run tries again.
pub fn sweep_dead_pid_folders(base: &std::path::Path, prefix: &str) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // `symlink_metadata`: a link is not a directory, whatever it points at
        let ours = std::fs::symlink_metadata(entry.path())
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == me);
        if ours
            && pid != std::process::id()
            && !std::path::Path::new("/proc").join(pid.to_string()).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Makes `command` run in its own process group (see the module docs).
pub fn contain(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt as _;
    command.process_group(0)
}

/// [`contain`] for a tokio command, which is also killed when dropped (`kill_on_drop`).
pub fn contain_tokio(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    command.process_group(0).kill_on_drop(true)
}

/// The process groups of the contained programs running now ([`GroupGuard`]s).
static LIVE: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Kills (`SIGKILL`) the process group of every contained program still running: what devcell
/// does on its way out when a signal ends it (`SIGTERM`, `SIGINT`, `SIGHUP`).
pub fn kill_running() {
    kill_groups(&LIVE.lock().map(|l| l.clone()).unwrap_or_default());
}

fn kill_groups(groups: &[i32]) {
    for &pgid in groups {
        if let Some(pgid) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

/// The process group of a [`contain`]ed program that runs (its leader `pid`): known to
/// [`kill_running`] and killed (`SIGKILL`) when dropped, unless [`GroupGuard::disarm`]ed once
/// the program ended (its leader not yet reaped, so the id is not reused).
pub struct GroupGuard(Option<rustix::process::Pid>);

impl GroupGuard {
    /// Tracks the group led by `pid` (a contained program's id; `None`: nothing).
    pub fn new(pid: Option<u32>) -> GroupGuard {
        let pid = pid
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let (Some(pid), Ok(mut live)) = (pid, LIVE.lock()) {
            live.push(pid.as_raw_nonzero().get());
        }
        GroupGuard(pid)
    }

    /// The program ended: its group is no longer devcell's to kill.
    pub fn disarm(&mut self) {
        if let Some(pid) = self.0.take() {
            forget(pid);
        }
    }
}

fn forget(pid: rustix::process::Pid) {
    if let Ok(mut live) = LIVE.lock() {
        live.retain(|&p| p != pid.as_raw_nonzero().get());
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            forget(pgid);
        }
    }
}

/// The error of a program stopped at its deadline (kind [`io::ErrorKind::TimedOut`]).
fn timed_out(deadline: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("did not finish within {} and was killed", shown(deadline)),
    )
}

/// `5 s`, or `300 ms` below a second.
pub fn shown(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} s", d.as_secs())
    }
}

/// Runs `command` ([`contain_tokio`]ed here, stdout and stderr captured) to its end, like
/// `output()`, for at most `deadline` (`None`: no deadline). Past the deadline, or when this
/// future is dropped first, the program's process group is killed.
///
/// Errors: the program cannot be started; it did not end within `deadline` (kind
/// [`io::ErrorKind::TimedOut`]).
pub async fn output_within(
    mut command: tokio::process::Command,
    deadline: Option<Duration>,
) -> io::Result<Output> {
    contain_tokio(&mut command)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn()?;
    let mut guard = GroupGuard::new(child.id());
    let out = match deadline {
        Some(d) => match tokio::time::timeout(d, child.wait_with_output()).await {
            Ok(out) => out,
            // the guard kills the group as it goes
            Err(_) => return Err(timed_out(d)),
        },
        None => child.wait_with_output().await,
    };
    guard.disarm();
    out
}

/// The most of each of stdout and stderr [`output_within_std`] keeps: far above what its callers
/// read (git's answers, a credential helper's JSON), a bound on what a program can make devcell
/// hold in memory.
pub const MAX_OUTPUT_BYTES: usize = 256 << 20;

/// Runs `command` ([`contain`]ed here, stdout and stderr captured; `input` written to its
/// stdin, which is then closed) to its end for at most `deadline`; past it, its process group
/// is killed. The run ends when the program has exited and its output pipes are closed: a
/// child it left holding them holds the run only to the deadline (then it is killed with the
/// group; one that left the group is left behind a second later). Blocks the calling thread.
///
/// Errors: the program cannot be started; it did not end within `deadline` (kind
/// [`io::ErrorKind::TimedOut`]); it wrote more than [`MAX_OUTPUT_BYTES`] on stdout or stderr
/// (kind [`io::ErrorKind::FileTooLarge`]: a cut answer is never returned as a whole one).
pub fn output_within_std(
    command: &mut std::process::Command,
    input: Option<&[u8]>,
    deadline: Duration,
) -> io::Result<Output> {
    output_bounded_std(command, input, deadline, MAX_OUTPUT_BYTES)
}

/// [`output_within_std`] keeping at most `keep` bytes of each pipe.
fn output_bounded_std(
    command: &mut std::process::Command,
    input: Option<&[u8]>,
    deadline: Duration,
    keep: usize,
) -> io::Result<Output> {
    let run = bounded::run_bounded(command, input, deadline, keep)?;
    if run.timed_out {
        return Err(timed_out(deadline));
    }
    if run.cut() {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "wrote {} bytes on stdout and {} on stderr, more than the {keep} kept of each",
                run.stdout_bytes, run.stderr_bytes
            ),
        ));
    }
    let status = run
        .status
        .ok_or_else(|| io::Error::other("its exit status could not be read"))?;
    Ok(Output {
        status,
        stdout: run.stdout,
        stderr: run.stderr,
    })
}

/// Process probes for tests of what runs processes (here and in `mail`).
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether process `pid` exists and is not a zombie.
    pub(crate) fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next().map(|st| st != "Z"))
                .unwrap_or(false)
        })
    }

    /// Waits (up to 10 s) for the pid a program wrote to `file`.
    pub(crate) fn pid_in(file: &std::path::Path) -> i32 {
        for _ in 0..1000 {
            if let Some(pid) = std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return pid;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no pid in {}", file.display());
    }

    pub(super) fn gone_soon(pid: i32) -> bool {
        (0..500).any(|_| {
            let gone = !alive(pid);
            if !gone {
                std::thread::sleep(Duration::from_millis(10));
            }
            gone
        })
    }

    /// A running program carries its arguments; one that did not get a word, an exited (and
    /// reaped) one and a pid that never ran carry nothing. Only a carrier is stopped.
    #[test]
    fn a_program_carries_its_arguments_while_it_runs() {
        // `read`, a builtin, keeps the shell itself waiting (no `exec` into another program);
        // its first line says it runs (before `exec`, the child carries the test's own words)
        let mut child = std::process::Command::new("sh")
            .args(["-c", "echo ready; read line", "marker", "the-key"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready, "ready\n");
        let pid = child.id();
        assert!(carries(pid, &["marker", "the-key"]));
        assert!(carries(pid, &["the-key"]));
        assert!(!carries(pid, &["marker", "another-key"]));
        assert!(!carries(pid, &["the-k"]), "a whole argument, not a prefix");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert!(
            !rt.block_on(stop_carrier(pid, &["marker", "another-key"])),
            "a pid that does not carry the words is not signalled"
        );
        assert!(carries(pid, &["marker", "the-key"]), "it still runs");
        assert!(rt.block_on(stop_carrier(pid, &["marker", "the-key"])));
        assert!(!child.wait().unwrap().success(), "ended by the signal");
        assert!(!carries(pid, &["marker"]), "an exited pid carries nothing");
        assert!(!carries(u32::MAX, &[]), "no such pid");
    }

    #[tokio::test]
    async fn a_program_past_its_deadline_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let mut command = tokio::process::Command::new("sh");
        // the program ignores SIGTERM and leaves a child that holds its stdout
        command
            .arg("-c")
            .arg("trap '' TERM; sleep 300 & echo $! > \"$0\"; wait")
            .arg(&pidfile);
        let err = output_within(command, Some(Duration::from_millis(300)))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(err.to_string().contains("within 300 ms"), "{err}");
        assert!(
            gone_soon(pid_in(&pidfile)),
            "the child of the program was killed"
        );
    }

    #[tokio::test]
    async fn a_dropped_run_kills_the_group_and_a_finished_one_is_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg("sleep 300 & echo $! > \"$0\"; wait")
            .arg(&pidfile);
        let run = output_within(command, None);
        let stopped = tokio::time::timeout(Duration::from_millis(300), run).await;
        assert!(stopped.is_err());
        assert!(
            gone_soon(pid_in(&pidfile)),
            "dropping the run killed the group"
        );

        let mut command = tokio::process::Command::new("sh");
        command.arg("-c").arg("echo out; echo err >&2; exit 3");
        let out = output_within(command, Some(Duration::from_secs(30)))
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn the_blocking_run_has_a_deadline_and_feeds_its_input() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg("sleep 300 & echo $! > \"$0\"; wait")
            .arg(&pidfile);
        let err = output_within_std(&mut command, None, Duration::from_millis(300)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(gone_soon(pid_in(&pidfile)));

        let mut command = std::process::Command::new("cat");
        let out =
            output_within_std(&mut command, Some(b"server"), Duration::from_secs(30)).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"server");
    }

    #[test]
    fn a_contained_program_has_its_own_group_and_is_killed_on_the_way_out() {
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg("read -r _ _ _ _ pgrp _ < /proc/$$/stat; echo $pgrp $$");
        let out = output_within_std(&mut command, None, Duration::from_secs(30)).unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(words.len(), 2, "{text}");
        assert_eq!(words[0], words[1], "a process group of its own: {text}");

        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let path = pidfile.clone();
        let runner = std::thread::spawn(move || {
            let mut command = std::process::Command::new("sh");
            command
                .arg("-c")
                .arg("echo $$ > \"$0\"; sleep 300 & echo $! >> \"$0\"; wait")
                .arg(&path);
            output_within_std(&mut command, None, Duration::from_secs(300))
        });
        let pids: Vec<i32> = loop {
            let text = std::fs::read_to_string(&pidfile).unwrap_or_default();
            let pids: Vec<i32> = text.lines().filter_map(|l| l.parse().ok()).collect();
            if pids.len() == 2 {
                break pids;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let group = pids[0];
        assert!(LIVE.lock().unwrap().contains(&group), "known while it runs");
        // what `kill_running` does, for this group only (other tests run beside this one)
        kill_groups(&[group]);
        assert!(gone_soon(pids[1]), "the running program's group was killed");
        assert!(runner.join().unwrap().is_ok(), "its run ended (killed)");
        assert!(
            !LIVE.lock().unwrap().contains(&group),
            "forgotten once ended"
        );
    }

    /// A program that exits leaving a child holding its output pipes: the run ends at the
    /// deadline with the child killed (it once waited for the child's end in the pipes'
    /// join); a child that left the group is left behind; an output past the bound is an
    /// error, not a cut answer.
    #[test]
    fn a_grandchild_holding_the_pipes_holds_the_blocking_run_only_to_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg("sleep 300 & echo $! > \"$0\"; echo started")
            .arg(&pidfile);
        let err = output_within_std(&mut command, None, Duration::from_millis(500)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(
            gone_soon(pid_in(&pidfile)),
            "the child holding the pipes was killed"
        );

        let escaped = dir.path().join("escaped.pid");
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg("setsid sleep 300 & echo $! > \"$0\"; echo started")
            .arg(&escaped);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(output_within_std(
                &mut command,
                None,
                Duration::from_millis(500),
            ));
        });
        let ended = finished.recv_timeout(Duration::from_secs(120));
        let pid = pid_in(&escaped);
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        );
        let err = ended.expect("the run ended though a child outside its group holds the pipes");
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::TimedOut);

        let mut command = std::process::Command::new("sh");
        command.arg("-c").arg("head -c 5000 /dev/zero");
        let err =
            output_bounded_std(&mut command, None, Duration::from_secs(30), 1000).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge, "{err}");
        let mut command = std::process::Command::new("sh");
        command.arg("-c").arg("head -c 1000 /dev/zero");
        let out = output_bounded_std(&mut command, None, Duration::from_secs(30), 1000).unwrap();
        assert_eq!(out.stdout.len(), 1000);
    }

    #[test]
    fn deadlines_from_the_environment() {
        let d = Duration::from_secs(7);
        assert_eq!(deadline_from_env("DEVCELL_TEST_NO_SUCH_DEADLINE_VAR", d), d);
    }
}
