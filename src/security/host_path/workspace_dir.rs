//! devcell's own writes into the workspace ([`WorkspaceDir`]) and into output folders a
//! repository may have laid out ([`OutputDir`]): relative to folder handles opened with
//! `O_NOFOLLOW`, never through a symbolic link.

use std::ffi::OsStr;
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

use crate::config::ownership::{self, Ids};
use crate::config::workspace::normalize_lexically;

/// A workspace folder opened once; devcell's writes below it are made relative to this handle
/// and never follow a symbolic link below it (see the module docs).
#[derive(Debug)]
pub struct WorkspaceDir {
    fd: OwnedFd,
    root: PathBuf,
}

/// Why a write below a [`WorkspaceDir`] was not made.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A part of the path is a symbolic link or not a folder/file: nothing was written.
    #[error("`{}` is a symbolic link or not a regular file or folder: devcell does not write through it", path.display())]
    Unsafe {
        /// The offending path.
        path: PathBuf,
    },
    /// The path is absolute or holds `..`.
    #[error("`{path}` is not a relative path inside the workspace")]
    InvalidPath {
        /// The path as given.
        path: String,
    },
    /// The file exists and devcell must not replace it.
    #[error("`{}` exists and was not written by devcell: left as it is", path.display())]
    NotOwned {
        /// The file.
        path: PathBuf,
    },
    /// The file exists (a no-clobber write).
    #[error("`{}` exists", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A system call failed.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
}

/// How [`WorkspaceDir::write`] treats an existing file.
pub enum Existing<'a> {
    /// Replace it only when the predicate, given its bytes (at most 16 MiB), says devcell wrote
    /// it.
    ReplaceIfOwned(&'a dyn Fn(&[u8]) -> bool),
    /// Replace it (e.g. the lockfile).
    Replace,
    /// Never replace it: [`WriteError::Exists`].
    Keep,
}

const MAX_OWNED_READ: u64 = 16 * 1024 * 1024;

fn errno_io(path: &Path) -> impl Fn(rustix::io::Errno) -> WriteError + '_ {
    move |e| {
        if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
            WriteError::Unsafe {
                path: path.to_path_buf(),
            }
        } else {
            WriteError::Io {
                path: path.to_path_buf(),
                source: e.into(),
            }
        }
    }
}

impl WorkspaceDir {
    /// Opens the workspace folder `root` (the user's choice: a link there is followed once).
    ///
    /// Errors: [`WriteError::Io`].
    pub fn open(root: &Path) -> std::result::Result<WorkspaceDir, WriteError> {
        let fd = rustix::fs::open(
            root,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WriteError::Io {
            path: root.to_path_buf(),
            source: e.into(),
        })?;
        Ok(WorkspaceDir {
            fd,
            root: root.to_path_buf(),
        })
    }

    /// The workspace folder as opened.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `bytes` to `rel` (below the root) atomically: missing folders are created (the
    /// first one created gets a `.gitignore` holding `*` when `ignore_new_folders`), a
    /// temporary file is made in the target's folder and renamed into place, all relative to
    /// folder handles opened with `O_NOFOLLOW`. A root devcell gives every folder and file it
    /// creates to the workspace's owner (spec-note 0250). Returns the written file's path.
    ///
    /// Errors: [`WriteError::InvalidPath`], [`WriteError::Unsafe`] (a part is a symbolic link
    /// or of the wrong type), [`WriteError::NotOwned`] / [`WriteError::Exists`] (per
    /// `existing`), [`WriteError::Io`].
    pub fn write(
        &self,
        rel: &str,
        bytes: &[u8],
        mode: u32,
        existing: Existing<'_>,
        ignore_new_folders: bool,
    ) -> std::result::Result<PathBuf, WriteError> {
        let parts = relative_parts(rel)?;
        let (name, folders) = parts.split_last().expect("not empty");
        let owner = self.new_files_owner();
        let opened = self.open_folders(folders, owner)?;
        if ignore_new_folders && let Some((first, first_path)) = &opened.first_created {
            let ignore = first_path.join(".gitignore");
            self.create_file(first, OsStr::new(".gitignore"), &ignore, 0o644, owner)
                .and_then(|fd| {
                    write_all(
                        fd,
                        b"# created by devcell: keep its files out of git\n*\n",
                        &ignore,
                    )
                })?;
        }
        check_existing(&opened.dir, name, &opened.path.join(name), &existing)?;
        self.replace(&opened, name, bytes, mode, &existing, owner)
    }

