//! Records kept in devcell's state folder.

use std::collections::BTreeSet;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::model::{EnvironmentRecord, read_record, write_record};
use crate::ops::error::{OpsError, Result};

/// Records kept in devcell's state folder:
///
/// ```text
/// <root>/environments/<hash>.json             one record, named by the hash of its content
/// <root>/environments/workspaces/<key>.json   the last record of a workspace (key: sha256 of its canonical folder)
/// ```
#[derive(Debug, Clone)]
pub struct EnvironmentStore {
    root: PathBuf,
}

impl EnvironmentStore {
    /// The store under the state root `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into().join("environments"),
        }
    }

    /// The store under [`crate::ops::state_folder::default_root`].
    pub fn open_default() -> Option<Self> {
        crate::ops::state_folder::default_root().map(Self::new)
    }

    /// The hash a record is stored under: the first 32 hex digits of the sha256 of its JSON.
    pub fn hash_of(record: &EnvironmentRecord) -> String {
        let bytes = serde_json::to_vec(record).unwrap_or_default();
        hex::encode(&Sha256::digest(&bytes)[..16])
    }

    /// `<root>/environments/<hash>.json`.
    pub fn path_of(&self, hash: &str) -> PathBuf {
        self.root.join(format!("{hash}.json"))
    }

    /// The last record's path of a workspace folder.
    fn workspace_path(&self, workspace: &Path) -> PathBuf {
        let canonical = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.into());
        let key = hex::encode(&Sha256::digest(canonical.as_os_str().as_encoded_bytes())[..16]);
        self.root.join("workspaces").join(format!("{key}.json"))
    }

    /// Stores `record` as the last record of `workspace`; returns its hash.
    ///
    /// Errors: [`OpsError::Unsupported`] naming the file that could not be written.
    pub fn store(&self, workspace: &Path, record: &EnvironmentRecord) -> Result<String> {
        let hash = Self::hash_of(record);
        // `prune` judges under the same lock: it never sees a record without its workspace
        let _lock = self.lock()?;
        write_record(&self.path_of(&hash), record)?;
        write_record(&self.workspace_path(workspace), record)?;
        Ok(hash)
    }

    /// The record stored under `hash`.
    ///
    /// Errors: [`OpsError::Unsupported`] for a malformed hash; as [`read_record`] (none
    /// stored under it included).
    pub fn load(&self, hash: &str) -> Result<EnvironmentRecord> {
        if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(OpsError::Unsupported {
                message: format!("`{hash}` is not an environment record's hash"),
                hint: None,
            });
        }
        read_record(&self.path_of(hash))
    }

    /// The last record of `workspace`, `None` when it has none.
    ///
    /// Errors: as [`read_record`].
    pub fn last(&self, workspace: &Path) -> Result<Option<EnvironmentRecord>> {
        let path = self.workspace_path(workspace);
        if !path.exists() {
            return Ok(None);
        }
        read_record(&path).map(Some)
    }
}

/// What [`EnvironmentStore::forget`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Record files removed (the workspace's last record, records nothing else names).
    pub removed: Vec<PathBuf>,
    /// Copies written for the sessions that keep their record.
    pub copies: Vec<PathBuf>,
}

impl EnvironmentStore {
    /// Forgets `workspace`'s records (`delete`): first each `(hash, copy)` of `sessions` is
    /// copied to `copy` (a session keeps the record of the environment its agent had, next to
    /// its log, spec-note 0520), then the workspace's last record goes, and every record
    /// either named unless `still_named` or another workspace's last record names it (records
    /// are content-addressed: two checkouts of one repository can share one).
    ///
    /// Errors: [`OpsError::Unsupported`] naming the file that could not be written or
    /// removed; a record that cannot be read is not copied (it is not evidence of anything).
    pub fn forget(
        &self,
        workspace: &Path,
        sessions: &[(String, PathBuf)],
        still_named: &BTreeSet<String>,
    ) -> Result<Forgotten> {
        let mut done = Forgotten::default();
        let _lock = self.lock_existing()?;
        let mut named: BTreeSet<String> = BTreeSet::new();
        for (hash, copy) in sessions {
            named.insert(hash.clone());
            if let Ok(record) = self.load(hash)
                && !copy.exists()
            {
                write_record(copy, &record)?;
                done.copies.push(copy.clone());
            }
        }
        let last = self.workspace_path(workspace);
        if last.exists() {
            if let Ok(record) = read_record(&last) {
                named.insert(Self::hash_of(&record));
            }
            remove(&last)?;
            done.removed.push(last);
        }
        let others = self.last_hashes();
        for hash in named.difference(still_named) {
            let path = self.path_of(hash);
            if !others.contains(hash) && path.exists() && self.load(hash).is_ok() {
                remove(&path)?;
                done.removed.push(path);
            }
        }
        Ok(done)
    }

