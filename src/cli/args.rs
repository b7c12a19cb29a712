//! clap argument structs only. Doc comments are the `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod collections;
pub use collections::*;

/// devcell: Dev Containers, hardened by default, handed to coding agents.
#[derive(Debug, Parser)]
#[command(name = "devcell", version, about)]
pub struct Cli {
    /// Log level for stderr diagnostics (`error`, `warn`, `info`, `debug`, `trace`).
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// The reference CLI's OCI bearer-realm restriction (0.89). Accepted; devcell's own rule
    /// applies: identity tokens go only to HTTPS (or loopback) token realms (spec-note 0310).
    #[arg(long, global = true)]
    pub oci_auth_hardening: bool,
    /// `<registry-host>=<auth-host>` the reference allows under `--oci-auth-hardening`
    /// (repeatable). Accepted; not used by devcell (spec-note 0310).
    #[arg(long, global = true, value_name = "REGISTRY=AUTH_HOST")]
    pub allow_cross_origin_auth_host: Vec<String>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// devcell's subcommands; names and flags follow `@devcontainers/cli`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read, substitute and print a devcontainer.json as JSON.
    ReadConfiguration(ReadConfigurationArgs),
    /// Create and run the dev container (or reuse it), then run its lifecycle hooks.
    Up(Box<UpArgs>),
    /// Run a command in the running dev container as `remoteUser`.
    Exec(ExecArgs),
    /// Run the lifecycle hooks in the running dev container.
    RunUserCommands(RunUserCommandsArgs),
    /// Build the dev container's image (Features and metadata label included) without
    /// creating a container; tag it with `--image-name`s and `--push` them.
    Build(Box<BuildArgs>),
    /// Set up an existing running container as a dev container: read its metadata label (and
    /// `--config`), then run the lifecycle hooks in it.
    SetUp(Box<SetUpArgs>),
    /// Stop the dev container (`--remove`: remove it and its devcell-owned volumes).
    Down(DownArgs),
    /// Stop the dev container (the same as `down` without `--remove`).
    Stop(ContainerArgs),
    /// Forward `forwardPorts` and `--port`s from 127.0.0.1 on the host into the running dev
    /// container, through the engine's exec API (nothing published; works under network
    /// `none`), until interrupted.
    Ports(PortsArgs),
    /// Feature tools: package, publish, resolve-dependencies, info, generate-docs, test.
    #[command(subcommand)]
    Features(FeaturesCommand),
    /// Template tools: apply, publish, metadata, generate-docs.
    #[command(subcommand)]
    Templates(TemplatesCommand),
    /// Hand a workspace to a coding agent in a hardened container (plan, up, context, agent).
    Handoff(Box<HandoffArgs>),
    /// Show a workspace's container, handoff sessions and per-repository git state.
    Status(StatusArgs),
    /// Check the engine, cgroup limits, orphaned containers, stale state and the cache.
    Doctor(DoctorArgs),
    /// Remove a workspace's container, devcell-owned volumes and state (never the worktrees).
    Delete(DeleteArgs),
    /// Fetch a clone task's branch into the repository it was cloned from
    /// (`refs/devcell/tasks/<task>`).
    Fetch(FetchArgs),
    /// Score a container's isolation (eight controls, 16 points) with the evidence.
    Audit(AuditArgs),
    /// Environment records: what an `up`, `build` or handoff resolved.
    #[command(subcommand)]
    Env(EnvCommand),
    /// The mediated mail between a repository's tasks (docs/mail.md): list, show, forward or
    /// reject held messages, post the mediator's own.
    #[command(subcommand)]
    Mail(MailCommand),
    /// Run the verification commands (`customizations.devcell.verify`, or an environment
    /// record's) in the workspace's container; exit 1 when any failed.
    Verify(VerifyArgs),
    /// Show current, wanted and latest versions of the configuration's OCI Features.
    Outdated(OutdatedArgs),
    /// Regenerate devcontainer-lock.json with the newest versions the Features allow.
    Upgrade(UpgradeArgs),
    /// Remove the images devcell built (`devcell/features:*`, `devcell/uid:*`) that no container
    /// uses.
    Prune(PruneArgs),
    /// The host-side egress proxy of one `--network allowlist` container (started by `up`
    /// and `handoff`; not for direct use).
    #[command(name = "__egress-proxy", hide = true)]
    EgressProxy(EgressProxyArgs),
}

/// `devcell __egress-proxy STATE KEY`.
#[derive(Debug, Args)]
pub struct EgressProxyArgs {
    /// devcell's state folder.
    pub state: PathBuf,
    /// The workspace's key (`<state>/egress/<key>/`).
    pub key: String,
}

/// `devcell prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// devcell user settings file (default `~/.config/devcell/config.toml`); read and checked.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// List what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Only this devcell-built image: its tag or image id (repeatable).
    #[arg(long, value_name = "REF")]
    pub image: Vec<String>,
    /// Remove orphaned clone tasks instead of images (those `doctor` lists: a task left half
    /// made, whose clone or repository is gone), then the mirrors no task uses; never a task
    /// whose clone holds commits never fetched, nor one in use.
    #[arg(long, conflicts_with = "image")]
    pub tasks: bool,
    /// Remove environment records instead of images: those no workspace has as its last
    /// record and no handoff session names, older than ten minutes; a file that cannot be
    /// read as a record is kept and reported.
    #[arg(long, conflicts_with_all = ["image", "tasks"])]
    pub environments: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Output format of devcell's own commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Human text (stderr for progress, stdout for the answer).
    #[default]
    Text,
    /// Exactly one JSON envelope on stdout (`{ok, schemaVersion, result | error, warnings,
    /// next_actions}`).
    Json,
}

