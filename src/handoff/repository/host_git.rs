//! The host `git` runs of a workspace inspection: a command pinned to the directories devcell
//! judged ([`GitPin`], [`git`]), `git status` on a private git directory
//! ([`status_on_private_git_dir`]) and the parse of its porcelain output ([`parse_status`]).

use crate::handoff::failure::GitFailed;
use std::path::Path;

use super::WorkspaceError;

/// The directories a host `git` is pinned to: what [`super::describe`] judged, not what the links
/// say when git runs. The common directory (whose `config` and `hooks` git uses) is pinned
/// with `GIT_COMMON_DIR`, the working tree with `GIT_WORK_TREE` (no `core.worktree`); the
/// worktree's own git directory is left to git's discovery, so git's ownership check
/// (`safe.directory`) still runs (spec-note 0322).
pub(super) struct GitPin<'a> {
    pub(super) work_tree: &'a Path,
    pub(super) common_dir: &'a Path,
}

/// Runs `git <args>` pinned to `pin`, with nothing the repository configures executable
/// ([`crate::config::hostgit::command`] with `extra` overrides), and returns standard output;
/// as the owner of the working tree when devcell is root and the owner is not.
pub(super) fn git(
    pin: &GitPin<'_>,
    args: &[&str],
    extra: &[(String, String)],
) -> Result<String, WorkspaceError> {
    let dir = pin.work_tree;
    let mut command = crate::config::hostgit::command(dir, extra);
    command
        .args(args)
        .env("GIT_COMMON_DIR", pin.common_dir)
        .env("GIT_WORK_TREE", dir);
    let output = match crate::config::hostgit::output_within(
        &mut command,
        crate::config::hostgit::quick_deadline(),
    ) {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            return Err(WorkspaceError::Git(GitFailed {
                dir: dir.to_path_buf(),
                args: args.join(" "),
                stderr: e.to_string(),
            }));
        }
        Err(source) => return Err(WorkspaceError::GitUnavailable { source }),
    };
    if !output.status.success() {
        return Err(WorkspaceError::Git(GitFailed {
            dir: dir.to_path_buf(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        }));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `git status --porcelain=v2 --branch` of the working tree `dir` run on a
/// [`crate::config::hostgit::PrivateGitDir`] made from the judged `git_dir` and `common_dir`
/// (the configuration git uses is devcell's single read of it); a repository it cannot
/// reproduce is a [`WorkspaceError::Git`] whose message says why. Bounded by
/// [`crate::config::hostgit::quick_deadline`]: the index git reads is the container's to
/// write, and a FIFO there would make git wait for a writer for ever.
pub(super) fn status_on_private_git_dir(
    dir: &Path,
    git_dir: &Path,
    common_dir: &Path,
) -> Result<String, WorkspaceError> {
    status_within(
        dir,
        git_dir,
        common_dir,
        crate::config::hostgit::quick_deadline(),
    )
}

/// [`status_on_private_git_dir`] with the deadline given: past it git is killed and the result
/// is a [`WorkspaceError::Git`] that says so.
pub(super) fn status_within(
    dir: &Path,
    git_dir: &Path,
    common_dir: &Path,
    deadline: std::time::Duration,
) -> Result<String, WorkspaceError> {
    let args = [
        "status",
        "--porcelain=v2",
        "--branch",
        "--untracked-files=normal",
        "--ignore-submodules=dirty",
    ];
    let failed = |stderr: String| {
        WorkspaceError::Git(GitFailed {
            dir: dir.to_path_buf(),
            args: args.join(" "),
            stderr,
        })
    };
    let private = crate::config::hostgit::PrivateGitDir::new(git_dir, common_dir, dir)
        .map_err(|e| failed(e.to_string()))?;
    let mut command = private.command(&[]);
    command.args(args);
    let output = match crate::config::hostgit::output_within(&mut command, deadline) {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(failed(e.to_string())),
        Err(source) => return Err(WorkspaceError::GitUnavailable { source }),
    };
    if !output.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The parts of `git status --porcelain=v2 --branch` devcell uses.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Status {
    pub(super) head: Option<String>,
    pub(super) branch: Option<String>,
    pub(super) upstream: Option<String>,
    pub(super) ahead: Option<u32>,
    pub(super) behind: Option<u32>,
    pub(super) dirty: bool,
}

/// Parses porcelain v2 output: `# branch.oid <oid>|(initial)`, `# branch.head <name>|(detached)`,
/// `# branch.upstream <name>`, `# branch.ab +A -B` (absent when the upstream is gone), and entry
/// lines (any makes the tree dirty).
pub(super) fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("# ") {
            let (key, value) = header.split_once(' ').unwrap_or((header, ""));
            match key {
                "branch.oid" if value != "(initial)" => s.head = Some(value.to_string()),
                "branch.head" if value != "(detached)" => s.branch = Some(value.to_string()),
                "branch.upstream" => s.upstream = Some(value.to_string()),
                "branch.ab" => {
                    let mut it = value.split(' ');
                    s.ahead = it
                        .next()
                        .and_then(|a| a.trim_start_matches('+').parse().ok());
                    s.behind = it
                        .next()
                        .and_then(|b| b.trim_start_matches('-').parse().ok());
                }
                _ => {}
            }
        } else if !line.is_empty() {
            s.dirty = true;
        }
    }
    s
}
