//! Interop with the reference CLI (`@devcontainers/cli`), both directions, against the shared
//! local registry and the real engine (issue 3; spec-notes/0068 and 0260):
//!
//! - a Feature published by `devcell features publish` (with a `dependsOn` on another
//!   devcell-published Feature) is installed by the reference CLI's `devcontainer build` into
//!   an image built from `devcell-test/busybox:1`;
//! - a Feature published by the reference CLI's `devcontainer features publish` is installed
//!   by `devcell up`.
//!
//! The reference CLI talks plain HTTP only to a registry named `localhost`, so both tools use
//! `localhost:<port>` (which resolves to 127.0.0.1). Its other traffic is kept on this machine
//! by [`crate::support::refcli`]; every test asserts that nothing else was attempted.

use crate::support::deadline::Bounded as _;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::context::TestContext;
use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
use crate::support::refcli::{RefCli, reference_cli};
use crate::support::{copy_tree, devcell, fixture, publish, test_registry, unique};

/// The shared registry addressed as `localhost:<port>`.
fn localhost_registry() -> Option<String> {
    let reg = test_registry()?;
    let port = reg.rsplit(':').next().unwrap_or("5000");
    Some(format!("localhost:{port}"))
}

fn hello_fixture() -> std::path::PathBuf {
    fixture("features/collection/src/hello")
}

/// A fresh workspace with `.devcontainer/devcontainer.json` = `config` (pretty-printed).
fn workspace(config: &Value) -> TestContext {
    let ws = TestContext::new("interop");
    ws.write(
        ".devcontainer/devcontainer.json",
        &serde_json::to_string_pretty(config).unwrap(),
    );
    ws
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn last_json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text}\nstderr: {}", stderr(out)))
}

/// The `id`s of an image's `devcontainer.metadata` label, in order.
fn metadata_ids(image: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "-f",
            "{{index .Config.Labels \"devcontainer.metadata\"}}",
            image,
        ])
        .bounded_output()
        .unwrap();
    let label: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("metadata label of {image} is not JSON: {e}"));
    label
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_string))
        .collect()
}

/// The greeter fixture with its `dependsOn` pointing at `hello` (with `greeting` set), in a
/// fresh folder.
fn greeter_depending_on(hello: &str, greeting: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &fixture("features/collection/src/greeter"),
        &dir.path().join("greeter"),
    );
    let path = dir.path().join("greeter/devcontainer-feature.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["dependsOn"] = serde_json::json!({ hello: { "greeting": greeting } });
    std::fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    dir
}

fn refcli_run(refcli: &RefCli, args: &[&str], extra: &[&Path]) -> Output {
    refcli
        .command()
        .args(args)
        .args(extra)
        .long_output()
        .expect("the reference CLI runs")
}

