//! `--network allowlist` in the operations (issue 13; spec-notes 0500, 0501, 0502-0505): the
//! user's allowlist (flags, `config.toml`) and the repository's granted requests, the channel
//! added to a new container, and the host-side proxy as its own detached devcell process per
//! workspace container, which outlives `up`.
//!
//! Host layout, under devcell's state folder (`<state>/egress/<key>/`, `key` = the first 16
//! characters of the dev container id, so concurrent workspaces each get their own):
//! - `proxy.json`: what the proxy serves ([`ProxyConfig`]: container, entries, agent, port;
//!   never a credential: the proxy resolves upstream values itself, from its environment);
//! - `proxy.pid`: the running proxy's pid (written by the proxy once its socket is bound);
//! - `proxy.log`: its stderr; `decisions.jsonl`: every decision ([`crate::egress::Decision`]);
//! - `socket/proxy.sock`: the socket bind-mounted into the container.
//!
//! The proxy is `devcell __egress-proxy <state> <key>` ([`serve_proxy`]), started by
//! [`connect`] (from `up` and `handoff`), restarted by an `up` that finds it gone or serving
//! another allowlist, stopped by `down` and `delete` ([`stop_for_containers`]), and listed by
//! `doctor` when its container is gone ([`proxies`]).

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::egress::{
    Allowlist, ContainerEgress, Decision, DecisionLog, EgressError, HostResolver, Proxy,
    SocketFolder, Upstreams, install_forwarder,
};
use crate::engine::{ContainerSpec, Engine, ExecInput, ExecOutput, ExecRequest};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::security::{self, Grants, Permission, PermissionRequest, SecurityProfile, Source};
use crate::settings::{NetworkMode, Settings};

/// The network setting that turns the channel on.
pub const ALLOWLIST: &str = "allowlist";
/// The label an `allowlist` container carries (value `allowlist`), so a later `up`, `status`
/// or `audit` knows its network `none` has a proxy.
pub const NETWORK_LABEL: &str = crate::names::EGRESS_NETWORK_LABEL;
/// The hidden subcommand that runs a proxy.
pub const PROXY_SUBCOMMAND: &str = "__egress-proxy";
/// How long `up` waits for a new proxy to bind its socket.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The destinations the repository requests (`customizations.devcell.egress` of
/// devcontainer.json), judged with the user's grants (`--allow egress:DEST`); asked only in
/// `allowlist` mode (elsewhere they would change nothing). Refused ones are returned, for one
/// refusal with everything else the configuration asks for.
///
/// Errors: [`OpsError::Security`] for a malformed request (naming its property).
pub(crate) fn repository_requests(
    loaded: &LoadedConfiguration,
    profile: &SecurityProfile,
    grants: &Grants,
    network: NetworkMode,
) -> Result<Vec<PermissionRequest>> {
    if network != NetworkMode::Allowlist {
        return Ok(Vec::new());
    }
    let customizations = loaded
        .value
        .get("customizations")
        .and_then(|c| c.as_object());
    let asked = security::egress_requests(
        customizations,
        &Source::DevcontainerJson,
        crate::egress::settings::normalise_request,
    )?;
    Ok(security::judge(profile, asked, grants))
}

