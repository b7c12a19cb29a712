//! Hostile repositories: see `super`. Text the repository or its container controls never
//! reaches the user's terminal as a control sequence (spec-note 0434): a property name in a
//! warning, the offending line of an error, a repository folder name in `status`.

use std::path::Path;
use std::process::Output;

use crate::support::{self, docker::BUSYBOX_IMAGE, engine::docker, hostile::HostileRepo};

/// A clipboard write (OSC 52), a title change, "hide everything after this" (SGR 8), a line
/// erase after a carriage return, a C1 CSI and a right-to-left override: what a terminal acts on.
const HOSTILE: &str =
    "\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}\u{1b}]0;t\u{7}\u{1b}[8m\r\u{1b}[2K\u{9b}6n\u{202e}";

/// The same as a JSON string's content (`\uXXXX` escapes).
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap();
    quoted[1..quoted.len() - 1].to_string()
}

/// The first character of `bytes` (as UTF-8) a terminal acts on, with its offset.
fn first_control(bytes: &[u8]) -> Option<(usize, char)> {
    String::from_utf8_lossy(bytes)
        .char_indices()
        .find(|(_, c)| {
            matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
}

/// Fails when stdout or stderr of `out` carries a control character; `what` names the run.
fn assert_printable(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if let Some((at, c)) = first_control(bytes) {
            panic!(
                "{what}: {stream} carries {c:?} at byte {at}: {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn run(ws: &Path, args: &[&str]) -> Output {
    support::devcell()
        .args(args)
        .arg("--workspace-folder")
        .arg(ws)
        .output()
        .expect("devcell runs")
}

#[test]
fn repository_text_reaches_the_terminal_without_control_sequences() {
    // A property name devcell warns about (the warning and the offending line).
    let repo = HostileRepo::new();
    repo.config(&format!(
        "{{\n  \"image\": \"{BUSYBOX_IMAGE}\",\n  \"{}x\": 1\n}}\n",
        json_escaped(HOSTILE)
    ))
    .commit();
    let out = run(repo.path(), &["read-configuration"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown property"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("\\u{1b}]52;c;"), "{}", stderr(&out));
    assert_printable("read-configuration's warning", &out);

    // Raw control bytes in the file itself, on the line an error shows.
    let raw = HostileRepo::new();
    raw.config(&format!(
        "{{\n  \"image\": \"{BUSYBOX_IMAGE}\", {HOSTILE} ]\n}}\n"
    ))
    .commit();
    let out = run(raw.path(), &["read-configuration"]);
    assert!(!out.status.success(), "a syntax error: {}", stderr(&out));
    assert_printable("read-configuration's syntax error", &out);

    // A repository folder name, as a container in a multi-repository workspace can make one.
    let multi = tempfile::tempdir().unwrap();
    let child = multi.path().join(format!("r{HOSTILE}"));
    std::fs::create_dir(&child).unwrap();
    support::git::git(&child, &["init", "-q"]);
    support::git::git(&child, &["commit", "-q", "--allow-empty", "-m", "x"]);
    let out = run(multi.path(), &["status"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("repo r\\u{1b}]52;c;"), "{stdout}");
    assert_printable("status", &out);

    // `up`'s warnings and its refusal: printed before anything is created.
    if !support::docker::engine_ready(
        "repository_text_reaches_the_terminal_without_control_sequences",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let refused = HostileRepo::new();
    refused
        .config(&format!(
            "{{\n  \"image\": \"{BUSYBOX_IMAGE}\",\n  \"privileged\": true,\n  \"{}x\": 1\n}}\n",
            json_escaped(HOSTILE)
        ))
        .commit();
    let out = run(refused.path(), &["up"]);
    assert!(
        !out.status.success(),
        "privileged is refused: {}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("privileged"), "{}", stderr(&out));
    assert_printable("up's refusal", &out);
    let folder = refused.path().canonicalize().unwrap();
    let (ok, ids) = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label=devcontainer.local_folder={}", folder.display()),
    ]);
    assert!(ok && ids.trim().is_empty(), "no container: {ids}");
}
