//! The mail mediator of a workspace (issue 30, spec-note 0530): which group a workspace's
//! tasks share, opening its [`Mediator`] with the user's `[mail]` policy, and how mail errors
//! appear in the envelope.

use std::path::Path;

use crate::handoff::envelope::ErrorCode;
use crate::handoff::state::StateStore;
use crate::mail::{Bounds, GroupName, MailError, Policy};

/// The mediator's types the terminal (`devcell mail`) names, re-exported here because the
/// `cli` layer reaches `mail` only through the agent product (tests/layering.rs).
pub use crate::mail::{
    Draft, Mediator, MessageId, MessageType, MessageView, Receipt, Recipients, TaskName,
};
use crate::ops::OpsError;
use crate::settings::MailSettings;

/// The group of `workspace`: `explicit` (`--mail-group NAME`) when given, else the key of the
/// workspace's source repository (the sha256-derived key that names its clone tasks'
/// folders, `handoff::task::source_key`): every task made from one repository shares one
/// mediator, whichever worktree or clone it was started from.
///
/// # Errors
/// [`MailError::InvalidName`] for a bad `explicit`; [`MailError::NoGroup`] when the workspace
/// is not a git repository git can read.
pub fn group_of(workspace: &Path, explicit: Option<&str>) -> Result<GroupName, OpsError> {
    if let Some(name) = explicit {
        return Ok(GroupName::new(name)?);
    }
    let (_, key) =
        crate::handoff::task::source::locate(workspace).map_err(|e| MailError::NoGroup {
            folder: workspace.to_path_buf(),
            why: match &e {
                crate::handoff::task::TaskError::Refused { message, .. } => message.clone(),
                other => other.to_string(),
            },
        })?;
    Ok(GroupName::new(&key)?)
}

/// Opens the mediator of `group` under devcell's state folder with the policy and bounds of
/// `settings`.
///
/// # Errors
/// [`MailError::Policy`] for a bad `[mail]`; the state folder's and the store's errors.
pub fn open(group: &GroupName, settings: &MailSettings) -> Result<Mediator, OpsError> {
    let policy = Policy::from_settings(settings)?;
    let store = StateStore::open_default()?;
    Ok(Mediator::open(
        store.root(),
        group,
        policy,
        Bounds::from_settings(settings),
    )?)
}

impl crate::ops::error::ProductError for MailError {
    fn code(&self) -> ErrorCode {
        match self {
            MailError::UnknownRecipient { .. }
            | MailError::NotRegistered { .. }
            | MailError::NoSuchMessage { .. }
            | MailError::NoGroup { .. } => ErrorCode::NotFound,
            MailError::Policy { .. } => ErrorCode::ConfigInvalid,
            MailError::Io { .. } | MailError::CorruptLog { .. } | MailError::LogFull { .. } => {
                ErrorCode::Internal
            }
            MailError::InvalidName { .. }
            | MailError::InvalidDraft { .. }
            | MailError::EndedRecipient { .. }
            | MailError::TooLarge { .. }
            | MailError::RateLimited { .. }
            | MailError::ShareUsed { .. }
            | MailError::WrongState { .. }
            | MailError::ClientIdReused { .. } => ErrorCode::InvalidArgument,
        }
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({ "mailCode": MailError::code(self) })
    }

    fn hint(&self) -> Option<String> {
        Some(MailError::hint(self).to_string())
    }
}
