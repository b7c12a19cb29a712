//! `read-configuration` drop-in flags of `@devcontainers/cli` (refcli §1, §2.2, §2.5):
//! accepted flags, `--override-config`, `--additional-features`, `--id-label` /
//! `--container-id` against the real engine, and image `devcontainer.metadata` merging.

use crate::support::deadline::Bounded as _;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::refcli::reference_cli;
use crate::support::{assert_failed, devcell, read_configuration, stdout_json, unique};

/// A workspace with `.devcontainer/devcontainer.json` = `config`.
fn workspace(config: &Value) -> TestContext {
    TestContext::new("compat").config_json(config)
}

/// `devcell read-configuration <args…>` with the engine address passed through.
fn read(args: &[&str]) -> Output {
    let mut cmd = devcell();
    if let Ok(host) = std::env::var("DOCKER_HOST") {
        cmd.env("DOCKER_HOST", host);
    }
    cmd.arg("read-configuration")
        .args(args)
        .output()
        .expect("devcell runs")
}

fn ws_arg(ws: &Path) -> String {
    ws.to_string_lossy().into_owned()
}

/// Writes a local Feature `.devcontainer/<name>` with `devcontainer-feature.json` = `meta`.
fn local_feature(ws: &Path, name: &str, meta: &Value) {
    let dir = ws.join(".devcontainer").join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("devcontainer-feature.json"), meta.to_string()).expect("write");
    std::fs::write(dir.join("install.sh"), "#!/bin/sh\n").expect("write");
}

#[test]
fn reference_flags_are_accepted_and_change_nothing_without_a_container() {
    let ws = workspace(&json!({"image": "debian", "remoteEnv": {"A": "${containerEnv:X:d}"}}));
    let plain = stdout_json(&read_configuration(ws.path(), &[]));
    let w = ws_arg(ws.path());
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--docker-path",
        "docker",
        "--docker-compose-path",
        "docker-compose",
        "--user-data-folder",
        "/tmp/devcell-udf",
        "--log-format",
        "json",
        "--terminal-columns",
        "120",
        "--terminal-rows",
        "40",
        "--mount-git-worktree-common-dir",
        "--mount-workspace-git-root",
        "false",
    ]));
    assert_eq!(v["configuration"], plain["configuration"]);
    // Without a container `${containerEnv:…}` stays literal.
    assert_eq!(v["configuration"]["remoteEnv"]["A"], "${containerEnv:X:d}");
}

#[test]
fn id_label_must_be_name_equals_value() {
    let ws = workspace(&json!({"image": "debian"}));
    let w = ws_arg(ws.path());
    for bad in ["foo", "=x", "x="] {
        let out = read(&["--workspace-folder", &w, "--id-label", bad]);
        assert!(!out.status.success(), "`{bad}` accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("<name>=<value>"), "{err}");
    }
    let out = read(&["--workspace-folder", &w, "--terminal-columns", "80"]);
    assert!(
        !out.status.success(),
        "--terminal-columns without rows accepted"
    );
}

#[test]
fn override_config_takes_content_but_keeps_the_config_path() {
    let ws = workspace(&json!({"image": "from-file"}));
    local_feature(
        ws.path(),
        "local-f",
        &json!({"id": "local-f", "version": "1.0.0"}),
    );
    let dir = tempfile::tempdir().unwrap();
    let over = dir.path().join("override.json");
    std::fs::write(
        &over,
        r#"{ // comment
            "image": "from-override", "features": {"./local-f": {}}}"#,
    )
    .unwrap();
    let w = ws_arg(ws.path());
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--override-config",
        over.to_str().unwrap(),
        "--include-features-configuration",
    ]));
    assert_eq!(v["configuration"]["image"], "from-override");
    let config_path = ws.path().join(".devcontainer/devcontainer.json");
    assert_eq!(
        v["configuration"]["configFilePath"]["fsPath"],
        config_path.to_string_lossy().as_ref()
    );
    assert_eq!(
        v["featuresConfiguration"]["featureSets"][0]["sourceInformation"]["resolvedFilePath"],
        ws.path()
            .join(".devcontainer/local-f")
            .to_string_lossy()
            .as_ref()
    );

    // No devcontainer.json at all: the default location gives the path semantics.
    let empty = tempfile::tempdir().unwrap();
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &ws_arg(empty.path()),
        "--override-config",
        over.to_str().unwrap(),
    ]));
    assert_eq!(v["configuration"]["image"], "from-override");
    assert_eq!(
        v["configuration"]["configFilePath"]["fsPath"],
        empty
            .path()
            .join(".devcontainer/devcontainer.json")
            .to_string_lossy()
            .as_ref()
    );
    // A missing override file is an error naming it.
    let err = assert_failed(&read(&[
        "--workspace-folder",
        &w,
        "--override-config",
        "/nonexistent/override.json",
    ]));
    assert!(err.contains("/nonexistent/override.json"), "{err}");
}

