//! `up`: bring a dev container up the way `@devcontainers/cli up` does, under devcell's
//! security profile ([spec: lifecycle](https://containers.dev/implementors/spec/#lifecycle),
//! [container creation](https://containers.dev/implementors/spec/#container-creation)).
//!
//! Steps: load the configuration ([`load_up`]) → take the bring-up lock of its identity →
//! find the container by its id labels → judge everything the configuration asks for, once
//! ([`judge_up`]) → run `initializeCommand` on the host → (no container) inspect or pull the image /
//! build the Dockerfile → read the image's `devcontainer.metadata` label → merge entries
//! (image ++ devcontainer.json) → `${devcontainerId}` → [`container_spec`] → the security
//! policy ([`security::apply`]; refuse before creating anything) → create and start →
//! `${containerEnv:…}` against the container's environment → lifecycle hooks through the
//! engine's exec ([`EngineExecutor`]).
//!
//! An existing container is reused: running → nothing changes, stopped → started
//! (`postStartCommand` runs again). Its metadata comes from its own label plus the
//! `remoteUser`, `userEnvProbe` and `remoteEnv` of the current devcontainer.json, as in the
//! reference CLI.

use crate::config::model::ConfigKind;
use crate::diagnostics::Warning;
use crate::settings::NetworkMode;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::engine::{ContainerInfo, ContainerSpec, Engine};
use crate::ops::bring_up::{ContainerAction, UpResult, after_start, initialize_on_host, up_result};
use crate::ops::container::{
    SpecInputs, configured_container_user, container_spec, host_memory_bytes,
    unmet_host_requirements,
};
use crate::ops::create::{
    Started, UserChoice, apply_policy, identity_labels, image_users, merged_with_uid_layer,
    numeric_user_when_hardened, policy_input, provenance_labels, verify_and_finish,
};
use crate::ops::entries::existing_entries;
use crate::ops::error::{OpsError, Result};
use crate::ops::existing::settle_existing;
use crate::ops::hooks::{bring_up_lock, prepare_state_dir_if_needed};
use crate::ops::image::{DevImage, PreparedImage, dev_image, neutralise_image_identity_labels};
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::ops::permissions::{
    ConfigurationJudgement, UpChoice, cli_mounts, confine_grants, judge_configuration,
    judge_named_volumes, judged_options, judged_places, locate_run_arg_error, security_choice,
    with_build_network,
};
use crate::ops::secrets::{MaskingReporter, redact};
use crate::ops::state_folder::BringUpLock;
use crate::ops::target::{expected_workspace, find_container, id_labels, inspect, load_for, short};
use crate::ops::users::Account;
use crate::progress::{Event, Reporter};
use crate::security::{self, Grants, PermissionRequest, SecurityProfile};

/// Connects to the engine (`DOCKER_HOST`) and runs [`up_with`]; secret values are masked in
/// every event and error (spec-note 0240). Under network `none` a dotfiles URL is exported on
/// the host first and bound for the install ([`crate::ops::dotfiles::for_up`]).
///
/// Errors: as [`up_with`]; [`OpsError::Engine`] when no engine answers;
/// [`OpsError::Redacted`] when an error's text held a secret value.
pub async fn up(opts: &UpOptions, reporter: &dyn Reporter) -> Result<UpResult> {
    let reporter = MaskingReporter {
        inner: reporter,
        secrets: &opts.secrets,
    };
    let run = async {
        let (opts, _export) = crate::ops::dotfiles::exported_for_up(opts, &reporter)?;
        let engine = crate::engine::connect().await?;
        up_with(&*engine, &opts, &reporter).await
    };
    run.await.map_err(|e| redact(e, &opts.secrets))
}

