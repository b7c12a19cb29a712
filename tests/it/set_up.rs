//! `devcell set-up` end to end against the real engine (spec-note 0291): a plain
//! `docker run -d <busybox> sleep` container (not made by devcell) becomes a dev container:
//! its metadata label and `--config` merged, hooks run once (markers in the remote user's
//! `~/.devcontainer`, shared with the reference CLI), its weaknesses reported; a container
//! holding an engine socket is refused under `hardened` before anything runs in it.

use crate::support::deadline::Bounded as _;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::devcell;
use crate::support::docker::{BUSYBOX_IMAGE, TestContainer, engine_ready};
use crate::support::refcli::reference_cli;

const CONFIG: &str = r#"{
  "workspaceFolder": "/tmp",
  "remoteEnv": {"FROM_CONTAINER": "${containerEnv:SETUP_MARK}"},
  "onCreateCommand": "echo on-create >> /tmp/on-create.count",
  "postCreateCommand": ["sh", "-c", "echo \"$FROM_CONTAINER in $PWD\" >> /tmp/post-create.count"],
  "postAttachCommand": "echo attach >> /tmp/post-attach.count"
}"#;

/// A config file in a temporary folder.
fn config_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("devcell-set-up-")
        .tempdir()
        .unwrap();
    let file = dir.path().join("devcontainer.json");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

fn set_up(container: &str, config: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = devcell();
    cmd.args(["set-up", "--container-id", container]);
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    cmd.args(args).output().expect("devcell runs")
}

fn result(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "set-up failed: {}\nstdout: {stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "one line on stdout: {stdout}");
    let value: Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    assert_eq!(value["outcome"], "success", "{value}");
    value
}

fn ran(result: &Value) -> Vec<String> {
    result["devcell"]["lifecycle"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["hook"].as_str().unwrap().to_string())
        .collect()
}

/// `wc -l` of a file in the container (0 when it does not exist).
fn count(container: &TestContainer, file: &str) -> usize {
    container
        .sh(&format!("cat {file} 2>/dev/null || true"))
        .lines()
        .count()
}

#[test]
fn set_up_runs_hooks_once_in_a_plain_container() {
    if !engine_ready("set_up_runs_hooks_once_in_a_plain_container", BUSYBOX_IMAGE) {
        return;
    }
    let container = TestContainer::run_with(
        &["-e", "SETUP_MARK=from-the-container"],
        BUSYBOX_IMAGE,
        &["sleep", "600"],
    );
    let (_dir, config) = config_file(CONFIG);
    let out = set_up(
        &container.id,
        Some(&config),
        &["--include-configuration", "--include-merged-configuration"],
    );
    let first = result(&out);
    assert_eq!(
        ran(&first),
        ["onCreateCommand", "postCreateCommand", "postAttachCommand"]
    );
    // `${containerEnv:…}` against the container's environment, in both configurations.
    assert_eq!(
        first["configuration"]["remoteEnv"]["FROM_CONTAINER"],
        "from-the-container"
    );
    assert_eq!(
        first["mergedConfiguration"]["remoteEnv"]["FROM_CONTAINER"],
        "from-the-container"
    );
    assert_eq!(first["configuration"]["configFilePath"]["scheme"], "file");
    assert_eq!(
        first["mergedConfiguration"]["onCreateCommands"],
        serde_json::json!(["echo on-create >> /tmp/on-create.count"])
    );
    // Hooks ran as the container's user, in `workspaceFolder`, with the remote env.
    assert_eq!(first["devcell"]["remoteUser"], "root");
    assert_eq!(
        container.sh("cat /tmp/post-create.count"),
        "from-the-container in /tmp\n"
    );
    // Not made by devcell: its weaknesses are reported, not refused.
    assert_eq!(first["devcell"]["profile"], "hardened");
    let warnings = first["devcell"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("running as root") && w.contains("a writable root filesystem")
        }),
        "{warnings:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("warning: container"),
        "the weaknesses are on stderr too"
    );
    let beyond = first["devcell"]["beyondProfile"].as_array().unwrap();
    assert!(
        beyond
            .iter()
            .any(|b| b["permission"] == "root" && b["granted"] == false),
        "{beyond:?}"
    );
    let score = first["devcell"]["audit"]["score"].as_u64().unwrap();
    assert!(
        score < 16,
        "a plain container is not fully isolated: {score}"
    );

    // A second set-up does not rerun the once-per-container hooks; postAttach runs again.
    let second = result(&set_up(&container.id, Some(&config), &[]));
    assert_eq!(ran(&second), ["postAttachCommand"]);
    assert!(second.get("configuration").is_none());
    let skipped: Vec<&str> = second["devcell"]["lifecycle"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["reason"] == "alreadyRan")
        .map(|s| s["hook"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["onCreateCommand", "postCreateCommand"]);
    assert_eq!(count(&container, "/tmp/on-create.count"), 1);
    assert_eq!(count(&container, "/tmp/post-create.count"), 1);
    assert_eq!(count(&container, "/tmp/post-attach.count"), 2);
    // The markers are where the reference CLI keeps them.
    let markers = container.sh("ls -a /root/.devcontainer");
    assert!(markers.contains(".onCreateCommandMarker"), "{markers}");
}

