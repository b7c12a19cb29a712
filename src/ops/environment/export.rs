//! `devcell env export --format agent-runner` (issue 29, item 6; spec-note 0522): the
//! workspace's running container described as an agent-runner `mode: existing` execution
//! environment, so agent-runner runs its backend inside devcell's hardened container and
//! checks, each time it attaches, that the container still has the mounts it had.
//!
//! The file is agent-runner's environment definition, schema version 1: `schemaVersion`,
//! `kind: container`, `mode: existing`, `engine` (`docker` or `podman`), `container` (the
//! container's name), `cwd` (the workspace folder in the container) and `expectedMounts`
//! (`hostPath`, `containerPath`, `mode`: the container's bind mounts as the engine reports
//! them). agent-runner's definitions are strict (an unknown key is an error), so only these
//! keys are written.

use serde::Serialize;

use crate::engine::{ContainerInfo, Engine};
use crate::ops::error::{OpsError, Result};
use crate::ops::options::TargetOptions;

/// agent-runner's environment definition schema version this writes.
pub const AGENT_RUNNER_SCHEMA_VERSION: u32 = 1;

/// An agent-runner `mode: existing` environment definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunnerEnvironment {
    /// Always [`AGENT_RUNNER_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The definition's name (`--name`); agent-runner otherwise names it by its file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Always `container`.
    pub kind: &'static str,
    /// Always `existing`: agent-runner validates and uses the container, and never starts,
    /// stops or removes it (devcell keeps owning it).
    pub mode: &'static str,
    /// `docker` or `podman`.
    pub engine: &'static str,
    /// The container's name.
    pub container: String,
    /// The workspace folder in the container.
    pub cwd: String,
    /// The container's bind mounts, checked by agent-runner against the real ones.
    pub expected_mounts: Vec<ExpectedMount>,
    /// Appended to agent-runner's `docker exec`/`podman exec`: under `hardened`, `--user
    /// <uid>:<gid>`, so agent-runner's backend runs as devcell's numeric ids and gets none
    /// of the groups the image's `/etc/group` lists for a name (spec-note 0400, "the image's
    /// groups"; attack finding J3). Empty (and not written) otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_exec_args: Vec<String>,
}

/// One of [`AgentRunnerEnvironment::expected_mounts`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedMount {
    /// The host path.
    pub host_path: String,
    /// The path in the container.
    pub container_path: String,
    /// `ro` or `rw`.
    pub mode: &'static str,
}

impl AgentRunnerEnvironment {
    /// The definition as YAML (agent-runner's definition files are YAML).
    ///
    /// Errors: [`OpsError::Unsupported`] when it cannot be written (not expected).
    pub fn to_yaml(&self) -> Result<String> {
        serde_yaml::to_string(self).map_err(|e| OpsError::Unsupported {
            message: format!("cannot write the agent-runner environment: {e}"),
            hint: None,
        })
    }
}

/// The definition for `container` (its workspace folder `cwd`; `podman`: the engine is
/// Podman). Only bind mounts are expected mounts: a volume's or tmpfs's host side is the
/// engine's own, not a path agent-runner can name.
///
/// Errors: [`OpsError::Unsupported`] when a value holds `{{`: agent-runner reads `{{name}}`
/// as a variable and refuses an unknown one, and a definition cannot say the text literally.
pub fn agent_runner_environment(
    container: &ContainerInfo,
    cwd: &str,
    podman: bool,
    name: Option<&str>,
    exec_user: Option<&str>,
) -> Result<AgentRunnerEnvironment> {
    let expected_mounts = container
        .mounts
        .iter()
        .filter(|m| m.kind == "bind")
        .map(|m| ExpectedMount {
            host_path: m.source.clone(),
            container_path: m.destination.clone(),
            mode: if m.rw { "rw" } else { "ro" },
        })
        .collect();
    let environment = AgentRunnerEnvironment {
        schema_version: AGENT_RUNNER_SCHEMA_VERSION,
        name: name.map(str::to_string),
        kind: "container",
        mode: "existing",
        engine: if podman { "podman" } else { "docker" },
        container: container.name.clone(),
        cwd: cwd.to_string(),
        expected_mounts,
        extra_exec_args: exec_user
            .map(|u| vec!["--user".to_string(), u.to_string()])
            .unwrap_or_default(),
    };
    refuse_templates(&environment)?;
    Ok(environment)
}

