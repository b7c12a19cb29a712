//! Lifecycle steps beyond the spec's hooks (issue 29 item 5, spec-note 0538): agent-runner's
//! two phases, read from the configuration's `customizations.devcell`:
//!
//! - `afterStart`: once per container, after it started (a new container runs them again);
//! - `onWorkspaceCreate`: once per host workspace, whatever container runs them (a changed
//!   list runs again).
//!
//! Each is a command string or a list of them, run in order with `sh -c` in the container as
//! the remote user (numeric under `hardened`), in the workspace folder, with the agent's
//! environment but none of its secrets; the first failure stops the handoff before the agent
//! starts, and no marker is written (the next handoff tries again).
//!
//! The markers are devcell's own, in its state folder (`<state>/steps/<workspace key>/`),
//! never in the workspace tree (which the agent writes) nor in the container (which a new
//! container does not have). Two handoffs of one workspace (a group's members) take the
//! folder's lock ([`lock`]) around the steps: the second waits until the first has run them,
//! then finds the markers. A lock records its holder (pid, the process's start time, when it
//! was taken); one whose holder is gone, or held longer than [`STALE_AFTER`], is taken over and
//! the takeover is said.
//!
//! A step never runs on the host: the configuration cannot name one (an agent-runner
//! `target: host` step is a `host-command` request of `env import`, spec-note 0523).

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::engine::{Engine, ExecInput, ExecOutput, ExecRequest};
use crate::ops::error::ProductError;
use crate::progress::{Event, Reporter};

/// `customizations.devcell.afterStart`.
pub const AFTER_START: &str = "afterStart";
/// `customizations.devcell.onWorkspaceCreate`.
pub const ON_WORKSPACE_CREATE: &str = "onWorkspaceCreate";

/// How long a lock may be held before another handoff takes it over even though its holder
/// still runs (a step hung in the container).
pub const STALE_AFTER: Duration = Duration::from_secs(60 * 60);

/// How often a waiting handoff looks at the lock again.
const POLL: Duration = Duration::from_millis(100);

/// Lines of a failed step's output kept in the error.
const TAIL_LINES: usize = 20;

/// The steps of a configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steps {
    /// `afterStart`: once per container.
    pub after_start: Vec<String>,
    /// `onWorkspaceCreate`: once per host workspace.
    pub on_workspace_create: Vec<String>,
}

impl Steps {
    /// The steps of `configuration` (`customizations.devcell.afterStart` and
    /// `.onWorkspaceCreate`: a string is one command, a list is several).
    ///
    /// Errors: [`StepError::Invalid`] for any other value.
    pub fn of(configuration: &Value) -> Result<Self, StepError> {
        let read = |name: &str| -> Result<Vec<String>, StepError> {
            let invalid = |found: &str| StepError::Invalid {
                property: format!("customizations.devcell.{name}"),
                found: found.to_string(),
            };
            match configuration.pointer(&format!("/customizations/devcell/{name}")) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::String(one)) => Ok(vec![one.clone()]),
                Some(Value::Array(all)) => all
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| invalid("a list holding a non-string"))
                    })
                    .collect(),
                Some(_) => Err(invalid("neither a string nor a list of strings")),
            }
        };
        Ok(Steps {
            after_start: read(AFTER_START)?,
            on_workspace_create: read(ON_WORKSPACE_CREATE)?,
        })
    }

    /// Whether there is no step at all.
    pub fn is_empty(&self) -> bool {
        self.after_start.is_empty() && self.on_workspace_create.is_empty()
    }
}