/// Brings the dev container of `opts.target` up through `engine` (see the module docs).
/// The engine's host socket ([`Engine::host_socket`]) is never mountable under `hardened`.
/// Progress and hook output go to `reporter`.
///
/// Errors: [`OpsError::Config`] (config), [`OpsError::Security`] (refused: nothing
/// was created), [`OpsError::Engine`] (image, build, create), [`OpsError::Lifecycle`]
/// (a hook failed: the container is left for inspection, and the failed hook runs again at
/// the next `up`), [`OpsError::Unsupported`], [`OpsError::NoContainer`].
pub async fn up_with(
    engine: &dyn Engine,
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<UpResult> {
    up_with_check(engine, opts, None::<&std::convert::Infallible>, reporter).await
}

/// A check that runs once the configuration is judged and before anything runs on the host
/// or the engine ([`up_with_check`]): `--environment FILE`'s drift check
/// ([`crate::ops::environment`], spec-note 0400, F7), so a refused configuration pulls no
/// image and resolves no Feature for it.
pub(crate) trait JudgedCheck {
    /// The check's warnings, added to the result's after the hooks' and before the git
    /// directories' ones.
    ///
    /// Errors: the check's refusal (nothing was run, pulled, built or created).
    async fn check(
        &self,
        engine: &dyn Engine,
        opts: &UpOptions,
        reporter: &dyn Reporter,
    ) -> Result<Vec<Warning>>;
}

/// No check: what [`up_with`] passes.
impl JudgedCheck for std::convert::Infallible {
    async fn check(&self, _: &dyn Engine, _: &UpOptions, _: &dyn Reporter) -> Result<Vec<Warning>> {
        match *self {}
    }
}

/// `up`'s one flow ([`up_with`]), with `check` run between the judgement and the bring-up:
/// load ([`load_up`]) → cover the workspace's git directories → Compose ([`up_compose`](crate::ops::compose_up::up_compose),
/// judged first by [`preview_compose`](crate::ops::compose_up::preview_compose) when there is
/// a check) or [`judge_up`] → `check` → [`up_judged`] → move aside a git entry the hooks
/// created.
///
/// Errors: as [`up_with`]; the check's.
pub(crate) async fn up_with_check(
    engine: &dyn Engine,
    opts: &UpOptions,
    check: Option<&impl JudgedCheck>,
    reporter: &dyn Reporter,
) -> Result<UpResult> {
    let chosen = load_up(opts)?;
    crate::ops::load::report_warnings(&chosen.loaded, reporter);
    // nothing of the workspace runs while it is read, when a container will be started or
    // created (attacks P2, P5, P7)
    stop_before_reading(
        engine,
        &opts.target,
        &chosen,
        opts.remove_existing_container,
        reporter,
    )
    .await?;
    // what a process left running made since the last command is not the user's (attack O1)
    let moved_before = crate::ops::workspace_git::before_up(&chosen)?;
    // the workspace's git directories read-only under `hardened` (spec-note 0446)
    let (opts, mut git_warnings, git_watch) =
        crate::ops::workspace_git::covered(opts, &chosen, reporter)?;
    git_warnings.splice(0..0, moved_before);
    let opts = &opts;
    let mut checked = Vec::new();
    let result = async {
        if chosen.loaded.typed.kind() == ConfigKind::Compose {
            if let Some(check) = check {
                // judged as the plan judges it: only Compose's `config` and engine reads run
                crate::ops::compose_up::preview_compose(engine, opts, &chosen, &[]).await?;
                checked = check.check(engine, opts, reporter).await?;
            }
            return crate::ops::compose_up::up_compose(engine, opts, chosen, &[], reporter).await;
        }
        supported_kind(&chosen.loaded)?;
        let judged = judge_up(engine, opts, chosen, &[], reporter).await?;
        if let Some(check) = check {
            checked = check.check(engine, opts, reporter).await?;
        }
        up_judged(engine, opts, judged, reporter).await
    };
    // a git entry the hooks created is moved aside (spec-note 0448)
    let result = crate::ops::workspace_git::after_hooks(git_watch.as_ref(), result.await, reporter);
    let mut result = result?;
    result.warnings.extend(checked);
    result.warnings.extend(git_warnings);
    Ok(result)
}

/// Stops the workspace's containers before `up` (or `build`, spec-note 0680) reads the
/// workspace, when it will start or create one ([`crate::ops::quiesce::before_reading`];
/// `remove_existing`: `--remove-existing-container`), said as a status line.
///
/// Errors: [`crate::ops::quiesce::NotStopped`] (nothing was read, judged or created).
pub(crate) async fn stop_before_reading(
    engine: &dyn Engine,
    target: &crate::ops::options::TargetOptions,
    chosen: &UpChoice,
    remove_existing: bool,
    reporter: &dyn Reporter,
) -> Result<()> {
    let id_labels = id_labels(target, &chosen.loaded);
    let when = (
        chosen.loaded.typed.kind() == ConfigKind::Compose,
        matches!(chosen.profile, SecurityProfile::Hardened(_)),
        remove_existing,
    );
    let service = chosen.loaded.typed.service.as_deref();
    let stopped = crate::ops::quiesce::before_reading(engine, &id_labels, when, service).await?;
    if stopped > 0 {
        reporter.report(Event::Status(format!(
            "stopped the workspace's containers ({stopped}) before reading the workspace"
        )));
    }
    Ok(())
}

/// Under `hardened`, refuses the `up` while a running container other than `existing` (the
/// one the lookup found, which `up` reuses or replaces; no Compose project is this
/// container's own) binds the workspace writable
/// ([`crate::ops::foreign_writers::refuse_foreign_writers`], spec-notes 0656, 0478): it could
/// swap what was judged before the engine uses it, and devcell cannot stop it.
///
/// Errors: [`crate::security::SecurityError::ForeignWriter`]; the engine's.
pub(crate) async fn refuse_foreign_writers(
    engine: &dyn Engine,
    profile: &SecurityProfile,
    loaded: &LoadedConfiguration,
    existing: Option<&ContainerInfo>,
) -> Result<()> {
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return Ok(());
    }
    crate::ops::foreign_writers::refuse_foreign_writers(
        engine,
        &loaded.workspace_folder,
        None,
        existing.map(|c| c.id.as_str()),
    )
    .await
}

/// The profile and grants of `opts` ([`security_choice`]) and the configuration loaded with
/// the whole host environment (`initializeCommand` runs on the host and keeps it); every read
/// that reaches the container is judged by [`judge_up`].
///
/// Errors: [`OpsError::Config`], [`OpsError::InvalidLimit`] and the security choice's.
pub(crate) fn load_up(opts: &UpOptions) -> Result<UpChoice> {
    load_chosen(&opts.security, &opts.settings, &opts.target)
}

/// The user's choice ([`security_choice`]: the flags, then the settings file) and the
/// configuration loaded under it ([`load_for`]; under `hardened` judged as `up` judges it,
/// spec-note 0400), for `up` and `build`.
///
/// Errors: as [`load_up`].
pub(crate) fn load_chosen(
    security: &crate::ops::options::SecurityOptions,
    settings: &crate::settings::Settings,
    target: &crate::ops::options::TargetOptions,
) -> Result<UpChoice> {
    let crate::security::Choice {
        profile,
        grants,
        network,
        ..
    } = security_choice(security, settings)?;
    let loaded = load_for(target, confine_grants(&profile, &grants))?;
    Ok(UpChoice {
        profile,
        grants,
        network,
        loaded,
    })
}

