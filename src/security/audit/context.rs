//! What the audit knows about the host side of a container, [`AuditContext`]: the workspace,
//! the user's home, the engine's rootless socket folder, the Features lockfile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the audit knows about the host side: the workspace, the user's home, the lockfile.
/// Paths are host paths. All fields are optional; a missing one weakens the rules that need it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditContext {
    /// Host workspace folder (the folder mounted as the workspace). Default: the container's
    /// `devcontainer.local_folder` label.
    pub workspace: Option<PathBuf>,
    /// Workspace folder inside the container (e.g. `/workspace`); used by the probe, which sees
    /// mount targets.
    pub container_workspace: Option<String>,
    /// The host user's home folder.
    pub home: Option<PathBuf>,
    /// The host's `$XDG_RUNTIME_DIR` (rootless engine sockets live there).
    pub xdg_runtime_dir: Option<PathBuf>,
    /// `Some(true)` when a `devcontainer-lock.json` was found beside the config, `Some(false)`
    /// when looked for and missing, `None` when not checked.
    pub features_lockfile: Option<bool>,
    /// The lockfile's pins (lock key → `integrity`) when it was read; `None` when not read or
    /// not a valid lockfile. Compared with the container's
    /// [`FEATURE_DIGESTS_LABEL`](super::FEATURE_DIGESTS_LABEL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_features: Option<BTreeMap<String, String>>,
    /// Networks known to be closed: internal, with no gateway address on the host (an
    /// `--internal` network alone still reaches the host where the engine sets no firewall rules).
    pub internal_networks: Vec<String>,
    /// Host git directories of the workspace's repositories (a worktree's main repository's
    /// `.git`), which must be mounted for git to work in the container: a bind at or inside one
    /// is part of the workspace, not an extra host path (spec-note 0201). The caller derives
    /// them from the host workspace (`handoff::workspace`), never from the container.
    #[serde(default)]
    pub git_dirs: Vec<PathBuf>,
    /// The egress proxy's evidence of an `allowlist` container (its label
    /// [`EGRESS_NETWORK_LABEL`](crate::names::EGRESS_NETWORK_LABEL)), read from devcell's state
    /// by the caller; `None` when it has none or was not looked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressEvidence>,
}

/// What the host-side egress proxy of an `allowlist` container serves and has decided
/// (spec-note 0505).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressEvidence {
    /// The allowlist entries (`host:port[=address]`).
    pub entries: Vec<String>,
    /// The destinations allowed, as `host:port (N)`.
    pub allowed: Vec<String>,
    /// The destinations refused, as `host:port (N, reason)`.
    pub refused: Vec<String>,
    /// Whether the proxy runs (when not, nothing leaves the container at all).
    pub proxy_running: bool,
    /// The decision record on the host.
    pub record: PathBuf,
    /// devcell's own egress folder on the host (`<state>/egress`): a read-only bind from
    /// inside it to `/.devcell-egress/…` is the proxy's channel (its socket folder and the
    /// forwarder), part of the allowlist, not an extra host path for repo scope.
    #[serde(default)]
    pub channel_root: PathBuf,
}

impl AuditContext {
    /// A context from this process's environment: `home` from the user's home folder,
    /// `xdg_runtime_dir` from `$XDG_RUNTIME_DIR`; the rest unset.
    pub fn from_environment() -> Self {
        Self {
            home: dirs::home_dir(),
            xdg_runtime_dir: std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
            ..Self::default()
        }
    }
}

impl AuditContext {
    /// Sets `features_lockfile` from the config file's lockfile ([`crate::features::lockfile::lockfile_path`], the one rule `up` writes by):
    /// `Some(true)` when it exists and is not empty (an empty lockfile only asks to be
    /// initialised), else `Some(false)`; and `locked_features` from its content when it parses.
    ///
    /// The lockfile is the repository's: resolved first, and when it lands outside
    /// [`AuditContext::workspace`] (a link to a host file) it is neither read nor counted;
    /// inside, it is read without following links (spec-note 0400).
    pub fn with_config_file(mut self, config_file: &Path) -> Self {
        use crate::security::host_path;
        let lockfile = crate::features::lockfile::lockfile_path(config_file);
        let resolved = host_path::resolve(&lockfile).ok().filter(|r| {
            self.workspace.as_deref().is_none_or(|ws| {
                let places = host_path::Places::new(ws, None, None);
                places.place(r) == host_path::Place::Workspace
            })
        });
        let bytes = resolved.and_then(|r| {
            host_path::read_no_follow(&r, crate::config::jsonc::MAX_FILE_BYTES as u64)
                .ok()
                .flatten()
        });
        self.features_lockfile = Some(bytes.as_ref().is_some_and(|b| !b.is_empty()));
        self.locked_features = bytes
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|text| crate::features::lockfile::parse(&text, &lockfile).ok())
            .and_then(|state| state.lockfile().cloned())
            .map(|l| {
                l.features
                    .into_iter()
                    .map(|(k, f)| (k, f.integrity))
                    .collect()
            });
        self
    }
}
