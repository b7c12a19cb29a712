//! Containers: the create body from the neutral [`ContainerSpec`], creation (Podman's tmpfs
//! options), inspection.

use std::collections::HashMap;

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, DeviceMapping, DeviceRequest, HostConfig,
    Mount as BollardMount, MountTmpfsOptions, MountType, PortBinding as BollardPortBinding,
    ResourcesUlimits,
};
use bollard::query_parameters::CreateContainerOptions;

use super::{DockerEngine, sorted};
use crate::engine::Engine;
use crate::engine::error::{EngineError, Result};
use crate::engine::run_args::{tmpfs_mount_mode, tmpfs_mount_size};
use crate::engine::spec::*;

impl DockerEngine {
    /// [`Engine::create_container`].
    #[tracing::instrument(level = "debug", skip_all)]
    pub(super) async fn create(&self, spec: &ContainerSpec) -> Result<String> {
        let options = CreateContainerOptions {
            name: spec.name.clone(),
            ..CreateContainerOptions::default()
        };
        let subject = spec.name.clone().unwrap_or_else(|| spec.image.clone());
        let podman = self.is_podman().await?;
        let mut body = to_create_body(spec);
        if podman && let Some(tmpfs) = body.host_config.as_mut().and_then(|h| h.tmpfs.as_mut()) {
            for options in tmpfs.values_mut() {
                *options = podman_tmpfs_options(options);
            }
        }
        if podman {
            podman_gpus(&mut body);
        }
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(self.api("create container", &subject))?;
        Ok(created.id)
    }

    /// [`Engine::process_uids`]: the engine's `top` with numeric uid columns, asked together
    /// with [`Engine::info`] (whether the daemon's `ps` sees the container's ids as they are
    /// inside).
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub(super) async fn container_process_uids(&self, id: &str) -> Result<Option<Vec<[u32; 4]>>> {
        if self.is_podman().await? {
            return Ok(None);
        }
        let options = bollard::query_parameters::TopOptions {
            ps_args: TOP_UID_ARGS.to_string(),
        };
        let (info, top) = tokio::join!(self.info(), self.docker.top_processes(id, Some(options)));
        let top = top.map_err(self.api("list processes of container", id))?;
        if !ids_as_inside(&info?) {
            return Ok(None);
        }
        Ok(uids_from_top(
            top.titles.as_deref().unwrap_or_default(),
            top.processes.as_deref().unwrap_or_default(),
        ))
    }

    /// [`Engine::inspect_container`].
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    pub(super) async fn container_info(&self, id: &str) -> Result<Option<ContainerInfo>> {
        let answer = self.docker.inspect_container(id, None).await;
        Ok(self
            .found(answer, "inspect container", id)?
            .map(container_info_from))
    }

    /// The engine's own `docker inspect` document of a container (the Engine API
    /// `ContainerInspect` shape, PascalCase keys), as bollard reads it; `Ok(None)` when it does
    /// not exist. Not part of [`Engine`]: for tests that compare the typed answer with it.
    ///
    /// Errors: [`EngineError::Api`].
    pub async fn inspect_container_json(&self, id: &str) -> Result<Option<serde_json::Value>> {
        let answer = self.docker.inspect_container(id, None).await;
        self.found(answer, "inspect container", id)?
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| EngineError::Api {
                operation: "inspect container",
                subject: id.to_string(),
                source: bollard::errors::Error::JsonSerdeError { err: e },
            })
    }
}

