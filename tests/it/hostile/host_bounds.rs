//! What a repository's output costs devcell on the host (issue 25, class 6; spec-note 0658):
//! hook output is split into lines in linear work and cut at 64 KiB, so a hook printing tens
//! of megabytes without a newline leaves devcell's memory bounded.

use std::process::Stdio;
use std::time::Duration;

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
    let child = ctx
        .command()
        .args(["up", "--workspace-folder"])
        .arg(ctx.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("devcell runs");
    let crate::support::measure::Measured {
        status,
        peak_kb,
        cpu_ticks,
        stdout: out,
        stderr: err,
    } = crate::support::measure::measure(child, Duration::from_secs(300));
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
