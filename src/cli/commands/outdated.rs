//! `devcell outdated`.

use std::process::ExitCode;

use crate::cli::args::{OutdatedArgs, OutputFormat};
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::outdated::{OutdatedOptions, outdated_with};

/// Runs `outdated`: a table (or one JSON line) on stdout, progress ([`CliReporter`]) and
/// warnings on stderr.
pub fn run(args: OutdatedArgs) -> anyhow::Result<ExitCode> {
    crate::cli::commands::apply_log_args(&args.common.log);
    let workspace_folder = args.location.workspace_folder_or_current()?;
    let registries = crate::settings::load(args.fetch.config_file.as_deref())?.registries;
    let opts = OutdatedOptions {
        workspace_folder,
        config: args.location.config,
        cache_dir: args.fetch.cache_dir,
        registries,
    };
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
