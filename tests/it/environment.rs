//! The environment record (spec-note 0520) against the real engine and the local registry:
//! `up --environment-out` writes it, `env show` prints the one kept, `up --environment`
//! recreates it (a Feature whose tag moved at its recorded digest), and refuses (exit 18) when
//! a recorded digest is gone or the configuration changed (each difference named), unless
//! `--allow-drift`.
//!
//! Needs `DEVCELL_TEST_REGISTRY` and the engine (both required under `DEVCELL_TEST_ENGINE=1`).

use std::path::Path;

use serde_json::Value;

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::{publish, test_registry, unique};

const CONFIG: &str = ".devcontainer/devcontainer.json";

/// Where the `envdemo` Feature writes its version.
const VERSION_FILE: &str = "/usr/local/share/envdemo-version";

/// Deletes a manifest from the test registry (its `delete` is enabled): the digest is gone.
fn delete_manifest(registry: &str, repository: &str, digest: &str) {
    let out = std::process::Command::new("curl")
        .args([
            "-fsS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "DELETE",
        ])
        .arg(format!(
            "http://{registry}/v2/{repository}/manifests/{digest}"
        ))
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "202", "{out:?}");
}

/// Publishes a Feature `envdemo` at `version` to `<registry>/<namespace>`; returns its digest.
fn publish_envdemo(registry: &str, namespace: &str, version: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("envdemo");
    std::fs::create_dir(&f).unwrap();
    std::fs::write(
        f.join("devcontainer-feature.json"),
        format!(r#"{{"id": "envdemo", "version": "{version}", "name": "Env demo"}}"#),
    )
    .unwrap();
    std::fs::write(
        f.join("install.sh"),
        format!("#!/bin/sh\nmkdir -p /usr/local/share\necho {version} > {VERSION_FILE}\n"),
    )
    .unwrap();
    let out = publish(&f, registry, namespace);
    out["envdemo"]["digest"]
        .as_str()
        .unwrap_or_else(|| panic!("publish result: {out}"))
        .to_string()
}

/// `devcell <command> --workspace-folder <ws> <args>` (no lockfile, so Features are resolved
/// afresh): exit code, the last stdout line as JSON, stderr.
fn run(ctx: &TestContext, command: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = ctx.output(command, args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON line ({e}): {stdout}\n{stderr}"));
    (out.status.code(), value, stderr)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_record_written_by_up_recreates_its_features_by_digest_and_refuses_drift() {
    let Some(ctx) = TestContext::busybox("a_record_written_by_up_recreates") else {
        return;
    };
    let Some(registry) = test_registry() else {
        return;
    };
    let ctx = ctx.isolated();
    let ns = unique("env");
    let first = publish_envdemo(&registry, &ns, "1.0.0");
    let key = format!("{registry}/{ns}/envdemo:1");
    std::fs::create_dir(ctx.path().join(".devcontainer")).unwrap();
    let config = format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "features": {{"{key}": {{}}}}, "customizations": {{"devcell": {{"verify": ["true"]}}}}}}"#
    );
    ctx.write(CONFIG, &config);
    let records = tempfile::tempdir().unwrap();
    let record = records.path().join("env.json");
    let record_arg = record.to_str().unwrap();

    // 1. `up --environment-out`: the record, valid against its schema, kept for `env show`.
    let (code, result, stderr) = run(
        &ctx,
        "up",
        &["--no-lockfile", "--environment-out", record_arg],
    );
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    let written = read(&record);
    assert_eq!(written["schemaVersion"], 1);
    assert_eq!(written["command"], "up");
    assert_eq!(written["features"][&key]["digest"], first.as_str());
    assert_eq!(written["security"]["profile"], "hardened");
    assert_eq!(written["verify"], serde_json::json!(["true"]));
    assert_eq!(
        written["configuration"]["file"],
        ".devcontainer/devcontainer.json"
    );
    assert!(
        written["configuration"]["files"][CONFIG]
            .as_str()
            .is_some_and(|h| h.starts_with("sha256:")),
        "{written}"
    );
    // the local test image has no registry digest: said, with its id
    assert!(written["baseImage"]["localId"].is_string(), "{written}");
    assert!(written["baseImage"]["notReproducible"].is_string());
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/environment.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(jsonschema::is_valid(&schema, &written), "{written}");
    let (code, shown, stderr) = run(&ctx, "env show", &["--format", "json"]);
    assert_eq!(code, Some(0), "{shown}\n{stderr}");
    assert_eq!(shown["result"], written);

    // 2. Out -> in: the same inputs recreate it without a drift warning.
    let (code, result, stderr) = run(
        &ctx,
        "up",
        &[
            "--no-lockfile",
            "--remove-existing-container",
            "--environment",
            record_arg,
        ],
    );
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    assert!(!stderr.contains("drift"), "{stderr}");

    // 3. The Feature's tag moved: the record still recreates the recorded Feature, fetched
    //    by its recorded digest (not the tag), without a drift warning.
    let second = publish_envdemo(&registry, &ns, "1.0.1");
    assert_ne!(first, second);
    let (code, result, stderr) = run(
        &ctx,
        "up",
        &[
            "--no-lockfile",
            "--remove-existing-container",
            "--environment",
            record_arg,
        ],
    );
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    assert!(!stderr.contains("drift"), "{stderr}");
    let (code, version, stderr) = ctx.sh(&format!("cat {VERSION_FILE}"));
    assert_eq!((code, version.trim()), (0, "1.0.0"), "{stderr}");
    let (_, shown, _) = run(&ctx, "env show", &["--format", "json"]);
    assert_eq!(shown["result"]["features"][&key]["digest"], first.as_str());
    // without the record, the tag's new target
    let (code, result, stderr) = run(
        &ctx,
        "up",
        &["--no-lockfile", "--remove-existing-container"],
    );
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    let (code, version, stderr) = ctx.sh(&format!("cat {VERSION_FILE}"));
    assert_eq!((code, version.trim()), (0, "1.0.1"), "{stderr}");

    // 4. The recorded digest is gone from the registry (and the Feature cache is empty):
    //    refused with exit 18 naming the Feature, its digest and the record; nothing removed
    //    or created.
    delete_manifest(&registry, &format!("{ns}/envdemo"), &first);
    let containers = ctx.containers();
    let cold = tempfile::tempdir().unwrap();
    let (code, refused, stderr) = run(
        &ctx,
        "up",
        &[
            "--no-lockfile",
            "--remove-existing-container",
            "--cache-dir",
            cold.path().to_str().unwrap(),
            "--environment",
            record_arg,
            "--allow-drift",
        ],
    );
    assert_eq!(code, Some(18), "{refused}\n{stderr}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "Feature `{key}` is not available at its recorded digest `{first}`"
        )) && message.contains(record_arg),
        "{refused}"
    );
    assert_eq!(ctx.containers(), containers, "nothing removed or created");

    // 5. A changed configuration: its file and its content are named. (One the judgement
    // accepts: a refused one is refused before the drift check reads anything, F7.)
    ctx.write(
        CONFIG,
        &config.replace(r#"["true"]"#, r#"["true", "true"]"#),
    );
    let (code, refused, stderr) = run(&ctx, "up", &["--no-lockfile", "--environment", record_arg]);
    assert_eq!(code, Some(18), "{refused}\n{stderr}");
    let fields: Vec<&str> = refused["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["field"].as_str())
        .collect();
    assert!(
        fields.contains(&"configuration.configuration"),
        "{fields:?}"
    );
    assert!(
        fields.contains(&&*format!("configuration.files.{CONFIG}")),
        "{fields:?}"
    );
    assert_eq!(ctx.containers(), containers, "nothing removed or created");

    // 6. `--allow-drift`: a warning per difference instead; the recorded Feature, gone from
    //    the registry, is still in the Feature cache: recreated from it.
    let (code, result, stderr) = run(
        &ctx,
        "up",
        &[
            "--no-lockfile",
            "--remove-existing-container",
            "--environment",
            record_arg,
            "--allow-drift",
        ],
    );
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    assert!(stderr.contains("environment drift (allowed)"), "{stderr}");
    let (code, version, stderr) = ctx.sh(&format!("cat {VERSION_FILE}"));
    assert_eq!((code, version.trim()), (0, "1.0.0"), "{stderr}");
}

#[test]
fn verify_runs_every_command_in_the_container_and_fails_when_one_does() {
    let Some(ctx) = TestContext::busybox("verify_runs_every_command") else {
        return;
    };
    let ctx = ctx.isolated();
    std::fs::create_dir(ctx.path().join(".devcontainer")).unwrap();
    ctx.write(
        CONFIG,
        &format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "customizations": {{"devcell": {{"verify": ["test -d /workspaces && echo here", "echo boom >&2; exit 3"]}}}}}}"#
        ),
    );
    let (code, result, stderr) = run(&ctx, "up", &[]);
    assert_eq!(code, Some(0), "{result}\n{stderr}");

    let (code, report, stderr) = run(&ctx, "verify", &["--format", "json"]);
    assert_eq!(code, Some(1), "{report}\n{stderr}");
    let results = report["result"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{report}");
    assert_eq!(results[0]["command"], "test -d /workspaces && echo here");
    assert_eq!(results[0]["exitCode"], 0);
    assert_eq!(results[0]["outputTail"], "here\n");
    assert_eq!(results[1]["exitCode"], 3);
    assert!(results[1]["outputTail"].as_str().unwrap().contains("boom"));
    assert!(results[1]["durationMs"].is_u64());

    // the text form names each, and the failure's output
    let out = ctx.output("verify", &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FAIL echo boom >&2; exit 3 (exit 3"),
        "{text}"
    );
    assert!(text.contains("boom"), "{text}");
}

/// A verify command printing without end and one that never ends (issue 25, class 6): the
/// first's kept output is bounded (its tail, after a marker naming the bytes dropped), the
/// second is stopped at `--timeout` with a clear failure, and no process of it is left in the
/// container. Before, `verify` kept every byte in memory and waited for ever.
#[test]
fn verify_keeps_a_bounded_tail_and_stops_a_command_at_its_deadline() {
    let Some(ctx) = TestContext::busybox("verify_bounded_and_deadline") else {
        return;
    };
    let ctx = ctx.isolated();
    std::fs::create_dir(ctx.path().join(".devcontainer")).unwrap();
    ctx.write(
        CONFIG,
        &format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "customizations": {{"devcell": {{"verify": ["yes devcell-flood | head -c 20000000; echo; echo last-line", "sleep 7777 & sleep 7778; echo never"]}}}}}}"#
        ),
    );
    let (code, result, stderr) = run(&ctx, "up", &[]);
    assert_eq!(code, Some(0), "{result}\n{stderr}");

    let started = std::time::Instant::now();
    let (code, report, stderr) = run(&ctx, "verify", &["--format", "json", "--timeout", "5"]);
    assert_eq!(code, Some(1), "{report}\n{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "verify took {:?}",
        started.elapsed()
    );
    let results = report["result"]["results"].as_array().unwrap();
    let flood = &results[0];
    assert_eq!(flood["exitCode"], 0, "{report}");
    assert_eq!(flood["timedOut"], false);
    let tail = flood["outputTail"].as_str().unwrap();
    assert!(tail.len() < 8192, "kept {} bytes", tail.len());
    assert!(tail.starts_with("[devcell: "), "{tail:.200}");
    assert!(tail.ends_with("last-line\n"), "{tail:.200}");
    assert!(
        flood["droppedBytes"].as_u64().unwrap() > 19_000_000,
        "{report:.500}"
    );

    let stuck = &results[1];
    assert_eq!(stuck["timedOut"], true, "{report:.2000}");
    assert_eq!(stuck["exitCode"], 124);
    assert!(!stuck["outputTail"].as_str().unwrap().contains("never"));
    assert!(stderr.contains("deadline"), "{stderr}");

    // nothing of the stopped command runs on in the container
    let ps = ctx.output("exec", &["ps", "-o", "args"]);
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(!ps.contains("sleep 777"), "{ps}");

    // the text form says what happened and what to change
    let out = ctx.output("verify", &["--timeout", "3"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FAIL sleep 7777 & sleep 7778; echo never (timed out after"),
        "{text}"
    );
    assert!(text.contains("--timeout"), "{text}");
}

/// The record files (`<hash>.json`) of the context's state folder, by hash.
fn record_hashes(ctx: &TestContext) -> Vec<String> {
    let mut hashes: Vec<String> = std::fs::read_dir(ctx.state().join("environments"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(name.strip_suffix(".json")?.to_string())
        })
        .collect();
    hashes.sort();
    hashes
}

/// `prune --environments` (spec-note 0520): of two `up` records of one workspace, the
/// replaced one (made old) is listed by `--dry-run`, then removed; the workspace's last record
/// and a file that is not a readable record are kept, each with its reason, and `env show`
/// still prints the last.
#[test]
fn prune_environments_removes_a_replaced_record_and_keeps_the_last_and_unreadable() {
    let Some(ctx) = TestContext::busybox("prune_environments_removes") else {
        return;
    };
    let ctx = ctx.isolated();
    let config = |verify: &str| {
        format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "customizations": {{"devcell": {{"verify": ["{verify}"]}}}}}}"#
        )
    };
    let out = tempfile::tempdir().unwrap();
    let out = out.path().join("env.json");
    let out = out.to_str().unwrap();
    ctx.write(CONFIG, &config("true"));
    let (code, result, stderr) = run(&ctx, "up", &["--environment-out", out]);
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    let [replaced] = record_hashes(&ctx).try_into().unwrap();
    ctx.write(CONFIG, &config("false"));
    let (code, result, stderr) = run(&ctx, "up", &["--environment-out", out]);
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    let last = record_hashes(&ctx)
        .into_iter()
        .find(|h| *h != replaced)
        .expect("a second record");
    let environments = ctx.state().join("environments");
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let unreadable = environments.join(format!("{}.json", "0".repeat(32)));
    std::fs::write(&unreadable, "not a record").unwrap();
    for hash in [&replaced, &last, &"0".repeat(32)] {
        std::fs::File::options()
            .write(true)
            .open(environments.join(format!("{hash}.json")))
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    }

    let prune = |args: &[&str]| {
        let run = ctx.devcell(&[&["prune", "--environments", "--format", "json"], args].concat());
        run.ok();
        run.json()
    };
    let dry = prune(&["--dry-run"]);
    assert_eq!(dry["ok"], true, "{dry}");
    assert_eq!(dry["result"]["dryRun"], true, "{dry}");
    let removed = dry["result"]["removed"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{dry}");
    assert_eq!(removed[0]["hash"], replaced.as_str());
    assert_eq!(removed[0]["command"], "up");
    let kept = dry["result"]["kept"].as_array().unwrap();
    let because = |hash: &str| {
        kept.iter()
            .find(|k| k["hash"] == hash)
            .and_then(|k| k["keptBecause"].as_str())
            .unwrap_or_else(|| panic!("{hash} not kept: {dry}"))
            .to_string()
    };
    assert_eq!(because(&last), "it is a workspace's last record");
    assert!(
        because(&"0".repeat(32)).starts_with("it cannot be read"),
        "{dry}"
    );
    assert_eq!(
        dry["next_actions"][0]["command"],
        serde_json::json!(["devcell", "prune", "--environments"]),
        "{dry}"
    );
    assert!(environments.join(format!("{replaced}.json")).exists());

    let done = prune(&[]);
    assert_eq!(done["result"]["dryRun"], false, "{done}");
    assert_eq!(done["result"]["removed"], dry["result"]["removed"]);
    assert!(!environments.join(format!("{replaced}.json")).exists());
    assert!(
        unreadable.exists(),
        "an unreadable file is reported, not removed"
    );
    let (code, shown, stderr) = run(&ctx, "env show", &["--format", "json"]);
    assert_eq!(code, Some(0), "{shown}\n{stderr}");
    assert_eq!(
        shown["result"]["verify"],
        serde_json::json!(["false"]),
        "{shown}"
    );
}

