//! The eight controls, one file each: every control turns [`ContainerFacts`] and the
//! [`AuditContext`] into the [`Evidence`] its score is the lowest cap of. This file holds what
//! several of them ask of a mount.

use std::path::Path;

use super::context::AuditContext;
use super::facts::{ContainerFacts, FactsSource, MountFact, MountKind, OWNED_VOLUME_PREFIX};
use super::heuristics::{ancestor_of, components, same, within};

pub(super) mod browser_isolation;
pub(super) mod cache_policy;
pub(super) mod engine_socket;
pub(super) mod network_policy;
pub(super) mod repo_scope;
pub(super) mod reproducibility;
pub(super) mod secret_boundary;
pub(super) mod teardown;

pub(super) fn looks_like_home(p: &str, ctx: &AuditContext) -> bool {
    if ctx.home.as_deref().is_some_and(|h| same(p, h)) {
        return true;
    }
    let c = components(p);
    c == ["root"] || (c.len() == 2 && (c[0] == "home" || c[0] == "Users"))
}

/// A bind source that holds the whole of a home folder: a home folder itself, the host root,
/// or an ancestor of the user's home.
pub(super) fn covers_home(p: &str, ctx: &AuditContext) -> bool {
    looks_like_home(p, ctx)
        || components(p).is_empty()
        || ctx.home.as_deref().is_some_and(|h| ancestor_of(p, h))
}

pub(super) fn home_relative(p: &str, ctx: &AuditContext) -> Option<String> {
    let home = ctx.home.as_ref()?;
    let rel = Path::new(p).strip_prefix(home).ok()?;
    Some(rel.to_string_lossy().into_owned()).filter(|r| !r.is_empty())
}

pub(super) fn mount_subject(m: &MountFact) -> String {
    let mode = if m.read_only { "ro" } else { "rw" };
    match m.kind {
        MountKind::Bind => format!(
            "bind {} -> {} ({mode})",
            m.source.as_deref().unwrap_or("?"),
            m.target
        ),
        MountKind::Volume => format!(
            "volume {} -> {} ({mode})",
            m.volume_name.as_deref().unwrap_or("(anonymous)"),
            m.target
        ),
        MountKind::Tmpfs => format!("tmpfs -> {} ({mode})", m.target),
        MountKind::Other => format!(
            "mount {} -> {} ({mode})",
            m.source.as_deref().unwrap_or("?"),
            m.target
        ),
    }
}

pub(super) fn volume_owned(m: &MountFact) -> bool {
    m.volume_name
        .as_deref()
        .is_some_and(|n| n.starts_with(OWNED_VOLUME_PREFIX))
}

/// Whether a bind mount (source `src`) is the workspace: inside the host workspace folder, or,
/// for probe facts (whose sources may be relative to a host file system), mounted at the
/// container workspace folder with a source the host workspace path ends with.
pub(super) fn is_workspace_bind(
    f: &ContainerFacts,
    m: &MountFact,
    src: &str,
    ctx: &AuditContext,
) -> bool {
    let ws = ctx.workspace.as_deref();
    if ws.is_some_and(|w| within(src, w)) {
        return true;
    }
    let at_ws_target = ctx
        .container_workspace
        .as_deref()
        .is_some_and(|t| components(t) == components(&m.target));
    f.source != Some(FactsSource::Inspect)
        && at_ws_target
        && !components(src).is_empty()
        && ws.is_none_or(|w| {
            let (w, s) = (components(&w.to_string_lossy()), components(src));
            w.len() >= s.len() && w[w.len() - s.len()..] == s[..]
        })
}
