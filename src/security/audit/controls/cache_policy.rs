//! Control "cache policy": Can one run influence another through cache state? Looks at host package
//! caches bound writable (critical) or read-only (weak), cache volumes with or without a devcell
//! owner.

use super::{HostBind, host_bind, mount_subject, per_mount, volume_owned};
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, MountFact, MountKind};
use crate::security::audit::heuristics::{CACHE_DIRS, matches_any};
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// The evidence for cache policy.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = per_mount(f, |m| mount_evidence(f, m, ctx));
    if out.is_empty() {
        out.push(ev(
            "caches",
            "no host or shared package cache is mounted",
            Risk::Safe,
        ));
    }
    out
}

/// A mount's evidence: a host bind holding package caches (writable: critical, read-only:
/// weak), or a cache volume (devcell-owned: safe, else weak); `None` for any other mount.
fn mount_evidence(f: &ContainerFacts, m: &MountFact, ctx: &AuditContext) -> Option<Evidence> {
    let (detail, risk) = match host_bind(f, m, ctx)? {
        HostBind::CoversHome => (
            "contains the host's package caches (~/.cache, ~/.npm, ~/.cargo, …)".to_string(),
            if m.read_only {
                Risk::Weak
            } else {
                Risk::Critical
            },
        ),
        HostBind::Workspace => return None,
        HostBind::Other(src) => {
            let (rel, _) = matches_any(src, CACHE_DIRS)?;
            if m.read_only {
                (
                    format!("host cache `{rel}` shared read-only: readable, not poisonable"),
                    Risk::Weak,
                )
            } else {
                (
                    format!(
                        "host cache `{rel}` shared writable: one run can poison the next, and the host"
                    ),
                    Risk::Critical,
                )
            }
        }
        HostBind::NotBind if m.kind == MountKind::Volume => {
            let cacheish = matches_any(&m.target, CACHE_DIRS).is_some()
                || m.volume_name
                    .as_deref()
                    .is_some_and(|n| n.to_ascii_lowercase().contains("cache"));
            if !cacheish {
                return None;
            }
            if volume_owned(m) {
                (
                    "devcell-owned cache volume, removed by `devcell delete`".to_string(),
                    Risk::Safe,
                )
            } else {
                (
                    "shared cache volume reused across runs without an owner".to_string(),
                    Risk::Weak,
                )
            }
        }
        HostBind::NotBind => return None,
    };
    Some(ev(mount_subject(m), detail, risk))
}
