//! Attacks found after issue 10's fixes (spec-note 0400): each test is a hostile repository
//! run with default flags against the real engine, asserting on what crossed from the host.
//! Spec-notes 0443 (what `exec` and `run-user-commands` re-read) and 0444 (named volumes).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::context::VolumeGuard;
use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
use crate::support::hostile::{HostTarget, HostileRepo};
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
        // `.Image` is an id: the base image is known by its id too (Podman removes an image
        // with one name by its id, so a test must never name the shared base image's id)
        let bare = |id: &str| id.trim().trim_start_matches("sha256:").to_string();
        let base = bare(&docker(&["image", "inspect", "--format", "{{.Id}}", BUSYBOX_IMAGE]).1);
        for id in self.containers() {
            let image = bare(&docker(&["inspect", "--format", "{{.Image}}", &id]).1);
            let _ = docker(&["rm", "-f", "-v", &id]);
            if !image.is_empty() && image != base {
                let _ = docker(&["rmi", &image]);
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

/// `handoff --plan --format json --workspace-folder <ws> [tail…]` (agent `a` runs `true`), the
/// secret in devcell's environment, devcell's own folders in a temporary home.
fn plan(ws: &Path, tail: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.toml");
    std::fs::write(&config, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
    support::devcell()
        .env(SECRET_VAR, SECRET)
        .env("HOME", home.path())
        .env("DEVCELL_STATE_DIR", home.path().join("state"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .args(["handoff", "--plan", "--format", "json", "--agent", "a"])
        .arg("--config-file")
        .arg(&config)
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
/// without `--allow env:NAME` / `--allow root`: both commands refuse it the same way, and run
/// nothing; the same grants on the command itself let it through, reported.
#[test]
fn a_configuration_the_container_rewrites_reaches_the_host_environment_through_exec() {
    let Some(repo) = HostileRepo::busybox(
        "a_configuration_the_container_rewrites_reaches_the_host_environment_through_exec",
    ) else {
        return;
    };
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
    let probe = ["sh", "-c", "echo \"uid=$(id -u) stolen=$STOLEN\""];
    let out = devcell("exec", repo.path(), &probe);
    let t = text(&out);
    assert!(
        !t.contains(SECRET),
        "the host variable reached the container through exec: {t}"
    );
    assert!(!t.contains("uid=0 "), "exec ran as root: {t}");
    assert!(!t.contains("uid="), "nothing ran: {t}");
    assert!(
        !out.status.success() && t.contains(&format!("--allow env:{SECRET_VAR}")),
        "refused with the grant named: {t}"
    );
    // run-user-commands re-reads it too: a hook the container adds runs as root with the
    // secret unless granted.
    let rewritten = format!(
        r#"{{"image":"{BUSYBOX_IMAGE}","remoteUser":"root","remoteEnv":{{"STOLEN":"${{localEnv:{SECRET_VAR}}}"}},"postAttachCommand":"echo \"hook uid=$(id -u) stolen=$STOLEN\" > hook.txt"}}"#
    );
    std::fs::write(
        repo.path().join(".devcontainer/devcontainer.json"),
        &rewritten,
    )
    .unwrap();
    let out = devcell("run-user-commands", repo.path(), &[]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(!repo.path().join("hook.txt").exists(), "a hook ran: {t}");
    assert!(!t.contains(SECRET), "{t}");
    // Granting the variable alone still leaves root refused.
    let env_grant = format!("env:{SECRET_VAR}");
    let out = devcell(
        "exec",
        repo.path(),
        &[&["--allow", &env_grant], &probe[..]].concat(),
    );
    let t = text(&out);
    assert!(!t.contains(SECRET) && t.contains("--allow root"), "{t}");
    // Both granted on the command: it does what was asked, and says so.
    let granted = [&["--allow", &env_grant, "--allow", "root"], &probe[..]].concat();
    let out = devcell("exec", repo.path(), &granted);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(&format!("uid=0 stolen={SECRET}")), "{t}");
    assert!(
        t.contains("granted: running as root") && t.contains("granted: host environment variable"),
        "the grants are reported: {t}"
    );
}

/// The repository's own Dockerfile labels the image with `devcontainer.metadata` whose
/// `remoteEnv` names `${localEnv:…}`. That label is the repository's: `up` refuses it as a
/// host-variable request (no container), and `exec` never substitutes it from the whole host
/// environment. Granted at `up`, it crosses, is reported and reaches `exec`.
#[test]
fn an_image_label_remote_env_reaches_the_host_environment_through_exec() {
    let Some(repo) =
        HostileRepo::busybox("an_image_label_remote_env_reaches_the_host_environment_through_exec")
    else {
        return;
    };
    repo.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL devcontainer.metadata='[{{\"remoteEnv\":{{\"STOLEN\":\"${{localEnv:{SECRET_VAR}}}\"}}}}]'\n"
        ),
    )
    .config(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody"}"#)
    .commit();
    let c = Cleanup(repo.path().to_path_buf());
    let up = devcell("up", repo.path(), &[]);
    let t = text(&up);
    assert!(
        !up.status.success(),
        "the label's host variable is a request: {t}"
    );
    assert!(t.contains(&format!("--allow env:{SECRET_VAR}")), "{t}");
    assert!(c.containers().is_empty(), "no container was created: {t}");
    let out = devcell("exec", repo.path(), &["sh", "-c", "echo stolen=$STOLEN"]);
    let t = format!("{t}{}", text(&out));
    assert!(
        !t.contains(SECRET),
        "the host variable reached the container through the image label: {t}"
    );
    // The plan judges the label of the last build as the run does: the same request.
    let p = plan(repo.path(), &[]);
    let pt = text(&p);
    assert_eq!(p.status.code(), Some(12), "{pt}");
    assert!(pt.contains(&format!("--allow env:{SECRET_VAR}")), "{pt}");
    assert!(!pt.contains(SECRET), "{pt}");
    let grant = format!("env:{SECRET_VAR}");
    let p = plan(repo.path(), &["--allow", &grant]);
    let pt = text(&p);
    assert_eq!(p.status.code(), Some(0), "{pt}");
    let planned: serde_json::Value = serde_json::from_slice(&p.stdout).unwrap();
    assert_eq!(
        planned["result"]["hostEnv"][0]["name"], SECRET_VAR,
        "{planned}"
    );
    assert!(c.containers().is_empty(), "the plan created nothing: {pt}");
    // Granted at `up`: reported with its source, and `exec` gets what `up` let cross.
    let up = devcell("up", repo.path(), &["--allow", &grant]);
    let t = text(&up);
    assert!(up.status.success(), "{t}");
    let result: serde_json::Value = t
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("a JSON result");
    let reported = result["devcell"]["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| {
            p["permission"] == "hostEnv" && p["value"] == SECRET_VAR && p["status"] == "granted"
        });
    assert!(reported, "{result}");
    assert_eq!(
        result["devcell"]["hostEnv"][0]["name"], SECRET_VAR,
        "the result names the label's host variable: {result}"
    );
    let out = devcell("exec", repo.path(), &["sh", "-c", "echo stolen=$STOLEN"]);
    assert!(
        text(&out).contains(&format!("stolen={SECRET}")),
        "{}",
        text(&out)
    );
}

/// A named volume that already exists on the engine (another project's, or one a user made
/// with the `local` driver and `o=bind,device=<host folder>`) is mounted for any repository
/// that names it in `mounts`, with no request: through a bind-backed volume the repository
/// reads and writes the host folder; through another workspace's volume, its data. Under
/// `hardened` the bind-backed one is judged as a bind of its device (a request naming the
/// resolved host folder), and nothing is created.
#[test]
fn an_existing_bind_backed_volume_reaches_a_host_folder() {
    let Some(repo) = HostileRepo::busybox("an_existing_bind_backed_volume_reaches_a_host_folder")
    else {
        return;
    };
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
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "mounts": ["source={name},target=/stolen,type=volume"],
            "postCreateCommand": "cat /stolen/secret.txt > leak.txt; touch /stolen/written"}}"#
    ))
    .commit();
    world_writable(repo.path());
    let cleanup = Cleanup(repo.path().to_path_buf());
    let _v = VolumeGuard(name);
    // The plan inspects the volume as the run does: the bind of its device is the request.
    let p = plan(repo.path(), &[]);
    let pt = text(&p);
    assert_eq!(p.status.code(), Some(12), "{pt}");
    let resolved = std::fs::canonicalize(target.path()).unwrap();
    assert!(
        pt.contains(&format!("--allow mount:{}", resolved.display())),
        "{pt}"
    );
    assert!(cleanup.containers().is_empty(), "{pt}");
    let up = devcell("up", repo.path(), &[]);
    let leaked = std::fs::read_to_string(repo.path().join("leak.txt")).unwrap_or_default();
    let created = cleanup.containers();
    drop(cleanup);
    assert!(
        !leaked.contains(crate::support::hostile::HostTarget::SECRET),
        "the host secret was read through the volume: {}",
        text(&up)
    );
    target.assert_untouched();
    let t = text(&up);
    assert!(!up.status.success(), "{t}");
    assert!(
        t.contains(&format!("--allow mount:{}", resolved.display())),
        "judged as a bind of its device: {t}"
    );
    assert!(created.is_empty(), "no container: {t}");
}

