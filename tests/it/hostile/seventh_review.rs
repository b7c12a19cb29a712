//! Engine reproductions of the seventh attacker's findings (spec-note 0400, "Attacks found by
//! the seventh attacker's review"): a sidecar in the primary's pid namespace (F0), a bind
//! source devcell cannot resolve (F1), a named volume whose driver options bind the workspace
//! (F6). Each asserts on the host: nothing created or mounted, the host's `.git/config`
//! byte-identical, a human's `git status` runs nothing.

use std::path::Path;

use super::compose_projects::{own_project, project_containers};
use crate::support::context::docker_lines;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::hostile::{HostTarget, HostileRepo, recorded_state};

/// A Compose devcontainer.json whose primary `app` mounts the repository at `/workspace`.
const COMPOSE_CONFIG: &str = r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody",
    "updateRemoteUserUID": true, "workspaceFolder": "/workspace"}"#;

/// The primary `app`, sleeping, with the repository at `/workspace`.
fn primary() -> String {
    format!(
        "  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    \
         volumes: [\"..:/workspace\"]\n"
    )
}

/// An `out/` folder every container user may write (the sidecars report there).
fn writable_out(repo: &HostileRepo) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        repo.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
}

/// Runs a handoff of `repo` with an agent running `agent` (a shell script) and `extra` flags.
fn handoff(repo: &HostileRepo, agent: &str, extra: &[&str]) -> crate::support::context::Run {
    let settings = repo.context().tmp().join("config.toml");
    std::fs::write(
        &settings,
        format!(
            "[agents.a]\ncommand = {}\n",
            serde_json::to_string(&["sh", "-c", agent]).unwrap()
        ),
    )
    .unwrap();
    let mut args = vec![
        "--agent",
        "a",
        "--config-file",
        settings.to_str().unwrap(),
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    repo.context().run("handoff", &args)
}

/// The text of a handoff refused for a permission (exit 12, the JSON envelope and stderr).
#[track_caller]
fn refused(run: &crate::support::context::Run) -> String {
    assert_eq!(run.code, Some(12), "{}\n{}", run.stdout, run.stderr);
    format!("{}\n{}", run.stdout, run.stderr)
}

/// An agent that waits (bounded) until `out/side.txt` holds `done`.
const WAIT_FOR_SIDE: &str = "i=0; while ! grep -q done out/side.txt 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; true";

/// A human's `git status` in `repo`, then: the host's `.git/config` is `before` and nothing
/// ran on the host.
fn assert_host_git_untouched(repo: &Path, before: &[u8], target: &HostTarget) {
    assert_eq!(
        std::fs::read(repo.join(".git/config")).unwrap(),
        before,
        "the host's .git/config changed"
    );
    assert!(repo.join(".git").is_dir(), "the host's .git was moved");
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--porcelain"])
        .current_dir(repo)
        .output();
    target.assert_untouched();
}

/// F0: a sidecar that joins the primary's pid namespace (`pid: "service:app"`) reaches the
/// primary's mounts through `/proc/<pid>/root`, and kept the host's `.git` once the primary
/// stopped. Without a grant the handoff is refused naming `namespace:pid:service:app`, before
/// anything is created or recorded. With the grant, the sidecar probes every process's root
/// for the host's secret git configuration for the whole session and until it is stopped:
/// it never reads it (the peers stop before the primary) and nothing runs on the host.
#[test]
fn a_sidecar_in_the_primarys_pid_namespace_never_reaches_the_host_git() {
    let Some(repo) = HostileRepo::busybox("hostile_f0_pid_service") else {
        return;
    };
    let target = HostTarget::new();
    let project = own_project(repo.context());
    let probe = format!(
        "echo probing >> /w/out/side.txt; n=0; \
         while true; do \
           for c in /proc/[0-9]*/root/workspace/.git/config /w/.git/config; do \
             grep -q devcell-secret-token $$c 2>/dev/null && echo leaked $$c >> /w/out/side.txt; \
             printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> $$c 2>/dev/null; \
           done; \
           n=$$((n+1)); [ $$n = 20 ] && echo done >> /w/out/side.txt; sleep 0.05; \
         done",
        m = target.marker().display()
    );
    let side = serde_json::to_string(&["sh", "-c", &probe]).unwrap();
    repo.config(COMPOSE_CONFIG)
        .file(
            ".devcontainer/docker-compose.yml",
            &format!(
                "services:\n{}  side:\n    image: {BUSYBOX_IMAGE}\n    pid: \"service:app\"\n    \
                 volumes: [\"..:/w\"]\n    command: {side}\n",
                primary()
            ),
        )
        .file("out/.keep", "")
        .commit();
    writable_out(&repo);
    crate::support::git::git(
        repo.path(),
        &["config", "devcell.token", "devcell-secret-token"],
    );
    let before = std::fs::read(repo.path().join(".git/config")).unwrap();

    let text = refused(&handoff(&repo, WAIT_FOR_SIDE, &[]));
    assert!(text.contains("namespace:pid:service:app"), "{text}");
    assert!(project_containers(&project).is_empty(), "a container made");
    assert_eq!(
        recorded_state(&repo.context().state()),
        Vec::<std::path::PathBuf>::new()
    );
    assert_host_git_untouched(repo.path(), &before, &target);

    let run = handoff(
        &repo,
        WAIT_FOR_SIDE,
        &["--allow", "namespace:pid:service:app"],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let side_out = std::fs::read_to_string(repo.path().join("out/side.txt")).unwrap_or_default();
    assert!(
        side_out.contains("done"),
        "the sidecar did not probe: {side_out}"
    );
    assert!(!side_out.contains("leaked"), "{side_out}");
    assert_host_git_untouched(repo.path(), &before, &target);
    repo.context().run("down", &["--remove"]);
    assert!(project_containers(&project).is_empty());
}

/// F1: a committed link loop in a bind source (the engine, root, follows what devcell
/// cannot resolve; a folder devcell cannot search is the same case for a non-root user). A
/// container's `mounts` bind and a Compose sidecar's bind through it are each refused as
/// unresolvable, never judged by their text and never grantable: nothing is created,
/// recorded or mounted, even with `--allow mount:/`.
#[test]
fn a_bind_source_devcell_cannot_resolve_is_refused_and_nothing_is_mounted() {
    let Some(repo) = HostileRepo::busybox("hostile_f1_unresolvable") else {
        return;
    };
    let target = HostTarget::new();
    let project = own_project(repo.context());
    repo.symlink("loop", "loop")
        .config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
                "mounts": ["type=bind,source=${{localWorkspaceFolder}}/loop/hostroot,target=/host"]}}"#
        ))
        .commit();
    let before = std::fs::read(repo.path().join(".git/config")).unwrap();
    let labelled = format!("label=devcontainer.local_folder={}", repo.path().display());
    for grants in [&[][..], &["--allow", "mount:/"][..]] {
        let refused = repo.context().run("up", grants);
        let stderr = refused.failed();
        assert!(stderr.contains("loop/hostroot"), "{stderr}");
        assert!(
            stderr.contains("cannot") && stderr.contains("resolv"),
            "not refused as unresolvable: {stderr}"
        );
        assert!(
            docker_lines(&["ps", "-aq", "--filter", &labelled]).is_empty(),
            "a container was created"
        );
    }

    // the same link in a Compose sidecar's bind (a request never granted)
    repo.config(COMPOSE_CONFIG).file(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{}  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    \
             volumes: [\"../loop/hostroot:/host\"]\n",
            primary()
        ),
    );
    for grants in [&[][..], &["--allow", "mount:/"][..]] {
        let text = refused(&handoff(&repo, "true", grants));
        assert!(text.contains("loop/hostroot"), "{text}");
        assert!(text.contains("cannot resolve"), "{text}");
        assert!(project_containers(&project).is_empty(), "a container made");
        assert!(
            docker_lines(&["ps", "-aq", "--filter", &labelled]).is_empty(),
            "a container was created"
        );
    }
    assert_eq!(
        recorded_state(&repo.context().state()),
        Vec::<std::path::PathBuf>::new()
    );
    assert_host_git_untouched(repo.path(), &before, &target);
}

