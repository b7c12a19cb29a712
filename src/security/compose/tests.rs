//! `security::compose`: the judgements of Compose models, on hand-written models and temp trees.

use std::path::Path;

use super::dockerfile::build_uses_cache_mount;
use super::*;
use crate::formats::json;
use crate::security::dockerfile::DOCKERFILE_MAX;
use crate::security::host_path::resolve;
use crate::security::policy::RequestStatus;
use std::path::PathBuf;

fn places() -> Places {
    Places {
        workspace: PathBuf::from("/w/repo"),
        home: Some(PathBuf::from("/home/dev")),
        engine_socket: Some(PathBuf::from("/var/run/docker.sock")),
    }
}

/// `m` judged under `hardened` with the grants of `--allow` flags as `refused` lists
/// them; it passes.
fn judged_with_flags(m: &Value, flags: &[&str]) -> ComposeJudgement {
    let grants = Grants::parse(
        &flags
            .iter()
            .map(|f| f.trim_start_matches("--allow "))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    judge_compose(&hardened(), m, "app", &places(), &grants).unwrap()
}

fn model(services: Value) -> Value {
    json!({"name": "p", "services": services})
}

fn hardened() -> SecurityProfile {
    SecurityProfile::default()
}

fn refused(model: &Value, grants: &Grants) -> Vec<(String, String, RequestStatus)> {
    let err = judge_compose(&hardened(), model, "app", &places(), grants).unwrap_err();
    refused_requests(&err)
        .expect("a refusal")
        .iter()
        .filter(|r| r.status != RequestStatus::Granted)
        .map(|r| {
            (
                r.permission
                    .grant_flag()
                    .unwrap_or_else(|| r.permission.to_string()),
                r.source.to_string(),
                r.status,
            )
        })
        .collect()
}

/// `places()` with a real workspace folder `ws`.
fn real_places(ws: &Path) -> Places {
    Places {
        workspace: resolve(ws).unwrap(),
        ..places()
    }
}

/// Attack (spec-note 0400, F1): a bind source inside the workspace that devcell cannot
/// resolve (a link loop here; a link below a folder it cannot search in the attack, which
/// the engine, root, follows to `/`) is a request never granted, read-only or not, not a
/// path judged by its text.
#[test]
fn an_unresolvable_bind_source_is_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("repo");
    std::fs::create_dir(&ws).unwrap();
    std::os::unix::fs::symlink("loop", ws.join("loop")).unwrap();
    let source = ws.join("loop/hostroot").display().to_string();
    let m = model(json!({
        "app": {"image": "a"},
        "side": {"image": "s", "volumes": [
            {"type": "bind", "source": source, "target": "/host", "read_only": true}]}
    }));
    let all = Grants::parse(&["mount:/"]).unwrap();
    let err = judge_compose(&hardened(), &m, "app", &real_places(&ws), &all).unwrap_err();
    let requests = refused_requests(&err).expect("a refusal");
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        requests[0].permission,
        Permission::UnresolvablePath(source.clone())
    );
    assert_eq!(requests[0].status, RequestStatus::Forbidden);
    assert_eq!(requests[0].permission.grant_flag(), None);
}

/// Attack (spec-note 0400, F2): a bind-backed volume whose `device` goes through procfs
/// (`/proc/self/cwd` is devcell's current folder, the workspace, for devcell, and the
/// engine daemon's own for the engine) is refused, never judged as devcell's view.
#[test]
fn a_volume_device_through_proc_self_is_refused() {
    let cwd = std::env::current_dir().unwrap();
    for device in [
        "/proc/self/cwd",
        "/proc/thread-self/cwd",
        "/dev/fd/../../proc/self/root",
    ] {
        let mut m = model(json!({
            "app": {"image": "a"},
            "side": {"image": "s", "volumes": [
                {"type": "volume", "source": "hostroot", "target": "/h", "read_only": true}]}
        }));
        m["volumes"] =
            json!({"hostroot": {"driver_opts": {"type": "none", "o": "bind", "device": device}}});
        let err = judge_compose(
            &hardened(),
            &m,
            "app",
            &real_places(&cwd),
            &Grants::default(),
        )
        .unwrap_err();
        let requests = refused_requests(&err).expect("a refusal");
        assert!(
            requests.iter().any(|r| r.permission
                == Permission::UnresolvablePath(device.to_string())
                && r.status == RequestStatus::Forbidden),
            "{device}: {requests:?}"
        );
    }
}

/// Attack (spec-note 0400, F0/F3): a pid, ipc or network namespace shared with another
/// service of the project, the primary's included in either direction, is a `namespace:`
/// request: a peer in the primary's pid namespace reaches its mounts through
/// `/proc/<pid>/root`, one in its network namespace its loopback and abstract sockets.
#[test]
fn a_pid_service_link_with_the_primary_is_a_request() {
    for (app, side) in [
        (
            json!({"image": "a", "pid": "service:side"}),
            json!({"image": "s"}),
        ),
        (
            json!({"image": "a"}),
            json!({"image": "s", "pid": "service:app"}),
        ),
        (
            json!({"image": "a"}),
            json!({"image": "s", "ipc": "service:app"}),
        ),
        (
            json!({"image": "a", "network_mode": "service:side"}),
            json!({"image": "s"}),
        ),
        (
            json!({"image": "a"}),
            json!({"image": "s", "network_mode": "service:app"}),
        ),
    ] {
        let m = model(json!({"app": app, "side": side}));
        let got = refused(&m, &Grants::default());
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].0.starts_with("--allow namespace:"), "{got:?}");
        let flag = got[0].0.clone();
        assert!(
            judge_compose(
                &hardened(),
                &m,
                "app",
                &places(),
                &Grants::parse(&[flag.trim_start_matches("--allow ")]).unwrap()
            )
            .is_ok()
        );
    }
}

/// Attack (spec-note 0400, F5): a sidecar's `restart` policy (or `deploy.restart_policy`)
/// is overridden to `no`, so the engine never starts it again outside a handoff.
#[test]
fn a_restart_policy_is_a_request_or_overridden() {
    let m = model(json!({
        "app": {"image": "a", "restart": "always"},
        "side": {"image": "s", "restart": "unless-stopped"},
        "swarmish": {"image": "s", "deploy": {"restart_policy": {"condition": "any"}}}
    }));
    let j = judge_compose(&hardened(), &m, "app", &places(), &Grants::default()).unwrap();
    assert_eq!(j.sidecars["side"]["restart"], "no");
    assert_eq!(j.sidecars["swarmish"]["restart"], "no");
    // the primary's comes from devcell's own override
    let file = crate::engine::compose::override_file(
        "app",
        &crate::engine::ContainerSpec::default(),
        &j.sidecars,
        false,
    );
    assert_eq!(file["services"]["app"]["restart"], "no");
    assert_eq!(file["services"]["side"]["restart"], "no");
}

#[test]
fn an_ordinary_project_passes_and_sidecars_get_the_profile() {
    let m = model(json!({
        "app": {"image": "a", "volumes": [
            {"type": "bind", "source": "/w/repo", "target": "/workspace"},
            {"type": "volume", "source": "data", "target": "/data"}]},
        "db": {"image": "postgres", "user": "999", "mem_limit": "536870912",
               "ports": [{"target": 5432, "published": "5432", "host_ip": "127.0.0.1"}]}
    }));
    let j = judge_compose(&hardened(), &m, "app", &places(), &Grants::default()).unwrap();
    assert!(j.requests.is_empty(), "{:?}", j.requests);
    assert!(j.sidecars.get("app").is_none());
    let db = &j.sidecars["db"];
    assert_eq!(db["security_opt"], json!(["no-new-privileges:true"]));
    assert_eq!(db["pids_limit"], 1024);
    assert_eq!(db["mem_limit"], 536_870_912);
    assert_eq!(db["cpus"], 2.0);
    // its own non-root `user:` is not the workspace user's either (spec-note 0611)
    assert_ne!(db["user"], "999");
    assert!(db.get("cap_drop").is_some());
}

