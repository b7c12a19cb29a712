//! A handoff's mounts: the workspace, the git directories, the agent's credential files, the
//! mail channel and the dotfiles, as planned and typed to the engine call.

use crate::handoff::repository::{self, MountPurpose, Workspace};
use crate::ops::error::Result;
use crate::settings::{AgentSettings, NetworkMode};
use std::path::{Path, PathBuf};

use super::agent::{agent_err, expand_home};
use super::workspace::workspace_state;
use super::{HandoffOptions, PlannedMount};

/// A handoff's mounts: as planned, the workspace mount and the extra mounts, typed to the
/// engine call.
pub(super) struct Mounts {
    pub(super) planned: Vec<PlannedMount>,
    pub(super) workspace: Option<crate::engine::Mount>,
    pub(super) extra: Vec<crate::engine::Mount>,
}

/// The dotfiles step ([`crate::handoff::dotfiles::plan`]), the read-only bind of its export
/// (a host folder's, or a URL's under network `none`: `<state>/dotfiles/<workspace key>`)
/// added to `mounts`.
pub(super) fn with_dotfiles(
    opts: &HandoffOptions,
    ws: &Workspace,
    host: bool,
    network: NetworkMode,
    mounts: &mut Mounts,
) -> Result<Option<crate::handoff::dotfiles::HandoffDotfiles>> {
    if opts.dotfiles.is_none() {
        return Ok(None);
    }
    let export = workspace_state(opts, ws, "dotfiles")?;
    let dotfiles = crate::handoff::dotfiles::plan(opts.dotfiles.as_ref(), host, network, &export)?;
    if let Some(m) = dotfiles.as_ref().and_then(|d| d.mount.as_ref()) {
        mounts.extra.push(m.to_mount());
        mounts.planned.push(PlannedMount {
            source: m.source.to_string_lossy().into_owned(),
            target: m.target.clone(),
            read_only: true,
            purpose: "dotfiles".into(),
        });
    }
    Ok(dotfiles)
}

/// The root becomes the workspace mount; the git directories' mounts and the agent's read-only
/// credential mounts are extra mounts (none on the host: the agent sees everything its user
/// can).
pub(super) fn plan_mounts(
    opts: &HandoffOptions,
    agent: &AgentSettings,
    ws: &Workspace,
    gits: &[crate::handoff::container_git::RepoGit],
    nested: &crate::handoff::nested_git::NestedGits,
    host: bool,
    home: Option<&str>,
) -> Result<Mounts> {
    let mounts = if host {
        Vec::new()
    } else {
        let mut m = crate::handoff::container_git::mounts(ws, gits);
        m.extend(nested.mounts());
        m
    };
    let mut planned: Vec<PlannedMount> = Vec::new();
    let mut extra_mounts = Vec::new();
    let mut workspace_mount = None;
    for m in &mounts {
        let purpose = m.purpose.as_str();
        planned.push(PlannedMount {
            source: m.source.to_string_lossy().into_owned(),
            target: m.target.clone(),
            read_only: m.read_only,
            purpose: purpose.into(),
        });
        if m.purpose == MountPurpose::Workspace {
            workspace_mount = Some(m.to_mount());
        } else {
            extra_mounts.push(m.to_mount());
        }
    }
    for m in agent.mounts.iter().filter(|_| !host) {
        let source = expand_home(&m.source, home)
            .ok_or_else(|| agent_err(opts, format!("mount source `{}` needs `HOME`", m.source)))?;
        if !m.target.starts_with('/') {
            return Err(agent_err(
                opts,
                format!(
                    "mount target `{}` must be an absolute container path",
                    m.target
                ),
            ));
        }
        if !Path::new(&source).exists() {
            return Err(agent_err(
                opts,
                format!("mount source `{source}` does not exist"),
            ));
        }
        let wm = repository::WorkspaceMount {
            source: PathBuf::from(&source),
            target: m.target.clone(),
            read_only: true,
            purpose: MountPurpose::GitProtected,
        };
        extra_mounts.push(wm.to_mount());
        planned.push(PlannedMount {
            source,
            target: m.target.clone(),
            read_only: true,
            purpose: "agentCredential".into(),
        });
    }
    // The mail channel of a clone task (spec-note 0531): two read-only binds.
    for (source, target) in opts
        .mail
        .iter()
        .flat_map(|d| &d.container.binds)
        .filter(|_| !host)
    {
        planned.push(PlannedMount {
            source: source.to_string_lossy().into_owned(),
            target: target.clone(),
            read_only: true,
            purpose: "mailChannel".into(),
        });
    }
    if !host {
        extra_mounts.extend(opts.mail.iter().flat_map(|d| d.container.mounts()));
    }
    Ok(Mounts {
        planned,
        workspace: workspace_mount,
        extra: extra_mounts,
    })
}
