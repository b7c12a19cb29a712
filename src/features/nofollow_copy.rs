//! Copying a folder the repository controls (a local Feature's folder, the folders `features
//! test` copies into its workspace) while something else may be writing it.
//!
//! A process in the workspace's running dev container can turn a listed folder into a link to
//! a host folder between devcell's listing and its copy (attack 28, F2): a copy that takes
//! each entry's type from the listing and then copies by path follows that link and carries
//! host files into the image. So every step here goes through a file descriptor and no path is
//! resolved from the top again: the folder is opened once, each entry is opened relative to
//! its folder's descriptor without following a link (`O_PATH|O_NOFOLLOW`), its type is read
//! from that descriptor (`fstat`, not the listing), a sub-folder is entered through it, and a
//! regular file is read from a descriptor opened `O_NOFOLLOW` and checked to be the entry
//! just judged (same device and inode, still regular). A swap therefore makes the copy take
//! the link as a link (or leave it out) or fail naming the entry; it never reads what the link
//! names (spec-note 0680).

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, Stat};

use crate::config::listing::sorted_names;

/// What a copy does with a symbolic link in the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Recreated as the link it is (its target as written, never followed): what local
    /// Features and `features test` have always done (spec-notes 0066, 0650).
    Keep,
    /// Left out.
    Skip,
}

/// How the copy of the top folder itself is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// Every component from `/` opened without following a link: for a path that was already
    /// resolved (a local Feature's folder, [`super::reference::FeatureRef::local_dir`]), where
    /// a link now can only be one swapped in since the judgement.
    Resolved,
    /// As the kernel resolves the path (the user's own folder, named on the command line);
    /// below it nothing is followed.
    AsGiven,
}

/// The mode a copied regular file gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// The source's permission bits (`0o777` of them: no set-id bit is carried).
    Own,
    /// The source's permission bits, readable by every user.
    OwnReadableByAll,
    /// This mode.
    Fixed(u32),
}

/// How [`copy_tree`] copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOptions {
    /// Symbolic links kept as links or left out.
    pub links: Links,
    /// How the top folder is opened.
    pub root: Root,
    /// The mode of each copied folder.
    pub dir_mode: u32,
    /// The mode of each copied regular file.
    pub file_mode: FileMode,
}

