//! `down`: stop the dev container of a workspace; with `remove`, remove it and its
//! devcell-owned (anonymous) volumes. The workspace is never touched.

use std::time::Duration;

use crate::engine::Engine;
use crate::ops::error::Result;
use crate::ops::options::TargetOptions;
use crate::ops::target::{expected_workspace, id_labels, load, short};
use crate::progress::{Event, Reporter};

/// Inputs of [`down`].
#[derive(Debug, Clone, Default)]
pub struct DownOptions {
    /// Workspace, config and container identity.
    pub target: TargetOptions,
    /// `--remove`: remove the container and its anonymous volumes after stopping it.
    pub remove: bool,
    /// How long to wait for each container to stop before it is killed (`None`:
    /// [`stop_timeout`]'s default; never the container's own, which a repository sets).
    pub timeout: Option<Duration>,
}

/// The variable that sets `down`'s stop timeout, in whole seconds.
pub const STOP_TIMEOUT_VAR: &str = "DEVCELL_STOP_TIMEOUT";

/// `down`'s stop timeout unless [`STOP_TIMEOUT_VAR`] says otherwise: the engine's own default
/// for a container that names none, which `delete` uses too. Left to the engine, a Compose
/// service's `stop_grace_period` (the repository's: `1000h`) decides how long `down` waits
/// (attacks K14, spec-note 0425).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long `down` waits for each container to stop: `opts.timeout`, else
/// [`STOP_TIMEOUT_VAR`], else [`STOP_TIMEOUT`].
pub fn stop_timeout(opts: &DownOptions) -> Duration {
    opts.timeout
        .unwrap_or_else(|| crate::process::deadline_from_env(STOP_TIMEOUT_VAR, STOP_TIMEOUT))
}

/// What [`down`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownResult {
    /// The containers stopped (and removed, with `remove`).
    pub container_ids: Vec<String>,
    /// Whether they were removed.
    pub removed: bool,
    /// What the scan of the workspace found once they stopped (set-id bits cleared, devices
    /// named; under `hardened`, attack K11).
    pub set_id_files_and_devices: Vec<crate::security::planted::Planted>,
    /// Git entries the containers made in the workspace since `up`, moved aside once they
    /// stopped (spec-note 0466).
    pub quarantined_git: Vec<crate::security::git_quarantine::Quarantined>,
}

impl DownResult {
    /// `{"outcome":"success","containerIds":[…],"removed":bool}`, with
    /// `setIdFilesAndDevices` and `quarantinedGit` when the scan found any.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({
            "outcome": "success",
            "containerIds": self.container_ids,
            "removed": self.removed,
        });
        if !self.set_id_files_and_devices.is_empty() {
            json["setIdFilesAndDevices"] = serde_json::json!(self.set_id_files_and_devices);
        }
        if !self.quarantined_git.is_empty() {
            json["quarantinedGit"] = serde_json::json!(self.quarantined_git);
        }
        json
    }
}

/// Stops (and with `remove`, removes) every container carrying the workspace's id labels.
/// No container is not an error.
///
/// Errors: `Config` for the configuration, `Engine` when the engine fails.
pub async fn down(opts: &DownOptions, reporter: &dyn Reporter) -> Result<DownResult> {
    let engine = crate::engine::connect().await?;
    let result = down_with(&*engine, opts, reporter).await?;
    // `ports --detach` forwarders into them end with them (spec-note 0652)
    if let Some(state) = crate::ops::state_folder::default_root() {
        crate::ops::ports_detached::stop_for_containers(&state, &result.container_ids).await;
    }
    Ok(result)
}

