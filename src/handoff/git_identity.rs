//! Which `.git` entries a workspace holds, and what they are, so a later command can say loudly
//! when one changed or appeared (spec-note 0436). The container cannot write a host git
//! directory, but it can create a *new* repository in the workspace (`tool/.git` with
//! `core.fsmonitor`), whose configuration the user's git on the host would run there.
//!
//! Recorded at the start of a handoff; `status`, `handoff` and `delete` compare and warn
//! (`git_dir_changed`, `git_dir_created`); devcell never runs git in what it finds.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

// The walk's bounds are `security::git_entries`' (1,000,000 entries, depth 32): a huge
// `node_modules` ends the walk, not the command, and the handoff then refuses unless
// accepted (`handoff::nested_git`); a folder at the depth bound holding folders marks the
// walk truncated.
/// The most of a `config`, `commondir`, hook or `.git` file hashed (a larger one is
/// fingerprinted by mode, size and modification time).
const MAX_FILE: u64 = 1 << 20;
/// The most entries of `hooks/` or `info/` fingerprinted one by one (more is a change too).
const MAX_LISTED: usize = 256;
/// The files of a git directory git reads as configuration or follows as a link, fingerprinted
/// by content (`HEAD`, refs and objects are data).
const CONFIG_FILES: [&str; 4] = [
    "config",
    "commondir",
    "config.worktree",
    "objects/info/alternates",
];
/// The folders of a git directory whose every entry git may run or read as configuration.
const CONFIG_FOLDERS: [&str; 2] = ["hooks", "info"];

/// One `.git` entry: what it is and a fingerprint of what git reads from it as configuration or
/// follows as a link (`HEAD` is data: not included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitEntry {
    /// `dir`, `file`, `symlink` or `other`.
    pub kind: String,
    /// Device and inode (a `.git` renamed away and replaced has another).
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// SHA-256 (hex) of the `.git` file, or of the directory's `config`, `commondir`,
    /// `config.worktree` and `objects/info/alternates`, by name (`-` for an absent or
    /// unreadable one); and for `hooks/` and `info/`, the folder's kind under `hooks/` and
    /// each entry's mode and content hash under `hooks/<name>` (a record made before these has
    /// no `hooks/` key: only `config` and `commondir` are compared with it).
    pub hashes: BTreeMap<String, String>,
    /// A folder under another name than `.git` that is itself a git directory (a bare
    /// repository, or a folder laid out as one: `security::git_entries::is_git_directory`;
    /// attack L2/L3). git's discovery takes it as the repository of every folder below it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bare: bool,
}

/// The `.git` entries of a workspace, by path relative to its root (`.git`, `api/.git`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitIdentity {
    /// The entries.
    pub entries: BTreeMap<String, GitEntry>,
    /// Whether the walk stopped at its bound, of entries or of depth (then an entry beyond
    /// it is not known).
    #[serde(default)]
    pub truncated: bool,
    /// Where the walk stopped ([`crate::security::git_entries::GitEntries::cut`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<String>,
    /// Folders below the root the walk could not list (relative paths): what they hold is not
    /// known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unlisted: Vec<String>,
}

/// Records the git entries under `root` (`.git` entries and folders that are git directories
/// under another name, [`crate::security::git_entries::find`]): a bounded walk that follows no
/// symbolic link and does not descend into a `.git` folder.
pub fn record(root: &Path) -> GitIdentity {
    let found = crate::security::git_entries::find(root);
    GitIdentity {
        entries: found
            .entries
            .into_iter()
            .map(|e| {
                let mut entry = entry_of(&e.path);
                entry.bare = e.kind == crate::security::git_entries::EntryKind::GitDir;
                (e.rel, entry)
            })
            .collect(),
        truncated: found.truncated,
        cut: found.cut,
        unlisted: found.unlisted,
    }
}

