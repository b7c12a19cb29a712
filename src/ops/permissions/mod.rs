//! The security decision before anything is created: the permission requests of the configuration,
//! the CLI and the image, judged against the grants (`security::apply`), and the permission preview
//! (`--preview-permissions`).
//!
//! Files: `registries.rs` (the image references reached, as registry requests), `places.rs`
//! (host paths, mounts and named volumes); the rest here.

mod places;
mod registries;

pub(crate) use places::{
    cli_mounts, confine_build, confine_grants, covers, judge_named_volumes, judged_places, origins,
    read_only_shields, with_owned,
};
pub(crate) use registries::{
    JudgedRegistries, compose_registry_requests, judged_registries, with_registry_hosts,
};

use crate::config::metadata;
use crate::config::model::ConfigKind;
use crate::config::substitute;
use crate::engine::{BuildRequest, ContainerInfo, Engine, ImageInfo};
use crate::lifecycle::{HookSources, initialize_stage};
use crate::ops::container::STATE_DIR;
use crate::ops::container::{SpecInputs, container_spec};
use crate::ops::dockerfile::build_request;
use crate::ops::entries::{
    existing_entries, has_features, preview_feature_entries, substitute_entries,
};
use crate::ops::error::lifecycle_error;
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::{ImageBuildOptions, SecurityOptions, UpOptions};
use crate::ops::target::id_labels;
use crate::security::{self, Grants, PermissionRequest, SecurityProfile, Source, host_path};
use crate::security::{Choice, PolicyInput};
use crate::settings::{NetworkMode, Settings};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// [`security::check_reuse`] for the container `up` found: its image's `USER`, the merged
/// `remoteUser`, the workspace, the binds asked for on the command line and the network asked
/// for (`network`, the user's choice). Returns the granted requests.
///
/// Errors: [`OpsError::Security`] (`ReuseRefused`), [`OpsError::Engine`].
#[allow(clippy::too_many_arguments)]
pub(crate) async fn check_existing(
    engine: &dyn Engine,
    info: &ContainerInfo,
    entries: &[Value],
    loaded: &LoadedConfiguration,
    profile: &SecurityProfile,
    grants: &Grants,
    network: NetworkMode,
    opts: &UpOptions,
) -> Result<Vec<PermissionRequest>> {
    let engine_socket = engine.host_socket();
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return Ok(Vec::new());
    }
    let image_user = if info.user.is_empty() {
        engine
            .inspect_image(&info.image_id)
            .await?
            .and_then(|i| i.user)
    } else {
        None
    };
    let merged = metadata::merge_configuration(&loaded.value, entries);
    let users = metadata::ConfiguredUsers::of(&merged);
    let remote_user = users.remote_user.as_deref();
    let binds = security::reuse::bind_sources(&cli_mounts(opts, loaded));
    let network = network.engine_mode();
    // its binds judged as what they resolve to now, like a new container's (spec-note 0400)
    let mut resolved = info.clone();
    // devcell's own egress channel is the profile's, wherever the state folder is
    resolved
        .mounts
        .retain(|m| !crate::ops::egress::is_channel_bind(info, m));
    // one that cannot be resolved is refused, never judged by its text (spec-note 0400, F1)
    for m in resolved.mounts.iter_mut().filter(|m| m.kind == "bind") {
        let r = host_path::resolve(Path::new(&m.source)).map_err(|e| {
            security::SecurityError::PathUnresolvable {
                what: format!(
                    "the existing container's bind mount source for `{}`",
                    m.destination
                ),
                written: PathBuf::from(&m.source),
                message: e.to_string(),
            }
        })?;
        m.source = r.to_string_lossy().into_owned();
    }
    let info = &resolved;
    // the handoff's covers of each repository's `.git` (spec-note 0436)
    let required_mounts: Vec<String> = opts.covers.iter().map(|(_, t)| t.clone()).collect();
    let workspace = host_path::Places::new(&loaded.workspace.host_mount_root, None, None).workspace;
    let (passwd, passwd_unreadable) =
        reuse_passwd(engine, info, image_user.as_deref(), remote_user).await;
    let existing = security::ExistingContainer {
        info,
        image_user: image_user.as_deref(),
        remote_user,
        workspace: &workspace,
        command_line_binds: &binds,
        engine_socket,
        network,
        required_mounts: &required_mounts,
        passwd: passwd.as_deref(),
        passwd_unreadable,
    };
    Ok(security::check_reuse(profile, &existing, grants)?)
}

