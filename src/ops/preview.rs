//! `--preview-permissions`: what `up` would ask of the grants, without creating anything.

use crate::build::final_user::{FinalUser, final_user};
use crate::config::metadata;
use crate::config::model::ConfigKind;
use crate::config::substitute;
use crate::engine::{BuildRequest, Engine, ImageInfo};
use crate::ops::dockerfile::build_request;
use crate::ops::entries::{
    existing_entries, has_features, image_entries, preview_feature_entries, substitute_entries,
};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::ops::permissions::{
    ContainerJudgement, check_existing, confine_build, confine_grants, container_requests,
    early_requests, host_commands, judged_options, security_choice,
};
use crate::ops::target::{expected_workspace, find_container, id_labels, load_for};
use crate::ops::users::image_passwd;
use crate::security::{self, Grants, PermissionRequest, SecurityProfile, host_path};
use crate::settings::NetworkMode;
use serde_json::Value;

/// What a handoff's (or `up`'s) container would ask for, judged as `up` judges it, without
/// building, pulling or creating anything (`handoff --plan`; spec-note 0320).
#[derive(Debug, Default)]
pub(crate) struct PermissionPreview {
    /// Every request with its status (`refused` ones included), as `up` would report them.
    pub(crate) requests: Vec<PermissionRequest>,
    /// What could not be judged without a pull or a build (the image's `USER` and metadata
    /// label, the Features' metadata), one sentence each.
    pub(crate) notes: Vec<String>,
    /// The refusal `up` would return (`permission_required`), when any request is not granted.
    pub(crate) refusal: Option<security::SecurityError>,
    /// The host variables the configuration would send into the container (spec-note 0440).
    pub(crate) host_env: Vec<security::host_env::HostEnvUse>,
    /// The user devcell would provide for a root image with no user named (spec-note 0188).
    pub(crate) provided_user: Option<String>,
}

/// The plan's note when devcell provides its own user (spec-note 0188).
pub(crate) fn provided_user_note(user: &str) -> String {
    format!(
        "user provided by devcell: the image runs as root and the configuration names no user, so the container, its hooks and `exec` run as `{user}`, a non-root user devcell adds in its uid layer (with the workspace owner's ids where `updateRemoteUserUID` applies); set `remoteUser` to choose a user, or `remoteUser: root` with `--allow root` for root"
    )
}

/// Evaluates the permission requests of the container `up` would create (or re-checks the one
/// it would reuse, spec-note 0270) with the same policy ([`security::apply`] /
/// [`security::check_reuse`]) and the same inputs: devcontainer.json, the Features' metadata
/// (resolved, metadata only), the image's metadata label and `USER` when the image is already
/// on the engine (a Dockerfile image: its last build, when there is one), and `opts.mounts`.
/// What needs a pull or a build is named in [`PermissionPreview::notes`], and requests
/// attributed to an unknown image `USER` are left out.
///
/// Errors: [`OpsError::Config`]; [`OpsError::Security`] for a bad profile or grant;
/// [`OpsError::Engine`] / [`OpsError::Unsupported`] for a config whose container
/// request cannot be built (bad `runArgs`, mounts).
pub(crate) async fn preview_permissions(
    engine: Option<&dyn Engine>,
    opts: &UpOptions,
) -> Result<PermissionPreview> {
    let choice = security_choice(&opts.security, &opts.settings)?;
    let mut preview = preview_container(engine, opts, &choice).await?;
    let crate::security::Choice {
        profile, grants, ..
    } = choice;
    if matches!(
        preview.refusal,
        Some(security::SecurityError::PathOutside { .. })
    ) {
        // the configuration itself is refused: its commands are not read
        return Ok(preview);
    }
    let loaded = load_for(&opts.target, confine_grants(&profile, &grants))?;
    let (_, host) = host_commands(&loaded, &profile, &grants)?;
    if host.is_empty() {
        return Ok(preview);
    }
    preview.refusal =
        security::refusal_of_all(&profile, &host, preview.refusal.take(), &preview.requests);
    preview.requests.splice(0..0, host);
    Ok(preview)
}

