//! The only place that writes to stdout/stderr: JSON results and rendered errors.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;

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

/// Renders an error chain on stderr as `error: …` followed by its causes.
pub fn error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}
