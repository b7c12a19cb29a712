//! Every service of a Compose configuration bounded (spec-note 0601), judged on the resolved
//! model (`docker compose config --format json`, [`crate::engine::compose::ComposeCli::config`]),
//! so `extends`, profiles, anchors and interpolation are judged as Compose applies them.
//!
//! What each service's own properties ask for beyond the sidecar profile is a permission
//! request naming the service and the property ([`Source::ComposeService`]): privileged mode,
//! added capabilities, host or foreign namespaces (`network_mode: host|container:…`, `pid`,
//! `ipc`, `uts`, `userns_mode`, `cgroup`, `volumes_from: container:…` or of a service that
//! writes a host path), devices and device cgroup rules, security options other than
//! `no-new-privileges`, binds (and bind-backed
//! volumes, secrets and configs) outside the workspace, an engine socket or the home folder
//! (never granted), external networks, ports published beyond loopback, identity labels, a
//! build context or Dockerfile outside the workspace and a build on the host network. This
//! holds for the primary service too: Compose merges list properties (`cap_add`, `volumes`,
//! `devices`) from the repository's files with devcell's override, so what they ask cannot be
//! taken away, only refused; the primary's hardened container itself comes from
//! [`super::apply`].
//!
//! The other services (sidecars) keep their image's user (a database that starts as root
//! and drops to its own user still starts) and the engine's default capabilities, and get
//! `no-new-privileges` and the profile's pids, memory and CPU limits (the lower of theirs and
//! the profile's) through the override file ([`ComposeJudgement::sidecars`]); those that can
//! write a host path by any route ([`host_writers`]) run as the workspace user without the
//! capabilities that give files away or make devices (spec-note 0611).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::error::{Result, SecurityError};
use super::host_path::{Place, Places, resolve};
use super::policy::{
    Grants, Permission, PermissionRequest, Source, is_loopback_address, is_no_new_privileges,
    judge, network_permission, normalize_cap, publish_address,
};
use super::profile::{ProfileLimits, SecurityProfile};
use crate::formats::json;

/// What [`judge_compose`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct ComposeJudgement {
    /// Every request, with what was done with it (none refused: refusals are an error).
    pub requests: Vec<PermissionRequest>,
    /// The additions for each service but the primary, as Compose service maps, for
    /// [`crate::engine::compose::override_file`]'s `others` (empty under `reference`).
    pub sidecars: Map<String, Value>,
}

/// Judges every service of `model` (the resolved Compose model) under `profile` with the
/// user's `grants`: `primary` is the service devcell connects to, `places` the workspace,
/// home folder and engine socket binds are judged against. Pure but for resolving bind
/// sources' symbolic links ([`resolve`]).
///
/// Errors: [`SecurityError::Refused`] listing every request when one is refused or never
/// allowed (then nothing may be created).
pub fn judge_compose(
    profile: &SecurityProfile,
    model: &Value,
    primary: &str,
    places: &Places,
    grants: &Grants,
) -> Result<ComposeJudgement> {
    let requests = compose_requests(profile, model, primary, places, grants);
    if let Some(refused) = super::policy::refusal(profile, &requests) {
        return Err(refused);
    }
    let mut requests = requests;
    let sidecars = match profile {
        SecurityProfile::Reference => Map::new(),
        SecurityProfile::Hardened(limits) => {
            let writer = crate::config::ownership::workspace_user_of(&places.workspace);
            let mut sidecars = Map::new();
            let writers = host_writers(model, primary);
            for (name, service) in services_of(model).filter(|(n, _)| n.as_str() != primary) {
                let mut add = sidecar_additions(service, limits);
                if writers.contains(name) {
                    let keep = keep_image_user(name);
                    if grants.allows(&keep) {
                        requests.push(PermissionRequest {
                            permission: keep,
                            source: Source::ComposeService {
                                service: name.clone(),
                                property: "volumes".to_string(),
                            },
                            status: super::policy::RequestStatus::Granted,
                        });
                    } else if let (Value::Object(add), Value::Object(restrict)) =
                        (&mut add, host_writer_additions(service, writer))
                    {
                        add.extend(restrict);
                    }
                }
                sidecars.insert(name.clone(), add);
            }
            sidecars
        }
    };
    Ok(ComposeJudgement { requests, sidecars })
}

/// The capabilities a sidecar that can write a host path loses under `hardened` (spec-note
/// 0611): those that let root give a file away or to root (`CHOWN`, `FOWNER`, `SETFCAP`,
/// `LINUX_IMMUTABLE`), keep or set set-uid/set-gid bits on files it does not own (`FSETID`,
/// `FOWNER`), make device nodes (`MKNOD`), change its own ids (`SETUID`, `SETGID`), and write or
/// read past the host folder's permissions (`DAC_OVERRIDE`, `DAC_READ_SEARCH`).
pub const HOST_WRITER_CAP_DROP: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "MKNOD",
    "SETUID",
    "SETGID",
    "SETFCAP",
    "LINUX_IMMUTABLE",
];

/// The grant that lets sidecar `service`, which can write a host path, keep its image's user
/// and the engine's default capabilities: `--allow runtime-option:keep_image_user=<service>`
/// (spec-note 0611).
pub fn keep_image_user(service: &str) -> Permission {
    Permission::RuntimeOption(format!("keep_image_user={service}"))
}

/// Whether `service` of `model` can write a host path: a bind (or a volume whose driver
/// options bind a host folder) that is not read-only.
pub fn writes_host_path(model: &Value, service: &Value) -> bool {
    service
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("read_only").and_then(Value::as_bool) != Some(true))
        .any(|v| {
            let source = v.get("source").and_then(Value::as_str);
            match (v.get("type").and_then(Value::as_str), source) {
                (Some("bind"), _) => true,
                (Some("volume"), Some(volume)) => {
                    super::host_path::bind_backed_volume(model, volume).is_some()
                }
                _ => false,
            }
        })
}

/// The services of `model` that can write a host path by any route (spec-note 0611, attacks
/// G4): `primary` (the workspace is its, and devcell's own mounts), each service with a
/// writable bind or bind-backed volume ([`writes_host_path`]), and, until nothing changes,
/// each service that takes a writer's mounts (`volumes_from: [<writer>]` not `:ro`; any
/// `volumes_from: container:…`, whose mounts are not the model's to know) or shares a pid,
/// ipc or network namespace with a writer (`service:<x>`, either way: a peer reaches the
/// writer's mounts through `/proc/<pid>/root`, or is handed a folder's descriptor over an
/// abstract socket). Pure.
pub fn host_writers(model: &Value, primary: &str) -> std::collections::BTreeSet<String> {
    let services: Vec<(&String, &Value)> = services_of(model).collect();
    let mut writers: std::collections::BTreeSet<String> = services
        .iter()
        .filter(|(name, service)| name.as_str() == primary || writes_host_path(model, service))
        .map(|(name, _)| (*name).clone())
        .collect();
    loop {
        let before = writers.len();
        for (name, service) in &services {
            let peers = namespace_peers(service);
            let takes = volumes_from_of(service)
                .into_iter()
                .any(|(from, read_only)| {
                    !read_only && (from.starts_with("container:") || writers.contains(&from))
                });
            if takes || peers.iter().any(|p| writers.contains(p)) {
                writers.insert((*name).clone());
            }
            if writers.contains(*name) {
                // a writer that joins a service's namespace makes that service its peer
                writers.extend(
                    peers
                        .into_iter()
                        .filter(|p| services.iter().any(|(n, _)| *n == p)),
                );
            }
        }
        if writers.len() == before {
            return writers;
        }
    }
}

/// The services whose pid, ipc or network namespace `service` joins (`service:<x>`).
fn namespace_peers(service: &Value) -> Vec<String> {
    ["pid", "ipc", "network_mode"]
        .iter()
        .filter_map(|key| service.get(*key).and_then(Value::as_str))
        .filter_map(|mode| mode.strip_prefix("service:"))
        .map(str::to_string)
        .collect()
}

/// Each `volumes_from` entry of `service` as its source (`<service>` or `container:<name>`,
/// without the access mode) and whether it is read-only (`:ro`).
fn volumes_from_of(service: &Value) -> Vec<(String, bool)> {
    strings_of(service, "volumes_from")
        .into_iter()
        .map(|from| {
            let (body, prefix) = match from.strip_prefix("container:") {
                Some(rest) => (rest.to_string(), "container:"),
                None => (from.clone(), ""),
            };
            let (source, read_only) = match body.rsplit_once(':') {
                Some((source, "ro")) => (source.to_string(), true),
                Some((source, "rw")) => (source.to_string(), false),
                _ => (body, false),
            };
            (format!("{prefix}{source}"), read_only)
        })
        .collect()
}

/// A request per `volumes_from` of a *service* that writes a host path ([`host_writers`]):
/// every mount of the source, the workspace bind among them, read-write, in a service that
/// keeps its own user otherwise (attacks G4). `:ro` and a source that writes no host path ask
/// nothing; `container:` is a request of its own ([`service_requests`]).
fn volumes_from_requests(
    name: &str,
    service: &Value,
    writers: &std::collections::BTreeSet<String>,
    out: &mut Vec<(Permission, Source)>,
) {
    for (from, read_only) in volumes_from_of(service) {
        if !read_only && !from.starts_with("container:") && writers.contains(&from) {
            out.push((
                Permission::Namespace(format!("volumes_from:{from}")),
                Source::ComposeService {
                    service: name.to_string(),
                    property: "volumes_from".to_string(),
                },
            ));
        }
    }
}

/// The additions that keep a sidecar writing a host path from leaving set-uid/set-gid files,
/// device nodes or another user's files there (spec-note 0611): it runs as the workspace user
/// (`user: "<uid>:<gid>"`, when there is one, [`crate::config::ownership::workspace_user`]),
/// so what it creates is that user's, and without [`HOST_WRITER_CAP_DROP`] (but those its
/// granted `cap_add` names), so neither a set-uid helper of its image nor a root it keeps (no
/// workspace user: everything is root already) can give files away, make devices or write
/// past the folder's permissions. Pure.
pub fn host_writer_additions(
    service: &Value,
    writer: Option<crate::config::ownership::Ids>,
) -> Value {
    let added: Vec<String> = strings_of(service, "cap_add")
        .iter()
        .map(|c| normalize_cap(c))
        .collect();
    let drop: Vec<&str> = HOST_WRITER_CAP_DROP
        .iter()
        .copied()
        .filter(|c| !added.iter().any(|a| a == c || a == "ALL"))
        .collect();
    let mut add = Map::new();
    if let Some(ids) = writer {
        add.insert(
            "user".to_string(),
            json!(format!("{}:{}", ids.uid, ids.gid)),
        );
    }
    add.insert("cap_drop".to_string(), json!(drop));
    Value::Object(add)
}

/// Every service's requests in `model` judged under `profile` with `grants`, refused ones
/// included (not an error): for a caller that refuses them together with its other requests
/// ([`judge_compose`] refuses them alone). `primary` is the service devcell connects to (a
/// host writer, [`host_writers`]).
pub fn compose_requests(
    profile: &SecurityProfile,
    model: &Value,
    primary: &str,
    places: &Places,
    grants: &Grants,
) -> Vec<PermissionRequest> {
    let mut asked: Vec<(Permission, Source)> = Vec::new();
    let routes = host_routes();
    let writers = host_writers(model, primary);
    for (name, service) in services_of(model) {
        service_requests(model, name, service, places, &mut asked);
        volumes_from_requests(name, service, &writers, &mut asked);
        reach_requests(model, name, service, &routes, &mut asked);
    }
    let mut requests: Vec<PermissionRequest> = Vec::new();
    for r in judge(profile, asked, grants) {
        if !requests.contains(&r) {
            requests.push(r);
        }
    }
    requests
}

