//! `exec`: run a command in the running dev container as `remoteUser`, in the workspace
//! folder, with the remote environment (probed user environment ⊕ `--remote-env` ⊕
//! `remoteEnv` ⊕ `--secrets-file`), streaming its output; the command's exit code is the
//! result.
//!
//! Secrets reach the command only through the exec's environment (sent in the engine API
//! request, never on a host command line, never in the container's config); devcell's own
//! messages (the env probe's warnings, errors) show them masked. The command's stdout and
//! stderr are its own data and pass through unchanged (spec-note 0240).

use indexmap::IndexMap;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::engine::{Engine, ExecInput, ExecOutput, ExecRequest};
use crate::lifecycle::UserEnvProbe;
use crate::ops::attach::{attach_target, probed_remote_env, report_grants};
use crate::ops::error::Result;
use crate::ops::options::TargetOptions;
use crate::ops::secrets::{MaskingReporter, redact};
use crate::progress::Reporter;

/// Inputs of [`exec`].
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Workspace, config and container identity.
    pub target: TargetOptions,
    /// The command and its arguments (run without a shell).
    pub argv: Vec<String>,
    /// `--remote-env NAME=VALUE` (the config's `remoteEnv` wins).
    pub remote_env: IndexMap<String, String>,
    /// `--secrets-file` contents (NAME → value): added to the command's environment last
    /// (they win), masked in devcell's own output.
    pub secrets: IndexMap<String, String>,
    /// `--default-user-env-probe`.
    pub default_user_env_probe: UserEnvProbe,
    /// Allocate a TTY (stdout and stderr then arrive merged on `stdout`).
    pub tty: bool,
    /// With `tty`: the terminal's size, followed by the TTY (start and every change).
    pub tty_size: Option<tokio::sync::watch::Receiver<crate::engine::TtySize>>,
    /// `--allow`: grants for what the re-read configuration uses beyond what `up` judged
    /// (spec-note 0443).
    pub allow: Vec<String>,
}

/// Where an exec's streams go: stdin (`None` = none), stdout and stderr.
pub struct ExecStreams<'a> {
    /// Fed to the command's stdin until end of file.
    pub stdin: Option<Box<dyn AsyncRead + Send + Unpin>>,
    /// Receives the command's stdout.
    pub stdout: Box<dyn AsyncWrite + Send + Unpin + 'a>,
    /// Receives the command's stderr.
    pub stderr: Box<dyn AsyncWrite + Send + Unpin + 'a>,
}

/// Runs `opts.argv` in the running dev container and returns its exit code (128 + n when
/// killed by signal n). Progress (the env probe's warnings) goes to `reporter`.
///
/// Errors: [`crate::ops::OpsError::NoContainer`] / `NotRunning` when there is no
/// running dev container; `Engine` when the engine fails; `Config` for the configuration;
/// any of them as [`crate::ops::OpsError::Redacted`] when its text held a secret
/// value.
pub async fn exec(
    opts: &ExecOptions,
    streams: ExecStreams<'_>,
    reporter: &dyn Reporter,
) -> Result<i64> {
    let engine = crate::engine::connect()
        .await
        .map_err(|e| redact(e.into(), &opts.secrets))?;
    exec_with(&*engine, opts, streams, reporter).await
}

/// [`exec`] through `engine`.
///
/// Errors: as [`exec`].
pub async fn exec_with(
    engine: &dyn Engine,
    opts: &ExecOptions,
    streams: ExecStreams<'_>,
    reporter: &dyn Reporter,
) -> Result<i64> {
    let reporter = MaskingReporter {
        inner: reporter,
        secrets: &opts.secrets,
    };
    exec_inner(engine, opts, streams, &reporter)
        .await
        .map_err(|e| redact(e, &opts.secrets))
}

async fn exec_inner(
    engine: &dyn Engine,
    opts: &ExecOptions,
    streams: ExecStreams<'_>,
    reporter: &dyn Reporter,
) -> Result<i64> {
    let (attached, requests) = attach_target(
        engine,
        &opts.target,
        &opts.allow,
        opts.default_user_env_probe,
    )
    .await?;
    report_grants(&requests, reporter);
    let mut env = probed_remote_env(engine, &attached, &opts.remote_env, reporter)
        .await?
        .0;
    env.extend(opts.secrets.iter().map(|(k, v)| (k.clone(), v.clone())));
    let request = ExecRequest {
        argv: opts.argv.clone(),
        user: Some(attached.exec_user()),
        env,
        working_dir: Some(attached.workspace_folder.clone()),
        tty: opts.tty,
    };
    let input = match streams.stdin {
        Some(reader) => ExecInput::Stream(reader),
        None => ExecInput::None,
    };
    let output = ExecOutput::Write {
        stdout: streams.stdout,
        stderr: streams.stderr,
    };
    let id = &attached.container.id;
    let result = match opts.tty_size.clone() {
        Some(sizes) => {
            engine
                .exec_resizable(id, &request, input, output, sizes)
                .await?
        }
        None => engine.exec(id, &request, input, output).await?,
    };
    // what the command left in the host workspace (attack K11)
    crate::security::planted_after::after_command(
        &attached.container,
        &attached.workspace_folder,
        reporter,
    );
    // git directories it made where the user runs git (spec-note 0466): said on stderr, as
    // the command's own output is stdout
    crate::ops::workspace_git::after_command(&attached.container.id, &opts.allow, reporter);
    Ok(result.exit_code)
}
