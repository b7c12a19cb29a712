//! Compose keys judged by an allow-list (spec-note 0400, attacks H5): a key devcell does not
//! know is passed to Compose as written, and Compose keeps growing keys that reach the host
//! (`models` has Compose start the host's Model plugin, which pulls a model over the host's
//! network and runs a runner; `annotations` reach the OCI runtime; `storage_opt` and
//! `blkio_config` the host's storage). So a service key that is neither judged by the other
//! files of this module nor known to be harmless is a request,
//! `runtime-option:compose_key=<service>.<key>`; a top-level key likewise
//! (`compose_key=<key>`, read from the files, since `docker compose config` drops some, such
//! as `models`). `models` itself is a `host-command` request (service and top-level). Imports
//! only [`super::fields`].

use serde_json::Value;

use crate::security::policy::{Permission, Source};

/// The service keys devcell understands: each is judged by [`super::service`],
/// [`super::reach`], the sidecar profile or [`crate::security::compose_files`], or asks nothing
/// of the host (what runs in the container, how it is named, started, stopped and checked,
/// its CPU shares and memory reservation, its own names and hosts).
pub const SERVICE_KEYS: &[&str] = &[
    // judged (service.rs, reach.rs, mod.rs, compose_files.rs)
    "build",
    "cap_add",
    "cgroup",
    "cgroup_parent",
    "configs",
    "cpu_rt_period",
    "cpu_rt_runtime",
    "cpus",
    "deploy",
    "device_cgroup_rules",
    "devices",
    "env_file",
    "external_links",
    "gpus",
    "group_add",
    "image",
    "ipc",
    "label_file",
    "labels",
    "log_driver",
    "log_opt",
    "logging",
    "mem_limit",
    "memswap_limit",
    "models",
    "network_mode",
    "networks",
    "oom_kill_disable",
    "oom_score_adj",
    "pid",
    "pids_limit",
    "ports",
    "post_start",
    "pre_stop",
    "privileged",
    "provider",
    "restart",
    "runtime",
    "scale",
    "secrets",
    "security_opt",
    "shm_size",
    "sysctls",
    "ulimits",
    "use_api_socket",
    "user",
    "userns_mode",
    "uts",
    "volumes",
    "volumes_from",
    // asking nothing of the host
    "attach",
    "cap_drop",
    "command",
    "container_name",
    "cpu_count",
    "cpu_percent",
    "cpu_period",
    "cpu_quota",
    "cpu_shares",
    "cpuset",
    "depends_on",
    "develop",
    "dns",
    "dns_opt",
    "dns_search",
    "domainname",
    "entrypoint",
    "environment",
    "expose",
    "extends",
    "extra_hosts",
    "healthcheck",
    "hostname",
    "init",
    "links",
    "mac_address",
    "mem_reservation",
    "mem_swappiness",
    "platform",
    "profiles",
    "pull_policy",
    "pull_refresh_after",
    "read_only",
    "stdin_open",
    "stop_grace_period",
    "stop_signal",
    "tmpfs",
    "tty",
    "working_dir",
];

/// The top-level keys of a Compose file devcell understands (`include` and the resources are
/// judged where services use them; `models` is a request of its own).
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "configs", "include", "models", "name", "networks", "secrets", "services", "version", "volumes",
];

/// The keys of `deploy.update_config` and `deploy.rollback_config`, which the Compose
/// specification defines alike (how replicas are replaced): none asks anything of the host.
const ROLLOUT_KEYS: &[&str] = &[
    "delay",
    "failure_action",
    "max_failure_ratio",
    "monitor",
    "order",
    "parallelism",
];

/// The keys of a top-level `secrets` and `configs` entry, which Compose reads alike (a file, a
/// variable or inline content, mounted into the services that name it).
const FILE_OBJECT_KEYS: &[&str] = &[
    "content",
    "environment",
    "external",
    "file",
    "labels",
    "name",
];

