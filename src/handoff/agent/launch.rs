//! The agent's run in the workspace container: attached as the remote user with its
//! environment (probed, the agent's, the egress upstreams', its secrets, `safe.directory`),
//! started through a pidfile so a stop request signals exactly it, its output pumped masked to
//! the caller and the session log, and a stop signal turned into a bounded stop.

use super::{Handoff, Live, Ran, STOP_GRACE, STOP_REQUEST_DEADLINE};
use crate::diagnostics::SecretMask;
use crate::engine::{ExecInput, ExecOutput, ExecRequest, ExecResult};
use crate::handoff::plan::{Prepared, safe_directories};
use crate::handoff::session::{
    AgentStreams, StopSignal, exec_outcome, note_end, pidfile_of, pump, step_pidfile_of,
    stop_agent, unless_stopped,
};
use crate::handoff::state::SessionLog;
use crate::lifecycle::UserEnvProbe;
use crate::ops::UpResult;
use crate::ops::attach::{Attached, append_safe_directories, attach_running, probed_remote_env};
use crate::ops::error::Result;
use crate::ops::target::id_labels;
use crate::progress::Event;
use indexmap::IndexMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

impl Handoff<'_> {
    /// The session log's first line: which agent runs in which container.
    pub(super) fn log_start(&self, log: &mut SessionLog, live: &Live, up: &UpResult) {
        let _ = writeln!(
            log,
            "# devcell handoff session {}: agent `{}` in container {}",
            live.id, self.opts.agent, up.container_id
        );
    }

    /// The agent, run to its end (or stopped) in the container `up` brought up.
    pub(super) async fn run_agent(
        &self,
        p: &Prepared,
        up: &UpResult,
        live: &mut Live,
        log: SessionLog,
        streams: AgentStreams<'_>,
        stop: &mut StopSignal<'_>,
    ) -> Result<Ran> {
        let (attached, env) = self.attach(p, up, live, stop).await?;
        self.run_steps(p, up, &attached, &env, live, stop).await?;
        let pidfile = pidfile_of(&live.id);
        let request = agent_request(p, &attached, env, &pidfile, self.opts.tty);
        self.reporter.report(Event::Status(format!(
            "launching agent `{}` as `{}` in {} (log {})",
            self.opts.agent,
            attached.remote_user,
            p.cwd,
            live.start.session.log.display()
        )));
        let log = Arc::new(Mutex::new(log));
        let (exec_result, stopped_by) = self
            .exec_until_stopped(live, &attached, &request, &log, streams, stop)
            .await;
        let stopped = stopped_by.is_some();
        // stopped, an exec that failed (its container gone) is the stop's end
        let exec_result = match (exec_result, stopped_by) {
            (Ok(r), _) => r,
            (Err(_), Some(signal)) => signal_result(signal),
            (Err(e), None) => return Err(live.fail(e.into())),
        };
        let code = i32::try_from(exec_result.exit_code).unwrap_or(i32::MAX);
        let (exit_code, signal, outcome) = exec_outcome(code, stopped);
        if exit_code == Some(127) {
            // the usual first failure of a new agent: its program is not in the image
            self.reporter.report(Event::Status(format!(
                "warning: agent `{}` exited 127, the shell's \"command not found\": the workspace's image must contain the agent's program (`--plan` does not look inside the image)",
                self.opts.agent
            )));
        }
        note_end(&log, &outcome);
        // the proxy's decisions made during this session (spec-note 0504)
        let egress = up.egress.as_ref().and_then(|_| {
            let since = chrono::DateTime::parse_from_rfc3339(&live.start.session.started_at)
                .ok()
                .map(|t| t.with_timezone(&chrono::Utc));
            crate::ops::state_folder::default_root()
                .and_then(|state| crate::ops::egress::summary_for(&state, &up.container_id, since))
        });
        Ok(Ran {
            remote_user: attached.remote_user,
            exit_code,
            signal,
            outcome,
            egress,
        })
    }

    /// The lifecycle steps beyond the spec's hooks (`customizations.devcell.afterStart` and
    /// `.onWorkspaceCreate`, spec-note 0538) not yet run for this container or workspace, as
    /// the agent will run (user, folder, environment without its secrets), under the
    /// workspace's steps lock in devcell's state: a group's second member waits for the first.
    /// A stop signal while a step runs stops the step through its pid file (bounded as the
    /// agent's stop is; a second signal stops the waiting) and ends the session as `signaled`
    /// (spec-note 0658).
    async fn run_steps(
        &self,
        p: &Prepared,
        up: &UpResult,
        attached: &Attached,
        env: &IndexMap<String, String>,
        live: &mut Live,
        stop: &mut StopSignal<'_>,
    ) -> Result<()> {
        use crate::handoff::steps;
        let all = steps::Steps::of(&up.loaded.raw).map_err(|e| live.fail(e.into()))?;
        if all.is_empty() {
            return Ok(());
        }
        let key =
            crate::handoff::state::workspace_key(&live.root).map_err(|e| live.fail(e.into()))?;
        let dir =
            steps::records_folder(live.store.root(), &key).map_err(|e| live.fail(e.into()))?;
        let mut env = env.clone();
        for name in p.secrets.keys() {
            env.shift_remove(name);
        }
        let target = steps::StepTarget {
            container_id: &attached.container.id,
            user: attached.exec_user(),
            working_dir: &attached.workspace_folder,
            env,
            pidfile: step_pidfile_of(&live.id),
        };
        let run = steps::run(self.engine, &all, &target, &dir, self.reporter);
        tokio::pin!(run);
        let signal = match unless_stopped(stop, &mut run).await {
            Ok(ran) => {
                live.warnings.extend(ran.map_err(|e| live.fail(e.into()))?);
                return Ok(());
            }
            Err(signal) => signal,
        };
        self.reporter
            .report(Event::Status("stopping the running step".to_string()));
        // as the agent's stop: bounded whatever the engine does; a second signal stops waiting
        let _ = unless_stopped(stop, async {
            let _ = tokio::time::timeout(
                STOP_REQUEST_DEADLINE,
                stop_agent(
                    self.engine,
                    target.container_id,
                    Some(&target.user),
                    &target.pidfile,
                ),
            )
            .await;
            let _ = tokio::time::timeout(STOP_GRACE, &mut run).await;
        })
        .await;
        Err(live.signaled(signal))
    }

    /// The running container, attached with the configuration `up` loaded and judged (a file
    /// swapped since is never read), and the agent's environment: the probed user environment
    /// ⊕ `remoteEnv`, the agent's variables, each egress upstream's in-container base URL, its
    /// secrets, and `safe.directory` for every repository.
    async fn attach(
        &self,
        p: &Prepared,
        up: &UpResult,
        live: &Live,
        stop: &mut StopSignal<'_>,
    ) -> Result<(Attached, IndexMap<String, String>)> {
        let loaded = &up.loaded;
        let labels = id_labels(&p.target, loaded);
        let expected = crate::ops::target::expected_workspace(&p.target, loaded);
        let attached = unless_stopped(
            stop,
            attach_running(
                self.engine,
                loaded,
                &labels,
                expected.as_deref(),
                &self.opts.env,
                UserEnvProbe::default(),
            ),
        )
        .await
        .map_err(|signal| live.signaled(signal))?
        .map_err(|e| live.fail(e))?;
        let mut env = unless_stopped(
            stop,
            probed_remote_env(self.engine, &attached, &IndexMap::new(), self.reporter),
        )
        .await
        .map_err(|signal| live.signaled(signal))?
        .map_err(|e| live.fail(e))?
        .0;
        env.extend(p.agent_env.clone());
        if up.egress.is_some() {
            // each upstream's in-container base URL (its credential stays on the host)
            env.extend(
                crate::ops::egress::upstream_env(
                    &self.opts.settings,
                    &self.opts.agent,
                    crate::egress::channel::DEFAULT_LISTEN_PORT,
                )
                .map_err(|e| live.fail(e))?,
            );
        }
        env.extend(p.secrets.clone());
        // the agent's own context file (a group member's is not the shared path)
        env.insert(
            crate::handoff::context::CONTEXT_VARIABLE.to_string(),
            crate::handoff::repository::normalize_posix(&format!(
                "{}/{}",
                p.workspace.container_root,
                self.context_rel_path(&live.id)
            )),
        );
        append_safe_directories(&mut env, &safe_directories(&p.workspace, &p.gits));
        Ok((attached, env))
    }

    /// The agent's exec, its output pumped (masked) to the caller and the log, until it ends
    /// or a stop signal comes: then the agent is asked to stop, bounded whatever the engine
    /// does (a container removed under the exec), and a second signal stops waiting. Returns
    /// the exec's result and the stop signal, if one came.
    pub(super) async fn exec_until_stopped(
        &self,
        live: &Live,
        attached: &Attached,
        request: &ExecRequest,
        log: &Mutex<SessionLog>,
        streams: AgentStreams<'_>,
        stop: &mut StopSignal<'_>,
    ) -> (crate::engine::Result<ExecResult>, Option<i32>) {
        let opts = self.opts;
        let pidfile = pidfile_of(&live.id);
        let mask = SecretMask::new(live.secrets.values());
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
            Some(sizes) => self
                .engine
                .exec_resizable(&container_id, request, input, output, sizes),
            None => self.engine.exec(&container_id, request, input, output),
        };
        let run = async {
            let (r, _, _) = tokio::join!(
                exec,
                pump(out_r, streams.stdout, log, &mask, opts.tty),
                pump(err_r, streams.stderr, log, &mask, opts.tty)
            );
            r
        };
        tokio::pin!(run);
        match unless_stopped(stop, &mut run).await {
            Ok(r) => (r, None),
            Err(signal) => {
                self.reporter
                    .report(Event::Status(format!("stopping agent `{}`", opts.agent)));
                // bounded whatever the engine does (a container removed under the exec); a
                // second signal stops waiting
                let ended = unless_stopped(stop, async {
                    let _ = tokio::time::timeout(
                        STOP_REQUEST_DEADLINE,
                        stop_agent(
                            self.engine,
                            &container_id,
                            Some(&attached.exec_user()),
                            &pidfile,
                        ),
                    )
                    .await;
                    tokio::time::timeout(STOP_GRACE, &mut run).await.ok()
                })
                .await
                .ok()
                .flatten();
                (ended.unwrap_or(Ok(signal_result(signal))), Some(signal))
            }
        }
    }
}

/// The agent's exec request: its argv behind `sh -c 'echo $$ > <pidfile>; exec "$@"'` (so a
/// stop request signals exactly it; its words reach it unchanged), as the remote user, in the
/// plan's working directory.
pub(super) fn agent_request(
    p: &Prepared,
    attached: &Attached,
    env: IndexMap<String, String>,
    pidfile: &str,
    tty: bool,
) -> ExecRequest {
    let mut argv = vec![
        "sh".to_string(),
        "-c".to_string(),
        "echo $$ > \"$0\" 2>/dev/null; exec \"$@\"".to_string(),
        pidfile.to_string(),
    ];
    argv.extend(p.agent.command.iter().cloned());
    ExecRequest {
        argv,
        user: Some(attached.exec_user()),
        env,
        working_dir: Some(p.cwd.clone()),
        tty,
    }
}

/// The result of an agent ended by `signal` without its own status.
pub(super) fn signal_result(signal: i32) -> ExecResult {
    ExecResult {
        exit_code: 128 + i64::from(signal),
        ..Default::default()
    }
}
