//! `--network allowlist` wired into `up`, `handoff`, `down`, `status` and `audit` against the
//! real engine (issue 13; spec-notes 0502-0505). Every destination is a server this test
//! starts on the host's 127.0.0.1, reached through an entry pinned to it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::egress::http_server;
use crate::support::context::TestContext;
use crate::support::context::docker_lines;

/// Whether `pid` is a live devcell egress proxy.
fn proxy_alive(pid: u64) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"__egress-proxy"))
}

fn decisions(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the container sees: its routes, and what `wget` reaches through the proxy variables.
const PROBE: &str = "echo routes=$(tail -n +2 /proc/net/route | wc -l)\n\
     echo ifaces=$(ls /sys/class/net)\n\
     echo proxy=$HTTP_PROXY\n\
     echo allowed=$(wget -q -O - http://web.test:PORT/hello)\n\
     wget -q -O - http://evil.test:PORT/ >/dev/null 2>&1 && echo refused=reached || echo refused=failed\n\
     no_proxy= NO_PROXY= wget -q -O - http://127.0.0.1:PORT/ >/dev/null 2>&1 && echo literal=reached || echo literal=failed\n";

fn probe(ctx: &TestContext, port: u16) -> String {
    let (code, out, err) = ctx.sh(&PROBE.replace("PORT", &port.to_string()));
    assert_eq!(code, 0, "{out}{err}");
    out
}

/// Runs `devcell down --remove` on drop (also when the test fails): the container's proxy is
/// a host process the engine cleanup would not stop.
struct DownOnDrop<'a>(&'a TestContext);

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = tokio::task::block_in_place(|| self.0.run("down", &["--remove"]));
    }
}

