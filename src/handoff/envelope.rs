//! The machine output of devcell's own commands (`handoff`, `status`, `doctor`, `delete`,
//! `handoff --plan`) under `--format json`: exactly one [`Envelope`] on stdout.
//!
//! These commands are devcell's, not the Dev Container spec's: `up`, `build`, `exec`,
//! `read-configuration` keep `@devcontainers/cli`'s `{"outcome": …}` results. The envelope is:
//!
//! ```json
//! {"ok": false, "schemaVersion": 1,
//!  "error": {"code": "session_active", "message": "…", "details": {"session": "…"}},
//!  "warnings": [{"code": "stale_session", "message": "…"}],
//!  "next_actions": [{"description": "replace the running session",
//!                    "command": ["devcell", "handoff", "--replace", "…"]}]}
//! ```
//!
//! `result` is present exactly when `ok` is true, `error` exactly when it is false.
//! `next_actions[].command` is an argv array (never a shell string) or `null` when the action is
//! not a command (e.g. "edit your config file").
//!
//! # Error codes and exit codes
//!
//! Each [`ErrorCode`] has a stable string and a documented process exit code (spec note
//! `spec-notes/0163-envelope-error-codes.md` holds the same table; a test keeps them equal):
//!
//! | code | exit | meaning |
//! |---|---|---|
//! | (success) | 0 | `ok: true` |
//! | `internal` | 1 | a bug or an unexpected I/O failure |
//! | `invalid_argument` | 2 | a flag or argument is wrong (clap usage errors also exit 2) |
//! | `below_min_score` | 3 | `audit --min-score N`: the score is below N (the report is in `details`) |
//! | `unhealthy` | 4 | `doctor` reported an error-level finding, the engine unreachable included (the report is in `details`) |
//! | `config_invalid` | 10 | `devcontainer.json` or devcell's `config.toml` is invalid |
//! | `not_found` | 11 | a workspace, agent, repository, container or session does not exist |
//! | `permission_required` | 12 | the config asks for something the user has not granted |
//! | `engine_unavailable` | 13 | no container engine is reachable |
//! | `build_failed` | 14 | the image or a Feature failed to build |
//! | `container_failed` | 15 | the container could not be created or started |
//! | `hook_failed` | 16 | a lifecycle hook exited non-zero |
//! | `session_active` | 17 | a handoff session is already live for the workspace |
//! | `environment_drift` | 18 | `up`/`build --environment FILE`: an input no longer matches the record (`details.differences`) |
//! | `agent_failed` | agent's | the agent exited non-zero: its own code, or 128 + N for signal N |
//!
//! `agent_failed` passes the agent's status through (as `exec` does), so its exit code may
//! coincide with another row; the envelope's `error.code` is authoritative.

use serde::{Deserialize, Serialize};

/// The envelope's error codes (defined in `diagnostics`, below the operations that return them).
pub use crate::diagnostics::ErrorCode;

/// The envelope's schema version (`schemaVersion`). Bumped on incompatible changes only.
pub const SCHEMA_VERSION: u32 = 1;

/// One `--format json` answer of a devcell-specific command.
///
/// Build it with [`Envelope::success`] or [`Envelope::failure`]; `T` is the command's result
/// type (serialised under `result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// `true` when the command did what it was asked.
    pub ok: bool,
    /// Always [`SCHEMA_VERSION`].
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    /// The command's result; present exactly when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    /// Why it failed; present exactly when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// Non-fatal findings (always present, possibly empty).
    #[serde(default)]
    pub warnings: Vec<EnvelopeWarning>,
    /// What the caller can do next (always present, possibly empty).
    #[serde(default)]
    pub next_actions: Vec<NextAction>,
}

impl<T> Envelope<T> {
    /// A successful envelope carrying `result`.
    pub fn success(result: T) -> Self {
        Self {
            ok: true,
            schema_version: SCHEMA_VERSION,
            result: Some(result),
            error: None,
            warnings: Vec::new(),
            next_actions: Vec::new(),
        }
    }

    /// A failed envelope carrying `error`.
    pub fn failure(error: ErrorBody) -> Self {
        Self {
            ok: false,
            schema_version: SCHEMA_VERSION,
            result: None,
            error: Some(error),
            warnings: Vec::new(),
            next_actions: Vec::new(),
        }
    }

    /// Adds a warning (builder style).
    pub fn with_warning(mut self, code: impl Into<String>, message: impl Into<String>) -> Self {
        self.warnings.push(EnvelopeWarning {
            code: code.into(),
            message: message.into(),
        });
        self
    }

    /// Adds a next action (builder style).
    pub fn with_next_action(mut self, action: NextAction) -> Self {
        self.next_actions.push(action);
        self
    }

    /// The process exit code for this envelope: 0 when `ok`, else the error's
    /// ([`ErrorBody::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        match (&self.error, self.ok) {
            (_, true) => 0,
            (Some(e), false) => e.exit_code(),
            (None, false) => ErrorCode::Internal.exit_code(),
        }
    }
}

