//! `devcell features publish`.

use std::process::ExitCode;

use crate::cli::args::{FeaturesPublishArgs, RegistryAccessArgs};
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::features_publish::{PublishOptions, publish_features_with};

/// Runs `features publish`: one JSON line `{"<id>": {"publishedTags", "digest", "version"}}`.
pub fn run(args: FeaturesPublishArgs) -> anyhow::Result<ExitCode> {
    let opts = publish_options(args.target, args.registry, args.namespace, args.access);
    let result =
        with_progress(|reporter| async move { publish_features_with(&opts, &*reporter).await })??;
    output::json(&result);
    Ok(ExitCode::SUCCESS)
}

/// The options of a publish (`features publish`, `templates publish`): where to, and the
/// registry access flags.
pub(crate) fn publish_options(
    target: std::path::PathBuf,
    registry: String,
    namespace: String,
    access: RegistryAccessArgs,
) -> PublishOptions {
    PublishOptions {
        target,
        registry,
        namespace,
        insecure_registries: access.insecure_registries,
        secure_registries: access.secure_registries,
        extra_ca_certificates: access.extra_ca_certificates,
        docker_config: access.docker_config,
    }
}
