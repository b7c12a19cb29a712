//! `ports` (devcell's own; the reference CLI leaves forwarding to the editor): forwards the
//! merged configuration's `forwardPorts` and each `--port` from `127.0.0.1` on the host into
//! the running dev container, through the engine's exec API ([`crate::ops::ports_relay`]), so
//! it works under network `none` and publishes nothing (spec-note 0651, docs/ports.md).
//!
//! Three steps: [`plan_forwards`] (pure: entries and `portsAttributes` to a list),
//! [`open`] (find and attach to the container as `exec` does, probe a relay, bind the host
//! ports), then [`Forwarding::serve`] until the caller's shutdown future completes.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::engine::Engine;
use crate::ops::attach::{attach_target, report_grants};
use crate::ops::error::{OpsError, Result};
use crate::ops::options::TargetOptions;
use crate::ops::ports_relay::{Relay, RelayTarget, relay_connection};
use crate::progress::{Event, Reporter};

/// The host address every forward listens on: loopback only, never every interface.
pub const LISTEN_ADDRESS: &str = "127.0.0.1";

/// How often a forwarder asks the engine whether its container still runs (spec-note 0652):
/// a container stopped or removed outside `down` ends the forwarding.
pub const CONTAINER_WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// Inputs of [`open`].
#[derive(Debug, Clone, Default)]
pub struct PortsOptions {
    /// Workspace, config and container identity (as `exec`'s).
    pub target: TargetOptions,
    /// `--port HOST:CONTAINER`s, forwarded before the configuration's `forwardPorts`.
    pub ports: Vec<PortFlag>,
    /// `--allow`: grants for what the re-read configuration uses beyond what `up` judged
    /// (spec-note 0443), as for `exec`.
    pub allow: Vec<String>,
}

/// One `--port`: `HOST:CONTAINER`, or `PORT` for the same number on both sides; `HOST` 0
/// asks for any free host port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortFlag {
    /// The host port asked for (on [`LISTEN_ADDRESS`]).
    pub host: u16,
    /// The container port.
    pub container: u16,
}

/// Parses a `--port` value (`8080:80`, `3000`).
///
/// Errors: the text, what was expected.
pub fn parse_port_flag(text: &str) -> std::result::Result<PortFlag, String> {
    let number = |part: &str, zero_ok: bool| {
        part.parse::<u16>()
            .ok()
            .filter(|p| zero_ok || *p != 0)
            .ok_or_else(|| {
                format!("`{text}`: expected `HOST:CONTAINER` or `PORT`, ports 1-65535 (host port 0: any free port)")
            })
    };
    match text.split_once(':') {
        Some((host, container)) => Ok(PortFlag {
            host: number(host, true)?,
            container: number(container, false)?,
        }),
        None => {
            let port = number(text, false)?;
            Ok(PortFlag {
                host: port,
                container: port,
            })
        }
    }
}

/// One forward to set up: a host port on [`LISTEN_ADDRESS`] to a container port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForwardSpec {
    /// The Compose service whose container the forward ends in (a `forwardPorts` entry
    /// `"service:port"`); `None`: the dev container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The port inside the container (connected to on its `127.0.0.1`).
    pub container_port: u16,
    /// The host port asked for (0: any).
    pub requested_port: u16,
    /// `portsAttributes` `label`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `portsAttributes` `onAutoForward` (shown; devcell opens nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_auto_forward: Option<String>,
    /// `portsAttributes` `requireLocalPort`: a busy `requested_port` is an error instead of
    /// another free port.
    pub require_local_port: bool,
    /// Whether the repository's configuration named it (a `forwardPorts` entry), not a
    /// `--port` of the user's.
    pub from_repository: bool,
    /// Why a repository's port is forwarded from a free host port instead of its own number
    /// ([`repository_host_port`]); `None`: the number asked for is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_port_reason: Option<String>,
}

