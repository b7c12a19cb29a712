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
