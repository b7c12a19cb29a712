//! Class 1 (spec-note 0400): host paths the repository names are judged on what they resolve
//! to (symbolic links committed with git, `..`), and the resolved path is what is used; class
//! 8's `.devcell/` writes never go through a link. Each test asserts on the host (the
//! [`HostTarget`] tree and marker, the containers and images of the workspace), not only the
//! message.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::context::TestContext;
use crate::support::docker::{BUSYBOX_IMAGE, containers_of, engine_ready};
use crate::support::hostile::{HostTarget, HostileRepo};
use crate::support::{self, git};

fn devcell(args: &[&str]) -> Output {
    support::devcell()
        .args(args)
        .output()
        .expect("devcell runs")
}

fn up(repo: &HostileRepo, extra: &[&str]) -> Output {
    let ws = repo.path().to_str().unwrap();
    let mut args = vec!["up", "--workspace-folder", ws];
    args.extend_from_slice(extra);
    devcell(&args)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The `Source` of the container's mount at `target`.
fn mount_source(id: &str, target: &str) -> String {
    let out = Command::new("docker")
        .args([
            "inspect",
            "--format",
            &format!("{{{{range .Mounts}}}}{{{{if eq .Destination \"{target}\"}}}}{{{{.Source}}}}{{{{end}}}}{{{{end}}}}"),
            id,
        ])
        .bounded_output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An image config binding `source` (as written) at `/host`.
fn bind_config(source: &str) -> String {
    format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "mounts": ["type=bind,source={source},target=/host"]}}"#
    )
}

/// `up` refused: failed, nothing created for the workspace, the host folder untouched, its
/// secret not in the output. Returns the output text.
fn assert_refused(repo: &HostileRepo, target: &HostTarget, out: &Output) -> String {
    let t = text(out);
    assert!(!out.status.success(), "expected a refusal: {t}");
    assert!(
        containers_of(repo.path()).is_empty(),
        "a container was created: {t}"
    );
    assert!(
        !t.contains(HostTarget::SECRET),
        "the host secret was echoed: {t}"
    );
    target.assert_untouched();
    t
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p).unwrap().display().to_string()
}

#[test]
fn a_bind_through_a_link_to_root_is_forbidden() {
    let Some(repo) = HostileRepo::busybox("a_bind_through_a_link_to_root_is_forbidden") else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink("escape", "/")
        .config(&bind_config("${localWorkspaceFolder}/escape"))
        .commit();
    let t = assert_refused(&repo, &target, &up(&repo, &["--allow", "mount:/"]));
    assert!(t.contains("engine socket"), "judged as `/`: {t}");
}

#[test]
fn a_bind_through_a_link_to_the_engine_sockets_folder_is_forbidden() {
    let Some(repo) =
        HostileRepo::busybox("a_bind_through_a_link_to_the_engine_sockets_folder_is_forbidden")
    else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink("sock", "/var/run")
        .config(&bind_config("${localWorkspaceFolder}/sock"))
        .commit();
    let t = assert_refused(&repo, &target, &up(&repo, &[]));
    assert!(
        t.contains("engine socket") && t.contains("never allowed"),
        "{t}"
    );
}

#[test]
fn a_bind_through_a_link_to_the_home_folder_is_a_request() {
    let Some(repo) = HostileRepo::busybox("a_bind_through_a_link_to_the_home_folder_is_a_request")
    else {
        return;
    };
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().to_path_buf();
    let target = HostTarget::new();
    repo.symlink("home", &home)
        .config(&bind_config("${localWorkspaceFolder}/home"))
        .commit();
    let out = support::devcell()
        .env("HOME", &home)
        .args(["up", "--workspace-folder", repo.path().to_str().unwrap()])
        .output()
        .unwrap();
    let t = assert_refused(&repo, &target, &out);
    assert!(
        t.contains(&format!("--allow mount:{}", canonical(&home))),
        "the request names the home folder, not the link: {t}"
    );
}

