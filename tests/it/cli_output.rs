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
    &["ports"],
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
    &["env", "import"],
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

/// `read-configuration` of one configuration: (context, devcontainer.json or `None` for
/// none, extra arguments, whether it succeeds, snapshot).
type ReadCase = (
    &'static str,
    Option<&'static str>,
    &'static [&'static str],
    Option<bool>,
    &'static str,
);

/// The output of `read-configuration` and its main error shapes: a configuration, none at
/// all, a wrong type (also as a JSON log) and both an image and a Dockerfile (exit status
/// in the snapshot only, `None`).
const READ_CASES: &[ReadCase] = &[
    (
        "snap-read",
        Some(CONFIG),
        &[],
        Some(true),
        "read_configuration",
    ),
    (
        "snap-err-none",
        None,
        &[],
        Some(false),
        "error_no_configuration",
    ),
    (
        "snap-err-type",
        Some(r#"{"image": 42}"#),
        &[],
        Some(false),
        "error_wrong_type",
    ),
    (
        "snap-err-type-json",
        Some(r#"{"image": 42}"#),
        &["--log-format", "json"],
        None,
        "error_wrong_type_log_json",
    ),
    (
        "snap-err-both",
        Some(r#"{"image": "IMAGE", "build": {"dockerfile": "Dockerfile"}}"#),
        &[],
        None,
        "error_image_and_dockerfile",
    ),
];

#[test]
fn read_configuration_and_its_errors() {
    for &(name, config, args, succeeds, snapshot) in READ_CASES {
        let mut ctx = TestContext::new(name);
        if let Some(config) = config {
            ctx = ctx.config(config);
        }
        let run = ctx.run("read-configuration", args);
        match succeeds {
            Some(true) => {
                run.ok();
            }
            Some(false) => {
                run.failed();
            }
            None => {}
        }
        assert_run_snapshot!(snapshot, Some(&ctx), run);
    }
}

/// A workspace whose configuration uses the local Feature `./hello` with `options`.
fn with_local_hello(name: &str, options: &str) -> TestContext {
    let ctx = TestContext::new(name).config(&format!(
        r#"{{"image": "IMAGE", "features": {{"./hello": {options}}}}}"#
    ));
    crate::support::copy_tree(
        &fixture("features/collection/src/hello"),
        &ctx.path().join(".devcontainer/hello"),
    );
    ctx
}

#[test]
fn read_configuration_with_features_configuration() {
    let ctx = with_local_hello("snap-read-features", r#"{"greeting": "hi"}"#);
    let run = ctx.run("read-configuration", &["--include-features-configuration"]);
    run.ok();
    assert_run_snapshot!("read_configuration_features", Some(&ctx), run);
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
fn error_unknown_flag_and_subcommand() {
    let ctx = TestContext::new("snap-err-flag");
    let flag = ctx.devcell(&["up", "--no-such-flag"]);
    flag.failed();
    assert_run_snapshot!("error_unknown_flag", Some(&ctx), flag);
    let sub = ctx.devcell(&["no-such-command"]);
    sub.failed();
    assert_run_snapshot!("error_unknown_subcommand", Some(&ctx), sub);
}

/// `features package` of one Feature and of a collection: (context, fixture folder copied to
/// the `src` path packaged, snapshot).
#[test]
fn features_package_one_feature_and_a_collection() {
    for (name, fixture_dir, packaged, snapshot) in [
        (
            "snap-package",
            "features/collection/src/hello",
            "src/hello",
            "features_package",
        ),
        (
            "snap-package-collection",
            "features/collection/src",
            "src",
            "features_package_collection",
        ),
    ] {
        let ctx = TestContext::new(name);
        crate::support::copy_tree(&fixture(fixture_dir), &ctx.path().join(packaged));
        let out = ctx.path().join("out");
        let run = ctx.devcell(&[
            "features",
            "package",
            ctx.path().join(packaged).to_str().unwrap(),
            "--output-folder",
            out.to_str().unwrap(),
        ]);
        run.ok();
        assert_run_snapshot!(snapshot, Some(&ctx), run);
    }
}

#[test]
fn features_resolve_dependencies_local() {
    let ctx = with_local_hello("snap-resolve", "{}");
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

/// `status --all` (spec-note 0439): with `--workspace-folder` it is a usage error naming both
/// flags; alone, over a state folder devcell never wrote, one envelope listing nothing, and
/// the state folder is not made.
#[test]
fn status_all_refuses_a_workspace_folder() {
    let ctx = TestContext::new("status-all").isolated();
    let run = ctx.devcell(&["status", "--all", "--workspace-folder", "."]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("--all and --workspace-folder are mutually exclusive"),
        "{}",
        run.stderr
    );
    let run = ctx.devcell(&["status", "--all", "--format", "json"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(v["result"]["workspaces"], serde_json::json!([]), "{v:#}");
    assert!(!ctx.state().exists(), "nothing made");
}
