//! The `hardened` profile proven from inside a real container, and the grant path proven by
//! what devcell asks the engine for.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use devcell::engine::{
    ContainerSpec, DockerEngine, Engine, ExecInput, ExecOutput, ExecRequest, Mount, MountKind,
};
use devcell::security::{
    Grants, PolicyInput, ProfileLimits, SecurityError, SecurityProfile, Source, apply,
};

use crate::support::context::Cleanup;
use crate::support::engine::{BUSYBOX, ContainerGuard, engine, unique_labels};

/// A busybox container asking for nothing special, as `up` would request it: the image runs
/// as root by default; `remoteUser` is `nobody` (uid 65534, home `/nonexistent`).
fn request(workspace: &std::path::Path, name: &str) -> PolicyInput {
    PolicyInput {
        spec: ContainerSpec {
            image: BUSYBOX.to_string(),
            labels: unique_labels(name),
            cmd: Some(vec!["sleep".into(), "600".into()]),
            mounts: vec![Mount {
                kind: MountKind::Bind,
                source: Some(workspace.to_string_lossy().into_owned()),
                target: "/workspace".into(),
                read_only: false,
            }],
            ..ContainerSpec::default()
        },
        remote_user: Some("nobody".into()),
        image_user: None,
        remote_home: Some("/nonexistent".into()),
        remote_ids: Some((65534, 65534)),
        workspace: workspace.to_path_buf(),
        host_home: dirs::home_dir(),
        engine_socket: Some("/var/run/docker.sock".into()),
        ..PolicyInput::default()
    }
}

async fn run(e: &DockerEngine, id: &str, user: Option<&str>, script: &str) -> (i64, String) {
    let req = ExecRequest {
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        user: user.map(str::to_string),
        ..ExecRequest::default()
    };
    let r = e
        .exec(id, &req, ExecInput::None, ExecOutput::Collect)
        .await
        .expect("exec runs");
    (r.exit_code, r.stdout_text() + &r.stderr_text())
}

