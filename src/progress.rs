//! L0: progress reporting. Library code reports events through [`Reporter`]; only `cli` draws.

/// A progress or output event from a long-running operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A free-form status line (e.g. "pulling ghcr.io/x/y:1").
    Status(String),
    /// A line of output from a build step or lifecycle hook.
    Output(String),
    /// A finding the user should see where they look, as it happens (a configuration's
    /// unknown, duplicate or deprecated property): printed as a `warning:` line that stays on
    /// screen, also on a run that fails later (issue 28 item 5).
    Warning(crate::diagnostics::Warning),
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

/// The receiving end of [`channel`]: events sent through the paired reporter, in order.
#[derive(Debug)]
pub struct EventReceiver(tokio::sync::mpsc::UnboundedReceiver<Event>);

/// A [`Reporter`] that sends every event to its [`EventReceiver`].
#[derive(Debug)]
struct ChannelReporter(tokio::sync::mpsc::UnboundedSender<Event>);

impl Reporter for ChannelReporter {
    fn report(&self, event: Event) {
        // A receiver that stopped listening only loses progress lines.
        let _ = self.0.send(event);
    }
}

/// An owned reporter (for APIs that keep an `Arc<dyn Reporter>`, such as
/// `features::fetch::Fetcher`) whose events a caller holding only a borrowed `&dyn Reporter`
/// delivers with [`EventReceiver::forward_to`], run alongside the work
/// (`tokio::join!(work, receiver.forward_to(reporter))`).
pub fn channel() -> (std::sync::Arc<dyn Reporter>, EventReceiver) {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    (
        std::sync::Arc::new(ChannelReporter(sender)),
        EventReceiver(receiver),
    )
}

impl EventReceiver {
    /// Delivers every event to `reporter` as it arrives; returns once every clone of the
    /// paired reporter is dropped and the queue is empty.
    pub async fn forward_to(mut self, reporter: &dyn Reporter) {
        while let Some(event) = self.0.recv().await {
            reporter.report(event);
        }
    }
}

/// A [`Reporter`] that keeps every event, in order, for a test to read.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Collect(pub(crate) std::sync::Mutex<Vec<Event>>);

#[cfg(test)]
impl Reporter for Collect {
    fn report(&self, event: Event) {
        self.0.lock().unwrap().push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn channel_forwards_every_event_in_order_until_the_sender_is_dropped() {
        let (sender, receiver) = channel();
        let sink = Collect::default();
        let work = async move {
            sender.report(Event::Status("pulling a".into()));
            tokio::task::yield_now().await;
            sender.report(Event::Output("line".into()));
            7
        };
        let (n, ()) = tokio::join!(work, receiver.forward_to(&sink));
        assert_eq!(n, 7);
        assert_eq!(
            *sink.0.lock().unwrap(),
            [
                Event::Status("pulling a".into()),
                Event::Output("line".into())
            ]
        );
    }
}