/// The `permission` entries of `up`'s JSON result (last JSON line of its output).
fn permissions(out: &Output) -> Vec<serde_json::Value> {
    let t = text(out);
    let result: serde_json::Value = t
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    result["devcell"]["permissions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The volume grants do what they ask and are reported; the named volumes devcell creates for
/// a workspace keep working for it (a second container reuses them without a request) and are
/// another workspace's foreign volume (spec-note 0444).
#[test]
fn volume_grants_work_and_devcells_own_volumes_stay_usable() {
    if !engine_ready(
        "volume_grants_work_and_devcells_own_volumes_stay_usable",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = crate::support::hostile::HostTarget::new();
    let tag = target
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    // A foreign plain volume: refused, then granted by name.
    let foreign = VolumeGuard(format!("devcell-test-foreign-{tag}"));
    assert!(docker(&["volume", "create", &foreign.0]).0);
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "mounts": ["source={},target=/shared,type=volume"]}}"#,
        foreign.0
    ))
    .commit();
    let c = Cleanup(repo.path().to_path_buf());
    let up = devcell("up", repo.path(), &[]);
    let grant = format!("volume:{}", foreign.0);
    assert!(!up.status.success(), "{}", text(&up));
    assert!(
        text(&up).contains(&format!("--allow {grant}")),
        "{}",
        text(&up)
    );
    assert!(c.containers().is_empty());
    let up = devcell("up", repo.path(), &["--allow", &grant]);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        permissions(&up).iter().any(|p| p["permission"] == "volume"
            && p["value"] == foreign.0.as_str()
            && p["status"] == "granted"),
        "{}",
        text(&up)
    );
    drop(c);

    // A bind-backed volume granted as the bind of its device: the host folder is mounted.
    let bound = VolumeGuard(format!("devcell-test-bound-{tag}"));
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
        &bound.0,
    ]);
    assert!(ok, "{out}");
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "mounts": ["source={},target=/granted,type=volume"],
            "postCreateCommand": "cat /granted/secret.txt > read.txt"}}"#,
        bound.0
    ))
    .commit();
    world_writable(repo.path());
    let c = Cleanup(repo.path().to_path_buf());
    let resolved = std::fs::canonicalize(target.path()).unwrap();
    let grant = format!("mount:{}", resolved.display());
    let up = devcell("up", repo.path(), &["--allow", &grant]);
    assert!(up.status.success(), "{}", text(&up));
    let read = std::fs::read_to_string(repo.path().join("read.txt")).unwrap_or_default();
    assert!(
        read.contains(crate::support::hostile::HostTarget::SECRET),
        "{}",
        text(&up)
    );
    assert!(
        permissions(&up)
            .iter()
            .any(|p| p["permission"] == "mount" && p["status"] == "granted"),
        "{}",
        text(&up)
    );
    drop(c);

    // devcell's own: created for the workspace, used again by its next container.
    let own = VolumeGuard(format!("devcell-test-own-{tag}"));
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "mounts": ["source={},target=/cache,type=volume"]}}"#,
        own.0
    ))
    .commit();
    let c = Cleanup(repo.path().to_path_buf());
    let up = devcell("up", repo.path(), &[]);
    assert!(up.status.success(), "{}", text(&up));
    let (_, labels) = docker(&["volume", "inspect", "--format", "{{json .Labels}}", &own.0]);
    assert!(labels.contains("devcell.volume_workspace"), "{labels}");
    let again = devcell("up", repo.path(), &["--remove-existing-container"]);
    assert!(again.status.success(), "{}", text(&again));
    // Another workspace naming it gets a request.
    let other = HostileRepo::new();
    other
        .config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "mounts": ["source={},target=/cache,type=volume"]}}"#,
            own.0
        ))
        .commit();
    let oc = Cleanup(other.path().to_path_buf());
    // (its image runs as root: that request is judged first and granted here)
    let up = devcell("up", other.path(), &["--allow", "root"]);
    assert!(!up.status.success(), "{}", text(&up));
    assert!(text(&up).contains(&format!("--allow volume:{}", own.0)));
    assert!(oc.containers().is_empty());
    drop(c);
}

