//! [`DockerEngine`]: the [`Engine`] over the Docker Engine API (bollard).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::auth::DockerCredentials;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, DeviceMapping, HostConfig, Mount as BollardMount, MountType,
    PortBinding as BollardPortBinding, ResourcesUlimits,
};
use bollard::query_parameters::{
    BuildImageOptions, CreateContainerOptions, CreateImageOptions, ListContainersOptions,
    RemoveContainerOptions, StopContainerOptions, TagImageOptions,
};
use futures_util::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::error::{EngineError, Result};
use super::spec::*;
use super::{Engine, auth, context};
use crate::progress::{Event, Reporter};

/// The default engine address when `DOCKER_HOST` is unset.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// Request timeout: long, because a build or an exec can legitimately run for a long time.
const TIMEOUT_SECS: u64 = 6 * 60 * 60;

/// The Docker Engine API implementation of [`Engine`] (Docker, or Podman's compatible socket).
#[derive(Debug, Clone)]
pub struct DockerEngine {
    docker: Docker,
    host: String,
}

fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

impl DockerEngine {
    /// Connects to the engine at `DOCKER_HOST` (default [`DEFAULT_HOST`]) and negotiates the API
    /// version (so engines older than bollard's default API, like Docker 20.10's 1.41, work).
    ///
    /// Errors: [`EngineError::NotRunning`] (with a hint on how to start one) when nothing
    /// answers; [`EngineError::UnsupportedHost`] for an address scheme devcell cannot use.
    pub async fn connect() -> Result<Self> {
        let host = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        Self::connect_to(&host).await
    }

    /// Connects to the engine at `host` (`unix:///path`, `tcp://host:port`, `http://…`).
    ///
    /// Errors: as [`DockerEngine::connect`].
    pub async fn connect_to(host: &str) -> Result<Self> {
        let docker = match Docker::connect_with_host(host) {
            Ok(d) => d,
            Err(source @ bollard::errors::Error::SocketNotFoundError(_)) => {
                return Err(EngineError::NotRunning {
                    host: host.to_string(),
                    source,
                });
            }
            Err(source) => {
                return Err(EngineError::UnsupportedHost {
                    host: host.to_string(),
                    source,
                });
            }
        };
        let docker = docker
            .with_timeout(Duration::from_secs(TIMEOUT_SECS))
            .negotiate_version()
            .await
            .map_err(|source| EngineError::NotRunning {
                host: host.to_string(),
                source,
            })?;
        Ok(Self {
            docker,
            host: host.to_string(),
        })
    }

    /// The address this engine was reached at.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The host path of the engine's unix socket, when connected through one (used by the
    /// security policy to refuse mounting it).
    pub fn socket_path(&self) -> Option<&str> {
        self.host.strip_prefix("unix://")
    }

    fn api(
        operation: &'static str,
        subject: &str,
    ) -> impl FnOnce(bollard::errors::Error) -> EngineError {
        let subject = subject.to_string();
        move |source| EngineError::Api {
            operation,
            subject,
            source,
        }
    }
}

fn credentials_for(reference: &str) -> Result<Option<DockerCredentials>> {
    let registry = registry_of(reference);
    let Some(path) = auth::config_path() else {
        return Ok(None);
    };
    let config = auth::load(&path)?;
    Ok(config.credentials(&registry)?.map(|c| DockerCredentials {
        username: c.username,
        password: c.password,
        identitytoken: c.identity_token,
        serveraddress: Some(c.server_address),
        ..DockerCredentials::default()
    }))
}

/// The registry host of an image reference (`docker.io` when none is named), following the
/// distribution reference rules: the first component is a host when it has a `.` or `:` or is
/// `localhost`.
pub fn registry_of(reference: &str) -> String {
    match reference.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first.to_string(),
        _ => "docker.io".to_string(),
    }
}

/// Splits `name[:tag][@digest]` into (repository, tag-or-digest), defaulting the tag to `latest`.
pub fn split_reference(reference: &str) -> (String, String) {
    if let Some((name, digest)) = reference.split_once('@') {
        let name = strip_tag(name);
        return (name.to_string(), digest.to_string());
    }
    let last_slash = reference.rfind('/').map(|i| i + 1).unwrap_or(0);
    match reference[last_slash..].rfind(':') {
        Some(i) => (
            reference[..last_slash + i].to_string(),
            reference[last_slash + i + 1..].to_string(),
        ),
        None => (reference.to_string(), "latest".to_string()),
    }
}

fn strip_tag(name: &str) -> &str {
    let last_slash = name.rfind('/').map(|i| i + 1).unwrap_or(0);
    match name[last_slash..].rfind(':') {
        Some(i) => &name[..last_slash + i],
        None => name,
    }
}

