//! The bounded runner: a [`super::contain`]ed program run to its end for at most a deadline,
//! its output read by threads (it never blocks on a full pipe) and kept up to a bound (the
//! rest read and counted), its input written by a thread (a program that never reads it
//! cannot hold the caller). The run ends when the program has exited **and** both output
//! pipes are closed; past the deadline the whole group is killed (a child the program left
//! holding the pipes included) and the pipes get one more second, after which their readers
//! are left behind (a child that left the group, `setsid`, cannot hold the caller either).
//! Used by the mail escalation command and [`super::output_within_std`] (spec-notes 0425, 0533).
//!
//! [`run_bounded_tied`] also ties the program's group to devcell's life: a watchdog joins the
//! group and blocks reading a pipe only devcell holds; when devcell ends, whatever ends it
//! (`SIGKILL` included, which no handler sees), the kernel closes the pipe and the watchdog
//! kills the group (`kill -9 0`). `PR_SET_PDEATHSIG` would need a `pre_exec` (`unsafe`, which
//! the crate forbids), would reach the leader only (not the children it started), and fires on
//! the death of the spawning thread rather than the process.

use std::io::{self, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long, after the group was killed, the run waits for the output pipes to close.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// What one bounded run saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoundedRun {
    /// How the program ended (`None`: it could not be waited for).
    pub status: Option<ExitStatus>,
    /// Whether it (or what held its output) was still running at the deadline: then its
    /// group was killed.
    pub timed_out: bool,
    /// The first bytes of its stdout, at most the run's bound.
    pub stdout: Vec<u8>,
    /// The first bytes of its stderr, at most the run's bound.
    pub stderr: Vec<u8>,
    /// All it wrote on stdout, in bytes.
    pub stdout_bytes: u64,
    /// All it wrote on stderr, in bytes.
    pub stderr_bytes: u64,
    /// How long the run took.
    pub elapsed: Duration,
}

impl BoundedRun {
    /// Whether more was written on either pipe than was kept.
    pub fn cut(&self) -> bool {
        self.stdout_bytes > self.stdout.len() as u64 || self.stderr_bytes > self.stderr.len() as u64
    }
}

/// One output pipe read to its end: the first `keep` bytes kept, all counted.
#[derive(Default)]
struct Drained {
    kept: Vec<u8>,
    total: u64,
}

fn drain(
    pipe: Option<impl io::Read + Send + 'static>,
    keep: usize,
    closed: mpsc::Sender<()>,
) -> Arc<Mutex<Drained>> {
    let out = Arc::new(Mutex::new(Drained::default()));
    let shared = Arc::clone(&out);
    std::thread::spawn(move || {
        if let Some(mut pipe) = pipe {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut d = shared.lock().unwrap_or_else(|e| e.into_inner());
                let room = keep.saturating_sub(d.kept.len());
                d.kept.extend_from_slice(&buf[..n.min(room)]);
                d.total += n as u64;
            }
        }
        let _ = closed.send(());
    });
    out
}

/// The watchdog of a tied run: `/bin/sh` (no user data reaches it) in the program's process
/// group, its stdin the read end of a pipe whose write end only devcell holds (std makes pipes
/// close-on-exec, so no other program devcell starts inherits it). `read` returns at the
/// pipe's end: then it kills its group, the program and all it started.
const WATCHDOG_SCRIPT: &str = "read -r _; kill -9 0";

/// A watchdog in a running program's group (see [`run_bounded_tied`]).
struct Lifeline {
    watchdog: Child,
    /// The write end: dropped (closed) by devcell's end, or after the watchdog was stopped.
    tie: Option<ChildStdin>,
}

