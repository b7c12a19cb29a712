//! `devcell up`.

use std::process::ExitCode;

use crate::cli::args::UpArgs;
use crate::cli::commands::{hooks, lockfile_mode, remote, runtime, target};
use crate::cli::output;
use crate::cli::reporter::CliReporter;
use crate::handoff::{SecurityOptions, UpOptions, up};

/// Runs `up`: the result JSON on stdout (one line), progress (a spinner on a terminal, plain
/// lines otherwise; [`CliReporter`]) and hook output on stderr.
/// A failure prints the error result and exits 1.
pub fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    let result = (|| {
        let (remote_env, probe) = remote(&args.remote)?;
        let (plan, secrets) = hooks(&args.hooks, false)?;
        let settings = crate::settings::load(args.config_file.as_deref())?;
        let opts = UpOptions {
            target: target(&args.container)?,
            remove_existing_container: args.remove_existing_container,
            expect_existing_container: args.expect_existing_container,
            plan,
            include_configuration: args.include_configuration,
            include_merged_configuration: args.include_merged_configuration,
            remote_env,
            secrets,
            mounts: args.mount.clone(),
            build: Default::default(),
            default_user_env_probe: probe,
            security: SecurityOptions {
                profile: args.security_profile.clone(),
                allow: args.allow.clone(),
                pids_limit: args.pids_limit,
                memory: args.memory.clone(),
                cpus: args.cpus,
                network: args.network.clone(),
            },
            settings,
            cache_dir: args.cache_dir.clone(),
            lockfile: lockfile_mode(&args.lockfile),
            safe_directories: Vec::new(),
        };
        // Dropped (spinner cleared) before the result or the error is printed.
        let reporter = CliReporter::stderr();
        let result = runtime()?.block_on(up(&opts, &reporter))?;
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
