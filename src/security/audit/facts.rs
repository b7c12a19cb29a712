//! The neutral description of a container the audit scores, [`ContainerFacts`], and how it is
//! read from the engine's typed description of the container ([`ContainerInfo`]), of its image
//! and of its recorded base ([`ImageInfo`]), or from a saved `docker inspect` document through
//! the engine's own reader. Environment variable values are dropped here.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::heuristics::{is_credential_name, is_digest_pinned, looks_like_token};
use crate::engine::{ContainerInfo, HostSecurity, ImageInfo, MountInfo};
use crate::formats::json;
use crate::names;
use crate::security::known::{CAPABILITY_BITS, DOCKER_DEFAULT_CAPS, normalize_cap};

/// Prefix of the named volumes devcell creates and `devcell delete` removes; a named volume
/// without it outlives the container (spec-note 0146).
pub const OWNED_VOLUME_PREFIX: &str = "devcell-";

/// Container label naming the base image devcell layered the container's image on (Features,
/// the `updateRemoteUserUID` layer), as the configuration wrote it: `<repository>@sha256:<digest>`.
/// devcell writes it only when that reference is pinned by digest; the audit credits it only
/// when the base's layers are verifiably the first layers of the container's image
/// (spec-notes 0146, 0241).
pub const BASE_IMAGE_LABEL: &str = names::BASE_IMAGE_LABEL;

/// Container label devcell writes when it installs OCI or tarball Features: a JSON object
/// `{"<Feature reference as written, lowercased>": "sha256:…"}` (the lockfile's keys and
/// `integrity` values) of the Features in the container's image. The audit compares it with
/// the lockfile (spec-note 0281).
pub const FEATURE_DIGESTS_LABEL: &str = "devcell.feature_digests";

/// The [`FEATURE_DIGESTS_LABEL`] of a container's labels as a map (lock key → digest); `None`
/// when the label is absent or not a JSON object of strings.
pub fn feature_digests(labels: &BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    serde_json::from_str(labels.get(FEATURE_DIGESTS_LABEL)?).ok()
}

/// An error reading audit input.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The `docker inspect` JSON is not one container object.
    #[error("`docker inspect` output is not one container: expected {expected}, found {found}")]
    NotAContainer {
        /// What was expected.
        expected: &'static str,
        /// What was found (a JSON type or an array length; never content).
        found: String,
    },
    /// The probe output lacks its header line, so it is not output of the probe script.
    #[error(
        "probe output has no `devcell_probe=1` header line\n\nhint: run `security::probe::PROBE_SCRIPT` with `sh -c` inside the container"
    )]
    NotProbeOutput,
    /// A probe output line is not `key=value`.
    #[error("probe output line {line} is not `key=value`")]
    ProbeLine {
        /// 1-based line number.
        line: usize,
    },
}

/// Where a [`ContainerFacts`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FactsSource {
    /// The engine's description (`docker inspect`).
    Inspect,
    /// The probe script run inside the container, alone.
    Probe,
    /// The probe, with what it cannot observe (image, labels, ports) taken from `docker inspect`.
    ProbeWithInspect,
}

/// The kind of a mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MountKind {
    /// A host path bound into the container.
    Bind,
    /// An engine volume (named or anonymous).
    Volume,
    /// A memory file system.
    Tmpfs,
    /// Anything else (`npipe`, `cluster`, an unknown file system seen by the probe).
    Other,
}

/// One mount of the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountFact {
    /// Bind, volume, tmpfs or other.
    pub kind: MountKind,
    /// Host path of a bind mount. From the probe this is the path inside the host file system
    /// holding it (`/proc/self/mountinfo` root field), which equals the host path when that file
    /// system is the host's root.
    pub source: Option<String>,
    /// Volume name (volumes only).
    pub volume_name: Option<String>,
    /// Path inside the container.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// One environment variable of the container: its name only. The value is dropped when facts