/// A `forwardPorts` entry that is not forwarded, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotForwarded {
    /// The entry as written (`"db:5432"`).
    pub entry: String,
    /// Why it is not forwarded.
    pub reason: String,
}

/// The forwards of `merged` (a merged configuration: its `forwardPorts`, `portsAttributes`,
/// `otherPortsAttributes`) and of `flags` (first; a `forwardPorts` entry for a container port
/// a flag already forwards is not repeated). `compose`: the configuration is a Compose one, so
/// a `"host:port"` entry names a service; otherwise such an entry is [`NotForwarded`].
pub fn plan_forwards(
    merged: &Value,
    flags: &[PortFlag],
    compose: bool,
) -> (Vec<ForwardSpec>, Vec<NotForwarded>) {
    let mut forwards: Vec<ForwardSpec> = Vec::new();
    let mut skipped = Vec::new();
    for flag in flags {
        forwards.push(with_attributes(
            merged,
            None,
            flag.container,
            flag.host,
            None,
        ));
    }
    for entry in merged
        .get("forwardPorts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match forward_entry(entry, compose) {
            Ok((service, port)) => {
                let text = entry_text(entry);
                if forwards
                    .iter()
                    .any(|f| f.service == service && f.container_port == port)
                {
                    continue;
                }
                forwards.push(with_attributes(merged, service, port, port, Some(&text)));
            }
            Err(reason) => skipped.push(NotForwarded {
                entry: entry_text(entry),
                reason,
            }),
        }
    }
    (forwards, skipped)
}

/// A `forwardPorts` entry as written (a number, or the string).
fn entry_text(entry: &Value) -> String {
    entry
        .as_str()
        .map_or_else(|| entry.to_string(), str::to_string)
}

/// One `forwardPorts` entry as (service, port): `N` and `localhost:N`/`127.0.0.1:N` are the
/// dev container's; another host is a Compose service's under Compose, else not forwarded.
fn forward_entry(
    entry: &Value,
    compose: bool,
) -> std::result::Result<(Option<String>, u16), String> {
    let port = |n: Option<u64>| {
        n.and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n != 0)
            .ok_or_else(|| "not a port number 1-65535".to_string())
    };
    match entry {
        Value::Number(n) => Ok((None, port(n.as_u64())?)),
        Value::String(s) => {
            let Some((host, number)) = s.rsplit_once(':') else {
                return Err("expected a port number or \"host:port\"".into());
            };
            let number = port(number.parse::<u64>().ok())?;
            match host {
                "localhost" | "127.0.0.1" => Ok((None, number)),
                _ if !compose => Err(format!(
                    "it names the host `{host}`, which is not the dev container: only a Compose configuration's services are forwarded to"
                )),
                _ if is_service_name(host) => Ok((Some(host.to_string()), number)),
                _ => Err(format!("`{host}` is not a Compose service name")),
            }
        }
        _ => Err("expected a port number or \"host:port\"".into()),
    }
}

