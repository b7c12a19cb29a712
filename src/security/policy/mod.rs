//! The permission policy: a pure function from a requested [`ContainerSpec`] (as the merged
//! configuration asks for it), the profile and the user's grants, to the spec devcell creates
//! and the list of permission requests with what was done with each.
//!
//! Grants come only from the user (`--allow` flags, the user's devcell config), never from the
//! repository: nothing in devcontainer.json, a Feature or an image label can add to [`Grants`].
//!
//! Layout: `permissions` (what can be asked and who asked), `grants` (what the user allowed),
//! `input` (the container to judge), `requests` (what it asks for), `paths`, `network`,
//! `users` and `limits` (how each part is judged or bounded), and here [`apply`], [`judge`]
//! and [`refusal`].

#[cfg(test)]
mod gpu_tests;
mod grants;
mod input;
mod limits;
mod network;
mod paths;
mod requests;
#[cfg(test)]
mod tests;
mod users;

pub use crate::security::baseline::NO_NEW_PRIVILEGES;
pub use crate::security::known::{ENGINE_SOCKET_NAMES, ENGINE_SOCKET_PATHS, normalize_cap};
pub use crate::security::permissions::{Permission, PermissionRequest, RequestStatus, Source};
pub use grants::Grants;
pub use input::{Origins, PolicyInput};
pub use limits::{
    DEFAULT_TMPFS_BYTES, HARDENED_TMPFS, HOME_TMPFS_SIZE, bound_tmpfs_options, ulimit_permission,
};
pub use network::{LOOPBACK, is_loopback_address, network_permission, publish_address};
pub use paths::{is_engine_socket, is_within, normalize_path};
pub use users::{is_root_user, provides_user};

use crate::engine::{ContainerSpec, PortBinding};

use super::error::{Result, SecurityError};
use super::profile::SecurityProfile;
use limits::{bound_memory_filesystems, clamp_limits};
use requests::collect_requests;
pub(crate) use requests::is_no_new_privileges;
use users::{effective_users, remote_home};

/// The spec to create and every request with its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The container to create.
    pub spec: ContainerSpec,
    /// The user remote commands run as (may be adjusted: see spec-note 0083).
    pub remote_user: Option<String>,
    /// Every permission request, with what was done with it.
    pub requests: Vec<PermissionRequest>,
    /// Under `hardened`: the loopback ports the repository numbered that `spec` publishes from
    /// a host port the engine chooses instead, as the repository wrote them
    /// ([`free_loopback_ports`]; spec-note 0431).
    pub freed_ports: Vec<PortBinding>,
}

