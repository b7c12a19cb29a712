//! Host paths: binds, bind-backed volumes, `env_file`, and volumes or networks of another project or workspace.

use super::*;

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

/// Attack 31, M1: a bind devcell gives the primary through its override file
/// (devcontainer.json `mounts`) is swappable by a sidecar that starts first and writes the
/// folder above it; the primary as the writer through such a bind makes a later sidecar's bind
/// a request too. Only the pairs the added binds make come back; a granted one is granted.
#[test]
fn binds_the_override_adds_to_the_primary_count_for_the_swap_rule() {
    let ws = "/nonexistent/devcell-ws";
    let data = format!("{ws}/data");
    let bind = |source: &str| json!({"type": "bind", "source": source, "target": "/x"});
    let sidecar_first = model(json!({
        "app": {"depends_on": {"side": {"condition": "service_healthy"}}},
        "side": {"volumes": [bind(ws)]}
    }));
    let added = primary_bind_swaps(
        &hardened(),
        &sidecar_first,
        "app",
        &[(data.clone(), false)],
        &Grants::default(),
    );
    assert_eq!(added.len(), 1, "{added:?}");
    assert_eq!(added[0].permission, Permission::Mount(data.clone()));
    assert_eq!(added[0].status, RequestStatus::Refused);
    // the writer's bind comes from the override
    let primary_writes = model(json!({
        "app": {},
        "side": {"volumes": [bind(&data)], "depends_on": {"app": {"condition": "service_healthy"}}}
    }));
    let added = primary_bind_swaps(
        &hardened(),
        &primary_writes,
        "app",
        &[(ws.to_string(), false)],
        &Grants::default(),
    );
    assert_eq!(added.len(), 1, "{added:?}");
    // the model's own pairs were judged with it; a read-only bind under no writer is none
    let judged = model(json!({
        "app": {"volumes": [bind(&data)], "depends_on": {"side": {}}},
        "side": {"volumes": [bind(ws)]}
    }));
    assert!(primary_bind_swaps(&hardened(), &judged, "app", &[], &Grants::default()).is_empty());
    let lone = model(json!({"app": {}}));
    assert!(
        primary_bind_swaps(
            &hardened(),
            &lone,
            "app",
            &[(data.clone(), true)],
            &Grants::default()
        )
        .is_empty()
    );
    let grants = Grants::parse(&[format!("mount:{data}")]).unwrap();
    let granted = primary_bind_swaps(
        &hardened(),
        &sidecar_first,
        "app",
        &[(data, false)],
        &grants,
    );
    assert_eq!(granted[0].status, RequestStatus::Granted);
}
