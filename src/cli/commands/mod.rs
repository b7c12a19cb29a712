//! One module per subcommand, named like it. Each turns args into options, calls `handoff`,
//! and renders the result.

pub mod audit;
pub mod build;
pub mod delete;
pub mod doctor;
pub mod down;
pub mod env;
pub mod env_import;
pub mod exec;
pub mod features_info;
pub mod features_package;
pub mod features_publish;
pub mod features_resolve_dependencies;
pub mod features_test;
pub mod fetch;
pub mod handoff;
pub mod mail;
pub mod outdated;
pub mod ports;
pub mod prune;
pub mod read_configuration;
pub mod run_user_commands;
pub mod set_up;
pub mod status;
pub mod templates;
pub mod up;
pub mod upgrade;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use indexmap::IndexMap;

use crate::cli::args::{
    ContainerArgs, DotfilesArgs, Format, HookArgs, InContainerArgs, LogArgs, LogFormat, RemoteArgs,
};
use crate::cli::output;
use crate::cli::reporter::CliReporter;
use crate::diagnostics::Warning;
use crate::handoff::envelope::{Envelope, ErrorBody, NextAction};
use crate::ops::Dotfiles;
use crate::ops::OpsError;
use crate::ops::TargetOptions;
use crate::ops::{PlanOptions, UserEnvProbe};

/// The lockfile mode of `up`'s flags; the hidden deprecated ones warn on stderr as in the
/// reference CLI.
pub(crate) fn lockfile_mode(args: &crate::cli::args::LockfileArgs) -> crate::ops::LockfileMode {
    use crate::ops::LockfileMode;
    if args.experimental_lockfile {
        output::stderr_line(
            "warning: `--experimental-lockfile` is deprecated: lockfiles are now written by default",
        );
    }
    if args.experimental_frozen_lockfile {
        output::stderr_line(
            "warning: `--experimental-frozen-lockfile` is deprecated: use `--frozen-lockfile`",
        );
    }
    if args.no_lockfile {
        LockfileMode::Off
    } else if args.frozen_lockfile || args.experimental_frozen_lockfile {
        LockfileMode::Frozen
    } else {
        LockfileMode::Write
    }
}

/// The target options of a command (workspace folder defaults to the current directory).
/// `container_id` is `exec`'s and `run-user-commands`' `--container-id`: with it or with
/// `--id-label`s, and without `--workspace-folder`, `--config` and `--override-config`, no
/// configuration is read (as the reference).
pub(crate) fn target(
    args: &ContainerArgs,
    container_id: Option<&str>,
) -> anyhow::Result<TargetOptions> {
    let no_configuration = (container_id.is_some() || !args.id_label.is_empty())
        && args.workspace.workspace_folder.is_none()
        && args.workspace.config.is_none()
        && args.workspace.override_config.is_none();
    let workspace_folder = match &args.workspace.workspace_folder {
        Some(folder) => folder.clone(),
        None => std::env::current_dir()?,
    };
    let id_labels = args
        .id_label
        .iter()
        .map(|l| split_pair(l, "--id-label"))
        .collect::<anyhow::Result<_>>()?;
    Ok(TargetOptions {
        workspace_folder,
        config: args.workspace.config.clone(),
        mount_workspace_git_root: args.workspace.mount_workspace_git_root,
        id_labels,
        env: std::env::vars().collect(),
        workspace_override: None,
        override_config: args.workspace.override_config.clone(),
        additional_features: None,
        mount_git_worktree_common_dir: args.workspace.mount_git_worktree_common_dir,
        container_id: container_id.map(str::to_string),
        no_configuration,
        workspace_folder_given: args.workspace.workspace_folder.is_some(),
        docker_compose_path: None,
    })
}

/// The target of `exec` and `run-user-commands`: [`target`] with their `--container-id` and
/// `--docker-compose-path`.
pub(crate) fn in_container_target<T: clap::Args>(
    args: &InContainerArgs<T>,
) -> anyhow::Result<TargetOptions> {
    Ok(TargetOptions {
        docker_compose_path: args.common.host.docker_compose_path.clone(),
        ..target(&args.container, args.container_id.as_deref())?
    })
}

