//! `handoff`: hand a workspace to a coding agent inside a hardened dev container (the Grove 1.2
//! RFC's golden path; spec-notes 0200-0206).
//!
//! Steps: resolve the agent (`[agents.NAME]` of the user settings), inspect the workspace
//! ([`crate::handoff::repository::inspect`]) and find its configuration (the primary repository's
//! `.devcontainer`, else the root's) → a structured [`HandoffPlan`] ([`plan`] stops here) →
//! start a session in the host-side state ([`super::state`]; a live session refuses the handoff
//! with `session_active` unless `replace`) → `up` ([`crate::ops::up::up_judged`]) with the workspace
//! root mounted whole at the workspace target (`/workspace`), the repositories' git directories
//! and read-only git config/hooks overlays, the agent's read-only credential mounts, the network
//! mode (`none` unless the agent or a flag asks for `default`) → the context file and
//! `AGENTS.md` (when absent) → the agent's argv run in the container as the remote user, in the
//! workspace root (or the primary repository with `--primary`), through the engine's exec.
//!
//! A Compose configuration is brought up through [`crate::ops::compose_up::up_compose`]: the
//! handoff's mounts go to the primary service (the workspace root at the workspace target),
//! the agent runs there; `none` and `allowlist` close the project networks
//! ([`crate::ops::compose_network`], spec-note 0606).
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
//! When the agent ends (or is stopped), the workspace container, and every Compose container
//! binding the workspace or a container git directory, is stopped and confirmed stopped before
//! the agent's commits are fetched back ([`super::quiesce`]): what the agent left running
//! writes nothing afterwards. The next handoff starts them again.
//!
//! With `runtime: Some(AgentRuntime::Host)` (`--runtime host`) the agent runs on the host
//! instead, unisolated and warned about ([`super::host`], spec-note 0251); an unreachable engine
//! is never a reason to do that silently.

use crate::diagnostics::SecretMask;
use crate::engine::{Engine, ExecInput, ExecOutput, ExecRequest};
use crate::handoff::agents_md::{self};
use crate::handoff::context::{
    self, AgentRuntime, ContextInputs, FeatureInfo, HandoffContext, ImageInfo, Task,
};
use crate::handoff::plan::{
    HandoffOptions, ctx_rel_path, plan_lines, prepare, safe_directories, up_options,
};
use crate::handoff::session::{
    AgentStreams, HandoffResult, StopSignal, Stopped, agents_md_report, close_previous_sessions,
    pidfile_of, pump, record_failure, record_stop, running_containers, split_status, stop_agent,
    unless_stopped,
};
use crate::handoff::state::{RepoFetchBack, SessionOutcome, SessionProcess, StateStore};
use crate::lifecycle::UserEnvProbe;
use crate::ops::attach::{append_safe_directories, attach_running, probed_remote_env};
use crate::ops::error::{OpsError, Result};
use crate::ops::target::id_labels;
use crate::ops::up::{judge_up, load_up, up_judged};
use crate::progress::{Event, Reporter};
use crate::settings::NetworkMode;
use indexmap::IndexMap;
use std::io::Write as _;

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the request to stop the agent in its container may take.
const STOP_REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// How long a stopped agent gets to end before devcell records the stop and exits.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// How a handoff's `up` goes on: an image or Dockerfile configuration judged here, or a
/// Compose configuration that [`crate::ops::compose_up::up_compose`] judges with its services.
enum Judged {
    Single(Box<crate::ops::up::JudgedUp>),
    Compose(Box<crate::ops::permissions::UpChoice>),
}

