//! Egress proxy overhead (spec-note 0505): requests per second and per-request latency of a
//! plain HTTP GET to a hyper server on 127.0.0.1, directly and through the path an
//! `allowlist` container uses (devcell's static forwarder on a loopback port → the Unix
//! socket → the host-side proxy → the server), each request on a new connection (the proxy
//! forwards with `Connection: close`). Prints the figures; `cargo bench --bench egress`.
//! `EGRESS_BENCH_REQUESTS` sets the count per run (default 2000), `EGRESS_BENCH_CONCURRENCY`
//! the parallel clients of the throughput run (default 8).

// a benchmark's report is its output
#![allow(clippy::print_stdout)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use devcell::egress::{
    Allowlist, DecisionLog, FakeResolver, Proxy, SocketFolder, install_forwarder,
};
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;

async fn server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = service_fn(|_req: Request<Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                        b"hello through the proxy",
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), service)
                    .await;
            });
        }
    });
    addr
}

/// `n` sequential requests: the latencies, sorted.
async fn sequential(client: &reqwest::Client, url: &str, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let body = client.get(url).send().await.unwrap().bytes().await.unwrap();
        assert_eq!(&body[..], b"hello through the proxy");
        out.push(t.elapsed());
    }
    out.sort();
    out
}

/// `n` requests over `c` parallel clients: requests per second.
async fn throughput(client: &reqwest::Client, url: &str, n: usize, c: usize) -> f64 {
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..c {
        let (client, url) = (client.clone(), url.to_string());
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / c {
                let r = client.get(&url).send().await.unwrap();
                assert!(r.status().is_success());
                r.bytes().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (n / c * c) as f64 / t.elapsed().as_secs_f64()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(name: &str, lat: &[Duration], rps: f64) {
    let p = |q: f64| ms(lat[((lat.len() - 1) as f64 * q) as usize]);
    let mean = lat.iter().map(|d| ms(*d)).sum::<f64>() / lat.len() as f64;
    println!(
        "{name:8} mean {mean:.3} ms  p50 {:.3} ms  p99 {:.3} ms  {rps:.0} req/s",
        p(0.5),
        p(0.99)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("EGRESS_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let c: usize = std::env::var("EGRESS_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let web = server().await;
    let state = tempfile::tempdir().unwrap();
    let folder = SocketFolder::create(state.path(), "bench").unwrap();
    let proxy = Proxy::new(
        Allowlist::parse(&[format!("web.test:{}=127.0.0.1", web.port())]).unwrap(),
        Arc::new(FakeResolver::new()),
        DecisionLog::open(&state.path().join("decisions.jsonl")).unwrap(),
    );
    let listener = folder.bind().unwrap();
    tokio::spawn(async move { proxy.serve_unix(listener).await });
    // the forwarder, as in the container (it is static: it runs on the host too)
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let forwarder = install_forwarder(state.path()).unwrap();
    let child = std::process::Command::new(&forwarder)
        .arg(format!("127.0.0.1:{port}"))
        .arg(folder.socket())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    /// Stops the forwarder also when a request panics.
    struct Forwarder(std::process::Child);
    impl Drop for Forwarder {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Forwarder(child);
    {
        use std::io::Read;
        let mut line = [0u8; 64];
        let _ = child.0.stdout.as_mut().unwrap().read(&mut line).unwrap();
    }
    // a new connection per request for both, as the proxy closes each
    let direct = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let proxied = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(format!("http://127.0.0.1:{port}")).unwrap())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let direct_url = format!("http://127.0.0.1:{}/", web.port());
    let proxied_url = format!("http://web.test:{}/", web.port());
    // warm up
    sequential(&direct, &direct_url, 50).await;
    sequential(&proxied, &proxied_url, 50).await;
    println!("{n} requests each, {c} parallel clients for req/s");
    let d = sequential(&direct, &direct_url, n).await;
    let d_rps = throughput(&direct, &direct_url, n, c).await;
    report("direct", &d, d_rps);
    let p = sequential(&proxied, &proxied_url, n).await;
    let p_rps = throughput(&proxied, &proxied_url, n, c).await;
    report("proxied", &p, p_rps);
    let mean = |l: &[Duration]| l.iter().map(|d| ms(*d)).sum::<f64>() / l.len() as f64;
    println!(
        "added    mean {:.3} ms per request; throughput {:.0}% of direct",
        mean(&p) - mean(&d),
        100.0 * p_rps / d_rps
    );
    drop(child);
}
