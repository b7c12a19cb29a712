//! The warnings of a workspace inspection that are not errors: a repository git could not
//! read, a git directory outside devcell's trust, a git mount that hides part of the workspace,
//! objects borrowed from outside.

use std::path::Path;

use super::{GitMount, Repo, UntrustedGitDir, WorkspaceWarning};

/// A warning for each repository git could not describe.
pub(super) fn unreadable_warnings(repos: &[Repo]) -> Vec<WorkspaceWarning> {
    repos
        .iter()
        .filter_map(|repo| {
            let error = repo.git_error.as_ref()?;
            Some(WorkspaceWarning {
                code: "git_unreadable".into(),
                message: format!(
                    "repository `{}`: {error}; its branch, commit and changes are unknown",
                    repo.name
                ),
            })
        })
        .collect()
}

/// The warning for a git directory a repository's link names outside devcell's trust: trusted
/// by a grant, or neither read nor mounted (spec-note 0411).
pub(super) fn untrusted_warning(w: &UntrustedGitDir) -> WorkspaceWarning {
    WorkspaceWarning {
        code: "git_dir_untrusted".into(),
        message: if w.granted {
            format!(
                "repository `{}`: `{}` names the git directory `{}`, {}; trusted because you granted it",
                w.repo,
                w.link.display(),
                w.path.display(),
                w.reason
            )
        } else {
            format!(
                "repository `{}`: `{}` names the git directory `{}`, {}: devcell neither runs git there nor mounts it (grant with `--allow gitdir:{}` if it is yours)",
                w.repo,
                w.link.display(),
                w.path.display(),
                w.reason,
                w.path.display()
            )
        },
    }
}

/// A warning for each git mount at or below the workspace's container folder: it hides what
/// the workspace has there.
pub(super) fn shadowing_warnings(
    git_mounts: &[GitMount],
    container_root: &str,
    warnings: &mut Vec<WorkspaceWarning>,
) {
    let inside = format!("{}/", container_root.trim_end_matches('/'));
    for m in git_mounts {
        if m.container_path == container_root || m.container_path.starts_with(&inside) {
            warnings.push(WorkspaceWarning {
                code: "mount_shadows_workspace".into(),
                message: format!(
                    "the git directory `{}` must appear at `{}`, inside the workspace mount: it hides what the workspace has there",
                    m.host_path.display(),
                    m.container_path
                ),
            });
        }
    }
}

pub(super) fn alternates_warnings(repo: &Repo, root: &Path, warnings: &mut Vec<WorkspaceWarning>) {
    let objects = repo.common_dir.join("objects");
    let Ok(text) =
        crate::config::bounded::read_to_string(&objects.join("info").join("alternates"), 1 << 20)
    else {
        return;
    };
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let path = objects.join(line);
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        if !path.starts_with(root) && !path.starts_with(&repo.common_dir) {
            warnings.push(WorkspaceWarning {
                code: "alternates_outside".into(),
                message: format!(
                    "repository `{}` borrows objects from `{}` (objects/info/alternates), which is not mounted: git may fail in the container",
                    repo.name,
                    path.display()
                ),
            });
        }
    }
}
