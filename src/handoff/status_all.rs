//! `status --all`: every workspace devcell knows on this machine, read from its state folder
//! (issue 27; spec-note 0439): each workspace's recorded container and last session, its
//! clone tasks (name, state, branch, container, what was fetched and when) and the mail its
//! tasks have waiting or held for the user, with the escalations not yet run.
//!
//! It reads devcell's state and the repositories' refs only: no container engine is asked
//! (a container is the id devcell recorded; a session is `live` while the devcell process that
//! runs it is), nothing is created or changed, and one unreadable record hides nothing else.
//! The JSON shape is documented in `docs/handoff.md` ("Every workspace: `status --all`").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::handoff::session::TaskFetch;
use crate::handoff::state::{
    Session, SessionOutcome, SessionStatus, StateStore, WorkspaceState, process_alive,
    session_status,
};
pub use crate::handoff::task::RepositoryState;
use crate::handoff::task::mail::{MailStatus, PendingEscalation, TaskMail};
use crate::handoff::task::{self, TaskRecord};
use crate::ops::error::Result;

/// The result of [`status_all`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllStatus {
    /// The state folder read.
    pub state_root: PathBuf,
    /// Every workspace devcell has state or clone tasks for, by path.
    pub workspaces: Vec<WorkspaceEntry>,
    /// Mail groups no listed workspace names (a `--mail-group NAME`, or a workspace whose
    /// state is gone), each with its mail waiting or held; absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mail_groups: Vec<GroupMail>,
    /// Records that could not be read, as `(code, message)` (`state_unreadable`): in the
    /// envelope's `warnings` only.
    #[serde(skip)]
    pub warnings: Vec<(String, String)>,
}

/// One workspace in [`AllStatus`].
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceEntry {
    /// The workspace root (canonical, as recorded).
    pub workspace: PathBuf,
    /// Whether that folder exists now.
    pub exists: bool,
    /// The workspace's container as devcell recorded it (`null`: none, or removed by `delete`).
    pub container: Option<String>,
    /// The workspace's own last handoff session (`null`: none).
    pub last_session: Option<LastSession>,
    /// Its clone tasks, by name.
    pub tasks: Vec<TaskEntry>,
    /// Per task with any, the messages not finished and those held for the user.
    pub mail: Vec<TaskMail>,
    /// The mail escalation commands due and not run, or started without an outcome.
    pub escalations: Vec<PendingEscalation>,
}

/// A session as `status --all` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastSession {
    /// The session id.
    pub id: String,
    /// The agent's name.
    pub agent: String,
    /// `live`, `ended` or `stale` (judged by the devcell process alone: no engine is asked).
    pub status: SessionStatus,
    /// Start time (RFC 3339, UTC).
    pub started_at: String,
    /// End time; `null` while live or stale.
    pub ended_at: Option<String>,
    /// How it ended (`kind`: `exited`, `signaled`, `failed`, `replaced`, `abandoned`).
    pub outcome: Option<SessionOutcome>,
}

/// Where a clone task stands: its last session's [`SessionStatus`], or `new` before any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TaskState {
    /// No session recorded yet (made, never run, or its session state removed).
    New,
    /// Its handoff runs (its devcell process is alive).
    Live,
    /// Its last handoff ended (see `lastSession.outcome`).
    Ended,
    /// Its last handoff's devcell was killed before recording an end: `fetch --task` brings
    /// the committed work back.
    Stale,
}

/// One clone task in a [`WorkspaceEntry`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskEntry {
    /// The task's name.
    pub task: String,
    /// Where it stands.
    pub state: TaskState,
    /// Its branch in the clone (`devcell/<task>`).
    pub branch: String,
    /// Its container as recorded (`null`: none yet, or removed).
    pub container: Option<String>,
    /// Its last session (`null`: none).
    pub last_session: Option<LastSession>,
    /// When it was made (RFC 3339).
    pub created_at: String,
    /// Whether the repository it was made from is still at its path: `present`, `replaced`
    /// (another repository is there now) or `gone`. A task of a replaced or gone repository
    /// cannot be fetched or continued; `devcell prune --tasks` removes it once nothing would be
    /// lost (`doctor` names it).
    pub repository: RepositoryState,
    /// Per repository (one for a single repository): the branch's commit, what was fetched,
    /// ahead and behind, as `status` shows them, and `fetchedAt`.
    pub repos: Vec<TaskRepo>,
}

