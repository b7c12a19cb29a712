//! Compose configurations through devcell's commands (`up`, `exec`, `down`, `build`) against the
//! real engine and Compose v2, local images only (spec-notes 0600–0605).

use crate::support::deadline::Bounded as _;
use devcell::engine::compose::sanitize_project_name;
use serde_json::Value;

use crate::support::context::{TestContext, docker_lines};
use crate::support::docker::BUSYBOX_IMAGE;

/// Values Compose would interpolate or a YAML writer would mangle (devcontainers/cli#904).
const TRICKY: &[(&str, &str)] = &[
    ("DOLLAR", "$5 and $HOME"),
    ("BRACED", "${HOME} $${HOME} $$"),
    ("QUOTES", r#"it's "quoted" ''"#),
    ("BACKSLASH", r"C:\path\n\\x"),
    ("NEWLINES", "line one\nline two\ttabbed"),
];

/// The project name the reference rule gives a workspace whose Compose file is in
/// `.devcontainer` (spec-note 0600), and its cleanup on drop.
fn project(ctx: &TestContext) -> String {
    let base = ctx.path().file_name().unwrap().to_string_lossy();
    let name = sanitize_project_name(&format!("{base}_devcontainer"));
    ctx.clean_label(&format!("com.docker.compose.project={name}"));
    name
}

/// A host folder outside every workspace with permission bits `mode` (readable, or writable,
/// by a sidecar's user: only devcell's rules decide whether a container reaches it).
fn outside_folder(mode: u32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix("devcell-outside-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

/// `docker ps -a` of the project: `<service> <state>` lines, sorted.
fn services(project: &str) -> Vec<String> {
    let mut lines = docker_lines(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
        "--format",
        "{{.Label \"com.docker.compose.service\"}} {{.State}}",
    ]);
    lines.sort();
    lines
}

/// Networks and volumes of the project.
fn networks_and_volumes(project: &str) -> Vec<String> {
    let filter = format!("label=com.docker.compose.project={project}");
    let mut all = docker_lines(&["network", "ls", "-q", "--filter", &filter]);
    all.extend(docker_lines(&["volume", "ls", "-q", "--filter", &filter]));
    all
}

fn inspect(id: &str, format: &str) -> String {
    docker_lines(&["inspect", "--format", format, id]).join("\n")
}

fn ran(result: &Value) -> Vec<String> {
    result["devcell"]["lifecycle"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["hook"].as_str().unwrap().to_string())
        .collect()
}

const TWO_SERVICES: &str = r#"services:
  app:
    image: IMAGE
    command: ["sleep", "100000"]
    environment:
      DOLLAR: "the file's own"
    volumes:
      - ..:/workspace
  db:
    image: IMAGE
    command: ["sh", "-c", "while true; do echo pong | nc -l -p 7000; done"]
  extra:
    image: IMAGE
    command: ["sleep", "600"]
"#;

#[test]
fn a_compose_config_comes_up_hardened_runs_hooks_once_and_goes_down_per_shutdown_action() {
    let Some(ctx) = TestContext::busybox("compose_ops_up") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &TWO_SERVICES.replace("IMAGE", BUSYBOX_IMAGE),
    );
    let env: serde_json::Map<String, Value> = TRICKY
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    let config = |shutdown: Option<&str>| {
        let mut c = serde_json::json!({
            "dockerComposeFile": "docker-compose.yml",
            "service": "app",
            "runServices": ["db"],
            "workspaceFolder": "/workspace",
            "overrideCommand": true,
            "remoteUser": "nobody",
            "containerEnv": env,
            "remoteEnv": {"FROM_CONTAINER": "${containerEnv:PATH}|x"},
            "postCreateCommand": "nc -w 5 db 7000 </dev/null",
        });
        if let Some(s) = shutdown {
            c["shutdownAction"] = s.into();
        }
        c
    };
    let ctx = ctx.config_json(&config(None));

    let first = ctx.up(&["--include-configuration"]);
    assert_eq!(first["composeProjectName"], project.as_str(), "{first}");
    // `configuration` is substituted against the container, as `mergedConfiguration` is
    // (issue 12 item 11c, through Compose)
    let from_container = first["configuration"]["remoteEnv"]["FROM_CONTAINER"]
        .as_str()
        .unwrap_or_default();
    assert!(
        from_container.ends_with("|x")
            && from_container.contains("/bin")
            && !from_container.contains("${"),
        "{first}"
    );
    assert_eq!(first["remoteWorkspaceFolder"], "/workspace");
    assert_eq!(first["devcell"]["container"], "created");
    // the primary was found by the token it was created with, not by the project's labels
    // (another container can carry those; `ops::target::the_created`)
    let token = inspect(
        first["containerId"].as_str().unwrap(),
        "{{index .Config.Labels \"devcell.creation\"}}",
    );
    assert_eq!(token.len(), 32, "{token}");
    assert_eq!(ran(&first), ["postCreateCommand"], "{first}");
    // `runServices`: the primary and `db`, not `extra`
    assert_eq!(services(&project), ["app running", "db running"]);

    let id = first["containerId"].as_str().unwrap();
    // the primary service hardened as a single container, the sidecar bounded; no
    // capabilities and `no-new-privileges` read inside, where Docker and Podman agree
    // (Podman's inspect lists its default capabilities as dropped and drops the `:true`,
    // spec-note 0610)
    assert_eq!(
        inspect(
            id,
            "{{.HostConfig.ReadonlyRootfs}} {{index .Config.Labels \"devcell.user\"}}"
        ),
        "true nobody"
    );
    // created as numeric `uid:gid`, as a single container is (attacks K10)
    let user = inspect(id, "{{.Config.User}}");
    assert!(
        user.split_once(':')
            .is_some_and(|(u, g)| u.parse::<u32>().is_ok() && g.parse::<u32>().is_ok()),
        "{user}"
    );
    let (code, out, err) = ctx.sh("grep -E '^(CapBnd|NoNewPrivs)' /proc/self/status");
    assert_eq!(
        (code, out.as_str()),
        (0, "CapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"),
        "{err}"
    );
    let db = docker_lines(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
        "--filter",
        "label=com.docker.compose.service=db",
    ]);
    assert_eq!(inspect(&db[0], "{{.HostConfig.PidsLimit}}"), "1024");
    assert_eq!(
        docker_lines(&["exec", &db[0], "grep", "^NoNewPrivs", "/proc/self/status"]),
        ["NoNewPrivs:\t1"]
    );
    // `containerEnv` byte for byte, over the file's own `environment`
    for (k, v) in TRICKY {
        let (code, out, err) = ctx.sh(&format!("printf '%s' \"${k}\""));
        assert_eq!((code, out.as_str()), (0, *v), "{k}: {err}");
    }
    // the primary reaches the sidecar by its service name
    let (code, out, err) = ctx.sh("nc -w 5 db 7000 </dev/null; id -u; pwd");
    assert_eq!(
        (code, out.as_str()),
        (0, "pong\n65534\n/workspace\n"),
        "{err}"
    );

    // reused as it is: no hook again
    let second = ctx.up(&[]);
    assert_eq!(second["containerId"], id);
    assert_eq!(second["devcell"]["container"], "running");
    assert!(ran(&second).is_empty(), "{second}");

    // `stopCompose` (the default): every service stops
    ctx.run("down", &[]).ok();
    assert_eq!(services(&project), ["app exited", "db exited"]);
    // under `hardened` a stopped project with sidecars is created again from today's files
    // (spec-note 0681); its create hooks run again in the new primary
    let third = ctx.up(&[]);
    assert_ne!(third["containerId"], id);
    assert_eq!(third["devcell"]["container"], "created");
    assert_eq!(ran(&third), ["postCreateCommand"], "{third}");
    assert_eq!(services(&project), ["app running", "db running"]);
    let id = third["containerId"].as_str().unwrap().to_string();
    // under `reference` (the reference CLI's way) it is started again as it was made, with its
    // override file, the create hooks not run again
    ctx.run("down", &[]).ok();
    let fourth = ctx.up(&["--security-profile", "reference"]);
    assert_eq!(fourth["containerId"], id.as_str());
    assert_eq!(fourth["devcell"]["container"], "started");
    assert!(ran(&fourth).is_empty(), "{fourth}");
    assert_eq!(services(&project), ["app running", "db running"]);
    let (code, out, _) = ctx.sh("printf '%s' \"$BRACED\"");
    assert_eq!((code, out.as_str()), (0, "${HOME} $${HOME} $$"));

    // `none`: only the primary service stops
    let ctx = ctx.config_json(&config(Some("none")));
    ctx.run("down", &[]).ok();
    assert_eq!(services(&project), ["app exited", "db running"]);

    // `--remove`: the project's containers and networks go
    ctx.run("down", &["--remove"]).ok();
    assert!(services(&project).is_empty(), "{:?}", services(&project));
    assert!(
        networks_and_volumes(&project).is_empty(),
        "{:?}",
        networks_and_volumes(&project)
    );
}

