//! Making a record from what an `up`, `build` or handoff returned and the engine's view of the
//! base image.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::model::{
    BaseImage, BuiltImage, ConfigurationRecord, ENVIRONMENT_SCHEMA_VERSION, EnvironmentRecord,
    ExternalRecord, FeaturePin, MAX_HASHED_BYTES, MountRecord, SecurityRecord, sha256_of,
};
use crate::config::model::ConfigKind;
use crate::engine::Engine;
use crate::features::lockfile::{Lockfile, LockfileMode};
use crate::ops::bring_up::UpResult;
use crate::ops::build::BuildResult;
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::lockfile_io::LockfileAt;
use crate::ops::options::SecurityOptions;
use crate::settings::Settings;

/// The security part of a record: the profile in force, the grants of the settings and the
/// flags, and the network asked for.
pub fn security_record(
    profile: &str,
    security: &SecurityOptions,
    settings: &Settings,
) -> SecurityRecord {
    let mut grants: Vec<String> = settings
        .security
        .allow
        .iter()
        .chain(&security.allow)
        .cloned()
        .collect();
    grants.sort();
    grants.dedup();
    // `up`'s chain and default; a handoff overwrites it with the network its container has
    let network =
        crate::security::choice::network(security, settings, crate::security::choice::UP_NETWORK);
    SecurityRecord {
        profile: profile.to_string(),
        grants,
        network: network.as_str().to_string(),
    }
}