/// Runs a handoff against the engine at `DOCKER_HOST` (see the module docs), or on the host
/// with `runtime: Some(Host)` ([`super::host::handoff_on_host`]). Returns when the agent has
/// ended; its exit status is in the result.
///
/// Errors: as [`handoff_with`]; [`OpsError::Engine`] (`engine_unavailable`) when no engine
/// answers for the container runtime (there is no silent fallback to the host).
pub async fn handoff(
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> Result<HandoffResult> {
    if opts.runtime == Some(AgentRuntime::Host) {
        // the engine, when there is one, only tells which recorded containers still run
        let engine = crate::engine::connect().await.ok();
        return super::host::handoff_on_host(engine.as_deref(), opts, streams, stop, reporter)
            .await;
    }
    let engine = crate::engine::connect().await?;
    handoff_with(&*engine, opts, streams, stop, reporter).await
}

/// [`handoff`] through `engine` (its host socket, [`Engine::host_socket`], never mountable).
///
/// Errors: the plan's errors; [`OpsError::Product`] (a `StateError`) with `SessionActive` when a session is
/// live (nothing was changed); `up`'s errors (the session is recorded as failed; the workspace
/// is untouched and the container, if any, left for inspection); [`OpsError::Product`] (a `ContextError`).
pub async fn handoff_with(
    engine: &dyn Engine,
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> Result<HandoffResult> {
    let mut stop = stop;
    // before a session exists, a stop signal ends the handoff with nothing to record
    let stopped = |signal| -> OpsError {
        Stopped {
            signal,
            session: None,
        }
        .into()
    };
    let p = unless_stopped(
        &mut stop,
        prepare(opts, Some(engine), AgentRuntime::Container),
    )
    .await
    .map_err(stopped)??;
    // What would reach the host (untrusted git directories, host commands) is judged before
    // a session, a container or an image exists (spec-notes 0410, 0411), once: `up` goes on
    // with this judgement and the container found with it, under its bring-up lock.
    let mut up_opts = up_options(&p, opts);
    let choice = load_up(&up_opts)?;
    crate::ops::load::report_warnings(&choice.loaded, reporter);
    // A Compose configuration: the agent runs in the primary service, which gets the
    // handoff's workspace mount beside the files' own volumes; Compose's project network is
    // kept, so a network without a way out is refused rather than claimed (spec-note 0606).
    let compose = choice.loaded.typed.kind() == crate::config::model::ConfigKind::Compose;
    let judged = if compose {
        if let Some(o) = &p.target.workspace_override {
            up_opts.mounts.insert(0, o.mount.clone());
        }
        Judged::Compose(Box::new(choice))
    } else {
        Judged::Single(Box::new(
            unless_stopped(
                &mut stop,
                judge_up(engine, &up_opts, choice, &p.git_requests, reporter),
            )
            .await
            .map_err(stopped)??,
        ))
    };
    for line in plan_lines(&p.plan) {
        reporter.report(Event::Status(line));
    }
    let compose_network = crate::ops::compose_network::ComposeNetwork::of(p.network);
    if compose {
        reporter.report(Event::Status(compose_network.note().to_string()));
    }
    let store = match &opts.state_root {
        Some(root) => StateStore::new(root),
        None => StateStore::open_default()?,
    };
    let root = p.workspace.root.clone();

    // Which recorded containers still run (the state module asks synchronously).
    let running = running_containers(engine, &store, &root).await;
    let probe = move |id: &str| running.contains(id);
    let start = store.begin_session(
        &root,
        &opts.agent,
        None,
        opts.replace,
        &probe,
        SessionProcess::current(),
    )?;
    let session_id = start.session.id.clone();
    close_previous_sessions(Some(engine), &start, reporter).await;
    let mut log = store.create_log(&session_id)?;
    let fail = |e: OpsError| record_failure(&store, &root, &session_id, &p.secrets, e);
    // from here on a stop signal is recorded as the session's end (`signaled`)
    let signaled = |signal: i32| record_stop(&store, &root, &session_id, signal);

    // Each repository's container git directory: what an earlier session left there comes
    // back first, then it is rewritten from the host (spec-note 0436).
    let mut earlier = Vec::new();
    let mut git_findings = Vec::new();
    for g in &p.gits {
        let back = g.prepare(&session_id).map_err(|e| fail(e.into()))?;
        if let Some(why) = &back.refused {
            let message = format!("repository `{}`: {why}", g.repo);
            reporter.report(Event::Status(format!("warning: {message}")));
            git_findings.push(message);
        }
        if !back.is_empty() {
            earlier.push(RepoFetchBack {
                repo: g.repo.clone(),
                result: back,
            });
        }
    }
    store
        .add_git(&root, &session_id, earlier)
        .map_err(|e| fail(e.into()))?;
    // what changed in the workspace's `.git` entries since the last handoff, then the new
    // record (spec-note 0436)
    let identity = crate::handoff::git_identity::record(&root);
    if let Some(before) = store
        .load(&root)
        .ok()
        .flatten()
        .and_then(|s| s.git_identity)
    {
        for (code, message) in crate::handoff::git_identity::compare(&before, &identity) {
            reporter.report(Event::Status(format!("warning: {message}")));
            git_findings.push(format!("{code}: {message}"));
        }
    }
    store
        .set_git_identity(&root, identity)
        .map_err(|e| fail(e.into()))?;

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
    let up = unless_stopped(&mut stop, async {
        match judged {
            Judged::Single(judged) => up_judged(engine, &up_opts, *judged, reporter).await,
            // `up_compose` takes the lock and judges every service with the git directories
            Judged::Compose(choice) => {
                crate::ops::compose_up::up_compose(
                    engine,
                    &up_opts,
                    *choice,
                    &p.git_requests,
                    reporter,
                )
                .await
            }
        }
    })
    .await
    .map_err(signaled)?
    .map_err(&fail)?;
    let info = engine
        .inspect_container(&up.container_id)
        .await
        .ok()
        .flatten();
    let image = info.as_ref().map(|c| c.image.clone()).unwrap_or_default();
    // A reused container keeps the network it was created with: report the real one.
    let network = match info.as_ref().map(|c| c.host.network_mode.as_str()) {
        Some("none") if up.egress.is_some() => NetworkMode::Allowlist,
        Some("none") => NetworkMode::None,
        Some(_) => NetworkMode::Default,
        None => p.network,
    };
    let mut warnings = p.warnings.clone();
    warnings.extend(git_findings);
    let network = if compose {
        // the mode the primary container was created with (its label)
        let created = info.as_ref().map_or(compose_network, |c| {
            crate::ops::compose_network::ComposeNetwork::of_labels(&c.labels)
        });
        warnings.push(created.note().to_string());
        created.mode()
    } else {
        network
    };
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
    store
        .set_network(&root, &session_id, network.as_str())
        .map_err(|e| fail(e.into()))?;
    let environments = crate::ops::environment::EnvironmentStore::new(store.root());
    let environment = record_environment(
        engine,
        &up_opts,
        &up,
        network.as_str(),
        &root,
        &environments,
    )
    .await;
    match environment {
        Ok(hash) => store
            .set_environment(&root, &session_id, &hash)
            .map_err(|e| fail(e.into()))?,
        // `env show` then says there is none; the handoff goes on unchanged
        Err(message) => tracing::debug!("{message}"),
    }
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
    inputs.security.network = network.to_string();
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
    let mut ctx = HandoffContext::new(&p.workspace, inputs);
    ctx.sandbox = opts.sandbox.clone();
    let context_file =
        context::write(&root, &ctx_rel_path(&opts.settings), &ctx).map_err(|e| fail(e.into()))?;
    let agents_md =
        agents_md_report(agents_md::write_if_absent(&root, &ctx).map_err(|e| fail(e.into()))?);

    // The agent.
    // the configuration `up` loaded and judged: a file swapped since is never read
    let loaded = &up.loaded;
    let labels = id_labels(&p.target, loaded);
    let expected = crate::ops::target::expected_workspace(&p.target, loaded);
    let attached = unless_stopped(
        &mut stop,
        attach_running(
            engine,
            loaded,
            &labels,
            expected.as_deref(),
            &opts.env,
            UserEnvProbe::default(),
        ),
    )
    .await
    .map_err(signaled)?
    .map_err(&fail)?;
    let mut env = unless_stopped(
        &mut stop,
        probed_remote_env(engine, &attached, &IndexMap::new(), reporter),
    )
    .await
    .map_err(signaled)?
    .map_err(&fail)?
    .0;
    env.extend(p.agent_env.clone());
    if up.egress.is_some() {
        // each upstream's in-container base URL (its credential stays on the host)
        env.extend(
            crate::ops::egress::upstream_env(
                &opts.settings,
                &opts.agent,
                crate::egress::channel::DEFAULT_LISTEN_PORT,
            )
            .map_err(&fail)?,
        );
    }
    env.extend(p.secrets.clone());
    append_safe_directories(&mut env, &safe_directories(&p.workspace, &p.gits));
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
    let (exec_result, stopped_by) = match unless_stopped(&mut stop, &mut run).await {
        Ok(r) => (r, None),
        Err(signal) => {
            reporter.report(Event::Status(format!("stopping agent `{}`", opts.agent)));
            // bounded whatever the engine does (a container removed under the exec); a
            // second signal stops waiting
            let ended = unless_stopped(&mut stop, async {
                let _ = tokio::time::timeout(
                    STOP_REQUEST_DEADLINE,
                    stop_agent(engine, &container_id, Some(&attached.remote_user), &pidfile),
                )
                .await;
                tokio::time::timeout(STOP_GRACE, &mut run).await.ok()
            })
            .await
            .ok()
            .flatten();
            (
                ended.unwrap_or(Ok(crate::engine::ExecResult {
                    exit_code: 128 + i64::from(signal),
                    ..Default::default()
                })),
                Some(signal),
            )
        }
    };
    let stopped = stopped_by.is_some();
    // stopped, an exec that failed (its container gone) is the stop's end
    let exec_result = match (exec_result, stopped_by) {
        (Ok(r), _) => r,
        (Err(_), Some(signal)) => crate::engine::ExecResult {
            exit_code: 128 + i64::from(signal),
            ..Default::default()
        },
        (Err(e), None) => return Err(fail(e.into())),
    };
    let code = i32::try_from(exec_result.exit_code).unwrap_or(i32::MAX);
    let (exit_code, signal) = split_status(code, stopped);
    let outcome = match (exit_code, signal) {
        (_, Some(signal)) => SessionOutcome::Signaled { signal },
        (Some(exit_code), None) => SessionOutcome::Exited { exit_code },
        (None, None) => SessionOutcome::Exited { exit_code: code },
    };
    if let Ok(mut l) = log.lock() {
        let dropped = l.dropped();
        if dropped > 0 {
            l.note(&format!(
                "# devcell: {dropped} bytes of output past the cap were not kept"
            ));
        }
        l.note(&format!("# devcell: agent ended: {outcome:?}"));
    }
    // the proxy's decisions made during this session (spec-note 0504)
    let egress = up.egress.as_ref().and_then(|_| {
        let since = chrono::DateTime::parse_from_rfc3339(&start.session.started_at)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc));
        crate::ops::state_folder::default_root()
            .and_then(|state| crate::ops::egress::summary_for(&state, &up.container_id, since))
    });
    // What the agent left running (a `setsid` loop) ends with the containers that can write
    // the container git directories: the fetch-back reads them only once they are confirmed
    // stopped; else the next handoff brings the commits back (spec-note 0436).
    let guarded: Vec<_> = std::iter::once(root.clone())
        .chain(
            p.gits
                .iter()
                .flat_map(|g| [g.work_tree.clone(), g.slot.clone()]),
        )
        .collect();
    // A session replaced meanwhile (`--replace`) leaves the container to its successor, which
    // runs its agent there, and stops it and fetches back at its own end.
    let replaced = store
        .load(&root)
        .ok()
        .flatten()
        .is_some_and(|s| s.sessions.last().is_some_and(|l| l.id != session_id));
    let quiet = if replaced {
        false
    } else {
        reporter.report(Event::Status(
            "stopping the workspace container (what the agent left running ends with it)"
                .to_string(),
        ));
        match crate::handoff::quiesce::stop_workspace(engine, &up.container_id, &guarded).await {
            Ok(_) => true,
            Err(e) => {
                let message = format!(
                    "{e}; the agent's commits were not brought back (the next handoff brings them)"
                );
                reporter.report(Event::Status(format!("warning: {message}")));
                warnings.push(message);
                false
            }
        }
    };
    // The agent's commits come back (also after a stop request): never with the container
    // git directory's configuration (spec-note 0436).
    let mut fetched = Vec::new();
    for g in p.gits.iter().filter(|_| quiet) {
        match g.dir().fetch_back(&g.host(), &session_id) {
            Ok(back) if back.is_empty() => {}
            Ok(back) => {
                // what the host did not take is a warning; the rest is news
                let kept = back.kept.len();
                let lines = fetch_back_lines(&g.repo, &back);
                let first_kept = back.fast_forwarded.len() + back.created.len();
                for (i, line) in lines.into_iter().enumerate() {
                    reporter.report(Event::Status(line.clone()));
                    if i >= first_kept && i < first_kept + kept {
                        warnings.push(line);
                    }
                }
                fetched.push(RepoFetchBack {
                    repo: g.repo.clone(),
                    result: back,
                });
            }
            Err(e) => {
                let message = format!(
                    "repository `{}`: the agent's commits were not brought back: {e}",
                    g.repo
                );
                reporter.report(Event::Status(format!("warning: {message}")));
                warnings.push(message);
            }
        }
    }
    let _ = store.add_git(&root, &session_id, fetched);
    let session = store.end_session_with(&root, &session_id, outcome, egress)?;
    let mut plan = p.plan;
    let permissions: Vec<_> = p
        .git_requests
        .iter()
        .cloned()
        .chain(up.permissions.iter().cloned())
        .collect();
    plan.permissions = crate::handoff::plan::listed_once(permissions.clone());
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
        network: network.to_string(),
        warnings: warnings
            .into_iter()
            .chain(up.warnings.iter().map(ToString::to_string))
            .collect(),
        shown_warnings: up.warnings[..up.shown_warnings.min(up.warnings.len())]
            .iter()
            .map(ToString::to_string)
            .collect(),
        task: None,
        tasks: Vec::new(),
    })
}