/// are read; only whether it looks like a token is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvFact {
    /// Variable name.
    pub name: String,
    /// The name looks like a credential (`TOKEN`, `SECRET`, `PASSWORD`, `API_KEY`, `AUTH`, …).
    pub credential_name: bool,
    /// The value looks like a long-lived token (`ghp_…`, `sk-…`, `AKIA…`, a private key, …).
    pub token_value: bool,
}

impl EnvFact {
    /// Builds the fact for `name=value`, dropping `value`.
    pub fn new(name: &str, value: Option<&str>) -> Self {
        Self {
            name: name.to_string(),
            credential_name: is_credential_name(name),
            token_value: value.is_some_and(looks_like_token),
        }
    }
}

/// A host device made available in the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceFact {
    /// Path on the host (inspect only).
    pub host_path: Option<String>,
    /// Path inside the container.
    pub container_path: String,
}

/// A published port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortFact {
    /// Container port and protocol, e.g. `8080/tcp`.
    pub container_port: String,
    /// Host address; empty means all interfaces.
    pub host_ip: String,
    /// Host port (may be empty: chosen by the engine).
    pub host_port: String,
}

/// Seccomp state of the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Seccomp {
    /// A filter is applied (the engine's default or a custom profile).
    Filtered,
    /// No filter (`seccomp=unconfined`, or privileged).
    Unconfined,
}

/// A neutral description of one container: what the audit scores. Every field is optional where
/// a source cannot know it (`None` = unknown). Values of environment variables are never stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerFacts {
    /// Where these facts came from (`None` only for hand-built facts).
    pub source: Option<FactsSource>,
    /// Container name without the leading `/`.
    pub name: Option<String>,
    /// Container id.
    pub id: Option<String>,
    /// Image reference the container was created from (`Config.Image`).
    pub image: Option<String>,
    /// Image id (`sha256:…`).
    pub image_id: Option<String>,
    /// The image's registry digests (`RepoDigests` of `docker image inspect`).
    pub image_repo_digests: Vec<String>,
    /// The image's layers (`RootFS.Layers` of `docker image inspect`, diff ids), bottom first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_layers: Vec<String>,
    /// The layers of the image the [`BASE_IMAGE_LABEL`] names, when it is present on this
    /// engine (`None`: not looked up or absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image_layers: Option<Vec<String>>,
    /// Container labels (`None` = not observable).
    pub labels: Option<BTreeMap<String, String>>,
    /// Environment variable names.
    pub env: Vec<EnvFact>,
    /// Mounts (engine-managed `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf` excluded).
    pub mounts: Vec<MountFact>,
    /// Privileged mode.
    pub privileged: Option<bool>,
    /// Capabilities added (`--cap-add`), upper case without `CAP_`.
    pub cap_add: Vec<String>,
    /// Capabilities dropped (`--cap-drop`), upper case without `CAP_`.
    pub cap_drop: Vec<String>,
    /// The capability bounding set the processes get (upper case without `CAP_`): computed from
    /// the engine's default set, `cap_drop` and `cap_add`, or read from `/proc/self/status`.
    pub capabilities: Option<BTreeSet<String>>,
    /// `no-new-privileges` is set.
    pub no_new_privileges: Option<bool>,
    /// Seccomp state.
    pub seccomp: Option<Seccomp>,
    /// AppArmor is explicitly disabled (`apparmor=unconfined`).
    pub apparmor_unconfined: Option<bool>,
    /// SELinux labelling is disabled (`label=disable`).
    pub selinux_disabled: Option<bool>,
    /// `/proc` and `/sys` masks removed (`systempaths=unconfined`).
    pub systempaths_unconfined: Option<bool>,
    /// PID namespace mode (`host`, `private`, `container:<id>`).
    pub pid_mode: Option<String>,
    /// IPC namespace mode (`host`, `private`, `shareable`, `none`, `container:<id>`).
    pub ipc_mode: Option<String>,
    /// UTS namespace mode (`host` or `private`).
    pub uts_mode: Option<String>,
    /// Network mode (`none`, `host`, `bridge`, `default`, `container:<id>`, a network name).
    pub network_mode: Option<String>,
    /// Names of the networks the container is attached to.
    pub networks: Vec<String>,
    /// Devices made available.
    pub devices: Vec<DeviceFact>,
    /// Device requests (e.g. `--gpus`) are present.
    pub device_requests: bool,
    /// Whether a device request asks for the host's GPUs (`None`: not observable, as from
    /// inside the container).
    pub gpu_requested: Option<bool>,
    /// The root file system is mounted read-only.
    pub read_only_rootfs: Option<bool>,
    /// Process count limit (`None` = unlimited or unknown; see `limits_known`).
    pub pids_limit: Option<i64>,
    /// Memory limit in bytes.
    pub memory_limit: Option<i64>,
    /// CPU limit in CPUs (fractional).
    pub cpu_limit: Option<f64>,
    /// A cpuset restricts the CPUs.
    pub cpuset: Option<String>,
    /// Whether the limit fields are known (false: not observable).
    pub limits_known: bool,
    /// Published ports (`None` = not observable).
    pub ports: Option<Vec<PortFact>>,
    /// `--publish-all`.
    pub publish_all_ports: bool,
    /// Configured user (`Config.User`, empty = the image's, usually root) or the probe's uid.
    pub user: Option<String>,
    /// Numeric uid when known.
    pub uid: Option<u32>,
    /// Socket files found inside the container (probe only).
    pub sockets: Vec<String>,
    /// Paths outside the workspace a process inside could write (probe only).
    pub writable_paths: Vec<String>,
    /// Network interfaces seen inside (probe only).
    pub network_interfaces: Option<Vec<String>>,
    /// `--rm`: the engine removes the container when it stops.
    pub auto_remove: bool,
}

