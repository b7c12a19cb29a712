//! [`DockerEngine`]: the [`Engine`] over the Docker Engine API (bollard).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::auth::DockerCredentials;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, DeviceMapping, HostConfig, Mount as BollardMount, MountTmpfsOptions,
    MountType, PortBinding as BollardPortBinding, ResourcesUlimits,
};
use bollard::query_parameters::{
    BuildImageOptions, CreateContainerOptions, CreateImageOptions, DownloadFromContainerOptions,
    ListContainersOptions, ListImagesOptions, ListNetworksOptions, ListVolumesOptions,
    PushImageOptions, RemoveContainerOptions, RemoveImageOptions, RemoveVolumeOptions,
    StopContainerOptions, TagImageOptions, UploadToContainerOptions,
};
use futures_util::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::error::{EngineError, Result};
use super::spec::*;
use super::{Engine, auth, context};
use crate::progress::{Event, Reporter};

/// The default engine address when `DOCKER_HOST` is unset.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The Engine API version tried first: Docker 20.10's, which later Docker releases up to 28
/// and Podman's compatible API also accept.
const FAST_PATH_API: &bollard::ClientVersion = &bollard::ClientVersion {
    major_version: 1,
    minor_version: 41,
};

/// A client for `host` speaking API `version` (no request made yet).
fn client(host: &str, version: &bollard::ClientVersion) -> Result<Docker> {
    let made = if host.starts_with("unix://") {
        Docker::connect_with_unix(host, TIMEOUT_SECS, version)
    } else if host.starts_with("tcp://") || host.starts_with("http://") {
        Docker::connect_with_http(host, TIMEOUT_SECS, version)
    } else {
        Err(bollard::errors::Error::UnsupportedURISchemeError {
            uri: host.to_string(),
        })
    };
    made.map_err(|source| match source {
        bollard::errors::Error::SocketNotFoundError(_) => EngineError::NotRunning {
            host: host.to_string(),
            source,
        },
        source => EngineError::UnsupportedHost {
            host: host.to_string(),
            source,
        },
    })
}

/// Request timeout: long, because a build or an exec can legitimately run for a long time.
const TIMEOUT_SECS: u64 = 6 * 60 * 60;

/// The Docker Engine API implementation of [`Engine`] (Docker, or Podman's compatible socket).
#[derive(Debug, Clone)]
pub struct DockerEngine {
    docker: Docker,
    host: String,
    /// Whether the engine is Podman (asked once, at the first container creation).
    podman: std::sync::Arc<tokio::sync::OnceCell<bool>>,
}

/// Runs blocking file or process work off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| EngineError::BuildContext {
            path: std::path::PathBuf::new(),
            source: std::io::Error::other(e),
        })?
}

