//! Builds: contexts, Dockerfiles, cache mounts, tags, base images and entitlements.

use super::*;

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
    // with a backtick escape declared, both readings are judged (attack 23, N4: a builder
    // that stops reading directives early keeps the backslash), so the joined line counts
    assert!(has_cache_mount(
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

/// Attack (spec-note 0601): a build context the engine would fetch on the host's
/// network (git or HTTP URLs, as Compose's model keeps them) is a request, never fetched
/// by default; its Dockerfile is the remote's, not a host path.
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
    assert_eq!(
        refused_lines(&m),
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
    assert_eq!(
        refused_lines(&m),
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
    let reference = judged_reference(&m);
    assert!(
        reference
            .requests
            .iter()
            .all(|r| r.status == RequestStatus::AllowedByProfile)
    );
}

/// Attack G9: a build's base image with `ONBUILD` triggers runs them (a `RUN
/// --mount=type=cache` shared with every build on the engine among them) though the
/// Dockerfile does not show them: every reached stage's base is listed (build arguments and `ARG`
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
        base_images(text, &args(&[]), None, Reach::UpToTarget),
        ["golang:1", "127.0.0.1:5000/attack/onbuild:2", "alpine:3"]
    );
    assert_eq!(
        base_images(
            text,
            &args(&[("BASE", "mine:1"), ("TAG", "7")]),
            None,
            Reach::UpToTarget
        ),
        ["golang:1", "mine:1", "img:7", "alpine:3"]
    );
    // BuildKit (Compose) builds only what the target needs: `final` is `${BASE}`
    assert_eq!(
        base_images(text, &args(&[]), Some("final"), Reach::Needed),
        ["127.0.0.1:5000/attack/onbuild:2"]
    );

    let (_tmp, context) = build_context("FROM 127.0.0.1:5000/attack/onbuild:2\n");
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
    let (_dir, ctx) = build_context("FROM a\nRUN --security=insecure true\n");
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
    let got: Vec<(String, String)> = refused_sorted(&m)
        .into_iter()
        .filter(|(flag, _)| *flag != mount)
        .collect();
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
    judged_reference(&m);
}

/// Attack 23, N9: a Compose configuration contributed nothing to the registry judgement, so
/// a sidecar's `image` (or a build's `FROM`, `dockerfile_inline`, `--from` image or
/// `docker-image://` context) the agent wrote was pulled under a closed network. Every image
/// the project has pulled is listed with its service and property; `pull_policy: build`
/// pulls none, `pull_policy: always` and `build.pull` pull even a present one.
#[test]
fn every_image_a_project_pulls_is_listed() {
    let (tmp, context) = build_context(
        "ARG REG=127.0.0.1:18424\nFROM ${REG}/exfil/base:1\nCOPY --from=from.example.test/f:2 / /\n",
    );
    let m = model(json!({
        "app": {"image": "devcell-test/busybox:1"},
        "side": {"image": "127.0.0.1:18424/exfil/x:SECRET", "pull_policy": "always"},
        "built": {"build": {"context": context, "args": {"REG": "arg.example.test"}}},
        "inline": {"build": {"context": context, "pull": true,
            "dockerfile_inline": "FROM inline.example.test/i:1\n",
            "additional_contexts": {"x": "docker-image://ctx.example.test/c:1", "y": "../dir"}}},
        "tagged": {"build": {"context": context}, "image": "tag.example.test/t:1", "pull_policy": "build"}
    }));
    let listed: Vec<String> = pulled_images(&m)
        .into_iter()
        .map(|p| format!("{} {} {} {}", p.service, p.property, p.reference, p.always))
        .collect();
    assert_eq!(
        listed,
        [
            "app image devcell-test/busybox:1 false",
            "side image 127.0.0.1:18424/exfil/x:SECRET true",
            "built build.dockerfile: FROM/--from arg.example.test/exfil/base:1 arg.example.test/exfil/base:1 false",
            "built build.dockerfile: FROM/--from from.example.test/f:2 from.example.test/f:2 false",
            "inline build.dockerfile: FROM/--from inline.example.test/i:1 inline.example.test/i:1 true",
            "inline build.additional_contexts ctx.example.test/c:1 true",
            "tagged build.dockerfile: FROM/--from 127.0.0.1:18424/exfil/base:1 127.0.0.1:18424/exfil/base:1 false",
            "tagged build.dockerfile: FROM/--from from.example.test/f:2 from.example.test/f:2 false",
        ]
    );
    let paths = build_dockerfile_paths(&m);
    let names: Vec<&str> = paths.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(names, ["built", "tagged"]);
    assert_eq!(paths[0].1, tmp.path().join("Dockerfile"));
}