#[test]
fn additional_features_join_the_features_configuration() {
    let ws = workspace(&json!({"image": "debian", "features": {"./a": {}}}));
    let option = json!({"type": "string", "default": "d"});
    local_feature(
        ws.path(),
        "a",
        &json!({"id": "a", "version": "1.0.0", "options": {"x": option}}),
    );
    local_feature(
        ws.path(),
        "b",
        &json!({"id": "b", "version": "1.0.0", "options": {"y": option}}),
    );
    let w = ws_arg(ws.path());
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--include-features-configuration",
        "--additional-features",
        r#"{"./a": {"x": "ignored"}, "./b": {"y": "1"}}"#,
    ]));
    let sets = v["featuresConfiguration"]["featureSets"]
        .as_array()
        .expect("featureSets");
    let ids: Vec<&str> = sets
        .iter()
        .map(|s| s["sourceInformation"]["userFeatureId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["./a", "./b"]);
    assert_eq!(sets[0]["features"][0]["value"], json!({}));
    assert_eq!(sets[1]["features"][0]["value"], json!({"y": "1"}));
    // The configuration itself is unchanged.
    assert_eq!(v["configuration"]["features"], json!({"./a": {}}));

    let err = assert_failed(&read(&[
        "--workspace-folder",
        &w,
        "--additional-features",
        "[1]",
    ]));
    assert!(err.contains("--additional-features"), "{err}");
}

#[test]
fn unreachable_engine_is_a_warning_not_an_error() {
    let ws = workspace(&json!({"image": "debian", "remoteEnv": {"A": "${devcontainerId}"}}));
    let out = devcell()
        .env("DOCKER_HOST", "unix:///nonexistent/devcell-test.sock")
        .args(["read-configuration", "--workspace-folder"])
        .arg(ws.path())
        .args(["--id-label", "a=b", "--include-merged-configuration"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert_eq!(v["configuration"]["remoteEnv"]["A"], "${devcontainerId}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not reachable"), "{err}");
}

/// A created (not started) busybox container with `labels` and `env`, removed when `ctx` is
/// dropped; returns its id.
fn create_container(ctx: &TestContext, labels: &[(&str, &str)], env: &[&str]) -> String {
    let mut cmd = Command::new("docker");
    cmd.args(["create", "--label", "devcell.test=1"]);
    for (k, v) in labels {
        cmd.arg("--label").arg(format!("{k}={v}"));
    }
    for e in env {
        cmd.arg("-e").arg(e);
    }
    let out = cmd
        .arg(BUSYBOX_IMAGE)
        .bounded_output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "docker create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    ctx.cleanup().container(&id);
    id
}

#[test]
fn id_label_finds_the_container_and_substitutes_from_it() {
    let Some(ctx) = TestContext::busybox("id_label_finds_the_container") else {
        return;
    };
    let id_value = unique("compat");
    let label_entries = json!([
        {"postCreateCommand": "echo from-label ${containerEnv:GREETING}", "remoteUser": "labeluser"},
    ]);
    let container = create_container(
        &ctx,
        &[
            ("devcell.compat.id", &id_value),
            ("devcontainer.metadata", &label_entries.to_string()),
        ],
        &["GREETING=hello", "EMPTY="],
    );
    let ws = workspace(&json!({
        "image": "debian",
        "postCreateCommand": "echo from-json",
        "remoteEnv": {"G": "${containerEnv:GREETING}", "D": "${containerEnv:MISSING:dflt}",
                      "ID": "${devcontainerId}"},
    }));
    let w = ws_arg(ws.path());
    let label = format!("devcell.compat.id={id_value}");
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--id-label",
        &label,
        "--include-merged-configuration",
    ]));
    let expected_id = devcell::config::id::devcontainer_id(
        &[("devcell.compat.id".to_owned(), id_value.clone())]
            .into_iter()
            .collect(),
    );
    let env = &v["configuration"]["remoteEnv"];
    assert_eq!(env["G"], "hello", "{v}");
    assert_eq!(env["D"], "dflt");
    assert_eq!(env["ID"], expected_id.as_str());
    let merged = &v["mergedConfiguration"];
    // The container carries the id labels: its label entries plus only the updateable
    // properties of devcontainer.json (hooks come from the label alone).
    assert_eq!(
        merged["postCreateCommands"],
        json!(["echo from-label hello"]),
        "{merged}"
    );
    assert_eq!(merged["remoteUser"], "labeluser");
    assert_eq!(merged["remoteEnv"]["G"], "hello");
    // With a container, no featuresConfiguration is computed (as the reference).
    assert!(v.get("featuresConfiguration").is_none());

    // --container-id selects the same container, whatever the labels say.
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--container-id",
        &container,
        "--id-label",
        "devcell.compat.other=x",
        "--include-merged-configuration",
    ]));
    assert_eq!(v["configuration"]["remoteEnv"]["G"], "hello");
    // The id labels given are not on the container: label entries, then devcontainer.json.
    assert_eq!(
        v["mergedConfiguration"]["postCreateCommands"],
        json!(["echo from-label hello", "echo from-json"])
    );

    // Only --id-label, no workspace: an empty configuration merged with the container's.
    let v = stdout_json(&read(&[
        "--id-label",
        &label,
        "--include-merged-configuration",
    ]));
    assert_eq!(v["configuration"], json!({}));
    assert!(v.get("workspace").is_none());
    assert_eq!(
        v["mergedConfiguration"]["postCreateCommands"],
        json!(["echo from-label hello"])
    );

    // No container with these labels: behaves as without the flag.
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--id-label",
        "devcell.compat.id=nobody-has-this",
    ]));
    assert_eq!(
        v["configuration"]["remoteEnv"]["G"],
        "${containerEnv:GREETING}"
    );
}

