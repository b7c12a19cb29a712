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

/// Appends [`Decision`]s to a JSON-lines file, one `write` per line (safe to share between
/// connections).
#[derive(Debug, Clone)]
pub struct DecisionLog {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl DecisionLog {
    /// Opens (creating, mode 0600) `path` for appending.
    pub fn open(path: &Path) -> Result<DecisionLog, EgressError> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(EgressError::io(path))?;
        Ok(DecisionLog {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new(file)),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one decision.
    pub fn append(&self, decision: &Decision) -> Result<(), EgressError> {
        let mut line = serde_json::to_vec(decision).expect("a Decision always serialises");
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(&line).map_err(EgressError::io(&self.path))
    }

    /// Reads every decision in `path` (a line that does not parse, e.g. one cut short by a
    /// crash, is skipped).
    pub fn read(path: &Path) -> Result<Vec<Decision>, EgressError> {
        let text = std::fs::read_to_string(path).map_err(EgressError::io(path))?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect())
    }
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
