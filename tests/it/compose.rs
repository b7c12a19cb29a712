//! `devcell::engine::compose` and `devcell::security::compose` against the real engine and
//! Compose v2 (installed by `scripts/services`), with the local busybox image only.

use crate::support::deadline::Bounded as _;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use devcell::engine::compose::{
    CONFIG_FILES_LABEL, ComposeCli, ComposeProject, PROJECT_LABEL, ProjectNameInputs,
    config_files_from_label, escape_interpolation, override_file, project_name, service_labels,
};
use devcell::engine::{
    ContainerSpec, Engine, ExecInput, ExecOutput, ExecRequest, Limits, Mount, MountKind,
};
use devcell::security::compose::{judge_compose, refused_requests};
use devcell::security::host_path::Places;
use devcell::security::{Grants, RequestStatus, SecurityProfile};
use serde_json::{Value, json};

use crate::support::engine::{BUSYBOX, engine};
use crate::support::unique;

/// Values Compose would interpolate or a YAML writer would mangle (devcontainers/cli#904).
const TRICKY: &[(&str, &str)] = &[
    ("DOLLAR", "$5 and $HOME"),
    ("BRACED", "${HOME} $${HOME} $$"),
    ("QUOTES", r#"it's "quoted" ''"#),
    ("BACKSLASH", r"C:\path\n\\x"),
    ("NEWLINES", "line one\nline two\r\n\ttabbed"),
    ("UNICODE", "grüße ✓"),
];

/// Compose v2, or `None` with a note when there is none and `DEVCELL_TEST_ENGINE` is not `1`.
async fn compose(test: &str) -> Option<ComposeCli> {
    engine(test).await?;
    match ComposeCli::locate(None, None).await {
        Ok(cli) => Some(cli),
        Err(e) => {
            let required = std::env::var("DEVCELL_TEST_ENGINE").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{test}: DEVCELL_TEST_ENGINE=1 but {e} (scripts/services installs Compose v2)"
            );
            #[allow(clippy::print_stderr)]
            {
                eprintln!("note: {test} skipped: {e}");
            }
            None
        }
    }
}

/// Runs `docker compose down -v` for the project on drop (also when the test panics), so
/// only what the test created goes.
struct ProjectGuard {
    name: String,
    files: Vec<PathBuf>,
}

