//! Every egress decision, recorded: one [`Decision`] per request the proxy saw, appended as a
//! JSON line to a file the session owns (issue 13, item 4).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::EgressError;

/// How the container asked: a `CONNECT` tunnel (TLS) or a plain HTTP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `CONNECT host:port`, then TLS whose SNI must be `host`.
    Connect,
    /// A plain HTTP request in absolute form (`GET http://host:port/path`).
    Http,
    /// A request to a configured upstream (`/upstreams/<id>/…`), sent on over TLS with the
    /// credential header the host adds (spec-note 0501).
    Upstream,
}

/// One decision of the proxy, with what flowed if it was allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// When the request arrived (UTC, RFC 3339).
    pub time: DateTime<Utc>,
    /// The destination host as the container asked for it (normalised when it parsed).
    pub destination: String,
    /// The destination port.
    pub port: u16,
    /// `connect` or `http`.
    pub via: Via,
    /// Whether the request was let through.
    pub allowed: bool,
    /// `allowed`, or the refusal's code (`not-listed`, `non-public-address`, `sni-mismatch`,
    /// `no-sni`, `not-tls`, `unresolved`, `bad-request`, `upstream-failed`).
    pub reason: String,
    /// The refusal in words, or the allowlist entry that allowed it.
    pub detail: String,
    /// The address connected to, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Bytes sent from the container to the destination.
    pub bytes_sent: u64,
    /// Bytes received from the destination.
    pub bytes_received: u64,
    /// From the request's arrival to the end of its exchange, in milliseconds.
    pub duration_ms: u64,
}

/// The most bytes of the current decision record before it is rotated (spec-note 0425): with
/// the one rotated file kept, a container that floods the proxy with refused requests fills
/// at most twice this.
pub const MAX_RECORD_BYTES: u64 = 8 << 20;

/// The longest line read back from a record (a longer one is skipped).
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Appends [`Decision`]s to a JSON-lines file, one `write` per line (safe to share between
/// connections). Bounded: past [`DecisionLog::with_limit`]'s bytes (default
/// [`MAX_RECORD_BYTES`]) the file becomes `<file>.1` (replacing the previous one, whose
/// decisions are counted in `<file>.dropped`) and a new file is started.
#[derive(Debug, Clone)]
pub struct DecisionLog {
    path: PathBuf,
    file: Arc<Mutex<(File, u64)>>,
    limit: u64,
}

impl DecisionLog {
    /// Opens (creating, mode 0600) `path` for appending.
    pub fn open(path: &Path) -> Result<DecisionLog, EgressError> {
        DecisionLog::with_limit(path, MAX_RECORD_BYTES)
    }

    /// [`DecisionLog::open`], rotating past `limit` bytes.
    pub fn with_limit(path: &Path, limit: u64) -> Result<DecisionLog, EgressError> {
        let file = open_append(path)?;
        let size = file.metadata().map_err(EgressError::io(path))?.len();
        Ok(DecisionLog {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new((file, size))),
            limit,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one decision, rotating the file first when it is full.
    pub fn append(&self, decision: &Decision) -> Result<(), EgressError> {
        let mut line = serde_json::to_vec(decision).expect("a Decision always serialises");
        line.push(b'\n');
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if guard.1 > 0 && guard.1 + line.len() as u64 > self.limit {
            self.rotate()?;
            *guard = (open_append(&self.path)?, 0);
        }
        guard
            .0
            .write_all(&line)
            .map_err(EgressError::io(&self.path))?;
        guard.1 += line.len() as u64;
        Ok(())
    }

    /// `<file>` → `<file>.1`; the decisions of the `<file>.1` it replaces are added to
    /// `<file>.dropped`.
    fn rotate(&self) -> Result<(), EgressError> {
        let old = rotated(&self.path);
        let lost = count_lines(&old);
        if lost > 0 {
            let counter = dropped_path(&self.path);
            let before = read_dropped(&self.path);
            std::fs::write(&counter, (before + lost).to_string())
                .map_err(EgressError::io(&counter))?;
        }
        std::fs::rename(&self.path, &old).map_err(EgressError::io(&self.path))
    }

    /// Calls `each` with every decision in `path`'s rotated file, then in `path`, one line at a
    /// time (never the whole file in memory); a line that does not parse, e.g. one cut short by
    /// a crash, or is longer than 64 KiB, is skipped. Returns how many decisions rotation
    /// dropped before those.
    pub fn for_each(path: &Path, mut each: impl FnMut(Decision)) -> u64 {
        for file in [rotated(path), path.to_path_buf()] {
            let Ok(f) = File::open(&file) else {
                continue;
            };
            let mut reader = std::io::BufReader::new(f);
            let mut line = Vec::new();
            while let Some(complete) = next_line(&mut reader, &mut line, MAX_LINE_BYTES) {
                if complete && let Ok(d) = serde_json::from_slice(&line) {
                    each(d);
                }
            }
        }
        read_dropped(path)
    }

    /// Every decision in `path` (and its rotated file), in memory: for tests and small records.
    pub fn read(path: &Path) -> Result<Vec<Decision>, EgressError> {
        if !path.exists() {
            return Err(EgressError::io(path)(std::io::Error::from(
                std::io::ErrorKind::NotFound,
            )));
        }
        let mut out = Vec::new();
        DecisionLog::for_each(path, |d| out.push(d));
        Ok(out)
    }
}

/// Reads the next line of `reader` into `line` (at most `max` bytes of it kept): `None` at the
/// end, `Some(false)` for a line longer than `max` (consumed whole, not kept).
fn next_line(reader: &mut impl std::io::BufRead, line: &mut Vec<u8>, max: usize) -> Option<bool> {
    line.clear();
    let mut total = 0usize;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(_) => return None,
        };
        if buf.is_empty() {
            break;
        }
        let (n, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = (max + 1).saturating_sub(line.len());
        line.extend_from_slice(&buf[..n.min(room)]);
        total += n;
        reader.consume(n);
        if done {
            break;
        }
    }
    (total > 0).then_some(line.len() <= max)
}

fn open_append(path: &Path) -> Result<File, EgressError> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(EgressError::io(path))
}

/// `<file>.1`.
fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".1");
    PathBuf::from(name)
}

