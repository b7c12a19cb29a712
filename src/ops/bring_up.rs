//! What every bring-up shares, `up` of a single container ([`crate::ops::up`]) and of a Compose
//! project ([`crate::ops::compose_up`]): what happened to the container, the result, and the
//! lifecycle hooks run after it.

use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, Engine};
use crate::lifecycle::{BringUpKind, LifecycleReport};
use crate::ops::attach::{Attached, attach};
use crate::ops::error::Result;
use crate::ops::hooks::run_hooks;
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::ops::users::workspace_ownership_warning;
use crate::progress::{Event, Reporter};
use crate::security::{self, PermissionRequest};
use serde_json::{Map, Value, json};

/// What happened to the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ContainerAction {
    /// Created and started.
    Created,
    /// Found stopped and started again.
    Started,
    /// Found running; reused as it is.
    Running,
}

/// The result of [`up`].
#[derive(Debug, Clone)]
pub struct UpResult {
    /// The container id.
    pub container_id: String,
    /// The user hooks and `exec` run as.
    pub remote_user: String,
    /// The non-root user devcell provided for a root image with no user named (spec-note
    /// 0188), from the container's [`crate::names::PROVIDED_USER_LABEL`].
    pub provided_user: Option<String>,
    /// The workspace folder in the container.
    pub remote_workspace_folder: String,
    /// Created, started or reused.
    pub action: ContainerAction,
    /// The security profile in effect (`hardened`/`reference`).
    pub profile: String,
    /// Every permission request (for a new container) and what was done with it.
    pub permissions: Vec<PermissionRequest>,
    /// The host variables the configuration sent into the container, by name, with the
    /// properties they went into (spec-note 0440).
    pub host_env: Vec<security::host_env::HostEnvUse>,
    /// The hooks that ran or were skipped.
    pub lifecycle: LifecycleReport,
    /// Non-fatal findings (unmet `hostRequirements`, config warnings).
    pub warnings: Vec<Warning>,
    /// How many of the first `warnings` were shown on stderr as they were found (the
    /// configuration's own, [`crate::ops::load::report_warnings`]): the CLI prints the rest.
    pub shown_warnings: usize,
    /// The configuration read (`--include-configuration`).
    pub configuration: Option<Value>,
    /// The merged configuration (`--include-merged-configuration`).
    pub merged_configuration: Option<Value>,
    /// The egress channel (`--network allowlist`): the proxy and what it serves.
    pub egress: Option<crate::ops::egress::EgressStatus>,
    /// The Compose project name of a Compose configuration (`composeProjectName`).
    pub compose_project_name: Option<String>,
    /// The git entries the container created in the workspace that `up` moved aside once the
    /// hooks ran (spec-note 0448); shown as `devcell.quarantinedGit` when any.
    pub quarantined_git: Vec<crate::security::git_quarantine::Quarantined>,
    /// The configuration as loaded and judged at the start of `up`: what a handoff attaches
    /// its agent with, never loaded a second time (spec-note 0400).
    pub(crate) loaded: LoadedConfiguration,
    /// The merged configuration the hooks ran with, for the environment record (spec-note
    /// 0520), whether or not `--include-merged-configuration` shows it.
    pub(crate) merged: Value,
}

/// `up --include-configuration`'s `configuration`: the configuration as loaded, substituted
/// like `mergedConfiguration` (`${devcontainerId}`, then `${containerEnv:…}` from `container`;
/// a value that cannot be substituted keeps the whole as it was), with `configFilePath`, as the
/// reference CLI prints it (spec-note 0475). For image, Dockerfile and Compose configurations
/// alike.
pub(crate) fn shown_configuration(
    loaded: &LoadedConfiguration,
    devcontainer_id: &str,
    container: &ContainerInfo,
) -> Value {
    use crate::config::substitute;
    let mut shown = loaded.value.clone();
    substitute::substitute_devcontainer_id(&mut shown, devcontainer_id);
    let container_env = substitute::env_from_list(&container.env);
    let mut substituted = shown.clone();
    if substitute::substitute_container_env(&mut substituted, &container_env).is_ok() {
        shown = substituted;
    }
    if let Value::Object(c) = &mut shown {
        c.insert(
            "configFilePath".into(),
            crate::ops::read_configuration::file_uri(&loaded.config_file),
        );
    }
    shown
}

