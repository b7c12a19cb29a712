//! Unit tests of the audit: facts read from `docker inspect` JSON, scored end to end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

use super::heuristics::looks_like_token;
use super::*;

/// A hardened container as `docker inspect` prints it.
fn hardened() -> Value {
    json!([{
        "Id": "abc123",
        "Name": "/hardened",
        "Image": "sha256:feed",
        "AppArmorProfile": "",
        "HostConfig": {
            "NetworkMode": "none",
            "PortBindings": {},
            "CapAdd": null,
            "CapDrop": ["ALL"],
            "IpcMode": "private",
            "PidMode": "",
            "UTSMode": "",
            "Privileged": false,
            "PublishAllPorts": false,
            "ReadonlyRootfs": true,
            "SecurityOpt": ["no-new-privileges"],
            "Tmpfs": {"/tmp": ""},
            "Memory": 536870912,
            "NanoCpus": 1000000000,
            "PidsLimit": 256,
            "Devices": [],
            "DeviceRequests": null,
            "AutoRemove": false
        },
        "Mounts": [{
            "Type": "bind", "Source": "/home/me/work/repo", "Destination": "/workspace",
            "Mode": "", "RW": true, "Propagation": "rprivate"
        }],
        "Config": {
            "User": "65534:65534",
            "Env": ["PATH=/usr/bin:/bin"],
            "Image": "registry.example/img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "Labels": {"devcontainer.local_folder": "/home/me/work/repo"}
        },
        "NetworkSettings": {"Networks": {"none": {}}}
    }])
}

fn ctx() -> AuditContext {
    AuditContext {
        workspace: Some("/home/me/work/repo".into()),
        container_workspace: Some("/workspace".into()),
        home: Some("/home/me".into()),
        xdg_runtime_dir: Some("/run/user/1000".into()),
        features_lockfile: Some(true),
        locked_features: Some(BTreeMap::from([(
            "ghcr.io/devcontainers/features/node:1".to_string(),
            format!("sha256:{}", "a".repeat(64)),
        )])),
        internal_networks: Vec::new(),
        git_dirs: Vec::new(),
        egress: None,
    }
}

fn with(f: impl FnOnce(&mut Value)) -> AuditReport {
    let mut v = hardened();
    f(&mut v[0]);
    audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &ctx())
}