/// The image id a local tag names (empty when it names none).
fn image_id(reference: &str) -> String {
    docker(&["image", "inspect", "--format", "{{.Id}}", reference])
        .1
        .trim()
        .to_string()
}

/// `build.options: ["-t", "<tag>"]` makes the engine move a tag the host already has (a base
/// image other projects name, another workspace's image) to the repository's image: every
/// configuration that names the tag then runs the repository's image, with that
/// configuration's grants. Under `hardened` each tag the repository asks for is a request
/// (`--allow image-tag:NAME`), refused before anything is built (`up`; `build` and `handoff`
/// share the judgement): the tag still names the image
/// it named, and no container is created. Granted, the tag moves and is reported.
#[test]
fn a_build_option_tag_moves_a_tag_other_workspaces_run() {
    let Some(repo) = HostileRepo::busybox("a_build_option_tag_moves_a_tag_other_workspaces_run")
    else {
        return;
    };
    let target = crate::support::hostile::HostTarget::new();
    let tag = format!(
        "devcell-test-attack-victim-{}:1",
        target
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "")
    );
    struct Tag(String);
    impl Drop for Tag {
        fn drop(&mut self) {
            let _ = docker(&["rmi", &self.0]);
        }
    }
    assert!(docker(&["tag", BUSYBOX_IMAGE, &tag]).0);
    let _t = Tag(tag.clone());
    let before = image_id(&tag);
    assert!(!before.is_empty());
    repo.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nLABEL attack={tag}\nRUN echo poisoned > /poisoned\n"),
    )
    .config(&format!(
        r#"{{"build": {{"dockerfile": "Dockerfile", "options": ["-t", "{tag}", "--tag={tag}"]}},
            "remoteUser": "nobody"}}"#
    ))
    .commit();
    let c = Cleanup(repo.path().to_path_buf());
    let up = devcell("up", repo.path(), &[]);
    let t = text(&up);
    assert!(!up.status.success(), "{t}");
    assert!(t.contains(&format!("--allow image-tag:{tag}")), "{t}");
    assert_eq!(image_id(&tag), before, "the tag moved: {t}");
    assert!(c.containers().is_empty(), "a container was created: {t}");
    // Granted: the tag moves to the repository's image, reported.
    let grant = format!("image-tag:{tag}");
    let up = devcell("up", repo.path(), &["--allow", &grant]);
    assert!(up.status.success(), "{}", text(&up));
    assert_ne!(image_id(&tag), before, "{}", text(&up));
    assert!(
        permissions(&up)
            .iter()
            .any(|p| p["permission"] == "imageTag"
                && p["value"] == tag.as_str()
                && p["status"] == "granted"),
        "{}",
        text(&up)
    );
    // The repository's image keeps only its own name, so the cleanup removes it.
    let _ = docker(&["rmi", &tag]);
}

