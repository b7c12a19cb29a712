//! L2: the container engine boundary. The only module that names `bollard`.
//!
//! [`Engine`] is the runtime boundary the rest of devcell talks to, in neutral types
//! ([`ContainerSpec`], [`ImageInfo`], [`ContainerInfo`], [`ExecRequest`], …); [`DockerEngine`]
//! implements it over the Docker Engine API (bollard). Podman works through its
//! Docker-compatible socket: point `DOCKER_HOST` at it.
//!
//! Pure helpers: [`run_args`] maps `runArgs` (`docker run` flags) onto a [`ContainerSpec`] and
//! parses `--mount` strings; [`build_options`] maps `build.options` onto a [`BuildRequest`]; [`context`] packs a build context honouring `.dockerignore`;
//! [`auth`] gives the engine registry credentials from the Docker client configuration (read by
//! [`crate::formats::docker_config`]).
//!
//! [`compose`] drives the Docker Compose v2 CLI (Compose configurations).
//!
//! In unit tests, `fake::FakeEngine` is an in-memory [`Engine`] the operations run against
//! (containers, images and their files, an exec record): the seam another backend uses.

pub mod auth;
pub mod build_options;
pub mod compose;
mod connect;
pub mod context;
mod docker;
pub mod error;
#[cfg(test)]
pub mod fake;
pub mod gpu;
pub mod passwd;
pub mod run_args;
pub mod spec;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

pub use connect::connect;
pub use docker::{DockerEngine, container_info_from_docker_json, image_info_from_docker_json};
pub use error::{EngineError, Result};
pub use spec::{
    BuildRequest, COLLECT_CAP, ContainerInfo, ContainerSpec, ContainerSummary, Device,
    DeviceMapping, EnforcedLimits, EngineInfo, EngineVersion, ExecInput, ExecOutput, ExecRequest,
    ExecResult, GpuRequest, HostSecurity, ImageInfo, ImageSummary, Limits, Mount, MountInfo,
    MountKind, NetworkInfo, PortBinding, PublishedPort, TreeCopy, TreeEntry, TtySize, Ulimit,
    VolumeInfo, created_user,
};

use crate::progress::{Event, Reporter};

/// The container runtime boundary (Docker Engine API semantics).
///
/// Object-safe (`&dyn Engine`); every method is one engine round trip or one streamed
/// operation. Errors are [`EngineError`]s naming the image or container concerned. Answers
/// are typed facts ([`ContainerInfo`], [`ImageInfo`], [`EngineInfo`]), never a backend's own
/// document: the isolation audit, `doctor` and `prune` read fields a second backend fills.
#[async_trait]
pub trait Engine: Send + Sync {
    /// The engine's version; also a liveness check.
    async fn version(&self) -> Result<EngineVersion>;

    /// Whether the engine is Podman ([`EngineVersion::podman`]): a behaviour switch for
    /// Podman's own ways (its tmpfs owner option, Compose's classic builder), never a switch
    /// of answer shapes, which are the same typed facts for every backend. An implementation
    /// may ask once and remember it: the answer cannot change while it talks to one engine.
    async fn is_podman(&self) -> Result<bool> {
        self.version().await.map(|v| v.podman)
    }

    /// The engine's view of its host (`docker info`): CPUs, memory, runtimes.
    async fn info(&self) -> Result<EngineInfo>;

    /// The host path of the Unix socket this engine is reached through, which no container
    /// may mount (the security policy refuses a bind of it); `None` when it is not reached
    /// through a host socket. The default implementation answers `None`.
    fn host_socket(&self) -> Option<&std::path::Path> {
        None
    }

    /// Inspects a local image by reference or id; `Ok(None)` when it is not present locally.
    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>>;

    /// Pulls an image through the engine, with credentials from the Docker client
    /// configuration ([`auth`]); progress lines go to `reporter` as [`Event::Status`].
    async fn pull_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<()>;

    /// Builds an image from a context ([`BuildRequest`]); build output lines go to `reporter`
    /// as [`Event::Output`]. Returns the built image (inspected by its first tag, or by id).
    async fn build_image(
        &self,
        request: &BuildRequest,
        reporter: &dyn Reporter,
    ) -> Result<ImageInfo>;

    /// Tags `source` (reference or id) as `target` (`name:tag`, `:latest` when no tag).
    async fn tag_image(&self, source: &str, target: &str) -> Result<()>;