/// The first object of a `docker … inspect` array, or the value itself.
fn first_object(v: &Value) -> &Value {
    match v {
        Value::Array(items) => items.first().unwrap_or(&Value::Null),
        other => other,
    }
}

/// The one container object of `docker inspect` output: the value itself or the only element
/// of an array, with a `Config` or `HostConfig` member.
fn one_container(value: &Value) -> Result<&Value, AuditError> {
    let obj = match value {
        Value::Array(items) if items.len() == 1 => &items[0],
        Value::Array(items) => {
            return Err(AuditError::NotAContainer {
                expected: "an array with exactly one container",
                found: format!("an array of {}", items.len()),
            });
        }
        other => other,
    };
    if !obj.is_object() || (obj.get("Config").is_none() && obj.get("HostConfig").is_none()) {
        return Err(AuditError::NotAContainer {
            expected: "an object with `Config` and `HostConfig`",
            found: json::kind(obj).to_string(),
        });
    }
    Ok(obj)
}

/// The container's mounts and its tmpfs mounts, by target.
fn mounts_of(c: &ContainerInfo) -> Vec<MountFact> {
    let mut mounts: Vec<MountFact> = c.mounts.iter().map(mount_fact).collect();
    for (target, options) in &c.host.tmpfs {
        mounts.push(MountFact {
            kind: MountKind::Tmpfs,
            source: None,
            volume_name: None,
            target: target.clone(),
            read_only: options.split(',').any(|x| x == "ro"),
        });
    }
    // The engine lists mounts in no stable order: by target, so evidence reads the same
    // at every run.
    mounts.sort_by(|a, b| a.target.cmp(&b.target));
    mounts
}

/// One mount as the engine reports it.
fn mount_fact(m: &MountInfo) -> MountFact {
    let kind = match m.kind.as_str() {
        "bind" => MountKind::Bind,
        "volume" => MountKind::Volume,
        "tmpfs" => MountKind::Tmpfs,
        _ => MountKind::Other,
    };
    MountFact {
        source: (kind != MountKind::Volume && !m.source.is_empty()).then(|| m.source.clone()),
        volume_name: (kind == MountKind::Volume)
            .then(|| m.name.clone())
            .flatten(),
        target: m.destination.clone(),
        read_only: !m.rw,
        kind,
    }
}

