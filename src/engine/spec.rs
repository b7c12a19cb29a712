//! Neutral request and answer types of the engine boundary. Only `engine` converts them to
//! and from bollard's types, so the rest of the crate does not change when bollard does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use indexmap::IndexMap;

/// A container creation request: what `docker run` would be told, in engine-neutral terms.
///
/// Filled in by `handoff::up` from the merged configuration (spec: [container
/// creation](https://containers.dev/implementors/spec/#container-creation)), then adjusted by
/// `security::apply`. Empty collections and `None` mean "not requested" (the engine's default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSpec {
    /// Image reference or id to run.
    pub image: String,
    /// Container name (`--name`); `None` lets the engine choose.
    pub name: Option<String>,
    /// Container labels (`--label`).
    pub labels: BTreeMap<String, String>,
    /// Environment (`-e`, `containerEnv`), in order; a later key replaces an earlier one.
    pub env: IndexMap<String, String>,
    /// User the container's processes run as (`-u`, `containerUser`): `name`, `uid`,
    /// `name:group` or `uid:gid`; `None` keeps the image's `USER`.
    pub user: Option<String>,
    /// Entrypoint override (`--entrypoint`); `None` keeps the image's.
    pub entrypoint: Option<Vec<String>>,
    /// Command override; `None` keeps the image's `CMD`.
    pub cmd: Option<Vec<String>>,
    /// Working directory (`-w`).
    pub working_dir: Option<String>,
    /// Hostname (`-h`).
    pub hostname: Option<String>,
    /// Mounts (`-v`, `--mount`, `mounts`, the workspace mount), in order.
    pub mounts: Vec<Mount>,
    /// Capabilities added (`--cap-add`, `capAdd`), as written (`SYS_PTRACE`, `CAP_NET_ADMIN`, `ALL`).
    pub cap_add: Vec<String>,
    /// Capabilities dropped (`--cap-drop`).
    pub cap_drop: Vec<String>,
    /// Security options (`--security-opt`, `securityOpt`), e.g. `seccomp=unconfined`.
    pub security_opt: Vec<String>,
    /// Privileged mode (`--privileged`, `privileged`).
    pub privileged: bool,
    /// Run an init process as PID 1 (`--init`, `init`); `None` = engine default.
    pub init: Option<bool>,
    /// Read-only root filesystem (`--read-only`).
    pub read_only_rootfs: bool,
    /// tmpfs mounts (`--tmpfs`): container path → mount options (`""` = engine defaults).
    pub tmpfs: BTreeMap<String, String>,
    /// Resource limits.
    pub limits: Limits,
    /// Network mode (`--network`): `bridge`, `host`, `none`, `container:<id>` or a network name.
    pub network_mode: Option<String>,
    /// Extra `/etc/hosts` entries (`--add-host`), as `host:ip`.
    pub extra_hosts: Vec<String>,
    /// Published ports (`-p`, `appPort`).
    pub ports: Vec<PortBinding>,
    /// Host devices (`--device`).
    pub devices: Vec<Device>,
    /// Size of `/dev/shm` in bytes (`--shm-size`).
    pub shm_size: Option<i64>,
    /// Resource limits per process (`--ulimit`).
    pub ulimits: Vec<Ulimit>,
    /// Every GPU of the host (`--gpus all`), when asked for ([`GpuRequest`]).
    pub gpu: Option<GpuRequest>,
}

/// A request for every GPU of the host: Docker's device request `{Driver: "", Count: -1,
/// Capabilities: [["gpu"]]}` (`--gpus all`), Compose's `deploy.resources.reservations.devices`
/// entry with `capabilities: [gpu]` and `count: all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuRequest {
    /// What asked for it, as the configuration wrote it (`hostRequirements.gpu: true`): the
    /// permission request names it; the engine does not read it.
    pub asked: String,
}

/// Resource limits of a container. `None` = unlimited (engine default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Maximum number of processes (`--pids-limit`).
    pub pids: Option<i64>,
    /// Memory limit in bytes (`--memory`).
    pub memory_bytes: Option<i64>,
    /// CPU quota in billionths of a CPU (`--cpus 1.5` = 1_500_000_000).
    pub nano_cpus: Option<i64>,
}

