//! Hostile repositories: see `super`. Classes 5 (host environment flows in through variables,
//! spec-note 0440) and 6 (builds have the network a handoff denies, spec-note 0442).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::context::Cleanup;
use crate::support::{self, docker::BUSYBOX_IMAGE, engine::docker, hostile::HostileRepo};

/// The variable the repository names through `${localEnv:…}`, and the one it names through a
/// bare `runArgs -e NAME`.
const SECRET_VAR: &str = "HOSTILE_CLOUD_TOKEN";
const RUNARG_VAR: &str = "HOSTILE_RUNARG_TOKEN";

/// Every image and container labelled `hostile.test=<token>` (the Dockerfile sets the
/// label; devcell's layers inherit it), removed on drop.
struct Made {
    token: String,
    _cleanup: Cleanup,
}

impl Made {
    fn new(token: &str) -> Made {
        let cleanup = Cleanup::default();
        let label = format!("hostile.test={token}");
        cleanup.label(&label).images_labelled(&label);
        Made {
            token: token.to_string(),
            _cleanup: cleanup,
        }
    }

    fn ids(&self, kind: &str) -> Vec<String> {
        let filter = format!("label=hostile.test={}", self.token);
        let args: Vec<&str> = match kind {
            "container" => vec!["ps", "-aq", "--no-trunc", "--filter", &filter],
            _ => vec!["images", "-q", "--no-trunc", "--filter", &filter],
        };
        let (ok, out) = docker(&args);
        assert!(ok, "{out}");
        let mut ids: Vec<String> = out.split_whitespace().map(str::to_string).collect();
        ids.dedup();
        ids
    }

    /// `docker inspect` of everything made, and every image's history, as one text.
    fn everything(&self) -> String {
        let mut text = String::new();
        for id in self.ids("container").iter().chain(&self.ids("image")) {
            text.push_str(&docker(&["inspect", id]).1);
        }
        for id in self.ids("image") {
            text.push_str(&docker(&["history", "--no-trunc", &id]).1);
        }
        text
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json_line(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

/// A handoff's surroundings: the agent's settings file, the state folder and the cache.
struct HandoffEnv {
    tmp: tempfile::TempDir,
}

impl HandoffEnv {
    fn new() -> HandoffEnv {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("config.toml"),
            "[agents.a]\ncommand = [\"true\"]\n",
        )
        .unwrap();
        HandoffEnv { tmp }
    }

    fn run(&self, ws: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = support::devcell();
        cmd.env("DEVCELL_STATE_DIR", self.tmp.path().join("state"))
            .env("XDG_CACHE_HOME", self.tmp.path().join("cache"))
            .args(["handoff", "--format", "json", "--agent", "a"])
            .arg("--config-file")
            .arg(self.tmp.path().join("config.toml"))
            .arg("--workspace-folder")
            .arg(ws)
            .args(extra)
            .write_stdin("");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("devcell runs")
    }

    /// Everything devcell recorded about its sessions.
    fn state(&self) -> String {
        let mut all = String::new();
        for entry in walk(&self.tmp.path().join("state")) {
            all.push_str(&String::from_utf8_lossy(
                &std::fs::read(entry).unwrap_or_default(),
            ));
        }
        all
    }

    fn delete(&self, ws: &Path) {
        let _ = support::devcell()
            .env("DEVCELL_STATE_DIR", self.tmp.path().join("state"))
            .args(["delete", "--workspace-folder"])
            .arg(ws)
            .output();
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn up(ws: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = support::devcell();
    cmd.args(["up", "--workspace-folder"]).arg(ws).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("devcell runs")
}

/// A repository naming [`SECRET_VAR`] in `containerEnv`, `remoteEnv`, a mount, `build.args`
/// and [`RUNARG_VAR`] in `runArgs -e NAME`.
fn env_repo(token: &str) -> HostileRepo {
    let repo = HostileRepo::new();
    repo.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nARG BUILD_TOKEN=none\nLABEL hostile.test={token}\nRUN echo \"arg=$BUILD_TOKEN\" > /build-arg.txt\n"
        ),
    )
    .config(&format!(
        r#"{{
            "build": {{"dockerfile": "Dockerfile", "args": {{"BUILD_TOKEN": "${{localEnv:{SECRET_VAR}}}"}}}},
            "remoteUser": "nobody",
            "containerEnv": {{"C_TOKEN": "${{localEnv:{SECRET_VAR}}}", "C_HOME": "${{localEnv:HOME}}"}},
            "remoteEnv": {{"R_TOKEN": "${{localEnv:{SECRET_VAR}:fallback}}"}},
            "mounts": ["type=tmpfs,target=/t-${{localEnv:{SECRET_VAR}}}"],
            "runArgs": ["-e", "{RUNARG_VAR}"]
        }}"#
    ))
    .commit();
    repo
}

