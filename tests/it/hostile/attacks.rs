//! Attacks found after issue 10's fixes (spec-note 0400): each test is a hostile repository
//! run with default flags against the real engine, asserting on what crossed from the host.
//! The ones that still get through are `#[ignore]`d with the fix they need.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
use crate::support::hostile::HostileRepo;
use crate::support::{self, engine::docker};

/// The host variable the attacker wants, set only in devcell's own environment.
const SECRET_VAR: &str = "ATTACK_CLOUD_TOKEN";
const SECRET: &str = "attack-secret-5d1e0b7a";

/// The workspace's containers (by `devcontainer.local_folder`), removed on drop, with the
/// images built for it.
struct Cleanup(PathBuf);

impl Cleanup {
    fn containers(&self) -> Vec<String> {
        let filter = format!("label=devcontainer.local_folder={}", self.0.display());
        let (_, out) = docker(&["ps", "-aq", "--no-trunc", "--filter", &filter]);
        out.split_whitespace().map(str::to_string).collect()
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for id in self.containers() {
            let image = docker(&["inspect", "--format", "{{.Image}}", &id]).1;
            let _ = docker(&["rm", "-f", "-v", &id]);
            if !image.contains(BUSYBOX_IMAGE) {
                let _ = docker(&["rmi", image.trim()]);
            }
        }
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `devcell <args…> --workspace-folder <ws> [tail…]` with the secret in devcell's environment.
fn devcell(cmd: &str, ws: &Path, tail: &[&str]) -> Output {
    support::devcell()
        .env(SECRET_VAR, SECRET)
        .arg(cmd)
        .arg("--workspace-folder")
        .arg(ws)
        .args(tail)
        .output()
        .expect("devcell runs")
}

/// Lets every user of the container write the repository (the attacker's hooks need to).
fn world_writable(ws: &Path) {
    let ok = Command::new("chmod")
        .arg("-R")
        .arg("a+rwX")
        .arg(ws)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// The container rewrites `.devcontainer/devcontainer.json` during `postCreateCommand` (it has
/// the workspace mounted read-write) to add `remoteEnv` with `${localEnv:…}` and
/// `remoteUser: root`. `up` judged the first configuration; the user's next `devcell exec`
/// (default flags) re-reads the rewritten one with the whole host environment: the host secret
/// crosses into the container, and the command runs as uid 0, both of which `up` refuses
/// without `--allow env:NAME` / `--allow root`.
#[test]
#[ignore = "reason: exec and run-user-commands load devcontainer.json with the whole host \
            environment and no security profile; fix: judge the re-read configuration as up \
            does (host variables and remoteUser against what up granted, recorded on the \
            container), see the attack report"]
fn a_configuration_the_container_rewrites_reaches_the_host_environment_through_exec() {
    if !engine_ready(
        "a_configuration_the_container_rewrites_reaches_the_host_environment_through_exec",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let repo = HostileRepo::new();
    // `\044` is `$`: the hook's text itself carries no `${localEnv}` for `up` to judge.
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "postCreateCommand": "printf '{{\"image\":\"{BUSYBOX_IMAGE}\",\"remoteUser\":\"root\",\"remoteEnv\":{{\"STOLEN\":\"\\044{{localEnv:{SECRET_VAR}}}\"}}}}' > .devcontainer/devcontainer.json"}}"#
    ))
    .commit();
    world_writable(repo.path());
    let _c = Cleanup(repo.path().to_path_buf());
    let up = devcell("up", repo.path(), &[]);
    assert!(up.status.success(), "{}", text(&up));
    let rewritten =
        std::fs::read_to_string(repo.path().join(".devcontainer/devcontainer.json")).unwrap();
    assert!(
        rewritten.contains(&format!("${{localEnv:{SECRET_VAR}}}")),
        "the attack's precondition: the container rewrote the configuration: {rewritten}"
    );
    let out = devcell(
        "exec",
        repo.path(),
        &["sh", "-c", "echo \"uid=$(id -u) stolen=$STOLEN\""],
    );
    let t = text(&out);
    assert!(
        !t.contains(SECRET),
        "the host variable reached the container through exec: {t}"
    );
    assert!(!t.contains("uid=0 "), "exec ran as root: {t}");
}

/// The repository's own Dockerfile labels the image with `devcontainer.metadata` whose
/// `remoteEnv` names `${localEnv:…}`. `up` reports no host variable (`hostEnv: []`) and no
/// request, but `devcell exec` substitutes the label's entry with the host environment and
/// hands the value to the command.
#[test]
#[ignore = "reason: exec substitutes ${localEnv} in the image label's remoteEnv with the \
            whole host environment; fix: the label of an image built from the repository is \
            the repository's, judged like devcontainer.json (spec-note 0440), see the report"]
fn an_image_label_remote_env_reaches_the_host_environment_through_exec() {
    if !engine_ready(
        "an_image_label_remote_env_reaches_the_host_environment_through_exec",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let repo = HostileRepo::new();
    repo.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL devcontainer.metadata='[{{\"remoteEnv\":{{\"STOLEN\":\"${{localEnv:{SECRET_VAR}}}\"}}}}]'\n"
        ),
    )
    .config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#)
    .commit();
    let _c = Cleanup(repo.path().to_path_buf());
    let up = devcell("up", repo.path(), &[]);
    let t = text(&up);
    assert!(up.status.success(), "{t}");
    let out = devcell("exec", repo.path(), &["sh", "-c", "echo stolen=$STOLEN"]);
    let t = format!("{t}{}", text(&out));
    assert!(
        !t.contains(SECRET),
        "the host variable reached the container through the image label: {t}"
    );
}

/// A named volume that already exists on the engine (another project's, or one a user made
/// with the `local` driver and `o=bind,device=<host folder>`) is mounted for any repository
/// that names it in `mounts`, with no request: through a bind-backed volume the repository
/// reads and writes the host folder; through another workspace's volume, its data.
#[test]
#[ignore = "reason: the policy judges only bind sources; fix: a named volume the engine \
            already has and devcell did not create for this workspace is a request \
            (`--allow volume:<name>`), and a `local` volume with `o=bind` is judged as a bind \
            of its `device`, see the report"]
fn an_existing_bind_backed_volume_reaches_a_host_folder() {
    if !engine_ready(
        "an_existing_bind_backed_volume_reaches_a_host_folder",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = crate::support::hostile::HostTarget::new();
    let name = format!(
        "devcell-attack-{}",
        target.path().file_name().unwrap().to_string_lossy()
    );
    let device = format!("device={}", target.path().display());
    let (ok, out) = docker(&[
        "volume",
        "create",
        "--opt",
        "type=none",
        "--opt",
        "o=bind",
        "--opt",
        &device,
        &name,
    ]);
    assert!(ok, "{out}");
    struct Volume(String);
    impl Drop for Volume {
        fn drop(&mut self) {
            let _ = docker(&["volume", "rm", "-f", &self.0]);
        }
    }
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "mounts": ["source={name},target=/stolen,type=volume"],
            "postCreateCommand": "cat /stolen/secret.txt > leak.txt; touch /stolen/written"}}"#
    ))
    .commit();
    world_writable(repo.path());
    let cleanup = Cleanup(repo.path().to_path_buf());
    let _v = Volume(name);
    let up = devcell("up", repo.path(), &[]);
    let leaked = std::fs::read_to_string(repo.path().join("leak.txt")).unwrap_or_default();
    drop(cleanup);
    assert!(
        !leaked.contains(crate::support::hostile::HostTarget::SECRET),
        "the host secret was read through the volume: {}",
        text(&up)
    );
    target.assert_untouched();
}