/// An image built from the busybox base with a `devcontainer.metadata` label, removed when `ctx`
/// is dropped; returns its tag.
fn labelled_image(ctx: &TestContext, label: &Value) -> String {
    let tag = format!("devcell-test/{}:1", unique("compat-label"));
    let dir = tempfile::tempdir().unwrap();
    // Dockerfile `LABEL` expands `$…`: escape it like the reference's generated Dockerfile.
    let escaped = label
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('$', "\\$");
    std::fs::write(
        dir.path().join("Dockerfile"),
        // The unique label gives every build its own image ID, so a concurrent run's `rmi -f`
        // of an identical build cannot remove this one mid-way.
        format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL devcell.test.image=\"{tag}\" devcontainer.metadata=\"{escaped}\"\n"
        ),
    )
    .unwrap();
    let build = || {
        Command::new("docker")
            .args(["build", "-q", "-t", &tag])
            .arg(dir.path())
            .bounded_output()
            .expect("docker runs")
    };
    let mut out = build();
    // Another test's prune of dangling images can remove the legacy builder's untagged
    // intermediate image mid-build ("unable to find image"): built once more.
    if !out.status.success()
        && String::from_utf8_lossy(&out.stderr).contains("unable to find image")
    {
        out = build();
    }
    assert!(
        out.status.success(),
        "docker build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ctx.remove_image(&tag);
    tag
}