/// Class 5 through `up`: without `--allow env:NAME` nothing is built or created and the secret
/// is nowhere (devcell's output, any container or image, the image history); `handoff --plan`
/// names both variables; with the grants they arrive where the repository put them and are
/// reported, and the build argument is called out as persisting in the image.
#[test]
fn host_variables_named_by_the_repository_are_requests() {
    let test = "host_variables_named_by_the_repository_are_requests";
    if !support::docker::engine_ready(test, BUSYBOX_IMAGE) {
        return;
    }
    let token = support::unique("hostile-env");
    let secret = format!("cloud-secret-{token}");
    let runarg = format!("runarg-secret-{token}");
    let made = Made::new(&token);
    let repo = env_repo(&token);
    let env = [(SECRET_VAR, secret.as_str()), (RUNARG_VAR, runarg.as_str())];
    let before = repo.fingerprint();

    // without the grants: refused, listing every name with its `--allow`
    let out = up(repo.path(), &[], &env);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    for needle in [
        format!("host environment variable `{SECRET_VAR}`"),
        format!("--allow env:{SECRET_VAR}"),
        format!("--allow env:{RUNARG_VAR}"),
    ] {
        assert!(all.contains(&needle), "missing {needle}: {all}");
    }
    // `HOME` is not a secret: it crosses without a grant and is not refused
    assert!(!all.contains("--allow env:HOME"), "{all}");
    assert!(!all.contains(&secret) && !all.contains(&runarg), "{all}");
    assert_eq!(made.ids("container"), Vec::<String>::new());
    assert_eq!(made.ids("image"), Vec::<String>::new(), "nothing was built");
    assert_eq!(repo.fingerprint(), before);

    // `handoff --plan` names them (and judges as the handoff: permission_required)
    let handoff = HandoffEnv::new();
    let out = handoff.run(repo.path(), &["--plan"], &env);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(12), "{all}");
    let v = json_line(&out);
    assert_eq!(v["error"]["code"], "permission_required", "{v}");
    assert!(all.contains(&format!("--allow env:{SECRET_VAR}")), "{all}");
    assert!(all.contains(&format!("--allow env:{RUNARG_VAR}")), "{all}");
    assert!(!all.contains(&secret) && !all.contains(&runarg), "{all}");
    assert!(!handoff.state().contains(&secret));
    let granted = [
        "--allow",
        &format!("env:{SECRET_VAR}") as &str,
        "--allow",
        &format!("env:{RUNARG_VAR}"),
    ];
    let mut plan_args = granted.to_vec();
    plan_args.push("--plan");
    let out = handoff.run(repo.path(), &plan_args, &env);
    let v = json_line(&out);
    assert_eq!(v["ok"], true, "{}", text(&out));
    let names: Vec<&str> = v["result"]["hostEnv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["HOME", SECRET_VAR, RUNARG_VAR], "{v}");
    let secret_use = &v["result"]["hostEnv"][1];
    assert_eq!(secret_use["persistsInImage"], true);
    for property in [
        "build.args.BUILD_TOKEN",
        "containerEnv.C_TOKEN",
        "mounts[0]",
    ] {
        assert!(
            secret_use["properties"]
                .as_array()
                .unwrap()
                .contains(&Value::from(property)),
            "{secret_use}"
        );
    }
    assert!(!text(&out).contains(&secret));

    // with the grants: it arrives, and is reported
    let out = up(repo.path(), &granted, &env);
    let v = json_line(&out);
    assert_eq!(v["outcome"], "success", "{}", text(&out));
    let id = v["containerId"].as_str().unwrap().to_string();
    let permissions = v["devcell"]["permissions"].as_array().unwrap();
    for name in [SECRET_VAR, RUNARG_VAR] {
        assert!(
            permissions.iter().any(|p| p["permission"] == "hostEnv"
                && p["value"] == name
                && p["status"] == "granted"),
            "{name} not reported granted: {permissions:?}"
        );
    }
    assert!(permissions.iter().any(|p| p["permission"] == "hostEnv"
        && p["value"] == "HOME"
        && p["status"] == "allowedByProfile"));
    let warnings = v["devcell"]["warnings"].to_string();
    assert!(
        warnings.contains(SECRET_VAR) && warnings.contains("history"),
        "{warnings}"
    );
    let env_list = docker(&["inspect", "-f", "{{json .Config.Env}}", &id]).1;
    assert!(
        env_list.contains(&format!("C_TOKEN={secret}")),
        "{env_list}"
    );
    assert!(
        env_list.contains(&format!("{RUNARG_VAR}={runarg}")),
        "{env_list}"
    );
    assert!(env_list.contains("C_HOME=/home/tester"), "{env_list}");
    // the tmpfs as the engine reports it: Docker under `HostConfig.Mounts`, Podman 4.3 (which
    // leaves that null) under `HostConfig.Tmpfs`
    let mounts = docker(&[
        "inspect",
        "-f",
        "{{json .HostConfig.Mounts}} {{json .HostConfig.Tmpfs}}",
        &id,
    ])
    .1;
    assert!(mounts.contains(&format!("/t-{secret}")), "{mounts}");
    assert!(
        made.everything().contains(&format!("BUILD_TOKEN={secret}")),
        "the build argument is in the image history"
    );
    let exec = support::devcell()
        .args(["exec", "--workspace-folder"])
        .arg(repo.path())
        .args(["sh", "-c", "echo R=$R_TOKEN; cat /build-arg.txt"])
        .env(SECRET_VAR, &secret)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&exec.stdout);
    assert!(shown.contains(&format!("R={secret}")), "{}", text(&exec));
    assert!(shown.contains(&format!("arg={secret}")), "{}", text(&exec));
}

