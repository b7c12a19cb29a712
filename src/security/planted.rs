//! The second line behind the hostile agent (spec-note 0400, "the image's groups"): after the
//! agent ends (and after `up`'s lifecycle), the workspace is scanned for what a process in the
//! container should never leave on the host: files with a set-uid or set-gid bit, set-gid
//! folders (every file made in one takes its group, and every folder its bit) and device
//! nodes. Set-id bits are cleared; devices are named. Fifos and sockets are ordinary. A folder
//! whose set-gid bit and group are its parent's is what the file system itself does below a
//! set-gid folder (a shared folder of the user's): left as it is.
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

/// [`Planted::kind`] of a set-gid folder.
const DIRECTORY: &str = "setgid-directory";
/// [`Planted::kind`] of a folder the scan could not look into (it cannot be opened or
/// listed, it is deeper than [`MAX_DEPTH`], or the walk reached [`MAX_ENTRIES`] in it): what
/// it holds is unknown, and any local user can still run a file in it by name (attack
/// finding J1), so it is named, never passed over in silence.
const UNSCANNED: &str = "unscanned";

/// At most this many entries are looked at (a bound on a workspace the agent filled).
const MAX_ENTRIES: usize = 2_000_000;
/// Folders deeper than this are not entered.
const MAX_DEPTH: usize = 256;

/// What was found in the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Planted {
    /// The path, relative to the workspace root (absolute for a folder scanned outside it).
    pub path: PathBuf,
    /// `setuid`, `setgid`, `setuid+setgid` (a regular file), `setgid-directory`, `device`, or
    /// `unscanned` (a folder the scan could not look into).
    pub kind: String,
    /// The mode bits as found (octal in messages).
    pub mode: u32,
    /// Whether the set-id bits were cleared (always `false` for a device).
    pub cleared: bool,
}

