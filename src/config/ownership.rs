//! Host-side ownership: which numeric user devcell runs as, who owns the workspace, and whose
//! files the workspace's new files must be (spec-note 0250).
//!
//! One rule, the *workspace user* ([`workspace_user`]), serves three places:
//! - `updateRemoteUserUID` ([spec](https://containers.dev/implementors/json_reference/#image-specific)):
//!   the remote user gets the workspace user's uid/gid, so what the agent writes in the
//!   bind-mounted workspace belongs to that user and git's ownership check (`safe.directory`)
//!   passes inside the container without an exception;
//! - devcell's own files in the workspace (the handoff context file, `AGENTS.md`) are handed to
//!   that user when devcell runs as root ([`hand_over`]);
//! - host-side git run by a root devcell in a user's repository runs as the repository's owner
//!   ([`run_as_owner`]), so git's ownership check passes and nothing the repository's
//!   configuration names runs as root.
//!
//! The workspace user is the host user devcell runs as; when that is root (CI, `sudo`), the
//! owner of the workspace folder when it is not root; when both are root, nobody
//! (`None`: ids stay as they are).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// A numeric user and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// The user id.
    pub uid: u32,
    /// The (primary) group id.
    pub gid: u32,
}

/// The real user and group ids of this process.
pub fn process_ids() -> Ids {
    Ids {
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
    }
}

/// The owner (uid, gid) of `path`, symbolic links followed; `None` when it cannot be read.
pub fn owner(path: &Path) -> Option<Ids> {
    let m = std::fs::metadata(path).ok()?;
    Some(Ids {
        uid: m.uid(),
        gid: m.gid(),
    })
}

/// The workspace user (pure): `process` when it is not root; else `workspace_owner` when that
/// is known and not root; else `None` (everything is root: nothing to map).
pub fn workspace_user(process: Ids, workspace_owner: Option<Ids>) -> Option<Ids> {
    if process.uid != 0 {
        return Some(process);
    }
    workspace_owner.filter(|o| o.uid != 0)
}

/// [`workspace_user`] of this process for the workspace folder `workspace`.
pub fn workspace_user_of(workspace: &Path) -> Option<Ids> {
    workspace_user(process_ids(), owner(workspace))
}

/// Whose files devcell's own writes in `workspace` must become (pure): the owner, when
/// `process` is root and the owner is not; else `None` (the files are already the right
/// user's: the process's own).
pub fn hand_over_to(process: Ids, workspace_owner: Option<Ids>) -> Option<Ids> {
    (process.uid == 0)
        .then_some(workspace_owner)
        .flatten()
        .filter(|o| o.uid != 0)
}

/// Gives `path` (not following a final symbolic link) to the owner of `workspace` when this
/// process is root and that owner is not ([`hand_over_to`]); does nothing otherwise.
///
/// Errors: the `lchown(2)` failure.
pub fn hand_over(path: &Path, workspace: &Path) -> std::io::Result<()> {
    match hand_over_to(process_ids(), owner(workspace)) {
        Some(ids) => std::os::unix::fs::lchown(path, Some(ids.uid), Some(ids.gid)),
        None => Ok(()),
    }
}

/// Makes `command` (a host-side `git` in the repository or folder `dir`) run as the owner of
/// `dir` when this process is root and the owner is not: git's ownership check then passes as
/// it does for the user, and nothing the repository's configuration names (`core.fsmonitor`,
/// filters) runs as root. `HOME` and `XDG_CONFIG_HOME` are removed for it (root's would be
/// unreadable; git then reads no global configuration). Supplementary groups are dropped.
/// Returns the ids used, if any.
pub fn run_as_owner(command: &mut std::process::Command, dir: &Path) -> Option<Ids> {
    use std::os::unix::process::CommandExt as _;
    let ids = hand_over_to(process_ids(), owner(dir))?;
    command
        .uid(ids.uid)
        .gid(ids.gid)
        .env_remove("HOME")
        .env_remove("XDG_CONFIG_HOME");
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: Ids = Ids { uid: 0, gid: 0 };
    const USER: Ids = Ids {
        uid: 1000,
        gid: 1000,
    };
    const OWNER: Ids = Ids {
        uid: 4242,
        gid: 4343,
    };

    #[test]
    fn the_host_user_wins_unless_it_is_root() {
        assert_eq!(workspace_user(USER, Some(OWNER)), Some(USER));
        assert_eq!(workspace_user(USER, None), Some(USER));
        assert_eq!(workspace_user(ROOT, Some(OWNER)), Some(OWNER));
        assert_eq!(workspace_user(ROOT, Some(ROOT)), None);
        assert_eq!(workspace_user(ROOT, None), None);
    }

    #[test]
    fn only_root_hands_files_over() {
        assert_eq!(hand_over_to(ROOT, Some(OWNER)), Some(OWNER));
        assert_eq!(hand_over_to(ROOT, Some(ROOT)), None);
        assert_eq!(hand_over_to(USER, Some(OWNER)), None);
        assert_eq!(hand_over_to(ROOT, None), None);
    }

    #[test]
    fn owner_of_a_temporary_folder_is_this_process() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(owner(dir.path()).map(|o| o.uid), Some(process_ids().uid));
        assert_eq!(owner(&dir.path().join("missing")), None);
    }
}
