//! The group's append-only log (`<state>/mail/<group>/log.jsonl`) and the state replayed from
//! it. Every call is one transaction under an exclusive `flock(2)` on `log.lock`: read the
//! lines other processes appended since, decide, append the new events in one write, fsync,
//! release. So concurrent sessions append safely and a killed devcell loses nothing it
//! acknowledged. A last line without its newline (devcell killed mid-write, so that call never
//! returned) is moved to `torn-<offset>.jsonl` beside the log and a `torn-tail` event records
//! it: detected and reported, never silently dropped.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::error::{MailError, Result};
use super::escalate::EscalationRun;
use super::model::{
    Delivery, EscalationEnd, EscalationState, EscalationStatus, GroupName, Message, MessageId,
    MessageView, Party, RecipientState, TaskInfo, TaskName,
};
use super::policy::Action;

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// 1-based position in the log.
    pub seq: u64,
    /// When it was appended.
    pub at: DateTime<Utc>,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// A policy decision for one recipient, as logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoggedDecision {
    /// The action.
    pub action: Action,
    /// The deciding rule's index in `[[mail.rules]]` (`None`: the default, or the mediator's
    /// own message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<usize>,
}

/// Everything the log records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "event",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// A task joined the group (its session started).
    Registered {
        /// The task.
        task: TaskName,
        /// Its branch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
    },
    /// A task's session ended: it receives nothing more.
    Ended {
        /// The task.
        task: TaskName,
    },
    /// A message was accepted, with the policy's decision per recipient.
    Accepted {
        /// The message.
        message: Message,
        /// Whether its id was the sender's client id.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        client_id: bool,
        /// The policy decision per recipient.
        decisions: BTreeMap<TaskName, LoggedDecision>,
        /// Whether the user's escalation command is due for it (a command was configured and
        /// a recipient was escalated): until an `escalation-started` line follows, it is due,
        /// also after devcell was killed (spec-note 0533).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        escalate_command: bool,
    },
    /// A send was refused (the message is not kept: only its size and the reason).
    Refused {
        /// The caller.
        from: Party,
        /// The client id, when one was given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<MessageId>,
        /// [`MailError::code`].
        code: String,
        /// The error message.
        reason: String,
    },
    /// A message's state changed for one recipient.
    State {
        /// The message.
        id: MessageId,
        /// The recipient.
        task: TaskName,
        /// The new state.
        state: RecipientState,
        /// Who changed it: a task name, `@host` (the host user) or `@lease` (a lease ran out).
        by: String,
        /// Until when the read's lease runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease_until: Option<DateTime<Utc>>,
        /// Why (rejected, dropped, redelivered).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The user's escalation command is about to run for an escalated message (spec-note
    /// 0533): the claim, appended under the log's lock, so it runs at most once whichever
    /// devcell runs it.
    EscalationStarted {
        /// The message.
        id: MessageId,
        /// The recipients it is escalated for.
        to: Vec<TaskName>,
    },
    /// The user's escalation command ran for an escalated message (spec-note 0533); the
    /// message stays held whatever it did.
    EscalationRan {
        /// The message.
        id: MessageId,
        /// The recipients it was escalated for.
        to: Vec<TaskName>,
        /// What the command did.
        #[serde(flatten)]
        run: EscalationRun,
    },
    /// A torn last line was found and moved aside.
    TornTail {
        /// Its length in bytes.
        bytes: u64,
        /// The file it was moved to.
        saved_to: PathBuf,
    },
}

/// A message and its deliveries, as replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The message.
    pub message: Message,
    /// Whether the id was a client id (for deduplication).
    pub client_id: bool,
    /// Delivery per recipient.
    pub recipients: BTreeMap<TaskName, Delivery>,
    /// The user's escalation command for it (`None`: none was due).
    pub escalation: Option<EscalationStatus>,
}

impl Entry {
    /// The view of it (message and deliveries) a task may see: nothing of the escalation
    /// command, whose outcome is the host user's.
    pub fn view(&self) -> MessageView {
        MessageView {
            message: self.message.clone(),
            recipients: self.recipients.clone(),
            escalation: None,
        }
    }

    /// The host user's view: with the escalation command's state.
    pub fn host_view(&self) -> MessageView {
        MessageView {
            escalation: self.escalation.clone(),
            ..self.view()
        }
    }

    /// The recipients policy escalated.
    pub fn escalated_to(&self) -> Vec<TaskName> {
        self.recipients
            .iter()
            .filter(|(_, d)| d.escalated)
            .map(|(t, _)| t.clone())
            .collect()
    }
}

