//! The message model: names, drafts, messages, per-recipient states. Serialized in camelCase;
//! `schemas/mail-message.schema.json` describes [`Message`] (version [`SCHEMA_VERSION`]).

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::{MailError, Result};

/// The version of the message schema this devcell writes (`schemas/mail-message.schema.json`).
pub const SCHEMA_VERSION: u32 = 1;

/// The sender name of the mediator's own messages (`post`): `@` is never part of a task name,
/// so no task can be, or claim to be, the mediator.
pub const MEDIATOR: &str = "@mediator";

/// The allowed form of task, group and message-id names: 1–64 of `[A-Za-z0-9._-]`, starting
/// with a letter or digit, no `..`, not ending in `.` (a plain file name; a task name as
/// `handoff::task` allows it).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !name.contains("..")
        && !name.ends_with('.')
}

fn shown(value: &str) -> String {
    value
        .chars()
        .take(80)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Checks the form (1–64 of `[A-Za-z0-9._-]`, starting with a letter or digit, no
            /// `..`, not ending in `.`).
            ///
            /// # Errors
            /// [`MailError::InvalidName`].
            pub fn new(value: &str) -> Result<Self> {
                if valid_name(value) {
                    Ok(Self(value.to_string()))
                } else {
                    Err(MailError::InvalidName {
                        what: $what,
                        value: shown(value),
                        expected: "1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit",
                    })
                }
            }

            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = MailError;
            fn try_from(value: String) -> Result<Self> {
                Self::new(&value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = MailError;
            fn from_str(s: &str) -> Result<Self> {
                Self::new(s)
            }
        }
    };
}

name_type!(
    /// A task of the group (its `handoff` task name).
    TaskName,
    "task name"
);
name_type!(
    /// A mediator group: the tasks that share one log and one policy (by default the source
    /// repository's key, see docs/mail.md).
    GroupName,
    "group name"
);
name_type!(
    /// A message id. Those devcell makes sort by creation time (`m<ms since epoch, 13 digits>-<8
    /// hex>`); a sender may supply its own (a client id) so a retried send is deduplicated.
    MessageId,
    "message id"
);

impl MessageId {
    /// A new id for `at`: sortable by time, unique with overwhelming probability.
    pub fn generate(at: DateTime<Utc>) -> MessageId {
        use std::hash::{BuildHasher as _, Hasher as _};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u32(std::process::id());
        h.write_i64(at.timestamp_nanos_opt().unwrap_or_default());
        let millis = at.timestamp_millis().max(0);
        MessageId(format!("m{millis:013}-{:08x}", h.finish() as u32))
    }
}

/// Who sent a message: a task, or the mediator (the host user's `post`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Party {
    /// A task of the group.
    Task(TaskName),
    /// The mediator ([`MEDIATOR`]).
    Mediator,
}

impl TryFrom<String> for Party {
    type Error = MailError;
    fn try_from(value: String) -> Result<Self> {
        if value == MEDIATOR {
            Ok(Party::Mediator)
        } else {
            TaskName::new(&value).map(Party::Task)
        }
    }
}

impl From<Party> for String {
    fn from(value: Party) -> String {
        match value {
            Party::Task(t) => t.0,
            Party::Mediator => MEDIATOR.to_string(),
        }
    }
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Party::Task(t) => f.write_str(t.as_str()),
            Party::Mediator => f.write_str(MEDIATOR),
        }
    }
}

/// What a message is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessageType {
    /// Information; no answer expected.
    Notice,
    /// Asks the recipient to do or answer something.
    Request,
    /// Answers a message (`replyTo`).
    Reply,
    /// An interface, schema or behaviour other tasks rely on changes.
    ContractChange,
    /// Work handed to another task.
    Handoff,
}

impl MessageType {
    /// Every type, in schema order.
    pub const ALL: [MessageType; 5] = [
        MessageType::Notice,
        MessageType::Request,
        MessageType::Reply,
        MessageType::ContractChange,
        MessageType::Handoff,
    ];

