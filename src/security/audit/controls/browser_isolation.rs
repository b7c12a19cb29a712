//! Control "browser isolation": What browser account state is visible? Looks at host browser
//! profiles and display sockets mounted or reachable, dedicated profile volumes.

use super::{covers_home, is_workspace_bind, mount_subject, volume_owned};
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, MountKind};
use crate::security::audit::heuristics::{BROWSER_DIRS, components, contains_rel, matches_any};
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// The evidence for browser isolation.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    for m in &f.mounts {
        if m.kind == MountKind::Bind {
            let Some(src) = m.source.as_deref() else {
                continue;
            };
            if covers_home(src, ctx) {
                out.push(ev(
                    mount_subject(m),
                    "contains the host's browser profiles (cookies, saved passwords, sessions)",
                    Risk::Critical,
                ));
            } else if is_workspace_bind(f, m, src, ctx) {
                continue;
            } else if let Some((rel, _)) = matches_any(src, BROWSER_DIRS) {
                out.push(ev(
                    mount_subject(m),
                    format!("personal browser profile `{rel}`"),
                    Risk::Critical,
                ));
            } else if contains_rel(src, ".X11-unix").is_some()
                || components(src)
                    .last()
                    .is_some_and(|n| n.starts_with("wayland-"))
            {
                out.push(ev(
                    mount_subject(m),
                    "host display socket: the agent can drive host windows, including the personal browser",
                    Risk::Critical,
                ));
            }
        } else if m.kind == MountKind::Volume && matches_any(&m.target, BROWSER_DIRS).is_some() {
            out.push(ev(
                mount_subject(m),
                if volume_owned(m) {
                    "dedicated devcell-owned profile, removed by `devcell delete`"
                } else {
                    "dedicated profile reused indefinitely"
                },
                if volume_owned(m) {
                    Risk::Safe
                } else {
                    Risk::Weak
                },
            ));
        }
    }
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
