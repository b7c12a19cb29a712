//! Host-side handoff state, outside the workspace: per workspace the container, the image and
//! the handoff sessions (agent, start, end, exit code or signal, log path), so `status`,
//! `doctor` and a repeated `handoff` can tell what is running.
//!
//! Layout under the state root (`$DEVCELL_STATE_DIR`, else `$XDG_STATE_HOME/devcell`, else
//! `~/.local/state/devcell`; [`StateStore::new`] takes any folder, for tests):
//!
//! ```text
//! <root>/workspaces/<key>.json   one WorkspaceState per workspace (key: sha256 of the canonical root)
//! <root>/workspaces/<key>.lock   flock(2) taken around every read-modify-write
//! <root>/logs/<session>.log      the agent's output for one session
//! ```
//!
//! Files are written atomically (temporary file + rename in the same folder); folders are
//! created `0700` and logs `0600` (an agent's output may contain secrets it printed).
//!
//! # Sessions
//! A session records the devcell process id and the container id. Its [`SessionStatus`]:
//! - `ended`: an end was recorded;
//! - `live`: no end, the devcell process is alive, and the container is running (or not yet
//!   known: `up` is still starting it);
//! - `stale`: no end, and the devcell process is gone (killed before it could record the end)
//!   or the container is not running any more.
//!
//! [`StateStore::begin_session`] refuses a new session while another is live (unless replacing)
//! and closes stale ones as `abandoned`. Whether a container runs is asked through
//! [`ContainerProbe`], so this module stays engine-free. See spec note
//! `spec-notes/0164-handoff-state-and-sessions.md`.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::context::AgentRuntime;
use crate::ops::state_folder;

/// The state file's schema version.
pub const SCHEMA_VERSION: u32 = 1;

/// A failure reading or writing handoff state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// No state folder could be determined (no `$HOME`).
    #[error("cannot determine the state folder: set `XDG_STATE_HOME` or `HOME`")]
    NoStateDir,
    /// A file or folder could not be read or written.
    #[error("cannot access handoff state `{}`", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A state file is not valid.
    #[error("handoff state `{}` is corrupt", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// Another handoff session is live for the workspace.
    #[error("a handoff session (`{}`, agent `{}`, devcell pid {}) is already live for this workspace", session.id, session.agent, session.pid)]
    SessionActive {
        /// The live session.
        session: Box<Session>,
    },
    /// No session with that id exists for the workspace.
    #[error("no handoff session `{id}` for workspace `{}`", workspace.display())]
    NoSuchSession {
        /// The workspace root.
        workspace: PathBuf,
        /// The session id.
        id: String,
    },
}

impl StateError {
    /// The envelope error code: `session_active`, `not_found` for an unknown session,
    /// `internal` otherwise.
    pub fn code(&self) -> crate::handoff::envelope::ErrorCode {
        use crate::handoff::envelope::ErrorCode;
        match self {
            StateError::SessionActive { .. } => ErrorCode::SessionActive,
            StateError::NoSuchSession { .. } => ErrorCode::NotFound,
            _ => ErrorCode::Internal,
        }
    }

    /// The envelope error `details`: for `session_active`, `{"session": <the live session>}`;
    /// otherwise `{}`.
    pub fn details(&self) -> serde_json::Value {
        match self {
            StateError::SessionActive { session } => {
                serde_json::json!({ "session": serde_json::to_value(session).unwrap_or_default() })
            }
            _ => serde_json::json!({}),
        }
    }

    /// A hint for the user, when a fix is known.
    pub fn hint(&self) -> Option<String> {
        match self {
            StateError::SessionActive { .. } => Some(
                "wait for it to end, or pass `--replace` to stop it and start a new one".into(),
            ),
            StateError::Corrupt { path, .. } => Some(format!(
                "move `{}` away; devcell starts fresh state without it",
                path.display()
            )),
            _ => None,
        }
    }
}

impl crate::ops::error::ProductError for StateError {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        StateError::code(self)
    }
    fn details(&self) -> serde_json::Value {
        StateError::details(self)
    }
    fn hint(&self) -> Option<String> {
        StateError::hint(self)
    }
}

/// Everything devcell remembers about one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceState {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The canonical workspace root on the host.
    pub workspace: PathBuf,
    /// [`workspace_key`] of `workspace`.
    pub key: String,
    /// The workspace's container, once `up` created it; `None` after `delete`.
    pub container_id: Option<String>,
    /// The image reference the container runs.
    pub image: Option<String>,
    /// Handoff sessions, oldest first.
    pub sessions: Vec<Session>,
    /// The workspace's `.git` entries when the last handoff started (spec-note 0436):
    /// `status`, `handoff` and `delete` say loudly what changed or appeared since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_identity: Option<crate::handoff::git_identity::GitIdentity>,
    /// The git entries (relative paths) created since a baseline and not accepted (attack M8):
    /// kept through `delete` and named by every later handoff, `status` and `delete`; only
    /// `--allow created-git:<path>` (or removing the workspace's state) forgets one
    /// ([`crate::handoff::git_identity::CreatedGits`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub created_git: std::collections::BTreeSet<String>,
}

