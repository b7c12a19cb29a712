//! The host git directories a workspace's repositories need mounted in the container, and the
//! read-only overlays that protect their `config`, `hooks` and links (spec-notes 0160, 0165,
//! 0413).

use std::path::{Path, PathBuf};

use super::git_links::{read_commondir_raw, read_gitdir_link};
use super::host_git::{GitPin, git};
use super::warnings::{alternates_warnings, shadowing_warnings};
use super::{
    GitMount, InspectOptions, Repo, RepoKind, UntrustedGitDir, WorkspaceError, WorkspaceWarning,
    normalize_posix,
};

/// The git directories to mount (nested ones pruned) and, with `protect_git_config`, the
/// read-only overlays of their common `config` files, for every repository whose git
/// directories are trusted or granted (an untrusted one is neither read nor mounted,
/// spec-note 0411); alternates and shadowing warnings are added to `warnings`.
///
/// Errors: as [`mounts_for`].
pub(super) fn git_mounts_of(
    repos: &[Repo],
    root: &Path,
    container_root: &str,
    options: &InspectOptions,
    untrusted_git_dirs: &[UntrustedGitDir],
    warnings: &mut Vec<WorkspaceWarning>,
) -> Result<(Vec<GitMount>, Vec<GitMount>), WorkspaceError> {
    let mut git_mounts = Vec::new();
    let mut protected: Vec<GitMount> = Vec::new();
    for repo in repos {
        if untrusted_git_dirs
            .iter()
            .any(|w| w.repo == repo.name && !w.granted)
        {
            // neither read nor mounted (spec-note 0411)
            continue;
        }
        let (mounts, container_git, container_common) = mounts_for(repo, root, container_root)?;
        for (host, container_path) in mounts {
            add_mount(&mut git_mounts, &host, container_path, &repo.name);
        }
        if options.protect_git_config {
            for p in protect_common_dir(repo, &container_git, &container_common, warnings) {
                if let Some(existing) = protected
                    .iter_mut()
                    .find(|e| e.host_path == p.host_path && e.container_path == p.container_path)
                {
                    existing.repos.extend(p.repos);
                } else {
                    protected.push(p);
                }
            }
        }
        alternates_warnings(repo, root, warnings);
    }
    prune_nested(&mut git_mounts);
    protected
        .sort_by(|a, b| (&a.host_path, &a.container_path).cmp(&(&b.host_path, &b.container_path)));
    shadowing_warnings(&git_mounts, container_root, warnings);
    Ok((git_mounts, protected))
}

