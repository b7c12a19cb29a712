//! Control "engine socket": Can the agent reach the engine or otherwise control host-level
//! resources? Looks at engine sockets mounted or reachable, host kernel or engine state, privileged
//! mode, capabilities, shared namespaces, devices, hardening options, the user and resource limits.

use std::path::{Path, PathBuf};

use super::mount_subject;
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, FactsSource, MountKind, Seccomp};
use crate::security::audit::heuristics::{
    CRITICAL_CAPS, HOST_CONTROL_DIRS, ancestor_of, components, same, within,
};
use crate::security::audit::scoring::{Evidence, Risk, ev};
use crate::security::known::{ENGINE_SOCKET_NAMES, ENGINE_SOCKET_PATHS};

fn socket_paths(ctx: &AuditContext) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ENGINE_SOCKET_PATHS.iter().map(PathBuf::from).collect();
    if let Some(x) = &ctx.xdg_runtime_dir {
        v.push(x.join("podman/podman.sock"));
        v.push(x.join("docker.sock"));
    }
    v
}

fn engine_socket_reason(path: &str, ctx: &AuditContext) -> Option<String> {
    let c = components(path);
    if let Some(last) = c.last()
        && ENGINE_SOCKET_NAMES.contains(&last.as_str())
    {
        return Some(format!("`{last}` is an engine control socket"));
    }
    if let Some(sock) = socket_paths(ctx)
        .iter()
        .find(|s| same(path, s) || ancestor_of(path, s))
    {
        return Some(format!(
            "contains the engine socket path `{}`",
            sock.display()
        ));
    }
    // Rootless engines keep their sockets under /run/user/<uid>[/podman].
    if c.first().is_some_and(|f| f == "run")
        && c.get(1).is_some_and(|s| s == "user")
        && c.len() <= 4
        && c.get(3).is_none_or(|s| s == "podman")
    {
        return Some("contains rootless engine sockets under `/run/user`".to_string());
    }
    None
}

/// The evidence for engine socket: one named step per kind of host control, in the order the
/// table shows them.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    let socket_mounted = mounts(f, ctx, &mut out);
    let socket_reachable = sockets(f, &mut out);
    privileged(f, &mut out);
    capabilities(f, &mut out);
    namespaces(f, &mut out);
    devices(f, &mut out);
    hardening(f, &mut out);
    user(f, &mut out);
    limits(f, &mut out);
    engine_env(f, &mut out);
    if !socket_mounted && !socket_reachable {
        out.push(ev(
            "engine sockets",
            "no Docker, Podman or containerd socket is mounted",
            Risk::Safe,
        ));
    }
    out
}

/// Mounts of an engine socket or of host kernel or engine state; whether a socket was mounted.
fn mounts(f: &ContainerFacts, ctx: &AuditContext, out: &mut Vec<Evidence>) -> bool {
    let mut socket_seen = false;
    for m in &f.mounts {
        let src_reason = m
            .source
            .as_deref()
            .filter(|_| m.kind == MountKind::Bind)
            .and_then(|s| engine_socket_reason(s, ctx));
        let target_reason = components(&m.target)
            .last()
            .filter(|n| ENGINE_SOCKET_NAMES.contains(&n.as_str()))
            .map(|n| format!("mounted at an engine socket path (`{n}`)"));
        if let Some(reason) = src_reason.or(target_reason) {
            socket_seen = true;
            out.push(ev(
                mount_subject(m),
                format!("{reason}: the agent can create privileged sibling containers and so control the host"),
                Risk::Critical,
            ));
        } else if let Some(src) = m.source.as_deref().filter(|_| m.kind == MountKind::Bind)
            && let Some(dir) = HOST_CONTROL_DIRS
                .iter()
                .find(|d| same(src, Path::new(d)) || within(src, Path::new(d)))
                // A read-only file inside (e.g. `/etc/localtime`) controls nothing; it is an
                // extra host path, scored under repo scope.
                .filter(|d| !m.read_only || same(src, Path::new(d)))
        {
            let risk = if m.read_only {
                Risk::Weak
            } else {
                Risk::Critical
            };
            out.push(ev(
                mount_subject(m),
                format!("host kernel or engine state under `{dir}`"),
                risk,
            ));
        }
    }
    socket_seen
}