/// Whether the request failed to reach the engine at all.
fn is_connection_error(e: &bollard::errors::Error) -> bool {
    use bollard::errors::Error as E;
    matches!(
        e,
        E::IOError { .. }
            | E::HyperLegacyError { .. }
            | E::SocketNotFoundError(_)
            | E::RequestTimeoutError
    )
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
    /// Fast path: Engine API [`FAST_PATH_API`] (Docker ≥ 20.10, Podman ≥ 3) checked with one
    /// `/_ping` (about 1 ms); an engine that refuses that version is negotiated with through
    /// `/version` ([`DockerEngine::connect_negotiated`]), which Docker answers slowly (it asks
    /// its runtimes for their versions: 8–27 ms here, more than a whole `docker inspect`).
    ///
    /// Errors: as [`DockerEngine::connect`].
    pub async fn connect_to(host: &str) -> Result<Self> {
        let docker = client(host, FAST_PATH_API)?;
        match docker.ping().await {
            Ok(_) => Ok(Self::wrap(docker, host)),
            Err(bollard::errors::Error::DockerResponseServerError { .. }) => {
                Self::connect_negotiated(host).await
            }
            Err(source) => Err(EngineError::NotRunning {
                host: host.to_string(),
                source,
            }),
        }
    }

    /// Connects to the engine at `host` and negotiates the API version through `/version`
    /// (the highest version both sides speak).
    ///
    /// Errors: as [`DockerEngine::connect`].
    pub async fn connect_negotiated(host: &str) -> Result<Self> {
        let docker = client(host, bollard::API_DEFAULT_VERSION)?
            .negotiate_version()
            .await
            .map_err(|source| EngineError::NotRunning {
                host: host.to_string(),
                source,
            })?;
        Ok(Self::wrap(docker, host))
    }

    fn wrap(docker: Docker, host: &str) -> Self {
        Self {
            docker,
            host: host.to_string(),
            podman: std::sync::Arc::default(),
        }
    }

    /// The Engine API version requests use (`1.41`).
    pub fn api_version(&self) -> String {
        let v = self.docker.client_version();
        format!("{}.{}", v.major_version, v.minor_version)
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

    /// Maps a failed request: a lost connection (the engine stopped mid-way) is
    /// [`EngineError::NotRunning`], anything else [`EngineError::Api`].
    /// Every container (running or not) with all of `labels` (`key` or `key=value` filters;
    /// none: every container); `subject` names them in an error.
    async fn containers_with_labels(
        &self,
        labels: Vec<String>,
        subject: &str,
    ) -> Result<Vec<ContainerSummary>> {
        let options = ListContainersOptions {
            all: true,
            filters: (!labels.is_empty()).then(|| HashMap::from([("label".to_string(), labels)])),
            ..ListContainersOptions::default()
        };
        let list = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(self.api("list containers", subject))?;
        Ok(list.into_iter().map(container_summary).collect())
    }

    /// The tar archive the engine gives for `path` in container `id` (the archive API), whole;
    /// `None` when the container has no such path. `operation` names the request in errors.
    ///
    /// Errors: [`EngineError::NoSuchContainer`], [`EngineError::Api`].
    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        operation: &'static str,
    ) -> Result<Option<Vec<u8>>> {
        let options = DownloadFromContainerOptions {
            path: path.to_string(),
        };
        let mut stream = self.docker.download_from_container(id, Some(options));
        let mut archive = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => archive.extend_from_slice(&bytes),
                Err(e) if is_not_found(&e) && archive.is_empty() => {
                    // 404 is both "no such container" and "no such path".
                    return match self.inspect_container(id).await? {
                        Some(_) => Ok(None),
                        None => Err(EngineError::NoSuchContainer { id: id.to_string() }),
                    };
                }
                Err(e) => return Err(self.api(operation, &format!("{id}:{path}"))(e)),
            }
        }
        Ok(Some(archive))
    }

    fn api(
        &self,
        operation: &'static str,
        subject: &str,
    ) -> impl FnOnce(bollard::errors::Error) -> EngineError {
        let subject = subject.to_string();
        let host = self.host.clone();
        move |source| {
            if is_connection_error(&source) {
                EngineError::NotRunning { host, source }
            } else {
                EngineError::Api {
                    operation,
                    subject,
                    source,
                }
            }
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

/// The manifest digest in the engine's final push status line
/// (`<tag>: digest: sha256:<64 hex> size: <n>`), if `status` is that line.
fn pushed_digest(status: &str) -> Option<String> {
    let rest = status.split_once("digest: ")?.1;
    let digest = rest.split_whitespace().next()?;
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| digest.to_string())
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
            source: m.source.clone().filter(|_| m.kind != MountKind::Tmpfs),
            target: Some(m.target.clone()),
            read_only: Some(m.read_only),
            tmpfs_options: (m.kind == MountKind::Tmpfs)
                .then_some(m.source.as_deref())
                .flatten()
                .map(|s| MountTmpfsOptions {
                    size_bytes: super::run_args::tmpfs_mount_size(s),
                    mode: super::run_args::tmpfs_mount_mode(s).map(i64::from),
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

/// A tag or digest reference (`name:tag`, `name@sha256:…`) in Docker's familiar form: Podman
/// reports Docker Hub names fully qualified (`docker.io/library/alpine:3`,
/// `docker.io/devcell/features:…`) where Docker says `alpine:3`, `devcell/features:…`, so
/// callers (prune's `devcell/features` match, build's base digest) see one spelling whatever the
/// engine (spec-notes/0080). Other registries (`localhost/`, `ghcr.io/`) are kept.
pub(crate) fn familiar_reference(reference: &str) -> String {
    let Some(rest) = reference.strip_prefix("docker.io/") else {
        return reference.to_string();
    };
    match rest.strip_prefix("library/") {
        Some(official)
            if !official
                .split(['@', ':'])
                .next()
                .unwrap_or("")
                .contains('/') =>
        {
            official.to_string()
        }
        _ => rest.to_string(),
    }
}

/// An image id in Docker's form, `sha256:<hex>`: Podman reports deleted images by the bare hex.
pub(crate) fn image_id(id: &str) -> String {
    if !id.contains(':') && id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("sha256:{id}")
    } else {
        id.to_string()
    }
}

fn familiar(references: Option<Vec<String>>) -> Vec<String> {
    references
        .unwrap_or_default()
        .iter()
        .map(|r| familiar_reference(r))
        .collect()
}

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

fn label_filters(labels: &BTreeMap<String, String>) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_string(), join_pairs_vec(labels))])
}

