//! The neutral description of a container the audit scores, [`ContainerFacts`], and how it is
//! read from the engine's `docker inspect` JSON (and `docker image inspect` of its image and of
//! its recorded base). Environment variable values are dropped here.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::heuristics::{is_credential_name, is_digest_pinned, looks_like_token};
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

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    if cur.is_null() { None } else { Some(cur) }
}

/// The first object of a `docker … inspect` array, or the value itself.
fn first_object(v: &Value) -> &Value {
    match v {
        Value::Array(items) => items.first().unwrap_or(&Value::Null),
        other => other,
    }
}

fn positive(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_i64).filter(|n| *n > 0)
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

/// `Config.Labels`, values that are not strings read as empty.
fn labels_from_inspect(cfg: &Value) -> Option<BTreeMap<String, String>> {
    cfg.get("Labels").and_then(Value::as_object).map(|m| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect()
    })
}

/// `Config.Env` as names; the values are dropped by [`EnvFact::new`].
fn env_from_inspect(cfg: &Value) -> Vec<EnvFact> {
    json::strings(cfg.get("Env"))
        .iter()
        .map(|entry| match entry.split_once('=') {
            Some((n, v)) => EnvFact::new(n, Some(v)),
            None => EnvFact::new(entry, None),
        })
        .collect()
}

/// The container's mounts (`Mounts`, or the `HostConfig.Binds` strings when there is none) and
/// its tmpfs mounts, by target.
fn mounts_from_inspect(obj: &Value, hc: &Value) -> Vec<MountFact> {
    let mut mounts: Vec<MountFact> = obj
        .get("Mounts")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(mount_from_inspect).collect())
        .unwrap_or_default();
    if obj.get("Mounts").is_none() {
        // No `Mounts` (e.g. a create request rather than an inspect result): read the
        // `HostConfig.Binds` strings, `source:target[:options]`.
        mounts.extend(
            json::strings(hc.get("Binds"))
                .iter()
                .filter_map(|b| bind_mount(b)),
        );
    }
    if let Some(tmpfs) = hc.get("Tmpfs").and_then(Value::as_object) {
        for (target, opts) in tmpfs {
            let ro = opts
                .as_str()
                .is_some_and(|o| o.split(',').any(|x| x == "ro"));
            mounts.push(MountFact {
                kind: MountKind::Tmpfs,
                source: None,
                volume_name: None,
                target: target.clone(),
                read_only: ro,
            });
        }
    }
    // The engine lists mounts in no stable order: by target, so evidence reads the same
    // at every run.
    mounts.sort_by(|a, b| a.target.cmp(&b.target));
    mounts
}

/// One `HostConfig.Binds` string, `source:target[:options]`; `None` without a target.
fn bind_mount(bind: &str) -> Option<MountFact> {
    let parts: Vec<&str> = bind.split(':').collect();
    let (src, dst, opts) = match parts.as_slice() {
        [s, d] => (*s, *d, ""),
        [s, d, o, ..] => (*s, *d, *o),
        _ => return None,
    };
    let is_path = src.starts_with('/');
    Some(MountFact {
        kind: if is_path {
            MountKind::Bind
        } else {
            MountKind::Volume
        },
        source: is_path.then(|| src.to_string()),
        volume_name: (!is_path).then(|| src.to_string()),
        target: dst.to_string(),
        read_only: opts.split(',').any(|o| o == "ro"),
    })
}

/// The capabilities listed at `HostConfig.<key>`, normalised.
fn caps_at(hc: &Value, key: &str) -> Vec<String> {
    json::strings(hc.get(key))
        .iter()
        .map(|c| normalize_cap(c))
        .collect()
}

/// `HostConfig.SecurityOpt`: `name=value`, `name:value` or a bare `name` (read as `true`).
struct SecurityOpts(Vec<String>);

