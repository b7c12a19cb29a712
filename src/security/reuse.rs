//! Re-checking a container `up` is about to reuse against the current profile and grants
//! (spec-note 0270).
//!
//! `up` finds its container by labels. That container may have been made by the reference CLI,
//! by devcell under `reference`, or by devcell with grants the user no longer gives. Reusing it
//! as it is would silently hand out more than the current `hardened` profile allows, so
//! [`check_reuse`] reads what the container actually has (`docker inspect`: privileged mode,
//! capabilities, security options, user, mounts, devices, network, read-only root, limits) and
//! compares it with what a container created now would get. Pure: no engine access.

use std::path::Path;

use crate::engine::{ContainerInfo, MountKind};

use super::baseline::BaselineGap;
use super::error::{Result, SecurityError};
use super::policy::{
    Grants, Permission, PermissionRequest, RequestStatus, Source, is_engine_socket, is_within,
    network_permission, normalize_cap, normalize_path,
};
use super::profile::{ProfileLimits, SecurityProfile};

/// The capabilities Docker gives a container that drops none (its `oci.DefaultCapabilities`),
/// normalised. A reused container whose `CapDrop` does not drop one of them has it.
pub const ENGINE_DEFAULT_CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// What `up` knows about the container it found and about the current invocation.
#[derive(Debug, Clone, Copy)]
pub struct ExistingContainer<'a> {
    /// The container as the engine reports it.
    pub info: &'a ContainerInfo,
    /// The `USER` of the image the container runs (`None`/empty = root), used when the
    /// container's own `Config.User` is empty.
    pub image_user: Option<&'a str>,
    /// The user hooks and `exec` would run as (the merged `remoteUser`), if set.
    pub remote_user: Option<&'a str>,
    /// The host folder the workspace mount may cover (binds inside it are not requests).
    pub workspace: &'a Path,
    /// Host paths the current command line asks to bind (`--mount`, handoff's git folders):
    /// granted by being asked for, as at creation.
    pub command_line_binds: &'a [String],
    /// The socket devcell talks to the engine through.
    pub engine_socket: Option<&'a Path>,
    /// The network asked for now (`Some("none")` when it must be `none`).
    pub network: Option<&'a str>,
    /// Container paths that must be mount points (a handoff's container git directories over
    /// each repository's `.git`, spec-note 0436): a container without one is not reused.
    pub required_mounts: &'a [String],
    /// The container's `/etc/passwd` text, when read: a user name is judged by the uid it
    /// resolves to ([`crate::engine::passwd::resolve`]); without it only numeric spellings and
    /// `root` are recognised.
    pub passwd: Option<&'a str>,
    /// The passwd was needed and could not be read as a regular file (a symbolic link): a
    /// name is then not judgeable and counts as root (spec-note 0420).
    pub passwd_unreadable: bool,
}

/// Checks that reusing `existing` gives nothing beyond `profile` and `grants`.
///
/// `Reference`: nothing is checked; `Ok(vec![])`. `Hardened`: every permission the container
/// has beyond the baseline (privileged mode, root, each capability it holds — the engine's
/// defaults when it drops none —, each security option, each bind outside the workspace, each
/// device, the host network) becomes a [`PermissionRequest`] from
/// [`Source::ExistingContainer`], granted when `grants` allows it; the baseline it lacks
/// (read-only root, `no-new-privileges`, limits within the profile's, network `none` when asked
/// for) becomes [`BaselineGap`]s, which no grant covers. Returns the granted requests (for the
/// `up` result), or [`SecurityError::ReuseRefused`] when anything is not granted.
pub fn check_reuse(
    profile: &SecurityProfile,
    existing: &ExistingContainer<'_>,
    grants: &Grants,
) -> Result<Vec<PermissionRequest>> {
    let SecurityProfile::Hardened(limits) = profile else {
        return Ok(Vec::new());
    };
    let info = existing.info;
    let source = Source::ExistingContainer(short(&info.id).to_string());
    let (permissions, no_new_privileges) = held_permissions(existing);
    let gaps = baseline_gaps(existing, *limits, no_new_privileges);
    let requests: Vec<PermissionRequest> = permissions
        .into_iter()
        .map(|permission| {
            let status = match &permission {
                Permission::EngineSocket(_) => RequestStatus::Forbidden,
                p if grants.allows(p) => RequestStatus::Granted,
                _ => RequestStatus::Refused,
            };
            PermissionRequest {
                permission,
                source: source.clone(),
                status,
            }
        })
        .collect();
    let refused = requests
        .iter()
        .any(|r| matches!(r.status, RequestStatus::Refused | RequestStatus::Forbidden));
    if refused || !gaps.is_empty() {
        return Err(SecurityError::ReuseRefused {
            container: short(&info.id).to_string(),
            profile: profile.name().to_string(),
            requests,
            gaps,
        });
    }
    Ok(requests)
}

