//! Attaching to a found container: its merged metadata (image label, container label,
//! devcontainer.json), remote user, workspace folder, and the remote environment a process there
//! runs with (the user environment probe, `--remote-env`, `remoteEnv`).

use crate::config::{metadata, substitute};
use crate::engine::{ContainerInfo, Engine};
use crate::lifecycle::{DEFAULT_PROBE_TIMEOUT, probe_user_env};
use crate::lifecycle::{HookEnv, UserEnvProbe};
use crate::ops::container::STATE_DIR;
use crate::ops::entries::existing_entries;
use crate::ops::error::lifecycle_error;
use crate::ops::error::{OpsError, Result};
use crate::ops::executor::EngineExecutor;
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::TargetOptions;
use crate::ops::target::{
    expected_workspace, find_container, id_labels, inspect, join_labels, load,
};
use crate::ops::users::{container_passwd, passwd_account};
use crate::progress::{Event, Reporter};
use crate::security::{self, Grants, PermissionRequest, SecurityProfile};
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Finds the running dev container of `labels` and attaches to it (its label metadata plus the
/// current devcontainer.json's updateable properties, substituted).
///
/// Errors: [`OpsError::NoContainer`], [`OpsError::NotRunning`].
pub(crate) async fn attach_running(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    labels: &BTreeMap<String, String>,
    workspace: Option<&[PathBuf]>,
    env: &HashMap<String, String>,
    default_probe: UserEnvProbe,
) -> Result<Attached> {
    let container = find_container(engine, labels, workspace, &mut Vec::new())
        .await?
        .ok_or_else(|| OpsError::NoContainer {
            labels: join_labels(labels),
            expected: false,
        })?;
    if !container.running {
        return Err(OpsError::NotRunning { id: container.id });
    }
    let mut warnings = Vec::new();
    let entries = existing_entries(&container, loaded, env, &mut warnings);
    let devcontainer_id = crate::config::id::devcontainer_id(labels);
    let mut attached = attach(&container, loaded, entries, &devcontainer_id, default_probe)?;
    attached.exec_user =
        crate::ops::exec_user::resolve(engine, &attached.container, &attached.remote_user, loaded)
            .await;
    Ok(attached)
}

/// A running dev container with its merged configuration: everything needed to run hooks or
/// commands in it.
#[derive(Debug, Clone)]
pub struct Attached {
    /// The container.
    pub container: ContainerInfo,
    /// The merged configuration, fully substituted (phases 1–3).
    pub merged: Value,
    /// The metadata entries, fully substituted (hook sources).
    pub entries: Vec<Value>,
    /// The user commands run as.
    pub remote_user: String,
    /// Under `hardened`, the remote user as numeric `uid:gid`, which every exec uses
    /// ([`Attached::exec_user`]; spec-note 0400); `None`: the name, as the reference CLI does.
    pub exec_user: Option<String>,
    /// The workspace folder in the container.
    pub workspace_folder: String,
    /// The `userEnvProbe` in effect.
    pub probe: UserEnvProbe,
    /// The run-once marker folder (`None` = the remote user's `~/.devcontainer`).
    pub marker_folder: Option<String>,
}

impl Attached {
    /// The user an exec in the container runs as: [`Attached::exec_user`], else the remote
    /// user's name.
    pub fn exec_user(&self) -> String {
        self.exec_user
            .clone()
            .unwrap_or_else(|| self.remote_user.clone())
    }
}

/// Finds the running container `target` names and attaches to it: `--container-id` (an id or
/// a name), else the id labels (`--id-label`s, else the defaults of the workspace's config).
/// With [`TargetOptions::no_configuration`] no configuration is read: the container's
/// `devcontainer.metadata` label alone gives `remoteUser`, `remoteEnv`, …, `${devcontainerId}`
/// comes from the container's own `devcontainer.local_folder`/`devcontainer.config_file`
/// labels (else the `--id-label`s), and commands run in the remote user's home (`/` when it
/// does not exist), as in the reference CLI and `set-up`.
///
/// Errors: [`OpsError::NoContainer`] (no container has the labels),
/// [`OpsError::Engine`] (`NoSuchContainer` for a `--container-id` the engine does not
/// know), [`OpsError::NotRunning`], [`OpsError::Config`].
pub(crate) async fn attach_target(
    engine: &dyn Engine,
    target: &TargetOptions,
    allow: &[String],
    default_probe: UserEnvProbe,
) -> Result<(Attached, Vec<PermissionRequest>)> {
    let mut loaded = if target.no_configuration {
        LoadedConfiguration::empty()
    } else {
        load(target)?
    };
    let labels = if target.no_configuration {
        target.id_labels.iter().cloned().collect()
    } else {
        id_labels(target, &loaded)
    };
    let container = target_container(engine, target, &loaded, &labels, allow).await?;
    if !container.running {
        return Err(OpsError::NotRunning { id: container.id });
    }
    // A container `up` judged under `hardened`: the re-read configuration may use only the
    // host variables `up` let cross, unless granted now (spec-note 0443).
    let judged = security::reattach::JudgedAtCreation::from_labels(&container.labels);
    let grants = Grants::parse(allow)?;
    let mut requests = Vec::new();
    let env = match &judged {
        Some(judged) => {
            let uses = security::host_env::uses(&loaded.workspace.host_env_reads, &[]);
            requests = security::reattach::judge(judged, &grants, &uses, None);
            security::reattach::check(&requests)?;
            let env = security::reattach::visible_env(judged, &grants, &target.env);
            if !target.no_configuration {
                loaded = load(&TargetOptions {
                    env: env.clone(),
                    ..target.clone()
                })?;
            }
            env
        }
        None => target.env.clone(),
    };
    let mut warnings = Vec::new();
    let entries = existing_entries(&container, &loaded, &env, &mut warnings);
    let devcontainer_id =
        crate::config::id::devcontainer_id(&id_source(target, &container, labels));
    let mut attached = attach(
        &container,
        &loaded,
        entries,
        &devcontainer_id,
        default_probe,
    )?;
    attached.exec_user =
        crate::ops::exec_user::resolve(engine, &attached.container, &attached.remote_user, &loaded)
            .await;
    // Without a workspace folder (`--container-id`, no `--workspace-folder`) commands run in
    // the remote user's home unless the `--config` names a `workspaceFolder`, as the
    // reference does (issue 12 item 11b).
    let in_home = target.no_configuration
        || (target.container_id.is_some()
            && !target.workspace_folder_given
            && loaded.raw.get("workspaceFolder").is_none());
    if let Some(judged) = &judged {
        // The remote user judged by the uid the engine will give it (spec-note 0420), before
        // any process runs as it (the home folder's probe below is one).
        let uid = remote_uid(engine, &container, &attached.remote_user).await;
        let root = security::reattach::judge(judged, &grants, &[], uid);
        security::reattach::check(&root)?;
        requests.extend(root);
    }
    if in_home {
        let home = home_of(engine, &container, &attached.remote_user).await;
        attached.workspace_folder =
            usable_folder(engine, &container.id, &attached.exec_user(), &home).await;
    }
    Ok((attached, requests))
}

/// The container `exec` and the other in-container commands attach to: `--container-id`'s,
/// else a Compose configuration's primary service's container by Compose's labels
/// (spec-note 0603), else the one with the id `labels`.
///
/// Errors: [`OpsError::NoContainer`], [`OpsError::Engine`], a Compose project's.
async fn target_container(
    engine: &dyn Engine,
    target: &TargetOptions,
    loaded: &LoadedConfiguration,
    labels: &BTreeMap<String, String>,
    allow: &[String],
) -> Result<ContainerInfo> {
    let compose = !target.no_configuration
        && target.id_labels.is_empty()
        && loaded.typed.kind() == crate::config::model::ConfigKind::Compose;
    Ok(match &target.container_id {
        Some(id) => inspect(engine, id).await?,
        // The primary service's container, by Compose's labels (spec-note 0603).
        None if compose => {
            let project = crate::ops::compose::compose_target(
                loaded,
                &target.env,
                target.docker_compose_path.as_deref(),
                (&SecurityProfile::default(), &Grants::parse(allow)?),
            )
            .await?;
            crate::ops::compose::primary_of_workspace(engine, &project, labels)
                .await?
                .ok_or_else(|| OpsError::NoContainer {
                    labels: join_labels(&crate::engine::compose::service_labels(
                        &project.project.name,
                        &project.service,
                    )),
                    expected: false,
                })?
        }
        None => {
            let expected = expected_workspace(target, loaded);
            let mut passed_over = Vec::new();
            find_container(engine, labels, expected.as_deref(), &mut passed_over)
                .await?
                .ok_or_else(|| OpsError::NoContainer {
                    labels: join_labels(labels),
                    expected: false,
                })?
        }
    })
}

/// The labels `${devcontainerId}` is computed from: the container's own
/// `devcontainer.local_folder`/`devcontainer.config_file` without a configuration or
/// `--id-label`s, else the id `labels`.
fn id_source(
    target: &TargetOptions,
    container: &ContainerInfo,
    labels: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    if target.no_configuration && target.id_labels.is_empty() {
        [
            crate::names::LOCAL_FOLDER_LABEL,
            crate::names::CONFIG_FILE_LABEL,
        ]
        .iter()
        .filter_map(|k| {
            container
                .labels
                .get(*k)
                .map(|v| ((*k).to_string(), v.clone()))
        })
        .collect()
    } else {
        labels
    }
}

/// The uid the engine will run `user` as in `container`: a number as it is, a name through
/// the passwd the engine reads ([`crate::ops::image_files::engine_passwd`]; `None` when the
/// name has no entry, and the engine then refuses it).
///
/// What cannot be judged counts as uid 0 (spec-note 0420): a number past the uid range (runc
/// truncates an entry's id), a name when that passwd cannot be read.
async fn remote_uid(engine: &dyn Engine, container: &ContainerInfo, user: &str) -> Option<u32> {
    use crate::engine::passwd::{Resolved, is_root, resolve, unjudged_name};
    let passwd = match resolve(user, None) {
        Resolved::Uid { uid, .. } => return Some(uid),
        Resolved::OutOfRange(_) => return Some(0),
        _ => crate::ops::image_files::engine_passwd(engine, container).await,
    };
    let passwd = passwd.as_deref();
    if is_root(user, passwd, false) || unjudged_name(user, passwd) {
        return Some(0);
    }
    resolve(user, passwd).uid()
}

/// Reports each granted request of `exec`/`run-user-commands` (spec-note 0443) as a status
/// line (`granted: …`).
pub(crate) fn report_grants(requests: &[PermissionRequest], reporter: &dyn Reporter) {
    for r in requests
        .iter()
        .filter(|r| r.status == security::RequestStatus::Granted)
    {
        reporter.report(Event::Status(format!("granted: {r}")));
    }
}

/// Phases 2 and 3 over the entries and the merged configuration, and who/where/how commands
/// run in `container`.
pub(crate) fn attach(
    container: &ContainerInfo,
    loaded: &LoadedConfiguration,
    entries: Vec<Value>,
    devcontainer_id: &str,
    default_probe: UserEnvProbe,
) -> Result<Attached> {
    let container_env = substitute::env_from_list(&container.env);
    let mut entries = Value::Array(entries);
    substitute::substitute_devcontainer_id(&mut entries, devcontainer_id);
    substitute::substitute_container_env(&mut entries, &container_env)?;
    let entries = match entries {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    let mut merged = metadata::merge_configuration(&loaded.value, &entries);
    substitute::substitute_devcontainer_id(&mut merged, devcontainer_id);
    substitute::substitute_container_env(&mut merged, &container_env)?;
    let remote_user = metadata::ConfiguredUsers::of(&merged)
        .remote()
        .map(str::to_string)
        .or_else(|| Some(container.user.clone()).filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "root".to_string());
    let probe = UserEnvProbe::from_merged_configuration(&merged, default_probe)
        .map_err(lifecycle_error(&container.id))?;
    let marker_folder = container
        .mounts
        .iter()
        .any(|m| m.destination == STATE_DIR)
        .then(|| format!("{STATE_DIR}/markers"));
    Ok(Attached {
        container: container.clone(),
        merged,
        entries,
        remote_user,
        exec_user: None,
        workspace_folder: workspace_folder_in(container, loaded),
        probe,
        marker_folder,
    })
}

/// The workspace folder commands run in: the configuration's, unless the configuration does
/// not set `workspaceFolder` and `container` mounts nothing at or above the default one but
/// bind-mounts the host workspace folder elsewhere (a `handoff` container, whose workspace root
/// is at `/workspace`, found by `exec` or `run-user-commands` through the same id labels): then
/// that mount's destination. A `workspaceFolder` the configuration names is used as it is,
/// covered by a mount or not, as the reference CLI does (spec-note 0474).
pub(crate) fn workspace_folder_in(
    container: &ContainerInfo,
    loaded: &LoadedConfiguration,
) -> String {
    let folder = &loaded.workspace.workspace_folder;
    let covered = container.mounts.iter().any(|m| m.holds(folder));
    let configured = loaded
        .value
        .get("workspaceFolder")
        .and_then(Value::as_str)
        .is_some_and(|f| !f.is_empty());
    if covered || configured {
        return folder.clone();
    }
    let host = &loaded.workspace_folder;
    let canonical = std::fs::canonicalize(host).ok();
    container
        .mounts
        .iter()
        .find(|m| {
            m.kind == "bind"
                && (Path::new(&m.source) == host.as_path()
                    || canonical.as_deref() == Some(Path::new(&m.source)))
        })
        .map_or_else(|| folder.clone(), |m| m.destination.clone())
}

/// The environment a process in `attached`'s container runs with: [`remote_env`] over the
/// user environment probed as its remote user (`userEnvProbe`). The one attach → probe →
/// remote-env step of `up`'s hooks, `exec` and the handoff's agent.
///
/// Errors: [`OpsError::Lifecycle`] when the probe fails.
pub(crate) async fn probed_remote_env(
    engine: &dyn Engine,
    attached: &Attached,
    cli_remote_env: &IndexMap<String, String>,
    reporter: &dyn Reporter,
) -> Result<HookEnv> {
    let executor = EngineExecutor {
        engine,
        container_id: &attached.container.id,
    };
    let user = attached.exec_user();
    let probed = probe_user_env(
        &executor,
        attached.probe,
        Some(&user),
        DEFAULT_PROBE_TIMEOUT,
        reporter,
    )
    .await
    .map_err(lifecycle_error(&attached.container.id))?;
    Ok(remote_env(probed, cli_remote_env, &attached.merged))
}

/// The remote environment: the probed user environment, then `--remote-env`, then the merged
/// `remoteEnv` (which wins; `null` unsets, spec-notes/0027).
pub(crate) fn remote_env(
    probed: HookEnv,
    cli: &IndexMap<String, String>,
    merged: &Value,
) -> HookEnv {
    let mut env = probed.0;
    env.extend(cli.iter().map(|(k, v)| (k.clone(), v.clone())));
    for (name, value) in metadata::MergedConfiguration::of(merged).remote_env {
        match value {
            Some(value) => {
                env.insert(name, value);
            }
            None => {
                env.shift_remove(&name);
            }
        }
    }
    HookEnv(env)
}

/// Adds `safe.directory` for each of `dirs` to git's environment configuration
/// (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, command-scope configuration that
/// git honours for `safe.directory`), after any entries already in `env`. Nothing when `dirs`
/// is empty.
pub(crate) fn append_safe_directories(env: &mut IndexMap<String, String>, dirs: &[String]) {
    if dirs.is_empty() {
        return;
    }
    let mut n: usize = env
        .get("GIT_CONFIG_COUNT")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    for dir in dirs {
        env.insert(format!("GIT_CONFIG_KEY_{n}"), "safe.directory".into());
        env.insert(format!("GIT_CONFIG_VALUE_{n}"), dir.clone());
        n += 1;
    }
    env.insert("GIT_CONFIG_COUNT".into(), n.to_string());
}

/// `folder` when it is a directory `user` can enter in the container, else `/` (a user
/// whose home does not exist, like busybox's `nobody` with `/nonexistent`: the hooks would
/// fail to start there).
pub(crate) async fn usable_folder(
    engine: &dyn Engine,
    id: &str,
    user: &str,
    folder: &str,
) -> String {
    let request = crate::engine::ExecRequest {
        argv: vec![
            "test".into(),
            "-d".into(),
            folder.into(),
            "-a".into(),
            "-x".into(),
            folder.into(),
        ],
        user: Some(user.to_string()),
        ..crate::engine::ExecRequest::default()
    };
    let usable = engine
        .exec(
            id,
            &request,
            crate::engine::ExecInput::None,
            crate::engine::ExecOutput::Collect,
        )
        .await
        .is_ok_and(|r| r.exit_code == 0);
    if usable {
        folder.to_string()
    } else {
        "/".to_string()
    }
}

/// The home of `user` in the running container (its `/etc/passwd`), else the container's
/// `HOME`, else `/`: where hooks run without a `workspaceFolder` (the reference's choice; see
/// [`usable_folder`]) and where a relative `--container-data-folder` is.
pub(crate) async fn home_of(engine: &dyn Engine, container: &ContainerInfo, user: &str) -> String {
    container_passwd(engine, &container.id)
        .await
        .and_then(|p| passwd_account(&p, user))
        .map(|a| a.home)
        .filter(|h| !h.is_empty())
        .or_else(|| {
            substitute::env_from_list(&container.env)
                .get("HOME")
                .cloned()
        })
        .unwrap_or_else(|| "/".to_string())
}
