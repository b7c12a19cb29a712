//! `devcell set-up`.

use std::process::ExitCode;

use crate::cli::args::SetUpArgs;
use crate::cli::commands::{apply_log_args, dotfiles, print_result, remote, with_progress};
use crate::ops::{PlanOptions, SecurityOptions, SetUpOptions, set_up};

/// Runs `set-up`: `{"outcome":"success",["configuration"],["mergedConfiguration"],
/// "devcell":{…}}` on stdout (one line), progress, hook output and the container's weaknesses
/// on stderr. A failure (a refused container, a failed hook) prints the error result and
/// exits 1.
pub fn run(args: SetUpArgs) -> anyhow::Result<ExitCode> {
    apply_log_args(&args.common.log);
    let result = (|| {
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
            dotfiles: dotfiles(&args.dotfiles)?,
            remote_env,
            default_user_env_probe: probe,
            include_configuration: args.include.include_configuration,
            include_merged_configuration: args.include.include_merged_configuration,
            container_data_folder: args.container_data.container_data_folder.clone(),
            security: SecurityOptions {
                profile: args.security_profile,
                allow: args.allow.clone(),
                ..SecurityOptions::default()
            },
            settings,
            workspace_git_dirs: crate::handoff::audit::workspace_git_dirs,
            refuse_before_running: None,
            workspace_folder: None,
        };
        let result = with_progress(|reporter| async move { set_up(&opts, &*reporter).await });
        anyhow::Ok(result??)
    })();
    print_result(result, |r| &r.warnings, |r| r.to_json())
}
