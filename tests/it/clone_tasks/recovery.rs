//! Issue 27, item 5: a clone task whose agent was killed (`SIGKILL` to the agent process in its
//! container) or whose container was removed under it loses nothing it committed: after the
//! handoff ends, `devcell fetch --task` brings every commit back to `refs/devcell/tasks/<task>`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
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

/// Issue 27 (spec-note 0536) on the real engine: a clone task that fails at a real step (its
/// `postCreateCommand` exits 3 in the task's container) returns the envelope that says how to
/// recover: the message names the task and the repository, `details` has `task`, `source`,
/// `kept`, `taskFolder`, `mirrors` and the inner error's `causes` chain, and each
/// `next_actions` command runs as given (`status` lists the task, the retry fails the same
/// way, `delete --task` removes it); the user's `HEAD` and refs are untouched.
#[test]
fn a_clone_task_failing_in_its_container_says_how_to_recover_and_its_commands_run() {
    if !engine_ready("clone_task_failed_envelope", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("idle", "true")]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-fail-")
        .tempdir()
        .unwrap();
    let repo = at.path().join("repo");
    std::fs::create_dir_all(repo.join(".devcontainer")).unwrap();
    std::fs::write(
        repo.join(".devcontainer/devcontainer.json"),
        format!(
            r#"{{"image": "{}", "postCreateCommand": "echo refused-by-the-hook >&2; exit 3"}}"#,
            support::docker::BUSYBOX_IMAGE
        ),
    )
    .unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "a failing hook"]);
    crate::support::git::give_to_workspace_owner(at.path());
    let before = super::user_refs(&repo);
    let head = std::fs::read(repo.join(".git/HEAD")).unwrap();

    let out = host.handoff(&repo, "idle", &["--task", "t"]);
    assert_ne!(out.status.code(), Some(0));
    let v = envelope(&out);
    let e = &v["error"];
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("clone task `t` of `{}`: ", repo.display())),
        "{v:#}"
    );
    let d = &e["details"];
    assert_eq!(d["task"], "t", "{v:#}");
    assert_eq!(d["source"], repo.to_str().unwrap(), "{v:#}");
    assert_eq!(d["kept"], true, "{v:#}");
    let folder = PathBuf::from(d["taskFolder"].as_str().expect("a task folder"));
    assert!(folder.is_dir(), "{v:#}");
    let mirror = d["mirrors"][0].as_str().expect("a mirror");
    assert!(Path::new(mirror).join("HEAD").is_file(), "{v:#}");
    let causes = d["causes"].as_array().expect("the inner error's causes");
    assert!(
        causes
            .iter()
            .any(|c| c.as_str().unwrap_or_default().contains('3')),
        "the hook's exit status among the causes: {v:#}"
    );

    // each command runs as given (its `devcell` is this one, with this host's config)
    let commands: Vec<Vec<String>> = v["next_actions"]
        .as_array()
        .expect("next actions")
        .iter()
        .filter_map(|a| serde_json::from_value(a["command"].clone()).ok())
        .collect();
    let run = |verb: &str| -> Output {
        let argv = commands
            .iter()
            .find(|c| c.get(1).map(String::as_str) == Some(verb))
            .unwrap_or_else(|| panic!("a `{verb}` action: {v:#}"));
        assert_eq!(argv[0], "devcell");
        let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        host.run(&[&args[..], &["--format", "json"]].concat())
    };
    let s = ok(&run("status"));
    assert!(s.to_string().contains("\"t\""), "the task is listed: {s:#}");
    let again = envelope(&run("handoff"));
    assert_eq!(again["error"]["details"]["task"], "t", "{again:#}");
    ok(&run("delete"));
    assert!(!folder.exists(), "delete --task removed it");
    // (the task ref the failed handoff's end fetched, at the base, is the task's)
    assert_eq!(super::user_refs(&repo), before);
    assert_eq!(std::fs::read(repo.join(".git/HEAD")).unwrap(), head);
    target.assert_untouched();
}
