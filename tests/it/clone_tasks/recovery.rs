//! Issue 27, item 5: a clone task whose agent was killed (`SIGKILL` to the agent process in its
//! container) or whose container was removed under it loses nothing it committed: after the
//! handoff ends, `devcell fetch --task` brings every commit back to `refs/devcell/tasks/<task>`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Host, envelope, ok, source_repo};
use crate::support;
use crate::support::deadline::Bounded as _;
use crate::support::docker::{containers_of, engine_ready};
use crate::support::git::git;
use crate::support::hostile::HostTarget;

/// An agent that commits the file `<name>.txt`, says so with `<name>.flag` (untracked), writes
/// its pid and becomes `sleep` (so its pid is the process that runs until it is killed).
fn committing_then_sleeping(name: &str) -> String {
    format!(
        "set -e; echo {name} > {name}.txt; git add {name}.txt; \
         git -c user.name=agent -c user.email=agent@devcell.invalid -c commit.gpgsign=false \
         commit -q -m {name}; echo $$ > agent.pid; touch {name}.flag; exec sleep 600"
    )
}

/// `handoff --isolation clone --task <task> --agent <agent>` of `repo` started in the
/// background, its stdout (the envelope) into `out`.
fn spawn_handoff(host: &Host, repo: &Path, agent: &str, task: &str, out: &Path) -> Child {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("devcell"));
    cmd.env_clear()
        .env("USER", "tester")
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    if let Ok(docker_host) = std::env::var("DOCKER_HOST") {
        cmd.env("DOCKER_HOST", docker_host);
    }
    cmd.env("HOME", host.tmp.path().join("home"))
        .env("DEVCELL_STATE_DIR", host.state())
        .env("XDG_CACHE_HOME", host.cache())
        .args(["handoff", "--isolation", "clone", "--workspace-folder"])
        .arg(repo)
        .args(["--agent", agent, "--task", task, "--format", "json"])
        .arg("--config-file")
        .arg(host.config_file())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("devcell starts")
}

/// Waits (at most 400 s) until the clone of `task` holds `flag`; returns the clone.
fn wait_for(host: &Host, task: &str, flag: &str, devcell: &mut Child) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(400);
    loop {
        if let Some(clone) = host.find_clone(task)
            && clone.join(flag).exists()
        {
            return clone;
        }
        assert!(Instant::now() < deadline, "the agent never committed");
        if let Ok(Some(status)) = devcell.try_wait() {
            panic!("devcell ended early: {status}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits (at most 120 s) for the backgrounded devcell to end; its envelope.
fn ended(mut devcell: Child, out: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    while devcell.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = devcell.kill();
            panic!("devcell did not end after its agent or container was gone");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap_or(Value::Null)
}

/// `git update-ref -d refs/devcell/tasks/<task>` (what the handoff's end may have fetched is
/// forgotten), then `devcell fetch --task`: the ref is the clone's branch tip again.
fn fetch_again(host: &Host, repo: &Path, task: &str, tip: &str) {
    let r#ref = format!("refs/devcell/tasks/{task}");
    // (the repository's `reference-transaction` hook would touch the host marker: off)
    git(
        repo,
        &["-c", "core.hooksPath=/dev/null", "update-ref", "-d", &r#ref],
    );
    let f = ok(&host.run(&[
        "fetch",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--task",
        task,
        "--format",
        "json",
    ]));
    assert_eq!(f["result"]["fetched"], tip, "{f:#}");
    assert_eq!(git(repo, &["rev-parse", &r#ref]), tip);
}

#[test]
fn a_killed_agent_or_a_removed_container_loses_no_commit_and_fetch_brings_it_back() {
    if !engine_ready("clone_task_killed_agent", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let (one, two) = (
        committing_then_sleeping("one"),
        committing_then_sleeping("two"),
    );
    let host = Host::new(&[("one", one.as_str()), ("two", two.as_str())]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let out = at.path().join("handoff.json");

    // the agent process is killed with SIGKILL inside its container
    let mut devcell = spawn_handoff(&host, &repo, "one", "r", &out);
    let clone = wait_for(&host, "r", "one.flag", &mut devcell);
    let first = git(&clone, &["rev-parse", "refs/heads/devcell/r"]);
    let container = containers_of(&clone);
    assert_eq!(container.len(), 1, "{container:?}");
    let pid = std::fs::read_to_string(clone.join("agent.pid")).unwrap();
    let kill = Command::new("docker")
        .args(["exec", &container[0], "kill", "-9", pid.trim()])
        .bounded_output()
        .unwrap();
    assert!(kill.status.success(), "{kill:?}");
    let e = ended(devcell, &out);
    assert_eq!(
        e["error"]["details"]["signal"], 9,
        "the agent's SIGKILL is reported: {e:#}"
    );
    fetch_again(&host, &repo, "r", &first);

    // the task continued, its container removed under the running agent
    let mut devcell = spawn_handoff(&host, &repo, "two", "r", &out);
    wait_for(&host, "r", "two.flag", &mut devcell);
    let second = git(&clone, &["rev-parse", "refs/heads/devcell/r"]);
    for id in containers_of(&clone) {
        let rm = Command::new("docker")
            .args(["rm", "-f", &id])
            .bounded_output()
            .unwrap();
        assert!(rm.status.success(), "{rm:?}");
    }
    let e = ended(devcell, &out);
    assert_ne!(e, Value::Null, "one envelope, whatever the ending");
    fetch_again(&host, &repo, "r", &second);
    // nothing lost: both commits, in order, on the base
    assert_eq!(git(&repo, &["rev-parse", &format!("{second}~1")]), first);
    assert_eq!(git(&repo, &["rev-parse", &format!("{second}~2")]), base);
    assert_eq!(git(&repo, &["show", &format!("{second}:one.txt")]), "one");
    assert_eq!(git(&repo, &["show", &format!("{second}:two.txt")]), "two");

    // `status --all` lists the task with what was fetched
    let s = envelope(&host.run(&["status", "--all", "--format", "json"]));
    let ws = &s["result"]["workspaces"];
    let task = ws
        .as_array()
        .and_then(|w| w.iter().find_map(|w| w["tasks"].as_array()?.first()))
        .unwrap_or_else(|| panic!("the task is listed: {s:#}"));
    assert_eq!(task["task"], "r", "{s:#}");
    assert_eq!(task["repos"][0]["fetched"], second.as_str(), "{s:#}");
    assert!(task["repos"][0]["fetchedAt"].is_string(), "{s:#}");
    target.assert_untouched();
}
