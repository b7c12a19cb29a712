//! The only place that writes to stdout/stderr: JSON results and rendered errors.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;

use crate::diagnostics::{Hint, Warning};
use crate::handoff::HandoffError;

/// Prints one JSON value as a single line on stdout.
pub fn json(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, value);
    let _ = writeln!(out);
}

/// Prints a line on stderr.
pub fn stderr_line(line: &str) {
    eprintln!("{line}");
}

/// Prints a warning on stderr as `warning: …`, followed by the offending line when known.
pub fn warning(warning: &Warning) {
    eprintln!("warning: {warning}");
    if let Some(loc) = &warning.location
        && !loc.line_text.is_empty()
    {
        eprintln!("{}", loc.snippet());
    }
}

/// Renders an error chain on stderr as `error: …` followed by the offending line with a caret
/// (config errors), its causes, and `hint: …` when a fix is known.
pub fn error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    let handoff = err.downcast_ref::<HandoffError>();
    if let Some(loc) = handoff.and_then(HandoffError::location)
        && !loc.line_text.is_empty()
    {
        eprintln!("{}", loc.snippet());
    }
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
    if let Some(hint) = handoff.and_then(Hint::hint) {
        eprintln!("\nhint: {hint}");
    }
}

/// A [`Reporter`](crate::progress::Reporter) that writes status lines and hook/build output
/// to stderr, one line each (stdout stays reserved for the JSON result).
#[derive(Debug, Default, Clone, Copy)]
pub struct StderrReporter;

impl crate::progress::Reporter for StderrReporter {
    fn report(&self, event: crate::progress::Event) {
        match event {
            crate::progress::Event::Status(line) => eprintln!("[devcell] {line}"),
            crate::progress::Event::Output(line) => eprintln!("{line}"),
        }
    }
}

/// Prints the reference CLI's error result on stdout
/// (`{"outcome":"error","message","description"[,"containerId"]}`) and the human rendering
/// on stderr.
pub fn error_result(err: &anyhow::Error) {
    let handoff = err.downcast_ref::<HandoffError>();
    let mut description: Vec<String> = err.chain().skip(1).map(ToString::to_string).collect();
    if let Some(hint) = handoff.and_then(Hint::hint) {
        description.push(format!("hint: {hint}"));
    }
    let mut value = serde_json::json!({
        "outcome": "error",
        "message": err.to_string(),
        "description": description.join("\n"),
    });
    if let (Some(id), Some(map)) = (
        handoff.and_then(HandoffError::container_id),
        value.as_object_mut(),
    ) {
        map.insert("containerId".into(), serde_json::json!(id));
    }
    json(&value);
    error(err);
}

/// Prints one devcell envelope (`--format json`) as a single line on stdout.
pub fn envelope<T: serde::Serialize>(envelope: &crate::handoff::envelope::Envelope<T>) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, envelope);
    let _ = writeln!(out);
}

/// Prints human text on stdout as it is (the answer of a devcell command in text mode).
pub fn text(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = writeln!(out);
    }
}