    /// The type's word (`contract-change`).
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Notice => "notice",
            MessageType::Request => "request",
            MessageType::Reply => "reply",
            MessageType::ContractChange => "contract-change",
            MessageType::Handoff => "handoff",
        }
    }
}

impl std::str::FromStr for MessageType {
    type Err = MailError;
    fn from_str(s: &str) -> Result<Self> {
        MessageType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| MailError::InvalidDraft {
                field: "type",
                why: format!(
                    "unknown type `{}` (expected notice, request, reply, contract-change or handoff)",
                    shown(s)
                ),
            })
    }
}

/// How urgent a message is (shown to the recipient; policy does not use it).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Importance {
    /// Whenever convenient.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Before continuing other work.
    High,
    /// Now.
    Urgent,
}

/// What a sender writes: everything but the identity, id and time, which the mediator stamps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Draft {
    /// Recipients (at least one; duplicates are merged).
    pub to: Vec<TaskName>,
    /// One line (at most 200 characters, no control characters).
    pub subject: String,
    /// Markdown.
    #[serde(default)]
    pub body: String,
    /// The message's type.
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// The conversation it belongs to (default: a reply's original's thread, else its own id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<MessageId>,
    /// The message it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<MessageId>,
    /// How urgent.
    #[serde(default)]
    pub importance: Importance,
    /// Whether the recipient must acknowledge it (unacknowledged, it is redelivered after each
    /// lease); without, reading it is enough.
    #[serde(default)]
    pub ack_required: bool,
    /// The sender's own id for this message: sending the same draft again with the same id is
    /// deduplicated (the first receipt is returned). Becomes the message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<MessageId>,
}

impl Draft {
    /// A draft with the defaults (normal importance, no ack, no thread).
    pub fn new(to: Vec<TaskName>, kind: MessageType, subject: &str, body: &str) -> Draft {
        Draft {
            to,
            subject: subject.to_string(),
            body: body.to_string(),
            kind,
            thread_id: None,
            reply_to: None,
            importance: Importance::Normal,
            ack_required: false,
            client_id: None,
        }
    }
}

/// An accepted message as the log keeps it and recipients read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The message id.
    pub id: MessageId,
    /// The conversation (its first message's id).
    pub thread_id: MessageId,
    /// The message it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<MessageId>,
    /// The sender, stamped by the mediator from the session (never from the draft).
    pub from: Party,
    /// The sender task's branch when it registered (`None` for the mediator or a task without
    /// one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_branch: Option<String>,
    /// Recipients.
    pub to: Vec<TaskName>,
    /// The message's type.
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// One line.
    pub subject: String,
    /// Markdown.
    pub body: String,
    /// How urgent.
    pub importance: Importance,
    /// Whether the recipient must acknowledge it.
    pub ack_required: bool,
    /// When the mediator accepted it.
    pub created_at: DateTime<Utc>,
}

/// Where a message stands for one recipient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecipientState {
    /// Accepted, waiting in the recipient's inbox, not yet listed by it.
    Queued,
    /// Held by policy (`hold` or `escalate`) for the host user to forward or reject.
    Held,
    /// Listed by the recipient's `inbox`.
    Delivered,
    /// Read by the recipient (a lease runs when an ack is required).
    Read,
    /// Acknowledged by the recipient (final).
    Acknowledged,
    /// Rejected by the host user (final; the reason is kept).
    Rejected,
    /// Dropped by policy (final; logged).
    Dropped,
}

impl RecipientState {
    /// Whether nothing more happens to the message for this recipient.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RecipientState::Acknowledged | RecipientState::Rejected | RecipientState::Dropped
        )
    }
}

