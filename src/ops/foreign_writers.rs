//! Under `hardened`, an `up` (a Compose project's, and a single container's that `up` will
//! create or start: spec-note 0656) is refused while a running container devcell does not own can swap
//! a folder of the workspace between devcell's judgement and the engine's mount (attack 24,
//! O4's remainder; attack 26, Q1; spec-note 0478): devcell judges each bind source inside the
//! workspace by what its path resolves to, and the engine resolves the path again when it
//! starts the container, so such a container could swap a judged folder for a link to a host
//! folder in between, and devcell cannot stop it (it is not devcell's to stop).
//!
//! Counted: a writable bind of the workspace folder or a folder inside it, by any container
//! (another workspace's container binding the same folder, a container started by hand with
//! `-v "$PWD":/w`); and a writable bind of a folder *above* the workspace by a container that
//! runs a repository's code (a dev container of another workspace, devcell's or the reference
//! CLI's, a handoff's container binding a multi-repository folder, any container Compose made).
//! A folder above the workspace bound by any other container (a toolbox container binding the
//! home folder) is not counted: that container is the user's own, and refusing it would refuse
//! every `up` beside it. The workspace's own containers and the project's are stopped before
//! judging under `--remove-existing-container` (`ops::quiesce`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::{Engine, MountInfo};
use crate::ops::error::Result;
use crate::security::SecurityError;
use crate::security::host_path;