/// Refuses the configurations these steps do not bring up: none, and Docker Compose (`up` and
/// a handoff bring it up through [`crate::ops::compose_up`], never through these steps).
pub(crate) fn supported_kind(loaded: &LoadedConfiguration) -> Result<()> {
    if loaded.typed.kind() == ConfigKind::Compose {
        return Err(OpsError::Unsupported {
            message: format!(
                "`{}`: a Docker Compose configuration is brought up through Compose, not these steps",
                loaded.config_file.display()
            ),
            hint: Some("bring it up with `devcell up`".into()),
        });
    }
    if loaded.typed.kind() == ConfigKind::None {
        return Err(OpsError::Unsupported {
            message: format!(
                "`{}`: devcell brings up `image`, `build.dockerfile` and `dockerComposeFile` configurations",
                loaded.config_file.display()
            ),
            hint: Some(
                "use `image`, `build.dockerfile` or `dockerComposeFile` in devcontainer.json"
                    .into(),
            ),
        });
    }
    Ok(())
}

/// What `up` decided before anything runs on the host or the engine ([`judge_up`]): the
/// bring-up lock held, the container found under it, and the one judgement of everything the
/// configuration asks for.
pub(crate) struct JudgedUp {
    choice: UpChoice,
    judgement: ConfigurationJudgement,
    /// The container of this identity, found under the lock.
    existing: Option<ContainerInfo>,
    /// The containers passed over while finding it.
    find_warnings: Vec<Warning>,
    /// `--gpu-availability` as the engine settled it ([`crate::ops::gpu::resolve`]).
    gpu: crate::ops::options::GpuAvailability,
    /// Whether the running writers devcell does not own were looked for (spec-note 0656):
    /// not when the container found ran and was to be reused.
    writers_checked: bool,
    _lock: Option<BringUpLock>,
}

impl JudgedUp {
    /// The found container was stopped since it was found (a handoff stops what runs before it
    /// reads the container git directories): `up` starts it again rather than take it as
    /// running.
    pub(crate) fn stopped(&mut self, ids: &[String]) {
        if let Some(info) = self.existing.as_mut().filter(|i| ids.contains(&i.id)) {
            info.running = false;
        }
    }
}

/// Takes the bring-up lock of the configuration's identity (one find-or-create and one run of
/// the create hooks at a time; spec-note 0422), finds the container it would reuse, and judges
/// everything the configuration asks for against it or against the container devcontainer.json
/// asks for ([`judge_configuration`] with `earlier`, a handoff's git directories): one refusal
/// listing every request, before anything is run, recorded, pulled, built or created
/// (spec-notes 0400, 0410, 0440, 0442). The result is handed to [`up_judged`], which neither
/// looks the container up nor judges the configuration again.
///
/// Errors: as [`judge_configuration`]; [`OpsError::Unsupported`] when the lock cannot be
/// taken; [`OpsError::Engine`] when the containers cannot be listed;
/// [`crate::ops::quiesce::NotStopped`] when the container `--remove-existing-container`
/// replaces cannot be confirmed stopped (nothing was judged).
pub(crate) async fn judge_up(
    engine: &dyn Engine,
    opts: &UpOptions,
    choice: UpChoice,
    earlier: &[PermissionRequest],
    reporter: &dyn Reporter,
) -> Result<JudgedUp> {
    let loaded = &choice.loaded;
    let id_labels = id_labels(&opts.target, loaded);
    let lock = bring_up_lock(&crate::config::id::devcontainer_id(&id_labels), reporter).await?;
    let mut find_warnings = Vec::new();
    let existing = if matches!(
        loaded.typed.kind(),
        ConfigKind::Image | ConfigKind::Dockerfile
    ) {
        let expected = expected_workspace(&opts.target, loaded);
        find_container(engine, &id_labels, expected.as_deref(), &mut find_warnings).await?
    } else {
        None
    };
    // A container `--remove-existing-container` removes is not judged: the new one is.
    let reused = existing
        .as_ref()
        .filter(|_| !opts.remove_existing_container);
    if let Some(old) = existing.as_ref().filter(|_| opts.remove_existing_container) {
        // stopped, and confirmed stopped, before anything is read to judge: a process a hook
        // left running in it would otherwise change the workspace's files between the
        // judgement and their use (attack O3); the same step as a Compose project's (O4)
        crate::ops::quiesce::stop_workspace(engine, &old.id)
            .await
            .map_err(|why| crate::ops::quiesce::NotStopped { why, task: None })?;
    }
    // a container devcell cannot stop must not write what is judged (spec-notes 0478, 0656):
    // only when `up` will create or start one (a running one reused is not bound again, and
    // a warm `up` makes no more engine calls)
    let writers_checked = !reused.is_some_and(|c| c.running);
    if writers_checked {
        refuse_foreign_writers(engine, &choice.profile, loaded, existing.as_ref()).await?;
    }
    let (opts, gpu_warnings) =
        crate::ops::gpu::settled_options(engine, opts, &loaded.typed, reporter).await?;
    find_warnings.extend(gpu_warnings);
    let judgement = judge_configuration(engine, &opts, &choice, earlier, reused).await?;
    Ok(JudgedUp {
        choice,
        judgement,
        existing,
        find_warnings,
        gpu: opts.gpu_availability,
        writers_checked,
        _lock: lock,
    })
}

