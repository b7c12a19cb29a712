//! Snapshots of what the engine commands print (`tests/it/snapshots/`): the reference CLI's
//! operations on one dev container (`up` fresh and reused, `exec`, `run-user-commands`, `build`,
//! `set-up`, `down`, `read-configuration --include-merged-configuration`, `audit`) and the agent
//! product on one repository (`handoff --plan`, `handoff`, `status`, `delete`, `doctor`,
//! `prune --dry-run`), text and JSON. Needs the engine and `devcell-test/busybox:1`.

use serde_json::Value;

use crate::assert_run_snapshot;
use crate::support::context::{Run, TestContext, docker_lines};
use crate::support::git::git;
use crate::support::unique;

/// `doctor --format json` with only what is the same on every machine and run: the findings
/// about this context's own cache folder, the engine and cgroups (their messages name the
/// engine's version and the cgroup version, so only code and severity are kept); findings about
/// the shared engine's other images and containers, and the next actions for them, are dropped.
fn doctor_shape(mut run: Run) -> Run {
    let mut v: Value = run.json();
    let keep = ["engine_reachable", "cgroup_limits", "cache_dir"];
    let findings: Vec<Value> = v["result"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| keep.contains(&f["code"].as_str().unwrap_or_default()))
        .map(|f| {
            let mut f = f.clone();
            if f["code"] != "cache_dir" {
                f["message"] = Value::String("[MACHINE]".into());
            }
            f
        })
        .collect();
    v["result"]["findings"] = Value::Array(findings);
    v["result"]["healthy"] = Value::String("[MACHINE]".into());
    v["result"]["engine"] = Value::String("[MACHINE]".into());
    v["next_actions"] = Value::String("[MACHINE]".into());
    run.stdout = serde_json::to_string(&v).expect("JSON");
    run
}

/// Only devcell's own lines of stderr (`[devcell] …`, `warning:`, `error:`, and the hooks'
/// output): the engine's build output (steps, cache hits, its warnings) differs between engines
/// and runs, and so does whether devcell's content-addressed images are built now or were
/// already there (`building X`, the engine's steps, `built X` the first time; `using cached X`
/// or nothing after it): those lines are dropped.
fn devcell_lines(mut run: Run) -> Run {
    let mut out = String::new();
    let mut in_build = false;
    for line in run.stderr.lines() {
        if line.starts_with("[devcell] building ") {
            in_build = true;
        } else if line.starts_with("[devcell] built ") {
            in_build = false;
        } else if in_build && !line.starts_with("[devcell] ") {
            // The engine's build output.
        } else if !line.starts_with("[devcell] using cached ") {
            // A build with no `built` line (the `updateRemoteUserUID` layer, when no other
            // test built it first) ends at devcell's next line.
            in_build = false;
            out.push_str(line);
            out.push('\n');
        }
    }
    run.stderr = out;
    run
}

/// The busybox test image by its image ID (`sha256:…`), so `audit`'s reproducibility evidence
/// does not depend on whether another test has pushed the tag to a registry.
fn busybox_id() -> String {
    docker_lines(&[
        "image",
        "inspect",
        "-f",
        "{{.Id}}",
        crate::support::docker::BUSYBOX_IMAGE,
    ])
    .pop()
    .expect("the busybox image has an id")
}

/// Gives the workspace to `nobody` (65534) when the tests run as root, so `up` has no
/// ownership warning to print (the remote user owns the workspace, on every machine).
fn give_to_nobody(ctx: &TestContext) {
    if rustix::process::geteuid().is_root() {
        let status = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(ctx.path())
            .status()
            .expect("chown runs");
        assert!(status.success());
    }
}

/// A container's generated name (`docker inspect -f {{.Name}}`, without the `/`).
fn container_name(id: &str) -> String {
    docker_lines(&["inspect", "-f", "{{.Name}}", id])
        .pop()
        .unwrap_or_default()
        .trim_start_matches('/')
        .to_string()
}

const CONFIG: &str = r#"{
  "image": "BUSYBOX_ID",
  "remoteUser": "nobody",
  "containerEnv": {"FROM_CONFIG": "yes"},
  "remoteEnv": {"GREETING": "hello"},
  "onCreateCommand": "echo on-create-ran",
  "postCreateCommand": {"one": ["echo", "post-create-one"]},
  "postStartCommand": "echo post-start-ran",
  "postAttachCommand": "echo post-attach-ran"
}"#;

