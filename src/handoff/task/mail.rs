//! The mail channel of a clone task's handoff (issue 30; spec-note 0531): the tasks of one
//! repository share a mediator (their group is the repository's task key, [`source_key`] of
//! its common git directory, so `devcell mail` on the host finds it from the workspace); each
//! task's handoff registers it, serves its own socket for as long as the handoff runs, and
//! ends it when the handoff ends.

use std::path::Path;
use std::sync::Arc;

use super::{TaskRecord, source_key};
use crate::handoff::door::{
    ContainerDoor, DoorError, DoorServer, Limits, MailDoor, SocketFolder, install_client,
};
use crate::mail::{Bounds, GroupName, Mediator, Policy, TaskName};
use crate::settings::MailSettings;

/// A clone task's open channel: its server, and what its container gets.
#[derive(Debug)]
pub struct TaskDoor {
    server: DoorServer,
    mediator: Arc<Mediator>,
    task: TaskName,
    /// The container's binds (for [`crate::handoff::plan::HandoffOptions::mail`]).
    pub container: ContainerDoor,
}

/// The group of a task's repository: its task key.
///
/// Errors: [`DoorError::Mail`] (never for a key: 32 hex digits are a valid name).
pub fn group_of(record: &TaskRecord) -> Result<GroupName, DoorError> {
    Ok(GroupName::new(&source_key(&record.source_git_dir))?)
}

/// Opens the group's mediator with `settings` (`[mail]`), registers the task (with its
/// branch), installs `devcell-mail` and starts serving the task's socket.
///
/// Errors: [`DoorError`] (the policy refused, the log unreadable, a file not made); nothing
/// runs then.
pub fn open(
    state_root: &Path,
    record: &TaskRecord,
    settings: &MailSettings,
) -> Result<TaskDoor, DoorError> {
    let group = group_of(record)?;
    let mediator = Arc::new(Mediator::open(
        state_root,
        &group,
        Policy::from_settings(settings)?,
        Bounds::from_settings(settings),
    )?);
    let task = TaskName::new(&record.task)?;
    let client = install_client(state_root)?;
    let folder = SocketFolder::create(state_root, group.as_str(), task.as_str())?;
    mediator.register(&task, Some(&record.branch))?;
    let handler = Arc::new(MailDoor::new(
        Arc::clone(&mediator),
        settings.max_message_bytes,
    ));
    let server = match DoorServer::start(&folder, task.as_str(), handler, Limits::default()) {
        Ok(s) => s,
        Err(e) => {
            let _ = mediator.end(&task);
            return Err(e);
        }
    };
    Ok(TaskDoor {
        server,
        mediator,
        task,
        container: ContainerDoor::new(&client, &folder),
    })
}

impl TaskDoor {
    /// Stops serving (the socket is removed) and ends the task in the mediator (messages to it
    /// are refused from now on, until its next handoff registers it again).
    ///
    /// Errors: [`DoorError::Mail`] when the end could not be logged.
    pub fn close(self) -> Result<(), DoorError> {
        self.server.stop();
        self.mediator.end(&self.task)?;
        Ok(())
    }
}

/// The context file's `sandbox.mail` text for the agent.
pub fn agent_text() -> String {
    "Other tasks work on this repository in their own sandboxes. You can reach them only \
     through devcell's mediator, with the `devcell-mail` command (`devcell-mail --help`): \
     `devcell-mail send --to TASK[,TASK] --subject S [--type notice|request|reply|contract-change|handoff] \
     [--ack-required] [--body TEXT | body on stdin]`, `devcell-mail inbox`, `devcell-mail read ID`, \
     `devcell-mail ack ID`, `devcell-mail reply ID`, `devcell-mail sent`. You are always the sender; \
     the user's policy may hold a message for the user; check `inbox` from time to time and \
     acknowledge what asks for it."
        .to_string()
}
