//! What devcontainer.json's Dockerfile asks of the builder, judged like a Compose service's
//! build (spec-note 0612; [`security::dockerfile`]): its text (`RUN --network=host`,
//! `RUN --security=insecure`, cache mounts, a `# syntax=` frontend) with the configuration's
//! other requests, before anything runs ([`text_requests`]); its base images' `ONBUILD`
//! triggers right before the build, each base pulled first ([`onbuild_requests`]). The base
//! images' inspection ([`triggered_bases`]) is the one the Compose build uses too.

use crate::engine::{BuildRequest, Engine};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::progress::Reporter;
use crate::security::build_stages::base_images;
use crate::security::dockerfile::{Built, read_dockerfile};
use crate::security::{self, Grants, PermissionRequest, SecurityProfile};

/// The text of the Dockerfile `request` builds, when the profile judges it (`hardened`) and it
/// can be read where devcell will read it: judged in the workspace first
/// (as `permissions::confine_build` judges it; one outside it is refused by the build unless
/// granted), read without following links and bounded. `None` otherwise (the build of a
/// missing or unreadable one fails: [`judged_bytes`]). With the Dockerfile as the requests
/// name it (relative to the workspace folder when inside it). Read once per configuration
/// ([`crate::ops::load::DockerfileRead`]): the same text each call.
pub(crate) fn judged_text(
    loaded: &LoadedConfiguration,
    request: &BuildRequest,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Option<(String, String)> {
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return None;
    }
    once_read(loaded, request, grants)
}

/// [`judged_text`] whatever the profile: the first read of the configuration's Dockerfile
/// with `grants`, or that read again.
fn once_read(
    loaded: &LoadedConfiguration,
    request: &BuildRequest,
    grants: &Grants,
) -> Option<(String, String)> {
    let written = std::path::absolute(&request.dockerfile).unwrap_or(request.dockerfile.clone());
    let mut read = loaded
        .dockerfile_read
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((path, text)) = read.as_ref()
        && *path == written
    {
        return text.clone();
    }
    let text = read_judged_text(loaded, request, grants);
    // the first read is the one every later use gets (another path is read, never kept)
    if read.is_none() {
        *read = Some((written, text.clone()));
    }
    text
}

/// The Dockerfile's content a hardened build of `request` (`confine`: the grants of a profile
/// that judges it, `None` under `reference`) packs: exactly the text [`judged_text`] judged
/// (attack O3, spec-note 0655); `None` under `reference` (the build reads the file). Called
/// with the request as [`crate::ops::dockerfile::build_request`] makes it, before its paths
/// are resolved again for the build.
///
/// Errors: [`OpsError::Engine`] ([`crate::engine::EngineError::BuildContext`]) when the
/// Dockerfile could not be read (or was not there) when devcell judged it: what is there now
/// was never judged.
pub(crate) fn judged_bytes(
    loaded: &LoadedConfiguration,
    request: &BuildRequest,
    confine: Option<&Grants>,
) -> Result<Option<Vec<u8>>> {
    let Some(grants) = confine else {
        return Ok(None);
    };
    match once_read(loaded, request, grants) {
        Some((_, text)) => Ok(Some(text.into_bytes())),
        None => Err(OpsError::Engine(crate::engine::EngineError::BuildContext {
            path: request.dockerfile.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the Dockerfile could not be read (missing, a link, not a regular file, too large) when devcell judged it, and devcell builds only the Dockerfile it judged; check it is a file in the workspace and run the command again",
            ),
        })),
    }
}

/// [`judged_text`]'s read of the file.
fn read_judged_text(
    loaded: &LoadedConfiguration,
    request: &BuildRequest,
    grants: &Grants,
) -> Option<(String, String)> {
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
