//! `devcell up`.

use std::process::ExitCode;

use crate::cli::args::{UidDefault, UpArgs};
use crate::cli::commands::{
    apply_log_args, dotfiles, hooks, lockfile_mode, print_result, refuse, remote, run_recorded,
    target,
};
use crate::ops::environment::up_recorded;
use crate::ops::{ImageBuildOptions, SecurityOptions, UidUpdateDefault, UpOptions};

/// Runs `up`: the result JSON on stdout (one line), progress (a spinner on a terminal, plain
/// lines otherwise; [`CliReporter`]) and hook output on stderr.
/// A failure prints the error result and exits 1.
pub fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    apply_log_args(&args.common.log);
    let result = (|| {
        refuse(
            "--cache-to",
            args.image.cache_to.is_some(),
            "up",
            "devcell keeps the layer cache in the engine",
            "drop `--cache-to`; `--cache-from` with a pushed image works",
        )?;
        let (remote_env, probe) = remote(&args.remote)?;
        let (plan, secrets) = hooks(&args.hooks)?;
        let settings = crate::settings::load(args.config_file.as_deref())?;
        let mut target = target(&args.container, None)?;
        target.additional_features = args.additional_features.clone();
        target.docker_compose_path = args.common.host.docker_compose_path.clone();
        let opts = UpOptions {
            target,
            remove_existing_container: args.remove_existing_container,
            expect_existing_container: args.expect_existing_container,
            plan,
            dotfiles: dotfiles(&args.hooks.dotfiles)?,
            include_configuration: args.include.include_configuration,
            include_merged_configuration: args.include.include_merged_configuration,
            remote_env,
            secrets,
            mounts: crate::ops::options::parse_mounts(&args.mount)?,
            build: ImageBuildOptions {
                no_cache: args.image.build_no_cache,
                cache_from: args.image.cache_from.clone(),
                omit_config_remote_env: args.hidden.omit_config_remote_env_from_metadata,
                ..ImageBuildOptions::default()
            },
            default_user_env_probe: probe,
            security: SecurityOptions {
                profile: args.security_profile,
                allow: args.allow.clone(),
                pids_limit: args.limits.pids_limit,
                memory: args.limits.memory.clone(),
                cpus: args.limits.cpus,
                network: args.network,
                egress_allow: args.egress_allow.clone(),
                agent: None,
            },
            settings,
            cache_dir: args.cache_dir.clone(),
            lockfile: lockfile_mode(&args.lockfile),
            safe_directories: Vec::new(),
            covers: Vec::new(),
            git_baseline: None,
            owned_sources: Vec::new(),
            // set from the `--environment` record by `up_recorded`
            recorded_features: None,
            // set by the registry judgement
            registry_hosts: None,
            update_remote_user_uid_default: match args.update_remote_user_uid_default {
                UidDefault::On => UidUpdateDefault::On,
                UidDefault::Off => UidUpdateDefault::Off,
                UidDefault::Never => UidUpdateDefault::Never,
            },
            gpu_availability: args.gpu_availability,
        };
        run_recorded(&args.environment, |request, reporter| async move {
            up_recorded(&opts, &request, &*reporter).await
        })
    })();
    print_result(
        result,
        |r| r.warnings.get(r.shown_warnings..).unwrap_or_default(),
        |r| r.to_json(),
    )
}