/// The neutral [`ContainerInfo`] of the engine's container inspect answer. A document without
/// `Mounts` (a create request rather than an inspect answer) gives its `HostConfig.Binds`.
pub(super) fn container_info_from(c: ContainerInspectResponse) -> ContainerInfo {
    let state = c.state.unwrap_or_default();
    let config = c.config.unwrap_or_default();
    let host = c.host_config.unwrap_or_default();
    let labels = sorted(config.labels);
    let config_user = config.user.unwrap_or_default();
    let user = created_user(&labels, config_user.clone());
    let mounts = match c.mounts {
        Some(mounts) => mounts.into_iter().map(mount_info).collect(),
        None => host
            .binds
            .iter()
            .flatten()
            .filter_map(|b| bind_info(b))
            .collect(),
    };
    let mut networks: Vec<String> = c
        .network_settings
        .and_then(|n| n.networks)
        .map(|n| n.into_keys().collect())
        .unwrap_or_default();
    networks.sort();
    ContainerInfo {
        id: c.id.unwrap_or_default(),
        name: c
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        image_id: c.image.unwrap_or_default(),
        image: config.image.unwrap_or_default(),
        status: state.status.map(|s| s.to_string()).unwrap_or_default(),
        running: state.running.unwrap_or(false),
        exit_code: state.exit_code.unwrap_or(0),
        created: c.created.clone().unwrap_or_default(),
        started_at: state.started_at.clone().unwrap_or_default(),
        labels,
        env: config.env.unwrap_or_default(),
        user,
        config_user,
        mounts,
        apparmor_profile: c.app_armor_profile.unwrap_or_default(),
        networks,
        host: host_security(host),
        pid: state
            .pid
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 0),
    }
}

/// The security-relevant `HostConfig` fields.
fn host_security(host: HostConfig) -> HostSecurity {
    let device_mappings: Vec<crate::engine::DeviceMapping> = host
        .devices
        .unwrap_or_default()
        .into_iter()
        .map(|d| crate::engine::DeviceMapping {
            container_path: d
                .path_in_container
                .or_else(|| d.path_on_host.clone())
                .unwrap_or_default(),
            host_path: d.path_on_host,
        })
        .collect();
    let mut port_bindings = Vec::new();
    for (container_port, bindings) in host.port_bindings.unwrap_or_default() {
        for b in bindings.unwrap_or_default() {
            port_bindings.push(PublishedPort {
                container_port: container_port.clone(),
                host_ip: b.host_ip.unwrap_or_default(),
                host_port: b.host_port.unwrap_or_default(),
            });
        }
    }
    // the engine's map has no order: by container port, as a reader of its JSON sees it
    port_bindings.sort_by(|a, b| a.container_port.cmp(&b.container_port));
    HostSecurity {
        privileged: host.privileged.unwrap_or(false),
        cap_add: host.cap_add.unwrap_or_default(),
        cap_drop: host.cap_drop.unwrap_or_default(),
        security_opt: host.security_opt.unwrap_or_default(),
        read_only_rootfs: host.readonly_rootfs.unwrap_or(false),
        tmpfs: sorted(host.tmpfs),
        limits: Limits {
            pids: positive(host.pids_limit),
            memory_bytes: positive(host.memory),
            nano_cpus: positive(host.nano_cpus),
        },
        network_mode: host.network_mode.unwrap_or_default(),
        init: host.init,
        devices: device_mappings
            .iter()
            .filter_map(|d| d.host_path.clone())
            .collect(),
        device_mappings,
        gpu_requested: host
            .device_requests
            .as_ref()
            .is_some_and(|r| r.iter().any(asks_for_gpus)),
        device_requests: host.device_requests.is_some_and(|r| !r.is_empty()),
        pid_mode: host.pid_mode.unwrap_or_default(),
        ipc_mode: host.ipc_mode.unwrap_or_default(),
        uts_mode: host.uts_mode.unwrap_or_default(),
        cpu_quota: positive(host.cpu_quota),
        cpu_period: positive(host.cpu_period),
        cpuset_cpus: host.cpuset_cpus.unwrap_or_default(),
        port_bindings,
        publish_all_ports: host.publish_all_ports.unwrap_or(false),
        auto_remove: host.auto_remove.unwrap_or(false),
    }
}

