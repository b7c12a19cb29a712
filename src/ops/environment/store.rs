//! Records kept in devcell's state folder.

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
}
