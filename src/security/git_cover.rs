//! Which git entries below a workspace a container's binds cover, and how (spec-notes 0400,
//! 0436, 0446): one judgement for a handoff (`handoff::nested_git`, beside its container git
//! directories) and for a plain `up` under `hardened` (`ops::workspace_git`, attack M7), where
//! a lifecycle hook otherwise writes the host repository's `.git/config` (`core.fsmonitor`) or
//! `.git/commondir` and the user's next `git status` on the host runs it.
//!
//! Each git entry the walk finds ([`Walk`], from [`crate::security::git_entries::find`] or a
//! handoff's recorded identity) that nothing covers yet is covered by construction: the entry
//! itself (the whole git directory, or the `.git` file) bound read-only on itself (a mount
//! point: it cannot be renamed, replaced, or written, and nothing can be created in it,
//! `commondir` included), and its folder and every folder above it up to one already bound on
//! itself bound read-write on themselves (mount points: none can be renamed to plant another
//! `.git` in its place). What cannot be covered so is an [`Uncoverable`] the user accepts
//! with `--allow uncovered-git:<path>` (`uncovered-git:*` for all): a `.git` link or special
//! file, a `.git` file naming a git directory no cover hides (outside the workspace, or a
//! writable folder in it), a git directory whose `commondir` names one, more than
//! [`MAX_COVERED`] entries, a folder the walk could not list, a walk cut at its bound.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most git entries covered this way (each costs a few mounts).
pub const MAX_COVERED: usize = 64;

/// The most of a `.git` file or `commondir` read.
const MAX_LINK_FILE: u64 = 64 * 1024;

/// Why a git entry below the workspace cannot be covered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// `.git` is a symbolic link (the engine would bind what it names).
    Link,
    /// `.git` is neither a folder nor a regular file.
    Special,
    /// A `.git` file that cannot be read, or names no folder devcell can resolve.
    Unreadable,
    /// A `.git` file naming a git directory no cover hides (outside the workspace, or a
    /// writable folder in it).
    PointsElsewhere(PathBuf),
    /// A git directory whose `commondir` names another git directory no cover hides.
    CommonDirElsewhere(PathBuf),
    /// A folder the walk could not list: what it holds is not known.
    Unlisted,
    /// The walk stopped at its bound of folders or depth before reading this folder whole.
    Truncated,
    /// More entries than [`MAX_COVERED`].
    TooMany(usize),
    /// The workspace folder itself is laid out as a git directory (`HEAD` with `objects/` and
    /// `refs/`, or `commondir`): it cannot be bound read-only on itself (attack L2/L3).
    RootIsGitDir,
    /// A gitlink (submodule) of a repository's index whose folder is missing, not a folder,
    /// or below a symbolic link: a `.git` made there is one the host's `git status` enters
    /// (attack N7).
    GitlinkNoFolder,
    /// A repository's index that cannot be read: its gitlinks (submodule folders) are not
    /// known.
    IndexUnreadable,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Link => f.write_str("a symbolic link"),
            Why::Special => f.write_str("neither a folder nor a file"),
            Why::Unreadable => f.write_str("a `.git` file devcell cannot read or resolve"),
            Why::PointsElsewhere(p) => write!(
                f,
                "a `.git` file naming `{}`, a git directory the container could write or devcell does not cover",
                p.display()
            ),
            Why::CommonDirElsewhere(p) => write!(
                f,
                "its `commondir` names `{}`, a git directory devcell does not cover",
                p.display()
            ),
            Why::Unlisted => f.write_str("a folder devcell could not list (a `.git` in it is not known)"),
            Why::Truncated => f.write_str(
                "devcell's walk for git entries did not read this folder whole: the workspace is larger or deeper than it reads (1,000,000 folders, 32 levels), so a git directory in it is not known",
            ),
            Why::TooMany(n) => write!(f, "{n} nested `.git` entries, more than the {MAX_COVERED} devcell covers"),
            Why::GitlinkNoFolder => f.write_str(
                "a submodule (gitlink) of the repository whose folder is missing or below a symbolic link: a git directory made there is one the host's `git status` enters",
            ),
            Why::IndexUnreadable => f.write_str(
                "a repository whose index cannot be read, so its submodule folders are not known",
            ),
            Why::RootIsGitDir => f.write_str(
                "the workspace folder is itself laid out as a git directory (`HEAD` with `objects/` and `refs/`, or `commondir`), which git takes as the repository of every folder in it",
            ),
        }
    }
}