/// Compose's service name characters (`[a-zA-Z0-9._-]`, not starting with `.` or `-`).
fn is_service_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A forward with the `portsAttributes` of its container port (the entry as written first,
/// then the port number, then the first `start-end` range holding it), else
/// `otherPortsAttributes` (spec: port attributes).
fn with_attributes(
    merged: &Value,
    service: Option<String>,
    container_port: u16,
    requested_port: u16,
    entry: Option<&str>,
) -> ForwardSpec {
    let attributes = port_attributes(merged, container_port, entry);
    let (requested_port, host_port_reason) = match entry {
        Some(_) => repository_host_port(requested_port),
        None => (requested_port, None),
    };
    let text = |key: &str| {
        attributes
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    ForwardSpec {
        service,
        container_port,
        requested_port,
        label: text("label"),
        on_auto_forward: text("onAutoForward"),
        require_local_port: host_port_reason.is_none()
            && attributes
                .and_then(|a| a.get("requireLocalPort"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        from_repository: entry.is_some(),
        host_port_reason,
    }
}

/// Host ports of well-known services that hold or accept credentials (databases, caches,
/// brokers, secret stores, engine and cluster APIs, directories, proxies, a local registry):
/// named in [`repository_host_port`]'s reason. The list only names; every repository port is
/// forwarded from a free host port (attack 25, P3: a list of services cannot be complete; a
/// local npm registry on 4873 was not on it; spec-note 0654).
pub const SERVICE_PORTS: &[(u16, &str)] = &[
    (1080, "SOCKS proxy"),
    (1433, "SQL Server"),
    (1521, "Oracle"),
    (2049, "NFS"),
    (2375, "Docker API"),
    (2376, "Docker API (TLS)"),
    (2379, "etcd"),
    (2380, "etcd"),
    (3128, "HTTP proxy"),
    (3306, "MySQL"),
    (3389, "RDP"),
    (4222, "NATS"),
    (5000, "container registry"),
    (5432, "PostgreSQL"),
    (5433, "PostgreSQL"),
    (5601, "Kibana"),
    (5672, "AMQP"),
    (5984, "CouchDB"),
    (6379, "Redis"),
    (6380, "Redis"),
    (6443, "Kubernetes API"),
    (7474, "Neo4j"),
    (7687, "Neo4j"),
    (8086, "InfluxDB"),
    (8200, "Vault"),
    (8500, "Consul"),
    (9000, "MinIO"),
    (9042, "Cassandra"),
    (9050, "Tor SOCKS"),
    (9092, "Kafka"),
    (9200, "Elasticsearch"),
    (9300, "Elasticsearch"),
    (10250, "kubelet"),
    (11211, "memcached"),
    (15672, "RabbitMQ management"),
    (26257, "CockroachDB"),
    (27017, "MongoDB"),
    (27018, "MongoDB"),
    (27019, "MongoDB"),
    (28015, "RethinkDB"),
];

/// The host port to ask for a repository's `forwardPorts` entry `port` (always 0: a free
/// host port), and why: the number may be a host service's (a database, a package registry,
/// a proxy) whose clients send stored credentials to whatever listens there while it is
/// stopped (attacks 24, O8 and 25, P3). The reason names the service when [`SERVICE_PORTS`]
/// knows it. The user's `--port N` (or `N:N`) forwards it from the same number.
pub fn repository_host_port(port: u16) -> (u16, Option<String>) {
    let what = SERVICE_PORTS
        .iter()
        .find(|(p, _)| *p == port)
        .map(|(_, name)| format!("{port} is the port of {name} on hosts; "))
        .or_else(|| (port < 1024).then(|| format!("{port} is a system service's port; ")))
        .unwrap_or_default();
    (
        0,
        Some(format!(
            "{what}a repository's entry is forwarded from a free port, never from a number a \
             host service's clients may send credentials to; `--port {port}` forwards it from \
             {port}"
        )),
    )
}

/// The attributes object that applies to `port` (see [`with_attributes`]).
fn port_attributes<'v>(merged: &'v Value, port: u16, entry: Option<&str>) -> Option<&'v Value> {
    let all = merged.get("portsAttributes").and_then(Value::as_object);
    let in_range = |key: &str| {
        key.split_once('-').is_some_and(|(a, b)| {
            match (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
                (Ok(a), Ok(b)) => (a..=b).contains(&port),
                _ => false,
            }
        })
    };
    all.and_then(|all| {
        entry
            .and_then(|e| all.get(e))
            .or_else(|| all.get(&port.to_string()))
            .or_else(|| all.iter().find(|(k, _)| in_range(k)).map(|(_, v)| v))
    })
    .or_else(|| merged.get("otherPortsAttributes"))
    .filter(|v| v.is_object())
}

/// One forward listening: where it listens and where it goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forward {
    /// The host address ([`LISTEN_ADDRESS`]).
    pub host: String,
    /// The host port it listens on (another than `spec.requested_port` when that was busy).
    pub host_port: u16,
    /// What was asked.
    #[serde(flatten)]
    pub spec: ForwardSpec,
}

impl Forward {
    /// `127.0.0.1:HOST -> container port C (label)`, with the service and `onAutoForward`
    /// when there are.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{}:{} -> {}container port {}",
            self.host,
            self.host_port,
            self.spec
                .service
                .as_ref()
                .map(|s| format!("service `{s}` "))
                .unwrap_or_default(),
            self.spec.container_port
        );
        let notes: Vec<String> = self
            .spec
            .from_repository
            .then(|| "from the repository's `forwardPorts`".to_string())
            .into_iter()
            .chain(self.spec.label.iter().cloned())
            .chain(
                self.spec
                    .on_auto_forward
                    .iter()
                    .map(|o| format!("onAutoForward: {o}")),
            )
            .collect();
        if !notes.is_empty() {
            text.push_str(&format!(" ({})", notes.join(", ")));
        }
        if let Some(reason) = &self.spec.host_port_reason {
            text.push_str(&format!(": {reason}"));
        }
        text
    }
}

