//! `up` of a Compose configuration (`dockerComposeFile` + `service`), over the same steps as an
//! image configuration ([`super::up`]): judge everything first, then the image, the container
//! request, the security profile, and the hooks through the engine's exec at
//! `workspaceFolder` (default `/`) in the primary service's container
//! ([spec: Compose properties](https://containers.dev/implementors/json_reference/#compose-specific)).
//!
//! Steps: the project ([`compose_build_target`]: Compose's resolved model, the reference CLI's
//! project name) → [`judge_configuration`] with every service's requests
//! ([`security::compose::compose_requests`]; one refusal, before anything is created) → the
//! primary container by Compose's project/service labels (reused: started again with the files
//! it was created with) → else the service's image (`docker compose build` for a `build`
//! service, else inspected or pulled), Features layered on it, the uid layer → the container
//! request ([`container_spec`] + [`security::apply`]) written as the primary service of an
//! override file, the sidecars' profile with it ([`security::compose::judge_compose`]) →
//! `docker compose up -d [runServices… service]` → hooks (spec-notes 0600–0605).

use std::path::PathBuf;

use serde_json::Value;

use crate::config::metadata;
use crate::config::model::ConfigKind;
use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, Engine};
use crate::ops::bring_up::{ContainerAction, UpResult, after_start, initialize_on_host, up_result};
use crate::ops::compose::{
    ComposeTarget, claim_project, compose_build_target, find_service_container,
    primary_of_workspace,
};
use crate::ops::compose_builds::write_override;
use crate::ops::compose_network::{self, ComposeNetwork};
use crate::ops::compose_restart::{self, Restart};
use crate::ops::container::{SpecInputs, container_spec};
use crate::ops::create::{
    Started, UserChoice, apply_policy, identity_labels, image_users, merged_with_uid_layer,
    numeric_user_when_hardened, policy_input, provenance_labels, verify_and_finish,
};
use crate::ops::entries::existing_entries;
use crate::ops::error::{OpsError, Result};
use crate::ops::existing::settle_existing;
use crate::ops::hooks::{bring_up_lock, prepare_state_dir_if_needed};
use crate::ops::image::{
    DevImage, PreparedImage, dev_image_from, neutralise_image_identity_labels,
};
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::ops::permissions::{
    ConfigurationJudgement, UpChoice, check_existing, cli_mounts, judge_configuration,
    judged_options, judged_places, with_build_network,
};
use crate::ops::target::{id_labels, inspect, join_labels, short};
use crate::progress::{Event, Reporter};
use crate::security::host_path::Places;
use crate::security::{self, Grants, PermissionRequest, PolicyInput, SecurityProfile};

/// Brings a Compose configuration up (see the module docs); `loaded` is the configuration `up`
/// loaded, `profile` and `grants` the user's choice, `earlier` what was asked before it (a
/// handoff's git directories), judged in the same refusal.
///
/// Steps: the identity lock → [`judge_project`] (one refusal before anything is made) → the
/// primary container as it is ([`existing_primary`], [`recheck_existing`]) → the
/// `initializeCommand` → [`bring_up_primary`] (running, started or created) → egress → attach
/// and hooks → [`compose_result`].
///
/// Errors: as [`super::up::up_with`]; [`OpsError::Compose`] for a Compose command that
/// fails (its stderr); [`OpsError::Security`] (refused: no container, network or volume
/// was created).
pub(crate) async fn up_compose(
    engine: &dyn Engine,
    opts: &UpOptions,
    choice: UpChoice,
    earlier: &[PermissionRequest],
    reporter: &dyn Reporter,
) -> Result<UpResult> {
    // One find-or-create (and one run of the create hooks) at a time per identity, taken
    // before the judgement (spec-note 0422).
    let id_labels = id_labels(&opts.target, &choice.loaded);
    let devcontainer_id = crate::config::id::devcontainer_id(&id_labels);
    let _lock = bring_up_lock(&devcontainer_id, reporter).await?;
    let loaded = &choice.loaded;
    let (opts, gpu_warnings) =
        crate::ops::gpu::settled_options(engine, opts, &loaded.typed, reporter).await?;
    let project = judge_project(engine, &opts, &choice, earlier).await?;
    if matches!(choice.profile, SecurityProfile::Hardened(_)) {
        // a container devcell cannot stop must not write what was judged (spec-note 0478)
        crate::ops::foreign_writers::refuse_foreign_writers(
            engine,
            &loaded.workspace_folder,
            Some(&project.target.project.name),
            None,
        )
        .await?;
    }
    let opts = &project.opts;
    let mut warnings = loaded.warnings.clone();
    warnings.extend(gpu_warnings);
    let existing = existing_primary(engine, &project.target, &id_labels, opts, reporter).await?;
    let (existing, start_files) = startable(
        engine,
        &project.target,
        (
            existing,
            matches!(choice.profile, SecurityProfile::Hardened(_)),
        ),
        &mut warnings,
        reporter,
    )
    .await?;
    let mut permissions: Vec<PermissionRequest> = project.judged.requests.clone();
    permissions.extend(project.reported.iter().cloned());
    permissions.extend(recheck_existing(engine, &project, existing.as_ref(), &choice).await?);
    let early_warning = project.early.warning.as_ref();
    initialize_on_host(
        (project.init_stage.as_ref(), &project.host_requests),
        loaded,
        early_warning,
        &mut warnings,
        reporter,
    )
    .await?;
    let ids = (&id_labels, devcontainer_id.as_str());
    let (container, entries, action) = bring_up_primary(
        engine,
        &project,
        &choice,
        (existing, start_files),
        ids,
        (&mut permissions, &mut warnings),
        reporter,
    )
    .await?;
    permissions.splice(0..0, project.host_requests.iter().cloned());
    let (egress, attached, lifecycle) = after_start(
        engine,
        &container,
        (loaded, entries),
        (&devcontainer_id, action),
        opts,
        (choice.network, &project.early.requests),
        &mut warnings,
        reporter,
    )
    .await?;
    Ok(compose_result(
        &project,
        &choice,
        &devcontainer_id,
        (&container, action),
        (attached, lifecycle),
        permissions,
        warnings,
        egress,
    ))
}

