//! [`DockerEngine`]: the [`Engine`] over the Docker Engine API (bollard), by concept:
//! [`images`], [`containers`], [`files`] (the archive API) and [`exec`]; the connection, error
//! mapping and the small calls live here.

mod containers;
mod exec;
mod files;
mod images;

use containers::container_summary;
pub(crate) use containers::podman_tmpfs_options;
use images::parse_reference;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::query_parameters::{
    ListContainersOptions, ListNetworksOptions, ListVolumesOptions, RemoveContainerOptions,
    RemoveVolumeOptions, StopContainerOptions, TagImageOptions,
};

use super::Engine;
use super::error::{EngineError, Result, START_ATTEMPTS, is_transient_runtime_failure};
use super::spec::*;
use crate::progress::Reporter;

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
    /// Whether the engine is Podman (asked once, when first needed: [`Engine::is_podman`]).
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

    /// The answer to a request about one object, `None` when the engine has no such object
    /// (404); any other failure mapped as [`DockerEngine::api`] maps it.
    fn found<T>(
        &self,
        answer: std::result::Result<T, bollard::errors::Error>,
        operation: &'static str,
        subject: &str,
    ) -> Result<Option<T>> {
        match answer {
            Ok(value) => Ok(Some(value)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.api(operation, subject)(e)),
        }
    }

    /// Maps a failed request: a lost connection (the engine stopped mid-way) is
    /// [`EngineError::NotRunning`], anything else [`EngineError::Api`].
    fn api(
        &self,
        operation: &'static str,
        subject: &str,
    ) -> impl FnOnce(bollard::errors::Error) -> EngineError {
        let subject = subject.to_string();
        self.lost_or(move |source| EngineError::Api {
            operation,
            subject,
            source,
        })
    }

    /// Maps a failed request: a lost connection is [`EngineError::NotRunning`], anything else
    /// what `otherwise` makes of it.
    fn lost_or(
        &self,
        otherwise: impl FnOnce(bollard::errors::Error) -> EngineError,
    ) -> impl FnOnce(bollard::errors::Error) -> EngineError {
        let host = self.host.clone();
        move |source| {
            if is_connection_error(&source) {
                EngineError::NotRunning { host, source }
            } else {
                otherwise(source)
            }
        }
    }
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

/// Splits text into complete lines, keeping an unfinished tail in `pending`.
fn sorted(map: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    map.unwrap_or_default().into_iter().collect()
}

/// Reads a `docker inspect <container>` document (one `ContainerInspect` object of the Docker
/// Engine API, as the engine or the `docker` command gives it) as the neutral [`ContainerInfo`]
/// the engine answers live: for audits of a saved document.
///
/// Errors: the document does not have the Engine API's shape (a field of the wrong type).
pub fn container_info_from_docker_json(
    document: &serde_json::Value,
) -> std::result::Result<ContainerInfo, serde_json::Error> {
    serde_json::from_value(document.clone()).map(containers::container_info_from)
}