/// [`down`] through `engine`.
///
/// Errors: as [`down`].
pub async fn down_with(
    engine: &dyn Engine,
    opts: &DownOptions,
    reporter: &dyn Reporter,
) -> Result<DownResult> {
    let loaded = load(&opts.target)?;
    let labels = id_labels(&opts.target, &loaded);
    let mut result = DownResult {
        container_ids: Vec::new(),
        removed: opts.remove,
        set_id_files_and_devices: Vec::new(),
        quarantined_git: Vec::new(),
    };
    if opts.target.id_labels.is_empty()
        && loaded.typed.kind() == crate::config::model::ConfigKind::Compose
    {
        let (mut result, hardened) =
            down_compose(engine, opts, &loaded, &labels, result, reporter).await?;
        scan_once_stopped(hardened, &loaded, &mut result, reporter);
        return Ok(result);
    }
    let mut found = engine.find_containers(&labels).await?;
    // a container claiming this workspace's labels without binding it is not stopped or
    // removed (spec-note 0421)
    if let Some(folders) = expected_workspace(&opts.target, &loaded) {
        let (bound, claims) =
            crate::security::identity::bound_to_workspace(engine, found, &folders).await?;
        for id in claims {
            reporter.report(Event::Status(format!(
                "warning: container {} carries this workspace's labels but does not bind it: left alone",
                short(&id)
            )));
        }
        found = bound;
    }
    let hardened = found
        .iter()
        .any(|c| crate::security::planted_after::created_hardened(&c.labels));
    for container in found {
        if opts.remove {
            reporter.report(Event::Status(format!(
                "removing container {}",
                short(&container.id)
            )));
            engine.remove_container(&container.id, true).await?;
        } else {
            reporter.report(Event::Status(format!(
                "stopping container {}",
                short(&container.id)
            )));
            engine
                .stop_container(&container.id, Some(stop_timeout(opts)))
                .await?;
        }
        result.container_ids.push(container.id);
    }
    // their egress proxies stop with them; a later `up` starts them again (spec-note 0502)
    if let Some(state) = crate::ops::state_folder::default_root() {
        crate::ops::egress::stop_for_containers(&state, &result.container_ids).await;
    }
    scan_once_stopped(hardened, &loaded, &mut result, reporter);
    Ok(result)
}

/// Once the workspace's containers are stopped (or removed), under `hardened`: the workspace
/// is scanned and set-id bits cleared, and git entries made since `up` moved aside, each finding a warning (attack K11: a process a hook
/// or `exec` left running planted a set-uid file after `up`'s scan; now nothing in the
/// container runs on).
fn scan_once_stopped(
    hardened: bool,
    loaded: &crate::ops::load::LoadedConfiguration,
    result: &mut DownResult,
    reporter: &dyn Reporter,
) {
    if hardened && !result.container_ids.is_empty() {
        result.set_id_files_and_devices =
            crate::security::planted_after::scan_root(&loaded.workspace.host_mount_root, reporter);
    }
    // git directories made since `up`, whatever the profile now says: only a container `up`
    // covered has a record (spec-note 0466)
    for id in &result.container_ids {
        let moved = crate::ops::workspace_git::after_command(id, &[], reporter);
        result.quarantined_git.extend(moved);
        if result.removed {
            crate::ops::workspace_git::forget(id);
        }
    }
}

/// `down` of a Compose configuration (spec-note 0605): nothing unless the project's primary
/// container is this workspace's; with `remove`, every container of the project is removed
/// with its anonymous volumes, then the project's networks (named volumes stay); otherwise
/// `shutdownAction` `stopCompose` (the default) stops every service and `none` only the
/// primary one. Returns the result and whether the primary was created under `hardened`.
///
/// Compose is not run: the workspace's Compose files are the agent's to change after `up`
/// judged them, and Compose runs a `provider` service's program (any path) on `down`. The
/// project and its primary come from the engine: the container carrying every id label of
/// the workspace and a Compose project label (attack H7; spec-note 0605).
async fn down_compose(
    engine: &dyn Engine,
    opts: &DownOptions,
    loaded: &crate::ops::load::LoadedConfiguration,
    labels: &std::collections::BTreeMap<String, String>,
    mut result: DownResult,
    reporter: &dyn Reporter,
) -> Result<(DownResult, bool)> {
    let service = loaded.typed.service.as_deref().unwrap_or_default();
    let roots = vec![loaded.workspace.host_mount_root.clone()];
    let Some((project, primary)) =
        labelled_primary(engine, labels, service, &roots, reporter).await?
    else {
        return Ok((result, false));
    };
    let hardened = engine
        .inspect_container(&primary)
        .await?
        .is_some_and(|info| crate::security::planted_after::created_hardened(&info.labels));
    let whole = opts.remove || loaded.typed.shutdown_action.as_deref() != Some("none");
    let containers: Vec<String> = if whole {
        engine
            .find_containers(&crate::ops::compose::project_labels(&project))
            .await?
            .into_iter()
            // never another workspace's container that joined the project
            .filter(|c| crate::ops::compose::not_another_workspaces(&c.labels, labels))
            .map(|c| c.id)
            .collect()
    } else {
        vec![primary]
    };
    if opts.remove {
        for id in &containers {
            reporter.report(Event::Status(format!("removing container {}", short(id))));
            engine.remove_container(id, true).await?;
        }
        reporter.report(Event::Status(format!("removing project {project}")));
        remove_project_networks(engine, &project, NetworkInUse::Warn, reporter).await?;
    } else {
        // together, as `docker compose stop` does: a service ignoring SIGTERM costs the
        // timeout once, not once per service
        for id in &containers {
            reporter.report(Event::Status(format!("stopping container {}", short(id))));
        }
        let timeout = Some(stop_timeout(opts));
        futures_util::future::try_join_all(
            containers
                .iter()
                .map(|id| engine.stop_container(id, timeout)),
        )
        .await?;
    }
    result.container_ids = containers;
    Ok((result, hardened))
}

