//! Every other `.git` below a handoff's workspace (spec-note 0400, "A hostile agent", attacks
//! K2 and K4; issue 25 class 1): a nested repository that is no submodule (a gitignored clone
//! `vendor/lib`), a linked worktree checked out inside the workspace (`.wt/feat`, its `.git` a
//! file naming `<main>/.git/worktrees/feat`). devcell gives these no container git directory,
//! and the workspace bind showed them read-write: the agent wrote `vendor/lib/.git/hooks/` or
//! re-pointed `.wt/feat/.git`, and the user's next `git commit` or `git status` there ran its
//! code on the host.
//!
//! So each `.git` entry the identity walk ([`crate::handoff::git_identity::record`]) finds at
//! the handoff's start that no container git directory covers is covered by construction: the
//! entry itself (the whole git directory, or the `.git` file) bound read-only on itself (a
//! mount point: it cannot be renamed, replaced, or written, and nothing can be created in it,
//! `commondir` included), and its folder and every folder above it up to one the handoff
//! already binds on itself bound read-write on themselves (mount points: none can be renamed
//! to plant another `.git` in its place), as submodules are. All of them are
//! [`crate::ops::options::UpOptions::covers`], so every other bind (a second bind of the
//! workspace, a Compose sidecar's `..:/w`) repeats them and the reuse check refuses a
//! container made without them.
//!
//! What cannot be covered so refuses the handoff before anything is made, naming it
//! ([`NestedGitError`]), unless the user accepts it with `--allow uncovered-git:<path>`
//! (`--allow uncovered-git:*` for all): a `.git` link or special file, a `.git` file naming a
//! git directory no cover hides (outside the workspace, or a writable folder in it), a git
//! directory whose `commondir` names one, more than [`MAX_COVERED`] entries, a folder the walk
//! could not list, a walk cut at its bound. An accepted one is a warning.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::handoff::container_git::RepoGit;
use crate::handoff::git_identity::GitIdentity;
use crate::handoff::repository::{MountPurpose, Workspace, WorkspaceMount};

/// The most `.git` entries a handoff covers this way (each costs a few mounts).
pub const MAX_COVERED: usize = 64;

/// The most of a `.git` file or `commondir` read.
const MAX_LINK_FILE: u64 = 64 * 1024;

/// Why a `.git` entry below the workspace cannot be covered.
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

/// The handoff is refused: `.git` entries below the workspace devcell cannot keep out of the
/// container's reach, not accepted.
#[derive(Debug, thiserror::Error)]
#[error("cannot hand off `{}`: devcell cannot keep {} below the workspace out of the container's reach: {}", root.display(), if items.len() == 1 { "this git entry" } else { "these git entries" }, list(items))]
pub struct NestedGitError {
    /// The workspace root.
    pub root: PathBuf,
    /// What cannot be covered.
    pub items: Vec<Uncoverable>,
}

fn list(items: &[Uncoverable]) -> String {
    items
        .iter()
        .map(|u| format!("`{}` ({})", u.rel, u.why))
        .collect::<Vec<_>>()
        .join("; ")
}

impl crate::ops::error::ProductError for NestedGitError {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        crate::handoff::envelope::ErrorCode::InvalidArgument
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "uncovered": self.items.iter().map(|u| serde_json::json!({
                "path": u.rel,
                "why": u.why.to_string(),
                "grant": u.grant(),
            })).collect::<Vec<_>>()
        })
    }

    fn hint(&self) -> Option<String> {
        let grants: Vec<String> = self
            .items
            .iter()
            .map(|u| format!("`{}`", u.grant()))
            .collect();
        Some(format!(
            "the agent could change what the host's git reads there, and your next `git status` in it would run the agent's code; remove or fix it, or accept it, writable by the agent, with {}",
            grants.join(" ")
        ))
    }
}