#[test]
fn a_build_service_gets_its_features_and_devcell_build_tags_it() {
    let Some(ctx) = TestContext::busybox("compose_ops_build") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = project(&ctx);
    ctx.remove_image(&format!("{project}-app"));
    // the default name of `build` (vsc-<folder>-<hash>-features)
    let folder = ctx
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    ctx.remove_images_matching(&format!("vsc-{folder}-*"));
    let tag = format!("devcell-test/compose-built:{}", crate::support::run_token());
    ctx.remove_image(&tag);
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN echo built > /built\n"),
    );
    ctx.write(
        ".devcontainer/docker-compose.yml",
        "services:\n  app:\n    build:\n      context: .\n    command: [\"sleep\", \"100000\"]\n",
    );
    ctx.feature(
        "hello",
        r#"{"id": "hello", "version": "1.0.0", "containerEnv": {"HELLO": "from the feature"}}"#,
        "mkdir -p /usr/local/bin && printf '#!/bin/sh\\necho hello\\n' > /usr/local/bin/hello && chmod +x /usr/local/bin/hello",
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody",
            "features": {"./hello": {}}}"#,
    );
    let up = ctx.up(&[]);
    assert_eq!(up["remoteWorkspaceFolder"], "/", "Compose's default");
    // the service's own command kept (`overrideCommand` defaults to false for Compose)
    let id = up["containerId"].as_str().unwrap();
    assert_eq!(inspect(id, "{{json .Config.Cmd}}"), r#"["sleep","100000"]"#);
    let (code, out, err) = ctx.sh("cat /built; echo \"$HELLO\"; hello; id -u");
    assert_eq!(
        (code, out.as_str()),
        (0, "built\nfrom the feature\nhello\n65534\n"),
        "{err}"
    );
    ctx.run("down", &["--remove"]).ok();

    let built = ctx.run("build", &["--image-name", &tag]);
    assert_eq!(built.ok().json()["imageName"], serde_json::json!([tag]));
    let out = docker_lines(&["run", "--rm", &tag, "sh", "-c", "cat /built; hello"]);
    assert_eq!(out, ["built", "hello"]);
    // without `--image-name`, the reference prints a Compose build's name as one string
    let built = ctx.run("build", &[]).ok().json();
    let name = built["imageName"].as_str().expect("a string");
    assert!(name.starts_with(&format!("vsc-{folder}-")), "{name}");
    let out = docker_lines(&["run", "--rm", name, "sh", "-c", "cat /built; hello"]);
    assert_eq!(out, ["built", "hello"]);
}

/// A sidecar `evil` with `property`, and the grant that allows it (`None`: never granted).
const HOSTILE: &[(&str, &str, Option<&str>)] = &[
    ("privileged", "privileged: true", Some("privileged")),
    ("cap_add", "cap_add: [NET_ADMIN]", Some("cap:NET_ADMIN")),
    (
        "engine socket",
        "volumes: [\"/var/run/docker.sock:/var/run/docker.sock\"]",
        None,
    ),
    (
        "dotdot bind",
        "volumes: [\"../../../etc:/up\"]",
        Some("mount:/etc"),
    ),
    (
        "symlinked bind",
        "volumes: [\"../link:/etc-of-host\"]",
        Some("mount:/etc"),
    ),
    ("network_mode", "network_mode: host", Some("network:host")),
    ("pid", "pid: host", Some("namespace:pid:host")),
    (
        "env_file",
        "env_file: /etc/os-release",
        Some("mount:/usr/lib/os-release"),
    ),
    (
        "build.additional_contexts",
        "build: {context: ., additional_contexts: {keys: /etc}}",
        Some("mount:/etc"),
    ),
    (
        "devices",
        "devices: [\"/dev/null:/dev/evil\"]",
        Some("device:/dev/null"),
    ),
    // the last lines of the file: a top-level definition after the service's reference
    (
        "configs",
        "configs: [hc]\nconfigs:\n  hc:\n    file: /etc/os-release",
        Some("mount:/usr/lib/os-release"),
    ),
    (
        "secrets",
        "secrets: [hs]\nsecrets:\n  hs:\n    file: ../link/os-release",
        Some("mount:/usr/lib/os-release"),
    ),
    (
        "git build.context",
        "build: http://127.0.0.1:9/private/repo.git",
        Some("build-context:http://127.0.0.1:9/private/repo.git"),
    ),
];

#[test]
fn hostile_sidecars_are_refused_before_anything_is_created_and_one_is_granted() {
    for (what, property, grant) in HOSTILE {
        let Some(ctx) = TestContext::busybox("compose_ops_hostile") else {
            return;
        };
        let ctx = ctx.isolated();
        let project = project(&ctx);
        std::os::unix::fs::symlink("/etc", ctx.path().join("link")).unwrap();
        ctx.write(
            ".devcontainer/docker-compose.yml",
            &format!(
                "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n  evil:\n    image: {BUSYBOX_IMAGE}\n    {property}\n"
            ),
        );
        let ctx = ctx.config(
            r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody"}"#,
        );
        let run = ctx.run("up", &[]);
        let stderr = run.failed();
        // named as the service and property the resolved model has, or (a file Compose would
        // read before devcell sees the model, spec-note 0601) as the file's key path
        assert!(
            stderr.contains("Compose service `evil`") || stderr.contains("(`services.evil."),
            "{what}: {stderr}"
        );
        match grant {
            Some(g) => assert!(stderr.contains(&format!("--allow {g}")), "{what}: {stderr}"),
            None => assert!(
                !stderr.contains("--allow mount:/var/run"),
                "{what}: {stderr}"
            ),
        }
        // nothing was created
        assert!(
            services(&project).is_empty(),
            "{what}: {:?}",
            services(&project)
        );
        assert!(
            networks_and_volumes(&project).is_empty(),
            "{what}: {:?}",
            networks_and_volumes(&project)
        );
        if *what == "cap_add" {
            let up = ctx.up(&["--allow", "cap:NET_ADMIN"]);
            let granted = up["devcell"]["permissions"].to_string();
            assert!(granted.contains("NET_ADMIN"), "{granted}");
            // `evil` runs the image's `sh` with no input, which ends just after the start
            let evil = docker_lines(&[
                "ps",
                "-aq",
                "--filter",
                &format!("label=com.docker.compose.project={project}"),
                "--filter",
                "label=com.docker.compose.service=evil",
            ]);
            assert_eq!(evil.len(), 1, "{evil:?}");
            docker_lines(&["wait", &evil[0]]);
            assert_eq!(services(&project), ["app running", "evil exited"]);
            ctx.run("down", &["--remove"]).ok();
            assert!(services(&project).is_empty());
        }
    }
}

#[test]
fn a_project_the_reference_cli_brought_up_is_reused_and_the_reverse() {
    let Some(ctx) = TestContext::busybox("compose_ops_interop") else {
        return;
    };
    let Some(refcli) = crate::support::refcli::reference_cli("compose_ops_interop") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &TWO_SERVICES.replace("IMAGE", BUSYBOX_IMAGE),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "runServices": ["db"],
            "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    let reference_up = || -> Value {
        let out = refcli
            .command()
            .args(["up", "--workspace-folder"])
            .arg(ctx.path())
            .long_output()
            .expect("the reference CLI runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
    };

    // the reference's project, found by its labels; reused as written under `reference`
    // (under `hardened` its root user and capabilities are a refusal, spec-note 0270)
    let theirs = reference_up();
    refcli.assert_stayed_local();
    assert_eq!(theirs["composeProjectName"], project.as_str());
    let refused = ctx.run("up", &[]);
    assert!(refused.failed().contains("refusing to reuse container"));
    let ours = ctx.up(&["--security-profile", "reference"]);
    assert_eq!(ours["containerId"], theirs["containerId"]);
    assert_eq!(ours["devcell"]["container"], "running");
    ctx.run("down", &["--remove"]).ok();
    assert!(services(&project).is_empty());

    // devcell's project, found and reused by the reference
    let ours = ctx.up(&[]);
    let theirs = reference_up();
    assert_eq!(theirs["containerId"], ours["containerId"]);
    assert_eq!(theirs["composeProjectName"], project.as_str());
    assert_eq!(services(&project), ["app running", "db running"]);
    ctx.run("down", &["--remove"]).ok();
}

#[test]
fn another_workspace_naming_the_same_project_is_never_attached_to_or_stopped() {
    let Some(a) = TestContext::busybox("compose_ops_claim_a") else {
        return;
    };
    let Some(b) = TestContext::busybox("compose_ops_claim_b") else {
        return;
    };
    let (a, b) = (a.isolated(), b.isolated());
    let name = format!("devcell-claimed-{}", crate::support::run_token());
    a.clean_label(&format!("com.docker.compose.project={name}"));
    let file = format!(
        "name: {name}\nservices:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n"
    );
    let config =
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody"}"#;
    a.write(".devcontainer/docker-compose.yml", &file);
    b.write(".devcontainer/docker-compose.yml", &file);
    let (a, b) = (a.config(config), b.config(config));
    let up = a.up(&[]);
    assert_eq!(up["composeProjectName"], name.as_str());

    // b's files name a's project: its container is not b's
    let refused = b.run("up", &[]);
    assert!(
        refused.failed().contains("is not this workspace's"),
        "{}",
        refused.stderr
    );
    let (code, _, err) = b.sh("touch /tmp/b-was-here");
    assert_ne!(code, 0, "{err}");
    // b has no container: its `down` finds nothing of its own (by its labels, through the
    // engine; Compose is not run on b's files) and leaves a's project running
    let down = b.run("down", &["--remove"]);
    assert_eq!(down.code, Some(0), "{}\n{}", down.stdout, down.stderr);
    assert_eq!(down.last_json()["containerIds"], serde_json::json!([]));
    assert_eq!(services(&name), ["app running"]);
    let (code, _, _) = a.sh("test ! -e /tmp/b-was-here");
    assert_eq!(code, 0);

    // a Compose CLI that is not there (no `docker` on PATH for its plugin, and a
    // `--docker-compose-path` naming nothing): a clear error, nothing created
    b.write(
        ".devcontainer/docker-compose.yml",
        &file.replace(&name, &format!("{name}-b")),
    );
    let b = b.env("PATH", "/nonexistent/devcell");
    let missing = b.run(
        "up",
        &["--docker-compose-path", "/nonexistent/docker-compose"],
    );
    assert!(
        missing.failed().contains("Docker Compose v2 not found"),
        "{}",
        missing.stderr
    );
    assert!(services(&format!("{name}-b")).is_empty());
    a.run("down", &["--remove"]).ok();
    assert!(services(&name).is_empty());
}