/// The forwards set up by [`open`]: listening, not yet serving.
pub struct Forwarding {
    engine: Arc<dyn Engine>,
    container_id: String,
    listeners: Vec<(TcpListener, RelayTarget)>,
    forwards: Vec<Forward>,
    not_forwarded: Vec<NotForwarded>,
}

impl std::fmt::Debug for Forwarding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarding")
            .field("forwards", &self.forwards)
            .field("not_forwarded", &self.not_forwarded)
            .finish_non_exhaustive()
    }
}

/// Finds and attaches to the dev container as `exec` does (its user and the profile `up`
/// judged it under), plans the forwards, probes each target container once for a relay and
/// binds every host port on [`LISTEN_ADDRESS`].
///
/// Errors: as `exec`'s attach ([`OpsError::NoContainer`], `NotRunning`, `Config`,
/// `Security`); [`OpsError::Unsupported`] when nothing is to be forwarded, when a container
/// has no relay program, or when a `requireLocalPort` host port is busy (naming the port and
/// the process listening on it when the host shows it).
pub async fn open(opts: &PortsOptions, reporter: &dyn Reporter) -> Result<Forwarding> {
    let engine = crate::engine::connect().await?;
    open_with(engine, opts, reporter).await
}

/// [`open`] through `engine`.
///
/// Errors: as [`open`].
pub async fn open_with(
    engine: Arc<dyn Engine>,
    opts: &PortsOptions,
    reporter: &dyn Reporter,
) -> Result<Forwarding> {
    let (attached, requests) = attach_target(
        &*engine,
        &opts.target,
        &opts.allow,
        crate::lifecycle::UserEnvProbe::None,
    )
    .await?;
    report_grants(&requests, reporter);
    let compose = attached
        .container
        .labels
        .contains_key(crate::engine::compose::PROJECT_LABEL);
    let (specs, not_forwarded) = plan_forwards(&attached.merged, &opts.ports, compose);
    if specs.is_empty() {
        return Err(OpsError::Unsupported {
            message: "nothing to forward: the configuration has no `forwardPorts` that can be forwarded and no `--port` was given".into(),
            hint: Some("add `--port HOST:CONTAINER`, or `forwardPorts` to devcontainer.json".into()),
        });
    }
    let mut relays: BTreeMap<Option<String>, (String, Option<String>, Relay)> = BTreeMap::new();
    let mut listeners = Vec::new();
    let mut forwards = Vec::new();
    let mut not_forwarded = not_forwarded;
    for spec in specs {
        if !relays.contains_key(&spec.service) {
            let (id, user) = match &spec.service {
                None => (attached.container.id.clone(), Some(attached.exec_user())),
                Some(service) => {
                    match service_container(&*engine, &attached.container, service).await? {
                        Ok(id) => (id, None),
                        Err(reason) => {
                            not_forwarded.push(NotForwarded {
                                entry: format!("{service}:{}", spec.container_port),
                                reason,
                            });
                            continue;
                        }
                    }
                }
            };
            let relay = Relay::probe(&*engine, &id, user.as_deref()).await?;
            relays.insert(spec.service.clone(), (id, user, relay));
        }
        let (id, user, relay) = relays[&spec.service].clone();
        let listener = bind(&spec, reporter).await?;
        let host_port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        let target = RelayTarget {
            id,
            user,
            relay,
            port: spec.container_port,
        };
        forwards.push(Forward {
            host: LISTEN_ADDRESS.to_string(),
            host_port,
            spec,
        });
        listeners.push((listener, target));
    }
    Ok(Forwarding {
        engine,
        container_id: attached.container.id.clone(),
        listeners,
        forwards,
        not_forwarded,
    })
}

