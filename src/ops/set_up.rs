//! `set-up`: treat an existing, running container that devcell did not create as a dev
//! container, as `@devcontainers/cli set-up --container-id` does (refcli §1 `set-up`): read
//! its `devcontainer.metadata` label, merge it with the optional `--config` file, substitute
//! `${containerEnv:…}` against the container's environment, and run the lifecycle hooks in it
//! (once-per-container hooks guarded by the same markers as `up` and the reference CLI, in
//! the remote user's `~/.devcontainer`).
//!
//! Dotfiles (`--dotfiles-*`) are installed as by `up` (spec-note 0645); under network `none`
//! a URL is exported on the host and copied into the container (spec-note 0685). What devcell
//! does not do here (spec-note 0291): the reference's root patches of `/etc/environment` and
//! `/etc/profile` (devcell changes nothing in a container beyond what the hooks themselves do,
//! as in `up`).
//!
//! Security (spec-note 0291): `set-up` creates no container, so it cannot apply the hardened
//! profile. It compares the container with the profile ([`security::check_reuse`]) and reports
//! everything it has beyond it as warnings, with the isolation audit's score; under `hardened`
//! it refuses, before running anything, a container that can control the host (privileged
//! mode, unless granted with `--allow privileged`, or an engine socket mounted), because the
//! hooks are the repository's and the image's code.

use crate::config::{jsonc, metadata, model, substitute};
use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, Engine, EngineError};
use crate::lifecycle::{BringUpKind, LifecycleReport, PlanOptions, UserEnvProbe};
use crate::names::{LOCAL_FOLDER_LABEL, METADATA_LABEL};
use crate::ops::attach::{Attached, home_of, usable_folder};
use crate::ops::container::STATE_DIR;
use crate::ops::error::{OpsError, Result};
use crate::ops::hooks::run_hooks;
use crate::ops::options::SecurityOptions;
use crate::ops::permissions::security_choice;
use crate::ops::target::short;
use crate::progress::{Event, Reporter};
use crate::security::{
    self, BaselineGap, ExistingContainer, Permission, PermissionRequest, RequestStatus,
    SecurityError, SecurityProfile,
};
use crate::settings::Settings;
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// Inputs of [`set_up`] (the `set-up` flags).
#[derive(Debug, Clone)]
pub struct SetUpOptions {
    /// `--container-id`: the container (id or name).
    pub container_id: String,
    /// `--config`: a devcontainer.json merged with the container's metadata (none: `{}`).
    pub config: Option<PathBuf>,
    /// The host environment (`${localEnv:…}` in `--config`).
    pub env: std::collections::HashMap<String, String>,
    /// `--skip-post-create`, `--skip-non-blocking-commands`.
    pub plan: PlanOptions,
    /// `--dotfiles-*`: installed after `postCreateCommand` unless installed before.
    pub dotfiles: Option<crate::lifecycle::Dotfiles>,
    /// `--remote-env NAME=VALUE` (the merged `remoteEnv` wins).
    pub remote_env: IndexMap<String, String>,
    /// `--default-user-env-probe`.
    pub default_user_env_probe: UserEnvProbe,
    /// `--include-configuration`.
    pub include_configuration: bool,
    /// `--include-merged-configuration`.
    pub include_merged_configuration: bool,
    /// `--container-data-folder`: the run-once markers' folder (relative: to the remote
    /// user's home; `None`: `~/.devcontainer`, the reference's default).
    pub container_data_folder: Option<String>,
    /// `--security-profile`, `--allow` (limits come from the settings file).
    pub security: SecurityOptions,
    /// The user settings file.
    pub settings: Settings,
    /// The git directories of a workspace folder, for the audit score (the product's workspace
    /// inspection, `handoff::audit::workspace_git_dirs`).
    pub workspace_git_dirs: fn(&Path) -> Vec<PathBuf>,
    /// Where the hooks run when `--config` names no `workspaceFolder` (`None`: a folder the
    /// remote user can use): a handoff's workspace in a container devcell did not create.
    pub workspace_folder: Option<String>,
    /// A refusal judged on the container, its profile's name and its permission requests
    /// once they are computed, before anything runs in the container (no environment probe,
    /// no hook): a handoff refuses a root agent here (attack N6). `None`: nothing more.
    pub refuse_before_running: Option<RefuseBeforeRunning>,
}

