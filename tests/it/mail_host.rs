//! `devcell mail` on the host (issue 30, spec-note 0530), without the engine: tasks are
//! registered and send through the library (as the session wiring does), the host user acts
//! through the CLI, and the library sees the result.

use devcell::mail::{
    Action, Bounds, Draft, Mediator, MessageType, Policy, RecipientState, TaskName,
};

use crate::support::context::TestContext;
use crate::support::git::git;

fn t(name: &str) -> TaskName {
    TaskName::new(name).unwrap()
}

/// An isolated repository workspace and its group's mediator with `contract-change` held.
fn setup() -> (TestContext, Mediator) {
    let ctx = TestContext::new("mail-host").isolated();
    git(ctx.path(), &["init", "-q"]);
    let group = devcell::handoff::mail_host::group_of(ctx.path(), None).unwrap();
    let policy = Policy::forward_all()
        .with_rule("*", "*", Some(MessageType::ContractChange), Action::Hold)
        .unwrap();
    let m = Mediator::open(&ctx.state(), &group, policy, Bounds::default()).unwrap();
    m.register(&t("a"), Some("devcell/a")).unwrap();
    m.register(&t("b"), Some("devcell/b")).unwrap();
    (ctx, m)
}

#[test]
fn the_host_user_lists_and_forwards_a_held_message() {
    let (ctx, m) = setup();
    let mut draft = Draft::new(
        vec![t("b")],
        MessageType::ContractChange,
        "schema v2",
        "**new**",
    );
    draft.ack_required = true;
    let id = m.send(&t("a"), draft).unwrap().id;
    assert!(m.inbox(&t("b")).unwrap().is_empty(), "held");

    let listed = ctx.run("mail list", &["--format", "json"]);
    listed.ok();
    let listed = listed.json();
    assert_eq!(listed["result"][0]["message"]["id"], id.as_str());
    assert_eq!(listed["result"][0]["message"]["from"], "a");
    assert_eq!(listed["result"][0]["recipients"]["b"]["state"], "held");

    let text = ctx.run("mail list", &[]);
    text.ok();
    assert!(
        text.stdout.contains("schema v2") && text.stdout.contains("b: held"),
        "{}",
        text.stdout
    );

    let forwarded = ctx.run(&format!("mail forward {id}"), &["--format", "json"]);
    forwarded.ok();
    assert_eq!(
        forwarded.json()["result"]["recipients"]["b"]["state"],
        "queued"
    );
    let inbox = m.inbox(&t("b")).unwrap();
    assert_eq!(inbox.len(), 1, "delivered after the host forwarded it");
    assert_eq!(inbox[0].message.subject, "schema v2");

    let again = ctx.run(&format!("mail forward {id}"), &["--format", "json"]);
    assert_eq!(again.code, Some(2), "{}", again.stderr);
    assert_eq!(
        again.json()["error"]["details"]["mailCode"],
        "mail.wrong_state"
    );
    let log = std::fs::read_to_string(m.log_path()).unwrap();
    assert!(
        log.contains(r#""by":"@host""#),
        "the host's action is logged"
    );
}

#[test]
fn the_host_user_rejects_and_posts() {
    let (ctx, m) = setup();
    let draft = Draft::new(
        vec![t("b")],
        MessageType::ContractChange,
        "drop the table",
        "",
    );
    let id = m.send(&t("a"), draft).unwrap().id;
    let rejected = ctx.run(
        &format!("mail reject {id}"),
        &["--reason", "not now", "--format", "json"],
    );
    rejected.ok();
    let sent = m.sent(&t("a")).unwrap();
    assert_eq!(sent[0].recipients[&t("b")].state, RecipientState::Rejected);
    assert_eq!(
        sent[0].recipients[&t("b")].reason.as_deref(),
        Some("not now")
    );

    let posted = ctx.run(
        "mail post",
        &["--all", "--subject", "freeze at 14:00", "--format", "json"],
    );
    posted.ok();
    let recipients = &posted.json()["result"]["recipients"];
    assert_eq!(recipients["a"], "queued");
    assert_eq!(recipients["b"], "queued");
    assert_eq!(
        m.inbox(&t("a")).unwrap()[0].message.from.to_string(),
        "@mediator"
    );

    let unknown = ctx.run(
        "mail post",
        &["--to", "zed", "--subject", "x", "--format", "json"],
    );
    assert_eq!(unknown.code, Some(11), "{}", unknown.stderr);
    assert_eq!(
        unknown.json()["error"]["details"]["mailCode"],
        "mail.unknown_recipient"
    );
    let shown = ctx.run(&format!("mail show {id}"), &[]);
    shown.ok();
    assert!(shown.stdout.contains("b: rejected"), "{}", shown.stdout);
}

#[test]
fn a_folder_that_names_no_group_is_a_clear_error() {
    let ctx = TestContext::new("mail-nogroup").isolated();
    let run = ctx.run("mail list", &["--format", "json"]);
    assert_eq!(run.code, Some(11), "{}", run.stderr);
    let env = run.json();
    assert_eq!(env["error"]["details"]["mailCode"], "mail.no_group");
    assert!(
        env["next_actions"][0]["description"]
            .as_str()
            .unwrap()
            .contains("--mail-group"),
        "{env}"
    );
    assert!(!ctx.state().join("mail").exists(), "nothing created");
    let named = ctx.run("mail list", &["--mail-group", "team-1", "--format", "json"]);
    named.ok();
    assert_eq!(named.json()["result"], serde_json::json!([]));
}

/// `status` lists, for the host user, an escalation command that started and has no outcome
/// yet (here: still running), by message, escalated recipient and state; once it ran, nothing.
#[test]
fn status_lists_an_escalation_started_without_an_outcome() {
    let (ctx, _) = setup();
    let group = devcell::handoff::mail_host::group_of(ctx.path(), None).unwrap();
    let release = ctx.path().join("release");
    let settings = devcell::settings::MailSettings {
        escalate_command: vec![
            "/bin/sh".into(),
            "-c".into(),
            format!(
                "while [ ! -e '{}' ]; do sleep 0.05; done",
                release.display()
            ),
        ],
        escalate_timeout_seconds: 50,
        ..devcell::settings::MailSettings::default()
    };
    let policy = Policy::forward_all()
        .with_rule("*", "b", Some(MessageType::Request), Action::Escalate)
        .unwrap();
    let m = Mediator::open(&ctx.state(), &group, policy, Bounds::default())
        .unwrap()
        .with_escalation(devcell::mail::Escalation::from_settings(&settings).unwrap());
    let sender = std::thread::spawn(move || {
        let draft = Draft::new(vec![t("b")], MessageType::Request, "review", "");
        m.send(&t("a"), draft).unwrap().id
    });
    let status = |format: &[&str]| ctx.run("status", format);
    let listed = loop {
        let run = status(&["--format", "json"]);
        let env = run.json();
        if env["result"]["escalations"].is_array() {
            break env;
        }
        assert!(
            !sender.is_finished(),
            "the command runs until released: {env}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let e = &listed["result"]["escalations"][0];
    assert_eq!(e["state"], "started", "{listed:#}");
    assert_eq!(e["to"], serde_json::json!(["b"]));
    assert_eq!(e["from"], "a");
    let text = status(&[]);
    assert!(
        text.stdout.contains(&format!(
            "mail escalation {} (request from a to b): started, no outcome recorded",
            e["id"].as_str().unwrap()
        )),
        "{}",
        text.stdout
    );
    std::fs::write(&release, "").unwrap();
    let id = sender.join().unwrap();
    assert_eq!(e["id"], id.as_str());
    let after = status(&["--format", "json"]).json();
    assert!(after["result"].get("escalations").is_none(), "{after:#}");
    assert_eq!(after["result"]["mail"][0]["escalated"], 1, "still held");
}

/// Issue 30: `status --mail-group NAME` shows the mail of a named mediator group (tasks that
/// share it, with `devcell mail --mail-group`) for the workspace, and names the group; without
/// it, `status` shows the repository's own group, which has none of it.
#[test]
fn status_shows_the_mail_of_a_named_group() {
    let ctx = TestContext::new("mail-status-group").isolated();
    git(ctx.path(), &["init", "-q"]);
    let group = devcell::mail::GroupName::new("team-1").unwrap();
    let policy = Policy::forward_all()
        .with_rule("*", "*", Some(MessageType::ContractChange), Action::Hold)
        .unwrap();
    let m = Mediator::open(&ctx.state(), &group, policy, Bounds::default()).unwrap();
    m.register(&t("a"), None).unwrap();
    m.register(&t("b"), None).unwrap();
    let held = Draft::new(vec![t("b")], MessageType::ContractChange, "v2", "");
    m.send(&t("a"), held).unwrap();
    let waiting = Draft::new(vec![t("a")], MessageType::Notice, "hi", "");
    m.send(&t("b"), waiting).unwrap();

    let named = ctx.run("status", &["--mail-group", "team-1", "--format", "json"]);
    named.ok();
    let env = named.json();
    assert_eq!(env["result"]["mailGroup"], "team-1", "{env:#}");
    let mail = env["result"]["mail"].as_array().expect("mail").clone();
    assert_eq!(mail.len(), 2, "{env:#}");
    assert_eq!(mail[0]["task"], "a");
    assert_eq!(mail[0]["unacknowledged"], 1);
    assert_eq!(mail[1]["task"], "b");
    assert_eq!(mail[1]["held"], 1);
    let text = ctx.run("status", &["--mail-group", "team-1"]);
    text.ok();
    assert!(
        text.stdout
            .contains("mail group team-1:\nmail a: 1 unacknowledged"),
        "{}",
        text.stdout
    );

    let own = ctx.run("status", &["--format", "json"]).json();
    assert!(own["result"].get("mail").is_none(), "{own:#}");
    assert!(own["result"].get("mailGroup").is_none(), "{own:#}");
    let bad = ctx.run("status", &["--mail-group", "../x", "--format", "json"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
}
