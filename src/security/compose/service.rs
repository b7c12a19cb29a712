//! What one service's own properties ask for beyond the sidecar profile ([`service_requests`]):
//! a list of named steps, one per kind of property (privileges, namespaces, runtime options,
//! devices, volumes, files read into the container, networks and ports, identity labels, the
//! build). Each request names the service and the property ([`Source::ComposeService`]).

use std::path::Path;

use serde_json::Value;

use super::dockerfile::build_dockerfile;
use super::fields::{
    canonical, driver_mounted_volume, host_path_permission, is_remote_context, local_cache_path,
    mode_is_service, number, secret_requests, strings_of,
};
use crate::security::host_command;
use crate::security::host_path::Places;
use crate::security::policy::{
    Permission, Source, is_loopback_address, is_no_new_privileges, network_permission,
    normalize_cap, publish_address,
};

/// Where one service's requests go, each named by the service and its property.
struct Asked<'a> {
    service: &'a str,
    out: &'a mut Vec<(Permission, Source)>,
}

impl Asked<'_> {
    fn push(&mut self, permission: Permission, property: &str) {
        self.out.push((
            permission,
            Source::ComposeService {
                service: self.service.to_string(),
                property: property.to_string(),
            },
        ));
    }
}

/// The items of a list property of `service` (none when it is no list).
fn items<'a>(service: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    service
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The string property `key` of `service`.
fn str_of<'a>(service: &'a Value, key: &str) -> Option<&'a str> {
    service.get(key).and_then(Value::as_str)
}

/// Every request of the service `name` (`service`, of `model`), judged against `places`,
/// added to `out`.
pub(super) fn service_requests(
    model: &Value,
    name: &str,
    service: &Value,
    places: &Places,
    out: &mut Vec<(Permission, Source)>,
) {
    let asked = &mut Asked { service: name, out };
    privileges(service, places, asked);
    namespaces(service, asked);
    runtime_options(service, asked);
    volumes_from(service, asked);
    devices(service, asked);
    volumes(model, service, places, asked);
    files_read_in(model, service, places, asked);
    networks_and_ports(model, service, asked);
    identity_labels(service, asked);
    if let Some(build) = service.get("build") {
        build_tags(model, name, service, build, asked);
        build_sources(build, places, asked);
        build_privileges(name, build, asked);
        build_named_contexts(build, places, asked);
        build_secrets_and_cache(model, build, places, asked);
    }
}

/// Privileged mode, the engine's socket, a provider (a host program), Compose's own hooks,
/// added capabilities and security options.
fn privileges(service: &Value, places: &Places, asked: &mut Asked<'_>) {
    if service.get("privileged").and_then(Value::as_bool) == Some(true) {
        asked.push(Permission::Privileged, "privileged");
    }
    // Compose hands the engine's API socket to the service (and the host's registry
    // credentials with it): never allowed under `hardened`.
    if service.get("use_api_socket").and_then(Value::as_bool) == Some(true) {
        asked.push(
            Permission::EngineSocket("use_api_socket".to_string()),
            "use_api_socket",
        );
    }
    // A provider service is a host program Compose runs (`provider.type`, any executable on
    // the host's PATH or an absolute path), on the host, as the user running devcell.
    if let Some(provider) = service.get("provider") {
        let command =
            host_command::cover_provider(provider_command(provider), provider, &places.workspace);
        asked.push(Permission::HostCommand(command), "provider");
    }
    // Compose's own lifecycle hooks run commands in the container, as any user they name,
    // while `compose up` starts it: before devcell has checked who runs what in it.
    for key in ["post_start", "pre_stop"] {
        if service
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|hooks| !hooks.is_empty())
        {
            asked.push(
                Permission::RuntimeOption(format!("compose_hook={key}")),
                key,
            );
        }
    }
    for cap in strings_of(service, "cap_add") {
        asked.push(Permission::Capability(normalize_cap(&cap)), "cap_add");
    }
    for opt in strings_of(service, "security_opt") {
        if !is_no_new_privileges(&opt) {
            asked.push(Permission::SecurityOpt(opt), "security_opt");
        }
    }
}