/// Brings the dev container up from what [`judge_up`] decided (see the module docs); the lock
/// it took is held until this returns.
///
/// Errors: as [`up_with`].
pub(crate) async fn up_judged(
    engine: &dyn Engine,
    opts: &UpOptions,
    judged: JudgedUp,
    reporter: &dyn Reporter,
) -> Result<UpResult> {
    let JudgedUp {
        choice:
            UpChoice {
                profile,
                grants,
                network,
                loaded,
            },
        judgement:
            ConfigurationJudgement {
                early,
                init_stage,
                host_requests,
                reuse_requests,
                container_requests: _,
            },
        existing,
        find_warnings,
        gpu,
        writers_checked,
        _lock,
    } = judged;
    supported_kind(&loaded)?;
    // the container found running was stopped since (a handoff's start): `up` starts it
    // again, and the engine binds its sources again then
    if !writers_checked && !existing.as_ref().is_some_and(|c| c.running) {
        refuse_foreign_writers(engine, &profile, &loaded, existing.as_ref()).await?;
    }
    // From here on only judged host variables are visible (image labels, Features, a reused
    // container's label, `runArgs -e NAME`), and the builds get the container's network.
    let opts = &UpOptions {
        gpu_availability: gpu,
        ..with_build_network(judged_options(opts, &profile, &grants), &early)
    };
    let id_labels = id_labels(&opts.target, &loaded);
    let devcontainer_id = crate::config::id::devcontainer_id(&id_labels);

    let mut warnings = loaded.warnings.clone();
    warnings.extend(find_warnings);
    let existing = settle_existing(engine, existing, opts, &id_labels, reporter).await?;
    let early_warning = early.warning.as_ref();
    initialize_on_host(
        (init_stage.as_ref(), &host_requests),
        &loaded,
        early_warning,
        &mut warnings,
        reporter,
    )
    .await?;
    let plan = NewContainer {
        opts,
        loaded: &loaded,
        profile: &profile,
        grants: &grants,
        network,
        early_requests: &early.requests,
        id_labels: &id_labels,
        devcontainer_id: &devcontainer_id,
    };
    // The host variables of an image label built from the repository's Dockerfile.
    let mut label_env = Vec::new();
    let (container, entries, action, mut permissions) = reuse_or_create(
        engine,
        existing,
        &plan,
        reuse_requests,
        &mut label_env,
        &mut warnings,
        reporter,
    )
    .await?;
    permissions.splice(0..0, host_requests);
    let container = restarted(engine, container, action).await?;
    let (egress, attached, lifecycle) = after_start(
        engine,
        &container,
        (&loaded, entries),
        (&devcontainer_id, action),
        opts,
        (network, &early.requests),
        &mut warnings,
        reporter,
    )
    .await?;

    let permissions = early.requests.into_iter().chain(permissions).collect();
    let mut host_env = early.host_env;
    security::host_env::merge(&mut host_env, label_env);
    Ok(up_result(
        opts,
        (loaded, &profile),
        &devcontainer_id,
        (&container, action),
        (attached, lifecycle),
        (permissions, host_env),
        warnings,
        (egress, None),
    ))
}

