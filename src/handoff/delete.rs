//! `delete`: tear a workspace's container down and prove it (issue 6 item 5, spec-note 0204).
//!
//! Removes every container labelled `devcontainer.local_folder=<workspace>` (stopping it first,
//! with its anonymous volumes: devcell's state volume) and, for a Compose configuration, every
//! other container of its project, the named volumes those containers used
//! that devcell owns (`devcell-` prefix) or that carry the workspace label, the Compose project's
//! own networks (spec-note 0606; its named volumes, the repository's data, stay), and devcell's
//! state for the workspace. Never touches the workspace folder, its worktrees or their git
//! directories; session logs are kept (they are the run's record). Afterwards it asks the engine
//! again for containers, volumes and networks with the workspace's label (and containers and
//! networks with the Compose project's), and checks that every
//! removed volume is gone: `verified` is true only when nothing remains.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::Engine;
use crate::handoff::state::{SessionOutcome, StateStore, WorkspaceState};
use crate::names::LOCAL_FOLDER_LABEL;
use crate::ops::error::Result;
use crate::progress::{Event, Reporter};
use crate::security::audit::OWNED_VOLUME_PREFIX;

/// Inputs of [`delete`].
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// The workspace root (need not exist any more).
    pub workspace_folder: PathBuf,
    /// The state folder (`None`: the default).
    pub state_root: Option<PathBuf>,
    /// Remove the Compose projects' named volumes too: a clone task's project is named by
    /// devcell for that task alone, so its data volumes are the task's (spec-note 0437).
    pub project_volumes: bool,
    /// The bounds of bringing back what the container git directories hold (`[handoff]`
    /// settings, spec-note 0438).
    pub fetch_budget: crate::handoff::container_git::FetchBudget,
}

impl DeleteOptions {
    /// The teardown of a clone task's workspace (`workspace_folder`, in its task folder): the
    /// task's Compose project is its own (named by [`crate::handoff::task::compose`]), so its
    /// volumes go too, and what comes back from the container git directories goes into the
    /// task's clone, which goes with the task (the default budget).
    pub fn of_task(workspace_folder: PathBuf, state_root: &Path) -> Self {
        Self {
            workspace_folder,
            state_root: Some(state_root.to_path_buf()),
            project_volumes: true,
            fetch_budget: Default::default(),
        }
    }
}

/// What was removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    /// Container ids.
    pub containers: Vec<String>,
    /// Volume names (anonymous ones included).
    pub volumes: Vec<String>,
    /// Network names: a Compose project's own networks (`com.docker.compose.project`), which
    /// Compose leaves when its containers are removed one by one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<String>,
    /// devcell's state file for the workspace, when there was one.
    pub state: Option<PathBuf>,
    /// Temporary credentials: secrets only ever lived in exec environments of the removed
    /// container, so this lists where they could have been (always the containers above).
    pub credentials: Vec<String>,
    /// devcell's container git directories of the workspace (`<state>/git/<key>`), removed once
    /// everything in them was brought back (spec-note 0436).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_git: Option<PathBuf>,
    /// The workspace's environment records (`<state>/environments/…`) nothing else names
    /// (spec-note 0520).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<PathBuf>,
    /// The handoff groups whose container was the workspace's (`handoff --group`, spec-note
    /// 0525): their records are forgotten with it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// What was deliberately kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    /// The workspace root and its repositories' working trees (the user's work; the name is
    /// historical: see `folders` for what each is).
    pub worktrees: Vec<PathBuf>,
    /// Session logs (exported records of the runs).
    pub logs: Vec<PathBuf>,
    /// The same folders as `worktrees`, each named by what it is (spec-note 0325).
    pub folders: Vec<KeptFolder>,
    /// devcell's container git directories of the workspace, kept because something in them
    /// could not be brought back (the reason is a warning; spec-note 0436).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_git: Option<PathBuf>,
    /// Each session's environment record, copied next to its log (the record of the
    /// environment its agent had outlives the workspace's state, as the log does).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<PathBuf>,
    /// Named volumes the removed containers used that devcell does not own (a Compose
    /// project's or the configuration's own: the repository's data), kept as `docker compose
    /// down` keeps them (spec-note 0606).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// Containers devcell did not create that handoffs of the workspace ran in (`handoff
    /// --container`, spec-note 0524): their owner's, forgotten with the state, never stopped
    /// or removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub external_containers: Vec<String>,
    /// The mail log of the workspace's group (`<state>/mail/<group>/log.jsonl`): the history of
    /// its tasks' messages, kept as session logs are; `delete` never removes it (spec-note
    /// 0534). Absent when the workspace has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mail_log: Option<PathBuf>,
}

