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

/// Largest lockfile read (the repository's file: bounded, no FIFO or device; spec-note 0433).
const MAX_LOCKFILE_BYTES: u64 = crate::config::jsonc::MAX_FILE_BYTES as u64;

/// Reads the lockfile at `path`.
///
/// Errors: [`FeatureError::Io`] when it exists but cannot be read; [`FeatureError::Lockfile`]
/// when it does not parse.
pub fn read(path: &Path) -> Result<LockfileState> {
    let text = match crate::config::bounded::read_to_string(path, MAX_LOCKFILE_BYTES) {
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

/// How a command treats the lockfile (spec-note 0280).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LockfileMode {
    /// Honour it when present; write it after a successful resolution (`up`'s default, as the
    /// reference CLI's `up`/`build` since 0.87).
    #[default]
    Write,
    /// Honour it when present; never write it (`handoff`, `features resolve-dependencies`).
    ReadOnly,
    /// `--frozen-lockfile`: honour it; it must exist and equal the resolution; never written.
    Frozen,
    /// `--no-lockfile`: neither read nor written.
    Off,
}

impl LockfileMode {
    /// Whether the lockfile is read and honoured (every mode but [`LockfileMode::Off`]).
    pub fn reads(self) -> bool {
        self != LockfileMode::Off
    }
}

/// What [`write()`] / [`apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The file already had this content (compared after re-formatting it, as the reference
    /// CLI does: indentation and whitespace do not count).
    Unchanged,
    /// The file was created or replaced.
    Written,
    /// [`LockfileMode::ReadOnly`]: the file exists but differs from the resolution (or is empty);
    /// it was left as it is.
    Stale,
    /// Nothing was compared or written ([`LockfileMode::Off`], or [`LockfileMode::ReadOnly`]
    /// without a file).
    Skipped,
}

/// Reads the lockfile at `path` for `mode`: [`LockfileState::Missing`] without reading under
/// [`LockfileMode::Off`].
///
/// Errors: as [`read`].
pub fn read_for(path: &Path, mode: LockfileMode) -> Result<LockfileState> {
    if mode.reads() {
        read(path)
    } else {
        Ok(LockfileState::Missing)
    }
}

/// Writes (or checks) the lockfile after a resolution, as `mode` says: `Write` →
/// [`write()`]; `Frozen` → [`write()`] in frozen mode (errors when missing or different);
/// `ReadOnly` → compares only ([`WriteOutcome::Unchanged`], [`WriteOutcome::Stale`] or
/// [`WriteOutcome::Skipped`] when there is no file); `Off` → [`WriteOutcome::Skipped`].
///
/// Errors: as [`write()`].
pub fn apply(path: &Path, lockfile: &Lockfile, mode: LockfileMode) -> Result<WriteOutcome> {
    match mode {
        LockfileMode::Write => write(path, lockfile, false),
        LockfileMode::Frozen => write(path, lockfile, true),
        LockfileMode::Off => Ok(WriteOutcome::Skipped),
        LockfileMode::ReadOnly => {
            match decide(read_existing(path)?.as_deref(), lockfile, mode, path)? {
                Decision::Done(outcome) => Ok(outcome),
                Decision::Write(_) => Ok(WriteOutcome::Stale),
            }
        }
    }
}

