//! Hostile repositories: see `super`. Judge-then-use (attacks O3-O5): what devcell judged in
//! the workspace is what is used, even when the workspace changes between the judgement and
//! the use (a process a hook left running in the dev container, a Compose sidecar binding the
//! workspace). Each test makes the change itself, at that point, so no timing is involved, and
//! asserts nothing happened on the host.

use super::host_execution::{Host, envelope};
use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
use crate::support::hostile::{HostTarget, HostileRepo};

/// O5: a standing grant pins `scripts/init.sh` by digest; the workspace's script is swapped
/// after the judgement, before the shell opens it (here by the command's own first step, a
/// script outside the workspace devcell does not read, standing for the container that
/// writes the workspace meanwhile): what runs on the host is the judged script, from
/// devcell's copy, and the copies are gone once `up` ends.
#[test]
fn a_granted_initialize_command_runs_the_judged_script_not_one_swapped_in() {
    const NAME: &str = "a_granted_initialize_command_runs_the_judged_script_not_one_swapped_in";
    if !engine_ready(NAME, BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let marker = target.marker();
    let repo = HostileRepo::new();
    // a swap written in the workspace would itself be judged (it writes what the command runs:
    // attack 25, P4), so it stands outside, where devcell trusts it by its owner
    let swap = outside_script("cp .x/B scripts/init.sh\n");
    repo.file("scripts/init.sh", "echo judged-init\n")
        .file(
            ".x/B",
            &format!("touch {}\necho swapped-init\n", marker.display()),
        )
        .config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "initializeCommand": "sh {} && sh ./scripts/init.sh"}}"#,
            swap.path().join("swap.sh").display()
        ))
        .commit();

    // the grant the refusal names covers both scripts by digest
    let asking = Host::new(&["true"], &[]);
    let plan = asking.handoff(repo.path(), &["--plan"], &[]);
    let p = envelope(&plan);
    let requests = p["error"]["details"]["permissions"].as_array().unwrap();
    let grant = requests
        .iter()
        .find(|r| r["permission"] == "hostCommand")
        .and_then(|r| r["grant"].as_str())
        .unwrap_or_else(|| panic!("{p}"))
        .trim_start_matches("--allow ")
        .to_string();
    assert!(grant.starts_with("host-command:sha256:"), "{grant}");

    let host = Host::new(&["true"], &[grant.as_str()]);
    let up = host.up(repo.path(), &[], &[]);
    let stderr = String::from_utf8_lossy(&up.stderr);
    assert_eq!(up.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("judged-init"), "{stderr}");
    assert!(!stderr.contains("swapped-init"), "{stderr}");
    assert!(!marker.exists(), "the swapped script ran on the host");
    target.assert_untouched();
    // the swap did happen in the workspace: only the judged copy ran
    let now = std::fs::read_to_string(repo.path().join("scripts/init.sh")).unwrap();
    assert!(now.contains("swapped-init"), "{now}");
    let copies = host.state().join("host-commands");
    let left: Vec<_> = std::fs::read_dir(&copies)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "copies left behind: {left:?}");
}

/// A folder outside the workspace holding `swap.sh` with `body`: a script devcell runs
/// without reading (its owner is the user, its folders no one else's to write).
fn outside_script(body: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("devcell-swap-")
        .tempdir()
        .unwrap();
    std::fs::write(dir.path().join("swap.sh"), body).unwrap();
    dir
}