/// One repository of a task: [`TaskFetch`] and when it was last fetched.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRepo {
    /// The fetch state (`repo` absent for a single repository).
    #[serde(flatten)]
    pub fetch: TaskFetch,
    /// When devcell last fetched the branch (RFC 3339; `null`: never).
    pub fetched_at: Option<String>,
}

/// The mail of a group no listed workspace names.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupMail {
    /// The group's name (`<state>/mail/<group>/`).
    pub group: String,
    /// As [`WorkspaceEntry::mail`].
    pub mail: Vec<TaskMail>,
    /// As [`WorkspaceEntry::escalations`].
    pub escalations: Vec<PendingEscalation>,
}

/// Every workspace of the state folder `state_root` (`None`: the default), as [`AllStatus`].
///
/// Errors: [`crate::handoff::state::StateError`] when no state folder is known or its
/// `workspaces` folder cannot be listed; a record that cannot be read is a warning.
pub fn status_all(state_root: Option<&Path>) -> Result<AllStatus> {
    let store = match state_root {
        Some(root) => StateStore::new(root),
        None => StateStore::open_default()?,
    };
    let root = store.root().to_path_buf();
    let (states, errors) = store.list()?;
    let mut warnings: Vec<(String, String)> = errors
        .iter()
        .map(|e| ("state_unreadable".to_string(), e.to_string()))
        .collect();
    // a clone task's own workspace is its clone, under `<state>/tasks/`: shown with its task
    let tasks_dir = std::fs::canonicalize(root.join("tasks")).unwrap_or(root.join("tasks"));
    let (task_states, own_states): (Vec<_>, Vec<_>) = states
        .into_iter()
        .partition(|s| s.workspace.starts_with(&tasks_dir));
    let task_states: BTreeMap<PathBuf, WorkspaceState> = task_states
        .into_iter()
        .map(|s| (s.workspace.clone(), s))
        .collect();
    let mut entries: BTreeMap<PathBuf, (WorkspaceEntry, BTreeSet<String>)> = BTreeMap::new();
    for state in own_states {
        let entry = entry_for(&mut entries, &state.workspace);
        entry.0.container = state.container_id.clone();
        entry.0.last_session = state.last_session().map(last_session);
    }
    for (key, tasks) in task_folders(&root, &mut warnings) {
        for records in tasks {
            let record = &records[0];
            let owner = record.workspace.clone().unwrap_or(record.source.clone());
            let entry = entry_for(&mut entries, &owner);
            entry.1.insert(key.clone());
            entry
                .1
                .extend(records.iter().map(|r| task::source_key(&r.source_git_dir)));
            let state = task_states.get(&record.workspace_folder());
            entry.0.tasks.push(task_entry(&records, state));
        }
    }
    let mut groups = mail_groups(&root);
    for (entry, keys) in entries.values_mut() {
        // a workspace without tasks may still have a channel (`handoff --mail`): its key
        if keys.is_empty()
            && entry.exists
            && let Ok((_, key)) = task::source::locate(&entry.workspace)
        {
            keys.insert(key);
        }
        for key in keys.iter() {
            if let Some(mail) = groups.remove(key) {
                entry.mail.extend(mail.tasks);
                entry.escalations.extend(mail.escalations);
            }
        }
    }
    Ok(AllStatus {
        state_root: root,
        workspaces: entries.into_values().map(|(e, _)| e).collect(),
        mail_groups: groups
            .into_iter()
            .map(|(group, m)| GroupMail {
                group,
                mail: m.tasks,
                escalations: m.escalations,
            })
            .collect(),
        warnings,
    })
}

