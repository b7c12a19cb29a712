//! Shared helpers for integration tests: run the real `devcell` binary on fixtures; Docker
//! engine helpers in [`docker`].

#![allow(dead_code)]

pub mod docker;

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

/// The repository root (where `fixtures/` lives).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    repo().join("fixtures").join(rel)
}

/// A `devcell` command with a clean, fixed environment (`HOME`, `USER`, `PATH` only).
pub fn devcell() -> Command {
    let mut cmd = Command::cargo_bin("devcell").expect("devcell binary is built");
    cmd.env_clear()
        .env("HOME", "/home/tester")
        .env("USER", "tester")
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd
}

/// Runs `devcell read-configuration --workspace-folder <ws> <extra…>`.
pub fn read_configuration(ws: &Path, extra: &[&str]) -> Output {
    devcell()
        .arg("read-configuration")
        .arg("--workspace-folder")
        .arg(ws)
        .args(extra)
        .output()
        .expect("devcell runs")
}

/// Parses the single JSON line on stdout of a successful run, failing with stderr otherwise.
pub fn stdout_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "devcell failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().count(),
        1,
        "expected one line on stdout: {text}"
    );
    serde_json::from_str(&text).expect("stdout is JSON")
}

/// Asserts a failed run: exit code 1, nothing on stdout, no panic; returns stderr.
pub fn assert_failed(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit 1; stderr: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "expected no stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "devcell panicked: {stderr}");
    stderr
}

pub mod engine;
