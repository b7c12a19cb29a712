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
    // The user keeps the repository's numbers with a grant: without it `hardened` publishes
    // each from a free host port (spec-note 0431, `hostile::…::a_repository_loopback_port_…`).
    let ours = ctx.up(&["--allow", "publish:127.0.0.1:*"]);
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
    // attack 25, P3: no repository port keeps its number on the host
    assert_ne!(port, 8080, "{list}");
    assert!(
        forward["hostPortReason"]
            .as_str()
            .unwrap_or_default()
            .contains("`--port 8080`"),
        "{list}"
    );
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

/// `GET path` on `127.0.0.1:port` (HTTP/1.0); `None` when nothing accepts the connection.
fn try_http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    Some(String::from_utf8_lossy(&answer).into_owned())
}

/// SIGTERMs, on drop (also on a panic), a detached forwarder the test started, while its
/// command line still says it is one.
struct Detached(u32);

impl Drop for Detached {
    fn drop(&mut self) {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.0)).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains("--detached-record")
            && let Ok(pid) = i32::try_from(self.0)
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

/// `ports --detach --output-format json`: must return once it listens; (its JSON, a guard).
fn detach(ctx: &TestContext, args: &[&str]) -> (Value, Detached) {
    let mut all = vec!["--detach", "--output-format", "json"];
    all.extend_from_slice(args);
    let out = ctx.output("ports", &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record = last_json(&out);
    let pid = u32::try_from(record["pid"].as_u64().expect("a pid")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "[devcell] forwarding in the background (pid {pid})"
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (record, Detached(pid))
}

fn host_port(record: &Value) -> u16 {
    u16::try_from(
        record["forwards"][0]["hostPort"]
            .as_u64()
            .expect("a host port"),
    )
    .unwrap()
}

/// `ports --detach` to a Compose service (issue 28 item 6, spec-notes 0651, 0652): a
/// `forwardPorts` entry `"web:8080"` reaches the `web` service's own container (its
/// `127.0.0.1:8080`, so only a relay inside that container reaches it), from a forwarder that
/// runs in the background; `ports --stop` ends it (the host port no longer accepts), and a
/// second one is ended by `down`; no record is left.
#[test]
fn ports_detach_forwards_to_a_compose_service_and_stops_with_stop_and_down() {
    let Some(ctx) = TestContext::busybox("ports_detach_compose") else {
        return;
    };
    let ctx = ctx.isolated();
    let base = ctx
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let project = devcell::engine::compose::sanitize_project_name(&format!("{base}_devcontainer"));
    ctx.clean_label(&format!("com.docker.compose.project={project}"));
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &r#"services:
  app:
    image: IMAGE
    command: ["sleep", "100000"]
    volumes:
      - ..:/workspace
  web:
    image: IMAGE
    command: ["sh", "-c", "mkdir -p /tmp/www && echo hello-from-web > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"]
"#
        .replace("IMAGE", BUSYBOX_IMAGE),
    );
    let ctx = ctx.config_json(&json!({
        "dockerComposeFile": "docker-compose.yml",
        "service": "app",
        "runServices": ["web"],
        "workspaceFolder": "/workspace",
        "forwardPorts": ["web:8080"],
        "portsAttributes": {"web:8080": {"label": "web service"}}
    }));
    ctx.up(&[]);

    let (record, guard) = detach(&ctx, &[]);
    let forward = &record["forwards"][0];
    assert_eq!(forward["service"], "web", "{record}");
    assert_eq!(forward["label"], "web service", "{record}");
    let port = host_port(&record);
    let answer = try_http_get(port, "/").expect("the forward accepts");
    assert!(answer.contains("hello-from-web"), "{answer}");
    // a second connection: the forwarder still runs after `--detach` returned
    let answer = try_http_get(port, "/").expect("the forward accepts");
    assert!(answer.contains("hello-from-web"), "{answer}");

    let stop = ctx.output("ports", &["--stop", "--output-format", "json"]);
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert_eq!(last_json(&stop)["stopped"], json!([guard.0]));
    assert!(
        try_http_get(port, "/").is_none(),
        "stopped: port {port} still accepts"
    );

    let (record, _guard) = detach(&ctx, &[]);
    let port = host_port(&record);
    assert!(try_http_get(port, "/").is_some_and(|a| a.contains("hello-from-web")));
    ctx.run("down", &[]).ok();
    assert!(
        try_http_get(port, "/").is_none(),
        "down: port {port} still accepts"
    );
    let left: Vec<_> = std::fs::read_dir(ctx.state().join("ports"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "records left: {left:?}");
}

/// The bash relay (`bash` with `/dev/tcp`, and `cat`; spec-note 0651) against the engine: the
/// features-test image (glibc, bash, cat, awk) has none of socat, nc, busybox or python3, so the probe
/// can choose nothing else. The server is a busybox `httpd` in a second container sharing the
/// dev container's network namespace (network `none`), on its `127.0.0.1:8080`.
#[test]
fn ports_relays_through_bash_when_the_image_has_only_bash() {
    let Some(ctx) = TestContext::busybox("ports_bash_relay") else {
        return;
    };
    let image = crate::features_test::test_image();
    let ctx = ctx.isolated().config_json(&json!({"image": image}));
    let up = ctx.up(&["--network", "none"]);
    let id = up["containerId"].as_str().unwrap().to_string();
    let server = format!("devcell-ports-bash-{}", &id[..12]);
    ctx.cleanup().container(&server);
    let started = Command::new("docker")
        .args(["run", "-d", "--name", &server, "--network"])
        .arg(format!("container:{id}"))
        .args([
            BUSYBOX_IMAGE,
            "sh",
            "-c",
            "mkdir -p /tmp/w && echo hello-through-bash > /tmp/w/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/w",
        ])
        .bounded_output()
        .unwrap();
    assert!(started.status.success(), "{started:?}");
    let (record, _guard) = detach(&ctx, &["--port", "0:8080"]);
    let port = host_port(&record);
    let mut answer = String::new();
    // the server container may still be starting: a refused relay ends only that connection
    for _ in 0..50 {
        answer = try_http_get(port, "/").unwrap_or_default();
        if answer.contains("hello-through-bash") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(answer.contains("hello-through-bash"), "{answer}");
    let stop = ctx.output("ports", &["--stop"]);
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
}

/// Issue 28 (spec-note 0652): a detached forwarder whose container is stopped outside `down`
/// (`docker stop`) notices and exits, leaving no record; polled within a bound, nothing
/// asserted about how fast.
#[test]
fn a_detached_forwarder_ends_when_its_container_is_stopped_outside_down() {
    let Some(ctx) = TestContext::busybox("ports_detach_container_stopped") else {
        return;
    };
    let ctx = ctx.isolated().config_json(&json!({"image": BUSYBOX_IMAGE}));
    let up = ctx.up(&["--network", "none"]);
    let id = up["containerId"].as_str().unwrap().to_string();
    let (record, guard) = detach(&ctx, &["--port", "0:8080"]);
    let port = host_port(&record);
    let pid = guard.0;
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    let stopped = Command::new("docker")
        .args(["stop", "-t", "1", &id])
        .bounded_output()
        .unwrap();
    assert!(stopped.status.success(), "{stopped:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while is_forwarder(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "forwarder {pid} still runs after its container stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        try_http_get(port, "/").is_none(),
        "port {port} still accepts"
    );
    let left: Vec<_> = std::fs::read_dir(ctx.state().join("ports"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "records left: {left:?}");
}

/// Whether `pid` is still a detached forwarder (a reused pid is not; a zombie child of no
/// one here is reaped by init).
fn is_forwarder(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--detached-record"))
}
