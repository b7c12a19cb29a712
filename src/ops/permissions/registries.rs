//! The image references a configuration reaches, as registry requests: the working tree's and
//! the committed versions', judged before anything is pulled.

use crate::config::model::ConfigKind;
use crate::engine::{BuildRequest, Engine};
use crate::ops::dockerfile::build_request;
use crate::ops::error::Result;
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::security::{self, Grants, PermissionRequest, SecurityProfile, Source, host_path};
use std::path::Path;

use super::{judged_options, security_choice};

/// The registry hosts the configuration would have the engine pull from, or devcell fetch
/// Features from, on the host's network while the container's network is closed
/// (`closed`: `none`, `allowlist`, `devcell build`), judged against the hosts its committed
/// version names ([`security::registries`], attack K12, spec-note 0400): devcontainer.json's
/// `image` (left out when the engine has it already: nothing is pulled), its Features, and
/// every image the Dockerfile `request` builds pulls (the stages the classic builder
/// reaches: every one up to the target; left out when the engine has it and the build does
/// not `--pull`). The committed side: the `HEAD` versions of devcontainer.json and of the
/// Dockerfile (every stage, with the committed `build.args`). Only engine reads and devcell's
/// hardened host git; nothing is pulled or fetched. None under `reference` or an open network.
/// Without an `engine` (a preview with none) nothing counts as present. The local Features'
/// `dependsOn` (followed through local ones) name Features too, each judged against the
/// committed versions of the same `devcontainer-feature.json` files (attack 23, N14).
///
/// Errors: [`OpsError::Engine`] when the engine cannot be asked.
pub(crate) async fn registry_requests(
    engine: Option<&dyn Engine>,
    loaded: &LoadedConfiguration,
    request: Option<&BuildRequest>,
    (profile, grants): (&SecurityProfile, &Grants),
    closed: bool,
) -> Result<JudgedRegistries> {
    use security::registries::{
        Named, build_args, configuration_names, dockerfile_hosts, image_host, judge_registries_at,
        named_by_every,
    };
    let granted = || JudgedRegistries {
        requests: Vec::new(),
        hosts: grants.registries.clone(),
    };
    if !closed || !matches!(profile, SecurityProfile::Hardened(_)) {
        return Ok(granted());
    }
    let kind = loaded.typed.kind();
    let mut named = Vec::new();
    for n in configuration_names(&loaded.value) {
        // an `image` the engine has is not pulled (a Feature is always asked for)
        let is_image = loaded.typed.image.as_deref() == Some(n.reference.as_str());
        if is_image && (kind != ConfigKind::Image || present(engine, &n.reference).await) {
            continue;
        }
        named.push(n);
    }
    let local_features = crate::ops::feature_registries::local_dependencies(loaded);
    named.extend(local_features.named.iter().cloned());
    let dockerfile = match (kind, request) {
        (ConfigKind::Dockerfile, Some(request)) => {
            crate::ops::dockerfile_judge::judged_text(loaded, request, profile, grants)
                .map(|(shown, text)| (shown, text, request))
        }
        _ => None,
    };
    if let Some((shown, text, request)) = &dockerfile {
        let args = request
            .args
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let reach = security::build_stages::Reach::UpToTarget;
        for image in
            security::build_stages::pulled_images(text, &args, request.target.as_deref(), reach)
        {
            if !request.pull && !image.contains('$') && present(engine, &image).await {
                continue;
            }
            named.push(Named {
                host: image_host(&image),
                source: Source::Dockerfile {
                    file: shown.clone(),
                    what: format!("FROM/--from {image}"),
                },
                reference: image,
            });
        }
    }
    if named.is_empty() {
        return Ok(granted());
    }
    // the committed side: what `HEAD` has of the same files, and what the user had before a
    // fetch-back brought the agent's commits into that branch: a host every version names
    let resolved = |p: &Path| host_path::resolve(p).unwrap_or_else(|_| p.to_path_buf());
    let parse = |text: &str| {
        crate::config::jsonc::parse(&loaded.config_file, text)
            .ok()
            .map(|document| document.value)
    };
    let config_versions = committed_texts(&resolved(&loaded.config_file), loaded);
    let mut committed = named_by_every(&config_versions, |_, text| {
        parse(text)
            .map(|v| {
                configuration_names(&v)
                    .into_iter()
                    .map(|n| n.host)
                    .collect()
            })
            .unwrap_or_default()
    });
    if let Some((_, _, request)) = &dockerfile {
        let absolute =
            std::path::absolute(&request.dockerfile).unwrap_or(request.dockerfile.clone());
        let versions = committed_texts(&resolved(&absolute), loaded);
        // each Dockerfile version with the arguments of the configuration's same version
        committed.extend(named_by_every(&versions, |index, text| {
            let args = config_versions
                .get(index)
                .and_then(Option::as_deref)
                .and_then(parse)
                .as_ref()
                .map(build_args)
                .unwrap_or_default();
            dockerfile_hosts(text, &args)
        }));
    }
    committed.extend(local_features.committed_hosts(|p| committed_texts(p, loaded)));
    let requests = judge_registries_at(
        &loaded.workspace_folder,
        profile,
        grants,
        closed,
        (&named, &committed),
    );
    committed.extend(grants.registries.iter().cloned());
    Ok(JudgedRegistries {
        requests,
        hosts: committed,
    })
}