    /// Who devcell's new folders and files go to: the workspace's owner when devcell runs as
    /// root, else nobody (they stay the process's).
    fn new_files_owner(&self) -> Option<Ids> {
        ownership::hand_over_to(
            ownership::process_ids(),
            rustix::fs::fstat(&self.fd).ok().map(|s| Ids {
                uid: s.st_uid,
                gid: s.st_gid,
            }),
        )
    }

    /// Opens (creating the missing ones) `folders` below the root, each relative to its
    /// parent's handle with `O_NOFOLLOW`.
    fn open_folders(
        &self,
        folders: &[&OsStr],
        owner: Option<Ids>,
    ) -> std::result::Result<OpenedFolder, WriteError> {
        let mut dir: Option<OwnedFd> = None;
        let mut path = self.root.clone();
        let mut first_created: Option<(OwnedFd, PathBuf)> = None;
        for folder in folders {
            path.push(folder);
            let parent = dir.as_ref().unwrap_or(&self.fd);
            let open = || {
                rustix::fs::openat(
                    parent,
                    *folder,
                    OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            let fd = match open() {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT) => {
                    match rustix::fs::mkdirat(parent, *folder, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(errno_io(&path)(e)),
                    }
                    let fd = open().map_err(errno_io(&path))?;
                    give(owner, &fd, &path)?;
                    if first_created.is_none() {
                        let dup =
                            rustix::io::fcntl_dupfd_cloexec(&fd, 0).map_err(errno_io(&path))?;
                        first_created = Some((dup, path.clone()));
                    }
                    fd
                }
                Err(e) => return Err(errno_io(&path)(e)),
            };
            dir = Some(fd);
        }
        let dir = dir
            .unwrap_or(rustix::io::fcntl_dupfd_cloexec(&self.fd, 0).map_err(errno_io(&self.root))?);
        Ok(OpenedFolder {
            dir,
            path,
            first_created,
        })
    }

    /// Writes `bytes` to a temporary file in `folder` and renames it to `name` (never over an
    /// existing file when [`Existing::Keep`]); the temporary file is removed when that fails.
    fn replace(
        &self,
        folder: &OpenedFolder,
        name: &OsStr,
        bytes: &[u8],
        mode: u32,
        existing: &Existing<'_>,
        owner: Option<Ids>,
    ) -> std::result::Result<PathBuf, WriteError> {
        let dir = &folder.dir;
        let target = folder.path.join(name);
        // a temporary name only devcell uses, created exclusively (never through a link)
        let tmp_name = format!(
            ".devcell-tmp-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let tmp_path = folder.path.join(&tmp_name);
        let fd = self.create_file(dir, OsStr::new(&tmp_name), &tmp_path, mode, owner)?;
        let written = write_all(fd, bytes, &tmp_path);
        let renamed = written.and_then(|()| {
            let flags = match existing {
                Existing::Keep => RenameFlags::NOREPLACE,
                _ => RenameFlags::empty(),
            };
            rustix::fs::renameat_with(dir, tmp_name.as_str(), dir, name, flags).map_err(|e| {
                if e == rustix::io::Errno::EXIST {
                    WriteError::Exists {
                        path: target.clone(),
                    }
                } else {
                    errno_io(&target)(e)
                }
            })
        });
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        }
        renamed.map(|()| target)
    }

    /// Creates `name` in `dir` exclusively (`O_EXCL|O_NOFOLLOW`), mode `mode`, owned as
    /// devcell's files are.
    fn create_file(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        path: &Path,
        mode: u32,
        owner: Option<Ids>,
    ) -> std::result::Result<OwnedFd, WriteError> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(errno_io(path))?;
        // the umask must not narrow what the agent (another uid) needs to read
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(errno_io(path))?;
        give(owner, &fd, path)?;
        Ok(fd)
    }
}

/// The folder a [`WorkspaceDir::write`] writes into, opened.
struct OpenedFolder {
    /// Its handle.
    dir: OwnedFd,
    /// Its path.
    path: PathBuf,
    /// The first folder the write created, if it created one (for its `.gitignore`).
    first_created: Option<(OwnedFd, PathBuf)>,
}

