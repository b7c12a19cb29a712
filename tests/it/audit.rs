//! `security::audit` and `security::probe` against the real engine: a hardened container scores
//! 16/16; deliberately bad containers each lose the right points with the right evidence; the
//! probe run inside (`docker exec`) agrees with the inspect-based audit on every control.
//!
//! Needs `DEVCELL_TEST_ENGINE=1` (a Docker engine, the `devcell-test/busybox:1` image) and
//! `DEVCELL_TEST_REGISTRY` (the local registry, used to pin the image by digest). Without
//! `DEVCELL_TEST_ENGINE` the tests return early with a note; with it, anything missing fails.
//! Containers carry a unique `devcell.test.audit` label and are removed even when a test fails.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use devcell::cli::commands::audit::render_table;
use devcell::security::audit::{AuditContext, AuditReport, ContainerFacts, Control, Risk, audit};
use devcell::security::probe::{audit_probe, parse_probe_output, probe_command};

use crate::support::context::Cleanup;
use crate::support::docker::engine_opt_in;

const BASE_IMAGE: &str = "devcell-test/busybox:1";
const TEST_LABEL: &str = "devcell.test.audit";

/// Runs `docker <args>`, failing the test with stderr when it fails; returns stdout.
fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .bounded_output()
        .expect("the `docker` CLI runs");
    assert!(
        out.status.success(),
        "docker {:?} failed: {}",
        args.first(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The busybox test image pushed to the local registry and named by digest, once per process.
/// The push also gives the busybox image itself a registry digest, which the audit's
/// reproducibility control counts (`cli_output_engine::build_and_set_up` asks for it so its
/// score does not depend on which test ran first).
pub(crate) fn pinned_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let registry = std::env::var("DEVCELL_TEST_REGISTRY").expect(
            "DEVCELL_TEST_REGISTRY must name the local registry when DEVCELL_TEST_ENGINE=1",
        );
        docker(&["image", "inspect", BASE_IMAGE]);
        let repo = format!("{registry}/devcell-test/audit-busybox");
        let tagged = format!("{repo}:1");
        docker(&["tag", BASE_IMAGE, &tagged]);
        docker(&["push", &tagged]);
        let inspect: serde_json::Value =
            serde_json::from_str(&docker(&["image", "inspect", &tagged])).unwrap();
        inspect[0]["RepoDigests"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d.as_str())
            .find(|d| d.starts_with(&format!("{repo}@sha256:")))
            .expect("the pushed image has a registry digest")
            .to_string()
    })
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

/// Host folders for one case: a workspace, a fake home with credential folders, a fake engine
/// socket. Under `CARGO_TARGET_TMPDIR` so they live on the host's main file system.
struct Host {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
    socket: PathBuf,
}

fn host() -> Host {
    let dir = tempfile::Builder::new()
        .prefix("audit-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let workspace = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("README.md"), "repo\n").unwrap();
    for sub in [".ssh", ".config/google-chrome", ".cache/pip"] {
        std::fs::create_dir_all(home.join(sub)).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "not a real key\n").unwrap();
    let socket = dir.path().join("docker.sock");
    let status = Command::new("python3")
        .args([
            "-c",
            "import socket,sys;s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1])",
        ])
        .arg(&socket)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "python3 could not create a unix socket");
    Host {
        _dir: dir,
        workspace,
        home,
        socket,
    }
}

fn context(h: &Host) -> AuditContext {
    AuditContext {
        workspace: Some(h.workspace.clone()),
        container_workspace: Some("/workspace".into()),
        home: Some(h.home.clone()),
        ..AuditContext::default()
    }
}