/// Class 5, the other spellings: `${env:NAME}` in `workspaceMount`-free properties, a Feature
/// option and `build.options --build-arg NAME` are requests too; `initializeCommand` (a host
/// command, judged as such elsewhere) is not one; under `--security-profile reference` the
/// values are substituted as the reference CLI does, and reported `allowedByProfile`.
#[test]
fn other_spellings_and_the_reference_profile() {
    let test = "other_spellings_and_the_reference_profile";
    let Some(repo) = HostileRepo::busybox(test) else {
        return;
    };
    let token = support::unique("hostile-spell");
    let secret = format!("spelled-secret-{token}");
    let made = Made::new(&token);
    repo.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nLABEL hostile.test={token}\n"),
    )
    .file(
        ".devcontainer/opt/devcontainer-feature.json",
        r#"{"id": "opt", "version": "1.0.0", "options": {"value": {"type": "string", "default": ""}}}"#,
    )
    .file(".devcontainer/opt/install.sh", "#!/bin/sh\necho \"$VALUE\" > /opt-value.txt\n")
    .config(&format!(
        r#"{{
            "build": {{"dockerfile": "Dockerfile", "options": ["--build-arg", "BARE_ARG"]}},
            "remoteUser": "nobody",
            "features": {{"./opt": {{"value": "${{env:{SECRET_VAR}}}"}}}},
            "postCreateCommand": "echo ${{localEnv:HOOK_VAR}}",
            "initializeCommand": "true ${{localEnv:INIT_ONLY}}"
        }}"#
    ))
    .commit();
    let env = [
        (SECRET_VAR, secret.as_str()),
        ("BARE_ARG", secret.as_str()),
        ("HOOK_VAR", secret.as_str()),
        ("INIT_ONLY", "x"),
    ];
    let out = up(repo.path(), &[], &env);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    for name in [SECRET_VAR, "BARE_ARG", "HOOK_VAR"] {
        assert!(
            all.contains(&format!("--allow env:{name}")),
            "{name}: {all}"
        );
    }
    // The host command is a request of its own, shown as written (never substituted), and
    // the variable it names is no separate one.
    assert!(!all.contains("env:INIT_ONLY"), "{all}");
    assert!(all.contains("'true ${localEnv:INIT_ONLY}'"), "{all}");
    assert!(!all.contains(&secret), "{all}");
    assert_eq!(made.ids("image"), Vec::<String>::new(), "nothing was built");

    // the reference profile: substituted as written, reported
    let out = up(repo.path(), &["--security-profile", "reference"], &env);
    let v = json_line(&out);
    assert_eq!(v["outcome"], "success", "{}", text(&out));
    let permissions = v["devcell"]["permissions"].as_array().unwrap();
    for name in [SECRET_VAR, "BARE_ARG", "HOOK_VAR"] {
        assert!(
            permissions.iter().any(|p| p["permission"] == "hostEnv"
                && p["value"] == name
                && p["status"] == "allowedByProfile"),
            "{name}: {permissions:?}"
        );
    }
    let id = v["containerId"].as_str().unwrap();
    let (_, value) = docker(&["exec", id, "cat", "/opt-value.txt"]);
    assert_eq!(
        value.trim(),
        secret,
        "the Feature option got the host value"
    );
}

