//! What a repository's output costs devcell on the host (issue 25, class 6; spec-note 0658):
//! hook output is split into lines in linear work and cut at 64 KiB, so a hook printing tens
//! of megabytes without a newline leaves devcell's memory bounded.

use std::io::Read as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;

/// Attack 26 Q2: a `postCreateCommand` printing 32 MB on one line. devcell's peak resident
/// size stays under 200 MB and its CPU time under 20 s (before: the line was held whole and
/// searched again at every piece, 16 MB cost 214 MB and 64 MB 667 MB and 19 s of CPU), the
/// line is shown cut with its marker, and the next line is shown whole.
#[test]
fn a_hooks_output_without_newlines_costs_devcell_bounded_memory_and_cpu() {
    let Some(ctx) = TestContext::busybox("hostile_hook_output_without_newlines") else {
        return;
    };
    let ctx = ctx.isolated();
    ctx.write(
        ".devcontainer/devcontainer.json",
        &format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "postCreateCommand": "head -c 32000000 /dev/zero | tr '\\0' a; echo; echo the-last-line"}}"#
        ),
    );
    let mut child = ctx
        .command()
        .args(["up", "--workspace-folder"])
        .arg(ctx.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("devcell runs");
    let readers = [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
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
    let mut peak_kb = 0u64;
    let mut cpu_ticks = 0u64;
    let deadline = Instant::now() + Duration::from_secs(300);
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
            panic!("devcell up still runs after 300 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let [out, err] = readers.map(|r| r.join().unwrap());
    let shown = format!("{out}{err}");
    let tail = &shown[shown.len().saturating_sub(2000)..];
    assert!(
        peak_kb < 200 * 1024,
        "devcell peaked at {peak_kb} kB for a 32 MB line\n{tail}"
    );
    // clock ticks are 100 a second on Linux
    assert!(
        cpu_ticks < 20 * 100,
        "devcell used {cpu_ticks} ticks of CPU for a 32 MB line\n{tail}"
    );
    assert!(status.success(), "{tail}");
    assert!(shown.contains("[devcell: line cut at 64 KiB]"), "{tail}");
    assert!(shown.contains("the-last-line"), "{tail}");
    assert!(
        shown.len() < 1024 * 1024,
        "the cut line's rest is dropped, not shown: {} bytes",
        shown.len()
    );
}