/// One audited container.
struct Case {
    _cleanup: Cleanup,
    ctx: AuditContext,
    facts: ContainerFacts,
    inspect: AuditReport,
    inspect_json: String,
    /// With the engine's facts for what cannot be observed inside.
    probe: Option<AuditReport>,
    /// The probe alone.
    probe_alone: Option<AuditReport>,
    probe_output: Option<String>,
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Creates a hardened container plus `extra` flags (started and probed when `start`), and
/// audits it by inspect and, when started, by probe.
fn case(h: &Host, extra: &[&str], start: bool) -> Case {
    case_with(h, extra, start, true, &[])
}

/// [`case`], optionally without the hardening flags and the workspace label, removing
/// `volumes` afterwards.
fn case_with(h: &Host, extra: &[&str], start: bool, hardened: bool, volumes: &[&str]) -> Case {
    let name = format!("devcell-audit-{}", unique());
    let cleanup = Cleanup::default();
    cleanup.container(&name);
    for volume in volumes {
        cleanup.volume(volume);
    }
    let label = format!("{TEST_LABEL}={name}");
    let folder_label = format!("devcontainer.local_folder={}", path(&h.workspace));
    let ws_mount = format!("{}:/workspace", path(&h.workspace));
    let mut args: Vec<&str> = vec![
        if start { "run" } else { "create" },
        "--name",
        &name,
        "--label",
        &label,
    ];
    let hardening = [
        "--label",
        &folder_label,
        "--user",
        "65534:65534",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--pids-limit",
        "256",
        "--memory",
        "512m",
        "--cpus",
        "1",
        "-v",
        &ws_mount,
    ];
    if hardened {
        args.extend(hardening);
        if !extra.contains(&"--network") {
            args.extend(["--network", "none"]);
        }
    }
    if start {
        args.push("-d");
    }
    args.extend(extra);
    args.extend([
        if hardened { pinned_image() } else { BASE_IMAGE },
        "sleep",
        "300",
    ]);
    docker(&args);

    let inspect_json = docker(&["inspect", &name]);
    let value: serde_json::Value = serde_json::from_str(&inspect_json).unwrap();
    let facts = ContainerFacts::from_docker_inspect(&value).unwrap();
    let ctx = context(h);
    let inspect = audit(&facts, &ctx);
    let (probe, probe_alone, probe_output) = if start {
        let argv = probe_command("/workspace");
        let mut exec: Vec<&str> = vec!["exec", &name];
        exec.extend(argv.iter().map(String::as_str));
        let out = docker(&exec);
        let parsed = parse_probe_output(&out).unwrap();
        assert!(parsed.complete, "the probe ran to its end:\n{out}");
        assert!(
            parsed.env_names.iter().any(|n| n == "PATH"),
            "the probe lists environment names:\n{out}"
        );
        assert!(parsed.cap_bnd.is_some() && parsed.uid.is_some() && !parsed.mounts.is_empty());
        (
            Some(audit_probe(&parsed, &ctx, Some(&facts))),
            Some(audit_probe(&parsed, &ctx, None)),
            Some(out),
        )
    } else {
        (None, None, None)
    };
    Case {
        _cleanup: cleanup,
        ctx,
        facts,
        inspect,
        inspect_json,
        probe,
        probe_alone,
        probe_output,
    }
}

fn scores(r: &AuditReport) -> Vec<u8> {
    r.controls.iter().map(|c| c.score).collect()
}

/// The hardened scores with `lost` controls at the given scores.
fn expected(lost: &[(Control, u8)]) -> Vec<u8> {
    Control::ALL
        .iter()
        .map(|c| lost.iter().find(|(l, _)| l == c).map_or(2, |(_, s)| *s))
        .collect()
}

fn has_evidence(r: &AuditReport, control: Control, subject: &str, risk: Risk) -> bool {
    r.control(control)
        .unwrap()
        .evidence
        .iter()
        .any(|e| e.subject.contains(subject) && e.risk == risk)
}

/// The inspect audit of `c` loses `control` alone (score 0, every other control hardened),
/// with critical evidence naming each of `subjects`.
fn assert_loses_only(c: &Case, control: Control, subjects: &[&str]) {
    assert_eq!(
        scores(&c.inspect),
        expected(&[(control, 0)]),
        "{}",
        render_table(&c.inspect)
    );
    for subject in subjects {
        assert!(
            has_evidence(&c.inspect, control, subject, Risk::Critical),
            "{control:?}: {subject}\n{}",
            render_table(&c.inspect)
        );
    }
}

/// Controls the probe alone can judge; reproducibility and teardown need the image reference
/// and labels, which a process inside cannot see (spec-note 0148).
const PROBEABLE: [Control; 6] = [
    Control::RepoScope,
    Control::EngineSocket,
    Control::SecretBoundary,
    Control::NetworkPolicy,
    Control::CachePolicy,
    Control::BrowserIsolation,
];

/// The probe agrees with the inspect-based audit on every control (with the engine's facts
/// for the unobservable ones), and alone on every probeable control.
fn assert_probe_agrees(c: &Case) {
    let probe = c.probe.as_ref().unwrap();
    for control in Control::ALL {
        assert_eq!(
            probe.score_of(control),
            c.inspect.score_of(control),
            "{control:?}: probe and inspect disagree\nINSPECT\n{}\nPROBE\n{}",
            render_table(&c.inspect),
            render_table(probe)
        );
    }
    let alone = c.probe_alone.as_ref().unwrap();
    for control in PROBEABLE {
        assert_eq!(
            alone.score_of(control),
            c.inspect.score_of(control),
            "{control:?}: probe alone and inspect disagree\nINSPECT\n{}\nPROBE\n{}",
            render_table(&c.inspect),
            render_table(alone)
        );
    }
}

#[test]
fn hardened_container_scores_16_by_inspect_and_by_probe() {
    if !engine_opt_in(
        "hardened_container_scores_16_by_inspect_and_by_probe",
        BASE_IMAGE,
    ) {
        return;
    }
    let h = host();
    let c = case(&h, &[], true);
    assert_eq!(c.inspect.score, 16, "{}", render_table(&c.inspect));
    assert!(c.inspect.passes(16));
    assert_probe_agrees(&c);
    assert_eq!(c.probe.as_ref().unwrap().score, 16);
    // The probe alone cannot see the image or labels: those two controls stop at 1.
    let alone = c.probe_alone.as_ref().unwrap();
    assert_eq!(alone.score_of(Control::Reproducibility), 1);
    assert_eq!(alone.score_of(Control::Teardown), 1);
    // The evidence names the workspace mount with its source, target and mode.
    assert!(has_evidence(
        &c.inspect,
        Control::RepoScope,
        &format!("bind {} -> /workspace (rw)", path(&h.workspace)),
        Risk::Safe
    ));
    assert!(c.facts.image.as_deref().unwrap().contains("@sha256:"));
    assert_eq!(c.ctx.container_workspace.as_deref(), Some("/workspace"));
}

#[test]
fn engine_socket_mounted_loses_engine_socket() {
    if !engine_opt_in("engine_socket_mounted_loses_engine_socket", BASE_IMAGE) {
        return;
    }
    let h = host();
    let mount = format!("{}:/var/run/docker.sock", path(&h.socket));
    let c = case(&h, &["-v", &mount], true);
    assert_loses_only(
        &c,
        Control::EngineSocket,
        &[&format!("bind {} -> /var/run/docker.sock", path(&h.socket))],
    );
    assert_probe_agrees(&c);
    assert!(has_evidence(
        c.probe.as_ref().unwrap(),
        Control::EngineSocket,
        "socket /var/run/docker.sock",
        Risk::Critical
    ));
}

#[test]
fn host_home_mounted_loses_repo_scope_secrets_caches_and_browser() {
    if !engine_opt_in(
        "host_home_mounted_loses_repo_scope_secrets_caches_and_browser",
        BASE_IMAGE,
    ) {
        return;
    }
    let h = host();
    let mount = format!("{}:/home/dev", path(&h.home));
    let c = case(&h, &["-v", &mount], true);
    assert_eq!(
        scores(&c.inspect),
        expected(&[
            (Control::RepoScope, 0),
            (Control::SecretBoundary, 0),
            (Control::CachePolicy, 0),
            (Control::BrowserIsolation, 0),
        ]),
        "{}",
        render_table(&c.inspect)
    );
    let subject = format!("bind {} -> /home/dev (rw)", path(&h.home));
    for control in [
        Control::RepoScope,
        Control::SecretBoundary,
        Control::CachePolicy,
        Control::BrowserIsolation,
    ] {
        assert!(
            has_evidence(&c.inspect, control, &subject, Risk::Critical),
            "{control:?}"
        );
    }
    assert_probe_agrees(&c);
}

#[test]
fn privileged_loses_engine_socket() {
    if !engine_opt_in("privileged_loses_engine_socket", BASE_IMAGE) {
        return;
    }
    // Created, not started: this engine may refuse to start privileged containers (it runs
    // without the capabilities to grant them), and the inspect audit needs no running process.
    let h = host();
    let c = case(&h, &["--privileged"], false);
    assert_loses_only(&c, Control::EngineSocket, &["privileged", "SYS_ADMIN"]);
}

#[test]
fn sys_admin_loses_engine_socket() {
    if !engine_opt_in("sys_admin_loses_engine_socket", BASE_IMAGE) {
        return;
    }
    let h = host();
    let c = case(&h, &["--cap-add", "SYS_ADMIN"], true);
    assert_loses_only(&c, Control::EngineSocket, &["capabilities SYS_ADMIN"]);
    assert_probe_agrees(&c);
    assert!(has_evidence(
        c.probe.as_ref().unwrap(),
        Control::EngineSocket,
        "capabilities SYS_ADMIN",
        Risk::Critical
    ));
}

#[test]
fn host_pid_namespace_loses_engine_socket() {
    if !engine_opt_in("host_pid_namespace_loses_engine_socket", BASE_IMAGE) {
        return;
    }
    let h = host();
    let c = case(&h, &["--pid", "host"], true);
    assert_loses_only(&c, Control::EngineSocket, &["pid namespace host"]);
    assert_probe_agrees(&c);
}

#[test]
fn secret_env_loses_secret_boundary_and_its_value_never_appears() {
    if !engine_opt_in(
        "secret_env_loses_secret_boundary_and_its_value_never_appears",
        BASE_IMAGE,
    ) {
        return;
    }
    let h = host();
    let secret = format!("ghp_{}", unique().replace('-', "x"));
    let weak = format!("pw{}", unique());
    let token_env = format!("GITHUB_TOKEN={secret}");
    let weak_env = format!("DB_PASSWORD={weak}");
    let c = case(&h, &["-e", &token_env, "-e", &weak_env], true);
    assert!(
        c.inspect_json.contains(&secret),
        "the engine itself shows the value: that is the leak the audit reports"
    );
    assert_loses_only(&c, Control::SecretBoundary, &["env GITHUB_TOKEN"]);
    assert!(has_evidence(
        &c.inspect,
        Control::SecretBoundary,
        "env DB_PASSWORD",
        Risk::Weak
    ));
    assert_probe_agrees(&c);
    let probe = c.probe.as_ref().unwrap();
    for text in [
        serde_json::to_string(&c.inspect).unwrap(),
        render_table(&c.inspect),
        serde_json::to_string(probe).unwrap(),
        render_table(probe),
        serde_json::to_string(&c.facts).unwrap(),
        c.probe_output.clone().unwrap(),
    ] {
        assert!(!text.contains(&secret), "the token value leaked");
        assert!(!text.contains(&weak), "the password value leaked");
    }
}

#[test]
fn bridge_network_loses_network_policy() {
    if !engine_opt_in("bridge_network_loses_network_policy", BASE_IMAGE) {
        return;
    }
    let h = host();
    let c = case(&h, &["--network", "bridge"], true);
    assert_loses_only(&c, Control::NetworkPolicy, &["network bridge"]);
    assert_probe_agrees(&c);
}

#[test]
fn plain_docker_run_container_loses_points_for_defaults() {
    if !engine_opt_in(
        "plain_docker_run_container_loses_points_for_defaults",
        BASE_IMAGE,
    ) {
        return;
    }
    // `docker run -d IMAGE`: root, default capabilities, no limits, writable root, default
    // bridge network, image by tag only, no workspace label.
    let h = host();
    let c = case_with(&h, &[], true, false, &[]);
    assert_eq!(
        scores(&c.inspect),
        expected(&[
            (Control::EngineSocket, 1),
            (Control::NetworkPolicy, 0),
            (Control::Reproducibility, 0),
            (Control::Teardown, 1),
        ]),
        "{}",
        render_table(&c.inspect)
    );
    for subject in [
        "capabilities AUDIT_WRITE,CHOWN",
        "user root",
        "no-new-privileges",
        "pids limit",
        "memory limit",
        "cpu limit",
    ] {
        assert!(
            has_evidence(&c.inspect, Control::EngineSocket, subject, Risk::Weak),
            "{subject}\n{}",
            render_table(&c.inspect)
        );
    }
    assert!(has_evidence(
        &c.inspect,
        Control::Reproducibility,
        "image devcell-test/busybox:1",
        Risk::Critical
    ));
    assert!(has_evidence(
        &c.inspect,
        Control::Reproducibility,
        "root file system",
        Risk::Weak
    ));
    assert_probe_agrees(&c);
}

#[test]
fn shared_named_cache_volume_loses_cache_and_teardown_points() {
    if !engine_opt_in(
        "shared_named_cache_volume_loses_cache_and_teardown_points",
        BASE_IMAGE,
    ) {
        return;
    }
    let h = host();
    let volume = format!("audit-npm-cache-{}", unique());
    let mount = format!("{volume}:/home/dev/.npm");
    let c = case_with(&h, &["-v", &mount], true, true, &[volume.as_str()]);
    assert_eq!(
        scores(&c.inspect),
        expected(&[(Control::CachePolicy, 1), (Control::Teardown, 1)]),
        "{}",
        render_table(&c.inspect)
    );
    let subject = format!("volume {volume} -> /home/dev/.npm (rw)");
    assert!(has_evidence(
        &c.inspect,
        Control::CachePolicy,
        &subject,
        Risk::Weak
    ));
    assert!(has_evidence(
        &c.inspect,
        Control::Teardown,
        &subject,
        Risk::Weak
    ));
    assert_probe_agrees(&c);
    // The probe reads the volume's name from its storage path.
    assert!(has_evidence(
        c.probe_alone.as_ref().unwrap(),
        Control::CachePolicy,
        &subject,
        Risk::Weak
    ));
}

#[test]
fn probe_script_is_valid_posix_sh_for_dash_and_busybox() {
    // Syntax only (`-n`): nothing runs on the host.
    // busybox comes with the test machine (scripts/test); a developer may not have it.
    let busybox = std::env::var("DEVCELL_TEST_ENGINE").as_deref() == Ok("1")
        || Command::new("busybox").arg("true").output().is_ok();
    let shells: &[&[&str]] = if busybox {
        &[&["sh", "-n", "-c"], &["busybox", "sh", "-n", "-c"]]
    } else {
        &[&["sh", "-n", "-c"]]
    };
    for shell in shells {
        let out = Command::new(shell[0])
            .args(&shell[1..])
            .arg(devcell::security::probe::PROBE_SCRIPT)
            .output()
            .unwrap_or_else(|e| panic!("`{}` runs: {e}", shell[0]));
        assert!(
            out.status.success(),
            "{shell:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn host_ipc_and_uts_namespaces_cost_one_engine_socket_point() {
    if !engine_opt_in(
        "host_ipc_and_uts_namespaces_cost_one_engine_socket_point",
        BASE_IMAGE,
    ) {
        return;
    }
    let h = host();
    let c = case(&h, &["--ipc", "host", "--uts", "host"], true);
    assert_eq!(
        scores(&c.inspect),
        expected(&[(Control::EngineSocket, 1)]),
        "{}",
        render_table(&c.inspect)
    );
    for subject in ["ipc namespace host", "uts namespace host"] {
        assert!(has_evidence(
            &c.inspect,
            Control::EngineSocket,
            subject,
            Risk::Weak
        ));
    }
    // Not observable from inside: the probe takes these modes from the engine's facts.
    let probe = c.probe.as_ref().unwrap();
    for control in Control::ALL {
        assert_eq!(
            probe.score_of(control),
            c.inspect.score_of(control),
            "{control:?}"
        );
    }
    assert_eq!(
        c.probe_alone
            .as_ref()
            .unwrap()
            .score_of(Control::EngineSocket),
        2,
        "documented gap (spec-note 0148): the probe alone cannot see IPC/UTS sharing"
    );
}

#[test]
fn socket_inside_a_mounted_folder_is_found_only_by_the_probe() {
    if !engine_opt_in(
        "socket_inside_a_mounted_folder_is_found_only_by_the_probe",
        BASE_IMAGE,
    ) {
        return;
    }
    // The engine only knows a folder is mounted; a process inside finds the socket in it.
    let h = host();
    let folder = h.socket.parent().unwrap().join("sockets");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::rename(&h.socket, folder.join("docker.sock")).unwrap();
    let mount = format!("{}:/srv/sockets:ro", path(&folder));
    let c = case(&h, &["-v", &mount], true);
    assert_eq!(
        c.inspect.score_of(Control::EngineSocket),
        2,
        "{}",
        render_table(&c.inspect)
    );
    assert_eq!(c.inspect.score_of(Control::RepoScope), 1);
    for probe in [c.probe.as_ref().unwrap(), c.probe_alone.as_ref().unwrap()] {
        assert_eq!(
            probe.score_of(Control::EngineSocket),
            0,
            "{}",
            render_table(probe)
        );
        assert!(has_evidence(
            probe,
            Control::EngineSocket,
            "socket /srv/sockets/docker.sock",
            Risk::Critical
        ));
        assert_eq!(probe.score_of(Control::RepoScope), 1);
    }
}