/// One recipient's delivery record of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// Its state.
    pub state: RecipientState,
    /// Whether policy escalated it (held and surfaced in `status`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escalated: bool,
    /// When it was first listed by the recipient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<DateTime<Utc>>,
    /// When it was last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<DateTime<Utc>>,
    /// When it was acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<DateTime<Utc>>,
    /// Until when the last read's lease runs (only while an ack is awaited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<DateTime<Utc>>,
    /// How many times it was read (more than one: redelivered after a lease).
    #[serde(default)]
    pub reads: u32,
    /// Why it was rejected or dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Delivery {
    pub(crate) fn new(state: RecipientState, escalated: bool) -> Delivery {
        Delivery {
            state,
            escalated,
            delivered_at: None,
            read_at: None,
            acknowledged_at: None,
            lease_until: None,
            reads: 0,
            reason: None,
        }
    }
}

/// A message with every recipient's delivery (the sender's and the host user's view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    /// The message.
    pub message: Message,
    /// Its delivery per recipient.
    pub recipients: BTreeMap<TaskName, Delivery>,
    /// The user's escalation command for it (spec-note 0533): only in the host user's view
    /// (`devcell mail list|show`), never in a sandbox's (the command's output is the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<EscalationStatus>,
}

/// Where the user's escalation command stands for one message (spec-note 0533).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EscalationState {
    /// Due and not started (devcell ended before it ran; the next session's door runs it
    /// while the message is still held).
    Pending,
    /// Started and no outcome recorded: devcell ended while it ran. Never started again (at
    /// most once).
    Started,
    /// Ran; its outcome is recorded.
    Ran,
}

/// The escalation command's state and, once it ran, how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EscalationStatus {
    /// Where it stands.
    pub state: EscalationState,
    /// When it was started or ran (the log line's time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<DateTime<Utc>>,
    /// How it ended, once it ran (its keys at this level).
    #[serde(flatten)]
    pub end: EscalationEnd,
}

/// How one run of the escalation command ended: recorded with the run (`escalation-ran`,
/// [`crate::mail::EscalationRun`]) and kept as the message's [`EscalationStatus`], one type so
/// the status says what the run said. Flattened into both: its keys stand beside theirs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EscalationEnd {
    /// Its exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// The signal that ended it, when one did (`9` after the deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether its deadline ended it: it was still running (or its output still open) then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Why it could not be started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl EscalationStatus {
    /// One line for the terminal: `ran, exit 0`, `ran, killed after its deadline`, ...
    pub fn describe(&self) -> String {
        match self.state {
            EscalationState::Pending => {
                "not run yet (runs at the group's next session start while held)".into()
            }
            EscalationState::Started => {
                "started, no outcome recorded (devcell ended while it ran; not run again)".into()
            }
            EscalationState::Ran => {
                let end = &self.end;
                if let Some(e) = &end.error {
                    format!("did not run: {e}")
                } else if end.timed_out {
                    "ran, killed after its deadline".into()
                } else if let Some(code) = end.exit {
                    format!("ran, exit {code}")
                } else if let Some(sig) = end.signal {
                    format!("ran, ended by signal {sig}")
                } else {
                    "ran".into()
                }
            }
        }
    }
}

/// What `send`, `reply` and `post` return once the message is in the log (fsync'd).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The message id.
    pub id: MessageId,
    /// Each recipient's state right after policy.
    pub recipients: BTreeMap<TaskName, RecipientState>,
    /// Whether this send repeated an earlier one with the same client id (nothing new was
    /// accepted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

/// One entry of a recipient's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    /// The message.
    pub message: Message,
    /// Its state for this recipient.
    pub state: RecipientState,
    /// How many times it was read (more than zero: redelivered after a lease).
    pub reads: u32,
    /// Until when the last read's lease runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<DateTime<Utc>>,
}

/// A registered task of the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskInfo {
    /// The task.
    pub task: TaskName,
    /// Its branch, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Whether its session has ended (it receives nothing more).
    pub ended: bool,
}

/// What is pending for one task (for `status`): messages it has not finished and messages
/// held for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskMailSummary {
    /// The task.
    pub task: TaskName,
    /// Whether its session has ended.
    pub ended: bool,
    /// Messages to it queued, delivered, or read but awaiting its acknowledgement.
    pub unacknowledged: usize,
    /// Messages to it held by policy for the host user.
    pub held: usize,
    /// Of those held, the ones policy escalated.
    pub escalated: usize,
}
