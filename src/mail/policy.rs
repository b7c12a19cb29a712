//! The mediator's policy (`[mail]` rules: sender × recipient × type → action) and bounds.

use std::time::Duration;

use globset::{Glob, GlobMatcher};

use super::error::{MailError, Result};
use super::model::{MessageType, Party, TaskName};
use crate::settings::{MailAction, MailSettings};

/// What the mediator does with a message for one recipient (`[mail]` rules' `action`).
pub type Action = MailAction;

/// One compiled rule.
#[derive(Debug, Clone)]
struct Rule {
    from: GlobMatcher,
    to: GlobMatcher,
    kind: Option<MessageType>,
    action: Action,
}

/// The compiled `[mail]` rules: the first rule matching sender, recipient and type decides,
/// else the default. The mediator's own messages (`post`) are not subject to it.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    default: Action,
    rules: Vec<Rule>,
}

/// A policy decision for one recipient: the action and the rule that chose it (`None`: the
/// default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// The index of the deciding rule in `[[mail.rules]]`, or `None` for the default.
    pub rule: Option<usize>,
}

impl Policy {
    /// Forwards everything.
    pub fn forward_all() -> Policy {
        Policy::default()
    }

    /// Compiles `[mail]`.
    ///
    /// # Errors
    /// [`MailError::Policy`] naming the rule's field (`rules[1].type`) for a bad pattern or type.
    pub fn from_settings(settings: &MailSettings) -> Result<Policy> {
        let rules = settings
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let glob = |field: &str, pattern: &str| {
                    Glob::new(pattern)
                        .map(|g| g.compile_matcher())
                        .map_err(|e| MailError::Policy {
                            field: format!("rules[{i}].{field}"),
                            why: format!("`{pattern}`: {e} (expected a task name or a glob like `api-*`)"),
                        })
                };
                let kind = match r.kind.as_str() {
                    "*" => None,
                    t => Some(t.parse::<MessageType>().map_err(|_| MailError::Policy {
                        field: format!("rules[{i}].type"),
                        why: format!(
                            "unknown type `{t}` (expected notice, request, reply, contract-change, handoff or *)"
                        ),
                    })?),
                };
                Ok(Rule {
                    from: glob("from", &r.from)?,
                    to: glob("to", &r.to)?,
                    kind,
                    action: r.action,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Policy {
            default: settings.default,
            rules,
        })
    }

    /// A policy of one rule added after these (for tests and callers that build one).
    pub fn with_rule(
        mut self,
        from: &str,
        to: &str,
        kind: Option<MessageType>,
        action: Action,
    ) -> Result<Policy> {
        let glob = |field: &str, pattern: &str| {
            Glob::new(pattern)
                .map(|g| g.compile_matcher())
                .map_err(|e| MailError::Policy {
                    field: format!("rules[{}].{field}", self.rules.len()),
                    why: e.to_string(),
                })
        };
        let rule = Rule {
            from: glob("from", from)?,
            to: glob("to", to)?,
            kind,
            action,
        };
        self.rules.push(rule);
        Ok(self)
    }

    /// The decision for a message of `kind` from `from` to `to`. The mediator's own messages
    /// are always forwarded.
    pub fn decide(&self, from: &Party, to: &TaskName, kind: MessageType) -> Decision {
        let Party::Task(from) = from else {
            return Decision {
                action: Action::Forward,
                rule: None,
            };
        };
        self.rules
            .iter()
            .position(|r| {
                r.from.is_match(from.as_str())
                    && r.to.is_match(to.as_str())
                    && r.kind.is_none_or(|k| k == kind)
            })
            .map_or(
                Decision {
                    action: self.default,
                    rule: None,
                },
                |i| Decision {
                    action: self.rules[i].action,
                    rule: Some(i),
                },
            )
    }
}

/// Limits; reaching one is an error to the sender, never a lost message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Largest subject + body + thread fields of one message, in bytes.
    pub max_message_bytes: usize,
    /// Messages one task may send per (sliding) minute.
    pub messages_per_minute: u32,
    /// Largest size of the group's log, in bytes.
    pub max_log_bytes: u64,
    /// How long a read, unacknowledged message stays out of the inbox.
    pub lease: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds::from_settings(&MailSettings::default())
    }
}

impl Bounds {
    /// The bounds of `[mail]`.
    pub fn from_settings(settings: &MailSettings) -> Bounds {
        Bounds {
            max_message_bytes: settings.max_message_bytes,
            messages_per_minute: settings.messages_per_minute,
            max_log_bytes: settings.max_log_bytes,
            lease: Duration::from_secs(settings.lease_seconds),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> TaskName {
        TaskName::new(name).unwrap()
    }

    #[test]
    fn first_matching_rule_decides_else_the_default() {
        let settings: crate::settings::Settings = toml::from_str(
            r#"
            [mail]
            default = "forward"
            [[mail.rules]]
            from = "api-*"
            type = "contract-change"
            action = "hold"
            [[mail.rules]]
            to = "web"
            action = "drop"
            "#,
        )
        .unwrap();
        let p = Policy::from_settings(&settings.mail).unwrap();
        let api = Party::Task(t("api-1"));
        let d = p.decide(&api, &t("web"), MessageType::ContractChange);
        assert_eq!((d.action, d.rule), (Action::Hold, Some(0)));
        let d = p.decide(&api, &t("web"), MessageType::Notice);
        assert_eq!((d.action, d.rule), (Action::Drop, Some(1)));
        let d = p.decide(&api, &t("db"), MessageType::Notice);
        assert_eq!((d.action, d.rule), (Action::Forward, None));
        let d = p.decide(&Party::Mediator, &t("web"), MessageType::Notice);
        assert_eq!(
            d.action,
            Action::Forward,
            "the mediator's own posts bypass policy"
        );
    }

    #[test]
    fn a_bad_rule_names_its_field() {
        let settings: crate::settings::Settings =
            toml::from_str("[[mail.rules]]\nfrom = \"a\"\ntype = \"gossip\"\naction = \"hold\"\n")
                .unwrap();
        let e = Policy::from_settings(&settings.mail).unwrap_err();
        assert!(e.to_string().contains("[mail].rules[0].type"), "{e}");
        assert_eq!(e.code(), "mail.policy");
        assert!(
            toml::from_str::<crate::settings::Settings>("[mail]\ndefault = \"maybe\"\n").is_err(),
            "an unknown action is a settings error"
        );
    }
}