/// The entry of `workspace`, made empty when it is not there yet.
fn entry_for<'a>(
    entries: &'a mut BTreeMap<PathBuf, (WorkspaceEntry, BTreeSet<String>)>,
    workspace: &Path,
) -> &'a mut (WorkspaceEntry, BTreeSet<String>) {
    entries.entry(workspace.to_path_buf()).or_insert_with(|| {
        (
            WorkspaceEntry {
                workspace: workspace.to_path_buf(),
                exists: workspace.is_dir(),
                ..WorkspaceEntry::default()
            },
            BTreeSet::new(),
        )
    })
}

/// Every `<state>/tasks/<key>/` with its tasks ([`task::list_all_tasks`]: those of a
/// repository replaced or gone since included, [`TaskEntry::repository`] says so).
fn task_folders(
    root: &Path,
    warnings: &mut Vec<(String, String)>,
) -> Vec<(String, Vec<Vec<TaskRecord>>)> {
    let dir = root.join("tasks");
    let mut keys: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            warnings.push((
                "state_unreadable".to_string(),
                format!("cannot list `{}`: {e}", dir.display()),
            ));
            Vec::new()
        }
    };
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let tasks = task::list_all_tasks(root, &key);
            (key, tasks)
        })
        .filter(|(_, tasks)| !tasks.is_empty())
        .collect()
}

/// One task: its state from its clone's workspace state, its fetch state per repository (of
/// a replaced or gone repository: as recorded, since the repository at its path, if any, is
/// not the task's to ask).
fn task_entry(records: &[TaskRecord], state: Option<&WorkspaceState>) -> TaskEntry {
    let record = &records[0];
    let repository = RepositoryState::of(records);
    let last = state
        .and_then(WorkspaceState::last_session)
        .map(last_session);
    TaskEntry {
        task: record.task.clone(),
        state: match last.as_ref().map(|s| s.status) {
            None => TaskState::New,
            Some(SessionStatus::Live) => TaskState::Live,
            Some(SessionStatus::Ended) => TaskState::Ended,
            Some(SessionStatus::Stale) => TaskState::Stale,
        },
        branch: record.branch.clone(),
        container: state.and_then(|s| s.container_id.clone()),
        last_session: last,
        created_at: record.created_at.clone(),
        repository,
        repos: records
            .iter()
            .map(|r| TaskRepo {
                fetch: match repository {
                    RepositoryState::Present => {
                        task::fetch::report(r, task::fetch::clone_tip(r), false)
                    }
                    _ => as_recorded(r),
                },
                fetched_at: r.fetched_at.clone(),
            })
            .collect(),
    }
}

/// The fetch state of `record` as its record and clone say, asking no repository at its
/// source path (ahead and behind unknown).
fn as_recorded(record: &TaskRecord) -> TaskFetch {
    TaskFetch {
        task: record.task.clone(),
        repo: record.workspace.as_ref().map(|_| record.repo.clone()),
        ref_name: task::fetched_ref_of(&record.task),
        tip: task::fetch::clone_tip(record),
        fetched: record.fetched.clone(),
        updated: false,
        base: record.base.clone(),
        ahead: None,
        behind: None,
        kept: None,
        refused: record.refused.clone(),
    }
}

/// A session with its status judged by its devcell process alone (no engine is asked).
fn last_session(s: &Session) -> LastSession {
    LastSession {
        id: s.id.clone(),
        agent: s.agent.clone(),
        status: session_status(s, &|_: &str| true, &process_alive),
        started_at: s.started_at.clone(),
        ended_at: s.ended_at.clone(),
        outcome: s.outcome.clone(),
    }
}

/// Every mail group with a log, by name, with its mail ([`task::mail::status_of_group`]);
/// groups with nothing waiting, held or due are left out.
fn mail_groups(root: &Path) -> BTreeMap<String, MailStatus> {
    std::fs::read_dir(root.join("mail"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .map(|group| {
            let mail = task::mail::status_of_group(root, &group);
            (group, mail)
        })
        .filter(|(_, m)| !m.tasks.is_empty() || !m.escalations.is_empty())
        .collect()
}

#[cfg(test)]
mod tests;
