//! The environment record (spec-note 0520, `schemas/environment.schema.json`): everything an
//! `up`, `build` or handoff resolved, so another machine (CI) can recreate the environment the
//! agent had, or be told exactly why it cannot.
//!
//! The record holds devcell's version, the configuration files' hashes (paths relative to the
//! workspace folder, so another checkout matches), the configuration as written and as merged,
//! the base image's registry digest (or a local image's id and why it cannot be pulled
//! elsewhere), every Feature's resolved digest, the image built, the security profile, grants
//! and network, and the verification commands (`customizations.devcell.verify`).
//!
//! Steps: [`record_up`] / [`record_build`] build a record from what the operation returned
//! and the engine's inspect; [`differences`] compares the inputs of two records (what must
//! match for a reproduction) and [`outcome_differences`] what only a build decides (the image
//! id); [`EnvironmentStore`] keeps records under `<state>/environments/`.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::config::model::ConfigKind;
use crate::diagnostics::Warning;
use crate::engine::Engine;
use crate::features::lockfile::{Lockfile, LockfileMode};
use crate::ops::bring_up::{ContainerAction, UpResult};
use crate::ops::build::{BuildOptions, BuildResult};
pub use crate::ops::error::Difference;
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::lockfile_io::LockfileAt;
use crate::ops::options::{SecurityOptions, UpOptions};
use crate::ops::secrets::{MaskingReporter, redact};
use crate::progress::Reporter;
use crate::settings::Settings;

/// The record's schema version (`schemaVersion`); a record of another version is refused.
pub const ENVIRONMENT_SCHEMA_VERSION: u32 = 1;

/// Files devcell hashes are bounded as the configuration is (spec-note 0433).
const MAX_HASHED_BYTES: u64 = crate::config::jsonc::MAX_FILE_BYTES as u64;

/// What an `up`, `build` or handoff resolved (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvironmentRecord {
    /// Always [`ENVIRONMENT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The devcell version that made the record.
    pub devcell_version: String,
    /// The command that made it: `up`, `build` or `handoff`.
    pub command: String,
    /// The configuration: its files' hashes, as written and as merged.
    pub configuration: ConfigurationRecord,
    /// The image the configuration starts from.
    pub base_image: BaseImage,
    /// Every OCI or tarball Feature installed, by lock key.
    pub features: BTreeMap<String, FeaturePin>,
    /// The image the container runs (`up`, handoff) or that was built (`build`).
    pub image: BuiltImage,
    /// The security profile, grants and network.
    pub security: SecurityRecord,
    /// `customizations.devcell.verify`: the commands `devcell verify` runs.
    pub verify: Vec<String>,
}

/// The configuration part of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigurationRecord {
    /// The `devcontainer.json` read, relative to the workspace folder.
    pub file: String,
    /// `sha256:<hex>` of each file the environment is made from (the configuration, its
    /// lockfile, its Dockerfile), by path relative to the workspace folder.
    pub files: BTreeMap<String, String>,
    /// The configuration as written (unsubstituted: no host variable's value is recorded).
    pub configuration: Value,
    /// The merged configuration the container was made with (informational: it is never
    /// compared, it holds this machine's paths).
    pub merged: Value,
}

/// The base image and how far it can be recreated elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaseImage {
    /// The configuration's `image` (none for a Dockerfile or Compose configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Its registry digest (`sha256:<hex>`), when the engine knows one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// A local image's id, when it has no registry digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_id: Option<String>,
    /// Why this base cannot be recreated exactly on another machine (`None`: it can).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_reproducible: Option<String>,
}

/// One Feature's resolution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeaturePin {
    /// `sha256:<hex>`: the manifest digest (OCI) or the tarball's sha256.
    pub digest: String,
    /// `<registry>/<repository>@sha256:<hex>` or the tarball URL, when the lockfile says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// The Feature's own version, when the lockfile says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The image built or run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuiltImage {
    /// The engine's image id (`sha256:…`).
    pub id: String,
    /// The name the container was created from, or the names `build` tagged.
    pub references: Vec<String>,
    /// `build --push`: each name pushed with its registry digest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pushed: BTreeMap<String, String>,
}

/// The security choice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityRecord {
    /// `hardened` or `reference`.
    pub profile: String,
    /// Every `--allow` value in force (settings and flags), sorted.
    pub grants: Vec<String>,
    /// `none`, `allowlist` or `default`.
    pub network: String,
}

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

