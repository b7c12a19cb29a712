//! `devcell mail list|show|forward|reject|post`: the host user's side of the mediator
//! (docs/mail.md). Thin: the logic is `mail::Mediator`'s; `output::text` makes the
//! container-written subject and body terminal-safe (spec-note 0434).

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::{MailCommand, MailGroupArgs};
use crate::cli::commands::{Extras, finish, folder};
use crate::handoff::mail_host;
use crate::handoff::mail_host::{
    Draft, Mediator, MessageId, MessageType, MessageView, Receipt, Recipients, TaskName,
};
use crate::ops::OpsError;

/// Runs one `mail` subcommand.
pub fn run(command: MailCommand) -> anyhow::Result<ExitCode> {
    Ok(match command {
        MailCommand::List(args) => {
            let result = mediator(&args.group).and_then(|m| Ok(m.list()?));
            finish(args.group.format, result, render_list, no_extras)
        }
        MailCommand::Show(args) => {
            let result =
                mediator(&args.group).and_then(|m| Ok(m.show(&MessageId::new(&args.id)?)?));
            finish(args.group.format, result, render_one, no_extras)
        }
        MailCommand::Forward(args) => {
            let result = mediator(&args.group).and_then(|m| {
                let only = tasks(&args.to)?;
                let only = (!only.is_empty()).then_some(only.as_slice());
                Ok(m.forward(&MessageId::new(&args.id)?, only)?)
            });
            finish(args.group.format, result, render_one, no_extras)
        }
        MailCommand::Reject(args) => {
            let result = mediator(&args.group).and_then(|m| {
                let only = tasks(&args.to)?;
                let only = (!only.is_empty()).then_some(only.as_slice());
                Ok(m.reject(&MessageId::new(&args.id)?, only, &args.reason)?)
            });
            finish(args.group.format, result, render_one, no_extras)
        }
        MailCommand::Post(args) => {
            let result = mediator(&args.group).and_then(|m| {
                let to = if args.all {
                    Recipients::AllLive
                } else {
                    Recipients::Tasks(tasks(&args.to)?)
                };
                let mut draft = Draft::new(
                    Vec::new(),
                    args.kind.parse::<MessageType>()?,
                    &args.subject,
                    &args.body,
                );
                draft.ack_required = args.ack_required;
                draft.thread_id = args.thread.as_deref().map(MessageId::new).transpose()?;
                Ok(m.post(to, draft)?)
            });
            finish(args.group.format, result, render_receipt, no_extras)
        }
    })
}

fn no_extras<T>(_: &T) -> Extras {
    Extras::default()
}

fn mediator(args: &MailGroupArgs) -> Result<Mediator, OpsError> {
    let settings = crate::settings::load(args.config_file.as_deref())?;
    let workspace = folder(args.workspace_folder.as_deref());
    let group = mail_host::group_of(&workspace, args.mail_group.as_deref())?;
    mail_host::open(&group, &settings.mail)
}

fn tasks(names: &[String]) -> Result<Vec<TaskName>, OpsError> {
    Ok(names
        .iter()
        .map(|n| TaskName::new(n.trim()))
        .collect::<Result<_, _>>()?)
}

fn states(view: &MessageView) -> String {
    if view.recipients.is_empty() {
        return "(to the mediator)".into();
    }
    view.recipients
        .iter()
        .map(|(t, d)| {
            format!(
                "{t}: {}",
                serde_json::to_value(d.state)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn render_list(views: &Vec<MessageView>) -> String {
    let mut out = String::new();
    if views.is_empty() {
        out.push_str("no messages\n");
    }
    for v in views {
        let m = &v.message;
        let _ = writeln!(
            out,
            "{}  {} {}  {}  [{}]{}",
            m.id,
            m.from,
            m.kind.as_str(),
            m.subject,
            states(v),
            v.escalation
                .as_ref()
                .map(|e| format!("  escalation: {}", e.describe()))
                .unwrap_or_default()
        );
    }
    out
}

fn render_one(v: &MessageView) -> String {
    let m = &v.message;
    let mut out = String::new();
    let _ = writeln!(out, "id        {}", m.id);
    let _ = writeln!(out, "thread    {}", m.thread_id);
    if let Some(r) = &m.reply_to {
        let _ = writeln!(out, "reply to  {r}");
    }
    let _ = writeln!(out, "from      {}", m.from);
    let _ = writeln!(out, "type      {}", m.kind.as_str());
    let _ = writeln!(out, "subject   {}", m.subject);
    let _ = writeln!(out, "created   {}", m.created_at.to_rfc3339());
    let _ = writeln!(out, "states    {}", states(v));
    if let Some(e) = &v.escalation {
        let _ = writeln!(out, "escalation {}", e.describe());
    }
    let _ = writeln!(out, "\n{}", m.body);
    out
}

fn render_receipt(r: &Receipt) -> String {
    format!("{} posted to {} task(s)\n", r.id, r.recipients.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message view as `mail show --format json` gives it, with `escalation` when set.
    fn view(escalation: serde_json::Value) -> MessageView {
        let mut v = serde_json::json!({
            "message": {
                "schemaVersion": 1, "id": "m-1", "threadId": "m-1", "from": "a", "to": ["b"],
                "type": "request", "subject": "please", "body": "x", "importance": "normal",
                "ackRequired": false, "createdAt": "2026-01-01T00:00:00Z"
            },
            "recipients": {"b": {"state": "held", "escalated": true}}
        });
        if !escalation.is_null() {
            v["escalation"] = escalation;
        }
        serde_json::from_value(v).unwrap()
    }

    /// `mail list` and `mail show` say whether the escalation command ran and how it ended,
    /// in text and JSON (spec-note 0533); a message with none due says nothing of it.
    #[test]
    fn list_and_show_say_whether_the_escalation_ran_and_its_exit() {
        let v = view(serde_json::json!({"state": "ran", "exit": 4}));
        assert!(render_list(&vec![v.clone()]).contains("escalation: ran, exit 4"));
        assert!(render_one(&v).contains("escalation ran, exit 4\n"));
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["escalation"]["state"], "ran");
        assert_eq!(json["escalation"]["exit"], 4);
        let killed = view(serde_json::json!({"state": "ran", "signal": 9, "timedOut": true}));
        assert!(render_one(&killed).contains("killed after its deadline"));
        let started = view(serde_json::json!({"state": "started"}));
        assert!(render_one(&started).contains("no outcome recorded"));
        let none = view(serde_json::Value::Null);
        assert!(!render_list(&vec![none.clone()]).contains("escalation"));
        assert!(!render_one(&none).contains("escalation"));
        assert!(
            serde_json::to_value(&none)
                .unwrap()
                .get("escalation")
                .is_none()
        );
    }
}
