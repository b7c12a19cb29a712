//! The handoff's step before it reads the container git directories an earlier session left:
//! whatever of the workspace still runs is stopped first (spec-note 0400, F3).

use super::{Handoff, Judged, Live};
use crate::handoff::quiesce::{NotStopped, stop_running_workspace};
use crate::ops::error::Result;
use crate::progress::Event;

impl Handoff<'_> {
    /// Stops the workspace's containers that already run (and their Compose peers, first),
    /// confirmed, before the start-of-handoff fetch-back reads what they could write: a
    /// container `up` or a crashed devcell left running, a replaced session's, a peer left
    /// running when its primary ended. `up` then starts them again. Not confirmed: the
    /// handoff is refused and the container git directories stay as they are.
    /// A member of a handoff group whose other members run leaves the container to them: it
    /// is theirs too (spec-note 0525).
    pub(super) async fn stop_what_runs(&self, judged: &mut Judged, live: &Live) -> Result<()> {
        if let Some(others) = self.shared_with_others() {
            self.reporter.report(Event::Status(format!(
                "joining the running workspace container: {others}"
            )));
            return Ok(());
        }
        let root = std::fs::canonicalize(&live.root).unwrap_or_else(|_| live.root.clone());
        let stopped = stop_running_workspace(self.engine, &root)
            .await
            .map_err(|why| live.fail(NotStopped { why, task: None }.into()))?;
        if stopped.is_empty() {
            return Ok(());
        }
        self.reporter.report(Event::Status(format!(
            "stopped {} container(s) of the workspace that were already running, before reading what they could write",
            stopped.len()
        )));
        if let Judged::Single(up) = judged {
            up.stopped(&stopped);
        }
        Ok(())
    }
}
