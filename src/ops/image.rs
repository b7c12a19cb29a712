//! The dev container's image: inspect or pull it, or build the Dockerfile, then layer the Features
//! on it (`devcontainer-lock.json`, the Features' metadata label).

use crate::config::model::ConfigKind;
use crate::config::{metadata, substitute};
use crate::diagnostics::Warning;
use crate::engine::{Engine, ImageInfo};
use crate::features::lockfile::{Lockfile, LockfileMode, WriteOutcome};
use crate::names::METADATA_LABEL;
use crate::ops::dockerfile::build_request;
use crate::ops::dockerfile_judge::judged_bytes;
use crate::ops::entries::{FeatureRequestParts, feature_fetcher, has_features, image_entries};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::lockfile_io::LockfileAt;
use crate::ops::options::RecordedFeatures;
use crate::ops::options::{ImageBuildOptions, UpOptions};
use crate::ops::permissions::{confine_build, confine_grants};
use crate::progress::{Event, Reporter};
use crate::security::{self, Grants, PermissionRequest};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Under `hardened`, every label of the image in the identity namespaces
/// ([`crate::names::is_identity_label`]) but `devcontainer.metadata` that devcell does not set
/// itself is overridden with an empty value on the container (a container inherits its
/// image's labels, and the image may come from the repository's Dockerfile): an empty value
/// matches no lookup. Each is a warning (spec-note 0421).
pub(crate) fn neutralise_image_identity_labels(
    image: &ImageInfo,
    spec: &mut crate::engine::ContainerSpec,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) {
    for key in image.labels.keys() {
        if !crate::names::is_identity_label(key)
            || key == METADATA_LABEL
            || spec.labels.contains_key(key)
        {
            continue;
        }
        spec.labels.insert(key.clone(), String::new());
        let message = format!(
            "the image's label `{key}` is in a namespace devcell identifies containers by: the container gets it empty"
        );
        reporter.report(Event::Status(format!("warning: {message}")));
        warnings.push(Warning {
            location: None,
            message,
        });
    }
}

/// An image ready to run: its reference and what the engine knows about it.
pub(crate) struct PreparedImage {
    /// The reference (a tag, or the image id).
    pub(crate) reference: String,
    /// What the engine knows about it.
    pub(crate) info: ImageInfo,
}

/// Image kind: inspect, pull when missing. Dockerfile kind: build through the engine.
pub(crate) async fn prepare_image(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    kind: ConfigKind,
    host_env: &HashMap<String, String>,
    build: &ImageBuildOptions,
    confine: Option<&Grants>,
    reporter: &dyn Reporter,
) -> Result<PreparedImage> {
    if kind == ConfigKind::Image {
        let reference = loaded.typed.image.clone().unwrap_or_default();
        let info = engine.ensure_image(&reference, reporter).await?;
        return Ok(PreparedImage { reference, info });
    }
    let mut request = build_request(loaded, host_env)?;
    // the Dockerfile as the judgement read it, read through the path as written (the key of
    // that one read), before the path is resolved again for the build (spec-note 0655)
    let judged = confine.map(|_| judged_bytes(loaded, &request, confine));
    if let Some(grants) = confine {
        confine_build(&mut request, loaded, grants)?;
    }
    // an unreadable Dockerfile is said after one outside the workspace is refused
    request.dockerfile_bytes = judged.transpose()?.flatten();
    if let Some(network) = &build.network {
        request.network = network.clone();
    }
    if build.no_cache {
        request.no_cache = true;
        request.pull = true;
    }
    request
        .cache_from
        .splice(0..0, build.cache_from.iter().cloned());
    reporter.report(Event::Status(format!(
        "building {} from {}",
        request
            .tags
            .first()
            .map(String::as_str)
            .unwrap_or("the image"),
        request.dockerfile.display()
    )));
    let info = engine.build_image(&request, reporter).await?;
    Ok(PreparedImage {
        reference: request.tags.first().cloned().unwrap_or(info.id.clone()),
        info,
    })
}