/// The keys understood below a service key, by path (`*` one map entry or list item of any
/// name): each is judged elsewhere in this module (or by [`crate::security::gpu`], the sidecar
/// profile) or asks nothing of the host. A key of an object at one of these paths that is not
/// listed is a request ([`sub_key_requests`]), as an unknown service key is: Compose keeps
/// adding sub-keys that reach the host (`build.ulimits`, a bind's `selinux` relabelling,
/// `ipam.options`).
pub const SERVICE_SUB_KEYS: &[(&str, &[&str])] = &[
    (
        "build",
        &[
            // judged (service.rs, reach.rs, dockerfile.rs)
            "additional_contexts",
            "args",
            "cache_from",
            "cache_to",
            "context",
            "dockerfile",
            "dockerfile_inline",
            "entitlements",
            "network",
            "privileged",
            "secrets",
            "ssh",
            "tags",
            // asking nothing of the host
            "extra_hosts",
            "labels",
            "no_cache",
            "platforms",
            "pull",
            "shm_size",
            "target",
        ],
    ),
    (
        "deploy",
        &[
            "endpoint_mode",
            "labels",
            "mode",
            "placement",
            "replicas",
            "resources",
            "restart_policy",
            "rollback_config",
            "update_config",
        ],
    ),
    ("deploy.resources", &["limits", "reservations"]),
    ("deploy.resources.limits", &["cpus", "memory", "pids"]),
    (
        "deploy.resources.reservations",
        &["cpus", "devices", "memory"],
    ),
    (
        "deploy.restart_policy",
        &["condition", "delay", "max_attempts", "window"],
    ),
    (
        "deploy.placement",
        &["constraints", "max_replicas_per_node", "preferences"],
    ),
    ("deploy.update_config", ROLLOUT_KEYS),
    ("deploy.rollback_config", ROLLOUT_KEYS),
    // `develop` acts only under `compose watch`, which devcell never runs
    ("develop", &["watch"]),
    (
        "develop.watch.*",
        &[
            "action",
            "exec",
            "ignore",
            "include",
            "initial_sync",
            "path",
            "target",
        ],
    ),
    (
        "healthcheck",
        &[
            "disable",
            "interval",
            "retries",
            "start_interval",
            "start_period",
            "test",
            "timeout",
        ],
    ),
    ("logging", &["driver", "options"]),
    (
        "networks.*",
        &[
            "aliases",
            "gw_priority",
            "interface_name",
            "ipv4_address",
            "ipv6_address",
            "link_local_ips",
            "mac_address",
            "priority",
        ],
    ),
    (
        "volumes.*",
        &[
            "bind",
            "consistency",
            "image",
            "read_only",
            "source",
            "target",
            "tmpfs",
            "type",
            "volume",
        ],
    ),
    ("volumes.*.bind", &["create_host_path", "propagation"]),
    ("volumes.*.volume", &["nocopy"]),
    ("volumes.*.tmpfs", &["mode", "size"]),
];

/// The keys understood below a top-level key of a Compose file, by path as
/// [`SERVICE_SUB_KEYS`].
pub const TOP_LEVEL_SUB_KEYS: &[(&str, &[&str])] = &[
    (
        "networks.*",
        &[
            "attachable",
            "driver",
            "driver_opts",
            "enable_ipv4",
            "enable_ipv6",
            "external",
            "internal",
            "ipam",
            "labels",
            "name",
        ],
    ),
    ("networks.*.ipam", &["config", "driver"]),
    (
        "networks.*.ipam.config.*",
        &["aux_addresses", "gateway", "ip_range", "subnet"],
    ),
    (
        "volumes.*",
        &["driver", "driver_opts", "external", "labels", "name"],
    ),
    ("secrets.*", FILE_OBJECT_KEYS),
    ("configs.*", FILE_OBJECT_KEYS),
];

/// Each key below `value` (at key path `path`) that `table` does not understand, as its full
/// key path (`build.isolation`, `networks.back.driver_opts`): the paths of `table` are walked
/// from `value`, a `*` entering every entry of a map or item of a list; a value that is not an
/// object there (a short syntax, `null`) has no keys to judge. Pure.
fn unknown_sub_keys(value: &Value, path: &str, table: &[(&str, &[&str])], out: &mut Vec<String>) {
    let pattern = |p: &str| {
        table
            .iter()
            .find(|(pattern, _)| {
                let (mut a, mut b) = (pattern.split('.'), p.split('.'));
                loop {
                    match (a.next(), b.next()) {
                        (None, None) => return true,
                        (Some(x), Some(y)) if x == "*" || x == y => {}
                        _ => return false,
                    }
                }
            })
            .map(|(_, allowed)| *allowed)
    };
    let children: Vec<(String, &Value)> = match value {
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !k.starts_with("x-"))
            .map(|(k, v)| (k.clone(), v))
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => return,
    };
    let allowed = pattern(path);
    for (key, child) in children {
        let child_path = format!("{path}.{key}");
        if let (Some(allowed), Value::Object(_)) = (allowed, value)
            && !allowed.contains(&key.as_str())
        {
            out.push(child_path);
            continue;
        }
        // only down paths some pattern continues (or ends) on
        let continues = table.iter().any(|(p, _)| {
            let depth = child_path.split('.').count();
            let prefix: Vec<&str> = p.split('.').take(depth).collect();
            prefix.len() == depth
                && prefix
                    .iter()
                    .zip(child_path.split('.'))
                    .all(|(x, y)| *x == "*" || *x == y)
        });
        if continues {
            unknown_sub_keys(child, &child_path, table, out);
        }
    }
}