/// Splits text into complete lines, keeping an unfinished tail in `pending`.
fn drain_lines(pending: &mut String, chunk: &str, mut each: impl FnMut(String)) {
    pending.push_str(chunk);
    while let Some(i) = pending.find('\n') {
        let line: String = pending.drain(..=i).collect();
        each(line.trim_end_matches(['\n', '\r']).to_string());
    }
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
            source: m.source.clone(),
            target: Some(m.target.clone()),
            read_only: Some(m.read_only),
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

fn sorted(map: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    map.unwrap_or_default().into_iter().collect()
}

fn positive(v: Option<i64>) -> Option<i64> {
    v.filter(|n| *n > 0)
}

#[async_trait]
impl Engine for DockerEngine {
    async fn version(&self) -> Result<EngineVersion> {
        let v = self
            .docker
            .version()
            .await
            .map_err(|source| EngineError::NotRunning {
                host: self.host.clone(),
                source,
            })?;
        let podman = v
            .components
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.name.to_ascii_lowercase().contains("podman"));
        Ok(EngineVersion {
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
            os: v.os.unwrap_or_default(),
            arch: v.arch.unwrap_or_default(),
            podman,
        })
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>> {
        let image = match self.docker.inspect_image(reference).await {
            Ok(i) => i,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(Self::api("inspect image", reference)(e)),
        };
        let config = image.config.unwrap_or_default();
        Ok(Some(ImageInfo {
            id: image.id.unwrap_or_default(),
            repo_digests: image.repo_digests.unwrap_or_default(),
            repo_tags: image.repo_tags.unwrap_or_default(),
            user: config.user.filter(|u| !u.is_empty()),
            env: config.env.unwrap_or_default(),
            labels: sorted(config.labels),
            entrypoint: config.entrypoint,
            cmd: config.cmd,
            working_dir: config.working_dir.filter(|w| !w.is_empty()),
        }))
    }

    async fn pull_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        let credentials = credentials_for(reference)?;
        let (repository, tag) = split_reference(reference);
        let options = CreateImageOptions {
            from_image: Some(repository),
            tag: Some(tag),
            ..CreateImageOptions::default()
        };
        let mut stream = self.docker.create_image(Some(options), None, credentials);
        let mut last = String::new();
        while let Some(item) = stream.next().await {
            let info = item.map_err(|source| EngineError::Pull {
                reference: reference.to_string(),
                source,
            })?;
            if let Some(status) = info.status {
                let line = match info.id {
                    Some(id) => format!("{id}: {status}"),
                    None => status,
                };
                // Progress ticks repeat the same status; report each change once.
                if line != last && info.progress_detail.is_none_or(|p| p.current.is_none()) {
                    reporter.report(Event::Status(line.clone()));
                    last = line;
                }
            }
        }
        Ok(())
    }

    async fn build_image(
        &self,
        request: &BuildRequest,
        reporter: &dyn Reporter,
    ) -> Result<ImageInfo> {
        let packed = context::pack(&request.context, &request.dockerfile)?;
        let options = BuildImageOptions {
            dockerfile: packed.dockerfile.clone(),
            t: request.tags.first().cloned(),
            target: request.target.clone().unwrap_or_default(),
            cachefrom: (!request.cache_from.is_empty()).then(|| request.cache_from.clone()),
            buildargs: (!request.args.is_empty()).then(|| {
                request
                    .args
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }),
            labels: (!request.labels.is_empty()).then(|| {
                request
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }),
            nocache: request.no_cache,
            pull: request.pull.then(|| "1".to_string()),
            rm: true,
            forcerm: true,
            networkmode: request.network.clone(),
            platform: request.platform.clone().unwrap_or_default(),
            ..BuildImageOptions::default()
        };
        // Registry credentials for the base images: every registry in the client config.
        let creds = auth::config_path()
            .map(|p| auth::load(&p))
            .transpose()?
            .map(|config| {
                config
                    .auths
                    .keys()
                    .filter_map(|k| {
                        let host = k
                            .trim_start_matches("https://")
                            .trim_start_matches("http://")
                            .split('/')
                            .next()
                            .unwrap_or_default()
                            .to_string();
                        config.inline_credentials(&host).map(|c| {
                            (
                                k.clone(),
                                DockerCredentials {
                                    username: c.username,
                                    password: c.password,
                                    identitytoken: c.identity_token,
                                    serveraddress: Some(c.server_address),
                                    ..DockerCredentials::default()
                                },
                            )
                        })
                    })
                    .collect::<HashMap<_, _>>()
            })
            .filter(|m| !m.is_empty());
        let body = bollard::body_full(packed.tar.into());
        let subject = request
            .tags
            .first()
            .cloned()
            .unwrap_or_else(|| request.context.display().to_string());
        let mut stream = self.docker.build_image(options, creds, Some(body));
        let mut pending = String::new();
        let mut image_id: Option<String> = None;
        while let Some(item) = stream.next().await {
            let info = match item {
                Ok(i) => i,
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Err(EngineError::Build { message: error });
                }
                Err(e) => return Err(Self::api("build image", &subject)(e)),
            };
            if let Some(text) = info.stream {
                drain_lines(&mut pending, &text, |l| reporter.report(Event::Output(l)));
            }
            if let Some(detail) = info.error_detail {
                return Err(EngineError::Build {
                    message: detail
                        .message
                        .unwrap_or_else(|| "unknown error".to_string()),
                });
            }
            if let Some(id) = info.aux.and_then(|a| a.id) {
                image_id = Some(id);
            }
        }
        if !pending.is_empty() {
            reporter.report(Event::Output(std::mem::take(&mut pending)));
        }
        for tag in request.tags.iter().skip(1) {
            let source = request.tags[0].clone();
            self.tag_image(&source, tag).await?;
        }
        let lookup =
            request
                .tags
                .first()
                .cloned()
                .or(image_id)
                .ok_or_else(|| EngineError::Build {
                    message: "the engine did not report the built image".to_string(),
                })?;
        self.inspect_image(&lookup)
            .await?
            .ok_or_else(|| EngineError::Build {
                message: format!("the built image `{lookup}` is not listed by the engine"),
            })
    }

    async fn tag_image(&self, source: &str, target: &str) -> Result<()> {
        let (repo, tag) = split_reference(target);
        self.docker
            .tag_image(
                source,
                Some(TagImageOptions {
                    repo: Some(repo),
                    tag: Some(tag),
                }),
            )
            .await
            .map_err(Self::api("tag image", source))
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<String> {
        let options = CreateContainerOptions {
            name: spec.name.clone(),
            ..CreateContainerOptions::default()
        };
        let subject = spec.name.clone().unwrap_or_else(|| spec.image.clone());
        let created = self
            .docker
            .create_container(Some(options), to_create_body(spec))
            .await
            .map_err(Self::api("create container", &subject))?;
        Ok(created.id)
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        match self.docker.start_container(id, None).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) if is_not_found(&e) => Err(EngineError::NoSuchContainer { id: id.to_string() }),
            Err(e) => Err(Self::api("start container", id)(e)),
        }
    }

    async fn stop_container(&self, id: &str, timeout: Option<Duration>) -> Result<()> {
        let options = StopContainerOptions {
            t: timeout.map(|t| i32::try_from(t.as_secs()).unwrap_or(i32::MAX)),
            ..StopContainerOptions::default()
        };
        match self.docker.stop_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) if is_not_found(&e) => Err(EngineError::NoSuchContainer { id: id.to_string() }),
            Err(e) => Err(Self::api("stop container", id)(e)),
        }
    }

    async fn remove_container(&self, id: &str, force: bool) -> Result<()> {
        let options = RemoveContainerOptions {
            v: true,
            force,
            link: false,
        };
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(Self::api("remove container", id)(e)),
        }
    }

    async fn find_containers(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<ContainerSummary>> {
        let filters: HashMap<String, Vec<String>> = HashMap::from([(
            "label".to_string(),
            labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        )]);
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..ListContainersOptions::default()
        };
        let subject = labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let list = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(Self::api("list containers", &subject))?;
        Ok(list
            .into_iter()
            .map(|c| ContainerSummary {
                id: c.id.unwrap_or_default(),
                names: c
                    .names
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| n.trim_start_matches('/').to_string())
                    .collect(),
                image: c.image.unwrap_or_default(),
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                labels: sorted(c.labels),
            })
            .collect())
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>> {
        let c = match self.docker.inspect_container(id, None).await {
            Ok(c) => c,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(Self::api("inspect container", id)(e)),
        };
        let state = c.state.unwrap_or_default();
        let config = c.config.unwrap_or_default();
        let host = c.host_config.unwrap_or_default();
        Ok(Some(ContainerInfo {
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
            labels: sorted(config.labels),
            env: config.env.unwrap_or_default(),
            user: config.user.unwrap_or_default(),
            mounts: c
                .mounts
                .unwrap_or_default()
                .into_iter()
                .map(|m| MountInfo {
                    kind: m.typ.unwrap_or_default(),
                    source: m.source.unwrap_or_default(),
                    name: m.name.filter(|n| !n.is_empty()),
                    destination: m.destination.unwrap_or_default(),
                    rw: m.rw.unwrap_or(false),
                })
                .collect(),
            host: HostSecurity {
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
            },
        }))
    }

    async fn exec(
        &self,
        id: &str,
        request: &ExecRequest,
        input: ExecInput,
        output: ExecOutput<'_>,
    ) -> Result<ExecResult> {
        let has_input = !matches!(input, ExecInput::None);
        let config = CreateExecOptions::<String> {
            attach_stdin: Some(has_input),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(request.tty),
            env: (!request.env.is_empty()).then(|| {
                request
                    .env
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect()
            }),
            cmd: Some(request.argv.clone()),
            user: request.user.clone(),
            working_dir: request.working_dir.clone(),
            ..CreateExecOptions::default()
        };
        let created = match self.docker.create_exec(id, config).await {
            Ok(c) => c,
            Err(e) if is_not_found(&e) => {
                return Err(EngineError::NoSuchContainer { id: id.to_string() });
            }
            Err(e) => return Err(Self::api("create exec", id)(e)),
        };
        let started = self
            .docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: request.tty,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(Self::api("start exec", id))?;
        let StartExecResults::Attached {
            output: mut stream,
            input: mut stdin,
        } = started
        else {
            return Err(EngineError::ExecIo {
                container: id.to_string(),
                source: std::io::Error::other("the engine detached the exec"),
            });
        };
        let io_err = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        let feed = async move {
            match input {
                ExecInput::None => Ok(()),
                ExecInput::Bytes(bytes) => {
                    stdin.write_all(&bytes).await?;
                    stdin.shutdown().await
                }
                ExecInput::Stream(mut reader) => {
                    tokio::io::copy(&mut reader, &mut stdin).await?;
                    stdin.shutdown().await
                }
            }
        };
        let mut result = ExecResult::default();
        let drain = async {
            let mut pending_out = String::new();
            let mut pending_err = String::new();
            let mut sink = output;
            while let Some(item) = stream.next().await {
                let item = item.map_err(Self::api("exec output", id))?;
                let (is_err, bytes) = match item {
                    LogOutput::StdErr { message } => (true, message),
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        (false, message)
                    }
                    LogOutput::StdIn { .. } => continue,
                };
                match &mut sink {
                    ExecOutput::Collect => {
                        if is_err {
                            result.stderr.extend_from_slice(&bytes);
                        } else {
                            result.stdout.extend_from_slice(&bytes);
                        }
                    }
                    ExecOutput::Report(reporter) => {
                        let pending = if is_err {
                            &mut pending_err
                        } else {
                            &mut pending_out
                        };
                        drain_lines(pending, &String::from_utf8_lossy(&bytes), |l| {
                            reporter.report(Event::Output(l))
                        });
                    }
                    ExecOutput::Write { stdout, stderr } => {
                        let w: &mut (dyn AsyncWrite + Send + Unpin) =
                            if is_err { stderr } else { stdout };
                        w.write_all(&bytes).await.map_err(io_err)?;
                        w.flush().await.map_err(io_err)?;
                    }
                }
            }
            if let ExecOutput::Report(reporter) = &sink {
                for tail in [pending_out, pending_err] {
                    if !tail.is_empty() {
                        reporter.report(Event::Output(tail));
                    }
                }
            }
            Ok::<_, EngineError>(())
        };
        let (fed, drained) = tokio::join!(feed, drain);
        drained?;
        // A process that exits without reading its stdin closes the pipe: not an error.
        if let Err(e) = fed
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(io_err(e));
        }
        let inspect = self
            .docker
            .inspect_exec(&created.id)
            .await
            .map_err(Self::api("inspect exec", id))?;
        result.exit_code = inspect.exit_code.unwrap_or(-1);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_of_follows_reference_rules() {
        assert_eq!(registry_of("busybox"), "docker.io");
        assert_eq!(registry_of("library/busybox:1"), "docker.io");
        assert_eq!(registry_of("ghcr.io/o/r:1"), "ghcr.io");
        assert_eq!(registry_of("127.0.0.1:5000/x"), "127.0.0.1:5000");
        assert_eq!(registry_of("localhost/x"), "localhost");
    }

    #[test]
    fn split_reference_handles_ports_tags_digests() {
        assert_eq!(
            split_reference("busybox"),
            ("busybox".into(), "latest".into())
        );
        assert_eq!(
            split_reference("127.0.0.1:5000/a/b:1.2"),
            ("127.0.0.1:5000/a/b".into(), "1.2".into())
        );
        assert_eq!(
            split_reference("127.0.0.1:5000/a/b"),
            ("127.0.0.1:5000/a/b".into(), "latest".into())
        );
        assert_eq!(
            split_reference("x/y:1@sha256:abc"),
            ("x/y".into(), "sha256:abc".into())
        );
    }

    #[test]
    fn drain_lines_keeps_partial_tail() {
        let mut pending = String::new();
        let mut lines = Vec::new();
        drain_lines(&mut pending, "a\nb", |l| lines.push(l));
        drain_lines(&mut pending, "c\r\nd\n", |l| lines.push(l));
        assert_eq!(lines, ["a", "bc", "d"]);
        assert!(pending.is_empty());
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
