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
/// above it (the bind is inside a worktree), that no other mount covers at or above the place
/// it appears in the container (a handoff covers each with the container's own git
/// directory). A walk cut at its bound counts as finding the bind's source. `None` when
/// there is none.
///
/// What agent-runner's agent writes there (`core.fsmonitor`, hooks, a renamed `.git`) runs
/// on the host on the user's next `git status` (issue 25, class 1; attack finding J3): a
/// container `up` made mounts them as they are, which only a handoff's container does not.
pub fn writable_host_git_dir(mounts: &[crate::engine::MountInfo]) -> Option<std::path::PathBuf> {
    use std::path::Path;
    let is_git = |p: &Path| std::fs::symlink_metadata(p.join(".git")).is_ok();
    for m in mounts.iter().filter(|m| m.kind == "bind" && m.rw) {
        let source = Path::new(&m.source);
        if !source.is_dir() {
            continue;
        }
        if let Some(above) = source.ancestors().skip(1).find(|a| is_git(a)) {
            return Some(above.join(".git"));
        }
        // a folder above that is itself a git directory (a bare repository, attack L2/L3)
        if let Some(above) = source
            .ancestors()
            .skip(1)
            .find(|a| crate::security::git_entries::is_git_directory(a))
        {
            return Some(above.to_path_buf());
        }
        let destination = m.destination.trim_end_matches('/');
        // another mount at or above the entry's place, below this bind's, hides it
        let covered = |inside: &str| {
            mounts.iter().any(|o| {
                let at = o.destination.trim_end_matches('/');
                at.len() > destination.len()
                    && (inside == at || inside.starts_with(&format!("{at}/")))
            })
        };
        let found = crate::security::git_entries::find(source);
        if let Some(e) = found
            .entries
            .into_iter()
            .find(|e| e.rel == "." || !covered(&format!("{destination}/{}", e.rel)))
        {
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
    .await?;
    refuse_writable_host_git(&attached.container, allow_host_git)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MountInfo;

    fn mount(kind: &str, source: &str, destination: &str, rw: bool) -> MountInfo {
        MountInfo {
            kind: kind.into(),
            source: source.into(),
            name: None,
            destination: destination.into(),
            rw,
        }
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
}
