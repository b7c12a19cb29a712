//! One handoff session as both runtimes (the container's, [`super::agent`], and the host's,
//! [`super::host`]) run it: its result, the agent's streams and stop signal, closing earlier
//! sessions, recording a failure, and pumping the agent's output into its log.

use crate::diagnostics::SecretMask;
use crate::engine::Engine;
use crate::engine::{ExecInput, ExecOutput, ExecRequest};
use crate::handoff::agents_md::AgentsMdOutcome;
use crate::handoff::context::AgentRuntime;
use crate::handoff::plan::{HandoffPlan, UNISOLATED_CODE};
use crate::handoff::state::{Session, SessionOutcome, StateStore};
use crate::lifecycle::LifecycleReport;
use crate::ops::ContainerAction;
use crate::ops::error::OpsError;
use crate::progress::{Event, Reporter};
use futures_util::{Stream, StreamExt as _};
use indexmap::IndexMap;
use serde::Serialize;
use std::collections::HashSet;
use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// What `AGENTS.md` generation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsMdReport {
    /// `created`, `exists` (left untouched) or `singleRepository` (not generated).
    pub outcome: String,
    /// The host path, when there is a file.
    pub path: Option<PathBuf>,
}

/// The result of a handoff whose agent ran (whatever its exit status).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffResult {
    /// The plan that was carried out.
    pub plan: HandoffPlan,
    /// The session as recorded at its end.
    pub session: Session,
    /// Sessions closed as abandoned when this one started.
    pub abandoned_sessions: Vec<String>,
    /// The session replaced (`--replace`).
    pub replaced_session: Option<String>,
    /// The container (`null` for the host runtime).
    pub container_id: Option<String>,
    /// Created, started or reused (`null` for the host runtime).
    pub container_action: Option<ContainerAction>,
    /// The user the agent ran as (the remote user; on the host, a uid).
    pub remote_user: String,
    /// Where the agent ran: `container` or `host`.
    pub runtime: AgentRuntime,
    /// What isolated it: `container`, or `none` on the host.
    pub isolation: String,
    /// Every permission request and what was done with it (new containers).
    pub permissions: Vec<crate::security::PermissionRequest>,
    /// The lifecycle hooks.
    pub lifecycle: LifecycleReport,
    /// The context file on the host.
    pub context_file: PathBuf,
    /// `AGENTS.md`.
    pub agents_md: AgentsMdReport,
    /// The network mode the container really has (`none` or `default`): a reused container
    /// keeps the one it was created with, whatever was asked (a warning says so).
    pub network: String,
    /// The agent's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when it was killed (exit status 128 + n).
    pub signal: Option<i32>,
    /// Non-fatal findings; for the host runtime the first is [`unisolated_warning`].
    pub warnings: Vec<String>,
    /// Those of `warnings` already shown on stderr as they were found (the configuration's
    /// own, [`crate::ops::load::report_warnings`]): not printed again at the end.
    #[serde(skip)]
    pub shown_warnings: Vec<String>,
    /// A clone task's fetch back after the agent ended (spec-note 0437); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskFetch>,
    /// A multi-repository clone task's fetch back, one per repository (`task` is then absent).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskFetch>,
    /// Under `hardened`: the set-uid/set-gid files (bits cleared) and device nodes the
    /// container left in the workspace, found once it stopped (spec-note 0400); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_id_files_and_devices: Vec<crate::security::planted::Planted>,
    /// What changed in the workspace's `.git` entries between the handoff's start and its end
    /// (`git_dir_changed`, `git_dir_created`; spec-note 0400): absent when nothing did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub git_dir_changes: Vec<crate::handoff::git_identity::GitDirChange>,
}