/// `devcell handoff`.
#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// The workspace root: a repository, or a folder of repositories/worktrees (default: the
    /// current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// The agent to launch (`[agents.NAME]` in devcell's config.toml).
    #[arg(long)]
    pub agent: String,
    /// The task's URL (issue, pull request).
    #[arg(long)]
    pub task_url: Option<String>,
    /// The task's title.
    #[arg(long)]
    pub task_title: Option<String>,
    /// The task's provider (default: derived from the URL).
    #[arg(long)]
    pub task_provider: Option<String>,
    /// Choose the primary repository: its `.devcontainer` configures the container and the
    /// agent starts in it. Without it the primary is detected (the one repository with a
    /// `.devcontainer`) and the agent starts in the workspace root.
    #[arg(long)]
    pub primary: Option<String>,
    /// Print the plan and stop (nothing is created).
    #[arg(long)]
    pub plan: bool,
    /// Stop a live handoff session of the workspace and start a new one.
    #[arg(long)]
    pub replace: bool,
    /// Fail unless `devcontainer-lock.json` exists and matches the resolved Features (handoff
    /// never writes the lockfile; it honours it when present).
    #[arg(long, conflicts_with = "no_lockfile")]
    pub frozen_lockfile: bool,
    /// Ignore `devcontainer-lock.json`: resolve Feature tags afresh.
    #[arg(long)]
    pub no_lockfile: bool,
    /// Where the agent runs: `container` (default: the workspace's hardened dev container) or
    /// `host` (directly on this host, in the workspace, WITHOUT ANY ISOLATION; for machines
    /// without a container engine). devcell never falls back to `host` on its own.
    #[arg(long, value_parser = ["container", "host"])]
    pub runtime: Option<String>,
    /// How the container gets the repository: `worktree` (default: the user's worktree,
    /// mounted) or `clone` (a private clone per task, its branch fetched back by devcell).
    #[arg(long, value_parser = ["worktree", "clone"])]
    pub isolation: Option<String>,
    /// With `--isolation clone`: the task's name (its branch is `devcell/<task>`; default: a
    /// new unique name). An existing task of the repository is continued.
    #[arg(long, value_name = "NAME")]
    pub task: Option<String>,
    /// With `--isolation clone`: the commit the task branch starts at (default: `HEAD`).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Give the agent the mail channel to the repository's other tasks (`devcell-mail`,
    /// docs/mail.md); clone tasks have it unless `--no-mail`, worktree handoffs when
    /// `[mail].worktrees` is set. A worktree handoff's task name is `--task`, else its folder's
    /// name.
    #[arg(long, conflicts_with = "no_mail")]
    pub mail: bool,
    /// No mail channel for this handoff.
    #[arg(long)]
    pub no_mail: bool,
    /// Make the agent a member of the mediator group NAME instead of the repository's own
    /// (a group shared across workspaces: `devcell mail --mail-group NAME`, `devcell status
    /// --mail-group NAME`); implies `--mail`.
    #[arg(long, value_name = "NAME", conflicts_with = "no_mail")]
    pub mail_group: Option<String>,
    /// A verification command the agent must run before calling the task done (repeatable).
    #[arg(long, value_name = "CMD")]
    pub verify: Vec<String>,
    /// Network: `none` (default for handoff), `allowlist` (only the `--egress-allow`
    /// destinations and the configured `egress`, through devcell's host-side proxy) or
    /// `default`.
    #[arg(long, value_enum)]
    pub network: Option<crate::settings::NetworkMode>,
    /// A destination the agent may reach under `--network allowlist`:
    /// `host[:port][=address]`, `*.suffix` for names below it, port 443 unless given,
    /// `=address` to pin the address (repeatable).
    #[arg(long, value_name = "DEST")]
    pub egress_allow: Vec<String>,
    /// JSON file of secrets (`{"NAME": "value"}`) for the hooks and the agent.
    #[arg(long)]
    pub secrets_file: Option<PathBuf>,
    /// Security profile: `hardened` (default) or `reference`.
    #[arg(long, value_enum)]
    pub security_profile: Option<crate::settings::Profile>,
    /// Grant a permission (repeatable), as for `up`.
    #[arg(long, value_name = "PERMISSION")]
    pub allow: Vec<String>,
    /// Resource limits.
    #[command(flatten)]
    pub limits: ResourceLimitArgs,
    /// The environment record, as for `up` (spec-note 0520).
    #[command(flatten)]
    pub environment: EnvironmentArgs,
    /// Hand off in this container (name or id): one devcell created for this workspace, under
    /// the same profile and configuration; or a running one someone else owns that binds the
    /// workspace, audited and never started, stopped or removed (docs/environment.md).
    #[arg(long, value_name = "NAME")]
    pub container: Option<String>,
    /// With `--container` of a container devcell did not create: a mount it must have,
    /// `HOST:CONTAINER[:ro|rw]` (repeatable).
    #[arg(long, value_name = "HOST:CONTAINER[:MODE]", requires = "container")]
    pub expect_mount: Vec<String>,
    /// Share one container with the other handoffs of this group (each its own session): the
    /// first creates it; a handoff that would need another container (image, mounts,
    /// network, profile, grants, limits…) is refused, naming the difference.
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,
    /// With `--group`: `manual` (default: an agent's exit removes nothing) or `on-exit` (the
    /// group's container is removed when its last running member ends).
    #[arg(long, value_name = "POLICY", value_parser = ["on-exit", "manual"], requires = "group")]
    pub cleanup: Option<String>,
    /// The user's dotfiles, installed in the container as by `up`.
    #[command(flatten)]
    pub dotfiles: HandoffDotfilesArgs,
    /// devcell user settings file (default `~/.config/devcell/config.toml`).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `handoff`'s dotfiles flags: as `up`'s, but a path is a folder on the host, bound read-only
