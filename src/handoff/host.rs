//! `handoff --runtime host`: the agent runs directly on the host, in the workspace folder,
//! without any isolation: the fallback the Grove RFC asks for when no container engine is
//! available (spec-note 0251). devcell never falls back to it on its own: it is chosen with
//! `--runtime host` (or `HandoffOptions::runtime`).
//!
//! Everything else is the container handoff's: the plan, a session in the host state (live
//! while this devcell runs), the context file (`runtime: "host"`, `security.isolation: "none"`,
//! every path a host path) and `AGENTS.md`, the masked log, the exit code or signal. What
//! differs:
//! - a warning ([`unisolated_warning`]) is reported before anything else and returned first
//!   in the result's `warnings` (envelope code `unisolated`);
//! - no image, container, security profile, network policy, mounts or lifecycle hooks; the
//!   agent sees whatever its user can;
//! - its environment is devcell's own (the user's), plus its secrets and `DEVCELL_WORKSPACE` /
//!   `DEVCELL_CONTEXT` (the workspace root and the context file);
//! - it gets pipes, not a terminal (its output is logged and masked; an interactive agent
//!   needs the container runtime's TTY);
//! - when devcell runs as root and the workspace belongs to another user, the agent runs as
//!   that user (uid, gid, its home from `/etc/passwd`; supplementary groups dropped), so what
//!   it writes is that user's (spec-note 0250);
//! - a stop request (SIGTERM/SIGINT to devcell, `--replace`) sends it SIGTERM, then SIGKILL
//!   after 15 s.

use std::collections::HashSet;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use indexmap::IndexMap;

use crate::config::ownership;
use crate::engine::Engine;
use crate::handoff::agents_md;
use crate::handoff::context::{self, AgentRuntime, ContextInputs, HandoffContext, Task};
use crate::handoff::plan::{
    HandoffOptions, Prepared, ctx_rel_path, plan_lines, prepare, unisolated_warning,
};
use crate::handoff::session::{
    AgentStreams, HandoffResult, StopSignal, Stopped, agents_md_report, close_previous_sessions,
    note_end, outcome, pump, record_failure, running_containers, unless_stopped,
};
use crate::handoff::state::{SessionOutcome, StateStore};
use crate::lifecycle::LifecycleReport;
use crate::ops::error::{OpsError, Result};
use crate::progress::{Event, Reporter};

/// How long a stopped agent gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// How long devcell waits for a killed agent's output to end (a process it started and that
/// left its group may hold it open).
const KILLED_OUTPUT_GRACE: Duration = Duration::from_secs(5);

