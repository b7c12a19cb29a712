//! `handoff --container ID` of a running container devcell did not create (issue 29, item 3;
//! spec-note 0524): someone else owns it (agent-runner's `mode: existing`), so devcell
//! inspects, audits and uses it, and never starts, stops or removes it.
//!
//! Steps: the container judged before anything exists or runs ([`judge`]: running, binding
//! the workspace, every `--expect-mount` there, no host git directory the agent could write;
//! [`judge_network`]: the network it has is the one asked for) → the agent, secrets and
//! workspace resolved as for any handoff → a session begun in the state, marked `external` →
//! `set-up`'s judgement and lifecycle hooks ([`crate::ops::set_up`]: under `hardened`
//! privileged mode and engine sockets refused unless granted) with the hooks run in the
//! workspace's folder in the container → the context file and `AGENTS.md` → the agent run as
//! the remote user (numeric under `hardened`) → the workspace scanned for set-id files, the
//! `.git` entries compared → the session ended. The container is left as it was found.
//!
//! What a devcell container has and this one cannot (its mounts were chosen at creation by
//! someone else): container git directories and their fetch-back, the read-only git
//! config/hooks overlays, the agent's credential mounts, a closed network, limits, the
//! quiescing stop after the agent. So a container whose binds let the agent write a host git
//! directory is refused, a network other than the one asked for is refused, and agent
//! credential mounts or dotfiles are refused rather than silently dropped.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indexmap::IndexMap;

use super::launch::{agent_request, signal_result};
use super::{Handoff, Live};
use crate::engine::{ContainerInfo, Engine};
use crate::handoff::agents_md;
use crate::handoff::context::{self, AgentRuntime, ContextInputs, HandoffContext, Task};
use crate::handoff::expect_mount::{self, ExpectedMount};
use crate::handoff::plan::{
    HandoffOptions, PlannedContainer, PlannedMount, Prepared, ctx_rel_path, plan_lines, prepare,
    safe_directories,
};
use crate::handoff::repository::Workspace;
use crate::handoff::session::{
    AgentStreams, HandoffResult, StopSignal, Stopped, agents_md_report, exec_outcome, pidfile_of,
    unless_stopped,
};
use crate::handoff::state::{SessionOutcome, StateStore};
use crate::names::PROFILE_LABEL;
use crate::ops::attach::{Attached, append_safe_directories, probed_remote_env};
use crate::ops::error::{OpsError, Result};
use crate::ops::options::SecurityOptions;
use crate::ops::{SetUpOptions, SetUpResult};
use crate::progress::Event;
use crate::settings::NetworkMode;

/// The `purpose` of the plan's mounts of an external container: the engine's report of what
/// its owner mounted (devcell added none).
pub const EXTERNAL_MOUNT: &str = "external";

/// The plan's container `action` for a container devcell did not create.
pub const EXTERNAL_ACTION: &str = "external";

/// The container `opts.container` names when devcell did not create it (it has no
/// [`PROFILE_LABEL`]): the handoff is then this module's. `None`: no `--container`, no such
/// container (the named-container check says so), or one devcell created (spec-note 0521).
///
/// Errors: the engine's; [`OpsError::NamedContainer`] for `--expect-mount` with a container
/// devcell created (its mounts are devcell's own).
pub(super) async fn foreign(
    engine: &dyn Engine,
    opts: &HandoffOptions,
) -> Result<Option<ContainerInfo>> {
    let Some(named) = opts.container.as_deref() else {
        return Ok(None);
    };
    match engine.inspect_container(named).await? {
        Some(info) if !info.labels.contains_key(PROFILE_LABEL) => Ok(Some(info)),
        Some(_) if !opts.expect_mounts.is_empty() => Err(refused(
            named,
            "`--expect-mount` checks a container devcell did not create; devcell made this one and chose its mounts".into(),
            "drop `--expect-mount`".into(),
        )),
        _ => Ok(None),
    }
}

/// The refusal of the container `named` (it exists).
fn refused(named: &str, reason: String, hint: String) -> OpsError {
    OpsError::NamedContainer {
        container: named.to_string(),
        found: true,
        reason,
        hint,
    }
}

/// The external container judged for a handoff of the workspace `root`: running, binding the
/// workspace (the deepest bind whose source holds `root`), every `expected` mount there, and
/// no bind through which the agent could write a host git directory. Returns where the
/// workspace is in the container.
///
/// Errors: [`OpsError::NamedContainer`] naming the first reason found.
pub fn judge(
    info: &ContainerInfo,
    root: &Path,
    expected: &[ExpectedMount],
) -> std::result::Result<String, OpsError> {
    let named = &info.name;
    if !info.running {
        return Err(refused(
            named,
            "devcell did not create it and it is not running: devcell never starts a container someone else owns".into(),
            format!("start it yourself (`docker start {named}`), or drop `--container`"),
        ));
    }
    let Some(target) = workspace_target(info, root) else {
        return Err(refused(
            named,
            format!(
                "devcell did not create it, and it does not mount the workspace `{}`: the agent would not see it",
                root.display()
            ),
            format!(
                "name a container that binds the workspace (`-v {}:/workspace`), or drop `--container` to let devcell make one",
                root.display()
            ),
        ));
    };
    expect_mount::check(info, expected)?;
    if let Some(git) = crate::ops::environment::export::writable_host_git_dir(&info.mounts) {
        return Err(refused(
            named,
            format!(
                "its agent could write the host's git directory {} (a hook or `core.fsmonitor` written there runs on this host at your next git command), and devcell cannot give a container it did not create its own git directories",
                git.display()
            ),
            "bind that git directory read-only (or not at all) in the container, or drop `--container` to let devcell make the workspace's container".into(),
        ));
    }
    Ok(target)
}

