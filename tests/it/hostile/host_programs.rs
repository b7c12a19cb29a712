//! The host programs devcell starts (spec-note 0414): traced with `strace -f` (successful
//! `execve`s and their environments), every program `up` and `build` start is one of devcell's
//! tools, and each was started with the hardened environment (`formats::host_tool::harden_tool`,
//! or devcell's own host git): the builders' git provenance off, git with no system or global
//! configuration, no lazy fetch, fsmonitor and hooks off. The repository ships a build context
//! laid out as a git directory whose configuration runs a command (a planted `core.fsmonitor`,
//! and a partial clone whose missing `HEAD` is fetched lazily through a planted
//! `core.sshCommand`): the marker never appears on the host. Engine-agnostic: the programs are
//! judged by their environment, and the allowed names include Podman's.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::git::git;

use super::compose_projects::{CONFIG, own_project, project_containers};

/// The programs devcell may start on the host for `up`/`build` of a configuration without a
/// granted host command: itself (the egress proxy), its host git, the Docker CLI (which runs
/// its Compose plugin) or Podman's, and Compose.
const ALLOWED: &[&str] = &["devcell", "git", "docker", "docker-compose", "podman"];

/// What every program devcell starts must have in its environment.
const HARDENED: &[&str] = &[
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    "GIT_NO_LAZY_FETCH=1",
    "GIT_CONFIG_KEY_0=core.fsmonitor",
    "GIT_CONFIG_VALUE_0=false",
    "GIT_CONFIG_KEY_1=core.hooksPath",
    "GIT_CONFIG_VALUE_1=/dev/null",
];

/// One successful `execve` of the trace: the program and the whole traced line (argv and
/// environment as strace prints them).
#[derive(Debug)]
struct Exec {
    program: String,
    line: String,
}

impl Exec {
    fn name(&self) -> &str {
        self.program.rsplit('/').next().unwrap_or(&self.program)
    }

    fn has(&self, variable: &str) -> bool {
        self.line.contains(&format!("\"{variable}\""))
    }
}

/// `strace`, or a clear failure: the engine tests need it (`scripts/services` installs it).
fn strace() -> bool {
    let found = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found || std::env::var("DEVCELL_TEST_ENGINE").as_deref() != Ok("1"),
        "the host-program trace tests need `strace` (`apt-get install strace`; scripts/services installs it)"
    );
    found
}

/// Runs `devcell <command> --workspace-folder <ws> <args>` under `strace -f` and returns its
/// output and every program started below it (devcell's own first `execve` left out).
fn traced(ctx: &TestContext, command: &str, args: &[&str]) -> (std::process::Output, Vec<Exec>) {
    let trace = tempfile::tempdir().unwrap();
    let inner = ctx.command();
    let mut cmd = Command::new("strace");
    cmd.env_clear()
        .envs(
            inner
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .args([
            "-f",
            "-ff",
            "-qq",
            "-v",
            "-s",
            "4096",
            "-e",
            "trace=execve",
            "-o",
        ])
        .arg(trace.path().join("t"))
        .arg(inner.get_program())
        .arg(command)
        .arg("--workspace-folder")
        .arg(ctx.path())
        .args(args)
        .stdin(Stdio::null());
    let out = cmd.output().expect("strace runs");
    let devcell = PathBuf::from(inner.get_program());
    let mut execs = Vec::new();
    for file in std::fs::read_dir(trace.path()).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("execve(\"") else {
                continue;
            };
            if !line.ends_with("= 0") {
                continue;
            }
            let program = rest.split('"').next().unwrap_or_default().to_string();
            let root = Path::new(&program) == devcell && line.contains("\"--workspace-folder\"");
            if !root {
                execs.push(Exec {
                    program,
                    line: line.to_string(),
                });
            }
        }
    }
    (out, execs)
}

/// Every traced program is an allowed one and was started hardened; the builders' git
/// provenance is off for every program but git itself.
#[track_caller]
fn assert_hardened(what: &str, execs: &[Exec]) {
    for exec in execs {
        assert!(
            ALLOWED.contains(&exec.name()),
            "{what}: devcell started `{}` on the host: {}",
            exec.program,
            exec.line
        );
        for variable in HARDENED {
            assert!(
                exec.has(variable),
                "{what}: `{}` was started without {variable}: {}",
                exec.program,
                exec.line
            );
        }
        if exec.name() != "git" {
            assert!(
                exec.has("BUILDX_GIT_INFO=0"),
                "{what}: `{}` was started with the builders' git provenance on: {}",
                exec.program,
                exec.line
            );
        }
    }
}