#[test]
fn set_up_reads_the_container_metadata_label_without_a_config() {
    if !engine_ready(
        "set_up_reads_the_container_metadata_label_without_a_config",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let label = r#"devcontainer.metadata=[{"postCreateCommand": "echo from-label > /tmp/label"}, {"remoteUser": "nobody"}]"#;
    let container = TestContainer::run_with(&["--label", label], BUSYBOX_IMAGE, &["sleep", "600"]);
    let first = result(&set_up(
        &container.id,
        None,
        &["--include-configuration", "--include-merged-configuration"],
    ));
    assert_eq!(first["configuration"], serde_json::json!({}));
    assert_eq!(
        first["mergedConfiguration"]["postCreateCommands"],
        serde_json::json!(["echo from-label > /tmp/label"])
    );
    assert_eq!(first["devcell"]["remoteUser"], "nobody");
    assert_eq!(container.sh("cat /tmp/label"), "from-label\n");
    assert_eq!(container.sh("stat -c %U /tmp/label"), "nobody\n");

    // No such container: the reference CLI's error result, exit 1.
    let out = set_up("devcell-no-such-container", None, &[]);
    assert_eq!(out.status.code(), Some(1));
    let error: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(error["outcome"], "error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("devcell-no-such-container"),
        "{error}"
    );
}

#[test]
fn set_up_refuses_a_container_holding_an_engine_socket() {
    if !engine_ready(
        "set_up_refuses_a_container_holding_an_engine_socket",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    // A file named like an engine socket (not the real one): what matters is what the
    // container was given, as the policy judges it by name and place.
    let dir = tempfile::Builder::new()
        .prefix("devcell-set-up-sock-")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("docker.sock");
    std::fs::write(&socket, "").unwrap();
    let bind = format!("{}:/var/run/docker.sock:ro", socket.display());
    let container = TestContainer::run_with(&["-v", &bind], BUSYBOX_IMAGE, &["sleep", "600"]);
    let (_dir, config) = config_file(CONFIG);

    let out = set_up(&container.id, Some(&config), &[]);
    assert_eq!(out.status.code(), Some(1));
    let error: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(error["outcome"], "error");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("refusing to set up"), "{message}");
    assert!(message.contains("docker.sock"), "{message}");
    assert!(
        error["description"]
            .as_str()
            .unwrap()
            .contains("--security-profile reference"),
        "{error}"
    );
    // Nothing ran in it.
    assert_eq!(count(&container, "/tmp/on-create.count"), 0);
    assert_eq!(
        container.sh("test -e /root/.devcontainer && echo present || echo absent"),
        "absent\n"
    );

    // The reference profile runs the hooks as the reference CLI would, still reporting.
    let done = result(&set_up(
        &container.id,
        Some(&config),
        &["--security-profile", "reference"],
    ));
    assert_eq!(done["devcell"]["profile"], "reference");
    assert_eq!(count(&container, "/tmp/on-create.count"), 1);
    assert!(
        done["devcell"]["beyondProfile"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["permission"] == "engineSocket"),
        "{done}"
    );
}

#[test]
fn set_up_shares_markers_and_result_shape_with_the_reference_cli() {
    if !engine_ready(
        "set_up_shares_markers_and_result_shape_with_the_reference_cli",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let Some(cli) = reference_cli("set_up_shares_markers_and_result_shape_with_the_reference_cli")
    else {
        return;
    };
    let container = TestContainer::run_with(
        &["-e", "SETUP_MARK=shared"],
        BUSYBOX_IMAGE,
        &["sleep", "600"],
    );
    let (_dir, config) = config_file(CONFIG);
    let out = cli
        .command()
        .args(["set-up", "--container-id", &container.id, "--config"])
        .arg(&config)
        .args(["--include-configuration", "--include-merged-configuration"])
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
    assert_eq!(theirs["outcome"], "success", "{theirs}");
    assert_eq!(count(&container, "/tmp/on-create.count"), 1);

    // devcell finds the reference's markers: the once-hooks do not run again.
    let ours = result(&set_up(
        &container.id,
        Some(&config),
        &["--include-configuration", "--include-merged-configuration"],
    ));
    assert_eq!(ran(&ours), ["postAttachCommand"]);
    assert_eq!(count(&container, "/tmp/on-create.count"), 1);
    assert_eq!(count(&container, "/tmp/post-create.count"), 1);

    // Same keys apart from devcell's one addition; the same configuration.
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.retain(|k| k != "devcell");
        k.sort();
        k
    };
    assert_eq!(keys(&ours), keys(&theirs));
    assert_eq!(ours["configuration"], theirs["configuration"]);
    for key in [
        "remoteEnv",
        "onCreateCommands",
        "postCreateCommands",
        "postAttachCommands",
    ] {
        assert_eq!(
            ours["mergedConfiguration"][key], theirs["mergedConfiguration"][key],
            "{key}"
        );
    }
}

/// Issue 25 (spec-note 0400, "the image's groups"): under `hardened`, `set-up`'s hooks run as
/// numeric `uid:gid` like every other exec devcell makes: an image whose `/etc/group` lists the
/// remote user in group 6 (`disk` on most hosts) gives the hook no such group, so it cannot
/// leave a set-gid-6 file where the container can write.
#[test]
fn set_up_hooks_get_no_group_of_the_images_etc_group() {
    if !engine_ready(
        "set_up_hooks_get_no_group_of_the_images_etc_group",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let tag = format!("devcell-test/set-up-groups:{}", crate::support::run_token());
    let context = tempfile::tempdir().unwrap();
    std::fs::write(
        context.path().join("Dockerfile"),
        format!(
            "FROM {BUSYBOX_IMAGE}\n\
             RUN echo 'dev:x:1000:1000::/home/dev:/bin/sh' >> /etc/passwd && echo 'dev:x:1000:' >> /etc/group \
             && echo 'disk6:x:6:dev' >> /etc/group && mkdir -p /home/dev && chown 1000:1000 /home/dev\n\
             USER dev\n"
        ),
    )
    .unwrap();
    let (built, log) = crate::support::engine::docker(&[
        "build",
        "-q",
        "--network",
        "none",
        "-t",
        &tag,
        &context.path().display().to_string(),
    ]);
    assert!(built, "{log}");
    let container = TestContainer::run_with(&[], &tag, &["sleep", "600"]);
    // the control: by name the engine gives the user the image's group
    assert!(
        container.sh("id").contains("6(disk6)"),
        "{}",
        container.sh("id")
    );
    let (_dir, config) = config_file(
        r#"{"workspaceFolder": "/tmp", "remoteUser": "dev",
            "postCreateCommand": "id > /tmp/hook-id; cp /bin/busybox /tmp/sg; chgrp 6 /tmp/sg; ls -ln /tmp/sg >> /tmp/hook-id; true"}"#,
    );
    let out = set_up(&container.id, Some(&config), &[]);
    let first = result(&out);
    assert_eq!(first["devcell"]["remoteUser"], "dev", "{first}");
    let ids = container.sh("cat /tmp/hook-id");
    drop(container);
    let _ = crate::support::engine::docker(&["rmi", "-f", &tag]);
    assert!(ids.starts_with("uid=1000(dev) gid=1000"), "{ids}");
    let groups = ids.lines().next().unwrap_or_default();
    assert!(!groups.contains("6(disk6)"), "the hook had group 6: {ids}");
    let sg = ids.lines().nth(1).unwrap_or_default();
    assert!(
        sg.split_whitespace().nth(3).is_none_or(|g| g != "6"),
        "the hook made a group-6 file: {ids}"
    );
}
