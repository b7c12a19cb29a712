//! The bounded runner: a [`super::contain`]ed program run to its end for at most a deadline,
//! its output read by threads (it never blocks on a full pipe) and kept up to a bound (the
//! rest read and counted), its input written by a thread (a program that never reads it
//! cannot hold the caller). The run ends when the program has exited **and** both output
//! pipes are closed; past the deadline the whole group is killed (a child the program left
//! holding the pipes included) and the pipes get one more second, after which their readers
//! are left behind (a child that left the group, `setsid`, cannot hold the caller either).
//! Used by the mail escalation command and [`super::output_within_std`] (spec-notes 0425, 0533).

use std::io::{self, Write as _};
use std::process::{Command, ExitStatus, Stdio};
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
        let grace = Instant::now();
        while open_pipes > 0
            && pipes_closed
                .recv_timeout(PIPE_GRACE.saturating_sub(grace.elapsed()))
                .is_ok()
        {
            open_pipes -= 1;
        }
    } else {
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
