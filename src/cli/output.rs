//! The only place that writes to stdout/stderr: JSON results and rendered errors.
//!
//! Every text line goes through [`printable`]: the repository's and the container's text
//! (property names, the offending line, container names, hook output) never reaches the
//! terminal as a control sequence (spec-note 0434). JSON goes through
//! [`write_json`] (the same value, with the characters a terminal acts on escaped).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;

use crate::formats::terminal::{Sgr, printable, write_json};

use crate::diagnostics::{Hint, Warning};
use crate::ops::OpsError;

/// Prints one JSON value as a single line on stdout.
pub fn json(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = write_json(&mut out, value);
    let _ = writeln!(out);
}

/// Prints a line on stderr.
pub fn stderr_line(line: &str) {
    if json_event(LEVEL_INFO, line) {
        return;
    }
    eprintln!("{}", printable(line, Sgr::Escape));
}

/// Prints a line of a hook's or a build's output on stderr: its colours are kept (and reset at
/// its end), every other control sequence is shown escaped.
pub fn stderr_output_line(line: &str) {
    if json_event(LEVEL_INFO, line) {
        return;
    }
    eprintln!("{}", printable(line, Sgr::Keep));
}

/// Prints a line of a program's output on stdout (a Feature test script's): its colours are
/// kept (and reset at its end), every other control sequence is shown escaped.
pub fn stdout_output_line(line: &str) {
    println!("{}", printable(line, Sgr::Keep));
}

/// Prints a warning on stderr as `warning: …`, followed by the offending line when known.
pub fn warning(warning: &Warning) {
    if json_log() {
        let mut text = format!("warning: {warning}");
        if let Some(loc) = warning
            .location
            .as_ref()
            .filter(|l| !l.line_text.is_empty())
        {
            text.push('\n');
            text.push_str(&loc.snippet());
        }
        json_event(LEVEL_WARNING, &text);
        return;
    }
    eprintln!("warning: {}", printable(&warning.to_string(), Sgr::Escape));
    if let Some(loc) = &warning.location
        && !loc.line_text.is_empty()
    {
        eprintln!("{}", printable(&loc.snippet(), Sgr::Escape));
    }
}

/// The causes of `err` worth showing: its chain after the error itself, without a cause whose
/// text repeats the line before it (errors that wrap a source and show it as their own message).
fn causes(err: &anyhow::Error) -> Vec<String> {
    let mut shown = vec![err.to_string()];
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if shown.last() != Some(&text) {
            shown.push(text);
        }
    }
    shown.split_off(1)
}