/// SHA-256 (hex) of the regular file `path` read without following a link, `-` when absent or
/// not a regular file; a file past [`MAX_FILE`] is named by its size and modification time.
fn hash_file(path: &Path) -> String {
    use sha2::Digest as _;
    use std::os::unix::fs::MetadataExt as _;
    match crate::config::hostgit::read_no_follow(path, MAX_FILE) {
        Ok(b) => hex::encode(sha2::Sha256::digest(&b)),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => path
            .symlink_metadata()
            .map(|m| format!("large:{}:{}.{}", m.size(), m.mtime(), m.mtime_nsec()))
            .unwrap_or_else(|_| "-".to_string()),
        Err(_) => "-".to_string(),
    }
}

/// What one entry of `hooks/` or `info/` (or the folder itself) is, as a fingerprint: a
/// regular file's permission bits and content hash, a link's target, else its kind.
fn fingerprint(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = path.symlink_metadata() else {
        return "-".to_string();
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(path).unwrap_or_default();
        format!("symlink:{}", target.to_string_lossy())
    } else if kind.is_file() {
        format!("{:o}:{}", meta.mode() & 0o7777, hash_file(path))
    } else if kind.is_dir() {
        format!("dir:{:o}", meta.mode() & 0o7777)
    } else {
        "other".to_string()
    }
}

/// `folder` (`hooks`, `info`) of the git directory `git_dir` into `hashes`: the folder under
/// `<folder>/`, each entry (sorted, at most [`MAX_LISTED`]) under `<folder>/<name>`, and
/// `<folder>/…` when there are more.
fn fingerprint_folder(git_dir: &Path, folder: &str, hashes: &mut BTreeMap<String, String>) {
    let path = git_dir.join(folder);
    let what = fingerprint(&path);
    let listable = what.starts_with("dir:");
    hashes.insert(format!("{folder}/"), what);
    if !listable {
        return;
    }
    let Ok(entries) = std::fs::read_dir(&path) else {
        hashes.insert(format!("{folder}/…"), "unlisted".to_string());
        return;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if names.len() > MAX_LISTED {
        hashes.insert(format!("{folder}/…"), format!("{} entries", names.len()));
        names.truncate(MAX_LISTED);
    }
    for name in names {
        hashes.insert(format!("{folder}/{name}"), fingerprint(&path.join(&name)));
    }
}

fn entry_of(path: &Path) -> GitEntry {
    use std::os::unix::fs::MetadataExt as _;
    let meta = path.symlink_metadata().ok();
    let kind = match &meta {
        Some(m) if m.file_type().is_symlink() => "symlink",
        Some(m) if m.is_dir() => "dir",
        Some(m) if m.is_file() => "file",
        _ => "other",
    };
    let mut hashes = BTreeMap::new();
    match kind {
        "dir" => {
            for name in CONFIG_FILES {
                hashes.insert(name.to_string(), hash_file(&path.join(name)));
            }
            for folder in CONFIG_FOLDERS {
                fingerprint_folder(path, folder, &mut hashes);
            }
        }
        "file" => {
            hashes.insert(".git".to_string(), hash_file(path));
        }
        "symlink" => {
            let target = std::fs::read_link(path)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            hashes.insert("target".to_string(), target);
        }
        _ => {}
    }
    GitEntry {
        kind: kind.to_string(),
        dev: meta.as_ref().map_or(0, |m| m.dev()),
        ino: meta.as_ref().map_or(0, |m| m.ino()),
        hashes,
        bare: false,
    }
}

/// The git entries of a workspace an agent created and the user has not accepted (attack M8):
/// those recorded in the workspace's state (`createdGit`, kept through `delete`), and those
/// not in the baseline recorded at the last handoff's start (made since, by the last agent or
/// anything else). Repository discovery never adopts one as a workspace repository
/// ([`crate::handoff::repository::InspectOptions::created_git`]): devcell runs no git in it
/// and a handoff covers it read-only like any other nested `.git`, until the user accepts it
/// with `--allow created-git:<path>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreatedGits {
    /// The entries of the last baseline (`None`: no handoff recorded one).
    pub baseline: Option<std::collections::BTreeSet<String>>,
    /// The entries recorded as created and not accepted.
    pub recorded: std::collections::BTreeSet<String>,
}