#[test]
fn nested_and_relative_links_are_judged_where_they_end() {
    let Some(repo) = HostileRepo::busybox("nested_and_relative_links_are_judged_where_they_end")
    else {
        return;
    };
    let target = HostTarget::new();
    let name = target.path().file_name().unwrap().to_str().unwrap();
    // a → b/c → ../<target> (relative, via the repository's parent folder)
    repo.symlink("a", "b/c")
        .symlink("b/c", format!("../../{name}"))
        .config(&bind_config("${localWorkspaceFolder}/a"))
        .commit();
    let t = assert_refused(&repo, &target, &up(&repo, &[]));
    assert!(
        t.contains(&format!("--allow mount:{}", canonical(target.path()))),
        "{t}"
    );
    // `..` in the text itself
    let repo2 = HostileRepo::new();
    repo2
        .config(&bind_config(&format!(
            "${{localWorkspaceFolder}}/sub/../../{name}"
        )))
        .commit();
    let t = assert_refused(&repo2, &target, &up(&repo2, &[]));
    assert!(t.contains(&canonical(target.path())), "{t}");
}

#[test]
fn the_grant_mounts_exactly_the_resolved_path() {
    let Some(repo) = HostileRepo::busybox("the_grant_mounts_exactly_the_resolved_path") else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink("data", target.path())
        .config(&bind_config("${localWorkspaceFolder}/data"))
        .commit();
    let resolved = canonical(target.path());
    let out = up(&repo, &["--allow", &format!("mount:{resolved}")]);
    assert!(out.status.success(), "{}", text(&out));
    let result = support::stdout_json(&out);
    let id = result["containerId"].as_str().unwrap();
    assert_eq!(
        mount_source(id, "/host"),
        resolved,
        "the engine mounts the judged path, not the link"
    );
    let perms = result["devcell"]["permissions"].as_array().unwrap();
    assert!(
        perms
            .iter()
            .any(|p| p["value"] == resolved.as_str() && p["status"] == "granted"),
        "{perms:?}"
    );
    // the link swapped after `up`: the container still has what was judged
    std::fs::remove_file(repo.path().join("data")).unwrap();
    std::os::unix::fs::symlink("/", repo.path().join("data")).unwrap();
    assert_eq!(mount_source(id, "/host"), resolved);
    target.assert_untouched();
}

#[test]
fn a_workspace_mount_through_a_link_is_judged_where_it_points() {
    let Some(repo) =
        HostileRepo::busybox("a_workspace_mount_through_a_link_is_judged_where_it_points")
    else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink("ws", target.path())
        .config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
                "workspaceMount": "type=bind,source=${{localWorkspaceFolder}}/ws,target=/workspaces/x",
                "workspaceFolder": "/workspaces/x"}}"#
        ))
        .commit();
    let t = assert_refused(&repo, &target, &up(&repo, &[]));
    assert!(t.contains(&canonical(target.path())), "{t}");
}

#[test]
fn a_devcontainer_json_that_is_a_link_to_a_host_file_is_not_read() {
    let Some(repo) =
        HostileRepo::busybox("a_devcontainer_json_that_is_a_link_to_a_host_file_is_not_read")
    else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink(
        ".devcontainer/devcontainer.json",
        target.path().join("secret.txt"),
    )
    .commit();
    let t = assert_refused(&repo, &target, &up(&repo, &[]));
    assert!(
        t.contains("devcontainer.json") && t.contains("resolves to"),
        "{t}"
    );
    // read-configuration under reference reads it as written (the reference CLI's behaviour)
    let ws = repo.path().to_str().unwrap();
    let out = devcell(&[
        "up",
        "--workspace-folder",
        ws,
        "--security-profile",
        "reference",
    ]);
    assert!(
        !text(&out).contains("resolves to"),
        "reference does not judge it: {}",
        text(&out)
    );
}

#[test]
fn a_devcontainer_folder_that_is_a_link_out_is_refused() {
    let Some(repo) = HostileRepo::busybox("a_devcontainer_folder_that_is_a_link_out_is_refused")
    else {
        return;
    };
    let target = HostTarget::new();
    // the attacker's folder outside the repository, with a harmless config
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("devcontainer.json"),
        format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
    )
    .unwrap();
    repo.symlink(".devcontainer", outside.path()).commit();
    let t = assert_refused(&repo, &target, &up(&repo, &[]));
    assert!(t.contains(&canonical(outside.path())), "{t}");
}

