//! Names both the permission policy ([`super::policy`]) and the audit ([`super::audit`]) judge
//! by, written once so the two cannot drift: the engine control sockets (at their usual paths,
//! and by file name anywhere) and Linux capability names.

/// Engine control sockets (Docker, Podman, containerd, CRI-O, BuildKit) at their usual paths:
/// a bind of one, or of a folder holding one, exposes the engine.
pub const ENGINE_SOCKET_PATHS: &[&str] = &[
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman/podman.sock",
    "/var/run/podman/podman.sock",
    "/run/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock",
    "/run/crio/crio.sock",
    "/run/buildkit/buildkitd.sock",
];

/// File names of engine control sockets; any path ending in one is an engine socket.
pub const ENGINE_SOCKET_NAMES: &[&str] = &[
    "docker.sock",
    "podman.sock",
    "containerd.sock",
    "crio.sock",
    "buildkitd.sock",
    "cri-dockerd.sock",
];

/// Whether a file name (the last component of a path) is an engine control socket's
/// ([`ENGINE_SOCKET_NAMES`]).
pub fn is_engine_socket_name(name: &str) -> bool {
    ENGINE_SOCKET_NAMES.contains(&name)
}

/// `SYS_PTRACE`, `cap_sys_ptrace` and `CAP_SYS_PTRACE` all normalise to `SYS_PTRACE`.
pub fn normalize_cap(cap: &str) -> String {
    let up = cap.trim().to_ascii_uppercase();
    up.strip_prefix("CAP_").map(str::to_string).unwrap_or(up)
}

/// Docker's default capability set (moby `oci/caps/defaults.go`), used to compute the effective
/// set from `CapAdd`/`CapDrop` for a non-privileged container.
pub const DOCKER_DEFAULT_CAPS: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "NET_RAW",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Linux capability names by bit number (`include/uapi/linux/capability.h`).
pub const CAPABILITY_BITS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_spellings_normalise() {
        for c in [
            "SYS_PTRACE",
            "sys_ptrace",
            "CAP_SYS_PTRACE",
            "cap_sys_ptrace",
            " CAP_SYS_PTRACE ",
        ] {
            assert_eq!(normalize_cap(c), "SYS_PTRACE", "{c}");
        }
        assert_eq!(normalize_cap("all"), "ALL");
    }

    #[test]
    fn every_known_socket_path_ends_in_a_known_socket_name() {
        for p in ENGINE_SOCKET_PATHS {
            let name = p.rsplit('/').next().unwrap();
            assert!(is_engine_socket_name(name), "{p}");
        }
        assert!(!is_engine_socket_name("dbus.sock"));
    }

    #[test]
    fn docker_defaults_are_capability_names() {
        for c in DOCKER_DEFAULT_CAPS {
            assert!(CAPABILITY_BITS.contains(c), "{c}");
        }
    }
}