/// Under `hardened`, an agent that would run as root in the container someone else owns is
/// refused unless `root` is granted (attack M6): with the engine's default capabilities it
/// could leave root-owned set-id files and device nodes in the user's workspace, and the
/// container, never stopped by devcell, keeps whatever it started running after the end's
/// scan. `permissions` are `set-up`'s judgement of the container (its `root` request
/// refused when the remote user is uid 0 and nothing granted it).
///
/// Errors: [`OpsError::NamedContainer`].
fn refuse_root_agent(
    named: &str,
    profile: &str,
    permissions: &[crate::security::PermissionRequest],
) -> std::result::Result<(), OpsError> {
    use crate::security::{Permission, RequestStatus};
    let root_refused = permissions
        .iter()
        .any(|r| r.permission == Permission::Root && r.status != RequestStatus::Granted);
    if profile != crate::settings::Profile::Hardened.to_string() || !root_refused {
        return Ok(());
    }
    Err(refused(
        named,
        "the agent would run as root in it, with the container's capabilities: it could leave root-owned set-id files and device nodes in your workspace, and devcell never stops a container it did not create, so what the agent starts outlives the end's scan".into(),
        "run the container as a non-root user (`docker run -u 1000:1000 …`), or name a non-root `remoteUser` in its configuration; or, if you trust the agent with root there, grant `--allow root`".into(),
    ))
}

/// Where `root` is in the container: below the deepest bind whose (canonical) source holds it.
fn workspace_target(info: &ContainerInfo, root: &Path) -> Option<String> {
    info.mounts
        .iter()
        .filter(|m| m.kind == "bind")
        .filter_map(|m| {
            let source = Path::new(&m.source);
            let source = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
            let rel = root.strip_prefix(&source).ok()?;
            let depth = source.components().count();
            let at = m.destination.trim_end_matches('/');
            let target = if rel.as_os_str().is_empty() {
                at.to_string()
            } else {
                format!("{at}/{}", rel.to_string_lossy())
            };
            Some((
                depth,
                if target.is_empty() {
                    "/".into()
                } else {
                    target
                },
            ))
        })
        .max_by_key(|(depth, _)| *depth)
        .map(|(_, target)| target)
}

/// The network the handoff goes on with: the container's own (devcell cannot change it). A
/// container with a network is refused unless `chosen` is `default` (the handoff's default is
/// `none`, and `allowlist` needs devcell's proxy, which only a container it creates gets).
///
/// Errors: [`OpsError::NamedContainer`] naming both networks.
pub fn judge_network(
    info: &ContainerInfo,
    chosen: NetworkMode,
) -> std::result::Result<String, OpsError> {
    let has = match info.host.network_mode.as_str() {
        "" => "default",
        other => other,
    };
    if has == "none" || chosen == NetworkMode::Default {
        return Ok(has.to_string());
    }
    Err(refused(
        &info.name,
        format!(
            "the handoff's network is `{chosen}`, but the container has network `{has}`, and devcell cannot change the network of a container it did not create"
        ),
        "pass `--network default` to hand it off with its network, or start it with `--network none`".into(),
    ))
}

/// The `purpose` of the plan's volume mounts of an external container: a volume its owner
/// mounted that is no bind of a host folder (its `source` names it), or one devcell cannot
/// resolve (`source` says why; attack M5).
pub const EXTERNAL_VOLUME_MOUNT: &str = "externalVolume";

/// The plan's mounts of an external container, from its mounts as the host sees them
/// ([`crate::security::volumes::mounts_as_host_sees`]: a bind-backed volume is the bind it
/// is): binds as [`EXTERNAL_MOUNT`], volumes as [`EXTERNAL_VOLUME_MOUNT`]; tmpfs and the
/// like hold nothing of the host and are left out.
fn planned_mounts(seen: &[crate::engine::MountInfo]) -> Vec<PlannedMount> {
    seen.iter()
        .filter_map(|m| {
            let (source, purpose) = match m.kind.as_str() {
                "bind" => (m.source.clone(), EXTERNAL_MOUNT),
                "volume" => (
                    m.name.clone().unwrap_or_else(|| m.source.clone()),
                    EXTERNAL_VOLUME_MOUNT,
                ),
                crate::security::volumes::UNRESOLVED_VOLUME => {
                    (m.source.clone(), EXTERNAL_VOLUME_MOUNT)
                }
                _ => return None,
            };
            Some(PlannedMount {
                source,
                target: m.destination.clone(),
                read_only: !m.rw,
                purpose: purpose.into(),
            })
        })
        .collect()
}

/// What an external handoff does with git, for its plan: the container's binds are its
/// owner's, so the agent works on the host's files and sees the host's `.git` only read-only
/// (rule 4 of spec-note 0524 refused anything else).
const EXTERNAL_GIT: &str = "no container git directories and no fetch-back: the agent works on the workspace's files through the container's own binds, and the host's `.git` is bound read-only or not at all (a writable one is refused); the `.git` entries are compared when the agent ends";

/// What an external handoff does with the container and never does, for its plan.
const EXTERNAL_LIFECYCLE: &str = "devcell runs the hooks `set-up` runs and the agent in it with exec; it never starts, stops or removes it, and `devcell delete` only forgets it";