/// See [`SetUpOptions::refuse_before_running`]: the container, the profile's name
/// (`hardened`/`reference`) and the permission requests.
pub type RefuseBeforeRunning =
    fn(&ContainerInfo, &str, &[security::PermissionRequest]) -> Result<()>;

/// The result of [`set_up`].
#[derive(Debug, Clone)]
pub struct SetUpResult {
    /// The container's full id.
    pub container_id: String,
    /// The user the hooks ran as.
    pub remote_user: String,
    /// The profile the container was judged under.
    pub profile: String,
    /// What the container has beyond the hardened baseline, with the grants' say on each.
    pub permissions: Vec<PermissionRequest>,
    /// The baseline it lacks (no grant covers these).
    pub gaps: Vec<BaselineGap>,
    /// The isolation audit's score of the container (out of `audit_max`), when it could be
    /// computed.
    pub audit_score: Option<u8>,
    /// The audit's maximum (16).
    pub audit_max: u8,
    /// The hooks that ran or were skipped.
    pub lifecycle: LifecycleReport,
    /// Git entries the hooks made in the workspace, moved aside (under `hardened`; spec-note
    /// 0466); shown as `devcell.quarantinedGit` when any.
    pub quarantined_git: Vec<crate::security::git_quarantine::Quarantined>,
    /// Non-fatal findings: the container's weaknesses, config warnings.
    pub warnings: Vec<Warning>,
    /// `--include-configuration`: the configuration read (`{}` without `--config`).
    pub configuration: Option<Value>,
    /// `--include-merged-configuration`.
    pub merged_configuration: Option<Value>,
}

