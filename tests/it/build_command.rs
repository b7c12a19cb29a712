//! `devcell build` end to end against the real engine and the shared local registry
//! (spec-note 0290): the image `up` would run, built without creating a container, tagged with
//! each `--image-name`, pushed with `--push`; an unchanged second build builds nothing; the
//! result line has the reference CLI's shape.

use crate::support::deadline::Bounded as _;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::refcli::reference_cli;
use crate::support::{test_registry, unique};

fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .bounded_output()
        .expect("docker runs")
}

fn lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn inspect_image(image: &str, format: &str) -> String {
    let out = docker(&["image", "inspect", "-f", format, image]);
    assert!(
        out.status.success(),
        "no image `{image}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The single JSON line on stdout of a successful run.
fn result(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "build failed: {}\nstdout: {stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "one line on stdout: {stdout}");
    let value: Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    assert_eq!(value["outcome"], "success", "{value}");
    value
}

fn metadata_entries(image: &str) -> Vec<Value> {
    let label = inspect_image(image, "{{index .Config.Labels \"devcontainer.metadata\"}}");
    serde_json::from_str(&label).unwrap_or_else(|e| panic!("label is not JSON ({e}): {label}"))
}

fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

const FEATURE_CONFIG: &str = r#"{"image": "IMAGE", "remoteUser": "nobody",
    "features": {"./hello": {"greeting": "hi-there"}},
    "postCreateCommand": "echo MARK"}"#;

fn hello_feature(ws: &TestContext) {
    ws.feature(
        "hello",
        r#"{"id": "hello", "version": "1.0.0", "name": "Hello",
            "options": {"greeting": {"type": "string", "default": "hey"}},
            "capAdd": ["SYS_PTRACE"],
            "postCreateCommand": "echo feature-post-create"}"#,
        "echo \"$GREETING for $_REMOTE_USER\" > /etc/hello.txt",
    );
}

#[test]
fn build_layers_features_tags_and_creates_no_container() {
    let Some(ctx) = TestContext::busybox("build_layers_features_tags_and_creates_no_container")
    else {
        return;
    };
    let mark = unique("buildcmd");
    // The mark makes the label, so the cached image, unique to this test run.
    let ws = ctx.config(&FEATURE_CONFIG.replace("MARK", &mark));
    hello_feature(&ws);
    let (a, b) = (
        format!("devcell-test/{mark}:1"),
        format!("devcell-test/{mark}-b"),
    );
    let out = ws.output("build", &["--image-name", &a, "--image-name", &b]);
    let first = result(&out);
    let id = first["devcell"]["imageId"].as_str().unwrap().to_string();
    ws.remove_image(&id);
    assert_eq!(first["imageName"], serde_json::json!([a, b]));
    assert_eq!(inspect_image(&a, "{{.Id}}"), id);
    assert_eq!(inspect_image(&b, "{{.Id}}"), id);

    // The merged metadata label: the Feature's entry, then devcontainer.json's.
    let entries = metadata_entries(&a);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0]["id"], "./hello");
    assert_eq!(entries[0]["capAdd"], serde_json::json!(["SYS_PTRACE"]));
    assert_eq!(entries[1]["postCreateCommand"], format!("echo {mark}"));
    assert_eq!(entries[1]["remoteUser"], "nobody");

    // The lockfile is written once the image exists (local Features only: no entries).
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join(".devcontainer/devcontainer-lock.json"))
            .expect("devcontainer-lock.json written"),
    )
    .unwrap();
    assert_eq!(lock, serde_json::json!({"features": {}}));

    // No container was created: none of the workspace, none from the image.
    assert!(ws.containers().is_empty());
    assert!(
        lines(&docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("ancestor={id}")
        ]))
        .is_empty(),
        "a container runs the built image"
    );

    // The Feature's permission request is reported, as `up` would judge it.
    let permissions = first["devcell"]["permissions"].as_array().unwrap();
    assert!(
        permissions.iter().any(|p| p["permission"] == "capability"
            && p["value"] == "SYS_PTRACE"
            && p["source"] == "Feature `./hello`"
            && p["status"] == "refused"),
        "{permissions:?}"
    );
    assert_eq!(first["devcell"]["profile"], "hardened");

    // The Feature really ran, with its option and the remote user.
    let run = docker(&["run", "--rm", &a, "cat", "/etc/hello.txt"]);
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "hi-there for nobody\n"
    );

    // A second build with unchanged inputs builds nothing.
    let out = ws.output("build", &["--image-name", &a]);
    let second = result(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(second["devcell"]["imageId"], id.as_str());
    assert!(
        stderr.contains("using cached devcell/features:"),
        "{stderr}"
    );
    assert!(!stderr.contains("Step 1/"), "built again: {stderr}");

    // `--label` is part of the image (and of its cache key).
    let out = ws.output(
        "build",
        &["--image-name", &a, "--label", "org.example.mark=yes"],
    );
    let labelled = result(&out);
    let labelled_id = labelled["devcell"]["imageId"].as_str().unwrap().to_string();
    ws.remove_image(&labelled_id);
    assert_ne!(labelled_id, id);
    assert_eq!(
        inspect_image(&a, "{{index .Config.Labels \"org.example.mark\"}}"),
        "yes"
    );
    assert_eq!(metadata_entries(&a), entries, "the metadata label is kept");
}