#[test]
fn host_variables_the_compose_files_interpolate_are_requests() {
    let Some(ctx) = TestContext::busybox("compose_ops_vars") else {
        return;
    };
    let ctx = ctx.isolated().env("DEVCELL_COMPOSE_SECRET", "s3cret-value");
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    environment:\n      FROM_HOST: \"${{DEVCELL_COMPOSE_SECRET}}\"\n      KEPT: \"$${{NOT_A_VARIABLE}}\"\n"
        ),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "remoteUser": "nobody"}"#,
    );
    let refused = ctx.run("up", &[]);
    let stderr = refused.failed();
    assert!(
        stderr.contains("--allow env:DEVCELL_COMPOSE_SECRET"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret-value"), "{stderr}");
    assert!(services(&project).is_empty());
    assert!(networks_and_volumes(&project).is_empty());

    ctx.up(&["--allow", "env:DEVCELL_COMPOSE_SECRET"]);
    let (code, out, err) = ctx.sh("printf '%s|%s' \"$FROM_HOST\" \"$KEPT\"");
    assert_eq!(
        (code, out.as_str()),
        (0, "s3cret-value|${NOT_A_VARIABLE}"),
        "{err}"
    );
    ctx.run("down", &["--remove"]).ok();
}

/// Issue 14 item 5 (spec-note 0606): a handoff into a Compose workspace runs the agent in the
/// primary service, which reaches the sidecar by name; `status` and `audit` name both
/// containers; `delete` leaves no container or volume of the project and the workspace intact
/// (network `none` and `allowlist`: the next test).
#[test]
fn a_handoff_into_a_compose_workspace_reaches_the_sidecar_and_delete_removes_the_project() {
    let Some(ctx) = TestContext::busybox("compose_ops_handoff") else {
        return;
    };
    let ctx = ctx
        .isolated()
        .at(&crate::support::per_run("composehandoff"));
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &TWO_SERVICES.replace("IMAGE", BUSYBOX_IMAGE),
    );
    let ctx = ctx.config_json(&serde_json::json!({
        "dockerComposeFile": "docker-compose.yml",
        "service": "app",
        "runServices": ["db"],
        "workspaceFolder": "/workspace",
        "overrideCommand": true,
        "remoteUser": "nobody",
    }));
    // a folder the agent's user (nobody) may write to
    ctx.write("out/.keep", "");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        ctx.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let settings = ctx.tmp().join("config.toml");
    std::fs::write(
        &settings,
        "[agents.a]\ncommand = [\"sh\", \"-c\", \"nc -w 5 db 7000 </dev/null > out/from-db.txt && pwd >> out/from-db.txt\"]\n",
    )
    .unwrap();
    let handoff = |extra: &[&str]| {
        let mut args = vec![
            "--agent",
            "a",
            "--config-file",
            settings.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        ctx.run("handoff", &args)
    };

    let run = handoff(&["--network", "default"]);
    let v = run.last_json();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let result = &v["result"];
    assert_eq!(result["exitCode"], 0, "{v}");
    let primary = result["containerId"].as_str().unwrap().to_string();
    assert!(
        result["warnings"]
            .to_string()
            .contains("Compose project network"),
        "{v}"
    );
    // the agent ran in the primary service at the workspace and talked to `db` by name
    let written = std::fs::read_to_string(ctx.path().join("out/from-db.txt")).unwrap();
    assert_eq!(written, "pong\n/workspace\n");
    // every container of the project is stopped once the agent ends, the sidecars first
    // (spec-note 0400: a sidecar can reach the workspace through a shared namespace)
    assert_eq!(services(&project), ["app exited", "db exited"]);
    assert!(ctx.path().join(".devcell/context.json").is_file());

    let status = ctx.run("status", &["--format", "json"]).last_json();
    let status = &status["result"];
    assert_eq!(status["container"]["id"], primary.as_str(), "{status}");
    assert_eq!(status["services"][0]["service"], "db", "{status}");
    let db = status["services"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(status["services"].as_array().unwrap().len(), 1, "{status}");

    let audit = ctx.run("audit", &["--format", "json"]).last_json();
    let audit = &audit["result"];
    let names = |r: &Value| r["container"].as_str().unwrap_or_default().to_string();
    assert!(names(audit).contains("app"), "{audit}");
    assert_eq!(audit["services"].as_array().unwrap().len(), 1, "{audit}");
    assert!(names(&audit["services"][0]).contains("db"), "{audit}");
    assert!(
        audit["network"].as_str().unwrap().contains("reach"),
        "{audit}"
    );
    let project_volumes = || {
        docker_lines(&[
            "volume",
            "ls",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={project}"),
        ])
    };
    let anonymous: Vec<String> = [&primary, &db]
        .iter()
        .flat_map(|id| {
            docker_lines(&[
                "inspect",
                "--format",
                "{{range .Mounts}}{{if eq .Type \"volume\"}}{{.Name}}\n{{end}}{{end}}",
                id,
            ])
        })
        .filter(|l| !l.is_empty())
        .collect();

    let deleted = ctx.run("delete", &["--format", "json"]);
    assert_eq!(
        deleted.code,
        Some(0),
        "{}\n{}",
        deleted.stdout,
        deleted.stderr
    );
    let deleted = deleted.last_json();
    assert_eq!(deleted["result"]["verified"], true, "{deleted}");
    assert!(services(&project).is_empty(), "{:?}", services(&project));
    assert!(project_volumes().is_empty(), "{:?}", project_volumes());
    // the project network goes too: nothing labelled with the project remains
    assert!(
        networks_and_volumes(&project).is_empty(),
        "{:?}",
        networks_and_volumes(&project)
    );
    assert!(
        deleted["result"]["removed"]["networks"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n == &format!("{project}_default"))),
        "{deleted}"
    );
    let left: Vec<String> = docker_lines(&["volume", "ls", "-q"])
        .into_iter()
        .filter(|v| anonymous.contains(v))
        .collect();
    assert!(left.is_empty(), "volumes of the project left: {left:?}");
    // the workspace is intact
    assert_eq!(
        std::fs::read_to_string(ctx.path().join("out/from-db.txt")).unwrap(),
        written
    );
    assert!(ctx.path().join(".devcontainer/docker-compose.yml").exists());
}

/// `updateRemoteUserUID` on a Compose `up` (as the reference does): the remote user gets the
/// workspace owner's uid, so it can write the workspace the service binds and what it writes
/// belongs to that owner; no ownership warning (spec-notes 0250, 0602).
#[test]
fn compose_up_gives_the_remote_user_the_workspace_owners_uid() {
    let Some(ctx) = TestContext::busybox("compose_ops_uid") else {
        return;
    };
    if !rustix::process::geteuid().is_root() {
        return; // the workspace cannot be given to another user
    }
    let ctx = ctx.isolated();
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes:\n      - ..:/workspace\n"
        ),
    );
    let ctx = ctx.config_json(&serde_json::json!({
        "dockerComposeFile": "docker-compose.yml",
        "service": "app",
        "workspaceFolder": "/workspace",
        "overrideCommand": true,
        "remoteUser": "nobody",
    }));
    use crate::support::git::{WORKSPACE_OWNER, give_to_workspace_owner, owner_uid};
    give_to_workspace_owner(ctx.path());

    let up = ctx.up(&[]);
    assert_eq!(up["composeProjectName"], project.as_str(), "{up}");
    assert!(
        !up["devcell"]["warnings"].to_string().contains("keeps uid"),
        "{up}"
    );
    let (code, out, err) = ctx.sh("id -u; echo x > /workspace/by-remote-user");
    assert_eq!(
        (code, out.as_str()),
        (0, format!("{WORKSPACE_OWNER}\n").as_str()),
        "{err}"
    );
    assert_eq!(
        owner_uid(&ctx.path().join("by-remote-user")),
        WORKSPACE_OWNER
    );
    ctx.run("down", &["--remove"]).ok();
    assert!(services(&project).is_empty(), "{:?}", services(&project));
}