impl SetUpResult {
    /// The reference CLI's result line with devcell's additions under `devcell`:
    /// `{"outcome":"success",["configuration"],["mergedConfiguration"],"devcell":{
    /// "containerId","remoteUser","profile","beyondProfile":[{"permission","value"?,
    /// "granted"}],"gaps":[{"gap","detail"}],"audit":{"score","maxScore"},"lifecycle":{…},
    /// "warnings":[…]}}`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("outcome".into(), json!("success"));
        if let Some(c) = &self.configuration {
            out.insert("configuration".into(), c.clone());
        }
        if let Some(c) = &self.merged_configuration {
            out.insert("mergedConfiguration".into(), c.clone());
        }
        let gaps: Vec<Value> = self
            .gaps
            .iter()
            .map(|g| json!({"gap": g.kind(), "detail": g.to_string()}))
            .collect();
        // What the container has beyond the profile: reported (and granted or not), never
        // removed; only host control stops `set-up` (then there is no result).
        let beyond: Vec<Value> = self
            .permissions
            .iter()
            .map(|r| {
                let mut item = Map::new();
                item.insert("permission".into(), json!(r.permission.kind()));
                if let Some(v) = r.permission.value() {
                    item.insert("value".into(), json!(v));
                }
                item.insert("granted".into(), json!(r.status == RequestStatus::Granted));
                Value::Object(item)
            })
            .collect();
        out.insert(
            "devcell".into(),
            json!({
                "containerId": self.container_id,
                "remoteUser": self.remote_user,
                "profile": self.profile,
                "beyondProfile": beyond,
                "gaps": gaps,
                "audit": {"score": self.audit_score, "maxScore": self.audit_max},
                "lifecycle": self.lifecycle,
                "warnings": self.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
        );
        if !self.quarantined_git.is_empty() {
            out["devcell"]["quarantinedGit"] = json!(self.quarantined_git);
        }
        Value::Object(out)
    }
}

/// Connects to the engine (`DOCKER_HOST`) and runs [`set_up_with`].
///
/// Errors: as [`set_up_with`]; [`OpsError::Engine`] when no engine answers.
pub async fn set_up(opts: &SetUpOptions, reporter: &dyn Reporter) -> Result<SetUpResult> {
    let engine = crate::engine::connect().await?;
    set_up_with(&*engine, opts, reporter).await
}

/// Sets up the running container `opts.container_id` through `engine` (see the module docs).
/// A bind of the engine's host socket ([`Engine::host_socket`]) is never allowed under
/// `hardened`.
///
/// Errors: [`OpsError::Engine`] (`NoSuchContainer`, engine failures),
/// [`OpsError::NotRunning`], [`OpsError::Config`] (`--config` missing or invalid),
/// [`OpsError::Security`] (`SetUpRefused`: nothing was run; an unknown profile or grant),
/// [`OpsError::InvalidLimit`], [`OpsError::Lifecycle`] (a hook failed).
pub async fn set_up_with(
    engine: &dyn Engine,
    opts: &SetUpOptions,
    reporter: &dyn Reporter,
) -> Result<SetUpResult> {
    Ok(set_up_attached(engine, opts, reporter).await?.0)
}

/// [`set_up_with`], and the container as the hooks were run in it (its user, merged
/// configuration and workspace folder): what a handoff runs its agent with.
///
/// Errors: as [`set_up_with`].
pub async fn set_up_attached(
    engine: &dyn Engine,
    opts: &SetUpOptions,
    reporter: &dyn Reporter,
) -> Result<(SetUpResult, Attached)> {
    let container = running_container(engine, &opts.container_id).await?;
    // Parallel `set-up`s of one container run its hooks once (spec-note 0422).
    let _lock =
        crate::ops::hooks::bring_up_lock(&format!("container-{}", container.id), reporter).await?;
    reporter.report(Event::Status(format!(
        "setting up container {}",
        short(&container.id)
    )));
    let judged = judge_running(engine, opts, container).await?;
    let audit_score = audit_score(engine, &judged.container.id, opts.workspace_git_dirs).await;
    let attached = attach_running(
        engine,
        opts,
        &judged.container,
        judged
            .workspace_folder
            .clone()
            .or_else(|| opts.workspace_folder.clone()),
        (judged.merged.clone(), judged.entries.clone()),
        (&judged.remote_user, judged.exec_user.clone()),
    )
    .await?;
    let watch = git_watch(&judged.profile, &attached);
    let lifecycle = run_hooks(
        engine,
        &attached,
        BringUpKind::Running,
        opts.plan,
        opts.dotfiles.as_ref(),
        &opts.remote_env,
        &IndexMap::new(),
        &[],
        reporter,
    )
    .await;
    let quarantined_git = quarantine_after_hooks(watch, &opts.security.allow, reporter);
    let lifecycle = lifecycle?;
    let result = SetUpResult {
        container_id: judged.container.id.clone(),
        remote_user: judged.remote_user,
        profile: judged.profile.name().to_string(),
        permissions: judged.permissions,
        gaps: judged.gaps,
        audit_score,
        audit_max: security::audit::MAX_SCORE,
        lifecycle,
        quarantined_git,
        warnings: judged.warnings,
        configuration: opts.include_configuration.then_some(judged.configuration),
        merged_configuration: opts.include_merged_configuration.then_some(judged.merged),
    };
    Ok((result, attached))
}

/// Under `hardened`: the host folder the container binds read-write as its workspace and the
/// git entries found there before the hooks run (spec-note 0466). `set-up` cannot cover a
/// container it did not create, so what its hooks make is moved aside after them.
fn git_watch(
    profile: &SecurityProfile,
    attached: &Attached,
) -> Option<(PathBuf, std::collections::BTreeSet<String>)> {
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return None;
    }
    let root = crate::security::planted_after::workspace_source(
        &attached.container,
        &attached.workspace_folder,
    )?;
    let root = crate::security::host_path::resolve(&root).unwrap_or(root);
    let before = crate::security::git_entries::find(&root)
        .entries
        .into_iter()
        .map(|e| e.rel)
        .collect();
    Some((root, before))
}

/// Once `set-up`'s hooks ran (or failed): each git entry they made in the workspace
/// [`git_watch`] found is moved into devcell's state (spec-note 0466), each a warning on
/// `reporter`; `allow`'s `created-git:<path>` grants keep one.
fn quarantine_after_hooks(
    watch: Option<(PathBuf, std::collections::BTreeSet<String>)>,
    allow: &[String],
    reporter: &dyn Reporter,
) -> Vec<crate::security::git_quarantine::Quarantined> {
    let Some((root, before)) = watch else {
        return Vec::new();
    };
    let keep = security::Grants::parse(allow)
        .map(|g| g.created_git)
        .unwrap_or_default();
    let into = crate::ops::state_folder::default_root()
        .map(|r| crate::security::git_quarantine::folder_in(&r));
    let outcome = crate::security::git_quarantine::quarantine_new(
        &root,
        &before,
        &|rel: &str| keep.contains(rel),
        into.as_deref(),
    );
    for m in outcome.messages() {
        reporter.report(Event::Status(format!("warning: {m}")));
    }
    outcome.moved
}