/// Attack (spec-note 0611, G5): the agent hands a descriptor of the workspace to a sidecar
/// that mounts no host path (over a socket on a shared named volume, or an abstract socket
/// in a shared network namespace). Under `hardened` every sidecar, a read-only or
/// named-volume one too, runs as the workspace user (`nobody` when everything is root,
/// never root) without the file capabilities and with `no-new-privileges`; the grant keeps
/// the image's user for that service alone and is reported; `reference` adds nothing.
#[test]
fn every_sidecar_runs_as_the_workspace_user_without_file_capabilities() {
    let m = json!({"name": "p", "services": {
        "app": {"image": "a", "volumes": [
            {"type": "bind", "source": "/w/repo", "target": "/w"},
            {"type": "volume", "source": "sock", "target": "/sock"}]},
        "side": {"image": "b", "volumes": [{"type": "volume", "source": "sock", "target": "/sock"}]},
        "peer": {"image": "b", "network_mode": "service:app"},
        "bare": {"image": "b"}
    }, "volumes": {"sock": {}}});
    let expected = crate::config::ownership::workspace_user_of(&places().workspace)
        .unwrap_or(SIDECAR_FALLBACK_USER);
    assert_ne!(expected.uid, 0);
    // the network peer is a request of its own (F3); granted, it still gets the profile
    let net = "--allow namespace:network:service:app";
    let j = judged_with_flags(&m, &[net]);
    assert_eq!(j.requests.len(), 1, "{:?}", j.requests);
    assert!(j.sidecars.get("app").is_none());
    for name in ["side", "peer", "bare"] {
        let side = &j.sidecars[name];
        assert_eq!(
            side["user"],
            format!("{}:{}", expected.uid, expected.gid),
            "{name}"
        );
        assert_eq!(side["security_opt"], json!(["no-new-privileges:true"]));
        let dropped = json::strings(side.get("cap_drop"));
        for cap in HOST_WRITER_CAP_DROP {
            assert!(dropped.iter().any(|c| c == cap), "{name} keeps {cap}");
        }
    }
    let granted = judged_with_flags(&m, &[net, "--allow runtime-option:keep_image_user=side"]);
    assert!(granted.sidecars["side"].get("user").is_none());
    assert!(granted.sidecars["side"].get("cap_drop").is_none());
    assert!(granted.sidecars["peer"].get("cap_drop").is_some());
    assert_eq!(
        granted
            .requests
            .iter()
            .filter(
                |r| r.permission == keep_image_user("side") && r.status == RequestStatus::Granted
            )
            .count(),
        1
    );
    let reference = judge_compose(
        &SecurityProfile::Reference,
        &m,
        "app",
        &places(),
        &Grants::default(),
    )
    .unwrap();
    assert!(reference.sidecars.is_empty());
}

/// A sidecar whose `user:` names root (`root`, `0`, `0:0`, `root:wheel`) is refused under
/// `hardened` naming the grant `runtime-option:keep_image_user=<service>` (it would run as
/// the workspace user and fail); granted, it keeps root, once reported. A non-root `user:`
/// and the primary's `user: root` (the primary's own profile) ask nothing.
#[test]
fn a_sidecar_naming_root_as_its_user_is_refused_naming_the_grant() {
    for user in [
        json!("root"),
        json!("0"),
        json!(0),
        json!("0:0"),
        json!("root:wheel"),
    ] {
        let m = model(json!({
            "app": {"image": "a", "user": "root"},
            "db": {"image": "postgres", "user": user},
            "cache": {"image": "redis", "user": "999:999"}
        }));
        let got = refused(&m, &Grants::default());
        assert_eq!(
            got,
            [(
                "--allow runtime-option:keep_image_user=db".to_string(),
                "Compose service `db` (`user`)".to_string(),
                RequestStatus::Refused
            )],
            "{user}"
        );
        let j = judged_with_flags(&m, &["--allow runtime-option:keep_image_user=db"]);
        assert!(j.sidecars["db"].get("user").is_none());
        assert_eq!(j.requests.len(), 1, "{:?}", j.requests);
        assert_eq!(j.requests[0].status, RequestStatus::Granted);
    }
    for user in ["rooted", "1000", "10:0", "postgres"] {
        assert!(!names_root(user), "{user}");
    }
}

/// A sidecar with a writable bind (or a bind-backed volume) runs as the workspace user
/// without the capabilities that give files away, keep set-uid bits or make devices; a
/// read-only bind, a named volume and the primary are left alone; the grant keeps the
/// image's user and is reported.
#[test]
fn sidecars_that_write_host_paths_lose_root_and_file_capabilities() {
    use crate::config::ownership::Ids;
    let m = json!({"name": "p", "services": {
        "app": {"image": "a", "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}]},
        "writer": {"image": "w", "cap_add": ["chown"],
                   "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}]},
        "backed": {"image": "b", "volumes": [{"type": "volume", "source": "hostdir", "target": "/d"}]},
        "reader": {"image": "r", "volumes": [
            {"type": "bind", "source": "/w/repo", "target": "/w", "read_only": true},
            {"type": "volume", "source": "data", "target": "/data"}]}
    }, "volumes": {"hostdir": {"driver_opts": {"type": "none", "o": "bind", "device": "/w/repo/d"}},
                   "data": {}}});
    let services = &m["services"];
    assert!(writes_host_path(&m, &services["writer"]));
    assert!(writes_host_path(&m, &services["backed"]));
    assert!(!writes_host_path(&m, &services["reader"]));

    let restrict = host_writer_additions(
        &services["writer"],
        Some(Ids {
            uid: 1000,
            gid: 100,
        }),
    );
    assert_eq!(restrict["user"], "1000:100");
    let dropped = json::strings(restrict.get("cap_drop"));
    for cap in [
        "MKNOD",
        "FSETID",
        "FOWNER",
        "SETUID",
        "SETGID",
        "DAC_OVERRIDE",
    ] {
        assert!(dropped.iter().any(|c| c == cap), "{cap}: {dropped:?}");
    }
    // a capability the service adds (a request of its own) is not dropped again
    assert!(!dropped.iter().any(|c| c == "CHOWN"), "{dropped:?}");
    // no workspace user (everything is root): capabilities only
    let root_only = host_writer_additions(&services["backed"], None);
    assert!(root_only.get("user").is_none());
    assert_eq!(
        json::strings(root_only.get("cap_drop")).len(),
        HOST_WRITER_CAP_DROP.len()
    );

    let j = judged_with_flags(&m, &["--allow cap:CHOWN"]);
    for writer in ["writer", "backed"] {
        assert!(j.sidecars[writer].get("cap_drop").is_some(), "{writer}");
    }
    // a sidecar that writes no host path gets the same (G5: it can be handed a descriptor)
    assert!(j.sidecars["reader"].get("cap_drop").is_some());
    assert!(j.sidecars["reader"].get("user").is_some());
    assert!(j.sidecars.get("app").is_none());

    let granted = judged_with_flags(
        &m,
        &[
            "--allow cap:CHOWN",
            "--allow runtime-option:keep_image_user=writer",
        ],
    );
    assert!(granted.sidecars["writer"].get("cap_drop").is_none());
    assert!(granted.sidecars["writer"].get("user").is_none());
    assert!(granted.sidecars["backed"].get("cap_drop").is_some());
    assert!(granted.sidecars["reader"].get("cap_drop").is_some());
    assert!(
        granted.requests.iter().any(
            |r| r.permission == keep_image_user("writer") && r.status == RequestStatus::Granted
        )
    );
    // `reference` adds nothing
    let reference = judge_compose(
        &SecurityProfile::Reference,
        &m,
        "app",
        &places(),
        &Grants::default(),
    )
    .unwrap();
    assert!(reference.sidecars.is_empty());
}

/// Each resource that reaches past the project is a `runtime-option` request naming the
/// service and property, granted by its flag; a plain bridge network with a free subnet,
/// one replica and an ordinary image are none.
#[test]
fn resources_reaching_past_the_project_are_requests() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM a\nRUN --mount=type=cache,target=/root/.cache true\n",
    )
    .unwrap();
    let ctx = dir.path().to_string_lossy().into_owned();
    let mut m = model(json!({
        "app": {"image": "a", "networks": {"lan": {}, "ok": {}, "near": {}}},
        "db": {"image": "vsc-otherrepo-0123", "scale": 3, "oom_kill_disable": true,
               "memswap_limit": -1, "cpu_rt_runtime": 95000,
               "external_links": ["victim-db-1:db"], "networks": {"opts": {}, "v6": {}}},
        "web": {"build": {"context": ctx, "ssh": ["default"]}, "deploy": {"replicas": 1}},
        "inline": {"build": {"context": ctx, "dockerfile_inline": "FROM a\nRUN --mount=type=cache,id=x,target=/c true\n"},
                   "image": "p-inline"},
        "plain": {"image": "docker.io/devcell/uid:k"}
    }));
    m["networks"] = json!({
        "lan": {"driver": "macvlan", "driver_opts": {"parent": "eth0"}},
        "ok": {"driver": "bridge", "ipam": {"config": [{"subnet": "10.250.0.0/24"}]}},
        "near": {"ipam": {"config": [{"subnet": "172.17.5.0/24"}]}},
        "opts": {"driver_opts": {"com.docker.network.bridge.name": "docker0"}},
        "v6": {"ipam": {"driver": "other", "config": [{"subnet": "fd00::/64"}]}}
    });
    let routes = [(0xAC11_0000, 0xFFFF_0000), (0, 0)];
    assert!(overlaps_a_route("172.17.5.0/24", &routes));
    assert!(overlaps_a_route("172.0.0.0/8", &routes));
    assert!(
        !overlaps_a_route("10.250.0.0/24", &routes),
        "the default route is left out"
    );
    assert!(overlaps_a_route("fd00::/64", &routes));
    let mut asked = Vec::new();
    for (name, service) in services_of(&m) {
        reach_requests(&m, name, service, &routes, &mut asked);
    }
    let mut got: Vec<String> = asked
        .iter()
        .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "--allow runtime-option:build_cache_mount=inline <- Compose service `inline` (`build.dockerfile`)",
            "--allow runtime-option:build_cache_mount=web <- Compose service `web` (`build.dockerfile`)",
            "--allow runtime-option:build_ssh=default <- Compose service `web` (`build.ssh`)",
            "--allow runtime-option:cpu_rt_runtime=95000 <- Compose service `db` (`cpu_rt_runtime`)",
            "--allow runtime-option:external_link=victim-db-1:db <- Compose service `db` (`external_links`)",
            "--allow runtime-option:image=docker.io/devcell/uid:k <- Compose service `plain` (`image`)",
            "--allow runtime-option:image=vsc-otherrepo-0123 <- Compose service `db` (`image`)",
            "--allow runtime-option:ipam_driver=other <- Compose service `db` (`networks`)",
            "--allow runtime-option:memswap_limit=-1 <- Compose service `db` (`memswap_limit`)",
            "--allow runtime-option:network_driver=macvlan <- Compose service `app` (`networks`)",
            "--allow runtime-option:network_driver_opt.com.docker.network.bridge.name=docker0 <- Compose service `db` (`networks`)",
            "--allow runtime-option:network_driver_opt.parent=eth0 <- Compose service `app` (`networks`)",
            "--allow runtime-option:network_subnet=172.17.5.0/24 <- Compose service `app` (`networks`)",
            "--allow runtime-option:network_subnet=fd00::/64 <- Compose service `db` (`networks`)",
            "--allow runtime-option:oom_kill_disable=true <- Compose service `db` (`oom_kill_disable`)",
            "--allow runtime-option:replicas=3 <- Compose service `db` (`deploy.replicas`)",
        ]
    );
    // through the policy: refused under `hardened`, each granted by its flag
    let flags: Vec<String> = got
        .iter()
        .map(|g| g.split(" <- ").next().unwrap().to_string())
        .collect();
    assert!(!refused(&m, &Grants::default()).is_empty());
    let mount = format!("mount:{ctx}");
    let mut grants: Vec<&str> = flags
        .iter()
        .map(|f| f.trim_start_matches("--allow "))
        .collect();
    grants.push(&mount);
    let judged = judge_compose(
        &hardened(),
        &m,
        "app",
        &places(),
        &Grants::parse(&grants).unwrap(),
    );
    // the subnet of the host's own routes is read from this machine: grant what it asks
    if let Err(e) = &judged {
        let left: Vec<String> = refused_requests(e)
            .unwrap()
            .iter()
            .filter(|r| r.status != RequestStatus::Granted)
            .map(|r| r.permission.grant_flag().unwrap())
            .collect();
        assert!(left.iter().all(|f| f.contains("network_")), "{left:?}");
    }
    assert!(has_cache_mount("RUN --MOUNT=\"type=cache,target=/x\" make"));
    assert!(!has_cache_mount(
        "RUN --mount=type=secret,id=a cat /run/secrets/a"
    ));
    assert!(is_devcell_image_name("library/vsc-x-1"));
    assert!(!is_devcell_image_name("postgres:16"));
}

