//! `devcell features publish`.

use std::process::ExitCode;

use crate::cli::args::FeaturesPublishArgs;
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::features_publish::{PublishOptions, publish_features_with};

/// Runs `features publish`: one JSON line `{"<id>": {"publishedTags", "digest", "version"}}`.
pub fn run(args: FeaturesPublishArgs) -> anyhow::Result<ExitCode> {
    let opts = PublishOptions {
        target: args.target,
        registry: args.registry,
        namespace: args.namespace,
        insecure_registries: args.insecure_registries,
        secure_registries: args.secure_registries,
        extra_ca_certificates: args.extra_ca_certificates,
        docker_config: args.docker_config,
    };
    let result =
        with_progress(|reporter| async move { publish_features_with(&opts, &*reporter).await })??;
    output::json(&result);
    Ok(ExitCode::SUCCESS)
}
