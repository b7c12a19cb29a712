//! What the policy judges: the requested container ([`PolicyInput`]) and who asked for each
//! part of it ([`Origins`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::engine::{ContainerSpec, passwd};

use crate::security::permissions::Source;

/// Who asked for each part of a [`ContainerSpec`]; anything not listed came from
/// devcontainer.json. Filled by `up` while merging image metadata, Features and the config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    /// Source of `privileged: true`.
    pub privileged: Option<Source>,
    /// Source of the container user (`containerUser`, `-u`).
    pub container_user: Option<Source>,
    /// Source of `remoteUser`.
    pub remote_user: Option<Source>,
    /// Capability (normalised) → source.
    pub capabilities: BTreeMap<String, Source>,
    /// Mount target (container path) → source.
    pub mounts: BTreeMap<String, Source>,
    /// Security option → source.
    pub security_opts: BTreeMap<String, Source>,
    /// Device host path → source.
    pub devices: BTreeMap<String, Source>,
    /// Source of the network mode.
    pub network: Option<Source>,
    /// Bind sources devcell made for this container (a handoff's container git directories,
    /// spec-note 0436): binds of them or of paths inside them are not requests.
    pub owned: Vec<String>,
}

pub(super) fn or_config(s: Option<&Source>) -> Source {
    s.cloned().unwrap_or(Source::DevcontainerJson)
}

/// Everything [`apply`] needs besides the profile and the grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyInput {
    /// The container as the merged configuration asks for it (workspace mount included).
    pub spec: ContainerSpec,
    /// Who asked for what.
    pub origins: Origins,
    /// The merged `remoteUser` (`None` = the container user).
    pub remote_user: Option<String>,
    /// The image's `USER` (`None`/empty = root).
    pub image_user: Option<String>,
    /// The remote user's home directory in the container, when known (from the image's
    /// `/etc/passwd`); else derived (spec-note 0084).
    pub remote_home: Option<String>,
    /// The remote user's numeric uid and gid, when known (owner of the home tmpfs).
    pub remote_ids: Option<(u32, u32)>,
    /// The host workspace folder (absolute, symlinks resolved by the caller).
    pub workspace: PathBuf,
    /// The host user's home directory, if known.
    pub host_home: Option<PathBuf>,
    /// The host path of the socket devcell talks to the engine through, if any.
    pub engine_socket: Option<PathBuf>,
    /// The image's `/etc/passwd` text, when read: users are judged by the uid the engine
    /// resolves them to ([`crate::engine::passwd::resolve`]), not by their spelling.
    pub passwd: Option<String>,
    /// Label keys the repository sets on the container (`runArgs` `--label`/`-l`).
    pub repository_labels: Vec<String>,
}

impl PolicyInput {
    /// Whether `user` runs as uid 0 in this image ([`passwd::is_root`] against
    /// [`PolicyInput::passwd`]; an empty spelling is the image's default, taken as root).
    pub fn is_root(&self, user: &str) -> bool {
        passwd::is_root(user, self.passwd.as_deref(), true)
    }
}