/// Plants `<ws>/<rel>` as a git repository whose configuration runs `touch <marker>`: the
/// fsmonitor of every `git status`, and the ssh command of a lazy fetch of its missing `HEAD`
/// (a partial clone with a promisor remote), as ordinary files a repository can commit.
fn plant_git_dir(ctx: &TestContext, rel: &str, marker: &Path) {
    let dir = ctx.path().join(rel);
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-qm", "context"]);
    let touch = format!("touch {}; false", marker.display());
    for (key, value) in [
        ("core.fsmonitor", touch.as_str()),
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.url", "ssh://127.0.0.1/none"),
        ("remote.origin.promisor", "true"),
        ("core.sshCommand", touch.as_str()),
    ] {
        git(&dir, &["config", key, value]);
    }
    let head = dir.join(".git/refs/heads/main");
    std::fs::write(&head, format!("{}\n", "1".repeat(40))).unwrap();
}

/// A Compose project with a `build:` whose context ships a planted git directory: `build`,
/// `up` and `handoff` start only devcell's tools, all hardened, and the planted commands never run. The
/// control (Docker): plain `docker compose build` of the same files runs them, so the plant
/// is live.
#[test]
fn a_compose_build_starts_only_hardened_tools_and_runs_no_planted_git_command() {
    let Some(ctx) = TestContext::busybox("hostile_host_programs_compose") else {
        return;
    };
    if !strace() {
        return;
    }
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    ctx.remove_images_matching(&format!("{project}-*"));
    let marker = ctx.tmp().join("planted-git-ran");
    ctx.write(
        ".devcontainer/ctx/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN true\n"),
    );
    plant_git_dir(&ctx, ".devcontainer/ctx", &marker);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        "services:\n  app:\n    build: {context: ctx, pull: false}\n    command: [\"sleep\", \"100000\"]\n",
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));

    for command in ["build", "up"] {
        let (out, execs) = traced(&ctx, command, &[]);
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            execs.iter().any(|e| e.name() == "docker-compose"
                || (e.name() == "docker" && e.has("compose"))),
            "{command}: the trace saw no Compose: {execs:#?}"
        );
        assert_hardened(command, &execs);
        assert!(
            !marker.exists(),
            "{command}: the planted git configuration ran on the host"
        );
    }
    assert_eq!(project_containers(&project).len(), 1);

    // the handoff of the same project (brought up closed, so `up`'s is removed first), with an
    // agent that exits at once; Podman 4.3 cannot close a Compose project network (spec-note
    // 0300), so there the handoff keeps the project's network: the programs started are the same
    ctx.run("down", &["--remove"]).ok();
    let settings = ctx.tmp().join("config.toml");
    std::fs::write(&settings, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
    let settings = settings.to_string_lossy().into_owned();
    let mut args = vec![
        "--agent",
        "a",
        "--config-file",
        &settings,
        "--format",
        "json",
    ];
    if crate::support::engine::engine_is_podman() {
        args.extend(["--network", "default"]);
    }
    let (out, execs) = traced(&ctx, "handoff", &args);
    assert!(
        out.status.success(),
        "handoff: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        execs
            .iter()
            .any(|e| e.name() == "docker-compose" || e.has("compose")),
        "handoff: the trace saw no Compose: {execs:#?}"
    );
    assert_hardened("handoff", &execs);
    assert!(
        !marker.exists(),
        "handoff: the planted git configuration ran on the host"
    );

    // control: Compose as a user would run it runs the planted command (BuildKit's git
    // provenance; Podman builds with the classic builder, which runs no git)
    if !crate::support::engine::engine_is_podman() {
        let out = Command::new("docker")
            .args(["compose", "--project-name", &project, "-f"])
            .arg(ctx.path().join(".devcontainer/docker-compose.yml"))
            .arg("build")
            .env_remove("BUILDX_GIT_INFO")
            .env_remove("GIT_NO_LAZY_FETCH")
            .bounded_output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(
            marker.exists(),
            "the control did not run the planted command: the test proves nothing"
        );
    }
}

/// A Dockerfile configuration whose build context (`.devcontainer`) ships the planted git
/// directory: devcell builds through the engine's API, so `build` and `up` start no program
/// but its own hardened host git.
#[test]
fn a_dockerfile_build_starts_no_program_but_hardened_git() {
    let Some(ctx) = TestContext::busybox("hostile_host_programs_dockerfile") else {
        return;
    };
    if !strace() {
        return;
    }
    let ctx = ctx.isolated();
    let token = format!("hostprograms-{}", std::process::id());
    let label = format!("hostile.test={token}");
    ctx.cleanup().label(&label).images_labelled(&label);
    let marker = ctx.tmp().join("planted-git-ran");
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nLABEL {label}\nRUN true\n"),
    );
    plant_git_dir(&ctx, ".devcontainer", &marker);
    let ctx = ctx.config(
        r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody", "overrideCommand": true}"#,
    );
    for command in ["build", "up"] {
        let (out, execs) = traced(&ctx, command, &[]);
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_hardened(command, &execs);
        assert!(
            execs
                .iter()
                .all(|e| e.name() == "git" || e.name() == "devcell"),
            "{command}: {execs:#?}"
        );
        assert!(
            !marker.exists(),
            "{command}: the planted git configuration ran on the host"
        );
    }
}
