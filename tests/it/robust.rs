//! Robustness: the engine vanishing mid-way through `up` (through [`EngineProxy`], never by
//! stopping the shared engine) and recovery once it is back; unused devcell-built images found
//! by `doctor` and removed by `prune`, never one a container uses.

use crate::support::deadline::Bounded as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::context::TestContext;
use crate::support::devcell;
use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
use crate::support::proxy::{EngineProxy, Trigger};

/// A [`TestContext`] with `config` and a `README.md` of user content.
fn new_ws(config: &str) -> TestContext {
    with_readme(TestContext::new("robust").config(config))
}

/// [`new_ws`] behind the engine gate.
fn engine_ws(test: &str, config: &str) -> Option<TestContext> {
    TestContext::busybox(test).map(|ws| with_readme(ws.config(config)))
}

fn with_readme(ws: TestContext) -> TestContext {
    ws.write("README.md", "user content\n");
    ws
}

/// `devcell <command> --workspace-folder <ws> <args…>`, with `DOCKER_HOST` when given.
fn run(ws: &TestContext, command: &str, args: &[&str], docker_host: Option<&str>) -> Output {
    let mut cmd = ws.command();
    cmd.arg(command)
        .arg("--workspace-folder")
        .arg(ws.path())
        .args(args);
    if let Some(host) = docker_host {
        cmd.env("DOCKER_HOST", host);
    }
    cmd.output().expect("devcell runs")
}

/// A hash of every path, file content and mode under the workspace.
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
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path: PathBuf = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let rel = format!(
            "{} {:o}",
            path.strip_prefix(root).unwrap().display(),
            meta.permissions().mode()
        );
        if meta.is_dir() {
            out.insert(format!("{rel}/"), Vec::new());
            collect(root, &path, out);
        } else {
            out.insert(rel, std::fs::read(&path).unwrap());
        }
    }
}

/// The last line of stdout as JSON.
pub(crate) fn last_json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `up` failed cleanly because the engine went away: exit 1, the error result (no panic),
/// naming the unreachable engine at the proxy's address.
fn assert_engine_gone(out: &Output, proxy: &EngineProxy) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(proxy.fired(), "the proxy never stopped; stderr: {stderr}");
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let result = last_json(out);
    assert_eq!(result["outcome"], "error", "{result}");
    let message = result["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot reach the container engine")
            && message.contains(&proxy.docker_host()),
        "{result}"
    );
    assert!(
        result["description"]
            .as_str()
            .unwrap_or_default()
            .contains("DOCKER_HOST"),
        "the hint says how to reach an engine: {result}"
    );
}

/// `up` that must succeed against the real engine.
fn up_ok(ws: &TestContext) -> Value {
    let out = run(ws, "up", &[], None);
    assert!(
        out.status.success(),
        "up failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&out)
}

#[test]
fn engine_gone_while_a_hook_runs_then_up_recovers() {
    // The hook prints a line the proxy waits for (computed, so the line is not in the request),
    // then keeps running; at the next `up` it ends at once.
    let Some(ws) = engine_ws(
        "engine_gone_while_a_hook_runs_then_up_recovers",
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "postCreateCommand": "echo hook-$((40+2))-running; test -e /tmp/hook-ran && exit 0; touch /tmp/hook-ran; sleep 30"}"#,
    ) else {
        return;
    };
    let before = tree_hash(ws.path());
    let proxy = EngineProxy::start(Trigger::OnOutput("hook-42-running".into()));
    let out = run(&ws, "up", &[], Some(&proxy.docker_host()));
    assert_engine_gone(&out, &proxy);
    assert_eq!(tree_hash(ws.path()), before, "the workspace changed");
    let left = ws.containers();
    assert_eq!(left.len(), 1, "the container is left for inspection");

    // The engine is back: the same container is reused and the failed hook runs again.
    let result = up_ok(&ws);
    assert_eq!(result["containerId"], left[0].as_str(), "{result}");
    assert_eq!(result["devcell"]["container"], "running");
    let runs = result["devcell"]["lifecycle"]["runs"].as_array().unwrap();
    assert!(
        runs.iter()
            .any(|r| r["hook"] == "postCreateCommand" && r["exitCode"] == 0),
        "{result}"
    );
    assert_eq!(tree_hash(ws.path()), before);
}

