//! `devcell read-configuration`.

use std::process::ExitCode;

use crate::cli::args::ReadConfigurationArgs;
use crate::cli::output;
use crate::handoff::{ReadConfigurationOptions, read_configuration};

/// Runs `read-configuration`: JSON on stdout (one line), warnings on stderr.
pub fn run(args: ReadConfigurationArgs) -> anyhow::Result<ExitCode> {
    let workspace_folder = match args.workspace.workspace_folder {
        Some(folder) => folder,
        None => std::env::current_dir()?,
    };
    let opts = ReadConfigurationOptions {
        workspace_folder,
        config: args.workspace.config,
        mount_workspace_git_root: args.workspace.mount_workspace_git_root,
        include_merged_configuration: args.include_merged_configuration,
        include_features_configuration: args.include_features_configuration,
        env: std::env::vars().collect(),
    };
    let result = read_configuration(&opts)?;
    for warning in &result.warnings {
        output::warning(warning);
    }
    output::json(&result.output);
    Ok(ExitCode::SUCCESS)
}
