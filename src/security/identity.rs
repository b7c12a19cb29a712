//! Whether a container found by its id labels is this workspace's (spec-note 0421).
//!
//! Labels are claims anyone who can create a container can make (a hostile repository under
//! the `reference` profile, an image's `LABEL`s, another tool). Before `up`, `exec`,
//! `run-user-commands` or a handoff reuses a container found by the workspace's default id
//! labels, or runs anything in it (hooks, `--secrets-file` values, the agent), the container's
//! mounts must show that it binds this workspace; `down`, `status`, `delete` and `audit` act
//! only on the containers that do ([`bound_to_workspace`], the one function here that asks the
//! engine). A bind-backed named volume whose `device` resolves to the workspace folder binds it
//! as a bind does (attack 27, R3; spec-note 0660).

use std::path::{Path, PathBuf};

use crate::engine::{ContainerInfo, ContainerSummary, Engine, EngineError, MountKind};

/// Splits `found` (containers carrying a workspace's identity labels) into those that bind one
/// of `folders` ([`binds_workspace`], or through a bind-backed named volume:
/// [`binds_workspace_through_volume`]; inspected through `engine`) and the ids of those that do
/// not: a container claiming the labels without the bind is not the workspace's, and a command
/// acting on "this workspace's container" leaves it alone (spec-note 0421). A container gone
/// before it is inspected is dropped. Its volumes are inspected only when no bind counts (a
/// warm lookup asks the engine no more than before).
///
/// Errors: [`EngineError`] when the engine cannot inspect one.
pub async fn bound_to_workspace(
    engine: &dyn Engine,
    found: Vec<ContainerSummary>,
    folders: &[PathBuf],
) -> Result<(Vec<ContainerSummary>, Vec<String>), EngineError> {
    let mut bound = Vec::new();
    let mut claims = Vec::new();
    for summary in found {
        let Some(info) = engine.inspect_container(&summary.id).await? else {
            continue;
        };
        let through_volume = || async {
            // a Compose primary reaching the workspace through `driver_opts` `o: bind`,
            // `device: <workspace>` is the workspace's container as much as one binding it
            // (attack 27, R3: `status` showed none, `delete` said nothing remained)
            let devices = super::volumes::bind_backed_devices(engine, &info.mounts).await?;
            Ok::<_, EngineError>(binds_workspace_through_volume(&info, &devices, folders))
        };
        if binds_workspace(&info, folders) || through_volume().await? {
            bound.push(summary);
        } else {
            claims.push(summary.id);
        }
    }
    Ok((bound, claims))
}

/// Whether `info` has a bind mount whose host source is one of `folders` (compared as written
/// and with symbolic links of `folders` resolved, as engines report either). The container's
/// own source is never resolved on the host: what counts is what the engine bound.
pub fn binds_workspace(info: &ContainerInfo, folders: &[PathBuf]) -> bool {
    let accepted = accepted(folders);
    bind_sources_cleaned(info).any(|source| accepted.contains(&source))
}

/// Whether `info` mounts a bind-backed named volume (its `device` by volume name in `devices`,
/// [`super::volumes::bind_backed_devices`]) whose `device`, resolved on this host
/// ([`super::host_path::resolve`]), is one of `folders`, resolved too. Unlike a bind's source,
/// the device is resolved: the engine records the volume's options as they were written, and
/// the kernel follows its links when the volume is mounted, so the resolved path is the folder
/// the container writes. A device that does not resolve is not counted.
pub fn binds_workspace_through_volume(
    info: &ContainerInfo,
    devices: &std::collections::BTreeMap<String, String>,
    folders: &[PathBuf],
) -> bool {
    let resolved: Vec<PathBuf> = folders
        .iter()
        .filter_map(|f| super::host_path::resolve(f).ok())
        .collect();
    info.mounts
        .iter()
        .filter(|m| m.kind == MountKind::Volume.as_str())
        .filter_map(|m| devices.get(m.name.as_ref()?))
        .filter_map(|device| super::host_path::resolve(Path::new(device)).ok())
        .any(|device| resolved.contains(&device))
}

/// `folders` as written and with their symbolic links resolved (engines report either).
fn accepted(folders: &[PathBuf]) -> Vec<PathBuf> {
    let mut accepted = Vec::new();
    for folder in folders {
        accepted.push(clean(folder));
        if let Ok(canonical) = std::fs::canonicalize(folder) {
            accepted.push(canonical);
        }
    }
    accepted
}

/// The host sources of `info`'s bind mounts, cleaned ([`clean`]), never resolved on the host.
fn bind_sources_cleaned(info: &ContainerInfo) -> impl Iterator<Item = PathBuf> + '_ {
    info.mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind.as_str())
        .map(|m| clean(Path::new(&m.source)))
}

