//! Where a folder holds git directories, at any depth: `.git` entries (a repository's git
//! directory, a linked worktree's or a submodule's `.git` file) and folders under any other
//! name that git takes as a git directory themselves (a bare repository `upstream.git`, or a
//! folder the agent laid out so: git's discovery tries each folder from the user's working
//! folder up as a git directory before it reaches the workspace's `.git`; attack L2, L3). A
//! bounded walk (of folders: files do not count) that follows no symbolic link and does not
//! descend into a `.git` folder. What the host's git reads there (`config`, hooks, the file's
//! `gitdir:`) runs on the host for the user, so a container that can write one is a way out
//! (issue 25, class 1; attack findings J3, K3).

use std::path::{Path, PathBuf};

/// The most folders [`find`] discovers (a huge `node_modules` ends the walk, not the command).
/// Only folders count: a git directory is a folder, or below one, so a folder full of files
/// hides none, and an agent that makes a million empty files cheaply no longer ends the walk
/// (attack M9). A million folders is what the walk read as entries before, so no workspace
/// it read whole is cut now.
pub const MAX_FOLDERS: usize = 1_000_000;
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
    /// Whether the walk stopped at [`MAX_FOLDERS`] or [`MAX_DEPTH`] (then an entry beyond it
    /// is not known, and the caller must not assume there is none).
    pub truncated: bool,
    /// Every folder whose content the walk did not read whole (relative, sorted): each folder
    /// at [`MAX_DEPTH`] it did not enter, and when [`MAX_FOLDERS`] ran out, the folder it was
    /// reading and every folder it had found but not read yet (`.` for the root). Whatever
    /// the walk did not see is below one of them, so a user who accepts each named folder
    /// accepts exactly what was not seen (attacks L9, M9). Empty when the walk was cut in more
    /// than [`MAX_CUT_SHOWN`] folders: then only the whole walk (`*`) can be accepted.
    pub cut: Vec<String>,
    /// Folders below the root the walk could not list (relative, sorted): what they hold is
    /// not known either.
    pub unlisted: Vec<String>,
}

/// The most folders [`GitEntries::cut`] names.
pub const MAX_CUT_SHOWN: usize = 16;

/// The bounds of one walk ([`MAX_FOLDERS`], [`MAX_DEPTH`], smaller in tests).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// The most folders discovered.
    pub folders: usize,
    /// How deep the walk goes below its root.
    pub depth: usize,
}

impl Bounds {
    /// The bounds [`find`] walks within.
    pub(crate) const DEFAULT: Bounds = Bounds {
        folders: MAX_FOLDERS,
        depth: MAX_DEPTH,
    };
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
/// from there would reach it). An unreadable folder is named in `unlisted`; where a bound
/// stops the walk, every folder it did not read whole is named in `cut`.
pub fn find(root: &Path) -> GitEntries {
    find_within(root, Bounds::DEFAULT)
}

/// [`find`] within `bounds`. Depth first, each folder's subfolders in name order (so a cut
/// walk names the same folders every time).
pub(crate) fn find_within(root: &Path, bounds: Bounds) -> GitEntries {
    let mut out = GitEntries::default();
    if is_git_directory(root) {
        out.entries.push(Entry {
            rel: ".".into(),
            path: root.to_path_buf(),
            kind: EntryKind::GitDir,
        });
    }
    let mut cut = Cut::default();
    let mut folders_left = bounds.folders;
    // folders found and not read yet, by path relative to the root, with their depth
    let mut stack: Vec<(String, usize)> = vec![(String::new(), 0)];
    while let Some((rel, depth)) = stack.pop() {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if !rel.is_empty() {
                out.unlisted.push(rel);
            }
            continue;
        };
        let mut children = Vec::new();
        let mut stopped = false;
        for entry in entries {
            let Ok(entry) = entry else {
                // a folder whose listing failed part way is not known whole
                if !rel.is_empty() {
                    out.unlisted.push(rel.clone());
                }
                break;
            };
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
                continue;
            }
            if !kind.is_dir() {
                // a file or a link holds no git directory the walk would enter
                continue;
            }
            if folders_left == 0 {
                stopped = true;
                break;
            }
            folders_left -= 1;
            if is_git_directory(&entry.path()) {
                out.entries.push(Entry {
                    rel: child_rel.clone(),
                    path: entry.path(),
                    kind: EntryKind::GitDir,
                });
            }
            if depth < bounds.depth {
                children.push(child_rel);
            } else {
                cut.add(child_rel);
            }
        }
        if stopped {
            // this folder was not read whole, and none of those found before it was read at
            // all: each is named (its subfolders found so far are below it)
            cut.add(if rel.is_empty() { ".".into() } else { rel });
            for (rel, _) in stack.drain(..) {
                cut.add(rel);
            }
            break;
        }
        children.sort_unstable();
        stack.extend(children.into_iter().rev().map(|c| (c, depth + 1)));
    }
    out.unlisted.sort();
    out.unlisted.dedup();
    out.truncated = cut.any;
    out.cut = cut.named();
    out
}