/// into the container (a handoff has no `--mount`; spec-note 0645).
#[derive(Debug, Clone, Args)]
pub struct HandoffDotfilesArgs {
    /// Dotfiles repository installed once in the container as the remote user: a local git
    /// repository's folder on this host (its committed HEAD, cloned inside), or a URL or
    /// `owner/repo` for GitHub (cloned inside: needs a network that reaches it)
    #[arg(long, value_name = "URL")]
    pub dotfiles_repository: Option<String>,
    /// Script of the repository to run instead of the first of install.sh, install,
    /// bootstrap.sh, bootstrap, script/bootstrap, setup.sh, setup, script/setup
    #[arg(long, value_name = "CMD")]
    pub dotfiles_install_command: Option<String>,
    /// Where the repository is cloned in the container (default `~/dotfiles`)
    #[arg(long, value_name = "PATH")]
    pub dotfiles_target_path: Option<String>,
}

/// `devcell status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The workspace root (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// devcell user settings file.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Every workspace devcell knows on this machine, each with its clone tasks and pending
    /// mail, read from devcell's state only (no engine is asked).
    #[arg(long, conflicts_with = "workspace_folder")]
    pub all: bool,
    /// The mail of this mediator group instead of the workspace repository's (a group named
    /// with `devcell mail --mail-group`).
    #[arg(long, value_name = "NAME", conflicts_with = "all")]
    pub mail_group: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// devcell user settings file (default `~/.config/devcell/config.toml`); read and checked.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// devcell user settings file (default `~/.config/devcell/config.toml`); read and checked.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// The workspace root (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// Remove only this clone task of the workspace (its container, clone and session; the
    /// fetched ref stays).
    #[arg(long, value_name = "NAME")]
    pub task: Option<String>,
    /// Remove clone tasks even when their branch has commits never fetched (or refs that
    /// cannot be read). Without `--task`, `delete` removes every clone task of the repository.
    #[arg(long)]
    pub force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell fetch`.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// devcell user settings file (default `~/.config/devcell/config.toml`); read and checked.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// The repository the task was cloned from (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// The clone task.
    #[arg(long, value_name = "NAME")]
    pub task: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell audit`.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("audited")
        .required(true)
        .multiple(false)
        .args(["container", "workspace_folder"])
))]
pub struct AuditArgs {
    /// devcell user settings file (default `~/.config/devcell/config.toml`); read and checked.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// The container (name or id); or use `--workspace-folder`.
    pub container: Option<String>,
    /// Audit the dev container of this workspace.
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// Exit non-zero (3) when the score is below N.
    #[arg(long, value_name = "N")]
    pub min_score: Option<u8>,
    /// Ask from inside the running container (mounts, capabilities, writable paths, sockets).
    #[arg(long)]
    pub probe: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell env …` subcommands.
#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Print a workspace's last environment record (or a handoff session's).
    Show(EnvShowArgs),
    /// Describe the workspace's running container for agent-runner (`mode: existing`).
    Export(EnvExportArgs),
    /// Read an agent-runner `mode: managed` environment as a devcontainer.json, listing what
    /// the hardened profile does not grant (refused unless granted with `--allow`).
    Import(EnvImportArgs),
}

/// `devcell verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The workspace folder (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// Run this environment record's `verify` commands instead of the configuration's.
    #[arg(long, value_name = "FILE")]
    pub environment: Option<PathBuf>,
    /// Stop a command that runs longer than this many seconds (it then fails, exit code 124).
    #[arg(long, value_name = "SECONDS", default_value_t = crate::ops::verify::DEFAULT_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// devcontainer.json path (default: discovered in the workspace).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell mail …` subcommands (the host user's side of the mediator).
#[derive(Debug, Subcommand)]
pub enum MailCommand {
    /// Every message of the group with each recipient's state.
    List(MailListArgs),
    /// One message, its body and each recipient's state.
    Show(MailIdArgs),
    /// Deliver a held message (to all its held recipients, or `--to` some).
    Forward(MailForwardArgs),
    /// Refuse a held message, with a reason its sender sees.
    Reject(MailRejectArgs),
    /// Send the mediator's own message to tasks (`--to`) or to every live task (`--all`).
    Post(MailPostArgs),
}

/// Which group's mediator: the workspace's, or a named one.
#[derive(Debug, Args)]
pub struct MailGroupArgs {
    /// The workspace folder (default: the current directory); its source repository names
    /// the group.
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// The group, instead of the workspace's repository.
    #[arg(long, alias = "group", value_name = "NAME")]
    pub mail_group: Option<String>,
    /// devcell user settings file (default `~/.config/devcell/config.toml`): `[mail]`.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell mail list`.
#[derive(Debug, Args)]
pub struct MailListArgs {
    /// The group.
    #[command(flatten)]
    pub group: MailGroupArgs,
}

/// `devcell mail show`.
#[derive(Debug, Args)]
pub struct MailIdArgs {
    /// The message id.
    pub id: String,
    /// The group.
    #[command(flatten)]
    pub group: MailGroupArgs,
}

/// `devcell mail forward`.
#[derive(Debug, Args)]
pub struct MailForwardArgs {
    /// The message id.
    pub id: String,
    /// Only these held recipients (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "TASK")]
    pub to: Vec<String>,
    /// The group.
    #[command(flatten)]
    pub group: MailGroupArgs,
}

/// `devcell mail reject`.
#[derive(Debug, Args)]
pub struct MailRejectArgs {
    /// The message id.
    pub id: String,
    /// Why (the sender sees it).
    #[arg(long)]
    pub reason: String,
    /// Only these held recipients (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "TASK")]
    pub to: Vec<String>,
    /// The group.
    #[command(flatten)]
    pub group: MailGroupArgs,
}

/// `devcell mail post`.
#[derive(Debug, Args)]
pub struct MailPostArgs {
    /// Recipient tasks (repeatable or comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "TASK",
        required_unless_present = "all"
    )]
    pub to: Vec<String>,
    /// Every task of the group whose session has not ended.
    #[arg(long, conflicts_with = "to")]
    pub all: bool,
    /// One line.
    #[arg(long)]
    pub subject: String,
    /// The body (Markdown).
    #[arg(long, default_value = "")]
    pub body: String,
    /// `notice`, `request`, `reply`, `contract-change` or `handoff`.
    #[arg(long = "type", default_value = "notice", value_name = "TYPE")]
    pub kind: String,
    /// The recipients must acknowledge it (redelivered until they do).
    #[arg(long)]
    pub ack_required: bool,
    /// The thread it belongs to.
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// The group.
    #[command(flatten)]
    pub group: MailGroupArgs,
}

/// `devcell env show`.
#[derive(Debug, Args)]
pub struct EnvShowArgs {
    /// The workspace folder (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// The record of this handoff session of the workspace, instead of the last one.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `devcell env export`.
#[derive(Debug, Args)]
pub struct EnvExportArgs {
    /// The workspace folder (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// devcontainer.json to use instead of the discovered one.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// What to write: `agent-runner`, an agent-runner environment definition (YAML) of
    /// `mode: existing` naming the container, its workspace folder as `cwd` and its bind
    /// mounts as `expectedMounts`.
    #[arg(long, value_enum, default_value_t = ExportFormat::AgentRunner)]
    pub format: ExportFormat,
    /// The definition's `name`.
    #[arg(long)]
    pub name: Option<String>,
    /// Export even a container whose agent could write a host git directory (a container
    /// `up` made binds the workspace's `.git` read-write; a handoff's does not).
    #[arg(long)]
    pub allow_host_git: bool,
}

/// `devcell env import`.
#[derive(Debug, Args)]
pub struct EnvImportArgs {
    /// The agent-runner environment file (YAML, `mode: managed`).
    pub file: PathBuf,
    /// The workspace folder the configuration is for (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// Write the configuration as `.devcontainer/devcontainer.json` in the workspace folder
    /// (never over an existing file); without it, it is only printed.
    #[arg(long)]
    pub write: bool,
    /// Grant a permission the file asks for (repeatable), as for `up`.
    #[arg(long, value_name = "PERMISSION")]
    pub allow: Vec<String>,
    /// Security profile the requests are judged under: `hardened` (default) or `reference`.
    #[arg(long, value_enum)]
    pub security_profile: Option<crate::settings::Profile>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `env export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ExportFormat {
    /// An agent-runner execution environment definition (YAML, `mode: existing`).
    #[default]
    AgentRunner,
}

/// The workspace folder and devcontainer.json of the commands that read a configuration
/// without the container flags of [`WorkspaceArgs`] (`build`, `outdated`, `upgrade`,
/// `features resolve-dependencies`).
#[derive(Debug, Clone, Args)]
pub struct ConfigLocationArgs {
    /// The workspace folder (default: the current directory).
    #[arg(long)]
    pub workspace_folder: Option<PathBuf>,
    /// The devcontainer.json to use (default: discovered in the workspace).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

impl ConfigLocationArgs {
    /// `--workspace-folder`, else the current directory.
    ///
    /// Errors: the current directory cannot be read.
    pub fn workspace_folder_or_current(&self) -> std::io::Result<PathBuf> {
        match &self.workspace_folder {
            Some(folder) => Ok(folder.clone()),
            None => std::env::current_dir(),
        }
    }
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
    /// Mount the git worktree common dir (worktrees made with `git worktree add
    /// --relative-paths`): changes the workspace layout and adds a bind mount of the common
    /// git dir.
    #[arg(
        long,
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub mount_git_worktree_common_dir: bool,
    /// Read the configuration's content from this file instead (paths keep the semantics of
    /// the workspace's devcontainer.json location, which need not exist).
    #[arg(long, value_name = "PATH")]
    pub override_config: Option<PathBuf>,
}

/// Reference flags about the Docker CLI and host-side state that devcell accepts and ignores:
/// it talks to the Engine API at `DOCKER_HOST` and keeps its own state (spec-note 0310).
#[derive(Debug, Clone, Args)]
pub struct HostToolArgs {
    /// Docker CLI path (accepted for compatibility; devcell talks to the Engine API at
    /// `DOCKER_HOST`).
    #[arg(long, value_name = "PATH")]
    pub docker_path: Option<String>,
    /// Docker Compose v2 CLI path (default: the `docker compose` plugin, then
    /// `docker-compose`).
    #[arg(long, value_name = "PATH")]
    pub docker_compose_path: Option<String>,
    /// Host folder for state shared between sessions (accepted; unused).
    #[arg(long, value_name = "PATH")]
    pub user_data_folder: Option<PathBuf>,
}

/// Log format and terminal size flags of the reference CLI.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Log format of stderr: `text`, or `json` (one JSON log event per line, as the reference).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Columns to render output for (implies `--terminal-rows`; accepted, unused).
    #[arg(long, requires = "terminal_rows")]
    pub terminal_columns: Option<u16>,
    /// Rows to render output for (implies `--terminal-columns`; accepted, unused).
    #[arg(long, requires = "terminal_columns")]
    pub terminal_rows: Option<u16>,
}

/// The reference CLI's in-container data folders.
#[derive(Debug, Clone, Args)]
pub struct ContainerDataArgs {
    /// Folder of the run-once markers in the container (relative: to the remote user's home;
    /// default `.devcontainer`). Honoured by `set-up`; accepted by the other commands, whose
    /// markers stay where `up` put them (devcell's state volume or `~/.devcontainer`).
    #[arg(long, value_name = "PATH")]
    pub container_data_folder: Option<String>,
    /// Container folder for system data (accepted; devcell patches no system files).
    #[arg(long, value_name = "PATH")]
    pub container_system_data_folder: Option<String>,
    /// Container folder for session data (accepted; devcell caches no probed environment).
    #[arg(long, value_name = "PATH")]
    pub container_session_data_folder: Option<String>,
}

/// The reference CLI's dotfiles flags: the user's dotfiles repository, cloned inside the
/// container and installed once after `postCreateCommand` (spec-note 0645).
#[derive(Debug, Clone, Args)]
pub struct DotfilesArgs {
    /// Dotfiles repository cloned inside the container as the remote user (a URL, `owner/repo`
    /// for GitHub, or a path inside the container)
    #[arg(long, value_name = "URL")]
    pub dotfiles_repository: Option<String>,
    /// Script of the repository to run instead of the first of install.sh, install,
    /// bootstrap.sh, bootstrap, script/bootstrap, setup.sh, setup, script/setup
    #[arg(long, value_name = "CMD")]
    pub dotfiles_install_command: Option<String>,
    /// Where the repository is cloned (default `~/dotfiles`)
    #[arg(long, value_name = "PATH")]
    pub dotfiles_target_path: Option<String>,
}

/// Hidden flags of the reference CLI, accepted (spec-note 0310).
#[derive(Debug, Clone, Args)]
pub struct HiddenRefArgs {
    /// Legacy short Feature ids are never mapped by devcell (they are an error with a hint).
    #[arg(long, hide = true)]
    pub skip_feature_auto_mapping: bool,
    /// `up`/`build`: the `devcontainer.metadata` label leaves out devcontainer.json's
    /// `remoteEnv` (the hooks and `exec` still get it from the configuration).
    #[arg(long, hide = true)]
    pub omit_config_remote_env_from_metadata: bool,
    /// Accepted; devcell writes no `# syntax=` directive.
    #[arg(long, hide = true)]
    pub omit_syntax_directive: bool,
}

/// The Docker CLI, host state and log flags that most of the reference CLI's commands take.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Docker CLI and host state flags (accepted).
    #[command(flatten)]
    pub host: HostToolArgs,
    /// Log format and terminal size.
    #[command(flatten)]
    pub log: LogArgs,
}

