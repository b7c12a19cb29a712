//! What a service asks that reaches past its own project (spec-note 0612): networks on host
//! interfaces and over host routes, links to other containers, replicas, options the engine
//! passes through unjudged, log drivers that send output elsewhere, BuildKit cache mounts.

use serde_json::Value;

use super::dockerfile::{build_dockerfile, build_uses_cache_mount, frontend_of};
use super::fields::{number, strings_of};
use crate::security::policy::{Permission, Source};

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
pub(super) fn reach_requests(
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
    network_reach(model, service, routes, &mut push);
    for link in strings_of(service, "external_links") {
        push(format!("external_link={link}"), "external_links");
    }
    resource_reach(service, &mut push);
    build_reach(name, service, &mut push);
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

/// The service's networks of the project (`default` when it names none and has no
/// `network_mode`): a driver other than `bridge`, driver or IPAM options, an IPAM subnet,
/// range or gateway over a host route.
fn network_reach(
    model: &Value,
    service: &Value,
    routes: &[(u32, u32)],
    push: &mut impl FnMut(String, &str),
) {
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
}

/// Replicas beyond one, and the options that take a container past the profile's limits:
/// `oom_kill_disable`, unlimited swap, real-time CPU time.
fn resource_reach(service: &Value, push: &mut impl FnMut(String, &str)) {
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
}

/// The host's SSH agent in a build, a devcell-built image run without building it, and a
/// BuildKit cache mount in the build's Dockerfile.
fn build_reach(name: &str, service: &Value, push: &mut impl FnMut(String, &str)) {
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
    // a frontend of the repository's choosing builds whatever it likes, cache mounts
    // included, from any text (attacks G9)
    if let Some(build) = build
        && let Some(frontend) =
            frontend_of(build, build_dockerfile(build).ok().flatten().as_deref())
    {
        push(
            format!("build_frontend={name}:{frontend}"),
            "build.dockerfile",
        );
    }
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
pub(super) fn logging_requests(service: &Value, push: &mut impl FnMut(String, &str)) {
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
pub(super) fn scalar(v: &Value) -> String {
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
pub(super) fn host_routes() -> Vec<(u32, u32)> {
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
