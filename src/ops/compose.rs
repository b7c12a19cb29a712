//! Compose configurations (`dockerComposeFile` + `service`): the project a configuration
//! names, Compose's resolved model of its files, and the primary service's container, shared
//! by `up` ([`super::compose_up`]), `exec`, `run-user-commands`, `set-up`, `down` and
//! `build` ([spec: Compose properties](https://containers.dev/implementors/json_reference/#compose-specific)).
//!
//! The project name is the reference CLI's (spec-note 0600), and the primary container is
//! found as the reference finds it, by Compose's own `com.docker.compose.project` and
//! `com.docker.compose.service` labels, so each tool finds the other's containers.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::engine::compose::{
    CONFIG_FILES_LABEL, ComposeCli, ComposeProject, PROJECT_LABEL, ProjectNameInputs,
    config_files_from_label, project_name, service_labels,
};
use crate::engine::{ContainerInfo, Engine};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::target::short;
use crate::security::{Grants, SecurityProfile};

/// How much of `<workspace>/.env` is read for `COMPOSE_PROJECT_NAME` (it is the repository's).
const DOT_ENV_MAX: u64 = 64 * 1024;

/// A Compose configuration's project: the repository's files, Compose's model of them and the
/// primary service.
#[derive(Debug, Clone)]
pub(crate) struct ComposeTarget {
    /// The project with the repository's files only (in `dockerComposeFile` order).
    pub(crate) project: ComposeProject,
    /// `docker compose config --format json --profile '*'` of those files.
    pub(crate) model: Value,
    /// `service`: the primary service, the one devcell attaches to.
    pub(crate) service: String,
    /// `runServices` (`None`: every service).
    pub(crate) run_services: Option<Vec<String>>,
    /// What was judged, compared right before Compose builds or starts anything.
    pub(crate) judged: crate::ops::compose_judged::JudgedInputs,
}

impl ComposeTarget {
    /// The primary service in the model.
    pub(crate) fn service_model(&self) -> &Value {
        self.model
            .pointer(&format!("/services/{}", pointer_escape(&self.service)))
            .unwrap_or(&Value::Null)
    }

    /// The services `up -d` starts: `runServices` plus the primary service (the reference CLI
    /// passes them only when `runServices` is set; none means every service).
    pub(crate) fn up_services(&self) -> Vec<String> {
        up_services(&self.service, self.run_services.as_deref())
    }

    /// The project with `files` instead of the repository's (its files plus an override).
    pub(crate) fn with_files(&self, files: Vec<PathBuf>) -> ComposeProject {
        ComposeProject {
            files,
            ..self.project.clone()
        }
    }
}

