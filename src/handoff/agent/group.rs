//! A handoff of a group (`--group NAME`, spec-note 0525): it joins the group before its session
//! (refused, nothing begun, when its key or policy is not the group's), records its session and
//! the group's container, leaves the container running and its git directories as they are
//! while another member runs, and on leaving removes the container under `on-exit` when it was
//! the last live member ([`crate::handoff::group`]).

use super::Handoff;
use crate::engine::Engine;
use crate::handoff::group::{self, GroupKey, GroupRequest, GroupStore, Leave};
use crate::handoff::plan::Prepared;
use crate::handoff::state::{StateStore, process_alive, process_start_time};
use crate::ops::error::Result;
use crate::progress::{Event, Reporter};

/// This handoff's membership of its group.
pub(super) struct Joined {
    groups: GroupStore,
    request: GroupRequest,
    /// This devcell's pid: the member's identity in the record.
    pid: u32,
    /// The handoff state (the workspace's container is forgotten there when it is removed).
    state: StateStore,
    workspace: std::path::PathBuf,
}

impl Handoff<'_> {
    /// Joins the group of `--group`, if any: the handoff's key (from its plan) against the
    /// group's, its policy, and the workspace's container against the group's
    /// ([`group::admit`]), then this devcell recorded as a member, under the group's lock.
    ///
    /// Errors: [`group::GroupError`] (exit 2 for a refusal), before any session exists.
    pub(super) fn join_group(&self, p: &Prepared) -> Result<Option<Joined>> {
        let Some(request) = &self.opts.group else {
            return Ok(None);
        };
        let state = match &self.opts.state_root {
            Some(root) => StateStore::new(root),
            None => StateStore::open_default()?,
        };
        let groups = GroupStore::new(state.root());
        let config_sha256 = p
            .plan
            .config_file
            .as_deref()
            .and_then(crate::ops::create::config_sha256);
        let key = GroupKey::of(&p.plan, config_sha256.as_deref());
        let pid = std::process::id();
        let member = (pid, process_start_time(pid));
        groups.update(&request.name, |record| {
            group::admit(
                record.as_ref(),
                request,
                &key,
                p.plan.container.id.as_deref(),
                &process_alive,
            )?;
            group::join(
                record,
                request,
                &p.workspace.root,
                &key,
                member,
                &process_alive,
            );
            Ok(())
        })?;
        self.reporter.report(Event::Status(format!(
            "joined handoff group `{}` (cleanup {})",
            request.name, request.cleanup
        )));
        Ok(Some(Joined {
            groups,
            request: request.clone(),
            pid,
            state,
            workspace: p.workspace.root.clone(),
        }))
    }
}

impl Joined {
    /// The group's name.
    pub(super) fn name(&self) -> &str {
        self.request.name.as_str()
    }

    /// Records this member's session. A failure is left to the member's pid, which the
    /// record has already.
    pub(super) fn set_session(&self, session: &str) {
        let _ = self.groups.update(&self.request.name, |r| {
            if let Some(m) = r.as_mut().and_then(|r| {
                r.members
                    .iter_mut()
                    .rfind(|m| m.pid == self.pid && m.ended_at.is_none())
            }) {
                m.session = Some(session.to_string());
            }
            Ok(())
        });
    }

    /// Records the group's container, as its member brought it up.
    pub(super) fn set_container(&self, container: &str) {
        let _ = self.groups.update(&self.request.name, |r| {
            if let Some(r) = r.as_mut() {
                r.container_id = Some(container.to_string());
            }
            Ok(())
        });
    }

    /// The other members still live (their sessions, else `pid N`): while there is one, the
    /// container keeps running and its git directories are theirs.
    pub(super) fn others_live(&self) -> Vec<String> {
        let record = self.groups.load(&self.request.name).ok().flatten();
        record
            .map(|r| {
                r.live_members(&process_alive)
                    .filter(|m| m.pid != self.pid)
                    .map(|m| {
                        m.session
                            .clone()
                            .unwrap_or_else(|| format!("pid {}", m.pid))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Ends this member (whatever became of its handoff) and, under `on-exit` when it was the
    /// last live member, removes the group's container as `delete` does (stopped, then removed
    /// with its anonymous volumes and its egress proxy; never the workspace). Returns what the
    /// user should know, one warning each.
    pub(super) async fn leave(&self, engine: &dyn Engine, reporter: &dyn Reporter) -> Vec<String> {
        let decided = self.groups.update(&self.request.name, |r| {
            Ok(match r.as_mut() {
                Some(r) => group::leave(r, self.pid, None, &process_alive),
                None => Leave::Keep,
            })
        });
        let container = match decided {
            Ok(Leave::Remove(c)) => c,
            Ok(Leave::OthersLive(others)) => {
                reporter.report(Event::Status(format!(
                    "handoff group `{}`: its container stays for {}",
                    self.name(),
                    others.join(", ")
                )));
                return Vec::new();
            }
            Ok(Leave::Keep) => return Vec::new(),
            Err(e) => return vec![format!("handoff group `{}`: {e}", self.name())],
        };
        reporter.report(Event::Status(format!(
            "handoff group `{}`: the last member ended; removing its container {} (cleanup on-exit)",
            self.name(),
            &container[..container.len().min(12)]
        )));
        let _ = engine
            .stop_container(&container, Some(std::time::Duration::from_secs(10)))
            .await;
        if let Err(e) = engine.remove_container(&container, true).await {
            return vec![format!(
                "handoff group `{}`: its container {} was not removed: {e}; `devcell delete` removes it",
                self.name(),
                &container[..container.len().min(12)]
            )];
        }
        crate::ops::egress::stop_for_containers(
            self.state.root(),
            std::slice::from_ref(&container),
        )
        .await;
        let _ = self.state.update(&self.workspace, |s| {
            if s.container_id.as_deref() == Some(container.as_str()) {
                s.container_id = None;
            }
            Ok(())
        });
        Vec::new()
    }
}
