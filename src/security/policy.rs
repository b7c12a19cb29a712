//! The permission policy: a pure function from a requested [`ContainerSpec`] (as the merged
//! configuration asks for it), the profile and the user's grants, to the spec devcell creates
//! and the list of permission requests with what was done with each.
//!
//! Grants come only from the user (`--allow` flags, the user's devcell config), never from the
//! repository: nothing in devcontainer.json, a Feature or an image label can add to [`Grants`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::engine::{ContainerSpec, Limits, MountKind, passwd};

use super::error::{Result, SecurityError};
use super::profile::{ProfileLimits, SecurityProfile};

/// Who asked for something.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The repository's devcontainer.json (including its `runArgs`).
    DevcontainerJson,
    /// A Feature's `devcontainer-feature.json`, by Feature id.
    Feature(String),
    /// The base image's `devcontainer.metadata` label.
    ImageMetadata,
    /// The base image's `USER` (root when unset).
    ImageUser,
    /// The user's own command line (`up --mount …`): granted by being asked for.
    CommandLine,
    /// An existing container `up` would reuse (short id): what it already has
    /// ([`crate::security::reuse`]).
    ExistingContainer(String),
    /// A repository's git link (`.git` file or symlink, or a `commondir` file; host path):
    /// it names the git directory devcell's host git would read and the handoff would mount.
    GitLink(String),
    /// A service of the resolved Compose model and the property that asks (`cap_add`,
    /// `volumes`, `network_mode`, …; spec-note 0601).
    ComposeService {
        /// The service name.
        service: String,
        /// The Compose property, as Compose spells it.
        property: String,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::DevcontainerJson => f.write_str("devcontainer.json"),
            Source::Feature(id) => write!(f, "Feature `{id}`"),
            Source::ImageMetadata => write!(f, "image label `{}`", crate::names::METADATA_LABEL),
            Source::ImageUser => f.write_str("image `USER`"),
            Source::CommandLine => f.write_str("command line"),
            Source::ExistingContainer(id) => write!(f, "existing container {id}"),
            Source::GitLink(path) => write!(f, "git link `{path}`"),
            Source::ComposeService { service, property } => {
                write!(f, "Compose service `{service}` (`{property}`)")
            }
        }
    }
}

/// Something beyond the hardened baseline.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// `privileged: true` / `--privileged`.
    Privileged,
    /// The container or remote user is root.
    Root,
    /// A Linux capability (normalised: upper case, no `CAP_` prefix; `ALL` for all).
    Capability(String),
    /// A bind mount of a host path outside the workspace (normalised absolute path).
    Mount(String),
    /// A security option other than `no-new-privileges`.
    SecurityOpt(String),
    /// A host device.
    Device(String),
    /// The host's network namespace (`--network host`).
    HostNetwork,
    /// A mount of (or over) a container engine's socket: never granted under `hardened`.
    EngineSocket(String),
    /// Another network namespace or network than the engine's default bridge or `none`:
    /// `container:<name|id>` (another container's namespace) or a named network, as written
    /// (spec-note 0430).
    Network(String),
    /// A port published on a host address other than loopback: `<ip>:<hostPort>` (IPv6 in
    /// brackets, `*` for an engine-chosen port) (spec-note 0431).
    PublishPort(String),
    /// A label key in the namespaces devcell and the reference CLI find containers by
    /// (`devcontainer.*`, `devcell.*`) set by the repository: never granted under `hardened`
    /// (spec-note 0421).
    IdentityLabel(String),
    /// A command the repository names that devcell would run on the host (`initializeCommand`):
    /// its exact argv, shlex-quoted (spec-note 0410).
    HostCommand(String),
    /// A git directory outside the workspace that a repository's git link names and that
    /// fails the worktree back-link check (resolved absolute path; spec-note 0411).
    GitDir(String),
    /// A host environment variable whose value the configuration sends into the container, a
    /// build, a label or a mount (`${localEnv:NAME}`, `runArgs -e NAME`; spec-note 0440).
    HostEnv(String),
    /// A network for image builds of a container whose network is `none` (spec-note 0442).
    BuildNetwork,
    /// A namespace shared with the host or with a container outside the Compose project:
    /// `<kind>:<mode>` with kind `pid`, `ipc`, `uts`, `userns`, `cgroup` (`pid:host`,
    /// `ipc:container:x`), or `volumes_from:container:<x>` (spec-note 0601).
    Namespace(String),
    /// A device cgroup rule (`device_cgroup_rules`: `c 1:3 mr`), which with the default
    /// `MKNOD` capability opens host devices (spec-note 0601).
    DeviceCgroupRule(String),
    /// A bind of the host home folder, or of a folder holding it (the host's root): never
    /// granted under `hardened` (spec-note 0601); a path below the home folder is a
    /// [`Permission::Mount`].
    HostHome(String),
    /// A named volume that already exists on the engine and that devcell did not create for
    /// this workspace (another workspace's data, a volume someone made by hand), by name
    /// (spec-note 0443). A `local` volume with `o=bind` is judged as a bind of its `device`
    /// instead.
    Volume(String),
    /// An egress destination the repository requests for an `allowlist` container
    /// (`customizations.devcell.egress`), as its normalised entry `host:port[=address]`
    /// (spec-note 0501).
    Egress(String),
}

impl Permission {
    /// The `--allow` flag that grants it; `None` for [`Permission::EngineSocket`].
    pub fn grant_flag(&self) -> Option<String> {
        Some(match self {
            Permission::Privileged => "--allow privileged".to_string(),
            Permission::Root => "--allow root".to_string(),
            Permission::Capability(c) => format!("--allow cap:{c}"),
            Permission::Mount(p) => format!("--allow mount:{p}"),
            Permission::SecurityOpt(o) => format!("--allow security-opt:{o}"),
            Permission::Device(d) => format!("--allow device:{d}"),
            Permission::HostNetwork => "--allow network:host".to_string(),
            Permission::HostEnv(n) => format!("--allow env:{n}"),
            Permission::BuildNetwork => "--allow build-network".to_string(),
            Permission::Network(n) => format!("--allow network:{n}"),
            Permission::PublishPort(a) => format!("--allow publish:{a}"),
            Permission::EngineSocket(_)
            | Permission::IdentityLabel(_)
            | Permission::HostHome(_) => return None,
            Permission::HostCommand(_) => "--allow host-command".to_string(),
            Permission::Namespace(n) => format!("--allow namespace:{n}"),
            Permission::DeviceCgroupRule(r) => format!("--allow device-cgroup-rule:{r}"),
            Permission::GitDir(p) => format!("--allow gitdir:{p}"),
            Permission::Volume(v) => format!("--allow volume:{v}"),
            Permission::Egress(d) => format!("--allow egress:{d}"),
        })
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Permission::Privileged => f.write_str("privileged mode"),
            Permission::Root => f.write_str("running as root"),
            Permission::Capability(c) => write!(f, "capability `{c}`"),
            Permission::Mount(p) => write!(f, "mount of host path `{p}`"),
            Permission::SecurityOpt(o) => write!(f, "security option `{o}`"),
            Permission::Device(d) => write!(f, "host device `{d}`"),
            Permission::HostNetwork => f.write_str("host network"),
            Permission::EngineSocket(p) => write!(f, "mount of the container engine socket `{p}`"),
            Permission::Network(n) => write!(f, "network `{n}`"),
            Permission::PublishPort(a) => write!(f, "port published on host address `{a}`"),
            Permission::IdentityLabel(k) => write!(f, "identity label `{k}` set by the repository"),
            Permission::HostCommand(argv) => write!(f, "host command `{argv}`"),
            Permission::GitDir(p) => write!(f, "git directory `{p}` outside the workspace"),
            Permission::HostEnv(n) => write!(f, "host environment variable `{n}`"),
            Permission::BuildNetwork => f.write_str("network for image builds"),
            Permission::Namespace(n) => write!(f, "shared namespace `{n}`"),
            Permission::DeviceCgroupRule(r) => write!(f, "device cgroup rule `{r}`"),
            Permission::HostHome(p) => write!(
                f,
                "mount of the host home folder (or a folder holding it) `{p}`"
            ),
            Permission::Volume(v) => write!(
                f,
                "existing volume `{v}` that devcell did not create for this workspace"
            ),
            Permission::Egress(d) => write!(f, "egress to `{d}`"),
        }
    }
}

