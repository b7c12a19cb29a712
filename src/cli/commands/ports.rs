//! `devcell ports`.

use std::process::ExitCode;

use crate::cli::args::{OutputFormat, PortsArgs};
use crate::cli::commands::{apply_log_args, runtime_own_signals, target};
use crate::cli::output::{self, StderrReporter};
use crate::ops::ports::{PortsOptions, open};

/// Runs `ports`: binds every forward, prints one line per forward on stderr (and the list as
/// one JSON line on stdout with `--output-format json`), then relays connections until
/// `SIGINT`, `SIGTERM` or `SIGHUP`, which close the listeners and end the relays (exit 0).
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
    let rt = runtime_own_signals()?;
    rt.block_on(async {
        // Watched before anything listens, so a signal during the set-up is not lost.
        let stop = stop_signal()?;
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
        if args.output_format == OutputFormat::Json {
            output::json(&forwarding.to_json());
        }
        forwarding.serve(stop, &StderrReporter).await;
        output::stderr_line("[devcell] stopped forwarding");
        anyhow::Ok(())
    })?;
    rt.shutdown_background();
    Ok(ExitCode::SUCCESS)
}

/// Completes at the first `SIGINT`, `SIGTERM` or `SIGHUP` (needs the runtime's context).
fn stop_signal() -> anyhow::Result<impl Future<Output = ()>> {
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
            _ = c.recv() => {}
        }
    })
}