#[tokio::test]
async fn hardened_container_proven_from_inside() {
    let Some(e) = engine("hardened_container_proven_from_inside").await else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    fs::set_permissions(ws.path(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(ws.path().join("in-workspace"), "w").unwrap();
    // A marker in the host home: it must not be visible anywhere in the container.
    let home = dirs::home_dir().expect("a host home");
    let marker_name = format!(".devcell-test-home-marker-{}", std::process::id());
    let marker = home.join(&marker_name);
    let cleanup = Cleanup::default();
    cleanup.file(&marker);
    fs::write(&marker, "host home").unwrap();

    let profile = SecurityProfile::Hardened(ProfileLimits {
        pids: 64,
        ..ProfileLimits::default()
    });
    let applied = apply(
        &profile,
        &request(ws.path(), "hardened"),
        &Grants::default(),
    )
    .unwrap();
    assert!(applied.requests.is_empty(), "{:?}", applied.requests);
    assert_eq!(applied.spec.user.as_deref(), Some("nobody"));
    let id = e.create_container(&applied.spec).await.unwrap();
    let _guard = ContainerGuard(id.clone());
    e.start_container(&id).await.unwrap();

    // Inspect agrees with the request.
    let info = e.inspect_container(&id).await.unwrap().unwrap();
    assert!(!info.host.privileged && info.host.read_only_rootfs);
    // Podman reports the dropped capabilities one by one; the proof is from inside below.
    let podman = e.version().await.unwrap().podman;
    assert!(
        podman || info.host.cap_drop == ["ALL"],
        "{:?}",
        info.host.cap_drop
    );
    assert!(
        info.host
            .security_opt
            .iter()
            .any(|o| o.starts_with("no-new-privileges"))
    );
    assert_eq!(info.host.limits.pids, Some(64));

    // The engine's raw inspect JSON reads as the audit's facts, and agrees.
    let json = e.inspect_container_json(&id).await.unwrap().unwrap();
    let facts = devcell::security::audit::ContainerFacts::from_docker_inspect(&json).unwrap();
    assert_eq!(facts.privileged, Some(false));
    assert_eq!(
        facts.capabilities,
        Some(Default::default()),
        "{:?}",
        facts.cap_drop
    );
    assert!(
        e.inspect_container_json("devcell-no-such")
            .await
            .unwrap()
            .is_none()
    );

    // From inside, as the container's own user (exec without a user) and as the remote user.
    for user in [None, applied.remote_user.as_deref()] {
        let (_, uid) = run(&e, &id, user, "id -u").await;
        assert_eq!(uid.trim(), "65534", "user {user:?}");
        let (_, caps) = run(
            &e,
            &id,
            user,
            "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status",
        )
        .await;
        for line in caps.lines() {
            assert!(line.ends_with("0000000000000000"), "{line}");
        }
        let (_, nnp) = run(&e, &id, user, "grep NoNewPrivs /proc/self/status").await;
        assert!(nnp.trim().ends_with('1'), "{nnp}");
    }
    let (code, out) = run(&e, &id, None, "touch /rootfs-write").await;
    assert_ne!(code, 0, "writing to / succeeded: {out}");
    let (code, out) = run(&e, &id, None, "echo x > /usr/x").await;
    assert_ne!(code, 0, "writing to /usr succeeded: {out}");
    for dir in ["/tmp", "/var/tmp", "/nonexistent"] {
        let (code, out) = run(&e, &id, None, &format!("touch {dir}/ok && echo written")).await;
        assert_eq!((code, out.trim()), (0, "written"), "{dir}");
    }
    // Temporary storage is bounded per tmpfs (1 GiB for /tmp and /var/tmp, 64 MiB for /run).
    let (_, df) = run(&e, &id, None, "df -k /tmp /var/tmp /run | tail -3").await;
    let sizes: Vec<&str> = df
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(sizes, ["1048576", "1048576", "65536"], "{df}");
    let (code, _) = run(
        &e,
        &id,
        None,
        "test -e /var/run/docker.sock || test -e /run/docker.sock",
    )
    .await;
    assert_ne!(code, 0, "an engine socket is visible");
    let (_, found) = run(&e, &id, None, &format!("find / -xdev -name '{marker_name}' 2>/dev/null; find / -name '{marker_name}' 2>/dev/null | head -1")).await;
    assert!(found.trim().is_empty(), "host home visible: {found}");
    let (code, _) = run(&e, &id, None, "test -f /workspace/in-workspace").await;
    assert_eq!(code, 0, "the workspace is mounted");

    // The pids limit stops a fork bomb: at most 2000 sleeps are attempted; the shell fails to
    // fork long before (busybox `sh` then exits). Done last: the container is full afterwards
    // and is force-removed below.
    let (code, out) = run(
        &e,
        &id,
        None,
        "i=0; while [ $i -lt 2000 ]; do sleep 600 & i=$((i+1)); done; echo started $i",
    )
    .await;
    assert_ne!(code, 0, "the fork bomb ran to completion: {out}");
    assert!(!out.contains("started 2000"), "{out}");
    assert!(
        out.to_lowercase().contains("fork"),
        "no fork failure reported: {out}"
    );
    // Count what survived with one process (no shell): fewer sleeps than the limit.
    let pidof = ExecRequest {
        argv: vec!["pidof".into(), "sleep".into()],
        ..ExecRequest::default()
    };
    let r = e
        .exec(&id, &pidof, ExecInput::None, ExecOutput::Collect)
        .await
        .unwrap();
    let sleeping = r.stdout_text().split_whitespace().count();
    // With the limit reached, Podman's exec itself may fail to start (non-zero, no output):
    // that is the limit holding too.
    assert!(
        (1..64).contains(&sleeping) || (sleeping == 0 && r.exit_code != 0),
        "{sleeping} sleeps under a limit of 64 (exit {}): {}",
        r.exit_code,
        r.stderr_text()
    );

    e.remove_container(&id, true).await.unwrap();
    assert!(e.inspect_container(&id).await.unwrap().is_none());
}

#[tokio::test]
async fn granted_permissions_are_what_devcell_asks_the_engine_for() {
    let Some(e) = engine("granted_permissions_are_what_devcell_asks_the_engine_for").await else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let mut input = request(ws.path(), "grants");
    input.spec.privileged = true;
    input.spec.cap_add = vec!["SYS_PTRACE".into()];
    input.origins.capabilities.insert(
        "SYS_PTRACE".into(),
        Source::Feature("ghcr.io/x/debug:1".into()),
    );
    // Refused without grants, naming both and the flags.
    let err = apply(&SecurityProfile::default(), &input, &Grants::default()).unwrap_err();
    let SecurityError::Refused { requests, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(requests.len(), 2, "{err}");
    assert!(
        err.to_string().contains("Feature `ghcr.io/x/debug:1`"),
        "{err}"
    );

    // Privileged granted: created (this engine cannot start privileged containers), and the
    // engine records exactly what was granted.
    let grants = Grants::parse(&["privileged", "cap:SYS_PTRACE"]).unwrap();
    let applied = apply(&SecurityProfile::default(), &input, &grants).unwrap();
    let id = e.create_container(&applied.spec).await.unwrap();
    let _guard = ContainerGuard(id.clone());
    let info = e.inspect_container(&id).await.unwrap().unwrap();
    assert!(info.host.privileged);
    if !e.version().await.unwrap().podman {
        assert_eq!(info.host.cap_add, ["SYS_PTRACE"]);
        assert_eq!(info.host.cap_drop, ["ALL"]);
    }
    e.remove_container(&id, true).await.unwrap();

    // A capability alone is started: it is the only one in the bounding set.
    let mut input = request(ws.path(), "grants-cap");
    input.spec.cap_add = vec!["cap_sys_ptrace".into()];
    let applied = apply(
        &SecurityProfile::default(),
        &input,
        &Grants::parse(&["cap:SYS_PTRACE"]).unwrap(),
    )
    .unwrap();
    let id = e.create_container(&applied.spec).await.unwrap();
    let _guard2 = ContainerGuard(id.clone());
    e.start_container(&id).await.unwrap();
    let (_, bnd) = run(&e, &id, None, "grep CapBnd /proc/self/status").await;
    // CAP_SYS_PTRACE is bit 19.
    assert!(bnd.trim().ends_with("0000000000080000"), "{bnd}");
}

#[tokio::test]
async fn reference_profile_runs_the_config_as_written() {
    let Some(e) = engine("reference_profile_runs_the_config_as_written").await else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let mut input = request(ws.path(), "reference");
    input.remote_user = None;
    let applied = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
    assert_eq!(applied.spec, input.spec);
    let id = e.create_container(&applied.spec).await.unwrap();
    let _guard = ContainerGuard(id.clone());
    e.start_container(&id).await.unwrap();
    let (_, uid) = run(&e, &id, None, "id -u").await;
    assert_eq!(uid.trim(), "0");
    let (code, _) = run(&e, &id, None, "touch /rootfs-write").await;
    assert_eq!(code, 0, "reference keeps a writable root filesystem");
}