/// What [`judge_project`] decided before anything is created: the project, its judgement and
/// the options `up` goes on with.
struct JudgedProject {
    /// The project and its resolved model.
    target: ComposeTarget,
    /// The services' requests and the sidecars' additions.
    judged: security::compose::ComposeJudgement,
    /// The host-variable and foreign-resource requests, reported with the services' own.
    reported: Vec<PermissionRequest>,
    /// The host variables, the builds' network and their warning.
    early: crate::ops::permissions::EarlyRequests,
    /// `initializeCommand`, granted.
    init_stage: Option<crate::lifecycle::Stage>,
    /// The host commands' requests.
    host_requests: Vec<PermissionRequest>,
    /// The project's network choice and its closed networks (empty unless closed).
    mode: ComposeNetwork,
    networks: serde_json::Map<String, Value>,
    /// `opts` as judged: the visible host environment and the builds' network.
    opts: UpOptions,
}

/// Judges the whole project in one refusal before anything runs or is created: every
/// service's requests with the configuration's own, the sidecars' profile, and the network
/// refusals of a closed project (spec-notes 0601, 0604).
///
/// Errors: [`OpsError::Security`] (the one refusal), [`OpsError::Compose`],
/// [`OpsError::Unsupported`].
async fn judge_project(
    engine: &dyn Engine,
    opts: &UpOptions,
    choice: &UpChoice,
    earlier: &[PermissionRequest],
) -> Result<JudgedProject> {
    let (profile, grants) = (&choice.profile, &choice.grants);
    // `none` and `allowlist` close the project networks (spec-note 0604).
    let mode = ComposeNetwork::of(choice.network);
    let ServiceRequests {
        target,
        places,
        requests: service_requests,
        reported,
    } = service_requests(engine, opts, choice, earlier).await?;
    let ConfigurationJudgement {
        early,
        init_stage,
        host_requests,
        reuse_requests: _,
        container_requests: _,
    } = judge_configuration(engine, opts, choice, &service_requests, None).await?;
    let mut judged =
        security::compose::judge_compose(profile, &target.model, &target.service, &places, grants)?;
    let target = crate::ops::compose_builds::close_builds(
        target,
        (profile, grants),
        mode.closed(),
        &mut judged.requests,
    )?;
    let networks = if mode.closed() {
        if mode == ComposeNetwork::Allowlist {
            compose_network::check_allowlist_namespaces(&target.model, &target.service)?;
        }
        compose_network::close_sidecars(&target.model, &target.service, &mut judged.sidecars);
        compose_network::closed_networks(&target.model)?
    } else {
        serde_json::Map::new()
    };
    let opts = with_build_network(judged_options(opts, profile, grants), &early);
    Ok(JudgedProject {
        target,
        judged,
        reported,
        early,
        init_stage,
        host_requests,
        mode,
        networks,
        opts,
    })
}