/// `initializeCommand` as a stage, and one [`security::Permission::HostCommand`] request per
/// argv it would run on the host (each entry of the object form; the string form is
/// `/bin/sh -c <string>`), judged by `profile` and `grants` (spec-note 0410). Only
/// devcontainer.json sets it (Features and image metadata cannot), so the source is always
/// devcontainer.json.
///
/// A request names the argv as substituted, except when `initializeCommand` reads host
/// variables (`${localEnv:…}`): then it names the argv as written, so a refusal (printed
/// before anything is granted, in a CI log of the repository's pull request) never shows a
/// host variable's value (spec-note 0440).
///
/// Errors: [`OpsError::Lifecycle`] for a malformed `initializeCommand`.
pub(crate) fn host_commands(
    loaded: &LoadedConfiguration,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Result<(Option<crate::lifecycle::Stage>, Vec<PermissionRequest>)> {
    // Each argv keyed by its entry's name (`None` for the string and array forms), so the
    // as-written text of an entry is found by name: an entry that substitutes to nothing is
    // dropped from the substituted list only (attack M10).
    type Entry = (Option<String>, String, Vec<String>);
    let texts = |value: Option<&Value>| -> Result<(Option<crate::lifecycle::Stage>, Vec<Entry>)> {
        let sources = HookSources::from_metadata(&[], value).map_err(lifecycle_error(""))?;
        let stage = initialize_stage(&sources);
        let commands: Vec<Entry> = stage
            .iter()
            .flat_map(|s| s.commands.iter())
            .flat_map(|c| c.command.entries())
            .map(|(name, command)| {
                let argv = command.argv();
                let text = shlex::try_join(argv.iter().map(String::as_str))
                    .unwrap_or_else(|_| argv.join(" "));
                (name.map(str::to_owned), text, argv)
            })
            .collect();
        Ok((stage, commands))
    };
    let (stage, substituted) = texts(loaded.value.get("initializeCommand"))?;
    let as_written = loaded.raw.get("initializeCommand");
    let shown: Vec<String> = match as_written {
        Some(raw) if !substitute::local_env_reads(raw).is_empty() => {
            let (_, written) = texts(Some(raw))?;
            substituted
                .iter()
                .map(|(name, _, _)| as_written_text(name.as_deref(), &written, raw))
                .collect()
        }
        _ => substituted
            .iter()
            .map(|(_, text, _)| text.clone())
            .collect(),
    };
    // A grant covers the command and the workspace files it names (what it runs), read
    // where the command runs: the workspace folder (spec-note 0410, attacks J7).
    let folder = &loaded.workspace_folder;
    let asked: Vec<_> = shown
        .into_iter()
        .zip(&substituted)
        .map(|(text, (_, _, argv))| {
            let command = security::host_command::cover_command(text, argv, folder, folder);
            (
                security::Permission::HostCommand(command),
                Source::DevcontainerJson,
            )
        })
        .collect();
    Ok((stage, security::judge(profile, asked, grants)))
}

/// The text a host command's request shows, and its grant binds, for the `initializeCommand`
/// entry `name` when the command reads host variables: that entry as written (variables by
/// name, never their values). An entry with no written counterpart is shown as the whole
/// `initializeCommand` as written (its JSON), never a fixed text: a grant of a fixed text would
/// cover every command (attack M10).
fn as_written_text(
    name: Option<&str>,
    written: &[(Option<String>, String, Vec<String>)],
    raw: &Value,
) -> String {
    written
        .iter()
        .find(|(n, _, _)| n.as_deref() == name)
        .map(|(_, text, _)| text.clone())
        .unwrap_or_else(|| format!("initializeCommand {raw}"))
}

/// An unsupported or invalid `runArgs` flag from the configuration file, located there: file,
/// line, column and the property path `runArgs[i]` of the first element that is the flag (or
/// `flag=value`). Errors for flags the file does not hold (image metadata) stay as they are.
pub(crate) fn locate_run_arg_error(error: OpsError, config_file: &Path) -> OpsError {
    use crate::config::jsonc::{JsonPath, Segment};
    use crate::engine::EngineError;
    let OpsError::Engine(
        engine @ (EngineError::UnsupportedRunArg { .. } | EngineError::InvalidRunArg { .. }),
    ) = &error
    else {
        return error;
    };
    let flag = match engine {
        EngineError::UnsupportedRunArg { flag } | EngineError::InvalidRunArg { flag, .. } => {
            flag.clone()
        }
        _ => return error,
    };
    let Ok(text) = crate::config::bounded::read_to_string(
        config_file,
        crate::config::jsonc::MAX_FILE_BYTES as u64,
    ) else {
        return error;
    };
    let Ok(document) = crate::config::jsonc::parse(config_file, &text) else {
        return error;
    };
    let index = document
        .value
        .get("runArgs")
        .and_then(Value::as_array)
        .and_then(|args| {
            args.iter().position(|a| {
                a.as_str().is_some_and(|a| {
                    a == flag || a.split_once('=').is_some_and(|(name, _)| name == flag)
                })
            })
        });
    let Some(index) = index else {
        return error;
    };
    let location = document.locate(&JsonPath(vec![
        Segment::Key("runArgs".to_string()),
        Segment::Index(index),
    ]));
    OpsError::Config(crate::config::ConfigError::Invalid {
        location: Box::new(location),
        message: engine.to_string(),
        hint: crate::diagnostics::Hint::hint(engine),
    })
}

/// What `up` judges before it looks anything up, runs, builds or creates (spec-notes 0440,
/// 0442): the host variables the configuration sends into the container and the builds'
/// network.
#[derive(Debug, Clone, Default)]
pub(crate) struct EarlyRequests {
    /// The [`security::Permission::HostEnv`] requests (one per name) and the
    /// [`security::Permission::BuildNetwork`] request and the [`security::Permission::ImageTag`]
    /// requests, judged.
    pub(crate) requests: Vec<PermissionRequest>,
    /// The host variables that would cross, by name, with the properties they go into.
    pub(crate) host_env: Vec<security::host_env::HostEnvUse>,
    /// The network every build gets ([`ImageBuildOptions::network`]).
    pub(crate) build_network: Option<Option<String>>,
    /// A granted build argument persists in the image history: said once.
    pub(crate) warning: Option<String>,
    /// The registry hosts the registry judgement cleared ([`JudgedRegistries::hosts`]), once
    /// it ran: what [`with_build_network`] gives the Features' fetcher.
    pub(crate) registry_hosts: Option<std::collections::BTreeSet<String>>,
}

/// `opts` with the host environment substitution and the engine may read
/// ([`security::host_env::visible_env`]: under `hardened` only granted and non-secret names).
pub(crate) fn judged_options(
    opts: &UpOptions,
    profile: &SecurityProfile,
    grants: &Grants,
) -> UpOptions {
    let mut judged = opts.clone();
    judged.target.env = security::host_env::visible_env(profile, grants, &opts.target.env);
    judged
}

/// `opts` with every build on the network [`EarlyRequests::build_network`] decided (the
/// container's, or the one a grant forced); the rest as given.
pub(crate) fn with_build_network(opts: UpOptions, early: &EarlyRequests) -> UpOptions {
    UpOptions {
        build: ImageBuildOptions {
            network: early.build_network.clone(),
            ..opts.build.clone()
        },
        registry_hosts: early
            .registry_hosts
            .clone()
            .or_else(|| opts.registry_hosts.clone()),
        ..opts
    }
}

/// The bare host-variable forms the engine resolves itself: `runArgs -e NAME`/`--env NAME`
/// and `build.options --build-arg NAME`, found by the parsers that apply them (a recording
/// lookup that resolves nothing). Parse errors are left to those parsers' real run.
pub(crate) fn bare_env_names(loaded: &LoadedConfiguration) -> Vec<(String, String)> {
    use security::host_env::{BUILD_OPTIONS_PROPERTY, RUN_ARGS_PROPERTY};
    let asked = std::cell::RefCell::new(Vec::new());
    let record = |property: &'static str| {
        let asked = &asked;
        move |name: &str| {
            asked
                .borrow_mut()
                .push((property.to_string(), name.to_string()));
            None
        }
    };
    let _ = crate::engine::run_args::apply_run_args(
        &mut crate::engine::ContainerSpec::default(),
        &loaded.typed.run_args,
        &record(RUN_ARGS_PROPERTY),
    );
    if let Some(build) = &loaded.typed.build {
        let _ = crate::engine::build_options::apply_build_options(
            &mut BuildRequest::default(),
            &build.options,
            &record(BUILD_OPTIONS_PROPERTY),
        );
    }
    asked.into_inner()
}