fn add_mount(v: &mut Value, ty: &str, src: &str, dst: &str, rw: bool) {
    let key = if ty == "volume" { "Name" } else { "Source" };
    v["Mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"Type": ty, key: src, "Destination": dst, "RW": rw}));
}

fn scores(r: &AuditReport) -> Vec<u8> {
    r.controls.iter().map(|c| c.score).collect()
}

fn has_detail(r: &AuditReport, c: Control, detail: &str, risk: Risk) -> bool {
    r.control(c)
        .unwrap()
        .evidence
        .iter()
        .any(|e| e.detail.contains(detail) && e.risk == risk)
}

fn has(r: &AuditReport, c: Control, subject: &str, risk: Risk) -> bool {
    r.control(c)
        .unwrap()
        .evidence
        .iter()
        .any(|e| e.subject.contains(subject) && e.risk == risk)
}

#[test]
fn hardened_container_scores_sixteen() {
    let r = with(|_| {});
    assert_eq!(scores(&r), vec![2; 8], "{r:#?}");
    assert_eq!(r.score, 16);
    assert!(r.passes(16));
    assert!(!with(|v| v["HostConfig"]["Privileged"] = json!(true)).passes(16));
    assert!(r.controls.iter().all(|c| !c.evidence.is_empty()));
}

#[test]
fn inspect_input_must_be_one_container() {
    assert!(matches!(
        ContainerFacts::from_docker_inspect(&json!([])),
        Err(AuditError::NotAContainer { .. })
    ));
    assert!(ContainerFacts::from_docker_inspect(&json!("x")).is_err());
    assert!(ContainerFacts::from_docker_inspect(&json!({"a": 1})).is_err());
    // A bare object is accepted.
    assert!(ContainerFacts::from_docker_inspect(&hardened()[0]).is_ok());
}

#[test]
fn engine_sockets_are_critical_by_source_target_and_parent() {
    for (src, dst) in [
        ("/var/run/docker.sock", "/var/run/docker.sock"),
        ("/tmp/x/docker.sock", "/run/d"),
        ("/tmp/x/fake", "/var/run/docker.sock"),
        ("/run/podman/podman.sock", "/p"),
        ("/run/user/1000/podman/podman.sock", "/p"),
        ("/run/containerd/containerd.sock", "/c"),
        ("/var/run", "/host-run"),
        ("/run/user/1000", "/xdg"),
    ] {
        let r = with(|v| add_mount(v, "bind", src, dst, true));
        assert_eq!(r.score_of(Control::EngineSocket), 0, "{src} -> {dst}");
        assert!(has(&r, Control::EngineSocket, src, Risk::Critical));
    }
}

/// CRI-O's socket and its folder are engine sockets for the audit as for the policy (one list,
/// `security::known`); `/etc` is neither an engine socket nor host control (spec-note 0142).
#[test]
fn cri_o_sockets_are_engine_sockets_and_etc_is_not() {
    for src in ["/run/crio/crio.sock", "/run/crio", "/srv/x/crio.sock"] {
        let r = with(|v| add_mount(v, "bind", src, "/c", true));
        assert_eq!(r.score_of(Control::EngineSocket), 0, "{src}");
        assert!(has(&r, Control::EngineSocket, src, Risk::Critical), "{src}");
    }
    let r = with(|v| add_mount(v, "bind", "/etc", "/hostetc", true));
    assert!(
        !has(&r, Control::EngineSocket, "/etc", Risk::Critical),
        "{r:#?}"
    );
    assert!(
        !has(&r, Control::EngineSocket, "/etc", Risk::Weak),
        "{r:#?}"
    );
}

#[test]
fn host_home_and_parents_are_critical_for_repo_secret_cache_browser() {
    for src in ["/home/me", "/home/me/work", "/", "/home", "/root"] {
        let r = with(|v| add_mount(v, "bind", src, "/h", false));
        assert_eq!(r.score_of(Control::RepoScope), 0, "{src}");
        assert!(has(&r, Control::RepoScope, src, Risk::Critical));
        if src != "/home/me/work" {
            assert_eq!(r.score_of(Control::SecretBoundary), 0, "{src}");
            assert_eq!(r.score_of(Control::BrowserIsolation), 0, "{src}");
            // Read-only: readable but not poisonable caches.
            assert_eq!(r.score_of(Control::CachePolicy), 1, "{src}");
        }
    }
    let r = with(|v| add_mount(v, "bind", "/home/me/work", "/w", true));
    assert!(
        r.control(Control::RepoScope).unwrap().evidence[0]
            .detail
            .contains("parent folder of the workspace")
    );
}

#[test]
fn extra_paths_are_weak_and_subfolders_of_the_workspace_safe() {
    let r = with(|v| add_mount(v, "bind", "/home/me/notes", "/notes", true));
    assert_eq!(r.score_of(Control::RepoScope), 1);
    assert!(has(&r, Control::RepoScope, "/home/me/notes", Risk::Weak));
    let r = with(|v| add_mount(v, "bind", "/home/me/work/repo/sub", "/sub", true));
    assert_eq!(r.score_of(Control::RepoScope), 2);
    // `/etc` is host files (a broad host folder), not the kernel's or the engine's state:
    // scored under repo scope only, read-only or not
    for read_only in [false, true] {
        let r = with(|v| add_mount(v, "bind", "/etc", "/hostetc", read_only));
        assert_eq!(r.score_of(Control::RepoScope), 0, "{read_only}");
        assert!(has(&r, Control::RepoScope, "/etc", Risk::Critical));
        assert_eq!(r.score_of(Control::EngineSocket), 2, "{read_only}");
    }
    let r = with(|v| add_mount(v, "bind", "/etc/localtime", "/etc/localtime", false));
    assert_eq!(r.score_of(Control::EngineSocket), 2);
    assert_eq!(r.score_of(Control::RepoScope), 1);
    let r = with(|v| add_mount(v, "bind", "/var/lib/docker/volumes", "/v", true));
    assert_eq!(r.score_of(Control::EngineSocket), 0);
}

#[test]
fn git_dirs_of_the_workspace_are_not_extra_paths() {
    let mount = |v: &mut Value| {
        add_mount(
            v,
            "bind",
            "/home/me/src/api/.git",
            "/home/me/src/api/.git",
            true,
        );
        add_mount(
            v,
            "bind",
            "/home/me/src/api/.git/config",
            "/home/me/src/api/.git/config",
            false,
        );
    };
    let mut v = hardened();
    mount(&mut v[0]);
    let facts = ContainerFacts::from_docker_inspect(&v).unwrap();
    assert_eq!(audit(&facts, &ctx()).score_of(Control::RepoScope), 1);
    let mut known = ctx();
    known.git_dirs = vec!["/home/me/src/api/.git".into()];
    let r = audit(&facts, &known);
    assert_eq!(r.score_of(Control::RepoScope), 2);
    assert_eq!(r.score, MAX_SCORE);
    assert!(has(
        &r,
        Control::RepoScope,
        "/home/me/src/api/.git",
        Risk::Safe
    ));
    // a git dir does not excuse its parent
    let mut v = hardened();
    add_mount(&mut v[0], "bind", "/home/me/src/api", "/api", true);
    let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &known);
    assert_eq!(r.score_of(Control::RepoScope), 1);
}

