//! Control "repo scope": What host files can the agent read? Judges every bind by where
//! its source lies: the workspace (safe), the host root, a home folder or a parent of the workspace
//! (critical), a broad system folder (critical), any other host path (weak).

use std::path::Path;

use super::{home_relative, is_workspace_bind, looks_like_home, mount_subject};
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, MountFact, MountKind};
use crate::security::audit::heuristics::{BROAD_DIRS, ancestor_of, components, same, within};
use crate::security::audit::scoring::{Evidence, Risk, ev};
use crate::security::known::ENGINE_SOCKET_NAMES;

/// The evidence for repo scope.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out: Vec<Evidence> = f.mounts.iter().map(|m| mount_evidence(f, m, ctx)).collect();
    if !f.mounts.iter().any(|m| m.kind == MountKind::Bind) {
        out.push(ev("host folders", "no host folder is mounted", Risk::Safe));
    }
    for w in &f.writable_paths {
        out.push(ev(
            format!("writable {w}"),
            "a process inside can write here (probe); not a host folder unless listed as a bind above",
            Risk::Safe,
        ));
    }
    out
}

/// A mount's evidence: where its source lies (any mount not a bind: safe, no host folder).
fn mount_evidence(f: &ContainerFacts, m: &MountFact, ctx: &AuditContext) -> Evidence {
    let subject = mount_subject(m);
    let Some(src) = m.source.as_deref().filter(|_| m.kind == MountKind::Bind) else {
        let detail = match m.kind {
            MountKind::Volume => "engine volume, not a host folder",
            MountKind::Tmpfs => "memory file system, not a host folder",
            _ => "not a host folder",
        };
        return ev(subject, detail, Risk::Safe);
    };
    let ws = ctx.workspace.as_deref();
    let is_socket = components(src)
        .last()
        .is_some_and(|n| ENGINE_SOCKET_NAMES.contains(&n.as_str()))
        || components(&m.target)
            .last()
            .is_some_and(|n| ENGINE_SOCKET_NAMES.contains(&n.as_str()));
    let (risk, detail) = if is_socket {
        (
            Risk::Safe,
            "an engine socket, not files to read: scored under engine socket".to_string(),
        )
    } else if is_egress_channel(m.read_only, src, &m.target, ctx) {
        (
            Risk::Safe,
            "devcell's egress channel (the allowlist proxy's socket folder or forwarder), read-only"
                .to_string(),
        )
    } else if components(src).is_empty() {
        (
            Risk::Critical,
            "the host's root file system: every host file is visible".to_string(),
        )
    } else if looks_like_home(src, ctx) {
        (
            Risk::Critical,
            "a host home folder: credentials, browser profiles, caches and every other repository are visible".to_string(),
        )
    } else if ctx.home.as_deref().is_some_and(|h| ancestor_of(src, h)) {
        (Risk::Critical, "contains the host home folder".to_string())
    } else if ws.is_some_and(|w| ancestor_of(src, w)) {
        (
            Risk::Critical,
            "a parent folder of the workspace: sibling repositories and files are visible"
                .to_string(),
        )
    } else if is_workspace_bind(f, m, src, ctx) {
        (Risk::Safe, "the workspace folder".to_string())
    } else if ctx.git_dirs.iter().any(|g| within(src, g)) {
        (
            Risk::Safe,
            "the git directory of a workspace repository (git needs it in the worktree)"
                .to_string(),
        )
    } else if BROAD_DIRS.iter().any(|b| same(src, Path::new(b))) {
        (Risk::Critical, "a broad host system folder".to_string())
    } else if ws.is_none() {
        (
            Risk::Weak,
            "host folder; no workspace known to compare it with".to_string(),
        )
    } else if let Some(rel) = home_relative(src, ctx) {
        (
            Risk::Weak,
            format!("extra host path from the home folder (`~/{rel}`) besides the workspace"),
        )
    } else {
        (
            Risk::Weak,
            "extra host path outside the workspace".to_string(),
        )
    };
    ev(subject, detail, risk)
}

/// Where devcell mounts the egress channel in an `allowlist` container (the constants of
/// `egress::channel`, which this layer does not import).
const EGRESS_CHANNEL_TARGET: &str = "/.devcell-egress";

/// A read-only bind from inside devcell's own egress folder to its fixed place in the
/// container, in a container the proxy serves (`ctx.egress`, set by the caller from devcell's
/// state). A source with `..` never counts (the component helpers skip it).
fn is_egress_channel(read_only: bool, src: &str, target: &str, ctx: &AuditContext) -> bool {
    let Some(e) = ctx.egress.as_ref() else {
        return false;
    };
    let plain = |p: &str| {
        !Path::new(p)
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    };
    read_only
        && plain(src)
        && plain(target)
        && !components(&e.channel_root.to_string_lossy()).is_empty()
        && ancestor_of(&e.channel_root.to_string_lossy(), Path::new(src))
        && within(target, Path::new(EGRESS_CHANNEL_TARGET))
}