fn up_egress(result: &Value) -> (u64, bool, PathBuf) {
    let e = &result["devcell"]["egress"];
    assert_eq!(e["network"], "allowlist", "{result}");
    (
        e["proxyPid"].as_u64().unwrap(),
        e["proxyStarted"].as_bool().unwrap(),
        PathBuf::from(e["record"].as_str().unwrap()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_with_an_allowlist_reaches_only_the_allowed_server_and_down_stops_its_proxy() {
    let test = "up_with_an_allowlist_reaches_only_the_allowed_server";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let ctx = ctx
        .isolated()
        .config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let (web, hits) = http_server("127.0.0.1:0").await;
    let port = web.port();
    let entry = format!("web.test:{port}=127.0.0.1");
    let up = |extra: &[&str]| {
        let mut args = vec!["--network", "allowlist", "--egress-allow", entry.as_str()];
        args.extend(extra);
        tokio::task::block_in_place(|| ctx.up(&args))
    };
    let _down = DownOnDrop(&ctx);
    let first = up(&[]);
    let (pid, started, record) = up_egress(&first);
    assert!(started && proxy_alive(pid));
    assert_eq!(first["devcell"]["egress"]["entries"][0], entry);
    let id = first["containerId"].as_str().unwrap().to_string();
    assert_eq!(
        docker_lines(&["inspect", "-f", "{{.HostConfig.NetworkMode}}", &id]),
        ["none"]
    );

    let out = tokio::task::block_in_place(|| probe(&ctx, port));
    for fact in [
        "routes=0\n",
        "ifaces=lo\n",
        "proxy=http://127.0.0.1:3128\n",
        "allowed=hello through the proxy\n",
        "refused=failed\n",
        "literal=failed\n",
    ] {
        assert!(
            out.contains(fact),
            "missing `{fact}` in:\n{out}\n{:?}\n{:?}\n{:?}",
            std::fs::read_to_string(&record),
            std::fs::read_to_string(record.with_file_name("proxy.log")),
            ctx.sh("ps; wget -O - http://web.test:1/ 2>&1")
        );
    }
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    let seen = decisions(&record);
    let outcome = |dest: &str| {
        seen.iter()
            .filter(|d| d["destination"] == dest)
            .map(|d| {
                (
                    d["allowed"].as_bool().unwrap(),
                    d["reason"].as_str().unwrap().to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(outcome("web.test"), [(true, "allowed".to_string())]);
    assert_eq!(outcome("evil.test"), [(false, "not-listed".to_string())]);
    assert_eq!(outcome("127.0.0.1"), [(false, "not-listed".to_string())]);

    // status and audit show the evidence
    let status = tokio::task::block_in_place(|| {
        ctx.devcell(&[
            "status",
            "--workspace-folder",
            ctx.path().to_str().unwrap(),
            "--format",
            "json",
        ])
    });
    let s = status.json();
    let egress = &s["result"]["egress"];
    assert_eq!(egress["allowed"][0]["destination"], "web.test", "{s}");
    assert_eq!(egress["allowed"][0]["count"], 1);
    let refused: Vec<&str> = egress["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["destination"].as_str().unwrap())
        .collect();
    assert_eq!(refused, ["evil.test", "127.0.0.1"]);
    let audit = tokio::task::block_in_place(|| {
        ctx.devcell(&[
            "audit",
            "--workspace-folder",
            ctx.path().to_str().unwrap(),
            "--format",
            "json",
        ])
    })
    .json();
    let network = audit["result"]["controls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["control"] == "networkPolicy")
        .unwrap()
        .clone();
    assert_eq!(network["score"], 2, "{network}");
    let text = network["evidence"].to_string();
    assert!(
        text.contains("network allowlist") && text.contains(&entry),
        "{text}"
    );
    assert!(
        text.contains("exfiltration to an allowed destination"),
        "{text}"
    );

    // a second `up` keeps the running proxy; one that finds it gone starts it again
    let (again, started, _) = up_egress(&up(&[]));
    assert_eq!((again, started), (pid, false));
    assert!(
        std::process::Command::new("kill")
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success()
    );
    for _ in 0..100 {
        if !proxy_alive(pid) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!proxy_alive(pid));
    let (restarted, started, _) = up_egress(&up(&[]));
    assert!(started && restarted != pid && proxy_alive(restarted));
    let out = tokio::task::block_in_place(|| probe(&ctx, port));
    assert!(out.contains("allowed=hello through the proxy\n"), "{out}");

    // `down` stops it; `up` of the stopped container brings proxy and forwarder back
    tokio::task::block_in_place(|| ctx.run("down", &[]).ok().stdout.clone());
    assert!(!proxy_alive(restarted), "down stops the proxy");
    let after = up(&[]);
    assert_eq!(after["devcell"]["container"], "started");
    let (back, started, _) = up_egress(&after);
    assert!(started && proxy_alive(back));
    let out = tokio::task::block_in_place(|| probe(&ctx, port));
    assert!(out.contains("allowed=hello through the proxy\n"), "{out}");
    tokio::task::block_in_place(|| ctx.run("down", &["--remove"]).ok().stdout.clone());
    assert!(!proxy_alive(back), "down --remove stops the proxy");
    assert!(ctx.containers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repositorys_egress_request_is_refused_until_granted() {
    let test = "the_repositorys_egress_request_is_refused_until_granted";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let (web, _) = http_server("127.0.0.1:0").await;
    let port = web.port();
    let wanted = format!("repo.test:{port}=127.0.0.1");
    let ctx = ctx.isolated().config(&format!(
        r#"{{"image": "IMAGE", "remoteUser": "nobody", "customizations": {{"devcell": {{"egress": ["{wanted}"]}}}}}}"#
    ));
    let refused = tokio::task::block_in_place(|| ctx.run("up", &["--network", "allowlist"]));
    let message = refused.failed().to_string();
    assert!(
        message.contains(&format!("egress to `{wanted}`"))
            && message.contains(&format!("--allow egress:{wanted}")),
        "{message}"
    );
    assert!(ctx.containers().is_empty(), "nothing was created");
    assert!(
        !ctx.state().join("egress").exists()
            || std::fs::read_dir(ctx.state().join("egress"))
                .unwrap()
                .flatten()
                .all(|e| !e.path().join("proxy.json").exists()),
        "no proxy was started"
    );
    // without `allowlist` the request changes nothing and is not asked
    let grant = format!("egress:{wanted}");
    let _down = DownOnDrop(&ctx);
    let up = tokio::task::block_in_place(|| {
        ctx.up(&["--network", "allowlist", "--allow", grant.as_str()])
    });
    assert_eq!(up["devcell"]["egress"]["entries"][0], wanted);
    let (code, out, err) =
        tokio::task::block_in_place(|| ctx.sh(&format!("wget -q -O - http://repo.test:{port}/")));
    assert_eq!(
        (code, out.as_str()),
        (0, "hello through the proxy"),
        "{err}"
    );
    // the container removed behind devcell's back: `doctor` names its orphaned proxy
    let pid = up["devcell"]["egress"]["proxyPid"].as_u64().unwrap();
    let id = up["containerId"].as_str().unwrap().to_string();
    let rm = std::process::Command::new("docker")
        .args(["rm", "-f", &id])
        .output()
        .unwrap();
    assert!(rm.status.success());
    let v = tokio::task::block_in_place(|| ctx.devcell(&["doctor", "--format", "json"])).json();
    let orphan = v["result"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "orphaned_egress_proxy")
        .unwrap_or_else(|| panic!("no orphaned proxy in {v}"))
        .clone();
    let message = orphan["message"].as_str().unwrap();
    assert!(message.contains(&pid.to_string()), "{orphan}");
    assert!(proxy_alive(pid));
    let kill = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(kill.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_agent_reaches_the_allowed_server_and_the_session_records_it() {
    let test = "a_handoff_agent_reaches_the_allowed_server";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let (web, hits) = http_server("127.0.0.1:0").await;
    let port = web.port();
    let ctx = ctx
        .isolated()
        .delete_on_drop()
        .config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let config = ctx.tmp().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fetch]\ncommand = [\"sh\", \"-c\", \"wget -q -O - http://web.test:{port}/ && echo && wget -q -O - http://evil.test:{port}/ || echo evil-refused\"]\nnetwork = \"allowlist\"\negress = [\"web.test:{port}=127.0.0.1\"]\n"
        ),
    )
    .unwrap();
    let ws = ctx.path().to_str().unwrap().to_string();
    let handoff = |extra: &[&str]| {
        let mut args = vec![
            "handoff",
            "--workspace-folder",
            ws.as_str(),
            "--agent",
            "fetch",
            "--config-file",
            config.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend(extra);
        tokio::task::block_in_place(|| ctx.devcell(&args))
    };
    let plan = handoff(&["--plan"]).json();
    assert_eq!(plan["result"]["network"], "allowlist", "{plan}");
    assert_eq!(
        plan["result"]["egress"],
        serde_json::json!([format!("web.test:{port}=127.0.0.1")])
    );
    // The text plan names the destinations too, not only `network allowlist`.
    let text_plan = tokio::task::block_in_place(|| {
        ctx.devcell(&[
            "handoff",
            "--workspace-folder",
            ws.as_str(),
            "--agent",
            "fetch",
            "--config-file",
            config.to_str().unwrap(),
            "--plan",
        ])
    });
    assert!(
        text_plan
            .stdout
            .contains(&format!("  egress     web.test:{port}=127.0.0.1\n")),
        "{}",
        text_plan.stdout
    );
    // `--egress-allow` under another network is not silently dropped
    let none = handoff(&["--plan", "--network", "none", "--egress-allow", "x.test"]).json();
    assert_eq!(none["result"]["network"], "none", "{none}");
    assert!(
        none["warnings"]
            .to_string()
            .contains("`--egress-allow` has no effect under network `none`"),
        "{none}"
    );
    let run = handoff(&[]);
    assert!(run.success(), "{}", run.stderr);
    assert!(
        run.stderr.contains("hello through the proxy") && run.stderr.contains("evil-refused"),
        "{}",
        run.stderr
    );
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    let v = run.json();
    assert_eq!(v["result"]["network"], "allowlist");
    let egress = &v["result"]["session"]["egress"];
    assert_eq!(egress["allowed"][0]["destination"], "web.test", "{v}");
    assert_eq!(egress["refused"][0]["destination"], "evil.test", "{v}");
    assert_eq!(egress["refused"][0]["reasons"][0], "not-listed");
    let status = tokio::task::block_in_place(|| {
        ctx.devcell(&[
            "status",
            "--workspace-folder",
            ws.as_str(),
            "--format",
            "json",
        ])
    })
    .json();
    let sessions = status["result"]["sessions"].as_array().unwrap();
    assert_eq!(
        sessions[0]["egress"]["allowed"][0]["destination"], "web.test",
        "{status}"
    );
    assert_eq!(status["result"]["egress"]["allowed"][0]["count"], 1);
    let pid = status["result"]["egress"]["proxyRunning"]
        .as_bool()
        .unwrap();
    assert!(pid, "the proxy lives with the container after the session");
    let delete =
        tokio::task::block_in_place(|| ctx.devcell(&["delete", "--workspace-folder", ws.as_str()]));
    assert!(delete.success(), "{}", delete.stderr);
    let left: Vec<u64> = std::fs::read_dir(ctx.state().join("egress"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("proxy.pid")).ok())
        .filter_map(|p| p.trim().parse().ok())
        .filter(|p| proxy_alive(*p))
        .collect();
    assert!(left.is_empty(), "delete stops the proxy: {left:?}");
}

/// A second `up --network allowlist` reuses its container when devcell's state folder is
/// outside the workspace, as it is by default: the forwarder and socket binds are the
/// profile's own channel, not host folders for the reuse re-check to refuse (spec-note 0505;
/// found timing warm handoffs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_allowlist_up_reuses_its_container_with_the_state_folder_elsewhere() {
    let test = "a_second_allowlist_up_reuses_its_container";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let ctx = ctx
        .isolated()
        .at("ws")
        .config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    assert!(!ctx.state().starts_with(ctx.path()));
    let args = [
        "--network",
        "allowlist",
        "--egress-allow",
        "web.test:80=127.0.0.1",
    ];
    let _down = DownOnDrop(&ctx);
    let first = tokio::task::block_in_place(|| ctx.up(&args));
    assert_eq!(first["devcell"]["container"], "created", "{first}");
    let second = tokio::task::block_in_place(|| ctx.up(&args));
    assert_eq!(second["devcell"]["container"], "running", "{second}");
    assert_eq!(second["containerId"], first["containerId"]);
    // the reused container has the channel (read-only binds from the state folder)
    let mounts = docker_lines(&[
        "inspect",
        "-f",
        "{{range .Mounts}}{{.Destination}} {{.RW}}{{println}}{{end}}",
        first["containerId"].as_str().unwrap(),
    ]);
    assert!(
        mounts.iter().any(|m| m == "/.devcell-egress/socket false"),
        "{mounts:?}"
    );
}