    /// The hashes of every workspace's last record.
    fn last_hashes(&self) -> BTreeSet<String> {
        let Ok(entries) = std::fs::read_dir(self.root.join("workspaces")) else {
            return BTreeSet::new();
        };
        entries
            .flatten()
            .filter_map(|e| read_record(&e.path()).ok())
            .map(|r| Self::hash_of(&r))
            .collect()
    }
}

/// A record [`EnvironmentStore::prune`] removed (or would remove).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrunedRecord {
    /// Its hash (`env show` names records by it).
    pub hash: String,
    /// Its file.
    pub path: PathBuf,
    /// The command that made it (`up`, `build`, `handoff`).
    pub command: String,
}

/// A record [`EnvironmentStore::prune`] left in place, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptRecord {
    /// Its hash (the file's name).
    pub hash: String,
    /// Its file.
    pub path: PathBuf,
    /// Why it was kept.
    pub kept_because: String,
}

/// What [`EnvironmentStore::prune`] did (shaped as `prune --tasks`'s result).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pruned {
    /// `--dry-run`: nothing was removed; `removed` is what would be.
    pub dry_run: bool,
    /// The records removed (or that would be).
    pub removed: Vec<PrunedRecord>,
    /// The records kept: a workspace's last, named by a session, younger than
    /// [`PRUNE_MIN_AGE`], or not readable as a record of this devcell.
    pub kept: Vec<KeptRecord>,
}

/// A record younger than this is never pruned: a handoff names its record in its session just
/// after storing it, and another `up` of the workspace may replace the workspace's last record
/// in between (spec-note 0520).
pub const PRUNE_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(600);

impl EnvironmentStore {
    /// Removes (unless `dry_run`) every record `<hash>.json` that no workspace's last record
    /// is, that `named` (the hashes handoff sessions name) does not hold and that is older
    /// than [`PRUNE_MIN_AGE`], judged under the store's lock (no `up`, `build`, handoff or
    /// `delete` stores or forgets a record meanwhile). A file that does not read as a record
    /// of this version is kept and reported: this devcell cannot tell who names it. Files not
    /// named as records are not looked at; the workspaces' last records are never removed
    /// (`delete` forgets them).
    ///
    /// Errors: [`OpsError::Unsupported`] naming the folder that could not be listed or
    /// locked, or the record that could not be removed.
    pub fn prune(&self, named: &BTreeSet<String>, dry_run: bool) -> Result<Pruned> {
        let mut done = Pruned {
            dry_run,
            ..Pruned::default()
        };
        let Some(_lock) = self.lock_existing()? else {
            return Ok(done);
        };
        let last = self.last_hashes();
        for (hash, path) in self.record_files()? {
            match judge(&path, &hash, &last, named) {
                Ok(record) => {
                    if !dry_run {
                        remove(&path)?;
                    }
                    done.removed.push(PrunedRecord {
                        hash,
                        path,
                        command: record.command,
                    });
                }
                Err(kept_because) => done.kept.push(KeptRecord {
                    hash,
                    path,
                    kept_because,
                }),
            }
        }
        Ok(done)
    }

    /// The files named as records (`<32 hex digits>.json`, regular files), sorted by hash.
    ///
    /// Errors: [`OpsError::Unsupported`] naming the folder that could not be listed.
    fn record_files(&self) -> Result<Vec<(String, PathBuf)>> {
        let entries = std::fs::read_dir(&self.root).map_err(|e| OpsError::Unsupported {
            message: format!("cannot list `{}`: {e}", self.root.display()),
            hint: None,
        })?;
        let mut files: Vec<(String, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let hash = name.strip_suffix(".json")?;
                let ours = hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit());
                let file = e.file_type().ok()?.is_file();
                (ours && file).then(|| (hash.to_string(), e.path()))
            })
            .collect();
        files.sort();
        Ok(files)
    }

    /// The store's lock (`<root>/environments/.lock`, flock(2), released on drop), taken
    /// around every change to the store, creating the folder; waits while another devcell
    /// holds it.
    ///
    /// Errors: [`OpsError::Unsupported`] naming the folder or lock file.
    fn lock(&self) -> Result<std::fs::File> {
        let workspaces = self.root.join("workspaces");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&workspaces)
            .map_err(|e| OpsError::Unsupported {
                message: format!("cannot create `{}`: {e}", workspaces.display()),
                hint: None,
            })?;
        let path = self.root.join(".lock");
        let failed = |e: std::io::Error| OpsError::Unsupported {
            message: format!("cannot lock `{}`: {e}", path.display()),
            hint: None,
        };
        crate::ops::state_folder::lock_file(&path).map_err(failed)
    }

    /// [`Self::lock`] when the store exists; `None` (nothing to guard) when it does not.
    ///
    /// Errors: as [`Self::lock`].
    fn lock_existing(&self) -> Result<Option<std::fs::File>> {
        if !self.root.is_dir() {
            return Ok(None);
        }
        self.lock().map(Some)
    }
}