/// The kind of a [`Mount`] (Docker's `--mount type=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MountKind {
    /// A host path (`type=bind`).
    Bind,
    /// A named or anonymous engine volume (`type=volume`).
    Volume,
    /// An in-memory filesystem (`type=tmpfs`).
    Tmpfs,
}

impl MountKind {
    /// Docker's name for the kind (`bind`, `volume`, `tmpfs`).
    pub fn as_str(self) -> &'static str {
        match self {
            MountKind::Bind => "bind",
            MountKind::Volume => "volume",
            MountKind::Tmpfs => "tmpfs",
        }
    }
}

/// One mount of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Bind, volume or tmpfs.
    pub kind: MountKind,
    /// Host path (bind), volume name (volume; `None` = anonymous), for tmpfs its size and
    /// mode as [`crate::engine::run_args::tmpfs_mount_source`] writes them (`None` = the
    /// engine's defaults).
    pub source: Option<String>,
    /// Absolute path inside the container.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// What the engine knows about a named volume (`docker volume inspect`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeInfo {
    /// The volume's name.
    pub name: String,
    /// Its driver (`local` for the engine's own).
    pub driver: String,
    /// The driver options it was created with (`local`: `type`, `o`, `device`, as `mount(8)`
    /// takes them; `o=bind` with `device=<host path>` makes it a bind of that host path).
    pub options: BTreeMap<String, String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// What the engine knows about a network (`docker network inspect`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkInfo {
    /// The network's name.
    pub name: String,
    /// Its driver (`bridge` for the engine's own local networks).
    pub driver: String,
    /// Whether it was created `--internal` (no gateway route out through the engine).
    pub internal: bool,
    /// The driver options it was created with (`com.docker.network.bridge.inhibit_ipv4`, …).
    pub options: BTreeMap<String, String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// A published port: `[host_ip:][host_port:]container_port[/protocol]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortBinding {
    /// Port inside the container.
    pub container_port: u16,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// Host address to bind; `None` = all addresses.
    pub host_ip: Option<String>,
    /// Host port; `None` = an ephemeral port chosen by the engine.
    pub host_port: Option<u16>,
}

/// A host device made available in the container (`--device host[:container[:perms]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Device path on the host.
    pub host_path: String,
    /// Device path in the container (defaults to `host_path`).
    pub container_path: String,
    /// cgroup permissions, a combination of `r`, `w`, `m` (default `rwm`).
    pub permissions: String,
}

/// A per-process resource limit (`--ulimit name=soft[:hard]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    /// Limit name (`nofile`, `nproc`, `core`, …).
    pub name: String,
    /// Soft limit.
    pub soft: i64,
    /// Hard limit.
    pub hard: i64,
}

/// What the engine knows about a local image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageInfo {
    /// Image id (`sha256:…`, the config digest).
    pub id: String,
    /// Repository digests (`name@sha256:…`), empty for images never pushed or pulled; Docker
    /// Hub names in Docker's familiar form whatever the engine (`alpine@sha256:…`).
    pub repo_digests: Vec<String>,
    /// Repository tags, Docker Hub names in Docker's familiar form whatever the engine
    /// (`devcell/features:…`, not Podman's `docker.io/devcell/features:…`).
    pub repo_tags: Vec<String>,
    /// The image's `USER` (`None` or empty = root).
    pub user: Option<String>,
    /// The image's environment, as `KEY=value`.
    pub env: Vec<String>,
    /// The image's labels.
    pub labels: BTreeMap<String, String>,
    /// The image's `ENTRYPOINT`.
    pub entrypoint: Option<Vec<String>>,
    /// The image's `CMD`.
    pub cmd: Option<Vec<String>>,
    /// The image's `WORKDIR`.
    pub working_dir: Option<String>,
    /// The image's `ONBUILD` triggers (instructions a build `FROM` it runs first).
    pub on_build: Vec<String>,
    /// The image's layers as diff ids (`RootFS.Layers`), bottom first.
    pub layers: Vec<String>,
}