/// Whether `--log-level` is `debug` or `trace`: a registry failure's `caused by:` chain is
/// shown then only.
static DEBUG_LOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets whether `--log-level` asks for `debug` (or `trace`).
pub fn set_debug(on: bool) {
    DEBUG_LOG.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// A registry, Feature or pull failure in one line with its hint
/// ([`crate::ops::registry_failure_line`]).
fn registry_line(err: &anyhow::Error) -> Option<(String, Option<String>)> {
    let top = err.to_string();
    let hint = err.downcast_ref::<OpsError>().and_then(Hint::hint);
    crate::ops::registry_failure_line(&top, err.as_ref(), hint)
}

/// Renders an error chain on stderr as `error: …` followed by the offending line with a caret
/// (config errors), its causes, and `hint: …` when a fix is known. A registry failure is one
/// line saying what failed ([`registry_line`]); its causes only under `--log-level debug`.
pub fn error(err: &anyhow::Error) {
    let registry = registry_line(err);
    let (line, hint) = match &registry {
        Some((line, hint)) => (line.clone(), hint.clone()),
        None => (
            err.to_string(),
            err.downcast_ref::<OpsError>().and_then(Hint::hint),
        ),
    };
    let causes = if registry.is_none() || DEBUG_LOG.load(std::sync::atomic::Ordering::Relaxed) {
        causes(err)
    } else {
        Vec::new()
    };
    if json_log() {
        let mut text = format!("error: {line}");
        for cause in causes {
            text.push_str(&format!("\n  caused by: {cause}"));
        }
        if let Some(hint) = hint {
            text.push_str(&format!("\nhint: {hint}"));
        }
        json_event(LEVEL_ERROR, &text);
        return;
    }
    eprintln!("error: {}", printable(&line, Sgr::Escape));
    let handoff = err.downcast_ref::<OpsError>();
    if let Some(loc) = handoff.and_then(OpsError::location)
        && !loc.line_text.is_empty()
    {
        eprintln!("{}", printable(&loc.snippet(), Sgr::Escape));
    }
    for cause in causes {
        eprintln!("  caused by: {}", printable(&cause, Sgr::Escape));
    }
    if let Some(hint) = hint {
        eprintln!("\nhint: {}", printable(&hint, Sgr::Escape));
    }
}

/// Prints text on stdout followed by a newline.
pub fn stdout_text(text: &str) {
    println!("{}", printable(text, Sgr::Escape));
}

// ---- `--log-format json` ----------------------------------------------------------------------

/// Whether stderr carries JSON log events (`--log-format json`).
static JSON_LOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The reference CLI's log levels (`LogLevel` in its `log.ts`).
const LEVEL_INFO: u8 = 3;
const LEVEL_WARNING: u8 = 4;
const LEVEL_ERROR: u8 = 5;

/// Switches stderr to the reference CLI's JSON log events (`--log-format json`): one line
/// `{"type":"text","level":N,"timestamp":<ms since the epoch>,"text":"…"}` per message
/// (levels: 3 info, 4 warning, 5 error).
pub fn set_log_format_json(on: bool) {
    JSON_LOG.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn json_log() -> bool {
    JSON_LOG.load(std::sync::atomic::Ordering::Relaxed)
}

/// Writes one JSON log event when `--log-format json` is on; `false` (nothing written) when
/// off.
fn json_event(level: u8, text: &str) -> bool {
    if !json_log() {
        return false;
    }
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let event =
        serde_json::json!({"type": "text", "level": level, "timestamp": timestamp, "text": text});
    let mut err = std::io::stderr().lock();
    let _ = write_json(&mut err, &event);
    let _ = writeln!(err);
    true
}

/// A [`Reporter`](crate::progress::Reporter) that writes status lines and hook/build output
/// to stderr, one line each (stdout stays reserved for the JSON result).
#[derive(Debug, Default, Clone, Copy)]
pub struct StderrReporter;

impl crate::progress::Reporter for StderrReporter {
    fn report(&self, event: crate::progress::Event) {
        match event {
            crate::progress::Event::Status(line) => {
                eprintln!("[devcell] {}", printable(&line, Sgr::Escape));
            }
            crate::progress::Event::Output(line) => eprintln!("{}", printable(&line, Sgr::Keep)),
            crate::progress::Event::Warning(warning) => self::warning(&warning),
        }
    }
}

/// Prints the reference CLI's error result on stdout
/// (`{"outcome":"error","message","description"[,"containerId"]}`) and the human rendering
/// on stderr.
pub fn error_result(err: &anyhow::Error) {
    let handoff = err.downcast_ref::<OpsError>();
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
        handoff.and_then(OpsError::container_id),
        value.as_object_mut(),
    ) {
        map.insert("containerId".into(), serde_json::json!(id));
    }
    // `--environment FILE` refused: each difference, as the envelope's details (spec-note 0520)
    if let (Some(e @ OpsError::EnvironmentDrift { .. }), Some(map)) =
        (handoff, value.as_object_mut())
    {
        map.insert("differences".into(), e.details()["differences"].clone());
    }
    json(&value);
    error(err);
}

/// Prints one devcell envelope (`--format json`) as a single line on stdout.
pub fn envelope<T: serde::Serialize>(envelope: &crate::handoff::envelope::Envelope<T>) {
    let mut out = std::io::stdout().lock();
    let _ = write_json(&mut out, envelope);
    let _ = writeln!(out);
}

/// Prints human text on stdout as it is (the answer of a devcell command in text mode).
pub fn text(text: &str) {
    let text = printable(text, Sgr::Escape);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = writeln!(out);
    }
}

/// Prints the reference CLI's boxed, bold heading (`features info`) on stdout. `title` is
/// devcell's own text, never the repository's or a registry's.
pub fn heading_box(title: &str) {
    let width = title.chars().count();
    let bar = "\u{2500}".repeat(width);
    println!(
        "\u{250C}{bar}\u{2510}\n\u{2502}\x1b[1m{title}\x1b[22m\u{2502}\n\u{2514}{bar}\u{2518}"
    );
}

/// Prints `value` as JSON indented by `indent` spaces on stdout (the reference CLI's
/// `JSON.stringify(value, undefined, indent)`), terminal-safe.
pub fn json_pretty(value: &serde_json::Value, indent: usize) {
    let spaces = " ".repeat(indent);
    let formatter = serde_json::ser::PrettyFormatter::with_indent(spaces.as_bytes());
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    let _ = serde::Serialize::serialize(value, &mut ser);
    stdout_text(&String::from_utf8_lossy(&buf));
}

#[cfg(test)]
mod cause_tests {
    #[test]
    fn a_cause_repeating_the_line_before_is_shown_once() {
        let err = anyhow::Error::new(std::io::Error::other("disk full"))
            .context("disk full")
            .context("cannot write `x`");
        assert_eq!(super::causes(&err), ["disk full"]);
        let err = anyhow::Error::new(std::io::Error::other("b")).context("a");
        assert_eq!(super::causes(&err), ["b"]);
    }
}