/// One folder `delete` kept, and what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptFolder {
    /// Host path.
    pub path: PathBuf,
    /// `workspaceFolder` (the root), `worktree` (a linked git worktree) or `repository` (a
    /// repository with its own `.git` directory).
    pub kind: String,
    /// For the root: `repository`, `worktree` or `plain` (no git), `multiRepository` (a folder
    /// of repositories); `null` for the others.
    pub git: Option<String>,
}

impl KeptFolder {
    /// For people: `workspace folder /x (a git worktree)`, `worktree /x/api`, `repository
    /// /x/web`, `workspace folder /x (a plain folder, not under git)`.
    pub fn describe(&self) -> String {
        let path = self.path.display();
        match (self.kind.as_str(), self.git.as_deref()) {
            ("workspaceFolder", Some("worktree")) => {
                format!("workspace folder {path} (a git worktree)")
            }
            ("workspaceFolder", Some("repository")) => {
                format!("workspace folder {path} (a git repository)")
            }
            ("workspaceFolder", Some("multiRepository")) => {
                format!("workspace folder {path} (a folder of repositories)")
            }
            ("workspaceFolder", _) => {
                format!("workspace folder {path} (a plain folder, not under git)")
            }
            (kind, _) => format!("{kind} {path}"),
        }
    }
}

/// What the engine still has with the workspace's label after the removal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Remaining {
    /// Containers.
    pub containers: Vec<String>,
    /// Volumes (labelled, or removed above but still present).
    pub volumes: Vec<String>,
    /// Networks.
    pub networks: Vec<String>,
}

/// The teardown report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteResult {
    /// The workspace.
    pub workspace: PathBuf,
    /// The label looked for (`devcontainer.local_folder=<workspace>`).
    pub label: String,
    /// Removed.
    pub removed: Removed,
    /// Kept on purpose.
    pub kept: Kept,
    /// Left behind (should be empty).
    pub remaining: Remaining,
    /// `true` when nothing labelled for the workspace remains.
    pub verified: bool,
}

/// Deletes the workspace's container and devcell-owned volumes and state, then verifies.
///
/// Errors: `Engine` when the engine fails, `State` when the state cannot be changed.
pub async fn delete(opts: &DeleteOptions, reporter: &dyn Reporter) -> Result<DeleteResult> {
    let engine = crate::engine::connect().await?;
    delete_with(&*engine, opts, reporter).await
}