/// Applies `--log-format` (stderr as JSON log events) for the rest of the run.
pub(crate) fn apply_log_args(args: &LogArgs) {
    output::set_log_format_json(args.log_format == LogFormat::Json);
}

/// A reference flag devcell deliberately does not support: an error naming it, why, and what
/// to do instead (given when `given`).
pub(crate) fn refuse(
    flag: &str,
    given: bool,
    command: &str,
    why: &str,
    hint: &str,
) -> Result<(), OpsError> {
    if !given {
        return Ok(());
    }
    Err(OpsError::Unsupported {
        message: format!("`{flag}` is not supported by `devcell {command}`: {why}"),
        hint: Some(hint.to_string()),
    })
}

/// The dotfiles request of the three `--dotfiles-*` flags (spec-note 0645); `None` without
/// `--dotfiles-repository`.
pub(crate) fn dotfiles(args: &DotfilesArgs) -> anyhow::Result<Option<Dotfiles>> {
    Dotfiles::from_flags(
        args.dotfiles_repository.as_deref(),
        args.dotfiles_install_command.as_deref(),
        args.dotfiles_target_path.as_deref(),
    )
    .map_err(|e| {
        anyhow::anyhow!("{e}: give a repository URL, `owner/repo` or a path inside the container")
    })
}

/// `NAME=VALUE` (the name non-empty).
pub(crate) fn split_pair(text: &str, flag: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => bail!("`{flag}` expects `NAME=VALUE`, found `{text}`"),
    }
}

/// `--remote-env` pairs and the default env probe.
pub(crate) fn remote(
    args: &RemoteArgs,
) -> anyhow::Result<(IndexMap<String, String>, UserEnvProbe)> {
    let env = args
        .remote_env
        .iter()
        .map(|p| split_pair(p, "--remote-env"))
        .collect::<anyhow::Result<_>>()?;
    let probe = args
        .default_user_env_probe
        .as_deref()
        .and_then(UserEnvProbe::from_property)
        .unwrap_or_default();
    Ok((env, probe))
}

/// The plan flags and the secrets.
pub(crate) fn hooks(args: &HookArgs) -> anyhow::Result<(PlanOptions, IndexMap<String, String>)> {
    let plan = PlanOptions {
        skip_post_create: args.skip_post_create,
        skip_post_attach: args.skip_post_attach,
        skip_non_blocking_commands: args.skip_non_blocking_commands,
        prebuild: args.prebuild,
        ..PlanOptions::default()
    };
    let secrets = match &args.secrets_file {
        Some(path) => crate::ops::read_secrets_file(Path::new(path))?,
        None => IndexMap::new(),
    };
    Ok((plan, secrets))
}

/// The size of the terminal on stdin, then each new size after a `SIGWINCH`, for a TTY in the
/// container that follows devcell's terminal (spec-note 0273). Needs a tokio runtime context
/// (the signal is watched by a spawned task). `None` when stdin is not a terminal.
pub(crate) fn terminal_sizes() -> Option<tokio::sync::watch::Receiver<crate::ops::TtySize>> {
    use tokio::signal::unix::{SignalKind, signal};
    let read = || {
        rustix::termios::tcgetwinsize(std::io::stdin())
            .ok()
            .map(|w| crate::ops::TtySize {
                rows: w.ws_row,
                cols: w.ws_col,
            })
    };
    let (tx, rx) = tokio::sync::watch::channel(read()?);
    if let Ok(mut winch) = signal(SignalKind::window_change()) {
        tokio::spawn(async move {
            while winch.recv().await.is_some() && !tx.is_closed() {
                if let Some(size) = read() {
                    tx.send_if_modified(|current| {
                        let changed = *current != size;
                        *current = size;
                        changed
                    });
                }
            }
        });
    }
    Some(rx)
}

