//! The user's repository a clone task is made from, read with devcell's safe host git, and the
//! sources devcell refuses to clone (before anything is created): shallow, partial, with
//! submodules, with LFS-tracked files.

use std::path::{Path, PathBuf};

use super::{Result, TaskError, git};

/// A source repository, judged cloneable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Its working tree (canonical).
    pub work_tree: PathBuf,
    /// Its common git directory (canonical): what the mirror fetches from, where the fetched
    /// refs go.
    pub common_dir: PathBuf,
    /// The working tree's own git directory (canonical; the common directory for the main
    /// working tree, `<common>/worktrees/<name>` for a linked one): where its `HEAD` is.
    pub git_dir: PathBuf,
    /// The working tree's folder name.
    pub name: String,
    /// `sha1` or `sha256`.
    pub object_format: String,
    /// What the base was named (`HEAD` by default).
    pub base_ref: String,
    /// The base commit.
    pub base: String,
}

fn refused(source: &Path, reason: &'static str, message: String, hint: &str) -> TaskError {
    TaskError::Refused {
        reason,
        source_repo: source.to_path_buf(),
        message,
        hint: hint.to_string(),
    }
}

/// Reads the repository at `folder` (its root: a single repository) and resolves `base_ref`
/// (`HEAD` when `None`) to a commit; refuses a source devcell cannot clone faithfully.
///
/// Errors: [`TaskError::Refused`] with reason `clone_not_a_repository`, `clone_bad_base`,
/// `clone_shallow_source`, `clone_partial_source`, `clone_submodules` or `clone_lfs`.
pub fn inspect(folder: &Path, base_ref: Option<&str>) -> Result<Source> {
    let root = std::fs::canonicalize(folder).map_err(super::io(folder))?;
    let not_repo = |message: String| {
        refused(
            &root,
            "clone_not_a_repository",
            message,
            "`--isolation clone` takes the root folder of one git repository as `--workspace-folder`",
        )
    };
    let listed = git(
        &root,
        None,
        &[],
        &[
            "rev-parse",
            "--show-toplevel",
            "--absolute-git-dir",
            "--git-common-dir",
            "--is-shallow-repository",
            "--show-object-format",
        ],
    )
    .map_err(|e| not_repo(format!("it is not a git repository git can read ({e})")))?;
    let lines: Vec<&str> = listed.lines().collect();
    let [top, git_dir, common, shallow, format] = lines[..] else {
        return Err(not_repo("git did not describe it".into()));
    };
    if Path::new(top) != root {
        return Err(not_repo(format!(
            "it is not the root of a repository (the repository is `{top}`)"
        )));
    }
    // relative to the folder git ran in
    let common = root.join(common);
    let common_dir = std::fs::canonicalize(&common).map_err(super::io(&common))?;
    // `HEAD` is the working tree's own: a linked worktree's is in its own git directory, not
    // the common directory's (which is the main working tree's)
    let git_dir = std::fs::canonicalize(git_dir).map_err(super::io(Path::new(git_dir)))?;
    if shallow == "true" {
        return Err(refused(
            &root,
            "clone_shallow_source",
            "it is a shallow clone: its history is incomplete, and a clone of it would be too"
                .into(),
            "fetch its whole history first (`git fetch --unshallow`), or use `--isolation worktree`",
        ));
    }
    if is_partial(&root, &common_dir) {
        return Err(refused(
            &root,
            "clone_partial_source",
            "it is a partial clone (objects left on a promisor remote): devcell fetches nothing from the network, so a clone of it would miss objects".into(),
            "fetch the missing objects first (`git fetch --refetch` without a filter), or use `--isolation worktree`",
        ));
    }
    let base_ref = base_ref.unwrap_or("HEAD").to_string();
    if base_ref.starts_with('-') || base_ref.is_empty() {
        return Err(refused(
            &root,
            "clone_bad_base",
            format!("`--base {base_ref}` is not a revision"),
            "name a branch, tag or commit of the repository",
        ));
    }
    let spec = format!("{base_ref}^{{commit}}");
    let base = git(
        &root,
        Some(&git_dir),
        &[],
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| crate::handoff::container_git::is_oid(s))
    .ok_or_else(|| {
        refused(
            &root,
            "clone_bad_base",
            format!("`{base_ref}` names no commit of the repository"),
            "commit first, or name a branch, tag or commit with `--base`",
        )
    })?;
    judge_tree(&root, &common_dir, &base)?;
    Ok(Source {
        name: root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "repository".into()),
        work_tree: root,
        common_dir,
        git_dir,
        object_format: format.to_string(),
        base_ref,
        base,
    })
}

