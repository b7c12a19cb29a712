//! `appPort`, `forwardPorts` and `portsAttributes` as the reference CLI handles them
//! (spec-note 0431, docs/drop-in.md#ports): `appPort` is published when the container is
//! created, `forwardPorts` and `portsAttributes` are only merged and reported by `up` (neither
//! tool publishes them), and `read-configuration` reports all of them alike. devcell
//! publishes on `127.0.0.1` where the reference, for a string without an address, publishes on
//! every interface. `devcell ports` forwards them through the engine's exec API
//! (spec-note 0651, docs/ports.md).

use crate::support::deadline::Bounded as _;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::context::{LabelGuard, TestContext};
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::refcli::reference_cli;

/// A port nothing on this machine listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn last_json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn config(app: u16, mapped: u16, forwarded: u16) -> Value {
    json!({
        "image": BUSYBOX_IMAGE,
        "appPort": [app, format!("{mapped}:80")],
        "forwardPorts": [forwarded, format!("localhost:{forwarded}"), "db:5432"],
        "portsAttributes": {
            forwarded.to_string(): {"label": "web", "onAutoForward": "notify", "requireLocalPort": true},
            "40000-55000": {"onAutoForward": "ignore"}
        },
        "otherPortsAttributes": {"onAutoForward": "silent"}
    })
}

