//! The container git directory (spec-note 0436): a git directory devcell makes on the host for
//! one repository of a handoff, which the container gets *instead of* the repository's own.
//!
//! A hostile agent controls everything the container can write. Any host git directory it can
//! write (or any folder holding one it can rename) lets it plant configuration (`core.fsmonitor`,
//! hooks, `commondir`) that the user's next `git status` on the host runs, and delete every
//! commit. So the container never sees the host's git directories: it gets a
//! [`ContainerGitDir`], which devcell writes ([`ContainerGitDir::refresh`]) with the host
//! repository's `HEAD`, every ref (`packed-refs`), a copy of its index, devcell's own `config`
//! (the repository format only, plus the data keys `git status` needs) and `objects/` empty but
//! for `objects/info/alternates`, which names where the host's `objects` folder is bind-mounted
//! read-only in the container. The agent may write it freely: the host never runs git with its
//! configuration.
//!
//! The agent's commits come back through [`ContainerGitDir::fetch_back`], which reads only data
//! from it (regular files of loose objects and packs, ref values it parses itself) into a fresh
//! bare repository devcell configures, and fetches from there into the host repository with
//! object checking on. Host branches only ever move forward from where the handoff left them;
//! anything else the agent did to a ref is kept aside under `refs/devcell/<session>/` and
//! reported.

use crate::handoff::failure::GitFailed;
use crate::handoff::failure::IoFailed;
use std::path::{Path, PathBuf};

use crate::config::hostgit;

mod confine;
mod dir;
mod fetch_back;
mod files;
mod host_git;
mod import;
mod inflated;
mod mounts;
mod names;
mod nofollow;
mod refs;
mod repo_git;
mod report;
pub mod submodules;

pub use dir::ContainerGitDir;
pub use import::STAGING_MAX;
pub(crate) use import::{import_refs, objects_size, stage_objects};
pub use inflated::{FetchBudget, LOOSE_MAX, NEW_OBJECTS_MAX, NewObjects, OverInflated};
pub use mounts::{covers, mounts, repo_gits};
pub(crate) use refs::is_oid;
pub use refs::valid_ref_name;
pub use repo_git::{CONTAINER_BASE, FolderBind, RepoGit};
pub use report::{Base, FetchBack, KeptReason, KeptRef, RefUpdate};

/// The most refs a fetch-back brings back (a container writing millions of refs gets an error,
/// not hours of work).
const MAX_CHANGED_REFS: usize = 10_000;

/// The host namespace the agent's refs are fetched into.
pub const NAMESPACE: &str = "refs/devcell";

/// A failure making, refreshing or reading back a container git directory.
#[derive(Debug, thiserror::Error)]
pub enum ContainerGitError {
    /// A file could not be read or written.
    #[error(transparent)]
    Io(IoFailed),
    /// The host repository could not be read safely.
    #[error(transparent)]
    Host(#[from] hostgit::PrivateGitDirError),
    /// A `git` command failed.
    #[error(transparent)]
    Git(GitFailed),
    /// The container changed more refs than devcell brings back.
    #[error("the container git directory `{}` changed more than {MAX_CHANGED_REFS} refs; none was brought back", path.display())]
    TooManyRefs {
        /// The container git directory.
        path: PathBuf,
    },
    /// The objects to stage for a fetch-back are larger than the budget: nothing was fetched.
    #[error(
        "the objects to bring back from `{}` are {size} bytes, more than the fetch-back budget of {budget} bytes",
        path.display()
    )]
    OverBudget {
        /// The untrusted git directory.
        path: PathBuf,
        /// Their size in bytes (at least this much, when they grew while being copied).
        size: u64,
        /// The budget in bytes.
        budget: u64,
    },
    /// What the fetch-back would bring is over an inflated bound (one object, all of them, how
    /// many) or cannot be measured: nothing was fetched (spec-note 0438).
    #[error("nothing was brought back from `{}`: {why}", path.display())]
    OverInflated {
        /// The untrusted git directory.
        path: PathBuf,
        /// Which bound, and by how much.
        why: OverInflated,
    },
    /// A submodule devcell cannot cover: the handoff is refused before the container is made,
    /// since the agent could plant a git directory there that the host's `git status` enters
    /// (spec-note 0436, "Submodules").
    #[error("cannot hand off `{}`: {why}", path.display())]
    UncoverableSubmodule {
        /// The submodule's folder (or the superproject whose submodules are past a limit or
        /// whose index cannot be read).
        path: PathBuf,
        /// What is wrong.
        why: submodules::Uncoverable,
    },
    /// A path of a repository's host git directories devcell would mount or read for its
    /// container git directory (`objects`, `refs`, `packed-refs`, `commondir`, the
    /// alternates, …) is a symbolic link, is reached through one, or is not what git makes
    /// there: the engine or git would follow it to another folder of the host (attack M11).
    /// Refused before any container is made; no grant accepts it.
    #[error("cannot hand off repository `{repo}`: `{}` {why}", path.display())]
    NotConfined {
        /// The repository.
        repo: String,
        /// The path in its git directory.
        path: PathBuf,
        /// What it is.
        why: String,
    },
}

impl crate::ops::error::ProductError for ContainerGitError {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        match self {
            ContainerGitError::UncoverableSubmodule { .. }
            | ContainerGitError::NotConfined { .. } => {
                crate::handoff::envelope::ErrorCode::InvalidArgument
            }
            _ => crate::handoff::envelope::ErrorCode::Internal,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ContainerGitError::UncoverableSubmodule { why, .. } => Some(why.hint().into()),
            ContainerGitError::NotConfined { .. } => Some(
                "devcell mounts a repository's objects and copies its refs from the repository's own git directory only, and a link there would show the container whatever it names on this host (another repository, your home); an agent of an earlier session may have made it: check the repository before running git in it, and put the folder or file itself in the link's place (or remove the repository from the workspace)".into(),
            ),
            ContainerGitError::Host(_) => Some(
                "devcell gives the container a copy of each repository's git directory and must read it first; fix the repository (or hand off a workspace without it)".into(),
            ),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, ContainerGitError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ContainerGitError + '_ {
    move |source| {
        ContainerGitError::Io(IoFailed {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The host repository a container git directory stands in for, as devcell judged it.
#[derive(Debug, Clone, Copy)]
pub struct HostRepo<'a> {
    /// The working tree.
    pub work_tree: &'a Path,
    /// Its git directory (a linked worktree's own, `<common>/worktrees/<name>`).
    pub git_dir: &'a Path,
    /// The common git directory (objects, refs, config).
    pub common_dir: &'a Path,
}

#[cfg(test)]
mod tests;