impl WorkspaceState {
    /// Empty state for a canonical workspace root.
    pub fn new(workspace: PathBuf) -> Self {
        let key = key_of(&workspace);
        Self {
            schema_version: SCHEMA_VERSION,
            workspace,
            key,
            container_id: None,
            image: None,
            sessions: Vec::new(),
            git_identity: None,
            created_git: Default::default(),
        }
    }

    /// The session with this id.
    pub fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.iter().find(|s| s.id == id)
    }

    /// The session with this id, to change.
    ///
    /// # Errors
    /// [`StateError::NoSuchSession`] when the workspace has none with that id.
    fn session_mut(&mut self, id: &str) -> Result<&mut Session, StateError> {
        match self.sessions.iter().position(|s| s.id == id) {
            Some(i) => Ok(&mut self.sessions[i]),
            None => Err(StateError::NoSuchSession {
                workspace: self.workspace.clone(),
                id: id.to_string(),
            }),
        }
    }

    /// The most recent session, if any.
    pub fn last_session(&self) -> Option<&Session> {
        self.sessions.last()
    }
}

/// One handoff of the workspace to an agent. `Default` is the record of nothing yet: no id,
/// no end, no findings (a session starts from it with what it knows at its start).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Unique id: `<UTC yyyymmddThhmmssZ>-<pid>` (plus `-N` on a collision).
    pub id: String,
    /// The agent's configured name.
    pub agent: String,
    /// The devcell process that runs the session.
    pub pid: u32,
    /// That process's start time (Linux: clock ticks since boot, `/proc/<pid>/stat` field 22),
    /// so a recycled pid is not mistaken for it; `None` where unknown.
    #[serde(default)]
    pub pid_start: Option<u64>,
    /// The container the agent runs in; `None` while `up` is still starting it.
    pub container_id: Option<String>,
    /// Start time (RFC 3339, UTC).
    pub started_at: String,
    /// End time (RFC 3339, UTC); `None` while running (or when devcell died: stale).
    pub ended_at: Option<String>,
    /// How it ended; `None` while running.
    pub outcome: Option<SessionOutcome>,
    /// The agent's output log on the host.
    pub log: PathBuf,
    /// Where the agent runs (`container`, or `host` for `handoff --runtime host`: then no
    /// container is ever recorded and liveness is the devcell process's alone).
    #[serde(default)]
    pub runtime: AgentRuntime,
    /// Under `--network allowlist`: the egress proxy's decisions during the session, by
    /// destination (allowed and refused, with counts; spec-note 0504).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Box<crate::ops::egress::EgressSummary>>,
    /// The network the session's container has (`none`, `allowlist` or `default`; a Compose
    /// project's closed or open project networks, spec-note 0606), once it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// What came back from each repository's container git directory (spec-note 0436): the
    /// branches fast-forwarded or created on the host, the refs kept aside under
    /// `refs/devcell/<session>/` (rewritten, deleted, moved on the host meanwhile).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub git: Vec<RepoFetchBack>,
    /// The hash of the session's environment record, kept under
    /// `<root>/environments/<hash>.json` (spec-note 0520).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// The session's mail channel (spec-note 0532): its group, task and socket from when it
    /// opened, and what went through it once it closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mail: Option<Box<crate::handoff::door::ChannelRecord>>,
    /// The session's container is one devcell did not create (`handoff --container`,
    /// spec-note 0524): devcell never starts, stops or removes it; `delete` forgets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
    /// The handoff group the session belongs to (`handoff --group`, spec-note 0525): live
    /// sessions of one group share the workspace's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// One repository's fetch-back in a [`Session`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepoFetchBack {
    /// The repository.
    pub repo: String,
    /// What happened.
    #[serde(flatten)]
    pub result: crate::handoff::container_git::FetchBack,
}

/// How a session ended (serialised with a `kind` tag).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SessionOutcome {
    /// The agent exited with this code.
    Exited {
        /// The exit code.
        exit_code: i32,
    },
    /// The agent was killed by this signal.
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// The handoff failed before or while starting the agent (build, hook, engine, …).
    Failed {
        /// The envelope error code (`build_failed`, `hook_failed`, …).
        code: String,
        /// The error message.
        message: String,
    },
    /// Replaced by a later handoff with `--replace`.
    Replaced {
        /// The replacing session's id.
        by: String,
    },
    /// Found stale (devcell gone, no end recorded) and closed by a later devcell.
    Abandoned,
}