/// The image of a new dev container (before `updateRemoteUserUID`) and its metadata.
pub(crate) struct DevImage {
    /// The image.
    pub(crate) image: PreparedImage,
    /// The metadata entries to merge, phase-1 substituted: base image ++ Features ++
    /// devcontainer.json.
    pub(crate) entries: Vec<Value>,
    /// The `devcontainer.metadata` label the container must carry itself (raw); `None` when
    /// the image carries it.
    pub(crate) label: Option<String>,
    /// The host variables the label of an image built from the repository's Dockerfile
    /// names, judged like devcontainer.json's (none refused; spec-note 0443), and the granted
    /// `ONBUILD` triggers of its base images (spec-note 0612), reported with the others.
    pub(crate) label_requests: Vec<PermissionRequest>,
    /// The host variables of `label_requests`, with the label properties they go into.
    pub(crate) label_host_env: Vec<security::host_env::HostEnvUse>,
    /// The Features resolution's lockfile, to write once the result exists (`None` without
    /// Features).
    pub(crate) lock: Option<PendingLock>,
}

/// `up`'s options with the host environment judged, and the profile and grants resolved once
/// by the operation ([`crate::ops::permissions::security_choice`]).
pub(crate) type Judged<'a> = (
    &'a UpOptions,
    &'a crate::security::SecurityProfile,
    &'a crate::security::Grants,
);

/// Prepares the image of a new dev container, as `up` and `build` do: the `image` (inspected,
/// pulled when missing) or the built `build.dockerfile` ([`prepare_image`]), with the
/// configuration's Features layered on ([`build_features`]; the image's label then holds base
/// ++ Features ++ devcontainer.json entries). Without Features the label is returned for the
/// container, unless `opts.build.bake_metadata_label` asks for an image carrying it (`build`;
/// a layer without Features).
///
/// Errors: as [`prepare_image`] and [`build_features`].
pub(crate) async fn dev_image(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    kind: ConfigKind,
    judged: Judged<'_>,
    reporter: &dyn Reporter,
    warnings: &mut Vec<Warning>,
) -> Result<DevImage> {
    let (opts, profile, grants) = judged;
    // the Dockerfile's base images' `ONBUILD` triggers, pulled and judged before the build
    // (spec-note 0612, attacks G9)
    let onbuild = if kind == ConfigKind::Dockerfile {
        let request = build_request(loaded, &opts.target.env)?;
        crate::ops::dockerfile_judge::onbuild_requests(
            engine,
            loaded,
            &request,
            (profile, grants),
            reporter,
        )
        .await?
    } else {
        Vec::new()
    };
    if let Some(refused) = security::refusal(profile, &onbuild) {
        return Err(refused.into());
    }
    let image = prepare_image(
        engine,
        loaded,
        kind,
        &opts.target.env,
        &opts.build,
        confine_grants(profile, grants).as_ref(),
        reporter,
    )
    .await?;
    // an `image` configuration's own triggers, before a build `FROM` it runs them
    let triggered = if kind == ConfigKind::Image {
        image_onbuild_requests(&image, None, profile, grants)?
    } else {
        Vec::new()
    };
    let mut dev = dev_image_from(engine, loaded, image, kind, judged, reporter, warnings).await?;
    dev.label_requests.extend(onbuild);
    dev.label_requests.extend(triggered);
    Ok(dev)
}