#[test]
fn image_metadata_label_is_merged_for_image_configs() {
    let Some(ctx) = TestContext::busybox("image_metadata_label_is_merged") else {
        return;
    };
    let image = labelled_image(
        &ctx,
        &json!([
            {"postCreateCommand": "echo image ${localWorkspaceFolderBasename}", "capAdd": ["SYS_PTRACE"],
             "remoteUser": "imageuser"},
        ]),
    );
    let ws = workspace(&json!({"image": image, "postCreateCommand": "echo json"}));
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &ws_arg(ws.path()),
        "--include-merged-configuration",
    ]));
    let base = ws
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let merged = &v["mergedConfiguration"];
    assert_eq!(
        merged["postCreateCommands"],
        json!([format!("echo image {base}"), "echo json"]),
        "{merged}"
    );
    assert_eq!(merged["capAdd"], json!(["SYS_PTRACE"]));
    assert_eq!(merged["remoteUser"], "imageuser");
    // The Features configuration is printed only when asked for (spec-note 0452: the
    // reference also prints it alongside a container-less merge), so a merge never fetches.
    assert!(v.get("featuresConfiguration").is_none());
    let ws_f = workspace(&json!({"image": image, "features": {"ghcr.io/o/f/a:1": {}}}));
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &ws_arg(ws_f.path()),
        "--include-merged-configuration",
    ]));
    assert!(v.get("featuresConfiguration").is_none(), "{v}");

    // An image that is not present locally: a warning, merged without it.
    let ws = workspace(&json!({"image": "devcell-test/not-here:404", "postCreateCommand": "x"}));
    let out = read(&[
        "--workspace-folder",
        &ws_arg(ws.path()),
        "--include-merged-configuration",
    ]);
    let v = stdout_json(&out);
    assert_eq!(v["mergedConfiguration"]["postCreateCommands"], json!(["x"]));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not present locally"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Interop: with `--id-label` naming a container, devcell's `read-configuration` substitutes
/// and merges like the reference CLI (see `support::refcli`).
#[test]
fn id_label_lookup_matches_the_reference_cli() {
    let Some(ctx) = TestContext::busybox("id_label_lookup_matches_the_reference_cli") else {
        return;
    };
    let Some(refcli) = reference_cli("id_label_lookup_matches_the_reference_cli") else {
        return;
    };
    let id_value = unique("compat-interop");
    let label_entries = json!([
        {"postCreateCommand": "echo ${containerEnv:GREETING} ${devcontainerId}", "remoteUser": "u1",
         "capAdd": ["SYS_PTRACE"]},
    ]);
    let _container = create_container(
        &ctx,
        &[
            ("devcell.compat.id", &id_value),
            ("devcontainer.metadata", &label_entries.to_string()),
        ],
        &["GREETING=hello"],
    );
    let ws = workspace(&json!({
        "image": "debian",
        "postCreateCommand": "echo json",
        "remoteEnv": {"G": "${containerEnv:GREETING}", "ID": "${devcontainerId}"},
        "containerEnv": {"C": "${containerEnv:GREETING}"},
    }));
    let w = ws_arg(ws.path());
    let label = format!("devcell.compat.id={id_value}");
    let args = [
        "read-configuration",
        "--workspace-folder",
        &w,
        "--id-label",
        &label,
        "--include-merged-configuration",
    ];
    let theirs = refcli.command().args(args).long_output().unwrap();
    assert!(
        theirs.status.success(),
        "{}",
        String::from_utf8_lossy(&theirs.stderr)
    );
    refcli.assert_stayed_local();
    let theirs: Value = serde_json::from_slice(&theirs.stdout).unwrap();
    let ours = stdout_json(&read(&args[1..]));
    for key in ["remoteEnv", "containerEnv"] {
        assert_eq!(
            ours["configuration"][key], theirs["configuration"][key],
            "{key}"
        );
    }
    for key in ["postCreateCommands", "remoteUser", "capAdd", "remoteEnv"] {
        assert_eq!(
            ours["mergedConfiguration"][key], theirs["mergedConfiguration"][key],
            "{key}: ours {} theirs {}",
            ours["mergedConfiguration"], theirs["mergedConfiguration"]
        );
    }
    assert_eq!(
        ours.get("featuresConfiguration").is_some(),
        theirs.get("featuresConfiguration").is_some()
    );
}