/// What was done with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    /// The user granted it; applied.
    Granted,
    /// Applied because the profile is `reference` (or the user asked on the command line).
    AllowedByProfile,
    /// Not granted: creation is refused.
    Refused,
    /// Never allowed under this profile (an engine socket): creation is refused.
    Forbidden,
}

/// One permission request: what, who asked, and what was done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionRequest {
    /// What is asked for.
    pub permission: Permission,
    /// Who asked.
    pub source: Source,
    /// What was done.
    pub status: RequestStatus,
}

impl fmt::Display for PermissionRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (from {})", self.permission, self.source)?;
        match (&self.status, self.permission.grant_flag()) {
            (RequestStatus::Refused, Some(flag)) => write!(f, ", grant with `{flag}`"),
            (RequestStatus::Forbidden, _) => f.write_str(", never allowed"),
            (RequestStatus::Granted, _) => f.write_str(", granted"),
            _ => Ok(()),
        }
    }
}

impl Permission {
    /// The kind as a stable word: `privileged`, `root`, `capability`, `mount`, `securityOpt`,
    /// `device`, `hostNetwork`, `engineSocket`, `network`, `publishPort`, `identityLabel`,
    /// `hostCommand`, `gitDir`, `hostEnv`, `buildNetwork`, `volume`, `namespace`,
    /// `deviceCgroupRule`, `hostHome`, `egress`.
    pub fn kind(&self) -> &'static str {
        match self {
            Permission::Privileged => "privileged",
            Permission::Root => "root",
            Permission::Capability(_) => "capability",
            Permission::Mount(_) => "mount",
            Permission::SecurityOpt(_) => "securityOpt",
            Permission::Device(_) => "device",
            Permission::HostNetwork => "hostNetwork",
            Permission::EngineSocket(_) => "engineSocket",
            Permission::Network(_) => "network",
            Permission::PublishPort(_) => "publishPort",
            Permission::IdentityLabel(_) => "identityLabel",
            Permission::HostCommand(_) => "hostCommand",
            Permission::GitDir(_) => "gitDir",
            Permission::HostEnv(_) => "hostEnv",
            Permission::BuildNetwork => "buildNetwork",
            Permission::Volume(_) => "volume",
            Permission::Namespace(_) => "namespace",
            Permission::DeviceCgroupRule(_) => "deviceCgroupRule",
            Permission::HostHome(_) => "hostHome",
            Permission::Egress(_) => "egress",
        }
    }

    /// The capability, path or option the permission is about, if any.
    pub fn value(&self) -> Option<&str> {
        match self {
            Permission::Capability(v)
            | Permission::Mount(v)
            | Permission::SecurityOpt(v)
            | Permission::Device(v)
            | Permission::EngineSocket(v)
            | Permission::Network(v)
            | Permission::PublishPort(v)
            | Permission::IdentityLabel(v)
            | Permission::HostCommand(v)
            | Permission::GitDir(v)
            | Permission::HostEnv(v)
            | Permission::Volume(v)
            | Permission::Namespace(v)
            | Permission::DeviceCgroupRule(v)
            | Permission::HostHome(v)
            | Permission::Egress(v) => Some(v),
            _ => None,
        }
    }
}

impl RequestStatus {
    /// `granted`, `allowedByProfile`, `refused`, `forbidden`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Granted => "granted",
            RequestStatus::AllowedByProfile => "allowedByProfile",
            RequestStatus::Refused => "refused",
            RequestStatus::Forbidden => "forbidden",
        }
    }
}

/// JSON form for the `up` result: `{"permission": "capability", "value": "SYS_PTRACE",
/// "source": "Feature `ghcr.io/x/y:1`", "status": "refused", "grant": "--allow cap:SYS_PTRACE"}`
/// (`value` and `grant` omitted when there is none).
impl serde::Serialize for PermissionRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("permission", self.permission.kind())?;
        if let Some(v) = self.permission.value() {
            map.serialize_entry("value", v)?;
        }
        map.serialize_entry("source", &self.source.to_string())?;
        map.serialize_entry("status", self.status.as_str())?;
        if let Some(g) = self.permission.grant_flag() {
            map.serialize_entry("grant", &g)?;
        }
        map.end()
    }
}

/// Permissions the user granted (`--allow`, repeatable, or the user config's `allow` list).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// `privileged`.
    pub privileged: bool,
    /// `root`.
    pub root: bool,
    /// `network:host`.
    pub host_network: bool,
    /// `cap:<NAME>` (normalised).
    pub capabilities: BTreeSet<String>,
    /// `mount:<host path>` (normalised); grants that path and everything under it.
    pub mounts: BTreeSet<String>,
    /// `security-opt:<option>`.
    pub security_opts: BTreeSet<String>,
    /// `device:<host path>`.
    pub devices: BTreeSet<String>,
    /// `network:<container:x | name>` (`network:host` is [`Grants::host_network`]).
    pub networks: BTreeSet<String>,
    /// `publish:<ip>:<port>`, `publish:<ip>:*` (any port on that address), `publish:*`.
    pub publish: BTreeSet<String>,
    /// `host-command`: every command the repository names for the host runs.
    pub host_command: bool,
    /// `gitdir:<host path>` (normalised); grants that git directory and everything under it.
    pub git_dirs: BTreeSet<String>,
    /// `env:<NAME>`: host variables the configuration may send into the container.
    pub env: BTreeSet<String>,
    /// `build-network`: image builds keep a network when the container has none.
    pub build_network: bool,
    /// `namespace:<kind>:<mode>` (`namespace:pid:host`).
    pub namespaces: BTreeSet<String>,
    /// `device-cgroup-rule:<rule>`.
    pub device_cgroup_rules: BTreeSet<String>,
    /// `volume:<name>`: existing volumes devcell did not create for this workspace.
    pub volumes: BTreeSet<String>,
    /// `egress:<host[:port][=address]>`: destinations the repository requested, as written
    /// by the user; matched against a request's normalised entry (`host:port[=address]`,
    /// port 443 when not given).
    pub egress: BTreeSet<String>,
}

