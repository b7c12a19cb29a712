//! Hostile repositories: see `super`. The workspace's git folder is writable from the
//! container (all of it but `config`, `hooks`, `info/` and the link files, spec-note 0413): a
//! `HEAD` it replaces with a FIFO, or a configuration of a repository it creates that
//! `[include]`s one, must not make the host's git, and every devcell command with it, wait for
//! ever (spec-note 0433).

use std::time::Duration;

use crate::support::deadline::Bounded as _;
use crate::support::{self, docker::BUSYBOX_IMAGE, hostile::HostileRepo};

fn mkfifo(path: &std::path::Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from(0o644)).unwrap();
}

#[test]
fn a_fifo_in_the_workspaces_git_folder_does_not_hang_devcell() {
    // a repository whose `HEAD` the container replaced with a FIFO
    let head = HostileRepo::new();
    head.config(&format!("{{\"image\": \"{BUSYBOX_IMAGE}\"}}"))
        .commit();
    std::fs::remove_file(head.path().join(".git/HEAD")).unwrap();
    mkfifo(&head.path().join(".git/HEAD"));

    // a plain workspace in which the container made a repository including a FIFO
    let plain = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(plain.path().join(".devcontainer")).unwrap();
    std::fs::write(
        plain.path().join(".devcontainer/devcontainer.json"),
        format!("{{\"image\": \"{BUSYBOX_IMAGE}\"}}"),
    )
    .unwrap();
    support::git::git(plain.path(), &["init", "-q"]);
    mkfifo(&plain.path().join(".git/pipe"));
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(plain.path().join(".git/config"))
        .unwrap();
    std::io::Write::write_all(&mut config, b"[include]\n\tpath = pipe\n").unwrap();

    for ws in [head.path(), plain.path()] {
        for command in ["read-configuration", "status"] {
            let out = support::devcell()
                .arg(command)
                .arg("--workspace-folder")
                .arg(ws)
                // each git call that waits on the FIFO is killed after 1 s (the variable only
                // shortens devcell's 10 s deadline); far above that, a hang is killed
                .env("DEVCELL_GIT_DEADLINE_SECS", "1")
                .timeout(Duration::from_secs(150))
                .output()
                .expect("devcell runs");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.code().is_some(),
                "`{command}` in {} was killed: it waited on the FIFO: {stderr}",
                ws.display()
            );
            assert!(
                out.status.success(),
                "`{command}` in {}: {stderr}",
                ws.display()
            );
        }
    }
}

/// Attack M7: under `hardened` with default flags, a plain `up` binds the workspace's git
/// directories read-only on themselves (spec-note 0443): the repository's `postCreateCommand`
/// appends `core.fsmonitor` to the host's `.git/config` and to a nested repository's, writes
/// `.git/commondir`, and tries to rename `.git` away and plant another; none of it reaches the
/// host, and the user's `git status` there runs nothing. `--allow workspace-git:rw` restores the
/// writable `.git` (the attack then lands: the test can fail).
#[test]
fn a_lifecycle_hook_of_a_plain_up_cannot_write_the_hosts_git_directories() {
    let Some(repo) = HostileRepo::busybox(
        "a_lifecycle_hook_of_a_plain_up_cannot_write_the_hosts_git_directories",
    ) else {
        return;
    };
    let target = crate::support::hostile::HostTarget::new();
    let hook = format!(
        "for c in .git/config vendor/lib/.git/config; do \
           printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n' >> $c && echo \"wrote $c\"; \
         done; \
         echo /tmp > .git/commondir && echo wrote-commondir; \
         mv .git .git-old && mkdir .git && echo planted > .git/HEAD && echo renamed; \
         true",
        m = target.marker().display()
    );
    repo.config(
        &serde_json::json!({"image": BUSYBOX_IMAGE, "postCreateCommand": hook}).to_string(),
    );
    std::fs::create_dir_all(repo.path().join("vendor/lib")).unwrap();
    support::git::git(&repo.path().join("vendor/lib"), &["init", "-q"]);
    repo.file(".gitignore", "vendor/\n").commit();
    let config = repo.path().join(".git/config");
    let nested = repo.path().join("vendor/lib/.git/config");
    let (before, nested_before) = (
        std::fs::read(&config).unwrap(),
        std::fs::read(&nested).unwrap(),
    );
    let ctx = repo.context();
    let up = ctx.run("up", &[]);
    up.ok();
    assert_eq!(up.last_json()["outcome"], "success", "{}", up.stderr);
    assert!(
        up.stderr.contains("are read-only in the container"),
        "up says so: {}",
        up.stderr
    );
    for done in ["wrote .git", "wrote vendor", "wrote-commondir", "renamed"] {
        assert!(!up.stderr.contains(done), "{done}: {}", up.stderr);
    }
    assert_eq!(
        std::fs::read(&config).unwrap(),
        before,
        "the host's .git/config"
    );
    assert_eq!(
        std::fs::read(&nested).unwrap(),
        nested_before,
        "vendor/lib/.git/config"
    );
    assert!(!repo.path().join(".git/commondir").exists());
    assert!(
        !repo.path().join(".git-old").exists(),
        ".git was not renamed"
    );
    for ws in [repo.path().to_path_buf(), repo.path().join("vendor/lib")] {
        let _ = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "status", "--porcelain"])
            .current_dir(&ws)
            .output();
    }
    target.assert_untouched();

    // the grant leaves them writable, as before: the same hook then lands
    let granted = ctx.run(
        "up",
        &["--remove-existing-container", "--allow", "workspace-git:rw"],
    );
    granted.ok();
    assert!(
        granted.stderr.contains("workspace-git:rw"),
        "a warning: {}",
        granted.stderr
    );
    // the hook renamed `.git` away and planted another: what the covers stopped above
    assert!(
        granted.stderr.contains("renamed") && repo.path().join(".git-old").exists(),
        "the grant keeps `.git` writable: {}",
        granted.stderr
    );
}