/// The Compose project and primary container of the workspace: the container of service
/// `service` (or, when none is of it, the first) that carries every id label in `labels`
/// and a project label, and either binds one of `roots` (a folder in it or above it) or got
/// those labels from devcell rather than from its image. Another repository's sidecar whose
/// image carries them and that does not bind the workspace (attack finding J2) is left
/// alone, with a warning (spec-note 0421).
///
/// Errors: [`crate::ops::error::OpsError::Engine`].
async fn labelled_primary(
    engine: &dyn Engine,
    labels: &std::collections::BTreeMap<String, String>,
    service: &str,
    roots: &[std::path::PathBuf],
    reporter: &dyn Reporter,
) -> Result<Option<(String, String)>> {
    use crate::engine::compose::{PROJECT_LABEL, SERVICE_LABEL};
    let mut bound = Vec::new();
    for c in engine.find_containers(labels).await? {
        let Some(info) = engine.inspect_container(&c.id).await? else {
            continue;
        };
        if crate::security::identity::binds_workspace_path(&info, roots)
            || !image_claims(engine, &info.image_id, labels).await?
        {
            bound.push(c);
        } else {
            reporter.report(Event::Status(format!(
                "warning: container {} carries this workspace's labels from its image and does not bind it: left alone",
                short(&c.id)
            )));
        }
    }
    let mut found: Vec<(String, String, bool)> = bound
        .into_iter()
        .filter_map(|c| {
            let project = c.labels.get(PROJECT_LABEL)?.clone();
            let primary = c.labels.get(SERVICE_LABEL).map(String::as_str) == Some(service);
            Some((project, c.id, primary))
        })
        .collect();
    found.sort_by_key(|(_, _, primary)| !primary);
    Ok(found
        .into_iter()
        .next()
        .map(|(project, id, _)| (project, id)))
}

/// What removing a project's networks does with one the engine will not remove (still in use
/// by a container that is not the workspace's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetworkInUse {
    /// It stays, with a warning, and the others go on (`down`).
    Warn,
    /// The removal fails (`delete`, which then reports what remains).
    Fail,
}

/// Whether the image `image_id` itself carries one of the workspace's id `labels` with its
/// value: a container can then have them from its image rather than from devcell (another
/// repository's sidecar claiming this workspace, attack finding J2). A primary without a
/// bind of the workspace is this workspace's only when its labels came from its creation.
///
/// Errors: [`crate::ops::error::OpsError::Engine`].
async fn image_claims(
    engine: &dyn Engine,
    image_id: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<bool> {
    let Some(image) = engine.inspect_image(image_id).await? else {
        return Ok(false);
    };
    Ok(labels.iter().any(|(k, v)| image.labels.get(k) == Some(v)))
}

/// The project's own networks (`<project>_default` and the files' own; external ones carry
/// no project label), removed by label through the engine as `docker compose down` would,
/// each announced; returns the names removed. For `down` and for the product's `delete`.
///
/// Errors: [`crate::ops::error::OpsError::Engine`] when the networks cannot be listed, or one
/// cannot be removed under [`NetworkInUse::Fail`].
pub(crate) async fn remove_project_networks(
    engine: &dyn Engine,
    project: &str,
    in_use: NetworkInUse,
    reporter: &dyn Reporter,
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in engine
        .find_networks(&crate::ops::compose::project_labels(project))
        .await?
    {
        reporter.report(Event::Status(format!("removing network {name}")));
        match engine.remove_network(&name).await {
            Ok(()) => removed.push(name),
            Err(e) if in_use == NetworkInUse::Warn => {
                reporter.report(Event::Status(format!(
                    "warning: network {name} of project {project} stays: {e}"
                )));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(removed)
}
