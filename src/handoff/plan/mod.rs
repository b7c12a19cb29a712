//! The handoff plan: what `devcell handoff` will do (the container, its mounts, limits,
//! repositories and permissions), derived from the workspace and the settings before anything is
//! created (`--plan`).

mod agent;
mod choices;
mod compose;
mod container;
mod model;
mod mounts;
mod workspace;

pub use crate::handoff::named_container::PlannedContainer;
pub(crate) use choices::listed_once;
pub(crate) use container::{COMPOSE_PLAN_PREFIX, up_options};
pub(super) use model::plan_lines;
pub use model::{
    CONFIG_WARNING_CODE, HandoffPlan, PlannedExternal, PlannedLimits, PlannedMount, PlannedRepo,
    PlannedService, UNISOLATED_CODE, unisolated_warning,
};
pub(super) use workspace::ctx_rel_path;
pub(crate) use workspace::safe_directories;

use agent::{agent_cwd, agent_env, resolve_agent, resolve_secrets};
use choices::{JudgedChoices, judge_choices, planned_egress, shown_choices};
use compose::plan_compose;
use container::{handoff_target, plan_container};
use mounts::{plan_mounts, with_dotfiles};
use workspace::{
    container_gits, find_configuration, inspect_workspace, nested_gits, plan_of_workspace,
    plan_warnings,
};

use crate::engine::Engine;
use crate::handoff::context::AgentRuntime;
use crate::handoff::repository::Workspace;
use crate::ops::error::Result;
use crate::ops::options::{SecurityOptions, TargetOptions};
use crate::settings::{AgentSettings, NetworkMode, Profile, Settings};
use indexmap::IndexMap;
use std::collections::HashMap;
use std::path::PathBuf;

/// What the caller wants handed over (the `handoff` flags).
#[derive(Debug, Clone, Default)]
pub struct HandoffOptions {
    /// `--workspace-folder`: the workspace root (a repository or a folder of repositories).
    pub workspace_folder: PathBuf,
    /// `--agent NAME` (`[agents.NAME]` of the user settings).
    pub agent: String,
    /// `--task-url`.
    pub task_url: Option<String>,
    /// `--task-title`.
    pub task_title: Option<String>,
    /// `--task-provider` (else derived from the URL's host).
    pub task_provider: Option<String>,
    /// `--primary REPO`.
    pub primary: Option<String>,
    /// `--replace`: stop a live session and start a new one.
    pub replace: bool,
    /// `--verify CMD` (repeatable): added after the agent's configured `verify`.
    pub verify: Vec<String>,
    /// Security flags (`--network`, `--security-profile`, `--allow`, limits).
    pub security: SecurityOptions,
    /// `--secrets-file` contents (NAME → value).
    pub secrets: IndexMap<String, String>,
    /// The user settings (`--config-file` or the default location).
    pub settings: Settings,
    /// The host environment (passed-through variables, `env:` secrets, `~`).
    pub env: HashMap<String, String>,
    /// Give the agent a TTY (devcell has one).
    pub tty: bool,
    /// With `tty`: the terminal's size, followed by the agent's TTY (start and every change).
    pub tty_size: Option<tokio::sync::watch::Receiver<crate::engine::TtySize>>,
    /// The state folder (`None`: [`StateStore::default_root`](crate::handoff::state::StateStore::default_root)).
    pub state_root: Option<PathBuf>,
    /// `--frozen-lockfile` (`Frozen`) / `--no-lockfile` (`Off`). handoff honours
    /// `devcontainer-lock.json` when present but never writes it: `Write` (the default) acts
    /// as `ReadOnly` (spec-note 0282).
    pub lockfile: crate::features::lockfile::LockfileMode,
    /// `--runtime`: `None` when not given (the container runtime, and an unreachable engine is
    /// an error that suggests `--runtime host`; never a silent fallback).
    pub runtime: Option<AgentRuntime>,
    /// `--isolation`: `None` when not given (the agent's `isolation`, else `[handoff]`'s).
    pub isolation: Option<crate::settings::Isolation>,
    /// `--task NAME` (clone isolation).
    pub task: Option<String>,
    /// `--base REF` (clone isolation).
    pub base: Option<String>,
    /// Set by the clone task runner ([`crate::handoff::task::run`]): the workspace folder is
    /// the task's clone, whose own `.git` the container gets (no container git directory).
    pub sandbox: Option<crate::handoff::context::Sandbox>,
    /// The mail channel the handoff opens once its session has begun: set by the clone task
    /// runner, or for a worktree handoff that asks for one (`--mail`, `[mail].worktrees`); its
    /// read-only binds (`devcell-mail` and the task's socket folder) are in the plan
    /// (spec-notes 0531, 0532).
    pub mail: Option<crate::handoff::door::DoorRequest>,
    /// `--mail` / `--no-mail`: `None` when neither was given ([`Self::mail_channel_wanted`]).
    pub mail_channel: Option<bool>,
    /// The mail group of a worktree handoff's channel (`handoff::mail_host::group_of`, found
    /// by the caller); `None`: not found, and a channel asked for is refused.
    pub mail_group: Option<crate::mail::GroupName>,
    /// `--environment FILE`, `--allow-drift`, `--environment-out` (spec-note 0520); its
    /// `store` is unused: a handoff keeps its record in its own state folder.
    pub environment: crate::ops::environment::EnvironmentRequest,
    /// `--container NAME`: this container devcell created for the workspace, never a new one
    /// (spec-note 0521).
    pub container: Option<String>,
    /// `--expect-mount HOST:CONTAINER[:ro|rw]` (repeatable): what a container devcell did not
    /// create must mount (spec-note 0524).
    pub expect_mounts: Vec<crate::handoff::expect_mount::ExpectedMount>,
    /// `--dotfiles-repository` and its two flags: installed in the container as by `up`
    /// ([`crate::handoff::dotfiles`]).
    pub dotfiles: Option<crate::lifecycle::Dotfiles>,
    /// `--group NAME` and `--cleanup`: the handoff shares its group's container (spec-note
    /// 0525, [`crate::handoff::group`]).
    pub group: Option<crate::handoff::group_request::GroupRequest>,
}

