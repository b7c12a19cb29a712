//! `devcell run-user-commands`.

use std::process::ExitCode;

use crate::cli::args::RunUserCommandsArgs;
use crate::cli::commands::{
    apply_log_args, block_on, dotfiles, hooks, in_container_target, remote,
};
use crate::cli::output::{self, StderrReporter};
use crate::ops::{RunUserCommandsOptions, run_user_commands};

/// Runs `run-user-commands`: `{"outcome":"success","result":"done"|"prebuild"|"skipNonBlocking"}`
/// on stdout; a failure prints the error result and exits 1.
pub fn run(args: RunUserCommandsArgs) -> anyhow::Result<ExitCode> {
    apply_log_args(&args.common.log);
    let result = (|| {
        let (remote_env, probe) = remote(&args.remote)?;
        let (mut plan, secrets) = hooks(&args.own.hooks)?;
        plan.stop_for_personalization = args.own.stop_for_personalization;
        let opts = RunUserCommandsOptions {
            target: in_container_target(&args)?,
            plan,
            dotfiles: dotfiles(&args.own.hooks.dotfiles)?,
            remote_env,
            secrets,
            default_user_env_probe: probe,
            allow: args.allow.clone(),
        };
        let report = block_on(run_user_commands(&opts, &StderrReporter))??;
        anyhow::Ok((report, plan))
    })();
    match result {
        Ok((report, plan)) => {
            // the reference's result: `--prebuild` and `--skip-non-blocking-commands` stop
            // before the personalization step (the latter when `waitFor` comes before it)
            let kind = if plan.prebuild {
                "prebuild"
            } else if plan.stop_for_personalization && !plan.skip_non_blocking_commands {
                "stopForPersonalization"
            } else if plan.skip_non_blocking_commands {
                "skipNonBlocking"
            } else {
                "done"
            };
            let mut devcell = serde_json::json!({"lifecycle": report.lifecycle});
            if !report.quarantined_git.is_empty() {
                devcell["quarantinedGit"] = serde_json::json!(report.quarantined_git);
            }
            output::json(&serde_json::json!({
                "outcome": "success",
                "result": kind,
                "devcell": devcell,
            }));
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            output::error_result(&err);
            Ok(ExitCode::from(1))
        }
    }
}
