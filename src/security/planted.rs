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
/// it holds is unknown, and any local user could still run a file in it by name (attack
/// finding J1), so it is named, never passed over in silence, and closed to other users
/// (`go-rwx`, through a descriptor that holds the folder itself: attack L4), so a set-id file
/// below it runs for nobody but its owner. `cleared` says whether it could be closed.
const UNSCANNED: &str = "unscanned";

/// [`Planted::kind`] of a folder its owner (devcell's user) could not list: the scan gave it
/// `u+rx` to look into it (attack K9: a `chmod 111` folder hid a set-uid file).
const UNLISTABLE: &str = "unlistable-directory";
/// [`Planted::kind`] of a file or folder any local user could write (`o+w`; attack K6): the
/// bit is cleared.
const OTHER_WRITABLE: &str = "other-writable";
/// The kind of an entry its group may write, where that group is the owner's primary group
/// and other users of the host are in it (attack L8).
const GROUP_WRITABLE: &str = "group-writable";
/// [`Planted::kind`] of a file or folder with an access control list naming other users or
/// groups, or a folder with a default one (attack K6): the lists are removed.
const ACL: &str = "acl";
/// The size of a POSIX access ACL xattr with only the three entries the mode bits stand for
/// (a 4-byte header and three 8-byte entries): anything larger names another user or group.
const MINIMAL_ACL_BYTES: usize = 4 + 3 * 8;

/// What a scan looks at beyond set-id files and folders and devices.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScanOptions {
    /// Also clear `o+w` and remove ACLs naming others ([`OTHER_WRITABLE`], [`ACL`]): after a
    /// handoff, where the agent is the workspace owner's uid and needs neither. Not after
    /// `up`, whose sidecars of other users may rely on a folder the user opened.
    pub other_writable: bool,
    /// Change nothing: name what is found (`status`, which reports and never fixes; attack
    /// K11). A folder devcell's user cannot list stays unlisted, and is named.
    pub report_only: bool,
    /// With [`ScanOptions::other_writable`]: the owner's primary group when other users of the
    /// host share it (attack L8; [`shared_primary_group`]): `g+w` on an entry of that group is
    /// cleared too. [`scan_and_clear_each`] (the handoff's scan) fills it from the host's
    /// `/etc/passwd` and `/etc/group` for the root folder's owner when not given.
    pub shared_group: Option<u32>,
}

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
    /// `unscanned` (a folder the scan could not look into, closed to other users when
    /// `cleared`).
    pub kind: String,
    /// The mode bits as found (octal in messages).
    pub mode: u32,
    /// Whether the set-id bits were cleared (always `false` for a device, and for a scan
    /// with [`ScanOptions::report_only`]).
    pub cleared: bool,
}

impl Planted {
    /// Whether this is an error rather than a warning: a folder the scan could not look
    /// into (attack L4: what it holds was not checked).
    pub fn is_error(&self) -> bool {
        self.kind == UNSCANNED
    }

    /// One line for a report of a scan that changed nothing ([`ScanOptions::report_only`]):
    /// what it is, and what clears it.
    pub fn report_message(&self, root: &Path) -> String {
        let what = self.what();
        let next = match self.kind.as_str() {
            "device" | UNSCANNED => "remove it",
            OTHER_WRITABLE | GROUP_WRITABLE | ACL => {
                "the next handoff's end closes it, or change it yourself"
            }
            _ => "`devcell down` clears its set-id bits (or remove it)",
        };
        format!(
            "the workspace holds {what} a container may have left: `{}` (mode {:o}); {next}",
            root.join(&self.path).display(),
            self.mode
        )
    }

    /// What the entry is, in words.
    fn what(&self) -> String {
        match self.kind.as_str() {
            "device" => "a device node".to_string(),
            DIRECTORY => "a setgid directory".to_string(),
            UNSCANNED => "a folder devcell could not scan".to_string(),
            UNLISTABLE => "a folder its owner could not list".to_string(),
            OTHER_WRITABLE => "an entry every local user can write".to_string(),
            GROUP_WRITABLE => {
                "an entry the owner's primary group, shared with other users, can write".to_string()
            }
            ACL => "an entry with an access control list for other users".to_string(),
            kind => format!("a {kind} file"),
        }
    }

