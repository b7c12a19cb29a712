//! The escalation command (spec-note 0533): its settings, its run (environment, deadline,
//! output bound) and the mediator running it once per escalated message.

use std::time::Duration;

use super::*;
use crate::mail::MessageType;
use crate::process::tests::{alive, pid_in};

fn settings(argv: &[&str], timeout: u64) -> MailSettings {
    MailSettings {
        escalate_command: argv.iter().map(|s| s.to_string()).collect(),
        escalate_timeout_seconds: timeout,
        ..MailSettings::default()
    }
}

fn t(name: &str) -> TaskName {
    TaskName::new(name).unwrap()
}

fn group() -> GroupName {
    GroupName::new("g1").unwrap()
}

/// A message as the mediator would have accepted it.
fn message(subject: &str) -> Message {
    let now = chrono::Utc::now();
    let id = crate::mail::MessageId::generate(now);
    Message {
        schema_version: crate::mail::SCHEMA_VERSION,
        thread_id: id.clone(),
        reply_to: None,
        from: crate::mail::Party::Task(t("a")),
        sender_branch: None,
        to: vec![t("b")],
        kind: MessageType::Request,
        subject: subject.to_string(),
        body: String::new(),
        importance: crate::mail::Importance::default(),
        ack_required: false,
        created_at: now,
        id,
    }
}

fn command(argv: &[&str], deadline: Duration) -> Escalation {
    Escalation::from_settings(&settings(argv, 10))
        .unwrap()
        .unwrap()
        .with_deadline(deadline)
}

/// Whether process `pid` exists and is not a zombie.
#[test]
fn the_command_is_checked_when_the_settings_are_read() {
    assert_eq!(Escalation::from_settings(&settings(&[], 10)).unwrap(), None);
    for (argv, timeout, field) in [
        (&[""][..], 10, "escalate_command[0]"),
        (&["bin/notify"][..], 10, "escalate_command[0]"),
        (&["/bin/true", "a\0b"][..], 10, "escalate_command[1]"),
        (&["/bin/true"][..], 0, "escalate_timeout_seconds"),
        (&["/bin/true"][..], 51, "escalate_timeout_seconds"),
    ] {
        let e = Escalation::from_settings(&settings(argv, timeout)).unwrap_err();
        assert!(
            matches!(&e, MailError::Policy { field: f, .. } if f == field),
            "{argv:?} {timeout}: {e}"
        );
    }
    let toml: crate::settings::Settings = toml::from_str(
        "[mail]\nescalate_command = [\"notify-send\", \"devcell\"]\nescalate_timeout_seconds = 5\n",
    )
    .unwrap();
    assert!(Escalation::from_settings(&toml.mail).unwrap().is_some());
}

/// The command gets exactly its variables and the system `PATH`, nothing of devcell's
/// environment, with the message's fields as values, never as shell text.
#[test]
fn the_command_gets_the_message_in_a_minimal_environment() {
    let m = message("x $(id) `id` ; id | id && id > /tmp/escalated");
    let run = command(&["/usr/bin/env"], Duration::from_secs(10)).run(&group(), &m, &[t("b")]);
    assert!(run.succeeded(), "{run:?}");
    assert_eq!(run.command, "/usr/bin/env");
    let mut got: Vec<&str> = run.stdout.lines().collect();
    got.sort_unstable();
    let mut want = vec![
        "DEVCELL_MAIL_FROM=a".to_string(),
        "DEVCELL_MAIL_GROUP=g1".to_string(),
        format!("DEVCELL_MAIL_ID={}", m.id),
        format!("DEVCELL_MAIL_SUBJECT={}", m.subject),
        "DEVCELL_MAIL_TO=b".to_string(),
        "DEVCELL_MAIL_TYPE=request".to_string(),
        format!("PATH={COMMAND_PATH}"),
    ];
    want.sort_unstable();
    assert_eq!(got, want);
}