impl SecurityOpts {
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

/// A namespace mode of `HostConfig`, `empty` when unset or empty.
fn mode(hc: &Value, key: &str, empty: &str) -> Option<String> {
    Some(match str_at(hc, &[key]) {
        None | Some("") => empty.to_string(),
        Some(m) => m.to_string(),
    })
}

/// `HostConfig.Devices`.
fn devices_from_inspect(hc: &Value) -> Vec<DeviceFact> {
    hc.get("Devices")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|d| DeviceFact {
                    host_path: str_at(d, &["PathOnHost"]).map(str::to_string),
                    container_path: str_at(d, &["PathInContainer"])
                        .or_else(|| str_at(d, &["PathOnHost"]))
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The CPU limit in CPUs: `NanoCpus`, else `CpuQuota` over `CpuPeriod` (default 100 ms).
fn cpu_limit_from_inspect(hc: &Value) -> Option<f64> {
    let nano = positive(hc.get("NanoCpus")).map(|n| n as f64 / 1e9);
    let quota = positive(hc.get("CpuQuota")).map(|q| {
        let period = positive(hc.get("CpuPeriod")).unwrap_or(100_000);
        q as f64 / period as f64
    });
    nano.or(quota)
}

/// `HostConfig.PortBindings`, one fact per host binding.
fn ports_from_inspect(hc: &Value) -> Vec<PortFact> {
    let mut ports = Vec::new();
    if let Some(map) = hc.get("PortBindings").and_then(Value::as_object) {
        for (cport, bindings) in map {
            for b in bindings.as_array().map(Vec::as_slice).unwrap_or_default() {
                ports.push(PortFact {
                    container_port: cport.clone(),
                    host_ip: str_at(b, &["HostIp"]).unwrap_or_default().to_string(),
                    host_port: str_at(b, &["HostPort"]).unwrap_or_default().to_string(),
                });
            }
        }
    }
    ports
}

/// The names of the networks the container is attached to.
fn networks_from_inspect(obj: &Value) -> Vec<String> {
    obj.get("NetworkSettings")
        .and_then(|n| n.get("Networks"))
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

impl ContainerFacts {
    /// Reads the JSON printed by `docker inspect <container>` (an array with one object) or one
    /// `ContainerInspect` object of the Docker Engine API. Missing fields are left unknown or
    /// default; environment values are dropped here.
    ///
    /// # Errors
    /// [`AuditError::NotAContainer`] when the value is not one object (or a one-element array of
    /// one) with a `Config` or `HostConfig` member.
    pub fn from_docker_inspect(value: &Value) -> Result<Self, AuditError> {
        let obj = one_container(value)?;
        let hc = obj.get("HostConfig").cloned().unwrap_or(Value::Null);
        let cfg = obj.get("Config").cloned().unwrap_or(Value::Null);
        let privileged = hc.get("Privileged").and_then(Value::as_bool);
        let cap_add = caps_at(&hc, "CapAdd");
        let cap_drop = caps_at(&hc, "CapDrop");
        let capabilities = Some(effective_caps(
            privileged.unwrap_or(false),
            &cap_add,
            &cap_drop,
        ));
        let opts = SecurityOpts(json::strings(hc.get("SecurityOpt")));
        let user = str_at(&cfg, &["User"]).unwrap_or_default().to_string();
        Ok(Self {
            source: Some(FactsSource::Inspect),
            name: str_at(obj, &["Name"]).map(|n| n.trim_start_matches('/').to_string()),
            id: str_at(obj, &["Id"]).map(str::to_string),
            image: str_at(&cfg, &["Image"]).map(str::to_string),
            image_id: str_at(obj, &["Image"]).map(str::to_string),
            image_repo_digests: Vec::new(),
            image_layers: Vec::new(),
            base_image_layers: None,
            labels: labels_from_inspect(&cfg),
            env: env_from_inspect(&cfg),
            mounts: mounts_from_inspect(obj, &hc),
            privileged,
            cap_add,
            cap_drop,
            capabilities,
            no_new_privileges: Some(opts.get("no-new-privileges").is_some_and(|v| v != "false")),
            seccomp: Some(
                if privileged == Some(true) || opts.is("seccomp", "unconfined") {
                    Seccomp::Unconfined
                } else {
                    Seccomp::Filtered
                },
            ),
            apparmor_unconfined: Some(
                opts.is("apparmor", "unconfined")
                    || str_at(obj, &["AppArmorProfile"]) == Some("unconfined"),
            ),
            selinux_disabled: Some(opts.is("label", "disable")),
            systempaths_unconfined: Some(opts.is("systempaths", "unconfined")),
            pid_mode: mode(&hc, "PidMode", "private"),
            ipc_mode: mode(&hc, "IpcMode", "private"),
            uts_mode: mode(&hc, "UTSMode", "private"),
            network_mode: mode(&hc, "NetworkMode", "default"),
            networks: networks_from_inspect(obj),
            devices: devices_from_inspect(&hc),
            device_requests: hc
                .get("DeviceRequests")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()),
            read_only_rootfs: hc.get("ReadonlyRootfs").and_then(Value::as_bool),
            pids_limit: positive(hc.get("PidsLimit")),
            memory_limit: positive(hc.get("Memory")),
            cpu_limit: cpu_limit_from_inspect(&hc),
            cpuset: str_at(&hc, &["CpusetCpus"])
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            limits_known: true,
            ports: Some(ports_from_inspect(&hc)),
            publish_all_ports: hc
                .get("PublishAllPorts")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            uid: user_uid(&user),
            user: Some(user),
            sockets: Vec::new(),
            writable_paths: Vec::new(),
            network_interfaces: None,
            auto_remove: hc
                .get("AutoRemove")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Adds what `docker image inspect <image>` says: its `RepoDigests` and `RootFS.Layers`.
    /// Accepts the array `docker image inspect` prints or one image object; anything else is
    /// ignored.
    pub fn with_image_inspect(mut self, image: &Value) -> Self {
        let obj = first_object(image);
        self.image_repo_digests = json::strings(obj.get("RepoDigests"));
        self.image_layers = json::strings(obj.get("RootFS").and_then(|r| r.get("Layers")));
        self
    }

    /// The [`BASE_IMAGE_LABEL`] when it names an image by digest ([`is_digest_pinned`]): the
    /// image whose `docker image inspect` [`Self::with_base_image_inspect`] wants.
    pub fn pinned_base_label(&self) -> Option<&str> {
        self.labels
            .as_ref()?
            .get(BASE_IMAGE_LABEL)
            .map(String::as_str)
            .filter(|b| is_digest_pinned(b))
    }

    /// Adds `docker image inspect` of the image [`Self::pinned_base_label`] names (its
    /// `RootFS.Layers`), so the audit can check that the container's image is built on it.
    pub fn with_base_image_inspect(mut self, base: &Value) -> Self {
        let layers = json::strings(
            first_object(base)
                .get("RootFS")
                .and_then(|r| r.get("Layers")),
        );
        self.base_image_layers = (!layers.is_empty()).then_some(layers);
        self
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

fn mount_from_inspect(m: &Value) -> MountFact {
    let kind = match str_at(m, &["Type"]).unwrap_or_default() {
        "bind" => MountKind::Bind,
        "volume" => MountKind::Volume,
        "tmpfs" => MountKind::Tmpfs,
        _ => MountKind::Other,
    };
    let rw = m.get("RW").and_then(Value::as_bool).unwrap_or(true);
    MountFact {
        source: (kind != MountKind::Volume)
            .then(|| str_at(m, &["Source"]).map(str::to_string))
            .flatten()
            .filter(|s| !s.is_empty()),
        volume_name: (kind == MountKind::Volume)
            .then(|| str_at(m, &["Name"]).map(str::to_string))
            .flatten(),
        target: str_at(m, &["Destination"])
            .or_else(|| str_at(m, &["Target"]))
            .unwrap_or_default()
            .to_string(),
        read_only: !rw,
        kind,
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