/// What a clone task's fetch did (spec-note 0437; made by `task::fetch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskFetch {
    /// The task.
    pub task: String,
    /// The repository (its folder name) of a multi-repository task; absent for one repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The ref written in the user's repository.
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// The task branch's commit in the clone (`null`: the branch is gone or unreadable).
    pub tip: Option<String>,
    /// The commit the ref now holds (`null`: nothing fetched yet).
    pub fetched: Option<String>,
    /// Whether this fetch moved the ref.
    pub updated: bool,
    /// The base commit.
    pub base: String,
    /// Commits on the fetched ref not in the base.
    pub ahead: Option<u64>,
    /// Commits on the user's `HEAD` not in the fetched ref (or the base, when nothing was
    /// fetched).
    pub behind: Option<u64>,
    /// The ref keeping the previously fetched commit when the agent rewrote its branch since
    /// (`refs/devcell/kept/tasks/<task>/<commit>`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    /// Why the last fetch was refused (a fetch-back bound, spec-note 0438), while the branch
    /// is not fetched; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl HandoffResult {
    /// The warnings as envelope `(code, message)` pairs: [`UNISOLATED_CODE`] for the host
    /// runtime's first, `up`'s specific codes (`workspace_not_writable`,
    /// `workspace_owner_mismatch`; [`crate::ops::users::warning_code`]), `handoff` for the
    /// others.
    pub fn coded_warnings(&self) -> Vec<(String, String)> {
        self.warnings
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let code = if i == 0 && self.runtime == AgentRuntime::Host {
                    UNISOLATED_CODE
                } else {
                    crate::ops::users::warning_code(w).unwrap_or("handoff")
                };
                (code.to_string(), w.clone())
            })
            .collect()
    }

    /// Whether the agent succeeded (exit code 0).
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// devcell's exit code: the agent's (128 + n for signal n).
    pub fn process_exit_code(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c.clamp(0, 255),
            (None, Some(s)) => (128 + s).clamp(0, 255),
            _ => 1,
        }
    }
}

/// Where the agent's streams go (the log file gets a masked copy of stdout and stderr).
pub struct AgentStreams<'a> {
    /// Fed to the agent's stdin until end of file (`None`: no stdin).
    pub stdin: Option<Box<dyn AsyncRead + Send + Unpin>>,
    /// Receives the agent's stdout (everything, with a TTY).
    pub stdout: Box<dyn AsyncWrite + Send + Unpin + 'a>,
    /// Receives the agent's stderr.
    pub stderr: Box<dyn AsyncWrite + Send + Unpin + 'a>,
}

/// The signals that ask the handoff to stop, each as its number (15 for `SIGTERM`, which is
/// also what a `--replace` by another devcell sends; 2 for `SIGINT`; 1 for `SIGHUP`). The
/// caller registers them before the handoff starts, so one that comes at any phase is seen
/// (spec-note 0425). A stream that ends stops nothing.
pub type StopSignal<'a> = Pin<Box<dyn Stream<Item = i32> + Send + 'a>>;

/// A handoff stopped by a signal before its agent ran (`session`: the session recorded as
/// `signaled`, when one had started). devcell exits with 128 + the signal.
#[derive(Debug, thiserror::Error)]
#[error("the handoff was stopped by signal {signal} before the agent started{}", session.as_deref().map(|s| format!(" (session {s} recorded as signaled)")).unwrap_or_default())]
pub struct Stopped {
    /// The signal's number.
    pub signal: i32,
    /// The session, when one had started.
    pub session: Option<String>,
}

impl crate::ops::error::ProductError for Stopped {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        crate::handoff::envelope::ErrorCode::AgentFailed
    }
    fn details(&self) -> serde_json::Value {
        serde_json::json!({"signal": self.signal, "session": self.session})
    }
    fn hint(&self) -> Option<String> {
        None
    }
}