    /// One line for a warning.
    pub fn message(&self, root: &Path) -> String {
        let what = self.what();
        let done = match (self.kind.as_str(), self.cleared) {
            ("device", _) => "left as it is: remove it",
            (UNSCANNED, true) => {
                "what it holds was not checked for set-id files; devcell closed it to other users (go-rwx): remove it, or make it readable and hand off again"
            }
            (UNSCANNED, false) => {
                "what it holds was not checked for set-id files and devcell could not close it to other users: remove it"
            }
            (UNLISTABLE, true) => "devcell made it readable to its owner and scanned it",
            (UNLISTABLE, false) => "it could not be made readable: remove it",
            (OTHER_WRITABLE, true) => "the write permission for others was removed",
            (OTHER_WRITABLE, false) => "the write permission for others could not be removed",
            (GROUP_WRITABLE, true) => "the write permission for the shared group was removed",
            (GROUP_WRITABLE, false) => {
                "the write permission for the shared group could not be removed"
            }
            (ACL, true) => "its access control lists were removed",
            (ACL, false) => "its access control lists could not be removed",
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
    scan_and_clear_with(root, ScanOptions::default())
}

/// [`scan_and_clear`] looking also at what `options` asks for (the root folder itself
/// included).
pub fn scan_and_clear_with(root: &Path, options: ScanOptions) -> Vec<Planted> {
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
    if options.other_writable {
        open_to_others(&fd, &stat, Path::new("."), options.shared_group, &mut out);
    }
    let mut walk = Walk {
        options,
        seen: &mut seen,
        out: &mut out,
        max_entries: MAX_ENTRIES,
    };
    walk.folder(&fd, parent, Path::new(""), 0);
    out
}

/// [`scan_and_clear`] of the workspace `root`, then of each folder of `others` the container
/// could also write (a handed-over worktree or repository outside the root, its container git
/// directory) that is not inside the root or an earlier one: their findings have absolute
/// paths.
pub fn scan_and_clear_each(root: &Path, others: &[PathBuf], options: ScanOptions) -> Vec<Planted> {
    let mut options = options;
    if options.other_writable && options.shared_group.is_none() {
        options.shared_group = rustix::fs::stat(root)
            .ok()
            .and_then(|s| host_shared_group(s.st_uid));
    }
    let mut out = scan_and_clear_with(root, options);
    let mut scanned: Vec<&Path> = vec![root];
    let mut others: Vec<&PathBuf> = others.iter().collect();
    // a folder before the folders inside it, so each is scanned once
    others.sort_by_key(|p| p.components().count());
    for other in others {
        if scanned.iter().any(|s| other.starts_with(s)) {
            continue;
        }
        scanned.push(other);
        out.extend(
            scan_and_clear_with(other, options)
                .into_iter()
                .map(|mut found| {
                    found.path = other.join(&found.path);
                    found
                }),
        );
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

/// One scan's walk: its options, the entries seen so far and what it found.
struct Walk<'a> {
    options: ScanOptions,
    seen: &'a mut usize,
    out: &'a mut Vec<Planted>,
    /// The entry bound ([`MAX_ENTRIES`] but in tests).
    max_entries: usize,
}

impl Walk<'_> {
    /// Looks at each entry of the folder `dir` (at `rel`, `depth` below the root) and into each
    /// of its folders. Where the entry bound stops the walk, the folder it stopped in is named
    /// and every folder it was still walking (that one and each above it, up to the root) is
    /// closed to other users: what they still hold was not looked at (attack L4).
    fn folder(&mut self, dir: &OwnedFd, parent: Parent, rel: &Path, depth: usize) {
        let (seen, options, max_entries) = (&mut *self.seen, self.options, self.max_entries);
        let out = &mut *self.out;
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
            if *seen > max_entries {
                // named once, where the walk stopped; closed here and in each folder above
                if *seen == max_entries + 1 {
                    out.push(unscanned(rel, dir));
                }
                close_to_others(dir);
                return;
            }
            let name = OsStr::from_bytes(name);
            let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                // a folder without `x` for devcell: what it holds is not known
                out.push(unscanned(rel, dir));
                break;
            };
            let path = rel.join(name);
            let stat = if FileType::from_raw_mode(stat.st_mode) == FileType::Directory
                && !options.report_only
            {
                make_listable(dir, name, stat, &path, out)
            } else {
                stat
            };
            if options.other_writable
                && FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
                && let Some(fd) = reopen(dir, name, &stat)
            {
                open_to_others(&fd, &stat, &path, options.shared_group, out);
            }
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory if depth >= MAX_DEPTH => out.push(Planted {
                    path,
                    kind: UNSCANNED.to_string(),
                    mode: stat.st_mode & 0o7777,
                    cleared: reopen(dir, name, &stat).is_some_and(|fd| close_held(&fd, &stat)),
                }),
                FileType::Directory => {
                    match rustix::fs::openat(
                        dir,
                        name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        Ok(sub) => {
                            if options.other_writable {
                                open_to_others(&sub, &stat, &path, options.shared_group, out);
                            }
                            let Some(inherits) =
                                judge_folder(&sub, parent, &path, options.report_only, out)
                            else {
                                out.push(unscanned(&path, &sub));
                                continue;
                            };
                            let mut deeper = Walk {
                                options,
                                seen: &mut *seen,
                                out: &mut *out,
                                max_entries,
                            };
                            deeper.folder(&sub, inherits, &path, depth + 1);
                            if *seen > max_entries {
                                close_to_others(dir);
                                return;
                            }
                        }
                        Err(_) => out.push(Planted {
                            path,
                            kind: UNSCANNED.to_string(),
                            mode: stat.st_mode & 0o7777,
                            cleared: reopen(dir, name, &stat)
                                .is_some_and(|fd| close_held(&fd, &stat)),
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
                        cleared: !options.report_only && clear(dir, name, &stat),
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
}

/// The [`UNSCANNED`] entry of the folder `dir` at `path`, closed to other users
/// ([`close_to_others`]).
fn unscanned(path: &Path, dir: &impl AsFd) -> Planted {
    Planted {
        path: path.to_path_buf(),
        kind: UNSCANNED.to_string(),
        mode: rustix::fs::fstat(dir).map_or(0, |s| s.st_mode & 0o7777),
        cleared: close_to_others(dir),
    }
}

/// Takes group and other access away from the folder `dir` holds (never a link: the
/// descriptor holds the folder), keeping its owner's: a set-id file below it then runs for
/// nobody else (attack L4). Whether it is now closed.
fn close_to_others(dir: &impl AsFd) -> bool {
    rustix::fs::fstat(dir).is_ok_and(|stat| close_held(dir, &stat))
}

/// [`close_to_others`] of the entry `fd` holds (`stat` as judged; an `O_PATH` descriptor
/// too).
fn close_held(fd: &impl AsFd, stat: &rustix::fs::Stat) -> bool {
    let mode = stat.st_mode & 0o7777;
    mode & 0o077 == 0 || chmod_held(fd, mode & !0o077)
}

/// A folder just opened (`O_NOFOLLOW`: the descriptor holds the folder itself, never a link's
/// target): a set-gid bit not inherited from `parent` with its group is cleared through the
/// descriptor (unless `report_only`) and named. Returns what its own children inherit
/// (`None`: it cannot be read).
fn judge_folder(
    sub: &OwnedFd,
    parent: Parent,
    path: &Path,
    report_only: bool,
    out: &mut Vec<Planted>,
) -> Option<Parent> {
    let stat = rustix::fs::fstat(sub).ok()?;
    let mut inherits = Parent::of(&stat);
    let inherited = parent.set_gid && parent.gid == stat.st_gid;
    if inherits.set_gid && !inherited {
        let mode = Mode::from_raw_mode(stat.st_mode & 0o5777);
        let cleared = !report_only && rustix::fs::fchmod(sub, mode).is_ok();
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

/// A folder `stat` at `name` in `dir` whose owner is devcell's user and that lacks `u+rx` is
/// given them (through a descriptor that holds the folder itself) so the scan can look into
/// it, and named; returns its status as it is now. Attack K9: the agent, as the workspace
/// owner, made a folder `0111` to hide a set-uid file from the scan.
fn make_listable(
    dir: &impl AsFd,
    name: &OsStr,
    stat: rustix::fs::Stat,
    path: &Path,
    out: &mut Vec<Planted>,
) -> rustix::fs::Stat {
    let mine = rustix::process::geteuid().as_raw() == stat.st_uid;
    if !mine || stat.st_mode & 0o500 == 0o500 {
        return stat;
    }
    let mode = stat.st_mode & 0o7777;
    let cleared = reopen(dir, name, &stat).is_some_and(|fd| chmod_held(&fd, mode | 0o500));
    out.push(Planted {
        path: path.to_path_buf(),
        kind: UNLISTABLE.to_string(),
        mode,
        cleared,
    });
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).unwrap_or(stat)
}

/// `name` in `dir` opened `O_PATH` without following a link, when it is still the entry
/// `judged` was (same device, inode and type).
fn reopen(dir: &impl AsFd, name: &OsStr, judged: &rustix::fs::Stat) -> Option<OwnedFd> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let now = rustix::fs::fstat(&fd).ok()?;
    (now.st_dev == judged.st_dev
        && now.st_ino == judged.st_ino
        && FileType::from_raw_mode(now.st_mode) == FileType::from_raw_mode(judged.st_mode))
    .then_some(fd)
}

/// The primary group of user `owner` when another user of the host is in it (attack L8):
/// another `passwd` entry has it as its primary group, or the `group` entry of that id lists
/// a member other than the owner. `None` for a private group (most distributions give each
/// user their own), an owner `passwd` does not know, or a group only the owner is in.
pub fn shared_primary_group(owner: u32, passwd: &str, group: &str) -> Option<u32> {
    let users = crate::engine::passwd::parse(passwd);
    let me = users.iter().find(|u| u.uid == owner)?;
    let gid = me.gid;
    let by_primary = users.iter().any(|u| u.gid == gid && u.uid != owner);
    let by_member = group.lines().any(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        fields.len() >= 4
            && fields[2].trim().parse::<u32>() == Ok(gid)
            && fields[3]
                .split(',')
                .map(str::trim)
                .any(|m| !m.is_empty() && m != me.name)
    });
    (by_primary || by_member).then_some(gid)
}

/// [`shared_primary_group`] of `owner` on this host: `/etc/passwd` and `/etc/group` read
/// without following links and bounded (1 MiB each); `None` when either cannot be read.
fn host_shared_group(owner: u32) -> Option<u32> {
    let read = |path: &str| {
        crate::security::host_path::read_no_follow(Path::new(path), 1 << 20)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    shared_primary_group(owner, &read("/etc/passwd")?, &read("/etc/group")?)
}

/// The `/proc/self/fd` name of a descriptor: the file it holds (never a link the container
/// made), for the calls that refuse an `O_PATH` descriptor.
fn proc_path(fd: &impl AsFd) -> String {
    format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd())
    )
}

/// Sets the mode of the file `fd` holds.
fn chmod_held(fd: &impl AsFd, mode: u32) -> bool {
    rustix::fs::chmod(proc_path(fd).as_str(), Mode::from_raw_mode(mode)).is_ok()
}

/// Attack K6: the entry `fd` holds (`stat`, at `path`) opened to every local user (`o+w`) or
/// to named others (an access ACL with more than the mode's entries, or a folder's default
/// ACL) is closed again and named: another user could rewrite what the owner runs, or move
/// the owner's `.git` away.
///
/// Attack L8: where the owner's primary group is `shared_group` (other users of the host are
/// in it), an entry of that group with `g+w` lets them rewrite it too: `g+w` is cleared as
/// well (kind `group-writable`).
fn open_to_others(
    fd: &impl AsFd,
    stat: &rustix::fs::Stat,
    path: &Path,
    shared_group: Option<u32>,
    out: &mut Vec<Planted>,
) {
    let mode = stat.st_mode & 0o7777;
    if mode & 0o002 != 0 {
        out.push(Planted {
            path: path.to_path_buf(),
            kind: OTHER_WRITABLE.to_string(),
            mode,
            cleared: chmod_held(fd, mode & !0o002),
        });
    }
    let mode = mode & !0o002;
    if mode & 0o020 != 0 && shared_group == Some(stat.st_gid) {
        out.push(Planted {
            path: path.to_path_buf(),
            kind: GROUP_WRITABLE.to_string(),
            mode,
            cleared: chmod_held(fd, mode & !0o020),
        });
    }
    let at = proc_path(fd);
    let access = rustix::fs::getxattr_query(at.as_str(), "system.posix_acl_access")
        .is_ok_and(|n| n > MINIMAL_ACL_BYTES);
    let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
    let default = is_dir
        && rustix::fs::getxattr_query(at.as_str(), "system.posix_acl_default").is_ok_and(|n| n > 0);
    if access || default {
        let removed = [
            ("system.posix_acl_access", access),
            ("system.posix_acl_default", default),
        ]
        .into_iter()
        .filter(|(_, present)| *present)
        .all(|(name, _)| rustix::fs::removexattr(at.as_str(), name).is_ok());
        out.push(Planted {
            path: path.to_path_buf(),
            kind: ACL.to_string(),
            mode,
            cleared: removed,
        });
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

    /// Each finding as (path, kind, cleared), sorted.
    fn sorted_kinds(found: &[Planted]) -> Vec<(String, &str, bool)> {
        let mut kinds: Vec<(String, &str, bool)> = found
            .iter()
            .map(|p| (p.path.display().to_string(), p.kind.as_str(), p.cleared))
            .collect();
        kinds.sort();
        kinds
    }

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
        assert_eq!(
            sorted_kinds(&found),
            [
                ("su".to_string(), "setuid", true),
                ("sub/sg".to_string(), "setgid", true)
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
        assert_eq!(
            sorted_kinds(&found),
            [
                ("planted".to_string(), DIRECTORY, true),
                ("planted/inner".to_string(), DIRECTORY, true)
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
            ScanOptions::default(),
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
        // K9: the folder is its owner's (devcell's user): it is made listable and scanned,
        // and the set-uid file in it is cleared
        assert!(
            kinds.contains(&("hidden".to_string(), UNLISTABLE)),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("hidden/suid".to_string(), "setuid")),
            "{kinds:?}"
        );
        let hidden = found
            .iter()
            .find(|p| p.kind == UNLISTABLE && p.path == Path::new("hidden"))
            .unwrap();
        assert!(hidden.cleared && hidden.mode == 0o111, "{hidden:?}");
        assert!(hidden.message(root).contains("made it readable"));
        let mode = std::fs::symlink_metadata(root.join("hidden/suid"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755);
    }

    /// Attack K6: after a handoff, a file or folder the agent opened to every local user
    /// (`o+w`, the workspace root too) is closed again and named; `up`'s scan leaves it.
    #[test]
    fn other_writable_files_and_folders_are_named_and_closed() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("tools")).unwrap();
        std::fs::write(ws.join("build.sh"), "echo build\n").unwrap();
        std::fs::write(ws.join("tools/ok.sh"), "x").unwrap();
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        set(&ws, 0o777);
        set(&ws.join("build.sh"), 0o666);
        set(&ws.join("tools"), 0o1777);
        set(&ws.join("tools/ok.sh"), 0o644);
        assert!(
            scan_and_clear(&ws).is_empty(),
            "up's scan looks at set-id only"
        );
        let found = scan_and_clear_with(
            &ws,
            ScanOptions {
                other_writable: true,
                ..ScanOptions::default()
            },
        );
        let kinds = sorted_kinds(&found);
        assert_eq!(
            kinds,
            [
                (".".to_string(), OTHER_WRITABLE, true),
                ("build.sh".to_string(), OTHER_WRITABLE, true),
                ("tools".to_string(), OTHER_WRITABLE, true),
            ]
        );
        assert_eq!(mode(&ws), 0o775);
        assert_eq!(mode(&ws.join("build.sh")), 0o664);
        assert_eq!(mode(&ws.join("tools")), 0o1775);
        assert_eq!(mode(&ws.join("tools/ok.sh")), 0o644);
        assert!(found[0].message(&ws).contains("others was removed"));
    }

    /// Attack L8: where other users of the host share the owner's primary group, a
    /// group-writable entry of that group is closed after a handoff (`group-writable`); a
    /// private group (the usual layout) changes nothing.
    #[test]
    fn group_write_is_cleared_only_where_the_primary_group_is_shared() {
        use std::os::unix::fs::MetadataExt as _;
        use std::os::unix::fs::PermissionsExt as _;
        let passwd = "root:x:0:0::/root:/bin/sh\nana:x:1000:100::/home/ana:/bin/sh\n\
                      bo:x:1001:100::/home/bo:/bin/sh\ncy:x:1002:1002::/home/cy:/bin/sh\n\
                      di:x:1003:1003::/home/di:/bin/sh\n";
        let group = "users:x:100:\ncy:x:1002:\ndi:x:1003:di,ana\n";
        assert_eq!(shared_primary_group(1000, passwd, group), Some(100));
        assert_eq!(shared_primary_group(1002, passwd, group), None);
        assert_eq!(shared_primary_group(1003, passwd, group), Some(1003));
        assert_eq!(shared_primary_group(4242, passwd, group), None);

        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("run.sh"), "echo\n").unwrap();
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        set(&ws, 0o775);
        set(&ws.join("run.sh"), 0o664);
        let gid = std::fs::metadata(&ws).unwrap().gid();
        let scan = |shared_group| {
            scan_and_clear_with(
                &ws,
                ScanOptions {
                    other_writable: true,
                    shared_group,
                    ..ScanOptions::default()
                },
            )
        };
        assert!(scan(Some(gid + 1)).is_empty(), "another group: untouched");
        assert_eq!(mode(&ws.join("run.sh")), 0o664);
        let found = scan(Some(gid));
        let kinds = sorted_kinds(&found);
        assert_eq!(
            kinds,
            [
                (".".to_string(), GROUP_WRITABLE, true),
                ("run.sh".to_string(), GROUP_WRITABLE, true),
            ]
        );
        assert_eq!(mode(&ws), 0o755);
        assert_eq!(mode(&ws.join("run.sh")), 0o644);
        assert!(found[0].message(&ws).contains("shared group was removed"));
    }

    /// Attack K6 by an access control list: an entry for another user (written as the
    /// kernel's xattr, as `setfacl` would) is removed after a handoff and named.
    #[test]
    fn an_acl_for_another_user_is_named_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("build.sh"), "x").unwrap();
        // version 2; user::rw-, user:1001:rw-, group::r--, mask::rw-, other::r--
        let mut acl: Vec<u8> = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (0x01u16, 6u16, u32::MAX),
            (0x02, 6, 1001),
            (0x04, 4, u32::MAX),
            (0x10, 6, u32::MAX),
            (0x20, 4, u32::MAX),
        ] {
            acl.extend(tag.to_le_bytes());
            acl.extend(perm.to_le_bytes());
            acl.extend(id.to_le_bytes());
        }
        let file = ws.join("build.sh");
        rustix::fs::setxattr(
            &file,
            "system.posix_acl_access",
            &acl,
            rustix::fs::XattrFlags::empty(),
        )
        .expect("this machine's temporary folder takes ACLs");
        let found = scan_and_clear_with(
            &ws,
            ScanOptions {
                other_writable: true,
                ..ScanOptions::default()
            },
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].kind.as_str(), found[0].cleared), (ACL, true));
        assert!(rustix::fs::getxattr_query(&file, "system.posix_acl_access").is_err());
    }