/// The resource limits of the container `up` and `handoff` create.
#[derive(Debug, Clone, Args)]
pub struct ResourceLimitArgs {
    /// Maximum number of processes in the container (hardened; default 1024 or
    /// `[security] pids_limit`).
    #[arg(long, value_name = "N")]
    pub pids_limit: Option<i64>,
    /// Memory limit: bytes, or with a `k`/`m`/`g`/`t` suffix, e.g. `1g` (hardened; default `4g`
    /// or `[security] memory`).
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,
    /// CPU limit, e.g. `2` or `1.5` (hardened; default 2 or `[security] cpus`).
    #[arg(long, value_name = "N")]
    pub cpus: Option<f64>,
}

/// Where the commands that fetch Features or Templates (`outdated`, `upgrade`, `features
/// resolve-dependencies`, `templates`) cache them, and the user settings their registry access follows.
#[derive(Debug, Clone, Args)]
pub struct FeatureFetchArgs {
    /// Cache folder for Feature and Template artifacts (default `$XDG_CACHE_HOME/devcell`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// devcell user settings file (default `~/.config/devcell/config.toml`): its
    /// `[registries]` mirrors, insecure registries and CA certificates apply.
    #[arg(long)]
    pub config_file: Option<PathBuf>,
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
    /// Docker CLI, host state and log flags.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Hidden reference flags (accepted).
    #[command(flatten)]
    pub hidden: HiddenRefArgs,
    /// Id label `name=value` identifying the dev container (repeatable); replaces the default
    /// `devcontainer.local_folder` / `devcontainer.config_file` labels for the lookup and for
    /// `${devcontainerId}`.
    #[arg(long = "id-label", value_parser = parse_id_label)]
    pub id_labels: Vec<(String, String)>,
    /// Id of the dev container to read `devcontainer.metadata` and `Config.Env` from.
    #[arg(long)]
    pub container_id: Option<String>,
    /// Additional Features as JSON, like `features` in devcontainer.json.
    #[arg(long)]
    pub additional_features: Option<String>,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Plain text lines.
    Text,
    /// JSON log events, one per line (`{"type":"text","level","timestamp","text"}`).
    Json,
}