/// The folders a walk did not read whole ([`GitEntries::cut`]).
#[derive(Default)]
struct Cut {
    /// Whether there is any.
    any: bool,
    /// The first [`MAX_CUT_SHOWN`] and one more (which says there are too many to name).
    folders: Vec<String>,
}

impl Cut {
    fn add(&mut self, rel: String) {
        self.any = true;
        if self.folders.len() <= MAX_CUT_SHOWN {
            self.folders.push(rel);
        }
    }

    /// The folders, sorted, or none when there are more than [`MAX_CUT_SHOWN`].
    fn named(mut self) -> Vec<String> {
        if self.folders.len() > MAX_CUT_SHOWN {
            return Vec::new();
        }
        self.folders.sort();
        self.folders
    }
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

    /// A tree of `folders` empty folders `name/0000`… below `root`.
    fn folders(root: &Path, name: &str, count: usize) {
        for i in 0..count {
            std::fs::create_dir_all(root.join(name).join(format!("{i:04}"))).unwrap();
        }
    }

    /// Attack M9: files do not count against the walk's bound, only folders do: a folder of
    /// many files (what an agent makes cheaply) does not end the walk, and a nested
    /// repository in a folder after it is found.
    #[test]
    fn files_do_not_end_the_walk_and_a_repository_after_them_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("b4")).unwrap();
        for i in 0..2000 {
            std::fs::write(root.join("b4").join(format!("f{i}")), "").unwrap();
        }
        std::fs::create_dir_all(root.join("vendor/.git")).unwrap();
        let bounds = Bounds {
            folders: 10,
            depth: MAX_DEPTH,
        };
        let found = find_within(root, bounds);
        assert!(!found.truncated && found.cut.is_empty(), "{found:?}");
        let rels: Vec<&str> = found.entries.iter().map(|e| e.rel.as_str()).collect();
        assert_eq!(rels, ["vendor/.git"]);
    }

    /// Attack M9: where the folder bound stops the walk, every folder it did not read whole
    /// is named: the one it was reading and every one it had found and not read yet (never a
    /// folder below a named one); more than [`MAX_CUT_SHOWN`] names none, so only the whole
    /// walk can be accepted.
    #[test]
    fn a_walk_stopped_by_its_bound_names_every_folder_it_did_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // read in name order: `a` first, where the bound runs out
        folders(root, "a", 20);
        std::fs::create_dir_all(root.join("b/.git")).unwrap();
        std::fs::create_dir_all(root.join("c/d/.git")).unwrap();
        let bounds = Bounds {
            folders: 6,
            depth: MAX_DEPTH,
        };
        let found = find_within(root, bounds);
        assert!(found.truncated);
        assert_eq!(found.cut, ["a", "b", "c"], "{found:?}");
        assert!(found.entries.is_empty(), "{found:?}");
        // with a bound that is not reached, the same tree is read whole
        let whole = find_within(
            root,
            Bounds {
                folders: 100,
                depth: MAX_DEPTH,
            },
        );
        assert!(!whole.truncated && whole.cut.is_empty());
        assert_eq!(whole.entries.len(), 2);
        // stopped while reading the root: the root itself is named
        let at_root = find_within(
            root,
            Bounds {
                folders: 1,
                depth: MAX_DEPTH,
            },
        );
        assert_eq!(at_root.cut, ["."], "{at_root:?}");
        // more unread folders than can be named: none is, the walk is still cut
        for i in 0..MAX_CUT_SHOWN {
            std::fs::create_dir_all(root.join(format!("z{i:02}"))).unwrap();
        }
        let many = find_within(
            root,
            Bounds {
                folders: 25,
                depth: MAX_DEPTH,
            },
        );
        assert!(many.truncated && many.cut.is_empty(), "{many:?}");
    }
}