/// Volumes and networks the engine already holds under a name the Compose model resolves to
/// and that are not the project's own (they carry another `com.docker.compose.project`
/// label, or none): an explicit `name:` or `external: true` naming another workspace's
/// database volume or project network, which Compose mounts or joins with a warning only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForeignResources {
    /// Engine volume names.
    pub volumes: std::collections::BTreeSet<String>,
    /// Engine network names.
    pub networks: std::collections::BTreeSet<String>,
}

/// The engine names of every top-level volume and network of `model` (`name`, else the key),
/// for the caller to look up ([`ForeignResources`]).
pub fn resource_names(model: &Value) -> (Vec<String>, Vec<String>) {
    let names = |top: &str| -> Vec<String> {
        model
            .get(top)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(key, def)| {
                def.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(key)
                    .to_string()
            })
            .collect()
    };
    (names("volumes"), names("networks"))
}

/// One request per service mount of a foreign volume ([`Permission::Volume`], `--allow
/// volume:<name>`) and per service attached to a foreign network ([`Permission::Network`];
/// an `external` network is already one, [`compose_requests`]), judged under `profile`
/// (spec-note 0601, attacks).
pub fn foreign_resource_requests(
    profile: &SecurityProfile,
    model: &Value,
    foreign: &ForeignResources,
    grants: &Grants,
) -> Vec<PermissionRequest> {
    let engine_name = |top: &str, key: &str| -> String {
        model
            .get(top)
            .and_then(|t| t.get(key))
            .and_then(|d| d.get("name"))
            .and_then(Value::as_str)
            .unwrap_or(key)
            .to_string()
    };
    let external = |top: &str, key: &str| {
        model
            .get(top)
            .and_then(|t| t.get(key))
            .and_then(|d| d.get("external"))
            .and_then(Value::as_bool)
            == Some(true)
    };
    let mut asked: Vec<(Permission, Source)> = Vec::new();
    for (name, service) in model
        .get("services")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let source = |property: &str| Source::ComposeService {
            service: name.clone(),
            property: property.to_string(),
        };
        for v in service
            .get("volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if v.get("type").and_then(Value::as_str) != Some("volume") {
                continue;
            }
            let Some(key) = v.get("source").and_then(Value::as_str) else {
                continue;
            };
            let volume = engine_name("volumes", key);
            if foreign.volumes.contains(&volume) {
                asked.push((Permission::Volume(volume), source("volumes")));
            }
        }
        let keys: Vec<String> = match service.get("networks").and_then(Value::as_object) {
            Some(n) => n.keys().cloned().collect(),
            None if service.get("network_mode").is_none() => vec!["default".to_string()],
            None => Vec::new(),
        };
        for key in keys {
            let network = engine_name("networks", &key);
            if !external("networks", &key) && foreign.networks.contains(&network) {
                asked.push((Permission::Network(network), source("networks")));
            }
        }
    }
    let mut requests: Vec<PermissionRequest> = Vec::new();
    for r in judge(profile, asked, grants) {
        if !requests.contains(&r) {
            requests.push(r);
        }
    }
    requests
}

fn service_requests(
    model: &Value,
    name: &str,
    service: &Value,
    places: &Places,
    out: &mut Vec<(Permission, Source)>,
) {
    let mut push = |permission: Permission, property: &str| {
        out.push((
            permission,
            Source::ComposeService {
                service: name.to_string(),
                property: property.to_string(),
            },
        ));
    };
    let str_of = |key: &str| service.get(key).and_then(Value::as_str);
    let strings = |key: &str| strings_of(service, key);
    let items = |key: &str| {
        service
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    };

    if service.get("privileged").and_then(Value::as_bool) == Some(true) {
        push(Permission::Privileged, "privileged");
    }
    // Compose hands the engine's API socket to the service (and the host's registry
    // credentials with it): never allowed under `hardened`.
    if service.get("use_api_socket").and_then(Value::as_bool) == Some(true) {
        push(
            Permission::EngineSocket("use_api_socket".to_string()),
            "use_api_socket",
        );
    }
    // A provider service is a host program Compose runs (`provider.type`, any executable on
    // the host's PATH or an absolute path), on the host, as the user running devcell.
    if let Some(provider) = service.get("provider") {
        let program = provider
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        push(
            Permission::HostCommand(format!("compose provider `{program}`")),
            "provider",
        );
    }
    // Compose's own lifecycle hooks run commands in the container, as any user they name,
    // while `compose up` starts it: before devcell has checked who runs what in it.
    for key in ["post_start", "pre_stop"] {
        if service
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|hooks| !hooks.is_empty())
        {
            push(
                Permission::RuntimeOption(format!("compose_hook={key}")),
                key,
            );
        }
    }
    for cap in strings("cap_add") {
        push(Permission::Capability(normalize_cap(&cap)), "cap_add");
    }
    for opt in strings("security_opt") {
        if !is_no_new_privileges(&opt) {
            push(Permission::SecurityOpt(opt), "security_opt");
        }
    }
    if let Some(mode) = str_of("network_mode")
        && !mode.starts_with("service:")
        && let Some(p) = network_permission(mode)
    {
        push(p, "network_mode");
    }
    for (key, kind) in [
        ("pid", "pid"),
        ("ipc", "ipc"),
        ("uts", "uts"),
        ("userns_mode", "userns"),
        ("cgroup", "cgroup"),
    ] {
        // `service:<x>` too for the pid and ipc namespaces: a process in a peer's pid
        // namespace reaches the primary's mounts through `/proc/<pid>/root` and keeps them when
        // the primary stops (the host's `.git` under the cover; spec-note 0400, attacks F0),
        // and a link between two peers joins whatever joins either of them
        let peer = matches!(kind, "pid" | "ipc") && mode_is_service(str_of(key));
        if let Some(mode) = str_of(key)
            && (mode == "host" || mode.starts_with("container:") || peer)
        {
            push(Permission::Namespace(format!("{kind}:{mode}")), key);
        }
    }
    // What isolates the container and where the host accounts for it: another runtime than
    // the engine's default (`runc`), a cgroup parent outside the engine's, kernel parameters,
    // an OOM score that makes the host kill its own processes first.
    if let Some(runtime) = str_of("runtime")
        && runtime != "runc"
    {
        push(
            Permission::RuntimeOption(format!("runtime={runtime}")),
            "runtime",
        );
    }
    if let Some(parent) = str_of("cgroup_parent").filter(|p| !p.is_empty()) {
        push(
            Permission::RuntimeOption(format!("cgroup_parent={parent}")),
            "cgroup_parent",
        );
    }
    for (name, value) in service
        .get("sysctls")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        push(
            Permission::RuntimeOption(format!("sysctl.{name}={value}")),
            "sysctls",
        );
    }
    if let Some(adj) = service.get("oom_score_adj").and_then(number)
        && adj < 0.0
    {
        push(
            Permission::RuntimeOption(format!("oom_score_adj={adj}")),
            "oom_score_adj",
        );
    }
    for (limit, value) in service
        .get("ulimits")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let int = |v: Option<&Value>| v.and_then(number).map(|n| n as i64);
        let (soft, hard) = match value {
            Value::Object(_) => (
                int(value.get("soft")).unwrap_or(0),
                int(value.get("hard")).unwrap_or(0),
            ),
            single => (
                int(Some(single)).unwrap_or(0),
                int(Some(single)).unwrap_or(0),
            ),
        };
        if let Some(p) = super::policy::ulimit_permission(limit, soft, hard) {
            push(p, "ulimits");
        }
    }
    for from in strings("volumes_from") {
        if from.starts_with("container:") {
            push(
                Permission::Namespace(format!("volumes_from:{from}")),
                "volumes_from",
            );
        }
    }
    for device in items("devices") {
        let host = match device {
            Value::String(s) => s.split(':').next().unwrap_or_default().to_string(),
            other => other
                .get("source")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        };
        push(Permission::Device(host), "devices");
    }
    for rule in strings("device_cgroup_rules") {
        push(Permission::DeviceCgroupRule(rule), "device_cgroup_rules");
    }
    if service
        .pointer("/deploy/resources/reservations/devices")
        .is_some()
        || service.get("gpus").is_some()
    {
        push(Permission::Device("gpu".to_string()), "deploy.resources");
    }
    for v in items("volumes") {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let source = v.get("source").and_then(Value::as_str);
        match (kind, source) {
            ("bind", Some(source)) => {
                if let Some(p) = host_path_permission(source, places) {
                    push(p, "volumes");
                }
            }
            ("volume", Some(volume)) => {
                // a volume whose driver options bind a host folder is a bind
                if let Some(device) = super::host_path::bind_backed_volume(model, volume) {
                    if let Some(p) = host_path_permission(device, places) {
                        push(p, "volumes");
                    }
                } else if let Some(mounted) = driver_mounted_volume(model, volume) {
                    // any other driver options mount what they name: a host device, an
                    // overlay of host folders
                    push(mounted, "volumes");
                }
            }
            ("bind" | "volume" | "tmpfs", _) => {}
            (other, _) => push(
                Permission::Mount(format!("{other}:{}", source.unwrap_or_default())),
                "volumes",
            ),
        }
    }
    // An env file's contents become the container's environment: a host file outside the
    // workspace read that way is read into the container.
    for item in items("env_file") {
        let path = item
            .as_str()
            .or_else(|| item.get("path").and_then(Value::as_str));
        let Some(path) = path else { continue };
        if path.contains('$') {
            // written with `${…}`: where it lands is the host's to say, not placeable here
            push(Permission::Mount(path.to_string()), "env_file");
        } else if let Some(p) = host_path_permission(path, places) {
            push(p, "env_file");
        }
    }
    for (key, top) in [("secrets", "secrets"), ("configs", "configs")] {
        for item in service
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(source) = item.get("source").and_then(Value::as_str) else {
                continue;
            };
            let Some(def) = model.get(top).and_then(|t| t.get(source)) else {
                continue;
            };
            secret_requests(def, places, key, &mut push);
        }
    }
    if let Some(networks) = service.get("networks").and_then(Value::as_object) {
        for key in networks.keys() {
            let def = model.get("networks").and_then(|n| n.get(key));
            let external =
                def.and_then(|d| d.get("external")).and_then(Value::as_bool) == Some(true);
            let driver = def.and_then(|d| d.get("driver")).and_then(Value::as_str);
            if driver == Some("host") {
                push(Permission::HostNetwork, "networks");
            } else if external {
                let name = def
                    .and_then(|d| d.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or(key);
                push(Permission::Network(name.to_string()), "networks");
            }
        }
    }
    for port in items("ports") {
        let ip = port.get("host_ip").and_then(Value::as_str).unwrap_or("");
        if is_loopback_address(ip) {
            continue;
        }
        let published = port
            .get("published")
            .and_then(|p| match p {
                Value::String(s) => s.parse::<u16>().ok(),
                Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
                _ => None,
            })
            .filter(|p| *p > 0);
        let ip = if ip.is_empty() { "0.0.0.0" } else { ip };
        push(
            Permission::PublishPort(publish_address(ip, published)),
            "ports",
        );
    }
    if let Some(labels) = service.get("labels").and_then(Value::as_object) {
        for key in labels.keys() {
            if key.starts_with("devcontainer.") || key.starts_with("devcell.") {
                push(Permission::IdentityLabel(key.clone()), "labels");
            }
        }
    }
    if let Some(build) = service.get("build") {
        // The tags a build gives its image (`image`, `build.tags`): the engine moves a tag to
        // the newest image given it, so a repository naming `postgres:16` or another
        // workspace's image would have whatever names that tag run the repository's build
        // (spec-note 0400, attacks). Compose's own `<project>-<service>` is not the
        // repository's choice.
        let project = model
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let own = format!("{project}-{name}");
        let image = str_of("image").map(str::to_string);
        for tag in image.into_iter().chain(strings_of(build, "tags")) {
            if tag != own && tag != format!("{own}:latest") {
                push(Permission::ImageTag(tag), "build");
            }
        }
        // Compose resolves a local context to an absolute path; anything else (a git or
        // HTTP URL) the engine would fetch from the network on the host's behalf.
        let context = build.get("context").and_then(Value::as_str);
        let remote = context.is_some_and(is_remote_context);
        if let Some(context) = context {
            if remote {
                push(
                    Permission::RemoteBuildContext(context.to_string()),
                    "build.context",
                );
            } else if let Some(p) = host_path_permission(context, places) {
                push(p, "build.context");
            }
        }
        if let Some(dockerfile) = build.get("dockerfile").and_then(Value::as_str) {
            let path = match context {
                Some(c) if !Path::new(dockerfile).is_absolute() => {
                    Path::new(c).join(dockerfile).to_string_lossy().into_owned()
                }
                _ => dockerfile.to_string(),
            };
            if !remote && let Some(p) = host_path_permission(&path, places) {
                push(p, "build.dockerfile");
            }
        }
        if let Some(network) = build.get("network").and_then(Value::as_str)
            && let Some(p) = network_permission(network)
        {
            push(p, "build.network");
        }
        if build.get("privileged").and_then(Value::as_bool) == Some(true) {
            push(Permission::Privileged, "build.privileged");
        }
        // Named contexts are build contexts too: a host folder the build can `COPY` from
        // (or `RUN --mount=from=`) and so bake into the image.
        for (_, source) in build
            .get("additional_contexts")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let Some(source) = source.as_str() else {
                continue;
            };
            // `docker-image://` is an image, pulled as any; `oci-layout://` a host folder
            if source.starts_with("docker-image://") {
                continue;
            }
            let path = source.strip_prefix("oci-layout://").unwrap_or(source);
            if is_remote_context(path) {
                push(
                    Permission::RemoteBuildContext(source.to_string()),
                    "build.additional_contexts",
                );
            } else if let Some(p) = host_path_permission(path, places) {
                push(p, "build.additional_contexts");
            }
        }
        // Build secrets read host files or host variables as service secrets do.
        for item in build
            .get("secrets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let source = item.get("source").and_then(Value::as_str).or(item.as_str());
            if let Some(def) = source.and_then(|s| model.get("secrets")?.get(s)) {
                secret_requests(def, places, "build.secrets", &mut push);
            }
        }
        // A local cache is read from (`cache_from`) or written to (`cache_to`) a host folder.
        for (key, field) in [("cache_from", "src"), ("cache_to", "dest")] {
            for entry in strings_of(build, key) {
                if let Some(path) = local_cache_path(&entry, field)
                    && let Some(p) = host_path_permission(path, places)
                {
                    push(
                        p,
                        if key == "cache_from" {
                            "build.cache_from"
                        } else {
                            "build.cache_to"
                        },
                    );
                }
            }
        }
    }
}