/// A step that could not be read or run, or whose markers and lock could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// A property is not a command or a list of commands.
    #[error("`{property}`: expected a command string or a list of command strings, found {found}")]
    Invalid {
        /// The property path.
        property: String,
        /// What was found.
        found: String,
    },
    /// A step exited non-zero (or could not be run): the agent was not started.
    #[error("`{phase}` step {number} (`{command}`) failed with exit code {exit_code}")]
    Failed {
        /// `afterStart` or `onWorkspaceCreate`.
        phase: &'static str,
        /// 1-based.
        number: usize,
        /// The command.
        command: String,
        /// Its exit code (-1: it could not be run).
        exit_code: i64,
        /// Its output's last lines.
        output_tail: Vec<String>,
    },
    /// The steps' lock or markers in devcell's state folder.
    #[error("cannot keep the lifecycle steps' records in `{}`", path.display())]
    State {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ProductError for StepError {
    fn code(&self) -> crate::diagnostics::ErrorCode {
        match self {
            StepError::Invalid { .. } => crate::diagnostics::ErrorCode::ConfigInvalid,
            StepError::Failed { .. } => crate::diagnostics::ErrorCode::HookFailed,
            StepError::State { .. } => crate::diagnostics::ErrorCode::Internal,
        }
    }

    fn details(&self) -> Value {
        match self {
            StepError::Failed {
                phase,
                number,
                exit_code,
                output_tail,
                ..
            } => serde_json::json!({
                "phase": phase, "step": number, "exitCode": exit_code, "outputTail": output_tail,
            }),
            _ => serde_json::json!({}),
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            StepError::Failed { .. } => Some(
                "fix the step in `customizations.devcell` and hand off again: no marker was written, so it runs again".into(),
            ),
            StepError::Invalid { .. } => Some(
                "give a command string or a list of command strings, run with `sh -c` in the container".into(),
            ),
            StepError::State { .. } => None,
        }
    }
}

/// Who holds a steps lock: the lock file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// The holding devcell's process id.
    pub pid: u32,
    /// Its start time ([`crate::handoff::state::process_start_time`]): a recycled pid is
    /// another process.
    pub pid_start: Option<u64>,
    /// When it took the lock, in seconds since the Unix epoch.
    pub taken_at: u64,
    /// Which taking this is (two threads of one process are two holders).
    pub token: String,
}

impl Holder {
    /// This process, now.
    pub fn current() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        Holder {
            pid,
            pid_start: crate::handoff::state::process_start_time(pid),
            taken_at: unix_now(),
            token: format!("{pid}-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
        }
    }
}

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How a lock is judged stale: whether a holder's process still runs, the clock, the bound.
#[derive(Clone, Copy)]
pub struct LockRules {
    /// Whether process (pid, start time) runs ([`crate::handoff::state::process_alive`]).
    pub alive: fn(u32, Option<u64>) -> bool,
    /// Seconds since the Unix epoch.
    pub now: fn() -> u64,
    /// A lock held longer is taken over ([`STALE_AFTER`]).
    pub stale_after: Duration,
}

impl Default for LockRules {
    fn default() -> Self {
        LockRules {
            alive: crate::handoff::state::process_alive,
            now: unix_now,
            stale_after: STALE_AFTER,
        }
    }
}

/// Why a lock was taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// Its holder's process is gone (a killed devcell).
    Gone,
    /// It was held longer than the bound.
    Expired,
    /// Its record could not be read.
    Unreadable,
}

/// A lock taken over from a stale holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The former holder (`None`: unreadable).
    pub holder: Option<Holder>,
    /// Why.
    pub reason: Stale,
}

impl Takeover {
    /// The sentence a handoff shows.
    pub fn sentence(&self) -> String {
        let who = self.holder.as_ref().map_or_else(
            || "an unreadable holder".to_string(),
            |h| {
                format!(
                    "devcell process {} (since {}s after the epoch)",
                    h.pid, h.taken_at
                )
            },
        );
        let why = match self.reason {
            Stale::Gone => "its process is gone",
            Stale::Expired => "it was held longer than the bound",
            Stale::Unreadable => "its record could not be read",
        };
        format!("took over the lifecycle steps' lock of {who}: {why}")
    }
}

/// A held steps lock; dropping it lets the lock go (its record is removed if it is still
/// this holder's).
#[derive(Debug)]
pub struct StepLock {
    record: PathBuf,
    guard: PathBuf,
    holder: Holder,
}

impl Drop for StepLock {
    fn drop(&mut self) {
        let Ok(_guard) = crate::ops::state_folder::lock_file(&self.guard) else {
            return;
        };
        if read_holder(&self.record).ok().flatten().as_ref() == Some(&self.holder) {
            let _ = std::fs::remove_file(&self.record);
        }
    }
}

/// The holder recorded in `record` (`Ok(None)`: no record; `Err`: unreadable).
fn read_holder(record: &Path) -> Result<Option<Holder>, ()> {
    match std::fs::read(record) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|_| ()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(_) => Err(()),
    }
}