/// One entry devcell cannot cover: its workspace-relative path (`*` for the whole walk) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncoverable {
    /// The `.git` entry (or folder) relative to the workspace root; `*` for the walk itself.
    pub rel: String,
    /// Why.
    pub why: Why,
}

impl Uncoverable {
    /// The grant that accepts it.
    pub fn grant(&self) -> String {
        format!("--allow uncovered-git:{}", self.rel)
    }
}

/// The items as one line: `` `rel` (why); … ``.
pub fn list(items: &[Uncoverable]) -> String {
    items
        .iter()
        .map(|u| format!("`{}` ({})", u.rel, u.why))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What kind of file a git entry is (read without following a link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A folder.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// Anything else (or gone).
    Other,
}

impl FileKind {
    /// The kind of `path`, not following a link.
    pub fn of(path: &Path) -> FileKind {
        match path.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => FileKind::Symlink,
            Ok(m) if m.is_dir() => FileKind::Dir,
            Ok(m) if m.is_file() => FileKind::File,
            _ => FileKind::Other,
        }
    }
}

/// One git entry the walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Relative to the root (`.git`, `vendor/lib/.git`, `upstream.git`, `.` for the root).
    pub rel: String,
    /// What it is.
    pub kind: FileKind,
    /// A folder under another name than `.git` that is itself a git directory.
    pub bare: bool,
}

/// The git entries below a root, as judged: what the walk found and where it fell short.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Walk {
    /// Each entry.
    pub found: Vec<Found>,
    /// Whether the walk stopped at its bound.
    pub truncated: bool,
    /// Where it stopped ([`crate::security::git_entries::GitEntries::cut`]).
    pub cut: Vec<String>,
    /// Folders it could not list (relative).
    pub unlisted: Vec<String>,
}

impl Walk {
    /// Walks `root` now ([`crate::security::git_entries::find`]).
    pub fn of(root: &Path) -> Walk {
        let found = crate::security::git_entries::find(root);
        Walk {
            found: found
                .entries
                .into_iter()
                .map(|e| Found {
                    kind: FileKind::of(&e.path),
                    bare: e.kind == crate::security::git_entries::EntryKind::GitDir,
                    rel: e.rel,
                })
                .collect(),
            truncated: found.truncated,
            cut: found.cut,
            unlisted: found.unlisted,
        }
    }
}

/// What the container's other mounts already cover (all host paths, as given: the caller
/// canonicalises what must be): `.git` entries hidden under another bind, host git
/// directories never shown, folders bound read-only, and folders bound on themselves (the
/// workspace root first).
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// `.git` entries already covered (a handoff's repositories).
    pub dot_gits: Vec<PathBuf>,
    /// Git directories (canonical) the container never sees.
    pub git_dirs: Vec<PathBuf>,
    /// Folders bound read-only.
    pub read_only: Vec<PathBuf>,
    /// Folders bound on themselves (mount points), the root included.
    pub folders: Vec<PathBuf>,
}

impl Known {
    /// Nothing covered but the root, bound on itself (a plain `up`'s workspace mount).
    pub fn root_only(root: &Path) -> Known {
        Known {
            folders: vec![root.to_path_buf()],
            ..Known::default()
        }
    }

    /// Whether `path` (a `.git` entry) is already out of the container's reach.
    fn covers(&self, path: &Path) -> bool {
        self.dot_gits.iter().any(|d| d == path)
            || self.git_dirs.iter().any(|d| path.starts_with(d))
            || self.read_only.iter().any(|f| path.starts_with(f))
    }

    /// Whether the git directory `dir` (canonical) is hidden from the container: a host git
    /// directory never shown, or inside one of the read-only `nested` ones.
    fn hides(&self, dir: &Path, nested: &[PathBuf]) -> bool {
        self.git_dirs.iter().any(|d| dir.starts_with(d))
            || self.read_only.iter().any(|f| dir.starts_with(f))
            || nested.iter().any(|d| dir.starts_with(d))
    }
}

/// The covers of the git entries below a root: each entry bound read-only on itself, each
/// folder between an entry and the root bound read-write on itself; and what the user
/// accepted uncovered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Each covered git entry, relative to the root (bound read-only on itself).
    pub entries: Vec<String>,
    /// The folders bound on themselves (relative to the root, outermost first).
    pub folders: Vec<String>,
    /// Entries devcell could not cover that the user accepted.
    pub accepted: Vec<Uncoverable>,
}

