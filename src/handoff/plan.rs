//! The handoff plan: what `devcell handoff` will do (the container, its mounts, limits,
//! repositories and permissions), derived from the workspace and the settings before anything is
//! created (`--plan`).

use crate::config::model::ConfigKind;
use crate::engine::Engine;
use crate::features::lockfile::LockfileMode;
use crate::handoff::context::{AgentRuntime, ContextInputs};
use crate::handoff::repository::{self, InspectOptions, MountPurpose, Workspace};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::{CommittedSide, WorkspaceOverride};
use crate::ops::options::{SecurityOptions, TargetOptions, UpOptions};
use crate::ops::target::{find_container, id_labels};
use crate::settings::{AgentSettings, NetworkMode, Profile, Settings};
use indexmap::IndexMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

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
    /// The state folder (`None`: [`StateStore::default_root`]).
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

/// One mount of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedMount {
    /// Host path.
    pub source: String,
    /// Container path.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
    /// `workspace`, `git`, `gitProtected` or `agentCredential`.
    pub purpose: String,
}

pub use super::named_container::PlannedContainer;

/// One service of a Compose configuration's plan (spec-note 0609).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedService {
    /// The service name.
    pub name: String,
    /// `primary` (the agent runs there) or `sidecar`.
    pub role: String,
    /// Compose's `image`, or `build <context>`.
    pub image: String,
    /// Whether the handoff starts it (`runServices`; the primary always).
    pub started: bool,
    /// `create`, `start` (exists, stopped) or `reuse` (running); `none` when not started.
    pub container: String,
    /// The existing container's id.
    pub id: Option<String>,
    /// Its requests (from the Compose files), judged; also in the plan's `permissions`.
    pub permissions: Vec<crate::security::PermissionRequest>,
}

/// The structured plan printed by `handoff --plan` and carried in the handoff result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffPlan {
    /// The agent's configured name.
    pub agent: String,
    /// The workspace root on the host.
    pub workspace: PathBuf,
    /// Where the root is mounted in the container.
    pub workspace_target: String,
    /// `repository`, `multiRepository` or `plain`.
    pub layout: repository::Layout,
    /// The repositories (name, container path, role, branch, head).
    pub repos: Vec<PlannedRepo>,
    /// The devcontainer.json used (`null` for the host runtime in a workspace without one).
    pub config_file: Option<PathBuf>,
    /// The image reference (image configs) or `build <Dockerfile>` (Dockerfile configs); empty
    /// for the host runtime.
    pub image: String,
    /// The Features the configuration asks for (ids as written).
    pub features: Vec<String>,
    /// `hardened` or `reference`; `none` for the host runtime.
    pub profile: String,
    /// `none`, `allowlist` or `default`; `host` for the host runtime.
    pub network: String,
    /// Under `allowlist`: the user's destinations (`[security].egress`, the agent's `egress`,
    /// `--egress-allow`); the repository's requests are among `permissions` (spec-note 0503).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    /// The resource limits of the `hardened` profile (`--pids-limit`, `--memory`, `--cpus`,
    /// else `[security]`); `null` under `reference`, which sets none.
    pub limits: Option<PlannedLimits>,
    /// The user's grants in effect (`--allow` and `[security] allow` words).
    pub grants: Vec<String>,
    /// Every permission request of the container, judged as the real handoff judges it
    /// (devcontainer.json, the Features' metadata, the image's metadata when the engine has
    /// the image; spec-note 0320): `{permission, value?, source, status, grant?}` with status
    /// `granted`, `allowedByProfile`, `refused` or `forbidden` and the `--allow` flag that
    /// grants it. A plan with a `refused` or `forbidden` request is not printed: `handoff
    /// --plan` fails with `permission_required` (exit 12), as the handoff would. Empty for the
    /// host runtime.
    pub permissions: Vec<crate::security::PermissionRequest>,
    /// What the plan could not judge without a pull or a build (the image's `USER` and
    /// metadata label, the Features' metadata), one sentence each.
    pub permission_notes: Vec<String>,
    /// The non-root user devcell provides because the image runs as root and the
    /// configuration names no user (spec-note 0188); also one of the `permission_notes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provided_user: Option<String>,
    /// Every mount the handoff adds.
    pub mounts: Vec<PlannedMount>,
    /// The user's dotfiles (`--dotfiles-repository`), installed once per container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dotfiles: Option<crate::handoff::dotfiles::PlannedDotfiles>,
    /// Names of the host variables passed to the agent (never values): its `env` allow-list.
    pub env: Vec<String>,
    /// The host variables the configuration sends into the container (`${localEnv:NAME}`,
    /// `runArgs -e NAME`), by name (never values), with the properties they go into; each is
    /// also a `hostEnv` permission request (spec-note 0440). Empty for the host runtime.
    pub host_env: Vec<crate::security::host_env::HostEnvUse>,
    /// Names of the secrets passed to hooks and the agent (never values).
    pub secrets: Vec<String>,
    /// The container (of a Compose configuration: the primary service's).
    pub container: PlannedContainer,
    /// A Compose configuration's services, the primary among them; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<PlannedService>,
    /// The agent's argv.
    pub command: Vec<String>,
    /// The agent's working folder in the container.
    pub cwd: String,
    /// The context file in the container.
    pub context_path: String,
    /// Verification commands written to the context file.
    pub verification: Vec<String>,
    /// Where the agent runs: `container` or `host` (spec-note 0251).
    pub runtime: AgentRuntime,
    /// What isolates it: `container`, or `none` on the host.
    pub isolation: String,
    /// A container devcell did not create (`--container`, spec-notes 0524 and 0526): who the
    /// agent runs as there and what becomes of git; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<PlannedExternal>,
    /// Non-fatal findings as envelope `(code, message)` pairs (the workspace's, a repository
    /// git could not read, a host variable not set); in the envelope's `warnings` only.
    #[serde(skip)]
    pub warnings: Vec<(String, String)>,
}