/// `handoff --plan --container ID` of a container devcell did not create (spec-note 0526):
/// the plan the handoff would carry out there (the container judged as the handoff judges
/// it, its mounts as the host sees them, `set-up`'s judgement and the agent's user; a root
/// agent under `hardened` refused as the handoff refuses it), with nothing begun: no session,
/// no hook, no exec, no context file. `None` when `opts.container` names no container devcell
/// did not create (the usual plan applies).
///
/// Errors: as the handoff's before its session ([`OpsError::NamedContainer`], the plan's,
/// `set-up`'s judgement: [`OpsError::Security`]).
pub(in crate::handoff) async fn plan(
    engine: &dyn Engine,
    opts: &HandoffOptions,
) -> Result<Option<crate::handoff::plan::HandoffPlan>> {
    let Some(info) = foreign(engine, opts).await? else {
        return Ok(None);
    };
    let h = Handoff {
        engine,
        opts,
        reporter: &crate::progress::NoopReporter,
        group: None,
    };
    let mut stop: StopSignal<'_> = Box::pin(futures_util::stream::pending());
    let (p, target, _) = h.prepare_external(&info, &mut stop).await?;
    let judged =
        crate::ops::set_up::judge_running(engine, &h.set_up_options(&info, &target), info.clone())
            .await?;
    let profile = judged.profile.name();
    refuse_root_agent(&info.name, profile, &judged.permissions)?;
    let mut plan = p.plan;
    plan.profile = profile.to_string();
    plan.permissions = judged.permissions.clone();
    plan.warnings.extend(
        judged
            .warnings
            .iter()
            .map(|w| ("handoff".to_string(), w.to_string())),
    );
    plan.external = Some(crate::handoff::plan::PlannedExternal {
        name: info.name.clone(),
        root: judged
            .permissions
            .iter()
            .any(|r| r.permission == crate::security::Permission::Root),
        remote_user: judged.remote_user,
        exec_user: judged.exec_user,
        git: EXTERNAL_GIT.into(),
        lifecycle: EXTERNAL_LIFECYCLE.into(),
    });
    Ok(Some(plan))
}

/// The workspace as the container sees it: its root and repositories at `target`.
fn in_container(mut ws: Workspace, target: &str) -> Workspace {
    let root = ws.root.clone();
    ws.container_root = target.to_string();
    for r in &mut ws.repos {
        if let Ok(rel) = r.host_path.strip_prefix(&root) {
            r.container_path = if rel.as_os_str().is_empty() {
                target.to_string()
            } else {
                format!("{}/{}", target.trim_end_matches('/'), rel.to_string_lossy())
            };
        }
    }
    ws
}

/// What an external handoff refuses in its options before anything runs: `--environment`
/// (spec-note 0527: devcell cannot recreate a container it did not make), the dotfiles and
/// the agent's credential mounts (both need a mount only creation can add).
fn refuse_options(opts: &HandoffOptions, p: &Prepared, named: &str) -> Result<()> {
    if let Some((path, _)) = &opts.environment.recorded {
        return Err(refused(
            named,
            format!(
                "`--environment {}` recreates an environment devcell makes, and devcell did not make this container (its owner chose its image, mounts and user)",
                path.display()
            ),
            "drop `--environment` (`--environment-out` records this handoff's environment), or drop `--container`".into(),
        ));
    }
    if opts.dotfiles.is_some() {
        return Err(refused(
            named,
            "dotfiles are bound or cloned by a container devcell creates; this one is someone else's".into(),
            "drop the `--dotfiles-*` flags, or install them in the container yourself".into(),
        ));
    }
    if let Some(m) = p
        .plan
        .mounts
        .iter()
        .find(|m| m.purpose == "agentCredential")
    {
        return Err(refused(
            named,
            format!(
                "the agent's credential `{}` is a mount, and devcell cannot add a mount to a running container it did not create",
                m.source
            ),
            "hand off an agent without `mounts`, or give the container that file yourself".into(),
        ));
    }
    Ok(())
}

