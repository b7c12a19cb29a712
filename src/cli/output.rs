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

/// Prints text on stdout followed by a newline.
pub fn stdout_text(text: &str) {
    println!("{text}");
}
