//! L5: the terminal. Parses arguments (clap), dispatches to `handoff` operations, renders
//! results (JSON on stdout) and errors (stderr), and maps them to exit codes.
//!
//! Exit codes: 0 success; 1 the operation failed (as `@devcontainers/cli` when `outcome` is
//! `error`); 2 usage error.

pub mod args;
pub mod commands;
pub mod output;
pub mod reporter;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Runs the `devcell` command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli);
    let result = match cli.command {
        Command::ReadConfiguration(args) => commands::read_configuration::run(args),
        Command::Up(args) => commands::up::run(*args),
        Command::Exec(args) => commands::exec::run(args),
        Command::RunUserCommands(args) => commands::run_user_commands::run(args),
        Command::Down(args) => commands::down::run(args),
        Command::Stop(container) => commands::down::run(args::DownArgs {
            container,
            remove: false,
        }),
        Command::Features(args::FeaturesCommand::Package(args)) => {
            commands::features_package::run(args)
        }
        Command::Features(args::FeaturesCommand::Publish(args)) => {
            commands::features_publish::run(args)
        }
        Command::Features(args::FeaturesCommand::ResolveDependencies(args)) => {
            commands::features_resolve_dependencies::run(args)
        }
        Command::Outdated(args) => commands::outdated::run(args),
        Command::Upgrade(args) => commands::upgrade::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            output::error(&err);
            ExitCode::from(1)
        }
    }
}

fn init_tracing(cli: &Cli) {
    let level = cli.log_level.as_deref().unwrap_or("warn");
    let filter = tracing_subscriber::EnvFilter::try_from_env("DEVCELL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("devcell={level}")));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}