/// Attacks (spec-notes 0611, 0612): a supplementary group (`group_add: ["0"]`) lets a
/// sidecar leave a set-gid-root file in a bound folder without a capability; a log driver
/// or option that names an address has the engine deliver the output past network
/// `none`. Each is a request naming the service; local drivers' size and metadata options
/// are none.
#[test]
fn group_add_and_logging_are_requests() {
    let m = model(json!({
        "app": {"image": "a", "logging": {"driver": "json-file",
                "options": {"max-size": "10m", "max-file": "3", "tag": "x"}}},
        "side": {"image": "s", "group_add": ["0", 27],
                 "logging": {"driver": "syslog",
                             "options": {"syslog-address": "tcp://127.0.0.1:5514"}}},
        "local": {"image": "l", "logging": {"driver": "local",
                  "options": {"fluentd-address": "127.0.0.1:24224", "compress": "true"}}},
        "legacy": {"image": "g", "log_driver": "gelf",
                   "log_opt": {"gelf-address": "udp://127.0.0.1:12201"}},
        "quiet": {"image": "q", "logging": {"driver": "none"}}
    }));
    let mut asked = Vec::new();
    for (name, service) in services_of(&m) {
        reach_requests(&m, name, service, &[], &mut asked);
    }
    let mut got: Vec<String> = asked
        .iter()
        .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "--allow runtime-option:group_add=side:0 <- Compose service `side` (`group_add`)",
            "--allow runtime-option:group_add=side:27 <- Compose service `side` (`group_add`)",
            "--allow runtime-option:logging_driver=gelf <- Compose service `legacy` (`logging`)",
            "--allow runtime-option:logging_driver=syslog <- Compose service `side` (`logging`)",
            "--allow runtime-option:logging_opt.fluentd-address=127.0.0.1:24224 <- Compose service `local` (`logging`)",
            "--allow runtime-option:logging_opt.gelf-address=udp://127.0.0.1:12201 <- Compose service `legacy` (`logging`)",
            "--allow runtime-option:logging_opt.syslog-address=tcp://127.0.0.1:5514 <- Compose service `side` (`logging`)",
        ]
    );
    // refused under `hardened` without grants; each granted by its flag
    let refused_flags: Vec<String> = refused(&m, &Grants::default())
        .into_iter()
        .map(|(f, _, _)| f)
        .collect();
    assert_eq!(refused_flags.len(), got.len(), "{refused_flags:?}");
    let flags: Vec<&str> = got
        .iter()
        .map(|g| g.split(" <- ").next().unwrap())
        .collect();
    let j = judged_with_flags(&m, &flags);
    assert_eq!(j.requests.len(), got.len());
}

