//! `appPort`, `forwardPorts` and `portsAttributes` as the reference CLI handles them
//! (spec-note 0431, docs/drop-in.md#ports): `appPort` is published when the container is
//! created, `forwardPorts` and `portsAttributes` are only merged and reported (neither tool
//! publishes or forwards them), and `read-configuration` reports all of them alike. devcell
//! publishes on `127.0.0.1` where the reference, for a string without an address, publishes on
//! every interface.

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
