//! The workspace's part of a handoff: the workspace inspected, its configuration, its
//! repositories' git directories, and the plan's parts that follow from it alone.

use crate::handoff::context::{AgentRuntime, ContextInputs};
use crate::handoff::repository::{self, InspectOptions, Workspace};
use crate::ops::error::{OpsError, Result};
use crate::settings::{Profile, Settings};
use indexmap::IndexMap;
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{CONFIG_WARNING_CODE, HandoffOptions, HandoffPlan, PlannedContainer, PlannedRepo};

pub(in crate::handoff) fn ctx_rel_path(settings: &Settings) -> String {
    settings.handoff.context_path.clone()
}

/// The workspace, inspected. Git directories outside the workspace are read and mounted only
/// when trusted or granted (spec-note 0411); on the host every path the agent is given is a
/// host path.
pub(super) fn inspect_workspace(
    opts: &HandoffOptions,
    profile: Profile,
    host: bool,
) -> Result<Workspace> {
    let settings = &opts.settings;
    let mut inspect_options = InspectOptions::from_settings(settings, opts.primary.clone());
    let allow: Vec<String> = settings
        .security
        .allow
        .iter()
        .chain(opts.security.allow.iter())
        .cloned()
        .collect();
    inspect_options.trusted_git_dirs = repository::trusted_git_dirs(profile, &allow);
    // a `.git` an agent created is none of the workspace's repositories until accepted (M8)
    if opts.sandbox.is_none()
        && opts.workspace_folder.is_dir()
        && let Some(state) = opts
            .state_root
            .clone()
            .or_else(crate::handoff::state::StateStore::default_root)
    {
        inspect_options.created_git = crate::handoff::state::StateStore::new(state)
            .created_gits(&opts.workspace_folder, &allow)?;
    }
    if host {
        let root = std::fs::canonicalize(&opts.workspace_folder)
            .unwrap_or_else(|_| opts.workspace_folder.clone());
        inspect_options.container_root = root.to_string_lossy().into_owned();
        inspect_options.protect_git_config = false;
    }
    let mut ws = repository::inspect(&opts.workspace_folder, &inspect_options)?;
    if opts.sandbox.is_some() {
        // a clone task's `.git` is its own, read by devcell's host git only with everything
        // it could run disabled (spec-note 0437): a missing hooks folder there endangers nothing
        ws.warnings.retain(|w| w.code != "git_hooks_unprotected");
    }
    Ok(ws)
}

/// The workspace's configuration file (the host runtime needs none).
pub(super) fn find_configuration(ws: &Workspace, host: bool) -> Result<Option<PathBuf>> {
    match &ws.config_folder {
        Some(folder) => Ok(Some(crate::config::discover::discover(folder, None)?)),
        None if host => Ok(None),
        None => Err(OpsError::NoConfiguration {
            root: ws.root.clone(),
        }),
    }
}

/// Each repository's container git directory: the container never sees a host git directory,
/// each repository gets one devcell keeps in its state folder (spec-note 0436). None on the
/// host, and none for a clone task, whose `.git` is the container's (spec-note 0437).
pub(super) fn container_gits(
    opts: &HandoffOptions,
    ws: &Workspace,
    host: bool,
) -> Result<Vec<crate::handoff::container_git::RepoGit>> {
    if host || opts.sandbox.is_some() {
        return Ok(Vec::new());
    }
    Ok(crate::handoff::container_git::repo_gits(
        ws,
        &workspace_state(opts, ws, "git")?,
    )?)
}

/// The workspace's folder of one `kind` in the handoff's state folder (`--state-root`, else
/// [`crate::handoff::state::StateStore::default_root`]): `<state>/<kind>/<workspace key>`.
///
/// Errors: [`crate::handoff::state::StateError::NoStateDir`] when no home folder is known; the
/// workspace key's.
pub(super) fn workspace_state(
    opts: &HandoffOptions,
    ws: &Workspace,
    kind: &str,
) -> Result<PathBuf> {
    let state_root = match &opts.state_root {
        Some(root) => root.clone(),
        None => crate::handoff::state::StateStore::default_root()
            .ok_or(crate::handoff::state::StateError::NoStateDir)?,
    };
    Ok(state_root
        .join(kind)
        .join(crate::handoff::state::workspace_key(&ws.root)?))
}