/// Interop: for an image config whose image carries `devcontainer.metadata`, devcell's merged
/// configuration equals the reference CLI's on the merged properties.
#[test]
fn image_metadata_merge_matches_the_reference_cli() {
    let Some(ctx) = TestContext::busybox("image_metadata_merge_matches_the_reference_cli") else {
        return;
    };
    let Some(refcli) = reference_cli("image_metadata_merge_matches_the_reference_cli") else {
        return;
    };
    let image = labelled_image(
        &ctx,
        &json!([
            {"postCreateCommand": "echo ${localWorkspaceFolderBasename}", "remoteUser": "iu",
             "containerEnv": {"A": "1"}, "mounts": ["type=volume,source=v,target=/v"]},
            {"id": "ghcr.io/x/y/z:1", "init": true, "entrypoint": "/x.sh"},
        ]),
    );
    let ws = workspace(&json!({"image": image, "postCreateCommand": "echo json",
        "containerEnv": {"B": "2"}}));
    let w = ws_arg(ws.path());
    let args = [
        "read-configuration",
        "--workspace-folder",
        &w,
        "--include-merged-configuration",
    ];
    let theirs = refcli.command().args(args).long_output().unwrap();
    assert!(
        theirs.status.success(),
        "{}",
        String::from_utf8_lossy(&theirs.stderr)
    );
    refcli.assert_stayed_local();
    let theirs: Value = serde_json::from_slice(&theirs.stdout).unwrap();
    let ours = stdout_json(&read(&args[1..]));
    assert_eq!(
        ours["mergedConfiguration"], theirs["mergedConfiguration"],
        "ours {} theirs {}",
        ours["mergedConfiguration"], theirs["mergedConfiguration"]
    );
    assert_eq!(
        ours["featuresConfiguration"],
        theirs["featuresConfiguration"]
    );
}

/// `--mount-git-worktree-common-dir`: a worktree with a relative `gitdir:` keeps its position
/// relative to the repository in the container, and the common git dir gets its own mount.
#[test]
fn worktree_common_dir_layout_follows_the_reference() {
    let root = tempfile::tempdir().unwrap();
    let main_git = root.path().join("main/.git/worktrees/feature");
    std::fs::create_dir_all(&main_git).unwrap();
    let wt = root.path().join("wts/feature");
    std::fs::create_dir_all(wt.join(".devcontainer")).unwrap();
    std::fs::write(
        wt.join(".git"),
        "gitdir: ../../main/.git/worktrees/feature\n",
    )
    .unwrap();
    std::fs::write(
        wt.join(".devcontainer/devcontainer.json"),
        r#"{"image": "debian", "remoteEnv": {"W": "${containerWorkspaceFolder}"}}"#,
    )
    .unwrap();
    let w = ws_arg(&wt);
    let plain = stdout_json(&read(&["--workspace-folder", &w]));
    assert_eq!(plain["workspace"]["workspaceFolder"], "/workspaces/feature");
    assert!(plain["workspace"].get("additionalMountString").is_none());
    let args = [
        "read-configuration",
        "--workspace-folder",
        &w,
        "--mount-git-worktree-common-dir",
    ];
    let v = stdout_json(&read(&args[1..]));
    let root_text = root.path().to_string_lossy();
    assert_eq!(
        v["workspace"],
        json!({
            "workspaceFolder": "/workspaces/wts/feature",
            "workspaceMount": format!("type=bind,source={w},target=/workspaces/wts/feature"),
            "additionalMountString":
                format!("type=bind,source={root_text}/main/.git,target=/workspaces/main/.git"),
        })
    );
    assert_eq!(
        v["configuration"]["remoteEnv"]["W"],
        "/workspaces/wts/feature"
    );
    if let Some(refcli) = reference_cli("worktree_common_dir_layout_follows_the_reference") {
        let theirs = refcli.command().args(args).long_output().unwrap();
        assert!(theirs.status.success());
        refcli.assert_stayed_local();
        let theirs: Value = serde_json::from_slice(&theirs.stdout).unwrap();
        assert_eq!(v["workspace"], theirs["workspace"]);
        assert_eq!(
            v["configuration"]["remoteEnv"],
            theirs["configuration"]["remoteEnv"]
        );
    }
}