/// Applies `profile` to the requested container.
///
/// `Hardened`: computes every [`PermissionRequest`]; if any is not granted by `grants` (or is
/// never allowed), returns [`SecurityError::Refused`] listing all of them — the caller must
/// create nothing. Otherwise returns the spec with the baseline applied (spec-notes 0082–0086).
/// `Reference`: the spec unchanged; requests reported as [`RequestStatus::AllowedByProfile`].
///
/// Pure: no file system or engine access.
pub fn apply(profile: &SecurityProfile, input: &PolicyInput, grants: &Grants) -> Result<Applied> {
    let mut requests = collect_requests(input);
    let limits = match profile {
        SecurityProfile::Reference => {
            for r in &mut requests {
                r.status = RequestStatus::AllowedByProfile;
            }
            return Ok(Applied {
                spec: input.spec.clone(),
                remote_user: input.remote_user.clone(),
                requests,
                freed_ports: Vec::new(),
            });
        }
        SecurityProfile::Hardened(limits) => *limits,
    };
    for r in &mut requests {
        r.status = match (&r.permission, &r.source) {
            (
                Permission::EngineSocket(_)
                | Permission::IdentityLabel(_)
                | Permission::UnresolvablePath(_),
                _,
            ) => RequestStatus::Forbidden,
            (_, Source::CommandLine) => RequestStatus::AllowedByProfile,
            (p, _) if grants.allows(p) => RequestStatus::Granted,
            _ => RequestStatus::Refused,
        };
    }
    if requests
        .iter()
        .any(|r| matches!(r.status, RequestStatus::Refused | RequestStatus::Forbidden))
    {
        return Err(SecurityError::Refused {
            profile: profile.name().to_string(),
            requests,
        });
    }
    let allowed = |p: &Permission| {
        requests
            .iter()
            .any(|r| &r.permission == p && r.status != RequestStatus::Refused)
    };
    let mut spec = input.spec.clone();

    spec.privileged = input.spec.privileged && allowed(&Permission::Privileged);

    // Capabilities: drop all, add back only the granted ones.
    spec.cap_drop = vec!["ALL".to_string()];
    let mut caps: Vec<String> = Vec::new();
    for c in input.spec.cap_add.iter().map(|c| normalize_cap(c)) {
        if allowed(&Permission::Capability(c.clone())) && !caps.contains(&c) {
            caps.push(c);
        }
    }
    spec.cap_add = caps;

    // Security options: granted ones, plus no-new-privileges unless a granted one sets it.
    let mut opts: Vec<String> = input
        .spec
        .security_opt
        .iter()
        .filter(|o| !is_no_new_privileges(o) && allowed(&Permission::SecurityOpt((*o).clone())))
        .cloned()
        .collect();
    opts.push(NO_NEW_PRIVILEGES.to_string());
    spec.security_opt = opts;

    // Users.
    let (container_user, remote_user) = effective_users(input);
    spec.user = container_user;

    // Read-only root with tmpfs where programs expect to write.
    spec.read_only_rootfs = true;
    let taken = |spec: &ContainerSpec, path: &str| {
        spec.tmpfs.contains_key(path) || spec.mounts.iter().any(|m| m.target == path)
    };
    for (path, opts) in HARDENED_TMPFS {
        if !taken(&spec, path) {
            spec.tmpfs.insert((*path).to_string(), (*opts).to_string());
        }
    }
    let home_user = remote_user
        .clone()
        .or_else(|| spec.user.clone())
        .or_else(|| input.image_user.clone())
        .or_else(|| Some("root".to_string()));
    if let Some(home) = remote_home(input, home_user.as_deref())
        && !taken(&spec, &home)
        && home != "/"
    {
        let opts = match input.remote_ids {
            Some((uid, gid)) => {
                format!("rw,nosuid,nodev,exec,size={HOME_TMPFS_SIZE},uid={uid},gid={gid},mode=755")
            }
            None => format!("rw,nosuid,nodev,exec,size={HOME_TMPFS_SIZE},mode=1777"),
        };
        spec.tmpfs.insert(home, opts);
    }

    spec.limits = clamp_limits(input.spec.limits, limits);
    bound_memory_filesystems(&mut spec);
    // A port without a host address would be published on every host interface.
    for p in &mut spec.ports {
        if p.host_ip.as_deref().is_none_or(str::is_empty) {
            p.host_ip = Some(LOOPBACK.to_string());
        }
    }
    let freed_ports = free_loopback_ports(&mut spec.ports, grants);

    Ok(Applied {
        spec,
        remote_user,
        requests,
        freed_ports,
    })
}

/// Publishes each loopback port whose host port the repository numbered (`appPort`,
/// `runArgs -p`) from a host port the engine chooses, unless the user granted that address
/// (`--allow publish:127.0.0.1:3000`, `publish:127.0.0.1:*`, `publish:*`): a host service
/// that is not running at that moment (a local package registry, a database) would have its
/// clients, and the credentials they send, talk to the container (attack 25's P3 class, as
/// `forwardPorts` in spec-note 0654; spec-note 0431). Other addresses were requests, granted
/// as written. Returns the bindings moved, as the repository wrote them.
fn free_loopback_ports(ports: &mut [PortBinding], grants: &Grants) -> Vec<PortBinding> {
    let mut freed = Vec::new();
    for p in ports {
        let Some(ip) = p.host_ip.as_deref().filter(|ip| is_loopback_address(ip)) else {
            continue;
        };
        if p.host_port.is_some()
            && !grants.allows(&Permission::PublishPort(publish_address(ip, p.host_port)))
        {
            freed.push(p.clone());
            p.host_port = None;
        }
    }
    freed
}

