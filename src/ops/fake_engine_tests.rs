//! The spec's operations run against an in-memory engine ([`crate::engine::fake::FakeEngine`]):
//! they need nothing of Docker beyond the [`crate::engine::Engine`] trait, the seam another
//! backend plugs into.

use std::sync::Mutex;

use crate::engine::fake::FakeEngine;
use crate::engine::{ContainerSpec, ExecResult};
use crate::ops::options::TargetOptions;
use crate::progress::{Event, Reporter};

/// Status lines an operation reported.
#[derive(Default)]
struct Statuses(Mutex<Vec<String>>);

impl Reporter for Statuses {
    fn report(&self, event: Event) {
        if let Event::Status(line) = event {
            self.0.lock().unwrap().push(line);
        }
    }
}

/// A workspace whose image configuration names `fake/base:1` and `remoteUser` `dev`.
fn workspace() -> (tempfile::TempDir, TargetOptions) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join(".devcontainer");
    std::fs::create_dir(&config).unwrap();
    std::fs::write(
        config.join("devcontainer.json"),
        r#"{ "image": "fake/base:1", "remoteUser": "dev" }"#,
    )
    .unwrap();
    let target = TargetOptions {
        workspace_folder: dir.path().to_path_buf(),
        ..TargetOptions::default()
    };
    (dir, target)
}

/// The spec of a container carrying the workspace's id labels (and `extra` labels), binding
/// the workspace when `binds`.
fn spec_for(target: &TargetOptions, binds: bool, extra: &[(&str, &str)]) -> ContainerSpec {
    let loaded = crate::ops::target::load(target).unwrap();
    let mut labels = crate::ops::target::id_labels(target, &loaded);
    labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    ContainerSpec {
        image: "fake/base:1".to_string(),
        labels,
        mounts: loaded
            .workspace_mount()
            .unwrap()
            .into_iter()
            .filter(|_| binds)
            .collect(),
        ..ContainerSpec::default()
    }
}

fn engine_with_image() -> FakeEngine {
    let engine = FakeEngine::new();
    engine.add_image(
        "fake/base:1",
        "fake-image-1",
        &[(
            "/etc/passwd",
            "root:x:0:0:root:/root:/bin/sh\ndev:x:1000:6:dev:/home/dev:/bin/sh\n",
        )],
    );
    engine
}

/// `exec`'s options for `argv` in `target`, without the user environment probe.
fn exec_options(target: &TargetOptions, argv: &[&str]) -> crate::ops::exec::ExecOptions {
    crate::ops::exec::ExecOptions {
        target: target.clone(),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        default_user_env_probe: crate::lifecycle::UserEnvProbe::None,
        ..Default::default()
    }
}

/// No stdin; stdout and stderr dropped.
fn no_streams() -> crate::ops::exec::ExecStreams<'static> {
    crate::ops::exec::ExecStreams {
        stdin: None,
        stdout: Box::new(tokio::io::sink()),
        stderr: Box::new(tokio::io::sink()),
    }
}

/// `down` finds the workspace's container by its id labels and stops it; a container that
/// claims the labels without binding the workspace is left running (spec-note 0421).
#[tokio::test]
async fn down_stops_the_labelled_container_that_binds_the_workspace() {
    let (_dir, target) = workspace();
    let engine = engine_with_image();
    let ours = engine.add_container(&spec_for(&target, true, &[]), true);
    let claim = engine.add_container(&spec_for(&target, false, &[]), true);
    let statuses = Statuses::default();
    let opts = crate::ops::down::DownOptions {
        target: target.clone(),
        ..Default::default()
    };

    let result = crate::ops::down::down_with(&engine, &opts, &statuses)
        .await
        .unwrap();

    assert_eq!(result.container_ids, vec![ours.clone()]);
    assert!(!engine.container(&ours).unwrap().running);
    assert!(engine.container(&claim).unwrap().running);
    assert!(!engine.calls().contains(&format!("stop {claim}")));
    let lines = statuses.0.lock().unwrap();
    assert!(
        lines.iter().any(|l| l.contains("does not bind it")),
        "{lines:?}"
    );
}

/// `down --remove` removes the container instead of stopping it.
#[tokio::test]
async fn down_remove_removes_the_container() {
    let (_dir, target) = workspace();
    let engine = engine_with_image();
    let ours = engine.add_container(&spec_for(&target, true, &[]), true);
    let opts = crate::ops::down::DownOptions {
        target,
        remove: true,
        ..Default::default()
    };

    let result = crate::ops::down::down_with(&engine, &opts, &Statuses::default())
        .await
        .unwrap();

    assert_eq!(result.container_ids, vec![ours.clone()]);
    assert!(engine.container(&ours).is_none());
    assert!(engine.calls().contains(&format!("remove {ours}")));
}

