//! `--log-level`: at `debug` every engine API call is logged on stderr as it ends, with its
//! duration; by default (`warn`) nothing of the sort.

use crate::support::context::TestContext;
use crate::support::devcell;

#[test]
fn log_level_debug_logs_each_engine_call_with_its_duration() {
    let Some(ws) = TestContext::busybox("log_level_debug_logs_each_engine_call_with_its_duration")
    else {
        return;
    };
    let ws = ws.config(r#"{"image": "IMAGE"}"#);
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
