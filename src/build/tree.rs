//! Walking a Feature folder in a stable order, for hashing and for copying it into a build
//! context with normalised modes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::{BuildError, Result};

/// One entry of a folder walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Path relative to the walked folder (never empty, no `..`).
    pub rel: PathBuf,
    /// What it is.
    pub kind: EntryKind,
}

/// The kind of a [`TreeEntry`], with what matters for the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A folder (copied with mode `0755`).
    Dir,
    /// A regular file; `executable` when any execute bit is set (copied with mode `0755`,
    /// else `0644`).
    File {
        /// Any execute bit set in the source.
        executable: bool,
    },
    /// A symbolic link, with its target as written (copied as a link, never followed).
    Symlink(PathBuf),
}

impl EntryKind {
    /// The mode the entry gets in the build context (and so in the image): `0o755` for
    /// folders and executable files, `0o644` for other files, `0o777` for links.
    pub fn mode(&self) -> u32 {
        match self {
            EntryKind::Dir | EntryKind::File { executable: true } => 0o755,
            EntryKind::File { executable: false } => 0o644,
            EntryKind::Symlink(_) => 0o777,
        }
    }
}

/// Every entry below `dir` (not `dir` itself), sorted by the bytes of the relative path, so
/// the order does not depend on the file system. `feature` names the Feature in errors.
///
/// Errors: [`BuildError::Io`] when something cannot be read, [`BuildError::UnsupportedFile`]
/// for sockets, FIFOs and devices.
pub fn walk(dir: &Path, feature: &str) -> Result<Vec<TreeEntry>> {
    let mut out = Vec::new();
    walk_into(dir, Path::new(""), feature, &mut out)?;
    out.sort_by(|a, b| {
        a.rel
            .as_os_str()
            .as_encoded_bytes()
            .cmp(b.rel.as_os_str().as_encoded_bytes())
    });
    Ok(out)
}

fn walk_into(root: &Path, rel: &Path, feature: &str, out: &mut Vec<TreeEntry>) -> Result<()> {
    let dir = root.join(rel);
    let entries = fs::read_dir(&dir).map_err(BuildError::io("read", &dir))?;
    for entry in entries {
        let entry = entry.map_err(BuildError::io("read", &dir))?;
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).map_err(BuildError::io("read", &path))?;
        let child = rel.join(entry.file_name());
        let ft = meta.file_type();
        let kind = if ft.is_symlink() {
            EntryKind::Symlink(fs::read_link(&path).map_err(BuildError::io("read", &path))?)
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File {
                executable: meta.permissions().mode() & 0o111 != 0,
            }
        } else {
            return Err(BuildError::UnsupportedFile {
                feature: feature.to_owned(),
                path,
            });
        };
        let is_dir = kind == EntryKind::Dir;
        out.push(TreeEntry {
            rel: child.clone(),
            kind,
        });
        if is_dir {
            walk_into(root, &child, feature, out)?;
        }
    }
    Ok(())
}

/// Copies the entries of `src` (as listed by [`walk`]) into `dst` (which must exist), with
/// normalised modes ([`EntryKind::mode`]); links are recreated, never followed.
pub fn copy(src: &Path, entries: &[TreeEntry], dst: &Path) -> Result<()> {
    for entry in entries {
        let from = src.join(&entry.rel);
        let to = dst.join(&entry.rel);
        match &entry.kind {
            EntryKind::Dir => fs::create_dir_all(&to).map_err(BuildError::io("create", &to))?,
            EntryKind::File { .. } => {
                fs::copy(&from, &to).map_err(BuildError::io("write", &to))?;
            }
            EntryKind::Symlink(target) => {
                std::os::unix::fs::symlink(target, &to).map_err(BuildError::io("write", &to))?;
            }
        }
        if !matches!(entry.kind, EntryKind::Symlink(_)) {
            fs::set_permissions(&to, fs::Permissions::from_mode(entry.kind.mode()))
                .map_err(BuildError::io("write", &to))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_is_sorted_and_normalises_modes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("b")).unwrap();
        fs::write(d.join("b/z"), "z").unwrap();
        fs::write(d.join("a.sh"), "x").unwrap();
        fs::set_permissions(d.join("a.sh"), fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(d.join("c"), "c").unwrap();
        fs::set_permissions(d.join("c"), fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink("c", d.join("l")).unwrap();
        let entries = walk(d, "f").unwrap();
        let names: Vec<_> = entries
            .iter()
            .map(|e| e.rel.display().to_string())
            .collect();
        assert_eq!(names, ["a.sh", "b", "b/z", "c", "l"]);
        assert_eq!(entries[0].kind.mode(), 0o755);
        assert_eq!(entries[3].kind.mode(), 0o644);
        assert_eq!(entries[4].kind, EntryKind::Symlink("c".into()));

        let out = tempfile::tempdir().unwrap();
        copy(d, &entries, out.path()).unwrap();
        let copied = walk(out.path(), "f").unwrap();
        assert_eq!(copied, entries);
        let mode = fs::metadata(out.path().join("c"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
    }

    #[test]
    fn walk_rejects_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("s")).unwrap();
        let err = walk(dir.path(), "./f").unwrap_err();
        assert!(
            matches!(&err, BuildError::UnsupportedFile { feature, .. } if feature == "./f"),
            "{err}"
        );
    }
}