/// [`delete`] through `engine`.
///
/// Errors: as [`delete`].
pub async fn delete_with(
    engine: &dyn Engine,
    opts: &DeleteOptions,
    reporter: &dyn Reporter,
) -> Result<DeleteResult> {
    let root = std::fs::canonicalize(&opts.workspace_folder)
        .unwrap_or_else(|_| std::path::absolute(&opts.workspace_folder).unwrap_or_default());
    let labels = BTreeMap::from([(
        LOCAL_FOLDER_LABEL.to_string(),
        root.to_string_lossy().into_owned(),
    )]);
    let store = match &opts.state_root {
        Some(r) => StateStore::new(r),
        None => StateStore::open_default()?,
    };
    let state = if root.is_dir() {
        store.load(&root)?
    } else {
        None
    };
    warn_git_identity(state.as_ref(), &root, reporter);
    let mut removed = Removed::default();
    let mut kept = Kept::default();
    let mut ids = workspace_containers(engine, &labels, &root, state.as_ref()).await?;
    // a container someone else owns, handed off with `--container`, is forgotten, never removed
    kept.external_containers = crate::handoff::agent::external_containers(state.as_ref());
    ids.retain(|id| !kept.external_containers.contains(id));
    let projects = compose_projects(engine, &mut ids).await?;
    let data = remove_containers(engine, &ids, &labels, &mut removed, reporter).await?;
    let volumes_too = opts.project_volumes;
    remove_projects(engine, &projects, volumes_too, &mut removed, reporter).await?;
    kept.volumes = data
        .into_iter()
        .filter(|v| !removed.volumes.contains(v))
        .collect();
    remove_container_gits(
        &store,
        (&root, &opts.fetch_budget),
        state.as_ref(),
        &mut removed,
        &mut kept,
        reporter,
    )?;
    // Environment records: each session's is copied next to its log, then the workspace's go.
    let forgotten = forget_environments(&store, &root, state.as_ref())?;
    removed.environments = forgotten.removed;
    kept.environments = forgotten.copies;
    forget_state(&store, &root, state.as_ref(), &mut removed, &mut kept)?;
    removed.groups = crate::handoff::group::forget(store.root(), &root);
    keep_folders(&root, &mut kept);
    let mut remaining = remaining(engine, &labels, &root, &projects, &removed).await?;
    remaining
        .containers
        .retain(|id| !kept.external_containers.contains(id));
    let verified = remaining == Remaining::default();
    Ok(DeleteResult {
        workspace: root.clone(),
        label: format!("{LOCAL_FOLDER_LABEL}={}", root.display()),
        removed,
        kept,
        remaining,
        verified,
    })
}

/// A `.git` the agent made or changed in the workspace is named before anything goes
/// (spec-note 0436); devcell runs no git there.
fn warn_git_identity(state: Option<&WorkspaceState>, root: &Path, reporter: &dyn Reporter) {
    // one an agent created is kept in the state through `delete` (attack M8)
    for rel in state.iter().flat_map(|s| &s.created_git) {
        reporter.report(Event::Status(format!(
            "warning (git_dir_created): {}",
            crate::handoff::git_identity::created_message(rel)
        )));
    }
    if let Some(before) = state.and_then(|s| s.git_identity.as_ref()) {
        for (code, message) in crate::handoff::git_identity::compare(
            before,
            &crate::handoff::git_identity::record(root),
        ) {
            reporter.report(Event::Status(format!("warning ({code}): {message}")));
        }
    }
}

/// The ids of the containers with `labels` that bind the workspace `root`. Only containers
/// that bind the workspace are its own: one claiming its labels without the bind is neither
/// removed nor counted as left behind (spec-note 0421).
async fn bound_containers(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
    root: &Path,
) -> Result<Vec<String>> {
    let found = engine.find_containers(labels).await?;
    let roots = [root.to_path_buf()];
    Ok(
        crate::security::identity::bound_to_workspace(engine, found, &roots)
            .await?
            .0
            .into_iter()
            .map(|c| c.id)
            .collect(),
    )
}

/// The workspace's containers: those that bind it, and the one its state records (when it
/// still carries the workspace's label).
async fn workspace_containers(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
    root: &Path,
    state: Option<&WorkspaceState>,
) -> Result<Vec<String>> {
    let mut ids = bound_containers(engine, labels, root).await?;
    if let Some(id) = state.and_then(|s| s.container_id.clone())
        && !ids
            .iter()
            .any(|i| i.starts_with(&id) || id.starts_with(i.as_str()))
        && let Some(info) = engine.inspect_container(&id).await?
        && info.labels.get(LOCAL_FOLDER_LABEL) == labels.get(LOCAL_FOLDER_LABEL)
    {
        ids.push(info.id);
    }
    Ok(ids)
}

