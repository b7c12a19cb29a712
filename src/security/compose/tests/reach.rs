//! Resources that reach past the project (spec-note 0612): networks, links, replicas, logging, groups.

use super::*;

/// The `reach_requests` of every service of `m` under `routes`, as `flag <- source` lines,
/// sorted.
fn reach_lines(m: &Value, routes: &[(u32, u32)]) -> Vec<String> {
    let mut asked = Vec::new();
    for (name, service) in services_of(m) {
        reach_requests(m, name, service, routes, &mut asked);
    }
    let mut got: Vec<String> = asked
        .iter()
        .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
        .collect();
    got.sort();
    got
}

/// Each resource that reaches past the project is a `runtime-option` request naming the
/// service and property, granted by its flag; a plain bridge network with a free subnet,
/// one replica and an ordinary image are none.
#[test]
fn resources_reaching_past_the_project_are_requests() {
    let (_dir, ctx) = build_context("FROM a\nRUN --mount=type=cache,target=/root/.cache true\n");
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
    let got = reach_lines(&m, &routes);
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
    let got = reach_lines(&m, &[]);
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