/// One mount of an inspect answer.
fn mount_info(m: bollard::models::MountPoint) -> MountInfo {
    MountInfo {
        kind: m.typ.unwrap_or_default(),
        source: m.source.unwrap_or_default(),
        name: m.name.filter(|n| !n.is_empty()),
        destination: m.destination.unwrap_or_default(),
        rw: m.rw.unwrap_or(false),
    }
}

/// One `HostConfig.Binds` string, `source:target[:options]` (a source not starting with `/`
/// is a volume name); `None` without a target.
fn bind_info(bind: &str) -> Option<MountInfo> {
    let parts: Vec<&str> = bind.split(':').collect();
    let (source, target, options) = match parts.as_slice() {
        [s, d] => (*s, *d, ""),
        [s, d, o, ..] => (*s, *d, *o),
        _ => return None,
    };
    let is_path = source.starts_with('/');
    Some(MountInfo {
        kind: if is_path { "bind" } else { "volume" }.to_string(),
        source: if is_path { source } else { "" }.to_string(),
        name: (!is_path).then(|| source.to_string()),
        destination: target.to_string(),
        rw: !options.split(',').any(|o| o == "ro"),
    })
}

/// Converts the neutral spec to the engine's create body.
pub(crate) fn to_create_body(spec: &ContainerSpec) -> ContainerCreateBody {
    let some_vec = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    let mounts: Vec<BollardMount> = spec
        .mounts
        .iter()
        .map(|m| BollardMount {
            typ: Some(match m.kind {
                MountKind::Bind => MountType::BIND,
                MountKind::Volume => MountType::VOLUME,
                MountKind::Tmpfs => MountType::TMPFS,
            }),
            source: m.source.clone().filter(|_| m.kind != MountKind::Tmpfs),
            target: Some(m.target.clone()),
            read_only: Some(m.read_only),
            tmpfs_options: (m.kind == MountKind::Tmpfs)
                .then_some(m.source.as_deref())
                .flatten()
                .map(|s| MountTmpfsOptions {
                    size_bytes: tmpfs_mount_size(s),
                    mode: tmpfs_mount_mode(s).map(i64::from),
                    ..MountTmpfsOptions::default()
                }),
            ..BollardMount::default()
        })
        .collect();
    let mut port_bindings: HashMap<String, Option<Vec<BollardPortBinding>>> = HashMap::new();
    let mut exposed = Vec::new();
    for p in &spec.ports {
        let key = format!("{}/{}", p.container_port, p.protocol);
        if !exposed.contains(&key) {
            exposed.push(key.clone());
        }
        port_bindings
            .entry(key)
            .or_insert_with(|| Some(Vec::new()))
            .get_or_insert_with(Vec::new)
            .push(BollardPortBinding {
                host_ip: p.host_ip.clone(),
                host_port: Some(p.host_port.map(|h| h.to_string()).unwrap_or_default()),
            });
    }
    let host_config = HostConfig {
        mounts: (!mounts.is_empty()).then_some(mounts),
        cap_add: some_vec(&spec.cap_add),
        cap_drop: some_vec(&spec.cap_drop),
        security_opt: some_vec(&spec.security_opt),
        privileged: Some(spec.privileged),
        init: spec.init,
        readonly_rootfs: Some(spec.read_only_rootfs),
        tmpfs: (!spec.tmpfs.is_empty()).then(|| {
            spec.tmpfs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }),
        pids_limit: spec.limits.pids,
        memory: spec.limits.memory_bytes,
        nano_cpus: spec.limits.nano_cpus,
        network_mode: spec.network_mode.clone(),
        extra_hosts: some_vec(&spec.extra_hosts),
        port_bindings: (!port_bindings.is_empty()).then_some(port_bindings),
        devices: (!spec.devices.is_empty()).then(|| {
            spec.devices
                .iter()
                .map(|d| DeviceMapping {
                    path_on_host: Some(d.host_path.clone()),
                    path_in_container: Some(d.container_path.clone()),
                    cgroup_permissions: Some(d.permissions.clone()),
                })
                .collect()
        }),
        device_requests: spec.gpu.as_ref().map(|_| vec![all_gpus()]),
        shm_size: spec.shm_size,
        ulimits: (!spec.ulimits.is_empty()).then(|| {
            spec.ulimits
                .iter()
                .map(|u| ResourcesUlimits {
                    name: Some(u.name.clone()),
                    soft: Some(u.soft),
                    hard: Some(u.hard),
                })
                .collect()
        }),
        ..HostConfig::default()
    };
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        hostname: spec.hostname.clone(),
        user: spec.user.clone(),
        env: (!spec.env.is_empty())
            .then(|| spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        cmd: spec.cmd.clone(),
        entrypoint: spec.entrypoint.clone(),
        working_dir: spec.working_dir.clone(),
        labels: (!spec.labels.is_empty()).then(|| {
            spec.labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }),
        exposed_ports: (!exposed.is_empty()).then_some(exposed),
        host_config: Some(host_config),
        ..ContainerCreateBody::default()
    }
}

