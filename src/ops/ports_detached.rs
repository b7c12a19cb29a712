//! `ports --detach`: the forwarder as a background process of its own, recorded in devcell's
//! host state folder and stopped by `ports --stop` or `down` (spec-note 0652, docs/ports.md).
//!
//! The record is devcell's: `<state>/ports/<key>.json` (folder 0700, file 0600) holds the pid
//! of the process this devcell spawned ([`std::process::Child::id`], never a number a
//! container or the forwarder printed), the container id and the forwards. A stop signals
//! that pid only while its command line still carries the record's key (a pid the kernel
//! gave to another process since is left alone).

use std::ffi::OsString;
use std::io::BufRead as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ops::error::{OpsError, Result};
use crate::ops::ports::{Forward, NotForwarded};

/// The hidden flag that makes `ports` the detached forwarder; its value is the record's key.
pub const CHILD_FLAG: &str = "--detached-record";

/// What the detached forwarder prints, as its first and only stdout line, once every port
/// listens (`Forwarding::to_json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listening {
    /// The dev container's id.
    pub container_id: String,
    /// The forwards listening.
    pub forwards: Vec<Forward>,
    /// The entries not forwarded, with why.
    pub not_forwarded: Vec<NotForwarded>,
}

/// One detached forwarder, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetachedRecord {
    /// The record's key (its file name, and the value of [`CHILD_FLAG`] in the process's
    /// command line).
    pub key: String,
    /// The pid devcell spawned.
    pub pid: u32,
    /// What it forwards.
    #[serde(flatten)]
    pub listening: Listening,
}

/// `<state>/ports`.
fn records_dir(state: &Path) -> PathBuf {
    state.join("ports")
}

/// `<state>/ports/<key>.json`.
fn record_path(state: &Path, key: &str) -> PathBuf {
    records_dir(state).join(format!("{key}.json"))
}

/// `<state>/ports/<key>.log`: the detached forwarder's stderr.
pub fn log_path(state: &Path, key: &str) -> PathBuf {
    records_dir(state).join(format!("{key}.log"))
}

fn io_error(path: &Path, e: std::io::Error) -> OpsError {
    OpsError::Unsupported {
        message: format!("cannot write devcell's state `{}`: {e}", path.display()),
        hint: None,
    }
}

/// Starts the detached forwarder: this program again with `args` (the `ports` command line
/// without `--detach`) and [`CHILD_FLAG`] `KEY`, in its own process group, stdin from
/// `/dev/null`, stderr to [`log_path`]; waits for its [`Listening`] line, then records it.
///
/// Errors: [`OpsError::Unsupported`] with the forwarder's own error (the end of its log) when
/// it exits before listening; the state folder cannot be written.
pub fn start(state: &Path, args: &[OsString]) -> Result<DetachedRecord> {
    use std::os::unix::process::CommandExt as _;
    let dir = records_dir(state);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| io_error(&dir, e))?;
    let key = crate::ops::target::creation_token("ports");
    let log = log_path(state, &key);
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log)
        .map_err(|e| io_error(&log, e))?;
    let exe = std::env::current_exe().map_err(|e| io_error(Path::new("devcell"), e))?;
    let mut command = std::process::Command::new(exe);
    crate::formats::host_tool::harden_tool(&mut command);
    let mut child = command
        .args(args)
        .arg(CHILD_FLAG)
        .arg(&key)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(log_file)
        .process_group(0)
        .spawn()
        .map_err(|e| io_error(Path::new("devcell ports"), e))?;
    let pid = child.id();
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    let Ok(listening) = serde_json::from_str::<Listening>(line.trim()) else {
        let status = child.wait().ok();
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        return Err(OpsError::Unsupported {
            message: format!(
                "the detached `ports` did not start ({}): {}",
                status.map_or_else(|| "not waited for".into(), |s| s.to_string()),
                said.trim()
            ),
            hint: None,
        });
    };
    // reaped when it ends, if this process still runs then
    std::thread::spawn(move || child.wait());
    let record = DetachedRecord {
        key,
        pid,
        listening,
    };
    write_record(state, &record)?;
    Ok(record)
}

/// Writes `record` (mode 0600, through a temporary file renamed over the record).
fn write_record(state: &Path, record: &DetachedRecord) -> Result<()> {
    let path = record_path(state, &record.key);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_vec(record).unwrap_or_default();
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &text))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| io_error(&path, e))
}