/// The bridge gateway of the engine (the host's side of the default build network), where a
/// build with a network can reach the test's listener.
fn bridge_gateway() -> String {
    let (_, gateway) = docker(&[
        "network",
        "inspect",
        "bridge",
        "-f",
        "{{range .IPAM.Config}}{{.Gateway}}{{end}}",
    ]);
    if !gateway.trim().is_empty() {
        return gateway.trim().to_string();
    }
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", "docker0"])
        .output()
        .expect("ip runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .expect("docker0 has an address")
        .to_string()
}

/// A listener on the bridge gateway counting the connections it gets; bounded: it stops when
/// dropped (or after ten minutes), each connection read for at most a second.
pub(super) struct Listener {
    pub(super) address: String,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    pub(super) fn start() -> Listener {
        let listener = TcpListener::bind((bridge_gateway().as_str(), 0)).expect("bind gateway");
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counter, stopped) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(600);
            while !stopped.load(Ordering::SeqCst) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                        let mut buf = [0u8; 512];
                        let _ = stream.read(&mut buf);
                        let _ = stream.write_all(b"ok");
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        Listener {
            address,
            hits,
            stop,
        }
    }

    pub(super) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A repository whose Dockerfile `RUN` and local Feature's `install.sh` try the listener and
/// record whether they have a default route (`/proc/net/route`).
fn network_repo(token: &str, listener: &str) -> HostileRepo {
    let (host, port) = listener.rsplit_once(':').unwrap();
    let probe = |who: &str| {
        format!(
            "if echo {who} | nc -w 3 {host} {port}; then echo {who}=reached; else echo {who}=unreachable; fi; echo {who}-routes=$(tail -n +2 /proc/net/route | wc -l)"
        )
    };
    let repo = HostileRepo::new();
    repo.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL hostile.test={token}\nRUN ({}) > /dockerfile-probe.txt\n",
            probe("dockerfile")
        ),
    )
    .file(
        ".devcontainer/probe/devcontainer-feature.json",
        r#"{"id": "probe", "version": "1.0.0"}"#,
    )
    .file(
        ".devcontainer/probe/install.sh",
        &format!(
            "#!/bin/sh\n# {token}\n({}) > /feature-probe.txt\n",
            probe("feature")
        ),
    )
    .config(&format!(
        r#"{{
            "build": {{"dockerfile": "Dockerfile"}},
            "remoteUser": "nobody",
            "features": {{"./probe": {{}}}},
            "containerEnv": {{"PROBE_TOKEN": "${{localEnv:{SECRET_VAR}}}"}}
        }}"#
    ))
    .commit();
    repo
}

/// What the build's probes wrote, read from the image devcell made.
fn probes(made: &Made) -> String {
    let image = made
        .ids("container")
        .first()
        .map(|c| {
            docker(&["inspect", "-f", "{{.Image}}", c])
                .1
                .trim()
                .to_string()
        })
        .expect("a container was made");
    let (ok, out) = docker(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "cat",
        &image,
        "/dockerfile-probe.txt",
        "/feature-probe.txt",
    ]);
    assert!(ok, "{out}");
    out
}