/// The parts of a write's relative path: normal names only, at least one.
fn relative_parts(rel: &str) -> std::result::Result<Vec<&OsStr>, WriteError> {
    Path::new(rel)
        .components()
        .map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect::<Option<_>>()
        .filter(|p: &Vec<&OsStr>| !p.is_empty())
        .ok_or_else(|| WriteError::InvalidPath {
            path: rel.to_string(),
        })
}

/// Gives `fd` to `owner` (see [`WorkspaceDir::write`]); nothing when there is none.
fn give(owner: Option<Ids>, fd: &OwnedFd, path: &Path) -> std::result::Result<(), WriteError> {
    match owner {
        Some(ids) => rustix::fs::fchown(
            fd,
            Some(rustix::fs::Uid::from_raw(ids.uid)),
            Some(rustix::fs::Gid::from_raw(ids.gid)),
        )
        .map_err(errno_io(path)),
        None => Ok(()),
    }
}

/// Whether `name` in `dir` may be replaced: absent, or a regular file `existing` allows to
/// replace (read without following a link, at most [`MAX_OWNED_READ`] bytes).
fn check_existing(
    dir: &OwnedFd,
    name: &OsStr,
    target: &Path,
    existing: &Existing<'_>,
) -> std::result::Result<(), WriteError> {
    let target = target.to_path_buf();
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                return Err(WriteError::Unsafe { path: target });
            }
            match existing {
                Existing::Keep => Err(WriteError::Exists { path: target }),
                Existing::Replace => Ok(()),
                Existing::ReplaceIfOwned(owned) => {
                    let fd = rustix::fs::openat(
                        dir,
                        name,
                        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
                        Mode::empty(),
                    )
                    .map_err(errno_io(&target))?;
                    let stat = rustix::fs::fstat(&fd).map_err(errno_io(&target))?;
                    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
                        || stat.st_size as u64 > MAX_OWNED_READ
                    {
                        return Err(WriteError::NotOwned { path: target });
                    }
                    let mut bytes = Vec::new();
                    std::fs::File::from(fd)
                        .take(MAX_OWNED_READ)
                        .read_to_end(&mut bytes)
                        .map_err(|source| WriteError::Io {
                            path: target.clone(),
                            source,
                        })?;
                    if owned(&bytes) {
                        Ok(())
                    } else {
                        Err(WriteError::NotOwned { path: target })
                    }
                }
            }
        }
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(errno_io(&target)(e)),
    }
}

/// A folder devcell writes its own output files into that a repository may have laid out,
/// such as `features package`'s default `./output` (spec-note 0400): a folder below the
/// current folder `cwd` is written relative to `cwd`'s handle ([`WorkspaceDir`]: no folder or
/// file below `cwd` is followed when it is a symbolic link, a file in the way is replaced,
/// never written through); any other folder (the user's own path, created when missing) is
/// the handle itself, so its files are still never written through a link.
///
/// Errors: [`WriteError::Unsafe`] when a folder from `cwd` down to `folder` exists as a
/// symbolic link (its files would land where the repository points); [`WriteError::Io`].
#[derive(Debug)]
pub struct OutputDir {
    dir: WorkspaceDir,
    rel: PathBuf,
}

impl OutputDir {
    /// Opens `folder` (relative to `cwd` unless absolute) as described on [`OutputDir`].
    ///
    /// Errors: as [`OutputDir`].
    pub fn open(cwd: &Path, folder: &Path) -> std::result::Result<OutputDir, WriteError> {
        let absolute = normalize_lexically(&cwd.join(folder));
        if let Ok(rel) = absolute.strip_prefix(cwd)
            && !rel.as_os_str().is_empty()
        {
            let mut path = cwd.to_path_buf();
            for part in rel.components() {
                path.push(part);
                if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(WriteError::Unsafe { path });
                }
            }
            return Ok(OutputDir {
                dir: WorkspaceDir::open(cwd)?,
                rel: rel.to_path_buf(),
            });
        }
        std::fs::create_dir_all(&absolute).map_err(|source| WriteError::Io {
            path: absolute.clone(),
            source,
        })?;
        Ok(OutputDir {
            dir: WorkspaceDir::open(&absolute)?,
            rel: PathBuf::new(),
        })
    }

    /// The folder's path.
    pub fn path(&self) -> PathBuf {
        self.dir.root().join(&self.rel)
    }

    /// Writes `bytes` as `name` in the folder (mode 0644), replacing a regular file of that
    /// name and refusing anything else in its place ([`WorkspaceDir::write`]).
    ///
    /// Errors: as [`WorkspaceDir::write`].
    pub fn write(&self, name: &str, bytes: &[u8]) -> std::result::Result<PathBuf, WriteError> {
        let rel = self.rel.join(name);
        self.dir.write(
            &rel.to_string_lossy(),
            bytes,
            0o644,
            Existing::Replace,
            false,
        )
    }
}

