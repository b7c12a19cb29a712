//! `devcell up` / `exec` / `down` / `run-user-commands` end to end: the real binary against the
//! real engine, with `devcell-test/busybox:1` (users `root` and `nobody`).
//!
//! Every test uses its own [`TestContext`], whose `Drop` force-removes every
//! container labelled with that workspace folder (and their anonymous volumes), also when the
//! test fails.

use crate::support::deadline::Bounded as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::context::{ImagePatternGuard, TestContext, VolumeGuard};
use crate::support::devcell;
use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
use crate::support::engine::{ContainerGuard, ImageGuard};
use crate::support::refcli::{RefCli, reference_cli};

/// A hash of every file path and content under `root`.
fn tree_hash(root: &Path) -> String {
    let mut files = BTreeMap::new();
    collect(root, root, &mut files);
    let mut hasher = Sha256::new();
    for (path, content) in files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(&content);
    }
    hex::encode(hasher.finalize())
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path: PathBuf = entry.unwrap().path();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        if path.is_dir() {
            out.insert(format!("{rel}/"), Vec::new());
            collect(root, &path, out);
        } else {
            out.insert(rel, std::fs::read(&path).unwrap());
        }
    }
}

/// The last line of stdout as JSON (the result line).
fn last_json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text}"))
}

/// The hooks that ran, in order, as `hook` or `hook[entry]`.
fn ran(result: &Value) -> Vec<String> {
    result["devcell"]["lifecycle"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| match r["entry"].as_str() {
            Some(e) => format!("{}[{e}]", r["hook"].as_str().unwrap()),
            None => r["hook"].as_str().unwrap().to_string(),
        })
        .collect()
}

fn docker_inspect(id: &str, format: &str) -> String {
    let out = Command::new("docker")
        .args(["inspect", "-f", format, id])
        .bounded_output()
        .expect("docker runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The image a container runs, as devcell named it: Podman reports names fully qualified
/// (`docker.io/library/vsc-…`, `docker.io/devcell/features:…`), Docker as given.
fn container_image(id: &str) -> String {
    let image = docker_inspect(id, "{{.Config.Image}}");
    ["docker.io/library/", "docker.io/", "localhost/"]
        .iter()
        .find_map(|prefix| image.strip_prefix(prefix))
        .map_or_else(|| image.clone(), str::to_string)
}

const HOOKS_CONFIG: &str = r#"{
  "image": "IMAGE",
  "remoteUser": "nobody",
  "remoteEnv": {"GREETING": "hello ${containerEnv:PATH}"},
  "initializeCommand": ["sh", "-c", "echo \"initialize-ran-in-$PWD\""],
  "onCreateCommand": "echo on-create-ran",
  "updateContentCommand": ["echo", "update-content-ran"],
  "postCreateCommand": {"one": "echo post-create-one", "two": ["echo", "post-create-two"]},
  "postStartCommand": "echo post-start-ran",
  "postAttachCommand": "echo \"attach $GREETING\""
}"#;

#[test]
fn up_exec_reuse_down_and_restart() {
    let Some(ctx) = TestContext::busybox("up_exec_reuse_down_and_restart") else {
        return;
    };
    let ws = ctx.config(HOOKS_CONFIG);
    // initializeCommand runs on the host only when the user grants it (spec-note 0410)
    let out = ws.output("up", &["--allow", "host-command"]);
    let first = last_json(&out);
    assert_eq!(first["outcome"], "success", "{first}");
    assert_eq!(
        first["devcell"]["permissions"][0]["value"], "sh -c 'echo \"initialize-ran-in-$PWD\"'",
        "{first}"
    );
    assert_eq!(first["devcell"]["permissions"][0]["status"], "granted");
    let id = first["containerId"].as_str().unwrap().to_string();
    assert_eq!(first["remoteUser"], "nobody");
    let folder = format!(
        "/workspaces/{}",
        ws.path().file_name().unwrap().to_string_lossy()
    );
    assert_eq!(first["remoteWorkspaceFolder"], folder.as_str());
    assert_eq!(first["devcell"]["container"], "created");
    assert_eq!(
        ran(&first),
        [
            "onCreateCommand",
            "updateContentCommand",
            "postCreateCommand[one]",
            "postCreateCommand[two]",
            "postStartCommand",
            "postAttachCommand"
        ]
    );
    // Every form ran in a shell or not, with remoteEnv (substituted from the container's env);
    // initializeCommand on the host, in the workspace folder.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let host_folder = ws.path().canonicalize().unwrap();
    assert!(
        stderr.contains(&format!("initialize-ran-in-{}", host_folder.display())),
        "{stderr}"
    );
    for line in [
        "on-create-ran",
        "update-content-ran",
        "[one] post-create-one",
        "[two] post-create-two",
        "post-start-ran",
        "attach hello /usr/local/sbin:",
    ] {
        assert!(stderr.contains(line), "missing `{line}` in: {stderr}");
    }
    // The container carries the reference CLI's labels.
    let labels = docker_inspect(&id, "{{json .Config.Labels}}");
    let labels: Value = serde_json::from_str(&labels).unwrap();
    assert_eq!(
        labels["devcontainer.local_folder"],
        ws.path().display().to_string()
    );
    assert!(
        labels["devcontainer.config_file"]
            .as_str()
            .unwrap()
            .ends_with(".devcontainer/devcontainer.json")
    );
    let metadata: Value =
        serde_json::from_str(labels["devcontainer.metadata"].as_str().unwrap()).unwrap();
    assert_eq!(
        metadata.as_array().unwrap().last().unwrap()["remoteUser"],
        "nobody"
    );

    // exec: as remoteUser, in the workspace folder, with remoteEnv, exit code passed through.
    let (code, stdout, _) = ws.sh("id -un; pwd; echo \"$GREETING\"; exit 3");
    assert_eq!(code, 3);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "nobody");
    assert_eq!(lines[1], folder);
    assert!(lines[2].starts_with("hello /usr/local/sbin:"), "{stdout}");
    let out = ws.output("exec", &["sh", "-c", "kill -9 $$"]);
    assert_eq!(out.status.code(), Some(137));

    // Piped stdin is forwarded; the exec ends with the process even while stdin stays open.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_devcell"))
        .args(["exec", "--workspace-folder"])
        .arg(ws.path())
        .args(["sh", "-c", "read line; echo \"got $line\""])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"abc\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("exec kept running after its process ended (stdin still open)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    drop(stdin);
    assert!(status.success());
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(stdout, "got abc\n");

    // Reuse: the same container, nothing created, once-hooks and postStart not rerun.
    let second = ws.up(&["--allow", "host-command"]);
    assert_eq!(second["containerId"], id.as_str());
    assert_eq!(second["devcell"]["container"], "running");
    assert_eq!(ran(&second), ["postAttachCommand"]);
    assert_eq!(ws.containers(), vec![id.clone()]);

    // down (or stop) stops it; up starts it again: postStart reruns, onCreate does not.
    let down = last_json(&ws.output("stop", &[]));
    assert_eq!(down["containerIds"][0], id.as_str());
    assert_eq!(docker_inspect(&id, "{{.State.Running}}"), "false");
    let third = ws.up(&["--allow", "host-command"]);
    assert_eq!(third["containerId"], id.as_str());
    assert_eq!(third["devcell"]["container"], "started");
    assert_eq!(ran(&third), ["postStartCommand", "postAttachCommand"]);

    // run-user-commands: only postAttach is due.
    let out = ws.output("run-user-commands", &[]);
    let result = last_json(&out);
    assert_eq!(result["outcome"], "success", "{result}");
    assert_eq!(result["result"], "done");

    // down --remove removes the container (and its state volume); the workspace stays.
    let down = last_json(&ws.output("down", &["--remove"]));
    assert_eq!(down["removed"], true);
    assert!(ws.containers().is_empty());
    assert!(ws.path().join(".devcontainer/devcontainer.json").is_file());
}