#[test]
fn reference_cli_builds_with_features_published_by_devcell() {
    const TEST: &str = "reference_cli_builds_with_features_published_by_devcell";
    if !engine_ready(TEST, BUSYBOX_IMAGE) {
        return;
    }
    let Some(reg) = localhost_registry() else {
        return;
    };
    let Some(refcli) = reference_cli(TEST) else {
        return;
    };
    let ns = unique("interop-a");
    let marker = unique("marker-from-devcell");
    let hello_ref = format!("{reg}/{ns}/hello:1");

    // devcell publishes `hello`, and `greeter` whose dependsOn names `hello` with an option.
    let hello = publish(&hello_fixture(), &reg, &ns);
    let greeter_dir = greeter_depending_on(&hello_ref, &marker);
    let greeter = publish(&greeter_dir.path().join("greeter"), &reg, &ns);
    assert_eq!(greeter["greeter"]["version"], "2.1.0", "{greeter}");

    // The reference builds an image with only `greeter` listed: it must follow dependsOn.
    let ws = workspace(&serde_json::json!({
        "image": BUSYBOX_IMAGE,
        "features": { format!("{reg}/{ns}/greeter:2"): {} }
    }));
    let image = format!("devcell-{ns}:1");
    ws.remove_image(&image);
    ws.remove_image("dev_container_feature_content_temp");
    let out = refcli_run(
        &refcli,
        &[
            "build",
            "--image-name",
            &image,
            "--buildkit",
            "never",
            "--log-level",
            "trace",
            "--workspace-folder",
        ],
        &[ws.path()],
    );
    let log = stderr(&out);
    let result = last_json(&out);
    assert_eq!(result["outcome"], "success", "{log}");
    refcli.assert_stayed_local();
    // It fetched both artifacts from the local registry, over plain HTTP.
    for feature in ["hello", "greeter"] {
        let fetched = format!("200 (NoAuth): http://{reg}/v2/{ns}/{feature}/manifests/");
        assert!(log.contains(&fetched), "no `{fetched}` in the log:\n{log}");
    }
    let digest = hello["hello"]["digest"].as_str().unwrap();
    assert!(
        log.contains(digest) || log.contains(digest.trim_start_matches("sha256:")),
        "the reference did not see devcell's manifest digest {digest}:\n{log}"
    );

    // The Features ran in the image, dependency first, with the option value.
    let run = Command::new("docker")
        .args(["run", "--rm", &image, "cat"])
        .args(["/usr/local/share/hello.txt", "/usr/local/share/greeter.txt"])
        .bounded_output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        format!("{marker}\n{marker}\n")
    );
    // Its lockfile pins devcell's artifacts by the digests devcell printed.
    let lock: Value = serde_json::from_slice(
        &std::fs::read(ws.path().join(".devcontainer/devcontainer-lock.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        lock["features"][format!("{reg}/{ns}/greeter:2")]["integrity"],
        greeter["greeter"]["digest"],
        "{lock}"
    );
    let ids = metadata_ids(&image);
    let position = |id: &str| ids.iter().position(|i| i.contains(id));
    assert!(
        position("hello").unwrap() < position("greeter").unwrap(),
        "install order: {ids:?}"
    );
}

#[test]
fn devcell_up_installs_a_feature_published_by_the_reference_cli() {
    const TEST: &str = "devcell_up_installs_a_feature_published_by_the_reference_cli";
    if !engine_ready(TEST, BUSYBOX_IMAGE) {
        return;
    }
    let Some(reg) = localhost_registry() else {
        return;
    };
    let Some(refcli) = reference_cli(TEST) else {
        return;
    };
    let ns = unique("interop-b");
    let marker = unique("marker-from-reference");

    let out = refcli_run(
        &refcli,
        &["features", "publish", "-r", &reg, "-n", &ns],
        &[&hello_fixture()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    refcli.assert_stayed_local();
    let published: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        published["hello"]["publishedTags"],
        serde_json::json!(["1", "1.0", "1.0.0", "latest"])
    );

    let ws = workspace(&serde_json::json!({
        "image": BUSYBOX_IMAGE,
        "remoteUser": "nobody",
        "features": { format!("{reg}/{ns}/hello:1"): { "greeting": marker } }
    }));
    let cache = tempfile::tempdir().unwrap();
    let out = devcell()
        .args(["up", "--workspace-folder"])
        .arg(ws.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .output()
        .unwrap();
    let result = last_json(&out);
    assert_eq!(result["outcome"], "success", "{}", stderr(&out));
    // Pull progress through the CLI reporter (plain lines: stderr is not a terminal).
    let progress = stderr(&out);
    assert!(
        progress.contains(&format!("[devcell] pulling manifest {reg}/{ns}/hello:1")),
        "{progress}"
    );
    let id = result["containerId"].as_str().unwrap();
    let image = Command::new("docker")
        .args(["inspect", "-f", "{{.Config.Image}}", id])
        .bounded_output()
        .unwrap();
    let image = String::from_utf8_lossy(&image.stdout).trim().to_string();
    ws.remove_image(&image);
    // Podman reports the name fully qualified (`docker.io/devcell/features:…`).
    assert!(
        image
            .strip_prefix("docker.io/")
            .unwrap_or(&image)
            .starts_with("devcell/features:"),
        "{image}"
    );

    let out = devcell()
        .args(["exec", "--workspace-folder"])
        .arg(ws.path())
        .args(["cat", "/usr/local/share/hello.txt"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{marker}\n"));

    // devcell fetched the reference's manifest by the digest the reference printed (its
    // content-addressed cache holds it under that digest), and locked that digest (0280).
    let digest = published["hello"]["digest"].as_str().unwrap();
    let cached = cache
        .path()
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"));
    assert!(cached.is_file(), "{} is not cached", cached.display());
    let lock =
        std::fs::read_to_string(ws.path().join(".devcontainer/devcontainer-lock.json")).unwrap();
    assert!(
        lock.contains(&format!("\"integrity\": \"{digest}\"")),
        "{lock}"
    );
}

/// The guard is effective: a request to a loopback host that is not exempted from the proxy
/// (`127.0.0.2`, so nothing could leave the machine even without the guard) is caught.
#[test]
fn the_reference_cli_guard_catches_other_hosts() {
    const TEST: &str = "the_reference_cli_guard_catches_other_hosts";
    let Some(refcli) = reference_cli(TEST) else {
        return;
    };
    let out = refcli_run(
        &refcli,
        &[
            "features",
            "info",
            "manifest",
            "127.0.0.2:9/devcell/guard/hello:1",
        ],
        &[],
    );
    assert!(!out.status.success());
    let seen = refcli.outside_requests();
    assert!(
        seen.iter().any(|r| r.starts_with("CONNECT 127.0.0.2:9 ")),
        "{seen:?}"
    );
}