/// What a fetch-back did, for people: one line per branch moved or created and per ref kept
/// aside (spec-note 0436).
pub(crate) fn fetch_back_lines(
    repo: &str,
    back: &crate::handoff::container_git::FetchBack,
) -> Vec<String> {
    use crate::handoff::container_git::KeptReason;
    let short = |o: &str| o[..o.len().min(12)].to_string();
    let mut out = Vec::new();
    for u in &back.fast_forwarded {
        out.push(format!(
            "repository `{repo}`: `{}` fast-forwarded to the agent's {} (from {})",
            u.name,
            short(&u.new),
            short(u.old.as_deref().unwrap_or(""))
        ));
    }
    for u in &back.created {
        out.push(format!(
            "repository `{repo}`: the agent's branch `{}` created at {}",
            u.name,
            short(&u.new)
        ));
    }
    for k in &back.kept {
        let why = match k.reason {
            KeptReason::Rewritten => "the agent rewrote it (not a fast-forward)",
            KeptReason::Deleted => "the agent deleted it",
            KeptReason::MovedOnHost => "it changed on the host meanwhile",
            KeptReason::NotABranch => "not a branch",
            KeptReason::Invalid => "its object is missing or its name is refused",
            KeptReason::AddsSubmodule => {
                "it adds a submodule, whose nested repository the host's git would enter"
            }
            KeptReason::CheckedOutElsewhere => {
                "the branch is checked out in another worktree of the repository"
            }
            KeptReason::UncoveredSubmodule => {
                "its commit has a submodule at a path devcell did not cover in this session, whose nested repository the host's git would enter"
            }
        };
        let kept = match &k.kept_as {
            Some(r) => format!("; the agent's value is kept as `{r}`"),
            None => String::new(),
        };
        out.push(format!(
            "repository `{repo}`: `{}` left as it is on the host: {why}{kept}",
            k.name
        ));
    }
    if let Some(why) = &back.refused {
        out.push(format!("repository `{repo}`: {why}"));
    }
    if let Some(b) = &back.head_moved_to {
        out.push(format!(
            "repository `{repo}`: HEAD now names `{b}`, the branch the agent checked out"
        ));
    }
    out
}

