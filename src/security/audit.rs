//! L3: the isolation audit. Scores any container, made by devcell or not, against the eight
//! controls of the containerized agent workspace blueprint (repo scope, engine socket, secret
//! boundary, network policy, cache policy, browser isolation, reproducibility, teardown), 0 to 2
//! points each, 16 in all, with the evidence behind every score.
//!
//! The audit is a pure function over a neutral description of a container, [`ContainerFacts`],
//! which is filled either from the JSON of `docker inspect <container>` (the Docker Engine API
//! `ContainerInspect` shape, [`ContainerFacts::from_docker_inspect`]) or from what a process
//! inside the container observes ([`crate::security::probe`]). Nothing here talks to the engine.
//!
//! Scoring rule (spec-notes 0140-0146): every observation becomes an [`Evidence`] with a
//! [`Risk`]; a control scores the lowest cap among its evidence (`critical` caps at 0, `weak` at
//! 1, `safe` leaves 2). Environment variable values are dropped when facts are read: only names,
//! and flags saying whether a name or value looks like a credential, are kept.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::names;

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

/// Whether `reference` names an image by registry digest (`<repository>@sha256:<64 hex>`): a
/// pin any machine can pull.
pub fn is_digest_pinned(reference: &str) -> bool {
    reference
        .rsplit_once("@sha256:")
        .is_some_and(|(repo, hex)| !repo.is_empty() && is_sha256_hex(hex))
}

/// Whether `reference` is a local image ID (`sha256:<64 hex>`): exact on this engine, but not
/// something another machine can pull.
pub fn is_image_id(reference: &str) -> bool {
    reference.strip_prefix("sha256:").is_some_and(is_sha256_hex)
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The highest score of one control.
pub const CONTROL_MAX: u8 = 2;

/// The highest total score (eight controls, two points each).
pub const MAX_SCORE: u8 = 16;

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

// ------------------------------------------------------------------------------------------
// Facts
// ------------------------------------------------------------------------------------------

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

/// Capabilities that let a process escape to, or control, the host (critical).
const CRITICAL_CAPS: &[&str] = &[
    "SYS_ADMIN",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_PTRACE",
    "DAC_READ_SEARCH",
    "SYS_BOOT",
    "BPF",
    "MAC_ADMIN",
    "MAC_OVERRIDE",
    "PERFMON",
];

fn normalize_cap(cap: &str) -> String {
    let upper = cap.trim().to_ascii_uppercase();
    upper.strip_prefix("CAP_").unwrap_or(&upper).to_string()
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

fn str_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn positive(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_i64).filter(|n| *n > 0)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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
                found: json_type(obj).to_string(),
            });
        }
        let hc = obj.get("HostConfig").cloned().unwrap_or(Value::Null);
        let cfg = obj.get("Config").cloned().unwrap_or(Value::Null);

        let labels = cfg.get("Labels").and_then(Value::as_object).map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect::<BTreeMap<_, _>>()
        });
        let env = str_list(cfg.get("Env"))
            .iter()
            .map(|entry| match entry.split_once('=') {
                Some((n, v)) => EnvFact::new(n, Some(v)),
                None => EnvFact::new(entry, None),
            })
            .collect();

        let mut mounts: Vec<MountFact> = obj
            .get("Mounts")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(mount_from_inspect).collect())
            .unwrap_or_default();
        if obj.get("Mounts").is_none() {
            // No `Mounts` (e.g. a create request rather than an inspect result): read the
            // `HostConfig.Binds` strings, `source:target[:options]`.
            for bind in str_list(hc.get("Binds")) {
                let parts: Vec<&str> = bind.split(':').collect();
                let (src, dst, opts) = match parts.as_slice() {
                    [s, d] => (*s, *d, ""),
                    [s, d, o, ..] => (*s, *d, *o),
                    _ => continue,
                };
                let is_path = src.starts_with('/');
                mounts.push(MountFact {
                    kind: if is_path {
                        MountKind::Bind
                    } else {
                        MountKind::Volume
                    },
                    source: is_path.then(|| src.to_string()),
                    volume_name: (!is_path).then(|| src.to_string()),
                    target: dst.to_string(),
                    read_only: opts.split(',').any(|o| o == "ro"),
                });
            }
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

        let privileged = hc.get("Privileged").and_then(Value::as_bool);
        let cap_add: Vec<String> = str_list(hc.get("CapAdd"))
            .iter()
            .map(|c| normalize_cap(c))
            .collect();
        let cap_drop: Vec<String> = str_list(hc.get("CapDrop"))
            .iter()
            .map(|c| normalize_cap(c))
            .collect();
        let capabilities = Some(effective_caps(
            privileged.unwrap_or(false),
            &cap_add,
            &cap_drop,
        ));

        let security_opt = str_list(hc.get("SecurityOpt"));
        let opt = |name: &str| -> Option<String> {
            security_opt.iter().find_map(|o| {
                let (k, v) = o.split_once(['=', ':']).unwrap_or((o.as_str(), "true"));
                (k == name).then(|| v.to_string())
            })
        };
        let no_new_privileges = Some(opt("no-new-privileges").is_some_and(|v| v != "false"));
        let seccomp = Some(
            if privileged == Some(true) || opt("seccomp").is_some_and(|v| v == "unconfined") {
                Seccomp::Unconfined
            } else {
                Seccomp::Filtered
            },
        );
        let apparmor_unconfined = Some(
            opt("apparmor").is_some_and(|v| v == "unconfined")
                || str_at(obj, &["AppArmorProfile"]) == Some("unconfined"),
        );
        let selinux_disabled = Some(opt("label").is_some_and(|v| v == "disable"));
        let systempaths_unconfined = Some(opt("systempaths").is_some_and(|v| v == "unconfined"));

        let mode = |key: &str, empty: &str| -> Option<String> {
            Some(match str_at(&hc, &[key]) {
                None | Some("") => empty.to_string(),
                Some(m) => m.to_string(),
            })
        };

        let devices = hc
            .get("Devices")
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
            .unwrap_or_default();
        let device_requests = hc
            .get("DeviceRequests")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());

        let nano = positive(hc.get("NanoCpus")).map(|n| n as f64 / 1e9);
        let quota = positive(hc.get("CpuQuota")).map(|q| {
            let period = positive(hc.get("CpuPeriod")).unwrap_or(100_000);
            q as f64 / period as f64
        });
        let cpuset = str_at(&hc, &["CpusetCpus"])
            .filter(|s| !s.is_empty())
            .map(str::to_string);

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

        let networks = obj
            .get("NetworkSettings")
            .and_then(|n| n.get("Networks"))
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();

        let user = str_at(&cfg, &["User"]).unwrap_or_default().to_string();
        let uid = user_uid(&user);

        Ok(Self {
            source: Some(FactsSource::Inspect),
            name: str_at(obj, &["Name"]).map(|n| n.trim_start_matches('/').to_string()),
            id: str_at(obj, &["Id"]).map(str::to_string),
            image: str_at(&cfg, &["Image"]).map(str::to_string),
            image_id: str_at(obj, &["Image"]).map(str::to_string),
            image_repo_digests: Vec::new(),
            image_layers: Vec::new(),
            base_image_layers: None,
            labels,
            env,
            mounts,
            privileged,
            cap_add,
            cap_drop,
            capabilities,
            no_new_privileges,
            seccomp,
            apparmor_unconfined,
            selinux_disabled,
            systempaths_unconfined,
            pid_mode: mode("PidMode", "private"),
            ipc_mode: mode("IpcMode", "private"),
            uts_mode: mode("UTSMode", "private"),
            network_mode: mode("NetworkMode", "default"),
            networks,
            devices,
            device_requests,
            read_only_rootfs: hc.get("ReadonlyRootfs").and_then(Value::as_bool),
            pids_limit: positive(hc.get("PidsLimit")),
            memory_limit: positive(hc.get("Memory")),
            cpu_limit: nano.or(quota),
            cpuset,
            limits_known: true,
            ports: Some(ports),
            publish_all_ports: hc
                .get("PublishAllPorts")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            user: Some(user),
            uid,
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
        self.image_repo_digests = str_list(obj.get("RepoDigests"));
        self.image_layers = str_list(obj.get("RootFS").and_then(|r| r.get("Layers")));
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
        let layers = str_list(
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

/// Whether an environment variable name looks like a credential: a `_`/`-`-separated segment is
/// `AUTH`/`OAUTH`/`PAT`/`APIKEY`/…, ends in `AUTH`, or the name contains `TOKEN`, `SECRET`,
/// `PASSWORD`, `PASSWD`, `CREDENTIAL`, `API_KEY`, `ACCESS_KEY`, `PRIVATE_KEY` or `SECRET_KEY`.
pub fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const SUBSTRINGS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "SECRET_KEY",
        "CLIENT_KEY",
    ];
    if SUBSTRINGS.iter().any(|s| upper.contains(s)) {
        return true;
    }
    upper.split(['_', '-']).any(|seg| {
        matches!(seg, "AUTH" | "OAUTH" | "PAT" | "PASS" | "PWD") && upper != "PWD"
            || (seg.ends_with("AUTH") && seg.len() > 4)
    })
}

/// Whether a value looks like a long-lived token: a known provider prefix followed by at least
/// 16 more characters, or a PEM private key.
fn looks_like_token(value: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "sk-",
        "sk_live_",
        "rk_live_",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "AKIA",
        "ASIA",
        "AIza",
        "npm_",
        "pypi-",
        "hf_",
        "dop_v1_",
    ];
    let v = value.trim();
    if v.contains("-----BEGIN") && v.contains("PRIVATE KEY") {
        return true;
    }
    PREFIXES
        .iter()
        .any(|p| v.starts_with(p) && v.len() >= p.len() + 16 && !v.contains(char::is_whitespace))
}

