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
        let workspaces = self.root.join("workspaces");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&workspaces)
            .map_err(|e| OpsError::Unsupported {
                message: format!("cannot create `{}`: {e}", workspaces.display()),
                hint: None,
            })?;
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
}
