//! L3: the door between task sandboxes (issue 30, docs/mail.md): a mediated, logged,
//! asynchronous channel. Tasks post to the mediator, never to one another; the mediator's
//! policy (`[mail]` in config.toml) forwards, holds, escalates or drops each message per
//! recipient; every message, refusal and state change is one fsync'd line of the group's
//! append-only log, and the state is what replaying the log gives.
//!
//! The host side only: the in-container command and the per-session socket build on
//! [`Mediator`].

pub mod error;
pub mod escalate;
pub mod mediator;
pub mod model;
pub mod policy;
pub mod store;

pub use error::MailError;
pub use escalate::{Escalation, EscalationRun};
pub use mediator::{Clock, MALFORMED_CONNECTION, Mediator, Recipients, SystemClock};
pub use model::{
    Delivery, Draft, EscalationEnd, EscalationState, EscalationStatus, GroupName, Importance,
    InboxItem, MEDIATOR, Message, MessageId, MessageType, MessageView, Party, Receipt,
    RecipientState, SCHEMA_VERSION, TaskInfo, TaskMailSummary, TaskName,
};
pub use policy::{Action, Bounds, Decision, Policy};

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
