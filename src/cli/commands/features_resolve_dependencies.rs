//! `devcell features resolve-dependencies`.

use std::process::ExitCode;

use crate::cli::args::FeaturesResolveDependenciesArgs;
use crate::cli::commands::with_progress;
use crate::cli::output;

use crate::ops::resolve_dependencies::{ResolveDependenciesOptions, resolve_dependencies_with};

/// Runs `features resolve-dependencies`: the install order as JSON on stdout (one line),
/// warnings on stderr.
pub fn run(args: FeaturesResolveDependenciesArgs) -> anyhow::Result<ExitCode> {
    let workspace_folder = args.location.workspace_folder_or_current()?;
    let registries = crate::settings::load(args.fetch.config_file.as_deref())?.registries;
    let opts = ResolveDependenciesOptions {
        workspace_folder,
        config: args.location.config,
        cache_dir: args.fetch.cache_dir,
        offline: args.offline,
        registries,
    };
    let result = with_progress(|reporter| resolve_dependencies_with(&opts, reporter))??;
    for warning in &result.warnings {
        output::warning(warning);
    }
    output::json(&result.output);
    Ok(ExitCode::SUCCESS)
}