/// Every permission `existing` holds beyond the baseline, once each (see [`check_reuse`]), and
/// whether it has `no-new-privileges` (a baseline security option, not a permission).
fn held_permissions(existing: &ExistingContainer<'_>) -> (Vec<Permission>, bool) {
    let info = existing.info;
    let host = &info.host;
    let mut permissions: Vec<Permission> = Vec::new();
    let mut push = |p: Permission| {
        if !permissions.contains(&p) {
            permissions.push(p);
        }
    };
    if host.privileged {
        push(Permission::Privileged);
    }
    let user = Some(info.user.as_str())
        .filter(|u| !u.is_empty())
        .or(existing.image_user.filter(|u| !u.is_empty()))
        .unwrap_or("root");
    let root = |u: &str| {
        use crate::engine::passwd::{is_root, unjudged_name};
        is_root(u, existing.passwd, true)
            || (existing.passwd_unreadable && unjudged_name(u, existing.passwd))
    };
    if root(user) || existing.remote_user.is_some_and(root) {
        push(Permission::Root);
    }
    let dropped: Vec<String> = host.cap_drop.iter().map(|c| normalize_cap(c)).collect();
    if !host.privileged {
        if !dropped.iter().any(|c| c == "ALL") {
            for cap in ENGINE_DEFAULT_CAPABILITIES {
                if !dropped.iter().any(|d| d == cap) {
                    push(Permission::Capability((*cap).to_string()));
                }
            }
        }
        for cap in &host.cap_add {
            push(Permission::Capability(normalize_cap(cap)));
        }
    }
    let mut no_new_privileges = false;
    for opt in &host.security_opt {
        if is_no_new_privileges(opt) {
            no_new_privileges = true;
        } else {
            push(Permission::SecurityOpt(opt.clone()));
        }
    }
    let workspace = normalize_path(&existing.workspace.to_string_lossy())
        .unwrap_or_else(|| existing.workspace.to_string_lossy().into_owned());
    let asked: Vec<String> = existing
        .command_line_binds
        .iter()
        .filter_map(|p| normalize_path(p))
        .collect();
    for m in info
        .mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind.as_str())
    {
        let path = normalize_path(&m.source).unwrap_or_else(|| m.source.clone());
        if is_engine_socket(&path, existing.engine_socket) {
            push(Permission::EngineSocket(path));
        } else if !is_within(&path, &workspace) && !asked.contains(&path) {
            push(Permission::Mount(path));
        }
    }
    for d in &host.devices {
        push(Permission::Device(d.clone()));
    }
    if let Some(p) = network_permission(&host.network_mode) {
        push(p);
    }
    (permissions, no_new_privileges)
}

/// The baseline `existing` lacks under a hardened profile of `limits` (see [`check_reuse`]):
/// a writable root, no `no-new-privileges`, limits beyond the profile's, a required mount
/// missing, a network other than `none` when asked for.
fn baseline_gaps(
    existing: &ExistingContainer<'_>,
    limits: ProfileLimits,
    no_new_privileges: bool,
) -> Vec<BaselineGap> {
    let info = existing.info;
    let host = &info.host;
    let mut gaps = Vec::new();
    if !host.read_only_rootfs {
        gaps.push(BaselineGap::WritableRoot);
    }
    if !no_new_privileges {
        gaps.push(BaselineGap::NoNewPrivileges);
    }
    gaps.extend(limit_gaps(host.limits, limits));
    for target in existing.required_mounts {
        let target = target.trim_end_matches('/');
        if !info
            .mounts
            .iter()
            .any(|m| m.destination.trim_end_matches('/') == target)
        {
            gaps.push(BaselineGap::Mount {
                target: target.to_string(),
            });
        }
    }
    if existing.network == Some("none") && host.network_mode != "none" {
        gaps.push(BaselineGap::Network {
            have: host.network_mode.clone(),
            want: "none".to_string(),
        });
    }
    gaps
}

fn limit_gaps(have: crate::engine::Limits, max: ProfileLimits) -> Vec<BaselineGap> {
    [
        ("pids", have.pids, max.pids),
        ("memory", have.memory_bytes, max.memory_bytes),
        ("cpus", have.nano_cpus, max.nano_cpus),
    ]
    .into_iter()
    .filter(|(_, have, max)| have.is_none_or(|h| h > *max))
    .map(|(name, have, max)| BaselineGap::Limit { name, have, max })
    .collect()
}