/// An empty `dockerComposeFile` array (spec-note 0608): the files come from the host's
/// `COMPOSE_FILE`, else `.env`'s `COMPOSE_FILE=` (relative to the workspace folder), and
/// `<workspace>/.env` is Compose's `--env-file` (its variables interpolate the files, which
/// live in a folder of their own where Compose would not look for a `.env`).
#[test]
fn an_empty_compose_file_list_takes_compose_file_from_the_environment_or_dot_env() {
    let Some(ctx) = TestContext::busybox("compose_ops_dot_env") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = format!(
        "devcell-dotenv-{}",
        sanitize_project_name(&ctx.path().file_name().unwrap().to_string_lossy())
    );
    ctx.clean_label(&format!("com.docker.compose.project={project}"));
    ctx.write(
        "compose/base.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    environment:\n      GREETING: ${{GREETING:-unset}}\n"
        ),
    );
    ctx.write(
        "compose/extra.yml",
        &format!(
            "services:\n  db:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n"
        ),
    );
    ctx.write(
        ".env",
        &format!(
            "COMPOSE_PROJECT_NAME={project}\nCOMPOSE_FILE=compose/base.yml:compose/extra.yml\nGREETING=from-dot-env\n"
        ),
    );
    let ctx = ctx.config_json(&serde_json::json!({
        "dockerComposeFile": [],
        "service": "app",
        "workspaceFolder": "/",
        "overrideCommand": true,
        "remoteUser": "nobody",
    }));

    // the host's COMPOSE_FILE comes first: a file that is not there fails, before anything
    let missing = ctx
        .command()
        .env("COMPOSE_FILE", "compose/missing.yml")
        .args(["up", "--workspace-folder"])
        .arg(ctx.path())
        .long_output()
        .unwrap();
    let text = String::from_utf8_lossy(&missing.stdout).to_string()
        + &String::from_utf8_lossy(&missing.stderr);
    assert_ne!(missing.status.code(), Some(0), "{text}");
    assert!(text.contains("missing.yml"), "{text}");
    assert!(services(&project).is_empty(), "{:?}", services(&project));

    // `.env`'s list, both files, and its variables
    let up = ctx.up(&[]);
    assert_eq!(up["composeProjectName"], project.as_str(), "{up}");
    assert_eq!(services(&project), ["app running", "db running"]);
    let (code, out, err) = ctx.sh("printf %s \"$GREETING\"");
    assert_eq!((code, out.as_str()), (0, "from-dot-env"), "{err}");

    let down = ctx.run("down", &["--remove"]);
    assert_eq!(down.code, Some(0), "{}\n{}", down.stdout, down.stderr);
    assert!(services(&project).is_empty(), "{:?}", services(&project));
    assert!(networks_and_volumes(&project).is_empty());
}

/// A host HTTP server on `addr` answering `body`, counting the requests it gets (what reached
/// the host, seen from the host).
fn host_server(
    addr: &str,
    body: &'static str,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind(addr).unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

/// Issue 14 item 4 (spec-notes 0604, 0606): a Compose handoff under `none` and `allowlist`.
/// The same probes run under each network: the agent in the primary service talks to `db` by
/// name and tries a server on the engine's bridge address; the sidecar tries it too. Under
/// `default` both reach it (the probe can fail); under `none` (the handoff's default) neither
/// does, the server sees no connection, and the project networks are internal with no host
/// address; under `allowlist` the agent reaches the allowed name through devcell's proxy and
/// not a refused one, the sidecar reaches nothing (not the primary's forwarder either).
/// An open network of the project's name is refused before anything is created.
/// `status`/`audit` say the mode; `delete` leaves no container, volume or network.
#[test]
fn a_compose_handoff_under_none_and_allowlist_reaches_only_its_sidecars_and_the_proxy() {
    let Some(ctx) = TestContext::busybox("compose_ops_closed") else {
        return;
    };
    let ctx = ctx.isolated().at(&crate::support::per_run("composeclosed"));
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &TWO_SERVICES.replace("IMAGE", BUSYBOX_IMAGE),
    );
    let ctx = ctx.config_json(&serde_json::json!({
        "dockerComposeFile": "docker-compose.yml",
        "service": "app",
        "runServices": ["db"],
        "workspaceFolder": "/workspace",
        "overrideCommand": true,
        "remoteUser": "nobody",
    }));
    ctx.write("out/.keep", "");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        ctx.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let gateway = crate::egress::direct_target();
    let (bridge_port, bridge_hits) = host_server(&format!("{gateway}:0"), "bridge-host");
    let (web_port, web_hits) = host_server("127.0.0.1:0", "allowed-web");
    let bridge = format!("http://{gateway}:{bridge_port}/");
    let probe = format!(
        "nc -w 5 db 7000 </dev/null > out/r.txt; \
         (http_proxy= timeout 5 wget -q -O - {bridge} >/dev/null 2>&1 && echo bridge=reached || echo bridge=failed) >> out/r.txt; \
         (wget -q -O - http://web.test:{web_port}/ 2>/dev/null || echo failed) | sed 's/^/web=/' >> out/r.txt; echo >> out/r.txt; \
         (timeout 5 wget -q -O - http://evil.test:{web_port}/ >/dev/null 2>&1 && echo evil=reached || echo evil=failed) >> out/r.txt"
    );
    let settings = ctx.tmp().join("config.toml");
    std::fs::write(
        &settings,
        format!(
            "[agents.a]\ncommand = [\"sh\", \"-c\", {}]\n",
            serde_json::to_string(&probe).unwrap()
        ),
    )
    .unwrap();
    let handoff = |extra: &[&str]| {
        let mut args = vec![
            "--agent",
            "a",
            "--config-file",
            settings.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let run = ctx.run("handoff", &args);
        assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
        let v = run.last_json();
        assert_eq!(v["result"]["exitCode"], 0, "{v}");
        let agent = std::fs::read_to_string(ctx.path().join("out/r.txt")).unwrap();
        let status = ctx.run("status", &["--format", "json"]).last_json();
        let db = status["result"]["services"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{status}"))
            .to_string();
        // every container of the project is stopped once the agent ends (spec-note 0400,
        // attack F0/F3): the sidecar is started again to probe what its network reaches
        docker_lines(&["start", &db]);
        let sidecar = docker_lines(&[
            "exec",
            &db,
            "sh",
            "-c",
            &format!(
                "timeout 5 wget -q -O - {bridge} >/dev/null 2>&1 && echo bridge=reached || echo bridge=failed; \
                 nc -w 3 app 3128 </dev/null >/dev/null 2>&1 && echo forwarder=reached || echo forwarder=failed"
            ),
        ])
        .join("\n");
        (v, agent, status, db, sidecar)
    };
    let delete = || {
        let deleted = ctx.run("delete", &["--format", "json"]);
        assert_eq!(
            deleted.code,
            Some(0),
            "{}\n{}",
            deleted.stdout,
            deleted.stderr
        );
        let deleted = deleted.last_json();
        assert_eq!(deleted["result"]["verified"], true, "{deleted}");
        assert!(services(&project).is_empty(), "{:?}", services(&project));
        assert!(
            networks_and_volumes(&project).is_empty(),
            "{:?}",
            networks_and_volumes(&project)
        );
        deleted
    };
    let hits = |h: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
        h.load(std::sync::atomic::Ordering::SeqCst)
    };

    // `default`: the same probes reach the bridge host, from both services
    let (_, agent, _, _, sidecar) = handoff(&["--network", "default"]);
    assert!(agent.starts_with("pong\n"), "{agent}");
    assert!(agent.contains("bridge=reached"), "{agent}");
    assert!(sidecar.contains("bridge=reached"), "{sidecar}");
    let reached = hits(&bridge_hits);
    assert!(reached >= 2, "{reached}");
    delete();

    // an open network of the project's name (left by hand or an older run) is refused before
    // anything is created: Compose would join it as it is
    let net = format!("{project}_default");
    let label = format!("com.docker.compose.project={project}");
    assert!(docker_lines(&["network", "create", "--label", &label, &net]).len() == 1);
    let refused = ctx.run(
        "handoff",
        &["--agent", "a", "--config-file", settings.to_str().unwrap()],
    );
    assert!(!refused.success(), "{}", refused.stdout);
    assert!(
        format!("{}{}", refused.stdout, refused.stderr).contains("is not closed"),
        "{}\n{}",
        refused.stdout,
        refused.stderr
    );
    assert!(services(&project).is_empty(), "{:?}", services(&project));
    docker_lines(&["network", "rm", &net]);

    // `none` (the handoff's default): the sidecar by name, and nothing else
    let (v, agent, status, db, sidecar) = handoff(&[]);
    assert!(agent.starts_with("pong\n"), "{agent}");
    assert!(agent.contains("bridge=failed"), "{agent}");
    assert!(agent.contains("web=failed"), "{agent}");
    assert!(sidecar.contains("bridge=failed"), "{sidecar}");
    assert_eq!(
        hits(&bridge_hits),
        reached,
        "the bridge host saw a connection"
    );
    assert_eq!(hits(&web_hits), 0);
    assert!(
        v["result"]["warnings"].to_string().contains("closed"),
        "{v}"
    );
    assert!(
        status.to_string().contains("\"network\":\"none\""),
        "{status}"
    );
    assert_eq!(
        inspect(
            &net,
            "{{.Internal}} {{index .Options \"com.docker.network.bridge.inhibit_ipv4\"}}"
        ),
        "true true"
    );
    assert!(inspect(&db, "{{.HostConfig.CapDrop}}").contains("NET_RAW"));
    let audit = ctx.run("audit", &["--format", "json"]).last_json();
    let text = audit.to_string();
    assert!(
        audit["result"]["network"]
            .as_str()
            .is_some_and(|n| n.contains("closed")),
        "{audit}"
    );
    assert!(text.contains("closed networks only"), "{audit}");
    delete();

    // `allowlist`: the allowed name through the proxy, nothing else, and nothing for the sidecar
    let entry = format!("web.test:{web_port}=127.0.0.1");
    let (v, agent, status, _, sidecar) =
        handoff(&["--network", "allowlist", "--egress-allow", &entry]);
    assert!(agent.starts_with("pong\n"), "{agent}");
    assert!(agent.contains("web=allowed-web"), "{agent}");
    assert!(agent.contains("evil=failed"), "{agent}");
    assert!(agent.contains("bridge=failed"), "{agent}");
    assert!(sidecar.contains("bridge=failed"), "{sidecar}");
    assert!(sidecar.contains("forwarder=failed"), "{sidecar}");
    assert_eq!(
        hits(&bridge_hits),
        reached,
        "the bridge host saw a connection"
    );
    assert_eq!(hits(&web_hits), 1);
    assert!(
        status.to_string().contains("\"network\":\"allowlist\""),
        "{status}"
    );
    let egress = &status["result"]["egress"];
    assert_eq!(egress["allowed"][0]["destination"], "web.test", "{status}");
    assert!(
        egress["refused"].to_string().contains("evil.test"),
        "{status}"
    );
    let audit = ctx.run("audit", &["--format", "json"]).last_json();
    assert!(
        audit.to_string().contains("devcell's host-side proxy"),
        "{audit}"
    );
    let _ = v;
    delete();
    assert_eq!(
        std::fs::read_to_string(ctx.path().join("out/r.txt"))
            .unwrap()
            .lines()
            .next(),
        Some("pong")
    );
}

/// After the repository names other files and gives the old ones a new service (root, the
/// host's `/` mounted), that service is never made: the stopped project, created from other
/// files than the configuration names, is created again from the judged ones (spec-note
/// 0681), and the hook keeps running as the judged user.
#[test]
fn a_stopped_project_starts_only_its_containers_and_no_service_its_old_files_gained() {
    let Some(ctx) = TestContext::busybox("compose_ops_restart") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = project(&ctx);
    let one = "services:\n  app:\n    image: IMAGE\n    command: [\"sleep\", \"100000\"]\n    volumes:\n      - ..:/workspace\n".replace("IMAGE", BUSYBOX_IMAGE);
    ctx.write(".devcontainer/a.yml", &one);
    let config = |file: &str| {
        serde_json::json!({
            "dockerComposeFile": file,
            "service": "app",
            "workspaceFolder": "/workspace",
            "remoteUser": "nobody",
            "postStartCommand": "id -u > /workspace/drop/start-uid",
        })
    };
    let ctx = ctx.config_json(&config("a.yml"));
    ctx.write("drop/.keep", "");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(
            ctx.path().join("drop"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
    }
    let first = ctx.up(&[]);
    assert_eq!(first["composeProjectName"], project.as_str(), "{first}");
    ctx.run("stop", &[]).ok();
    assert_eq!(services(&project), ["app exited"]);
    // the configuration now names b.yml (harmless); a.yml gains a root service with `/`
    ctx.write(".devcontainer/b.yml", &one);
    ctx.write(
        ".devcontainer/a.yml",
        &format!(
            "{one}  pwn:\n    image: {BUSYBOX_IMAGE}\n    user: \"0\"\n    network_mode: none\n    volumes:\n      - /:/host:ro\n    command: [\"sleep\", \"100000\"]\n"
        ),
    );
    let ctx = ctx.config_json(&config("b.yml"));
    let again = ctx.up(&[]);
    assert_eq!(again["devcell"]["container"], "created", "{again}");
    assert!(
        again["devcell"]["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("names other Compose files")),
        "{again}"
    );
    assert_eq!(
        services(&project),
        ["app running"],
        "a service nobody judged was made"
    );
    let uid = std::fs::read_to_string(ctx.path().join("drop/start-uid")).unwrap_or_default();
    assert_eq!(uid.trim(), "65534");
}

/// What the agent leaves running ends with the handoff in every container that can write what
/// the fetch-back reads (issue 25; spec-note 0436, "After the agent"): a sidecar binding the
/// workspace (`..:/w`) keeps writing it in a loop, and it is stopped with the primary once the
/// agent ends; `db`, which binds no host path, is stopped too (every container of the project is: spec-note 0400, F0). The next handoff starts the project
/// again.
#[test]
fn every_sidecar_stops_with_the_handoff_whether_or_not_it_binds_the_workspace() {
    let Some(ctx) = TestContext::busybox("compose_ops_handoff_sidecar_stop") else {
        return;
    };
    let ctx = ctx
        .isolated()
        .at(&crate::support::per_run("composesidecarstop"));
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes:\n      - ..:/workspace\n  \
             side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"while :; do date >> /w/out/side.txt; sleep 0.2; done\"]\n    volumes:\n      - ..:/w\n  \
             db:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n"
        ),
    );
    let ctx = ctx.config_json(&serde_json::json!({
        "dockerComposeFile": "docker-compose.yml",
        "service": "app",
        "runServices": ["side", "db"],
        "workspaceFolder": "/workspace",
        "overrideCommand": true,
        "remoteUser": "nobody",
    }));
    ctx.write("out/.keep", "");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        ctx.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let settings = ctx.tmp().join("config.toml");
    std::fs::write(
        &settings,
        "[agents.a]\ncommand = [\"sh\", \"-c\", \"sleep 1; echo agent > out/agent.txt\"]\n",
    )
    .unwrap();
    let handoff = || {
        ctx.run(
            "handoff",
            &[
                "--agent",
                "a",
                "--config-file",
                settings.to_str().unwrap(),
                "--format",
                "json",
                "--network",
                "default",
            ],
        )
    };
    let run = handoff();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(ctx.path().join("out/agent.txt").is_file());
    assert_eq!(
        services(&project),
        ["app exited", "db exited", "side exited"],
        "{}",
        run.stderr
    );
    let side = std::fs::read(ctx.path().join("out/side.txt")).unwrap();
    assert!(!side.is_empty(), "the sidecar ran");
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(
        std::fs::read(ctx.path().join("out/side.txt")).unwrap(),
        side,
        "nothing writes the workspace after the handoff"
    );
    // the next handoff starts the project again, and stops it again
    let run = handoff();
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("starting the stopped workspace container"),
        "{}",
        run.stderr
    );
    assert_eq!(
        services(&project),
        ["app exited", "db exited", "side exited"]
    );
    ctx.run("delete", &[]).ok();
}