impl std::fmt::Display for SessionOutcome {
    /// For people: `exit 0`, `signal 15`, `failed: permission_required: …`, `replaced by
    /// <id>`, `abandoned`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionOutcome::Exited { exit_code } => write!(f, "exit {exit_code}"),
            SessionOutcome::Signaled { signal } => write!(f, "signal {signal}"),
            SessionOutcome::Failed { code, message } => write!(f, "failed: {code}: {message}"),
            SessionOutcome::Replaced { by } => write!(f, "replaced by {by}"),
            SessionOutcome::Abandoned => f.write_str("abandoned"),
        }
    }
}

/// Whether a session is still running (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionStatus {
    /// An end is recorded.
    Ended,
    /// Running: devcell alive and the container running (or starting).
    Live,
    /// No end recorded, but devcell is gone or the container is not running.
    Stale,
}

impl SessionStatus {
    /// `ended`, `live` or `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Ended => "ended",
            SessionStatus::Live => "live",
            SessionStatus::Stale => "stale",
        }
    }
}

/// Answers "is this container running?" for [`session_status`]; implemented by the engine
/// layer's caller. Any `Fn(&str) -> bool` is one.
pub trait ContainerProbe {
    /// Whether the container with this id (or name) exists and is running.
    fn is_running(&self, container_id: &str) -> bool;
}

impl<F: Fn(&str) -> bool> ContainerProbe for F {
    fn is_running(&self, container_id: &str) -> bool {
        self(container_id)
    }
}

/// Whether process `pid` exists (signal 0; a process of another user counts as alive).
pub fn pid_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// The process a new session records as its owner, and how the earlier sessions' processes
/// are judged alive ([`StateStore::begin_session`]).
#[derive(Clone, Copy)]
pub struct SessionProcess<'a> {
    /// The new session's devcell process id.
    pub pid: u32,
    /// Its start time ([`process_start_time`]; `None`: unknown).
    pub pid_start: Option<u64>,
    /// Whether an earlier session's process (pid, recorded start time) still runs.
    pub alive: &'a dyn Fn(u32, Option<u64>) -> bool,
}

impl SessionProcess<'static> {
    /// This process, judging the others with [`process_alive`].
    pub fn current() -> Self {
        let pid = std::process::id();
        SessionProcess {
            pid,
            pid_start: process_start_time(pid),
            alive: &process_alive,
        }
    }
}

/// Whether process `pid` is alive and, when `start` is known on both sides, is the same process
/// (same start time): a recycled pid does not count.
pub fn process_alive(pid: u32, start: Option<u64>) -> bool {
    if !pid_alive(pid) {
        return false;
    }
    match (start, process_start_time(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

/// Asks the devcell process of `session` to stop (`SIGTERM`), for `handoff --replace`: that
/// devcell then ends its agent and records the end. Returns `false`, sending nothing, when the
/// process is gone or its pid now belongs to another process (start time differs).
///
/// # Errors
/// [`StateError::Io`] when the signal cannot be sent (e.g. the process belongs to another user).
pub fn terminate(session: &Session) -> Result<bool, StateError> {
    if !process_alive(session.pid, session.pid_start) {
        return Ok(false);
    }
    let Some(pid) = i32::try_from(session.pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return Ok(false);
    };
    match rustix::process::kill_process(pid, rustix::process::Signal::TERM) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::SRCH => Ok(false),
        Err(e) => Err(StateError::Io {
            path: PathBuf::from(format!("/proc/{}", session.pid)),
            source: e.into(),
        }),
    }
}

/// A process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22); `None` when
/// unavailable (not Linux, process gone, unreadable).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the command name (field 2) is in parentheses and may contain spaces or `)`
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The status of `session`, asking `probe` about its container and `alive` about its process
/// (pid and recorded start time; [`process_alive`] is the real check).
pub fn session_status(
    session: &Session,
    probe: &dyn ContainerProbe,
    alive: &dyn Fn(u32, Option<u64>) -> bool,
) -> SessionStatus {
    if session.ended_at.is_some() || session.outcome.is_some() {
        return SessionStatus::Ended;
    }
    if !alive(session.pid, session.pid_start) {
        return SessionStatus::Stale;
    }
    match &session.container_id {
        Some(id) if !probe.is_running(id) => SessionStatus::Stale,
        _ => SessionStatus::Live,
    }
}

/// The key of a canonical workspace root: the first 32 hex digits of the SHA-256 of its path
/// bytes.
fn key_of(canonical: &Path) -> String {
    let digest = Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..16])
}

/// The key of a workspace root (canonicalised first, so `./w` and `/abs/w` agree).
///
/// # Errors
/// [`StateError::Io`] when the root does not exist.
pub fn workspace_key(root: &Path) -> Result<String, StateError> {
    Ok(key_of(&canonical(root)?))
}

