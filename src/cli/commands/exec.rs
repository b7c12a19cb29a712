//! `devcell exec`.

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::cli::args::ExecArgs;
use crate::cli::commands::{remote, runtime, target};
use crate::cli::output::StderrReporter;
use crate::handoff::{ExecOptions, ExecStreams, exec};

/// Runs `exec`: the command's stdout/stderr streamed; its exit code becomes devcell's (a
/// signal n gives 128 + n; codes above 255 are reported as 255).
pub fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let (remote_env, probe) = remote(&args.remote)?;
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let secrets = match &args.secrets_file {
        Some(path) => crate::handoff::read_secrets_file(path)?,
        None => Default::default(),
    };
    let opts = ExecOptions {
        target: target(&args.container)?,
        argv: args.command,
        remote_env,
        secrets,
        default_user_env_probe: probe,
        tty,
    };
    let rt = runtime()?;
    let code = rt.block_on(async {
        // A terminal is not forwarded (no raw mode); piped input is.
        let stdin: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>> =
            if std::io::stdin().is_terminal() {
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
    })?;
    // Leave without waiting for a blocked stdin reader.
    rt.shutdown_background();
    Ok(ExitCode::from(
        u8::try_from(code.clamp(0, 255)).unwrap_or(255),
    ))
}
