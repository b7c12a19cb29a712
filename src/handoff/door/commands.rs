//! What `devcell-mail` means (issue 30; spec-note 0531): its command line, parsed on the host
//! with clap, and each command answered through the group's [`Mediator`] as the task whose
//! socket it came through. Text for people by default; `--format json` prints the mediator's
//! own values with serde. Everything from another sandbox (subjects, bodies, task names) is
//! made terminal-safe in text output.
//!
//! Exit statuses: 0 done; 1 refused by the mediator (the error's code, message and hint on
//! standard error: nothing was sent); 2 a usage error.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::server::{Answer, DoorHandler, Input, InputError};
use crate::formats::terminal::{Sgr, printable};
use crate::mail::{
    Draft, Importance, InboxItem, MailError, Mediator, MessageId, MessageType, MessageView,
    TaskName,
};

/// Messages one `inbox` (the oldest) or `sent` (the newest) answer lists: with each message's
/// logged size bounded by `[mail].max_message_bytes` (64 KiB by default), an answer stays
/// within the client's 16 MiB frame and the host builds no answer larger than that (issue 30,
/// G3).
pub const MAX_LISTED: usize = 100;

/// `devcell-mail`: the in-sandbox command line.
#[derive(Debug, Parser)]
#[command(
    name = "devcell-mail",
    about = "Mail between the tasks of this workspace, through devcell's mediator on the host.",
    long_about = "Mail between the tasks of this workspace, through devcell's mediator on the \
                  host. Messages go to the mediator, never straight to another task: its policy \
                  forwards, holds (for the user) or drops each one, and every message and state \
                  change is logged on the host. You are always the sender: the task of this \
                  sandbox.",
    disable_version_flag = true,
    color = clap::ColorChoice::Never
)]
pub struct MailCommand {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Send a message to other tasks (prints its id).
    Send(SendArgs),
    /// List the messages waiting for you (not yet acknowledged; the oldest 100).
    Inbox(FormatArg),
    /// Show one message of your inbox (marks it read; acknowledge it with `ack` when it asks).
    Read {
        /// The message id.
        id: String,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Acknowledge a message of your inbox (idempotent).
    Ack {
        /// The message id.
        id: String,
    },
    /// Answer a message of your inbox (to its sender, in its thread; prints the new id).
    Reply(ReplyArgs),
    /// List the messages you sent and where each stands per recipient (the newest 100).
    Sent(FormatArg),
}

#[derive(Debug, Args)]
struct FormatArg {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct SendArgs {
    /// Recipient task(s), comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    to: Vec<String>,
    /// One line.
    #[arg(long)]
    subject: String,
    #[command(flatten)]
    body: BodyArgs,
    /// notice, request, reply, contract-change or handoff.
    #[arg(long = "type", default_value = "notice")]
    kind: String,
    /// The thread it continues (a message id).
    #[arg(long)]
    thread: Option<String>,
}

#[derive(Debug, Args)]
struct ReplyArgs {
    /// The message answered.
    id: String,
    /// One line (default: `Re: ` and the original's subject).
    #[arg(long)]
    subject: Option<String>,
    #[command(flatten)]
    body: BodyArgs,
    /// The reply's type.
    #[arg(long = "type", default_value = "reply")]
    kind: String,
}

#[derive(Debug, Args)]
struct BodyArgs {
    /// The body (Markdown); without it, the body is read from standard input.
    #[arg(long)]
    body: Option<String>,
    /// The recipient must acknowledge it (redelivered until then).
    #[arg(long)]
    ack_required: bool,
    /// low, normal, high or urgent.
    #[arg(long, value_enum, default_value_t = ImportanceArg::Normal)]
    importance: ImportanceArg,
    /// Your own id for this message: sending again with the same id (after a broken
    /// connection) is not a second message.
    #[arg(long)]
    client_id: Option<String>,
    /// Print the receipt as JSON.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ImportanceArg {
    Low,
    Normal,
    High,
    Urgent,
}

impl From<ImportanceArg> for Importance {
    fn from(i: ImportanceArg) -> Importance {
        match i {
            ImportanceArg::Low => Importance::Low,
            ImportanceArg::Normal => Importance::Normal,
            ImportanceArg::High => Importance::High,
            ImportanceArg::Urgent => Importance::Urgent,
        }
    }
}

/// The [`DoorHandler`] of one task's socket: it answers through the group's mediator and
/// counts what went through (the session's record of its channel, spec-note 0532).
#[derive(Debug)]
pub struct MailDoor {
    mediator: Arc<Mediator>,
    max_body: usize,
    counts: Mutex<Tally>,
}

/// What went through one task's socket (see [`super::ChannelRecord`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Messages posted and accepted.
    pub posted: u64,
    /// Distinct messages handed to the task.
    pub delivered: u64,
    /// Commands the mediator refused.
    pub refused: u64,
    /// Connections refused before a command ran.
    pub malformed: u64,
}

/// The counts, the ids already handed over, and the malformed connections logged this minute.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
    delivered: HashSet<MessageId>,
    logged_minute: Option<Instant>,
    logged_in_minute: u32,
    /// When each task's recent non-send commands ran (the last minute's).
    polls: std::collections::HashMap<String, std::collections::VecDeque<Instant>>,
}

