//! `devcell features package`.

use std::process::ExitCode;

use crate::cli::args::FeaturesPackageArgs;
use crate::cli::output;
use crate::ops::features_publish::{PackageOptions, package_features};

/// Runs `features package`: writes the files; like the reference CLI, prints no JSON (the
/// paths written go to stderr).
pub fn run(args: FeaturesPackageArgs) -> anyhow::Result<ExitCode> {
    let written = package_features(&PackageOptions {
        target: args.target,
        output_folder: args.output_folder,
        force_clean_output_folder: args.force_clean_output_folder,
    })?;
    for path in written {
        output::stderr_line(&format!("wrote {}", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}