/// Engine sockets the probe found reachable from inside; whether there was one.
fn sockets(f: &ContainerFacts, out: &mut Vec<Evidence>) -> bool {
    let mut socket_seen = false;
    for s in &f.sockets {
        let name = components(s).last().cloned().unwrap_or_default();
        if ENGINE_SOCKET_NAMES.contains(&name.as_str()) {
            socket_seen = true;
            out.push(ev(
                format!("socket {s}"),
                "an engine control socket is reachable from inside",
                Risk::Critical,
            ));
        }
    }
    socket_seen
}

/// Privileged mode.
fn privileged(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    match f.privileged {
        Some(true) => out.push(ev(
            "privileged",
            "all capabilities, all host devices, no seccomp/AppArmor: host disks can be mounted",
            Risk::Critical,
        )),
        Some(false) => out.push(ev("privileged", "not privileged", Risk::Safe)),
        None => {}
    }
}

/// The capabilities kept, the host-escape ones critical.
fn capabilities(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    let Some(caps) = &f.capabilities else {
        return;
    };
    let critical: Vec<&str> = caps
        .iter()
        .map(String::as_str)
        .filter(|c| CRITICAL_CAPS.contains(c))
        .collect();
    let all: Vec<&str> = caps.iter().map(String::as_str).collect();
    let how = if f.source == Some(FactsSource::Inspect) {
        "computed from the engine's default set, cap_add and cap_drop"
    } else {
        "bounding set from /proc/self/status"
    };
    if !critical.is_empty() {
        out.push(ev(
            format!("capabilities {}", critical.join(",")),
            format!("host-escape capabilities ({how})"),
            Risk::Critical,
        ));
    } else if !all.is_empty() {
        out.push(ev(
            format!("capabilities {}", all.join(",")),
            format!("capabilities kept; `--cap-drop ALL` removes them ({how})"),
            Risk::Weak,
        ));
    } else {
        out.push(ev("capabilities", format!("none ({how})"), Risk::Safe));
    }
}

/// The pid, ipc, uts and network namespaces shared with the host or another container.
fn namespaces(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    match f.pid_mode.as_deref() {
        Some("host") => out.push(ev(
            "pid namespace host",
            "host processes are visible and can be signalled or traced",
            Risk::Critical,
        )),
        Some(m) if m.starts_with("container:") => out.push(ev(
            format!("pid namespace {m}"),
            "shares another container's processes",
            Risk::Weak,
        )),
        Some(_) => out.push(ev("pid namespace", "private", Risk::Safe)),
        None => {}
    }
    if f.ipc_mode.is_none() && f.uts_mode.is_none() && f.source == Some(FactsSource::Probe) {
        out.push(ev(
            "ipc/uts namespaces",
            "not observable from inside (sharing the host's is judged from `docker inspect`)",
            Risk::Safe,
        ));
    }
    for (label, mode) in [("ipc", &f.ipc_mode), ("uts", &f.uts_mode)] {
        match mode.as_deref() {
            Some("host") => out.push(ev(
                format!("{label} namespace host"),
                "shares the host's namespace",
                Risk::Weak,
            )),
            Some(m) if m.starts_with("container:") => out.push(ev(
                format!("{label} namespace {m}"),
                "shares another container's namespace",
                Risk::Weak,
            )),
            _ => {}
        }
    }
    if f.network_mode.as_deref() == Some("host") {
        out.push(ev(
            "network namespace host",
            "host loopback services (e.g. an engine TCP endpoint) are reachable",
            Risk::Weak,
        ));
    }
}