/// F6: a named volume whose driver options bind the workspace (`type: none, o: bind,
/// device: <workspace>`) mounted in a sidecar is the bind it is: `.git` below its target is
/// covered like the primary's. The sidecar renames `.git`, plants `core.fsmonitor` and
/// searches for the host's secret git configuration: none of it reaches the host.
#[test]
fn a_bind_backed_volume_of_the_workspace_gets_the_git_cover() {
    let Some(repo) = HostileRepo::busybox("hostile_f6_bind_volume") else {
        return;
    };
    let target = HostTarget::new();
    let project = own_project(repo.context());
    let ws = std::fs::canonicalize(repo.path()).unwrap();
    let out = "/v/out/side.txt";
    let script = format!(
        "mv /v/.git /v/git-old 2>/dev/null && echo renamed-git >> {out}; \
         printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> /v/.git/config 2>/dev/null; \
         grep -q devcell-secret-token /v/.git/config 2>/dev/null && echo read-config >> {out}; \
         echo done >> {out}; sleep 100000",
        m = target.marker().display()
    );
    let side = serde_json::to_string(&["sh", "-c", &script]).unwrap();
    repo.config(COMPOSE_CONFIG)
        .file(
            ".devcontainer/docker-compose.yml",
            &format!(
                "services:\n{}  side:\n    image: {BUSYBOX_IMAGE}\n    volumes: [\"ws:/v\"]\n    \
                 command: {side}\nvolumes:\n  ws:\n    driver_opts: {{type: none, o: bind, device: \"{}\"}}\n",
                primary(),
                ws.display()
            ),
        )
        .file("out/.keep", "")
        .commit();
    writable_out(&repo);
    crate::support::git::git(
        repo.path(),
        &["config", "devcell.token", "devcell-secret-token"],
    );
    let before = std::fs::read(repo.path().join(".git/config")).unwrap();
    let run = handoff(&repo, WAIT_FOR_SIDE, &[]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let side_out = std::fs::read_to_string(repo.path().join("out/side.txt")).unwrap_or_default();
    assert_eq!(
        side_out, "done\n",
        "the sidecar renamed or read the host's .git"
    );
    assert_host_git_untouched(repo.path(), &before, &target);
    repo.context().run("down", &["--remove"]);
    assert!(project_containers(&project).is_empty());
}

/// A listener on 127.0.0.1 that counts the connections it is offered (a registry nobody may
/// reach): its port, and the count.
fn tripwire() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, hits)
}