// ------------------------------------------------------------------------------------------
// Context
// ------------------------------------------------------------------------------------------

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
    /// not a valid lockfile. Compared with the container's [`FEATURE_DIGESTS_LABEL`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_features: Option<BTreeMap<String, String>>,
    /// Networks known to be internal (`docker network create --internal`: no route out).
    pub internal_networks: Vec<String>,
    /// Host git directories of the workspace's repositories (a worktree's main repository's
    /// `.git`), which must be mounted for git to work in the container: a bind at or inside one
    /// is part of the workspace, not an extra host path (spec-note 0201). The caller derives
    /// them from the host workspace (`handoff::workspace`), never from the container.
    #[serde(default)]
    pub git_dirs: Vec<PathBuf>,
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
    /// Sets `features_lockfile` from the config file's lockfile ([`lockfile_path_for_config`]):
    /// `Some(true)` when it exists and is not empty (an empty lockfile only asks to be
    /// initialised), else `Some(false)`; and `locked_features` from its content when it parses.
    ///
    /// The lockfile is the repository's: resolved first, and when it lands outside
    /// [`AuditContext::workspace`] (a link to a host file) it is neither read nor counted;
    /// inside, it is read without following links (spec-note 0400).
    pub fn with_config_file(mut self, config_file: &Path) -> Self {
        use super::host_path;
        let lockfile = lockfile_path_for_config(config_file);
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

/// The lockfile path for a config file: `devcontainer-lock.json` beside it, or
/// `.devcontainer-lock.json` when the config is `.devcontainer.json` (spec: Lockfile).
pub fn lockfile_path_for_config(config_file: &Path) -> PathBuf {
    let dir = config_file.parent().unwrap_or_else(|| Path::new(""));
    if config_file
        .file_name()
        .is_some_and(|n| n == ".devcontainer.json")
    {
        dir.join(".devcontainer-lock.json")
    } else {
        dir.join("devcontainer-lock.json")
    }
}

// ------------------------------------------------------------------------------------------
// Report
// ------------------------------------------------------------------------------------------

/// Audits the JSON of `docker inspect <container>` (and, optionally, of `docker image inspect`
/// of its image, for `RepoDigests`): the seam for `devcell audit CONTAINER`.
///
/// # Errors
/// [`AuditError::NotAContainer`] when `container` is not one container object.
pub fn audit_inspect_json(
    container: &Value,
    image: Option<&Value>,
    ctx: &AuditContext,
) -> Result<AuditReport, AuditError> {
    let mut facts = ContainerFacts::from_docker_inspect(container)?;
    if let Some(image) = image {
        facts = facts.with_image_inspect(image);
    }
    Ok(audit(&facts, ctx))
}

/// The blueprint's eight controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Control {
    /// What host files can the agent read?
    RepoScope,
    /// Can the agent reach the engine or otherwise control host-level resources?
    EngineSocket,
    /// Which credentials are visible, and do they survive teardown?
    SecretBoundary,
    /// Which destinations can the run reach?
    NetworkPolicy,
    /// Can one run influence another through cache state?
    CachePolicy,
    /// What browser account state is visible?
    BrowserIsolation,
    /// Can another machine recreate the workspace?
    Reproducibility,
    /// What proves the run is gone?
    Teardown,
}

impl Control {
    /// All controls, in the blueprint's order.
    pub const ALL: [Control; 8] = [
        Control::RepoScope,
        Control::EngineSocket,
        Control::SecretBoundary,
        Control::NetworkPolicy,
        Control::CachePolicy,
        Control::BrowserIsolation,
        Control::Reproducibility,
        Control::Teardown,
    ];

    /// Human title.
    pub fn title(self) -> &'static str {
        match self {
            Control::RepoScope => "repo scope",
            Control::EngineSocket => "engine socket",
            Control::SecretBoundary => "secret boundary",
            Control::NetworkPolicy => "network policy",
            Control::CachePolicy => "cache policy",
            Control::BrowserIsolation => "browser isolation",
            Control::Reproducibility => "reproducibility",
            Control::Teardown => "teardown",
        }
    }
}

/// How much one observation weakens its control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Caps the control at 0.
    Critical,
    /// Caps the control at 1.
    Weak,
    /// Does not lower the control.
    Safe,
}

impl Risk {
    /// The highest score a control can have with this evidence.
    pub fn cap(self) -> u8 {
        match self {
            Risk::Critical => 0,
            Risk::Weak => 1,
            Risk::Safe => 2,
        }
    }
}

/// One observation behind a score. Never contains an environment variable value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// What was looked at, e.g. `bind /home/me -> /home/me (rw)` or `env GITHUB_TOKEN`.
    pub subject: String,
    /// Why it is or is not a risk.
    pub detail: String,
    /// Its effect on the score.
    pub risk: Risk,
}

fn ev(subject: impl Into<String>, detail: impl Into<String>, risk: Risk) -> Evidence {
    Evidence {
        subject: subject.into(),
        detail: detail.into(),
        risk,
    }
}

/// One control's score and evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlScore {
    /// Which control.
    pub control: Control,
    /// Its title.
    pub title: String,
    /// 0, 1 or 2: the lowest cap among the evidence.
    pub score: u8,
    /// Always 2.
    pub max: u8,
    /// Every observation considered.
    pub evidence: Vec<Evidence>,
}

/// The audit result: eight control scores out of 16, serialisable to JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// Container name (or id) when known.
    pub container: Option<String>,
    /// Where the facts came from.
    pub source: Option<FactsSource>,
    /// Sum of the control scores.
    pub score: u8,
    /// 16.
    pub max_score: u8,
    /// The eight controls in the blueprint's order.
    pub controls: Vec<ControlScore>,
}

impl AuditReport {
    /// Whether the total reaches `min` (`--min-score N`).
    pub fn passes(&self, min: u8) -> bool {
        self.score >= min
    }

    /// The score of one control.
    pub fn score_of(&self, control: Control) -> u8 {
        self.control(control).map_or(0, |c| c.score)
    }

    /// One control's entry.
    pub fn control(&self, control: Control) -> Option<&ControlScore> {
        self.controls.iter().find(|c| c.control == control)
    }

    /// The report as a human table (one line per evidence, grouped by control).
    pub fn render_table(&self) -> String {
        let mut out = String::new();
        let who = self.container.as_deref().unwrap_or("container");
        let src = match self.source {
            Some(FactsSource::Inspect) => "engine inspect",
            Some(FactsSource::Probe) => "probe inside the container",
            Some(FactsSource::ProbeWithInspect) => "probe inside the container + engine inspect",
            None => "given facts",
        };
        let _ = writeln!(
            out,
            "isolation audit of {who} ({src}): {}/{}",
            self.score, self.max_score
        );
        let _ = writeln!(
            out,
            "{:<18} {:>5}  {:<8} EVIDENCE",
            "CONTROL", "SCORE", "RISK"
        );
        for c in &self.controls {
            let score = format!("{}/{}", c.score, c.max);
            for (i, e) in c.evidence.iter().enumerate() {
                let (name, sc) = if i == 0 {
                    (c.title.as_str(), score.as_str())
                } else {
                    ("", "")
                };
                let risk = match e.risk {
                    Risk::Critical => "CRITICAL",
                    Risk::Weak => "weak",
                    Risk::Safe => "ok",
                };
                let _ = writeln!(
                    out,
                    "{name:<18} {sc:>5}  {risk:<8} {}: {}",
                    e.subject, e.detail
                );
            }
        }
        out
    }
}

// ------------------------------------------------------------------------------------------
// Path rules
// ------------------------------------------------------------------------------------------

/// Engine control sockets (Docker, Podman, containerd, CRI-O, BuildKit) at their usual paths.
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

/// Credential folders and files relative to a home folder (long-lived host secrets).
const CREDENTIAL_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".gnupg",
    ".azure",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".terraform.d",
    ".config/hub",
    ".vault-token",
];

/// File names that hold a single credential (task credentials: weak, not critical).
const CREDENTIAL_FILES: &[&str] = &[
    "auth.json",
    "credentials",
    "credentials.json",
    "token",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
];

/// Browser and mail profile folders relative to a home folder.
const BROWSER_DIRS: &[&str] = &[
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    ".mozilla",
    ".thunderbird",
    "snap/firefox",
    "snap/chromium",
    ".var/app/org.mozilla.firefox",
    ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
];

/// Package and build cache folders, relative to a home folder or anywhere in a path.
const CACHE_DIRS: &[&str] = &[
    ".cache",
    ".npm",
    ".pnpm-store",
    ".yarn",
    ".cargo/registry",
    ".cargo/git",
    ".m2",
    ".gradle",
    "go/pkg/mod",
    ".nuget/packages",
    ".gem",
    ".bundle",
    ".composer",
    ".ivy2",
    ".sbt",
    ".ccache",
    ".local/share/pnpm",
    ".local/share/uv",
    "var/cache/apt",
    "cargo/registry",
];

/// Host folders too broad to mount (each exposes far more than a repository).
const BROAD_DIRS: &[&str] = &[
    "/",
    "/etc",
    "/var",
    "/usr",
    "/opt",
    "/srv",
    "/run",
    "/var/run",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/lib",
    "/lib64",
    "/bin",
    "/sbin",
    "/tmp",
    "/mnt",
    "/media",
    "/var/lib",
    "/home",
    "/Users",
    "/root",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/containers",
];

/// Host paths whose write access controls the host kernel or engine.
const HOST_CONTROL_DIRS: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/lib/modules",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/containers",
];

