//! `devcell run-user-commands`.

use std::process::ExitCode;

use crate::cli::args::RunUserCommandsArgs;
use crate::cli::commands::{hooks, remote, runtime, target};
use crate::cli::output::{self, StderrReporter};
use crate::handoff::{RunUserCommandsOptions, run_user_commands};

/// Runs `run-user-commands`: `{"outcome":"success","result":"done"|"prebuild"|"skipNonBlocking"}`
/// on stdout; a failure prints the error result and exits 1.
pub fn run(args: RunUserCommandsArgs) -> anyhow::Result<ExitCode> {
    let result = (|| {
        let (remote_env, probe) = remote(&args.remote)?;
        let (plan, secrets) = hooks(&args.hooks, args.prebuild)?;
        let opts = RunUserCommandsOptions {
            target: target(&args.container)?,
            plan,
            remote_env,
            secrets,
            default_user_env_probe: probe,
        };
        let report = runtime()?.block_on(run_user_commands(&opts, &StderrReporter))?;
        anyhow::Ok((report, plan))
    })();
    match result {
        Ok((report, plan)) => {
            let kind = if plan.prebuild {
                "prebuild"
            } else if plan.skip_non_blocking_commands {
                "skipNonBlocking"
            } else {
                "done"
            };
            output::json(&serde_json::json!({
                "outcome": "success",
                "result": kind,
                "devcell": {"lifecycle": report},
            }));
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            output::error_result(&err);
            Ok(ExitCode::from(1))
        }
    }
}