/// The workspace's primary container, after claiming the project: removed first when
/// `--remove-existing-container` asks, and required when `--expect-existing-container` does.
///
/// Errors: [`OpsError::NoContainer`] (expected, none), the engine's.
async fn existing_primary(
    engine: &dyn Engine,
    target: &ComposeTarget,
    id_labels: &std::collections::BTreeMap<String, String>,
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<Option<ContainerInfo>> {
    let existing = primary_of_workspace(engine, target, id_labels).await?;
    claim_project(engine, target, id_labels).await?;
    let labels = crate::engine::compose::service_labels(&target.project.name, &target.service);
    settle_existing(engine, existing, opts, &labels, reporter).await
}

/// The existing primary as `up` goes on with it, and the files a stopped one is started with:
/// a stopped project whose containers are not all what today's judged files make is brought
/// up as a new one (`None`, with a warning), its containers removed first so that Compose
/// creates every one from today's files ([`compose_restart::remove_containers`], spec-note
/// 0681).
///
/// Errors: the engine's, Compose's.
async fn startable(
    engine: &dyn Engine,
    target: &ComposeTarget,
    (existing, hardened): (Option<ContainerInfo>, bool),
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<(Option<ContainerInfo>, Vec<PathBuf>)> {
    let info = match existing {
        Some(info) if !info.running => info,
        Some(running) => return Ok((Some(running), Vec::new())),
        None => {
            // No primary of today's service, but containers of the project (a renamed
            // primary's sidecars, those `--remove-existing-container` left): made from files
            // nobody judged today, and Compose would keep those whose hash matches (attack 33,
            // P2 and P3).
            if let Some(reason) = compose_restart::left_without_primary(engine, target).await? {
                reporter.report(Event::Status(format!(
                    "Compose project `{}`: {reason}; they are removed and every container is created from today's files",
                    target.project.name
                )));
                compose_restart::remove_containers(engine, target).await?;
            }
            return Ok((None, Vec::new()));
        }
    };
    match compose_restart::restart(engine, target, &info, hardened).await? {
        Restart::AsItIs(files) => Ok((Some(info), files)),
        Restart::Again(reason) => {
            compose_restart::remove_containers(engine, target).await?;
            let message = format!(
                "the stopped Compose project `{}` is not started as it is ({reason}): its containers were removed and every one is created from today's files",
                target.project.name
            );
            reporter.report(Event::Status(format!("warning: {message}")));
            warnings.push(Warning {
                location: None,
                message,
            });
            Ok((None, Vec::new()))
        }
    }
}

/// The existing primary judged again as a reused container is (its project network is not a
/// request), and a closed project's refusals: a container created open is not reused closed,
/// and no open network of the project may exist before a closed one is created.
///
/// Errors: [`OpsError::Unsupported`], [`OpsError::Security`], the engine's.
async fn recheck_existing(
    engine: &dyn Engine,
    project: &JudgedProject,
    existing: Option<&ContainerInfo>,
    choice: &UpChoice,
) -> Result<Vec<PermissionRequest>> {
    let (target, mode, opts) = (&project.target, project.mode, &project.opts);
    let Some(info) = existing else {
        if mode.closed() {
            compose_network::refuse_open(
                engine,
                target,
                &project.networks,
                compose_network::NetworkCheck::BeforeCreate,
            )
            .await?;
        }
        return Ok(Vec::new());
    };
    if mode == ComposeNetwork::Closed && ComposeNetwork::of_labels(&info.labels) != mode {
        return Err(OpsError::Unsupported {
            message: format!(
                "the existing container {} of the Compose project `{}` was created with network `{}`, not `none`",
                short(&info.id),
                target.project.name,
                ComposeNetwork::of_labels(&info.labels).name()
            ),
            hint: Some(
                "remove the project first (`devcell delete`, or `devcell down --remove`) to bring it up closed".into(),
            ),
        });
    }
    let loaded = &choice.loaded;
    let entries = existing_entries(info, loaded, &opts.target.env, &mut Vec::new());
    // Compose's own project network is the container's, not a request (spec-note 0604).
    let mut checked = info.clone();
    if project_networks(target).contains(&checked.host.network_mode) {
        checked.host.network_mode = "bridge".to_string();
    }
    check_existing(
        engine,
        &checked,
        &entries,
        loaded,
        &choice.profile,
        &choice.grants,
        choice.network,
        opts,
    )
    .await
}

/// The primary container running: as it is, started again with the files it was created with
/// (its override among them), or created ([`create`]); its entries and what was done.
///
/// Errors: [`OpsError::Compose`], the engine's, [`create`]'s.
async fn bring_up_primary(
    engine: &dyn Engine,
    project: &JudgedProject,
    choice: &UpChoice,
    (existing, start_files): (Option<ContainerInfo>, Vec<PathBuf>),
    (id_labels, devcontainer_id): (&std::collections::BTreeMap<String, String>, &str),
    (permissions, warnings): (&mut Vec<PermissionRequest>, &mut Vec<Warning>),
    reporter: &dyn Reporter,
) -> Result<(ContainerInfo, Vec<Value>, ContainerAction)> {
    let (target, opts, loaded) = (&project.target, &project.opts, &choice.loaded);
    Ok(match existing {
        Some(info) if info.running => {
            let entries = existing_entries(&info, loaded, &opts.target.env, warnings);
            (info, entries, ContainerAction::Running)
        }
        Some(info) => {
            // Started again with the files it was created with (its override among them), and
            // only the containers that exist: `start` creates nothing (spec-note 0601). Each of
            // them is what today's judged files make ([`startable`], spec-note 0681).
            reporter.report(Event::Status(format!(
                "starting project {} (container {})",
                target.project.name,
                short(&info.id)
            )));
            // what Compose reads now is what was judged (spec-note 0400)
            target.judged.refuse_changed(&target.project).await?;
            target.with_files(start_files).start(&[]).await?;
            // the project's containers run again: recorded before anything else can fail
            crate::ops::bring_up::record_git_baseline(&info.id, opts);
            let info = inspect(engine, &info.id).await?;
            prepare_state_dir_if_needed(engine, &info).await?;
            let entries = existing_entries(&info, loaded, &opts.target.env, warnings);
            (info, entries, ContainerAction::Started)
        }
        None => {
            // the primary's moved loopback ports travel with the sidecars' additions, under its
            // name (spec-note 0431)
            let mut others = project.judged.sidecars.clone();
            if let Some(ports) = &project.judged.primary_ports {
                others.insert(target.service.clone(), serde_json::json!({"ports": ports}));
            }
            for moved in &project.judged.moved_ports {
                let message = moved.warning();
                reporter.report(Event::Status(format!("warning: {message}")));
                warnings.push(Warning {
                    location: None,
                    message,
                });
            }
            let created = create(
                engine,
                opts,
                loaded,
                target,
                &others,
                (project.mode, &project.networks),
                &choice.profile,
                &choice.grants,
                &project.early.requests,
                id_labels,
                devcontainer_id,
                warnings,
                reporter,
            )
            .await?;
            permissions.extend(created.permissions);
            (created.info, created.entries, ContainerAction::Created)
        }
    })
}

/// The [`UpResult`] of a Compose `up`: the early requests first, then the rest.
#[allow(clippy::too_many_arguments)]
fn compose_result(
    project: &JudgedProject,
    choice: &UpChoice,
    devcontainer_id: &str,
    (container, action): (&ContainerInfo, ContainerAction),
    (attached, lifecycle): (
        crate::ops::attach::Attached,
        crate::lifecycle::LifecycleReport,
    ),
    permissions: Vec<PermissionRequest>,
    warnings: Vec<Warning>,
    egress: Option<crate::ops::egress::EgressStatus>,
) -> UpResult {
    let permissions = project
        .early
        .requests
        .iter()
        .cloned()
        .chain(permissions)
        .collect();
    up_result(
        &project.opts,
        (choice.loaded.clone(), &choice.profile),
        devcontainer_id,
        (container, action),
        (attached, lifecycle),
        (permissions, project.early.host_env.clone()),
        warnings,
        (egress, Some(project.target.project.name.clone())),
    )
}

/// The project's target and where its host paths are judged ([`compose_places`]), with every
/// service's requests, judged on Compose's model after `earlier` (a handoff's git
/// directories), and the host variables the files interpolate: what [`judge_configuration`]
/// judges with the rest of the configuration, in one refusal before anything runs or is
/// created (spec-note 0601). `up` and the plan read them alike.
struct ServiceRequests {
    target: ComposeTarget,
    places: Places,
    /// `earlier`, then the services' requests, then `reported`.
    requests: Vec<PermissionRequest>,
    /// The host-variable and foreign-resource requests, reported with the services' own.
    reported: Vec<PermissionRequest>,
}

/// [`ServiceRequests`] of `choice`'s Compose configuration.
///
/// Errors: as [`compose_build_target`] (Compose), the engine's (foreign resources).
async fn service_requests(
    engine: &dyn Engine,
    opts: &UpOptions,
    choice: &UpChoice,
    earlier: &[PermissionRequest],
) -> Result<ServiceRequests> {
    let engine_socket = engine.host_socket();
    let (profile, grants) = (&choice.profile, &choice.grants);
    let loaded = &choice.loaded;
    let mut target = compose_build_target(engine, loaded, &opts.target, (profile, grants)).await?;
    let places = compose_places(loaded, opts, engine_socket);
    // another workspace's project (its containers) is refused as that, before its volumes
    // and networks are requests no grant would make usable (spec-notes 0603, 0613)
    claim_project(engine, &target, &id_labels(&opts.target, loaded)).await?;
    // the model's volumes as the engine holds them: a bind-backed one is judged as its bind
    let held = held_volumes(engine, &target).await?;
    security::volumes::compose_model_as_held(&mut target.model, &held, &places.workspace);
    let env = &opts.target.env;
    let mut requests = earlier.to_vec();
    requests.extend(security::compose::compose_requests(
        profile,
        &target.model,
        &target.service,
        &places,
        grants,
    ));
    // judged with the rest, and reported with the services' own requests
    let mut reported = variable_requests(&target, profile, grants, env).await?;
    // whose the project's volumes and networks are: this workspace's only with its label
    let workspace = matches!(profile, SecurityProfile::Hardened(_))
        .then_some(loaded.workspace_folder.as_path());
    reported.extend(security::compose::foreign_resource_requests(
        profile,
        &target.model,
        &foreign_resources(engine, &target, &held, workspace).await?,
        grants,
    ));
    // the local base images' `ONBUILD` triggers (the others after their pull, before the build)
    reported.extend(onbuild_requests(engine, &target, (profile, grants), None).await?);
    // the registries the project's pulls would reach under a closed network (attack 23, N9)
    reported.extend(
        crate::ops::permissions::compose_registry_requests(
            engine,
            loaded,
            &target,
            (profile, grants),
            choice.network.closed(),
        )
        .await?,
    );
    requests.extend(reported.iter().cloned());
    Ok(ServiceRequests {
        target,
        places,
        requests,
        reported,
    })
}

/// One service of a [`ComposePreview`].
#[derive(Debug, Clone)]
pub(crate) struct ServicePreview {
    /// The service name.
    pub(crate) name: String,
    /// `image` of the model, else `build <context>`.
    pub(crate) image: String,
    /// Whether it is the primary service (`service`).
    pub(crate) primary: bool,
    /// Whether `up` starts it (`runServices`, the primary always).
    pub(crate) started: bool,
    /// Its container, when the project has one.
    pub(crate) container: Option<ContainerInfo>,
}

/// What [`up_compose`] would judge and find, without creating anything (`handoff --plan`).
#[derive(Debug)]
pub(crate) struct ComposePreview {
    /// The project name (spec-note 0600).
    pub(crate) project: String,
    /// Every request, judged (none refused: a refusal is the error).
    pub(crate) requests: Vec<PermissionRequest>,
    /// Every service of the model, in its order.
    pub(crate) services: Vec<ServicePreview>,
}

/// Judges a Compose configuration as [`up_compose`] does before anything is created: the
/// network choice, Compose's model (`docker compose config`), every service's requests with
/// the configuration's own (host variables, host commands, the primary service's container
/// as devcontainer.json asks for it) and `earlier`; then the project's containers are looked
/// up. Only Compose's `config` and engine reads run (spec-note 0609).
///
/// Errors: as [`up_compose`] before it creates anything: [`OpsError::Security`] (the one
/// refusal), [`OpsError::Compose`], [`OpsError::Unsupported`].
pub(crate) async fn preview_compose(
    engine: &dyn Engine,
    opts: &UpOptions,
    choice: &UpChoice,
    earlier: &[PermissionRequest],
) -> Result<ComposePreview> {
    let ServiceRequests {
        target,
        mut requests,
        ..
    } = service_requests(engine, opts, choice, earlier).await?;
    // the network refusals `up` makes before anything is created
    let mode = ComposeNetwork::of(choice.network);
    if mode == ComposeNetwork::Allowlist {
        compose_network::check_allowlist_namespaces(&target.model, &target.service)?;
    }
    if mode.closed() {
        compose_network::closed_networks(&target.model)?;
    }
    let judgement = judge_configuration(engine, opts, choice, &requests, None).await?;
    let at = earlier.len();
    requests.splice(
        at..at,
        judgement
            .early
            .requests
            .into_iter()
            .chain(judgement.host_requests),
    );
    requests.extend(judgement.container_requests);
    let up_services = target.up_services();
    // the primary as `up` finds it: another workspace's is the same error
    let primary =
        primary_of_workspace(engine, &target, &id_labels(&opts.target, &choice.loaded)).await?;
    let mut services = Vec::new();
    for (name, service) in target
        .model
        .get("services")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let image = match service.get("image").and_then(Value::as_str) {
            Some(image) if service.get("build").is_none() => image.to_string(),
            _ => format!(
                "build {}",
                service
                    .pointer("/build/context")
                    .and_then(Value::as_str)
                    .unwrap_or(".")
            ),
        };
        services.push(ServicePreview {
            name: name.clone(),
            image,
            primary: *name == target.service,
            started: up_services.is_empty() || up_services.contains(name),
            container: if *name == target.service {
                primary.clone()
            } else {
                find_service_container(engine, &target.project.name, name).await?
            },
        });
    }
    Ok(ComposePreview {
        project: target.project.name.clone(),
        requests,
        services,
    })
}

/// The host variables the Compose files interpolate (`${VAR}`, as Compose lists them), each a
/// [`security::Permission::HostEnv`] request like devcontainer.json's `${localEnv:VAR}`
/// (`HOME`, `USER`, `LOGNAME` cross unasked; the engine's own variables are not the files').
/// A variable an env file of the project defines (`--env-file`, or the `.env` Compose reads
/// beside the first file) is no host variable when the host has none of that name: its value
/// is the repository's own (spec-note 0608).
async fn variable_requests(
    target: &ComposeTarget,
    profile: &SecurityProfile,
    grants: &Grants,
    env: &std::collections::HashMap<String, String>,
) -> Result<Vec<PermissionRequest>> {
    let names = target.project.variables().await?;
    let from_files = crate::ops::compose::env_file_names(target, env).await;
    let uses: Vec<security::host_env::HostEnvUse> = names
        .into_iter()
        .filter(|n| !crate::ops::compose::is_tool_variable(n))
        .filter(|n| env.contains_key(n) || !from_files.contains(n))
        .map(|name| security::host_env::HostEnvUse {
            name,
            properties: vec!["dockerComposeFile".to_string()],
            persists_in_image: false,
        })
        .collect();
    Ok(security::host_env::judge(profile, grants, &uses)
        .into_iter()
        .zip(&uses)
        .map(|(mut r, u)| {
            r.source = security::Source::ComposeService {
                service: "*".to_string(),
                property: format!("${{{}}}", u.name),
            };
            r
        })
        .collect())
}

/// The requests of the builds' base images with `ONBUILD` triggers
/// ([`security::compose::onbuild_requests`], attacks G9; spec-note 0612), under `hardened`:
/// each base image of each service's build is inspected on the engine. A base not there yet
/// is left out while judging the configuration (`pull: None`, nothing is pulled before the
/// judgement) and pulled, then judged, right before the build (`pull: Some`): what the build
/// then runs `FROM` is the image judged (no build of devcell's asks for a newer one).
///
/// Errors: [`OpsError::Engine`] (an inspect, a pull).
async fn onbuild_requests(
    engine: &dyn Engine,
    target: &ComposeTarget,
    (profile, grants): (&SecurityProfile, &Grants),
    pull: Option<&dyn Reporter>,
) -> Result<Vec<PermissionRequest>> {
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return Ok(Vec::new());
    }
    let mut triggered = Vec::new();
    for (service, bases) in security::compose::build_bases(&target.model) {
        for (base, triggers) in
            crate::ops::dockerfile_judge::triggered_bases(engine, &bases, pull).await?
        {
            triggered.push((service.clone(), base, triggers));
        }
    }
    Ok(security::compose::onbuild_requests(
        profile, grants, &triggered,
    ))
}