impl ImageInfo {
    /// The raw `devcontainer.metadata` label (a JSON array or object), if any
    /// ([spec: image metadata](https://containers.dev/implementors/spec/#image-metadata)).
    pub fn metadata_label(&self) -> Option<&str> {
        self.labels
            .get(crate::names::METADATA_LABEL)
            .map(String::as_str)
    }
}

/// A local image as `docker images` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageSummary {
    /// Image id (`sha256:…`).
    pub id: String,
    /// The parent image's id (classic builder; empty when none or unknown).
    pub parent_id: String,
    /// Repository tags (`name:tag`), Docker Hub names in Docker's familiar form whatever the
    /// engine (see [`ImageInfo::repo_tags`]).
    pub repo_tags: Vec<String>,
    /// Creation time, seconds since the Unix epoch.
    pub created: i64,
    /// Size in bytes, layers shared with other images included (`docker images`' SIZE).
    pub size: i64,
}

/// A container found by labels (a row of `docker ps -a`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSummary {
    /// Container id.
    pub id: String,
    /// Names, without the leading `/`.
    pub names: Vec<String>,
    /// Image the container was created from, as given at creation.
    pub image: String,
    /// Id of the image the container runs (`sha256:…`).
    pub image_id: String,
    /// State: `created`, `running`, `paused`, `restarting`, `exited`, `dead`, `removing`.
    pub state: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// The user a container was asked to run as: under `hardened` devcell creates its container as
/// numeric `uid:gid` (no supplementary group from the image's `/etc/group`) and keeps the name
/// asked for in [`crate::names::CREATED_USER_LABEL`]; every reader of the container's user
/// (the `remoteUser` default, the user checks, the results) gets that name, as before. The
/// label counts only beside devcell's `hardened` [`crate::names::PROFILE_LABEL`] (both in
/// devcell's namespace, which no image or configuration sets there; spec-note 0421); otherwise
/// `config_user` (`Config.User`).
pub fn created_user(labels: &BTreeMap<String, String>, config_user: String) -> String {
    let hardened = labels
        .get(crate::names::PROFILE_LABEL)
        .is_some_and(|p| p == "hardened");
    match labels.get(crate::names::CREATED_USER_LABEL) {
        Some(name) if hardened => name.clone(),
        _ => config_user,
    }
}

/// What the engine knows about a container (`docker inspect`), the fields devcell reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Container id.
    pub id: String,
    /// Name, without the leading `/`.
    pub name: String,
    /// Image id the container runs.
    pub image_id: String,
    /// Image as given at creation (`Config.Image`).
    pub image: String,
    /// State (`created`, `running`, `exited`, …).
    pub status: String,
    /// Whether it is running.
    pub running: bool,
    /// Exit code of the last run (0 if never exited).
    pub exit_code: i64,
    /// Creation time, verbatim as the engine reports it (`Created`).
    pub created: String,
    /// Last start time, verbatim (`State.StartedAt`).
    pub started_at: String,
    /// Labels (`Config.Labels`).
    pub labels: BTreeMap<String, String>,
    /// Environment (`Config.Env`), as `KEY=value`.
    pub env: Vec<String>,
    /// The user it was asked to run as (empty = the image's): `Config.User`, or for a container
    /// devcell created under `hardened` as numeric `uid:gid`, the name it was asked for
    /// ([`created_user`]).
    pub user: String,
    /// The user the engine runs its processes as, as the engine holds it (`Config.User`;
    /// empty = the image's): numeric `uid:gid` for a container devcell created under
    /// `hardened`, where [`Self::user`] gives the name asked for. What the isolation audit
    /// reads.
    pub config_user: String,
    /// Mounts as the engine made them.
    pub mounts: Vec<MountInfo>,
    /// The AppArmor profile the engine applied (`AppArmorProfile`; `unconfined` = none, empty
    /// = the engine's default or no AppArmor).
    pub apparmor_profile: String,
    /// Names of the networks the container is attached to (`NetworkSettings.Networks`), sorted.
    pub networks: Vec<String>,
    /// `HostConfig` security fields.
    pub host: HostSecurity,
    /// The host pid of its init process while it runs (`State.Pid`; `None` when stopped or
    /// not reported): devcell reads what the engine mounted through `/proc/<pid>/root`
    /// (spec-note 0663).
    pub pid: Option<u32>,
}