/// Attack (spec-note 0612): a cache mount spelled over continued lines, through a comment
/// inside the instruction, with a `# escape=` directive or a build argument is still one;
/// a Dockerfile that cannot be read (not a file, above the size limit) counts as one; a
/// missing default `Dockerfile` has its lowercase `dockerfile` judged.
#[test]
fn cache_mounts_are_found_across_lines_and_unreadable_dockerfiles_count() {
    assert!(has_cache_mount(
        "FROM a\nRUN --mount=type=\\\ncache,id=shared,target=/c true\n"
    ));
    assert!(has_cache_mount(
        "FROM a\nRUN --mount=type=ca\\  \n# note\n\nche,target=/c true\n"
    ));
    assert!(has_cache_mount(
        "# syntax=docker/dockerfile:1\n# escape=`\nFROM a\nRUN --mount=type=`\ncache,target=/c true\n"
    ));
    assert!(has_cache_mount(
        "ARG T=cache\nRUN --mount=type=$T,target=/c true\n"
    ));
    assert!(has_cache_mount(
        "RUN --mount=\"type=ca\\che,target=/c\" true\n"
    ));
    assert!(!has_cache_mount(
        "FROM a\nRUN --mount=type=secret,id=a \\\n  cat /run/secrets/a $HOME\n"
    ));
    // with a backtick escape a backslash ends nothing
    assert!(!has_cache_mount(
        "# escape=`\nFROM a\nRUN --mount=type=\\\ncache true\n"
    ));

    let uses = |dir: &Path| {
        build_uses_cache_mount(
            &json!({"context": dir.to_string_lossy(), "dockerfile": "Dockerfile"}),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    assert!(
        !uses(dir.path()),
        "no Dockerfile: the build fails, no request"
    );
    std::fs::write(
        dir.path().join("dockerfile"),
        "RUN --mount=type=cache,target=/c x\n",
    )
    .unwrap();
    assert!(uses(dir.path()), "the lowercase fallback is judged");
    std::fs::remove_file(dir.path().join("dockerfile")).unwrap();
    std::fs::create_dir(dir.path().join("Dockerfile")).unwrap();
    assert!(uses(dir.path()), "unreadable counts as a cache mount");
    std::fs::remove_dir(dir.path().join("Dockerfile")).unwrap();
    let big = std::fs::File::create(dir.path().join("Dockerfile")).unwrap();
    big.set_len(DOCKERFILE_MAX + 1).unwrap();
    assert!(
        uses(dir.path()),
        "above the size limit counts as a cache mount"
    );
    big.set_len(16).unwrap();
    assert!(!uses(dir.path()));
}

/// Attack (spec-note 0611, G4): `volumes_from: [app]` gives a root sidecar every mount of
/// the primary, the workspace bind read-write, though it binds nothing itself. It is a
/// request, and a host writer: granted, it still runs as the workspace user without the
/// file capabilities. So is a service taking a `container:`'s mounts, a pid, ipc or network
/// peer of a writer (either way) and, transitively, a `volumes_from` of those; `:ro` and a
/// source that writes no host path ask nothing and leave the sidecar as it was.
#[test]
fn volumes_from_a_workspace_writer_is_a_writer() {
    let m = json!({"name": "p", "services": {
        "app": {"image": "a", "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}]},
        "side": {"image": "b", "volumes_from": ["app"]},
        "chained": {"image": "b", "volumes_from": ["side:rw"]},
        "box": {"image": "b", "volumes_from": ["container:elsewhere"]},
        "pidpeer": {"image": "b", "pid": "service:side"},
        "joined": {"image": "b"},
        "joiner": {"image": "b", "volumes_from": ["app"], "network_mode": "service:joined"},
        "reader": {"image": "b", "volumes_from": ["app:ro"]},
        "db": {"image": "d", "volumes": [{"type": "volume", "source": "data", "target": "/d"}]},
        "fromdb": {"image": "b", "volumes_from": ["db"]}
    }, "volumes": {"data": {}}});
    let writers = host_writers(&m, "app");
    for w in [
        "app", "side", "chained", "box", "pidpeer", "joined", "joiner",
    ] {
        assert!(writers.contains(w), "{w}: {writers:?}");
    }
    for n in ["reader", "db", "fromdb"] {
        assert!(!writers.contains(n), "{n}: {writers:?}");
    }
    // the primary is a writer even when the model binds nothing into it
    let bare =
        model(json!({"app": {"image": "a"}, "side": {"image": "b", "volumes_from": ["app"]}}));
    assert!(host_writers(&bare, "app").contains("side"));

    let got = refused(&m, &Grants::default());
    let mut flags: Vec<&str> = got.iter().map(|(f, _, _)| f.as_str()).collect();
    flags.sort();
    flags.dedup();
    assert_eq!(
        flags,
        [
            "--allow namespace:network:service:joined",
            "--allow namespace:pid:service:side",
            "--allow namespace:volumes_from:app",
            "--allow namespace:volumes_from:container:elsewhere",
            "--allow namespace:volumes_from:side",
        ]
    );
    assert!(
        got.iter()
            .any(|(f, s, _)| f == "--allow namespace:volumes_from:app"
                && s == "Compose service `side` (`volumes_from`)")
    );
    let j = judged_with_flags(&m, &flags);
    for w in ["side", "chained", "box", "pidpeer", "joined", "joiner"] {
        let dropped = json::strings(j.sidecars[w].get("cap_drop"));
        for cap in ["MKNOD", "FSETID", "CHOWN", "SETUID"] {
            assert!(dropped.iter().any(|c| c == cap), "{w} keeps {cap}");
        }
    }
    // not writers, but every sidecar gets the profile under `hardened` (G5)
    for n in ["reader", "db", "fromdb"] {
        assert!(j.sidecars[n].get("cap_drop").is_some(), "{n}");
    }
    // keeping the image's user stays a grant of its own
    let mut kept = flags.clone();
    kept.push("--allow runtime-option:keep_image_user=side");
    let j = judged_with_flags(&m, &kept);
    assert!(j.sidecars["side"].get("cap_drop").is_none());
    assert!(j.sidecars["chained"].get("cap_drop").is_some());
}

#[test]
fn each_escape_is_a_request_naming_the_service_and_property() {
    let m = model(json!({
        "app": {"image": "a"},
        "db": {"image": "d", "privileged": true, "cap_add": ["cap_net_admin"],
               "network_mode": "host", "pid": "host", "ipc": "container:x",
               "userns_mode": "host", "devices": [{"source": "/dev/fuse", "target": "/dev/fuse"}],
               "device_cgroup_rules": ["c 1:3 mr"],
               "security_opt": ["seccomp=unconfined", "no-new-privileges:true"],
               "volumes_from": ["container:other", "app"],
               "ports": [{"target": 80, "published": "8080"}]}
    }));
    let got = refused(&m, &Grants::default());
    let mut flags: Vec<&str> = got.iter().map(|(f, _, _)| f.as_str()).collect();
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow cap:NET_ADMIN",
            "--allow device-cgroup-rule:c 1:3 mr",
            "--allow device:/dev/fuse",
            "--allow namespace:ipc:container:x",
            "--allow namespace:pid:host",
            "--allow namespace:userns:host",
            "--allow namespace:volumes_from:app",
            "--allow namespace:volumes_from:container:other",
            "--allow network:host",
            "--allow privileged",
            "--allow publish:0.0.0.0:8080",
            "--allow security-opt:seccomp=unconfined",
        ]
    );
    assert!(
        got.iter().all(
            |(_, s, st)| s.starts_with("Compose service `db`") && *st == RequestStatus::Refused
        )
    );
    assert!(
        got.iter()
            .any(|(_, s, _)| s == "Compose service `db` (`pid`)")
    );
    // each granted with its --allow
    let j = judged_with_flags(&m, &flags);
    assert_eq!(j.requests.len(), 12);
    assert!(
        j.requests
            .iter()
            .all(|r| r.status == RequestStatus::Granted)
    );
}

/// Attacks (spec-note 0400): a build reading host folders and files through properties
/// other than `context`, and engine options that change the isolation.
#[test]
fn build_side_doors_and_engine_options_are_requests() {
    let mut m = model(json!({
        "app": {"image": "a", "build": {"context": "/w/repo", "dockerfile": "Dockerfile",
            "additional_contexts": {"keys": "/home/dev/.ssh", "img": "docker-image://alpine",
                                    "own": "/w/repo/sub"},
            "secrets": [{"source": "hs"}],
            "cache_from": ["type=local,src=/srv/cache", "type=registry,ref=x"],
            "cache_to": ["type=local,dest=/etc/cron.d"]}},
        "db": {"image": "d", "runtime": "sysbox-runc", "cgroup_parent": "/",
               "sysctls": {"net.core.somaxconn": "1024"}, "oom_score_adj": -1000},
        "ok": {"image": "d", "runtime": "runc", "oom_score_adj": 500}
    }));
    m["secrets"] = json!({"hs": {"name": "p_hs", "file": "/home/dev/.aws/credentials"}});
    let got = refused(&m, &Grants::default());
    let mut flags: Vec<&str> = got.iter().map(|(f, _, _)| f.as_str()).collect();
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow image-tag:a",
            "--allow mount:/etc/cron.d",
            "--allow mount:/home/dev/.aws/credentials",
            "--allow mount:/home/dev/.ssh",
            "--allow mount:/srv/cache",
            "--allow runtime-option:cgroup_parent=/",
            "--allow runtime-option:oom_score_adj=-1000",
            "--allow runtime-option:runtime=sysbox-runc",
            "--allow runtime-option:sysctl.net.core.somaxconn=1024",
        ]
    );
    assert!(got.iter().any(|(f, s, _)| f == "--allow mount:/etc/cron.d"
        && s == "Compose service `app` (`build.cache_to`)"));
    assert!(
        got.iter()
            .any(|(f, s, _)| f == "--allow mount:/home/dev/.ssh"
                && s == "Compose service `app` (`build.additional_contexts`)")
    );
    assert!(got.iter().any(
        |(f, s, _)| f == "--allow runtime-option:runtime=sysbox-runc"
            && s == "Compose service `db` (`runtime`)"
    ));
    let j = judged_with_flags(&m, &flags);
    assert_eq!(j.requests.len(), 9);
    assert!(Grants::parse(&["runtime-option:"]).is_err());
}