/// The user devcell provided for `container` (spec-note 0188): its
/// [`crate::names::PROVIDED_USER_LABEL`], which only devcell sets (an image's labels in its
/// namespace are emptied on the container, spec-note 0421).
pub(crate) fn provided_user(container: &ContainerInfo) -> Option<String> {
    container
        .labels
        .get(crate::names::PROVIDED_USER_LABEL)
        .filter(|u| !u.is_empty())
        .cloned()
}

impl UpResult {
    /// The reference CLI's result line, with devcell's additions under `devcell`:
    /// `{"outcome":"success","containerId","remoteUser","remoteWorkspaceFolder",
    /// ["configuration"], ["mergedConfiguration"], "devcell":{"profile","container",
    /// "permissions":[…],"lifecycle":{…},"warnings":[…],["providedUser"],["egress"]}}`
    /// (`providedUser` only when devcell provided the user, spec-note 0188; `egress` only with
    /// `--network allowlist`; `composeProjectName` only for a Compose configuration).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("outcome".into(), json!("success"));
        out.insert("containerId".into(), json!(self.container_id));
        out.insert("remoteUser".into(), json!(self.remote_user));
        out.insert(
            "remoteWorkspaceFolder".into(),
            json!(self.remote_workspace_folder),
        );
        if let Some(name) = &self.compose_project_name {
            out.insert("composeProjectName".into(), json!(name));
        }
        if let Some(c) = &self.configuration {
            out.insert("configuration".into(), c.clone());
        }
        if let Some(c) = &self.merged_configuration {
            out.insert("mergedConfiguration".into(), c.clone());
        }
        let mut devcell = json!({
            "profile": self.profile,
            "container": self.action,
            "permissions": self.permissions,
            "hostEnv": self.host_env,
            "lifecycle": self.lifecycle,
            "warnings": self.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        if let Some(user) = &self.provided_user {
            devcell["providedUser"] = json!(user);
        }
        // Only an allowlist container has an egress channel; other results keep their shape.
        if let Some(egress) = &self.egress {
            devcell["egress"] = json!(egress);
        }
        if !self.quarantined_git.is_empty() {
            devcell["quarantinedGit"] = json!(self.quarantined_git);
        }
        out.insert("devcell".into(), devcell);
        Value::Object(out)
    }
}
/// Once the container runs, alike for a single container and a Compose service: its egress
/// allowlist wired for `network` ([`crate::ops::egress::after_start`]; an error names the
/// container), then [`attach_and_run_hooks`].
///
/// Errors: as those.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn after_start(
    engine: &dyn Engine,
    container: &ContainerInfo,
    (loaded, entries): (&LoadedConfiguration, Vec<Value>),
    (devcontainer_id, action): (&str, ContainerAction),
    opts: &UpOptions,
    (network, early_requests): (crate::settings::NetworkMode, &[PermissionRequest]),
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<(
    Option<crate::ops::egress::EgressStatus>,
    Attached,
    LifecycleReport,
)> {
    // before anything of the repository's runs in it (attack P9); a running container `up`
    // reuses keeps its record until its hooks ran
    if action != ContainerAction::Running {
        record_git_baseline(&container.id, opts);
    }
    let egress = crate::ops::egress::after_start(
        engine,
        opts,
        network,
        devcontainer_id,
        container,
        early_requests,
    )
    .await
    .map_err(|e| e.in_container(&container.id))?;
    let (attached, lifecycle) = attach_and_run_hooks(
        engine,
        container,
        loaded,
        entries,
        devcontainer_id,
        action,
        opts,
        warnings,
        reporter,
    )
    .await?;
    Ok((egress, attached, lifecycle))
}

/// Records `opts`' git entries ([`UpOptions::git_baseline`], the walk made before the
/// container existed) for the container `container_id`, so that `exec`, `run-user-commands`,
/// `down` and the next `up` walk it even when `up` then fails or is interrupted (attack 25,
/// P9; spec-note 0466). Called as soon as the container (and, for Compose, its project) runs,
/// before anything else of the bring-up can fail; a record that cannot be written is said by
/// `workspace_git::after_hooks` when `up` succeeds.
pub(crate) fn record_git_baseline(container_id: &str, opts: &UpOptions) {
    if let (Some(baseline), Some(state)) = (
        opts.git_baseline.as_ref(),
        crate::ops::state_folder::default_root(),
    ) {
        let _ = crate::security::git_baseline::record(&state, container_id, baseline);
    }
}

/// The steps of a bring-up once its container runs, alike for a single container and a
/// Compose service: phases 2 and 3 and who/where/how commands run ([`attach`]); whether the
/// remote user can write the workspace, for a new or a reused container alike, as one warning
/// in `warnings` only (the caller shows it once; spec-note 0324); then the hooks
/// ([`bring_up_hooks`]).
///
/// Errors: as [`attach`] and [`bring_up_hooks`].
#[allow(clippy::too_many_arguments)]
pub(crate) async fn attach_and_run_hooks(
    engine: &dyn Engine,
    container: &ContainerInfo,
    loaded: &LoadedConfiguration,
    entries: Vec<Value>,
    devcontainer_id: &str,
    action: ContainerAction,
    opts: &UpOptions,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<(Attached, LifecycleReport)> {
    let mut attached = attach(
        container,
        loaded,
        entries,
        devcontainer_id,
        opts.default_user_env_probe,
    )?;
    attached.exec_user =
        crate::ops::exec_user::resolve(engine, &attached.container, &attached.remote_user, loaded)
            .await;
    if let Some(message) = workspace_ownership_warning(
        engine,
        container,
        &attached.merged,
        loaded,
        &attached.remote_user,
        opts.update_remote_user_uid_default,
    )
    .await
    {
        warnings.push(Warning {
            location: None,
            message,
        });
    }
    let lifecycle = bring_up_hooks(engine, &attached, action, opts, warnings, reporter).await?;
    planted_warnings(container, loaded, warnings, reporter);
    Ok((attached, lifecycle))
}

/// Under `hardened`, after the lifecycle: set-uid/set-gid files (bits cleared) and device nodes
/// a hook left in the workspace, each a warning ([`crate::security::planted`], spec-note 0400).
fn planted_warnings(
    container: &ContainerInfo,
    loaded: &LoadedConfiguration,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) {
    if !crate::ops::exec_user::is_hardened(container) {
        return;
    }
    let root = &loaded.workspace.host_mount_root;
    for found in crate::security::planted::scan_and_clear(root) {
        let message = found.message(root);
        reporter.report(crate::progress::Event::Status(format!(
            "warning: {message}"
        )));
        warnings.push(Warning {
            location: None,
            message,
        });
    }
}

/// Runs the lifecycle hooks of a bring-up (`up` of a single container or of a Compose
/// project) after `action` was done to its container. A failed hook ends `up` before its
/// warnings are shown with the result: they are shown first, as one of them (the remote user
/// cannot write the workspace) is often the cause.
///
/// Errors: as [`run_hooks`].
async fn bring_up_hooks(
    engine: &dyn Engine,
    attached: &Attached,
    action: ContainerAction,
    opts: &UpOptions,
    warnings: &[Warning],
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    let kind = match action {
        ContainerAction::Created => BringUpKind::Created,
        ContainerAction::Started => BringUpKind::Restarted,
        ContainerAction::Running => BringUpKind::Running,
    };
    run_hooks(
        engine,
        attached,
        kind,
        opts.plan,
        opts.dotfiles.as_ref(),
        &opts.remote_env,
        &opts.secrets,
        &opts.safe_directories,
        reporter,
    )
    .await
    .inspect_err(|_| {
        for w in warnings {
            reporter.report(Event::Status(format!("warning: {}", w.message)));
        }
    })
}

/// `initializeCommand` (`stage`, judged and granted with everything else: `host_requests`)
/// run on the host, at every `up` before any image work; then the early judgement's warning (a
/// granted build argument persists in the image history) added to `warnings`. The workspace
/// files the grant pins run from copies of the judged bytes in a private folder of devcell's
/// ([`crate::ops::host_copies`], attack O5): a container still running can no longer swap a
/// pinned script between the judgement and the shell's reading it.
///
/// Errors: the command's failure, or a pinned file that changed since it was judged
/// ([`crate::ops::error::lifecycle_error`]).
pub(crate) async fn initialize_on_host(
    (stage, host_requests): (Option<&crate::lifecycle::Stage>, &[PermissionRequest]),
    loaded: &LoadedConfiguration,
    early_warning: Option<&String>,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<()> {
    if let Some(stage) = stage {
        let on_host = crate::ops::error::lifecycle_error("");
        let failed = |message: String| {
            on_host(crate::lifecycle::LifecycleError::Executor {
                what: "`initializeCommand`".into(),
                source: message.into(),
            })
        };
        let pinned = crate::ops::host_copies::pinned_files(host_requests).map_err(failed)?;
        // Held until the command ended: dropping it removes the copies.
        let mut copies = None;
        let rewritten;
        let stage = if pinned.is_empty() {
            stage
        } else {
            let root = crate::ops::state_folder::default_root()
                .unwrap_or_else(|| std::env::temp_dir().join("devcell"));
            let folder = crate::ops::host_copies::JudgedCopies::new(&root).map_err(|e| {
                failed(format!(
                    "cannot make devcell's folder for the judged copies under `{}`: {e}",
                    root.display()
                ))
            })?;
            rewritten = crate::ops::host_copies::rewrite_stage(
                stage,
                &pinned,
                &loaded.workspace_folder,
                copies.insert(folder).path(),
            )
            .map_err(&on_host)?;
            &rewritten
        };
        crate::lifecycle::run_initialize_command(
            stage,
            &loaded.workspace_folder,
            crate::lifecycle::HookEnv::default(),
            reporter,
        )
        .await
        .map_err(&on_host)?;
        drop(copies);
    }
    warnings.extend(early_warning.map(|message| Warning {
        location: None,
        message: message.clone(),
    }));
    Ok(())
}

/// The [`UpResult`] of a bring-up (`up` of a single container, or of a Compose project named
/// `compose_project_name`): `permissions` and `host_env` as they go out, the early ones first.
#[allow(clippy::too_many_arguments)]
pub(crate) fn up_result(
    opts: &UpOptions,
    (loaded, profile): (LoadedConfiguration, &crate::security::SecurityProfile),
    devcontainer_id: &str,
    (container, action): (&ContainerInfo, ContainerAction),
    (attached, lifecycle): (Attached, LifecycleReport),
    (permissions, host_env): (Vec<PermissionRequest>, Vec<security::host_env::HostEnvUse>),
    warnings: Vec<Warning>,
    (egress, compose_project_name): (Option<crate::ops::egress::EgressStatus>, Option<String>),
) -> UpResult {
    let configuration = opts
        .include_configuration
        .then(|| shown_configuration(&loaded, devcontainer_id, container));
    UpResult {
        container_id: container.id.clone(),
        remote_user: attached.remote_user.clone(),
        provided_user: provided_user(container),
        shown_warnings: loaded.warnings.len(),
        remote_workspace_folder: attached.workspace_folder.clone(),
        action,
        profile: profile.name().to_string(),
        permissions,
        host_env,
        lifecycle,
        warnings,
        configuration,
        merged_configuration: opts
            .include_merged_configuration
            .then(|| attached.merged.clone()),
        egress,
        compose_project_name,
        quarantined_git: Vec::new(),
        loaded,
        merged: attached.merged.clone(),
    }
}