/// `path` relative to `workspace` when it is inside it, else as it is.
fn relative(workspace: &Path, path: &Path) -> String {
    path.strip_prefix(workspace)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The hash of one file, read as the configuration is read (bounded, never blocking on a
/// pipe: the repository is untrusted, spec-note 0433); `None` when it does not exist.
///
/// Errors: [`OpsError::Unsupported`] naming the file when it cannot be read.
fn file_hash(path: &Path) -> Result<Option<String>> {
    match crate::config::bounded::read(path, MAX_HASHED_BYTES) {
        Ok(bytes) => Ok(Some(sha256_of(&bytes))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(OpsError::Unsupported {
            message: format!(
                "cannot read `{}` for the environment record: {e}",
                path.display()
            ),
            hint: None,
        }),
    }
}

/// The files the environment is made from: the configuration, its lockfile, and a
/// Dockerfile configuration's Dockerfile.
fn input_files(loaded: &LoadedConfiguration) -> Vec<PathBuf> {
    let mut files = vec![
        loaded.config_file.clone(),
        crate::features::lockfile::lockfile_path(&loaded.config_file),
    ];
    if loaded.typed.kind() == ConfigKind::Dockerfile
        && let Some(dockerfile) = loaded.typed.dockerfile_path(&loaded.config_file)
    {
        files.push(dockerfile);
    }
    files
}

/// The configuration part of a record: the input files' hashes, the configuration as written
/// and `merged`.
///
/// Errors: as [`file_hash`].
pub fn configuration_record(
    loaded: &LoadedConfiguration,
    merged: &Value,
) -> Result<ConfigurationRecord> {
    let workspace = &loaded.workspace_folder;
    let mut files = BTreeMap::new();
    for path in input_files(loaded) {
        if let Some(hash) = file_hash(&path)? {
            files.insert(relative(workspace, &path), hash);
        }
    }
    Ok(ConfigurationRecord {
        file: relative(workspace, &loaded.config_file),
        files,
        configuration: loaded.raw.clone(),
        merged: merged.clone(),
    })
}

/// `customizations.devcell.verify` of a configuration: a list of commands (a single string is
/// one command).
pub fn verify_commands(configuration: &Value) -> Vec<String> {
    match configuration.pointer("/customizations/devcell/verify") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(all)) => all
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// The Features of a record: the digests installed (the container's
/// [`crate::security::audit::FEATURE_DIGESTS_LABEL`], or a build's resolution), with the
/// lockfile's `resolved` and `version` where its integrity is the same digest.
pub fn feature_pins(
    installed: &BTreeMap<String, String>,
    lockfile: Option<&Lockfile>,
) -> BTreeMap<String, FeaturePin> {
    installed
        .iter()
        .map(|(key, digest)| {
            let locked = lockfile
                .and_then(|l| l.features.get(key))
                .filter(|f| &f.integrity == digest);
            let pin = FeaturePin {
                digest: digest.clone(),
                resolved: locked.map(|f| f.resolved.clone()),
                version: locked.map(|f| f.version.clone()),
            };
            (key.clone(), pin)
        })
        .collect()
}

/// The digests of a lockfile's Features, by lock key.
pub(super) fn lock_digests(lockfile: &Lockfile) -> BTreeMap<String, String> {
    lockfile
        .features
        .iter()
        .map(|(k, f)| (k.clone(), f.integrity.clone()))
        .collect()
}

/// The workspace's lockfile as `up` honours it, `None` when missing, empty or unreadable (the
/// record then names digests without their `resolved`).
fn workspace_lockfile(loaded: &LoadedConfiguration) -> Option<Lockfile> {
    LockfileAt::of(loaded)
        .read(LockfileMode::ReadOnly)
        .ok()
        .and_then(|state| state.lockfile().cloned())
}

/// The base image of a configuration as the engine has it: an image pinned by digest is
/// exact; a tag gets the registry digest the engine recorded for it; an image without one is
/// a local image, exact only on this engine.
///
/// Errors: the engine's.
pub async fn base_image(engine: &dyn Engine, loaded: &LoadedConfiguration) -> Result<BaseImage> {
    let kind = loaded.typed.kind();
    let reference = match (kind, loaded.typed.image.as_deref()) {
        (ConfigKind::Image, Some(reference)) => reference.to_string(),
        (ConfigKind::Dockerfile, _) => {
            return Ok(BaseImage {
                not_reproducible: Some(
                    "built from a Dockerfile: its `FROM` lines are not resolved to digests (its hash is recorded)".into(),
                ),
                ..BaseImage::default()
            });
        }
        _ => {
            return Ok(BaseImage {
                not_reproducible: Some(
                    "a Docker Compose configuration: its services' images are not recorded".into(),
                ),
                ..BaseImage::default()
            });
        }
    };
    let parsed = crate::formats::image_reference::ImageReference::parse(&reference).ok();
    if let Some(digest) = parsed.as_ref().and_then(|p| p.digest()) {
        return Ok(BaseImage {
            digest: Some(digest.to_string()),
            reference: Some(reference),
            ..BaseImage::default()
        });
    }
    let info = engine.inspect_image(&reference).await?;
    Ok(base_from_inspect(reference, parsed.as_ref(), info.as_ref()))
}

/// [`base_image`] from the engine's inspect of a tag: the digest of its own repository among
/// `RepoDigests`, else the local id and why it is not reproducible.
fn base_from_inspect(
    reference: String,
    parsed: Option<&crate::formats::image_reference::ImageReference>,
    info: Option<&crate::engine::ImageInfo>,
) -> BaseImage {
    let name = parsed.map(|p| p.name().to_string());
    let digest = info.and_then(|i| {
        i.repo_digests.iter().find_map(|d| {
            let (repo, digest) = d.split_once('@')?;
            (name.as_deref().is_none_or(|n| n == repo)).then(|| digest.to_string())
        })
    });
    match (digest, info) {
        (Some(digest), _) => BaseImage {
            reference: Some(reference),
            digest: Some(digest),
            ..BaseImage::default()
        },
        (None, Some(info)) => BaseImage {
            reference: Some(reference),
            local_id: Some(info.id.clone()),
            not_reproducible: Some(
                "a local image with no registry digest: another machine cannot pull it".into(),
            ),
            ..BaseImage::default()
        },
        (None, None) => BaseImage {
            reference: Some(reference),
            not_reproducible: Some("the image is not on this engine".into()),
            ..BaseImage::default()
        },
    }
}

/// The parts of a record an operation knows besides its configuration.
pub struct RecordParts<'a> {
    /// `up`, `build` or `handoff`.
    pub command: &'a str,
    /// The configuration as loaded and judged.
    pub loaded: &'a LoadedConfiguration,
    /// The merged configuration.
    pub merged: &'a Value,
    /// The security choice.
    pub security: SecurityRecord,
    /// The Features installed: lock key → digest.
    pub installed: BTreeMap<String, String>,
    /// The Features' resolution, when the operation made one (else the workspace's lockfile).
    pub lockfile: Option<Lockfile>,
    /// The image built or run.
    pub image: BuiltImage,
}

/// A whole record from its parts and the engine's view of the base image.
///
/// Errors: as [`configuration_record`] and [`base_image`].
pub async fn record(engine: &dyn Engine, parts: RecordParts<'_>) -> Result<EnvironmentRecord> {
    let lockfile = parts
        .lockfile
        .clone()
        .or_else(|| workspace_lockfile(parts.loaded));
    Ok(EnvironmentRecord {
        schema_version: ENVIRONMENT_SCHEMA_VERSION,
        devcell_version: env!("CARGO_PKG_VERSION").to_string(),
        command: parts.command.to_string(),
        configuration: configuration_record(parts.loaded, parts.merged)?,
        base_image: base_image(engine, parts.loaded).await?,
        features: feature_pins(&parts.installed, lockfile.as_ref()),
        image: parts.image,
        security: parts.security,
        verify: verify_commands(&parts.loaded.value),
        external: None,
    })
}

/// The record of an `up` (or a handoff's `up`): the container's image and installed Features
/// (its labels) and the configuration it was made with.
///
/// Errors: as [`record`]; [`OpsError::NoSuchContainer`] when the container went away.
pub async fn record_up(
    engine: &dyn Engine,
    command: &str,
    security: SecurityRecord,
    result: &UpResult,
) -> Result<EnvironmentRecord> {
    let info = engine
        .inspect_container(&result.container_id)
        .await?
        .ok_or_else(|| OpsError::NoSuchContainer {
            id: result.container_id.clone(),
            workspace: None,
        })?;
    let installed = crate::security::audit::feature_digests(&info.labels).unwrap_or_default();
    let parts = RecordParts {
        command,
        loaded: &result.loaded,
        merged: &result.merged,
        security,
        installed,
        lockfile: None,
        image: BuiltImage {
            id: info.image_id.clone(),
            references: vec![info.image.clone()],
            pushed: BTreeMap::new(),
        },
    };
    record(engine, parts).await
}

/// The record of a handoff into the container `info` devcell did not create (spec-note 0527):
/// no configuration or Features of devcell's (empty), the base image the image the container
/// runs (by its id: the registry digest the engine recorded for it, else its local id), and
/// the container under `external`: `seen` (its mounts as the host sees them) and the user the
/// agent ran as (`user`; `exec_user`, the numeric one under `hardened`).
///
/// Errors: the engine's.
pub async fn record_external(
    engine: &dyn Engine,
    info: &crate::engine::ContainerInfo,
    seen: &[crate::engine::MountInfo],
    (user, exec_user): (&str, Option<&str>),
    security: SecurityRecord,
) -> Result<EnvironmentRecord> {
    let parsed = crate::formats::image_reference::ImageReference::parse(&info.image).ok();
    let image = engine.inspect_image(&info.image_id).await?;
    let mut base = base_from_inspect(info.image.clone(), parsed.as_ref(), image.as_ref());
    if let Some(digest) = parsed.as_ref().and_then(|p| p.digest()) {
        base.digest = Some(digest.to_string());
        base.local_id = None;
        base.not_reproducible = None;
    }
    let empty = Value::Object(serde_json::Map::new());
    Ok(EnvironmentRecord {
        schema_version: ENVIRONMENT_SCHEMA_VERSION,
        devcell_version: env!("CARGO_PKG_VERSION").to_string(),
        command: "handoff".to_string(),
        configuration: ConfigurationRecord {
            file: String::new(),
            files: BTreeMap::new(),
            configuration: empty.clone(),
            merged: empty,
        },
        base_image: base,
        features: BTreeMap::new(),
        image: BuiltImage {
            id: info.image_id.clone(),
            references: vec![info.image.clone()],
            pushed: BTreeMap::new(),
        },
        security,
        verify: Vec::new(),
        external: Some(ExternalRecord {
            container: info.id.clone(),
            name: info.name.clone(),
            user: user.to_string(),
            exec_user: exec_user.map(str::to_string),
            mounts: seen
                .iter()
                .map(|m| MountRecord {
                    kind: m.kind.clone(),
                    source: if m.kind == "volume" {
                        m.name.clone().unwrap_or_else(|| m.source.clone())
                    } else {
                        m.source.clone()
                    },
                    target: m.destination.clone(),
                    read_only: !m.rw,
                })
                .collect(),
        }),
    })
}

/// The record of a `build`: the image built, tagged and pushed, and its Features' resolution.
///
/// Errors: as [`record`].
pub async fn record_build(
    engine: &dyn Engine,
    security: SecurityRecord,
    result: &BuildResult,
) -> Result<EnvironmentRecord> {
    let installed = result
        .features
        .as_ref()
        .map(lock_digests)
        .unwrap_or_default();
    let parts = RecordParts {
        command: "build",
        loaded: &result.loaded,
        merged: &result.merged,
        security,
        installed,
        lockfile: result.features.clone(),
        image: BuiltImage {
            id: result.image_id.clone(),
            references: result.image_names.clone(),
            pushed: result
                .pushed
                .iter()
                .filter_map(|p| Some((p.image_name.clone(), p.digest.clone()?)))
                .collect(),
        },
    };
    record(engine, parts).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::features::lockfile::LockedFeature;

    #[test]
    fn feature_pins_take_resolved_and_version_only_from_a_matching_lock_entry() {
        let digest = format!("sha256:{}", "b".repeat(64));
        let installed = BTreeMap::from([
            ("r/f/a".to_string(), digest.clone()),
            ("r/f/b".to_string(), digest.clone()),
        ]);
        let mut lock = Lockfile::default();
        lock.features.insert(
            "r/f/a".into(),
            LockedFeature {
                version: "1.2.0".into(),
                resolved: format!("r/f/a@{digest}"),
                integrity: digest.clone(),
                depends_on: None,
            },
        );
        lock.features.insert(
            "r/f/b".into(),
            LockedFeature {
                version: "2.0.0".into(),
                resolved: "r/f/b@sha256:other".into(),
                integrity: format!("sha256:{}", "f".repeat(64)),
                depends_on: None,
            },
        );
        let pins = feature_pins(&installed, Some(&lock));
        assert_eq!(
            pins["r/f/a"].resolved.as_deref(),
            Some(&*format!("r/f/a@{digest}"))
        );
        assert_eq!(pins["r/f/a"].version.as_deref(), Some("1.2.0"));
        // the lockfile pins another digest than the one installed: not borrowed
        assert_eq!(pins["r/f/b"].resolved, None);
        assert_eq!(pins["r/f/b"].digest, digest);
    }

    #[test]
    fn verify_commands_are_a_list_or_one_string() {
        let list = json!({"customizations": {"devcell": {"verify": ["cargo test", "make lint"]}}});
        assert_eq!(verify_commands(&list), ["cargo test", "make lint"]);
        let one = json!({"customizations": {"devcell": {"verify": "npm test"}}});
        assert_eq!(verify_commands(&one), ["npm test"]);
        assert!(verify_commands(&json!({})).is_empty());
    }

    #[test]
    fn the_security_record_unites_settings_and_flags_sorted() {
        let mut settings = Settings::default();
        settings.security.allow = vec!["root".into(), "env:A".into()];
        settings.security.network = Some(crate::settings::NetworkMode::None);
        let flags = SecurityOptions {
            allow: vec!["env:A".into(), "build-network".into()],
            ..SecurityOptions::default()
        };
        let record = security_record("hardened", &flags, &settings);
        assert_eq!(record.grants, ["build-network", "env:A", "root"]);
        assert_eq!(record.network, "none");
        let flags = SecurityOptions {
            network: Some(crate::settings::NetworkMode::Allowlist),
            ..SecurityOptions::default()
        };
        assert_eq!(
            security_record("hardened", &flags, &settings).network,
            "allowlist"
        );
    }

    #[test]
    fn a_tag_gets_its_own_repositorys_digest_or_is_a_local_image() {
        use crate::formats::image_reference::ImageReference;
        let reference = "127.0.0.1:5000/base:1";
        let parsed = ImageReference::parse(reference).unwrap();
        let digest = format!("sha256:{}", "a".repeat(64));
        let info = crate::engine::ImageInfo {
            id: format!("sha256:{}", "9".repeat(64)),
            repo_digests: vec![
                format!("other/repo@sha256:{}", "0".repeat(64)),
                format!("127.0.0.1:5000/base@{digest}"),
            ],
            ..Default::default()
        };
        let base = base_from_inspect(reference.into(), Some(&parsed), Some(&info));
        assert_eq!(base.digest.as_deref(), Some(&*digest));
        assert_eq!(base.not_reproducible, None);

        let local = crate::engine::ImageInfo {
            repo_digests: vec![],
            ..info
        };
        let base = base_from_inspect(reference.into(), Some(&parsed), Some(&local));
        assert_eq!(base.digest, None);
        assert_eq!(base.local_id.as_deref(), Some(&*local.id));
        assert!(base.not_reproducible.unwrap().contains("another machine"));
    }

    #[test]
    fn the_configuration_record_hashes_files_relative_to_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        let dc = ws.path().join(".devcontainer");
        std::fs::create_dir(&dc).unwrap();
        std::fs::write(dc.join("devcontainer.json"), r#"{"image":"x:1"}"#).unwrap();
        std::fs::write(dc.join("devcontainer-lock.json"), r#"{"features":{}}"#).unwrap();
        let loaded = crate::ops::load::load_configuration(&crate::ops::load::LoadOptions {
            workspace_folder: ws.path().to_path_buf(),
            ..Default::default()
        })
        .unwrap();
        let record = configuration_record(&loaded, &json!({})).unwrap();
        assert_eq!(record.file, ".devcontainer/devcontainer.json");
        assert_eq!(
            record.files.keys().collect::<Vec<_>>(),
            [
                ".devcontainer/devcontainer-lock.json",
                ".devcontainer/devcontainer.json"
            ]
        );
        assert_eq!(
            record.files[".devcontainer/devcontainer.json"],
            sha256_of(br#"{"image":"x:1"}"#)
        );
        assert_eq!(record.configuration, json!({"image": "x:1"}));
    }
}