/// Judges the `ONBUILD` triggers of `image`, the image devcell is about to build its Features
/// and uid layers `FROM` (those builds run the triggers first; attacks G9, spec-note 0612): an
/// `image` configuration's (`service` `None`) or a Compose primary's that Compose pulled
/// rather than built (`service` named). Under `hardened` triggers are the request
/// `runtime-option:build_onbuild=…` showing them, judged before any build whether or not one
/// follows (the uid layer is decided later); none under `reference` or without triggers.
/// Returns the granted requests, to report with the container's.
///
/// Errors: [`OpsError::Security`] when the request is refused.
pub(crate) fn image_onbuild_requests(
    image: &PreparedImage,
    service: Option<&str>,
    profile: &security::SecurityProfile,
    grants: &Grants,
) -> Result<Vec<PermissionRequest>> {
    if !matches!(profile, security::SecurityProfile::Hardened(_)) || image.info.on_build.is_empty()
    {
        return Ok(Vec::new());
    }
    let asked = security::dockerfile::image_onbuild_request(
        service,
        &image.reference,
        &image.info.on_build,
    );
    let judged = security::judge(profile, [asked], grants);
    match security::refusal(profile, &judged) {
        Some(refused) => Err(refused.into()),
        None => Ok(judged),
    }
}

/// [`dev_image`] on an image already prepared (a Compose service's image, built or pulled by
/// Compose or the engine): its metadata, the Features layered on it.
///
/// Errors: as [`build_features`].
pub(crate) async fn dev_image_from(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    mut image: PreparedImage,
    kind: ConfigKind,
    (opts, profile, grants): Judged<'_>,
    reporter: &dyn Reporter,
    warnings: &mut Vec<Warning>,
) -> Result<DevImage> {
    let (raw_base, base) = image_entries(&image.info, loaded, &opts.target.env, warnings);
    // The label of an image built from the repository's Dockerfile is the repository's: its
    // host variables are requests like devcontainer.json's (spec-note 0443).
    let (label_host_env, label_requests) =
        if matches!(kind, ConfigKind::Dockerfile | ConfigKind::Compose) {
            let reads = substitute::local_env_reads(&Value::Array(raw_base.clone()));
            let (uses, requests) = security::host_env::image_label(profile, grants, &reads);
            security::host_env::check(profile, &requests)?;
            (uses, requests)
        } else {
            Default::default()
        };
    let with_features = has_features(&loaded.value);
    let mut lock = None;
    // A plain Dockerfile's image carries the label too, as the reference's does (spec-note 0473).
    let (entries, label) =
        if with_features || opts.build.bake_metadata_label || kind == ConfigKind::Dockerfile {
            // The built image's label holds base ++ Features ++ devcontainer.json entries; the
            // container inherits it from the image.
            image = if with_features {
                let (built, pending) =
                    build_features(engine, loaded, image, raw_base, &base, opts, reporter).await?;
                lock = Some(pending);
                built
            } else {
                let built = layer_features(
                    engine,
                    loaded,
                    &image,
                    raw_base,
                    &base,
                    Vec::new(),
                    opts,
                    reporter,
                )
                .await?;
                PreparedImage {
                    reference: built.tag,
                    info: built.image,
                }
            };
            let (_, mut entries) = image_entries(&image.info, loaded, &opts.target.env, warnings);
            // The label left devcontainer.json's remoteEnv out; the merge still has it, last.
            if opts.build.omit_config_remote_env
                && let Some(remote_env) = loaded.value.get("remoteEnv")
            {
                entries.push(serde_json::json!({ "remoteEnv": remote_env }));
            }
            (entries, None)
        } else {
            let entries =
                metadata::collect_entries(&base, &[], &metadata::config_entry(&loaded.value));
            let label = metadata::label_value(&metadata::collect_entries(
                &raw_base,
                &[],
                &label_config_entry(&loaded.raw, &opts.build),
            ));
            (entries, Some(label))
        };
    Ok(DevImage {
        image,
        entries,
        label,
        label_requests,
        label_host_env,
        lock,
    })
}

/// The `devcontainer.json` entry of a label devcell writes: [`metadata::config_entry`] of
/// `config` without `remoteEnv` under `--omit-config-remote-env-from-metadata`.
pub(crate) fn label_config_entry(config: &Value, build: &ImageBuildOptions) -> Value {
    let mut entry = metadata::config_entry(config);
    if build.omit_config_remote_env
        && let Some(entry) = entry.as_object_mut()
    {
        entry.remove("remoteEnv");
    }
    entry
}

