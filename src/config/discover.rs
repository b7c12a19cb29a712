//! Where `devcontainer.json` files live
//! ([spec: devcontainer.json location](https://containers.dev/implementors/spec/#devcontainerjson)).
//!
//! Search order inside the workspace folder: `.devcontainer/devcontainer.json`, then
//! `.devcontainer.json`. Configs one level below `.devcontainer/`
//! (`.devcontainer/<name>/devcontainer.json`) are listed, never picked automatically, and are
//! chosen with `--config` (what the reference CLI does). Deeper files are not configs.
//! See `spec-notes/0003-config-discovery.md`.

use std::path::{Path, PathBuf};

use crate::config::error::{ConfigError, Result};

/// The two default locations, in search order, for `workspace_folder`.
pub fn default_locations(workspace_folder: &Path) -> [PathBuf; 2] {
    [
        workspace_folder
            .join(".devcontainer")
            .join("devcontainer.json"),
        workspace_folder.join(".devcontainer.json"),
    ]
}

/// Every config of `workspace_folder`: the default locations that exist, in search order,
/// then `.devcontainer/<name>/devcontainer.json` files sorted by `<name>`.
///
/// Unreadable directories are treated as empty (this is a listing, not a check).
pub fn list(workspace_folder: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = default_locations(workspace_folder)
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    out.extend(subfolder_configs(workspace_folder));
    out
}

/// `.devcontainer/<name>/devcontainer.json` files (exactly one level deep), sorted.
pub fn subfolder_configs(workspace_folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(workspace_folder.join(".devcontainer")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("devcontainer.json"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// Picks the config for a workspace: `config` when given (made absolute against the current
/// directory), else the first default location that exists.
///
/// Errors: [`ConfigError::ConfigMissing`] when `config` does not exist;
/// [`ConfigError::NotFound`] (listing the paths tried and any sub-folder configs) when no
/// default location exists.
pub fn discover(workspace_folder: &Path, config: Option<&Path>) -> Result<PathBuf> {
    if let Some(config) = config {
        let path = std::path::absolute(config).unwrap_or_else(|_| config.to_owned());
        if !path.is_file() {
            return Err(ConfigError::ConfigMissing {
                path,
                relative: config.is_relative(),
            });
        }
        return Ok(path);
    }
    let searched = default_locations(workspace_folder);
    if let Some(found) = searched.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    Err(ConfigError::NotFound {
        workspace_folder: workspace_folder.to_owned(),
        searched: searched.to_vec(),
        candidates: subfolder_configs(workspace_folder),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "{}").unwrap();
    }

    #[test]
    fn discover_prefers_devcontainer_folder_over_root_file() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), ".devcontainer.json");
        touch(t.path(), ".devcontainer/devcontainer.json");
        let got = discover(t.path(), None).unwrap();
        assert_eq!(got, t.path().join(".devcontainer/devcontainer.json"));
    }

    #[test]
    fn discover_falls_back_to_root_file() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), ".devcontainer.json");
        assert_eq!(
            discover(t.path(), None).unwrap(),
            t.path().join(".devcontainer.json")
        );
    }

    #[test]
    fn list_includes_one_level_subfolders_only() {
        let t = tempfile::tempdir().unwrap();
        touch(t.path(), ".devcontainer/b/devcontainer.json");
        touch(t.path(), ".devcontainer/a/devcontainer.json");
        touch(t.path(), ".devcontainer/a/deeper/devcontainer.json");
        let got = list(t.path());
        assert_eq!(
            got,
            [
                t.path().join(".devcontainer/a/devcontainer.json"),
                t.path().join(".devcontainer/b/devcontainer.json")
            ]
        );
        match discover(t.path(), None) {
            Err(ConfigError::NotFound { candidates, .. }) => assert_eq!(candidates, got),
            other => panic!("{other:?}"),
        }
    }
}