#[test]
fn credential_folders_are_critical_and_credential_files_weak() {
    for rel in super::heuristics::CREDENTIAL_DIRS {
        let src = format!("/home/me/{rel}");
        let r = with(|v| add_mount(v, "bind", &src, "/c", false));
        assert_eq!(r.score_of(Control::SecretBoundary), 0, "{rel}");
        assert!(has(&r, Control::SecretBoundary, &src, Risk::Critical));
        assert_eq!(r.score_of(Control::RepoScope), 1, "{rel}");
    }
    let r = with(|v| add_mount(v, "bind", "/home/me/.codex/auth.json", "/a", false));
    assert_eq!(r.score_of(Control::SecretBoundary), 1);
    let r = with(|v| add_mount(v, "bind", "/tmp/ssh-XYZ/agent.123", "/ssh", false));
    assert_eq!(r.score_of(Control::SecretBoundary), 0);
}

#[test]
fn privileged_caps_and_namespaces() {
    let r = with(|v| v["HostConfig"]["Privileged"] = json!(true));
    assert_eq!(r.score_of(Control::EngineSocket), 0);
    assert!(has(&r, Control::EngineSocket, "privileged", Risk::Critical));
    assert_eq!(r.score, 14);

    let r = with(|v| v["HostConfig"]["CapAdd"] = json!(["SYS_ADMIN"]));
    assert!(has(&r, Control::EngineSocket, "SYS_ADMIN", Risk::Critical));
    assert_eq!(r.score, 14);
    let r = with(|v| v["HostConfig"]["CapAdd"] = json!(["CAP_NET_ADMIN"]));
    assert_eq!(r.score_of(Control::EngineSocket), 1);
    let r = with(|v| v["HostConfig"]["CapDrop"] = json!(null));
    assert!(has(&r, Control::EngineSocket, "CHOWN", Risk::Weak));

    let r = with(|v| v["HostConfig"]["PidMode"] = json!("host"));
    assert!(has(
        &r,
        Control::EngineSocket,
        "pid namespace host",
        Risk::Critical
    ));
    assert_eq!(r.score, 14);
    for key in ["IpcMode", "UTSMode"] {
        let r = with(|v| v["HostConfig"][key] = json!("host"));
        assert_eq!(r.score_of(Control::EngineSocket), 1, "{key}");
    }
}

