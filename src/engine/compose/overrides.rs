//! The Compose override file devcell adds after the repository's files: the primary
//! service as devcell creates it (from a [`ContainerSpec`]) and the other services' additions.
//!
//! Written as JSON, which is YAML, so no YAML is written by hand. Compose interpolates `$` in
//! every string of every file, so each string value is escaped (`$` → `$$`,
//! [`escape_interpolation`]); quotes, backslashes and newlines are JSON's to escape. A
//! `containerEnv` value thus arrives in the container byte for byte (devcontainers/cli#904),
//! and the `devcontainer.metadata` label stays one JSON array string (devcontainers/cli#1054).
//! Override keys win over the repository's for maps (`environment`, `labels`) and scalars;
//! `volumes` merge by target.

use serde_json::{Map, Value, json};

use crate::engine::docker::podman_tmpfs_options;
use crate::engine::{ContainerSpec, Mount, MountKind, run_args};

/// The key of a one-entry object in an override file where a list must replace the
/// repository's rather than be merged with it (`{"!override": [...]}`): devcell's override
/// writer turns it into Compose's `!override` YAML tag (spec-note 0431).
pub const OVERRIDE_TAG: &str = "!override";

/// The override file: `{"services": {<primary>: <service_override(spec)>, <other>: …},
/// "volumes": {<named volume>: {}}}`, every string escaped ([`escape_interpolation`]).
///
/// `others` are additions to the other services (the sidecar profile's limits and options),
/// as Compose service maps, unescaped. Named volumes of `spec`'s mounts are declared at the
/// top level as the reference CLI declares them (so Compose names them
/// `<project>_<name>`).
///
/// `podman`: the engine is Podman, which refuses the `uid=`/`gid=` tmpfs options Docker
/// passes to the kernel (the hardened home tmpfs of a non-root user): they become Podman's
/// `U` option, as for a single container (spec-notes 0084, 0610).
pub fn override_file(
    primary: &str,
    spec: &ContainerSpec,
    others: &Map<String, Value>,
    podman: bool,
) -> Value {
    let mut services = Map::new();
    for (name, service) in others {
        if name != primary {
            services.insert(name.clone(), service.clone());
        }
    }
    let mut primary_service = service_override(spec);
    // The container runs the image devcell prepared and judged (its `/etc/passwd` read by id):
    // a `pull_policy` of `build` or `always` would have `compose up` replace it first
    // (spec-note 0420).
    if !spec.image.is_empty() {
        primary_service.insert("pull_policy".to_string(), json!("never"));
    }
    // devcell starts and stops the workspace container (the stop after the agent, `delete`):
    // a `restart` policy would have the engine bring it back on its own when it restarts,
    // running the repository's commands while no handoff watches (spec-note 0400, attacks F5)
    primary_service.insert("restart".to_string(), json!("no"));
    if podman && let Some(Value::Array(tmpfs)) = primary_service.get_mut("tmpfs") {
        for entry in tmpfs.iter_mut() {
            if let Some((path, opts)) = entry.as_str().and_then(|e| e.split_once(':')) {
                *entry = json!(format!("{path}:{}", podman_tmpfs_options(opts)));
            }
        }
    }
    // the one thing devcell's judgement adds to the primary beyond its request, under the
    // primary's name in `others`: its `ports` list replacing the repository's (the loopback
    // ports moved to free host ports, spec-note 0431); nothing else of that entry is taken
    if let Some(ports) = others
        .get(primary)
        .and_then(|extra| extra.get("ports"))
        .filter(|p| p.get(OVERRIDE_TAG).is_some())
    {
        primary_service.insert("ports".to_string(), ports.clone());
    }
    services.insert(primary.to_string(), Value::Object(primary_service));
    let mut file = Map::new();
    file.insert("services".to_string(), Value::Object(services));
    let volumes: Map<String, Value> = spec
        .mounts
        .iter()
        .filter(|m| m.kind == MountKind::Volume)
        .filter_map(|m| m.source.clone())
        .map(|name| (name, json!({})))
        .collect();
    if !volumes.is_empty() {
        file.insert("volumes".to_string(), Value::Object(volumes));
    }
    let mut file = Value::Object(file);
    escape_interpolation(&mut file);
    file
}