#[test]
fn engine_gone_after_the_container_is_created_then_up_recovers() {
    let Some(ws) = engine_ws(
        "engine_gone_after_the_container_is_created_then_up_recovers",
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "postCreateCommand": "echo created-ok > /tmp/created"}"#,
    ) else {
        return;
    };
    let before = tree_hash(ws.path());
    // The workspace label as a JSON key appears only in the create request's body.
    let proxy = EngineProxy::start(Trigger::AfterResponseTo(
        "\"devcontainer.local_folder\":".into(),
    ));
    let out = run(&ws, "up", &[], Some(&proxy.docker_host()));
    assert_engine_gone(&out, &proxy);
    assert_eq!(tree_hash(ws.path()), before, "the workspace changed");
    let left = ws.containers();
    assert_eq!(left.len(), 1, "{left:?}");
    let state = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Status}}", &left[0]])
        .bounded_output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&state.stdout).trim(), "created");
    // The error result names the container it left, as the reference CLI's does (spec-note
    // 0472): `{"outcome":"error","message","description","containerId"}`.
    let text = String::from_utf8_lossy(&out.stdout);
    let error: serde_json::Value =
        serde_json::from_str(text.lines().last().unwrap_or_default()).expect("a JSON result");
    assert_eq!(error["outcome"], "error", "{error}");
    assert_eq!(error["containerId"], left[0].as_str(), "{error}");
    assert!(error["message"].is_string() && error["description"].is_string());

    // The engine is back: the created container is started, set up and its hooks run.
    let result = up_ok(&ws);
    assert_eq!(result["containerId"], left[0].as_str(), "{result}");
    let runs = result["devcell"]["lifecycle"]["runs"].as_array().unwrap();
    assert!(
        runs.iter()
            .any(|r| r["hook"] == "postCreateCommand" && r["exitCode"] == 0),
        "{result}"
    );
    // Its run-once marker was written: a third `up` does not run it again.
    let again = up_ok(&ws);
    let runs = again["devcell"]["lifecycle"]["runs"].as_array().unwrap();
    assert!(
        !runs.iter().any(|r| r["hook"] == "postCreateCommand"),
        "{again}"
    );
    assert_eq!(tree_hash(ws.path()), before);
}

/// A workspace whose config layers a local Feature (its install step unique to this run, so
/// its `devcell/features:<key>` image is this test's own).
fn feature_ws(tag: &str) -> TestContext {
    let ws = new_ws(r#"{"image": "IMAGE", "remoteUser": "nobody", "features": {"./feat": {}}}"#);
    let dir = ws.path().join(".devcontainer/feat");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("devcontainer-feature.json"),
        r#"{"id": "feat", "version": "1.0.0"}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("install.sh"),
        format!(
            "#!/bin/sh\nset -e\necho {} > /etc/devcell-robust-{tag}\n",
            crate::support::unique("robust")
        ),
    )
    .unwrap();
    ws
}

fn image_exists(reference: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", reference])
        .bounded_output()
        .is_ok_and(|o| o.status.success())
}