#[test]
fn build_pushes_to_the_local_registry() {
    let Some(ctx) = TestContext::busybox("build_pushes_to_the_local_registry") else {
        return;
    };
    let Some(registry) = test_registry() else {
        return;
    };
    let mark = unique("buildcmd-push");
    // An image configuration without Features: the label is still baked into an image.
    let ws = ctx.config(&format!(
        r#"{{"image": "IMAGE", "postStartCommand": "echo {mark}"}}"#
    ));
    let repository = format!("devcell-test/{mark}");
    let name = format!("{registry}/{repository}:1");

    // `--push` needs a name that says where to.
    let out = ws.output("build", &["--push"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let error: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(error["outcome"], "error");
    assert!(
        error["message"].as_str().unwrap().contains("--image-name"),
        "{error}"
    );

    let out = ws.output("build", &["--image-name", &name, "--push"]);
    let pushed = result(&out);
    ws.remove_image(pushed["devcell"]["imageId"].as_str().unwrap());
    assert_eq!(pushed["imageName"], serde_json::json!([name]));
    let digest = pushed["devcell"]["pushed"][0]["digest"]
        .as_str()
        .unwrap_or_else(|| panic!("no digest reported: {pushed}"))
        .to_string();
    assert!(digest.starts_with("sha256:"), "{digest}");
    assert_eq!(
        metadata_entries(&name)[0]["postStartCommand"],
        format!("echo {mark}")
    );

    // The registry has the manifest, under the digest devcell reported.
    let url = format!("http://{registry}/v2/{repository}/manifests/1");
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "the test registry is local: {url}"
    );
    let head = Command::new("curl")
        .args([
            "-sS",
            "-I",
            "--noproxy",
            "*",
            "-H",
            "Accept: application/vnd.docker.distribution.manifest.v2+json",
            &url,
        ])
        .output()
        .expect("curl runs");
    let headers = String::from_utf8_lossy(&head.stdout).to_lowercase();
    assert!(headers.starts_with("http/1.1 200"), "{headers}");
    assert!(
        headers.contains(&format!("docker-content-digest: {digest}")),
        "{headers}"
    );
}

#[test]
fn build_of_a_dockerfile_config_gets_the_reference_name() {
    let Some(ctx) = TestContext::busybox("build_of_a_dockerfile_config_gets_the_reference_name")
    else {
        return;
    };
    let mark = unique("buildcmd-df");
    let ws = ctx.config(&format!(
        r#"{{"build": {{"dockerfile": "Dockerfile"}}, "postCreateCommand": "echo {mark}"}}"#
    ));
    ws.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN echo {mark} > /mark\n"),
    );
    let out = ws.output("build", &[]);
    let built = result(&out);
    let name = built["imageName"][0].as_str().unwrap().to_string();
    ws.remove_image(&name);
    ws.remove_image(built["devcell"]["imageId"].as_str().unwrap());
    let base = ws
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    assert!(name.starts_with(&format!("vsc-{base}-")), "{name}");
    assert!(!name.ends_with("-features"), "{name}");
    assert_eq!(inspect_image(&name, "{{.Id}}"), built["devcell"]["imageId"]);
    assert_eq!(
        metadata_entries(&name),
        vec![serde_json::json!({"postCreateCommand": format!("echo {mark}")})]
    );
    // Unsupported BuildKit flags are refused by name, before anything is built.
    for (flag, value) in [
        ("--platform", "linux/arm64"),
        ("--output", "type=tar,dest=x"),
    ] {
        let out = ws.output("build", &[flag, value]);
        assert_eq!(out.status.code(), Some(1));
        let error: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim())
            .expect("an error result");
        assert!(error["message"].as_str().unwrap().contains(flag), "{error}");
    }
}