#[test]
fn a_dockerfile_that_is_a_host_file_is_neither_read_nor_echoed() {
    if !engine_ready(
        "a_dockerfile_that_is_a_host_file_is_neither_read_nor_echoed",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    let name = target.path().file_name().unwrap().to_str().unwrap();
    for (how, dockerfile) in [
        ("link", "Dockerfile".to_string()),
        ("dots", format!("../../{name}/secret.txt")),
    ] {
        let repo = HostileRepo::new();
        if how == "link" {
            repo.symlink(".devcontainer/Dockerfile", target.path().join("secret.txt"));
        }
        repo.config(&format!(
            r#"{{"build": {{"dockerfile": "{dockerfile}"}}, "remoteUser": "nobody"}}"#
        ))
        .commit();
        let t = assert_refused(&repo, &target, &up(&repo, &[]));
        assert!(t.contains("build.dockerfile"), "{how}: {t}");
        assert!(
            !t.contains("building"),
            "{how}: nothing is sent to the engine: {t}"
        );
    }
}

#[test]
fn a_build_context_outside_the_workspace_is_not_packed() {
    if !engine_ready(
        "a_build_context_outside_the_workspace_is_not_packed",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    for context in ["../..", "${localEnv:HOME}", "ctx"] {
        let repo = HostileRepo::new();
        repo.file(
            ".devcontainer/Dockerfile",
            &format!("FROM {BUSYBOX_IMAGE}\nCOPY . /ctx\n"),
        )
        .symlink(".devcontainer/ctx", target.path())
        .config(&format!(
            r#"{{"build": {{"dockerfile": "Dockerfile", "context": "{context}"}}, "remoteUser": "nobody"}}"#
        ))
        .commit();
        let t = assert_refused(&repo, &target, &up(&repo, &[]));
        assert!(t.contains("build.context"), "{context}: {t}");
        assert!(!t.contains("building"), "{context}: nothing packed: {t}");
    }
}

#[test]
fn a_local_feature_folder_that_is_a_link_out_is_refused() {
    let Some(repo) = HostileRepo::busybox("a_local_feature_folder_that_is_a_link_out_is_refused")
    else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink(".devcontainer/feature", target.path())
        .config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "features": {{"./feature": {{}}}}}}"#
        ))
        .commit();
    let t = assert_refused(&repo, &target, &up(&repo, &[]));
    assert!(t.contains("outside"), "{t}");
}

#[test]
fn the_reference_profile_keeps_the_bind_as_written_and_the_audit_scores_what_it_resolves_to() {
    let Some(repo) = HostileRepo::busybox(
        "the_reference_profile_keeps_the_bind_as_written_and_the_audit_scores_what_it_resolves_to",
    ) else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink("data", target.path())
        .config(&bind_config("${localWorkspaceFolder}/data"))
        .commit();
    let out = up(&repo, &["--security-profile", "reference"]);
    assert!(out.status.success(), "{}", text(&out));
    let id = support::stdout_json(&out)["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    let written = repo.path().join("data").display().to_string();
    assert_eq!(mount_source(&id, "/host"), written, "reference: as written");
    let ws = repo.path().to_str().unwrap();
    let audit = devcell(&["audit", "--workspace-folder", ws, "--format", "json"]);
    let t = text(&audit);
    let resolved = canonical(target.path());
    assert!(
        t.contains(&format!("bind {resolved} -> /host")),
        "the audit scores the link's target: {t}"
    );
    assert!(
        !t.contains(&format!("bind {written} -> /host")),
        "not the link as the workspace: {t}"
    );
    // a hardened `up` does not reuse it as if the bind were the workspace
    let again = up(&repo, &[]);
    assert!(!again.status.success(), "{}", text(&again));
    assert!(text(&again).contains(&resolved), "{}", text(&again));
    target.assert_untouched();
}

/// A handoff environment: an agent config running `true`.
struct Agent {
    dir: tempfile::TempDir,
}

impl Agent {
    fn new() -> Agent {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            "[agents.a]\ncommand = [\"true\"]\n",
        )
        .unwrap();
        Agent { dir }
    }

    fn handoff(&self, ws: &Path, extra: &[&str]) -> Output {
        let config = self.dir.path().join("config.toml");
        let state = self.dir.path().join("state");
        let mut cmd = support::devcell();
        cmd.env("DEVCELL_STATE_DIR", &state).args([
            "handoff",
            "--workspace-folder",
            ws.to_str().unwrap(),
            "--agent",
            "a",
            "--config-file",
            config.to_str().unwrap(),
        ]);
        cmd.args(extra);
        cmd.output().expect("devcell runs")
    }
}