/// `sha256:<hex>` of `bytes`.
pub fn sha256_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
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
fn lock_digests(lockfile: &Lockfile) -> BTreeMap<String, String> {
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

/// What must be equal for a reproduction, as JSON paths and values: the configuration file
/// and files, the configuration as written, the base image, the Features, the security
/// choice. devcell's version, the merged configuration and the image are not inputs.
fn inputs(record: &EnvironmentRecord) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let c = &record.configuration;
    out.insert("configuration.file".into(), json!(c.file));
    for (path, hash) in &c.files {
        out.insert(format!("configuration.files.{path}"), json!(hash));
    }
    out.insert(
        "configuration.configuration".into(),
        c.configuration.clone(),
    );
    let base = &record.base_image;
    out.insert("baseImage.reference".into(), json!(base.reference));
    out.insert("baseImage.digest".into(), json!(base.digest));
    out.insert("baseImage.localId".into(), json!(base.local_id));
    for (key, pin) in &record.features {
        out.insert(format!("features.{key}"), json!(pin.digest));
    }
    let s = &record.security;
    out.insert("security.profile".into(), json!(s.profile));
    out.insert("security.grants".into(), json!(s.grants));
    out.insert("security.network".into(), json!(s.network));
    out
}

/// Every input that differs between `recorded` and `current` ([`inputs`]), in path order; a
/// field only one of them has is a difference with `null` on the other side.
pub fn differences(recorded: &EnvironmentRecord, current: &EnvironmentRecord) -> Vec<Difference> {
    let (before, now) = (inputs(recorded), inputs(current));
    let mut fields: Vec<&String> = before.keys().chain(now.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter_map(|field| {
            let (r, c) = (
                before.get(field).cloned().unwrap_or(Value::Null),
                now.get(field).cloned().unwrap_or(Value::Null),
            );
            (r != c).then(|| Difference {
                field: field.clone(),
                recorded: r,
                current: c,
            })
        })
        .collect()
}

/// What differs in what the operation produced rather than in its inputs: devcell's version
/// and the image's id (a rebuild that is not bit-for-bit the same is reported, not refused).
pub fn outcome_differences(
    recorded: &EnvironmentRecord,
    current: &EnvironmentRecord,
) -> Vec<Difference> {
    let mut out = Vec::new();
    if recorded.devcell_version != current.devcell_version {
        out.push(Difference {
            field: "devcellVersion".into(),
            recorded: json!(recorded.devcell_version),
            current: json!(current.devcell_version),
        });
    }
    if recorded.image.id != current.image.id {
        out.push(Difference {
            field: "image.id".into(),
            recorded: json!(recorded.image.id),
            current: json!(current.image.id),
        });
    }
    out
}

/// Reads a record a user names (`--environment FILE`): bounded, strict (unknown fields are
/// errors), of this schema version.
///
/// Errors: [`OpsError::Unsupported`] naming the file and what is wrong.
pub fn read_record(path: &Path) -> Result<EnvironmentRecord> {
    let bad = |message: String| OpsError::Unsupported {
        message: format!("environment record `{}`: {message}", path.display()),
        hint: Some("write one with `devcell up --environment-out FILE`".into()),
    };
    let text = crate::config::bounded::read_to_string(path, MAX_HASHED_BYTES)
        .map_err(|e| bad(e.to_string()))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    match value.get("schemaVersion").and_then(Value::as_u64) {
        Some(v) if v == u64::from(ENVIRONMENT_SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(bad(format!(
                "schema version {v}; this devcell reads version {ENVIRONMENT_SCHEMA_VERSION}"
            )));
        }
        None => return Err(bad("no `schemaVersion`".into())),
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// Writes `record` to `path` (`--environment-out`), pretty-printed, replacing it atomically.
///
/// Errors: [`OpsError::Unsupported`] naming the file.
pub fn write_record(path: &Path, record: &EnvironmentRecord) -> Result<()> {
    let fail = |e: std::io::Error| OpsError::Unsupported {
        message: format!("cannot write environment record `{}`: {e}", path.display()),
        hint: None,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    serde_json::to_writer_pretty(&mut file, record).map_err(|e| fail(e.into()))?;
    std::io::Write::write_all(&mut file, b"\n").map_err(fail)?;
    file.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

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

/// What a command asks of the environment record besides its own work.
#[derive(Debug, Clone, Default)]
pub struct EnvironmentRequest {
    /// A record is wanted (`--environment-out`): failing to make it fails the command
    /// (otherwise it is a warning: the record kept in the state folder is a convenience).
    pub required: bool,
    /// Where records are kept (`None`: not kept).
    pub store: Option<EnvironmentStore>,
    /// `--environment FILE`: the record to recreate, and its file.
    pub recorded: Option<(PathBuf, EnvironmentRecord)>,
    /// `--allow-drift`: differences are warnings, not a refusal.
    pub allow_drift: bool,
}

/// The Features a resolution of `loaded` gives now (the lockfile honoured as `opts` says),
/// by lock key: their metadata is fetched, not their layers.
///
/// Errors: the resolution's (a registry, a Feature, the lockfile).
async fn resolved_features(
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
) -> Result<BTreeMap<String, String>> {
    let parts = crate::ops::entries::FeatureRequestParts::of(loaded);
    if parts.features.is_empty() {
        return Ok(BTreeMap::new());
    }
    let lock_at = LockfileAt::of(loaded);
    let state = lock_at.read(opts.lockfile)?;
    let fetcher = crate::ops::entries::feature_fetcher(opts)?;
    let plan = fetcher
        .plan(&crate::features::fetch::PlanRequest {
            features: &parts.features,
            override_order: &parts.override_order,
            config_dir: &parts.config_dir,
            devcontainer_dir: &parts.devcontainer_dir,
            lockfile: state.lockfile().map(|l| (l, lock_at.path.as_path())),
        })
        .await?;
    Ok(lock_digests(&plan.lockfile()))
}

/// The inputs of `opts`' environment now, before anything is created ([`inputs`] of the
/// record returned; its image is empty): the configuration loaded and judged as `up` loads
/// it, the base image as the engine has it (pulled first when missing, as `up` would), the
/// Features resolved, the security choice.
///
/// Errors: as loading, pulling and resolving.
async fn current_inputs(
    engine: &dyn Engine,
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<EnvironmentRecord> {
    let choice = crate::ops::up::load_up(opts)?;
    let loaded = &choice.loaded;
    if let (ConfigKind::Image, Some(reference)) = (loaded.typed.kind(), &loaded.typed.image)
        && engine.inspect_image(reference).await?.is_none()
    {
        engine.pull_image(reference, reporter).await?;
    }
    Ok(EnvironmentRecord {
        schema_version: ENVIRONMENT_SCHEMA_VERSION,
        devcell_version: env!("CARGO_PKG_VERSION").to_string(),
        command: "check".into(),
        configuration: configuration_record(loaded, &Value::Null)?,
        base_image: base_image(engine, loaded).await?,
        features: resolved_features(loaded, opts)
            .await?
            .into_iter()
            .map(|(key, digest)| {
                let pin = FeaturePin {
                    digest,
                    resolved: None,
                    version: None,
                };
                (key, pin)
            })
            .collect(),
        image: BuiltImage::default(),
        security: security_record(choice.profile.name(), &opts.security, &opts.settings),
        verify: verify_commands(&loaded.value),
    })
}

/// With `--environment FILE`: the current inputs compared with the record's before anything
/// is created; a difference refuses ([`OpsError::EnvironmentDrift`]) or, with
/// `--allow-drift`, becomes a warning.
///
/// Errors: [`OpsError::EnvironmentDrift`]; as [`current_inputs`].
async fn check_drift(
    engine: &dyn Engine,
    opts: &UpOptions,
    request: &EnvironmentRequest,
    reporter: &dyn Reporter,
) -> Result<Vec<Warning>> {
    let Some((path, recorded)) = &request.recorded else {
        return Ok(Vec::new());
    };
    reporter.report(crate::progress::Event::Status(format!(
        "checking the environment against `{}`",
        path.display()
    )));
    let now = current_inputs(engine, opts, reporter).await?;
    let found = differences(recorded, &now);
    if !found.is_empty() && !request.allow_drift {
        return Err(OpsError::EnvironmentDrift {
            record: path.clone(),
            differences: found,
        });
    }
    Ok(found
        .iter()
        .map(|d| Warning {
            location: None,
            message: format!("environment drift (allowed): {d}"),
        })
        .collect())
}

/// What the recreated environment produced differently from the record (the image id,
/// devcell's version): reported, never refused.
fn outcome_warnings(
    request: &EnvironmentRequest,
    made: Option<&EnvironmentRecord>,
) -> Vec<Warning> {
    let (Some((_, recorded)), Some(made)) = (&request.recorded, made) else {
        return Vec::new();
    };
    outcome_differences(recorded, made)
        .iter()
        .map(|d| Warning {
            location: None,
            message: format!("the recreated environment differs from the record: {d}"),
        })
        .collect()
}

/// The record of an operation's result, kept in the store; a failure to make it is an error
/// when the record is `required` (else only logged), a failure to keep it a warning when
/// required (else only logged).
///
/// Errors: the record's, when it is required.
fn finish_record(
    made: Result<EnvironmentRecord>,
    workspace: &Path,
    request: &EnvironmentRequest,
    warnings: &mut Vec<Warning>,
) -> Result<Option<EnvironmentRecord>> {
    let record = match made {
        Ok(record) => record,
        Err(e) if request.required => return Err(e),
        // a convenience nobody asked for: its failure does not change the command's output
        Err(e) => {
            tracing::debug!("no environment record: {e}");
            return Ok(None);
        }
    };
    if let Some(store) = &request.store
        && let Err(e) = store.store(workspace, &record)
    {
        if request.required {
            warnings.push(Warning {
                location: None,
                message: format!("the environment record was not kept: {e}"),
            });
        } else {
            tracing::debug!("the environment record was not kept: {e}");
        }
    }
    Ok(Some(record))
}

/// `up` ([`crate::ops::up::up_with`]) and its environment record ([`record_up`]); secret
/// values are masked in every event and error, as `up` masks them.
///
/// Errors: as `up`; the record's when it is required.
pub async fn up_recorded(
    opts: &UpOptions,
    request: &EnvironmentRequest,
    reporter: &dyn Reporter,
) -> Result<(UpResult, Option<EnvironmentRecord>)> {
    let reporter = MaskingReporter {
        inner: reporter,
        secrets: &opts.secrets,
    };
    let run = async {
        let engine = crate::engine::connect().await?;
        let drift = check_drift(&*engine, opts, request, &reporter).await?;
        let mut result = crate::ops::up::up_with(&*engine, opts, &reporter).await?;
        result.warnings.extend(drift);
        // A warm `up` of a running container keeps the record made when it was created or
        // started: its engine calls stay within the warm budget (spec-note 0520).
        let asked = request.required || request.recorded.is_some();
        if !asked && result.action == ContainerAction::Running {
            return Ok((result, None));
        }
        let security = security_record(&result.profile, &opts.security, &opts.settings);
        let made = record_up(&*engine, "up", security, &result).await;
        let workspace = result.loaded.workspace_folder.clone();
        let record = finish_record(made, &workspace, request, &mut result.warnings)?;
        result
            .warnings
            .extend(outcome_warnings(request, record.as_ref()));
        Ok((result, record))
    };
    run.await.map_err(|e| redact(e, &opts.secrets))
}

/// `build` ([`crate::ops::build::build_with`]) and its environment record ([`record_build`]).
///
/// Errors: as `build`; the record's when it is required.
pub async fn build_recorded(
    opts: &BuildOptions,
    request: &EnvironmentRequest,
    reporter: &dyn Reporter,
) -> Result<(BuildResult, Option<EnvironmentRecord>)> {
    let engine = crate::engine::connect().await?;
    let as_up = UpOptions {
        target: opts.target.clone(),
        security: opts.security.clone(),
        settings: opts.settings.clone(),
        cache_dir: opts.cache_dir.clone(),
        lockfile: opts.lockfile,
        ..UpOptions::default()
    };
    let drift = check_drift(&*engine, &as_up, request, reporter).await?;
    let mut result = crate::ops::build::build_with(&*engine, opts, reporter).await?;
    result.warnings.extend(drift);
    let security = security_record(&result.profile, &opts.security, &opts.settings);
    let made = record_build(&*engine, security, &result).await;
    let workspace = result.loaded.workspace_folder.clone();
    let record = finish_record(made, &workspace, request, &mut result.warnings)?;
    result
        .warnings
        .extend(outcome_warnings(request, record.as_ref()));
    Ok((result, record))
}

#[cfg(test)]
mod tests;
