//! `outdated` and `upgrade`: the versions of a configuration's OCI Features and a regenerated
//! `devcontainer-lock.json`, as `devcontainer outdated` / `devcontainer upgrade` (refcli §1;
//! spec devcontainer-lockfile.md; spec-notes/0221).
//!
//! `outdated` output (`--output-format json`):
//! `{"features": {"<reference as written>": {"current", "wanted", "wantedMajor", "latest",
//! "latestMajor"}}}` — versions are strings, absent ones omitted; Features in config order;
//! only OCI Features (local and tarball ones cannot be versioned). Text: a table
//! `Feature  Current  Wanted  Latest` with `-` for unknown values.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;

use crate::config::model;
use crate::diagnostics::Warning;
use crate::features::FeatureError;
use crate::features::fetch::{FeatureSource, FetchFlags, Fetcher, PlanRequest};
use crate::features::local::LocalFeatureRoot;
use crate::features::lockfile::{self, Lockfile};
use crate::features::reference::{FeatureRef, OciVersion};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::{ValidatedConfig, read_validated};
use crate::ops::lockfile_io::LockfileAt;
use crate::progress::{Event, NoopReporter, Reporter};

/// Inputs of [`outdated`] and [`upgrade`].
#[derive(Debug, Clone, Default)]
pub struct OutdatedOptions {
    /// `--workspace-folder` (the cli defaults it to the current directory).
    pub workspace_folder: PathBuf,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// Cache folder for Feature artifacts (default `$XDG_CACHE_HOME/devcell`).
    pub cache_dir: Option<PathBuf>,
    /// The user's `[registries]` settings (mirrors, insecure registries, CA certificates).
    pub registries: crate::settings::RegistrySettings,
}

/// The versions of one OCI Feature. `None` = unknown (omitted in JSON, `-` in text).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureVersions {
    /// The locked version, else [`Self::wanted`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The newest published version the reference allows (`:1` → newest `1.x.y`, `:1.2` →
    /// newest `1.2.y`, `:latest` → newest); for a digest pin, the locked version or the
    /// pinned artifact's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wanted: Option<String>,
    /// The major of [`Self::wanted`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wanted_major: Option<String>,
    /// The newest published version (strict `x.y.z` tags only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest: Option<String>,
    /// The major of [`Self::latest`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_major: Option<String>,
}

/// The result of [`outdated`].
#[derive(Debug, Clone, Default)]
pub struct Outdated {
    /// Feature reference as written → versions, in config order.
    pub features: IndexMap<String, FeatureVersions>,
    /// Non-fatal findings (config warnings).
    pub warnings: Vec<Warning>,
}