/// `--log-format json`: warnings and errors on stderr are the reference's JSON log events.
#[test]
fn log_format_json_writes_json_events_on_stderr() {
    let ws = workspace(&json!({"image": "debian", "notAProperty": 1}));
    let w = ws_arg(ws.path());
    let out = read(&["--workspace-folder", &w, "--log-format", "json"]);
    let v = stdout_json(&out);
    assert_eq!(v["configuration"]["image"], "debian");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!events.is_empty(), "expected a warning event");
    for e in &events {
        assert_eq!(e["type"], "text");
        assert!(e["timestamp"].as_u64().is_some());
    }
    assert!(
        events
            .iter()
            .any(|e| e["level"] == 4 && e["text"].as_str().unwrap().contains("notAProperty"))
    );

    let out = read(&[
        "--workspace-folder",
        "/nonexistent/devcell-ws",
        "--log-format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let e: Value = serde_json::from_str(stderr.lines().next().unwrap()).unwrap();
    assert_eq!(e["level"], 5);
    assert!(e["text"].as_str().unwrap().starts_with("error: "), "{e}");
}

/// `featuresConfiguration` with a Feature and its `dependsOn` dependency, against the reference
/// CLI run side by side (spec-note 0452): the same Feature sets in the same order, equal but
/// for the reference's temporary `cachePath` / `dstFolder`.
const NEEDS_A: &str = r#"{"id": "b", "version": "2.0.0", "options": {"flag": {"type": "boolean", "default": false}}, "dependsOn": {"./a": {"x": true}}}"#;

fn dependency_workspace() -> TestContext {
    let ws = workspace(&json!({"image": "debian", "features": {"./c": {}, "./b": {"flag": true}}}));
    local_feature(
        ws.path(),
        "a",
        &json!({"id": "a", "version": "1.0.0", "name": "A", "options": {"x": {"type": "boolean", "default": false}}, "containerEnv": {"A": "1"}, "capAdd": ["SYS_PTRACE"]}),
    );
    local_feature(ws.path(), "b", &serde_json::from_str(NEEDS_A).unwrap());
    local_feature(
        ws.path(),
        "c",
        &json!({"id": "c", "version": "0.1.0", "name": "C"}),
    );
    ws
}

#[test]
fn features_configuration_is_resolved_in_install_order() {
    let ws = dependency_workspace();
    let w = ws_arg(ws.path());
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--include-features-configuration",
    ]));
    let dc = ws.path().join(".devcontainer");
    let set = |id: &str, meta: Value| {
        json!({
            "sourceInformation": {"type": "file-path", "userFeatureId": format!("./{id}"),
                "resolvedFilePath": dc.join(id).to_string_lossy()},
            "features": [meta],
            "internalVersion": "2",
        })
    };
    let mut b: Value = serde_json::from_str(NEEDS_A).unwrap();
    b["name"] = json!("./b");
    b["value"] = json!({"flag": true});
    b["included"] = json!(true);
    b["consecutiveId"] = json!("b_2");
    let expected = json!({"featureSets": [
        set("a", json!({"id": "a", "version": "1.0.0", "name": "A",
            "options": {"x": {"type": "boolean", "default": false}}, "containerEnv": {"A": "1"},
            "capAdd": ["SYS_PTRACE"], "value": {"x": true}, "included": true, "consecutiveId": "a_0"})),
        set("c", json!({"id": "c", "version": "0.1.0", "name": "C", "value": {},
            "included": true, "consecutiveId": "c_1"})),
        set("b", b),
    ]});
    assert_eq!(v["featuresConfiguration"], expected);
    // The merged configuration carries the pulled-in dependency's metadata too (only the
    // local Features listed in `features` were merged before).
    let v = stdout_json(&read(&[
        "--workspace-folder",
        &w,
        "--include-features-configuration",
        "--include-merged-configuration",
    ]));
    assert_eq!(
        v["mergedConfiguration"]["capAdd"],
        json!(["SYS_PTRACE"]),
        "{v}"
    );

    let Some(refcli) = reference_cli("features_configuration_is_resolved_in_install_order") else {
        return;
    };
    let out = refcli
        .command()
        .args([
            "read-configuration",
            "--workspace-folder",
            &w,
            "--include-features-configuration",
        ])
        .long_output()
        .expect("reference CLI runs");
    refcli.assert_stayed_local();
    let mut reference = stdout_json(&out)["featuresConfiguration"].clone();
    reference.as_object_mut().unwrap().remove("dstFolder");
    for set in reference["featureSets"].as_array_mut().unwrap() {
        set["features"][0]
            .as_object_mut()
            .unwrap()
            .remove("cachePath");
    }
    assert_eq!(reference, expected);
}

