//! Mediators as the tests of other modules open them (from [`MailSettings`], as a handoff
//! does), so that those tests do not each spell the opening out.

use std::path::Path;

use crate::mail::{Bounds, GroupName, Mediator, Policy};
use crate::settings::{MailAction, MailRule, MailSettings};

/// The rule escalating messages of `kind` from `from` to `to` (`*` for any).
pub(crate) fn escalate_rule(from: &str, to: &str, kind: &str) -> MailRule {
    MailRule {
        from: from.into(),
        to: to.into(),
        kind: kind.into(),
        action: MailAction::Escalate,
    }
}

/// The mediator of `group` in `state` under `settings`' policy and bounds (no escalation
/// command: add one with [`Mediator::with_escalation`]).
pub(crate) fn open_mediator(state: &Path, group: &str, settings: &MailSettings) -> Mediator {
    Mediator::open(
        state,
        &GroupName::new(group).unwrap(),
        Policy::from_settings(settings).unwrap(),
        Bounds::from_settings(settings),
    )
    .unwrap()
}
