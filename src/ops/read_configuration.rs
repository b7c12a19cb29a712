//! `read-configuration`: discover, parse, validate and substitute a `devcontainer.json` and
//! return the JSON document `@devcontainers/cli read-configuration` prints.
//!
//! Output shape (keys whose value is absent are omitted, as in the reference):
//!
//! ```json
//! {"configuration": {…, "configFilePath": {"$mid": 1, "fsPath": "…", "path": "…", "scheme": "vscode-fileHost"}},
//!  "workspace": {"workspaceFolder": "…", "workspaceMount": "…"},
//!  "mergedConfiguration": {…}, "featuresConfiguration": {…}}
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::config::{self, jsonc, model};
use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, Engine, ImageInfo};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::{
    ValidatedConfig, locate, parse_additional_features, read_judged, read_overridden,
    read_validated, repository_supplied, resolve_workspace,
};
use crate::security::host_path;

/// Inputs of [`read_configuration`] (the `read-configuration` flags).
#[derive(Debug, Clone, Default)]
pub struct ReadConfigurationOptions {
    /// `--workspace-folder` (absolute; the cli defaults it to the current directory).
    pub workspace_folder: PathBuf,
    /// `--config`: an explicit config file (relative paths are taken against the current
    /// directory).
    pub config: Option<PathBuf>,
    /// `--mount-workspace-git-root` (default `true`): mount the git root of the workspace.
    pub mount_workspace_git_root: bool,
    /// `--include-merged-configuration`.
    pub include_merged_configuration: bool,
    /// `--include-features-configuration`.
    pub include_features_configuration: bool,
    /// The host environment used for `${localEnv:…}`/`${env:…}`.
    pub env: HashMap<String, String>,
    /// The user's `[registries]` settings (mirrors, CA certificates) remote Features are
    /// fetched with for `featuresConfiguration`, as every operation that fetches them
    /// ([`crate::features::fetch::Fetcher::for_operation`]).
    pub registries: crate::settings::RegistrySettings,
}

/// The `read-configuration` flags beyond [`ReadConfigurationOptions`], for drop-in use by tools
/// written for `@devcontainers/cli` (refcli §1). `Default` = none given.
#[derive(Debug, Clone, Default)]
pub struct ReadConfigurationExtras {
    /// `--override-config`: read the configuration's content from this file; paths keep the
    /// semantics of the real config (`--config`, else the discovered one, else
    /// `<workspace>/.devcontainer/devcontainer.json`, which need not exist).
    pub override_config: Option<PathBuf>,
    /// `--id-label name=value`s: the labels identifying the dev container (replace the default
    /// `devcontainer.local_folder` / `devcontainer.config_file` pair).
    pub id_labels: BTreeMap<String, String>,
    /// `--container-id`: the dev container, instead of a label lookup.
    pub container_id: Option<String>,
    /// `--additional-features`: a JSON object like `features` (keys the config already has
    /// are ignored).
    pub additional_features: Option<String>,
    /// No `--workspace-folder` was given (only `--container-id` / `--id-label`): without
    /// `--config` / `--override-config` the configuration is empty, as in the reference.
    pub no_workspace: bool,
    /// Never ask the container engine (library callers that already know there is none).
    pub skip_engine: bool,
    /// `--mount-git-worktree-common-dir`: lay out a worktree with a relative `gitdir:` so its
    /// common git dir can be mounted (`workspace.additionalMountString`; see
    /// [`config::workspace::worktree_common_dir_layout`]).
    pub mount_git_worktree_common_dir: bool,
}

/// The result of [`read_configuration`].
#[derive(Debug, Clone)]
pub struct ReadConfiguration {
    /// The JSON document to print (one line on stdout).
    pub output: Value,
    /// Non-fatal findings (unknown properties, duplicate keys), for stderr.
    pub warnings: Vec<Warning>,
    /// The config file that was read.
    pub config_file: PathBuf,
    /// The typed, substituted configuration.
    pub config: model::DevContainerConfig,
}

/// Reads the configuration of a workspace the way `devcontainer read-configuration` does,
/// without the container-selection flags and without asking the engine:
/// [`read_configuration_with`] with `skip_engine` (no container lookup, so no
/// `${devcontainerId}` / `${containerEnv:…}` substitution and no image metadata). For
/// operations (`up`, handoff) that deal with the container themselves.
///
/// Errors: as [`read_configuration_with`].
pub async fn read_configuration(opts: &ReadConfigurationOptions) -> Result<ReadConfiguration> {
    read_configuration_with(
        opts,
        &ReadConfigurationExtras {
            skip_engine: true,
            ..ReadConfigurationExtras::default()
        },
    )
    .await
}