#[test]
fn a_devcell_folder_that_is_a_link_to_a_host_folder_is_never_written_through() {
    let Some(repo) = HostileRepo::busybox(
        "a_devcell_folder_that_is_a_link_to_a_host_folder_is_never_written_through",
    ) else {
        return;
    };
    let target = HostTarget::new();
    repo.symlink(".devcell", target.path())
        .config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#
        ))
        .commit();
    let out = Agent::new().handoff(repo.path(), &[]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("symbolic link"), "{t}");
    target.assert_untouched();
    assert!(!target.path().join("context.json").exists());
}

#[test]
fn an_agents_md_that_is_a_link_to_a_host_folder_is_not_written_through() {
    let Some(ws) =
        TestContext::busybox("an_agents_md_that_is_a_link_to_a_host_folder_is_not_written_through")
    else {
        return;
    };
    let target = HostTarget::new();
    // a workspace of one repository folder: the root gets AGENTS.md
    let api = ws.path().join("api");
    std::fs::create_dir(&api).unwrap();
    git::git(&api, &["init", "-q"]);
    std::fs::create_dir(api.join(".devcontainer")).unwrap();
    std::fs::write(
        api.join(".devcontainer/devcontainer.json"),
        format!(r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#),
    )
    .unwrap();
    git::git(&api, &["add", "-A"]);
    git::git(&api, &["commit", "-q", "-m", "attacker"]);
    std::os::unix::fs::symlink(target.path(), ws.path().join("AGENTS.md")).unwrap();
    git::give_to_workspace_owner(ws.path());
    let root = std::fs::canonicalize(ws.path()).unwrap();
    ws.clean_label(&format!("devcontainer.local_folder={}", root.display()));
    let out = Agent::new().handoff(&root, &["--format", "json"]);
    let t = text(&out);
    target.assert_untouched();
    assert_eq!(std::fs::read_dir(target.path()).unwrap().count(), 1, "{t}");
    assert!(
        std::fs::symlink_metadata(root.join("AGENTS.md"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link is left as it is: {t}"
    );
}

#[test]
fn a_link_changed_between_plan_and_run_is_judged_again() {
    let Some(repo) = HostileRepo::busybox("a_link_changed_between_plan_and_run_is_judged_again")
    else {
        return;
    };
    let target = HostTarget::new();
    repo.file("inside/keep.txt", "x")
        .symlink("data", "inside")
        .config(&bind_config("${localWorkspaceFolder}/data"))
        .commit();
    let agent = Agent::new();
    let plan = agent.handoff(repo.path(), &["--plan", "--format", "json"]);
    assert!(plan.status.success(), "{}", text(&plan));
    // now the attacker (or the container) swaps the link to the host folder
    std::fs::remove_file(repo.path().join("data")).unwrap();
    std::os::unix::fs::symlink(target.path(), repo.path().join("data")).unwrap();
    let plan = agent.handoff(repo.path(), &["--plan", "--format", "json"]);
    let t = text(&plan);
    assert!(
        !plan.status.success(),
        "the plan judges the resolved link: {t}"
    );
    assert!(t.contains(&canonical(target.path())), "{t}");
    let run = agent.handoff(repo.path(), &["--format", "json"]);
    let t = assert_refused(&repo, &target, &run);
    assert!(t.contains("permission_required"), "{t}");
}

// ---- second round: the lockfile, the handoff's second load, local Features' files, every
// command's config discovery, links inside the build context (spec-note 0400) ----

/// A host folder outside every workspace holding `name` with `text` (a file an attack would
/// read), fingerprinted: [`HostFile::assert_untouched`].
struct HostFile {
    dir: tempfile::TempDir,
    name: &'static str,
    before: String,
}

impl HostFile {
    fn new(name: &'static str, text: &str) -> HostFile {
        let dir = tempfile::Builder::new()
            .prefix("devcell-host-file-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join(name), text).unwrap();
        let before = support::tree_fingerprint(dir.path());
        HostFile { dir, name, before }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join(self.name)
    }

    fn assert_untouched(&self) {
        assert_eq!(
            support::tree_fingerprint(self.dir.path()),
            self.before,
            "the host folder {} changed",
            self.dir.path().display()
        );
    }
}

/// A local Feature `f` (its `install.sh` writes `/f-installed`), unique to the call: its
/// Features image is this test's alone, so one test's cleanup never removes an image another
/// test is building or starting from (Podman's `rmi -f` also removes the containers using it).
fn local_feature(repo: &HostileRepo) -> &HostileRepo {
    repo.file(
        ".devcontainer/f/install.sh",
        &format!(
            "#!/bin/sh\n# {}\ntouch /f-installed\n",
            support::unique("feature")
        ),
    )
    .file(
        ".devcontainer/f/devcontainer-feature.json",
        r#"{"id": "f", "version": "1.0.0"}"#,
    )
}

fn feature_config() -> String {
    format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "features": {{"./f": {{}}}}}}"#
    )
}

/// Removes the container `id` and the images devcell built for it: the tagged images of the
/// chain from its image up to (not including) the shared base image; the engine removes their
/// untagged parents no other image needs. Ids are compared without their `sha256:` (Podman
/// names a container's image by bare hex), and the base image is checked after (on Podman
/// `docker rmi <id>` removes an image with one name). Untagged parents are never removed by
/// id: the build cache shares them between tests, and Podman's `rmi -f` would remove them
/// under another test's build.
fn remove_image_of(id: &str) {
    let inspect = |what: &str, format: &str| {
        let out = Command::new("docker")
            .args(["inspect", "--format", format, what])
            .bounded_output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        text.strip_prefix("sha256:")
            .map(str::to_string)
            .unwrap_or(text)
    };
    let base = inspect(BUSYBOX_IMAGE, "{{.Id}}");
    assert!(!base.is_empty(), "{BUSYBOX_IMAGE} is there");
    let mut chain = Vec::new();
    let mut image = inspect(id, "{{.Image}}");
    while !image.is_empty() && image != base && chain.len() < 32 {
        if inspect(&image, "{{len .RepoTags}}") != "0" {
            chain.push(image.clone());
        }
        image = inspect(&image, "{{.Parent}}");
    }
    let _ = Command::new("docker")
        .args(["rm", "-f", "-v", id])
        .bounded_output();
    for image in chain {
        let _ = Command::new("docker")
            .args(["rmi", "-f", &image])
            .bounded_output();
    }
    assert_eq!(
        inspect(BUSYBOX_IMAGE, "{{.Id}}"),
        base,
        "the base image stays"
    );
}

fn is_link_to(path: &Path, target: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
        && std::fs::read_link(path).is_ok_and(|t| t == target)
}

#[test]
fn a_lockfile_that_is_a_link_to_a_host_file_is_neither_read_nor_written_through() {
    let Some(repo) = HostileRepo::busybox(
        "a_lockfile_that_is_a_link_to_a_host_file_is_neither_read_nor_written_through",
    ) else {
        return;
    };
    let target = HostTarget::new();
    // a host file shaped like a lockfile, holding a secret as a key
    let host = HostFile::new(
        "lock.json",
        &format!(
            r#"{{"features": {{"{}": {{"version": "1.0.0", "resolved": "x", "integrity": "sha256:{}"}}}}}}"#,
            HostTarget::SECRET,
            "0".repeat(64)
        ),
    );
    local_feature(&repo)
        .symlink(".devcontainer/devcontainer-lock.json", host.path())
        .config(&feature_config())
        .commit();
    let lock = repo.path().join(".devcontainer/devcontainer-lock.json");
    for extra in [&["--frozen-lockfile"][..], &[]] {
        let t = assert_refused(&repo, &target, &up(&repo, extra));
        assert!(
            t.contains("devcontainer-lock.json") && t.contains("resolves to"),
            "{extra:?}: {t}"
        );
        host.assert_untouched();
        assert!(
            is_link_to(&lock, &host.path()),
            "{extra:?}: the link is left as it is"
        );
    }
    // a command without a profile (`outdated`) does not read it either
    let ws = repo.path().to_str().unwrap();
    let out = devcell(&[
        "outdated",
        "--workspace-folder",
        ws,
        "--output-format",
        "json",
    ]);
    assert!(!text(&out).contains(HostTarget::SECRET), "{}", text(&out));
    host.assert_untouched();
}

#[test]
fn a_lockfile_inside_the_workspace_is_written_through_the_workspace_handle_only() {
    let Some(repo) = HostileRepo::busybox(
        "a_lockfile_inside_the_workspace_is_written_through_the_workspace_handle_only",
    ) else {
        return;
    };
    // `.devcontainer` a link to a folder outside: `upgrade` (no profile) must neither read the
    // configuration there nor write a lockfile into it
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("devcontainer.json"),
        format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#),
    )
    .unwrap();
    let before = support::tree_fingerprint(outside.path());
    repo.symlink(".devcontainer", outside.path()).commit();
    let ws = repo.path().to_str().unwrap();
    let out = devcell(&["upgrade", "--workspace-folder", ws]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("resolves to"), "{t}");
    assert_eq!(
        support::tree_fingerprint(outside.path()),
        before,
        "nothing was written outside: {t}"
    );
    assert!(!outside.path().join("devcontainer-lock.json").exists());
    // a plain workspace: `upgrade` writes the lockfile beside the configuration, owned by the
    // workspace's owner
    let repo = HostileRepo::new();
    repo.config(&format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#))
        .commit();
    let ws = repo.path().to_str().unwrap();
    let out = devcell(&["upgrade", "--workspace-folder", ws]);
    assert!(out.status.success(), "{}", text(&out));
    let lock = repo.path().join(".devcontainer/devcontainer-lock.json");
    assert!(lock.is_file(), "{}", text(&out));
    assert_eq!(git::owner_uid(&lock), git::WORKSPACE_OWNER);
}

#[test]
fn the_handoff_attaches_the_agent_with_the_configuration_it_judged() {
    let Some(repo) =
        HostileRepo::busybox("the_handoff_attaches_the_agent_with_the_configuration_it_judged")
    else {
        return;
    };
    let target = HostTarget::new();
    let secret = target.path().join("secret.txt");
    // the container (a hook) swaps devcontainer.json for a link to a host file after `up`
    // has judged it, before the agent is attached
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
            "postCreateCommand": "ln -sf {} .devcontainer/devcontainer.json"}}"#,
        secret.display()
    ))
    .commit();
    std::fs::set_permissions(
        repo.path().join(".devcontainer"),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = Agent::new().handoff(repo.path(), &["--format", "json"]);
    let t = text(&out);
    assert!(
        is_link_to(
            &repo.path().join(".devcontainer/devcontainer.json"),
            &secret
        ),
        "the hook swapped the file: {t}"
    );
    assert!(
        !t.contains(HostTarget::SECRET),
        "the host file was read: {t}"
    );
    assert!(
        out.status.success(),
        "the agent ran with the judged configuration: {t}"
    );
    target.assert_untouched();
}