/// Refuses a project whose Compose files make Compose read a local file outside the workspace
/// that `grants` do not allow (spec-note 0601): an `include`, `extends.file`, `env_file` or
/// `label_file` (through included and extended files), judged on the files as YAML before
/// any `docker compose config`, which itself reads them.
///
/// Errors: [`OpsError::Security`] listing every such request.
pub(crate) fn judge_compose_files(
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Result<Vec<crate::security::PermissionRequest>> {
    let (files, explicit_env_file) = compose_files(loaded, env);
    if let Some(bomb) = crate::security::compose_files::alias_bomb(&files) {
        return Err(OpsError::Unsupported {
            message: format!(
                "the Compose file `{}` is a YAML alias bomb: its aliases expand beyond what a Compose file needs (Compose would expand it for minutes); nothing was run",
                bomb.display()
            ),
            hint: None,
        });
    }
    let home = env.get("HOME").map(PathBuf::from);
    let places =
        crate::security::host_path::Places::new(&loaded.workspace_folder, home.as_deref(), None);
    let env_file =
        crate::security::compose_files::project_env_file(&files, explicit_env_file.as_deref())
            .unwrap_or_else(|| loaded.workspace_folder.join(".env"));
    let requests = crate::security::compose_files::compose_file_requests(
        profile,
        &loaded.config_file,
        &files,
        &env_file,
        &places,
        grants,
    );
    if let Some(refused) = crate::security::policy::refusal(profile, &requests) {
        return Err(refused.into());
    }
    Ok(requests)
}

/// [`compose_target`] for a `build` or `up` that may build the services' images: under
/// Podman, the project's CLI builds with the engine's classic builder
/// ([`crate::engine::compose::ComposeCli::with_classic_builder`], spec-note 0610).
///
/// Errors: as [`compose_target`]; the engine's.
pub(crate) async fn compose_build_target(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    target: &crate::ops::options::TargetOptions,
    security: (&SecurityProfile, &Grants),
) -> Result<ComposeTarget> {
    let compose_path = target.docker_compose_path.as_deref();
    let mut compose = compose_target(loaded, &target.env, compose_path, security).await?;
    if engine.is_podman().await? {
        compose.project.cli = compose.project.cli.with_classic_builder();
    }
    Ok(compose)
}

/// Locates Compose v2 and reads the configuration's project: its files (relative to
/// devcontainer.json), Compose's model of them and the project name (spec-note 0600); `env` is
/// the host environment (`COMPOSE_PROJECT_NAME`), `compose_path` `--docker-compose-path`;
/// Compose runs with [`compose_env`] of `security` (profile and grants).
///
/// An empty `dockerComposeFile` array takes its files from `COMPOSE_FILE`, `.env` or
/// Compose's default name ([`compose_files`], spec-note 0608).
///
/// Errors: [`OpsError::Compose`] (no Compose v2, a file Compose cannot read);
/// [`OpsError::Unsupported`] for a `service` the files do not define.
///
/// Before Compose reads anything, the local files the project's files name (`include`,
/// `extends.file`, `env_file`, `label_file`) are judged ([`judge_compose_files`]).
pub(crate) async fn compose_target(
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
    compose_path: Option<&str>,
    security: (&SecurityProfile, &Grants),
) -> Result<ComposeTarget> {
    judge_compose_files(loaded, env, security.0, security.1)?;
    let (files, explicit_env_file) = compose_files(loaded, env);
    let cli = ComposeCli::locate(None, compose_path)
        .await?
        .with_env(compose_env(security.0, security.1, env));
    let env_file = Some(pinned_env_file(
        &cli,
        loaded,
        env,
        &files,
        explicit_env_file.as_deref(),
        security,
    )?);
    let model = cli.config(None, &files, env_file.as_deref()).await?;
    let dot_env = read_dot_env(&loaded.workspace_folder);
    let name = project_name(&ProjectNameInputs {
        env: env.get("COMPOSE_PROJECT_NAME").map(String::as_str),
        workspace_dot_env: dot_env.as_deref(),
        model_name: model.get("name").and_then(Value::as_str),
        workspace_folder: &loaded.workspace_folder,
        first_file: files.first().map(PathBuf::as_path),
    });
    // The model as Compose resolves it under that name (network and volume names), and the
    // env files' paths, which the resolved model replaces by their contents: put back so
    // they are judged (spec-note 0400, attacks). Two Compose processes at once.
    let renamed = async {
        if model.get("name").and_then(Value::as_str) == Some(name.as_str()) {
            Ok(None)
        } else {
            cli.config(Some(&name), &files, env_file.as_deref())
                .await
                .map(Some)
        }
    };
    let (renamed, raw) = tokio::try_join!(
        renamed,
        cli.config_env_files(Some(&name), &files, env_file.as_deref())
    )?;
    let named = renamed.is_some();
    let mut model = renamed.unwrap_or(model);
    let project = ComposeProject {
        cli,
        name,
        files,
        env_file,
    };
    let judged = crate::ops::compose_judged::JudgedInputs::record(&project, &model, named);
    copy_env_files(&raw, &mut model);
    let service = loaded.typed.service.clone().unwrap_or_default();
    let target = ComposeTarget {
        project,
        model,
        service,
        run_services: loaded.typed.run_services.clone(),
        judged,
    };
    if target.service_model().is_null() {
        let defined: Vec<&str> = target
            .model
            .get("services")
            .and_then(Value::as_object)
            .map(|s| s.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(OpsError::Unsupported {
            message: format!(
                "`{}`: service: `{}` is not a service of the Compose files (they define: {})",
                loaded.config_file.display(),
                target.service,
                defined.join(", ")
            ),
            hint: Some("set `service` to one of the Compose files' services".into()),
        });
    }
    Ok(target)
}

/// devcell's own copy of the project's env file ([`crate::security::compose_files::project_env_file`],
/// read by [`crate::security::compose_files::read_project_env`]: a link or a path leaving the
/// workspace is refused unless granted), written in the CLI's private folder
/// ([`ComposeCli::pin_env_file`]; empty when there is none): every Compose command gets it as
/// `--env-file`, so Compose never opens an env file the repository chose (spec-note 0614).
///
/// Errors: [`OpsError::Security`] (`PathOutside`, `PathUnresolvable`); [`OpsError::Unsupported`]
/// when the copy cannot be written.
fn pinned_env_file(
    cli: &ComposeCli,
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
    files: &[PathBuf],
    explicit: Option<&Path>,
    (profile, grants): (&SecurityProfile, &Grants),
) -> Result<PathBuf> {
    let home = env.get("HOME").map(PathBuf::from);
    let places =
        crate::security::host_path::Places::new(&loaded.workspace_folder, home.as_deref(), None);
    let bytes = match crate::security::compose_files::project_env_file(files, explicit) {
        Some(path) => {
            crate::security::compose_files::read_project_env(profile, &path, &places, grants)?
        }
        None => Vec::new(),
    };
    cli.pin_env_file(&bytes).map_err(|e| OpsError::Unsupported {
        message: format!("cannot write devcell's copy of the Compose project's env file: {e}"),
        hint: None,
    })
}

/// The Compose files of a configuration and the `--env-file` to pass (spec-note 0608, the
/// reference CLI's rule): `dockerComposeFile` (a string or a non-empty array) resolved against
/// devcontainer.json's folder, with no env file. An empty array leaves the choice to the
/// workspace folder, as the reference does: `COMPOSE_FILE` of `env` (the host's), else the
/// first `COMPOSE_FILE=<value>` line of `<workspace>/.env` (trimmed), each split at `:` with
/// every part resolved against the workspace folder (empty parts dropped); else
/// `<workspace>/docker-compose.yml` and, when it is a file, `docker-compose.override.yml`; and
/// `<workspace>/.env` as `--env-file` when it is a file.
pub(crate) fn compose_files(
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
) -> (Vec<PathBuf>, Option<PathBuf>) {
    if loaded
        .typed
        .docker_compose_file
        .as_ref()
        .is_none_or(|f| !f.is_empty())
    {
        return (loaded.typed.compose_files(&loaded.config_file), None);
    }
    let workspace = &loaded.workspace_folder;
    let dot_env_path = workspace.join(".env");
    let dot_env = read_dot_env(workspace);
    let files = default_compose_files(
        workspace,
        env.get("COMPOSE_FILE").map(String::as_str),
        dot_env.as_deref(),
        |p| p.is_file(),
    );
    (files, dot_env.is_some().then_some(dot_env_path))
}

/// [`compose_files`] for an empty `dockerComposeFile` array (pure: `is_file` asks the host).
fn default_compose_files(
    workspace: &Path,
    env_compose_file: Option<&str>,
    dot_env: Option<&str>,
    is_file: impl Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let listed = env_compose_file
        .filter(|v| !v.is_empty())
        .or_else(|| dot_env.and_then(|text| dot_env_value(text, "COMPOSE_FILE")));
    if let Some(list) = listed {
        let files: Vec<PathBuf> = list
            .split(':')
            .filter(|p| !p.is_empty())
            .map(|p| workspace.join(p))
            .collect();
        if !files.is_empty() {
            return files;
        }
    }
    let mut files = vec![workspace.join("docker-compose.yml")];
    let override_file = workspace.join("docker-compose.override.yml");
    if is_file(&override_file) {
        files.push(override_file);
    }
    files
}

/// The value of the first line `<name>=<at least one character>` of an env file, trimmed;
/// `None` when there is none or it trims to nothing (the reference's reading of `.env`).
fn dot_env_value<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    text.split(['\n', '\r', '\u{2028}', '\u{2029}'])
        .find_map(|line| {
            line.strip_prefix(name)?
                .strip_prefix('=')
                .filter(|v| !v.is_empty())
        })
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The host variables the engine and Compose themselves need (never the repository's to ask).
const TOOL_VARIABLES: &[&str] = &[
    "PATH",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "XDG_RUNTIME_DIR",
    "TMPDIR",
];

/// The environment Compose runs with, so its `${VAR}` interpolation of the repository's files
/// sees only what the profile lets cross (spec-note 0602): the tool variables
/// ([`TOOL_VARIABLES`]) plus [`security::host_env::visible_env`] (under `hardened` the granted
/// and non-secret names; under `reference` everything).
pub(crate) fn compose_env(
    profile: &SecurityProfile,
    grants: &Grants,
    env: &HashMap<String, String>,
) -> Vec<(String, String)> {
    let mut visible = crate::security::host_env::visible_env(profile, grants, env);
    for name in TOOL_VARIABLES {
        if let Some(v) = env.get(*name) {
            visible.insert(name.to_string(), v.clone());
        }
    }
    // Compose fetches `include:`/`extends` of `git` and `oci://` resources while it loads
    // the files, on the host, with the user's git and registry credentials, before anything
    // is judged: under `hardened` those loaders are off (spec-note 0601, attacks).
    if matches!(profile, SecurityProfile::Hardened(_)) {
        for name in REMOTE_LOADERS {
            visible.insert(name.to_string(), "false".to_string());
        }
    }
    let mut all: Vec<(String, String)> = visible.into_iter().collect();
    all.sort();
    all
}

/// Compose's switches for its remote resource loaders (a boolean each; on unless `false`).
const REMOTE_LOADERS: &[&str] = &[
    "COMPOSE_EXPERIMENTAL_GIT_REMOTE",
    "COMPOSE_EXPERIMENTAL_OCI_REMOTE",
];

/// The names the project's env files define (`--env-file`, else the `.env` beside the first
/// file, as Compose reads them): `config --environment` run with the tool variables alone, so
/// every other name it prints came from a file. Empty when Compose cannot say (an older v2).
pub(crate) async fn env_file_names(
    target: &ComposeTarget,
    env: &HashMap<String, String>,
) -> Vec<String> {
    let tools: Vec<(String, String)> = TOOL_VARIABLES
        .iter()
        .filter_map(|n| env.get(*n).map(|v| (n.to_string(), v.clone())))
        .collect();
    let project = crate::engine::compose::ComposeProject {
        cli: target.project.cli.clone().with_env(tools),
        ..target.project.clone()
    };
    project
        .environment()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|n| !is_tool_variable(n))
        .collect()
}

/// Whether `name` is one of [`TOOL_VARIABLES`].
pub(crate) fn is_tool_variable(name: &str) -> bool {
    TOOL_VARIABLES.contains(&name)
}

/// The project's container of `service` (the first not being removed), inspected.
///
/// Errors: [`OpsError::Engine`].
pub(crate) async fn find_service_container(
    engine: &dyn Engine,
    project: &str,
    service: &str,
) -> Result<Option<ContainerInfo>> {
    for summary in engine
        .find_containers(&service_labels(project, service))
        .await?
        .iter()
        .filter(|c| c.state != "removing")
    {
        if let Some(info) = engine.inspect_container(&summary.id).await? {
            return Ok(Some(info));
        }
    }
    Ok(None)
}

/// The project's primary container, when it is this workspace's: a container of the
/// project's primary service that carries other id labels (another workspace whose files
/// name the same project) is an error, never reused (spec-note 0603).
///
/// Errors: [`OpsError::Unsupported`] for another workspace's container;
/// [`OpsError::Engine`].
pub(crate) async fn primary_of_workspace(
    engine: &dyn Engine,
    target: &ComposeTarget,
    id_labels: &std::collections::BTreeMap<String, String>,
) -> Result<Option<ContainerInfo>> {
    let Some(info) = find_service_container(engine, &target.project.name, &target.service).await?
    else {
        return Ok(None);
    };
    let foreign: Vec<String> = id_labels
        .iter()
        .filter(|(k, v)| info.labels.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if foreign.is_empty() {
        return Ok(Some(info));
    }
    Err(OpsError::Unsupported {
        message: format!(
            "the Compose project `{}` has a container of service `{}` ({}) that is not this workspace's (it lacks {}): it is not used",
            target.project.name,
            target.service,
            short(&info.id),
            foreign.join(", ")
        ),
        hint: Some(format!(
            "another workspace uses the project name `{}`; set `COMPOSE_PROJECT_NAME` to another name, or remove that project if it is not in use",
            target.project.name
        )),
    })
}

/// Refuses a project that is not this workspace's before anything of it is built, created or
/// replaced: one that already has containers and none of them carries every id label of this
/// workspace (another workspace's project, or one made with `docker compose` by hand, that the
/// repository's files, `.env` or `name:` name), or one where a container carries another
/// workspace's value of an id label. Compose would otherwise recreate that project's services
/// of the same names from the repository's files, put the repository's services on its
/// networks, and a later `down --remove` would remove all of it (spec-note 0603).
///
/// Errors: [`OpsError::Unsupported`] naming the project and the containers;
/// [`OpsError::Engine`].
pub(crate) async fn claim_project(
    engine: &dyn Engine,
    target: &ComposeTarget,
    id_labels: &BTreeMap<String, String>,
) -> Result<()> {
    let containers = engine
        .find_containers(&project_labels(&target.project.name))
        .await?;
    let labels: Vec<(&str, &BTreeMap<String, String>)> = containers
        .iter()
        .filter(|c| !sidecar_left_by_this_workspace(&c.labels, target, id_labels))
        .map(|c| (c.id.as_str(), &c.labels))
        .collect();
    match foreign_containers(&labels, id_labels) {
        None => Ok(()),
        Some(foreign) => Err(OpsError::Unsupported {
            message: format!(
                "the Compose project `{}` already exists and is not this workspace's (its containers {} do not carry {}): it is not brought up, built or changed",
                target.project.name,
                foreign
                    .iter()
                    .map(|id| short(id))
                    .collect::<Vec<_>>()
                    .join(", "),
                join_pairs(id_labels)
            ),
            hint: Some(format!(
                "the configuration's Compose files (`name:`) or the workspace's `.env` name another project; set `COMPOSE_PROJECT_NAME` to another name, or remove the project `{}` if it is not in use",
                target.project.name
            )),
        }),
    }
}

/// Whether a container of the project is a sidecar that this workspace's own `up` brought up
/// and left (its dev container was removed since): the reference CLI creates the dev container
/// again beside it, and so does devcell (issue 28). Proven by what only devcell's `up` of this
/// workspace writes, not by the container's word alone: a service other than the primary, none
/// of `id_labels`, and Compose's config-files label naming this configuration's Compose files
/// followed by one override file in devcell's state folder for this project whose primary
/// service carries every one of `id_labels`. Anything else stays foreign.
fn sidecar_left_by_this_workspace(
    labels: &BTreeMap<String, String>,
    target: &ComposeTarget,
    id_labels: &BTreeMap<String, String>,
) -> bool {
    let sidecar = labels
        .get(crate::engine::compose::SERVICE_LABEL)
        .is_some_and(|s| *s != target.service);
    if !sidecar || id_labels.keys().any(|k| labels.contains_key(k)) {
        return false;
    }
    let Some(files) = labels
        .get(CONFIG_FILES_LABEL)
        .map(|v| config_files_from_label(v))
    else {
        return false;
    };
    let Some((override_file, repository_files)) = files.split_last() else {
        return false;
    };
    let Some(state) = crate::ops::state_folder::StateFolder::open_default() else {
        return false;
    };
    let ours = state.root().join("compose").join(&target.project.name);
    let named = has_override_name(override_file);
    if repository_files != target.project.files.as_slice()
        || override_file.parent() != Some(ours.as_path())
        || !named
    {
        return false;
    }
    override_labels_primary(override_file, &target.service, id_labels)
}

/// Whether `file` is named as devcell names the Compose override files it writes
/// (`docker-compose.devcell-<digest>.json` or `.yml`, `compose_builds`): one part of proving a
/// project's container was brought up by devcell's own `up`, not a file the repository named.
fn has_override_name(file: &Path) -> bool {
    file.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.starts_with("docker-compose.devcell-") && (n.ends_with(".json") || n.ends_with(".yml"))
    })
}

/// Whether a container (its `labels`) of a Compose project was brought up by devcell's own
/// `up` of the workspace `id_labels` identifies, proven as [`sidecar_left_by_this_workspace`]
/// proves it but before the configuration's Compose files are read (the primary service not
/// known yet): it carries no other value of one of `id_labels`, and Compose's config-files
/// label ends with one override file in devcell's state folder for the container's project
/// that labels a service with every one of `id_labels` (spec-note 0657). A project the
/// repository names after another workspace's is never proven this way.
pub(crate) fn brought_up_by_this_workspace(
    labels: &BTreeMap<String, String>,
    id_labels: &BTreeMap<String, String>,
) -> bool {
    crate::ops::state_folder::StateFolder::open_default()
        .is_some_and(|state| brought_up_from(state.root(), labels, id_labels))
}

/// [`brought_up_by_this_workspace`] with devcell's state folder at `state`.
fn brought_up_from(
    state: &Path,
    labels: &BTreeMap<String, String>,
    id_labels: &BTreeMap<String, String>,
) -> bool {
    if id_labels.is_empty() || !not_another_workspaces(labels, id_labels) {
        return false;
    }
    let Some(project) = labels.get(PROJECT_LABEL) else {
        return false;
    };
    let files = labels
        .get(CONFIG_FILES_LABEL)
        .map(|v| config_files_from_label(v))
        .unwrap_or_default();
    let Some(override_file) = files.last() else {
        return false;
    };
    let ours = state.join("compose").join(project);
    let named = has_override_name(override_file);
    if override_file.parent() != Some(ours.as_path()) || !named || project.contains('/') {
        return false;
    }
    read_override(override_file).is_some_and(|value| {
        value["services"].as_object().is_some_and(|services| {
            services
                .values()
                .any(|s| labels_every(&s["labels"], id_labels))
        })
    })
}

/// Whether devcell's override file `path` (a regular file of its state folder, read without
/// following a link, at most 4 MiB) labels `service` with every one of `id_labels`.
fn override_labels_primary(
    path: &Path,
    service: &str,
    id_labels: &BTreeMap<String, String>,
) -> bool {
    read_override(path)
        .is_some_and(|value| labels_every(&value["services"][service]["labels"], id_labels))
}

/// Whether the labels of an override file's service carry every one of `id_labels`.
fn labels_every(labels: &Value, id_labels: &BTreeMap<String, String>) -> bool {
    // values are written with Compose's interpolation escaped (`$` as `$$`)
    id_labels.iter().all(|(k, v)| {
        labels
            .get(k)
            .and_then(Value::as_str)
            .is_some_and(|have| have == v || have == v.replace('$', "$$"))
    })
}

/// devcell's override file `path` parsed: a regular file of its state folder, read without
/// following a link, at most 4 MiB; `None` otherwise.
fn read_override(path: &Path) -> Option<Value> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    const MAX: u64 = 4 * 1024 * 1024;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(
            rustix::fs::OFlags::NOFOLLOW.bits() as i32 | rustix::fs::OFlags::NONBLOCK.bits() as i32,
        )
        .open(path)
        .ok()?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut text = Vec::new();
    file.take(MAX).read_to_end(&mut text).ok()?;
    // JSON, or YAML with `!override` tags (spec-note 0431): read as YAML, tags dropped
    let yaml: serde_yaml::Value = serde_yaml::from_slice(&text).ok()?;
    serde_json::to_value(untagged(yaml)).ok()
}