    /// Pushes the local image `reference` (`registry/repository[:tag]`, `:latest` when no tag)
    /// to its registry through the engine, with credentials from the Docker client
    /// configuration ([`auth`]); progress lines go to `reporter` as [`Event::Status`]. The
    /// engine decides the transport (plain HTTP only for registries it treats as insecure,
    /// such as `127.0.0.0/8`). Returns the manifest digest the registry reported
    /// (`sha256:…`), when it reported one.
    ///
    /// Errors: [`EngineError::Push`] when the engine or the registry refuses it;
    /// [`EngineError::NotRunning`] when the engine went away.
    async fn push_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<Option<String>>;

    /// Creates (does not start) a container; returns its id.
    async fn create_container(&self, spec: &ContainerSpec) -> Result<String>;

    /// Starts a created or stopped container (no-op if running).
    async fn start_container(&self, id: &str) -> Result<()>;

    /// Stops a container, killing it after `timeout` (engine default when `None`).
    async fn stop_container(&self, id: &str, timeout: Option<Duration>) -> Result<()>;

    /// Removes a container and its anonymous volumes; `force` kills it first if running.
    /// Removing a container that does not exist is not an error.
    async fn remove_container(&self, id: &str, force: bool) -> Result<()>;

    /// Containers (running or not) carrying every one of `labels` (`key` = `value`).
    async fn find_containers(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<ContainerSummary>>;

    /// Inspects a container; `Ok(None)` when it does not exist.
    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>>;

    /// The real, effective, saved and filesystem uids (`[ruid, euid, suid, fsuid]`) of every
    /// process in the running container `id`, as the kernel reports them and in the container's
    /// own terms: the engine's `top` (`ps -e -o pid,ruid,euid,suid,fsuid`), which reads the
    /// processes from outside, so nothing of the image runs to answer. `Ok(None)` when this
    /// engine cannot answer in the container's terms: Podman, a daemon that remaps or runs in
    /// a user namespace (`userns`, `rootless` in `SecurityOptions`: its `ps` shows the host's
    /// ids), a default runtime other than `runc`/`crun`, or no process listed. The default
    /// implementation answers `Ok(None)`.
    ///
    /// Errors: the engine's, for a container that cannot be listed (one not running, a host
    /// `ps` without these fields).
    async fn process_uids(&self, id: &str) -> Result<Option<Vec<[u32; 4]>>> {
        let _ = id;
        Ok(None)
    }

    /// Runs a command in a running container and waits for it; returns its exit code (and the
    /// output, with [`ExecOutput::Collect`]).
    async fn exec(
        &self,
        id: &str,
        request: &ExecRequest,
        input: ExecInput,
        output: ExecOutput<'_>,
    ) -> Result<ExecResult>;

    /// [`Engine::exec`] with the TTY's size following `sizes` (when `request.tty`): the size
    /// at the start, then every change sent to the engine as the exec's resize. The default
    /// implementation ignores `sizes`.
    async fn exec_resizable(
        &self,
        id: &str,
        request: &ExecRequest,
        input: ExecInput,
        output: ExecOutput<'_>,
        sizes: tokio::sync::watch::Receiver<TtySize>,
    ) -> Result<ExecResult> {
        let _ = sizes;
        self.exec(id, request, input, output).await
    }

    /// Whether the engine can give a container a GPU ([`EngineInfo::gpu`]).
    async fn gpu_available(&self) -> Result<bool> {
        Ok(self.info().await?.gpu)
    }

    /// Containers (running or not) carrying the label `key`, whatever its value (e.g. every
    /// dev container: `devcontainer.local_folder`).
    async fn find_containers_with_label_key(&self, key: &str) -> Result<Vec<ContainerSummary>>;

    /// Every container, running or not (`docker ps -a`).
    async fn list_containers(&self) -> Result<Vec<ContainerSummary>>;

    /// Local images whose reference matches `reference` (`docker images <reference>`: a
    /// repository such as `devcell/features`, or `repository:tag` with `*` wildcards).
    async fn list_images(&self, reference: &str) -> Result<Vec<ImageSummary>>;

    /// Removes an image reference (`docker rmi <reference>`, never forced): a tag is removed,
    /// and the image with it when no other tag and no child image keeps it. Returns the ids
    /// of the images actually deleted (empty when only the tag went).
    ///
    /// Errors: [`EngineError::ImageInUse`] when a container uses it (the engine refuses);
    /// [`EngineError::Api`] otherwise. An absent image is not an error.
    async fn remove_image(&self, reference: &str) -> Result<Vec<String>>;

    /// Names of the volumes carrying every one of `labels`.
    async fn find_volumes(&self, labels: &BTreeMap<String, String>) -> Result<Vec<String>>;

    /// Names of the networks carrying every one of `labels`.
    async fn find_networks(&self, labels: &BTreeMap<String, String>) -> Result<Vec<String>>;

    /// Removes a network (by name or id); an absent network is not an error. The engine
    /// refuses one that a container is still connected to ([`EngineError::Api`]).
    async fn remove_network(&self, name: &str) -> Result<()>;

    /// The named network's driver, `internal` flag, options and labels; `Ok(None)` when
    /// there is none.
    async fn inspect_network(&self, name: &str) -> Result<Option<NetworkInfo>>;

    /// Whether a volume with this name exists.
    async fn volume_exists(&self, name: &str) -> Result<bool>;

    /// Removes a volume; an absent volume is not an error.
    async fn remove_volume(&self, name: &str) -> Result<()>;

    /// The named volume's driver, options and labels; `Ok(None)` when there is none.
    async fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>>;

    /// Creates the named volume with the `local` driver, no options and `labels`; one that
    /// already exists is left as it is (the engine's answer for an existing name).
    async fn create_volume(&self, name: &str, labels: &BTreeMap<String, String>) -> Result<()>;

    /// The content of a regular file in a container (running or not); `Ok(None)` when the
    /// path does not exist or is not a regular file. Symbolic links are not followed.
    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>>;

    /// The regular files directly in the folder `path` of a container (running or not), by
    /// file name; `Ok(None)` when the folder does not exist. One archive request: no process
    /// runs in the container (deciding that run-once hooks already ran, spec-note 0471).
    async fn read_folder(&self, id: &str, path: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>>;

    /// Writes `content` to `<folder>/<name>` in a container through the engine's archive
    /// API: no process runs, the file belongs to root (mode 0644) and a missing `folder` is
    /// created (0755). `folder`'s parent must exist; under a read-only root filesystem it
    /// must be on a volume.
    async fn write_file(&self, id: &str, folder: &str, name: &str, content: &[u8]) -> Result<()>;

    /// Copies `tree`'s folders and regular files into container `id` (running or not) through
    /// the engine's archive API, as one archive: no process runs in the container, every entry
    /// belongs to `tree.uid`:`tree.gid` with its own mode, and an entry that exists is
    /// replaced (a folder keeps what it holds). Nothing but folders and regular files can be
    /// described, so no link lands in the container.
    ///
    /// Errors: [`EngineError::ExecIo`] for an entry whose path is not plain
    /// ([`TreeEntry::has_plain_path`]); the engine's, e.g. for a `tree.into` that does not
    /// exist or a read-only root filesystem where it is not on a volume.
    async fn copy_tree(&self, id: &str, tree: &TreeCopy) -> Result<()>;

    /// The content of the regular file `path` names in a container, a symbolic link followed
    /// as the engine itself follows it when it reads the container's files for its own use
    /// (an exec's user in `/etc/passwd`): inside the container's root, fully resolved.
    /// `Ok(None)` when there is no such regular file. The default follows nothing
    /// ([`Engine::read_file`]).
    async fn read_file_resolved(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        self.read_file(id, path).await
    }

    /// The content of a regular file in an image, read through a created-but-never-started
    /// container that is removed afterwards (e.g. `/etc/passwd`, see [`passwd`]); a symbolic
    /// link is followed inside the image ([`Engine::read_file_resolved`]). The Docker Engine
    /// API has no call that reads one file of an image (exporting the image streams all of
    /// it), so two small calls and a removal are the cheap way there; a backend that can read
    /// an image's files directly overrides this.
    async fn read_image_file(&self, image: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let probe = ContainerSpec {
            image: image.to_string(),
            entrypoint: Some(vec!["/devcell-probe-never-started".to_string()]),
            labels: BTreeMap::from([("devcell.probe".to_string(), "1".to_string())]),
            ..ContainerSpec::default()
        };
        let id = self.create_container(&probe).await?;
        let read = self.read_file_resolved(&id, path).await;
        let removed = self.remove_container(&id, true).await;
        let content = read?;
        removed?;
        Ok(content)
    }

    /// The image locally, pulled through the engine first when it is missing.
    async fn ensure_image(&self, reference: &str, reporter: &dyn Reporter) -> Result<ImageInfo> {
        if let Some(info) = self.inspect_image(reference).await? {
            return Ok(info);
        }
        reporter.report(Event::Status(format!("pulling {reference}")));
        self.pull_image(reference, reporter).await?;
        self.inspect_image(reference)
            .await?
            .ok_or_else(|| EngineError::InvalidReference {
                reference: reference.to_string(),
                message: "pulled, but the engine does not list it".to_string(),
            })
    }
}