/// A copy that failed, naming the entry (in the source, or the copy being written).
#[derive(Debug, thiserror::Error)]
#[error("`{}`: {source}", path.display())]
pub struct CopyError {
    /// The entry that could not be read or written.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// A copy of the folder `dir` (the user's own, named on the command line: opened as given)
/// in a private temporary folder, made as [`copy_tree`] copies (links kept as links, modes
/// kept): what `features publish` and `templates publish` pack, so a dev container writing the
/// folder meanwhile cannot make them pack a host file through a link swapped in (attack 29, G4;
/// spec-note 0680). Removed when dropped.
///
/// Errors: [`CopyError`] naming the entry; the temporary folder's.
pub fn snapshot(dir: &Path) -> Result<tempfile::TempDir, CopyError> {
    let copy = tempfile::Builder::new()
        .prefix("devcell-pack-")
        .tempdir()
        .map_err(|source| CopyError {
            path: std::env::temp_dir(),
            source,
        })?;
    let options = CopyOptions {
        links: Links::Keep,
        root: Root::AsGiven,
        dir_mode: 0o755,
        file_mode: FileMode::Own,
    };
    copy_tree(dir, copy.path(), &options)?;
    Ok(copy)
}

/// Copies what is inside the folder `from` into the existing folder `to` (devcell's own, not
/// the repository's): folders, regular files and, per [`CopyOptions::links`], links; FIFOs,
/// sockets and devices are left out (never opened). See the module docs for how nothing is
/// followed. A regular file is copied up to the size it had when it was opened (a file that
/// grows meanwhile cannot make the copy grow without end).
///
/// Errors: [`CopyError`] naming the entry; an entry that changed between its judgement and its
/// read (`the entry changed while it was copied`).
pub fn copy_tree(from: &Path, to: &Path, options: &CopyOptions) -> Result<(), CopyError> {
    copy_tree_observed(from, to, options, &mut |_| {})
}

/// [`copy_tree`], calling `listed` with each source folder once its names are listed and
/// before any of its entries is opened: the window a swapping process uses (tests put the swap
/// there).
fn copy_tree_observed(
    from: &Path,
    to: &Path,
    options: &CopyOptions,
    listed: &mut dyn FnMut(&Path),
) -> Result<(), CopyError> {
    let src = open_root(from, options.root).map_err(at(from))?;
    let dst = rustix::fs::open(
        to,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| at(to)(e.into()))?;
    copy_at(&src, from, &dst, to, options, listed)
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> CopyError {
    let path = path.to_path_buf();
    move |source| CopyError { path, source }
}

/// Opens the folder `path` for listing: every component from `/` without following a link
/// under [`Root::Resolved`] (a relative path is made absolute first).
fn open_root(path: &Path, root: Root) -> std::io::Result<OwnedFd> {
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if root == Root::AsGiven {
        return Ok(rustix::fs::open(path, dir_flags, Mode::empty())?);
    }
    let absolute = std::path::absolute(path)?;
    let mut fd = rustix::fs::open("/", dir_flags, Mode::empty())?;
    for part in absolute.components() {
        match part {
            Component::RootDir => {}
            Component::Normal(name) => {
                fd = rustix::fs::openat(&fd, name, dir_flags | OFlags::NOFOLLOW, Mode::empty())
                    .map_err(|e| link_said(e.into()))?;
            }
            // `..` after a link would be the link target's parent: the path was resolved, so
            // one here is refused rather than interpreted
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a resolved path (`.` or `..` in it)",
                ));
            }
        }
    }
    Ok(fd)
}

/// An `ELOOP`/`ENOTDIR` from a no-follow open, said as what it means here.
fn link_said(e: std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code)
            if code == rustix::io::Errno::LOOP.raw_os_error()
                || code == rustix::io::Errno::NOTDIR.raw_os_error() =>
        {
            std::io::Error::other(
                "a folder on the way is now a symbolic link or not a folder (changed since it \
                 was judged; a running container writes the workspace?): not followed",
            )
        }
        _ => e,
    }
}

