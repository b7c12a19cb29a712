//! [`resolve`]: a host path the repository influences, made canonical the way the kernel
//! follows it (spec-note 0400, class 1).

use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

/// How many symbolic links [`resolve`] follows before giving up (Linux's `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// The canonical form of `path`: absolute (relative paths are taken against the current
/// directory), every symbolic link followed and every `.`/`..` applied in the order the kernel
/// applies them (`a/link/..` is the parent of the link's *target*). A part that does not exist
/// is kept as written (lexically normalised), so a bind source the engine would create is
/// judged where it would be created; a dangling link is followed to where it points.
///
/// A path through procfs (`/proc/self/cwd`, `/proc/<pid>/root`, `/dev/fd/3`, `/dev/stdin`,
/// or a link in any other procfs mount) is an error: its magic links name what *the process
/// that follows them* sees, so devcell's view says nothing of what the engine daemon mounts
/// (spec-note 0400, attacks F2).
///
/// Errors: `ELOOP` after [`MAX_LINKS`] links; `EACCES` for a path through procfs; any other
/// error reading a link or a folder (`EACCES` for a folder devcell cannot search: the caller
/// refuses, never judging the written text; spec-note 0400, attacks F1).
pub fn resolve(path: &Path) -> io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    if through_procfs(&absolute) {
        return Err(procfs_error());
    }
    let mut pending: Vec<PathBuf> = Vec::new();
    push_components(&mut pending, &absolute);
    let mut resolved = PathBuf::from("/");
    let mut links = 0usize;
    let mut missing = false;
    while let Some(part) = pending.pop() {
        match part.as_os_str().as_bytes() {
            b"" | b"." => {}
            b".." => {
                resolved.pop();
            }
            _ => {
                resolved.push(&part);
                if missing {
                    continue;
                }
                if through_procfs(&resolved) {
                    return Err(procfs_error());
                }
                match std::fs::symlink_metadata(&resolved) {
                    Ok(m) if m.file_type().is_symlink() => {
                        if resolved.parent().is_some_and(is_procfs) {
                            return Err(procfs_error());
                        }
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(io::Error::from_raw_os_error(libc_eloop()));
                        }
                        let target = std::fs::read_link(&resolved)?;
                        resolved.pop();
                        if target.is_absolute() {
                            resolved = PathBuf::from("/");
                        }
                        push_components(&mut pending, &target);
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => missing = true,
                    Err(e)
                        if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
                    {
                        missing = true
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(resolved)
}

/// Whether `path` lies in `/proc` or is one of the `/dev` links into it, by its text.
fn through_procfs(path: &Path) -> bool {
    [
        "/proc",
        "/dev/fd",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// Whether the folder `dir` is on a procfs mount (one mounted somewhere else than `/proc`).
fn is_procfs(dir: &Path) -> bool {
    const PROC_SUPER_MAGIC: u64 = 0x9fa0;
    rustix::fs::statfs(dir).is_ok_and(|s| s.f_type as u64 == PROC_SUPER_MAGIC)
}

/// The error for a path through procfs.
fn procfs_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "it goes through procfs (/proc, /dev/fd), whose links name what the process following them sees, not what devcell sees",
    )
}

fn libc_eloop() -> i32 {
    rustix::io::Errno::LOOP.raw_os_error()
}

/// Pushes `path`'s parts onto the stack `pending` so they pop in order.
fn push_components(pending: &mut Vec<PathBuf>, path: &Path) {
    let parts: Vec<PathBuf> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(PathBuf::from(s)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::host_path::fixtures::tree;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_and_dots_resolve_like_the_kernel() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("out")).unwrap();
        symlink("../host", ws.join("rel")).unwrap();
        symlink("out", ws.join("nested")).unwrap();
        symlink("/", ws.join("root")).unwrap();
        assert_eq!(resolve(&ws.join("out")).unwrap(), host);
        assert_eq!(
            resolve(&ws.join("rel/secret.txt")).unwrap(),
            host.join("secret.txt")
        );
        assert_eq!(resolve(&ws.join("nested")).unwrap(), host);
        assert_eq!(resolve(&ws.join("root")).unwrap(), Path::new("/"));
        // `..` after a link is the parent of its target, not of the link
        assert_eq!(resolve(&ws.join("out/..")).unwrap(), host.parent().unwrap());
        assert_eq!(resolve(&ws.join("sub/../sub/./")).unwrap(), ws.join("sub"));
        assert_eq!(
            resolve(&ws.join("../..")).unwrap(),
            ws.parent().unwrap().parent().unwrap()
        );
    }

    #[test]
    fn missing_parts_are_kept_and_dangling_links_followed() {
        let (_t, ws, host) = tree();
        assert_eq!(resolve(&ws.join("new/dir")).unwrap(), ws.join("new/dir"));
        symlink(host.join("not-yet"), ws.join("dangling")).unwrap();
        assert_eq!(
            resolve(&ws.join("dangling/x")).unwrap(),
            host.join("not-yet/x")
        );
    }

    #[test]
    fn link_loops_are_an_error() {
        let (_t, ws, _) = tree();
        symlink("b", ws.join("a")).unwrap();
        symlink("a", ws.join("b")).unwrap();
        let e = resolve(&ws.join("a")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc_eloop()));
    }
}