fn canonical(root: &Path) -> Result<PathBuf, StateError> {
    std::fs::canonicalize(root).map_err(|source| StateError::Io {
        path: root.to_path_buf(),
        source,
    })
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A problem in the stored state, for `devcell doctor`; each has a code, a message and a fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFinding {
    /// A session without a recorded end whose devcell is gone or whose container stopped.
    StaleSession {
        /// The workspace root.
        workspace: PathBuf,
        /// The session (boxed: a session is much larger than the other findings).
        session: Box<Session>,
    },
    /// State for a workspace folder that no longer exists (its container may be orphaned).
    WorkspaceGone {
        /// The recorded workspace root.
        workspace: PathBuf,
        /// The state key (for [`StateStore::remove_key`]).
        key: String,
        /// The state file.
        state_file: PathBuf,
        /// The recorded container, if any.
        container_id: Option<String>,
    },
    /// A state file that cannot be parsed.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        message: String,
    },
}

impl StateFinding {
    /// A stable snake_case code: `stale_session`, `workspace_gone`, `corrupt_state`.
    pub fn code(&self) -> &'static str {
        match self {
            StateFinding::StaleSession { .. } => "stale_session",
            StateFinding::WorkspaceGone { .. } => "workspace_gone",
            StateFinding::Corrupt { .. } => "corrupt_state",
        }
    }

    /// What is wrong, in words.
    pub fn message(&self) -> String {
        self.words().0
    }

    /// How to fix it, in words.
    pub fn fix(&self) -> String {
        self.words().1
    }

    /// What is wrong and how to fix it, written side by side so each finding's pair stays
    /// consistent.
    fn words(&self) -> (String, String) {
        match self {
            StateFinding::StaleSession { workspace, session } => (
                format!(
                    "handoff session `{}` (agent `{}`) in `{}` never recorded an end: its devcell (pid {}) is gone or its container stopped",
                    session.id,
                    session.agent,
                    workspace.display(),
                    session.pid
                ),
                format!(
                    "run `devcell status --workspace-folder {}`; the next handoff closes the session as abandoned",
                    workspace.display()
                ),
            ),
            StateFinding::WorkspaceGone {
                workspace,
                container_id: Some(id),
                state_file,
                ..
            } => (
                format!(
                    "workspace `{}` no longer exists but its container `{id}` is still recorded",
                    workspace.display()
                ),
                format!(
                    "remove the orphaned container (`docker rm -f {id}`) and the state file `{}`",
                    state_file.display()
                ),
            ),
            StateFinding::WorkspaceGone {
                workspace,
                container_id: None,
                state_file,
                ..
            } => (
                format!("workspace `{}` no longer exists", workspace.display()),
                format!("remove the state file `{}`", state_file.display()),
            ),
            StateFinding::Corrupt { path, message } => (
                format!("handoff state `{}` is corrupt: {message}", path.display()),
                format!(
                    "move `{}` away; devcell starts fresh state without it",
                    path.display()
                ),
            ),
        }
    }
}

/// How many sessions a workspace's state keeps: beyond it the oldest *ended* sessions are
/// dropped (their log files stay).
pub const MAX_SESSIONS: usize = 100;

fn prune_sessions(sessions: &mut Vec<Session>) {
    let mut excess = sessions.len().saturating_sub(MAX_SESSIONS);
    sessions.retain(|s| {
        if excess > 0 && s.outcome.is_some() {
            excess -= 1;
            false
        } else {
            true
        }
    });
}

/// The session [`StateStore::begin_session`] begins.
#[derive(Debug, Clone, Copy)]
pub struct NewSession<'a> {
    /// The agent's configured name.
    pub agent: &'a str,
    /// Where the agent runs: a host session never has a container (the workspace's recorded
    /// one is not copied in).
    pub runtime: AgentRuntime,
    /// The session's container, when already known (else, in a container, the workspace's
    /// recorded one).
    pub container_id: Option<&'a str>,
    /// Whether a live session (outside the group) is replaced rather than refusing this one.
    pub replace: bool,
    /// The handoff group the session belongs to (spec-note 0525).
    pub group: Option<&'a str>,
}

impl<'a> NewSession<'a> {
    /// A session of `agent` in a container (`container_id` when already known), in no group.
    pub fn in_container(agent: &'a str, container_id: Option<&'a str>, replace: bool) -> Self {
        NewSession {
            agent,
            runtime: AgentRuntime::Container,
            container_id,
            replace,
            group: None,
        }
    }

    /// A session of `agent` run on the host (`handoff --runtime host`): no container.
    pub fn on_host(agent: &'a str, replace: bool) -> Self {
        NewSession {
            runtime: AgentRuntime::Host,
            ..Self::in_container(agent, None, replace)
        }
    }
}

/// What [`StateStore::begin_session`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStart {
    /// The new session (already saved).
    pub session: Session,
    /// Stale sessions that were closed as abandoned.
    pub abandoned: Vec<Session>,
    /// The live session that was replaced (`replace` was true); the caller stops its agent.
    pub replaced: Option<Session>,
}

