//! End to end: `devcell handoff` of a two-repository workspace (real host-side git worktrees, as
//! Grove creates them) to the reference agent (`fixtures/agents/reference-agent.sh`), then
//! `status`, `audit`, `doctor` and `delete` checked field by field (issue 5 "Shows it works",
//! issue 6 secret leak and teardown tests).
//!
//! The image is busybox plus this host's git (`support::git::hostgit_image`), pushed to the local
//! registry and named by digest when `DEVCELL_TEST_REGISTRY` is set (required with
//! `DEVCELL_TEST_ENGINE=1`), so a hardened handoff can score 16/16. Nothing is downloaded.
//!
//! The host user here is root and the container's remote user `nobody`; the test workspaces
//! belong to uid/gid 4242 ([`WORKSPACE_OWNER`], not world-writable), so devcell's
//! `updateRemoteUserUID` gives `nobody` uid 4242 and what the agent writes belongs to 4242
//! (spec-note 0250).

use crate::support::deadline::Bounded as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support;
use crate::support::context::TestContext;
use crate::support::git::{
    WORKSPACE_OWNER, git, give_to_workspace_owner, hostgit_image, owner_uid, pinned_hostgit_image,
};

const AGENT: &str = "fixtures/agents/reference-agent.sh";

/// One test workspace: `<tmp>/src/{api,web}` main repositories, `<tmp>/ws/{api,web}` worktrees
/// on `feat/task`, a fake host home, devcell's state folder and config file.
struct Env {
    /// Isolated (a home with `host-only.txt`, the state folder [`Env::state`]), the workspace in `ws/`;
    /// whatever happened, `devcell delete` on drop leaves no container behind.
    ctx: TestContext,
    ws: PathBuf,
    state: PathBuf,
    config: PathBuf,
}

/// Who owns a test workspace.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// [`WORKSPACE_OWNER`] (the usual case: a non-root user's workspace).
    User,
    /// root, every file and folder world-writable (the container user can write, but git's
    /// ownership check needs devcell's `safe.directory` entries).
    RootWorldWritable,
    /// root, as created (the container user cannot write).
    Root,
}

impl Env {
    /// `devcontainer` is the primary repository's devcontainer.json (`IMAGE` replaced); the
    /// workspace belongs to [`WORKSPACE_OWNER`].
    fn new(image: &str, devcontainer: &str, dockerfile: Option<&str>) -> Env {
        Env::with_owner(image, devcontainer, dockerfile, Owner::User)
    }

    /// [`Env::new`] with the workspace's owner chosen.
    fn with_owner(image: &str, devcontainer: &str, dockerfile: Option<&str>, owner: Owner) -> Env {
        let ctx = TestContext::new("handoff-e2e").isolated();
        let home = ctx.home();
        let ctx = ctx
            .env("HOST_HOME_PROBE", home.join("host-only.txt"))
            .at("ws")
            .delete_on_drop();
        let tmp = ctx.tmp();
        let src = tmp.join("src");
        let ws = ctx.path().to_path_buf();
        std::fs::write(home.join("host-only.txt"), "host home\n").unwrap();
        for name in ["api", "web"] {
            let dir = src.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            git(&dir, &["init", "-q"]);
            std::fs::write(dir.join("README.md"), format!("{name}\n")).unwrap();
            if name == "api" {
                std::fs::create_dir(dir.join(".devcontainer")).unwrap();
                std::fs::write(
                    dir.join(".devcontainer/devcontainer.json"),
                    devcontainer.replace("IMAGE", image),
                )
                .unwrap();
                if let Some(dockerfile) = dockerfile {
                    std::fs::write(dir.join(".devcontainer/Dockerfile"), dockerfile).unwrap();
                }
            }
            git(&dir, &["add", "-A"]);
            git(&dir, &["commit", "-q", "-m", "initial"]);
            let target = ws.join(name);
            git(
                &dir,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    "feat/task",
                    target.to_str().unwrap(),
                ],
            );
        }
        std::fs::create_dir(ws.join(".agent")).unwrap();
        std::fs::copy(
            support::repo().join(AGENT),
            ws.join(".agent/reference-agent.sh"),
        )
        .unwrap();
        match owner {
            // The workspace and its repositories belong to a non-root user (not
            // world-writable): devcell (run as root here) gives the remote user that user's ids.
            Owner::User => give_to_workspace_owner(tmp),
            Owner::RootWorldWritable => {
                let status = Command::new("chmod")
                    .args(["-R", "a+rwX"])
                    .arg(tmp)
                    .status()
                    .unwrap();
                assert!(status.success());
            }
            Owner::Root => {}
        }
        let state = ctx.state();
        let config = tmp.join("config.toml");
        let agent = |name: &str, arg: &str| {
            format!(
                "[agents.{name}]\ncommand = [\"sh\", \"/workspace/.agent/reference-agent.sh\", \"{arg}\"]\nenv = [\"HOST_HOME_PROBE\"]\nverify = [\"git -C api log -1 --format=%s\", \"test -f web/AGENT_CHANGE.md\"]\n"
            )
        };
        std::fs::write(
            &config,
            [
                agent("ref0", "0"),
                agent("ref7", "7"),
                agent("refkill", "kill"),
                agent("refwait", "wait"),
            ]
            .join("\n"),
        )
        .unwrap();
        Env {
            ws: std::fs::canonicalize(&ws).unwrap(),
            state,
            config,
            ctx,
        }
    }

    fn ws_str(&self) -> String {
        self.ws.to_string_lossy().into_owned()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.ctx.command();
        cmd.args(args);
        cmd
    }

    fn devcell(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("devcell runs")
    }

    fn handoff_args<'a>(&'a self, agent: &'a str, extra: &[&'a str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "handoff",
            "--workspace-folder",
            &self.ws_str(),
            "--agent",
            agent,
            "--config-file",
            self.config.to_str().unwrap(),
            "--task-url",
            "https://github.com/acme/api/pull/123",
            "--task-title",
            "Add partial refunds",
            "--format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn handoff(&self, agent: &str, extra: &[&str]) -> Output {
        let args = self.handoff_args(agent, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.devcell(&args)
    }

    fn json(&self, args: &[&str]) -> (Option<i32>, Value) {
        let out = self.devcell(args);
        (out.status.code(), envelope(&out))
    }
}

/// The one envelope on stdout.
fn envelope(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().count(),
        1,
        "exactly one envelope on stdout: {text}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&text).expect("stdout is JSON");
    assert_eq!(schema_errors("envelope", &v), Vec::<String>::new(), "{v}");
    assert_eq!(v["schemaVersion"], 1);
    assert!(v["warnings"].is_array() && v["next_actions"].is_array());
    v
}