/// Refuses a definition with `{{` in a value ([`agent_runner_environment`]).
///
/// Errors: [`OpsError::Unsupported`] naming the key and the value.
fn refuse_templates(environment: &AgentRunnerEnvironment) -> Result<()> {
    let mut values = vec![
        ("name", environment.name.as_deref().unwrap_or_default()),
        ("container", environment.container.as_str()),
        ("cwd", environment.cwd.as_str()),
    ];
    for m in &environment.expected_mounts {
        values.push(("expectedMounts[].hostPath", m.host_path.as_str()));
        values.push(("expectedMounts[].containerPath", m.container_path.as_str()));
    }
    match values.into_iter().find(|(_, v)| v.contains("{{")) {
        Some((key, value)) => Err(OpsError::Unsupported {
            message: format!(
                "cannot export to agent-runner: `{key}` is `{value}`, and agent-runner reads `{{{{…}}}}` as a variable"
            ),
            hint: Some("rename the folder or container so it holds no `{{`".into()),
        }),
        None => Ok(()),
    }
}

/// A host git directory the container `mounts` can write, by its host path: a `.git` (a
/// folder, or a worktree's or submodule's file) or a folder that is itself a git directory (a
/// bare repository, attack L3) anywhere below the source of a read-write bind
/// ([`crate::security::git_entries::find`]: `projects/a/.git` too, attack K3), or in a folder
/// above it (the bind is inside a worktree; a bind of a file inside a git directory), that no
/// other mount covers at or above the place it appears in the container (a handoff covers each
/// with the container's own git directory). A mount covers only when it shows nothing of that
/// host git entry: a read-write bind whose source holds the same entry there does not (attack
/// L7). Volume mounts are judged as binds once resolved
/// ([`crate::security::volumes::mounts_as_host_sees`]); a read-write volume devcell cannot
/// resolve ([`crate::security::volumes::UNRESOLVED_VOLUME`]) counts as one, named by its
/// `source` (attack M5). A walk cut at its bound counts as finding the bind's source. `None`
/// when there is none.
///
/// What agent-runner's agent writes there (`core.fsmonitor`, hooks, a renamed `.git`) runs
/// on the host on the user's next `git status` (issue 25, class 1; attack finding J3): a
/// container `up` made mounts them as they are, which only a handoff's container does not.
pub fn writable_host_git_dir(mounts: &[crate::engine::MountInfo]) -> Option<std::path::PathBuf> {
    use std::path::Path;
    let is_git = |p: &Path| std::fs::symlink_metadata(p.join(".git")).is_ok();
    let is_git_dir = crate::security::git_entries::is_git_directory;
    // devcell's own copies (a handoff's container git directories) are no git directory the
    // user's git reads
    let state = crate::ops::state_folder::default_root();
    if let Some(m) = mounts
        .iter()
        .find(|m| m.kind == crate::security::volumes::UNRESOLVED_VOLUME && m.rw)
    {
        return Some(std::path::PathBuf::from(&m.source));
    }
    for m in mounts.iter().filter(|m| m.kind == "bind" && m.rw) {
        let source = Path::new(&m.source);
        let own = state.as_ref().is_some_and(|s| source.starts_with(s));
        if let Some(above) = source.ancestors().skip(1).find(|a| is_git(a)) {
            return Some(above.join(".git"));
        }
        // a folder above that is itself a git directory (a bare repository, attack L2/L3)
        if let Some(above) = source.ancestors().skip(1).find(|a| !own && is_git_dir(a)) {
            return Some(above.to_path_buf());
        }
        if !source.is_dir() {
            // a file bind: a `.git` file itself is a git entry
            if source.file_name().is_some_and(|n| n == ".git") {
                return Some(source.to_path_buf());
            }
            continue;
        }
        let destination = m.destination.trim_end_matches('/');
        let found = crate::security::git_entries::find(source);
        if let Some(e) = found.entries.into_iter().find(|e| {
            if own && e.kind == crate::security::git_entries::EntryKind::GitDir {
                return false;
            }
            if e.rel == "." {
                return true;
            }
            let inside = format!("{destination}/{}", e.rel);
            !covered_by_another(mounts, destination, &inside, &e.path)
        }) {
            return Some(e.path);
        }
        if let Some(folder) = found.unlisted.first() {
            return Some(source.join(folder));
        }
        if found.truncated {
            return Some(source.to_path_buf());
        }
    }
    None
}