/// Folders and regular files to copy into a container through the engine's archive API
/// ([`Engine::copy_tree`](super::Engine::copy_tree)): no link, no device, every entry with the
/// one numeric owner and its own mode, so what lands in the container is exactly this list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeCopy {
    /// The existing absolute folder in the container the entries are created below (under a
    /// read-only root filesystem it must be on a volume: the engine refuses anything else).
    pub into: String,
    /// The entries, each folder before what it holds.
    pub entries: Vec<TreeEntry>,
    /// Owner (numeric uid) of every entry.
    pub uid: u32,
    /// Group (numeric gid) of every entry.
    pub gid: u32,
}

/// One entry of a [`TreeCopy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Its path below [`TreeCopy::into`]: relative, `/`-separated, no `.`, `..` or empty
    /// component.
    pub path: String,
    /// Its permission bits (`0o700`, `0o644`, …; nothing above `0o777` is kept).
    pub mode: u32,
    /// A regular file's content; `None`: a folder.
    pub content: Option<Vec<u8>>,
}

impl TreeEntry {
    /// Whether [`Self::path`] is a plain relative path (see there).
    pub fn has_plain_path(&self) -> bool {
        !self.path.is_empty()
            && self
                .path
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
    }
}

/// A mount as reported by `docker inspect` (`Mounts[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// `bind`, `volume`, `tmpfs`, …
    pub kind: String,
    /// Host path (bind) or volume path on the host.
    pub source: String,
    /// Volume name (volumes only).
    pub name: Option<String>,
    /// Path inside the container.
    pub destination: String,
    /// Writable.
    pub rw: bool,
}

impl MountInfo {
    /// Whether the container path `path` is this mount's destination or below it (a mount at
    /// `/` holds every path); a trailing `/` of the destination is ignored.
    pub fn holds(&self, path: &str) -> bool {
        let at = self.destination.trim_end_matches('/');
        at.is_empty()
            || path == at
            || path
                .strip_prefix(at)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

#[cfg(test)]
impl MountInfo {
    /// A unit-test fixture: an inspected mount of `kind` (`bind`, `volume`, `tmpfs`) from
    /// `source` at `destination`, with no volume name.
    pub(crate) fn of(kind: &str, source: &str, destination: &str, rw: bool) -> Self {
        Self {
            kind: kind.into(),
            source: source.into(),
            name: None,
            destination: destination.into(),
            rw,
        }
    }

    /// A unit-test fixture: an inspected bind mount of `source` at `destination`.
    pub(crate) fn bind(source: &str, destination: &str, rw: bool) -> Self {
        Self::of("bind", source, destination, rw)
    }
}

/// The security-relevant `HostConfig` fields of a container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostSecurity {
    /// `Privileged`.
    pub privileged: bool,
    /// `CapAdd`.
    pub cap_add: Vec<String>,
    /// `CapDrop`.
    pub cap_drop: Vec<String>,
    /// `SecurityOpt`.
    pub security_opt: Vec<String>,
    /// `ReadonlyRootfs`.
    pub read_only_rootfs: bool,
    /// `Tmpfs`.
    pub tmpfs: BTreeMap<String, String>,
    /// `PidsLimit`, `Memory`, `NanoCpus` (0 or absent = unlimited → `None`).
    pub limits: Limits,
    /// `NetworkMode`.
    pub network_mode: String,
    /// `Init`.
    pub init: Option<bool>,
    /// `Devices`: the host paths of the devices given to the container.
    pub devices: Vec<String>,
    /// `Devices`, each with its path inside the container.
    pub device_mappings: Vec<DeviceMapping>,
    /// `DeviceRequests` is not empty (`--gpus`, CDI devices).
    pub device_requests: bool,
    /// `DeviceRequests` asks for GPUs: a request whose capabilities hold `gpu` (`--gpus`), or
    /// a CDI device id `<vendor>/gpu=<name>` (Podman's, spec-note 0646).
    pub gpu_requested: bool,
    /// `PidMode` (empty = private).
    pub pid_mode: String,
    /// `IpcMode` (empty = the engine's default, private).
    pub ipc_mode: String,
    /// `UTSMode` (empty = private).
    pub uts_mode: String,
    /// `CpuQuota` and `CpuPeriod` in microseconds (0 or absent → `None`): the CPU limit of a
    /// container made without `NanoCpus`.
    pub cpu_quota: Option<i64>,
    /// See [`Self::cpu_quota`].
    pub cpu_period: Option<i64>,
    /// `CpusetCpus` (empty = every CPU).
    pub cpuset_cpus: String,
    /// `PortBindings`, one entry per host binding, by container port.
    pub port_bindings: Vec<PublishedPort>,
    /// `PublishAllPorts` (`-P`).
    pub publish_all_ports: bool,
    /// `AutoRemove` (`--rm`).
    pub auto_remove: bool,
}

/// A host device given to a container, as the engine reports it (`HostConfig.Devices[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceMapping {
    /// `PathOnHost`; `None` when the engine does not say.
    pub host_path: Option<String>,
    /// `PathInContainer` (empty when the engine does not say).
    pub container_path: String,
}

