//! Sidecars: their user, capabilities, shared namespaces, restart policy and limits.

use super::*;

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

/// Attack K14 (spec-note 0425): a `stop_grace_period` past the bound (or one that cannot be
/// read) is the bound in the override, for the primary and every sidecar, under both
/// profiles; a shorter one stays the repository's.
#[test]
fn a_stop_grace_period_past_the_bound_is_clamped_in_the_override() {
    assert_eq!(
        super::super::fields::go_duration_seconds("1000h0m0s"),
        Some(3_600_000.0)
    );
    assert_eq!(
        super::super::fields::go_duration_seconds("1m30s"),
        Some(90.0)
    );
    assert_eq!(
        super::super::fields::go_duration_seconds("500ms"),
        Some(0.5)
    );
    assert_eq!(super::super::fields::go_duration_seconds("1.5s"), Some(1.5));
    assert_eq!(super::super::fields::go_duration_seconds("3x"), None);
    assert_eq!(super::super::fields::go_duration_seconds(""), None);
    let m = model(json!({
        "app": {"image": "a", "stop_grace_period": "1000h0m0s"},
        "side": {"image": "s", "stop_grace_period": "2562047h47m16.854775807s"},
        "db": {"image": "s", "stop_grace_period": "30s"},
        "odd": {"image": "s", "stop_grace_period": "forever"},
        "plain": {"image": "s"}
    }));
    for profile in [hardened(), SecurityProfile::Reference] {
        let j = judge_compose(&profile, &m, "app", &places(), &Grants::default()).unwrap();
        let mut file = crate::engine::compose::override_file(
            "app",
            &crate::engine::ContainerSpec::default(),
            &j.sidecars,
            false,
        );
        bound_stop_grace(&m, &mut file);
        let s = &file["services"];
        assert_eq!(s["app"]["stop_grace_period"], "60s", "{file}");
        assert_eq!(s["side"]["stop_grace_period"], "60s", "{file}");
        assert_eq!(s["odd"]["stop_grace_period"], "60s", "{file}");
        assert!(s["db"].get("stop_grace_period").is_none(), "{file}");
        assert!(s["plain"].get("stop_grace_period").is_none(), "{file}");
    }
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
    let reference = judged_reference(&m);
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
        // both start after `backed`, whose folder is inside theirs (no swap: spec-note 0672)
        "app": {"image": "a", "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}],
                "depends_on": {"backed": {"condition": "service_started"}}},
        "writer": {"image": "w", "cap_add": ["chown"],
                   "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}],
                   "depends_on": {"backed": {"condition": "service_started"}}},
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
    let reference = judged_reference(&m);
    assert!(reference.sidecars.is_empty());
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

/// Attack (spec-note 0400): `ulimits` giving an unprivileged process real-time scheduling
/// or a raised priority, which the CPU limit does not bound.
#[test]
fn ulimits_beyond_the_cpu_limit_are_requests() {
    let m = model(json!({
        "app": {"image": "a", "ulimits": {"rtprio": 99, "nofile": {"soft": 1024, "hard": 4096}}},
        "db": {"image": "d", "ulimits": {"nice": {"soft": 0, "hard": 40}, "rtprio": 0,
               "core": -1}}
    }));
    assert_eq!(
        refused_lines(&m),
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