/// A fact recorded on a session once it has begun ([`StateStore::record_fact`]).
#[derive(Debug, Clone)]
pub enum SessionFact {
    /// The network its container has (`none`, `allowlist`, `default`).
    Network(String),
    /// The hash of its environment record (spec-note 0520).
    Environment(String),
    /// Its mail channel (spec-note 0532): when it opens, then with its counts when it closes.
    Mail(Box<crate::handoff::door::ChannelRecord>),
}

/// The handoff state store rooted at one folder.
#[derive(Debug, Clone)]
pub struct StateStore {
    root: PathBuf,
}

impl StateStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The default root ([`state_folder::default_root`]).
    pub fn default_root() -> Option<PathBuf> {
        state_folder::default_root()
    }

    /// A store at [`StateStore::default_root`].
    ///
    /// # Errors
    /// [`StateError::NoStateDir`] when no home folder is known.
    pub fn open_default() -> Result<Self, StateError> {
        Self::default_root()
            .map(Self::new)
            .ok_or(StateError::NoStateDir)
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/workspaces/<key>.json` for a workspace root.
    ///
    /// # Errors
    /// [`StateError::Io`] when the root does not exist.
    pub fn state_path(&self, workspace_root: &Path) -> Result<PathBuf, StateError> {
        Ok(self.state_path_for_key(&workspace_key(workspace_root)?))
    }

    fn state_path_for_key(&self, key: &str) -> PathBuf {
        self.root.join("workspaces").join(format!("{key}.json"))
    }

    /// `<root>/logs/<session>.log`.
    pub fn log_path(&self, session_id: &str) -> PathBuf {
        self.root.join("logs").join(format!("{session_id}.log"))
    }

    /// Creates (or truncates) a session's log file, mode `0600`, and returns it for writing.
    ///
    /// # Errors
    /// [`StateError::Io`].
    /// The log keeps at most [`LOG_CAP`] bytes of the agent's output ([`SessionLog`]).
    pub fn create_log(&self, session_id: &str) -> Result<SessionLog, StateError> {
        let path = self.log_path(session_id);
        self.ensure_dir(&self.root.join("logs"))?;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map(|file| SessionLog::new(file, LOG_CAP))
            .map_err(|source| StateError::Io { path, source })
    }

    /// Loads a workspace's state; `None` when devcell has none.
    ///
    /// # Errors
    /// [`StateError::Io`], [`StateError::Corrupt`].
    pub fn load(&self, workspace_root: &Path) -> Result<Option<WorkspaceState>, StateError> {
        self.load_path(&self.state_path(workspace_root)?)
    }

    fn load_path(&self, path: &Path) -> Result<Option<WorkspaceState>, StateError> {
        match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|source| StateError::Corrupt {
                        path: path.to_path_buf(),
                        source,
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Every workspace's state (for `doctor`), sorted by workspace path. Corrupt files are
    /// returned as errors in the second list rather than failing the whole listing.
    ///
    /// # Errors
    /// [`StateError::Io`] when the folder cannot be listed.
    pub fn list(&self) -> Result<(Vec<WorkspaceState>, Vec<StateError>), StateError> {
        let dir = self.root.join("workspaces");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((vec![], vec![])),
            Err(source) => return Err(StateError::Io { path: dir, source }),
        };
        let mut states = Vec::new();
        let mut errors = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| StateError::Io {
                path: dir.clone(),
                source,
            })?;
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match self.load_path(&path) {
                Ok(Some(s)) => states.push(s),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        states.sort_by(|a, b| a.workspace.cmp(&b.workspace));
        Ok((states, errors))
    }

    /// The workspace's state with each session's [`SessionStatus`] (for `status`); `None` when
    /// devcell has no state for it.
    ///
    /// # Errors
    /// [`StateError::Io`], [`StateError::Corrupt`].
    pub fn status(
        &self,
        workspace_root: &Path,
        probe: &dyn ContainerProbe,
    ) -> Result<Option<(WorkspaceState, Vec<SessionStatus>)>, StateError> {
        Ok(self.load(workspace_root)?.map(|state| {
            let statuses = state
                .sessions
                .iter()
                .map(|s| session_status(s, probe, &process_alive))
                .collect();
            (state, statuses)
        }))
    }

    /// Stored-state problems for `doctor`: stale sessions, workspaces whose folder is gone, and
    /// corrupt files. Pure inspection: nothing is changed.
    ///
    /// # Errors
    /// [`StateError::Io`] when the state folder cannot be listed.
    pub fn findings(
        &self,
        probe: &dyn ContainerProbe,
        alive: &dyn Fn(u32, Option<u64>) -> bool,
    ) -> Result<Vec<StateFinding>, StateError> {
        let (states, errors) = self.list()?;
        let mut out = Vec::new();
        for state in states {
            if !state.workspace.is_dir() {
                out.push(StateFinding::WorkspaceGone {
                    workspace: state.workspace.clone(),
                    key: state.key.clone(),
                    state_file: self.state_path_for_key(&state.key),
                    container_id: state.container_id.clone(),
                });
            }
            for session in &state.sessions {
                if session_status(session, probe, alive) == SessionStatus::Stale {
                    out.push(StateFinding::StaleSession {
                        workspace: state.workspace.clone(),
                        session: Box::new(session.clone()),
                    });
                }
            }
        }
        for e in errors {
            if let StateError::Corrupt { path, source } = e {
                out.push(StateFinding::Corrupt {
                    path,
                    message: source.to_string(),
                });
            }
        }
        Ok(out)
    }

    /// Removes the state (and lock) of the workspace with this key, e.g. after its folder is
    /// gone. Logs are kept. Removing absent state is not an error.
    ///
    /// # Errors
    /// [`StateError::Io`].
    pub fn remove_key(&self, key: &str) -> Result<(), StateError> {
        let dir = self.root.join("workspaces");
        for path in [
            dir.join(format!("{key}.json")),
            dir.join(format!("{key}.lock")),
        ] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(StateError::Io { path, source }),
            }
        }
        Ok(())
    }

    /// Runs `f` on the workspace's state (fresh when absent) under the workspace lock and saves
    /// the result atomically when `f` succeeds.
    ///
    /// # Errors
    /// [`StateError::Io`], [`StateError::Corrupt`], or `f`'s error.
    pub fn update<R>(
        &self,
        workspace_root: &Path,
        f: impl FnOnce(&mut WorkspaceState) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        let root = canonical(workspace_root)?;
        let key = key_of(&root);
        let dir = self.root.join("workspaces");
        self.ensure_dir(&dir)?;
        let lock_path = dir.join(format!("{key}.lock"));
        let lock =
            crate::ops::state_folder::lock_file(&lock_path).map_err(|source| StateError::Io {
                path: lock_path.clone(),
                source,
            })?;
        let path = self.state_path_for_key(&key);
        let loaded = self.load_path(&path)?;
        let existed = loaded.is_some();
        let mut state = loaded.unwrap_or_else(|| WorkspaceState::new(root.clone()));
        let result = f(&mut state)?;
        // nothing recorded for a workspace devcell never saw: leave no file behind
        if existed || state != WorkspaceState::new(root) {
            self.save_to(&path, &state)?;
        }
        drop(lock); // closing the file releases the flock
        Ok(result)
    }

    /// [`StateStore::update`] of session `session_id` alone: `f` changes its record.
    ///
    /// # Errors
    /// [`StateError::NoSuchSession`], [`StateError::Io`], [`StateError::Corrupt`].
    fn update_session(
        &self,
        workspace_root: &Path,
        session_id: &str,
        f: impl FnOnce(&mut Session),
    ) -> Result<(), StateError> {
        self.update(workspace_root, |state| {
            f(state.session_mut(session_id)?);
            Ok(())
        })
    }

    fn save_to(&self, path: &Path, state: &WorkspaceState) -> Result<(), StateError> {
        let dir = path.parent().unwrap_or(&self.root);
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut bytes = serde_json::to_vec_pretty(state).map_err(|source| StateError::Corrupt {
            path: path.to_path_buf(),
            source,
        })?;
        bytes.push(b'\n');
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(dir)
            .map_err(io)?;
        tmp.write_all(&bytes).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }

    fn ensure_dir(&self, dir: &Path) -> Result<(), StateError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| StateError::Io {
                path: dir.to_path_buf(),
                source,
            })
    }

    /// Starts session `new` in the workspace, recording `process` (for real use
    /// [`SessionProcess::current`]) and the container id if already known.
    ///
    /// Unended sessions are examined first: a [`SessionStatus::Live`] one refuses the new
    /// session with [`StateError::SessionActive`] unless `new.replace` (then it is closed as
    /// `replaced` and returned); a stale one is closed as `abandoned`. A live session of the
    /// new one's handoff group (spec-note 0525) neither refuses nor is replaced: the group's
    /// members run side by side in its container.
    ///
    /// # Errors
    /// [`StateError::SessionActive`], [`StateError::Io`], [`StateError::Corrupt`].
    pub fn begin_session(
        &self,
        workspace_root: &Path,
        new: NewSession<'_>,
        probe: &dyn ContainerProbe,
        process: SessionProcess<'_>,
    ) -> Result<SessionStart, StateError> {
        let NewSession {
            agent,
            runtime,
            container_id,
            replace,
            group,
        } = new;
        let SessionProcess {
            pid,
            pid_start,
            alive,
        } = process;
        let started = chrono::Utc::now();
        let base = format!("{}-{pid}", started.format("%Y%m%dT%H%M%SZ"));
        self.update(workspace_root, |state| {
            let mut id = base.clone();
            let mut n = 1;
            while state.sessions.iter().any(|s| s.id == id) {
                n += 1;
                id = format!("{base}-{n}");
            }
            let mut abandoned = Vec::new();
            let mut replaced = None;
            for s in state.sessions.iter_mut() {
                let status = session_status(s, probe, alive);
                let same_group = group.is_some() && s.group.as_deref() == group;
                match status {
                    SessionStatus::Ended => {}
                    SessionStatus::Live if same_group => {}
                    SessionStatus::Live if !replace => {
                        return Err(StateError::SessionActive {
                            session: Box::new(s.clone()),
                        });
                    }
                    SessionStatus::Live => {
                        s.ended_at = Some(now());
                        s.outcome = Some(SessionOutcome::Replaced { by: id.clone() });
                        replaced = Some(s.clone());
                    }
                    SessionStatus::Stale => {
                        s.ended_at = Some(now());
                        s.outcome = Some(SessionOutcome::Abandoned);
                        abandoned.push(s.clone());
                    }
                }
            }
            let container_id = match runtime {
                AgentRuntime::Container => container_id
                    .map(str::to_string)
                    .or_else(|| state.container_id.clone()),
                AgentRuntime::Host => None,
            };
            let session = Session {
                log: self.log_path(&id),
                id,
                agent: agent.to_string(),
                pid,
                pid_start,
                container_id,
                started_at: started.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                runtime,
                group: group.map(str::to_string),
                ..Session::default()
            };
            state.sessions.push(session.clone());
            prune_sessions(&mut state.sessions);
            Ok(SessionStart {
                session,
                abandoned,
                replaced,
            })
        })
    }

    /// Records the workspace's container and image (after `up`), and on the session `session_id`
    /// when given.
    ///
    /// # Errors
    /// [`StateError::NoSuchSession`], [`StateError::Io`], [`StateError::Corrupt`].
    pub fn set_container(
        &self,
        workspace_root: &Path,
        session_id: Option<&str>,
        container_id: &str,
        image: Option<&str>,
    ) -> Result<(), StateError> {
        self.update(workspace_root, |state| {
            state.container_id = Some(container_id.to_string());
            if let Some(image) = image {
                state.image = Some(image.to_string());
            }
            if let Some(id) = session_id {
                state.session_mut(id)?.container_id = Some(container_id.to_string());
            }
            Ok(())
        })
    }

    /// Records `fact` on session `session_id`, once it has begun.
    ///
    /// # Errors
    /// [`StateError::NoSuchSession`], [`StateError::Io`], [`StateError::Corrupt`].
    pub fn record_fact(
        &self,
        workspace_root: &Path,
        session_id: &str,
        fact: SessionFact,
    ) -> Result<(), StateError> {
        self.update_session(workspace_root, session_id, |s| match fact {
            SessionFact::Network(network) => s.network = Some(network),
            SessionFact::Environment(hash) => s.environment = Some(hash),
            SessionFact::Mail(channel) => s.mail = Some(channel),
        })
    }

    /// Records the workspace's `.git` entries (at the start of a handoff).
    ///
    /// # Errors
    /// [`StateError::Io`], [`StateError::Corrupt`].
    pub fn set_git_identity(
        &self,
        workspace_root: &Path,
        identity: crate::handoff::git_identity::GitIdentity,
    ) -> Result<(), StateError> {
        self.update(workspace_root, |state| {
            // what appeared since the last baseline is remembered as created until accepted,
            // and forgotten once gone (attack M8)
            if let Some(before) = &state.git_identity {
                state
                    .created_git
                    .extend(crate::handoff::git_identity::created_since(
                        before, &identity,
                    ));
            }
            state
                .created_git
                .retain(|rel| identity.entries.contains_key(rel));
            state.git_identity = Some(identity);
            Ok(())
        })
    }

    /// The created git entries of the workspace at `workspace_root` not yet accepted
    /// ([`crate::handoff::git_identity::CreatedGits`]); each one `allow` accepts
    /// (`created-git:<path>`, as the user config and the command line give them) is put into
    /// the baseline as it is now and forgotten as created, once and for all.
    ///
    /// # Errors
    /// [`StateError::Io`], [`StateError::Corrupt`].
    pub fn created_gits<S: AsRef<str>>(
        &self,
        workspace_root: &Path,
        allow: &[S],
    ) -> Result<crate::handoff::git_identity::CreatedGits, StateError> {
        let Some(state) = self.load(workspace_root)? else {
            return Ok(Default::default());
        };
        let accepted: Vec<String> = allow
            .iter()
            .filter_map(|a| a.as_ref().strip_prefix("created-git:"))
            .map(|p| p.trim_end_matches('/').to_string())
            .collect();
        let created = |s: &WorkspaceState| crate::handoff::git_identity::CreatedGits {
            baseline: s
                .git_identity
                .as_ref()
                .map(|i| i.entries.keys().cloned().collect()),
            recorded: s.created_git.clone(),
        };
        let root = canonical(workspace_root)?;
        let now = created(&state);
        let taken: Vec<&String> = accepted.iter().filter(|r| now.is_created(r)).collect();
        if taken.is_empty() {
            return Ok(now);
        }
        self.update(workspace_root, |state| {
            for rel in &taken {
                state.created_git.remove(*rel);
                let path = root.join(rel);
                if let Some(identity) = state.git_identity.as_mut()
                    && path.symlink_metadata().is_ok()
                {
                    identity.entries.insert(
                        (*rel).clone(),
                        crate::handoff::git_identity::entry_now(&path),
                    );
                }
            }
            Ok(created(state))
        })
    }

    /// Records the fetch-backs of a session (appended to what it has).
    ///
    /// # Errors
    /// [`StateError::Io`], [`StateError::Corrupt`], an unknown session.
    pub fn add_git(
        &self,
        workspace_root: &Path,
        session_id: &str,
        git: Vec<RepoFetchBack>,
    ) -> Result<(), StateError> {
        if git.is_empty() {
            return Ok(());
        }
        self.update_session(workspace_root, session_id, |s| s.git.extend(git))
    }

    /// Forgets the workspace's container (after `delete`); sessions are kept as history.
    ///
    /// # Errors
    /// [`StateError::Io`], [`StateError::Corrupt`].
    pub fn clear_container(&self, workspace_root: &Path) -> Result<(), StateError> {
        self.update(workspace_root, |state| {
            state.container_id = None;
            Ok(())
        })
    }

    /// Records how session `session_id` ended, stamped now, and returns it. A session already
    /// closed by another devcell as `replaced` or `abandoned` gets its real outcome; any other
    /// recorded end is kept.
    ///
    /// # Errors
    /// [`StateError::NoSuchSession`], [`StateError::Io`], [`StateError::Corrupt`].
    pub fn end_session(
        &self,
        workspace_root: &Path,
        session_id: &str,
        outcome: SessionOutcome,
    ) -> Result<Session, StateError> {
        self.end_session_with(workspace_root, session_id, outcome, None)
    }

    /// [`StateStore::end_session`] that also records the session's egress summary.
    ///
    /// # Errors
    /// As [`StateStore::end_session`].
    pub fn end_session_with(
        &self,
        workspace_root: &Path,
        session_id: &str,
        outcome: SessionOutcome,
        egress: Option<crate::ops::egress::EgressSummary>,
    ) -> Result<Session, StateError> {
        self.update(workspace_root, |state| {
            let s = state.session_mut(session_id)?;
            let overwritable = matches!(
                s.outcome,
                None | Some(SessionOutcome::Replaced { .. }) | Some(SessionOutcome::Abandoned)
            );
            if overwritable {
                s.ended_at = Some(now());
                s.outcome = Some(outcome);
            }
            if egress.is_some() {
                s.egress = egress.map(Box::new);
            }
            Ok(s.clone())
        })
    }
}

#[cfg(test)]
mod tests;

/// The most of an agent's output a session log keeps (bytes): an agent printing without end
/// must not fill the host's disk (issue 25, class 6; spec-note 0425).
pub const LOG_CAP: u64 = 64 << 20;

/// A session's log file with a byte budget: what is written past the cap is counted and
/// dropped, after one marker line saying so. devcell's own lines ([`SessionLog::note`]) are
/// always written (each is short, and there are a handful per session).
#[derive(Debug)]
pub struct SessionLog {
    file: File,
    cap: u64,
    written: u64,
    dropped: u64,
}

impl SessionLog {
    /// `file` keeping at most `cap` bytes of output.
    pub fn new(file: File, cap: u64) -> SessionLog {
        SessionLog {
            file,
            cap,
            written: 0,
            dropped: 0,
        }
    }

    /// Bytes of output dropped past the cap so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Writes one line of devcell's own, past the cap too.
    pub fn note(&mut self, line: &str) {
        use std::io::Write as _;
        let _ = writeln!(self.file, "{line}");
    }
}

impl std::io::Write for SessionLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = usize::try_from(self.cap.saturating_sub(self.written)).unwrap_or(usize::MAX);
        let kept = buf.len().min(room);
        if kept > 0 {
            self.file.write_all(&buf[..kept])?;
            self.written += kept as u64;
        }
        if kept < buf.len() {
            if self.dropped == 0 {
                let _ = write!(
                    self.file,
                    "\n# devcell: the log reached its cap of {} MiB; the rest of the agent's output is not kept\n",
                    self.cap >> 20
                );
            }
            self.dropped += (buf.len() - kept) as u64;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}