/// A multi-threaded tokio runtime for one command: the only one the process starts (library
/// operations are `async` and never start their own). [`block_on`] and [`own_block_on`] use it;
/// a command that also spawns tasks beside its operation (`exec`, `handoff`) holds it itself.
///
/// A signal that ends devcell (`SIGTERM`, `SIGINT`, `SIGHUP`) first kills the process groups of
/// the programs it waits for (Compose, credential helpers, host git, `initializeCommand`;
/// [`crate::process::kill_running`], spec-note 0425), then exits with 128 + the signal, as the
/// signal would have. `handoff` and the egress proxy handle their signals themselves
/// ([`runtime_own_signals`]).
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    let rt = runtime_own_signals()?;
    {
        let _context = rt.enter();
        exit_on_signals();
    }
    Ok(rt)
}

/// The command's runtime without [`runtime`]'s signal handling.
pub(crate) fn runtime_own_signals() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `SIGTERM`, `SIGINT` and `SIGHUP` kill the running programs' groups, then end devcell with
/// 128 + the signal (needs a runtime context).
fn exit_on_signals() {
    use tokio::signal::unix::{SignalKind, signal};
    for (kind, number) in [
        (SignalKind::terminate(), 15),
        (SignalKind::interrupt(), 2),
        (SignalKind::hangup(), 1),
    ] {
        if let Ok(mut stream) = signal(kind) {
            tokio::spawn(async move {
                if stream.recv().await.is_some() {
                    crate::process::kill_running();
                    std::process::exit(128 + number);
                }
            });
        }
    }
}

/// Runs a library operation to completion on the command's [`runtime`], which ends with it.
pub(crate) fn block_on<F: Future>(operation: F) -> anyhow::Result<F::Output> {
    Ok(runtime()?.block_on(operation))
}

/// [`block_on`] for devcell's own commands: a runtime that cannot start is the operation's
/// error, for the envelope.
pub(crate) fn own_block_on<T>(
    operation: impl Future<Output = Result<T, OpsError>>,
) -> Result<T, OpsError> {
    runtime()
        .map_err(|e| OpsError::Unsupported {
            message: e.to_string(),
            hint: None,
        })?
        .block_on(operation)
}

/// [`own_block_on`] after the command's `--config-file` is read and checked (accepted like
/// every devcell command's, and read first).
pub(crate) fn own_block_on_checked<T>(
    config_file: Option<&Path>,
    operation: impl Future<Output = Result<T, OpsError>>,
) -> Result<T, OpsError> {
    crate::settings::load(config_file).map_err(OpsError::from)?;
    own_block_on(operation)
}

/// Runs `operation` with progress on stderr ([`CliReporter`]; its spinner cleared before the
/// result or the error is printed) through [`block_on`].
pub(crate) fn with_progress<F: Future>(
    operation: impl FnOnce(Arc<CliReporter>) -> F,
) -> anyhow::Result<F::Output> {
    let reporter = Arc::new(CliReporter::stderr());
    let result = block_on(operation(reporter.clone()));
    reporter.finish();
    result
}

/// What `up` and `build` ask of the environment record: required with `--environment-out`,
/// kept in the state folder always (spec-note 0520).
///
/// Errors: the `--environment` record cannot be read.
pub(crate) fn environment_request(
    args: &crate::cli::args::EnvironmentArgs,
) -> Result<crate::ops::environment::EnvironmentRequest, OpsError> {
    let recorded = match &args.environment {
        Some(path) => Some((path.clone(), crate::ops::environment::read_record(path)?)),
        None => None,
    };
    Ok(crate::ops::environment::EnvironmentRequest {
        required: args.environment_out.is_some(),
        store: crate::ops::environment::EnvironmentStore::open_default(),
        recorded,
        allow_drift: args.allow_drift,
    })
}

/// Writes the record to `--environment-out`, when asked.
///
/// Errors: the file cannot be written.
pub(crate) fn write_environment(
    args: &crate::cli::args::EnvironmentArgs,
    record: Option<&crate::ops::environment::EnvironmentRecord>,
) -> anyhow::Result<()> {
    if let (Some(path), Some(record)) = (&args.environment_out, record) {
        crate::ops::environment::write_record(path, record)?;
    }
    Ok(())
}

