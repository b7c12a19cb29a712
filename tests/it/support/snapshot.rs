//! Snapshot helpers (`insta`): a [`Run`] rendered as one reviewable text (exit code, stdout with
//! JSON pretty-printed, stderr) and the filters that make it the same on every machine and run.
//!
//! Snapshots live in `tests/it/snapshots/`. CI fails on a difference (`CI=true`, insta's default
//! there: nothing is written); locally `cargo insta review` (or `INSTA_UPDATE=always`) accepts a
//! change. Every filter names what it hides: `[WORKSPACE]`, `[TMP]`, `[DIGEST]`, `[ID]`, `[TIME]`,
//! `[DURATION]`, `[PID]`, `[HOST]`.

use super::context::{Run, TestContext};

/// Renders a run: `exit: <code>`, then `--- stdout` and `--- stderr` sections (omitted when
/// empty). A stdout that is JSON (one document, or one document per line) is pretty-printed so
/// a changed field is one line of diff.
pub fn render(run: &Run) -> String {
    let mut out = format!(
        "exit: {}\n",
        run.code.map_or("signal".to_string(), |c| c.to_string())
    );
    if !run.stdout.is_empty() {
        out.push_str("--- stdout\n");
        out.push_str(&pretty(&run.stdout));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if !run.stderr.is_empty() {
        out.push_str("--- stderr\n");
        out.push_str(&pretty(&run.stderr));
    }
    out
}

/// Each line (or the whole text) that is a JSON object or array, pretty-printed; other text as is.
fn pretty(text: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text.trim())
        && (v.is_object() || v.is_array())
    {
        return serde_json::to_string_pretty(&v).expect("JSON") + "\n";
    }
    let mut out = String::new();
    for line in text.lines() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) if v.is_object() || v.is_array() => {
                out.push_str(&serde_json::to_string_pretty(&v).expect("JSON"));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// insta settings for one context: snapshots in `tests/it/snapshots/`, no source expression
/// recorded, and the filters for what varies between machines and runs.
pub fn settings(ctx: Option<&TestContext>) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/snapshots"));
    s.set_omit_expression(true);
    if let Some(ctx) = ctx {
        // The longest first: the workspace can be inside the temporary folder.
        s.add_filter(
            &regex_escape(&ctx.path().display().to_string()),
            "[WORKSPACE]",
        );
        s.add_filter(&regex_escape(&ctx.tmp().display().to_string()), "[TMP]");
        // The basename of the workspace appears in container names and labels.
        if let Some(base) = ctx.tmp().file_name().and_then(|b| b.to_str()) {
            s.add_filter(&regex_escape(base), "[TMPNAME]");
        }
    }
    s.add_filter(r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]");
    s.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[DIGEST]");
    s.add_filter(r"\b[0-9a-f]{40}\b", "[COMMIT]");
    s.add_filter(r"\b[0-9a-f]{32}\b", "[ID32]");
    // a handoff's container git directories (spec-note 0436): `<state>/git/<key>/<id>/git`
    // and `/run/devcell/git/<id>/objects`, `<id>` a hash of the repository's path
    s.add_filter(r"\b[0-9a-f]{16}/(git|objects)\b", "[ID16]/$1");
    // handoff session ids and log names: `<UTC time>-<pid>`
    s.add_filter(r"\b\d{8}T\d{6}Z-\d+\b", "[SESSION]");
    s.add_filter(r#""(pid|pidStart)": \d+"#, r#""$1": "[PID]""#);
    s.add_filter(r#""durationMs": \d+"#, r#""durationMs": "[DURATION]""#);
    s.add_filter(r"\b[0-9a-f]{64}\b", "[ID]");
    s.add_filter(r"\b[0-9a-f]{12}\b", "[ID12]");
    s.add_filter(
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
        "[TIME]",
    );
    s.add_filter(r#""timestamp": \d+"#, r#""timestamp": "[TIME]""#);
    s.add_filter(r"\b\d+(\.\d+)?\s?(ms|µs|s)\b", "[DURATION]");
    s.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]");
    s
}

fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Asserts the snapshot `name` of `run` with [`settings`] for `ctx`.
#[macro_export]
macro_rules! assert_run_snapshot {
    ($name:expr, $ctx:expr, $run:expr) => {{
        let rendered = $crate::support::snapshot::render(&$run);
        $crate::support::snapshot::settings($ctx).bind(|| {
            insta::assert_snapshot!($name, rendered);
        });
    }};
}