fn devcell_json(args: &[&str]) -> Value {
    let out = devcell().args(args).output().expect("devcell runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&out)
}

#[test]
fn doctor_reports_and_prune_removes_only_unused_devcell_images() {
    let test = "doctor_reports_and_prune_removes_only_unused_devcell_images";
    if !engine_ready(test, BUSYBOX_IMAGE) {
        return;
    }
    // Two Features images; the container of the second is removed, so only the first is used.
    let used_ws = feature_ws("used");
    let unused_ws = feature_ws("unused");
    let used_id = up_ok(&used_ws)["containerId"].as_str().unwrap().to_string();
    let gone_id = up_ok(&unused_ws)["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    // Podman reports the name fully qualified (`docker.io/devcell/features:…`).
    let image_of = |id: &str| {
        let out = Command::new("docker")
            .args(["inspect", "-f", "{{.Config.Image}}", id])
            .bounded_output()
            .unwrap();
        let image = String::from_utf8_lossy(&out.stdout).trim().to_string();
        image
            .strip_prefix("docker.io/")
            .map_or_else(|| image.clone(), str::to_string)
    };
    let used = image_of(&used_id);
    let unused = image_of(&gone_id);
    used_ws.remove_image(&used);
    unused_ws.remove_image(&unused);
    assert!(used.starts_with("devcell/features:"), "{used}");
    assert!(
        unused.starts_with("devcell/features:") && unused != used,
        "{unused}"
    );
    Command::new("docker")
        .args(["rm", "-f", "-v", &gone_id])
        .bounded_output()
        .unwrap();

    // doctor: the unused one with its size and the command that removes it; not the used one.
    let doctor = devcell_json(&["doctor", "--format", "json"]);
    let findings = doctor["result"]["findings"].as_array().unwrap();
    let about = |reference: &str| {
        findings
            .iter()
            .filter(|f| f["code"] == "unused_image")
            .find(|f| f["message"].as_str().unwrap().contains(reference))
            .cloned()
    };
    let finding = about(&unused).unwrap_or_else(|| panic!("no finding about {unused}: {doctor}"));
    assert_eq!(finding["severity"], "warning");
    assert!(
        finding["message"].as_str().unwrap().contains(" MB"),
        "{finding}"
    );
    assert_eq!(
        finding["fix"]["command"],
        serde_json::json!(["devcell", "prune", "--image", unused])
    );
    assert!(
        doctor["next_actions"]
            .as_array()
            .unwrap()
            .contains(&finding["fix"])
    );
    assert!(
        about(&used).is_none(),
        "the used image is reported: {doctor}"
    );

    // Only this test's images are named: other tests share the engine.
    let scope = ["--image", used.as_str(), "--image", unused.as_str()];
    let dry = devcell_json(&[&["prune", "--dry-run", "--format", "json"][..], &scope].concat());
    let r = &dry["result"];
    assert_eq!(r["dryRun"], true);
    assert_eq!(r["removed"].as_array().unwrap().len(), 1, "{dry}");
    assert_eq!(r["removed"][0]["reference"], unused.as_str());
    assert!(r["removed"][0]["size"].as_i64().unwrap() > 0);
    assert_eq!(r["kept"][0]["reference"], used.as_str());
    assert_eq!(r["kept"][0]["usedBy"], serde_json::json!([&used_id[..12]]));
    assert!(
        image_exists(&used) && image_exists(&unused),
        "a dry run removed something"
    );

    let done = devcell_json(&[&["prune", "--format", "json"][..], &scope].concat());
    let r = &done["result"];
    assert_eq!(r["dryRun"], false);
    assert_eq!(r["removed"][0]["reference"], unused.as_str(), "{done}");
    assert_eq!(r["removed"][0]["deleted"], true);
    assert!(r["reclaimedBytes"].as_i64().unwrap() > 0);
    assert_eq!(r["kept"][0]["reference"], used.as_str());
    assert!(!image_exists(&unused), "the unused image is still there");
    assert!(image_exists(&used), "the used image was removed");

    // The engine's own check stands behind devcell's: removing a used image is refused.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let refused = rt.block_on(async {
        use devcell::engine::Engine;
        let engine = devcell::engine::DockerEngine::connect().await.unwrap();
        engine.remove_image(&used).await
    });
    assert!(
        matches!(
            refused,
            Err(devcell::engine::EngineError::ImageInUse { .. })
        ),
        "{refused:?}"
    );
    assert!(image_exists(&used));
}

/// A pseudo-terminal of `rows` × `cols`: (master, slave). The test holds the master, the
/// child gets the slave.
fn open_pty(rows: u16, cols: u16) -> (std::os::fd::OwnedFd, std::fs::File) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .expect("open the pty slave");
    set_size(&master, rows, cols);
    (master, slave)
}

/// Sets the terminal's size; the kernel sends `SIGWINCH` to its foreground process group.
fn set_size(master: &std::os::fd::OwnedFd, rows: u16, cols: u16) {
    rustix::termios::tcsetwinsize(
        master,
        rustix::termios::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )
    .expect("set the pty size");
}