/// Reads the configuration of a workspace the way `devcontainer read-configuration` does.
///
/// Steps: discover the config ([`discover::discover`]; with `override_config`, its content is
/// read from that file while paths keep the semantics of the real config location), parse it
/// ([`jsonc::read`]), validate it ([`model::validate`]), substitute phase-1 variables and
/// compute `workspaceFolder` / `workspaceMount` ([`config::workspace::resolve`]), look up the
/// dev container (`--container-id`, else the id labels: `--id-label`s or the default
/// `devcontainer.local_folder` + `devcontainer.config_file`) when an engine answers and, when
/// one is found, substitute `${devcontainerId}` and `${containerEnv:…}` (refcli §2.2); migrate
/// legacy properties ([`model::migrate_legacy`]); then build the output.
///
/// `mergedConfiguration` is built from the container's `devcontainer.metadata` label when a
/// container is found (only the updateable properties of devcontainer.json are appended when
/// it carries the id labels, refcli §2.5), else from the image's label (image configs whose
/// image is present locally), local Features and devcontainer.json. Engine failures are
/// warnings, never errors (spec-notes/0220).
///
/// Errors: [`OpsError::WorkspaceFolder`] when the folder does not exist;
/// [`OpsError::Config`] for a missing, unreadable or invalid config (located);
/// [`OpsError::AdditionalFeatures`] for an `--additional-features` value that is not a
/// JSON object.
pub async fn read_configuration_with(
    opts: &ReadConfigurationOptions,
    extras: &ReadConfigurationExtras,
) -> Result<ReadConfiguration> {
    let additional = parse_additional_features(extras.additional_features.as_deref())?;
    let workspace_folder = std::path::absolute(&opts.workspace_folder)
        .unwrap_or_else(|_| opts.workspace_folder.clone());
    let without_config =
        extras.no_workspace && opts.config.is_none() && extras.override_config.is_none();
    if without_config {
        return read_container_only(opts, extras, &additional).await;
    }
    let validated = match &extras.override_config {
        Some(file) => read_overridden(&workspace_folder, opts.config.as_deref(), file)?,
        // judged on what it resolves to, like every command's (spec-note 0400)
        None => read_validated(&workspace_folder, opts.config.as_deref())?,
    };
    let confined = repository_supplied(
        &workspace_folder,
        opts.config.as_deref(),
        &validated.config_file,
    )
    .then(crate::security::Grants::default);
    let mut value = validated.doc.value.clone();
    let (workspace, additional_mount) = resolve_workspace(
        &mut value,
        &validated,
        opts.mount_workspace_git_root,
        &opts.env,
        extras.mount_git_worktree_common_dir,
    )?;
    let ValidatedConfig {
        config_file,
        doc,
        mut warnings,
        ..
    } = validated;

    let id_labels = if extras.id_labels.is_empty() {
        config::id::id_labels(&workspace_folder, &config_file)
    } else {
        extras.id_labels.clone()
    };
    let image = merged_image(&value, opts.include_merged_configuration);
    let found = lookup(extras, &id_labels, image.as_deref(), &mut warnings).await;
    if let Some(container) = &found.container {
        substitute_container(&mut value, &doc, container, &id_labels)?;
    }
    // Substitution keeps the shape, so locations from `doc` still apply.
    let (typed, _) = model::validate_value(&doc, &value)?;
    let features = feature_list(&typed, &additional);

    if let Value::Object(c) = &mut value {
        model::migrate_legacy(c);
    }
    let mut output = Map::new();
    let shown = shown_configuration(&value, &config_file);
    output.insert("configuration".into(), shown.clone());
    output.insert(
        "workspace".into(),
        workspace_output(&workspace, additional_mount),
    );
    let mut resolved_entries = None;
    if let Some((shown_features, entries, feature_warnings)) = asked_features_configuration(
        opts,
        &typed,
        &features,
        (&workspace_folder, &config_file),
        confined.as_ref(),
    )
    .await?
    {
        output.insert("featuresConfiguration".into(), shown_features);
        warnings.extend(feature_warnings);
        resolved_entries = Some(entries);
    }
    if opts.include_merged_configuration {
        let local = LocalLabelContext {
            workspace_folder: workspace_folder.to_string_lossy().into_owned(),
            container_workspace_folder: workspace.workspace_folder.clone(),
            env: &opts.env,
            config_file: &config_file,
        };
        let feature_entries = match resolved_entries {
            Some(entries) => entries,
            None => local_feature_entries(
                &features,
                &config_file,
                confined.as_ref().map(|g| (workspace_folder.as_path(), g)),
                &mut warnings,
            ),
        };
        let entries = merged_entries(
            &found,
            &id_labels,
            &value,
            &feature_entries,
            &local,
            &mut warnings,
        );
        output.insert(
            "mergedConfiguration".into(),
            config::metadata::merge_configuration(&shown, &entries),
        );
    }
    Ok(ReadConfiguration {
        output: Value::Object(output),
        warnings,
        config_file,
        config: typed,
    })
}

