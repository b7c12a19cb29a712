//! The mail channel of a clone task's handoff (issue 30; spec-note 0531): the tasks of one
//! repository share a mediator (their group is the repository's task key, [`source_key`] of
//! its common git directory, so `devcell mail` on the host finds it from the workspace); each
//! task's handoff registers it, serves its own socket for as long as the handoff runs, and
//! ends it when the handoff ends.

use std::path::Path;

use super::{TaskRecord, source_key};
use crate::handoff::door::{DoorError, DoorRequest};
use crate::mail::{Bounds, GroupName, Mediator, Policy, TaskName};
use crate::settings::MailSettings;

/// The group of a task's repository: its task key.
///
/// Errors: [`DoorError::Mail`] (never for a key: 32 hex digits are a valid name).
pub fn group_of(record: &TaskRecord) -> Result<GroupName, DoorError> {
    Ok(GroupName::new(&source_key(&record.source_git_dir))?)
}

/// The channel a clone task's handoff opens once its session has begun
/// ([`DoorRequest::open`]): its group (`named`, from `handoff --mail-group`, else the
/// repository's), its name and branch, `devcell-mail` installed and its socket folder made.
///
/// Errors: [`DoorError`] (a file not made); nothing runs then.
pub fn request(
    state_root: &Path,
    record: &TaskRecord,
    named: Option<&GroupName>,
) -> Result<DoorRequest, DoorError> {
    let group = match named {
        Some(group) => group.clone(),
        None => group_of(record)?,
    };
    DoorRequest::prepare(
        state_root,
        group,
        TaskName::new(&record.task)?,
        Some(record.branch.clone()),
    )
    .map(|door| door.owned_by(&record.folder()))
}

pub use crate::handoff::door::agent_text;

/// Removes the socket folder of the deleted task of `record` (issue 27; left behind before),
/// unless a channel of its name is open now. Best effort: a folder left is a few KiB that the
/// next task of the name reuses.
pub fn forget_channel(state_root: &Path, record: &TaskRecord) {
    if let Ok(group) = group_of(record) {
        let _ = crate::handoff::door::channel::remove_socket_folder(
            state_root,
            group.as_str(),
            &record.task,
        );
    }
}

/// One task's mail as `status` shows it (spec-note 0531): what waits for it and what policy
/// holds for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskMail {
    /// The task.
    pub task: String,
    /// Messages to it not yet done with: queued, delivered, or read while an ack is awaited.
    pub unacknowledged: u64,
    /// Messages to it held by policy for the user (`devcell mail forward` or `reject`).
    pub held: u64,
    /// Of those held, the escalated ones.
    pub escalated: u64,
}

/// An escalated message whose user command (`[mail] escalate_command`, spec-note 0533) is due
/// and not yet run, or was started by a devcell that ended before recording its outcome: what
/// `status` lists for the host user (never a task's view).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingEscalation {
    /// The message id (`devcell mail show ID`).
    pub id: String,
    /// Its sender.
    pub from: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The recipients policy escalated it to.
    pub to: Vec<String>,
    /// `pending` (due, not run yet) or `started` (no outcome recorded).
    pub state: crate::mail::EscalationState,
    /// When it was started (`started` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// What `devcell mail show` says of it.
    pub description: String,
}

/// The mail part of `status` for one repository: per task, what waits and what is held; the
/// escalations not run or without an outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailStatus {
    /// Per task with any waiting or held message.
    pub tasks: Vec<TaskMail>,
    /// Escalation commands due or started without an outcome, oldest message first.
    pub escalations: Vec<PendingEscalation>,
}

/// The mail of every task of the repository at `workspace` that has any, by task; empty when
/// the repository has no mediator log (nothing is created). A log that cannot be read counts
/// nothing (`devcell mail list` shows the error).
pub fn statuses(workspace: &Path, state_root: &Path) -> Vec<TaskMail> {
    status_of(workspace, state_root).tasks
}

/// [`statuses`] and the pending escalations (the host user's view, read from the group's log
/// as `devcell mail list` reads it; nothing is created or run).
pub fn status_of(workspace: &Path, state_root: &Path) -> MailStatus {
    let views = host_views(workspace, state_root);
    MailStatus {
        tasks: task_mail(&views),
        escalations: pending_escalations(&views),
    }
}