/// Whether the repository is a partial clone: `extensions.partialClone`, a `remote.*.promisor`
/// set, or a promisor pack.
fn is_partial(root: &Path, common_dir: &Path) -> bool {
    let config = git(
        root,
        Some(common_dir),
        &[],
        &[
            "config",
            "--get-regexp",
            r"^(extensions\.partialclone|remote\..*\.promisor)$",
        ],
    )
    .unwrap_or_default();
    let promisor_config = config.lines().any(|l| {
        let value = l.split_once(' ').map_or("", |(_, v)| v).trim();
        l.to_ascii_lowercase()
            .starts_with("extensions.partialclone")
            || value == "true"
    });
    let promisor_pack = std::fs::read_dir(common_dir.join("objects/pack"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".promisor"));
    promisor_config || promisor_pack
}

/// Refuses a base whose tree has submodules (gitlinks or `.gitmodules`) or LFS-tracked files
/// (a `.gitattributes` naming `filter=lfs`).
fn judge_tree(root: &Path, common_dir: &Path, base: &str) -> Result<()> {
    let listed = git(
        root,
        Some(common_dir),
        &[],
        &["ls-tree", "-r", "-z", "--full-tree", base],
    )?;
    let mut attributes = Vec::new();
    for entry in listed.split('\0').filter(|e| !e.is_empty()) {
        let Some((meta, path)) = entry.split_once('\t') else {
            continue;
        };
        if meta.starts_with("160000 ") || path == ".gitmodules" {
            return Err(refused(
                root,
                "clone_submodules",
                format!(
                    "its commit {} has submodules (`{path}`): a clone task does not clone nested repositories",
                    &base[..12]
                ),
                "use `--isolation worktree` for a repository with submodules",
            ));
        }
        if (path == ".gitattributes" || path.ends_with("/.gitattributes"))
            && let Some(oid) = meta.split(' ').nth(2)
        {
            attributes.push((path.to_string(), oid.to_string()));
        }
    }
    for (path, oid) in attributes {
        let text = git(root, Some(common_dir), &[], &["cat-file", "blob", &oid])?;
        if text.contains("filter=lfs") {
            return Err(refused(
                root,
                "clone_lfs",
                format!(
                    "`{path}` tracks files with Git LFS: a clone task would hold only their pointer files, and devcell fetches no LFS objects"
                ),
                "use `--isolation worktree` for a repository with LFS-tracked files",
            ));
        }
    }
    Ok(())
}

/// The repositories of a multi-repository workspace root `root` (canonical) as spec-note 0160
/// scans them: its immediate, non-hidden, non-link child folders with a `.git`, by name.
/// Empty when `root` is itself a repository (has a `.git`) or has none.
pub fn workspace_repositories(root: &Path) -> Vec<(String, PathBuf)> {
    if root.join(".git").symlink_metadata().is_ok() {
        return Vec::new();
    }
    let mut out: Vec<(String, PathBuf)> = super::subfolders(root)
        .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.path())))
        .filter(|(name, path)| {
            !name.starts_with('.') && path.join(".git").symlink_metadata().is_ok()
        })
        .collect();
    out.sort();
    out
}

/// The sources of a clone task of `folder`: the one repository it is the root of, or each
/// repository of a multi-repository workspace ([`workspace_repositories`]), every one judged
/// ([`inspect`], `base_ref` resolved in each) before anything is created. The second value is
/// the workspace root for a multi-repository workspace.
///
/// Errors: [`inspect`]'s for any repository; `clone_root_configuration` when a
/// multi-repository root has its own Dev Container configuration (it is in no repository, so
/// no clone would hold it).
pub fn inspect_all(
    folder: &Path,
    base_ref: Option<&str>,
) -> Result<(Vec<Source>, Option<PathBuf>)> {
    let root = std::fs::canonicalize(folder).map_err(super::io(folder))?;
    let repos = workspace_repositories(&root);
    if repos.is_empty() {
        return Ok((vec![inspect(&root, base_ref)?], None));
    }
    if root.join(".devcontainer").exists() || root.join(".devcontainer.json").exists() {
        return Err(refused(
            &root,
            "clone_root_configuration",
            "the workspace root has its own Dev Container configuration, which is in none of its repositories: no clone would hold it".into(),
            "move the configuration into the primary repository, or use `--isolation worktree`",
        ));
    }
    let sources = repos
        .iter()
        .map(|(_, path)| inspect(path, base_ref))
        .collect::<Result<Vec<_>>>()?;
    Ok((sources, Some(root)))
}