#[test]
fn hardened_profile_holds_inside_the_container() {
    let Some(ctx) = TestContext::busybox("hardened_profile_holds_inside_the_container") else {
        return;
    };
    let ws = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    // A host "home" with a file the container must not see.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("secret-devcell-test"), "x").unwrap();
    let out = devcell()
        .env("HOME", home.path())
        .args(["up", "--pids-limit", "64", "--workspace-folder"])
        .arg(ws.path())
        .output()
        .unwrap();
    let result = last_json(&out);
    assert_eq!(result["outcome"], "success", "{result}");
    assert_eq!(result["devcell"]["profile"], "hardened");
    let id = result["containerId"].as_str().unwrap();

    let (code, stdout, stderr) = ws.sh(
        "id -u; grep CapEff /proc/self/status; \
         if touch /devcell-probe 2>/dev/null; then echo root-writable; else echo root-read-only; fi; \
         if [ -e /var/run/docker.sock ]; then echo socket-present; else echo socket-absent; fi; \
         grep -c secret-devcell-test /proc/self/mountinfo || true; \
         find / -xdev -name secret-devcell-test 2>/dev/null | wc -l; \
         echo \"$HOME\"; touch \"$HOME/devcell-probe\" && stat -c %u:%a \"$HOME\"",
    );
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_ne!(lines[0], "0", "remote user is root: {stdout}");
    assert_eq!(lines[1].split_whitespace().last(), Some("0000000000000000"));
    assert_eq!(lines[2], "root-read-only");
    assert_eq!(lines[3], "socket-absent");
    assert_eq!(lines[4], "0");
    assert_eq!(lines[5], "0");
    // The home from the image's /etc/passwd is a tmpfs owned by the user (mode 755).
    assert_eq!(lines[6], "/nonexistent");
    assert_eq!(lines[7], "65534:755", "{stdout}");
    let mounts = docker_inspect(id, "{{json .Mounts}}");
    assert!(
        !mounts.contains(&home.path().display().to_string()),
        "host home mounted: {mounts}"
    );
    assert_eq!(docker_inspect(id, "{{.HostConfig.PidsLimit}}"), "64");

    // A fork bomb stops at the pids limit, and the container survives it.
    let (_, stdout, stderr) =
        ws.sh("for i in $(seq 1 200); do sleep 2 & done; wait; echo all-forked");
    assert!(!stdout.contains("all-forked"), "fork bomb was not bounded");
    assert!(
        stderr.contains("can't fork") || stderr.contains("Resource temporarily unavailable"),
        "{stderr}"
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (code, stdout, _) = ws.sh("echo alive");
    assert_eq!((code, stdout.trim()), (0, "alive"));
}

/// `up` refuses, exit 1, the error result lists the request with its flag, nothing created.
fn assert_refused(config: &str, args: &[&str], wanted: &[&str]) {
    let ws = TestContext::new("up").config(config);
    let out = ws.output("up", args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = last_json(&out);
    assert_eq!(result["outcome"], "error");
    let text = format!("{} {}", result["message"], result["description"]);
    for w in wanted {
        assert!(text.contains(w), "missing `{w}` in {text}");
    }
    assert!(ws.containers().is_empty(), "a container was created");
}

#[test]
fn refusals_create_nothing() {
    if !engine_ready("refusals_create_nothing", BUSYBOX_IMAGE) {
        return;
    }
    assert_refused(
        r#"{"image": "IMAGE", "remoteUser": "nobody", "privileged": true}"#,
        &[],
        &["privileged mode", "--allow privileged"],
    );
    assert_refused(
        r#"{"image": "IMAGE", "remoteUser": "nobody", "capAdd": ["SYS_PTRACE"]}"#,
        &[],
        &["`SYS_PTRACE`", "--allow cap:SYS_PTRACE"],
    );
    assert_refused(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "mounts": ["type=bind,source=/var/run/docker.sock,target=/var/run/docker.sock"]}"#,
        &["--allow", "mount:/var/run/docker.sock"],
        &["engine socket", "never allowed"],
    );
    assert_refused(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "mounts": ["type=bind,source=${localEnv:HOME},target=/host-home"]}"#,
        &[],
        &["/home/tester", "--allow mount:/home/tester"],
    );
    // Root named by the configuration: `--allow root`, with the hint (a root image with no
    // user named runs as the user devcell provides instead; spec-note 0188).
    assert_refused(
        r#"{"image": "IMAGE", "remoteUser": "root"}"#,
        &[],
        &["running as root", "--allow root", "remoteUser"],
    );
    assert_refused(
        r#"{"image": "IMAGE", "containerUser": "root"}"#,
        &[],
        &["running as root", "--allow root"],
    );
    // Grants never come from the repository: a config cannot name them.
    assert_refused(
        r#"{"image": "IMAGE", "remoteUser": "nobody", "capAdd": ["SYS_PTRACE"],
            "runArgs": ["--label", "allow=cap:SYS_PTRACE"]}"#,
        &[],
        &["--allow cap:SYS_PTRACE"],
    );
}

#[test]
fn grants_and_the_reference_profile_apply_requests() {
    let Some(ctx) = TestContext::busybox("grants_and_the_reference_profile_apply_requests") else {
        return;
    };
    let ws = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody", "capAdd": ["SYS_PTRACE"]}"#);
    let result = ws.up(&["--allow", "cap:SYS_PTRACE"]);
    let id = result["containerId"].as_str().unwrap();
    assert_eq!(docker_inspect(id, "{{.HostConfig.CapAdd}}"), "[SYS_PTRACE]");
    let permissions = &result["devcell"]["permissions"];
    assert_eq!(permissions[0]["status"], "granted", "{permissions}");
    assert_eq!(permissions[0]["grant"], "--allow cap:SYS_PTRACE");

    // The same grant from the user's settings file.
    let settings = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(settings.path(), "[security]\nallow = [\"root\"]\n").unwrap();
    let root_ws = TestContext::new("up").config(r#"{"image": "IMAGE"}"#);
    let result = root_ws.up(&["--config-file", settings.path().to_str().unwrap()]);
    assert_eq!(result["remoteUser"], "root");
    assert_eq!(result["devcell"]["permissions"][0]["status"], "granted");

    // reference: the configuration as written, like the reference CLI.
    let reference =
        TestContext::new("up").config(r#"{"image": "IMAGE", "capAdd": ["SYS_PTRACE"]}"#);
    let result = reference.up(&["--security-profile", "reference"]);
    let id = result["containerId"].as_str().unwrap();
    assert_eq!(result["devcell"]["profile"], "reference");
    assert_eq!(
        docker_inspect(id, "{{.HostConfig.ReadonlyRootfs}}"),
        "false"
    );
    assert_eq!(docker_inspect(id, "{{.HostConfig.CapAdd}}"), "[SYS_PTRACE]");
    assert!(
        result["devcell"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["status"] == "allowedByProfile")
    );
}

#[test]
fn failing_post_create_leaves_the_workspace_unchanged_and_reruns() {
    let Some(ctx) =
        TestContext::busybox("failing_post_create_leaves_the_workspace_unchanged_and_reruns")
    else {
        return;
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "onCreateCommand": "echo created",
            "postCreateCommand": "echo failing-now; touch \"$PWD/written-by-hook\"; exit 5"}"#,
    );
    ws.write("README", "a file the hook must not change\n");
    let before = tree_hash(ws.path());
    let out = ws.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let result = last_json(&out);
    assert_eq!(result["outcome"], "error");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("postCreateCommand") && message.contains("exit code 5"),
        "{message}"
    );
    assert!(
        result["containerId"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert_eq!(tree_hash(ws.path()), before, "the workspace changed");

    // The container is left for inspection; the next `up` runs the failed hook again (and
    // not the completed onCreateCommand).
    let out = ws.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("failing-now"), "{stderr}");
    assert!(!stderr.contains("\ncreated\n"), "{stderr}");
    // The reference CLI's log line, word for word (spec-note 0454).
    assert!(
        stderr
            .lines()
            .any(|l| l == "[devcell] Running the postCreateCommand from devcontainer.json..."),
        "{stderr}"
    );
    assert!(!stderr.contains("Running the onCreateCommand"), "{stderr}");
    assert_eq!(ws.containers().len(), 1);
    assert_eq!(tree_hash(ws.path()), before, "the workspace changed");
}

#[test]
fn dockerfile_kind_builds_through_the_engine() {
    let Some(ctx) = TestContext::busybox("dockerfile_kind_builds_through_the_engine") else {
        return;
    };
    let ws = ctx.config(
        r#"{"build": {"dockerfile": "Dockerfile", "args": {"WORD": "built-with-arg"}},
            "remoteUser": "nobody"}"#,
    );
    ws.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nARG WORD\nRUN echo \"$WORD\" > /built\n"),
    );
    let base = ws
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    ws.remove_images_matching(&format!("vsc-{base}-*"));
    let result = ws.up(&[]);
    let image = container_image(result["containerId"].as_str().unwrap());
    let _cleanup = ImageGuard(vec![image.clone()]);
    // The image the container runs carries the metadata label itself, as the reference's
    // does (spec-note 0473): the Dockerfile's image with the label layered on.
    assert!(image.starts_with("devcell/features:"), "{image}");
    let (ok, label) = crate::support::engine::docker(&[
        "image",
        "inspect",
        "-f",
        "{{index .Config.Labels \"devcontainer.metadata\"}}",
        &image,
    ]);
    assert!(ok, "{label}");
    let entries: Value = serde_json::from_str(label.trim()).unwrap();
    assert_eq!(entries, serde_json::json!([{"remoteUser": "nobody"}]));
    let (code, stdout, _) = ws.sh("cat /built");
    assert_eq!((code, stdout.trim()), (0, "built-with-arg"));

    // An option devcell cannot map is an error naming it, before anything is created.
    let bad = TestContext::new("up").config(
        r#"{"build": {"dockerfile": "Dockerfile", "options": ["--ssh", "default"]},
            "remoteUser": "nobody"}"#,
    );
    bad.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\n"),
    );
    let out = bad.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        last_json(&out)["message"]
            .as_str()
            .unwrap()
            .contains("`--ssh`")
    );
    assert!(bad.containers().is_empty());
}

