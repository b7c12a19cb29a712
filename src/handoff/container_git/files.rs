//! Files devcell writes in its own folders (never ones the container can change, see
//! [`super::nofollow`]): new files, copies of regular files, and handing them to the
//! repository's owner.

use crate::handoff::failure::IoFailed;
use std::io::Write as _;
use std::path::Path;

use super::{ContainerGitError, Result, io};

/// Copies the regular file `from` (opened without following a link, never waiting on a FIFO)
/// to the new file `to`.
pub(super) fn copy_regular(from: &Path, to: &Path, mode: u32) -> Result<()> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut source = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
        .open(from)
        .map_err(io(from))?;
    if !source.metadata().map_err(io(from))?.is_file() {
        return Err(ContainerGitError::Io(IoFailed {
            path: from.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        }));
    }
    let mut target = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(to)
        .map_err(io(to))?;
    std::io::copy(&mut source, &mut target).map_err(io(to))?;
    target.flush().map_err(io(to))
}

/// Creates the new file `path` (mode 0644) holding `bytes`; an existing one is an error.
pub(super) fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))
}

/// Gives everything under `dir` (which devcell just wrote) to the owner of `owner_of` when
/// devcell is root and that owner is not: the container user maps to that uid (spec-note 0250).
/// When `owner_of` is writable by everyone (a root-owned workspace shared that way), so is
/// `dir`: the container user may write where it could write the host's.
pub(super) fn give_to_owner(dir: &Path, owner_of: &Path, may_share: bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let shared =
        may_share && std::fs::metadata(owner_of).is_ok_and(|m| m.permissions().mode() & 0o002 != 0);
    let share = |path: &Path, is_dir: bool| -> Result<()> {
        if shared {
            let mode = if is_dir { 0o777 } else { 0o666 };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(io(path))?;
        }
        Ok(())
    };
    crate::config::ownership::hand_over(dir, owner_of).map_err(io(dir))?;
    share(dir, true)?;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).map_err(io(&folder))?.flatten() {
            let path = entry.path();
            crate::config::ownership::hand_over(&path, owner_of).map_err(io(&path))?;
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            share(&path, is_dir)?;
            if is_dir {
                stack.push(path);
            }
        }
    }
    Ok(())
}