/// `devcontainer.json` as the Features layer's label entry is made from: without `remoteEnv`
/// under `--omit-config-remote-env-from-metadata` ([`label_config_entry`]).
fn label_config(config: &Value, build: &ImageBuildOptions) -> Value {
    let mut config = config.clone();
    if build.omit_config_remote_env
        && let Some(object) = config.as_object_mut()
    {
        object.remove("remoteEnv");
    }
    config
}

/// A Feature's `devcontainer-feature.json` as its label entry is made from: without
/// `customizations` under `build --skip-persisting-customizations-from-features`.
fn label_feature_metadata(feature_metadata: Value, build: &ImageBuildOptions) -> Value {
    let mut feature_metadata = feature_metadata;
    if build.omit_feature_customizations
        && let Some(object) = feature_metadata.as_object_mut()
    {
        object.remove("customizations");
    }
    feature_metadata
}

/// The lockfile of a resolution, written (or checked) once the container (`build`: the image)
/// exists.
pub(crate) struct PendingLock {
    path: PathBuf,
    lockfile: Lockfile,
    at: LockfileAt,
}

impl PendingLock {
    /// The [`security::audit::FEATURE_DIGESTS_LABEL`] value: `{"<lock key>": "sha256:…"}` for
    /// the OCI and tarball Features installed (local Features have no digest).
    pub(crate) fn digests_label(&self) -> String {
        let digests: BTreeMap<&str, &str> = self
            .lockfile
            .features
            .iter()
            .map(|(k, f)| (k.as_str(), f.integrity.as_str()))
            .collect();
        serde_json::to_string(&digests).unwrap_or_else(|_| "{}".into())
    }

    /// The resolution's lockfile (the environment record's Features, spec-note 0520).
    pub(crate) fn lockfile(&self) -> &Lockfile {
        &self.lockfile
    }

    /// Applies `mode` ([`lockfile::apply`]); returns a warning for a lockfile that could not be
    /// written or that a read-only run left stale.
    pub(crate) fn finish(&self, mode: LockfileMode, reporter: &dyn Reporter) -> Option<Warning> {
        // judged and written through the workspace's handle, owned by the workspace's owner
        // (spec-notes 0400, 0250)
        let message = match self.at.apply(&self.lockfile, mode) {
            Ok(WriteOutcome::Written) => {
                reporter.report(Event::Status(format!("wrote {}", self.path.display())));
                return None;
            }
            Ok(WriteOutcome::Stale) => format!(
                "`{}` does not match the Features resolved for this container; it is left unchanged (run `devcell up` or `devcell upgrade` to update it)",
                self.path.display()
            ),
            Ok(_) => return None,
            Err(e) => format!("cannot write `{}`: {e}", self.path.display()),
        };
        reporter.report(Event::Status(format!("warning: {message}")));
        Some(Warning {
            location: None,
            message,
        })
    }
}

/// The progress line before Features are resolved: how many, and how many of them the
/// lockfile at `lock_path` pins (an empty lockfile, as for local Features only, pins none and
/// is not named).
fn resolving_status(
    count: usize,
    locked: Option<&Lockfile>,
    lock_path: &std::path::Path,
) -> String {
    match locked {
        Some(l) if !l.features.is_empty() => format!(
            "resolving {count} Feature(s) ({} pinned by {})",
            l.features.len(),
            lock_path.display()
        ),
        _ => format!("resolving {count} Feature(s)"),
    }
}