/// A Compose workspace's sidecars go with its primary container (issue 14 item 5), put
/// before the workspace's own containers in `ids`; returns the projects, whose networks go
/// after them.
async fn compose_projects(engine: &dyn Engine, ids: &mut Vec<String>) -> Result<Vec<String>> {
    let mut projects: Vec<String> = Vec::new();
    let mut peers: Vec<String> = Vec::new();
    for id in ids.clone() {
        if let Some(info) = engine.inspect_container(&id).await? {
            if let Some(project) = info.labels.get(crate::engine::compose::PROJECT_LABEL)
                && !projects.contains(project)
            {
                projects.push(project.clone());
            }
            for c in crate::ops::compose::project_siblings(engine, &info.labels, &info.id).await? {
                peers.push(c.id);
            }
        }
    }
    *ids = peers_first(&peers, ids);
    Ok(projects)
}

/// The order containers are stopped and removed in: every peer first, then the workspace's
/// own. Stopping a primary tears down its mount namespace, with the cover over `<ws>/.git`,
/// while a peer in its pid namespace still holds the workspace bind: it would then see the
/// host's own `.git` (spec-note 0400, F0/F3), as after a handoff ([`crate::handoff::quiesce`]).
fn peers_first(peers: &[String], own: &[String]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for id in peers.iter().filter(|p| !own.contains(p)).chain(own) {
        if !order.contains(id) {
            order.push(id.clone());
        }
    }
    order
}

/// Each container stopped and removed with its egress proxy and anonymous volumes, then the
/// devcell-owned volumes (its `devcell-` named volumes and those with the workspace's label).
/// Returns the other named volumes the containers used (the repository's data), which stay:
/// listing them as removed made every such `delete` unverified.
async fn remove_containers(
    engine: &dyn Engine,
    ids: &[String],
    labels: &BTreeMap<String, String>,
    removed: &mut Removed,
    reporter: &dyn Reporter,
) -> Result<Vec<String>> {
    let mut named_volumes = Vec::new();
    let mut data = Vec::new();
    for id in ids {
        if let Some(info) = engine.inspect_container(id).await? {
            for m in info.mounts.iter().filter(|m| m.kind == "volume") {
                let Some(name) = &m.name else { continue };
                if name.starts_with(OWNED_VOLUME_PREFIX) {
                    named_volumes.push(name.clone());
                    removed.volumes.push(name.clone());
                } else if is_anonymous_volume(name) {
                    // removed with its container (`remove_container(id, true)`)
                    removed.volumes.push(name.clone());
                } else if !data.contains(name) {
                    data.push(name.clone());
                }
            }
        }
        reporter.report(Event::Status(format!(
            "stopping and removing container {}",
            &id[..id.len().min(12)]
        )));
        // a graceful stop first (the keep-alive process exits on SIGTERM); a container that
        // is already stopped or will not stop is removed by force anyway
        let _ = engine
            .stop_container(id, Some(std::time::Duration::from_secs(10)))
            .await;
        engine.remove_container(id, true).await?;
        crate::ops::workspace_git::forget(id);
        // its egress proxy goes with it (its decision record stays, as the logs do)
        if let Some(state) = crate::ops::state_folder::default_root() {
            crate::ops::egress::stop_for_containers(&state, std::slice::from_ref(id)).await;
        }
        removed.containers.push(id.clone());
        removed.credentials.push(format!(
            "exec environments of container {} (secrets are never stored elsewhere)",
            &id[..id.len().min(12)]
        ));
    }
    for name in engine.find_volumes(labels).await? {
        data.retain(|d| d != &name);
        if !named_volumes.contains(&name) {
            named_volumes.push(name.clone());
        }
        if !removed.volumes.contains(&name) {
            removed.volumes.push(name);
        }
    }
    for name in &named_volumes {
        reporter.report(Event::Status(format!("removing volume {name}")));
        engine.remove_volume(name).await?;
    }
    // An anonymous volume Compose carried over to a container it created again (spec-note
    // 0681) is not the new container's own, so the engine kept it with the container: removed
    // here; one another container still uses stays, and the verification names it.
    for name in removed.volumes.iter().filter(|n| is_anonymous_volume(n)) {
        let _ = engine.remove_volume(name).await;
    }
    Ok(data)
}