#[test]
fn spec_operations_on_one_container() {
    let Some(ctx) = TestContext::busybox("spec_operations_on_one_container") else {
        return;
    };
    let ctx = ctx.config(&CONFIG.replace("BUSYBOX_ID", &busybox_id()));
    give_to_nobody(&ctx);
    let snap = |name: &str, run: &Run| assert_run_snapshot!(name, Some(&ctx), run.clone());

    let up = ctx.run("up", &[]);
    up.ok();
    let id = up.last_json()["containerId"]
        .as_str()
        .expect("containerId")
        .to_string();
    snap("up_fresh", &devcell_lines(up.clone()));
    let again = ctx.run("up", &[]);
    again.ok();
    snap("up_reused", &again);
    let json_log = ctx.run("up", &["--log-format", "json"]);
    json_log.ok();
    snap("up_reused_log_json", &json_log);

    let exec = ctx.run("exec", &["sh", "-c", "echo out; echo err >&2; id -un"]);
    exec.ok();
    snap("exec", &exec);
    let exit = ctx.run("exec", &["sh", "-c", "exit 3"]);
    assert_eq!(exit.code, Some(3), "{}", exit.stderr);
    snap("exec_exit_code", &exit);
    // The engine's own message (its runtime's wording) is not devcell's: only that one was
    // printed, and the exit code.
    let mut missing = ctx.run("exec", &["no-such-program"]);
    assert!(missing.stdout.contains("no-such-program"), "{missing:?}");
    missing.stdout = "[THE ENGINE'S MESSAGE]\n".into();
    snap("exec_missing_program", &missing);

    let hooks = ctx.run("run-user-commands", &[]);
    hooks.ok();
    snap("run_user_commands", &hooks);

    let merged = ctx.run("read-configuration", &["--include-merged-configuration"]);
    merged.ok();
    snap("read_configuration_merged", &merged);

    let name = container_name(&id);
    let audit = ctx.devcell(&["audit", &id]);
    snap("audit_text", &audit.redact(&name, "[NAME]"));
    let audit = ctx.devcell(&["audit", &id, "--format", "json"]);
    snap("audit_json", &audit.redact(&name, "[NAME]"));

    let down = ctx.run("down", &[]);
    down.ok();
    snap("down", &down);
    let down = ctx.run("down", &["--remove"]);
    down.ok();
    snap("down_remove", &down);
    let none = ctx.run("exec", &["true"]);
    none.failed();
    snap("exec_no_container", &none);
}

#[test]
fn build_and_set_up() {
    let Some(ctx) = TestContext::busybox("build_and_set_up") else {
        return;
    };
    let ctx = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody", "postCreateCommand": "echo set-up-post-create"}"#);
    let tag = format!("devcell-snap/{}:1", unique("build"));
    ctx.remove_image(&tag);
    let build = ctx.run("build", &["--image-name", &tag]);
    build.ok();
    assert_run_snapshot!(
        "build",
        Some(&ctx),
        devcell_lines(build.redact(&tag, "[TAG]"))
    );

    // The audit score counts a registry digest on the image: push busybox once (as the
    // audit tests do) so the snapshot holds whichever test runs first.
    crate::audit::pinned_image();
    let label = format!("devcell.test.snap={}", unique("setup"));
    ctx.clean_label(&label);
    let started = docker_lines(&[
        "run",
        "-d",
        "--label",
        &label,
        crate::support::docker::BUSYBOX_IMAGE,
        "sleep",
        "600",
    ]);
    let id = started.last().expect("docker run printed the id").clone();
    let config = ctx.path().join(".devcontainer/devcontainer.json");
    let setup = ctx.devcell(&[
        "set-up",
        "--container-id",
        &id,
        "--config",
        config.to_str().unwrap(),
    ]);
    setup.ok();
    assert_run_snapshot!("set_up", Some(&ctx), setup);
}

