//! The mediator: the only door between the tasks of a group. Every call is one store
//! transaction (see [`super::store`]); a task sees only messages addressed to it (and its own
//! sent messages' states); the sender is always the caller's identity, never the draft's.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::error::{MailError, Result};
use super::escalate::{Escalation, EscalationRun};
use super::model::{
    Draft, EscalationState, GroupName, InboxItem, Message, MessageId, MessageView, Party, Receipt,
    RecipientState, SCHEMA_VERSION, TaskInfo, TaskMailSummary, TaskName,
};
use super::policy::{Action, Bounds, Policy};
use super::store::{Entry, Event, LoggedDecision, State, Store, logged_len};

/// The time source (a test injects one to run leases out).
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The code of a malformed connection's `refused` line ([`Mediator::record_malformed`]).
pub const MALFORMED_CONNECTION: &str = "mail.malformed_connection";

/// Who the host user's actions are logged as.
const HOST: &str = "@host";
/// Who a lease's expiry is logged as.
const LEASE: &str = "@lease";
/// Longest subject, in characters.
const MAX_SUBJECT_CHARS: usize = 200;
/// Most recipients of one message.
const MAX_RECIPIENTS: usize = 64;

/// Recipients of the mediator's own message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipients {
    /// These tasks.
    Tasks(Vec<TaskName>),
    /// Every registered task whose session has not ended (broadcast: a mediator action only).
    AllLive,
}

/// One group's mediator over its store. Share it (`Arc`) between sessions: calls serialize
/// on the store's lock.
pub struct Mediator {
    store: Store,
    group: GroupName,
    policy: Policy,
    bounds: Bounds,
    clock: Arc<dyn Clock>,
    escalation: Option<Escalation>,
}