/// `delete` keeps a Compose project's named volume (the repository's data, as `docker compose
/// down` keeps it), says so under `kept.volumes`, and is verified: the volume is not a
/// removal that failed. It once listed every mounted volume as removed, so each such delete
/// ended unverified with exit 1.
#[test]
fn delete_keeps_a_projects_named_volume_and_is_verified() {
    let Some(ctx) = TestContext::busybox("compose_ops_delete_keeps_data") else {
        return;
    };
    let ctx = ctx
        .isolated()
        .at(&crate::support::per_run("composekeepsdata"));
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes:\n      - ..:/workspace\n      - data:/data\nvolumes:\n  data: {{}}\n"
        ),
    );
    let ctx = ctx.config_json(&serde_json::json!({
        "dockerComposeFile": "docker-compose.yml",
        "service": "app",
        "workspaceFolder": "/workspace",
        "overrideCommand": true,
        "remoteUser": "nobody",
    }));
    let up = ctx.run("up", &[]);
    assert_eq!(up.code, Some(0), "{}\n{}", up.stdout, up.stderr);
    let volume = format!("{project}_data");
    assert_eq!(
        docker_lines(&[
            "volume",
            "ls",
            "-q",
            "--filter",
            &format!("name=^{volume}$")
        ]),
        vec![volume.clone()]
    );
    let deleted = ctx.run("delete", &["--format", "json"]);
    assert_eq!(
        deleted.code,
        Some(0),
        "{}\n{}",
        deleted.stdout,
        deleted.stderr
    );
    let deleted = deleted.last_json();
    let result = &deleted["result"];
    assert_eq!(result["verified"], true, "{deleted}");
    assert_eq!(
        result["kept"]["volumes"],
        serde_json::json!([volume]),
        "{deleted}"
    );
    assert!(
        !result["removed"]["volumes"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(volume)),
        "{deleted}"
    );
    assert!(services(&project).is_empty(), "{:?}", services(&project));
    assert_eq!(
        docker_lines(&[
            "volume",
            "ls",
            "-q",
            "--filter",
            &format!("name=^{volume}$")
        ]),
        vec![volume.clone()],
        "the data stays"
    );
}