impl HandoffPlan {
    /// One human line per permission request. The git directories and agent credential files
    /// the handoff mounts itself, on the user's behalf (as if by `--mount`), are named by what
    /// they are rather than as "from command line".
    pub fn permission_lines(&self) -> Vec<String> {
        use crate::security::{Permission, Source};
        self.permissions
            .iter()
            .map(|perm| {
                let purpose = match &perm.permission {
                    Permission::Mount(path) if perm.source == Source::CommandLine => {
                        self.mounts
                            .iter()
                            .find(|m| &m.source == path)
                            .and_then(|m| match m.purpose.as_str() {
                                "git" | "gitProtected" | "gitObjects" | "containerGit"
                                | "gitLink" => Some("git directory of a workspace repository"),
                                "agentCredential" => Some("the agent's credential file"),
                                "dotfiles" => Some("your `--dotfiles-repository`, read-only"),
                                _ => None,
                            })
                    }
                    _ => None,
                };
                match purpose {
                    Some(purpose) => format!(
                        "{} ({purpose}; devcell mounts it for the handoff)",
                        perm.permission
                    ),
                    // a container devcell did not create keeps what it has: `set-up` warns
                    // about it (refusing only host control, which fails the plan), so "grant
                    // with" would offer a grant that changes nothing (spec-note 0526)
                    None if self.external.is_some()
                        && perm.status == crate::security::RequestStatus::Refused =>
                    {
                        format!(
                            "{} (from {}), already in the container: reported, not removed (devcell never changes a container it did not create; a grant changes nothing)",
                            perm.permission, perm.source
                        )
                    }
                    None => perm.to_string(),
                }
            })
            .collect()
    }
}

/// What the plan of a handoff into a container devcell did not create adds (spec-note 0526):
/// `set-up`'s judgement of it, made without running anything in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedExternal {
    /// The container's name.
    pub name: String,
    /// Who the hooks and the agent run as: the merged `remoteUser` (its `devcontainer.metadata`
    /// label), else the container's user, else `root`.
    pub remote_user: String,
    /// Under `hardened`: the numeric `uid:gid` every exec runs as (`null`: by name).
    pub exec_user: Option<String>,
    /// Whether that user is root (uid 0). Under `hardened` such an agent is refused unless
    /// `--allow root` grants it, and then the plan fails as the handoff would.
    pub root: bool,
    /// What becomes of the workspace's git: one sentence.
    pub git: String,
    /// What devcell does with the container and what it never does (start, stop, remove):
    /// one sentence.
    pub lifecycle: String,
}

/// The `hardened` profile's resource limits in the plan (a configuration's lower `runArgs`
/// values still win, spec-note 0085).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedLimits {
    /// Maximum number of processes.
    pub pids: i64,
    /// Memory limit in bytes.
    pub memory_bytes: i64,
    /// CPU limit in CPUs.
    pub cpus: f64,
}

/// One repository in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedRepo {
    /// Folder name.
    pub name: String,
    /// Path in the container.
    pub path: String,
    /// `primary` or `secondary`.
    pub role: repository::RepoRole,
    /// Branch, `null` when detached.
    pub branch: Option<String>,
    /// HEAD commit.
    pub head: Option<String>,
}

/// The envelope warning code of the host runtime's warning.
pub const UNISOLATED_CODE: &str = "unisolated";

/// The warning every host-runtime handoff (and its plan) carries, on stderr before the agent
/// starts and in the envelope's `warnings` (code [`UNISOLATED_CODE`]).
pub fn unisolated_warning(agent: &str, root: &Path) -> String {
    format!(
        "UNISOLATED: agent `{agent}` runs directly on this host (`--runtime host`), in `{}`: no container, no security profile, no network policy; it can read, change and delete anything your user can, use your credentials, and reach any network",
        root.display()
    )
}