/// Refuses ([`SecurityError::ForeignWriter`]) when a running container that is neither of the
/// Compose project `project` (`None`: a single container's `up`, no project is its own) nor
/// the container `own` (the one this `up` reuses or replaces, as the lookup found it) binds,
/// writable, the workspace folder `workspace` or a folder inside it, or, when it runs a
/// repository's code ([`runs_repository_code`]), a folder above it (the module's rule).
/// Identity labels exempt nothing: any image can carry them, and a container with them that
/// the lookup passed over (it does not bind the workspace) is neither reused nor stopped
/// (attack 28, F1 and F3). One engine listing, and one inspect per other running container.
///
/// Errors: [`SecurityError::ForeignWriter`] naming each; the engine's.
pub(crate) async fn refuse_foreign_writers(
    engine: &dyn Engine,
    workspace: &Path,
    project: Option<&str>,
    own: Option<&str>,
) -> Result<()> {
    let workspace = host_path::resolve(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let mut found = Vec::new();
    for c in engine.list_containers().await? {
        let own = project.is_some_and(|project| {
            c.labels.get(crate::engine::compose::PROJECT_LABEL) == Some(&project.to_string())
        }) || own == Some(c.id.as_str());
        if own || !matches!(c.state.as_str(), "running" | "restarting" | "paused") {
            continue;
        }
        let Some(info) = engine.inspect_container(&c.id).await? else {
            continue;
        };
        let name = c.names.first().cloned().unwrap_or_default();
        let short = &c.id[..12.min(c.id.len())];
        let above = runs_repository_code(&c.labels);
        let devices = crate::security::volumes::bind_backed_devices(
            engine,
            info.mounts.iter().filter(|m| m.rw),
        )
        .await?;
        found.extend(
            writable_binds_of(&workspace, &info.mounts, &devices, above)
                .into_iter()
                .map(|source| format!("`{name}` ({short}) binds `{}`", source.display())),
        );
    }
    if found.is_empty() {
        return Ok(());
    }
    Err(SecurityError::ForeignWriter {
        workspace,
        containers: found,
    }
    .into())
}

/// Whether a container's labels say it runs a repository's code: a dev container (an identity
/// label, `devcontainer.*` or `devcell.*`, which devcell's and the reference CLI's containers
/// carry) or a container Compose made (a project chose its image and command).
fn runs_repository_code(labels: &BTreeMap<String, String>) -> bool {
    labels
        .keys()
        .any(|k| crate::names::is_identity_label(k) || k == crate::engine::compose::PROJECT_LABEL)
}

/// The sources of `mounts` that are writable binds (or bind-backed named volumes, their host
/// folder in `devices` by volume name) of the (canonical) `workspace` or a folder inside it,
/// and with `above`, of a folder above it, each as it resolves on this host (as the engine
/// holds it when it does not resolve here).
fn writable_binds_of(
    workspace: &Path,
    mounts: &[MountInfo],
    devices: &BTreeMap<String, String>,
    above: bool,
) -> Vec<PathBuf> {
    mounts
        .iter()
        .filter(|m| m.rw)
        .filter_map(|m| match m.kind.as_str() {
            "bind" => Some(m.source.as_str()),
            "volume" => m
                .name
                .as_ref()
                .and_then(|n| devices.get(n))
                .map(String::as_str),
            _ => None,
        })
        .map(|source| {
            let source = Path::new(source);
            host_path::resolve(source).unwrap_or_else(|_| source.to_path_buf())
        })
        .filter(|source| source.starts_with(workspace) || (above && workspace.starts_with(source)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(source: &Path, rw: bool) -> MountInfo {
        MountInfo {
            kind: "bind".into(),
            source: source.display().to_string(),
            name: None,
            destination: "/w".into(),
            rw,
        }
    }

    /// A writable bind of the workspace, of a folder inside it, or of a link that resolves
    /// into it is counted; a read-only bind, a folder above it, a sibling folder and a volume
    /// are not.
    #[test]
    fn a_writable_bind_of_the_workspace_or_inside_it_is_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("data")).unwrap();
        std::fs::create_dir_all(root.join("ws-sibling")).unwrap();
        std::os::unix::fs::symlink(ws.join("data"), root.join("link")).unwrap();
        let mounts = vec![
            bind(&ws, true),
            bind(&ws.join("data"), true),
            bind(&root, true),
            bind(&root.join("link"), true),
            bind(&ws, false),
            bind(&root.join("ws-sibling"), true),
            MountInfo {
                kind: "volume".into(),
                ..bind(&ws, true)
            },
        ];
        assert_eq!(
            writable_binds_of(&ws, &mounts, &BTreeMap::new(), false),
            vec![ws.clone(), ws.join("data"), ws.join("data")]
        );
        // a container running a repository's code: the folder above counts too (attack 26, Q1)
        assert_eq!(
            writable_binds_of(&ws, &mounts, &BTreeMap::new(), true),
            vec![ws.clone(), ws.join("data"), root.clone(), ws.join("data")]
        );
    }

    /// Attack 27, R1: a writable named volume that binds the workspace (its `device`) is
    /// counted as the bind it is; a read-only one, and a volume that is not bind-backed, not.
    #[test]
    fn a_writable_bind_backed_volume_of_the_workspace_is_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap();
        let volume = |name: &str, rw: bool| MountInfo {
            kind: "volume".into(),
            source: format!("/var/lib/docker/volumes/{name}/_data"),
            name: Some(name.into()),
            destination: "/w".into(),
            rw,
        };
        let mounts = vec![
            volume("wsv", true),
            volume("wsv-ro", false),
            volume("plain", true),
        ];
        let devices = BTreeMap::from([
            ("wsv".to_string(), ws.display().to_string()),
            ("wsv-ro".to_string(), ws.display().to_string()),
        ]);
        assert_eq!(
            writable_binds_of(&ws, &mounts, &devices, false),
            vec![ws.clone()]
        );
    }

    /// Dev containers (devcell's, the reference CLI's) and Compose's run a repository's code;
    /// a toolbox container started by hand does not.
    #[test]
    fn dev_containers_and_compose_containers_run_a_repositorys_code() {
        let labels = |keys: &[&str]| -> BTreeMap<String, String> {
            keys.iter()
                .map(|k| (k.to_string(), "x".to_string()))
                .collect()
        };
        assert!(runs_repository_code(&labels(&[
            "devcontainer.local_folder"
        ])));
        assert!(runs_repository_code(&labels(&["devcell.profile"])));
        assert!(runs_repository_code(&labels(&[
            crate::engine::compose::PROJECT_LABEL
        ])));
        assert!(!runs_repository_code(&labels(&[
            "com.github.containers.toolbox",
            "manager"
        ])));
        assert!(!runs_repository_code(&labels(&[])));
    }
}
