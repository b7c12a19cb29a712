//! `devcell upgrade`.

use std::process::ExitCode;

use crate::cli::args::UpgradeArgs;
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::outdated::{UpgradeOptions, upgrade_with};

/// Runs `upgrade`: writes the lockfile, or prints it with `--dry-run`; fetch progress
/// ([`CliReporter`]) on stderr.
pub fn run(args: UpgradeArgs) -> anyhow::Result<ExitCode> {
    let opts = UpgradeOptions {
        base: super::outdated::outdated_options(args.location, args.fetch)?,
        dry_run: args.dry_run,
        pin: args.feature.zip(args.target_version),
    };
    let result = with_progress(|reporter| upgrade_with(&opts, reporter))??;
    for warning in &result.warnings {
        output::warning(warning);
    }
    if let Some(config) = &result.config_updated {
        output::stderr_line(&format!("updated {}", config.display()));
    }
    if args.dry_run {
        output::stdout_text(result.text.trim_end());
    } else if result.written {
        output::stderr_line(&format!("updated {}", result.path.display()));
    }
    Ok(ExitCode::SUCCESS)
}