impl Grants {
    /// Parses `--allow` values: `privileged`, `root`, `network:host`, `cap:<NAME>`,
    /// `mount:<absolute host path>`, `security-opt:<option>`, `device:<host path>`,
    /// `network:container:<x>` or `network:<name>`, `publish:<ip>:<port|*>` or `publish:*`,
    /// `host-command`, `gitdir:<absolute host path>`, `env:<NAME>`, `build-network`,
    /// `volume:<name>`, `namespace:<pid|ipc|uts|userns|cgroup|volumes_from>:<mode>`,
    /// `device-cgroup-rule:<rule>`, `egress:<host[:port][=address]>`.
    ///
    /// Errors: [`SecurityError::InvalidGrant`] naming the value.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self> {
        let mut grants = Grants::default();
        for value in values {
            grants.add(value.as_ref())?;
        }
        Ok(grants)
    }

    /// Adds one `--allow` value (see [`Grants::parse`]).
    pub fn add(&mut self, value: &str) -> Result<()> {
        let bad = |message: &str| SecurityError::InvalidGrant {
            value: value.to_string(),
            message: message.to_string(),
        };
        match value.split_once(':') {
            None if value == "privileged" => self.privileged = true,
            None if value == "root" => self.root = true,
            None if value == "host-command" => self.host_command = true,
            Some(("gitdir", p)) => {
                let p = normalize_path(p).ok_or_else(|| bad("expected an absolute host path"))?;
                self.git_dirs.insert(p);
            }
            None if value == "build-network" => self.build_network = true,
            Some(("egress", d)) => {
                if d.is_empty() || d.contains(char::is_whitespace) {
                    return Err(bad(
                        "expected an egress destination (`egress:host[:port][=address]`)",
                    ));
                }
                self.egress.insert(egress_key(d));
            }
            Some(("env", n)) => {
                // A name as `${localEnv:NAME}` or `-e NAME` can spell it (no `=`, no NUL).
                if n.is_empty() || n.contains(['=', '\0']) {
                    return Err(bad("expected an environment variable name (`env:NAME`)"));
                }
                self.env.insert(n.to_string());
            }
            Some(("network", "host")) => self.host_network = true,
            Some(("namespace", n)) => {
                let known = ["pid", "ipc", "uts", "userns", "cgroup", "volumes_from"];
                match n.split_once(':') {
                    Some((kind, mode)) if known.contains(&kind) && !mode.is_empty() => {
                        self.namespaces.insert(n.to_string());
                    }
                    _ => {
                        return Err(bad(
                            "expected `namespace:<pid|ipc|uts|userns|cgroup|volumes_from>:<mode>` (`namespace:pid:host`)",
                        ));
                    }
                }
            }
            Some(("device-cgroup-rule", r)) if !r.trim().is_empty() => {
                self.device_cgroup_rules.insert(r.to_string());
            }
            Some(("cap", c)) if !c.is_empty() => {
                self.capabilities.insert(normalize_cap(c));
            }
            Some(("mount", p)) => {
                let p = normalize_path(p).ok_or_else(|| bad("expected an absolute host path"))?;
                self.mounts.insert(p);
            }
            Some(("security-opt", o)) if !o.is_empty() => {
                self.security_opts.insert(o.to_string());
            }
            Some(("device", d)) if d.starts_with('/') => {
                self.devices.insert(d.to_string());
            }
            Some(("network", n)) => match network_permission(n) {
                Some(Permission::Network(n)) => {
                    self.networks.insert(n);
                }
                _ => {
                    return Err(bad(
                        "expected `network:host`, `network:container:<name>` or `network:<network name>`",
                    ));
                }
            },
            Some(("volume", v)) => {
                if v.is_empty() || v.contains(['/', '\0']) {
                    return Err(bad("expected a volume name (`volume:NAME`)"));
                }
                self.volumes.insert(v.to_string());
            }
            Some(("publish", a)) => {
                if a != "*" && split_publish_grant(a).is_none() {
                    return Err(bad(
                        "expected `publish:<ip>:<port>`, `publish:<ip>:*` or `publish:*`",
                    ));
                }
                self.publish.insert(a.to_string());
            }
            _ => return Err(bad("unknown permission")),
        }
        Ok(())
    }

    /// Whether `permission` is granted.
    pub fn allows(&self, permission: &Permission) -> bool {
        match permission {
            Permission::Privileged => self.privileged,
            Permission::Root => self.root,
            Permission::HostNetwork => self.host_network,
            Permission::Capability(c) => self.capabilities.contains(c),
            Permission::Mount(p) => self.mounts.iter().any(|g| is_within(p, g)),
            Permission::SecurityOpt(o) => self.security_opts.contains(o),
            Permission::Device(d) => self.devices.contains(d),
            Permission::EngineSocket(_)
            | Permission::IdentityLabel(_)
            | Permission::HostHome(_) => false,
            Permission::Namespace(n) => self.namespaces.contains(n),
            Permission::Egress(d) => self.egress.contains(&egress_key(d)),
            Permission::DeviceCgroupRule(r) => self.device_cgroup_rules.contains(r),
            Permission::Network(n) => self.networks.contains(n),
            Permission::PublishPort(a) => {
                self.publish.contains("*")
                    || self.publish.contains(a)
                    || split_publish_grant(a)
                        .is_some_and(|(ip, _)| self.publish.contains(&format!("{ip}:*")))
            }
            Permission::HostCommand(_) => self.host_command,
            Permission::GitDir(p) => self.git_dirs.iter().any(|g| is_within(p, g)),
            Permission::HostEnv(n) => self.env.contains(n),
            Permission::BuildNetwork => self.build_network,
            Permission::Volume(v) => self.volumes.contains(v),
        }
    }
}

/// The permission a network mode asks for (spec-note 0430): `None` for the engine's default
/// bridge (`bridge`, `default`, empty) and `none`; [`Permission::HostNetwork`] for `host`;
/// [`Permission::Network`] for anything else, as written (`container:<x>`, a named network,
/// any other spelling the engine might accept).
pub fn network_permission(mode: &str) -> Option<Permission> {
    match mode {
        "" | "bridge" | "default" | "none" => None,
        "host" => Some(Permission::HostNetwork),
        other => Some(Permission::Network(other.to_string())),
    }
}

/// Splits a publish address `ip:port` / `[v6]:port` / `…:*` into its address (brackets kept)
/// and port; `None` when it is not of that form.
fn split_publish_grant(text: &str) -> Option<(&str, &str)> {
    let (ip, port) = text.rsplit_once(':')?;
    let ip_ok = match ip.strip_prefix('[').and_then(|i| i.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => ip.parse::<std::net::Ipv4Addr>().is_ok(),
    };
    let port_ok = port == "*" || port.parse::<u16>().is_ok_and(|p| p > 0);
    (ip_ok && port_ok).then_some((ip, port))
}

/// The address a published port binds on the host, as [`Permission::PublishPort`] names it:
/// `0.0.0.0:8080`, `[::]:8080`, `192.168.1.5:*` (engine-chosen port).
pub fn publish_address(ip: &str, host_port: Option<u16>) -> String {
    let port = host_port.map_or_else(|| "*".to_string(), |p| p.to_string());
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// Whether a published port's host address is loopback (`127.0.0.0/8`, `::1`; the engine
/// takes IP addresses only, so a host name is not).
pub fn is_loopback_address(ip: &str) -> bool {
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    ip.parse::<std::net::IpAddr>()
        .is_ok_and(|a| a.is_loopback())
}

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
}

fn or_config(s: Option<&Source>) -> Source {
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

/// The spec to create and every request with its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The container to create.
    pub spec: ContainerSpec,
    /// The user remote commands run as (may be adjusted: see spec-note 0083).
    pub remote_user: Option<String>,
    /// Every permission request, with what was done with it.
    pub requests: Vec<PermissionRequest>,
}

/// Engine sockets at their usual places; a bind of any of them, or of a folder containing
/// one, is an [`Permission::EngineSocket`].
pub const KNOWN_ENGINE_SOCKETS: &[&str] = &[
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman/podman.sock",
    "/var/run/podman/podman.sock",
    "/run/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock",
    "/run/buildkit/buildkitd.sock",
];

/// Socket file names that are engine sockets wherever they are.
pub const ENGINE_SOCKET_NAMES: &[&str] = &[
    "docker.sock",
    "podman.sock",
    "containerd.sock",
    "buildkitd.sock",
    "cri-dockerd.sock",
];

/// tmpfs paths `hardened` always adds (with the remote user's home, [`HOME_TMPFS_SIZE`]).
///
/// Each has an explicit `size`, so temporary storage is bounded per mount (a full tmpfs gives
/// `ENOSPC`) and not only by the memory limit its pages are charged to (the Grove RFC's
/// "bounded temporary storage"; spec-note 0082).
pub const HARDENED_TMPFS: &[(&str, &str)] = &[
    ("/tmp", "rw,nosuid,nodev,exec,size=1g,mode=1777"),
    ("/var/tmp", "rw,nosuid,nodev,exec,size=1g,mode=1777"),
    ("/run", "rw,nosuid,nodev,size=64m,mode=755"),
];

/// `size` of the tmpfs `hardened` puts on the remote user's home.
pub const HOME_TMPFS_SIZE: &str = "2g";

