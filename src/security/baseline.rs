//! The hardened baseline's parts that no `--allow` grants, and what a container `up` would reuse
//! lacks of them (spec-note 0270).

use std::fmt;

/// The security option `hardened` always sets.
pub const NO_NEW_PRIVILEGES: &str = "no-new-privileges:true";

/// A part of the hardened baseline an existing container lacks that no `--allow` grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaselineGap {
    /// The root filesystem is writable (`ReadonlyRootfs` false).
    WritableRoot,
    /// `no-new-privileges` is not set.
    NoNewPrivileges,
    /// A resource limit is missing (`None`) or above the profile's.
    Limit {
        /// `pids`, `memory` or `cpus`.
        name: &'static str,
        /// What the container has (`None` = unlimited), in the engine's units.
        have: Option<i64>,
        /// The profile's maximum, in the same units.
        max: i64,
    },
    /// The container has a network the current choice does not allow (`none` was asked for).
    Network {
        /// The container's `NetworkMode`.
        have: String,
        /// The network asked for now.
        want: String,
    },
    /// A mount a container created now would have is missing: a handoff's container git
    /// directory over a repository's `.git` (spec-note 0436). A container created before
    /// devcell kept the host's git directories out of containers still shows them.
    Mount {
        /// The container path that is not a mount point.
        target: String,
    },
}

impl fmt::Display for BaselineGap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaselineGap::WritableRoot => f.write_str("a writable root filesystem"),
            BaselineGap::NoNewPrivileges => write!(f, "no `{NO_NEW_PRIVILEGES}`"),
            BaselineGap::Limit { name, have, max } => {
                let show = |v: i64| match *name {
                    "cpus" => format!("{}", v as f64 / 1e9),
                    _ => v.to_string(),
                };
                match have {
                    None => write!(f, "no {name} limit (at most {})", show(*max)),
                    Some(v) => write!(f, "{name} limit {} (at most {})", show(*v), show(*max)),
                }
            }
            BaselineGap::Network { have, want } => {
                write!(f, "network `{have}` (asked for `{want}`)")
            }
            BaselineGap::Mount { target } => write!(
                f,
                "no container git directory at `{target}` (the host's git directory is exposed: the container predates spec-note 0436)"
            ),
        }
    }
}

impl BaselineGap {
    /// A stable word for JSON: `writableRoot`, `noNewPrivileges`, `limit`, `network`, `mount`.
    pub fn kind(&self) -> &'static str {
        match self {
            BaselineGap::WritableRoot => "writableRoot",
            BaselineGap::NoNewPrivileges => "noNewPrivileges",
            BaselineGap::Limit { .. } => "limit",
            BaselineGap::Network { .. } => "network",
            BaselineGap::Mount { .. } => "mount",
        }
    }
}