/// `exec` in a container created under `hardened` runs the command as the remote user's
/// numeric `uid:gid` from the image's `/etc/passwd` (the primary group 6 replaced by the
/// user's own, spec-note 0400), in the workspace folder.
#[tokio::test]
async fn exec_runs_as_the_numeric_user_under_hardened() {
    let (_dir, target) = workspace();
    let engine = engine_with_image();
    let spec = spec_for(&target, true, &[(crate::names::PROFILE_LABEL, "hardened")]);
    let id = engine.add_container(&spec, true);
    engine.reply_to_execs(ExecResult {
        exit_code: 3,
        ..ExecResult::default()
    });
    let opts = exec_options(&target, &["make", "test"]);

    let code = crate::ops::exec::exec_with(&engine, &opts, no_streams(), &Statuses::default())
        .await
        .unwrap();

    assert_eq!(code, 3);
    let execs = engine.execs();
    let last = execs.last().unwrap();
    assert_eq!(last.container, id);
    assert_eq!(last.request.argv, ["make", "test"]);
    assert_ne!(last.request.user.as_deref(), Some("dev"));
    let (uid, gid) = last
        .request
        .user
        .as_deref()
        .unwrap()
        .split_once(':')
        .unwrap();
    assert_eq!(uid, "1000");
    assert_ne!(gid, "6");
    let folder = spec.mounts[0].target.clone();
    assert_eq!(last.request.working_dir.as_deref(), Some(folder.as_str()));
}

/// Without `hardened` the command runs as the remote user's name, as the reference CLI does.
#[tokio::test]
async fn exec_runs_as_the_remote_user_name_otherwise() {
    let (_dir, target) = workspace();
    let engine = engine_with_image();
    engine.add_container(&spec_for(&target, true, &[]), true);
    let opts = exec_options(&target, &["true"]);

    crate::ops::exec::exec_with(&engine, &opts, no_streams(), &Statuses::default())
        .await
        .unwrap();

    assert_eq!(engine.execs()[0].request.user.as_deref(), Some("dev"));
}

/// `exec` refuses a stopped container and runs nothing.
#[tokio::test]
async fn exec_refuses_a_stopped_container() {
    let (_dir, target) = workspace();
    let engine = engine_with_image();
    engine.add_container(&spec_for(&target, true, &[]), false);
    let opts = exec_options(&target, &["true"]);

    let err = crate::ops::exec::exec_with(&engine, &opts, no_streams(), &Statuses::default())
        .await
        .unwrap_err();

    assert!(
        matches!(err, crate::ops::OpsError::NotRunning { .. }),
        "{err:?}"
    );
    assert!(engine.execs().is_empty());
}

/// spec-note 0659: an image removed between its preparation and the create (a concurrent
/// `prune` of the cache tag devcell built: CI saw `No such image: devcell/uid:…`) is prepared
/// again and the container created once more; `up` succeeds and says so.
#[tokio::test]
async fn up_creates_again_when_the_image_went_before_the_create() {
    let (dir, target) = workspace();
    std::fs::write(
        dir.path().join(".devcontainer/devcontainer.json"),
        r#"{ "image": "fake/base:1", "remoteUser": "dev", "updateRemoteUserUID": false }"#,
    )
    .unwrap();
    let engine = engine_with_image();
    // the uid check's answer: real, effective, saved and filesystem uid
    engine.reply_to_execs(ExecResult {
        stdout: b"1000 1000 1000 1000\n".to_vec(),
        ..ExecResult::default()
    });
    engine.lose_image_at_next_create();
    let opts = crate::ops::options::UpOptions {
        target,
        default_user_env_probe: crate::lifecycle::UserEnvProbe::None,
        cache_dir: Some(dir.path().join("cache")),
        ..Default::default()
    };
    let statuses = Statuses::default();

    let result = crate::ops::up::up_with(&engine, &opts, &statuses).await;

    let result = result.unwrap();
    let creates = engine
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("create fakecontainer"))
        .count();
    assert_eq!(creates, 1, "{:?}", engine.calls());
    assert!(engine.container(&result.container_id).is_some());
    let said = statuses.0.lock().unwrap().join("\n");
    assert!(said.contains("preparing it again"), "{said}");
}