/// One host binding of a published port, as the engine reports it (`HostConfig.PortBindings`),
/// in the engine's own words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishedPort {
    /// Container port and protocol, e.g. `8080/tcp`.
    pub container_port: String,
    /// Host address; empty means all interfaces.
    pub host_ip: String,
    /// Host port (empty: chosen by the engine).
    pub host_port: String,
}

/// An image build request (Dockerfile kind, or a generated Features Dockerfile).
///
/// Spec: [`build` properties](https://containers.dev/implementors/json_reference/#image-specific).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildRequest {
    /// The build context folder. `.dockerignore` at its root is honoured.
    pub context: PathBuf,
    /// The Dockerfile. It may be outside the context; then it is sent under a generated name.
    pub dockerfile: PathBuf,
    /// Tags to give the result (`name:tag`); the first one is inspected for the answer.
    pub tags: Vec<String>,
    /// Build arguments (`build.args`).
    pub args: IndexMap<String, String>,
    /// Target stage (`build.target`).
    pub target: Option<String>,
    /// Images to use as cache sources (`build.cacheFrom`).
    pub cache_from: Vec<String>,
    /// Labels to set on the image.
    pub labels: BTreeMap<String, String>,
    /// Do not use the build cache.
    pub no_cache: bool,
    /// Always attempt to pull a newer version of the base images.
    pub pull: bool,
    /// Network mode for `RUN` steps (`--network`).
    pub network: Option<String>,
    /// Target platform (`--platform`, e.g. `linux/amd64`).
    pub platform: Option<String>,
    /// The Dockerfile's content as devcell judged it (`hardened`): when set, the archive's
    /// Dockerfile entry holds exactly these bytes and the file at `dockerfile` is not read
    /// again, so a process writing the workspace cannot swap the Dockerfile between the
    /// judgement and the pack (attack O3, spec-note 0655). `None`: read from `dockerfile`.
    pub dockerfile_bytes: Option<Vec<u8>>,
    /// The folder the context must resolve inside when it is packed (the workspace, for a
    /// context devcell judged inside it): the context is then resolved at the pack, refused
    /// when it resolves elsewhere, and its folders opened from `/` without following a link,
    /// so a folder swapped for a link since the judgement is never packed (attack 29, G6;
    /// spec-note 0673). `None`: opened as the kernel resolves it.
    pub context_within: Option<PathBuf>,
}

/// A command to run in a running container (`docker exec`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// The command and its arguments, run without a shell.
    pub argv: Vec<String>,
    /// User to run as (`name`, `uid`, `uid:gid`); `None` = the container's user.
    pub user: Option<String>,
    /// Extra environment.
    pub env: IndexMap<String, String>,
    /// Working directory; `None` = the container's.
    pub working_dir: Option<String>,
    /// Allocate a TTY (stdout and stderr then arrive merged).
    pub tty: bool,
}

/// A terminal's size in character cells (`stty size` shows `rows cols`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TtySize {
    /// Lines.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

impl TtySize {
    /// Whether the size is unknown (a dimension is 0): nothing is sent to the engine then.
    pub fn is_empty(&self) -> bool {
        self.rows == 0 || self.cols == 0
    }
}

