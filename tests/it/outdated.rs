//! `devcell outdated` and `devcell upgrade` against the shared local registry
//! (`DEVCELL_TEST_REGISTRY`): Features published under a unique namespace.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::support::{copy_tree, devcell, fixture, stdout_json, test_registry, unique};

/// Publishes the hello fixture Feature with `version` to `<reg>/<ns>/hello`.
fn publish_hello(reg: &str, ns: &str, version: &str) {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("features/collection/src/hello"), dir.path());
    let path = dir.path().join("devcontainer-feature.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["version"] = Value::from(version);
    std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let out = devcell()
        .args(["features", "publish"])
        .arg(dir.path())
        .args(["-r", reg, "-n", ns])
        .output()
        .expect("devcell runs");
    // Not a terminal: the CLI reporter writes plain status lines on stderr.
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.contains(&format!("publishing {reg}/{ns}/hello {version}")),
        "{stderr}"
    );
    let out = stdout_json(&out);
    assert_eq!(out["hello"]["version"], version, "{out}");
}

fn run(cmd: &str, ws: &Path, cache: &Path, extra: &[&str]) -> Output {
    devcell()
        .arg(cmd)
        .arg("--workspace-folder")
        .arg(ws)
        .arg("--cache-dir")
        .arg(cache)
        .args(extra)
        .output()
        .expect("devcell runs")
}

fn ok_stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "devcell failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn outdated_and_upgrade_follow_the_registry_and_the_lockfile() {
    let Some(reg) = test_registry() else { return };
    let ns = unique("outdated");
    for v in ["1.2.3", "1.3.0", "2.0.0"] {
        publish_hello(&reg, &ns, v);
    }
    let feature = format!("{reg}/{ns}/hello:1");
    let pinned = format!("{reg}/{ns}/hello:1.2");
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer/local")).unwrap();
    std::fs::write(
        ws.path()
            .join(".devcontainer/local/devcontainer-feature.json"),
        r#"{"id": "local", "version": "0.1.0"}"#,
    )
    .unwrap();
    std::fs::write(
        ws.path().join(".devcontainer/devcontainer.json"),
        json!({"image": "debian", "features": {&feature: {}, "./local": {}}}).to_string(),
    )
    .unwrap();
    let lock_path = ws.path().join(".devcontainer/devcontainer-lock.json");

    // No lockfile: current = wanted = newest 1.x; local Features are left out. Progress goes
    // to stderr through the CLI reporter (plain lines: not a terminal).
    let out = run(
        "outdated",
        ws.path(),
        cache.path(),
        &["--output-format", "json"],
    );
    let progress = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        progress.contains(&format!("[devcell] listing tags of {reg}/{ns}/hello")),
        "{progress}"
    );
    let v = stdout_json(&out);
    assert_eq!(
        v,
        json!({"features": {&feature: {"current": "1.3.0", "wanted": "1.3.0", "wantedMajor": "1",
            "latest": "2.0.0", "latestMajor": "2"}}})
    );

    // upgrade --dry-run prints the lockfile and writes nothing.
    let out = run("upgrade", ws.path(), cache.path(), &["--dry-run"]);
    let progress = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        progress.contains(&format!("[devcell] pulling manifest {feature}")),
        "{progress}"
    );
    let text = ok_stdout(&out);
    let lock: Value = serde_json::from_str(&text).expect("lockfile JSON on stdout");
    assert_eq!(lock["features"][&feature]["version"], "1.3.0", "{lock}");
    assert!(!lock_path.exists());

    // upgrade writes it; a newer 1.x then shows as wanted while current stays locked.
    ok_stdout(&run("upgrade", ws.path(), cache.path(), &[]));
    let lock: Value = serde_json::from_slice(&std::fs::read(&lock_path).unwrap()).unwrap();
    assert_eq!(lock["features"][&feature]["version"], "1.3.0");
    publish_hello(&reg, &ns, "1.4.0");
    let v = stdout_json(&run(
        "outdated",
        ws.path(),
        cache.path(),
        &["--output-format", "json"],
    ));
    assert_eq!(v["features"][&feature]["current"], "1.3.0");
    assert_eq!(v["features"][&feature]["wanted"], "1.4.0");
    let table = ok_stdout(&run("outdated", ws.path(), cache.path(), &[]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].starts_with("Feature"), "{table}");
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells,
        [
            format!("{reg}/{ns}/hello").as_str(),
            "1.3.0",
            "1.4.0",
            "2.0.0"
        ]
    );
    ok_stdout(&run("upgrade", ws.path(), cache.path(), &[]));
    let lock: Value = serde_json::from_slice(&std::fs::read(&lock_path).unwrap()).unwrap();
    assert_eq!(lock["features"][&feature]["version"], "1.4.0");

    // A minor pin wants the newest patch of that minor.
    std::fs::write(
        ws.path().join(".devcontainer/devcontainer.json"),
        json!({"image": "debian", "features": {&pinned: {}}}).to_string(),
    )
    .unwrap();
    std::fs::remove_file(&lock_path).unwrap();
    let v = stdout_json(&run(
        "outdated",
        ws.path(),
        cache.path(),
        &["--output-format", "json"],
    ));
    assert_eq!(v["features"][&pinned]["wanted"], "1.2.3", "{v}");
    assert_eq!(v["features"][&pinned]["latest"], "2.0.0");

    // Hidden `--feature`/`--target-version` (Dependabot): re-pins devcontainer.json, then
    // regenerates the lockfile; with `--dry-run` the config is left alone.
    let config_path = ws.path().join(".devcontainer/devcontainer.json");
    let before = std::fs::read_to_string(&config_path).unwrap();
    let repo = format!("{reg}/{ns}/hello");
    let text = ok_stdout(&run(
        "upgrade",
        ws.path(),
        cache.path(),
        &["--dry-run", "--feature", &repo, "--target-version", "2"],
    ));
    let lock: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        lock["features"][format!("{repo}:2")]["version"],
        "2.0.0",
        "{lock}"
    );
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), before);
    ok_stdout(&run(
        "upgrade",
        ws.path(),
        cache.path(),
        &["-f", &repo, "-v", "2"],
    ));
    let after = std::fs::read_to_string(&config_path).unwrap();
    let config: Value = serde_json::from_str(&after).unwrap();
    assert_eq!(config["features"], json!({format!("{repo}:2"): {}}));
    let lock: Value = serde_json::from_slice(&std::fs::read(&lock_path).unwrap()).unwrap();
    assert_eq!(lock["features"][format!("{repo}:2")]["version"], "2.0.0");
    // A malformed version is refused before anything is touched.
    let out = run(
        "upgrade",
        ws.path(),
        cache.path(),
        &["--feature", &repo, "--target-version", "2.x"],
    );
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), after);
}