/// Attack finding J2: another repository's sidecar whose *image* carries workspace A's id
/// labels (Compose files' own identity labels are refused, an image's are carried) was taken
/// as A's primary: `down --remove` of A removed that repository's project and left A's
/// container running. A container that claims A's labels without binding A is left alone.
#[test]
fn down_ignores_another_projects_sidecar_claiming_the_workspace_labels() {
    let Some(a) = TestContext::busybox("compose_ops_j2_a") else {
        return;
    };
    let Some(b) = TestContext::busybox("compose_ops_j2_b") else {
        return;
    };
    let (a, b) = (a.isolated(), b.isolated());
    let (project_a, project_b) = (project(&a), project(&b));
    a.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n"
        ),
    );
    let a = a.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    let a_folder = std::fs::canonicalize(a.path()).unwrap();
    let a_folder = a_folder.to_str().unwrap();
    b.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL devcontainer.local_folder=\"{a_folder}\" devcontainer.config_file=\"{a_folder}/.devcontainer/devcontainer.json\"\n"
        ),
    );
    b.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  main:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n  app:\n    build: {{context: ., dockerfile: Dockerfile}}\n    command: [\"sleep\", \"100000\"]\n"
        ),
    );
    let b = b.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "main", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    a.up(&[]);
    b.up(&[]);
    assert_eq!(services(&project_b), ["app running", "main running"]);

    let down = a.run("down", &["--remove"]);
    assert_eq!(down.code, Some(0), "{}\n{}", down.stdout, down.stderr);
    assert!(
        services(&project_a).is_empty(),
        "A's own project is removed"
    );
    assert_eq!(
        services(&project_b),
        ["app running", "main running"],
        "B's project is left alone: {}",
        down.stderr
    );
    b.run("down", &["--remove"]).ok();
}

/// Attack K14 (spec-note 0425): a sidecar's `stop_grace_period: 1000h` (its PID 1 `sleep`
/// ignores SIGTERM) hung `down` for as long as the engine waited on it. The override bounds
/// the grace (the container's stop timeout is 60 s), and `down` waits its own timeout (a few
/// seconds here, `DEVCELL_STOP_TIMEOUT`), never the container's: the engine's own record of
/// the stop (SIGTERM, then SIGKILL once the stop call's timeout ran out) shows devcell's
/// timeout, not the container's 60 s.
#[test]
fn down_stops_a_sidecar_with_a_huge_grace_period_within_the_default_timeout() {
    let Some(ctx) = TestContext::busybox("compose_ops_grace") else {
        return;
    };
    let ctx = ctx.isolated().env("DEVCELL_STOP_TIMEOUT", "2");
    let project = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    stop_grace_period: 1000h\n"
        ),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    ctx.up(&[]);
    assert_eq!(services(&project), ["app running", "side running"]);
    let side = docker_lines(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
        "--filter",
        "label=com.docker.compose.service=side",
    ]);
    assert_eq!(inspect(&side[0], "{{.Config.StopTimeout}}"), "60");

    let since = docker_lines(&["info", "--format", "{{.SystemTime}}"]);
    let down = ctx.run("down", &[]);
    assert_eq!(down.code, Some(0), "{}\n{}", down.stdout, down.stderr);
    assert_eq!(services(&project), ["app exited", "side exited"]);
    // What bounds the wait is the stop call's timeout, which the engine shows as the time
    // between the SIGTERM it sent and the SIGKILL that followed (its own clock, not this
    // test's): devcell's 2 s, far from both the repository's 1000 h and the container's 60 s.
    if crate::support::engine::engine_is_podman() {
        // Podman's events answer no `kill` events through the Docker API: its SIGKILL shows
        // in the exit status only.
        assert_eq!(inspect(&side[0], "{{.State.ExitCode}}"), "137");
        ctx.run("down", &["--remove"]).ok();
        return;
    }
    let kills = docker_lines(&[
        "events",
        "--since",
        &since[0],
        "--until",
        &docker_lines(&["info", "--format", "{{.SystemTime}}"])[0],
        "--filter",
        &format!("container={}", side[0]),
        "--filter",
        "event=kill",
        "--format",
        "{{.TimeNano}} {{.Actor.Attributes.signal}}",
    ]);
    let at = |signal: &str| -> u128 {
        kills
            .iter()
            .find_map(|l| {
                let (nanos, s) = l.split_once(' ')?;
                (s == signal).then(|| nanos.parse().ok()).flatten()
            })
            .unwrap_or_else(|| panic!("no kill with signal {signal}: {kills:?}"))
    };
    let waited = std::time::Duration::from_nanos((at("9") - at("15")) as u64);
    assert!(
        waited >= std::time::Duration::from_secs(2) && waited < std::time::Duration::from_secs(10),
        "the engine waited {waited:?} between SIGTERM and SIGKILL: {kills:?}"
    );
    assert_eq!(inspect(&side[0], "{{.State.ExitCode}}"), "137");
    ctx.run("down", &["--remove"]).ok();
}

/// A project whose dev container was removed while a sidecar of it runs on is still this
/// workspace's (its own `up` left the sidecar): `up` creates the dev container again beside it,
/// as the reference CLI does; another workspace whose files name that project is still refused
/// (issue 28 item 8, spec-note 0603).
#[test]
fn a_project_left_with_only_its_sidecar_gets_its_dev_container_again() {
    let Some(a) = TestContext::busybox("compose_ops_sidecar_left_a") else {
        return;
    };
    let Some(b) = TestContext::busybox("compose_ops_sidecar_left_b") else {
        return;
    };
    let (a, b) = (a.isolated(), b.isolated());
    let name = project(&a);
    a.write(
        ".devcontainer/docker-compose.yml",
        &TWO_SERVICES.replace("IMAGE", BUSYBOX_IMAGE),
    );
    b.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "name: {name}\n{}",
            TWO_SERVICES.replace("IMAGE", BUSYBOX_IMAGE)
        ),
    );
    let config = r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "runServices": ["db"],
            "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#;
    let (a, b) = (a.config(config), b.config(config));
    let first = a.up(&[]);
    docker_lines(&["rm", "-f", first["containerId"].as_str().unwrap()]);
    assert_eq!(services(&name), ["db running"]);

    // another workspace naming the project does not take the sidecar for its own
    let refused = b.run("up", &[]);
    assert!(
        refused.failed().contains("is not this workspace's"),
        "{}",
        refused.stderr
    );
    assert_eq!(services(&name), ["db running"]);

    let again = a.up(&[]);
    assert_ne!(again["containerId"], first["containerId"]);
    assert_eq!(again["composeProjectName"], name.as_str());
    assert_eq!(services(&name), ["app running", "db running"]);
    a.run("down", &["--remove"]).ok();
    assert!(services(&name).is_empty());
}

/// `docker port` of the project's container of `service`: its `<target> -> <ip>:<port>` lines.
fn ports_of(project: &str, service: &str) -> String {
    let id = docker_lines(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
        "--filter",
        &format!("label=com.docker.compose.service={service}"),
    ]);
    let id = id
        .first()
        .unwrap_or_else(|| panic!("no {service} container"));
    docker_lines(&["port", id]).join("\n")
}

/// Attack 25, P3's class for Compose (spec-note 0431): `ports:` with `127.0.0.1` and a host
/// port the repository chose, on a sidecar and on the primary, are published from free host
/// ports (the override file replaces the list with `!override`), with a warning naming the
/// grant; nothing listens on the repository's numbers. With `--allow publish:127.0.0.1:N` that
/// port keeps its number. Without the override both were published on the repository's ports.
#[test]
fn a_compose_projects_numbered_loopback_ports_are_published_from_free_ports() {
    let Some(ctx) = TestContext::busybox("compose_ops_free_ports") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    let (side_port, app_port) = (crate::support::free_port(), crate::support::free_port());
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n    ports: [\"127.0.0.1:{app_port}:80\"]\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    ports: [\"127.0.0.1:{side_port}:81\", \"127.0.0.1::82\"]\n"
        ),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    let run = ctx.run("up", &[]);
    run.ok();
    for port in [side_port, app_port] {
        assert!(
            run.stderr
                .contains(&format!("--allow publish:127.0.0.1:{port}")),
            "{}",
            run.stderr
        );
    }
    for (service, port, targets) in [("side", side_port, 2), ("app", app_port, 1)] {
        let published = ports_of(&name, service);
        assert_eq!(published.lines().count(), targets, "{published}");
        for line in published.lines() {
            assert!(line.contains("-> 127.0.0.1:"), "{published}");
            assert!(!line.ends_with(&format!(":{port}")), "{published}");
        }
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "something listens on {port}"
        );
    }
    ctx.run("down", &["--remove"]).ok();
    // granted: the sidecar's number is kept, the primary's still moves
    let grant = format!("publish:127.0.0.1:{side_port}");
    ctx.run("up", &["--allow", &grant]).ok();
    let side = ports_of(&name, "side");
    assert!(
        side.contains(&format!("-> 127.0.0.1:{side_port}")),
        "{side}"
    );
    assert!(!ports_of(&name, "app").ends_with(&format!(":{app_port}")));
    ctx.run("down", &["--remove"]).ok();
}