impl HandoffPlan {
    /// The plan's warnings as envelope `(code, message)` pairs: the unisolated warning first
    /// for the host runtime, then [`HandoffPlan::warnings`].
    pub fn coded_warnings(&self) -> Vec<(String, String)> {
        let mut out = match self.runtime {
            AgentRuntime::Host => vec![(
                UNISOLATED_CODE.to_string(),
                unisolated_warning(&self.agent, &self.workspace),
            )],
            AgentRuntime::Container => Vec::new(),
        };
        out.extend(self.warnings.iter().cloned());
        out
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

/// The plan's `image` for a Compose configuration: `compose service <name>`.
pub(crate) const COMPOSE_PLAN_PREFIX: &str = "compose service ";

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

/// [`plan`] of a Compose configuration: every service judged with the configuration and the workspace's
/// git directories ([`crate::ops::compose_up::preview_compose`]), the primary service's
/// container as the plan's `container`, and each service listed with its requests.
async fn plan_compose(
    prepared: Prepared,
    opts: &HandoffOptions,
    engine: Option<&dyn Engine>,
) -> Result<HandoffPlan> {
    let config_file = prepared.plan.config_file.clone().unwrap_or_default();
    let Some(engine) = engine else {
        return Err(OpsError::Unsupported {
            message: format!(
                "`{}`: `handoff --plan` of a Docker Compose configuration needs the engine (it looks up the project's containers)",
                config_file.display()
            ),
            hint: Some("start the engine, or check `DOCKER_HOST`".into()),
        });
    };
    let mut up_opts = up_options(&prepared, opts);
    if let Some(mount) = prepared
        .target
        .workspace_override
        .as_ref()
        .and_then(|o| o.mount.as_ref())
    {
        up_opts.mounts.insert(0, mount.clone());
    }
    let choice = crate::ops::up::load_up(&up_opts)?;
    let preview =
        crate::ops::compose_up::preview_compose(engine, &up_opts, &choice, &prepared.git_requests)
            .await?;
    let action = |c: Option<&crate::engine::ContainerInfo>| match c {
        None => "create",
        Some(c) if c.running => "reuse",
        Some(_) => "start",
    };
    let mut plan = prepared.plan;
    plan.services = preview
        .services
        .iter()
        .map(|s| PlannedService {
            name: s.name.clone(),
            role: if s.primary { "primary" } else { "sidecar" }.to_string(),
            image: s.image.clone(),
            started: s.started,
            container: if s.started {
                action(s.container.as_ref()).to_string()
            } else {
                "none".to_string()
            },
            id: s.container.as_ref().map(|c| c.id.clone()),
            permissions: preview
                .requests
                .iter()
                .filter(|r| {
                    matches!(&r.source, crate::security::Source::ComposeService { service, .. } if *service == s.name)
                })
                .cloned()
                .collect(),
        })
        .collect();
    if let Some(primary) = preview.services.iter().find(|s| s.primary) {
        plan.container = PlannedContainer {
            action: action(primary.container.as_ref()).to_string(),
            id: primary.container.as_ref().map(|c| c.id.clone()),
            labels: crate::engine::compose::service_labels(&preview.project, &primary.name),
        };
    }
    plan.permissions = listed_once(preview.requests);
    plan.permission_notes.push(
        crate::ops::compose_network::ComposeNetwork::of(prepared.network)
            .note()
            .to_string(),
    );
    plan.permission_notes.push(
        "the primary service's image, its `USER` and its Features' metadata are judged when the handoff builds it, before its container exists".to_string(),
    );
    Ok(plan)
}

/// The `up` a container handoff runs: the hardened profile, the handoff's mounts, network,
/// secrets and `safe.directory` entries; the lockfile honoured, never written.
pub(crate) fn up_options(p: &Prepared, opts: &HandoffOptions) -> UpOptions {
    UpOptions {
        target: p.target.clone(),
        secrets: p.secrets.clone(),
        mounts: p.extra_mounts.clone(),
        security: SecurityOptions {
            profile: Some(p.profile),
            network: Some(p.network),
            ..opts.security.clone()
        },
        settings: opts.settings.clone(),
        lockfile: match opts.lockfile {
            LockfileMode::Write => LockfileMode::ReadOnly,
            other => other,
        },
        safe_directories: safe_directories(&p.workspace, &p.gits)
            .into_iter()
            .chain(p.dotfiles.iter().filter_map(|d| d.safe_directory()))
            .collect(),
        dotfiles: p.dotfiles.as_ref().map(|d| d.in_container.clone()),
        covers: crate::handoff::container_git::covers(
            (&p.workspace.root, &p.workspace.container_root),
            &p.gits,
        )
        .into_iter()
        .chain(p.nested.covers())
        .collect(),
        owned_sources: p
            .gits
            .iter()
            .filter_map(|g| g.slot.parent().map(Path::to_path_buf))
            .take(1)
            .collect(),
        recorded_features: crate::ops::environment::RecordedFeatures::of(&opts.environment),
        // `--container`: the named container (checked in the plan), never one made in its place
        expect_existing_container: opts.container.is_some(),
        ..UpOptions::default()
    }
}

/// The plan in a few status lines (shown before anything is created).
pub(super) fn plan_lines(p: &HandoffPlan) -> Vec<String> {
    let mut out = vec![
        format!(
            "plan: agent `{}` {:?} in {} as the workspace `{}` ({} {})",
            p.agent,
            p.command,
            p.cwd,
            p.workspace.display(),
            p.repos.len(),
            if p.repos.len() == 1 {
                "repository"
            } else {
                "repositories"
            }
        ),
        match p.runtime {
            AgentRuntime::Container => format!(
                "plan: image {} ({} Features), profile {}, network {}, container: {}",
                p.image,
                p.features.len(),
                p.profile,
                p.network,
                p.container.action
            ),
            AgentRuntime::Host => {
                "plan: runtime host: no image, no container, no isolation, the host's network"
                    .to_string()
            }
        },
    ];
    if p.network == crate::ops::egress::ALLOWLIST {
        out.push(format!(
            "plan: egress allowlist {:?} (through devcell's host-side proxy; the repository's requests are listed as permissions)",
            p.egress
        ));
    }
    out.extend(p.dotfiles.iter().map(crate::handoff::dotfiles::plan_line));
    out.extend(p.permissions.iter().map(|perm| format!("plan: {perm}")));
    if !p.env.is_empty() || !p.secrets.is_empty() || !p.host_env.is_empty() {
        let from_config: Vec<&str> = p.host_env.iter().map(|u| u.name.as_str()).collect();
        out.push(format!(
            "plan: env {:?}, host variables from the configuration {from_config:?}, secrets {:?} (names only)",
            p.env, p.secrets
        ));
    }
    out
}

pub(super) fn ctx_rel_path(settings: &Settings) -> String {
    settings.handoff.context_path.clone()
}

/// The workspace's untrusted git directories ([`Workspace::untrusted_git_dirs`]) as
/// [`crate::security::Permission::GitDir`] requests, judged by `profile` and `grants`.
pub(crate) fn git_dir_requests(
    ws: &Workspace,
    profile: &crate::security::SecurityProfile,
    grants: &crate::security::Grants,
) -> Vec<crate::security::PermissionRequest> {
    use crate::security::{Permission, Source};
    let asked = ws.untrusted_git_dirs.iter().map(|u| {
        (
            Permission::GitDir(u.path.to_string_lossy().into_owned()),
            Source::GitLink(u.link.to_string_lossy().into_owned()),
        )
    });
    crate::security::judge(profile, asked, grants)
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
    let (image, features, container, config_warnings) =
        plan_container(opts, engine, &target, host, judged.confine, profile).await?;
    let cwd = agent_cwd(opts, &ws);
    let plan = HandoffPlan {
        config_file,
        image,
        features,
        profile: shown_profile,
        network: shown_network,
        egress: planned_egress(opts, host, network)?,
        limits: judged.limits,
        mounts: mounts.planned,
        dotfiles: dotfiles.as_ref().map(|d| d.planned.clone()),
        env: agent_env.keys().cloned().collect(),
        container,
        command: agent.command.clone(),
        cwd: cwd.clone(),
        warnings: plan_warnings(&ws, &warnings, &config_warnings),
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

/// The target a handoff brings up: the workspace root, the configuration found, the
/// caller's environment and the handoff's workspace mount and folder.
fn handoff_target(
    opts: &HandoffOptions,
    ws: &Workspace,
    config: Option<PathBuf>,
    mount: Option<crate::engine::Mount>,
) -> TargetOptions {
    TargetOptions {
        workspace_folder: ws.root.clone(),
        config,
        mount_workspace_git_root: false,
        id_labels: Vec::new(),
        env: opts.env.clone(),
        workspace_override: Some(WorkspaceOverride {
            mount,
            folder: ws.container_root.clone(),
            committed: committed_side(opts),
        }),
        ..TargetOptions::default()
    }
}

/// Where the registry judgement reads the user's committed side: a clone task's clone is the
/// agent's to commit in, so its `HEAD` is not the user's (attack 25, P6); the user's repository
/// at the task's base stands for it (no committed side for a multi-repository task).
fn committed_side(opts: &HandoffOptions) -> CommittedSide {
    match &opts.sandbox {
        None => CommittedSide::Workspace,
        Some(sandbox) => match &sandbox.source {
            Some(repository) => CommittedSide::Source {
                repository: repository.clone(),
                revision: sandbox.base.clone(),
            },
            None => CommittedSide::Nothing,
        },
    }
}

/// The image, Features, container and configuration warnings of the plan
/// ([`planned_container`]; none on the host or without a configuration), with `--container`'s
/// named container checked against it.
///
/// Errors: as [`planned_container`]; the named container's refusal.
async fn plan_container(
    opts: &HandoffOptions,
    engine: Option<&dyn Engine>,
    target: &TargetOptions,
    host: bool,
    confine: Option<crate::security::Grants>,
    profile: Profile,
) -> Result<(
    String,
    Vec<String>,
    PlannedContainer,
    Vec<crate::diagnostics::Warning>,
)> {
    let (image, features, container, config_warnings) = match &target.config {
        Some(_) if !host => planned_container(target, engine, confine).await?,
        _ => (
            String::new(),
            Vec::new(),
            PlannedContainer {
                action: "none".into(),
                id: None,
                labels: BTreeMap::new(),
            },
            Vec::new(),
        ),
    };
    if let Some(named) = &opts.container {
        crate::handoff::named_container::check_planned(
            engine,
            named,
            &container,
            image.starts_with(COMPOSE_PLAN_PREFIX),
            profile,
        )
        .await?;
    }
    Ok((image, features, container, config_warnings))
}

/// Where the agent starts: the `--primary` repository's folder in the container, else the
/// workspace root's.
fn agent_cwd(opts: &HandoffOptions, ws: &Workspace) -> String {
    match &opts.primary {
        Some(_) => ws
            .primary()
            .map(|r| r.container_path.clone())
            .unwrap_or_else(|| ws.container_root.clone()),
        None => ws.container_root.clone(),
    }
}

/// The egress allowlist's entries the plan shows (the settings', the agent's and the flags'),
/// for a container under `allowlist`; none otherwise.
///
/// Errors: as [`crate::ops::egress::user_entries`].
fn planned_egress(opts: &HandoffOptions, host: bool, network: NetworkMode) -> Result<Vec<String>> {
    if !host && network == NetworkMode::Allowlist {
        crate::ops::egress::user_entries(
            &opts.settings,
            Some(&opts.agent),
            &opts.security.egress_allow,
        )
    } else {
        Ok(Vec::new())
    }
}

/// The agent's settings (`[agents.NAME]`), with a command to run.
fn resolve_agent(opts: &HandoffOptions) -> Result<AgentSettings> {
    let settings = &opts.settings;
    let agent =
        settings
            .agents
            .get(&opts.agent)
            .cloned()
            .ok_or_else(|| OpsError::UnknownAgent {
                name: opts.agent.clone(),
                config: match (&settings.file, settings.file_exists) {
                    (Some(f), true) => format!("`{}`", f.display()),
                    (Some(f), false) => format!("`{}` (not found)", f.display()),
                    (None, _) => "(no file)".to_string(),
                },
                available: settings.agents.keys().cloned().collect(),
            })?;
    if agent.command.is_empty() || agent.command[0].is_empty() {
        return Err(agent_err(opts, "`command` is empty: give the agent's argv, e.g. `command = [\"codex\", \"--full-auto\"]`".into()));
    }
    Ok(agent)
}

/// [`OpsError::AgentConfig`] for the handoff's agent.
fn agent_err(opts: &HandoffOptions, message: String) -> OpsError {
    OpsError::AgentConfig {
        agent: opts.agent.clone(),
        message,
    }
}

/// The workspace, inspected. Git directories outside the workspace are read and mounted only
/// when trusted or granted (spec-note 0411); on the host every path the agent is given is a
/// host path.
fn inspect_workspace(opts: &HandoffOptions, profile: Profile, host: bool) -> Result<Workspace> {
    let settings = &opts.settings;
    let mut inspect_options = InspectOptions::from_settings(settings, opts.primary.clone());
    let allow: Vec<String> = settings
        .security
        .allow
        .iter()
        .chain(opts.security.allow.iter())
        .cloned()
        .collect();
    inspect_options.trusted_git_dirs = repository::trusted_git_dirs(profile, &allow);
    // a `.git` an agent created is none of the workspace's repositories until accepted (M8)
    if opts.sandbox.is_none()
        && opts.workspace_folder.is_dir()
        && let Some(state) = opts
            .state_root
            .clone()
            .or_else(crate::handoff::state::StateStore::default_root)
    {
        inspect_options.created_git = crate::handoff::state::StateStore::new(state)
            .created_gits(&opts.workspace_folder, &allow)?;
    }
    if host {
        let root = std::fs::canonicalize(&opts.workspace_folder)
            .unwrap_or_else(|_| opts.workspace_folder.clone());
        inspect_options.container_root = root.to_string_lossy().into_owned();
        inspect_options.protect_git_config = false;
    }
    let mut ws = repository::inspect(&opts.workspace_folder, &inspect_options)?;
    if opts.sandbox.is_some() {
        // a clone task's `.git` is its own, read by devcell's host git only with everything
        // it could run disabled (spec-note 0437): a missing hooks folder there endangers nothing
        ws.warnings.retain(|w| w.code != "git_hooks_unprotected");
    }
    Ok(ws)
}

/// The workspace's configuration file (the host runtime needs none).
fn find_configuration(ws: &Workspace, host: bool) -> Result<Option<PathBuf>> {
    match &ws.config_folder {
        Some(folder) => Ok(Some(crate::config::discover::discover(folder, None)?)),
        None if host => Ok(None),
        None => Err(OpsError::NoConfiguration {
            root: ws.root.clone(),
        }),
    }
}

/// A container handoff's choices, judged before anything is planned or created (none applies
/// on the host).
#[derive(Default)]
struct JudgedChoices {
    /// The grants the configuration file is confined to (spec-note 0400).
    confine: Option<crate::security::Grants>,
    /// The untrusted git directories as judged requests.
    git_requests: Vec<crate::security::PermissionRequest>,
    choice: Option<crate::security::Choice>,
    limits: Option<PlannedLimits>,
}

/// The profile, limits and grants, checked: the config file is judged before it is read, as
/// `up` judges it (spec-note 0400), and the untrusted git directories with it.
fn judge_choices(
    flags: &SecurityOptions,
    settings: &Settings,
    ws: &Workspace,
) -> Result<JudgedChoices> {
    let chosen = crate::security::Choice::resolve(
        flags,
        settings,
        crate::security::choice::HANDOFF_NETWORK,
    )?;
    let confine = crate::ops::permissions::confine_grants(&chosen.profile, &chosen.grants);
    let git_requests = git_dir_requests(ws, &chosen.profile, &chosen.grants);
    let limits = match &chosen.profile {
        crate::security::SecurityProfile::Hardened(l) => Some(PlannedLimits {
            pids: l.pids,
            memory_bytes: l.memory_bytes,
            cpus: l.nano_cpus as f64 / 1e9,
        }),
        crate::security::SecurityProfile::Reference => None,
    };
    Ok(JudgedChoices {
        confine,
        git_requests,
        choice: Some(chosen),
        limits,
    })
}

/// The network and profile the plan shows (`host`/`none` on the host), warning about flags
/// that have no effect.
fn shown_choices(
    opts: &HandoffOptions,
    host: bool,
    network: NetworkMode,
    profile: Profile,
    warnings: &mut Vec<String>,
) -> (String, String) {
    if !host && network != NetworkMode::Allowlist && !opts.security.egress_allow.is_empty() {
        warnings.push(format!(
            "`--egress-allow` has no effect under network `{network}`: it lists destinations for `--network allowlist`"
        ));
    }
    if host {
        if opts.security.network.is_some()
            || opts.security.profile.is_some()
            || !opts.security.allow.is_empty()
            || opts.security.pids_limit.is_some()
            || opts.security.memory.is_some()
            || opts.security.cpus.is_some()
        {
            warnings.push(
                "`--network`, `--security-profile`, `--allow` and the limit flags have no effect with `--runtime host`: the agent gets the host's network, no resource limits and every permission of its user"
                    .to_string(),
            );
        }
        if opts.mail_channel.is_none() && opts.settings.mail.worktrees {
            // issue 30: the channel lives in a container; say it is absent, never silently
            warnings.push(
                "`[mail] worktrees = true` gives handoffs the mail channel, but `--runtime host` makes no container: this agent has no `devcell-mail` and no other task can reach it (pass `--no-mail` to say so and silence this)"
                    .to_string(),
            );
        }
        ("host".to_string(), "none".to_string())
    } else {
        (network.to_string(), profile.to_string())
    }
}

/// Each repository's container git directory: the container never sees a host git directory,
/// each repository gets one devcell keeps in its state folder (spec-note 0436). None on the
/// host, and none for a clone task, whose `.git` is the container's (spec-note 0437).
fn container_gits(
    opts: &HandoffOptions,
    ws: &Workspace,
    host: bool,
) -> Result<Vec<crate::handoff::container_git::RepoGit>> {
    if host || opts.sandbox.is_some() {
        return Ok(Vec::new());
    }
    let state_root = match &opts.state_root {
        Some(root) => root.clone(),
        None => crate::handoff::state::StateStore::default_root()
            .ok_or(crate::handoff::state::StateError::NoStateDir)?,
    };
    let key = crate::handoff::state::workspace_key(&ws.root)?;
    Ok(crate::handoff::container_git::repo_gits(
        ws,
        &state_root.join("git").join(key),
    )?)
}

/// Every `.git` below the workspace that no container git directory covers, covered in turn
/// (none on the host or for a clone task, like [`container_gits`]); those the user accepted
/// uncovered are warnings ([`crate::handoff::nested_git`]). Also the workspace's git identity
/// the judgement walked, handed to the session start (one walk fewer per handoff).
fn nested_gits(
    opts: &HandoffOptions,
    ws: &Workspace,
    gits: &[crate::handoff::container_git::RepoGit],
    host: bool,
    choice: Option<&crate::security::Choice>,
    warnings: &mut Vec<String>,
) -> Result<(
    crate::handoff::nested_git::NestedGits,
    Option<crate::handoff::git_identity::GitIdentity>,
)> {
    if host || opts.sandbox.is_some() {
        return Ok((crate::handoff::nested_git::NestedGits::default(), None));
    }
    let identity = crate::handoff::git_identity::record(&ws.root);
    let nested = crate::handoff::nested_git::judge(ws, gits, &identity, choice.map(|c| &c.grants))?;
    warnings.extend(nested.warnings());
    Ok((nested, Some(identity)))
}

/// A handoff's mounts: as planned, the workspace mount and the extra mounts, typed to the
/// engine call.
struct Mounts {
    planned: Vec<PlannedMount>,
    workspace: Option<crate::engine::Mount>,
    extra: Vec<crate::engine::Mount>,
}

/// The dotfiles step ([`crate::handoff::dotfiles::plan`]), the read-only bind of its host
/// folder's export (`<state>/dotfiles/<workspace key>`) added to `mounts`.
fn with_dotfiles(
    opts: &HandoffOptions,
    ws: &Workspace,
    host: bool,
    network: NetworkMode,
    mounts: &mut Mounts,
) -> Result<Option<crate::handoff::dotfiles::HandoffDotfiles>> {
    if opts.dotfiles.is_none() {
        return Ok(None);
    }
    let state_root = match &opts.state_root {
        Some(root) => root.clone(),
        None => crate::handoff::state::StateStore::default_root()
            .ok_or(crate::handoff::state::StateError::NoStateDir)?,
    };
    let export = state_root
        .join("dotfiles")
        .join(crate::handoff::state::workspace_key(&ws.root)?);
    let dotfiles = crate::handoff::dotfiles::plan(opts.dotfiles.as_ref(), host, network, &export)?;
    if let Some(m) = dotfiles.as_ref().and_then(|d| d.mount.as_ref()) {
        mounts.extra.push(m.to_mount());
        mounts.planned.push(PlannedMount {
            source: m.source.to_string_lossy().into_owned(),
            target: m.target.clone(),
            read_only: true,
            purpose: "dotfiles".into(),
        });
    }
    Ok(dotfiles)
}

/// The root becomes the workspace mount; the git directories' mounts and the agent's read-only
/// credential mounts are extra mounts (none on the host: the agent sees everything its user
/// can).
fn plan_mounts(
    opts: &HandoffOptions,
    agent: &AgentSettings,
    ws: &Workspace,
    gits: &[crate::handoff::container_git::RepoGit],
    nested: &crate::handoff::nested_git::NestedGits,
    host: bool,
    home: Option<&str>,
) -> Result<Mounts> {
    let mounts = if host {
        Vec::new()
    } else {
        let mut m = crate::handoff::container_git::mounts(ws, gits);
        m.extend(nested.mounts());
        m
    };
    let mut planned: Vec<PlannedMount> = Vec::new();
    let mut extra_mounts = Vec::new();
    let mut workspace_mount = None;
    for m in &mounts {
        let purpose = m.purpose.as_str();
        planned.push(PlannedMount {
            source: m.source.to_string_lossy().into_owned(),
            target: m.target.clone(),
            read_only: m.read_only,
            purpose: purpose.into(),
        });
        if m.purpose == MountPurpose::Workspace {
            workspace_mount = Some(m.to_mount());
        } else {
            extra_mounts.push(m.to_mount());
        }
    }
    for m in agent.mounts.iter().filter(|_| !host) {
        let source = expand_home(&m.source, home)
            .ok_or_else(|| agent_err(opts, format!("mount source `{}` needs `HOME`", m.source)))?;
        if !m.target.starts_with('/') {
            return Err(agent_err(
                opts,
                format!(
                    "mount target `{}` must be an absolute container path",
                    m.target
                ),
            ));
        }
        if !Path::new(&source).exists() {
            return Err(agent_err(
                opts,
                format!("mount source `{source}` does not exist"),
            ));
        }
        let wm = repository::WorkspaceMount {
            source: PathBuf::from(&source),
            target: m.target.clone(),
            read_only: true,
            purpose: MountPurpose::GitProtected,
        };
        extra_mounts.push(wm.to_mount());
        planned.push(PlannedMount {
            source,
            target: m.target.clone(),
            read_only: true,
            purpose: "agentCredential".into(),
        });
    }
    // The mail channel of a clone task (spec-note 0531): two read-only binds.
    for (source, target) in opts
        .mail
        .iter()
        .flat_map(|d| &d.container.binds)
        .filter(|_| !host)
    {
        planned.push(PlannedMount {
            source: source.to_string_lossy().into_owned(),
            target: target.clone(),
            read_only: true,
            purpose: "mailChannel".into(),
        });
    }
    if !host {
        extra_mounts.extend(opts.mail.iter().flat_map(|d| d.container.mounts()));
    }
    Ok(Mounts {
        planned,
        workspace: workspace_mount,
        extra: extra_mounts,
    })
}

/// The agent's secrets: its references (`env:NAME`, `file:PATH`), then `--secrets-file`
/// (which wins).
fn resolve_secrets(
    opts: &HandoffOptions,
    agent: &AgentSettings,
    home: Option<&str>,
) -> Result<IndexMap<String, String>> {
    let mut secrets = IndexMap::new();
    for (name, reference) in &agent.secrets {
        let value = if let Some(var) = reference.strip_prefix("env:") {
            opts.env.get(var).cloned().ok_or_else(|| {
                agent_err(
                    opts,
                    format!("secret `{name}` refers to host variable `{var}`, which is not set"),
                )
            })?
        } else if let Some(path) = reference.strip_prefix("file:") {
            let path = expand_home(path, home).ok_or_else(|| {
                agent_err(opts, format!("secret `{name}`: `{path}` needs `HOME`"))
            })?;
            let text = crate::config::bounded::read_to_string(
                Path::new(&path),
                crate::config::jsonc::MAX_FILE_BYTES as u64,
            )
            .map_err(|e| agent_err(opts, format!("secret `{name}`: cannot read `{path}`: {e}")))?;
            text.trim_end_matches(['\n', '\r']).to_string()
        } else {
            return Err(agent_err(
                opts,
                format!(
                    "secret `{name}`: expected `env:NAME` or `file:PATH`, found a reference of another form"
                ),
            ));
        };
        secrets.insert(name.clone(), value);
    }
    secrets.extend(opts.secrets.clone());
    Ok(secrets)
}

/// The host variables the agent passes through (`env`); one not set is warned about.
fn agent_env(
    opts: &HandoffOptions,
    agent: &AgentSettings,
    warnings: &mut Vec<String>,
) -> IndexMap<String, String> {
    let mut agent_env = IndexMap::new();
    for name in &agent.env {
        match opts.env.get(name) {
            Some(v) => {
                agent_env.insert(name.clone(), v.clone());
            }
            None => warnings.push(format!(
                "host variable `{name}` (agent `{}` env) is not set: not passed",
                opts.agent
            )),
        }
    }
    agent_env
}

/// The plan's warnings: the workspace's findings keep their codes (`git_unreadable`, …); the
/// rest are the handoff's own; then the configuration's own (unknown, duplicate, deprecated
/// properties), as `up` and the handoff show them (issue 28 item 5).
fn plan_warnings(
    ws: &Workspace,
    warnings: &[String],
    config_warnings: &[impl ToString],
) -> Vec<(String, String)> {
    ws.warnings
        .iter()
        .map(|w| (w.code.clone(), w.message.clone()))
        .chain(
            warnings
                .iter()
                .skip(ws.warnings.len())
                .map(|w| ("handoff".to_string(), w.clone())),
        )
        .chain(
            config_warnings
                .iter()
                .map(|w| (CONFIG_WARNING_CODE.to_string(), w.to_string())),
        )
        .collect()
}

/// The plan's parts that follow from the workspace and the settings alone (the rest are
/// filled in by [`prepare`]).
fn plan_of_workspace(
    opts: &HandoffOptions,
    ws: &Workspace,
    secrets: &IndexMap<String, String>,
    runtime: AgentRuntime,
) -> HandoffPlan {
    let settings = &opts.settings;
    let mut grants = settings.security.allow.clone();
    grants.extend(opts.security.allow.iter().cloned());
    let inputs =
        ContextInputs::from_settings(settings, &opts.agent, &opts.verify).unwrap_or_default();
    let context_path = repository::normalize_posix(&format!(
        "{}/{}",
        ws.container_root, settings.handoff.context_path
    ));
    let mut secret_names: Vec<String> = secrets.keys().cloned().collect();
    secret_names.sort();
    HandoffPlan {
        agent: opts.agent.clone(),
        workspace: ws.root.clone(),
        workspace_target: ws.container_root.clone(),
        layout: ws.layout,
        repos: ws
            .repos
            .iter()
            .map(|r| PlannedRepo {
                name: r.name.clone(),
                path: r.container_path.clone(),
                role: r.role,
                branch: r.branch.clone(),
                head: r.head.clone(),
            })
            .collect(),
        config_file: None,
        image: String::new(),
        features: Vec::new(),
        profile: String::new(),
        network: String::new(),
        egress: Vec::new(),
        limits: None,
        grants,
        permissions: Vec::new(),
        permission_notes: Vec::new(),
        provided_user: None,
        mounts: Vec::new(),
        dotfiles: None,
        env: Vec::new(),
        host_env: Vec::new(),
        secrets: secret_names,
        container: PlannedContainer {
            action: String::new(),
            id: None,
            labels: BTreeMap::new(),
        },
        services: Vec::new(),
        command: Vec::new(),
        cwd: String::new(),
        context_path,
        verification: inputs.verification,
        runtime,
        isolation: runtime.isolation().to_string(),
        external: None,
        warnings: Vec::new(),
    }
}

/// The envelope warning code of the configuration's own warnings in a plan (unknown,
/// duplicate and deprecated properties; spec-note 0002).
pub const CONFIG_WARNING_CODE: &str = "configuration";

/// The image (reference, or `build <Dockerfile>`), the Features as written, the container
/// (asked of `engine` when there is one) of a container handoff's plan, and the
/// configuration's own warnings.
pub(crate) async fn planned_container(
    target: &TargetOptions,
    engine: Option<&dyn Engine>,
    confine: Option<crate::security::Grants>,
) -> Result<(
    String,
    Vec<String>,
    PlannedContainer,
    Vec<crate::diagnostics::Warning>,
)> {
    let loaded = crate::ops::target::load_for(target, confine)?;
    // A Compose configuration is brought up through Compose (spec-note 0606); no other
    // kind the steps refuse gets a container in the plan.
    if loaded.typed.kind() != ConfigKind::Compose {
        crate::ops::up::supported_kind(&loaded)?;
    }
    let labels = id_labels(target, &loaded);
    let image = match loaded.typed.kind() {
        ConfigKind::Image => loaded.typed.image.clone().unwrap_or_default(),
        ConfigKind::Dockerfile => format!(
            "build {}",
            loaded
                .typed
                .dockerfile_path(&loaded.config_file)
                .unwrap_or_default()
                .display()
        ),
        ConfigKind::Compose => format!(
            "{COMPOSE_PLAN_PREFIX}{}",
            loaded.typed.service.clone().unwrap_or_default()
        ),
        _ => String::new(),
    };
    let features = loaded.typed.features.keys().cloned().collect();
    let container = match engine {
        Some(engine) => match find_container(
            engine,
            &labels,
            crate::ops::target::expected_workspace(target, &loaded).as_deref(),
            &mut Vec::new(),
        )
        .await
        {
            Ok(Some(info)) => PlannedContainer {
                action: if info.running { "reuse" } else { "start" }.into(),
                id: Some(info.id),
                labels: labels.clone(),
            },
            Ok(None) => PlannedContainer {
                action: "create".into(),
                id: None,
                labels: labels.clone(),
            },
            Err(_) => PlannedContainer {
                action: "unknown".into(),
                id: None,
                labels: labels.clone(),
            },
        },
        None => PlannedContainer {
            action: "unknown".into(),
            id: None,
            labels: labels.clone(),
        },
    };
    Ok((image, features, container, loaded.warnings))
}

/// `~/x` → `<home>/x`; other paths unchanged; `None` when `~/` is used without a home.
pub(crate) fn expand_home(path: &str, home: Option<&str>) -> Option<String> {
    match path.strip_prefix("~/") {
        Some(rest) => home.map(|h| format!("{}/{rest}", h.trim_end_matches('/'))),
        None if path == "~" => home.map(str::to_string),
        None => Some(path.to_string()),
    }
}

/// The `safe.directory` entries of a handoff: every repository's working tree and every git
/// directory mounted, as the container sees them.
pub(crate) fn safe_directories(
    ws: &Workspace,
    gits: &[crate::handoff::container_git::RepoGit],
) -> Vec<String> {
    let mut dirs: Vec<String> = ws.safe_directories();
    // a submodule's working tree (the workspace's repositories are in `ws`'s list)
    dirs.extend(
        gits.iter()
            .filter(|g| g.nested)
            .map(|g| g.container_path.clone()),
    );
    dirs.extend(gits.iter().map(|g| g.git_target()));
    dirs.extend(gits.iter().map(|g| g.objects_target()));
    dirs
}

/// `requests` without the command-line `mount` requests of a git directory (and of the folders
/// in it the handoff mounts read-only) that is also a `gitDir` request: the handoff mounts the git directory it was granted, and that mount is
/// the same permission, listed once (spec-note 0411). The mounts of trusted git directories
/// (a worktree's repository) stay requests, named by purpose in the plan's lines.
pub(crate) fn listed_once(
    requests: Vec<crate::security::PermissionRequest>,
) -> Vec<crate::security::PermissionRequest> {
    use crate::security::{Permission, Source};
    let canonical = |p: &str| {
        crate::security::host_path::resolve(std::path::Path::new(p))
            .unwrap_or_else(|_| std::path::PathBuf::from(p))
    };
    let git_dirs: Vec<std::path::PathBuf> = requests
        .iter()
        .filter_map(|r| match &r.permission {
            Permission::GitDir(p) => Some(canonical(p)),
            _ => None,
        })
        .collect();
    requests
        .into_iter()
        .filter(|r| {
            !matches!((&r.permission, &r.source), (Permission::Mount(p), Source::CommandLine)
                if git_dirs.iter().any(|g| canonical(p).starts_with(g)))
        })
        .collect()
}