/// The mail log of the group of the workspace at `workspace` (its repository's key, as
/// `devcell mail` finds it), when it exists: what `delete` keeps and names (spec-note 0534).
pub fn log_of(workspace: &Path, state_root: &Path) -> Option<std::path::PathBuf> {
    let (_, key) = super::source::locate(workspace).ok()?;
    let log = state_root.join("mail").join(&key).join("log.jsonl");
    log.is_file().then_some(log)
}

/// Every message of the repository's group (the host user's view); empty without a log.
fn host_views(workspace: &Path, state_root: &Path) -> Vec<crate::mail::MessageView> {
    let Ok((_, key)) = super::source::locate(workspace) else {
        return Vec::new();
    };
    group_views(state_root, &key)
}

/// [`status_of`] for the mail group named `group` (`status --all`, which reads every group of
/// the state folder); empty for a name that is no group or has no log.
pub fn status_of_group(state_root: &Path, group: &str) -> MailStatus {
    let views = group_views(state_root, group);
    MailStatus {
        tasks: task_mail(&views),
        escalations: pending_escalations(&views),
    }
}

/// Every message of the group `group` (the host user's view); empty without a log.
fn group_views(state_root: &Path, group: &str) -> Vec<crate::mail::MessageView> {
    let Ok(group) = GroupName::new(group) else {
        return Vec::new();
    };
    if !state_root
        .join("mail")
        .join(group.as_str())
        .join("log.jsonl")
        .is_file()
    {
        return Vec::new();
    }
    let settings = MailSettings::default();
    let Ok(policy) = Policy::from_settings(&settings) else {
        return Vec::new();
    };
    Mediator::open(state_root, &group, policy, Bounds::from_settings(&settings))
        .and_then(|m| m.list())
        .unwrap_or_default()
}

fn task_mail(views: &[crate::mail::MessageView]) -> Vec<TaskMail> {
    use crate::mail::RecipientState as S;
    let mut by_task = std::collections::BTreeMap::<String, TaskMail>::new();
    for v in views {
        for (task, d) in &v.recipients {
            let entry = by_task.entry(task.to_string()).or_insert_with(|| TaskMail {
                task: task.to_string(),
                ..TaskMail::default()
            });
            match d.state {
                S::Held => {
                    entry.held += 1;
                    entry.escalated += u64::from(d.escalated);
                }
                S::Queued | S::Delivered => entry.unacknowledged += 1,
                S::Read if v.message.ack_required => entry.unacknowledged += 1,
                _ => {}
            }
        }
    }
    by_task
        .into_values()
        .filter(|t| t.unacknowledged + t.held > 0)
        .collect()
}

