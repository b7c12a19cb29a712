//! `status`: a workspace's container, its handoff sessions and each repository's git state
//! (branch, dirty, ahead/behind), for humans and agents (spec-note 0203).
//!
//! Works without an engine: the container is then reported as unknown, with a warning.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::engine::Engine;
use crate::handoff::repository::{self, InspectOptions};
use crate::handoff::state::{Session, SessionStatus, StateStore, WorkspaceState};
use crate::names::LOCAL_FOLDER_LABEL;
use crate::ops::error::Result;
use crate::settings::Settings;

/// A git entry still in quarantine, as [`StatusResult::quarantined_git`] lists it (the
/// terminal names it through here: it does not reach below `handoff`).
pub use crate::security::git_quarantine::StillQuarantined;

/// Inputs of [`status`].
#[derive(Debug, Clone, Default)]
pub struct StatusOptions {
    /// The workspace root.
    pub workspace_folder: PathBuf,
    /// The user settings (`[handoff]` workspace target and context path).
    pub settings: Settings,
    /// The state folder (`None`: the default).
    pub state_root: Option<PathBuf>,
    /// The mediator group whose mail is shown (`--mail-group NAME`, issue 30); `None`: the
    /// repository's own group.
    pub mail_group: Option<crate::mail::GroupName>,
}

/// The workspace's container as the engine reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    /// Container id.
    pub id: String,
    /// Name.
    pub name: String,
    /// `running`, `exited`, `created`, …
    pub state: String,
    /// Whether it runs.
    pub running: bool,
    /// The image it was created from.
    pub image: String,
}

/// One service container of a Compose workspace's project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// The Compose service (`com.docker.compose.service`).
    pub service: String,
    /// The container.
    #[serde(flatten)]
    pub container: ContainerStatus,
}

/// One session with its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionReport {
    /// The recorded session.
    #[serde(flatten)]
    pub session: Session,
    /// `live`, `ended` or `stale`.
    pub status: SessionStatus,
}

/// One repository's git state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepoStatus {
    /// Folder name.
    pub name: String,
    /// Host path.
    pub host_path: PathBuf,
    /// Container path.
    pub path: String,
    /// `primary` or `secondary`.
    pub role: repository::RepoRole,
    /// Branch, `null` when detached.
    pub branch: Option<String>,
    /// HEAD commit.
    pub head: Option<String>,
    /// Uncommitted changes (staged, unstaged or untracked); `null` when git could not tell.
    pub dirty: Option<bool>,
    /// Upstream branch.
    pub upstream: Option<String>,
    /// Commits ahead of the upstream.
    pub ahead: Option<u32>,
    /// Commits behind the upstream.
    pub behind: Option<u32>,
    /// Why git could not describe this repository (its git fields are then `null`), with
    /// what to do; `null` when git answered (spec-note 0322).
    pub error: Option<String>,
}

/// The result of [`status`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    /// The workspace root (canonical).
    pub workspace: PathBuf,
    /// `repository`, `multiRepository` or `plain`.
    pub layout: repository::Layout,
    /// The container, `null` when none exists (or the engine is unreachable: see warnings).
    pub container: Option<ContainerStatus>,
    /// Whether the engine answered.
    pub engine_reachable: bool,
    /// The container recorded in devcell's state.
    pub recorded_container: Option<String>,
    /// For a Compose configuration: the other containers of the primary container's project
    /// (the sidecars), each with its `service`; absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceStatus>,
    /// The handoff sessions, oldest first.
    pub sessions: Vec<SessionReport>,
    /// The live session, if any.
    pub active_session: Option<String>,
    /// Git state per repository.
    pub repos: Vec<RepoStatus>,
    /// The context file on the host, when it exists.
    pub context_file: Option<PathBuf>,
    /// Under `--network allowlist`: what the container's egress proxy serves and every
    /// destination it decided on, allowed and refused, with counts (spec-note 0504).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<crate::ops::egress::EgressSummary>,
    /// Non-fatal findings as `(code, message)`: `engine_unavailable`, and the workspace's
    /// (`git_unreadable`, …). Only in the envelope's `warnings`, never in `result`.
    #[serde(skip)]
    pub warnings: Vec<(String, String)>,
    /// The clone tasks made from this repository (`handoff --isolation clone`, spec-note
    /// 0437): each with its base, its branch's commit in the clone, what was fetched, and
    /// ahead/behind counted in the repository.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::handoff::session::TaskFetch>,
    /// The mail of this repository's tasks that have any waiting or held (issue 30,
    /// spec-note 0531): unacknowledged and held counts per task.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mail: Vec<crate::handoff::task::mail::TaskMail>,
    /// The mediator group `mail` and `escalations` are of when one was named
    /// (`--mail-group NAME`); absent for the repository's own group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mail_group: Option<String>,
    /// The mail escalation commands due and not yet run, or started without a recorded
    /// outcome (issue 30, spec-note 0533): the host user's view.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub escalations: Vec<crate::handoff::task::mail::PendingEscalation>,
    /// Containers devcell did not create that sessions ran in (`handoff --container`,
    /// spec-note 0524), as the engine reports them: their owner's, never started, stopped or
    /// removed by devcell.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub external_containers: Vec<ContainerStatus>,
    /// The handoff groups whose container is the workspace's (`handoff --group`, spec-note
    /// 0525): name, container, cleanup policy, key, and members with whether each is live.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::handoff::group::GroupStatus>,
    /// The git entries devcell moved aside from this workspace (a `.git` or a git directory
    /// the container or a hook created: `security::git_quarantine`) that are still where it
    /// moved them: where each was, where it is, when (spec-note 0661). The move is said once,
    /// as a warning of the command that made it; this lists it until the user acts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined_git: Vec<crate::security::git_quarantine::StillQuarantined>,
}

