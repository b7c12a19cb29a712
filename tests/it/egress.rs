//! `--network allowlist`'s channel against the real engine (issue 13, spec-note 0500): a
//! hardened busybox container on network `none`, with devcell's static forwarder and the
//! host-side proxy's socket, reaches a test server on the host's 127.0.0.1 only through an
//! allowlist entry pinned to 127.0.0.1; everything else fails and is recorded. Every target
//! is a server this test starts on this machine.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use devcell::egress::{
    Allowlist, ContainerEgress, DecisionLog, HostResolver, Proxy, SocketFolder, install_forwarder,
};
use devcell::engine::{ContainerSpec, DockerEngine, Engine, ExecInput, ExecOutput, ExecRequest};
use devcell::security::{Grants, PolicyInput, ProfileLimits, SecurityProfile, apply};
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;

use crate::support::engine::{BUSYBOX, ContainerGuard, docker, engine, unique_labels};

/// An HTTP server on `addr` answering `hello through the proxy`, counting requests.
pub(crate) async fn http_server(addr: &str) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let local = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&hits);
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let count = Arc::clone(&count);
            tokio::spawn(async move {
                let service = service_fn(move |_req: Request<Incoming>| {
                    count.fetch_add(1, Ordering::SeqCst);
                    async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                            b"hello through the proxy",
                        ))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), service)
                    .await;
            });
        }
    });
    (local, hits)
}

/// A real TLS ClientHello naming `sni`.
fn client_hello(sni: &str) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

/// The engine's bridge gateway (the host's address on the default bridge): the `Gateway` the
/// engine reports, or (Docker leaves it out when it chose the default) the subnet's first
/// address.
fn bridge_gateway() -> String {
    let (ok, out) = docker(&[
        "network",
        "inspect",
        "bridge",
        "-f",
        "{{range .IPAM.Config}}{{.Gateway}} {{.Subnet}} {{end}}",
    ]);
    assert!(ok, "{out}");
    for word in out.split_whitespace() {
        if let Ok(ip) = word.parse::<std::net::Ipv4Addr>() {
            return ip.to_string();
        }
        if let Some((net, _)) = word.split_once('/')
            && let Ok(ip) = net.parse::<std::net::Ipv4Addr>()
        {
            return std::net::Ipv4Addr::from(u32::from(ip) + 1).to_string();
        }
    }
    panic!("the bridge network has no IPv4 subnet: {out}");
}

