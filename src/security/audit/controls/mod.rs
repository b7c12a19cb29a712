//! The eight controls, one file each: every control turns [`ContainerFacts`] and the
//! [`AuditContext`] into the [`Evidence`] its score is the lowest cap of. This file holds what
//! several of them ask of a mount.

use std::path::Path;

use super::context::AuditContext;
use super::facts::{ContainerFacts, FactsSource, MountFact, MountKind, OWNED_VOLUME_PREFIX};
use super::heuristics::{ancestor_of, components, same, within};
use super::scoring::Evidence;

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

/// Each mount's evidence under `judge`, in mount order (a mount it says nothing of adds none).
pub(super) fn per_mount(
    f: &ContainerFacts,
    judge: impl Fn(&MountFact) -> Option<Evidence>,
) -> Vec<Evidence> {
    f.mounts.iter().filter_map(judge).collect()
}

/// What a mount is to the controls that look for host state under a bind's source
/// ([`host_bind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HostBind<'a> {
    /// A bind whose source holds a whole home folder ([`covers_home`]).
    CoversHome,
    /// A bind of the workspace ([`is_workspace_bind`]).
    Workspace,
    /// Any other bind: its source.
    Other(&'a str),
    /// Not a bind (a volume, a tmpfs, …).
    NotBind,
}

/// Sorts `m` for [`HostBind`], the home checked before the workspace (a workspace that is a
/// home folder counts as the home); `None` for a bind without a source (nothing to judge).
pub(super) fn host_bind<'a>(
    f: &ContainerFacts,
    m: &'a MountFact,
    ctx: &AuditContext,
) -> Option<HostBind<'a>> {
    if m.kind != MountKind::Bind {
        return Some(HostBind::NotBind);
    }
    let src = m.source.as_deref()?;
    Some(if covers_home(src, ctx) {
        HostBind::CoversHome
    } else if is_workspace_bind(f, m, src, ctx) {
        HostBind::Workspace
    } else {
        HostBind::Other(src)
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::audit::scoring::{Risk, ev};

    fn mount(kind: MountKind, source: Option<&str>, target: &str) -> MountFact {
        MountFact {
            kind,
            source: source.map(str::to_owned),
            volume_name: None,
            target: target.to_owned(),
            read_only: false,
        }
    }

    fn ctx(workspace: &str) -> AuditContext {
        AuditContext {
            workspace: Some(workspace.into()),
            container_workspace: Some("/workspace".into()),
            home: Some("/home/me".into()),
            ..AuditContext::default()
        }
    }

    #[test]
    fn host_bind_sorts_the_home_before_the_workspace() {
        let facts = ContainerFacts {
            source: Some(FactsSource::Inspect),
            ..ContainerFacts::default()
        };
        let bind = |src| mount(MountKind::Bind, Some(src), "/mnt");
        for (m, workspace, want) in [
            (
                bind("/home/me"),
                "/home/me/work",
                Some(HostBind::CoversHome),
            ),
            (bind("/"), "/home/me/work", Some(HostBind::CoversHome)),
            // a workspace that is the home folder still covers it
            (bind("/home/me"), "/home/me", Some(HostBind::CoversHome)),
            (
                bind("/home/me/work/a"),
                "/home/me/work",
                Some(HostBind::Workspace),
            ),
            (
                bind("/srv/data"),
                "/home/me/work",
                Some(HostBind::Other("/srv/data")),
            ),
            (mount(MountKind::Bind, None, "/mnt"), "/home/me/work", None),
            (
                mount(MountKind::Volume, Some("/var/lib/docker/volumes/v"), "/mnt"),
                "/home/me/work",
                Some(HostBind::NotBind),
            ),
            (
                mount(MountKind::Tmpfs, None, "/tmp"),
                "/home/me/work",
                Some(HostBind::NotBind),
            ),
        ] {
            assert_eq!(
                host_bind(&facts, &m, &ctx(workspace)),
                want,
                "{m:?} with workspace {workspace}"
            );
        }
    }

    #[test]
    fn per_mount_keeps_mount_order_and_skips_what_the_judge_leaves_out() {
        let facts = ContainerFacts {
            mounts: vec![
                mount(MountKind::Bind, Some("/a"), "/a"),
                mount(MountKind::Tmpfs, None, "/t"),
                mount(MountKind::Bind, Some("/b"), "/b"),
            ],
            ..ContainerFacts::default()
        };
        let out = per_mount(&facts, |m| {
            (m.kind == MountKind::Bind).then(|| ev(m.target.clone(), "bind", Risk::Weak))
        });
        let subjects: Vec<&str> = out.iter().map(|e| e.subject.as_str()).collect();
        assert_eq!(subjects, ["/a", "/b"]);
        assert!(per_mount(&ContainerFacts::default(), |_| unreachable!()).is_empty());
    }
}