/// The state the log replays to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Registered tasks, by name.
    pub tasks: BTreeMap<TaskName, TaskInfo>,
    /// Messages in acceptance order.
    pub messages: IndexMap<MessageId, Entry>,
    /// Times of each task's accepted sends within the last minute or so (for the rate bound).
    pub recent_sends: BTreeMap<TaskName, VecDeque<DateTime<Utc>>>,
    /// Times of each caller's logged refusals within the last minute or so (refusals past the
    /// rate bound are answered but not logged, so refused sends cannot fill the log).
    pub recent_refusals: BTreeMap<Party, VecDeque<DateTime<Utc>>>,
    /// Bytes of subject and body each task has had accepted (its share of the log).
    pub sent_bytes: BTreeMap<TaskName, u64>,
    /// Torn tails moved aside so far.
    pub torn: Vec<PathBuf>,
    /// The last line's `seq`.
    pub seq: u64,
}

impl State {
    /// Applies one line.
    pub fn apply(&mut self, line: &LogLine) {
        self.seq = line.seq;
        match &line.event {
            Event::Registered { task, branch } => {
                self.tasks.insert(
                    task.clone(),
                    TaskInfo {
                        task: task.clone(),
                        branch: branch.clone(),
                        ended: false,
                    },
                );
            }
            Event::Ended { task } => {
                if let Some(t) = self.tasks.get_mut(task) {
                    t.ended = true;
                }
            }
            Event::Accepted {
                message,
                client_id,
                decisions,
                escalate_command,
            } => self.accepted(line.at, message, *client_id, decisions, *escalate_command),
            Event::Refused { from, .. } => self.refused(from, line.at),
            Event::State {
                id,
                task,
                state,
                lease_until,
                reason,
                ..
            } => {
                if let Some(d) = self
                    .messages
                    .get_mut(id)
                    .and_then(|e| e.recipients.get_mut(task))
                {
                    delivery_changed(d, line.at, *state, *lease_until, reason);
                }
            }
            Event::TornTail { saved_to, .. } => self.torn.push(saved_to.clone()),
            // records for the host user: no delivery changes (the message stays held)
            Event::EscalationStarted { id, .. } => {
                if let Some(e) = self.messages.get_mut(id) {
                    e.escalation = Some(EscalationStatus {
                        at: Some(line.at),
                        ..escalation(EscalationState::Started)
                    });
                }
            }
            Event::EscalationRan { id, run, .. } => {
                if let Some(e) = self.messages.get_mut(id) {
                    e.escalation = Some(EscalationStatus {
                        state: EscalationState::Ran,
                        at: Some(line.at),
                        end: run.end.clone(),
                    });
                }
            }
        }
    }

    /// An accepted message: its deliveries as the policy decided them ([`deliveries`]), the
    /// sender's share of the log and recent sends ([`State::sent`]), and its escalation due
    /// when `escalate_command`.
    fn accepted(
        &mut self,
        at: DateTime<Utc>,
        message: &Message,
        client_id: bool,
        decisions: &BTreeMap<TaskName, LoggedDecision>,
        escalate_command: bool,
    ) {
        if let Party::Task(from) = &message.from {
            self.sent(from, at, message);
        }
        self.messages.insert(
            message.id.clone(),
            Entry {
                message: message.clone(),
                client_id,
                recipients: deliveries(decisions),
                escalation: escalate_command.then(|| escalation(EscalationState::Pending)),
            },
        );
    }

    /// A task's accepted send: its bytes of subject and body counted, its send time kept for
    /// the rate bound (the last two minutes of them, as of `at`).
    fn sent(&mut self, from: &TaskName, at: DateTime<Utc>, message: &Message) {
        *self.sent_bytes.entry(from.clone()).or_default() +=
            (logged_len(&message.subject) + logged_len(&message.body)) as u64;
        let sends = self.recent_sends.entry(from.clone()).or_default();
        sends.push_back(message.created_at);
        while sends
            .front()
            .is_some_and(|t| at - *t > chrono::Duration::minutes(2))
        {
            sends.pop_front();
        }
    }

    /// A logged refusal of `from` at `at`, kept for the refusal bound (the last minute of them).
    fn refused(&mut self, from: &Party, at: DateTime<Utc>) {
        let refusals = self.recent_refusals.entry(from.clone()).or_default();
        refusals.push_back(at);
        while refusals
            .front()
            .is_some_and(|t| at - *t > chrono::Duration::minutes(1))
        {
            refusals.pop_front();
        }
    }
}

/// The deliveries of an accepted message, one per recipient, as the policy decided them
/// (an escalated one is held until the user decides).
fn deliveries(decisions: &BTreeMap<TaskName, LoggedDecision>) -> BTreeMap<TaskName, Delivery> {
    decisions
        .iter()
        .map(|(task, d)| {
            let (state, escalated) = match d.action {
                Action::Forward => (RecipientState::Queued, false),
                Action::Hold => (RecipientState::Held, false),
                Action::Escalate => (RecipientState::Held, true),
                Action::Drop => (RecipientState::Dropped, false),
            };
            let mut delivery = Delivery::new(state, escalated);
            if d.action == Action::Drop {
                delivery.reason = Some("dropped by policy".into());
            }
            (task.clone(), delivery)
        })
        .collect()
}

