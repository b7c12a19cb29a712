//! `devcell templates apply` and `devcell templates metadata`.

use std::process::ExitCode;

use crate::cli::args::{FeatureFetchArgs, TemplatesApplyArgs, TemplatesMetadataArgs};
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::templates::{
    TemplateFetchOptions, TemplatesApplyOptions, templates_apply, templates_metadata,
};

fn fetch_options(fetch: FeatureFetchArgs, offline: bool) -> anyhow::Result<TemplateFetchOptions> {
    Ok(TemplateFetchOptions {
        cache_dir: fetch.cache_dir,
        offline,
        registries: crate::settings::load(fetch.config_file.as_deref())?.registries,
    })
}

/// Runs `templates apply`: `{"files": […]}` on stdout (one line), warnings on stderr.
pub fn apply(args: TemplatesApplyArgs) -> anyhow::Result<ExitCode> {
    let workspace_folder = match args.workspace_folder {
        Some(folder) => folder,
        None => std::env::current_dir()?,
    };
    let opts = TemplatesApplyOptions {
        workspace_folder,
        template_id: args.template_id,
        template_args: args.template_args,
        features: args.features,
        omit_paths: args.omit_paths,
        tmp_dir: args.tmp_dir,
        fetch: fetch_options(args.fetch, args.offline)?,
    };
    let result = with_progress(|reporter| templates_apply(&opts, reporter))??;
    for warning in &result.warnings {
        output::warning(warning);
    }
    output::json(&result.output);
    Ok(ExitCode::SUCCESS)
}

/// Runs `templates metadata`: the metadata as one JSON line; on failure `{}` on stdout (as
/// the reference CLI) and the error on stderr.
pub fn metadata(args: TemplatesMetadataArgs) -> anyhow::Result<ExitCode> {
    let opts = fetch_options(args.fetch, args.offline)?;
    let result = with_progress(|reporter| templates_metadata(&args.template_id, &opts, reporter))?;
    match result {
        Ok(metadata) => {
            output::json(&metadata);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            output::json(&serde_json::json!({}));
            Err(e.into())
        }
    }
}