/// The Compose service map of `spec` (unescaped): `image`, `entrypoint`, `command`, `user`,
/// `working_dir`, `hostname`, `environment`, `labels`, `volumes` (long syntax), `tmpfs`,
/// `init`, `privileged`, `read_only`, `cap_add`, `cap_drop`, `security_opt`, `pids_limit`,
/// `mem_limit` (bytes), `cpus`, `network_mode`, `extra_hosts`, `ports` (long syntax),
/// `devices`, `shm_size` (bytes), `ulimits`, the GPUs (`deploy.resources.reservations.devices`).
/// Unset fields are left out, so the repository's
/// values stay. `spec.name` is not written: Compose names the project's containers.
pub fn service_override(spec: &ContainerSpec) -> Map<String, Value> {
    let mut s = Map::new();
    process_keys(spec, &mut s);
    storage_keys(spec, &mut s);
    security_keys(spec, &mut s);
    network_keys(spec, &mut s);
    device_keys(spec, &mut s);
    s
}

/// The process: `image`, `entrypoint`, `command`, `user`, `working_dir`, `hostname`,
/// `environment`, `labels`.
fn process_keys(spec: &ContainerSpec, s: &mut Map<String, Value>) {
    let mut put = |key: &str, value: Value| {
        s.insert(key.to_string(), value);
    };
    if !spec.image.is_empty() {
        put("image", json!(spec.image));
    }
    if let Some(e) = &spec.entrypoint {
        put("entrypoint", json!(e));
    }
    if let Some(c) = &spec.cmd {
        put("command", json!(c));
    }
    if let Some(u) = &spec.user {
        put("user", json!(u));
    }
    if let Some(w) = &spec.working_dir {
        put("working_dir", json!(w));
    }
    if let Some(h) = &spec.hostname {
        put("hostname", json!(h));
    }
    if !spec.env.is_empty() {
        put("environment", json!(spec.env));
    }
    if !spec.labels.is_empty() {
        put("labels", json!(spec.labels));
    }
}

/// The mounts: `volumes` (long syntax), `tmpfs`.
fn storage_keys(spec: &ContainerSpec, s: &mut Map<String, Value>) {
    let mut put = |key: &str, value: Value| {
        s.insert(key.to_string(), value);
    };
    if !spec.mounts.is_empty() {
        put(
            "volumes",
            Value::Array(spec.mounts.iter().map(volume).collect()),
        );
    }
    if !spec.tmpfs.is_empty() {
        let tmpfs: Vec<String> = spec
            .tmpfs
            .iter()
            .map(|(path, opts)| {
                if opts.is_empty() {
                    path.clone()
                } else {
                    format!("{path}:{opts}")
                }
            })
            .collect();
        put("tmpfs", json!(tmpfs));
    }
}

/// What the container may do and use: `init`, `privileged`, `read_only`, `cap_add`,
/// `cap_drop`, `security_opt`, `extra_hosts`, `pids_limit`, `mem_limit` (bytes), `cpus`.
fn security_keys(spec: &ContainerSpec, s: &mut Map<String, Value>) {
    let mut put = |key: &str, value: Value| {
        s.insert(key.to_string(), value);
    };
    if let Some(init) = spec.init {
        put("init", json!(init));
    }
    if spec.privileged {
        put("privileged", json!(true));
    }
    if spec.read_only_rootfs {
        put("read_only", json!(true));
    }
    for (key, list) in [
        ("cap_add", &spec.cap_add),
        ("cap_drop", &spec.cap_drop),
        ("security_opt", &spec.security_opt),
        ("extra_hosts", &spec.extra_hosts),
    ] {
        if !list.is_empty() {
            put(key, json!(list));
        }
    }
    if let Some(p) = spec.limits.pids {
        put("pids_limit", json!(p));
    }
    if let Some(m) = spec.limits.memory_bytes {
        put("mem_limit", json!(m));
    }
    if let Some(c) = spec.limits.nano_cpus {
        put("cpus", json!(c as f64 / 1e9));
    }
}