/// Attack 25, P1: the copy of a granted script runs, but its own words open the workspace's
/// files: a helper it runs by name, swapped after the judgement (here by the command's first
/// step, outside the workspace, standing for the running container), ran on the host. Such a
/// script is now a one-run grant: the grant the refusal names, kept in the user's config,
/// runs nothing, and nothing of the swapped text runs on the host.
#[test]
fn a_granted_scripts_helper_swapped_after_the_judgement_never_runs() {
    const NAME: &str = "a_granted_scripts_helper_swapped_after_the_judgement_never_runs";
    if !engine_ready(NAME, BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let marker = target.marker();
    let repo = HostileRepo::new();
    let swap = outside_script("cp .x/B scripts/helper.sh\n");
    repo.file(
        "scripts/init.sh",
        "echo judged-init\nsh scripts/helper.sh\n",
    )
    .file("scripts/helper.sh", "echo helper-ok\n")
    .file(
        ".x/B",
        &format!("touch {}\necho swapped-helper\n", marker.display()),
    )
    .config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "initializeCommand": "sh {} && sh scripts/init.sh"}}"#,
        swap.path().join("swap.sh").display()
    ))
    .commit();
    let asking = Host::new(&["true"], &[]);
    let plan = asking.handoff(repo.path(), &["--plan"], &[]);
    let p = envelope(&plan);
    let request = p["error"]["details"]["permissions"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["permission"] == "hostCommand"))
        .cloned()
        .unwrap_or_else(|| panic!("{p}"));
    let grant = request["grant"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("--allow ")
        .to_string();
    let host = Host::new(&["true"], &[grant.as_str()]);
    let up = host.up(repo.path(), &[], &[]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    assert!(
        !marker.exists(),
        "the swapped helper ran on the host: {text}"
    );
    assert!(!text.contains("swapped-helper"), "{text}");
    assert_ne!(up.status.code(), Some(0), "{text}");
    assert!(
        request["uncovered"]
            .to_string()
            .contains("runs or reads `scripts/helper.sh` from the workspace"),
        "{request}"
    );
    target.assert_untouched();
}

/// O3: `up --remove-existing-container` stops the old container before it reads anything to
/// judge, so a process a hook left running there cannot change the Dockerfile between the
/// judgement and the build. Pinned where no timing is involved: the new Dockerfile is refused
/// (a remote `ADD` asks `build_fetch`), and the old container is already stopped, where it
/// used to run on until the new one was made.
#[test]
fn remove_existing_container_stops_the_old_container_before_judging() {
    const NAME: &str = "remove_existing_container_stops_the_old_container_before_judging";
    if !engine_ready(NAME, BUSYBOX_IMAGE) {
        return;
    }
    let repo = HostileRepo::new();
    repo.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nRUN true\n"),
    )
    .config(
        r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "nobody", "updateRemoteUserUID": false}"#,
    )
    .commit();
    let host = Host::new(&["true"], &[]);
    let first = host.up(repo.path(), &[], &[]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let id = envelope(&first)["containerId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&first.stdout)))
        .to_string();
    let running = || {
        let out = std::process::Command::new("docker")
            .args(["inspect", "-f", "{{.State.Running}}", &id])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(running(), "true");
    repo.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nADD http://127.0.0.1:9/x /x\n"),
    );
    let second = host.up(repo.path(), &["--remove-existing-container"], &[]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&second.stdout),
        String::from_utf8_lossy(&second.stderr)
    );
    assert_ne!(second.status.code(), Some(0), "{said}");
    assert!(said.contains("build_fetch"), "{said}");
    assert_eq!(
        running(),
        "false",
        "the old container ran on while devcell judged"
    );
}

