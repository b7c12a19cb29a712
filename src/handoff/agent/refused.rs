//! A handoff refused (or failed) once its container runs: the container and its Compose peers
//! are stopped before the error is returned ([`crate::handoff::quiesce::stop_workspace`],
//! peers first), so what the lifecycle hooks or an earlier agent started does not keep running
//! with no session and no stop (attack G8, session 17: a clone task whose agent had replaced
//! `.devcell` with a link was refused after the start and its container stayed `Up`). The
//! error keeps its own code, hint and exit status, and says whether the stop was confirmed
//! (`details.containerStopped`).

use super::{Handoff, Live};
use crate::ops::UpResult;
use crate::ops::error::{OpsError, ProductError, Result};
use crate::progress::Event;

impl Handoff<'_> {
    /// `step`'s value; its error once the workspace container `up` brought up (and its
    /// Compose peers) is stopped, unless the session was replaced meanwhile (the container is
    /// then its successor's).
    pub(super) async fn stopped_if_refused<T>(
        &self,
        up: &UpResult,
        live: &mut Live,
        step: Result<T>,
    ) -> Result<T> {
        let error = match step {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        if live.replaced() {
            return Err(error);
        }
        if let Some(others) = self.shared_with_others() {
            self.reporter.report(Event::Status(format!(
                "the workspace container keeps running: {others}"
            )));
            return Err(error);
        }
        self.reporter.report(Event::Status(
            "stopping the workspace container: the handoff was refused after it started"
                .to_string(),
        ));
        let stop = crate::handoff::quiesce::stop_workspace(self.engine, &up.container_id)
            .await
            .map(|_| ());
        Err(StoppedAfterStart {
            container_id: up.container_id.clone(),
            stop,
            error,
        }
        .into())
    }
}

/// A handoff's error after its container started, with what became of the container.
#[derive(Debug)]
pub struct StoppedAfterStart {
    /// The workspace container.
    pub container_id: String,
    /// `Ok` when it and its Compose peers were stopped and confirmed stopped; else why not.
    pub stop: std::result::Result<(), String>,
    /// The handoff's error, as it was.
    pub error: OpsError,
}

impl std::fmt::Display for StoppedAfterStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = &self.container_id[..self.container_id.len().min(12)];
        match &self.stop {
            Ok(()) => write!(
                f,
                "{} (the workspace container {id} was stopped, with its Compose peers)",
                self.error
            ),
            Err(why) => write!(
                f,
                "{} (the workspace container {id} could not be stopped: {why})",
                self.error
            ),
        }
    }
}

impl std::error::Error for StoppedAfterStart {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // the handoff's error is shown in this one's message: its causes come next
        std::error::Error::source(&self.error)
    }
}

impl ProductError for StoppedAfterStart {
    fn code(&self) -> crate::diagnostics::ErrorCode {
        self.error.code()
    }

    fn details(&self) -> serde_json::Value {
        let mut details = self.error.details();
        if !details.is_object() {
            details = serde_json::json!({});
        }
        if let Some(map) = details.as_object_mut() {
            map.insert("containerId".into(), self.container_id.clone().into());
            map.insert("containerStopped".into(), self.stop.is_ok().into());
        }
        details
    }

    fn hint(&self) -> Option<String> {
        crate::diagnostics::Hint::hint(&self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error after the start keeps its code and details and says the container stopped.
    #[test]
    fn an_error_after_the_start_keeps_its_code_and_says_the_container_stopped() {
        let inner = OpsError::NotRunning { id: "x".into() };
        let code = inner.code();
        let e: OpsError = StoppedAfterStart {
            container_id: "0123456789abcdef".into(),
            stop: Ok(()),
            error: inner,
        }
        .into();
        assert_eq!(e.code(), code);
        assert_eq!(e.details()["containerStopped"], true);
        assert_eq!(e.details()["containerId"], "0123456789abcdef");
        assert!(
            e.to_string().ends_with(
                "(the workspace container 0123456789ab was stopped, with its Compose peers)"
            ),
            "{e}"
        );
        let e = StoppedAfterStart {
            container_id: "c".into(),
            stop: Err("the engine said no".into()),
            error: OpsError::NotRunning { id: "x".into() },
        };
        assert_eq!(e.details()["containerStopped"], false);
        assert!(
            e.to_string()
                .contains("could not be stopped: the engine said no")
        );
    }
}
