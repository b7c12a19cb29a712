//! `devcell exec`.

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::cli::args::ExecArgs;
use crate::cli::commands::handoff::RawMode;
use crate::cli::commands::{apply_log_args, in_container_target, remote, runtime, terminal_sizes};
use crate::cli::output::StderrReporter;
use crate::ops::{ExecOptions, ExecStreams, exec};

/// Runs `exec`: the command's stdout/stderr streamed; its exit code becomes devcell's (a
/// signal n gives 128 + n; codes above 255 are reported as 255).
pub fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    apply_log_args(&args.common.log);
    let (remote_env, probe) = remote(&args.remote)?;
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let secrets = match &args.own.secrets_file {
        Some(path) => crate::ops::read_secrets_file(path)?,
        None => Default::default(),
    };
    let rt = runtime()?;
    // The container's TTY follows this terminal's size (spec-note 0273).
    let tty_size = if tty {
        let _context = rt.enter();
        terminal_sizes()
    } else {
        None
    };
    let opts = ExecOptions {
        target: in_container_target(&args)?,
        argv: args.own.command,
        remote_env,
        secrets,
        default_user_env_probe: probe,
        tty,
        tty_size,
        allow: args.allow,
    };
    // With a TTY the terminal is put in raw mode (restored on drop) and forwarded, so an
    // interactive command gets every key; a terminal without a TTY in the container (stdout
    // redirected) is not forwarded; piped input always is.
    let raw = tty.then(RawMode::enable).flatten();
    let code = rt.block_on(async {
        let stdin: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>> =
            if std::io::stdin().is_terminal() && raw.is_none() {
                None
            } else {
                Some(Box::new(tokio::io::stdin()))
            };
        let streams = ExecStreams {
            stdin,
            stdout: Box::new(tokio::io::stdout()),
            stderr: Box::new(tokio::io::stderr()),
        };
        exec(&opts, streams, &StderrReporter).await
    });
    drop(raw);
    let code = code?;
    // Leave without waiting for a blocked stdin reader.
    rt.shutdown_background();
    Ok(ExitCode::from(
        u8::try_from(code.clamp(0, 255)).unwrap_or(255),
    ))
}