/// [`preview_permissions`] for the container alone, under the user's `choice`.
pub(crate) async fn preview_container(
    engine: Option<&dyn Engine>,
    opts: &UpOptions,
    choice: &crate::security::Choice,
) -> Result<PermissionPreview> {
    let crate::security::Choice {
        profile,
        grants,
        network,
        ..
    } = choice;
    let network = *network;
    let mut preview = PermissionPreview::default();
    // a config file outside the workspace is refused by `up` before anything else
    let loaded = match load_for(&opts.target, confine_grants(profile, grants)) {
        Err(OpsError::Security(e @ security::SecurityError::PathOutside { .. })) => {
            preview.refusal = Some(e);
            return Ok(preview);
        }
        other => other?,
    };
    let kind = loaded.typed.kind();
    if matches!(kind, ConfigKind::Compose | ConfigKind::None) {
        // `up` refuses these itself, before any permission is looked at
        return Ok(preview);
    }
    // As `up`: the host variables and the builds' network first, then only judged variables.
    let opts = &judged_options(opts, profile, grants);
    let opts =
        &crate::ops::gpu::planned_options(engine, opts, &loaded.typed, &mut preview.notes).await?;
    let mut early = early_requests(&loaded, opts, profile, grants, network)?;
    // the registries a closed container's pulls would reach, as `up` judges them (K12); the
    // Features' metadata is then read only from the hosts cleared
    let judged = crate::ops::permissions::judged_registries(
        engine,
        &loaded,
        &opts.target.env,
        (profile, grants),
        network.closed(),
    )
    .await?;
    early.requests.extend(judged.requests);
    let opts = &UpOptions {
        registry_hosts: Some(judged.hosts),
        ..opts.clone()
    };
    preview.host_env = early.host_env.clone();
    preview.notes.extend(early.warning.clone());
    let mut preview =
        preview_rest(engine, opts, &loaded, preview, (profile, grants, network)).await?;
    // One refusal for all of them, as `up` refuses (spec-note 0400).
    preview.refusal = security::refusal_of_all(
        profile,
        &early.requests,
        preview.refusal.take(),
        &preview.requests,
    );
    preview.requests.splice(0..0, early.requests);
    Ok(preview)
}

/// [`preview_permissions`] after the early requests: the container's own requests.
///
/// Steps: an existing container re-checked ([`preview_existing`]), else the base image when
/// the engine has it ([`preview_image`], [`preview_dockerfile_image`]) → the metadata entries and the label's host
/// variables ([`preview_entries`]) → the image's passwd → the container's requests and the
/// one refusal.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn preview_rest(
    engine: Option<&dyn Engine>,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    mut preview: PermissionPreview,
    (profile, grants, network): (&SecurityProfile, &Grants, NetworkMode),
) -> Result<PermissionPreview> {
    let engine_socket = engine.and_then(|e| e.host_socket());
    let choice = (profile, grants, network);
    if preview_existing(engine, opts, loaded, &mut preview, choice).await? {
        return Ok(preview);
    }
    let base = if loaded.typed.kind() == ConfigKind::Image {
        Some(preview_image(engine, loaded, &mut preview).await)
    } else {
        preview_dockerfile_image(engine, opts, loaded, &mut preview, (profile, grants)).await
    };
    let Some((reference, image_info)) = base else {
        return Ok(preview);
    };
    let (entries, label_requests) = preview_entries(
        opts,
        loaded,
        image_info.as_ref(),
        &mut preview,
        (profile, grants),
    )
    .await;
    // The image's passwd, as `up` reads it, so a user name is judged by its uid here too
    // (spec-note 0420); read past the host record of image files, which a plan never writes.
    let passwd = match (engine, &image_info) {
        (Some(engine), Some(_)) if matches!(profile, SecurityProfile::Hardened(_)) => {
            image_passwd(engine, None, &reference).await
        }
        _ => None,
    };
    let found = container_requests(
        &ContainerJudgement {
            profile,
            grants,
            network,
            opts,
            loaded,
            engine_socket,
            extra_mounts: &opts.mounts,
            volumes: engine,
        },
        &reference,
        image_info.as_ref(),
        &entries,
        passwd,
    )
    .await?;
    let mut requests = found.requests;
    if let Some(user) = &found.provided_user {
        preview.notes.push(provided_user_note(user));
        preview.provided_user = Some(user.clone());
    }
    requests.extend(label_requests);
    if requests.iter().any(|r| {
        matches!(
            r.status,
            security::RequestStatus::Refused | security::RequestStatus::Forbidden
        )
    }) {
        preview.refusal = Some(security::SecurityError::Refused {
            profile: profile.name().to_string(),
            requests: requests.clone(),
        });
    }
    preview.requests = requests;
    Ok(preview)
}