/// One recipient's delivery moved to `state` at `at`: its lease, its reason when one is given,
/// and the times of delivery, reading and acknowledgement.
fn delivery_changed(
    d: &mut Delivery,
    at: DateTime<Utc>,
    state: RecipientState,
    lease_until: Option<DateTime<Utc>>,
    reason: &Option<String>,
) {
    d.state = state;
    d.lease_until = lease_until;
    if reason.is_some() {
        d.reason.clone_from(reason);
    }
    match state {
        RecipientState::Delivered => {
            d.delivered_at.get_or_insert(at);
        }
        RecipientState::Read => {
            d.delivered_at.get_or_insert(at);
            d.read_at = Some(at);
            d.reads += 1;
        }
        RecipientState::Acknowledged => {
            d.acknowledged_at = Some(at);
            d.lease_until = None;
        }
        _ => {}
    }
}

/// An escalation in `state` with nothing run yet.
fn escalation(state: EscalationState) -> EscalationStatus {
    EscalationStatus {
        state,
        at: None,
        end: EscalationEnd::default(),
    }
}

struct Cache {
    state: State,
    /// Bytes of the log replayed into `state`.
    offset: u64,
    /// Lines of the log replayed into `state` (for the line number of a corrupt one).
    lines: usize,
}

/// The group's log and its replayed state.
pub struct Store {
    dir: PathBuf,
    log: PathBuf,
    lock: PathBuf,
    max_log_bytes: u64,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("log", &self.log).finish()
    }
}

/// `<state_root>/mail/<group>`: the group's folder (log, lock, torn tails).
pub fn group_dir(state_root: &Path, group: &GroupName) -> PathBuf {
    state_root.join("mail").join(group.as_str())
}