/// Commands other than `send` and `reply` (`inbox`, `read`, `ack`, `sent`) one task may run
/// per minute: sends have `[mail].messages_per_minute`, and an agent polling its inbox in a
/// tight loop would otherwise keep the mediator (and the log it reads) busy without bound.
/// Ten a second is far above any sensible polling.
pub const COMMANDS_PER_MINUTE: usize = 600;

/// Malformed connections written to the group's log per minute and task: a sandbox looping on
/// garbage fills neither the log nor the disk; the rest are only counted.
pub const MALFORMED_LOGGED_PER_MINUTE: u32 = 10;

impl MailDoor {
    /// Answers through `mediator`; a body from standard input may be `max_body` bytes
    /// (`[mail].max_message_bytes`: the mediator checks the whole message again).
    pub fn new(mediator: Arc<Mediator>, max_body: usize) -> MailDoor {
        MailDoor {
            mediator,
            max_body,
            counts: Mutex::new(Tally::default()),
        }
    }

    /// What went through the socket so far.
    pub fn counts(&self) -> Counts {
        self.tally().counts
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Some(seconds until one is allowed again)` when `sender` ran [`COMMANDS_PER_MINUTE`]
    /// non-send commands in the last minute; else the command is counted and `None`.
    fn polled_too_often(&self, sender: &str) -> Option<u64> {
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let mut t = self.tally();
        let recent = t.polls.entry(sender.to_string()).or_default();
        while recent
            .front()
            .is_some_and(|at| now.duration_since(*at) >= minute)
        {
            recent.pop_front();
        }
        if recent.len() >= COMMANDS_PER_MINUTE {
            let oldest = recent.front().copied().unwrap_or(now);
            let left = minute.saturating_sub(now.duration_since(oldest));
            return Some(left.as_secs().max(1));
        }
        recent.push_back(now);
        None
    }

    /// Counts one command's outcome.
    fn count(&self, outcome: &Result<(String, Done), Refusal>) {
        let mut t = self.tally();
        match outcome {
            Ok((_, Done::Posted { duplicate: false })) => t.counts.posted += 1,
            Ok((_, Done::Handed(ids))) => {
                for id in ids {
                    if t.delivered.insert(id.clone()) {
                        t.counts.delivered += 1;
                    }
                }
            }
            Ok(_) => {}
            Err(Refusal::Mail(_)) => t.counts.refused += 1,
            Err(Refusal::Usage(_)) => {}
        }
    }
}

impl DoorHandler for MailDoor {
    fn handle(&self, sender: &str, argv: &[String], input: &mut dyn Input) -> Answer {
        let parsed = MailCommand::try_parse_from(
            std::iter::once("devcell-mail").chain(argv.iter().map(String::as_str)),
        );
        let cmd = match parsed {
            Ok(cmd) => cmd,
            Err(e) => {
                let text = e.render().to_string();
                return if e.use_stderr() {
                    Answer::fail(2, text)
                } else {
                    Answer::ok(text)
                };
            }
        };
        let me = match TaskName::new(sender) {
            Ok(me) => me,
            Err(e) => return refusal(&e),
        };
        if !matches!(cmd.command, Command::Send(_) | Command::Reply(_))
            && let Some(retry) = self.polled_too_often(sender)
        {
            self.tally().counts.refused += 1;
            return Answer::fail(
                1,
                format!(
                    "devcell-mail: error[mail.rate_limited]: mail: `{me}` ran {COMMANDS_PER_MINUTE} inbox, read, ack or sent commands in the last minute (the limit); retry in {retry} s\nhint: poll `inbox` less often; nothing was changed\n"
                ),
            );
        }
        let outcome = self.run(&me, cmd.command, input);
        self.count(&outcome);
        match outcome {
            Ok((text, _)) => Answer::ok(text),
            Err(Refusal::Mail(e)) => refusal(&e),
            Err(Refusal::Usage(why)) => Answer::fail(2, format!("devcell-mail: {why}\n")),
        }
    }

    /// A malformed connection never became a message: it is counted, and written to the
    /// group's log with the task and why (at most [`MALFORMED_LOGGED_PER_MINUTE`] a minute;
    /// spec-note 0532); the server closes it.
    fn refused(&self, sender: &str, why: &str) {
        let log = {
            let mut t = self.tally();
            t.counts.malformed += 1;
            let now = Instant::now();
            let fresh = t
                .logged_minute
                .is_none_or(|m| now.duration_since(m) >= Duration::from_secs(60));
            if fresh {
                t.logged_minute = Some(now);
                t.logged_in_minute = 0;
            }
            t.logged_in_minute += 1;
            t.logged_in_minute <= MALFORMED_LOGGED_PER_MINUTE
        };
        if log && let Ok(task) = TaskName::new(sender) {
            let _ = self.mediator.record_malformed(&task, why);
        }
    }
}

/// What a command did, for its answer and the counts.
enum Done {
    /// A message accepted (or a retried send's first receipt).
    Posted { duplicate: bool },
    /// Messages handed to the task (`inbox`, `read`).
    Handed(Vec<MessageId>),
    /// Anything else.
    Other,
}

/// Why a command did nothing.
enum Refusal {
    Mail(MailError),
    Usage(String),
}

impl From<MailError> for Refusal {
    fn from(e: MailError) -> Refusal {
        Refusal::Mail(e)
    }
}

/// The mediator's refusal for the sandbox: code, message, hint; host paths are not shown.
fn refusal(e: &MailError) -> Answer {
    let message = match e {
        MailError::Io { .. } | MailError::CorruptLog { .. } => {
            "mail: devcell could not read or write the mail log on the host (the host user sees why with `devcell mail list`)".to_string()
        }
        MailError::LogFull { .. } => {
            "mail: the group's mail log on the host is full".to_string()
        }
        MailError::NoGroup { .. } => "mail: the task's workspace names no mail group".to_string(),
        other => other.to_string(),
    };
    Answer::fail(
        1,
        format!(
            "devcell-mail: error[{}]: {}\nhint: {}\n",
            e.code(),
            printable(&message, Sgr::Escape),
            e.hint()
        ),
    )
}

fn id_of(text: &str) -> Result<MessageId, Refusal> {
    Ok(MessageId::new(text)?)
}

fn json(value: &impl serde::Serialize) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

impl MailDoor {
    fn run(
        &self,
        me: &TaskName,
        command: Command,
        input: &mut dyn Input,
    ) -> Result<(String, Done), Refusal> {
        let m = &*self.mediator;
        match command {
            Command::Send(args) => {
                let to = args
                    .to
                    .iter()
                    .map(|t| TaskName::new(t.trim()))
                    .collect::<Result<Vec<_>, _>>()?;
                let kind: MessageType = args.kind.parse()?;
                let mut draft = self.draft(to, kind, &args.subject, &args.body, input)?;
                draft.thread_id = args.thread.as_deref().map(id_of).transpose()?;
                let receipt = m.send(me, draft)?;
                let done = Done::Posted {
                    duplicate: receipt.duplicate,
                };
                Ok((receipt_text(&receipt, args.body.format), done))
            }
            Command::Reply(args) => {
                let id = id_of(&args.id)?;
                let kind: MessageType = args.kind.parse()?;
                let subject = match args.subject {
                    Some(s) => s,
                    None => self.reply_subject(me, &id)?,
                };
                let draft = self.draft(Vec::new(), kind, &subject, &args.body, input)?;
                let receipt = m.reply(me, &id, draft)?;
                let done = Done::Posted {
                    duplicate: receipt.duplicate,
                };
                Ok((receipt_text(&receipt, args.body.format), done))
            }
            Command::Inbox(f) => {
                // the oldest first: they are the ones to handle, and acking brings the next
                let items = m.inbox_page(me, MAX_LISTED)?;
                let text = match f.format {
                    Format::Json => json(&items),
                    Format::Text => inbox_text(&items),
                };
                let ids = items.iter().map(|i| i.message.id.clone()).collect();
                Ok((text, Done::Handed(ids)))
            }
            Command::Read { id, format } => {
                let item = m.read(me, &id_of(&id)?)?;
                let text = match format.format {
                    Format::Json => json(&item),
                    Format::Text => message_text(&item),
                };
                Ok((text, Done::Handed(vec![item.message.id.clone()])))
            }
            Command::Ack { id } => {
                let state = m.ack(me, &id_of(&id)?)?;
                Ok((format!("{id} {}\n", state_word(state)), Done::Other))
            }
            Command::Sent(f) => {
                let views = m.sent_page(me, MAX_LISTED)?;
                let text = match f.format {
                    Format::Json => json(&views),
                    Format::Text => sent_text(&views),
                };
                Ok((text, Done::Other))
            }
        }
    }

    /// The draft of a send or reply: the body from `--body`, else standard input (bounded).
    fn draft(
        &self,
        to: Vec<TaskName>,
        kind: MessageType,
        subject: &str,
        args: &BodyArgs,
        input: &mut dyn Input,
    ) -> Result<Draft, Refusal> {
        let body = match &args.body {
            Some(b) => b.clone(),
            None => {
                let bytes = input.read(self.max_body).map_err(|e| match e {
                    InputError::TooLarge { max } => Refusal::Mail(MailError::TooLarge {
                        size: max + 1,
                        limit: max,
                    }),
                    InputError::Channel(why) => Refusal::Usage(why),
                })?;
                String::from_utf8(bytes).map_err(|_| {
                    Refusal::Usage("the body on standard input is not UTF-8 text".into())
                })?
            }
        };
        let mut draft = Draft::new(to, kind, subject, &body);
        draft.ack_required = args.ack_required;
        draft.importance = args.importance.into();
        draft.client_id = args.client_id.as_deref().map(id_of).transpose()?;
        Ok(draft)
    }

    /// `Re: <subject>` of a message addressed to `me` (a message not addressed to it is left
    /// for `reply` to refuse, with nothing of it shown).
    fn reply_subject(&self, me: &TaskName, id: &MessageId) -> Result<String, Refusal> {
        match self.mediator.show(id) {
            Ok(view) if view.recipients.contains_key(me) => {
                let s = view.message.subject;
                Ok(if s.starts_with("Re: ") {
                    s
                } else {
                    format!("Re: {s}")
                })
            }
            _ => Ok("Re:".to_string()),
        }
    }
}

fn state_word(state: crate::mail::RecipientState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn receipt_text(receipt: &crate::mail::Receipt, format: Format) -> String {
    if format == Format::Json {
        return json(receipt);
    }
    let mut s = format!("{}\n", receipt.id);
    for (task, state) in &receipt.recipients {
        let _ = writeln!(s, "  {task}: {}", state_word(*state));
    }
    s
}

fn inbox_text(items: &[InboxItem]) -> String {
    if items.is_empty() {
        return "no messages\n".to_string();
    }
    let mut s = String::new();
    for i in items {
        let m = &i.message;
        let _ = writeln!(
            s,
            "{}  {}  from {}  [{}{}]  {}",
            m.id,
            state_word(i.state),
            m.from,
            m.kind.as_str(),
            if m.ack_required { ", ack required" } else { "" },
            printable(&m.subject, Sgr::Escape)
        );
    }
    s
}

fn message_text(item: &InboxItem) -> String {
    let m = &item.message;
    let mut s = String::new();
    let _ = writeln!(s, "id: {}", m.id);
    let _ = writeln!(s, "thread: {}", m.thread_id);
    if let Some(r) = &m.reply_to {
        let _ = writeln!(s, "reply-to: {r}");
    }
    let _ = writeln!(s, "from: {}", m.from);
    if let Some(b) = &m.sender_branch {
        let _ = writeln!(s, "branch: {}", printable(b, Sgr::Escape));
    }
    let to: Vec<&str> = m.to.iter().map(TaskName::as_str).collect();
    let _ = writeln!(s, "to: {}", to.join(", "));
    let _ = writeln!(s, "type: {}", m.kind.as_str());
    let _ = writeln!(s, "subject: {}", printable(&m.subject, Sgr::Escape));
    let _ = writeln!(s, "created: {}", m.created_at.to_rfc3339());
    if m.ack_required {
        let _ = writeln!(
            s,
            "ack required: run `devcell-mail ack {}` once handled",
            m.id
        );
    }
    let _ = writeln!(s, "\n{}", printable(&m.body, Sgr::Escape));
    s
}

fn sent_text(views: &[MessageView]) -> String {
    if views.is_empty() {
        return "no messages sent\n".to_string();
    }
    let mut s = String::new();
    for v in views {
        let states: Vec<String> = v
            .recipients
            .iter()
            .map(|(t, d)| format!("{t}: {}", state_word(d.state)))
            .collect();
        let _ = writeln!(
            s,
            "{}  [{}]  {}  ({})",
            v.message.id,
            v.message.kind.as_str(),
            printable(&v.message.subject, Sgr::Escape),
            states.join(", ")
        );
    }
    s
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn a_full_log_is_refused_without_naming_its_host_path() {
        let e = MailError::LogFull {
            path: "/home/user/.local/state/devcell/mail/abc/log.jsonl".into(),
            size: 10,
            limit: 10,
        };
        let answer = refusal(&e);
        let text = String::from_utf8(answer.stderr).unwrap();
        assert!(text.contains("mail.log_full"), "{text}");
        assert!(!text.contains("/home/user"), "{text}");
    }

    /// No refusal the sandbox gets names a host path: every error that carries one (the
    /// log's, the workspace's) is answered without it; the host log keeps the detail.
    #[test]
    fn no_refusal_to_the_sandbox_names_a_host_path() {
        let path = std::path::PathBuf::from("/home/user/.local/state/devcell/mail/abc/log.jsonl");
        let errors = [
            MailError::LogFull {
                path: path.clone(),
                size: 10,
                limit: 10,
            },
            MailError::CorruptLog {
                path: path.clone(),
                line: 3,
                why: "x".into(),
            },
            MailError::Io {
                path: path.clone(),
                source: std::io::Error::other("disk"),
            },
            MailError::NoGroup {
                folder: "/home/user/repo".into(),
                why: "x".into(),
            },
        ];
        for e in &errors {
            let text = String::from_utf8(refusal(e).stderr).unwrap();
            assert!(text.contains(e.code()), "{text}");
            assert!(!text.contains("/home/user"), "{e:?}: {text}");
        }
    }
}