/// Parses `--id-label name=value` (the reference's check: `.+=.+`; split at the first `=`).
pub fn parse_id_label(text: &str) -> Result<(String, String), String> {
    // `.+=.+`: some `=` with at least one character on each side.
    let ok = text
        .char_indices()
        .any(|(i, c)| c == '=' && i > 0 && i + 1 < text.len());
    match text.split_once('=') {
        Some((name, value)) if ok => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!(
            "`{text}` does not match `<name>=<value>` (id-label must match <name>=<value>)"
        )),
    }
}

/// `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// A table.
    Text,
    /// One JSON document.
    Json,
}

/// `devcell outdated`.
#[derive(Debug, Args)]
pub struct OutdatedArgs {
    /// Workspace folder and devcontainer.json.
    #[command(flatten)]
    pub location: ConfigLocationArgs,
    /// Output format: `text` (a table) or `json` (`{"features": {…}}`).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// Feature cache and registry settings.
    #[command(flatten)]
    pub fetch: FeatureFetchArgs,
    /// Docker CLI, host state and log flags.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `devcell upgrade`.
#[derive(Debug, Args)]
pub struct UpgradeArgs {
    /// Workspace folder and devcontainer.json.
    #[command(flatten)]
    pub location: ConfigLocationArgs,
    /// Print the regenerated lockfile on stdout instead of writing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Feature cache and registry settings.
    #[command(flatten)]
    pub fetch: FeatureFetchArgs,
    /// Docker CLI and host state flags (accepted).
    #[command(flatten)]
    pub host: HostToolArgs,
    /// Re-pin this Feature in devcontainer.json (with `--target-version`), then upgrade.
    #[arg(short = 'f', long, hide = true, requires = "target_version")]
    pub feature: Option<String>,
    /// The `x`, `x.y` or `x.y.z` version to pin `--feature` to.
    #[arg(short = 'v', long, hide = true, requires = "feature")]
    pub target_version: Option<String>,
}

/// Flags that identify the dev container of a workspace.
#[derive(Debug, Clone, Args)]
pub struct ContainerArgs {
    /// Workspace and config selection.
    #[command(flatten)]
    pub workspace: WorkspaceArgs,
    /// Id label `name=value` identifying the container (repeatable); replaces the default
    /// `devcontainer.local_folder`/`devcontainer.config_file` labels.
    #[arg(long = "id-label", value_name = "NAME=VALUE")]
    pub id_label: Vec<String>,
}

/// Flags shared by the commands that run processes in the container.
#[derive(Debug, Clone, Args)]
pub struct RemoteArgs {
    /// Extra remote environment variable `NAME=VALUE` (repeatable).
    #[arg(long = "remote-env", value_name = "NAME=VALUE")]
    pub remote_env: Vec<String>,
    /// Default `userEnvProbe` when the configuration has none.
    #[arg(long, value_parser = ["none", "loginShell", "interactiveShell", "loginInteractiveShell"])]
    pub default_user_env_probe: Option<String>,
}

/// Flags shared by `up` and `set-up`: the configuration in their result.
#[derive(Debug, Clone, Args)]
pub struct IncludeConfigurationArgs {
    /// Include the configuration read in the result.
    #[arg(long)]
    pub include_configuration: bool,
    /// Include the merged configuration in the result.
    #[arg(long)]
    pub include_merged_configuration: bool,
}

/// Flags shared by the commands that run lifecycle hooks.
#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// Do not run any container lifecycle hook (the reference CLI's meaning).
    #[arg(long)]
    pub skip_post_create: bool,
    /// Do not run `postAttachCommand`.
    #[arg(long)]
    pub skip_post_attach: bool,
    /// Stop after the `waitFor` hook.
    #[arg(long)]
    pub skip_non_blocking_commands: bool,
    /// Stop after `onCreateCommand` and `updateContentCommand`, running
    /// `updateContentCommand` again if it has run before.
    #[arg(long)]
    pub prebuild: bool,
    /// JSON file of secrets (`{"NAME": "value"}`) given to hooks as environment variables.
    #[arg(long)]
    pub secrets_file: Option<PathBuf>,
    /// Dotfiles.
    #[command(flatten)]
    pub dotfiles: DotfilesArgs,
}

