//! `devcell ports`.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::cli::args::{OutputFormat, PortsArgs};
use crate::cli::commands::{apply_log_args, block_on, runtime_own_signals, target};
use crate::cli::output::{self, StderrReporter};
use crate::ops::ports::{PortsOptions, open};
use crate::ops::ports_detached;

/// Runs `ports`: binds every forward, prints one line per forward on stderr (and the list as
/// one JSON line on stdout with `--output-format json`), then relays connections until
/// `SIGINT`, `SIGTERM` or `SIGHUP`, which close the listeners and end the relays (exit 0).
/// `--detach` starts that in the background and returns once it listens; `--stop` stops the
/// background ones of the container.
pub fn run(args: PortsArgs) -> anyhow::Result<ExitCode> {
    apply_log_args(&args.common.log);
    let opts = PortsOptions {
        target: crate::ops::TargetOptions {
            docker_compose_path: args.common.host.docker_compose_path.clone(),
            ..target(&args.container, args.container_id.as_deref())?
        },
        ports: args.port,
        allow: args.allow,
    };
    if args.stop {
        let stopped = block_on(ports_detached::stop(&opts.target))??;
        output::stderr_line(&format!(
            "[devcell] stopped {} background forwarder(s)",
            stopped.len()
        ));
        if args.output_format == OutputFormat::Json {
            output::json(&serde_json::json!({"outcome": "success", "stopped": stopped}));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.detach {
        return detach(args.output_format);
    }
    let detached = args.detached_record.is_some();
    let rt = runtime_own_signals()?;
    rt.block_on(async {
        // Watched before anything listens, so a signal during the set-up is not lost.
        let stop = stop_signal(!detached)?;
        let forwarding = open(&opts, &StderrReporter).await?;
        for skipped in forwarding.not_forwarded() {
            output::stderr_line(&format!(
                "[devcell] not forwarding `{}`: {}",
                skipped.entry, skipped.reason
            ));
        }
        for forward in forwarding.forwards() {
            output::stderr_line(&format!("[devcell] forwarding {}", forward.describe()));
        }
        // the detached forwarder's one stdout line is what `--detach` waits for
        if detached || args.output_format == OutputFormat::Json {
            output::json(&forwarding.to_json());
        }
        forwarding.serve(stop, &StderrReporter).await;
        // a detached forwarder that ends on its own (its container stopped) leaves no record
        if let (Some(key), Some(state)) = (
            args.detached_record.as_deref(),
            crate::ops::state_folder::default_root(),
        ) {
            ports_detached::forget_own(&state, key);
        }
        output::stderr_line("[devcell] stopped forwarding");
        anyhow::Ok(())
    })?;
    rt.shutdown_background();
    Ok(ExitCode::SUCCESS)
}

/// `ports --detach`: starts this command line again without `--detach` as a background
/// forwarder (recorded in the state folder), prints its forwards and returns.
fn detach(format: OutputFormat) -> anyhow::Result<ExitCode> {
    let state = crate::ops::state_folder::default_root().ok_or_else(|| {
        anyhow::anyhow!(
            "`ports --detach` records its forwarder in devcell's state folder, and none is known (no home folder): set {}",
            crate::ops::state_folder::STATE_DIR_ENV
        )
    })?;
    let args: Vec<OsString> = std::env::args_os()
        .skip(1)
        .filter(|a| a != "--detach")
        .collect();
    let record = ports_detached::start(&state, &args)?;
    for skipped in &record.listening.not_forwarded {
        output::stderr_line(&format!(
            "[devcell] not forwarding `{}`: {}",
            skipped.entry, skipped.reason
        ));
    }
    for forward in &record.listening.forwards {
        output::stderr_line(&format!("[devcell] forwarding {}", forward.describe()));
    }
    output::stderr_line(&format!(
        "[devcell] forwarding in the background (pid {}): `devcell ports --stop` or `devcell down` stops it",
        record.pid
    ));
    if format == OutputFormat::Json {
        output::json(&serde_json::to_value(&record)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// Completes at the first `SIGINT` or `SIGTERM`, and `SIGHUP` when `hangup` (a detached
/// forwarder outlives the terminal it was started from). Needs the runtime's context.
fn stop_signal(hangup: bool) -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut streams = [
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
        signal(SignalKind::hangup())?,
    ];
    Ok(async move {
        let [a, b, c] = &mut streams;
        tokio::select! {
            _ = a.recv() => {}
            _ = b.recv() => {}
            _ = c.recv(), if hangup => {}
        }
    })
}