/// The running container of Compose service `service` in the project of `primary`; `Err`
/// with the reason when there is none (or more than one: which would be guessing).
async fn service_container(
    engine: &dyn Engine,
    primary: &crate::engine::ContainerInfo,
    service: &str,
) -> Result<std::result::Result<String, String>> {
    let project = primary
        .labels
        .get(crate::engine::compose::PROJECT_LABEL)
        .cloned()
        .unwrap_or_default();
    let labels = crate::engine::compose::service_labels(&project, service);
    let found: Vec<_> = engine
        .find_containers(&labels)
        .await?
        .into_iter()
        .filter(|c| c.state == "running")
        .collect();
    Ok(match found.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(format!(
            "no running container of service `{service}` in Compose project `{project}`"
        )),
        many => Err(format!(
            "{} running containers of service `{service}` (scaled): which one is not guessed",
            many.len()
        )),
    })
}

/// Binds `spec`'s host port on [`LISTEN_ADDRESS`]; a busy one is an error under
/// `requireLocalPort`, else reported and replaced by a free one.
///
/// Errors: [`OpsError::Unsupported`] for a busy `requireLocalPort` port (naming the listening
/// process when the host shows it); any other bind failure.
async fn bind(spec: &ForwardSpec, reporter: &dyn Reporter) -> Result<TcpListener> {
    let bind_error = |port: u16, e: std::io::Error| OpsError::Unsupported {
        message: format!("cannot listen on {LISTEN_ADDRESS}:{port}: {e}"),
        hint: None,
    };
    match TcpListener::bind((LISTEN_ADDRESS, spec.requested_port)).await {
        Ok(listener) => Ok(listener),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let port = spec.requested_port;
            let listener = listener_of(port);
            let owner = listener
                .as_ref()
                .map(|o| format!(" by {o}"))
                .unwrap_or_default();
            if spec.require_local_port {
                let hint = match &listener {
                    Some(who) => {
                        format!("stop {who}, which listens on port {port}, then run `ports` again")
                    }
                    None => format!(
                        "stop the program listening on port {port} (`ss -ltnp 'sport = :{port}'` shows it), then run `ports` again"
                    ),
                };
                return Err(OpsError::Unsupported {
                    message: format!(
                        "host port {LISTEN_ADDRESS}:{port} (container port {}) is in use{owner}, and `portsAttributes` asks for `requireLocalPort`",
                        spec.container_port
                    ),
                    hint: Some(hint),
                });
            }
            let listener = TcpListener::bind((LISTEN_ADDRESS, 0))
                .await
                .map_err(|e| bind_error(0, e))?;
            let chosen = listener.local_addr().map(|a| a.port()).unwrap_or_default();
            reporter.report(Event::Status(format!(
                "host port {port} is in use{owner}: container port {} is forwarded from {LISTEN_ADDRESS}:{chosen} instead",
                spec.container_port
            )));
            Ok(listener)
        }
        Err(e) => Err(bind_error(spec.requested_port, e)),
    }
}