/// Judges the configuration's host variables and the builds' network ([`EarlyRequests`]).
/// The caller refuses when any request is refused
/// ([`security::host_env::check`]).
///
/// Errors: [`OpsError::Security`] for a malformed egress request of the repository.
pub(crate) fn early_requests(
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
    profile: &SecurityProfile,
    grants: &Grants,
    network: NetworkMode,
) -> Result<EarlyRequests> {
    let host_env =
        security::host_env::uses(&loaded.workspace.host_env_reads, &bare_env_names(loaded));
    let mut requests = security::host_env::judge(profile, grants, &host_env);
    let warning = security::host_env::image_history_warning(&host_env, &requests);
    let container_network = network.engine_mode();
    let request = build_request(loaded, &opts.target.env).ok();
    // The first tag is devcell's own image name; the others are the repository's.
    let tags = request
        .as_ref()
        .map(|r| r.tags.iter().skip(1).cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    // what the Dockerfile's text asks of the builder (spec-note 0612, attacks H6 and G9)
    if loaded.typed.kind() == ConfigKind::Dockerfile
        && let Some(request) = &request
    {
        requests.extend(crate::ops::dockerfile_judge::text_requests(
            loaded, request, profile, grants,
        ));
    }
    let configured = request.and_then(|r| r.network);
    let decided =
        security::build_network::decide(profile, grants, container_network, configured.as_deref());
    // Only a hardened container on `none` changes the builds' network; elsewhere each build
    // keeps its own (the Dockerfile the configured one, devcell's layers the default).
    let forced =
        matches!(profile, SecurityProfile::Hardened(_)) && container_network == Some("none");
    requests.extend(decided.request);
    requests.extend(security::image_tags::judge(profile, grants, &tags));
    // the repository's egress destinations (`--network allowlist`; spec-note 0503)
    requests.extend(crate::ops::egress::repository_requests(
        loaded, profile, grants, network,
    )?);
    Ok(EarlyRequests {
        requests,
        host_env,
        build_network: forced.then_some(decided.network),
        warning,
        registry_hosts: None,
    })
}

/// The user's choices for `up`, `build` and `set-up` ([`Choice::resolve`] with `up`'s network
/// default; a handoff passes its network as a flag).
///
/// Errors: [`OpsError::Security`] for an unknown grant; [`OpsError::InvalidLimit`].
pub fn security_choice(opts: &SecurityOptions, settings: &Settings) -> Result<Choice> {
    Ok(Choice::resolve(
        opts,
        settings,
        crate::security::choice::UP_NETWORK,
    )?)
}

/// The `/etc/passwd` the engine resolves the container's users against
/// ([`crate::ops::image_files::engine_passwd`]) for the reuse re-check, read only when a user name could
/// hide uid 0 and was not checked from inside at creation (spec-note 0420): the remote user
/// differs from the user the container runs as (its `remoteUser` changed since), or the
/// container was not made by devcell under `hardened` (no state volume). The warm path of
/// devcell's own containers reads nothing.
///
/// Returns the text when it was read, and whether it was needed but could not be read as a
/// regular file (a symbolic link): a name is then not judgeable, and counts as root.
pub(crate) async fn reuse_passwd(
    engine: &dyn Engine,
    info: &ContainerInfo,
    image_user: Option<&str>,
    remote_user: Option<&str>,
) -> (Option<String>, bool) {
    use crate::engine::passwd::{Resolved, resolve};
    let runs_as = Some(info.user.as_str())
        .filter(|u| !u.is_empty())
        .or(image_user.filter(|u| !u.is_empty()))
        .unwrap_or("root");
    let unresolved = |u: &str| matches!(resolve(u, None), Resolved::Unresolved(_));
    let verified_at_creation = info.mounts.iter().any(|m| m.destination == STATE_DIR);
    let needed = remote_user.is_some_and(|r| r != runs_as && unresolved(r))
        || (!verified_at_creation && unresolved(runs_as));
    if !needed {
        return (None, false);
    }
    match crate::ops::image_files::engine_passwd(engine, info).await {
        Some(text) => (Some(text), false),
        None => (None, true),
    }
}

/// The security choice and the configuration `up` goes on with
/// ([`crate::ops::up::load_up`]).
pub(crate) struct UpChoice {
    pub(crate) profile: SecurityProfile,
    pub(crate) grants: Grants,
    /// The container's network, as the user chose it ([`security_choice`]).
    pub(crate) network: NetworkMode,
    pub(crate) loaded: LoadedConfiguration,
}

/// What [`judge_configuration`] judged and `up` goes on with.
pub(crate) struct ConfigurationJudgement {
    /// The host variables and the builds' network ([`early_requests`]).
    pub(crate) early: EarlyRequests,
    /// `initializeCommand`, granted ([`host_commands`]).
    pub(crate) init_stage: Option<crate::lifecycle::Stage>,
    /// The host commands' requests.
    pub(crate) host_requests: Vec<PermissionRequest>,
    /// The granted requests of the re-check of the container that is reused
    /// ([`check_existing`]); empty when none is.
    pub(crate) reuse_requests: Vec<PermissionRequest>,
    /// The requests of the container devcontainer.json asks for on its own, when none is
    /// reused (what `handoff --plan` of a Compose configuration lists; `up` judges the
    /// container again, with its image, when it creates it).
    pub(crate) container_requests: Vec<PermissionRequest>,
}

/// Judges everything the configuration asks for before anything runs on the host or the
/// engine (spec-note 0400): `earlier` (a handoff's git directories), the host variables and
/// the builds' network ([`early_requests`]), the host commands ([`host_commands`]) and either
/// the re-check of `found`, the container that is reused ([`check_existing`], spec-note 0270),
/// or the container devcontainer.json asks for on its own: mounts, networks, ports,
/// capabilities, users by spelling ([`container_requests`] without an image or Features,
/// whose requests are judged with them before the container is created). `found` is looked
/// up by the caller under the bring-up lock, so what is judged is what `up` goes on with.
/// `opts` as given to `up` (the whole host environment; judged here). Only engine reads
/// happen.
///
/// Errors: [`OpsError::Security`] with one [`security::SecurityError::Refused`] listing
/// every request when any is not granted, so one `--allow` list grants them all;
/// [`OpsError::Lifecycle`] for a malformed `initializeCommand`; the container request's
/// errors (bad `runArgs`, mounts); [`OpsError::Engine`] when the engine cannot be asked.
pub(crate) async fn judge_configuration(
    engine: &dyn Engine,
    opts: &UpOptions,
    choice: &UpChoice,
    earlier: &[PermissionRequest],
    found: Option<&ContainerInfo>,
) -> Result<ConfigurationJudgement> {
    let UpChoice {
        profile,
        grants,
        network,
        loaded,
    } = choice;
    let network = *network;
    let mut judged = judged_options(opts, profile, grants);
    let mut early = early_requests(loaded, &judged, profile, grants, network)?;
    let (init_stage, host_requests) = host_commands(loaded, profile, grants)?;
    // the registries a closed container's pulls would reach (attack K12), judged before the
    // Features' metadata is fetched below, which then reaches only the hosts cleared here
    let JudgedRegistries {
        requests: registries,
        hosts,
    } = judged_registries(
        Some(engine),
        loaded,
        &judged.target.env,
        (profile, grants),
        network.closed(),
    )
    .await?;
    judged.registry_hosts = Some(hosts.clone());
    early.registry_hosts = Some(hosts);
    let registry_refused = registries
        .iter()
        .any(|r| r.status != security::RequestStatus::Granted);
    let before: Vec<PermissionRequest> = earlier
        .iter()
        .chain(&early.requests)
        .chain(&host_requests)
        .chain(&registries)
        .cloned()
        .collect();
    let kind = loaded.typed.kind();
    let builds = matches!(kind, ConfigKind::Image | ConfigKind::Dockerfile);
    // The container a new one would be, or the re-check of the one that is reused
    // (spec-note 0270): either is judged with the rest, in one refusal.
    let found = found.filter(|_| builds);
    let (reuse_refusal, container) = match found {
        Some(info) => {
            let entries = existing_entries(info, loaded, &judged.target.env, &mut Vec::new());
            match check_existing(
                engine, info, &entries, loaded, profile, grants, network, &judged,
            )
            .await
            {
                Ok(requests) => (None, requests),
                Err(OpsError::Security(e @ security::SecurityError::ReuseRefused { .. })) => {
                    (Some(e), Vec::new())
                }
                Err(e) => return Err(e),
            }
        }
        // A Compose configuration's primary service: what devcontainer.json asks for itself
        // (its service's own properties are `earlier`, judged on Compose's model).
        None if builds || kind == ConfigKind::Compose => {
            let requests =
                new_container_requests(engine, opts, &judged, choice, registry_refused).await?;
            (None, requests)
        }
        None => (None, Vec::new()),
    };
    if let Some(refused) = security::refusal_of_all(profile, &before, reuse_refusal, &container) {
        return Err(refused.into());
    }
    Ok(ConfigurationJudgement {
        early,
        init_stage,
        host_requests,
        reuse_requests: if found.is_some() {
            container.clone()
        } else {
            Vec::new()
        },
        container_requests: if found.is_some() {
            Vec::new()
        } else {
            container
        },
    })
}

/// The Features' metadata entries (local, OCI from the cache or the registry, tarballs),
/// substituted with the judged host environment, read before anything is built so a Feature's
/// `privileged`, `capAdd`, `securityOpt`, `mounts`, `init` or `entrypoint` is refused with the
/// rest (spec-note 0445). Metadata that cannot be read yet (a local Feature the
/// `initializeCommand` generates, an unreachable registry) gives no entries here: the Features
/// are then judged, as always, when the container is created, before it exists.
async fn early_feature_entries(loaded: &LoadedConfiguration, judged: &UpOptions) -> Vec<Value> {
    if !has_features(&loaded.value) {
        return Vec::new();
    }
    match preview_feature_entries(loaded, judged).await {
        Ok(mut entries) => {
            substitute_entries(&mut entries, loaded, &judged.target.env);
            entries
        }
        Err(_) => Vec::new(),
    }
}

/// What [`container_requests`] judges a container with, besides its image and entries.
pub(crate) struct ContainerJudgement<'a> {
    pub(crate) profile: &'a SecurityProfile,
    pub(crate) grants: &'a Grants,
    /// The container's network, as the user chose it.
    pub(crate) network: NetworkMode,
    /// `up`'s options, the host environment already judged ([`judged_options`]).
    pub(crate) opts: &'a UpOptions,
    pub(crate) loaded: &'a LoadedConfiguration,
    pub(crate) engine_socket: Option<&'a Path>,
    /// The mounts asked for on the command line.
    pub(crate) extra_mounts: &'a [crate::engine::Mount],
    /// The engine to inspect the named volumes with, when they are judged here (`handoff
    /// --plan`; the run judges them when it creates the container, spec-note 0444).
    pub(crate) volumes: Option<&'a dyn Engine>,
}