/// Past the deadline the command's whole process group is killed (a child it started too),
/// and the run says so; a command that left a child holding its output is stopped the same way.
#[test]
fn a_command_past_its_deadline_is_killed_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    for (script, ends_itself) in [
        ("sleep 30 & echo $! > \"$0\"; wait", false),
        ("sleep 30 & echo $! > \"$0\"", true),
    ] {
        let pidfile = dir.path().join(format!("pid-{ends_itself}"));
        let argv = ["/bin/sh", "-c", script, pidfile.to_str().unwrap()];
        let run = command(&argv, Duration::from_secs(2)).run(&group(), &message("s"), &[t("b")]);
        assert!(run.end.timed_out, "{run:?}");
        assert!(!run.succeeded());
        if ends_itself {
            assert_eq!(run.end.exit, Some(0), "{run:?}");
        } else {
            assert_eq!(run.end.signal, Some(9), "{run:?}");
        }
        let child = pid_in(&pidfile);
        for _ in 0..200 {
            if !alive(child) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !alive(child),
            "the command's child {child} was killed with it"
        );
    }
}

#[test]
fn the_output_is_bounded_and_counted_and_a_missing_program_is_an_outcome() {
    let argv = [
        "/bin/sh",
        "-c",
        "head -c 1000000 /dev/zero | tr '\\0' x; echo oops >&2; exit 3",
    ];
    let run = command(&argv, Duration::from_secs(20)).run(&group(), &message("s"), &[t("b")]);
    assert_eq!(run.end.exit, Some(3), "{run:?}");
    assert!(!run.end.timed_out);
    assert_eq!(run.stdout.len(), KEPT_OUTPUT_BYTES);
    assert_eq!(run.stderr, "oops\n");
    assert_eq!(run.output_bytes, 1_000_005);

    let run = command(&["/nonexistent/notify"], Duration::from_secs(5)).run(
        &group(),
        &message("s"),
        &[t("b")],
    );
    assert!(
        run.end
            .error
            .as_deref()
            .is_some_and(|e| e.contains("could not start")),
        "{run:?}"
    );
    assert_eq!(run.end.exit, None);
}

/// The log's `escalation-ran` record and a message's escalation keep their JSON: the same
/// keys in the same order, absent ones left out, and both read back.
#[test]
fn a_run_and_a_status_keep_their_json() {
    let run: EscalationRun = serde_json::from_value(serde_json::json!({
        "command": "notify", "exit": 1, "signal": 9, "timedOut": true, "error": "e",
        "millis": 5, "stdout": "o", "stderr": "x", "outputBytes": 2
    }))
    .unwrap();
    assert_eq!(
        serde_json::to_string(&run).unwrap(),
        r#"{"command":"notify","exit":1,"signal":9,"timedOut":true,"error":"e","millis":5,"stdout":"o","stderr":"x","outputBytes":2}"#
    );
    let quiet: EscalationRun =
        serde_json::from_value(serde_json::json!({"command": "n", "millis": 0})).unwrap();
    assert_eq!(
        serde_json::to_string(&quiet).unwrap(),
        r#"{"command":"n","millis":0,"outputBytes":0}"#
    );
    let status: crate::mail::EscalationStatus = serde_json::from_value(serde_json::json!({
        "state": "ran", "at": "2026-01-02T03:04:05Z", "exit": 0, "signal": 15,
        "timedOut": true, "error": "e"
    }))
    .unwrap();
    assert_eq!(
        serde_json::to_string(&status).unwrap(),
        r#"{"state":"ran","at":"2026-01-02T03:04:05Z","exit":0,"signal":15,"timedOut":true,"error":"e"}"#
    );
    let pending: crate::mail::EscalationStatus =
        serde_json::from_value(serde_json::json!({"state": "pending"})).unwrap();
    assert_eq!(
        serde_json::to_string(&pending).unwrap(),
        r#"{"state":"pending"}"#
    );
}
