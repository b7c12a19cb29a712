//! Local Features (`./name`): folders next to the active devcontainer.json, inside the
//! project's `.devcontainer/` folder (spec-distilled §4.3, §5.5; spec-note 0040).

use std::path::{Path, PathBuf};

use super::error::{FeatureError, Result};
use super::metadata::FeatureMetadata;
use super::order::ResolvedFeature;
use super::reference::FeatureRef;

/// Where local Feature references are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalFeatureRoot {
    /// The folder containing the active devcontainer.json (references are relative to it).
    pub config_dir: PathBuf,
    /// `<workspace>/.devcontainer`: every local Feature must be inside it.
    pub devcontainer_dir: PathBuf,
}

impl LocalFeatureRoot {
    /// The root for a config file in a workspace folder.
    pub fn new(workspace_folder: &Path, config_file: &Path) -> LocalFeatureRoot {
        LocalFeatureRoot {
            config_dir: config_file
                .parent()
                .unwrap_or(workspace_folder)
                .to_path_buf(),
            devcontainer_dir: workspace_folder.join(".devcontainer"),
        }
    }

    /// Reads the metadata of a local Feature (`canonical` is `None`: local Features have no
    /// digest).
    ///
    /// Errors: [`FeatureError::InvalidReference`] for non-local or escaping references;
    /// [`FeatureError::Io`] / [`FeatureError::InvalidMetadata`] for the metadata file; a
    /// [`FeatureError::InvalidMetadata`] when the `id` differs from the folder name (a warning
    /// would hide a broken collection; the spec requires them equal).
    pub fn resolve(&self, reference: &FeatureRef) -> Result<ResolvedFeature> {
        let dir = reference.local_dir(&self.config_dir, &self.devcontainer_dir)?;
        // A missing folder is a wrong key in `features`, not an I/O failure: say which key.
        let file = dir.join(super::metadata::FEATURE_FILE);
        if !file.exists() {
            let what = if dir.is_dir() {
                format!(
                    "the folder `{}` has no `{}`",
                    dir.display(),
                    super::metadata::FEATURE_FILE
                )
            } else {
                format!("there is no folder `{}`", dir.display())
            };
            return Err(FeatureError::InvalidReference {
                reference: reference.to_string(),
                message: what,
                hint: Some(format!(
                    "a local Feature is a folder beside `devcontainer.json` (in `{}`) holding `{}` and `install.sh`; the key names it relative to `devcontainer.json`, e.g. `./my-feature`",
                    self.devcontainer_dir.display(),
                    super::metadata::FEATURE_FILE
                )),
            });
        }
        let metadata = FeatureMetadata::read_dir(&dir)?;
        // the folder as the reference names it (`dir` is where it resolves to)
        if let Some(folder) = reference.id()
            && folder != metadata.id
        {
            return Err(FeatureError::InvalidMetadata {
                file: dir.join(super::metadata::FEATURE_FILE),
                line: 0,
                column: 0,
                message: format!(
                    "`id` is `{}` but the Feature folder is named `{folder}`; they must be equal",
                    metadata.id
                ),
            });
        }
        Ok(ResolvedFeature {
            metadata: metadata.with_legacy_vscode_moved(),
            canonical: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_local_metadata_and_checks_the_id() {
        let ws = tempfile::tempdir().unwrap();
        let dc = ws.path().join(".devcontainer");
        std::fs::create_dir_all(dc.join("good")).unwrap();
        std::fs::create_dir_all(dc.join("bad")).unwrap();
        std::fs::write(
            dc.join("good/devcontainer-feature.json"),
            r#"{"id": "good"}"#,
        )
        .unwrap();
        std::fs::write(
            dc.join("bad/devcontainer-feature.json"),
            r#"{"id": "other"}"#,
        )
        .unwrap();
        let root = LocalFeatureRoot::new(ws.path(), &dc.join("devcontainer.json"));
        let r = root.resolve(&FeatureRef::parse("./good").unwrap()).unwrap();
        assert_eq!(r.metadata.id, "good");
        assert_eq!(r.canonical, None);
        let e = root
            .resolve(&FeatureRef::parse("./bad").unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("folder is named `bad`"), "{e}");
        let e = root
            .resolve(&FeatureRef::parse("./missing").unwrap())
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid Feature reference `./missing`: there is no folder `"),
            "{e}"
        );
        let hint = crate::diagnostics::Hint::hint(&e).unwrap_or_default();
        assert!(hint.contains("a local Feature is a folder"), "{hint}");
        std::fs::create_dir_all(dc.join("empty")).unwrap();
        let e = root
            .resolve(&FeatureRef::parse("./empty").unwrap())
            .unwrap_err();
        assert!(
            e.to_string().contains("has no `devcontainer-feature.json`"),
            "{e}"
        );
    }
}