impl Lifeline {
    /// Starts the watchdog in the group led by `pgid` (a program just spawned and not reaped,
    /// so its group exists). `None` when it cannot be started: the run goes on untied.
    fn start(pgid: u32) -> Option<Lifeline> {
        use std::os::unix::process::CommandExt as _;
        let mut watchdog = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .env_clear()
            .current_dir("/")
            .process_group(i32::try_from(pgid).ok()?)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let tie = watchdog.stdin.take();
        Some(Lifeline { watchdog, tie })
    }

    /// The run ended with devcell alive: the watchdog goes (`SIGKILL` to our unreaped child)
    /// before its pipe closes, so what the program left running in the background lives on.
    fn stop(mut self) {
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
        drop(self.tie.take());
    }
}

/// Runs `command` in its own process group with `input` on its stdin (none: `/dev/null`),
/// keeping at most `keep` bytes of each of its stdout and stderr, for at most `deadline` (see
/// the module docs). Blocks the calling thread.
///
/// Errors: the program cannot be started (a run that started is never an error: what went
/// wrong is in the result).
pub fn run_bounded(
    command: &mut Command,
    input: Option<&[u8]>,
    deadline: Duration,
    keep: usize,
) -> io::Result<BoundedRun> {
    run(command, input, deadline, keep, false)
}

/// [`run_bounded`], with the program's process group killed when devcell ends while it runs,
/// `SIGKILL` included (a watchdog in the group; see the module docs). What the program left
/// running in the background after a run that ended is not killed.
///
/// Errors: as [`run_bounded`].
pub fn run_bounded_tied(
    command: &mut Command,
    input: Option<&[u8]>,
    deadline: Duration,
    keep: usize,
) -> io::Result<BoundedRun> {
    run(command, input, deadline, keep, true)
}