/// `value` with every YAML tag dropped (its tagged values kept).
fn untagged(value: serde_yaml::Value) -> serde_yaml::Value {
    use serde_yaml::Value as Y;
    match value {
        Y::Tagged(t) => untagged(t.value),
        Y::Sequence(items) => Y::Sequence(items.into_iter().map(untagged).collect()),
        Y::Mapping(map) => Y::Mapping(map.into_iter().map(|(k, v)| (k, untagged(v))).collect()),
        other => other,
    }
}

/// The containers (by id) that make a project not this workspace's ([`claim_project`]): every
/// one when none carries all of `id_labels`, else those carrying another value of one of
/// them; `None` when the project is this workspace's or has no container.
fn foreign_containers<'a>(
    containers: &[(&'a str, &BTreeMap<String, String>)],
    id_labels: &BTreeMap<String, String>,
) -> Option<Vec<&'a str>> {
    let ours =
        |labels: &BTreeMap<String, String>| id_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
    let other = |labels: &BTreeMap<String, String>| {
        id_labels
            .iter()
            .any(|(k, v)| labels.get(k).is_some_and(|have| have != v))
    };
    let foreign: Vec<&str> = if containers.iter().any(|(_, l)| ours(l)) {
        containers
            .iter()
            .filter(|(_, l)| other(l))
            .map(|(id, _)| *id)
            .collect()
    } else {
        containers.iter().map(|(id, _)| *id).collect()
    };
    (!foreign.is_empty()).then_some(foreign)
}

