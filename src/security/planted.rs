//! The second line behind the hostile agent (spec-note 0400, "the image's groups"): after the
//! agent ends (and after `up`'s lifecycle), the workspace is scanned for what a process in the
//! container should never leave on the host: files with a set-uid or set-gid bit and device
//! nodes. Set-id bits are cleared; devices are named. Fifos and sockets are ordinary.
//!
//! The walk never follows a symbolic link the container made: each folder is opened relative
//! to its parent's descriptor with `O_NOFOLLOW`, each file is changed through a descriptor
//! opened the same way and checked to be the file that was judged.

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::Serialize;
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

/// At most this many entries are looked at (a bound on a workspace the agent filled).
const MAX_ENTRIES: usize = 2_000_000;
/// Folders deeper than this are not entered.
const MAX_DEPTH: usize = 256;

/// What was found in the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Planted {
    /// The path, relative to the scanned folder.
    pub path: PathBuf,
    /// `setuid`, `setgid`, `setuid+setgid` or `device`.
    pub kind: String,
    /// The mode bits as found (octal in messages).
    pub mode: u32,
    /// Whether the set-id bits were cleared (always `false` for a device).
    pub cleared: bool,
}

impl Planted {
    /// One line for a warning.
    pub fn message(&self, root: &Path) -> String {
        let what = if self.kind == "device" {
            "a device node".to_string()
        } else {
            format!("a {} file", self.kind)
        };
        let done = match (self.kind.as_str(), self.cleared) {
            ("device", _) => "left as it is: remove it",
            (_, true) => "its set-id bits were cleared",
            (_, false) => "its set-id bits could not be cleared: remove it",
        };
        format!(
            "the container left {what} in the workspace: `{}` (mode {:o}); {done}",
            root.join(&self.path).display(),
            self.mode
        )
    }
}

/// Scans `root` (not following links) and clears every set-uid/set-gid bit of a regular file;
/// returns what it found, set-id files and device nodes. Errors opening `root` give an empty
/// list (nothing to scan); unreadable folders below are skipped.
pub fn scan_and_clear(root: &Path) -> Vec<Planted> {
    let mut out = Vec::new();
    let Ok(fd) = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return out;
    };
    let mut seen = 0usize;
    walk(&fd, Path::new(""), 0, &mut seen, &mut out);
    out
}

fn walk(dir: &OwnedFd, rel: &Path, depth: usize, seen: &mut usize, out: &mut Vec<Planted>) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    for entry in entries {
        let Ok(entry) = entry else { break };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        *seen += 1;
        if *seen > MAX_ENTRIES {
            return;
        }
        let name = OsStr::from_bytes(name);
        let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let path = rel.join(name);
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory if depth < MAX_DEPTH => {
                if let Ok(sub) = rustix::fs::openat(
                    dir,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    walk(&sub, &path, depth + 1, seen, out);
                }
            }
            FileType::RegularFile if stat.st_mode & 0o6000 != 0 => {
                let kind = match stat.st_mode & 0o6000 {
                    0o4000 => "setuid",
                    0o2000 => "setgid",
                    _ => "setuid+setgid",
                };
                out.push(Planted {
                    path,
                    kind: kind.to_string(),
                    mode: stat.st_mode & 0o7777,
                    cleared: clear(dir, name, &stat),
                });
            }
            FileType::CharacterDevice | FileType::BlockDevice => out.push(Planted {
                path,
                kind: "device".to_string(),
                mode: stat.st_mode & 0o7777,
                cleared: false,
            }),
            _ => {}
        }
    }
}

/// Clears the set-id bits of `name` in `dir` through a descriptor opened without following a
/// link, only when it is still the regular file `judged` was.
fn clear(dir: &impl AsFd, name: &OsStr, judged: &rustix::fs::Stat) -> bool {
    let Ok(fd) = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(now) = rustix::fs::fstat(&fd) else {
        return false;
    };
    if now.st_dev != judged.st_dev
        || now.st_ino != judged.st_ino
        || FileType::from_raw_mode(now.st_mode) != FileType::RegularFile
    {
        return false;
    }
    // `fchmod` refuses an `O_PATH` descriptor; its `/proc/self/fd` name is the same file
    // (never a link the container made: the descriptor already holds the file).
    let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    let mode = Mode::from_raw_mode(now.st_mode & 0o1777);
    rustix::fs::chmod(proc.as_str(), mode).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn set_id_files_are_found_and_cleared_and_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "x").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o4755)).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), ws.join("dirlink")).unwrap();
        for (name, mode) in [("sub/sg", 0o2755), ("su", 0o4711), ("plain", 0o755)] {
            std::fs::write(ws.join(name), "x").unwrap();
            std::fs::set_permissions(ws.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let mut found = scan_and_clear(&ws);
        found.sort_by(|a, b| a.path.cmp(&b.path));
        let kinds: Vec<(String, String, bool)> = found
            .iter()
            .map(|p| (p.path.display().to_string(), p.kind.clone(), p.cleared))
            .collect();
        assert_eq!(
            kinds,
            [
                ("su".to_string(), "setuid".to_string(), true),
                ("sub/sg".to_string(), "setgid".to_string(), true)
            ]
        );
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&ws.join("sub/sg")), 0o755);
        assert_eq!(mode(&ws.join("su")), 0o711);
        assert_eq!(mode(&ws.join("plain")), 0o755);
        // the file behind the link keeps its bits: the scan never followed it
        assert_eq!(mode(&outside), 0o4755);
        assert!(found[0].message(&ws).contains("set-id bits were cleared"));
        assert!(scan_and_clear(&ws).is_empty());
    }
}
