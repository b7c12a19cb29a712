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