/// The environment record flags of `up`, `build` and `handoff` (spec-note 0520).
#[derive(Debug, Clone, Args)]
pub struct EnvironmentArgs {
    /// Write the environment record (configuration hashes, base image and Feature digests,
    /// image, profile, grants, network, verification commands) to FILE, for CI to keep.
    #[arg(long, value_name = "FILE")]
    pub environment_out: Option<PathBuf>,
    /// Recreate the environment of this record: refused (exit 18, each difference named)
    /// when the configuration, the base image's digest, a Feature's digest, the profile,
    /// grants or network no longer match.
    #[arg(long, value_name = "FILE")]
    pub environment: Option<PathBuf>,
    /// With `--environment`: go on with a warning for each difference instead of refusing.
    #[arg(long, requires = "environment")]
    pub allow_drift: bool,
}

/// The lockfile flags of `up` (the reference CLI's, hidden deprecated ones included).
#[derive(Debug, Clone, Args)]
pub struct LockfileArgs {
    /// Disable lockfile generation and verification: `devcontainer-lock.json` is neither read
    /// nor written.
    #[arg(long, conflicts_with_all = ["frozen_lockfile", "experimental_frozen_lockfile", "experimental_lockfile"])]
    pub no_lockfile: bool,
    /// Ensure `devcontainer-lock.json` exists and matches the resolved Features; fail otherwise
    /// (it is never written).
    #[arg(long)]
    pub frozen_lockfile: bool,
    /// Deprecated: lockfiles are written by default.
    #[arg(long, hide = true)]
    pub experimental_lockfile: bool,
    /// Deprecated: use `--frozen-lockfile`.
    #[arg(long, hide = true)]
    pub experimental_frozen_lockfile: bool,
}