/// The requests of the container devcontainer.json asks for on its own ([`container_requests`]
/// without the image's label; with its `USER` when the image is already on the engine), with
/// the Features' metadata unless a registry was refused (`registry_refused`: never contacted).
/// `opts` as given to `up`, `judged` as [`judged_options`] made it.
///
/// Errors: as [`container_requests`].
async fn new_container_requests(
    engine: &dyn Engine,
    opts: &UpOptions,
    judged: &UpOptions,
    choice: &UpChoice,
    registry_refused: bool,
) -> Result<Vec<PermissionRequest>> {
    let loaded = &choice.loaded;
    let reference = loaded.typed.image.clone().unwrap_or_default();
    // An image already on the engine has a known `USER`: judged here with the rest, so
    // one refusal lists it too (the plan reads it the same way).
    let image_info = if loaded.typed.kind() == ConfigKind::Image
        && !reference.is_empty()
        && !opts.expect_existing_container
    {
        engine.inspect_image(&reference).await.ok().flatten()
    } else {
        None
    };
    // a refused registry is never contacted for the Features' metadata
    let features = if registry_refused {
        Vec::new()
    } else {
        early_feature_entries(loaded, judged).await
    };
    let entries = metadata::collect_entries(&[], &features, &metadata::config_entry(&loaded.value));
    Ok(container_requests(
        &ContainerJudgement {
            profile: &choice.profile,
            grants: &choice.grants,
            network: choice.network,
            opts: judged,
            loaded,
            engine_socket: engine.host_socket(),
            extra_mounts: &cli_mounts(opts, loaded),
            volumes: None,
        },
        &reference,
        image_info.as_ref(),
        &entries,
        None,
    )
    .await?
    .requests)
}