/// The dev container with its metadata entries, what was done and its permission requests:
/// the reused one `existing` (started when stopped; what it has was re-checked against the
/// current profile and grants with the rest, `reuse_requests`, spec-note 0270), or a new one
/// made from `plan` ([`create_new`]), whose image label's host variables join `label_env`.
///
/// Errors: as [`reuse_existing`] and [`create_new`].
async fn reuse_or_create(
    engine: &dyn Engine,
    existing: Option<ContainerInfo>,
    plan: &NewContainer<'_>,
    reuse_requests: Vec<PermissionRequest>,
    label_env: &mut Vec<security::host_env::HostEnvUse>,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<(
    ContainerInfo,
    Vec<Value>,
    ContainerAction,
    Vec<PermissionRequest>,
)> {
    if let Some(info) = existing {
        let (info, entries, action) =
            reuse_existing(engine, info, plan.loaded, plan.opts, warnings, reporter).await?;
        return Ok((info, entries, action, reuse_requests));
    }
    let created = create_new_once_more_without_its_image(engine, plan, warnings, reporter).await?;
    security::host_env::merge(label_env, created.label_host_env);
    let (info, entries) = (created.info, created.entries);
    Ok((info, entries, ContainerAction::Created, created.permissions))
}

/// [`create_new`], tried a second time when the create found its image gone: a concurrent
/// `prune` (another task's) or `rmi` removed the cache tag devcell had just built or the
/// image it had just pulled. The second try prepares the image again from the start; its
/// warnings replace the first's (spec-note 0659).
///
/// Errors: as [`create_new`]; the second try's when both fail.
async fn create_new_once_more_without_its_image(
    engine: &dyn Engine,
    plan: &NewContainer<'_>,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<CreatedContainer> {
    let before = warnings.len();
    match create_new(engine, plan, warnings, reporter).await {
        Err(OpsError::Engine(e)) if crate::engine::error::is_image_missing_at_create(&e) => {
            warnings.truncate(before);
            reporter.report(Event::Status(format!(
                "the image was removed before the container was created ({e}); preparing it again"
            )));
            create_new(engine, plan, warnings, reporter).await
        }
        other => other,
    }
}

/// A reused container, started when stopped, with its metadata entries.
///
/// Errors: the engine's.
async fn reuse_existing(
    engine: &dyn Engine,
    info: ContainerInfo,
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<(ContainerInfo, Vec<Value>, ContainerAction)> {
    let entries = existing_entries(&info, loaded, &opts.target.env, warnings);
    let action = if info.running {
        ContainerAction::Running
    } else {
        reporter.report(Event::Status(format!(
            "starting container {}",
            short(&info.id)
        )));
        engine.start_container(&info.id).await?;
        ContainerAction::Started
    };
    Ok((info, entries, action))
}

/// Re-reads the container's times after a start. A container an older devcell made keeps its
/// hooks' pid files in the state volume, which is made writable again (idempotent).
///
/// Errors: the engine's, naming the container.
async fn restarted(
    engine: &dyn Engine,
    container: ContainerInfo,
    action: ContainerAction,
) -> Result<ContainerInfo> {
    if action != ContainerAction::Started {
        return Ok(container);
    }
    prepare_state_dir_if_needed(engine, &container).await?;
    inspect(engine, &container.id)
        .await
        .map_err(|e| e.in_container(&container.id))
}

/// What a new container is made from: the judged options and configuration, the profile and
/// grants, and its identity.
struct NewContainer<'a> {
    opts: &'a UpOptions,
    loaded: &'a LoadedConfiguration,
    profile: &'a SecurityProfile,
    grants: &'a Grants,
    network: NetworkMode,
    early_requests: &'a [PermissionRequest],
    id_labels: &'a BTreeMap<String, String>,
    devcontainer_id: &'a str,
}

/// A new container, created, started and inspected.
struct CreatedContainer {
    info: ContainerInfo,
    entries: Vec<Value>,
    permissions: Vec<PermissionRequest>,
    label_host_env: Vec<security::host_env::HostEnvUse>,
}

/// A container's request judged by the policy, not yet created.
struct JudgedSpec {
    spec: ContainerSpec,
    /// The user the container was asked to run as (`None`: the image's), before
    /// [`crate::ops::exec_user::numeric_container_user`] made `spec.user` numeric.
    container_user: Option<String>,
    permissions: Vec<PermissionRequest>,
    remote_user: Option<String>,
    account: Option<Account>,
    missing_volumes: Vec<String>,
}

/// Creates the new container: image and uid layer, host requirements, the request with its
/// provenance labels, the policy's judgement, egress, identity labels and volumes, create and
/// start, the uid check and the lockfile.
///
/// Errors: as [`up_with`].
async fn create_new(
    engine: &dyn Engine,
    plan: &NewContainer<'_>,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<CreatedContainer> {
    let (opts, loaded) = (plan.opts, plan.loaded);
    let DevImage {
        mut image,
        entries,
        label,
        label_requests,
        label_host_env,
        lock: pending_lock,
    } = dev_image(
        engine,
        loaded,
        loaded.typed.kind(),
        (opts, plan.profile, plan.grants),
        reporter,
        warnings,
    )
    .await?;
    // A root image with no user named: devcell's own user, made in the uid layer (0188).
    let who = UserChoice {
        profile: plan.profile,
        grants: plan.grants,
        container_user: &|merged: &Value| configured_container_user(merged),
    };
    let (merged, provided) = merged_with_uid_layer(
        engine,
        &mut image,
        &entries,
        loaded,
        plan.devcontainer_id,
        opts,
        &who,
        reporter,
    )
    .await?;
    host_requirement_warnings(&merged, warnings, reporter);
    let mut spec = new_spec(plan, &image, &merged, label)?;
    provenance_labels(
        &mut spec,
        (provided.as_ref(), pending_lock.as_ref()),
        plan.profile,
        loaded,
    );
    base_image_label(&mut spec, loaded, &image);
    let hardened = matches!(plan.profile, SecurityProfile::Hardened(_));
    let facts = ImageFacts {
        image: &image,
        merged: &merged,
        entries: &entries,
        label_requests: &label_requests,
    };
    let mut judged = judge_new(engine, plan, spec, &facts, warnings, reporter).await?;
    crate::ops::egress::before_create(plan.network, plan.devcontainer_id, &mut judged.spec)?;
    let early_requests = plan.early_requests;
    identity_labels(
        &mut judged.spec,
        judged.account.as_ref(),
        hardened,
        early_requests,
        &label_requests,
    );
    if hardened {
        for name in &judged.missing_volumes {
            let labels = security::volumes::labels_for(&loaded.workspace_folder);
            engine.create_volume(name, &labels).await?;
        }
    }
    // the image's labels, recorded for the container's next lookup (spec-note 0421)
    crate::ops::image_files::remember_labels(&image.info);
    reporter.report(Event::Status(format!(
        "creating container from {}",
        image.reference
    )));
    let id = engine.create_container(&judged.spec).await?;
    // From here on, a failure names the container (spec-note 0472).
    engine
        .start_container(&id)
        .await
        .map_err(|e| OpsError::from(e).in_container(&id))?;
    check_workspace_mount(engine, &id, &judged.spec, loaded, reporter).await?;
    let started = Started {
        id: &id,
        container_user: judged.container_user.as_deref(),
        remote_user: judged.remote_user.as_deref(),
        permissions: &judged.permissions,
        grants: plan.grants,
        hardened,
    };
    let info = verify_and_finish(engine, started, pending_lock, opts, warnings, reporter).await?;
    Ok(CreatedContainer {
        info,
        entries,
        permissions: judged.permissions,
        label_host_env,
    })
}

/// After the start and before any hook (spec-note 0663): the container's workspace mount (the
/// bind of `spec` at the configuration's workspace target) must be the folder devcell judged,
/// by (`st_dev`, `st_ino`) seen through the container's init process
/// ([`security::mounted::check`]). Said as a status line when it holds; when the container's
/// root is not reachable from here (a non-root user of a rootful engine, rootless, another
/// machine), a status line saying so; on a difference the container is removed and `up`
/// refused.
///
/// Errors: [`crate::security::SecurityError::MountMismatch`]; the engine's, inspecting.
async fn check_workspace_mount(
    engine: &dyn Engine,
    id: &str,
    spec: &ContainerSpec,
    loaded: &LoadedConfiguration,
    reporter: &dyn Reporter,
) -> Result<()> {
    let Some(workspace) = loaded.workspace_mount()? else {
        return Ok(());
    };
    let Some(source) = spec
        .mounts
        .iter()
        .find(|m| m.kind == crate::engine::MountKind::Bind && m.target == workspace.target)
        .and_then(|m| m.source.as_deref())
    else {
        return Ok(());
    };
    let judged = security::host_path::resolve(std::path::Path::new(source))
        .unwrap_or_else(|_| std::path::PathBuf::from(source));
    let pid = engine
        .inspect_container(id)
        .await
        .map_err(|e| OpsError::from(e).in_container(id))?
        .and_then(|i| i.pid);
    let checked = match pid {
        Some(pid) => security::mounted::check(pid, &judged, &workspace.target),
        None => Ok(security::mounted::MountCheck::Skipped(
            "the engine reported no process id".to_string(),
        )),
    };
    let refuse = |detail: String| -> OpsError {
        crate::security::SecurityError::MountMismatch {
            workspace: judged.clone(),
            target: workspace.target.clone(),
            detail,
        }
        .into()
    };
    match checked {
        Ok(security::mounted::MountCheck::Same) => {
            reporter.report(Event::Status(format!(
                "workspace mount checked: `{}` is `{}`",
                workspace.target,
                judged.display()
            )));
            Ok(())
        }
        // a status line, not a result warning: a non-root user of a rootful engine cannot
        // reach the container's root, and a warning at every `up` would teach them to skip
        // warnings (the check adds to the judgement; it is not the judgement)
        Ok(security::mounted::MountCheck::Skipped(why)) => {
            reporter.report(Event::Status(format!(
                "workspace mount not checked after the start (the container's root is not reachable from here: {why})"
            )));
            Ok(())
        }
        Ok(security::mounted::MountCheck::Different { judged: j, mounted }) => {
            let _ = engine.remove_container(id, true).await;
            Err(refuse(format!(
                "device:inode {}:{} mounted, {}:{} judged",
                mounted.0, mounted.1, j.0, j.1
            )))
        }
        Err(why) => {
            let _ = engine.remove_container(id, true).await;
            Err(refuse(why))
        }
    }
}

/// The host requirements (`hostRequirements`) this host does not meet, as warnings.
fn host_requirement_warnings(merged: &Value, warnings: &mut Vec<Warning>, reporter: &dyn Reporter) {
    for message in unmet_host_requirements(
        merged,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        host_memory_bytes(),
    ) {
        reporter.report(Event::Status(format!("warning: {message}")));
        warnings.push(Warning {
            location: None,
            message,
        });
    }
}

/// The create request of the new container from its image and merged configuration, on the
/// network asked for.
///
/// Errors: a `runArgs` flag devcell cannot map, located in the configuration; a bad network.
fn new_spec(
    plan: &NewContainer<'_>,
    image: &PreparedImage,
    merged: &Value,
    label: Option<String>,
) -> Result<ContainerSpec> {
    let (opts, loaded) = (plan.opts, plan.loaded);
    let host_env = |name: &str| opts.target.env.get(name).cloned();
    let workspace_mount = loaded.workspace_mount()?;
    let mut spec = container_spec(&SpecInputs {
        image: &image.reference,
        image_info: &image.info,
        merged,
        workspace_mount: workspace_mount.as_ref(),
        extra_mounts: &cli_mounts(opts, loaded),
        id_labels: plan.id_labels,
        metadata_label: label,
        host_env: &host_env,
    })
    .map_err(|e| locate_run_arg_error(e, &loaded.config_file))?;
    if let Some(network) = plan.network.engine_mode() {
        spec.network_mode = Some(network.to_string());
    }
    spec.gpu = crate::ops::gpu::request(&loaded.typed, opts.gpu_availability);
    Ok(spec)
}

/// An image devcell layered (Features, updateRemoteUserUID) on a base the configuration pins
/// by digest: record that base for the audit, which checks it against the image's layers
/// (spec-note 0241).
fn base_image_label(spec: &mut ContainerSpec, loaded: &LoadedConfiguration, image: &PreparedImage) {
    if let Some(base) = loaded.typed.image.as_deref().filter(|b| {
        loaded.typed.kind() == ConfigKind::Image && security::audit::is_digest_pinned(b)
    }) && image.reference != base
    {
        spec.labels.insert(
            security::audit::BASE_IMAGE_LABEL.to_string(),
            base.to_string(),
        );
    }
}

/// What the new container's image brings to its judgement.
struct ImageFacts<'a> {
    image: &'a PreparedImage,
    merged: &'a Value,
    entries: &'a [Value],
    /// The host variables its label names (spec-note 0443).
    label_requests: &'a [PermissionRequest],
}

