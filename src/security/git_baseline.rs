//! The git entries a container's workspace had when `up` made or reused it, kept in devcell's
//! state so that every later command that runs container code against the workspace (`exec`,
//! `run-user-commands`, `down`) moves aside what the container created since
//! ([`crate::security::git_quarantine`]; spec-note 0466, issue 25 class 1).
//!
//! `up` walks the workspace before the container's hooks run and quarantines what they made
//! (spec-note 0448). A container keeps running after `up`: a process a hook left (`setsid`),
//! or any command `exec` runs, can then make `src/.git` with `core.fsmonitor` set, a `.git`
//! file, or a folder laid out as a git directory, and the user's next `git status` on the host
//! runs it. The comparison is with what `up` found, not with a walk before each command: a
//! walk before `exec` would count what a left-over process made in between as the user's.
//!
//! The record is `<state>/git-baseline/<container id>.json`, written by devcell only; a
//! container that has none (made with `--allow workspace-git:rw`, under `reference`, or by an
//! older devcell) is not walked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::security::git_quarantine::{self, Outcome};

/// What `up` recorded for one container.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Baseline {
    /// The covered workspace root on the host (canonical, as `up` judged it).
    pub root: PathBuf,
    /// The git entries below it that are the user's (relative paths, as
    /// [`crate::security::git_entries::find`] names them): found at the start, or accepted
    /// with `--allow created-git:<path>`.
    pub entries: BTreeSet<String>,
}

/// `<state_root>/git-baseline/<container_id>.json`; `None` when `container_id` is not a plain
/// name (an engine id is hex).
pub fn path_of(state_root: &Path, container_id: &str) -> Option<PathBuf> {
    let plain = !container_id.is_empty()
        && container_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    plain.then(|| {
        state_root
            .join("git-baseline")
            .join(format!("{container_id}.json"))
    })
}

/// Writes `baseline` for `container_id` (replacing any earlier one).
///
/// Errors: the file system's, or an id that is not a plain name.
pub fn record(state_root: &Path, container_id: &str, baseline: &Baseline) -> std::io::Result<()> {
    let path = path_of(state_root, container_id)
        .ok_or_else(|| std::io::Error::other(format!("`{container_id}` is not a container id")))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec_pretty(baseline).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
}

/// The record for `container_id`, when there is one that reads.
pub fn load(state_root: &Path, container_id: &str) -> Option<Baseline> {
    let text = std::fs::read(path_of(state_root, container_id)?).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The ids of the containers whose record covers `root` (canonical), in name order.
pub fn containers_of(state_root: &Path, root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(state_root.join("git-baseline")) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json").map(str::to_string)
        })
        .filter(|id| load(state_root, id).is_some_and(|b| b.root == root))
        .collect();
    ids.sort();
    ids
}

/// Removes the record of `container_id` (a removed container); nothing when there is none.
pub fn forget(state_root: &Path, container_id: &str) {
    if let Some(path) = path_of(state_root, container_id) {
        let _ = std::fs::remove_file(path);
    }
}

/// After a command ran container code against the workspace of `container_id`: each git entry
/// below the recorded root that is not in the record and not in `keep` (this command's
/// `--allow created-git:<path>`) is moved into `<state_root>/quarantine/<stamp>/`. What `keep`
/// accepted joins the record. `None` when the container has no record (nothing walked).
pub fn quarantine_since(
    state_root: &Path,
    container_id: &str,
    keep: &BTreeSet<String>,
) -> Option<Outcome> {
    let mut baseline = load(state_root, container_id)?;
    let into = git_quarantine::folder_in(state_root);
    let accepted = |rel: &str| keep.contains(rel);
    let outcome =
        git_quarantine::quarantine_new(&baseline.root, &baseline.entries, &accepted, Some(&into));
    if !keep.is_subset(&baseline.entries) {
        baseline.entries.extend(keep.iter().cloned());
        let _ = record(state_root, container_id, &baseline);
    }
    Some(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25 class 1 (spec-note 0466): what the container made after `up` is moved aside by
    /// the next command; what `up` found stays; an accepted entry stays and is remembered; a
    /// container with no record (or an id that is not a name) walks nothing.
    #[test]
    fn entries_made_after_up_are_moved_aside_by_the_next_command() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let baseline = Baseline {
            root: root.clone(),
            entries: [".git".to_string()].into(),
        };
        record(&state, "abc123", &baseline).unwrap();
        assert_eq!(load(&state, "abc123"), Some(baseline));
        assert_eq!(path_of(&state, "../x"), None);
        assert!(quarantine_since(&state, "../x", &BTreeSet::new()).is_none());
        assert!(quarantine_since(&state, "other", &BTreeSet::new()).is_none());

        std::fs::create_dir_all(root.join("src/.git")).unwrap();
        std::fs::write(root.join("src/.git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        std::fs::create_dir_all(root.join("mine/.git")).unwrap();
        let keep: BTreeSet<String> = ["mine/.git".to_string()].into();
        let out = quarantine_since(&state, "abc123", &keep).unwrap();
        assert!(out.failed.is_empty(), "{:?}", out.failed);
        let moved: Vec<&str> = out.moved.iter().map(|q| q.path.as_str()).collect();
        assert_eq!(moved, ["src/.git"]);
        assert!(!root.join("src/.git").exists());
        assert!(out.moved[0].moved_to.starts_with(state.join("quarantine")));
        assert!(root.join(".git").is_dir() && root.join("mine/.git").is_dir());
        // accepted once, kept after
        let again = quarantine_since(&state, "abc123", &BTreeSet::new()).unwrap();
        assert!(again.is_empty(), "{again:?}");
        forget(&state, "abc123");
        assert!(load(&state, "abc123").is_none());
    }
}
