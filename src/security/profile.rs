//! Security profiles: `hardened` (default) and `reference`.

use std::fmt;

use crate::settings::Profile;

/// Default maximum number of processes under `hardened`.
pub const DEFAULT_PIDS: i64 = 1024;
/// Default memory limit under `hardened`: 4 GiB.
pub const DEFAULT_MEMORY_BYTES: i64 = 4 << 30;
/// Default CPU limit under `hardened`: 2 CPUs, in billionths of a CPU.
pub const DEFAULT_NANO_CPUS: i64 = 2_000_000_000;

/// The resource limits `hardened` sets (all configurable by the user).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileLimits {
    /// Maximum number of processes in the container.
    pub pids: i64,
    /// Memory limit in bytes.
    pub memory_bytes: i64,
    /// CPU limit in billionths of a CPU.
    pub nano_cpus: i64,
}

impl Default for ProfileLimits {
    fn default() -> Self {
        Self {
            pids: DEFAULT_PIDS,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            nano_cpus: DEFAULT_NANO_CPUS,
        }
    }
}

/// How much of what a configuration asks for devcell applies.
///
/// - `Hardened` (default): non-root container and remote user, no privileged mode, every
///   capability dropped, `no-new-privileges`, read-only root filesystem with tmpfs for `/tmp`,
///   `/run`, `/var/tmp` and the remote user's home, resource limits, and no mount of an engine
///   socket, the host home or any host path outside the workspace. Anything beyond that is a
///   permission request the user must grant (spec-notes 0082–0086).
/// - `Reference`: the configuration as written, like `@devcontainers/cli`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProfile {
    /// The default, with its limits.
    Hardened(ProfileLimits),
    /// The configuration as written.
    Reference,
}

impl Default for SecurityProfile {
    fn default() -> Self {
        SecurityProfile::Hardened(ProfileLimits::default())
    }
}

impl SecurityProfile {
    /// `hardened` or `reference`.
    pub fn name(&self) -> &'static str {
        match self {
            SecurityProfile::Hardened(_) => "hardened",
            SecurityProfile::Reference => "reference",
        }
    }
}

impl fmt::Display for SecurityProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl SecurityProfile {
    /// The profile `profile` names, with `limits` under `hardened` (the name is parsed once,
    /// where it enters: `settings::Profile`).
    pub fn with_limits(profile: Profile, limits: ProfileLimits) -> Self {
        match profile {
            Profile::Hardened => SecurityProfile::Hardened(limits),
            Profile::Reference => SecurityProfile::Reference,
        }
    }

    /// The profile's name as the user chose it.
    pub fn profile(&self) -> Profile {
        match self {
            SecurityProfile::Hardened(_) => Profile::Hardened,
            SecurityProfile::Reference => Profile::Reference,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_hardened_with_documented_limits() {
        let SecurityProfile::Hardened(l) = SecurityProfile::default() else {
            panic!("default must be hardened");
        };
        assert_eq!(l.pids, 1024);
        assert_eq!(l.memory_bytes, 4 * 1024 * 1024 * 1024);
        assert_eq!(l.nano_cpus, 2_000_000_000);
    }

    #[test]
    fn names_round_trip() {
        for p in [Profile::Hardened, Profile::Reference] {
            let profile = SecurityProfile::with_limits(p, ProfileLimits::default());
            assert_eq!(profile.profile(), p);
            assert_eq!(profile.name(), p.as_str());
        }
    }
}