fn run(
    command: &mut Command,
    input: Option<&[u8]>,
    deadline: Duration,
    keep: usize,
    tied: bool,
) -> io::Result<BoundedRun> {
    super::contain(command)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn()?;
    let mut guard = super::GroupGuard::new(Some(child.id()));
    let lifeline = if tied {
        Lifeline::start(child.id())
    } else {
        None
    };
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        let input = input.to_vec();
        // a program that exits without reading its input closes the pipe: not an error here
        // (its exit status tells)
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let (closed, pipes_closed) = mpsc::channel();
    let stdout = drain(child.stdout.take(), keep, closed.clone());
    let stderr = drain(child.stderr.take(), keep, closed);
    let left = || deadline.saturating_sub(started.elapsed());
    // both pipes closed is the program (and all it started) at its end, without polling
    let mut open_pipes = 2;
    while open_pipes > 0 && pipes_closed.recv_timeout(left()).is_ok() {
        open_pipes -= 1;
    }
    let mut status: Option<ExitStatus> = None;
    while open_pipes == 0 && status.is_none() && !left().is_zero() {
        match child.try_wait() {
            Ok(Some(s)) => status = Some(s),
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break,
        }
    }
    let timed_out = open_pipes > 0 || status.is_none();
    if timed_out {
        // the group is killed while its leader is unreaped (or while what holds the pipes
        // is still in it), so its id is not someone else's
        drop(guard);
        let _ = child.kill();
        status = child.wait().ok();
        // the group's kill reached the watchdog too: reap it
        if let Some(lifeline) = lifeline {
            lifeline.stop();
        }
        let grace = Instant::now();
        while open_pipes > 0
            && pipes_closed
                .recv_timeout(PIPE_GRACE.saturating_sub(grace.elapsed()))
                .is_ok()
        {
            open_pipes -= 1;
        }
    } else {
        if let Some(lifeline) = lifeline {
            lifeline.stop();
        }
        guard.disarm();
    }
    let take = |d: &Arc<Mutex<Drained>>| {
        let mut d = d.lock().unwrap_or_else(|e| e.into_inner());
        (std::mem::take(&mut d.kept), d.total)
    };
    let (stdout, stdout_bytes) = take(&stdout);
    let (stderr, stderr_bytes) = take(&stderr);
    Ok(BoundedRun {
        status,
        timed_out,
        stdout,
        stderr,
        stdout_bytes,
        stderr_bytes,
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::tests::{alive, gone_soon};

    /// Set in the devcell-like parent process [`tied_run_parent`] runs in.
    const PIDFILE_VAR: &str = "DEVCELL_TEST_TIED_RUN_PIDFILE";

    /// Not a check of its own: the devcell-like parent of
    /// [`a_tied_program_and_its_children_die_with_a_killed_devcell`], run by it in a child
    /// process of this test binary (without the variable it returns at once). It starts, tied,
    /// a program that writes its own pid and its child's, then waits for it.
    #[test]
    fn tied_run_parent() {
        let Some(file) = std::env::var_os(PIDFILE_VAR) else {
            return;
        };
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg("sleep 1000 & echo $$ $! > \"$0.tmp\"; mv \"$0.tmp\" \"$0\"; wait")
            .arg(file);
        let _ = run_bounded_tied(&mut command, None, Duration::from_secs(1000), 16);
    }

    /// Waits (up to 60 s, a bound for a broken build) for the two pids in `file`.
    fn pids_in(file: &std::path::Path) -> Vec<i32> {
        for _ in 0..6000 {
            if let Ok(text) = std::fs::read_to_string(file) {
                return text
                    .split_whitespace()
                    .map(|p| p.parse().unwrap())
                    .collect();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no pids in {}", file.display());
    }

    fn parent(pidfile: &std::path::Path) -> std::process::Child {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "process::bounded::tests::tied_run_parent",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(PIDFILE_VAR, pidfile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// A devcell killed with `SIGKILL` (no handler runs) while a tied program runs: the
    /// program and the child it started die with it (they ran on before: issue 30).
    #[test]
    fn a_tied_program_and_its_children_die_with_a_killed_devcell() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pids");
        let mut devcell = parent(&pidfile);
        let pids = pids_in(&pidfile);
        assert_eq!(pids.len(), 2, "{pids:?}");
        assert!(pids.iter().all(|&p| alive(p)), "running: {pids:?}");
        devcell.kill().unwrap();
        devcell.wait().unwrap();
        let left: Vec<i32> = pids.into_iter().filter(|&p| !gone_soon(p)).collect();
        for &pid in &left {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(pid).unwrap(),
                rustix::process::Signal::KILL,
            );
        }
        assert!(left.is_empty(), "{left:?} ran on after devcell was killed");
    }

    /// A tied run that ends leaves nothing of devcell's behind (its watchdog is stopped, not
    /// left waiting), and what the program started in the background with its output
    /// redirected lives on, as in an untied run.
    #[test]
    fn a_tied_run_that_ends_stops_its_watchdog_and_spares_background_work() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("bg");
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg("sleep 1000 >/dev/null 2>&1 & echo $! > \"$0\"; echo done")
            .arg(&pidfile);
        let run = run_bounded_tied(&mut command, None, Duration::from_secs(30), 64).unwrap();
        assert!(!run.timed_out);
        assert_eq!(run.stdout, b"done\n");
        let bg: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let group_members = |pgid: i32| {
            std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|&p| {
                    std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                        let rest = &s[s.rfind(')').map_or(0, |i| i + 1)..];
                        rest.split_whitespace().nth(2) == Some(&pgid.to_string())
                            && rest.split_whitespace().next() != Some("Z")
                    })
                })
                .collect::<Vec<i32>>()
        };
        let pgid = std::fs::read_to_string(format!("/proc/{bg}/stat"))
            .ok()
            .and_then(|s| {
                let rest = s[s.rfind(')')? + 1..].to_string();
                rest.split_whitespace().nth(2)?.parse::<i32>().ok()
            })
            .expect("the background child runs");
        assert!(alive(bg), "background work lives on");
        assert_eq!(
            group_members(pgid),
            vec![bg],
            "no watchdog left in the group"
        );
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(bg).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
}