/// Attack 29, G1 (spec-note 0672): a sidecar that writes the workspace and starts first (the
/// primary waits for its healthcheck) replaced the primary's `../data` with a link to a host
/// folder between devcell's judgement and the primary's start, and the primary's hook wrote
/// there. The primary's bind is now a request (`mount`) because `side` may swap it first:
/// `up` is refused naming both, nothing is created or started, and the host folder is
/// untouched. Without the rule `up` succeeded and the hook wrote into the host folder.
#[test]
fn a_sidecar_that_starts_first_cannot_swap_the_primarys_bind_source() {
    use crate::support::hostile::HostTarget;
    let Some(ctx) = TestContext::busybox("compose_ops_swap_first") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    let host = HostTarget::new();
    std::fs::create_dir_all(ctx.path().join("data")).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"cd /w && rm -rf data && ln -s {} data && sleep 100000\"]\n    healthcheck: {{test: [\"CMD\", \"test\", \"-L\", \"/w/data\"], interval: 1s, retries: 30}}\n    volumes: [\"..:/w\"]\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    depends_on: {{side: {{condition: service_healthy}}}}\n    volumes: [\"..:/workspace\", \"../data:/data\"]\n",
            host.path().display()
        ),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace",
            "remoteUser": "nobody", "postCreateCommand": "echo written > /data/marker"}"#,
    );
    // the sidecar runs as the workspace's owner (spec-note 0611), who can write it
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    let all = format!("{}\n{}", run.stdout, run.stderr);
    assert_ne!(run.code, Some(0), "{all}");
    assert!(all.contains("--allow mount:"), "{all}");
    assert!(all.contains("`side` writes"), "{all}");
    assert!(services(&name).is_empty(), "{:?}", services(&name));
    assert!(ctx.path().join("data").is_dir(), "nothing ran");
    host.assert_untouched();
}

/// Attack 29, G5 (spec-note 0673): Compose packs build contexts by path, so a hardened `build`
/// of a Compose configuration is refused while its dev container runs (a process in it could
/// swap a context for a link to a host folder first), naming the container; once it is
/// stopped the build runs.
#[test]
fn a_compose_build_is_refused_while_its_dev_container_runs() {
    let Some(ctx) = TestContext::busybox("compose_ops_build_beside") else {
        return;
    };
    let ctx = ctx.isolated();
    let _name = project(&ctx);
    ctx.write(
        ".devcontainer/ctx/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\n"),
    );
    ctx.write(
        ".devcontainer/docker-compose.yml",
        "services:\n  app:\n    build: {context: ctx}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n",
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    ctx.remove_images_matching(&format!("{}-*", project(&ctx)));
    ctx.run("up", &[]).ok();
    let refused = ctx.run("build", &[]);
    let all = format!("{}\n{}", refused.stdout, refused.stderr);
    assert_ne!(refused.code, Some(0), "{all}");
    assert!(
        all.contains("Compose reads the build contexts by path"),
        "{all}"
    );
    ctx.run("down", &[]).ok();
    let built = ctx.run("build", &[]);
    assert_eq!(built.code, Some(0), "{}\n{}", built.stdout, built.stderr);
    ctx.run("down", &["--remove"]).ok();
}

/// Attack 30, H3 (spec-note 0478): the repository renamed its primary service (`app` →
/// `app2`) while the old primary ran: `up` found a running labelled primary and stopped
/// nothing, created `app2`, and the old one (exempt as the project's) kept writing the
/// workspace meanwhile. Only the configured service's running primary is left running now:
/// the old one is stopped before anything is read.
#[test]
fn a_renamed_primarys_old_container_is_stopped_before_up_reads() {
    let Some(ctx) = TestContext::busybox("compose_ops_renamed_primary") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n  app2:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n"
        ),
    );
    let config = |service: &str| {
        format!(
            r#"{{"dockerComposeFile": "docker-compose.yml", "service": "{service}", "runServices": ["{service}"], "workspaceFolder": "/workspace", "remoteUser": "nobody"}}"#
        )
    };
    let ctx = ctx.config(&config("app"));
    ctx.run("up", &[]).ok();
    assert_eq!(services(&name), ["app running"]);
    let ctx = ctx.config(&config("app2"));
    let run = ctx.run("up", &[]);
    run.ok();
    assert!(
        run.stderr.contains("stopped the workspace's containers"),
        "{}",
        run.stderr
    );
    // stopped before anything was read, then removed with the project's other containers:
    // none of them is today's primary's (spec-note 0681)
    assert_eq!(services(&name), ["app2 running"]);
    ctx.run("down", &["--remove"]).ok();
}

/// Attack 30, H2 (spec-note 0681): an agent in the primary dropped a sidecar's bind from the
/// Compose file and linked the bind's source out of the workspace; after `devcell down`, `up`
/// ran `compose start`, which started the sidecar created from yesterday's file, its bind now
/// reaching the host folder. A stopped project whose containers are not what today's judged
/// files make is created again instead: nothing is written outside the workspace.
#[test]
fn a_stopped_projects_container_from_other_files_is_not_started_as_it_is() {
    let Some(ctx) = TestContext::busybox("compose_ops_restart_stale") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    let outside = outside_folder(0o777);
    std::fs::create_dir_all(ctx.path().join("data")).unwrap();
    let compose = |side_volumes: &str| {
        format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"echo written > /data/marker; sleep 100000\"]\n{side_volumes}  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    depends_on: [side]\n    volumes: [\"..:/workspace\"]\n"
        )
    };
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &compose("    volumes: [\"../data:/data\"]\n"),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    // the sidecar runs as the workspace's owner (spec-note 0611), who can write it
    crate::support::git::give_to_workspace_owner(ctx.path());
    ctx.run("up", &[]).ok();
    assert!(
        ctx.path().join("data/marker").is_file(),
        "the sidecar writes through its bind"
    );
    ctx.run("down", &[]).ok();
    // what the agent in `app` could do before the `down`
    std::fs::remove_dir_all(ctx.path().join("data")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ctx.path().join("data")).unwrap();
    ctx.write(".devcontainer/docker-compose.yml", &compose(""));
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    run.ok();
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "the old sidecar wrote the host folder"
    );
    assert!(
        run.stderr.contains("is not started as it is"),
        "{}",
        run.stderr
    );
    assert_eq!(services(&name), ["app running", "side running"]);
    // under `hardened` a stopped project with sidecars is always created again
    ctx.run("down", &[]).ok();
    let again = ctx.up(&[]);
    assert_eq!(again["devcell"]["container"], "created", "{again}");
    ctx.run("down", &["--remove"]).ok();
}

/// Attack 31, M1: the same swap as above, with the primary's `data` bind given by
/// devcontainer.json `mounts` (devcell writes it into the override file, which the Compose
/// model judged by the swap rule did not hold): refused before anything runs, nothing read or
/// written on the host.
#[test]
fn a_sidecar_that_starts_first_cannot_swap_a_bind_from_the_configurations_mounts() {
    use crate::support::hostile::HostTarget;
    let Some(ctx) = TestContext::busybox("compose_ops_swap_mounts") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    let host = HostTarget::new();
    std::fs::create_dir_all(ctx.path().join("data")).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"cd /w && rm -rf data && ln -s {} data && sleep 100000\"]\n    healthcheck: {{test: [\"CMD\", \"test\", \"-L\", \"/w/data\"], interval: 1s, retries: 30}}\n    volumes: [\"..:/w\"]\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    depends_on: {{side: {{condition: service_healthy}}}}\n    volumes: [\"..:/workspace\"]\n",
            host.path().display()
        ),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace",
            "mounts": ["source=${localWorkspaceFolder}/data,target=/data,type=bind"],
            "remoteUser": "nobody", "postCreateCommand": "echo written > /data/marker"}"#,
    );
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    let all = format!("{}\n{}", run.stdout, run.stderr);
    assert_ne!(run.code, Some(0), "{all}");
    assert!(all.contains("--allow mount:"), "{all}");
    assert!(all.contains("`side` writes"), "{all}");
    assert!(services(&name).is_empty(), "{:?}", services(&name));
    assert!(ctx.path().join("data").is_dir(), "nothing ran");
    host.assert_untouched();
}

/// Attack 32, N1 (spec-note 0681): Compose's configuration hash leaves the top-level
/// `secrets:` out. A sidecar created with a secret's file `../harmless.txt`, which the agent
/// then made a link to a host file while the Compose file moved the secret to `../other.txt`,
/// passed the hash after `devcell down`; `compose start` (or `compose up`, which keeps it)
/// mounted the host file again. Such a container is removed and created from today's files.
#[test]
fn a_stopped_sidecars_secret_file_from_other_files_is_not_mounted_again() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(ctx) = TestContext::busybox("compose_ops_restart_secret") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    let outside = outside_folder(0o755);
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "host-secret-n1\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    ctx.write("harmless.txt", "harmless\n");
    ctx.write("other.txt", "other\n");
    ctx.write("out/.keep", "");
    std::fs::set_permissions(
        ctx.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let compose = |file: &str| {
        format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"cat /run/secrets/s >> /out/side.txt; sleep 100000\"]\n    secrets: [s]\n    volumes: [\"../out:/out\"]\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    depends_on: [side]\n    volumes: [\"..:/workspace\"]\nsecrets:\n  s:\n    file: ../{file}\n"
        )
    };
    ctx.write(".devcontainer/docker-compose.yml", &compose("harmless.txt"));
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    crate::support::git::give_to_workspace_owner(ctx.path());
    ctx.run("up", &[]).ok();
    ctx.run("down", &[]).ok();
    // what the agent in `app` could do before the `down`
    std::fs::remove_file(ctx.path().join("harmless.txt")).unwrap();
    std::os::unix::fs::symlink(&secret, ctx.path().join("harmless.txt")).unwrap();
    ctx.write(".devcontainer/docker-compose.yml", &compose("other.txt"));
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    run.ok();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let seen = std::fs::read_to_string(ctx.path().join("out/side.txt")).unwrap_or_default();
    assert!(
        !seen.contains("host-secret-n1"),
        "the old sidecar mounted the host file: {seen}"
    );
    assert!(seen.contains("other"), "{seen}");
    assert!(
        run.stderr.contains("is not started as it is"),
        "{}",
        run.stderr
    );
    assert_eq!(services(&name), ["app running", "side running"]);
    ctx.run("down", &["--remove"]).ok();
}

