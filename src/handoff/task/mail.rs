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
/// ([`DoorRequest::open`]): its group, its name and branch, `devcell-mail` installed and its
/// socket folder made.
///
/// Errors: [`DoorError`] (a file not made); nothing runs then.
pub fn request(state_root: &Path, record: &TaskRecord) -> Result<DoorRequest, DoorError> {
    DoorRequest::prepare(
        state_root,
        group_of(record)?,
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

/// The mail of every task of the repository at `workspace` that has any, by task; empty when
/// the repository has no mediator log (nothing is created). A log that cannot be read counts
/// nothing (`devcell mail list` shows the error).
pub fn statuses(workspace: &Path, state_root: &Path) -> Vec<TaskMail> {
    use crate::mail::RecipientState as S;
    let Ok((_, key)) = super::source::locate(workspace) else {
        return Vec::new();
    };
    let Ok(group) = GroupName::new(&key) else {
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
    let Ok(views) = Mediator::open(state_root, &group, policy, Bounds::from_settings(&settings))
        .and_then(|m| m.list())
    else {
        return Vec::new();
    };
    let mut by_task = std::collections::BTreeMap::<String, TaskMail>::new();
    for v in &views {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::task::test_git::empty_repo;
    use crate::mail::{Draft, MessageType};
    use crate::settings::{MailAction, MailRule};

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
            rules: vec![MailRule {
                from: "*".into(),
                to: "*".into(),
                kind: "handoff".into(),
                action: MailAction::Escalate,
            }],
            ..MailSettings::default()
        };
        let m = Mediator::open(
            &state,
            &GroupName::new(&key).unwrap(),
            Policy::from_settings(&settings).unwrap(),
            Bounds::from_settings(&settings),
        )
        .unwrap();
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
}
