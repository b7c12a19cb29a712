//! `devcell features …`.

use std::process::ExitCode;

use crate::cli::args::{FeaturesArgs, FeaturesCommand, ResolveDependenciesArgs};
use crate::cli::output;
use crate::handoff::resolve_dependencies::{ResolveDependenciesOptions, resolve_dependencies};

/// Dispatches a `features` subcommand.
pub fn run(args: FeaturesArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        FeaturesCommand::ResolveDependencies(args) => resolve_dependencies_cmd(args),
    }
}

/// `features resolve-dependencies`: the install order as JSON on stdout, warnings on stderr.
fn resolve_dependencies_cmd(args: ResolveDependenciesArgs) -> anyhow::Result<ExitCode> {
    let workspace_folder = match args.workspace_folder {
        Some(folder) => folder,
        None => std::env::current_dir()?,
    };
    let result = resolve_dependencies(&ResolveDependenciesOptions {
        workspace_folder,
        config: args.config,
    })?;
    for warning in &result.warnings {
        output::warning(warning);
    }
    output::json(&result.output);
    Ok(ExitCode::SUCCESS)
}
