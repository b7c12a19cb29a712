//! The mediator's rules, one test each (issue 30; spec-note 0530).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};

use super::store::Store;
use super::*;

/// A clock the test moves.
struct TestClock(Mutex<DateTime<Utc>>);

impl TestClock {
    fn new() -> Arc<TestClock> {
        Arc::new(TestClock(Mutex::new(
            Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        )))
    }
    fn advance(&self, secs: i64) {
        *self.0.lock().unwrap() += chrono::Duration::seconds(secs);
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

fn t(name: &str) -> TaskName {
    TaskName::new(name).unwrap()
}

fn group() -> GroupName {
    GroupName::new("g1").unwrap()
}

struct Fixture {
    dir: tempfile::TempDir,
    clock: Arc<TestClock>,
    m: Mediator,
}

fn fixture_with(policy: Policy, bounds: Bounds) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::new();
    let m = Mediator::open(dir.path(), &group(), policy, bounds)
        .unwrap()
        .with_clock(clock.clone());
    for task in ["a", "b", "c"] {
        m.register(&t(task), Some(&format!("devcell/{task}")))
            .unwrap();
    }
    Fixture { dir, clock, m }
}

fn fixture() -> Fixture {
    fixture_with(Policy::forward_all(), Bounds::default())
}

/// The fixture forwarding everything, under `bounds`.
fn bounded(bounds: Bounds) -> Fixture {
    fixture_with(Policy::forward_all(), bounds)
}

fn note(to: &[&str], subject: &str) -> Draft {
    Draft::new(
        to.iter().map(|n| t(n)).collect(),
        MessageType::Notice,
        subject,
        "body",
    )
}

fn log_events(f: &Fixture) -> Vec<serde_json::Value> {
    std::fs::read_to_string(f.m.log_path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events_named(f: &Fixture, name: &str) -> Vec<serde_json::Value> {
    log_events(f)
        .into_iter()
        .filter(|e| e["event"] == name)
        .collect()
}

#[test]
fn a_message_goes_from_sender_to_recipient_and_is_acknowledged() {
    let f = fixture();
    let mut draft = note(&["b"], "api changes");
    draft.ack_required = true;
    let receipt = f.m.send(&t("a"), draft).unwrap();
    assert_eq!(receipt.recipients[&t("b")], RecipientState::Queued);
    let inbox = f.m.inbox(&t("b")).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].message.from, Party::Task(t("a")));
    assert_eq!(inbox[0].message.sender_branch.as_deref(), Some("devcell/a"));
    assert_eq!(inbox[0].state, RecipientState::Delivered);
    assert!(
        f.m.inbox(&t("c")).unwrap().is_empty(),
        "c was not addressed"
    );
    f.m.read(&t("b"), &receipt.id).unwrap();
    f.m.ack(&t("b"), &receipt.id).unwrap();
    let sent = f.m.sent(&t("a")).unwrap();
    assert_eq!(
        sent[0].recipients[&t("b")].state,
        RecipientState::Acknowledged
    );
    assert!(f.m.inbox(&t("b")).unwrap().is_empty());
}

#[test]
fn a_client_id_deduplicates_a_retried_send() {
    let f = fixture();
    let mut draft = note(&["b"], "once");
    draft.client_id = Some(MessageId::new("a-0001").unwrap());
    let first = f.m.send(&t("a"), draft.clone()).unwrap();
    let again = f.m.send(&t("a"), draft.clone()).unwrap();
    assert_eq!(first.id.as_str(), "a-0001");
    assert_eq!(again.id, first.id);
    assert!(again.duplicate && !first.duplicate);
    assert_eq!(f.m.list().unwrap().len(), 1, "accepted once");
    assert_eq!(f.m.inbox(&t("b")).unwrap().len(), 1, "delivered once");
    draft.body = "another message".into();
    let e = f.m.send(&t("a"), draft.clone()).unwrap_err();
    assert_eq!(e.code(), "mail.client_id_reused");
    let e = f.m.send(&t("c"), {
        draft.body = "body".into();
        draft
    });
    assert_eq!(
        e.unwrap_err().code(),
        "mail.client_id_reused",
        "another task cannot take over the id"
    );
}

#[test]
fn an_unacknowledged_message_is_redelivered_after_its_lease() {
    let f = bounded(Bounds {
        lease: Duration::from_secs(60),
        ..Bounds::default()
    });
    let mut draft = note(&["b"], "please ack");
    draft.ack_required = true;
    let id = f.m.send(&t("a"), draft).unwrap().id;
    assert_eq!(f.m.inbox(&t("b")).unwrap().len(), 1);
    let read = f.m.read(&t("b"), &id).unwrap();
    assert!(read.lease_until.is_some());
    assert!(f.m.inbox(&t("b")).unwrap().is_empty(), "leased");
    f.clock.advance(59);
    assert!(f.m.inbox(&t("b")).unwrap().is_empty(), "still leased");
    f.clock.advance(2);
    let again = f.m.inbox(&t("b")).unwrap();
    assert_eq!(again.len(), 1, "redelivered after the lease");
    assert_eq!(again[0].reads, 1);
    assert_eq!(f.m.read(&t("b"), &id).unwrap().reads, 2);
    f.m.ack(&t("b"), &id).unwrap();
    f.clock.advance(3600);
    assert!(f.m.inbox(&t("b")).unwrap().is_empty(), "acknowledged: gone");
    let redelivered = events_named(&f, "state")
        .into_iter()
        .filter(|e| e["by"] == "@lease")
        .count();
    assert_eq!(redelivered, 1, "the redelivery is logged");
}

#[test]
fn a_message_without_ack_required_leaves_the_inbox_once_read() {
    let f = fixture();
    let id = f.m.send(&t("a"), note(&["b"], "fyi")).unwrap().id;
    f.m.read(&t("b"), &id).unwrap();
    f.clock.advance(100_000);
    assert!(f.m.inbox(&t("b")).unwrap().is_empty());
}

#[test]
fn ack_is_idempotent() {
    let f = fixture();
    let id = f.m.send(&t("a"), note(&["b"], "x")).unwrap().id;
    let lines = log_events(&f).len();
    assert_eq!(f.m.ack(&t("b"), &id).unwrap(), RecipientState::Acknowledged);
    assert_eq!(f.m.ack(&t("b"), &id).unwrap(), RecipientState::Acknowledged);
    assert_eq!(
        log_events(&f).len(),
        lines + 1,
        "the second ack logs nothing"
    );
}

#[test]
fn an_unknown_or_ended_recipient_is_refused_and_logged() {
    let f = fixture();
    let e = f.m.send(&t("a"), note(&["b", "zed"], "x")).unwrap_err();
    assert_eq!(e.code(), "mail.unknown_recipient");
    assert!(e.to_string().contains("zed"), "{e}");
    f.m.end(&t("c")).unwrap();
    let e = f.m.send(&t("a"), note(&["c"], "x")).unwrap_err();
    assert_eq!(e.code(), "mail.ended_recipient");
    assert!(f.m.list().unwrap().is_empty(), "nothing queued");
    assert!(
        f.m.inbox(&t("b")).unwrap().is_empty(),
        "not even to the known one"
    );
    let refused = events_named(&f, "refused");
    assert_eq!(refused.len(), 2);
    assert_eq!(refused[0]["code"], "mail.unknown_recipient");
    assert_eq!(refused[1]["code"], "mail.ended_recipient");
    let e = f.m.send(&t("c"), note(&["a"], "x")).unwrap_err();
    assert_eq!(
        e.code(),
        "mail.not_registered",
        "an ended task sends nothing"
    );
}

#[test]
fn a_held_message_waits_for_the_host_then_is_forwarded() {
    let policy = Policy::forward_all()
        .with_rule("*", "*", Some(MessageType::ContractChange), Action::Hold)
        .unwrap();
    let f = fixture_with(policy, Bounds::default());
    let mut draft = note(&["b", "c"], "schema v2");
    draft.kind = MessageType::ContractChange;
    let receipt = f.m.send(&t("a"), draft).unwrap();
    assert_eq!(receipt.recipients[&t("b")], RecipientState::Held);
    assert!(
        f.m.inbox(&t("b")).unwrap().is_empty(),
        "held: not delivered"
    );
    let e = f.m.read(&t("b"), &receipt.id).unwrap_err();
    assert_eq!(
        e.code(),
        "mail.no_such_message",
        "held: not readable either"
    );
    let view = f.m.forward(&receipt.id, Some(&[t("b")])).unwrap();
    assert_eq!(view.recipients[&t("b")].state, RecipientState::Queued);
    assert_eq!(view.recipients[&t("c")].state, RecipientState::Held);
    assert_eq!(f.m.inbox(&t("b")).unwrap().len(), 1);
    assert!(f.m.inbox(&t("c")).unwrap().is_empty());
    let view = f.m.reject(&receipt.id, None, "not now").unwrap();
    assert_eq!(view.recipients[&t("c")].state, RecipientState::Rejected);
    assert_eq!(view.recipients[&t("c")].reason.as_deref(), Some("not now"));
    let sent = f.m.sent(&t("a")).unwrap();
    assert_eq!(sent[0].recipients[&t("c")].state, RecipientState::Rejected);
    let e = f.m.forward(&receipt.id, None).unwrap_err();
    assert_eq!(e.code(), "mail.wrong_state", "nothing is held any more");
}

#[test]
fn a_held_message_to_a_task_that_ended_is_rejected_when_forwarded() {
    let policy = Policy::forward_all()
        .with_rule("*", "*", None, Action::Escalate)
        .unwrap();
    let f = fixture_with(policy, Bounds::default());
    let receipt = f.m.send(&t("a"), note(&["b"], "x")).unwrap();
    let view = f.m.show(&receipt.id).unwrap();
    assert!(view.recipients[&t("b")].escalated);
    f.m.end(&t("b")).unwrap();
    let view = f.m.forward(&receipt.id, None).unwrap();
    assert_eq!(view.recipients[&t("b")].state, RecipientState::Rejected);
}

#[test]
fn a_dropped_message_is_logged_with_its_decision() {
    let policy = Policy::forward_all()
        .with_rule("a", "c", None, Action::Drop)
        .unwrap();
    let f = fixture_with(policy, Bounds::default());
    let receipt = f.m.send(&t("a"), note(&["b", "c"], "x")).unwrap();
    assert_eq!(receipt.recipients[&t("c")], RecipientState::Dropped);
    assert_eq!(receipt.recipients[&t("b")], RecipientState::Queued);
    assert!(f.m.inbox(&t("c")).unwrap().is_empty());
    let accepted = events_named(&f, "accepted");
    assert_eq!(accepted[0]["decisions"]["c"]["action"], "drop");
    assert_eq!(accepted[0]["decisions"]["c"]["rule"], 0);
    assert_eq!(accepted[0]["decisions"]["b"]["action"], "forward");
}

#[test]
fn an_oversized_message_is_refused_with_its_error() {
    let f = bounded(Bounds {
        max_message_bytes: 100,
        ..Bounds::default()
    });
    let mut draft = note(&["b"], "big");
    draft.body = "x".repeat(200);
    let e = f.m.send(&t("a"), draft).unwrap_err();
    assert!(matches!(e, MailError::TooLarge { limit: 100, .. }), "{e}");
    assert!(f.m.list().unwrap().is_empty());
    let refused = events_named(&f, "refused");
    assert_eq!(refused[0]["code"], "mail.too_large");
    assert!(
        !serde_json::to_string(&refused[0]).unwrap().contains("xxxx"),
        "a refusal keeps no content"
    );
}

#[test]
fn a_flood_is_refused_until_the_minute_passes() {
    let f = bounded(Bounds {
        messages_per_minute: 3,
        ..Bounds::default()
    });
    for i in 0..3 {
        f.m.send(&t("a"), note(&["b"], &format!("m{i}"))).unwrap();
        f.clock.advance(1);
    }
    let e = f.m.send(&t("a"), note(&["b"], "m3")).unwrap_err();
    match e {
        MailError::RateLimited {
            limit: 3,
            retry_after_secs,
            ..
        } => assert_eq!(retry_after_secs, 57),
        e => panic!("{e}"),
    }
    f.m.send(&t("c"), note(&["b"], "another sender"))
        .expect("the bound is per sender");
    f.clock.advance(58);
    f.m.send(&t("a"), note(&["b"], "m3")).unwrap();
    assert_eq!(f.m.inbox(&t("b")).unwrap().len(), 5, "nothing lost");
}

#[test]
fn a_full_log_refuses_with_its_error() {
    let f = bounded(Bounds {
        max_log_bytes: 2_000,
        ..Bounds::default()
    });
    let mut sent = 0;
    let e = loop {
        match f.m.send(&t("a"), note(&["b"], "fill")) {
            Ok(_) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 100);
    };
    assert_eq!(e.code(), "mail.log_full");
    assert!(std::fs::metadata(f.m.log_path()).unwrap().len() <= 2_000);
    assert_eq!(f.m.list().unwrap().len(), sent, "every accepted one kept");
}

#[test]
fn bad_drafts_are_refused() {
    let f = fixture();
    let cases = [
        (note(&[], "x"), "to"),
        (note(&["b"], "  "), "subject"),
        (note(&["b"], "two\nlines"), "subject"),
        (note(&["b"], &"s".repeat(201)), "subject"),
    ];
    for (draft, field) in cases {
        match f.m.send(&t("a"), draft) {
            Err(MailError::InvalidDraft { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(
        serde_json::from_str::<Draft>(r#"{"to":["b"],"subject":"s","type":"gossip"}"#).is_err(),
        "unknown type"
    );
    assert!(
        serde_json::from_str::<Draft>(r#"{"to":["b"],"subject":"s","type":"notice","from":"c"}"#)
            .is_err(),
        "a draft cannot carry a sender"
    );
    assert!(
        serde_json::from_str::<Draft>(r#"{"to":["../b"],"subject":"s","type":"notice"}"#).is_err()
    );
}

#[test]
fn a_task_cannot_read_or_ack_another_tasks_message() {
    let f = fixture();
    let id = f.m.send(&t("a"), note(&["b"], "for b only")).unwrap().id;
    for e in [
        f.m.read(&t("c"), &id).unwrap_err(),
        f.m.ack(&t("c"), &id).unwrap_err(),
        f.m.reply(&t("c"), &id, note(&[], "re")).unwrap_err(),
    ] {
        assert_eq!(e.code(), "mail.no_such_message");
    }
    let unknown = MessageId::new("m0000000000000-00000000").unwrap();
    assert_eq!(
        f.m.read(&t("c"), &unknown).unwrap_err().to_string(),
        f.m.read(&t("c"), &id)
            .unwrap_err()
            .to_string()
            .replace(id.as_str(), unknown.as_str()),
        "another's message looks exactly like no message"
    );
    assert!(f.m.sent(&t("c")).unwrap().is_empty());
    assert_eq!(
        f.m.list().unwrap()[0].recipients[&t("b")].state,
        RecipientState::Queued,
        "c's attempts changed nothing"
    );
}

#[test]
fn a_reply_goes_to_the_sender_in_the_thread() {
    let f = fixture();
    let mut req = note(&["c"], "need endpoint");
    req.kind = MessageType::Request;
    let id = f.m.send(&t("b"), req).unwrap().id;
    let mut answer = note(&["a"], "done");
    answer.kind = MessageType::Reply;
    let r = f.m.reply(&t("c"), &id, answer).unwrap();
    assert_eq!(
        r.recipients.keys().collect::<Vec<_>>(),
        vec![&t("b")],
        "to the sender, not `a`"
    );
    let inbox = f.m.inbox(&t("b")).unwrap();
    assert_eq!(inbox[0].message.reply_to.as_ref(), Some(&id));
    assert_eq!(inbox[0].message.thread_id, id);
}

/// G8 (session 17): `send --thread ID` puts a message only into a thread the sender is part
/// of (it sent or was delivered one of its messages); another pair's thread, or an id that
/// names no thread, is refused with its error and nothing is sent.
#[test]
fn a_task_may_only_send_into_a_thread_it_is_part_of() {
    let f = fixture();
    let id =
        f.m.send(&t("a"), note(&["b"], "between a and b"))
            .unwrap()
            .id;
    let into = |from: &str, thread: &MessageId| {
        let mut d = note(&["b"], "in the thread");
        d.thread_id = Some(thread.clone());
        f.m.send(&t(from), d)
    };
    let refused = into("c", &id).unwrap_err();
    assert!(
        matches!(
            refused,
            MailError::InvalidDraft {
                field: "threadId",
                ..
            }
        ),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("not a thread you are part of"),
        "{refused}"
    );
    let made_up = MessageId::new("no-such-thread").unwrap();
    assert!(into("c", &made_up).is_err(), "an id of no thread");
    assert!(into("a", &made_up).is_err(), "an id of no thread");
    assert_eq!(
        f.m.inbox(&t("b")).unwrap().len(),
        1,
        "nothing more was sent"
    );
    // the sender and the recipient are both part of it
    let mut back = note(&["a"], "b answers");
    back.thread_id = Some(id.clone());
    let from_b = f.m.send(&t("b"), back).unwrap();
    let again = into("a", &id).unwrap();
    let inbox = f.m.inbox(&t("a")).unwrap();
    assert_eq!(inbox[0].message.id, from_b.id);
    assert_eq!(inbox[0].message.thread_id, id);
    assert!(
        f.m.inbox(&t("b"))
            .unwrap()
            .iter()
            .any(|i| i.message.id == again.id)
    );
}

#[test]
fn the_mediator_posts_and_broadcasts_and_a_reply_to_it_goes_to_the_host() {
    let f = fixture();
    f.m.end(&t("c")).unwrap();
    let r =
        f.m.post(Recipients::AllLive, note(&[], "freeze at 14:00"))
            .unwrap();
    assert_eq!(r.recipients.len(), 2, "live tasks only");
    let inbox = f.m.inbox(&t("a")).unwrap();
    assert_eq!(inbox[0].message.from, Party::Mediator);
    let reply = f.m.reply(&t("a"), &r.id, note(&[], "ok")).unwrap();
    assert!(reply.recipients.is_empty());
    let view = f.m.show(&reply.id).unwrap();
    assert!(view.message.to.is_empty(), "for the host user");
}

#[test]
fn replay_equals_live_state() {
    let policy = Policy::forward_all()
        .with_rule("*", "c", None, Action::Hold)
        .unwrap();
    let f = fixture_with(policy, Bounds::default());
    let mut d = note(&["b", "c"], "one");
    d.ack_required = true;
    let id = f.m.send(&t("a"), d).unwrap().id;
    f.m.inbox(&t("b")).unwrap();
    f.m.read(&t("b"), &id).unwrap();
    f.m.forward(&id, None).unwrap();
    f.m.send(&t("a"), note(&["zed"], "refused")).unwrap_err();
    f.m.end(&t("a")).unwrap();
    let live = f.m.list().unwrap();
    let replayed = Store::replay(f.m.log_path()).unwrap();
    let replayed: Vec<_> = replayed.messages.values().map(|e| e.view()).collect();
    assert_eq!(replayed, live);
    // A second devcell opening the same group sees the same.
    let other = Mediator::open(
        f.dir.path(),
        &group(),
        Policy::forward_all(),
        Bounds::default(),
    )
    .unwrap();
    assert_eq!(other.list().unwrap(), live);
    assert!(
        other
            .tasks()
            .unwrap()
            .iter()
            .any(|t| t.task.as_str() == "a" && t.ended)
    );
}

#[test]
fn two_mediators_on_one_group_append_safely() {
    let f = fixture();
    let other = Arc::new(
        Mediator::open(
            f.dir.path(),
            &group(),
            Policy::forward_all(),
            Bounds::default(),
        )
        .unwrap(),
    );
    let m = Arc::new(f.m);
    let threads: Vec<_> = [m.clone(), other.clone()]
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            std::thread::spawn(move || {
                for n in 0..10 {
                    m.send(&t("a"), note(&["b"], &format!("{i}-{n}"))).unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    assert_eq!(other.inbox(&t("b")).unwrap().len(), 20);
    let state = Store::replay(m.log_path()).unwrap();
    assert_eq!(state.messages.len(), 20);
    let seqs: Vec<u64> = std::fs::read_to_string(m.log_path())
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "one sequence: {seqs:?}"
    );
}

#[test]
fn a_torn_last_line_is_moved_aside_and_reported() {
    let f = fixture();
    let id = f.m.send(&t("a"), note(&["b"], "kept")).unwrap().id;
    let log = f.m.log_path().to_path_buf();
    let whole = std::fs::read(&log).unwrap();
    let torn = br#"{"seq":99,"at":"2026-01-02T03:04:05Z","event":"accep"#;
    std::fs::write(&log, [whole.as_slice(), torn].concat()).unwrap();
    let e = Store::replay(&log).unwrap_err();
    assert!(e.to_string().contains("torn last line"), "{e}");
    let reopened = Mediator::open(
        f.dir.path(),
        &group(),
        Policy::forward_all(),
        Bounds::default(),
    )
    .unwrap();
    let saved = reopened.torn_tails();
    assert_eq!(saved.len(), 1, "reported");
    assert_eq!(std::fs::read(&saved[0]).unwrap(), torn, "kept, not dropped");
    assert_eq!(reopened.show(&id).unwrap().message.subject, "kept");
    let torn_events: Vec<_> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"torn-tail\""))
        .map(str::to_string)
        .collect();
    assert_eq!(torn_events.len(), 1, "recorded in the log");
    Store::replay(&log).expect("the log is whole again");
    reopened.send(&t("a"), note(&["b"], "after")).unwrap();
}

#[test]
fn a_corrupt_line_in_the_middle_is_an_error_naming_the_line() {
    let f = fixture();
    f.m.send(&t("a"), note(&["b"], "x")).unwrap();
    let log = f.m.log_path().to_path_buf();
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1] = "not json";
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let e = Mediator::open(
        f.dir.path(),
        &group(),
        Policy::forward_all(),
        Bounds::default(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "mail.corrupt_log");
    assert!(e.to_string().contains(":2:"), "{e}");
}

#[test]
fn the_log_and_its_folder_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = fixture();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(f.m.log_path()), 0o600);
    assert_eq!(mode(f.m.log_path().parent().unwrap()), 0o700);
}

#[test]
fn names_are_checked() {
    for bad in [
        "",
        "../x",
        "a/b",
        ".hidden",
        "x.",
        "@mediator",
        &"a".repeat(65),
    ] {
        assert!(TaskName::new(bad).is_err(), "{bad}");
    }
    assert_eq!(
        serde_json::to_string(&Party::Mediator).unwrap(),
        "\"@mediator\""
    );
    let a = MessageId::generate(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
    let b = MessageId::generate(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 1).unwrap());
    assert!(a < b, "sortable by time");
    MessageId::new(a.as_str()).unwrap();
}

#[test]
fn a_message_validates_against_its_schema_and_has_its_fields() {
    let f = fixture();
    let mut draft = note(&["b"], "schema");
    draft.ack_required = true;
    draft.importance = Importance::High;
    let id = f.m.send(&t("a"), draft).unwrap().id;
    let mut reply = note(&[], "re");
    reply.kind = MessageType::Reply;
    let reply = f.m.reply(&t("b"), &id, reply).unwrap().id;
    let posted = f.m.post(Recipients::AllLive, note(&[], "all")).unwrap().id;
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("schemas/mail-message.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        schema["properties"]["schemaVersion"]["const"],
        SCHEMA_VERSION
    );
    let validator = jsonschema::validator_for(&schema).unwrap();
    let declared: std::collections::BTreeSet<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for id in [id, reply, posted] {
        let value = serde_json::to_value(f.m.show(&id).unwrap().message).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        seen.extend(value.as_object().unwrap().keys().cloned());
    }
    assert_eq!(
        seen, declared,
        "every schema field is written, and no other"
    );
    let types: Vec<&str> = schema["properties"]["type"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(types, MessageType::ALL.map(MessageType::as_str));
}

#[test]
fn the_summary_counts_unfinished_and_held_messages_per_task() {
    let policy = Policy::forward_all()
        .with_rule("*", "c", None, Action::Escalate)
        .unwrap();
    let f = fixture_with(policy, Bounds::default());
    let mut d = note(&["b", "c"], "one");
    d.ack_required = true;
    let id = f.m.send(&t("a"), d).unwrap().id;
    f.m.send(&t("a"), note(&["b"], "two")).unwrap();
    let two = f.m.inbox(&t("b")).unwrap()[1].message.id.clone();
    f.m.read(&t("b"), &two).unwrap();
    f.m.read(&t("b"), &id).unwrap();
    let summary = f.m.summary().unwrap();
    let of = |name: &str| {
        summary
            .iter()
            .find(|s| s.task.as_str() == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (of("b").unacknowledged, of("b").held),
        (1, 0),
        "read without ack: done"
    );
    assert_eq!(
        (of("c").unacknowledged, of("c").held, of("c").escalated),
        (0, 1, 1)
    );
    f.m.ack(&t("b"), &id).unwrap();
    assert_eq!(
        f.m.summary()
            .unwrap()
            .iter()
            .map(|s| s.unacknowledged)
            .sum::<usize>(),
        0
    );
}

#[test]
fn a_task_that_fills_its_share_cannot_stop_other_tasks_registering() {
    let f = bounded(Bounds {
        max_log_bytes: 40_000,
        max_message_bytes: 2_000,
        messages_per_minute: 1_000,
        ..Bounds::default()
    });
    let mut big = note(&["b"], "big");
    big.body = "x".repeat(1_900);
    let e = loop {
        match f.m.send(&t("a"), big.clone()) {
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert_eq!(e.code(), "mail.share_used", "{e}");
    f.m.send(&t("c"), note(&["b"], "another sender"))
        .expect("the share is per sender");
    // even with the log filled to its bound by everyone, a session still starts and ends
    let mut senders = ["b", "c"].into_iter().cycle();
    while f.m.send(&t(senders.next().unwrap()), big.clone()).is_ok() {}
    f.m.register(&t("late"), Some("devcell/late"))
        .expect("a registration has room kept for it");
    f.m.end(&t("late")).expect("so has an end");
    assert!(std::fs::metadata(f.m.log_path()).unwrap().len() <= 40_000);
}

#[test]
fn refusals_do_not_grow_the_log_without_bound() {
    let f = bounded(Bounds {
        messages_per_minute: 5,
        ..Bounds::default()
    });
    for _ in 0..200 {
        let e = f.m.send(&t("a"), note(&["nosuch"], "x")).unwrap_err();
        assert_eq!(
            e.code(),
            "mail.unknown_recipient",
            "every refusal is answered"
        );
    }
    assert_eq!(
        events_named(&f, "refused").len(),
        5,
        "five a minute are logged"
    );
    f.clock.advance(61);
    f.m.send(&t("a"), note(&["nosuch"], "x")).unwrap_err();
    assert_eq!(
        events_named(&f, "refused").len(),
        6,
        "and again after the minute"
    );
}

#[test]
fn the_size_bound_holds_for_the_logged_line_of_a_control_character_body() {
    let f = bounded(Bounds {
        max_message_bytes: 1_000,
        ..Bounds::default()
    });
    let mut draft = note(&["b"], "ctl");
    draft.body = "\u{1}".repeat(900);
    let e = f.m.send(&t("a"), draft).unwrap_err();
    assert!(
        matches!(e, MailError::TooLarge { size, limit: 1_000 } if size > 5_000),
        "900 control characters log as 5,400 bytes: {e}"
    );
    let mut plain = note(&["b"], "plain");
    plain.body = "x".repeat(900);
    f.m.send(&t("a"), plain).expect("900 plain bytes fit");
}

// The escalation command (spec-note 0533) as the mediator runs it.

fn log_lines(m: &Mediator, event: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(m.log_path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == event)
        .collect()
}

/// The mediator runs the command once per escalated message (not for a held one, not again
/// for a retried send), logs its exit, and a failing command leaves the message held for
/// the host user, who forwards it as ever.
#[test]
fn an_escalated_message_runs_the_command_once_and_stays_held_whatever_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!(
        "printf '%s %s\\n' \"$DEVCELL_MAIL_ID\" \"$DEVCELL_MAIL_TO\" >> '{}'; echo failing >&2; exit 4",
        marker.display()
    );
    let policy = escalating_policy()
        .with_rule("*", "c", None, Action::Hold)
        .unwrap();
    let m = escalating_with(dir.path(), policy, script);
    for task in ["a", "b", "c"] {
        m.register(&t(task), None).unwrap();
    }
    let mut draft = Draft::new(vec![t("b"), t("c")], MessageType::Request, "please", "x");
    draft.client_id = Some(MessageId::new("retry-1").unwrap());
    let receipt = m.send(&t("a"), draft.clone()).unwrap();
    assert_eq!(receipt.recipients[&t("b")], RecipientState::Held);
    let again = m.send(&t("a"), draft).unwrap();
    assert!(again.duplicate);
    // held only (no escalation): nothing runs
    m.send(
        &t("a"),
        Draft::new(vec![t("c")], MessageType::Notice, "n", "x"),
    )
    .unwrap();

    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("{} b\n", receipt.id),
        "once, for the escalated recipient only"
    );
    let ran = log_lines(&m, "escalation-ran");
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(ran[0]["id"], receipt.id.as_str());
    assert_eq!(ran[0]["to"], serde_json::json!(["b"]));
    assert_eq!(ran[0]["exit"], 4);
    assert_eq!(ran[0]["stderr"], "failing\n");
    let view = m.show(&receipt.id).unwrap();
    assert_eq!(view.recipients[&t("b")].state, RecipientState::Held);
    assert!(view.recipients[&t("b")].escalated);
    assert!(m.inbox(&t("b")).unwrap().is_empty());
    m.forward(&receipt.id, Some(&[t("b")])).unwrap();
    assert_eq!(m.inbox(&t("b")).unwrap().len(), 1, "forwarded as ever");
}

/// Forwarding everything but requests to `b`, which are escalated.
fn escalating_policy() -> Policy {
    Policy::forward_all()
        .with_rule("*", "b", Some(MessageType::Request), Action::Escalate)
        .unwrap()
}

/// The mediator of [`escalating_policy`] running `sh -c script` for an escalation.
fn escalating(dir: &std::path::Path, script: String) -> Mediator {
    escalating_with(dir, escalating_policy(), script)
}

/// The mediator of `policy` running `sh -c script` for an escalation.
fn escalating_with(dir: &std::path::Path, policy: Policy, script: String) -> Mediator {
    Mediator::open(dir, &group(), policy, Bounds::default())
        .unwrap()
        .with_escalation(
            Escalation::from_settings(&crate::settings::MailSettings {
                escalate_command: vec!["/bin/sh".into(), "-c".into(), script],
                ..crate::settings::MailSettings::default()
            })
            .unwrap(),
        )
}

/// Cuts the log back to its lines before the first `event` line: what a devcell killed just
/// before appending that line leaves.
fn cut_log_before(m: &Mediator, event: &str) {
    let text = std::fs::read_to_string(m.log_path()).unwrap();
    let kept: String = text
        .lines()
        .take_while(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"] != event)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(m.log_path(), kept).unwrap();
}

/// A devcell killed after holding an escalated message and before running the command: the
/// next devcells that open the log with the command (two at once here) run it exactly once,
/// and `show` says it ran with its exit. One killed while the command ran (a claim with no
/// outcome) is not run again, and `show` says so.
#[test]
fn an_escalation_a_killed_devcell_left_unrun_runs_once_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!(
        "echo \"$DEVCELL_MAIL_ID\" >> '{}'; sleep 0.2; exit 3",
        marker.display()
    );
    let first = escalating(dir.path(), script.clone());
    for task in ["a", "b"] {
        first.register(&t(task), None).unwrap();
    }
    let draft = || Draft::new(vec![t("b")], MessageType::Request, "please", "x");
    let killed_before = first.send(&t("a"), draft()).unwrap();
    let killed_during = first.send(&t("a"), draft()).unwrap();
    drop(first);
    // killed before the first claim: both messages are due again; then the second one's
    // claim is put back as a devcell killed mid-command leaves it
    let text = std::fs::read_to_string(dir.path().join("ran")).unwrap();
    assert_eq!(text.lines().count(), 2);
    std::fs::remove_file(&marker).unwrap();
    let log = crate::mail::store::group_dir(dir.path(), &group()).join("log.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let escalation = v["event"].as_str().unwrap().starts_with("escalation-");
            let ours = v["id"] == killed_during.id.as_str() && v["event"] == "escalation-started";
            !escalation || ours
        })
        .collect();
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();

    let (x, y) = (
        escalating(dir.path(), script.clone()),
        escalating(dir.path(), script),
    );
    let (rx, ry) = std::thread::scope(|s| {
        let hx = s.spawn(|| x.run_unrun_escalations());
        let hy = s.spawn(|| y.run_unrun_escalations());
        (hx.join().unwrap(), hy.join().unwrap())
    });
    assert_eq!(rx.len() + ry.len(), 1, "{rx:?} {ry:?}");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("{}\n", killed_before.id),
        "once, and only the message never started"
    );
    assert!(x.run_unrun_escalations().is_empty(), "nothing more is due");

    let ran = x.show(&killed_before.id).unwrap().escalation.unwrap();
    assert_eq!(ran.state, crate::mail::EscalationState::Ran);
    assert_eq!(ran.end.exit, Some(3));
    assert_eq!(ran.describe(), "ran, exit 3");
    let during = x.show(&killed_during.id).unwrap().escalation.unwrap();
    assert_eq!(during.state, crate::mail::EscalationState::Started);
    assert_eq!(log_lines(&x, "escalation-started").len(), 2);
    assert_eq!(log_lines(&x, "escalation-ran").len(), 1);
    // still held for the host user; the sandbox's view of its sent mail has none of it
    assert_eq!(
        x.show(&killed_before.id).unwrap().recipients[&t("b")].state,
        RecipientState::Held
    );
    assert!(
        x.sent(&t("a"))
            .unwrap()
            .iter()
            .all(|v| v.escalation.is_none())
    );
}

/// A message the host user already forwarded is not escalated late; one held with no command
/// configured never becomes due when a command is configured later.
#[test]
fn a_late_escalation_runs_only_while_held_and_only_if_a_command_was_due() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("echo \"$DEVCELL_MAIL_ID\" >> '{}'", marker.display());
    let policy = Policy::forward_all()
        .with_rule("*", "b", Some(MessageType::Request), Action::Escalate)
        .unwrap();
    let plain = Mediator::open(dir.path(), &group(), policy, Bounds::default()).unwrap();
    for task in ["a", "b"] {
        plain.register(&t(task), None).unwrap();
    }
    let draft = || Draft::new(vec![t("b")], MessageType::Request, "please", "x");
    let no_command = plain.send(&t("a"), draft()).unwrap();
    assert_eq!(plain.show(&no_command.id).unwrap().escalation, None);
    let m = escalating(dir.path(), script);
    let forwarded = m.send(&t("a"), draft()).unwrap();
    std::fs::remove_file(&marker).unwrap();
    cut_log_before(&m, "escalation-started");
    let m = escalating(dir.path(), String::new());
    m.forward(&forwarded.id, None).unwrap();
    assert!(m.run_unrun_escalations().is_empty());
    assert!(!marker.exists());
    let pending = m.show(&forwarded.id).unwrap().escalation.unwrap();
    assert_eq!(pending.state, crate::mail::EscalationState::Pending);
}
