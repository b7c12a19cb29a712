//! The handoff's end: the workspace container stopped and confirmed stopped (what the agent
//! left running ends with it, [`crate::handoff::quiesce`]), the agent's commits fetched back,
//! the session ended in the state, and the handoff's result.

use super::{Handoff, Live, Ran, Recorded, Written, fetch_back_lines};
use crate::handoff::context::AgentRuntime;
use crate::handoff::plan::Prepared;
use crate::handoff::session::HandoffResult;
use crate::handoff::state::RepoFetchBack;
use crate::ops::UpResult;
use crate::ops::error::Result;
use crate::progress::Event;

impl Handoff<'_> {
    /// What the agent left running (a `setsid` loop) ends with the containers that can write
    /// the container git directories: the fetch-back reads them only once they are confirmed
    /// stopped; else the next handoff brings the commits back (spec-note 0436). A session
    /// replaced meanwhile (`--replace`) leaves the container to its successor, which runs its
    /// agent there, and stops it and fetches back at its own end. Returns whether the
    /// container is confirmed stopped.
    pub(super) async fn stop_workspace(&self, up: &UpResult, live: &mut Live) -> bool {
        if live.replaced() {
            return false;
        }
        // the last member of a group stops it and brings every member's commits back
        if let Some(others) = self.shared_with_others() {
            let message = format!(
                "the workspace container keeps running: {others}; the last of them stops it and brings the agents' commits back"
            );
            self.reporter.report(Event::Status(message.clone()));
            live.warnings.push(message);
            return false;
        }
        self.reporter.report(Event::Status(
            "stopping the workspace container (what the agent left running ends with it)"
                .to_string(),
        ));
        match crate::handoff::quiesce::stop_workspace(self.engine, &up.container_id).await {
            Ok(_) => true,
            Err(e) => {
                let message = format!(
                    "{e}; the agent's commits were not brought back (the next handoff brings them)"
                );
                self.reporter
                    .report(Event::Status(format!("warning: {message}")));
                live.warnings.push(message);
                false
            }
        }
    }

    /// Under `hardened`, once the container is `quiet`: the workspace, and every other folder
    /// the handoff bound read-write (a worktree or repository outside the root, a container
    /// git directory), scanned for set-uid/set-gid files and folders (their bits cleared) and
    /// device nodes the container left, each a warning ([`crate::security::planted`];
    /// spec-note 0400, "the image's groups").
    pub(super) fn scan_planted(
        &self,
        p: &Prepared,
        live: &mut Live,
        quiet: bool,
    ) -> Vec<crate::security::planted::Planted> {
        if !quiet || p.profile != crate::settings::Profile::Hardened {
            return Vec::new();
        }
        let writable: Vec<std::path::PathBuf> = p
            .plan
            .mounts
            .iter()
            .filter(|m| !m.read_only)
            .map(|m| std::path::PathBuf::from(&m.source))
            .collect();
        let found = crate::security::planted::scan_and_clear_each(
            &live.root,
            &writable,
            crate::security::planted::ScanOptions {
                other_writable: !live.root_open_to_others,
                ..Default::default()
            },
        );
        for f in &found {
            let message = f.message(&live.root);
            // a folder the scan could not look into is an error line (attack L4)
            let level = if f.is_error() { "error" } else { "warning" };
            self.reporter
                .report(Event::Status(format!("{level}: {message}")));
            live.warnings.push(message);
        }
        found
    }

    /// The agent's commits come back (also after a stop request) once the container is
    /// `quiet`: never with the container git directory's configuration (spec-note 0436). What
    /// the host did not take is a warning; the rest is news.
    pub(super) fn fetch_back(&self, p: &Prepared, live: &mut Live, quiet: bool) {
        let mut fetched = Vec::new();
        let budget = self.fetch_budget();
        for g in p.gits.iter().filter(|_| quiet) {
            match g.dir().fetch_back_within(&g.host(), &live.id, &budget) {
                Ok(back) if back.is_empty() => {}
                Ok(back) => {
                    let kept = back.kept.len();
                    let lines = fetch_back_lines(&g.repo, &back);
                    let first_kept = back.fast_forwarded.len() + back.created.len();
                    for (i, line) in lines.into_iter().enumerate() {
                        self.reporter.report(Event::Status(line.clone()));
                        if i >= first_kept && i < first_kept + kept {
                            live.warnings.push(line);
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
                    self.reporter
                        .report(Event::Status(format!("warning: {message}")));
                    live.warnings.push(message);
                }
            }
        }
        let _ = live.store.add_git(&live.root, &live.id, fetched);
    }

    /// The session ended in the state with the agent's outcome and the proxy's decisions made
    /// during its run, and the handoff's result (with what the scan of set-id files and the
    /// last look at the `.git` entries found).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &self,
        p: Prepared,
        up: UpResult,
        live: Live,
        recorded: Recorded,
        written: Written,
        ran: Ran,
        (planted, git_dirs): (
            Vec<crate::security::planted::Planted>,
            Vec<crate::handoff::git_identity::GitDirChange>,
        ),
    ) -> Result<HandoffResult> {
        let session = live
            .store
            .end_session_with(&live.root, &live.id, ran.outcome, ran.egress)?;
        let mut plan = p.plan;
        let permissions: Vec<_> = p
            .git_requests
            .iter()
            .cloned()
            .chain(up.permissions.iter().cloned())
            .collect();
        plan.permissions = crate::handoff::plan::listed_once(permissions.clone());
        plan.host_env = up.host_env.clone();
        let start = live.start;
        Ok(HandoffResult {
            plan,
            session,
            abandoned_sessions: start.abandoned.iter().map(|s| s.id.clone()).collect(),
            replaced_session: start.replaced.as_ref().map(|s| s.id.clone()),
            container_id: Some(up.container_id),
            container_action: Some(up.action),
            remote_user: ran.remote_user,
            runtime: AgentRuntime::Container,
            isolation: AgentRuntime::Container.isolation().to_string(),
            permissions,
            lifecycle: up.lifecycle,
            context_file: written.context_file,
            agents_md: written.agents_md,
            exit_code: ran.exit_code,
            signal: ran.signal,
            network: recorded.network.to_string(),
            warnings: live
                .warnings
                .into_iter()
                .chain(up.warnings.iter().map(ToString::to_string))
                .collect(),
            shown_warnings: up.warnings[..up.shown_warnings.min(up.warnings.len())]
                .iter()
                .map(ToString::to_string)
                .collect(),
            task: None,
            tasks: Vec::new(),
            set_id_files_and_devices: planted,
            git_dir_changes: git_dirs,
        })
    }
}
