//! `handoff`: hand a workspace to a coding agent inside a hardened dev container (the Grove 1.2
//! RFC's golden path; spec-notes 0200-0206).
//!
//! Steps: resolve the agent (`[agents.NAME]` of the user settings), inspect the workspace
//! ([`super::workspace::inspect`]) and find its configuration (the primary repository's
//! `.devcontainer`, else the root's) → a structured [`HandoffPlan`] ([`plan`] stops here) →
//! start a session in the host-side state ([`super::state`]; a live session refuses the handoff
//! with `session_active` unless `replace`) → `up` ([`super::up::up_with`]) with the workspace
//! root mounted whole at the workspace target (`/workspace`), the repositories' git directories
//! and read-only git config/hooks overlays, the agent's read-only credential mounts, the network
//! mode (`none` unless the agent or a flag asks for `default`) → the context file and
//! `AGENTS.md` (when absent) → the agent's argv run in the container as the remote user, in the
//! workspace root (or the primary repository with `--primary`), through the engine's exec.
//!
//! The agent's environment is the probed user environment ⊕ `remoteEnv`, the agent's
//! passed-through host variables, its secrets (`env:NAME` / `file:PATH` references and
//! `--secrets-file`), and `safe.directory` entries for every repository given to git as
//! `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`. All of it travels in the exec
//! request's environment only: never in the container's configuration or labels, the context
//! file, the state, the log, or any host process's argv. Secret values are masked (`********`) in
//! everything devcell shows or keeps of the agent's output.
//!
//! The agent is started as `sh -c 'echo $$ > <pidfile>; exec "$@"' devcell-agent <argv…>` so a
//! replacing handoff (or a stop request) can signal exactly that process; its argv reaches it
//! unchanged (no shell interpretation of the agent's words).
//!
//! With `runtime: Some(AgentRuntime::Host)` (`--runtime host`) the agent runs on the host
//! instead, unisolated and warned about ([`super::host`], spec-note 0251); an unreachable engine
//! is never a reason to do that silently.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indexmap::IndexMap;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::model::ConfigKind;
use crate::diagnostics::SecretMask;
use crate::engine::{DockerEngine, Engine, ExecInput, ExecOutput, ExecRequest};
use crate::features::lockfile::LockfileMode;
use crate::handoff::agents_md::{self, AgentsMdOutcome};
use crate::handoff::context::{
    self, AgentRuntime, ContextInputs, FeatureInfo, HandoffContext, ImageInfo, Task,
};
use crate::handoff::error::{HandoffError, Result};
use crate::handoff::executor::EngineExecutor;
use crate::handoff::read_configuration::WorkspaceOverride;
use crate::handoff::state::{Session, SessionOutcome, StateStore};
use crate::handoff::up::{
    ContainerAction, SecurityOptions, TargetOptions, UpOptions, append_safe_directories,
    attach_running, find_container, id_labels, remote_env, up_with,
};
use crate::handoff::workspace::{self, InspectOptions, MountPurpose, Workspace};
use crate::lifecycle::{DEFAULT_PROBE_TIMEOUT, LifecycleReport, UserEnvProbe, probe_user_env};
use crate::progress::{Event, Reporter};
use crate::settings::{AgentSettings, Settings};

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

/// The container the plan uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedContainer {
    /// `create`, `start` (exists, stopped) or `reuse` (running); `unknown` without an engine;
    /// `none` for the host runtime.
    pub action: String,
    /// The existing container's id.
    pub id: Option<String>,
    /// The labels that identify it.
    pub labels: BTreeMap<String, String>,
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
    pub layout: workspace::Layout,
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
    /// `none` or `default`; `host` for the host runtime.
    pub network: String,
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
    /// Every mount the handoff adds.
    pub mounts: Vec<PlannedMount>,
    /// Names of the host variables passed to the agent (never values): its `env` allow-list.
    pub env: Vec<String>,
    /// The host variables the configuration sends into the container (`${localEnv:NAME}`,
    /// `runArgs -e NAME`), by name (never values), with the properties they go into; each is
    /// also a `hostEnv` permission request (spec-note 0440). Empty for the host runtime.
    pub host_env: Vec<crate::security::host_env::HostEnvUse>,
    /// Names of the secrets passed to hooks and the agent (never values).
    pub secrets: Vec<String>,
    /// The container.
    pub container: PlannedContainer,
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
                    Permission::Mount(path) if perm.source == Source::CommandLine => self
                        .mounts
                        .iter()
                        .find(|m| &m.source == path)
                        .and_then(|m| match m.purpose.as_str() {
                            "git" | "gitProtected" => {
                                Some("git directory of a workspace repository")
                            }
                            "agentCredential" => Some("the agent's credential file"),
                            _ => None,
                        }),
                    _ => None,
                };
                match purpose {
                    Some(purpose) => format!(
                        "{} ({purpose}; devcell mounts it for the handoff)",
                        perm.permission
                    ),
                    None => perm.to_string(),
                }
            })
            .collect()
    }
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
    pub role: workspace::RepoRole,
    /// Branch, `null` when detached.
    pub branch: Option<String>,
    /// HEAD commit.
    pub head: Option<String>,
}

/// What `AGENTS.md` generation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsMdReport {
    /// `created`, `exists` (left untouched) or `singleRepository` (not generated).
    pub outcome: String,
    /// The host path, when there is a file.
    pub path: Option<PathBuf>,
}