/// Host and foreign namespaces, and those shared with another service of the project.
fn namespaces(service: &Value, asked: &mut Asked<'_>) {
    if let Some(mode) = str_of(service, "network_mode")
        && !mode.starts_with("service:")
        && let Some(p) = network_permission(mode)
    {
        asked.push(p, "network_mode");
    }
    // A network namespace shared with another service (`service:<x>`, either direction) is a
    // `namespace:` request like pid and ipc (spec-note 0400, F3): the peer reaches whatever
    // listens on the other's loopback and its abstract unix sockets (the agent's tools, a
    // debugger, a language server), which the namespace keeps from every other container.
    if let Some(mode) = str_of(service, "network_mode").filter(|m| mode_is_service(Some(m))) {
        asked.push(
            Permission::Namespace(format!("network:{mode}")),
            "network_mode",
        );
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
        let peer = matches!(kind, "pid" | "ipc") && mode_is_service(str_of(service, key));
        if let Some(mode) = str_of(service, key)
            && (mode == "host" || mode.starts_with("container:") || peer)
        {
            asked.push(Permission::Namespace(format!("{kind}:{mode}")), key);
        }
    }
}

/// What isolates the container and where the host accounts for it: another runtime than the
/// engine's default (`runc`), a cgroup parent outside the engine's, kernel parameters, an OOM
/// score that makes the host kill its own processes first, ulimits beyond the CPU limit.
fn runtime_options(service: &Value, asked: &mut Asked<'_>) {
    if let Some(runtime) = str_of(service, "runtime")
        && runtime != "runc"
    {
        asked.push(
            Permission::RuntimeOption(format!("runtime={runtime}")),
            "runtime",
        );
    }
    if let Some(parent) = str_of(service, "cgroup_parent").filter(|p| !p.is_empty()) {
        asked.push(
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
        asked.push(
            Permission::RuntimeOption(format!("sysctl.{name}={value}")),
            "sysctls",
        );
    }
    if let Some(adj) = service.get("oom_score_adj").and_then(number)
        && adj < 0.0
    {
        asked.push(
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
        if let Some(p) = crate::security::policy::ulimit_permission(limit, soft, hard) {
            asked.push(p, "ulimits");
        }
    }
}

/// Another container's volumes (`volumes_from: container:…`).
fn volumes_from(service: &Value, asked: &mut Asked<'_>) {
    for from in strings_of(service, "volumes_from") {
        if from.starts_with("container:") {
            asked.push(
                Permission::Namespace(format!("volumes_from:{from}")),
                "volumes_from",
            );
        }
    }
}

/// Host devices, device cgroup rules and GPUs.
fn devices(service: &Value, asked: &mut Asked<'_>) {
    for device in items(service, "devices") {
        let host = match device {
            Value::String(s) => s.split(':').next().unwrap_or_default().to_string(),
            other => other
                .get("source")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        };
        asked.push(Permission::Device(host), "devices");
    }
    for rule in strings_of(service, "device_cgroup_rules") {
        asked.push(Permission::DeviceCgroupRule(rule), "device_cgroup_rules");
    }
    for (permission, property) in crate::security::gpu::compose_device_requests(service) {
        asked.push(permission, property);
    }
}

/// Binds, bind-backed volumes and volumes whose driver options mount a host device or
/// folders, judged where they resolve.
fn volumes(model: &Value, service: &Value, places: &Places, asked: &mut Asked<'_>) {
    for v in items(service, "volumes") {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let source = v.get("source").and_then(Value::as_str);
        match (kind, source) {
            ("bind", Some(source)) => {
                if let Some(p) = host_path_permission(source, places) {
                    asked.push(p, "volumes");
                }
                // a shared or slave propagation carries mounts between the container and
                // the host folder (attacks H5): the engine's default is `rprivate`
                if let Some(propagation) = v.pointer("/bind/propagation").and_then(Value::as_str)
                    && !matches!(propagation, "" | "private" | "rprivate")
                {
                    let option = format!("bind_propagation={}:{propagation}", asked.service);
                    asked.push(Permission::RuntimeOption(option), "volumes");
                }
            }
            ("volume", Some(volume)) => {
                // a volume whose driver options bind a host folder is a bind
                // (with `volume.subpath`, of the folder inside it: attacks K5)
                if let Some(device) = crate::security::host_path::bind_backed_source(model, v) {
                    if let Some(p) = host_path_permission(&device, places) {
                        asked.push(p, "volumes");
                    }
                } else if let Some(mounted) = driver_mounted_volume(model, volume) {
                    // any other driver options mount what they name: a host device, an
                    // overlay of host folders
                    asked.push(mounted, "volumes");
                }
            }
            ("bind" | "volume" | "tmpfs", _) => {}
            (other, _) => asked.push(
                Permission::Mount(format!("{other}:{}", source.unwrap_or_default())),
                "volumes",
            ),
        }
    }
}

/// Host files read into the container: env files, and the files and host variables of
/// secrets and configs.
fn files_read_in(model: &Value, service: &Value, places: &Places, asked: &mut Asked<'_>) {
    // An env file's contents become the container's environment: a host file outside the
    // workspace read that way is read into the container.
    for item in items(service, "env_file") {
        let path = item
            .as_str()
            .or_else(|| item.get("path").and_then(Value::as_str));
        let Some(path) = path else { continue };
        if path.contains('$') {
            // written with `${…}`: where it lands is the host's to say, not placeable here
            asked.push(Permission::Mount(path.to_string()), "env_file");
        } else if let Some(p) = host_path_permission(path, places) {
            asked.push(p, "env_file");
        }
    }
    for (key, top) in [("secrets", "secrets"), ("configs", "configs")] {
        for item in items(service, key) {
            let Some(source) = item.get("source").and_then(Value::as_str) else {
                continue;
            };
            let Some(def) = model.get(top).and_then(|t| t.get(source)) else {
                continue;
            };
            secret_requests(def, places, key, &mut |p, k| asked.push(p, k));
        }
    }
}

/// The host network, external networks, and ports published beyond loopback.
fn networks_and_ports(model: &Value, service: &Value, asked: &mut Asked<'_>) {
    if let Some(networks) = service.get("networks").and_then(Value::as_object) {
        for key in networks.keys() {
            let def = model.get("networks").and_then(|n| n.get(key));
            let external =
                def.and_then(|d| d.get("external")).and_then(Value::as_bool) == Some(true);
            let driver = def.and_then(|d| d.get("driver")).and_then(Value::as_str);
            if driver == Some("host") {
                asked.push(Permission::HostNetwork, "networks");
            } else if external {
                let name = def
                    .and_then(|d| d.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or(key);
                asked.push(Permission::Network(name.to_string()), "networks");
            }
        }
    }
    for port in items(service, "ports") {
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
        asked.push(
            Permission::PublishPort(publish_address(ip, published)),
            "ports",
        );
    }
}

/// Labels that claim a dev container's identity (`devcontainer.*`, `devcell.*`).
fn identity_labels(service: &Value, asked: &mut Asked<'_>) {
    if let Some(labels) = service.get("labels").and_then(Value::as_object) {
        for key in labels.keys() {
            if key.starts_with("devcontainer.") || key.starts_with("devcell.") {
                asked.push(Permission::IdentityLabel(key.clone()), "labels");
            }
        }
    }
}

/// The tags a build gives its image (`image`, `build.tags`): the engine moves a tag to the
/// newest image given it, so a repository naming `postgres:16` or another workspace's image
/// would have whatever names that tag run the repository's build (spec-note 0400, attacks).
/// Compose's own `<project>-<service>` is not the repository's choice.
fn build_tags(model: &Value, name: &str, service: &Value, build: &Value, asked: &mut Asked<'_>) {
    let project = model
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let own = format!("{project}-{name}");
    let image = str_of(service, "image").map(str::to_string);
    for tag in image.into_iter().chain(strings_of(build, "tags")) {
        if tag != own && tag != format!("{own}:latest") {
            asked.push(Permission::ImageTag(tag), "build");
        }
    }
}

/// What a build reads from the host or the network: its context and its Dockerfile.
fn build_sources(build: &Value, places: &Places, asked: &mut Asked<'_>) {
    // Compose resolves a local context to an absolute path; anything else (a git or HTTP
    // URL) the engine would fetch from the network on the host's behalf.
    let context = build.get("context").and_then(Value::as_str);
    let remote = context.is_some_and(is_remote_context);
    if let Some(context) = context {
        if remote {
            asked.push(
                Permission::RemoteBuildContext(context.to_string()),
                "build.context",
            );
        } else if let Some(p) = host_path_permission(context, places) {
            asked.push(p, "build.context");
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
            asked.push(p, "build.dockerfile");
        }
    }
}

/// A build's network and privileges: `build.network`, `build.privileged`, the BuildKit
/// entitlements it asks for (`network.host` is the host network, `security.insecure`
/// privileged mode, any other a `build_entitlement=<service>:<name>` request: attacks H6), and
/// the `RUN` steps of its Dockerfile that take them
/// ([`crate::security::dockerfile::run_step_requests`]; an unreadable Dockerfile is already
/// a request, `build_cache_mount`).
fn build_privileges(name: &str, build: &Value, asked: &mut Asked<'_>) {
    if let Some(network) = build.get("network").and_then(Value::as_str)
        && let Some(p) = network_permission(network)
    {
        asked.push(p, "build.network");
    }
    if build.get("privileged").and_then(Value::as_bool) == Some(true) {
        asked.push(Permission::Privileged, "build.privileged");
    }
    for entitlement in strings_of(build, "entitlements") {
        let permission = match entitlement.trim().to_ascii_lowercase().as_str() {
            "network.host" => Permission::HostNetwork,
            "security.insecure" => Permission::Privileged,
            other => Permission::RuntimeOption(format!("build_entitlement={name}:{other}")),
        };
        asked.push(permission, "build.entitlements");
    }
    if let Ok(Some(text)) = build_dockerfile(build) {
        for (permission, what) in crate::security::dockerfile::run_step_requests(&text) {
            asked.push(permission, &format!("build.dockerfile: {what}"));
        }
        // its own `ONBUILD` triggers run where devcell builds `FROM` the image (attack 23, N16)
        if let Some(what) = crate::security::dockerfile::onbuild_triggers(&text) {
            let permission = Permission::RuntimeOption(format!("build_onbuild={name}"));
            asked.push(permission, &format!("build.dockerfile: {what}"));
        }
        let args = super::dockerfile::build_args(build);
        for (host, what) in crate::security::dockerfile::remote_sources(&text, &args) {
            let permission = Permission::RuntimeOption(format!("build_fetch={name}:{host}"));
            asked.push(permission, &format!("build.dockerfile: {what}"));
        }
    }
}

/// A build's named contexts: build contexts too, a host folder the build can `COPY` from (or
/// `RUN --mount=from=`) and so bake into the image.
fn build_named_contexts(build: &Value, places: &Places, asked: &mut Asked<'_>) {
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
            asked.push(
                Permission::RemoteBuildContext(source.to_string()),
                "build.additional_contexts",
            );
        } else if let Some(p) = host_path_permission(path, places) {
            asked.push(p, "build.additional_contexts");
        }
    }
}

/// A build's secrets, and the host folders of a local cache.
fn build_secrets_and_cache(model: &Value, build: &Value, places: &Places, asked: &mut Asked<'_>) {
    // Build secrets read host files or host variables as service secrets do.
    for item in items(build, "secrets") {
        let source = item.get("source").and_then(Value::as_str).or(item.as_str());
        if let Some(def) = source.and_then(|s| model.get("secrets")?.get(s)) {
            secret_requests(def, places, "build.secrets", &mut |p, k| asked.push(p, k));
        }
    }
    // A local cache is read from (`cache_from`) or written to (`cache_to`) a host folder.
    for (key, field) in [("cache_from", "src"), ("cache_to", "dest")] {
        for entry in strings_of(build, key) {
            if let Some(path) = local_cache_path(&entry, field)
                && let Some(p) = host_path_permission(path, places)
            {
                asked.push(p, &format!("build.{key}"));
            }
        }
    }
}

/// What a Compose `provider` runs on the host, as its [`Permission::HostCommand`] request
/// shows it and a `host-command:sha256:` grant hashes it: the program (`type`) with the
/// canonical JSON (keys sorted, lists in order) of its `options`, which Compose passes to it
/// as `--<key>=<value>` arguments; changed options are asked for again (attacks G7,
/// spec-note 0410).
pub(super) fn provider_command(provider: &Value) -> String {
    let program = provider
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let options = canonical(provider.get("options").unwrap_or(&Value::Null));
    format!("compose provider `{program}` with options {options}")
}