impl Stopped {
    /// The signal of `e` when it is a [`Stopped`].
    pub fn signal_of(e: &OpsError) -> Option<i32> {
        match e {
            OpsError::Product(p) => {
                let inner: &(dyn std::error::Error + 'static) = p.0.as_ref();
                inner.downcast_ref::<Stopped>().map(|s| s.signal)
            }
            _ => None,
        }
    }
}

/// Runs `work` unless a stop signal comes first: `Err(signal)` then, and `work` is dropped
/// (the programs it waits for are killed with their process groups, spec-note 0425).
pub(super) async fn unless_stopped<T>(
    stop: &mut StopSignal<'_>,
    work: impl Future<Output = T>,
) -> Result<T, i32> {
    tokio::pin!(work);
    let mut listening = true;
    loop {
        tokio::select! {
            biased;
            signal = stop.next(), if listening => match signal {
                Some(signal) => return Err(signal),
                None => listening = false,
            },
            value = &mut work => return Ok(value),
        }
    }
}

/// Deals with the sessions [`StateStore::begin_session`] closed: an abandoned session's devcell
/// died, but its agent may still run in its container (stopped through its pid file when
/// `engine` answers; an agent left on the host by a dead devcell cannot be found); a replaced
/// session's devcell is asked to stop its agent and record its end (waited for briefly).
pub(super) async fn close_previous_sessions(
    engine: Option<&dyn Engine>,
    start: &crate::handoff::state::SessionStart,
    reporter: &dyn Reporter,
) {
    for old in start.abandoned.iter() {
        reporter.report(Event::Status(format!(
            "closing abandoned handoff session {} (its devcell, pid {}, is gone)",
            old.id, old.pid
        )));
        if let (Some(engine), Some(container)) = (engine, &old.container_id) {
            match abandoned_stop_user(engine, container).await {
                Ok(user) => {
                    stop_agent(engine, container, user.as_deref(), &pidfile_of(&old.id)).await
                }
                Err(why) => reporter.report(Event::Warning(crate::diagnostics::Warning {
                    location: None,
                    message: format!(
                        "the agent of abandoned session {} is not stopped: {why}",
                        old.id
                    ),
                })),
            }
        }
    }
    if let Some(old) = &start.replaced {
        reporter.report(Event::Status(format!(
            "replacing handoff session {} (devcell pid {})",
            old.id, old.pid
        )));
        // That devcell stops its agent and records the end; wait for it briefly.
        if crate::handoff::state::terminate(old).unwrap_or(false) {
            for _ in 0..100 {
                if !crate::handoff::state::process_alive(old.pid, old.pid_start)
                    || is_zombie(old.pid)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The user the stop of an abandoned session's agent runs as in `container`: under `hardened`
/// the numeric `uid:uid` of the remote user's uid label ([`crate::names::REMOTE_UID_LABEL`]),
/// never a name, which would give the image's program every group the image's `/etc/group`
/// lists (spec-note 0400, "the image's groups"); `None` (the container's user, as the
/// reference CLI does) outside `hardened`. The gid is the uid: a `kill` needs only the uid,
/// and `uid:gid` keeps the engine from adding groups.
///
/// Errors: why no user can be given (the container is gone or has no uid label); the stop is
/// then skipped, since the container's own stop ends the agent too.
async fn abandoned_stop_user(
    engine: &dyn Engine,
    container: &str,
) -> Result<Option<String>, String> {
    let info = match engine.inspect_container(container).await {
        Ok(Some(info)) => info,
        Ok(None) => return Err("its container is gone".into()),
        Err(e) => return Err(e.to_string()),
    };
    stop_user_of(&info)
}

/// [`abandoned_stop_user`] for an inspected container.
fn stop_user_of(info: &crate::engine::ContainerInfo) -> Result<Option<String>, String> {
    if !crate::ops::exec_user::is_hardened(info) {
        return Ok(None);
    }
    crate::names::remote_uid(&info.labels)
        .map(|uid| Some(format!("{uid}:{uid}")))
        .ok_or_else(|| "its container has no numeric remote uid to stop it as".to_string())
}

/// Records `e` as the end of session `session_id` (`failed`, with its code and its message,
/// secret values masked) and returns it.
pub(super) fn record_failure(
    store: &StateStore,
    root: &Path,
    session_id: &str,
    secrets: &IndexMap<String, String>,
    e: OpsError,
) -> OpsError {
    let _ = store.end_session(
        root,
        session_id,
        SessionOutcome::Failed {
            code: e.code().as_str().to_string(),
            message: crate::ops::secrets::mask(&e.to_string(), secrets),
        },
    );
    e
}

/// Records session `session_id` as ended by `signal` (`signaled`) and returns the
/// [`Stopped`] error for it.
pub(super) fn record_stop(
    store: &StateStore,
    root: &Path,
    session_id: &str,
    signal: i32,
) -> OpsError {
    let _ = store.end_session(root, session_id, SessionOutcome::Signaled { signal });
    Stopped {
        signal,
        session: Some(session_id.to_string()),
    }
    .into()
}

/// The report of [`agents_md::write_if_absent`].
pub(super) fn agents_md_report(outcome: AgentsMdOutcome) -> AgentsMdReport {
    match outcome {
        AgentsMdOutcome::Created(path) => AgentsMdReport {
            outcome: "created".into(),
            path: Some(path),
        },
        AgentsMdOutcome::Exists(path) => AgentsMdReport {
            outcome: "exists".into(),
            path: Some(path),
        },
        AgentsMdOutcome::SingleRepository => AgentsMdReport {
            outcome: "singleRepository".into(),
            path: None,
        },
    }
}

/// Splits an exec status into an exit code or a signal: a status in 129..=192 is taken as
/// signal `status - 128` (what a shell and the engine report for a killed process; an agent
/// that exits with such a code on purpose is indistinguishable), and so is any status after a
/// stop request above 128.
pub fn split_status(status: i32, stopped: bool) -> (Option<i32>, Option<i32>) {
    if (129..=192).contains(&status) || (stopped && status > 128) {
        (None, Some(status - 128))
    } else {
        (Some(status), None)
    }
}

/// The session's outcome from an agent's end: its signal when it has one, else its exit code,
/// else `unknown` (an end that reported neither).
pub(crate) fn outcome(exit_code: Option<i32>, signal: Option<i32>, unknown: i32) -> SessionOutcome {
    match (exit_code, signal) {
        (_, Some(signal)) => SessionOutcome::Signaled { signal },
        (Some(exit_code), None) => SessionOutcome::Exited { exit_code },
        (None, None) => SessionOutcome::Exited { exit_code: unknown },
    }
}

/// An exec's status as the session records it: its exit code or its signal
/// ([`split_status`]) and the outcome they make.
pub(crate) fn exec_outcome(
    status: i32,
    stopped: bool,
) -> (Option<i32>, Option<i32>, SessionOutcome) {
    let (exit_code, signal) = split_status(status, stopped);
    (exit_code, signal, outcome(exit_code, signal, status))
}

/// The log's last lines: how much output past the cap was dropped, and how the agent ended.
pub(crate) fn note_end(log: &Mutex<crate::handoff::state::SessionLog>, outcome: &SessionOutcome) {
    if let Ok(mut l) = log.lock() {
        let dropped = l.dropped();
        if dropped > 0 {
            l.note(&format!(
                "# devcell: {dropped} bytes of output past the cap were not kept"
            ));
        }
        l.note(&format!("# devcell: agent ended: {outcome:?}"));
    }
}

/// Whether process `pid` has exited but is not yet reaped (Linux `/proc/<pid>/stat` state `Z`).
pub(crate) fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next().map(|st| st == "Z"))
        })
        .unwrap_or(false)
}

/// Ids of the containers recorded for the workspace's sessions that are running now.
pub(super) async fn running_containers(
    engine: &dyn Engine,
    store: &StateStore,
    root: &Path,
) -> HashSet<String> {
    let mut out = HashSet::new();
    let Ok(Some(state)) = store.load(root) else {
        return out;
    };
    for id in state
        .sessions
        .iter()
        .filter(|s| s.outcome.is_none())
        .filter_map(|s| s.container_id.clone())
    {
        if let Ok(Some(info)) = engine.inspect_container(&id).await
            && info.running
        {
            out.insert(id);
        }
    }
    out
}

/// Copies `reader` to `out` and appends it to the log, secret values masked
/// ([`crate::diagnostics::StreamMask`]: a value split across reads is masked, and the work is
/// linear in the output whatever it holds, with or without newlines; spec-note 0425). What
/// cannot begin a secret value is passed on at once; with a TTY, what could is passed on too
/// when no more arrives within [`HELD_OUTPUT_WAIT`] (a prompt).
pub(super) async fn pump(
    mut reader: impl AsyncRead + Unpin,
    mut out: Box<dyn AsyncWrite + Send + Unpin + '_>,
    log: &Mutex<crate::handoff::state::SessionLog>,
    mask: &SecretMask,
    tty: bool,
) {
    let mut masker = mask.stream();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = if tty && masker.held() > 0 {
            match tokio::time::timeout(HELD_OUTPUT_WAIT, reader.read(&mut buf)).await {
                Ok(read) => read,
                Err(_) => {
                    let held = masker.flush();
                    emit(&held, &mut out, log).await;
                    continue;
                }
            }
        } else {
            reader.read(&mut buf).await
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let shown = masker.push(&buf[..n]);
        if !shown.is_empty() {
            emit(&shown, &mut out, log).await;
        }
    }
    let rest = masker.flush();
    if !rest.is_empty() {
        emit(&rest, &mut out, log).await;
    }
    let _ = out.flush().await;
}

/// How long a TTY's output that could begin a secret value is held back for more.
const HELD_OUTPUT_WAIT: Duration = Duration::from_millis(100);

/// Writes already masked output to `out` and the log.
async fn emit(
    masked: &[u8],
    out: &mut Box<dyn AsyncWrite + Send + Unpin + '_>,
    log: &Mutex<crate::handoff::state::SessionLog>,
) {
    let text = String::from_utf8_lossy(masked);
    let _ = out.write_all(text.as_bytes()).await;
    let _ = out.flush().await;
    if let Ok(mut f) = log.lock() {
        let _ = f.write_all(text.as_bytes());
    }
}

/// The agent's pid file in the container for a session.
pub(crate) fn pidfile_of(session_id: &str) -> String {
    format!("/tmp/.devcell-agent-{session_id}.pid")
}

/// The pid file in the container of a session's running lifecycle step (spec-note 0658).
pub(crate) fn step_pidfile_of(session_id: &str) -> String {
    format!("/tmp/.devcell-step-{session_id}.pid")
}

/// Sends SIGTERM to the agent through its pid file (as `user`, who owns it; `None`: the
/// container's user). Nothing happens when the file or the process is gone.
pub(crate) async fn stop_agent(
    engine: &dyn Engine,
    container: &str,
    user: Option<&str>,
    pidfile: &str,
) {
    let request = ExecRequest {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "[ -f \"$0\" ] && kill -TERM \"$(cat \"$0\")\" 2>/dev/null; rm -f \"$0\" 2>/dev/null; true".into(),
            pidfile.into(),
        ],
        user: user.map(str::to_string),
        ..ExecRequest::default()
    };
    let _ = engine
        .exec(container, &request, ExecInput::None, ExecOutput::Collect)
        .await;
}