/// Attack M5: `handoff --container` of a container devcell did not create, whose plain bind of
/// the workspace hides `.git` under a read-only bind, but which also mounts a `local` volume
/// made with `o=bind,device=<workspace>` at `/cache`: the engine reports that mount as a volume
/// in its own storage, and the agent wrote the user's `.git/config` through it. The volume is
/// judged as the bind it is: refused before any session, the agent never runs, `.git/config`
/// is byte-equal.
#[test]
fn an_external_containers_bind_backed_volume_onto_the_workspace_is_refused() {
    let Some(ctx) = crate::support::context::TestContext::busybox(
        "an_external_containers_bind_backed_volume_onto_the_workspace_is_refused",
    ) else {
        return;
    };
    let ctx = ctx.isolated();
    ctx.write("README.md", "the task\n");
    support::git::git(ctx.path(), &["init", "-q"]);
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    let config_before = std::fs::read(ws.join(".git/config")).unwrap();
    let volume = support::per_run("devcell-test-wsvol");
    ctx.cleanup().volume(&volume);
    let made = std::process::Command::new("docker")
        .args([
            "volume",
            "create",
            "--driver",
            "local",
            "-o",
            "type=none",
            "-o",
            "o=bind",
        ])
        .arg("-o")
        .arg(format!("device={}", ws.display()))
        .args(["--label", "devcell.test=1", &volume])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let c = external_busybox(&ctx, &ws, &["-v", &format!("{volume}:/cache")]);
    let marker = ctx.tmp().join("agent-ran");
    let out = handoff_external(
        &ctx,
        "evil",
        "[\"sh\", \"-c\", \"touch /cache/agent-ran; printf '[core]\\\\n\\\\tfsmonitor = true\\\\n' >> /cache/.git/config\"]",
        &c.id,
        &["--format", "json"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "refused: {stderr}");
    assert!(
        stderr.contains("could write the host's git directory"),
        "{stderr}"
    );
    assert!(
        !ws.join("agent-ran").exists() && !marker.exists(),
        "the agent never ran"
    );
    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap(),
        config_before,
        "the user's .git/config"
    );
    let status = ctx.output("status", &["--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&status.stdout)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        v["result"]["sessions"],
        serde_json::json!([]),
        "no session: {v}"
    );
}

/// `git status` as the user on the host, in `dir`, with a fresh `HOME` (no user configuration).
pub(super) fn host_git_status(dir: &std::path::Path) {
    let home = tempfile::tempdir().unwrap();
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--porcelain"])
        .current_dir(dir)
        .env("HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output();
}

/// Attack N7: under `hardened`, a lifecycle hook makes a NEW git directory with
/// `core.fsmonitor`: `lib/.git` in the folder of a submodule that is not checked out (the
/// committed index has the gitlink `lib` and `.gitmodules`: the host's `git status` at the
/// root enters it), and `src/.git` in a tracked folder. The submodule folder is bound
/// read-only (the hook cannot make `lib/.git`), and what the hook made elsewhere is moved into
/// devcell's state once the hooks ran, said in the result (spec-note 0448): the user's
/// `git status` at the root and in `src` runs nothing.
#[test]
fn a_git_directory_a_hook_creates_is_not_left_for_the_hosts_git() {
    let Some(repo) =
        HostileRepo::busybox("a_git_directory_a_hook_creates_is_not_left_for_the_hosts_git")
    else {
        return;
    };
    let target = crate::support::hostile::HostTarget::new();
    let hook = format!(
        "plant() {{ mkdir -p $1/objects $1/refs && echo 'ref: refs/heads/main' > $1/HEAD && \
           printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {m}; false\"\\n' > $1/config; }}; \
         plant lib/.git && echo planted-lib; plant src/.git && echo planted-src; true",
        m = target.marker().display()
    );
    repo.config(
        &serde_json::json!({"image": BUSYBOX_IMAGE, "postCreateCommand": hook}).to_string(),
    )
    .file(
        ".gitmodules",
        "[submodule \"lib\"]\n\tpath = lib\n\turl = https://example.invalid/lib.git\n",
    )
    .file("src/main.c", "int main(void) { return 0; }\n");
    support::git::git(repo.path(), &["add", "-A"]);
    let gitlink = format!("160000,{},lib", "1".repeat(40));
    support::git::git(
        repo.path(),
        &["update-index", "--add", "--cacheinfo", &gitlink],
    );
    std::fs::create_dir_all(repo.path().join("lib")).unwrap();
    repo.commit();
    let state = tempfile::tempdir().unwrap();
    let up: crate::support::context::Run = repo
        .context()
        .command()
        .env("DEVCELL_STATE_DIR", state.path())
        .args(["up", "--workspace-folder"])
        .arg(repo.path())
        .long_output()
        .expect("devcell runs")
        .into();
    up.ok();
    let result = up.last_json();
    assert_eq!(result["outcome"], "success", "{}", up.stderr);
    assert!(
        !up.stderr.contains("planted-lib"),
        "the submodule's folder is read-only: {}",
        up.stderr
    );
    assert!(!repo.path().join("lib/.git").exists());
    // the hook made `src/.git`; it is moved aside, loudly
    assert!(up.stderr.contains("planted-src"), "{}", up.stderr);
    assert!(!repo.path().join("src/.git").exists());
    assert!(repo.path().join("src/main.c").exists());
    assert!(up.stderr.contains("git_dir_quarantined"), "{}", up.stderr);
    let moved = &result["devcell"]["quarantinedGit"][0];
    assert_eq!(moved["path"], "src/.git", "{result}");
    let to = std::path::PathBuf::from(moved["movedTo"].as_str().unwrap());
    assert!(
        to.starts_with(state.path()) && to.join("config").is_file(),
        "{to:?}"
    );
    for dir in [repo.path().to_path_buf(), repo.path().join("src")] {
        host_git_status(&dir);
    }
    target.assert_untouched();
}

/// Attack N6: `handoff --container` of a container running as root whose
/// `devcontainer.metadata` label (repository-derived when the repository's Dockerfile made
/// it) has a `postAttachCommand` that records `id` and leaves a root set-uid copy of busybox
/// in the workspace. Under `hardened` the root agent is refused before anything runs in the
/// container (spec-note 0449): no `HOOK-ID`, no set-uid file.
#[test]
fn an_external_root_containers_hooks_do_not_run_before_the_refusal() {
    let Some(ctx) = crate::support::context::TestContext::busybox(
        "an_external_root_containers_hooks_do_not_run_before_the_refusal",
    ) else {
        return;
    };
    let ctx = ctx.isolated();
    ctx.write("README.md", "the task\n");
    support::git::git(ctx.path(), &["init", "-q"]);
    support::git::git(ctx.path(), &["add", "-A"]);
    support::git::git(ctx.path(), &["commit", "-q", "-m", "c1"]);
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    let metadata = serde_json::json!([{
        "postAttachCommand": "id > /workspace/HOOK-ID; cp /bin/busybox /workspace/suid-bb; chmod 4755 /workspace/suid-bb"
    }])
    .to_string();
    let c = external_busybox(
        &ctx,
        &ws,
        &["--label", &format!("devcontainer.metadata={metadata}")],
    );
    let out = handoff_external(
        &ctx,
        "benign",
        "[\"sh\", \"-c\", \"echo agent ran > /workspace/AGENT-RAN\"]",
        &c.id,
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "refused: {stderr}");
    assert!(stderr.contains("the agent would run as root"), "{stderr}");
    for file in ["HOOK-ID", "AGENT-RAN", "suid-bb"] {
        assert!(!ws.join(file).exists(), "{file} exists: {stderr}");
    }
}

/// A container devcell did not create (busybox, no network) with the workspace `ws` at
/// `/workspace` and its `.git` hidden under a read-only bind of an empty folder, plus `extra`
/// `docker run` options.
fn external_busybox(
    ctx: &crate::support::context::TestContext,
    ws: &std::path::Path,
    extra: &[&str],
) -> support::docker::TestContainer {
    let empty = ctx.tmp().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let mut options = vec![
        "--network".to_string(),
        "none".to_string(),
        "-v".to_string(),
        format!("{}:/workspace", ws.display()),
        "-v".to_string(),
        format!("{}:/workspace/.git:ro", empty.display()),
    ];
    options.extend(extra.iter().map(|o| o.to_string()));
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    support::docker::TestContainer::run_with(&options, BUSYBOX_IMAGE, &["sleep", "600"])
}

/// `handoff --agent AGENT --container ID` plus `extra`, with a settings file (`--config-file`)
/// whose `[agents.AGENT]` runs `command` (a TOML array).
fn handoff_external(
    ctx: &crate::support::context::TestContext,
    agent: &str,
    command: &str,
    container: &str,
    extra: &[&str],
) -> std::process::Output {
    let config = ctx.tmp().join("config.toml");
    std::fs::write(&config, format!("[agents.{agent}]\ncommand = {command}\n")).unwrap();
    let mut args = vec![
        "--agent",
        agent,
        "--config-file",
        config.to_str().unwrap(),
        "--container",
        container,
    ];
    args.extend_from_slice(extra);
    ctx.output("handoff", &args)
}
