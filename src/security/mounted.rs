//! After the start, before any hook: is the container's workspace mount the folder devcell
//! judged (spec-note 0663)? Docker records a bind's source as the path it was given and the
//! runtime follows links when it mounts, so only what was mounted can say whether a judged
//! folder was swapped between the judgement and the start (spec-note 0478). devcell compares
//! the file identity (`st_dev`, `st_ino`) of the judged canonical host folder with that of the
//! mount's target as the container's init process sees it (`/proc/<pid>/root`, the target
//! opened with `RESOLVE_IN_ROOT`, so the container's own links stay inside its root).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// A file's identity on this host: device and inode.
pub type FileId = (u64, u64);

/// What the post-start check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountCheck {
    /// The mounted folder is the judged one.
    Same,
    /// The container's root is not reachable from here (rootless engine, another machine, a
    /// Podman machine, a container already ended): not checked, with why.
    Skipped(String),
    /// The mounted folder is another one: with what each is.
    Different {
        /// The judged host folder's identity.
        judged: FileId,
        /// The mount target's identity, seen through the container's root.
        mounted: FileId,
    },
}

/// The pure comparison: `judged` (the judged folder's identity, or why it could not be read)
/// with `mounted`: outer `Err`, why the container's root could not be reached (a skip);
/// inner, the target's identity or why it could not be read inside a reachable root (an
/// error: a started container without its workspace mount is not what was judged).
pub fn compare(
    judged: Result<FileId, String>,
    mounted: Result<Result<FileId, String>, String>,
) -> Result<MountCheck, String> {
    let judged = judged?;
    match mounted {
        Err(why) => Ok(MountCheck::Skipped(why)),
        Ok(Err(why)) => Err(why),
        Ok(Ok(m)) if m == judged => Ok(MountCheck::Same),
        Ok(Ok(mounted)) => Ok(MountCheck::Different { judged, mounted }),
    }
}

/// Checks that `target` (an absolute path in the container) in the container whose init
/// process is `pid` is the host folder `judged` (canonical).
///
/// Errors: a sentence when the judged folder cannot be read, or the target cannot inside a
/// reachable root (then nothing can be compared and the caller refuses).
pub fn check(pid: u32, judged: &Path, target: &str) -> Result<MountCheck, String> {
    let judged_id = std::fs::metadata(judged)
        .map(|m| (m.dev(), m.ino()))
        .map_err(|e| {
            format!(
                "the judged folder `{}` cannot be read: {e}",
                judged.display()
            )
        });
    compare(judged_id, mounted_id(pid, target))
}

/// The identity of `target` below `/proc/<pid>/root`, resolved inside that root (outer `Err`:
/// the root is not reachable).
fn mounted_id(pid: u32, target: &str) -> Result<Result<FileId, String>, String> {
    let root_path = format!("/proc/{pid}/root");
    let root = rustix::fs::open(
        root_path.as_str(),
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        format!(
            "`{root_path}` cannot be opened: {}",
            std::io::Error::from(e)
        )
    })?;
    Ok(id_in(&root, target))
}

/// The identity of `target` opened below the folder `root`, resolved inside it.
fn id_in(root: &std::os::fd::OwnedFd, target: &str) -> Result<FileId, String> {
    let relative = target.trim_start_matches('/');
    let relative = if relative.is_empty() { "." } else { relative };
    let fd = rustix::fs::openat2(
        root,
        relative,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| {
        format!(
            "`{target}` cannot be opened in the container's root: {}",
            std::io::Error::from(e)
        )
    })?;
    let st = rustix::fs::fstat(&fd)
        .map_err(|e| format!("`{target}` cannot be read: {}", std::io::Error::from(e)))?;
    Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec-note 0663: the same identity passes, another is a difference, an unreachable root
    /// is a skip, an unreadable judged folder an error.
    #[test]
    fn the_mounted_folder_is_compared_by_device_and_inode() {
        assert_eq!(compare(Ok((1, 2)), Ok(Ok((1, 2)))), Ok(MountCheck::Same));
        assert_eq!(
            compare(Ok((1, 2)), Ok(Ok((1, 3)))),
            Ok(MountCheck::Different {
                judged: (1, 2),
                mounted: (1, 3)
            })
        );
        assert_eq!(
            compare(Ok((1, 2)), Err("no root".into())),
            Ok(MountCheck::Skipped("no root".into()))
        );
        assert!(compare(Err("gone".into()), Ok(Ok((1, 2)))).is_err());
        assert!(compare(Ok((1, 2)), Ok(Err("no target".into()))).is_err());
    }

    /// Through this process's own root: a folder is itself, another folder is not, and a link
    /// in the root is resolved inside it (here the host's root is the root).
    #[test]
    fn a_folder_seen_through_a_proc_root_is_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(ws.join("other")).unwrap();
        let pid = std::process::id();
        let target = ws.to_str().unwrap();
        assert_eq!(check(pid, &ws, target), Ok(MountCheck::Same));
        assert!(matches!(
            check(pid, &ws.join("other"), target),
            Ok(MountCheck::Different { .. })
        ));
        assert!(check(pid, &ws, "/no/such/folder").is_err());
        assert!(matches!(
            check(u32::MAX, &ws, target),
            Ok(MountCheck::Skipped(_))
        ));
    }
}