/// Every top-level volume of the model the engine already holds, by engine name (the
/// volume's `name`, else its key), `external` ones and those named with `name:` included
/// (spec-note 0400, attacks G1).
///
/// Errors: [`OpsError::Engine`].
async fn held_volumes(
    engine: &dyn Engine,
    target: &ComposeTarget,
) -> Result<std::collections::BTreeMap<String, crate::engine::VolumeInfo>> {
    let mut held = std::collections::BTreeMap::new();
    for name in security::compose::resource_names(&target.model).0 {
        if let Some(info) = engine.inspect_volume(&name).await? {
            held.insert(name, info);
        }
    }
    Ok(held)
}

/// The model's volumes and networks that already exist on the engine and are not this
/// workspace's project's ([`security::compose::foreign_of`]): without Compose's project label
/// for it (spec-note 0601), or, under `hardened` (`workspace`, the host workspace folder),
/// without devcell's workspace label for this workspace (spec-note 0613, attacks G6: another
/// workspace with the same folder name, or files naming its project, share the project
/// name); `held` is [`held_volumes`].
///
/// Errors: [`OpsError::Engine`].
async fn foreign_resources(
    engine: &dyn Engine,
    target: &ComposeTarget,
    held: &std::collections::BTreeMap<String, crate::engine::VolumeInfo>,
    workspace: Option<&std::path::Path>,
) -> Result<security::compose::ForeignResources> {
    let project = target.project.name.as_str();
    let networks = security::compose::resource_names(&target.model).1;
    let mut foreign = security::compose::ForeignResources::default();
    for (name, info) in held {
        if let Some(whose) = security::compose::foreign_of(&info.labels, project, workspace) {
            foreign.volumes.insert(name.clone(), whose);
        }
    }
    // listed first: an inspect by name also answers an id prefix
    let all = if networks.is_empty() {
        Vec::new()
    } else {
        engine.find_networks(&Default::default()).await?
    };
    for name in networks.into_iter().filter(|n| all.contains(n)) {
        if foreign.networks.contains_key(&name) {
            continue;
        }
        // an unlabelled project network holds no data: Compose recreates it labelled when no
        // container uses it, and the claim refused a project with another workspace's
        // containers (the reference CLI's own networks stay usable; spec-note 0613)
        if let Some(info) = engine.inspect_network(&name).await?
            && let Some(whose) = security::compose::foreign_of(&info.labels, project, workspace)
            && whose != security::compose::Foreign::Unlabelled
        {
            foreign.networks.insert(name, whose);
        }
    }
    Ok(foreign)
}