impl HandoffOptions {
    /// Whether the handoff gets the mail channel (spec-note 0532): `--mail` / `--no-mail`, else
    /// a clone task always, and a worktree handoff when `[mail].worktrees` says so.
    pub fn mail_channel_wanted(&self) -> bool {
        self.mail_channel.unwrap_or_else(|| {
            self.effective_isolation() == crate::settings::Isolation::Clone
                || self.settings.mail.worktrees
        })
    }

    /// The isolation in effect: `--isolation`, else the agent's `isolation`, else
    /// `[handoff].isolation` (spec-note 0437).
    pub fn effective_isolation(&self) -> crate::settings::Isolation {
        self.isolation
            .or_else(|| {
                self.settings
                    .agents
                    .get(&self.agent)
                    .and_then(|a| a.isolation)
            })
            .unwrap_or(self.settings.handoff.isolation)
    }
}

/// Everything resolved before anything is created.
pub(crate) struct Prepared {
    pub(super) plan: HandoffPlan,
    /// The workspace's untrusted git directories as requests, judged (spec-note 0411).
    pub(super) git_requests: Vec<crate::security::PermissionRequest>,
    pub(super) workspace: Workspace,
    /// The repositories' container git directories (none on the host; spec-note 0436).
    pub(super) gits: Vec<crate::handoff::container_git::RepoGit>,
    /// Every other `.git` below the workspace, covered (spec-note 0400, K2/K4).
    pub(super) nested: crate::handoff::nested_git::NestedGits,
    /// The workspace's `.git` entries as the plan walked them to judge `nested` (`None`: not
    /// walked, on the host or for a clone task): the session start records this one instead
    /// of walking again, so the judged and the recorded entries are one walk's.
    pub(super) git_identity: Option<crate::handoff::git_identity::GitIdentity>,
    pub(super) agent: AgentSettings,
    pub(super) target: TargetOptions,
    pub(super) extra_mounts: Vec<crate::engine::Mount>,
    /// The dotfiles step `up` runs, and the bound folder's `safe.directory` entry.
    pub(super) dotfiles: Option<crate::handoff::dotfiles::HandoffDotfiles>,
    pub(super) secrets: IndexMap<String, String>,
    pub(super) agent_env: IndexMap<String, String>,
    /// The network chosen (a container's; the host runtime has the host's, whatever this says).
    pub(super) network: NetworkMode,
    /// The profile chosen (a container's; nothing applies on the host).
    pub(super) profile: Profile,
    /// Every choice, resolved once (`None` on the host, where none applies).
    pub(super) choice: Option<crate::security::Choice>,
    pub(super) cwd: String,
    pub(super) warnings: Vec<String>,
}

