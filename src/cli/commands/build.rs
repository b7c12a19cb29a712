//! `devcell build`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::cli::args::BuildArgs;
use crate::cli::commands::{apply_log_args, lockfile_mode, print_result, run_recorded, split_pair};
use crate::ops::environment::build_recorded;
use crate::ops::{BuildOptions, ImageBuildOptions, OpsError, SecurityOptions, TargetOptions};

/// Runs `build`: `{"outcome":"success","imageName":[…],"devcell":{…}}` on stdout (one line),
/// progress and build output on stderr. A failure prints the error result and exits 1.
pub fn run(args: BuildArgs) -> anyhow::Result<ExitCode> {
    apply_log_args(&args.common.log);
    let result = (|| {
        refuse_unsupported(&args)?;
        let labels = args
            .label
            .iter()
            .map(|l| split_pair(l, "--label"))
            .collect::<anyhow::Result<BTreeMap<_, _>>>()?;
        let settings = crate::settings::load(args.config_file.as_deref())?;
        let workspace_folder = args.location.workspace_folder_or_current()?;
        let opts = BuildOptions {
            // As the reference's `build`: the workspace folder itself, not its git root.
            target: TargetOptions {
                workspace_folder,
                config: args.location.config.clone(),
                mount_workspace_git_root: false,
                env: std::env::vars().collect(),
                docker_compose_path: args.common.host.docker_compose_path.clone(),
                ..TargetOptions::default()
            },
            image_names: args.image_names.clone(),
            push: args.push,
            image: ImageBuildOptions {
                no_cache: args.no_cache,
                cache_from: args.cache_from.clone(),
                labels,
                bake_metadata_label: true,
                omit_config_remote_env: args.hidden.omit_config_remote_env_from_metadata,
                omit_feature_customizations: args.skip_persisting_customizations_from_features,
                ..ImageBuildOptions::default()
            },
            security: SecurityOptions {
                profile: args.security_profile,
                allow: args.allow.clone(),
                ..SecurityOptions::default()
            },
            settings,
            cache_dir: args.cache_dir.clone(),
            lockfile: lockfile_mode(&args.lockfile),
            // set from the `--environment` record by `build_recorded`
            recorded_features: None,
        };
        run_recorded(&args.environment, |request, reporter| async move {
            build_recorded(&opts, &request, &*reporter).await
        })
    })();
    print_result(
        result,
        |r| r.warnings.get(r.shown_warnings..).unwrap_or_default(),
        |r| r.to_json(),
    )
}

/// The reference CLI's BuildKit-only and `--additional-features` flags, which devcell cannot
/// honour: an error naming the flag, before anything is built.
fn refuse_unsupported(args: &BuildArgs) -> Result<(), OpsError> {
    let unsupported = [
        (
            "--platform",
            args.platform.is_some(),
            "devcell builds through the engine's API for the engine's own platform",
            "build on a machine of that platform (or with `docker buildx` from the Dockerfile)",
        ),
        (
            "--output",
            args.output.is_some(),
            "devcell loads the image into the engine",
            "use `--image-name <registry>/<repository>:<tag> --push`, or `docker save` the image",
        ),
        (
            "--cache-to",
            args.cache_to.is_some(),
            "devcell keeps the layer cache in the engine",
            "drop `--cache-to`; `--cache-from` with a pushed image works",
        ),
        (
            "--additional-features",
            args.additional_features.is_some(),
            "`devcell build` installs the Features devcontainer.json lists",
            "add the Features to `features` in devcontainer.json",
        ),
    ];
    match unsupported.into_iter().find(|(_, given, _, _)| *given) {
        Some((flag, _, why, hint)) => Err(OpsError::Unsupported {
            message: format!("`{flag}` is not supported by `devcell build`: {why}"),
            hint: Some(hint.to_string()),
        }),
        None => Ok(()),
    }
}