/// O3, the Dockerfile raced: `hardened` judges the Dockerfile, then a process writing the
/// workspace swaps it before the build packs it (here the granted `initializeCommand`'s first
/// step, outside the workspace, standing for a container a hook left running, a Compose
/// sidecar, or `devcell build` beside a running dev container). The image is built from the
/// judged Dockerfile's bytes, never the swapped one's (which the builder used to get: the
/// Dockerfile was packed by path after the judgement).
#[test]
fn the_build_uses_the_judged_dockerfile_not_one_swapped_in() {
    const NAME: &str = "the_build_uses_the_judged_dockerfile_not_one_swapped_in";
    if !engine_ready(NAME, BUSYBOX_IMAGE) {
        return;
    }
    let repo = HostileRepo::new();
    let swap = outside_script("cp .x/B .devcontainer/Dockerfile\n");
    repo.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\nLABEL org.example.judged=1\n"),
    )
    .file(
        ".x/B",
        &format!("FROM {BUSYBOX_IMAGE}\nLABEL org.example.swapped=1\n"),
    )
    .config(&format!(
        r#"{{"build": {{"dockerfile": "Dockerfile"}}, "remoteUser": "nobody", "updateRemoteUserUID": false,
                "initializeCommand": "sh {}"}}"#,
        swap.path().join("swap.sh").display()
    ))
    .commit();
    let asking = Host::new(&["true"], &[]);
    let plan = asking.handoff(repo.path(), &["--plan"], &[]);
    let p = envelope(&plan);
    let grant = p["error"]["details"]["permissions"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["permission"] == "hostCommand"))
        .and_then(|r| r["grant"].as_str())
        .unwrap_or_else(|| panic!("{p}"))
        .trim_start_matches("--allow ")
        .to_string();
    let image = BuiltImage::default();
    let host = Host::new(&["true"], &[grant.as_str()]);
    let up = host.up(repo.path(), &[], &[]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    assert_eq!(up.status.code(), Some(0), "{said}");
    let id = envelope(&up)["containerId"]
        .as_str()
        .unwrap_or_else(|| panic!("{said}"))
        .to_string();
    let docker = |args: &[&str]| {
        let out = std::process::Command::new("docker")
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    image.set(docker(&["inspect", "-f", "{{.Image}}", &id]));
    let labels = docker(&[
        "image",
        "inspect",
        "-f",
        "{{json .Config.Labels}}",
        &image.id(),
    ]);
    assert!(labels.contains("org.example.judged"), "{labels}");
    assert!(!labels.contains("org.example.swapped"), "{labels}");
    // the swap did happen in the workspace: only the judged bytes were built
    let now = std::fs::read_to_string(repo.path().join(".devcontainer/Dockerfile")).unwrap();
    assert!(now.contains("swapped"), "{now}");
    drop(host);
}

/// The image a test built, removed on drop (after the containers, which [`Host`] removes).
#[derive(Default)]
struct BuiltImage(std::cell::RefCell<String>);

impl BuiltImage {
    fn set(&self, id: String) {
        *self.0.borrow_mut() = id;
    }

    fn id(&self) -> String {
        self.0.borrow().clone()
    }
}

impl Drop for BuiltImage {
    fn drop(&mut self) {
        let id = self.id();
        if !id.is_empty() {
            let _ = std::process::Command::new("docker")
                .args(["rmi", "-f", &id])
                .output();
        }
    }
}

/// Attack 24, O4's remainder, for a single container (spec-note 0656): a running container
/// devcell does not own (started by hand, no label of devcell's) binds the workspace writable;
/// it could swap what `up` judged (a bind source, the Dockerfile) before the engine uses it,
/// and devcell cannot stop it. A hardened `up` of an `image` configuration, which only a
/// Compose `up` refused, is refused naming it, before anything is created.
#[test]
fn a_running_container_devcell_does_not_own_binding_the_workspace_refuses_a_single_container_up() {
    use crate::support::context::TestContext;
    use crate::support::engine::{assert_refused_for_writer, start_writer};
    let Some(ctx) = TestContext::busybox("single_container_foreign_writer") else {
        return;
    };
    let ctx = ctx.isolated();
    let name = format!(
        "devcell-test-foreign-single-{}",
        crate::support::run_token()
    );
    ctx.cleanup().container(&name);
    let ctx = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let ws = ctx.path().display().to_string();
    start_writer(&name, &format!("{ws}:/w"), &[]);
    let run = ctx.run("up", &[]);
    assert_refused_for_writer(&run, &name);
    assert!(
        ctx.containers().is_empty(),
        "created: {:?}",
        ctx.containers()
    );
}

/// Attack 26, Q1, as the attack ran it: the outer workspace's dev container (a hook left a
/// loop running in it) binds the folder above a nested repository and swaps the nested
/// repository's `mounts` source (`${localWorkspaceFolder}/data`) for a link to a host folder
/// between the judgement and the engine's mount. A hardened `up` of the nested repository is
/// refused naming that container, before anything is created; the same bind by a container
/// of the user's own (no dev container or Compose label) is not counted.
#[test]
fn another_workspaces_dev_container_binding_the_folder_above_refuses_a_single_container_up() {
    use crate::support::context::TestContext;
    use crate::support::engine::{assert_refused_for_writer, docker, start_writer};
    let Some(ctx) = TestContext::busybox("single_container_foreign_writer_above") else {
        return;
    };
    let token = crate::support::run_token();
    let ctx = ctx.isolated().at(&format!("inner-{token}"));
    let name = format!("devcell-test-foreign-above-single-{token}");
    ctx.cleanup().container(&name);
    std::fs::create_dir_all(ctx.path().join("data")).unwrap();
    let ctx = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "mounts": ["source=${localWorkspaceFolder}/data,target=/data,type=bind"]}"#,
    );
    let outer = std::fs::canonicalize(ctx.tmp()).unwrap();
    let bind = format!("{}:/outer", outer.display());
    let local_folder = format!("devcontainer.local_folder={}", outer.display());
    let started = |labels: &[&str]| start_writer(&name, &bind, labels);
    started(&[&local_folder]);
    let run = ctx.run("up", &[]);
    assert_refused_for_writer(&run, &name);
    assert!(
        ctx.containers().is_empty(),
        "created: {:?}",
        ctx.containers()
    );
    // a container of the user's own binding the folder above: not counted
    let (ok, out) = docker(&["rm", "-f", &name]);
    assert!(ok, "{out}");
    started(&[]);
    let run = ctx.run("up", &[]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
}

