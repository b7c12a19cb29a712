//! clap argument structs only. Doc comments are the `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// devcell: Dev Containers, hardened by default, handed to coding agents.
#[derive(Debug, Parser)]
#[command(name = "devcell", version, about)]
pub struct Cli {
    /// Log level for stderr diagnostics (`error`, `warn`, `info`, `debug`, `trace`).
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// devcell's subcommands; names and flags follow `@devcontainers/cli`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read, substitute and print a devcontainer.json as JSON.
    ReadConfiguration(ReadConfigurationArgs),
    /// Feature tools: resolve-dependencies, package, publish.
    #[command(subcommand)]
    Features(FeaturesCommand),
}

/// `devcell features …` subcommands.
#[derive(Debug, Subcommand)]
pub enum FeaturesCommand {
    /// Print the install order of the configuration's Features as JSON
    /// (`{"installOrder": [{"id": …, "options": …}]}`).
    ResolveDependencies(FeaturesResolveDependenciesArgs),
    /// Package Features into `devcontainer-feature-<id>.tgz` files and `devcontainer-collection.json`.
    Package(FeaturesPackageArgs),
    /// Package and publish Features to an OCI registry.
    Publish(FeaturesPublishArgs),
}

/// `devcell features resolve-dependencies`.
#[derive(Debug, Args)]
pub struct FeaturesResolveDependenciesArgs {
    /// The workspace folder (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// The devcontainer.json to use (default: discovered in the workspace).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Cache folder for Feature artifacts (default `$XDG_CACHE_HOME/devcell`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Use only the cache; fail on anything not cached.
    #[arg(long)]
    pub offline: bool,
}

/// `devcell features package`.
#[derive(Debug, Args)]
pub struct FeaturesPackageArgs {
    /// A Feature folder, or a collection folder (`src/`) with one sub-folder per Feature.
    pub target: PathBuf,
    /// Output folder.
    #[arg(short = 'o', long, default_value = "./output")]
    pub output_folder: PathBuf,
    /// Remove previously packaged files from the output folder first.
    #[arg(short = 'f', long)]
    pub force_clean_output_folder: bool,
}

/// `devcell features publish`.
#[derive(Debug, Args)]
pub struct FeaturesPublishArgs {
    /// A Feature folder, or a collection folder (`src/`) with one sub-folder per Feature.
    pub target: PathBuf,
    /// Registry host (loopback registries are reached over plain HTTP).
    #[arg(short = 'r', long, default_value = "ghcr.io")]
    pub registry: String,
    /// Namespace: Features go to `<registry>/<namespace>/<id>`.
    #[arg(short = 'n', long)]
    pub namespace: String,
    /// A registry to reach over plain HTTP (repeatable).
    #[arg(long = "insecure-registry")]
    pub insecure_registries: Vec<String>,
    /// A loopback registry to reach over HTTPS nonetheless (repeatable).
    #[arg(long = "secure-registry")]
    pub secure_registries: Vec<String>,
    /// A PEM file of extra CA certificates to trust (repeatable).
    #[arg(long = "extra-ca-certificate")]
    pub extra_ca_certificates: Vec<PathBuf>,
    /// Docker config file with registry credentials (default `~/.docker/config.json`).
    #[arg(long)]
    pub docker_config: Option<PathBuf>,
}

/// Flags shared by every command that locates a workspace and its config.
#[derive(Debug, Clone, Args)]
pub struct WorkspaceArgs {
    /// The workspace folder (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// The devcontainer.json to use (default: discovered in the workspace).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Mount the git root of the workspace folder rather than the folder itself
    /// (`--mount-workspace-git-root`, `--mount-workspace-git-root true|false`; default true).
    #[arg(
        long,
        default_value_t = true,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub mount_workspace_git_root: bool,
}

/// `devcell read-configuration`.
#[derive(Debug, Args)]
pub struct ReadConfigurationArgs {
    /// Workspace and config selection.
    #[command(flatten)]
    pub workspace: WorkspaceArgs,
    /// Include the configuration merged with image metadata and Features.
    #[arg(long)]
    pub include_merged_configuration: bool,
    /// Include the Features configuration.
    #[arg(long)]
    pub include_features_configuration: bool,
}