/// `HostConfig.SecurityOpt`: `name=value`, `name:value` or a bare `name` (read as `true`).
struct SecurityOpts<'a>(&'a [String]);

impl SecurityOpts<'_> {
    /// The value of the first option called `name`.
    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find_map(|o| {
            let (k, v) = o.split_once(['=', ':']).unwrap_or((o.as_str(), "true"));
            (k == name).then_some(v)
        })
    }

    /// The first option called `name` has `value`.
    fn is(&self, name: &str, value: &str) -> bool {
        self.get(name) == Some(value)
    }
}

/// A namespace mode, `empty` when unset.
fn mode(mode: &str, empty: &str) -> Option<String> {
    Some(if mode.is_empty() { empty } else { mode }.to_string())
}

/// The CPU limit in CPUs: `NanoCpus`, else `CpuQuota` over `CpuPeriod` (default 100 ms).
fn cpu_limit(host: &HostSecurity) -> Option<f64> {
    let nano = host.limits.nano_cpus.map(|n| n as f64 / 1e9);
    let quota = host.cpu_quota.map(|q| {
        let period = host.cpu_period.unwrap_or(100_000);
        q as f64 / period as f64
    });
    nano.or(quota)
}

/// Environment entries `KEY=value` as names; the values are dropped by [`EnvFact::new`].
fn env_facts(env: &[String]) -> Vec<EnvFact> {
    env.iter()
        .map(|entry| match entry.split_once('=') {
            Some((n, v)) => EnvFact::new(n, Some(v)),
            None => EnvFact::new(entry, None),
        })
        .collect()
}

impl ContainerFacts {
    /// The facts of a container as the engine describes it ([`Engine::inspect_container`]'s
    /// typed answer). Environment values are dropped here.
    ///
    /// [`Engine::inspect_container`]: crate::engine::Engine::inspect_container
    pub fn from_container(c: &ContainerInfo) -> Self {
        let host = &c.host;
        let cap_add: Vec<String> = host.cap_add.iter().map(|x| normalize_cap(x)).collect();
        let cap_drop: Vec<String> = host.cap_drop.iter().map(|x| normalize_cap(x)).collect();
        let capabilities = Some(effective_caps(host.privileged, &cap_add, &cap_drop));
        let opts = SecurityOpts(&host.security_opt);
        Self {
            source: Some(FactsSource::Inspect),
            name: (!c.name.is_empty()).then(|| c.name.clone()),
            id: (!c.id.is_empty()).then(|| c.id.clone()),
            image: (!c.image.is_empty()).then(|| c.image.clone()),
            image_id: (!c.image_id.is_empty()).then(|| c.image_id.clone()),
            image_repo_digests: Vec::new(),
            image_layers: Vec::new(),
            base_image_layers: None,
            labels: Some(c.labels.clone()),
            env: env_facts(&c.env),
            mounts: mounts_of(c),
            privileged: Some(host.privileged),
            cap_add,
            cap_drop,
            capabilities,
            no_new_privileges: Some(opts.get("no-new-privileges").is_some_and(|v| v != "false")),
            seccomp: Some(if host.privileged || opts.is("seccomp", "unconfined") {
                Seccomp::Unconfined
            } else {
                Seccomp::Filtered
            }),
            apparmor_unconfined: Some(
                opts.is("apparmor", "unconfined") || c.apparmor_profile == "unconfined",
            ),
            selinux_disabled: Some(opts.is("label", "disable")),
            systempaths_unconfined: Some(opts.is("systempaths", "unconfined")),
            pid_mode: mode(&host.pid_mode, "private"),
            ipc_mode: mode(&host.ipc_mode, "private"),
            uts_mode: mode(&host.uts_mode, "private"),
            network_mode: mode(&host.network_mode, "default"),
            networks: c.networks.clone(),
            devices: host
                .device_mappings
                .iter()
                .map(|d| DeviceFact {
                    host_path: d.host_path.clone(),
                    container_path: d.container_path.clone(),
                })
                .collect(),
            device_requests: host.device_requests,
            gpu_requested: Some(host.gpu_requested),
            read_only_rootfs: Some(host.read_only_rootfs),
            pids_limit: host.limits.pids,
            memory_limit: host.limits.memory_bytes,
            cpu_limit: cpu_limit(host),
            cpuset: (!host.cpuset_cpus.is_empty()).then(|| host.cpuset_cpus.clone()),
            limits_known: true,
            ports: Some(
                host.port_bindings
                    .iter()
                    .map(|p| PortFact {
                        container_port: p.container_port.clone(),
                        host_ip: p.host_ip.clone(),
                        host_port: p.host_port.clone(),
                    })
                    .collect(),
            ),
            publish_all_ports: host.publish_all_ports,
            uid: user_uid(&c.config_user),
            user: Some(c.config_user.clone()),
            sockets: Vec::new(),
            writable_paths: Vec::new(),
            network_interfaces: None,
            auto_remove: host.auto_remove,
        }
    }

