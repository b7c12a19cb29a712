//! `security::compose`: the judgements of Compose models, on hand-written models and temp trees.

mod builds;
mod keys;
mod paths;
mod reach;
mod sidecars;

use std::path::Path;

use super::dockerfile::build_uses_cache_mount;
use super::*;
use crate::formats::json;
use crate::security::dockerfile::DOCKERFILE_MAX;
use crate::security::host_path::resolve;
use crate::security::policy::RequestStatus;
use std::path::PathBuf;

fn places() -> Places {
    Places {
        workspace: PathBuf::from("/w/repo"),
        home: Some(PathBuf::from("/home/dev")),
        engine_socket: Some(PathBuf::from("/var/run/docker.sock")),
    }
}

/// `m` judged under `hardened` with the grants of `--allow` flags as `refused` lists
/// them; it passes.
fn judged_with_flags(m: &Value, flags: &[&str]) -> ComposeJudgement {
    let grants = Grants::parse(
        &flags
            .iter()
            .map(|f| f.trim_start_matches("--allow "))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    judge_compose(&hardened(), m, "app", &places(), &grants).unwrap()
}

fn model(services: Value) -> Value {
    json!({"name": "p", "services": services})
}

fn hardened() -> SecurityProfile {
    SecurityProfile::default()
}

fn refused(model: &Value, grants: &Grants) -> Vec<(String, String, RequestStatus)> {
    let err = judge_compose(&hardened(), model, "app", &places(), grants).unwrap_err();
    refused_requests(&err)
        .expect("a refusal")
        .iter()
        .filter(|r| r.status != RequestStatus::Granted)
        .map(|r| {
            (
                r.permission
                    .grant_flag()
                    .unwrap_or_else(|| r.permission.to_string()),
                r.source.to_string(),
                r.status,
            )
        })
        .collect()
}

/// `places()` with a real workspace folder `ws`.
fn real_places(ws: &Path) -> Places {
    Places {
        workspace: resolve(ws).unwrap(),
        ..places()
    }
}

/// `m` judged under `reference` without grants; it passes.
fn judged_reference(m: &Value) -> ComposeJudgement {
    judge_compose(
        &SecurityProfile::Reference,
        m,
        "app",
        &places(),
        &Grants::default(),
    )
    .unwrap()
}

/// The requests `hardened` refuses in `m` without grants, as `(flag, source)`, sorted.
fn refused_sorted(m: &Value) -> Vec<(String, String)> {
    let mut got: Vec<(String, String)> = refused(m, &Grants::default())
        .into_iter()
        .map(|(flag, source, _)| (flag, source))
        .collect();
    got.sort();
    got
}

/// The requests `hardened` refuses in `m` without grants, as `flag <- source` lines, sorted.
fn refused_lines(m: &Value) -> Vec<String> {
    let mut lines: Vec<String> = refused(m, &Grants::default())
        .iter()
        .map(|(f, s, _)| format!("{f} <- {s}"))
        .collect();
    lines.sort();
    lines
}

/// A build context: a temporary folder holding a `Dockerfile` of `text`, and its path.
fn build_context(dockerfile: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Dockerfile"), dockerfile).unwrap();
    let path = dir.path().to_string_lossy().into_owned();
    (dir, path)
}