impl Store {
    /// Opens (creating, mode 0700/0600) the group's log and replays it; a torn last line is
    /// moved aside and recorded.
    ///
    /// # Errors
    /// [`MailError::Io`], [`MailError::CorruptLog`].
    pub fn open(state_root: &Path, group: &GroupName, max_log_bytes: u64) -> Result<Store> {
        let dir = group_dir(state_root, group);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(MailError::io(&dir))?;
        let store = Store {
            log: dir.join("log.jsonl"),
            lock: dir.join("log.lock"),
            dir,
            max_log_bytes,
            cache: Mutex::new(Cache {
                state: State::default(),
                offset: 0,
                lines: 0,
            }),
        };
        store.transact(Utc::now(), |_| (Vec::new(), Ok(())))?;
        Ok(store)
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// A copy of the state as of the last transaction (call [`Store::transact`] to catch up
    /// with other processes first).
    pub fn snapshot(&self) -> State {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .state
            .clone()
    }

    /// Replays the whole log from the start into a fresh state (what a new devcell sees).
    ///
    /// # Errors
    /// [`MailError::Io`], [`MailError::CorruptLog`] (a torn tail is reported as corrupt here:
    /// this reads only).
    pub fn replay(path: &Path) -> Result<State> {
        let mut text = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut text))
            .map_err(MailError::io(path))?;
        let mut state = State::default();
        let (lines, used) = parse_lines(path, &text, 1)?;
        if used < text.len() {
            return Err(MailError::CorruptLog {
                path: path.to_path_buf(),
                line: lines.len() + 1,
                why: "torn last line (no newline): devcell was killed while appending".into(),
            });
        }
        for line in &lines {
            state.apply(line);
        }
        Ok(state)
    }

    /// One transaction: under the lock, catches up with the log, calls `decide` with the state
    /// at `now`, appends the events it returns (even when its result is an error: refusals
    /// are recorded) in one fsync'd write, and returns its result.
    ///
    /// # Errors
    /// [`MailError::Io`], [`MailError::CorruptLog`], [`MailError::LogFull`] (nothing appended),
    /// or `decide`'s error.
    pub fn transact<T>(
        &self,
        now: DateTime<Utc>,
        decide: impl FnOnce(&State) -> (Vec<Event>, Result<T>),
    ) -> Result<T> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let _lock = self.take_lock()?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.log)
            .map_err(MailError::io(&self.log))?;
        self.catch_up(&mut cache, &mut file, now)?;
        let (events, result) = decide(&cache.state);
        self.append(&mut cache, &mut file, now, events)?;
        result
    }

    fn take_lock(&self) -> Result<File> {
        use rustix::fs::{FlockOperation, flock};
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.lock)
            .map_err(MailError::io(&self.lock))?;
        flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| MailError::io(&self.lock)(e.into()))?;
        Ok(file)
    }

    /// Reads what was appended since `cache.offset`; a torn tail is moved aside.
    fn catch_up(&self, cache: &mut Cache, file: &mut File, now: DateTime<Utc>) -> Result<()> {
        let len = file.metadata().map_err(MailError::io(&self.log))?.len();
        if len < cache.offset {
            // The log was replaced behind our back: replay it whole.
            cache.state = State::default();
            cache.offset = 0;
            cache.lines = 0;
        }
        if len == cache.offset {
            return Ok(());
        }
        let mut text = Vec::new();
        file.seek(SeekFrom::Start(cache.offset))
            .and_then(|_| file.read_to_end(&mut text))
            .map_err(MailError::io(&self.log))?;
        let (lines, used) = parse_lines(&self.log, &text, cache.lines + 1)?;
        for line in &lines {
            cache.state.apply(line);
        }
        cache.offset += used as u64;
        cache.lines += lines.len();
        if (used as u64) < text.len() as u64 {
            self.move_torn_tail(cache, file, &text[used..], now)?;
        }
        Ok(())
    }

    fn move_torn_tail(
        &self,
        cache: &mut Cache,
        file: &mut File,
        tail: &[u8],
        now: DateTime<Utc>,
    ) -> Result<()> {
        let saved_to = self.dir.join(format!("torn-{}.jsonl", cache.offset));
        let mut saved = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&saved_to)
            .map_err(MailError::io(&saved_to))?;
        saved
            .write_all(tail)
            .and_then(|()| saved.sync_all())
            .map_err(MailError::io(&saved_to))?;
        file.set_len(cache.offset)
            .and_then(|()| file.sync_all())
            .map_err(MailError::io(&self.log))?;
        let event = Event::TornTail {
            bytes: tail.len() as u64,
            saved_to,
        };
        self.append(cache, file, now, vec![event])
    }

    fn append(
        &self,
        cache: &mut Cache,
        file: &mut File,
        now: DateTime<Utc>,
        events: Vec<Event>,
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut lines = Vec::with_capacity(events.len());
        let mut bytes = Vec::new();
        for (i, event) in events.into_iter().enumerate() {
            let line = LogLine {
                seq: cache.state.seq + 1 + i as u64,
                at: now,
                event,
            };
            serde_json::to_writer(&mut bytes, &line)
                .map_err(|e| MailError::io(&self.log)(e.into()))?;
            bytes.push(b'\n');
            lines.push(line);
        }
        let torn_record = matches!(lines[0].event, Event::TornTail { .. });
        if !torn_record && cache.offset + bytes.len() as u64 > room_for(&lines, self.max_log_bytes)
        {
            return Err(MailError::LogFull {
                path: self.log.clone(),
                size: cache.offset,
                limit: self.max_log_bytes,
            });
        }
        file.write_all(&bytes)
            .and_then(|()| file.sync_data())
            .map_err(MailError::io(&self.log))?;
        cache.offset += bytes.len() as u64;
        cache.lines += lines.len();
        for line in &lines {
            cache.state.apply(line);
        }
        Ok(())
    }
}

/// The length of `text` as the log stores it (JSON-escaped, without its quotes): a control
/// character takes six bytes there.
pub fn logged_len(text: &str) -> usize {
    serde_json::to_string(text).map_or(text.len(), |j| j.len() - 2)
}

/// The bytes the log may reach with `lines` appended: a session's start and end
/// (`registered`, `ended`) may use the whole bound, everything else stops a sixteenth short
/// of it, so a full log never refuses the next handoff or loses a task's end (issue 30, G2).
fn room_for(lines: &[LogLine], max_log_bytes: u64) -> u64 {
    let lifecycle = lines
        .iter()
        .all(|l| matches!(l.event, Event::Registered { .. } | Event::Ended { .. }));
    if lifecycle {
        max_log_bytes
    } else {
        max_log_bytes - max_log_bytes / 16
    }
}

/// Parses complete lines of `text`; returns them and the bytes they span (a last line without
/// its newline is not consumed).
fn parse_lines(path: &Path, text: &[u8], first_line: usize) -> Result<(Vec<LogLine>, usize)> {
    let mut lines = Vec::new();
    let mut used = 0;
    for (n, chunk) in text.split_inclusive(|b| *b == b'\n').enumerate() {
        if chunk.last() != Some(&b'\n') {
            break;
        }
        let line = serde_json::from_slice::<LogLine>(chunk).map_err(|e| MailError::CorruptLog {
            path: path.to_path_buf(),
            line: first_line + n,
            why: e.to_string(),
        })?;
        used += chunk.len();
        lines.push(line);
    }
    Ok((lines, used))
}
