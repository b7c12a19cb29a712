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

use std::path::{Path, PathBuf};

use crate::handoff::container_git::RepoGit;
use crate::handoff::git_identity::GitIdentity;
use crate::handoff::repository::{MountPurpose, Workspace, WorkspaceMount};
use crate::security::git_cover::{FileKind, Found, Known, Walk};
pub use crate::security::git_cover::{MAX_COVERED, Uncoverable, Why};

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

use crate::security::git_cover::list;

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
/// see the module docs and [`crate::security::git_cover::judge`], the judgement a plain `up`
/// shares. `grants` are the handoff's (`uncovered-git:`).
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
    let mut known = known(root, gits);
    // a discovered repository left without a container git directory (its git directory is
    // untrusted) is judged as a `gitdir:` request instead (spec-note 0411)
    known
        .dot_gits
        .extend(ws.repos.iter().map(|r| r.host_path.join(".git")));
    let accepts =
        |rel: &str| crate::security::git_cover::accepted_by(grants.map(|g| &g.uncovered_git), rel);
    let plan = crate::security::git_cover::judge(root, &known, &walk_of(identity), &accepts)
        .map_err(|items| NestedGitError {
            root: root.to_path_buf(),
            items,
        })?;
    Ok(NestedGits {
        container_root: ws.container_root.clone(),
        root: root.to_path_buf(),
        entries: plan.entries,
        folders: plan.folders,
        accepted: plan.accepted,
    })
}

/// The recorded identity as the judgement reads it.
fn walk_of(identity: &GitIdentity) -> Walk {
    Walk {
        found: identity
            .entries
            .iter()
            .map(|(rel, e)| Found {
                rel: rel.clone(),
                kind: match e.kind.as_str() {
                    "dir" => FileKind::Dir,
                    "file" => FileKind::File,
                    "symlink" => FileKind::Symlink,
                    _ => FileKind::Other,
                },
                bare: e.bare,
            })
            .collect(),
        truncated: identity.truncated,
        cut: identity.cut.clone(),
        unlisted: identity.unlisted.clone(),
    }
}

/// What the handoff already covers: the `.git` of each repository given a container git
/// directory, its host git directories (never shown to the container), the folders bound
/// read-only, and the folders bound on themselves.
fn known(root: &Path, gits: &[RepoGit]) -> Known {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut folders: Vec<PathBuf> = vec![root.to_path_buf()];
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

#[cfg(test)]
mod tests;