impl std::fmt::Debug for Mediator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mediator")
            .field("group", &self.group)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Mediator {
    /// Opens the group's mediator under `state_root` (`<state_root>/mail/<group>/`), replaying
    /// its log.
    ///
    /// # Errors
    /// [`MailError::Io`], [`MailError::CorruptLog`].
    pub fn open(
        state_root: &Path,
        group: &GroupName,
        policy: Policy,
        bounds: Bounds,
    ) -> Result<Mediator> {
        Ok(Mediator {
            store: Store::open(state_root, group, bounds.max_log_bytes)?,
            group: group.clone(),
            policy,
            bounds,
            clock: Arc::new(SystemClock),
            escalation: None,
        })
    }

    /// The same mediator running `escalation` for each message its policy escalates (the
    /// user's `[mail] escalate_command`; `None`: no command).
    pub fn with_escalation(mut self, escalation: Option<Escalation>) -> Mediator {
        self.escalation = escalation;
        self
    }

    /// The same mediator with another clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Mediator {
        self.clock = clock;
        self
    }

    /// The group.
    pub fn group(&self) -> &GroupName {
        &self.group
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        self.store.log_path()
    }

    /// Torn tails found and moved aside so far (paths of the saved bytes).
    pub fn torn_tails(&self) -> Vec<std::path::PathBuf> {
        self.store.snapshot().torn
    }

    fn transact<T>(
        &self,
        decide: impl FnOnce(&State, DateTime<Utc>) -> (Vec<Event>, Result<T>),
    ) -> Result<T> {
        let now = self.clock.now();
        self.store.transact(now, |state| decide(state, now))
    }

    /// Registers `task` (its session started; again after an end: it is live again).
    ///
    /// # Errors
    /// Store errors.
    pub fn register(&self, task: &TaskName, branch: Option<&str>) -> Result<()> {
        self.transact(|state, _| {
            let same = state
                .tasks
                .get(task)
                .is_some_and(|t| !t.ended && t.branch.as_deref() == branch);
            let events = if same {
                Vec::new()
            } else {
                vec![Event::Registered {
                    task: task.clone(),
                    branch: branch.map(str::to_string),
                }]
            };
            (events, Ok(()))
        })
    }

    /// Ends `task`'s session: messages to it are refused from now on.
    ///
    /// # Errors
    /// [`MailError::NotRegistered`] for a task never registered; store errors.
    pub fn end(&self, task: &TaskName) -> Result<()> {
        self.transact(|state, _| match state.tasks.get(task) {
            None => (Vec::new(), Err(not_registered(task))),
            Some(t) if t.ended => (Vec::new(), Ok(())),
            Some(_) => (vec![Event::Ended { task: task.clone() }], Ok(())),
        })
    }

    /// Records that a connection on `task`'s socket was refused before any command ran
    /// (bad frames, oversize, not our protocol): a `refused` line with
    /// [`MALFORMED_CONNECTION`] and `why`, nothing of the connection's content (spec-note 0532).
    ///
    /// # Errors
    /// Store errors ([`MailError::LogFull`] included: a full log records nothing more).
    pub fn record_malformed(&self, task: &TaskName, why: &str) -> Result<()> {
        let reason: String = why.chars().take(300).collect();
        self.transact(|_, _| {
            let event = Event::Refused {
                from: Party::Task(task.clone()),
                client_id: None,
                code: MALFORMED_CONNECTION.to_string(),
                reason,
            };
            (vec![event], Ok(()))
        })
    }

    /// The group's registered tasks.
    ///
    /// # Errors
    /// Store errors.
    pub fn tasks(&self) -> Result<Vec<TaskInfo>> {
        self.transact(|state, _| (Vec::new(), Ok(state.tasks.values().cloned().collect())))
    }

    /// What is pending per registered task: unfinished messages and messages held for it
    /// (what `status` shows).
    ///
    /// # Errors
    /// Store errors.
    pub fn summary(&self) -> Result<Vec<TaskMailSummary>> {
        self.transact(|state, _| {
            let summaries = state
                .tasks
                .values()
                .map(|info| {
                    let mut s = TaskMailSummary {
                        task: info.task.clone(),
                        ended: info.ended,
                        unacknowledged: 0,
                        held: 0,
                        escalated: 0,
                    };
                    for entry in state.messages.values() {
                        let Some(d) = entry.recipients.get(&info.task) else {
                            continue;
                        };
                        match d.state {
                            RecipientState::Queued | RecipientState::Delivered => {
                                s.unacknowledged += 1;
                            }
                            RecipientState::Read if entry.message.ack_required => {
                                s.unacknowledged += 1;
                            }
                            RecipientState::Held => {
                                s.held += 1;
                                s.escalated += usize::from(d.escalated);
                            }
                            _ => {}
                        }
                    }
                    s
                })
                .collect();
            (Vec::new(), Ok(summaries))
        })
    }

    /// Sends `draft` from `from` (the caller's session identity). Accepted (and fsync'd) or
    /// refused with its error (the refusal is logged); a draft with a client id already
    /// accepted returns the first receipt (`duplicate`).
    ///
    /// # Errors
    /// [`MailError::NotRegistered`], [`MailError::InvalidDraft`], [`MailError::TooLarge`],
    /// [`MailError::UnknownRecipient`], [`MailError::EndedRecipient`],
    /// [`MailError::RateLimited`], [`MailError::ClientIdReused`], [`MailError::LogFull`], store
    /// errors.
    pub fn send(&self, from: &TaskName, draft: Draft) -> Result<Receipt> {
        self.send_prepared(from, draft, |_, _| Ok(()))
    }

    /// [`Mediator::send`] of `draft` once `prepare` has completed it from the log's state (in
    /// the same transaction); an error of `prepare` is a refusal, logged as the others.
    fn send_prepared(
        &self,
        from: &TaskName,
        mut draft: Draft,
        prepare: impl FnOnce(&State, &mut Draft) -> Result<()>,
    ) -> Result<Receipt> {
        let receipt = self.transact(|state, now| {
            let sender = Party::Task(from.clone());
            let client_id = draft.client_id.clone();
            if let Err(e) = prepare(state, &mut draft) {
                return self.refusal(state, now, sender, client_id, e);
            }
            match self.accept(state, now, &sender, draft) {
                Ok(outcome) => outcome,
                Err(e) => self.refusal(state, now, sender, client_id, e),
            }
        })?;
        self.escalate_accepted(&receipt);
        Ok(receipt)
    }

    /// Runs the escalation command for the message of `receipt` when the policy escalated it
    /// to a recipient: after it is held in the log and outside the log's lock (a command that
    /// runs `devcell mail list` does not wait on it), once (a deduplicated retry runs nothing),
    /// and logs what the command did (`escalation-ran`). Whatever it did, the message stays
    /// held. `None` when nothing ran.
    fn escalate_accepted(&self, receipt: &Receipt) -> Option<EscalationRun> {
        if receipt.duplicate {
            return None;
        }
        self.claim_and_run(&receipt.id, false)
    }

    /// Runs the escalation command of every message for which it is due and was never started
    /// (a devcell was killed between holding the message and running it), while the message
    /// is still held for an escalated recipient; oldest first. At most once per message, with
    /// any number of devcells doing this at once: each run is claimed by an
    /// `escalation-started` line under the log's lock. Called when a session's door opens
    /// (spec-note 0533). Returns the runs.
    pub fn run_unrun_escalations(&self) -> Vec<(MessageId, EscalationRun)> {
        if self.escalation.is_none() {
            return Vec::new();
        }
        let due: Vec<MessageId> = self
            .transact(|state, _| {
                let ids = state
                    .messages
                    .values()
                    .filter(|e| due_and_held(e))
                    .map(|e| e.message.id.clone())
                    .collect();
                (Vec::new(), Ok(ids))
            })
            .unwrap_or_default();
        due.into_iter()
            .filter_map(|id| self.claim_and_run(&id, true).map(|run| (id, run)))
            .collect()
    }

    /// Claims message `id`'s escalation run (an `escalation-started` line, appended only when
    /// none was, under the log's lock), runs the command and logs `escalation-ran`. A devcell
    /// killed while the command runs leaves the claim without an outcome: the command is not
    /// run again (at most once), and `mail show` says so. `only_held`: claim only while an
    /// escalated recipient is still held (a recovery; the host user may have decided since).
    fn claim_and_run(&self, id: &MessageId, only_held: bool) -> Option<EscalationRun> {
        let escalation = self.escalation.as_ref()?;
        let (message, to) = self
            .transact(|state, _| {
                let Some(e) = state.messages.get(id) else {
                    return (Vec::new(), Ok(None));
                };
                let due = if only_held {
                    due_and_held(e)
                } else {
                    is_due(e)
                };
                let to = e.escalated_to();
                if !due || to.is_empty() {
                    return (Vec::new(), Ok(None));
                }
                let claim = Event::EscalationStarted {
                    id: id.clone(),
                    to: to.clone(),
                };
                (vec![claim], Ok(Some((e.message.clone(), to))))
            })
            .ok()
            .flatten()?;
        let run = escalation.run(&self.group, &message, &to);
        let event = Event::EscalationRan {
            id: message.id.clone(),
            to,
            run: run.clone(),
        };
        // a full or unwritable log cannot take the record; the message is held all the same
        let _ = self.transact(|_, _| (vec![event], Ok(())));
        Some(run)
    }

    /// Replies to message `id` (addressed to `task`): to its sender (a reply to
    /// the mediator goes to the host user, `to` empty), in its thread. `draft.to`, `threadId`
    /// and `replyTo` are set from the original.
    ///
    /// # Errors
    /// As [`Mediator::send`], and [`MailError::NoSuchMessage`].
    pub fn reply(&self, task: &TaskName, id: &MessageId, draft: Draft) -> Result<Receipt> {
        self.send_prepared(task, draft, |state, draft| {
            let original = &visible_to_recipient(state, task, id)?.message;
            draft.to = match &original.from {
                Party::Task(t) => vec![t.clone()],
                Party::Mediator => Vec::new(),
            };
            draft.thread_id = Some(original.thread_id.clone());
            draft.reply_to = Some(original.id.clone());
            Ok(())
        })
    }

    /// The mediator's own message (the host user's `post`): no policy, no rate bound.
    ///
    /// # Errors
    /// [`MailError::InvalidDraft`] (also for a broadcast with no live task),
    /// [`MailError::TooLarge`], [`MailError::UnknownRecipient`], [`MailError::EndedRecipient`],
    /// store errors.
    pub fn post(&self, to: Recipients, mut draft: Draft) -> Result<Receipt> {
        self.transact(|state, now| {
            draft.to = match to {
                Recipients::Tasks(tasks) => tasks,
                Recipients::AllLive => state
                    .tasks
                    .values()
                    .filter(|t| !t.ended)
                    .map(|t| t.task.clone())
                    .collect(),
            };
            let client_id = draft.client_id.clone();
            match self.accept(state, now, &Party::Mediator, draft) {
                Ok(outcome) => outcome,
                Err(e) => self.refusal(state, now, Party::Mediator, client_id, e),
            }
        })
    }

    /// Checks and accepts a draft: the `Accepted` event and its receipt, or why not.
    fn accept(
        &self,
        state: &State,
        now: DateTime<Utc>,
        from: &Party,
        draft: Draft,
    ) -> Result<(Vec<Event>, Result<Receipt>)> {
        if let Party::Task(task) = from {
            match state.tasks.get(task) {
                Some(t) if !t.ended => {}
                _ => return Err(not_registered(task)),
            }
        }
        if let Some(receipt) = duplicate(state, from, &draft)? {
            return Ok((Vec::new(), Ok(receipt)));
        }
        if let (Party::Task(task), Some(thread)) = (from, &draft.thread_id) {
            check_thread_member(state, task, thread)?;
        }
        let to_mediator =
            draft.to.is_empty() && draft.reply_to.is_some() && *from != Party::Mediator;
        let to = check_draft(&draft, to_mediator, self.bounds.max_message_bytes)?;
        for task in &to {
            match state.tasks.get(task) {
                None => {
                    return Err(MailError::UnknownRecipient {
                        task: task.to_string(),
                        known: known(state),
                    });
                }
                Some(t) if t.ended => {
                    return Err(MailError::EndedRecipient {
                        task: task.to_string(),
                    });
                }
                Some(_) => {}
            }
        }
        if let Party::Task(task) = from {
            self.check_rate(state, now, task)?;
            self.check_share(state, task, &draft)?;
        }
        let id = draft
            .client_id
            .clone()
            .unwrap_or_else(|| MessageId::generate(now));
        let message = Message {
            schema_version: SCHEMA_VERSION,
            thread_id: draft.thread_id.clone().unwrap_or_else(|| id.clone()),
            reply_to: draft.reply_to.clone(),
            from: from.clone(),
            sender_branch: match from {
                Party::Task(t) => state.tasks.get(t).and_then(|t| t.branch.clone()),
                Party::Mediator => None,
            },
            to: to.clone(),
            kind: draft.kind,
            subject: draft.subject,
            body: draft.body,
            importance: draft.importance,
            ack_required: draft.ack_required,
            created_at: now,
            id: id.clone(),
        };
        let decisions: BTreeMap<TaskName, LoggedDecision> = to
            .iter()
            .map(|t| {
                let d = self.policy.decide(from, t, message.kind);
                (
                    t.clone(),
                    LoggedDecision {
                        action: d.action,
                        rule: d.rule,
                    },
                )
            })
            .collect();
        let receipt = Receipt {
            id,
            recipients: decisions
                .iter()
                .map(|(t, d)| (t.clone(), initial_state(d.action)))
                .collect(),
            duplicate: false,
        };
        let escalate_command =
            self.escalation.is_some() && decisions.values().any(|d| d.action == Action::Escalate);
        let event = Event::Accepted {
            message,
            client_id: draft.client_id.is_some(),
            decisions,
            escalate_command,
        };
        Ok((vec![event], Ok(receipt)))
    }

    /// `e` as the caller's answer, logged unless the caller's refusals of the last minute
    /// reached the send rate bound (a loop of refused sends is answered but cannot fill the
    /// log; issue 30, G2).
    fn refusal<T>(
        &self,
        state: &State,
        now: DateTime<Utc>,
        from: Party,
        client_id: Option<MessageId>,
        e: MailError,
    ) -> (Vec<Event>, Result<T>) {
        let window_start = now - chrono::Duration::minutes(1);
        let logged = state
            .recent_refusals
            .get(&from)
            .map_or(0, |r| r.iter().filter(|t| **t > window_start).count());
        if logged >= self.bounds.messages_per_minute as usize {
            return (Vec::new(), Err(e));
        }
        let event = Event::Refused {
            from,
            client_id,
            code: e.code().to_string(),
            reason: e.to_string(),
        };
        (vec![event], Err(e))
    }

    /// One task may have at most a quarter of the log's bound accepted, so one agent cannot
    /// fill the log its group shares (issue 30, G2).
    fn check_share(&self, state: &State, task: &TaskName, draft: &Draft) -> Result<()> {
        let limit = self.bounds.max_log_bytes / 4;
        let used = state.sent_bytes.get(task).copied().unwrap_or(0);
        let size = (logged_len(&draft.subject) + logged_len(&draft.body)) as u64;
        if used + size <= limit {
            return Ok(());
        }
        Err(MailError::ShareUsed {
            task: task.to_string(),
            used,
            limit,
        })
    }

    fn check_rate(&self, state: &State, now: DateTime<Utc>, task: &TaskName) -> Result<()> {
        let limit = self.bounds.messages_per_minute;
        let window_start = now - chrono::Duration::minutes(1);
        let recent: Vec<_> = state
            .recent_sends
            .get(task)
            .map(|s| s.iter().filter(|t| **t > window_start).copied().collect())
            .unwrap_or_default();
        if recent.len() < limit as usize {
            return Ok(());
        }
        let oldest = recent.iter().min().copied().unwrap_or(now);
        let retry = (oldest + chrono::Duration::minutes(1) - now)
            .num_seconds()
            .max(1);
        Err(MailError::RateLimited {
            task: task.to_string(),
            limit,
            retry_after_secs: retry as u64,
        })
    }

    /// `task`'s inbox: every message addressed to it that is queued, delivered, or read with
    /// an ack awaited and its lease run out (redelivered), oldest first. Listing marks queued
    /// ones delivered (logged); a held, dropped or rejected message is not shown.
    ///
    /// # Errors
    /// [`MailError::NotRegistered`]; store errors.
    pub fn inbox(&self, task: &TaskName) -> Result<Vec<InboxItem>> {
        self.inbox_page(task, usize::MAX)
    }

    /// The oldest `limit` messages of [`Mediator::inbox`]: only those are marked delivered
    /// (the rest stay queued for the next call).
    ///
    /// # Errors
    /// As [`Mediator::inbox`].
    pub fn inbox_page(&self, task: &TaskName, limit: usize) -> Result<Vec<InboxItem>> {
        self.transact(|state, now| {
            if !state.tasks.contains_key(task) {
                return (Vec::new(), Err(not_registered(task)));
            }
            let mut events = Vec::new();
            let mut items = Vec::new();
            for entry in state.messages.values() {
                if items.len() == limit {
                    break;
                }
                let Some(d) = entry.recipients.get(task) else {
                    continue;
                };
                let lease_over = d.lease_until.is_none_or(|t| t <= now);
                let (show, event) = match d.state {
                    RecipientState::Queued => (true, Some((RecipientState::Delivered, None))),
                    RecipientState::Delivered => (true, None),
                    RecipientState::Read if entry.message.ack_required && lease_over => (
                        true,
                        Some((
                            RecipientState::Delivered,
                            Some("lease ran out unacknowledged"),
                        )),
                    ),
                    _ => (false, None),
                };
                if !show {
                    continue;
                }
                let mut state_now = d.state;
                if let Some((next, reason)) = event {
                    state_now = next;
                    events.push(Event::State {
                        id: entry.message.id.clone(),
                        task: task.clone(),
                        state: next,
                        by: if reason.is_some() {
                            LEASE
                        } else {
                            task.as_str()
                        }
                        .to_string(),
                        lease_until: None,
                        reason: reason.map(str::to_string),
                    });
                }
                items.push(InboxItem {
                    message: entry.message.clone(),
                    state: state_now,
                    reads: d.reads,
                    lease_until: None,
                });
            }
            (events, Ok(items))
        })
    }

    /// Reads message `id` addressed to `task`: marks it read and, when an ack is required and
    /// it is not acknowledged, takes a lease of `[mail].lease_seconds` (until then it leaves
    /// the inbox; after, it is redelivered).
    ///
    /// # Errors
    /// [`MailError::NoSuchMessage`] (also for a message addressed to another task, or held);
    /// store errors.
    pub fn read(&self, task: &TaskName, id: &MessageId) -> Result<InboxItem> {
        self.transact(|state, now| {
            let entry = match visible_to_recipient(state, task, id) {
                Ok(e) => e,
                Err(e) => return (Vec::new(), Err(e)),
            };
            let d = &entry.recipients[task];
            if d.state == RecipientState::Acknowledged {
                let item = InboxItem {
                    message: entry.message.clone(),
                    state: d.state,
                    reads: d.reads,
                    lease_until: None,
                };
                return (Vec::new(), Ok(item));
            }
            let lease_until = entry
                .message
                .ack_required
                .then(|| now + chrono::Duration::from_std(self.bounds.lease).unwrap_or_default());
            let event = Event::State {
                id: id.clone(),
                task: task.clone(),
                state: RecipientState::Read,
                by: task.to_string(),
                lease_until,
                reason: None,
            };
            let item = InboxItem {
                message: entry.message.clone(),
                state: RecipientState::Read,
                reads: d.reads + 1,
                lease_until,
            };
            (vec![event], Ok(item))
        })
    }

    /// Acknowledges message `id` addressed to `task` (idempotent: again is a no-op).
    ///
    /// # Errors
    /// [`MailError::NoSuchMessage`]; store errors.
    pub fn ack(&self, task: &TaskName, id: &MessageId) -> Result<RecipientState> {
        self.transact(|state, _| {
            let entry = match visible_to_recipient(state, task, id) {
                Ok(e) => e,
                Err(e) => return (Vec::new(), Err(e)),
            };
            if entry.recipients[task].state == RecipientState::Acknowledged {
                return (Vec::new(), Ok(RecipientState::Acknowledged));
            }
            let event = Event::State {
                id: id.clone(),
                task: task.clone(),
                state: RecipientState::Acknowledged,
                by: task.to_string(),
                lease_until: None,
                reason: None,
            };
            (vec![event], Ok(RecipientState::Acknowledged))
        })
    }

    /// The messages `task` sent, with every recipient's state, oldest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn sent(&self, task: &TaskName) -> Result<Vec<MessageView>> {
        self.sent_page(task, usize::MAX)
    }

    /// The newest `limit` messages of [`Mediator::sent`], oldest first (only those are copied).
    ///
    /// # Errors
    /// As [`Mediator::sent`].
    pub fn sent_page(&self, task: &TaskName, limit: usize) -> Result<Vec<MessageView>> {
        let me = Party::Task(task.clone());
        self.transact(|state, _| {
            let mut views: Vec<MessageView> = state
                .messages
                .values()
                .rev()
                .filter(|e| e.message.from == me)
                .take(limit)
                .map(Entry::view)
                .collect();
            views.reverse();
            (Vec::new(), Ok(views))
        })
    }

    /// Every message of the group with its states (the host user's view), oldest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn list(&self) -> Result<Vec<MessageView>> {
        self.transact(|state, _| {
            (
                Vec::new(),
                Ok(state.messages.values().map(Entry::host_view).collect()),
            )
        })
    }

    /// One message with its states (the host user's view).
    ///
    /// # Errors
    /// [`MailError::NoSuchMessage`]; store errors.
    pub fn show(&self, id: &MessageId) -> Result<MessageView> {
        self.transact(|state, _| (Vec::new(), host_entry(state, id).map(Entry::host_view)))
    }

    /// Forwards a held message (the host user's decision) to its held recipients, or only to
    /// `only` of them. A held recipient whose session has ended is rejected instead (never
    /// queued to nobody), with that reason.
    ///
    /// # Errors
    /// [`MailError::NoSuchMessage`], [`MailError::WrongState`] (nothing held for those
    /// recipients); store errors.
    pub fn forward(&self, id: &MessageId, only: Option<&[TaskName]>) -> Result<MessageView> {
        self.host_action(id, only, |state, task| {
            if state.tasks.get(task).is_some_and(|t| t.ended) {
                (
                    RecipientState::Rejected,
                    Some("recipient ended before forwarding".to_string()),
                )
            } else {
                (RecipientState::Queued, None)
            }
        })
    }

    /// Rejects a held message (the host user's decision) for its held recipients, or only
    /// `only` of them, with `reason` (the sender sees it).
    ///
    /// # Errors
    /// As [`Mediator::forward`].
    pub fn reject(
        &self,
        id: &MessageId,
        only: Option<&[TaskName]>,
        reason: &str,
    ) -> Result<MessageView> {
        self.host_action(id, only, |_, _| {
            (RecipientState::Rejected, Some(reason.to_string()))
        })
    }

    fn host_action(
        &self,
        id: &MessageId,
        only: Option<&[TaskName]>,
        next: impl Fn(&State, &TaskName) -> (RecipientState, Option<String>),
    ) -> Result<MessageView> {
        self.transact(|state, _| {
            let entry = match host_entry(state, id) {
                Ok(e) => e,
                Err(e) => return (Vec::new(), Err(e)),
            };
            let events: Vec<Event> = entry
                .recipients
                .iter()
                .filter(|(t, d)| {
                    d.state == RecipientState::Held && only.is_none_or(|o| o.contains(t))
                })
                .map(|(t, _)| {
                    let (state_next, reason) = next(state, t);
                    Event::State {
                        id: id.clone(),
                        task: t.clone(),
                        state: state_next,
                        by: HOST.to_string(),
                        lease_until: None,
                        reason,
                    }
                })
                .collect();
            if events.is_empty() {
                let e = MailError::WrongState {
                    id: id.to_string(),
                    why: "it is not held for any of those recipients".into(),
                };
                return (Vec::new(), Err(e));
            }
            let mut view = entry.host_view();
            for event in &events {
                if let Event::State {
                    task,
                    state,
                    reason,
                    ..
                } = event
                    && let Some(d) = view.recipients.get_mut(task)
                {
                    d.state = *state;
                    d.reason.clone_from(reason);
                }
            }
            (events, Ok(view))
        })
    }
}