#[test]
fn build_result_has_the_reference_cli_shape() {
    let Some(ctx) = TestContext::busybox("build_result_has_the_reference_cli_shape") else {
        return;
    };
    let Some(cli) = reference_cli("build_result_has_the_reference_cli_shape") else {
        return;
    };
    let mark = unique("buildcmd-ref");
    let ws = ctx.config(&FEATURE_CONFIG.replace("MARK", &mark));
    hello_feature(&ws);
    let (theirs_name, ours_name) = (
        format!("devcell-test/{mark}-theirs:1"),
        format!("devcell-test/{mark}-ours:1"),
    );
    let out = cli
        .command()
        .args(["build", "--workspace-folder"])
        .arg(ws.path())
        .args(["--image-name", &theirs_name])
        .long_output()
        .expect("the reference CLI runs");
    cli.assert_stayed_local();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let theirs: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| {
            panic!(
                "reference output is not JSON ({e}): {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    ws.remove_image(&theirs_name);
    assert_eq!(theirs["outcome"], "success", "{theirs}");

    let ours = result(&ws.output("build", &["--image-name", &ours_name]));
    ws.remove_image(ours["devcell"]["imageId"].as_str().unwrap());
    // Same keys, apart from devcell's one addition and the reference 0.89's auth diagnostics.
    let strip = |v: &Value, key: &str| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove(key);
        v
    };
    assert_eq!(
        keys(&strip(&ours, "devcell")),
        keys(&strip(&theirs, "ociAuthDiagnostics"))
    );
    assert_eq!(theirs["imageName"], serde_json::json!([theirs_name]));
    assert_eq!(ours["imageName"], serde_json::json!([ours_name]));
    // Both labels: the Feature's entry then devcontainer.json's, with the same content.
    let (theirs_entries, ours_entries) =
        (metadata_entries(&theirs_name), metadata_entries(&ours_name));
    assert_eq!(ours_entries, theirs_entries);
}

/// Issue 12 item 5: `devcell build` writes devcontainer.json's `containerEnv` after the
/// Features' `ENV`s, so the image's `Config.Env` (and `docker run <image>`) shows the
/// merged values, devcontainer.json's last (spec-note 0473).
#[test]
fn build_bakes_container_env_after_the_features() {
    let Some(ctx) = TestContext::busybox("build_bakes_container_env_after_the_features") else {
        return;
    };
    let mark = unique("buildenv");
    let ws = ctx.config(&format!(
        r#"{{"image": "IMAGE", "remoteUser": "nobody",
            "features": {{"./envf": {{}}}},
            "containerEnv": {{"WHO": "config", "MARK": "{mark}", "LITERAL": "a$b"}}}}"#
    ));
    ws.feature(
        "envf",
        r#"{"id": "envf", "version": "1.0.0",
            "containerEnv": {"WHO": "feature", "FEATURE_ONLY": "yes", "PATH": "/opt/envf/bin:${PATH}"}}"#,
        "true",
    );
    let built = result(&ws.output("build", &[]));
    let name = built["imageName"][0].as_str().unwrap().to_string();
    ws.remove_image(&name);
    ws.remove_image(built["devcell"]["imageId"].as_str().unwrap());
    let env: Vec<String> = serde_json::from_str(&inspect_image(&name, "{{json .Config.Env}}"))
        .expect("Config.Env is a JSON list");
    let position = |prefix: &str| {
        env.iter()
            .position(|e| e.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {env:?}"))
    };
    assert!(env.contains(&"WHO=config".to_string()), "{env:?}");
    assert!(!env.contains(&"WHO=feature".to_string()), "{env:?}");
    assert!(env.contains(&format!("MARK={mark}")), "{env:?}");
    assert!(env.contains(&"LITERAL=a$b".to_string()), "{env:?}");
    assert!(env.contains(&"FEATURE_ONLY=yes".to_string()), "{env:?}");
    // The Feature's entries come first, devcontainer.json's new ones after them.
    assert!(position("FEATURE_ONLY=") < position("MARK="), "{env:?}");
    assert!(
        env.iter().any(|e| e.starts_with("PATH=/opt/envf/bin:")),
        "{env:?}"
    );
    let run = docker(&["run", "--rm", &name, "sh", "-c", "echo $WHO"]);
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "config");
}

/// `build --skip-persisting-customizations-from-features` leaves the Features'
/// `customizations` out of the image's label (their other properties stay), and
/// `--omit-config-remote-env-from-metadata` devcontainer.json's `remoteEnv`; without the flags
/// both are there (spec-note 0310).
#[test]
fn build_label_omissions_follow_the_hidden_flags() {
    let Some(ctx) = TestContext::busybox("build_label_omissions_follow_the_hidden_flags") else {
        return;
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./custom": {}},
            "remoteEnv": {"FROM_CONFIG": "1"}}"#,
    );
    ws.feature(
        "custom",
        r#"{"id": "custom", "version": "1.0.0", "init": true,
            "customizations": {"vscode": {"extensions": ["x.y"]}}}"#,
        "true",
    );
    let entries = |args: &[&str]| -> Vec<Value> {
        let built = result(&ws.output("build", args));
        let name = built["imageName"][0].as_str().unwrap().to_string();
        ws.remove_image(&name);
        ws.remove_image(built["devcell"]["imageId"].as_str().unwrap());
        metadata_entries(&name)
    };
    let feature = |entries: &[Value]| -> Value {
        entries
            .iter()
            .find(|e| e["id"] == "./custom")
            .cloned()
            .unwrap_or_else(|| panic!("no Feature entry in {entries:?}"))
    };
    let has_remote_env = |entries: &[Value]| entries.iter().any(|e| e.get("remoteEnv").is_some());

    let plain = entries(&[]);
    assert_eq!(
        feature(&plain)["customizations"]["vscode"]["extensions"][0],
        "x.y"
    );
    assert!(has_remote_env(&plain), "{plain:?}");

    let omitted = entries(&[
        "--skip-persisting-customizations-from-features",
        "--omit-config-remote-env-from-metadata",
    ]);
    let entry = feature(&omitted);
    assert!(entry.get("customizations").is_none(), "{entry}");
    assert_eq!(entry["init"], true);
    assert!(!has_remote_env(&omitted), "{omitted:?}");
}