/// The network: `network_mode`, `ports` (long syntax).
fn network_keys(spec: &ContainerSpec, s: &mut Map<String, Value>) {
    let mut put = |key: &str, value: Value| {
        s.insert(key.to_string(), value);
    };
    if let Some(n) = &spec.network_mode {
        put("network_mode", json!(n));
    }
    if !spec.ports.is_empty() {
        let ports: Vec<Value> = spec
            .ports
            .iter()
            .map(|p| {
                let mut port = Map::new();
                port.insert("target".into(), json!(p.container_port));
                if let Some(hp) = p.host_port {
                    port.insert("published".into(), json!(hp.to_string()));
                }
                if let Some(ip) = &p.host_ip {
                    port.insert("host_ip".into(), json!(ip));
                }
                port.insert("protocol".into(), json!(p.protocol));
                Value::Object(port)
            })
            .collect();
        put("ports", Value::Array(ports));
    }
}

/// The devices: `devices`, `shm_size` (bytes), `ulimits`, the GPUs
/// (`deploy.resources.reservations.devices`).
fn device_keys(spec: &ContainerSpec, s: &mut Map<String, Value>) {
    let mut put = |key: &str, value: Value| {
        s.insert(key.to_string(), value);
    };
    if !spec.devices.is_empty() {
        let devices: Vec<String> = spec
            .devices
            .iter()
            .map(|d| format!("{}:{}:{}", d.host_path, d.container_path, d.permissions))
            .collect();
        put("devices", json!(devices));
    }
    if let Some(shm) = spec.shm_size {
        put("shm_size", json!(shm));
    }
    if !spec.ulimits.is_empty() {
        let ulimits: Map<String, Value> = spec
            .ulimits
            .iter()
            .map(|u| (u.name.clone(), json!({"soft": u.soft, "hard": u.hard})))
            .collect();
        put("ulimits", Value::Object(ulimits));
    }
    if spec.gpu.is_some() {
        // every GPU, as `--gpus all` (the reference CLI writes the same reservation)
        let gpus = json!({"capabilities": ["gpu"], "count": "all"});
        put(
            "deploy",
            json!({"resources": {"reservations": {"devices": [gpus]}}}),
        );
    }
}

/// A mount in Compose's long `volumes` syntax. A bind never creates its host path (as
/// `docker run --mount` does not).
fn volume(m: &Mount) -> Value {
    let mut v = Map::new();
    v.insert("type".into(), json!(m.kind.as_str()));
    match m.kind {
        MountKind::Tmpfs => {
            let source = m.source.as_deref().unwrap_or_default();
            let mut tmpfs = Map::new();
            if let Some(size) = run_args::tmpfs_mount_size(source) {
                tmpfs.insert("size".into(), json!(size));
            }
            if let Some(mode) = run_args::tmpfs_mount_mode(source) {
                tmpfs.insert("mode".into(), json!(mode));
            }
            if !tmpfs.is_empty() {
                v.insert("tmpfs".into(), Value::Object(tmpfs));
            }
        }
        MountKind::Bind => {
            if let Some(s) = &m.source {
                v.insert("source".into(), json!(s));
            }
            v.insert("bind".into(), json!({"create_host_path": false}));
        }
        MountKind::Volume => {
            if let Some(s) = &m.source {
                v.insert("source".into(), json!(s));
            }
        }
    }
    v.insert("target".into(), json!(m.target));
    if m.read_only {
        v.insert("read_only".into(), json!(true));
    }
    Value::Object(v)
}