/// Where the Compose files' host paths are judged: the workspace folder (not a git root
/// above it), the host home folder and the engine socket (spec-note 0601).
pub(crate) fn compose_places(
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
    engine_socket: Option<&std::path::Path>,
) -> Places {
    let home = opts.target.env.get("HOME").map(PathBuf::from);
    Places::new(&loaded.workspace_folder, home.as_deref(), engine_socket)
}

/// The names of the project's own networks (not `external`): `<project>_<key>`, or the
/// network's explicit `name`.
fn project_networks(target: &ComposeTarget) -> Vec<String> {
    let mut names = vec![format!("{}_default", target.project.name)];
    for (key, def) in target
        .model
        .get("networks")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if def.get("external").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        names.push(format!("{}_{key}", target.project.name));
        if let Some(name) = def.get("name").and_then(Value::as_str) {
            names.push(name.to_string());
        }
    }
    names
}

/// What [`create`] made.
struct Created {
    info: ContainerInfo,
    entries: Vec<Value>,
    permissions: Vec<PermissionRequest>,
}

/// [`security::host_path::compose_read_only_additions`] applied: the primary's additions
/// become read-only bind mounts of `spec` (a target `spec` already mounts is left as it is), the
/// other services' are appended to their `volumes` in the returned copy of `sidecars`.
fn keep_shields_read_only(
    model: &Value,
    primary: &str,
    shields: &[security::host_path::Cover],
    spec: &mut crate::engine::ContainerSpec,
    sidecars: &serde_json::Map<String, Value>,
) -> serde_json::Map<String, Value> {
    let mut sidecars = sidecars.clone();
    let resolve =
        |p: &std::path::Path| security::host_path::resolve(p).unwrap_or_else(|_| p.to_path_buf());
    for (service, added) in security::host_path::compose_cover_additions(model, shields, resolve) {
        if service == primary {
            for volume in added {
                let (Some(source), Some(target)) = (
                    volume.get("source").and_then(Value::as_str),
                    volume.get("target").and_then(Value::as_str),
                ) else {
                    continue;
                };
                // a target devcell mounts itself already wins over the service's volume there
                if spec.mounts.iter().any(|m| m.target == target) {
                    continue;
                }
                spec.mounts.push(crate::engine::Mount {
                    kind: crate::engine::MountKind::Bind,
                    source: Some(source.to_string()),
                    target: target.to_string(),
                    read_only: volume
                        .get("read_only")
                        .and_then(Value::as_bool)
                        .unwrap_or(true),
                });
            }
            continue;
        }
        let entry = sidecars
            .entry(service)
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(entry) = entry {
            match entry.get_mut("volumes") {
                Some(Value::Array(list)) => list.extend(added),
                _ => {
                    entry.insert("volumes".to_string(), Value::Array(added));
                }
            }
        }
    }
    sidecars
}

