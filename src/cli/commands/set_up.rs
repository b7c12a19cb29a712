//! `devcell set-up`.

use std::process::ExitCode;

use crate::cli::args::SetUpArgs;
use crate::cli::commands::{apply_log_args, refuse_dotfiles, remote, runtime};
use crate::cli::output;
use crate::cli::reporter::CliReporter;
use crate::ops::{PlanOptions, SecurityOptions, SetUpOptions, set_up};

/// Runs `set-up`: `{"outcome":"success",["configuration"],["mergedConfiguration"],
/// "devcell":{…}}` on stdout (one line), progress, hook output and the container's weaknesses
/// on stderr. A failure (a refused container, a failed hook) prints the error result and
/// exits 1.
pub fn run(args: SetUpArgs) -> anyhow::Result<ExitCode> {
    apply_log_args(&args.log);
    let result = (|| {
        refuse_dotfiles(&args.dotfiles, "set-up")?;
        let (remote_env, probe) = remote(&args.remote)?;
        let settings = crate::settings::load(args.config_file.as_deref())?;
        let opts = SetUpOptions {
            container_id: args.container_id.clone(),
            config: args.config.clone(),
            env: std::env::vars().collect(),
            plan: PlanOptions {
                skip_post_create: args.skip_post_create,
                skip_non_blocking_commands: args.skip_non_blocking_commands,
                ..PlanOptions::default()
            },
            remote_env,
            default_user_env_probe: probe,
            include_configuration: args.include_configuration,
            include_merged_configuration: args.include_merged_configuration,
            container_data_folder: args.container_data.container_data_folder.clone(),
            security: SecurityOptions {
                profile: args.security_profile.clone(),
                allow: args.allow.clone(),
                ..SecurityOptions::default()
            },
            settings,
        };
        let reporter = CliReporter::stderr();
        let result = runtime()?.block_on(set_up(&opts, &reporter))?;
        reporter.finish();
        anyhow::Ok(result)
    })();
    match result {
        Ok(result) => {
            for warning in &result.warnings {
                output::warning(warning);
            }
            output::json(&result.to_json());
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            output::error_result(&err);
            Ok(ExitCode::from(1))
        }
    }
}