/// Attack 27, R1: the outer workspace's dev container reaches the folder above the nested
/// repository through a named volume whose driver binds it (`o=bind`, `device=<folder>`), not
/// a bind: it writes that folder all the same, so the nested repository's hardened `up` is
/// refused naming it, before anything is created.
#[test]
fn a_dev_container_writing_the_folder_above_through_a_bind_backed_volume_refuses_up() {
    use crate::support::context::TestContext;
    use crate::support::engine::{assert_refused_for_writer, docker, start_writer};
    let Some(ctx) = TestContext::busybox("single_container_foreign_writer_volume") else {
        return;
    };
    let token = crate::support::run_token();
    let ctx = ctx.isolated().at(&format!("inner-{token}"));
    let name = format!("devcell-test-foreign-volume-{token}");
    let volume = format!("devcell-test-foreign-volume-{token}");
    ctx.cleanup().container(&name);
    ctx.cleanup().volume(&volume);
    let ctx = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let outer = std::fs::canonicalize(ctx.tmp()).unwrap();
    let device = format!("device={}", outer.display());
    let (ok, out) = docker(&[
        "volume",
        "create",
        "--driver",
        "local",
        "--opt",
        "type=none",
        "--opt",
        "o=bind",
        "--opt",
        &device,
        &volume,
    ]);
    assert!(ok, "{out}");
    let local_folder = format!("devcontainer.local_folder={}", outer.display());
    start_writer(&name, &format!("{volume}:/outer"), &[&local_folder]);
    let run = ctx.run("up", &[]);
    assert_refused_for_writer(&run, &name);
    assert!(
        ctx.containers().is_empty(),
        "created: {:?}",
        ctx.containers()
    );
}

/// The identity labels a container would be found by for the workspace `ws` (the reference
/// CLI's defaults: the folder and its configuration file, as devcell resolves them).
fn identity_labels_of(ws: &std::path::Path) -> [String; 2] {
    let ws = std::fs::canonicalize(ws).unwrap();
    [
        format!("devcontainer.local_folder={}", ws.display()),
        format!(
            "devcontainer.config_file={}",
            ws.join(".devcontainer/devcontainer.json").display()
        ),
    ]
}