/// Escapes every string value (not the keys) for Compose's interpolation: `$` → `$$`, so
/// Compose reads back exactly the string devcell wrote.
pub fn escape_interpolation(value: &mut Value) {
    match value {
        Value::String(s) if s.contains('$') => *s = s.replace('$', "$$"),
        Value::Array(items) => items.iter_mut().for_each(escape_interpolation),
        Value::Object(map) => map.values_mut().for_each(escape_interpolation),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Device, Limits, PortBinding, Ulimit};

    fn spec() -> ContainerSpec {
        let mut spec = ContainerSpec {
            image: "img:1".into(),
            user: Some("1000:1000".into()),
            entrypoint: Some(vec!["/bin/sh".into()]),
            cmd: Some(vec!["-c".into(), "exec \"$@\"".into(), "x".into()]),
            init: Some(true),
            read_only_rootfs: true,
            cap_drop: vec!["ALL".into()],
            security_opt: vec!["no-new-privileges".into()],
            limits: Limits {
                pids: Some(1024),
                memory_bytes: Some(4 << 30),
                nano_cpus: Some(1_500_000_000),
            },
            ..ContainerSpec::default()
        };
        spec.env.insert("PRICE".into(), "$5 and $${HOME}".into());
        spec.labels.insert(
            "devcontainer.metadata".into(),
            r#"[{"remoteUser":"u"}]"#.into(),
        );
        spec.mounts = vec![
            Mount {
                kind: MountKind::Bind,
                source: Some("/w/repo".into()),
                target: "/workspaces/repo".into(),
                read_only: false,
            },
            Mount {
                kind: MountKind::Volume,
                source: Some("cache".into()),
                target: "/cache".into(),
                read_only: true,
            },
            Mount {
                kind: MountKind::Tmpfs,
                source: Some(run_args::tmpfs_mount_source(1 << 20, Some(0o1777))),
                target: "/scratch".into(),
                read_only: false,
            },
        ];
        spec.tmpfs.insert("/tmp".into(), "size=65536".into());
        spec
    }

    #[test]
    fn the_primary_service_carries_the_spec_escaped() {
        let file = override_file("app", &spec(), &Map::new(), false);
        let app = &file["services"]["app"];
        assert_eq!(app["image"], "img:1");
        // the image devcell prepared and judged, not one `compose up` builds or pulls anew
        assert_eq!(app["pull_policy"], "never");
        // never brought back by the engine outside a handoff (spec-note 0400, attacks F5)
        assert_eq!(app["restart"], "no");
        assert_eq!(app["user"], "1000:1000");
        assert_eq!(app["command"][1], "exec \"$$@\"");
        assert_eq!(app["environment"]["PRICE"], "$$5 and $$$${HOME}");
        assert_eq!(
            app["labels"]["devcontainer.metadata"],
            r#"[{"remoteUser":"u"}]"#
        );
        assert_eq!(app["init"], true);
        assert_eq!(app["read_only"], true);
        assert_eq!(app["cap_drop"], json!(["ALL"]));
        assert_eq!(app["security_opt"], json!(["no-new-privileges"]));
        assert_eq!(app["pids_limit"], 1024);
        assert_eq!(app["mem_limit"], 4_i64 << 30);
        assert_eq!(app["cpus"], 1.5);
        assert_eq!(app["tmpfs"], json!(["/tmp:size=65536"]));
        assert_eq!(
            app["volumes"],
            json!([
                {"type": "bind", "source": "/w/repo", "target": "/workspaces/repo",
                 "bind": {"create_host_path": false}},
                {"type": "volume", "source": "cache", "target": "/cache", "read_only": true},
                {"type": "tmpfs", "target": "/scratch", "tmpfs": {"size": 1 << 20, "mode": 0o1777}}
            ])
        );
        assert_eq!(file["volumes"], json!({"cache": {}}));
        // unset fields stay the repository's
        for key in [
            "privileged",
            "network_mode",
            "ports",
            "devices",
            "working_dir",
        ] {
            assert!(app.get(key).is_none(), "{key}");
        }
    }

    #[test]
    fn on_podman_the_home_tmpfs_owner_is_podmans_u_option() {
        let mut spec = spec();
        spec.tmpfs.insert(
            "/home/u".into(),
            "rw,nosuid,size=1g,uid=1000,gid=1000,mode=755".into(),
        );
        let docker = override_file("app", &spec, &Map::new(), false);
        assert_eq!(
            docker["services"]["app"]["tmpfs"],
            json!([
                "/home/u:rw,nosuid,size=1g,uid=1000,gid=1000,mode=755",
                "/tmp:size=65536"
            ])
        );
        let podman = override_file("app", &spec, &Map::new(), true);
        assert_eq!(
            podman["services"]["app"]["tmpfs"],
            json!(["/home/u:rw,nosuid,size=1g,mode=755,U", "/tmp:size=65536"])
        );
    }

    #[test]
    fn other_services_are_added_escaped_and_never_replace_the_primary() {
        let mut others = Map::new();
        others.insert(
            "db".into(),
            json!({"pids_limit": 1024, "labels": {"a": "$x"}}),
        );
        others.insert(
            "app".into(),
            json!({"privileged": true, "ports": {"!override": [{"target": 80}]}}),
        );
        let file = override_file("app", &spec(), &others, false);
        assert_eq!(file["services"]["db"]["labels"]["a"], "$$x");
        assert!(file["services"]["app"].get("privileged").is_none());
        // only its replacing `ports` list is taken (spec-note 0431)
        assert_eq!(
            file["services"]["app"]["ports"],
            json!({"!override": [{"target": 80}]})
        );
        assert!(file.get("volumes").is_some());
    }

    #[test]
    fn ports_devices_and_ulimits_in_compose_syntax() {
        let spec = ContainerSpec {
            ports: vec![
                PortBinding {
                    container_port: 80,
                    protocol: "tcp".into(),
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(8080),
                },
                PortBinding {
                    container_port: 53,
                    protocol: "udp".into(),
                    host_ip: None,
                    host_port: None,
                },
            ],
            devices: vec![Device {
                host_path: "/dev/fuse".into(),
                container_path: "/dev/fuse".into(),
                permissions: "rwm".into(),
            }],
            ulimits: vec![Ulimit {
                name: "nofile".into(),
                soft: 1024,
                hard: 2048,
            }],
            shm_size: Some(1 << 26),
            ..ContainerSpec::default()
        };
        let s = Value::Object(service_override(&spec));
        assert_eq!(
            s["ports"],
            json!([
                {"target": 80, "published": "8080", "host_ip": "127.0.0.1", "protocol": "tcp"},
                {"target": 53, "protocol": "udp"}
            ])
        );
        assert_eq!(s["devices"], json!(["/dev/fuse:/dev/fuse:rwm"]));
        assert_eq!(
            s["ulimits"],
            json!({"nofile": {"soft": 1024, "hard": 2048}})
        );
        assert_eq!(s["shm_size"], 1 << 26);
        assert!(s.get("image").is_none());
        assert!(s.get("deploy").is_none(), "no GPU unless asked");
    }

    /// A GPU the primary service is given is Compose's reservation of every GPU (spec-note
    /// 0646).
    #[test]
    fn a_gpu_is_a_reservation_of_every_gpu() {
        let spec = ContainerSpec {
            gpu: Some(crate::engine::GpuRequest {
                asked: "\"optional\"".into(),
            }),
            ..ContainerSpec::default()
        };
        let s = Value::Object(service_override(&spec));
        assert_eq!(
            s["deploy"],
            json!({"resources": {"reservations": {"devices": [
                {"capabilities": ["gpu"], "count": "all"}
            ]}}})
        );
    }

    #[test]
    fn escaping_reaches_nested_strings_and_leaves_keys() {
        let mut v = json!({"$k": ["a$b", {"c": "$$"}], "n": 1});
        escape_interpolation(&mut v);
        assert_eq!(v, json!({"$k": ["a$$b", {"c": "$$$$"}], "n": 1}));
    }
}