impl CreatedGits {
    /// Whether the git entry `rel` (relative to the workspace root: `.git`, `tools/.git`) is
    /// one an agent created and the user has not accepted.
    pub fn is_created(&self, rel: &str) -> bool {
        self.recorded.contains(rel)
            || self
                .baseline
                .as_ref()
                .is_some_and(|b| !b.contains(rel) && !rel.is_empty())
    }
}

/// The warning naming a created, unaccepted git entry `rel` (`status`, `delete`, `handoff`).
pub fn created_message(rel: &str) -> String {
    format!(
        "`{rel}` was created in the workspace during a handoff (by the agent, or beside it) and is not accepted: devcell runs no git in it and never takes it as one of the workspace's repositories; do not run git there before checking it (`git config --file <.git>/config --list`, the `.git` file's target); once checked, accept it with `--allow created-git:{rel}`"
    )
}

/// The entries of `now` that are not in `before` (what was created between them).
pub fn created_since(before: &GitIdentity, now: &GitIdentity) -> Vec<String> {
    now.entries
        .keys()
        .filter(|rel| !before.entries.contains_key(*rel))
        .cloned()
        .collect()
}

/// The fingerprint of one entry now (for a baseline the user accepts it into).
pub fn entry_now(path: &Path) -> GitEntry {
    let mut entry = entry_of(path);
    entry.bare = entry.kind == "dir"
        && path.file_name().is_some_and(|n| n != ".git")
        && crate::security::git_entries::is_git_directory(path);
    entry
}

/// One finding of [`compare`], as a handoff's result names it (`gitDirChanges`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitDirChange {
    /// `git_dir_changed` or `git_dir_created`.
    pub code: String,
    /// What changed and what to do, naming the path.
    pub message: String,
    /// An error-level finding: a folder of the user's own tree became a git directory with no
    /// `.git` name (attack L2), so an ordinary `git status` in it or below it runs what the
    /// agent configured there. Serialized only when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub loud: bool,
}

/// What changed from `before` to `now`, as warnings `(code, message)` ([`compare_changes`]).
/// Pure.
pub fn compare(before: &GitIdentity, now: &GitIdentity) -> Vec<(String, String)> {
    compare_changes(before, now)
        .into_iter()
        .map(|c| (c.code, c.message))
        .collect()
}

/// What changed from `before` to `now`: `git_dir_created` for a git entry that was not there
/// (loud for a folder that became a git directory under another name than `.git`),
/// `git_dir_changed` for one replaced, removed, or whose configuration or link changed. Pure.
pub fn compare_changes(before: &GitIdentity, now: &GitIdentity) -> Vec<GitDirChange> {
    let mut out = Vec::new();
    let advice = "do not run git there before checking it (`git config --file <.git>/config --list`, the `.git` file's target); devcell runs no git in it";
    let change = |code: &str, message: String| GitDirChange {
        code: code.to_string(),
        message,
        loud: false,
    };
    for (rel, entry) in &now.entries {
        match before.entries.get(rel) {
            None if entry.bare => out.push(GitDirChange {
                loud: true,
                ..change(
                    "git_dir_created",
                    format!("`{rel}` became a git directory since the handoff started (it holds `HEAD` with `objects/` and `refs/`, or `commondir`, and has no `.git` name): git takes it as the repository of every folder in it, so an ordinary `git status` in `{rel}` or below runs on this host whatever the agent configured in `{rel}/config` (`core.fsmonitor`, hooks); do not run git there: remove `{rel}/HEAD` after checking it, and set `git config --global safe.bareRepository explicit` so git never takes such a folder by itself"),
                )
            }),
            None => out.push(change(
                "git_dir_created",
                format!("`{rel}` appeared since the handoff started: a repository the agent may have made, with a configuration git would run on the host; {advice}"),
            )),
            Some(old) => {
                let what = if old.kind != entry.kind || old.dev != entry.dev || old.ino != entry.ino {
                    "was replaced".to_string()
                } else {
                    let changed = changed_keys(old, entry);
                    if changed.is_empty() {
                        continue;
                    }
                    format!("changed ({})", changed.join(", "))
                };
                out.push(change(
                    "git_dir_changed",
                    format!("`{rel}` {what} since the handoff started; {advice}"),
                ));
            }
        }
    }
    for rel in before
        .entries
        .keys()
        .filter(|r| !now.entries.contains_key(*r))
    {
        out.push(change(
            "git_dir_changed",
            format!("`{rel}` is gone since the handoff started (moved or removed)"),
        ));
    }
    if now.truncated && !before.truncated {
        out.push(GitDirChange {
            loud: true,
            ..change("git_walk_cut", walk_cut_message(&now.cut))
        });
    }
    out
}

