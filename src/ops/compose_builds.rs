//! The Compose services' builds under a closed network (spec-note 0442, attacks K8): the
//! decision of [`security::compose::closed_builds`] written as a Compose file devcell adds
//! after the repository's, so `docker compose build <service>` (the primary's image) and the
//! `up` that builds the other services' images both build without a network.

use std::path::PathBuf;

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::ops::compose::ComposeTarget;
use crate::ops::error::{OpsError, Result};
use crate::ops::state_folder::StateFolder;
use crate::security::{self, Grants, PermissionRequest, SecurityProfile};

/// `target` with the closed-build file among its files when the project's network is `closed`
/// under `hardened` and a service builds (else `target` as it was); the services' build
/// network requests are added to `requests`.
///
/// Errors: [`crate::ops::OpsError::Security`] when a request is refused (nothing is built),
/// [`crate::ops::OpsError::Unsupported`] when the file cannot be written.
pub(crate) fn close_builds(
    target: ComposeTarget,
    (profile, grants): (&SecurityProfile, &Grants),
    closed: bool,
    requests: &mut Vec<PermissionRequest>,
) -> Result<ComposeTarget> {
    let decided = security::compose::closed_builds(profile, grants, &target.model, closed);
    if let Some(refused) = security::policy::refusal(profile, &decided.requests) {
        return Err(refused.into());
    }
    for request in decided.requests {
        if !requests.contains(&request) {
            requests.push(request);
        }
    }
    if decided.services.is_empty() {
        return Ok(target);
    }
    let mut file = json!({"services": Value::Object(decided.services)});
    crate::engine::compose::escape_interpolation(&mut file);
    let path = write_override(&target.project.name, &file)?;
    let mut files = target.project.files.clone();
    files.push(path);
    Ok(ComposeTarget {
        project: target.with_files(files),
        ..target
    })
}

/// Writes the override file into devcell's state folder
/// (`<state>/compose/<project>/docker-compose.devcell-<sha256 of content, 16 hex>.json`), where
/// it stays for the project's later `up`s (the container's config-files label names it).
///
/// Errors: [`OpsError::Unsupported`] when no state folder is known or it cannot be written.
pub(crate) fn write_override(project: &str, file: &Value) -> Result<PathBuf> {
    let failed = |message: String| OpsError::Unsupported {
        message,
        hint: Some(format!(
            "devcell keeps Compose override files in its state folder; set `{}` to a writable folder",
            crate::ops::state_folder::STATE_DIR_ENV
        )),
    };
    let store = StateFolder::open_default()
        .ok_or_else(|| failed("no state folder for the Compose override file".into()))?;
    let text = serde_json::to_vec_pretty(file).map_err(|e| failed(e.to_string()))?;
    let digest = hex::encode(sha2::Sha256::digest(&text));
    let dir = store.root().join("compose").join(project);
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("cannot create `{}`: {e}", dir.display())))?;
    let path = dir.join(format!("docker-compose.devcell-{}.json", &digest[..16]));
    std::fs::write(&path, &text)
        .map_err(|e| failed(format!("cannot write `{}`: {e}", path.display())))?;
    Ok(path)
}
