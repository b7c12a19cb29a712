//! The Compose configurations of the conformance corpus (`../shared/corpus`, issue 14): each is
//! brought up with `devcell up` against the real engine and Compose v2, with local images only
//! (the images it names are tagged locally from the busybox test image when absent, and
//! removed again), then taken down with `down --remove`. Registries are mapped to a closed
//! local port (`[registries] mirrors`), so a configuration that needs a public Feature fails
//! without a packet leaving the machine. Spec-note 0607 has the count and the reasons.
//!
//! Ignored by default (it reads a folder outside the repository):
//! `cargo test --test it -- --ignored compose_corpus` (`DEVCELL_CORPUS` overrides the folder).

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use devcell::engine::compose::{ProjectNameInputs, project_name};
use serde_json::Value;

use crate::support::context::{TestContext, docker_lines};
use crate::support::docker::BUSYBOX_IMAGE;

/// What a case is expected to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// `up` succeeds, the primary container runs and `down --remove` leaves nothing.
    Up,
    /// `up` fails before any container of the project exists, with an error containing this
    /// text (the reason the report gives).
    Fails(&'static str),
}

/// One corpus case: its folder, the images its files name (tagged locally when absent), what
/// it is expected to do and why, in words.
struct Case {
    id: &'static str,
    images: &'static [&'static str],
    expect: Expect,
    why: &'static str,
}

/// The 17 Compose cases of the corpus (kind `compose` in its INDEX.md).
const CASES: &[Case] = &[
    Case {
        id: "001-devcontainers-cli-compose-Dockerfile-alpine",
        images: &["alpine:latest"],
        expect: Expect::Up,
        why: "a `build` service (busybox's `adduser` stands in for Alpine's), remoteUser `bar`, three hooks",
    },
    Case {
        id: "002-devcontainers-cli-compose-image-with-mounts",
        images: &[],
        expect: Expect::Fails("docker-compose.yml"),
        why: "the corpus left its Compose file out",
    },
    Case {
        id: "020-devcontainers-cli-template-node-mongo",
        images: &[
            "mcr.microsoft.com/vscode/devcontainers/javascript-node:0-16-bullseye",
            "mongo:latest",
        ],
        expect: Expect::Fails("--allow namespace:network:service:db"),
        why: "its `network_mode: service:db` shares a network namespace between two services, a `namespace:` request under `hardened` (spec-note 0400, F3); granted, it still needs two public Features (`common-utils`, `git`), which no local registry holds",
    },
    Case {
        id: "026-devcontainers-templates-docker-outside-of-docker-compose",
        images: &[],
        expect: Expect::Fails("docker.sock"),
        why: "it binds the engine socket (a permission request), and its Dockerfile is not in the corpus",
    },
    Case {
        id: "028-devcontainers-templates-postgres",
        images: &[],
        expect: Expect::Fails("docker-compose.yml"),
        why: "the corpus left its Compose file out",
    },
    Case {
        id: "031-microsoft-vscode-dev-containers-docker-from-docker-compose",
        images: &[],
        expect: Expect::Fails("docker-compose.yml"),
        why: "the corpus left its Compose file out",
    },
    Case {
        id: "037-apache-airflow",
        images: &[],
        expect: Expect::Fails("devcontainer.yml"),
        why: "the corpus left its Compose files out",
    },
    Case {
        id: "047-anthropics-claude-code",
        images: &[],
        expect: Expect::Fails("cap_add"),
        why: "the primary service adds NET_ADMIN and NET_RAW (permission requests), and its Dockerfile is not in the corpus",
    },
    Case {
        id: "059-electron-electron",
        images: &[],
        expect: Expect::Fails("docker-compose.yml"),
        why: "the corpus left its Compose file out",
    },
    Case {
        id: "062-TryGhost-Ghost-codespaces",
        images: &[],
        expect: Expect::Fails("base.compose.yml"),
        why: "the corpus left its Compose files out",
    },
    Case {
        id: "068-kunikada-hateblog-backend",
        images: &[],
        expect: Expect::Fails("compose.yaml"),
        why: "the corpus left its Compose files out",
    },
    Case {
        id: "070-immich-app-immich",
        images: &[],
        expect: Expect::Fails("docker-compose.yml"),
        why: "the corpus left its Compose file out",
    },
    Case {
        id: "076-LCAS-ros2_pkg_template-gpu",
        images: &[],
        expect: Expect::Fails("compose.yaml"),
        why: "the corpus left its Compose files out",
    },
    Case {
        id: "079-mastodon-mastodon",
        images: &[],
        expect: Expect::Fails("(from Compose service `app` (`volumes`)), never allowed"),
        why: "the app binds `../..`, the folder above the repository's parent (here the one holding the home folder; never allowed), and `otelcol` publishes ports on every host address; its Dockerfiles and `../observability` are not in the corpus, and it needs a public Feature",
    },
    Case {
        id: "082-nextcloud-server",
        images: &[],
        expect: Expect::Fails("docker.sock"),
        why: "it binds the engine socket and host folders outside the workspace (permission requests), and its Dockerfile is not in the corpus",
    },
    Case {
        id: "083-Caltech-AMBER-obelisk-gpu",
        images: &[],
        expect: Expect::Fails("docker-compose.yml"),
        why: "the corpus left its Compose file out",
    },
    Case {
        id: "085-paperless-ngx-paperless-ngx",
        images: &[],
        expect: Expect::Fails("docker-compose.devcontainer.sqlite-tika.yml"),
        why: "the corpus left its Compose file out",
    },
];