/// Whether a container of the project may be stopped or removed with this workspace's
/// project: it carries no other value of one of `id_labels` (spec-note 0603).
pub(crate) fn not_another_workspaces(
    labels: &BTreeMap<String, String>,
    id_labels: &BTreeMap<String, String>,
) -> bool {
    !id_labels
        .iter()
        .any(|(k, v)| labels.get(k).is_some_and(|have| have != v))
}

fn join_pairs(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The files a container was brought up with ([`CONFIG_FILES_LABEL`]), so a project is
/// started again with the override files it was created with (the reference CLI's reuse);
/// `None` when the label is missing or names a file that no longer exists.
pub(crate) fn recorded_files(info: &ContainerInfo) -> Option<Vec<PathBuf>> {
    let files = config_files_from_label(info.labels.get(CONFIG_FILES_LABEL)?);
    (!files.is_empty() && files.iter().all(|f| f.is_file())).then_some(files)
}

/// The labels of every container of a project.
pub(crate) fn project_labels(project: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(PROJECT_LABEL.to_string(), project.to_string())])
}

/// `<workspace>/.env` (its first [`DOT_ENV_MAX`] bytes), when it is a regular file that is,
/// or resolves to, one inside the workspace, read without following a link swapped in since:
/// one linking out of the workspace is not read here (the pinned env file refuses it,
/// spec-note 0614).
fn read_dot_env(workspace: &Path) -> Option<String> {
    use crate::security::host_path::{Place, Places, read_no_follow, resolve};
    let resolved = resolve(&workspace.join(".env")).ok()?;
    if Places::new(workspace, None, None).place(&resolved) != Place::Workspace {
        return None;
    }
    let bytes =
        read_no_follow(&resolved, crate::security::compose_files::MAX_FILE_BYTES).ok()??;
    let end = bytes.len().min(DOT_ENV_MAX as usize);
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

fn up_services(service: &str, run_services: Option<&[String]>) -> Vec<String> {
    match run_services {
        None => Vec::new(),
        Some(list) => {
            let mut services = list.to_vec();
            if !services.iter().any(|s| s == service) {
                services.push(service.to_string());
            }
            services
        }
    }
}

/// A JSON pointer token (`~` → `~0`, `/` → `~1`).
fn pointer_escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Copies each service's `env_file` list from `raw` (the model with env files unread) into
/// `model` (the resolved one, which has none).
fn copy_env_files(raw: &Value, model: &mut Value) {
    let Some(services) = raw.get("services").and_then(Value::as_object) else {
        return;
    };
    for (name, service) in services {
        if let Some(env_file) = service.get("env_file")
            && let Some(target) = model
                .get_mut("services")
                .and_then(|s| s.get_mut(name))
                .and_then(Value::as_object_mut)
        {
            target.insert("env_file".to_string(), env_file.clone());
        }
    }
}

/// The other containers of the Compose project a workspace's primary container belongs to
/// (its `com.docker.compose.project` label), for a handoff's `status` and `delete` (issue 14
/// item 5). Only asked for a container already known to be the workspace's (bound to it,
/// spec-note 0421), so a project named by another workspace is never reached through it.
/// Empty for a container Compose did not create.
///
/// Errors: [`OpsError::Engine`] when the containers cannot be listed.
pub(crate) async fn project_siblings(
    engine: &dyn Engine,
    primary: &BTreeMap<String, String>,
    primary_id: &str,
) -> Result<Vec<crate::engine::ContainerSummary>> {
    let Some(project) = primary.get(crate::engine::compose::PROJECT_LABEL) else {
        return Ok(Vec::new());
    };
    let labels = BTreeMap::from([(
        crate::engine::compose::PROJECT_LABEL.to_string(),
        project.clone(),
    )]);
    // the primary's own workspace identity: a container carrying another one is never its
    // sibling (spec-note 0603)
    let identity: BTreeMap<String, String> = primary
        .iter()
        .filter(|(k, _)| {
            [
                crate::names::LOCAL_FOLDER_LABEL,
                crate::names::CONFIG_FILE_LABEL,
            ]
            .contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(engine
        .find_containers(&labels)
        .await?
        .into_iter()
        .filter(|c| c.id != primary_id && not_another_workspaces(&c.labels, &identity))
        .collect())
}

/// What the services of a Compose handoff can reach, said in the plan and kept with the
/// result (spec-note 0606).
pub(crate) const COMPOSE_NETWORK_NOTE: &str = "Compose project network: the primary service and every sidecar share the project's network and reach each other by service name, and through this engine's bridge the host and every network it reaches (`--network none` or `allowlist` closes the project networks)";

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack P5 with the primary removed: a sidecar devcell's `up` of this workspace brought
    /// up is proven the workspace's by devcell's override file for its project (labelling a
    /// service with every id label) without its primary; a container only claiming the
    /// project, one whose override labels another workspace, one whose last file is not
    /// devcell's, and another workspace's primary are not.
    #[test]
    fn a_sidecar_is_proven_the_workspaces_by_devcells_override_file() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("compose/p");
        std::fs::create_dir_all(&dir).unwrap();
        let id_labels = BTreeMap::from([
            (
                crate::names::LOCAL_FOLDER_LABEL.to_string(),
                "/w".to_string(),
            ),
            (
                crate::names::CONFIG_FILE_LABEL.to_string(),
                "/w/.devcontainer/devcontainer.json".to_string(),
            ),
        ]);
        let ours = dir.join("docker-compose.devcell-0123456789abcdef.json");
        let labels_of = |id: &BTreeMap<String, String>| serde_json::json!({"services": {"app": {"labels": id}}});
        std::fs::write(&ours, labels_of(&id_labels).to_string()).unwrap();
        let theirs = dir.join("docker-compose.devcell-fedcba9876543210.json");
        let mut other = id_labels.clone();
        other.insert(
            crate::names::LOCAL_FOLDER_LABEL.to_string(),
            "/v".to_string(),
        );
        std::fs::write(&theirs, labels_of(&other).to_string()).unwrap();
        let sidecar = |files: String| {
            BTreeMap::from([
                (PROJECT_LABEL.to_string(), "p".to_string()),
                (CONFIG_FILES_LABEL.to_string(), files),
            ])
        };
        let with = |f: &Path| {
            sidecar(format!(
                "/w/.devcontainer/docker-compose.yml,{}",
                f.display()
            ))
        };
        assert!(brought_up_from(state.path(), &with(&ours), &id_labels));
        assert!(!brought_up_from(state.path(), &with(&theirs), &id_labels));
        assert!(!brought_up_from(
            state.path(),
            &sidecar("/w/.devcontainer/docker-compose.yml".into()),
            &id_labels
        ));
        let mut claiming = BTreeMap::from([(PROJECT_LABEL.to_string(), "p".to_string())]);
        assert!(!brought_up_from(state.path(), &claiming, &id_labels));
        // another workspace's primary, even with this workspace's override named
        claiming = with(&ours);
        claiming.insert(
            crate::names::LOCAL_FOLDER_LABEL.to_string(),
            "/v".to_string(),
        );
        assert!(!brought_up_from(state.path(), &claiming, &id_labels));
        // another project's name with this project's override file
        let mut renamed = with(&ours);
        renamed.insert(PROJECT_LABEL.to_string(), "q".to_string());
        assert!(!brought_up_from(state.path(), &renamed, &id_labels));
        assert!(!brought_up_from(
            state.path(),
            &with(&ours),
            &BTreeMap::new()
        ));
    }

    #[test]
    fn run_services_get_the_primary_and_none_means_all() {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(up_services("app", None).is_empty());
        assert_eq!(up_services("app", Some(&list(&["db"]))), ["db", "app"]);
        assert_eq!(
            up_services("app", Some(&list(&["app", "db"]))),
            ["app", "db"]
        );
        assert_eq!(up_services("app", Some(&[])), ["app"]);
        assert_eq!(pointer_escape("a/b~c"), "a~1b~0c");
    }

    /// Attack (spec-note 0603): a repository naming another project by `name:` or `.env`.
    #[test]
    fn a_project_is_this_workspaces_only_with_one_of_its_containers_and_no_other_workspaces() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let ids = map(&[
            ("devcontainer.local_folder", "/w/b"),
            (
                "devcontainer.config_file",
                "/w/b/.devcontainer/devcontainer.json",
            ),
        ]);
        let ours = ids.clone();
        let theirs = map(&[
            ("devcontainer.local_folder", "/w/a"),
            (
                "devcontainer.config_file",
                "/w/a/.devcontainer/devcontainer.json",
            ),
        ]);
        let plain = map(&[("com.docker.compose.service", "db")]);
        // no container: a new project
        assert_eq!(foreign_containers(&[], &ids), None);
        // ours, with its sidecars (which carry no id label)
        assert_eq!(
            foreign_containers(&[("p", &ours), ("s", &plain)], &ids),
            None
        );
        // another workspace's, or a project made by hand: every container is foreign
        assert_eq!(
            foreign_containers(&[("a", &theirs), ("s", &plain)], &ids),
            Some(vec!["a", "s"])
        );
        assert_eq!(foreign_containers(&[("s", &plain)], &ids), Some(vec!["s"]));
        // a container of another workspace that joined ours
        assert_eq!(
            foreign_containers(&[("p", &ours), ("a", &theirs)], &ids),
            Some(vec!["a"])
        );
        assert!(not_another_workspaces(&plain, &ids));
        assert!(not_another_workspaces(&ours, &ids));
        assert!(!not_another_workspaces(&theirs, &ids));
    }

    #[test]
    fn an_empty_compose_file_list_reads_compose_file_then_dot_env_then_the_default_name() {
        let ws = Path::new("/w/repo");
        let none = |_: &Path| false;
        let paths = |l: &[&str]| l.iter().map(PathBuf::from).collect::<Vec<_>>();
        // the host's COMPOSE_FILE first, split at `:`, relative to the workspace folder
        assert_eq!(
            default_compose_files(
                ws,
                Some("a.yml:/abs/b.yml::sub/c.yml"),
                Some("COMPOSE_FILE=x.yml"),
                none
            ),
            paths(&["/w/repo/a.yml", "/abs/b.yml", "/w/repo/sub/c.yml"])
        );
        // an empty COMPOSE_FILE counts as unset: `.env`'s first non-empty line, trimmed
        let dot_env =
            "# c\nCOMPOSE_FILE=\nOTHER=1\r\nCOMPOSE_FILE= x.yml:y.yml \nCOMPOSE_FILE=z.yml\n";
        assert_eq!(
            default_compose_files(ws, Some(""), Some(dot_env), none),
            paths(&["/w/repo/x.yml", "/w/repo/y.yml"])
        );
        // a value that trims to nothing, or no line at all: Compose's default name, with the
        // override file only when it is one
        for text in [
            "COMPOSE_FILE=  \n",
            "COMPOSE_FILES=a.yml",
            " COMPOSE_FILE=a.yml",
        ] {
            assert_eq!(
                default_compose_files(ws, None, Some(text), none),
                paths(&["/w/repo/docker-compose.yml"]),
                "{text:?}"
            );
        }
        assert_eq!(
            default_compose_files(ws, None, None, |p| p
                .ends_with("docker-compose.override.yml")),
            paths(&[
                "/w/repo/docker-compose.yml",
                "/w/repo/docker-compose.override.yml"
            ])
        );
        assert_eq!(dot_env_value("COMPOSE_FILE=a", "COMPOSE"), None);
    }
}