/// Whether the escalation command is due for `e` and was never started.
fn is_due(e: &Entry) -> bool {
    e.escalation
        .as_ref()
        .is_some_and(|s| s.state == EscalationState::Pending)
}

/// Due, never started, and still held for a recipient policy escalated it to.
fn due_and_held(e: &Entry) -> bool {
    is_due(e)
        && e.recipients
            .values()
            .any(|d| d.escalated && d.state == RecipientState::Held)
}

fn not_registered(task: &TaskName) -> MailError {
    MailError::NotRegistered {
        task: task.to_string(),
    }
}

fn known(state: &State) -> String {
    let names: Vec<&str> = state
        .tasks
        .values()
        .filter(|t| !t.ended)
        .map(|t| t.task.as_str())
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

fn initial_state(action: Action) -> RecipientState {
    match action {
        Action::Forward => RecipientState::Queued,
        Action::Hold | Action::Escalate => RecipientState::Held,
        Action::Drop => RecipientState::Dropped,
    }
}

/// The earlier receipt when `draft` repeats an accepted message's client id (same sender and
/// content); an error when the id names a different message.
fn duplicate(state: &State, from: &Party, draft: &Draft) -> Result<Option<Receipt>> {
    let Some(id) = &draft.client_id else {
        return Ok(None);
    };
    let Some(entry) = state.messages.get(id) else {
        return Ok(None);
    };
    let m = &entry.message;
    let same = entry.client_id
        && m.from == *from
        && m.subject == draft.subject
        && m.body == draft.body
        && m.kind == draft.kind
        && (draft.to.is_empty() || dedup(&draft.to) == m.to)
        && m.reply_to == draft.reply_to
        && m.ack_required == draft.ack_required;
    if !same {
        return Err(MailError::ClientIdReused { id: id.to_string() });
    }
    Ok(Some(Receipt {
        id: id.clone(),
        recipients: entry
            .recipients
            .iter()
            .map(|(t, d)| (t.clone(), d.state))
            .collect(),
        duplicate: true,
    }))
}

fn dedup(to: &[TaskName]) -> Vec<TaskName> {
    let mut seen = std::collections::BTreeSet::new();
    to.iter().filter(|t| seen.insert(*t)).cloned().collect()
}

/// Checks a draft's fields and size; returns its recipients without duplicates.
fn check_draft(draft: &Draft, to_mediator: bool, max_bytes: usize) -> Result<Vec<TaskName>> {
    let invalid = |field, why: &str| MailError::InvalidDraft {
        field,
        why: why.to_string(),
    };
    if draft.to.is_empty() && !to_mediator {
        return Err(invalid(
            "to",
            "no recipient (expected one or more task names)",
        ));
    }
    if draft.to.len() > MAX_RECIPIENTS {
        return Err(invalid("to", "more than 64 recipients"));
    }
    if draft.subject.trim().is_empty() {
        return Err(invalid("subject", "empty (expected one line)"));
    }
    if draft.subject.chars().count() > MAX_SUBJECT_CHARS {
        return Err(invalid("subject", "longer than 200 characters"));
    }
    if draft.subject.chars().any(char::is_control) {
        return Err(invalid(
            "subject",
            "has a control character or line break (expected one line)",
        ));
    }
    if draft.body.contains('\0') {
        return Err(invalid("body", "has a NUL character"));
    }
    // the body as the log stores it: a control character is six bytes there, not one
    let body = logged_len(&draft.body);
    let size = draft.subject.len()
        + body
        + draft.thread_id.as_ref().map_or(0, |t| t.as_str().len())
        + draft.reply_to.as_ref().map_or(0, |t| t.as_str().len());
    if size > max_bytes {
        return Err(MailError::TooLarge {
            size,
            limit: max_bytes,
        });
    }
    Ok(dedup(&draft.to))
}

/// Message `id` if it is addressed to `task` and delivered to it (not held, dropped or
/// rejected). Anything else is "no such message": a task learns nothing of others' mail.
/// A task may put a message only into a thread it is part of: it sent one of the thread's
/// messages, or one was delivered to it (held, dropped and rejected ones were not). Another
/// pair of tasks' thread, or an id that names no thread, is refused (G8, session 17).
fn check_thread_member(state: &State, task: &TaskName, thread: &MessageId) -> Result<()> {
    let sender = Party::Task(task.clone());
    let member = state.messages.values().any(|e| {
        e.message.thread_id == *thread
            && (e.message.from == sender
                || e.recipients.get(task).is_some_and(|d| {
                    !matches!(
                        d.state,
                        RecipientState::Held | RecipientState::Dropped | RecipientState::Rejected
                    )
                }))
    });
    if member {
        return Ok(());
    }
    Err(MailError::InvalidDraft {
        field: "threadId",
        why: format!(
            "`{thread}` is not a thread you are part of (you sent or received none of its messages); leave out --thread to start a new one"
        ),
    })
}

fn visible_to_recipient<'s>(
    state: &'s State,
    task: &TaskName,
    id: &MessageId,
) -> Result<&'s Entry> {
    state
        .messages
        .get(id)
        .filter(|e| {
            e.recipients.get(task).is_some_and(|d| {
                !matches!(
                    d.state,
                    RecipientState::Held | RecipientState::Dropped | RecipientState::Rejected
                )
            })
        })
        .ok_or_else(|| MailError::NoSuchMessage {
            id: id.to_string(),
            for_task: true,
        })
}

fn host_entry<'s>(state: &'s State, id: &MessageId) -> Result<&'s Entry> {
    state
        .messages
        .get(id)
        .ok_or_else(|| MailError::NoSuchMessage {
            id: id.to_string(),
            for_task: false,
        })
}