/// The container writes `core.worktree = <the workspace's parent>` into the repository's own
/// `.git/config` (the workspace is mounted read-write; `${localWorkspaceFolder}` tells it the
/// host path). The user's next `up` asked git for the workspace's root (the default
/// `--mount-workspace-git-root`), git answered with the folder `core.worktree` names, and devcell
/// bound that folder, every sibling of the repository (the user's home) included, as the
/// workspace, read-write. The root counts now only when git finds
/// this same repository from it; otherwise the workspace folder itself is mounted.
#[test]
fn a_core_worktree_the_container_writes_widens_the_next_workspace_bind() {
    let Some(repo) =
        HostileRepo::busybox("a_core_worktree_the_container_writes_widens_the_next_workspace_bind")
    else {
        return;
    };
    // A sibling of the repository (both are in the temporary folder): the attacker's goal.
    let target = crate::support::hostile::HostTarget::new();
    let sibling = target
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "postCreateCommand": "printf '[core]\\n\\tworktree = ${{localWorkspaceFolder}}/..\\n' >> .git/config || true",
            "postStartCommand": "cat ../{sibling}/secret.txt > leak.txt 2>/dev/null; true"}}"#
    ))
    .commit();
    world_writable(repo.path());
    let c = Cleanup(repo.path().to_path_buf());
    // Under `hardened` the container can no longer write `.git` (attack M7): the grant that
    // leaves it writable makes the precondition, and the next `up` must still hold.
    let up = devcell("up", repo.path(), &["--allow", "workspace-git:rw"]);
    assert!(up.status.success(), "{}", text(&up));
    let git_config = std::fs::read_to_string(repo.path().join(".git/config")).unwrap();
    assert!(
        git_config.contains("worktree"),
        "the attack's precondition: the container wrote core.worktree: {git_config}"
    );
    // The user's next bring-up.
    let up = devcell("up", repo.path(), &["--remove-existing-container"]);
    let t = text(&up);
    assert!(up.status.success(), "{t}");
    let leaked = std::fs::read_to_string(repo.path().join("leak.txt")).unwrap_or_default();
    assert!(
        !leaked.contains(crate::support::hostile::HostTarget::SECRET),
        "a host file beside the repository was read: {t}"
    );
    let parent = repo.path().parent().unwrap().to_string_lossy().to_string();
    for id in c.containers() {
        let (_, mounts) = docker(&[
            "inspect",
            "--format",
            "{{range .Mounts}}{{.Source}}\n{{end}}",
            &id,
        ]);
        assert!(
            !mounts.lines().any(|m| m == parent),
            "the workspace's parent was mounted: {mounts}"
        );
        assert!(
            mounts.lines().any(|m| m == repo.path().to_string_lossy()),
            "the workspace itself is mounted: {mounts}"
        );
    }
    target.assert_untouched();
}