/// Attack 28, F1 and F3: a running container that carries this workspace's identity labels
/// but does not bind the workspace itself (the lookup passes it over, so `up` neither reuses
/// nor stops it) was skipped as "own" by the foreign-writer check, and could swap a judged bind
/// source: it binds a folder inside the workspace (F1: what a Compose primary that became a
/// single container leaves) or the folder above it (F3: another repository's sidecar whose
/// image forged the labels). Labels exempt nothing now: each hardened `up` is refused naming
/// it, before anything is created. Without the fix both `up`s succeeded with a warning.
#[test]
fn a_container_claiming_this_workspaces_labels_without_its_bind_is_a_foreign_writer() {
    use crate::support::context::TestContext;
    use crate::support::engine::{assert_refused_for_writer, docker, start_writer};
    let Some(ctx) = TestContext::busybox("foreign_writer_claiming_labels") else {
        return;
    };
    let token = crate::support::run_token();
    let ctx = ctx.isolated().at(&format!("inner-{token}"));
    let name = format!("devcell-test-foreign-claims-{token}");
    ctx.cleanup().container(&name);
    std::fs::create_dir_all(ctx.path().join("sub/data")).unwrap();
    let ctx = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "mounts": ["source=${localWorkspaceFolder}/sub/data,target=/data,type=bind"]}"#,
    );
    let [folder, config] = identity_labels_of(ctx.path());
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    let outer = std::fs::canonicalize(ctx.tmp()).unwrap();
    for bind in [
        format!("{}:/workspaces/x/sub", ws.join("sub").display()),
        format!("{}:/x", outer.display()),
    ] {
        start_writer(&name, &bind, &[&folder, &config]);
        let (_, writer) = docker(&["inspect", "-f", "{{.Id}}", &name]);
        let run = ctx.run("up", &[]);
        assert_refused_for_writer(&run, &name);
        // the writer carries the labels: only it is found
        assert_eq!(ctx.containers(), [writer.trim()], "{bind}");
        let (ok, out) = docker(&["rm", "-f", &name]);
        assert!(ok, "{out}");
    }
}

/// Attack 28, F4: a container whose identity labels come from its image (`LABEL` in a
/// Dockerfile: a hostile outer repository's Compose sidecar built with the nested workspace's
/// labels, binding that workspace) passed for the workspace's own container: `up` reused it
/// and ran the hooks there, `exec` sent it the `--secrets-file` values. Labels its image gives
/// are no claim: `up` creates the workspace's own container and says why it passed the other
/// over, and `exec` runs in the workspace's container. The impostor binds the workspace
/// read-only, so the foreign-writer check (F1) does not hide the lookup's answer. Without the
/// fix `up` answered `"container": "running"` with the impostor's id.
#[test]
fn a_container_whose_image_carries_this_workspaces_labels_is_not_reused() {
    use crate::support::context::TestContext;
    use crate::support::engine::docker;
    let Some(ctx) = TestContext::busybox("impostor_image_labels") else {
        return;
    };
    let token = crate::support::run_token();
    let ctx = ctx.isolated();
    let name = format!("devcell-test-impostor-{token}");
    let image = format!("devcell-test/impostor-{token}:1");
    ctx.cleanup().container(&name);
    ctx.cleanup().image(&image);
    let ctx = ctx.config(
        r#"{"image": "IMAGE", "remoteUser": "nobody", "workspaceFolder": "/workspaces/w",
            "workspaceMount": "source=${localWorkspaceFolder},target=/workspaces/w,type=bind"}"#,
    );
    let [folder, config] = identity_labels_of(ctx.path());
    let build = tempfile::tempdir().unwrap();
    std::fs::write(
        build.path().join("Dockerfile"),
        format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL \"{}\" \"{}\"\nRUN echo IMPOSTOR > /iam\n",
            folder.replacen('=', "\"=\"", 1),
            config.replacen('=', "\"=\"", 1),
        ),
    )
    .unwrap();
    let (ok, out) = docker(&[
        "build",
        "-q",
        "--network",
        "none",
        "-t",
        &image,
        build.path().to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    // what the hardened re-check of a reused container asks (spec-note 0270), as the attack's
    // sidecar had it
    let bind = format!("{}:/workspaces/w:ro", ws.display());
    let mut run = vec!["run", "-d", "--name", &name];
    run.extend(crate::support::engine::PASSES_THE_REUSE_RECHECK);
    run.extend([
        "-u",
        "65534",
        "-v",
        "/var/lib/devcell",
        "-v",
        &bind,
        &image,
        "sleep",
        "100000",
    ]);
    let (ok, out) = docker(&run);
    assert!(ok, "{out}");
    let impostor = out.trim().to_string();
    let result = ctx.up(&[]);
    let id = result["containerId"].as_str().unwrap();
    assert_ne!(id, impostor, "the impostor was reused: {result}");
    assert_eq!(result["devcell"]["container"], "created", "{result}");
    let warnings = result["devcell"]["warnings"].to_string();
    assert!(
        warnings.contains(&impostor[..12]) && warnings.contains("only because its image"),
        "{warnings}"
    );
    let (code, out, err) = ctx.sh("cat /iam 2>/dev/null || echo own");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "own", "exec ran in the impostor");
}