impl StatusResult {
    /// What a caller can do next: tear the container down when no session runs, look at a
    /// stale session with `doctor`, or hand the workspace over when nothing exists yet.
    pub fn next_actions(&self) -> Vec<crate::handoff::envelope::NextAction> {
        use crate::handoff::envelope::NextAction;
        let ws = self.workspace.to_string_lossy().into_owned();
        let mut out = Vec::new();
        if self
            .sessions
            .iter()
            .any(|s| s.status == SessionStatus::Stale)
        {
            out.push(NextAction::command(
                "diagnose the stale handoff session",
                ["devcell", "doctor"],
            ));
        }
        if self.container.is_some() && self.active_session.is_none() {
            out.push(NextAction::command(
                "remove the workspace container when the work is reviewed (worktrees are kept)",
                ["devcell", "delete", "--workspace-folder", ws.as_str()],
            ));
        }
        if self.container.is_none() && self.engine_reachable {
            out.push(NextAction::manual(format!(
                "hand the workspace to an agent: `devcell handoff --workspace-folder {ws} --agent NAME`"
            )));
        }
        out
    }
}

/// Reports the workspace's container, sessions and git state.
///
/// Errors: [`crate::ops::OpsError::Product`] (a [`crate::handoff::repository::WorkspaceError`]) when the folder cannot be inspected;
/// `State` when the state is unreadable.
pub async fn status(opts: &StatusOptions) -> Result<StatusResult> {
    let engine = crate::engine::connect().await.ok();
    status_with(engine.as_deref(), opts).await
}