/// The requests of what a service asks that reaches past its own project (spec-note 0612),
/// each a `runtime-option:<key>=<value>` request: a network of another driver than `bridge`
/// (`macvlan`, `ipvlan`: a leg on a host interface's segment), network or IPAM driver
/// options, an IPAM subnet, range or gateway that overlaps a host route (IPv4 `routes`; any
/// IPv6 one), `external_links` (a container outside the project), more than one replica
/// (`scale`, `deploy.replicas`: the profile's limits are per container), `oom_kill_disable`,
/// unlimited swap (`memswap_limit: -1`), real-time CPU time (`cpu_rt_runtime`,
/// `cpu_rt_period`), the host's SSH agent in a build (`build.ssh`), an image named like one
/// devcell builds for a workspace (`vsc-…`, `devcell/…`) run without building it, a
/// BuildKit cache mount in a build's Dockerfile (shared by every build on the engine), each
/// `group_add` entry (`group_add=<service>:<group>`, spec-note 0611) and a log driver or
/// option that can name an address ([`logging_requests`]).
fn reach_requests(
    model: &Value,
    name: &str,
    service: &Value,
    routes: &[(u32, u32)],
    out: &mut Vec<(Permission, Source)>,
) {
    let mut push = |option: String, property: &str| {
        out.push((
            Permission::RuntimeOption(option),
            Source::ComposeService {
                service: name.to_string(),
                property: property.to_string(),
            },
        ));
    };
    let keys: Vec<String> = match service.get("networks").and_then(Value::as_object) {
        Some(n) => n.keys().cloned().collect(),
        None if service.get("network_mode").is_none() => vec!["default".to_string()],
        None => Vec::new(),
    };
    for key in keys {
        let Some(def) = model.get("networks").and_then(|n| n.get(&key)) else {
            continue;
        };
        if def.get("external").and_then(Value::as_bool) == Some(true) {
            continue; // a request of its own (`network:<name>`)
        }
        if let Some(driver) = def.get("driver").and_then(Value::as_str)
            && !matches!(driver, "" | "bridge" | "host")
        {
            push(format!("network_driver={driver}"), "networks");
        }
        for (k, v) in def
            .get("driver_opts")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            push(format!("network_driver_opt.{k}={}", scalar(v)), "networks");
        }
        let ipam = def.get("ipam");
        if let Some(driver) = ipam.and_then(|i| i.get("driver")).and_then(Value::as_str)
            && driver != "default"
        {
            push(format!("ipam_driver={driver}"), "networks");
        }
        for config in ipam
            .and_then(|i| i.get("config"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for field in ["subnet", "ip_range", "gateway"] {
                if let Some(cidr) = config.get(field).and_then(Value::as_str)
                    && overlaps_a_route(cidr, routes)
                {
                    push(format!("network_{field}={cidr}"), "networks");
                }
            }
        }
    }
    for link in strings_of(service, "external_links") {
        push(format!("external_link={link}"), "external_links");
    }
    let replicas = service
        .get("scale")
        .or_else(|| service.pointer("/deploy/replicas"))
        .and_then(number);
    if let Some(n) = replicas.filter(|n| *n > 1.0) {
        push(format!("replicas={n}"), "deploy.replicas");
    }
    if service.get("oom_kill_disable").and_then(Value::as_bool) == Some(true) {
        push("oom_kill_disable=true".to_string(), "oom_kill_disable");
    }
    if service
        .get("memswap_limit")
        .and_then(number)
        .is_some_and(|n| n < 0.0)
    {
        push("memswap_limit=-1".to_string(), "memswap_limit");
    }
    for key in ["cpu_rt_runtime", "cpu_rt_period"] {
        if let Some(v) = service.get(key).filter(|v| !v.is_null()) {
            push(format!("{key}={}", scalar(v)), key);
        }
    }
    let build = service.get("build");
    for entry in build.map(|b| strings_of(b, "ssh")).unwrap_or_default() {
        push(format!("build_ssh={entry}"), "build.ssh");
    }
    if build.is_none()
        && let Some(image) = service.get("image").and_then(Value::as_str)
        && is_devcell_image_name(image)
    {
        push(format!("image={image}"), "image");
    }
    if let Some(build) = build
        && build_uses_cache_mount(build)
    {
        push(format!("build_cache_mount={name}"), "build.dockerfile");
    }
    // A supplementary group lets the service give its files that group and set-gid them
    // without a capability: `group_add: ["0"]` leaves a set-gid-root file in a bound folder.
    for group in service
        .get("group_add")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        push(format!("group_add={name}:{}", scalar(group)), "group_add");
    }
    logging_requests(service, &mut push);
}

/// The log drivers that keep a container's output in the engine's own files (or nowhere).
const LOCAL_LOG_DRIVERS: &[&str] = &["json-file", "local", "none"];

/// The options of [`LOCAL_LOG_DRIVERS`] that name no address: size, rotation and what
/// metadata is written.
const LOCAL_LOG_OPTIONS: &[&str] = &[
    "max-size",
    "max-file",
    "compress",
    "labels",
    "labels-regex",
    "env",
    "env-regex",
    "tag",
];

/// The requests of a service's `logging` (and the legacy `log_driver`/`log_opt`): a driver
/// that is not local (`syslog`, `gelf`, `fluentd`, …: the engine delivers the output to an
/// address of the host's network, past network `none`) → `logging_driver=<d>`; every option
/// but [`LOCAL_LOG_OPTIONS`] of a local one (or of the engine's default driver) →
/// `logging_opt.<key>=<value>` (spec-note 0612).
fn logging_requests(service: &Value, push: &mut impl FnMut(String, &str)) {
    let logging = service.get("logging");
    let driver = logging
        .and_then(|l| l.get("driver"))
        .or_else(|| service.get("log_driver"))
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty());
    let local = driver.is_none_or(|d| LOCAL_LOG_DRIVERS.contains(&d));
    if let Some(driver) = driver.filter(|_| !local) {
        push(format!("logging_driver={driver}"), "logging");
    }
    let options = [
        logging.and_then(|l| l.get("options")),
        service.get("log_opt"),
    ];
    for (key, value) in options
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flatten()
    {
        if !local || !LOCAL_LOG_OPTIONS.contains(&key.as_str()) {
            push(format!("logging_opt.{key}={}", scalar(value)), "logging");
        }
    }
}

/// A JSON scalar as text (a string without quotes).
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether `image` is named the way devcell names the images it builds for a workspace
/// (`vsc-<folder>-<hash>`, `devcell/uid:…`, `devcell/features:…`), with or without the
/// default registry's prefixes: another workspace's image, with what its build baked in.
pub fn is_devcell_image_name(image: &str) -> bool {
    let name = image
        .trim_start_matches("docker.io/")
        .trim_start_matches("index.docker.io/")
        .trim_start_matches("library/");
    name.starts_with("vsc-") || name.starts_with("devcell/")
}

/// Whether `cidr` (`a.b.c.d/n`, or an address) overlaps one of `routes` (network, netmask;
/// host order), the default route left out; an IPv6 `cidr` always counts (its routes are not
/// read), an unparseable one too.
pub fn overlaps_a_route(cidr: &str, routes: &[(u32, u32)]) -> bool {
    let (addr, len) = cidr.split_once('/').unwrap_or((cidr, "32"));
    let Ok(ip) = addr.trim().parse::<std::net::Ipv4Addr>() else {
        return true;
    };
    let Some(mask) = len
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|l| *l <= 32)
        .map(|l| if l == 0 { 0 } else { u32::MAX << (32 - l) })
    else {
        return true;
    };
    let net = u32::from(ip) & mask;
    routes.iter().filter(|(_, m)| *m != 0).any(|(rnet, rmask)| {
        let common = mask & rmask;
        net & common == rnet & common
    })
}

