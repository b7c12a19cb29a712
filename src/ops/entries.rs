//! The metadata entries a dev container's configuration is merged from, before anything is
//! created: the image label's, an existing container's, and the Features' (resolved as far as
//! their metadata), phase-1 substituted; and the inputs of a Features resolution.

use crate::config::{metadata, substitute};
use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, ImageInfo};
use crate::features::lockfile::LockfileMode;
use crate::names::METADATA_LABEL;
use crate::ops::error::Result;
use crate::ops::load::LoadedConfiguration;
use crate::ops::lockfile_io::LockfileAt;
use crate::ops::options::RecordedFeatures;
use crate::ops::options::UpOptions;
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The Feature fetcher of an `up`: its cache folder and the user's registry settings. Under
/// `hardened` with a closed network it fetches only from the registry hosts the judgement
/// cleared ([`UpOptions::registry_hosts`]; none when no judgement ran), so a Feature the
/// judgement did not see (a `dependsOn` of a fetched Feature, a path that forgot to judge)
/// fails closed, naming its host and grant (attack 23, N14).
///
/// Errors: the security choice's; the fetcher's (cache, registry settings).
pub(crate) fn feature_fetcher(opts: &UpOptions) -> Result<crate::features::fetch::Fetcher> {
    let choice = crate::security::Choice::resolve(
        &opts.security,
        &opts.settings,
        crate::security::choice::UP_NETWORK,
    )?;
    let closed = matches!(
        choice.profile,
        crate::security::SecurityProfile::Hardened(_)
    ) && choice.network.closed();
    let flags = crate::features::fetch::FetchFlags {
        cache_dir: opts.cache_dir.clone(),
        allowed_hosts: closed.then(|| opts.registry_hosts.clone().unwrap_or_default()),
        ..Default::default()
    };
    Ok(crate::features::fetch::Fetcher::for_operation(
        &opts.settings.registries,
        flags,
    )?)
}

/// The image's metadata entries: raw (for the label) and phase-1 substituted (for the merge).
pub(crate) fn image_entries(
    image: &ImageInfo,
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
    warnings: &mut Vec<Warning>,
) -> (Vec<Value>, Vec<Value>) {
    let Some(label) = image.metadata_label() else {
        return (Vec::new(), Vec::new());
    };
    let (raw, warning) = metadata::parse_label(label);
    warnings.extend(warning);
    let mut substituted = raw.clone();
    substitute_entries(&mut substituted, loaded, env);
    (raw, substituted)
}

/// Phase-1 substitution (`${localWorkspaceFolder}`, `${localEnv:…}`, …) of metadata entries.
pub(crate) fn substitute_entries(
    entries: &mut [Value],
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
) {
    let local = loaded.workspace_folder.to_string_lossy().into_owned();
    let ctx = substitute::LocalContext {
        local_workspace_folder: Some(&local),
        container_workspace_folder: Some(&loaded.workspace.workspace_folder),
        env,
        config_file: None,
    };
    for entry in entries {
        // An entry that cannot be substituted (`${localEnv}` without a name) is kept verbatim.
        let mut copy = entry.clone();
        if substitute::substitute_local(&mut copy, &ctx).is_ok() {
            *entry = copy;
        }
    }
}

/// Whether the configuration lists any Feature.
pub(crate) fn has_features(config: &Value) -> bool {
    config
        .get("features")
        .and_then(Value::as_object)
        .is_some_and(|f| !f.is_empty())
}

/// The inputs of a Features resolution taken from a configuration.
pub(crate) struct FeatureRequestParts {
    pub(crate) features: IndexMap<String, Value>,
    pub(crate) override_order: Vec<String>,
    pub(crate) config_dir: PathBuf,
    pub(crate) devcontainer_dir: PathBuf,
}

impl FeatureRequestParts {
    pub(crate) fn of(loaded: &LoadedConfiguration) -> FeatureRequestParts {
        let features: IndexMap<String, Value> = loaded
            .value
            .get("features")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let override_order =
            crate::formats::json::strings(loaded.value.get("overrideFeatureInstallOrder"));
        let config_dir = loaded
            .config_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        // Local Features live under the `.devcontainer` folder that holds the configuration
        // (in a multi-repository handoff, the primary repository's, not the workspace root's).
        let devcontainer_dir = loaded
            .config_file
            .ancestors()
            .take_while(|a| {
                a.starts_with(&loaded.workspace_folder) && *a != loaded.workspace_folder
            })
            .find(|a| a.file_name().is_some_and(|n| n == ".devcontainer"))
            .map(Path::to_path_buf)
            .unwrap_or_else(|| loaded.workspace_folder.join(".devcontainer"));
        FeatureRequestParts {
            features,
            override_order,
            config_dir,
            devcontainer_dir,
        }
    }
}

/// The Features' metadata entries (install order, ids as written), as the image label of a
/// Features build would hold them: resolved through the Feature cache and registries
/// (metadata only), honouring the lockfile when present.
pub(crate) async fn preview_feature_entries(
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
) -> Result<Vec<Value>> {
    use crate::features::fetch::PlanRequest;
    let parts = FeatureRequestParts::of(loaded);
    let lock_at = LockfileAt::of(loaded);
    let lock_path = lock_at.path.clone();
    let mode = match opts.lockfile {
        LockfileMode::Off => LockfileMode::Off,
        _ => LockfileMode::ReadOnly,
    };
    let lock_state = lock_at.read(mode)?;
    // an `--environment` record's digests: what is judged is what its recreation installs
    let recorded = opts.recorded_features.as_ref();
    let honoured = RecordedFeatures::over(recorded, lock_state.lockfile());
    let fetcher = feature_fetcher(opts)?;
    let plan = fetcher
        .plan(&PlanRequest {
            features: &parts.features,
            override_order: &parts.override_order,
            config_dir: &parts.config_dir,
            devcontainer_dir: &parts.devcontainer_dir,
            lockfile: honoured.as_ref().map(|l| (l, lock_path.as_path())),
        })
        .await
        .map_err(|e| RecordedFeatures::explain(recorded, e.into()))?;
    Ok(plan
        .install
        .features
        .iter()
        .map(|f| {
            let metadata = plan
                .resolved
                .get(&f.reference)
                .map(|r| r.metadata.clone())
                .unwrap_or(Value::Null);
            metadata::feature_entry(&f.key, &metadata)
        })
        .collect())
}

/// The metadata entries of an existing container: its label (phase-1 substituted) plus the
/// updateable properties of the current devcontainer.json; a container without the label gets
/// the devcontainer.json entry.
pub(crate) fn existing_entries(
    info: &ContainerInfo,
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
    warnings: &mut Vec<Warning>,
) -> Vec<Value> {
    match info.labels.get(METADATA_LABEL) {
        Some(label) => {
            let (mut entries, warning) = metadata::parse_label(label);
            warnings.extend(warning);
            substitute_entries(&mut entries, loaded, env);
            entries.push(metadata::updateable_entry(&loaded.value));
            entries
        }
        None => vec![metadata::config_entry(&loaded.value)],
    }
}