fn read_existing(path: &Path) -> Result<Option<String>> {
    match crate::config::bounded::read_to_string(path, MAX_LOCKFILE_BYTES) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FeatureError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether the existing text holds `rendered` once re-formatted (parsed and pretty-printed
/// with its key order kept, as the reference CLI compares): an empty or invalid file differs.
fn same_content(existing: &str, rendered: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(existing)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .is_some_and(|mut t| {
            t.push('\n');
            t == rendered
        })
}

/// What differs between the existing lockfile text and the resolution, for the frozen error:
/// `` `key` locked to `A` but resolved to `B` ``, `` `key` is not in the lockfile ``,
/// `` `key` is locked but no longer used ``; a generic phrase when the file is empty or not a
/// lockfile.
fn differences(existing: &str, new: &Lockfile) -> String {
    let old = match parse(existing, Path::new("")) {
        Ok(LockfileState::Present(old)) => old,
        Ok(_) => return "the lockfile is empty".into(),
        Err(_) => return "the lockfile is not valid JSON".into(),
    };
    let mut out = Vec::new();
    for (key, entry) in &new.features {
        match old.features.get(key) {
            None => out.push(format!("`{key}` is not in the lockfile")),
            Some(o) if o.integrity != entry.integrity => out.push(format!(
                "`{key}` locked to `{}` but resolved to `{}`",
                o.integrity, entry.integrity
            )),
            Some(o) if o != entry => out.push(format!("`{key}` has different details")),
            Some(_) => {}
        }
    }
    for key in old.features.keys() {
        if !new.features.contains_key(key) {
            out.push(format!("`{key}` is locked but no longer used"));
        }
    }
    if out.is_empty() {
        "its key order or extra properties differ".into()
    } else {
        out.join("; ")
    }
}

/// What a write of the lockfile comes to, given the text the file holds now
/// ([`decide`]): an outcome already reached, or the text to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to write.
    Done(WriteOutcome),
    /// Write this text (the file is missing or differs).
    Write(String),
}

/// Decides what `mode` does with the lockfile whose current text is `existing` (`None`: no
/// file), without touching the file system, so the caller reads and writes it the way it
/// must (spec-note 0400: judged, no-follow, through the workspace's handle). `Write` writes
/// unless the content is already there (compared after re-formatting, as the reference CLI
/// does); `Frozen` never writes: a missing file is the reference's "lockfile does not exist",
/// a different (or empty) one its "lockfile does not match", naming what differs; `ReadOnly`
/// only compares; `Off` is [`WriteOutcome::Skipped`]. `path` names the file in errors.
///
/// Errors: [`FeatureError::Lockfile`] in frozen mode.
pub fn decide(
    existing: Option<&str>,
    lockfile: &Lockfile,
    mode: LockfileMode,
    path: &Path,
) -> Result<Decision> {
    let text = lockfile.render();
    let same = existing.is_some_and(|t| same_content(t, &text));
    Ok(Decision::Done(match mode {
        LockfileMode::Off => WriteOutcome::Skipped,
        LockfileMode::ReadOnly => match existing {
            None => WriteOutcome::Skipped,
            Some(_) if same => WriteOutcome::Unchanged,
            Some(_) => WriteOutcome::Stale,
        },
        LockfileMode::Frozen => match existing {
            None => {
                return Err(FeatureError::Frozen {
                    missing: true,
                    source: Box::new(FeatureError::Lockfile {
                        path: path.to_path_buf(),
                        message:
                            "lockfile does not exist, and `--frozen-lockfile` forbids creating it"
                                .into(),
                    }),
                });
            }
            Some(old) if !same => {
                return Err(FeatureError::Frozen {
                    missing: false,
                    source: Box::new(FeatureError::Lockfile {
                        path: path.to_path_buf(),
                        message: format!(
                            "lockfile does not match the resolved Features ({}), and `--frozen-lockfile` forbids changing it",
                            differences(old, lockfile)
                        ),
                    }),
                });
            }
            Some(_) => WriteOutcome::Unchanged,
        },
        LockfileMode::Write if same => WriteOutcome::Unchanged,
        LockfileMode::Write => return Ok(Decision::Write(text)),
    }))
}

/// Writes `lockfile` to `path` unless it already holds that content ([`decide`] with
/// `Write`, or `Frozen` when `frozen`), by path: a temporary file in the same folder, then a
/// rename. For files the user names; the repository's lockfile is written through the
/// workspace's handle instead (`handoff`, spec-note 0400).
///
/// Errors: [`FeatureError::Lockfile`] in frozen mode; [`FeatureError::Io`] on write failure.
pub fn write(path: &Path, lockfile: &Lockfile, frozen: bool) -> Result<WriteOutcome> {
    let existing = read_existing(path)?;
    let mode = if frozen {
        LockfileMode::Frozen
    } else {
        LockfileMode::Write
    };
    let text = match decide(existing.as_deref(), lockfile, mode, path)? {
        Decision::Done(outcome) => return Ok(outcome),
        Decision::Write(text) => text,
    };
    let io = |source| FeatureError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(io)?;
    // A replaced file keeps its mode; a new one gets the usual 0644 (not the temporary 0600).
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions())
        .unwrap_or_else(|_| std::os::unix::fs::PermissionsExt::from_mode(0o644));
    tmp.as_file().set_permissions(mode).map_err(io)?;
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

    /// An error and its causes, as `caused by:` lines show them.
    fn chain(e: &FeatureError) -> String {
        std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source())
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(": ")
    }

    #[test]
    fn decide_touches_nothing_and_follows_the_mode() {
        let l = Lockfile::from_plan(&plan());
        let text = l.render();
        let p = Path::new("lock.json");
        let write = |existing: Option<&str>, mode| decide(existing, &l, mode, p).unwrap();
        assert_eq!(
            write(None, LockfileMode::Write),
            Decision::Write(text.clone())
        );
        assert_eq!(
            write(Some("{}"), LockfileMode::Write),
            Decision::Write(text.clone())
        );
        assert_eq!(
            write(Some(&text), LockfileMode::Write),
            Decision::Done(WriteOutcome::Unchanged)
        );
        assert_eq!(
            write(Some("{}"), LockfileMode::ReadOnly),
            Decision::Done(WriteOutcome::Stale)
        );
        assert_eq!(
            write(None, LockfileMode::ReadOnly),
            Decision::Done(WriteOutcome::Skipped)
        );
        assert_eq!(
            write(Some("{}"), LockfileMode::Off),
            Decision::Done(WriteOutcome::Skipped)
        );
        // the reference CLI's message, devcell's detail as its cause
        let e = decide(None, &l, LockfileMode::Frozen, p).unwrap_err();
        assert_eq!(e.to_string(), "Lockfile does not exist.");
        assert!(chain(&e).contains("lockfile `lock.json`: lockfile does not exist"));
        let e = decide(Some("{}"), &l, LockfileMode::Frozen, p).unwrap_err();
        assert_eq!(e.to_string(), "Lockfile does not match.");
        assert!(
            chain(&e).contains("does not match the resolved Features"),
            "{e}"
        );
    }

    #[test]
    fn write_and_frozen_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCKFILE);
        let l = Lockfile::from_plan(&plan());
        assert!(chain(&write(&path, &l, true).unwrap_err()).contains("lockfile does not exist"));
        assert!(!path.exists());
        assert_eq!(write(&path, &l, false).unwrap(), WriteOutcome::Written);
        assert_eq!(write(&path, &l, false).unwrap(), WriteOutcome::Unchanged);
        assert_eq!(write(&path, &l, true).unwrap(), WriteOutcome::Unchanged);
        let mut changed = l.clone();
        changed.features.pop_first();
        let before = std::fs::read_to_string(&path).unwrap();
        let e = chain(&write(&path, &changed, true).unwrap_err());
        assert!(e.contains("lockfile does not match"), "{e}");
        assert!(
            e.contains("`ghcr.io/devcontainers/features/node:1` is locked but no longer used"),
            "{e}"
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
    fn new_files_are_0644_and_replaced_files_keep_their_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCKFILE);
        let l = Lockfile::from_plan(&plan());
        write(&path, &l, false).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o644);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        let mut changed = l.clone();
        changed.features.pop_first();
        assert_eq!(
            write(&path, &changed, false).unwrap(),
            WriteOutcome::Written
        );
        assert_eq!(mode(&path), 0o664);
    }

    #[test]
    fn comparison_ignores_formatting_but_not_key_order_or_extra_properties() {
        // As the reference CLI: the old file is parsed and pretty-printed before comparing.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCKFILE);
        let l = Lockfile::from_plan(&plan());
        let compact = serde_json::to_string(&l).unwrap();
        std::fs::write(&path, &compact).unwrap();
        assert_eq!(write(&path, &l, true).unwrap(), WriteOutcome::Unchanged);
        assert_eq!(write(&path, &l, false).unwrap(), WriteOutcome::Unchanged);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            compact,
            "not rewritten"
        );
        // Another key order is another text: frozen refuses, a write normalises.
        let mut value: serde_json::Value = serde_json::from_str(&compact).unwrap();
        let features = value["features"].as_object_mut().unwrap();
        let first = features.keys().next().unwrap().clone();
        let entry = features.shift_remove(&first).unwrap();
        features.insert(first, entry);
        std::fs::write(&path, value.to_string()).unwrap();
        let e = chain(&write(&path, &l, true).unwrap_err());
        assert!(e.contains("key order or extra properties differ"), "{e}");
        assert_eq!(write(&path, &l, false).unwrap(), WriteOutcome::Written);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), l.render());
        // An empty file ("initialise") does not match in frozen mode and is written otherwise.
        std::fs::write(&path, "").unwrap();
        let e = chain(&write(&path, &l, true).unwrap_err());
        assert!(
            e.contains("does not match the resolved Features (the lockfile is empty)"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        assert_eq!(write(&path, &l, false).unwrap(), WriteOutcome::Written);
    }

    #[test]
    fn frozen_error_names_changed_and_new_features() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCKFILE);
        let l = Lockfile::from_plan(&plan());
        write(&path, &l, false).unwrap();
        let mut changed = l.clone();
        let node = "ghcr.io/devcontainers/features/node:1";
        changed.features.get_mut(node).unwrap().integrity = digest('d');
        let mut extra = changed.features[node].clone();
        extra.integrity = digest('e');
        changed.features.insert("ghcr.io/o/r/new:1".into(), extra);
        let e = chain(&write(&path, &changed, true).unwrap_err());
        assert!(
            e.contains(&format!(
                "`{node}` locked to `{}` but resolved to `{}`",
                digest('a'),
                digest('d')
            )),
            "{e}"
        );
        assert!(
            e.contains("`ghcr.io/o/r/new:1` is not in the lockfile"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), l.render());
    }

    #[test]
    fn apply_follows_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCKFILE);
        let l = Lockfile::from_plan(&plan());
        for mode in [LockfileMode::Off, LockfileMode::ReadOnly] {
            assert_eq!(apply(&path, &l, mode).unwrap(), WriteOutcome::Skipped);
            assert!(!path.exists(), "{mode:?} wrote");
        }
        assert!(apply(&path, &l, LockfileMode::Frozen).is_err());
        assert!(!path.exists());
        assert_eq!(
            apply(&path, &l, LockfileMode::Write).unwrap(),
            WriteOutcome::Written
        );
        for mode in [
            LockfileMode::ReadOnly,
            LockfileMode::Frozen,
            LockfileMode::Write,
        ] {
            assert_eq!(apply(&path, &l, mode).unwrap(), WriteOutcome::Unchanged);
        }
        let mut changed = l.clone();
        changed.features.pop_first();
        assert_eq!(
            apply(&path, &changed, LockfileMode::ReadOnly).unwrap(),
            WriteOutcome::Stale
        );
        assert_eq!(
            apply(&path, &changed, LockfileMode::Off).unwrap(),
            WriteOutcome::Skipped
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), l.render());
        assert_eq!(
            read_for(&path, LockfileMode::Off).unwrap(),
            LockfileState::Missing
        );
        assert!(
            read_for(&path, LockfileMode::ReadOnly)
                .unwrap()
                .lockfile()
                .is_some()
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
