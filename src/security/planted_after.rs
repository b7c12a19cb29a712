//! The second line ([`crate::security::planted`]) beyond `up` and the handoff's end (attack
//! K11): a container that keeps running (after `up`, after `devcell exec`) can leave a
//! process (`setsid`) that plants a set-uid file of the workspace owner later, which any
//! local user then runs as the owner. So the workspace is scanned, and set-id bits cleared,
//! also after each command devcell runs in a running container (`exec`, `run-user-commands`)
//! and once `down` stopped it; `status` names what it finds and changes nothing. The class
//! itself stays open while the container runs: see spec-note 0400 ("K11") for why no seccomp
//! rule closes it at its source.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::ContainerInfo;
use crate::progress::{Event, Reporter};
use crate::security::planted::{Planted, ScanOptions, scan_and_clear, scan_and_clear_with};

/// Whether the container with `labels` was created by devcell under `hardened` (its
/// [`crate::names::PROFILE_LABEL`], which devcell sets itself; only `hardened` clears what
/// its containers leave, as `up` does).
pub fn created_hardened(labels: &BTreeMap<String, String>) -> bool {
    labels
        .get(crate::names::PROFILE_LABEL)
        .is_some_and(|p| p == "hardened")
}

/// The host folder `info` binds read-write as its workspace: the source of the writable bind
/// whose destination holds `workspace_folder` most closely (the mounted workspace, the git
/// root with `--mount-workspace-git-root`), when it is a folder. `None` when the workspace
/// is in the image, or read-only.
pub fn workspace_source(info: &ContainerInfo, workspace_folder: &str) -> Option<PathBuf> {
    info.mounts
        .iter()
        .filter(|m| m.kind == "bind" && m.rw && m.holds(workspace_folder))
        .max_by_key(|m| m.destination.trim_end_matches('/').len())
        .map(|m| PathBuf::from(&m.source))
        .filter(|p| p.is_dir())
}

/// After a command devcell ran in the running container `info` (whose workspace folder is
/// `workspace_folder`): under `hardened`, the workspace it binds is scanned and set-id bits
/// cleared ([`scan_and_clear`]), each finding a warning on `reporter`. Returns the findings.
pub fn after_command(
    info: &ContainerInfo,
    workspace_folder: &str,
    reporter: &dyn Reporter,
) -> Vec<Planted> {
    if !created_hardened(&info.labels) {
        return Vec::new();
    }
    let Some(root) = workspace_source(info, workspace_folder) else {
        return Vec::new();
    };
    scan_root(&root, reporter)
}

/// [`scan_and_clear`] of `root`, each finding a warning on `reporter`.
pub fn scan_root(root: &Path, reporter: &dyn Reporter) -> Vec<Planted> {
    let found = scan_and_clear(root);
    for f in &found {
        reporter.report(Event::Status(format!("warning: {}", f.message(root))));
    }
    found
}

/// What `status` says about `root`: each set-id file or folder, device node and folder it
/// could not scan, as a `(code, message)` warning (`set_id_file_or_device`), nothing changed.
pub fn report(root: &Path) -> Vec<(String, String)> {
    scan_and_clear_with(
        root,
        ScanOptions {
            report_only: true,
            ..ScanOptions::default()
        },
    )
    .iter()
    .map(|f| ("set_id_file_or_device".to_string(), f.report_message(root)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MountInfo;
    use std::os::unix::fs::PermissionsExt as _;

    fn bind(source: &Path, destination: &str, rw: bool) -> MountInfo {
        MountInfo {
            kind: "bind".into(),
            source: source.display().to_string(),
            name: None,
            destination: destination.into(),
            rw,
        }
    }

    /// Attack K11: the workspace a running container binds is found by its mount, and a
    /// set-uid file there is cleared after a command under `hardened` only; `status`'s report
    /// names it and changes nothing.
    #[test]
    fn the_workspace_a_running_container_binds_is_scanned_after_a_command() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let git = tmp.path().join("git");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&git).unwrap();
        let su = ws.join("late-su");
        std::fs::write(&su, "x").unwrap();
        std::fs::set_permissions(&su, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let mode = || std::fs::metadata(&su).unwrap().permissions().mode() & 0o7777;
        let mut info = ContainerInfo {
            mounts: vec![
                bind(&git, "/workspaces/ws/.git", true),
                bind(&ws, "/workspaces/ws", true),
                bind(tmp.path(), "/workspaces/ws-ro", false),
            ],
            ..ContainerInfo::default()
        };
        assert_eq!(
            workspace_source(&info, "/workspaces/ws/sub"),
            Some(ws.clone())
        );
        assert_eq!(workspace_source(&info, "/workspaces/ws"), Some(ws.clone()));
        assert_eq!(workspace_source(&info, "/workspaces/ws-ro"), None);
        assert_eq!(workspace_source(&info, "/workspaces/wsx"), None);

        struct Quiet;
        impl Reporter for Quiet {
            fn report(&self, _: Event) {}
        }
        // status reports, changes nothing
        let said = report(&ws);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].1.contains("late-su") && said[0].1.contains("devcell down"));
        assert_eq!(mode(), 0o4755);
        // not a container devcell made under `hardened`: nothing is touched
        assert!(after_command(&info, "/workspaces/ws", &Quiet).is_empty());
        assert_eq!(mode(), 0o4755);
        info.labels
            .insert(crate::names::PROFILE_LABEL.into(), "hardened".into());
        let found = after_command(&info, "/workspaces/ws", &Quiet);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].cleared);
        assert_eq!(mode(), 0o755);
        assert!(report(&ws).is_empty());
    }
}