/// `devcell up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Container identity.
    #[command(flatten)]
    pub container: ContainerArgs,
    /// Remote environment.
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Hook selection.
    #[command(flatten)]
    pub hooks: HookArgs,
    /// Remove the existing container (if any) and create a new one.
    #[arg(long)]
    pub remove_existing_container: bool,
    /// Fail unless the container already exists.
    #[arg(long)]
    pub expect_existing_container: bool,
    /// What the result includes of the configuration.
    #[command(flatten)]
    pub include: IncludeConfigurationArgs,
    /// Extra mount, Docker `--mount` syntax (repeatable); granted by being asked for here.
    #[arg(long, value_name = "MOUNT")]
    pub mount: Vec<String>,
    /// Cache folder for Feature artifacts (default `$XDG_CACHE_HOME/devcell`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// `devcontainer-lock.json` handling.
    #[command(flatten)]
    pub lockfile: LockfileArgs,
    /// The environment record (spec-note 0520).
    #[command(flatten)]
    pub environment: EnvironmentArgs,
    /// Security profile: `hardened` (default) or `reference` (the config as written).
    #[arg(long, value_enum)]
    pub security_profile: Option<crate::settings::Profile>,
    /// Grant a permission: `privileged`, `root`, `cap:NAME`, `mount:PATH`,
    /// `security-opt:OPT`, `device:PATH`, `network:host`, `network:container:NAME`,
    /// `network:NAME`, `publish:IP:PORT`, `publish:IP:*`, `publish:*`, `env:NAME`,
    /// `build-network`, `volume:NAME` (repeatable).
    #[arg(long, value_name = "PERMISSION")]
    pub allow: Vec<String>,
    /// devcell user settings file (default `~/.config/devcell/config.toml`).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Resource limits.
    #[command(flatten)]
    pub limits: ResourceLimitArgs,
    /// Network: `default`, `none`, or `allowlist` (network `none` plus devcell's host-side
    /// proxy: only the `--egress-allow` destinations and the configured `egress`).
    #[arg(long, value_enum)]
    pub network: Option<crate::settings::NetworkMode>,
    /// A destination the container may reach under `--network allowlist`:
    /// `host[:port][=address]`, `*.suffix` for names below it, port 443 unless given,
    /// `=address` to pin the address (repeatable).
    #[arg(long, value_name = "DEST")]
    pub egress_allow: Vec<String>,
    /// Additional Features as JSON, like `features` in devcontainer.json (keys the
    /// configuration already has are ignored).
    #[arg(long, value_name = "JSON")]
    pub additional_features: Option<String>,
    /// Default of `updateRemoteUserUID` when the configuration does not say: `on` (default),
    /// `off`, or `never` (not even when the configuration says `true`).
    #[arg(long, value_enum, default_value_t = UidDefault::On)]
    pub update_remote_user_uid_default: UidDefault,
    /// GPUs for a configuration whose `hostRequirements.gpu` asks for one: `detect` (default:
    /// if the engine has one), `all` (refused if the engine shows none) or `none`. Under
    /// `hardened` a GPU is granted with `--allow gpu`.
    #[arg(long, value_enum, default_value_t = crate::ops::options::GpuAvailability::Detect)]
    pub gpu_availability: crate::ops::options::GpuAvailability,
    /// `consistent`, `cached` or `delegated` (accepted; the reference uses it on macOS only).
    #[arg(long, value_parser = ["consistent", "cached", "delegated"])]
    pub workspace_mount_consistency: Option<String>,
    /// Image build flags.
    #[command(flatten)]
    pub image: UpImageArgs,
    /// In-container data folders (accepted).
    #[command(flatten)]
    pub container_data: ContainerDataArgs,
    /// Docker CLI, host state and log flags.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Hidden reference flags (accepted).
    #[command(flatten)]
    pub hidden: HiddenRefArgs,
}

/// `--update-remote-user-uid-default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UidDefault {
    /// Update unless the configuration says `false`.
    On,
    /// Update only when the configuration says `true`.
    Off,
    /// Never update.
    Never,
}

/// The image build flags of `up` (used when a new container needs its image built).
#[derive(Debug, Clone, Args)]
pub struct UpImageArgs {
    /// Build the image without the layer cache (only when a container is created).
    #[arg(long)]
    pub build_no_cache: bool,
    /// An image to use as layer cache for the Dockerfile (repeatable).
    #[arg(long, value_name = "IMAGE")]
    pub cache_from: Vec<String>,
    /// Not supported: no external build cache export (refused).
    #[arg(long, value_name = "CACHE")]
    pub cache_to: Option<String>,
    /// `auto` or `never` (accepted; devcell builds through the Engine API).
    #[arg(long, value_parser = ["auto", "never"])]
    pub buildkit: Option<String>,
}

