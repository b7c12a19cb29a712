//! The Compose services' builds under a closed network (spec-note 0442, attacks K8): the
//! decision of [`security::compose::closed_builds`] written as a Compose file devcell adds
//! after the repository's, so `docker compose build <service>` (the primary's image) and the
//! `up` that builds the other services' images both build without a network.

use serde_json::{Value, json};

use crate::ops::compose::ComposeTarget;
use crate::ops::error::Result;
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
    let path = crate::ops::compose_up::write_override(&target.project.name, &file)?;
    let mut files = target.project.files.clone();
    files.push(path);
    Ok(ComposeTarget {
        project: target.with_files(files),
        ..target
    })
}