#[test]
fn hardening_options_each_cost_a_point() {
    type Case = (&'static str, Box<dyn Fn(&mut Value)>);
    let cases: Vec<Case> = vec![
        (
            "no-new-privileges",
            Box::new(|v| v["HostConfig"]["SecurityOpt"] = json!([])),
        ),
        (
            "seccomp",
            Box::new(|v| {
                v["HostConfig"]["SecurityOpt"] = json!(["no-new-privileges", "seccomp=unconfined"])
            }),
        ),
        (
            "apparmor",
            Box::new(|v| {
                v["HostConfig"]["SecurityOpt"] =
                    json!(["no-new-privileges:true", "apparmor=unconfined"])
            }),
        ),
        ("user", Box::new(|v| v["Config"]["User"] = json!(""))),
        (
            "pids limit",
            Box::new(|v| v["HostConfig"]["PidsLimit"] = json!(-1)),
        ),
        (
            "memory limit",
            Box::new(|v| v["HostConfig"]["Memory"] = json!(0)),
        ),
        (
            "cpu limit",
            Box::new(|v| v["HostConfig"]["NanoCpus"] = json!(0)),
        ),
        (
            "device /dev/snd",
            Box::new(|v| {
                v["HostConfig"]["Devices"] =
                    json!([{"PathOnHost": "/dev/snd", "PathInContainer": "/dev/snd"}])
            }),
        ),
    ];
    for (subject, f) in cases {
        let r = with(|v| f(v));
        assert_eq!(r.score_of(Control::EngineSocket), 1, "{subject}");
        assert!(
            has(&r, Control::EngineSocket, subject, Risk::Weak),
            "{subject}"
        );
        assert_eq!(r.score, 15, "{subject}");
    }
    let r = with(|v| {
        v["HostConfig"]["Devices"] =
            json!([{"PathOnHost": "/dev/sda", "PathInContainer": "/dev/sda"}])
    });
    assert_eq!(r.score_of(Control::EngineSocket), 0);
    let r = with(|v| v["HostConfig"]["ReadonlyRootfs"] = json!(false));
    assert_eq!(r.score_of(Control::Reproducibility), 1);
    assert!(has(
        &r,
        Control::Reproducibility,
        "root file system",
        Risk::Weak
    ));
}

#[test]
fn secret_env_names_and_values_never_leak() {
    let value = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let r = with(|v| {
        v["Config"]["Env"] = json!([
            format!("GITHUB_TOKEN={value}"),
            "DB_PASSWORD=hunter2hunter2",
            "GIT_AUTHOR_NAME=me",
            "PWD=/x",
            "GPG_KEY=ABCDEF"
        ])
    });
    assert_eq!(r.score_of(Control::SecretBoundary), 0);
    assert!(has(
        &r,
        Control::SecretBoundary,
        "env GITHUB_TOKEN",
        Risk::Critical
    ));
    assert!(has(
        &r,
        Control::SecretBoundary,
        "env DB_PASSWORD",
        Risk::Weak
    ));
    assert!(!has(
        &r,
        Control::SecretBoundary,
        "GIT_AUTHOR_NAME",
        Risk::Weak
    ));
    assert!(!has(&r, Control::SecretBoundary, "PWD", Risk::Weak));
    assert!(!has(&r, Control::SecretBoundary, "GPG_KEY", Risk::Weak));
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains(value) && !json.contains("hunter2"));
    let r = with(|v| v["Config"]["Env"] = json!(["NPM_TOKEN=short"]));
    assert_eq!(r.score_of(Control::SecretBoundary), 1);
}

#[test]
fn credential_names() {
    for n in [
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "DB_PASSWD",
        "NPM_AUTH",
        "BASICAUTH",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SSH_AUTH_SOCK",
        "GH_PAT",
    ] {
        assert!(is_credential_name(n), "{n}");
    }
    for n in [
        "PATH",
        "HOME",
        "GIT_AUTHOR_EMAIL",
        "PWD",
        "GPG_KEY",
        "LANG",
        "AUTHOR",
    ] {
        assert!(!is_credential_name(n), "{n}");
    }
    assert!(looks_like_token("AKIAABCDEFGHIJKLMNOP"));
    assert!(!looks_like_token("sk-short"));
    assert!(!looks_like_token("/usr/bin"));
}

#[test]
fn network_modes_and_ports() {
    let r = with(|v| {
        v["HostConfig"]["NetworkMode"] = json!("bridge");
        v["NetworkSettings"]["Networks"] = json!({"bridge": {}});
    });
    assert_eq!(r.score_of(Control::NetworkPolicy), 0);
    assert!(has(
        &r,
        Control::NetworkPolicy,
        "network bridge",
        Risk::Critical
    ));
    let r = with(|v| {
        v["HostConfig"]["NetworkMode"] = json!("default");
        v["NetworkSettings"]["Networks"] = json!({"bridge": {}});
        v["Config"]["Env"] = json!(["HTTPS_PROXY=http://proxy:3128"]);
    });
    assert_eq!(r.score_of(Control::NetworkPolicy), 1);
    let r = with(|v| v["HostConfig"]["NetworkMode"] = json!("host"));
    assert_eq!(r.score_of(Control::NetworkPolicy), 0);
    assert_eq!(r.score_of(Control::EngineSocket), 1);
    let mut c = ctx();
    c.internal_networks = vec!["sealed".into()];
    let mut v = hardened();
    v[0]["HostConfig"]["NetworkMode"] = json!("sealed");
    v[0]["NetworkSettings"]["Networks"] = json!({"sealed": {}});
    v[0]["HostConfig"]["PortBindings"] = json!({"80/tcp": [{"HostIp": "", "HostPort": "8080"}], "81/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8081"}]});
    let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
    assert_eq!(r.score_of(Control::NetworkPolicy), 1);
    assert!(has(
        &r,
        Control::NetworkPolicy,
        "port 0.0.0.0:8080",
        Risk::Weak
    ));
    assert!(has(
        &r,
        Control::NetworkPolicy,
        "port 127.0.0.1:8081",
        Risk::Safe
    ));
}