/// The plan only (`handoff --plan`): nothing is created, started, pulled, built or written.
/// The engine, when reachable, is asked whether the container exists and for the image's
/// metadata; the permission requests are judged as the handoff judges them
/// ([`crate::ops::preview::preview_permissions`], spec-note 0320).
///
/// Errors: [`OpsError::UnknownAgent`], [`OpsError::AgentConfig`],
/// [`OpsError::Product`] (a [`crate::handoff::repository::WorkspaceError`]), [`OpsError::NoConfiguration`], [`OpsError::Config`];
/// [`OpsError::Security`] (`permission_required`) when the configuration asks for
/// something not granted, exactly as the handoff would refuse it; for a Compose configuration
/// [`OpsError::Unsupported`] under a network other than `default` or without an engine,
/// and [`OpsError::Compose`] when Compose cannot read its files (spec-note 0609).
///
/// [`OpsError::UnknownAgent`]: crate::ops::error::OpsError::UnknownAgent
/// [`OpsError::AgentConfig`]: crate::ops::error::OpsError::AgentConfig
/// [`OpsError::Product`]: crate::ops::error::OpsError::Product
/// [`OpsError::NoConfiguration`]: crate::ops::error::OpsError::NoConfiguration
/// [`OpsError::Config`]: crate::ops::error::OpsError::Config
/// [`OpsError::Security`]: crate::ops::error::OpsError::Security
/// [`OpsError::Unsupported`]: crate::ops::error::OpsError::Unsupported
/// [`OpsError::Compose`]: crate::ops::error::OpsError::Compose
pub async fn plan(opts: &HandoffOptions) -> Result<HandoffPlan> {
    let runtime = opts.runtime.unwrap_or_default();
    let engine = match runtime {
        AgentRuntime::Container => crate::engine::connect().await.ok(),
        AgentRuntime::Host => None,
    };
    let dyn_engine = engine.as_deref();
    let prepared = prepare(opts, dyn_engine, runtime).await?;
    if runtime == AgentRuntime::Host || prepared.plan.config_file.is_none() {
        return Ok(prepared.plan);
    }
    // A Compose configuration: its services judged as the handoff judges them (spec-note 0609).
    if prepared.plan.image.starts_with(COMPOSE_PLAN_PREFIX) {
        return plan_compose(prepared, opts, dyn_engine).await;
    }
    let up_opts = up_options(&prepared, opts);
    let mut preview = crate::ops::preview::preview_permissions(dyn_engine, &up_opts).await?;
    if !prepared.git_requests.is_empty()
        && let Some(choice) = &prepared.choice
    {
        // one refusal for all, as the handoff refuses (spec-note 0400)
        preview.refusal = crate::security::refusal_of_all(
            &choice.profile,
            &prepared.git_requests,
            preview.refusal.take(),
            &preview.requests,
        );
        preview
            .requests
            .splice(0..0, prepared.git_requests.iter().cloned());
    }
    if let Some(refusal) = preview.refusal {
        return Err(refusal.into());
    }
    let mut plan = prepared.plan;
    plan.permissions = listed_once(preview.requests);
    plan.permission_notes = preview.notes;
    plan.provided_user = preview.provided_user;
    plan.host_env = preview.host_env;
    Ok(plan)
}

/// Resolves the agent, the workspace, the configuration, the mounts, the secrets and the plan.
pub(super) async fn prepare(
    opts: &HandoffOptions,
    engine: Option<&dyn Engine>,
    runtime: AgentRuntime,
) -> Result<Prepared> {
    let host = runtime == AgentRuntime::Host;
    let agent = resolve_agent(opts)?;
    // Every choice through the one chain: flag, the agent's, `[security]`, the handoff's
    // default (spec-note 0207).
    let flags = SecurityOptions {
        agent: Some(opts.agent.clone()),
        ..opts.security.clone()
    };
    let profile = crate::security::choice::profile(&flags, &opts.settings);
    let ws = inspect_workspace(opts, profile, host)?;
    let config_file = find_configuration(&ws, host)?;
    let mut warnings: Vec<String> = ws.warnings.iter().map(|w| w.message.clone()).collect();
    // Network: flag, else the agent's, else `[security]`'s, else `none` (default-deny;
    // spec-notes 0202, 0207). On the host: the host's own network, whatever was asked.
    let network = crate::security::choice::network(
        &flags,
        &opts.settings,
        crate::security::choice::HANDOFF_NETWORK,
    );
    let judged = if host {
        JudgedChoices::default()
    } else {
        judge_choices(&flags, &opts.settings, &ws)?
    };
    let (shown_network, shown_profile) = shown_choices(opts, host, network, profile, &mut warnings);
    let gits = container_gits(opts, &ws, host)?;
    let (nested, git_identity) = nested_gits(
        opts,
        &ws,
        &gits,
        host,
        judged.choice.as_ref(),
        &mut warnings,
    )?;
    let home = opts.env.get("HOME").cloned();
    let mut mounts = plan_mounts(opts, &agent, &ws, &gits, &nested, host, home.as_deref())?;
    let dotfiles = with_dotfiles(opts, &ws, host, network, &mut mounts)?;
    let secrets = resolve_secrets(opts, &agent, home.as_deref())?;
    let agent_env = agent_env(opts, &agent, &mut warnings);
    let target = handoff_target(opts, &ws, config_file.clone(), mounts.workspace);
    let configured = plan_container(opts, engine, &target, host, judged.confine, profile).await?;
    let cwd = agent_cwd(opts, &ws);
    let plan = HandoffPlan {
        config_file,
        image: configured.image,
        features: configured.features,
        profile: shown_profile,
        network: shown_network,
        egress: planned_egress(opts, host, network)?,
        limits: judged.limits,
        mounts: mounts.planned,
        dotfiles: dotfiles.as_ref().map(|d| d.planned.clone()),
        env: agent_env.keys().cloned().collect(),
        container: configured.container,
        command: agent.command.clone(),
        cwd: cwd.clone(),
        warnings: plan_warnings(&ws, &warnings, &configured.warnings),
        ..plan_of_workspace(opts, &ws, &secrets, runtime)
    };
    Ok(Prepared {
        plan,
        git_requests: judged.git_requests,
        workspace: ws,
        gits,
        nested,
        git_identity,
        agent,
        target,
        extra_mounts: mounts.extra,
        dotfiles,
        secrets,
        agent_env,
        network,
        profile,
        choice: judged.choice,
        cwd,
        warnings,
    })
}