/// Run inside the TTY: wait until it has a size (older engines apply it right after the
/// start), print it, wait until it changes (bounded), print it again. (busybox's `stty size`
/// prints nothing, and an error, while the size is 0x0.)
const TTY_SIZE_SCRIPT: &str = r#"size() { stty -F /dev/tty size 2>/dev/null; }
i=0; while [ -z "$(size)" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
echo "first $(size)"
i=0; while [ "$(size)" = "33 101" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
echo "second $(size)""#;

/// Runs `devcell <args…>` (which runs [`TTY_SIZE_SCRIPT`] in the container) as the leader of a
/// new session whose controlling terminal is a 33×101 pty (`setsid -c`, as in a terminal
/// window), resizes the pty to 44×120 once the first size is printed (the kernel signals
/// `SIGWINCH`), and checks that the TTY inside followed both.
fn assert_tty_follows(args: &[&std::ffi::OsStr], envs: &[(&str, &Path)]) {
    let (master, slave) = open_pty(33, 101);
    let mut child = Command::new("setsid")
        .args(["-w", "-c"])
        .arg(env!("CARGO_BIN_EXE_devcell"))
        .args(args)
        .envs(envs.iter().map(|(k, v)| (*k, *v)))
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("setsid runs");
    drop(slave);
    let reader_fd = master.try_clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut file = std::fs::File::from(reader_fd);
        let mut all = String::new();
        let mut buf = [0u8; 4096];
        // Ends with EIO once the child has exited and closed the slave.
        while let Ok(n @ 1..) = std::io::Read::read(&mut file, &mut buf) {
            all.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(all.clone());
        }
        all
    });
    let first_line = |text: &str| {
        text.find("first ")
            .is_some_and(|i| text[i..].contains('\n'))
    };
    let seen = rx.iter().any(|text| first_line(&text));
    if seen {
        set_size(&master, 44, 120);
    }
    let status = child.wait().unwrap();
    drop(master);
    let text = reader.join().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(seen, "no first size line: {stderr}\noutput: {text}");
    assert!(status.success(), "devcell failed: {stderr}\noutput: {text}");
    assert!(text.contains("first 33 101"), "the initial size: {text}");
    assert!(
        text.contains("second 44 120"),
        "the size after SIGWINCH: {text}"
    );
}

#[test]
fn exec_tty_follows_the_terminal_size() {
    let test = "exec_tty_follows_the_terminal_size";
    let Some(ws) = engine_ws(test, r#"{"image": "IMAGE", "remoteUser": "nobody"}"#) else {
        return;
    };
    up_ok(&ws);
    let args: Vec<&std::ffi::OsStr> = vec![
        "exec".as_ref(),
        "--workspace-folder".as_ref(),
        ws.path().as_os_str(),
        "sh".as_ref(),
        "-c".as_ref(),
        TTY_SIZE_SCRIPT.as_ref(),
    ];
    assert_tty_follows(&args, &[]);
}

#[test]
fn handoff_tty_follows_the_terminal_size() {
    let test = "handoff_tty_follows_the_terminal_size";
    let Some(ws) = engine_ws(test, r#"{"image": "IMAGE", "remoteUser": "nobody"}"#) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join("config.toml");
    std::fs::write(
        &settings,
        format!(
            "[agents.tty]\ncommand = [\"sh\", \"-c\", {}]\n",
            serde_json::to_string(TTY_SIZE_SCRIPT).unwrap()
        ),
    )
    .unwrap();
    let state = home.path().join("state");
    let args: Vec<&std::ffi::OsStr> = vec![
        "handoff".as_ref(),
        "--workspace-folder".as_ref(),
        ws.path().as_os_str(),
        "--agent".as_ref(),
        "tty".as_ref(),
        "--config-file".as_ref(),
        settings.as_os_str(),
    ];
    assert_tty_follows(&args, &[("DEVCELL_STATE_DIR", &state)]);
}

#[test]
fn handoff_refuses_to_reuse_a_container_with_more_network_than_asked_for() {
    let test = "handoff_refuses_to_reuse_a_container_with_more_network_than_asked_for";
    // `up` makes a container on the engine's bridge; handoff's default network is `none`.
    let Some(ws) = engine_ws(test, r#"{"image": "IMAGE", "remoteUser": "nobody"}"#) else {
        return;
    };
    let id = up_ok(&ws)["containerId"].as_str().unwrap().to_string();
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join("config.toml");
    std::fs::write(&settings, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
    let out = devcell()
        .env("DEVCELL_STATE_DIR", home.path().join("state"))
        .args(["handoff", "--workspace-folder"])
        .arg(ws.path())
        .args(["--agent", "a", "--format", "json", "--config-file"])
        .arg(&settings)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let v = last_json(&out);
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["error"]["code"], "permission_required", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("refusing to reuse container"), "{v}");
    // Docker names the engine's default network `default`, Podman `bridge`.
    assert!(
        message.contains("network `default` (asked for `none`)")
            || message.contains("network `bridge` (asked for `none`)"),
        "{v}"
    );
    assert!(v.to_string().contains("devcell delete"), "the hint: {v}");
    assert_eq!(
        ws.containers(),
        std::slice::from_ref(&id),
        "nothing changed"
    );
}