fn corpus() -> PathBuf {
    std::env::var_os("DEVCELL_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"))
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn docker_ok(args: &[&str]) -> bool {
    Command::new("docker")
        .args(args)
        .bounded_output()
        .is_ok_and(|o| o.status.success())
}

/// The case's devcontainer.json (`config` of case.json, else `.devcontainer/devcontainer.json`).
fn config_of(case_dir: &Path) -> Option<String> {
    let case: Value =
        serde_json::from_str(&std::fs::read_to_string(case_dir.join("case.json")).ok()?).ok()?;
    case["config"].as_str().map(String::from)
}

#[test]
#[ignore = "reads ../shared/corpus; run with --ignored"]
// the case-by-case report is what this ignored test is run for
#[allow(clippy::print_stderr)]
fn compose_corpus() {
    let corpus = corpus();
    if !corpus.join("INDEX.md").is_file() {
        eprintln!("compose_corpus: no corpus at {}", corpus.display());
        return;
    }
    let Some(guard) = TestContext::busybox("compose_corpus") else {
        return;
    };
    // The images tagged here, removed at the end (only those this test created).
    let tagged = guard.cleanup();
    let settings = guard.tmp().join("settings.toml");
    std::fs::write(
        &settings,
        "[registries]\nmirrors = { \"ghcr.io\" = \"127.0.0.1:1\", \"mcr.microsoft.com\" = \"127.0.0.1:1\" }\n",
    )
    .unwrap();
    let settings = settings.to_string_lossy().into_owned();

    let mut report = Vec::new();
    let mut wrong = Vec::new();
    for case in CASES {
        let case_dir = corpus.join(case.id);
        assert!(case_dir.is_dir(), "{} is not in the corpus", case.id);
        for image in case.images {
            if !docker_ok(&["image", "inspect", image]) {
                assert!(docker_ok(&["tag", BUSYBOX_IMAGE, image]), "tag {image}");
                tagged.image(image);
            }
        }
        let ctx = TestContext::new("compose-corpus").isolated();
        copy_tree(&case_dir.join("ws"), ctx.path());
        let config = config_of(&case_dir);
        let config_file = ctx.path().join(
            config
                .as_deref()
                .unwrap_or(".devcontainer/devcontainer.json"),
        );
        // The project the reference rule names (no corpus file declares `name:`), removed on drop.
        let first = read_first_compose_file(&config_file);
        let project = project_name(&ProjectNameInputs {
            env: None,
            workspace_dot_env: None,
            model_name: None,
            workspace_folder: ctx.path(),
            first_file: first.as_deref(),
        });
        ctx.clean_label(&format!("com.docker.compose.project={project}"));
        ctx.remove_images_matching(&format!(
            "vsc-{}-*",
            ctx.path().file_name().unwrap().to_string_lossy()
        ));
        let mut args = vec!["--config-file", settings.as_str()];
        let config_arg = config_file.to_string_lossy().into_owned();
        if config.is_some() {
            args.extend(["--config", config_arg.as_str()]);
        }
        let run = ctx.run("up", &args);
        let outcome = match serde_json::from_str::<Value>(run.stdout.lines().last().unwrap_or("")) {
            Ok(v) if v["outcome"] == "success" => Ok(v),
            _ => Err(format!("{}\n{}", run.stdout, run.stderr)),
        };
        let project_containers = || {
            docker_lines(&[
                "ps",
                "-aq",
                "--filter",
                &format!("label=com.docker.compose.project={project}"),
            ])
        };
        let got = match &outcome {
            Ok(result) => {
                let id = result["containerId"].as_str().unwrap_or_default();
                let running = docker_lines(&["inspect", "--format", "{{.State.Running}}", id]);
                let down = ctx.run("down", &["--remove"]);
                let left = project_containers();
                if running != ["true"] || down.code != Some(0) || !left.is_empty() {
                    Err(format!(
                        "up succeeded but the container ran {running:?}, down said {} / {}, left {left:?}",
                        down.stdout, down.stderr
                    ))
                } else {
                    Ok(())
                }
            }
            Err(text) => Err(text.clone()),
        };
        let line = match (&got, case.expect) {
            (Ok(()), Expect::Up) => format!("{}: up ({})", case.id, case.why),
            (Err(text), Expect::Fails(needle))
                if text.contains(needle) && project_containers().is_empty() =>
            {
                format!("{}: not up: {}", case.id, case.why)
            }
            (got, expect) => {
                wrong.push(format!("{}: expected {expect:?}, got {got:?}", case.id));
                format!("{}: UNEXPECTED", case.id)
            }
        };
        report.push(line);
    }
    let up = CASES.iter().filter(|c| c.expect == Expect::Up).count();
    eprintln!(
        "compose corpus: {up} of {} up\n{}",
        CASES.len(),
        report.join("\n")
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// The first entry of `dockerComposeFile`, resolved against the config's folder.
fn read_first_compose_file(config_file: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config_file).ok()?;
    let doc = devcell::config::jsonc::parse(config_file, &text).ok()?;
    let first = match &doc.value["dockerComposeFile"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.first()?.as_str()?.to_string(),
        _ => return None,
    };
    Some(config_file.parent()?.join(first))
}
