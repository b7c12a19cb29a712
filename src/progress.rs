//! L0: progress reporting. Library code reports events through [`Reporter`]; only `cli` draws.

/// A progress or output event from a long-running operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A free-form status line (e.g. "pulling ghcr.io/x/y:1").
    Status(String),
    /// A line of output from a build step or lifecycle hook.
    Output(String),
}

/// Receives [`Event`]s. Implementations must be cheap; they are called from async code.
pub trait Reporter: Send + Sync {
    /// Handles one event.
    fn report(&self, event: Event);
}

/// A [`Reporter`] that drops every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopReporter;

impl Reporter for NoopReporter {
    fn report(&self, _event: Event) {}
}