/// [`status`] through `engine` (`None`: no engine reachable).
///
/// Errors: as [`status`].
pub async fn status_with(
    engine: Option<&dyn Engine>,
    opts: &StatusOptions,
) -> Result<StatusResult> {
    let store = match &opts.state_root {
        Some(root) => StateStore::new(root),
        None => StateStore::open_default()?,
    };
    // a `.git` an agent created is described as none of the workspace's repositories (M8)
    let mut inspect = InspectOptions::from_settings(&opts.settings, None);
    if opts.workspace_folder.is_dir() {
        inspect.created_git = store.created_gits(&opts.workspace_folder, &[] as &[&str])?;
    }
    let ws = repository::inspect(&opts.workspace_folder, &inspect)?;
    let state = store.load(&ws.root)?;
    let mut seen = match engine {
        Some(engine) => engine_view(engine, &ws, state.as_ref()).await,
        None => EngineView {
            warnings: vec![(
                "engine_unavailable".to_string(),
                "no container engine is reachable: container state unknown".to_string(),
            )],
            ..EngineView::default()
        },
    };
    let mut warnings = std::mem::take(&mut seen.warnings);
    warnings.extend(
        ws.warnings
            .iter()
            .map(|w| (w.code.clone(), w.message.clone())),
    );
    // a `.git` an agent created, not accepted, named until it is (attack M8)
    for rel in state.iter().flat_map(|s| &s.created_git) {
        if !warnings
            .iter()
            .any(|(_, m)| m.contains(&format!("`{rel}`")))
        {
            warnings.push((
                "git_dir_created".to_string(),
                crate::handoff::git_identity::created_message(rel),
            ));
        }
    }
    // a `.git` the agent made or changed in the workspace (spec-note 0436)
    if let Some(before) = state.as_ref().and_then(|s| s.git_identity.as_ref()) {
        warnings.extend(crate::handoff::git_identity::compare(
            before,
            &crate::handoff::git_identity::record(&ws.root),
        ));
    }
    // set-id files a process left running in the container planted (attack K11): named only
    if seen.container.is_some() {
        warnings.extend(crate::security::planted_after::report(&ws.root));
    }
    let sessions = session_reports(state.as_ref(), &seen);
    let active_session = sessions
        .iter()
        .find(|s| s.status == SessionStatus::Live)
        .map(|s| s.session.id.clone());
    let context_file = ws.root.join(&opts.settings.handoff.context_path);
    let EngineView {
        container,
        services,
        engine_reachable,
        ..
    } = seen;
    let egress = container
        .as_ref()
        .map(|c| c.id.clone())
        .or_else(|| state.as_ref().and_then(|s| s.container_id.clone()))
        .and_then(|id| {
            let root = crate::ops::state_folder::default_root()?;
            crate::ops::egress::summary_for(&root, &id, None)
        });
    let mail = match &opts.mail_group {
        Some(group) => crate::handoff::task::mail::status_of_group(store.root(), group.as_str()),
        None => crate::handoff::task::mail::status_of(&ws.root, store.root()),
    };
    Ok(StatusResult {
        workspace: ws.root.clone(),
        layout: ws.layout,
        container,
        engine_reachable,
        recorded_container: state.as_ref().and_then(|s| s.container_id.clone()),
        services,
        sessions,
        active_session,
        repos: repo_statuses(&ws),
        context_file: context_file.is_file().then_some(context_file),
        egress,
        warnings,
        tasks: crate::handoff::task::run::statuses(&ws.root, store.root()),
        mail: mail.tasks,
        mail_group: opts.mail_group.as_ref().map(|g| g.as_str().to_string()),
        escalations: mail.escalations,
        external_containers: external_statuses(engine, state.as_ref()).await,
        groups: crate::handoff::group::statuses(store.root(), &ws.root),
        quarantined_git: quarantined(store.root(), &ws.root),
    })
}

/// The entries still quarantined from `workspace`, recorded below the state root `state_root`
/// (a handoff's quarantine) and below the default one (`up`, `set-up`, `run-user-commands`
/// write theirs there) when it is another folder.
fn quarantined(
    state_root: &std::path::Path,
    workspace: &std::path::Path,
) -> Vec<crate::security::git_quarantine::StillQuarantined> {
    use crate::security::git_quarantine::still_present;
    let mut out = still_present(state_root, workspace);
    if let Some(default) = crate::ops::state_folder::default_root()
        && default != state_root
    {
        out.extend(still_present(&default, workspace));
    }
    out
}

/// The external containers the sessions name, as the engine reports them (one it no longer
/// has: `state` `gone`; without an engine: `unknown`).
async fn external_statuses(
    engine: Option<&dyn Engine>,
    state: Option<&WorkspaceState>,
) -> Vec<ContainerStatus> {
    let mut out = Vec::new();
    for id in crate::handoff::agent::external_containers(state) {
        let info = match engine {
            Some(engine) => engine.inspect_container(&id).await.ok().flatten(),
            None => None,
        };
        out.push(match info {
            Some(info) => ContainerStatus {
                id: info.id,
                name: info.name,
                state: info.status,
                running: info.running,
                image: info.image,
            },
            None => ContainerStatus {
                state: if engine.is_some() { "gone" } else { "unknown" }.to_string(),
                id,
                name: String::new(),
                running: false,
                image: String::new(),
            },
        });
    }
    out
}

/// The workspace's containers as the engine sees them.
#[derive(Default)]
struct EngineView {
    /// The workspace container (of a Compose workspace: the primary service's).
    container: Option<ContainerStatus>,
    /// A Compose workspace's other services.
    services: Vec<ServiceStatus>,
    /// The ids of the running ones (a session's container under each id it is known by).
    running: HashSet<String>,
    engine_reachable: bool,
    /// `engine_unavailable` when the engine did not answer.
    warnings: Vec<(String, String)>,
}

