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

/// `env export --format agent-runner`: the running container of `target`'s workspace (found as
/// `exec` finds it) as an agent-runner definition named `name`.
///
/// Errors: as `exec`'s attach ([`OpsError::NoContainer`], [`OpsError::NotRunning`], the
/// configuration's, the engine's); [`agent_runner_environment`]'s.
pub async fn export_agent_runner(
    target: &TargetOptions,
    name: Option<&str>,
) -> Result<AgentRunnerEnvironment> {
    let engine = crate::engine::connect().await?;
    export_agent_runner_with(&*engine, target, name).await
}

/// [`export_agent_runner`] through `engine`.
///
/// Errors: as [`export_agent_runner`].
pub async fn export_agent_runner_with(
    engine: &dyn Engine,
    target: &TargetOptions,
    name: Option<&str>,
) -> Result<AgentRunnerEnvironment> {
    let (attached, _) = crate::ops::attach::attach_target(
        engine,
        target,
        &[],
        crate::lifecycle::probe::UserEnvProbe::default(),
    )
    .await?;
    let podman = engine.is_podman().await?;
    agent_runner_environment(
        &attached.container,
        &attached.workspace_folder,
        podman,
        name,
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
        let e = agent_runner_environment(&c, "/workspaces/app", false, Some("app")).unwrap();
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
        let podman = agent_runner_environment(&c, "/w", true, None).unwrap();
        assert_eq!(podman.engine, "podman");
        assert!(
            !podman.to_yaml().unwrap().contains("name:"),
            "no name unless given"
        );
    }

    #[test]
    fn a_value_agent_runner_would_read_as_a_variable_is_refused() {
        let c = container(vec![mount("bind", "/home/me/{{run_id}}", "/w", true)]);
        let e = agent_runner_environment(&c, "/w", false, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expectedMounts[].hostPath") && e.contains("{{run_id}}"),
            "{e}"
        );
        let c = container(Vec::new());
        assert!(agent_runner_environment(&c, "/w/{{cwd}}", false, None).is_err());
    }
}
