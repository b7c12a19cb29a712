//! One module per subcommand, named like it. Each turns args into options, calls `handoff`,
//! and renders the result.

pub mod down;
pub mod exec;
pub mod features_package;
pub mod features_publish;
pub mod features_resolve_dependencies;
pub mod outdated;
pub mod read_configuration;
pub mod run_user_commands;
pub mod up;
pub mod upgrade;

use std::path::Path;

use anyhow::{Context, bail};
use indexmap::IndexMap;

use crate::cli::args::{ContainerArgs, HookArgs, RemoteArgs};
use crate::handoff::TargetOptions;
use crate::handoff::{PlanOptions, UserEnvProbe};

/// The target options of a command (workspace folder defaults to the current directory).
pub(crate) fn target(args: &ContainerArgs) -> anyhow::Result<TargetOptions> {
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
pub(crate) fn hooks(
    args: &HookArgs,
    prebuild: bool,
) -> anyhow::Result<(PlanOptions, IndexMap<String, String>)> {
    let plan = PlanOptions {
        skip_post_create: args.skip_post_create,
        skip_post_attach: args.skip_post_attach,
        skip_non_blocking_commands: args.skip_non_blocking_commands,
        prebuild,
    };
    let secrets = match &args.secrets_file {
        Some(path) => crate::handoff::read_secrets_file(Path::new(path))?,
        None => IndexMap::new(),
    };
    Ok((plan, secrets))
}

/// A multi-threaded tokio runtime for one command.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