/// Violations of `schemas/<name>.schema.json`.
fn schema_errors(name: &str, instance: &Value) -> Vec<String> {
    let text = std::fs::read_to_string(support::repo().join(format!("schemas/{name}.schema.json")))
        .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema is valid");
    validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The image for handoffs: pinned by digest through the local registry when there is one
/// (required under `DEVCELL_TEST_ENGINE=1`), else the local tag.
fn image() -> (String, bool) {
    match pinned_hostgit_image() {
        Some(pinned) => (pinned.to_string(), true),
        None => {
            assert!(
                std::env::var("DEVCELL_TEST_ENGINE").as_deref() != Ok("1"),
                "DEVCELL_TEST_ENGINE=1 but DEVCELL_TEST_REGISTRY is not set"
            );
            (hostgit_image().to_string(), false)
        }
    }
}

const CONFIG: &str = r#"{"image": "IMAGE", "remoteUser": "nobody"}"#;

/// Runs a handoff, streaming stderr, and returns (output, time to the agent's first line).
fn timed_handoff(env: &Env, agent: &str) -> (Output, Option<Duration>) {
    let args = env.handoff_args(agent, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let start = Instant::now();
    let mut child = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = None;
    let mut err = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if first.is_none() && line.starts_with("reference agent: starting") {
            first = Some(start.elapsed());
        }
        err.extend_from_slice(line.as_bytes());
        err.push(b'\n');
    }
    let mut out = child.wait_with_output().unwrap();
    out.stderr = err;
    (out, first)
}

/// The score of `control` in an audit envelope.
fn control_score(audit: &Value, control: &str) -> u64 {
    audit["result"]["controls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["control"] == control)
        .unwrap_or_else(|| panic!("no control {control} in {audit}"))["score"]
        .as_u64()
        .unwrap()
}

/// Asserts an audit envelope scores 16/16 with each of the eight controls at 2.
fn assert_sixteen(audit: &Value, probe: bool) {
    assert_eq!(audit["result"]["score"], 16, "probe {probe}: {audit}");
    let controls = audit["result"]["controls"].as_array().unwrap();
    assert_eq!(controls.len(), 8, "{audit}");
    for c in controls {
        assert_eq!(c["score"], 2, "probe {probe}: {c}");
    }
}

fn last_subject(repo: &Path) -> String {
    git(repo, &["log", "-1", "--format=%s"])
}

fn labelled(kind: &str, ws: &Path) -> String {
    let filter = format!("label=devcontainer.local_folder={}", ws.display());
    let args: Vec<&str> = match kind {
        "container" => vec!["ps", "-aq", "--filter", &filter],
        "volume" => vec!["volume", "ls", "-q", "--filter", &filter],
        _ => vec!["network", "ls", "-q", "--filter", &filter],
    };
    let out = Command::new("docker").args(&args).bounded_output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn handoff_of_two_worktrees_to_the_reference_agent_end_to_end() {
    let test = "handoff_of_two_worktrees_to_the_reference_agent_end_to_end";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let (image, pinned) = image();
    let env = Env::new(&image, CONFIG, None);
    let ws = env.ws.clone();
    let base_api = git(&ws.join("api"), &["rev-parse", "HEAD"]);

    // the plan: nothing created
    let plan_args = env.handoff_args("ref7", &["--plan"]);
    let (code, plan) = env.json(&plan_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{plan}");
    let p = &plan["result"];
    assert_eq!(p["network"], "none");
    assert_eq!(p["profile"], "hardened");
    assert_eq!(p["image"], image.as_str());
    assert_eq!(p["container"]["action"], "create");
    // root, 2 repository binds, per worktree devcell's `.git` file, its container git
    // directory and the host objects read-only (0436): no host git directory
    assert_eq!(p["mounts"].as_array().unwrap().len(), 9, "{p}");
    assert_eq!(p["mounts"][0]["target"], "/workspace");
    assert_eq!(p["command"][2], "7");
    assert_eq!(p["cwd"], "/workspace");
    assert_eq!(p["env"], serde_json::json!(["HOST_HOME_PROBE"]));
    assert_eq!(labelled("container", &ws), "");
    let primary_args = env.handoff_args("ref7", &["--plan", "--primary", "api"]);
    let (code, plan) = env.json(&primary_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{plan}");
    assert_eq!(plan["result"]["cwd"], "/workspace/api");
    assert_eq!(plan["result"]["repos"][0]["role"], "primary");
    let bad_args = env.handoff_args("ref7", &["--plan", "--primary", "nope"]);
    let (code, plan) = env.json(&bad_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(11), "{plan}");
    assert!(
        plan["error"]["message"]
            .as_str()
            .unwrap()
            .contains("api, web")
    );

    // cold: the container is created; the agent's exit code is devcell's
    let (out, cold) = timed_handoff(&env, "ref7");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(7), "{err}");
    let v = envelope(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "agent_failed");
    assert_eq!(v["error"]["details"]["exitCode"], 7);
    let container = v["error"]["details"]["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    for needle in [
        "verified: git -C api log -1 --format=%s",
        "verified: test -f web/AGENT_CHANGE.md",
        "engine socket: checked",
        "host home: not visible",
        "committed in api",
        "committed in web",
        // updateRemoteUserUID gave the remote user (nobody) the workspace owner's uid
        &format!("reference agent: starting in /workspace as {WORKSPACE_OWNER}"),
    ] {
        assert!(err.contains(needle), "missing `{needle}` in:\n{err}");
    }
    assert!(!err.contains("engine socket: present"), "{err}");
    // the work is on the host, in both worktrees and their main repositories
    for name in ["api", "web"] {
        assert_eq!(
            last_subject(&ws.join(name)),
            format!("reference agent: change in {name}")
        );
        assert_eq!(
            std::fs::read_to_string(ws.join(name).join("AGENT_CHANGE.md")).unwrap(),
            format!("change by the reference agent in {name}\n")
        );
        let main = env.ctx.tmp().join("src").join(name);
        assert_eq!(
            git(&main, &["log", "-1", "--format=%s", "feat/task"]),
            format!("reference agent: change in {name}")
        );
        // what the agent wrote, in the worktree and in the main repository's git directory,
        // belongs to the workspace's owner
        // (the agent's commit came back by fetch, as a pack: spec-note 0436)
        let packs: Vec<PathBuf> = std::fs::read_dir(main.join(".git/objects/pack"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(!packs.is_empty());
        for path in [
            ws.join(name).join("AGENT_CHANGE.md"),
            main.join(".git/refs/heads/feat/task"),
            main.join(".git/worktrees").join(name).join("index"),
        ]
        .into_iter()
        .chain(packs)
        {
            assert_eq!(owner_uid(&path), WORKSPACE_OWNER, "{}", path.display());
        }
    }
    // and so do devcell's own files in the workspace
    for rel in [
        ".devcell",
        ".devcell/context.json",
        ".devcell/.gitignore",
        "AGENTS.md",
    ] {
        assert_eq!(owner_uid(&ws.join(rel)), WORKSPACE_OWNER, "{rel}");
    }
    // the context file
    let ctx: Value =
        serde_json::from_slice(&std::fs::read(ws.join(".devcell/context.json")).unwrap()).unwrap();
    assert_eq!(schema_errors("context", &ctx), Vec::<String>::new());
    assert_eq!(ctx["schemaVersion"], 1);
    assert_eq!(ctx["task"]["provider"], "github");
    assert_eq!(ctx["task"]["title"], "Add partial refunds");
    assert_eq!(ctx["workspace"]["root"], "/workspace");
    assert_eq!(ctx["workspace"]["branch"], "feat/task");
    assert_eq!(ctx["repos"][0]["name"], "api");
    assert_eq!(ctx["repos"][0]["role"], "primary");
    assert_eq!(ctx["repos"][0]["baseCommit"], base_api.as_str());
    assert_eq!(ctx["repos"][1]["path"], "/workspace/web");
    assert_eq!(ctx["security"]["network"], "none");
    assert_eq!(ctx["security"]["profile"], "hardened");
    assert_eq!(ctx["env"], serde_json::json!(["HOST_HOME_PROBE"]));
    assert_eq!(ctx["verification"].as_array().unwrap().len(), 2);
    assert_eq!(ctx["agent"]["name"], "ref7");
    assert!(ws.join("AGENTS.md").is_file());

    // status, field by field
    let (code, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{st}");
    let r = &st["result"];
    assert_eq!(r["workspace"], env.ws_str().as_str());
    assert_eq!(r["layout"], "multiRepository");
    assert_eq!(r["engineReachable"], true);
    assert_eq!(r["container"]["id"], container.as_str());
    // the handoff stopped its container once the agent ended: nothing the agent left running
    // writes after the fetch-back (spec-note 0436)
    assert_eq!(r["container"]["running"], false);
    assert_eq!(r["recordedContainer"], container.as_str());
    assert_eq!(r["activeSession"], Value::Null);
    assert_eq!(r["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(r["sessions"][0]["status"], "ended");
    assert_eq!(r["sessions"][0]["agent"], "ref7");
    assert_eq!(r["sessions"][0]["outcome"]["kind"], "exited");
    assert_eq!(r["sessions"][0]["outcome"]["exitCode"], 7);
    assert_eq!(r["sessions"][0]["containerId"], container.as_str());
    for (i, name) in ["api", "web"].iter().enumerate() {
        let repo = &r["repos"][i];
        assert_eq!(repo["name"], *name);
        assert_eq!(repo["branch"], "feat/task");
        assert_eq!(repo["dirty"], false, "{repo}");
        assert_eq!(repo["path"], format!("/workspace/{name}").as_str());
        assert_eq!(
            repo["head"],
            git(&ws.join(name), &["rev-parse", "HEAD"]).as_str()
        );
    }
    assert_eq!(
        r["contextFile"],
        ws.join(".devcell/context.json").to_string_lossy().as_ref()
    );
    assert_eq!(
        st["next_actions"][0]["command"],
        serde_json::json!(["devcell", "delete", "--workspace-folder", env.ws_str()])
    );

    // started again by hand, to look inside (the next handoff would start it too)
    let started = Command::new("docker")
        .args(["start", &container])
        .bounded_output()
        .unwrap();
    assert!(started.status.success(), "{}", stderr(&started));

    // the audit: 16/16 with a pinned image, each control 2 (by inspect and from inside); a
    // local tag (no registry: a developer's plain `cargo test`) loses a reproducibility point
    let ws_s = env.ws_str();
    for probe in [false, true] {
        let mut args = vec!["audit", "--workspace-folder", &ws_s, "--format", "json"];
        if probe {
            args.push("--probe");
        }
        let (code, a) = env.json(&args);
        assert_eq!(code, Some(0), "{a}");
        assert_eq!(a["result"]["maxScore"], 16);
        if pinned {
            assert_sixteen(&a, probe);
        } else {
            assert_eq!(a["result"]["score"], 15, "probe {probe}: {a}");
            assert_eq!(control_score(&a, "reproducibility"), 1);
        }
    }
    let out = env.devcell(&["audit", &container, "--min-score", "17"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("isolation audit of"));

    // `devcell exec` in the handoff's container (found by the same id labels) runs as the
    // workspace owner in /workspace; git works in both repositories without any
    // `safe.directory` (the files are the remote user's own), and what it writes is 4242's
    let config = ws.join("api/.devcontainer/devcontainer.json");
    let out = env.devcell(&[
        "exec",
        "--workspace-folder",
        &env.ws_str(),
        "--config",
        config.to_str().unwrap(),
        "sh",
        "-c",
        "set -e; pwd; id -u; for r in api web; do echo exec > $r/EXEC_CHANGE.md; \
         git -C $r status --porcelain; git -C $r add EXEC_CHANGE.md; \
         git -C $r -c user.name=exec -c user.email=exec@devcell.invalid commit -q -m \"exec in $r\"; done",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(
        text.starts_with(&format!(
            "/workspace\n{WORKSPACE_OWNER}\n?? EXEC_CHANGE.md\n"
        )),
        "{text}"
    );
    for name in ["api", "web"] {
        let file = ws.join(name).join("EXEC_CHANGE.md");
        assert_eq!(owner_uid(&file), WORKSPACE_OWNER);
    }

    // warm: the container exists and is reused; it was started by hand, so the handoff stops
    // it before its fetch-back reads what `exec` committed, then starts it again (spec-note
    // 0400, F3)
    let (out, warm) = timed_handoff(&env, "ref0");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["ok"], true);
    assert_eq!(v["result"]["containerAction"], "started");
    assert_eq!(v["result"]["containerId"], container.as_str());
    assert_eq!(v["result"]["exitCode"], 0);
    assert_eq!(v["result"]["agentsMd"]["outcome"], "exists");
    // the commit `exec` made in the container git directory came back with this handoff's
    // fetch-back (spec-note 0436)
    for name in ["api", "web"] {
        let log = git(&ws.join(name), &["log", "--format=%s", "-5"]);
        assert!(log.lines().any(|l| l == format!("exec in {name}")), "{log}");
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "timing: handoff -> agent's first line: cold {:?}, warm {:?}",
            cold.unwrap(),
            warm.unwrap()
        );
    }

    // doctor, field by field
    let (code, d) = env.json(&["doctor", "--format", "json"]);
    assert_eq!(code, Some(0), "{d}");
    assert_eq!(d["ok"], true);
    assert_eq!(d["result"]["engine"]["reachable"], true);
    assert!(
        d["result"]["engine"]["version"]
            .as_str()
            .is_some_and(|v| !v.is_empty())
    );
    let findings = d["result"]["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f["code"] == "engine_reachable" && f["severity"] == "ok")
    );
    assert!(findings.iter().any(|f| f["code"] == "cgroup_limits"));
    assert!(
        !findings
            .iter()
            .any(|f| f["message"].as_str().unwrap_or("").contains(&env.ws_str())),
        "nothing is wrong with this workspace: {d}"
    );
    assert_eq!(
        d["next_actions"].as_array().unwrap().len(),
        findings.iter().filter(|f| !f["fix"].is_null()).count()
    );

    // delete, field by field, and the proof
    let volumes_before = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{range .Mounts}}{{.Name}} {{end}}",
            &container,
        ])
        .bounded_output()
        .unwrap();
    let volumes_before = String::from_utf8_lossy(&volumes_before.stdout)
        .trim()
        .to_string();
    assert!(!volumes_before.is_empty(), "the state volume exists");
    let (code, del) = env.json(&[
        "delete",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{del}");
    let r = &del["result"];
    assert_eq!(r["removed"]["containers"], serde_json::json!([container]));
    assert_eq!(
        r["removed"]["volumes"],
        serde_json::json!(volumes_before.split_whitespace().collect::<Vec<_>>())
    );
    assert!(
        r["removed"]["state"]
            .as_str()
            .is_some_and(|s| s.ends_with(".json"))
    );
    assert!(!Path::new(r["removed"]["state"].as_str().unwrap()).exists());
    assert_eq!(
        r["kept"]["worktrees"],
        serde_json::json!([env.ws_str(), ws.join("api"), ws.join("web")])
    );
    assert_eq!(r["kept"]["logs"].as_array().unwrap().len(), 2);
    for log in r["kept"]["logs"].as_array().unwrap() {
        assert!(Path::new(log.as_str().unwrap()).is_file());
    }
    assert_eq!(
        r["remaining"],
        serde_json::json!({"containers": [], "volumes": [], "networks": []})
    );
    assert_eq!(r["verified"], true);
    // the engine agrees
    for kind in ["container", "volume", "network"] {
        assert_eq!(
            labelled(kind, &ws),
            "",
            "{kind}s labelled for the workspace remain"
        );
    }
    for volume in volumes_before.split_whitespace() {
        let gone = Command::new("docker")
            .args(["volume", "inspect", volume])
            .bounded_output()
            .unwrap();
        assert!(!gone.status.success(), "volume {volume} remains");
    }
    // and the work is still there
    for name in ["api", "web"] {
        assert_eq!(
            last_subject(&ws.join(name)),
            format!("reference agent: change in {name}")
        );
        assert_eq!(git(&ws.join(name), &["status", "--porcelain"]), "");
    }
    let (code, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    assert_eq!(st["result"]["container"], Value::Null);
    assert_eq!(st["result"]["sessions"], serde_json::json!([]));
}

/// `git status --porcelain` and HEAD of both worktrees.
fn snapshot(ws: &Path) -> Vec<(String, String)> {
    ["api", "web"]
        .iter()
        .map(|n| {
            (
                git(&ws.join(n), &["status", "--porcelain"]),
                git(&ws.join(n), &["rev-parse", "HEAD"]),
            )
        })
        .collect()
}

fn only_session(env: &Env) -> Value {
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    let sessions = st["result"]["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 1, "{st}");
    assert_eq!(sessions[0]["status"], "ended", "{st}");
    sessions[0].clone()
}

#[test]
fn failures_leave_both_worktrees_intact_and_the_state_truthful() {
    let test = "failures_leave_both_worktrees_intact_and_the_state_truthful";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let image = hostgit_image();

    // a failing hook
    let env = Env::new(
        image,
        r#"{"image": "IMAGE", "remoteUser": "nobody", "postCreateCommand": "echo hook output; exit 5"}"#,
        None,
    );
    let before = snapshot(&env.ws);
    let out = env.handoff("ref0", &[]);
    assert_eq!(out.status.code(), Some(16), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["error"]["code"], "hook_failed");
    assert!(v["error"]["details"]["containerId"].is_string());
    assert_eq!(snapshot(&env.ws), before);
    let s = only_session(&env);
    assert_eq!(s["outcome"]["kind"], "failed");
    assert_eq!(s["outcome"]["code"], "hook_failed");
    assert!(!stderr(&out).contains("reference agent: starting"));

    // a failing image build: a Dockerfile whose RUN fails, and a Feature whose install.sh
    // fails; both worktrees stay byte-for-byte the same (contents, modes, owners), the
    // envelope is `build_failed` (exit 14), no container exists and no session is running
    let feature = |ws: &Path| {
        let dir = ws.join("api/.devcontainer/failing");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("devcontainer-feature.json"),
            r#"{"id": "failing", "version": "1.0.0", "name": "fails on purpose"}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("install.sh"),
            "#!/bin/sh\necho failing feature install >&2\nexit 3\n",
        )
        .unwrap();
        give_to_workspace_owner(&ws.join("api/.devcontainer"));
    };
    let dockerfile = format!("FROM {image}\nRUN exit 7\n");
    let cases: [(&str, Option<&str>, bool); 2] = [
        (
            r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#,
            Some(&dockerfile),
            false,
        ),
        (
            r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./failing": {}}}"#,
            None,
            true,
        ),
    ];
    for (config, dockerfile, with_feature) in cases {
        let env = Env::new(image, config, dockerfile);
        if with_feature {
            feature(&env.ws);
        }
        let before = snapshot(&env.ws);
        let trees = |env: &Env| ["api", "web"].map(|n| support::tree_fingerprint(&env.ws.join(n)));
        let hashes = trees(&env);
        let root_before = support::tree_fingerprint(&env.ws);
        let out = env.handoff("ref0", &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(14), "{err}");
        let v = envelope(&out);
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["code"], "build_failed", "{v}");
        if with_feature {
            assert!(err.contains("failing feature install"), "{err}");
        }
        assert_eq!(trees(&env), hashes, "a worktree changed");
        assert_eq!(
            support::tree_fingerprint(&env.ws),
            root_before,
            "the workspace changed"
        );
        assert!(!env.ws.join(".devcell").exists() && !env.ws.join("AGENTS.md").exists());
        assert_eq!(snapshot(&env.ws), before);
        let s = only_session(&env);
        assert_eq!(s["outcome"]["kind"], "failed");
        assert_eq!(s["outcome"]["code"], "build_failed");
        assert_eq!(s["containerId"], Value::Null, "{s}");
        let (_, st) = env.json(&[
            "status",
            "--workspace-folder",
            &env.ws_str(),
            "--format",
            "json",
        ]);
        assert_eq!(st["result"]["activeSession"], Value::Null, "{st}");
        assert_eq!(st["result"]["container"], Value::Null, "{st}");
        assert_eq!(labelled("container", &env.ws), "");
        assert!(!err.contains("reference agent: starting"));
    }

    // an agent killed by a signal (after committing)
    let env = Env::new(image, CONFIG, None);
    let out = env.handoff("refkill", &[]);
    assert_eq!(out.status.code(), Some(137), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["error"]["code"], "agent_failed");
    assert_eq!(v["error"]["details"]["signal"], 9);
    let s = only_session(&env);
    assert_eq!(
        s["outcome"],
        serde_json::json!({"kind": "signaled", "signal": 9})
    );
    for name in ["api", "web"] {
        assert_eq!(
            last_subject(&env.ws.join(name)),
            format!("reference agent: change in {name}")
        );
        assert_eq!(git(&env.ws.join(name), &["status", "--porcelain"]), "");
        git(&env.ws.join(name), &["fsck", "--no-progress"]);
    }
}

#[test]
fn a_second_handoff_is_refused_while_the_first_runs() {
    let test = "a_second_handoff_is_refused_while_the_first_runs";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(hostgit_image(), CONFIG, None);
    let args = env.handoff_args("refwait", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let active = loop {
        let (_, st) = env.json(&[
            "status",
            "--workspace-folder",
            &env.ws_str(),
            "--format",
            "json",
        ]);
        if let Some(id) = st["result"]["activeSession"].as_str()
            && st["result"]["sessions"][0]["containerId"].is_string()
        {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the first handoff never became live: {st}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = env.handoff("ref0", &[]);
    assert_eq!(out.status.code(), Some(17), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["error"]["code"], "session_active");
    assert_eq!(v["error"]["details"]["session"]["id"], active.as_str());
    assert_eq!(v["error"]["details"]["session"]["agent"], "refwait");
    assert!(
        v["next_actions"][0]["description"]
            .as_str()
            .unwrap()
            .contains("--replace")
    );
    std::fs::write(env.ws.join(".release"), "").unwrap();
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = only_session(&env);
    assert_eq!(s["id"], active.as_str());
    assert_eq!(
        s["outcome"],
        serde_json::json!({"kind": "exited", "exitCode": 0})
    );
}

#[test]
fn a_secret_reaches_the_agent_and_nothing_else() {
    let test = "a_secret_reaches_the_agent_and_nothing_else";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let image = hostgit_image();
    let env = Env::new(
        image,
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "postCreateCommand": "printf %s \"$DEVCELL_TEST_SECRET\" | sha256sum | cut -d' ' -f1 > /workspace/hook-secret.sha256; sleep 3"}"#,
        None,
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let noise = Box::new(0u8);
    let secret = format!(
        "dcs3cret{:x}{:x}{:x}",
        nanos,
        std::process::id(),
        &*noise as *const u8 as usize
    );
    let secrets_file = env.ctx.tmp().join("secrets.json");
    std::fs::write(
        &secrets_file,
        serde_json::json!({"DEVCELL_TEST_SECRET": secret}).to_string(),
    )
    .unwrap();
    let args = env.handoff_args("ref0", &["--secrets-file", secrets_file.to_str().unwrap()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `ps` of every host process while the hook (`sleep 3`) runs
    let mut captures = Vec::new();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
        let text = String::from_utf8_lossy(&ps.stdout).into_owned();
        let done = text
            .lines()
            .all(|l| !l.contains("devcell handoff") && !l.ends_with("devcell"));
        captures.push(text);
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        captures
            .iter()
            .any(|c| c.lines().any(|l| l.trim() == "sleep 3")),
        "ps was captured while the hook ran"
    );
    let v = envelope(&out);
    let container = v["result"]["containerId"].as_str().unwrap().to_string();

    // the agent saw it
    use sha2::Digest as _;
    let expected = hex::encode(sha2::Sha256::digest(secret.as_bytes()));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("agent-secret.sha256"))
            .unwrap()
            .trim(),
        expected
    );
    assert!(stderr(&out).contains("secret seen by the agent: ********"));
    // and so did the lifecycle hook
    assert_eq!(
        std::fs::read_to_string(env.ws.join("hook-secret.sha256"))
            .unwrap()
            .trim(),
        expected
    );

    // and it is nowhere else
    let mut haystacks: Vec<(String, String)> = Vec::new();
    let docker = |args: &[&str]| {
        let o = Command::new("docker").args(args).bounded_output().unwrap();
        assert!(o.status.success(), "docker {args:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    haystacks.push((
        "docker inspect container".into(),
        docker(&["inspect", &container]),
    ));
    haystacks.push((
        "docker image inspect".into(),
        docker(&["image", "inspect", image]),
    ));
    haystacks.push((
        "docker history".into(),
        docker(&["history", "--no-trunc", image]),
    ));
    haystacks.push((
        "labels".into(),
        docker(&["inspect", "-f", "{{json .Config.Labels}}", &container]),
    ));
    haystacks.push((
        "context file".into(),
        std::fs::read_to_string(env.ws.join(".devcell/context.json")).unwrap(),
    ));
    haystacks.push((
        "devcell stdout".into(),
        String::from_utf8_lossy(&out.stdout).into(),
    ));
    haystacks.push(("devcell stderr".into(), stderr(&out)));
    let mut files = 0;
    for entry in walk(&env.state) {
        files += 1;
        haystacks.push((
            entry.display().to_string(),
            String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned(),
        ));
    }
    assert!(files >= 2, "the state file and the log were searched");
    for (i, c) in captures.iter().enumerate() {
        haystacks.push((format!("ps capture {i}"), c.clone()));
    }
    for (what, text) in &haystacks {
        assert!(!text.contains(&secret), "the secret leaked into {what}");
    }
    let log = v["result"]["session"]["log"].as_str().unwrap();
    assert!(std::fs::read_to_string(log).unwrap().contains("********"));

    // teardown leaves nothing labelled for the workspace
    let (code, del) = env.json(&[
        "delete",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{del}");
    assert_eq!(del["result"]["verified"], true);
    for kind in ["container", "volume", "network"] {
        assert_eq!(labelled(kind, &env.ws), "");
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn the_default_network_is_reported_and_scored_honestly() {
    let test = "the_default_network_is_reported_and_scored_honestly";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(hostgit_image(), CONFIG, None);
    let out = env.handoff("ref0", &["--network", "default"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["result"]["plan"]["network"], "default");
    let ctx: Value =
        serde_json::from_slice(&std::fs::read(env.ws.join(".devcell/context.json")).unwrap())
            .unwrap();
    assert_eq!(ctx["security"]["network"], "default");
    let (code, a) = env.json(&[
        "audit",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let network = a["result"]["controls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["control"] == "networkPolicy")
        .unwrap()
        .clone();
    assert_eq!(network["score"], 0, "{network}");
    assert!(
        network["evidence"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("unrestricted")
    );
    // the image is a local tag that can drift: not pinned
    assert_eq!(control_score(&a, "reproducibility"), 1, "{a}");
}

#[test]
fn a_hardened_handoff_of_a_locally_built_image_scores_sixteen() {
    let test = "a_hardened_handoff_of_a_locally_built_image_scores_sixteen";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let (image, pinned) = image();
    if !pinned {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("{test}: skipped (needs DEVCELL_TEST_REGISTRY for a pinned base)");
        }
        return;
    }
    // a local Feature over the digest-pinned base: devcell builds the image and names it by
    // its local tag
    let env = Env::new(
        &image,
        r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./probe-feature": {}}}"#,
        None,
    );
    let feature = env.ws.join("api/.devcontainer/probe-feature");
    std::fs::create_dir_all(&feature).unwrap();
    std::fs::write(
        feature.join("devcontainer-feature.json"),
        r#"{"id": "probe-feature", "version": "1.0.0", "name": "probe"}"#,
    )
    .unwrap();
    std::fs::write(
        feature.join("install.sh"),
        "#!/bin/sh\nset -e\necho built-by-the-feature > /etc/probe-feature\n",
    )
    .unwrap();
    let out = env.handoff("ref0", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["result"]["network"], "none");
    assert_eq!(v["result"]["plan"]["profile"], "hardened");
    let container = v["result"]["containerId"].as_str().unwrap().to_string();
    let inspect = |format: &str| {
        let o = Command::new("docker")
            .args(["inspect", "-f", format, &container])
            .bounded_output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let config_image = inspect("{{.Config.Image}}");
    assert!(
        !config_image.contains("@sha256:") && !config_image.starts_with("sha256:"),
        "a local tag: {config_image}"
    );
    assert_eq!(
        inspect("{{index .Config.Labels \"devcell.base_image\"}}"),
        image
    );
    // stopped once the agent ended (spec-note 0436): started again to look inside
    let started = Command::new("docker")
        .args(["start", &container])
        .bounded_output()
        .unwrap();
    assert!(started.status.success(), "{}", stderr(&started));
    let feature_ran = Command::new("docker")
        .args(["exec", &container, "cat", "/etc/probe-feature"])
        .bounded_output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&feature_ran.stdout).trim(),
        "built-by-the-feature"
    );
    // 16/16 and each control 2, by inspect and from inside
    let ws_s = env.ws_str();
    for probe in [false, true] {
        let mut args = vec!["audit", "--workspace-folder", &ws_s, "--format", "json"];
        if probe {
            args.push("--probe");
        }
        let (code, a) = env.json(&args);
        assert_eq!(code, Some(0), "{a}");
        assert_sixteen(&a, probe);
        let repro = a["result"]["controls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["control"] == "reproducibility")
            .unwrap()
            .to_string();
        assert!(
            repro.contains("pinned by digest") && repro.contains("layer"),
            "{repro}"
        );
    }
}

#[test]
fn handoff_limits_flags_take_effect_inside_and_bad_values_are_refused() {
    let test = "handoff_limits_flags_take_effect_inside_and_bad_values_are_refused";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(hostgit_image(), CONFIG, None);
    let mut config = std::fs::read_to_string(&env.config).unwrap();
    config.push_str(&format!(
        "\n[agents.limits]\ncommand = [\"sh\", \"-c\", '''{}''']\n",
        crate::up::CGROUP_LIMITS
    ));
    std::fs::write(&env.config, config).unwrap();
    let run = |extra: &[&str]| {
        let args = env.handoff_args("limits", extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        env.devcell(&args)
    };

    // bad values: a clear error naming the flag, exit 2, nothing created
    for (flag, value) in [("--pids-limit", "0"), ("--memory", "1x"), ("--cpus", "0")] {
        for plan in [true, false] {
            let mut extra = vec![flag, value];
            if plan {
                extra.push("--plan");
            }
            let out = run(&extra);
            assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
            let v = envelope(&out);
            assert_eq!(v["ok"], false);
            assert_eq!(v["error"]["code"], "invalid_argument");
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(flag) && message.contains(&format!("`{value}`")),
                "{message}"
            );
        }
    }
    let out = run(&["--cpus", "lots"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--cpus"), "{}", stderr(&out));
    assert_eq!(labelled("container", &env.ws), "");

    // the plan shows the limits: the profile's defaults, or the flags
    let plan = envelope(&run(&["--plan"]));
    assert_eq!(
        plan["result"]["limits"],
        serde_json::json!({"pids": 1024, "memoryBytes": 4_u64 << 30, "cpus": 2.0})
    );
    let flags = ["--pids-limit", "77", "--memory", "300m", "--cpus", "1.5"];
    let mut with_plan = flags.to_vec();
    with_plan.push("--plan");
    let plan = envelope(&run(&with_plan));
    assert_eq!(
        plan["result"]["limits"],
        serde_json::json!({"pids": 77, "memoryBytes": 300_u64 << 20, "cpus": 1.5})
    );

    // the flags take effect: from inside (the agent reads its cgroup) and by inspect
    let out = run(&flags);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for line in [
        "pids=77\n".to_string(),
        format!("memory={}\n", 300_u64 << 20),
        "cpu=150000 100000\n".to_string(),
    ] {
        assert!(err.contains(&line), "missing `{line}` in:\n{err}");
    }
    let container = envelope(&out)["result"]["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    let o = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.HostConfig.PidsLimit}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}",
            &container,
        ])
        .bounded_output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("77 {} 1500000000", 300_u64 << 20)
    );
}

#[test]
fn audit_of_a_bad_container_loses_the_right_points() {
    let test = "audit_of_a_bad_container_loses_the_right_points";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let token = "s3cret-value-never-printed";
    let c = support::docker::TestContainer::run_with(
        &[
            "--pid",
            "host",
            "--cap-add",
            "SYS_ADMIN",
            "-e",
            &format!("API_TOKEN={token}"),
        ],
        support::docker::BUSYBOX_IMAGE,
        &["sleep", "120"],
    );
    let score = |v: &Value, control: &str| {
        v["result"]["controls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["control"] == control)
            .unwrap()["score"]
            .as_u64()
            .unwrap()
    };
    let mut reports = Vec::new();
    for probe in [false, true] {
        let mut args = vec![
            "audit",
            c.id.as_str(),
            "--format",
            "json",
            "--min-score",
            "16",
        ];
        if probe {
            args.push("--probe");
        }
        let out = support::devcell().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        let v = envelope(&out);
        // below the gate: `ok: false` with the report in `error.details` (spec-note 0323)
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"]["code"], "below_min_score");
        assert_eq!(v["error"]["details"]["minScore"], 16);
        assert_eq!(v["warnings"][0]["code"], "below_min_score");
        assert!(
            stderr(&out).contains("is below --min-score 16"),
            "{}",
            stderr(&out)
        );
        let v = serde_json::json!({ "result": v["error"]["details"]["report"] });
        assert_eq!(score(&v, "engineSocket"), 0, "probe {probe}: {v}");
        assert_eq!(score(&v, "networkPolicy"), 0, "probe {probe}");
        assert_eq!(score(&v, "secretBoundary"), 1, "probe {probe}");
        assert!(!v.to_string().contains(token), "values are never reported");
        reports.push(v);
    }
    // the probe agrees with the engine on every control
    for control in [
        "repoScope",
        "engineSocket",
        "secretBoundary",
        "networkPolicy",
    ] {
        assert_eq!(
            score(&reports[0], control),
            score(&reports[1], control),
            "{control}"
        );
    }
    // text below the gate: the table, and the verdict on stderr (exit 3)
    let out = support::devcell()
        .args(["audit", &c.id, "--min-score", "16"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains("error: score ") && err.contains("/16 is below --min-score 16"),
        "{err}"
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("SYS_ADMIN"), "{table}");
    assert!(
        table.contains("API_TOKEN") && !table.contains(token),
        "{table}"
    );
}

#[test]
fn replace_stops_the_live_session_and_starts_a_new_one() {
    let test = "replace_stops_the_live_session_and_starts_a_new_one";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(hostgit_image(), CONFIG, None);
    let args = env.handoff_args("refwait", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let active = loop {
        let (_, st) = env.json(&[
            "status",
            "--workspace-folder",
            &env.ws_str(),
            "--format",
            "json",
        ]);
        if let Some(id) = st["result"]["activeSession"].as_str()
            && st["result"]["sessions"][0]["containerId"].is_string()
        {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the first handoff never became live: {st}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // the first agent has reached its wait loop once it printed its first line; give it a moment
    std::thread::sleep(Duration::from_millis(500));
    let out = env.handoff("ref0", &["--replace"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["result"]["replacedSession"], active.as_str());
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(143), "{}", stderr(&first));
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    let sessions = st["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{st}");
    assert_eq!(sessions[0]["id"], active.as_str());
    assert_eq!(
        sessions[0]["outcome"],
        serde_json::json!({"kind": "signaled", "signal": 15})
    );
    assert_eq!(
        sessions[1]["outcome"],
        serde_json::json!({"kind": "exited", "exitCode": 0})
    );
    assert_eq!(st["result"]["activeSession"], Value::Null);
}

#[test]
fn errors_before_any_container_are_envelopes_with_documented_exit_codes() {
    // no engine needed: nothing is created
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config.toml");
    std::fs::write(&config, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
    let ws = tmp.path().to_str().unwrap();
    let run = |args: &[&str]| {
        let out = support::devcell()
            .env("DEVCELL_STATE_DIR", tmp.path().join("state"))
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), envelope(&out), stderr(&out))
    };
    let cfg = config.to_str().unwrap();
    let (code, v, err) = run(&[
        "handoff",
        "--workspace-folder",
        ws,
        "--agent",
        "nope",
        "--config-file",
        cfg,
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(11), "{err}");
    assert_eq!(v["error"]["code"], "not_found");
    assert!(v["error"]["message"].as_str().unwrap().contains("`nope`"));
    assert!(
        v["next_actions"][0]["description"]
            .as_str()
            .unwrap()
            .contains("[agents.nope]")
    );
    assert!(err.contains("error: no agent `nope`"), "{err}");
    // a plain folder without any configuration
    let (code, v, _) = run(&[
        "handoff",
        "--workspace-folder",
        ws,
        "--agent",
        "a",
        "--config-file",
        cfg,
        "--plan",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(11));
    assert_eq!(v["error"]["code"], "not_found");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no dev container configuration")
    );
    // a usage error is an envelope too
    let (code, v, _) = run(&[
        "handoff",
        "--format",
        "json",
        "--network",
        "open",
        "--agent",
        "a",
    ]);
    assert_eq!(code, Some(2));
    assert_eq!(v["error"]["code"], "invalid_argument");
    // a bad config file
    std::fs::write(&config, "[agents.a]\ncommand = \"codex --full-auto\"\n").unwrap();
    let (code, v, _) = run(&[
        "handoff",
        "--workspace-folder",
        ws,
        "--agent",
        "a",
        "--config-file",
        cfg,
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(10));
    assert_eq!(v["error"]["code"], "config_invalid");
}

#[test]
fn doctor_finds_orphans_missing_mounts_and_stale_sessions() {
    let test = "doctor_finds_orphans_missing_mounts_and_stale_sessions";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let gone = tmp.path().join("deleted-workspace");
    let here = tmp.path().join("workspace");
    let vanished = tmp.path().join("vanished");
    std::fs::create_dir_all(&here).unwrap();
    std::fs::create_dir_all(&vanished).unwrap();
    let label = |p: &Path| format!("devcontainer.local_folder={}", p.display());
    let orphan = support::docker::TestContainer::run_with(
        &["--label", &label(&gone)],
        support::docker::BUSYBOX_IMAGE,
        &["sleep", "120"],
    );
    let mount = format!("type=bind,source={},target=/data", vanished.display());
    let missing = support::docker::TestContainer::run_with(
        &["--label", &label(&here), "--mount", &mount],
        support::docker::BUSYBOX_IMAGE,
        &["sleep", "120"],
    );
    std::fs::remove_dir(&vanished).unwrap();
    // a session whose devcell died without recording its end
    let state = tmp.path().join("state");
    let store = devcell::handoff::state::StateStore::new(&state);
    store
        .begin_session(
            &here,
            devcell::handoff::state::NewSession::in_container("ghost", None, false),
            &|_: &str| true,
            devcell::handoff::state::SessionProcess {
                pid: u32::MAX - 1,
                pid_start: None,
                alive: &|_, _| true,
            },
        )
        .unwrap();
    let out = support::devcell()
        .env("DEVCELL_STATE_DIR", &state)
        .env("XDG_CACHE_HOME", tmp.path().join("cache"))
        .args(["doctor", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = envelope(&out);
    let findings = v["result"]["findings"].as_array().unwrap();
    let find = |code: &str, needle: &str| {
        findings
            .iter()
            .find(|f| f["code"] == code && f["message"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("no `{code}` finding about `{needle}`: {v}"))
            .clone()
    };
    let o = find("orphaned_container", &gone.to_string_lossy());
    assert_eq!(o["severity"], "warning");
    assert_eq!(
        o["fix"]["command"],
        serde_json::json!(["docker", "rm", "-f", "-v", orphan.id])
    );
    let m = find("missing_mount", &vanished.to_string_lossy());
    assert_eq!(m["fix"]["command"][1], "delete");
    assert!(m["message"].as_str().unwrap().contains(&missing.id[..12]));
    let s = find("stale_session", "ghost");
    assert_eq!(s["fix"]["command"][1], "status");
    // every fix is a next action
    assert!(v["next_actions"].as_array().unwrap().contains(&o["fix"]));
}

#[test]
fn a_session_whose_devcell_died_is_abandoned_and_its_agent_stopped() {
    let test = "a_session_whose_devcell_died_is_abandoned_and_its_agent_stopped";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(hostgit_image(), CONFIG, None);
    let args = env.handoff_args("refwait", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut first = env
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // wait for the agent's first line, then kill devcell without a chance to clean up
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.starts_with("reference agent: starting")),
        "the agent started"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(st["result"]["sessions"][0]["status"], "stale", "{st}");
    let container = st["result"]["container"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let agents = |c: &str| {
        let o = Command::new("docker")
            .args(["exec", c, "ps", "-o", "args"])
            .bounded_output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains("reference-agent.sh wait"))
            .count()
    };
    // busybox runs `sleep` in a forked copy of the script's shell, whose command line is the
    // script's: a loaded machine sees that copy beside it (two lines) for a moment
    let running = agents(&container);
    assert!(
        (1..=2).contains(&running),
        "the orphaned agent still runs: {running}"
    );

    let out = env.handoff("ref0", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        envelope(&out)["result"]["abandonedSessions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(agents(&container), 0, "the orphaned agent was stopped");
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(
        st["result"]["sessions"][0]["outcome"]["kind"], "abandoned",
        "{st}"
    );
    assert_eq!(st["result"]["sessions"][1]["outcome"]["kind"], "exited");
}

/// When everything is root (devcell and the workspace), the remote user keeps its non-root ids
/// (spec-note 0250): in a world-writable workspace git still works for the agent and for the
/// lifecycle hooks through devcell's `safe.directory` entries; in a workspace only root can
/// write, the handoff says why the agent will fail (a warning in the envelope).
#[test]
fn when_everything_is_root_safe_directory_entries_keep_git_working() {
    let test = "when_everything_is_root_safe_directory_entries_keep_git_working";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let image = hostgit_image();
    let env = Env::with_owner(
        image,
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "postCreateCommand": "git -C /workspace/api status --porcelain && git -C /workspace/web log -1 --format=hook-saw-%s"}"#,
        None,
        Owner::RootWorldWritable,
    );
    let out = env.handoff("ref0", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v = envelope(&out);
    assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
    assert!(err.contains("hook-saw-initial"), "{err}");
    assert!(
        err.contains("reference agent: starting in /workspace as 65534"),
        "{err}"
    );
    for name in ["api", "web"] {
        assert_eq!(
            last_subject(&env.ws.join(name)),
            format!("reference agent: change in {name}")
        );
        assert_eq!(owner_uid(&env.ws.join(name).join("AGENT_CHANGE.md")), 65534);
    }

    let env = Env::with_owner(image, CONFIG, None, Owner::Root);
    let out = env.handoff("ref0", &[]);
    let v = envelope(&out);
    assert_eq!(v["error"]["code"], "agent_failed", "{v}");
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("belongs to root") && warnings.contains("keeps uid 65534"),
        "{v}"
    );
    // one warning, with its own code, shown once (spec-note 0324)
    let coded: Vec<&Value> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "workspace_not_writable")
        .collect();
    assert_eq!(coded.len(), 1, "{v}");
    assert_eq!(
        stderr(&out).matches("belongs to root").count(),
        1,
        "{}",
        stderr(&out)
    );
    // the container records the remote user's uid, so a reuse checks it without reading the
    // container's /etc/passwd through the engine (slow for a warm `up`)
    let id = labelled("container", &env.ws);
    let uid = Command::new("docker")
        .args([
            "inspect",
            "--format",
            "{{index .Config.Labels \"devcell.remote_uid\"}}",
            id.trim(),
        ])
        .bounded_output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&uid.stdout).trim(), "65534");
    // the container (stopped when the agent ended) is started again: the warning is still
    // given, once
    let out = env.handoff("ref0", &[]);
    assert!(
        stderr(&out).contains("starting the stopped workspace container"),
        "{}",
        stderr(&out)
    );
    let v = envelope(&out);
    assert_eq!(v["error"]["code"], "agent_failed", "{v}");
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "workspace_not_writable"),
        "{v}"
    );
    assert_eq!(
        stderr(&out).matches("belongs to root").count(),
        1,
        "{}",
        stderr(&out)
    );
}

/// `handoff --runtime host` (spec-note 0251): with no engine reachable, a handoff without
/// `--runtime` fails with `engine_unavailable` and offers `--runtime host` (nothing is written,
/// no session); with it, the reference agent runs on the host in the workspace as the
/// workspace's owner, reads the same context file (`runtime: host`, `isolation: none`, host
/// paths), commits in both worktrees, runs the verification commands, and its exit code or
/// signal is devcell's, with the `unisolated` warning on stderr and in the envelope.
#[test]
fn the_host_runtime_runs_the_agent_unisolated_and_says_so() {
    // no engine needed: DOCKER_HOST points at nothing
    let env = Env::new("unused", CONFIG, None);
    let ws = env.ws.clone();
    let script = ws.join(".agent/reference-agent.sh");
    let mut config = std::fs::read_to_string(&env.config).unwrap();
    for (name, arg) in [("host5", "5"), ("hostkill", "kill")] {
        config.push_str(&format!(
            "\n[agents.{name}]\ncommand = [\"sh\", \"{}\", \"{arg}\"]\nverify = [\"git -C api log -1 --format=%s\", \"test -f web/AGENT_CHANGE.md\"]\n",
            script.display()
        ));
    }
    std::fs::write(&env.config, config).unwrap();
    let without_engine = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        env.command(&args)
            .env("DOCKER_HOST", "unix:///nonexistent/devcell-test.sock")
            .output()
            .unwrap()
    };
    let before = support::tree_fingerprint(&ws);

    // no engine, no --runtime: an error that suggests the host runtime, and nothing happens
    let out = without_engine(&env.handoff_args("host5", &[]));
    assert_eq!(out.status.code(), Some(13), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["error"]["code"], "engine_unavailable");
    let offered = v["next_actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["command"].is_array())
        .expect("a next action with a command");
    let argv: Vec<&str> = offered["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[..2], ["devcell", "handoff"]);
    assert_eq!(argv[argv.len() - 2..], ["--runtime", "host"]);
    assert!(
        offered["description"]
            .as_str()
            .unwrap()
            .contains("WITHOUT ANY ISOLATION")
    );
    assert!(stderr(&out).contains("--runtime host"));
    assert_eq!(support::tree_fingerprint(&ws), before, "nothing written");
    assert!(
        !env.state.join("workspaces").exists(),
        "no session recorded"
    );

    // the plan says where the agent runs and warns
    let out = without_engine(&env.handoff_args("host5", &["--runtime", "host", "--plan"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan = envelope(&out);
    assert_eq!(plan["warnings"][0]["code"], "unisolated", "{plan}");
    let p = &plan["result"];
    assert_eq!(p["runtime"], "host");
    assert_eq!(p["isolation"], "none");
    assert_eq!(p["mounts"], serde_json::json!([]));
    assert_eq!(p["container"]["action"], "none");
    assert_eq!(p["cwd"], env.ws_str().as_str());
    assert_eq!(p["repos"][1]["path"], ws.join("web").to_str().unwrap());

    // the handoff: the agent's exit code is devcell's
    let out = without_engine(&env.handoff_args("host5", &["--runtime", "host"]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    let v = envelope(&out);
    assert_eq!(v["error"]["code"], "agent_failed", "{v}");
    assert_eq!(v["error"]["details"]["exitCode"], 5);
    assert_eq!(v["error"]["details"]["containerId"], Value::Null);
    assert_eq!(v["warnings"][0]["code"], "unisolated", "{v}");
    let warning = v["warnings"][0]["message"].as_str().unwrap();
    assert!(warning.starts_with("UNISOLATED:"), "{warning}");
    assert!(err.contains(&format!("WARNING: {warning}")), "{err}");
    for needle in [
        format!(
            "reference agent: starting in {} as {WORKSPACE_OWNER}",
            env.ws_str()
        ),
        "committed in api".to_string(),
        "committed in web".to_string(),
        "verified: git -C api log -1 --format=%s".to_string(),
        "verified: test -f web/AGENT_CHANGE.md".to_string(),
        "reference agent: done".to_string(),
    ] {
        assert!(err.contains(&needle), "missing `{needle}` in:\n{err}");
    }
    for name in ["api", "web"] {
        assert_eq!(
            last_subject(&ws.join(name)),
            format!("reference agent: change in {name}")
        );
        assert_eq!(
            owner_uid(&ws.join(name).join("AGENT_CHANGE.md")),
            WORKSPACE_OWNER
        );
    }
    // the same context file, marked as the host runtime, with host paths
    let ctx: Value =
        serde_json::from_slice(&std::fs::read(ws.join(".devcell/context.json")).unwrap()).unwrap();
    assert_eq!(schema_errors("context", &ctx), Vec::<String>::new());
    assert_eq!(ctx["runtime"], "host");
    assert_eq!(ctx["security"]["isolation"], "none");
    assert_eq!(ctx["security"]["network"], "host");
    assert_eq!(ctx["workspace"]["root"], env.ws_str().as_str());
    assert_eq!(ctx["repos"][0]["path"], ws.join("api").to_str().unwrap());
    assert_eq!(
        ctx["contextPath"],
        ws.join(".devcell/context.json").to_str().unwrap()
    );
    assert_eq!(ctx["verification"].as_array().unwrap().len(), 2);
    assert_eq!(
        owner_uid(&ws.join(".devcell/context.json")),
        WORKSPACE_OWNER
    );
    // the state and the log
    let out = without_engine(&[
        "status".into(),
        "--workspace-folder".into(),
        env.ws_str(),
        "--format".into(),
        "json".into(),
    ]);
    let st = envelope(&out);
    let sessions = st["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{st}");
    assert_eq!(sessions[0]["runtime"], "host");
    assert_eq!(sessions[0]["status"], "ended");
    assert_eq!(sessions[0]["containerId"], Value::Null);
    assert_eq!(
        sessions[0]["outcome"],
        serde_json::json!({"kind": "exited", "exitCode": 5})
    );
    let log = std::fs::read_to_string(sessions[0]["log"].as_str().unwrap()).unwrap();
    assert!(
        log.contains("unisolated") && log.contains("committed in web"),
        "{log}"
    );

    // an agent killed by a signal: 128 + 9, recorded as signaled
    let out = without_engine(&env.handoff_args("hostkill", &["--runtime", "host"]));
    assert_eq!(out.status.code(), Some(137), "{}", stderr(&out));
    let v = envelope(&out);
    assert_eq!(v["error"]["details"]["signal"], 9, "{v}");
    assert_eq!(v["warnings"][0]["code"], "unisolated");
}

/// SIGTERM ends a handoff whose container vanished under it (issue 25, class 6; spec-note
/// 0425): the agent is waiting, the test removes its container with `docker rm -f`, then sends
/// devcell SIGTERM. devcell exits (within a generous bound) and the session is recorded as
/// ended, never left live.
#[test]
fn sigterm_ends_a_handoff_whose_container_was_removed() {
    let test = "sigterm_ends_a_handoff_whose_container_was_removed";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(hostgit_image(), CONFIG, None);
    let args = env.handoff_args("refwait", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut first = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.starts_with("reference agent: starting")),
        "the agent started"
    );
    // keep draining stderr so devcell never blocks on a full pipe
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    let container = st["result"]["sessions"][0]["containerId"]
        .as_str()
        .unwrap_or_else(|| panic!("a container: {st}"))
        .to_string();
    let rm = Command::new("docker")
        .args(["rm", "-f", &container])
        .bounded_output()
        .unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    let pid = rustix::process::Pid::from_raw(first.id() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = first.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "devcell still runs 60 s after SIGTERM with its container gone"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let err = drain.join().unwrap().join("\n");
    assert!(!status.success(), "{err}");
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(st["result"]["activeSession"], Value::Null, "{st}\n{err}");
    let outcome = &st["result"]["sessions"][0]["outcome"];
    assert!(
        ["signaled", "failed"].contains(&outcome["kind"].as_str().unwrap_or_default()),
        "{st}\n{err}"
    );
}

/// SIGTERM during the handoff's `up` (a long `postCreateCommand`, before the agent exists)
/// ends devcell with 143 and records the session as signaled (issue 25, class 6; spec-note
/// 0425). Before, the signal's default action killed devcell and left the session live.
#[test]
fn sigterm_during_up_ends_the_handoff_and_records_the_session() {
    let test = "sigterm_during_up_ends_the_handoff_and_records_the_session";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let config = r#"{"image": "IMAGE", "remoteUser": "nobody", "postCreateCommand": "echo devcell-test-hook-running; sleep 300"}"#;
    let env = Env::new(hostgit_image(), config, None);
    signal_a_handoff(
        &env,
        "devcell-test-hook-running",
        (rustix::process::Signal::TERM, 15),
        Duration::ZERO,
        Duration::from_secs(60),
    );
}

/// SIGTERM while a repository's `afterStart` step runs (`sleep 100000`) stops the step in the
/// container and ends the handoff with 143, the session recorded as signaled (issue 25, class
/// 6; spec-note 0658). Before, the step was not raced with the signal: devcell ran on until
/// `SIGKILL`, leaving the session live.
#[test]
fn sigterm_during_an_after_start_step_stops_the_step_and_records_the_session() {
    signal_during_an_after_start_step(
        "sigterm_during_an_after_start_step_stops_the_step_and_records_the_session",
        rustix::process::Signal::TERM,
        15,
    );
}

/// As [`sigterm_during_an_after_start_step_stops_the_step_and_records_the_session`], with
/// `SIGHUP` (a closed terminal): handled like `SIGTERM`, exit 129.
#[test]
fn sighup_during_an_after_start_step_stops_the_step_and_records_the_session() {
    signal_during_an_after_start_step(
        "sighup_during_an_after_start_step_stops_the_step_and_records_the_session",
        rustix::process::Signal::HUP,
        1,
    );
}

/// Starts a handoff (agent `ref0`) in `env`, waits for a stderr line containing `started`,
/// then after `settle` sends `signal` (`(signal, its number n)`) and waits up to `within` for
/// devcell to end. Asserts the exit status 128 + `n`, the signal in the JSON error, and the
/// session recorded `signaled` with no active session; returns `status --format json` and
/// devcell's stderr.
fn signal_a_handoff(
    env: &Env,
    started: &str,
    (signal, n): (rustix::process::Signal, i32),
    settle: Duration,
    within: Duration,
) -> (Value, String) {
    let args = env.handoff_args("ref0", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut first = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains(started)),
        "never printed `{started}`"
    );
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    std::thread::sleep(settle);
    let pid = rustix::process::Pid::from_raw(first.id() as i32).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = first.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = first.kill();
            let _ = first.wait();
            panic!(
                "devcell still runs {} s after signal {n} (after `{started}`)",
                within.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let err = drain.join().unwrap().join("\n");
    assert_eq!(status.code(), Some(128 + n), "{err}");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut first.stdout.take().unwrap(), &mut out).unwrap();
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["error"]["details"]["signal"], n, "{v}");
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(st["result"]["activeSession"], Value::Null, "{st}\n{err}");
    assert_eq!(
        st["result"]["sessions"][0]["outcome"],
        serde_json::json!({"kind": "signaled", "signal": n}),
        "{st}\n{err}"
    );
    (st, err)
}

/// Sends `signal` (number `n`) to a handoff while its `afterStart` step `sleep 100000` runs:
/// devcell ends within 30 s with 128 + `n`, the session `signaled`, the step gone.
fn signal_during_an_after_start_step(test: &str, signal: rustix::process::Signal, n: i32) {
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let config = r#"{"image": "IMAGE", "remoteUser": "nobody", "customizations": {"devcell": {"afterStart": "sleep 100000"}}}"#;
    let env = Env::new(hostgit_image(), config, None);
    // the step's exec is created just after the line
    let (st, err) = signal_a_handoff(
        &env,
        "running `afterStart` step 1 of 1",
        (signal, n),
        Duration::from_secs(2),
        Duration::from_secs(30),
    );
    // the step's process is gone from the container
    let container = st["result"]["sessions"][0]["containerId"]
        .as_str()
        .unwrap_or_else(|| panic!("a container: {st}"))
        .to_string();
    let top = Command::new("docker")
        .args(["top", &container])
        .bounded_output()
        .unwrap();
    let top = String::from_utf8_lossy(&top.stdout).into_owned();
    assert!(!top.contains("sleep 100000"), "{top}\n{err}");
}

/// A repository's `afterStart` step that prints 50 MB without a newline, then fails, costs
/// devcell a bounded amount of memory (issue 25, class 6; spec-note 0658): its output is
/// collected within 1 MiB per stream (the end kept, marked cut). Before, all of it was held
/// (about ten times over: 400 MB made devcell peak at 4 GB).
#[test]
fn an_after_start_steps_flood_costs_devcell_bounded_memory() {
    let test = "an_after_start_steps_flood_costs_devcell_bounded_memory";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let config = r#"{"image": "IMAGE", "remoteUser": "nobody", "customizations": {"devcell": {"afterStart": "head -c 50000000 /dev/zero; echo; echo the-last-words; exit 3"}}}"#;
    let env = Env::new(hostgit_image(), config, None);
    let args = env.handoff_args("ref0", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let support::measure::Measured {
        status,
        peak_kb,
        stdout: out,
        stderr: err,
        ..
    } = support::measure::measure(child, Duration::from_secs(300));
    assert!(
        peak_kb < 200 * 1024,
        "devcell peaked at {peak_kb} kB for a 50 MB step output\n{err}"
    );
    assert!(!status.success(), "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let tail = &v["error"]["details"]["outputTail"];
    assert_eq!(
        tail.as_array().and_then(|t| t.last()),
        Some(&Value::from("the-last-words")),
        "{err}"
    );
    assert!(tail.to_string().contains("only its end was kept"), "{err}");
}

/// A handoff keeps its environment record (spec-note 0520): the session names its hash, and
/// `env show --session` prints it with the handoff's profile and real network.
#[test]
fn a_handoff_keeps_its_environment_record_in_its_session() {
    let test = "a_handoff_keeps_its_environment_record_in_its_session";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(
        hostgit_image(),
        r#"{"image": "IMAGE", "remoteUser": "nobody", "customizations": {"devcell": {"verify": ["true"]}}}"#,
        None,
    );
    let out = env.handoff("ref0", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let session = only_session(&env);
    let id = session["id"].as_str().unwrap().to_string();
    let (code, shown) = env.json(&[
        "env",
        "show",
        "--workspace-folder",
        &env.ws_str(),
        "--session",
        &id,
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{shown}");
    let record = &shown["result"];
    assert_eq!(record["command"], "handoff", "{shown}");
    assert_eq!(record["security"]["profile"], "hardened");
    assert_eq!(record["security"]["network"], "none");
    assert_eq!(record["verify"], serde_json::json!(["true"]));
    // the workspace's last record is the same one
    let (code, last) = env.json(&[
        "env",
        "show",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{last}");
    assert_eq!(last["result"], *record);
    // an unknown session has none: not_found
    let (code, missing) = env.json(&[
        "env",
        "show",
        "--workspace-folder",
        &env.ws_str(),
        "--session",
        "nope",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(11), "{missing}");

    // `delete` forgets the workspace's records and keeps the session's beside its log
    let (code, del) = env.json(&[
        "delete",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{del}");
    let log = session["log"].as_str().unwrap();
    let copy = Path::new(log).with_extension("environment.json");
    assert_eq!(
        del["result"]["kept"]["environments"],
        serde_json::json!([copy])
    );
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&copy).unwrap()).unwrap();
    assert_eq!(kept, *record);
    let removed = del["result"]["removed"]["environments"].as_array().unwrap();
    assert_eq!(removed.len(), 2, "{del}");
    for path in removed {
        assert!(!Path::new(path.as_str().unwrap()).exists(), "{path}");
    }
    let (code, gone) = env.json(&[
        "env",
        "show",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(11), "{gone}");
}

#[test]
fn a_handoff_recreates_its_recorded_environment_and_refuses_drift_before_a_session() {
    let test = "a_handoff_recreates_its_recorded_environment_and_refuses_drift";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(
        hostgit_image(),
        r#"{"image": "IMAGE", "remoteUser": "nobody"}"#,
        None,
    );
    let records = tempfile::tempdir().unwrap();
    let record = records.path().join("env.json");
    let record_arg = record.to_str().unwrap();

    // 1. `--environment-out`: the session's record, written for CI.
    let out = env.handoff("ref0", &["--environment-out", record_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_eq!(written["command"], "handoff", "{written}");
    assert_eq!(written["security"]["network"], "none");
    let sessions = |env: &Env| {
        let (_, st) = env.json(&[
            "status",
            "--workspace-folder",
            &env.ws_str(),
            "--format",
            "json",
        ]);
        st["result"]["sessions"].as_array().unwrap().len()
    };
    assert_eq!(sessions(&env), 1);

    // 2. The same inputs: a handoff without a drift warning.
    let out = env.handoff("ref0", &["--environment", record_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("drift"), "{}", stderr(&out));
    assert_eq!(sessions(&env), 2);

    // 3. A changed configuration or network: refused (18), each named, no session begun.
    std::fs::write(
        env.ws.join("api/.devcontainer/devcontainer.json"),
        hostgit_image_config(),
    )
    .unwrap();
    let out = env.handoff(
        "ref0",
        &["--environment", record_arg, "--network", "default"],
    );
    assert_eq!(out.status.code(), Some(18), "{}", stderr(&out));
    let refused = envelope(&out);
    let fields: Vec<&str> = refused["error"]["details"]["differences"]
        .as_array()
        .unwrap_or_else(|| panic!("{refused}"))
        .iter()
        .filter_map(|d| d["field"].as_str())
        .collect();
    assert!(fields.contains(&"configuration.configuration"), "{refused}");
    assert!(fields.contains(&"security.network"), "{refused}");
    assert_eq!(sessions(&env), 2, "nothing was begun");

    // 4. `--allow-drift`: the handoff goes on, each difference a warning.
    let out = env.handoff("ref0", &["--environment", record_arg, "--allow-drift"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let done = envelope(&out);
    assert!(
        done["warnings"]
            .to_string()
            .contains("environment drift (allowed)"),
        "{done}"
    );
}

/// The handoff configuration with a `verify` command added (a changed configuration).
fn hostgit_image_config() -> String {
    format!(
        r#"{{"image": "{}", "remoteUser": "nobody", "customizations": {{"devcell": {{"verify": ["true"]}}}}}}"#,
        hostgit_image()
    )
}

/// The sessions `status` lists for the workspace.
fn sessions(env: &Env) -> Vec<Value> {
    let (_, st) = env.json(&[
        "status",
        "--workspace-folder",
        &env.ws_str(),
        "--format",
        "json",
    ]);
    st["result"]["sessions"].as_array().unwrap().clone()
}

/// `docker inspect -f <format> <container>`, trimmed.
fn docker_inspect(format: &str, container: &str) -> String {
    let out = Command::new("docker")
        .args(["inspect", "-f", format, container])
        .bounded_output()
        .expect("docker runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_handoff_in_a_named_container_uses_it_and_refuses_any_other() {
    let test = "a_handoff_in_a_named_container_uses_it_and_refuses_any_other";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let env = Env::new(
        hostgit_image(),
        r#"{"image": "IMAGE", "remoteUser": "nobody"}"#,
        None,
    );
    // 1. A first handoff makes the workspace's container, labelled as devcell's.
    let out = env.handoff("ref0", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let containers = env.ctx.containers();
    assert_eq!(containers.len(), 1, "{containers:?}");
    let id = containers[0].clone();
    assert_eq!(
        docker_inspect("{{index .Config.Labels \"devcell.profile\"}}", &id),
        "hardened"
    );
    assert!(
        docker_inspect("{{index .Config.Labels \"devcell.config_sha256\"}}", &id)
            .starts_with("sha256:")
    );

    // 2. Named: the agent runs in it; no other container is made.
    let out = env.handoff("ref0", &["--container", &id[..12]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(env.ctx.containers(), containers);
    let all = sessions(&env);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[1]["containerId"], id.as_str(), "{all:?}");

    // Each refusal: its exit code and reason, before a session or a container.
    let refused = |extra: &[&str], code: i32, reason: &str| {
        let out = env.handoff("ref0", extra);
        let envelope = envelope(&out);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{envelope}\n{}",
            stderr(&out)
        );
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{envelope}");
        assert_eq!(sessions(&env).len(), 2, "no session begun");
        assert_eq!(env.ctx.containers(), containers, "nothing made or removed");
    };

    // 3. A container devcell did not create (started by the test): refused, left running,
    //    unchanged.
    let foreign = support::per_run("devcell-test-foreign");
    env.ctx.cleanup().container(&foreign);
    let run = Command::new("docker")
        .args([
            "run",
            "-d",
            "--name",
            &foreign,
            support::docker::BUSYBOX_IMAGE,
            "sleep",
            "600",
        ])
        .bounded_output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let started = docker_inspect("{{.State.StartedAt}}", &foreign);
    refused(&["--container", &foreign], 2, "devcell did not create it");
    assert_eq!(docker_inspect("{{.State.Running}}", &foreign), "true");
    assert_eq!(docker_inspect("{{.State.StartedAt}}", &foreign), started);

    // 4. Another profile, an unknown name.
    refused(
        &["--container", &id, "--security-profile", "reference"],
        2,
        "created under the `hardened` profile",
    );
    refused(
        &["--container", "devcell-test-no-such-container"],
        11,
        "no such container",
    );

    // 5. The configuration changed since the container was made.
    let config = env.ws.join("api/.devcontainer/devcontainer.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("{", r#"{"containerEnv": {"X": "1"}, "#),
    )
    .unwrap();
    refused(
        &["--container", &id],
        2,
        "configuration changed since it was created",
    );
}