fn copy_at(
    src: &OwnedFd,
    src_path: &Path,
    dst: &OwnedFd,
    dst_path: &Path,
    options: &CopyOptions,
    listed: &mut dyn FnMut(&Path),
) -> Result<(), CopyError> {
    let names = sorted_names(src).map_err(at(src_path))?;
    listed(src_path);
    for name in names {
        let os_name = OsStr::from_bytes(name.as_bytes());
        let from = src_path.join(os_name);
        let to = dst_path.join(os_name);
        let r_from = |e: rustix::io::Errno| at(&from)(e.into());
        let r_to = |e: rustix::io::Errno| at(&to)(e.into());
        // the entry itself, never what a link names: its type is read from this handle
        let handle = rustix::fs::openat(
            src,
            name.as_c_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(r_from)?;
        let judged = rustix::fs::fstat(&handle).map_err(r_from)?;
        match FileType::from_raw_mode(judged.st_mode) {
            FileType::Directory => {
                let inner = rustix::fs::openat(
                    &handle,
                    c".",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(r_from)?;
                rustix::fs::mkdirat(dst, name.as_c_str(), Mode::from_raw_mode(0o700))
                    .map_err(r_to)?;
                let out = rustix::fs::openat(
                    dst,
                    name.as_c_str(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(r_to)?;
                // the mode is set on the handle, not through the umask or a path
                rustix::fs::fchmod(&out, Mode::from_raw_mode(options.dir_mode)).map_err(r_to)?;
                copy_at(&inner, &from, &out, &to, options, listed)?;
            }
            FileType::Symlink => {
                if options.links == Links::Skip {
                    continue;
                }
                let target = rustix::fs::readlinkat(&handle, c"", Vec::new()).map_err(r_from)?;
                rustix::fs::symlinkat(target.as_c_str(), dst, name.as_c_str()).map_err(r_to)?;
            }
            FileType::RegularFile => {
                let (file, now) = open_judged(src, &name, &judged).map_err(at(&from))?;
                let mode = match options.file_mode {
                    FileMode::Own => now.st_mode & 0o777,
                    FileMode::OwnReadableByAll => now.st_mode & 0o777 | 0o444,
                    FileMode::Fixed(mode) => mode,
                };
                let out = rustix::fs::openat(
                    dst,
                    name.as_c_str(),
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(r_to)?;
                let mut out = File::from(out);
                let size = u64::try_from(now.st_size).unwrap_or(0);
                std::io::copy(&mut file.take(size), &mut out).map_err(at(&from))?;
                rustix::fs::fchmod(&out, Mode::from_raw_mode(mode)).map_err(r_to)?;
            }
            // FIFOs, sockets and devices have no content to copy and are never opened
            _ => {}
        }
    }
    Ok(())
}

/// Opens the regular file `name` in `dir` for reading, without following a link and without
/// blocking (a FIFO swapped in), and checks it is the entry `judged` describes; with its
/// status now.
fn open_judged(dir: &OwnedFd, name: &CStr, judged: &Stat) -> std::io::Result<(File, Stat)> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| link_said(e.into()))?;
    let now = rustix::fs::fstat(&fd)?;
    if now.st_dev != judged.st_dev
        || now.st_ino != judged.st_ino
        || FileType::from_raw_mode(now.st_mode) != FileType::RegularFile
    {
        return Err(std::io::Error::other(
            "the entry changed while it was copied (a running container writes the workspace?): \
             not copied",
        ));
    }
    Ok((File::from(fd), now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    const KEEP: CopyOptions = CopyOptions {
        links: Links::Keep,
        root: Root::Resolved,
        dir_mode: 0o755,
        file_mode: FileMode::Own,
    };

    /// A host folder with a secret, and a source folder beside it.
    fn host_and_source() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(t.path()).unwrap();
        let host = base.join("host");
        fs::create_dir(&host).unwrap();
        fs::write(host.join("secret.txt"), "HOST-SECRET").unwrap();
        let src = base.join("feat");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("sub/note.txt"), "note").unwrap();
        fs::write(src.join("install.sh"), "echo hi").unwrap();
        fs::set_permissions(src.join("install.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        (t, host, src)
    }

    fn holds_secret(dir: &Path) -> bool {
        walkdir(dir).iter().any(|p| {
            fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
                && fs::read_to_string(p).is_ok_and(|s| s.contains("HOST-SECRET"))
        })
    }

    fn walkdir(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            out.push(e.path());
            if e.file_type().unwrap().is_dir() {
                out.extend(walkdir(&e.path()));
            }
        }
        out
    }

    #[test]
    fn files_folders_and_modes_are_copied() {
        let (_t, _host, src) = host_and_source();
        let out = tempfile::tempdir().unwrap();
        copy_tree(&src, out.path(), &KEEP).unwrap();
        assert_eq!(
            fs::read_to_string(out.path().join("sub/note.txt")).unwrap(),
            "note"
        );
        let mode = |p: &str| {
            fs::metadata(out.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("install.sh"), 0o755);
        assert_eq!(mode("sub"), 0o755);
    }

    /// A link in the tree, to a host folder or a host file, is recreated as the link it is
    /// (`Keep`) or left out (`Skip`); what it names is never read.
    #[test]
    fn a_link_in_the_tree_is_not_followed() {
        let (_t, host, src) = host_and_source();
        symlink(&host, src.join("linked-dir")).unwrap();
        symlink(host.join("secret.txt"), src.join("sub/linked-file")).unwrap();
        let out = tempfile::tempdir().unwrap();
        copy_tree(&src, out.path(), &KEEP).unwrap();
        assert_eq!(fs::read_link(out.path().join("linked-dir")).unwrap(), host);
        assert!(
            fs::symlink_metadata(out.path().join("sub/linked-file"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(!holds_secret(out.path()));

        let skipped = tempfile::tempdir().unwrap();
        let skip = CopyOptions {
            links: Links::Skip,
            ..KEEP
        };
        copy_tree(&src, skipped.path(), &skip).unwrap();
        assert!(!skipped.path().join("linked-dir").exists());
        assert!(fs::symlink_metadata(skipped.path().join("sub/linked-file")).is_err());
        assert!(skipped.path().join("sub/note.txt").is_file());
    }

    /// Attack 28, F2, made deterministic: `sub` is a folder when the top folder is listed and
    /// a link to the host folder when the copy reaches it (the hook runs between the two, as
    /// the container's swap loop does). The entry is judged from its own handle, so the link
    /// is copied as a link and no host file is read.
    #[test]
    fn a_folder_swapped_for_a_link_after_the_listing_is_not_followed() {
        let (_t, host, src) = host_and_source();
        let out = tempfile::tempdir().unwrap();
        let top = src.clone();
        let mut swapped = false;
        copy_tree_observed(&src, out.path(), &KEEP, &mut |listed| {
            if listed == top && !swapped {
                swapped = true;
                fs::rename(top.join("sub"), top.join("sub_real")).unwrap();
                symlink(&host, top.join("sub")).unwrap();
            }
        })
        .unwrap();
        assert!(swapped);
        assert!(!holds_secret(out.path()), "a host file was copied");
        assert!(
            fs::symlink_metadata(out.path().join("sub"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    /// The top folder of a resolved path is no longer a folder but a link (swapped since the
    /// judgement): the copy fails naming it, nothing of the host is copied.
    #[test]
    fn a_resolved_top_folder_swapped_for_a_link_is_refused() {
        let (_t, host, src) = host_and_source();
        fs::rename(&src, src.with_file_name("feat_real")).unwrap();
        symlink(&host, &src).unwrap();
        let out = tempfile::tempdir().unwrap();
        let err = copy_tree(&src, out.path(), &KEEP).unwrap_err();
        assert_eq!(err.path, src);
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(!holds_secret(out.path()));
    }

    /// A regular file swapped for another between its judgement and its read is not copied:
    /// the read handle must be the judged entry.
    #[test]
    fn a_file_replaced_after_its_judgement_fails_the_copy() {
        let (_t, _host, src) = host_and_source();
        let judged = rustix::fs::stat(src.join("install.sh")).unwrap();
        // moved aside, not removed: its inode stays taken, so the new file's differs
        fs::rename(src.join("install.sh"), src.join("install.old")).unwrap();
        fs::write(src.join("install.sh"), "other").unwrap();
        let dir =
            rustix::fs::open(&src, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let err = open_judged(&dir, c"install.sh", &judged).unwrap_err();
        assert!(err.to_string().contains("changed"), "{err}");
    }

    /// spec-note 0680 (attack 29, G4): what the publishers pack is a snapshot in which a link
    /// stays a link: the host folder it names is never copied.
    #[test]
    fn a_snapshot_keeps_links_as_links() {
        let dir = tempfile::tempdir().unwrap();
        let (src, outside) = (dir.path().join("src"), dir.path().join("outside"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "TRIPWIRE").unwrap();
        std::fs::write(src.join("install.sh"), "echo hi\n").unwrap();
        std::os::unix::fs::symlink(&outside, src.join("sub")).unwrap();
        let copy = snapshot(&src).unwrap();
        assert_eq!(
            std::fs::read_to_string(copy.path().join("install.sh")).unwrap(),
            "echo hi\n"
        );
        let sub = std::fs::symlink_metadata(copy.path().join("sub")).unwrap();
        assert!(sub.file_type().is_symlink());
        let path = copy.path().to_path_buf();
        drop(copy);
        assert!(!path.exists(), "removed when dropped");
    }
}