/// The result of a handoff whose agent ran (whatever its exit status).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffResult {
    /// The plan that was carried out.
    pub plan: HandoffPlan,
    /// The session as recorded at its end.
    pub session: Session,
    /// Sessions closed as abandoned when this one started.
    pub abandoned_sessions: Vec<String>,
    /// The session replaced (`--replace`).
    pub replaced_session: Option<String>,
    /// The container (`null` for the host runtime).
    pub container_id: Option<String>,
    /// Created, started or reused (`null` for the host runtime).
    pub container_action: Option<ContainerAction>,
    /// The user the agent ran as (the remote user; on the host, a uid).
    pub remote_user: String,
    /// Where the agent ran: `container` or `host`.
    pub runtime: AgentRuntime,
    /// What isolated it: `container`, or `none` on the host.
    pub isolation: String,
    /// Every permission request and what was done with it (new containers).
    pub permissions: Vec<crate::security::PermissionRequest>,
    /// The lifecycle hooks.
    pub lifecycle: LifecycleReport,
    /// The context file on the host.
    pub context_file: PathBuf,
    /// `AGENTS.md`.
    pub agents_md: AgentsMdReport,
    /// The network mode the container really has (`none` or `default`): a reused container
    /// keeps the one it was created with, whatever was asked (a warning says so).
    pub network: String,
    /// The agent's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when it was killed (exit status 128 + n).
    pub signal: Option<i32>,
    /// Non-fatal findings; for the host runtime the first is [`unisolated_warning`].
    pub warnings: Vec<String>,
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

impl HandoffResult {
    /// The warnings as envelope `(code, message)` pairs: [`UNISOLATED_CODE`] for the host
    /// runtime's first, `up`'s specific codes (`workspace_not_writable`,
    /// `workspace_owner_mismatch`; [`crate::handoff::up::warning_code`]), `handoff` for the
    /// others.
    pub fn coded_warnings(&self) -> Vec<(String, String)> {
        self.warnings
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let code = if i == 0 && self.runtime == AgentRuntime::Host {
                    UNISOLATED_CODE
                } else {
                    crate::handoff::up::warning_code(w).unwrap_or("handoff")
                };
                (code.to_string(), w.clone())
            })
            .collect()
    }

    /// Whether the agent succeeded (exit code 0).
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// devcell's exit code: the agent's (128 + n for signal n).
    pub fn process_exit_code(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c.clamp(0, 255),
            (None, Some(s)) => (128 + s).clamp(0, 255),
            _ => 1,
        }
    }
}

/// Where the agent's streams go (the log file gets a masked copy of stdout and stderr).
pub struct AgentStreams<'a> {
    /// Fed to the agent's stdin until end of file (`None`: no stdin).
    pub stdin: Option<Box<dyn AsyncRead + Send + Unpin>>,
    /// Receives the agent's stdout (everything, with a TTY).
    pub stdout: Box<dyn AsyncWrite + Send + Unpin + 'a>,
    /// Receives the agent's stderr.
    pub stderr: Box<dyn AsyncWrite + Send + Unpin + 'a>,
}

/// Completes when the caller wants the agent stopped (SIGTERM/SIGINT to devcell, or `--replace`
/// by another devcell).
pub type StopSignal<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Everything resolved before anything is created.
pub(super) struct Prepared {
    pub(super) plan: HandoffPlan,
    /// The workspace's untrusted git directories as requests, judged (spec-note 0411).
    git_requests: Vec<crate::security::PermissionRequest>,
    pub(super) workspace: Workspace,
    pub(super) agent: AgentSettings,
    target: TargetOptions,
    extra_mounts: Vec<String>,
    pub(super) secrets: IndexMap<String, String>,
    pub(super) agent_env: IndexMap<String, String>,
    network: String,
    profile: String,
    pub(super) cwd: String,
    pub(super) warnings: Vec<String>,
}

