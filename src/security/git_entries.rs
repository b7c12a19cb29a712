//! Where a folder holds git directories, at any depth: `.git` entries (a repository's git
//! directory, a linked worktree's or a submodule's `.git` file) and folders under any other
//! name that git takes as a git directory themselves (a bare repository `upstream.git`, or a
//! folder the agent laid out so: git's discovery tries each folder from the user's working
//! folder up as a git directory before it reaches the workspace's `.git`; attack L2, L3). A
//! bounded walk that follows no symbolic link and does not descend into a `.git` folder. What
//! the host's git reads there (`config`, hooks, the file's `gitdir:`) runs on the host for the
//! user, so a container that can write one is a way out (issue 25, class 1; attack findings
//! J3, K3).

use std::path::{Path, PathBuf};

/// The most directory entries [`find`] visits (a huge `node_modules` ends the walk, not the
/// command).
pub const MAX_ENTRIES: usize = 1_000_000;
/// How deep [`find`] goes below its root.
pub const MAX_DEPTH: usize = 32;

/// What kind of git entry the walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// An entry named `.git` (a folder, a file, a link, anything).
    DotGit,
    /// A folder under another name that is itself a git directory by git's rule
    /// ([`is_git_directory`]): a bare repository, or a folder laid out as one; `.` for the
    /// root itself.
    GitDir,
}

/// One git entry below the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path relative to the root (`.git`, `vendor/lib/.git`, `upstream.git`; `.` for the
    /// root itself).
    pub rel: String,
    /// Its path.
    pub path: PathBuf,
    /// What it is.
    pub kind: EntryKind,
}

/// The git entries below a folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitEntries {
    /// Each entry.
    pub entries: Vec<Entry>,
    /// Whether the walk stopped at [`MAX_ENTRIES`] or [`MAX_DEPTH`] (then an entry beyond it
    /// is not known, and the caller must not assume there is none).
    pub truncated: bool,
    /// Folders below the root the walk could not list (relative, sorted): what they hold is
    /// not known either.
    pub unlisted: Vec<String>,
}

/// Whether git could take the folder `dir` as a git directory itself, wider than git where in
/// doubt (git's `is_git_directory`, setup.c: a `HEAD` holding a ref, plus `objects/` and
/// `refs/`, or a `commondir` file naming where those are): an entry named `HEAD` of any kind
/// (its content is not checked), and entries named `objects` and `refs`, or one named
/// `commondir`, of any kind. Follows no link at `dir`'s own entries.
pub fn is_git_directory(dir: &Path) -> bool {
    let has = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    has("HEAD") && ((has("objects") && has("refs")) || has("commondir"))
}

/// The git entries below `root`, in no particular order: every `.git` (the root's own
/// included, as `.git`) and every folder that is itself a git directory ([`is_git_directory`];
/// the root as `.`). The walk does not go into a `.git` folder, but does go into a git
/// directory under another name (a user's working folder can be below one, and git's discovery
/// from there would reach it). An unreadable folder is named in `unlisted`.
pub fn find(root: &Path) -> GitEntries {
    let mut out = GitEntries::default();
    if is_git_directory(root) {
        out.entries.push(Entry {
            rel: ".".into(),
            path: root.to_path_buf(),
            kind: EntryKind::GitDir,
        });
    }
    let mut budget = MAX_ENTRIES;
    let mut stack = vec![(root.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if !rel.is_empty() {
                out.unlisted.push(rel);
            }
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                out.truncated = true;
                return out;
            }
            budget -= 1;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name == ".git" {
                out.entries.push(Entry {
                    rel: child_rel,
                    path: entry.path(),
                    kind: EntryKind::DotGit,
                });
            } else if kind.is_dir() {
                if is_git_directory(&entry.path()) {
                    out.entries.push(Entry {
                        rel: child_rel.clone(),
                        path: entry.path(),
                        kind: EntryKind::GitDir,
                    });
                }
                if depth < MAX_DEPTH {
                    stack.push((entry.path(), child_rel, depth + 1));
                } else {
                    out.truncated = true;
                }
            }
        }
    }
    out.unlisted.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.git` is found, a folder or a file, at any depth below the root; the walk does
    /// not go into a `.git` folder nor through a link; past its depth it says it stopped.
    #[test]
    fn git_entries_are_found_at_any_depth_and_a_cut_walk_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for dir in [".git/modules/m", "projects/a/.git", "vendor/lib/.git"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::create_dir_all(root.join(".wt/feat")).unwrap();
        std::fs::write(
            root.join(".wt/feat/.git"),
            "gitdir: ../../.git/worktrees/feat\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(root.join("projects"), root.join("link")).unwrap();
        let found = find(root);
        let mut rels: Vec<&str> = found.entries.iter().map(|e| e.rel.as_str()).collect();
        rels.sort();
        assert_eq!(
            rels,
            [
                ".git",
                ".wt/feat/.git",
                "projects/a/.git",
                "vendor/lib/.git"
            ]
        );
        assert!(!found.truncated);
        let mut deep = root.join("deep");
        for _ in 0..=MAX_DEPTH {
            deep = deep.join("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        assert!(find(root).truncated);
    }

    /// Attack L2/L3: a folder under any name that git takes as a git directory (a bare
    /// repository, a folder the agent laid out with `HEAD`, `objects/`, `refs/`, or `HEAD` and
    /// `commondir`) is a git entry, of its own kind; the walk goes on below it (a working
    /// folder can be there); a folder with only some of those is none.
    #[test]
    fn a_bare_repository_shaped_folder_is_a_git_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for dir in [
            "upstream.git/objects",
            "upstream.git/refs/heads",
            "docs/objects",
            "docs/refs",
            "docs/deeper/inner/objects",
            "docs/deeper/inner/refs",
            "half/objects",
            "linked",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in [
            "upstream.git/HEAD",
            "docs/HEAD",
            "docs/deeper/inner/HEAD",
            "half/HEAD",
            "linked/HEAD",
            "linked/commondir",
        ] {
            std::fs::write(root.join(file), "ref: refs/heads/main\n").unwrap();
        }
        // `refs` a file, `HEAD` a link: git would still look; so does the walk
        std::fs::create_dir_all(root.join("odd/objects")).unwrap();
        std::fs::write(root.join("odd/refs"), "").unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("odd/HEAD")).unwrap();
        let found = find(root);
        let mut got: Vec<(&str, EntryKind)> = found
            .entries
            .iter()
            .map(|e| (e.rel.as_str(), e.kind))
            .collect();
        got.sort_by_key(|(r, _)| *r);
        assert_eq!(
            got,
            [
                ("docs", EntryKind::GitDir),
                ("docs/deeper/inner", EntryKind::GitDir),
                ("linked", EntryKind::GitDir),
                ("odd", EntryKind::GitDir),
                ("upstream.git", EntryKind::GitDir),
            ]
        );
        // the root itself, laid out so, is `.`
        std::fs::write(root.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(root.join("objects")).unwrap();
        std::fs::create_dir_all(root.join("refs")).unwrap();
        assert!(
            find(root)
                .entries
                .iter()
                .any(|e| e.rel == "." && e.path == root)
        );
    }
}
