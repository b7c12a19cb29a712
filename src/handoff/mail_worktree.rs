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
    made(opts, true)
}

/// The options `handoff --plan` plans a worktree handoff with: the channel [`request`] would
/// open, as planned binds (nothing installed or made), so the plan lists the mounts a real
/// run adds.
///
/// Errors: as [`request`].
pub fn plan_options(opts: &HandoffOptions) -> Result<HandoffOptions> {
    let mut planned = opts.clone();
    if let Some(door) = made(opts, false)? {
        planned.mail = Some(door);
    }
    Ok(planned)
}

/// `--mail` asks for a channel into a container; `--runtime host` makes none, so the pair
/// is refused as the other flags that need a container are (spec-note 0532).
///
/// Errors: [`crate::ops::OpsError::Unsupported`].
pub fn refuse_on_host(opts: &HandoffOptions) -> Result<()> {
    let host = opts.runtime == Some(crate::handoff::context::AgentRuntime::Host);
    if host && opts.mail_channel == Some(true) {
        return Err(crate::ops::OpsError::Unsupported {
            message:
                "`--mail` gives the agent a channel in its container; `--runtime host` makes none"
                    .into(),
            hint: Some("drop `--runtime host` or `--mail`".into()),
        });
    }
    Ok(())
}

/// [`request`], its files made (`make`) or only planned.
fn made(opts: &HandoffOptions, make: bool) -> Result<Option<DoorRequest>> {
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
    if !make {
        return Ok(Some(DoorRequest::planned(&state_root, group, task, None)));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30: `--mail` with `--runtime host` is refused (the agent gets no container, so no
    /// channel), as the other flags that need a container are; `--runtime host` alone, or with
    /// the channel only from settings, is not.
    #[test]
    fn mail_with_the_host_runtime_is_refused() {
        let host = Some(crate::handoff::context::AgentRuntime::Host);
        let opts = HandoffOptions {
            runtime: host,
            mail_channel: Some(true),
            ..HandoffOptions::default()
        };
        let e = refuse_on_host(&opts).unwrap_err();
        assert!(
            matches!(e, crate::ops::OpsError::Unsupported { .. }),
            "{e:?}"
        );
        assert_eq!(e.code().as_str(), "config_invalid");
        assert!(e.to_string().contains("--runtime host"), "{e}");
        for ok in [
            HandoffOptions {
                runtime: host,
                ..HandoffOptions::default()
            },
            HandoffOptions {
                mail_channel: Some(true),
                ..HandoffOptions::default()
            },
        ] {
            refuse_on_host(&ok).unwrap();
        }
    }

    /// Issue 30: `handoff --mail-group NAME` of a worktree joins the group `NAME` (the
    /// caller finds the repository's group only when none is named): the channel's group is
    /// the one named.
    #[test]
    fn a_named_mail_group_is_the_channels_group() {
        let tmp = tempfile::tempdir().unwrap();
        let team = crate::mail::GroupName::new("team").unwrap();
        let opts = HandoffOptions {
            workspace_folder: tmp.path().join("ws"),
            state_root: Some(tmp.path().join("state")),
            mail_channel: Some(true),
            mail_group: Some(team.clone()),
            task: Some("t".into()),
            ..HandoffOptions::default()
        };
        let planned = plan_options(&opts).unwrap();
        assert_eq!(planned.mail.map(|d| d.group), Some(team.clone()));
        assert!(!tmp.path().join("state").exists(), "planning makes nothing");
    }
}
