//! Writing inside the workspace folder through folder descriptors (attack 31, M4): each folder
//! on the way is opened relative to the one before it with `O_NOFOLLOW`, and files are created
//! and renamed relative to their folder's descriptor, so a folder swapped for a link after
//! [`super::check_targets`] looked is refused, never written through. No path is resolved from
//! the top again.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

/// Whether `e` says a link (or something not a folder) stood where a folder or file was
/// opened without following links.
pub(super) fn is_link_met(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == Errno::LOOP.raw_os_error() || code == Errno::NOTDIR.raw_os_error()
    )
}

/// The folder `rel` (relative, plain components only) inside the folder `root`, opened one
/// component at a time from `root`'s descriptor, each `O_DIRECTORY|O_NOFOLLOW`; a missing
/// one is created (mode 0755 before the umask) when `create`.
///
/// Errors: `ELOOP`/`ENOTDIR` ([`is_link_met`]) for a link or a file on the way; `ENOENT`
/// for a missing folder without `create`; `EINVAL` for a component that is not plain.
pub(super) fn open_dir(root: &Path, rel: &Path, create: bool) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(root, flags, Mode::empty())?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Err(Errno::INVAL.into());
        };
        let next = match rustix::fs::openat(&dir, name, flags | OFlags::NOFOLLOW, Mode::empty()) {
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                rustix::fs::openat(&dir, name, flags | OFlags::NOFOLLOW, Mode::empty())?
            }
            other => other?,
        };
        dir = next;
    }
    Ok(dir)
}

/// The regular file `name` in `dir`, opened without following a link: its bytes and
/// permission bits.
///
/// Errors: `ELOOP` for a link; `EINVAL` for something other than a regular file; the read's.
pub(super) fn read_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<(Vec<u8>, u32)> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let stat = rustix::fs::fstat(&fd)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(Errno::INVAL.into());
    }
    let mut data = Vec::new();
    File::from(fd).read_to_end(&mut data)?;
    Ok((data, stat.st_mode & 0o777))
}

/// Writes `data` as `name` in `dir` with permission bits `mode`: a new temporary file created
/// `O_EXCL|O_NOFOLLOW` beside it, renamed over `name` (`renameat`), so a link at `name` is
/// replaced, never written through, and a reader never sees half a file. The temporary file
/// is removed when anything fails.
///
/// Errors: the create's, the write's, the rename's.
pub(super) fn write_at(dir: &OwnedFd, name: &OsStr, data: &[u8], mode: u32) -> std::io::Result<()> {
    let tmp = temp_name();
    let fd = rustix::fs::openat(
        dir,
        &tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let written = (|| -> std::io::Result<()> {
        let mut file = File::from(fd);
        file.write_all(data)?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o7777))?;
        rustix::fs::renameat(dir, &tmp, dir, name)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = rustix::fs::unlinkat(dir, &tmp, AtFlags::empty());
    }
    written
}

/// `.devcell-<pid>-<nanos>-<n>`: a name no other writer in this folder picks.
fn temp_name() -> OsString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    OsString::from(format!(
        ".devcell-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack 31, M4: a folder on the way that is a link (swapped in after the check) is
    /// refused and nothing is written where it points; missing folders are made; a link at
    /// the file's own name is replaced, its target untouched.
    #[test]
    fn a_link_on_the_way_is_refused_and_a_link_at_the_name_replaced() {
        let ws = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(host.path(), ws.path().join(".devcontainer")).unwrap();
        let err = open_dir(ws.path(), Path::new(".devcontainer/sub"), true).unwrap_err();
        assert!(is_link_met(&err), "{err}");
        assert!(std::fs::read_dir(host.path()).unwrap().next().is_none());

        let dir = open_dir(ws.path(), Path::new("a/b"), true).unwrap();
        write_at(&dir, OsStr::new("f.txt"), b"hello", 0o640).unwrap();
        let written = ws.path().join("a/b/f.txt");
        assert_eq!(std::fs::read(&written).unwrap(), b"hello");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&written).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(read_at(&dir, OsStr::new("f.txt")).unwrap().0, b"hello");

        let secret = host.path().join("secret");
        std::fs::write(&secret, "host").unwrap();
        std::os::unix::fs::symlink(&secret, ws.path().join("a/b/g.txt")).unwrap();
        assert!(is_link_met(
            &read_at(&dir, OsStr::new("g.txt")).unwrap_err()
        ));
        write_at(&dir, OsStr::new("g.txt"), b"new", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "host");
        assert!(
            !std::fs::symlink_metadata(ws.path().join("a/b/g.txt"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(open_dir(ws.path(), Path::new("missing"), false).is_err());
        assert_eq!(
            std::fs::read_dir(ws.path().join("a/b")).unwrap().count(),
            2,
            "no temporary file is left"
        );
    }
}