/// F7: `up --environment FILE` compared the configuration with the record (pulling its base
/// image and resolving its Features) before judging it. A configuration that mounts a host
/// folder and names an image on a tripwire registry is now refused first: the registry sees
/// no connection, no container is made and the host folder is untouched.
#[test]
fn up_with_an_environment_record_judges_before_it_pulls() {
    let Some(repo) = HostileRepo::busybox("hostile_f7_environment") else {
        return;
    };
    let target = HostTarget::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#
    ))
    .commit();
    let records = tempfile::tempdir().unwrap();
    let record = records.path().join("env.json");
    let record_arg = record.to_str().unwrap();
    repo.context()
        .run("up", &["--no-lockfile", "--environment-out", record_arg])
        .ok();
    repo.context().run("down", &["--remove"]).ok();

    let (port, hits) = tripwire();
    repo.config(&format!(
        r#"{{"image": "127.0.0.1:{port}/devcell-f7/never:1", "remoteUser": "nobody",
            "mounts": ["type=bind,source={},target=/host"]}}"#,
        target.path().display()
    ));
    let labelled = format!("label=devcontainer.local_folder={}", repo.path().display());
    let refused = repo
        .context()
        .run("up", &["--no-lockfile", "--environment", record_arg]);
    let text = format!("{}\n{}", refused.stdout, refused.stderr);
    assert_ne!(refused.code, Some(0), "{text}");
    assert!(
        text.contains(&format!("mount:{}", target.path().display())),
        "not refused for the mount: {text}"
    );
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the image was pulled before the judgement: {text}"
    );
    assert!(docker_lines(&["ps", "-aq", "--filter", &labelled]).is_empty());
    target.assert_untouched();
}
