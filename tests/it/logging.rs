//! `--log-level`: at `debug` every engine API call is logged on stderr as it ends, with its
//! duration; by default (`warn`) nothing of the sort.

use crate::support::devcell;
use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};

#[test]
fn log_level_debug_logs_each_engine_call_with_its_duration() {
    if !engine_ready(
        "log_level_debug_logs_each_engine_call_with_its_duration",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    std::fs::write(
        ws.path().join(".devcontainer/devcontainer.json"),
        format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let out = devcell()
            .args(extra)
            .args(["down", "--workspace-folder"])
            .arg(ws.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let debug = run(&["--log-level", "debug"]);
    assert!(
        debug
            .lines()
            .any(|l| l.contains("DEBUG find_containers") && l.contains("time.busy=")),
        "{debug}"
    );
    let quiet = run(&[]);
    assert!(!quiet.contains("find_containers"), "{quiet}");
}