/// An existing container is re-checked, not re-created: its requests (and the refusal of
/// reusing it) go into `preview`. Whether one was found.
///
/// Errors: the re-check's, but for a refusal.
async fn preview_existing(
    engine: Option<&dyn Engine>,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    preview: &mut PermissionPreview,
    (profile, grants, network): (&SecurityProfile, &Grants, NetworkMode),
) -> Result<bool> {
    let Some(engine) = engine else {
        return Ok(false);
    };
    let id_labels = id_labels(&opts.target, loaded);
    let Ok(Some(info)) = find_container(
        engine,
        &id_labels,
        expected_workspace(&opts.target, loaded).as_deref(),
        &mut Vec::new(),
    )
    .await
    else {
        return Ok(false);
    };
    let entries = existing_entries(&info, loaded, &opts.target.env, &mut Vec::new());
    match check_existing(
        engine, &info, &entries, loaded, profile, grants, network, opts,
    )
    .await
    {
        Ok(requests) => preview.requests = requests,
        Err(OpsError::Security(e @ security::SecurityError::ReuseRefused { .. })) => {
            if let security::SecurityError::ReuseRefused { requests, .. } = &e {
                preview.requests = requests.clone();
            }
            preview.refusal = Some(e);
        }
        Err(e) => return Err(e),
    }
    Ok(true)
}

/// An image configuration's image: its reference and what the engine knows of it, when it
/// has it; a note says when it does not (a Dockerfile configuration's is
/// [`preview_dockerfile_image`]'s).
async fn preview_image(
    engine: Option<&dyn Engine>,
    loaded: &LoadedConfiguration,
    preview: &mut PermissionPreview,
) -> (String, Option<ImageInfo>) {
    let reference = loaded.typed.image.clone().unwrap_or_default();
    let info = match engine {
        Some(engine) => engine.inspect_image(&reference).await.ok().flatten(),
        None => None,
    };
    if info.is_none() {
        preview.notes.push(format!(
            "image `{reference}` is not on the engine yet: its `USER` and `devcontainer.metadata` label are read when handoff pulls it, and may ask for more than listed here"
        ));
    }
    (reference, info)
}

/// The image a Dockerfile configuration would build: its tag, the last build's image when
/// the engine has it, with the final stage's `USER` read from the Dockerfile the way the
/// build will set it. The Dockerfile and context `up` would refuse are refused here too,
/// unread (`None`, the refusal in `preview`).
async fn preview_dockerfile_image(
    engine: Option<&dyn Engine>,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    preview: &mut PermissionPreview,
    (profile, grants): (&SecurityProfile, &Grants),
) -> Option<(String, Option<ImageInfo>)> {
    let mut request = build_request(loaded, &opts.target.env).ok();
    if let Some(grants) = confine_grants(profile, grants)
        && let Some(r) = request.as_mut()
    {
        match confine_build(r, loaded, &grants) {
            Err(OpsError::Security(e)) => {
                preview.refusal = Some(e);
                return None;
            }
            Err(_) => request = None,
            Ok(()) => {}
        }
    }
    let tag = request
        .as_ref()
        .and_then(|r| r.tags.first().cloned())
        .unwrap_or_default();
    let last = match engine {
        Some(engine) if !tag.is_empty() => engine.inspect_image(&tag).await.ok().flatten(),
        _ => None,
    };
    // the final stage's USER, read from the Dockerfile the way the build will set it
    let user = match &request {
        Some(r) => dockerfile_user(engine, r).await,
        None => Err("the build request could not be made".to_string()),
    };
    let label = match &last {
        Some(_) => {
            format!("its `devcontainer.metadata` label is that of the last build (`{tag}`)")
        }
        None => "its `devcontainer.metadata` label is known only after that build, and may ask for more than listed here".to_string(),
    };
    let info = match user {
        Ok((spelling, uid)) => {
            let who = if uid == 0 {
                "root (uid 0)".to_string()
            } else {
                format!("`{spelling}` (uid {uid})")
            };
            preview.notes.push(format!(
                "the image is built from the Dockerfile by handoff: its final stage runs as {who}, read from the Dockerfile as the build will set it; {label}"
            ));
            Some(ImageInfo {
                user: (!spelling.is_empty()).then_some(spelling),
                ..last.unwrap_or_default()
            })
        }
        Err(why) => {
            preview.notes.push(match &last {
                Some(_) => format!(
                    "the image is built from the Dockerfile by handoff: its `USER` is not known until that build ({why}); judged here is the last build's, and {label}"
                ),
                None => format!(
                    "the image is built from the Dockerfile by handoff: its `USER` is not known until that build ({why}), so root is not ruled out; {label}"
                ),
            });
            last
        }
    };
    Some((tag, info))
}