/// Docker's device request for every GPU (`--gpus all`): any driver with the `gpu`
/// capability, count -1 (all).
fn all_gpus() -> DeviceRequest {
    DeviceRequest {
        driver: Some(String::new()),
        count: Some(-1),
        capabilities: Some(vec![vec!["gpu".to_string()]]),
        ..DeviceRequest::default()
    }
}

/// Whether a device request asks for GPUs: the `gpu` capability (`--gpus`, Compose's
/// reservation), or a CDI device id of the class `gpu` (`nvidia.com/gpu=all`).
fn asks_for_gpus(request: &DeviceRequest) -> bool {
    let capability = request
        .capabilities
        .iter()
        .flatten()
        .flatten()
        .any(|c| c == "gpu");
    let cdi = request.device_ids.iter().flatten().any(|id| {
        id.split_once('=')
            .is_some_and(|(kind, _)| kind.ends_with("/gpu"))
    });
    capability || cdi
}

/// Podman gives GPUs through CDI, not through Docker's `--gpus` device request (which its
/// Docker-compatible API ignores): a granted GPU becomes the CDI device request of every NVIDIA
/// GPU, `{Driver: "cdi", DeviceIDs: ["nvidia.com/gpu=all"]}` (`--device nvidia.com/gpu=all`),
/// spec-note 0646. A body with no GPU is unchanged.
pub(crate) fn podman_gpus(body: &mut ContainerCreateBody) {
    let Some(requests) = body
        .host_config
        .as_mut()
        .and_then(|h| h.device_requests.as_mut())
    else {
        return;
    };
    for request in requests.iter_mut() {
        if *request == all_gpus() {
            *request = DeviceRequest {
                driver: Some("cdi".to_string()),
                device_ids: Some(vec![PODMAN_ALL_GPUS.to_string()]),
                ..DeviceRequest::default()
            };
        }
    }
}

/// The CDI name of every NVIDIA GPU (the NVIDIA container toolkit's generated spec).
const PODMAN_ALL_GPUS: &str = "nvidia.com/gpu=all";

/// Podman refuses the `uid=`/`gid=` tmpfs options Docker passes to the kernel; its own `U`
/// option makes the tmpfs owned by the container's user instead (spec-note 0084).
pub(crate) fn podman_tmpfs_options(options: &str) -> String {
    let mut owned = false;
    let mut kept: Vec<&str> = Vec::new();
    for opt in options.split(',').filter(|o| !o.is_empty()) {
        if opt.starts_with("uid=") || opt.starts_with("gid=") {
            owned = true;
        } else {
            kept.push(opt);
        }
    }
    if owned && !kept.contains(&"U") {
        kept.push("U");
    }
    kept.join(",")
}

