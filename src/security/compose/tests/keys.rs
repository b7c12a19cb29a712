//! Keys: the allow-list, host programs (providers, models, hooks), the API socket and the profiles.

use super::*;

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
    assert_eq!(
        refused_lines(&m),
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

#[test]
fn reference_allows_everything_and_adds_nothing() {
    let m = model(json!({
        "app": {"image": "a"},
        "db": {"image": "d", "privileged": true, "volumes": [
            {"type": "bind", "source": "/var/run/docker.sock", "target": "/s"}]}
    }));
    let j = judged_reference(&m);
    assert_eq!(j.requests.len(), 2);
    assert!(
        j.requests
            .iter()
            .all(|r| r.status == RequestStatus::AllowedByProfile)
    );
    assert!(j.sidecars.is_empty());
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
    let got = refused_sorted(&m);
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
    judged_reference(&m);
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

/// Attack (issue 25, left by session 19): the allow-list covered service and top-level keys
/// only, so a sub-key of an understood key (`build.ulimits`, a bind's `selinux: Z`, which
/// relabels the host folder; a network's `ipam.options`; `deploy.resources.limits.future`) went
/// to Compose as written. Each key below `build`, `deploy`, `develop`, `healthcheck`,
/// `logging`, a service network, a long-syntax volume, and below a top-level network, volume,
/// secret or config is now judged by its own list: any other is
/// `compose_key=<service>.<key.path>` (`compose_key=<key.path>` at the top level), refused
/// under `hardened`, allowed under `reference`; `x-…` extensions and the keys Compose itself
/// writes ask nothing.
#[test]
fn an_unknown_sub_key_of_an_understood_key_is_a_request() {
    let ordinary = model(json!({
        "app": {"build": {"context": "/w/repo", "dockerfile": "Dockerfile", "args": {"A": "1"},
                          "target": "dev", "x-note": 1, "labels": {"l": "v"}},
                "deploy": {"resources": {"limits": {"cpus": "1", "memory": "1g", "pids": 10},
                                         "reservations": {"memory": "1m"}},
                           "restart_policy": {"condition": "none"}, "labels": {"a": "b"}},
                "develop": {"watch": [{"path": "./src", "action": "sync", "target": "/src"}]},
                "healthcheck": {"test": ["CMD", "true"], "interval": "5s", "retries": 3},
                "logging": {"driver": "json-file", "options": {"max-size": "1m"}},
                "networks": {"default": null, "back": {"aliases": ["x"], "priority": 1}},
                "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w",
                             "bind": {"create_host_path": true}},
                            {"type": "volume", "source": "v", "target": "/v",
                             "volume": {"nocopy": true}},
                            {"type": "tmpfs", "target": "/t", "tmpfs": {"size": 1024}}]}
    }));
    judged_with_flags(&ordinary, &[]);
    let m = model(json!({
        "app": {"build": {"context": "/w/repo", "ulimits": {"memlock": -1}, "isolation": "x"},
                "deploy": {"resources": {"limits": {"future": 1}}, "future": {}},
                "develop": {"watch": [{"path": "./src", "action": "sync", "future": 1}]},
                "healthcheck": {"test": ["CMD", "true"], "future": 1},
                "logging": {"driver": "json-file", "future": 1},
                "networks": {"default": {"driver_opts": {"k": "v"}}},
                "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w",
                             "bind": {"selinux": "Z"}},
                            {"type": "volume", "source": "v", "target": "/v",
                             "volume": {"subpath": "a"}}]}
    }));
    let got = refused_sorted(&m);
    let want = [
        "build.isolation",
        "build.ulimits",
        "deploy.future",
        "deploy.resources.limits.future",
        "develop.watch.0.future",
        "healthcheck.future",
        "logging.future",
        "networks.default.driver_opts",
        "volumes.0.bind.selinux",
        "volumes.1.volume.subpath",
    ]
    .map(|path| {
        (
            format!("--allow runtime-option:compose_key=app.{path}"),
            format!("Compose service `app` (`{path}`)"),
        )
    });
    let mut want = want.to_vec();
    want.sort();
    assert_eq!(got, want);
    let flags: Vec<&str> = want.iter().map(|(f, _)| f.as_str()).collect();
    judged_with_flags(&m, &flags);
    judged_reference(&m);
    // the top level of a file: networks, volumes, secrets and configs by their own lists
    let doc = json!({
        "services": {"app": {"image": "a", "future": 1}},
        "networks": {"n": {"driver": "bridge", "ipam": {"config": [{"subnet": "10.9.0.0/24",
                                                                     "future": 1}],
                                                         "options": {"o": "v"}},
                           "x-note": 1},
                     "plain": null},
        "volumes": {"v": {"driver": "local", "driver_opts": {"type": "tmpfs"}, "future": 1}},
        "secrets": {"s": {"file": "./s", "future": 1}},
        "configs": {"c": {"content": "x", "future": 1}},
        "name": "p"
    });
    let top: Vec<String> = top_level_requests(&doc, "compose.yml")
        .into_iter()
        .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
        .collect();
    let want: Vec<String> = [
        "networks.n.ipam.config.0.future",
        "networks.n.ipam.options",
        "volumes.v.future",
        "secrets.s.future",
        "configs.c.future",
    ]
    .iter()
    .map(|path| {
        format!(
            "--allow runtime-option:compose_key={path} <- Compose file `compose.yml` (`{path}`)"
        )
    })
    .collect();
    let mut top_sorted = top.clone();
    top_sorted.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(top_sorted, want_sorted);
}