/// What `set-up` decides of a running container before anything runs in it: its users, the
/// profile and the container judged against it, and the configuration merged from its label
/// and `--config`. A handoff's plan of a container devcell did not create reads this and
/// runs nothing (spec-note 0526).
#[derive(Debug, Clone)]
pub struct SetUpJudgement {
    /// The container as the engine reported it.
    pub container: ContainerInfo,
    /// The merged `remoteUser`, else the container's user, else `root`: who the hooks and a
    /// handoff's agent run as.
    pub remote_user: String,
    /// Under `hardened`: the numeric `uid:gid` every exec runs as (`None`: the name).
    pub exec_user: Option<String>,
    /// The profile the container is judged under.
    pub profile: SecurityProfile,
    /// What the container has beyond the hardened baseline, with the grants' say on each.
    pub permissions: Vec<PermissionRequest>,
    /// The baseline it lacks.
    pub gaps: Vec<BaselineGap>,
    /// Non-fatal findings: the container's weaknesses, config warnings.
    pub warnings: Vec<Warning>,
    configuration: Value,
    merged: Value,
    entries: Vec<Value>,
    workspace_folder: Option<String>,
}

/// Judges the running `container` for `set-up` (see [`SetUpJudgement`]); runs nothing in it.
///
/// Errors: [`OpsError::Config`] (`--config`, a bad `${containerEnv}`), [`OpsError::Security`]
/// (`SetUpRefused`, a refused host variable, an unknown profile or grant),
/// [`OpsError::InvalidLimit`], the engine's.
pub async fn judge_running(
    engine: &dyn Engine,
    opts: &SetUpOptions,
    container: ContainerInfo,
) -> Result<SetUpJudgement> {
    let config = read_config(opts.config.as_deref(), &opts.env)?;
    let mut warnings = config.warnings;
    let crate::security::Choice {
        profile, grants, ..
    } = security_choice(&opts.security, &opts.settings)?;

    // The container's label entries (phase 1 for label values, as every reader does) and the
    // whole `--config` (no id labels: nothing is "updateable only"), then `${containerEnv}`.
    // The label is the image's (a repository's Dockerfile, a pulled image), not the user's:
    // under `hardened` each host variable it names is a request, refused before anything runs
    // unless granted with `--allow env:NAME`, and it sees only what was judged (spec-note 0440).
    let label_entries = judged_label_entries(
        &container,
        (&profile, &grants),
        &opts.env,
        config.workspace_folder.as_deref(),
        &mut warnings,
    )?;
    let (configuration, entries, merged) = merged_configuration(
        &container,
        config.value,
        config.file.as_deref(),
        &label_entries,
    )?;

    // As the reference: the merged `remoteUser`, else the container's user, else root.
    let remote_user = crate::config::metadata::ConfiguredUsers::of(&merged)
        .remote_user
        .or_else(|| Some(container.user.clone()).filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "root".to_string());
    let (permissions, gaps) = judge_container(
        engine,
        opts,
        &container,
        &remote_user,
        (&profile, &grants),
        &mut warnings,
    )
    .await?;
    // judged before anything runs in the container (attack N6)
    if let Some(refuse) = opts.refuse_before_running {
        refuse(&container, profile.name(), &permissions)?;
    }
    // Under `hardened` every exec runs as numeric `uid:gid`: no group of the image's
    // `/etc/group` (spec-note 0400, "the image's groups").
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    let exec_user =
        crate::ops::exec_user::resolve_running(engine, &container, &remote_user, hardened).await;
    Ok(SetUpJudgement {
        container,
        remote_user,
        exec_user,
        profile,
        permissions,
        gaps,
        warnings,
        configuration,
        merged,
        entries,
        workspace_folder: config.workspace_folder,
    })
}

/// The container `set-up` is for: it must exist and run.
///
/// Errors: [`OpsError::Engine`] (`NoSuchContainer`), [`OpsError::NotRunning`].
async fn running_container(engine: &dyn Engine, id: &str) -> Result<ContainerInfo> {
    let container = engine
        .inspect_container(id)
        .await?
        .ok_or_else(|| EngineError::NoSuchContainer { id: id.to_string() })?;
    if !container.running {
        return Err(OpsError::NotRunning { id: container.id });
    }
    Ok(container)
}

