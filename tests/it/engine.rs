//! `devcell::engine` against the real Docker engine (and the local registry for pulls).

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use devcell::diagnostics::Hint;
use devcell::engine::run_args::apply_run_args;
use devcell::engine::{
    BuildRequest, ContainerSpec, DockerEngine, Engine, EngineError, ExecInput, ExecOutput,
    ExecRequest, Mount, MountKind,
};
use devcell::progress::NoopReporter;

use crate::support::engine::{
    BUSYBOX, ContainerGuard, ImageGuard, Recorder, docker, engine, unique_labels,
};

fn keepalive(labels: BTreeMap<String, String>) -> ContainerSpec {
    ContainerSpec {
        image: BUSYBOX.to_string(),
        labels,
        cmd: Some(vec!["sleep".into(), "600".into()]),
        ..ContainerSpec::default()
    }
}

fn argv(a: &[&str]) -> ExecRequest {
    ExecRequest {
        argv: a.iter().map(|s| s.to_string()).collect(),
        ..ExecRequest::default()
    }
}

async fn sh(e: &DockerEngine, id: &str, script: &str) -> (i64, String, String) {
    let r = e
        .exec(
            id,
            &argv(&["/bin/sh", "-c", script]),
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await
        .expect("exec runs");
    (r.exit_code, r.stdout_text(), r.stderr_text())
}

#[tokio::test]
async fn an_engine_that_is_not_running_says_how_to_start_one() {
    for host in [
        "unix:///nonexistent/devcell/docker.sock",
        "tcp://127.0.0.1:1",
    ] {
        let err = DockerEngine::connect_to(host).await.unwrap_err();
        assert!(
            matches!(err, EngineError::NotRunning { .. }),
            "{host}: {err}"
        );
        assert!(err.to_string().contains(host), "{err}");
        let hint = err.hint().unwrap();
        assert!(
            hint.contains("dockerd") && hint.contains("DOCKER_HOST"),
            "{hint}"
        );
    }
    let err = DockerEngine::connect_to("ftp://x").await.unwrap_err();
    assert!(matches!(err, EngineError::UnsupportedHost { .. }), "{err}");
}

#[tokio::test]
async fn version_and_image_inspect() {
    let Some(e) = engine("version_and_image_inspect").await else {
        return;
    };
    let v = e.version().await.unwrap();
    assert!(!v.version.is_empty() && !v.api_version.is_empty(), "{v:?}");
    // The fast path speaks 1.41; negotiation through `/version` reaches the same engine.
    assert_eq!(e.api_version(), "1.41");
    let negotiated = DockerEngine::connect_negotiated(e.host()).await.unwrap();
    assert_eq!(negotiated.version().await.unwrap().version, v.version);
    let info = e.info().await.unwrap();
    assert!(info.cpus >= 1 && info.memory_bytes > 0, "{info:?}");
    assert!(
        info.runtimes
            .iter()
            .any(|r| r.contains("runc") || r.contains("crun")),
        "{info:?}"
    );
    let img = e.inspect_image(BUSYBOX).await.unwrap().unwrap();
    assert!(img.id.starts_with("sha256:"), "{img:?}");
    assert!(img.repo_tags.iter().any(|t| t.ends_with(BUSYBOX)));
    assert!(img.env.iter().any(|v| v.starts_with("PATH=")));
    assert_eq!(img.cmd.as_deref(), Some(&["/bin/sh".to_string()][..]));
    assert!(
        e.inspect_image("devcell-test/does-not-exist:none")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn pull_through_the_engine_from_the_local_registry() {
    let Some(e) = engine("pull_through_the_engine_from_the_local_registry").await else {
        return;
    };
    let Ok(registry) = std::env::var("DEVCELL_TEST_REGISTRY") else {
        assert!(
            std::env::var("DEVCELL_TEST_ENGINE").is_err(),
            "DEVCELL_TEST_REGISTRY must be set with DEVCELL_TEST_ENGINE=1"
        );
        return;
    };
    let reference = format!(
        "{registry}/devcell-test/engine-pull:{}",
        crate::support::run_token()
    );
    let _guard = ImageGuard(vec![reference.clone()]);
    let (ok, out) = docker(&["tag", BUSYBOX, &reference]);
    assert!(ok, "{out}");
    let (ok, out) = docker(&["push", &reference]);
    assert!(ok, "{out}");
    let (ok, out) = docker(&["rmi", &reference]);
    assert!(ok, "{out}");
    assert!(e.inspect_image(&reference).await.unwrap().is_none());
    let recorder = Recorder::default();
    let img = e.ensure_image(&reference, &recorder).await.unwrap();
    assert!(
        img.repo_digests.iter().any(|d| d.contains("@sha256:")),
        "{img:?}"
    );
    assert!(
        !recorder.0.lock().unwrap().is_empty(),
        "pull reported nothing"
    );
    // A reference that exists nowhere is a pull error naming it.
    let missing = format!("{registry}/devcell-test/never-pushed:1");
    let err = e.ensure_image(&missing, &NoopReporter).await.unwrap_err();
    assert!(matches!(err, EngineError::Pull { .. }), "{err}");
    assert!(err.to_string().contains(&missing), "{err}");
}

#[tokio::test]
async fn build_honours_dockerignore_args_target_labels_and_tags() {
    let Some(e) = engine("build_honours_dockerignore_args_target_labels_and_tags").await else {
        return;
    };
    let ctx = tempfile::tempdir().unwrap();
    let root = ctx.path();
    fs::create_dir_all(root.join("secret")).unwrap();
    fs::write(root.join("secret/token"), "do-not-send").unwrap();
    fs::write(root.join("kept.txt"), "kept").unwrap();
    fs::write(root.join("drop.log"), "log").unwrap();
    fs::write(root.join(".dockerignore"), "secret\n*.log\n").unwrap();
    fs::write(
        root.join("Dockerfile"),
        format!(
            "FROM {BUSYBOX} AS base\nARG GREETING=unset\nCOPY . /ctx/\n\
             RUN echo \"greeting=$GREETING\" && ls -a /ctx > /ctx.list\n\
             FROM base AS final\nRUN false\n"
        ),
    )
    .unwrap();
    let tag = format!("devcell-test/engine-build:{}", crate::support::run_token());
    let tag2 = format!("{tag}-alias");
    let _guard = ImageGuard(vec![tag.clone(), tag2.clone()]);
    let request = BuildRequest {
        context: root.to_path_buf(),
        dockerfile: root.join("Dockerfile"),
        tags: vec![tag.clone(), tag2.clone()],
        args: [("GREETING".to_string(), "hello".to_string())]
            .into_iter()
            .collect(),
        target: Some("base".into()),
        labels: BTreeMap::from([("devcell.test.build".to_string(), "yes".to_string())]),
        ..BuildRequest::default()
    };
    let recorder = Recorder::default();
    let img = e.build_image(&request, &recorder).await.unwrap();
    assert_eq!(
        img.labels.get("devcell.test.build").map(String::as_str),
        Some("yes")
    );
    // Docker's familiar form on Podman too (which reports `docker.io/devcell-test/…`).
    assert!(img.repo_tags.contains(&tag2), "{img:?}");
    let out = recorder.output();
    assert!(out.iter().any(|l| l.contains("greeting=hello")), "{out:?}");
    // What the context held, seen from a container of the image.
    let c = e
        .create_container(&ContainerSpec {
            image: tag.clone(),
            cmd: Some(vec!["sleep".into(), "60".into()]),
            labels: unique_labels("build"),
            ..ContainerSpec::default()
        })
        .await
        .unwrap();
    let _c = ContainerGuard(c.clone());
    e.start_container(&c).await.unwrap();
    let (_, list, _) = sh(&e, &c, "cat /ctx.list").await;
    assert!(
        list.contains("kept.txt") && list.contains("Dockerfile"),
        "{list}"
    );
    assert!(
        !list.contains("secret") && !list.contains("drop.log"),
        "{list}"
    );

    // The `final` stage fails: a build error carrying the engine's message.
    let failing = BuildRequest {
        target: None,
        tags: vec![format!("{tag}-fail")],
        ..request
    };
    let err = e.build_image(&failing, &NoopReporter).await.unwrap_err();
    assert!(matches!(err, EngineError::Build { .. }), "{err}");
    // Docker: "… returned a non-zero code: 1"; Podman: "… STEP \"RUN false\" … exit status 1".
    let text = err.to_string();
    assert!(
        text.contains("non-zero code") || text.contains("exit status"),
        "{text}"
    );
}

#[tokio::test]
async fn tag_then_inspect_by_the_new_name() {
    let Some(e) = engine("tag_then_inspect_by_the_new_name").await else {
        return;
    };
    let target = format!("devcell-test/engine-tag:{}", crate::support::run_token());
    let _guard = ImageGuard(vec![target.clone()]);
    e.tag_image(BUSYBOX, &target).await.unwrap();
    let a = e.inspect_image(&target).await.unwrap().unwrap();
    let b = e.inspect_image(BUSYBOX).await.unwrap().unwrap();
    assert_eq!(a.id, b.id);
    // Listed by its repository, in Docker's familiar form on either engine (prune relies on it).
    assert!(a.repo_tags.contains(&target), "{a:?}");
    let repository = target.split(':').next().unwrap();
    let listed = e.list_images(repository).await.unwrap();
    assert!(
        listed.iter().any(|i| i.repo_tags.contains(&target)),
        "{listed:?}"
    );
}

#[tokio::test]
async fn container_lifecycle_find_by_labels_exec_stop_start_remove() {
    let Some(e) = engine("container_lifecycle_find_by_labels_exec_stop_start_remove").await else {
        return;
    };
    let labels = unique_labels("lifecycle");
    let mut spec = keepalive(labels.clone());
    spec.env.insert("FROM_SPEC".into(), "spec-value".into());
    spec.working_dir = Some("/tmp".into());
    spec.mounts.push(Mount {
        kind: MountKind::Volume,
        source: None,
        target: "/anon".into(),
        read_only: false,
    });
    let id = e.create_container(&spec).await.unwrap();
    let _guard = ContainerGuard(id.clone());

    let found = e.find_containers(&labels).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].id.as_str(), found[0].state.as_str()),
        (id.as_str(), "created")
    );
    let mut other = labels.clone();
    other.insert("devcell.test.id".into(), "no-such-run".into());
    assert!(e.find_containers(&other).await.unwrap().is_empty());

    e.start_container(&id).await.unwrap();
    e.start_container(&id).await.unwrap(); // already running: no error
    let info = e.inspect_container(&id).await.unwrap().unwrap();
    assert!(info.running && info.status == "running", "{info:?}");
    assert_eq!(info.labels, labels);
    assert!(info.env.contains(&"FROM_SPEC=spec-value".to_string()));
    let volume = info
        .mounts
        .iter()
        .find(|m| m.destination == "/anon")
        .and_then(|m| m.name.clone())
        .expect("anonymous volume");

    // exec: collected output, exit code, env, user, working dir, stdin.
    let (code, out, err) = sh(&e, &id, "echo out; echo err >&2; exit 3").await;
    assert_eq!((code, out.as_str(), err.as_str()), (3, "out\n", "err\n"));
    let req = ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo $FROM_SPEC $EXTRA $(id -u) $(pwd)".into(),
        ],
        user: Some("65534".into()),
        env: [("EXTRA".to_string(), "x".to_string())]
            .into_iter()
            .collect(),
        working_dir: Some("/var".into()),
        tty: false,
    };
    let r = e
        .exec(&id, &req, ExecInput::None, ExecOutput::Collect)
        .await
        .unwrap();
    assert_eq!(r.stdout_text(), "spec-value x 65534 /var\n");
    let r = e
        .exec(
            &id,
            &argv(&["cat"]),
            ExecInput::Bytes(b"piped\nin".to_vec()),
            ExecOutput::Collect,
        )
        .await
        .unwrap();
    assert_eq!((r.exit_code, r.stdout_text().as_str()), (0, "piped\nin"));
    let recorder = Recorder::default();
    let r = e
        .exec(
            &id,
            &argv(&["/bin/sh", "-c", "printf 'a\\nb\\n'; printf c >&2"]),
            ExecInput::None,
            ExecOutput::Report(&recorder),
        )
        .await
        .unwrap();
    assert_eq!(r.exit_code, 0);
    let mut lines = recorder.output();
    lines.sort();
    assert_eq!(lines, ["a", "b", "c"]);
    let r = e
        .exec(
            &id,
            &ExecRequest {
                tty: true,
                ..argv(&["echo", "tty"])
            },
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await
        .unwrap();
    assert_eq!(r.stdout_text().trim_end(), "tty");
    // Interactive shape: stdin from a stream, output copied to writers as it arrives.
    let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
    let r = e
        .exec(
            &id,
            &argv(&["/bin/sh", "-c", "tr a-z A-Z; echo done >&2"]),
            ExecInput::Stream(Box::new(&b"streamed"[..])),
            ExecOutput::Write {
                stdout: Box::new(&mut out_buf),
                stderr: Box::new(&mut err_buf),
            },
        )
        .await
        .unwrap();
    assert_eq!(r.exit_code, 0);
    assert_eq!(
        (&out_buf[..], &err_buf[..]),
        (&b"STREAMED"[..], &b"done\n"[..])
    );
    let missing = e
        .exec(
            &id,
            &argv(&["/no/such/program"]),
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await
        .unwrap();
    assert_ne!(missing.exit_code, 0);

    // stop → exited and still found; start again.
    e.stop_container(&id, Some(Duration::from_secs(1)))
        .await
        .unwrap();
    let found = e.find_containers(&labels).await.unwrap();
    assert_eq!(found[0].state, "exited");
    assert!(!e.inspect_container(&id).await.unwrap().unwrap().running);
    e.start_container(&id).await.unwrap();
    assert!(e.inspect_container(&id).await.unwrap().unwrap().running);

    // remove (forced, with anonymous volumes); removing again is fine.
    e.remove_container(&id, true).await.unwrap();
    assert!(e.inspect_container(&id).await.unwrap().is_none());
    assert!(e.find_containers(&labels).await.unwrap().is_empty());
    e.remove_container(&id, true).await.unwrap();
    let (exists, _) = docker(&["volume", "inspect", &volume]);
    assert!(!exists, "anonymous volume {volume} survived removal");
    let err = e.start_container(&id).await.unwrap_err();
    assert!(matches!(err, EngineError::NoSuchContainer { .. }), "{err}");
}

#[tokio::test]
async fn run_args_reach_the_engine() {
    let Some(e) = engine("run_args_reach_the_engine").await else {
        return;
    };
    let mut spec = keepalive(unique_labels("runargs"));
    let args: Vec<String> = [
        "--label=devcell.test.runargs=1",
        "-e",
        "RA=1",
        "--hostname",
        "devcellbox",
        "--add-host",
        "db.internal:10.1.2.3",
        "--tmpfs",
        "/scratch:size=1m",
        "--ulimit",
        "nofile=100:200",
        // Podman replaces its default limits when any is given; keep nproc within a sandbox's.
        "--ulimit=nproc=1024:1024",
        "--shm-size=16m",
        "--cap-drop=NET_RAW",
        "--pids-limit",
        "99",
        "--memory",
        "256m",
        "--cpus=0.5",
        "--read-only",
        "--init",
        "--network",
        "none",
        "--mount",
        "type=tmpfs,target=/mnt/t",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    apply_run_args(&mut spec, &args, &|_| None).unwrap();
    let id = e.create_container(&spec).await.unwrap();
    let _guard = ContainerGuard(id.clone());
    e.start_container(&id).await.unwrap();
    let info = e.inspect_container(&id).await.unwrap().unwrap();
    assert_eq!(
        info.labels.get("devcell.test.runargs").map(String::as_str),
        Some("1")
    );
    assert!(info.host.read_only_rootfs);
    assert!(
        info.host.cap_drop.contains(&"NET_RAW".to_string()),
        "{:?}",
        info.host.cap_drop
    );
    assert_eq!(info.host.limits.pids, Some(99));
    assert_eq!(info.host.limits.memory_bytes, Some(256 << 20));
    assert_eq!(info.host.limits.nano_cpus, Some(500_000_000));
    assert_eq!(info.host.network_mode, "none");
    assert_eq!(info.host.init, Some(true));
    let (code, out, err) = sh(
        &e,
        &id,
        "echo $RA; hostname; grep db.internal /etc/hosts; grep 'open files' /proc/1/limits; \
         df -k /dev/shm | tail -1; \
         touch /scratch/ok && echo scratch-ok; touch /mnt/t/ok && echo mnt-ok; touch /nope 2>/dev/null || echo ro",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1");
    assert_eq!(lines[1], "devcellbox");
    assert!(lines[2].starts_with("10.1.2.3"), "{out}");
    // The container's process (the init with `--init`) has the soft and hard limits given. An
    // exec'd process is not checked: with `--init`, Podman 4.3 gives it the hard limit as its
    // soft one (spec-notes/0080).
    assert_eq!(
        lines[3]
            .split_whitespace()
            .skip(3)
            .take(2)
            .collect::<Vec<_>>(),
        ["100", "200"],
        "{out}"
    );
    assert!(lines[4].split_whitespace().nth(1) == Some("16384"), "{out}");
    assert_eq!(&lines[5..], ["scratch-ok", "mnt-ok", "ro"]);
}

#[tokio::test]
async fn read_files_from_images_and_containers() {
    let Some(e) = engine("read_files_from_images_and_containers").await else {
        return;
    };
    let passwd = e
        .read_image_file(BUSYBOX, "/etc/passwd")
        .await
        .unwrap()
        .expect("/etc/passwd exists");
    let nobody = devcell::engine::passwd::lookup(&String::from_utf8_lossy(&passwd), "nobody")
        .expect("nobody is in the image");
    assert_eq!((nobody.uid, nobody.home.as_str()), (65534, "/nonexistent"));
    assert!(
        e.read_image_file(BUSYBOX, "/no/such/file")
            .await
            .unwrap()
            .is_none()
    );
    // A folder is not a regular file.
    assert!(e.read_image_file(BUSYBOX, "/etc").await.unwrap().is_none());
    // No probe container of this image is left behind. The engine is shared: other tests
    // probe their own images meanwhile (a probe of another test failed this once in CI), and
    // one of this image lives only for its own read, so it is waited for briefly.
    let mut probes = Vec::new();
    for _ in 0..20 {
        probes = e
            .find_containers(&BTreeMap::from([(
                "devcell.probe".to_string(),
                "1".to_string(),
            )]))
            .await
            .unwrap()
            .into_iter()
            .filter(|p| p.image == BUSYBOX)
            .collect();
        if probes.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(probes.is_empty(), "{probes:?}");
    let err = e
        .read_file("devcell-no-such-container", "/etc/passwd")
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::NoSuchContainer { .. }), "{err}");
}

/// The engine going away after devcell connected is reported as "not running" with the hint,
/// not as an opaque request failure. A proxy socket stands in for the engine and is stopped.
#[tokio::test]
async fn an_engine_that_stops_mid_way_is_not_running() {
    let Some(_) = engine("an_engine_that_stops_mid_way_is_not_running").await else {
        return;
    };
    let real = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| "/var/run/docker.sock".to_string());
    let dir = tempfile::tempdir().unwrap();
    let proxy_path = dir.path().join("engine.sock");
    let listener = tokio::net::UnixListener::bind(&proxy_path).unwrap();
    let proxy = tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let real = real.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::UnixStream::connect(&real).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    let e = DockerEngine::connect_to(&format!("unix://{}", proxy_path.display()))
        .await
        .unwrap();
    assert!(e.inspect_image(BUSYBOX).await.unwrap().is_some());
    proxy.abort();
    let _ = proxy.await;
    std::fs::remove_file(&proxy_path).unwrap();
    let err = e.find_containers(&unique_labels("gone")).await.unwrap_err();
    assert!(matches!(err, EngineError::NotRunning { .. }), "{err:?}");
    assert!(err.hint().unwrap().contains("dockerd"));
}
