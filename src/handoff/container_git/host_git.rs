//! Reading the host repository with git (its own CLI, with every program a repository could
//! configure disabled) and as data: its refs, `HEAD`, gitlinks and the branches its other
//! worktrees have checked out.

use crate::handoff::failure::GitFailed;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::refs::is_oid;
use super::{ContainerGitError, HostRepo, Result, io};
use crate::config::hostgit;

/// The paths of the gitlinks (submodule entries, mode 160000) in `commit`'s tree.
fn gitlinks(host: &HostRepo<'_>, commit: &str) -> Result<std::collections::BTreeSet<String>> {
    let listed = host_git(host, host.common_dir, &["ls-tree", "-r", "-z", commit])?;
    Ok(listed
        .split('\0')
        .filter(|entry| entry.starts_with("160000 "))
        .filter_map(|entry| entry.split_once('\t').map(|(_, path)| path.to_string()))
        .collect())
}

/// Whether `new` has a gitlink at a path where `old` (none: the host's `HEAD` had no commit)
/// has none. Existing submodules moving to other commits are not counted.
pub(super) fn adds_gitlink(host: &HostRepo<'_>, old: Option<&String>, new: &str) -> Result<bool> {
    let before = match old {
        Some(old) => gitlinks(host, old)?,
        None => Default::default(),
    };
    Ok(gitlinks(host, new)?.iter().any(|p| !before.contains(p)))
}

/// The gitlink paths of `commit` that are not in `covered` (a commit that cannot be read
/// is an error).
pub(super) fn uncovered_gitlinks(
    host: &HostRepo<'_>,
    commit: &str,
    covered: &std::collections::BTreeSet<String>,
) -> Result<Vec<String>> {
    Ok(gitlinks(host, commit)?
        .into_iter()
        .filter(|p| !covered.contains(p))
        .collect())
}

/// The host `HEAD` (`git_dir/HEAD`, read without following a link), trimmed.
pub(super) fn read_head(host: &HostRepo<'_>) -> Result<String> {
    let head_path = host.git_dir.join("HEAD");
    hostgit::read_no_follow(&head_path, 4096)
        .map(|h| String::from_utf8_lossy(&h).trim().to_string())
        .map_err(io(&head_path))
}

/// The most linked worktrees [`checked_out_elsewhere`] reads.
const MAX_WORKTREES: usize = 4096;

/// The branches checked out in the other worktrees of `host`'s repository: the `HEAD` of its
/// common git directory (the main worktree, unless that is `host` itself) and of each
/// `<common>/worktrees/<name>/` but `host`'s own, read as data (no link followed, no git run).
/// A `HEAD` that cannot be read names nothing; a folder past [`MAX_WORKTREES`] is not read.
pub(super) fn checked_out_elsewhere(host: &HostRepo<'_>) -> std::collections::BTreeSet<String> {
    let same = |dir: &Path| {
        dir == host.git_dir
            || std::fs::canonicalize(dir).ok().as_deref()
                == std::fs::canonicalize(host.git_dir).ok().as_deref()
    };
    let mut dirs = Vec::new();
    if !is_bare(host) {
        dirs.push(host.common_dir.to_path_buf());
    }
    if let Ok(entries) = std::fs::read_dir(host.common_dir.join("worktrees")) {
        dirs.extend(
            entries
                .take(MAX_WORKTREES)
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    dirs.into_iter()
        .filter(|d| !same(d))
        .filter_map(|d| hostgit::read_no_follow(&d.join("HEAD"), 4096).ok())
        .map(|h| String::from_utf8_lossy(&h).trim().to_string())
        .filter_map(|h| h.strip_prefix("ref: ").map(str::to_string))
        .collect()
}

/// Whether the common git directory's own `config` says `core.bare = true` (read with
/// `--file`: no include followed, nothing run; a bare repository's `HEAD` is checked out
/// nowhere). Unreadable is not bare, so its `HEAD` counts as checked out.
fn is_bare(host: &HostRepo<'_>) -> bool {
    let mut git = hostgit::command(host.work_tree, &[]);
    git.arg("config")
        .arg("--file")
        .arg(host.common_dir.join("config"))
        .args(["--type", "bool", "--get", "core.bare"]);
    hostgit::output_within(&mut git, hostgit::quick_deadline())
        .is_ok_and(|o| o.status.success() && o.stdout.trim_ascii() == b"true")
}

/// `git <args>` in the host repository, `GIT_DIR` = `git_dir`; standard output.
pub(super) fn host_git(host: &HostRepo<'_>, git_dir: &Path, args: &[&str]) -> Result<String> {
    let mut git = hostgit::command(host.work_tree, &[]);
    git.env("GIT_DIR", git_dir).args(args);
    run_git(git, host.work_tree, &args.join(" "))
}

/// Runs `git` (a host-git command) within ten minutes; its standard output, or
/// [`ContainerGitError::Git`] naming `what` and git's standard error when it fails.
pub(crate) fn run_git(mut git: Command, dir: &Path, what: &str) -> Result<String> {
    let out =
        hostgit::output_within(&mut git, std::time::Duration::from_secs(600)).map_err(io(dir))?;
    if !out.status.success() {
        return Err(ContainerGitError::Git(GitFailed {
            dir: dir.to_path_buf(),
            args: what.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The host repository's refs that are not symbolic (outside devcell's namespace).
pub(super) fn host_refs(host: &HostRepo<'_>) -> Result<BTreeMap<String, String>> {
    let listed = host_git(
        host,
        host.common_dir,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname) %(symref)",
        ],
    )?;
    Ok(listed
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let oid = parts.next()?;
            let name = parts.next()?;
            (parts.next().unwrap_or("").is_empty() && is_oid(oid))
                .then(|| (name.to_string(), oid.to_string()))
        })
        .collect())
}

/// Whether `old` is an ancestor of `new` in the host repository.
pub(super) fn is_ancestor(host: &HostRepo<'_>, old: &str, new: &str) -> Result<bool> {
    let mut git = hostgit::command(host.work_tree, &[]);
    git.env("GIT_DIR", host.common_dir)
        .args(["merge-base", "--is-ancestor", old, new]);
    let out = hostgit::output_within(&mut git, std::time::Duration::from_secs(120))
        .map_err(io(host.work_tree))?;
    Ok(out.status.success())
}