/// The `.git` entries below the workspace a handoff covers on top of its container git
/// directories, and those accepted uncovered.
#[derive(Debug, Clone, Default)]
pub struct NestedGits {
    /// The container path of the workspace root.
    container_root: String,
    /// The workspace root.
    root: PathBuf,
    /// Each covered `.git` entry, relative to the root (bound read-only on itself).
    pub entries: Vec<String>,
    /// The folders bound on themselves (relative to the root, outermost first).
    pub folders: Vec<String>,
    /// Entries devcell could not cover that the user accepted.
    pub accepted: Vec<Uncoverable>,
}

impl NestedGits {
    fn target(&self, rel: &str) -> String {
        format!("{}/{rel}", self.container_root.trim_end_matches('/'))
    }

    /// The mounts: each folder on itself (read-write), then each entry on itself (read-only).
    pub fn mounts(&self) -> Vec<WorkspaceMount> {
        let folders = self.folders.iter().map(|rel| WorkspaceMount {
            source: self.root.join(rel),
            target: self.target(rel),
            read_only: false,
            purpose: MountPurpose::Repository,
        });
        let entries = self.entries.iter().map(|rel| WorkspaceMount {
            source: self.root.join(rel),
            target: self.target(rel),
            read_only: true,
            purpose: MountPurpose::GitProtected,
        });
        folders.chain(entries).collect()
    }

    /// The host paths these mounts cover, with their container targets
    /// ([`crate::ops::options::UpOptions::covers`]).
    pub fn covers(&self) -> Vec<(PathBuf, String)> {
        self.mounts()
            .into_iter()
            .map(|m| (m.source, m.target))
            .collect()
    }

    /// A warning per accepted entry.
    pub fn warnings(&self) -> Vec<String> {
        self.accepted
            .iter()
            .map(|u| {
                format!(
                    "`{}` below the workspace is not covered ({}; accepted with `{}`): the agent can change what the host's git reads there; check it before running git in it",
                    u.rel,
                    u.why,
                    u.grant()
                )
            })
            .collect()
    }
}