/// A recorded bring-up (`up`, `build`) with progress on stderr: the `--environment` record
/// asked of it ([`environment_request`]), then its record written to `--environment-out`
/// ([`write_environment`]).
///
/// Errors: the record cannot be read or written; the operation's.
pub(crate) fn run_recorded<T, E, F>(
    args: &crate::cli::args::EnvironmentArgs,
    operation: impl FnOnce(crate::ops::environment::EnvironmentRequest, Arc<CliReporter>) -> F,
) -> anyhow::Result<T>
where
    F: Future<Output = Result<(T, Option<crate::ops::environment::EnvironmentRecord>), E>>,
    anyhow::Error: From<E>,
{
    let request = environment_request(args)?;
    let (result, record) = with_progress(|reporter| operation(request, reporter))??;
    write_environment(args, record.as_ref())?;
    Ok(result)
}

/// A bring-up's result the reference CLI's way: its warnings on stderr and the result line on
/// stdout (exit 0), or the error as the result line's error form (exit 1).
pub(crate) fn print_result<T>(
    result: anyhow::Result<T>,
    warnings: impl Fn(&T) -> &[Warning],
    to_json: impl Fn(&T) -> serde_json::Value,
) -> anyhow::Result<ExitCode> {
    match result {
        Ok(result) => {
            for warning in warnings(&result) {
                output::warning(warning);
            }
            output::json(&to_json(&result));
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            output::error_result(&err);
            // a refused reproduction has its own exit code (spec-note 0520); the reference's
            // failures exit 1
            let drift = matches!(
                err.downcast_ref::<OpsError>(),
                Some(OpsError::EnvironmentDrift { .. } | OpsError::RecordedFeatureGone { .. })
            );
            Ok(ExitCode::from(if drift { 18 } else { 1 }))
        }
    }
}

/// The `--workspace-folder` of a devcell command, defaulting to the current directory.
pub(crate) fn folder(given: Option<&Path>) -> std::path::PathBuf {
    given
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default()
}

/// The envelope of a failed devcell command: its code, message, details, and its hint as a
/// manual next action.
pub(crate) fn failure(err: &OpsError) -> Envelope<()> {
    let mut details = err.details();
    // the causes stderr shows as `caused by:` lines (spec-note 0326)
    let causes: Vec<String> = std::iter::successors(std::error::Error::source(err), |e| e.source())
        .map(ToString::to_string)
        .collect();
    if let (Some(obj), false) = (details.as_object_mut(), causes.is_empty()) {
        obj.entry("causes").or_insert_with(|| causes.into());
    }
    let mut env =
        Envelope::failure(ErrorBody::new(err.code(), err.to_string()).with_details(details));
    if let Some(hint) = crate::diagnostics::Hint::hint(err) {
        env = env.with_next_action(NextAction::manual(hint));
    }
    for (description, argv) in err.next_actions() {
        env = env.with_next_action(NextAction::command(description, argv));
    }
    env
}

/// Renders a devcell command's outcome: the envelope on stdout with `--format json`, else
/// `render(result)` on stdout; an error is rendered on stderr in both formats. Returns the
/// documented exit code (spec-notes/0163).
pub(crate) fn finish<T: serde::Serialize>(
    format: Format,
    result: Result<T, OpsError>,
    render: impl FnOnce(&T) -> String,
    decorate: impl FnOnce(&T) -> Extras,
) -> ExitCode {
    match result {
        Ok(value) => {
            match format {
                Format::Json => {
                    let extras = decorate(&value);
                    let mut env = Envelope::success(&value);
                    for (code, message) in extras.warnings {
                        env = env.with_warning(code, message);
                    }
                    env.next_actions = extras.next_actions;
                    output::envelope(&env);
                }
                Format::Text => output::text(&render(&value)),
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            let env = failure(&err);
            if format == Format::Json {
                output::envelope(&env);
            }
            output::error(&anyhow::Error::new(err));
            exit(env.exit_code())
        }
    }
}

/// Warnings and next actions added to a success envelope.
#[derive(Debug, Default)]
pub(crate) struct Extras {
    /// `(code, message)` pairs.
    pub warnings: Vec<(String, String)>,
    /// Next actions.
    pub next_actions: Vec<NextAction>,
}

/// An exit code from an `i32` (clamped to 0..=255).
pub(crate) fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(255))
}
