//! Submodules of a handoff's repositories (spec-note 0436, "Submodules"): each checked-out
//! submodule gets its own container git directory, exactly as a linked worktree does, and its
//! folder and every folder between it and its superproject's working tree become mount points
//! (bound on themselves), so the agent can neither replace the submodule's `.git` nor rename
//! a folder to plant a git directory where the superproject's git on the host will enter.
//! A gitlink whose folder devcell cannot stand in for (not checked out, a `.git` that is a link
//! or names a git directory outside the superproject's `modules/`) is bound read-only. Every
//! gitlink gets a cover or the handoff is refused before the container is made ([`expand`]).

use std::path::{Path, PathBuf};

use super::ContainerGitError;
pub use super::repo_git::FolderBind;
use super::repo_git::{CONTAINER_BASE, RepoGit, slot_id};
use crate::config::hostgit;

/// The deepest submodule nesting devcell follows.
const MAX_DEPTH: usize = 4;
/// The most gitlinks devcell covers in one handoff (each is a few mounts).
const MAX_SUBMODULES: usize = 64;

/// Why devcell refuses a handoff rather than leave a submodule uncovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Uncoverable {
    /// More gitlinks than [`MAX_SUBMODULES`] in the handoff.
    #[error("it has more than {MAX_SUBMODULES} submodules (nested ones included)")]
    TooMany,
    /// Submodules nested deeper than [`MAX_DEPTH`].
    #[error("its submodules are nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
    /// The index could not be read (so its gitlinks are unknown).
    #[error("its index (the list of its submodules) cannot be read")]
    IndexUnreadable,
    /// The submodule's folder is missing, not a folder, or below a symbolic link.
    #[error("the submodule's folder is missing or below a symbolic link")]
    NoFolder,
}

impl Uncoverable {
    /// What the user can do.
    pub fn hint(self) -> &'static str {
        match self {
            Uncoverable::TooMany | Uncoverable::TooDeep => {
                "devcell covers each submodule so the agent cannot plant a repository there for the host's git; hand off a workspace with fewer or shallower submodules (e.g. a worktree without them checked out)"
            }
            Uncoverable::IndexUnreadable => {
                "run `git status` in the repository on the host and fix what it reports, then hand off again"
            }
            Uncoverable::NoFolder => {
                "create the submodule's folder (`git submodule update --init`, or `mkdir` it) or replace the symbolic link with a folder, then hand off again"
            }
        }
    }
}

/// What devcell does with one gitlink's folder.
#[derive(Debug, PartialEq, Eq)]
enum Stand {
    /// A container git directory stands in for the submodule's git directory (`git_dir`);
    /// `linked` when its `.git` is a file.
    In { git_dir: PathBuf, linked: bool },
    /// The folder is bound read-only.
    ReadOnly,
    /// The path is not a real folder below real folders: devcell cannot bind it, and the agent
    /// could make one there that the host's git enters, so the handoff is refused.
    NoFolder,
}

/// Adds to `gits` a [`RepoGit`] for every checked-out submodule of each of them (nested ones
/// too), to each superproject's [`RepoGit::folders`] the folders to bind on themselves and to
/// its [`RepoGit::submodules`] each gitlink covered. Fails closed: every gitlink gets a cover
/// or the handoff is refused.
///
/// Errors ([`ContainerGitError::UncoverableSubmodule`]): more than [`MAX_SUBMODULES`]
/// gitlinks, any deeper than [`MAX_DEPTH`], an index that cannot be read, a gitlink whose
/// folder is missing or below a symbolic link.
pub fn expand(gits: &mut Vec<RepoGit>, slots_root: &Path) -> Result<(), ContainerGitError> {
    let mut next = 0;
    let mut depths = vec![0usize; gits.len()];
    let mut count = 0;
    while next < gits.len() {
        let depth = depths[next];
        let refuse = |path: PathBuf, why| ContainerGitError::UncoverableSubmodule { path, why };
        let paths = gitlinks(&gits[next])
            .ok_or_else(|| refuse(gits[next].work_tree.clone(), Uncoverable::IndexUnreadable))?;
        if !paths.is_empty() && depth >= MAX_DEPTH {
            return Err(refuse(gits[next].work_tree.clone(), Uncoverable::TooDeep));
        }
        for path in paths {
            count += 1;
            if count > MAX_SUBMODULES {
                return Err(refuse(gits[next].work_tree.clone(), Uncoverable::TooMany));
            }
            let parent = &gits[next];
            let work_tree = parent.work_tree.join(&path);
            let target = format!("{}/{path}", parent.container_path.trim_end_matches('/'));
            let stand = judge(parent, &path);
            if stand == Stand::NoFolder {
                return Err(refuse(work_tree, Uncoverable::NoFolder));
            }
            let mut folders = ancestors(parent, &path);
            folders.push(FolderBind {
                source: work_tree.clone(),
                target: target.clone(),
                read_only: stand == Stand::ReadOnly,
            });
            let repo = format!("{}/{path}", parent.repo);
            let parent = &mut gits[next];
            for f in folders {
                if !parent.folders.contains(&f) {
                    parent.folders.push(f);
                }
            }
            parent.submodules.push(path);
            if let Stand::In { git_dir, linked } = stand {
                let id = slot_id(&work_tree);
                gits.push(RepoGit {
                    repo,
                    work_tree,
                    common_dir: git_dir.clone(),
                    git_dir,
                    container_path: target,
                    slot: slots_root.join(&id),
                    mount_base: format!("{}/{id}", CONTAINER_BASE),
                    linked,
                    folders: Vec::new(),
                    submodules: Vec::new(),
                    nested: true,
                });
                depths.push(depth + 1);
            }
        }
        next += 1;
    }
    Ok(())
}

