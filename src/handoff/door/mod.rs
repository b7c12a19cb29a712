//! The door (issue 30; spec-note 0531): the mail channel between a task's sandbox and devcell
//! on the host, built as the egress channel is. Inside, `devcell-mail` ([`channel::CLIENT`],
//! built by `build.rs` from `client_main.rs`) is a dumb pipe on the agent's `PATH`; it sends
//! its argv over the task's own Unix socket ([`SocketFolder`], bind-mounted read-only) with the
//! [`frame`] format. On the host a [`DoorServer`] per task, living for the handoff, stamps the
//! sender from the socket and answers through a [`DoorHandler`]. Nothing in the container
//! parses options or JSON, and nothing there reaches the log, the mediator or another task's
//! socket.

pub mod channel;
pub mod commands;
pub mod frame;
pub mod server;
pub mod session;

pub use channel::{ContainerDoor, SocketFolder, agent_text, install_client};
pub use commands::MailDoor;
pub use server::{Answer, DoorHandler, DoorServer, Input, InputError, Limits};
pub use session::{ChannelRecord, DoorRequest, OPEN_WAIT, SessionDoor};

use crate::handoff::failure::IoFailed;
use std::path::PathBuf;

/// The door's host side failed.
#[derive(Debug, thiserror::Error)]
pub enum DoorError {
    /// A file, folder or socket could not be made.
    #[error(transparent)]
    Io(IoFailed),
    /// The group's mediator refused or failed (opening its log, registering the task).
    #[error(transparent)]
    Mail(#[from] crate::mail::MailError),
    /// Another handoff keeps this task's channel open (spec-note 0532).
    #[error(
        "mail: another running handoff already has the channel of task `{task}`; one session per task"
    )]
    Busy {
        /// The task.
        task: String,
    },
    /// Another task of the group with the same name (its own folder `other`) runs its
    /// channel now (spec-note 0532): one name, one task at a time.
    #[error(
        "mail: task name `{task}` is already live in this group for another task (`{}`); two tasks that run at once need different names",
        other.display()
    )]
    NameTaken {
        /// The name.
        task: String,
        /// The other task's folder.
        other: PathBuf,
    },
    /// A worktree handoff's channel has no valid task name (its folder's name is not one).
    #[error("mail: the channel needs a task name: {why}")]
    TaskName {
        /// Why the name is not one.
        why: String,
    },
}

impl crate::ops::error::ProductError for DoorError {
    fn code(&self) -> crate::diagnostics::ErrorCode {
        use crate::diagnostics::ErrorCode;
        match self {
            DoorError::Mail(crate::mail::MailError::Policy { .. }) => ErrorCode::ConfigInvalid,
            DoorError::Busy { .. } | DoorError::NameTaken { .. } => ErrorCode::SessionActive,
            DoorError::TaskName { .. } => ErrorCode::InvalidArgument,
            _ => ErrorCode::Internal,
        }
    }

    fn details(&self) -> serde_json::Value {
        match self {
            DoorError::Mail(e) => serde_json::json!({ "reason": e.code() }),
            DoorError::Io(_) => serde_json::json!({ "reason": "mail_channel_io" }),
            DoorError::TaskName { .. } => serde_json::json!({ "reason": "mail_task_name" }),
            DoorError::Busy { task } => {
                serde_json::json!({ "reason": "mail_channel_busy", "task": task })
            }
            DoorError::NameTaken { task, .. } => {
                serde_json::json!({ "reason": "mail_task_name_taken", "task": task })
            }
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            DoorError::Mail(e) => Some(e.hint().to_string()),
            DoorError::Io(_) => None,
            DoorError::TaskName { .. } => {
                Some("name this handoff's task with `--task NAME`".to_string())
            }
            DoorError::NameTaken { .. } => Some(
                "name this handoff's task differently with `--task NAME` (mail addresses tasks by name)"
                    .to_string(),
            ),
            DoorError::Busy { .. } => Some(
                "wait for the other handoff to end, or name this one's task with `--task NAME`"
                    .to_string(),
            ),
        }
    }
}

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod tests;