/// Whether `name` is an engine-named (anonymous) volume: 64 lower-case hex digits, the name
/// Docker and Podman give a volume nobody named; the engine removes it with its container.
fn is_anonymous_volume(name: &str) -> bool {
    crate::security::audit::is_sha256_hex(name)
}

/// The projects' networks ([`crate::ops::down::remove_project_networks`], failing on one still
/// in use), then, when `volumes_too` (a project that is devcell's own,
/// [`DeleteOptions::project_volumes`]), their named volumes: those Compose labelled with the
/// project *and* named `<project>_<volume>` by it. A volume the files name outright (`name:`)
/// may be another project's too, and stays; without `volumes_too` the named volumes are the
/// repository's data and stay, as under `docker compose down` (spec-note 0606).
async fn remove_projects(
    engine: &dyn Engine,
    projects: &[String],
    volumes_too: bool,
    removed: &mut Removed,
    reporter: &dyn Reporter,
) -> Result<()> {
    use crate::ops::down::NetworkInUse;
    for project in projects {
        removed.networks.extend(
            crate::ops::down::remove_project_networks(
                engine,
                project,
                NetworkInUse::Fail,
                reporter,
            )
            .await?,
        );
    }
    if !volumes_too {
        return Ok(());
    }
    for project in projects {
        let scoped = format!("{project}_");
        for name in engine
            .find_volumes(&crate::ops::compose::project_labels(project))
            .await?
            .into_iter()
            .filter(|n| n.starts_with(&scoped))
        {
            reporter.report(Event::Status(format!("removing volume {name}")));
            engine.remove_volume(&name).await?;
            if !removed.volumes.contains(&name) {
                removed.volumes.push(name);
            }
        }
    }
    Ok(())
}

/// The containers are gone, so nothing writes the container git directories any more: what
/// the agent committed and no handoff brought back comes back now, and devcell's copy goes
/// only when nothing is left in it (spec-note 0436).
fn remove_container_gits(
    store: &StateStore,
    (root, budget): (&Path, &crate::handoff::container_git::FetchBudget),
    state: Option<&WorkspaceState>,
    removed: &mut Removed,
    kept: &mut Kept,
    reporter: &dyn Reporter,
) -> Result<()> {
    let session = state
        .and_then(|s| s.sessions.last())
        .map_or_else(|| "delete".to_string(), |s| s.id.clone());
    match fetch_back_before_removal(store, root, &session, budget, reporter) {
        Ok(Some(slots)) => {
            reporter.report(Event::Status(format!(
                "removing devcell's container git directories {}",
                slots.display()
            )));
            std::fs::remove_dir_all(&slots).map_err(|source| {
                crate::handoff::state::StateError::Io {
                    path: slots.clone(),
                    source,
                }
            })?;
            removed.container_git = Some(slots);
        }
        Ok(None) => {}
        Err((slots, why)) => {
            reporter.report(Event::Status(format!(
                "warning: devcell's container git directories {} are kept: {why}",
                slots.display()
            )));
            kept.container_git = Some(slots);
        }
    }

    Ok(())
}