#[test]
fn caches_and_browser_profiles() {
    let r = with(|v| add_mount(v, "bind", "/home/me/.cache/pip", "/root/.cache/pip", true));
    assert_eq!(r.score_of(Control::CachePolicy), 0);
    let r = with(|v| add_mount(v, "bind", "/home/me/.npm", "/n", false));
    assert_eq!(r.score_of(Control::CachePolicy), 1);
    let r = with(|v| add_mount(v, "volume", "npm-cache", "/home/node/.npm", true));
    assert_eq!(r.score_of(Control::CachePolicy), 1);
    assert_eq!(r.score_of(Control::Teardown), 1);
    let r = with(|v| add_mount(v, "volume", "devcell-abc-npm", "/home/node/.npm", true));
    assert_eq!(r.score_of(Control::CachePolicy), 2);
    assert_eq!(r.score_of(Control::Teardown), 2);

    let r = with(|v| add_mount(v, "bind", "/home/me/.config/google-chrome", "/p", false));
    assert_eq!(r.score_of(Control::BrowserIsolation), 0);
    let r = with(|v| add_mount(v, "bind", "/home/me/.mozilla/firefox", "/p", false));
    assert_eq!(r.score_of(Control::BrowserIsolation), 0);
    let r = with(|v| add_mount(v, "bind", "/tmp/.X11-unix", "/tmp/.X11-unix", false));
    assert_eq!(r.score_of(Control::BrowserIsolation), 0);
    let r = with(|v| add_mount(v, "volume", "profile", "/home/a/.config/chromium", true));
    assert_eq!(r.score_of(Control::BrowserIsolation), 1);
}