/// Attack (spec-note 0400): `env_file` naming a host file reads it into the container's
/// environment.
#[test]
fn env_files_outside_the_workspace_are_requests() {
    let m = model(json!({
        "app": {"image": "a", "env_file": [{"path": "/w/repo/.env", "required": true}]},
        "db": {"image": "d", "env_file": [
            {"path": "/home/dev/.aws/credentials", "required": false},
            {"path": "/w/repo/${HOME}/.netrc", "required": true},
            "/home/dev"]}
    }));
    let got = refused(&m, &Grants::default());
    let flags: Vec<(&str, RequestStatus)> =
        got.iter().map(|(f, _, st)| (f.as_str(), *st)).collect();
    assert_eq!(
        flags,
        [
            (
                "--allow mount:/home/dev/.aws/credentials",
                RequestStatus::Refused
            ),
            (
                "--allow mount:/w/repo/${HOME}/.netrc",
                RequestStatus::Refused
            ),
            (
                "mount of the host home folder (or a folder holding it) `/home/dev`",
                RequestStatus::Forbidden
            ),
        ]
    );
    assert!(
        got.iter()
            .all(|(_, s, _)| s == "Compose service `db` (`env_file`)")
    );
}

#[test]
fn binds_are_judged_where_they_land() {
    let m = model(json!({
        "app": {"image": "a", "volumes": [
            {"type": "bind", "source": "/w/repo/../other", "target": "/o"}]},
        "db": {"image": "d", "volumes": [
            {"type": "bind", "source": "/run/docker.sock", "target": "/s"},
            {"type": "bind", "source": "/home/dev", "target": "/h"},
            {"type": "bind", "source": "/", "target": "/host"},
            {"type": "bind", "source": "/home/dev/cache", "target": "/c"},
            {"type": "volume", "source": "disguised", "target": "/d"}]}
    }));
    let mut m = m;
    m["volumes"] =
        json!({"disguised": {"driver_opts": {"type": "none", "o": "bind", "device": "/etc"}}});
    let got = refused(&m, &Grants::default());
    let seen: Vec<(String, &str)> = got
        .iter()
        .map(|(f, s, st)| {
            (
                f.clone(),
                if *st == RequestStatus::Forbidden {
                    "never"
                } else {
                    s.as_str()
                },
            )
        })
        .collect();
    assert!(
        seen.contains(&(
            "--allow mount:/w/other".into(),
            "Compose service `app` (`volumes`)"
        )),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(
            "mount of the container engine socket `/run/docker.sock`".into(),
            "never"
        )),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(
            "mount of the host home folder (or a folder holding it) `/home/dev`".into(),
            "never"
        )),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(
            "mount of the host home folder (or a folder holding it) `/`".into(),
            "never"
        )),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(
            "--allow mount:/home/dev/cache".into(),
            "Compose service `db` (`volumes`)"
        )),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(
            "--allow mount:/etc".into(),
            "Compose service `db` (`volumes`)"
        )),
        "{seen:?}"
    );
    // the engine socket and the home folder stay refused whatever is granted
    let grants = Grants::parse(&["mount:/", "mount:/home/dev", "mount:/run"]).unwrap();
    let err = judge_compose(&hardened(), &m, "app", &places(), &grants).unwrap_err();
    let left: Vec<_> = refused_requests(&err)
        .unwrap()
        .iter()
        .filter(|r| r.status != RequestStatus::Granted)
        .map(|r| r.permission.kind())
        .collect();
    assert_eq!(left, ["engineSocket", "hostHome", "hostHome"]);
}

/// Attack (spec-note 0601): a build context the engine would fetch on the host's
/// network (git or HTTP URLs, as Compose's model keeps them) is a request, never fetched
/// by default; its Dockerfile is the remote's, not a host path.
/// Compose keys that reach the host or run before devcell's checks: the engine's API
/// socket (never allowed), a provider (a host program), Compose's own lifecycle hooks, a
/// volume whose driver options mount a device or an overlay.
#[test]
fn api_sockets_providers_compose_hooks_and_driver_mounts_are_requests() {
    let mut m = model(json!({
        "app": {"image": "a",
                "post_start": [{"command": ["id"], "user": "root"}],
                "volumes": [{"type": "volume", "source": "hostview", "target": "/h"},
                            {"type": "volume", "source": "plain", "target": "/p"}]},
        "side": {"image": "b", "use_api_socket": true, "pre_stop": [{"command": ["x"]}]},
        "thing": {"provider": {"type": "/bin/sh", "options": {}}}
    }));
    m["volumes"] = json!({
        "hostview": {"driver_opts": {"type": "ext4", "device": "/dev/vda", "o": "rw"}},
        "plain": {}
    });
    let got = refused(&m, &Grants::default());
    let has = |service: &str, asked: &str| {
        got.iter()
            .any(|(g, source, _)| g.contains(asked) && source.contains(&format!("`{service}`")))
    };
    assert!(
        has("app", "--allow runtime-option:compose_hook=post_start"),
        "{got:?}"
    );
    assert!(has("app", "--allow mount:/dev/vda"), "{got:?}");
    assert!(!got.iter().any(|(g, _, _)| g.contains("plain")), "{got:?}");
    assert!(has("side", "use_api_socket"), "{got:?}");
    assert!(
        has("side", "--allow runtime-option:compose_hook=pre_stop"),
        "{got:?}"
    );
    assert!(has("thing", "--allow host-command"), "{got:?}");
    // the socket is never granted
    let all = Grants::parse(&[
        "runtime-option:compose_hook=post_start",
        "runtime-option:compose_hook=pre_stop",
        "host-command",
        "mount:/dev/vda",
    ])
    .unwrap();
    let left = refused(&m, &all);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].0.contains("use_api_socket"), "{left:?}");
}

#[test]
fn remote_build_contexts_are_requests() {
    let m = model(json!({
        "app": {"build": {"context": "https://git.example.test/o/r.git#main",
                          "dockerfile": "Dockerfile"}},
        "b": {"build": {"context": "git@git.example.test:o/r.git", "dockerfile": "/etc/x"}},
        "c": {"build": {"context": "git.example.test/o/r"}},
        "d": {"build": {"context": "/w/repo", "additional_contexts": {
            "img": "docker-image://alpine", "web": "https://git.example.test/o/s.git",
            "lay": "oci-layout:///srv/layout", "own": "oci-layout:///w/repo/l"}}}
    }));
    let got = refused(&m, &Grants::default());
    let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow build-context:git.example.test/o/r <- Compose service `c` (`build.context`)",
            "--allow build-context:git@git.example.test:o/r.git <- Compose service `b` (`build.context`)",
            "--allow build-context:https://git.example.test/o/r.git#main <- Compose service `app` (`build.context`)",
            "--allow build-context:https://git.example.test/o/s.git <- Compose service `d` (`build.additional_contexts`)",
            "--allow mount:/srv/layout <- Compose service `d` (`build.additional_contexts`)",
        ]
    );
    let grants = Grants::parse(&[
        "build-context:https://git.example.test/o/r.git#main",
        "build-context:git@git.example.test:o/r.git",
        "build-context:git.example.test/o/r",
        "build-context:https://git.example.test/o/s.git",
        "mount:/srv/layout",
    ])
    .unwrap();
    let judged = judge_compose(&hardened(), &m, "app", &places(), &grants).expect("granted");
    assert_eq!(
        judged
            .requests
            .iter()
            .filter(|r| r.permission.kind() == "remoteBuildContext")
            .count(),
        4
    );
}

