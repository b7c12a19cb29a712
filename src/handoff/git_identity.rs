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

/// The most directory entries the walk visits (a huge `node_modules` ends the walk, not the
/// command).
const MAX_ENTRIES: usize = 200_000;
/// How deep the walk goes below the workspace root.
const MAX_DEPTH: usize = 12;
/// The most of a `config`, `commondir` or `.git` file hashed.
const MAX_FILE: u64 = 1 << 20;

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
    /// SHA-256 (hex) of the `.git` file, or of the directory's `config` and `commondir`, by
    /// name (`-` for an absent or unreadable one).
    pub hashes: BTreeMap<String, String>,
}

/// The `.git` entries of a workspace, by path relative to its root (`.git`, `api/.git`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitIdentity {
    /// The entries.
    pub entries: BTreeMap<String, GitEntry>,
    /// Whether the walk stopped at its bound (then an entry beyond it is not known).
    #[serde(default)]
    pub truncated: bool,
}

/// Records the `.git` entries under `root`: a bounded walk that follows no symbolic link and
/// does not descend into a `.git` folder.
pub fn record(root: &Path) -> GitIdentity {
    let mut out = GitIdentity::default();
    let mut budget = MAX_ENTRIES;
    let mut stack = vec![(root.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
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
                out.entries.insert(child_rel, entry_of(&entry.path()));
            } else if kind.is_dir() && depth < MAX_DEPTH {
                stack.push((entry.path(), child_rel, depth + 1));
            }
        }
    }
    out
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
    let hash = |p: &Path| {
        use sha2::Digest as _;
        crate::config::hostgit::read_no_follow(p, MAX_FILE)
            .map(|b| hex::encode(sha2::Sha256::digest(&b)))
            .unwrap_or_else(|_| "-".to_string())
    };
    let mut hashes = BTreeMap::new();
    match kind {
        "dir" => {
            for name in ["config", "commondir"] {
                hashes.insert(name.to_string(), hash(&path.join(name)));
            }
        }
        "file" => {
            hashes.insert(".git".to_string(), hash(path));
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
    }
}

/// What changed from `before` to `now`, as warnings `(code, message)`: `git_dir_created` for a
/// `.git` that was not there, `git_dir_changed` for one replaced, removed, or whose
/// configuration or link changed. Pure.
pub fn compare(before: &GitIdentity, now: &GitIdentity) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let advice = "do not run git there before checking it (`git config --file <.git>/config --list`, the `.git` file's target); devcell runs no git in it";
    for (rel, entry) in &now.entries {
        match before.entries.get(rel) {
            None => out.push((
                "git_dir_created".to_string(),
                format!("`{rel}` appeared since the handoff started: a repository the agent may have made, with a configuration git would run on the host; {advice}"),
            )),
            Some(old) if old != entry => {
                let what = if old.kind != entry.kind || old.dev != entry.dev || old.ino != entry.ino {
                    "was replaced".to_string()
                } else {
                    let changed: Vec<&str> = entry
                        .hashes
                        .iter()
                        .filter(|(k, v)| old.hashes.get(*k) != Some(*v))
                        .map(|(k, _)| k.as_str())
                        .collect();
                    format!("changed ({})", changed.join(", "))
                };
                out.push((
                    "git_dir_changed".to_string(),
                    format!("`{rel}` {what} since the handoff started; {advice}"),
                ));
            }
            Some(_) => {}
        }
    }
    for rel in before
        .entries
        .keys()
        .filter(|r| !now.entries.contains_key(*r))
    {
        out.push((
            "git_dir_changed".to_string(),
            format!("`{rel}` is gone since the handoff started (moved or removed)"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