/// The workspace's containers, asked of `engine`: only containers that bind the workspace
/// are its own (spec-note 0421); sessions may name the container by an id the label lookup
/// did not return.
async fn engine_view(
    engine: &dyn Engine,
    ws: &repository::Workspace,
    state: Option<&WorkspaceState>,
) -> EngineView {
    let mut view = EngineView::default();
    let labels = BTreeMap::from([(
        LOCAL_FOLDER_LABEL.to_string(),
        ws.root.to_string_lossy().into_owned(),
    )]);
    let found = match engine.find_containers(&labels).await {
        // only containers that bind the workspace are its own (spec-note 0421)
        Ok(found) => crate::security::identity::bound_to_workspace(
            engine,
            found,
            std::slice::from_ref(&ws.root),
        )
        .await
        .map(|(bound, _)| bound),
        Err(e) => Err(e),
    };
    match found {
        Ok(found) => {
            view.engine_reachable = true;
            let describe = |c: &crate::engine::ContainerSummary| ContainerStatus {
                id: c.id.clone(),
                name: c.names.first().cloned().unwrap_or_default(),
                state: c.state.clone(),
                running: c.state == "running",
                image: c.image.clone(),
            };
            if let Some(c) = found.iter().find(|c| c.state != "removing") {
                view.container = Some(describe(c));
                view.services = crate::ops::compose::project_siblings(engine, &c.labels, &c.id)
                    .await
                    .unwrap_or_default()
                    .iter()
                    .map(|s| ServiceStatus {
                        service: s
                            .labels
                            .get(crate::engine::compose::SERVICE_LABEL)
                            .cloned()
                            .unwrap_or_default(),
                        container: describe(s),
                    })
                    .collect();
            }
            for c in &found {
                if c.state == "running" {
                    view.running.insert(c.id.clone());
                }
            }
            // sessions may name the container by an id the label lookup did not return
            for id in state
                .iter()
                .flat_map(|s| s.sessions.iter())
                .filter_map(|s| s.container_id.clone())
            {
                if !view.running.contains(&id)
                    && let Ok(Some(info)) = engine.inspect_container(&id).await
                    && info.running
                {
                    view.running.insert(info.id.clone());
                    view.running.insert(id);
                }
            }
        }
        Err(e) => view.warnings.push((
            "engine_unavailable".to_string(),
            format!("the container engine did not answer: {e}"),
        )),
    }
    view
}

/// Each recorded session with its status: live while its container runs (without an engine
/// only the devcell process can be checked) and its devcell process is alive.
fn session_reports(state: Option<&WorkspaceState>, seen: &EngineView) -> Vec<SessionReport> {
    let probe = |id: &str| seen.running.contains(id);
    state
        .map(|s| {
            s.sessions
                .iter()
                .map(|session| SessionReport {
                    status: if seen.engine_reachable {
                        crate::handoff::state::session_status(
                            session,
                            &probe,
                            &crate::handoff::state::process_alive,
                        )
                    } else {
                        // without an engine only the devcell process can be checked
                        crate::handoff::state::session_status(
                            session,
                            &|_: &str| true,
                            &crate::handoff::state::process_alive,
                        )
                    },
                    session: session.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Each repository of the workspace: branch, head, dirty, upstream, ahead and behind.
fn repo_statuses(ws: &repository::Workspace) -> Vec<RepoStatus> {
    ws.repos
        .iter()
        .map(|r| RepoStatus {
            name: r.name.clone(),
            host_path: r.host_path.clone(),
            path: r.container_path.clone(),
            role: r.role,
            branch: r.branch.clone(),
            head: r.head.clone(),
            dirty: r.git_error.is_none().then_some(r.dirty),
            upstream: r.upstream.clone(),
            ahead: r.ahead,
            behind: r.behind,
            error: r.git_error.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec-note 0661: a git entry devcell moved aside from the workspace is listed by
    /// `status` (and in its JSON, `quarantinedGit`) while it is still in quarantine; once
    /// the user moved it back, no more.
    #[tokio::test]
    async fn status_lists_what_is_still_in_quarantine() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("src/.git")).unwrap();
        let state = tmp.path().join("state");
        let into = crate::security::git_quarantine::folder_in(&state);
        crate::security::git_quarantine::quarantine_new(
            &ws,
            &std::collections::BTreeSet::new(),
            &|_| false,
            Some(&into),
        );
        let opts = StatusOptions {
            workspace_folder: ws.clone(),
            state_root: Some(state.clone()),
            ..StatusOptions::default()
        };
        let r = status_with(None, &opts).await.unwrap();
        assert_eq!(r.quarantined_git.len(), 1, "{:?}", r.quarantined_git);
        assert_eq!(r.quarantined_git[0].path, "src/.git");
        assert_eq!(r.quarantined_git[0].moved_to, into.join("src/.git"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["quarantinedGit"][0]["path"], "src/.git", "{json}");
        std::fs::rename(into.join("src/.git"), ws.join("src/.git")).unwrap();
        let r = status_with(None, &opts).await.unwrap();
        assert!(r.quarantined_git.is_empty(), "{:?}", r.quarantined_git);
    }
}