/// The proxy's allowlist: `[security].egress`, the agent's `egress`, `--egress-allow`, then
/// the repository's granted requests, without repeats.
///
/// Errors: [`OpsError::Settings`] for a bad entry in the file (at its line);
/// [`OpsError::Egress`] for a bad `--egress-allow`.
pub(crate) fn allowlist_entries(
    opts: &UpOptions,
    requests: &[PermissionRequest],
) -> Result<Vec<String>> {
    let mut out = user_entries(
        &opts.settings,
        opts.security.agent.as_deref(),
        &opts.security.egress_allow,
    )?;
    for r in requests {
        if let Permission::Egress(d) = &r.permission
            && matches!(
                r.status,
                security::RequestStatus::Granted | security::RequestStatus::AllowedByProfile
            )
        {
            out.push(d.clone());
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|e| seen.insert(e.clone()));
    Allowlist::parse(&out)?;
    Ok(out)
}

/// The user's destinations: `[security].egress`, then `agent`'s `egress`, then the
/// `--egress-allow` flags, normalised (`host:port[=address]`).
///
/// Errors: [`OpsError::Settings`] for a bad entry in the file (at its line);
/// [`OpsError::Egress`] for a bad flag.
pub fn user_entries(
    settings: &Settings,
    agent: Option<&str>,
    flags: &[String],
) -> Result<Vec<String>> {
    let user = crate::egress::settings::allowlist(settings, agent)?;
    let mut out: Vec<String> = user.entries().iter().map(ToString::to_string).collect();
    for flag in flags {
        out.push(crate::egress::Entry::parse(flag)?.to_string());
    }
    Ok(out)
}

/// What a proxy serves (`proxy.json`); compared with what `up` asks for to decide whether the
/// running proxy is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyConfig {
    /// The container it serves (empty until the container exists).
    pub container_id: String,
    /// The allowlist entries (`host:port[=address]`).
    pub entries: Vec<String>,
    /// The user settings file whose `[agents.NAME.upstreams]` it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<PathBuf>,
    /// The agent whose upstreams it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The forwarder's loopback port in the container.
    pub port: u16,
}

/// One workspace's egress files ([module docs](self)).
#[derive(Debug, Clone)]
pub struct ProxyPaths {
    state: PathBuf,
    key: String,
    dir: PathBuf,
}

impl ProxyPaths {
    /// The files of workspace `key` under state folder `state`.
    pub fn new(state: &Path, key: &str) -> ProxyPaths {
        ProxyPaths {
            state: state.to_path_buf(),
            key: key.to_string(),
            dir: state.join("egress").join(key),
        }
    }

    /// The key of the dev container with id `devcontainer_id` (its first 16 characters,
    /// short enough for the socket path).
    pub fn key_of(devcontainer_id: &str) -> String {
        devcontainer_id
            .chars()
            .take(16)
            .collect::<String>()
            .to_ascii_lowercase()
    }

    /// `proxy.json`.
    pub fn config(&self) -> PathBuf {
        self.dir.join("proxy.json")
    }
    /// `proxy.pid`.
    pub fn pid(&self) -> PathBuf {
        self.dir.join("proxy.pid")
    }
    /// `proxy.log`.
    pub fn log(&self) -> PathBuf {
        self.dir.join("proxy.log")
    }
    /// `decisions.jsonl`.
    pub fn record(&self) -> PathBuf {
        self.dir.join("decisions.jsonl")
    }
    /// `socket/proxy.sock`.
    pub fn socket(&self) -> PathBuf {
        self.dir
            .join("socket")
            .join(crate::egress::channel::SOCKET_NAME)
    }

    fn read_config(&self) -> Option<ProxyConfig> {
        serde_json::from_slice(&std::fs::read(self.config()).ok()?).ok()
    }

    /// The running proxy's pid: the pid file names a live process that is this workspace's
    /// proxy (its command line names the subcommand and the key; a reused pid is not it).
    pub fn running(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.pid())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        is_proxy_process(pid, &self.key).then_some(pid)
    }
}

