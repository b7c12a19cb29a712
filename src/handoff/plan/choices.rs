//! A handoff's security choices as the plan judges and shows them: profile, limits, grants,
//! network and egress, and the permission requests of the workspace's git directories.

use crate::handoff::repository::Workspace;
use crate::ops::error::Result;
use crate::ops::options::SecurityOptions;
use crate::settings::{NetworkMode, Profile, Settings};

use super::{HandoffOptions, PlannedLimits};

/// A container handoff's choices, judged before anything is planned or created (none applies
/// on the host).
#[derive(Default)]
pub(super) struct JudgedChoices {
    /// The grants the configuration file is confined to (spec-note 0400).
    pub(super) confine: Option<crate::security::Grants>,
    /// The untrusted git directories as judged requests.
    pub(super) git_requests: Vec<crate::security::PermissionRequest>,
    pub(super) choice: Option<crate::security::Choice>,
    pub(super) limits: Option<PlannedLimits>,
}

/// The profile, limits and grants, checked: the config file is judged before it is read, as
/// `up` judges it (spec-note 0400), and the untrusted git directories with it.
pub(super) fn judge_choices(
    flags: &SecurityOptions,
    settings: &Settings,
    ws: &Workspace,
) -> Result<JudgedChoices> {
    let chosen = crate::security::Choice::resolve(
        flags,
        settings,
        crate::security::choice::HANDOFF_NETWORK,
    )?;
    let confine = crate::ops::permissions::confine_grants(&chosen.profile, &chosen.grants);
    let git_requests = git_dir_requests(ws, &chosen.profile, &chosen.grants);
    let limits = match &chosen.profile {
        crate::security::SecurityProfile::Hardened(l) => Some(PlannedLimits {
            pids: l.pids,
            memory_bytes: l.memory_bytes,
            cpus: l.nano_cpus as f64 / 1e9,
        }),
        crate::security::SecurityProfile::Reference => None,
    };
    Ok(JudgedChoices {
        confine,
        git_requests,
        choice: Some(chosen),
        limits,
    })
}

/// The network and profile the plan shows (`host`/`none` on the host), warning about flags
/// that have no effect.
pub(super) fn shown_choices(
    opts: &HandoffOptions,
    host: bool,
    network: NetworkMode,
    profile: Profile,
    warnings: &mut Vec<String>,
) -> (String, String) {
    if !host && network != NetworkMode::Allowlist && !opts.security.egress_allow.is_empty() {
        warnings.push(format!(
            "`--egress-allow` has no effect under network `{network}`: it lists destinations for `--network allowlist`"
        ));
    }
    if host {
        if opts.security.network.is_some()
            || opts.security.profile.is_some()
            || !opts.security.allow.is_empty()
            || opts.security.pids_limit.is_some()
            || opts.security.memory.is_some()
            || opts.security.cpus.is_some()
        {
            warnings.push(
                "`--network`, `--security-profile`, `--allow` and the limit flags have no effect with `--runtime host`: the agent gets the host's network, no resource limits and every permission of its user"
                    .to_string(),
            );
        }
        if opts.mail_channel.is_none() && opts.settings.mail.worktrees {
            // issue 30: the channel lives in a container; say it is absent, never silently
            warnings.push(
                "`[mail] worktrees = true` gives handoffs the mail channel, but `--runtime host` makes no container: this agent has no `devcell-mail` and no other task can reach it (pass `--no-mail` to say so and silence this)"
                    .to_string(),
            );
        }
        ("host".to_string(), "none".to_string())
    } else {
        (network.to_string(), profile.to_string())
    }
}

/// The egress allowlist's entries the plan shows (the settings', the agent's and the flags'),
/// for a container under `allowlist`; none otherwise.
///
/// Errors: as [`crate::ops::egress::user_entries`].
pub(super) fn planned_egress(
    opts: &HandoffOptions,
    host: bool,
    network: NetworkMode,
) -> Result<Vec<String>> {
    if !host && network == NetworkMode::Allowlist {
        crate::ops::egress::user_entries(
            &opts.settings,
            Some(&opts.agent),
            &opts.security.egress_allow,
        )
    } else {
        Ok(Vec::new())
    }
}

/// The workspace's untrusted git directories ([`Workspace::untrusted_git_dirs`]) as
/// [`crate::security::Permission::GitDir`] requests, judged by `profile` and `grants`.
pub(super) fn git_dir_requests(
    ws: &Workspace,
    profile: &crate::security::SecurityProfile,
    grants: &crate::security::Grants,
) -> Vec<crate::security::PermissionRequest> {
    use crate::security::{Permission, Source};
    let asked = ws.untrusted_git_dirs.iter().map(|u| {
        (
            Permission::GitDir(u.path.to_string_lossy().into_owned()),
            Source::GitLink(u.link.to_string_lossy().into_owned()),
        )
    });
    crate::security::judge(profile, asked, grants)
}

/// `requests` without the command-line `mount` requests of a git directory (and of the folders
/// in it the handoff mounts read-only) that is also a `gitDir` request: the handoff mounts the git directory it was granted, and that mount is
/// the same permission, listed once (spec-note 0411). The mounts of trusted git directories
/// (a worktree's repository) stay requests, named by purpose in the plan's lines.
pub(crate) fn listed_once(
    requests: Vec<crate::security::PermissionRequest>,
) -> Vec<crate::security::PermissionRequest> {
    use crate::security::{Permission, Source};
    let canonical = |p: &str| {
        crate::security::host_path::resolve(std::path::Path::new(p))
            .unwrap_or_else(|_| std::path::PathBuf::from(p))
    };
    let git_dirs: Vec<std::path::PathBuf> = requests
        .iter()
        .filter_map(|r| match &r.permission {
            Permission::GitDir(p) => Some(canonical(p)),
            _ => None,
        })
        .collect();
    requests
        .into_iter()
        .filter(|r| {
            !matches!((&r.permission, &r.source), (Permission::Mount(p), Source::CommandLine)
                if git_dirs.iter().any(|g| canonical(p).starts_with(g)))
        })
        .collect()
}