/// The plan only (`handoff --plan`): nothing is created, started, pulled, built or written.
/// The engine, when reachable, is asked whether the container exists and for the image's
/// metadata; the permission requests are judged as the handoff judges them
/// ([`super::up::preview_permissions`], spec-note 0320).
///
/// Errors: [`HandoffError::UnknownAgent`], [`HandoffError::AgentConfig`],
/// [`HandoffError::Workspace`], [`HandoffError::NoConfiguration`], [`HandoffError::Config`];
/// [`HandoffError::Security`] (`permission_required`) when the configuration asks for
/// something not granted, exactly as the handoff would refuse it.
pub async fn plan(opts: &HandoffOptions) -> Result<HandoffPlan> {
    let runtime = opts.runtime.unwrap_or_default();
    let engine = match runtime {
        AgentRuntime::Container => DockerEngine::connect().await.ok(),
        AgentRuntime::Host => None,
    };
    let dyn_engine = engine.as_ref().map(|e| e as &dyn Engine);
    let prepared = prepare(opts, dyn_engine, runtime).await?;
    if runtime == AgentRuntime::Host || prepared.plan.config_file.is_none() {
        return Ok(prepared.plan);
    }
    let socket = engine
        .as_ref()
        .and_then(|e| e.socket_path().map(PathBuf::from));
    let up_opts = up_options(&prepared, opts);
    let mut preview =
        super::up::preview_permissions(dyn_engine, socket.as_deref(), &up_opts).await?;
    if !prepared.git_requests.is_empty() {
        let (profile, _) = super::up::security_choice(&up_opts.security, &opts.settings)?;
        // one refusal for all, as the handoff refuses (spec-note 0400)
        preview.refusal = crate::security::refusal_of_all(
            &profile,
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
    plan.permissions = listed_once(&plan, preview.requests);
    plan.permission_notes = preview.notes;
    plan.host_env = preview.host_env;
    Ok(plan)
}

/// `requests` without the mounts `plan` lists under `mounts` already (its git directories,
/// the agent's credentials: [`crate::security::host_path::without_listed_mounts`]).
fn listed_once(
    plan: &HandoffPlan,
    requests: Vec<crate::security::PermissionRequest>,
) -> Vec<crate::security::PermissionRequest> {
    let listed: Vec<&Path> = plan.mounts.iter().map(|m| Path::new(&m.source)).collect();
    crate::security::host_path::without_listed_mounts(requests, &listed)
}

/// The `up` a container handoff runs: the hardened profile, the handoff's mounts, network,
/// secrets and `safe.directory` entries; the lockfile honoured, never written.
fn up_options(p: &Prepared, opts: &HandoffOptions) -> UpOptions {
    UpOptions {
        target: p.target.clone(),
        secrets: p.secrets.clone(),
        mounts: p.extra_mounts.clone(),
        security: SecurityOptions {
            profile: Some(p.profile.clone()),
            network: Some(p.network.clone()),
            ..opts.security.clone()
        },
        settings: opts.settings.clone(),
        lockfile: match opts.lockfile {
            LockfileMode::Write => LockfileMode::ReadOnly,
            other => other,
        },
        safe_directories: safe_directories(&p.workspace),
        ..UpOptions::default()
    }
}

/// Runs a handoff against the engine at `DOCKER_HOST` (see the module docs), or on the host
/// with `runtime: Some(Host)` ([`super::host::handoff_on_host`]). Returns when the agent has
/// ended; its exit status is in the result.
///
/// Errors: as [`handoff_with`]; [`HandoffError::Engine`] (`engine_unavailable`) when no engine
/// answers for the container runtime (there is no silent fallback to the host).
pub async fn handoff(
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> Result<HandoffResult> {
    if opts.runtime == Some(AgentRuntime::Host) {
        // the engine, when there is one, only tells which recorded containers still run
        let engine = DockerEngine::connect().await.ok();
        return super::host::handoff_on_host(
            engine.as_ref().map(|e| e as &dyn Engine),
            opts,
            streams,
            stop,
            reporter,
        )
        .await;
    }
    let engine = DockerEngine::connect().await?;
    let socket = engine.socket_path().map(PathBuf::from);
    handoff_with(&engine, socket.as_deref(), opts, streams, stop, reporter).await
}

/// [`handoff`] through `engine` (`engine_socket`: its host socket, never mountable).
///
/// Errors: the plan's errors; [`HandoffError::State`] with `SessionActive` when a session is
/// live (nothing was changed); `up`'s errors (the session is recorded as failed; the workspace
/// is untouched and the container, if any, left for inspection); [`HandoffError::Context`].
pub async fn handoff_with(
    engine: &dyn Engine,
    engine_socket: Option<&Path>,
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> Result<HandoffResult> {
    let p = prepare(opts, Some(engine), AgentRuntime::Container).await?;
    // What would reach the host (untrusted git directories, host commands) is judged before
    // a session, a container or an image exists (spec-notes 0410, 0411).
    {
        let up_opts = up_options(&p, opts);
        let (profile, grants) = super::up::security_choice(&up_opts.security, &opts.settings)?;
        let loaded = super::up::load_for(&p.target, super::up::confine_grants(&profile, &grants))?;
        super::up::judge_configuration(
            engine,
            engine_socket,
            &up_opts,
            &loaded,
            &profile,
            &grants,
            &p.git_requests,
        )
        .await?;
    }
    for line in plan_lines(&p.plan) {
        reporter.report(Event::Status(line));
    }
    let store = match &opts.state_root {
        Some(root) => StateStore::new(root),
        None => StateStore::open_default()?,
    };
    let root = p.workspace.root.clone();

    // Which recorded containers still run (the state module asks synchronously).
    let running = running_containers(engine, &store, &root).await;
    let probe = move |id: &str| running.contains(id);
    let start = store.begin_session(&root, &opts.agent, None, opts.replace, &probe)?;
    let session_id = start.session.id.clone();
    close_previous_sessions(Some(engine), &start, reporter).await;
    let mut log = store.create_log(&session_id)?;
    let fail = |e: HandoffError| record_failure(&store, &root, &session_id, &p.secrets, e);

    // up, with the hardened profile and the handoff's mounts.
    let verb = match p.plan.container.action.as_str() {
        "reuse" => "reusing the running",
        "start" => "starting the stopped",
        _ => "creating the",
    };
    reporter.report(Event::Status(format!(
        "{verb} workspace container ({} profile, network {})",
        p.profile, p.network
    )));
    let up_opts = up_options(&p, opts);
    let up = up_with(engine, engine_socket, &up_opts, reporter)
        .await
        .map_err(&fail)?;
    let info = engine
        .inspect_container(&up.container_id)
        .await
        .ok()
        .flatten();
    let image = info.as_ref().map(|c| c.image.clone()).unwrap_or_default();
    // A reused container keeps the network it was created with: report the real one.
    let network = match info.as_ref().map(|c| c.host.network_mode.as_str()) {
        Some("none") => "none".to_string(),
        Some(_) => "default".to_string(),
        None => p.network.clone(),
    };
    let mut warnings = p.warnings.clone();
    if network != p.network {
        let message = format!(
            "the existing container {} uses network `{network}`, not the requested `{}`; run `devcell delete` and hand off again to change it",
            &up.container_id[..up.container_id.len().min(12)],
            p.network
        );
        reporter.report(Event::Status(format!("warning: {message}")));
        warnings.push(message);
    }
    store
        .set_container(&root, Some(&session_id), &up.container_id, Some(&image))
        .map_err(|e| fail(e.into()))?;
    let _ = writeln!(
        log,
        "# devcell handoff session {session_id}: agent `{}` in container {}",
        opts.agent, up.container_id
    );

    // The context file, then AGENTS.md.
    let digest = engine
        .inspect_image(&image)
        .await
        .ok()
        .flatten()
        .and_then(|i| i.repo_digests.first().cloned())
        .and_then(|d| d.split_once('@').map(|(_, d)| d.to_string()));
    let mut inputs =
        ContextInputs::from_settings(&opts.settings, &opts.agent, &opts.verify).unwrap_or_default();
    inputs.task = Task::new(opts.task_url.clone(), opts.task_title.clone());
    if let Some(provider) = &opts.task_provider {
        inputs.task.provider = Some(provider.clone());
    }
    inputs.security.profile = up.profile.clone();
    inputs.security.network = network.clone();
    inputs.security.permissions = p.plan.grants.clone();
    inputs.secrets = p.plan.secrets.clone();
    inputs.env = p.plan.env.clone();
    // The digests the container's Features were installed at (its label, written by `up` from
    // the resolution, which the lockfile pins), else the digest pinned in the reference.
    let installed = info
        .as_ref()
        .and_then(|c| crate::security::audit::feature_digests(&c.labels))
        .unwrap_or_default();
    inputs.image = ImageInfo {
        reference: image.clone(),
        digest,
        features: p
            .plan
            .features
            .iter()
            .map(|id| FeatureInfo {
                id: id.clone(),
                digest: crate::features::FeatureRef::parse(id)
                    .ok()
                    .and_then(|r| installed.get(&r.lock_key()).cloned())
                    .or_else(|| id.split_once('@').map(|(_, d)| d.to_string())),
            })
            .collect(),
    };
    inputs.hooks = context::hooks_from_report(&up.lifecycle);
    let ctx = HandoffContext::new(&p.workspace, inputs);
    let context_file =
        context::write(&root, &ctx_rel_path(&opts.settings), &ctx).map_err(|e| fail(e.into()))?;
    let agents_md =
        agents_md_report(agents_md::write_if_absent(&root, &ctx).map_err(|e| fail(e.into()))?);

    // The agent.
    // the configuration `up` loaded and judged: a file swapped since is never read
    let loaded = &up.loaded;
    let labels = id_labels(&p.target, loaded);
    let expected = super::up::expected_workspace(&p.target, loaded);
    let attached = attach_running(
        engine,
        loaded,
        &labels,
        expected.as_deref(),
        &opts.env,
        UserEnvProbe::default(),
    )
    .await
    .map_err(&fail)?;
    let executor = EngineExecutor {
        engine,
        container_id: &attached.container.id,
    };
    let probed = probe_user_env(
        &executor,
        attached.probe,
        Some(&attached.remote_user),
        DEFAULT_PROBE_TIMEOUT,
        reporter,
    )
    .await
    .map_err(|source| {
        fail(HandoffError::Lifecycle {
            container_id: attached.container.id.clone(),
            source,
        })
    })?;
    let mut env = remote_env(probed, &IndexMap::new(), &attached.merged).0;
    env.extend(p.agent_env.clone());
    env.extend(p.secrets.clone());
    append_safe_directories(&mut env, &safe_directories(&p.workspace));
    let pidfile = pidfile_of(&session_id);
    let mut argv = vec![
        "sh".to_string(),
        "-c".to_string(),
        "echo $$ > \"$0\" 2>/dev/null; exec \"$@\"".to_string(),
        pidfile.clone(),
    ];
    argv.extend(p.agent.command.iter().cloned());
    let request = ExecRequest {
        argv,
        user: Some(attached.remote_user.clone()),
        env,
        working_dir: Some(p.cwd.clone()),
        tty: opts.tty,
    };
    reporter.report(Event::Status(format!(
        "launching agent `{}` as `{}` in {} (log {})",
        opts.agent,
        attached.remote_user,
        p.cwd,
        start.session.log.display()
    )));
    let log = Arc::new(Mutex::new(log));
    let mask = SecretMask::new(p.secrets.values());
    let (out_w, out_r) = tokio::io::duplex(64 * 1024);
    let (err_w, err_r) = tokio::io::duplex(64 * 1024);
    let input = match streams.stdin {
        Some(reader) => ExecInput::Stream(reader),
        None => ExecInput::None,
    };
    let container_id = attached.container.id.clone();
    let output = ExecOutput::Write {
        stdout: Box::new(out_w),
        stderr: Box::new(err_w),
    };
    let exec = match opts.tty_size.clone() {
        Some(sizes) => engine.exec_resizable(&container_id, &request, input, output, sizes),
        None => engine.exec(&container_id, &request, input, output),
    };
    let run = async {
        let (r, _, _) = tokio::join!(
            exec,
            pump(out_r, streams.stdout, &log, &mask, opts.tty),
            pump(err_r, streams.stderr, &log, &mask, opts.tty)
        );
        r
    };
    tokio::pin!(run);
    let mut stop = stop;
    let mut stopped = false;
    let exec_result = tokio::select! {
        r = &mut run => r,
        () = &mut stop => {
            stopped = true;
            reporter.report(Event::Status(format!("stopping agent `{}`", opts.agent)));
            stop_agent(engine, &container_id, Some(&attached.remote_user), &pidfile).await;
            match tokio::time::timeout(Duration::from_secs(15), &mut run).await {
                Ok(r) => r,
                Err(_) => Ok(crate::engine::ExecResult { exit_code: 128 + 15, ..Default::default() }),
            }
        }
    };
    let exec_result = exec_result.map_err(|e| fail(e.into()))?;
    let code = i32::try_from(exec_result.exit_code).unwrap_or(i32::MAX);
    let (exit_code, signal) = split_status(code, stopped);
    let outcome = match (exit_code, signal) {
        (_, Some(signal)) => SessionOutcome::Signaled { signal },
        (Some(exit_code), None) => SessionOutcome::Exited { exit_code },
        (None, None) => SessionOutcome::Exited { exit_code: code },
    };
    if let Ok(mut l) = log.lock() {
        let _ = writeln!(l, "# devcell: agent ended: {outcome:?}");
    }
    let session = store.end_session(&root, &session_id, outcome)?;
    let mut plan = p.plan;
    let permissions: Vec<_> = p
        .git_requests
        .iter()
        .cloned()
        .chain(up.permissions.iter().cloned())
        .collect();
    plan.permissions = listed_once(&plan, permissions.clone());
    plan.host_env = up.host_env.clone();
    Ok(HandoffResult {
        plan,
        session,
        abandoned_sessions: start.abandoned.iter().map(|s| s.id.clone()).collect(),
        replaced_session: start.replaced.as_ref().map(|s| s.id.clone()),
        container_id: Some(up.container_id),
        container_action: Some(up.action),
        remote_user: attached.remote_user,
        runtime: AgentRuntime::Container,
        isolation: AgentRuntime::Container.isolation().to_string(),
        permissions,
        lifecycle: up.lifecycle,
        context_file,
        agents_md,
        exit_code,
        signal,
        network,
        warnings: warnings
            .into_iter()
            .chain(up.warnings.iter().map(ToString::to_string))
            .collect(),
    })
}

/// Deals with the sessions [`StateStore::begin_session`] closed: an abandoned session's devcell
/// died, but its agent may still run in its container (stopped through its pid file when
/// `engine` answers; an agent left on the host by a dead devcell cannot be found); a replaced
/// session's devcell is asked to stop its agent and record its end (waited for briefly).
pub(super) async fn close_previous_sessions(
    engine: Option<&dyn Engine>,
    start: &crate::handoff::state::SessionStart,
    reporter: &dyn Reporter,
) {
    for old in start.abandoned.iter() {
        reporter.report(Event::Status(format!(
            "closing abandoned handoff session {} (its devcell, pid {}, is gone)",
            old.id, old.pid
        )));
        if let (Some(engine), Some(container)) = (engine, &old.container_id) {
            stop_agent(engine, container, None, &pidfile_of(&old.id)).await;
        }
    }
    if let Some(old) = &start.replaced {
        reporter.report(Event::Status(format!(
            "replacing handoff session {} (devcell pid {})",
            old.id, old.pid
        )));
        // That devcell stops its agent and records the end; wait for it briefly.
        if crate::handoff::state::terminate(old).unwrap_or(false) {
            for _ in 0..100 {
                if !crate::handoff::state::process_alive(old.pid, old.pid_start)
                    || is_zombie(old.pid)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Records `e` as the end of session `session_id` (`failed`, with its code and its message,
/// secret values masked) and returns it.
pub(super) fn record_failure(
    store: &StateStore,
    root: &Path,
    session_id: &str,
    secrets: &IndexMap<String, String>,
    e: HandoffError,
) -> HandoffError {
    let _ = store.end_session(
        root,
        session_id,
        SessionOutcome::Failed {
            code: e.code().as_str().to_string(),
            message: crate::handoff::secrets::mask(&e.to_string(), secrets),
        },
    );
    e
}

/// The report of [`agents_md::write_if_absent`].
pub(super) fn agents_md_report(outcome: AgentsMdOutcome) -> AgentsMdReport {
    match outcome {
        AgentsMdOutcome::Created(path) => AgentsMdReport {
            outcome: "created".into(),
            path: Some(path),
        },
        AgentsMdOutcome::Exists(path) => AgentsMdReport {
            outcome: "exists".into(),
            path: Some(path),
        },
        AgentsMdOutcome::SingleRepository => AgentsMdReport {
            outcome: "singleRepository".into(),
            path: None,
        },
    }
}

/// The plan in a few status lines (shown before anything is created).
pub(super) fn plan_lines(p: &HandoffPlan) -> Vec<String> {
    let mut out = vec![
        format!(
            "plan: agent `{}` {:?} in {} as the workspace `{}` ({} repositories)",
            p.agent,
            p.command,
            p.cwd,
            p.workspace.display(),
            p.repos.len()
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

/// Splits an exec status into an exit code or a signal: a status in 129..=192 is taken as
/// signal `status - 128` (what a shell and the engine report for a killed process; an agent
/// that exits with such a code on purpose is indistinguishable), and so is any status after a
/// stop request above 128.
pub fn split_status(status: i32, stopped: bool) -> (Option<i32>, Option<i32>) {
    if (129..=192).contains(&status) || (stopped && status > 128) {
        (None, Some(status - 128))
    } else {
        (Some(status), None)
    }
}

/// Whether process `pid` has exited but is not yet reaped (Linux `/proc/<pid>/stat` state `Z`).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next().map(|st| st == "Z"))
        })
        .unwrap_or(false)
}

pub(super) fn ctx_rel_path(settings: &Settings) -> String {
    settings.handoff.context_path.clone()
}

/// Ids of the containers recorded for the workspace's sessions that are running now.
pub(super) async fn running_containers(
    engine: &dyn Engine,
    store: &StateStore,
    root: &Path,
) -> HashSet<String> {
    let mut out = HashSet::new();
    let Ok(Some(state)) = store.load(root) else {
        return out;
    };
    for id in state
        .sessions
        .iter()
        .filter(|s| s.outcome.is_none())
        .filter_map(|s| s.container_id.clone())
    {
        if let Ok(Some(info)) = engine.inspect_container(&id).await
            && info.running
        {
            out.insert(id);
        }
    }
    out
}

/// The agent's pid file in the container for a session.
fn pidfile_of(session_id: &str) -> String {
    format!("/tmp/.devcell-agent-{session_id}.pid")
}

/// Sends SIGTERM to the agent through its pid file (as `user`, who owns it; `None`: the
/// container's user). Nothing happens when the file or the process is gone.
async fn stop_agent(engine: &dyn Engine, container: &str, user: Option<&str>, pidfile: &str) {
    let request = ExecRequest {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "[ -f \"$0\" ] && kill -TERM \"$(cat \"$0\")\" 2>/dev/null; rm -f \"$0\" 2>/dev/null; true".into(),
            pidfile.into(),
        ],
        user: user.map(str::to_string),
        ..ExecRequest::default()
    };
    let _ = engine
        .exec(container, &request, ExecInput::None, ExecOutput::Collect)
        .await;
}

/// The workspace's untrusted git directories ([`Workspace::untrusted_git_dirs`]) as
/// [`crate::security::Permission::GitDir`] requests, judged by `profile` and `grants`.
fn git_dir_requests(
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

/// The `safe.directory` entries of a handoff: every repository's working tree and every git
/// directory mounted, as the container sees them.
fn safe_directories(ws: &Workspace) -> Vec<String> {
    let mut dirs: Vec<String> = ws.safe_directories();
    dirs.extend(ws.git_mounts.iter().map(|m| m.container_path.clone()));
    dirs
}

/// Copies `reader` to `out` and appends it to the log, secret values masked. Lines are masked
/// whole; with a TTY a partial line is passed on when no more arrives at once (prompts).
pub(super) async fn pump(
    mut reader: impl AsyncRead + Unpin,
    mut out: Box<dyn AsyncWrite + Send + Unpin + '_>,
    log: &Mutex<std::fs::File>,
    mask: &SecretMask,
    tty: bool,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        let cut = if tty {
            pending.len()
        } else {
            pending
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
        };
        if cut == 0 {
            continue;
        }
        let chunk: Vec<u8> = pending.drain(..cut).collect();
        emit(&chunk, &mut out, log, mask).await;
    }
    if !pending.is_empty() {
        emit(&pending, &mut out, log, mask).await;
    }
    let _ = out.flush().await;
}

async fn emit(
    chunk: &[u8],
    out: &mut Box<dyn AsyncWrite + Send + Unpin + '_>,
    log: &Mutex<std::fs::File>,
    mask: &SecretMask,
) {
    let text = mask.apply(&String::from_utf8_lossy(chunk));
    let _ = out.write_all(text.as_bytes()).await;
    let _ = out.flush().await;
    if let Ok(mut f) = log.lock() {
        let _ = f.write_all(text.as_bytes());
    }
}

/// Resolves the agent, the workspace, the configuration, the mounts, the secrets and the plan.
pub(super) async fn prepare(
    opts: &HandoffOptions,
    engine: Option<&dyn Engine>,
    runtime: AgentRuntime,
) -> Result<Prepared> {
    let settings = &opts.settings;
    let host = runtime == AgentRuntime::Host;
    let agent =
        settings
            .agents
            .get(&opts.agent)
            .cloned()
            .ok_or_else(|| HandoffError::UnknownAgent {
                name: opts.agent.clone(),
                config: match (&settings.file, settings.file_exists) {
                    (Some(f), true) => format!("`{}`", f.display()),
                    (Some(f), false) => format!("`{}` (not found)", f.display()),
                    (None, _) => "(no file)".to_string(),
                },
                available: settings.agents.keys().cloned().collect(),
            })?;
    let agent_err = |message: String| HandoffError::AgentConfig {
        agent: opts.agent.clone(),
        message,
    };
    if agent.command.is_empty() || agent.command[0].is_empty() {
        return Err(agent_err("`command` is empty: give the agent's argv, e.g. `command = [\"codex\", \"--full-auto\"]`".into()));
    }
    let mut inspect_options = InspectOptions::from_settings(settings, opts.primary.clone());
    // git directories outside the workspace are read and mounted only when trusted or granted
    // (spec-note 0411)
    let profile_name = opts
        .security
        .profile
        .clone()
        .or_else(|| agent.profile.clone())
        .unwrap_or_else(|| settings.security.profile.clone());
    let allow: Vec<String> = settings
        .security
        .allow
        .iter()
        .chain(opts.security.allow.iter())
        .cloned()
        .collect();
    inspect_options.trusted_git_dirs = workspace::trusted_git_dirs(&profile_name, &allow);
    if host {
        // on the host every path the agent is given is a host path
        let root = std::fs::canonicalize(&opts.workspace_folder)
            .unwrap_or_else(|_| opts.workspace_folder.clone());
        inspect_options.container_root = root.to_string_lossy().into_owned();
        inspect_options.protect_git_config = false;
    }
    let ws = workspace::inspect(&opts.workspace_folder, &inspect_options)?;
    let config_file = match &ws.config_folder {
        Some(folder) => Some(crate::config::discover::discover(folder, None)?),
        // the host runtime needs no dev container configuration
        None if host => None,
        None => {
            return Err(HandoffError::NoConfiguration {
                root: ws.root.clone(),
            });
        }
    };
    let mut warnings: Vec<String> = ws.warnings.iter().map(|w| w.message.clone()).collect();

    // Network: flag, else the agent's, else `none` (default-deny; spec-notes/0202). On the
    // host: the host's own network, whatever was asked.
    let network = opts
        .security
        .network
        .clone()
        .or_else(|| agent.network.clone())
        .unwrap_or_else(|| "none".to_string());
    if !matches!(network.as_str(), "none" | "default") {
        return Err(agent_err(format!(
            "unknown network `{network}`: expected `none` or `default`"
        )));
    }
    let profile = opts
        .security
        .profile
        .clone()
        .or_else(|| agent.profile.clone())
        .unwrap_or_else(|| settings.security.profile.clone());
    // The profile, limits and grants are checked before anything is planned or created (not
    // on the host, where none of them applies).
    let mut confine = None;
    let mut git_requests = Vec::new();
    let limits = if host {
        None
    } else {
        let (chosen, grants) = crate::handoff::up::security_choice(
            &SecurityOptions {
                profile: Some(profile.clone()),
                ..opts.security.clone()
            },
            settings,
        )?;
        // the config file is judged before it is read, as `up` judges it (spec-note 0400)
        confine = crate::handoff::up::confine_grants(&chosen, &grants);
        git_requests = git_dir_requests(&ws, &chosen, &grants);
        match chosen {
            crate::security::SecurityProfile::Hardened(l) => Some(PlannedLimits {
                pids: l.pids,
                memory_bytes: l.memory_bytes,
                cpus: l.nano_cpus as f64 / 1e9,
            }),
            crate::security::SecurityProfile::Reference => None,
        }
    };
    let (network, profile) = if host {
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
        ("host".to_string(), "none".to_string())
    } else {
        (network, profile)
    };

    // Mounts: the root becomes the workspace mount; the rest are extra mounts (none on the
    // host: the agent sees everything its user can).
    let mounts = if host { Vec::new() } else { ws.mounts() };
    let mut planned: Vec<PlannedMount> = Vec::new();
    let mut extra_mounts = Vec::new();
    let mut workspace_mount = String::new();
    for m in &mounts {
        let purpose = match m.purpose {
            MountPurpose::Workspace => "workspace",
            MountPurpose::Git => "git",
            MountPurpose::GitProtected => "gitProtected",
        };
        planned.push(PlannedMount {
            source: m.source.to_string_lossy().into_owned(),
            target: m.target.clone(),
            read_only: m.read_only,
            purpose: purpose.into(),
        });
        if m.purpose == MountPurpose::Workspace {
            workspace_mount = m.to_mount_string();
        } else {
            extra_mounts.push(m.to_mount_string());
        }
    }
    let home = opts.env.get("HOME").cloned();
    for m in agent.mounts.iter().filter(|_| !host) {
        let source = expand_home(&m.source, home.as_deref())
            .ok_or_else(|| agent_err(format!("mount source `{}` needs `HOME`", m.source)))?;
        if !m.target.starts_with('/') {
            return Err(agent_err(format!(
                "mount target `{}` must be an absolute container path",
                m.target
            )));
        }
        if !Path::new(&source).exists() {
            return Err(agent_err(format!("mount source `{source}` does not exist")));
        }
        let wm = workspace::WorkspaceMount {
            source: PathBuf::from(&source),
            target: m.target.clone(),
            read_only: true,
            purpose: MountPurpose::GitProtected,
        };
        extra_mounts.push(wm.to_mount_string());
        planned.push(PlannedMount {
            source,
            target: m.target.clone(),
            read_only: true,
            purpose: "agentCredential".into(),
        });
    }

    // Secrets: the agent's references, then `--secrets-file` (which wins).
    let mut secrets = IndexMap::new();
    for (name, reference) in &agent.secrets {
        let value = if let Some(var) = reference.strip_prefix("env:") {
            opts.env.get(var).cloned().ok_or_else(|| {
                agent_err(format!(
                    "secret `{name}` refers to host variable `{var}`, which is not set"
                ))
            })?
        } else if let Some(path) = reference.strip_prefix("file:") {
            let path = expand_home(path, home.as_deref())
                .ok_or_else(|| agent_err(format!("secret `{name}`: `{path}` needs `HOME`")))?;
            let text = crate::config::bounded::read_to_string(
                Path::new(&path),
                crate::config::jsonc::MAX_FILE_BYTES as u64,
            )
            .map_err(|e| agent_err(format!("secret `{name}`: cannot read `{path}`: {e}")))?;
            text.trim_end_matches(['\n', '\r']).to_string()
        } else {
            return Err(agent_err(format!(
                "secret `{name}`: expected `env:NAME` or `file:PATH`, found a reference of another form"
            )));
        };
        secrets.insert(name.clone(), value);
    }
    secrets.extend(opts.secrets.clone());
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

    let target = TargetOptions {
        workspace_folder: ws.root.clone(),
        config: config_file.clone(),
        mount_workspace_git_root: false,
        id_labels: Vec::new(),
        env: opts.env.clone(),
        workspace_override: Some(WorkspaceOverride {
            mount: workspace_mount,
            folder: ws.container_root.clone(),
        }),
        ..TargetOptions::default()
    };
    let (image, features, container) = match &config_file {
        Some(_) if !host => planned_container(&target, engine, confine).await?,
        _ => (
            String::new(),
            Vec::new(),
            PlannedContainer {
                action: "none".into(),
                id: None,
                labels: BTreeMap::new(),
            },
        ),
    };
    let cwd = match &opts.primary {
        Some(_) => ws
            .primary()
            .map(|r| r.container_path.clone())
            .unwrap_or_else(|| ws.container_root.clone()),
        None => ws.container_root.clone(),
    };
    let mut grants = settings.security.allow.clone();
    grants.extend(opts.security.allow.iter().cloned());
    let inputs =
        ContextInputs::from_settings(settings, &opts.agent, &opts.verify).unwrap_or_default();
    let context_path = workspace::normalize_posix(&format!(
        "{}/{}",
        ws.container_root, settings.handoff.context_path
    ));
    let mut secret_names: Vec<String> = secrets.keys().cloned().collect();
    secret_names.sort();
    let plan = HandoffPlan {
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
        config_file,
        image,
        features,
        profile: profile.clone(),
        network: network.clone(),
        limits,
        grants,
        permissions: Vec::new(),
        permission_notes: Vec::new(),
        mounts: planned,
        env: agent_env.keys().cloned().collect(),
        host_env: Vec::new(),
        secrets: secret_names,
        container,
        command: agent.command.clone(),
        cwd: cwd.clone(),
        context_path,
        verification: inputs.verification,
        runtime,
        isolation: runtime.isolation().to_string(),
        // the workspace's findings keep their codes (`git_unreadable`, …); the rest are the
        // handoff's own
        warnings: ws
            .warnings
            .iter()
            .map(|w| (w.code.clone(), w.message.clone()))
            .chain(
                warnings
                    .iter()
                    .skip(ws.warnings.len())
                    .map(|w| ("handoff".to_string(), w.clone())),
            )
            .collect(),
    };
    Ok(Prepared {
        plan,
        git_requests,
        workspace: ws,
        agent,
        target,
        extra_mounts,
        secrets,
        agent_env,
        network,
        profile,
        cwd,
        warnings,
    })
}

/// The image (reference, or `build <Dockerfile>`), the Features as written and the container
/// (asked of `engine` when there is one) of a container handoff's plan.
async fn planned_container(
    target: &TargetOptions,
    engine: Option<&dyn Engine>,
    confine: Option<crate::security::Grants>,
) -> Result<(String, Vec<String>, PlannedContainer)> {
    let loaded = crate::handoff::up::load_for(target, confine)?;
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
        _ => String::new(),
    };
    let features = loaded
        .value
        .get("features")
        .and_then(|f| f.as_object())
        .map(|f| f.keys().cloned().collect())
        .unwrap_or_default();
    let container = match engine {
        Some(engine) => match find_container(
            engine,
            &labels,
            super::up::expected_workspace(target, &loaded).as_deref(),
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
    Ok((image, features, container))
}

/// `~/x` → `<home>/x`; other paths unchanged; `None` when `~/` is used without a home.
fn expand_home(path: &str, home: Option<&str>) -> Option<String> {
    match path.strip_prefix("~/") {
        Some(rest) => home.map(|h| format!("{}/{rest}", h.trim_end_matches('/'))),
        None if path == "~" => home.map(str::to_string),
        None => Some(path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_above_128_are_signals() {
        assert_eq!(split_status(0, false), (Some(0), None));
        assert_eq!(split_status(3, false), (Some(3), None));
        assert_eq!(split_status(137, false), (None, Some(9)));
        assert_eq!(split_status(143, true), (None, Some(15)));
        assert_eq!(split_status(255, false), (Some(255), None));
    }

    #[test]
    fn home_expansion() {
        assert_eq!(
            expand_home("~/.codex/auth.json", Some("/home/me/")).as_deref(),
            Some("/home/me/.codex/auth.json")
        );
        assert_eq!(expand_home("/etc/x", None).as_deref(), Some("/etc/x"));
        assert_eq!(expand_home("~/x", None), None);
    }

    #[test]
    fn masks_longest_first() {
        let secrets = IndexMap::from([
            ("A".to_string(), "abc".to_string()),
            ("B".to_string(), "abcdef".to_string()),
            ("C".to_string(), String::new()),
        ]);
        assert_eq!(
            SecretMask::new(secrets.values()).apply("x abcdef abc y"),
            "x ******** ******** y"
        );
    }

    #[test]
    fn safe_directories_append_to_existing_git_config_entries() {
        let ws = Workspace {
            name: "w".into(),
            root: "/h/w".into(),
            container_root: "/workspace".into(),
            layout: workspace::Layout::Plain,
            repos: Vec::new(),
            config_folder: None,
            git_mounts: vec![workspace::GitMount {
                host_path: "/h/src/api/.git".into(),
                container_path: "/h/src/api/.git".into(),
                repos: vec!["api".into()],
            }],
            protected: Vec::new(),
            untrusted_git_dirs: Vec::new(),
            warnings: Vec::new(),
        };
        let mut env = IndexMap::from([("GIT_CONFIG_COUNT".to_string(), "1".to_string())]);
        append_safe_directories(&mut env, &safe_directories(&ws));
        assert_eq!(env["GIT_CONFIG_COUNT"], "2");
        assert_eq!(env["GIT_CONFIG_KEY_1"], "safe.directory");
        assert_eq!(env["GIT_CONFIG_VALUE_1"], "/h/src/api/.git");
    }
}