/// Takes the lock `record` for `me` if it is free or stale; else returns its live holder.
/// The judgement and the write happen under a short `flock(2)` on `<record>.guard`, so two
/// takers never both find it free or both take a stale one over.
///
/// Errors: the state folder's I/O.
pub fn try_lock(
    record: &Path,
    me: &Holder,
    rules: LockRules,
) -> std::io::Result<Result<(StepLock, Option<Takeover>), Holder>> {
    let guard = record.with_extension("guard");
    let _guard = crate::ops::state_folder::lock_file(&guard)?;
    let takeover = match read_holder(record) {
        Ok(None) => None,
        Err(()) => Some(Takeover {
            holder: None,
            reason: Stale::Unreadable,
        }),
        Ok(Some(h)) => {
            let age = (rules.now)().saturating_sub(h.taken_at);
            if !(rules.alive)(h.pid, h.pid_start) {
                Some(Takeover {
                    holder: Some(h),
                    reason: Stale::Gone,
                })
            } else if age > rules.stale_after.as_secs() {
                Some(Takeover {
                    holder: Some(h),
                    reason: Stale::Expired,
                })
            } else {
                return Ok(Err(h));
            }
        }
    };
    write_private(
        record,
        &serde_json::to_vec(me).map_err(std::io::Error::other)?,
    )?;
    Ok(Ok((
        StepLock {
            record: record.to_path_buf(),
            guard,
            holder: me.clone(),
        },
        takeover,
    )))
}

/// [`try_lock`] until the lock is free or stale, looking again every `poll`.
///
/// Errors: the state folder's I/O.
pub fn lock(
    record: &Path,
    me: &Holder,
    rules: LockRules,
    poll: Duration,
) -> std::io::Result<(StepLock, Option<Takeover>)> {
    loop {
        match try_lock(record, me, rules)? {
            Ok(taken) => return Ok(taken),
            Err(_) => std::thread::sleep(poll),
        }
    }
}

/// Writes `bytes` to `path` (0600) through a temporary file renamed over it.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The folder of a workspace's step records: `<state>/steps/<workspace key>` (made 0700).
///
/// Errors: [`StepError::State`].
pub fn records_folder(state_root: &Path, workspace_key: &str) -> Result<PathBuf, StepError> {
    let dir = state_root.join("steps").join(workspace_key);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir.join("containers"))
        .map_err(|source| StepError::State {
            path: dir.clone(),
            source,
        })?;
    Ok(dir)
}

/// A marker: what ran, when.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Marker {
    /// SHA-256 of the commands, each ended by a NUL.
    commands: String,
    /// The container they ran in.
    container_id: String,
    /// When they ended (RFC 3339).
    done_at: String,
}