/// The host's IPv4 routes (network, netmask; host order) from `/proc/net/route`; empty when it
/// cannot be read (then only IPv6 and unparseable subnets are requests).
fn host_routes() -> Vec<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let hex = |i: usize| {
                fields
                    .get(i)
                    .and_then(|f| u32::from_str_radix(f, 16).ok())
                    .map(u32::from_be)
            };
            // the kernel prints the network-order word as a native integer
            Some((hex(1)?, hex(7)?))
        })
        .collect()
}

/// The most of a Dockerfile read for cache mounts (bytes).
const DOCKERFILE_MAX: u64 = 4 << 20;

/// Whether a build's Dockerfile (`dockerfile_inline`, or `dockerfile` in its local context,
/// read without following links, bounded) has a `RUN --mount=type=cache`: a cache the engine
/// shares with every other build that names the same id (another workspace's builds). A
/// Dockerfile that cannot be read (a link, not a regular file, above [`DOCKERFILE_MAX`], a
/// read error) counts as one: what it holds is unknown (fail closed). A missing one has no
/// cache mount (the build fails without it), but a missing default `Dockerfile` has its
/// lowercase `dockerfile` judged, which a builder may take instead.
fn build_uses_cache_mount(build: &Value) -> bool {
    if let Some(inline) = build.get("dockerfile_inline").and_then(Value::as_str) {
        return has_cache_mount(inline);
    }
    let Some(context) = build.get("context").and_then(Value::as_str) else {
        return false;
    };
    if is_remote_context(context) {
        // a request of its own (`build-context:`): granting it trusts what the URL holds
        return false;
    }
    let file = build
        .get("dockerfile")
        .and_then(Value::as_str)
        .unwrap_or("Dockerfile");
    let mut names = vec![file];
    if file == "Dockerfile" {
        names.push("dockerfile");
    }
    for name in names {
        match read_dockerfile(&Path::new(context).join(name)) {
            Ok(Some(text)) => return has_cache_mount(&text),
            Ok(None) => continue,
            Err(()) => return true,
        }
    }
    false
}

/// The text of the Dockerfile at `path`, read without following links and at most
/// [`DOCKERFILE_MAX`] bytes; `Ok(None)` when there is none, `Err` when it cannot be read.
fn read_dockerfile(path: &Path) -> std::result::Result<Option<String>, ()> {
    let resolved = resolve(path).map_err(|_| ())?;
    match super::host_path::read_no_follow(&resolved, DOCKERFILE_MAX) {
        Ok(bytes) => Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned())),
        Err(_) => Err(()),
    }
}

/// Whether Dockerfile `text` mounts a BuildKit cache (`--mount=type=cache`, any spelling of
/// the flag's case, quoting and escaping), judged on its instructions as BuildKit joins them:
/// lines ending in the escape character (`\`, or the `# escape=` directive's) continue on
/// the next, comment and blank lines inside an instruction left out. A `--mount` whose
/// value holds a `$` (a build argument BuildKit expands) counts too. Pure.
pub fn has_cache_mount(text: &str) -> bool {
    let escape = escape_char(text);
    dockerfile_instructions(text, escape)
        .iter()
        .any(|instruction| mounts_a_cache(instruction, escape))
}

/// The escape character of a Dockerfile: the `# escape=` parser directive among the
/// directives that open it, else `\`.
fn escape_char(text: &str) -> char {
    for line in text.lines() {
        let Some(directive) = line.trim().strip_prefix('#') else {
            break;
        };
        let Some((key, value)) = directive.split_once('=') else {
            break;
        };
        if key.trim().eq_ignore_ascii_case("escape") {
            return match value.trim() {
                "`" => '`',
                _ => '\\',
            };
        }
    }
    '\\'
}

/// The instructions of a Dockerfile, continued lines joined (the escape character and line
/// break dropped), comment and blank lines inside an instruction left out.
fn dockerfile_instructions(text: &str, escape: char) -> Vec<String> {
    let mut instructions = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_some() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        let mut part = current.take().unwrap_or_default();
        match line.trim_end().strip_suffix(escape) {
            Some(head) => {
                part.push_str(head);
                current = Some(part);
            }
            None => {
                part.push_str(line);
                instructions.push(part);
            }
        }
    }
    instructions.extend(current);
    instructions
}

/// Whether one joined instruction has a `--mount` flag of `type=cache`, or one whose value
/// BuildKit would expand (`$`): each `--mount` runs to the first blank outside quotes, and is
/// read with quotes and escape characters removed.
fn mounts_a_cache(instruction: &str, escape: char) -> bool {
    let lower = instruction.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find("--mount") {
        let flag = &rest[at..];
        let mut quote: Option<char> = None;
        let mut value = String::new();
        let mut end = flag.len();
        for (i, c) in flag.char_indices() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (None, '"' | '\'') => quote = Some(c),
                (None, c) if c.is_whitespace() => {
                    end = i;
                    break;
                }
                (_, c) if c == escape => {}
                (_, c) => value.push(c),
            }
        }
        if value.contains('$') || value.contains("type=cache") {
            return true;
        }
        rest = &flag[end.max(1)..];
    }
    false
}

/// Whether a build context of Compose's resolved model is fetched rather than read from a
/// host folder: Compose makes every local context absolute, so a context that is not an
/// absolute path is a URL (`https://…`, `git@host:repo`, `github.com/o/r`).
fn is_remote_context(context: &str) -> bool {
    !Path::new(context).is_absolute()
}

/// The `services` of a Compose model (none when it has no such map).
fn services_of(model: &Value) -> impl Iterator<Item = (&String, &Value)> {
    model
        .get("services")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// The strings of a list property of `value` (other items skipped).
fn strings_of(value: &Value, key: &str) -> Vec<String> {
    json::strings(value.get(key))
}

/// The requests of one top-level `secrets`/`configs` definition: its host `file`, its host
/// `environment` variable.
fn secret_requests(
    def: &Value,
    places: &Places,
    property: &str,
    push: &mut impl FnMut(Permission, &str),
) {
    if let Some(file) = def.get("file").and_then(Value::as_str)
        && let Some(p) = host_path_permission(file, places)
    {
        push(p, property);
    }
    if let Some(var) = def.get("environment").and_then(Value::as_str) {
        push(Permission::HostEnv(var.to_string()), property);
    }
}

/// The host folder of a BuildKit `type=local` cache entry (`type=local,src=/x`), by its
/// `field` (`src` for `cache_from`, `dest` for `cache_to`); `None` for other cache types.
fn local_cache_path<'a>(entry: &'a str, field: &str) -> Option<&'a str> {
    let mut local = false;
    let mut path = None;
    for part in entry.split(',') {
        match part.trim().split_once('=') {
            Some(("type", "local")) => local = true,
            Some((k, v)) if k == field => path = Some(v),
            _ => {}
        }
    }
    local.then_some(path).flatten()
}

/// Whether a namespace mode joins another service of the project (`service:<name>`).
fn mode_is_service(mode: Option<&str>) -> bool {
    mode.is_some_and(|m| m.starts_with("service:"))
}

/// The request of a named volume with driver options other than a bind: they mount what
/// they name, a host device (`type: ext4, device: /dev/vda`: a [`Permission::Mount`] of the
/// device) or an overlay of host folders (`o: lowerdir=…`: a [`Permission::Volume`] of the
/// volume, its options being no single path); `None` without driver options.
fn driver_mounted_volume(model: &Value, volume: &str) -> Option<Permission> {
    let opts = model
        .get("volumes")?
        .get(volume)?
        .get("driver_opts")?
        .as_object()?;
    if opts.is_empty() {
        return None;
    }
    let device = opts
        .get("device")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(if device.starts_with('/') {
        Permission::Mount(device.to_string())
    } else {
        Permission::Volume(volume.to_string())
    })
}

/// The request a host path the repository names asks for, judged where it resolves: none
/// inside the workspace; never the engine socket or the home folder (or a folder holding it);
/// otherwise a grantable [`Permission::Mount`] of the resolved path.
fn host_path_permission(written: &str, places: &Places) -> Option<Permission> {
    let path = Path::new(written);
    if !path.is_absolute() {
        // Compose resolves relative paths; one it left relative cannot be placed.
        return Some(Permission::Mount(written.to_string()));
    }
    // one devcell cannot resolve is never judged by its text (spec-note 0400, attacks F1/F2)
    let Ok(resolved) = resolve(path) else {
        return Some(Permission::UnresolvablePath(written.to_string()));
    };
    let text = resolved.to_string_lossy().into_owned();
    match places.place(&resolved) {
        Place::Workspace => None,
        Place::EngineSocket => Some(Permission::EngineSocket(text)),
        Place::Root => Some(Permission::HostHome(text)),
        Place::HostHome
            if places
                .home
                .as_deref()
                .is_some_and(|h| resolved.starts_with(h) && resolved != h) =>
        {
            Some(Permission::Mount(text))
        }
        Place::HostHome => Some(Permission::HostHome(text)),
        Place::Outside => Some(Permission::Mount(text)),
    }
}

/// The sidecar profile's additions to one service: `no-new-privileges`, `restart: "no"` and the lower of its
/// own and the profile's limits (in `deploy.resources.limits` when the service sets its limits
/// there, as Compose refuses both spellings with different values).
fn sidecar_additions(service: &Value, limits: &ProfileLimits) -> Value {
    let mut add = Map::new();
    add.insert(
        "security_opt".to_string(),
        json!(["no-new-privileges:true"]),
    );
    // stopped with the workspace after the agent, never brought back by the engine on its
    // own (`restart` wins over `deploy.restart_policy`; spec-note 0400, attacks F5)
    add.insert("restart".to_string(), json!("no"));
    let deploy = service.pointer("/deploy/resources/limits");
    let own_pids = service
        .get("pids_limit")
        .or_else(|| deploy.and_then(|d| d.get("pids")))
        .and_then(number)
        .filter(|p| *p > 0.0);
    let own_memory = service
        .get("mem_limit")
        .or_else(|| deploy.and_then(|d| d.get("memory")))
        .and_then(number)
        .filter(|m| *m > 0.0);
    let own_cpus = service
        .get("cpus")
        .or_else(|| deploy.and_then(|d| d.get("cpus")))
        .and_then(number)
        .filter(|c| *c > 0.0);
    let pids = own_pids.map_or(limits.pids, |p| (p as i64).min(limits.pids));
    let memory = own_memory.map_or(limits.memory_bytes, |m| (m as i64).min(limits.memory_bytes));
    let profile_cpus = limits.nano_cpus as f64 / 1e9;
    let cpus = own_cpus.map_or(profile_cpus, |c| c.min(profile_cpus));
    let in_deploy = |key: &str| deploy.is_some_and(|d| d.get(key).is_some());
    let mut deploy_limits = Map::new();
    for (short, long, value) in [
        ("pids_limit", "pids", json!(pids)),
        ("mem_limit", "memory", json!(memory)),
        ("cpus", "cpus", json!(cpus)),
    ] {
        if in_deploy(long) {
            deploy_limits.insert(long.to_string(), value);
        } else {
            add.insert(short.to_string(), value);
        }
    }
    if !deploy_limits.is_empty() {
        add.insert(
            "deploy".to_string(),
            json!({"resources": {"limits": deploy_limits}}),
        );
    }
    Value::Object(add)
}