/// Class 6: a handoff (network `none`) builds the Dockerfile and the Features without a
/// network: the listener on the bridge gateway sees nothing and the build has no default
/// route; `--allow build-network` gives the builds the default network back (reported); plain
/// `up` keeps the reference's default build network. Also: a handoff's envelope reports the
/// granted host variable.
#[test]
fn handoff_builds_have_no_network_unless_granted() {
    let test = "handoff_builds_have_no_network_unless_granted";
    if !support::docker::engine_ready(test, BUSYBOX_IMAGE) {
        return;
    }
    let listener = Listener::start();
    let handoff = HandoffEnv::new();
    let secret = format!("probe-secret-{}", support::unique("s"));
    let env = [(SECRET_VAR, secret.as_str())];
    let grant_env = format!("env:{SECRET_VAR}");

    // a handoff: no network for the builds
    let token = support::unique("hostile-net-none");
    let made = Made::new(&token);
    let repo = network_repo(&token, &listener.address);
    let out = handoff.run(repo.path(), &["--allow", &grant_env], &env);
    let v = json_line(&out);
    assert_eq!(v["ok"], true, "{}", text(&out));
    assert_eq!(listener.hits(), 0, "a build reached the bridge");
    let seen = probes(&made);
    assert!(seen.contains("dockerfile=unreachable"), "{seen}");
    assert!(seen.contains("feature=unreachable"), "{seen}");
    assert!(
        seen.contains("dockerfile-routes=0") && seen.contains("feature-routes=0"),
        "{seen}"
    );
    let permissions = v["result"]["permissions"].as_array().unwrap();
    assert!(
        permissions.iter().any(|p| p["permission"] == "hostEnv"
            && p["value"] == SECRET_VAR
            && p["status"] == "granted"),
        "{permissions:?}"
    );
    assert!(
        !permissions
            .iter()
            .any(|p| p["permission"] == "buildNetwork")
    );
    assert_eq!(v["result"]["plan"]["hostEnv"][0]["name"], SECRET_VAR);
    handoff.delete(repo.path());
    drop(made);

    // `--allow build-network`: the builds reach the bridge again, reported as granted
    let token = support::unique("hostile-net-granted");
    let made = Made::new(&token);
    let repo = network_repo(&token, &listener.address);
    let out = handoff.run(
        repo.path(),
        &["--allow", &grant_env, "--allow", "build-network"],
        &env,
    );
    let v = json_line(&out);
    assert_eq!(v["ok"], true, "{}", text(&out));
    let seen = probes(&made);
    assert!(seen.contains("dockerfile=reached"), "{seen}");
    assert!(seen.contains("feature=reached"), "{seen}");
    assert!(listener.hits() >= 2, "{} hits", listener.hits());
    assert!(
        v["result"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["permission"] == "buildNetwork" && p["status"] == "granted"),
        "{v}"
    );
    handoff.delete(repo.path());
    drop(made);

    // plain `up` keeps the default build network (the reference CLI's behaviour)
    let hits = listener.hits();
    let token = support::unique("hostile-net-up");
    let made = Made::new(&token);
    let repo = network_repo(&token, &listener.address);
    let out = up(repo.path(), &["--allow", &grant_env], &env);
    assert_eq!(json_line(&out)["outcome"], "success", "{}", text(&out));
    let seen = probes(&made);
    assert!(
        seen.contains("dockerfile=reached") && seen.contains("feature=reached"),
        "{seen}"
    );
    assert!(listener.hits() >= hits + 2);
}

/// Class 6: a configuration asking for a build network (`build.options --network`) in a
/// handoff is a request: refused (nothing built) without `--allow build-network`, also by
/// `handoff --plan`.
#[test]
fn a_configured_build_network_in_a_handoff_is_a_request() {
    let test = "a_configured_build_network_in_a_handoff_is_a_request";
    let Some(repo) = HostileRepo::busybox(test) else {
        return;
    };
    let token = support::unique("hostile-net-asked");
    let made = Made::new(&token);
    repo.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nLABEL hostile.test={token}\nRUN true\n"),
    )
    .config(r#"{"build": {"dockerfile": "Dockerfile", "options": ["--network=bridge"]}, "remoteUser": "nobody"}"#)
    .commit();
    let handoff = HandoffEnv::new();
    for extra in [&["--plan"][..], &[][..]] {
        let out = handoff.run(repo.path(), extra, &[]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(12), "{all}");
        assert!(all.contains("network for image builds"), "{all}");
        assert!(all.contains("--allow build-network"), "{all}");
    }
    assert_eq!(made.ids("image"), Vec::<String>::new(), "nothing was built");
    assert_eq!(made.ids("container"), Vec::<String>::new());
}