/// Resolves, orders and fetches the configuration's Features ([`crate::features::fetch`]) and
/// layers them onto `base_image` ([`crate::build::ensure_features_image`]): built only when its
/// cache tag (a hash of every input) is missing, so an unchanged second `up` builds nothing.
///
/// The lockfile beside the configuration pins OCI and tarball Features when present (unless
/// `opts.lockfile` is `Off`); under `Frozen` the resolution must equal it before anything is
/// built. Returns the image and the resolution's lockfile, to write once the container exists.
pub(crate) async fn build_features(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    base_image: PreparedImage,
    raw_base: Vec<Value>,
    base: &[Value],
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<(PreparedImage, PendingLock)> {
    use crate::build::FeatureLayer;
    use crate::features::fetch::PlanRequest;

    let FeatureRequestParts {
        features,
        override_order,
        config_dir,
        devcontainer_dir,
    } = FeatureRequestParts::of(loaded);
    let lock_at = LockfileAt::of(loaded);
    let lock_path = lock_at.path.clone();
    let lock_state = lock_at.read(opts.lockfile)?;
    let locked = lock_state.lockfile();
    if opts.lockfile == LockfileMode::Frozen && locked.is_none() {
        // Before any request: a missing or empty lockfile matches no frozen resolution (the
        // reference CLI says so without resolving, too).
        lock_at.apply(&Lockfile::default(), LockfileMode::Frozen)?;
    }
    reporter.report(Event::Status(resolving_status(
        features.len(),
        locked,
        &lock_path,
    )));
    let staging = tempfile::tempdir().map_err(|e| OpsError::Unsupported {
        message: format!("cannot create a temporary folder for Features: {e}"),
        hint: None,
    })?;
    // The fetcher keeps an owned reporter: its pull progress is forwarded to `reporter` while
    // it works (the forwarding ends when the fetcher is dropped).
    let (fetch_progress, fetch_events) = crate::progress::channel();
    // an `--environment` record's digests over the lockfile (spec-note 0520)
    let recorded = opts.recorded_features.as_ref();
    let honoured = RecordedFeatures::over(recorded, locked);
    let fetched = async {
        let fetcher = feature_fetcher(opts)?.with_reporter(fetch_progress);
        let plan = fetcher
            .plan(&PlanRequest {
                features: &features,
                override_order: &override_order,
                config_dir: &config_dir,
                devcontainer_dir: &devcontainer_dir,
                lockfile: honoured.as_ref().map(|l| (l, lock_path.as_path())),
            })
            .await?;
        if opts.lockfile == LockfileMode::Frozen {
            // Before any download or build: a frozen lockfile that does not match stops here.
            lock_at.apply(&plan.lockfile(), LockfileMode::Frozen)?;
        }
        let dirs = fetcher.fetch_plan(&plan, staging.path()).await?;
        Ok::<_, OpsError>((plan, dirs))
    };
    let (fetched, ()) = tokio::join!(fetched, fetch_events.forward_to(reporter));
    let (plan, dirs) = fetched.map_err(|e| RecordedFeatures::explain(recorded, e))?;
    let pending = PendingLock {
        path: lock_path.clone(),
        lockfile: plan.lockfile(),
        at: lock_at,
    };
    for warning in &plan.install.warnings {
        reporter.report(Event::Status(format!("warning: {warning}")));
    }
    let mut layers = Vec::with_capacity(dirs.len());
    for (feature, dir) in plan.install.features.iter().zip(dirs) {
        let metadata = plan
            .resolved
            .get(&feature.reference)
            .map(|r| r.metadata.clone())
            .unwrap_or(Value::Null);
        layers.push(FeatureLayer::new(
            &feature.key,
            dir,
            metadata,
            &feature.options,
            feature.canonical.clone(),
        )?);
    }
    let built = layer_features(
        engine,
        loaded,
        &base_image,
        raw_base,
        base,
        layers,
        opts,
        reporter,
    )
    .await?;
    Ok((
        PreparedImage {
            reference: built.tag,
            info: built.image,
        },
        pending,
    ))
}

/// Layers `layers` (Features in install order, materialised; none to only write the label)
/// onto `base_image` with the `devcontainer.metadata` label (`raw_base` ++ Features ++
/// devcontainer.json) and `opts.build`'s labels ([`crate::build::ensure_features_image_with`]):
/// built only when its cache tag is missing, unless `opts.build.no_cache`; reported as the status
/// `built <tag>` or `using cached <tag>`.
///
/// Errors: [`OpsError::Build`] (planning, or the engine's build failed).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn layer_features(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    base_image: &PreparedImage,
    raw_base: Vec<Value>,
    base: &[Value],
    layers: Vec<crate::build::FeatureLayer>,
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<crate::build::BuiltImage> {
    use crate::build::{BaseImage, FeaturesInput, ImageOptions, ensure_features_image_with};

    let users = metadata::merge(&metadata::collect_entries(
        base,
        &[],
        &metadata::config_entry(&loaded.value),
    ));
    let users = metadata::ConfiguredUsers::of(&users);
    let input = FeaturesInput {
        base: BaseImage {
            reference: base_image.reference.clone(),
            id: base_image.info.id.clone(),
            user: base_image.info.user.clone().unwrap_or_default(),
            metadata: raw_base,
        },
        features: layers
            .into_iter()
            .map(|mut layer| {
                layer.metadata = label_feature_metadata(layer.metadata, &opts.build);
                layer
            })
            .collect(),
        config: label_config(&loaded.raw, &opts.build),
        container_user: users.container_user,
        remote_user: users.remote_user,
    };
    // `build` bakes devcontainer.json's containerEnv after the Features' (spec-note 0473).
    let container_env = if opts.build.bake_metadata_label {
        loaded
            .typed
            .container_env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    } else {
        Vec::new()
    };
    let options = ImageOptions {
        labels: opts.build.labels.clone(),
        no_cache: opts.build.no_cache,
        network: opts.build.network.clone().flatten(),
        container_env,
    };
    let built = ensure_features_image_with(engine, &input, &options, reporter).await?;
    reporter.report(Event::Status(if built.built {
        format!("built {}", built.tag)
    } else {
        format!("using cached {}", built.tag)
    }));
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::lockfile::LockedFeature;
    use crate::security::{RequestStatus, SecurityProfile};

    /// Attack O3 (the Dockerfile raced): a process writing the workspace swaps the Dockerfile
    /// after `hardened` judged it (its `FROM`, `ADD`, `RUN` flags) and before the build packs
    /// it. The build's archive holds the judged Dockerfile, never the swapped one; the file
    /// was packed by path after the judgement, and the swapped one was built.
    #[tokio::test]
    async fn the_build_packs_the_dockerfile_that_was_judged() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join(".devcontainer")).unwrap();
        std::fs::write(
            root.join(".devcontainer/devcontainer.json"),
            r#"{"build": {"dockerfile": "Dockerfile", "context": ".."}}"#,
        )
        .unwrap();
        let judged = "FROM registry.example/judged:1\n";
        std::fs::write(root.join(".devcontainer/Dockerfile"), judged).unwrap();
        let grants = Grants::default();
        let loaded = crate::ops::load::load_configuration(&crate::ops::load::LoadOptions {
            workspace_folder: root.to_path_buf(),
            confine: Some(grants.clone()),
            ..Default::default()
        })
        .unwrap();
        let env = HashMap::new();
        let request = build_request(&loaded, &env).unwrap();
        let hardened = SecurityProfile::default();
        // the judgement's read
        let asked =
            crate::ops::dockerfile_judge::text_requests(&loaded, &request, &hardened, &grants);
        assert!(asked.is_empty(), "{asked:?}");
        // swapped after the judgement, before the build
        std::fs::write(
            root.join(".devcontainer/Dockerfile"),
            "FROM registry.example/swapped:1\nADD https://registry.example/x /x\n",
        )
        .unwrap();
        let engine = crate::engine::fake::FakeEngine::new();
        let reporter = crate::progress::NoopReporter;
        let built = prepare_image(
            &engine,
            &loaded,
            ConfigKind::Dockerfile,
            &env,
            &ImageBuildOptions::default(),
            Some(&grants),
            &reporter,
        )
        .await;
        assert!(built.is_err(), "the fake engine builds nothing");
        let builds = engine.builds();
        assert_eq!(builds.len(), 1, "{builds:?}");
        let build = &builds[0];
        let packed = crate::engine::context::pack(
            &build.context,
            &build.dockerfile,
            build.dockerfile_bytes.as_deref(),
        )
        .unwrap();
        let sent: Vec<String> = packed
            .dockerfile_entries()
            .into_iter()
            .map(|bytes| String::from_utf8(bytes).unwrap())
            .collect();
        assert_eq!(sent, vec![judged.to_string()]);
    }

    /// Attack (G9, left by session 19): an `image` configuration's `ONBUILD` triggers run in
    /// devcell's own Features and uid builds `FROM` it. Under `hardened` they are the request
    /// `build_onbuild=<image>` (a Compose primary's `build_onbuild=<service>:<image>`), refused
    /// unasked and showing the triggers, granted by that flag only; none under `reference` or
    /// for an image without triggers.
    #[test]
    fn an_image_configurations_onbuild_triggers_are_a_request() {
        let image = |on_build: &[&str]| PreparedImage {
            reference: "127.0.0.1:5000/attack/onbuild:1".into(),
            info: ImageInfo {
                on_build: on_build.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
        };
        let triggered = image(&[
            "RUN touch /tmp/marker",
            "RUN --mount=type=cache,target=/c true",
        ]);
        let hardened = SecurityProfile::default();
        let none = Grants::default();
        let Err(OpsError::Security(refused)) =
            image_onbuild_requests(&triggered, None, &hardened, &none)
        else {
            panic!("triggers must be refused unasked");
        };
        let text = refused.to_string();
        assert!(
            text.contains("runtime-option:build_onbuild=127.0.0.1:5000/attack/onbuild:1"),
            "{text}"
        );
        assert!(
            text.contains("image `127.0.0.1:5000/attack/onbuild:1` (`ONBUILD RUN touch /tmp/marker | RUN --mount=type=cache,target=/c true`)"),
            "{text}"
        );
        let Err(OpsError::Security(refused)) =
            image_onbuild_requests(&triggered, Some("app"), &hardened, &none)
        else {
            panic!("a Compose primary's triggers must be refused unasked");
        };
        let text = refused.to_string();
        assert!(
            text.contains("runtime-option:build_onbuild=app:127.0.0.1:5000/attack/onbuild:1"),
            "{text}"
        );
        assert!(
            text.contains("Compose service `app` (`image: ONBUILD"),
            "{text}"
        );
        // granted by its own flag only, and reported
        let grants =
            Grants::parse(&["runtime-option:build_onbuild=127.0.0.1:5000/attack/onbuild:1"])
                .unwrap();
        let granted = image_onbuild_requests(&triggered, None, &hardened, &grants).unwrap();
        assert_eq!(granted.len(), 1);
        assert_eq!(granted[0].status, RequestStatus::Granted);
        assert!(image_onbuild_requests(&triggered, Some("app"), &hardened, &grants).is_err());
        // nothing to judge
        assert!(
            image_onbuild_requests(&image(&[]), None, &hardened, &none)
                .unwrap()
                .is_empty()
        );
        assert!(
            image_onbuild_requests(&triggered, None, &SecurityProfile::Reference, &none)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_resolving_line_names_the_lockfile_only_when_it_pins_a_feature() {
        let path = std::path::Path::new("/w/.devcontainer/devcontainer-lock.json");
        // Local Features only: the lockfile is written empty and pins nothing.
        let empty = Lockfile::default();
        assert_eq!(
            resolving_status(1, Some(&empty), path),
            "resolving 1 Feature(s)"
        );
        assert_eq!(resolving_status(2, None, path), "resolving 2 Feature(s)");
        let mut pinned = Lockfile::default();
        pinned.features.insert(
            "127.0.0.1:5000/f/a:1".into(),
            LockedFeature {
                version: "1.0.0".into(),
                resolved: "127.0.0.1:5000/f/a@sha256:00".into(),
                integrity: "sha256:00".into(),
                depends_on: None,
            },
        );
        assert_eq!(
            resolving_status(2, Some(&pinned), path),
            "resolving 2 Feature(s) (1 pinned by /w/.devcontainer/devcontainer-lock.json)"
        );
    }
}
