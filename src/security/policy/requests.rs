//! The requests a container makes: every part of a [`PolicyInput`]'s spec beyond the hardened
//! baseline (privileged mode, root, capabilities, security options, binds outside the
//! workspace, engine sockets, devices, networks, published ports, identity labels), with the
//! source that asked for it.

use crate::engine::MountKind;
use crate::security::known::normalize_cap;

use super::input::{PolicyInput, or_config};
use super::network::{is_loopback_address, network_permission, publish_address};
use super::paths::{is_engine_socket, is_within, normalize_path, path_string};
use crate::security::permissions::{Permission, PermissionRequest, RequestStatus, Source};

/// Every request the spec makes beyond the hardened baseline, status [`RequestStatus::Refused`]
/// until decided. Deduplicated by (permission, source), in spec order.
pub(super) fn collect_requests(input: &PolicyInput) -> Vec<PermissionRequest> {
    let spec = &input.spec;
    let o = &input.origins;
    let mut out: Vec<PermissionRequest> = Vec::new();
    let mut push = |permission: Permission, source: Source| {
        if !out
            .iter()
            .any(|r| r.permission == permission && r.source == source)
        {
            out.push(PermissionRequest {
                permission,
                source,
                status: RequestStatus::Refused,
            });
        }
    };
    if spec.privileged {
        push(Permission::Privileged, or_config(o.privileged.as_ref()));
    }
    // Root: a container user or remote user that resolves to uid 0, or an image that runs as
    // root with no non-root remote user to run as instead.
    let root = |u: &str| input.is_root(u);
    if let Some(u) = &spec.user {
        if root(u) {
            push(Permission::Root, or_config(o.container_user.as_ref()));
        }
    } else if input.image_user.as_deref().is_none_or(root)
        && input.remote_user.as_deref().is_none_or(root)
    {
        push(Permission::Root, Source::ImageUser);
    }
    if let Some(u) = &input.remote_user
        && root(u)
    {
        push(Permission::Root, or_config(o.remote_user.as_ref()));
    }
    for c in &spec.cap_add {
        let c = normalize_cap(c);
        let source = or_config(o.capabilities.get(&c));
        push(Permission::Capability(c), source);
    }
    for opt in &spec.security_opt {
        if !is_no_new_privileges(opt) {
            push(
                Permission::SecurityOpt(opt.clone()),
                or_config(o.security_opts.get(opt)),
            );
        }
    }
    for m in &spec.mounts {
        if m.kind != MountKind::Bind {
            continue;
        }
        let source = or_config(o.mounts.get(&m.target));
        let raw = m.source.clone().unwrap_or_default();
        let Some(path) = normalize_path(&raw) else {
            // A relative bind source cannot be placed: treat it as outside the workspace.
            push(Permission::Mount(raw), source);
            continue;
        };
        if is_engine_socket(&path, input.engine_socket.as_deref()) {
            push(Permission::EngineSocket(path), source);
        } else if o.owned.iter().any(|owned| is_within(&path, owned)) {
            // devcell's own folder for this container
        } else if !is_within(&path, &path_string(&input.workspace)) {
            push(Permission::Mount(path), source);
        }
    }
    for u in &spec.ulimits {
        if let Some(p) = super::limits::ulimit_permission(&u.name, u.soft, u.hard) {
            push(p, Source::DevcontainerJson);
        }
    }
    for d in &spec.devices {
        push(
            Permission::Device(d.host_path.clone()),
            or_config(o.devices.get(&d.host_path)),
        );
    }
    if let Some(p) = spec.network_mode.as_deref().and_then(network_permission) {
        push(p, or_config(o.network.as_ref()));
    }
    // `appPort` and `runArgs -p` (devcontainer.json only): no address is rewritten to loopback
    // under `hardened`; any other address than loopback is a request (spec-note 0431).
    for p in &spec.ports {
        if let Some(ip) = p
            .host_ip
            .as_deref()
            .filter(|ip| !ip.is_empty() && !is_loopback_address(ip))
        {
            push(
                Permission::PublishPort(publish_address(ip, p.host_port)),
                Source::DevcontainerJson,
            );
        }
    }
    if let Some(gpu) = &spec.gpu {
        push(
            crate::security::gpu::permission(gpu),
            Source::DevcontainerJson,
        );
    }
    for key in &input.repository_labels {
        if crate::names::is_identity_label(key) {
            push(
                Permission::IdentityLabel(key.clone()),
                Source::DevcontainerJson,
            );
        }
    }
    out
}

pub(crate) fn is_no_new_privileges(opt: &str) -> bool {
    matches!(
        opt.trim(),
        "no-new-privileges" | "no-new-privileges:true" | "no-new-privileges=true"
    )
}
