//! Control "browser isolation": What browser account state is visible? Looks at host browser
//! profiles and display sockets mounted or reachable, dedicated profile volumes.

use super::{HostBind, host_bind, mount_subject, per_mount, volume_owned};
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, MountFact, MountKind};
use crate::security::audit::heuristics::{BROWSER_DIRS, components, contains_rel, matches_any};
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// The evidence for browser isolation.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = per_mount(f, |m| mount_evidence(f, m, ctx));
    for s in &f.sockets {
        if contains_rel(s, ".X11-unix").is_some() {
            out.push(ev(
                format!("socket {s}"),
                "host display socket reachable from inside",
                Risk::Critical,
            ));
        }
    }
    if out.is_empty() {
        out.push(ev(
            "browser profiles",
            "no host browser profile or display socket is mounted",
            Risk::Safe,
        ));
    }
    out
}

/// A mount's evidence: a host bind holding browser profiles or a display socket, or a volume
/// at a browser profile folder; `None` for any other mount.
fn mount_evidence(f: &ContainerFacts, m: &MountFact, ctx: &AuditContext) -> Option<Evidence> {
    let (detail, risk) = match host_bind(f, m, ctx)? {
        HostBind::CoversHome => (
            "contains the host's browser profiles (cookies, saved passwords, sessions)".to_string(),
            Risk::Critical,
        ),
        HostBind::Workspace => return None,
        HostBind::Other(src) => {
            if let Some((rel, _)) = matches_any(src, BROWSER_DIRS) {
                (format!("personal browser profile `{rel}`"), Risk::Critical)
            } else if contains_rel(src, ".X11-unix").is_some()
                || components(src)
                    .last()
                    .is_some_and(|n| n.starts_with("wayland-"))
            {
                (
                    "host display socket: the agent can drive host windows, including the personal browser".to_string(),
                    Risk::Critical,
                )
            } else {
                return None;
            }
        }
        HostBind::NotBind
            if m.kind == MountKind::Volume && matches_any(&m.target, BROWSER_DIRS).is_some() =>
        {
            if volume_owned(m) {
                (
                    "dedicated devcell-owned profile, removed by `devcell delete`".to_string(),
                    Risk::Safe,
                )
            } else {
                (
                    "dedicated profile reused indefinitely".to_string(),
                    Risk::Weak,
                )
            }
        }
        HostBind::NotBind => return None,
    };
    Some(ev(mount_subject(m), detail, risk))
}
