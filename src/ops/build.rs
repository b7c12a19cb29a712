//! `build`: build a dev container's image the way `up` does, without creating a container
//! ([spec: image building](https://containers.dev/implementors/spec/#image-building); refcli
//! §1 `build`), then tag it with each `--image-name` and, with `--push`, push those tags
//! through the engine (spec-note 0290).
//!
//! The image is the one `up` would run before `updateRemoteUserUID` ([`dev_image`]): the
//! configuration's `image` (inspected, pulled when missing) or its built `build.dockerfile`,
//! with the Features layered on, and always with the `devcontainer.metadata` label baked in
//! (as the reference CLI's `build` does: a Features layer without Features writes just the
//! label). That layer is cached by a hash of every input, so an unchanged second `build`
//! builds nothing.
//!
//! Security: nothing runs from the image here, but the permission requests a container of it
//! would make (a Feature's `capAdd`, `privileged`, a mount, root) are evaluated against the
//! profile and grants as `up` would, and reported in the result.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::config::metadata;
use crate::config::model::ConfigKind;
use crate::diagnostics::Warning;
use crate::engine::Engine;
use crate::ops::container::{SpecInputs, container_spec};
use crate::ops::dockerfile::image_name;
use crate::ops::error::{OpsError, Result};
use crate::ops::image::{DevImage, dev_image};
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::{ImageBuildOptions, SecurityOptions, TargetOptions, UpOptions};
use crate::ops::permissions::origins;
use crate::ops::target::id_labels;
use crate::progress::{Event, Reporter};
use crate::security::{self, PermissionRequest, PolicyInput, SecurityError};
use crate::settings::Settings;

/// Inputs of [`build`] (the `build` flags).
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Workspace and config (`--workspace-folder`, `--config`). The id labels are not used.
    pub target: TargetOptions,
    /// `--image-name` (repeatable): the tags to give the image; none gives the reference
    /// CLI's default name ([`default_image_name`]).
    pub image_names: Vec<String>,
    /// `--push`: push every `--image-name` to its registry after the build.
    pub push: bool,
    /// `--no-cache`, `--cache-from`, `--label`.
    pub image: ImageBuildOptions,
    /// `--security-profile`, `--allow`: only for evaluating the permission requests.
    pub security: SecurityOptions,
    /// The user settings file.
    pub settings: Settings,
    /// `--cache-dir`: the Feature cache.
    pub cache_dir: Option<PathBuf>,
    /// `devcontainer-lock.json`: honoured when present and written once the image is built
    /// (`Write`, the default), `--frozen-lockfile` (`Frozen`), `--no-lockfile` (`Off`).
    pub lockfile: crate::features::lockfile::LockfileMode,
    /// `--environment FILE`: the Feature digests the record pins (spec-note 0520).
    pub recorded_features: Option<crate::ops::options::RecordedFeatures>,
}

/// One tag pushed to its registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushedImage {
    /// The tag (`registry/repository:tag`).
    pub image_name: String,
    /// The manifest digest the registry reported (`sha256:…`), when it reported one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The result of [`build`].
#[derive(Debug, Clone)]
pub struct BuildResult {
    /// The names the image was tagged with (`--image-name`s, or the default name).
    pub image_names: Vec<String>,
    /// `imageName` is printed as one string, not an array: the reference CLI's result for a
    /// Compose configuration built without `--image-name` (spec-note 0605).
    pub image_name_as_string: bool,
    /// The image id (`sha256:…`).
    pub image_id: String,
    /// The tags pushed (`--push`), in order.
    pub pushed: Vec<PushedImage>,
    /// The security profile the requests were evaluated under.
    pub profile: String,
    /// The permission requests a container of this image would make, with what `up` under
    /// the same profile and grants would do with each (nothing is refused here: no container
    /// is created).
    pub permissions: Vec<PermissionRequest>,
    /// Non-fatal findings (config warnings, requests that could not be evaluated).
    pub warnings: Vec<Warning>,
    /// How many of the first `warnings` were shown on stderr as they were found
    /// ([`crate::ops::load::report_warnings`]): the CLI prints the rest.
    pub shown_warnings: usize,
    /// The configuration as loaded and judged, for the environment record (spec-note 0520).
    pub(crate) loaded: LoadedConfiguration,
    /// The merged configuration a container of this image would have.
    pub(crate) merged: Value,
    /// The Features' resolution (`None`: no Features were resolved).
    pub(crate) features: Option<crate::features::lockfile::Lockfile>,
}