/// `env export --format agent-runner` (spec-note 0522): the running container of `up` as an
/// agent-runner `mode: existing` definition. Checked against agent-runner's definition
/// schema as its repository publishes it (schema version 1, strict): only its keys, each
/// required one present; and against the engine: the container's name, and every expected
/// mount one of the container's real bind mounts (the workspace's among them, read-write).
#[test]
fn env_export_describes_the_running_container_for_agent_runner() {
    let Some(ctx) = TestContext::busybox("env_export_agent_runner") else {
        return;
    };
    let ctx = ctx.isolated();
    ctx.write(
        CONFIG,
        &format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
    );
    let none = ctx.run("env export", &[]);
    assert!(!none.success(), "no container yet");
    let result = ctx.up(&[]);
    let id = result["containerId"].as_str().unwrap();

    let out = ctx.output("env export", &["--format", "agent-runner", "--name", "app"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = exported
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let allowed = [
        "schemaVersion",
        "name",
        "kind",
        "engine",
        "cwd",
        "env",
        "extraExecArgs",
        "mode",
        "container",
        "expectedMounts",
    ];
    assert!(keys.iter().all(|k| allowed.contains(k)), "{exported}");
    assert_eq!(exported["schemaVersion"], 1);
    assert_eq!(exported["kind"], "container");
    assert_eq!(exported["mode"], "existing");
    assert_eq!(exported["name"], "app");
    let engine = if crate::support::engine::engine_is_podman() {
        "podman"
    } else {
        "docker"
    };
    assert_eq!(exported["engine"], engine);
    let (ok, name) = crate::support::engine::docker(&["inspect", "-f", "{{.Name}}", id]);
    assert!(ok, "{name}");
    assert_eq!(exported["container"], name.trim().trim_start_matches('/'));
    let folder = ctx.path().file_name().unwrap().to_str().unwrap();
    assert_eq!(exported["cwd"], format!("/workspaces/{folder}"));

    let (ok, mounts) = crate::support::engine::docker(&["inspect", "-f", "{{json .Mounts}}", id]);
    assert!(ok, "{mounts}");
    let mounts: Vec<Value> = serde_json::from_str(mounts.trim()).unwrap();
    let expected = exported["expectedMounts"].as_array().unwrap();
    assert!(!expected.is_empty(), "{exported}");
    for m in expected {
        let mut keys: Vec<&String> = m.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["containerPath", "hostPath", "mode"], "{m}");
        let real = mounts
            .iter()
            .find(|r| r["Type"] == "bind" && r["Destination"] == m["containerPath"])
            .unwrap_or_else(|| panic!("{m} is no mount of {mounts:?}"));
        assert_eq!(real["Source"], m["hostPath"]);
        assert_eq!(real["RW"] == true, m["mode"] == "rw", "{m}");
    }
    let workspace = expected
        .iter()
        .find(|m| m["containerPath"] == exported["cwd"])
        .unwrap_or_else(|| panic!("no workspace mount: {exported}"));
    assert_eq!(workspace["mode"], "rw");
    let canonical = std::fs::canonicalize(ctx.path()).unwrap();
    assert_eq!(workspace["hostPath"], canonical.to_str().unwrap());
    // attack finding J3: agent-runner's exec runs as devcell's numeric ids, never the name
    assert_eq!(
        exported["extraExecArgs"],
        serde_json::json!(["--user", "65534:65534"]),
        "{exported}"
    );
}

/// Attack finding J3: the container `up` made binds the workspace's host `.git` read-write;
/// exported to agent-runner, its agent would write the host's git configuration, which git
/// runs on the user's next `git status`. The export is refused unless the user accepts it
/// (`--allow-host-git`), and the refusal writes nothing. Since attack M7 (spec-note 0446) `up`
/// binds `.git` read-only under `hardened` unless `--allow workspace-git:rw`: the container is
/// made with that grant, as a user who commits inside it would.
#[test]
fn env_export_refuses_a_container_that_can_write_the_host_git_directory() {
    let Some(ctx) = TestContext::busybox("env_export_host_git") else {
        return;
    };
    let ctx = ctx.isolated();
    ctx.write(
        CONFIG,
        &format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
    );
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ctx.path())
        .status()
        .unwrap();
    assert!(init.success());
    ctx.up(&["--allow", "workspace-git:rw"]);
    let refused = ctx.output("env export", &["--format", "agent-runner"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(refused.stdout.is_empty(), "nothing written on a refusal");
    assert!(
        stderr.contains(".git") && stderr.contains("--allow-host-git"),
        "{stderr}"
    );
    let accepted = ctx.output("env export", &["--allow-host-git"]);
    assert!(
        accepted.status.success(),
        "{}",
        String::from_utf8_lossy(&accepted.stderr)
    );
}

/// Attack L7 (spec-note 0522): a Compose service whose bind-backed named volume
/// (`driver_opts: {type: none, o: bind, device: <workspace>/projects}`) shows `projects/a/.git`
/// read-write was exported: volumes were not walked, and the volume counted as covering the
/// `.git` below the workspace bind. The export is refused now, naming it, and writes nothing:
/// agent-runner's agent never gets the container that could write the host's git configuration.
/// (`up` leaves `.git` writable only with `--allow workspace-git:rw` since spec-note 0446.)
#[test]
fn env_export_refuses_a_bind_backed_volume_showing_a_host_git_directory() {
    let Some(ctx) = TestContext::busybox("env_export_volume_git") else {
        return;
    };
    let ctx = ctx.isolated().delete_on_drop();
    let root = std::fs::canonicalize(ctx.path()).unwrap();
    std::fs::create_dir_all(root.join("projects/a")).unwrap();
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(root.join("projects/a"))
        .status()
        .unwrap();
    assert!(init.success());
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: sleep 100000\n    volumes:\n      \
             - ..:/workspaces/w\n      - {{type: volume, source: proj, target: /workspaces/w/projects}}\n\
             volumes:\n  proj: {{driver_opts: {{type: none, o: bind, device: \"{}\"}}}}\n",
            root.join("projects").display()
        ),
    );
    ctx.write(
        CONFIG,
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspaces/w"}"#,
    );
    ctx.up(&["--allow", "workspace-git:rw"]);
    for id in ctx.containers() {
        let project = crate::support::context::docker_lines(&[
            "inspect",
            "--format",
            "{{index .Config.Labels \"com.docker.compose.project\"}}",
            &id,
        ]);
        if let Some(project) = project.first().filter(|p| !p.is_empty()) {
            ctx.clean_label(&format!("com.docker.compose.project={project}"));
        }
    }
    let refused = ctx.output("env export", &["--format", "agent-runner"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(refused.stdout.is_empty(), "nothing written on a refusal");
    assert!(
        stderr.contains("projects/a/.git") && stderr.contains("--allow-host-git"),
        "{stderr}"
    );
}

/// `env import` of an agent-runner `mode: managed` file (spec-note 0523): `capAdd` and
/// `sessionMounts` are listed and refused by default (exit 12, the report in the error's
/// `details`, nothing written); granted, `--write` writes the configuration, and never over an
/// existing one. No engine.
#[test]
fn env_import_refuses_what_hardened_does_not_grant_and_writes_only_a_new_configuration() {
    let ctx = TestContext::new("env-import");
    let file = ctx.path().join("agent-env.yaml");
    std::fs::write(
        &file,
        "schemaVersion: 1\nkind: container\nmode: managed\nimage: node:22\ncwd: \"{{cwd}}\"\n\
         sessionMounts: [claude]\nsecurity:\n  capAdd: [NET_ADMIN]\n\
         lifecycle:\n  afterStart:\n    - kind: command\n      target: container\n      command: npm\n      args: [ci]\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let config = ctx.path().join(".devcontainer/devcontainer.json");
    let refused = ctx.run("env import", &[file, "--write", "--format", "json"]);
    assert_eq!(refused.code, Some(12), "{}", refused.stderr);
    let env = refused.json();
    assert_eq!(env["error"]["code"], "permission_required", "{env}");
    let requests = env["error"]["details"]["requests"]
        .as_array()
        .unwrap()
        .clone();
    let fields: Vec<&str> = requests
        .iter()
        .map(|r| r["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["security.capAdd[0]", "sessionMounts.claude"],
        "{env}"
    );
    assert!(requests.iter().all(|r| r["status"] == "refused"), "{env}");
    assert!(
        refused.stderr.contains("--allow cap:NET_ADMIN"),
        "{}",
        refused.stderr
    );
    assert!(!config.exists(), "a refusal writes nothing");

    let grants = [
        "--allow",
        "cap:NET_ADMIN",
        "--allow",
        "mount:/home/tester/.claude/projects",
    ];
    let args = |extra: &[&'static str]| -> Vec<&str> {
        let mut a = vec![file, "--write", "--format", "json"];
        a.extend(grants);
        a.extend(extra);
        a
    };
    let written = ctx.run("env import", &args(&[]));
    assert_eq!(written.code, Some(0), "{}", written.stderr);
    let result = &written.json()["result"];
    assert_eq!(result["written"], config.to_str().unwrap(), "{result}");
    let on_disk: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(on_disk, result["configuration"]);
    assert_eq!(on_disk["image"], "node:22");
    assert_eq!(
        on_disk["customizations"]["devcell"]["afterStart"],
        serde_json::json!(["('npm' 'ci')"])
    );
    assert_eq!(result["cleanup"]["value"], "terminal");

    let again = ctx.run("env import", &args(&[]));
    assert_ne!(again.code, Some(0), "{}", again.stdout);
    assert!(again.stderr.contains("never replaces"), "{}", again.stderr);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(kept, on_disk);

    let bad = ctx.run("env import", &[&file.replace("agent-env", "missing")]);
    assert_ne!(bad.code, Some(0));
}

/// Issue 29, item 3 (spec-note 0524): a container someone else started (`docker run`, binding
/// a temporary workspace) is handed to an agent: audited, a wrong `--expect-mount` refused
/// before any session, the agent run in it (its file is in the workspace), reported as external
/// by `status` and `doctor`, and after `delete` still running, the same container (same id,
/// same start time).
#[test]
fn handoff_of_a_container_devcell_did_not_create_leaves_it_running_after_delete() {
    let Some(ctx) = TestContext::busybox("handoff_external_container") else {
        return;
    };
    let ctx = ctx.isolated();
    ctx.write("README.md", "the task\n");
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    let ws = ws.to_str().unwrap();
    let config = ctx.tmp().join("config.toml");
    std::fs::write(
        &config,
        "[agents.writer]\ncommand = [\"sh\", \"-c\", \"pwd > agent-was-here && cat README.md >> agent-was-here\"]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    // Its owner runs it as a non-root user who owns the workspace: an agent that would be
    // root there is refused under `hardened` (attack M6, below).
    let chown = std::process::Command::new("chown")
        .args(["-R", "1000:1000", ws])
        .status()
        .unwrap();
    assert!(chown.success());
    let c = crate::support::docker::TestContainer::run_with(
        &[
            "--network",
            "none",
            "-u",
            "1000:1000",
            "-v",
            &format!("{ws}:/src"),
        ],
        BUSYBOX_IMAGE,
        &["sleep", "600"],
    );
    let started = c.inspect("{{.State.StartedAt}}");
    let unchanged = |when: &str| {
        assert_eq!(c.inspect("{{.State.Running}}"), "true", "{when}");
        assert_eq!(c.inspect("{{.State.StartedAt}}"), started, "{when}");
        assert_eq!(c.inspect("{{.Id}}"), c.id, "{when}");
    };
    let handoff = |expect: &str| {
        ctx.output(
            "handoff",
            &[
                "--agent",
                "writer",
                "--config-file",
                config,
                "--container",
                &c.id,
                "--expect-mount",
                expect,
                "--format",
                "json",
            ],
        )
    };
    let status = || {
        let (code, v, stderr) = run(&ctx, "status", &["--format", "json"]);
        assert_eq!(code, Some(0), "{v}\n{stderr}");
        v["result"].clone()
    };

    // A wrong expected mount: refused (exit 2) before a session, the container untouched.
    let out = handoff(&format!("{ws}:/elsewhere"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("mounts nothing at `/elsewhere`"),
        "{stderr}"
    );
    assert!(!ctx.path().join("agent-was-here").exists());
    assert_eq!(status()["sessions"], serde_json::json!([]));
    unchanged("after the refusal");

    // The right one: audited, the agent runs in the workspace's folder of the container.
    let out = handoff(&format!("{ws}:/src:rw"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = &v["result"];
    assert_eq!(result["containerId"], c.id.as_str(), "{v}");
    assert_eq!(result["plan"]["container"]["action"], "external", "{v}");
    assert_eq!(result["plan"]["cwd"], "/src", "{v}");
    assert_eq!(result["network"], "none", "{v}");
    assert_eq!(result["plan"]["profile"], "hardened", "{v}");
    assert!(
        stderr.contains("has more than the `hardened` profile allows"),
        "the audit's findings are reported: {stderr}"
    );
    let written = std::fs::read_to_string(ctx.path().join("agent-was-here")).unwrap();
    assert_eq!(written, "/src\nthe task\n");
    unchanged("after the handoff");

    // `status` and `doctor` say it is someone else's.
    let st = status();
    assert_eq!(st["sessions"][0]["external"], true, "{st}");
    assert_eq!(st["externalContainers"][0]["id"], c.id.as_str(), "{st}");
    assert!(st["recordedContainer"].is_null(), "{st}");
    let doctor = ctx.devcell(&["doctor", "--format", "json"]);
    let doctor: Value = serde_json::from_str(doctor.stdout.lines().last().unwrap()).unwrap();
    let findings = doctor["result"]["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["code"] == "external_container"
            && f["message"].as_str().unwrap().contains(&c.id[..12])),
        "{doctor}"
    );

    // `delete` forgets it: still running, the same container.
    let (code, v, stderr) = run(&ctx, "delete", &["--format", "json"]);
    assert_eq!(code, Some(0), "{v}\n{stderr}");
    assert_eq!(
        v["result"]["kept"]["externalContainers"][0],
        c.id.as_str(),
        "{v}"
    );
    assert!(
        !v["result"]["removed"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == c.id.as_str()),
        "{v}"
    );
    unchanged("after delete");
    assert!(status()["externalContainers"].is_null(), "forgotten");

    // The same container run as root: the agent would be root with the engine's default
    // capabilities, so the handoff is refused (exit 2) and the agent runs nothing (M6).
    let as_root = crate::support::docker::TestContainer::run_with(
        &["--network", "none", "-v", &format!("{ws}:/src")],
        BUSYBOX_IMAGE,
        &["sleep", "600"],
    );
    std::fs::remove_file(ctx.path().join("agent-was-here")).unwrap();
    let out = ctx.output(
        "handoff",
        &[
            "--agent",
            "writer",
            "--config-file",
            config,
            "--container",
            &as_root.id,
            "--expect-mount",
            &format!("{ws}:/src:rw"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the agent would run as root"), "{stderr}");
    assert!(stderr.contains("--allow root"), "{stderr}");
    assert!(!ctx.path().join("agent-was-here").exists(), "the agent ran");
}

/// A named volume the test made, removed when dropped (after the containers using it).
struct TestVolume(String);

impl Drop for TestVolume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["volume", "rm", "-f", &self.0])
            .output();
    }
}

/// Issue 29 item 2 (spec-note 0526): `handoff --plan --container ID` of a container devcell
/// did not create prints what the handoff would do there (its mounts as the host sees them, a
/// bind-backed volume as the folder it binds; its user; the agent's argv, context file and
/// git) and does nothing: no exec in the container (the engine's events name none, as they do
/// after a real handoff), no session, no context file, the container running as before. The
/// same container run as root: the plan refuses as the handoff does, and `--allow root` shows
/// the root user. Then the handoff's environment record (spec-note 0527): marked external,
/// refused by `--environment`, and `env export` names the container instead.
#[test]
fn handoff_plan_of_a_container_devcell_did_not_create_changes_nothing() {
    let Some(ctx) = TestContext::busybox("handoff_plan_external") else {
        return;
    };
    let ctx = ctx.isolated();
    ctx.write("README.md", "the task\n");
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    let ws = ws.to_str().unwrap();
    let cache = ctx.tmp().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let cache = std::fs::canonicalize(cache).unwrap();
    let config = ctx.tmp().join("config.toml");
    std::fs::write(
        &config,
        "[agents.writer]\ncommand = [\"sh\", \"-c\", \"echo hi > agent-was-here\"]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let chown = std::process::Command::new("chown")
        .args(["-R", "1000:1000", ws])
        .status()
        .unwrap();
    assert!(chown.success());
    let volume = TestVolume(unique("devcell-test-plan"));
    let made = std::process::Command::new("docker")
        .args([
            "volume",
            "create",
            "--opt",
            "type=none",
            "--opt",
            "o=bind",
            "--opt",
        ])
        .arg(format!("device={}", cache.display()))
        .arg(&volume.0)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let start = |user: &[&str]| {
        let mut options = vec!["--network", "none"];
        options.extend_from_slice(user);
        let bind = format!("{ws}:/src");
        let vol = format!("{}:/cache:ro", volume.0);
        options.extend_from_slice(&["-v", &bind, "-v", &vol]);
        crate::support::docker::TestContainer::run_with(&options, BUSYBOX_IMAGE, &["sleep", "600"])
    };
    let c = start(&["-u", "1000:1000"]);
    let started = c.inspect("{{.State.StartedAt}}");
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .saturating_sub(1)
        .to_string();
    // every exec the engine created in `c` since the test began (its events, kept by the engine)
    let execs = |c: &crate::support::docker::TestContainer| {
        let until = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 1;
        let out = std::process::Command::new("docker")
            .args(["events", "--since", &since, "--until", &until.to_string()])
            .args(["--filter", &format!("container={}", c.id)])
            .args(["--format", "{{.Action}}"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|a| a.starts_with("exec_create"))
            .count()
    };
    let plan = |id: &str, extra: &[&str], format: &str| {
        let mut args = vec![
            "--plan",
            "--agent",
            "writer",
            "--config-file",
            config,
            "--container",
            id,
            "--format",
            format,
        ];
        args.extend_from_slice(extra);
        ctx.output("handoff", &args)
    };
    let nothing_happened = |when: &str| {
        assert_eq!(execs(&c), 0, "no exec ran {when}");
        assert_eq!(c.inspect("{{.State.Running}}"), "true", "{when}");
        assert_eq!(c.inspect("{{.State.StartedAt}}"), started, "{when}");
        for file in ["agent-was-here", ".devcell/context.json", "AGENTS.md"] {
            assert!(!ctx.path().join(file).exists(), "{file} written {when}");
        }
        let (code, v, stderr) = run(&ctx, "status", &["--format", "json"]);
        assert_eq!(code, Some(0), "{v}\n{stderr}");
        assert_eq!(
            v["result"]["sessions"],
            serde_json::json!([]),
            "{when}: {v}"
        );
    };

    let out = plan(&c.id, &[], "json");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["result"];
    assert_eq!(p["container"]["action"], "external", "{v}");
    assert_eq!(p["container"]["id"], c.id.as_str(), "{v}");
    assert_eq!(p["cwd"], "/src", "{v}");
    assert_eq!(p["contextPath"], "/src/.devcell/context.json", "{v}");
    assert_eq!(
        p["command"],
        serde_json::json!(["sh", "-c", "echo hi > agent-was-here"]),
        "{v}"
    );
    assert_eq!(p["profile"], "hardened", "{v}");
    assert_eq!(p["network"], "none", "{v}");
    assert_eq!(p["external"]["remoteUser"], "1000:1000", "{v}");
    assert_eq!(p["external"]["root"], false, "{v}");
    assert!(
        p["external"]["git"]
            .as_str()
            .unwrap()
            .contains("no container git directories"),
        "{v}"
    );
    let mounts = p["mounts"].as_array().unwrap();
    let has = |source: &str, target: &str, read_only: bool| {
        mounts.iter().any(|m| {
            m["source"] == source
                && m["target"] == target
                && m["readOnly"] == read_only
                && m["purpose"] == "external"
        })
    };
    assert!(has(ws, "/src", false), "{v}");
    // the bind-backed volume, as the host sees it: the folder it binds
    assert!(has(cache.to_str().unwrap(), "/cache", true), "{v}");
    nothing_happened("after the JSON plan");

    let out = plan(&c.id, &[], "text");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("container  external"), "{text}");
    assert!(text.contains("user       1000:1000"), "{text}");
    assert!(
        text.contains("git        no container git directories"),
        "{text}"
    );
    assert!(
        text.contains(&format!("mount      {ws} -> /src (external)")),
        "{text}"
    );
    nothing_happened("after the text plan");

    // The plan says what devcell will and will not do with it, and what the container already
    // has beyond `hardened` is reported, not offered as a grant (the handoff only warns).
    assert!(
        text.contains("lifecycle  devcell runs the hooks")
            && text.contains("never starts, stops or removes it"),
        "{text}"
    );
    let ptrace = start(&["-u", "1000:1000", "--cap-add", "SYS_PTRACE"]);
    let out = plan(&ptrace.id, &[], "text");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("permission") && l.contains("SYS_PTRACE"))
        .unwrap_or_else(|| panic!("no SYS_PTRACE permission line: {text}"));
    assert!(line.contains("already in the container"), "{line}");
    assert!(!line.contains("grant with"), "{line}");
    assert_eq!(execs(&ptrace), 0, "no exec ran in the SYS_PTRACE container");

    // The same container as root: refused as the handoff refuses it; granted, shown as root.
    let as_root = start(&[]);
    let out = plan(&as_root.id, &[], "json");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the agent would run as root"), "{stderr}");
    let out = plan(&as_root.id, &["--allow", "root"], "json");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["external"]["root"], true, "{v}");
    assert_eq!(execs(&as_root), 0, "no exec ran in the root container");
    nothing_happened("after the root plans");

    // The check above can fail: the handoff itself does exec in the container.
    let record_file = ctx.tmp().join("external-environment.json");
    let out = ctx.output(
        "handoff",
        &[
            "--agent",
            "writer",
            "--config-file",
            config,
            "--container",
            &c.id,
            "--environment-out",
            record_file.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(execs(&c), 0, "the handoff execs");
    assert!(ctx.path().join("agent-was-here").exists());

    // Its environment record (spec-note 0527): marked external, the container's image by id,
    // its user and its mounts as the host sees them; the same in `env show --session`.
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = v["result"]["session"]["id"].as_str().unwrap().to_string();
    let (code, shown, stderr) = run(
        &ctx,
        "env show",
        &["--session", &session, "--format", "json"],
    );
    assert_eq!(code, Some(0), "{shown}\n{stderr}");
    let record = &shown["result"];
    assert_eq!(record["command"], "handoff", "{shown}");
    assert_eq!(record["external"]["container"], c.id.as_str(), "{shown}");
    assert_eq!(record["external"]["user"], "1000:1000", "{shown}");
    assert_eq!(record["image"]["id"], c.inspect("{{.Image}}"), "{shown}");
    let mounts = record["external"]["mounts"].as_array().unwrap();
    assert!(
        mounts.iter().any(|m| m["type"] == "bind"
            && m["source"] == cache.to_str().unwrap()
            && m["target"] == "/cache"
            && m["readOnly"] == true),
        "{shown}"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&record_file).unwrap()).unwrap();
    assert_eq!(
        &written, record,
        "--environment-out writes the session's record"
    );
    // ... and it is the workspace's last record: what `env show` prints (spec-note 0527)
    let (code, last, stderr) = run(&ctx, "env show", &["--format", "json"]);
    assert_eq!(code, Some(0), "{last}\n{stderr}");
    assert_eq!(&last["result"], record, "the workspace's last record");
    let out = ctx.output("env show", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("external      container {}", c.id)),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "  mount       {} -> /cache (bind, ro)",
            cache.display()
        )),
        "{text}"
    );

    // It cannot be recreated, and `env export` names the container it is instead of
    // "no container".
    let out = ctx.output(
        "handoff",
        &[
            "--agent",
            "writer",
            "--config-file",
            config,
            "--container",
            &c.id,
            "--environment",
            record_file.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("recreates an environment devcell makes"),
        "{stderr}"
    );
    let out = ctx.output("env export", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("which devcell did not create"), "{stderr}");
    assert!(stderr.contains(&c.id[..12]), "{stderr}");
}

/// Issue 29 item 4 (spec-note 0525): two handoffs of one group (`--cleanup on-exit`) run side
/// by side in one container (the same id, each its own session); a third whose network
/// differs is refused (exit 2) naming `network`, and begins nothing; the container is still
/// there, running, after the first member ends, and removed when the second, the last, ends.
#[test]
fn handoffs_of_a_group_share_its_container_and_on_exit_removes_it_after_the_last() {
    let Some(ctx) = TestContext::busybox("handoff_group_on_exit") else {
        return;
    };
    let ctx = ctx.isolated().delete_on_drop().config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#
    ));
    let config = ctx.tmp().join("config.toml");
    std::fs::write(
        &config,
        "[agents.wait-a]\ncommand = [\"sh\", \"-c\", \"while [ ! -e release-a ]; do sleep 0.1; done\"]\n\
         [agents.wait-b]\ncommand = [\"sh\", \"-c\", \"while [ ! -e release-b ]; do sleep 0.1; done\"]\n\
         [agents.hi]\ncommand = [\"sh\", \"-c\", \"echo hi\"]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap().to_string();
    let group = format!("g-{}", crate::support::run_token());
    let args = |agent: &str, extra: &[&str]| {
        let mut a: Vec<String> = [
            "handoff",
            "--workspace-folder",
            ctx.path().to_str().unwrap(),
            "--agent",
            agent,
            "--config-file",
            &config,
            "--group",
            &group,
            "--cleanup",
            "on-exit",
            "--format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let spawn = |agent: &str| {
        ctx.command()
            .args(args(agent, &[]))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let status = || workspace_status(&ctx);
    let live_in_container = |n: usize| live_in_container(&ctx, n);

    let a = spawn("wait-a");
    live_in_container(1);
    let b = spawn("wait-b");
    let st = live_in_container(2);
    let sessions = st["sessions"].as_array().unwrap();
    let id = sessions[0]["containerId"].as_str().unwrap().to_string();
    assert_eq!(
        sessions[1]["containerId"],
        id.as_str(),
        "one container: {st}"
    );
    assert_ne!(sessions[0]["id"], sessions[1]["id"], "each its own session");
    assert!(
        sessions.iter().all(|s| s["group"] == group.as_str()),
        "{st}"
    );
    let g = &st["groups"][0];
    assert_eq!(g["name"], group.as_str(), "{st}");
    assert_eq!(g["containerId"], id.as_str(), "{st}");
    assert_eq!(g["cleanup"], "on-exit", "{st}");
    assert_eq!(
        g["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["live"] == true)
            .count(),
        2,
        "{st}"
    );
    assert_eq!(ctx.containers(), vec![id.clone()]);

    // A third whose network differs: refused with the difference, nothing begun or created.
    let out = ctx
        .command()
        .args(args("hi", &["--network", "default"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "invalid_argument", "{v}");
    assert_eq!(
        v["error"]["details"]["differences"][0]["field"], "network",
        "{v}"
    );
    assert_eq!(
        v["error"]["details"]["differences"][0]["group"], "none",
        "{v}"
    );
    assert_eq!(
        v["error"]["details"]["differences"][0]["handoff"], "default",
        "{v}"
    );
    assert_eq!(status()["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(ctx.containers(), vec![id.clone()]);

    // The first member ends: the container stays, running, for the second.
    std::fs::write(ctx.path().join("release-a"), "").unwrap();
    let out = a.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let running = container_exists(&id);
    assert_eq!(
        String::from_utf8_lossy(&running.stdout).trim(),
        "true",
        "still there after the first member: {}",
        String::from_utf8_lossy(&running.stderr)
    );

    // The last member ends: the container is removed.
    std::fs::write(ctx.path().join("release-b"), "").unwrap();
    let out = b.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!container_exists(&id).status.success(), "removed: {stderr}");
    assert!(ctx.containers().is_empty());
    let st = status();
    assert!(st["groups"][0]["containerId"].is_null(), "{st}");
    assert!(st["recordedContainer"].is_null(), "{st}");
}

/// `status --format json`'s result for the context's workspace.
fn workspace_status(ctx: &TestContext) -> Value {
    let (code, v, stderr) = run(ctx, "status", &["--format", "json"]);
    assert_eq!(code, Some(0), "{v}\n{stderr}");
    v["result"].clone()
}

/// `devcell handoff --agent <agent> --config-file <config> --format json` in `ctx`'s
/// workspace, spawned with both streams piped.
fn spawn_handoff(ctx: &TestContext, agent: &str, config: &std::path::Path) -> std::process::Child {
    ctx.command()
        .args([
            "handoff",
            "--workspace-folder",
            ctx.path().to_str().unwrap(),
            "--agent",
            agent,
            "--config-file",
            config.to_str().unwrap(),
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `status` once `n` sessions run in a container (bounded: a handoff that never starts fails
/// here).
fn live_in_container(ctx: &TestContext, n: usize) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let st = workspace_status(ctx);
        let sessions = st["sessions"].as_array().cloned().unwrap_or_default();
        let running = sessions
            .iter()
            .filter(|s| s["status"] == "live" && s["containerId"].is_string())
            .count();
        if running == n {
            return st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{n} sessions never ran: {st}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `docker inspect -f {{.State.Running}} ID`.
fn container_exists(id: &str) -> std::process::Output {
    std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", id])
        .output()
        .unwrap()
}

/// Issue 29 (spec-note 0529): two handoffs that name no group on the command line, grouped
/// only by `[handoff] group` and `cleanup` in config.toml, run side by side in one container
/// (the same id, each its own session, `status` shows the configured group and policy), and
/// `on-exit` from config.toml removes the container after the last ends. Each member has its
/// own context file (spec-note 0161: `.devcell/sessions/<session>/context.json`, named by
/// `$DEVCELL_CONTEXT`), not the other's.
#[test]
fn two_handoffs_grouped_only_by_config_toml_share_one_container() {
    let Some(ctx) = TestContext::busybox("handoff_group_config") else {
        return;
    };
    let ctx = ctx.isolated().delete_on_drop().config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#
    ));
    let group = format!("c-{}", crate::support::run_token());
    let config = ctx.tmp().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[handoff]\ngroup = \"{group}\"\ncleanup = \"on-exit\"\n\
             [agents.wait-a]\ncommand = [\"sh\", \"-c\", \"echo context=$DEVCELL_CONTEXT; while [ ! -e release-a ]; do sleep 0.1; done\"]\n\
             [agents.wait-b]\ncommand = [\"sh\", \"-c\", \"echo context=$DEVCELL_CONTEXT; while [ ! -e release-b ]; do sleep 0.1; done\"]\n"
        ),
    )
    .unwrap();
    let spawn = |agent: &str| spawn_handoff(&ctx, agent, &config);
    let a = spawn("wait-a");
    live_in_container(&ctx, 1);
    let b = spawn("wait-b");
    let st = live_in_container(&ctx, 2);
    let sessions = st["sessions"].as_array().unwrap();
    let id = sessions[0]["containerId"].as_str().unwrap().to_string();
    assert_eq!(
        sessions[1]["containerId"],
        id.as_str(),
        "one container: {st}"
    );
    assert!(
        sessions.iter().all(|s| s["group"] == group.as_str()),
        "{st}"
    );
    assert_eq!(st["groups"][0]["name"], group.as_str(), "{st}");
    assert_eq!(st["groups"][0]["cleanup"], "on-exit", "{st}");
    assert_eq!(ctx.containers(), vec![id.clone()]);

    // (under `--format json` the agent's output is devcell's stderr)
    let mut printed = std::collections::BTreeMap::new();
    for (child, agent) in [(a, "a"), (b, "b")] {
        std::fs::write(ctx.path().join(format!("release-{agent}")), "").unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        printed.insert(format!("wait-{agent}"), stderr);
    }
    assert!(
        !container_exists(&id).status.success(),
        "removed after the last"
    );
    assert!(ctx.containers().is_empty());

    // each member's own context file, the one its `$DEVCELL_CONTEXT` names
    let mut agents = Vec::new();
    for session in &sessions[..2] {
        let file = ctx
            .path()
            .join(".devcell/sessions")
            .join(session["id"].as_str().unwrap())
            .join("context.json");
        let written = read(&file);
        let agent = written["agent"]["name"].as_str().unwrap().to_string();
        let named = format!("context={}", written["contextPath"].as_str().unwrap());
        assert!(
            printed[&agent].contains(&named),
            "{named}: {}",
            printed[&agent]
        );
        agents.push(agent);
    }
    agents.sort();
    assert_eq!(agents, ["wait-a", "wait-b"]);
}

/// Issue 29 item 5 (spec-note 0538): two handoffs of one workspace (a group's members) bring
/// up one container; its `onWorkspaceCreate` step, held open until the test lets it end, and
/// its `afterStart` step each run once across both, the second waiting on the first's lock;
/// the markers are in devcell's state folder, none in the workspace tree.
#[test]
fn a_once_per_workspace_step_runs_once_across_two_handoffs_at_once() {
    let Some(ctx) = TestContext::busybox("handoff_steps_once") else {
        return;
    };
    let ctx = ctx.isolated().delete_on_drop().config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
             "customizations": {{"devcell": {{
               "afterStart": "echo started >> /tmp/after-start",
               "onWorkspaceCreate": ["echo ran >> /tmp/workspace-step; while [ ! -e go ]; do sleep 0.1; done"]
             }}}}}}"#
    ));
    let group = format!("s-{}", crate::support::run_token());
    let config = ctx.tmp().join("config.toml");
    let agent = |name: &str| {
        format!(
            "[agents.wait-{name}]\ncommand = [\"sh\", \"-c\", \"while [ ! -e release-{name} ]; do sleep 0.1; done; echo counts=$(wc -l < /tmp/workspace-step),$(wc -l < /tmp/after-start)\"]\n"
        )
    };
    std::fs::write(
        &config,
        format!(
            "[handoff]\ngroup = \"{group}\"\n{}{}",
            agent("a"),
            agent("b")
        ),
    )
    .unwrap();
    let spawn = |agent: &str| spawn_handoff(&ctx, agent, &config);
    let a = spawn("wait-a");
    let b = spawn("wait-b");
    live_in_container(&ctx, 2);
    // both are past `up`; the first holds the steps' lock until `go` (widening the window
    // in which the second reaches it; nothing is asserted about time)
    std::thread::sleep(std::time::Duration::from_secs(3));
    std::fs::write(ctx.path().join("go"), "").unwrap();
    for name in ["a", "b"] {
        std::fs::write(ctx.path().join(format!("release-{name}")), "").unwrap();
    }
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("counts=1,1"),
            "each step ran once: {stderr}"
        );
        assert!(!stderr.contains("took over"), "{stderr}");
    }
    // the markers: in the state folder, keyed by the workspace; none in the workspace
    let steps = ctx.state().join("steps");
    let keys: Vec<_> = std::fs::read_dir(&steps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].join("workspace.json").is_file());
    assert_eq!(
        std::fs::read_dir(keys[0].join("containers"))
            .unwrap()
            .count(),
        1
    );
    assert!(!keys[0].join("lock.json").exists(), "the lock was let go");
    // (this test's state folder and home sit next to its files: not the workspace's content)
    let mut in_workspace = Vec::new();
    let mut todo = vec![ctx.path().to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p == ctx.state() || p == ctx.home() {
                continue;
            }
            if p.is_dir() && !p.is_symlink() {
                todo.push(p.clone());
            }
            in_workspace.push(p);
        }
    }
    assert!(
        !in_workspace.iter().any(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name == "workspace.json" || name == "lock.json" || name == "steps"
        }),
        "{in_workspace:?}"
    );
}