impl Handoff<'_> {
    /// The handoff of `opts` in the external container `info` (see the module docs). Returns
    /// when the agent has ended; the container still runs, unchanged by devcell.
    ///
    /// Errors: [`OpsError::NamedContainer`] (refused before a session); the plan's;
    /// `set-up`'s ([`OpsError::Security`] `SetUpRefused`, a hook's failure: the session is
    /// recorded as failed); the state's.
    pub(super) async fn external(
        &self,
        info: ContainerInfo,
        streams: AgentStreams<'_>,
        mut stop: StopSignal<'_>,
    ) -> Result<HandoffResult> {
        let opts = self.opts;
        let (p, target, network) = self.prepare_external(&info, &mut stop).await?;
        for line in plan_lines(&p.plan) {
            self.reporter.report(Event::Status(line));
        }
        let (mut live, mut log) = self.begin_external(&p, &info).await?;
        // a root agent is refused inside `set-up`, before anything runs in the container
        // (attack N6); whatever ran before a refusal or failure is scanned for all the same
        let (set_up, attached) =
            match unless_stopped(&mut stop, self.set_up_external(&info, &target)).await {
                Ok(Ok(done)) => done,
                Ok(Err(e)) => {
                    self.scan_after_failure(&mut live, &p);
                    return Err(live.fail(e));
                }
                Err(signal) => {
                    self.scan_after_failure(&mut live, &p);
                    return Err(live.signaled(signal));
                }
            };
        live.warnings
            .extend(set_up.warnings.iter().map(ToString::to_string));
        self.record_environment(&info, &p, &set_up, &attached, &network, &live)
            .await;
        let _ = writeln!(
            log,
            "# devcell handoff session {}: agent `{}` in external container {} (devcell never stops or removes it)",
            live.id, opts.agent, info.id
        );
        let (context_file, agents_md) =
            self.write_external_context(&p, &set_up, &network, &live)?;
        let (exit_code, signal, outcome) = self
            .run_external_agent(&p, &attached, &live, log, streams, &mut stop)
            .await?;
        let planted = self.scan_external(&mut live, &p);
        let git_dirs = self.check_git_identity(&mut live);
        let session = live.store.end_session(&live.root, &live.id, outcome)?;
        let mut plan = p.plan;
        plan.permissions = set_up.permissions.clone();
        plan.profile = set_up.profile.clone();
        Ok(HandoffResult {
            plan,
            session,
            abandoned_sessions: live.start.abandoned.iter().map(|s| s.id.clone()).collect(),
            replaced_session: live.start.replaced.as_ref().map(|s| s.id.clone()),
            container_id: Some(info.id.clone()),
            container_action: Some(crate::ops::ContainerAction::Running),
            remote_user: set_up.remote_user.clone(),
            runtime: AgentRuntime::Container,
            isolation: AgentRuntime::Container.isolation().to_string(),
            permissions: set_up.permissions,
            lifecycle: set_up.lifecycle,
            context_file,
            agents_md,
            network,
            exit_code,
            signal,
            warnings: live.warnings,
            shown_warnings: Vec::new(),
            task: None,
            tasks: Vec::new(),
            set_id_files_and_devices: planted,
            git_dir_changes: git_dirs,
        })
    }

    /// Everything resolved and judged before a session: the agent, secrets and workspace
    /// (as the host runtime resolves them: no configuration is read, the container is made
    /// already), the container judged ([`judge`], [`judge_network`]), and the plan as it is
    /// carried out. Returns it, the workspace's folder in the container and the network.
    async fn prepare_external(
        &self,
        info: &ContainerInfo,
        stop: &mut StopSignal<'_>,
    ) -> Result<(Prepared, String, String)> {
        let opts = self.opts;
        let stopped = |signal| -> OpsError {
            Stopped {
                signal,
                session: None,
            }
            .into()
        };
        // Resolved as for `--runtime host` (no configuration, no container to plan), without
        // the flags that only a container devcell creates takes (judged here instead).
        let resolving = HandoffOptions {
            container: None,
            runtime: Some(AgentRuntime::Host),
            security: SecurityOptions {
                agent: Some(opts.agent.clone()),
                ..SecurityOptions::default()
            },
            mail_channel: Some(false),
            dotfiles: None,
            ..opts.clone()
        };
        let mut p = unless_stopped(stop, prepare(&resolving, None, AgentRuntime::Host))
            .await
            .map_err(stopped)??;
        refuse_options(opts, &p, &info.name)?;
        // its mounts as the host sees them: a bind-backed volume is the bind it is (attack M5)
        let seen = ContainerInfo {
            mounts: crate::security::volumes::mounts_as_host_sees(self.engine, &info.mounts)
                .await
                .map_err(OpsError::from)?,
            ..info.clone()
        };
        let target = judge(&seen, &p.workspace.root, &opts.expect_mounts)?;
        let flags = SecurityOptions {
            agent: Some(opts.agent.clone()),
            ..opts.security.clone()
        };
        let chosen = crate::security::choice::network(
            &flags,
            &opts.settings,
            crate::security::choice::HANDOFF_NETWORK,
        );
        let network = judge_network(info, chosen)?;
        p.workspace = in_container(p.workspace, &target);
        p.cwd = match &opts.primary {
            Some(_) => p
                .workspace
                .primary()
                .map(|r| r.container_path.clone())
                .unwrap_or_else(|| target.clone()),
            None => target.clone(),
        };
        let plan = &mut p.plan;
        plan.workspace_target = target.clone();
        plan.cwd = p.cwd.clone();
        plan.context_path = crate::handoff::repository::normalize_posix(&format!(
            "{target}/{}",
            ctx_rel_path(&opts.settings)
        ));
        plan.repos = p
            .workspace
            .repos
            .iter()
            .zip(std::mem::take(&mut plan.repos))
            .map(|(r, planned)| crate::handoff::plan::PlannedRepo {
                path: r.container_path.clone(),
                ..planned
            })
            .collect();
        plan.image = info.image.clone();
        plan.network = network.clone();
        plan.profile = crate::security::choice::profile(&flags, &opts.settings).to_string();
        plan.grants = opts
            .settings
            .security
            .allow
            .iter()
            .chain(&opts.security.allow)
            .cloned()
            .collect();
        plan.runtime = AgentRuntime::Container;
        plan.isolation = AgentRuntime::Container.isolation().to_string();
        plan.container = PlannedContainer {
            action: EXTERNAL_ACTION.into(),
            id: Some(info.id.clone()),
            labels: BTreeMap::new(),
        };
        plan.mounts = planned_mounts(&seen.mounts);
        Ok((p, target, network))
    }

    /// The session, begun in the state with the container recorded and marked `external`
    /// (never the workspace's own container: `delete` forgets it, nothing stops it), and the
    /// workspace's `.git` entries recorded for the end's comparison.
    async fn begin_external(
        &self,
        p: &Prepared,
        info: &ContainerInfo,
    ) -> Result<(Live, crate::handoff::state::SessionLog)> {
        let started = self.start_session(p, Some(&info.id)).await?;
        let live = Live::new(p, started, true);
        mark_external(&live.store, &live.root, &live.id).map_err(|e| live.fail(e.into()))?;
        let log = live
            .store
            .create_log(&live.id)
            .map_err(|e| live.fail(e.into()))?;
        live.store
            .set_git_identity(&live.root, crate::handoff::git_identity::record(&live.root))
            .map_err(|e| live.fail(e.into()))?;
        Ok((live, log))
    }

    /// `set-up` of the container ([`crate::ops::set_up::set_up_attached`]): judged against
    /// the profile (host control refused under `hardened` unless granted), its lifecycle hooks
    /// run in the workspace's folder; the container as the agent runs in it.
    async fn set_up_external(
        &self,
        info: &ContainerInfo,
        target: &str,
    ) -> Result<(SetUpResult, Attached)> {
        crate::ops::set_up::set_up_attached(
            self.engine,
            &self.set_up_options(info, target),
            self.reporter,
        )
        .await
    }

    /// `set-up`'s options for the container `info`, its hooks run in `target` (the
    /// workspace's folder there): no configuration of the workspace's, the agent's grants.
    fn set_up_options(&self, info: &ContainerInfo, target: &str) -> SetUpOptions {
        let opts = self.opts;
        SetUpOptions {
            container_id: info.id.clone(),
            config: None,
            env: opts.env.clone(),
            plan: crate::ops::PlanOptions::default(),
            dotfiles: None,
            remote_env: IndexMap::new(),
            default_user_env_probe: crate::lifecycle::UserEnvProbe::default(),
            include_configuration: false,
            include_merged_configuration: false,
            container_data_folder: None,
            security: SecurityOptions {
                agent: Some(opts.agent.clone()),
                ..opts.security.clone()
            },
            settings: opts.settings.clone(),
            workspace_git_dirs: crate::handoff::audit::workspace_git_dirs,
            workspace_folder: Some(target.to_string()),
            refuse_before_running: Some(|info, profile, permissions| {
                refuse_root_agent(&info.name, profile, permissions)
            }),
        }
    }

    /// The session's environment record (spec-note 0527): the container's image by digest,
    /// its mounts as the host sees them, the user the agent runs as, marked `external`; kept
    /// as the workspace's last record and named by the session. A record that cannot be made
    /// or kept leaves the session without one (`env show` says so), as a handoff's does.
    async fn record_environment(
        &self,
        info: &ContainerInfo,
        p: &Prepared,
        set_up: &SetUpResult,
        attached: &Attached,
        network: &str,
        live: &Live,
    ) {
        let mut grants = p.plan.grants.clone();
        grants.sort();
        grants.dedup();
        let security = crate::ops::environment::SecurityRecord {
            profile: set_up.profile.clone(),
            grants,
            network: network.to_string(),
        };
        let made = async {
            let seen = crate::security::volumes::mounts_as_host_sees(self.engine, &info.mounts)
                .await
                .map_err(OpsError::from)?;
            let record = crate::ops::environment::record_external(
                self.engine,
                info,
                &seen,
                (&set_up.remote_user, attached.exec_user.as_deref()),
                security,
            )
            .await?;
            let store = crate::ops::environment::EnvironmentStore::new(live.store.root());
            let hash = store.store(&live.root, &record)?;
            live.record(crate::handoff::state::SessionFact::Environment(hash))
                .map_err(OpsError::from)
        };
        if let Err(e) = made.await {
            tracing::debug!("no environment record: {e}");
        }
    }

    /// The context file and `AGENTS.md` (when absent) in the workspace root, with the
    /// container's paths.
    fn write_external_context(
        &self,
        p: &Prepared,
        set_up: &SetUpResult,
        network: &str,
        live: &Live,
    ) -> Result<(PathBuf, crate::handoff::session::AgentsMdReport)> {
        let opts = self.opts;
        let mut inputs = ContextInputs::from_settings(&opts.settings, &opts.agent, &opts.verify)
            .unwrap_or_default();
        inputs.task = Task::new(opts.task_url.clone(), opts.task_title.clone());
        if let Some(provider) = &opts.task_provider {
            inputs.task.provider = Some(provider.clone());
        }
        inputs.security.profile = set_up.profile.clone();
        inputs.security.network = network.to_string();
        inputs.security.permissions = p.plan.grants.clone();
        inputs.secrets = p.plan.secrets.clone();
        inputs.env = p.plan.env.clone();
        inputs.image.reference = p.plan.image.clone();
        inputs.hooks = context::hooks_from_report(&set_up.lifecycle);
        let ctx = HandoffContext::new(&p.workspace, inputs);
        let context_file = context::write(&live.root, &ctx_rel_path(&opts.settings), &ctx)
            .map_err(|e| live.fail(e.into()))?;
        let agents_md = agents_md_report(
            agents_md::write_if_absent(&live.root, &ctx).map_err(|e| live.fail(e.into()))?,
        );
        Ok((context_file, agents_md))
    }

    /// The agent run to its end (or stopped) in the container, as the remote user with the
    /// probed environment, its variables and secrets, and `safe.directory` for each
    /// repository (its git directory is the host's, owned by another uid).
    async fn run_external_agent(
        &self,
        p: &Prepared,
        attached: &Attached,
        live: &Live,
        log: crate::handoff::state::SessionLog,
        streams: AgentStreams<'_>,
        stop: &mut StopSignal<'_>,
    ) -> Result<(Option<i32>, Option<i32>, SessionOutcome)> {
        let mut env = unless_stopped(
            stop,
            probed_remote_env(self.engine, attached, &IndexMap::new(), self.reporter),
        )
        .await
        .map_err(|signal| live.signaled(signal))?
        .map_err(|e| live.fail(e))?
        .0;
        env.extend(p.agent_env.clone());
        env.extend(p.secrets.clone());
        append_safe_directories(&mut env, &safe_directories(&p.workspace, &[]));
        let request = agent_request(p, attached, env, &pidfile_of(&live.id), self.opts.tty);
        self.reporter.report(Event::Status(format!(
            "launching agent `{}` as `{}` in {} of external container {} (log {})",
            self.opts.agent,
            attached.remote_user,
            p.cwd,
            crate::ops::target::short(&attached.container.id),
            live.start.session.log.display()
        )));
        let log = Mutex::new(log);
        let (result, stopped_by) = self
            .exec_until_stopped(live, attached, &request, &log, streams, stop)
            .await;
        let result = match (result, stopped_by) {
            (Ok(r), _) => r,
            (Err(_), Some(signal)) => signal_result(signal),
            (Err(e), None) => return Err(live.fail(e.into())),
        };
        let code = i32::try_from(result.exit_code).unwrap_or(i32::MAX);
        let (exit_code, signal, outcome) = exec_outcome(code, stopped_by.is_some());
        if let Ok(mut l) = log.lock() {
            l.note(&format!("# devcell: agent ended: {outcome:?}"));
        }
        Ok((exit_code, signal, outcome))
    }

    /// The end's scans after `set-up` was refused or failed: set-id bits and device nodes
    /// ([`Self::scan_external`]) and the git entries made since the start (moved aside,
    /// [`Self::check_git_identity`]), said as status lines (the result is an error).
    fn scan_after_failure(&self, live: &mut Live, p: &Prepared) {
        self.scan_external(live, p);
        self.check_git_identity(live);
    }

    /// Under `hardened`: the workspace scanned for set-id files and device nodes the agent
    /// left (bits cleared, each a warning). Only the workspace: the container's other binds
    /// are its owner's, and `o+w` is left as found (other users of the container may need
    /// it).
    fn scan_external(
        &self,
        live: &mut Live,
        p: &Prepared,
    ) -> Vec<crate::security::planted::Planted> {
        if p.plan.profile != crate::settings::Profile::Hardened.to_string() {
            return Vec::new();
        }
        let found = crate::security::planted::scan_and_clear_each(
            &live.root,
            &[],
            crate::security::planted::ScanOptions {
                other_writable: false,
                ..Default::default()
            },
        );
        for f in &found {
            let message = f.message(&live.root);
            self.reporter
                .report(Event::Status(format!("warning: {message}")));
            live.warnings.push(message);
        }
        found
    }
}

