//! Snapshots of what every command prints, so a change to user-facing text or JSON is reviewed
//! as a diff (`tests/it/snapshots/`). This half needs no engine: `--help` of every command,
//! `read-configuration`, the Feature tools on local Features, `outdated`/`upgrade` without OCI
//! Features, and the main error shapes (bad JSON, a wrong type, no configuration, a bad flag).
//! The engine half is [`crate::cli_output_engine`].

use crate::assert_run_snapshot;
use crate::support::context::TestContext;
use crate::support::fixture;

/// Every command path, for `--help`.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["read-configuration"],
    &["up"],
    &["exec"],
    &["run-user-commands"],
    &["build"],
    &["set-up"],
    &["down"],
    &["stop"],
    &["features"],
    &["features", "package"],
    &["features", "publish"],
    &["features", "resolve-dependencies"],
    &["features", "info"],
    &["features", "generate-docs"],
    &["features", "test"],
    &["templates"],
    &["templates", "apply"],
    &["templates", "publish"],
    &["templates", "metadata"],
    &["templates", "generate-docs"],
    &["handoff"],
    &["status"],
    &["doctor"],
    &["delete"],
    &["audit"],
    &["env"],
    &["env", "show"],
    &["env", "export"],
    &["mail"],
    &["mail", "list"],
    &["mail", "show"],
    &["mail", "forward"],
    &["mail", "reject"],
    &["mail", "post"],
    &["verify"],
    &["outdated"],
    &["upgrade"],
    &["prune"],
];

#[test]
fn help_of_every_command() {
    let ctx = TestContext::new("snap-help");
    for command in COMMANDS {
        let mut args = command.to_vec();
        args.push("--help");
        let run = ctx.devcell(&args);
        run.ok();
        let name = if command.is_empty() {
            "help".to_string()
        } else {
            format!("help_{}", command.join("_"))
        };
        assert_run_snapshot!(name, Some(&ctx), run);
    }
}

#[test]
fn version() {
    let ctx = TestContext::new("snap-version");
    let run = ctx.devcell(&["--version"]);
    run.ok();
    assert_run_snapshot!("version", Some(&ctx), run);
}

const CONFIG: &str = r#"{
  // a comment
  "name": "snap-${localWorkspaceFolderBasename}",
  "image": "IMAGE",
  "remoteUser": "nobody",
  "containerEnv": {"FOLDER": "${containerWorkspaceFolder}", "HOME_VAR": "${localEnv:HOME}"},
  "remoteEnv": {"GREETING": "hello ${containerEnv:PATH}"},
  "forwardPorts": [3000, "db:5432"],
  "mounts": ["type=volume,source=cache,target=/cache"],
  "postCreateCommand": {"one": "echo one", "two": ["echo", "two"]},
  "customizations": {"vscode": {"extensions": ["a.b"]}}
}"#;

#[test]
fn read_configuration_json() {
    let ctx = TestContext::new("snap-read").config(CONFIG);
    let run = ctx.run("read-configuration", &[]);
    run.ok();
    assert_run_snapshot!("read_configuration", Some(&ctx), run);
}