#[test]
fn secrets_networks_labels_and_builds() {
    let mut m = model(json!({
        "app": {"image": "a", "labels": {"devcontainer.local_folder": "/x"},
                "build": {"context": "/srv/ctx", "dockerfile": "Dockerfile", "network": "host"}},
        "db": {"image": "d", "secrets": [{"source": "s"}, {"source": "t"}],
               "networks": {"ext": null, "default": null}}
    }));
    m["secrets"] = json!({"s": {"file": "/etc/shadow"}, "t": {"environment": "AWS_SECRET"}});
    m["networks"] =
        json!({"ext": {"name": "othernet", "external": true}, "default": {"name": "p_default"}});
    let got = refused(&m, &Grants::default());
    let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow env:AWS_SECRET <- Compose service `db` (`secrets`)",
            "--allow image-tag:a <- Compose service `app` (`build`)",
            "--allow mount:/etc/shadow <- Compose service `db` (`secrets`)",
            "--allow mount:/srv/ctx <- Compose service `app` (`build.context`)",
            "--allow mount:/srv/ctx/Dockerfile <- Compose service `app` (`build.dockerfile`)",
            "--allow network:host <- Compose service `app` (`build.network`)",
            "--allow network:othernet <- Compose service `db` (`networks`)",
            "identity label `devcontainer.local_folder` set by the repository <- Compose service `app` (`labels`)",
        ]
    );
}

/// Attack (spec-note 0400): a build's `image` or `build.tags` moves a tag another
/// workspace (or the engine's cache of a public image) names to the repository's build;
/// Compose's own `<project>-<service>` and an `image` without `build` are not requests.
#[test]
fn tags_a_compose_build_gives_its_image_are_requests() {
    let m = model(json!({
        "app": {"image": "postgres:16", "build": {"context": "/w/repo",
                "tags": ["p-app:v2", "victim-app"]}},
        "own": {"image": "p-own", "build": {"context": "/w/repo"}},
        "own2": {"image": "p-own2:latest", "build": {"context": "/w/repo"}},
        "plain": {"image": "postgres:16"},
        "untagged": {"build": {"context": "/w/repo"}}
    }));
    let got = refused(&m, &Grants::default());
    let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow image-tag:p-app:v2 <- Compose service `app` (`build`)",
            "--allow image-tag:postgres:16 <- Compose service `app` (`build`)",
            "--allow image-tag:victim-app <- Compose service `app` (`build`)",
        ]
    );
    let grants = Grants::parse(&[
        "image-tag:postgres:16",
        "image-tag:p-app:v2",
        "image-tag:victim-app",
    ])
    .unwrap();
    assert!(judge_compose(&hardened(), &m, "app", &places(), &grants).is_ok());
    let reference = judge_compose(
        &SecurityProfile::Reference,
        &m,
        "app",
        &places(),
        &Grants::default(),
    )
    .unwrap();
    assert!(
        reference
            .requests
            .iter()
            .all(|r| r.status == RequestStatus::AllowedByProfile)
    );
}

/// Attack (spec-note 0400): `ulimits` giving an unprivileged process real-time scheduling
/// or a raised priority, which the CPU limit does not bound.
#[test]
fn ulimits_beyond_the_cpu_limit_are_requests() {
    let m = model(json!({
        "app": {"image": "a", "ulimits": {"rtprio": 99, "nofile": {"soft": 1024, "hard": 4096}}},
        "db": {"image": "d", "ulimits": {"nice": {"soft": 0, "hard": 40}, "rtprio": 0,
               "core": -1}}
    }));
    let got = refused(&m, &Grants::default());
    let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow runtime-option:ulimit.nice=40 <- Compose service `db` (`ulimits`)",
            "--allow runtime-option:ulimit.rtprio=99 <- Compose service `app` (`ulimits`)",
        ]
    );
    let grants = Grants::parse(&[
        "runtime-option:ulimit.rtprio=99",
        "runtime-option:ulimit.nice=40",
    ])
    .unwrap();
    assert!(judge_compose(&hardened(), &m, "app", &places(), &grants).is_ok());
}

/// Attack (spec-note 0601): another project's volume or network named with `name:` (or
/// an external volume) is mounted or joined by Compose with a warning only.
#[test]
fn foreign_volumes_and_networks_are_requests() {
    let mut m = model(json!({
        "app": {"image": "a", "volumes": [
            {"type": "volume", "source": "data", "target": "/d"},
            {"type": "volume", "source": "stolen", "target": "/s"},
            {"type": "bind", "source": "/w/repo", "target": "/w"}]},
        "db": {"image": "d", "volumes": [{"type": "volume", "source": "ext", "target": "/e"}],
               "networks": {"other": null, "ext": null}},
        "host": {"image": "d", "network_mode": "host"}
    }));
    m["volumes"] = json!({"data": {"name": "p_data"}, "stolen": {"name": "victim_db"},
                          "ext": {"name": "shared", "external": true}});
    m["networks"] = json!({"default": {"name": "victim_default"}, "other": {"name": "p_other"},
                           "ext": {"name": "victim_default", "external": true}});
    let (mut volumes, mut networks) = resource_names(&m);
    volumes.sort();
    networks.sort();
    assert_eq!(volumes, ["p_data", "shared", "victim_db"]);
    assert_eq!(networks, ["p_other", "victim_default", "victim_default"]);
    let victim = || Foreign::OtherProject(Some("victim".into()));
    let foreign = ForeignResources {
        volumes: [
            ("victim_db".to_string(), victim()),
            ("shared".to_string(), Foreign::OtherProject(None)),
        ]
        .into(),
        networks: [("victim_default".to_string(), victim())].into(),
    };
    let got = foreign_resource_requests(&hardened(), &m, &foreign, &Grants::default());
    let mut flags: Vec<String> = got
        .iter()
        .map(|r| {
            assert_eq!(r.status, RequestStatus::Refused);
            format!("{} <- {}", r.permission.grant_flag().unwrap(), r.source)
        })
        .collect();
    flags.sort();
    assert_eq!(
        flags,
        [
            "--allow network:victim_default <- Compose service `app` (`networks; of the Compose project `victim``)",
            "--allow volume:shared <- Compose service `db` (`volumes; not made by Compose for this project`)",
            "--allow volume:victim_db <- Compose service `app` (`volumes; of the Compose project `victim``)",
        ]
    );
    let grants = Grants::parse(&[
        "volume:victim_db",
        "volume:shared",
        "network:victim_default",
    ])
    .unwrap();
    assert!(
        foreign_resource_requests(&hardened(), &m, &foreign, &grants)
            .iter()
            .all(|r| r.status == RequestStatus::Granted)
    );
    assert!(
        foreign_resource_requests(&hardened(), &m, &ForeignResources::default(), &grants)
            .is_empty()
    );
}

#[test]
fn sidecar_limits_are_the_lower_and_follow_deploy_spelling() {
    let limits = ProfileLimits::default();
    let own_higher = json!({"pids_limit": 99999, "cpus": 8, "mem_limit": "99999999999"});
    let a = sidecar_additions(&own_higher, &limits);
    assert_eq!(a["pids_limit"], 1024);
    assert_eq!(a["cpus"], 2.0);
    assert_eq!(a["mem_limit"], 4_i64 << 30);
    let own_deploy =
        json!({"deploy": {"resources": {"limits": {"memory": "1073741824", "cpus": 0.5}}}});
    let b = sidecar_additions(&own_deploy, &limits);
    assert_eq!(b["deploy"]["resources"]["limits"]["memory"], 1_073_741_824);
    assert_eq!(b["deploy"]["resources"]["limits"]["cpus"], 0.5);
    assert!(b.get("mem_limit").is_none() && b.get("cpus").is_none());
    assert_eq!(b["pids_limit"], 1024);
}

#[test]
fn reference_allows_everything_and_adds_nothing() {
    let m = model(json!({
        "app": {"image": "a"},
        "db": {"image": "d", "privileged": true, "volumes": [
            {"type": "bind", "source": "/var/run/docker.sock", "target": "/s"}]}
    }));
    let j = judge_compose(
        &SecurityProfile::Reference,
        &m,
        "app",
        &places(),
        &Grants::default(),
    )
    .unwrap();
    assert_eq!(j.requests.len(), 2);
    assert!(
        j.requests
            .iter()
            .all(|r| r.status == RequestStatus::AllowedByProfile)
    );
    assert!(j.sidecars.is_empty());
}

