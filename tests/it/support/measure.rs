//! What a spawned devcell cost on the host while it ran (issue 25, class 6): its peak resident
//! size and CPU time, read from `/proc` until it exits, with everything it printed.

use std::io::Read as _;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// A finished run: its exit status, peak resident size (`VmHWM`, kB), CPU time (user + system,
/// clock ticks: 100 a second on Linux), and its whole stdout and stderr.
pub struct Measured {
    pub status: ExitStatus,
    pub peak_kb: u64,
    pub cpu_ticks: u64,
    pub stdout: String,
    pub stderr: String,
}

/// Waits for `child` (spawned with piped stdout and stderr) to exit, reading both streams on
/// threads and sampling `/proc/<pid>/status` and `/stat` every 20 ms; kills it and panics past
/// `limit`.
pub fn measure(mut child: Child, limit: Duration) -> Measured {
    let readers = [
        Box::new(child.stdout.take().expect("stdout piped")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr piped")),
    ]
    .map(|mut stream| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    });
    let status_file = format!("/proc/{}/status", child.id());
    let stat_file = format!("/proc/{}/stat", child.id());
    let (mut peak_kb, mut cpu_ticks) = (0u64, 0u64);
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file)
            && let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        // utime + stime (fields 14 and 15; the name in field 2 ends with `)`)
        if let Ok(text) = std::fs::read_to_string(&stat_file)
            && let Some((_, rest)) = text.rsplit_once(')')
        {
            let fields: Vec<u64> = rest
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|f| f.parse().ok())
                .collect();
            cpu_ticks = cpu_ticks.max(fields.iter().sum());
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("devcell still runs after {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let [stdout, stderr] = readers.map(|r| r.join().unwrap());
    Measured {
        status,
        peak_kb,
        cpu_ticks,
        stdout,
        stderr,
    }
}