/// A git repository with a devcontainer.json and a config file with agent `a` (`true`).
fn agent_workspace(test: &str, devcontainer: &str) -> Option<TestContext> {
    let ctx = TestContext::busybox(test)?
        .isolated()
        .at("repo")
        .config(devcontainer);
    git(ctx.path(), &["init", "-q"]);
    git(ctx.path(), &["add", "-A"]);
    git(ctx.path(), &["commit", "-q", "-m", "initial"]);
    std::fs::write(
        ctx.tmp().join("config.toml"),
        "[agents.a]\ncommand = [\"true\"]\nverify = [\"make test\"]\n",
    )
    .unwrap();
    Some(ctx)
}

/// Issue 28 item 5: `handoff --plan` lists a configuration's typo with its suggestion (text
/// and the JSON envelope's `warnings`, code `configuration`).
#[test]
fn the_plan_warns_about_a_typo_with_a_suggestion() {
    let Some(ctx) = agent_workspace(
        "the_plan_warns_about_a_typo_with_a_suggestion",
        r#"{"image": "IMAGE", "remoteUsr": "nobody"}"#,
    ) else {
        return;
    };
    const WARNING: &str = "unknown property `remoteUsr` (did you mean `remoteUser`?)";
    let config = ctx.tmp().join("config.toml");
    let config = config.to_str().unwrap();
    let text = ctx.run(
        "handoff",
        &["--agent", "a", "--config-file", config, "--plan"],
    );
    text.ok();
    assert!(text.stdout.contains(WARNING), "{}", text.stdout);
    let json = ctx.run(
        "handoff",
        &[
            "--agent",
            "a",
            "--config-file",
            config,
            "--plan",
            "--format",
            "json",
        ],
    );
    json.ok();
    let warnings = &json.json()["warnings"];
    assert!(
        warnings
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "configuration"
                && w["message"].as_str().unwrap().contains(WARNING)),
        "{warnings}"
    );
}

#[test]
fn agent_product_on_one_repository() {
    let Some(ctx) = agent_workspace(
        "agent_product_on_one_repository",
        r#"{"image": "IMAGE", "privileged": true}"#,
    ) else {
        return;
    };
    let config = ctx.tmp().join("config.toml");
    let config = config.to_str().unwrap();
    let handoff = |extra: &[&str]| {
        let mut args = vec!["--agent", "a", "--config-file", config];
        args.extend_from_slice(extra);
        ctx.run("handoff", &args)
    };
    let snap = |name: &str, run: Run| assert_run_snapshot!(name, Some(&ctx), run);

    // refused: privileged needs a grant
    snap("handoff_plan_refused_text", handoff(&["--plan"]));
    snap(
        "handoff_plan_refused_json",
        handoff(&["--plan", "--format", "json"]),
    );
    // privileged granted, root not: the image runs as root and names no user, so the plan
    // says devcell provides its own user (spec-note 0188)
    let provided = handoff(&["--plan", "--format", "json", "--allow", "privileged"]);
    assert_eq!(provided.code, Some(0), "{}", provided.stderr);
    let plan = &provided.json()["result"];
    assert_eq!(plan["providedUser"], "devcell", "{plan}");
    assert!(
        plan["permissionNotes"]
            .to_string()
            .contains("user provided by devcell"),
        "{plan}"
    );
    let grants = ["--allow", "privileged", "--allow", "root"];
    snap(
        "handoff_plan_granted_text",
        handoff(&[&["--plan"], &grants[..]].concat()),
    );
    snap(
        "handoff_plan_granted_json",
        handoff(&[&["--plan", "--format", "json"], &grants[..]].concat()),
    );
    let refused = handoff(&["--format", "json"]);
    assert_eq!(refused.code, Some(12), "{}", refused.stderr);
    snap("handoff_refused_json", refused);
    let host = handoff(&["--runtime", "host"]);
    host.ok();
    snap("handoff_host_text", host);

    snap("status_text", ctx.run("status", &[]));
    snap("status_json", ctx.run("status", &["--format", "json"]));
    snap(
        "doctor_json",
        doctor_shape(ctx.devcell(&["doctor", "--format", "json"])),
    );
    snap("delete_text", ctx.run("delete", &[]));
    snap("delete_json", ctx.run("delete", &["--format", "json"]));
    snap(
        "prune_dry_run_one_image",
        ctx.devcell(&[
            "prune",
            "--dry-run",
            "--image",
            "devcell/features:0000000000000000000000000000000000000000000000000000000000000000",
        ]),
    );
}