fn join_pairs_vec(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

fn join_pairs(labels: &BTreeMap<String, String>) -> String {
    join_pairs_vec(labels).join(",")
}

fn sorted(map: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    map.unwrap_or_default().into_iter().collect()
}

fn container_summary(c: bollard::models::ContainerSummary) -> ContainerSummary {
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

    async fn info(&self) -> Result<EngineInfo> {
        let i = self
            .docker
            .info()
            .await
            .map_err(self.api("info", &self.host))?;
        let mut runtimes: Vec<String> = i.runtimes.unwrap_or_default().into_keys().collect();
        runtimes.sort();
        Ok(EngineInfo {
            cpus: i.ncpu.unwrap_or(0),
            memory_bytes: i.mem_total.unwrap_or(0),
            storage_driver: i.driver.unwrap_or_default(),
            runtimes,
            security_options: i.security_options.unwrap_or_default(),
            cgroup_version: i.cgroup_version.map(|v| v.to_string()).unwrap_or_default(),
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>> {
        let image = match self.docker.inspect_image(reference).await {
            Ok(i) => i,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(self.api("inspect image", reference)(e)),
        };
        let config = image.config.unwrap_or_default();
        Ok(Some(ImageInfo {
            id: image.id.unwrap_or_default(),
            repo_digests: familiar(image.repo_digests),
            repo_tags: familiar(image.repo_tags),
            user: config.user.filter(|u| !u.is_empty()),
            env: config.env.unwrap_or_default(),
            labels: sorted(config.labels),
            entrypoint: config.entrypoint,
            cmd: config.cmd,
            working_dir: config.working_dir.filter(|w| !w.is_empty()),
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    async fn pull_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        // Credential helpers are processes and the config a file: off the async workers.
        let owned = reference.to_string();
        let credentials = blocking(move || credentials_for(&owned)).await?;
        let (repository, tag) = split_reference(reference);
        let options = CreateImageOptions {
            from_image: Some(repository),
            tag: Some(tag),
            ..CreateImageOptions::default()
        };
        let mut stream = self.docker.create_image(Some(options), None, credentials);
        let mut last = String::new();
        while let Some(item) = stream.next().await {
            let info = item.map_err(|source| {
                if is_connection_error(&source) {
                    EngineError::NotRunning {
                        host: self.host.clone(),
                        source,
                    }
                } else {
                    EngineError::Pull {
                        reference: reference.to_string(),
                        source,
                    }
                }
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

    #[tracing::instrument(level = "debug", skip_all)]
    async fn build_image(
        &self,
        request: &BuildRequest,
        reporter: &dyn Reporter,
    ) -> Result<ImageInfo> {
        let (context_dir, dockerfile) = (request.context.clone(), request.dockerfile.clone());
        let packed = blocking(move || context::pack(&context_dir, &dockerfile)).await?;
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
                Err(e) => return Err(self.api("build image", &subject)(e)),
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
            .map_err(self.api("tag image", source))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    async fn push_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<Option<String>> {
        let owned = reference.to_string();
        let credentials = blocking(move || credentials_for(&owned)).await?;
        let (repository, tag) = split_reference(reference);
        let options = PushImageOptions {
            tag: Some(tag),
            platform: None,
        };
        let mut stream = self
            .docker
            .push_image(&repository, Some(options), credentials);
        let (mut last, mut digest) = (String::new(), None);
        while let Some(item) = stream.next().await {
            let info = item.map_err(|source| {
                if is_connection_error(&source) {
                    EngineError::NotRunning {
                        host: self.host.clone(),
                        source,
                    }
                } else {
                    EngineError::Push {
                        reference: reference.to_string(),
                        message: match source {
                            bollard::errors::Error::DockerStreamError { error } => error,
                            other => other.to_string(),
                        },
                    }
                }
            })?;
            if let Some(status) = info.status {
                digest = digest.or_else(|| pushed_digest(&status));
                if status != last && info.progress_detail.is_none_or(|p| p.current.is_none()) {
                    reporter.report(Event::Status(status.clone()));
                    last = status;
                }
            }
        }
        Ok(digest)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn create_container(&self, spec: &ContainerSpec) -> Result<String> {
        let options = CreateContainerOptions {
            name: spec.name.clone(),
            ..CreateContainerOptions::default()
        };
        let subject = spec.name.clone().unwrap_or_else(|| spec.image.clone());
        let podman = *self
            .podman
            .get_or_try_init(|| async { self.version().await.map(|v| v.podman) })
            .await?;
        let mut body = to_create_body(spec);
        if podman && let Some(tmpfs) = body.host_config.as_mut().and_then(|h| h.tmpfs.as_mut()) {
            for options in tmpfs.values_mut() {
                *options = podman_tmpfs_options(options);
            }
        }
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(self.api("create container", &subject))?;
        Ok(created.id)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    async fn start_container(&self, id: &str) -> Result<()> {
        match self.docker.start_container(id, None).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) if is_not_found(&e) => Err(EngineError::NoSuchContainer { id: id.to_string() }),
            Err(e) => Err(self.api("start container", id)(e)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
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
            Err(e) => Err(self.api("stop container", id)(e)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    async fn remove_container(&self, id: &str, force: bool) -> Result<()> {
        let options = RemoveContainerOptions {
            v: true,
            force,
            link: false,
        };
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(self.api("remove container", id)(e)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn find_containers(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<ContainerSummary>> {
        let filters: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let subject = filters.join(",");
        self.containers_with_labels(filters, &subject).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>> {
        let c = match self.docker.inspect_container(id, None).await {
            Ok(c) => c,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(self.api("inspect container", id)(e)),
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
            created: c.created.clone().unwrap_or_default(),
            started_at: state.started_at.clone().unwrap_or_default(),
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
                devices: host
                    .devices
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|d| d.path_on_host)
                    .collect(),
            },
        }))
    }

    async fn info_json(&self) -> Result<serde_json::Value> {
        let info = self
            .docker
            .info()
            .await
            .map_err(self.api("info", &self.host))?;
        serde_json::to_value(&info).map_err(|e| EngineError::ExecIo {
            container: self.host.clone(),
            source: std::io::Error::other(e),
        })
    }

    async fn inspect_image_json(&self, reference: &str) -> Result<Option<serde_json::Value>> {
        match self.docker.inspect_image(reference).await {
            Ok(i) => serde_json::to_value(&i)
                .map(Some)
                .map_err(|e| EngineError::ExecIo {
                    container: reference.to_string(),
                    source: std::io::Error::other(e),
                }),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.api("inspect image", reference)(e)),
        }
    }

    async fn find_containers_with_label_key(&self, key: &str) -> Result<Vec<ContainerSummary>> {
        self.containers_with_labels(vec![key.to_string()], key)
            .await
    }

    async fn list_containers(&self) -> Result<Vec<ContainerSummary>> {
        self.containers_with_labels(Vec::new(), "all").await
    }

    async fn list_images(&self, reference: &str) -> Result<Vec<ImageSummary>> {
        let options = ListImagesOptions {
            filters: Some(HashMap::from([(
                "reference".to_string(),
                vec![reference.to_string()],
            )])),
            ..ListImagesOptions::default()
        };
        let list = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(self.api("list images", reference))?;
        Ok(list
            .into_iter()
            .map(|i| ImageSummary {
                id: i.id,
                parent_id: i.parent_id,
                repo_tags: i
                    .repo_tags
                    .iter()
                    .filter(|t| *t != "<none>:<none>")
                    .map(|t| familiar_reference(t))
                    .collect(),
                created: i.created,
                size: i.size,
            })
            .collect())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(reference = %reference))]
    async fn remove_image(&self, reference: &str) -> Result<Vec<String>> {
        let options = RemoveImageOptions {
            force: false,
            noprune: false,
            platforms: None,
        };
        match self
            .docker
            .remove_image(reference, Some(options), None)
            .await
        {
            Ok(items) => Ok(items
                .into_iter()
                .filter_map(|i| i.deleted)
                .map(|id| image_id(&id))
                .collect()),
            Err(e) if is_not_found(&e) => Ok(Vec::new()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) => Err(EngineError::ImageInUse {
                reference: reference.to_string(),
                message,
            }),
            Err(e) => Err(self.api("remove image", reference)(e)),
        }
    }

    async fn find_volumes(&self, labels: &BTreeMap<String, String>) -> Result<Vec<String>> {
        let filters = label_filters(labels);
        let subject = join_pairs(labels);
        let list = self
            .docker
            .list_volumes(Some(ListVolumesOptions {
                filters: Some(filters),
            }))
            .await
            .map_err(self.api("list volumes", &subject))?;
        Ok(list
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.name)
            .collect())
    }

    async fn find_networks(&self, labels: &BTreeMap<String, String>) -> Result<Vec<String>> {
        let filters = label_filters(labels);
        let subject = join_pairs(labels);
        let list = self
            .docker
            .list_networks(Some(ListNetworksOptions {
                filters: Some(filters),
            }))
            .await
            .map_err(self.api("list networks", &subject))?;
        Ok(list.into_iter().filter_map(|n| n.name).collect())
    }

    async fn volume_exists(&self, name: &str) -> Result<bool> {
        match self.docker.inspect_volume(name).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(self.api("inspect volume", name)(e)),
        }
    }

    async fn remove_volume(&self, name: &str) -> Result<()> {
        match self
            .docker
            .remove_volume(name, Some(RemoveVolumeOptions { force: false }))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(self.api("remove volume", name)(e)),
        }
    }

    async fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>> {
        match self.docker.inspect_volume(name).await {
            Ok(v) => Ok(Some(VolumeInfo {
                name: v.name,
                driver: v.driver,
                options: v.options.into_iter().collect(),
                labels: v.labels.into_iter().collect(),
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.api("inspect volume", name)(e)),
        }
    }

    async fn create_volume(&self, name: &str, labels: &BTreeMap<String, String>) -> Result<()> {
        let options = bollard::models::VolumeCreateRequest {
            name: Some(name.to_string()),
            driver: Some("local".to_string()),
            labels: Some(labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            ..Default::default()
        };
        self.docker
            .create_volume(options)
            .await
            .map(|_| ())
            .map_err(self.api("create volume", name))
    }

    async fn inspect_container_json(&self, id: &str) -> Result<Option<serde_json::Value>> {
        match self.docker.inspect_container(id, None).await {
            Ok(c) => serde_json::to_value(c)
                .map(Some)
                .map_err(|e| EngineError::Api {
                    operation: "inspect container",
                    subject: id.to_string(),
                    source: bollard::errors::Error::JsonSerdeError { err: e },
                }),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.api("inspect container", id)(e)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, path = %path))]
    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let Some(archive) = self.download_archive(id, path, "read file").await? else {
            return Ok(None);
        };
        let io = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        let mut tar = tar::Archive::new(archive.as_slice());
        let mut entries = tar.entries().map_err(io)?;
        let Some(entry) = entries.next() else {
            return Ok(None);
        };
        let mut entry = entry.map_err(io)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Ok(None);
        }
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut content).map_err(io)?;
        Ok(Some(content))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, path = %path))]
    async fn read_folder(&self, id: &str, path: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
        let Some(archive) = self.download_archive(id, path, "read folder").await? else {
            return Ok(None);
        };
        let io = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        // The archive holds `<folder name>/` and its content; only direct regular files count.
        let mut files = BTreeMap::new();
        let mut tar = tar::Archive::new(archive.as_slice());
        for entry in tar.entries().map_err(io)? {
            let mut entry = entry.map_err(io)?;
            if entry.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let name = {
                let path = entry.path().map_err(io)?;
                let parts: Vec<_> = path.components().collect();
                match parts.as_slice() {
                    [_, file] => file.as_os_str().to_string_lossy().into_owned(),
                    _ => continue,
                }
            };
            let mut content = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut content).map_err(io)?;
            files.insert(name, content);
        }
        Ok(Some(files))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, folder = %folder))]
    async fn write_file(&self, id: &str, folder: &str, name: &str, content: &[u8]) -> Result<()> {
        let folder = folder.trim_end_matches('/');
        let (parent, base) = folder.rsplit_once('/').unwrap_or(("", folder));
        let io = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        let mut builder = tar::Builder::new(Vec::new());
        builder
            .append_data(&mut header, format!("{base}/{name}"), content)
            .map_err(io)?;
        let archive = builder.into_inner().map_err(io)?;
        let options = UploadToContainerOptions {
            path: if parent.is_empty() {
                "/".to_string()
            } else {
                parent.to_string()
            },
            ..UploadToContainerOptions::default()
        };
        self.docker
            .upload_to_container(id, Some(options), bollard::body_full(archive.into()))
            .await
            .map_err(self.api("write file", &format!("{id}:{folder}/{name}")))
    }

    async fn exec(
        &self,
        id: &str,
        request: &ExecRequest,
        input: ExecInput,
        output: ExecOutput<'_>,
    ) -> Result<ExecResult> {
        self.run_exec(id, request, input, output, None).await
    }

    async fn exec_resizable(
        &self,
        id: &str,
        request: &ExecRequest,
        input: ExecInput,
        output: ExecOutput<'_>,
        sizes: tokio::sync::watch::Receiver<TtySize>,
    ) -> Result<ExecResult> {
        self.run_exec(id, request, input, output, Some(sizes)).await
    }
}

impl DockerEngine {
    /// [`Engine::exec`]; with a TTY and `sizes`, the TTY follows them (spec-note 0273): the
    /// initial size is given at creation (engines with API ≥ 1.42 use it) and sent with a
    /// resize right after the start (older engines), then each change is sent as it comes.
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, argv = ?request.argv.first()))]
    async fn run_exec(
        &self,
        id: &str,
        request: &ExecRequest,
        input: ExecInput,
        output: ExecOutput<'_>,
        sizes: Option<tokio::sync::watch::Receiver<TtySize>>,
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
        let sizes = sizes.filter(|_| request.tty);
        let mut config = bollard::models::ExecConfig::from(config);
        if let Some(size) = sizes
            .as_ref()
            .map(|s| *s.borrow())
            .filter(|s| !s.is_empty())
        {
            config.console_size = Some(vec![usize::from(size.rows), usize::from(size.cols)]);
        }
        let created = match self.docker.create_exec(id, config).await {
            Ok(c) => c,
            Err(e) if is_not_found(&e) => {
                return Err(EngineError::NoSuchContainer { id: id.to_string() });
            }
            Err(e) => return Err(self.api("create exec", id)(e)),
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
            .map_err(self.api("start exec", id))?;
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
                let item = item.map_err(self.api("exec output", id))?;
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
        // The output ends when the process exits; stop feeding stdin then (like `docker exec
        // -i`), so an input that never reaches end of file cannot keep the exec open. The TTY
        // size is followed until then.
        let (fed, drained) = {
            tokio::pin!(feed);
            tokio::pin!(drain);
            let mut fed = Ok(());
            let mut feeding = true;
            let resize = self.follow_sizes(&created.id, sizes);
            tokio::pin!(resize);
            let drained = loop {
                tokio::select! {
                    result = &mut drain => break result,
                    result = &mut feed, if feeding => {
                        fed = result;
                        feeding = false;
                    }
                    () = &mut resize => {}
                }
            };
            (fed, drained)
        };
        drained?;
        // A process that exits without reading its stdin closes the pipe: not an error.
        if let Err(e) = fed
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(io_err(e));
        }
        // The output stream can end a moment before the engine records the exit code.
        for attempt in 0.. {
            let inspect = self
                .docker
                .inspect_exec(&created.id)
                .await
                .map_err(self.api("inspect exec", id))?;
            match inspect.exit_code {
                Some(code) if inspect.running != Some(true) => {
                    result.exit_code = code;
                    break;
                }
                _ if attempt >= 200 => {
                    result.exit_code = inspect.exit_code.unwrap_or(-1);
                    break;
                }
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        Ok(result)
    }

    /// Sends the current size of `sizes` to the exec's TTY, then every change; never completes
    /// (pending at once without sizes, or once the sender is gone). A failed resize is logged
    /// and skipped: the process keeps its previous size.
    async fn follow_sizes(
        &self,
        exec_id: &str,
        sizes: Option<tokio::sync::watch::Receiver<TtySize>>,
    ) {
        if let Some(mut sizes) = sizes {
            loop {
                let size = *sizes.borrow_and_update();
                if !size.is_empty() {
                    let options = bollard::exec::ResizeExecOptions {
                        height: size.rows,
                        width: size.cols,
                    };
                    if let Err(e) = self.docker.resize_exec(exec_id, options).await {
                        tracing::debug!("resizing exec {exec_id} to {size:?} failed: {e}");
                    }
                }
                if sizes.changed().await.is_err() {
                    break;
                }
            }
        }
        std::future::pending::<()>().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_digest_reads_the_final_status_line() {
        let hex = "a".repeat(64);
        assert_eq!(
            pushed_digest(&format!("1: digest: sha256:{hex} size: 527")),
            Some(format!("sha256:{hex}"))
        );
        assert_eq!(pushed_digest("Pushed"), None);
        assert_eq!(pushed_digest("1: digest: sha256:abc size: 1"), None);
        assert_eq!(pushed_digest("digest: md5:00 size: 1"), None);
    }

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
    fn lost_connections_are_not_running_errors() {
        let io = bollard::errors::Error::IOError {
            err: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        assert!(is_connection_error(&io));
        let server = bollard::errors::Error::DockerResponseServerError {
            status_code: 500,
            message: "boom".into(),
        };
        assert!(!is_connection_error(&server));
    }

    #[test]
    fn podman_references_become_dockers_familiar_ones() {
        for (podman, docker) in [
            ("docker.io/library/alpine:3", "alpine:3"),
            ("docker.io/library/alpine@sha256:ab", "alpine@sha256:ab"),
            ("docker.io/devcell/features:k", "devcell/features:k"),
            ("docker.io/library/vsc-ws-1:latest", "vsc-ws-1:latest"),
            ("docker.io/library/a/b:1", "library/a/b:1"),
            ("devcell/uid:k", "devcell/uid:k"),
            (
                "localhost/devcell-test/busybox:1",
                "localhost/devcell-test/busybox:1",
            ),
            ("ghcr.io/x/y:1", "ghcr.io/x/y:1"),
            ("127.0.0.1:5000/x@sha256:ab", "127.0.0.1:5000/x@sha256:ab"),
        ] {
            assert_eq!(familiar_reference(podman), docker);
        }
    }

    #[test]
    fn podman_deleted_ids_get_the_digest_algorithm() {
        let hex = "b5883b5d3ded92e7266ee2653fcea5893d720696cb3fa139ef50bfe27513c6f2";
        assert_eq!(image_id(hex), format!("sha256:{hex}"));
        assert_eq!(image_id(&format!("sha256:{hex}")), format!("sha256:{hex}"));
        assert_eq!(image_id("abc"), "abc");
    }

    #[test]
    fn podman_tmpfs_owner_uses_u() {
        assert_eq!(
            podman_tmpfs_options("rw,nosuid,uid=1000,gid=1000,mode=755"),
            "rw,nosuid,mode=755,U"
        );
        assert_eq!(podman_tmpfs_options("rw,mode=1777"), "rw,mode=1777");
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