/// The outcome of an exec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    /// The process's exit code (128 + n when killed by signal n, as the engine reports it).
    pub exit_code: i64,
    /// Collected stdout (empty unless [`ExecOutput::Collect`] was used; with a TTY it holds
    /// everything).
    pub stdout: Vec<u8>,
    /// Collected stderr (empty unless [`ExecOutput::Collect`] was used).
    pub stderr: Vec<u8>,
    /// Whether a collected stream passed [`COLLECT_CAP`] and was cut (its beginning or end
    /// kept, as the [`ExecOutput`] asked).
    pub cut: bool,
}

/// One stream of an exec's output, collected within [`COLLECT_CAP`] in work linear in its
/// length: its beginning (`tail == false`) or its end.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    tail: bool,
    bytes: Vec<u8>,
    total: u64,
}

impl Collector {
    /// A collector keeping the beginning, or with `tail` the end.
    pub(crate) fn new(tail: bool) -> Self {
        Collector {
            tail,
            ..Collector::default()
        }
    }

    /// Takes the next piece.
    pub(crate) fn push(&mut self, piece: &[u8]) {
        self.total += piece.len() as u64;
        if !self.tail {
            let room = COLLECT_CAP - self.bytes.len();
            self.bytes
                .extend_from_slice(&piece[..piece.len().min(room)]);
            return;
        }
        if piece.len() >= COLLECT_CAP {
            self.bytes.clear();
            self.bytes
                .extend_from_slice(&piece[piece.len() - COLLECT_CAP..]);
        } else {
            self.bytes.extend_from_slice(piece);
            // dropped in batches (at most twice the cap held): linear work
            if self.bytes.len() > 2 * COLLECT_CAP {
                self.bytes.drain(..self.bytes.len() - COLLECT_CAP);
            }
        }
    }

    /// The bytes kept and whether any were dropped.
    pub(crate) fn finish(mut self) -> (Vec<u8>, bool) {
        if self.bytes.len() > COLLECT_CAP {
            self.bytes.drain(..self.bytes.len() - COLLECT_CAP);
        }
        (self.bytes, self.total > COLLECT_CAP as u64)
    }
}

impl ExecResult {
    /// The collected stdout as text (lossy UTF-8).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// The collected stderr as text (lossy UTF-8).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// What to feed an exec's stdin.
pub enum ExecInput {
    /// No stdin (the process sees end of file at once if it reads).
    None,
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// Everything read from this stream, then end of file (interactive `exec`).
    Stream(Box<dyn tokio::io::AsyncRead + Send + Unpin>),
}

impl std::fmt::Debug for ExecInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecInput::None => f.write_str("ExecInput::None"),
            ExecInput::Bytes(b) => write!(f, "ExecInput::Bytes({} bytes)", b.len()),
            ExecInput::Stream(_) => f.write_str("ExecInput::Stream"),
        }
    }
}

/// The most bytes of each stream an exec collects ([`ExecOutput::Collect`],
/// [`ExecOutput::CollectTail`]; spec-note 0658): what a container prints is untrusted and an
/// internal exec's answer is small, so devcell never holds more, whatever the container does.
pub const COLLECT_CAP: usize = 1024 * 1024;

/// Where an exec's output goes.
pub enum ExecOutput<'a> {
    /// Kept in [`ExecResult::stdout`] / [`ExecResult::stderr`]: the first [`COLLECT_CAP`]
    /// bytes of each, the rest dropped and [`ExecResult::cut`] set (for callers that parse the
    /// output: a cut answer is refused or read as the beginning it is).
    Collect,
    /// As [`ExecOutput::Collect`], but the last [`COLLECT_CAP`] bytes of each stream are kept
    /// (for a command whose failure shows the end of its output).
    CollectTail,
    /// Each complete line sent as [`crate::progress::Event::Output`] (stdout and stderr alike).
    Report(&'a dyn crate::progress::Reporter),
    /// Copied as it arrives to these writers (stdout, stderr) — for an interactive `exec`.
    Write {
        /// Receives stdout (and everything, with a TTY).
        stdout: Box<dyn tokio::io::AsyncWrite + Send + Unpin + 'a>,
        /// Receives stderr.
        stderr: Box<dyn tokio::io::AsyncWrite + Send + Unpin + 'a>,
    },
}