/// The canonical working tree and the [`super::source_key`] of the repository at `folder`
/// (for a multi-repository workspace root, the root and its [`super::workspace_key`]),
/// without judging it (for `fetch`, `delete --task`, `status`).
///
/// Errors: [`TaskError::Refused`] (`clone_not_a_repository`) when git cannot read it.
pub fn locate(folder: &Path) -> Result<(PathBuf, String)> {
    let root = std::fs::canonicalize(folder).map_err(super::io(folder))?;
    if !workspace_repositories(&root).is_empty() {
        let key = super::workspace_key(&root);
        return Ok((root, key));
    }
    let listed = super::git_quick(
        &root,
        None,
        &["rev-parse", "--absolute-git-dir", "--git-common-dir"],
    )
    .map_err(|e| {
        refused(
            &root,
            "clone_not_a_repository",
            format!("it is not a git repository git can read ({e})"),
            "give the repository the task was made from as `--workspace-folder`",
        )
    })?;
    let mut lines = listed.lines();
    let _git_dir = lines.next().unwrap_or_default();
    let common = lines.next().unwrap_or_default();
    let common = root.join(common);
    let common = std::fs::canonicalize(&common).map_err(super::io(&common))?;
    Ok((root, super::source_key(&common)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::task::{TaskRecord, fetch};

    use crate::handoff::task::test_git::{commit, plain_git, record_for};

    /// `--base REF` (issue 27, item 3): a branch, a tag or a commit of the repository is the
    /// task's base; a name of no commit, a blob and an option-like value are refused with
    /// `clone_bad_base` (nothing is created: `inspect` only reads).
    #[test]
    fn base_names_a_branch_tag_or_commit_and_anything_else_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(tmp.path()).unwrap();
        plain_git(&repo, &["init", "-q", "-b", "main"]);
        let first = commit(&repo, "a");
        plain_git(&repo, &["tag", "v1"]);
        plain_git(&repo, &["branch", "old"]);
        let head = commit(&repo, "b");
        assert_eq!(inspect(&repo, None).unwrap().base, head, "HEAD by default");
        for named in ["old", "v1", first.as_str(), &first[..12], "main~1"] {
            let src = inspect(&repo, Some(named)).unwrap();
            assert_eq!(src.base, first, "{named}");
            assert_eq!(src.base_ref, named);
        }
        let blob = plain_git(&repo, &["rev-parse", "HEAD:b"]);
        for bad in ["nope", "-c", "", blob.as_str(), "--output=/tmp/x"] {
            match inspect(&repo, Some(bad)) {
                Err(TaskError::Refused { reason, .. }) => {
                    assert_eq!(reason, "clone_bad_base", "{bad}");
                }
                other => panic!("`{bad}` was not refused: {other:?}"),
            }
        }
    }

    /// A task started from a linked worktree is based on that worktree's `HEAD` (its own git
    /// directory's), not on the main working tree's (the common directory's), and `behind`
    /// counts against the same `HEAD`.
    #[test]
    fn a_task_from_a_linked_worktree_is_based_on_that_worktrees_head() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let main = base.join("main");
        std::fs::create_dir(&main).unwrap();
        plain_git(&main, &["init", "-q"]);
        let first = commit(&main, "a");
        plain_git(&main, &["worktree", "add", "-q", "-b", "feature", "../wt"]);
        let wt = base.join("wt");
        let on_feature = commit(&wt, "b");
        let on_main = commit(&main, "c");
        assert_ne!(first, on_main);

        let src = inspect(&wt, None).unwrap();
        assert_eq!(src.base, on_feature, "the worktree's own HEAD");
        assert_eq!(src.work_tree, wt);
        assert_eq!(src.common_dir, main.join(".git"));
        assert_eq!(src.git_dir, main.join(".git/worktrees/wt"));
        let from_main = inspect(&main, None).unwrap();
        assert_eq!(from_main.base, on_main);

        let record = TaskRecord {
            source_git_dir: src.common_dir.clone(),
            source_head_git_dir: Some(src.git_dir.clone()),
            repo: "wt".into(),
            ..record_for(&src.work_tree, &base.join("task/wt"), &src.base)
        };
        let report = fetch::report(&record, Some(src.base.clone()), false);
        assert_eq!(report.ahead, Some(0));
        assert_eq!(report.behind, Some(0), "the worktree has not moved");
        commit(&wt, "d");
        let report = fetch::report(&record, Some(src.base.clone()), false);
        assert_eq!(
            report.behind,
            Some(1),
            "one commit on the worktree's branch"
        );
    }
}