/// Marks session `id` of the workspace `root` as run in a container devcell did not create.
///
/// Errors: the state's.
fn mark_external(
    store: &StateStore,
    root: &Path,
    id: &str,
) -> std::result::Result<(), crate::handoff::state::StateError> {
    store.update(root, |state| {
        if let Some(s) = state.sessions.iter_mut().find(|s| s.id == id) {
            s.external = true;
        }
        Ok(())
    })
}

/// The containers recorded as external in the workspace's sessions: `delete` forgets them and
/// never removes them (spec-note 0524).
pub fn external_containers(state: Option<&crate::handoff::state::WorkspaceState>) -> Vec<String> {
    let mut out: Vec<String> = state
        .into_iter()
        .flat_map(|s| s.sessions.iter())
        .filter(|s| s.external)
        .filter_map(|s| s.container_id.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `hardened` an agent that would be root in a container someone else owns is
    /// refused unless `root` is granted; other profiles keep the warning only (attack M6).
    #[test]
    fn a_root_agent_in_an_external_container_is_refused_under_hardened() {
        use crate::security::{Permission, PermissionRequest, RequestStatus, Source};
        let root = |status| {
            vec![PermissionRequest {
                permission: Permission::Root,
                source: Source::ExistingContainer("abc".into()),
                status,
            }]
        };
        let err = refuse_root_agent("box", "hardened", &root(RequestStatus::Refused)).unwrap_err();
        assert!(err.to_string().contains("as root"), "{err}");
        assert!(format!("{err:?}").contains("--allow root"), "{err:?}");
        assert!(refuse_root_agent("box", "hardened", &root(RequestStatus::Granted)).is_ok());
        assert!(refuse_root_agent("box", "reference", &root(RequestStatus::Refused)).is_ok());
        assert!(refuse_root_agent("box", "hardened", &[]).is_ok());
    }
    use crate::engine::MountInfo;

    fn bind(source: &str, destination: &str, rw: bool) -> MountInfo {
        MountInfo::bind(source, destination, rw)
    }

    fn container(mounts: Vec<MountInfo>) -> ContainerInfo {
        ContainerInfo {
            id: "0123456789abcdef".into(),
            name: "devbox".into(),
            running: true,
            mounts,
            ..ContainerInfo::default()
        }
    }

    #[test]
    fn an_external_container_must_run_bind_the_workspace_and_meet_each_expected_mount() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("api")).unwrap();
        let ws_s = ws.to_string_lossy().into_owned();
        let root_s = root.to_string_lossy().into_owned();
        // the deepest bind holding the workspace gives its place
        let info = container(vec![
            bind(&root_s, "/srv", false),
            bind(&ws_s, "/workspace", true),
        ]);
        assert_eq!(judge(&info, &ws, &[]).unwrap(), "/workspace");
        assert_eq!(
            judge(&info, &ws.join("api"), &[]).unwrap(),
            "/workspace/api"
        );
        let ok = ExpectedMount::parse(&format!("{ws_s}:/workspace:rw")).unwrap();
        judge(&info, &ws, &[ok]).unwrap();
        for (c, expected, says) in [
            (
                ContainerInfo {
                    running: false,
                    ..info.clone()
                },
                None,
                "it is not running",
            ),
            (
                container(vec![bind("/elsewhere", "/workspace", true)]),
                None,
                "devcell did not create it, and it does not mount the workspace",
            ),
            (
                info.clone(),
                Some(format!("{ws_s}:/workspace:ro")),
                "it is mounted read-write",
            ),
        ] {
            let expected: Vec<_> = expected
                .iter()
                .map(|e| ExpectedMount::parse(e).unwrap())
                .collect();
            let e = judge(&c, &ws, &expected).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
            assert!(matches!(e, OpsError::NamedContainer { found: true, .. }));
        }
    }

    #[test]
    fn a_read_write_bind_of_a_host_git_directory_is_refused_and_a_read_only_cover_passes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(ws.join(".git")).unwrap();
        let ws_s = ws.to_string_lossy().into_owned();
        let git_s = ws.join(".git").to_string_lossy().into_owned();
        let open = container(vec![bind(&ws_s, "/workspace", true)]);
        let e = judge(&open, &ws, &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("could write the host's git directory"),
            "{e}"
        );
        let covered = container(vec![
            bind(&ws_s, "/workspace", true),
            bind(&git_s, "/workspace/.git", false),
        ]);
        assert_eq!(judge(&covered, &ws, &[]).unwrap(), "/workspace");
    }

    #[test]
    fn the_plan_shows_binds_and_volumes_as_the_host_sees_them() {
        let volume = |name: &str, kind: &str, source: &str| MountInfo {
            kind: kind.into(),
            name: Some(name.into()),
            source: source.into(),
            ..bind("", "/v", true)
        };
        let tmpfs = MountInfo {
            kind: "tmpfs".into(),
            ..bind("", "/tmp", true)
        };
        let planned = planned_mounts(&[
            bind("/h/ws", "/src", true),
            volume("cache", "volume", "/var/lib/docker/volumes/cache/_data"),
            volume(
                "odd",
                crate::security::volumes::UNRESOLVED_VOLUME,
                "the volume `odd` (the engine does not know it)",
            ),
            tmpfs,
        ]);
        let shown: Vec<(&str, &str)> = planned
            .iter()
            .map(|m| (m.source.as_str(), m.purpose.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("/h/ws", EXTERNAL_MOUNT),
                ("cache", EXTERNAL_VOLUME_MOUNT),
                (
                    "the volume `odd` (the engine does not know it)",
                    EXTERNAL_VOLUME_MOUNT
                ),
            ]
        );
    }

    #[test]
    fn a_container_with_a_network_needs_network_default() {
        let mut info = container(Vec::new());
        info.host.network_mode = "none".into();
        assert_eq!(judge_network(&info, NetworkMode::None).unwrap(), "none");
        info.host.network_mode = "bridge".into();
        for chosen in [NetworkMode::None, NetworkMode::Allowlist] {
            let e = judge_network(&info, chosen).unwrap_err();
            assert!(
                e.to_string().contains("the container has network `bridge`"),
                "{e}"
            );
        }
        assert_eq!(
            judge_network(&info, NetworkMode::Default).unwrap(),
            "bridge"
        );
    }

    #[test]
    fn the_workspace_is_described_at_its_place_in_the_container() {
        let ws = Workspace::bare(
            "w",
            Path::new("/h/w"),
            "/h/w",
            crate::handoff::repository::Layout::Plain,
        );
        assert_eq!(in_container(ws, "/src").container_root, "/src");
    }

    /// Through an in-memory engine: the agent runs in the container someone else made, and
    /// devcell creates, starts, stops and removes nothing; a wrong `--expect-mount` runs
    /// nothing and begins no session.
    #[tokio::test]
    async fn the_handoff_runs_the_agent_and_never_starts_stops_or_removes_the_container() {
        use crate::engine::fake::FakeEngine;
        use crate::engine::{ContainerSpec, Mount, MountKind};
        let dir = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(dir.path()).unwrap();
        let ws = tmp.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let config = tmp.join("config.toml");
        std::fs::write(&config, "[agents.a]\ncommand = [\"touch\", \"done\"]\n").unwrap();
        let engine = FakeEngine::new();
        engine.add_image(
            "someone/base:1",
            "fake-image-1",
            &[(
                "/etc/passwd",
                "root:x:0:0:root:/root:/bin/sh\ndev:x:1000:1000::/home/dev:/bin/sh\n",
            )],
        );
        let container = |user: &str| {
            engine.add_container(
                &ContainerSpec {
                    image: "someone/base:1".into(),
                    network_mode: Some("none".into()),
                    user: Some(user.into()),
                    mounts: vec![Mount {
                        kind: MountKind::Bind,
                        source: Some(ws.to_string_lossy().into_owned()),
                        target: "/src".into(),
                        read_only: false,
                    }],
                    ..ContainerSpec::default()
                },
                true,
            )
        };
        let as_root = container("root");
        let id = container("1000:1000");
        let made = engine.calls().len();
        let opts_in = |container: &str, expect: &str| HandoffOptions {
            workspace_folder: ws.clone(),
            agent: "a".into(),
            settings: crate::settings::load(Some(&config)).unwrap(),
            state_root: Some(tmp.join("state")),
            container: Some(container.to_string()),
            expect_mounts: vec![ExpectedMount::parse(expect).unwrap()],
            ..HandoffOptions::default()
        };
        let opts = |expect: &str| opts_in(&id, expect);
        let streams = || AgentStreams {
            stdin: None,
            stdout: Box::new(tokio::io::sink()),
            stderr: Box::new(tokio::io::sink()),
        };
        let stop = || -> StopSignal<'static> { Box::pin(futures_util::stream::pending()) };
        let reporter = crate::progress::NoopReporter;
        let wrong = opts(&format!("{}:/elsewhere", ws.display()));
        let e = super::super::handoff_with(&engine, &wrong, streams(), stop(), &reporter)
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("mounts nothing at `/elsewhere`"),
            "{e}"
        );
        assert_eq!(engine.calls().len(), made, "{:?}", engine.calls());
        let store = StateStore::new(tmp.join("state"));
        assert!(store.load(&ws).unwrap().is_none(), "no session begun");

        // an agent that would be root there is refused, and runs nothing (attack M6)
        let root = opts_in(&as_root, &format!("{}:/src:rw", ws.display()));
        let e = super::super::handoff_with(&engine, &root, streams(), stop(), &reporter)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("as root"), "{e}");
        assert!(
            !engine
                .execs()
                .iter()
                .any(|x| x.request.argv.contains(&"done".to_string())),
            "the agent ran"
        );

        let right = opts(&format!("{}:/src:rw", ws.display()));
        // its plan (spec-note 0526): judged, the user named, nothing run, begun or written
        let execs = engine.execs().len();
        let sessions = || store.load(&ws).unwrap().map(|s| s.sessions.len());
        let before = sessions();
        let planned = plan(&engine, &right).await.unwrap().expect("external");
        let external = planned.external.as_ref().unwrap();
        assert_eq!(external.remote_user, "1000:1000");
        assert!(!external.root);
        assert_eq!(planned.container.action, EXTERNAL_ACTION);
        assert_eq!(planned.cwd, "/src");
        assert_eq!(engine.execs().len(), execs, "the plan ran nothing");
        assert_eq!(sessions(), before, "no session begun");
        assert!(!ws.join(".devcell").exists(), "no context file");
        assert!(
            external
                .lifecycle
                .contains("never starts, stops or removes it")
        );
        // what the container already has is reported, never offered as a grant (spec-note 0526)
        let mut has_more = planned.clone();
        has_more.permissions = vec![crate::security::PermissionRequest {
            permission: crate::security::Permission::Capability("SYS_PTRACE".into()),
            source: crate::security::Source::ExistingContainer("0123456789ab".into()),
            status: crate::security::RequestStatus::Refused,
        }];
        let lines = has_more.permission_lines();
        assert!(lines[0].contains("already in the container"), "{lines:?}");
        assert!(!lines[0].contains("grant with"), "{lines:?}");
        has_more.external = None;
        assert!(has_more.permission_lines()[0].contains("grant with"));
        let e = plan(&engine, &root).await.unwrap_err();
        assert!(e.to_string().contains("as root"), "{e}");
        let r = super::super::handoff_with(&engine, &right, streams(), stop(), &reporter)
            .await
            .unwrap();
        assert_eq!(r.container_id.as_deref(), Some(id.as_str()));
        assert!(r.session.external);
        // its environment record (spec-note 0527): the container's image, user and mounts
        let records = crate::ops::environment::EnvironmentStore::new(store.root());
        let record = records
            .load(r.session.environment.as_deref().expect("a record"))
            .unwrap();
        let external = record.external.as_ref().expect("marked external");
        assert_eq!(external.container, id);
        assert_eq!(external.user, "1000:1000");
        assert_eq!(external.mounts.len(), 1);
        assert_eq!(external.mounts[0].source, ws.to_string_lossy());
        assert_eq!(record.image.references, ["someone/base:1"]);
        assert_eq!(records.last(&ws).unwrap().as_ref(), Some(&record));
        let agent = engine
            .execs()
            .into_iter()
            .find(|x| x.request.argv.contains(&"done".to_string()))
            .expect("the agent ran");
        assert_eq!(agent.container, id);
        assert_eq!(agent.request.working_dir.as_deref(), Some("/src"));
        for call in &engine.calls()[made..] {
            assert!(
                !["create", "start", "stop", "remove", "kill"]
                    .iter()
                    .any(|verb| call.starts_with(&format!("{verb} "))),
                "{call}"
            );
        }
        assert!(engine.container(&id).unwrap().running);
        let state = store.load(&ws).unwrap().unwrap();
        assert!(state.container_id.is_none());
        // the refused root session began in its container too: both are forgotten by `delete`
        assert_eq!(external_containers(Some(&state)), [as_root, id]);
    }

    #[test]
    fn only_sessions_marked_external_name_containers_delete_keeps() {
        let mut state = crate::handoff::state::WorkspaceState::new("/w".into());
        assert!(external_containers(Some(&state)).is_empty());
        let store_dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(store_dir.path());
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let probe = |_: &str| false;
        let start = store
            .begin_session(
                &root,
                crate::handoff::state::NewSession::in_container("a", Some("feedface"), false),
                &probe,
                crate::handoff::state::SessionProcess::current(),
            )
            .unwrap();
        mark_external(&store, &root, &start.session.id).unwrap();
        state = store.load(&root).unwrap().unwrap();
        assert_eq!(external_containers(Some(&state)), ["feedface"]);
        assert!(state.container_id.is_none(), "never the workspace's own");
    }
}