    /// Reads the JSON printed by `docker inspect <container>` (an array with one object) or one
    /// `ContainerInspect` object of the Docker Engine API: a saved document, read by the
    /// engine's own reader ([`crate::engine::container_info_from_docker_json`]) into the facts
    /// [`Self::from_container`] gives. Environment values are dropped here.
    ///
    /// # Errors
    /// [`AuditError::NotAContainer`] when the value is not one object (or a one-element array of
    /// one) with a `Config` or `HostConfig` member, or not of the Engine API's shape.
    pub fn from_docker_inspect(value: &Value) -> Result<Self, AuditError> {
        let obj = one_container(value)?;
        let info = crate::engine::container_info_from_docker_json(obj).map_err(|e| {
            AuditError::NotAContainer {
                expected: "a container object of the Docker Engine API's shape",
                found: format!(
                    "a field of another type (line {}, column {})",
                    e.line(),
                    e.column()
                ),
            }
        })?;
        Ok(Self::from_container(&info))
    }

    /// Adds what the engine says of the container's image: its registry digests and layers.
    pub fn with_image(mut self, image: &ImageInfo) -> Self {
        self.image_repo_digests = image.repo_digests.clone();
        self.image_layers = image.layers.clone();
        self
    }

    /// Adds what `docker image inspect <image>` says (a saved document: the array it prints or
    /// one image object), as [`Self::with_image`]; a document of another shape is ignored.
    pub fn with_image_inspect(self, image: &Value) -> Self {
        match crate::engine::image_info_from_docker_json(first_object(image)) {
            Ok(image) => self.with_image(&image),
            Err(_) => self,
        }
    }

    /// The [`BASE_IMAGE_LABEL`] when it names an image by digest ([`is_digest_pinned`]): the
    /// image whose layers [`Self::with_base_image`] wants.
    pub fn pinned_base_label(&self) -> Option<&str> {
        self.labels
            .as_ref()?
            .get(BASE_IMAGE_LABEL)
            .map(String::as_str)
            .filter(|b| is_digest_pinned(b))
    }

    /// Adds the layers of the image [`Self::pinned_base_label`] names, so the audit can check
    /// that the container's image is built on it.
    pub fn with_base_image(mut self, base: &ImageInfo) -> Self {
        self.base_image_layers = (!base.layers.is_empty()).then(|| base.layers.clone());
        self
    }

    /// [`Self::with_base_image`] from a saved `docker image inspect` document; a document of
    /// another shape is ignored.
    pub fn with_base_image_inspect(self, base: &Value) -> Self {
        match crate::engine::image_info_from_docker_json(first_object(base)) {
            Ok(base) => self.with_base_image(&base),
            Err(_) => self,
        }
    }