/// `HostConfig.PortBindings` of `id`, as `container port → [host ip:host port]`, sorted.
fn bindings(id: &str) -> Vec<(String, Vec<String>)> {
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{json .HostConfig.PortBindings}}", id])
        .bounded_output()
        .expect("docker runs");
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let mut all: Vec<(String, Vec<String>)> = value
        .as_object()
        .into_iter()
        .flatten()
        .map(|(port, list)| {
            let mut hosts: Vec<String> = list
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| {
                    format!(
                        "{}:{}",
                        b["HostIp"].as_str().unwrap_or_default(),
                        b["HostPort"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            hosts.sort();
            (port.clone(), hosts)
        })
        .collect();
    all.sort();
    all
}

fn ports_of(result: &Value) -> Value {
    let pick = |c: &Value| {
        json!({
            "appPort": c["appPort"],
            "forwardPorts": c["forwardPorts"],
            "portsAttributes": c["portsAttributes"],
            "otherPortsAttributes": c["otherPortsAttributes"],
        })
    };
    json!([
        pick(&result["configuration"]),
        pick(&result["mergedConfiguration"])
    ])
}

fn write_config(dir: &Path, config: &Value) {
    std::fs::create_dir_all(dir.join(".devcontainer")).unwrap();
    std::fs::write(
        dir.join(".devcontainer/devcontainer.json"),
        serde_json::to_string_pretty(config).unwrap(),
    )
    .unwrap();
}

#[test]
fn ports_are_published_as_the_reference_publishes_them_but_only_on_loopback() {
    let Some(ctx) = TestContext::busybox("ports_are_published_as_the_reference") else {
        return;
    };
    let Some(refcli) = reference_cli("ports_are_published_as_the_reference") else {
        return;
    };
    let (app, mapped, forwarded) = (free_port(), free_port(), free_port());
    let config = config(app, mapped, forwarded);
    let ctx = ctx.config_json(&config);

    // read-configuration: the same properties, the same merge (forwardPorts deduplicated).
    let theirs_ws = tempfile::tempdir().unwrap();
    write_config(theirs_ws.path(), &config);
    let guard = LabelGuard::workspace(theirs_ws.path());
    let ws = theirs_ws.path().to_str().unwrap();
    let theirs = refcli
        .command()
        .args([
            "read-configuration",
            "--workspace-folder",
            ws,
            "--include-merged-configuration",
        ])
        .long_output()
        .unwrap();
    let ours = ctx.run("read-configuration", &["--include-merged-configuration"]);
    ours.ok();
    assert_eq!(ports_of(&ours.json()), ports_of(&last_json(&theirs)));
    assert_eq!(
        ports_of(&ours.json())[1]["forwardPorts"],
        json!([forwarded, "db:5432"])
    );

    // up: appPort is published; forwardPorts is not (the editor forwards it, not the CLI).
    let out = refcli
        .command()
        .args(["up", "--workspace-folder", ws])
        .long_output()
        .unwrap();
    let theirs = last_json(&out);
    assert_eq!(theirs["outcome"], "success", "{theirs}");
    refcli.assert_stayed_local();
    let theirs = bindings(theirs["containerId"].as_str().unwrap());
    // The same host ports: the reference's container goes before devcell's is made.
    drop(guard);
    let ours = ctx.up(&[]);
    let ours = bindings(ours["containerId"].as_str().unwrap());
    let app_binding = (format!("{app}/tcp"), vec![format!("127.0.0.1:{app}")]);
    // The reference publishes a string without an address on every interface; devcell on
    // loopback (an address other than loopback is a permission request).
    assert_eq!(
        theirs,
        vec![
            app_binding.clone(),
            ("80/tcp".to_string(), vec![format!(":{mapped}")]),
        ]
    );
    assert_eq!(
        ours,
        vec![
            app_binding,
            ("80/tcp".to_string(), vec![format!("127.0.0.1:{mapped}")]),
        ]
    );
}

/// Kills (SIGTERM) and reaps a spawned `devcell ports` when a test ends, also on a panic.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id())
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /` on `127.0.0.1:port`: the whole answer (HTTP/1.0, so the server closes).
fn http_get(port: u16) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// `devcell ports` (issue 28 item 6, spec-note 0651): an HTTP server that listens on the
/// container's own `127.0.0.1:8080`, in a hardened container with network `none` and nothing
/// published, answers on the host port `ports` prints (on `127.0.0.1`), through an exec per
/// connection; SIGTERM ends it cleanly. A `requireLocalPort` port that is busy on the host is
/// an error naming the port and the process that holds it.
#[test]
fn ports_forwards_into_a_network_none_container_and_refuses_a_busy_required_port() {
    let Some(ctx) = TestContext::busybox("ports_forwards_into_a_network_none") else {
        return;
    };
    let ctx = ctx.config_json(&json!({
        "image": BUSYBOX_IMAGE,
        "forwardPorts": [8080, 6379],
        "portsAttributes": {
            "8080": {"label": "web", "onAutoForward": "notify"},
            "9090": {"label": "strict", "requireLocalPort": true}
        },
        "postStartCommand": "mkdir -p /tmp/www && echo hello-from-inside > /tmp/www/index.html && httpd -p 127.0.0.1:8080 -h /tmp/www"
    }));
    let up = ctx.up(&["--network", "none"]);
    let id = up["containerId"].as_str().unwrap().to_string();
    let inspect = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.HostConfig.NetworkMode}} {{json .HostConfig.PortBindings}}",
            &id,
        ])
        .bounded_output()
        .unwrap();
    let inspect = String::from_utf8_lossy(&inspect.stdout).trim().to_string();
    assert!(inspect.starts_with("none "), "{inspect}");
    assert!(!inspect.contains("8080"), "nothing is published: {inspect}");

    let mut child = ctx.command();
    child
        .args(["ports", "--workspace-folder"])
        .arg(ctx.path())
        .args(["--output-format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut running = Running(child.spawn().expect("devcell runs"));
    let stdout = running.0.stdout.take().unwrap();
    let stderr = running.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let err_reader = std::thread::spawn(move || {
        use std::io::Read as _;
        let mut text = String::new();
        let _ = std::io::BufReader::new(stderr).read_to_string(&mut text);
        text
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(300))
        .expect("`ports` prints its forwards");
    let list: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let forward = &list["forwards"][0];
    assert_eq!(forward["host"], "127.0.0.1", "{list}");
    assert_eq!(forward["containerPort"], 8080, "{list}");
    assert_eq!(forward["label"], "web", "{list}");
    assert_eq!(forward["fromRepository"], true, "{list}");
    let port = u16::try_from(forward["hostPort"].as_u64().unwrap()).unwrap();
    // attack 24, O8: a host service's port the repository names is not taken on the host
    let redis = &list["forwards"][1];
    assert_eq!(redis["containerPort"], 6379, "{list}");
    assert_ne!(redis["hostPort"], 6379, "{list}");
    assert!(
        redis["hostPortReason"]
            .as_str()
            .unwrap_or_default()
            .contains("Redis"),
        "{list}"
    );
    // Twice: each connection is its own exec.
    for _ in 0..2 {
        let answer = http_get(port);
        assert!(answer.contains("hello-from-inside"), "{answer}");
    }
    drop(running);
    let err = err_reader.join().unwrap();
    assert!(
        err.contains(&format!(
            "[devcell] forwarding 127.0.0.1:{port} -> container port 8080 (from the repository's `forwardPorts`, web, onAutoForward: notify)"
        )),
        "{err}"
    );
    assert!(err.contains("[devcell] stopped forwarding"), "{err}");

    // requireLocalPort: a busy host port is an error that names it and who holds it.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port();
    let out = ctx.output("ports", &["--port", &format!("{busy_port}:9090")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "host port 127.0.0.1:{busy_port} (container port 9090) is in use"
        )) && err.contains("requireLocalPort")
            && err.contains(&format!("(pid {})", std::process::id())),
        "{err}"
    );
    drop(busy);
}