/// The configuration as the output shows it: `value` with its `configFilePath` ([`file_uri`]).
fn shown_configuration(value: &Value, config_file: &Path) -> Value {
    let mut shown = value.clone();
    if let Value::Object(c) = &mut shown {
        c.insert("configFilePath".into(), file_uri(config_file));
    }
    shown
}

/// The Features configuration ([`features_configuration`]) when `--include-features-configuration`
/// asks for it: without any Feature the reference has no Features configuration (the key is
/// omitted, `None`). Only asked for, it is resolved (spec-note 0452); a merged configuration
/// alone keeps to what can be read offline (local Features).
///
/// Errors: as [`features_configuration`].
async fn asked_features_configuration(
    opts: &ReadConfigurationOptions,
    typed: &model::DevContainerConfig,
    features: &[(String, Value)],
    (workspace_folder, config_file): (&Path, &Path),
    confined: Option<&crate::security::Grants>,
) -> Result<Option<(Value, Vec<Value>, Vec<Warning>)>> {
    if !opts.include_features_configuration || features.is_empty() {
        return Ok(None);
    }
    let override_order = typed
        .override_feature_install_order
        .clone()
        .unwrap_or_default();
    features_configuration(
        features,
        &override_order,
        workspace_folder,
        config_file,
        confined,
        &opts.registries,
    )
    .await
    .map(Some)
}

/// The image whose `devcontainer.metadata` label goes into the merged configuration when no
/// container is found: an image configuration's `image` (not a Dockerfile's or Compose's),
/// only when the merged configuration is asked for.
fn merged_image(value: &Value, include_merged_configuration: bool) -> Option<String> {
    value
        .get("image")
        .and_then(Value::as_str)
        .filter(|_| {
            include_merged_configuration
                && value.get("dockerComposeFile").is_none()
                && value.get("dockerFile").is_none()
                && value.get("build").is_none()
        })
        .map(str::to_owned)
}

/// `${devcontainerId}` (from `id_labels`) and `${containerEnv:…}` (from the found
/// `container`'s environment) substituted in `value` (refcli §2.2).
///
/// Errors: a bad `${containerEnv:…}`, located in `doc`.
fn substitute_container(
    value: &mut Value,
    doc: &jsonc::Document,
    container: &ContainerInfo,
    id_labels: &BTreeMap<String, String>,
) -> Result<()> {
    config::substitute::substitute_devcontainer_id(value, &config::id::devcontainer_id(id_labels));
    let env = config::substitute::env_from_list(&container.env);
    config::substitute::substitute_container_env(value, &env).map_err(|e| locate(doc, e))?;
    Ok(())
}

/// The output's `workspace`: `workspaceFolder`, `workspaceMount` when there is one, and the
/// `additionalMountString` of a worktree's common git directory.
fn workspace_output(
    workspace: &config::workspace::WorkspaceConfig,
    additional_mount: Option<String>,
) -> Value {
    let mut ws = Map::new();
    ws.insert(
        "workspaceFolder".into(),
        Value::String(workspace.workspace_folder.clone()),
    );
    if let Some(mount) = &workspace.workspace_mount {
        ws.insert("workspaceMount".into(), Value::String(mount.clone()));
    }
    if let Some(mount) = additional_mount {
        ws.insert("additionalMountString".into(), Value::String(mount));
    }
    Value::Object(ws)
}