/// Who listens on TCP `port` of this host (any address), as the kernel's tables show it
/// (`/proc/net/tcp`, `tcp6`, and the `/proc/<pid>/fd` link of the socket): "`comm` (pid N)",
/// else "a process of uid N" for one this user cannot see; `None` when the tables do not say.
fn listener_of(port: u16) -> Option<String> {
    let wanted = format!("{port:04X}");
    let (inode, uid) = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        })
        .find(|f| {
            f.len() > 9 && f[3] == "0A" && f[1].rsplit_once(':').is_some_and(|(_, p)| p == wanted)
        })
        .map(|f| (f[9].clone(), f[7].clone()))?;
    let socket = format!("socket:[{inode}]");
    let owner = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let holds = std::fs::read_dir(entry.path().join("fd"))
                .ok()?
                .flatten()
                .any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == socket.as_str())
                });
            holds.then(|| {
                let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                format!("`{}` (pid {pid})", comm.trim())
            })
        });
    Some(owner.unwrap_or_else(|| format!("a process of uid {uid}")))
}

impl Forwarding {
    /// The forwards listening, in order.
    pub fn forwards(&self) -> &[Forward] {
        &self.forwards
    }

    /// The `forwardPorts` entries not forwarded, with why.
    pub fn not_forwarded(&self) -> &[NotForwarded] {
        &self.not_forwarded
    }

    /// The dev container's id.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// `{"containerId": "…", "forwards": [...], "notForwarded": [...]}`: what an orchestrator
    /// reads (and the detached forwarder's [`crate::ops::ports_detached::Listening`]).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "containerId": self.container_id,
            "forwards": self.forwards,
            "notForwarded": self.not_forwarded,
        })
    }

    /// Accepts connections on every forward and relays each through its own exec until
    /// `shutdown` completes, or the dev container is found stopped or removed (asked every
    /// [`CONTAINER_WATCH_INTERVAL`]; reported on `reporter`); then the listeners are closed
    /// and every relay's engine connection dropped (the relay in the container sees its stdin
    /// end). A relay that fails is reported on `reporter` and the others go on.
    pub async fn serve(self, shutdown: impl Future<Output = ()>, reporter: &dyn Reporter) {
        let Forwarding {
            engine,
            listeners,
            container_id,
            ..
        } = self;
        let gone = container_gone(engine.clone(), container_id.clone());
        tokio::pin!(gone);
        let mut accepts =
            futures_util::stream::select_all(listeners.into_iter().map(|(listener, target)| {
                Box::pin(futures_util::stream::unfold(
                    (listener, target),
                    |(listener, target)| async move {
                        let accepted = listener.accept().await;
                        Some(((accepted, target.clone()), (listener, target)))
                    },
                ))
            }));
        let mut connections = FuturesUnordered::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                how = &mut gone => {
                    reporter.report(Event::Status(format!(
                        "the container {} {how}: forwarding ends",
                        &container_id[..container_id.len().min(12)]
                    )));
                    break;
                }
                Some((accepted, target)) = accepts.next() => match accepted {
                    Ok((stream, _)) => {
                        let engine = engine.clone();
                        connections.push(async move {
                            let port = target.port;
                            (port, relay_connection(&*engine, &target, stream).await)
                        });
                    }
                    Err(e) => reporter.report(Event::Status(format!("accepting a connection failed: {e}"))),
                },
                Some((port, ended)) = connections.next(), if !connections.is_empty() => {
                    match ended {
                        Ok(None) => {}
                        Ok(Some(failure)) => reporter.report(Event::Status(format!(
                            "a connection to container port {port} failed: {}",
                            crate::formats::terminal::printable(&failure, crate::formats::terminal::Sgr::Escape)
                        ))),
                        Err(e) => reporter.report(Event::Status(format!(
                            "a connection to container port {port} failed: {e}"
                        ))),
                    }
                }
            }
        }
    }
}

