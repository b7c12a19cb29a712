//! Writing inside the container git directory, which a running container may change while
//! devcell writes: every step goes through a file descriptor opened without following a link
//! (`openat` with `O_NOFOLLOW`), so a folder the container swaps for a link to a host path
//! makes the step fail instead of reaching that path (spec-note 0436). The top folder itself
//! is devcell's own and a mount point in the container (it cannot be replaced from there).

use super::{ContainerGitError, Result, io};
use crate::handoff::failure::IoFailed;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path};

fn open_dir(parent: Option<&OwnedFd>, name: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(match parent {
        Some(fd) => rustix::fs::openat(fd, name, flags, Mode::empty())?,
        None => rustix::fs::open(name, flags, Mode::empty())?,
    })
}

fn invalid(path: std::path::PathBuf, why: &str) -> ContainerGitError {
    ContainerGitError::Io(IoFailed {
        path,
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string()),
    })
}

/// The folder `root/rel`, each missing folder made (mode 0755), none followed as a link.
fn dirs(root: &Path, rel: &Path) -> Result<OwnedFd> {
    let whole = root.join(rel);
    let mut fd = open_dir(None, root).map_err(io(root))?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Err(invalid(whole, "not a plain relative path"));
        };
        match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(io(&whole)(e.into())),
        }
        fd = open_dir(Some(&fd), Path::new(name)).map_err(io(&whole))?;
    }
    Ok(fd)
}

/// The folder `root/rel`, opened without following a link at any step; `None` when it is
/// missing or any step is not a folder.
fn existing_dir(root: &Path, rel: &Path) -> Option<OwnedFd> {
    let mut fd = open_dir(None, root).ok()?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return None;
        };
        fd = open_dir(Some(&fd), Path::new(name)).ok()?;
    }
    Some(fd)
}

/// The entries of the folder `root/rel` with whether each is a folder (`Some(true)`), a
/// regular file (`Some(false)`) or anything else (`None`), none followed as a link; empty
/// when the folder is missing or reached through a link.
pub(super) fn list(root: &Path, rel: &Path) -> Vec<(String, Option<bool>)> {
    list_at_most(root, rel, usize::MAX)
}

/// [`list`], stopping after `max` entries (a folder of millions of files costs no more).
pub(super) fn list_at_most(root: &Path, rel: &Path, max: usize) -> Vec<(String, Option<bool>)> {
    let Some(fd) = existing_dir(root, rel) else {
        return Vec::new();
    };
    let Ok(listing) = rustix::fs::Dir::read_from(&fd) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in listing.map_while(std::result::Result::ok) {
        if out.len() >= max {
            break;
        }
        let Ok(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        let kind = rustix::fs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode))
            .and_then(|k| match k {
                rustix::fs::FileType::Directory => Some(true),
                rustix::fs::FileType::RegularFile => Some(false),
                _ => None,
            });
        out.push((name, kind));
    }
    out
}