/// `read-configuration` with only `--container-id` / `--id-label` (no workspace folder, no
/// config): an empty configuration, merged with the container's metadata when asked.
async fn read_container_only(
    opts: &ReadConfigurationOptions,
    extras: &ReadConfigurationExtras,
    additional: &[(String, Value)],
) -> Result<ReadConfiguration> {
    let mut warnings = Vec::new();
    let found = lookup(extras, &extras.id_labels, None, &mut warnings).await;
    let value = Value::Object(Map::new());
    let mut output = Map::new();
    output.insert("configuration".into(), value.clone());
    let config_file = PathBuf::new();
    if opts.include_features_configuration && !additional.is_empty() {
        let cwd = std::env::current_dir().unwrap_or_default();
        let (shown_features, _, feature_warnings) =
            features_configuration(additional, &[], &cwd, &config_file, None, &opts.registries)
                .await?;
        output.insert("featuresConfiguration".into(), shown_features);
        warnings.extend(feature_warnings);
    }
    if opts.include_merged_configuration {
        let cwd = std::env::current_dir().unwrap_or_default();
        let local = LocalLabelContext {
            workspace_folder: cwd.to_string_lossy().into_owned(),
            container_workspace_folder: String::new(),
            env: &opts.env,
            config_file: &config_file,
        };
        let entries = merged_entries(
            &found,
            &extras.id_labels,
            &value,
            &[],
            &local,
            &mut warnings,
        );
        output.insert(
            "mergedConfiguration".into(),
            config::metadata::merge_configuration(&value, &entries),
        );
    }
    Ok(ReadConfiguration {
        output: Value::Object(output),
        warnings,
        config_file,
        config: model::DevContainerConfig::default(),
    })
}

/// What the engine told us: the dev container and, without one, the config's image.
#[derive(Debug, Default)]
struct Found {
    container: Option<ContainerInfo>,
    image: Option<ImageInfo>,
}

/// Looks up the dev container (by `--container-id`, else by `labels`) and, when none is found
/// and `image` is given, the image (locally only, never pulled). An unreachable engine or a
/// failed request is a warning when the user asked for a container (`--container-id`,
/// `--id-label`) or the image is needed, else only logged.
async fn lookup(
    extras: &ReadConfigurationExtras,
    labels: &BTreeMap<String, String>,
    image: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Found {
    if extras.skip_engine {
        return Found::default();
    }
    let explicit = extras.container_id.is_some() || !extras.id_labels.is_empty();
    let mut warn = |message: String, loud: bool| {
        if loud {
            warnings.push(Warning {
                location: None,
                message,
            });
        } else {
            tracing::debug!("{message}");
        }
    };
    async {
        let engine = match crate::engine::connect().await {
            Ok(engine) => engine,
            Err(e) => {
                warn(
                    format!(
                        "container engine not reachable ({e}); reading the configuration without a container{}",
                        if image.is_some() { " or image metadata" } else { "" }
                    ),
                    explicit || image.is_some(),
                );
                return Found::default();
            }
        };
        let mut found = Found::default();
        let container = match &extras.container_id {
            Some(id) => engine.inspect_container(id).await.inspect(|c| {
                if c.is_none() {
                    warn(format!("container `{id}` not found"), true);
                }
            }),
            None => find_container(&*engine, labels).await,
        };
        match container {
            Ok(c) => found.container = c,
            Err(e) => warn(format!("cannot look up the dev container: {e}"), explicit),
        }
        if found.container.is_none()
            && let Some(image) = image
        {
            match engine.inspect_image(image).await {
                Ok(Some(info)) => found.image = Some(info),
                Ok(None) => warn(
                    format!(
                        "image `{image}` is not present locally; its `devcontainer.metadata` is not merged (devcell does not pull for `read-configuration`)"
                    ),
                    true,
                ),
                Err(e) => warn(
                    format!("cannot inspect image `{image}`; its metadata is not merged: {e}"),
                    true,
                ),
            }
        }
        found
    }
    .await
}

/// The first container carrying all `labels` that is not being removed, inspected.
async fn find_container(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
) -> std::result::Result<Option<ContainerInfo>, crate::engine::EngineError> {
    if labels.is_empty() {
        return Ok(None);
    }
    for summary in engine.find_containers(labels).await? {
        if summary.state == "removing" {
            continue;
        }
        if let Some(info) = engine.inspect_container(&summary.id).await? {
            return Ok(Some(info));
        }
    }
    Ok(None)
}

/// Phase-1 values for re-substituting label entries (stored raw, substituted on every read).
struct LocalLabelContext<'a> {
    workspace_folder: String,
    container_workspace_folder: String,
    env: &'a HashMap<String, String>,
    config_file: &'a Path,
}

