//! `--network allowlist` wired into `up`, `handoff`, `down`, `status` and `audit` against the
//! real engine (issue 13; spec-notes 0502-0505). Every destination is a server this test
//! starts on the host's 127.0.0.1, reached through an entry pinned to it.

use crate::support::deadline::Bounded as _;
use std::collections::BTreeMap;
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
        .bounded_output()
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

/// What the test upstream saw and did: each request's URI and headers, whether the stream's
/// second event waited for the agent's acknowledgement, and the container's environments read
/// while the agent ran.
#[derive(Default)]
struct UpstreamLog {
    requests: Vec<(String, hyper::HeaderMap)>,
    acked_before_end: Option<bool>,
    environs: String,
}

/// A TLS server on 127.0.0.1 for `api.test` (certificate from an rcgen test CA written to
/// `dir/ca.pem`) answering under `/v1`: `hello` (a body), `events` (server-sent events: the
/// first event at once, the second only once `ack` was requested, so a proxy that buffers the
/// stream never lets the agent see the first one in time: the second then says `buffered`),
/// `ack` (first reads every process environment in the workspace's container, as root and as
/// `nobody`, with `docker exec`, while the agent still runs).
async fn model_upstream(
    dir: &Path,
    workspace: &Path,
) -> (u16, PathBuf, std::sync::Arc<std::sync::Mutex<UpstreamLog>>) {
    use bytes::Bytes;
    use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
    use hyper::body::{Frame, Incoming};
    use hyper::{Request, Response};
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["api.test".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let log: Arc<Mutex<UpstreamLog>> = Arc::default();
    let ack = Arc::new(tokio::sync::Notify::new());
    let label = format!("label=devcontainer.local_folder={}", workspace.display());
    let state = (Arc::clone(&log), ack, label);
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let (acceptor, state) = (acceptor.clone(), state.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (log, ack, label) = state.clone();
                    async move {
                        log.lock()
                            .unwrap()
                            .requests
                            .push((req.uri().to_string(), req.headers().clone()));
                        let body: BoxBody<Bytes, Infallible> = match req.uri().path() {
                            "/v1/events" => {
                                let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
                                tokio::spawn(async move {
                                    let _ = tx.send(Bytes::from_static(b"data: one\n\n")).await;
                                    // a deadlock guard, not a measurement: with a buffering
                                    // proxy the acknowledgement never comes
                                    let acked = tokio::time::timeout(
                                        std::time::Duration::from_secs(60),
                                        ack.notified(),
                                    )
                                    .await
                                    .is_ok();
                                    log.lock().unwrap().acked_before_end = Some(acked);
                                    let last: &'static [u8] = if acked {
                                        b"data: two\n\n"
                                    } else {
                                        b"data: buffered\n\n"
                                    };
                                    let _ = tx.send(Bytes::from_static(last)).await;
                                });
                                let frames = futures_util::stream::unfold(rx, |mut rx| async {
                                    let b = rx.recv().await?;
                                    Some((Ok::<_, Infallible>(Frame::data(b)), rx))
                                });
                                StreamBody::new(frames).boxed()
                            }
                            "/v1/ack" => {
                                let environs =
                                    tokio::task::spawn_blocking(move || container_environs(&label))
                                        .await
                                        .unwrap();
                                log.lock().unwrap().environs = environs;
                                ack.notify_one();
                                Full::new(Bytes::from_static(b"ok")).boxed()
                            }
                            _ => Full::new(Bytes::from_static(b"hello from the model")).boxed(),
                        };
                        let mut resp = Response::new(body);
                        if req.uri().path() == "/v1/events" {
                            resp.headers_mut().insert(
                                hyper::header::CONTENT_TYPE,
                                hyper::header::HeaderValue::from_static("text/event-stream"),
                            );
                        }
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, ca_file, log)
}

/// Every process environment in the container labelled `label`, read as root and as `nobody`
/// (without capabilities, root cannot read another user's), one `environ` per line.
fn container_environs(label: &str) -> String {
    let ids = docker_lines(&["ps", "-q", "--filter", label]);
    let mut out = String::new();
    for id in ids {
        for user in ["0", "65534"] {
            let o = std::process::Command::new("docker")
                .args(["exec", "-u", user, &id, "sh", "-c"])
                .arg("for f in /proc/[0-9]*/environ; do cat \"$f\" 2>/dev/null | tr '\\0' ' '; echo; done")
                .bounded_output()
                .unwrap();
            out.push_str(&String::from_utf8_lossy(&o.stdout));
        }
    }
    out
}

/// The regular files under `dir` (recursively) that contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> (usize, Vec<PathBuf>) {
    let (mut read, mut found) = (0, Vec::new());
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file()
                && let Ok(bytes) = std::fs::read(e.path())
            {
                read += 1;
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(e.path());
                }
            }
        }
    }
    (read, found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_upstream_gets_the_key_on_the_host_and_streams_but_the_container_never_sees_it() {
    let test = "an_agents_upstream_gets_the_key_on_the_host";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let key = format!(
        "sk-devcell-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let ctx = ctx
        .isolated()
        .delete_on_drop()
        .env("TEST_KEY", &key)
        .config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let certs = tempfile::tempdir().unwrap();
    let (port, ca, log) = model_upstream(certs.path(), ctx.path()).await;
    // The agent: busybox `wget` against the in-container endpoint from its environment; the
    // stream's first event is read, acknowledged, then the rest.
    let script = "echo base=$TEST_BASE_URL; \
                  echo hello=$(wget -q -O - \"$TEST_BASE_URL/hello\"); \
                  wget -q -O - \"$TEST_BASE_URL/events\" | { read -r first; echo \"first=$first\"; \
                  echo ack=$(wget -q -O - \"$TEST_BASE_URL/ack\"); cat; }; \
                  echo done";
    let config = ctx.tmp().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.model]\ncommand = [\"sh\", \"-c\", {script:?}]\nnetwork = \"allowlist\"\n\
             [agents.model.upstreams.test]\nurl = \"https://api.test:{port}/v1\"\n\
             header = \"Authorization\"\nvalue = \"Bearer ${{localEnv:TEST_KEY}}\"\n\
             env = \"TEST_BASE_URL\"\naddress = \"127.0.0.1\"\nca = {:?}\n",
            ca.to_str().unwrap()
        ),
    )
    .unwrap();
    let ws = ctx.path().to_str().unwrap().to_string();
    let run = tokio::task::block_in_place(|| {
        ctx.devcell(&[
            "handoff",
            "--workspace-folder",
            ws.as_str(),
            "--agent",
            "model",
            "--config-file",
            config.to_str().unwrap(),
            "--format",
            "json",
        ])
    });
    assert!(run.success(), "{}", run.stderr);
    let seen = log.lock().unwrap();
    let said = &run.stderr;
    for fact in [
        "base=http://127.0.0.1:3128/upstreams/test\n",
        "hello=hello from the model\n",
        "first=data: one\n",
        "ack=ok\n",
        "data: two\n",
        "done\n",
    ] {
        assert!(
            said.contains(fact),
            "missing `{fact}` in the agent's output:\n{said}\nthe upstream saw {:?}\n{:?}",
            seen.requests
                .iter()
                .map(|(u, _)| u.as_str())
                .collect::<Vec<_>>(),
            std::fs::read_dir(ctx.state().join("egress"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| std::fs::read_to_string(e.path().join("decisions.jsonl")))
                .collect::<Vec<_>>()
        );
    }
    // Streaming: the agent read the first event while the response was still open.
    assert_eq!(seen.acked_before_end, Some(true), "{said}");
    // The upstream got the host's header with the key, on every request.
    let uris: Vec<&str> = seen.requests.iter().map(|(u, _)| u.as_str()).collect();
    assert_eq!(uris, ["/v1/hello", "/v1/events", "/v1/ack"]);
    let bearer = format!("Bearer {key}");
    for (uri, headers) in &seen.requests {
        let auth: Vec<_> = headers
            .get_all(hyper::header::AUTHORIZATION)
            .iter()
            .collect();
        assert_eq!(auth, [bearer.as_str()], "{uri}");
        assert_eq!(
            headers[hyper::header::HOST],
            format!("api.test:{port}").as_str()
        );
    }
    // The container never had it: its environments while the agent ran (which did carry the
    // base URL, so they were read), `docker inspect`, the workspace, devcell's state and
    // home, its output and the proxy's command line.
    assert!(
        seen.environs
            .contains("TEST_BASE_URL=http://127.0.0.1:3128/upstreams/test"),
        "the agent's environment was not read: {}",
        seen.environs
    );
    assert!(!seen.environs.contains(&key), "{}", seen.environs);
    let ids = ctx.containers();
    assert_eq!(ids.len(), 1);
    let inspect = std::process::Command::new("docker")
        .args(["inspect", &ids[0]])
        .bounded_output()
        .unwrap();
    assert!(inspect.status.success());
    let inspect = String::from_utf8_lossy(&inspect.stdout);
    assert!(inspect.contains("HTTP_PROXY=http://127.0.0.1:3128"));
    assert!(!inspect.contains(&key), "the key is in docker inspect");
    let (read, found) = files_containing(ctx.tmp(), key.as_bytes());
    assert!(found.is_empty(), "the key is in {found:?}");
    assert!(read > 5, "only {read} files were searched");
    let record = ctx.state().join("egress");
    let (_, with_upstream) = files_containing(&record, b"api.test");
    assert!(
        with_upstream.iter().any(|p| p.ends_with("decisions.jsonl")),
        "the proxy's record is among the files searched: {with_upstream:?}"
    );
    assert!(!run.stdout.contains(&key) && !run.stderr.contains(&key));
    for e in std::fs::read_dir(&record).unwrap().flatten() {
        if let Ok(pid) = std::fs::read_to_string(e.path().join("proxy.pid")) {
            let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
            assert!(!String::from_utf8_lossy(&cmdline).contains(&key));
        }
    }
    // The session records the upstream as an allowed destination.
    let v = run.json();
    let allowed = &v["result"]["session"]["egress"]["allowed"][0];
    assert_eq!(allowed["destination"], "api.test", "{v}");
    assert_eq!(allowed["count"], 3, "{v}");
}

/// `devcell-test/glibc:1`: an image of this Debian host's own glibc binaries (dash as
/// `/bin/sh`, bash, coreutils, GNU `wget`, `curl`, `getent`) and the libraries `ldd` names for
/// them, made with `docker import` (nothing is pulled; built once, then found by its tag).
pub(crate) fn glibc_image() -> &'static str {
    const IMAGE: &str = "devcell-test/glibc:1";
    const TOOLS: &[&str] = &[
        "dash", "bash", "env", "id", "cat", "ls", "tail", "head", "wc", "sleep", "tr", "echo",
        "true", "false", "mkdir", "chmod", "chown", "rm", "cp", "mv", "ln", "test", "[", "uname",
        "stat", "touch", "cut", "readlink", "dirname", "basename", "whoami", "grep", "sed",
        "getent", "wget", "curl",
    ];
    if docker_lines(&["image", "ls", "-q", IMAGE]).len() == 1 {
        return IMAGE;
    }
    let mut files: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    for tool in TOOLS {
        let host = Path::new("/usr/bin").join(tool);
        assert!(
            host.exists(),
            "{} is not on this host: the glibc test image is made from it",
            host.display()
        );
        files.insert(host.clone(), host.clone());
        let ldd = std::process::Command::new("ldd")
            .arg(&host)
            .output()
            .expect("ldd runs");
        for line in String::from_utf8_lossy(&ldd.stdout).lines() {
            let lib = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next(),
                None => line.split_whitespace().next(),
            };
            let Some(lib) = lib.filter(|l| l.starts_with('/')) else {
                continue;
            };
            // the library's own name (its soname link) in the folder's real location
            let lib = Path::new(lib);
            let dir = std::fs::canonicalize(lib.parent().unwrap()).unwrap();
            files.insert(dir.join(lib.file_name().unwrap()), lib.to_path_buf());
        }
    }
    for nss in ["libnss_files.so.2", "libnss_dns.so.2"] {
        let lib = Path::new("/usr/lib/x86_64-linux-gnu").join(nss);
        if lib.exists() {
            files.insert(lib.clone(), lib);
        }
    }
    files.insert(PathBuf::from("/usr/bin/sh"), PathBuf::from("/usr/bin/dash"));
    let mut tar = tar::Builder::new(Vec::new());
    let dir = |tar: &mut tar::Builder<Vec<u8>>, path: &str, mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(mode);
        h.set_size(0);
        tar.append_data(&mut h, path, std::io::empty()).unwrap();
    };
    for d in [
        "etc",
        "tmp",
        "root",
        "usr",
        "usr/bin",
        "usr/lib",
        "usr/lib64",
        "usr/sbin",
    ] {
        dir(&mut tar, d, if d == "tmp" { 0o1777 } else { 0o755 });
    }
    for (link, to) in [
        ("bin", "usr/bin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("sbin", "usr/sbin"),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        tar.append_link(&mut h, link, to).unwrap();
    }
    let mut made = std::collections::BTreeSet::new();
    for (inside, host) in &files {
        let rel = inside.strip_prefix("/").unwrap();
        let mut parent = PathBuf::new();
        for c in rel.parent().unwrap().components() {
            parent.push(c);
            if !matches!(
                parent.to_str(),
                Some("usr" | "usr/bin" | "usr/lib" | "usr/lib64")
            ) && made.insert(parent.clone())
            {
                dir(&mut tar, parent.to_str().unwrap(), 0o755);
            }
        }
        let data = std::fs::read(host).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o755);
        h.set_size(data.len() as u64);
        tar.append_data(&mut h, rel, data.as_slice()).unwrap();
    }
    for (path, text) in [
        (
            "etc/passwd",
            "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        ),
        ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
        (
            "etc/nsswitch.conf",
            "passwd: files\ngroup: files\nhosts: files dns\n",
        ),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(text.len() as u64);
        tar.append_data(&mut h, path, text.as_bytes()).unwrap();
    }
    let tar = tar.into_inner().unwrap();
    let out = crate::support::deadline::input_within(
        std::process::Command::new("docker").args([
            "import",
            "--change",
            "CMD [\"/bin/sh\"]",
            "-",
            IMAGE,
        ]),
        &tar,
        crate::support::deadline::cli_deadline(),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "docker import of {IMAGE} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    IMAGE
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_glibc_image_gets_out_only_through_the_allowlist_too() {
    let test = "a_glibc_image_gets_out_only_through_the_allowlist";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let image = glibc_image();
    let ctx = ctx
        .isolated()
        .config_json(&serde_json::json!({"image": image, "remoteUser": "nobody"}));
    let (web, hits) = http_server("127.0.0.1:0").await;
    let port = web.port();
    let entry = format!("web.test:{port}=127.0.0.1");
    let _down = DownOnDrop(&ctx);
    let up = tokio::task::block_in_place(|| {
        ctx.up(&["--network", "allowlist", "--egress-allow", entry.as_str()])
    });
    let (_, _, record) = up_egress(&up);
    let script = format!(
        "echo wget=$(wget --version | head -n 1 | cut -d ' ' -f 1-2)\n\
         test -e /bin/busybox && echo busybox=yes || echo busybox=no\n\
         echo uid=$(id -u)\n\
         echo routes=$(tail -n +2 /proc/net/route | wc -l)\n\
         echo ifaces=$(ls /sys/class/net)\n\
         getent hosts web.test >/dev/null && echo resolver=answers || echo resolver=none\n\
         echo curl=$(curl -s -f http://web.test:{port}/hello)\n\
         echo gnu=$(wget -q -O - http://web.test:{port}/hello)\n\
         curl -s -f -o /dev/null http://evil.test:{port}/ && echo refused=reached || echo refused=failed\n\
         curl -s -f -o /dev/null --noproxy '*' http://web.test:{port}/ && echo direct=reached || echo direct=failed\n\
         curl -s -f -o /dev/null --noproxy '*' http://127.0.0.1:{port}/ && echo loopback=reached || echo loopback=failed\n"
    );
    let (code, out, err) = tokio::task::block_in_place(|| ctx.sh(&script));
    assert_eq!(code, 0, "{out}{err}");
    let facts: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once('=')).collect();
    let want = [
        ("wget", "GNU Wget"),
        ("busybox", "no"),
        ("uid", "65534"),
        ("routes", "0"),
        ("ifaces", "lo"),
        ("resolver", "none"),
        ("curl", "hello through the proxy"),
        ("gnu", "hello through the proxy"),
        ("refused", "failed"),
        ("direct", "failed"),
        ("loopback", "failed"),
    ];
    for (k, v) in want {
        assert_eq!(facts.get(k).copied(), Some(v), "{k} in:\n{out}{err}");
    }
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2);
    let seen: Vec<(String, bool)> = decisions(&record)
        .iter()
        .map(|d| {
            (
                d["destination"].as_str().unwrap().to_string(),
                d["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("web.test".to_string(), true),
            ("web.test".to_string(), true),
            ("evil.test".to_string(), false)
        ]
    );
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
