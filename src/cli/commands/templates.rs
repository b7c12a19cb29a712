//! `devcell templates apply|publish|metadata|generate-docs`, and `devcell features
//! generate-docs` (the same pages for Features).

use std::process::ExitCode;

use crate::cli::args::{
    FeatureFetchArgs, FeaturesGenerateDocsArgs, GithubLinkArgs, TemplatesApplyArgs,
    TemplatesGenerateDocsArgs, TemplatesMetadataArgs, TemplatesPublishArgs,
};
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

/// Runs `templates publish`: one JSON line `{"<id>": {"publishedTags", "digest", "version"}}`
/// (`{}` for a version already published); skipped folders are warned about on stderr.
pub fn publish(args: TemplatesPublishArgs) -> anyhow::Result<ExitCode> {
    let opts = super::features_publish::publish_options(
        args.target,
        args.registry,
        args.namespace,
        args.access,
    );
    let published = with_progress(|reporter| async move {
        crate::ops::templates::templates_publish(&opts, &*reporter).await
    })??;
    for warning in &published.warnings {
        output::warning(warning);
    }
    output::json(&serde_json::to_value(&published.outcomes).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}

fn repo_link(link: GithubLinkArgs) -> crate::ops::generate_docs::RepoLink {
    crate::ops::generate_docs::RepoLink {
        owner: link.github_owner,
        repo: link.github_repo,
    }
}

fn run_generate_docs(
    opts: crate::ops::generate_docs::GenerateDocsOptions,
) -> anyhow::Result<ExitCode> {
    let generated = crate::ops::generate_docs::generate_docs(&opts)?;
    for warning in &generated.warnings {
        output::warning(warning);
    }
    for path in &generated.written {
        output::stderr_line(&format!("wrote {}", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `templates generate-docs`: writes the pages, names them on stderr; no stdout (as the
/// reference CLI).
pub fn generate_docs(args: TemplatesGenerateDocsArgs) -> anyhow::Result<ExitCode> {
    run_generate_docs(crate::ops::generate_docs::GenerateDocsOptions {
        project_folder: args.project_folder,
        kind: crate::ops::generate_docs::DocsKind::Template,
        link: repo_link(args.link),
    })
}

/// Runs `features generate-docs`: as [`generate_docs`], for Features.
pub fn features_generate_docs(args: FeaturesGenerateDocsArgs) -> anyhow::Result<ExitCode> {
    run_generate_docs(crate::ops::generate_docs::GenerateDocsOptions {
        project_folder: args.project_folder,
        kind: crate::ops::generate_docs::DocsKind::Feature {
            registry: args.registry,
            namespace: args.namespace,
        },
        link: repo_link(args.link),
    })
}
