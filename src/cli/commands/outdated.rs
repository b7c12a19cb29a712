//! `devcell outdated`.

use std::process::ExitCode;

use crate::cli::args::{ConfigLocationArgs, FeatureFetchArgs, OutdatedArgs, OutputFormat};
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::outdated::{OutdatedOptions, outdated_with};

/// What `outdated` and `upgrade` read: the configuration `location` names, Features fetched
/// as `fetch` says (its cache folder, the user settings' registries).
///
/// Errors: the current directory cannot be read; the user settings cannot be loaded.
pub(super) fn outdated_options(
    location: ConfigLocationArgs,
    fetch: FeatureFetchArgs,
) -> anyhow::Result<OutdatedOptions> {
    Ok(OutdatedOptions {
        workspace_folder: location.workspace_folder_or_current()?,
        config: location.config,
        cache_dir: fetch.cache_dir,
        registries: crate::settings::load(fetch.config_file.as_deref())?.registries,
    })
}

/// Runs `outdated`: a table (or one JSON line) on stdout, progress ([`CliReporter`]) and
/// warnings on stderr.
pub fn run(args: OutdatedArgs) -> anyhow::Result<ExitCode> {
    crate::cli::commands::apply_log_args(&args.common.log);
    let opts = outdated_options(args.location, args.fetch)?;
    let result = with_progress(|reporter| outdated_with(&opts, reporter))??;
    for warning in &result.warnings {
        output::warning(warning);
    }
    match args.output_format {
        OutputFormat::Json => output::json(&result.to_json()),
        OutputFormat::Text => output::stdout_text(&result.to_text()),
    }
    Ok(ExitCode::SUCCESS)
}
