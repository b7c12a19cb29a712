use super::*;

fn fields() -> KeyFields {
    KeyFields {
        workspace: "/w".into(),
        configuration: "sha256:aa".into(),
        image: "busybox".into(),
        features: vec!["ghcr.io/x/y:1".into()],
        profile: "hardened".into(),
        grants: vec!["cap:NET_ADMIN".into()],
        network: "none".into(),
        egress: Vec::new(),
        limits: "pids 512, memory 1 B, cpus 1".into(),
        mounts: vec![
            "/w:/workspace:rw".into(),
            "/s/1:/run/devcell/git/1:rw".into(),
        ],
    }
}

fn request(cleanup: Cleanup) -> GroupRequest {
    GroupRequest {
        name: GroupName::try_from("g1".to_string()).unwrap(),
        cleanup,
    }
}

/// Every process is alive but pid 99 (a killed devcell).
fn alive(pid: u32, _: Option<u64>) -> bool {
    pid != 99
}

fn holding(container: Option<&str>, cleanup: Cleanup, pids: &[u32]) -> GroupRecord {
    let key = GroupKey::from_fields(fields());
    let mut record = None;
    for &pid in pids {
        join(
            &mut record,
            &request(cleanup),
            Path::new("/w"),
            &key,
            (pid, None),
            &alive,
        );
    }
    let mut r = record.unwrap_or_else(|| GroupRecord {
        schema_version: SCHEMA_VERSION,
        name: request(cleanup).name,
        workspace: "/w".into(),
        cleanup,
        key_sha256: key.sha256(),
        key,
        container_id: None,
        members: Vec::new(),
    });
    r.container_id = container.map(str::to_string);
    r
}

/// One change of a key's fields.
type Change = fn(&mut KeyFields);

#[test]
fn each_field_changed_gives_exactly_its_difference() {
    let base = GroupKey::from_fields(fields());
    assert!(differences(&base, &base).is_empty());
    // the order of a list does not matter
    let mut reordered = fields();
    reordered.mounts.reverse();
    assert_eq!(
        differences(&base, &GroupKey::from_fields(reordered)),
        vec![]
    );
    let changes: Vec<(&str, Change)> = vec![
        ("workspace", |f| f.workspace = "/v".into()),
        ("configuration", |f| f.configuration = "sha256:bb".into()),
        ("image", |f| f.image = "alpine".into()),
        ("features", |f| f.features.clear()),
        ("profile", |f| f.profile = "reference".into()),
        ("grants", |f| f.grants.push("privileged".into())),
        ("network", |f| f.network = "default".into()),
        ("egress", |f| f.egress.push("example.test".into())),
        ("limits", |f| f.limits = "none".into()),
        ("mounts", |f| {
            f.mounts.push("/h/.codex:/home/.codex:ro".into())
        }),
    ];
    assert_eq!(changes.len(), base.0.len(), "every field is tried");
    for (field, change) in changes {
        let mut f = fields();
        change(&mut f);
        let d = differences(&base, &GroupKey::from_fields(f));
        assert_eq!(d.len(), 1, "{field}: {d:?}");
        assert_eq!(d[0].field, field);
        assert_ne!(d[0].group, d[0].handoff);
        assert_ne!(
            base.sha256(),
            GroupKey::from_fields({
                let mut f = fields();
                change(&mut f);
                f
            })
            .sha256(),
            "{field}"
        );
    }
    let mut f = fields();
    f.network = "default".into();
    let d = differences(&base, &GroupKey::from_fields(f));
    assert_eq!(d[0].to_string(), "network: group none, handoff default");
}

