//! The product's engine reads run against an in-memory engine
//! ([`crate::engine::fake::FakeEngine`]): the isolation audit scores what any backend answers
//! through the typed [`crate::engine::Engine`] facts, never a backend's own document.

use crate::engine::fake::FakeEngine;
use crate::engine::{ContainerSpec, Engine, Mount, MountKind};
use crate::handoff::audit::{AuditOptions, Control, Risk, audit_with};

/// A fake engine holding the image `fake/base:1`.
fn engine() -> FakeEngine {
    let engine = FakeEngine::new();
    engine.add_image("fake/base:1", "fake-image-1", &[]);
    engine
}

/// The audit of the fake container `id`, from the engine's facts (no probe).
async fn audit(engine: &FakeEngine, id: &str) -> crate::handoff::audit::AuditReport {
    let opts = AuditOptions {
        container: Some(id.to_string()),
        ..AuditOptions::default()
    };
    audit_with(engine, &opts)
        .await
        .expect("the fake container is audited")
}

/// The evidence of `control` in `report` as `(subject, risk)` pairs.
fn evidence(report: &crate::handoff::audit::AuditReport, control: Control) -> Vec<(String, Risk)> {
    report
        .control(control)
        .expect("every control is scored")
        .evidence
        .iter()
        .map(|e| (e.subject.clone(), e.risk))
        .collect()
}

/// A privileged container costs the engine-socket control all its points, read from the
/// engine's typed facts; the same container unprivileged is credited for it.
#[tokio::test]
async fn the_audit_reads_a_privileged_flag_from_the_fake_engines_facts() {
    let engine = engine();
    let spec = |privileged| ContainerSpec {
        image: "fake/base:1".to_string(),
        name: Some(format!("fake-privileged-{privileged}")),
        privileged,
        ..ContainerSpec::default()
    };
    let privileged = engine.add_container(&spec(true), false);
    let plain = engine.add_container(&spec(false), false);

    let report = audit(&engine, &privileged).await;
    assert_eq!(report.container.as_deref(), Some("fake-privileged-true"));
    let socket = evidence(&report, Control::EngineSocket);
    assert!(
        socket.contains(&("privileged".to_string(), Risk::Critical)),
        "{socket:?}"
    );
    assert_eq!(report.control(Control::EngineSocket).unwrap().score, 0);

    let socket = evidence(&audit(&engine, &plain).await, Control::EngineSocket);
    assert!(
        socket.contains(&("privileged".to_string(), Risk::Safe)),
        "{socket:?}"
    );
    // the audit only read: nothing was created, started or run
    let calls = engine.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls.iter().all(|c| c.starts_with("create ")), "{calls:?}");
}

/// A bind of the engine's socket is critical evidence, read from the fake engine's mounts;
/// a container without it is credited with no engine socket.
#[tokio::test]
async fn the_audit_finds_an_engine_socket_mount_in_the_fake_engines_facts() {
    let engine = engine();
    let spec = |mounts| ContainerSpec {
        image: "fake/base:1".to_string(),
        mounts,
        ..ContainerSpec::default()
    };
    let socket_mount = Mount {
        kind: MountKind::Bind,
        source: Some("/var/run/docker.sock".to_string()),
        target: "/var/run/docker.sock".to_string(),
        read_only: false,
    };
    let with_socket = engine.add_container(&spec(vec![socket_mount]), true);
    let without = engine.add_container(&spec(Vec::new()), true);

    let report = audit(&engine, &with_socket).await;
    let control = report.control(Control::EngineSocket).unwrap();
    assert_eq!(control.score, 0, "{control:?}");
    assert!(
        control
            .evidence
            .iter()
            .any(|e| e.risk == Risk::Critical && e.subject.contains("docker.sock")),
        "{control:?}"
    );

    let socket = evidence(&audit(&engine, &without).await, Control::EngineSocket);
    assert!(
        socket.contains(&("engine sockets".to_string(), Risk::Safe)),
        "{socket:?}"
    );
    // and the engine's own facts say no GPU: `gpu_available` reads them, not a document
    assert!(!engine.gpu_available().await.unwrap());
}
