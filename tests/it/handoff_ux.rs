//! What a fresh user meets in `handoff --plan`, `status`, `audit` and `delete`: the plan judges
//! permissions as the handoff does, text output is for people, git failures stay per
//! repository (spec-notes 0320-0329).

use crate::support::deadline::Bounded as _;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::envelope;
use crate::support::git::{WORKSPACE_OWNER, git};

/// A single-repository workspace (`<tmp>/repo`, a git repository with
/// `.devcontainer/devcontainer.json`) in an isolated [`TestContext`] (its own home, state and
/// cache; `devcell delete` on drop), and a config file with agent `a` (`true`).
struct Ws {
    ctx: TestContext,
    root: PathBuf,
    config: PathBuf,
}

impl Ws {
    fn new(devcontainer: &str) -> Ws {
        Ws::in_context(TestContext::new("handoff-ux"), devcontainer)
    }

    /// [`Ws::new`] behind the engine gate.
    fn engine(test: &str, devcontainer: &str) -> Option<Ws> {
        TestContext::busybox(test).map(|ctx| Ws::in_context(ctx, devcontainer))
    }

    fn in_context(ctx: TestContext, devcontainer: &str) -> Ws {
        let ctx = ctx.isolated().at("repo").delete_on_drop();
        ctx.write(".devcontainer/devcontainer.json", devcontainer);
        git(ctx.path(), &["init", "-q"]);
        git(ctx.path(), &["add", "-A"]);
        git(ctx.path(), &["commit", "-q", "-m", "initial"]);
        let config = ctx.tmp().join("config.toml");
        std::fs::write(
            &config,
            "[agents.a]\ncommand = [\"true\"]\nverify = [\"make test\"]\n",
        )
        .unwrap();
        Ws {
            root: std::fs::canonicalize(ctx.path()).unwrap(),
            config,
            ctx,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.ctx.command();
        cmd.args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("devcell runs")
    }

    fn handoff(&self, extra: &[&str]) -> Output {
        let mut args = vec![
            "handoff",
            "--workspace-folder",
            self.root.to_str().unwrap(),
            "--agent",
            "a",
            "--config-file",
            self.config.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `(permission, value, source, status, grant)` of each request, sorted.
fn requests(v: &Value) -> Vec<(String, String, String, String, String)> {
    let s = |r: &Value, k: &str| r[k].as_str().unwrap_or_default().to_string();
    let mut out: Vec<_> = v
        .as_array()
        .unwrap_or_else(|| panic!("an array of requests: {v}"))
        .iter()
        .map(|r| {
            (
                s(r, "permission"),
                s(r, "value"),
                s(r, "source"),
                s(r, "status"),
                s(r, "grant"),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_plan_refuses_what_the_handoff_refuses_and_lists_every_request() {
    // privileged, and root named by the configuration (an image without `USER` and no user
    // named would run as the user devcell provides; spec-note 0188)
    let Some(ws) = Ws::engine(
        "the_plan_refuses_what_the_handoff_refuses_and_lists_every_request",
        &format!(r#"{{"image": "{BUSYBOX_IMAGE}", "privileged": true, "remoteUser": "root"}}"#),
    ) else {
        return;
    };
    let plan = ws.handoff(&["--plan", "--format", "json"]);
    let real = ws.handoff(&["--format", "json"]);
    let (p, r) = (envelope(&plan), envelope(&real));
    assert_eq!(real.status.code(), Some(12), "{}", stderr(&real));
    assert_eq!(plan.status.code(), real.status.code(), "{p}");
    assert_eq!(p["ok"], false);
    assert_eq!(p["error"]["code"], "permission_required");
    assert_eq!(r["error"]["code"], "permission_required");
    let listed = requests(&p["error"]["details"]["permissions"]);
    assert_eq!(listed, requests(&r["error"]["details"]["permissions"]));
    for (kind, grant) in [
        ("privileged", "--allow privileged"),
        ("root", "--allow root"),
    ] {
        assert!(
            listed
                .iter()
                .any(|l| l.0 == kind && l.3 == "refused" && l.4 == grant),
            "{kind}: {listed:?}"
        );
    }
    // text: the refusal names the flags
    let text = ws.handoff(&["--plan"]);
    assert_eq!(text.status.code(), Some(12));
    assert!(
        stderr(&text).contains("--allow privileged"),
        "{}",
        stderr(&text)
    );

    // granted: the plan succeeds and shows each request granted, with its flag
    let granted = ws.handoff(&[
        "--plan",
        "--format",
        "json",
        "--allow",
        "privileged",
        "--allow",
        "root",
    ]);
    let g = envelope(&granted);
    assert_eq!(granted.status.code(), Some(0), "{g}");
    let listed = requests(&g["result"]["permissions"]);
    assert!(
        listed
            .iter()
            .any(|l| l.0 == "privileged" && l.3 == "granted" && l.4 == "--allow privileged"),
        "{listed:?}"
    );
    let text = ws.handoff(&["--plan", "--allow", "privileged", "--allow", "root"]);
    let out = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        out.contains("permission privileged mode (from devcontainer.json), granted"),
        "{out}"
    );

    // runArgs capabilities, with a non-root user
    let ws = Ws::new(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "runArgs": ["--cap-add=SYS_ADMIN", "--network=host"]}}"#
    ));
    let plan = ws.handoff(&["--plan", "--format", "json"]);
    let real = ws.handoff(&["--format", "json"]);
    let (p, r) = (envelope(&plan), envelope(&real));
    assert_eq!(real.status.code(), Some(12), "{r}");
    assert_eq!(plan.status.code(), Some(12), "{p}");
    let listed = requests(&p["error"]["details"]["permissions"]);
    assert_eq!(listed, requests(&r["error"]["details"]["permissions"]));
    assert!(
        listed.iter().any(|l| l.0 == "capability"
            && l.1 == "SYS_ADMIN"
            && l.3 == "refused"
            && l.4 == "--allow cap:SYS_ADMIN"),
        "{listed:?}"
    );
}

#[test]
fn the_plan_reads_the_features_metadata_and_says_what_it_cannot_judge() {
    // no engine needed: the image is not looked at without one, and the plan says so
    let ws = Ws::new(
        r#"{"image": "devcell-test/not-pulled:never", "remoteUser": "nobody", "features": {"./tracer": {}}}"#,
    );
    let feature = ws.root.join(".devcontainer/tracer");
    std::fs::create_dir_all(&feature).unwrap();
    std::fs::write(
        feature.join("devcontainer-feature.json"),
        r#"{"id": "tracer", "version": "1.0.0", "capAdd": ["SYS_PTRACE"]}"#,
    )
    .unwrap();
    std::fs::write(feature.join("install.sh"), "#!/bin/sh\n").unwrap();
    let plan = ws.handoff(&["--plan", "--format", "json"]);
    let p = envelope(&plan);
    assert_eq!(plan.status.code(), Some(12), "{p}");
    let listed = requests(&p["error"]["details"]["permissions"]);
    assert!(
        listed.iter().any(|l| l.0 == "capability"
            && l.1 == "SYS_PTRACE"
            && l.2 == "Feature `./tracer`"
            && l.4 == "--allow cap:SYS_PTRACE"),
        "{listed:?}"
    );
    let plan = ws.handoff(&["--plan", "--format", "json", "--allow", "cap:SYS_PTRACE"]);
    let p = envelope(&plan);
    assert_eq!(plan.status.code(), Some(0), "{p}");
    let notes = p["result"]["permissionNotes"].to_string();
    assert!(notes.contains("devcell-test/not-pulled:never"), "{notes}");
}

#[test]
fn status_text_is_for_people_and_json_warnings_are_the_envelopes() {
    let Some(ws) = Ws::engine(
        "status_text_is_for_people_and_json_warnings_are_the_envelopes",
        r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#,
    ) else {
        return;
    };
    // A refusal is decided before the session is recorded (spec-note 0400, "All requests at
    // once"): the failed session here is a build that fails after the session began.
    ws.ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN false\n"),
    );
    git(&ws.root, &["add", "-A"]);
    git(&ws.root, &["commit", "-q", "-m", "a build that fails"]);
    // a failed session, then one on the host that exits 0
    let failed = ws.handoff(&[]);
    assert!(!failed.status.success(), "{}", stderr(&failed));
    let host = ws.handoff(&["--runtime", "host"]);
    assert_eq!(host.status.code(), Some(0), "{}", stderr(&host));
    let root = ws.root.to_str().unwrap();
    let out = ws.run(&["status", "--workspace-folder", root]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for debug in ["Repository)", "Exited {", "Failed {", "Ended", "exit_code"] {
        assert!(!text.contains(debug), "Debug formatting `{debug}`: {text}");
    }
    assert!(text.contains("(repository)"), "{text}");
    assert!(
        text.contains("on container: ended, started") && text.contains("ended: failed: "),
        "{text}"
    );
    assert!(
        text.contains("on host: ended, started") && text.contains("ended: exit 0"),
        "{text}"
    );
    let out = ws.run(&["status", "--workspace-folder", root, "--format", "json"]);
    let v = envelope(&out);
    assert!(v["result"].get("warnings").is_none(), "{v}");
    assert!(v["warnings"].is_array(), "{v}");
}

/// `<tmp>/src/api` (root's) with a worktree `<tmp>/ws/api` and a repository `<tmp>/ws/web`
/// (with a devcontainer.json), `<tmp>/ws` given to [`WORKSPACE_OWNER`]: git, run as that user,
/// refuses `api` for "dubious ownership" (its git directory belongs to root).
fn dubious_workspace() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src/api");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "-q"]);
    std::fs::write(src.join("README.md"), "api\n").unwrap();
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-q", "-m", "initial"]);
    git(
        &src,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feat",
            ws.join("api").to_str().unwrap(),
        ],
    );
    let web = ws.join("web");
    std::fs::create_dir_all(web.join(".devcontainer")).unwrap();
    std::fs::write(
        web.join(".devcontainer/devcontainer.json"),
        format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
    )
    .unwrap();
    git(&web, &["init", "-q"]);
    git(&web, &["add", "-A"]);
    git(&web, &["commit", "-q", "-m", "initial"]);
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", WORKSPACE_OWNER, WORKSPACE_OWNER))
        .arg(&ws)
        .status()
        .unwrap();
    assert!(status.success());
    (tmp, ws)
}

#[test]
fn a_repository_git_refuses_is_reported_per_repository() {
    // devcell runs git as the workspace's owner only when it is root
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var("DEVCELL_TEST_ENGINE").as_deref() != Ok("1"),
            "needs root to give the workspace to another user"
        );
        return;
    }
    let (tmp, ws) = dubious_workspace();
    let run = |args: &[&str]| {
        Command::new(assert_cmd::cargo::cargo_bin("devcell"))
            .env_clear()
            .env("HOME", tmp.path())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DEVCELL_STATE_DIR", tmp.path().join("state"))
            .args(args)
            .output()
            .unwrap()
    };
    let w = ws.to_str().unwrap();
    let out = run(&["status", "--workspace-folder", w, "--format", "json"]);
    let v = envelope(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    let repos = v["result"]["repos"].as_array().unwrap();
    let api = repos.iter().find(|r| r["name"] == "api").unwrap();
    let web = repos.iter().find(|r| r["name"] == "web").unwrap();
    for field in ["branch", "head", "dirty"] {
        assert!(api[field].is_null(), "{api}");
    }
    let error = api["error"].as_str().unwrap();
    assert!(
        error.contains("dubious ownership") && error.contains("chown"),
        "{error}"
    );
    assert!(!v.to_string().contains("git config --global"), "{v}");
    assert_eq!(web["branch"], "main", "{web}");
    assert!(web["error"].is_null());
    assert_eq!(v["warnings"][0]["code"], "git_unreadable", "{v}");
    let text = run(&["status", "--workspace-folder", w]);
    assert_eq!(text.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("repo api: git state unknown"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );

    // the plan warns and goes on
    let config = tmp.path().join("config.toml");
    std::fs::write(&config, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
    let c = config.to_str().unwrap();
    let args = [
        "handoff",
        "--workspace-folder",
        w,
        "--agent",
        "a",
        "--config-file",
        c,
        "--primary",
        "web",
        "--plan",
    ];
    let mut json = args.to_vec();
    json.extend(["--format", "json"]);
    let out = run(&json);
    let v = envelope(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    let w = v["warnings"].to_string();
    assert!(w.contains("git_unreadable") && w.contains("dubious"), "{w}");
    assert!(!v.to_string().contains("git config --global"), "{v}");
    let out = run(&args);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("warning    repository `api`"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn delete_names_each_kept_folder_by_what_it_is() {
    let Some(ws) = Ws::engine("delete_names_each_kept_folder_by_what_it_is", "{}") else {
        return;
    };
    let root = ws.root.to_str().unwrap();
    let text = |out: Output| {
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = text(ws.run(&["delete", "--workspace-folder", root]));
    assert!(
        out.contains(&format!("kept workspace folder {root} (a git repository)")),
        "{out}"
    );
    assert!(!out.contains("kept worktree"), "{out}");

    // a plain folder holding a worktree and a repository
    let plain = ws.ctx.tmp().join("plain");
    std::fs::create_dir_all(plain.join("web")).unwrap();
    git(&plain.join("web"), &["init", "-q"]);
    git(
        &ws.root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "t",
            plain.join("api").to_str().unwrap(),
        ],
    );
    let plain = std::fs::canonicalize(plain).unwrap();
    let p = plain.to_str().unwrap();
    let out = text(ws.run(&["delete", "--workspace-folder", p]));
    assert!(
        out.contains(&format!(
            "kept workspace folder {p} (a folder of repositories)"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("kept worktree {p}/api")), "{out}");
    assert!(out.contains(&format!("kept repository {p}/web")), "{out}");
    let empty = ws.ctx.tmp().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = std::fs::canonicalize(empty).unwrap();
    let e = empty.to_str().unwrap();
    let out = ws.run(&["delete", "--workspace-folder", e, "--format", "json"]);
    let v = envelope(&out);
    assert_eq!(
        v["result"]["kept"]["folders"][0],
        serde_json::json!({"path": e, "kind": "workspaceFolder", "git": "plain"}),
        "{v}"
    );
    let out = text(ws.run(&["delete", "--workspace-folder", e]));
    assert!(
        out.contains(&format!(
            "kept workspace folder {e} (a plain folder, not under git)"
        )),
        "{out}"
    );
}

#[test]
fn errors_name_the_config_file_and_carry_their_causes() {
    // no engine needed: both fail before anything is looked up
    let ws = Ws::new("{}");
    let root = ws.root.to_str().unwrap();
    let c = ws.config.to_str().unwrap();
    let out = ws.run(&[
        "handoff",
        "--workspace-folder",
        root,
        "--agent",
        "codex",
        "--config-file",
        c,
        "--plan",
    ]);
    assert_eq!(out.status.code(), Some(11));
    assert!(
        stderr(&out).contains(&format!(
            "no agent `codex` in devcell's config `{c}` (agents: a)"
        )),
        "{}",
        stderr(&out)
    );
    // the default location, absent
    let out = ws
        .command(&[
            "handoff",
            "--workspace-folder",
            root,
            "--agent",
            "codex",
            "--plan",
        ])
        .env("XDG_CONFIG_HOME", ws.ctx.tmp().join("xdg"))
        .output()
        .unwrap();
    let expected = format!(
        "`{}` (not found) (agents: none)",
        ws.ctx.tmp().join("xdg/devcell/config.toml").display()
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));

    let missing = ws.ctx.tmp().join("missing.toml");
    let m = missing.to_str().unwrap();
    let out = ws.run(&[
        "handoff",
        "--workspace-folder",
        root,
        "--agent",
        "a",
        "--config-file",
        m,
        "--format",
        "json",
    ]);
    let v = envelope(&out);
    let causes = v["error"]["details"]["causes"].to_string();
    assert!(causes.contains("No such file or directory"), "{v}");
    assert!(stderr(&out).contains("caused by: No such file or directory"));
}

#[test]
fn primary_help_and_the_agents_folder_agree() {
    let ws = Ws::new("{}");
    let multi = ws.ctx.tmp().join("multi");
    for name in ["api", "web"] {
        let dir = multi.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        if name == "api" {
            std::fs::create_dir_all(dir.join(".devcontainer")).unwrap();
            std::fs::write(
                dir.join(".devcontainer/devcontainer.json"),
                format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
            )
            .unwrap();
        }
        git(&dir, &["init", "-q"]);
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "initial", "--allow-empty"]);
    }
    let m = multi.to_str().unwrap();
    let c = ws.config.to_str().unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "handoff",
            "--workspace-folder",
            m,
            "--agent",
            "a",
            "--config-file",
            c,
            "--plan",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = ws.run(&args);
        let v = envelope(&out);
        assert_eq!(out.status.code(), Some(0), "{v}");
        v
    };
    // detected primary: it configures the container, the agent starts in the root
    let v = plan(&[]);
    assert_eq!(v["result"]["repos"][0]["name"], "api");
    assert_eq!(v["result"]["repos"][0]["role"], "primary");
    assert_eq!(v["result"]["cwd"], "/workspace");
    // chosen primary: the agent starts in it
    let v = plan(&["--primary", "api"]);
    assert_eq!(v["result"]["cwd"], "/workspace/api");
    // and the help says exactly that
    let help = ws.run(&["handoff", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("the agent starts in it")
            && help.contains("Without it the primary is detected")
            && help.contains("the agent starts in the workspace root"),
        "{help}"
    );
}

/// The text plan of a worktree names the git directory devcell mounts for it by what it is,
/// not as a mount "from command line".
#[test]
fn the_text_plan_names_the_git_directory_mounts() {
    let Some(ws) = Ws::engine(
        "the_text_plan_names_the_git_directory_mounts",
        &format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
    ) else {
        return;
    };
    let worktree = ws.ctx.tmp().join("wt");
    git(
        &ws.root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "task",
            worktree.to_str().unwrap(),
        ],
    );
    let out = ws.run(&[
        "handoff",
        "--workspace-folder",
        worktree.to_str().unwrap(),
        "--agent",
        "a",
        "--config-file",
        ws.config.to_str().unwrap(),
        "--plan",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let git_dir = ws.root.join(".git");
    let line = text
        .lines()
        .find(|l| l.starts_with("  permission") && l.contains(git_dir.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no permission line for {}: {text}", git_dir.display()));
    assert!(
        line.contains("git directory of a workspace repository") && !line.contains("command line"),
        "{line}"
    );
}

/// `doctor` exits 4 (`unhealthy`, spec-note 0455) when it reports the engine unreachable: the
/// report is still printed, stderr names the failing check, the envelope carries the report.
#[test]
fn doctor_exits_unhealthy_when_the_engine_is_unreachable() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |format: &str| {
        crate::support::devcell()
            .env("DOCKER_HOST", "unix:///nonexistent/devcell-doctor.sock")
            .env("DEVCELL_STATE_DIR", tmp.path().join("state"))
            .env("XDG_CACHE_HOME", tmp.path().join("cache"))
            .args(["doctor", "--format", format])
            .output()
            .unwrap()
    };
    let text = run("text");
    assert_eq!(text.status.code(), Some(4), "{}", stderr(&text));
    assert_eq!(stderr(&text), "error: not healthy: engine_unreachable\n");
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.starts_with("ERROR engine_unreachable: "), "{stdout}");
    assert!(stdout.ends_with("not healthy\n"), "{stdout}");
    let json = run("json");
    assert_eq!(json.status.code(), Some(4));
    let v = envelope(&json);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "unhealthy");
    assert_eq!(v["error"]["message"], "not healthy: engine_unreachable");
    assert_eq!(v["error"]["details"]["healthy"], false);
    assert_eq!(
        v["error"]["details"]["findings"][0]["code"],
        "engine_unreachable"
    );
    assert_eq!(v["error"]["details"]["findings"][0]["severity"], "error");
    assert!(!v["next_actions"].as_array().unwrap().is_empty(), "{v}");
}

/// `--config-file` is accepted, read and checked by every devcell command that has a config
/// (spec-note 0455): an invalid file is `config_invalid` (exit 10), located, before anything
/// else happens.
#[test]
fn config_file_is_read_by_every_devcell_command() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "bogus = [\n").unwrap();
    let ws = tmp.path().to_str().unwrap();
    for args in [
        &["delete", "--workspace-folder", ws][..],
        &["audit", "--workspace-folder", ws],
        &["doctor"],
        &["prune", "--dry-run"],
        &["status", "--workspace-folder", ws],
    ] {
        let out = crate::support::devcell()
            .env("DEVCELL_STATE_DIR", tmp.path().join("state"))
            .args(args)
            .arg("--config-file")
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(10), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with(&format!("error: {}:", bad.display())),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Hints name only flags the user gave or can give (spec-note 0455): `exec` without a container
/// never suggests dropping `--expect-existing-container`; `up` given it does; `audit
/// --workspace-folder` without a container says so plainly.
#[test]
fn hints_name_only_flags_given_or_available() {
    let Some(ws) = Ws::engine(
        "hints_name_only_flags_given_or_available",
        &format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#),
    ) else {
        return;
    };
    let root = ws.root.to_str().unwrap();
    let out = crate::support::devcell()
        .args(["exec", "--workspace-folder", root, "true"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: no dev container found (labels "),
        "{err}"
    );
    assert!(
        err.contains("hint: run `devcell up` first, or name the container with `--container-id`"),
        "{err}"
    );
    assert!(!err.contains("--expect-existing-container"), "{err}");

    let out = crate::support::devcell()
        .args([
            "up",
            "--workspace-folder",
            root,
            "--expect-existing-container",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("drop `--expect-existing-container`"), "{err}");
    assert!(
        String::from_utf8_lossy(
            &Command::new("docker")
                .args(["ps", "-aq", "--filter"])
                .arg(format!("label=devcontainer.local_folder={root}"))
                .bounded_output()
                .unwrap()
                .stdout
        )
        .trim()
        .is_empty(),
        "a container was created"
    );

    let out = crate::support::devcell()
        .args(["audit", "--workspace-folder", root])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(11));
    assert_eq!(
        stderr(&out),
        format!(
            "error: no dev container of workspace `{root}` to audit\n\nhint: create it with `devcell up --workspace-folder {root}` (or `devcell handoff`), or pass a container name or id from `docker ps -a` instead of `--workspace-folder`\n"
        )
    );
}

/// A handoff judges its configuration once, before it records its session, and `up` goes on
/// with that judgement: a cold handoff inspects the configured image three times before the
/// container is created: whether the engine has it (a closed network's registry judgement,
/// attack K12: an image the engine has is not pulled), once for the judgement, and once when
/// `up` prepares the image after `initializeCommand` (which the policy judges the container
/// by), where judging again in `up` made it four (spec-note 0400).
#[test]
fn a_handoff_inspects_the_image_once_for_its_judgement() {
    let Some(ws) = Ws::engine(
        "a_handoff_inspects_the_image_once_for_its_judgement",
        &format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
    ) else {
        return;
    };
    let out = ws.handoff(&["--log-level", "debug"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let created = err
        .find("creating container from")
        .unwrap_or_else(|| panic!("no container was created: {err}"));
    let inspections = err[..created]
        .lines()
        .filter(|l| {
            l.contains(" DEBUG ")
                && l.contains(&format!("image_info{{reference={BUSYBOX_IMAGE}}}"))
                && l.contains(" close ")
        })
        .count();
    assert_eq!(inspections, 3, "{err}");
    // and the container is looked up once for the handoff's plan, once under the lock, and
    // the workspace's containers once for what already runs before the fetch-back (F3)
    let finds = err[..created]
        .lines()
        .filter(|l| l.contains(" DEBUG find_containers") && l.contains(" close "))
        .count();
    assert_eq!(finds, 3, "{err}");
}

/// `handoff --plan` of a Compose configuration (spec-note 0609): under each network (`none`,
/// `allowlist`, `default`, with its own note) every service is judged
/// as the handoff judges it (a sidecar's `cap_add` refused until granted), each listed with its
/// requests and the container the handoff would create, start or reuse; nothing is created.
#[test]
fn the_plan_previews_a_compose_configurations_services() {
    let Some(ws) = Ws::engine(
        "the_plan_previews_a_compose_configurations_services",
        r#"{"dockerComposeFile": "compose.yml", "service": "app", "runServices": ["db"], "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    ) else {
        return;
    };
    // a project name of its own (the plan creates nothing; cleaned anyway)
    let project = "devcell-plan-compose-snapshot";
    ws.ctx
        .clean_label(&format!("com.docker.compose.project={project}"));
    ws.ctx.write(
        ".devcontainer/compose.yml",
        &format!(
            "name: {project}\nservices:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: sleep 600\n  db:\n    image: {BUSYBOX_IMAGE}\n    cap_add: [NET_ADMIN]\n  tools:\n    build: ./tools\n"
        ),
    );
    let snap = |name: &str, out: &Output| {
        let run = crate::support::context::Run::from(out.clone());
        crate::assert_run_snapshot!(name, Some(&ws.ctx), run);
    };
    // `none` (the handoff's default) and `allowlist` close the project networks (spec-note
    // 0606): judged alike, each with its own network note
    let none = ws.handoff(&["--plan", "--allow", "cap:NET_ADMIN"]);
    snap("handoff_plan_compose_none_text", &none);
    let allowlist = ws.handoff(&[
        "--plan",
        "--network",
        "allowlist",
        "--egress-allow",
        "web.test:8443",
        "--allow",
        "cap:NET_ADMIN",
    ]);
    snap("handoff_plan_compose_allowlist_text", &allowlist);
    let refused = ws.handoff(&["--plan", "--network", "default"]);
    assert_eq!(refused.status.code(), Some(12), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--allow cap:NET_ADMIN"),
        "{}",
        stderr(&refused)
    );
    let granted = ["--plan", "--network", "default", "--allow", "cap:NET_ADMIN"];
    snap("handoff_plan_compose_text", &ws.handoff(&granted));
    let json = ws.handoff(&[&granted[..], &["--format", "json"]].concat());
    assert!(json.status.success(), "{}", stderr(&json));
    snap("handoff_plan_compose_json", &json);
    // nothing of the project, nothing of the workspace
    for label in [
        format!("com.docker.compose.project={project}"),
        format!("devcontainer.local_folder={}", ws.root.display()),
    ] {
        let listed = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter"])
            .arg(format!("label={label}"))
            .bounded_output()
            .unwrap();
        assert!(listed.stdout.is_empty(), "{label}: {listed:?}");
    }
}

/// The handoff's network goes through the one chain of spec-note 0207: the flag, else the
/// agent's `network`, else `[security] network` as written, else `none`. No engine needed.
#[test]
fn the_plans_network_is_the_flag_the_agents_the_security_tables_or_none() {
    let ws = Ws::new(&format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#));
    let network = |config: &str, extra: &[&str]| {
        std::fs::write(&ws.config, config).unwrap();
        let out = ws.handoff(&[&["--plan", "--format", "json"], extra].concat());
        let plan = envelope(&out);
        plan["result"]["network"]
            .as_str()
            .unwrap_or_else(|| panic!("a network in the plan: {plan}"))
            .to_string()
    };
    let agent = "[agents.a]\ncommand = [\"true\"]\n";
    // nothing written: closed; the settings' defaults never open a handoff
    assert_eq!(network(agent, &[]), "none");
    // `[security]` as written
    let security = format!("[security]\nnetwork = \"default\"\n{agent}");
    assert_eq!(network(&security, &[]), "default");
    // the agent's over `[security]`
    assert_eq!(
        network(&format!("{security}network = \"none\"\n"), &[]),
        "none"
    );
    // the flag over both
    assert_eq!(
        network(
            &format!("{security}network = \"none\"\n"),
            &["--network", "default"]
        ),
        "default"
    );
}

/// Issue 27: a clone task never runs on the host. `--isolation clone --runtime host` is
/// refused (`config_invalid`, `details.reason` `clone_runtime_host`) for a plan as for a run,
/// before anything is made (no task folder); and when no engine answers, a clone task's
/// failure offers no `--runtime host` (it would only be refused), while a worktree handoff's
/// still does.
#[test]
fn a_clone_task_is_never_planned_run_or_offered_on_the_host() {
    let ws = Ws::new(r#"{"image": "busybox"}"#);
    for extra in [
        &["--isolation", "clone", "--runtime", "host", "--plan"][..],
        &["--isolation", "clone", "--runtime", "host"][..],
    ] {
        let mut args = extra.to_vec();
        args.extend(["--format", "json"]);
        let out = ws.handoff(&args);
        assert_eq!(out.status.code(), Some(10), "{extra:?}: {}", stderr(&out));
        let v = envelope(&out);
        assert_eq!(v["error"]["code"], "config_invalid", "{v:#}");
        assert_eq!(
            v["error"]["details"]["reason"], "clone_runtime_host",
            "{v:#}"
        );
    }
    // nothing of a task was made in devcell's state
    let made = walk(&ws.ctx.state());
    assert!(!made.iter().any(|p| p.contains("tasks")), "{made:?}");
    let without_engine = |isolation: &str| {
        let out = ws
            .command(&[
                "handoff",
                "--workspace-folder",
                ws.root.to_str().unwrap(),
                "--agent",
                "a",
                "--config-file",
                ws.config.to_str().unwrap(),
                "--isolation",
                isolation,
                "--format",
                "json",
            ])
            .env("DOCKER_HOST", "unix:///nonexistent/devcell-clone.sock")
            .output()
            .unwrap();
        let v = envelope(&out);
        assert_eq!(v["error"]["code"], "engine_unavailable", "{v:#}");
        (v["next_actions"].to_string(), stderr(&out))
    };
    let (actions, err) = without_engine("clone");
    assert!(!actions.contains("--runtime"), "{actions}");
    assert!(!err.contains("--runtime host"), "{err}");
    let (actions, _) = without_engine("worktree");
    assert!(actions.contains("--runtime"), "{actions}");
}

/// Every path below `dir` (none when it is missing).
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            out.push(e.path().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out
}

/// Issue 30: `[mail] worktrees = true` with `--runtime host` is never silently without its
/// channel: the plan (and so the handoff, which shares its warnings) warns that the agent has
/// no `devcell-mail`; `--no-mail` says so and silences it; without the setting nothing is said.
#[test]
fn mail_for_worktrees_with_the_host_runtime_is_said_to_be_absent() {
    let ws = Ws::new(r#"{"image": "busybox"}"#);
    let plan = |extra: &[&str]| {
        let mut args = vec!["--runtime", "host", "--plan", "--format", "json"];
        args.extend_from_slice(extra);
        let out = ws.handoff(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        envelope(&out)["warnings"].to_string()
    };
    assert!(!plan(&[]).contains("[mail] worktrees"));
    let config = std::fs::read_to_string(&ws.config).unwrap();
    std::fs::write(&ws.config, format!("[mail]\nworktrees = true\n\n{config}")).unwrap();
    let warned = plan(&[]);
    assert!(warned.contains("[mail] worktrees = true"), "{warned}");
    assert!(warned.contains("no `devcell-mail`"), "{warned}");
    assert!(!plan(&["--no-mail"]).contains("[mail] worktrees"));
}

/// A new agent's usual first failure: its program is not in the workspace's image. The shell's
/// exit 127 becomes devcell's, and the handoff names the cause where the user looks.
#[test]
fn an_agent_whose_program_is_not_in_the_image_is_named() {
    use crate::support::hostile::HostileRepo;
    let Some(repo) = HostileRepo::busybox("agent_not_in_image") else {
        return;
    };
    repo.config(&format!(
        r#"{{"image": "{}", "remoteUser": "nobody"}}"#,
        crate::support::docker::BUSYBOX_IMAGE
    ))
    .file("README", "x\n")
    .commit();
    let settings = repo.context().tmp().join("config.toml");
    std::fs::write(
        &settings,
        "[agents.a]\ncommand = [\"devcell-no-such-agent-program\"]\n",
    )
    .unwrap();
    let run = repo.context().run(
        "handoff",
        &["--agent", "a", "--config-file", settings.to_str().unwrap()],
    );
    assert_eq!(run.code, Some(127), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("agent `a` exited 127, the shell's \"command not found\""),
        "{}",
        run.stderr
    );
    repo.context().run("delete", &[]).ok();
}