    /// Attack L4: a set-uid file 260 folders down (past [`MAX_DEPTH`]) keeps no way in for
    /// another user: the folder where the walk stopped is closed (`go-rwx`) and named as an
    /// error.
    #[test]
    fn a_set_id_file_past_the_depth_bound_is_unreachable_or_cleared() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut deep = root.join(".cache");
        for _ in 0..260 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("h"), "x").unwrap();
        std::fs::set_permissions(deep.join("h"), std::fs::Permissions::from_mode(0o4755)).unwrap();
        let found = scan_and_clear(root);
        let stop = found
            .iter()
            .find(|p| p.kind == UNSCANNED)
            .unwrap_or_else(|| panic!("{found:?}"));
        assert!(stop.cleared && stop.is_error(), "{stop:?}");
        assert!(stop.message(root).contains("closed it to other users"));
        let mode = std::fs::symlink_metadata(root.join(&stop.path))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{:o}", mode);
        assert!(deep.starts_with(root.join(&stop.path)));
        // only the owner can reach the file now: its bit is gone or its folder is closed
        let file = std::fs::symlink_metadata(deep.join("h")).unwrap();
        assert!(file.permissions().mode() & 0o4000 == 0 || stop.cleared);
    }

    /// Attack L4, the entry bound: where the walk stops, the folder it stopped in and every
    /// folder above it are closed to other users, so whatever it did not reach is closed too.
    #[test]
    fn where_the_entry_bound_stops_the_walk_the_unvisited_folders_are_closed() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        for i in 0..20 {
            std::fs::write(root.join(format!("a/b/f{i}")), "x").unwrap();
        }
        for dir in ["", "a", "a/b"] {
            std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let fd = rustix::fs::open(
            &root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let stat = rustix::fs::fstat(&fd).unwrap();
        let (mut seen, mut out) = (0, Vec::new());
        let mut walk = Walk {
            options: ScanOptions::default(),
            seen: &mut seen,
            out: &mut out,
            max_entries: 5,
        };
        walk.folder(&fd, Parent::of(&stat), Path::new(""), 0);
        let stops: Vec<_> = out.iter().filter(|p| p.kind == UNSCANNED).collect();
        assert_eq!(stops.len(), 1, "{out:?}");
        assert!(stops[0].cleared && stops[0].is_error(), "{out:?}");
        for dir in ["", "a", "a/b"] {
            let mode = std::fs::metadata(root.join(dir))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700, "{dir}: {mode:o}");
        }
    }
}