#[cfg(test)]
mod stop_user_tests {
    use super::*;

    fn container(labels: &[(&str, &str)]) -> crate::engine::ContainerInfo {
        crate::engine::ContainerInfo {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..crate::engine::ContainerInfo::default()
        }
    }

    /// Closing an abandoned session never runs the image's `sh` by name under `hardened`
    /// (attack finding J5: by name the engine gave it the image's group `disk`).
    #[test]
    fn an_abandoned_agent_is_stopped_as_a_numeric_user_under_hardened() {
        let hardened = container(&[
            (crate::names::PROFILE_LABEL, "hardened"),
            (crate::names::REMOTE_UID_LABEL, "1000"),
        ]);
        assert_eq!(stop_user_of(&hardened), Ok(Some("1000:1000".into())));
        let no_uid = container(&[(crate::names::PROFILE_LABEL, "hardened")]);
        assert!(stop_user_of(&no_uid).is_err(), "no name fallback");
        let reference = container(&[(crate::names::PROFILE_LABEL, "reference")]);
        assert_eq!(stop_user_of(&reference), Ok(None));
    }
}

#[cfg(test)]
mod pump_tests {
    use super::*;

    /// 8 MiB without a newline, a secret across every 16 KiB read boundary: the pump finishes,
    /// shows every byte once with each secret masked, and never holds more than a read and
    /// less than a value (issue 25, class 6; before, each read re-searched everything held).
    #[tokio::test]
    async fn output_without_newlines_is_masked_across_reads_in_linear_work() {
        let secret = "sekrit-0123456789";
        let mut input = vec![b'x'; 8 << 20];
        let mut at = 16 * 1024 - 5;
        let mut planted = 0;
        while at + secret.len() < input.len() {
            input[at..at + secret.len()].copy_from_slice(secret.as_bytes());
            planted += 1;
            at += 16 * 1024;
        }
        let dir = tempfile::tempdir().unwrap();
        let log = Mutex::new(crate::handoff::state::SessionLog::new(
            std::fs::File::create(dir.path().join("log")).unwrap(),
            crate::handoff::state::LOG_CAP,
        ));
        let secrets = [secret.to_string()];
        let mask = SecretMask::new(secrets.iter());
        let (shown_w, mut shown_r) = tokio::io::duplex(1 << 20);
        let reader = tokio::spawn(async move {
            let mut shown = Vec::new();
            shown_r.read_to_end(&mut shown).await.unwrap();
            shown
        });
        pump(&input[..], Box::new(shown_w), &log, &mask, false).await;
        let shown = String::from_utf8(reader.await.unwrap()).unwrap();
        let logged = std::fs::read_to_string(dir.path().join("log")).unwrap();
        assert_eq!(shown, logged);
        assert!(!shown.contains(secret));
        assert_eq!(
            shown.matches(crate::diagnostics::SECRET_MASK).count(),
            planted
        );
        assert_eq!(
            shown.len(),
            input.len() - planted * (secret.len() - crate::diagnostics::SECRET_MASK.len())
        );
        // the same stream through the masker alone: bounded memory, linear search
        let mut m = mask.stream();
        for piece in input.chunks(16 * 1024) {
            m.push(piece);
        }
        m.flush();
        let stats = m.stats();
        assert!(stats.max_pending < 16 * 1024 + secret.len(), "{stats:?}");
        assert!(stats.scanned <= 2 * input.len() as u64, "{stats:?}");
    }
}
