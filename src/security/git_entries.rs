//! Where a folder holds `.git` entries (a repository's git directory, a linked worktree's or a
//! submodule's `.git` file), at any depth: a bounded walk that follows no symbolic link and
//! does not descend into a `.git` folder. What the host's git reads there (`config`, hooks, the
//! file's `gitdir:`) runs on the host for the user, so a container that can write one is a way
//! out (issue 25, class 1; attack findings J3, K3).

use std::path::{Path, PathBuf};

/// The most directory entries [`find`] visits (a huge `node_modules` ends the walk, not the
/// command).
pub const MAX_ENTRIES: usize = 1_000_000;
/// How deep [`find`] goes below its root.
pub const MAX_DEPTH: usize = 32;

/// The `.git` entries below a folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitEntries {
    /// Each entry: its path relative to the root (`.git`, `vendor/lib/.git`) and its path.
    pub entries: Vec<(String, PathBuf)>,
    /// Whether the walk stopped at [`MAX_ENTRIES`] or [`MAX_DEPTH`] (then an entry beyond it
    /// is not known, and the caller must not assume there is none).
    pub truncated: bool,
    /// Folders below the root the walk could not list (relative, sorted): what they hold is
    /// not known either.
    pub unlisted: Vec<String>,
}

/// The `.git` entries below `root` (itself included as `.git` when it has one), in no
/// particular order; an unreadable folder is skipped.
pub fn find(root: &Path) -> GitEntries {
    let mut out = GitEntries::default();
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
                out.entries.push((child_rel, entry.path()));
            } else if kind.is_dir() {
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
        let mut rels: Vec<&str> = found.entries.iter().map(|(r, _)| r.as_str()).collect();
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
}
