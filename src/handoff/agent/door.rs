//! The handoff's mail channel (spec-notes 0531, 0532): opened once the session has begun (so a
//! refused handoff never touches a live session's channel, and a `--replace`d session has
//! closed its own), recorded in the session, closed when the agent has ended with what went
//! through it.

use super::{Handoff, Live};
use crate::handoff::door::{DoorError, OPEN_WAIT, SessionDoor};
use crate::handoff::state::SessionFact;
use crate::ops::error::{OpsError, Result};
use crate::progress::Event;

impl Handoff<'_> {
    /// The channel asked for (`opts.mail`), opened and recorded in the session; `None` when
    /// the handoff has none. The channel is an aid: a group's log another task filled, or a
    /// mail state the host cannot read, is a warning and the agent runs without it
    /// (`devcell-mail` then says there is no channel). Another running handoff holding the
    /// task's channel is an error (two sessions would answer as one task).
    pub(super) async fn open_door(&self, live: &mut Live) -> Result<Option<SessionDoor>> {
        let Some(request) = self.opts.mail.clone() else {
            return Ok(None);
        };
        let task = request.task.as_str().to_string();
        let settings = self.opts.settings.mail.clone();
        let opened = tokio::task::spawn_blocking(move || request.open(&settings, OPEN_WAIT))
            .await
            .map_err(|e| {
                live.fail(OpsError::Unsupported {
                    message: format!("the mail channel did not open: {e}"),
                    hint: None,
                })
            })?;
        let door = match opened {
            Ok(door) => door,
            Err(e @ DoorError::Busy { .. }) => return Err(live.fail(e.into())),
            Err(e) => {
                let message = format!("task `{task}` runs without its mail channel: {e}");
                self.reporter
                    .report(Event::Status(format!("warning: {message}")));
                live.warnings.push(message);
                return Ok(None);
            }
        };
        let record = door.record();
        self.reporter.report(Event::Status(format!(
            "mail: task `{}` reaches the other tasks of group `{}` through `{}` ({})",
            record.task, record.group, record.command, record.socket
        )));
        live.record(SessionFact::Mail(Box::new(record)))
            .map_err(|e| live.fail(e.into()))?;
        Ok(Some(door))
    }

    /// The channel closed (its socket removed, the task ended in the mediator) and its counts
    /// recorded in the session; a failure is a warning (the agent has run).
    pub(super) fn close_door(&self, door: Option<SessionDoor>, live: &mut Live) {
        let Some(door) = door else { return };
        let task = door.record().task;
        let record = match door.close() {
            Ok(record) => record,
            Err(e) => {
                let message =
                    format!("task `{task}`: its end was not recorded by the mail mediator: {e}");
                self.reporter
                    .report(Event::Status(format!("warning: {message}")));
                live.warnings.push(message);
                return;
            }
        };
        if let Err(e) = live.record(SessionFact::Mail(Box::new(record))) {
            live.warnings
                .push(format!("the mail channel's counts were not recorded: {e}"));
        }
    }
}