/// The metadata entries to merge (refcli §2.5): from the container's label when a container
/// was found, else the image's label entries, the Features' entries and devcontainer.json's.
/// Label entries get phase-1 substitution, and with a container `${devcontainerId}` and
/// `${containerEnv:…}` too.
fn merged_entries(
    found: &Found,
    id_labels: &BTreeMap<String, String>,
    config_value: &Value,
    feature_entries: &[Value],
    local: &LocalLabelContext<'_>,
    warnings: &mut Vec<Warning>,
) -> Vec<Value> {
    let ctx = config::substitute::LocalContext {
        local_workspace_folder: Some(&local.workspace_folder),
        container_workspace_folder: Some(&local.container_workspace_folder)
            .filter(|s| !s.is_empty())
            .map(String::as_str),
        env: local.env,
        config_file: Some(local.config_file),
    };
    let config_entry = config::metadata::config_entry(config_value);
    let mut substituted = |label: &str, container: Option<&ContainerInfo>| -> Vec<Value> {
        let (mut entries, warning) = config::metadata::parse_label(label);
        warnings.extend(warning);
        for entry in &mut entries {
            if let Err(e) = config::substitute::substitute_local(entry, &ctx) {
                warnings.push(Warning {
                    location: None,
                    message: format!("`devcontainer.metadata` entry left unsubstituted: {e}"),
                });
                continue;
            }
            if let Some(container) = container {
                config::substitute::substitute_devcontainer_id(
                    entry,
                    &config::id::devcontainer_id(id_labels),
                );
                let env = config::substitute::env_from_list(&container.env);
                if let Err(e) = config::substitute::substitute_container_env(entry, &env) {
                    warnings.push(Warning {
                        location: None,
                        message: format!("`devcontainer.metadata` entry: {e}"),
                    });
                }
            }
        }
        entries
    };
    match (&found.container, &found.image) {
        (Some(container), _) => match container.labels.get(crate::names::METADATA_LABEL) {
            None => config::metadata::collect_entries(&[], feature_entries, &config_entry),
            Some(label) => {
                let entries = substituted(label, Some(container));
                let has_id_labels = !id_labels.is_empty()
                    && id_labels.keys().all(|k| container.labels.contains_key(k));
                if has_id_labels {
                    config::metadata::collect_entries(
                        &entries,
                        &[],
                        &config::metadata::updateable_entry(config_value),
                    )
                } else {
                    config::metadata::collect_entries(&entries, feature_entries, &config_entry)
                }
            }
        },
        (None, Some(image)) => {
            let base = image
                .metadata_label()
                .map(|label| substituted(label, None))
                .unwrap_or_default();
            config::metadata::collect_entries(&base, feature_entries, &config_entry)
        }
        (None, None) => config::metadata::collect_entries(&[], feature_entries, &config_entry),
    }
}

/// The configuration's Features (as written) followed by the additional ones whose key the
/// configuration does not already have (the reference's order).
fn feature_list(
    config: &model::DevContainerConfig,
    additional: &[(String, Value)],
) -> Vec<(String, Value)> {
    let mut list: Vec<(String, Value)> = config
        .features
        .iter()
        .map(|(key, value)| {
            let value = match value {
                model::FeatureValue::Version(v) => json!(v),
                model::FeatureValue::Enabled(b) => json!(b),
                model::FeatureValue::Options(o) => Value::Object(o.clone()),
            };
            (key.clone(), value)
        })
        .collect();
    for (key, value) in additional {
        if !list.iter().any(|(k, _)| k == key) {
            list.push((key.clone(), value.clone()));
        }
    }
    list
}

/// The reference CLI's serialised `vscode-uri` for a local file.
pub fn file_uri(path: &Path) -> Value {
    let p = path.to_string_lossy();
    json!({"$mid": 1, "fsPath": p, "path": p, "scheme": "vscode-fileHost"})
}