/// The gitlink paths of `g`'s index ([`crate::security::git_cover::gitlinks`], shared with
/// a plain `up`); `None` when the index cannot be read.
fn gitlinks(g: &RepoGit) -> Option<Vec<String>> {
    crate::security::git_cover::gitlinks(&g.git_dir, &g.common_dir, &g.work_tree)
}

/// Every folder strictly between `parent`'s working tree and the gitlink `path`, bound
/// read-write on itself (so none can be renamed to plant a repository at `path`).
fn ancestors(parent: &RepoGit, path: &str) -> Vec<FolderBind> {
    let mut out = Vec::new();
    let mut rel = PathBuf::new();
    let components: Vec<_> = Path::new(path).components().collect();
    for c in &components[..components.len().saturating_sub(1)] {
        rel.push(c);
        out.push(FolderBind {
            source: parent.work_tree.join(&rel),
            target: format!(
                "{}/{}",
                parent.container_path.trim_end_matches('/'),
                rel.to_string_lossy()
            ),
            read_only: false,
        });
    }
    out
}

/// What devcell does with the gitlink `path` of `parent` (see [`Stand`]). Nothing is followed:
/// each folder on the way must be a real folder, the `.git` file is read without following a
/// link, and the git directory it names must lie inside `parent`'s own `modules/`.
fn judge(parent: &RepoGit, path: &str) -> Stand {
    let mut at = parent.work_tree.clone();
    for c in Path::new(path).components() {
        at.push(c);
        if !at
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink())
        {
            return Stand::NoFolder;
        }
    }
    let dot_git = at.join(".git");
    match dot_git.symlink_metadata() {
        Ok(m) if m.is_dir() && !m.file_type().is_symlink() => Stand::In {
            git_dir: dot_git,
            linked: false,
        },
        Ok(m) if m.is_file() => match linked_git_dir(parent, &at, &dot_git) {
            Some(git_dir) => Stand::In {
                git_dir,
                linked: true,
            },
            None => Stand::ReadOnly,
        },
        _ => Stand::ReadOnly,
    }
}

