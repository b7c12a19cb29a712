//! The git links of a repository: reading a `.git` file, a `commondir` file and a `.git`
//! symbolic link (bounded, never following a FIFO or device), and judging the git directories
//! they name ([`judge_git_links`], spec-note 0411).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{RepoKind, WorkspaceError};

/// The git directories a repository's links name that devcell does not trust on its own, as
/// `(link file, resolved directory, reason)` (spec-note 0411). Trusted: a `.git` directory
/// without `commondir`, a link to a git directory inside `root`, and a linked worktree as
/// `git worktree add` makes it: its git directory is `<C>/worktrees/<name>`, `commondir`
/// resolves to `<C>`, `<C>` is a git directory (`HEAD`, `objects/`, `refs/`, no `commondir`
/// of its own), and `<C>/worktrees/<name>/gitdir` points back at this repository's `.git`
/// (the two-way link git itself maintains and `git worktree repair` restores). A `commondir`
/// that names anything but `<C>` is never trusted, wherever it points. Pure but for reading
/// those files.
pub fn judge_git_links(
    dir: &Path,
    kind: RepoKind,
    git_dir: &Path,
    common_dir: &Path,
    root: &Path,
) -> Vec<(PathBuf, PathBuf, String)> {
    let mut out = Vec::new();
    let commondir_file = git_dir.join("commondir");
    let has_commondir = commondir_file.is_file();
    let holder = git_dir
        .parent()
        .filter(|p| p.file_name() == Some(OsStr::new("worktrees")))
        .and_then(Path::parent);
    let worktree_form = has_commondir && holder == Some(common_dir);
    if has_commondir && !worktree_form {
        out.push((
            commondir_file,
            common_dir.to_path_buf(),
            match holder {
                Some(_) => "which is not the repository holding this worktree's git directory".to_string(),
                None => "and git writes a `commondir` only in a linked worktree's git directory (`<repository>/worktrees/<name>`)".to_string(),
            },
        ));
    }
    let linked = kind == RepoKind::Worktree
        || dir
            .join(".git")
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink());
    if linked && !git_dir.starts_with(root) {
        let is_git_dir = |c: &Path| {
            c.join("HEAD").is_file()
                && c.join("objects").is_dir()
                && c.join("refs").is_dir()
                && !c.join("commondir").exists()
        };
        let back_link = read_small(&git_dir.join("gitdir")).ok().and_then(|text| {
            let line = text.lines().next()?.trim().to_string();
            std::fs::canonicalize(git_dir.join(line)).ok()
        });
        let this = std::fs::canonicalize(dir.join(".git")).ok();
        let ok =
            worktree_form && is_git_dir(common_dir) && back_link.is_some() && back_link == this;
        if !ok {
            out.push((
                dir.join(".git"),
                git_dir.to_path_buf(),
                "outside the workspace, and not a worktree of a repository whose `worktrees/<name>/gitdir` points back at this one".to_string(),
            ));
        }
    }
    out.dedup_by(|a, b| a.1 == b.1);
    out
}

/// Reads a `.git` file: returns the `gitdir:` target as written and whether it is relative.
pub(super) fn read_gitdir_link(dot_git: &Path) -> Result<(PathBuf, bool), WorkspaceError> {
    let text = read_small(dot_git)?;
    let target = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| WorkspaceError::BadGitLink {
            path: dot_git.to_path_buf(),
            message: "expected a first line `gitdir: <path>`".into(),
        })?;
    let target = PathBuf::from(target);
    let relative = target.is_relative();
    Ok((target, relative))
}

/// The common git dir of `git_dir`: its `commondir` file resolved, or `git_dir` itself.
pub(super) fn read_commondir(git_dir: &Path) -> Result<PathBuf, WorkspaceError> {
    let file = git_dir.join("commondir");
    if !file.is_file() {
        return Ok(git_dir.to_path_buf());
    }
    let text = read_small(&file)?;
    let line = text.lines().next().map(str::trim).unwrap_or("");
    if line.is_empty() {
        return Err(WorkspaceError::BadGitLink {
            path: file,
            message: "the file is empty".into(),
        });
    }
    link_target(&file, &git_dir.join(line))
}

/// Canonicalises the target of the git link `link`, turning a missing target into a
/// [`WorkspaceError::BadGitLink`] that says what to do.
pub(super) fn link_target(link: &Path, target: &Path) -> Result<PathBuf, WorkspaceError> {
    match std::fs::canonicalize(target) {
        Ok(p) => Ok(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(WorkspaceError::BadGitLink {
            path: link.to_path_buf(),
            message: format!(
                "it points at `{}`, which does not exist (was the main repository moved or deleted? `git worktree repair` fixes a moved one)",
                target.display()
            ),
        }),
        Err(source) => Err(WorkspaceError::Io {
            path: target.to_path_buf(),
            source,
        }),
    }
}

pub(super) fn read_small(path: &Path) -> Result<String, WorkspaceError> {
    // Bounded one byte past the limit (no FIFO or device: the container can write these).
    let bytes =
        crate::config::bounded::read(path, 64 * 1024 + 1).map_err(|source| WorkspaceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() > 64 * 1024 {
        return Err(WorkspaceError::BadGitLink {
            path: path.to_path_buf(),
            message: "the file is larger than 64 KiB".into(),
        });
    }
    String::from_utf8(bytes).map_err(|_| WorkspaceError::BadGitLink {
        path: path.to_path_buf(),
        message: "the file is not UTF-8".into(),
    })
}

pub(super) fn canonical(path: &Path) -> Result<PathBuf, WorkspaceError> {
    std::fs::canonicalize(path).map_err(|source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The raw first line of `<git_dir>/commondir`, `None` when the file is absent.
pub(super) fn read_commondir_raw(git_dir: &Path) -> Result<Option<String>, WorkspaceError> {
    let file = git_dir.join("commondir");
    if !file.is_file() {
        return Ok(None);
    }
    let text = read_small(&file)?;
    Ok(text
        .lines()
        .next()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string))
}