/// `error` of a failed envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable machine code.
    pub code: ErrorCode,
    /// Human message (lowercase start, no trailing period), the same text stderr shows.
    pub message: String,
    /// Code-specific structured data (an object; `{}` when there is none). For `agent_failed`:
    /// `{"exitCode": n}` or `{"signal": n}`; for `session_active`: the live session.
    #[serde(default = "empty_object")]
    pub details: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl ErrorBody {
    /// An error with empty `details`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: empty_object(),
        }
    }

    /// Replaces `details` (builder style).
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    /// The exit code: the code's table value, except `agent_failed`, which passes the agent's
    /// status through from `details` (`exitCode` n → n, `signal` n → 128 + n), falling back to
    /// 1 when neither is present or usable (0 or out of 1..=255).
    pub fn exit_code(&self) -> i32 {
        if self.code == ErrorCode::AgentFailed {
            let exit = self.details.get("exitCode").and_then(|v| v.as_i64());
            let signal = self.details.get("signal").and_then(|v| v.as_i64());
            let code = match (exit, signal) {
                (Some(n), _) => n,
                (None, Some(s)) => 128 + s,
                (None, None) => 1,
            };
            return if (1..=255).contains(&code) {
                code as i32
            } else {
                1
            };
        }
        self.code.exit_code()
    }
}

/// A non-fatal finding in `warnings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeWarning {
    /// A short snake_case identifier (e.g. `stale_session`, `relative_gitdir`).
    pub code: String,
    /// Human text.
    pub message: String,
}

/// One of `next_actions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    /// What the action does, in words.
    pub description: String,
    /// The argv to run it, or `None` (`null`) when it is not a command.
    pub command: Option<Vec<String>>,
}

impl NextAction {
    /// An action run by `argv`.
    pub fn command<I, S>(description: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            description: description.into(),
            command: Some(argv.into_iter().map(Into::into).collect()),
        }
    }

    /// An action that is not a command.
    pub fn manual(description: impl Into<String>) -> Self {
        Self {
            description: description.into(),
            command: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn success_has_result_and_no_error() {
        let env = Envelope::success(json!({"containerId": "abc"}));
        let v = serde_json::to_value(&env).unwrap();
        assert_eq!(
            v,
            json!({"ok": true, "schemaVersion": 1, "result": {"containerId": "abc"},
                   "warnings": [], "next_actions": []})
        );
        assert_eq!(env.exit_code(), 0);
    }

    #[test]
    fn failure_has_error_and_no_result_and_keeps_key_order() {
        let env: Envelope<()> = Envelope::failure(
            ErrorBody::new(ErrorCode::SessionActive, "a handoff session is live")
                .with_details(json!({"session": "s1"})),
        )
        .with_warning("stale_session", "an older session was abandoned")
        .with_next_action(NextAction::command(
            "replace it",
            ["devcell", "handoff", "--replace"],
        ))
        .with_next_action(NextAction::manual("wait for it to end"));
        let text = serde_json::to_string(&env).unwrap();
        assert_eq!(
            text,
            r#"{"ok":false,"schemaVersion":1,"error":{"code":"session_active","message":"a handoff session is live","details":{"session":"s1"}},"warnings":[{"code":"stale_session","message":"an older session was abandoned"}],"next_actions":[{"description":"replace it","command":["devcell","handoff","--replace"]},{"description":"wait for it to end","command":null}]}"#
        );
        assert_eq!(env.exit_code(), 17);
        let back: Envelope<()> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn error_without_details_serialises_an_empty_object() {
        let v = serde_json::to_value(ErrorBody::new(ErrorCode::NotFound, "no such agent")).unwrap();
        assert_eq!(v["details"], json!({}));
        let back: ErrorBody =
            serde_json::from_value(json!({"code": "not_found", "message": "m"})).unwrap();
        assert_eq!(back.details, json!({}));
    }

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut strings = std::collections::HashSet::new();
        let mut exits = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                json!(code.as_str()),
                "{code:?}"
            );
            assert_eq!(code.as_str().parse::<ErrorCode>().unwrap(), code);
            assert!(strings.insert(code.as_str()));
            if code != ErrorCode::AgentFailed {
                assert!(exits.insert(code.exit_code()), "duplicate exit for {code}");
                assert_ne!(code.exit_code(), 0);
            }
        }
        assert!("nope".parse::<ErrorCode>().unwrap_err().contains("`nope`"));
    }

    #[test]
    fn agent_failed_passes_the_agent_status_through() {
        let exit = |d| ErrorBody::new(ErrorCode::AgentFailed, "agent failed").with_details(d);
        assert_eq!(exit(json!({"exitCode": 3})).exit_code(), 3);
        assert_eq!(exit(json!({"signal": 9})).exit_code(), 137);
        assert_eq!(exit(json!({})).exit_code(), 1);
        assert_eq!(exit(json!({"exitCode": 0})).exit_code(), 1);
        assert_eq!(exit(json!({"exitCode": 300})).exit_code(), 1);
    }

    /// The table in the module docs and in the spec note must match the code.
    #[test]
    fn documented_tables_match_the_codes() {
        let sources = [
            include_str!("envelope.rs"),
            include_str!("../../spec-notes/0163-envelope-error-codes.md"),
        ];
        for source in sources {
            for code in ErrorCode::ALL {
                let expected = if code == ErrorCode::AgentFailed {
                    "agent's".to_string()
                } else {
                    code.exit_code().to_string()
                };
                let row = format!("| `{}` | {} |", code.as_str(), expected);
                assert!(
                    source.contains(&row),
                    "documentation lacks the row starting `{row}`"
                );
            }
        }
    }
}