/// Every record under `state` (unreadable ones skipped), by key.
pub fn records(state: &Path) -> Vec<DetachedRecord> {
    let Ok(dir) = std::fs::read_dir(records_dir(state)) else {
        return Vec::new();
    };
    let mut all: Vec<DetachedRecord> = dir
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
        .collect();
    all.sort_by(|a, b| a.key.cmp(&b.key));
    all
}

/// Whether `pid` is still the detached forwarder of record `key`: its command line carries
/// [`CHILD_FLAG`] and `key` ([`crate::process::carries`]; an exited or reused pid does not).
pub fn is_forwarder(pid: u32, key: &str) -> bool {
    crate::process::carries(pid, &[CHILD_FLAG, key])
}

/// Removes the record (and log) of the detached forwarder `key` when it is this process's:
/// the forwarder's own end, its container stopped or removed outside `down` (spec-note 0652).
pub fn forget_own(state: &Path, key: &str) {
    let own = records(state)
        .iter()
        .any(|r| r.key == key && r.pid == std::process::id());
    if own {
        let _ = std::fs::remove_file(record_path(state, key));
        let _ = std::fs::remove_file(log_path(state, key));
    }
}

/// Stops the detached forwarders of `container_ids` (SIGTERM, SIGKILL after 2 s) and removes
/// their records and logs. Returns the pids signalled.
pub async fn stop_for_containers(state: &Path, container_ids: &[String]) -> Vec<u32> {
    let mut stopped = Vec::new();
    for record in records(state) {
        if !container_ids.contains(&record.listening.container_id) {
            continue;
        }
        if stop_pid(record.pid, &record.key).await {
            stopped.push(record.pid);
        }
        let _ = std::fs::remove_file(record_path(state, &record.key));
        let _ = std::fs::remove_file(log_path(state, &record.key));
    }
    stopped
}

/// `ports --stop`: stops the detached forwarders of the container `target` names
/// (`--container-id`, else every container carrying the id labels, running or not), as
/// [`stop_for_containers`] under the default state folder. Returns the pids signalled.
///
/// Errors: the configuration's ([`OpsError::Config`]); the engine's.
pub async fn stop(target: &crate::ops::TargetOptions) -> Result<Vec<u32>> {
    let Some(state) = crate::ops::state_folder::default_root() else {
        return Ok(Vec::new());
    };
    let engine = crate::engine::connect().await?;
    let ids: Vec<String> = match &target.container_id {
        Some(id) => vec![crate::ops::target::inspect(&*engine, id).await?.id],
        None => {
            let labels = if target.no_configuration {
                target.id_labels.iter().cloned().collect()
            } else {
                let loaded = crate::ops::target::load(target)?;
                crate::ops::target::id_labels(target, &loaded)
            };
            engine
                .find_containers(&labels)
                .await?
                .into_iter()
                .map(|c| c.id)
                .collect()
        }
    };
    Ok(stop_for_containers(&state, &ids).await)
}

/// Signals `pid` while it is the forwarder of `key` ([`crate::process::stop_carrier`]); `true`
/// when it was running.
async fn stop_pid(pid: u32, key: &str) -> bool {
    crate::process::stop_carrier(pid, &[CHILD_FLAG, key]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, pid: u32, container: &str) -> DetachedRecord {
        DetachedRecord {
            key: key.into(),
            pid,
            listening: Listening {
                container_id: container.into(),
                forwards: Vec::new(),
                not_forwarded: Vec::new(),
            },
        }
    }

    #[test]
    fn a_pid_without_the_records_key_is_never_signalled() {
        let state = tempfile::tempdir().unwrap();
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(records_dir(state.path()))
            .unwrap();
        // this test process: alive, but not a forwarder of the key
        let me = std::process::id();
        write_record(state.path(), &record("k1", me, "c1")).unwrap();
        write_record(state.path(), &record("k2", me, "c2")).unwrap();
        assert!(!is_forwarder(me, "k1"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let stopped = rt.block_on(stop_for_containers(state.path(), &["c1".to_string()]));
        assert!(stopped.is_empty(), "{stopped:?}");
        // c1's record is gone, c2's stays
        let left: Vec<String> = records(state.path()).into_iter().map(|r| r.key).collect();
        assert_eq!(left, ["k2"]);
    }

    #[test]
    fn the_record_keeps_the_spawned_pid_and_the_forwards() {
        let state = tempfile::tempdir().unwrap();
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(records_dir(state.path()))
            .unwrap();
        let r = record("k", 42, "c");
        write_record(state.path(), &r).unwrap();
        assert_eq!(records(state.path()), [r]);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(record_path(state.path(), "k"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