/// Attack G6 (spec-note 0613): under `hardened` a volume or network of this project's name is
/// this workspace's only with devcell's workspace label for it; another workspace's (same
/// folder name, or files naming its project) and an unlabelled one (made by hand, or by a
/// devcell before the label) are requests naming whose they are. Under `reference` Compose's
/// project label alone decides. The override labels the model's own volumes and networks,
/// not `external` ones.
#[test]
fn a_project_volume_is_this_workspaces_only_with_its_workspace_label() {
    use crate::names::VOLUME_WORKSPACE_LABEL;
    let ws = Path::new("/tmp/pb/ws");
    let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let project = "com.docker.compose.project";
    let ours = labels(&[
        (project, "ws_devcontainer"),
        (VOLUME_WORKSPACE_LABEL, "/tmp/pb/ws"),
    ]);
    let victims = labels(&[
        (project, "ws_devcontainer"),
        (VOLUME_WORKSPACE_LABEL, "/tmp/pa/ws"),
    ]);
    let legacy = labels(&[(project, "ws_devcontainer")]);
    let other = labels(&[
        (project, "api_devcontainer"),
        (VOLUME_WORKSPACE_LABEL, "/tmp/pb/ws"),
    ]);
    assert_eq!(foreign_of(&ours, "ws_devcontainer", Some(ws)), None);
    assert_eq!(
        foreign_of(&victims, "ws_devcontainer", Some(ws)),
        Some(Foreign::OtherWorkspace("/tmp/pa/ws".into()))
    );
    assert_eq!(
        foreign_of(&legacy, "ws_devcontainer", Some(ws)),
        Some(Foreign::Unlabelled)
    );
    assert_eq!(
        foreign_of(&other, "ws_devcontainer", Some(ws)),
        Some(Foreign::OtherProject(Some("api_devcontainer".into())))
    );
    assert_eq!(
        foreign_of(&labels(&[]), "ws_devcontainer", Some(ws)),
        Some(Foreign::OtherProject(None))
    );
    // `reference`: the project label alone, as the reference CLI and Compose
    assert_eq!(foreign_of(&victims, "ws_devcontainer", None), None);
    assert_eq!(foreign_of(&legacy, "ws_devcontainer", None), None);

    let mut m = model(json!({
        "app": {"image": "a", "volumes": [{"type": "volume", "source": "db", "target": "/db"}]}
    }));
    m["volumes"] = json!({"db": {"name": "ws_devcontainer_db"},
                          "ext": {"name": "shared", "external": true}});
    m["networks"] = json!({"default": {"name": "ws_devcontainer_default"}});
    let foreign = ForeignResources {
        volumes: [(
            "ws_devcontainer_db".to_string(),
            Foreign::OtherWorkspace("/tmp/pa/ws".into()),
        )]
        .into(),
        networks: [("ws_devcontainer_default".to_string(), Foreign::Unlabelled)].into(),
    };
    let got = foreign_resource_requests(&hardened(), &m, &foreign, &Grants::default());
    let text: Vec<String> = got.iter().map(|r| r.to_string()).collect();
    assert_eq!(got.len(), 2, "{text:?}");
    assert!(got.iter().all(|r| r.status == RequestStatus::Refused));
    assert!(
        text[0].contains("ws_devcontainer_db")
            && text[0].contains("another workspace, `/tmp/pa/ws`")
            && text[0].contains("--allow volume:ws_devcontainer_db"),
        "{text:?}"
    );
    assert!(
        text[1].contains("--allow network:ws_devcontainer_default")
            && text[1].contains("grant it, or remove it"),
        "{text:?}"
    );

    let added = workspace_labels(&m, ws);
    assert_eq!(
        added,
        json!({"volumes": {"db": {"labels": {VOLUME_WORKSPACE_LABEL: "/tmp/pb/ws"}}},
               "networks": {"default": {"labels": {VOLUME_WORKSPACE_LABEL: "/tmp/pb/ws"}}}})
    );
}

/// Attack G7: a standing `host-command:sha256:` grant of a Compose provider hashes the program
/// with the canonical JSON of its `options` (Compose's arguments to it), shown in the request:
/// the same options in another key order are still granted, changed options are asked again.
#[test]
fn a_provider_grant_is_bound_to_its_options() {
    let with = |options: Value| {
        model(json!({
            "app": {"image": "a"},
            "ai": {"provider": {"type": "model-runner", "options": options}}
        }))
    };
    let first = with(json!({"model": "ai/small", "flags": ["--a", "--b"]}));
    let asked = refused(&first, &Grants::default());
    assert_eq!(asked.len(), 1, "{asked:?}");
    let (flag, _, status) = &asked[0];
    assert_eq!(*status, RequestStatus::Refused);
    let err = judge_compose(&hardened(), &first, "app", &places(), &Grants::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(r#"compose provider `model-runner` with options {"flags":["--a","--b"],"model":"ai/small"}"#),
        "{err}"
    );
    let grants = Grants::parse(&[flag.trim_start_matches("--allow ")]).unwrap();
    judge_compose(&hardened(), &first, "app", &places(), &grants).unwrap();
    let reordered = with(json!({"flags": ["--a", "--b"], "model": "ai/small"}));
    judge_compose(&hardened(), &reordered, "app", &places(), &grants).unwrap();
    for changed in [
        json!({"model": "ai/small", "flags": ["--a", "--b", "--c"]}),
        json!({"model": "ai/other", "flags": ["--a", "--b"]}),
        json!({"flags": ["--b", "--a"], "model": "ai/small"}),
        json!(null),
    ] {
        let asked = refused(&with(changed.clone()), &grants);
        assert_eq!(asked.len(), 1, "{changed}: {asked:?}");
        assert_ne!(&asked[0].0, flag, "{changed}");
    }
}

/// Attack G9: a build's base image with `ONBUILD` triggers runs them (a `RUN
/// --mount=type=cache` shared with every build on the engine among them) though the
/// Dockerfile does not show them: every stage's base is listed (build arguments and `ARG`
/// defaults expanded, `scratch` and earlier stages left out) for the caller to inspect, and
/// one with triggers is a request naming the service, the image and its triggers. A `#
/// syntax=` frontend (or `BUILDKIT_SYNTAX`) is a request too.
#[test]
fn a_base_image_with_onbuild_triggers_is_a_request() {
    let args = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let text = "ARG BASE=127.0.0.1:5000/attack/onbuild:2\nARG TAG\n\
                FROM --platform=$BUILDPLATFORM golang:1 AS build\nRUN true\n\
                FROM ${BASE} as Final\nFROM build\nFROM scratch\nFROM final\n\
                FROM img:${TAG}\nFROM \\\n  alpine:3\n";
    assert_eq!(
        base_images(text, &args(&[])),
        ["golang:1", "127.0.0.1:5000/attack/onbuild:2", "alpine:3"]
    );
    assert_eq!(
        base_images(text, &args(&[("BASE", "mine:1"), ("TAG", "7")])),
        ["golang:1", "mine:1", "img:7", "alpine:3"]
    );

    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("Dockerfile"),
        "FROM 127.0.0.1:5000/attack/onbuild:2\n",
    )
    .unwrap();
    let context = tmp.path().to_str().unwrap();
    let m = model(json!({
        "app": {"build": {"context": context, "args": {"WS": "oa"}}},
        "side": {"build": {"context": context, "dockerfile_inline": "FROM scratch\n"}},
        "db": {"image": "d"}
    }));
    assert_eq!(
        build_bases(&m),
        [(
            "app".to_string(),
            vec!["127.0.0.1:5000/attack/onbuild:2".to_string()]
        )]
    );
    let triggered = [(
        "app".to_string(),
        "127.0.0.1:5000/attack/onbuild:2".to_string(),
        vec!["RUN --mount=type=cache,id=x,target=/c cat /c/secret".to_string()],
    )];
    let got = onbuild_requests(&hardened(), &Grants::default(), &triggered);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].status, RequestStatus::Refused);
    assert_eq!(
        got[0].permission.grant_flag().unwrap(),
        "--allow runtime-option:build_onbuild=app:127.0.0.1:5000/attack/onbuild:2"
    );
    assert!(
        got[0].to_string().contains("--mount=type=cache"),
        "{}",
        got[0]
    );
    let grants =
        Grants::parse(&["runtime-option:build_onbuild=app:127.0.0.1:5000/attack/onbuild:2"])
            .unwrap();
    assert_eq!(
        onbuild_requests(&hardened(), &grants, &triggered)[0].status,
        RequestStatus::Granted
    );
    assert_eq!(
        onbuild_requests(&SecurityProfile::Reference, &Grants::default(), &triggered)[0].status,
        RequestStatus::AllowedByProfile
    );

    // a frontend the repository names
    for build in [
        json!({"dockerfile_inline": "# syntax=evil/frontend:1\nFROM scratch\n"}),
        json!({"dockerfile_inline": "FROM scratch\n", "args": {"BUILDKIT_SYNTAX": "evil/frontend:1"}}),
    ] {
        let m = model(json!({"app": {"image": "a"}, "b": {"build": build}}));
        let asked = refused(&m, &Grants::default());
        assert!(
            asked
                .iter()
                .any(|(flag, _, _)| flag
                    == "--allow runtime-option:build_frontend=b:evil/frontend:1"),
            "{asked:?}"
        );
    }
    // a `# syntax=` after the first instruction is a comment
    let m = model(json!({"app": {"image": "a"},
        "b": {"build": {"dockerfile_inline": "FROM scratch\n# syntax=evil/frontend:1\n"}}}));
    judge_compose(&hardened(), &m, "app", &places(), &Grants::default()).unwrap();
}