/// The handoff's environment record (spec-note 0520), kept under `<state>/environments/` as the
/// workspace root's last record; returns its hash, or the warning saying why there is none.
async fn record_environment(
    engine: &dyn crate::engine::Engine,
    up_opts: &crate::ops::UpOptions,
    up: &crate::ops::UpResult,
    network: &str,
    root: &std::path::Path,
    store: &crate::ops::environment::EnvironmentStore,
) -> Result<String, String> {
    use crate::ops::environment::{record_up, security_record};
    let mut security = security_record(&up.profile, &up_opts.security, &up_opts.settings);
    // the network the container really has (a reused one keeps its own)
    security.network = network.to_string();
    let record = record_up(engine, "handoff", security, up)
        .await
        .map_err(|e| format!("no environment record: {e}"))?;
    store
        .store(root, &record)
        .map_err(|e| format!("the environment record was not kept: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::plan::*;
    use crate::handoff::repository::{self, Workspace};

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
            layout: repository::Layout::Plain,
            repos: Vec::new(),
            config_folder: None,
            git_mounts: vec![repository::GitMount {
                host_path: "/h/src/api/.git".into(),
                container_path: "/h/src/api/.git".into(),
                repos: vec!["api".into()],
            }],
            protected: Vec::new(),
            untrusted_git_dirs: Vec::new(),
            warnings: Vec::new(),
        };
        let gits =
            crate::handoff::container_git::repo_gits(&ws, std::path::Path::new("/state")).unwrap();
        assert!(gits.is_empty());
        let gits = vec![crate::handoff::container_git::RepoGit {
            repo: "api".into(),
            work_tree: "/h/w/api".into(),
            git_dir: "/h/w/api/.git".into(),
            common_dir: "/h/w/api/.git".into(),
            container_path: "/workspace/api".into(),
            slot: "/state/1".into(),
            mount_base: "/run/devcell/git/1".into(),
            linked: false,
            folders: Vec::new(),
            submodules: Vec::new(),
            nested: false,
        }];
        let mut env = IndexMap::from([("GIT_CONFIG_COUNT".to_string(), "1".to_string())]);
        append_safe_directories(&mut env, &safe_directories(&ws, &gits));
        assert_eq!(env["GIT_CONFIG_COUNT"], "3");
        assert_eq!(env["GIT_CONFIG_KEY_1"], "safe.directory");
        assert_eq!(env["GIT_CONFIG_VALUE_1"], "/workspace/api/.git");
        assert_eq!(env["GIT_CONFIG_VALUE_2"], "/run/devcell/git/1/objects");
    }
}
