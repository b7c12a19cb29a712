//! `devcontainer-lock.json` (spec devcontainer-lockfile.md; spec-distilled §5.7; spec-note 0044).
//!
//! Shape: `{"features": {"<reference as written, lowercased>": {"version": "x.y.z",
//! "resolved": "<registry>/<repository>@sha256:…" | "<https url>", "integrity": "sha256:…",
//! "dependsOn"?: ["<ref>", …]}}}`, keys sorted, 2-space indentation, trailing newline. Only OCI
//! and tarball Features are recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{FeatureError, Result};
use super::order::InstallPlan;
use super::reference::FeatureRef;

/// The lockfile name next to `.devcontainer/devcontainer.json`.
pub const LOCKFILE: &str = "devcontainer-lock.json";
/// The lockfile name next to a root `.devcontainer.json` (reference CLI).
pub const HIDDEN_LOCKFILE: &str = ".devcontainer-lock.json";

/// The lockfile path for a config file: `.devcontainer-lock.json` beside `.devcontainer.json`,
/// `devcontainer-lock.json` beside any other config file.
pub fn lockfile_path(config_file: &Path) -> PathBuf {
    let dir = config_file.parent().unwrap_or(Path::new("."));
    let hidden = config_file
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'));
    dir.join(if hidden { HIDDEN_LOCKFILE } else { LOCKFILE })
}

/// A parsed lockfile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lockfile {
    /// Lock key → locked Feature, sorted by key.
    #[serde(default)]
    pub features: BTreeMap<String, LockedFeature>,
}

/// One locked Feature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockedFeature {
    /// The Feature's own `version`.
    pub version: String,
    /// `<registry>/<repository>@sha256:<manifest digest>` (OCI) or the tarball URL.
    pub resolved: String,
    /// `sha256:<hex>`: the manifest digest (OCI) or the tarball's sha256.
    pub integrity: String,
    /// The Feature's `dependsOn` keys, lowercased (omitted when empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<String>>,
}

/// What was found at the lockfile path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockfileState {
    /// No file.
    Missing,
    /// An empty (or whitespace-only) file: "initialize me" (reference CLI).
    Empty,
    /// A parsed lockfile.
    Present(Lockfile),
}

impl LockfileState {
    /// The lockfile, if one with content exists.
    pub fn lockfile(&self) -> Option<&Lockfile> {
        match self {
            LockfileState::Present(l) => Some(l),
            _ => None,
        }
    }
}

/// What [`write()`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The file already had exactly this content.
    Unchanged,
    /// The file was created or replaced.
    Written,
}