/// The read-only overlays protecting a repository's common git directory: its `config` file and
/// `hooks` folder, which the host's git executes from, its `info/` folder (attributes, excludes)
/// and an existing `config.worktree`, and the same in each submodule git directory under
/// `modules/`; for a linked worktree, its own git directory's `commondir` and `gitdir` links
/// and `config.worktree` (spec-note 0413). Warns when something cannot be protected (no
/// `hooks` folder to cover, `core.hooksPath` pointing elsewhere, per-worktree configuration
/// enabled).
fn protect_common_dir(
    repo: &Repo,
    container_git: &str,
    container_common: &str,
    warnings: &mut Vec<WorkspaceWarning>,
) -> Vec<GitMount> {
    let mut out = Vec::new();
    if repo.git_dir != repo.common_dir {
        // the links that make this a worktree of that repository, and its own configuration
        let container_git = container_git.trim_end_matches('/');
        for name in ["commondir", "gitdir", "config.worktree"] {
            let host = repo.git_dir.join(name);
            if host
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_file())
            {
                out.push(GitMount {
                    host_path: host,
                    container_path: format!("{container_git}/{name}"),
                    repos: vec![repo.name.clone()],
                });
            }
        }
    }
    let mut git_dirs = vec![(repo.common_dir.clone(), container_common.to_string())];
    submodule_git_dirs(
        &repo.common_dir.join("modules"),
        &format!("{}/modules", container_common.trim_end_matches('/')),
        0,
        &mut git_dirs,
    );
    for (host_dir, container_dir) in &git_dirs {
        let container_dir = container_dir.trim_end_matches('/');
        let config = host_dir.join("config");
        let mut files = vec![("config", false), ("hooks", true)];
        if config_value(repo, &config, "extensions.worktreeConfig").is_some_and(|v| v == "true") {
            warnings.push(WorkspaceWarning {
                code: "git_worktree_config".into(),
                message: format!(
                    "`{}` enables per-worktree configuration (`extensions.worktreeConfig`): the `config.worktree` files of other worktrees are not protected",
                    config.display()
                ),
            });
        }
        for (name, want_dir) in [("info", true), ("config.worktree", false)] {
            // protected where they exist; git runs nothing from them without configuration
            if host_dir
                .join(name)
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir() == want_dir && !m.file_type().is_symlink())
            {
                files.push((name, want_dir));
            }
        }
        for (name, want_dir) in files {
            let host = host_dir.join(name);
            match host.symlink_metadata() {
                Ok(m) if m.is_dir() == want_dir && !m.file_type().is_symlink() => {
                    out.push(GitMount {
                        host_path: host,
                        container_path: format!("{container_dir}/{name}"),
                        repos: vec![repo.name.clone()],
                    })
                }
                _ if want_dir => warnings.push(WorkspaceWarning {
                    code: "git_hooks_unprotected".into(),
                    message: format!(
                        "repository `{}` has no `{}` folder to mount read-only: the agent could create hooks there that git on the host would run",
                        repo.name,
                        host.display()
                    ),
                }),
                _ => warnings.push(WorkspaceWarning {
                    code: "git_config_unprotected".into(),
                    message: format!(
                        "repository `{}`: `{}` is not a regular file and cannot be mounted read-only",
                        repo.name,
                        host.display()
                    ),
                }),
            }
        }
        if let Some(hooks_path) = config_value(repo, &config, "core.hooksPath") {
            warnings.push(WorkspaceWarning {
                code: "git_hooks_path".into(),
                message: format!(
                    "repository `{}` sets `core.hooksPath = {hooks_path}` in `{}`: hooks there are not protected; if it points into the workspace, the agent can change what git on the host runs",
                    repo.name,
                    config.display()
                ),
            });
        }
    }
    out
}

/// A value from one git config file, `None` when unset or unreadable.
fn config_value(repo: &Repo, file: &Path, key: &str) -> Option<String> {
    if !file.is_file() {
        return None;
    }
    let pin = GitPin {
        work_tree: &repo.host_path,
        common_dir: &repo.common_dir,
    };
    let value = git(
        &pin,
        &["config", "--file", &file.to_string_lossy(), "--get", key],
        &[],
    )
    .ok()?;
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_string())
}

/// Submodule git directories under `modules/` (any depth up to 4; a git directory has `HEAD`
/// and `config`), with their container paths.
fn submodule_git_dirs(dir: &Path, container: &str, depth: usize, out: &mut Vec<(PathBuf, String)>) {
    if depth > 4 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if !file_type.is_dir() {
            continue;
        }
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = format!("{container}/{name}");
        if path.join("HEAD").is_file() && path.join("config").is_file() {
            out.push((path.clone(), child.clone()));
            submodule_git_dirs(
                &path.join("modules"),
                &format!("{child}/modules"),
                depth + 1,
                out,
            );
        } else {
            // nested submodule paths (`modules/a/b`) without a git dir at this level
            submodule_git_dirs(&path, &child, depth + 1, out);
        }
    }
}