/// A workspace folder whose name holds separators an image name cannot (`_-`, `.-`, a leading
/// `_`) still builds: the default image name `vsc-<folder>-<hash>` is made valid the way the
/// reference CLI makes it (spec-note 0479), not refused with "invalid reference format".
#[test]
fn a_folder_name_with_invalid_image_name_characters_still_builds() {
    let Some(ctx) = TestContext::busybox("a_folder_name_with_invalid_image_name_characters") else {
        return;
    };
    let ws = ctx
        .at("_My_-Repo.-x")
        .config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#);
    ws.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN touch /built\n"),
    );
    ws.remove_images_matching("vsc-my_repo.x-*");
    let result = ws.up(&[]);
    let image = container_image(result["containerId"].as_str().unwrap());
    ws.remove_image(&image);
    let hash = hex::encode(Sha256::digest(ws.path().to_string_lossy().as_bytes()));
    let name = format!("vsc-my_repo.x-{hash}");
    // (Podman lists a local image as `localhost/<name>`)
    let built: Vec<String> =
        crate::support::context::docker_lines(&["images", "--format", "{{.Repository}}"])
            .into_iter()
            .filter(|r| r.trim_start_matches("localhost/") == name)
            .collect();
    assert_eq!(built.len(), 1, "{name}: {built:?}");
    let (code, _, _) = ws.sh("test -e /built");
    assert_eq!(code, 0);
}

