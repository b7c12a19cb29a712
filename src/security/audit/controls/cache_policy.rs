//! Control "cache policy": Can one run influence another through cache state? Looks at host package
//! caches bound writable (critical) or read-only (weak), cache volumes with or without a devcell
//! owner.

use super::{covers_home, is_workspace_bind, mount_subject, volume_owned};
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, MountKind};
use crate::security::audit::heuristics::{CACHE_DIRS, matches_any};
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// The evidence for cache policy.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    for m in &f.mounts {
        match m.kind {
            MountKind::Bind => {
                let Some(src) = m.source.as_deref() else {
                    continue;
                };
                if covers_home(src, ctx) {
                    out.push(ev(
                        mount_subject(m),
                        "contains the host's package caches (~/.cache, ~/.npm, ~/.cargo, …)",
                        if m.read_only {
                            Risk::Weak
                        } else {
                            Risk::Critical
                        },
                    ));
                } else if is_workspace_bind(f, m, src, ctx) {
                    continue;
                } else if let Some((rel, _)) = matches_any(src, CACHE_DIRS) {
                    if m.read_only {
                        out.push(ev(
                            mount_subject(m),
                            format!(
                                "host cache `{rel}` shared read-only: readable, not poisonable"
                            ),
                            Risk::Weak,
                        ));
                    } else {
                        out.push(ev(
                            mount_subject(m),
                            format!("host cache `{rel}` shared writable: one run can poison the next, and the host"),
                            Risk::Critical,
                        ));
                    }
                }
            }
            MountKind::Volume => {
                let cacheish = matches_any(&m.target, CACHE_DIRS).is_some()
                    || m.volume_name
                        .as_deref()
                        .is_some_and(|n| n.to_ascii_lowercase().contains("cache"));
                if cacheish {
                    if volume_owned(m) {
                        out.push(ev(
                            mount_subject(m),
                            "devcell-owned cache volume, removed by `devcell delete`",
                            Risk::Safe,
                        ));
                    } else {
                        out.push(ev(
                            mount_subject(m),
                            "shared cache volume reused across runs without an owner",
                            Risk::Weak,
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    if out.is_empty() {
        out.push(ev(
            "caches",
            "no host or shared package cache is mounted",
            Risk::Safe,
        ));
    }
    out
}