#[test]
fn features_configuration_refuses_a_bare_id_with_the_local_hint() {
    let ws = workspace(&json!({"image": "debian", "features": {"myFeature": {}}}));
    let w = ws_arg(ws.path());
    let out = read(&["--workspace-folder", &w, "--include-features-configuration"]);
    let err = assert_failed(&out);
    assert!(
        err.contains("a bare name is not a Feature reference (legacy short ids are not supported)"),
        "{err}"
    );
    assert!(err.contains("./myFeature"), "{err}");
    // Without the flag nothing is resolved, so the same config reads.
    stdout_json(&read(&["--workspace-folder", &w]));
}

/// OCI Features in `featuresConfiguration` (a tag and the default `latest`), against the
/// reference CLI on the local test registry: the manifest, its digest, the parsed reference.
/// devcell leaves out the reference's temporary `cachePath`/`dstFolder` and `featureRef.scheme`
/// (spec-note 0452).
#[test]
fn oci_features_configuration_matches_the_reference_cli() {
    let Some(reg) = crate::support::test_registry() else {
        return;
    };
    let ns = format!("{}/features", unique("fcfg"));
    let published = crate::support::publish(
        &crate::support::fixture("features/collection/src"),
        &reg,
        &ns,
    );
    let digest = published["hello"]["digest"].as_str().unwrap().to_owned();
    // The reference reaches a local registry by plain HTTP only under the name `localhost`.
    let host = reg.replace("127.0.0.1", "localhost");
    let tagged = format!("{host}/{ns}/hello:1");
    let latest = format!("{host}/{ns}/hello");
    let ws = workspace(
        &json!({"image": "debian", "features": {&tagged: {"greeting": "hey"}, &latest: {}}}),
    );
    let w = ws_arg(ws.path());
    let cache = tempfile::tempdir().unwrap();
    let out = devcell()
        .env("XDG_CACHE_HOME", cache.path())
        .args([
            "read-configuration",
            "--workspace-folder",
            &w,
            "--include-features-configuration",
        ])
        .output()
        .unwrap();
    let v = stdout_json(&out)["featuresConfiguration"].clone();
    let sets = v["featureSets"].as_array().unwrap();
    let users: Vec<&str> = sets
        .iter()
        .map(|s| s["sourceInformation"]["userFeatureId"].as_str().unwrap())
        .collect();
    // Tags oldest to newest: `1` before `latest`.
    assert_eq!(users, [tagged.as_str(), latest.as_str()]);
    let first = &sets[0];
    assert_eq!(first["computedDigest"], digest.as_str());
    assert_eq!(
        first["sourceInformation"]["manifestDigest"],
        digest.as_str()
    );
    assert_eq!(
        first["sourceInformation"]["manifest"]["layers"][0]["mediaType"],
        "application/vnd.devcontainers.layer.v1+tar"
    );
    assert_eq!(
        first["sourceInformation"]["featureRef"],
        json!({"id": "hello", "owner": ns.split('/').next().unwrap(), "namespace": ns,
            "registry": host, "resource": latest, "path": format!("{ns}/hello"),
            "version": "1", "tag": "1"})
    );
    assert_eq!(first["features"][0]["value"], json!({"greeting": "hey"}));
    assert_eq!(first["features"][0]["consecutiveId"], "hello_0");
    assert_eq!(sets[1]["sourceInformation"]["featureRef"]["tag"], "latest");

    let Some(refcli) = reference_cli("oci_features_configuration_matches_the_reference_cli") else {
        return;
    };
    let out = refcli
        .command()
        .args([
            "read-configuration",
            "--workspace-folder",
            &w,
            "--include-features-configuration",
        ])
        .long_output()
        .expect("reference CLI runs");
    refcli.assert_stayed_local();
    let mut reference = stdout_json(&out)["featuresConfiguration"].clone();
    reference.as_object_mut().unwrap().remove("dstFolder");
    for set in reference["featureSets"].as_array_mut().unwrap() {
        set["features"][0]
            .as_object_mut()
            .unwrap()
            .remove("cachePath");
        set["sourceInformation"]["featureRef"]
            .as_object_mut()
            .unwrap()
            .remove("scheme");
    }
    assert_eq!(reference, v);
}
