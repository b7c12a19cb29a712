//! What devcontainer.json's Dockerfile asks of the builder, judged like a Compose service's
//! build (spec-note 0612; [`security::dockerfile`]): its text (`RUN --network=host`,
//! `RUN --security=insecure`, cache mounts, a `# syntax=` frontend) with the configuration's
//! other requests, before anything runs ([`text_requests`]); its base images' `ONBUILD`
//! triggers right before the build, each base pulled first ([`onbuild_requests`]). The base
//! images' inspection ([`triggered_bases`]) is the one the Compose build uses too.

use crate::engine::{BuildRequest, Engine};
use crate::ops::error::Result;
use crate::ops::load::LoadedConfiguration;
use crate::progress::Reporter;
use crate::security::build_stages::base_images;
use crate::security::dockerfile::{Built, read_dockerfile};
use crate::security::{self, Grants, PermissionRequest, SecurityProfile};

/// The text of the Dockerfile `request` builds, when the profile judges it (`hardened`) and it
/// can be read where devcell will read it: judged in the workspace first
/// (as `permissions::confine_build` judges it; one outside it is refused by the build unless
/// granted), read without following links and bounded. `None` otherwise (a missing or
/// unreadable Dockerfile fails the build, which reads it the same way). With the Dockerfile as
/// the requests name it (relative to the workspace folder when inside it).
pub(crate) fn judged_text(
    loaded: &LoadedConfiguration,
    request: &BuildRequest,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Option<(String, String)> {
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return None;
    }
    // as the build judges it (`permissions::confine_build`): where it resolves, in the
    // workspace or granted
    let places = security::host_path::Places::new(&loaded.workspace.host_mount_root, None, None);
    let written = std::path::absolute(&request.dockerfile).unwrap_or(request.dockerfile.clone());
    let confined =
        security::host_path::confine("build.dockerfile", &written, &places, grants).ok()?;
    let text = read_dockerfile(&confined).ok()??;
    let shown = request
        .dockerfile
        .strip_prefix(&loaded.workspace_folder)
        .unwrap_or(&request.dockerfile)
        .display()
        .to_string();
    Some((shown, text))
}

/// The requests of the text of devcontainer.json's Dockerfile (`request`), judged under
/// `profile` with `grants` ([`security::dockerfile::text_requests`], the `BUILDKIT_SYNTAX`
/// build argument among them): none under `reference`.
pub(crate) fn text_requests(
    loaded: &LoadedConfiguration,
    request: &BuildRequest,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Vec<PermissionRequest> {
    let Some((shown, text)) = judged_text(loaded, request, profile, grants) else {
        return Vec::new();
    };
    let args = request
        .args
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let asked = security::dockerfile::text_requests(Built::Dockerfile(&shown), &text, &args);
    security::judge(profile, asked, grants)
}

/// Each of `bases` with `ONBUILD` triggers, with them: pulled first when `pull` (what the
/// build then runs `FROM` is the image judged), else only those already on the engine.
///
/// Errors: [`crate::ops::error::OpsError::Engine`] (an inspect, a pull).
pub(crate) async fn triggered_bases(
    engine: &dyn Engine,
    bases: &[String],
    pull: Option<&dyn Reporter>,
) -> Result<Vec<(String, Vec<String>)>> {
    let mut triggered = Vec::new();
    for base in bases {
        let info = match pull {
            Some(reporter) => Some(engine.ensure_image(base, reporter).await?),
            None => engine.inspect_image(base).await?,
        };
        if let Some(info) = info.filter(|i| !i.on_build.is_empty()) {
            triggered.push((base.clone(), info.on_build));
        }
    }
    Ok(triggered)
}

/// The requests of the base images of devcontainer.json's Dockerfile (`request`) whose
/// `ONBUILD` triggers run first in its build (attacks G9): each base pulled when missing, then
/// inspected, under `hardened` (none under `reference`), right before the build.
///
/// Errors: [`crate::ops::error::OpsError::Engine`] (an inspect, a pull).
pub(crate) async fn onbuild_requests(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    request: &BuildRequest,
    (profile, grants): (&SecurityProfile, &Grants),
    reporter: &dyn Reporter,
) -> Result<Vec<PermissionRequest>> {
    let Some((shown, text)) = judged_text(loaded, request, profile, grants) else {
        return Ok(Vec::new());
    };
    let args = request
        .args
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // the classic builder builds every stage up to the target: those bases only
    let bases = base_images(
        &text,
        &args,
        request.target.as_deref(),
        security::build_stages::Reach::UpToTarget,
    );
    let asked = triggered_bases(engine, &bases, Some(reporter))
        .await?
        .into_iter()
        .map(|(image, triggers)| {
            security::dockerfile::onbuild_request(Built::Dockerfile(&shown), &image, &triggers)
        })
        .collect::<Vec<_>>();
    Ok(security::judge(profile, asked, grants))
}