/// What the registry judgement ([`registry_requests`]) decided.
#[derive(Debug, Clone, Default)]
pub(crate) struct JudgedRegistries {
    /// One [`security::Permission::Registry`] request per host the committed side does not
    /// name, judged.
    pub(crate) requests: Vec<PermissionRequest>,
    /// The hosts Features may be fetched from under a closed network: those the committed
    /// side names and those the user granted ([`UpOptions::registry_hosts`]).
    pub(crate) hosts: std::collections::BTreeSet<String>,
}

/// The registry judgement (attack K12) of a Compose configuration's project `target`
/// (attack 23, N9): every image its services have pulled on the host
/// ([`security::compose::pulled_images`]: `image`, the builds' bases and `--from` images,
/// `docker-image://` contexts; one the engine has is left out unless pulled always), judged
/// against the hosts the committed side names: `HEAD`'s version of each of the project's
/// Compose files ([`security::registries::compose_text_hosts`]) and of each service's build
/// Dockerfile, with that service's committed `build.args`. None under `reference` or an open
/// network. Only engine reads and devcell's hardened host git.
///
/// Errors: [`OpsError::Engine`] when the engine cannot be asked.
pub(crate) async fn compose_registry_requests(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    target: &crate::ops::compose::ComposeTarget,
    (profile, grants): (&SecurityProfile, &Grants),
    closed: bool,
) -> Result<Vec<PermissionRequest>> {
    use security::registries::{
        Named, compose_text_args, compose_text_hosts, dockerfile_hosts, image_host,
        judge_registries_at, named_by_every,
    };
    if !closed || !matches!(profile, SecurityProfile::Hardened(_)) {
        return Ok(Vec::new());
    }
    let mut named = Vec::new();
    for pulled in security::compose::pulled_images(&target.model) {
        let reference = pulled.reference;
        if !pulled.always && !reference.contains('$') && present(Some(engine), &reference).await {
            continue;
        }
        named.push(Named {
            host: image_host(&reference),
            source: Source::ComposeService {
                service: pulled.service,
                property: pulled.property,
            },
            reference,
        });
    }
    if named.is_empty() {
        return Ok(Vec::new());
    }
    let resolved = |p: &Path| host_path::resolve(p).unwrap_or_else(|_| p.to_path_buf());
    let files: Vec<Vec<Option<String>>> = target
        .project
        .files
        .iter()
        .map(|f| committed_texts(&resolved(f), loaded))
        .collect();
    let mut committed: std::collections::BTreeSet<String> = files
        .iter()
        .flat_map(|versions| named_by_every(versions, |_, text| compose_text_hosts(text)))
        .collect();
    for (service, path) in security::compose::build_dockerfile_paths(&target.model) {
        let versions = committed_texts(&resolved(&path), loaded);
        committed.extend(named_by_every(&versions, |index, text| {
            // the service's arguments in the same version of the files, later files winning
            let mut args = std::collections::BTreeMap::new();
            for file in &files {
                if let Some(Some(compose)) = file.get(index) {
                    args.extend(compose_text_args(compose, &service));
                }
            }
            dockerfile_hosts(text, &args)
        }));
    }
    Ok(judge_registries_at(
        &loaded.workspace_folder,
        profile,
        grants,
        closed,
        (&named, &committed),
    ))
}