/// The flags `exec` and `run-user-commands` share, around each command's own (`own`), in the
/// order `--help` lists them.
#[derive(Debug, Args)]
pub struct InContainerArgs<T: Args> {
    /// Container identity.
    #[command(flatten)]
    pub container: ContainerArgs,
    /// Grant what the configuration, read again, uses beyond what `up` judged for a
    /// container it created under `hardened`: `env:NAME` (a host variable), `root` (a remote
    /// user with uid 0) (repeatable).
    #[arg(long, value_name = "PERMISSION")]
    pub allow: Vec<String>,
    /// Remote environment.
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// The command's own flags.
    #[command(flatten)]
    pub own: T,
    /// The container (id or name) instead of a lookup by the id labels; without
    /// `--workspace-folder`, `--config` or `--override-config` no devcontainer.json is read
    /// (its `devcontainer.metadata` label says everything).
    #[arg(long, value_name = "ID")]
    pub container_id: Option<String>,
    /// In-container data folders (accepted).
    #[command(flatten)]
    pub container_data: ContainerDataArgs,
    /// Docker CLI, host state and log flags.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `devcell exec`.
pub type ExecArgs = InContainerArgs<ExecOwnArgs>;

/// The flags of `exec` alone.
#[derive(Debug, Args)]
pub struct ExecOwnArgs {
    /// JSON file of secrets (`{"NAME": "value"}`) given to the command as environment variables
    /// (through the engine's exec API, never on a command line; masked in devcell's messages).
    #[arg(long)]
    pub secrets_file: Option<PathBuf>,
    /// The command and its arguments. Options of devcell come before it; everything from
    /// the command on is the command's (`exec sh -c 'ls -l'`; `--` also ends the options).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `devcell run-user-commands`.
pub type RunUserCommandsArgs = InContainerArgs<RunUserCommandsOwnArgs>;

/// The flags of `run-user-commands` alone.
#[derive(Debug, Args)]
pub struct RunUserCommandsOwnArgs {
    /// Hook selection.
    #[command(flatten)]
    pub hooks: HookArgs,
    /// Stop for personalization: run the hooks up to `postCreateCommand` and the dotfiles,
    /// then stop (`postStartCommand` and `postAttachCommand` are not run)
    #[arg(long)]
    pub stop_for_personalization: bool,
}

/// `devcell ports`.
#[derive(Debug, Args)]
pub struct PortsArgs {
    /// Container identity.
    #[command(flatten)]
    pub container: ContainerArgs,
    /// Also forward host port HOST (on 127.0.0.1; 0: any free port) to container port
    /// CONTAINER; `PORT` alone is the same number on both sides (repeatable).
    #[arg(long = "port", value_name = "HOST:CONTAINER", value_parser = crate::ops::ports::parse_port_flag)]
    pub port: Vec<crate::ops::ports::PortFlag>,
    /// The container (id or name) instead of a lookup by the id labels; without
    /// `--workspace-folder`, `--config` or `--override-config` no devcontainer.json is read.
    #[arg(long, value_name = "ID")]
    pub container_id: Option<String>,
    /// Grant what the configuration, read again, uses beyond what `up` judged, as for `exec`
    /// (repeatable).
    #[arg(long, value_name = "PERMISSION")]
    pub allow: Vec<String>,
    /// `text`: one line per forward on stderr; `json`: also one JSON line on stdout
    /// (`{"forwards": [{"host", "hostPort", "containerPort", "label", …}], "notForwarded": […]}`)
    /// once every port listens.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// Forward in the background: print the forwards once every port listens, then return;
    /// the forwarder runs until `ports --stop` or `down`.
    #[arg(long, conflicts_with = "stop")]
    pub detach: bool,
    /// Stop the background forwarders (`--detach`) of the container and return.
    #[arg(long)]
    pub stop: bool,
    /// The detached forwarder's record key (set by `--detach` for the process it starts).
    #[arg(long = "detached-record", hide = true, value_name = "KEY")]
    pub detached_record: Option<String>,
    /// Docker CLI, host state and log flags.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `devcell down`.
#[derive(Debug, Args)]
pub struct DownArgs {
    /// Container identity.
    #[command(flatten)]
    pub container: ContainerArgs,
    /// Remove the container and its devcell-owned volumes (never the workspace).
    #[arg(long)]
    pub remove: bool,
}

/// `devcell build` (the reference CLI's flags; the Docker CLI and BuildKit-only ones are
/// accepted where they change nothing and refused where devcell cannot honour them).
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Accepted and ignored, as by the reference CLI (use `--workspace-folder`).
    #[arg(hide = true)]
    pub path: Option<PathBuf>,
    /// Workspace folder and devcontainer.json.
    #[command(flatten)]
    pub location: ConfigLocationArgs,
    /// A name (`[registry/]repository[:tag]`) to tag the image with (repeatable; default: the
    /// reference CLI's `vsc-<folder>-<hash>[-features]`).
    #[arg(long = "image-name", value_name = "NAME")]
    pub image_names: Vec<String>,
    /// Push every `--image-name` to its registry through the engine (credentials from
    /// `~/.docker/config.json`).
    #[arg(long)]
    pub push: bool,
    /// Build without the layer cache (and pull the Dockerfile's base images).
    #[arg(long)]
    pub no_cache: bool,
    /// An image to use as layer cache for the Dockerfile (repeatable).
    #[arg(long, value_name = "IMAGE")]
    pub cache_from: Vec<String>,
    /// A label `name=value` for the image (repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    pub label: Vec<String>,
    /// Lockfile handling (`devcontainer-lock.json`), as for `up`.
    #[command(flatten)]
    pub lockfile: LockfileArgs,
    /// The environment record, as for `up`.
    #[command(flatten)]
    pub environment: EnvironmentArgs,
    /// Not supported: devcell builds for the engine's own platform (refused).
    #[arg(long, value_name = "PLATFORMS")]
    pub platform: Option<String>,
    /// Not supported: the image is loaded into the engine (refused).
    #[arg(long, value_name = "OUTPUT")]
    pub output: Option<String>,
    /// Not supported: no external build cache export (refused).
    #[arg(long, value_name = "CACHE")]
    pub cache_to: Option<String>,
    /// Not supported for `build` (refused; put the Features in devcontainer.json).
    #[arg(long, value_name = "JSON")]
    pub additional_features: Option<String>,
    /// `auto` or `never` (accepted; devcell builds through the Engine API).
    #[arg(long, value_parser = ["auto", "never"])]
    pub buildkit: Option<String>,
    /// Docker CLI, host state and log flags.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Hidden reference flags (accepted).
    #[command(flatten)]
    pub hidden: HiddenRefArgs,
    /// The image's `devcontainer.metadata` label leaves out the Features' `customizations`
    /// (hidden, as in the reference).
    #[arg(long, hide = true)]
    pub skip_persisting_customizations_from_features: bool,
    /// Cache folder for Feature artifacts (default `$XDG_CACHE_HOME/devcell`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Security profile the permission requests are judged under (reported, not enforced:
    /// `build` creates no container).
    #[arg(long, value_enum)]
    pub security_profile: Option<crate::settings::Profile>,
    /// A grant, as for `up` (repeatable).
    #[arg(long, value_name = "PERMISSION")]
    pub allow: Vec<String>,
    /// devcell user settings file (default `~/.config/devcell/config.toml`).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
}

/// `devcell set-up`.
#[derive(Debug, Args)]
pub struct SetUpArgs {
    /// The running container to set up (id or name).
    #[arg(long, required = true)]
    pub container_id: String,
    /// A devcontainer.json to merge with the container's metadata (default: none).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Remote environment.
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Do not run any lifecycle hook.
    #[arg(long)]
    pub skip_post_create: bool,
    /// Stop after the `waitFor` hook.
    #[arg(long)]
    pub skip_non_blocking_commands: bool,
    /// What the result includes of the configuration.
    #[command(flatten)]
    pub include: IncludeConfigurationArgs,
    /// In-container data folders (`--container-data-folder` is honoured).
    #[command(flatten)]
    pub container_data: ContainerDataArgs,
    /// Dotfiles.
    #[command(flatten)]
    pub dotfiles: DotfilesArgs,
    /// Docker CLI, host state and log flags.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Security profile: `hardened` (default: refuses a privileged container or one holding
    /// an engine socket) or `reference` (runs the hooks whatever the container has).
    #[arg(long, value_enum)]
    pub security_profile: Option<crate::settings::Profile>,
    /// A grant (repeatable); `--allow privileged` lets the hooks run in a privileged container.
    #[arg(long, value_name = "PERMISSION")]
    pub allow: Vec<String>,
    /// devcell user settings file (default `~/.config/devcell/config.toml`).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
}