fn is_no_new_privileges(opt: &str) -> bool {
    matches!(
        opt.trim(),
        "no-new-privileges" | "no-new-privileges:true" | "no-new-privileges=true"
    )
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// The host paths of the mounts that bind, for [`ExistingContainer::command_line_binds`];
/// volumes and tmpfs are skipped.
pub fn bind_sources(mounts: &[crate::engine::Mount]) -> Vec<String> {
    mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind)
        .filter_map(|m| m.source.clone())
        .collect()
}

/// Fixtures of the reuse judgement, for its tests and `ops::set_up`'s.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::{HostSecurity, Limits, MountInfo};
    use crate::security::baseline::NO_NEW_PRIVILEGES;

    fn hardened_container() -> ContainerInfo {
        ContainerInfo {
            id: "0123456789abcdef".into(),
            user: "nobody".into(),
            mounts: vec![
                MountInfo {
                    kind: "bind".into(),
                    source: "/w/repo".into(),
                    name: None,
                    destination: "/workspaces/repo".into(),
                    rw: true,
                },
                MountInfo {
                    kind: "volume".into(),
                    source: "/var/lib/docker/volumes/x/_data".into(),
                    name: Some("x".into()),
                    destination: "/var/lib/devcell".into(),
                    rw: true,
                },
            ],
            host: HostSecurity {
                cap_drop: vec!["ALL".into()],
                security_opt: vec![NO_NEW_PRIVILEGES.into()],
                read_only_rootfs: true,
                limits: Limits {
                    pids: Some(1024),
                    memory_bytes: Some(4 << 30),
                    nano_cpus: Some(2_000_000_000),
                },
                network_mode: "bridge".into(),
                ..HostSecurity::default()
            },
            ..ContainerInfo::default()
        }
    }

    /// `info` as an existing container of workspace `/w/repo` whose remote user is `nobody`,
    /// nothing else known.
    pub(crate) fn existing(info: &ContainerInfo) -> ExistingContainer<'_> {
        ExistingContainer {
            info,
            image_user: None,
            remote_user: Some("nobody"),
            workspace: Path::new("/w/repo"),
            command_line_binds: &[],
            engine_socket: None,
            network: None,
            required_mounts: &[],
            passwd: None,
            passwd_unreadable: false,
        }
    }

    fn refusal(r: Result<Vec<PermissionRequest>>) -> (Vec<PermissionRequest>, Vec<BaselineGap>) {
        match r {
            Err(SecurityError::ReuseRefused { requests, gaps, .. }) => (requests, gaps),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_hardened_container_is_reused() {
        let info = hardened_container();
        let r = check_reuse(
            &SecurityProfile::default(),
            &existing(&info),
            &Grants::default(),
        );
        assert_eq!(r.unwrap(), Vec::new());
    }

    /// A handoff container created before spec-note 0436 shows the host's `.git` through the
    /// workspace bind: a handoff that now covers `.git` with a container git directory refuses
    /// to reuse it (no grant covers the gap); one that has the cover is reused.
    #[test]
    fn a_container_without_the_container_git_directory_mount_is_not_reused() {
        let info = hardened_container();
        let required = vec!["/workspaces/repo/.git".to_string()];
        let mut old = existing(&info);
        old.required_mounts = &required;
        let (_, gaps) = refusal(check_reuse(
            &SecurityProfile::default(),
            &old,
            &Grants::default(),
        ));
        assert_eq!(
            gaps,
            vec![BaselineGap::Mount {
                target: "/workspaces/repo/.git".into()
            }]
        );
        assert_eq!(gaps[0].kind(), "mount");

        let mut covered = hardened_container();
        covered.mounts.push(MountInfo {
            kind: "bind".into(),
            source: "/w/repo/.git".into(),
            name: None,
            destination: "/workspaces/repo/.git/".into(),
            rw: true,
        });
        let mut new = existing(&covered);
        new.required_mounts = &required;
        assert!(check_reuse(&SecurityProfile::default(), &new, &Grants::default()).is_ok());
    }

    #[test]
    fn a_reference_container_lists_root_default_caps_and_gaps() {
        let info = ContainerInfo {
            id: "abc".into(),
            mounts: hardened_container().mounts,
            host: HostSecurity {
                network_mode: "bridge".into(),
                ..HostSecurity::default()
            },
            ..ContainerInfo::default()
        };
        let err = check_reuse(
            &SecurityProfile::default(),
            &existing(&info),
            &Grants::default(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("running as root"), "{text}");
        assert!(text.contains("`CHOWN`"), "{text}");
        assert!(text.contains("writable root filesystem"), "{text}");
        let (requests, gaps) = refusal(Err(err));
        assert_eq!(requests[0].permission, Permission::Root);
        assert_eq!(requests[0].source, Source::ExistingContainer("abc".into()));
        assert_eq!(requests.len(), 1 + ENGINE_DEFAULT_CAPABILITIES.len());
        assert_eq!(
            gaps.iter().map(BaselineGap::kind).collect::<Vec<_>>(),
            ["writableRoot", "noNewPrivileges", "limit", "limit", "limit"]
        );
        // Reference reuses anything.
        assert!(
            check_reuse(
                &SecurityProfile::Reference,
                &existing(&info),
                &Grants::default()
            )
            .unwrap()
            .is_empty()
        );
    }

    #[test]
    fn a_container_in_another_network_namespace_is_a_request() {
        for mode in ["container:4f1c2b9e", "corp-net"] {
            let mut info = hardened_container();
            info.host.network_mode = mode.into();
            let (requests, gaps) = refusal(check_reuse(
                &SecurityProfile::default(),
                &existing(&info),
                &Grants::default(),
            ));
            assert!(gaps.is_empty());
            assert_eq!(requests[0].permission, Permission::Network(mode.into()));
            let grants = Grants::parse(&[format!("network:{mode}")]).unwrap();
            let r = check_reuse(&SecurityProfile::default(), &existing(&info), &grants).unwrap();
            assert_eq!(r[0].status, RequestStatus::Granted);
        }
        let mut info = hardened_container();
        info.host.network_mode = "default".into();
        assert!(
            check_reuse(
                &SecurityProfile::default(),
                &existing(&info),
                &Grants::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn granted_capabilities_and_mounts_pass_and_are_reported() {
        let mut info = hardened_container();
        info.host.cap_add = vec!["CAP_SYS_PTRACE".into()];
        info.mounts.push(MountInfo {
            kind: "bind".into(),
            source: "/data/set".into(),
            name: None,
            destination: "/data".into(),
            rw: false,
        });
        let (requests, gaps) = refusal(check_reuse(
            &SecurityProfile::default(),
            &existing(&info),
            &Grants::default(),
        ));
        assert!(gaps.is_empty());
        assert_eq!(
            requests
                .iter()
                .map(|r| r.permission.grant_flag().unwrap())
                .collect::<Vec<_>>(),
            ["--allow cap:SYS_PTRACE", "--allow mount:/data/set"]
        );
        let grants = Grants::parse(&["cap:sys_ptrace", "mount:/data"]).unwrap();
        let ok = check_reuse(&SecurityProfile::default(), &existing(&info), &grants).unwrap();
        assert!(ok.iter().all(|r| r.status == RequestStatus::Granted));
        // A bind asked for on the command line is not a request.
        let binds = ["/data/set".to_string()];
        let mut e = existing(&info);
        e.command_line_binds = &binds;
        let grants = Grants::parse(&["cap:SYS_PTRACE"]).unwrap();
        assert_eq!(
            check_reuse(&SecurityProfile::default(), &e, &grants)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn sockets_limits_network_and_remote_root() {
        let mut info = hardened_container();
        info.mounts.push(MountInfo {
            kind: "bind".into(),
            source: "/var/run/docker.sock".into(),
            name: None,
            destination: "/var/run/docker.sock".into(),
            rw: true,
        });
        info.host.limits.pids = Some(4096);
        info.host.limits.memory_bytes = None;
        let mut e = existing(&info);
        e.network = Some("none");
        e.remote_user = Some("root");
        let (requests, gaps) = refusal(check_reuse(
            &SecurityProfile::default(),
            &e,
            &Grants::parse(&["root"]).unwrap(),
        ));
        assert_eq!(requests[0].permission, Permission::Root);
        assert_eq!(requests[0].status, RequestStatus::Granted);
        assert_eq!(requests[1].status, RequestStatus::Forbidden);
        let shown: Vec<String> = gaps.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "pids limit 4096 (at most 1024)",
                "no memory limit (at most 4294967296)",
                "network `bridge` (asked for `none`)"
            ]
        );
    }

    #[test]
    fn bind_sources_of_mounts() {
        let m = [
            "type=bind,source=/a,target=/b",
            "type=volume,source=v,target=/v",
            "type=tmpfs,target=/t",
        ]
        .map(|m| crate::engine::run_args::parse_mount(m).unwrap());
        assert_eq!(bind_sources(&m), ["/a"]);
    }
}