/// Attack (H6 of the 18th review): `build.entitlements: ["network.host"]` with a Dockerfile
/// `RUN --network=host` runs a build step in the host's network namespace under a handoff's
/// network `none`, and `security.insecure` a privileged step: the same requests as
/// `build.network: host` and `privileged`; any other entitlement a request naming it; the
/// Dockerfile's `RUN` flags (inline or in the context) the same.
#[test]
fn build_entitlements_are_requests() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM a\nRUN --security=insecure true\n",
    )
    .unwrap();
    let ctx = dir.path().to_string_lossy().into_owned();
    let m = model(json!({
        "app": {"image": "a"},
        "web": {"build": {"context": "/w/repo",
            "entitlements": ["network.host", "security.insecure", "device.gpu"],
            "dockerfile_inline": "FROM a\nRUN --network=host wget -qO- http://127.0.0.1:5000/v2/_catalog\n"}},
        "ctx": {"build": {"context": ctx}},
        "same": {"build": {"context": "/w/repo", "network": "host", "privileged": true,
            "dockerfile_inline": "FROM a\nRUN echo --network=host\n"}}
    }));
    let mount = format!("--allow mount:{ctx}");
    let mut got: Vec<(String, String)> = refused(&m, &Grants::default())
        .into_iter()
        .filter(|(flag, _, _)| *flag != mount)
        .map(|(flag, source, _)| (flag, source))
        .collect();
    got.sort();
    let want = [
        (
            "--allow network:host",
            "Compose service `same` (`build.network`)",
        ),
        (
            "--allow network:host",
            "Compose service `web` (`build.dockerfile: RUN --network=host`)",
        ),
        (
            "--allow network:host",
            "Compose service `web` (`build.entitlements`)",
        ),
        (
            "--allow privileged",
            "Compose service `ctx` (`build.dockerfile: RUN --security=insecure`)",
        ),
        (
            "--allow privileged",
            "Compose service `same` (`build.privileged`)",
        ),
        (
            "--allow privileged",
            "Compose service `web` (`build.entitlements`)",
        ),
        (
            "--allow runtime-option:build_entitlement=web:device.gpu",
            "Compose service `web` (`build.entitlements`)",
        ),
    ];
    assert_eq!(got, want.map(|(f, s)| (f.to_string(), s.to_string())),);
    // the grants that `build.network: host` and `privileged` take grant them too
    judged_with_flags(
        &m,
        &[
            "network:host",
            "privileged",
            "runtime-option:build_entitlement=web:device.gpu",
            &mount,
        ],
    );
    // `reference` asks nothing of them
    judge_compose(
        &SecurityProfile::Reference,
        &m,
        "app",
        &places(),
        &Grants::default(),
    )
    .unwrap();
}

/// Attack (H5 of the 18th review): Compose keys were judged by a deny-list, so a key devcell
/// did not know (`annotations`, which OCI runtimes act on; `storage_opt`; `blkio_config`) was
/// passed to Compose as written. Now every service key not on the allow-list is a request
/// naming the service and key, refused under `hardened`, allowed under `reference`; a bind's
/// shared propagation is one too. Top-level keys are read from the files.
#[test]
fn an_unknown_service_key_is_a_request() {
    let m = model(json!({
        "app": {"image": "a", "command": null, "entrypoint": null, "x-note": 1,
                "annotations": {"run.oci.keep_original_groups": "1"},
                "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w",
                             "bind": {"propagation": "rshared"}},
                            {"type": "bind", "source": "/w/repo/a", "target": "/a",
                             "bind": {"propagation": "rprivate"}}]},
        "db": {"image": "d", "storage_opt": {"size": "1G"}, "blkio_config": {"weight": 300},
               "some_future_key": true, "healthcheck": {"test": ["CMD", "true"]}}
    }));
    let mut got: Vec<(String, String)> = refused(&m, &Grants::default())
        .into_iter()
        .map(|(flag, source, _)| (flag, source))
        .collect();
    got.sort();
    let want = [
        (
            "--allow runtime-option:bind_propagation=app:rshared",
            "Compose service `app` (`volumes`)",
        ),
        (
            "--allow runtime-option:compose_key=app.annotations",
            "Compose service `app` (`annotations`)",
        ),
        (
            "--allow runtime-option:compose_key=db.blkio_config",
            "Compose service `db` (`blkio_config`)",
        ),
        (
            "--allow runtime-option:compose_key=db.some_future_key",
            "Compose service `db` (`some_future_key`)",
        ),
        (
            "--allow runtime-option:compose_key=db.storage_opt",
            "Compose service `db` (`storage_opt`)",
        ),
    ];
    assert_eq!(got, want.map(|(f, s)| (f.to_string(), s.to_string())));
    let flags: Vec<&str> = want.iter().map(|(f, _)| *f).collect();
    judged_with_flags(&m, &flags);
    judge_compose(
        &SecurityProfile::Reference,
        &m,
        "app",
        &places(),
        &Grants::default(),
    )
    .unwrap();
    // the top level of a file, as read before Compose resolves it
    let doc = json!({"version": "3", "name": "p", "services": {}, "volumes": {}, "x-a": 1,
                     "secrets": {}, "configs": {}, "networks": {}, "include": [],
                     "future": {}});
    let top: Vec<String> = top_level_requests(&doc, "compose.yml")
        .into_iter()
        .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
        .collect();
    assert_eq!(
        top,
        ["--allow runtime-option:compose_key=future <- Compose file `compose.yml` (`future`)"]
    );
    // every key devcell judges elsewhere is on the list
    for key in [
        "build",
        "cap_add",
        "devices",
        "volumes",
        "provider",
        "use_api_socket",
        "models",
        "logging",
        "group_add",
        "user",
        "labels",
        "ports",
        "networks",
        "network_mode",
    ] {
        assert!(SERVICE_KEYS.contains(&key), "{key}");
    }
}

/// Attack (H5 of the 18th review): `models:` makes Compose start the host's Model plugin,
/// which pulls a model the file names (any registry, any size) over the host's network and
/// runs a runner, under network `none` and unasked. The service's `models` and each
/// top-level model (read from the file: `docker compose config` drops them) are
/// `host-command` requests, like a `provider`, bound to what they name.
#[test]
fn models_are_a_host_command_request() {
    let m = model(json!({
        "app": {"image": "a"},
        "a": {"image": "b", "models": {"llm": null}}
    }));
    let got = refused(&m, &Grants::default());
    assert_eq!(got.len(), 1, "{got:?}");
    let (flag, source, status) = &got[0];
    assert!(flag.starts_with("--allow host-command:sha256:"), "{flag}");
    assert_eq!(source, "Compose service `a` (`models`)");
    assert_eq!(*status, RequestStatus::Refused);
    let request = judge_compose(&hardened(), &m, "app", &places(), &Grants::default())
        .unwrap_err()
        .to_string();
    assert!(request.contains("llm"), "{request}");
    judged_with_flags(&m, &[flag.as_str()]);

    let doc = json!({"services": {"a": {"image": "b", "models": ["llm"]}},
                     "models": {"llm": {"model": "ai/smollm2"}}});
    let top = top_level_requests(&doc, "compose.yml");
    assert_eq!(top.len(), 1);
    let (permission, source) = &top[0];
    assert!(matches!(permission, Permission::HostCommand(c) if c.command.contains("ai/smollm2")));
    assert_eq!(
        source.to_string(),
        "Compose file `compose.yml` (`models.llm`)"
    );
    // another model is another command: a grant of the first does not cover it
    let other = json!({"models": {"llm": {"model": "hf.co/evil/huge"}}});
    assert_ne!(top_level_requests(&other, "compose.yml")[0].0, *permission);
}
