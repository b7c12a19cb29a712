//! Finding a target's dev container: load its configuration, its id labels, the container that
//! bears them, and the workspace folder it should mount.

use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, Engine, MountKind};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::{LoadOptions, LoadedConfiguration, load_configuration};
use crate::ops::options::TargetOptions;
use crate::security::{self, Grants};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Loads the configuration of `target` (see [`load_configuration`]) for a command without a
/// `--security-profile` (`exec`, `down`, `run-user-commands`): the repository's config file
/// is judged as under `hardened`, with no grant (spec-note 0400).
pub(crate) fn load(target: &TargetOptions) -> Result<LoadedConfiguration> {
    load_for(target, Some(Grants::default()))
}

/// [`load`], the configuration file judged first under `hardened` (`confine`: the user's
/// grants; [`LoadOptions::confine`], spec-note 0400).
pub(crate) fn load_for(
    target: &TargetOptions,
    confine: Option<Grants>,
) -> Result<LoadedConfiguration> {
    load_configuration(&LoadOptions {
        confine,
        workspace_folder: target.workspace_folder.clone(),
        config: target.config.clone(),
        mount_workspace_git_root: target.mount_workspace_git_root,
        env: target.env.clone(),
        workspace_override: target.workspace_override.clone(),
        override_config: target.override_config.clone(),
        additional_features: target.additional_features.clone(),
        mount_git_worktree_common_dir: target.mount_git_worktree_common_dir,
    })
}

/// The id labels: `--id-label`s when given, else the reference CLI's defaults.
pub(crate) fn id_labels(
    target: &TargetOptions,
    loaded: &LoadedConfiguration,
) -> BTreeMap<String, String> {
    if target.id_labels.is_empty() {
        crate::config::id::id_labels(&loaded.workspace_folder, &loaded.config_file)
    } else {
        target.id_labels.iter().cloned().collect()
    }
}

/// The first container carrying every id label that is not being removed and, when
/// `workspace` names the folders it must bind ([`expected_workspace`]), binds one of them
/// ([`security::identity::binds_workspace`]): a container claiming this workspace's labels
/// without its bind is never reused, and nothing is sent to it (spec-note 0421); each one
/// passed over is a warning in `warnings`.
pub(crate) async fn find_container(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
    workspace: Option<&[PathBuf]>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<ContainerInfo>> {
    let found = engine.find_containers(labels).await?;
    for summary in found.iter().filter(|c| c.state != "removing") {
        let Some(info) = engine.inspect_container(&summary.id).await? else {
            continue;
        };
        if let Some(folders) = workspace
            && !security::identity::binds_workspace(&info, folders)
        {
            let binds = security::identity::bind_sources(&info);
            warnings.push(Warning {
                location: None,
                message: format!(
                    "container {} carries this workspace's labels but does not bind `{}` (its binds: {}): it is not used; remove it if it is not yours (`docker rm -f {}`)",
                    short(&info.id),
                    folders.first().map(|f| f.display().to_string()).unwrap_or_default(),
                    if binds.is_empty() { "none".to_string() } else { binds.join(", ") },
                    short(&info.id),
                ),
            });
            continue;
        }
        return Ok(Some(info));
    }
    Ok(None)
}

/// The host folders a container found by `target`'s id labels must bind to be this
/// workspace's: the workspace mount's source, the default mount root and the workspace folder
/// (a handoff binds its root at `/workspace`). `None` when the lookup is by `--id-label`s
/// (the user's own choice of identity) or the configuration has no bind workspace mount
/// (nothing to compare with; spec-note 0421).
pub(crate) fn expected_workspace(
    target: &TargetOptions,
    loaded: &LoadedConfiguration,
) -> Option<Vec<PathBuf>> {
    if !target.id_labels.is_empty() || target.no_configuration {
        return None;
    }
    let mount = loaded
        .workspace_mount()
        .ok()
        .flatten()
        .filter(|m| m.kind == MountKind::Bind)?;
    let mut folders: Vec<PathBuf> = mount.source.map(PathBuf::from).into_iter().collect();
    folders.push(loaded.workspace.host_mount_root.clone());
    folders.push(loaded.workspace_folder.clone());
    Some(folders)
}

pub(crate) async fn inspect(engine: &dyn Engine, id: &str) -> Result<ContainerInfo> {
    engine.inspect_container(id).await?.ok_or_else(|| {
        OpsError::Engine(crate::engine::EngineError::NoSuchContainer { id: id.to_string() })
    })
}

pub(crate) fn join_labels(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