/// Judges requests that are not part of a container (host commands, git directories):
/// `reference` allows each ([`RequestStatus::AllowedByProfile`]); `hardened` grants what
/// `grants` allows and refuses the rest. Pure. [`refusal`] turns the result into the error.
pub fn judge(
    profile: &SecurityProfile,
    asked: impl IntoIterator<Item = (Permission, Source)>,
    grants: &Grants,
) -> Vec<PermissionRequest> {
    asked
        .into_iter()
        .map(|(permission, source)| {
            let status = match (profile, &permission, &source) {
                (SecurityProfile::Reference, _, _) => RequestStatus::AllowedByProfile,
                (
                    _,
                    Permission::EngineSocket(_)
                    | Permission::HostHome(_)
                    | Permission::IdentityLabel(_)
                    | Permission::UnresolvablePath(_),
                    _,
                ) => RequestStatus::Forbidden,
                (_, _, Source::CommandLine) => RequestStatus::AllowedByProfile,
                (_, p, _) if grants.allows(p) => RequestStatus::Granted,
                _ => RequestStatus::Refused,
            };
            let mut permission = permission;
            if status == RequestStatus::Refused {
                note_text_only_grant(&mut permission, grants);
            }
            PermissionRequest {
                permission,
                source,
                status,
            }
        })
        .collect()
}

/// Marks a refused host command that names workspace files when the user holds a grant for
/// its text alone (the form every grant had before grants covered the files a command runs):
/// its refusal then says why it is asked again (spec-note 0410).
fn note_text_only_grant(permission: &mut Permission, grants: &Grants) {
    if let Permission::HostCommand(command) = permission
        && (!command.files.is_empty() || !command.uncovered.is_empty())
        && grants
            .host_commands
            .contains(&crate::security::permissions::host_command_digest(
                &command.command,
            ))
    {
        command.text_only_grant = true;
    }
}

/// [`SecurityError::Refused`] listing `requests` when any is refused or forbidden.
pub fn refusal(profile: &SecurityProfile, requests: &[PermissionRequest]) -> Option<SecurityError> {
    requests
        .iter()
        .any(|r| matches!(r.status, RequestStatus::Refused | RequestStatus::Forbidden))
        .then(|| SecurityError::Refused {
            profile: profile.name().to_string(),
            requests: requests.to_vec(),
        })
}

/// The requests of a container judged from its configuration alone, before its image exists
/// (`up` and `handoff` judge these with the host variables, host commands and git directories,
/// before anything runs; spec-note 0400): [`apply`]'s requests, refused or not, without those
/// attributed to the image's `USER` (not known yet: the caller judges them with the image's
/// passwd before the container is created). Pure.
///
/// Errors: none of [`apply`]'s refusals; only its other errors.
pub fn configuration_requests(
    profile: &SecurityProfile,
    input: &PolicyInput,
    grants: &Grants,
) -> Result<Vec<PermissionRequest>> {
    let mut requests = match apply(profile, input, grants) {
        Ok(applied) => applied.requests,
        Err(SecurityError::Refused { requests, .. }) => requests,
        Err(other) => return Err(other),
    };
    requests.retain(|r| r.source != Source::ImageUser);
    Ok(requests)
}

/// One refusal for everything judged before anything runs: the `earlier` requests (host
/// variables, build network, host commands, git directories) with a `later` judgement's
/// (`later_requests`, and the refusal it returned, if any). A refusal to reuse a container
/// keeps its form with `earlier` put first; another error (a path outside the workspace) is
/// kept as it is; otherwise [`refusal`] over all the requests, so one `--allow` list grants
/// them all. Pure.
pub fn refusal_of_all(
    profile: &SecurityProfile,
    earlier: &[PermissionRequest],
    later: Option<SecurityError>,
    later_requests: &[PermissionRequest],
) -> Option<SecurityError> {
    match later {
        Some(SecurityError::ReuseRefused {
            container,
            profile,
            mut requests,
            gaps,
        }) => {
            requests.splice(0..0, earlier.iter().cloned());
            Some(SecurityError::ReuseRefused {
                container,
                profile,
                requests,
                gaps,
            })
        }
        None | Some(SecurityError::Refused { .. }) => {
            let all: Vec<PermissionRequest> =
                earlier.iter().chain(later_requests).cloned().collect();
            refusal(profile, &all)
        }
        Some(other) => Some(other),
    }
}
