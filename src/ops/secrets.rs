//! Secret values (`--secrets-file`, an agent's `env:`/`file:` references) kept out of
//! everything devcell itself shows: [`mask`] replaces each value by [`MASK`] in a text,
//! [`MaskingReporter`] does it for every progress event, and [`redact`] for an error whose
//! text would carry a value (spec-note 0240).
//!
//! The values themselves travel only in the engine's exec environment (the exec's `Env`, sent
//! over the engine's API): never in a host process's argv, the container's config or labels,
//! an image, devcell's state or logs.

use indexmap::IndexMap;
use serde_json::Value;

use crate::diagnostics::Hint;
use crate::ops::error::{OpsError, Result};
use crate::progress::{Event, Reporter};
use std::path::Path;

/// What a secret value is replaced by (the reference CLI's mask).
pub const MASK: &str = crate::diagnostics::SECRET_MASK;

/// `text` with every non-empty secret value replaced by [`MASK`], the longest value first (so
/// a value containing another is masked whole; [`crate::diagnostics::SecretMask`]).
pub fn mask(text: &str, secrets: &IndexMap<String, String>) -> String {
    crate::diagnostics::SecretMask::new(secrets.values()).apply(text)
}

/// Whether `text` contains any non-empty secret value.
pub fn contains_secret(text: &str, secrets: &IndexMap<String, String>) -> bool {
    secrets
        .values()
        .any(|v| !v.is_empty() && text.contains(v.as_str()))
}

/// Forwards events to `inner` with secret values masked ([`mask`]).
pub struct MaskingReporter<'a> {
    /// Where the masked events go.
    pub inner: &'a dyn Reporter,
    /// NAME → value.
    pub secrets: &'a IndexMap<String, String>,
}

impl Reporter for MaskingReporter<'_> {
    fn report(&self, event: Event) {
        let event = match event {
            Event::Status(text) => Event::Status(mask(&text, self.secrets)),
            Event::Output(text) => Event::Output(mask(&text, self.secrets)),
            Event::Warning(mut warning) => {
                warning.message = mask(&warning.message, self.secrets);
                if let Some(location) = &mut warning.location {
                    location.line_text = mask(&location.line_text, self.secrets);
                }
                Event::Warning(warning)
            }
        };
        self.inner.report(event);
    }
}

/// `err` as it is when neither its message, its causes nor its hint contain a secret value;
/// else [`OpsError::Redacted`] with the same error code and every value masked (the
/// message is the whole cause chain, as it would have been shown).
pub fn redact(err: OpsError, secrets: &IndexMap<String, String>) -> OpsError {
    let mut chain = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        chain.push_str(": ");
        chain.push_str(&c.to_string());
        cause = c.source();
    }
    let hint = err.hint();
    if !contains_secret(&chain, secrets)
        && !hint.as_deref().is_some_and(|h| contains_secret(h, secrets))
    {
        return err;
    }
    OpsError::Redacted {
        code: err.code(),
        message: mask(&chain, secrets),
        hint: hint.map(|h| mask(&h, secrets)),
    }
}

/// Reads a `--secrets-file`: a JSON object of string values (`{"TOKEN": "…"}`), the
/// reference CLI's format, of at most [`crate::config::jsonc::MAX_FILE_BYTES`] (a regular file
/// or a pipe such as `<(pass show x)`; a device or a FIFO nobody finishes writing is an error
/// within seconds). Names must be usable as environment variable names (non-empty, no `=` or
/// NUL); values must not contain NUL.
///
/// Errors: [`OpsError::SecretsFile`] naming the file and the key (never a value).
pub fn read_secrets_file(path: &Path) -> Result<IndexMap<String, String>> {
    let bad = |message: String| OpsError::SecretsFile {
        path: path.to_path_buf(),
        message,
    };
    // Bounded like devcontainer.json; a FIFO or device never hangs devcell (spec-note 0433).
    let text =
        crate::config::bounded::read_to_string(path, crate::config::jsonc::MAX_FILE_BYTES as u64)
            .map_err(|e| bad(e.to_string()))?;
    if text.trim().is_empty() {
        return Err(bad("the file is empty; expected a JSON object".into()));
    }
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("invalid JSON at line {}", e.line())))?;
    let Value::Object(map) = value else {
        return Err(bad("expected a JSON object".into()));
    };
    map.into_iter()
        .map(|(k, v)| {
            // An exec's environment entry is `NAME=value`: a name with `=` (or NUL) would set
            // another variable, a NUL cannot cross `execve`.
            if k.is_empty() || k.contains(['=', '\0']) {
                return Err(bad(format!(
                    "`{}` is not an environment variable name (non-empty, without `=` or NUL)",
                    k.escape_debug()
                )));
            }
            match v {
                Value::String(s) if s.contains('\0') => {
                    Err(bad(format!("the value of `{k}` contains a NUL character")))
                }
                Value::String(s) => Ok((k, s)),
                _ => Err(bad(format!("the value of `{k}` is not a string"))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Collect;

    fn secrets() -> IndexMap<String, String> {
        IndexMap::from([
            ("A".to_string(), "abc".to_string()),
            ("B".into(), "abcdef".into()),
            ("EMPTY".into(), String::new()),
        ])
    }

    #[test]
    fn masks_longest_first_and_ignores_empty_values() {
        assert_eq!(mask("x abcdef abc y", &secrets()), "x ******** ******** y");
        assert_eq!(mask("nothing here", &secrets()), "nothing here");
        assert!(contains_secret("..abc..", &secrets()));
        assert!(!contains_secret("..ab..", &secrets()));
    }

    #[test]
    fn reporter_masks_status_and_output() {
        let inner = Collect::default();
        let s = secrets();
        let r = MaskingReporter {
            inner: &inner,
            secrets: &s,
        };
        r.report(Event::Status("token abc".into()));
        r.report(Event::Output("out abcdef".into()));
        assert_eq!(
            *inner.0.lock().unwrap(),
            vec![
                Event::Status("token ********".into()),
                Event::Output("out ********".into())
            ]
        );
    }

    #[test]
    fn redact_keeps_clean_errors_and_masks_the_rest() {
        let clean = OpsError::NotRunning { id: "c1".into() };
        assert!(matches!(
            redact(clean, &secrets()),
            OpsError::NotRunning { .. }
        ));
        let leaky = OpsError::NoContainer {
            labels: "devcontainer.local_folder=/w/abcdef".into(),
            expected: false,
        };
        let code = leaky.code();
        let r = redact(leaky, &secrets());
        assert_eq!(r.code(), code);
        let text = r.to_string();
        assert!(!text.contains("abc"), "{text}");
        assert!(text.contains("/w/********"), "{text}");
        assert!(r.hint().is_some_and(|h| h.contains("devcell up")));
    }
}