impl Outdated {
    /// The `--output-format json` document.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "features": serde_json::to_value(&self.features).unwrap_or_default() })
    }

    /// The text table (as npm `text-table`: columns left-aligned, two spaces apart, trailing
    /// spaces trimmed), rows `Feature Current Wanted Latest`, the Feature without its version.
    pub fn to_text(&self) -> String {
        let mut rows: Vec<[String; 4]> = vec![[
            "Feature".into(),
            "Current".into(),
            "Wanted".into(),
            "Latest".into(),
        ]];
        for (key, v) in &self.features {
            let cell = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
            rows.push([
                feature_id_without_version(key).to_owned(),
                cell(&v.current),
                cell(&v.wanted),
                cell(&v.latest),
            ]);
        }
        let widths: Vec<usize> = (0..4)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        rows.iter()
            .map(|r| {
                let line: Vec<String> = r
                    .iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c:<w$}"))
                    .collect();
                line.join("  ").trim_end().to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A Feature reference without its `:tag` / `@digest` (the reference's `lastDelimiter`:
/// the last `:` or `@` not followed by a `/`).
pub fn feature_id_without_version(key: &str) -> &str {
    let cut = key
        .char_indices()
        .filter(|&(_, c)| c == ':' || c == '@')
        .map(|(i, _)| i)
        .find(|&i| !key[i..].contains('/'));
    match cut {
        Some(i) => &key[..i],
        None => key,
    }
}

/// Strict semantic versions among `tags`, newest first.
pub fn versions_newest_first(tags: &[String]) -> Vec<semver::Version> {
    let mut versions: Vec<semver::Version> = tags
        .iter()
        .filter_map(|t| semver::Version::parse(t).ok())
        .collect();
    versions.sort();
    versions.dedup();
    versions.reverse();
    versions
}

/// Whether `version` matches a partial version tag (`1`, `1.2`, `1.2.3`) the way
/// `semver.satisfies(version, tag)` does in the reference: equal in each given part, and no
/// pre-release (except an exact `x.y.z-pre` tag).
pub fn satisfies(version: &semver::Version, tag: &str) -> bool {
    if let Ok(exact) = semver::Version::parse(tag) {
        return &exact == version;
    }
    if !version.pre.is_empty() {
        return false;
    }
    let parts: Vec<&str> = tag.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return false;
    }
    let have = [version.major, version.minor, version.patch];
    parts
        .iter()
        .zip(have)
        .all(|(p, h)| matches!(*p, "x" | "X" | "*") || p.parse::<u64>().is_ok_and(|n| n == h))
}

/// What `wanted` is for a tag: `latest` → newest, else newest satisfying it.
fn wanted_for_tag(versions: &[semver::Version], tag: &str) -> Option<semver::Version> {
    if tag == "latest" {
        versions.first().cloned()
    } else {
        versions.iter().find(|v| satisfies(v, tag)).cloned()
    }
}

struct Loaded {
    workspace_folder: PathBuf,
    config_file: PathBuf,
    config: model::DevContainerConfig,
    warnings: Vec<Warning>,
    /// Its lockfile, judged as the configuration was (spec-note 0400).
    lock: LockfileAt,
}

fn load(opts: &OutdatedOptions) -> Result<Loaded> {
    let ValidatedConfig {
        workspace_folder,
        config_file,
        config,
        warnings,
        confined,
        ..
    } = read_validated(&opts.workspace_folder, opts.config.as_deref())?;
    Ok(Loaded {
        lock: LockfileAt::new(&config_file, &workspace_folder, confined.as_ref()),
        workspace_folder,
        config_file,
        config,
        warnings,
    })
}

fn fetcher(opts: &OutdatedOptions, reporter: Arc<dyn Reporter>) -> Result<Fetcher> {
    let flags = FetchFlags {
        cache_dir: opts.cache_dir.clone(),
        offline: false,
        // Tags move: always ask the registry.
        refresh_tags: true,
        // a command the user points at a configuration to ask its registries
        allowed_hosts: None,
    };
    Fetcher::for_operation(&opts.registries, flags)
        .map_err(|e| {
            OpsError::Feature(FeatureError::Resolve {
                feature: "*".into(),
                source: Box::new(e),
            })
        })
        .map(|f| f.with_reporter(reporter))
}

/// Current, wanted and latest versions of the configuration's OCI Features (`devcontainer
/// outdated`): tags listed from the registry, current from `devcontainer-lock.json`.
///
/// Errors: [`OpsError::WorkspaceFolder`], [`OpsError::Config`] as for
/// `read-configuration`; [`OpsError::Feature`] for an unreadable lockfile, or a registry
/// that cannot be reached or refuses to list tags (naming the Feature).
pub async fn outdated(opts: &OutdatedOptions) -> Result<Outdated> {
    outdated_with(opts, Arc::new(NoopReporter)).await
}

/// As [`outdated`], sending progress (`listing tags of …`, `pulling …` status lines) to
/// `reporter`.
///
/// Errors: as [`outdated`].
pub async fn outdated_with(
    opts: &OutdatedOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<Outdated> {
    let loaded = load(opts)?;
    let lock = loaded.lock.read(lockfile::LockfileMode::Write)?;
    let fetcher = fetcher(opts, reporter.clone())?;
    let mut features = IndexMap::new();
    for key in loaded.config.features.keys() {
        // References that cannot be versioned (local, tarball, invalid) are left out.
        let Ok(reference @ FeatureRef::Oci { .. }) = FeatureRef::parse(key) else {
            continue;
        };
        let FeatureRef::Oci {
            registry,
            repository,
            version,
            ..
        } = &reference
        else {
            continue;
        };
        let resolve_err = |e: Box<dyn std::error::Error + Send + Sync>| {
            OpsError::Feature(FeatureError::Resolve {
                feature: key.clone(),
                source: e,
            })
        };
        let repo = crate::oci::registry::parse_reference(&format!("{registry}/{repository}"))
            .map_err(|e| resolve_err(Box::new(e)))?;
        reporter.report(Event::Status(format!("listing tags of {}", repo.whole())));
        let tags = fetcher
            .registry()
            .list_tags(&repo)
            .await
            .map_err(|e| resolve_err(Box::new(e)))?;
        let versions = versions_newest_first(&tags);
        let locked = lock
            .lockfile()
            .and_then(|l| l.get(&reference))
            .map(|l| l.version.clone());
        let wanted = match version {
            OciVersion::Tag(tag) => wanted_for_tag(&versions, tag).map(|v| v.to_string()),
            OciVersion::Digest(_) => match &locked {
                Some(v) => Some(v.clone()),
                None => {
                    let source = FeatureSource::from_ref(
                        &reference,
                        &loaded.workspace_folder,
                        &loaded.workspace_folder,
                    )?;
                    let resolved = fetcher
                        .resolve(&source)
                        .await
                        .map_err(|e| resolve_err(Box::new(e)))?;
                    resolved.version().map(str::to_owned)
                }
            },
        };
        let major = |v: &Option<String>| {
            v.as_deref()
                .and_then(|v| semver::Version::parse(v).ok())
                .map(|v| v.major.to_string())
        };
        let latest = versions.first().map(ToString::to_string);
        features.insert(
            key.clone(),
            FeatureVersions {
                current: locked.or_else(|| wanted.clone()),
                wanted_major: major(&wanted),
                wanted,
                latest_major: major(&latest),
                latest,
            },
        );
    }
    Ok(Outdated {
        features,
        warnings: loaded.warnings,
    })
}

/// Inputs of [`upgrade`] beyond [`OutdatedOptions`].
#[derive(Debug, Clone, Default)]
pub struct UpgradeOptions {
    /// Workspace, config and cache.
    pub base: OutdatedOptions,
    /// `--dry-run`: return the lockfile text, write nothing (devcontainer.json included).
    pub dry_run: bool,
    /// Hidden `--feature` + `--target-version` (Dependabot): re-pin the Feature whose
    /// reference without version equals this one's to `<reference>:<target_version>` in
    /// devcontainer.json before regenerating the lockfile.
    pub pin: Option<(String, String)>,
}

/// Whether `version` is a valid `--target-version`: `x`, `x.y` or `x.y.z` (digits).
pub fn is_target_version(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    (1..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The config text with every JSON string `"<current>"` replaced by `"<updated>"` (the
/// reference replaces the bare text everywhere, as a regular expression; devcell only replaces
/// whole quoted strings, see spec-notes/0221).
pub fn repin_in_text(text: &str, current: &str, updated: &str) -> String {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""));
    text.replace(&quoted(current), &quoted(updated))
}

/// The result of [`upgrade`].
#[derive(Debug, Clone)]
pub struct Upgrade {
    /// The regenerated lockfile.
    pub lockfile: Lockfile,
    /// Its text (pretty JSON, 2 spaces, trailing newline), as written or to print.
    pub text: String,
    /// Where it belongs (written unless dry-run).
    pub path: PathBuf,
    /// Whether the file was written (`false` for a dry run or unchanged content).
    pub written: bool,
    /// The devcontainer.json rewritten for `--feature`/`--target-version`, if it changed.
    pub config_updated: Option<PathBuf>,
    /// Non-fatal findings.
    pub warnings: Vec<Warning>,
}

/// Regenerates `devcontainer-lock.json` with the newest versions the configuration's Feature
/// references allow (`devcontainer upgrade`): every Feature (and `dependsOn`) is resolved
/// afresh, ignoring the existing lockfile and cached tag resolutions. The file is replaced
/// atomically; with `dry_run` nothing is written.
///
/// Errors: as [`outdated`]; [`OpsError::Feature`] for references that cannot be resolved
/// or a lockfile that cannot be written.
pub async fn upgrade(opts: &UpgradeOptions) -> Result<Upgrade> {
    upgrade_with(opts, Arc::new(NoopReporter)).await
}

/// As [`upgrade`], sending fetch progress (`pulling …` status lines) to `reporter`.
///
/// Errors: as [`upgrade`].
pub async fn upgrade_with(opts: &UpgradeOptions, reporter: Arc<dyn Reporter>) -> Result<Upgrade> {
    let mut loaded = load(&opts.base)?;
    let mut config_updated = None;
    if let Some((feature, version)) = &opts.pin {
        if !is_target_version(version) {
            return Err(OpsError::Feature(FeatureError::InvalidReference {
                reference: feature.clone(),
                message: format!(
                    "invalid version `{version}`: must be in the form of `x`, `x.y`, or `x.y.z`"
                ),
                hint: None,
            }));
        }
        let target = feature_id_without_version(feature);
        let current = loaded
            .config
            .features
            .keys()
            .find(|k| feature_id_without_version(k) == target)
            .cloned();
        if let Some(current) = current {
            let updated = format!("{target}:{version}");
            if let Some(value) = loaded.config.features.shift_remove(&current) {
                loaded.config.features.insert(updated.clone(), value);
            }
            if !opts.dry_run {
                let io = |source| {
                    OpsError::Feature(FeatureError::Io {
                        path: loaded.config_file.clone(),
                        source,
                    })
                };
                let text = crate::config::bounded::read_to_string(
                    &loaded.config_file,
                    crate::config::jsonc::MAX_FILE_BYTES as u64,
                )
                .map_err(io)?;
                let new_text = repin_in_text(&text, &current, &updated);
                if new_text != text {
                    let dir = loaded.config_file.parent().unwrap_or(Path::new("."));
                    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
                    std::io::Write::write_all(&mut tmp, new_text.as_bytes()).map_err(io)?;
                    tmp.persist(&loaded.config_file).map_err(|e| io(e.error))?;
                    config_updated = Some(loaded.config_file.clone());
                }
            }
        }
    }
    let features: IndexMap<String, Value> = loaded
        .config
        .features
        .iter()
        .map(|(k, v)| {
            let v = match v {
                model::FeatureValue::Version(s) => Value::String(s.clone()),
                model::FeatureValue::Enabled(b) => Value::Bool(*b),
                model::FeatureValue::Options(m) => Value::Object(m.clone()),
            };
            (k.clone(), v)
        })
        .collect();
    let override_order = loaded
        .config
        .override_feature_install_order
        .clone()
        .unwrap_or_default();
    let local = LocalFeatureRoot::new(&loaded.workspace_folder, &loaded.config_file);
    let fetcher = fetcher(&opts.base, reporter)?;
    let request = PlanRequest {
        features: &features,
        override_order: &override_order,
        config_dir: &local.config_dir,
        devcontainer_dir: &local.devcontainer_dir,
        lockfile: None,
    };
    let plan = fetcher.plan(&request).await?;
    let mut warnings = loaded.warnings;
    warnings.extend(plan.install.warnings.iter().cloned());
    let lock = plan.lockfile();
    let path = loaded.lock.path.clone();
    let text = lock.render();
    let written = if opts.dry_run {
        false
    } else {
        loaded.lock.apply(&lock, lockfile::LockfileMode::Write)? == lockfile::WriteOutcome::Written
    };
    Ok(Upgrade {
        lockfile: lock,
        text,
        path,
        written,
        config_updated,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> semver::Version {
        semver::Version::parse(s).unwrap()
    }

    #[test]
    fn id_without_version() {
        assert_eq!(
            feature_id_without_version("ghcr.io/o/f/node:1"),
            "ghcr.io/o/f/node"
        );
        assert_eq!(
            feature_id_without_version("localhost:5000/o/node@sha256:ab"),
            "localhost:5000/o/node"
        );
        assert_eq!(
            feature_id_without_version("localhost:5000/o/node"),
            "localhost:5000/o/node"
        );
    }

    #[test]
    fn versions_sort_and_filter_strictly() {
        let tags: Vec<String> = [
            "1",
            "1.2",
            "1.2.3",
            "latest",
            "1.10.0",
            "2.0.0-rc.1",
            "1.2.3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got: Vec<String> = versions_newest_first(&tags)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, ["2.0.0-rc.1", "1.10.0", "1.2.3"]);
    }

    #[test]
    fn partial_tags_match_like_node_semver() {
        assert!(satisfies(&v("1.2.3"), "1"));
        assert!(satisfies(&v("1.2.3"), "1.2"));
        assert!(!satisfies(&v("1.3.0"), "1.2"));
        assert!(satisfies(&v("1.2.3"), "1.2.3"));
        assert!(!satisfies(&v("2.0.0-rc.1"), "2"));
        assert!(!satisfies(&v("2.0.0"), "1"));
        let versions = vec![v("2.0.0"), v("1.3.0"), v("1.2.4")];
        assert_eq!(wanted_for_tag(&versions, "1.2"), Some(v("1.2.4")));
        assert_eq!(wanted_for_tag(&versions, "latest"), Some(v("2.0.0")));
        assert_eq!(wanted_for_tag(&versions, "3"), None);
    }

    #[test]
    fn target_versions_and_repinning() {
        assert!(is_target_version("1"));
        assert!(is_target_version("1.2"));
        assert!(is_target_version("1.2.3"));
        assert!(!is_target_version("1.2.3.4"));
        assert!(!is_target_version("v1"));
        assert!(!is_target_version("1."));
        let text = "{\"features\": {\"r/o/a:1\": {}}, // r/o/a:1 stays\n \"x\": \"r/o/a:10\"}";
        assert_eq!(
            repin_in_text(text, "r/o/a:1", "r/o/a:2"),
            "{\"features\": {\"r/o/a:2\": {}}, // r/o/a:1 stays\n \"x\": \"r/o/a:10\"}"
        );
    }

    #[test]
    fn text_table_pads_and_trims() {
        let mut o = Outdated::default();
        o.features.insert(
            "r/o/feature-a:1".into(),
            FeatureVersions {
                current: Some("1.0.0".into()),
                wanted: Some("1.2.0".into()),
                latest: None,
                ..Default::default()
            },
        );
        assert_eq!(
            o.to_text(),
            "Feature        Current  Wanted  Latest\nr/o/feature-a  1.0.0    1.2.0   -"
        );
        assert_eq!(
            o.to_json(),
            serde_json::json!({"features": {"r/o/feature-a:1": {"current": "1.0.0", "wanted": "1.2.0"}}})
        );
    }
}