/// The container judged against the hardened baseline, whatever the profile (the report is
/// the same; only `hardened` refuses what would let it control the host, before anything
/// runs), its users by the uid the container's passwd gives them (spec-note 0420); a weak
/// container is a warning.
///
/// Errors: [`OpsError::Security`] (`SetUpRefused`), [`OpsError::InvalidLimit`], the
/// engine's.
async fn judge_container(
    engine: &dyn Engine,
    opts: &SetUpOptions,
    container: &ContainerInfo,
    remote_user: &str,
    (profile, grants): (&SecurityProfile, &security::Grants),
    warnings: &mut Vec<Warning>,
) -> Result<(Vec<PermissionRequest>, Vec<security::BaselineGap>)> {
    let image_user = if container.user.is_empty() {
        engine
            .inspect_image(&container.image_id)
            .await?
            .and_then(|i| i.user)
    } else {
        None
    };
    let baseline = SecurityProfile::Hardened(crate::security::choice::limits(
        &opts.security,
        &opts.settings,
    )?);
    let workspace = container
        .labels
        .get(LOCAL_FOLDER_LABEL)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(NO_WORKSPACE));
    let passwd = crate::ops::image_files::engine_passwd(engine, container).await;
    let existing = ExistingContainer {
        info: container,
        image_user: image_user.as_deref(),
        remote_user: Some(remote_user),
        workspace: &workspace,
        command_line_binds: &[],
        engine_socket: engine.host_socket(),
        network: None,
        required_mounts: &[],
        passwd: passwd.as_deref(),
        passwd_unreadable: passwd.is_none(),
    };
    let (permissions, gaps) = match security::check_reuse(&baseline, &existing, grants) {
        Ok(granted) => (granted, Vec::new()),
        Err(SecurityError::ReuseRefused { requests, gaps, .. }) => (requests, gaps),
        Err(other) => return Err(other.into()),
    };
    let stopping = host_control(&permissions);
    if matches!(profile, SecurityProfile::Hardened(_)) && !stopping.is_empty() {
        return Err(SecurityError::SetUpRefused {
            container: short(&container.id).to_string(),
            profile: profile.name().to_string(),
            requests: stopping,
        }
        .into());
    }
    if let Some(message) = weakness_warning(&container.id, &permissions, &gaps) {
        warnings.push(Warning {
            location: None,
            message,
        });
    }
    Ok((permissions, gaps))
}

/// What the hooks run in: the workspace folder (`--config`'s, else one the remote user can
/// use), the remote user's home when a folder is relative to it, the user environment probe
/// and the marker folder; every exec as `exec_user` (numeric under `hardened`), else the
/// remote user's name.
///
/// Errors: [`OpsError::Lifecycle`] (an invalid `userEnvProbe`).
async fn attach_running(
    engine: &dyn Engine,
    opts: &SetUpOptions,
    container: &ContainerInfo,
    workspace_folder: Option<String>,
    (merged, entries): (Value, Vec<Value>),
    (remote_user, exec_user): (&str, Option<String>),
) -> Result<Attached> {
    let needs_home = workspace_folder.is_none()
        || opts
            .container_data_folder
            .as_deref()
            .is_some_and(|f| !f.starts_with('/'));
    let home = if needs_home {
        home_of(engine, container, remote_user).await
    } else {
        String::new()
    };
    let workspace_folder = match workspace_folder {
        Some(folder) => folder,
        None => {
            let user = exec_user.as_deref().unwrap_or(remote_user);
            usable_folder(engine, &container.id, user, &home).await
        }
    };
    let probe = UserEnvProbe::from_merged_configuration(&merged, opts.default_user_env_probe)
        .map_err(|source| OpsError::Lifecycle {
            container_id: container.id.clone(),
            source,
        })?;
    let marker_folder = marker_folder(container, opts.container_data_folder.as_deref(), &home);
    Ok(Attached {
        container: container.clone(),
        merged,
        entries,
        remote_user: remote_user.to_string(),
        exec_user,
        workspace_folder,
        probe,
        marker_folder,
    })
}

/// A host path no bind can be inside (nothing lives under the file `/dev/null`): the
/// "workspace" of a container without a `devcontainer.local_folder` label, so every bind of
/// it counts as a host path outside the workspace.
const NO_WORKSPACE: &str = "/dev/null/no-workspace";