/// Whether a mount other than the bind at `destination`, at or above `inside` (where the host
/// git entry `entry` appears in the container) and below `destination`, hides it: one that
/// shows nothing of `entry` there (a tmpfs, a plain volume, a read-only bind, a bind of other
/// host content). A read-write bind whose source holds `entry` itself at that place shows it,
/// so it covers nothing (attack L7: a bind-backed volume of the same folder "covered" it).
fn covered_by_another(
    mounts: &[crate::engine::MountInfo],
    destination: &str,
    inside: &str,
    entry: &std::path::Path,
) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let id = |p: &std::path::Path| p.symlink_metadata().ok().map(|m| (m.dev(), m.ino()));
    let entry_id = id(entry);
    mounts.iter().any(|o| {
        let at = o.destination.trim_end_matches('/');
        let above = at.len() > destination.len() && o.holds(inside);
        if !above {
            return false;
        }
        let shows = o.kind == "bind" && o.rw && {
            let below = inside[at.len()..].trim_start_matches('/');
            let seen = std::path::Path::new(&o.source).join(below);
            entry_id.is_some() && id(&seen) == entry_id
        };
        !shows
    })
}

/// Refuses to export a container whose mounts let the agent write a host git directory
/// ([`writable_host_git_dir`]) unless the user accepts it (`allow_host_git`).
///
/// Errors: [`OpsError::Unsupported`] naming the git directory, with the way out.
fn refuse_writable_host_git(container: &ContainerInfo, allow_host_git: bool) -> Result<()> {
    match writable_host_git_dir(&container.mounts) {
        Some(git) if !allow_host_git => Err(OpsError::Unsupported {
            message: format!(
                "cannot export `{}` to agent-runner: its agent could write the host's git directory {} (a hook or `core.fsmonitor` it writes there runs on this host at your next `git status`)",
                container.name,
                git.display()
            ),
            hint: Some(
                "hand agents the workspace with `devcell handoff`, which gives the container its own git directories; or pass `--allow-host-git` to export it anyway".into(),
            ),
        }),
        _ => Ok(()),
    }
}

/// `env export --format agent-runner`: the running container of `target`'s workspace (found as
/// `exec` finds it) as an agent-runner definition named `name`. A container whose mounts let
/// the agent write a host git directory is refused unless `allow_host_git`.
///
/// Errors: as `exec`'s attach ([`OpsError::NoContainer`], [`OpsError::NotRunning`], the
/// configuration's, the engine's); [`agent_runner_environment`]'s; [`OpsError::Unsupported`]
/// for a writable host git directory.
pub async fn export_agent_runner(
    target: &TargetOptions,
    name: Option<&str>,
    allow_host_git: bool,
) -> Result<AgentRunnerEnvironment> {
    let engine = crate::engine::connect().await?;
    export_agent_runner_with(&*engine, target, name, allow_host_git).await
}

/// [`export_agent_runner`] through `engine`.
///
/// Errors: as [`export_agent_runner`].
pub async fn export_agent_runner_with(
    engine: &dyn Engine,
    target: &TargetOptions,
    name: Option<&str>,
    allow_host_git: bool,
) -> Result<AgentRunnerEnvironment> {
    let (attached, _) = crate::ops::attach::attach_target(
        engine,
        target,
        &[],
        crate::lifecycle::probe::UserEnvProbe::default(),
    )
    .await
    .map_err(|e| {
        let last = crate::ops::environment::EnvironmentStore::open_default()
            .and_then(|store| store.last(&target.workspace_folder).ok().flatten());
        external_instead(e, last.as_ref())
    })?;
    let judged = ContainerInfo {
        mounts: crate::security::volumes::mounts_as_host_sees(engine, &attached.container.mounts)
            .await?,
        ..attached.container.clone()
    };
    refuse_writable_host_git(&judged, allow_host_git)?;
    let podman = engine.is_podman().await?;
    let exec_user = crate::ops::exec_user::is_hardened(&attached.container)
        .then(|| attached.exec_user.clone())
        .flatten();
    agent_runner_environment(
        &attached.container,
        &attached.workspace_folder,
        podman,
        name,
        exec_user.as_deref(),
    )
}