/// One bind of a [`Plan`]: a host path bound on itself at its container path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The host path.
    pub source: PathBuf,
    /// Its container path.
    pub target: String,
    /// Read-only (an entry) or not (a folder above one).
    pub read_only: bool,
}

impl Plan {
    /// The binds, the root mounted at `container_root`: each folder on itself (read-write,
    /// outermost first), then each entry on itself (read-only).
    pub fn binds(&self, root: &Path, container_root: &str) -> Vec<Bind> {
        let target = |rel: &str| format!("{}/{rel}", container_root.trim_end_matches('/'));
        let folders = self.folders.iter().map(|rel| Bind {
            source: root.join(rel),
            target: target(rel),
            read_only: false,
        });
        let entries = self.entries.iter().map(|rel| Bind {
            source: root.join(rel),
            target: target(rel),
            read_only: true,
        });
        folders.chain(entries).collect()
    }

    /// Whether nothing is covered or accepted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.folders.is_empty() && self.accepted.is_empty()
    }
}

/// Judges every git entry of `walk` (made at `root`) that `known` does not cover (see the
/// module docs); `accepts` says whether the user accepted an uncoverable entry by its
/// relative path (`uncovered-git:` grants).
///
/// Errors: each entry devcell cannot cover and the user did not accept.
pub fn judge(
    root: &Path,
    known: &Known,
    walk: &Walk,
    accepts: &dyn Fn(&str) -> bool,
) -> Result<Plan, Vec<Uncoverable>> {
    let mut uncoverable = Vec::new();
    let candidates: Vec<&Found> = walk
        .found
        .iter()
        .filter(|f| !known.covers(&root.join(&f.rel)))
        .collect();
    // a git directory under another name (a bare repository, attack L3) is covered as a
    // `.git` folder is, and whatever the walk found inside it is covered with it
    let bare_dirs: Vec<PathBuf> = candidates
        .iter()
        .filter(|f| f.bare && f.kind == FileKind::Dir && f.rel != ".")
        .map(|f| root.join(&f.rel))
        .collect();
    let candidates: Vec<&Found> = candidates
        .into_iter()
        .filter(|f| {
            let path = root.join(&f.rel);
            !bare_dirs.iter().any(|d| path != *d && path.starts_with(d))
        })
        .collect();
    // git directories first: a `.git` file may name one of them (read-only, so covered)
    let dirs: Vec<PathBuf> = candidates
        .iter()
        .filter(|f| f.kind == FileKind::Dir)
        .map(|f| root.join(&f.rel))
        .collect();
    let mut covered = Vec::new();
    for f in candidates {
        let path = root.join(&f.rel);
        let why = match f.kind {
            _ if f.rel == "." => Some(Why::RootIsGitDir),
            FileKind::Dir => common_dir_elsewhere(&path, known, &dirs),
            FileKind::File => points_elsewhere(&path, known, &dirs),
            FileKind::Symlink => Some(Why::Link),
            FileKind::Other => Some(Why::Special),
        };
        match why {
            Some(why) => uncoverable.push(Uncoverable {
                rel: f.rel.clone(),
                why,
            }),
            None => covered.push(f.rel.clone()),
        }
    }
    uncoverable.extend(walk.unlisted.iter().map(|rel| Uncoverable {
        rel: rel.clone(),
        why: Why::Unlisted,
    }));
    if walk.truncated {
        // Every folder the walk did not read whole is named, so a grant of each accepts
        // exactly what was not seen (attacks L9, M9); a walk cut in more folders than it
        // names (an empty list), or a record from before folders were named, is `*`.
        let named =
            !walk.cut.is_empty() && walk.cut.len() <= crate::security::git_entries::MAX_CUT_SHOWN;
        if named {
            uncoverable.extend(walk.cut.iter().map(|rel| Uncoverable {
                rel: rel.clone(),
                why: Why::Truncated,
            }));
        } else {
            uncoverable.push(Uncoverable {
                rel: "*".into(),
                why: Why::Truncated,
            });
        }
    }
    if covered.len() > MAX_COVERED {
        uncoverable.push(Uncoverable {
            rel: "*".into(),
            why: Why::TooMany(covered.len()),
        });
        covered.truncate(MAX_COVERED);
    }
    let (accepted, refused): (Vec<_>, Vec<_>) =
        uncoverable.into_iter().partition(|u| accepts(&u.rel));
    if !refused.is_empty() {
        return Err(refused);
    }
    Ok(Plan {
        folders: folders_above(root, &covered, known),
        entries: covered,
        accepted,
    })
}