/// Judges every `.git` entry of `identity` (recorded at `ws.root`) that `gits` do not cover:
/// see the module docs. `grants` are the handoff's (`uncovered-git:`).
///
/// Errors: [`NestedGitError`] naming each entry devcell cannot cover and the user did not
/// accept.
pub fn judge(
    ws: &Workspace,
    gits: &[RepoGit],
    identity: &GitIdentity,
    grants: Option<&crate::security::Grants>,
) -> Result<NestedGits, NestedGitError> {
    let root = ws.root.as_path();
    let mut known = Known::of(root, gits);
    // a discovered repository left without a container git directory (its git directory is
    // untrusted) is judged as a `gitdir:` request instead (spec-note 0411)
    known
        .dot_gits
        .extend(ws.repos.iter().map(|r| r.host_path.join(".git")));
    let mut out = NestedGits {
        container_root: ws.container_root.clone(),
        root: root.to_path_buf(),
        ..NestedGits::default()
    };
    let mut uncoverable = Vec::new();
    let candidates: Vec<(&String, &crate::handoff::git_identity::GitEntry)> = identity
        .entries
        .iter()
        .filter(|(rel, _)| !known.covers(&root.join(rel)))
        .collect();
    // a git directory under another name (a bare repository, attack L3) is covered as a
    // `.git` folder is, and whatever the walk found inside it is covered with it
    let bare_dirs: Vec<PathBuf> = candidates
        .iter()
        .filter(|(rel, e)| e.bare && e.kind == "dir" && rel.as_str() != ".")
        .map(|(rel, _)| root.join(rel))
        .collect();
    let candidates: Vec<_> = candidates
        .into_iter()
        .filter(|(rel, _)| {
            let path = root.join(rel);
            !bare_dirs.iter().any(|d| path != *d && path.starts_with(d))
        })
        .collect();
    // git directories first: a `.git` file may name one of them (read-only, so covered)
    let dirs: Vec<PathBuf> = candidates
        .iter()
        .filter(|(_, e)| e.kind == "dir")
        .map(|(rel, _)| root.join(rel))
        .collect();
    let mut covered = Vec::new();
    for (rel, entry) in candidates {
        let path = root.join(rel);
        let why = match entry.kind.as_str() {
            _ if rel == "." => Some(Why::RootIsGitDir),
            "dir" => common_dir_elsewhere(&path, &known, &dirs),
            "file" => points_elsewhere(&path, &known, &dirs),
            "symlink" => Some(Why::Link),
            _ => Some(Why::Special),
        };
        match why {
            Some(why) => uncoverable.push(Uncoverable {
                rel: rel.clone(),
                why,
            }),
            None => covered.push(rel.clone()),
        }
    }
    uncoverable.extend(identity.unlisted.iter().map(|rel| Uncoverable {
        rel: rel.clone(),
        why: Why::Unlisted,
    }));
    if identity.truncated {
        // Every folder the walk did not read whole is named, so a grant of each accepts
        // exactly what was not seen (attacks L9, M9); a walk cut in more folders than it
        // names (an empty list), or a record from before folders were named, is `*`.
        let named = !identity.cut.is_empty()
            && identity.cut.len() <= crate::security::git_entries::MAX_CUT_SHOWN;
        if named {
            uncoverable.extend(identity.cut.iter().map(|rel| Uncoverable {
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
    let accepts = |rel: &str| {
        grants.is_some_and(|g| g.uncovered_git.contains("*") || g.uncovered_git.contains(rel))
    };
    let (accepted, refused): (Vec<_>, Vec<_>) =
        uncoverable.into_iter().partition(|u| accepts(&u.rel));
    if !refused.is_empty() {
        return Err(NestedGitError {
            root: root.to_path_buf(),
            items: refused,
        });
    }
    out.accepted = accepted;
    out.folders = folders_above(root, &covered, &known);
    out.entries = covered;
    Ok(out)
}

/// What the handoff already covers: the `.git` of each repository given a container git
/// directory, its host git directories (never shown to the container), the folders bound
/// read-only, and the folders bound on themselves.
struct Known {
    dot_gits: Vec<PathBuf>,
    git_dirs: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    folders: Vec<PathBuf>,
}

impl Known {
    fn of(root: &Path, gits: &[RepoGit]) -> Self {
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let mut folders = vec![root.to_path_buf()];
        folders.extend(gits.iter().map(|g| g.work_tree.clone()));
        folders.extend(
            gits.iter()
                .flat_map(|g| g.folders.iter().map(|f| f.source.clone())),
        );
        Known {
            dot_gits: gits.iter().map(|g| g.work_tree.join(".git")).collect(),
            git_dirs: gits
                .iter()
                .flat_map(|g| [canonical(&g.git_dir), canonical(&g.common_dir)])
                .collect(),
            read_only: gits
                .iter()
                .flat_map(|g| g.folders.iter().filter(|f| f.read_only))
                .map(|f| f.source.clone())
                .collect(),
            folders,
        }
    }

    /// Whether `path` (a `.git` entry) is already out of the container's reach.
    fn covers(&self, path: &Path) -> bool {
        self.dot_gits.iter().any(|d| d == path)
            || self.git_dirs.iter().any(|d| path.starts_with(d))
            || self.read_only.iter().any(|f| path.starts_with(f))
    }

    /// Whether the git directory `dir` (canonical) is hidden from the container: a host git
    /// directory of a covered repository, or inside one of the read-only `nested` ones.
    fn hides(&self, dir: &Path, nested: &[PathBuf]) -> bool {
        self.git_dirs.iter().any(|d| dir.starts_with(d))
            || self.read_only.iter().any(|f| dir.starts_with(f))
            || nested.iter().any(|d| dir.starts_with(d))
    }
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

/// The folders between each covered entry and the root (or a folder the handoff already
/// binds on itself), relative, outermost first, once each.
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

#[cfg(test)]
mod tests;