/// `devcell build` judges the host variables as `up` does: a `${localEnv:…}` in `build.args`
/// is refused before anything is built, and granted it is built (spec-note 0440).
#[test]
fn build_judges_host_variables_as_up_does() {
    let test = "build_judges_host_variables_as_up_does";
    if !support::docker::engine_ready(test, BUSYBOX_IMAGE) {
        return;
    }
    let token = support::unique("hostile-build");
    let secret = format!("cloud-secret-{token}");
    let made = Made::new(&token);
    let repo = env_repo(&token);
    let env = [(SECRET_VAR, secret.as_str()), (RUNARG_VAR, "runarg")];
    let build = |extra: &[&str]| {
        let mut cmd = support::devcell();
        cmd.args(["build", "--workspace-folder"])
            .arg(repo.path())
            .args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("devcell runs")
    };
    let out = build(&[]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains(&format!("--allow env:{SECRET_VAR}")), "{all}");
    assert!(!all.contains(&secret), "{all}");
    assert_eq!(made.ids("image"), Vec::<String>::new(), "nothing was built");

    // `runArgs -e NAME` is read by a container only: not a build's request
    assert!(!all.contains(&format!("--allow env:{RUNARG_VAR}")), "{all}");
    let grant = format!("env:{SECRET_VAR}");
    let out = build(&["--allow", &grant]);
    assert!(out.status.success(), "{}", text(&out));
    let v = json_line(&out);
    assert!(
        v["devcell"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["value"] != RUNARG_VAR),
        "{v}"
    );
    assert!(
        !made.ids("image").is_empty(),
        "the granted build made no image"
    );
}

/// Class 6 for `devcell build`, which runs no container: under `hardened` its Dockerfile `RUN`
/// steps and Features' `install.sh` get no network (the listener on the bridge gateway sees
/// nothing, no default route) unless `--allow build-network`, which gives the default network
/// back and is reported.
#[test]
fn build_has_no_network_unless_granted() {
    let test = "build_has_no_network_unless_granted";
    if !support::docker::engine_ready(test, BUSYBOX_IMAGE) {
        return;
    }
    let listener = Listener::start();
    let secret = format!("probe-secret-{}", support::unique("s"));
    let grant_env = format!("env:{SECRET_VAR}");
    let build = |repo: &HostileRepo, extra: &[&str]| {
        let out = support::devcell()
            .args(["build", "--workspace-folder"])
            .arg(repo.path())
            .args(["--allow", &grant_env])
            .args(extra)
            .env(SECRET_VAR, &secret)
            .output()
            .expect("devcell runs");
        assert!(out.status.success(), "{}", text(&out));
        json_line(&out)
    };
    let probes_of = |v: &Value| {
        let image = v["imageName"][0]
            .as_str()
            .or(v["devcell"]["imageId"].as_str())
            .unwrap_or_else(|| panic!("an image: {v}"))
            .to_string();
        let (ok, out) = docker(&[
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "cat",
            &image,
            "/dockerfile-probe.txt",
            "/feature-probe.txt",
        ]);
        assert!(ok, "{out}");
        out
    };

    let token = support::unique("hostile-build-net");
    let made = Made::new(&token);
    let repo = network_repo(&token, &listener.address);
    let v = build(&repo, &[]);
    let seen = probes_of(&v);
    assert_eq!(listener.hits(), 0, "a build reached the bridge: {seen}");
    assert!(
        seen.contains("dockerfile=unreachable") && seen.contains("feature=unreachable"),
        "{seen}"
    );
    assert!(
        seen.contains("dockerfile-routes=0") && seen.contains("feature-routes=0"),
        "{seen}"
    );
    assert!(
        !v["devcell"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["permission"] == "buildNetwork"),
        "{v}"
    );
    drop(made);

    let token = support::unique("hostile-build-net-granted");
    let made = Made::new(&token);
    let repo = network_repo(&token, &listener.address);
    let v = build(&repo, &["--allow", "build-network"]);
    let seen = probes_of(&v);
    assert!(
        seen.contains("dockerfile=reached") && seen.contains("feature=reached"),
        "{seen}"
    );
    assert!(listener.hits() >= 2, "{} hits", listener.hits());
    assert!(
        v["devcell"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["permission"] == "buildNetwork" && p["status"] == "granted"),
        "{v}"
    );
    drop(made);
}