impl std::fmt::Debug for ExecOutput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecOutput::Collect => f.write_str("ExecOutput::Collect"),
            ExecOutput::CollectTail => f.write_str("ExecOutput::CollectTail"),
            ExecOutput::Report(_) => f.write_str("ExecOutput::Report"),
            ExecOutput::Write { .. } => f.write_str("ExecOutput::Write"),
        }
    }
}

/// The engine's identity (`docker version`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineVersion {
    /// Product version (`20.10.24+dfsg1`, `4.9.3` for Podman).
    pub version: String,
    /// Highest Engine API version the engine speaks (`1.41`).
    pub api_version: String,
    /// Operating system of the engine (`linux`).
    pub os: String,
    /// Architecture (`amd64`).
    pub arch: String,
    /// `true` when the engine says it is Podman (its `Components` name it).
    pub podman: bool,
}

/// What the engine reports about its host (`docker info`), for `hostRequirements` checks and
/// runtime choices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineInfo {
    /// CPUs available to containers.
    pub cpus: i64,
    /// Memory of the engine's host, in bytes.
    pub memory_bytes: i64,
    /// Storage driver (`overlay2`, `vfs`, …).
    pub storage_driver: String,
    /// Container runtimes the engine offers (`runc`, `nvidia`, …), sorted.
    pub runtimes: Vec<String>,
    /// Security options the engine applies (`name=seccomp,profile=default`, `name=rootless`, …).
    pub security_options: Vec<String>,
    /// `1` or `2` (empty when not reported).
    pub cgroup_version: String,
    /// The runtime containers get when they name none (`runc`, `crun`, `runsc`, …; empty when
    /// not reported).
    pub default_runtime: String,
    /// Which resource limits the engine can enforce (its cgroup controllers).
    pub enforced_limits: EnforcedLimits,
    /// Whether the engine can give a container a GPU: a GPU runtime or a GPU device it
    /// discovered ([`crate::engine::gpu`]).
    pub gpu: bool,
}

/// The resource limits an engine says it enforces (`docker info`'s `MemoryLimit`,
/// `PidsLimit`, `CpuCfsQuota`); `false` when it does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnforcedLimits {
    /// Memory limits.
    pub memory: bool,
    /// Process count limits.
    pub pids: bool,
    /// CPU quota limits.
    pub cpu: bool,
}

#[cfg(test)]
mod tests {

    /// 5 MiB of output in 32 KiB pieces (attack 26 Q3: `afterStart` printing 400 MB made devcell
    /// hold 4 GB): at most [`COLLECT_CAP`] kept, the beginning or the end as asked, and cut.
    #[test]
    fn a_collected_stream_keeps_at_most_the_cap_its_head_or_its_tail() {
        for tail in [false, true] {
            let mut c = Collector::new(tail);
            let mut held = 0;
            for i in 0..160u32 {
                c.push(&[(i % 251) as u8; 32 * 1024]);
                held = held.max(c.bytes.len());
            }
            assert!(held <= 2 * COLLECT_CAP, "held {held}");
            let (bytes, cut) = c.finish();
            assert!(cut);
            assert_eq!(bytes.len(), COLLECT_CAP);
            let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
            if tail {
                assert_eq!(last, 159, "the end kept");
            } else {
                assert_eq!((first, last), (0, 31), "the beginning kept");
            }
        }
        let mut c = Collector::new(true);
        c.push(b"small");
        assert_eq!(c.finish(), (b"small".to_vec(), false));
    }
    use super::*;

    /// A mount holds its destination and what is below it, not a sibling sharing a prefix; a
    /// mount at `/` holds every path; a trailing `/` of the destination is ignored.
    #[test]
    fn a_mount_holds_its_destination_and_what_is_below() {
        let at = |destination: &str| MountInfo::bind("/h", destination, true);
        assert!(at("/w").holds("/w") && at("/w/").holds("/w/a") && at("/").holds("/x"));
        assert!(!at("/w").holds("/wx") && !at("/w/a").holds("/w"));
    }
}