pub(super) fn container_summary(c: bollard::models::ContainerSummary) -> ContainerSummary {
    ContainerSummary {
        id: c.id.unwrap_or_default(),
        names: c
            .names
            .unwrap_or_default()
            .into_iter()
            .map(|n| n.trim_start_matches('/').to_string())
            .collect(),
        image: c.image.unwrap_or_default(),
        image_id: c.image_id.unwrap_or_default(),
        state: c.state.map(|s| s.to_string()).unwrap_or_default(),
        labels: sorted(c.labels),
    }
}

fn positive(v: Option<i64>) -> Option<i64> {
    v.filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn podman_tmpfs_owner_uses_u() {
        assert_eq!(
            podman_tmpfs_options("rw,nosuid,uid=1000,gid=1000,mode=755"),
            "rw,nosuid,mode=755,U"
        );
        assert_eq!(podman_tmpfs_options("rw,mode=1777"), "rw,mode=1777");
    }

    /// A GPU is Docker's `--gpus all` device request, and nothing else about the container
    /// changes (spec-note 0646).
    #[test]
    fn a_gpu_request_is_one_device_request_for_every_gpu() {
        let spec = ContainerSpec {
            image: "img".into(),
            gpu: Some(crate::engine::GpuRequest {
                asked: "true".into(),
            }),
            ..ContainerSpec::default()
        };
        let host = to_create_body(&spec).host_config.unwrap();
        let requests = serde_json::to_value(host.device_requests.unwrap()).unwrap();
        assert_eq!(
            requests,
            serde_json::json!([{"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}])
        );
        assert_eq!(host.devices, None);
        assert_eq!(host.privileged, Some(false));

        // Under Podman the same request is CDI's every NVIDIA GPU, and nothing else changes.
        let mut podman = to_create_body(&spec);
        podman_gpus(&mut podman);
        let host = podman.host_config.unwrap();
        assert_eq!(
            serde_json::to_value(host.device_requests.unwrap()).unwrap(),
            serde_json::json!([{"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=all"]}])
        );
        assert_eq!(host.devices, None);
        let mut none = to_create_body(&ContainerSpec {
            image: "img".into(),
            ..ContainerSpec::default()
        });
        podman_gpus(&mut none);
        assert_eq!(none.host_config.unwrap().device_requests, None);
    }

    #[test]
    fn create_body_maps_security_and_limits() {
        let spec = ContainerSpec {
            image: "img".into(),
            cap_drop: vec!["ALL".into()],
            security_opt: vec!["no-new-privileges:true".into()],
            read_only_rootfs: true,
            tmpfs: BTreeMap::from([("/tmp".to_string(), "mode=1777".to_string())]),
            limits: Limits {
                pids: Some(10),
                memory_bytes: Some(1 << 20),
                nano_cpus: Some(1_000_000_000),
            },
            ports: vec![PortBinding {
                container_port: 80,
                protocol: "tcp".into(),
                host_ip: None,
                host_port: Some(8080),
            }],
            mounts: vec![Mount {
                kind: MountKind::Volume,
                source: None,
                target: "/v".into(),
                read_only: true,
            }],
            ..ContainerSpec::default()
        };
        let body = to_create_body(&spec);
        let host = body.host_config.unwrap();
        assert_eq!(host.device_requests, None, "no GPU unless asked");
        assert_eq!(host.cap_drop.unwrap(), ["ALL"]);
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.pids_limit, Some(10));
        assert_eq!(host.nano_cpus, Some(1_000_000_000));
        assert_eq!(host.tmpfs.unwrap()["/tmp"], "mode=1777");
        let ports = host.port_bindings.unwrap();
        assert_eq!(
            ports["80/tcp"].as_ref().unwrap()[0].host_port.as_deref(),
            Some("8080")
        );
        assert_eq!(body.exposed_ports.unwrap(), ["80/tcp"]);
        let m = &host.mounts.unwrap()[0];
        assert_eq!((m.typ, m.read_only), (Some(MountType::VOLUME), Some(true)));
    }
}

/// `ps` arguments for [`Engine::process_uids`]: every process (`-e`, so the engine's fallback
/// without its own pid selection still lists the container's), numeric ids only.
const TOP_UID_ARGS: &str = "-e -o pid,ruid,euid,suid,fsuid";

/// Whether the daemon's `ps` shows a container's uids as they are inside: not when it remaps
/// user namespaces (`name=userns`: container root is a high host uid) or runs in one itself
/// (`name=rootless`), per `SecurityOptions` of `docker info`; and only for the runtimes whose
/// processes are the host's own, with the ids they have inside (`runc`, `crun`; devcell's
/// containers take the default runtime): a runtime that remaps ids (sysbox) or runs a
/// sandbox kernel (gVisor, Kata) does not.
fn ids_as_inside(info: &EngineInfo) -> bool {
    matches!(info.default_runtime.as_str(), "runc" | "crun")
        && !info.security_options.iter().any(|o| {
            o.split(',')
                .any(|part| part == "name=userns" || part == "name=rootless")
        })
}

/// The `[ruid, euid, suid, fsuid]` of each process of a `top` answer; `None` unless the four
/// columns are there and every process has four numbers (an answer with no process is none).
fn uids_from_top(titles: &[String], processes: &[Vec<String>]) -> Option<Vec<[u32; 4]>> {
    let column = |name: &str| titles.iter().position(|t| t.eq_ignore_ascii_case(name));
    let columns = [
        column("RUID")?,
        column("EUID")?,
        column("SUID")?,
        column("FSUID")?,
    ];
    let uids: Option<Vec<[u32; 4]>> = processes
        .iter()
        .map(|p| {
            let mut ids = [0u32; 4];
            for (slot, &c) in ids.iter_mut().zip(&columns) {
                *slot = p.get(c)?.trim().parse().ok()?;
            }
            Some(ids)
        })
        .collect();
    uids.filter(|u| !u.is_empty())
}

#[cfg(test)]
mod process_uid_tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_top_answer_gives_each_process_its_four_uids_or_nothing() {
        let titles = strings(&["PID", "RUID", "EUID", "SUID", "FSUID"]);
        let rows = vec![
            strings(&["10", "65534", "65534", "65534", "65534"]),
            strings(&["11", "1000", "0", "1000", "1000"]),
        ];
        assert_eq!(
            uids_from_top(&titles, &rows),
            Some(vec![[65534; 4], [1000, 0, 1000, 1000]])
        );
        // A name where a number belongs, a missing column, or no process: no answer.
        let named = vec![strings(&["10", "root", "0", "0", "0"])];
        assert_eq!(uids_from_top(&titles, &named), None);
        assert_eq!(uids_from_top(&strings(&["PID", "UID"]), &rows), None);
        assert_eq!(uids_from_top(&titles, &[]), None);
        let short = vec![strings(&["10", "1", "1"])];
        assert_eq!(uids_from_top(&titles, &short), None);
    }

    #[test]
    fn a_daemon_that_remaps_runs_rootless_or_sandboxes_does_not_show_the_ids_inside() {
        let info = |options: &[&str], runtime: &str| EngineInfo {
            security_options: strings(options),
            default_runtime: runtime.to_string(),
            ..EngineInfo::default()
        };
        let plain = ["name=seccomp,profile=default", "name=cgroupns"];
        assert!(ids_as_inside(&info(&plain, "runc")));
        assert!(ids_as_inside(&info(&plain, "crun")));
        assert!(!ids_as_inside(&info(&["name=userns"], "runc")));
        assert!(!ids_as_inside(&info(
            &["name=seccomp,profile=default", "name=rootless"],
            "runc"
        )));
        // A runtime that remaps ids or runs its own kernel, or none named: the exec answers.
        assert!(!ids_as_inside(&info(&plain, "sysbox-runc")));
        assert!(!ids_as_inside(&info(&plain, "runsc")));
        assert!(!ids_as_inside(&info(&plain, "")));
    }
}