/// The service's image, Features and uid layer on it, the override file, `up -d`.
///
/// Steps: [`service_dev_image`] → the create request with its labels ([`service_spec`]) →
/// [`service_policy_input`] → the profile applied, identity labels, egress and the closed
/// networks → the shields kept read-only in the sidecars → [`start_project`] →
/// [`refuse_replaced_image`] → the uids verified and the lockfile written.
#[allow(clippy::too_many_arguments)]
async fn create(
    engine: &dyn Engine,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    target: &ComposeTarget,
    sidecars: &serde_json::Map<String, Value>,
    (mode, networks): (ComposeNetwork, &serde_json::Map<String, Value>),
    profile: &SecurityProfile,
    grants: &Grants,
    early_requests: &[PermissionRequest],
    id_labels: &std::collections::BTreeMap<String, String>,
    devcontainer_id: &str,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<Created> {
    let (dev, merged, provided) = service_dev_image(
        engine,
        opts,
        loaded,
        target,
        (profile, grants),
        devcontainer_id,
        warnings,
        reporter,
    )
    .await?;
    let DevImage {
        image,
        entries,
        label,
        label_requests,
        label_host_env: _,
        lock: pending_lock,
    } = dev;
    let mut spec = service_spec(opts, loaded, target, &image, &merged, id_labels, label)?;
    provenance_labels(
        &mut spec,
        (provided.as_ref(), pending_lock.as_ref()),
        profile,
        loaded,
    );
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    let JudgedService {
        mut spec,
        mut permissions,
        remote_user: applied_remote,
        shields,
    } = judge_service(
        engine,
        (profile, grants),
        spec,
        (&image, &merged, &entries),
        (opts, loaded, target),
        (early_requests, &label_requests),
        (warnings, reporter),
    )
    .await?;
    permissions.extend(refuse_override_swaps(target, &merged, profile, grants)?);
    let token = primary_network(&mut spec, mode, target, devcontainer_id)?;
    let sidecars = keep_shields_read_only(
        &target.model,
        &target.service,
        &shields,
        &mut spec,
        sidecars,
    );
    // the project's volumes and networks made for this workspace (spec-note 0613)
    let owned = hardened
        .then(|| security::compose::workspace_labels(&target.model, &loaded.workspace_folder));
    let info = start_project(
        engine,
        target,
        (&spec, &sidecars),
        (mode, networks),
        owned,
        (&image, &token),
        (opts, reporter),
    )
    .await?;
    refuse_replaced_image(engine, hardened, &info, &image, target).await?;
    let started = Started {
        id: &info.id,
        container_user: Some(info.user.as_str()).filter(|u| !u.is_empty()),
        remote_user: applied_remote.as_deref(),
        permissions: &permissions,
        grants,
        hardened,
    };
    let info = verify_and_finish(engine, started, pending_lock, opts, warnings, reporter).await?;
    Ok(Created {
        info,
        entries,
        permissions,
    })
}

/// The swap rule over the project with the binds the configuration gives the primary through
/// its override file (`merged`'s `mounts`: devcontainer.json's and the Features'), attack 31
/// M1 ([`security::compose::primary_bind_swaps`]): the granted requests, for the result.
/// devcell's own covers of the workspace's git directories are left out (spec-note 0672).
///
/// Errors: [`OpsError::Security`] when one is refused (nothing was created);
/// [`OpsError::Unsupported`] for a `mounts` entry that is not a mount.
fn refuse_override_swaps(
    target: &ComposeTarget,
    merged: &Value,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Result<Vec<PermissionRequest>> {
    let binds: Vec<(String, bool)> = crate::ops::container::configured_mounts(merged)?
        .iter()
        .filter(|m| m.kind == crate::engine::MountKind::Bind)
        .filter_map(|m| Some((m.source.clone()?, m.read_only)))
        .collect();
    let requests = security::compose::primary_bind_swaps(
        profile,
        &target.model,
        &target.service,
        &binds,
        grants,
    );
    match security::policy::refusal(profile, &requests) {
        Some(refused) => Err(refused.into()),
        None => Ok(requests),
    }
}

/// The primary's create request after the profile's judgement.
struct JudgedService {
    spec: crate::engine::ContainerSpec,
    permissions: Vec<PermissionRequest>,
    /// The remote user the policy settled on.
    remote_user: Option<String>,
    /// The command line's read-only binds every sidecar must keep read-only.
    shields: Vec<security::host_path::Cover>,
}

/// The primary's request `spec` judged: its policy input ([`service_policy_input`]), the
/// profile applied with the image label's requests (`label_requests`), its user made numeric
/// under `hardened` and its identity labels written.
///
/// Errors: [`OpsError::Security`] (refused: nothing was created), the engine's.
async fn judge_service(
    engine: &dyn Engine,
    (profile, grants): (&SecurityProfile, &Grants),
    spec: crate::engine::ContainerSpec,
    image_facts: (&PreparedImage, &Value, &[Value]),
    (opts, loaded, target): (&UpOptions, &LoadedConfiguration, &ComposeTarget),
    (early_requests, label_requests): (&[PermissionRequest], &[PermissionRequest]),
    (warnings, reporter): (&mut Vec<Warning>, &dyn Reporter),
) -> Result<JudgedService> {
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    let (input, shields, account) = service_policy_input(
        engine,
        profile,
        spec,
        image_facts,
        (opts, loaded, target),
        warnings,
        reporter,
    )
    .await?;
    let applied = apply_policy(
        profile,
        grants,
        &input,
        label_requests.iter().cloned(),
        reporter,
    )?;
    let mut spec = applied.spec;
    // Its main process (the service's `command`, the repository's) runs as numeric `uid:gid`,
    // as a single container's does. The service's `user:` is the image user here.
    numeric_user_when_hardened(hardened, &mut spec, &input, loaded);
    identity_labels(
        &mut spec,
        account.as_ref(),
        hardened,
        early_requests,
        label_requests,
    );
    Ok(JudgedService {
        spec,
        permissions: applied.requests,
        remote_user: applied.remote_user,
        shields,
    })
}

/// The primary's network as `mode` asks (the egress channel under `allowlist`, the project's
/// networks closed) and the creation token it is found by once Compose made it (not by the
/// project's labels alone), which is returned.
///
/// Errors: as [`crate::ops::egress::before_create`].
fn primary_network(
    spec: &mut crate::engine::ContainerSpec,
    mode: ComposeNetwork,
    target: &ComposeTarget,
    devcontainer_id: &str,
) -> Result<String> {
    if mode == ComposeNetwork::Allowlist {
        crate::ops::egress::before_create(mode.mode(), devcontainer_id, spec)?;
    }
    compose_network::mark_primary(spec, mode, &target.model);
    let token = crate::ops::target::creation_token(devcontainer_id);
    spec.labels
        .insert(crate::names::CREATION_LABEL.to_string(), token.clone());
    Ok(token)
}

/// The service's image ([`service_image`]) with Features layered on it and the uid layer,
/// with the merged configuration and the user devcell provides: a root image with no user
/// named (`containerUser`, the service's `user:`, `remoteUser`) gets devcell's own user, made
/// in the uid layer (spec-note 0188).
///
/// Errors: the build's, the engine's.
#[allow(clippy::too_many_arguments)]
async fn service_dev_image(
    engine: &dyn Engine,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    target: &ComposeTarget,
    (profile, grants): (&SecurityProfile, &Grants),
    devcontainer_id: &str,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<(DevImage, Value, Option<String>)> {
    let (base, triggered) =
        service_image(engine, target, opts, (profile, grants), reporter).await?;
    let mut dev = dev_image_from(
        engine,
        loaded,
        base,
        ConfigKind::Compose,
        (opts, profile, grants),
        reporter,
        warnings,
    )
    .await?;
    dev.label_requests.extend(triggered);
    let service_user_named = target
        .service_model()
        .get("user")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .map(str::to_string);
    let container_user = move |merged: &Value| {
        metadata::ConfiguredUsers::of(merged)
            .container_user
            .or_else(|| service_user_named.clone())
    };
    let who = UserChoice {
        profile,
        grants,
        container_user: &container_user,
    };
    let (merged, provided) = merged_with_uid_layer(
        engine,
        &mut dev.image,
        &dev.entries,
        loaded,
        devcontainer_id,
        opts,
        &who,
        reporter,
    )
    .await?;
    Ok((dev, merged, provided))
}

/// What the profile judges the primary's request `spec` with: its users and their account in
/// the image's passwd (under `hardened`), the judged places, the mounts' origins; with the
/// command line's read-only binds that must stay read-only through every service's own binds
/// (the handoff's git overlays, spec-note 0413) and the remote user's account.
///
/// Errors: [`OpsError::Security`] (a judged place).
async fn service_policy_input(
    engine: &dyn Engine,
    profile: &SecurityProfile,
    mut spec: crate::engine::ContainerSpec,
    (image, merged, entries): (&PreparedImage, &Value, &[Value]),
    (opts, loaded, target): (&UpOptions, &LoadedConfiguration, &ComposeTarget),
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<(
    PolicyInput,
    Vec<security::host_path::Cover>,
    Option<crate::ops::users::Account>,
)> {
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    let image_user = service_user(target, image);
    let users = image_users(engine, profile, (image, merged), &spec, image_user).await;
    let (_, host_home, engine_socket) =
        judged_places(profile, &mut spec, loaded, opts, engine.host_socket())?;
    let shields = service_shields(hardened, &spec, opts, loaded);
    if hardened {
        neutralise_image_identity_labels(&image.info, &mut spec, warnings, reporter);
    }
    let account = users.account.clone();
    // canonical, as the binds it is compared with are resolved
    let workspace = Places::new(&loaded.workspace_folder, None, None).workspace;
    let places = (workspace, host_home, engine_socket);
    let input = policy_input((opts, loaded, entries), users, places, Vec::new(), spec);
    Ok((input, shields, account))
}

/// Under `hardened`, only the image devcell prepared was judged (its passwd read by id): a
/// container of another one (Compose rebuilt or pulled the service's image) is removed, not
/// started into.
///
/// Errors: [`OpsError::Unsupported`] (the container was removed).
async fn refuse_replaced_image(
    engine: &dyn Engine,
    hardened: bool,
    info: &ContainerInfo,
    image: &PreparedImage,
    target: &ComposeTarget,
) -> Result<()> {
    let bare = |id: &str| id.strip_prefix("sha256:").unwrap_or(id).to_string();
    if !hardened || image.info.id.is_empty() || bare(&info.image_id) == bare(&image.info.id) {
        return Ok(());
    }
    let _ = engine.remove_container(&info.id, true).await;
    Err(OpsError::Unsupported {
        message: format!(
            "the `{}` service's container runs image {}, not {} that devcell prepared and judged ({}); the container was removed",
            target.service,
            short(&info.image_id),
            short(&image.info.id),
            image.reference
        ),
        hint: Some(
            "Compose replaced the image while starting the project; build the service's image once, outside the `up`, or remove its `pull_policy`".into(),
        ),
    })
}

/// The primary service's create request from its image and merged configuration, kept alive
/// as the configuration asks.
///
/// Errors: a property devcell cannot map, located in the configuration.
fn service_spec(
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    target: &ComposeTarget,
    image: &PreparedImage,
    merged: &Value,
    id_labels: &std::collections::BTreeMap<String, String>,
    label: Option<String>,
) -> Result<crate::engine::ContainerSpec> {
    // `runArgs` and `appPort` are not Compose properties (the reference ignores them too).
    let mut for_spec = merged.clone();
    if let Value::Object(m) = &mut for_spec {
        m.remove("runArgs");
        m.remove("appPort");
    }
    let host_env = |name: &str| opts.target.env.get(name).cloned();
    let mut spec = container_spec(&SpecInputs {
        image: &image.reference,
        image_info: &image.info,
        merged: &for_spec,
        workspace_mount: None,
        extra_mounts: &cli_mounts(opts, loaded),
        id_labels,
        metadata_label: label,
        host_env: &host_env,
    })
    .map_err(|e| crate::ops::permissions::locate_run_arg_error(e, &loaded.config_file))?;
    spec.gpu = crate::ops::gpu::request(&loaded.typed, opts.gpu_availability);
    keep_alive(&mut spec, merged, target.service_model(), image);
    Ok(spec)
}

/// The user the service's container starts as: its `user:`, before the image's.
fn service_user(target: &ComposeTarget, image: &PreparedImage) -> Option<String> {
    target
        .service_model()
        .get("user")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| image.info.user.clone())
        .filter(|u| !u.is_empty())
}

/// The command line's read-only binds (the handoff's git overlays) that stay read-only through
/// every service's own binds too (spec-note 0413), with what covers them.
/// None unless `hardened`.
fn service_shields(
    hardened: bool,
    spec: &crate::engine::ContainerSpec,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
) -> Vec<security::host_path::Cover> {
    if !hardened {
        return Vec::new();
    }
    let covers = crate::ops::permissions::covers(spec, opts);
    crate::ops::permissions::read_only_shields(spec, opts, loaded)
        .into_iter()
        .filter(|(s, _)| {
            !covers
                .iter()
                .any(|c| c.hides_inside() && s.starts_with(&c.covered))
        })
        .map(|(s, _)| security::host_path::Cover {
            covered: s.clone(),
            source: s,
            read_only: true,
            folder: false,
        })
        .chain(covers.clone())
        .collect()
}

/// Writes the service's override file (its judged request, the sidecars' read-only additions,
/// the networks devcell made, the workspace labels of the project's volumes and networks,
/// `owned`), runs `up -d` of the project, checks a closed network is closed and finds the
/// service's container by the creation `token` it was made with.
///
/// Errors: [`OpsError::Compose`], [`OpsError::NoContainer`], the engine's.
async fn start_project(
    engine: &dyn Engine,
    target: &ComposeTarget,
    (spec, sidecars): (
        &crate::engine::ContainerSpec,
        &serde_json::Map<String, Value>,
    ),
    (mode, networks): (ComposeNetwork, &serde_json::Map<String, Value>),
    owned: Option<Value>,
    (image, token): (&PreparedImage, &str),
    (opts, reporter): (&UpOptions, &dyn Reporter),
) -> Result<ContainerInfo> {
    let podman = engine.is_podman().await?;
    let mut file = crate::engine::compose::override_file(&target.service, spec, sidecars, podman);
    // nothing waits on a repository's `stop_grace_period: 1000h` (attacks K14)
    security::compose::bound_stop_grace(&target.model, &mut file);
    if !networks.is_empty()
        && let Value::Object(top) = &mut file
    {
        let mut networks = Value::Object(networks.clone());
        crate::engine::compose::escape_interpolation(&mut networks);
        top.insert("networks".to_string(), networks);
    }
    if let Some(mut owned) = owned {
        crate::engine::compose::escape_interpolation(&mut owned);
        merge_labels(&mut file, owned);
    }
    let override_path = write_override(&target.project.name, &file)?;
    let mut files = target.project.files.clone();
    files.push(override_path);
    let project = target.with_files(files);
    reporter.report(Event::Status(format!(
        "starting project {} (service {} from {})",
        project.name, target.service, image.reference
    )));
    // what Compose reads now is what was judged (spec-note 0400)
    target.judged.refuse_changed(&target.project).await?;
    project.up(&target.up_services(), false).await?;
    let labels = crate::engine::compose::service_labels(&project.name, &target.service);
    let created = crate::ops::target::created_container(engine, &labels, token)
        .await?
        .ok_or_else(|| OpsError::NoContainer {
            labels: join_labels(&crate::engine::compose::service_labels(
                &project.name,
                &target.service,
            )),
            expected: true,
        })?;
    // the project's containers run: recorded before anything else can fail (attack 25, P9)
    crate::ops::bring_up::record_git_baseline(&created.id, opts);
    if mode.closed() {
        compose_network::refuse_open(
            engine,
            target,
            networks,
            compose_network::NetworkCheck::AfterCreate,
        )
        .await?;
    }
    Ok(created)
}

/// Merges `labels` (`{"volumes"|"networks": {<key>: {"labels": {…}}}}`) into the override
/// `file`, beside what its entries already say.
fn merge_labels(file: &mut Value, labels: Value) {
    let (Value::Object(file), Value::Object(labels)) = (file, labels) else {
        return;
    };
    for (top, entries) in labels {
        let Value::Object(entries) = entries else {
            continue;
        };
        let section = file
            .entry(top)
            .or_insert_with(|| Value::Object(Default::default()));
        let Value::Object(section) = section else {
            continue;
        };
        for (key, add) in entries {
            let entry = section
                .entry(key)
                .or_insert_with(|| Value::Object(Default::default()));
            if entry.is_null() {
                *entry = Value::Object(Default::default());
            }
            let (Value::Object(entry), Some(Value::Object(add))) = (entry, add.get("labels"))
            else {
                continue;
            };
            let own = entry
                .entry("labels")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(own) = own {
                own.extend(add.clone());
            }
        }
    }
}

/// The primary service's image before Features: `docker compose build <service>` for a
/// service with `build` (Compose tags it with the service's `image`, else
/// `<project>-<service>`), else its `image`, inspected or pulled, with the granted request of
/// that image's `ONBUILD` triggers ([`crate::ops::image::image_onbuild_requests`]).
///
/// Errors: [`OpsError::Compose`] (the build), [`OpsError::Engine`] (the pull),
/// [`OpsError::Security`] (triggers refused).
pub(crate) async fn service_image(
    engine: &dyn Engine,
    target: &ComposeTarget,
    opts: &UpOptions,
    (profile, grants): (&SecurityProfile, &Grants),
    reporter: &dyn Reporter,
) -> Result<(PreparedImage, Vec<PermissionRequest>)> {
    // every build's base images, pulled when missing, judged before anything is built
    let requests = onbuild_requests(engine, target, (profile, grants), Some(reporter)).await?;
    if let Some(refused) = security::policy::refusal(profile, &requests) {
        return Err(refused.into());
    }
    let service = target.service_model();
    let reference = service
        .get("image")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}-{}", target.project.name, target.service));
    if service.get("build").is_some() {
        reporter.report(Event::Status(format!(
            "building service {} ({reference}) with {}",
            target.service,
            target.project.cli.command()
        )));
        target.judged.refuse_changed(&target.project).await?;
        target
            .project
            .build(std::slice::from_ref(&target.service), opts.build.no_cache)
            .await?;
    }
    let info = engine.ensure_image(&reference, reporter).await?;
    let image = PreparedImage { reference, info };
    // an image Compose did not build from a judged Dockerfile: its `ONBUILD` triggers, before
    // devcell's Features and uid builds `FROM` it run them (spec-note 0612)
    let triggered = if service.get("build").is_none() {
        crate::ops::image::image_onbuild_requests(&image, Some(&target.service), profile, grants)?
    } else {
        Vec::new()
    };
    Ok((image, triggered))
}

/// The primary service's command: `overrideCommand` (default `false` for Compose) replaces it
/// with devcell's keep-alive script; otherwise the service's own entrypoint and command stay,
/// wrapped by the keep-alive script only when Features bring entrypoints (which it runs
/// first).
fn keep_alive(
    spec: &mut crate::engine::ContainerSpec,
    merged: &Value,
    service: &Value,
    image: &PreparedImage,
) {
    let merged = metadata::MergedConfiguration::of(merged);
    if merged.override_command == Some(true) {
        return;
    }
    if merged.entrypoints.is_empty() {
        spec.entrypoint = None;
        spec.cmd = None;
        return;
    }
    let words = |v: Option<&Value>| -> Option<Vec<String>> {
        match v? {
            Value::Array(a) => Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            ),
            Value::String(s) => shlex::split(s),
            _ => None,
        }
    };
    let own_entrypoint = words(service.get("entrypoint"));
    let command = words(service.get("command")).unwrap_or_else(|| {
        if own_entrypoint.is_some() {
            Vec::new()
        } else {
            image.info.cmd.clone().unwrap_or_default()
        }
    });
    let entrypoint =
        own_entrypoint.unwrap_or_else(|| image.info.entrypoint.clone().unwrap_or_default());
    if let Some(cmd) = &mut spec.cmd {
        cmd.extend(entrypoint);
        cmd.extend(command);
    }
}