/// Attack 28, F2 (spec-note 0680): `build` read the workspace (local Features, the context)
/// with no writer check, while a running container could swap a folder of it for a link to a
/// host folder. A hardened `build` now checks what `up` checks before it reads: a running
/// container devcell does not own that binds the workspace writable refuses it, naming the
/// container, before anything is built or tagged.
#[test]
fn a_running_container_devcell_does_not_own_binding_the_workspace_refuses_a_build() {
    use crate::support::context::TestContext;
    use crate::support::engine::{assert_refused_for_writer, docker, start_writer};
    let Some(ctx) = TestContext::busybox("build_foreign_writer") else {
        return;
    };
    let ctx = ctx.isolated();
    let token = crate::support::run_token();
    let name = format!("devcell-test-foreign-build-{token}");
    let tag = format!("devcell-test/foreign-build:{token}");
    ctx.cleanup().container(&name);
    ctx.cleanup().image(&tag);
    let ctx = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let ws = ctx.path().display().to_string();
    start_writer(&name, &format!("{ws}:/w"), &[]);
    let run = ctx.run("build", &["--image-name", &tag]);
    assert_refused_for_writer(&run, &name);
    let (tagged, _) = docker(&["image", "inspect", &tag]);
    assert!(!tagged, "the image was tagged");
    // the same build once the writer is gone
    let (ok, out) = docker(&["rm", "-f", &name]);
    assert!(ok, "{out}");
    let run = ctx.run("build", &["--image-name", &tag]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
}

/// Spec-note 0663: after the start and before any hook, a single container's `up` checks that
/// the container's workspace mount is the folder it judged (device and inode, seen through the
/// container's init process); an ordinary `up` passes the check and says so.
#[test]
fn a_fresh_up_checks_the_workspace_mount_after_the_start() {
    use crate::support::context::TestContext;
    let Some(ctx) = TestContext::busybox("workspace_mount_checked") else {
        return;
    };
    let ctx = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let run = ctx.run("up", &[]);
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let judged = std::fs::canonicalize(ctx.path()).unwrap();
    assert!(
        run.stderr.contains(&format!(
            "workspace mount checked: `/workspaces/{}` is `{}`",
            judged.file_name().unwrap().to_string_lossy(),
            judged.display()
        )),
        "{}",
        run.stderr
    );
}

/// Attack 29, G2 (spec-note 0421): under the user's `--id-label` (a key outside the
/// `devcontainer.*`/`devcell.*` namespaces), a container another repository labelled with the
/// same key and value (Compose `labels:` may set any other key) and binding the workspace was
/// taken for the workspace's: `exec --secrets-file` ran in it. Such a container carries no dev
/// container label set at its creation, so it is passed over: `up --id-label` creates the
/// workspace's own container (devcell sets its labels), and `exec --id-label` runs there.
#[test]
fn a_container_with_only_the_users_id_label_is_not_the_workspaces() {
    use crate::support::context::TestContext;
    use crate::support::engine::docker;
    let Some(ctx) = TestContext::busybox("id_label_impostor") else {
        return;
    };
    let token = crate::support::run_token();
    let ctx = ctx.isolated();
    let name = format!("devcell-test-id-label-{token}");
    let label = format!("devcell-test-owner.{token}=w");
    ctx.cleanup().container(&name);
    ctx.clean_label(&label);
    let ctx = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    let (ok, out) = docker(&[
        "run",
        "-d",
        "--name",
        &name,
        "--label",
        &label,
        "-v",
        &format!("{}:/workspaces/w:ro", ws.display()),
        BUSYBOX_IMAGE,
        "sleep",
        "100000",
    ]);
    assert!(ok, "{out}");
    let impostor = out.trim().to_string();
    let exec = ctx.run("exec", &["--id-label", &label, "hostname"]);
    assert_ne!(exec.code, Some(0), "ran in the impostor: {}", exec.stdout);
    let result = ctx.up(&["--id-label", &label]);
    let id = result["containerId"].as_str().unwrap();
    assert_ne!(id, impostor, "{result}");
    let warnings = result["devcell"]["warnings"].to_string();
    assert!(warnings.contains(&impostor[..12]), "{warnings}");
    let exec = ctx.run("exec", &["--id-label", &label, "hostname"]);
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert_eq!(exec.stdout.trim(), &id[..12]);
}

/// Attack 31, M3 (spec-note 0421): another (outer) repository's dev container, made by devcell
/// with the user's label key given by its `runArgs` and a bind of the nested workspace, is not
/// found by the nested workspace's `exec --id-label`: devcell records the id labels it made a
/// container for, and that one was made for the outer workspace's. Nothing runs in it.
#[test]
fn another_workspaces_dev_container_given_the_users_id_label_is_not_found() {
    use crate::support::context::TestContext;
    use crate::support::deadline::Bounded as _;
    use crate::support::engine::docker;
    let Some(outer) = TestContext::busybox("id_label_outer") else {
        return;
    };
    let token = crate::support::run_token();
    let outer = outer.isolated();
    let label = format!("devcell-test-owner.{token}=w");
    outer.clean_label(&label);
    let config = format!(
        r#"{{"image": "IMAGE", "remoteUser": "nobody", "runArgs": ["--label", "{label}"],
            "mounts": ["source=${{localWorkspaceFolder}}/w,target=/workspaces/w,type=bind"]}}"#
    );
    outer.write(
        "w/.devcontainer/devcontainer.json",
        &format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#),
    );
    let outer = outer.config(&config);
    let impostor = outer.up(&[]);
    let impostor = impostor["containerId"].as_str().unwrap().to_string();
    let nested = outer.path().join("w");
    let exec = outer
        .command()
        .args(["exec", "--workspace-folder"])
        .arg(&nested)
        .args(["--id-label", &label, "sh", "-c", "touch /tmp/ran-here"])
        .long_output()
        .expect("devcell runs");
    assert_ne!(
        exec.status.code(),
        Some(0),
        "ran in the outer workspace's container: {}",
        String::from_utf8_lossy(&exec.stdout)
    );
    let (ran, _) = docker(&["exec", &impostor, "test", "-e", "/tmp/ran-here"]);
    assert!(!ran, "the command ran in the outer workspace's container");
    outer.run("delete", &[]).ok();
}