impl Planted {
    /// One line for a warning.
    pub fn message(&self, root: &Path) -> String {
        let what = match self.kind.as_str() {
            "device" => "a device node".to_string(),
            DIRECTORY => "a setgid directory".to_string(),
            UNSCANNED => "a folder devcell could not scan".to_string(),
            kind => format!("a {kind} file"),
        };
        let done = match (self.kind.as_str(), self.cleared) {
            ("device", _) => "left as it is: remove it",
            (UNSCANNED, _) => {
                "what it holds was not checked for set-id files: remove it or make it readable"
            }
            (DIRECTORY, true) => "its set-gid bit was cleared",
            (DIRECTORY, false) => "its set-gid bit could not be cleared: remove it",
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

/// Scans `root` (not following links) and clears every set-uid/set-gid bit of a regular file
/// and the set-gid bit of a folder (unless inherited: its parent set-gid with the same group);
/// returns what it found, set-id files and folders and device nodes, with paths relative to
/// `root`. Errors opening `root` give an empty list (nothing to scan); a folder below that
/// cannot be opened or listed, is too deep, or where the entry bound ends the walk is an
/// `unscanned` entry.
pub fn scan_and_clear(root: &Path) -> Vec<Planted> {
    let mut out = Vec::new();
    let Ok(fd) = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return out;
    };
    let Ok(stat) = rustix::fs::fstat(&fd) else {
        return out;
    };
    let mut seen = 0usize;
    let parent = Parent::of(&stat);
    walk(&fd, parent, Path::new(""), 0, &mut seen, &mut out);
    out
}

/// [`scan_and_clear`] of the workspace `root`, then of each folder of `others` the container
/// could also write (a handed-over worktree or repository outside the root, its container git
/// directory) that is not inside the root or an earlier one: their findings have absolute
/// paths.
pub fn scan_and_clear_each(root: &Path, others: &[PathBuf]) -> Vec<Planted> {
    let mut out = scan_and_clear(root);
    let mut scanned: Vec<&Path> = vec![root];
    let mut others: Vec<&PathBuf> = others.iter().collect();
    // a folder before the folders inside it, so each is scanned once
    others.sort_by_key(|p| p.components().count());
    for other in others {
        if scanned.iter().any(|s| other.starts_with(s)) {
            continue;
        }
        scanned.push(other);
        out.extend(scan_and_clear(other).into_iter().map(|mut found| {
            found.path = other.join(&found.path);
            found
        }));
    }
    out
}

/// What a folder's children inherit from it: its set-gid bit (after any clearing) and group.
#[derive(Clone, Copy)]
struct Parent {
    set_gid: bool,
    gid: u32,
}

impl Parent {
    fn of(stat: &rustix::fs::Stat) -> Parent {
        Parent {
            set_gid: stat.st_mode & 0o2000 != 0,
            gid: stat.st_gid,
        }
    }
}

fn walk(
    dir: &OwnedFd,
    parent: Parent,
    rel: &Path,
    depth: usize,
    seen: &mut usize,
    out: &mut Vec<Planted>,
) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        out.push(unscanned(rel, dir));
        return;
    };
    for entry in entries {
        let Ok(entry) = entry else {
            out.push(unscanned(rel, dir));
            break;
        };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        *seen += 1;
        if *seen > MAX_ENTRIES {
            // named once, where the walk stopped
            if *seen == MAX_ENTRIES + 1 {
                out.push(unscanned(rel, dir));
            }
            return;
        }
        let name = OsStr::from_bytes(name);
        let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let path = rel.join(name);
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory if depth >= MAX_DEPTH => out.push(Planted {
                path,
                kind: UNSCANNED.to_string(),
                mode: stat.st_mode & 0o7777,
                cleared: false,
            }),
            FileType::Directory => {
                match rustix::fs::openat(
                    dir,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(sub) => {
                        let Some(inherits) = judge_folder(&sub, parent, &path, out) else {
                            out.push(unscanned(&path, &sub));
                            continue;
                        };
                        walk(&sub, inherits, &path, depth + 1, seen, out);
                    }
                    Err(_) => out.push(Planted {
                        path,
                        kind: UNSCANNED.to_string(),
                        mode: stat.st_mode & 0o7777,
                        cleared: false,
                    }),
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

/// The [`UNSCANNED`] entry of the folder `dir` at `path`.
fn unscanned(path: &Path, dir: &impl AsFd) -> Planted {
    Planted {
        path: path.to_path_buf(),
        kind: UNSCANNED.to_string(),
        mode: rustix::fs::fstat(dir).map_or(0, |s| s.st_mode & 0o7777),
        cleared: false,
    }
}

/// A folder just opened (`O_NOFOLLOW`: the descriptor holds the folder itself, never a link's
/// target): a set-gid bit not inherited from `parent` with its group is cleared through the
/// descriptor and named. Returns what its own children inherit (`None`: it cannot be read).
fn judge_folder(
    sub: &OwnedFd,
    parent: Parent,
    path: &Path,
    out: &mut Vec<Planted>,
) -> Option<Parent> {
    let stat = rustix::fs::fstat(sub).ok()?;
    let mut inherits = Parent::of(&stat);
    let inherited = parent.set_gid && parent.gid == stat.st_gid;
    if inherits.set_gid && !inherited {
        let mode = Mode::from_raw_mode(stat.st_mode & 0o5777);
        let cleared = rustix::fs::fchmod(sub, mode).is_ok();
        out.push(Planted {
            path: path.to_path_buf(),
            kind: DIRECTORY.to_string(),
            mode: stat.st_mode & 0o7777,
            cleared,
        });
        inherits.set_gid = !cleared;
    }
    Some(inherits)
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

    /// A set-gid folder the container made is named and cleared, and so are the folders it
    /// handed its bit to (their parent is no longer set-gid once cleared); folders that
    /// inherit the bit and group of a set-gid folder of the user's are left; a link to a
    /// set-gid folder is not followed.
    #[test]
    fn set_gid_folders_are_cleared_unless_inherited_and_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        let chmod = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        std::fs::create_dir_all(ws.join("planted")).unwrap();
        chmod(&ws.join("planted"), 0o2755);
        // made inside it after the bit was set: inherits bit and group
        std::fs::create_dir(ws.join("planted/inner")).unwrap();
        assert_eq!(mode(&ws.join("planted/inner")) & 0o2000, 0o2000);
        // a shared folder of the user's: set-gid, its children inherit
        std::fs::create_dir_all(ws.join("plain")).unwrap();
        let outside = tmp.path().join("outside-sgid");
        std::fs::create_dir(&outside).unwrap();
        chmod(&outside, 0o2755);
        std::os::unix::fs::symlink(&outside, ws.join("plain/link")).unwrap();

        let mut found = scan_and_clear(&ws);
        found.sort_by(|a, b| a.path.cmp(&b.path));
        let kinds: Vec<(String, String, bool)> = found
            .iter()
            .map(|p| (p.path.display().to_string(), p.kind.clone(), p.cleared))
            .collect();
        assert_eq!(
            kinds,
            [
                ("planted".to_string(), DIRECTORY.to_string(), true),
                ("planted/inner".to_string(), DIRECTORY.to_string(), true)
            ]
        );
        assert_eq!(mode(&ws.join("planted")), 0o755);
        assert_eq!(mode(&ws.join("planted/inner")), 0o755);
        assert_eq!(mode(&outside), 0o2755, "the link was not followed");
        assert!(found[0].message(&ws).contains("a setgid directory"));
        assert!(found[0].message(&ws).contains("set-gid bit was cleared"));
        assert!(scan_and_clear(&ws).is_empty());

        // the user's own set-gid root: what its folders inherit is left as it is
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        chmod(&shared, 0o2775);
        std::fs::create_dir_all(shared.join("a/b")).unwrap();
        assert_eq!(mode(&shared.join("a/b")) & 0o2000, 0o2000);
        assert!(scan_and_clear(&shared).is_empty());
        assert_eq!(mode(&shared.join("a/b")) & 0o2000, 0o2000);
    }

    /// Folders outside the workspace root the container could write (a handed-over worktree)
    /// are scanned too, each once, their findings named by absolute path.
    #[test]
    fn folders_outside_the_root_are_scanned_once_with_absolute_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let worktree = tmp.path().join("worktree");
        for dir in [ws.join("inner"), worktree.join("sub")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        for file in [ws.join("inner/su"), worktree.join("sub/sg")] {
            std::fs::write(&file, "x").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o6755)).unwrap();
        }
        let found = scan_and_clear_each(
            &ws,
            &[
                worktree.join("sub"),
                worktree.clone(),
                ws.join("inner"),
                tmp.path().join("missing"),
            ],
        );
        let paths: Vec<PathBuf> = found.iter().map(|p| p.path.clone()).collect();
        assert_eq!(paths, [PathBuf::from("inner/su"), worktree.join("sub/sg")]);
        assert!(found.iter().all(|p| p.cleared && p.kind == "setuid+setgid"));
        assert!(
            found[1]
                .message(&ws)
                .contains(&format!("`{}`", worktree.join("sub/sg").display()))
        );
    }

    /// Attack finding J1: a folder the scan cannot list (`0o111`, as the workspace owner)
    /// and one deeper than the bound hid set-uid files in silence; both are named now, and
    /// what can be listed is still cleared.
    #[test]
    fn a_folder_it_cannot_list_and_a_deep_folder_are_named() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("hidden")).unwrap();
        std::fs::write(root.join("hidden/suid"), "x").unwrap();
        std::fs::set_permissions(
            root.join("hidden/suid"),
            std::fs::Permissions::from_mode(0o4755),
        )
        .unwrap();
        std::fs::write(root.join("top"), "x").unwrap();
        std::fs::set_permissions(root.join("top"), std::fs::Permissions::from_mode(0o4755))
            .unwrap();
        let mut deep = root.join("deep");
        for _ in 0..MAX_DEPTH + 2 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::set_permissions(root.join("hidden"), std::fs::Permissions::from_mode(0o111))
            .unwrap();
        let found = scan_and_clear(root);
        std::fs::set_permissions(root.join("hidden"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let kinds: Vec<(String, &str)> = found
            .iter()
            .map(|p| (p.path.display().to_string(), p.kind.as_str()))
            .collect();
        assert!(kinds.contains(&("top".to_string(), "setuid")), "{kinds:?}");
        assert!(
            kinds
                .iter()
                .any(|(p, k)| p.starts_with("deep/d/d") && *k == UNSCANNED),
            "{kinds:?}"
        );
        // root reads any folder: the unlistable case only holds for an ordinary user
        if rustix::process::geteuid().is_root() {
            return;
        }
        assert!(
            kinds.contains(&("hidden".to_string(), UNSCANNED)),
            "{kinds:?}"
        );
        let hidden = found
            .iter()
            .find(|p| p.kind == UNSCANNED && p.path == Path::new("hidden"));
        let message = hidden.unwrap().message(root);
        assert!(message.contains("could not scan"), "{message}");
    }
}
