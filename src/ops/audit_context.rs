//! The host side of an isolation audit, shared by `set-up` and devcell's `audit`
//! (`handoff::audit`): bind sources resolved on this host and the [`AuditContext`] derived from
//! a container as the engine describes it (spec-notes 0205, 0400).

use std::path::{Path, PathBuf};

use crate::engine::ContainerInfo;
use crate::names::{CONFIG_FILE_LABEL, LOCAL_FOLDER_LABEL};
use crate::security::audit::{self as scoring, AuditContext, ContainerFacts};
use crate::security::host_path;

/// `facts` with every bind source replaced by what it resolves to on this host
/// ([`host_path::resolve`]): a bind of a symbolic link in the workspace is scored as the folder
/// it points at, the same resolved fact `up` and `handoff --plan` judge (spec-note 0400).
pub fn resolved_binds(mut facts: ContainerFacts) -> ContainerFacts {
    for m in facts
        .mounts
        .iter_mut()
        .filter(|m| m.kind == scoring::MountKind::Bind)
    {
        if let Some(source) = m.source.as_deref()
            && let Ok(resolved) = host_path::resolve(Path::new(source))
        {
            m.source = Some(resolved.to_string_lossy().into_owned());
        }
    }
    facts
}

/// The host-side context for a container as the engine describes it (see `handoff::audit`'s
/// docs); `git_dirs` finds the git directories of the workspace folder (the product's
/// workspace inspection, `handoff::audit::workspace_git_dirs`).
pub fn context_for(
    container: &ContainerInfo,
    workspace_folder: Option<&Path>,
    git_dirs: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> AuditContext {
    let mut ctx = AuditContext::from_environment();
    let label = |key: &str| container.labels.get(key).cloned();
    let workspace = workspace_folder
        .map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| f.to_path_buf()))
        .or_else(|| label(LOCAL_FOLDER_LABEL).map(PathBuf::from))
        // compared with resolved bind sources (`resolved_binds`)
        .map(|w| host_path::resolve(&w).unwrap_or(w));
    if let Some(ws) = &workspace {
        ctx.container_workspace = container
            .mounts
            .iter()
            .find(|m| {
                host_path::resolve(Path::new(&m.source)).ok().as_deref() == Some(ws.as_path())
            })
            .map(|m| m.destination.clone());
        ctx.git_dirs = git_dirs(ws);
        // a handoff's container git directories, kept in devcell's state (spec-note 0436)
        if let Some(state) = crate::ops::state_folder::default_root() {
            ctx.git_dirs
                .push(host_path::resolve(&state).unwrap_or(state).join("git"));
        }
    }
    ctx.workspace = workspace;
    if label(crate::names::EGRESS_NETWORK_LABEL).as_deref() == Some(crate::ops::egress::ALLOWLIST)
        && !container.id.is_empty()
    {
        ctx.egress = crate::ops::egress::audit_evidence(&container.id);
    }
    if let Some(config) = label(CONFIG_FILE_LABEL) {
        ctx = ctx.with_config_file(Path::new(&config));
    }
    ctx
}