#[test]
fn a_group_with_a_container_or_a_live_member_admits_only_its_key_and_policy() {
    let key = GroupKey::from_fields(fields());
    let r = holding(Some("c1"), Cleanup::OnExit, &[10]);
    // the same key, the group's container: shared
    admit(
        Some(&r),
        &request(Cleanup::OnExit),
        &key,
        Some("c1"),
        &alive,
    )
    .unwrap();
    // another network: refused, the difference named
    let mut f = fields();
    f.network = "default".into();
    let e = admit(
        Some(&r),
        &request(Cleanup::OnExit),
        &GroupKey::from_fields(f),
        Some("c1"),
        &alive,
    )
    .unwrap_err();
    assert!(
        matches!(&e, GroupError::Differs { differences, .. } if differences.len() == 1 && differences[0].field == "network"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("network: group none, handoff default"),
        "{e}"
    );
    use crate::ops::error::ProductError as _;
    assert_eq!(e.code(), crate::diagnostics::ErrorCode::InvalidArgument);
    assert_eq!(e.details()["differences"][0]["field"], "network");
    // another policy
    let e = admit(
        Some(&r),
        &request(Cleanup::Manual),
        &key,
        Some("c1"),
        &alive,
    )
    .unwrap_err();
    assert!(matches!(e, GroupError::Policy { .. }), "{e}");
    // the workspace's container is another one
    let e = admit(
        Some(&r),
        &request(Cleanup::OnExit),
        &key,
        Some("c2"),
        &alive,
    )
    .unwrap_err();
    assert!(matches!(e, GroupError::NotTheGroups { .. }), "{e}");
    // a live member still bringing the container up: the container found is the group's
    let starting = holding(None, Cleanup::OnExit, &[10]);
    admit(
        Some(&starting),
        &request(Cleanup::OnExit),
        &key,
        Some("c9"),
        &alive,
    )
    .unwrap();
}

#[test]
fn a_group_holding_nothing_starts_again_but_never_takes_a_container_it_did_not_make() {
    let mut f = fields();
    f.network = "default".into();
    let other = GroupKey::from_fields(f);
    // every member ended (or its devcell killed: pid 99), no container: starts anew
    let mut r = holding(None, Cleanup::OnExit, &[99]);
    admit(Some(&r), &request(Cleanup::Manual), &other, None, &alive).unwrap();
    let mut record = Some(r.clone());
    join(
        &mut record,
        &request(Cleanup::Manual),
        Path::new("/w"),
        &other,
        (11, None),
        &alive,
    );
    let fresh = record.unwrap();
    assert_eq!(fresh.key, other);
    assert_eq!(fresh.cleanup, Cleanup::Manual);
    assert_eq!(fresh.members.len(), 2, "the history is kept");
    // no group at all, but the workspace has a container: not the group's
    let e = admit(None, &request(Cleanup::OnExit), &other, Some("c0"), &alive).unwrap_err();
    assert!(matches!(e, GroupError::NotTheGroups { .. }), "{e}");
    r.container_id = Some("c1".into());
    admit(
        Some(&r),
        &request(Cleanup::OnExit),
        &other,
        Some("c1"),
        &alive,
    )
    .unwrap_err();
}

#[test]
fn on_exit_removes_the_container_when_the_last_live_member_ends_not_the_first() {
    let mut r = holding(Some("c1"), Cleanup::OnExit, &[10, 11]);
    r.members[0].session = Some("s10".into());
    r.members[1].session = Some("s11".into());
    assert_eq!(
        leave(&mut r, 10, Some("s10"), &alive),
        Leave::OthersLive(vec!["s11".into()])
    );
    assert_eq!(r.container_id.as_deref(), Some("c1"));
    assert!(r.members[0].ended_at.is_some());
    assert_eq!(
        leave(&mut r, 11, Some("s11"), &alive),
        Leave::Remove("c1".into())
    );
    assert_eq!(r.container_id, None, "the record no longer names it");
    // under `manual` the last one removes nothing
    let mut r = holding(Some("c1"), Cleanup::Manual, &[10, 11]);
    assert!(matches!(
        leave(&mut r, 10, None, &alive),
        Leave::OthersLive(_)
    ));
    assert_eq!(leave(&mut r, 11, None, &alive), Leave::Keep);
    assert_eq!(r.container_id.as_deref(), Some("c1"));
}

#[test]
fn a_member_whose_devcell_died_is_not_counted() {
    // pid 99's devcell was killed: the other member is the last live one
    let mut r = holding(Some("c1"), Cleanup::OnExit, &[99, 10]);
    assert_eq!(r.live_members(&alive).count(), 1);
    assert_eq!(leave(&mut r, 10, None, &alive), Leave::Remove("c1".into()));
    // a member of the same pid that ended is not the one leaving
    let mut r = holding(Some("c1"), Cleanup::OnExit, &[10]);
    r.members[0].ended_at = Some("earlier".into());
    r.members.push(Member {
        session: None,
        pid: 12,
        pid_start: None,
        joined_at: "now".into(),
        ended_at: None,
    });
    assert_eq!(
        leave(&mut r, 10, None, &alive),
        Leave::OthersLive(vec!["pid 12".into()])
    );
}

#[test]
fn names_are_file_names_and_policies_parse() {
    for bad in ["", ".g", "-g", "a/b", "a b", "..", &"x".repeat(65)] {
        assert!(GroupName::try_from(bad.to_string()).is_err(), "{bad:?}");
    }
    assert!(GroupName::try_from("run-7_a.b".to_string()).is_ok());
    assert_eq!("on-exit".parse::<Cleanup>(), Ok(Cleanup::OnExit));
    assert_eq!("manual".parse::<Cleanup>(), Ok(Cleanup::Manual));
    assert!("terminal".parse::<Cleanup>().is_err());
    assert_eq!(Cleanup::default(), Cleanup::Manual);
}

#[test]
fn concurrent_joins_under_the_lock_are_all_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let store = GroupStore::new(dir.path());
    let key = GroupKey::from_fields(fields());
    std::thread::scope(|s| {
        for pid in 0..8u32 {
            let (store, key) = (&store, &key);
            s.spawn(move || {
                store
                    .update(&request(Cleanup::OnExit).name, |r| {
                        join(
                            r,
                            &request(Cleanup::OnExit),
                            Path::new("/w"),
                            key,
                            (1000 + pid, None),
                            &alive,
                        );
                        Ok(())
                    })
                    .unwrap();
            });
        }
    });
    let r = store.load(&request(Cleanup::OnExit).name).unwrap().unwrap();
    assert_eq!(r.members.len(), 8);
    assert_eq!(store.of_workspace(Path::new("/w")).len(), 1);
    assert!(store.of_workspace(Path::new("/v")).is_empty());
    // a record left `None` removes the file
    store
        .update(&r.name, |r| {
            *r = None;
            Ok(())
        })
        .unwrap();
    assert!(store.load(&r.name).unwrap().is_none());
}