impl BuildResult {
    /// The reference CLI's result line with devcell's additions under `devcell`:
    /// `{"outcome":"success","imageName":[…],"devcell":{"imageId","profile",
    /// "permissions":[…],"pushed":[{"imageName","digest"}],"warnings":[…]}}`; `imageName` is
    /// one string when [`BuildResult::image_name_as_string`].
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("outcome".into(), json!("success"));
        let image_name = match self.image_names.as_slice() {
            [name] if self.image_name_as_string => json!(name),
            names => json!(names),
        };
        out.insert("imageName".into(), image_name);
        out.insert(
            "devcell".into(),
            json!({
                "imageId": self.image_id,
                "profile": self.profile,
                "permissions": self.permissions,
                "pushed": self.pushed,
                "warnings": self.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
        );
        Value::Object(out)
    }
}

/// Connects to the engine (`DOCKER_HOST`) and runs [`build_with`].
///
/// Errors: as [`build_with`]; [`OpsError::Engine`] when no engine answers.
pub async fn build(opts: &BuildOptions, reporter: &dyn Reporter) -> Result<BuildResult> {
    let engine = crate::engine::connect().await?;
    build_with(&*engine, opts, reporter).await
}

/// Builds the image of `opts.target`'s configuration through `engine` (see the module docs),
/// tags it with each name and pushes them when asked. Progress and build output go to
/// `reporter`.
///
/// Steps: the choice and the configuration → [`check_request`] → [`judged_build_options`]
/// (the host variables and network judged before anything is built) → the registries the
/// build pulls from, under the user's closed network
/// ([`crate::ops::permissions::judged_registries`]) → [`build_dev_image`] →
/// the tags → the lockfile → [`container_permissions`] → [`push_all`].
///
/// Errors: [`OpsError::Unsupported`] for a configuration
/// without `image` or `build.dockerfile`, or `--push` without `--image-name`;
/// [`OpsError::Config`], [`OpsError::Feature`], [`OpsError::Build`],
/// [`OpsError::Engine`] (pull, build, tag, push: `EngineError::Push`);
/// [`OpsError::Security`] for an unknown profile or grant.
pub async fn build_with(
    engine: &dyn Engine,
    opts: &BuildOptions,
    reporter: &dyn Reporter,
) -> Result<BuildResult> {
    // judged under `hardened` as `up` judges it (spec-note 0400)
    let chosen = crate::ops::up::load_chosen(&opts.security, &opts.settings, &opts.target)?;
    let shown_warnings = crate::ops::load::report_warnings(&chosen.loaded, reporter);
    check_request(opts, &chosen.loaded, chosen.loaded.typed.kind())?;
    before_reading(engine, opts, &chosen, reporter).await?;
    let crate::ops::permissions::UpChoice {
        profile,
        grants,
        network,
        loaded,
    } = chosen;
    let kind = loaded.typed.kind();
    let (mut up_opts, mut early) =
        judged_build_options(opts, &loaded, (&profile, &grants), network)?;
    // the registries the build pulls from, judged as `up` judges them, before anything is
    // pulled (attack K12; attack 23, N18); the Features are then fetched from those cleared
    let crate::ops::permissions::JudgedRegistries {
        requests: registries,
        hosts,
    } = crate::ops::permissions::judged_registries(
        Some(engine),
        &loaded,
        &up_opts.target.env,
        (&profile, &grants),
        network.closed(),
    )
    .await?;
    if let Some(refused) = security::refusal_of_all(&profile, &registries, None, &[]) {
        return Err(refused.into());
    }
    early.requests.extend(registries);
    up_opts.registry_hosts = Some(hosts);
    let mut warnings = loaded.warnings.clone();
    warnings.extend(early.warning.iter().map(|message| Warning {
        location: None,
        message: message.clone(),
    }));
    let choice = (&up_opts, &profile, &grants);
    let DevImage {
        image,
        entries,
        lock,
        ..
    } = build_dev_image(
        engine,
        opts,
        &loaded,
        (choice, network.closed()),
        reporter,
        &mut warnings,
    )
    .await?;

    let image_name_as_string = kind == ConfigKind::Compose && opts.image_names.is_empty();
    let names = tag_all(engine, opts, &loaded, &image.info.id, reporter).await?;
    // The lockfile changes only once the image exists (a failed build leaves the workspace as
    // it was), as `up` writes it only once the container exists.
    let features = lock.as_ref().map(|l| l.lockfile().clone());
    if let Some(lock) = lock
        && let Some(warning) = lock.finish(opts.lockfile, reporter)
    {
        warnings.push(warning);
    }

    let (merged, permissions) = container_permissions(
        opts,
        &loaded,
        (&image, &entries),
        (&profile, &grants),
        &mut warnings,
    )?;
    // What the build itself used (host variables, its network), granted, then the container's.
    let permissions: Vec<_> = early.requests.iter().cloned().chain(permissions).collect();
    note_refusals(&permissions, &profile, reporter);
    let pushed = if opts.push {
        push_all(engine, &names, reporter).await?
    } else {
        Vec::new()
    };
    Ok(BuildResult {
        image_names: names,
        image_name_as_string,
        image_id: image.info.id.clone(),
        pushed,
        profile: profile.name().to_string(),
        permissions,
        warnings,
        shown_warnings,
        loaded,
        merged,
        features,
    })
}

/// Before `build` reads the workspace (local Features, the build context, a Compose
/// project's contexts), what `up` does before it reads it (attack 28, F2; spec-note 0680):
/// the workspace's containers that [`crate::ops::quiesce::before_reading`] stops for `up` are
/// stopped ([`crate::ops::up::stop_before_reading`]: a Compose project's sidecars left running
/// without their primary, under `hardened`), and under `hardened` a running container devcell
/// does not own (any but the workspace's own, as the lookup finds it) that binds the workspace
/// writable refuses the build
/// ([`crate::ops::up::refuse_foreign_writers`]). The workspace's own running dev container is
/// left running, as `up` leaves one it reuses: a user builds while working in it, and stopping
/// it would end their processes. What it may write meanwhile is read race-free: local Features
/// through [`crate::features::nofollow_copy`], the context through the engine's no-follow
/// packer, the Dockerfile as the judged bytes, `devcontainer.json` no-follow; so it can change
/// what the repository holds (as it could before the build) but never make devcell read a
/// host file.
///
/// Errors: [`crate::ops::quiesce::NotStopped`],
/// [`crate::security::SecurityError::ForeignWriter`]; the engine's.
async fn before_reading(
    engine: &dyn Engine,
    opts: &BuildOptions,
    chosen: &crate::ops::permissions::UpChoice,
    reporter: &dyn Reporter,
) -> Result<()> {
    crate::ops::up::stop_before_reading(engine, &opts.target, chosen, false, reporter).await?;
    // the workspace's own dev container, as the lookup finds it (binding the workspace, its
    // labels set at creation: spec-note 0671), is the one writer left running
    let id_labels = id_labels(&opts.target, &chosen.loaded);
    let expected = crate::ops::target::expected_workspace(&opts.target, &chosen.loaded);
    let own = crate::ops::target::find_container(
        engine,
        &id_labels,
        expected.as_deref(),
        &mut Vec::new(),
    )
    .await?;
    crate::ops::up::refuse_foreign_writers(engine, &chosen.profile, &chosen.loaded, own.as_ref())
        .await?;
    refuse_compose_build_beside_its_container(chosen, own.as_ref())
}

/// Under `hardened`, refuses building a Compose configuration while its own dev container
/// runs: Compose packs each service's build context itself, by path, so a process in that
/// container could swap a context folder for a link to a host folder before Compose reads it
/// (attack 29, G5; spec-note 0673). devcell's own packer reads race-free, so a Dockerfile
/// configuration builds beside its running container.
///
/// Errors: [`OpsError::Unsupported`] naming the container.
fn refuse_compose_build_beside_its_container(
    chosen: &crate::ops::permissions::UpChoice,
    own: Option<&crate::engine::ContainerInfo>,
) -> Result<()> {
    let hardened = matches!(
        chosen.profile,
        crate::security::SecurityProfile::Hardened(_)
    );
    let compose = chosen.loaded.typed.kind() == crate::config::model::ConfigKind::Compose;
    match own.filter(|c| hardened && compose && c.running) {
        None => Ok(()),
        Some(c) => Err(OpsError::Unsupported {
            message: format!(
                "refusing to build the Compose configuration while its dev container {} runs: Compose reads the build contexts by path, and a process in that container could replace one with a link to a host folder first",
                crate::ops::target::short(&c.id)
            ),
            hint: Some(
                "stop it first (`devcell down --workspace-folder .`), then build; `up` stops what it must by itself".into(),
            ),
        }),
    }
}

/// Tags image `image_id` with each `--image-name`, or with the configuration's default name
/// ([`default_image_name`]) when none is given; returns the names.
///
/// Errors: [`OpsError::Engine`] when a tag fails.
async fn tag_all(
    engine: &dyn Engine,
    opts: &BuildOptions,
    loaded: &LoadedConfiguration,
    image_id: &str,
    reporter: &dyn Reporter,
) -> Result<Vec<String>> {
    let names = if opts.image_names.is_empty() {
        vec![default_image_name(
            &loaded.workspace_folder,
            loaded.typed.kind(),
        )]
    } else {
        opts.image_names.clone()
    };
    for name in &names {
        reporter.report(Event::Status(format!("tagging {name}")));
        engine.tag_image(image_id, name).await?;
    }
    Ok(names)
}

/// A note on `reporter` for each request `up` would refuse under `profile` (`build` refuses
/// none of what the container would be given: it makes no container).
fn note_refusals(
    permissions: &[PermissionRequest],
    profile: &security::SecurityProfile,
    reporter: &dyn Reporter,
) {
    for request in permissions
        .iter()
        .filter(|r| r.status == security::RequestStatus::Refused)
    {
        reporter.report(Event::Status(format!(
            "note: under the `{}` profile, `up` would refuse {request}",
            profile.name()
        )));
    }
}

/// Refuses, before anything is built, a configuration with no image to build, `--push`
/// without a name to push to, and an `--image-name` the engine cannot tag.
///
/// Errors: [`OpsError::Unsupported`], [`OpsError::Engine`] (an invalid name).
fn check_request(
    opts: &BuildOptions,
    loaded: &LoadedConfiguration,
    kind: ConfigKind,
) -> Result<()> {
    if kind == ConfigKind::None {
        return Err(OpsError::Unsupported {
            message: format!(
                "`{}` has no `image`, `build.dockerfile` or `dockerComposeFile`: there is no image to build",
                loaded.config_file.display()
            ),
            hint: Some("add `image` or `build.dockerfile` to devcontainer.json".into()),
        });
    }
    if opts.push && opts.image_names.is_empty() {
        return Err(OpsError::Unsupported {
            message: "`--push` needs at least one `--image-name` naming the registry".into(),
            hint: Some(
                "pass e.g. `--image-name registry.example.com/team/devimage:1 --push`".into(),
            ),
        });
    }
    for name in &opts.image_names {
        check_image_name(name)?;
    }
    Ok(())
}

/// `up`'s options for the build, with the host variables the build would read and the
/// build's network judged as `up` judges them before anything is built; after that only
/// judged variables are visible (spec-notes 0440, 0442). A build runs no container: under
/// `hardened` it gets no network unless granted, like a container on `none` (spec-note
/// 0442), and `runArgs -e NAME`, which only a container reads, is not asked for.
///
/// Errors: [`OpsError::Security`] (a refused host variable or network).
fn judged_build_options(
    opts: &BuildOptions,
    loaded: &LoadedConfiguration,
    (profile, grants): (&security::SecurityProfile, &security::Grants),
    network: crate::settings::NetworkMode,
) -> Result<(UpOptions, crate::ops::permissions::EarlyRequests)> {
    let up_opts = UpOptions {
        target: opts.target.clone(),
        security: opts.security.clone(),
        build: ImageBuildOptions {
            bake_metadata_label: true,
            ..opts.image.clone()
        },
        settings: opts.settings.clone(),
        cache_dir: opts.cache_dir.clone(),
        lockfile: opts.lockfile,
        recorded_features: opts.recorded_features.clone(),
        ..UpOptions::default()
    };
    let up_opts = crate::ops::permissions::judged_options(&up_opts, profile, grants);
    let build_network = crate::security::build_network::of_a_build(profile).unwrap_or(network);
    let mut early =
        crate::ops::permissions::early_requests(loaded, &up_opts, profile, grants, build_network)?;
    (early.host_env, early.requests) =
        crate::security::host_env::for_build(profile, grants, &early.host_env, &early.requests);
    crate::security::host_env::check(profile, &early.requests)?;
    let up_opts = crate::ops::permissions::with_build_network(up_opts, &early);
    Ok((up_opts, early))
}

/// The image `up` would run before the uid layer: for a Compose configuration the primary
/// service's (spec-note 0605), its own properties judged on Compose's model first (a build
/// context outside the workspace, a build on the host network, the registries its pulls
/// reach when `network_closed`), then built or pulled, the
/// Features on it; else the configuration's image or Dockerfile with the Features.
///
/// Errors: [`OpsError::Security`], [`OpsError::Compose`], the build's, the engine's.
async fn build_dev_image(
    engine: &dyn Engine,
    opts: &BuildOptions,
    loaded: &LoadedConfiguration,
    ((up_opts, profile, grants), network_closed): (
        (&UpOptions, &security::SecurityProfile, &security::Grants),
        bool,
    ),
    reporter: &dyn Reporter,
    warnings: &mut Vec<Warning>,
) -> Result<DevImage> {
    let kind = loaded.typed.kind();
    if kind != ConfigKind::Compose {
        return dev_image(
            engine,
            loaded,
            kind,
            (up_opts, profile, grants),
            reporter,
            warnings,
        )
        .await;
    }
    let target =
        crate::ops::compose::compose_build_target(engine, loaded, &opts.target, (profile, grants))
            .await?;
    // a build tags `<project>-<service>`: not into another workspace's project
    let id_labels = crate::ops::target::id_labels(&opts.target, loaded);
    crate::ops::compose::claim_project(engine, &target, &id_labels).await?;
    let places = crate::ops::compose_up::compose_places(loaded, up_opts, None);
    let mut judged = crate::security::compose::judge_compose(
        profile,
        &target.model,
        &target.service,
        &places,
        grants,
    )?;
    // the registries the project's pulls reach under the user's closed network (attack 23, N9)
    let registries = crate::ops::permissions::compose_registry_requests(
        engine,
        loaded,
        &target,
        (profile, grants),
        network_closed,
    )
    .await?;
    if let Some(refused) = security::refusal_of_all(profile, &registries, None, &[]) {
        return Err(refused.into());
    }
    // a build runs no container: under `hardened` it is judged as one on `none` (spec-note 0442)
    let closed = crate::security::build_network::of_a_build(profile).is_some();
    let target = crate::ops::compose_builds::close_builds(
        target,
        (profile, grants),
        closed,
        &mut judged.requests,
    )?;
    let (base, triggered) = crate::ops::compose_up::service_image(
        engine,
        &target,
        up_opts,
        (profile, grants),
        reporter,
    )
    .await?;
    let mut dev = crate::ops::image::dev_image_from(
        engine,
        loaded,
        base,
        kind,
        (up_opts, profile, grants),
        reporter,
        warnings,
    )
    .await?;
    dev.label_requests.extend(triggered);
    Ok(dev)
}

/// The merged configuration a container of `image` would have, and what it would ask for,
/// as `up` would judge it (nothing is refused here: a refusal's requests are reported). A
/// request that cannot be evaluated is a warning.
///
/// Errors: [`OpsError::Security`] other than a refusal.
fn container_permissions(
    opts: &BuildOptions,
    loaded: &LoadedConfiguration,
    (image, entries): (&crate::ops::image::PreparedImage, &[Value]),
    (profile, grants): (&security::SecurityProfile, &security::Grants),
    warnings: &mut Vec<Warning>,
) -> Result<(Value, Vec<PermissionRequest>)> {
    let mut merged = metadata::merge_configuration(&loaded.value, entries);
    crate::config::substitute::substitute_devcontainer_id(
        &mut merged,
        &crate::config::id::devcontainer_id(&id_labels(&opts.target, loaded)),
    );
    let host_env = |name: &str| opts.target.env.get(name).cloned();
    let no_labels = BTreeMap::new();
    let spec = loaded.workspace_mount().and_then(|workspace_mount| {
        container_spec(&SpecInputs {
            image: &image.reference,
            image_info: &image.info,
            merged: &merged,
            workspace_mount: workspace_mount.as_ref(),
            extra_mounts: &[],
            id_labels: &no_labels,
            metadata_label: None,
            host_env: &host_env,
        })
    });
    let permissions = match spec {
        Ok(spec) => {
            let remote_user = crate::config::metadata::ConfiguredUsers::of(&merged).remote_user;
            let input = PolicyInput {
                origins: origins(entries, &[]),
                remote_user,
                image_user: image.info.user.clone().filter(|u| !u.is_empty()),
                workspace: loaded.workspace.host_mount_root.clone(),
                host_home: opts.target.env.get("HOME").map(PathBuf::from),
                spec,
                ..PolicyInput::default()
            };
            match security::apply(profile, &input, grants) {
                Ok(applied) => applied.requests,
                Err(SecurityError::Refused { requests, .. }) => requests,
                Err(other) => return Err(other.into()),
            }
        }
        Err(e) => {
            let message = format!(
                "the permission requests of a container of this image cannot be evaluated: {e}"
            );
            warnings.push(Warning {
                location: None,
                message,
            });
            Vec::new()
        }
    };
    Ok((merged, permissions))
}

/// Pushes each tag to its registry (`--push`), in order, with the digest each reported.
///
/// Errors: [`OpsError::Engine`] (`EngineError::Push`).
async fn push_all(
    engine: &dyn Engine,
    names: &[String],
    reporter: &dyn Reporter,
) -> Result<Vec<PushedImage>> {
    let mut pushed = Vec::new();
    for name in names {
        reporter.report(Event::Status(format!("pushing {name}")));
        let digest = engine.push_image(name, reporter).await?;
        pushed.push(PushedImage {
            image_name: name.clone(),
            digest,
        });
    }
    Ok(pushed)
}

/// Checks an `--image-name` before anything is built: a `[registry/]repository[:tag]` the
/// engine can tag (no digest).
///
/// Errors: [`EngineError::InvalidReference`](crate::engine::EngineError::InvalidReference)
/// naming it.
fn check_image_name(name: &str) -> Result<()> {
    let invalid = |message: String| {
        OpsError::Engine(crate::engine::EngineError::InvalidReference {
            reference: name.to_string(),
            message,
        })
    };
    let parsed = crate::oci::registry::parse_reference(name).map_err(|e| {
        invalid(match std::error::Error::source(&e) {
            Some(cause) => cause.to_string(),
            None => e.to_string(),
        })
    })?;
    if parsed.digest().is_some() {
        return Err(invalid(
            "an `--image-name` is a tag (`[registry/]repository[:tag]`), not a digest".into(),
        ));
    }
    Ok(())
}

/// The reference CLI's default image name when no `--image-name` is given: for a Dockerfile
/// configuration `vsc-<folder>-<sha256 of the workspace path>` (the name its Dockerfile build
/// gets), for an image configuration that name with `-features`.
pub fn default_image_name(workspace_folder: &Path, kind: ConfigKind) -> String {
    let name = image_name(workspace_folder);
    match kind {
        ConfigKind::Dockerfile => name,
        _ => format!("{name}-features"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_follow_the_reference() {
        let ws = Path::new("/w/ws");
        let dockerfile = default_image_name(ws, ConfigKind::Dockerfile);
        assert!(dockerfile.starts_with("vsc-ws-"), "{dockerfile}");
        assert!(!dockerfile.ends_with("-features"));
        assert_eq!(
            default_image_name(ws, ConfigKind::Image),
            format!("{dockerfile}-features")
        );
    }

    #[test]
    fn image_names_are_checked() {
        for ok in ["a", "a/b:1", "127.0.0.1:5000/team/x:1.0", "ghcr.io/o/r"] {
            assert!(check_image_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "Bad:Name:x",
            "a b",
            "",
            "a@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            let err = check_image_name(bad).unwrap_err().to_string();
            assert!(err.contains("invalid image reference"), "{bad}: {err}");
        }
    }

    #[test]
    fn result_json_has_the_reference_shape() {
        let result = BuildResult {
            shown_warnings: 0,
            image_names: vec!["a:1".into()],
            image_name_as_string: false,
            image_id: "sha256:00".into(),
            pushed: vec![PushedImage {
                image_name: "a:1".into(),
                digest: None,
            }],
            profile: "hardened".into(),
            permissions: Vec::new(),
            warnings: Vec::new(),
            loaded: LoadedConfiguration::empty(),
            merged: Value::Null,
            features: None,
        };
        let v = result.to_json();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["outcome", "imageName", "devcell"]);
        assert_eq!(v["imageName"], json!(["a:1"]));
        assert_eq!(v["devcell"]["pushed"], json!([{"imageName": "a:1"}]));
        // a Compose configuration built without `--image-name`: one string, as the reference
        let compose = BuildResult {
            shown_warnings: 0,
            image_name_as_string: true,
            ..result
        };
        assert_eq!(compose.to_json()["imageName"], json!("a:1"));
    }
}