/// The new container's request judged: the image's users and passwd, its named volumes, the
/// judged places, the image's identity labels neutralised, and the policy applied (an
/// unreadable passwd judged with every request).
///
/// Errors: [`OpsError::Security`] (refused: nothing was created), the engine's.
async fn judge_new(
    engine: &dyn Engine,
    plan: &NewContainer<'_>,
    mut spec: ContainerSpec,
    facts: &ImageFacts<'_>,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<JudgedSpec> {
    let (opts, loaded, profile, grants) = (plan.opts, plan.loaded, plan.profile, plan.grants);
    let (image, merged, entries) = (facts.image, facts.merged, facts.entries);
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    let image_user = image.info.user.clone().filter(|u| !u.is_empty());
    let users = image_users(engine, profile, (image, merged), &spec, image_user).await;
    // Named volumes judged by what they are, before the binds are resolved: a bind-backed one
    // becomes a bind of its device (spec-note 0444).
    let (volume_requests, missing_volumes) = if hardened {
        judge_named_volumes(engine, profile, grants, &mut spec, &loaded.workspace_folder).await?
    } else {
        Default::default()
    };
    if let Some(refused) = security::refusal(profile, &volume_requests) {
        return Err(refused.into());
    }
    let places = judged_places(profile, &mut spec, loaded, opts, engine.host_socket())?;
    // Identity labels an image carries (its Dockerfile is the repository's) are not carried
    // into the container's labels (spec-note 0421).
    if hardened {
        neutralise_image_identity_labels(&image.info, &mut spec, warnings, reporter);
    }
    let account = users.account.clone();
    let repository_labels = crate::ops::container::repository_labels(merged);
    let input = policy_input(
        (opts, loaded, entries),
        users,
        places,
        repository_labels,
        spec,
    );
    let more = volume_requests
        .into_iter()
        .chain(facts.label_requests.iter().cloned());
    let mut applied = apply_policy(profile, grants, &input, more, reporter)?;
    let container_user = applied.spec.user.clone();
    numeric_user_when_hardened(hardened, &mut applied.spec, &input, loaded);
    Ok(JudgedSpec {
        container_user,
        permissions: applied.requests,
        remote_user: applied.remote_user,
        account,
        missing_volumes,
        spec: applied.spec,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use indexmap::IndexMap;
    use serde_json::json;

    use super::*;
    use crate::engine::ImageInfo;
    use crate::lifecycle::HookEnv;
    use crate::names::METADATA_LABEL;
    use crate::ops::permissions::origins;
    use crate::ops::users::passwd_account;
    use crate::ops::{attach::*, dockerfile::*, options::*, secrets::*};
    use crate::security::{ProfileLimits, Source};
    use crate::settings::Settings;

    #[test]
    fn image_identity_labels_are_emptied_on_the_container_with_a_warning() {
        struct Quiet;
        impl Reporter for Quiet {
            fn report(&self, _: Event) {}
        }
        let image = ImageInfo {
            labels: BTreeMap::from([
                (
                    "devcontainer.local_folder".to_string(),
                    "/other".to_string(),
                ),
                ("devcell.feature_digests".to_string(), "{}".to_string()),
                (METADATA_LABEL.to_string(), "[]".to_string()),
                (
                    "org.opencontainers.image.title".to_string(),
                    "x".to_string(),
                ),
            ]),
            ..ImageInfo::default()
        };
        let mut spec = crate::engine::ContainerSpec::default();
        spec.labels
            .insert("devcontainer.local_folder".into(), "/mine".into());
        let mut warnings = Vec::new();
        neutralise_image_identity_labels(&image, &mut spec, &mut warnings, &Quiet);
        // devcell's own value stays; the image's other identity label is emptied; the
        // metadata label and labels outside the namespaces are inherited as they are.
        assert_eq!(spec.labels["devcontainer.local_folder"], "/mine");
        assert_eq!(spec.labels["devcell.feature_digests"], "");
        assert!(!spec.labels.contains_key(METADATA_LABEL));
        assert!(!spec.labels.contains_key("org.opencontainers.image.title"));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].message.contains("`devcell.feature_digests`"));
    }

    #[test]
    fn passwd_entries_by_name_or_uid() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nbad line\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
        let nobody = passwd_account(passwd, "nobody").unwrap();
        assert_eq!(
            (nobody.uid, nobody.gid, nobody.home.as_str()),
            (65534, 65534, "/nonexistent")
        );
        assert_eq!(passwd_account(passwd, "0:0").unwrap().home, "/root");
        assert_eq!(passwd_account(passwd, "agent"), None);
    }

    #[test]
    fn remote_env_layers_and_null_unsets() {
        let probed: HookEnv = [("PATH", "/bin"), ("X", "probe")].into_iter().collect();
        let cli = IndexMap::from([
            ("X".to_string(), "cli".to_string()),
            ("Y".into(), "cli".into()),
        ]);
        let merged = json!({"remoteEnv": {"Y": "config", "PATH": null}});
        let env = remote_env(probed, &cli, &merged);
        assert_eq!(env.0.get("X").map(String::as_str), Some("cli"));
        assert_eq!(env.0.get("Y").map(String::as_str), Some("config"));
        assert!(!env.0.contains_key("PATH"));
    }

    #[test]
    fn origins_name_features_image_and_config() {
        let entries = vec![
            json!({"capAdd": ["SYS_ADMIN"]}),
            json!({"id": "./f", "capAdd": ["CAP_SYS_PTRACE"], "privileged": true}),
            json!({"mounts": ["type=bind,source=/data,target=/data"], "remoteUser": "me"}),
        ];
        let o = origins(
            &entries,
            &[crate::engine::run_args::parse_mount("type=volume,source=x,target=/x").unwrap()],
        );
        assert_eq!(o.capabilities["SYS_ADMIN"], Source::ImageMetadata);
        assert_eq!(o.capabilities["SYS_PTRACE"], Source::Feature("./f".into()));
        assert_eq!(o.privileged, Some(Source::Feature("./f".into())));
        assert_eq!(o.mounts["/data"], Source::DevcontainerJson);
        assert_eq!(o.mounts["/x"], Source::CommandLine);
        assert_eq!(o.remote_user, Some(Source::DevcontainerJson));
    }

    /// An empty `remoteUser`/`containerUser` takes no part in the merge, so the entry that
    /// wrote it is not the user's origin.
    #[test]
    fn origins_skip_empty_users() {
        let entries = vec![
            json!({"id": "./f", "remoteUser": "dev", "containerUser": "app"}),
            json!({"remoteUser": "", "containerUser": ""}),
        ];
        let o = origins(&entries, &[]);
        assert_eq!(o.remote_user, Some(Source::Feature("./f".into())));
        assert_eq!(o.container_user, Some(Source::Feature("./f".into())));
    }

    #[test]
    fn security_choice_combines_settings_and_flags() {
        let mut settings = Settings::default();
        settings.security.allow = vec!["cap:NET_ADMIN".into()];
        let opts = SecurityOptions {
            allow: vec!["root".into()],
            pids_limit: Some(64),
            ..SecurityOptions::default()
        };
        let crate::security::Choice {
            profile, grants, ..
        } = security_choice(&opts, &settings).unwrap();
        let SecurityProfile::Hardened(limits) = profile else {
            panic!("hardened by default")
        };
        assert_eq!(limits.pids, 64);
        assert_eq!(limits.memory_bytes, 4 << 30);
        assert!(grants.root && grants.capabilities.contains("NET_ADMIN"));
        let reference = SecurityOptions {
            profile: Some(crate::settings::Profile::Reference),
            ..SecurityOptions::default()
        };
        assert_eq!(
            security_choice(&reference, &settings)
                .unwrap()
                .profile
                .name(),
            "reference"
        );
        let bad = SecurityOptions {
            allow: vec!["everything".into()],
            ..SecurityOptions::default()
        };
        assert!(security_choice(&bad, &settings).is_err());
    }

    /// The limits with `up`'s error ([`OpsError::InvalidLimit`]).
    fn limits(opts: &SecurityOptions, settings: &Settings) -> Result<ProfileLimits> {
        Ok(crate::security::choice::limits(opts, settings)?)
    }

    #[test]
    fn limits_come_from_flags_then_settings_and_bad_values_are_refused() {
        let settings = Settings::default();
        let defaults = limits(&SecurityOptions::default(), &settings).unwrap();
        assert_eq!(defaults, ProfileLimits::default());
        let flags = SecurityOptions {
            pids_limit: Some(77),
            memory: Some("1g".into()),
            cpus: Some(1.5),
            ..SecurityOptions::default()
        };
        assert_eq!(
            limits(&flags, &settings).unwrap(),
            ProfileLimits {
                pids: 77,
                memory_bytes: 1 << 30,
                nano_cpus: 1_500_000_000
            }
        );
        let bytes = SecurityOptions {
            memory: Some("536870912".into()),
            ..SecurityOptions::default()
        };
        assert_eq!(limits(&bytes, &settings).unwrap().memory_bytes, 512 << 20);
        let bad = |opts: SecurityOptions, needle: &str| {
            let err = limits(&opts, &settings).unwrap_err();
            assert!(matches!(err, OpsError::InvalidLimit(_)), "{err}");
            assert_eq!(err.code(), crate::diagnostics::ErrorCode::InvalidArgument);
            assert!(err.to_string().contains(needle), "{err}");
        };
        for pids in [0, -1] {
            bad(
                SecurityOptions {
                    pids_limit: Some(pids),
                    ..SecurityOptions::default()
                },
                "--pids-limit",
            );
        }
        for memory in ["lots", "1x", "", "5m", "0"] {
            bad(
                SecurityOptions {
                    memory: Some(memory.into()),
                    ..SecurityOptions::default()
                },
                "--memory",
            );
        }
        for cpus in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.001, 5000.0] {
            bad(
                SecurityOptions {
                    cpus: Some(cpus),
                    ..SecurityOptions::default()
                },
                "--cpus",
            );
        }
        // the settings file is checked too
        let mut zero = Settings::default();
        zero.security.pids_limit = 0;
        assert!(limits(&SecurityOptions::default(), &zero).is_err());
        // and under `reference`, where the limits are not applied
        let reference = SecurityOptions {
            profile: Some(crate::settings::Profile::Reference),
            cpus: Some(0.0),
            ..SecurityOptions::default()
        };
        assert!(security_choice(&reference, &settings).is_err());
    }

    #[test]
    fn secrets_file_names_must_be_env_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        std::fs::write(&file, r#"{"A": "x", "B_2": ""}"#).unwrap();
        assert_eq!(read_secrets_file(&file).unwrap().len(), 2);
        for (text, needle) in [
            (r#"{"A=B": "v3ry-s3cret"}"#, "A=B"),
            (r#"{"": "v3ry-s3cret"}"#, "environment variable name"),
            (r#"{"A": "v3ry\u0000s3cret"}"#, "NUL"),
            (r#"{"A": 1}"#, "not a string"),
            (r#"["v3ry-s3cret"]"#, "JSON object"),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = read_secrets_file(&file).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
            assert!(!err.contains("v3ry"), "a value leaked: {err}");
        }
    }

    #[test]
    fn image_name_is_like_the_reference() {
        let name = image_name(std::path::Path::new("/w/My Repo"));
        assert!(name.starts_with("vsc-myrepo-"), "{name}");
        assert_eq!(name.len(), "vsc-myrepo-".len() + 64);
    }
}
