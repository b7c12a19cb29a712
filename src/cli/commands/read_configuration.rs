//! `devcell read-configuration`.

use std::process::ExitCode;

use crate::cli::args::ReadConfigurationArgs;
use crate::cli::commands::block_on;
use crate::cli::output;
use crate::ops::{ReadConfigurationExtras, ReadConfigurationOptions, read_configuration_with};

/// Runs `read-configuration`: JSON on stdout (one line), warnings on stderr.
pub fn run(args: ReadConfigurationArgs) -> anyhow::Result<ExitCode> {
    crate::cli::commands::apply_log_args(&args.common.log);
    let no_workspace = args.workspace.workspace_folder.is_none()
        && (args.container_id.is_some() || !args.id_labels.is_empty());
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
        // the user's mirrors and CA settings, read only when Features are fetched
        registries: if args.include_features_configuration {
            crate::settings::load(None)?.registries
        } else {
            Default::default()
        },
    };
    let extras = ReadConfigurationExtras {
        override_config: args.workspace.override_config,
        id_labels: args.id_labels.into_iter().collect(),
        container_id: args.container_id,
        additional_features: args.additional_features,
        no_workspace,
        skip_engine: false,
        mount_git_worktree_common_dir: args.workspace.mount_git_worktree_common_dir,
    };
    let result = block_on(read_configuration_with(&opts, &extras))??;
    for warning in &result.warnings {
        output::warning(warning);
    }
    output::json(&result.output);
    Ok(ExitCode::SUCCESS)
}