/// Whether the `uncovered-git:` grants (`Grants::uncovered_git`) accept the uncoverable entry
/// `rel` (`uncovered-git:<rel>` or `:*`).
pub fn accepted_by(uncovered_git: Option<&BTreeSet<String>>, rel: &str) -> bool {
    uncovered_git.is_some_and(|g| g.contains("*") || g.contains(rel))
}

/// The folder a link file names (`gitdir: <path>` in a `.git` file, the whole of
/// `commondir`), relative to `base`, canonical; `Err` when unreadable or unresolvable, `Ok(None)`
/// when there is no such file.
fn link_target(file: &Path, base: &Path, prefix: &str) -> Result<Option<PathBuf>, ()> {
    let bytes = match crate::config::hostgit::read_no_follow(file, MAX_LINK_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(()),
    };
    let text = String::from_utf8(bytes).map_err(|_| ())?;
    let line = text.lines().next().unwrap_or("").trim();
    let named = line.strip_prefix(prefix).ok_or(())?.trim();
    if named.is_empty() {
        return Err(());
    }
    std::fs::canonicalize(base.join(named))
        .map(Some)
        .map_err(|_| ())
}

/// A git directory (bound read-only whole) is covered unless its `commondir` names a git
/// directory no cover hides.
fn common_dir_elsewhere(dir: &Path, known: &Known, nested: &[PathBuf]) -> Option<Why> {
    match link_target(&dir.join("commondir"), dir, "") {
        Ok(None) => None,
        Ok(Some(common)) if common.starts_with(dir) || known.hides(&common, nested) => None,
        Ok(Some(common)) => Some(Why::CommonDirElsewhere(common)),
        Err(()) => Some(Why::CommonDirElsewhere(dir.join("commondir"))),
    }
}

/// A `.git` file (bound read-only on itself) is covered when the git directory it names is
/// hidden from the container, and that directory's `commondir` too.
fn points_elsewhere(file: &Path, known: &Known, nested: &[PathBuf]) -> Option<Why> {
    let base = file.parent().unwrap_or(Path::new("/"));
    match link_target(file, base, "gitdir:") {
        Ok(Some(dir)) if known.hides(&dir, nested) => None,
        Ok(Some(dir)) => Some(Why::PointsElsewhere(dir)),
        Ok(None) | Err(()) => Some(Why::Unreadable),
    }
}

/// The folders between each covered entry and the root (or a folder already bound on
/// itself), relative, outermost first, once each.
fn folders_above(root: &Path, entries: &[String], known: &Known) -> Vec<String> {
    let mut out = BTreeSet::new();
    for rel in entries {
        let mut folder = root.join(rel);
        while folder.pop() && folder.starts_with(root) && !known.folders.contains(&folder) {
            if let Ok(r) = folder.strip_prefix(root) {
                out.insert(r.to_string_lossy().into_owned());
            }
        }
    }
    let mut out: Vec<String> = out.into_iter().collect();
    out.sort_by_key(|r| (r.matches('/').count(), r.clone()));
    out
}

/// The most gitlinks [`cover_gitlinks`] covers (each is a mount or a few).
pub const MAX_GITLINKS: usize = 64;