#[test]
fn a_local_feature_whose_files_link_out_packs_nothing_from_the_host() {
    if !engine_ready(
        "a_local_feature_whose_files_link_out_packs_nothing_from_the_host",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    // a host file shaped like Feature metadata: its containerEnv would reach the image
    let host = HostFile::new(
        "feature.json",
        &format!(
            r#"{{"id": "f", "version": "1.0.0", "containerEnv": {{"LEAK": "{}"}}}}"#,
            HostTarget::SECRET
        ),
    );
    type Make<'a> = &'a dyn Fn(&HostileRepo);
    let cases: [(&str, Make<'_>); 3] = [
        ("devcontainer-feature.json", &|r: &HostileRepo| {
            r.file(".devcontainer/f/install.sh", "#!/bin/sh\ntrue\n")
                .symlink(".devcontainer/f/devcontainer-feature.json", host.path());
        }),
        ("install.sh", &|r: &HostileRepo| {
            r.file(
                ".devcontainer/f/devcontainer-feature.json",
                r#"{"id": "f", "version": "1.0.0"}"#,
            )
            .symlink(
                ".devcontainer/f/install.sh",
                target.path().join("secret.txt"),
            );
        }),
        ("a sub-folder", &|r: &HostileRepo| {
            local_feature(r).symlink(".devcontainer/f/data", target.path());
        }),
    ];
    for (how, make) in cases {
        let repo = HostileRepo::new();
        make(&repo);
        repo.config(&feature_config()).commit();
        let t = assert_refused(&repo, &target, &up(&repo, &[]));
        assert!(t.contains("resolves to"), "{how}: {t}");
        assert!(!t.contains("building"), "{how}: nothing was packed: {t}");
        host.assert_untouched();
    }
    // the merged configuration `read-configuration` prints reads no linked metadata either
    let repo = HostileRepo::new();
    repo.file(".devcontainer/f/install.sh", "#!/bin/sh\ntrue\n")
        .symlink(".devcontainer/f/devcontainer-feature.json", host.path())
        .config(&feature_config())
        .commit();
    let out = support::read_configuration(repo.path(), &["--include-merged-configuration"]);
    assert!(!text(&out).contains(HostTarget::SECRET), "{}", text(&out));
    // a local Feature whose links stay inside the workspace still installs
    let repo = HostileRepo::new();
    local_feature(&repo)
        .file(".devcontainer/shared/lib.sh", "true\n")
        .symlink(".devcontainer/f/lib.sh", "../shared/lib.sh")
        .config(&feature_config())
        .commit();
    let out = up(&repo, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let id = support::stdout_json(&out)["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    let check = Command::new("docker")
        .args(["exec", &id, "test", "-e", "/f-installed"])
        .bounded_status()
        .unwrap();
    assert!(check.success(), "the Feature was installed");
    remove_image_of(&id);
}

#[test]
fn every_command_judges_the_discovered_configuration() {
    let Some(repo) = HostileRepo::busybox("every_command_judges_the_discovered_configuration")
    else {
        return;
    };
    // a host file shaped like a configuration, holding a secret
    let host = HostFile::new(
        "devcontainer.json",
        &format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "containerEnv": {{"LEAK": "{}"}}}}"#,
            HostTarget::SECRET
        ),
    );
    repo.symlink(".devcontainer/devcontainer.json", host.path())
        .commit();
    let ws = repo.path().to_str().unwrap();
    // (the command, then its arguments after `--workspace-folder`)
    let commands: [(&[&str], &[&str]); 9] = [
        (&["read-configuration"], &["--include-merged-configuration"]),
        (&["exec"], &["true"]),
        (&["down"], &[]),
        (&["outdated"], &[]),
        (&["upgrade"], &["--dry-run"]),
        (&["features", "resolve-dependencies"], &[]),
        (&["run-user-commands"], &[]),
        (&["build"], &[]),
        (&["up"], &["--security-profile", "hardened"]),
    ];
    for (command, rest) in commands {
        let mut args = command.to_vec();
        args.extend(["--workspace-folder", ws]);
        args.extend_from_slice(rest);
        let out = devcell(&args);
        let t = text(&out);
        assert!(!out.status.success(), "{command:?}: {t}");
        assert!(!t.contains(HostTarget::SECRET), "{command:?}: {t}");
        assert!(
            t.contains("devcontainer.json") && t.contains("resolves to"),
            "{command:?}: refused with the same error: {t}"
        );
        host.assert_untouched();
    }
    assert!(containers_of(repo.path()).is_empty());
    // naming the link with `--config` inside the workspace is still the repository's file
    let link = repo.path().join(".devcontainer/devcontainer.json");
    let out = support::read_configuration(repo.path(), &["--config", link.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(!text(&out).contains(HostTarget::SECRET), "{}", text(&out));
    // the user's own `--config` outside the workspace is the user's choice: read
    let out =
        support::read_configuration(repo.path(), &["--config", host.path().to_str().unwrap()]);
    let v = support::stdout_json(&out);
    assert_eq!(
        v["configuration"]["containerEnv"]["LEAK"],
        HostTarget::SECRET
    );
}

#[test]
fn links_in_the_build_context_reach_the_image_as_links() {
    let Some(repo) = HostileRepo::busybox("links_in_the_build_context_reach_the_image_as_links")
    else {
        return;
    };
    let target = HostTarget::new();
    let secret = target.path().join("secret.txt");
    // a label unique to this run first: the engine's layer cache keys a `COPY` of links by
    // their names, not their targets, and must not hand back an earlier run's layer
    repo.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BUSYBOX_IMAGE}\nLABEL devcell.test.run={}\nCOPY . /ctx\n",
            support::unique("links")
        ),
    )
    .symlink(".devcontainer/leak", &secret)
    .symlink(".devcontainer/leakdir", target.path())
    .config(r#"{"build": {"dockerfile": "Dockerfile", "context": "."}, "remoteUser": "nobody"}"#)
    .commit();
    let out = up(&repo, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let id = support::stdout_json(&out)["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    let sh = |script: &str| {
        let o = Command::new("docker")
            .args(["exec", &id, "sh", "-c", script])
            .bounded_output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert_eq!(
        sh("readlink /ctx/leak").trim(),
        secret.display().to_string()
    );
    assert_eq!(
        sh("readlink /ctx/leakdir").trim(),
        target.path().display().to_string()
    );
    let found = sh("cat /ctx/leak; ls /ctx/leakdir/; grep -rs host-secret /ctx");
    assert!(!found.contains(HostTarget::SECRET), "{found}");
    remove_image_of(&id);
    target.assert_untouched();
}

#[test]
fn a_dockerignore_that_is_a_link_out_of_the_context_is_not_read() {
    let Some(repo) =
        HostileRepo::busybox("a_dockerignore_that_is_a_link_out_of_the_context_is_not_read")
    else {
        return;
    };
    // an invalid pattern would be echoed in the error: the host file must not be read at all
    let host = HostFile::new("ignore", &format!("[{}\n", HostTarget::SECRET));
    let target = HostTarget::new();
    repo.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BUSYBOX_IMAGE}\n"),
    )
    .symlink(".devcontainer/.dockerignore", host.path())
    .config(r#"{"build": {"dockerfile": "Dockerfile", "context": "."}, "remoteUser": "nobody"}"#)
    .commit();
    let t = assert_refused(&repo, &target, &up(&repo, &[]));
    assert!(t.contains(".dockerignore"), "{t}");
    host.assert_untouched();
}

#[test]
fn a_linked_lockfile_granted_with_its_mount_is_read_and_never_written_through() {
    let Some(repo) = HostileRepo::busybox(
        "a_linked_lockfile_granted_with_its_mount_is_read_and_never_written_through",
    ) else {
        return;
    };
    // the lockfile a local-only resolution matches, kept outside the workspace
    let host = HostFile::new("lock.json", "{\"features\": {}}\n");
    local_feature(&repo)
        .symlink(".devcontainer/devcontainer-lock.json", host.path())
        .config(&feature_config())
        .commit();
    let grant = format!("mount:{}", canonical(&host.path()));
    // `--frozen-lockfile` succeeds only when the lockfile was read and matched
    let out = up(&repo, &["--frozen-lockfile", "--allow", &grant]);
    assert!(out.status.success(), "{}", text(&out));
    let id = support::stdout_json(&out)["containerId"]
        .as_str()
        .unwrap()
        .to_string();
    host.assert_untouched();
    let lock = repo.path().join(".devcontainer/devcontainer-lock.json");
    assert!(is_link_to(&lock, &host.path()), "the link is left as it is");
    remove_image_of(&id);
}