fn digest(commands: &[String]) -> String {
    let mut h = Sha256::new();
    for c in commands {
        h.update(c.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

/// The marker file of a phase: `containers/<id>.json` for `afterStart`, `workspace.json` for
/// `onWorkspaceCreate`.
fn marker_path(dir: &Path, phase: &str, container_id: &str) -> PathBuf {
    if phase == AFTER_START {
        // a container id is hex; anything else is kept out of the path
        let safe: String = container_id
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        dir.join("containers").join(format!("{safe}.json"))
    } else {
        dir.join("workspace.json")
    }
}

/// Whether `phase`'s `commands` already ran (a marker with the same commands).
fn done(path: &Path, commands: &[String]) -> bool {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Marker>(&b).ok())
        .is_some_and(|m| m.commands == digest(commands))
}

/// Where and as whom the steps run in the container.
pub struct StepTarget<'a> {
    /// The container.
    pub container_id: &'a str,
    /// The exec user (numeric `uid:gid` under `hardened`).
    pub user: String,
    /// The workspace folder in the container.
    pub working_dir: &'a str,
    /// The environment (the agent's, without its secrets).
    pub env: IndexMap<String, String>,
    /// Where in the container a step writes its pid, so a stop of the handoff can signal it
    /// (spec-note 0658).
    pub pidfile: String,
}

/// Runs the steps not yet marked as run, under the workspace's lock in `dir`
/// ([`records_folder`]), and marks each phase once all its commands succeeded. Returns the
/// warnings to show (a takeover, also reported as it happens).
///
/// Errors: [`StepError::Failed`] at the first failing command (its phase is not marked);
/// [`StepError::State`].
pub async fn run(
    engine: &dyn Engine,
    steps: &Steps,
    target: &StepTarget<'_>,
    dir: &Path,
    reporter: &dyn Reporter,
) -> Result<Vec<String>, StepError> {
    if steps.is_empty() {
        return Ok(Vec::new());
    }
    let record = dir.join("lock.json");
    let state = |source| StepError::State {
        path: record.clone(),
        source,
    };
    let taking = record.clone();
    let (lock, takeover) = tokio::task::spawn_blocking(move || {
        lock(&taking, &Holder::current(), LockRules::default(), POLL)
    })
    .await
    .map_err(|e| state(std::io::Error::other(e)))?
    .map_err(state)?;
    let mut warnings = Vec::new();
    if let Some(t) = takeover {
        reporter.report(Event::Status(format!("warning: {}", t.sentence())));
        warnings.push(t.sentence());
    }
    for (phase, commands) in [
        (AFTER_START, &steps.after_start),
        (ON_WORKSPACE_CREATE, &steps.on_workspace_create),
    ] {
        let marker = marker_path(dir, phase, target.container_id);
        if commands.is_empty() || done(&marker, commands) {
            continue;
        }
        run_phase(engine, phase, commands, target, reporter).await?;
        let m = Marker {
            commands: digest(commands),
            container_id: target.container_id.to_string(),
            done_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        let bytes = serde_json::to_vec_pretty(&m).map_err(std::io::Error::other);
        bytes
            .and_then(|b| write_private(&marker, &b))
            .map_err(|source| StepError::State {
                path: marker.clone(),
                source,
            })?;
    }
    drop(lock);
    Ok(warnings)
}

/// Runs one phase's commands in order, stopping at the first failure.
async fn run_phase(
    engine: &dyn Engine,
    phase: &'static str,
    commands: &[String],
    target: &StepTarget<'_>,
    reporter: &dyn Reporter,
) -> Result<(), StepError> {
    for (i, command) in commands.iter().enumerate() {
        reporter.report(Event::Status(format!(
            "running `{phase}` step {} of {}",
            i + 1,
            commands.len()
        )));
        let request = ExecRequest {
            argv: step_argv(command, &target.pidfile),
            user: Some(target.user.clone()),
            env: target.env.clone(),
            working_dir: Some(target.working_dir.to_string()),
            tty: false,
        };
        let failed = |exit_code, output: String| StepError::Failed {
            phase,
            number: i + 1,
            command: command.clone(),
            exit_code,
            output_tail: tail(&output),
        };
        let result = engine
            .exec(
                target.container_id,
                &request,
                ExecInput::None,
                // the end of each stream, bounded: it is shown on failure (spec-note 0658)
                ExecOutput::CollectTail,
            )
            .await
            .map_err(|e| failed(-1, e.to_string()))?;
        if result.exit_code != 0 {
            let output = format!("{}{}", result.stdout_text(), result.stderr_text());
            let mut err = failed(result.exit_code, output);
            if result.cut
                && let StepError::Failed { output_tail, .. } = &mut err
            {
                output_tail.insert(0, CUT_NOTE.to_string());
            }
            return Err(err);
        }
    }
    Ok(())
}

/// A step's argv: `command` behind `sh -c 'echo $$ > <pidfile>; exec sh -c "$1"'`, so a stop
/// signals exactly the step's shell (which has the step's `sh -c` and `$0` as before).
fn step_argv(command: &str, pidfile: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        "echo $$ > \"$0\" 2>/dev/null; exec sh -c \"$1\"".into(),
        pidfile.into(),
        command.into(),
    ]
}

/// The first line of a failed step's output tail when its output passed the bound.
const CUT_NOTE: &str = "[devcell: the output passed 1 MiB; only its end was kept]";

/// The last [`TAIL_LINES`] lines of `output`, each cut at
/// [`crate::diagnostics::MAX_OUTPUT_LINE`] (spec-note 0658), made printable.
fn tail(output: &str) -> Vec<String> {
    use crate::diagnostics::{LINE_CUT_MARKER, MAX_OUTPUT_LINE};
    let lines: Vec<&str> = output.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|l| {
            let mut end = l.len().min(MAX_OUTPUT_LINE);
            while !l.is_char_boundary(end) {
                end -= 1;
            }
            let shown = crate::formats::terminal::printable(
                &l[..end],
                crate::formats::terminal::Sgr::Escape,
            );
            if end < l.len() {
                format!("{shown}{LINE_CUT_MARKER}")
            } else {
                shown.into_owned()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