/// The permission requests of the container `entries` (metadata entries, devcontainer.json's
/// last) ask for on image `reference`, the container request built as `up` builds it and
/// judged by the same policy. `image_info: None` is an image not known yet: its `USER` is not
/// judged ([`security::configuration_requests`]). Refused requests are returned, not an error.
///
/// Errors: [`OpsError::Engine`] / [`OpsError::Unsupported`] for a container request
/// that cannot be built (bad `runArgs`, mounts); [`OpsError::Security`] for a policy
/// error other than a refusal.
pub(crate) async fn container_requests(
    judgement: &ContainerJudgement<'_>,
    reference: &str,
    image_info: Option<&ImageInfo>,
    entries: &[Value],
    passwd: Option<String>,
) -> Result<ContainerRequests> {
    let ContainerJudgement {
        profile,
        grants,
        opts,
        loaded,
        extra_mounts,
        ..
    } = *judgement;
    let id_labels = id_labels(&opts.target, loaded);
    let mut merged = metadata::merge_configuration(&loaded.value, entries);
    substitute::substitute_devcontainer_id(
        &mut merged,
        &crate::config::id::devcontainer_id(&id_labels),
    );
    let host_env = |name: &str| opts.target.env.get(name).cloned();
    let unknown = ImageInfo::default();
    let workspace_mount = loaded.workspace_mount()?;
    let mut spec = container_spec(&SpecInputs {
        image: reference,
        image_info: image_info.unwrap_or(&unknown),
        merged: &merged,
        workspace_mount: workspace_mount.as_ref(),
        extra_mounts,
        id_labels: &id_labels,
        metadata_label: None,
        host_env: &host_env,
    })
    .map_err(|e| locate_run_arg_error(e, &loaded.config_file))?;
    if let Some(network) = judgement.network.engine_mode() {
        spec.network_mode = Some(network.to_string());
    }
    spec.gpu = crate::ops::gpu::request(&loaded.typed, opts.gpu_availability);
    // Named volumes judged by what they are, as `up` judges them (spec-note 0444).
    let mut volume_requests = Vec::new();
    if let Some(engine) = judgement.volumes
        && matches!(profile, SecurityProfile::Hardened(_))
    {
        (volume_requests, _) =
            judge_named_volumes(engine, profile, grants, &mut spec, &loaded.workspace_folder)
                .await?;
    }
    let (workspace, host_home, engine_socket) =
        judged_places(profile, &mut spec, loaded, opts, judgement.engine_socket)?;
    let remote_user = metadata::ConfiguredUsers::of(&merged).remote_user;
    let mut image_user = image_info
        .and_then(|i| i.user.clone())
        .filter(|u| !u.is_empty());
    // A root image with no user named runs as the user devcell provides (spec-note 0188):
    // judged as that user, not as root.
    let provided = (image_info.is_some()
        && security::provides_user(
            matches!(profile, SecurityProfile::Hardened(_)),
            grants.allows(&security::Permission::Root),
            spec.user.as_deref(),
            remote_user.as_deref(),
            image_user.as_deref(),
            passwd.as_deref(),
        ))
    .then(|| crate::names::PROVIDED_USER.to_string());
    if provided.is_some() {
        image_user = provided.clone();
    }
    let input = PolicyInput {
        passwd,
        repository_labels: crate::ops::container::repository_labels(&merged),
        origins: with_owned(origins(entries, extra_mounts), opts),
        remote_user,
        image_user,
        workspace,
        host_home,
        engine_socket,
        spec,
        ..PolicyInput::default()
    };
    let mut requests = if image_info.is_none() {
        // an unknown `USER` is not taken for root: it is judged once the image exists
        security::configuration_requests(profile, &input, grants)?
    } else {
        match security::apply(profile, &input, grants) {
            Ok(applied) => applied.requests,
            Err(security::SecurityError::Refused { requests, .. }) => requests,
            Err(other) => return Err(other.into()),
        }
    };
    requests.extend(volume_requests);
    Ok(ContainerRequests {
        requests,
        provided_user: provided,
    })
}

/// What [`container_requests`] found.
pub(crate) struct ContainerRequests {
    /// Every request, refused ones included.
    pub(crate) requests: Vec<PermissionRequest>,
    /// The user devcell would provide for a root image with no user named (spec-note 0188).
    pub(crate) provided_user: Option<String>,
}

#[cfg(test)]
mod tests;