/// Reads the lockfile at `path`.
///
/// Errors: [`FeatureError::Io`] when it exists but cannot be read; [`FeatureError::Lockfile`]
/// when it does not parse.
pub fn read(path: &Path) -> Result<LockfileState> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockfileState::Missing),
        Err(source) => {
            return Err(FeatureError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse(&text, path)
}

/// Parses lockfile text; `path` names it in errors.
///
/// Errors: [`FeatureError::Lockfile`] with line and column.
pub fn parse(text: &str, path: &Path) -> Result<LockfileState> {
    if text.trim().is_empty() {
        return Ok(LockfileState::Empty);
    }
    serde_json::from_str(text)
        .map(LockfileState::Present)
        .map_err(|e| FeatureError::Lockfile {
            path: path.to_path_buf(),
            message: format!("invalid JSON at {}:{}: {e}", e.line(), e.column()),
        })
}

impl Lockfile {
    /// Builds the lockfile for an install plan: one entry per OCI or tarball Feature whose
    /// canonical digest is known, keyed by the reference as written, lowercased.
    pub fn from_plan(plan: &InstallPlan) -> Lockfile {
        let mut features = BTreeMap::new();
        for f in &plan.features {
            let Some(integrity) = &f.canonical else {
                continue;
            };
            let resolved = match &f.reference {
                FeatureRef::Oci {
                    registry,
                    repository,
                    ..
                } => format!("{registry}/{repository}@{integrity}"),
                FeatureRef::Tarball { url, .. } => url.clone(),
                FeatureRef::Local { .. } => continue,
            };
            let deps: Vec<String> = f
                .depends_on
                .iter()
                .map(|d| d.to_ascii_lowercase())
                .collect();
            features.insert(
                f.reference.lock_key(),
                LockedFeature {
                    version: f.metadata.version.clone().unwrap_or_default(),
                    resolved,
                    integrity: integrity.clone(),
                    depends_on: (!deps.is_empty()).then_some(deps),
                },
            );
        }
        Lockfile { features }
    }

    /// The locked entry for a reference, if any.
    pub fn get(&self, reference: &FeatureRef) -> Option<&LockedFeature> {
        self.features.get(&reference.lock_key())
    }

    /// Checks a fetched digest against the locked integrity (checklist 60). References not
    /// in the lockfile pass.
    ///
    /// Errors: [`FeatureError::Lockfile`] naming the Feature, the locked and the found digest.
    pub fn verify(&self, path: &Path, reference: &FeatureRef, digest: &str) -> Result<()> {
        match self.get(reference) {
            Some(locked) if locked.integrity != digest => Err(FeatureError::Lockfile {
                path: path.to_path_buf(),
                message: format!(
                    "Feature `{}` is locked to `{}` but `{digest}` was fetched",
                    reference.lock_key(),
                    locked.integrity
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The lockfile text: pretty JSON (2 spaces), sorted keys, trailing newline.
    pub fn render(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into());
        text.push('\n');
        text
    }
}

/// Writes `lockfile` to `path` unless it already holds exactly that content.
///
/// With `frozen` (`--frozen-lockfile`) nothing is written: a missing file or a different
/// content is an error. The write is atomic (temporary file in the same folder, then rename).
///
/// Errors: [`FeatureError::Lockfile`] in frozen mode; [`FeatureError::Io`] on write failure.
pub fn write(path: &Path, lockfile: &Lockfile, frozen: bool) -> Result<WriteOutcome> {
    let text = lockfile.render();
    let existing = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(FeatureError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let same = match &existing {
        Some(t) => match parse(t, path) {
            Ok(LockfileState::Present(old)) => &old == lockfile,
            _ => false,
        },
        None => false,
    };
    if frozen {
        return match (&existing, same) {
            (None, _) => Err(FeatureError::Lockfile {
                path: path.to_path_buf(),
                message: "the lockfile does not exist and `--frozen-lockfile` forbids creating it"
                    .into(),
            }),
            (Some(_), false) => Err(FeatureError::Lockfile {
                path: path.to_path_buf(),
                message: "the resolved Features do not match the lockfile and `--frozen-lockfile` forbids changing it".into(),
            }),
            (Some(_), true) => Ok(WriteOutcome::Unchanged),
        };
    }
    if existing.as_deref() == Some(text.as_str()) {
        return Ok(WriteOutcome::Unchanged);
    }
    let io = |source| FeatureError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(WriteOutcome::Written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::metadata::FeatureMetadata;
    use crate::features::order::{PlannedFeature, ResolvedFeature};

    fn planned(key: &str, version: &str, canonical: Option<&str>, deps: &[&str]) -> PlannedFeature {
        let reference = FeatureRef::parse(key).unwrap();
        let r = ResolvedFeature {
            metadata: FeatureMetadata {
                id: reference.id().unwrap(),
                version: Some(version.into()),
                ..Default::default()
            },
            canonical: canonical.map(str::to_string),
        };
        PlannedFeature {
            key: key.into(),
            reference,
            value: serde_json::json!({}),
            user_options: Default::default(),
            options: Default::default(),
            metadata: r.metadata,
            canonical: r.canonical,
            from_user: true,
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn plan() -> InstallPlan {
        InstallPlan {
            features: vec![
                planned(
                    "GHCR.io/Devcontainers/Features/Node:1",
                    "1.6.1",
                    Some(&digest('a')),
                    &["GHCR.io/x/y/z:2"],
                ),
                planned(
                    "https://example.com/devcontainer-feature-t.tgz",
                    "0.1.0",
                    Some(&digest('b')),
                    &[],
                ),
                planned("./local", "1.0.0", None, &[]),
                planned("ghcr.io/x/y/z:2", "2.0.0", Some(&digest('c')), &[]),
            ],
            warnings: vec![],
        }
    }

    #[test]
    fn from_plan_records_oci_and_tarballs_only() {
        // checklist 61
        let l = Lockfile::from_plan(&plan());
        let keys: Vec<_> = l.features.keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "ghcr.io/devcontainers/features/node:1",
                "ghcr.io/x/y/z:2",
                "https://example.com/devcontainer-feature-t.tgz"
            ]
        );
        let node = &l.features["ghcr.io/devcontainers/features/node:1"];
        assert_eq!(
            node.resolved,
            format!("ghcr.io/devcontainers/features/node@{}", digest('a'))
        );
        assert_eq!(node.integrity, digest('a'));
        assert_eq!(node.version, "1.6.1");
        assert_eq!(
            node.depends_on.as_deref(),
            Some(&["ghcr.io/x/y/z:2".to_string()][..])
        );
        let t = &l.features["https://example.com/devcontainer-feature-t.tgz"];
        assert_eq!(t.resolved, "https://example.com/devcontainer-feature-t.tgz");
    }

    #[test]
    fn render_is_stable_sorted_with_trailing_newline() {
        let l = Lockfile::from_plan(&plan());
        let text = l.render();
        assert!(text.ends_with("}\n"));
        assert!(text.starts_with("{\n  \"features\": {\n    \"ghcr.io/devcontainers/features/node:1\": {\n      \"version\": \"1.6.1\",\n      \"resolved\""), "{text}");
        let LockfileState::Present(back) = parse(&text, Path::new("l")).unwrap() else {
            panic!()
        };
        assert_eq!(back, l);
        assert_eq!(back.render(), text);
        assert!(!text.contains("dependsOn\": null"));
    }

    #[test]
    fn verify_rejects_digest_mismatch() {
        // checklist 60
        let l = Lockfile::from_plan(&plan());
        let r = FeatureRef::parse("ghcr.io/devcontainers/features/node:1").unwrap();
        assert!(l.verify(Path::new("l"), &r, &digest('a')).is_ok());
        let e = l
            .verify(Path::new("l"), &r, &digest('f'))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is locked to"), "{e}");
        let other = FeatureRef::parse("ghcr.io/o/r/other").unwrap();
        assert!(l.verify(Path::new("l"), &other, &digest('f')).is_ok());
    }

    #[test]
    fn write_and_frozen_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCKFILE);
        let l = Lockfile::from_plan(&plan());
        assert!(
            write(&path, &l, true)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
        assert!(!path.exists());
        assert_eq!(write(&path, &l, false).unwrap(), WriteOutcome::Written);
        assert_eq!(write(&path, &l, false).unwrap(), WriteOutcome::Unchanged);
        assert_eq!(write(&path, &l, true).unwrap(), WriteOutcome::Unchanged);
        let mut changed = l.clone();
        changed.features.pop_first();
        let before = std::fs::read_to_string(&path).unwrap();
        assert!(
            write(&path, &changed, true)
                .unwrap_err()
                .to_string()
                .contains("do not match")
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
        assert_eq!(
            write(&path, &changed, false).unwrap(),
            WriteOutcome::Written
        );
        assert_eq!(read(&path).unwrap(), LockfileState::Present(changed));
    }

    #[test]
    fn empty_and_missing_and_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCKFILE);
        assert_eq!(read(&path).unwrap(), LockfileState::Missing);
        std::fs::write(&path, "  \n").unwrap();
        assert_eq!(read(&path).unwrap(), LockfileState::Empty);
        std::fs::write(&path, "{\n \"features\": 3}").unwrap();
        assert!(
            read(&path)
                .unwrap_err()
                .to_string()
                .contains("invalid JSON at 2:")
        );
    }

    #[test]
    fn lockfile_path_next_to_config() {
        assert_eq!(
            lockfile_path(Path::new("/w/.devcontainer/devcontainer.json")),
            Path::new("/w/.devcontainer/devcontainer-lock.json")
        );
        assert_eq!(
            lockfile_path(Path::new("/w/.devcontainer.json")),
            Path::new("/w/.devcontainer-lock.json")
        );
    }
}
