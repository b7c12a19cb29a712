//! L5: the terminal. Parses arguments (clap), dispatches to `handoff` operations, renders
//! results (JSON on stdout) and errors (stderr), and maps them to exit codes.
//!
//! Exit codes of the reference CLI's commands (`up`, `exec`, …): 0 success; 1 the operation
//! failed (as `@devcontainers/cli` when `outcome` is `error`); 2 usage error. devcell's own
//! commands (`handoff`, `status`, `doctor`, `delete`, `audit`, `prune`) use the envelope's documented
//! codes (`handoff::envelope`, spec-note 0163); `handoff` exits with the agent's status, `audit`
//! with 3 below `--min-score`, `delete` with 1 when its teardown could not be verified.

pub mod args;
pub mod commands;
pub mod output;
pub mod reporter;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Runs the `devcell` command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    init_tracing(&cli);
    if cli.oci_auth_hardening || !cli.allow_cross_origin_auth_host.is_empty() {
        output::stderr_line(
            "note: `--oci-auth-hardening`/`--allow-cross-origin-auth-host` are accepted; devcell sends registry identity tokens only to HTTPS (or loopback) token realms whatever they say",
        );
    }
    let result = match cli.command {
        Command::ReadConfiguration(args) => commands::read_configuration::run(args),
        Command::Up(args) => commands::up::run(*args),
        Command::Exec(args) => commands::exec::run(args),
        Command::RunUserCommands(args) => commands::run_user_commands::run(args),
        Command::Build(args) => commands::build::run(*args),
        Command::SetUp(args) => commands::set_up::run(*args),
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
        Command::Handoff(args) => commands::handoff::run(*args),
        Command::Status(args) => commands::status::run(args),
        Command::Doctor(args) => commands::doctor::run(args),
        Command::Delete(args) => commands::delete::run(args),
        Command::Audit(args) => commands::audit::run(args),
        Command::Outdated(args) => commands::outdated::run(args),
        Command::Upgrade(args) => commands::upgrade::run(args),
        Command::Prune(args) => commands::prune::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            output::error(&err);
            ExitCode::from(1)
        }
    }
}

/// A usage error: clap's rendering on stderr (exit 2, help and version as clap does them); for
/// devcell's own commands under `--format json`, also the `invalid_argument` envelope on stdout.
fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) || err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        err.exit();
    }
    let argv: Vec<String> = std::env::args().collect();
    let ours = ["handoff", "status", "doctor", "delete", "audit", "prune"];
    let json = argv
        .windows(2)
        .any(|w| w[0] == "--format" && w[1] == "json")
        || argv.iter().any(|a| a == "--format=json");
    if json && argv.iter().skip(1).any(|a| ours.contains(&a.as_str())) {
        let message = err
            .render()
            .to_string()
            .lines()
            .next()
            .unwrap_or("invalid arguments")
            .trim_start_matches("error: ")
            .to_string();
        output::envelope(&crate::handoff::envelope::Envelope::<()>::failure(
            crate::handoff::envelope::ErrorBody::new(
                crate::handoff::envelope::ErrorCode::InvalidArgument,
                message,
            ),
        ));
    }
    let _ = err.print();
    ExitCode::from(2)
}

fn init_tracing(cli: &Cli) {
    use std::io::IsTerminal;
    let level = cli.log_level.as_deref().unwrap_or("warn");
    let filter = tracing_subscriber::EnvFilter::try_from_env("DEVCELL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("devcell={level}")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if matches!(level, "debug" | "trace") {
        // Every engine API call (a span in `engine::docker`) is logged as it ends, with its
        // duration (`time.busy`), and lines carry timestamps.
        let _ = builder
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .try_init();
    } else {
        let _ = builder.without_time().try_init();
    }
}