/// The container's label entries, phase 1 substituted with only the host variables judged
/// (each one a request under `hardened`, refused before anything runs unless granted).
///
/// Errors: [`OpsError::Security`] for a refused host variable.
fn judged_label_entries(
    container: &ContainerInfo,
    (profile, grants): (&SecurityProfile, &security::Grants),
    env: &std::collections::HashMap<String, String>,
    workspace_folder: Option<&str>,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Value>> {
    Ok(match container.labels.get(METADATA_LABEL) {
        Some(label) => {
            let (mut entries, warning) = metadata::parse_label(label);
            warnings.extend(warning);
            let reads = substitute::local_env_reads(&Value::Array(entries.clone()));
            let (_, requests) = security::host_env::image_label(profile, grants, &reads);
            security::host_env::check(profile, &requests)?;
            let visible = security::host_env::visible_env(profile, grants, env);
            let ctx = substitute::LocalContext {
                local_workspace_folder: None,
                container_workspace_folder: workspace_folder,
                env: &visible,
                config_file: None,
            };
            for entry in &mut entries {
                let mut copy = entry.clone();
                if substitute::substitute_local(&mut copy, &ctx).is_ok() {
                    *entry = copy;
                }
            }
            entries
        }
        None => Vec::new(),
    })
}

/// The label entries and the whole `--config` (no id labels: nothing is "updateable only"),
/// `${containerEnv}` substituted, and the configuration merged from them: (configuration,
/// entries, merged).
///
/// Errors: [`OpsError::Config`] for a bad `${containerEnv}` reference.
fn merged_configuration(
    container: &ContainerInfo,
    configuration: Value,
    file: Option<&Path>,
    label_entries: &[Value],
) -> Result<(Value, Vec<Value>, Value)> {
    let container_env = substitute::env_from_list(&container.env);
    let mut configuration = configuration;
    substitute::substitute_container_env(&mut configuration, &container_env)?;
    let mut entries = Value::Array(metadata::collect_entries(
        label_entries,
        &[],
        &metadata::config_entry(&configuration),
    ));
    substitute::substitute_container_env(&mut entries, &container_env)?;
    let entries = match entries {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    if let (Some(file), Value::Object(map)) = (file, &mut configuration) {
        map.insert("configFilePath".into(), file_uri(file));
    }
    let merged = metadata::merge_configuration(&configuration, &entries);
    Ok((configuration, entries, merged))
}

/// The `--config` of `set-up`, read and substituted (phase 1; no workspace, so
/// `${localWorkspaceFolder}` stays as written, as in the reference).
struct SetUpConfig {
    /// The config file (`None` without `--config`).
    file: Option<PathBuf>,
    /// The configuration (`{}` without `--config`).
    value: Value,
    /// Its `workspaceFolder`, substituted: where hooks run (else the remote user's home).
    workspace_folder: Option<String>,
    /// Parser and validation warnings.
    warnings: Vec<Warning>,
}

fn read_config(
    config: Option<&Path>,
    env: &std::collections::HashMap<String, String>,
) -> Result<SetUpConfig> {
    let Some(config) = config else {
        return Ok(SetUpConfig {
            file: None,
            value: Value::Object(Map::new()),
            workspace_folder: None,
            warnings: Vec::new(),
        });
    };
    let file = std::path::absolute(config).unwrap_or_else(|_| config.to_path_buf());
    if !file.is_file() {
        return Err(crate::config::ConfigError::ConfigMissing {
            path: file,
            relative: config.is_relative(),
        }
        .into());
    }
    let doc = jsonc::read(&file)?;
    let mut warnings = doc.warnings.clone();
    let (_, model_warnings) = model::validate(&doc)?;
    warnings.extend(model_warnings);
    let base = substitute::LocalContext {
        local_workspace_folder: None,
        container_workspace_folder: None,
        env,
        config_file: Some(&file),
    };
    let workspace_folder = match doc.value.get("workspaceFolder").and_then(Value::as_str) {
        Some(raw) if !raw.is_empty() => {
            Some(substitute::substitute_local_str(raw, &base)?).filter(|s| !s.is_empty())
        }
        _ => None,
    };
    let ctx = substitute::LocalContext {
        container_workspace_folder: workspace_folder.as_deref(),
        ..base
    };
    let mut value = doc.value.clone();
    substitute::substitute_local(&mut value, &ctx)?;
    if let Value::Object(map) = &mut value {
        model::migrate_legacy(map);
    }
    Ok(SetUpConfig {
        file: Some(file),
        value,
        workspace_folder,
        warnings,
    })
}

/// `configFilePath` as `set-up` prints it (the reference's `URI.file`, scheme `file`).
fn file_uri(path: &Path) -> Value {
    let p = path.to_string_lossy();
    json!({"$mid": 1, "fsPath": p, "path": p, "scheme": "file"})
}

/// The requests that stop `set-up` under `hardened`: privileged mode not granted, and any
/// engine socket (never allowed). Everything else is reported, not refused.
fn host_control(requests: &[PermissionRequest]) -> Vec<PermissionRequest> {
    requests
        .iter()
        .filter(|r| match r.permission {
            Permission::EngineSocket(_) => true,
            Permission::Privileged => r.status != RequestStatus::Granted,
            _ => false,
        })
        .cloned()
        .collect()
}

/// One warning naming what the container has beyond the hardened profile (not granted) and
/// the baseline it lacks; `None` when it has nothing.
fn weakness_warning(
    id: &str,
    requests: &[PermissionRequest],
    gaps: &[BaselineGap],
) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut caps: Vec<String> = Vec::new();
    for r in requests
        .iter()
        .filter(|r| r.status != RequestStatus::Granted)
    {
        match &r.permission {
            Permission::Capability(c) => caps.push(format!("`{c}`")),
            p => parts.push(p.to_string()),
        }
    }
    if !caps.is_empty() {
        parts.push(format!("capabilities {}", caps.join(", ")));
    }
    parts.extend(gaps.iter().map(ToString::to_string));
    (!parts.is_empty()).then(|| {
        format!(
            "container {} has more than the `hardened` profile allows, and `set-up` cannot change a container it did not create: {}; `devcell audit {}` shows the evidence, `devcell up` makes a hardened one",
            short(id),
            parts.join("; "),
            short(id)
        )
    })
}

/// The isolation audit's score of the container from the engine's description of it (`None`
/// when it could not be read).
async fn audit_score(
    engine: &dyn Engine,
    id: &str,
    git_dirs: fn(&Path) -> Vec<PathBuf>,
) -> Option<u8> {
    let container = engine.inspect_container(id).await.ok()??;
    let mut facts = crate::ops::audit_context::resolved_binds(
        security::audit::ContainerFacts::from_container(&container),
    );
    if !container.image.is_empty()
        && let Ok(Some(image)) = engine.inspect_image(&container.image).await
    {
        facts = facts.with_image(&image);
    }
    let ctx = crate::ops::audit_context::context_for(&container, None, &git_dirs);
    Some(security::audit::audit(&facts, &ctx).score)
}

/// Where the run-once markers are: devcell's state volume in a container `up` made under
/// `hardened` (as `up` and `run-user-commands` look for them), else `--container-data-folder`
/// (relative to `home`), else `None` (`~/.devcontainer`, the reference CLI's place).
fn marker_folder(
    container: &ContainerInfo,
    data_folder: Option<&str>,
    home: &str,
) -> Option<String> {
    if container.mounts.iter().any(|m| m.destination == STATE_DIR) {
        return Some(format!("{STATE_DIR}/markers"));
    }
    let folder = data_folder.filter(|f| !f.is_empty())?;
    Some(if folder.starts_with('/') {
        folder.to_string()
    } else {
        format!("{}/{folder}", home.trim_end_matches('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::{Grants, Source};

    fn request(permission: Permission, status: RequestStatus) -> PermissionRequest {
        PermissionRequest {
            permission,
            source: Source::ExistingContainer("abc".into()),
            status,
        }
    }

    /// `permission`, refused.
    fn refused(permission: Permission) -> PermissionRequest {
        request(permission, RequestStatus::Refused)
    }

    /// Capability `name`.
    fn cap(name: &str) -> Permission {
        Permission::Capability(name.into())
    }

    #[test]
    fn only_host_control_stops_set_up() {
        let requests = vec![
            refused(Permission::Root),
            refused(cap("CHOWN")),
            refused(Permission::Mount("/etc".into())),
            refused(Permission::HostNetwork),
        ];
        assert!(host_control(&requests).is_empty());

        let privileged = vec![refused(Permission::Privileged)];
        assert_eq!(host_control(&privileged).len(), 1);
        let granted = vec![request(Permission::Privileged, RequestStatus::Granted)];
        assert!(host_control(&granted).is_empty());
        let socket = vec![request(
            Permission::EngineSocket("/var/run/docker.sock".into()),
            RequestStatus::Forbidden,
        )];
        assert_eq!(host_control(&socket).len(), 1);
    }

    #[test]
    fn weaknesses_are_one_warning() {
        let requests = vec![
            refused(Permission::Root),
            refused(cap("CHOWN")),
            refused(cap("KILL")),
            request(Permission::HostNetwork, RequestStatus::Granted),
        ];
        let text =
            weakness_warning("0123456789abcdef", &requests, &[BaselineGap::WritableRoot]).unwrap();
        assert!(text.contains("container 0123456789ab "), "{text}");
        assert!(text.contains("running as root"), "{text}");
        assert!(text.contains("capabilities `CHOWN`, `KILL`"), "{text}");
        assert!(text.contains("a writable root filesystem"), "{text}");
        assert!(!text.contains("host network"), "granted: {text}");
        assert_eq!(weakness_warning("x", &[], &[]), None);
    }

    #[test]
    fn a_privileged_container_is_refused_before_anything_runs() {
        let info = ContainerInfo {
            id: "0123456789abcdef".into(),
            running: true,
            user: "root".into(),
            host: crate::engine::HostSecurity {
                privileged: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let workspace = PathBuf::from(NO_WORKSPACE);
        let existing = ExistingContainer {
            remote_user: Some("root"),
            workspace: &workspace,
            ..crate::security::reuse::tests::existing(&info)
        };
        let profile = SecurityProfile::Hardened(Default::default());
        let Err(SecurityError::ReuseRefused { requests, .. }) =
            security::check_reuse(&profile, &existing, &Grants::default())
        else {
            panic!("a privileged container is beyond the baseline")
        };
        let stopping = host_control(&requests);
        assert_eq!(stopping.len(), 1);
        assert_eq!(stopping[0].permission, Permission::Privileged);
        let grants = Grants::parse(&["privileged"]).unwrap();
        let (requests, _) = match security::check_reuse(&profile, &existing, &grants) {
            Err(SecurityError::ReuseRefused { requests, gaps, .. }) => (requests, gaps),
            other => panic!("{other:?}"),
        };
        assert!(host_control(&requests).is_empty());
    }

    #[test]
    fn marker_folder_follows_the_data_folder_flag() {
        let plain = ContainerInfo::default();
        assert_eq!(marker_folder(&plain, None, "/root"), None);
        assert_eq!(
            marker_folder(&plain, Some(".data"), "/home/me/"),
            Some("/home/me/.data".into())
        );
        assert_eq!(
            marker_folder(&plain, Some("/var/m"), "/root"),
            Some("/var/m".into())
        );
        let ours = ContainerInfo {
            mounts: vec![crate::engine::MountInfo {
                kind: "volume".into(),
                source: String::new(),
                name: None,
                destination: STATE_DIR.into(),
                rw: true,
            }],
            ..ContainerInfo::default()
        };
        assert_eq!(
            marker_folder(&ours, Some("/var/m"), "/root"),
            Some(format!("{STATE_DIR}/markers"))
        );
    }

    #[test]
    fn config_without_workspace_keeps_local_workspace_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("devcontainer.json");
        std::fs::write(
            &file,
            r#"{"workspaceFolder": "/w/${localEnv:SUB}", "postCreateCommand": "cd ${containerWorkspaceFolder} && echo ${localWorkspaceFolder}"}"#,
        )
        .unwrap();
        let env = std::collections::HashMap::from([("SUB".to_string(), "x".to_string())]);
        let config = read_config(Some(&file), &env).unwrap();
        assert_eq!(config.workspace_folder.as_deref(), Some("/w/x"));
        assert_eq!(
            config.value["postCreateCommand"],
            "cd /w/x && echo ${localWorkspaceFolder}"
        );
        let none = read_config(None, &env).unwrap();
        assert_eq!(none.value, json!({}));
        assert!(read_config(Some(&dir.path().join("missing.json")), &env).is_err());
    }
}