#[test]
fn reproducibility_rules() {
    let tag = |v: &mut Value| v["Config"]["Image"] = json!("busybox:latest");
    assert_eq!(with(tag).score_of(Control::Reproducibility), 0);
    let mut v = hardened();
    tag(&mut v[0]);
    let f = ContainerFacts::from_docker_inspect(&v)
        .unwrap()
        .with_image_inspect(&json!([{"RepoDigests": ["busybox@sha256:aa"]}]));
    assert_eq!(audit(&f, &ctx()).score_of(Control::Reproducibility), 1);
    let meta = r#"[{"id":"ghcr.io/devcontainers/features/node:1"},{"remoteUser":"node"}]"#;
    // A lockfile exists, but the container records no digests: not "locked".
    let r = with(|v| v["Config"]["Labels"][names::METADATA_LABEL] = json!(meta));
    assert_eq!(r.score_of(Control::Reproducibility), 1);
    assert!(has_detail(
        &r,
        Control::Reproducibility,
        "cannot be checked",
        Risk::Weak
    ));
    // Installed at the locked digest: locked.
    let digests = |d: char| {
        json!(format!(
            r#"{{"ghcr.io/devcontainers/features/node:1":"sha256:{}"}}"#,
            d.to_string().repeat(64)
        ))
    };
    let r = with(|v| {
        v["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
        v["Config"]["Labels"][FEATURE_DIGESTS_LABEL] = digests('a');
    });
    assert_eq!(r.score_of(Control::Reproducibility), 2);
    assert!(has_detail(
        &r,
        Control::Reproducibility,
        "digest(s) match",
        Risk::Safe
    ));
    // Installed at another digest: not locked, and both digests are named.
    let r = with(|v| {
        v["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
        v["Config"]["Labels"][FEATURE_DIGESTS_LABEL] = digests('b');
    });
    assert_eq!(r.score_of(Control::Reproducibility), 1);
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        text.contains(&"a".repeat(64)) && text.contains(&"b".repeat(64)),
        "{text}"
    );
    // A Feature the lockfile does not hold.
    let mut c = ctx();
    c.locked_features = Some(BTreeMap::new());
    let mut v = hardened();
    v[0]["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
    v[0]["Config"]["Labels"][FEATURE_DIGESTS_LABEL] = digests('a');
    let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
    assert_eq!(r.score_of(Control::Reproducibility), 1);
    assert!(has_detail(
        &r,
        Control::Reproducibility,
        "not in devcontainer-lock.json",
        Risk::Weak
    ));
    let mut c = ctx();
    c.features_lockfile = Some(false);
    let mut v = hardened();
    v[0]["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
    let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
    assert_eq!(r.score_of(Control::Reproducibility), 1);
    assert!(has(&r, Control::Reproducibility, "node:1", Risk::Weak));
    // local Features are part of the configuration: nothing to lock
    let mut v = hardened();
    v[0]["Config"]["Labels"][names::METADATA_LABEL] = json!(r#"[{"id":"./probe"},{}]"#);
    let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
    assert_eq!(r.score_of(Control::Reproducibility), 2);
    assert!(has(&r, Control::Reproducibility, "./probe", Risk::Safe));
}

#[test]
fn reproducibility_checks_a_recorded_base_against_the_layers() {
    let base = format!("registry.example/base@sha256:{}", "b".repeat(64));
    let built = |v: &mut Value| {
        v["Config"]["Image"] = json!("devcell/features:123");
        v["Config"]["Labels"][names::METADATA_LABEL] = json!(r#"[{"id":"./probe"},{}]"#);
        v["Config"]["Labels"][BASE_IMAGE_LABEL] = json!(base.as_str());
    };
    let facts = || {
        let mut v = hardened();
        built(&mut v[0]);
        ContainerFacts::from_docker_inspect(&v)
            .unwrap()
            .with_image_inspect(
                &json!([{"RootFS": {"Layers": ["sha256:l1", "sha256:l2", "sha256:f1"]}}]),
            )
    };
    assert_eq!(facts().pinned_base_label(), Some(base.as_str()));
    // verified: the base's layers are the image's first
    let ok = facts()
        .with_base_image_inspect(&json!([{"RootFS": {"Layers": ["sha256:l1", "sha256:l2"]}}]));
    let r = audit(&ok, &ctx());
    assert_eq!(r.score_of(Control::Reproducibility), 2, "{r:#?}");
    assert!(has(
        &r,
        Control::Reproducibility,
        "features:123",
        Risk::Safe
    ));
    // a false claim
    let lie = facts().with_base_image_inspect(&json!([{"RootFS": {"Layers": ["sha256:zz"]}}]));
    let r = audit(&lie, &ctx());
    assert_eq!(r.score_of(Control::Reproducibility), 0);
    // the base is not on this engine: cannot be checked
    let r = audit(&facts(), &ctx());
    assert_eq!(r.score_of(Control::Reproducibility), 1);
    // a base label that is only a tag is not a pin
    let mut v = hardened();
    built(&mut v[0]);
    v[0]["Config"]["Labels"][BASE_IMAGE_LABEL] = json!("registry.example/base:1");
    let f = ContainerFacts::from_docker_inspect(&v).unwrap();
    assert_eq!(f.pinned_base_label(), None);
    assert_eq!(audit(&f, &ctx()).score_of(Control::Reproducibility), 1);
}

#[test]
fn a_local_image_id_is_exact_but_not_reproducible_elsewhere() {
    let id = format!("sha256:{}", "c".repeat(64));
    let r = with(|v| v["Config"]["Image"] = json!(id.as_str()));
    assert_eq!(r.score_of(Control::Reproducibility), 1);
    assert!(has(&r, Control::Reproducibility, &id, Risk::Weak));
}

#[test]
fn digest_pins_and_image_ids_are_recognised_exactly() {
    let hex = "0123456789abcdef".repeat(4);
    assert!(is_digest_pinned(&format!("r.example/a/b@sha256:{hex}")));
    assert!(is_digest_pinned(&format!(
        "127.0.0.1:5000/a:1@sha256:{hex}"
    )));
    assert!(!is_digest_pinned("busybox@sha256:aa"));
    assert!(!is_digest_pinned(&format!("@sha256:{hex}")));
    assert!(!is_digest_pinned(&format!(
        "a@sha256:{}",
        hex.to_uppercase()
    )));
    assert!(!is_digest_pinned("busybox:1"));
    assert!(is_image_id(&format!("sha256:{hex}")));
    assert!(!is_image_id("sha256:feed"));
    assert!(!is_image_id(&format!("a@sha256:{hex}")));
}

#[test]
fn teardown_rules() {
    let r = with(|v| v["Config"]["Labels"] = json!({}));
    assert_eq!(r.score_of(Control::Teardown), 1);
    let r = with(|v| {
        v["Config"]["Labels"] = json!({});
        add_mount(v, "volume", "data", "/data", true);
    });
    assert_eq!(r.score_of(Control::Teardown), 0);
    let anon = "a".repeat(64);
    let r = with(|v| add_mount(v, "volume", &anon, "/data", true));
    assert_eq!(r.score_of(Control::Teardown), 2);
}

#[test]
fn a_workspace_under_a_cache_folder_is_still_just_the_workspace() {
    let mut c = ctx();
    c.workspace = Some("/home/me/.cache/devcell/wt/task".into());
    let mut v = hardened();
    v[0]["Mounts"][0]["Source"] = json!("/home/me/.cache/devcell/wt/task");
    let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
    assert_eq!(r.score, 16, "{r:#?}");
}

#[test]
fn workspace_defaults_to_the_local_folder_label() {
    let mut c = ctx();
    c.workspace = None;
    let r = audit(
        &ContainerFacts::from_docker_inspect(&hardened()).unwrap(),
        &c,
    );
    assert_eq!(r.score_of(Control::RepoScope), 2);
}

#[test]
fn evidence_does_not_depend_on_the_engines_mount_order() {
    let mut v = hardened();
    let mounts = v[0]["Mounts"].as_array_mut().unwrap();
    for (source, target) in [("/srv/a", "/mnt/a"), ("/srv/b", "/mnt/b")] {
        mounts.push(json!({
            "Type": "bind", "Source": source, "Destination": target,
            "Mode": "", "RW": true, "Propagation": "rprivate"
        }));
    }
    let mut reversed = v.clone();
    reversed[0]["Mounts"].as_array_mut().unwrap().reverse();
    let report = |v: &Value| {
        let f = ContainerFacts::from_docker_inspect(v).unwrap();
        audit(&f, &ctx())
    };
    assert_eq!(report(&v), report(&reversed));
    let one = serde_json::to_string(&report(&v)).unwrap();
    assert!(!one.contains("among 1 names"), "{one}");
}

#[test]
fn binds_are_read_when_mounts_are_absent() {
    let mut v = hardened();
    v[0].as_object_mut().unwrap().remove("Mounts");
    v[0]["HostConfig"]["Binds"] = json!([
        "/home/me/work/repo:/workspace",
        "/var/run/docker.sock:/var/run/docker.sock:ro",
        "cache:/c"
    ]);
    let f = ContainerFacts::from_docker_inspect(&v).unwrap();
    assert_eq!(f.mounts.len(), 4, "{:?}", f.mounts);
    let at = |t: &str| f.mounts.iter().find(|m| m.target == t).unwrap();
    assert!(at("/var/run/docker.sock").read_only);
    assert_eq!(at("/c").volume_name.as_deref(), Some("cache"));
    // sorted by target, whatever order the engine gave
    let targets: Vec<&str> = f.mounts.iter().map(|m| m.target.as_str()).collect();
    let mut sorted = targets.clone();
    sorted.sort();
    assert_eq!(targets, sorted);
    let r = audit(&f, &ctx());
    assert_eq!(r.score_of(Control::EngineSocket), 0);
    assert_eq!(r.score_of(Control::RepoScope), 2);
}

#[test]
fn lockfile_state_from_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("devcontainer.json");
    let c = AuditContext::default().with_config_file(&config);
    assert_eq!(c.features_lockfile, Some(false));
    std::fs::write(dir.path().join("devcontainer-lock.json"), "").unwrap();
    let c = AuditContext::default().with_config_file(&config);
    assert_eq!(
        c.features_lockfile,
        Some(false),
        "an empty lockfile locks nothing"
    );
    std::fs::write(
        dir.path().join("devcontainer-lock.json"),
        "{\"features\":{}}\n",
    )
    .unwrap();
    let c = AuditContext::default().with_config_file(&config);
    assert_eq!(c.features_lockfile, Some(true));
    assert_eq!(c.locked_features, Some(BTreeMap::new()));
    std::fs::write(
        dir.path().join("devcontainer-lock.json"),
        r#"{"features":{"ghcr.io/a/b/c:1":{"version":"1.0.0","resolved":"ghcr.io/a/b/c@sha256:aa","integrity":"sha256:aa"}}}"#,
    )
    .unwrap();
    let c = AuditContext::default().with_config_file(&config);
    assert_eq!(
        c.locked_features,
        Some(BTreeMap::from([(
            "ghcr.io/a/b/c:1".to_string(),
            "sha256:aa".to_string()
        )]))
    );
    std::fs::write(dir.path().join("devcontainer-lock.json"), "{oops").unwrap();
    let c = AuditContext::default().with_config_file(&config);
    assert_eq!((c.features_lockfile, c.locked_features), (Some(true), None));
}

/// The audit reads the lockfile `up` writes: for a hidden config file name other than
/// `.devcontainer.json` too, the reference CLI's rule (a name starting with `.` gets
/// `.devcontainer-lock.json`); the audit once looked for `devcontainer-lock.json` there and
/// counted a locked configuration as unlocked.
#[test]
fn the_audit_reads_the_lockfile_up_writes_for_a_hidden_config_name() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join(".devcontainer");
    std::fs::create_dir(&folder).unwrap();
    let config = folder.join(".custom.json");
    std::fs::write(&config, "{}").unwrap();
    let written = crate::features::lockfile::lockfile_path(&config);
    assert_eq!(written, folder.join(".devcontainer-lock.json"));
    std::fs::write(&written, r#"{"features":{}}"#).unwrap();
    let c = AuditContext::default().with_config_file(&config);
    assert_eq!(c.features_lockfile, Some(true));
    for (config, lockfile) in [
        (
            "/w/.devcontainer/devcontainer.json",
            "/w/.devcontainer/devcontainer-lock.json",
        ),
        ("/w/.devcontainer.json", "/w/.devcontainer-lock.json"),
    ] {
        assert_eq!(
            crate::features::lockfile::lockfile_path(Path::new(config)),
            Path::new(lockfile)
        );
    }
}

#[test]
fn caps_decode() {
    let caps = caps_from_mask(0xa80425fb);
    let expected: BTreeSet<String> = DOCKER_DEFAULT_CAPS.iter().map(|c| c.to_string()).collect();
    assert_eq!(caps, expected);
    assert!(caps_from_mask(1 << 21).contains("SYS_ADMIN"));
}

#[test]
fn the_egress_channel_is_not_an_extra_path() {
    let state = "/home/me/.local/state/devcell/egress";
    let mount = |v: &mut Value, src: &str, dst: &str, rw: bool| {
        let mut v2 = v.clone();
        add_mount(&mut v2[0], "bind", src, dst, rw);
        *v = v2;
    };
    let forwarder = format!("{state}/forwarder-83a06d9627d3cd58");
    let socket = format!("{state}/1s6loe7711rfnfk8/socket");
    let mut v = hardened();
    mount(&mut v, &forwarder, "/.devcell-egress/forwarder", false);
    mount(&mut v, &socket, "/.devcell-egress/socket", false);
    let facts = ContainerFacts::from_docker_inspect(&v).unwrap();
    // without the proxy's evidence the binds are extra host paths
    assert_eq!(audit(&facts, &ctx()).score_of(Control::RepoScope), 1);
    let mut known = ctx();
    known.egress = Some(EgressEvidence {
        channel_root: state.into(),
        ..EgressEvidence::default()
    });
    let r = audit(&facts, &known);
    assert_eq!(r.score_of(Control::RepoScope), 2);
    assert!(has(&r, Control::RepoScope, &socket, Risk::Safe));
    // writable, elsewhere in the container, the egress folder itself, or escaping it: extra
    for (src, dst, rw) in [
        (socket.as_str(), "/.devcell-egress/socket", true),
        (socket.as_str(), "/opt/socket", false),
        (state, "/.devcell-egress/socket", false),
        (
            "/home/me/.local/state/devcell/egress/../../../../.ssh",
            "/.devcell-egress/socket",
            false,
        ),
    ] {
        let mut v = hardened();
        mount(&mut v, src, dst, rw);
        let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &known);
        assert!(r.score_of(Control::RepoScope) < 2, "{src} -> {dst} rw={rw}");
    }
}

/// Issue 28 item 7 (spec-note 0646): the audit names a GPU device request as given (Docker's
/// `--gpus all`, Podman's CDI `nvidia.com/gpu=all`), or says none was requested; another
/// device request stays a device request.
#[test]
fn the_audit_names_a_gpu_request_given_or_none() {
    let none = with(|_| {});
    let gpu = |e: &&Evidence| e.subject == "gpu";
    let line = |r: &AuditReport| {
        r.control(Control::EngineSocket)
            .unwrap()
            .evidence
            .iter()
            .find(gpu)
            .cloned()
    };
    let e = line(&none).expect("a gpu line when none was requested");
    assert_eq!((e.detail.as_str(), e.risk), ("none requested", Risk::Safe));

    for request in [
        json!({"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}),
        json!({"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=all"]}),
    ] {
        let given = with(|v| v["HostConfig"]["DeviceRequests"] = json!([request]));
        let e = line(&given).expect("a gpu line");
        assert!(e.detail.contains("GPUs are given"), "{e:?}");
        assert!(e.detail.contains("--allow gpu"), "{e:?}");
        assert_eq!(e.risk, Risk::Weak);
        assert!(!has(
            &given,
            Control::EngineSocket,
            "device requests",
            Risk::Weak
        ));
    }

    let other = with(|v| {
        v["HostConfig"]["DeviceRequests"] =
            json!([{"Driver": "cdi", "DeviceIDs": ["vendor.example/fpga=0"]}])
    });
    assert_eq!(line(&other).unwrap().detail, "none requested");
    assert!(has(
        &other,
        Control::EngineSocket,
        "device requests",
        Risk::Weak
    ));
}