/// `devcell features package src` in a hostile repository (a Feature collection, as the user
/// packages their own): the repository commits `output/devcontainer-collection.json` and
/// `output/devcontainer-feature-<id>.tgz` as links to host files (`~/.bashrc`), and a
/// collection sub-folder linked to a host folder holding a `devcontainer-feature.json`. The
/// package command wrote through the links (the collection JSON, whose keys the repository
/// chooses, replaced `~/.bashrc`: `"$(…)"` in it runs in the user's next shell) and packed the
/// host folder's files into a `.tgz` that `features publish` pushes. Now nothing is written
/// through a link (the write fails, the host files keep their bytes), a linked output folder
/// is refused, a linked Feature folder is not packed, and a metadata file linked to a host
/// file is neither read nor echoed; the plain repository still packages.
#[test]
fn features_package_never_writes_through_or_packs_the_repositorys_links() {
    let target = HostTarget::new();
    let bashrc = target.path().join("bashrc");
    std::fs::write(&bashrc, "echo precious\n").unwrap();
    let before = support::tree_fingerprint(target.path());
    let host_feature = HostTarget::new();
    std::fs::write(
        host_feature.path().join("devcontainer-feature.json"),
        r#"{"id": "loot", "version": "1.0.0"}"#,
    )
    .unwrap();
    let repo = HostileRepo::new();
    repo.file(
        "src/hello/devcontainer-feature.json",
        &format!(
            r#"{{"id": "hello", "version": "1.0.0", "$(touch {})": 1}}"#,
            target.marker().display()
        ),
    )
    .file("src/hello/install.sh", "#!/bin/sh\necho hi\n")
    .symlink("output/devcontainer-collection.json", &bashrc)
    .symlink(
        "output/devcontainer-feature-hello.tgz",
        target.path().join("secret.txt"),
    )
    .commit();
    let package = |tail: &[&str]| {
        support::devcell()
            .current_dir(repo.path())
            .args(["features", "package", "src"])
            .args(tail)
            .output()
            .expect("devcell runs")
    };

    let out = package(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("symbolic link"), "{}", text(&out));
    assert_eq!(support::tree_fingerprint(target.path()), before);
    // had the link been written through, the user's next shell would run the repository's
    // command from the JSON's keys
    let _ = Command::new("sh")
        .arg("-c")
        .arg(". \"$0\"")
        .arg(&bashrc)
        .output();
    assert!(
        !target.marker().exists(),
        "the repository's command ran on the host"
    );

    // a linked output folder, with `--force-clean-output-folder`: nothing removed or written
    std::fs::write(
        target.path().join("devcontainer-feature-hello.tgz"),
        "host file",
    )
    .unwrap();
    let before = support::tree_fingerprint(target.path());
    std::fs::remove_dir_all(repo.path().join("output")).unwrap();
    repo.symlink("output", target.path());
    let out = package(&["--force-clean-output-folder"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(support::tree_fingerprint(target.path()), before);

    // a collection sub-folder linked to a host folder: not packed
    std::fs::remove_file(repo.path().join("output")).unwrap();
    repo.symlink("src/loot", host_feature.path());
    let out = package(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        !repo
            .path()
            .join("output/devcontainer-feature-loot.tgz")
            .exists()
    );

    // a metadata file linked to a host file: not read, not echoed
    std::fs::remove_file(repo.path().join("src/loot")).unwrap();
    std::fs::write(host_feature.path().join("passwd"), "leakedword:x:0:0\n").unwrap();
    repo.symlink(
        "src/linked/devcontainer-feature.json",
        host_feature.path().join("passwd"),
    );
    let out = package(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("leakedword"), "{}", text(&out));

    // the repository without its links packages as before
    std::fs::remove_dir_all(repo.path().join("src/linked")).unwrap();
    let out = package(&[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        repo.path()
            .join("output/devcontainer-feature-hello.tgz")
            .is_file()
    );
    assert!(
        repo.path()
            .join("output/devcontainer-collection.json")
            .is_file()
    );
    assert_eq!(support::tree_fingerprint(target.path()), before);
    assert_eq!(
        std::fs::read_to_string(host_feature.path().join("secret.txt")).unwrap(),
        HostTarget::SECRET
    );
}

/// devcell's host `git status` (run by `handoff --plan`, `handoff` and `status` on each
/// repository of the workspace) once listed the repository's configuration to neutralize the
/// filter drivers it defines, then ran `status`, which read it again: a container (the
/// workspace, `.git` included, is mounted read-write) serving `.git/config` (here an
/// `[include]` of a FIFO in `.git`; a plain rename loop wins about one run in four) without the
/// filter to the listing and with it to `status` had its `filter.evil.clean` run on the host.
/// `status` now runs on a private git directory whose `config` devcell wrote from its single
/// read (spec-note 0412). The test plays the container's side and serves the filter only to
/// the `git status` process (the container wins the race by chance; the test by looking).
#[test]
fn a_configuration_served_differently_to_the_listing_runs_a_filter_on_the_host() {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let target = HostTarget::new();
    let marker = target.marker();
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "containerUser": "nobody"}}"#
    ))
    .file(".gitattributes", "* filter=evil\n")
    .file("a.txt", "a\n")
    .commit();
    // the container's writes: an include of a FIFO it serves, and a file made stat-dirty
    let git_dir = repo.path().join(".git");
    let fifo = git_dir.join("evil.inc");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(git_dir.join("config"))
        .unwrap();
    writeln!(config, "[include]\n\tpath = evil.inc").unwrap();
    std::fs::write(repo.path().join("a.txt"), "b\n").unwrap();
    support::git::give_to_workspace_owner(repo.path());

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = {
        let (fifo, stop, marker) = (fifo.clone(), stop.clone(), marker.clone());
        std::thread::spawn(move || {
            let evil = format!(
                "[filter \"evil\"]\n\tclean = touch {}; cat\n",
                marker.display()
            );
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(mut w) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
                    return;
                };
                let status_reads = readers_of(&fifo).iter().any(|cmd| cmd.contains("status"));
                let _ = w.write_all(if status_reads { evil.as_bytes() } else { b"" });
            }
        })
    };
    let out = plan(repo.path(), &[]);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    // unblock the server's last open
    let _ = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&fifo);
    let _ = server.join();
    assert!(
        !marker.exists(),
        "the repository's filter ran on the host: {}",
        text(&out)
    );
    target.assert_untouched();
}

/// The command lines of the processes that have `fifo` open (from `/proc`).
fn readers_of(fifo: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let fds = entry.path().join("fd");
        let opened = std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == fifo));
        if opened && let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            found.push(String::from_utf8_lossy(&cmd).replace('\0', " "));
        }
    }
    found
}