/// The record at `path` (stored under `hash`) when [`EnvironmentStore::prune`] may remove it,
/// else why it is kept: it cannot be read, it is one of `last` (a workspace's last record) or
/// `named` (by a session), or it is too young.
fn judge(
    path: &Path,
    hash: &str,
    last: &BTreeSet<String>,
    named: &BTreeSet<String>,
) -> std::result::Result<EnvironmentRecord, String> {
    let record = read_record(path).map_err(|e| {
        format!("it cannot be read as an environment record of this devcell ({e}): look at it, then remove it")
    })?;
    if last.contains(hash) {
        return Err("it is a workspace's last record".into());
    }
    if named.contains(hash) {
        return Err("a handoff session names it".into());
    }
    if young(path) {
        return Err(format!(
            "it is younger than {} minutes: the command that wrote it may not have named it yet",
            PRUNE_MIN_AGE.as_secs() / 60
        ));
    }
    Ok(record)
}

/// Whether `path` was modified less than [`PRUNE_MIN_AGE`] ago (or its age is unknown).
fn young(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < PRUNE_MIN_AGE)
}

/// Removes one record file.
///
/// Errors: [`OpsError::Unsupported`] naming it.
fn remove(path: &Path) -> Result<()> {
    std::fs::remove_file(path).map_err(|e| OpsError::Unsupported {
        message: format!("cannot remove environment record `{}`: {e}", path.display()),
        hint: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::environment::fixtures::sample;

    #[test]
    fn the_store_keeps_each_record_by_hash_and_the_last_per_workspace() {
        let state = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let store = EnvironmentStore::new(state.path());
        assert_eq!(store.last(workspace.path()).unwrap(), None);
        let first = store.store(workspace.path(), &sample()).unwrap();
        let mut second = sample();
        second.command = "build".into();
        let hash = store.store(workspace.path(), &second).unwrap();
        assert_ne!(first, hash);
        assert_eq!(store.load(&first).unwrap(), sample());
        assert_eq!(store.last(workspace.path()).unwrap(), Some(second));
        assert!(store.load("../x").is_err());
    }

    #[test]
    fn forgetting_a_workspace_copies_its_sessions_records_and_keeps_what_others_name() {
        let state = tempfile::tempdir().unwrap();
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = EnvironmentStore::new(state.path());
        let shared = store.store(one.path(), &sample()).unwrap();
        store.store(two.path(), &sample()).unwrap();
        let mut own = sample();
        own.command = "handoff".into();
        let own_hash = store.store(one.path(), &own).unwrap();
        let mut named_elsewhere = sample();
        named_elsewhere.verify = vec!["false".into()];
        let elsewhere = store.store(one.path(), &named_elsewhere).unwrap();
        store.store(one.path(), &own).unwrap();
        let copy = state.path().join("logs/s1.environment.json");
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        let sessions = vec![
            (own_hash.clone(), copy.clone()),
            (
                shared.clone(),
                state.path().join("logs/s0.environment.json"),
            ),
            (
                elsewhere.clone(),
                state.path().join("logs/s2.environment.json"),
            ),
        ];
        let done = store
            .forget(one.path(), &sessions, &BTreeSet::from([elsewhere.clone()]))
            .unwrap();
        assert_eq!(read_record(&copy).unwrap(), own);
        assert_eq!(done.copies.len(), 3);
        assert_eq!(store.last(one.path()).unwrap(), None);
        assert!(
            store.load(&own_hash).is_err(),
            "only this workspace named it"
        );
        assert_eq!(
            store.load(&shared).unwrap(),
            sample(),
            "the other's last record"
        );
        assert!(
            store.load(&elsewhere).is_ok(),
            "another workspace's session names it"
        );
        assert_eq!(store.last(two.path()).unwrap(), Some(sample()));
        // a second forget has nothing left to do and keeps the copies
        let again = store
            .forget(one.path(), &sessions, &BTreeSet::new())
            .unwrap();
        assert!(again.copies.is_empty());
        assert_eq!(read_record(&copy).unwrap(), own);
    }

    /// Sets a file's modification time `ago` in the past.
    fn age(path: &Path, ago: std::time::Duration) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(std::time::SystemTime::now() - ago)
            .unwrap();
    }

    #[test]
    fn pruning_removes_only_old_records_no_workspace_or_session_names() {
        let state = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let store = EnvironmentStore::new(state.path());
        let variant = |verify: &str| {
            let mut r = sample();
            r.verify = vec![verify.into()];
            r
        };
        let old = store.store(workspace.path(), &variant("old")).unwrap();
        let in_session = store.store(workspace.path(), &variant("session")).unwrap();
        let young = store.store(workspace.path(), &variant("young")).unwrap();
        let last = store.store(workspace.path(), &variant("last")).unwrap();
        let hour = std::time::Duration::from_secs(3600);
        for hash in [&old, &in_session, &last] {
            age(&store.path_of(hash), hour);
        }
        // a record of another version, and a file that is not a record's: left alone
        let newer = store.root.join(format!("{}.json", "e".repeat(32)));
        std::fs::write(&newer, r#"{"schemaVersion": 2}"#).unwrap();
        age(&newer, hour);
        let other = store.root.join("notes.json");
        std::fs::write(&other, "{}").unwrap();
        let named = BTreeSet::from([in_session.clone()]);

        let dry = store.prune(&named, true).unwrap();
        assert!(dry.dry_run);
        let removed: Vec<&str> = dry.removed.iter().map(|r| r.hash.as_str()).collect();
        assert_eq!(removed, [old.as_str()]);
        assert_eq!(dry.removed[0].command, "up");
        let kept: Vec<(&str, &str)> = dry
            .kept
            .iter()
            .map(|k| (k.hash.as_str(), k.kept_because.as_str()))
            .collect();
        assert_eq!(kept.len(), 4, "{kept:?}");
        let because = |hash: &str| {
            kept.iter()
                .find(|(h, _)| *h == hash)
                .map(|(_, b)| b.to_string())
                .unwrap()
        };
        assert_eq!(because(&in_session), "a handoff session names it");
        assert!(because(&young).starts_with("it is younger than 10 minutes"));
        assert_eq!(because(&last), "it is a workspace's last record");
        let unreadable = because(&"e".repeat(32));
        assert!(
            unreadable.starts_with("it cannot be read") && unreadable.contains("schema version 2"),
            "{unreadable}"
        );
        assert!(store.path_of(&old).exists(), "a dry run removes nothing");

        let done = store.prune(&named, false).unwrap();
        assert_eq!(done.removed, dry.removed);
        assert!(!store.path_of(&old).exists());
        for hash in [&in_session, &young, &last] {
            assert!(store.path_of(hash).exists(), "{hash}");
        }
        assert!(newer.exists() && other.exists());
        assert_eq!(store.last(workspace.path()).unwrap(), Some(variant("last")));
        assert!(store.prune(&named, false).unwrap().removed.is_empty());
        // no store at all: nothing to do
        let empty = EnvironmentStore::new(state.path().join("none"));
        assert_eq!(empty.prune(&named, false).unwrap().removed, vec![]);
    }

    #[test]
    fn pruning_waits_for_the_stores_lock() {
        let state = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let store = EnvironmentStore::new(state.path());
        let old = store.store(workspace.path(), &sample()).unwrap();
        let mut newer = sample();
        newer.command = "build".into();
        store.store(workspace.path(), &newer).unwrap();
        age(&store.path_of(&old), std::time::Duration::from_secs(3600));
        let held = store.lock().unwrap();
        let (sender, finished) = std::sync::mpsc::channel();
        let pruner = store.clone();
        let thread = std::thread::spawn(move || {
            let done = pruner.prune(&BTreeSet::new(), false).unwrap();
            sender.send(()).unwrap();
            done
        });
        let waited = finished.recv_timeout(std::time::Duration::from_millis(300));
        assert!(
            waited.is_err(),
            "prune judged while another devcell held the lock"
        );
        assert!(store.path_of(&old).exists());
        drop(held);
        let done = thread.join().unwrap();
        assert_eq!(done.removed.len(), 1);
        assert!(!store.path_of(&old).exists());
    }
}