/// State: end sessions the removal cut short, then forget the workspace (logs stay).
fn forget_state(
    store: &StateStore,
    root: &Path,
    state: Option<&WorkspaceState>,
    removed: &mut Removed,
    kept: &mut Kept,
) -> Result<()> {
    if let Some(state) = state {
        for s in state.sessions.iter().filter(|s| s.outcome.is_none()) {
            let _ = store.end_session(
                root,
                &s.id,
                SessionOutcome::Failed {
                    code: "deleted".into(),
                    message: "the workspace container was deleted while the session ran".into(),
                },
            );
        }
        kept.logs = state
            .sessions
            .iter()
            .map(|s| s.log.clone())
            .filter(|l| l.is_file())
            .collect();
        let path = store.state_path(root)?;
        store.remove_key(&state.key)?;
        removed.state = Some(path);
    }
    Ok(())
}

/// The workspace folder and its repositories' worktrees, which `delete` never removes.
fn keep_folders(root: &Path, kept: &mut Kept) {
    if root.is_dir() {
        use crate::handoff::repository::{Layout, RepoKind};
        let kind_of = |k: RepoKind| match k {
            RepoKind::Worktree => "worktree",
            RepoKind::Repository => "repository",
        };
        kept.worktrees.push(root.to_path_buf());
        let ws = crate::handoff::repository::inspect(
            root,
            &crate::handoff::repository::InspectOptions::default(),
        )
        .ok();
        let git = ws.as_ref().map(|ws| match ws.layout {
            Layout::Repository => ws
                .repos
                .iter()
                .find(|r| r.host_path == root)
                .map_or("repository", |r| kind_of(r.kind))
                .to_string(),
            Layout::MultiRepository => "multiRepository".to_string(),
            Layout::Plain => "plain".to_string(),
        });
        kept.folders.push(KeptFolder {
            path: root.to_path_buf(),
            kind: "workspaceFolder".into(),
            git,
        });
        for r in ws
            .iter()
            .flat_map(|ws| ws.repos.iter())
            .filter(|r| r.host_path != root)
        {
            kept.worktrees.push(r.host_path.clone());
            kept.folders.push(KeptFolder {
                path: r.host_path.clone(),
                kind: kind_of(r.kind).into(),
                git: None,
            });
        }
    }
}

/// What is left after the removal: the workspace's containers, volumes and networks, the
/// projects' containers and networks, and any removed volume that still exists.
async fn remaining(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
    root: &Path,
    projects: &[String],
    removed: &Removed,
) -> Result<Remaining> {
    let mut remaining = Remaining {
        containers: bound_containers(engine, labels, root).await?,
        volumes: engine.find_volumes(labels).await?,
        networks: engine.find_networks(labels).await?,
    };
    for project in projects {
        let label = crate::ops::compose::project_labels(project);
        for c in engine.find_containers(&label).await? {
            if !remaining.containers.contains(&c.id) {
                remaining.containers.push(c.id);
            }
        }
        remaining
            .networks
            .extend(engine.find_networks(&label).await?);
    }
    for name in &removed.volumes {
        if engine.volume_exists(name).await? && !remaining.volumes.contains(name) {
            remaining.volumes.push(name.clone());
        }
    }
    Ok(remaining)
}

/// The workspace's environment records forgotten ([`crate::ops::environment::EnvironmentStore::forget`]):
/// each session's record copied to `<log stem>.environment.json` beside its log, and records
/// another workspace's session still names kept.
///
/// Errors: a record file could not be written or removed.
fn forget_environments(
    store: &StateStore,
    root: &std::path::Path,
    state: Option<&crate::handoff::state::WorkspaceState>,
) -> Result<crate::ops::environment::store::Forgotten> {
    let sessions: Vec<(String, PathBuf)> = state
        .iter()
        .flat_map(|s| s.sessions.iter())
        .filter_map(|s| {
            let hash = s.environment.clone()?;
            Some((hash, s.log.with_extension("environment.json")))
        })
        .collect();
    let own_key = state.map(|s| s.key.clone());
    let still_named = store
        .list()
        .map(|(all, _)| all)
        .unwrap_or_default()
        .into_iter()
        .filter(|other| Some(&other.key) != own_key.as_ref())
        .flat_map(|other| other.sessions.into_iter().filter_map(|s| s.environment))
        .collect();
    crate::ops::environment::EnvironmentStore::new(store.root()).forget(
        root,
        &sessions,
        &still_named,
    )
}