/// The host address for the direct-connection check: the engine's bridge gateway when it is an
/// address of this host (Docker), else (Podman here runs its service, and so its networks, in a
/// network namespace of its own) the host's first global IPv4 address. Either way an address
/// the host reaches and the container must not.
pub(crate) fn direct_target() -> String {
    let gateway = bridge_gateway();
    if std::net::TcpListener::bind(format!("{gateway}:0")).is_ok() {
        return gateway;
    }
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .expect("ip runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("the bridge gateway {gateway} is not on this host, and no global IPv4 address is: {text}"))
}

async fn run(e: &DockerEngine, id: &str, argv: Vec<String>) -> (i64, String) {
    let req = ExecRequest {
        argv,
        ..ExecRequest::default()
    };
    let r = e
        .exec(id, &req, ExecInput::None, ExecOutput::Collect)
        .await
        .expect("exec runs");
    (r.exit_code, r.stdout_text() + &r.stderr_text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_none_container_gets_out_only_through_the_allowlist() {
    let Some(e) = engine("a_network_none_container_gets_out_only_through_the_allowlist").await
    else {
        return;
    };
    // The servers: one on the host's loopback (the allowed destination), one on the bridge
    // gateway (the direct-connection check; the host itself reaches it), one raw TCP server
    // for CONNECT (it must never be contacted: the SNI is wrong).
    let (web, web_hits) = http_server("127.0.0.1:0").await;
    let gateway = direct_target();
    let (direct, direct_hits) = http_server(&format!("{gateway}:0")).await;
    let tls = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tls.set_nonblocking(true).unwrap();
    let tls_port = tls.local_addr().unwrap().port();
    assert!(
        std::net::TcpStream::connect(direct).is_ok(),
        "the host reaches its bridge address (control)"
    );

    let state = tempfile::tempdir().unwrap();
    let forwarder = install_forwarder(state.path()).unwrap();
    let folder = SocketFolder::create(state.path(), "ws").unwrap();
    let log_path = state.path().join("decisions.jsonl");
    let allowlist = Allowlist::parse(&[
        format!("web.test:{}=127.0.0.1", web.port()),
        format!("tls.test:{tls_port}=127.0.0.1"),
    ])
    .unwrap();
    let proxy = Proxy::new(
        allowlist,
        Arc::new(HostResolver),
        DecisionLog::open(&log_path).unwrap(),
    );
    let listener = folder.bind().unwrap();
    let serving = tokio::spawn(async move { proxy.serve_unix(listener).await });
    let hello = state.path().join("hello.bin");
    std::fs::write(&hello, client_hello("other.test")).unwrap();
    std::fs::set_permissions(&hello, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();

    // The container as a hardened `up` would create it, then the egress channel added.
    let ws = tempfile::tempdir().unwrap();
    let input = PolicyInput {
        spec: ContainerSpec {
            image: BUSYBOX.to_string(),
            labels: unique_labels("egress"),
            cmd: Some(vec!["sleep".into(), "600".into()]),
            ..ContainerSpec::default()
        },
        remote_user: Some("nobody".into()),
        remote_home: Some("/nonexistent".into()),
        remote_ids: Some((65534, 65534)),
        workspace: ws.path().to_path_buf(),
        ..PolicyInput::default()
    };
    let profile = SecurityProfile::Hardened(ProfileLimits::default());
    let mut spec = apply(&profile, &input, &Grants::default()).unwrap().spec;
    let channel = ContainerEgress::new(&forwarder, &folder, 3128);
    channel.apply(&mut spec);
    spec.mounts.push(devcell::engine::Mount {
        kind: devcell::engine::MountKind::Bind,
        source: Some(hello.to_string_lossy().into_owned()),
        target: "/t/hello.bin".into(),
        read_only: true,
    });
    let id = e.create_container(&spec).await.unwrap();
    let _guard = ContainerGuard(id.clone());
    e.start_container(&id).await.unwrap();
    let info = e.inspect_container(&id).await.unwrap().unwrap();
    assert_eq!(info.host.network_mode, "none");

    // Everything runs as the container's user (nobody), under the forwarder (`--`: the port
    // is bound before the script starts).
    let (wp, gw, dp) = (web.port(), &gateway, direct.port());
    let script = format!(
        "echo uid=$(id -u)\n\
         echo ifaces=$(ls /sys/class/net)\n\
         echo routes=$(tail -n +2 /proc/net/route | wc -l)\n\
         nslookup web.test >/dev/null 2>&1 && echo resolver=answers || echo resolver=none\n\
         echo allowed=$(wget -q -O - http://web.test:{wp}/hello)\n\
         wget -q -O - http://evil.test:{wp}/ >/dev/null 2>&1 && echo refused=reached || echo refused=failed\n\
         no_proxy= NO_PROXY= wget -q -O - http://127.0.0.1:{wp}/ >/dev/null 2>&1 && echo literal=reached || echo literal=failed\n\
         http_proxy= wget -q -O - http://127.0.0.1:{wp}/ >/dev/null 2>&1 && echo ownloop=reached || echo ownloop=failed\n\
         http_proxy= wget -q -O - http://{gw}:{dp}/ >/dev/null 2>&1 && echo direct=reached || echo direct=failed\n\
         echo sni=$( (printf 'CONNECT tls.test:{tls_port} HTTP/1.1\\r\\nHost: tls.test:{tls_port}\\r\\n\\r\\n'; cat /t/hello.bin) | nc 127.0.0.1 3128 | head -c 12)\n"
    );
    let mut argv = channel.forwarder_command.clone();
    argv.extend(["--".into(), "/bin/sh".into(), "-c".into(), script]);
    let (code, out) = run(&e, &id, argv).await;
    assert_eq!(code, 0, "{out}");
    let facts: BTreeMap<&str, &str> = out.lines().filter_map(|l| l.split_once('=')).collect();
    let want = [
        ("uid", "65534"),
        ("ifaces", "lo"),
        ("routes", "0"),
        ("resolver", "none"),
        ("allowed", "hello through the proxy"),
        ("refused", "failed"),
        ("literal", "failed"),
        ("ownloop", "failed"),
        ("direct", "failed"),
        // The tunnel opens (the ClientHello comes after it), then closes on the wrong SNI.
        ("sni", "HTTP/1.1 200"),
    ];
    for (k, v) in want {
        assert_eq!(facts.get(k).copied(), Some(v), "{k} in:\n{out}");
    }

    // What happened on the host: one request reached the allowed server, none the direct
    // one, nothing connected to the CONNECT target, and every decision is recorded.
    assert_eq!(web_hits.load(Ordering::SeqCst), 1);
    assert_eq!(direct_hits.load(Ordering::SeqCst), 0);
    match tls.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the CONNECT target was contacted: {other:?}"),
    }
    let mut decisions = Vec::new();
    for _ in 0..500 {
        decisions = DecisionLog::read(&log_path).unwrap();
        if decisions.len() >= 4 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let summary: Vec<(String, bool, String)> = decisions
        .iter()
        .map(|d| {
            (
                format!("{}:{}", d.destination, d.port),
                d.allowed,
                d.reason.clone(),
            )
        })
        .collect();
    let expect = [
        (format!("web.test:{wp}"), true, "allowed".to_string()),
        (format!("evil.test:{wp}"), false, "not-listed".to_string()),
        (format!("127.0.0.1:{wp}"), false, "not-listed".to_string()),
        (
            format!("tls.test:{tls_port}"),
            false,
            "sni-mismatch".to_string(),
        ),
    ];
    assert_eq!(summary, expect, "{decisions:#?}");
    assert!(decisions[0].bytes_received > 0);
    serving.abort();
}
