//! `build`: Features layered onto a base image and the `updateRemoteUserUID` layer, built by
//! the real engine (`docker build` with the classic builder for now) and checked from inside
//! containers of the result. Needs `DEVCELL_TEST_ENGINE=1` and `devcell-test/busybox:1`.

use crate::support::deadline::Bounded as _;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use devcell::build::{self, BaseImage, FeatureLayer, FeaturesInput, UidInput};
use devcell::config::metadata;
use devcell::engine::Engine;
use devcell::features::metadata::FeatureMetadata;
use devcell::features::options::resolve_options;
use indexmap::IndexMap;
use serde_json::{Value, json};

use crate::support;
use crate::support::context::{Cleanup, TestContext};

const BUSYBOX: &str = "devcell-test/busybox:1";

fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .env("DOCKER_BUILDKIT", "0")
        .bounded_output()
        .expect("docker runs")
}

fn ok_stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "docker failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A name no other test (or test run) uses.
fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn image_exists(tag: &str) -> bool {
    docker(&["image", "inspect", tag]).status.success()
}

/// Builds a unique base image from busybox: user `dev` (1000:1000, home `/home/dev`),
/// `USER dev`, and a `devcontainer.metadata` label with two entries. The unique label comes
/// first so no layer is shared with another test's images.
fn base_image(images: &Cleanup) -> BaseImage {
    let label = r#"[{"id":"base-feature","postCreateCommand":"echo base"},{"remoteUser":"dev"}]"#;
    let (entries, warning) = metadata::parse_label(label);
    assert!(warning.is_none());
    let mut base = image_from_busybox(
        images,
        &format!(
            "RUN echo 'dev:x:1000:1000:Dev:/home/dev:/bin/sh' >> /etc/passwd \
             && echo 'dev:x:1000:' >> /etc/group && mkdir -p /home/dev && chown 1000:1000 /home/dev\n\
             USER dev\nLABEL devcontainer.metadata='{label}'\n"
        ),
    );
    base.user = "dev".into();
    base.metadata = entries;
    base
}

