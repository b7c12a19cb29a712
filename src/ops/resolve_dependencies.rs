//! `features resolve-dependencies`: the install order of a configuration's Features, as
//! `devcontainer features resolve-dependencies` prints it (spec-distilled §4.6).
//!
//! Output: `{"installOrder": [{"id": "<reference as written>", "options": <value as written>}]}`.
//! Local Features are read from disk; OCI and tarball metadata is fetched through the cache
//! (`features::fetch::Fetcher::plan`; `--cache-dir`, `--offline`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use crate::config::model;
use crate::diagnostics::Warning;
use crate::features::FeatureError;
use crate::features::fetch::{FetchFlags, Fetcher, PlanRequest, ResolvedFeature};
use crate::features::local::LocalFeatureRoot;
use crate::features::order::{InstallPlan, order};
use crate::features::reference::FeatureRef;
use crate::ops::error::Result;
use crate::ops::load::{ValidatedConfig, read_validated};
use crate::progress::{NoopReporter, Reporter};

/// Inputs of [`resolve_dependencies`].
#[derive(Debug, Clone, Default)]
pub struct ResolveDependenciesOptions {
    /// `--workspace-folder`.
    pub workspace_folder: PathBuf,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--cache-dir` (default `$XDG_CACHE_HOME/devcell`).
    pub cache_dir: Option<PathBuf>,
    /// `--offline`: use only the cache.
    pub offline: bool,
    /// The user's `[registries]` settings (mirrors, insecure registries, CA certificates).
    pub registries: crate::settings::RegistrySettings,
}

/// The result of [`resolve_dependencies`].
#[derive(Debug, Clone)]
pub struct ResolveDependencies {
    /// The JSON document to print.
    pub output: Value,
    /// Non-fatal findings (config and Feature warnings).
    pub warnings: Vec<Warning>,
    /// The ordered Features.
    pub plan: InstallPlan,
}

/// Discovers and parses the config, then orders its Features.
///
/// Errors: [`OpsError::WorkspaceFolder`], [`OpsError::Config`] as for
/// `read-configuration`; [`OpsError::Feature`] for invalid references, options, cycles, and
/// remote Features that cannot be fetched (network, offline cache miss, not a Feature).
pub async fn resolve_dependencies(
    opts: &ResolveDependenciesOptions,
) -> Result<ResolveDependencies> {
    resolve_dependencies_with(opts, Arc::new(NoopReporter)).await
}

/// As [`resolve_dependencies`], sending fetch progress (`pulling …` status lines) to
/// `reporter`.
///
/// Errors: as [`resolve_dependencies`].
pub async fn resolve_dependencies_with(
    opts: &ResolveDependenciesOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<ResolveDependencies> {
    let ValidatedConfig {
        workspace_folder,
        config_file,
        config,
        mut warnings,
        confined,
        ..
    } = read_validated(&opts.workspace_folder, opts.config.as_deref())?;

    let features: IndexMap<String, Value> = config
        .features
        .iter()
        .map(|(k, v)| (k.clone(), feature_value(v)))
        .collect();
    let override_order = config
        .override_feature_install_order
        .clone()
        .unwrap_or_default();
    let plan = resolve_features(
        &FeaturesRequest {
            workspace_folder: &workspace_folder,
            config_file: &config_file,
            features: &features,
            override_order: &override_order,
            cache_dir: opts.cache_dir.clone(),
            offline: opts.offline,
            registries: &opts.registries,
            confined: confined.as_ref(),
        },
        reporter,
    )
    .await?
    .plan;
    warnings.extend(plan.warnings.iter().cloned());
    Ok(ResolveDependencies {
        output: plan.to_install_order_json(),
        warnings,
        plan,
    })
}

/// One configuration's Features to resolve (see [`resolve_features`]).
pub(crate) struct FeaturesRequest<'a> {
    /// The workspace folder (absolute).
    pub workspace_folder: &'a Path,
    /// The devcontainer.json in use (local references are relative to its folder).
    pub config_file: &'a Path,
    /// `features` (key → value as written, in file order).
    pub features: &'a IndexMap<String, Value>,
    /// `overrideFeatureInstallOrder`.
    pub override_order: &'a [String],
    /// `--cache-dir`.
    pub cache_dir: Option<PathBuf>,
    /// `--offline`.
    pub offline: bool,
    /// The user's `[registries]` settings.
    pub registries: &'a crate::settings::RegistrySettings,
    /// The grants the configuration was judged with: its lockfile is judged the same way
    /// (`None`: read as written; spec-note 0400).
    pub confined: Option<&'a crate::security::Grants>,
}

/// What [`resolve_features`] found.
pub(crate) struct FeaturesResolution {
    /// The Features in install order (dependencies added).
    pub plan: InstallPlan,
    /// Per OCI or tarball reference, its resolution (metadata as published, digest).
    pub resolved: HashMap<FeatureRef, ResolvedFeature>,
    /// Per OCI reference, its manifest (JSON), as cached.
    pub manifests: HashMap<FeatureRef, Value>,
}

/// Resolves and orders a configuration's Features: local ones from disk (no cache touched
/// when all are local), OCI and tarball ones through the cache and registries, pinned by the
/// lockfile when there is one (never written here, as the reference CLI; spec-note 0280).
///
/// Errors: [`OpsError::Feature`] for invalid references (a bare id gets the `./` hint),
/// options, cycles, fetch failures.
pub(crate) async fn resolve_features(
    request: &FeaturesRequest<'_>,
    reporter: Arc<dyn Reporter>,
) -> Result<FeaturesResolution> {
    // Every reference parses before anything is fetched: a bad one fails without network.
    for key in request.features.keys() {
        FeatureRef::parse(key)?;
    }
    let local = LocalFeatureRoot::new(request.workspace_folder, request.config_file);
    let all_local = request
        .features
        .keys()
        .all(|k| FeatureRef::parse(k).is_ok_and(|r| r.is_local()));
    if all_local {
        let mut resolve = |r: &FeatureRef| local.resolve(r);
        let plan = order(request.features, request.override_order, &mut resolve)?;
        return Ok(FeaturesResolution {
            plan,
            resolved: HashMap::new(),
            manifests: HashMap::new(),
        });
    }
    let flags = FetchFlags {
        cache_dir: request.cache_dir.clone(),
        offline: request.offline,
        ..FetchFlags::default()
    };
    let fetcher = Fetcher::for_operation(request.registries, flags)
        .map_err(|e| FeatureError::Resolve {
            feature: "*".into(),
            source: Box::new(e),
        })?
        .with_reporter(reporter);
    // judged as the configuration was (spec-note 0400)
    let lock_at = crate::ops::lockfile_io::LockfileAt::new(
        request.config_file,
        request.workspace_folder,
        request.confined,
    );
    let lock_path = lock_at.path.clone();
    let lock_state = lock_at.read(crate::features::lockfile::LockfileMode::ReadOnly)?;
    let plan_request = PlanRequest {
        features: request.features,
        override_order: request.override_order,
        config_dir: &local.config_dir,
        devcontainer_dir: &local.devcontainer_dir,
        lockfile: lock_state.lockfile().map(|l| (l, lock_path.as_path())),
    };
    let plan = fetcher.plan(&plan_request).await?;
    let manifests = plan
        .resolved
        .iter()
        .filter(|(r, _)| matches!(r, FeatureRef::Oci { .. }))
        .filter_map(|(r, resolved)| {
            let digest = resolved.integrity.as_deref()?;
            let bytes = fetcher.store().get_blob(digest).ok()??;
            Some((r.clone(), serde_json::from_slice(&bytes).ok()?))
        })
        .collect();
    Ok(FeaturesResolution {
        plan: plan.install,
        resolved: plan.resolved,
        manifests,
    })
}

fn feature_value(v: &model::FeatureValue) -> Value {
    match v {
        model::FeatureValue::Version(s) => Value::String(s.clone()),
        model::FeatureValue::Enabled(b) => Value::Bool(*b),
        model::FeatureValue::Options(m) => Value::Object(m.clone()),
    }
}