/// `<file>.dropped`.
fn dropped_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".dropped");
    PathBuf::from(name)
}

fn read_dropped(path: &Path) -> u64 {
    std::fs::read_to_string(dropped_path(path))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The lines of `path` (0 when it cannot be read), read in pieces.
fn count_lines(path: &Path) -> u64 {
    use std::io::Read as _;
    let Ok(mut f) = File::open(path) else {
        return 0;
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    while let Ok(read) = f.read(&mut buf) {
        if read == 0 {
            break;
        }
        n += buf[..read].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_round_trip_through_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("egress.jsonl");
        let log = DecisionLog::open(&path).unwrap();
        let d = Decision {
            time: "2026-12-01T12:00:00Z".parse().unwrap(),
            destination: "web.test".into(),
            port: 8080,
            via: Via::Http,
            allowed: true,
            reason: "allowed".into(),
            detail: "web.test:8080=127.0.0.1".into(),
            address: Some("127.0.0.1:8080".into()),
            bytes_sent: 10,
            bytes_received: 20,
            duration_ms: 3,
        };
        log.append(&d).unwrap();
        log.append(&Decision {
            allowed: false,
            reason: "not-listed".into(),
            address: None,
            ..d.clone()
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["bytesSent"], 10);
        assert_eq!(first["durationMs"], 3);
        assert_eq!(first["via"], "http");
        let back = DecisionLog::read(&path).unwrap();
        assert_eq!(back[0], d);
        assert!(!back[1].allowed);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    fn refused(i: usize) -> Decision {
        Decision {
            time: "2026-12-01T12:00:00Z".parse().unwrap(),
            destination: format!("host-{i}.test"),
            port: 443,
            via: Via::Connect,
            allowed: false,
            reason: "not-listed".into(),
            detail: "not on the allowlist".into(),
            address: None,
            bytes_sent: 0,
            bytes_received: 0,
            duration_ms: 0,
        }
    }

    /// A flood of refused requests (issue 25, class 6): the record stays within twice its
    /// limit, and reading it back sees the kept decisions plus the count of dropped ones.
    #[test]
    fn the_record_stays_bounded_after_many_refused_decisions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.jsonl");
        let limit = 16 * 1024;
        let log = DecisionLog::with_limit(&path, limit).unwrap();
        let total = 5_000;
        for i in 0..total {
            log.append(&refused(i)).unwrap();
        }
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(size(&path) <= limit, "{}", size(&path));
        assert!(size(&rotated(&path)) <= limit);
        let mut kept = 0u64;
        let mut last = String::new();
        let dropped = DecisionLog::for_each(&path, |d| {
            kept += 1;
            last = d.destination;
        });
        assert!(dropped > 0);
        assert_eq!(kept + dropped, total as u64);
        assert_eq!(last, format!("host-{}.test", total - 1));
        // a reopened log goes on where it was
        let again = DecisionLog::with_limit(&path, limit).unwrap();
        again.append(&refused(total)).unwrap();
        assert!(size(&path) <= limit);
    }

    #[test]
    fn over_long_and_broken_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.jsonl");
        let good = serde_json::to_string(&refused(1)).unwrap();
        let long = "x".repeat(MAX_LINE_BYTES * 2);
        std::fs::write(&path, format!("{long}\n{{broken\n{good}\n")).unwrap();
        let mut seen = Vec::new();
        DecisionLog::for_each(&path, |d| seen.push(d.destination));
        assert_eq!(seen, ["host-1.test"]);
    }
}
