//! `features resolve-dependencies`: the install order of a configuration's Features, as
//! `devcontainer features resolve-dependencies` prints it (spec-distilled §4.6).
//!
//! Output: `{"installOrder": [{"id": "<reference as written>", "options": <value as written>}]}`.
//! Local Features are read from disk; OCI and tarball metadata is fetched through the cache
//! (`features::fetch::Fetcher::plan`; `--cache-dir`, `--offline`).

use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use crate::config::model;
use crate::diagnostics::Warning;
use crate::features::FeatureError;
use crate::features::fetch::{FetchOptions, Fetcher, PlanRequest};
use crate::features::local::LocalFeatureRoot;
use crate::features::order::{InstallPlan, order};
use crate::features::reference::FeatureRef;
use crate::handoff::error::{HandoffError, Result};
use crate::handoff::read_configuration::{ValidatedConfig, read_validated};
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
/// Errors: [`HandoffError::WorkspaceFolder`], [`HandoffError::Config`] as for
/// `read-configuration`; [`HandoffError::Feature`] for invalid references, options, cycles, and
/// remote Features that cannot be fetched (network, offline cache miss, not a Feature).
pub fn resolve_dependencies(opts: &ResolveDependenciesOptions) -> Result<ResolveDependencies> {
    resolve_dependencies_with(opts, Arc::new(NoopReporter))
}

/// As [`resolve_dependencies`], sending fetch progress (`pulling …` status lines) to
/// `reporter`.
///
/// Errors: as [`resolve_dependencies`].
pub fn resolve_dependencies_with(
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
    let local = LocalFeatureRoot::new(&workspace_folder, &config_file);
    let all_local = features
        .keys()
        .all(|k| FeatureRef::parse(k).is_ok_and(|r| r.is_local()));
    let plan = if all_local {
        let mut resolve = |r: &FeatureRef| local.resolve(r);
        order(&features, &override_order, &mut resolve)?
    } else {
        let fetcher = Fetcher::new(FetchOptions {
            cache_dir: opts.cache_dir.clone(),
            offline: opts.offline,
            ..FetchOptions::default()
        })
        .map_err(|e| FeatureError::Resolve {
            feature: "*".into(),
            source: Box::new(e),
        })?
        .with_reporter(reporter);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| HandoffError::Runtime { source })?;
        // The lockfile pins OCI and tarball Features when present; it is never written here
        // (as the reference CLI; spec-note 0280).
        // judged as the configuration was (spec-note 0400)
        let lock_at = crate::handoff::lockfile_io::LockfileAt::new(
            &config_file,
            &workspace_folder,
            confined.as_ref(),
        );
        let lock_path = lock_at.path.clone();
        let lock_state = lock_at.read(crate::features::lockfile::LockfileMode::ReadOnly)?;
        let request = PlanRequest {
            features: &features,
            override_order: &override_order,
            config_dir: &local.config_dir,
            devcontainer_dir: &local.devcontainer_dir,
            lockfile: lock_state.lockfile().map(|l| (l, lock_path.as_path())),
        };
        runtime.block_on(fetcher.plan(&request))?.install
    };
    warnings.extend(plan.warnings.iter().cloned());
    Ok(ResolveDependencies {
        output: plan.to_install_order_json(),
        warnings,
        plan,
    })
}

fn feature_value(v: &model::FeatureValue) -> Value {
    match v {
        model::FeatureValue::Version(s) => Value::String(s.clone()),
        model::FeatureValue::Enabled(b) => Value::Bool(*b),
        model::FeatureValue::Options(m) => Value::Object(m.clone()),
    }
}