/// Whether `pid` is still the proxy of workspace `key` ([`crate::process::carries`]).
fn is_proxy_process(pid: u32, key: &str) -> bool {
    crate::process::carries(pid, &[PROXY_SUBCOMMAND, key])
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> OpsError + '_ {
    move |source| {
        OpsError::Egress(EgressError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Adds the channel to a new container's `spec` (after the policy judged the rest: these
/// binds are devcell's own): network `none`, the forwarder and socket folder read-only, the
/// proxy environment (hooks, `exec` and the agent see it), the [`NETWORK_LABEL`]. Installs the
/// forwarder and creates the socket folder.
///
/// Errors: [`OpsError::Egress`] when a file cannot be written.
pub(crate) fn prepare(spec: &mut ContainerSpec, paths: &ProxyPaths, port: u16) -> Result<()> {
    channel(paths, port)?.apply(spec);
    spec.labels
        .insert(NETWORK_LABEL.to_string(), ALLOWLIST.to_string());
    Ok(())
}

fn channel(paths: &ProxyPaths, port: u16) -> Result<ContainerEgress> {
    let forwarder = install_forwarder(&paths.state)?;
    let folder = SocketFolder::create(&paths.state, &paths.key)?;
    Ok(ContainerEgress::new(&forwarder, &folder, port))
}

fn state_root() -> Result<PathBuf> {
    crate::ops::state_folder::default_root().ok_or_else(|| {
        io_error(Path::new("$DEVCELL_STATE_DIR"))(std::io::Error::other(
            "no state folder for the egress proxy: set DEVCELL_STATE_DIR or HOME",
        ))
    })
}

/// Whether `mount` of `container` is one of devcell's own egress binds ([`prepare`]): the
/// container carries [`NETWORK_LABEL`] `allowlist`, the bind is read-only, goes to the
/// forwarder's or the socket folder's fixed place, and its source (as the engine reports it,
/// or resolved) lies in `<state root>/egress/` with no `..`. The reuse re-check leaves these
/// out: they are the channel the profile adds, not the repository's (spec-note 0505).
pub(crate) fn is_channel_bind(
    container: &crate::engine::ContainerInfo,
    mount: &crate::engine::MountInfo,
) -> bool {
    use crate::egress::channel::{CONTAINER_FORWARDER, CONTAINER_SOCKET_FOLDER};
    if container.labels.get(NETWORK_LABEL).map(String::as_str) != Some(ALLOWLIST)
        || mount.kind != "bind"
        || mount.rw
        || ![CONTAINER_FORWARDER, CONTAINER_SOCKET_FOLDER].contains(&mount.destination.as_str())
    {
        return false;
    }
    let source = Path::new(&mount.source);
    if source
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return false;
    }
    let Ok(root) = state_root() else {
        return false;
    };
    let egress = root.join("egress");
    let resolved = crate::security::host_path::resolve(&egress).ok();
    source.starts_with(&egress) || resolved.is_some_and(|r| source.starts_with(r))
}

/// `up`'s step before creating a container: under `--network allowlist`, [`prepare`] the
/// spec of the dev container `devcontainer_id`. Nothing otherwise.
///
/// Errors: as [`prepare`].
pub(crate) fn before_create(
    network: NetworkMode,
    devcontainer_id: &str,
    spec: &mut ContainerSpec,
) -> Result<()> {
    if network != NetworkMode::Allowlist {
        return Ok(());
    }
    let paths = ProxyPaths::new(&state_root()?, &ProxyPaths::key_of(devcontainer_id));
    prepare(spec, &paths, crate::egress::channel::DEFAULT_LISTEN_PORT)
}

/// `up`'s step once the container runs (created, started or found running): its proxy and
/// forwarder ([`connect`]) when it carries [`NETWORK_LABEL`]. The allowlist is this `up`'s
/// (`requests`: the judged ones, whose granted egress requests join it); an `up` without
/// `--network allowlist` keeps the one the proxy last served. Returns `None` for a container
/// without the channel.
///
/// Errors: [`OpsError::Unsupported`] when `allowlist` is asked for a container created
/// without it; [`connect`]'s errors.
pub(crate) async fn after_start(
    engine: &dyn Engine,
    opts: &UpOptions,
    network: NetworkMode,
    devcontainer_id: &str,
    container: &crate::engine::ContainerInfo,
    requests: &[PermissionRequest],
) -> Result<Option<EgressStatus>> {
    let asked = network == NetworkMode::Allowlist;
    let has_channel = container.labels.get(NETWORK_LABEL).map(String::as_str) == Some(ALLOWLIST);
    if !has_channel {
        if asked {
            return Err(OpsError::Unsupported {
                message: format!(
                    "the existing container {} was created without `--network allowlist`",
                    &container.id[..container.id.len().min(12)]
                ),
                hint: Some(
                    "remove it (`devcell down --remove`, or `up --remove-existing-container`) to create it with the allowlist".into(),
                ),
            });
        }
        return Ok(None);
    }
    let paths = ProxyPaths::new(&state_root()?, &ProxyPaths::key_of(devcontainer_id));
    let config = if asked {
        ProxyConfig {
            container_id: container.id.clone(),
            entries: allowlist_entries(opts, requests)?,
            config_file: opts.settings.file.clone(),
            agent: opts.security.agent.clone(),
            port: crate::egress::channel::DEFAULT_LISTEN_PORT,
        }
    } else {
        let mut kept = paths.read_config().unwrap_or(ProxyConfig {
            container_id: String::new(),
            entries: Vec::new(),
            config_file: None,
            agent: None,
            port: crate::egress::channel::DEFAULT_LISTEN_PORT,
        });
        kept.container_id = container.id.clone();
        kept
    };
    connect(engine, &paths, &config).await.map(Some)
}

/// What [`connect`] did, for `up`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressStatus {
    /// `allowlist`.
    pub network: String,
    /// The entries the proxy serves.
    pub entries: Vec<String>,
    /// The proxy's pid.
    pub proxy_pid: u32,
    /// Whether this `up` started it (`false`: it was running with the same allowlist).
    pub proxy_started: bool,
    /// The host socket.
    pub socket: PathBuf,
    /// The decision record.
    pub record: PathBuf,
}

/// Makes the proxy of `container_id` serve `config` (kept when it runs with the same
/// configuration, else started or restarted) and starts the forwarder in the container
/// (`--background`, as the container's user; a forwarder already serving the port stays).
///
/// Errors: [`OpsError::Egress`] when the proxy does not start (its log's last lines are
/// in the error), [`OpsError::Engine`] when the forwarder cannot be run.
pub(crate) async fn connect(
    engine: &dyn Engine,
    paths: &ProxyPaths,
    config: &ProxyConfig,
) -> Result<EgressStatus> {
    let channel = channel(paths, config.port)?;
    let running = paths.running();
    let same = paths.read_config().as_ref() == Some(config);
    let (pid, started) = match running {
        Some(pid) if same => (pid, false),
        _ => {
            if let Some(pid) = running {
                stop_pid(pid, &paths.key).await;
            }
            write_config(paths, config)?;
            (start_proxy(paths).await?, true)
        }
    };
    let request = ExecRequest {
        argv: channel.background_command(),
        ..ExecRequest::default()
    };
    let r = engine
        .exec(
            &config.container_id,
            &request,
            ExecInput::None,
            ExecOutput::Collect,
        )
        .await?;
    let said = r.stdout_text();
    if r.exit_code != 0 || !(said.starts_with("listening") || said.starts_with("in-use")) {
        return Err(OpsError::Egress(EgressError::Io {
            path: PathBuf::from(crate::egress::channel::CONTAINER_FORWARDER),
            source: std::io::Error::other(format!(
                "the forwarder did not start in container {} (exit {}): {}{}",
                &config.container_id[..config.container_id.len().min(12)],
                r.exit_code,
                said.trim(),
                r.stderr_text().trim()
            )),
        }));
    }
    Ok(EgressStatus {
        network: ALLOWLIST.to_string(),
        entries: config.entries.clone(),
        proxy_pid: pid,
        proxy_started: started,
        socket: paths.socket(),
        record: paths.record(),
    })
}

fn write_config(paths: &ProxyPaths, config: &ProxyConfig) -> Result<()> {
    std::fs::create_dir_all(&paths.dir).map_err(io_error(&paths.dir))?;
    let path = paths.config();
    let mut tmp = tempfile::NamedTempFile::new_in(&paths.dir).map_err(io_error(&paths.dir))?;
    let text = serde_json::to_vec_pretty(config).expect("a ProxyConfig serialises");
    std::io::Write::write_all(&mut tmp, &text).map_err(io_error(&path))?;
    tmp.persist(&path).map_err(|e| io_error(&path)(e.error))?;
    Ok(())
}

/// Starts `devcell __egress-proxy <state> <key>` detached (its own session, stdio away from
/// the caller's, stderr to `proxy.log`) and waits until it has bound the socket.
async fn start_proxy(paths: &ProxyPaths) -> Result<u32> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().map_err(io_error(Path::new("devcell")))?;
    let log_path = paths.log();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(io_error(&log_path))?;
    let _ = std::fs::remove_file(paths.pid());
    let mut command = std::process::Command::new(exe);
    crate::formats::host_tool::harden_tool(&mut command);
    let mut child = command
        .arg(PROXY_SUBCOMMAND)
        .arg(&paths.state)
        .arg(&paths.key)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(io_error(Path::new(PROXY_SUBCOMMAND)))?;
    let pid = child.id();
    let deadline = std::time::Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(3).collect();
            return Err(OpsError::Egress(EgressError::Io {
                path: log_path.clone(),
                source: std::io::Error::other(format!(
                    "the egress proxy exited ({status}): {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                )),
            }));
        }
        if paths.running() == Some(pid)
            && tokio::net::UnixStream::connect(paths.socket())
                .await
                .is_ok()
        {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            return Err(OpsError::Egress(EgressError::Io {
                path: paths.socket(),
                source: std::io::Error::other("the egress proxy did not bind its socket in 10 s"),
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // reaped when it ends, if this process still runs then (a handoff does)
    std::thread::spawn(move || child.wait());
    Ok(pid)
}

/// The proxy process (`devcell __egress-proxy <state> <key>`): reads `proxy.json`, resolves
/// the agent's upstreams from its own environment, binds the socket, writes `proxy.pid` and
/// serves until `SIGTERM` (then removes the socket and the pid file).
///
/// Errors: the configuration, settings, socket or record cannot be read or created.
pub async fn serve_proxy(state: &Path, key: &str) -> Result<()> {
    // its own session: the terminal's signals to `up` never reach it
    let _ = rustix::process::setsid();
    let paths = ProxyPaths::new(state, key);
    let config = paths.read_config().ok_or_else(|| {
        io_error(&paths.config())(std::io::Error::other(
            "missing or not a proxy configuration",
        ))
    })?;
    let allowlist = Allowlist::parse(&config.entries)?;
    let upstreams = match &config.agent {
        Some(agent) => {
            let settings = match &config.config_file {
                Some(file) => crate::settings::load(Some(file))?,
                None => Settings::default(),
            };
            crate::egress::settings::upstreams(&settings, agent, &|n| std::env::var(n).ok())?
        }
        None => Upstreams::new(),
    };
    let folder = SocketFolder::create(state, key)?;
    let log = DecisionLog::open(&paths.record())?;
    let listener = folder.bind()?;
    let pid_path = paths.pid();
    std::fs::write(&pid_path, std::process::id().to_string()).map_err(io_error(&pid_path))?;
    let proxy = Proxy::with_upstreams(allowlist, Arc::new(HostResolver), log, upstreams)
        .with_local_port(config.port);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(io_error(&pid_path))?;
    let served = tokio::select! {
        r = proxy.serve_unix(listener) => r.map_err(io_error(&paths.socket())),
        _ = term.recv() => Ok(()),
    };
    let _ = std::fs::remove_file(folder.socket());
    if std::fs::read_to_string(&pid_path).ok().as_deref() == Some(&std::process::id().to_string()) {
        let _ = std::fs::remove_file(&pid_path);
    }
    served
}

/// Stops `pid` while it is the proxy of workspace `key` ([`crate::process::stop_carrier`]).
async fn stop_pid(pid: u32, key: &str) {
    crate::process::stop_carrier(pid, &[PROXY_SUBCOMMAND, key]).await;
}

/// One workspace's proxy as found in the state folder.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyEntry {
    /// Its key (folder name).
    pub key: String,
    /// What it serves.
    pub config: ProxyConfig,
    /// Its pid, when it runs.
    pub pid: Option<u32>,
    /// Its folder.
    pub folder: PathBuf,
}

/// Every proxy configuration under `state` (running or not).
pub fn proxies(state: &Path) -> Vec<ProxyEntry> {
    let Ok(dir) = std::fs::read_dir(state.join("egress")) else {
        return Vec::new();
    };
    let mut out: Vec<ProxyEntry> = dir
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let key = e.file_name().to_str()?.to_string();
            let paths = ProxyPaths::new(state, &key);
            let config = paths.read_config()?;
            Some(ProxyEntry {
                pid: paths.running(),
                folder: paths.dir.clone(),
                key,
                config,
            })
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// The proxy serving `container_id`, when there is one.
pub fn proxy_of(state: &Path, container_id: &str) -> Option<ProxyEntry> {
    proxies(state)
        .into_iter()
        .find(|p| !container_id.is_empty() && p.config.container_id == container_id)
}

/// Stops the proxies of `container_ids` (`down`, `delete`) and removes their sockets; the
/// configuration and decision record stay (the evidence). Returns the pids stopped.
pub async fn stop_for_containers(state: &Path, container_ids: &[String]) -> Vec<u32> {
    let mut stopped = Vec::new();
    for p in proxies(state) {
        if !container_ids.contains(&p.config.container_id) {
            continue;
        }
        if let Some(pid) = p.pid {
            stop_pid(pid, &p.key).await;
            stopped.push(pid);
        }
        let paths = ProxyPaths::new(state, &p.key);
        let _ = std::fs::remove_file(paths.socket());
        let _ = std::fs::remove_file(paths.pid());
    }
    stopped
}

/// The decisions for one destination, summarised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationSummary {
    /// The destination host as asked for.
    pub destination: String,
    /// Its port.
    pub port: u16,
    /// Allowed or refused.
    pub allowed: bool,
    /// The reasons seen (`allowed`, `not-listed`, …), each once.
    pub reasons: Vec<String>,
    /// How many decisions.
    pub count: u64,
    /// Bytes sent, in total.
    pub bytes_sent: u64,
    /// Bytes received, in total.
    pub bytes_received: u64,
}

/// The egress evidence of a container or session: what the proxy serves and each destination
/// it decided on, allowed and refused, with counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressSummary {
    /// `allowlist`.
    pub network: String,
    /// The entries served.
    pub entries: Vec<String>,
    /// The decision record (JSON lines).
    pub record: PathBuf,
    /// Whether the proxy runs now.
    pub proxy_running: bool,
    /// Allowed destinations.
    pub allowed: Vec<DestinationSummary>,
    /// Refused destinations.
    pub refused: Vec<DestinationSummary>,
    /// Decisions of destinations beyond the listed ones ([`MAX_SUMMARY_DESTINATIONS`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u64,
    /// Decisions the bounded record no longer holds (rotated away; spec-note 0425).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The most destinations a summary lists per outcome; the decisions of the others are counted
/// in [`EgressSummary::omitted`] (a container can ask for any number of names).
pub const MAX_SUMMARY_DESTINATIONS: usize = 200;

/// Groups decisions by destination, port and outcome, in order of first appearance, at most
/// [`MAX_SUMMARY_DESTINATIONS`] per outcome, in memory bounded by that (spec-note 0425).
#[derive(Debug, Default)]
pub struct Summariser {
    index: std::collections::HashMap<(String, u16, bool), usize>,
    groups: Vec<DestinationSummary>,
    listed: [usize; 2],
    omitted: u64,
}

impl Summariser {
    /// Counts one decision.
    pub fn add(&mut self, d: &Decision) {
        let key = (d.destination.clone(), d.port, d.allowed);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                if self.listed[usize::from(d.allowed)] >= MAX_SUMMARY_DESTINATIONS {
                    self.omitted += 1;
                    return;
                }
                self.listed[usize::from(d.allowed)] += 1;
                self.groups.push(DestinationSummary {
                    destination: d.destination.clone(),
                    port: d.port,
                    allowed: d.allowed,
                    reasons: Vec::new(),
                    count: 0,
                    bytes_sent: 0,
                    bytes_received: 0,
                });
                self.index.insert(key, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        let s = &mut self.groups[i];
        s.count += 1;
        s.bytes_sent += d.bytes_sent;
        s.bytes_received += d.bytes_received;
        if !s.reasons.contains(&d.reason) && s.reasons.len() < 16 {
            s.reasons.push(d.reason.clone());
        }
    }

    /// (allowed, refused, decisions of destinations not listed).
    pub fn finish(self) -> (Vec<DestinationSummary>, Vec<DestinationSummary>, u64) {
        let (allowed, refused): (Vec<_>, Vec<_>) = self.groups.into_iter().partition(|s| s.allowed);
        (allowed, refused, self.omitted)
    }
}

/// Groups `decisions` by destination, port and outcome, in order of first appearance
/// ([`Summariser`]).
pub fn summarise(decisions: &[Decision]) -> (Vec<DestinationSummary>, Vec<DestinationSummary>) {
    let mut s = Summariser::default();
    for d in decisions {
        s.add(d);
    }
    let (allowed, refused, _) = s.finish();
    (allowed, refused)
}

/// The summary for the proxy of `container_id`, of decisions made at or after `since` (a
/// handoff session's start; `None`: all), read one line at a time.
pub fn summary_for(
    state: &Path,
    container_id: &str,
    since: Option<chrono::DateTime<chrono::Utc>>,
) -> Option<EgressSummary> {
    let p = proxy_of(state, container_id)?;
    let paths = ProxyPaths::new(state, &p.key);
    let mut summariser = Summariser::default();
    let dropped = DecisionLog::for_each(&paths.record(), |d| {
        if since.is_none_or(|s| d.time >= s) {
            summariser.add(&d);
        }
    });
    let (allowed, refused, omitted) = summariser.finish();
    Some(EgressSummary {
        network: ALLOWLIST.to_string(),
        entries: p.config.entries,
        record: paths.record(),
        proxy_running: p.pid.is_some(),
        allowed,
        refused,
        omitted,
        dropped,
    })
}

/// The audit's evidence for the `allowlist` container `container_id` (spec-note 0505).
pub(crate) fn audit_evidence(container_id: &str) -> Option<security::audit::EgressEvidence> {
    let state = crate::ops::state_folder::default_root()?;
    let s = summary_for(&state, container_id, None)?;
    Some(security::audit::EgressEvidence {
        entries: s.entries,
        allowed: s
            .allowed
            .iter()
            .map(|d| format!("{}:{} ({})", d.destination, d.port, d.count))
            .collect(),
        refused: s
            .refused
            .iter()
            .map(|d| {
                format!(
                    "{}:{} ({}, {})",
                    d.destination,
                    d.port,
                    d.count,
                    d.reasons.join("/")
                )
            })
            .collect(),
        proxy_running: s.proxy_running,
        record: s.record,
        channel_root: state.join("egress"),
    })
}

/// The container environment an agent gets for its upstreams (each upstream's `env` = its
/// in-container base URL), resolving nothing secret into it.
///
/// Errors: [`OpsError::Settings`] for a bad upstream entry.
pub(crate) fn upstream_env(
    settings: &Settings,
    agent: &str,
    port: u16,
) -> Result<indexmap::IndexMap<String, String>> {
    // the base URLs need no value: a placeholder stands in for every variable
    let upstreams = crate::egress::settings::upstreams(settings, agent, &|_| Some("x".into()))?;
    Ok(upstreams.container_env(port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::Via;

    fn decision(dest: &str, allowed: bool, reason: &str, sent: u64) -> Decision {
        Decision {
            time: "2026-12-01T12:00:00Z".parse().unwrap(),
            destination: dest.into(),
            port: 8080,
            via: Via::Http,
            allowed,
            reason: reason.into(),
            detail: String::new(),
            address: None,
            bytes_sent: sent,
            bytes_received: 2 * sent,
            duration_ms: 1,
        }
    }

    #[test]
    fn a_summary_lists_a_bounded_number_of_destinations() {
        let d = |i: usize| Decision {
            time: "2026-12-01T12:00:00Z".parse().unwrap(),
            destination: format!("h{i}.test"),
            port: 443,
            via: crate::egress::Via::Connect,
            allowed: false,
            reason: "not-listed".into(),
            detail: String::new(),
            address: None,
            bytes_sent: 0,
            bytes_received: 0,
            duration_ms: 0,
        };
        let mut s = Summariser::default();
        for i in 0..MAX_SUMMARY_DESTINATIONS + 50 {
            s.add(&d(i));
            s.add(&d(i));
        }
        let (allowed, refused, omitted) = s.finish();
        assert!(allowed.is_empty());
        assert_eq!(refused.len(), MAX_SUMMARY_DESTINATIONS);
        assert_eq!(refused[0].count, 2);
        assert_eq!(omitted, 100);
    }

    #[test]
    fn decisions_are_summarised_by_destination_and_outcome() {
        let (allowed, refused) = summarise(&[
            decision("web.test", true, "allowed", 10),
            decision("evil.test", false, "not-listed", 0),
            decision("web.test", true, "allowed", 5),
            decision("127.0.0.1", false, "non-public-address", 0),
            decision("evil.test", false, "not-listed", 0),
        ]);
        assert_eq!(allowed.len(), 1);
        assert_eq!(
            (
                allowed[0].count,
                allowed[0].bytes_sent,
                allowed[0].bytes_received
            ),
            (2, 15, 30)
        );
        let names: Vec<_> = refused
            .iter()
            .map(|s| (s.destination.as_str(), s.count))
            .collect();
        assert_eq!(names, [("evil.test", 2), ("127.0.0.1", 1)]);
        assert_eq!(refused[1].reasons, ["non-public-address"]);
    }

    #[test]
    fn the_allowlist_joins_settings_flags_and_granted_requests_once() {
        let mut settings = crate::settings::parse(
            "[security]\negress = [\"a.test\"]\n[agents.codex]\ncommand = [\"codex\"]\negress = [\"b.test:8080\"]\n",
            Path::new("c.toml"),
        )
        .unwrap();
        settings.file = Some(PathBuf::from("c.toml"));
        let opts = UpOptions {
            settings,
            security: crate::security::SecurityOptions {
                agent: Some("codex".into()),
                egress_allow: vec!["web.test:80=127.0.0.1".into(), "a.test".into()],
                ..crate::security::SecurityOptions::default()
            },
            ..UpOptions::default()
        };
        let req = |d: &str, status| PermissionRequest {
            permission: Permission::Egress(d.into()),
            source: Source::DevcontainerJson,
            status,
        };
        let entries = allowlist_entries(
            &opts,
            &[
                req("repo.test:443", security::RequestStatus::Granted),
                req("refused.test:443", security::RequestStatus::Refused),
            ],
        )
        .unwrap();
        assert_eq!(
            entries,
            [
                "a.test:443",
                "b.test:8080",
                "web.test:80=127.0.0.1",
                "repo.test:443"
            ]
        );
        let bad = UpOptions {
            security: crate::security::SecurityOptions {
                egress_allow: vec!["not a host".into()],
                ..crate::security::SecurityOptions::default()
            },
            ..UpOptions::default()
        };
        let err = allowlist_entries(&bad, &[]).unwrap_err().to_string();
        assert!(err.contains("not a host"), "{err}");
    }

    #[test]
    fn a_pid_is_a_proxy_only_when_its_command_line_names_the_key() {
        let state = tempfile::tempdir().unwrap();
        let paths = ProxyPaths::new(state.path(), "k1");
        std::fs::create_dir_all(&paths.dir).unwrap();
        // this test's own pid: alive, but not a proxy
        std::fs::write(paths.pid(), std::process::id().to_string()).unwrap();
        assert_eq!(paths.running(), None);
        assert_eq!(
            ProxyPaths::key_of("ABCDEFGHIJKLMNOPQRST"),
            "abcdefghijklmnop"
        );
    }
}