fn pending_escalations(views: &[crate::mail::MessageView]) -> Vec<PendingEscalation> {
    use crate::mail::EscalationState as E;
    views
        .iter()
        .filter_map(|v| {
            let e = v.escalation.as_ref()?;
            // a pending one runs only while an escalated recipient is still held: once the
            // user forwarded or rejected it, it is no longer due
            let held = v
                .recipients
                .values()
                .any(|d| d.escalated && d.state == crate::mail::RecipientState::Held);
            let shown = match e.state {
                E::Pending => held,
                E::Started => true,
                E::Ran => false,
            };
            shown.then(|| PendingEscalation {
                id: v.message.id.to_string(),
                from: v.message.from.to_string(),
                kind: v.message.kind.as_str().to_string(),
                to: v
                    .recipients
                    .iter()
                    .filter(|(_, d)| d.escalated)
                    .map(|(t, _)| t.to_string())
                    .collect(),
                state: e.state,
                at: e.at,
                description: e.describe(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::task::test_git::empty_repo;
    use crate::mail::test_support::{escalate_rule, open_mediator};
    use crate::mail::{Draft, MessageType};

    /// `status` counts per recipient task what waits (queued, or read while an ack is awaited)
    /// and what policy holds; nothing is created for a repository without mail.
    #[test]
    fn status_counts_unacknowledged_and_held_mail_per_task() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let repo = base.join("repo");
        empty_repo(&repo);
        let state = base.join("state");
        assert!(statuses(&repo, &state).is_empty());
        assert!(!state.join("mail").exists(), "status creates nothing");

        let (_, key) = super::super::source::locate(&repo).unwrap();
        let settings = MailSettings {
            rules: vec![escalate_rule("*", "*", "handoff")],
            ..MailSettings::default()
        };
        let m = open_mediator(&state, &key, &settings);
        let t = |n: &str| TaskName::new(n).unwrap();
        for n in ["a", "b"] {
            m.register(&t(n), None).unwrap();
        }
        let send = |kind, ack| {
            let mut d = Draft::new(vec![t("b")], kind, "s", "b");
            d.ack_required = ack;
            m.send(&t("a"), d).unwrap().id
        };
        send(MessageType::Notice, false);
        let needs_ack = send(MessageType::Request, true);
        let plain = send(MessageType::Notice, false);
        send(MessageType::Handoff, false);
        m.read(&t("b"), &needs_ack).unwrap();
        m.read(&t("b"), &plain).unwrap();
        assert_eq!(
            statuses(&repo, &state),
            vec![TaskMail {
                task: "b".into(),
                unacknowledged: 2,
                held: 1,
                escalated: 1,
            }]
        );
    }

    /// `status` lists the escalation commands due and not run (a devcell killed before it
    /// ran them) and those started without an outcome, never one that ran or one no longer
    /// due (the user forwarded the message).
    #[test]
    fn status_lists_escalations_not_run_or_without_an_outcome() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let repo = base.join("repo");
        empty_repo(&repo);
        let state = base.join("state");
        let (_, key) = super::super::source::locate(&repo).unwrap();
        let settings = MailSettings {
            rules: vec![escalate_rule("*", "b", "request")],
            escalate_command: vec!["/bin/true".into()],
            ..MailSettings::default()
        };
        let m = open_mediator(&state, &key, &settings)
            .with_escalation(crate::mail::Escalation::from_settings(&settings).unwrap());
        let t = |n: &str| TaskName::new(n).unwrap();
        for n in ["a", "b", "c"] {
            m.register(&t(n), None).unwrap();
        }
        let send = |to: &str| {
            let d = Draft::new(vec![t(to), t("c")], MessageType::Request, "s", "b");
            m.send(&t("a"), d).unwrap().id
        };
        let (ran, unrun, started, forwarded) = (send("b"), send("b"), send("b"), send("b"));
        m.forward(&forwarded, None).unwrap();
        assert!(status_of(&repo, &state).escalations.is_empty(), "all ran");
        // what a killed devcell leaves: no line of `unrun`'s and `forwarded`'s runs, only
        // the claim of `started`'s
        let log = m.log_path().to_path_buf();
        let text = std::fs::read_to_string(&log).unwrap();
        let kept: String = text
            .lines()
            .filter(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let event = v["event"].as_str().unwrap();
                let gone = [unrun.as_str(), forwarded.as_str()]
                    .contains(&v["id"].as_str().unwrap_or(""))
                    && event.starts_with("escalation-")
                    || v["id"] == started.as_str() && event == "escalation-ran";
                !gone
            })
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&log, kept).unwrap();
        drop(m);
        let listed = status_of(&repo, &state).escalations;
        let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, vec![unrun.as_str(), started.as_str()], "{listed:?}");
        assert!(!ids.contains(&ran.as_str()));
        assert_eq!(listed[0].state, crate::mail::EscalationState::Pending);
        assert_eq!(
            listed[0].to,
            vec!["b".to_string()],
            "the escalated recipient only"
        );
        assert_eq!(
            (listed[0].from.as_str(), listed[0].kind.as_str()),
            ("a", "request")
        );
        assert_eq!(listed[1].state, crate::mail::EscalationState::Started);
        assert!(listed[1].at.is_some());
        assert!(listed[1].description.contains("no outcome"), "{listed:?}");
        let json = serde_json::to_value(&listed[0]).unwrap();
        assert_eq!(json["state"], "pending");
        assert_eq!(json["type"], "request");
    }
}