/// How a `features` key refers to a Feature
/// ([spec: referencing Features](https://containers.dev/implementors/features-distribution/#referencing-a-feature)).
fn feature_source(key: &str, config_dir: &Path) -> Value {
    if key.starts_with("./") || key.starts_with("../") || key.starts_with('/') {
        // `components()` drops `.` segments: `/w/.devcontainer/./a` → `/w/.devcontainer/a`.
        let resolved: PathBuf = config_dir.join(key).components().collect();
        json!({"type": "file-path", "userFeatureId": key, "resolvedFilePath": resolved.to_string_lossy()})
    } else if key.starts_with("https://") || key.starts_with("http://") {
        json!({"type": "direct-tarball", "userFeatureId": key, "tarballUri": key})
    } else if !key.contains('/') && !key.contains('\\') {
        json!({"type": "legacy-short-id", "userFeatureId": key})
    } else {
        let lower = key.to_lowercase();
        let (name, digest) = match lower.split_once('@') {
            Some((n, d)) => (n.to_owned(), Some(d.to_owned())),
            None => (lower.clone(), None),
        };
        let last_slash = name.rfind('/').unwrap_or(0);
        let (resource, tag) = match name[last_slash..].rfind(':') {
            Some(i) if digest.is_none() => (
                name[..last_slash + i].to_owned(),
                Some(name[last_slash + i + 1..].to_owned()),
            ),
            _ => (name.clone(), None),
        };
        let (registry, path) = resource.split_once('/').unwrap_or(("", &resource));
        let id = path.rsplit('/').next().unwrap_or(path);
        let mut v = json!({"type": "oci", "userFeatureId": key, "registry": registry,
            "path": path, "resource": resource, "id": id});
        if let Some(map) = v.as_object_mut() {
            match (&digest, &tag) {
                (Some(d), _) => {
                    map.insert("digest".into(), json!(d));
                }
                (None, Some(t)) => {
                    map.insert("tag".into(), json!(t));
                }
                (None, None) => {
                    map.insert("tag".into(), json!("latest"));
                }
            }
        }
        v
    }
}

/// `featuresConfiguration` as the reference CLI prints it (spec-note 0452): the configuration's
/// Features and `--additional-features`, resolved (dependencies added) and in install order;
/// per Feature one set `{"sourceInformation", "features": [<devcontainer-feature.json> +
/// "value" (as written) + "included" + "consecutiveId" (`<id>_<index>`)], "internalVersion": "2"}`
/// (+ `computedDigest`, the manifest digest, for OCI). Also returns the Features' metadata
/// entries (install order) for the merged configuration, and the resolution's warnings.
/// Remote Features are fetched with the user's `registries` settings.
///
/// Errors: as [`crate::ops::resolve_dependencies::resolve_features`] (a bare id is an error
/// with the `./` hint; remote Features are fetched through the cache).
async fn features_configuration(
    features: &[(String, Value)],
    override_order: &[String],
    workspace_folder: &Path,
    config_file: &Path,
    confined: Option<&crate::security::Grants>,
    registries: &crate::settings::RegistrySettings,
) -> Result<(Value, Vec<Value>, Vec<Warning>)> {
    use crate::features::reference::{FeatureRef, OciVersion};
    use crate::ops::resolve_dependencies::{FeaturesRequest, resolve_features};
    let map: indexmap::IndexMap<String, Value> = features.iter().cloned().collect();
    let resolution = resolve_features(
        &FeaturesRequest {
            workspace_folder,
            config_file,
            features: &map,
            override_order,
            cache_dir: None,
            offline: false,
            registries,
            confined,
        },
        std::sync::Arc::new(crate::progress::NoopReporter),
    )
    .await?;
    let dir = config_file.parent().unwrap_or(Path::new("/"));
    let mut sets = Vec::new();
    let mut entries = Vec::new();
    for (i, f) in resolution.plan.features.iter().enumerate() {
        let resolved = resolution.resolved.get(&f.reference);
        let mut metadata = match resolved {
            Some(r) => r.metadata.clone(),
            None => serde_json::to_value(&f.metadata).unwrap_or_else(|_| json!({})),
        };
        entries.push(config::metadata::feature_entry(&f.key, &metadata));
        if let Value::Object(m) = &mut metadata {
            // As the reference: a Feature without a `name` is shown by its reference.
            if !m.contains_key("name") {
                m.insert("name".into(), json!(f.key));
            }
            m.insert("value".into(), f.value.clone());
            m.insert("included".into(), json!(true));
            m.insert(
                "consecutiveId".into(),
                json!(format!("{}_{i}", f.metadata.id)),
            );
        }
        let mut set = Map::new();
        let source = match &f.reference {
            FeatureRef::Oci {
                registry,
                repository,
                id,
                version,
                ..
            } => {
                let (version_key, version_value) = match version {
                    OciVersion::Tag(t) => ("tag", t.clone()),
                    OciVersion::Digest(d) => ("digest", d.clone()),
                };
                let digest = resolved.and_then(|r| r.integrity.clone());
                if let Some(d) = &digest {
                    set.insert("computedDigest".into(), json!(d));
                }
                let namespace = repository.rsplit_once('/').map_or("", |(ns, _)| ns);
                let owner = repository.split('/').next().unwrap_or("");
                json!({
                    "type": "oci",
                    "manifest": resolution.manifests.get(&f.reference).cloned().unwrap_or(Value::Null),
                    "manifestDigest": digest,
                    "featureRef": {
                        "id": id,
                        "owner": owner,
                        "namespace": namespace,
                        "registry": registry,
                        "resource": f.reference.resource(),
                        "path": repository,
                        "version": version_value,
                        version_key: version_value,
                    },
                    "userFeatureId": f.key,
                    "userFeatureIdWithoutVersion": f.reference.resource(),
                })
            }
            _ => feature_source(&f.key, dir),
        };
        set.insert("sourceInformation".into(), source);
        set.insert("features".into(), json!([metadata]));
        set.insert("internalVersion".into(), json!("2"));
        sets.push(Value::Object(set));
    }
    Ok((
        json!({ "featureSets": sets }),
        entries,
        resolution.plan.warnings,
    ))
}