/// A number Compose wrote as a number or a string (`"536870912"`, `"0.5"`).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Turns a [`SecurityError::Refused`] from [`judge_compose`] into its request list (for
/// reports); `None` for any other error.
pub fn refused_requests(error: &SecurityError) -> Option<&[PermissionRequest]> {
    match error {
        SecurityError::Refused { requests, .. } => Some(requests),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::policy::RequestStatus;
    use std::path::PathBuf;

    fn places() -> Places {
        Places {
            workspace: PathBuf::from("/w/repo"),
            home: Some(PathBuf::from("/home/dev")),
            engine_socket: Some(PathBuf::from("/var/run/docker.sock")),
        }
    }

    /// `m` judged under `hardened` with the grants of `--allow` flags as `refused` lists
    /// them; it passes.
    fn judged_with_flags(m: &Value, flags: &[&str]) -> ComposeJudgement {
        let grants = Grants::parse(
            &flags
                .iter()
                .map(|f| f.trim_start_matches("--allow "))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        judge_compose(&hardened(), m, "app", &places(), &grants).unwrap()
    }

    fn model(services: Value) -> Value {
        json!({"name": "p", "services": services})
    }

    fn hardened() -> SecurityProfile {
        SecurityProfile::default()
    }

    fn refused(model: &Value, grants: &Grants) -> Vec<(String, String, RequestStatus)> {
        let err = judge_compose(&hardened(), model, "app", &places(), grants).unwrap_err();
        refused_requests(&err)
            .expect("a refusal")
            .iter()
            .filter(|r| r.status != RequestStatus::Granted)
            .map(|r| {
                (
                    r.permission
                        .grant_flag()
                        .unwrap_or_else(|| r.permission.to_string()),
                    r.source.to_string(),
                    r.status,
                )
            })
            .collect()
    }

    /// `places()` with a real workspace folder `ws`.
    fn real_places(ws: &Path) -> Places {
        Places {
            workspace: resolve(ws).unwrap(),
            ..places()
        }
    }

    /// Attack (spec-note 0400, F1): a bind source inside the workspace that devcell cannot
    /// resolve (a link loop here; a link below a folder it cannot search in the attack, which
    /// the engine, root, follows to `/`) is a request never granted, read-only or not, not a
    /// path judged by its text.
    #[test]
    fn an_unresolvable_bind_source_is_a_request() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("repo");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink("loop", ws.join("loop")).unwrap();
        let source = ws.join("loop/hostroot").display().to_string();
        let m = model(json!({
            "app": {"image": "a"},
            "side": {"image": "s", "volumes": [
                {"type": "bind", "source": source, "target": "/host", "read_only": true}]}
        }));
        let all = Grants::parse(&["mount:/"]).unwrap();
        let err = judge_compose(&hardened(), &m, "app", &real_places(&ws), &all).unwrap_err();
        let requests = refused_requests(&err).expect("a refusal");
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(
            requests[0].permission,
            Permission::UnresolvablePath(source.clone())
        );
        assert_eq!(requests[0].status, RequestStatus::Forbidden);
        assert_eq!(requests[0].permission.grant_flag(), None);
    }

    /// Attack (spec-note 0400, F2): a bind-backed volume whose `device` goes through procfs
    /// (`/proc/self/cwd` is devcell's current folder, the workspace, for devcell, and the
    /// engine daemon's own for the engine) is refused, never judged as devcell's view.
    #[test]
    fn a_volume_device_through_proc_self_is_refused() {
        let cwd = std::env::current_dir().unwrap();
        for device in [
            "/proc/self/cwd",
            "/proc/thread-self/cwd",
            "/dev/fd/../../proc/self/root",
        ] {
            let mut m = model(json!({
                "app": {"image": "a"},
                "side": {"image": "s", "volumes": [
                    {"type": "volume", "source": "hostroot", "target": "/h", "read_only": true}]}
            }));
            m["volumes"] = json!({"hostroot": {"driver_opts": {"type": "none", "o": "bind", "device": device}}});
            let err = judge_compose(
                &hardened(),
                &m,
                "app",
                &real_places(&cwd),
                &Grants::default(),
            )
            .unwrap_err();
            let requests = refused_requests(&err).expect("a refusal");
            assert!(
                requests.iter().any(|r| r.permission
                    == Permission::UnresolvablePath(device.to_string())
                    && r.status == RequestStatus::Forbidden),
                "{device}: {requests:?}"
            );
        }
    }

    /// Attack (spec-note 0400, F0): a pid (or ipc) namespace shared with another service of
    /// the project, the primary's included in either direction, is a `namespace:` request: a
    /// peer in the primary's pid namespace reaches its mounts through `/proc/<pid>/root`.
    #[test]
    fn a_pid_service_link_with_the_primary_is_a_request() {
        for (app, side) in [
            (
                json!({"image": "a", "pid": "service:side"}),
                json!({"image": "s"}),
            ),
            (
                json!({"image": "a"}),
                json!({"image": "s", "pid": "service:app"}),
            ),
            (
                json!({"image": "a"}),
                json!({"image": "s", "ipc": "service:app"}),
            ),
        ] {
            let m = model(json!({"app": app, "side": side}));
            let got = refused(&m, &Grants::default());
            assert_eq!(got.len(), 1, "{got:?}");
            assert!(got[0].0.starts_with("--allow namespace:"), "{got:?}");
            let flag = got[0].0.clone();
            assert!(
                judge_compose(
                    &hardened(),
                    &m,
                    "app",
                    &places(),
                    &Grants::parse(&[flag.trim_start_matches("--allow ")]).unwrap()
                )
                .is_ok()
            );
        }
    }

    /// Attack (spec-note 0400, F5): a sidecar's `restart` policy (or `deploy.restart_policy`)
    /// is overridden to `no`, so the engine never starts it again outside a handoff.
    #[test]
    fn a_restart_policy_is_a_request_or_overridden() {
        let m = model(json!({
            "app": {"image": "a", "restart": "always"},
            "side": {"image": "s", "restart": "unless-stopped"},
            "swarmish": {"image": "s", "deploy": {"restart_policy": {"condition": "any"}}}
        }));
        let j = judge_compose(&hardened(), &m, "app", &places(), &Grants::default()).unwrap();
        assert_eq!(j.sidecars["side"]["restart"], "no");
        assert_eq!(j.sidecars["swarmish"]["restart"], "no");
        // the primary's comes from devcell's own override
        let file = crate::engine::compose::override_file(
            "app",
            &crate::engine::ContainerSpec::default(),
            &j.sidecars,
            false,
        );
        assert_eq!(file["services"]["app"]["restart"], "no");
        assert_eq!(file["services"]["side"]["restart"], "no");
    }

    #[test]
    fn an_ordinary_project_passes_and_sidecars_get_the_profile() {
        let m = model(json!({
            "app": {"image": "a", "volumes": [
                {"type": "bind", "source": "/w/repo", "target": "/workspace"},
                {"type": "volume", "source": "data", "target": "/data"}]},
            "db": {"image": "postgres", "user": "root", "mem_limit": "536870912",
                   "ports": [{"target": 5432, "published": "5432", "host_ip": "127.0.0.1"}],
                   "network_mode": "service:app"}
        }));
        let j = judge_compose(&hardened(), &m, "app", &places(), &Grants::default()).unwrap();
        assert!(j.requests.is_empty(), "{:?}", j.requests);
        assert!(j.sidecars.get("app").is_none());
        let db = &j.sidecars["db"];
        assert_eq!(db["security_opt"], json!(["no-new-privileges:true"]));
        assert_eq!(db["pids_limit"], 1024);
        assert_eq!(db["mem_limit"], 536_870_912);
        assert_eq!(db["cpus"], 2.0);
    }

    /// A sidecar with a writable bind (or a bind-backed volume) runs as the workspace user
    /// without the capabilities that give files away, keep set-uid bits or make devices; a
    /// read-only bind, a named volume and the primary are left alone; the grant keeps the
    /// image's user and is reported.
    #[test]
    fn sidecars_that_write_host_paths_lose_root_and_file_capabilities() {
        use crate::config::ownership::Ids;
        let m = json!({"name": "p", "services": {
            "app": {"image": "a", "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}]},
            "writer": {"image": "w", "cap_add": ["chown"],
                       "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}]},
            "backed": {"image": "b", "volumes": [{"type": "volume", "source": "hostdir", "target": "/d"}]},
            "reader": {"image": "r", "volumes": [
                {"type": "bind", "source": "/w/repo", "target": "/w", "read_only": true},
                {"type": "volume", "source": "data", "target": "/data"}]}
        }, "volumes": {"hostdir": {"driver_opts": {"type": "none", "o": "bind", "device": "/w/repo/d"}},
                       "data": {}}});
        let services = &m["services"];
        assert!(writes_host_path(&m, &services["writer"]));
        assert!(writes_host_path(&m, &services["backed"]));
        assert!(!writes_host_path(&m, &services["reader"]));

        let restrict = host_writer_additions(
            &services["writer"],
            Some(Ids {
                uid: 1000,
                gid: 100,
            }),
        );
        assert_eq!(restrict["user"], "1000:100");
        let dropped = json::strings(restrict.get("cap_drop"));
        for cap in [
            "MKNOD",
            "FSETID",
            "FOWNER",
            "SETUID",
            "SETGID",
            "DAC_OVERRIDE",
        ] {
            assert!(dropped.iter().any(|c| c == cap), "{cap}: {dropped:?}");
        }
        // a capability the service adds (a request of its own) is not dropped again
        assert!(!dropped.iter().any(|c| c == "CHOWN"), "{dropped:?}");
        // no workspace user (everything is root): capabilities only
        let root_only = host_writer_additions(&services["backed"], None);
        assert!(root_only.get("user").is_none());
        assert_eq!(
            json::strings(root_only.get("cap_drop")).len(),
            HOST_WRITER_CAP_DROP.len()
        );

        let j = judged_with_flags(&m, &["--allow cap:CHOWN"]);
        for writer in ["writer", "backed"] {
            assert!(j.sidecars[writer].get("cap_drop").is_some(), "{writer}");
        }
        assert!(j.sidecars["reader"].get("cap_drop").is_none());
        assert!(j.sidecars["reader"].get("user").is_none());
        assert!(j.sidecars.get("app").is_none());

        let granted = judged_with_flags(
            &m,
            &[
                "--allow cap:CHOWN",
                "--allow runtime-option:keep_image_user=writer",
            ],
        );
        assert!(granted.sidecars["writer"].get("cap_drop").is_none());
        assert!(granted.sidecars["writer"].get("user").is_none());
        assert!(granted.sidecars["backed"].get("cap_drop").is_some());
        assert!(granted.requests.iter().any(
            |r| r.permission == keep_image_user("writer") && r.status == RequestStatus::Granted
        ));
        // `reference` adds nothing
        let reference = judge_compose(
            &SecurityProfile::Reference,
            &m,
            "app",
            &places(),
            &Grants::default(),
        )
        .unwrap();
        assert!(reference.sidecars.is_empty());
    }

    /// Each resource that reaches past the project is a `runtime-option` request naming the
    /// service and property, granted by its flag; a plain bridge network with a free subnet,
    /// one replica and an ordinary image are none.
    #[test]
    fn resources_reaching_past_the_project_are_requests() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Dockerfile"),
            "FROM a\nRUN --mount=type=cache,target=/root/.cache true\n",
        )
        .unwrap();
        let ctx = dir.path().to_string_lossy().into_owned();
        let mut m = model(json!({
            "app": {"image": "a", "networks": {"lan": {}, "ok": {}, "near": {}}},
            "db": {"image": "vsc-otherrepo-0123", "scale": 3, "oom_kill_disable": true,
                   "memswap_limit": -1, "cpu_rt_runtime": 95000,
                   "external_links": ["victim-db-1:db"], "networks": {"opts": {}, "v6": {}}},
            "web": {"build": {"context": ctx, "ssh": ["default"]}, "deploy": {"replicas": 1}},
            "inline": {"build": {"context": ctx, "dockerfile_inline": "FROM a\nRUN --mount=type=cache,id=x,target=/c true\n"},
                       "image": "p-inline"},
            "plain": {"image": "docker.io/devcell/uid:k"}
        }));
        m["networks"] = json!({
            "lan": {"driver": "macvlan", "driver_opts": {"parent": "eth0"}},
            "ok": {"driver": "bridge", "ipam": {"config": [{"subnet": "10.250.0.0/24"}]}},
            "near": {"ipam": {"config": [{"subnet": "172.17.5.0/24"}]}},
            "opts": {"driver_opts": {"com.docker.network.bridge.name": "docker0"}},
            "v6": {"ipam": {"driver": "other", "config": [{"subnet": "fd00::/64"}]}}
        });
        let routes = [(0xAC11_0000, 0xFFFF_0000), (0, 0)];
        assert!(overlaps_a_route("172.17.5.0/24", &routes));
        assert!(overlaps_a_route("172.0.0.0/8", &routes));
        assert!(
            !overlaps_a_route("10.250.0.0/24", &routes),
            "the default route is left out"
        );
        assert!(overlaps_a_route("fd00::/64", &routes));
        let mut asked = Vec::new();
        for (name, service) in services_of(&m) {
            reach_requests(&m, name, service, &routes, &mut asked);
        }
        let mut got: Vec<String> = asked
            .iter()
            .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "--allow runtime-option:build_cache_mount=inline <- Compose service `inline` (`build.dockerfile`)",
                "--allow runtime-option:build_cache_mount=web <- Compose service `web` (`build.dockerfile`)",
                "--allow runtime-option:build_ssh=default <- Compose service `web` (`build.ssh`)",
                "--allow runtime-option:cpu_rt_runtime=95000 <- Compose service `db` (`cpu_rt_runtime`)",
                "--allow runtime-option:external_link=victim-db-1:db <- Compose service `db` (`external_links`)",
                "--allow runtime-option:image=docker.io/devcell/uid:k <- Compose service `plain` (`image`)",
                "--allow runtime-option:image=vsc-otherrepo-0123 <- Compose service `db` (`image`)",
                "--allow runtime-option:ipam_driver=other <- Compose service `db` (`networks`)",
                "--allow runtime-option:memswap_limit=-1 <- Compose service `db` (`memswap_limit`)",
                "--allow runtime-option:network_driver=macvlan <- Compose service `app` (`networks`)",
                "--allow runtime-option:network_driver_opt.com.docker.network.bridge.name=docker0 <- Compose service `db` (`networks`)",
                "--allow runtime-option:network_driver_opt.parent=eth0 <- Compose service `app` (`networks`)",
                "--allow runtime-option:network_subnet=172.17.5.0/24 <- Compose service `app` (`networks`)",
                "--allow runtime-option:network_subnet=fd00::/64 <- Compose service `db` (`networks`)",
                "--allow runtime-option:oom_kill_disable=true <- Compose service `db` (`oom_kill_disable`)",
                "--allow runtime-option:replicas=3 <- Compose service `db` (`deploy.replicas`)",
            ]
        );
        // through the policy: refused under `hardened`, each granted by its flag
        let flags: Vec<String> = got
            .iter()
            .map(|g| g.split(" <- ").next().unwrap().to_string())
            .collect();
        assert!(!refused(&m, &Grants::default()).is_empty());
        let mount = format!("mount:{ctx}");
        let mut grants: Vec<&str> = flags
            .iter()
            .map(|f| f.trim_start_matches("--allow "))
            .collect();
        grants.push(&mount);
        let judged = judge_compose(
            &hardened(),
            &m,
            "app",
            &places(),
            &Grants::parse(&grants).unwrap(),
        );
        // the subnet of the host's own routes is read from this machine: grant what it asks
        if let Err(e) = &judged {
            let left: Vec<String> = refused_requests(e)
                .unwrap()
                .iter()
                .filter(|r| r.status != RequestStatus::Granted)
                .map(|r| r.permission.grant_flag().unwrap())
                .collect();
            assert!(left.iter().all(|f| f.contains("network_")), "{left:?}");
        }
        assert!(has_cache_mount("RUN --MOUNT=\"type=cache,target=/x\" make"));
        assert!(!has_cache_mount(
            "RUN --mount=type=secret,id=a cat /run/secrets/a"
        ));
        assert!(is_devcell_image_name("library/vsc-x-1"));
        assert!(!is_devcell_image_name("postgres:16"));
    }

    /// Attacks (spec-notes 0611, 0612): a supplementary group (`group_add: ["0"]`) lets a
    /// sidecar leave a set-gid-root file in a bound folder without a capability; a log driver
    /// or option that names an address has the engine deliver the output past network
    /// `none`. Each is a request naming the service; local drivers' size and metadata options
    /// are none.
    #[test]
    fn group_add_and_logging_are_requests() {
        let m = model(json!({
            "app": {"image": "a", "logging": {"driver": "json-file",
                    "options": {"max-size": "10m", "max-file": "3", "tag": "x"}}},
            "side": {"image": "s", "group_add": ["0", 27],
                     "logging": {"driver": "syslog",
                                 "options": {"syslog-address": "tcp://127.0.0.1:5514"}}},
            "local": {"image": "l", "logging": {"driver": "local",
                      "options": {"fluentd-address": "127.0.0.1:24224", "compress": "true"}}},
            "legacy": {"image": "g", "log_driver": "gelf",
                       "log_opt": {"gelf-address": "udp://127.0.0.1:12201"}},
            "quiet": {"image": "q", "logging": {"driver": "none"}}
        }));
        let mut asked = Vec::new();
        for (name, service) in services_of(&m) {
            reach_requests(&m, name, service, &[], &mut asked);
        }
        let mut got: Vec<String> = asked
            .iter()
            .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "--allow runtime-option:group_add=side:0 <- Compose service `side` (`group_add`)",
                "--allow runtime-option:group_add=side:27 <- Compose service `side` (`group_add`)",
                "--allow runtime-option:logging_driver=gelf <- Compose service `legacy` (`logging`)",
                "--allow runtime-option:logging_driver=syslog <- Compose service `side` (`logging`)",
                "--allow runtime-option:logging_opt.fluentd-address=127.0.0.1:24224 <- Compose service `local` (`logging`)",
                "--allow runtime-option:logging_opt.gelf-address=udp://127.0.0.1:12201 <- Compose service `legacy` (`logging`)",
                "--allow runtime-option:logging_opt.syslog-address=tcp://127.0.0.1:5514 <- Compose service `side` (`logging`)",
            ]
        );
        // refused under `hardened` without grants; each granted by its flag
        let refused_flags: Vec<String> = refused(&m, &Grants::default())
            .into_iter()
            .map(|(f, _, _)| f)
            .collect();
        assert_eq!(refused_flags.len(), got.len(), "{refused_flags:?}");
        let flags: Vec<&str> = got
            .iter()
            .map(|g| g.split(" <- ").next().unwrap())
            .collect();
        let j = judged_with_flags(&m, &flags);
        assert_eq!(j.requests.len(), got.len());
    }

    /// Attack (spec-note 0612): a cache mount spelled over continued lines, through a comment
    /// inside the instruction, with a `# escape=` directive or a build argument is still one;
    /// a Dockerfile that cannot be read (not a file, above the size limit) counts as one; a
    /// missing default `Dockerfile` has its lowercase `dockerfile` judged.
    #[test]
    fn cache_mounts_are_found_across_lines_and_unreadable_dockerfiles_count() {
        assert!(has_cache_mount(
            "FROM a\nRUN --mount=type=\\\ncache,id=shared,target=/c true\n"
        ));
        assert!(has_cache_mount(
            "FROM a\nRUN --mount=type=ca\\  \n# note\n\nche,target=/c true\n"
        ));
        assert!(has_cache_mount(
            "# syntax=docker/dockerfile:1\n# escape=`\nFROM a\nRUN --mount=type=`\ncache,target=/c true\n"
        ));
        assert!(has_cache_mount(
            "ARG T=cache\nRUN --mount=type=$T,target=/c true\n"
        ));
        assert!(has_cache_mount(
            "RUN --mount=\"type=ca\\che,target=/c\" true\n"
        ));
        assert!(!has_cache_mount(
            "FROM a\nRUN --mount=type=secret,id=a \\\n  cat /run/secrets/a $HOME\n"
        ));
        // with a backtick escape a backslash ends nothing
        assert!(!has_cache_mount(
            "# escape=`\nFROM a\nRUN --mount=type=\\\ncache true\n"
        ));

        let uses = |dir: &Path| {
            build_uses_cache_mount(
                &json!({"context": dir.to_string_lossy(), "dockerfile": "Dockerfile"}),
            )
        };
        let dir = tempfile::tempdir().unwrap();
        assert!(
            !uses(dir.path()),
            "no Dockerfile: the build fails, no request"
        );
        std::fs::write(
            dir.path().join("dockerfile"),
            "RUN --mount=type=cache,target=/c x\n",
        )
        .unwrap();
        assert!(uses(dir.path()), "the lowercase fallback is judged");
        std::fs::remove_file(dir.path().join("dockerfile")).unwrap();
        std::fs::create_dir(dir.path().join("Dockerfile")).unwrap();
        assert!(uses(dir.path()), "unreadable counts as a cache mount");
        std::fs::remove_dir(dir.path().join("Dockerfile")).unwrap();
        let big = std::fs::File::create(dir.path().join("Dockerfile")).unwrap();
        big.set_len(DOCKERFILE_MAX + 1).unwrap();
        assert!(
            uses(dir.path()),
            "above the size limit counts as a cache mount"
        );
        big.set_len(16).unwrap();
        assert!(!uses(dir.path()));
    }

    /// Attack (spec-note 0611, G4): `volumes_from: [app]` gives a root sidecar every mount of
    /// the primary, the workspace bind read-write, though it binds nothing itself. It is a
    /// request, and a host writer: granted, it still runs as the workspace user without the
    /// file capabilities. So is a service taking a `container:`'s mounts, a pid, ipc or network
    /// peer of a writer (either way) and, transitively, a `volumes_from` of those; `:ro` and a
    /// source that writes no host path ask nothing and leave the sidecar as it was.
    #[test]
    fn volumes_from_a_workspace_writer_is_a_writer() {
        let m = json!({"name": "p", "services": {
            "app": {"image": "a", "volumes": [{"type": "bind", "source": "/w/repo", "target": "/w"}]},
            "side": {"image": "b", "user": "0:0", "volumes_from": ["app"]},
            "chained": {"image": "b", "volumes_from": ["side:rw"]},
            "box": {"image": "b", "volumes_from": ["container:elsewhere"]},
            "pidpeer": {"image": "b", "pid": "service:side"},
            "joined": {"image": "b"},
            "joiner": {"image": "b", "volumes_from": ["app"], "network_mode": "service:joined"},
            "reader": {"image": "b", "volumes_from": ["app:ro"]},
            "db": {"image": "d", "volumes": [{"type": "volume", "source": "data", "target": "/d"}]},
            "fromdb": {"image": "b", "volumes_from": ["db"]}
        }, "volumes": {"data": {}}});
        let writers = host_writers(&m, "app");
        for w in [
            "app", "side", "chained", "box", "pidpeer", "joined", "joiner",
        ] {
            assert!(writers.contains(w), "{w}: {writers:?}");
        }
        for n in ["reader", "db", "fromdb"] {
            assert!(!writers.contains(n), "{n}: {writers:?}");
        }
        // the primary is a writer even when the model binds nothing into it
        let bare =
            model(json!({"app": {"image": "a"}, "side": {"image": "b", "volumes_from": ["app"]}}));
        assert!(host_writers(&bare, "app").contains("side"));

        let got = refused(&m, &Grants::default());
        let mut flags: Vec<&str> = got.iter().map(|(f, _, _)| f.as_str()).collect();
        flags.sort();
        flags.dedup();
        assert_eq!(
            flags,
            [
                "--allow namespace:pid:service:side",
                "--allow namespace:volumes_from:app",
                "--allow namespace:volumes_from:container:elsewhere",
                "--allow namespace:volumes_from:side",
            ]
        );
        assert!(
            got.iter()
                .any(|(f, s, _)| f == "--allow namespace:volumes_from:app"
                    && s == "Compose service `side` (`volumes_from`)")
        );
        let j = judged_with_flags(&m, &flags);
        for w in ["side", "chained", "box", "pidpeer", "joined", "joiner"] {
            let dropped = json::strings(j.sidecars[w].get("cap_drop"));
            for cap in ["MKNOD", "FSETID", "CHOWN", "SETUID"] {
                assert!(dropped.iter().any(|c| c == cap), "{w} keeps {cap}");
            }
        }
        for n in ["reader", "db", "fromdb"] {
            assert!(j.sidecars[n].get("cap_drop").is_none(), "{n}");
        }
        // keeping the image's user stays a grant of its own
        let mut kept = flags.clone();
        kept.push("--allow runtime-option:keep_image_user=side");
        let j = judged_with_flags(&m, &kept);
        assert!(j.sidecars["side"].get("cap_drop").is_none());
        assert!(j.sidecars["chained"].get("cap_drop").is_some());
    }

    #[test]
    fn each_escape_is_a_request_naming_the_service_and_property() {
        let m = model(json!({
            "app": {"image": "a"},
            "db": {"image": "d", "privileged": true, "cap_add": ["cap_net_admin"],
                   "network_mode": "host", "pid": "host", "ipc": "container:x",
                   "userns_mode": "host", "devices": [{"source": "/dev/fuse", "target": "/dev/fuse"}],
                   "device_cgroup_rules": ["c 1:3 mr"],
                   "security_opt": ["seccomp=unconfined", "no-new-privileges:true"],
                   "volumes_from": ["container:other", "app"],
                   "ports": [{"target": 80, "published": "8080"}]}
        }));
        let got = refused(&m, &Grants::default());
        let mut flags: Vec<&str> = got.iter().map(|(f, _, _)| f.as_str()).collect();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--allow cap:NET_ADMIN",
                "--allow device-cgroup-rule:c 1:3 mr",
                "--allow device:/dev/fuse",
                "--allow namespace:ipc:container:x",
                "--allow namespace:pid:host",
                "--allow namespace:userns:host",
                "--allow namespace:volumes_from:app",
                "--allow namespace:volumes_from:container:other",
                "--allow network:host",
                "--allow privileged",
                "--allow publish:0.0.0.0:8080",
                "--allow security-opt:seccomp=unconfined",
            ]
        );
        assert!(got.iter().all(
            |(_, s, st)| s.starts_with("Compose service `db`") && *st == RequestStatus::Refused
        ));
        assert!(
            got.iter()
                .any(|(_, s, _)| s == "Compose service `db` (`pid`)")
        );
        // each granted with its --allow
        let j = judged_with_flags(&m, &flags);
        assert_eq!(j.requests.len(), 12);
        assert!(
            j.requests
                .iter()
                .all(|r| r.status == RequestStatus::Granted)
        );
    }

    /// Attacks (spec-note 0400): a build reading host folders and files through properties
    /// other than `context`, and engine options that change the isolation.
    #[test]
    fn build_side_doors_and_engine_options_are_requests() {
        let mut m = model(json!({
            "app": {"image": "a", "build": {"context": "/w/repo", "dockerfile": "Dockerfile",
                "additional_contexts": {"keys": "/home/dev/.ssh", "img": "docker-image://alpine",
                                        "own": "/w/repo/sub"},
                "secrets": [{"source": "hs"}],
                "cache_from": ["type=local,src=/srv/cache", "type=registry,ref=x"],
                "cache_to": ["type=local,dest=/etc/cron.d"]}},
            "db": {"image": "d", "runtime": "sysbox-runc", "cgroup_parent": "/",
                   "sysctls": {"net.core.somaxconn": "1024"}, "oom_score_adj": -1000},
            "ok": {"image": "d", "runtime": "runc", "oom_score_adj": 500}
        }));
        m["secrets"] = json!({"hs": {"name": "p_hs", "file": "/home/dev/.aws/credentials"}});
        let got = refused(&m, &Grants::default());
        let mut flags: Vec<&str> = got.iter().map(|(f, _, _)| f.as_str()).collect();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--allow image-tag:a",
                "--allow mount:/etc/cron.d",
                "--allow mount:/home/dev/.aws/credentials",
                "--allow mount:/home/dev/.ssh",
                "--allow mount:/srv/cache",
                "--allow runtime-option:cgroup_parent=/",
                "--allow runtime-option:oom_score_adj=-1000",
                "--allow runtime-option:runtime=sysbox-runc",
                "--allow runtime-option:sysctl.net.core.somaxconn=1024",
            ]
        );
        assert!(got.iter().any(|(f, s, _)| f == "--allow mount:/etc/cron.d"
            && s == "Compose service `app` (`build.cache_to`)"));
        assert!(
            got.iter()
                .any(|(f, s, _)| f == "--allow mount:/home/dev/.ssh"
                    && s == "Compose service `app` (`build.additional_contexts`)")
        );
        assert!(got.iter().any(
            |(f, s, _)| f == "--allow runtime-option:runtime=sysbox-runc"
                && s == "Compose service `db` (`runtime`)"
        ));
        let j = judged_with_flags(&m, &flags);
        assert_eq!(j.requests.len(), 9);
        assert!(Grants::parse(&["runtime-option:"]).is_err());
    }

    /// Attack (spec-note 0400): `env_file` naming a host file reads it into the container's
    /// environment.
    #[test]
    fn env_files_outside_the_workspace_are_requests() {
        let m = model(json!({
            "app": {"image": "a", "env_file": [{"path": "/w/repo/.env", "required": true}]},
            "db": {"image": "d", "env_file": [
                {"path": "/home/dev/.aws/credentials", "required": false},
                {"path": "/w/repo/${HOME}/.netrc", "required": true},
                "/home/dev"]}
        }));
        let got = refused(&m, &Grants::default());
        let flags: Vec<(&str, RequestStatus)> =
            got.iter().map(|(f, _, st)| (f.as_str(), *st)).collect();
        assert_eq!(
            flags,
            [
                (
                    "--allow mount:/home/dev/.aws/credentials",
                    RequestStatus::Refused
                ),
                (
                    "--allow mount:/w/repo/${HOME}/.netrc",
                    RequestStatus::Refused
                ),
                (
                    "mount of the host home folder (or a folder holding it) `/home/dev`",
                    RequestStatus::Forbidden
                ),
            ]
        );
        assert!(
            got.iter()
                .all(|(_, s, _)| s == "Compose service `db` (`env_file`)")
        );
    }

    #[test]
    fn binds_are_judged_where_they_land() {
        let m = model(json!({
            "app": {"image": "a", "volumes": [
                {"type": "bind", "source": "/w/repo/../other", "target": "/o"}]},
            "db": {"image": "d", "volumes": [
                {"type": "bind", "source": "/run/docker.sock", "target": "/s"},
                {"type": "bind", "source": "/home/dev", "target": "/h"},
                {"type": "bind", "source": "/", "target": "/host"},
                {"type": "bind", "source": "/home/dev/cache", "target": "/c"},
                {"type": "volume", "source": "disguised", "target": "/d"}]}
        }));
        let mut m = m;
        m["volumes"] =
            json!({"disguised": {"driver_opts": {"type": "none", "o": "bind", "device": "/etc"}}});
        let got = refused(&m, &Grants::default());
        let seen: Vec<(String, &str)> = got
            .iter()
            .map(|(f, s, st)| {
                (
                    f.clone(),
                    if *st == RequestStatus::Forbidden {
                        "never"
                    } else {
                        s.as_str()
                    },
                )
            })
            .collect();
        assert!(
            seen.contains(&(
                "--allow mount:/w/other".into(),
                "Compose service `app` (`volumes`)"
            )),
            "{seen:?}"
        );
        assert!(
            seen.contains(&(
                "mount of the container engine socket `/run/docker.sock`".into(),
                "never"
            )),
            "{seen:?}"
        );
        assert!(
            seen.contains(&(
                "mount of the host home folder (or a folder holding it) `/home/dev`".into(),
                "never"
            )),
            "{seen:?}"
        );
        assert!(
            seen.contains(&(
                "mount of the host home folder (or a folder holding it) `/`".into(),
                "never"
            )),
            "{seen:?}"
        );
        assert!(
            seen.contains(&(
                "--allow mount:/home/dev/cache".into(),
                "Compose service `db` (`volumes`)"
            )),
            "{seen:?}"
        );
        assert!(
            seen.contains(&(
                "--allow mount:/etc".into(),
                "Compose service `db` (`volumes`)"
            )),
            "{seen:?}"
        );
        // the engine socket and the home folder stay refused whatever is granted
        let grants = Grants::parse(&["mount:/", "mount:/home/dev", "mount:/run"]).unwrap();
        let err = judge_compose(&hardened(), &m, "app", &places(), &grants).unwrap_err();
        let left: Vec<_> = refused_requests(&err)
            .unwrap()
            .iter()
            .filter(|r| r.status != RequestStatus::Granted)
            .map(|r| r.permission.kind())
            .collect();
        assert_eq!(left, ["engineSocket", "hostHome", "hostHome"]);
    }

    /// Attack (spec-note 0601): a build context the engine would fetch on the host's
    /// network (git or HTTP URLs, as Compose's model keeps them) is a request, never fetched
    /// by default; its Dockerfile is the remote's, not a host path.
    /// Compose keys that reach the host or run before devcell's checks: the engine's API
    /// socket (never allowed), a provider (a host program), Compose's own lifecycle hooks, a
    /// volume whose driver options mount a device or an overlay.
    #[test]
    fn api_sockets_providers_compose_hooks_and_driver_mounts_are_requests() {
        let mut m = model(json!({
            "app": {"image": "a",
                    "post_start": [{"command": ["id"], "user": "root"}],
                    "volumes": [{"type": "volume", "source": "hostview", "target": "/h"},
                                {"type": "volume", "source": "plain", "target": "/p"}]},
            "side": {"image": "b", "use_api_socket": true, "pre_stop": [{"command": ["x"]}]},
            "thing": {"provider": {"type": "/bin/sh", "options": {}}}
        }));
        m["volumes"] = json!({
            "hostview": {"driver_opts": {"type": "ext4", "device": "/dev/vda", "o": "rw"}},
            "plain": {}
        });
        let got = refused(&m, &Grants::default());
        let has = |service: &str, asked: &str| {
            got.iter()
                .any(|(g, source, _)| g.contains(asked) && source.contains(&format!("`{service}`")))
        };
        assert!(
            has("app", "--allow runtime-option:compose_hook=post_start"),
            "{got:?}"
        );
        assert!(has("app", "--allow mount:/dev/vda"), "{got:?}");
        assert!(!got.iter().any(|(g, _, _)| g.contains("plain")), "{got:?}");
        assert!(has("side", "use_api_socket"), "{got:?}");
        assert!(
            has("side", "--allow runtime-option:compose_hook=pre_stop"),
            "{got:?}"
        );
        assert!(has("thing", "--allow host-command"), "{got:?}");
        // the socket is never granted
        let all = Grants::parse(&[
            "runtime-option:compose_hook=post_start",
            "runtime-option:compose_hook=pre_stop",
            "host-command",
            "mount:/dev/vda",
        ])
        .unwrap();
        let left = refused(&m, &all);
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].0.contains("use_api_socket"), "{left:?}");
    }

    #[test]
    fn remote_build_contexts_are_requests() {
        let m = model(json!({
            "app": {"build": {"context": "https://git.example.test/o/r.git#main",
                              "dockerfile": "Dockerfile"}},
            "b": {"build": {"context": "git@git.example.test:o/r.git", "dockerfile": "/etc/x"}},
            "c": {"build": {"context": "git.example.test/o/r"}},
            "d": {"build": {"context": "/w/repo", "additional_contexts": {
                "img": "docker-image://alpine", "web": "https://git.example.test/o/s.git",
                "lay": "oci-layout:///srv/layout", "own": "oci-layout:///w/repo/l"}}}
        }));
        let got = refused(&m, &Grants::default());
        let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--allow build-context:git.example.test/o/r <- Compose service `c` (`build.context`)",
                "--allow build-context:git@git.example.test:o/r.git <- Compose service `b` (`build.context`)",
                "--allow build-context:https://git.example.test/o/r.git#main <- Compose service `app` (`build.context`)",
                "--allow build-context:https://git.example.test/o/s.git <- Compose service `d` (`build.additional_contexts`)",
                "--allow mount:/srv/layout <- Compose service `d` (`build.additional_contexts`)",
            ]
        );
        let grants = Grants::parse(&[
            "build-context:https://git.example.test/o/r.git#main",
            "build-context:git@git.example.test:o/r.git",
            "build-context:git.example.test/o/r",
            "build-context:https://git.example.test/o/s.git",
            "mount:/srv/layout",
        ])
        .unwrap();
        let judged = judge_compose(&hardened(), &m, "app", &places(), &grants).expect("granted");
        assert_eq!(
            judged
                .requests
                .iter()
                .filter(|r| r.permission.kind() == "remoteBuildContext")
                .count(),
            4
        );
    }

    #[test]
    fn secrets_networks_labels_and_builds() {
        let mut m = model(json!({
            "app": {"image": "a", "labels": {"devcontainer.local_folder": "/x"},
                    "build": {"context": "/srv/ctx", "dockerfile": "Dockerfile", "network": "host"}},
            "db": {"image": "d", "secrets": [{"source": "s"}, {"source": "t"}],
                   "networks": {"ext": null, "default": null}}
        }));
        m["secrets"] = json!({"s": {"file": "/etc/shadow"}, "t": {"environment": "AWS_SECRET"}});
        m["networks"] = json!({"ext": {"name": "othernet", "external": true}, "default": {"name": "p_default"}});
        let got = refused(&m, &Grants::default());
        let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--allow env:AWS_SECRET <- Compose service `db` (`secrets`)",
                "--allow image-tag:a <- Compose service `app` (`build`)",
                "--allow mount:/etc/shadow <- Compose service `db` (`secrets`)",
                "--allow mount:/srv/ctx <- Compose service `app` (`build.context`)",
                "--allow mount:/srv/ctx/Dockerfile <- Compose service `app` (`build.dockerfile`)",
                "--allow network:host <- Compose service `app` (`build.network`)",
                "--allow network:othernet <- Compose service `db` (`networks`)",
                "identity label `devcontainer.local_folder` set by the repository <- Compose service `app` (`labels`)",
            ]
        );
    }

    /// Attack (spec-note 0400): a build's `image` or `build.tags` moves a tag another
    /// workspace (or the engine's cache of a public image) names to the repository's build;
    /// Compose's own `<project>-<service>` and an `image` without `build` are not requests.
    #[test]
    fn tags_a_compose_build_gives_its_image_are_requests() {
        let m = model(json!({
            "app": {"image": "postgres:16", "build": {"context": "/w/repo",
                    "tags": ["p-app:v2", "victim-app"]}},
            "own": {"image": "p-own", "build": {"context": "/w/repo"}},
            "own2": {"image": "p-own2:latest", "build": {"context": "/w/repo"}},
            "plain": {"image": "postgres:16"},
            "untagged": {"build": {"context": "/w/repo"}}
        }));
        let got = refused(&m, &Grants::default());
        let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--allow image-tag:p-app:v2 <- Compose service `app` (`build`)",
                "--allow image-tag:postgres:16 <- Compose service `app` (`build`)",
                "--allow image-tag:victim-app <- Compose service `app` (`build`)",
            ]
        );
        let grants = Grants::parse(&[
            "image-tag:postgres:16",
            "image-tag:p-app:v2",
            "image-tag:victim-app",
        ])
        .unwrap();
        assert!(judge_compose(&hardened(), &m, "app", &places(), &grants).is_ok());
        let reference = judge_compose(
            &SecurityProfile::Reference,
            &m,
            "app",
            &places(),
            &Grants::default(),
        )
        .unwrap();
        assert!(
            reference
                .requests
                .iter()
                .all(|r| r.status == RequestStatus::AllowedByProfile)
        );
    }

    /// Attack (spec-note 0400): `ulimits` giving an unprivileged process real-time scheduling
    /// or a raised priority, which the CPU limit does not bound.
    #[test]
    fn ulimits_beyond_the_cpu_limit_are_requests() {
        let m = model(json!({
            "app": {"image": "a", "ulimits": {"rtprio": 99, "nofile": {"soft": 1024, "hard": 4096}}},
            "db": {"image": "d", "ulimits": {"nice": {"soft": 0, "hard": 40}, "rtprio": 0,
                   "core": -1}}
        }));
        let got = refused(&m, &Grants::default());
        let mut flags: Vec<String> = got.iter().map(|(f, s, _)| format!("{f} <- {s}")).collect();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--allow runtime-option:ulimit.nice=40 <- Compose service `db` (`ulimits`)",
                "--allow runtime-option:ulimit.rtprio=99 <- Compose service `app` (`ulimits`)",
            ]
        );
        let grants = Grants::parse(&[
            "runtime-option:ulimit.rtprio=99",
            "runtime-option:ulimit.nice=40",
        ])
        .unwrap();
        assert!(judge_compose(&hardened(), &m, "app", &places(), &grants).is_ok());
    }

    /// Attack (spec-note 0601): another project's volume or network named with `name:` (or
    /// an external volume) is mounted or joined by Compose with a warning only.
    #[test]
    fn foreign_volumes_and_networks_are_requests() {
        let mut m = model(json!({
            "app": {"image": "a", "volumes": [
                {"type": "volume", "source": "data", "target": "/d"},
                {"type": "volume", "source": "stolen", "target": "/s"},
                {"type": "bind", "source": "/w/repo", "target": "/w"}]},
            "db": {"image": "d", "volumes": [{"type": "volume", "source": "ext", "target": "/e"}],
                   "networks": {"other": null, "ext": null}},
            "host": {"image": "d", "network_mode": "host"}
        }));
        m["volumes"] = json!({"data": {"name": "p_data"}, "stolen": {"name": "victim_db"},
                              "ext": {"name": "shared", "external": true}});
        m["networks"] = json!({"default": {"name": "victim_default"}, "other": {"name": "p_other"},
                               "ext": {"name": "victim_default", "external": true}});
        let (mut volumes, mut networks) = resource_names(&m);
        volumes.sort();
        networks.sort();
        assert_eq!(volumes, ["p_data", "shared", "victim_db"]);
        assert_eq!(networks, ["p_other", "victim_default", "victim_default"]);
        let foreign = ForeignResources {
            volumes: ["victim_db", "shared"].map(String::from).into(),
            networks: ["victim_default"].map(String::from).into(),
        };
        let got = foreign_resource_requests(&hardened(), &m, &foreign, &Grants::default());
        let mut flags: Vec<String> = got
            .iter()
            .map(|r| {
                assert_eq!(r.status, RequestStatus::Refused);
                format!("{} <- {}", r.permission.grant_flag().unwrap(), r.source)
            })
            .collect();
        flags.sort();
        assert_eq!(
            flags,
            [
                "--allow network:victim_default <- Compose service `app` (`networks`)",
                "--allow volume:shared <- Compose service `db` (`volumes`)",
                "--allow volume:victim_db <- Compose service `app` (`volumes`)",
            ]
        );
        let grants = Grants::parse(&[
            "volume:victim_db",
            "volume:shared",
            "network:victim_default",
        ])
        .unwrap();
        assert!(
            foreign_resource_requests(&hardened(), &m, &foreign, &grants)
                .iter()
                .all(|r| r.status == RequestStatus::Granted)
        );
        assert!(
            foreign_resource_requests(&hardened(), &m, &ForeignResources::default(), &grants)
                .is_empty()
        );
    }

    #[test]
    fn sidecar_limits_are_the_lower_and_follow_deploy_spelling() {
        let limits = ProfileLimits::default();
        let own_higher = json!({"pids_limit": 99999, "cpus": 8, "mem_limit": "99999999999"});
        let a = sidecar_additions(&own_higher, &limits);
        assert_eq!(a["pids_limit"], 1024);
        assert_eq!(a["cpus"], 2.0);
        assert_eq!(a["mem_limit"], 4_i64 << 30);
        let own_deploy =
            json!({"deploy": {"resources": {"limits": {"memory": "1073741824", "cpus": 0.5}}}});
        let b = sidecar_additions(&own_deploy, &limits);
        assert_eq!(b["deploy"]["resources"]["limits"]["memory"], 1_073_741_824);
        assert_eq!(b["deploy"]["resources"]["limits"]["cpus"], 0.5);
        assert!(b.get("mem_limit").is_none() && b.get("cpus").is_none());
        assert_eq!(b["pids_limit"], 1024);
    }

    #[test]
    fn reference_allows_everything_and_adds_nothing() {
        let m = model(json!({
            "app": {"image": "a"},
            "db": {"image": "d", "privileged": true, "volumes": [
                {"type": "bind", "source": "/var/run/docker.sock", "target": "/s"}]}
        }));
        let j = judge_compose(
            &SecurityProfile::Reference,
            &m,
            "app",
            &places(),
            &Grants::default(),
        )
        .unwrap();
        assert_eq!(j.requests.len(), 2);
        assert!(
            j.requests
                .iter()
                .all(|r| r.status == RequestStatus::AllowedByProfile)
        );
        assert!(j.sidecars.is_empty());
    }
}
