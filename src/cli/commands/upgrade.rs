//! `devcell upgrade`.

use std::process::ExitCode;

use crate::cli::args::UpgradeArgs;
use crate::cli::commands::with_progress;
use crate::cli::output;
use crate::ops::outdated::{OutdatedOptions, UpgradeOptions, upgrade_with};

/// Runs `upgrade`: writes the lockfile, or prints it with `--dry-run`; fetch progress
/// ([`CliReporter`]) on stderr.
pub fn run(args: UpgradeArgs) -> anyhow::Result<ExitCode> {
    let workspace_folder = args.location.workspace_folder_or_current()?;
    let registries = crate::settings::load(args.fetch.config_file.as_deref())?.registries;
    let opts = UpgradeOptions {
        base: OutdatedOptions {
            workspace_folder,
            config: args.location.config,
            cache_dir: args.fetch.cache_dir,
            registries,
        },
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