/// The git directories `repo` needs mounted, with their container paths.
///
/// Git inside the container follows the worktree's `.git` link and its `commondir` from the
/// container's point of view: an absolute link names a host path, a relative one resolves from
/// the repository's container path. A directory needs a mount unless that container path already
/// shows it through the workspace mount (`root` at `container_root`). A plain repository whose
/// `.git` folder is inside the root needs nothing; a worktree of it, linked by absolute path,
/// needs its git directory at that host path even though it is inside the root. The common
/// directory (which usually contains the worktree's own git directory under `worktrees/<name>`)
/// is preferred; the git directory is added on its own only when the common one does not cover
/// it.
#[allow(clippy::type_complexity)]
fn mounts_for(
    repo: &Repo,
    root: &Path,
    container_root: &str,
) -> Result<(Vec<(PathBuf, String)>, String, String), WorkspaceError> {
    let mut out = Vec::new();
    let dot_git = repo.host_path.join(".git");
    let link = match repo.kind {
        RepoKind::Worktree => Some(read_gitdir_link(&dot_git)?),
        RepoKind::Repository => std::fs::read_link(&dot_git).ok().map(|t| {
            let relative = t.is_relative();
            (t, relative)
        }),
    };
    let container_git_dir = match link {
        None => format!("{}/.git", repo.container_path.trim_end_matches('/')),
        Some((target, relative)) => {
            if relative {
                normalize_posix(&format!(
                    "{}/{}",
                    repo.container_path,
                    target.to_string_lossy()
                ))
            } else {
                // as written: git in the container follows the text, not the canonical path
                normalize_posix(&target.to_string_lossy())
            }
        }
    };
    let container_common = match read_commondir_raw(&repo.git_dir)? {
        None => container_git_dir.clone(),
        Some(c) if Path::new(&c).is_absolute() => normalize_posix(&c),
        Some(c) => normalize_posix(&format!("{container_git_dir}/{c}")),
    };
    let need_git = !shown_by_workspace(&container_git_dir, &repo.git_dir, root, container_root);
    let need_common =
        !shown_by_workspace(&container_common, &repo.common_dir, root, container_root);
    if need_common {
        out.push((repo.common_dir.clone(), container_common.clone()));
    }
    if need_git {
        let covered = need_common
            && repo
                .git_dir
                .strip_prefix(&repo.common_dir)
                .is_ok_and(|suffix| {
                    normalize_posix(&format!("{container_common}/{}", suffix.to_string_lossy()))
                        == container_git_dir
                });
        if !covered {
            out.push((repo.git_dir.clone(), container_git_dir.clone()));
        }
    }
    Ok((out, container_git_dir, container_common))
}

/// Whether the container path `container` shows host directory `host` through the workspace
/// mount (`root` mounted at `container_root`).
fn shown_by_workspace(container: &str, host: &Path, root: &Path, container_root: &str) -> bool {
    let base = container_root.trim_end_matches('/');
    let suffix = if container == base {
        ""
    } else if let Some(rest) = container.strip_prefix(&format!("{base}/")) {
        rest
    } else if base.is_empty() {
        container.trim_start_matches('/')
    } else {
        return false;
    };
    let candidate = if suffix.is_empty() {
        root.to_path_buf()
    } else {
        root.join(suffix)
    };
    std::fs::canonicalize(candidate).is_ok_and(|c| c == host)
}

fn add_mount(mounts: &mut Vec<GitMount>, host: &Path, container_path: String, repo: &str) {
    if let Some(m) = mounts
        .iter_mut()
        .find(|m| m.host_path == host && m.container_path == container_path)
    {
        if !m.repos.iter().any(|r| r == repo) {
            m.repos.push(repo.to_string());
        }
        return;
    }
    mounts.push(GitMount {
        host_path: host.to_path_buf(),
        container_path,
        repos: vec![repo.to_string()],
    });
}

/// Drops same-path mounts nested in another same-path mount (merging their repos) and sorts.
pub(super) fn prune_nested(mounts: &mut Vec<GitMount>) {
    mounts.sort_by(|a, b| a.host_path.cmp(&b.host_path));
    let mut kept: Vec<GitMount> = Vec::new();
    for m in mounts.drain(..) {
        let same_path = path_string(&m.host_path) == m.container_path;
        let parent = kept.iter_mut().find(|k| {
            same_path
                && path_string(&k.host_path) == k.container_path
                && m.host_path.starts_with(&k.host_path)
        });
        match parent {
            Some(k) => {
                for r in m.repos {
                    if !k.repos.contains(&r) {
                        k.repos.push(r);
                    }
                }
            }
            None => kept.push(m),
        }
    }
    *mounts = kept;
}

fn path_string(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