/// The metadata entries a container would merge (the image's label, the Features' metadata
/// resolved but not downloaded where the registry has it apart, devcontainer.json), and the
/// requests of the host variables the label of the last Dockerfile build names, judged as
/// `up` judges them (spec-note 0443). What cannot be read is a note.
async fn preview_entries(
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    image_info: Option<&ImageInfo>,
    preview: &mut PermissionPreview,
    (profile, grants): (&SecurityProfile, &Grants),
) -> (Vec<Value>, Vec<security::PermissionRequest>) {
    let mut ignored = Vec::new();
    let (raw_base, base) = image_info
        .map(|i| image_entries(i, loaded, &opts.target.env, &mut ignored))
        .unwrap_or_default();
    let mut label_requests = Vec::new();
    if loaded.typed.kind() == ConfigKind::Dockerfile && !raw_base.is_empty() {
        let reads = substitute::local_env_reads(&Value::Array(raw_base));
        let (uses, requests) = security::host_env::image_label(profile, grants, &reads);
        security::host_env::merge(&mut preview.host_env, uses);
        label_requests = requests;
    }
    let mut feature_entries = Vec::new();
    if has_features(&loaded.value) {
        match preview_feature_entries(loaded, opts).await {
            Ok(entries) => feature_entries = entries,
            Err(e) => preview.notes.push(format!(
                "the Features' metadata could not be read ({e}): what they ask for is not listed"
            )),
        }
        substitute_entries(&mut feature_entries, loaded, &opts.target.env);
    }
    let entries = metadata::collect_entries(
        &base,
        &feature_entries,
        &metadata::config_entry(&loaded.value),
    );
    (entries, label_requests)
}

/// The user the final stage of the Dockerfile of `request` will run as, read before it is built
/// ([`final_user`], spec-note 0424): `(spelling, uid)` (`""` for the engine's default, root),
/// or why the build decides it. A base image's `USER` or `ENV` is read from the engine when
/// the image is there; one with `ONBUILD` triggers, or not there, leaves it to the build.
async fn dockerfile_user(
    engine: Option<&dyn Engine>,
    request: &BuildRequest,
) -> std::result::Result<(String, u32), String> {
    use crate::engine::passwd::{Resolved, resolve};
    let path = std::fs::canonicalize(&request.dockerfile)
        .map_err(|e| format!("the Dockerfile could not be read ({e})"))?;
    let text = match host_path::read_no_follow(&path, DOCKERFILE_MAX) {
        Ok(Some(bytes)) => {
            String::from_utf8(bytes).map_err(|_| "the Dockerfile is not UTF-8 text".to_string())?
        }
        Ok(None) => return Err("the Dockerfile is not a regular file within 4 MiB".to_string()),
        Err(e) => return Err(format!("the Dockerfile could not be read ({e})")),
    };
    let base_image = async |image: &str| -> std::result::Result<ImageInfo, String> {
        let info = match engine {
            Some(engine) => engine.inspect_image(image).await.ok().flatten(),
            None => None,
        };
        let info =
            info.ok_or_else(|| format!("the base image `{image}` is not on the engine yet"))?;
        if !info.on_build.is_empty() {
            return Err(format!("the base image `{image}` has `ONBUILD` triggers"));
        }
        Ok(info)
    };
    let (spelling, via_base) = match final_user(&text, &request.args, request.target.as_deref()) {
        FinalUser::Undecided(why) => return Err(why),
        FinalUser::Base { image } if image == "scratch" => (String::new(), false),
        FinalUser::Base { image } => {
            let info = base_image(&image).await.map_err(|why| {
                format!("the final stage sets no `USER`, so it is the base image's, and {why}")
            })?;
            (info.user.unwrap_or_default(), true)
        }
        FinalUser::User {
            spelling,
            shadowed_by,
        } => {
            if let Some((image, names)) = shadowed_by
                && !names.is_empty()
            {
                let info = base_image(&image).await.map_err(|why| {
                    format!(
                        "its `USER` reads `{}`, which the base image's `ENV` may set, and {why}",
                        names.join("`, `")
                    )
                })?;
                if let Some(name) = names
                    .iter()
                    .find(|n| info.env.iter().any(|e| e.starts_with(&format!("{n}="))))
                {
                    return Err(format!(
                        "its `USER` reads `{name}`, which the base image `{image}` sets in its `ENV`"
                    ));
                }
            }
            (spelling, false)
        }
    };
    let whose = if via_base { "the base image's " } else { "" };
    match resolve(&spelling, None) {
        Resolved::Default => Ok((String::new(), 0)),
        Resolved::Uid { uid, .. } => Ok((spelling, uid)),
        Resolved::Unresolved(name) | Resolved::Unknown(name) => Err(format!(
            "{whose}`USER {name}` is a name: its uid is the built image's `/etc/passwd` entry"
        )),
        Resolved::OutOfRange(n) => Err(format!("{whose}`USER` {n} is refused by the engine")),
    }
}

/// The largest Dockerfile the plan reads (the engine's own context limits are far above).
const DOCKERFILE_MAX: u64 = 4 << 20;