/// `outdated`, `upgrade` and `features resolve-dependencies` reach Feature registries through
/// the user's `[registries]` mirrors (issue 11): the configuration names a registry nobody
/// listens on (`127.0.0.1:1`), the settings file mirrors it to the local registry. Without the
/// settings file the same commands cannot reach the Feature, so the mirror is what served it.
/// `read-configuration --include-features-configuration` fetches the Features with the user's
/// settings (`[registries] mirrors` of `$XDG_CONFIG_HOME/devcell/config.toml`), like
/// `outdated` and `resolve-dependencies`; without them the Feature is not reached.
#[test]
fn read_configuration_fetches_features_through_the_settings_mirrors() {
    let Some(reg) = test_registry() else { return };
    let ns = unique("read-mirrored");
    publish_hello(&reg, &ns, "1.2.3");
    let unreachable = "127.0.0.1:1";
    let feature = format!("{unreachable}/{ns}/hello:1");
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    std::fs::write(
        ws.path().join(".devcontainer/devcontainer.json"),
        json!({"image": "debian", "features": {&feature: {}}}).to_string(),
    )
    .unwrap();
    let read = |settings: &str| {
        let config_home = tempfile::tempdir().unwrap();
        std::fs::create_dir(config_home.path().join("devcell")).unwrap();
        std::fs::write(config_home.path().join("devcell/config.toml"), settings).unwrap();
        // a fresh cache: no earlier resolution serves the Feature
        let cache_home = tempfile::tempdir().unwrap();
        devcell()
            .args(["read-configuration", "--include-features-configuration"])
            .arg("--workspace-folder")
            .arg(ws.path())
            .env("XDG_CONFIG_HOME", config_home.path())
            .env("XDG_CACHE_HOME", cache_home.path())
            .output()
            .expect("devcell runs")
    };
    let v = stdout_json(&read(&format!(
        "[registries]\nmirrors = {{ \"{unreachable}\" = \"{reg}\" }}\n"
    )));
    let sets = v["featuresConfiguration"]["featureSets"]
        .as_array()
        .unwrap_or_else(|| panic!("no Feature sets: {v}"));
    assert_eq!(sets.len(), 1, "{v}");
    let source = &sets[0]["sourceInformation"];
    assert_eq!(source["type"], "oci", "{v}");
    // the registry as written: the mirror is a transport detail
    assert_eq!(source["featureRef"]["registry"], unreachable, "{v}");
    assert_eq!(sets[0]["features"][0]["version"], "1.2.3", "{v}");

    let out = read("");
    assert!(
        !out.status.success(),
        "read without the mirror: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn outdated_upgrade_and_resolve_dependencies_use_the_settings_mirrors() {
    let Some(reg) = test_registry() else { return };
    let ns = unique("mirrored");
    for v in ["1.2.3", "2.0.0"] {
        publish_hello(&reg, &ns, v);
    }
    let unreachable = "127.0.0.1:1";
    let feature = format!("{unreachable}/{ns}/hello:1");
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    std::fs::write(
        ws.path().join(".devcontainer/devcontainer.json"),
        json!({"image": "debian", "features": {&feature: {}}}).to_string(),
    )
    .unwrap();
    let settings_dir = tempfile::tempdir().unwrap();
    let settings = settings_dir.path().join("config.toml");
    std::fs::write(
        &settings,
        format!("[registries]\nmirrors = {{ \"{unreachable}\" = \"{reg}\" }}\n"),
    )
    .unwrap();
    let settings = settings.to_str().unwrap();

    let cache = tempfile::tempdir().unwrap();
    let v = stdout_json(&run(
        "outdated",
        ws.path(),
        cache.path(),
        &["--output-format", "json", "--config-file", settings],
    ));
    assert_eq!(
        v,
        json!({"features": {&feature: {"current": "1.2.3", "wanted": "1.2.3", "wantedMajor": "1",
            "latest": "2.0.0", "latestMajor": "2"}}})
    );

    let text = ok_stdout(&run(
        "upgrade",
        ws.path(),
        cache.path(),
        &["--dry-run", "--config-file", settings],
    ));
    let lock: Value = serde_json::from_str(&text).expect("lockfile JSON on stdout");
    assert_eq!(lock["features"][&feature]["version"], "1.2.3", "{lock}");
    // The pin names the registry as written: the mirror is a transport detail.
    let resolved = lock["features"][&feature]["resolved"].as_str().unwrap();
    assert!(
        resolved.starts_with(&format!("{unreachable}/{ns}/hello@sha256:")),
        "{resolved}"
    );

    let resolve = |cache: &Path, extra: &[&str]| {
        devcell()
            .args(["features", "resolve-dependencies", "--workspace-folder"])
            .arg(ws.path())
            .arg("--cache-dir")
            .arg(cache)
            .args(extra)
            .output()
            .expect("devcell runs")
    };
    let fresh = tempfile::tempdir().unwrap();
    let v = stdout_json(&resolve(fresh.path(), &["--config-file", settings]));
    let id = v["installOrder"][0]["id"].as_str().unwrap_or_default();
    assert!(id.starts_with(&format!("{unreachable}/{ns}/hello")), "{v}");

    // The control: no settings, no mirror: nothing reaches the Feature (fresh caches, so no
    // cached resolution serves it either).
    let empty = settings_dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.to_str().unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let out = resolve(fresh.path(), &["--config-file", empty]);
    assert!(!out.status.success(), "resolved without the mirror");
    let fresh = tempfile::tempdir().unwrap();
    let out = run(
        "upgrade",
        ws.path(),
        fresh.path(),
        &["--dry-run", "--config-file", empty],
    );
    assert!(!out.status.success(), "upgraded without the mirror");
    let fresh = tempfile::tempdir().unwrap();
    let out = run(
        "outdated",
        ws.path(),
        fresh.path(),
        &["--output-format", "json", "--config-file", empty],
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() || !shown.contains("2.0.0"),
        "outdated saw the registry without the mirror: {shown}"
    );
}