/// Reads a `docker image inspect` document (one `ImageInspect` object) as the neutral
/// [`ImageInfo`] the engine answers live.
///
/// Errors: the document does not have the Engine API's shape.
pub fn image_info_from_docker_json(
    document: &serde_json::Value,
) -> std::result::Result<ImageInfo, serde_json::Error> {
    let mut document = document.clone();
    // The model requires `RootFS.Type`, which nothing here reads and a hand-written or older
    // document may leave out: its `Layers` are read all the same.
    if let Some(root_fs) = document.get_mut("RootFS").and_then(|r| r.as_object_mut()) {
        root_fs
            .entry("Type")
            .or_insert_with(|| serde_json::Value::from("layers"));
    }
    serde_json::from_value(document).map(images::image_info_from)
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

    fn host_socket(&self) -> Option<&std::path::Path> {
        self.host.strip_prefix("unix://").map(std::path::Path::new)
    }

    async fn is_podman(&self) -> Result<bool> {
        Ok(*self
            .podman
            .get_or_try_init(|| async { self.version().await.map(|v| v.podman) })
            .await?)
    }

    async fn info(&self) -> Result<EngineInfo> {
        let i = self
            .docker
            .info()
            .await
            .map_err(self.api("info", &self.host))?;
        let mut runtimes: Vec<String> = i.runtimes.unwrap_or_default().into_keys().collect();
        runtimes.sort();
        let devices = i.discovered_devices.unwrap_or_default();
        let gpu = super::gpu::gpus_in(
            &runtimes,
            devices.iter().map(|d| {
                (
                    d.source.as_deref().unwrap_or_default(),
                    d.id.as_deref().unwrap_or_default(),
                )
            }),
        );
        Ok(EngineInfo {
            cpus: i.ncpu.unwrap_or(0),
            memory_bytes: i.mem_total.unwrap_or(0),
            storage_driver: i.driver.unwrap_or_default(),
            runtimes,
            security_options: i.security_options.unwrap_or_default(),
            cgroup_version: i.cgroup_version.map(|v| v.to_string()).unwrap_or_default(),
            default_runtime: i.default_runtime.unwrap_or_default(),
            enforced_limits: EnforcedLimits {
                memory: i.memory_limit == Some(true),
                pids: i.pids_limit == Some(true),
                cpu: i.cpu_cfs_quota == Some(true),
            },
            gpu,
        })
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>> {
        self.image_info(reference).await
    }

    async fn pull_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<()> {
        self.pull(reference, reporter).await
    }

    async fn build_image(
        &self,
        request: &BuildRequest,
        reporter: &dyn Reporter,
    ) -> Result<ImageInfo> {
        self.build(request, reporter).await
    }

    async fn tag_image(&self, source: &str, target: &str) -> Result<()> {
        let target = parse_reference(target)?;
        self.docker
            .tag_image(
                source,
                Some(TagImageOptions {
                    repo: Some(target.name().to_string()),
                    tag: Some(target.tag_or_digest().to_string()),
                }),
            )
            .await
            .map_err(self.api("tag image", source))
    }

    async fn push_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<Option<String>> {
        self.push(reference, reporter).await
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<String> {
        self.create(spec).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(id = %id))]
    async fn start_container(&self, id: &str) -> Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.docker.start_container(id, None).await {
                Ok(()) => return Ok(()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 304, ..
                }) => return Ok(()),
                Err(e) if is_not_found(&e) => {
                    return Err(EngineError::NoSuchContainer { id: id.to_string() });
                }
                // The runtime's shim died before the container's process began (nothing ran):
                // starting again is what a user would do, and it is what the engine expects.
                Err(e) if is_transient_runtime_failure(&e) && attempt < START_ATTEMPTS => {
                    tracing::debug!(attempt, error = %e, "the runtime failed to start; retrying");
                    tokio::time::sleep(Duration::from_millis(250 * attempt)).await;
                }
                Err(e) => return Err(self.api("start container", id)(e)),
            }
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
        let answer = self.docker.remove_container(id, Some(options)).await;
        self.found(answer, "remove container", id).map(drop)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn find_containers(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<ContainerSummary>> {
        self.containers_with_labels(join_pairs_vec(labels), &join_pairs(labels))
            .await
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>> {
        self.container_info(id).await
    }

    async fn process_uids(&self, id: &str) -> Result<Option<Vec<[u32; 4]>>> {
        self.container_process_uids(id).await
    }

    async fn find_containers_with_label_key(&self, key: &str) -> Result<Vec<ContainerSummary>> {
        self.containers_with_labels(vec![key.to_string()], key)
            .await
    }

    async fn list_containers(&self) -> Result<Vec<ContainerSummary>> {
        self.containers_with_labels(Vec::new(), "all").await
    }

    async fn list_images(&self, reference: &str) -> Result<Vec<ImageSummary>> {
        self.images_matching(reference).await
    }

    async fn remove_image(&self, reference: &str) -> Result<Vec<String>> {
        self.delete_image(reference).await
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

    async fn remove_network(&self, name: &str) -> Result<()> {
        let answer = self.docker.remove_network(name).await;
        self.found(answer, "remove network", name).map(drop)
    }

    async fn inspect_network(&self, name: &str) -> Result<Option<NetworkInfo>> {
        let answer = self.docker.inspect_network(name, None).await;
        Ok(self
            .found(answer, "inspect network", name)?
            .map(|n| NetworkInfo {
                name: n.name.unwrap_or_default(),
                driver: n.driver.unwrap_or_default(),
                internal: n.internal.unwrap_or(false),
                options: n.options.unwrap_or_default().into_iter().collect(),
                labels: n.labels.unwrap_or_default().into_iter().collect(),
            }))
    }

    async fn volume_exists(&self, name: &str) -> Result<bool> {
        let answer = self.docker.inspect_volume(name).await;
        Ok(self.found(answer, "inspect volume", name)?.is_some())
    }

    async fn remove_volume(&self, name: &str) -> Result<()> {
        let answer = self
            .docker
            .remove_volume(name, Some(RemoveVolumeOptions { force: false }))
            .await;
        self.found(answer, "remove volume", name).map(drop)
    }

    async fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>> {
        let answer = self.docker.inspect_volume(name).await;
        Ok(self
            .found(answer, "inspect volume", name)?
            .map(|v| VolumeInfo {
                name: v.name,
                driver: v.driver,
                options: v.options.into_iter().collect(),
                labels: v.labels.into_iter().collect(),
            }))
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

    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        self.read_regular_file(id, path).await
    }

    async fn read_file_resolved(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        self.read_resolved_file(id, path).await
    }

    async fn read_folder(&self, id: &str, path: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
        self.read_direct_files(id, path).await
    }

    async fn write_file(&self, id: &str, folder: &str, name: &str, content: &[u8]) -> Result<()> {
        self.upload_file(id, folder, name, content).await
    }

    async fn copy_tree(&self, id: &str, tree: &crate::engine::TreeCopy) -> Result<()> {
        self.upload_tree(id, tree).await
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