/// Every `.git` below the workspace that no container git directory covers, covered in turn
/// (none on the host or for a clone task, like [`container_gits`]); those the user accepted
/// uncovered are warnings ([`crate::handoff::nested_git`]). Also the workspace's git identity
/// the judgement walked, handed to the session start (one walk fewer per handoff).
pub(super) fn nested_gits(
    opts: &HandoffOptions,
    ws: &Workspace,
    gits: &[crate::handoff::container_git::RepoGit],
    host: bool,
    choice: Option<&crate::security::Choice>,
    warnings: &mut Vec<String>,
) -> Result<(
    crate::handoff::nested_git::NestedGits,
    Option<crate::handoff::git_identity::GitIdentity>,
)> {
    if host || opts.sandbox.is_some() {
        return Ok((crate::handoff::nested_git::NestedGits::default(), None));
    }
    let identity = crate::handoff::git_identity::record(&ws.root);
    let nested = crate::handoff::nested_git::judge(ws, gits, &identity, choice.map(|c| &c.grants))?;
    warnings.extend(nested.warnings());
    Ok((nested, Some(identity)))
}

/// The `safe.directory` entries of a handoff: every repository's working tree and every git
/// directory mounted, as the container sees them.
pub(crate) fn safe_directories(
    ws: &Workspace,
    gits: &[crate::handoff::container_git::RepoGit],
) -> Vec<String> {
    let mut dirs: Vec<String> = ws.safe_directories();
    // a submodule's working tree (the workspace's repositories are in `ws`'s list)
    dirs.extend(
        gits.iter()
            .filter(|g| g.nested)
            .map(|g| g.container_path.clone()),
    );
    dirs.extend(gits.iter().map(|g| g.git_target()));
    dirs.extend(gits.iter().map(|g| g.objects_target()));
    dirs
}

/// The plan's warnings: the workspace's findings keep their codes (`git_unreadable`, …); the
/// rest are the handoff's own; then the configuration's own (unknown, duplicate, deprecated
/// properties), as `up` and the handoff show them (issue 28 item 5).
pub(super) fn plan_warnings(
    ws: &Workspace,
    warnings: &[String],
    config_warnings: &[impl ToString],
) -> Vec<(String, String)> {
    ws.warnings
        .iter()
        .map(|w| (w.code.clone(), w.message.clone()))
        .chain(
            warnings
                .iter()
                .skip(ws.warnings.len())
                .map(|w| ("handoff".to_string(), w.clone())),
        )
        .chain(
            config_warnings
                .iter()
                .map(|w| (CONFIG_WARNING_CODE.to_string(), w.to_string())),
        )
        .collect()
}

/// The plan's parts that follow from the workspace and the settings alone (the rest are
/// filled in by [`super::prepare`]).
pub(super) fn plan_of_workspace(
    opts: &HandoffOptions,
    ws: &Workspace,
    secrets: &IndexMap<String, String>,
    runtime: AgentRuntime,
) -> HandoffPlan {
    let settings = &opts.settings;
    let mut grants = settings.security.allow.clone();
    grants.extend(opts.security.allow.iter().cloned());
    let inputs =
        ContextInputs::from_settings(settings, &opts.agent, &opts.verify).unwrap_or_default();
    let context_path = repository::normalize_posix(&format!(
        "{}/{}",
        ws.container_root, settings.handoff.context_path
    ));
    let mut secret_names: Vec<String> = secrets.keys().cloned().collect();
    secret_names.sort();
    HandoffPlan {
        agent: opts.agent.clone(),
        workspace: ws.root.clone(),
        workspace_target: ws.container_root.clone(),
        layout: ws.layout,
        repos: ws
            .repos
            .iter()
            .map(|r| PlannedRepo {
                name: r.name.clone(),
                path: r.container_path.clone(),
                role: r.role,
                branch: r.branch.clone(),
                head: r.head.clone(),
            })
            .collect(),
        config_file: None,
        image: String::new(),
        features: Vec::new(),
        profile: String::new(),
        network: String::new(),
        egress: Vec::new(),
        limits: None,
        grants,
        permissions: Vec::new(),
        permission_notes: Vec::new(),
        provided_user: None,
        mounts: Vec::new(),
        dotfiles: None,
        env: Vec::new(),
        host_env: Vec::new(),
        secrets: secret_names,
        container: PlannedContainer {
            action: String::new(),
            id: None,
            labels: BTreeMap::new(),
        },
        services: Vec::new(),
        command: Vec::new(),
        cwd: String::new(),
        context_path,
        verification: inputs.verification,
        runtime,
        isolation: runtime.isolation().to_string(),
        external: None,
        warnings: Vec::new(),
    }
}