/// The git directory a submodule's `.git` file names, when it is a git directory inside the
/// superproject's `modules/` (its git directory's or its common directory's) without a
/// `commondir` of its own.
fn linked_git_dir(parent: &RepoGit, folder: &Path, dot_git: &Path) -> Option<PathBuf> {
    let text = hostgit::read_no_follow(dot_git, 4096).ok()?;
    let text = String::from_utf8(text).ok()?;
    let named = text
        .trim_end_matches(['\n', '\r'])
        .strip_prefix("gitdir: ")?;
    let dir = std::fs::canonicalize(folder.join(named)).ok()?;
    let inside = [&parent.git_dir, &parent.common_dir].iter().any(|d| {
        std::fs::canonicalize(d.join("modules")).is_ok_and(|modules| dir.starts_with(&modules))
    });
    let is_git_dir = dir.join("HEAD").is_file()
        && dir.join("objects").is_dir()
        && dir.join("commondir").symlink_metadata().is_err();
    (inside && is_git_dir).then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::git_cover::parse_gitlinks;

    #[test]
    fn only_gitlinks_with_plain_relative_paths() {
        let listed = "100644 aaaa 0\ta.txt\0\
                      160000 bbbb 0\tlibs/sub\0\
                      160000 cccc 0\t../out\0\
                      160000 dddd 0\tx/.git\0\
                      160000 eeee 0\t/abs\0\
                      160000 ffff 0\tvendor/lib\0";
        assert_eq!(parse_gitlinks(listed), vec!["libs/sub", "vendor/lib"]);
        assert!(parse_gitlinks("").is_empty());
    }

    #[test]
    fn every_folder_above_a_submodule_is_bound_on_itself() {
        // a container path with a trailing slash
        let parent = RepoGit {
            container_path: "/workspace/".into(),
            ..top(Path::new("/h/r"))
        };
        let got = ancestors(&parent, "a/b/sub");
        assert_eq!(
            got.iter()
                .map(|f| (f.source.to_str().unwrap(), f.target.as_str()))
                .collect::<Vec<_>>(),
            vec![("/h/r/a", "/workspace/a"), ("/h/r/a/b", "/workspace/a/b")]
        );
        assert!(got.iter().all(|f| !f.read_only));
        assert!(ancestors(&parent, "sub").is_empty());
    }

    #[test]
    fn a_git_file_naming_a_folder_outside_modules_is_not_stood_in_for() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r");
        let modules = root.join(".git/modules/sub");
        for d in ["objects", "refs"] {
            std::fs::create_dir_all(modules.join(d)).unwrap();
        }
        std::fs::write(modules.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("objects")).unwrap();
        std::fs::write(elsewhere.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        for (name, gitdir) in [
            ("sub", "../.git/modules/sub".to_string()),
            ("out", elsewhere.display().to_string()),
        ] {
            std::fs::create_dir_all(root.join(name)).unwrap();
            std::fs::write(root.join(name).join(".git"), format!("gitdir: {gitdir}\n")).unwrap();
        }
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("link")).unwrap();
        let parent = top(&root);
        assert_eq!(
            judge(&parent, "sub"),
            Stand::In {
                git_dir: std::fs::canonicalize(&modules).unwrap(),
                linked: true
            }
        );
        assert_eq!(judge(&parent, "out"), Stand::ReadOnly);
        assert_eq!(judge(&parent, "empty"), Stand::ReadOnly);
        assert_eq!(judge(&parent, "link"), Stand::NoFolder);
        assert_eq!(judge(&parent, "missing"), Stand::NoFolder);
    }

    use crate::config::hostgit::test_git as git;

    /// A repository at `dir` whose index holds gitlinks at `paths` (no folder made).
    fn repo_with_gitlinks(dir: &Path, paths: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        git(dir, &["init", "-q"]);
        for p in paths {
            let cacheinfo = format!("160000,{},{p}", "1".repeat(40));
            git(dir, &["update-index", "--add", "--cacheinfo", &cacheinfo]);
        }
    }

    fn top(work_tree: &Path) -> RepoGit {
        RepoGit::plain("r", work_tree, "/workspace", "/s/1", "/run/devcell/git/1")
    }

    fn refused(gits: Vec<RepoGit>) -> (PathBuf, Uncoverable) {
        let mut gits = gits;
        match expand(&mut gits, Path::new("/s")) {
            Err(ContainerGitError::UncoverableSubmodule { path, why }) => (path, why),
            other => panic!("not refused: {other:?}"),
        }
    }

    /// A gitlink whose folder is missing or below a symbolic link (the agent could make one
    /// there with a hostile `.git` the host's git enters) refuses the handoff, naming it; an
    /// empty folder (not checked out) is covered read-only and recorded.
    #[test]
    fn a_submodule_without_a_real_folder_refuses_the_handoff() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("r");
        repo_with_gitlinks(&root, &["libfoo"]);
        assert_eq!(
            refused(vec![top(&root)]),
            (root.join("libfoo"), Uncoverable::NoFolder)
        );

        let elsewhere = root.parent().unwrap().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("lib")).unwrap();
        repo_with_gitlinks(&root, &["vendor/lib"]);
        std::os::unix::fs::symlink(&elsewhere, root.join("vendor")).unwrap();
        std::fs::create_dir(root.join("libfoo")).unwrap();
        assert_eq!(
            refused(vec![top(&root)]),
            (root.join("vendor/lib"), Uncoverable::NoFolder)
        );

        std::fs::remove_file(root.join("vendor")).unwrap();
        std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
        let mut gits = vec![top(&root)];
        expand(&mut gits, Path::new("/s")).unwrap();
        assert_eq!(gits[0].submodules, vec!["libfoo", "vendor/lib"]);
        assert!(
            gits[0]
                .folders
                .iter()
                .any(|f| f.read_only && f.target == "/workspace/libfoo")
        );
    }

    /// Past the submodule count or depth, or with an index that cannot be read, the handoff
    /// is refused instead of leaving the rest without a cover.
    #[test]
    fn submodule_limits_and_an_unreadable_index_refuse_the_handoff() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();

        let many = base.join("many");
        let names: Vec<String> = (0..=MAX_SUBMODULES).map(|i| format!("m{i}")).collect();
        repo_with_gitlinks(&many, &names.iter().map(String::as_str).collect::<Vec<_>>());
        for n in &names {
            std::fs::create_dir(many.join(n)).unwrap();
        }
        assert_eq!(
            refused(vec![top(&many)]),
            (many.clone(), Uncoverable::TooMany)
        );

        // each level a checked-out submodule (`.git` a folder) holding the next
        let deep = base.join("deep");
        let mut at = deep.clone();
        for _ in 0..=MAX_DEPTH {
            repo_with_gitlinks(&at, &["s"]);
            at = at.join("s");
        }
        std::fs::create_dir_all(&at).unwrap();
        let (path, why) = refused(vec![top(&deep)]);
        assert_eq!(why, Uncoverable::TooDeep, "{path:?}");

        let broken = base.join("broken");
        repo_with_gitlinks(&broken, &["s"]);
        std::fs::write(broken.join(".git/index"), "not an index").unwrap();
        assert_eq!(
            refused(vec![top(&broken)]),
            (broken.clone(), Uncoverable::IndexUnreadable)
        );
    }
}
