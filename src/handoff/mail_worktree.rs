//! The mail channel of a worktree handoff (issue 30; spec-note 0532): the same door as a clone
//! task's, asked for with `handoff --mail` or `[mail].worktrees = true`. Its group is the
//! workspace's (`devcell mail --workspace-folder` finds it: the source repository's key, shared
//! by its worktrees and clone tasks); its task name is `--task`, else the workspace folder's
//! name.

use crate::handoff::context::ContextMail;
use crate::handoff::plan::HandoffOptions;
use crate::handoff::state::StateStore;
use crate::mail::TaskName;
use crate::ops::error::Result;

use crate::handoff::door::channel::{CONTAINER_BIN, CONTAINER_FOLDER, SOCKET_NAME};
use crate::handoff::door::{DoorError, DoorRequest};

/// The channel a worktree handoff asks for: `None` when it asks for none, or when the clone
/// task runner has already set its own (`opts.mail`, `opts.sandbox`).
///
/// Errors: [`crate::mail::MailError::NoGroup`] when the workspace is not a repository (or a
/// folder of repositories) devcell can read; [`crate::mail::MailError::InvalidName`] for a task
/// name that is not one (name it with `--task`); the state folder's.
pub fn request(opts: &HandoffOptions) -> Result<Option<DoorRequest>> {
    if opts.mail.is_some() || opts.sandbox.is_some() || !opts.mail_channel_wanted() {
        return Ok(None);
    }
    let state_root = match &opts.state_root {
        Some(root) => root.clone(),
        None => StateStore::open_default()?.root().to_path_buf(),
    };
    // found by the caller (`handoff::mail_host::group_of`), which may read the repository
    let group = opts
        .mail_group
        .clone()
        .ok_or_else(|| crate::mail::MailError::NoGroup {
            folder: opts.workspace_folder.clone(),
            why: "it is not a git repository (or a folder of repositories) devcell can read".into(),
        })?;
    let task = task_name(opts)?;
    let door =
        DoorRequest::prepare(&state_root, group, task, None)?.owned_by(&opts.workspace_folder);
    Ok(Some(door))
}

/// `--task`, else the workspace folder's name.
fn task_name(opts: &HandoffOptions) -> Result<TaskName> {
    let name = match &opts.task {
        Some(t) => t.clone(),
        None => std::fs::canonicalize(&opts.workspace_folder)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default(),
    };
    TaskName::new(&name).map_err(|e| DoorError::TaskName { why: e.to_string() }.into())
}

/// The context file's `mail` for a channel.
pub fn context_mail(door: &DoorRequest) -> ContextMail {
    ContextMail {
        task: door.task.as_str().to_string(),
        command: CONTAINER_BIN.to_string(),
        socket: format!("{CONTAINER_FOLDER}/{SOCKET_NAME}"),
        usage: crate::handoff::door::agent_text(),
    }
}