/// Whether `info` has a bind mount whose host source is one of `folders`, a folder inside one,
/// or a folder above one (other than `/`): a Compose primary binds the folder its file names
/// (`..`, a parent for a multi-repository project, or a folder inside), not always the
/// workspace itself. Only a repository that binds such a path can claim the workspace, and a
/// bind outside its own workspace is a request (spec-note 0421).
pub fn binds_workspace_path(info: &ContainerInfo, folders: &[PathBuf]) -> bool {
    let accepted = accepted(folders);
    bind_sources_cleaned(info)
        .filter(|source| source.parent().is_some())
        .any(|source| {
            accepted
                .iter()
                .any(|a| a.starts_with(&source) || source.starts_with(a))
        })
}

/// The host sources of `info`'s bind mounts, for messages.
pub fn bind_sources(info: &ContainerInfo) -> Vec<String> {
    info.mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind.as_str())
        .map(|m| m.source.clone())
        .collect()
}

fn clean(path: &Path) -> PathBuf {
    super::policy::normalize_path(&path.to_string_lossy())
        .map_or_else(|| path.to_path_buf(), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MountInfo;

    /// Attack finding J2: a sidecar whose image carries a workspace's id labels but binds
    /// only its own repository is not that workspace's; a primary binding the workspace, a
    /// folder in it or above it is.
    #[test]
    fn a_workspace_path_is_the_workspace_a_folder_in_it_or_above_it() {
        let ws = [PathBuf::from("/home/me/src/a")];
        assert!(binds_workspace_path(&container(&["/home/me/src/a"]), &ws));
        assert!(binds_workspace_path(
            &container(&["/home/me/src/a/web"]),
            &ws
        ));
        assert!(binds_workspace_path(&container(&["/home/me/src"]), &ws));
        assert!(!binds_workspace_path(&container(&["/home/me/src/b"]), &ws));
        assert!(!binds_workspace_path(&container(&["/home/me/src/ab"]), &ws));
        assert!(
            !binds_workspace_path(&container(&["/"]), &ws),
            "not the root"
        );
        assert!(!binds_workspace_path(&container(&[]), &ws));
    }

    fn container(binds: &[&str]) -> ContainerInfo {
        ContainerInfo {
            mounts: binds
                .iter()
                .map(|s| MountInfo {
                    kind: "bind".into(),
                    source: (*s).into(),
                    name: None,
                    destination: "/workspaces/x".into(),
                    rw: true,
                })
                .chain([MountInfo {
                    kind: "volume".into(),
                    source: "/w/repo".into(),
                    name: Some("v".into()),
                    destination: "/v".into(),
                    rw: true,
                }])
                .collect(),
            ..ContainerInfo::default()
        }
    }

    #[test]
    fn only_a_bind_of_the_workspace_counts() {
        let ws = [PathBuf::from("/w/repo")];
        assert!(binds_workspace(&container(&["/w/repo"]), &ws));
        assert!(binds_workspace(&container(&["/w/repo/"]), &ws));
        assert!(binds_workspace(&container(&["/x", "/w/./repo"]), &ws));
        // Another folder, a parent, a child, or a volume whose path happens to match: no.
        for other in ["/w/other", "/w", "/w/repo/sub", "/w/repository"] {
            assert!(!binds_workspace(&container(&[other]), &ws), "{other}");
        }
        assert!(!binds_workspace(&container(&[]), &ws));
    }

    /// Attack 27, R3: a container reaching the workspace only through a bind-backed named
    /// volume binds it when the volume's device resolves to the workspace (through a link
    /// too); a device inside or above it, a volume that is not bind-backed, or a device that
    /// names another folder, does not.
    #[test]
    fn a_bind_backed_volume_of_the_workspace_binds_it() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&ws, &link).unwrap();
        let info = container(&[]); // one volume, `v`, and no bind
        let folders = [ws.clone()];
        let device = |d: &Path| {
            std::collections::BTreeMap::from([("v".to_string(), d.display().to_string())])
        };
        assert!(!binds_workspace(&info, &folders), "no bind");
        assert!(binds_workspace_through_volume(
            &info,
            &device(&ws),
            &folders
        ));
        assert!(binds_workspace_through_volume(
            &info,
            &device(&link),
            &folders
        ));
        let by_link = [link.clone()];
        assert!(binds_workspace_through_volume(
            &info,
            &device(&ws),
            &by_link
        ));
        for other in [
            ws.join("sub"),
            dir.path().to_path_buf(),
            dir.path().join("ws2"),
        ] {
            assert!(
                !binds_workspace_through_volume(&info, &device(&other), &folders),
                "{}",
                other.display()
            );
        }
        // not bind-backed: no device known for `v`
        let none = std::collections::BTreeMap::new();
        assert!(!binds_workspace_through_volume(&info, &none, &folders));
    }

    #[test]
    fn a_symlinked_workspace_matches_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let real = std::fs::canonicalize(&real).unwrap();
        let info = container(&[real.to_str().unwrap()]);
        assert!(binds_workspace(&info, std::slice::from_ref(&link)));
        // The container's source is taken as the engine bound it, not resolved again.
        let info = container(&[link.to_str().unwrap()]);
        assert!(!binds_workspace(&info, &[real]));
    }
}