fn components(p: &str) -> Vec<String> {
    Path::new(p)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// Whether `path` contains `rel` (a relative path like `.config/gcloud`) as consecutive
/// components, and where it ends: `Some(true)` when `rel` is the last part (the folder itself),
/// `Some(false)` when `path` is inside it.
fn contains_rel(path: &str, rel: &str) -> Option<bool> {
    let p = components(path);
    let r = components(rel);
    if r.is_empty() || p.len() < r.len() {
        return None;
    }
    let mut found = None;
    for i in 0..=(p.len() - r.len()) {
        if p[i..i + r.len()] == r[..] {
            found = Some(i + r.len() == p.len());
        }
    }
    found
}

fn same(a: &str, b: &Path) -> bool {
    components(a) == components(&b.to_string_lossy())
}

/// `a` is a strict ancestor of `b`.
fn ancestor_of(a: &str, b: &Path) -> bool {
    let ca = components(a);
    let cb = components(&b.to_string_lossy());
    ca.len() < cb.len() && cb[..ca.len()] == ca[..]
}

fn within(a: &str, b: &Path) -> bool {
    let ca = components(a);
    let cb = components(&b.to_string_lossy());
    ca.len() >= cb.len() && ca[..cb.len()] == cb[..]
}

fn looks_like_home(p: &str, ctx: &AuditContext) -> bool {
    if ctx.home.as_deref().is_some_and(|h| same(p, h)) {
        return true;
    }
    let c = components(p);
    c == ["root"] || (c.len() == 2 && (c[0] == "home" || c[0] == "Users"))
}

fn home_relative(p: &str, ctx: &AuditContext) -> Option<String> {
    let home = ctx.home.as_ref()?;
    let rel = Path::new(p).strip_prefix(home).ok()?;
    Some(rel.to_string_lossy().into_owned()).filter(|r| !r.is_empty())
}

fn matches_any(p: &str, list: &[&str]) -> Option<(String, bool)> {
    list.iter()
        .find_map(|rel| contains_rel(p, rel).map(|end| (rel.to_string(), end)))
}

fn mount_subject(m: &MountFact) -> String {
    let mode = if m.read_only { "ro" } else { "rw" };
    match m.kind {
        MountKind::Bind => format!(
            "bind {} -> {} ({mode})",
            m.source.as_deref().unwrap_or("?"),
            m.target
        ),
        MountKind::Volume => format!(
            "volume {} -> {} ({mode})",
            m.volume_name.as_deref().unwrap_or("(anonymous)"),
            m.target
        ),
        MountKind::Tmpfs => format!("tmpfs -> {} ({mode})", m.target),
        MountKind::Other => format!(
            "mount {} -> {} ({mode})",
            m.source.as_deref().unwrap_or("?"),
            m.target
        ),
    }
}

fn is_anonymous_volume(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

fn volume_owned(m: &MountFact) -> bool {
    m.volume_name
        .as_deref()
        .is_some_and(|n| n.starts_with(OWNED_VOLUME_PREFIX))
}

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

// ------------------------------------------------------------------------------------------
// The audit
// ------------------------------------------------------------------------------------------

/// Scores `facts` against the blueprint's eight controls. Pure: no I/O.
///
/// Rules per control are documented in spec-notes 0140-0147; in short a control scores the lowest
/// cap among its evidence (critical → 0, weak → 1, safe → 2).
pub fn audit(facts: &ContainerFacts, ctx: &AuditContext) -> AuditReport {
    let mut ctx = ctx.clone();
    if ctx.workspace.is_none() {
        ctx.workspace = facts
            .labels
            .as_ref()
            .and_then(|l| l.get(names::LOCAL_FOLDER_LABEL))
            .map(PathBuf::from);
    }
    let controls: Vec<ControlScore> = Control::ALL
        .iter()
        .map(|&control| {
            let mut evidence = match control {
                Control::RepoScope => repo_scope(facts, &ctx),
                Control::EngineSocket => engine_socket(facts, &ctx),
                Control::SecretBoundary => secret_boundary(facts, &ctx),
                Control::NetworkPolicy => network_policy(facts, &ctx),
                Control::CachePolicy => cache_policy(facts, &ctx),
                Control::BrowserIsolation => browser_isolation(facts, &ctx),
                Control::Reproducibility => reproducibility(facts, &ctx),
                Control::Teardown => teardown(facts, &ctx),
            };
            // Worst first, keeping the rules' order otherwise.
            evidence.sort_by_key(|e| e.risk);
            let score = evidence
                .iter()
                .map(|e| e.risk.cap())
                .min()
                .unwrap_or(CONTROL_MAX);
            ControlScore {
                control,
                title: control.title().to_string(),
                score,
                max: CONTROL_MAX,
                evidence,
            }
        })
        .collect();
    AuditReport {
        container: facts.name.clone().or_else(|| facts.id.clone()),
        source: facts.source,
        score: controls.iter().map(|c| c.score).sum(),
        max_score: MAX_SCORE,
        controls,
    }
}

/// Whether a bind mount (source `src`) is the workspace: inside the host workspace folder, or,
/// for probe facts (whose sources may be relative to a host file system), mounted at the
/// container workspace folder with a source the host workspace path ends with.
fn is_workspace_bind(f: &ContainerFacts, m: &MountFact, src: &str, ctx: &AuditContext) -> bool {
    let ws = ctx.workspace.as_deref();
    if ws.is_some_and(|w| within(src, w)) {
        return true;
    }
    let at_ws_target = ctx
        .container_workspace
        .as_deref()
        .is_some_and(|t| components(t) == components(&m.target));
    f.source != Some(FactsSource::Inspect)
        && at_ws_target
        && !components(src).is_empty()
        && ws.is_none_or(|w| {
            let (w, s) = (components(&w.to_string_lossy()), components(src));
            w.len() >= s.len() && w[w.len() - s.len()..] == s[..]
        })
}

fn repo_scope(f: &ContainerFacts, ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
    for m in &f.mounts {
        let subject = mount_subject(m);
        let Some(src) = m.source.as_deref().filter(|_| m.kind == MountKind::Bind) else {
            let detail = match m.kind {
                MountKind::Volume => "engine volume, not a host folder",
                MountKind::Tmpfs => "memory file system, not a host folder",
                _ => "not a host folder",
            };
            out.push(ev(subject, detail, Risk::Safe));
            continue;
        };
        let ws = ctx.workspace.as_deref();
        let is_socket = components(src)
            .last()
            .is_some_and(|n| ENGINE_SOCKET_NAMES.contains(&n.as_str()))
            || components(&m.target)
                .last()
                .is_some_and(|n| ENGINE_SOCKET_NAMES.contains(&n.as_str()));
        let (risk, detail) = if is_socket {
            (
                Risk::Safe,
                "an engine socket, not files to read: scored under engine socket".to_string(),
            )
        } else if components(src).is_empty() {
            (
                Risk::Critical,
                "the host's root file system: every host file is visible".to_string(),
            )
        } else if looks_like_home(src, ctx) {
            (
                Risk::Critical,
                "a host home folder: credentials, browser profiles, caches and every other repository are visible".to_string(),
            )
        } else if ctx.home.as_deref().is_some_and(|h| ancestor_of(src, h)) {
            (Risk::Critical, "contains the host home folder".to_string())
        } else if ws.is_some_and(|w| ancestor_of(src, w)) {
            (
                Risk::Critical,
                "a parent folder of the workspace: sibling repositories and files are visible"
                    .to_string(),
            )
        } else if is_workspace_bind(f, m, src, ctx) {
            (Risk::Safe, "the workspace folder".to_string())
        } else if ctx.git_dirs.iter().any(|g| within(src, g)) {
            (
                Risk::Safe,
                "the git directory of a workspace repository (git needs it in the worktree)"
                    .to_string(),
            )
        } else if BROAD_DIRS.iter().any(|b| same(src, Path::new(b))) {
            (Risk::Critical, "a broad host system folder".to_string())
        } else if ws.is_none() {
            (
                Risk::Weak,
                "host folder; no workspace known to compare it with".to_string(),
            )
        } else if let Some(rel) = home_relative(src, ctx) {
            (
                Risk::Weak,
                format!("extra host path from the home folder (`~/{rel}`) besides the workspace"),
            )
        } else {
            (
                Risk::Weak,
                "extra host path outside the workspace".to_string(),
            )
        };
        out.push(ev(subject, detail, risk));
    }
    if !f.mounts.iter().any(|m| m.kind == MountKind::Bind) {
        out.push(ev("host folders", "no host folder is mounted", Risk::Safe));
    }
    for w in &f.writable_paths {
        out.push(ev(
            format!("writable {w}"),
            "a process inside can write here (probe); not a host folder unless listed as a bind above",
            Risk::Safe,
        ));
    }
    out
}

fn engine_socket(f: &ContainerFacts, ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
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
    match f.privileged {
        Some(true) => out.push(ev(
            "privileged",
            "all capabilities, all host devices, no seccomp/AppArmor: host disks can be mounted",
            Risk::Critical,
        )),
        Some(false) => out.push(ev("privileged", "not privileged", Risk::Safe)),
        None => {}
    }
    if let Some(caps) = &f.capabilities {
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
    if f.device_requests {
        out.push(ev(
            "device requests",
            "host devices requested (e.g. GPUs)",
            Risk::Weak,
        ));
    }
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
    if !f.limits_known {
        out.push(ev(
            "resource limits",
            "not observable: cannot tell whether pids, memory and CPU are bounded",
            Risk::Weak,
        ));
    } else {
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
    for e in &f.env {
        if matches!(e.name.as_str(), "DOCKER_HOST" | "CONTAINER_HOST") {
            out.push(ev(
                format!("env {}", e.name),
                "points tools at an engine endpoint",
                Risk::Weak,
            ));
        }
    }
    if !socket_seen {
        out.push(ev(
            "engine sockets",
            "no Docker, Podman or containerd socket is mounted",
            Risk::Safe,
        ));
    }
    out
}

fn secret_boundary(f: &ContainerFacts, ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
    for e in &f.env {
        if e.token_value {
            out.push(ev(
                format!("env {}", e.name),
                "value looks like a long-lived token; it is stored in the container config (value not shown)",
                Risk::Critical,
            ));
        } else if e.credential_name {
            out.push(ev(
                format!("env {}", e.name),
                "name looks like a credential; it is stored in the container config where `docker inspect` shows it (value not shown)",
                Risk::Weak,
            ));
        }
    }
    for m in &f.mounts {
        let path_src = m.source.as_deref().filter(|_| m.kind == MountKind::Bind);
        if let Some(src) = path_src {
            if looks_like_home(src, ctx)
                || components(src).is_empty()
                || ctx.home.as_deref().is_some_and(|h| ancestor_of(src, h))
            {
                out.push(ev(
                    mount_subject(m),
                    "contains the host's credential folders (~/.ssh, ~/.aws, …)",
                    Risk::Critical,
                ));
                continue;
            }
            if is_workspace_bind(f, m, src, ctx) {
                continue;
            }
            if let Some((rel, _)) = matches_any(src, CREDENTIAL_DIRS) {
                out.push(ev(
                    mount_subject(m),
                    format!("host credential folder `{rel}`: long-lived host secrets"),
                    Risk::Critical,
                ));
                continue;
            }
            let name = components(src).last().cloned().unwrap_or_default();
            if name.contains("ssh-auth")
                || name == "S.gpg-agent"
                || (name.starts_with("agent.") && src.contains("ssh-"))
            {
                out.push(ev(
                    mount_subject(m),
                    "SSH or GPG agent socket: the host's keys can be used",
                    Risk::Critical,
                ));
                continue;
            }
            if CREDENTIAL_FILES.contains(&name.as_str()) {
                out.push(ev(
                    mount_subject(m),
                    format!("a credential file (`{name}`) from the host"),
                    Risk::Weak,
                ));
                continue;
            }
        }
        if m.kind == MountKind::Volume
            && let Some((rel, _)) = matches_any(&m.target, CREDENTIAL_DIRS)
        {
            out.push(ev(
                mount_subject(m),
                format!("volume holds `{rel}`: credentials persist across runs"),
                if volume_owned(m) {
                    Risk::Safe
                } else {
                    Risk::Weak
                },
            ));
        }
    }
    if !out.iter().any(|e| e.risk != Risk::Safe) {
        out.push(ev(
            "credentials",
            format!(
                "no credential-like variable {} and no credential folder mounted; secrets injected per exec are not part of the container",
                match f.env.len() {
                    0 => "(the container has no environment variables)".to_string(),
                    1 => "among its 1 environment variable".to_string(),
                    n => format!("among its {n} environment variables"),
                }
            ),
            Risk::Safe,
        ));
    }
    out
}

fn is_proxy_name(n: &str) -> bool {
    matches!(
        n.to_ascii_uppercase().as_str(),
        "HTTP_PROXY" | "HTTPS_PROXY" | "ALL_PROXY"
    )
}

fn network_policy(f: &ContainerFacts, ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
    let proxy: Vec<&str> = f
        .env
        .iter()
        .filter(|e| is_proxy_name(&e.name))
        .map(|e| e.name.as_str())
        .collect();
    let mode = f.network_mode.as_deref();
    match mode {
        Some("none") => out.push(ev(
            "network none",
            "no interface but loopback: default-deny",
            Risk::Safe,
        )),
        Some("host") => out.push(ev(
            "network host",
            "the host's network stack: every destination the host can reach, and host-local services",
            Risk::Critical,
        )),
        Some(m) if m.starts_with("container:") => out.push(ev(
            format!("network {m}"),
            "shares another container's network namespace, whose policy is not audited here",
            Risk::Critical,
        )),
        Some(m) => {
            let nets: Vec<&str> = if f.networks.is_empty() {
                vec![m]
            } else {
                f.networks.iter().map(String::as_str).collect()
            };
            let all_internal = !ctx.internal_networks.is_empty()
                && nets.iter().all(|n| ctx.internal_networks.iter().any(|i| i == n));
            if all_internal {
                out.push(ev(
                    format!("network {}", nets.join(",")),
                    "internal networks only: no route out; peers on those networks are reachable",
                    Risk::Safe,
                ));
            } else if !proxy.is_empty() {
                out.push(ev(
                    format!("network {}", nets.join(",")),
                    format!(
                        "outbound access through a proxy ({}); advisory only: processes may ignore it",
                        proxy.join(",")
                    ),
                    Risk::Weak,
                ));
            } else {
                let seen = f
                    .network_interfaces
                    .as_ref()
                    .map(|i| format!(" (interfaces: {})", i.join(",")))
                    .unwrap_or_default();
                out.push(ev(
                    format!("network {}", nets.join(",")),
                    format!("unrestricted egress: any destination the host can reach{seen}"),
                    Risk::Critical,
                ));
            }
        }
        None => out.push(ev("network", "not observable", Risk::Weak)),
    }
    match &f.ports {
        Some(ports) => {
            for p in ports {
                let all = matches!(p.host_ip.as_str(), "" | "0.0.0.0" | "::" | "[::]");
                out.push(ev(
                    format!(
                        "port {}:{} -> {}",
                        if p.host_ip.is_empty() {
                            "0.0.0.0"
                        } else {
                            &p.host_ip
                        },
                        p.host_port,
                        p.container_port
                    ),
                    if all {
                        "published on all interfaces: reachable from other machines"
                    } else {
                        "published on one host address"
                    },
                    if all { Risk::Weak } else { Risk::Safe },
                ));
            }
            if f.publish_all_ports {
                out.push(ev(
                    "publish-all",
                    "every exposed port is published on all interfaces",
                    Risk::Weak,
                ));
            }
        }
        None => out.push(ev(
            "ports",
            "published ports are not observable from inside",
            Risk::Safe,
        )),
    }
    out
}

fn cache_policy(f: &ContainerFacts, ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
    for m in &f.mounts {
        match m.kind {
            MountKind::Bind => {
                let Some(src) = m.source.as_deref() else {
                    continue;
                };
                if looks_like_home(src, ctx)
                    || components(src).is_empty()
                    || ctx.home.as_deref().is_some_and(|h| ancestor_of(src, h))
                {
                    out.push(ev(
                        mount_subject(m),
                        "contains the host's package caches (~/.cache, ~/.npm, ~/.cargo, …)",
                        if m.read_only {
                            Risk::Weak
                        } else {
                            Risk::Critical
                        },
                    ));
                } else if is_workspace_bind(f, m, src, ctx) {
                    continue;
                } else if let Some((rel, _)) = matches_any(src, CACHE_DIRS) {
                    if m.read_only {
                        out.push(ev(
                            mount_subject(m),
                            format!(
                                "host cache `{rel}` shared read-only: readable, not poisonable"
                            ),
                            Risk::Weak,
                        ));
                    } else {
                        out.push(ev(
                            mount_subject(m),
                            format!("host cache `{rel}` shared writable: one run can poison the next, and the host"),
                            Risk::Critical,
                        ));
                    }
                }
            }
            MountKind::Volume => {
                let cacheish = matches_any(&m.target, CACHE_DIRS).is_some()
                    || m.volume_name
                        .as_deref()
                        .is_some_and(|n| n.to_ascii_lowercase().contains("cache"));
                if cacheish {
                    if volume_owned(m) {
                        out.push(ev(
                            mount_subject(m),
                            "devcell-owned cache volume, removed by `devcell delete`",
                            Risk::Safe,
                        ));
                    } else {
                        out.push(ev(
                            mount_subject(m),
                            "shared cache volume reused across runs without an owner",
                            Risk::Weak,
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    if out.is_empty() {
        out.push(ev(
            "caches",
            "no host or shared package cache is mounted",
            Risk::Safe,
        ));
    }
    out
}

fn browser_isolation(f: &ContainerFacts, ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
    for m in &f.mounts {
        if m.kind == MountKind::Bind {
            let Some(src) = m.source.as_deref() else {
                continue;
            };
            if looks_like_home(src, ctx)
                || components(src).is_empty()
                || ctx.home.as_deref().is_some_and(|h| ancestor_of(src, h))
            {
                out.push(ev(
                    mount_subject(m),
                    "contains the host's browser profiles (cookies, saved passwords, sessions)",
                    Risk::Critical,
                ));
            } else if is_workspace_bind(f, m, src, ctx) {
                continue;
            } else if let Some((rel, _)) = matches_any(src, BROWSER_DIRS) {
                out.push(ev(
                    mount_subject(m),
                    format!("personal browser profile `{rel}`"),
                    Risk::Critical,
                ));
            } else if contains_rel(src, ".X11-unix").is_some()
                || components(src)
                    .last()
                    .is_some_and(|n| n.starts_with("wayland-"))
            {
                out.push(ev(
                    mount_subject(m),
                    "host display socket: the agent can drive host windows, including the personal browser",
                    Risk::Critical,
                ));
            }
        } else if m.kind == MountKind::Volume && matches_any(&m.target, BROWSER_DIRS).is_some() {
            out.push(ev(
                mount_subject(m),
                if volume_owned(m) {
                    "dedicated devcell-owned profile, removed by `devcell delete`"
                } else {
                    "dedicated profile reused indefinitely"
                },
                if volume_owned(m) {
                    Risk::Safe
                } else {
                    Risk::Weak
                },
            ));
        }
    }
    for s in &f.sockets {
        if contains_rel(s, ".X11-unix").is_some() {
            out.push(ev(
                format!("socket {s}"),
                "host display socket reachable from inside",
                Risk::Critical,
            ));
        }
    }
    if out.is_empty() {
        out.push(ev(
            "browser profiles",
            "no host browser profile or display socket is mounted",
            Risk::Safe,
        ));
    }
    out
}

fn reproducibility(f: &ContainerFacts, ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
    match f.image.as_deref() {
        Some(image) => {
            let base = f
                .labels
                .as_ref()
                .and_then(|l| l.get(BASE_IMAGE_LABEL))
                .map(String::as_str);
            if is_digest_pinned(image) {
                out.push(ev(format!("image {image}"), "pinned by digest", Risk::Safe));
            } else if let Some(b) = base.filter(|b| is_digest_pinned(b)) {
                out.push(base_evidence(image, b, f));
            } else if is_image_id(image) {
                out.push(ev(
                    format!("image {image}"),
                    "a local image ID: exact on this engine, but another machine cannot pull it; pin a registry digest (`<image>@sha256:…`)",
                    Risk::Weak,
                ));
            } else if let Some(d) = f.image_repo_digests.first() {
                out.push(ev(
                    format!("image {image}"),
                    format!("named by tag; the image has registry digest `{d}`, but a re-pull of the tag can drift; pin it as `{d}`"),
                    Risk::Weak,
                ));
            } else if f
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(names::METADATA_LABEL))
            {
                out.push(ev(
                    format!("image {image}"),
                    "built from a devcontainer configuration, base not pinned by digest: rebuilds can drift",
                    Risk::Weak,
                ));
            } else {
                out.push(ev(
                    format!("image {image}"),
                    "a tag with no registry digest and no recorded recipe: a pet image",
                    Risk::Critical,
                ));
            }
        }
        None => out.push(ev(
            "image",
            "image identity is not observable from inside",
            Risk::Weak,
        )),
    }
    match f.feature_ids() {
        Some(ids) if ids.is_empty() => {
            out.push(ev("Features", "none installed", Risk::Safe));
        }
        Some(ids) if ids.iter().all(|id| is_local_feature(id)) => {
            out.push(ev(
                format!("Features {}", ids.join(",")),
                "local Features: in the configuration's folder, versioned with it (nothing to lock)",
                Risk::Safe,
            ));
        }
        Some(ids) => {
            let subject = format!("Features {}", ids.join(","));
            match ctx.features_lockfile {
                Some(true) => out.push(lock_evidence(subject, &ids, f, ctx)),
                Some(false) => out.push(ev(
                    subject,
                    "no devcontainer-lock.json: Feature versions can drift",
                    Risk::Weak,
                )),
                None => out.push(ev(subject, "lockfile not checked", Risk::Weak)),
            }
        }
        None => out.push(ev("Features", "not observable from inside", Risk::Weak)),
    }
    match f.read_only_rootfs {
        Some(true) => out.push(ev(
            "root file system",
            "read-only: the container cannot drift from its image",
            Risk::Safe,
        )),
        Some(false) => out.push(ev(
            "root file system",
            "writable: state can drift from the image (a pet container)",
            Risk::Weak,
        )),
        None => out.push(ev("root file system", "not observable", Risk::Weak)),
    }
    out
}

/// The evidence for Features when a lockfile exists: "locked" only when every non-local Feature
/// the container's metadata label lists was installed (its [`FEATURE_DIGESTS_LABEL`]) at the
/// digest the lockfile holds for it (spec-note 0281).
fn lock_evidence(
    subject: String,
    ids: &[String],
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Evidence {
    let Some(locked) = &ctx.locked_features else {
        return ev(
            subject,
            "devcontainer-lock.json is not a valid lockfile: Feature versions can drift",
            Risk::Weak,
        );
    };
    let Some(installed) = f.labels.as_ref().and_then(feature_digests) else {
        return ev(
            subject,
            "devcontainer-lock.json exists, but the container does not record the digests its Features were installed at (not created by `devcell up`/`handoff`): whether they match the lockfile cannot be checked",
            Risk::Weak,
        );
    };
    let mut problems = Vec::new();
    let mut matched = 0;
    for id in ids.iter().filter(|id| !is_local_feature(id)) {
        let key = crate::features::FeatureRef::parse(id)
            .map(|r| r.lock_key())
            .unwrap_or_else(|_| id.to_ascii_lowercase());
        match (installed.get(&key), locked.get(&key)) {
            (Some(i), Some(l)) if i == l => matched += 1,
            (Some(i), Some(l)) => {
                problems.push(format!("`{id}` installed at `{i}`, locked to `{l}`"))
            }
            (_, None) => problems.push(format!("`{id}` is not in devcontainer-lock.json")),
            (None, Some(_)) => problems.push(format!("`{id}`: installed digest not recorded")),
        }
    }
    if problems.is_empty() {
        ev(
            subject,
            format!(
                "locked by devcontainer-lock.json: the {matched} installed Feature digest(s) match it"
            ),
            Risk::Safe,
        )
    } else {
        ev(
            subject,
            format!(
                "the container does not match devcontainer-lock.json ({}): recreate it (`devcell up --remove-existing-container`)",
                problems.join("; ")
            ),
            Risk::Weak,
        )
    }
}

/// The evidence for an image devcell layered on the digest-pinned base `base`: safe only when
/// the base is present and its layers are the first layers of the image (the label's claim is
/// checked, not trusted).
fn base_evidence(image: &str, base: &str, f: &ContainerFacts) -> Evidence {
    let subject = format!("image {image}");
    match &f.base_image_layers {
        Some(layers) if !f.image_layers.is_empty() && f.image_layers.starts_with(layers) => ev(
            subject,
            format!(
                "built locally on base `{base}` pinned by digest (its {} layer(s) are the image's first)",
                layers.len()
            ),
            Risk::Safe,
        ),
        Some(_) if !f.image_layers.is_empty() => ev(
            subject,
            format!(
                "label `{BASE_IMAGE_LABEL}` claims base `{base}`, but the image is not built on that base's layers"
            ),
            Risk::Critical,
        ),
        _ => ev(
            subject,
            format!(
                "label `{BASE_IMAGE_LABEL}` names base `{base}`, which is not on this engine: the claim cannot be checked"
            ),
            Risk::Weak,
        ),
    }
}

/// A Feature referenced by a relative path (`./name`, `../name`): part of the configuration.
fn is_local_feature(id: &str) -> bool {
    id.starts_with("./") || id.starts_with("../")
}

fn teardown(f: &ContainerFacts, _ctx: &AuditContext) -> Vec<Evidence> {
    let mut out = Vec::new();
    let labelled = f.labels.as_ref().map(|l| l.get(names::LOCAL_FOLDER_LABEL));
    let foreign: Vec<&MountFact> = f
        .mounts
        .iter()
        .filter(|m| {
            m.kind == MountKind::Volume
                && !volume_owned(m)
                && m.volume_name
                    .as_deref()
                    .is_none_or(|n| !is_anonymous_volume(n))
        })
        .collect();
    match labelled {
        None => out.push(ev(
            "labels",
            "not observable from inside: cannot tell whether `devcell delete` finds everything",
            Risk::Weak,
        )),
        Some(Some(folder)) => out.push(ev(
            format!("label {}", names::LOCAL_FOLDER_LABEL),
            format!("labelled for workspace `{folder}`: `devcell delete` finds the container and its volumes"),
            Risk::Safe,
        )),
        Some(None) => out.push(ev(
            "labels",
            format!(
                "no `{}` label: no tool knows this container belongs to a workspace; cleanup is manual",
                names::LOCAL_FOLDER_LABEL
            ),
            if foreign.is_empty() { Risk::Weak } else { Risk::Critical },
        )),
    }
    for m in &f.mounts {
        if m.kind != MountKind::Volume {
            continue;
        }
        let (detail, risk) = if volume_owned(m) {
            (
                "devcell-owned volume, removed by `devcell delete`",
                Risk::Safe,
            )
        } else if m.volume_name.as_deref().is_some_and(is_anonymous_volume) {
            (
                "anonymous volume, removed with the container (`rm -v`)",
                Risk::Safe,
            )
        } else if m.volume_name.is_none() {
            (
                "volume of unknown name: may outlive the container",
                Risk::Weak,
            )
        } else {
            (
                "named volume not owned by devcell: outlives the container",
                Risk::Weak,
            )
        };
        out.push(ev(mount_subject(m), detail, risk));
    }
    if f.auto_remove {
        out.push(ev(
            "auto-remove",
            "the engine removes the container when it stops",
            Risk::Safe,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A hardened container as `docker inspect` prints it.
    fn hardened() -> Value {
        json!([{
            "Id": "abc123",
            "Name": "/hardened",
            "Image": "sha256:feed",
            "AppArmorProfile": "",
            "HostConfig": {
                "NetworkMode": "none",
                "PortBindings": {},
                "CapAdd": null,
                "CapDrop": ["ALL"],
                "IpcMode": "private",
                "PidMode": "",
                "UTSMode": "",
                "Privileged": false,
                "PublishAllPorts": false,
                "ReadonlyRootfs": true,
                "SecurityOpt": ["no-new-privileges"],
                "Tmpfs": {"/tmp": ""},
                "Memory": 536870912,
                "NanoCpus": 1000000000,
                "PidsLimit": 256,
                "Devices": [],
                "DeviceRequests": null,
                "AutoRemove": false
            },
            "Mounts": [{
                "Type": "bind", "Source": "/home/me/work/repo", "Destination": "/workspace",
                "Mode": "", "RW": true, "Propagation": "rprivate"
            }],
            "Config": {
                "User": "65534:65534",
                "Env": ["PATH=/usr/bin:/bin"],
                "Image": "registry.example/img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "Labels": {"devcontainer.local_folder": "/home/me/work/repo"}
            },
            "NetworkSettings": {"Networks": {"none": {}}}
        }])
    }

    fn ctx() -> AuditContext {
        AuditContext {
            workspace: Some("/home/me/work/repo".into()),
            container_workspace: Some("/workspace".into()),
            home: Some("/home/me".into()),
            xdg_runtime_dir: Some("/run/user/1000".into()),
            features_lockfile: Some(true),
            locked_features: Some(BTreeMap::from([(
                "ghcr.io/devcontainers/features/node:1".to_string(),
                format!("sha256:{}", "a".repeat(64)),
            )])),
            internal_networks: Vec::new(),
            git_dirs: Vec::new(),
        }
    }

    fn with(f: impl FnOnce(&mut Value)) -> AuditReport {
        let mut v = hardened();
        f(&mut v[0]);
        audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &ctx())
    }

    fn add_mount(v: &mut Value, ty: &str, src: &str, dst: &str, rw: bool) {
        let key = if ty == "volume" { "Name" } else { "Source" };
        v["Mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"Type": ty, key: src, "Destination": dst, "RW": rw}));
    }

    fn scores(r: &AuditReport) -> Vec<u8> {
        r.controls.iter().map(|c| c.score).collect()
    }

    fn has_detail(r: &AuditReport, c: Control, detail: &str, risk: Risk) -> bool {
        r.control(c)
            .unwrap()
            .evidence
            .iter()
            .any(|e| e.detail.contains(detail) && e.risk == risk)
    }

    fn has(r: &AuditReport, c: Control, subject: &str, risk: Risk) -> bool {
        r.control(c)
            .unwrap()
            .evidence
            .iter()
            .any(|e| e.subject.contains(subject) && e.risk == risk)
    }

    #[test]
    fn hardened_container_scores_sixteen() {
        let r = with(|_| {});
        assert_eq!(scores(&r), vec![2; 8], "{}", r.render_table());
        assert_eq!(r.score, 16);
        assert!(r.passes(16));
        assert!(!with(|v| v["HostConfig"]["Privileged"] = json!(true)).passes(16));
        assert!(r.controls.iter().all(|c| !c.evidence.is_empty()));
    }

    #[test]
    fn inspect_input_must_be_one_container() {
        assert!(matches!(
            ContainerFacts::from_docker_inspect(&json!([])),
            Err(AuditError::NotAContainer { .. })
        ));
        assert!(ContainerFacts::from_docker_inspect(&json!("x")).is_err());
        assert!(ContainerFacts::from_docker_inspect(&json!({"a": 1})).is_err());
        // A bare object is accepted.
        assert!(ContainerFacts::from_docker_inspect(&hardened()[0]).is_ok());
    }

    #[test]
    fn engine_sockets_are_critical_by_source_target_and_parent() {
        for (src, dst) in [
            ("/var/run/docker.sock", "/var/run/docker.sock"),
            ("/tmp/x/docker.sock", "/run/d"),
            ("/tmp/x/fake", "/var/run/docker.sock"),
            ("/run/podman/podman.sock", "/p"),
            ("/run/user/1000/podman/podman.sock", "/p"),
            ("/run/containerd/containerd.sock", "/c"),
            ("/var/run", "/host-run"),
            ("/run/user/1000", "/xdg"),
        ] {
            let r = with(|v| add_mount(v, "bind", src, dst, true));
            assert_eq!(r.score_of(Control::EngineSocket), 0, "{src} -> {dst}");
            assert!(has(&r, Control::EngineSocket, src, Risk::Critical));
        }
    }

    #[test]
    fn host_home_and_parents_are_critical_for_repo_secret_cache_browser() {
        for src in ["/home/me", "/home/me/work", "/", "/home", "/root"] {
            let r = with(|v| add_mount(v, "bind", src, "/h", false));
            assert_eq!(r.score_of(Control::RepoScope), 0, "{src}");
            assert!(has(&r, Control::RepoScope, src, Risk::Critical));
            if src != "/home/me/work" {
                assert_eq!(r.score_of(Control::SecretBoundary), 0, "{src}");
                assert_eq!(r.score_of(Control::BrowserIsolation), 0, "{src}");
                // Read-only: readable but not poisonable caches.
                assert_eq!(r.score_of(Control::CachePolicy), 1, "{src}");
            }
        }
        let r = with(|v| add_mount(v, "bind", "/home/me/work", "/w", true));
        assert!(
            r.control(Control::RepoScope).unwrap().evidence[0]
                .detail
                .contains("parent folder of the workspace")
        );
    }

    #[test]
    fn extra_paths_are_weak_and_subfolders_of_the_workspace_safe() {
        let r = with(|v| add_mount(v, "bind", "/home/me/notes", "/notes", true));
        assert_eq!(r.score_of(Control::RepoScope), 1);
        assert!(has(&r, Control::RepoScope, "/home/me/notes", Risk::Weak));
        let r = with(|v| add_mount(v, "bind", "/home/me/work/repo/sub", "/sub", true));
        assert_eq!(r.score_of(Control::RepoScope), 2);
        // `/etc` is host files (a broad host folder), not the kernel's or the engine's state:
        // scored under repo scope only, read-only or not
        for read_only in [false, true] {
            let r = with(|v| add_mount(v, "bind", "/etc", "/hostetc", read_only));
            assert_eq!(r.score_of(Control::RepoScope), 0, "{read_only}");
            assert!(has(&r, Control::RepoScope, "/etc", Risk::Critical));
            assert_eq!(r.score_of(Control::EngineSocket), 2, "{read_only}");
        }
        let r = with(|v| add_mount(v, "bind", "/etc/localtime", "/etc/localtime", false));
        assert_eq!(r.score_of(Control::EngineSocket), 2);
        assert_eq!(r.score_of(Control::RepoScope), 1);
        let r = with(|v| add_mount(v, "bind", "/var/lib/docker/volumes", "/v", true));
        assert_eq!(r.score_of(Control::EngineSocket), 0);
    }

    #[test]
    fn git_dirs_of_the_workspace_are_not_extra_paths() {
        let mount = |v: &mut Value| {
            add_mount(
                v,
                "bind",
                "/home/me/src/api/.git",
                "/home/me/src/api/.git",
                true,
            );
            add_mount(
                v,
                "bind",
                "/home/me/src/api/.git/config",
                "/home/me/src/api/.git/config",
                false,
            );
        };
        let mut v = hardened();
        mount(&mut v[0]);
        let facts = ContainerFacts::from_docker_inspect(&v).unwrap();
        assert_eq!(audit(&facts, &ctx()).score_of(Control::RepoScope), 1);
        let mut known = ctx();
        known.git_dirs = vec!["/home/me/src/api/.git".into()];
        let r = audit(&facts, &known);
        assert_eq!(r.score_of(Control::RepoScope), 2);
        assert_eq!(r.score, MAX_SCORE);
        assert!(has(
            &r,
            Control::RepoScope,
            "/home/me/src/api/.git",
            Risk::Safe
        ));
        // a git dir does not excuse its parent
        let mut v = hardened();
        add_mount(&mut v[0], "bind", "/home/me/src/api", "/api", true);
        let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &known);
        assert_eq!(r.score_of(Control::RepoScope), 1);
    }

    #[test]
    fn credential_folders_are_critical_and_credential_files_weak() {
        for rel in [
            ".ssh",
            ".aws",
            ".config/gcloud",
            ".kube",
            ".docker",
            ".gnupg",
        ] {
            let src = format!("/home/me/{rel}");
            let r = with(|v| add_mount(v, "bind", &src, "/c", false));
            assert_eq!(r.score_of(Control::SecretBoundary), 0, "{rel}");
            assert!(has(&r, Control::SecretBoundary, &src, Risk::Critical));
            assert_eq!(r.score_of(Control::RepoScope), 1, "{rel}");
        }
        let r = with(|v| add_mount(v, "bind", "/home/me/.codex/auth.json", "/a", false));
        assert_eq!(r.score_of(Control::SecretBoundary), 1);
        let r = with(|v| add_mount(v, "bind", "/tmp/ssh-XYZ/agent.123", "/ssh", false));
        assert_eq!(r.score_of(Control::SecretBoundary), 0);
    }

    #[test]
    fn privileged_caps_and_namespaces() {
        let r = with(|v| v["HostConfig"]["Privileged"] = json!(true));
        assert_eq!(r.score_of(Control::EngineSocket), 0);
        assert!(has(&r, Control::EngineSocket, "privileged", Risk::Critical));
        assert_eq!(r.score, 14);

        let r = with(|v| v["HostConfig"]["CapAdd"] = json!(["SYS_ADMIN"]));
        assert!(has(&r, Control::EngineSocket, "SYS_ADMIN", Risk::Critical));
        assert_eq!(r.score, 14);
        let r = with(|v| v["HostConfig"]["CapAdd"] = json!(["CAP_NET_ADMIN"]));
        assert_eq!(r.score_of(Control::EngineSocket), 1);
        let r = with(|v| v["HostConfig"]["CapDrop"] = json!(null));
        assert!(has(&r, Control::EngineSocket, "CHOWN", Risk::Weak));

        let r = with(|v| v["HostConfig"]["PidMode"] = json!("host"));
        assert!(has(
            &r,
            Control::EngineSocket,
            "pid namespace host",
            Risk::Critical
        ));
        assert_eq!(r.score, 14);
        for key in ["IpcMode", "UTSMode"] {
            let r = with(|v| v["HostConfig"][key] = json!("host"));
            assert_eq!(r.score_of(Control::EngineSocket), 1, "{key}");
        }
    }

    #[test]
    fn hardening_options_each_cost_a_point() {
        type Case = (&'static str, Box<dyn Fn(&mut Value)>);
        let cases: Vec<Case> = vec![
            (
                "no-new-privileges",
                Box::new(|v| v["HostConfig"]["SecurityOpt"] = json!([])),
            ),
            (
                "seccomp",
                Box::new(|v| {
                    v["HostConfig"]["SecurityOpt"] =
                        json!(["no-new-privileges", "seccomp=unconfined"])
                }),
            ),
            (
                "apparmor",
                Box::new(|v| {
                    v["HostConfig"]["SecurityOpt"] =
                        json!(["no-new-privileges:true", "apparmor=unconfined"])
                }),
            ),
            ("user", Box::new(|v| v["Config"]["User"] = json!(""))),
            (
                "pids limit",
                Box::new(|v| v["HostConfig"]["PidsLimit"] = json!(-1)),
            ),
            (
                "memory limit",
                Box::new(|v| v["HostConfig"]["Memory"] = json!(0)),
            ),
            (
                "cpu limit",
                Box::new(|v| v["HostConfig"]["NanoCpus"] = json!(0)),
            ),
            (
                "device /dev/snd",
                Box::new(|v| {
                    v["HostConfig"]["Devices"] =
                        json!([{"PathOnHost": "/dev/snd", "PathInContainer": "/dev/snd"}])
                }),
            ),
        ];
        for (subject, f) in cases {
            let r = with(|v| f(v));
            assert_eq!(r.score_of(Control::EngineSocket), 1, "{subject}");
            assert!(
                has(&r, Control::EngineSocket, subject, Risk::Weak),
                "{subject}"
            );
            assert_eq!(r.score, 15, "{subject}");
        }
        let r = with(|v| {
            v["HostConfig"]["Devices"] =
                json!([{"PathOnHost": "/dev/sda", "PathInContainer": "/dev/sda"}])
        });
        assert_eq!(r.score_of(Control::EngineSocket), 0);
        let r = with(|v| v["HostConfig"]["ReadonlyRootfs"] = json!(false));
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        assert!(has(
            &r,
            Control::Reproducibility,
            "root file system",
            Risk::Weak
        ));
    }

    #[test]
    fn secret_env_names_and_values_never_leak() {
        let value = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let r = with(|v| {
            v["Config"]["Env"] = json!([
                format!("GITHUB_TOKEN={value}"),
                "DB_PASSWORD=hunter2hunter2",
                "GIT_AUTHOR_NAME=me",
                "PWD=/x",
                "GPG_KEY=ABCDEF"
            ])
        });
        assert_eq!(r.score_of(Control::SecretBoundary), 0);
        assert!(has(
            &r,
            Control::SecretBoundary,
            "env GITHUB_TOKEN",
            Risk::Critical
        ));
        assert!(has(
            &r,
            Control::SecretBoundary,
            "env DB_PASSWORD",
            Risk::Weak
        ));
        assert!(!has(
            &r,
            Control::SecretBoundary,
            "GIT_AUTHOR_NAME",
            Risk::Weak
        ));
        assert!(!has(&r, Control::SecretBoundary, "PWD", Risk::Weak));
        assert!(!has(&r, Control::SecretBoundary, "GPG_KEY", Risk::Weak));
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains(value) && !json.contains("hunter2"));
        assert!(!r.render_table().contains(value) && !r.render_table().contains("hunter2"));
        let r = with(|v| v["Config"]["Env"] = json!(["NPM_TOKEN=short"]));
        assert_eq!(r.score_of(Control::SecretBoundary), 1);
    }

    #[test]
    fn credential_names() {
        for n in [
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "DB_PASSWD",
            "NPM_AUTH",
            "BASICAUTH",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SSH_AUTH_SOCK",
            "GH_PAT",
        ] {
            assert!(is_credential_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "GIT_AUTHOR_EMAIL",
            "PWD",
            "GPG_KEY",
            "LANG",
            "AUTHOR",
        ] {
            assert!(!is_credential_name(n), "{n}");
        }
        assert!(looks_like_token("AKIAABCDEFGHIJKLMNOP"));
        assert!(!looks_like_token("sk-short"));
        assert!(!looks_like_token("/usr/bin"));
    }

    #[test]
    fn network_modes_and_ports() {
        let r = with(|v| {
            v["HostConfig"]["NetworkMode"] = json!("bridge");
            v["NetworkSettings"]["Networks"] = json!({"bridge": {}});
        });
        assert_eq!(r.score_of(Control::NetworkPolicy), 0);
        assert!(has(
            &r,
            Control::NetworkPolicy,
            "network bridge",
            Risk::Critical
        ));
        let r = with(|v| {
            v["HostConfig"]["NetworkMode"] = json!("default");
            v["NetworkSettings"]["Networks"] = json!({"bridge": {}});
            v["Config"]["Env"] = json!(["HTTPS_PROXY=http://proxy:3128"]);
        });
        assert_eq!(r.score_of(Control::NetworkPolicy), 1);
        let r = with(|v| v["HostConfig"]["NetworkMode"] = json!("host"));
        assert_eq!(r.score_of(Control::NetworkPolicy), 0);
        assert_eq!(r.score_of(Control::EngineSocket), 1);
        let mut c = ctx();
        c.internal_networks = vec!["sealed".into()];
        let mut v = hardened();
        v[0]["HostConfig"]["NetworkMode"] = json!("sealed");
        v[0]["NetworkSettings"]["Networks"] = json!({"sealed": {}});
        v[0]["HostConfig"]["PortBindings"] = json!({"80/tcp": [{"HostIp": "", "HostPort": "8080"}], "81/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8081"}]});
        let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
        assert_eq!(r.score_of(Control::NetworkPolicy), 1);
        assert!(has(
            &r,
            Control::NetworkPolicy,
            "port 0.0.0.0:8080",
            Risk::Weak
        ));
        assert!(has(
            &r,
            Control::NetworkPolicy,
            "port 127.0.0.1:8081",
            Risk::Safe
        ));
    }

    #[test]
    fn caches_and_browser_profiles() {
        let r = with(|v| add_mount(v, "bind", "/home/me/.cache/pip", "/root/.cache/pip", true));
        assert_eq!(r.score_of(Control::CachePolicy), 0);
        let r = with(|v| add_mount(v, "bind", "/home/me/.npm", "/n", false));
        assert_eq!(r.score_of(Control::CachePolicy), 1);
        let r = with(|v| add_mount(v, "volume", "npm-cache", "/home/node/.npm", true));
        assert_eq!(r.score_of(Control::CachePolicy), 1);
        assert_eq!(r.score_of(Control::Teardown), 1);
        let r = with(|v| add_mount(v, "volume", "devcell-abc-npm", "/home/node/.npm", true));
        assert_eq!(r.score_of(Control::CachePolicy), 2);
        assert_eq!(r.score_of(Control::Teardown), 2);

        let r = with(|v| add_mount(v, "bind", "/home/me/.config/google-chrome", "/p", false));
        assert_eq!(r.score_of(Control::BrowserIsolation), 0);
        let r = with(|v| add_mount(v, "bind", "/home/me/.mozilla/firefox", "/p", false));
        assert_eq!(r.score_of(Control::BrowserIsolation), 0);
        let r = with(|v| add_mount(v, "bind", "/tmp/.X11-unix", "/tmp/.X11-unix", false));
        assert_eq!(r.score_of(Control::BrowserIsolation), 0);
        let r = with(|v| add_mount(v, "volume", "profile", "/home/a/.config/chromium", true));
        assert_eq!(r.score_of(Control::BrowserIsolation), 1);
    }

    #[test]
    fn reproducibility_rules() {
        let tag = |v: &mut Value| v["Config"]["Image"] = json!("busybox:latest");
        assert_eq!(with(tag).score_of(Control::Reproducibility), 0);
        let mut v = hardened();
        tag(&mut v[0]);
        let f = ContainerFacts::from_docker_inspect(&v)
            .unwrap()
            .with_image_inspect(&json!([{"RepoDigests": ["busybox@sha256:aa"]}]));
        assert_eq!(audit(&f, &ctx()).score_of(Control::Reproducibility), 1);
        let meta = r#"[{"id":"ghcr.io/devcontainers/features/node:1"},{"remoteUser":"node"}]"#;
        // A lockfile exists, but the container records no digests: not "locked".
        let r = with(|v| v["Config"]["Labels"][names::METADATA_LABEL] = json!(meta));
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        assert!(has_detail(
            &r,
            Control::Reproducibility,
            "cannot be checked",
            Risk::Weak
        ));
        // Installed at the locked digest: locked.
        let digests = |d: char| {
            json!(format!(
                r#"{{"ghcr.io/devcontainers/features/node:1":"sha256:{}"}}"#,
                d.to_string().repeat(64)
            ))
        };
        let r = with(|v| {
            v["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
            v["Config"]["Labels"][FEATURE_DIGESTS_LABEL] = digests('a');
        });
        assert_eq!(r.score_of(Control::Reproducibility), 2);
        assert!(has_detail(
            &r,
            Control::Reproducibility,
            "digest(s) match",
            Risk::Safe
        ));
        // Installed at another digest: not locked, and both digests are named.
        let r = with(|v| {
            v["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
            v["Config"]["Labels"][FEATURE_DIGESTS_LABEL] = digests('b');
        });
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            text.contains(&"a".repeat(64)) && text.contains(&"b".repeat(64)),
            "{text}"
        );
        // A Feature the lockfile does not hold.
        let mut c = ctx();
        c.locked_features = Some(BTreeMap::new());
        let mut v = hardened();
        v[0]["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
        v[0]["Config"]["Labels"][FEATURE_DIGESTS_LABEL] = digests('a');
        let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        assert!(has_detail(
            &r,
            Control::Reproducibility,
            "not in devcontainer-lock.json",
            Risk::Weak
        ));
        let mut c = ctx();
        c.features_lockfile = Some(false);
        let mut v = hardened();
        v[0]["Config"]["Labels"][names::METADATA_LABEL] = json!(meta);
        let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        assert!(has(&r, Control::Reproducibility, "node:1", Risk::Weak));
        // local Features are part of the configuration: nothing to lock
        let mut v = hardened();
        v[0]["Config"]["Labels"][names::METADATA_LABEL] = json!(r#"[{"id":"./probe"},{}]"#);
        let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
        assert_eq!(r.score_of(Control::Reproducibility), 2);
        assert!(has(&r, Control::Reproducibility, "./probe", Risk::Safe));
    }

    #[test]
    fn reproducibility_checks_a_recorded_base_against_the_layers() {
        let base = format!("registry.example/base@sha256:{}", "b".repeat(64));
        let built = |v: &mut Value| {
            v["Config"]["Image"] = json!("devcell/features:123");
            v["Config"]["Labels"][names::METADATA_LABEL] = json!(r#"[{"id":"./probe"},{}]"#);
            v["Config"]["Labels"][BASE_IMAGE_LABEL] = json!(base.as_str());
        };
        let facts = || {
            let mut v = hardened();
            built(&mut v[0]);
            ContainerFacts::from_docker_inspect(&v)
                .unwrap()
                .with_image_inspect(
                    &json!([{"RootFS": {"Layers": ["sha256:l1", "sha256:l2", "sha256:f1"]}}]),
                )
        };
        assert_eq!(facts().pinned_base_label(), Some(base.as_str()));
        // verified: the base's layers are the image's first
        let ok = facts()
            .with_base_image_inspect(&json!([{"RootFS": {"Layers": ["sha256:l1", "sha256:l2"]}}]));
        let r = audit(&ok, &ctx());
        assert_eq!(
            r.score_of(Control::Reproducibility),
            2,
            "{}",
            r.render_table()
        );
        assert!(has(
            &r,
            Control::Reproducibility,
            "features:123",
            Risk::Safe
        ));
        // a false claim
        let lie = facts().with_base_image_inspect(&json!([{"RootFS": {"Layers": ["sha256:zz"]}}]));
        let r = audit(&lie, &ctx());
        assert_eq!(r.score_of(Control::Reproducibility), 0);
        // the base is not on this engine: cannot be checked
        let r = audit(&facts(), &ctx());
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        // a base label that is only a tag is not a pin
        let mut v = hardened();
        built(&mut v[0]);
        v[0]["Config"]["Labels"][BASE_IMAGE_LABEL] = json!("registry.example/base:1");
        let f = ContainerFacts::from_docker_inspect(&v).unwrap();
        assert_eq!(f.pinned_base_label(), None);
        assert_eq!(audit(&f, &ctx()).score_of(Control::Reproducibility), 1);
    }

    #[test]
    fn a_local_image_id_is_exact_but_not_reproducible_elsewhere() {
        let id = format!("sha256:{}", "c".repeat(64));
        let r = with(|v| v["Config"]["Image"] = json!(id.as_str()));
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        assert!(has(&r, Control::Reproducibility, &id, Risk::Weak));
    }

    #[test]
    fn digest_pins_and_image_ids_are_recognised_exactly() {
        let hex = "0123456789abcdef".repeat(4);
        assert!(is_digest_pinned(&format!("r.example/a/b@sha256:{hex}")));
        assert!(is_digest_pinned(&format!(
            "127.0.0.1:5000/a:1@sha256:{hex}"
        )));
        assert!(!is_digest_pinned("busybox@sha256:aa"));
        assert!(!is_digest_pinned(&format!("@sha256:{hex}")));
        assert!(!is_digest_pinned(&format!(
            "a@sha256:{}",
            hex.to_uppercase()
        )));
        assert!(!is_digest_pinned("busybox:1"));
        assert!(is_image_id(&format!("sha256:{hex}")));
        assert!(!is_image_id("sha256:feed"));
        assert!(!is_image_id(&format!("a@sha256:{hex}")));
    }

    #[test]
    fn teardown_rules() {
        let r = with(|v| v["Config"]["Labels"] = json!({}));
        assert_eq!(r.score_of(Control::Teardown), 1);
        let r = with(|v| {
            v["Config"]["Labels"] = json!({});
            add_mount(v, "volume", "data", "/data", true);
        });
        assert_eq!(r.score_of(Control::Teardown), 0);
        let anon = "a".repeat(64);
        let r = with(|v| add_mount(v, "volume", &anon, "/data", true));
        assert_eq!(r.score_of(Control::Teardown), 2);
    }

    #[test]
    fn a_workspace_under_a_cache_folder_is_still_just_the_workspace() {
        let mut c = ctx();
        c.workspace = Some("/home/me/.cache/devcell/wt/task".into());
        let mut v = hardened();
        v[0]["Mounts"][0]["Source"] = json!("/home/me/.cache/devcell/wt/task");
        let r = audit(&ContainerFacts::from_docker_inspect(&v).unwrap(), &c);
        assert_eq!(r.score, 16, "{}", r.render_table());
    }

    #[test]
    fn workspace_defaults_to_the_local_folder_label() {
        let mut c = ctx();
        c.workspace = None;
        let r = audit(
            &ContainerFacts::from_docker_inspect(&hardened()).unwrap(),
            &c,
        );
        assert_eq!(r.score_of(Control::RepoScope), 2);
    }

    #[test]
    fn evidence_does_not_depend_on_the_engines_mount_order() {
        let mut v = hardened();
        let mounts = v[0]["Mounts"].as_array_mut().unwrap();
        for (source, target) in [("/srv/a", "/mnt/a"), ("/srv/b", "/mnt/b")] {
            mounts.push(json!({
                "Type": "bind", "Source": source, "Destination": target,
                "Mode": "", "RW": true, "Propagation": "rprivate"
            }));
        }
        let mut reversed = v.clone();
        reversed[0]["Mounts"].as_array_mut().unwrap().reverse();
        let table = |v: &Value| {
            let f = ContainerFacts::from_docker_inspect(v).unwrap();
            audit(&f, &ctx()).render_table()
        };
        assert_eq!(table(&v), table(&reversed));
        let one = table(&v);
        assert!(!one.contains("among 1 names"), "{one}");
    }

    #[test]
    fn binds_are_read_when_mounts_are_absent() {
        let mut v = hardened();
        v[0].as_object_mut().unwrap().remove("Mounts");
        v[0]["HostConfig"]["Binds"] = json!([
            "/home/me/work/repo:/workspace",
            "/var/run/docker.sock:/var/run/docker.sock:ro",
            "cache:/c"
        ]);
        let f = ContainerFacts::from_docker_inspect(&v).unwrap();
        assert_eq!(f.mounts.len(), 4, "{:?}", f.mounts);
        let at = |t: &str| f.mounts.iter().find(|m| m.target == t).unwrap();
        assert!(at("/var/run/docker.sock").read_only);
        assert_eq!(at("/c").volume_name.as_deref(), Some("cache"));
        // sorted by target, whatever order the engine gave
        let targets: Vec<&str> = f.mounts.iter().map(|m| m.target.as_str()).collect();
        let mut sorted = targets.clone();
        sorted.sort();
        assert_eq!(targets, sorted);
        let r = audit(&f, &ctx());
        assert_eq!(r.score_of(Control::EngineSocket), 0);
        assert_eq!(r.score_of(Control::RepoScope), 2);
    }

    #[test]
    fn lockfile_state_from_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("devcontainer.json");
        let c = AuditContext::default().with_config_file(&config);
        assert_eq!(c.features_lockfile, Some(false));
        std::fs::write(dir.path().join("devcontainer-lock.json"), "").unwrap();
        let c = AuditContext::default().with_config_file(&config);
        assert_eq!(
            c.features_lockfile,
            Some(false),
            "an empty lockfile locks nothing"
        );
        std::fs::write(
            dir.path().join("devcontainer-lock.json"),
            "{\"features\":{}}\n",
        )
        .unwrap();
        let c = AuditContext::default().with_config_file(&config);
        assert_eq!(c.features_lockfile, Some(true));
        assert_eq!(c.locked_features, Some(BTreeMap::new()));
        std::fs::write(
            dir.path().join("devcontainer-lock.json"),
            r#"{"features":{"ghcr.io/a/b/c:1":{"version":"1.0.0","resolved":"ghcr.io/a/b/c@sha256:aa","integrity":"sha256:aa"}}}"#,
        )
        .unwrap();
        let c = AuditContext::default().with_config_file(&config);
        assert_eq!(
            c.locked_features,
            Some(BTreeMap::from([(
                "ghcr.io/a/b/c:1".to_string(),
                "sha256:aa".to_string()
            )]))
        );
        std::fs::write(dir.path().join("devcontainer-lock.json"), "{oops").unwrap();
        let c = AuditContext::default().with_config_file(&config);
        assert_eq!((c.features_lockfile, c.locked_features), (Some(true), None));
    }

    #[test]
    fn lockfile_paths() {
        assert_eq!(
            lockfile_path_for_config(Path::new("/w/.devcontainer/devcontainer.json")),
            Path::new("/w/.devcontainer/devcontainer-lock.json")
        );
        assert_eq!(
            lockfile_path_for_config(Path::new("/w/.devcontainer.json")),
            Path::new("/w/.devcontainer-lock.json")
        );
    }

    #[test]
    fn caps_decode() {
        let caps = caps_from_mask(0xa80425fb);
        let expected: BTreeSet<String> =
            DOCKER_DEFAULT_CAPS.iter().map(|c| c.to_string()).collect();
        assert_eq!(caps, expected);
        assert!(caps_from_mask(1 << 21).contains("SYS_ADMIN"));
    }

    #[test]
    fn table_lists_every_control() {
        let t = with(|_| {}).render_table();
        for c in Control::ALL {
            assert!(t.contains(c.title()), "{t}");
        }
        assert!(t.contains("16/16"));
    }
}