fn write_all(fd: OwnedFd, bytes: &[u8], path: &Path) -> std::result::Result<(), WriteError> {
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|source| WriteError::Io {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::host_path::fixtures::tree;
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::fs::symlink;

    /// `features package`'s output folder: a linked folder below the current folder is refused,
    /// a linked file in it is an error (never written through), a real folder is written, and
    /// a folder outside the current folder is created and written from its own handle.
    #[test]
    fn output_folders_never_write_through_links() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("out")).unwrap();
        assert!(matches!(
            OutputDir::open(&ws, Path::new("out")),
            Err(WriteError::Unsafe { .. })
        ));
        std::fs::remove_file(ws.join("out")).unwrap();
        std::fs::create_dir(ws.join("out")).unwrap();
        symlink(host.join("secret.txt"), ws.join("out/f.json")).unwrap();
        let out = OutputDir::open(&ws, Path::new("./out")).unwrap();
        assert!(matches!(
            out.write("f.json", b"x"),
            Err(WriteError::Unsafe { .. })
        ));
        assert_eq!(std::fs::read(host.join("secret.txt")).unwrap(), b"s");
        out.write("g.json", b"g").unwrap();
        assert_eq!(std::fs::read(ws.join("out/g.json")).unwrap(), b"g");
        let elsewhere = OutputDir::open(&ws, &host.join("new")).unwrap();
        elsewhere.write("h.json", b"h").unwrap();
        assert_eq!(std::fs::read(host.join("new/h.json")).unwrap(), b"h");
    }

    #[test]
    fn writes_never_follow_a_link_below_the_root() {
        let (_t, ws, host) = tree();
        let dir = WorkspaceDir::open(&ws).unwrap();
        let path = dir
            .write(
                ".devcell/context.json",
                b"{}",
                0o644,
                Existing::Replace,
                true,
            )
            .unwrap();
        assert_eq!(path, ws.join(".devcell/context.json"));
        assert!(
            std::fs::read_to_string(ws.join(".devcell/.gitignore"))
                .unwrap()
                .ends_with("\n*\n")
        );
        // a linked folder, a linked file
        symlink(&host, ws.join("linked")).unwrap();
        let e = dir
            .write("linked/context.json", b"{}", 0o644, Existing::Replace, true)
            .unwrap_err();
        assert!(matches!(e, WriteError::Unsafe { .. }), "{e}");
        symlink(host.join("secret.txt"), ws.join("AGENTS.md")).unwrap();
        let e = dir
            .write("AGENTS.md", b"x", 0o644, Existing::Keep, false)
            .unwrap_err();
        assert!(matches!(e, WriteError::Unsafe { .. }), "{e}");
        assert_eq!(
            std::fs::read_to_string(host.join("secret.txt")).unwrap(),
            "s"
        );
        assert_eq!(std::fs::read_dir(&host).unwrap().count(), 1);
        // owned check, keep, invalid paths
        let owned = |b: &[u8]| b == b"{}";
        dir.write(
            ".devcell/context.json",
            b"{}",
            0o644,
            Existing::ReplaceIfOwned(&owned),
            true,
        )
        .unwrap();
        std::fs::write(ws.join("mine"), "user").unwrap();
        assert!(matches!(
            dir.write(
                "mine",
                b"{}",
                0o644,
                Existing::ReplaceIfOwned(&owned),
                false
            ),
            Err(WriteError::NotOwned { .. })
        ));
        assert!(matches!(
            dir.write("mine", b"{}", 0o644, Existing::Keep, false),
            Err(WriteError::Exists { .. })
        ));
        for bad in ["../x", "/etc/x", ""] {
            assert!(matches!(
                dir.write(bad, b"", 0o644, Existing::Replace, false),
                Err(WriteError::InvalidPath { .. })
            ));
        }
        assert_eq!(
            std::fs::metadata(ws.join(".devcell/context.json"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o644
        );
    }
}
