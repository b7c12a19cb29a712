//! Engine helpers for the `engine` and `security` integration tests: connect through
//! `devcell::engine` (failing, not skipping, when `DEVCELL_TEST_ENGINE=1`), unique labels, and
//! guards that remove containers and images even when a test panics.

use crate::support::deadline::Bounded as _;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use devcell::engine::{DockerEngine, Engine};
use devcell::progress::{Event, Reporter};

/// The tiny base image built by `scripts/base-images`.
pub const BUSYBOX: &str = "devcell-test/busybox:1";

/// A connected engine with [`BUSYBOX`] present; `None` (with a note) when neither is available
/// and `DEVCELL_TEST_ENGINE` is not `1`; panics when it is `1`.
pub async fn engine(test: &str) -> Option<DockerEngine> {
    let required = std::env::var("DEVCELL_TEST_ENGINE").is_ok_and(|v| v == "1");
    let problem = match DockerEngine::connect().await {
        Ok(engine) => match engine.inspect_image(BUSYBOX).await {
            Ok(Some(_)) => return Some(engine),
            Ok(None) => format!("image `{BUSYBOX}` is missing (run scripts/base-images)"),
            Err(e) => format!("cannot inspect `{BUSYBOX}`: {e}"),
        },
        Err(e) => format!("no engine: {e}"),
    };
    assert!(!required, "{test}: DEVCELL_TEST_ENGINE=1 but {problem}");
    #[allow(clippy::print_stderr)]
    {
        eprintln!("note: {test} skipped: {problem} (set DEVCELL_TEST_ENGINE=1 to require it)");
    }
    None
}

/// Labels unique to one test run: `devcell.test=engine`, `devcell.test.id=<pid>-<n>-<name>`.
pub fn unique_labels(name: &str) -> BTreeMap<String, String> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    BTreeMap::from([
        ("devcell.test".to_string(), "engine".to_string()),
        (
            "devcell.test.id".to_string(),
            format!("{}-{n}-{name}", crate::support::run_token()),
        ),
    ])
}

/// Force-removes the container (and its anonymous volumes) on drop, with the `docker` CLI so
/// it works from `Drop` without a runtime, also when the test panics.
pub struct ContainerGuard(pub String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let _ = Command::new("docker")
                .args(["rm", "-f", "-v", &self.0])
                .bounded_output();
        }
    }
}

/// Removes the image tags on drop.
pub struct ImageGuard(pub Vec<String>);

impl Drop for ImageGuard {
    fn drop(&mut self) {
        for tag in &self.0 {
            let _ = Command::new("docker")
                .args(["rmi", "-f", tag])
                .bounded_output();
        }
    }
}

/// A [`Reporter`] that keeps every event.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Event>>);

impl Reporter for Recorder {
    fn report(&self, event: Event) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorder {
    /// The text of every [`Event::Output`].
    pub fn output(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::Output(l) => Some(l.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Whether the engine the tests run against is Podman (its Docker-compatible API names
/// itself in `version`; scripts/podman points `DOCKER_HOST` at it).
pub fn engine_is_podman() -> bool {
    let (ok, out) = docker(&["version", "--format", "{{json .Server}}"]);
    assert!(ok, "{out}");
    out.contains("Podman")
}

/// Runs the `docker` CLI (test setup only), returning (success, stdout+stderr).
pub fn docker(args: &[&str]) -> (bool, String) {
    let out = Command::new("docker")
        .args(args)
        .bounded_output()
        .expect("docker runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Starts `docker run -d --name <name> [--label L]… -v <bind> <busybox> sleep 100000`: a
/// running container that writes a host folder, the foreign writer of spec-notes 0478 and 0656.
/// The caller registers `name` for cleanup. Panics when the engine refuses it.
pub fn start_writer(name: &str, bind: &str, labels: &[&str]) {
    let mut args = vec!["run", "-d", "--name", name];
    for label in labels {
        args.extend(["--label", label]);
    }
    args.extend(["-v", bind, BUSYBOX, "sleep", "100000"]);
    let (ok, out) = docker(&args);
    assert!(ok, "{out}");
}

/// Asserts that `run` (an `up`) was refused because of the running writer `name`: it failed,
/// named the container, and said it can write the workspace.
#[track_caller]
pub fn assert_refused_for_writer(run: &crate::support::context::Run, name: &str) {
    let all = format!("{}\n{}", run.stdout, run.stderr);
    assert_ne!(run.code, Some(0), "{all}");
    assert!(all.contains(name), "names the container: {all}");
    assert!(all.contains("can write the workspace"), "{all}");
}

/// The `docker run` flags that make a container pass the hardened re-check of a reused
/// container (spec-note 0270): read-only root, no capabilities, no new privileges, the
/// profile's limits, no network. Tests that craft a container posing as a workspace's use
/// them (with a non-root user and the state volume).
pub const PASSES_THE_REUSE_RECHECK: &[&str] = &[
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges:true",
    "--pids-limit",
    "1024",
    "--memory",
    "1g",
    "--cpus",
    "1",
    "--network",
    "none",
];
