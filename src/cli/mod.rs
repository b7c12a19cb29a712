//! L5: the terminal. Parses arguments (clap), dispatches to `handoff` operations, renders
//! results (JSON on stdout) and errors (stderr), and maps them to exit codes.
//!
//! Exit codes of the reference CLI's commands (`up`, `exec`, …): 0 success; 1 the operation
//! failed (as `@devcontainers/cli` when `outcome` is `error`), usage errors included (as the
//! reference's yargs; spec-note 0454). devcell's own commands (`handoff`, `status`, `doctor`,
//! `delete`, `audit`, `prune`) use the envelope's documented codes (`handoff::envelope`,
//! spec-note 0163; usage errors 2); `handoff` exits with the agent's status, `audit` with 3
//! below `--min-score`, `delete` with 1 when its teardown could not be verified.
//!
//! Every dashed long flag also parses in camelCase (`--workspaceFolder`), as the reference's
//! yargs accepts it ([`command`]).

pub mod args;
pub mod commands;
pub mod output;
pub mod reporter;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use args::{Cli, Command};

/// devcell's own commands: their usage errors keep the envelope's `invalid_argument` (exit 2).
const OWN_COMMANDS: [&str; 7] = [
    "handoff", "status", "doctor", "delete", "audit", "prune", "mail",
];

/// The clap command of [`Cli`] with a hidden camelCase alias for every long flag that has a
/// dash (`--workspace-folder` also as `--workspaceFolder`), in every subcommand: the reference
/// CLI's yargs parser accepts both spellings and its own tests use them (spec-note 0454).
pub fn command() -> clap::Command {
    with_camel_case_aliases(Cli::command())
}

fn with_camel_case_aliases(mut cmd: clap::Command) -> clap::Command {
    let aliases: Vec<(clap::Id, String)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            long.contains('-')
                .then(|| (a.get_id().clone(), camel_case(long)))
        })
        .collect();
    for (id, alias) in aliases {
        cmd = cmd.mut_arg(id, |a| a.alias(alias));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, with_camel_case_aliases);
    }
    cmd
}

/// `workspace-folder` → `workspaceFolder` (yargs' camel-case expansion).
fn camel_case(flag: &str) -> String {
    let mut out = String::with_capacity(flag.len());
    let mut upper = false;
    for c in flag.chars() {
        match c {
            '-' => upper = true,
            c if upper => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// Runs the `devcell` command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
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
        Command::Ports(args) => commands::ports::run(args),
        Command::Features(args::FeaturesCommand::Package(args)) => {
            commands::features_package::run(args)
        }
        Command::Features(args::FeaturesCommand::Publish(args)) => {
            commands::features_publish::run(args)
        }
        Command::Features(args::FeaturesCommand::ResolveDependencies(args)) => {
            commands::features_resolve_dependencies::run(args)
        }
        Command::Features(args::FeaturesCommand::Info(args)) => commands::features_info::run(args),
        Command::Features(args::FeaturesCommand::Test(args)) => commands::features_test::run(args),
        Command::Features(args::FeaturesCommand::GenerateDocs(args)) => {
            commands::templates::features_generate_docs(args)
        }
        Command::Templates(args::TemplatesCommand::Publish(args)) => {
            commands::templates::publish(args)
        }
        Command::Templates(args::TemplatesCommand::GenerateDocs(args)) => {
            commands::templates::generate_docs(args)
        }
        Command::Templates(args::TemplatesCommand::Apply(args)) => commands::templates::apply(args),
        Command::Templates(args::TemplatesCommand::Metadata(args)) => {
            commands::templates::metadata(args)
        }
        Command::Handoff(args) => commands::handoff::run(*args),
        Command::Status(args) => commands::status::run(args),
        Command::Doctor(args) => commands::doctor::run(args),
        Command::Delete(args) => commands::delete::run(args),
        Command::Fetch(args) => commands::fetch::run(args),
        Command::Audit(args) => commands::audit::run(args),
        Command::Env(args::EnvCommand::Show(args)) => commands::env::show(args),
        Command::Env(args::EnvCommand::Export(args)) => commands::env::export(args),
        Command::Env(args::EnvCommand::Import(args)) => commands::env_import::run(args),
        Command::Verify(args) => commands::env::verify(args),
        Command::Mail(command) => commands::mail::run(command),
        Command::Outdated(args) => commands::outdated::run(args),
        Command::Upgrade(args) => commands::upgrade::run(args),
        Command::Prune(args) => commands::prune::run(args),
        Command::EgressProxy(args) => commands::runtime_own_signals().and_then(|rt| {
            rt.block_on(crate::ops::egress::serve_proxy(&args.state, &args.key))?;
            Ok(ExitCode::SUCCESS)
        }),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            output::error(&err);
            ExitCode::from(1)
        }
    }
}

/// A usage error: clap's rendering on stderr (help and version as clap does them). The
/// reference CLI's commands exit 1, as its yargs does; devcell's own commands exit 2 and, under
/// `--format json`, also print the `invalid_argument` envelope on stdout. Conflicting flags are
/// said the reference's way first: `--a and --b are mutually exclusive.` (spec-note 0454).
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
    let subcommands: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    let own = argv
        .iter()
        .skip(1)
        .find(|a| subcommands.contains(a))
        .is_some_and(|a| OWN_COMMANDS.contains(&a.as_str()));
    let json = argv
        .windows(2)
        .any(|w| w[0] == "--format" && w[1] == "json")
        || argv.iter().any(|a| a == "--format=json");
    if err.kind() == ErrorKind::ArgumentConflict
        && let Some(text) = mutually_exclusive(&err)
    {
        // The reference's sentence, then clap's usage lines (its own first line said the same).
        let rendered = err.render().to_string();
        let rest: Vec<&str> = rendered.lines().skip(1).collect();
        output::stderr_line(&format!("error: {text}\n{}", rest.join("\n")));
        if own && json {
            output::envelope(&crate::handoff::envelope::Envelope::<()>::failure(
                crate::handoff::envelope::ErrorBody::new(
                    crate::handoff::envelope::ErrorCode::InvalidArgument,
                    text,
                ),
            ));
        }
        return ExitCode::from(if own { 2 } else { 1 });
    }
    if json && own {
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
    ExitCode::from(if own { 2 } else { 1 })
}

/// `--a and --b are mutually exclusive.` for a clap conflict error (the flags as given).
fn mutually_exclusive(err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let flag = |v: &ContextValue| -> Option<String> {
        let text = match v {
            ContextValue::String(s) => s.clone(),
            ContextValue::Strings(list) => list.first()?.clone(),
            _ => return None,
        };
        text.split_whitespace().next().map(str::to_owned)
    };
    let a = flag(err.get(ContextKind::InvalidArg)?)?;
    let b = flag(err.get(ContextKind::PriorArg)?)?;
    Some(format!("{a} and {b} are mutually exclusive."))
}

fn init_tracing(cli: &Cli) {
    use std::io::IsTerminal;
    let level = cli.log_level.as_deref().unwrap_or("warn");
    output::set_debug(matches!(level, "debug" | "trace"));
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