/// Image-metadata-like entries of local (`./…`) Features that can be read from disk, for the
/// merged configuration without an engine. Unreadable ones are skipped with a warning.
fn local_feature_entries(
    features: &[(String, Value)],
    config_file: &Path,
    judged: Option<(&Path, &crate::security::Grants)>,
    warnings: &mut Vec<Warning>,
) -> Vec<Value> {
    let dir = config_file.parent().unwrap_or(Path::new("/"));
    let mut out = Vec::new();
    for (key, _) in features {
        if !(key.starts_with("./") || key.starts_with("../")) {
            continue;
        }
        let file: PathBuf = dir
            .join(key)
            .join("devcontainer-feature.json")
            .components()
            .collect();
        // judged like the configuration: a metadata file (or folder) linked out of the
        // workspace is not read (spec-note 0400)
        let read = match judged {
            Some((workspace, grants)) => {
                let places =
                    host_path::Places::new(&config::workspace::resolve_path(workspace), None, None);
                host_path::confine(&format!("local Feature `{key}`"), &file, &places, grants)
                    .map_err(OpsError::Security)
                    .and_then(|resolved| read_judged(&resolved))
            }
            None => jsonc::read(&file).map_err(OpsError::Config),
        };
        match read {
            Ok(doc) => out.push(config::metadata::feature_entry(key, &doc.value)),
            Err(e) => warnings.push(Warning {
                location: None,
                message: match std::error::Error::source(&e) {
                    Some(cause) => format!(
                        "local Feature `{key}` skipped in the merged configuration: {e}: {cause}"
                    ),
                    None => {
                        format!("local Feature `{key}` skipped in the merged configuration: {e}")
                    }
                },
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_source_kinds() {
        let d = Path::new("/w/.devcontainer");
        assert_eq!(feature_source("./a", d)["type"], "file-path");
        assert_eq!(feature_source("node", d)["type"], "legacy-short-id");
        assert_eq!(
            feature_source("https://x/devcontainer-feature-a.tgz", d)["type"],
            "direct-tarball"
        );
        let oci = feature_source("ghcr.io/devcontainers/features/node:1", d);
        assert_eq!(oci["resource"], "ghcr.io/devcontainers/features/node");
        assert_eq!(oci["tag"], "1");
        assert_eq!(oci["id"], "node");
        let local = feature_source("localhost:5000/ns/f", d);
        assert_eq!(local["registry"], "localhost:5000");
        assert_eq!(local["tag"], "latest");
        let dig = feature_source("ghcr.io/o/r/f@sha256:abc", d);
        assert_eq!(dig["digest"], "sha256:abc");
    }
}