/// Host devices, disks and kernel memory critical; device requests (e.g. GPUs).
fn devices(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    for d in &f.devices {
        let path = d.host_path.as_deref().unwrap_or(&d.container_path);
        let name = components(path).last().cloned().unwrap_or_default();
        let critical = ["mem", "kmem", "port", "kmsg"].contains(&name.as_str())
            || [
                "sd", "nvme", "vd", "xvd", "hd", "dm-", "loop", "md", "mapper",
            ]
            .iter()
            .any(|p| name.starts_with(p));
        out.push(ev(
            format!("device {path}"),
            if critical {
                "host disk or kernel memory device"
            } else {
                "host device available inside"
            },
            if critical { Risk::Critical } else { Risk::Weak },
        ));
    }
    // a GPU is a permission (spec-note 0646): the audit names it given, or none
    match f.gpu_requested {
        Some(true) => out.push(ev(
            "gpu",
            "the host's GPUs are given to the container (a device request; under `hardened` only with `--allow gpu`)",
            Risk::Weak,
        )),
        Some(false) => out.push(ev("gpu", "none requested", Risk::Safe)),
        None => {}
    }
    if f.device_requests && f.gpu_requested != Some(true) {
        out.push(ev(
            "device requests",
            "host devices requested (e.g. GPUs)",
            Risk::Weak,
        ));
    }
}

/// The hardening options: no-new-privileges, seccomp, AppArmor, SELinux, system paths.
fn hardening(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    match f.no_new_privileges {
        Some(true) => out.push(ev("no-new-privileges", "set", Risk::Safe)),
        Some(false) => out.push(ev(
            "no-new-privileges",
            "not set: setuid binaries can raise privileges",
            Risk::Weak,
        )),
        None => {}
    }
    match f.seccomp {
        Some(Seccomp::Unconfined) => out.push(ev(
            "seccomp",
            "unconfined: every system call is allowed",
            Risk::Weak,
        )),
        Some(Seccomp::Filtered) => out.push(ev("seccomp", "filtered", Risk::Safe)),
        None => {}
    }
    if f.apparmor_unconfined == Some(true) {
        out.push(ev("apparmor", "unconfined", Risk::Weak));
    }
    if f.selinux_disabled == Some(true) {
        out.push(ev(
            "selinux",
            "labelling disabled (`label=disable`)",
            Risk::Weak,
        ));
    }
    if f.systempaths_unconfined == Some(true) {
        out.push(ev(
            "systempaths",
            "unconfined: /proc and /sys are not masked",
            Risk::Weak,
        ));
    }
}

/// The user the container runs as.
fn user(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    match f.uid {
        Some(0) => out.push(ev(
            format!(
                "user {}",
                f.user
                    .as_deref()
                    .filter(|u| !u.is_empty())
                    .unwrap_or("root")
            ),
            "runs as root (uid 0)",
            Risk::Weak,
        )),
        Some(uid) => out.push(ev(format!("user {uid}"), "non-root", Risk::Safe)),
        None => {
            if let Some(u) = f.user.as_deref() {
                out.push(ev(
                    format!("user {u}"),
                    "named non-root user (uid resolved from the image)",
                    Risk::Safe,
                ));
            }
        }
    }
}

/// The pids, memory and CPU limits, or that they cannot be observed.
fn limits(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    if !f.limits_known {
        out.push(ev(
            "resource limits",
            "not observable: cannot tell whether pids, memory and CPU are bounded",
            Risk::Weak,
        ));
        return;
    }
    let limit = |name: &str, v: Option<String>| match v {
        Some(v) => ev(format!("{name} limit"), v, Risk::Safe),
        None => ev(
            format!("{name} limit"),
            "unlimited: a runaway process can exhaust the host",
            Risk::Weak,
        ),
    };
    out.push(limit(
        "pids",
        f.pids_limit.map(|p| format!("{p} processes")),
    ));
    out.push(limit(
        "memory",
        f.memory_limit.map(|m| format!("{} MiB", m / (1024 * 1024))),
    ));
    out.push(limit(
        "cpu",
        f.cpu_limit
            .map(|c| format!("{c} CPUs"))
            .or_else(|| f.cpuset.as_ref().map(|s| format!("cpuset {s}"))),
    ));
}

/// Environment variables that point tools at an engine endpoint.
fn engine_env(f: &ContainerFacts, out: &mut Vec<Evidence>) {
    for e in &f.env {
        if matches!(e.name.as_str(), "DOCKER_HOST" | "CONTAINER_HOST") {
            out.push(ev(
                format!("env {}", e.name),
                "points tools at an engine endpoint",
                Risk::Weak,
            ));
        }
    }
}