/// The regular file `root/rel`, opened for reading without following a link at any step
/// and without waiting on a FIFO.
pub(super) fn open_file(root: &Path, rel: &Path) -> std::io::Result<std::fs::File> {
    let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
    let (Some(parent), Some(leaf)) = (rel.parent(), rel.file_name()) else {
        return Err(not_found());
    };
    let dir = existing_dir(root, parent).ok_or_else(not_found)?;
    let fd = rustix::fs::openat(
        &dir,
        leaf,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Makes the folders of `rel` below `root` (see the module docs).
pub(super) fn create_dirs(root: &Path, rel: &Path) -> Result<()> {
    dirs(root, rel).map(drop)
}

/// Creates the new file `root/rel` (its folders made as by [`create_dirs`]) holding
/// `bytes`; an existing entry, a link included, is an error.
pub(super) fn write_new(root: &Path, rel: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let whole = root.join(rel);
    let (Some(parent), Some(leaf)) = (rel.parent(), rel.file_name()) else {
        return Err(invalid(whole, "no file name"));
    };
    let dir = dirs(root, parent)?;
    let fd = rustix::fs::openat(
        &dir,
        leaf,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|e| io(&whole)(e.into()))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).map_err(io(&whole))
}

/// Gives everything under `dir` to the owner of `owner_of` when devcell is root and that
/// owner is not (and makes it writable by everyone when `may_share` and `owner_of` is), as
/// `super::files::give_to_owner` does for devcell's private folders, but for a folder the
/// container can change: each entry is given away relative to its folder's descriptor
/// (`AT_SYMLINK_NOFOLLOW`), and only folders opened without following a link are entered,
/// so no host file outside `dir` changes owner or mode whatever the container swaps.
pub(super) fn give_to_owner(dir: &Path, owner_of: &Path, may_share: bool) -> Result<()> {
    use crate::config::ownership::{hand_over_to, owner, process_ids};
    use std::os::unix::fs::PermissionsExt as _;
    let ids = hand_over_to(process_ids(), owner(owner_of));
    let shared =
        may_share && std::fs::metadata(owner_of).is_ok_and(|m| m.permissions().mode() & 0o002 != 0);
    if ids.is_none() && !shared {
        return Ok(());
    }
    let top = open_dir(None, dir).map_err(io(dir))?;
    give(&top, dir, ids, shared)?;
    if let Some(ids) = ids {
        rustix::fs::fchown(
            &top,
            Some(rustix::fs::Uid::from_raw(ids.uid)),
            Some(rustix::fs::Gid::from_raw(ids.gid)),
        )
        .map_err(|e| io(dir)(e.into()))?;
    }
    if shared {
        rustix::fs::fchmod(&top, Mode::from_raw_mode(0o777)).map_err(|e| io(dir)(e.into()))?;
    }
    Ok(())
}

fn give(
    folder: &OwnedFd,
    path: &Path,
    ids: Option<crate::config::ownership::Ids>,
    shared: bool,
) -> Result<()> {
    let mut names = Vec::new();
    let listing = rustix::fs::Dir::read_from(folder).map_err(|e| io(path)(e.into()))?;
    for entry in listing {
        let entry = entry.map_err(|e| io(path)(e.into()))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
        }
    }
    for name in names {
        let here = path.join(&name);
        if let Some(ids) = ids {
            rustix::fs::chownat(
                folder,
                name.as_os_str(),
                Some(rustix::fs::Uid::from_raw(ids.uid)),
                Some(rustix::fs::Gid::from_raw(ids.gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| io(&here)(e.into()))?;
        }
        let Ok(stat) = rustix::fs::statat(folder, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
        else {
            continue;
        };
        let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
        if kind == rustix::fs::FileType::Directory {
            // a folder swapped for a link since the `statat` is not entered (NOFOLLOW)
            let Ok(child) = open_dir(Some(folder), Path::new(&name)) else {
                continue;
            };
            give(&child, &here, ids, shared)?;
            if shared {
                rustix::fs::fchmod(&child, Mode::from_raw_mode(0o777))
                    .map_err(|e| io(&here)(e.into()))?;
            }
        } else if shared && kind == rustix::fs::FileType::RegularFile {
            let Ok(file) = rustix::fs::openat(
                folder,
                name.as_os_str(),
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            rustix::fs::fchmod(&file, Mode::from_raw_mode(0o666))
                .map_err(|e| io(&here)(e.into()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder the container swapped for a link to a host folder: nothing is written
    /// there and nothing there changes owner.
    #[test]
    fn links_inside_the_container_git_directory_are_never_followed() {
        use std::os::unix::fs::MetadataExt as _;
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("refs")).unwrap();

        assert!(write_new(dir.path(), Path::new("refs/remotes/HEAD"), b"x").is_err());
        assert!(create_dirs(dir.path(), Path::new("refs/heads")).is_err());
        assert!(!outside.path().join("remotes").exists());
        assert!(!outside.path().join("heads").exists());

        write_new(dir.path(), Path::new("info/exclude"), b"x").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("info/exclude")).unwrap(),
            b"x"
        );
        assert!(write_new(dir.path(), Path::new("info/exclude"), b"y").is_err());

        // given to another owner only when devcell is root (as in CI); the link's target
        // keeps its owner either way
        let owner_of = tempfile::tempdir().unwrap();
        let root = rustix::process::getuid().is_root();
        if root {
            std::os::unix::fs::chown(owner_of.path(), Some(4242), Some(4242)).unwrap();
        }
        let before = std::fs::metadata(outside.path().join("secret"))
            .unwrap()
            .uid();
        give_to_owner(dir.path(), owner_of.path(), false).unwrap();
        let after = std::fs::metadata(outside.path().join("secret"))
            .unwrap()
            .uid();
        assert_eq!(before, after);
        if root {
            let exclude = std::fs::metadata(dir.path().join("info/exclude")).unwrap();
            assert_eq!(exclude.uid(), 4242);
            let link = std::fs::symlink_metadata(dir.path().join("refs")).unwrap();
            assert_eq!(link.uid(), 4242);
        }
    }
}