/// Attack 33, P1 (spec-note 0681): the primary's bind from devcontainer.json `mounts` was
/// judged with the sidecar that writes the workspace starting after the primary. Compose's
/// hash leaves `depends_on` out, so the agent reversed the order (and armed the sidecar's
/// unchanged command through a script it runs) before `devcell down`: `compose start` started
/// the sidecar first, which swapped the bind's source for a link to a host folder. The stopped
/// project is not started as it is; created again, the swap is refused.
#[test]
fn a_stopped_project_whose_start_order_changed_is_not_started_as_it_is() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(ctx) = TestContext::busybox("compose_ops_restart_order") else {
        return;
    };
    let ctx = ctx.isolated();
    let _name = project(&ctx);
    let outside = outside_folder(0o755);
    std::fs::write(outside.path().join("secret.txt"), "host-secret-p1\n").unwrap();
    std::fs::set_permissions(
        outside.path().join("secret.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::create_dir_all(ctx.path().join("data/harmless")).unwrap();
    ctx.write("out/.keep", "");
    ctx.write("health.sh", "exit 0\n");
    ctx.write(
        "side.sh",
        &format!(
            "if [ -e /w/.armed ]; then rm -rf /w/data/harmless; ln -s {} /w/data/harmless; fi\nsleep 100000\n",
            outside.path().display()
        ),
    );
    let compose = |side_deps: &str, app_deps: &str| {
        format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"/w/side.sh\"]\n    healthcheck: {{test: [\"CMD\", \"sh\", \"/w/health.sh\"], interval: 1s, retries: 30}}\n    volumes: [\"..:/w\"]\n{side_deps}  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n{app_deps}"
        )
    };
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &compose("    depends_on: [app]\n", ""),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace",
            "mounts": ["source=${localWorkspaceFolder}/data/harmless,target=/data,type=bind"],
            "remoteUser": "nobody", "postStartCommand": "cat /data/secret.txt > /workspace/out/leak.txt; true"}"#,
    );
    crate::support::git::give_to_workspace_owner(ctx.path());
    std::fs::set_permissions(
        ctx.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    ctx.up(&[]);
    ctx.run("down", &[]).ok();
    // what the agent could do before the `down`: arm the script, reverse the start order
    ctx.write(".armed", "");
    ctx.write("health.sh", "test -L /w/data/harmless\n");
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &compose("", "    depends_on: {side: {condition: service_healthy}}\n"),
    );
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    let leak = std::fs::read_to_string(ctx.path().join("out/leak.txt")).unwrap_or_default();
    assert!(
        !leak.contains("host-secret-p1"),
        "the primary read the host folder: {leak}"
    );
    let all = format!("{}\n{}", run.stdout, run.stderr);
    assert_ne!(run.code, Some(0), "{all}");
    assert!(all.contains("--allow mount:"), "{all}");
    ctx.run("down", &["--remove"]).ok();
}

/// Attack 33, P2 (spec-note 0681): the primary service renamed (`app` → `app2`) left no
/// stopped primary to compare, so the old sidecar, its secret's file since a link to a host
/// file, was kept by `compose up`. A project with containers but no primary of today's service
/// has every container created again.
#[test]
fn a_renamed_primary_does_not_keep_the_old_sidecars() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(ctx) = TestContext::busybox("compose_ops_restart_rename") else {
        return;
    };
    let ctx = ctx.isolated();
    let _name = project(&ctx);
    let outside = outside_folder(0o755);
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "host-secret-p2\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    ctx.write("harmless.txt", "harmless\n");
    ctx.write("other.txt", "other\n");
    ctx.write("out/.keep", "");
    let compose = |primary: &str, file: &str| {
        format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"cat /run/secrets/s >> /out/side.txt; sleep 100000\"]\n    secrets: [s]\n    volumes: [\"../out:/out\"]\n  {primary}:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    depends_on: [side]\n    volumes: [\"..:/workspace\"]\nsecrets:\n  s:\n    file: ../{file}\n"
        )
    };
    let config = |primary: &str| {
        format!(
            r#"{{"dockerComposeFile": "docker-compose.yml", "service": "{primary}", "workspaceFolder": "/workspace", "remoteUser": "nobody"}}"#
        )
    };
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &compose("app", "harmless.txt"),
    );
    let ctx = ctx.config(&config("app"));
    crate::support::git::give_to_workspace_owner(ctx.path());
    std::fs::set_permissions(
        ctx.path().join("out"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    ctx.up(&[]);
    ctx.run("down", &[]).ok();
    std::fs::remove_file(ctx.path().join("harmless.txt")).unwrap();
    std::os::unix::fs::symlink(&secret, ctx.path().join("harmless.txt")).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &compose("app2", "other.txt"),
    );
    let ctx = ctx.config(&config("app2"));
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    run.ok();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let seen = std::fs::read_to_string(ctx.path().join("out/side.txt")).unwrap_or_default();
    assert!(
        !seen.contains("host-secret-p2"),
        "the old sidecar mounted the host file: {seen}"
    );
    assert!(
        run.stderr
            .contains("are left without today's primary service"),
        "{}",
        run.stderr
    );
    ctx.run("down", &["--remove"]).ok();
}

/// Attack 34, Q2 (spec-note 0681): an old sidecar's named volume was created bind-backed onto
/// a workspace folder; the agent made that folder a link to a host folder and renamed the
/// volume in the file (`name:`), so today's judgement never inspected the engine's old volume,
/// and `compose start` mounted it again, its device now the host folder. Under `hardened` a
/// stopped project's sidecars are created from today's files: the old volume is not mounted.
#[test]
fn a_stopped_sidecars_old_bind_backed_volume_is_not_mounted_again() {
    let Some(ctx) = TestContext::busybox("compose_ops_restart_volume") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    let outside = outside_folder(0o777);
    std::fs::create_dir_all(ctx.path().join("vdata")).unwrap();
    ctx.write("out/.keep", "");
    let volume = |definition: &str| {
        format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"echo from-sidecar > /data/written; sleep 100000\"]\n    volumes: [\"vol:/data\"]\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    depends_on: [side]\n    volumes: [\"..:/workspace\"]\nvolumes:\n  vol:\n{definition}"
        )
    };
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &volume(&format!(
            "    driver_opts: {{type: none, o: bind, device: {}/vdata}}\n",
            ws.display()
        )),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    crate::support::git::give_to_workspace_owner(ctx.path());
    ctx.up(&[]);
    assert!(
        ctx.path().join("vdata/written").is_file(),
        "the volume is the folder"
    );
    ctx.run("down", &[]).ok();
    std::fs::rename(ctx.path().join("vdata"), ctx.path().join("vdata.old")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ctx.path().join("vdata")).unwrap();
    let renamed = format!("{name}-other");
    ctx.clean_label(&format!("com.docker.compose.volume={renamed}"));
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &volume(&format!("    name: {renamed}\n")),
    );
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "the old volume's device, now the host folder, was mounted and written"
    );
    run.ok();
    ctx.run("down", &["--remove"]).ok();
    let _ = crate::support::engine::docker(&["volume", "rm", "-f", &renamed]);
    let _ = crate::support::engine::docker(&["volume", "rm", "-f", &format!("{name}_vol")]);
}

/// Attack 35, R1 (spec-note 0681): Compose's own re-creation hands the new container what the
/// old one had mounted at a path today's file makes an anonymous volume, a bind included. The
/// agent made a judged bind's source a link to a host folder and changed `../wdir:/data` to
/// `/data`: re-created by `--force-recreate`, the sidecar got the old bind, now the host folder.
/// The old containers are removed instead, and nothing reaches the host folder.
#[test]
fn a_stopped_sidecars_old_bind_is_not_handed_to_its_new_container() {
    let Some(ctx) = TestContext::busybox("compose_ops_restart_anon") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = project(&ctx);
    let outside = outside_folder(0o777);
    std::fs::create_dir_all(ctx.path().join("wdir")).unwrap();
    let compose = |volume: &str| {
        format!(
            "services:\n  side:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sh\", \"-c\", \"echo from-sidecar > /data/written; sleep 100000\"]\n    volumes: [\"{volume}\"]\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    depends_on: [side]\n    volumes: [\"..:/workspace\"]\n"
        )
    };
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &compose("../wdir:/data"),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspace", "remoteUser": "nobody"}"#,
    );
    crate::support::git::give_to_workspace_owner(ctx.path());
    ctx.up(&[]);
    assert!(
        ctx.path().join("wdir/written").is_file(),
        "the bind is the folder"
    );
    ctx.run("down", &[]).ok();
    std::fs::rename(ctx.path().join("wdir"), ctx.path().join("wdir.old")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ctx.path().join("wdir")).unwrap();
    ctx.write(".devcontainer/docker-compose.yml", &compose("/data"));
    crate::support::git::give_to_workspace_owner(ctx.path());
    let run = ctx.run("up", &[]);
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "the old bind, now the host folder, was handed to the new sidecar"
    );
    run.ok();
    assert_eq!(services(&name), ["app running", "side running"]);
    ctx.run("down", &["--remove"]).ok();
}
