//! Errors of the `mail` layer: each has a stable code (for the JSON envelope and the
//! in-container command's exit status) and a hint saying what to do.

use std::path::PathBuf;

/// Why a mail call failed. Nothing is lost on an error: a refused send was never accepted
/// (the sender still has its draft and may retry with the same client id).
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// A task, group or message id does not have the allowed form.
    #[error("mail: invalid {what} `{value}`: {expected}")]
    InvalidName {
        /// What was being named (`task name`, `group name`, `message id`).
        what: &'static str,
        /// The value as given (terminal-safe: only its allowed characters are shown raw).
        value: String,
        /// The expected form.
        expected: &'static str,
    },
    /// A draft is not a valid message (no recipient, empty subject, a field too long).
    #[error("mail: invalid message: {field}: {why}")]
    InvalidDraft {
        /// The draft field at fault (`to`, `subject`, `body`, `threadId`, …).
        field: &'static str,
        /// What is wrong and what was expected.
        why: String,
    },
    /// A recipient is not registered in the group (no task of that name ever started).
    #[error("mail: unknown recipient `{task}` (known tasks: {known})")]
    UnknownRecipient {
        /// The recipient as given.
        task: String,
        /// The group's registered tasks, comma-separated (`none` when empty).
        known: String,
    },
    /// A recipient's session has ended: nothing would ever read the message.
    #[error("mail: recipient `{task}` has ended; nothing would read the message")]
    EndedRecipient {
        /// The recipient.
        task: String,
    },
    /// The caller is not a registered, live task of the group.
    #[error("mail: `{task}` is not a live task of this group")]
    NotRegistered {
        /// The caller.
        task: String,
    },
    /// The message is larger than `[mail].max_message_bytes`.
    #[error("mail: message of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Its size in bytes (subject + body + thread fields).
        size: usize,
        /// The bound.
        limit: usize,
    },
    /// The sender reached `[mail].messages_per_minute`.
    #[error(
        "mail: `{task}` sent {limit} messages in the last minute (the limit); retry in {retry_after_secs} s"
    )]
    RateLimited {
        /// The sender.
        task: String,
        /// The bound.
        limit: u32,
        /// Seconds until a send would be accepted again.
        retry_after_secs: u64,
    },
    /// The sender's messages reached its share of the log (a quarter of
    /// `[mail].max_log_bytes`).
    #[error("mail: task `{task}` has used its share of the mail log ({used} of {limit} bytes)")]
    ShareUsed {
        /// The sender.
        task: String,
        /// Bytes of its accepted messages.
        used: u64,
        /// Its share.
        limit: u64,
    },
    /// The group's log reached `[mail].max_log_bytes`.
    #[error("mail: the log {} is full ({size} of {limit} bytes)", path.display())]
    LogFull {
        /// The log file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// No message with this id is addressed to the caller (or, for the host, exists).
    #[error("mail: no message `{id}`{}", if *for_task { " addressed to you" } else { "" })]
    NoSuchMessage {
        /// The id as given.
        id: String,
        /// Whether the lookup was a task's (which sees only its own messages).
        for_task: bool,
    },
    /// A host action does not apply to the message's current state (forwarding a message
    /// that is not held, replying to the mediator).
    #[error("mail: message `{id}`: {why}")]
    WrongState {
        /// The message.
        id: String,
        /// What state it is in and what the action needs.
        why: String,
    },
    /// A client id was reused for a different message.
    #[error("mail: client id `{id}` was already used for a different message")]
    ClientIdReused {
        /// The client id.
        id: String,
    },
    /// `[mail]` in config.toml is not valid.
    #[error("config.toml: [mail].{field}: {why}")]
    Policy {
        /// The property path under `[mail]` (`rules[2].from`, `default`, …).
        field: String,
        /// What is wrong and what was expected.
        why: String,
    },
    /// The workspace names no group (not a git repository devcell can read).
    #[error("mail: no group for `{}`: {why}", folder.display())]
    NoGroup {
        /// The workspace folder.
        folder: PathBuf,
        /// Why.
        why: String,
    },
    /// A line of the log is not a valid event (not a torn last line: that is recovered).
    #[error("mail: {}:{line}: corrupt log line: {why}", path.display())]
    CorruptLog {
        /// The log file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        why: String,
    },
    /// A file or folder of the mail store could not be created, read, written or locked.
    #[error("mail: {}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl MailError {
    /// A stable, machine-readable code (`mail.unknown_recipient`, …).
    pub fn code(&self) -> &'static str {
        match self {
            MailError::InvalidName { .. } => "mail.invalid_name",
            MailError::InvalidDraft { .. } => "mail.invalid_message",
            MailError::UnknownRecipient { .. } => "mail.unknown_recipient",
            MailError::EndedRecipient { .. } => "mail.ended_recipient",
            MailError::NotRegistered { .. } => "mail.not_registered",
            MailError::TooLarge { .. } => "mail.too_large",
            MailError::RateLimited { .. } => "mail.rate_limited",
            MailError::LogFull { .. } => "mail.log_full",
            MailError::ShareUsed { .. } => "mail.share_used",
            MailError::NoSuchMessage { .. } => "mail.no_such_message",
            MailError::WrongState { .. } => "mail.wrong_state",
            MailError::ClientIdReused { .. } => "mail.client_id_reused",
            MailError::Policy { .. } => "mail.policy",
            MailError::NoGroup { .. } => "mail.no_group",
            MailError::CorruptLog { .. } => "mail.corrupt_log",
            MailError::Io { .. } => "mail.io",
        }
    }

    /// What the caller can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            MailError::InvalidName { .. } => {
                "use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
            }
            MailError::InvalidDraft { .. } => "fix the field and send again",
            MailError::UnknownRecipient { .. } => {
                "address a task of this group by its task name; nothing was sent"
            }
            MailError::EndedRecipient { .. } => {
                "the task is gone; ask the host user (`devcell mail`) instead; nothing was sent"
            }
            MailError::NotRegistered { .. } => "only a running task of the group can use mail",
            MailError::TooLarge { .. } => {
                "shorten the body, or put large content in a file of your branch and name it"
            }
            MailError::RateLimited { .. } => "wait and send again; nothing was sent",
            MailError::ShareUsed { .. } => {
                "nothing was sent; put large content in a file of your branch and name it, or ask the host user to raise [mail].max_log_bytes"
            }
            MailError::LogFull { .. } => {
                "the host user must raise [mail].max_log_bytes or remove the workspace's state"
            }
            MailError::NoSuchMessage { .. } => "list your messages with `inbox` (or `mail list`)",
            MailError::WrongState { .. } => "see the message's state with `mail show ID`",
            MailError::ClientIdReused { .. } => "use a new client id for a new message",
            MailError::Policy { .. } => "fix [mail] in config.toml (see docs/mail.md)",
            MailError::NoGroup { .. } => {
                "give the source repository as --workspace-folder, or name the group with --mail-group"
            }
            MailError::CorruptLog { .. } => {
                "the log was edited or damaged; move it aside to start a new one (see docs/mail.md)"
            }
            MailError::Io { .. } => "check the state folder's permissions and free space",
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> MailError {
        let path = path.into();
        move |source| MailError::Io { path, source }
    }
}

/// Result of the mail layer.
pub type Result<T, E = MailError> = std::result::Result<T, E>;