fn reference_up(cli: &RefCli, ws: &TestContext) -> Value {
    // The reference builds `vsc-<folder>-<hash>-uid` images: removed after the test.
    let base = ws
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    ws.remove_images_matching(&format!("vsc-{base}-*"));
    let out = cli
        .command()
        .args(["up", "--workspace-folder"])
        .arg(ws.path())
        .long_output()
        .expect("the reference CLI runs");
    let result = last_json(&out);
    assert_eq!(
        result["outcome"],
        "success",
        "reference up failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    cli.assert_stayed_local();
    let image = container_image(result["containerId"].as_str().unwrap());
    if image.starts_with("vsc-") {
        ws.remove_images_matching(&image);
    }
    result
}

#[test]
fn containers_are_shared_with_the_reference_cli() {
    let Some(ctx) = TestContext::busybox("containers_are_shared_with_the_reference_cli") else {
        return;
    };
    let Some(cli) = reference_cli("containers_are_shared_with_the_reference_cli") else {
        return;
    };
    let config = r#"{"image": "IMAGE", "remoteUser": "nobody"}"#;
    // Made by the reference, reused by devcell under `reference` (under `hardened` it is
    // refused: `reused_containers_are_rechecked_against_the_profile`).
    let ws = ctx.config(config);
    let theirs = reference_up(&cli, &ws);
    let ours = ws.up(&["--security-profile", "reference"]);
    assert_eq!(ours["containerId"], theirs["containerId"]);
    assert_eq!(ours["devcell"]["container"], "running");
    assert_eq!(ws.containers().len(), 1);

    // Made by devcell, reused by the reference.
    let ws = TestContext::new("up").config(config);
    let ours = ws.up(&[]);
    let theirs = reference_up(&cli, &ws);
    assert_eq!(theirs["containerId"], ours["containerId"]);
    assert_eq!(theirs["remoteUser"], "nobody");
    assert_eq!(ws.containers().len(), 1);
}

#[test]
fn reused_containers_are_rechecked_against_the_profile() {
    let test = "reused_containers_are_rechecked_against_the_profile";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let Some(cli) = reference_cli(test) else {
        return;
    };
    // Made by the reference CLI: root, the engine's default capabilities, writable root, no
    // limits. `hardened` refuses to reuse it and changes nothing.
    let ws = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let theirs = reference_up(&cli, &ws);
    let id = theirs["containerId"].as_str().unwrap().to_string();
    let started = docker_inspect(&id, "{{.State.StartedAt}}");
    let before = tree_hash(ws.path());
    let out = ws.output("up", &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = last_json(&out);
    assert_eq!(result["outcome"], "error");
    let text = format!("{} {}", result["message"], result["description"]);
    for wanted in [
        "refusing to reuse container",
        &id[..12],
        "running as root",
        "`CHOWN`",
        "`NET_RAW`",
        "writable root filesystem",
        "no-new-privileges",
        "no pids limit",
        "--remove-existing-container",
        "--security-profile reference",
    ] {
        assert!(text.contains(wanted), "missing `{wanted}` in {text}");
    }
    assert_eq!(ws.containers(), std::slice::from_ref(&id));
    assert_eq!(docker_inspect(&id, "{{.State.StartedAt}}"), started);
    assert_eq!(tree_hash(ws.path()), before);

    // `reference` reuses it as it is; `--remove-existing-container` recreates it hardened, and
    // that one is reused by a plain `up`.
    let reused = ws.up(&["--security-profile", "reference"]);
    assert_eq!(reused["containerId"], id.as_str());
    let fresh = ws.up(&["--remove-existing-container"]);
    let fresh_id = fresh["containerId"].as_str().unwrap().to_string();
    assert_ne!(fresh_id, id);
    assert_eq!(
        docker_inspect(&fresh_id, "{{.HostConfig.ReadonlyRootfs}}"),
        "true"
    );
    let again = ws.up(&[]);
    assert_eq!(again["containerId"], fresh_id.as_str());
    assert_eq!(again["devcell"]["container"], "running");

    // Made by devcell with a grant, reused without it: refused, the grant named; with it:
    // reused, the granted permission reported.
    let granted = TestContext::new("up")
        .config(r#"{"image": "IMAGE", "remoteUser": "nobody", "capAdd": ["SYS_PTRACE"]}"#);
    let first = granted.up(&["--allow", "cap:SYS_PTRACE"]);
    let out = granted.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let result = last_json(&out);
    let text = format!("{} {}", result["message"], result["description"]);
    assert!(text.contains("refusing to reuse container"), "{text}");
    assert!(text.contains("capabilities `SYS_PTRACE`"), "{text}");
    assert!(text.contains("--allow cap:SYS_PTRACE"), "{text}");
    let second = granted.up(&["--allow", "cap:SYS_PTRACE"]);
    assert_eq!(second["containerId"], first["containerId"]);
    let permissions = &second["devcell"]["permissions"];
    assert_eq!(permissions[0]["value"], "SYS_PTRACE", "{permissions}");
    assert_eq!(permissions[0]["status"], "granted");
    assert_eq!(
        permissions[0]["source"],
        format!(
            "existing container {}",
            &first["containerId"].as_str().unwrap()[..12]
        )
    );
}

#[test]
fn local_features_are_layered_cached_and_hooked_first() {
    let Some(ctx) = TestContext::busybox("local_features_are_layered_cached_and_hooked_first")
    else {
        return;
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "features": {"./hello": {"greeting": "hi-there"}},
            "postCreateCommand": "echo config-post-create"}"#,
    );
    ws.feature(
        "hello",
        r#"{"id": "hello", "version": "1.0.0", "name": "Hello",
            "options": {"greeting": {"type": "string", "default": "hey"}},
            "containerEnv": {"HELLO_FEATURE": "yes"},
            "postCreateCommand": "echo feature-post-create"}"#,
        "echo \"$GREETING for $_REMOTE_USER\" > /etc/hello.txt",
    );
    let out = ws.output("up", &[]);
    let result = last_json(&out);
    assert_eq!(
        result["outcome"],
        "success",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = result["containerId"].as_str().unwrap().to_string();
    let image = container_image(&id);
    let _cleanup = ImageGuard(vec![image.clone()]);
    assert!(image.starts_with("devcell/features:"), "{image}");
    let origins: Vec<&str> = result["devcell"]["lifecycle"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["origin"].as_str().unwrap())
        .collect();
    assert_eq!(origins, ["Feature './hello'", "devcontainer.json"]);
    let (code, stdout, _) = ws.sh("cat /etc/hello.txt; echo \"$HELLO_FEATURE\"");
    assert_eq!(code, 0);
    assert_eq!(stdout, "hi-there for nobody\nyes\n");
    // The container's metadata label (inherited from the image) lists the Feature entry.
    let label = docker_inspect(&id, "{{index .Config.Labels \"devcontainer.metadata\"}}");
    let entries: Value = serde_json::from_str(&label).unwrap();
    assert_eq!(entries[0]["id"], "./hello");

    // A second `up` with unchanged inputs builds nothing.
    ws.output("down", &["--remove"]);
    let out = ws.output("up", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("using cached devcell/features:"),
        "{stderr}"
    );
    assert!(!stderr.contains("Step 1/"), "built again: {stderr}");
}

#[test]
fn feature_and_image_label_requests_are_refused() {
    let Some(ctx) = TestContext::busybox("feature_and_image_label_requests_are_refused") else {
        return;
    };
    // A Feature asking for a capability.
    let ws = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./cap": {}}}"#);
    ws.feature(
        "cap",
        r#"{"id": "cap", "version": "1.0.0", "capAdd": ["SYS_PTRACE"]}"#,
        "true",
    );
    let out = ws.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let result = last_json(&out);
    let text = format!("{} {}", result["message"], result["description"]);
    assert!(
        text.contains("Feature `./cap`") && text.contains("--allow cap:SYS_PTRACE"),
        "{text}"
    );
    assert!(ws.containers().is_empty());
    let images: Vec<String> = Command::new("docker")
        .args(["images", "-q", "devcell/features"])
        .bounded_output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    drop(images);

    // An image label asking for the engine socket.
    let ws = TestContext::new("up")
        .config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#);
    ws.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL devcontainer.metadata='[{{\"mounts\":[\"type=bind,source=/var/run/docker.sock,target=/var/run/docker.sock\"]}}]'\n"
        ),
    );
    let base = ws
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    let _cleanup = ImagePatternGuard(format!("vsc-{base}-*"));
    let out = ws.output("up", &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = last_json(&out);
    let text = format!("{} {}", result["message"], result["description"]);
    assert!(
        text.contains("engine socket") && text.contains("image label"),
        "{text}"
    );
    assert!(ws.containers().is_empty());
}

#[test]
fn oci_features_with_dependencies_from_the_local_registry() {
    let Some(ctx) = TestContext::busybox("oci_features_with_dependencies_from_the_local_registry")
    else {
        return;
    };
    let Some(registry) = crate::support::test_registry() else {
        return;
    };
    // The fixture collection (greeter dependsOn ghcr.io/devcell-test/features/hello:1) and
    // devcell's agent-user Feature, published to the local registry, reached through a
    // `ghcr.io` mirror in the user's settings file.
    let root = crate::support::repo();
    for folder in [
        "fixtures/features/collection/src",
        "features/src/agent-user",
    ] {
        let out = devcell()
            .args([
                "features",
                "publish",
                "-r",
                &registry,
                "-n",
                "devcell-test/features",
            ])
            .arg(root.join(folder))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let settings = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        settings.path(),
        format!("[registries]\nmirrors = {{ \"ghcr.io\" = \"{registry}\" }}\n"),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "agent",
            "features": {"ghcr.io/devcell-test/features/greeter:2": {},
                         "ghcr.io/devcell-test/features/agent-user:1": {}}}"#,
    );
    let out = ws.output(
        "up",
        &[
            "--config-file",
            settings.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result = last_json(&out);
    assert_eq!(result["outcome"], "success", "{stderr}");
    let id = result["containerId"].as_str().unwrap();
    let _cleanup = ImageGuard(vec![container_image(id)]);
    // The dependency installs first: the label lists one entry per Feature in install order.
    let label = docker_inspect(id, "{{index .Config.Labels \"devcontainer.metadata\"}}");
    let entries: Value = serde_json::from_str(&label).unwrap();
    let ids: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    let position = |needle: &str| ids.iter().position(|i| i.contains(needle));
    assert!(
        position("hello").unwrap() < position("greeter").unwrap(),
        "install order: {ids:?}"
    );
    let (code, stdout, _) = ws.sh("id -un; cat /usr/local/share/greeter.txt");
    assert_eq!(code, 0);
    assert_eq!(stdout, "agent\nhello\n");
}

#[test]
fn failed_builds_leave_the_workspace_unchanged_and_create_nothing() {
    let Some(ctx) =
        TestContext::busybox("failed_builds_leave_the_workspace_unchanged_and_create_nothing")
    else {
        return;
    };
    // A bad Dockerfile.
    let ws = ctx.config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#);
    ws.write(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN exit 42\n"),
    );
    let before = tree_hash(ws.path());
    let out = ws.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let result = last_json(&out);
    assert_eq!(result["outcome"], "error");
    assert!(
        result["message"].as_str().unwrap().contains("build failed"),
        "{result}"
    );
    // the reference CLI's description (tools match on it), then devcell's hint
    assert!(
        result["description"]
            .as_str()
            .unwrap()
            .contains("An error occurred building the image.")
            && result["description"]
                .as_str()
                .unwrap()
                .contains("--allow build-network"),
        "{result}"
    );
    assert_eq!(tree_hash(ws.path()), before, "the workspace changed");
    assert!(ws.containers().is_empty());

    // A failing install.sh.
    let ws = TestContext::new("up")
        .config(r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./broken": {}}}"#);
    ws.feature(
        "broken",
        r#"{"id": "broken", "version": "1.0.0", "name": "Broken"}"#,
        "echo installing-broken; exit 3",
    );
    let before = tree_hash(ws.path());
    let out = ws.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Broken"), "{stderr}");
    assert_eq!(last_json(&out)["outcome"], "error");
    assert!(
        last_json(&out)["description"]
            .as_str()
            .unwrap()
            .contains("An error occurred building the image."),
        "{}",
        last_json(&out)
    );
    assert_eq!(tree_hash(ws.path()), before, "the workspace changed");
    assert!(ws.containers().is_empty());
}

#[test]
fn up_flags_follow_the_reference_cli() {
    let Some(ctx) = TestContext::busybox("up_flags_follow_the_reference_cli") else {
        return;
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "postCreateCommand": "echo \"token=$TOKEN extra=$EXTRA\"",
            "remoteEnv": {"EXTRA": "from-config"}}"#,
    );
    // --expect-existing-container without a container: an error, nothing created.
    let out = ws.output("up", &["--expect-existing-container"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(ws.containers().is_empty());
    // Bad limits: a clear error naming the flag, nothing created.
    for (flag, value) in [
        ("--pids-limit", "0"),
        ("--memory", "1x"),
        ("--memory", "1k"),
        ("--cpus", "0"),
    ] {
        let out = ws.output("up", &[flag, value]);
        assert_eq!(out.status.code(), Some(1));
        let result = last_json(&out);
        assert_eq!(result["outcome"], "error");
        let message = result["message"].as_str().unwrap();
        assert!(
            message.contains(flag) && message.contains(&format!("`{value}`")),
            "{message}"
        );
    }
    let out = ws.output("up", &["--cpus", "many"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cpus"));
    assert!(ws.containers().is_empty());

    // --id-label, --secrets-file (masked in output), --remote-env (the config wins), --mount,
    // --include-merged-configuration.
    let secrets = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secrets.path(), r#"{"TOKEN": "s3cr3t-value"}"#).unwrap();
    let label = format!("devcell.test.flags={}", crate::support::run_token());
    let volume = format!(
        "type=volume,source=devcell-test-flags-{},target=/extra",
        crate::support::run_token()
    );
    let common = ["--id-label", label.as_str()];
    let mut args = common.to_vec();
    args.extend([
        "--secrets-file",
        secrets.path().to_str().unwrap(),
        "--remote-env",
        "EXTRA=from-cli",
        "--mount",
        volume.as_str(),
        "--include-merged-configuration",
        "--network",
        "none",
        "--memory",
        "512m",
        "--cpus",
        "1.5",
        "--pids-limit",
        "99",
    ]);
    let out = ws.output("up", &args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result = last_json(&out);
    assert_eq!(result["outcome"], "success", "{stderr}");
    let id = result["containerId"].as_str().unwrap().to_string();
    // Dropped last: after the containers that use it.
    let _volume = VolumeGuard(format!(
        "devcell-test-flags-{}",
        crate::support::run_token()
    ));
    let _container = ContainerGuard(id.clone());
    assert!(
        stderr.contains("token=******** extra=from-config"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cr3t-value"), "secret leaked: {stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cr3t-value"));
    assert_eq!(result["mergedConfiguration"]["remoteUser"], "nobody");
    // Only the --id-label identifies the container (the defaults are not added).
    assert_eq!(
        docker_inspect(&id, "{{index .Config.Labels \"devcell.test.flags\"}}"),
        crate::support::run_token().to_string()
    );
    assert!(ws.containers().is_empty());
    assert!(docker_inspect(&id, "{{json .Mounts}}").contains("/extra"));
    assert_eq!(docker_inspect(&id, "{{.HostConfig.NetworkMode}}"), "none");
    assert_eq!(
        docker_inspect(
            &id,
            "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}}"
        ),
        format!("{} 1500000000 99", 512 << 20)
    );
    // and from inside: the cgroup's limits (v2 files, else v1)
    let mut cgroup = common.to_vec();
    cgroup.extend(["sh", "-c", CGROUP_LIMITS]);
    let out = ws.output("exec", &cgroup);
    let inside = String::from_utf8_lossy(&out.stdout);
    assert!(inside.contains("pids=99\n"), "{inside}");
    assert!(
        inside.contains(&format!("memory={}\n", 512 << 20)),
        "{inside}"
    );
    assert!(inside.contains("cpu=150000 100000\n"), "{inside}");

    // exec finds it by the same label; --expect-existing-container now succeeds.
    let mut exec_args = common.to_vec();
    exec_args.extend(["sh", "-c", "echo $EXTRA"]);
    let out = ws.output("exec", &exec_args);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "from-config");
    let mut again = common.to_vec();
    again.extend(["--expect-existing-container", "--skip-post-create"]);
    let result = ws.up(&again);
    assert_eq!(result["containerId"], id.as_str());

    // --remove-existing-container makes a new one.
    let mut replace = common.to_vec();
    replace.extend(["--remove-existing-container", "--skip-post-create"]);
    let result = ws.up(&replace);
    let new_id = result["containerId"].as_str().unwrap().to_string();
    let _new_container = ContainerGuard(new_id.clone());
    assert_ne!(new_id, id);
    assert_eq!(docker_inspect(&id, "{{.Id}}"), "");
    // --skip-post-create: no hook ran.
    assert!(ran(&result).is_empty());
}

/// A shell script printing the container's cgroup limits as `pids=N`, `memory=BYTES` and
/// `cpu=QUOTA PERIOD` (cgroup v2 files, else v1).
pub const CGROUP_LIMITS: &str = "c=/sys/fs/cgroup; \
    if [ -r $c/pids.max ]; then echo pids=$(cat $c/pids.max); else echo pids=$(cat $c/pids/pids.max); fi; \
    if [ -r $c/memory.max ]; then echo memory=$(cat $c/memory.max); else echo memory=$(cat $c/memory/memory.limit_in_bytes); fi; \
    if [ -r $c/cpu.max ]; then echo cpu=$(cat $c/cpu.max); else echo cpu=$(cat $c/cpu/cpu.cfs_quota_us) $(cat $c/cpu/cpu.cfs_period_us); fi";

/// Runs the `devcell` binary with `HOME`, the XDG folders and `DEVCELL_STATE_DIR` under `home`,
/// capturing `ps -eo args` of every host process (the container's included) until it ends:
/// (its output, the captures).
fn run_capturing_ps(home: &Path, args: &[&str]) -> (Output, Vec<String>) {
    use std::process::Stdio;
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("devcell"));
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("DEVCELL_STATE_DIR", home.join("devcell-state"));
    // The engine of the test run (scripts/podman points DOCKER_HOST at Podman).
    if let Ok(host) = std::env::var("DOCKER_HOST") {
        command.env("DOCKER_HOST", host);
    }
    let child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("devcell runs");
    let proc = PathBuf::from(format!("/proc/{}", child.id()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut captures = Vec::new();
    // The child stays a zombie (its /proc entry exists) until waited for: stop at its exit.
    while std::time::Instant::now() < deadline
        && std::fs::read_to_string(proc.join("stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    {
        let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
        captures.push(String::from_utf8_lossy(&ps.stdout).into_owned());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (child.wait_with_output().unwrap(), captures)
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn exec_and_run_user_commands_pass_secrets_through_the_exec_env_only() {
    let Some(ctx) =
        TestContext::busybox("exec_and_run_user_commands_pass_secrets_through_the_exec_env_only")
    else {
        return;
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "postAttachCommand": "echo \"hook sees $DEVCELL_IT_SECRET\"; printf %s \"$DEVCELL_IT_SECRET\" | sha256sum > /tmp/hook-secret.sha256; sleep 3"}"#,
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let secret = format!("dcs3cret{nanos:x}{:x}", std::process::id());
    let expected = hex::encode(Sha256::digest(secret.as_bytes()));
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secrets_file = outside.path().join("secrets.json");
    std::fs::write(
        &secrets_file,
        serde_json::json!({"DEVCELL_IT_SECRET": secret}).to_string(),
    )
    .unwrap();
    let ws_path = ws.path().to_str().unwrap().to_string();
    let file = secrets_file.to_str().unwrap();
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut captures = Vec::new();

    let (out, _) = run_capturing_ps(home.path(), &["up", "--workspace-folder", &ws_path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = last_json(&out)["containerId"].as_str().unwrap().to_string();

    // exec: the process sees the value (its hash), through the exec's environment
    let (out, ps) = run_capturing_ps(
        home.path(),
        &[
            "exec",
            "--workspace-folder",
            &ws_path,
            "--secrets-file",
            file,
            "sh",
            "-c",
            "printf %s \"$DEVCELL_IT_SECRET\" | sha256sum; sleep 3",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout.split_whitespace().next(), Some(expected.as_str()));
    assert!(
        ps.iter().any(|c| c.lines().any(|l| l.trim() == "sleep 3")),
        "ps was captured while the exec ran"
    );
    captures.extend(ps);
    outputs.push(("exec stdout".into(), stdout));
    outputs.push(("exec stderr".into(), stderr));

    // run-user-commands: the hook sees it; its output shows it masked
    let (out, ps) = run_capturing_ps(
        home.path(),
        &[
            "run-user-commands",
            "--workspace-folder",
            &ws_path,
            "--secrets-file",
            file,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(last_json(&out)["outcome"], "success");
    assert!(stderr.contains("hook sees ********"), "{stderr}");
    assert!(
        ps.iter().any(|c| c.lines().any(|l| l.trim() == "sleep 3")),
        "ps was captured while the hook ran"
    );
    let (code, hook_hash, _) = ws.sh("cat /tmp/hook-secret.sha256");
    assert_eq!(code, 0);
    assert_eq!(hook_hash.split_whitespace().next(), Some(expected.as_str()));
    captures.extend(ps);
    outputs.push(("run-user-commands stdout".into(), stdout));
    outputs.push(("run-user-commands stderr".into(), stderr));

    // an error whose text would show the value (here: a workspace path containing it) shows
    // it masked
    let named = outside.path().join(&secret);
    std::fs::create_dir_all(named.join(".devcontainer")).unwrap();
    std::fs::write(
        named.join(".devcontainer/devcontainer.json"),
        format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#),
    )
    .unwrap();
    let (out, _) = run_capturing_ps(
        home.path(),
        &[
            "exec",
            "--workspace-folder",
            named.to_str().unwrap(),
            "--secrets-file",
            file,
            "true",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no dev container found") && stderr.contains("********"),
        "{stderr}"
    );
    outputs.push(("exec error".into(), stderr));

    // and the value is nowhere else
    let docker = |args: &[&str]| {
        let o = Command::new("docker").args(args).bounded_output().unwrap();
        assert!(o.status.success(), "docker {args:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    outputs.push(("docker inspect".into(), docker(&["inspect", &id])));
    outputs.push((
        "docker image inspect".into(),
        docker(&["image", "inspect", BUSYBOX_IMAGE]),
    ));
    for path in files_under(home.path()) {
        outputs.push((
            path.display().to_string(),
            String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned(),
        ));
    }
    for (i, c) in captures.into_iter().enumerate() {
        outputs.push((format!("ps capture {i}"), c));
    }
    for (what, text) in &outputs {
        assert!(!text.contains(&secret), "the secret leaked into {what}");
    }
}

/// `updateRemoteUserUID` with devcell run as root (spec-note 0250): a workspace owned by a
/// non-root user (4242, not world-writable) gives the remote user `nobody` that user's ids, so
/// files made through `exec` belong to 4242 on the host; `updateRemoteUserUID: false` keeps
/// `nobody` at 65534; a root-owned workspace keeps it at 65534 with a warning that it cannot
/// write there.
#[test]
fn the_remote_user_gets_the_workspace_owners_ids() {
    use crate::support::git::{WORKSPACE_OWNER, give_to_workspace_owner, owner_uid};
    let Some(ctx) = TestContext::busybox("the_remote_user_gets_the_workspace_owners_ids") else {
        return;
    };
    assert_eq!(
        owner_uid(Path::new("/proc/self")),
        0,
        "this test expects to run as root (as CI does)"
    );
    let ws = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    give_to_workspace_owner(ws.path());
    let result = ws.up(&[]);
    let id = result["containerId"].as_str().unwrap().to_string();
    let image = container_image(&id);
    assert!(image.starts_with("devcell/uid:"), "{image}");
    ws.remove_images_matching(&image);
    assert_eq!(
        result["devcell"]["warnings"],
        serde_json::json!([]),
        "{result}"
    );
    let (code, stdout, stderr) = ws.sh("id -u; id -g; echo x > made-by-exec; stat -c %u \"$HOME\"");
    assert_eq!(code, 0, "{stderr}");
    let owner = WORKSPACE_OWNER.to_string();
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [owner.as_str(), owner.as_str(), owner.as_str()]
    );
    assert_eq!(owner_uid(&ws.path().join("made-by-exec")), WORKSPACE_OWNER);

    let off = TestContext::new("up")
        .config(r#"{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false}"#);
    give_to_workspace_owner(off.path());
    let result = off.up(&[]);
    assert_eq!(
        result["devcell"]["warnings"],
        serde_json::json!([]),
        "{result}"
    );
    let (_, stdout, _) = off.sh("id -u");
    assert_eq!(stdout.trim(), "65534");

    // everything is root: nothing to map to; the user is told
    let root_owned = TestContext::new("up").config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let result = root_owned.up(&[]);
    let warnings = result["devcell"]["warnings"].to_string();
    assert!(
        warnings.contains("belongs to root") && warnings.contains("keeps uid 65534"),
        "{result}"
    );
    let (_, stdout, _) = root_owned.sh("id -u; touch probe 2>/dev/null || echo cannot-write");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["65534", "cannot-write"]
    );
}

/// spec-note 0188: a root-only image (busybox: no `USER`, only `root` and `nobody`) with no
/// user named comes up under `hardened` as the non-root user devcell provides, made in the uid
/// layer with the workspace owner's ids; hooks and `exec` run as it, the result and a reuse say
/// so. With everything root the user gets the first free ids from 1000.
#[test]
fn a_root_image_with_no_user_runs_as_the_user_devcell_provides() {
    use crate::support::git::{WORKSPACE_OWNER, give_to_workspace_owner, owner_uid};
    let Some(ctx) =
        TestContext::busybox("a_root_image_with_no_user_runs_as_the_user_devcell_provides")
    else {
        return;
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "postCreateCommand": "id -u > hook-uid; id -un >> hook-uid; echo \"$HOME\" >> hook-uid"}"#,
    );
    give_to_workspace_owner(ws.path());
    let out = ws.output("up", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("devcell provides the non-root user `devcell`"),
        "{stderr}"
    );
    let result = last_json(&out);
    let id = result["containerId"].as_str().unwrap().to_string();
    let image = container_image(&id);
    assert!(image.starts_with("devcell/uid:"), "{image}");
    ws.remove_images_matching(&image);
    assert_eq!(result["remoteUser"], "devcell", "{result}");
    assert_eq!(result["devcell"]["providedUser"], "devcell", "{result}");
    assert!(
        !result["devcell"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["permission"] == "root"),
        "{result}"
    );
    // created as numeric `uid:gid` (no image group for its main process), the name kept in
    // devcell's label, which the result above reports (issue 25)
    let owner = WORKSPACE_OWNER.to_string();
    let config_user = docker_inspect(&id, "{{.Config.User}}");
    assert!(
        config_user.starts_with(&format!("{owner}:")),
        "{config_user}"
    );
    assert_eq!(
        docker_inspect(&id, "{{index .Config.Labels \"devcell.user\"}}"),
        "devcell"
    );
    let hook = std::fs::read_to_string(ws.path().join("hook-uid")).unwrap();
    assert_eq!(
        hook.lines().collect::<Vec<_>>(),
        [owner.as_str(), "devcell", "/home/devcell"],
        "the hook ran as the provided user"
    );
    assert_eq!(owner_uid(&ws.path().join("hook-uid")), WORKSPACE_OWNER);
    let (code, stdout, stderr) = ws.sh("id -u; id -un; touch \"$HOME/x\" && echo home-writable");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [owner.as_str(), "devcell", "home-writable"]
    );
    // reused: still said
    let again = ws.up(&[]);
    assert_eq!(again["containerId"], result["containerId"]);
    assert_eq!(again["devcell"]["providedUser"], "devcell", "{again}");

    // everything root: no workspace user to map to; the first free uid from 1000
    let root_owned = TestContext::new("up").config(r#"{"image": "IMAGE"}"#);
    let result = root_owned.up(&[]);
    assert_eq!(result["devcell"]["providedUser"], "devcell", "{result}");
    let (_, stdout, _) = root_owned.sh("id -u; id -g");
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["1000", "1000"]);
    if let Some(id) = result["containerId"].as_str() {
        root_owned.remove_images_matching(&container_image(id));
    }

    // `--allow root` gets root, as asked; `reference` runs the image as written
    for args in [
        &["--allow", "root"][..],
        &["--security-profile", "reference"][..],
    ] {
        let granted = TestContext::new("up").config(r#"{"image": "IMAGE"}"#);
        let result = granted.up(args);
        assert_eq!(result["remoteUser"], "root", "{args:?}: {result}");
        assert!(result["devcell"].get("providedUser").is_none(), "{result}");
        let (_, stdout, _) = granted.sh("id -u");
        assert_eq!(stdout.trim(), "0", "{args:?}");
    }
}

/// Issue 28 item 5: a configuration's typo is warned about on stderr, with the property it most
/// likely means, as soon as the configuration is read: also when `up` then fails, and once
/// when it succeeds (the result lists it too).
#[test]
fn a_typo_is_warned_about_with_a_suggestion_even_when_up_fails() {
    let Some(ctx) =
        TestContext::busybox("a_typo_is_warned_about_with_a_suggestion_even_when_up_fails")
    else {
        return;
    };
    const WARNING: &str = "unknown property `remoteUsr` (did you mean `remoteUser`?)";
    let ws = ctx.config(r#"{"image": "IMAGE", "remoteUsr": "nobody", "privileged": true}"#);
    let out = ws.output("up", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let warned = stderr.find(WARNING).expect("the typo is warned about");
    let refused = stderr.find("error:").expect("the refusal");
    assert!(warned < refused, "the warning comes first: {stderr}");
    assert!(ws.containers().is_empty(), "a container was created");

    let ws = TestContext::new("up").config(r#"{"image": "IMAGE", "remoteUsr": "nobody"}"#);
    let out = ws.output("up", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");
    let result = last_json(&out);
    assert!(
        result["devcell"]["warnings"].to_string().contains(WARNING),
        "{result}"
    );
    if let Some(id) = result["containerId"].as_str() {
        ws.remove_images_matching(&container_image(id));
    }
}

/// An unsupported or invalid `runArgs` flag is reported at its place in devcontainer.json
/// (file:line:column and `runArgs[i]`), with the caret line, and nothing is created.
#[test]
fn unsupported_run_args_are_located_in_the_config() {
    let Some(ctx) = TestContext::busybox("unsupported_run_args_are_located_in_the_config") else {
        return;
    };
    let ws = ctx.config(
        "{\n  \"image\": \"IMAGE\",\n  \"remoteUser\": \"nobody\",\n  \"runArgs\": [\"--init\", \"--weird-flag\"]\n}\n",
    );
    let out = ws.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let result = last_json(&out);
    let message = result["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "devcontainer.json:4:25: runArgs[1]: unsupported `runArgs` flag `--weird-flag`"
        ),
        "{message}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("^"), "{stderr}");
    assert!(ws.containers().is_empty(), "a container was created");
    // `flag=value` spellings are found too
    ws.write(
        ".devcontainer/devcontainer.json",
        &format!(
            "{{\"image\": \"{BUSYBOX_IMAGE}\", \"remoteUser\": \"nobody\",\n \"runArgs\": [\"--weird-flag=1\"]}}"
        ),
    );
    let out = ws.output("up", &[]);
    let message = last_json(&out)["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("devcontainer.json:2:14: runArgs[0]"),
        "{message}"
    );
}

/// devcell run as root in a user's workspace writes `devcontainer-lock.json` as that user's
/// file, like its other files there (spec-note 0250).
#[test]
fn the_lockfile_belongs_to_the_workspace_owner() {
    use crate::support::git::{WORKSPACE_OWNER, give_to_workspace_owner, owner_uid};
    let Some(ctx) = TestContext::busybox("the_lockfile_belongs_to_the_workspace_owner") else {
        return;
    };
    let ws =
        ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./marker": {}}}"#);
    ws.feature(
        "marker",
        r#"{"id": "marker", "version": "1.0.0"}"#,
        "touch /marker",
    );
    give_to_workspace_owner(ws.path());
    let out = ws.output("up", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lock = ws.path().join(".devcontainer/devcontainer-lock.json");
    if running_as_root() {
        assert_eq!(owner_uid(&lock), WORKSPACE_OWNER);
    }
    ws.output("down", &["--remove"]);
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A hook that fails because the remote user cannot write a root-owned workspace (devcell run
/// as root): `up`'s warning saying so is shown before the failure, not lost with the result;
/// the error's cause is not printed twice.
#[test]
fn a_failed_hook_shows_the_warnings_first() {
    let Some(ws) = TestContext::busybox("a_failed_hook_shows_the_warnings_first") else {
        return;
    };
    if !running_as_root() {
        return;
    }
    let ws = ws.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody", "postCreateCommand": "echo x > postcreate.txt"}"#,
    );
    let out = ws.output("up", &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warning = stderr
        .find("belongs to root: the remote user `nobody` keeps uid 65534 and cannot write it")
        .unwrap_or_else(|| panic!("no ownership warning: {stderr}"));
    let error = stderr.find("error: `postCreateCommand`").unwrap();
    assert!(warning < error, "{stderr}");
    assert!(
        !stderr.contains("caused by: `postCreateCommand`"),
        "{stderr}"
    );
    ws.output("down", &["--remove"]);
}

/// Issue 12 item 1: on an image whose `/etc/profile` resets `PATH` (Debian's, non-root
/// `remoteUser`), a Feature's `containerEnv` `PATH` entry and the image's `ENV PATH` entry still
/// reach a `postCreateCommand`, `devcell exec` and a handoff agent (spec-note 0470).
#[test]
fn feature_and_image_path_entries_survive_a_login_shell_profile() {
    let test = "feature_and_image_path_entries_survive_a_login_shell_profile";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let image = crate::support::docker::debian_like_image();
    let ws = ctx.config(&format!(
        r#"{{"image": "{image}", "remoteUser": "dev",
            "features": {{"./tool": {{}}}},
            "postCreateCommand": "tool && imagetool && echo \"hook PATH=$PATH\""}}"#
    ));
    ws.feature(
        "tool",
        r#"{"id": "tool", "version": "1.0.0", "containerEnv": {"PATH": "/opt/tool/bin:${PATH}"}}"#,
        "mkdir -p /opt/tool/bin\nprintf '#!/bin/sh\\necho feature-tool-ran\\n' > /opt/tool/bin/tool\nchmod 755 /opt/tool/bin/tool",
    );
    // The login shell really resets PATH in this image (the bug's precondition).
    let (ok, profile_path) = crate::support::engine::docker(&[
        "run",
        "--rm",
        "--user",
        "dev",
        image,
        "sh",
        "-lc",
        "echo $PATH",
    ]);
    assert!(ok);
    // (`docker` merges stderr, where the engine may add a warning line.)
    assert_eq!(
        profile_path.lines().next(),
        Some("/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games")
    );

    let out = ws.output("up", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // This test's Features image (its config is its own) goes with the workspace.
    let id = last_json(&out)["containerId"].as_str().unwrap().to_string();
    ws.remove_images_matching(&container_image(&id));
    assert!(
        stderr.contains("feature-tool-ran\nimage-tool-ran\n"),
        "{stderr}"
    );
    // Merged as the reference does: the container's entries first, the profile's order kept,
    // no sbin for a non-root user.
    assert!(
        stderr.contains(
            "hook PATH=/opt/tool/bin:/opt/image/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games\n"
        ),
        "{stderr}"
    );

    for (tool, said) in [
        ("tool", "feature-tool-ran\n"),
        ("imagetool", "image-tool-ran\n"),
    ] {
        let out = ws.output("exec", &[tool]);
        assert!(
            out.status.success(),
            "exec {tool}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), said);
    }

    // A handoff agent (a one-repository workspace, its own container) calls both tools too.
    let out = ws.output("down", &["--remove"]);
    assert!(out.status.success());
    crate::support::git::git(ws.path(), &["init", "-q"]);
    crate::support::git::git(ws.path(), &["add", "-A"]);
    crate::support::git::git(ws.path(), &["commit", "-q", "-m", "initial"]);
    let settings = tempfile::tempdir().unwrap();
    let config = settings.path().join("config.toml");
    std::fs::write(
        &config,
        "[agents.tools]\ncommand = [\"sh\", \"-c\", \"tool && imagetool\"]\n",
    )
    .unwrap();
    let out = devcell()
        .args(["handoff", "--workspace-folder"])
        .arg(ws.path())
        .args(["--agent", "tools", "--format", "json", "--config-file"])
        .arg(&config)
        .env("DEVCELL_STATE_DIR", settings.path().join("state"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = devcell()
        .args(["delete", "--workspace-folder"])
        .arg(ws.path())
        .env("DEVCELL_STATE_DIR", settings.path().join("state"))
        .output();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("feature-tool-ran\nimage-tool-ran\n"),
        "{stderr}"
    );
}

/// Issue 12 item 8: a warm `up` whose once-hooks already ran starts no process in the
/// container (no `exec_create` event), the markers are written by the engine into the state
/// volume (root-owned, the reference's file names and contents), and a restart still runs
/// `postStartCommand` but not `postCreateCommand` (spec-note 0471).
#[test]
fn warm_up_with_hooks_that_ran_starts_no_process() {
    let Some(ctx) = TestContext::busybox("warm_up_with_hooks_that_ran_starts_no_process") else {
        return;
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "postCreateCommand": "echo post-create-ran", "postStartCommand": "echo post-start-ran"}"#,
    );
    let first = ws.up(&[]);
    assert_eq!(ran(&first), ["postCreateCommand", "postStartCommand"]);
    let id = first["containerId"].as_str().unwrap().to_string();
    // The markers: root's files in the volume, holding the container's times; the hook
    // wrapper's process records go to a tmpfs made sticky and world-writable at creation
    // (spec-notes 0423, 0471), and the volume keeps the mode the engine gave it.
    let (ok, owners) = crate::support::engine::docker(&[
        "exec",
        &id,
        "stat",
        "-c",
        "%u %a",
        "/var/lib/devcell/markers/.postCreateCommandMarker",
        "/run/devcell",
        "/var/lib/devcell",
    ]);
    assert!(ok, "{owners}");
    let lines: Vec<&str> = owners.lines().collect();
    assert_eq!(lines[0], "0 644", "{owners}");
    assert!(lines[1].ends_with(" 1777"), "{owners}");
    assert!(!lines[2].ends_with(" 1777"), "{owners}");
    let (_, marker) = crate::support::engine::docker(&[
        "exec",
        &id,
        "cat",
        "/var/lib/devcell/markers/.postCreateCommandMarker",
    ]);
    assert_eq!(marker.trim(), docker_inspect(&id, "{{.Created}}"));

    // The first warm `up` reads the markers (no process either), later ones only inspect.
    for _ in 0..2 {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let warm = ws.up(&[]);
        assert!(ran(&warm).is_empty(), "{warm}");
        let already: Vec<&str> = warm["devcell"]["lifecycle"]["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["reason"] == "alreadyRan")
            .map(|s| s["hook"].as_str().unwrap())
            .collect();
        assert_eq!(already, ["postCreateCommand", "postStartCommand"], "{warm}");
        let (ok, events) = crate::support::engine::docker(&[
            "events",
            "--since",
            &format!("{}.{:09}", since.as_secs(), since.subsec_nanos()),
            "--until",
            &(since.as_secs() + 2).to_string(),
            "--filter",
            &format!("container={id}"),
            "--filter",
            "event=exec_create",
        ]);
        assert!(ok, "{events}");
        assert_eq!(events.trim(), "", "a warm up started a process");
    }

    // After a restart postStartCommand is due again, postCreateCommand is not.
    let (ok, _) = crate::support::engine::docker(&["restart", "-t", "0", &id]);
    assert!(ok);
    let restarted = ws.up(&[]);
    assert_eq!(ran(&restarted), ["postStartCommand"], "{restarted}");
}

/// The processes a new `hardened` container without hooks gets from `up`, in the order the
/// engine saw them (`exec_create` events: the command each exec ran).
fn execs_of_a_new_container(ws: &TestContext) -> Vec<String> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let result = ws.up(&[]);
    let id = result["containerId"].as_str().unwrap().to_string();
    let (ok, events) = crate::support::engine::docker(&[
        "events",
        "--since",
        &format!("{}.{:09}", since.as_secs(), since.subsec_nanos()),
        "--until",
        &(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 1)
        .to_string(),
        "--filter",
        &format!("container={id}"),
        "--filter",
        "event=exec_create",
        "--format",
        "{{.Action}}",
    ]);
    assert!(ok, "{events}");
    events.lines().map(str::to_string).collect()
}

/// Issue 12 item 8: a new `hardened` container whose remote user is the user it runs as gets
/// no uid-check exec at all (the engine's `top` gives its processes' uids, and the engine
/// resolves one spelling to one uid); a remote user spelled differently (`65534` for
/// `nobody`) is still checked on its own, with one exec (spec-notes 0420, 0471).
#[test]
fn a_new_container_checks_each_distinct_user_once() {
    let test = "a_new_container_checks_each_distinct_user_once";
    let (Some(same), Some(other)) = (TestContext::busybox(test), TestContext::busybox(test)) else {
        return;
    };
    let same = same.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let execs = execs_of_a_new_container(&same);
    assert_eq!(execs, Vec::<String>::new());

    let other =
        other.config(r#"{"image": "IMAGE", "containerUser": "nobody", "remoteUser": "65534"}"#);
    let execs = execs_of_a_new_container(&other);
    let checks = execs
        .iter()
        .filter(|e| e.contains("/proc/self/status"))
        .count();
    assert_eq!(checks, 1, "{execs:#?}");
}

/// The containers created (`create` events, each with its name) and the processes started
/// (`exec_create` events, each with its command) from `since` until now, for containers of
/// the image `image` (an unlisted tag used by one test only).
fn engine_work_since(image: &str, since: std::time::Duration) -> (Vec<String>, Vec<String>) {
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1;
    let (ok, events) = crate::support::engine::docker(&[
        "events",
        "--since",
        &format!("{}.{:09}", since.as_secs(), since.subsec_nanos()),
        "--until",
        &until.to_string(),
        "--filter",
        "type=container",
        "--filter",
        &format!("image={image}"),
        "--format",
        "{{json .}}",
    ]);
    assert!(ok, "{events}");
    let mut created = Vec::new();
    let mut execs = Vec::new();
    // One JSON object a line: an exec's command may span lines.
    for event in events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        let action = event["Action"].as_str().unwrap_or_default();
        if action == "create" {
            created.push(event["Actor"]["ID"].as_str().unwrap().to_string());
        } else if action.starts_with("exec_create: ") {
            execs.push(action.to_string());
        }
    }
    (created, execs)
}

/// Issue 12 item 8: what a new `hardened` container with a `postCreateCommand` costs the
/// engine, counted from its events. With an image devcell has read before (its `/etc/passwd`
/// recorded by image id): one container (the dev container) and two processes (the
/// `userEnvProbe`, the hook; the uid check reads the engine's `top`), no `chmod` (the
/// pid-file tmpfs is created with its mode, the markers go through the archive API); the
/// first sight of the image adds only
/// the created-never-started container its `/etc/passwd` is read from (spec-notes 0185, 0471).
#[test]
fn a_new_container_costs_one_container_and_two_processes() {
    let test = "a_new_container_costs_one_container_and_two_processes";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let image = format!(
        "devcell-test/busybox-count-{}:1",
        crate::support::run_token()
    );
    let (ok, out) = crate::support::engine::docker(&["tag", BUSYBOX_IMAGE, &image]);
    assert!(ok, "{out}");
    let _untag = ImageGuard(vec![image.clone()]);
    let ws = ctx.isolated().config(&format!(
        r#"{{"image": "{image}", "remoteUser": "nobody", "postCreateCommand": "echo counted"}}"#
    ));
    for round in ["first sight of the image", "image seen before"] {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let result = ws.up(&[]);
        assert_eq!(ran(&result), ["postCreateCommand"], "{round}: {result}");
        let id = result["containerId"].as_str().unwrap().to_string();
        let (created, execs) = engine_work_since(&image, since);
        let probes = created.iter().filter(|c| **c != id).count();
        let expected_probes = usize::from(round == "first sight of the image");
        assert_eq!(
            (created.iter().filter(|c| **c == id).count(), probes),
            (1, expected_probes),
            "{round}: {created:#?}"
        );
        assert_eq!(execs.len(), 2, "{round}: {execs:#?}");
        assert!(
            !execs.iter().any(|e| e.contains("/proc/self/status")),
            "{execs:#?}"
        );
        assert!(
            execs[1].contains("devcell-hook") && execs[1].contains("echo counted"),
            "{execs:#?}"
        );
        assert!(!execs.iter().any(|e| e.contains("chmod")), "{execs:#?}");
        let (ok, out) = crate::support::engine::docker(&["rm", "-f", "-v", &id]);
        assert!(ok, "{out}");
    }
}

/// Issue 12 item 11a: an explicit `workspaceFolder` that no mount covers is the
/// `remoteWorkspaceFolder`, the hooks' and `exec`'s working folder, as with the reference CLI
/// (spec-note 0474).
#[test]
fn a_workspace_folder_no_mount_covers_is_used_as_written() {
    let test = "a_workspace_folder_no_mount_covers_is_used_as_written";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let config = r#"{"image": "IMAGE", "remoteUser": "nobody", "workspaceFolder": "/etc",
        "postCreateCommand": "echo \"hook-in-$(pwd)\""}"#;
    let ws = ctx.config(config);
    let out = ws.output("up", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(last_json(&out)["remoteWorkspaceFolder"], "/etc");
    assert!(stderr.contains("hook-in-/etc\n"), "{stderr}");
    let (code, stdout, _) = ws.sh("pwd");
    assert_eq!((code, stdout.as_str()), (0, "/etc\n"));

    if let Some(cli) = reference_cli(test) {
        let theirs = TestContext::new("up").config(config);
        let reference = reference_up(&cli, &theirs);
        assert_eq!(reference["remoteWorkspaceFolder"], "/etc", "{reference}");
    }
}

/// Issue 12 item 11c: `up --include-configuration` prints `configuration` with
/// `${containerEnv:…}` and `${devcontainerId}` substituted, as the reference CLI does
/// (spec-note 0475).
#[test]
fn include_configuration_is_substituted_like_the_reference() {
    let test = "include_configuration_is_substituted_like_the_reference";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let config = r#"{"image": "IMAGE", "remoteUser": "nobody",
        "remoteEnv": {"P": "${containerEnv:PATH}:/x", "I": "${devcontainerId}"}}"#;
    let ws = ctx.config(config);
    let ours = ws.up(&["--include-configuration"]);
    let path = docker_inspect(
        ours["containerId"].as_str().unwrap(),
        "{{range .Config.Env}}{{println .}}{{end}}",
    )
    .lines()
    .find_map(|l| l.strip_prefix("PATH=").map(str::to_string))
    .unwrap();
    let env = &ours["configuration"]["remoteEnv"];
    assert_eq!(env["P"], format!("{path}:/x"), "{ours}");
    let id = env["I"].as_str().unwrap();
    assert!(!id.contains("${") && id.len() > 20, "{ours}");
    assert!(ours["mergedConfiguration"].is_null());

    if let Some(cli) = reference_cli(test) {
        let theirs = TestContext::new("up").config(config);
        let out = cli
            .command()
            .args(["up", "--include-configuration", "--workspace-folder"])
            .arg(theirs.path())
            .long_output()
            .unwrap();
        let reference = last_json(&out);
        let base = theirs
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_lowercase();
        theirs.remove_images_matching(&format!("vsc-{base}-*"));
        cli.assert_stayed_local();
        assert_eq!(
            reference["configuration"]["remoteEnv"]["P"], env["P"],
            "{reference}"
        );
        let theirs_id = reference["configuration"]["remoteEnv"]["I"]
            .as_str()
            .unwrap();
        assert!(!theirs_id.contains("${"), "{reference}");
    }
}

/// `up --omit-config-remote-env-from-metadata` (spec-note 0310): the container's
/// `devcontainer.metadata` label has no `remoteEnv` from devcontainer.json (an image config:
/// the container carries the label; with a Feature: the built image does), while the hooks and
/// `exec` still get it; without the flag the label keeps it.
#[test]
fn omit_config_remote_env_from_metadata_keeps_it_out_of_the_label_only() {
    let Some(ctx) = TestContext::busybox("omit_config_remote_env_from_metadata") else {
        return;
    };
    let label_remote_env = |id: &str| -> Vec<Value> {
        let label = docker_inspect(id, "{{index .Config.Labels \"devcontainer.metadata\"}}");
        let entries: Vec<Value> = serde_json::from_str(&label).expect("label is JSON");
        entries
            .into_iter()
            .filter_map(|e| e.get("remoteEnv").cloned())
            .collect()
    };
    let ws = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "remoteEnv": {"OMIT_ME": "secret-ish"},
            "postCreateCommand": "echo \"hook:$OMIT_ME\""}"#,
    );
    let up = ws.up(&["--omit-config-remote-env-from-metadata"]);
    let id = up["containerId"].as_str().unwrap().to_string();
    assert!(label_remote_env(&id).is_empty(), "{id}");
    let (code, out, err) = ws.sh("echo \"exec:$OMIT_ME\"");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "exec:secret-ish");
    // The hook saw it: its output is in `up`'s log.
    let again = ws.run(
        "up",
        &[
            "--omit-config-remote-env-from-metadata",
            "--remove-existing-container",
        ],
    );
    again.ok();
    assert!(again.stderr.contains("hook:secret-ish"), "{}", again.stderr);
    let id = again.last_json()["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(label_remote_env(&id).is_empty());

    // Without the flag the label has it.
    let plain = ws.up(&["--remove-existing-container"]);
    let id = plain["containerId"].as_str().unwrap().to_string();
    assert_eq!(
        label_remote_env(&id),
        vec![serde_json::json!({"OMIT_ME": "secret-ish"})]
    );

    // With a Feature the image carries the label: the same rule, the hooks still see it.
    let fws = TestContext::busybox("omit_config_remote_env_from_metadata_features")
        .unwrap()
        .config(
            r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./f": {}},
                "remoteEnv": {"OMIT_ME": "feature-config"},
                "postCreateCommand": "echo \"hook:$OMIT_ME\""}"#,
        );
    fws.feature("f", r#"{"id": "f", "version": "1.0.0"}"#, "true");
    let run = fws.run("up", &["--omit-config-remote-env-from-metadata"]);
    run.ok();
    assert!(run.stderr.contains("hook:feature-config"), "{}", run.stderr);
    let id = run.last_json()["containerId"].as_str().unwrap().to_string();
    assert!(label_remote_env(&id).is_empty());
    let (_, out, _) = fws.sh("echo \"exec:$OMIT_ME\"");
    assert_eq!(out.trim(), "exec:feature-config");
}

/// The engine calls `--log-level debug` logged on `stderr` (one line per call, as it ends).
fn engine_calls(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            l.contains(" DEBUG ") && l.contains(": devcell::engine") && l.contains(" close ")
        })
        .collect()
}

/// A warm `up` (the container runs, its `postCreateCommand` ran) looks its container up once,
/// under the bring-up lock, and judges it once: at most three engine calls (find, inspect,
/// the hooks' run-once markers; spec-note 0400).
#[test]
fn a_warm_up_makes_at_most_three_engine_calls() {
    let Some(ctx) = TestContext::busybox("a_warm_up_makes_at_most_three_engine_calls") else {
        return;
    };
    let ctx = ctx.isolated().config(
        r#"{"image": "IMAGE", "remoteUser": "nobody", "postCreateCommand": "echo created >> /tmp/created"}"#,
    );
    ctx.up(&[]);
    let run = ctx.run("up", &["--log-level", "debug"]);
    run.ok();
    assert_eq!(
        run.last_json()["devcell"]["container"],
        "running",
        "{}",
        run.stdout
    );
    let calls = engine_calls(&run.stderr);
    assert!(!calls.is_empty(), "no engine call logged: {}", run.stderr);
    assert!(
        calls.len() <= 3,
        "{} engine calls:\n{}",
        calls.len(),
        calls.join("\n")
    );
    assert_eq!(
        calls
            .iter()
            .filter(|l| l.contains("find_containers"))
            .count(),
        1,
        "{}",
        calls.join("\n")
    );
    // the hook did not run again
    assert_eq!(ctx.sh("cat /tmp/created").1, "created\n");
}