/// The requests of service `name`'s sub-keys (`service`, of the resolved model, where
/// Compose has made every short syntax long): each key below a key of [`SERVICE_SUB_KEYS`]
/// that is not listed is `runtime-option:compose_key=<service>.<key.path>`, source the
/// service and that key path (`volumes.0.bind.selinux`).
pub(super) fn sub_key_requests(name: &str, service: &Value, out: &mut Vec<(Permission, Source)>) {
    let Some(keys) = service.as_object() else {
        return;
    };
    let mut unknown = Vec::new();
    for (key, value) in keys {
        if SERVICE_SUB_KEYS
            .iter()
            .any(|(p, _)| p.split('.').next() == Some(key))
        {
            unknown_sub_keys(value, key, SERVICE_SUB_KEYS, &mut unknown);
        }
    }
    for path in unknown {
        out.push((
            compose_key(&format!("{name}.{path}")),
            Source::ComposeService {
                service: name.to_string(),
                property: path,
            },
        ));
    }
}

/// Whether `key` is understood in `allowed`: listed, or an extension (`x-…`, which Compose
/// ignores).
fn understood(key: &str, allowed: &[&str]) -> bool {
    key.starts_with("x-") || allowed.contains(&key)
}

/// The grant a key devcell does not understand takes: `runtime-option:compose_key=<key>`, the
/// key as `<service>.<key>` for a service's.
pub fn compose_key(key: &str) -> Permission {
    Permission::RuntimeOption(format!("compose_key={key}"))
}

/// The requests of service `name`'s keys (`service`, of the resolved model): each key not in
/// [`SERVICE_KEYS`] ([`compose_key`]), and `models` as a [`Permission::HostCommand`] (Compose
/// has the host's Model plugin pull each model and run a runner for it, on the host, over its
/// network), naming the models the service uses.
pub(super) fn service_key_requests(
    name: &str,
    service: &Value,
    out: &mut Vec<(Permission, Source)>,
) {
    let Some(keys) = service.as_object() else {
        return;
    };
    let source = |property: &str| Source::ComposeService {
        service: name.to_string(),
        property: property.to_string(),
    };
    for (key, value) in keys {
        if !understood(key, SERVICE_KEYS) {
            out.push((compose_key(&format!("{name}.{key}")), source(key)));
        } else if key == "models" && !value.is_null() {
            out.push((
                Permission::HostCommand(
                    format!(
                        "compose models {} (the host's Model plugin pulls and runs them)",
                        super::fields::canonical(value)
                    )
                    .into(),
                ),
                source("models"),
            ));
        }
    }
}

/// The requests of one Compose file's top level (`doc`, as read from `file`, as the user is
/// shown it), before Compose resolves it: each key not in [`TOP_LEVEL_KEYS`]
/// ([`compose_key`]), and each model of `models` as a [`Permission::HostCommand`] naming its
/// definition (what the host's Model plugin would pull: `docker compose config` leaves the
/// top-level `models` out of its model, so only the file shows it). Pure.
pub fn top_level_requests(doc: &Value, file: &str) -> Vec<(Permission, Source)> {
    let mut asked = Vec::new();
    let Some(keys) = doc.as_object() else {
        return asked;
    };
    let source = |key: String| Source::ComposeFile {
        file: file.to_string(),
        key,
    };
    for (key, value) in keys {
        if !understood(key, TOP_LEVEL_KEYS) {
            asked.push((compose_key(key), source(key.clone())));
            continue;
        }
        let mut unknown = Vec::new();
        unknown_sub_keys(value, key, TOP_LEVEL_SUB_KEYS, &mut unknown);
        for path in unknown {
            asked.push((compose_key(&path), source(path)));
        }
        if key != "models" {
            continue;
        }
        match value.as_object() {
            Some(models) => {
                for (model, def) in models {
                    asked.push((
                        Permission::HostCommand(format!(
                            "compose model `{model}` {} (the host's Model plugin pulls and runs it)",
                            super::fields::canonical(def)
                        ).into()),
                        source(format!("models.{model}")),
                    ));
                }
            }
            None if value.is_null() => {}
            None => asked.push((
                Permission::HostCommand(
                    format!(
                        "compose models {} (the host's Model plugin pulls and runs them)",
                        super::fields::canonical(value)
                    )
                    .into(),
                ),
                source("models".to_string()),
            )),
        }
    }
    asked
}