/// A unique image: busybox, a unique label, then `rest` (Dockerfile lines).
fn image_from_busybox(images: &Cleanup, rest: &str) -> BaseImage {
    let tag = format!("devcell-test/build-base:{}", unique("b"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!("FROM {BUSYBOX}\nLABEL devcell.test={tag:?}\n{rest}"),
    )
    .unwrap();
    ok_stdout(&docker(&[
        "build",
        "-q",
        "-t",
        &tag,
        dir.path().to_str().unwrap(),
    ]));
    images.image(&tag);
    let id = ok_stdout(&docker(&["image", "inspect", "--format", "{{.Id}}", &tag]));
    BaseImage {
        reference: tag,
        id: id.trim().to_owned(),
        user: String::new(),
        metadata: Vec::new(),
    }
}

/// A fixture Feature with user `options` (option ids as in `devcontainer.json`), validated and
/// rendered by the `features` layer.
fn feature(id: &str, options: &[(&str, &str)]) -> FeatureLayer {
    let dir = support::fixture(&format!("features/build/{id}"));
    let parsed = FeatureMetadata::read_dir(&dir).unwrap();
    let user: IndexMap<String, Value> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    let mut warnings = Vec::new();
    let resolved = resolve_options(id, &parsed, &user, &mut warnings).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let text = std::fs::read_to_string(dir.join("devcontainer-feature.json")).unwrap();
    let metadata: Value = serde_json::from_str(&text).unwrap();
    let layer = FeatureLayer::new(&format!("./{id}"), dir, metadata, &resolved, None).unwrap();
    assert_eq!(layer.container_env, parsed.container_env);
    layer
}

/// Plans, writes the context and builds it with `docker build`; returns the plan and the
/// build output. Panics when the build fails.
fn build_features(input: &FeaturesInput, images: &Cleanup) -> (build::FeaturesPlan, String) {
    let plan = build::plan(input).unwrap();
    let out = docker_build(&plan.tag, &plan.write_context().unwrap());
    images.image(&plan.tag);
    (plan, ok_stdout(&out))
}

fn docker_build(tag: &str, context: &build::BuildContext) -> Output {
    // `--force-rm`: the classic builder otherwise keeps a failed step's container (and so
    // its parent layers) around.
    docker(&[
        "build",
        "--force-rm",
        "-t",
        tag,
        context.path().to_str().unwrap(),
    ])
}

/// `sh -c <script>` in a throwaway container of `image`, as its default user.
fn run(image: &str, script: &str) -> String {
    ok_stdout(&docker(&["run", "--rm", image, "sh", "-c", script]))
}

fn image_user(image: &str) -> String {
    ok_stdout(&docker(&[
        "image",
        "inspect",
        "--format",
        "{{.Config.User}}",
        image,
    ]))
    .trim()
    .to_owned()
}

const MESSAGE: &str = "it's \"quoted\" $HOME ${PATH} `echo backtick` \\ back\\slash ünï";

/// Checklist 29, 30, 31, 32, 76, 77, and the cache tag: options arrive unchanged, install.sh
/// runs as root in its staging folder while the image's USER is restored, builtins name the
/// users, containerEnv reaches the Feature itself, later Features and the container, the
/// label holds base + Feature + devcontainer.json entries (a 70 kB one included), and a
/// second plan of the same inputs needs no build.
#[test]
fn features_install_as_root_with_options_builtins_env_and_label() {
    let Some(ctx) =
        TestContext::busybox("features_install_as_root_with_options_builtins_env_and_label")
    else {
        return;
    };
    let images = ctx.cleanup();
    let base = base_image(images);
    let base_path = run(&base.reference, "printf %s \"$PATH\"");
    let big = format!("{}\\\"$#\n\t", "x1#{$}\\\"".repeat(8_000));
    let config = json!({
        "image": "ignored:1",
        "features": {"./write-message": {"message": "m"}},
        "runArgs": ["--init"],
        "postStartCommand": "echo \"start\" $HOME \\ `x` ${localEnv:HOME}\nline2",
        "customizations": {"devcell-test": {"big": big}}
    });
    let input = FeaturesInput {
        base: base.clone(),
        features: vec![
            feature("write-message", &[("message", MESSAGE)]),
            feature("use-path", &[("greeting", "hey 'you'")]),
        ],
        config: config.clone(),
        container_user: None,
        remote_user: None,
    };
    let (plan, _) = build_features(&input, images);
    let image = plan.tag.as_str();

    // Options arrive byte for byte.
    assert_eq!(run(image, "cat /opt/x/message"), MESSAGE);
    assert_eq!(run(image, "cat /opt/y/greeting"), "hey 'you'");
    // 29: install.sh ran as root, in its staging folder (removed afterwards); USER restored.
    assert_eq!(run(image, "cat /opt/x/install-uid").trim(), "0");
    assert_eq!(
        run(image, "cat /opt/x/install-cwd").trim(),
        "/tmp/dev-container-features/write-message_0"
    );
    assert_eq!(
        run(image, "ls /tmp/dev-container-features").trim(),
        "devcontainer-features.builtin.env"
    );
    assert_eq!(image_user(image), "dev");
    assert_eq!(run(image, "id -u").trim(), "1000");
    // 30: builtins, remote user = container user = the image's USER without remoteUser.
    assert_eq!(
        run(image, "cat /opt/x/builtins"),
        "_REMOTE_USER=dev\n_CONTAINER_USER=dev\n_REMOTE_USER_HOME=/home/dev\n_CONTAINER_USER_HOME=/home/dev\n"
    );
    // 31: containerEnv visible to the Feature's own install.sh, to the next one, and at run.
    assert!(
        run(image, "cat /opt/x/path-at-install").starts_with("/opt/x/bin:"),
        "own install.sh sees its containerEnv"
    );
    assert_eq!(run(image, "cat /opt/y/out"), "hello from x\n");
    assert_eq!(run(image, "cat /opt/y/write-message-dir"), "/opt/x");
    assert_eq!(
        run(image, "printf %s \"$WRITE_MESSAGE_DIR:$USE_PATH_DIR\""),
        "/opt/x:/opt/y"
    );
    // 32: PATH prefixed, not replaced; Docker expanded ${PATH}.
    assert_eq!(
        run(image, "printf %s \"$PATH\""),
        format!("/opt/x/bin:{base_path}")
    );

    // 76/77: base entries, one per Feature (with id), the devcontainer.json entry last.
    let label = ok_stdout(&docker(&[
        "image",
        "inspect",
        "--format",
        "{{index .Config.Labels \"devcontainer.metadata\"}}",
        image,
    ]));
    let label = label.strip_suffix('\n').unwrap_or(&label);
    assert_eq!(
        label, plan.label,
        "label round-trips through the Dockerfile"
    );
    let entries: Vec<Value> = serde_json::from_str(label).unwrap();
    assert_eq!(entries.len(), 5, "{label:.300}");
    assert_eq!(
        entries[0],
        json!({"id": "base-feature", "postCreateCommand": "echo base"})
    );
    assert_eq!(entries[1], json!({"remoteUser": "dev"}));
    assert_eq!(
        entries[2],
        json!({"id": "./write-message", "postCreateCommand": "cat /opt/x/message"})
    );
    assert_eq!(entries[3], json!({"id": "./use-path"}));
    assert_eq!(
        entries[4],
        json!({
            "postStartCommand": config["postStartCommand"],
            "customizations": config["customizations"]
        })
    );
    for absent in ["image", "features", "runArgs", "containerEnv"] {
        assert!(entries.iter().all(|e| e.get(absent).is_none()), "{absent}");
    }

    // The cache tag exists; planning the same inputs again gives it, so nothing is built.
    let again = build::plan(&input).unwrap();
    assert_eq!(again.tag, plan.tag);
    assert!(!again.needs_build(image_exists));
}

/// Checklist 33: a failing install.sh fails the build, names the Feature, and leaves no image.
/// An image without `USER` keeps `Config.User` empty (no `USER root` is added); the builtins
/// are root's and the label is just the Feature and devcontainer.json entries.
#[test]
fn image_without_user_keeps_it_empty() {
    let Some(ctx) = TestContext::busybox("image_without_user_keeps_it_empty") else {
        return;
    };
    let images = ctx.cleanup();
    let base = image_from_busybox(images, "");
    let input = FeaturesInput {
        base,
        features: vec![feature("write-message", &[])],
        config: json!({"postCreateCommand": "true"}),
        ..Default::default()
    };
    let (plan, _) = build_features(&input, images);
    assert_eq!(image_user(&plan.tag), "");
    assert_eq!(
        run(&plan.tag, "cat /opt/x/message"),
        "hello",
        "declared default"
    );
    assert_eq!(
        run(&plan.tag, "cat /opt/x/builtins"),
        "_REMOTE_USER=root\n_CONTAINER_USER=root\n_REMOTE_USER_HOME=/root\n_CONTAINER_USER_HOME=/root\n"
    );
    let label: Value = serde_json::from_str(&plan.label).unwrap();
    assert_eq!(
        label,
        json!([
            {"id": "./write-message", "postCreateCommand": "cat /opt/x/message"},
            {"postCreateCommand": "true"}
        ])
    );
}

#[test]
fn failing_install_fails_the_build() {
    let Some(ctx) = TestContext::busybox("failing_install_fails_the_build") else {
        return;
    };
    let images = ctx.cleanup();
    let base = base_image(images);
    let input = FeaturesInput {
        base,
        features: vec![
            feature("write-message", &[("message", "x")]),
            feature("fails", &[]),
        ],
        config: json!({}),
        ..Default::default()
    };
    let plan = build::plan(&input).unwrap();
    assert!(plan.needs_build(image_exists));
    images.image(&plan.tag);
    let out = docker_build(&plan.tag, &plan.write_context().unwrap());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    images.build_layers(&text);
    assert!(!out.status.success(), "build should fail: {text}");
    assert!(
        text.contains("ERROR: Feature \"Fails\" (./fails) failed to install! (exit code 3)"),
        "{text}"
    );
    assert!(!image_exists(&plan.tag));
    assert!(plan.needs_build(image_exists));
}

/// A change to the last Feature's options rebuilds only from that Feature's layer: the first
/// Feature's RUN layer is the same image in both builds. Also checklist 30 with a
/// `remoteUser` different from the container user.
#[test]
fn changing_last_feature_options_reuses_earlier_layers() {
    let Some(ctx) = TestContext::busybox("changing_last_feature_options_reuses_earlier_layers")
    else {
        return;
    };
    let images = ctx.cleanup();
    let base = base_image(images);
    let input = |greeting: &str| FeaturesInput {
        base: base.clone(),
        features: vec![
            feature("write-message", &[("message", "same")]),
            feature("use-path", &[("greeting", greeting)]),
        ],
        config: json!({"remoteUser": "root"}),
        container_user: None,
        remote_user: Some("root".into()),
    };
    let (first, _) = build_features(&input("one"), images);
    let (second, output) = build_features(&input("two"), images);
    assert_ne!(first.tag, second.tag);
    assert!(output.contains("Using cache"), "{output}");

    let layer = |image: &str, marker: &str| -> String {
        let history = ok_stdout(&docker(&[
            "history",
            "--no-trunc",
            "--format",
            "{{.ID}}\t{{.CreatedBy}}",
            image,
        ]));
        let row = history
            .lines()
            .find(|l| l.contains(marker) && l.contains("rm -rf"))
            .unwrap_or_else(|| panic!("no `{marker}` RUN layer in {history}"));
        let id = row.split('\t').next().unwrap_or_default().to_owned();
        assert!(id.starts_with("sha256:"), "intermediate image id: {row}");
        id
    };
    assert_eq!(
        layer(&first.tag, "write-message_0"),
        layer(&second.tag, "write-message_0"),
        "the first Feature's layer is reused"
    );
    assert_ne!(
        layer(&first.tag, "use-path_1"),
        layer(&second.tag, "use-path_1"),
        "the changed Feature's layer is rebuilt"
    );
    assert_eq!(run(&second.tag, "cat /opt/y/greeting"), "two");
    assert_eq!(
        run(&second.tag, "cat /opt/x/builtins"),
        "_REMOTE_USER=root\n_CONTAINER_USER=dev\n_REMOTE_USER_HOME=/root\n_CONTAINER_USER_HOME=/home/dev\n"
    );
}

/// updateRemoteUserUID (checklist 95's image side): the remote user gets the given UID/GID,
/// its home follows, the image's USER is kept; a GID taken by another group is not reused.
#[test]
fn uid_layer_changes_the_remote_users_ids() {
    let Some(ctx) = TestContext::busybox("uid_layer_changes_the_remote_users_ids") else {
        return;
    };
    let images = ctx.cleanup();
    let base = base_image(images);
    let uid_input = |uid, gid| UidInput {
        image: base.reference.clone(),
        image_id: base.id.clone(),
        image_user: base.user.clone(),
        remote_user: "dev".into(),
        host_uid: uid,
        host_gid: gid,
        provide: false,
    };
    let build_uid = |input: &UidInput, images: &Cleanup| -> String {
        let plan = build::plan_uid_update(input).unwrap().expect("a UID layer");
        assert!(plan.needs_build(image_exists));
        ok_stdout(&docker_build(&plan.tag, &plan.write_context().unwrap()));
        images.image(&plan.tag);
        plan.tag
    };

    let image = build_uid(&uid_input(4242, 4343), images);
    assert_eq!(
        run(
            &image,
            "id -u; id -g; stat -c %u:%g /home/dev; grep '^dev:' /etc/group"
        ),
        "4242\n4343\n4242:4343\ndev:x:4343:\n"
    );
    assert_eq!(image_user(&image), "dev");

    // GID 65534 belongs to `nogroup`: the user keeps GID 1000.
    let image = build_uid(&uid_input(4242, 65534), images);
    assert_eq!(run(&image, "id -u; id -g"), "4242\n1000\n");

    // Same ids: the image's users are unchanged.
    let image = build_uid(&uid_input(1000, 1000), images);
    assert_eq!(run(&image, "id -u; id -g"), "1000\n1000\n");

    // A user the image does not have: the build succeeds and changes nothing.
    let mut ghost = uid_input(4242, 4343);
    ghost.remote_user = "ghost".into();
    let image = build_uid(&ghost, images);
    assert_eq!(
        run(&image, "id -u; grep -c 4242 /etc/passwd || true"),
        "1000\n0\n"
    );

    // Root host user: no layer.
    assert!(build::plan_uid_update(&uid_input(0, 0)).unwrap().is_none());
}

/// The same build through the engine API (`build::ensure_features_image`): the context tar
/// carries the Feature folders, the image works, and a second call builds nothing; a failing
/// `install.sh` is an engine build error naming the Feature and leaves no tag. The UID layer
/// goes the same way.
#[tokio::test]
async fn features_image_through_the_engine_api_is_built_once() {
    let Some(engine) = support::engine::engine("build::through_engine_api").await else {
        return;
    };
    let images = &Cleanup::default();
    let base = base_image(images);
    let info = engine
        .inspect_image(&base.reference)
        .await
        .unwrap()
        .unwrap();
    let (from_engine, warning) = BaseImage::from_image(&base.reference, &info);
    assert!(warning.is_none());
    assert_eq!(from_engine, base, "BaseImage from the engine's inspect");

    let input = FeaturesInput {
        base: from_engine.clone(),
        features: vec![
            feature("write-message", &[("message", MESSAGE)]),
            feature("use-path", &[]),
        ],
        config: json!({"postStartCommand": "echo engine"}),
        ..Default::default()
    };
    let recorder = support::engine::Recorder::default();
    let first = build::ensure_features_image(&engine, &input, &recorder)
        .await
        .unwrap();
    images.image(&first.tag);
    assert!(first.built);
    assert!(
        recorder
            .output()
            .iter()
            .any(|l| l.contains("devcell: installing Feature \"Write message\"")),
        "build output reaches the reporter"
    );
    assert_eq!(first.image.user.as_deref(), Some("dev"));
    assert_eq!(run(&first.tag, "cat /opt/x/message"), MESSAGE);
    assert_eq!(run(&first.tag, "cat /opt/y/greeting"), "hi");

    let second = build::ensure_features_image(&engine, &input, &devcell::progress::NoopReporter)
        .await
        .unwrap();
    assert_eq!(
        (second.tag.as_str(), second.built),
        (first.tag.as_str(), false)
    );
    assert_eq!(second.image.id, first.image.id);

    let failing = FeaturesInput {
        features: vec![feature("fails", &[])],
        ..input.clone()
    };
    let tag = build::plan(&failing).unwrap().tag;
    images.image(&tag);
    let err = build::ensure_features_image(&engine, &failing, &recorder)
        .await
        .unwrap_err();
    images.build_layers(&recorder.output().join("\n"));
    assert!(matches!(err, build::BuildError::Engine(_)), "{err}");
    assert!(
        recorder
            .output()
            .iter()
            .any(|l| l.contains("ERROR: Feature \"Fails\" (./fails) failed to install!")),
        "{err}"
    );
    assert!(!image_exists(&tag));

    let uid = UidInput {
        image: first.tag.clone(),
        image_id: first.image.id.clone(),
        image_user: "dev".into(),
        remote_user: "dev".into(),
        host_uid: 5001,
        host_gid: 5002,
        provide: false,
    };
    let built = build::ensure_uid_image(&engine, &uid, None, &recorder)
        .await
        .unwrap()
        .expect("a UID layer");
    images.image(&built.tag);
    assert!(built.built);
    assert_eq!(
        run(&built.tag, "id -u; id -g; cat /opt/x/message"),
        format!("5001\n5002\n{MESSAGE}")
    );
    let again = build::ensure_uid_image(&engine, &uid, None, &recorder)
        .await
        .unwrap()
        .unwrap();
    assert!(!again.built);
}

/// Four devcells (here four tasks of one process: `flock` is per open file) ask for the same
/// missing UID image at once, as parallel clone tasks of one repository do: one builds it, the
/// others wait and find it, and all get the image the tag names. Without the build lock each
/// tagged its own build, and a Compose task then found its primary container running another
/// task's image (`Compose replaced the image`, spec-note 0437).
#[tokio::test]
async fn concurrent_builds_of_one_missing_tag_build_it_once() {
    let Some(engine) = support::engine::engine("build::concurrent_builds").await else {
        return;
    };
    let images = &Cleanup::default();
    let base = base_image(images);
    let uid = UidInput {
        image: base.reference.clone(),
        image_id: base.id.clone(),
        image_user: "dev".into(),
        remote_user: "dev".into(),
        host_uid: 5101,
        host_gid: 5102,
        provide: false,
    };
    let tag = build::plan_uid_update(&uid).unwrap().unwrap().tag;
    images.image(&tag);
    assert!(!image_exists(&tag));
    let quiet = devcell::progress::NoopReporter;
    let one = || build::ensure_uid_image(&engine, &uid, None, &quiet);
    let (a, b, c, d) = tokio::join!(one(), one(), one(), one());
    let all: Vec<_> = [a, b, c, d]
        .into_iter()
        .map(|r| r.unwrap().expect("a UID layer"))
        .collect();
    assert_eq!(all.iter().filter(|i| i.built).count(), 1, "built once");
    let tagged = ok_stdout(&docker(&["image", "inspect", "--format", "{{.Id}}", &tag]));
    for image in &all {
        assert_eq!(image.image.id, tagged.trim(), "the image the tag names");
    }
}

/// Interop: the reference CLI reads the `devcontainer.metadata` label devcell writes as it
/// reads its own: base, Feature and devcontainer.json entries all reach its merged
/// configuration, strings unchanged.
#[test]
fn reference_cli_reads_the_label() {
    let Some(ctx) = TestContext::busybox("reference_cli_reads_the_label") else {
        return;
    };
    let Some(refcli) = support::refcli::reference_cli("reference_cli_reads_the_label") else {
        return;
    };
    let images = ctx.cleanup();
    let base = base_image(images);
    let start = "echo \"start\" $HOME \\ `x` ${localEnv:HOME}";
    let input = FeaturesInput {
        base,
        features: vec![feature("write-message", &[]), feature("use-path", &[])],
        config: json!({"postStartCommand": start, "capAdd": ["SYS_PTRACE"]}),
        ..Default::default()
    };
    let (plan, _) = build_features(&input, images);

    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    std::fs::write(
        ws.path().join(".devcontainer/devcontainer.json"),
        json!({"image": plan.tag}).to_string(),
    )
    .unwrap();
    let out = refcli
        .command()
        .args(["read-configuration", "--include-merged-configuration"])
        .arg("--workspace-folder")
        .arg(ws.path())
        .long_output()
        .expect("the reference CLI runs");
    let result: Value = serde_json::from_str(&ok_stdout(&out)).expect("JSON on stdout");
    refcli.assert_stayed_local();
    let merged = &result["mergedConfiguration"];
    assert_eq!(
        merged["postCreateCommands"],
        json!(["echo base", "cat /opt/x/message"]),
        "{merged}"
    );
    // ${localEnv:HOME} in the label is substituted by the reader, not frozen by devcell.
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        merged["postStartCommands"],
        json!([start.replace("${localEnv:HOME}", &home)]),
        "{merged}"
    );
    assert_eq!(merged["remoteUser"], "dev");
    assert_eq!(merged["capAdd"], json!(["SYS_PTRACE"]));
}