    /// Fills the fields a process inside the container cannot observe (name, id, image, image
    /// digests, labels, ports, IPC/UTS modes, attached networks, AppArmor/SELinux options,
    /// `--rm`) from the engine's facts, keeping everything observed from inside.
    pub fn fill_unobservable_from(mut self, engine: &ContainerFacts) -> Self {
        self.source = Some(FactsSource::ProbeWithInspect);
        self.name = self.name.or_else(|| engine.name.clone());
        self.id = self.id.or_else(|| engine.id.clone());
        self.image = self.image.or_else(|| engine.image.clone());
        self.image_id = self.image_id.or_else(|| engine.image_id.clone());
        if self.image_repo_digests.is_empty() {
            self.image_repo_digests = engine.image_repo_digests.clone();
        }
        if self.image_layers.is_empty() {
            self.image_layers = engine.image_layers.clone();
        }
        self.base_image_layers = self
            .base_image_layers
            .take()
            .or_else(|| engine.base_image_layers.clone());
        self.labels = self.labels.or_else(|| engine.labels.clone());
        self.ports = self.ports.or_else(|| engine.ports.clone());
        self.publish_all_ports |= engine.publish_all_ports;
        self.ipc_mode = self.ipc_mode.or_else(|| engine.ipc_mode.clone());
        self.uts_mode = self.uts_mode.or_else(|| engine.uts_mode.clone());
        if self.networks.is_empty() {
            self.networks = engine.networks.clone();
        }
        self.apparmor_unconfined = self.apparmor_unconfined.or(engine.apparmor_unconfined);
        self.selinux_disabled = self.selinux_disabled.or(engine.selinux_disabled);
        self.auto_remove |= engine.auto_remove;
        // Volume names: the probe sees a volume's storage path; the engine knows its name.
        for m in &mut self.mounts {
            if m.kind == MountKind::Volume
                && let Some(e) = engine.mounts.iter().find(|e| e.target == m.target)
            {
                m.volume_name = m.volume_name.take().or_else(|| e.volume_name.clone());
            }
        }
        self
    }

    /// The Features recorded in the `devcontainer.metadata` label (entries with an `id`);
    /// `None` when labels are not observable.
    pub fn feature_ids(&self) -> Option<Vec<String>> {
        let labels = self.labels.as_ref()?;
        let Some(raw) = labels.get(names::METADATA_LABEL) else {
            return Some(Vec::new());
        };
        let parsed: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
        let entries = match parsed {
            Value::Array(a) => a,
            Value::Object(_) => vec![parsed],
            _ => Vec::new(),
        };
        Some(
            entries
                .iter()
                .filter_map(|e| e.get("id").and_then(Value::as_str))
                .map(str::to_string)
                .collect(),
        )
    }
}

/// The capability set a container's processes get: all when privileged; otherwise Docker's
/// default set minus `drop` (`ALL` drops everything) plus `add` (`ALL` adds everything).
pub fn effective_caps(privileged: bool, add: &[String], drop: &[String]) -> BTreeSet<String> {
    let all = || CAPABILITY_BITS.iter().map(|c| c.to_string()).collect();
    if privileged || add.iter().any(|c| c == "ALL") {
        return all();
    }
    let mut set: BTreeSet<String> = if drop.iter().any(|c| c == "ALL") {
        BTreeSet::new()
    } else {
        DOCKER_DEFAULT_CAPS
            .iter()
            .map(|c| c.to_string())
            .filter(|c| !drop.contains(c))
            .collect()
    };
    set.extend(add.iter().cloned());
    set
}

/// Decodes a capability mask (as in `/proc/self/status` `CapBnd`) into names; unknown bits are
/// named `CAP_<bit>`.
pub fn caps_from_mask(mask: u64) -> BTreeSet<String> {
    (0..64)
        .filter(|bit| mask & (1u64 << bit) != 0)
        .map(|bit| {
            CAPABILITY_BITS
                .get(bit)
                .map_or_else(|| format!("CAP_{bit}"), |n| n.to_string())
        })
        .collect()
}

/// The uid `Config.User` gives without a passwd to look names up in
/// ([`crate::engine::passwd::resolve`]: `00`, `+0` are uid 0 too); empty is the image's
/// default, taken as root.
fn user_uid(user: &str) -> Option<u32> {
    use crate::engine::passwd::{Resolved, resolve};
    match resolve(user, None) {
        Resolved::Default => Some(0),
        other => other.uid(),
    }
}