/// Runs the handoff of `opts` with the agent on the host (see the module docs). `engine`, when
/// one answers, only tells which recorded container sessions still run (without one, a
/// session is live while its devcell runs).
///
/// Errors: the plan's errors (no dev container configuration is needed);
/// [`OpsError::Product`] (a `StateError`) with `SessionActive` when a session is live;
/// [`OpsError::Product`] (a `ContextError`) (the session is recorded as failed);
/// [`OpsError::AgentStart`] when the agent's program cannot be started (`not_found` when
/// it does not exist; recorded as failed).
pub async fn handoff_on_host(
    engine: Option<&dyn Engine>,
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> Result<HandoffResult> {
    let mut stop = stop;
    let p = unless_stopped(&mut stop, prepare(opts, None, AgentRuntime::Host))
        .await
        .map_err(|signal| -> OpsError {
            Stopped {
                signal,
                session: None,
            }
            .into()
        })??;
    let root = p.workspace.root.clone();
    let unisolated = unisolated_warning(&opts.agent, &root);
    reporter.report(Event::Status(format!("WARNING: {unisolated}")));
    for line in plan_lines(&p.plan) {
        reporter.report(Event::Status(line));
    }
    let store = match &opts.state_root {
        Some(dir) => StateStore::new(dir),
        None => StateStore::open_default()?,
    };
    let running: Option<HashSet<String>> = match engine {
        Some(engine) => Some(running_containers(engine, &store, &root).await),
        None => None,
    };
    let probe = move |id: &str| running.as_ref().is_none_or(|r| r.contains(id));
    let start = store.begin_session(
        &root,
        crate::handoff::state::NewSession::on_host(&opts.agent, opts.replace),
        &probe,
        crate::handoff::state::SessionProcess::current(),
    )?;
    let session_id = start.session.id.clone();
    close_previous_sessions(engine, &start, reporter).await;
    let mut log = store.create_log(&session_id)?;
    let fail = |e: OpsError| record_failure(&store, &root, &session_id, &p.secrets, e);
    let _ = writeln!(
        log,
        "# devcell handoff session {session_id}: agent `{}` on the host, unisolated (--runtime host)",
        opts.agent
    );
    let ctx = host_context(opts, &p);
    let context_file =
        context::write(&root, &ctx_rel_path(&opts.settings), &ctx).map_err(|e| fail(e.into()))?;
    let agents_md =
        agents_md_report(agents_md::write_if_absent(&root, &ctx).map_err(|e| fail(e.into()))?);
    // The agent, as the workspace's owner when devcell is root.
    let program = p.agent.command.first().cloned().unwrap_or_default();
    let start_error = |source| {
        fail(OpsError::AgentStart {
            agent: opts.agent.clone(),
            program: program.clone(),
            source,
        })
    };
    let (mut command, user) = agent_command(opts, &p, &context_file, streams.stdin.is_some());
    reporter.report(Event::Status(format!(
        "launching agent `{}` on the host as {user} in {} (log {})",
        opts.agent,
        p.cwd,
        start.session.log.display()
    )));
    let child = command.spawn().map_err(start_error)?;
    let log = Mutex::new(log);
    let mask = crate::diagnostics::SecretMask::new(p.secrets.values());
    let status = wait_for_agent(child, streams, &log, &mask, &mut stop, opts, reporter)
        .await
        .map_err(start_error)?;
    let (exit_code, signal, outcome) = outcome_of(status);
    note_end(&log, &outcome);
    let session = store.end_session(&root, &session_id, outcome)?;
    let mut warnings = vec![unisolated];
    warnings.extend(p.warnings.iter().cloned());
    Ok(HandoffResult {
        plan: p.plan,
        session,
        abandoned_sessions: start.abandoned.iter().map(|s| s.id.clone()).collect(),
        replaced_session: start.replaced.as_ref().map(|s| s.id.clone()),
        container_id: None,
        container_action: None,
        remote_user: user,
        runtime: AgentRuntime::Host,
        isolation: AgentRuntime::Host.isolation().to_string(),
        permissions: Vec::new(),
        lifecycle: LifecycleReport::default(),
        context_file,
        agents_md,
        network: "host".to_string(),
        exit_code: if signal.is_some() { None } else { exit_code },
        signal,
        warnings,
        shown_warnings: Vec::new(),
        task: None,
        tasks: Vec::new(),
        set_id_files_and_devices: Vec::new(),
        git_dir_changes: Vec::new(),
    })
}

/// The context file's content for a host handoff (the plan's choices, runtime `host`).
fn host_context(opts: &HandoffOptions, p: &Prepared) -> HandoffContext {
    let mut inputs =
        ContextInputs::from_settings(&opts.settings, &opts.agent, &opts.verify).unwrap_or_default();
    inputs.task = Task::new(opts.task_url.clone(), opts.task_title.clone());
    if let Some(provider) = &opts.task_provider {
        inputs.task.provider = Some(provider.clone());
    }
    inputs.security.profile = p.plan.profile.clone();
    inputs.security.network = p.plan.network.clone();
    inputs.security.permissions = p.plan.grants.clone();
    inputs.secrets = p.plan.secrets.clone();
    inputs.env = p.plan.env.clone();
    inputs.runtime = AgentRuntime::Host;
    HandoffContext::new(&p.workspace, inputs)
}

/// The agent's command: its argv in the plan's working folder, with the host environment, the
/// agent's variables and secrets, `DEVCELL_WORKSPACE` and `DEVCELL_CONTEXT`, in its own process
/// group, as the workspace's owner when devcell is root. Returns it and who it runs as.
fn agent_command(
    opts: &HandoffOptions,
    p: &Prepared,
    context_file: &Path,
    stdin: bool,
) -> (tokio::process::Command, String) {
    let root = &p.workspace.root;
    let argv = &p.agent.command;
    let program = argv.first().cloned().unwrap_or_default();
    let mut command = tokio::process::Command::new(&program);
    command
        .args(&argv[1..])
        .current_dir(&p.cwd)
        .env_clear()
        .envs(&opts.env)
        .envs(&p.agent_env)
        .envs(&p.secrets)
        .env("DEVCELL_WORKSPACE", root)
        .env(crate::handoff::context::CONTEXT_VARIABLE, context_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // its own process group: a stop signals the agent and what it started
        .process_group(0)
        .kill_on_drop(true);
    let user = run_as_workspace_owner(&mut command, root);
    command.stdin(if stdin { Stdio::piped() } else { Stdio::null() });
    (command, user)
}

/// Waits for the agent `child`, its input fed from `streams.stdin` and its output pumped
/// (masked) to `streams` and the log. A stop signal sends SIGTERM to its group, then SIGKILL
/// after [`STOP_GRACE`] (a second signal cuts the grace short); the killed agent's output is
/// waited for at most [`KILLED_OUTPUT_GRACE`]. If devcell goes before it ends, the group is
/// killed.
async fn wait_for_agent(
    mut child: tokio::process::Child,
    streams: AgentStreams<'_>,
    log: &Mutex<crate::handoff::state::SessionLog>,
    mask: &crate::diagnostics::SecretMask,
    stop: &mut StopSignal<'_>,
    opts: &HandoffOptions,
    reporter: &dyn Reporter,
) -> std::io::Result<std::process::ExitStatus> {
    let pid = child.id();
    // killed with its group if devcell goes before it ends
    let mut group = crate::process::GroupGuard::new(pid);
    let feeder = match (streams.stdin, child.stdin.take()) {
        (Some(mut input), Some(mut to_agent)) => Some(tokio::spawn(async move {
            let _ = tokio::io::copy(&mut input, &mut to_agent).await;
        })),
        _ => None,
    };
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let wait = async {
        let (status, _, _) = tokio::join!(
            child.wait(),
            async {
                if let Some(out) = out {
                    pump(out, streams.stdout, log, mask, false).await;
                }
            },
            async {
                if let Some(err) = err {
                    pump(err, streams.stderr, log, mask, false).await;
                }
            }
        );
        status
    };
    tokio::pin!(wait);
    let status = match unless_stopped(stop, &mut wait).await {
        Ok(s) => s,
        Err(_) => {
            reporter.report(Event::Status(format!("stopping agent `{}`", opts.agent)));
            signal(pid, rustix::process::Signal::TERM);
            // a second signal cuts the grace short
            let graced = unless_stopped(stop, tokio::time::timeout(STOP_GRACE, &mut wait))
                .await
                .ok()
                .and_then(Result::ok);
            match graced {
                Some(s) => s,
                None => {
                    signal(pid, rustix::process::Signal::KILL);
                    // what the agent started may hold its output open: bounded
                    match tokio::time::timeout(KILLED_OUTPUT_GRACE, &mut wait).await {
                        Ok(s) => s,
                        Err(_) => Ok(std::process::ExitStatus::from_raw(
                            rustix::process::Signal::KILL.as_raw(),
                        )),
                    }
                }
            }
        }
    };
    group.disarm();
    if let Some(feeder) = feeder {
        feeder.abort();
    }
    status
}

/// The agent's exit code, its signal, and the session's outcome, from its status.
fn outcome_of(status: std::process::ExitStatus) -> (Option<i32>, Option<i32>, SessionOutcome) {
    let (exit_code, signal) = (status.code(), status.signal());
    (exit_code, signal, outcome(exit_code, signal, 1))
}

/// When devcell is root and the workspace `root` belongs to another user, makes `command` run
/// as that user ([`ownership::hand_over_to`]): its uid and gid, supplementary groups dropped,
/// and `HOME`, `USER`, `LOGNAME` from the host's `/etc/passwd` (`HOME` removed when the uid has
/// no entry). Returns who the agent runs as (`name (uid N)` or `uid N`).
fn run_as_workspace_owner(command: &mut tokio::process::Command, root: &Path) -> String {
    let me = ownership::process_ids();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let name = |uid: u32| crate::engine::passwd::lookup(&passwd, &uid.to_string());
    let Some(ids) = ownership::hand_over_to(me, ownership::owner(root)) else {
        return match name(me.uid) {
            Some(e) => format!("`{}` (uid {})", e.name, me.uid),
            None => format!("uid {}", me.uid),
        };
    };
    command.uid(ids.uid).gid(ids.gid);
    match name(ids.uid) {
        Some(entry) => {
            command
                .env("HOME", &entry.home)
                .env("USER", &entry.name)
                .env("LOGNAME", &entry.name);
            format!("`{}` (uid {}, the workspace's owner)", entry.name, ids.uid)
        }
        None => {
            command.env_remove("HOME");
            let envs: IndexMap<&str, String> = IndexMap::from([
                ("USER", ids.uid.to_string()),
                ("LOGNAME", ids.uid.to_string()),
            ]);
            command.envs(envs);
            format!("uid {} (the workspace's owner)", ids.uid)
        }
    }
}

/// Sends `signal` to the agent's process group, led by `pid` (nothing when it is gone or
/// unknown).
fn signal(pid: Option<u32>, signal: rustix::process::Signal) {
    if let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}
