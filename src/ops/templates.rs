//! `templates apply` and `templates metadata`, as the reference CLI's commands of the same
//! names (spec-notes 0640, 0641): the flags' JSON is checked before any network request, the
//! Template is fetched through the Features' cache and registry settings, and applied with
//! [`crate::templates::apply`].

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::diagnostics::Warning;
use crate::oci::artifact::{ArtifactFetcher, ArtifactOptions};
use crate::oci::registry::RegistryOptions;
use crate::ops::error::Result;
use crate::progress::Reporter;
use crate::templates::apply::{ApplyRequest, parse_features, parse_omit_paths};
use crate::templates::{TemplateError, fetch, options};

/// Where Templates are fetched from: the cache and the user's registry settings.
#[derive(Debug, Clone, Default)]
pub struct TemplateFetchOptions {
    /// `--cache-dir` (default `$XDG_CACHE_HOME/devcell`).
    pub cache_dir: Option<PathBuf>,
    /// `--offline`: use only the cache.
    pub offline: bool,
    /// The user's `[registries]` settings (mirrors, insecure registries, CA certificates).
    pub registries: crate::settings::RegistrySettings,
}

/// Inputs of [`templates_apply`]: the reference CLI's flags, as given.
#[derive(Debug, Clone, Default)]
pub struct TemplatesApplyOptions {
    /// `--workspace-folder` (absolute or relative to the current directory).
    pub workspace_folder: PathBuf,
    /// `--template-id`.
    pub template_id: String,
    /// `--template-args`: a JSON object of strings.
    pub template_args: String,
    /// `--features`: a JSON array of `{"id", "options"}`.
    pub features: String,
    /// `--omit-paths`: a JSON array of paths (`dir/*` for a folder).
    pub omit_paths: String,
    /// `--tmp-dir`.
    pub tmp_dir: Option<PathBuf>,
    /// Cache and registries.
    pub fetch: TemplateFetchOptions,
}

/// The result of [`templates_apply`].
#[derive(Debug, Clone)]
pub struct TemplatesApplied {
    /// `{"files": ["./…", …]}`, the reference CLI's output.
    pub output: Value,
    /// Unknown options, overwritten files, offline tags.
    pub warnings: Vec<Warning>,
}

fn fetcher(opts: &TemplateFetchOptions, reporter: Arc<dyn Reporter>) -> Result<ArtifactFetcher> {
    let fetcher = ArtifactFetcher::new(ArtifactOptions {
        cache_dir: opts.cache_dir.clone(),
        offline: opts.offline,
        refresh_tags: false,
        registry: RegistryOptions::from_settings(&opts.registries),
    })
    .map_err(|source| TemplateError::Oci {
        template: "*".into(),
        source,
    })?;
    Ok(fetcher.with_reporter(reporter))
}

/// Fetches Template `--template-id` and writes its files into the workspace folder.
///
/// Errors: [`OpsError::Template`](crate::ops::OpsError::Template): an invalid flag or option
/// value (before any network request), a fetch failure, an unsafe Template or workspace
/// (nothing is written then), an I/O error.
pub async fn templates_apply(
    opts: &TemplatesApplyOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<TemplatesApplied> {
    let args = options::parse_args(&opts.template_args)?;
    let features = parse_features(&opts.features)?;
    let omit_paths = parse_omit_paths(&opts.omit_paths)?;
    let artifacts = fetcher(&opts.fetch, reporter)?;
    let template = fetch::resolve(&artifacts, &opts.template_id).await?;
    let mut warnings = Vec::new();
    let values = options::values(
        &opts.template_id,
        template.metadata.as_ref(),
        &args,
        &mut warnings,
    )?;
    let archive = fetch::archive(&artifacts, &template).await?;
    warnings.extend(artifacts.take_tag_warnings("Template"));
    let applied = crate::templates::apply::apply(&ApplyRequest {
        template: &opts.template_id,
        archive: &archive,
        workspace_folder: &opts.workspace_folder,
        values: &values,
        features: &features,
        omit_paths: &omit_paths,
        tmp_dir: opts.tmp_dir.as_deref(),
    })?;
    warnings.extend(applied.warnings);
    Ok(TemplatesApplied {
        output: serde_json::json!({ "files": applied.files }),
        warnings,
    })
}

/// The metadata (`devcontainer-template.json`) of a published Template, from its manifest's
/// `dev.containers.metadata` annotation (else from its archive).
///
/// Errors: [`OpsError::Template`](crate::ops::OpsError::Template): a fetch failure, not a
/// Template, or a Template without metadata.
pub async fn templates_metadata(
    template_id: &str,
    opts: &TemplateFetchOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<Value> {
    let artifacts = fetcher(opts, reporter)?;
    let template = fetch::resolve(&artifacts, template_id).await?;
    Ok(template
        .metadata
        .ok_or_else(|| TemplateError::NotATemplate {
            template: template_id.to_owned(),
            reason: format!("it has no `{}`", crate::templates::TEMPLATE_FILE),
        })?)
}

/// Packages every Template under `options.target` and publishes each to
/// `<registry>/<namespace>/<id>`, then the collection metadata (spec-note 0643). Nothing is
/// pushed when a Template is invalid.
///
/// Errors: [`OpsError::Template`](crate::ops::OpsError::Template): an invalid Template
/// (named), a registry failure.
pub async fn templates_publish(
    options: &super::features_publish::PublishOptions,
    reporter: &dyn Reporter,
) -> Result<crate::templates::publish::Published> {
    let registry = super::features_publish::publish_registry(options).map_err(|source| {
        TemplateError::Push {
            reference: options.registry.clone(),
            source,
        }
    })?;
    Ok(crate::templates::publish::publish(
        &registry,
        &options.target,
        &options.registry,
        options.namespace.trim_matches('/'),
        reporter,
    )
    .await?)
}