#[test]
fn read_configuration_with_features_configuration() {
    let ctx = TestContext::new("snap-read-features")
        .config(r#"{"image": "IMAGE", "features": {"./hello": {"greeting": "hi"}}}"#);
    crate::support::copy_tree(
        &fixture("features/collection/src/hello"),
        &ctx.path().join(".devcontainer/hello"),
    );
    let run = ctx.run("read-configuration", &["--include-features-configuration"]);
    run.ok();
    assert_run_snapshot!("read_configuration_features", Some(&ctx), run);
}

#[test]
fn error_no_configuration() {
    let ctx = TestContext::new("snap-err-none");
    let run = ctx.run("read-configuration", &[]);
    run.failed();
    assert_run_snapshot!("error_no_configuration", Some(&ctx), run);
}

#[test]
fn error_bad_json_has_line_and_column() {
    let ctx = TestContext::new("snap-err-json");
    ctx.write(
        ".devcontainer/devcontainer.json",
        "{\n  \"image\": \"x\",\n  \"name\" \"missing colon\"\n}\n",
    );
    let run = ctx.run("read-configuration", &[]);
    run.failed();
    assert_run_snapshot!("error_bad_json", Some(&ctx), run);
}

#[test]
fn error_wrong_type_names_the_property() {
    let ctx = TestContext::new("snap-err-type").config(r#"{"image": 42}"#);
    let run = ctx.run("read-configuration", &[]);
    run.failed();
    assert_run_snapshot!("error_wrong_type", Some(&ctx), run);
}

#[test]
fn error_wrong_type_as_json_log() {
    let ctx = TestContext::new("snap-err-type-json").config(r#"{"image": 42}"#);
    let run = ctx.run("read-configuration", &["--log-format", "json"]);
    assert_run_snapshot!("error_wrong_type_log_json", Some(&ctx), run);
}

#[test]
fn error_image_and_dockerfile() {
    let ctx = TestContext::new("snap-err-both")
        .config(r#"{"image": "IMAGE", "build": {"dockerfile": "Dockerfile"}}"#);
    let run = ctx.run("read-configuration", &[]);
    assert_run_snapshot!("error_image_and_dockerfile", Some(&ctx), run);
}

#[test]
fn error_unknown_flag_and_subcommand() {
    let ctx = TestContext::new("snap-err-flag");
    let flag = ctx.devcell(&["up", "--no-such-flag"]);
    flag.failed();
    assert_run_snapshot!("error_unknown_flag", Some(&ctx), flag);
    let sub = ctx.devcell(&["no-such-command"]);
    sub.failed();
    assert_run_snapshot!("error_unknown_subcommand", Some(&ctx), sub);
}

#[test]
fn features_package_one_feature() {
    let ctx = TestContext::new("snap-package");
    crate::support::copy_tree(
        &fixture("features/collection/src/hello"),
        &ctx.path().join("src/hello"),
    );
    let out = ctx.path().join("out");
    let run = ctx.devcell(&[
        "features",
        "package",
        ctx.path().join("src/hello").to_str().unwrap(),
        "--output-folder",
        out.to_str().unwrap(),
    ]);
    run.ok();
    assert_run_snapshot!("features_package", Some(&ctx), run);
}

#[test]
fn features_package_collection() {
    let ctx = TestContext::new("snap-package-collection");
    crate::support::copy_tree(&fixture("features/collection/src"), &ctx.path().join("src"));
    let out = ctx.path().join("out");
    let run = ctx.devcell(&[
        "features",
        "package",
        ctx.path().join("src").to_str().unwrap(),
        "--output-folder",
        out.to_str().unwrap(),
    ]);
    run.ok();
    assert_run_snapshot!("features_package_collection", Some(&ctx), run);
}

#[test]
fn features_resolve_dependencies_local() {
    let ctx = TestContext::new("snap-resolve")
        .config(r#"{"image": "IMAGE", "features": {"./hello": {}}}"#);
    crate::support::copy_tree(
        &fixture("features/collection/src/hello"),
        &ctx.path().join(".devcontainer/hello"),
    );
    let run = ctx.run("features resolve-dependencies", &[]);
    assert_run_snapshot!("features_resolve_dependencies", Some(&ctx), run);
}

#[test]
fn outdated_and_upgrade_without_oci_features() {
    let ctx = TestContext::new("snap-outdated").config(r#"{"image": "IMAGE"}"#);
    let text = ctx.run("outdated", &[]);
    assert_run_snapshot!("outdated_text", Some(&ctx), text);
    let json = ctx.run("outdated", &["--output-format", "json"]);
    assert_run_snapshot!("outdated_json", Some(&ctx), json);
    let upgrade = ctx.run("upgrade", &["--dry-run"]);
    assert_run_snapshot!("upgrade_dry_run", Some(&ctx), upgrade);
}