/// The committed versions of the file `path` (resolved) for the registry judgement of `loaded`
/// ([`security::registries::committed_texts`]), read where its
/// [`crate::ops::load::CommittedSide`] says: a repository a container writes (a clone task's
/// clone, whose `HEAD` is the agent's commit: attack 25, P6) has no committed side of its own;
/// the user's repository at the task's base stands for it, read in that repository.
fn committed_texts(path: &Path, loaded: &LoadedConfiguration) -> Vec<Option<String>> {
    use crate::ops::load::CommittedSide;
    let side = loaded
        .workspace_override
        .as_ref()
        .map_or(&CommittedSide::Workspace, |o| &o.committed);
    committed_texts_of(path, &loaded.workspace_folder, side)
}

/// [`committed_texts`] of `path` in the workspace folder `workspace` read as `side` says.
pub(super) fn committed_texts_of(
    path: &Path,
    workspace: &Path,
    side: &crate::ops::load::CommittedSide,
) -> Vec<Option<String>> {
    use crate::ops::load::CommittedSide;
    match side {
        CommittedSide::Workspace => security::registries::committed_texts(path, workspace),
        CommittedSide::Nothing => Vec::new(),
        CommittedSide::Source {
            repository,
            revision,
        } => {
            let workspace =
                host_path::resolve(workspace).unwrap_or_else(|_| workspace.to_path_buf());
            let Ok(relative) = path.strip_prefix(&workspace) else {
                return Vec::new();
            };
            // an object name only: a ref name would be the repository's to move
            if revision.len() < 40 || !revision.chars().all(|c| c.is_ascii_hexdigit()) {
                return Vec::new();
            }
            security::registries::committed_text_at(repository, relative, revision)
                .map(|text| vec![Some(text)])
                .unwrap_or_default()
        }
    }
}

/// The one registry judgement (attack K12) of everything that pulls or fetches for a
/// configuration: `up`, a handoff, its plan and preview, and `devcell build` (attack 23, N18):
/// [`registry_requests`] with the Dockerfile build `up` would make of `loaded` with the
/// judged host environment `host_env`, when the user's network is `closed`; with the hosts
/// the Features' fetcher may then reach.
///
/// Errors: as [`registry_requests`].
pub(crate) async fn judged_registries(
    engine: Option<&dyn Engine>,
    loaded: &LoadedConfiguration,
    host_env: &std::collections::HashMap<String, String>,
    (profile, grants): (&SecurityProfile, &Grants),
    closed: bool,
) -> Result<JudgedRegistries> {
    let build = build_request(loaded, host_env).ok();
    registry_requests(engine, loaded, build.as_ref(), (profile, grants), closed).await
}

/// `opts` with the hosts the Features' fetcher may reach ([`UpOptions::registry_hosts`]) from
/// the registry judgement of `loaded` under `opts`' choice, when no judgement gave them yet:
/// for a step that resolves Features outside `up`'s flow (the drift check of
/// `--environment`). Its requests are not asked here: `up` refused them before.
///
/// Errors: the security choice's; as [`registry_requests`].
pub(crate) async fn with_registry_hosts(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
) -> Result<UpOptions> {
    if opts.registry_hosts.is_some() {
        return Ok(opts.clone());
    }
    let choice = security_choice(&opts.security, &opts.settings)?;
    let (profile, grants) = (&choice.profile, &choice.grants);
    let judged = judged_options(opts, profile, grants);
    let registries = judged_registries(
        Some(engine),
        loaded,
        &judged.target.env,
        (profile, grants),
        choice.network.closed(),
    )
    .await?;
    Ok(UpOptions {
        registry_hosts: Some(registries.hosts),
        ..opts.clone()
    })
}

/// Whether the engine (when there is one) has `reference`, so nothing pulls it; a reference
/// the engine cannot inspect (one that does not parse) counts as missing, so it is judged.
async fn present(engine: Option<&dyn Engine>, reference: &str) -> bool {
    match engine {
        Some(engine) => matches!(engine.inspect_image(reference).await, Ok(Some(_))),
        None => false,
    }
}