/// Adds to `plan` (made by [`judge`] from `walk` at `root`) each submodule folder of the
/// covered repositories that is not checked out (attack N7): for each git directory the plan
/// covers (a `.git` folder, or a `.git` file naming a covered one), each gitlink of its index
/// whose folder holds no `.git` is bound **read-only on itself** (an entry of the plan), and
/// the folders above it on themselves, as a handoff covers such a folder
/// (`handoff::container_git::submodules`). Otherwise a lifecycle hook makes `lib/.git` there
/// and the host's `git status` at the root enters the "populated" submodule and runs its
/// `core.fsmonitor`. A checked-out submodule's `.git` is an entry of the walk already.
///
/// Errors: a gitlink whose folder is missing or below a link ([`Why::GitlinkNoFolder`]), an
/// index that cannot be read ([`Why::IndexUnreadable`]), more than [`MAX_GITLINKS`]
/// gitlinks ([`Why::TooMany`]), none of them accepted by `accepts`.
pub fn cover_gitlinks(
    root: &Path,
    walk: &Walk,
    plan: &mut Plan,
    accepts: &dyn Fn(&str) -> bool,
) -> Result<(), Vec<Uncoverable>> {
    let mut uncoverable = Vec::new();
    let mut added = Vec::new();
    let covered: Vec<PathBuf> = plan.entries.iter().map(|r| root.join(r)).collect();
    for f in &walk.found {
        if f.bare || !plan.entries.contains(&f.rel) || !f.rel.ends_with(".git") {
            continue;
        }
        let dot_git = root.join(&f.rel);
        let Some(work_tree) = dot_git.parent() else {
            continue;
        };
        let git_dir = match f.kind {
            FileKind::Dir => dot_git.clone(),
            FileKind::File => match link_target(&dot_git, work_tree, "gitdir:") {
                Ok(Some(dir)) => dir,
                _ => continue,
            },
            _ => continue,
        };
        if !crate::security::git_entries::is_git_directory(&git_dir) {
            // git takes no repository here: it reads no index either
            continue;
        }
        let common_dir = match link_target(&git_dir.join("commondir"), &git_dir, "") {
            Ok(Some(common)) => common,
            _ => git_dir.clone(),
        };
        let Some(paths) = gitlinks(&git_dir, &common_dir, work_tree) else {
            uncoverable.push(Uncoverable {
                rel: f.rel.clone(),
                why: Why::IndexUnreadable,
            });
            continue;
        };
        for path in paths {
            let folder = work_tree.join(&path);
            let Ok(rel) = folder.strip_prefix(root) else {
                continue;
            };
            let rel = rel.to_string_lossy().into_owned();
            if covered.iter().any(|c| folder.starts_with(c)) || added.contains(&rel) {
                continue;
            }
            if !real_folders(work_tree, &path) {
                uncoverable.push(Uncoverable {
                    rel,
                    why: Why::GitlinkNoFolder,
                });
            } else if folder.join(".git").symlink_metadata().is_err() {
                added.push(rel);
            }
        }
    }
    if added.len() > MAX_GITLINKS {
        uncoverable.push(Uncoverable {
            rel: "*".into(),
            why: Why::TooMany(added.len()),
        });
        added.truncate(MAX_GITLINKS);
    }
    let (accepted, refused): (Vec<_>, Vec<_>) =
        uncoverable.into_iter().partition(|u| accepts(&u.rel));
    if !refused.is_empty() {
        return Err(refused);
    }
    plan.accepted.extend(accepted);
    let above = folders_above(root, &added, &Known::root_only(root));
    plan.entries.extend(added);
    let mut folders: BTreeSet<String> = plan.folders.drain(..).collect();
    folders.extend(above);
    plan.folders = folders.into_iter().collect();
    plan.folders
        .sort_by_key(|r| (r.matches('/').count(), r.clone()));
    Ok(())
}

/// Whether every part of `path` below `base` is a real folder (no link, none missing).
fn real_folders(base: &Path, path: &str) -> bool {
    let mut at = base.to_path_buf();
    Path::new(path).components().all(|c| {
        at.push(c);
        at.symlink_metadata()
            .is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink())
    })
}

/// The gitlink paths (mode 160000) of the index of the repository `git_dir` (with
/// `common_dir`, working tree `work_tree`), relative to its working tree, read through
/// devcell's private git directory (nothing the repository configures runs); only plain
/// relative paths ([`parse_gitlinks`]). `None` when the index cannot be read (git fails or
/// takes too long).
pub fn gitlinks(git_dir: &Path, common_dir: &Path, work_tree: &Path) -> Option<Vec<String>> {
    use crate::config::hostgit;
    let private = hostgit::PrivateGitDir::new(git_dir, common_dir, work_tree).ok()?;
    let mut git = private.command(&[]);
    git.args(["ls-files", "--stage", "-z"]);
    let out = hostgit::output_within(&mut git, hostgit::QUICK_DEADLINE).ok()?;
    out.status
        .success()
        .then(|| parse_gitlinks(&String::from_utf8_lossy(&out.stdout)))
}

/// The gitlink paths in `ls-files --stage -z` output whose every component is a plain name
/// (no `.`, `..`, root, nor `.git`), sorted, once each.
pub fn parse_gitlinks(listed: &str) -> Vec<String> {
    let mut out: Vec<String> = listed
        .split('\0')
        .filter(|entry| entry.starts_with("160000 "))
        .filter_map(|entry| entry.split_once('\t').map(|(_, path)| path.to_string()))
        .filter(|path| {
            !path.is_empty()
                && Path::new(path).components().all(|c| match c {
                    std::path::Component::Normal(n) => n != ".git" && !n.is_empty(),
                    _ => false,
                })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