/// The security option `hardened` always sets.
pub const NO_NEW_PRIVILEGES: &str = "no-new-privileges:true";

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
            });
        }
        SecurityProfile::Hardened(limits) => *limits,
    };
    for r in &mut requests {
        r.status = match (&r.permission, &r.source) {
            (Permission::EngineSocket(_) | Permission::IdentityLabel(_), _) => {
                RequestStatus::Forbidden
            }
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

    Ok(Applied {
        spec,
        remote_user,
        requests,
    })
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
                    | Permission::IdentityLabel(_),
                    _,
                ) => RequestStatus::Forbidden,
                (_, _, Source::CommandLine) => RequestStatus::AllowedByProfile,
                (_, p, _) if grants.allows(p) => RequestStatus::Granted,
                _ => RequestStatus::Refused,
            };
            PermissionRequest {
                permission,
                source,
                status,
            }
        })
        .collect()
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

/// Every request the spec makes beyond the hardened baseline, status [`RequestStatus::Refused`]
/// until decided. Deduplicated by (permission, source), in spec order.
fn collect_requests(input: &PolicyInput) -> Vec<PermissionRequest> {
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
        } else if !is_within(&path, &path_string(&input.workspace)) {
            push(Permission::Mount(path), source);
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

impl PolicyInput {
    /// Whether `user` runs as uid 0 in this image ([`passwd::is_root`] against
    /// [`PolicyInput::passwd`]; an empty spelling is the image's default, taken as root).
    pub fn is_root(&self, user: &str) -> bool {
        passwd::is_root(user, self.passwd.as_deref(), true)
    }
}

/// The container and remote users under `hardened` (spec-note 0083): an image that would run
/// as root by default runs as the non-root remote user instead.
fn effective_users(input: &PolicyInput) -> (Option<String>, Option<String>) {
    let remote = input.remote_user.clone();
    let container = match &input.spec.user {
        Some(u) => Some(u.clone()),
        None => {
            let image_root = input.image_user.as_deref().is_none_or(|u| input.is_root(u));
            match &remote {
                Some(r) if image_root && !input.is_root(r) => Some(r.clone()),
                _ => None,
            }
        }
    };
    (container, remote)
}

/// The remote user's home (spec-note 0084): the caller's answer, else `/root` for root,
/// `/home/<name>` for a named user, none for a bare uid.
fn remote_home(input: &PolicyInput, user: Option<&str>) -> Option<String> {
    if let Some(h) = &input.remote_home {
        return Some(h.clone());
    }
    let user = user.map(|u| u.split(':').next().unwrap_or(u))?;
    if input.is_root(user) {
        return Some("/root".to_string());
    }
    if user.is_empty() || user.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(format!("/home/{user}"))
}

/// The profile's limits, or the configuration's when it asks for less (spec-note 0085).
fn clamp_limits(requested: Limits, profile: ProfileLimits) -> Limits {
    let min = |r: Option<i64>, p: i64| Some(r.filter(|r| *r > 0 && *r < p).unwrap_or(p));
    Limits {
        pids: min(requested.pids, profile.pids),
        memory_bytes: min(requested.memory_bytes, profile.memory_bytes),
        nano_cpus: min(requested.nano_cpus, profile.nano_cpus),
    }
}

/// The host address `hardened` publishes ports on when none is given (spec-note 0431).
pub const LOOPBACK: &str = "127.0.0.1";

/// `size` `hardened` gives a requested tmpfs that names none (the profile's `/tmp` size),
/// before the memory limit bounds it (spec-note 0432).
pub const DEFAULT_TMPFS_BYTES: i64 = 1 << 30;

/// Bounds what lives in memory by the container's memory limit (spec-note 0432): `/dev/shm`
/// (`--shm-size`) and every tmpfs (`--tmpfs`, `--mount type=tmpfs`, the profile's own) get a
/// `size` of at most `spec.limits.memory_bytes`; a tmpfs without one gets
/// [`DEFAULT_TMPFS_BYTES`] (or the limit when lower). Larger requests are clamped, like limits
/// (spec-note 0085): raising them is the user's setting, not the repository's.
fn bound_memory_filesystems(spec: &mut ContainerSpec) {
    let Some(max) = spec.limits.memory_bytes.filter(|m| *m > 0) else {
        return;
    };
    if let Some(shm) = spec.shm_size.as_mut() {
        *shm = (*shm).clamp(0, max);
    }
    for opts in spec.tmpfs.values_mut() {
        *opts = bound_tmpfs_options(opts, max);
    }
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Tmpfs)
    {
        let size = m
            .source
            .as_deref()
            .and_then(crate::engine::run_args::tmpfs_mount_size)
            .unwrap_or(DEFAULT_TMPFS_BYTES);
        let mode = m
            .source
            .as_deref()
            .and_then(crate::engine::run_args::tmpfs_mount_mode);
        m.source = Some(crate::engine::run_args::tmpfs_mount_source(
            size.min(max),
            mode,
        ));
    }
}

/// tmpfs mount options (`rw,size=100g,mode=1777`) with `size` (or `nr_blocks`) replaced by one
/// of at most `max` bytes; a size the kernel takes relative to RAM (`50%`) or cannot be read
/// counts as `max`.
pub fn bound_tmpfs_options(opts: &str, max: i64) -> String {
    let mut size: Option<i64> = None;
    let mut out: Vec<String> = Vec::new();
    let mut at = None;
    for opt in opts.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let asked = match opt.split_once('=') {
            Some(("size", v)) => tmpfs_size_bytes(v),
            Some(("nr_blocks", v)) => tmpfs_size_bytes(v).and_then(|b| b.checked_mul(4096)),
            _ => {
                out.push(opt.to_string());
                continue;
            }
        };
        // The last one wins, as for `mount`; it stays where the first one was.
        size = Some(asked.unwrap_or(max));
        at.get_or_insert(out.len());
    }
    let size = format!(
        "size={}",
        human_size(size.unwrap_or(DEFAULT_TMPFS_BYTES).clamp(0, max))
    );
    out.insert(at.unwrap_or(out.len()), size);
    out.join(",")
}

/// A tmpfs `size=` value in bytes: a number with an optional `k`, `m`, `g`, `t`, `p`, `e`
/// suffix (powers of 1024, as `mount -t tmpfs` reads it); `None` for `%` or anything else.
fn tmpfs_size_bytes(text: &str) -> Option<i64> {
    let t = text.trim().to_ascii_lowercase();
    let (num, mult) = match t.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => {
            let exp = "kmgtpe".find(c)? as u32 + 1;
            (&t[..i], 1024_i64.checked_pow(exp)?)
        }
        _ => (t.as_str(), 1),
    };
    num.parse::<i64>()
        .ok()?
        .checked_mul(mult)
        .or(Some(i64::MAX))
}

