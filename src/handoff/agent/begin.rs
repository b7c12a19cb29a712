//! The handoff's steps before its container: the plan, the judgement of `up`, the session
//! begun in the state, and each repository's container git directory made ready.

use super::{Handoff, Judged, Live};
use crate::handoff::context::AgentRuntime;
use crate::handoff::plan::{Prepared, plan_lines, prepare, up_options};
use crate::handoff::session::{
    StopSignal, Stopped, close_previous_sessions, running_containers, unless_stopped,
};
use crate::handoff::state::{NewSession, RepoFetchBack, SessionLog, SessionProcess, StateStore};
use crate::ops::UpOptions;
use crate::ops::error::{OpsError, Result};
use crate::ops::up::{judge_up, load_up};
use crate::progress::Event;

/// Before a session exists, a stop signal ends the handoff with nothing to record.
fn stopped_before_session(signal: i32) -> OpsError {
    Stopped {
        signal,
        session: None,
    }
    .into()
}

impl Handoff<'_> {
    /// The plan and everything resolved before anything is created
    /// ([`crate::handoff::plan::prepare`]).
    pub(super) async fn prepare(&self, stop: &mut StopSignal<'_>) -> Result<Prepared> {
        unless_stopped(
            stop,
            prepare(self.opts, Some(self.engine), AgentRuntime::Container),
        )
        .await
        .map_err(stopped_before_session)?
    }

    /// `up`'s options and its judgement. What would reach the host (untrusted git directories,
    /// host commands) is judged before a session, a container or an image exists (spec-notes
    /// 0410, 0411), once: `up` goes on with this judgement and the container found with it,
    /// under its bring-up lock.
    pub(super) async fn judge(
        &self,
        p: &Prepared,
        stop: &mut StopSignal<'_>,
    ) -> Result<(UpOptions, Judged)> {
        let mut up_opts = up_options(p, self.opts);
        let choice = load_up(&up_opts)?;
        crate::ops::load::report_warnings(&choice.loaded, self.reporter);
        // A Compose configuration: the agent runs in the primary service, which gets the
        // handoff's workspace mount beside the files' own volumes; Compose's project network is
        // kept, so a network without a way out is refused rather than claimed (spec-note 0606).
        let compose = choice.loaded.typed.kind() == crate::config::model::ConfigKind::Compose;
        let judged = if compose {
            if let Some(mount) = p
                .target
                .workspace_override
                .as_ref()
                .and_then(|o| o.mount.as_ref())
            {
                up_opts.mounts.insert(0, mount.clone());
            }
            Judged::Compose(Box::new(choice))
        } else {
            Judged::Single(Box::new(
                unless_stopped(
                    stop,
                    judge_up(
                        self.engine,
                        &up_opts,
                        choice,
                        &p.git_requests,
                        self.reporter,
                    ),
                )
                .await
                .map_err(stopped_before_session)??,
            ))
        };
        Ok((up_opts, judged))
    }

    /// The plan's lines, and for a Compose configuration what its network means.
    pub(super) fn report_plan(&self, p: &Prepared, compose: bool) {
        for line in plan_lines(&p.plan) {
            self.reporter.report(Event::Status(line));
        }
        if compose {
            let network = crate::ops::compose_network::ComposeNetwork::of(p.network);
            self.reporter
                .report(Event::Status(network.note().to_string()));
        }
    }

    /// The state store, the workspace root and the session begun in it with `container`
    /// recorded (a live session refuses it unless `replace`); earlier sessions are closed.
    /// Shared by a handoff's own container and an external one.
    pub(super) async fn start_session(
        &self,
        p: &Prepared,
        container: Option<&str>,
    ) -> Result<(
        StateStore,
        std::path::PathBuf,
        crate::handoff::state::SessionStart,
    )> {
        let store = match &self.opts.state_root {
            Some(root) => StateStore::new(root),
            None => StateStore::open_default()?,
        };
        let root = p.workspace.root.clone();
        // Which recorded containers still run (the state module asks synchronously).
        let running = running_containers(self.engine, &store, &root).await;
        let probe = move |id: &str| running.contains(id);
        let new = NewSession {
            group: self.group.map(super::group::Joined::name),
            ..NewSession::in_container(&self.opts.agent, container, self.opts.replace)
        };
        let start = store.begin_session(&root, new, &probe, SessionProcess::current())?;
        if let Some(joined) = self.group {
            joined.set_session(&start.session.id);
        }
        close_previous_sessions(Some(self.engine), &start, self.reporter).await;
        Ok((store, root, start))
    }

    /// The session, begun in the state (a live one refuses it unless `replace`; earlier ones
    /// are closed), and its log.
    pub(super) async fn begin_session(&self, p: &Prepared) -> Result<(Live, SessionLog)> {
        let (store, root, start) = self.start_session(p, None).await?;
        let log = store.create_log(&start.session.id)?;
        let root_open_to_others = {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::symlink_metadata(&root).is_ok_and(|m| m.permissions().mode() & 0o002 != 0)
        };
        Ok((Live::new(p, (store, root, start), root_open_to_others), log))
    }

    /// Each repository's container git directory: what an earlier session left there comes
    /// back first, then it is rewritten from the host; then what changed in the workspace's
    /// `.git` entries since the last handoff is warned about, and the new record kept
    /// (spec-note 0436).
    ///
    /// A member of a handoff group whose other members run leaves the container git
    /// directories as they are: their agents use them (spec-note 0525).
    pub(super) fn refresh_container_gits(&self, p: &Prepared, live: &mut Live) -> Result<()> {
        if let Some(others) = self.shared_with_others() {
            let message = format!("the container git directories are shared as they are: {others}");
            self.reporter.report(Event::Status(message.clone()));
            live.warnings.push(message);
            return Ok(());
        }
        let mut earlier = Vec::new();
        let mut git_findings = Vec::new();
        let budget = self.fetch_budget();
        for g in &p.gits {
            let back = g
                .prepare(&live.id, &budget)
                .map_err(|e| live.fail(e.into()))?;
            if let Some(why) = &back.refused {
                let message = format!("repository `{}`: {why}", g.repo);
                self.reporter
                    .report(Event::Status(format!("warning: {message}")));
                git_findings.push(message);
            }
            if !back.is_empty() {
                earlier.push(RepoFetchBack {
                    repo: g.repo.clone(),
                    result: back,
                });
            }
        }
        live.store
            .add_git(&live.root, &live.id, earlier)
            .map_err(|e| live.fail(e.into()))?;
        // the plan's walk, when it made one (the walk at the end is this session's own)
        let identity = p
            .git_identity
            .clone()
            .unwrap_or_else(|| crate::handoff::git_identity::record(&live.root));
        if let Some(before) = live
            .store
            .load(&live.root)
            .ok()
            .flatten()
            .and_then(|s| s.git_identity)
        {
            for (code, message) in crate::handoff::git_identity::compare(&before, &identity) {
                self.reporter
                    .report(Event::Status(format!("warning: {message}")));
                git_findings.push(format!("{code}: {message}"));
            }
        }
        live.store
            .set_git_identity(&live.root, identity)
            .map_err(|e| live.fail(e.into()))?;
        live.warnings.extend(git_findings);
        Ok(())
    }
}