/// Brings back what the workspace's container git directories (`<state>/git/<key>`) hold for
/// each repository of the workspace ([`crate::handoff::container_git::ContainerGitDir::fetch_back`],
/// into `refs/devcell/<session>/…`), reporting each line. Returns the folder when everything
/// in it came back (`None` when there is none), or the folder and why it must stay: the
/// workspace cannot be read, a fetch-back failed or was refused, or a container git directory
/// belongs to no repository of the workspace now.
fn fetch_back_before_removal(
    store: &StateStore,
    root: &std::path::Path,
    session: &str,
    budget: &crate::handoff::container_git::FetchBudget,
    reporter: &dyn Reporter,
) -> std::result::Result<Option<PathBuf>, (PathBuf, String)> {
    use crate::handoff::container_git::repo_gits;
    let Ok(key) = crate::handoff::state::workspace_key(root) else {
        return Ok(None);
    };
    let slots = store.root().join("git").join(key);
    if std::fs::symlink_metadata(&slots).is_err() {
        return Ok(None);
    }
    let keep = |why: String| (slots.clone(), why);
    if !root.is_dir() {
        return Err(keep(format!(
            "the workspace `{}` is gone, so the agent's commits in them cannot be brought back",
            root.display()
        )));
    }
    let ws = crate::handoff::repository::inspect(
        root,
        &crate::handoff::repository::InspectOptions::default(),
    )
    .map_err(|e| keep(format!("the workspace cannot be read: {e}")))?;
    let gits =
        repo_gits(&ws, &slots).map_err(|e| keep(format!("the workspace cannot be read: {e}")))?;
    let mut problems = Vec::new();
    for g in &gits {
        match g.dir().fetch_back_within(&g.host(), session, budget) {
            Ok(back) => {
                for line in crate::handoff::agent::fetch_back_lines(&g.repo, &back) {
                    reporter.report(Event::Status(line));
                }
            }
            Err(e) => problems.push(format!(
                "repository `{}`: the agent's commits were not brought back: {e}",
                g.repo
            )),
        }
    }
    // a container git directory of a repository the workspace no longer has
    if let Ok(entries) = std::fs::read_dir(&slots) {
        for e in entries.flatten() {
            if !gits.iter().any(|g| g.slot == e.path()) {
                problems.push(format!(
                    "`{}` belongs to no repository of the workspace now",
                    e.path().display()
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(Some(slots))
    } else {
        Err(keep(problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack (spec-note 0400, F0/F3): `delete` stops and removes every peer of the project
    /// before the workspace's own container, never the primary while a peer runs.
    /// Only the engine's own 64-hex names are anonymous volumes; a repository's named volume
    /// (`ws_devcontainer_db`) is data that `delete` keeps and does not count as left behind.
    #[test]
    fn only_engine_named_volumes_are_anonymous() {
        assert!(is_anonymous_volume(&"0a".repeat(32)));
        assert!(!is_anonymous_volume("ws_devcontainer_db"));
        assert!(!is_anonymous_volume(&"0A".repeat(32)));
        assert!(!is_anonymous_volume(&"0a".repeat(31)));
    }

    #[test]
    fn delete_stops_the_peers_before_the_primary() {
        let own = vec!["app".to_string()];
        let peers = vec!["db".to_string(), "side".to_string(), "app".to_string()];
        assert_eq!(peers_first(&peers, &own), ["db", "side", "app"]);
        assert_eq!(peers_first(&[], &own), ["app"]);
        let two = vec!["app".to_string(), "other".to_string()];
        assert_eq!(
            peers_first(&["db".to_string(), "db".to_string()], &two),
            ["db", "app", "other"]
        );
    }
}