/// When the workspace has no container of devcell's (nor a configuration to find one by) and
/// its last environment is a handoff
/// into a container devcell did not create (spec-note 0527): a refusal saying so instead of
/// "no container". devcell exports only containers it made and owns; the external one is its
/// owner's to hand to agent-runner. Any other error is returned as it is.
fn external_instead(
    err: OpsError,
    last: Option<&crate::ops::environment::EnvironmentRecord>,
) -> OpsError {
    let no_container = matches!(
        err,
        OpsError::NoContainer { .. }
            | OpsError::NoConfiguration { .. }
            | OpsError::Config(crate::config::ConfigError::NotFound { .. })
    );
    match last.and_then(|r| r.external.as_ref()) {
        Some(external) if no_container => OpsError::Unsupported {
            message: format!(
                "the workspace has no container devcell made; its last environment is the container `{}` ({}), which devcell did not create, and `env export` hands agent-runner only a container devcell owns",
                external.name,
                crate::ops::target::short(&external.container)
            ),
            hint: Some(format!(
                "name that container in an agent-runner `mode: existing` environment yourself (`container: {}`), or `devcell up` the workspace and export its container",
                external.name
            )),
        },
        _ => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MountInfo;

    #[test]
    fn a_workspace_whose_last_environment_is_external_is_refused_by_name() {
        let none = || OpsError::NoContainer {
            labels: "devcontainer.local_folder=/w".into(),
            expected: false,
        };
        let mut record = crate::ops::environment::fixtures::sample();
        assert!(matches!(
            external_instead(none(), Some(&record)),
            OpsError::NoContainer { .. }
        ));
        assert!(matches!(
            external_instead(none(), None),
            OpsError::NoContainer { .. }
        ));
        record.external = Some(crate::ops::environment::ExternalRecord {
            container: "0123456789abcdef".into(),
            name: "devbox".into(),
            user: "1000:1000".into(),
            exec_user: None,
            mounts: Vec::new(),
        });
        let e = external_instead(none(), Some(&record));
        assert!(
            e.to_string()
                .contains("the container `devbox` (0123456789ab)"),
            "{e}"
        );
        let unconfigured = OpsError::NoConfiguration { root: "/w".into() };
        assert!(
            external_instead(unconfigured, Some(&record))
                .to_string()
                .contains("`devbox`")
        );
        let other = OpsError::NotRunning { id: "x".into() };
        assert!(matches!(
            external_instead(other, Some(&record)),
            OpsError::NotRunning { .. }
        ));
    }

    fn mount(kind: &str, source: &str, destination: &str, rw: bool) -> MountInfo {
        MountInfo::of(kind, source, destination, rw)
    }

    fn container(mounts: Vec<MountInfo>) -> ContainerInfo {
        ContainerInfo {
            id: "0123456789ab".into(),
            name: "vsc-app-1".into(),
            running: true,
            mounts,
            ..ContainerInfo::default()
        }
    }

    #[test]
    fn the_export_is_an_existing_environment_with_the_bind_mounts_only() {
        let c = container(vec![
            mount("bind", "/home/me/app", "/workspaces/app", true),
            mount("bind", "/home/me/.gitconfig", "/etc/gitconfig", false),
            mount("volume", "/var/lib/docker/volumes/x/_data", "/cache", true),
            mount("tmpfs", "", "/tmp", true),
        ]);
        let e = agent_runner_environment(&c, "/workspaces/app", false, Some("app"), None).unwrap();
        let yaml: serde_json::Value = serde_yaml::from_str(&e.to_yaml().unwrap()).unwrap();
        assert_eq!(
            yaml,
            serde_json::json!({
                "schemaVersion": 1,
                "name": "app",
                "kind": "container",
                "mode": "existing",
                "engine": "docker",
                "container": "vsc-app-1",
                "cwd": "/workspaces/app",
                "expectedMounts": [
                    {"hostPath": "/home/me/app", "containerPath": "/workspaces/app", "mode": "rw"},
                    {"hostPath": "/home/me/.gitconfig", "containerPath": "/etc/gitconfig", "mode": "ro"},
                ],
            })
        );
        let podman = agent_runner_environment(&c, "/w", true, None, None).unwrap();
        assert_eq!(podman.engine, "podman");
        assert!(
            !podman.to_yaml().unwrap().contains("name:"),
            "no name unless given"
        );
    }

    #[test]
    fn a_value_agent_runner_would_read_as_a_variable_is_refused() {
        let c = container(vec![mount("bind", "/home/me/{{run_id}}", "/w", true)]);
        let e = agent_runner_environment(&c, "/w", false, None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expectedMounts[].hostPath") && e.contains("{{run_id}}"),
            "{e}"
        );
        let c = container(Vec::new());
        assert!(agent_runner_environment(&c, "/w/{{cwd}}", false, None, None).is_err());
    }

    /// Under `hardened` agent-runner's exec gets devcell's numeric ids (attack finding J3:
    /// its `docker exec` by name gave the agent the image's group `disk`).
    #[test]
    fn the_export_makes_agent_runner_exec_as_the_numeric_user() {
        let c = container(Vec::new());
        let e = agent_runner_environment(&c, "/w", false, None, Some("1000:1000")).unwrap();
        let yaml: serde_json::Value = serde_yaml::from_str(&e.to_yaml().unwrap()).unwrap();
        assert_eq!(
            yaml["extraExecArgs"],
            serde_json::json!(["--user", "1000:1000"])
        );
    }

    /// Attack finding J3: a container `up` made binds the workspace with its host `.git`
    /// read-write; exporting it would let agent-runner's agent write the host's git
    /// configuration. It is refused unless the user accepts it; a `.git` the container sees
    /// through another mount (a handoff's own git directory) is not the host's.
    #[test]
    fn a_container_that_can_write_a_host_git_directory_is_not_exported_unasked() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let ws_s = ws.to_str().unwrap();
        let mut c = container(vec![mount("bind", ws_s, "/workspaces/ws", true)]);
        let e = refuse_writable_host_git(&c, false).unwrap_err().to_string();
        assert!(e.contains(".git") && e.contains("git status"), "{e}");
        assert!(refuse_writable_host_git(&c, true).is_ok());
        c.mounts[0].rw = false;
        assert!(refuse_writable_host_git(&c, false).is_ok(), "read-only");
        c.mounts[0].rw = true;
        c.mounts
            .push(mount("bind", "/state/git", "/workspaces/ws/.git", true));
        assert!(refuse_writable_host_git(&c, false).is_ok(), "covered");
        // a repository one level down (a multi-repository workspace) and a bind inside one
        let multi = tmp.path().join("multi");
        std::fs::create_dir_all(multi.join("api/.git")).unwrap();
        let c = container(vec![mount("bind", multi.to_str().unwrap(), "/w", true)]);
        assert_eq!(
            writable_host_git_dir(&c.mounts),
            Some(multi.join("api/.git"))
        );
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let c = container(vec![mount(
            "bind",
            ws.join("sub").to_str().unwrap(),
            "/w",
            true,
        )]);
        assert_eq!(writable_host_git_dir(&c.mounts), Some(ws.join(".git")));
    }

    /// Attack finding K3: a repository two folders down (`projects/a/.git`), and a linked
    /// worktree's `.git` file, are host git entries the agent could write; a mount above one
    /// of them (a volume over `projects`) hides it.
    #[test]
    fn a_repository_two_folders_down_is_a_writable_host_git_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("projects/a/.git")).unwrap();
        let ws_s = ws.to_str().unwrap();
        let mut c = container(vec![mount("bind", ws_s, "/workspaces/ws", true)]);
        assert_eq!(
            writable_host_git_dir(&c.mounts),
            Some(ws.join("projects/a/.git"))
        );
        c.mounts
            .push(mount("volume", "v", "/workspaces/ws/projects", true));
        assert_eq!(writable_host_git_dir(&c.mounts), None, "covered above");
        std::fs::create_dir_all(ws.join(".wt/feat")).unwrap();
        std::fs::write(ws.join(".wt/feat/.git"), "gitdir: /x\n").unwrap();
        assert_eq!(
            writable_host_git_dir(&c.mounts),
            Some(ws.join(".wt/feat/.git"))
        );
    }

    /// Attack L3: a bare repository in the workspace (`projects/mirror.git`) is a host git
    /// directory under another name: its `hooks/` and `config` are the agent's to write, so
    /// the export is refused for it, as for a `.git`; a bind inside one too.
    #[test]
    fn a_bare_repository_below_a_bind_is_a_writable_host_git_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let bare = ws.join("projects/mirror.git");
        for dir in ["objects", "refs/heads", "hooks"] {
            std::fs::create_dir_all(bare.join(dir)).unwrap();
        }
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let c = container(vec![mount("bind", ws.to_str().unwrap(), "/w", true)]);
        assert_eq!(writable_host_git_dir(&c.mounts), Some(bare.clone()));
        let e = refuse_writable_host_git(&c, false).unwrap_err().to_string();
        assert!(e.contains("mirror.git"), "{e}");
        let c = container(vec![mount(
            "bind",
            bare.join("hooks").to_str().unwrap(),
            "/h",
            true,
        )]);
        assert_eq!(writable_host_git_dir(&c.mounts), Some(bare));
    }

    /// Attack L7: a bind-backed named volume (`o=bind`, `device=<ws>/projects`) over
    /// `/w/projects` showed `projects/a/.git` read-write: volumes were not walked, and the
    /// volume counted as covering the `.git` below the workspace bind. Resolved to the bind it
    /// is, it is walked; and a read-write bind showing the same entry covers nothing.
    #[test]
    fn a_bind_backed_volume_is_walked_and_covers_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("projects/a/.git")).unwrap();
        let projects = ws.join("projects");
        let mut resolved = mount("bind", projects.to_str().unwrap(), "/w/projects", true);
        resolved.name = Some("proj".into());
        // the volume alone, as the engine reports it before resolution, is walked as nothing
        let volume = MountInfo {
            kind: "volume".into(),
            source: "/var/lib/docker/volumes/proj/_data".into(),
            ..resolved.clone()
        };
        let ws_bind = mount("bind", ws.to_str().unwrap(), "/w", true);
        assert_eq!(
            writable_host_git_dir(&[ws_bind.clone(), volume]),
            None,
            "what the pure walk saw unresolved"
        );
        // resolved: the volume's bind covers nothing of the workspace bind's `.git`, and is
        // itself walked
        assert_eq!(
            writable_host_git_dir(&[ws_bind.clone(), resolved.clone()]),
            Some(ws.join("projects/a/.git"))
        );
        assert_eq!(
            writable_host_git_dir(&[resolved.clone()]),
            Some(ws.join("projects/a/.git"))
        );
        // a read-only bind of the same folder, or a tmpfs, does cover it
        let mut ro = resolved.clone();
        ro.rw = false;
        assert_eq!(writable_host_git_dir(&[ws_bind.clone(), ro]), None);
        let tmpfs = mount("tmpfs", "", "/w/projects", true);
        assert_eq!(writable_host_git_dir(&[ws_bind, tmpfs]), None);
        // a read-write bind of a file inside a git directory, or of a `.git` file
        let cfg = ws.join("projects/a/.git/config");
        std::fs::write(&cfg, "[core]\n").unwrap();
        let c = mount("bind", cfg.to_str().unwrap(), "/c", true);
        assert_eq!(
            writable_host_git_dir(&[c]),
            Some(ws.join("projects/a/.git"))
        );
    }

    /// The volume mounts of a container resolve as every other judge resolves them
    /// ([`crate::security::volumes::as_host_sees`]): a bind-backed volume becomes a bind of
    /// its `device`, a plain one stays a volume, one the engine does not know or whose driver
    /// options devcell cannot resolve counts as writable host content (attack M5).
    #[test]
    fn volume_mounts_resolve_to_the_bind_they_are() {
        use crate::engine::VolumeInfo;
        use crate::security::volumes::{UNRESOLVED_VOLUME, as_host_sees};
        let info = |name: &str, options: &[(&str, &str)]| VolumeInfo {
            name: name.into(),
            driver: "local".into(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            labels: Default::default(),
        };
        let held = std::collections::BTreeMap::from([
            (
                "proj".to_string(),
                info(
                    "proj",
                    &[
                        ("type", "none"),
                        ("o", "bind"),
                        ("device", "/h/ws/projects"),
                    ],
                ),
            ),
            ("cache".to_string(), info("cache", &[])),
            (
                "nfs".to_string(),
                info("nfs", &[("type", "nfs"), ("device", ":/export")]),
            ),
        ]);
        let volume = |name: &str, at: &str| MountInfo {
            kind: "volume".into(),
            source: format!("/var/lib/docker/volumes/{name}/_data"),
            name: Some(name.into()),
            destination: at.into(),
            rw: true,
        };
        let mounts = [
            volume("proj", "/w/projects"),
            volume("cache", "/cache"),
            volume("gone", "/gone"),
            volume("nfs", "/nfs"),
        ];
        let out = as_host_sees(&mounts, &held);
        assert_eq!(out[0].kind, "bind");
        assert_eq!(out[0].source, "/h/ws/projects");
        assert_eq!(out[0].destination, "/w/projects");
        assert_eq!(out[1], mounts[1]);
        for (m, name) in out[2..].iter().zip(["gone", "nfs"]) {
            assert_eq!(m.kind, UNRESOLVED_VOLUME);
            assert!(m.source.contains(name), "{m:?}");
        }
        assert_eq!(
            writable_host_git_dir(&out[2..3]),
            Some(std::path::PathBuf::from(&out[2].source))
        );
        assert_eq!(writable_host_git_dir(&out[1..2]), None);
    }
}