impl Drop for ProjectGuard {
    fn drop(&mut self) {
        let mut c = Command::new("docker");
        c.args(["compose", "--project-name", &self.name]);
        for f in &self.files {
            c.arg("-f").arg(f);
        }
        let _ = c.args(["down", "-v", "--timeout", "1"]).bounded_output();
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn tricky_env() -> indexmap::IndexMap<String, String> {
    TRICKY
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The `docker compose` plugin answers before `--docker-compose-path`, which is the fallback
/// as in the reference CLI (whose own tests pass `--docker-compose-path trigger-compose-v2`, a
/// name that is no program, and expect `up` to succeed). Spec-note 0600.
#[tokio::test]
async fn the_docker_compose_plugin_comes_before_docker_compose_path() {
    let Some(found) = compose("compose_locate_order").await else {
        return;
    };
    assert_eq!(
        found.command(),
        "docker compose",
        "this machine has the plugin"
    );
    let cli = ComposeCli::locate(None, Some("trigger-compose-v2"))
        .await
        .expect("the plugin answers first");
    assert_eq!(cli.command(), "docker compose");
    assert_eq!(cli.version(), found.version());
}

#[tokio::test]
async fn compose_config_is_the_resolved_model_with_extends_and_profiles_judged() {
    let Some(cli) = compose("compose_config_resolved").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("My Repo");
    let file = ws.join(".devcontainer/docker-compose.yml");
    write(
        &file,
        &format!(
            r#"x-common: &common
  image: {BUSYBOX}
  environment:
    FROM_FILE: "file"
    DOLLAR: "the file's own"
services:
  app:
    <<: *common
    volumes:
      - ..:/workspace
  cache:
    extends: {{ service: app }}
    profiles: [extra]
    cap_add: [NET_ADMIN]
    pid: host
"#
        ),
    );
    let files = vec![file.clone()];
    let model = cli.config(None, &files, None).await.expect("config");
    assert_eq!(model["name"], "devcontainer", "Compose's default here");
    assert_eq!(
        project_name(&ProjectNameInputs {
            env: None,
            workspace_dot_env: None,
            model_name: model["name"].as_str(),
            workspace_folder: &ws,
            first_file: Some(&file),
        }),
        "myrepo_devcontainer"
    );
    // `extends` and the anchor applied, the profiled service present (`--profile *`)
    assert_eq!(model["services"]["cache"]["image"], BUSYBOX);
    assert_eq!(
        model["services"]["cache"]["environment"]["FROM_FILE"],
        "file"
    );
    assert_eq!(
        model["services"]["app"]["volumes"][0]["source"],
        ws.to_string_lossy().as_ref()
    );

    // the judge sees what Compose resolved
    let places = Places::new(&ws, Some(Path::new("/home/nobody-devcell")), None);
    let err = judge_compose(
        &SecurityProfile::default(),
        &model,
        "app",
        &places,
        &Grants::default(),
    )
    .unwrap_err();
    let refused: Vec<String> = refused_requests(&err)
        .unwrap()
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(
        refused,
        [
            "capability `NET_ADMIN` (from Compose service `cache` (`cap_add`)), grant with `--allow cap:NET_ADMIN`",
            "shared namespace `pid:host` (from Compose service `cache` (`pid`)), grant with `--allow namespace:pid:host`",
        ]
    );
    let grants = Grants::parse(&["cap:NET_ADMIN", "namespace:pid:host"]).unwrap();
    let judged = judge_compose(&SecurityProfile::default(), &model, "app", &places, &grants)
        .expect("granted");
    assert!(
        judged
            .requests
            .iter()
            .all(|r| r.status == RequestStatus::Granted)
    );

    // the override's values arrive byte for byte, over the file's own environment
    let mut spec = ContainerSpec {
        image: BUSYBOX.to_string(),
        env: tricky_env(),
        ..ContainerSpec::default()
    };
    let metadata = r#"[{"remoteUser":"a$b","containerEnv":{"Q":"\"x\""}}]"#;
    spec.labels
        .insert("devcontainer.metadata".to_string(), metadata.to_string());
    let over = override_file("app", &spec, &judged.sidecars, false);
    let over_path = dir.path().join("override.json");
    fs::write(&over_path, serde_json::to_vec_pretty(&over).unwrap()).unwrap();
    let both = vec![file.clone(), over_path];
    let model = cli.config(Some("p"), &both, None).await.expect("config");
    let app = &model["services"]["app"];
    // `config` prints the model re-escaped for Compose (`$` as `$$`): what it read is the
    // exact value
    for (k, v) in TRICKY {
        let mut expected = json!(v);
        escape_interpolation(&mut expected);
        assert_eq!(app["environment"][*k], expected, "{k}");
    }
    assert_eq!(app["environment"]["FROM_FILE"], "file");
    let mut label = json!(metadata);
    escape_interpolation(&mut label);
    assert_eq!(app["labels"]["devcontainer.metadata"], label);
    assert_eq!(
        model["services"]["cache"]["security_opt"],
        json!(["no-new-privileges:true"])
    );
    assert_eq!(model["services"]["cache"]["pids_limit"], 1024);
}

#[tokio::test]
async fn a_two_service_project_comes_up_hardened_and_goes_down_leaving_nothing() {
    let Some(cli) = compose("compose_up_down").await else {
        return;
    };
    let engine = engine("compose_up_down").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("repo");
    let file = ws.join(".devcontainer/docker-compose.yml");
    write(
        &file,
        &format!(
            r#"services:
  app:
    image: {BUSYBOX}
    environment:
      DOLLAR: "the file's own"
    volumes:
      - ..:/workspace
  db:
    image: {BUSYBOX}
    command: ["sh", "-c", "while true; do echo pong | nc -l -p 7000; done"]
"#
        ),
    );
    let name = unique("devcell-compose");
    let places = Places::new(&ws, None, None);
    let model = cli
        .config(Some(&name), std::slice::from_ref(&file), None)
        .await
        .unwrap();
    let judged = judge_compose(
        &SecurityProfile::default(),
        &model,
        "app",
        &places,
        &Grants::default(),
    )
    .expect("an ordinary project");
    let mut spec = ContainerSpec {
        image: BUSYBOX.to_string(),
        user: Some("65534:65534".to_string()),
        entrypoint: Some(vec!["/bin/sh".to_string()]),
        cmd: Some(vec![
            "-c".to_string(),
            "trap 'exit 0' TERM; while sleep 1 & wait $!; do :; done".to_string(),
        ]),
        init: Some(true),
        read_only_rootfs: true,
        cap_drop: vec!["ALL".to_string()],
        security_opt: vec!["no-new-privileges".to_string()],
        limits: Limits {
            pids: Some(512),
            memory_bytes: Some(1 << 30),
            nano_cpus: Some(1_000_000_000),
        },
        env: tricky_env(),
        mounts: vec![Mount {
            kind: MountKind::Volume,
            source: Some("state".to_string()),
            target: "/state".to_string(),
            read_only: false,
        }],
        ..ContainerSpec::default()
    };
    spec.tmpfs
        .insert("/tmp".to_string(), "size=16m".to_string());
    spec.labels.insert(
        "devcontainer.metadata".to_string(),
        r#"[{"remoteUser":"nobody"}]"#.to_string(),
    );
    let over = override_file("app", &spec, &judged.sidecars, false);
    let over_path = dir.path().join("override.json");
    fs::write(&over_path, serde_json::to_vec(&over).unwrap()).unwrap();
    let files = vec![file.clone(), over_path];
    let _guard = ProjectGuard {
        name: name.clone(),
        files: files.clone(),
    };
    let project = ComposeProject {
        cli: cli.clone(),
        name: name.clone(),
        files,
        env_file: None,
    };
    project.up(&[], false).await.expect("up");

    let labels = |service: &str| service_labels(&name, service);
    let app = engine.find_containers(&labels("app")).await.unwrap();
    assert_eq!(app.len(), 1, "{app:?}");
    let app_id = app[0].id.clone();
    // the files it was brought up with, to find the override again on reuse
    let info = engine
        .inspect_container_json(&app_id)
        .await
        .unwrap()
        .unwrap();
    let recorded = info
        .pointer(&format!(
            "/Config/Labels/{}",
            CONFIG_FILES_LABEL.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .unwrap_or_default();
    assert_eq!(config_files_from_label(recorded), project.files);
    let ps = project.ps().await.unwrap();
    assert_eq!(ps.len(), 2, "{ps:?}");
    assert!(ps.iter().all(|c| c.state == "running"), "{ps:?}");

    // the environment arrived byte for byte, over the file's own
    for (k, v) in TRICKY {
        let out = engine
            .exec(
                &app_id,
                &ExecRequest {
                    argv: vec![
                        "/bin/sh".to_string(),
                        "-c".to_string(),
                        format!("printf '%s' \"${k}\""),
                    ],
                    ..ExecRequest::default()
                },
                ExecInput::None,
                ExecOutput::Collect,
            )
            .await
            .unwrap();
        assert_eq!(out.stdout_text(), *v, "{k}");
    }
    // the primary reaches the sidecar by its service name, as the user nobody
    let out = engine
        .exec(
            &app_id,
            &ExecRequest {
                argv: ["sh", "-c", "id -u; nc -w 5 db 7000 </dev/null"]
                    .map(String::from)
                    .into(),
                ..ExecRequest::default()
            },
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "65534\npong\n", "{}", out.stderr_text());

    let inspect = |v: &Value, p: &str| v.pointer(p).cloned().unwrap_or(Value::Null);
    let a = engine
        .inspect_container_json(&app_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inspect(&a, "/HostConfig/ReadonlyRootfs"), true);
    // every capability dropped, read where it applies (Podman's inspect spells `cap_drop:
    // [ALL]` as the list of its default capabilities, Docker's as `["ALL"]`)
    let bounding = engine
        .exec(
            &app_id,
            &ExecRequest {
                argv: ["grep", "^CapBnd", "/proc/self/status"]
                    .map(String::from)
                    .into(),
                ..ExecRequest::default()
            },
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await
        .unwrap();
    assert_eq!(
        bounding.stdout_text(),
        "CapBnd:\t0000000000000000\n",
        "{}",
        bounding.stderr_text()
    );
    assert_eq!(inspect(&a, "/HostConfig/PidsLimit"), 512);
    assert_eq!(inspect(&a, "/HostConfig/Init"), true);
    assert_eq!(
        inspect(&a, "/Config/Labels/devcontainer.metadata"),
        r#"[{"remoteUser":"nobody"}]"#
    );
    let db = engine.find_containers(&labels("db")).await.unwrap();
    let d = engine
        .inspect_container_json(&db[0].id)
        .await
        .unwrap()
        .unwrap();
    // no-new-privileges where it applies (Podman's inspect spells the option without `:true`)
    let nnp = engine
        .exec(
            &db[0].id,
            &ExecRequest {
                argv: ["grep", "^NoNewPrivs", "/proc/self/status"]
                    .map(String::from)
                    .into(),
                ..ExecRequest::default()
            },
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await
        .unwrap();
    assert_eq!(
        nnp.stdout_text(),
        "NoNewPrivs:\t1\n",
        "{}",
        nnp.stderr_text()
    );
    assert_eq!(inspect(&d, "/HostConfig/PidsLimit"), 1024);
    assert_eq!(inspect(&d, "/HostConfig/Memory"), 4_i64 << 30);
    assert_eq!(inspect(&d, "/HostConfig/NanoCpus"), 2_000_000_000_i64);
    let volume = format!("{name}_state");
    assert!(engine.volume_exists(&volume).await.unwrap());

    project.stop(&[]).await.expect("stop");
    let stopped = project.ps().await.unwrap();
    assert!(stopped.iter().all(|c| c.state == "exited"), "{stopped:?}");
    project.down(true).await.expect("down");
    let project_only = BTreeMap::from([(PROJECT_LABEL.to_string(), name.clone())]);
    assert!(
        engine
            .find_containers(&project_only)
            .await
            .unwrap()
            .is_empty(),
        "containers left"
    );
    assert!(
        engine
            .find_networks(&project_only)
            .await
            .unwrap()
            .is_empty(),
        "networks left"
    );
    assert!(!engine.volume_exists(&volume).await.unwrap(), "volume left");
}

#[tokio::test]
async fn compose_errors_carry_compose_stderr() {
    let Some(cli) = compose("compose_errors").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yml");
    write(
        &file,
        "services:\n  app:\n    extends: { service: missing }\n",
    );
    let err = cli.config(None, &[file], None).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("config"), "{text}");
    assert!(text.contains("missing"), "{text}");
}