/// Attack L9: the session made the workspace deeper or larger than devcell's walk for git
/// entries, so the next handoff refuses until the folder is removed or accepted alone.
fn walk_cut_message(cut: &[String]) -> String {
    let shown: Vec<String> = cut.iter().take(3).map(|c| format!("`{c}`")).collect();
    let at = if shown.is_empty() {
        String::new()
    } else {
        format!(" (it stopped at {})", shown.join(", "))
    };
    format!(
        "the workspace became larger or deeper than devcell's walk for git entries since the handoff started{at}: a git directory past it is not known, so the next handoff refuses until that folder is removed or accepted alone with `--allow uncovered-git:<folder>`"
    )
}

/// The fingerprint keys whose value differs between `old` and `now` (either side missing is
/// a difference); against a record made before `hooks/` and `info/` were fingerprinted, only
/// the keys it has.
fn changed_keys<'a>(old: &'a GitEntry, now: &'a GitEntry) -> Vec<&'a str> {
    let legacy = old.kind == "dir" && !old.hashes.contains_key("hooks/");
    let mut keys: Vec<&str> = old.hashes.keys().map(String::as_str).collect();
    if !legacy {
        keys.extend(now.hashes.keys().map(String::as_str));
    }
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter(|k| old.hashes.get(*k) != now.hashes.get(*k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn new_replaced_and_reconfigured_git_entries_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("api/.git")).unwrap();
        std::fs::write(root.join("api/.git/config"), "[core]\n").unwrap();
        std::fs::write(root.join("api/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(root.join("web")).unwrap();
        std::fs::write(
            root.join("web/.git"),
            "gitdir: /src/web/.git/worktrees/web\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(root, root.join("loop")).unwrap();
        let before = record(root);
        assert_eq!(before.entries.len(), 2, "{before:?}");
        assert!(compare(&before, &record(root)).is_empty());
        // HEAD is data: a checkout is not a finding
        std::fs::write(root.join("api/.git/HEAD"), "ref: refs/heads/topic\n").unwrap();
        assert!(compare(&before, &record(root)).is_empty());

        std::fs::write(root.join("api/.git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        std::fs::write(root.join("web/.git"), "gitdir: /tmp/evil\n").unwrap();
        std::fs::create_dir_all(root.join("tools/x/.git")).unwrap();
        let found = compare(&before, &record(root));
        let codes: Vec<&str> = found.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            codes,
            ["git_dir_changed", "git_dir_created", "git_dir_changed"],
            "{found:?}"
        );
        assert!(found[0].1.contains("api/.git") && found[0].1.contains("config"));
        assert!(found[1].1.contains("tools/x/.git"));

        std::fs::rename(root.join("api/.git"), root.join("api/old")).unwrap();
        std::fs::create_dir_all(root.join("api/.git")).unwrap();
        let found = compare(&before, &record(root));
        assert!(
            found
                .iter()
                .any(|(_, m)| m.contains("api/.git` was replaced")),
            "{found:?}"
        );
    }

    /// Attack K2 (spec-note 0400): the agent wrote `hooks/pre-commit` into a nested
    /// repository's git directory and nothing was said; a hook added, made executable or
    /// rewritten, `info/`, `config.worktree` and `objects/info/alternates` are changes now.
    #[test]
    fn a_hook_added_to_a_nested_git_dir_is_a_change() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let git = root.join("vendor/lib/.git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::create_dir_all(git.join("info")).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        let before = record(root);
        assert!(compare(&before, &record(root)).is_empty());
        let changed = |what: &str| {
            let found = compare(&before, &record(root));
            assert_eq!(found.len(), 1, "{what}: {found:?}");
            assert_eq!(found[0].0, "git_dir_changed", "{what}");
            assert!(
                found[0].1.contains("vendor/lib/.git") && found[0].1.contains(what),
                "{what}: {found:?}"
            );
        };

        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nid\n").unwrap();
        changed("hooks/pre-commit");
        std::fs::remove_file(git.join("hooks/pre-commit")).unwrap();
        assert!(compare(&before, &record(root)).is_empty());
        std::fs::set_permissions(
            git.join("hooks/pre-commit.sample"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        changed("hooks/pre-commit.sample");
        std::fs::set_permissions(
            git.join("hooks/pre-commit.sample"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        for (file, what) in [
            ("info/exclude", "info/exclude"),
            ("config.worktree", "config.worktree"),
        ] {
            std::fs::write(git.join(file), "x\n").unwrap();
            changed(what);
            std::fs::remove_file(git.join(file)).unwrap();
        }
        std::fs::create_dir_all(git.join("objects/info")).unwrap();
        std::fs::write(git.join("objects/info/alternates"), "/elsewhere\n").unwrap();
        changed("objects/info/alternates");
        std::fs::remove_file(git.join("objects/info/alternates")).unwrap();
        std::fs::remove_dir_all(git.join("hooks")).unwrap();
        std::os::unix::fs::symlink("/tmp", git.join("hooks")).unwrap();
        changed("hooks/");
        std::fs::remove_file(git.join("hooks")).unwrap();
        std::fs::create_dir(git.join("hooks")).unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();

        // a record made before hooks were fingerprinted compares only what it holds
        let mut legacy = record(root);
        for e in legacy.entries.values_mut() {
            e.hashes.retain(|k, _| k == "config" || k == "commondir");
        }
        assert!(compare(&legacy, &record(root)).is_empty());
        std::fs::write(git.join("config"), "[core]\n\tfsmonitor = x\n").unwrap();
        let found = compare(&legacy, &record(root));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].1.contains("changed (config)"), "{found:?}");
    }

    /// A walk cut at its depth bound says so (the handoff then refuses, `nested_git`).
    #[test]
    fn a_walk_cut_at_its_depth_is_truncated() {
        let tmp = tempfile::tempdir().unwrap();
        let deep: PathBuf = (0..=crate::security::git_entries::MAX_DEPTH)
            .map(|i| format!("d{i}"))
            .collect();
        std::fs::create_dir_all(tmp.path().join(&deep)).unwrap();
        assert!(record(tmp.path()).truncated);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b/.git")).unwrap();
        let found = record(tmp.path());
        assert!(!found.truncated && found.unlisted.is_empty(), "{found:?}");
    }

    /// Attack L2: the agent lays out a folder of the user's tree (`docs`) as a git directory,
    /// with no `.git` name; it is recorded as one (`bare`) and named `git_dir_created`, loud,
    /// naming `git status` as the danger and `safe.bareRepository`.
    #[test]
    fn a_folder_made_a_git_directory_is_a_loud_creation() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/readme.md"), "x\n").unwrap();
        let before = record(root);
        for dir in ["docs/objects", "docs/refs"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("docs/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("docs/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        let now = record(root);
        assert!(now.entries["docs"].bare && !now.entries[".git"].bare);
        let found = compare_changes(&before, &now);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].code, "git_dir_created");
        assert!(found[0].loud);
        let m = &found[0].message;
        assert!(
            m.contains("`docs`") && m.contains("git status") && m.contains("safe.bareRepository"),
            "{m}"
        );
        let json = serde_json::to_value(&found[0]).unwrap();
        assert_eq!(json["loud"], true);
        // an ordinary `.git` creation is not loud, and serializes no `loud`
        std::fs::create_dir_all(root.join("tool/.git")).unwrap();
        let found = compare_changes(&now, &record(root));
        assert!(!found[0].loud);
        assert!(
            serde_json::to_value(&found[0])
                .unwrap()
                .get("loud")
                .is_none()
        );
    }
}