/// Resolves once the container `id` no longer runs: `"was removed"` or `"stopped"`. An
/// engine that does not answer is asked again (the relays' own execs fail meanwhile).
async fn container_gone(engine: Arc<dyn Engine>, id: String) -> &'static str {
    loop {
        tokio::time::sleep(CONTAINER_WATCH_INTERVAL).await;
        match engine.inspect_container(&id).await {
            Ok(None) => return "was removed",
            Ok(Some(c)) if !c.running => return "stopped",
            Ok(Some(_)) | Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flag(host: u16, container: u16) -> PortFlag {
        PortFlag { host, container }
    }

    #[test]
    fn port_flags_parse() {
        assert_eq!(parse_port_flag("8080:80"), Ok(flag(8080, 80)));
        assert_eq!(parse_port_flag("3000"), Ok(flag(3000, 3000)));
        assert_eq!(parse_port_flag("0:80"), Ok(flag(0, 80)));
        for bad in ["", "80:", ":80", "a:80", "80:0", "0", "70000", "1:2:3"] {
            let err = parse_port_flag(bad).unwrap_err();
            assert!(err.contains("HOST:CONTAINER"), "{bad}: {err}");
        }
    }

    #[test]
    fn forward_ports_and_flags_become_one_list_with_attributes() {
        let merged = json!({
            "forwardPorts": [3000, "localhost:4000", "db:5432", 8080],
            "portsAttributes": {
                "3000": {"label": "web", "onAutoForward": "notify", "requireLocalPort": true},
                "4000-4999": {"label": "range"},
                "db:5432": {"label": "database"}
            },
            "otherPortsAttributes": {"onAutoForward": "silent"}
        });
        let (forwards, skipped) = plan_forwards(&merged, &[flag(9000, 8080)], true);
        /// (service, container port, requested port, label, onAutoForward, requireLocalPort)
        type Row<'a> = (
            Option<&'a str>,
            u16,
            u16,
            Option<&'a str>,
            Option<&'a str>,
            bool,
        );
        let got: Vec<Row> = forwards
            .iter()
            .map(|f| {
                (
                    f.service.as_deref(),
                    f.container_port,
                    f.requested_port,
                    f.label.as_deref(),
                    f.on_auto_forward.as_deref(),
                    f.require_local_port,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                // the flag first; `forwardPorts`' 8080 is not repeated
                (None, 8080, 9000, None, Some("silent"), false),
                // the repository's: from a free port, its `requireLocalPort` not applied
                (None, 3000, 0, Some("web"), Some("notify"), false),
                (None, 4000, 0, Some("range"), None, false),
                // a host service's port, named by the repository: from a free port
                (Some("db"), 5432, 0, Some("database"), None, false),
            ]
        );
        assert!(skipped.is_empty(), "{skipped:?}");
    }

    #[test]
    fn a_host_that_is_not_a_compose_service_is_not_forwarded_and_says_why() {
        let merged = json!({"forwardPorts": ["db:5432", "127.0.0.1:7000", "x:0", true]});
        let (forwards, skipped) = plan_forwards(&merged, &[], false);
        assert_eq!(forwards.len(), 1);
        assert_eq!(forwards[0].container_port, 7000);
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert_eq!(skipped[0].entry, "db:5432");
        assert!(
            skipped[0].reason.contains("only a Compose configuration"),
            "{}",
            skipped[0].reason
        );
        assert!(skipped[1].reason.contains("1-65535"));
        assert_eq!(skipped[2].entry, "true");
        let (_, skipped) = plan_forwards(&json!({"forwardPorts": ["-x:80"]}), &[], true);
        assert!(skipped[0].reason.contains("not a Compose service name"));
    }

    #[test]
    fn the_listener_of_a_busy_port_is_named() {
        let busy = std::net::TcpListener::bind((LISTEN_ADDRESS, 0)).unwrap();
        let port = busy.local_addr().unwrap().port();
        let owner = listener_of(port).expect("the kernel's table shows the listener");
        assert!(
            owner.contains(&format!("pid {}", std::process::id())),
            "{owner}"
        );
    }

    #[test]
    fn a_forward_is_described_with_its_label_and_on_auto_forward() {
        let forward = Forward {
            host: LISTEN_ADDRESS.into(),
            host_port: 41000,
            spec: ForwardSpec {
                service: None,
                container_port: 8080,
                requested_port: 8080,
                label: Some("web".into()),
                on_auto_forward: Some("notify".into()),
                require_local_port: false,
                from_repository: false,
                host_port_reason: None,
            },
        };
        assert_eq!(
            forward.describe(),
            "127.0.0.1:41000 -> container port 8080 (web, onAutoForward: notify)"
        );
        assert_eq!(
            serde_json::to_value(&forward).unwrap(),
            json!({"host": "127.0.0.1", "hostPort": 41000, "containerPort": 8080,
                   "requestedPort": 8080, "label": "web", "onAutoForward": "notify",
                   "requireLocalPort": false, "fromRepository": false})
        );
    }

    /// Attack 24, O8: `ports` bound 127.0.0.1:5432 for a repository's `forwardPorts: [5432]`
    /// (its `portsAttributes` label "docs preview"), and a host client sent the password it
    /// keeps for the host's PostgreSQL to the container; attack 25, P3: the same with a local
    /// npm registry's 4873, on no list. Every repository entry now asks for a free host port
    /// and says why (naming a service it knows); its `requireLocalPort` does not hold it at
    /// the number; the user's `--port` keeps it.
    #[test]
    fn a_repository_port_of_a_host_service_is_forwarded_from_a_free_port() {
        let merged = json!({
            "forwardPorts": [3000, 5432, "localhost:6379", 80, 8200, 1024, 4873],
            "portsAttributes": {"5432": {"label": "docs preview", "requireLocalPort": true}}
        });
        let (forwards, _) = plan_forwards(&merged, &[], false);
        let got: Vec<(u16, u16, bool, bool)> = forwards
            .iter()
            .map(|f| {
                (
                    f.container_port,
                    f.requested_port,
                    f.host_port_reason.is_some(),
                    f.from_repository,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (3000, 0, true, true),
                (5432, 0, true, true),
                (6379, 0, true, true),
                (80, 0, true, true),
                (8200, 0, true, true),
                (1024, 0, true, true),
                (4873, 0, true, true),
            ]
        );
        let reason = forwards[6].host_port_reason.as_deref().unwrap();
        assert!(reason.contains("`--port 4873`"), "{reason}");
        assert!(!forwards[1].require_local_port);
        let shown = Forward {
            host: LISTEN_ADDRESS.into(),
            host_port: 41000,
            spec: forwards[1].clone(),
        };
        let text = shown.describe();
        assert!(
            text.contains("from the repository's `forwardPorts`"),
            "{text}"
        );
        assert!(
            text.contains("PostgreSQL") && text.contains("`--port 5432`"),
            "{text}"
        );
        let json = serde_json::to_value(&shown).unwrap();
        assert_eq!(json["fromRepository"], true);
        assert_eq!(json["requestedPort"], 0);
        assert!(
            json["hostPortReason"]
                .as_str()
                .unwrap()
                .contains("PostgreSQL")
        );
        // the user's `--port 5432` forwards it from 5432; the entry is not repeated
        let (forwards, _) = plan_forwards(&merged, &[flag(5432, 5432)], false);
        assert_eq!(forwards[0].requested_port, 5432);
        assert!(!forwards[0].from_repository && forwards[0].host_port_reason.is_none());
        assert_eq!(
            forwards.iter().filter(|f| f.container_port == 5432).count(),
            1
        );
    }
}
