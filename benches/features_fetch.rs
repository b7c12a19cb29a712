//! Resolve + fetch of 10 Features from a local registry (spec-notes/0067): `cold` starts each
//! iteration with an empty cache (every manifest and layer pulled over HTTP from a private
//! `docker-registry` on 127.0.0.1), `warm` reuses a filled cache (no network request at all).
//! Each iteration plans the 10 Features (order + metadata) and materialises them into a fresh
//! folder. Needs the `docker-registry` binary (Debian package `docker-registry`).

use std::path::Path;
use std::process::{Child, Command, Stdio};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use devcell::features::fetch::{FetchOptions, Fetcher, PlanRequest};
use devcell::features::publish;
use devcell::oci::registry::{Registry, RegistryOptions};
use indexmap::IndexMap;
use serde_json::Value;

struct RegistryProcess(Child);

impl Drop for RegistryProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_registry(dir: &Path) -> (RegistryProcess, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("storage").display()
        ),
    )
    .expect("config");
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docker-registry is installed");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (RegistryProcess(child), format!("127.0.0.1:{port}"))
}

/// Ten small Features `bench-0` … `bench-9`, each with a few KiB of scripts.
fn make_features(src: &Path) {
    for i in 0..10 {
        let d = src.join(format!("bench-{i}"));
        std::fs::create_dir_all(d.join("lib")).expect("mkdir");
        std::fs::write(
            d.join("devcontainer-feature.json"),
            format!(r#"{{"id":"bench-{i}","version":"1.0.{i}","name":"Bench {i}","options":{{"v":{{"type":"string","default":"x"}}}}}}"#),
        )
        .expect("write");
        std::fs::write(d.join("install.sh"), "#!/bin/sh\necho ok\n").expect("write");
        std::fs::write(d.join("lib/data.sh"), "# filler\n".repeat(512)).expect("write");
    }
}

#[allow(clippy::print_stderr)]
fn bench(c: &mut Criterion) {
    let have = Command::new("sh")
        .args(["-c", "command -v docker-registry"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("note: docker-registry not installed; skipping the features_fetch bench");
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    let (_registry, addr) = start_registry(work.path());
    let src = work.path().join("src");
    make_features(&src);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let registry = Registry::new(RegistryOptions::default()).expect("registry");
    rt.block_on(publish::publish(&registry, &src, &addr, "bench"))
        .expect("publish");
    let features: IndexMap<String, Value> = (0..10)
        .map(|i| (format!("{addr}/bench/bench-{i}:1"), Value::Bool(true)))
        .collect();
    let dc = work.path().join(".devcontainer");
    let request = PlanRequest {
        features: &features,
        override_order: &[],
        config_dir: &dc,
        devcontainer_dir: &dc,
        lockfile: None,
    };
    let run = |cache: &Path, out: &Path| {
        let f = Fetcher::new(FetchOptions {
            cache_dir: Some(cache.to_owned()),
            ..Default::default()
        })
        .expect("fetcher");
        rt.block_on(async {
            let plan = f.plan(&request).await.expect("plan");
            f.fetch_plan(&plan, out).await.expect("fetch")
        })
    };
    let mut group = c.benchmark_group("features_fetch_10");
    group.sample_size(20);
    group.bench_function("cold", |b| {
        b.iter_batched(
            || {
                (
                    tempfile::tempdir().expect("cache"),
                    tempfile::tempdir().expect("out"),
                )
            },
            // Return the folders so their removal happens outside the measurement.
            |(cache, out)| {
                run(cache.path(), &out.path().join("f"));
                (cache, out)
            },
            BatchSize::PerIteration,
        )
    });
    let warm = tempfile::tempdir().expect("cache");
    run(warm.path(), &work.path().join("prime"));
    group.bench_function("warm", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("out"),
            |out| {
                run(warm.path(), &out.path().join("f"));
                out
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