/// Bytes as the largest exact tmpfs unit: `1g`, `64m`, `12k`, `1000`.
fn human_size(bytes: i64) -> String {
    for (unit, shift) in [("g", 30), ("m", 20), ("k", 10)] {
        if bytes > 0 && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Whether a user spec (`name`, `uid`, `name:group`, `uid:gid`) is uid 0 without a passwd to
/// look names up in: any numeric spelling of 0 (`00`, `+0`, `0:0`), `root`, or empty (the
/// engine's default). [`passwd::is_root`] with the image's passwd is the full judgement.
pub fn is_root_user(user: &str) -> bool {
    passwd::is_root(user, None, true)
}

/// `SYS_PTRACE`, `cap_sys_ptrace` and `CAP_SYS_PTRACE` all normalise to `SYS_PTRACE`.
pub fn normalize_cap(cap: &str) -> String {
    let up = cap.trim().to_ascii_uppercase();
    up.strip_prefix("CAP_").map(str::to_string).unwrap_or(up)
}

/// Whether a security option is `no-new-privileges` in one of its spellings.
pub(crate) fn is_no_new_privileges(opt: &str) -> bool {
    matches!(
        opt.trim(),
        "no-new-privileges" | "no-new-privileges:true" | "no-new-privileges=true"
    )
}

/// Lexically normalises an absolute path (`.`/`..`/duplicate `/` resolved, no trailing `/`);
/// `None` for a relative path.
pub fn normalize_path(path: &str) -> Option<String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    let mut parts: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    Some(format!("/{}", parts.join("/")))
}

fn path_string(p: &Path) -> String {
    normalize_path(&p.to_string_lossy()).unwrap_or_else(|| p.to_string_lossy().into_owned())
}

/// Whether `path` is `base` or inside it (both normalised).
pub fn is_within(path: &str, base: &str) -> bool {
    if base == "/" {
        return true;
    }
    path == base
        || path
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether binding `path` exposes an engine socket: it is one (by name or known place, or the
/// socket devcell itself uses), or a folder containing one of those.
pub fn is_engine_socket(path: &str, engine_socket: Option<&Path>) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    if ENGINE_SOCKET_NAMES.contains(&name) {
        return true;
    }
    let mut known: Vec<String> = KNOWN_ENGINE_SOCKETS.iter().map(|s| s.to_string()).collect();
    if let Some(s) = engine_socket {
        known.push(path_string(s));
    }
    known.iter().any(|s| is_within(s, path))
}

/// The form an egress grant and request are compared in: lowercase, `:443` when no port is
/// written (the egress entry's default), so `--allow egress:api.example.test` grants the
/// request `api.example.test:443`. The syntax itself is `egress::policy`'s, checked there.
fn egress_key(dest: &str) -> String {
    let lower = dest.to_ascii_lowercase();
    let (host, pin) = match lower.split_once('=') {
        Some((h, p)) => (h.to_string(), Some(p.to_string())),
        None => (lower.clone(), None),
    };
    let has_port = match host.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => host.matches(':').count() == 1,
    };
    let host = if has_port || host.matches(':').count() > 1 {
        host
    } else {
        format!("{host}:443")
    };
    match pin {
        Some(p) => format!("{host}={p}"),
        None => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Device, Mount};

    fn base() -> PolicyInput {
        PolicyInput {
            spec: ContainerSpec {
                image: "img".into(),
                mounts: vec![Mount {
                    kind: MountKind::Bind,
                    source: Some("/home/alice/src/repo".into()),
                    target: "/workspaces/repo".into(),
                    read_only: false,
                }],
                ..ContainerSpec::default()
            },
            remote_user: Some("vscode".into()),
            image_user: Some("vscode".into()),
            workspace: "/home/alice/src/repo".into(),
            host_home: Some("/home/alice".into()),
            ..PolicyInput::default()
        }
    }

    fn hardened() -> SecurityProfile {
        SecurityProfile::default()
    }

    fn refused(input: &PolicyInput, grants: &Grants) -> Vec<PermissionRequest> {
        match apply(&hardened(), input, grants) {
            Err(SecurityError::Refused { requests, .. }) => requests,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn bind(src: &str, target: &str) -> Mount {
        Mount {
            kind: MountKind::Bind,
            source: Some(src.into()),
            target: target.into(),
            read_only: false,
        }
    }

    #[test]
    fn baseline_is_applied_to_a_plain_config() {
        let a = apply(&hardened(), &base(), &Grants::default()).unwrap();
        assert!(a.requests.is_empty());
        let s = &a.spec;
        assert!(!s.privileged);
        assert_eq!(s.cap_drop, ["ALL"]);
        assert!(s.cap_add.is_empty());
        assert_eq!(s.security_opt, [NO_NEW_PRIVILEGES]);
        assert!(s.read_only_rootfs);
        for p in ["/tmp", "/var/tmp", "/run", "/home/vscode"] {
            assert!(s.tmpfs.contains_key(p), "missing tmpfs {p}: {:?}", s.tmpfs);
        }
        assert_eq!(s.limits.pids, Some(1024));
        assert_eq!(s.limits.memory_bytes, Some(4 << 30));
        assert_eq!(s.limits.nano_cpus, Some(2_000_000_000));
        assert_eq!(s.mounts, base().spec.mounts, "the workspace mount is kept");
    }

    #[test]
    fn privileged_from_config_is_refused_then_granted() {
        let mut input = base();
        input.spec.privileged = true;
        let r = refused(&input, &Grants::default());
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].permission, Permission::Privileged);
        assert_eq!(r[0].source, Source::DevcontainerJson);
        assert_eq!(r[0].permission.grant_flag().unwrap(), "--allow privileged");
        let a = apply(
            &hardened(),
            &input,
            &Grants::parse(&["privileged"]).unwrap(),
        )
        .unwrap();
        assert!(a.spec.privileged);
        assert_eq!(a.requests[0].status, RequestStatus::Granted);
    }

    #[test]
    fn capability_from_a_feature_names_the_feature_and_flag() {
        let mut input = base();
        input.spec.cap_add = vec!["CAP_SYS_PTRACE".into()];
        input.origins.capabilities.insert(
            "SYS_PTRACE".into(),
            Source::Feature("ghcr.io/x/debugger:1".into()),
        );
        let r = refused(&input, &Grants::default());
        assert_eq!(r[0].permission, Permission::Capability("SYS_PTRACE".into()));
        assert_eq!(r[0].source, Source::Feature("ghcr.io/x/debugger:1".into()));
        assert!(
            r[0].to_string().contains("--allow cap:SYS_PTRACE"),
            "{}",
            r[0]
        );
        let a = apply(
            &hardened(),
            &input,
            &Grants::parse(&["cap:sys_ptrace"]).unwrap(),
        )
        .unwrap();
        assert_eq!(a.spec.cap_add, ["SYS_PTRACE"]);
        assert_eq!(a.spec.cap_drop, ["ALL"]);
    }

    #[test]
    fn engine_socket_from_image_label_is_forbidden_even_when_granted() {
        let mut input = base();
        input
            .spec
            .mounts
            .push(bind("/var/run/docker.sock", "/var/run/docker-host.sock"));
        input
            .origins
            .mounts
            .insert("/var/run/docker-host.sock".into(), Source::ImageMetadata);
        let grants = Grants::parse(&["mount:/var/run/docker.sock", "mount:/var/run"]).unwrap();
        let r = refused(&input, &grants);
        assert_eq!(
            r[0].permission,
            Permission::EngineSocket("/var/run/docker.sock".into())
        );
        assert_eq!(r[0].status, RequestStatus::Forbidden);
        assert_eq!(r[0].source, Source::ImageMetadata);
        // Reference runs it as written.
        let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
        assert_eq!(a.spec, input.spec);
        assert_eq!(a.requests[0].status, RequestStatus::AllowedByProfile);
    }

    #[test]
    fn engine_sockets_anywhere_and_their_folders() {
        for p in [
            "/srv/x/docker.sock",
            "/run/user/1000/podman/podman.sock",
            "/run/containerd/containerd.sock",
            "/var/run",
            "/run",
            "/",
            "/run/podman",
        ] {
            assert!(is_engine_socket(p, None), "{p}");
        }
        assert!(is_engine_socket(
            "/run/user/1000/podman",
            Some(Path::new("/run/user/1000/podman/podman.sock"))
        ));
        assert!(!is_engine_socket("/home/alice/src/repo", None));
        assert!(!is_engine_socket("/var/run/dbus", None));
    }

    #[test]
    fn mounts_outside_the_workspace_and_host_home_are_requests() {
        let mut input = base();
        input
            .spec
            .mounts
            .push(bind("/home/alice/.ssh", "/home/vscode/.ssh"));
        input.spec.mounts.push(bind("/home/alice", "/host-home"));
        input
            .spec
            .mounts
            .push(bind("/home/alice/src/repo/../other", "/other"));
        input
            .spec
            .mounts
            .push(bind("/home/alice/src/repo/.cache", "/cache"));
        input.spec.mounts.push(Mount {
            kind: MountKind::Volume,
            source: Some("named".into()),
            target: "/vol".into(),
            read_only: false,
        });
        let r = refused(&input, &Grants::default());
        let perms: Vec<_> = r.iter().map(|r| r.permission.clone()).collect();
        assert_eq!(
            perms,
            [
                Permission::Mount("/home/alice/.ssh".into()),
                Permission::Mount("/home/alice".into()),
                Permission::Mount("/home/alice/src/other".into()),
            ]
        );
        assert_eq!(
            r[0].permission.grant_flag().unwrap(),
            "--allow mount:/home/alice/.ssh"
        );
        // A grant of a folder covers what is under it.
        let g = Grants::parse(&["mount:/home/alice"]).unwrap();
        assert!(apply(&hardened(), &input, &g).is_ok());
    }

    #[test]
    fn root_requests_from_config_and_image() {
        // Explicit containerUser root.
        let mut input = base();
        input.spec.user = Some("root".into());
        input.origins.container_user = Some(Source::DevcontainerJson);
        assert_eq!(
            refused(&input, &Grants::default())[0].permission,
            Permission::Root
        );
        // Explicit remoteUser 0 from a Feature.
        let mut input = base();
        input.remote_user = Some("0".into());
        input.origins.remote_user = Some(Source::Feature("f".into()));
        let r = refused(&input, &Grants::default());
        assert!(r.iter().any(|r| r.source == Source::Feature("f".into())));
        // Image runs as root and nobody else to run as.
        let mut input = base();
        input.image_user = None;
        input.remote_user = None;
        let r = refused(&input, &Grants::default());
        assert_eq!(
            (r[0].permission.clone(), r[0].source.clone()),
            (Permission::Root, Source::ImageUser)
        );
        let a = apply(&hardened(), &input, &Grants::parse(&["root"]).unwrap()).unwrap();
        assert!(a.spec.tmpfs.contains_key("/root"));
    }

    #[test]
    fn root_is_judged_by_the_uid_the_image_gives_not_the_spelling() {
        let passwd = "root:x:0:0::/root:/bin/sh\nadmin:x:0:0::/home/admin:/bin/sh\n\
                      vscode:x:1000:1000::/home/vscode:/bin/sh\n";
        // Every spelling of uid 0, as containerUser (or `-u`) and as remoteUser.
        for spelling in ["00", "+0", "-0", "0:0", "0000:1000", "root:staff", "admin"] {
            let mut input = base();
            input.passwd = Some(passwd.into());
            input.spec.user = Some(spelling.into());
            let r = refused(&input, &Grants::default());
            assert_eq!(
                r[0].permission,
                Permission::Root,
                "containerUser {spelling}"
            );
            let mut input = base();
            input.passwd = Some(passwd.into());
            input.remote_user = Some(spelling.into());
            input.origins.remote_user = Some(Source::Feature("f".into()));
            let r = refused(&input, &Grants::default());
            assert!(
                r.iter()
                    .any(|r| r.permission == Permission::Root
                        && r.source == Source::Feature("f".into())),
                "remoteUser {spelling}: {r:?}"
            );
            let a = apply(&hardened(), &input, &Grants::parse(&["root"]).unwrap()).unwrap();
            assert_eq!(a.requests[0].status, RequestStatus::Granted, "{spelling}");
        }
        // An image whose `USER` is a uid-0 name, and no remote user: root from the image.
        let mut input = base();
        input.passwd = Some(passwd.into());
        input.remote_user = None;
        input.image_user = Some("admin".into());
        let r = refused(&input, &Grants::default());
        assert_eq!(r[0].source, Source::ImageUser);
        // With a non-root remote user the root image runs as that user instead.
        input.remote_user = Some("vscode".into());
        let a = apply(&hardened(), &input, &Grants::default()).unwrap();
        assert_eq!(a.spec.user.as_deref(), Some("vscode"));
        // Not root: a plain user, a gid of 0, an out-of-range uid the engine refuses.
        for spelling in ["vscode", "1000:0", "4294967296"] {
            let mut input = base();
            input.passwd = Some(passwd.into());
            input.spec.user = Some(spelling.into());
            assert!(
                apply(&hardened(), &input, &Grants::default()).is_ok(),
                "{spelling}"
            );
        }
    }

    #[test]
    fn identity_labels_from_the_repository_are_never_allowed() {
        let mut input = base();
        input.repository_labels = vec![
            "devcontainer.local_folder".into(),
            "DevCell.session".into(),
            "team".into(),
        ];
        let r = refused(&input, &Grants::default());
        let kinds: Vec<_> = r.iter().map(|r| (r.permission.clone(), r.status)).collect();
        assert_eq!(
            kinds,
            [
                (
                    Permission::IdentityLabel("devcontainer.local_folder".into()),
                    RequestStatus::Forbidden
                ),
                (
                    Permission::IdentityLabel("DevCell.session".into()),
                    RequestStatus::Forbidden
                )
            ]
        );
        assert!(r[0].permission.grant_flag().is_none());
        assert!(r[0].to_string().contains("never allowed"), "{}", r[0]);
        assert!(Grants::parse(&["label:devcontainer.local_folder"]).is_err());
        // `reference` applies the configuration as written.
        let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
        assert_eq!(a.requests[0].status, RequestStatus::AllowedByProfile);
        // A plain label is no request at all.
        input.repository_labels = vec!["team".into()];
        assert!(apply(&hardened(), &input, &Grants::default()).is_ok());
    }

    #[test]
    fn root_image_runs_as_the_non_root_remote_user() {
        let mut input = base();
        input.image_user = None;
        input.remote_ids = Some((1000, 1000));
        let a = apply(&hardened(), &input, &Grants::default()).unwrap();
        assert_eq!(a.spec.user.as_deref(), Some("vscode"));
        assert!(a.spec.tmpfs["/home/vscode"].contains("uid=1000,gid=1000"));
    }

    #[test]
    fn security_opts_and_no_new_privileges() {
        let mut input = base();
        input.spec.security_opt = vec!["no-new-privileges".into(), "seccomp=unconfined".into()];
        let r = refused(&input, &Grants::default());
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].permission,
            Permission::SecurityOpt("seccomp=unconfined".into())
        );
        let a = apply(
            &hardened(),
            &input,
            &Grants::parse(&["security-opt:seccomp=unconfined"]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            a.spec.security_opt,
            ["seccomp=unconfined", NO_NEW_PRIVILEGES]
        );
    }

    #[test]
    fn devices_and_host_network_are_requests() {
        let mut input = base();
        input.spec.devices.push(Device {
            host_path: "/dev/fuse".into(),
            container_path: "/dev/fuse".into(),
            permissions: "rwm".into(),
        });
        input.spec.network_mode = Some("host".into());
        let r = refused(&input, &Grants::default());
        assert_eq!(r[0].permission, Permission::Device("/dev/fuse".into()));
        assert_eq!(r[1].permission, Permission::HostNetwork);
        let g = Grants::parse(&["device:/dev/fuse", "network:host"]).unwrap();
        assert!(apply(&hardened(), &input, &g).is_ok());
    }

    #[test]
    fn other_network_namespaces_and_named_networks_are_requests() {
        for (mode, want) in [
            (
                "container:victim",
                Some(Permission::Network("container:victim".into())),
            ),
            (
                "container:4f1c2b",
                Some(Permission::Network("container:4f1c2b".into())),
            ),
            ("corp-net", Some(Permission::Network("corp-net".into()))),
            ("Host", Some(Permission::Network("Host".into()))),
            ("host", Some(Permission::HostNetwork)),
            ("bridge", None),
            ("default", None),
            ("none", None),
        ] {
            let mut input = base();
            input.spec.network_mode = Some(mode.into());
            match &want {
                None => assert!(
                    apply(&hardened(), &input, &Grants::default()).is_ok(),
                    "{mode}"
                ),
                Some(p) => {
                    let r = refused(&input, &Grants::default());
                    assert_eq!(&r[0].permission, p, "{mode}");
                    let flag = p.grant_flag().unwrap();
                    assert_eq!(flag, format!("--allow network:{mode}"));
                    let g = Grants::parse(&[flag.trim_start_matches("--allow ")]).unwrap();
                    let a = apply(&hardened(), &input, &g).unwrap();
                    assert_eq!(a.spec.network_mode.as_deref(), Some(mode));
                    assert_eq!(a.requests[0].status, RequestStatus::Granted);
                    // A grant of another network does not cover it.
                    let other = Grants::parse(&["network:container:other"]).unwrap();
                    assert!(apply(&hardened(), &input, &other).is_err(), "{mode}");
                }
            }
        }
        for bad in [
            "network:",
            "network:none",
            "network:bridge",
            "network:default",
        ] {
            assert!(Grants::parse(&[bad]).is_err(), "{bad}");
        }
        let v = serde_json::to_value(PermissionRequest {
            permission: Permission::Network("container:victim".into()),
            source: Source::DevcontainerJson,
            status: RequestStatus::Refused,
        })
        .unwrap();
        assert_eq!(v["permission"], "network");
        assert_eq!(v["value"], "container:victim");
        assert_eq!(v["grant"], "--allow network:container:victim");
    }

    fn port(ip: Option<&str>, host: Option<u16>, container: u16) -> crate::engine::PortBinding {
        crate::engine::PortBinding {
            container_port: container,
            protocol: "tcp".into(),
            host_ip: ip.map(str::to_string),
            host_port: host,
        }
    }

    #[test]
    fn ports_publish_on_loopback_and_other_addresses_are_requests() {
        let mut input = base();
        input.spec.ports = vec![
            port(None, Some(8080), 80),
            port(Some(""), None, 81),
            port(Some("127.0.0.1"), Some(5432), 5432),
            port(Some("127.0.0.2"), Some(5433), 5433),
            port(Some("::1"), Some(5434), 5434),
        ];
        let a = apply(&hardened(), &input, &Grants::default()).unwrap();
        assert!(a.requests.is_empty(), "{:?}", a.requests);
        let ips: Vec<_> = a
            .spec
            .ports
            .iter()
            .map(|p| p.host_ip.clone().unwrap())
            .collect();
        assert_eq!(
            ips,
            ["127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "::1"]
        );
        // The reference profile publishes as written.
        let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
        assert_eq!(a.spec.ports[0].host_ip, None);

        let mut input = base();
        input.spec.ports = vec![
            port(Some("0.0.0.0"), Some(8080), 80),
            port(Some("::"), Some(8081), 80),
            port(Some("192.168.1.5"), None, 80),
        ];
        let r = refused(&input, &Grants::default());
        let perms: Vec<_> = r.iter().map(|r| r.permission.clone()).collect();
        assert_eq!(
            perms,
            [
                Permission::PublishPort("0.0.0.0:8080".into()),
                Permission::PublishPort("[::]:8081".into()),
                Permission::PublishPort("192.168.1.5:*".into()),
            ]
        );
        assert_eq!(
            r[1].permission.grant_flag().unwrap(),
            "--allow publish:[::]:8081"
        );
        let exact = Grants::parse(&[
            "publish:0.0.0.0:8080",
            "publish:[::]:8081",
            "publish:192.168.1.5:*",
        ])
        .unwrap();
        let a = apply(&hardened(), &input, &exact).unwrap();
        assert_eq!(a.spec.ports, input.spec.ports, "granted addresses are kept");
        assert!(
            a.requests
                .iter()
                .all(|r| r.status == RequestStatus::Granted)
        );
        assert!(apply(&hardened(), &input, &Grants::parse(&["publish:*"]).unwrap()).is_ok());
        let partial = Grants::parse(&["publish:0.0.0.0:*"]).unwrap();
        assert_eq!(
            refused(&input, &partial)
                .iter()
                .filter(|r| r.status == RequestStatus::Refused)
                .count(),
            2
        );
        for bad in [
            "publish:",
            "publish:0.0.0.0",
            "publish:host:80",
            "publish:1.2.3.4:0",
            "publish:::80",
        ] {
            assert!(Grants::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn shm_and_tmpfs_are_bounded_by_the_memory_limit() {
        let mut input = base();
        input.spec.shm_size = Some(100 << 30);
        input
            .spec
            .tmpfs
            .insert("/big".into(), "rw,size=100g,mode=1777".into());
        input.spec.tmpfs.insert("/pct".into(), "size=90%".into());
        input
            .spec
            .tmpfs
            .insert("/blocks".into(), "nr_blocks=1000".into());
        input.spec.tmpfs.insert("/unsized".into(), "".into());
        input
            .spec
            .tmpfs
            .insert("/small".into(), "size=64m,noexec".into());
        input.spec.mounts.push(Mount {
            kind: MountKind::Tmpfs,
            source: Some(crate::engine::run_args::tmpfs_mount_source(
                100 << 30,
                Some(0o700),
            )),
            target: "/m-big".into(),
            read_only: false,
        });
        input.spec.mounts.push(Mount {
            kind: MountKind::Tmpfs,
            source: None,
            target: "/m-unsized".into(),
            read_only: false,
        });
        let a = apply(&hardened(), &input, &Grants::default()).unwrap();
        assert!(a.requests.is_empty());
        assert_eq!(a.spec.shm_size, Some(4 << 30));
        let t = &a.spec.tmpfs;
        assert_eq!(t["/big"], "rw,size=4g,mode=1777");
        assert_eq!(t["/pct"], "size=4g");
        assert_eq!(t["/blocks"], "size=4000k");
        assert_eq!(t["/unsized"], "size=1g");
        assert_eq!(t["/small"], "size=64m,noexec");
        assert_eq!(
            t["/tmp"], HARDENED_TMPFS[0].1,
            "the profile's own stay as they are"
        );
        let src = |target: &str| {
            a.spec
                .mounts
                .iter()
                .find(|m| m.target == target)
                .unwrap()
                .source
                .clone()
                .unwrap()
        };
        assert_eq!(src("/m-big"), format!("size={},mode=700", 4_i64 << 30));
        assert_eq!(src("/m-unsized"), format!("size={}", 1_i64 << 30));
        // A lower memory limit lowers every tmpfs, the profile's own included.
        let small = SecurityProfile::Hardened(ProfileLimits {
            memory_bytes: 512 << 20,
            ..ProfileLimits::default()
        });
        let a = apply(&small, &input, &Grants::default()).unwrap();
        assert_eq!(a.spec.shm_size, Some(512 << 20));
        assert_eq!(
            a.spec.tmpfs["/tmp"],
            "rw,nosuid,nodev,exec,size=512m,mode=1777"
        );
        assert!(a.spec.tmpfs["/home/vscode"].contains("size=512m"));
        // The reference profile keeps what was asked.
        let a = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
        assert_eq!(a.spec.shm_size, Some(100 << 30));
        assert_eq!(a.spec.tmpfs["/unsized"], "");
    }

    #[test]
    fn refusal_lists_every_request() {
        let mut input = base();
        input.spec.privileged = true;
        input.spec.cap_add = vec!["NET_ADMIN".into(), "SYS_ADMIN".into()];
        input
            .spec
            .mounts
            .push(bind("/run/docker.sock", "/run/docker.sock"));
        let err = apply(
            &hardened(),
            &input,
            &Grants::parse(&["cap:NET_ADMIN"]).unwrap(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("3 permission request(s) not granted"),
            "{text}"
        );
        for needle in ["privileged mode", "`SYS_ADMIN`", "/run/docker.sock"] {
            assert!(text.contains(needle), "{needle} missing in {text}");
        }
        assert!(
            !text.contains("`NET_ADMIN`"),
            "granted request listed as refused: {text}"
        );
        let hint = crate::diagnostics::Hint::hint(&err).unwrap();
        assert!(
            hint.contains("--allow privileged --allow cap:SYS_ADMIN"),
            "{hint}"
        );
        assert!(hint.contains("reference"), "{hint}");
    }

    #[test]
    fn command_line_mounts_need_no_grant_but_sockets_stay_forbidden() {
        let mut input = base();
        input.spec.mounts.push(bind("/data", "/data"));
        input
            .origins
            .mounts
            .insert("/data".into(), Source::CommandLine);
        assert!(apply(&hardened(), &input, &Grants::default()).is_ok());
        input.spec.mounts.push(bind("/var/run/docker.sock", "/s"));
        input
            .origins
            .mounts
            .insert("/s".into(), Source::CommandLine);
        assert!(apply(&hardened(), &input, &Grants::default()).is_err());
    }

    #[test]
    fn limits_take_the_lower_value() {
        let mut input = base();
        input.spec.limits = Limits {
            pids: Some(100),
            memory_bytes: Some(64 << 30),
            nano_cpus: None,
        };
        let a = apply(&hardened(), &input, &Grants::default()).unwrap();
        assert_eq!(a.spec.limits.pids, Some(100));
        assert_eq!(a.spec.limits.memory_bytes, Some(4 << 30));
        let custom = SecurityProfile::Hardened(ProfileLimits {
            pids: 50,
            memory_bytes: 1 << 30,
            nano_cpus: 500_000_000,
        });
        let a = apply(&custom, &input, &Grants::default()).unwrap();
        assert_eq!(
            a.spec.limits,
            Limits {
                pids: Some(50),
                memory_bytes: Some(1 << 30),
                nano_cpus: Some(500_000_000)
            }
        );
    }

    #[test]
    fn existing_mounts_on_tmpfs_paths_are_kept() {
        let mut input = base();
        input.spec.mounts.push(Mount {
            kind: MountKind::Volume,
            source: Some("home".into()),
            target: "/home/vscode".into(),
            read_only: false,
        });
        input.spec.tmpfs.insert("/tmp".into(), "size=1m".into());
        let a = apply(&hardened(), &input, &Grants::default()).unwrap();
        assert!(!a.spec.tmpfs.contains_key("/home/vscode"));
        assert_eq!(a.spec.tmpfs["/tmp"], "size=1m");
    }

    #[test]
    fn grants_parse_and_reject_unknown() {
        let g = Grants::parse(&[
            "privileged",
            "root",
            "cap:CAP_net_raw",
            "mount:/a/b/../c/",
            "network:host",
        ])
        .unwrap();
        assert!(g.privileged && g.root && g.host_network);
        assert!(g.capabilities.contains("NET_RAW"));
        assert!(g.mounts.contains("/a/c"));
        for bad in ["everything", "mount:relative", "cap:", "network:bridge"] {
            let err = Grants::parse(&[bad]).unwrap_err();
            assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        }
    }

    #[test]
    fn requests_serialize_for_the_up_result() {
        let r = PermissionRequest {
            permission: Permission::Capability("SYS_PTRACE".into()),
            source: Source::Feature("ghcr.io/x/y:1".into()),
            status: RequestStatus::Refused,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"permission":"capability","value":"SYS_PTRACE","source":"Feature `ghcr.io/x/y:1`","status":"refused","grant":"--allow cap:SYS_PTRACE"}"#
        );
        let r = PermissionRequest {
            permission: Permission::EngineSocket("/run/docker.sock".into()),
            source: Source::ImageMetadata,
            status: RequestStatus::Forbidden,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["status"], "forbidden");
        assert!(v.get("grant").is_none());
    }

    #[test]
    fn host_commands_and_git_dirs_are_requests_only_the_user_grants() {
        let asked = || {
            vec![
                (
                    Permission::HostCommand("/bin/sh -c 'touch /tmp/m'".into()),
                    Source::DevcontainerJson,
                ),
                (
                    Permission::GitDir("/srv/other/.git".into()),
                    Source::GitLink("/w/api/.git".into()),
                ),
            ]
        };
        let r = judge(&hardened(), asked(), &Grants::default());
        assert!(r.iter().all(|r| r.status == RequestStatus::Refused));
        let err = refusal(&hardened(), &r).unwrap();
        let hint = crate::diagnostics::Hint::hint(&err).unwrap();
        assert!(hint.contains("--allow host-command"), "{hint}");
        assert!(hint.contains("--allow gitdir:/srv/other/.git"), "{hint}");
        assert!(
            err.to_string().contains("`/bin/sh -c 'touch /tmp/m'`"),
            "{err}"
        );
        let g = Grants::parse(&["host-command", "gitdir:/srv/other"]).unwrap();
        let r = judge(&hardened(), asked(), &g);
        assert!(
            r.iter().all(|r| r.status == RequestStatus::Granted),
            "{r:?}"
        );
        assert!(refusal(&hardened(), &r).is_none());
        let r = judge(&SecurityProfile::Reference, asked(), &Grants::default());
        assert!(
            r.iter()
                .all(|r| r.status == RequestStatus::AllowedByProfile)
        );
        let v = serde_json::to_value(&r[0]).unwrap();
        assert_eq!(v["permission"], "hostCommand");
        assert_eq!(v["value"], "/bin/sh -c 'touch /tmp/m'");
        assert_eq!(v["grant"], "--allow host-command");
        assert!(Grants::parse(&["gitdir:relative"]).is_err());
        assert!(Grants::parse(&["host-command:x"]).is_err());
    }

    #[test]
    fn everything_judged_before_anything_runs_is_one_refusal() {
        let earlier = judge(
            &hardened(),
            [
                (
                    Permission::HostCommand("touch /tmp/m".into()),
                    Source::DevcontainerJson,
                ),
                (
                    Permission::HostEnv("TOKEN".into()),
                    Source::DevcontainerJson,
                ),
            ],
            &Grants::default(),
        );
        // the container's configuration asks for privileged mode and a root image `USER`
        let mut input = base();
        input.spec.privileged = true;
        input.image_user = Some("root".into());
        let later = configuration_requests(&hardened(), &input, &Grants::default()).unwrap();
        assert!(
            later.iter().all(|r| r.source != Source::ImageUser),
            "{later:?}"
        );
        assert!(later.iter().any(|r| r.permission == Permission::Privileged));
        let Some(SecurityError::Refused { requests, .. }) =
            refusal_of_all(&hardened(), &earlier, None, &later)
        else {
            panic!("one refusal");
        };
        assert_eq!(requests.len(), 3, "{requests:?}");
        let err = refusal_of_all(&hardened(), &earlier, None, &later).unwrap();
        let hint = crate::diagnostics::Hint::hint(&err).unwrap();
        for flag in ["host-command", "env:TOKEN", "privileged"] {
            assert!(hint.contains(&format!("--allow {flag}")), "{hint}");
        }
        // granted all at once by one list
        let g = Grants::parse(&["host-command", "env:TOKEN", "privileged"]).unwrap();
        let earlier = judge(
            &hardened(),
            [(
                Permission::HostCommand("touch /tmp/m".into()),
                Source::DevcontainerJson,
            )],
            &g,
        );
        let later = configuration_requests(&hardened(), &input, &g).unwrap();
        assert!(refusal_of_all(&hardened(), &earlier, None, &later).is_none());
        // a reuse refusal keeps its form, the earlier requests first
        let reuse = SecurityError::ReuseRefused {
            container: "abc".into(),
            profile: "hardened".into(),
            requests: later.clone(),
            gaps: Vec::new(),
        };
        let Some(SecurityError::ReuseRefused { requests, .. }) =
            refusal_of_all(&hardened(), &earlier, Some(reuse), &[])
        else {
            panic!("the reuse refusal");
        };
        assert_eq!(requests[0], earlier[0]);
    }

    #[test]
    fn user_and_path_helpers() {
        assert!(is_root_user("root") && is_root_user("0:0") && is_root_user("root:staff"));
        assert!(!is_root_user("vscode") && !is_root_user("1000:0"));
        assert_eq!(normalize_path("/a//b/./c/../d/").as_deref(), Some("/a/b/d"));
        assert_eq!(normalize_path("rel"), None);
        assert!(is_within("/a/b", "/a") && is_within("/a", "/a") && !is_within("/ab", "/a"));
    }
}
