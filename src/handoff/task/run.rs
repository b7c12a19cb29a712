//! Clone tasks end to end (spec-note 0437): `handoff --isolation clone` (open or continue the
//! task, then the ordinary container handoff with the clone as its workspace folder, then the
//! fetch back), `fetch --task`, `delete --task` and the tasks `status` lists.

use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fetch::{self, TaskFetch};
use super::lock::TaskLock;
use super::mirror::{self, MirrorLock};
use super::{
    RepositoryState, Result, TaskError, TaskRecord, branch_of, clone, derive_task_name,
    fetched_ref_of, io, sandbox_of, source, source_key, tasks_root, valid_task_name,
};
use crate::engine::Engine;
use crate::handoff::context::AgentRuntime;
use crate::handoff::plan::HandoffOptions;
use crate::handoff::session::{AgentStreams, HandoffResult, StopSignal};
use crate::handoff::state::StateStore;
use crate::progress::{Event, Reporter};

/// The state root: `given`, else [`StateStore::default_root`].
///
/// Errors: [`TaskError::NoFolder`].
pub fn state_root(given: Option<&Path>) -> Result<PathBuf> {
    given
        .map(Path::to_path_buf)
        .or_else(StateStore::default_root)
        .ok_or(TaskError::NoFolder)
}

/// devcell's cache folder (the mirrors' parent).
///
/// Errors: [`TaskError::NoFolder`].
pub fn cache_root() -> Result<PathBuf> {
    crate::oci::store::default_cache_dir().ok_or(TaskError::NoFolder)
}

/// Opens the task `opts.task` of the repository `opts.workspace_folder` when it exists
/// (continued: its clone and branch as the agent left them), else makes it: the source judged
/// ([`source::inspect`], before anything is created), the task's lock taken ([`TaskLock`]:
/// a task in use is not opened twice), the mirror made or fetched under its exclusive lock,
/// the clone made under the shared lock, the record written. A task folder without its record
/// (a devcell killed while making it) is made again. The lock is the caller's to hold while
/// the task is used.
///
/// Errors: [`TaskError::InvalidName`], [`TaskError::Refused`], [`TaskError::InUse`], git and
/// file failures (a half-made task folder is removed).
pub fn open_task(
    opts: &HandoffOptions,
    state_root: &Path,
    cache_root: &Path,
    reporter: &dyn Reporter,
) -> Result<(Vec<TaskRecord>, TaskLock)> {
    if let Some(name) = &opts.task
        && !valid_task_name(name)
    {
        return Err(TaskError::InvalidName { name: name.clone() });
    }
    let (sources, workspace) = source::inspect_all(&opts.workspace_folder, opts.base.as_deref())?;
    let key = match &workspace {
        Some(root) => super::workspace_key(root),
        None => source_key(&sources[0].common_dir),
    };
    let shown_source = workspace
        .clone()
        .unwrap_or_else(|| sources[0].work_tree.clone());
    let root = tasks_root(state_root, &key);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .map_err(io(&root))?;
    // claim the task's lock, then its folder (`create_dir` is the atomic step: two handoffs
    // never share one)
    let (name, folder, lock) = loop {
        let name = opts
            .task
            .clone()
            .unwrap_or_else(|| derive_task_name(&opts.agent));
        let lock = match TaskLock::take(&root, &name) {
            Ok(lock) => lock,
            // a derived name another handoff holds: derive another
            Err(TaskError::InUse { .. }) if opts.task.is_none() => continue,
            Err(e) => return Err(e),
        };
        // under the lock (shared by names that differ only by case): no other task's name
        // may differ from this one only by case
        if let Some(existing) = case_twin(&root, &name) {
            if opts.task.is_none() {
                continue;
            }
            return Err(TaskError::CaseClash { name, existing });
        }
        let folder = root.join(&name);
        match std::fs::DirBuilder::new().mode(0o700).create(&folder) {
            Ok(()) => break (name, folder, lock),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if opts.task.is_none() {
                    continue;
                }
                if !super::is_made(&folder) {
                    // half made by a devcell that was killed: nobody else holds it (the lock)
                    reporter.report(Event::Status(format!(
                        "clone task `{name}`: removing a task folder left half made"
                    )));
                    std::fs::remove_dir_all(&folder).map_err(io(&folder))?;
                    continue;
                }
                let records = super::load_folder(&folder)?;
                if !records.iter().all(TaskRecord::same_repository) {
                    return Err(TaskError::Refused {
                        reason: "clone_replaced_repository",
                        source_repo: shown_source,
                        message: format!(
                            "task `{name}` was made from the repository that was at this path before it was replaced"
                        ),
                        hint: "choose another `--task`; `devcell doctor` lists the old task and `devcell prune --tasks` removes it once nothing would be lost".into(),
                    });
                }
                for record in &records {
                    reporter.report(Event::Status(format!(
                        "clone task `{name}`: continuing `{}` on branch `{}` (base {})",
                        record.repo,
                        record.branch,
                        short(&record.base)
                    )));
                }
                return Ok((records, lock));
            }
            Err(e) => return Err(io(&folder)(e)),
        }
    };
    let made = make_task(
        &sources,
        workspace.as_deref(),
        &name,
        &folder,
        state_root,
        cache_root,
        reporter,
    );
    match made {
        Ok(records) => Ok((records, lock)),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&folder);
            lock.remove();
            let mirrors = sources
                .iter()
                .map(|src| mirror::mirror_path(cache_root, &source_key(&src.common_dir)))
                .collect();
            Err(failed(
                e.into(),
                &name,
                &opts.agent,
                shown_source,
                None,
                mirrors,
            ))
        }
    }
}

/// [`TaskError::Failed`]: `error` of the task `task` of `source` (`folder`: the task folder,
/// when it is kept).
fn failed(
    error: crate::ops::error::OpsError,
    task: &str,
    agent: &str,
    source: PathBuf,
    folder: Option<PathBuf>,
    mirrors: Vec<PathBuf>,
) -> TaskError {
    TaskError::Failed(Box::new(super::Failed {
        task: task.to_string(),
        agent: agent.to_string(),
        source_repo: source,
        folder,
        mirrors,
        error,
    }))
}

/// The task folder in `root` whose name equals `name` but for ASCII case (not `name` itself).
fn case_twin(root: &Path, name: &str) -> Option<String> {
    super::subfolders(root)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|other| other != name && other.eq_ignore_ascii_case(name))
}

/// Makes the task's clones in `folder`: the clone itself for one repository, each
/// repository's clone in `folder/workspace` for a multi-repository workspace (`workspace`, its
/// root), then writes the records (a multi-repository task's `repos` folder is renamed into
/// place once all are written, so a killed devcell leaves no half-listed task).
fn make_task(
    sources: &[source::Source],
    workspace: Option<&Path>,
    name: &str,
    folder: &Path,
    state_root: &Path,
    cache_root: &Path,
    reporter: &dyn Reporter,
) -> Result<Vec<TaskRecord>> {
    let owner_of = workspace.unwrap_or(&sources[0].work_tree);
    reachable_by_owner(state_root, folder, owner_of)?;
    let clones = match workspace {
        Some(_) => {
            let dir = folder.join(super::WORKSPACE_FOLDER);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(io(&dir))?;
            dir
        }
        None => folder.to_path_buf(),
    };
    let mut records = Vec::new();
    for src in sources {
        records.push(make_clone(src, name, &clones, cache_root, reporter)?);
    }
    let Some(root) = workspace else {
        records[0].save()?;
        return Ok(records);
    };
    // given to the owner only now: devcell's host git runs as the owner of the folder it
    // runs in, and the clones were made borrowing the mirror, which only devcell reaches
    crate::config::ownership::hand_over(&clones, owner_of).map_err(io(&clones))?;
    let staging = folder.join(format!("{}.tmp", super::REPOS_FOLDER));
    std::fs::create_dir(&staging).map_err(io(&staging))?;
    for record in &mut records {
        record.workspace = Some(root.to_path_buf());
        let path = staging.join(format!("{}.json", record.repo));
        let text = serde_json::to_string_pretty(record).unwrap_or_default();
        super::write_durably(&path, text.as_bytes())?;
    }
    let repos = folder.join(super::REPOS_FOLDER);
    std::fs::rename(&staging, &repos).map_err(io(&repos))?;
    super::sync_folder(folder)?;
    Ok(records)
}

/// One repository's clone at `clones/<repo>`: its mirror made or fetched under the mirror's
/// exclusive lock, the clone made under the shared lock; its record (not yet saved).
fn make_clone(
    src: &source::Source,
    name: &str,
    clones: &Path,
    cache_root: &Path,
    reporter: &dyn Reporter,
) -> Result<TaskRecord> {
    let key = source_key(&src.common_dir);
    reporter.report(Event::Status(format!(
        "clone task `{name}`: fetching `{}` into its mirror",
        src.work_tree.display()
    )));
    let mut lock = MirrorLock::take(cache_root, &key, true)?;
    let mirror = mirror::update(cache_root, &key, src)?;
    let lock_path = mirror::mirrors_root(cache_root);
    lock.set(false).map_err(io(&lock_path))?;
    let clone_path = clones.join(&src.name);
    let branch = branch_of(name);
    reporter.report(Event::Status(format!(
        "clone task `{name}`: cloning `{}` on branch `{branch}` at {} (base `{}`)",
        src.name,
        short(&src.base),
        src.base_ref
    )));
    clone::make(&mirror, src, &clone_path, &branch)?;
    drop(lock);
    Ok(TaskRecord {
        task: name.to_string(),
        source: src.work_tree.clone(),
        source_git_dir: src.common_dir.clone(),
        source_head_git_dir: Some(src.git_dir.clone()),
        repo: src.name.clone(),
        clone: clone_path,
        branch,
        base_ref: src.base_ref.clone(),
        base: src.base.clone(),
        object_format: src.object_format.clone(),
        fetched: None,
        fetched_at: None,
        refused: None,
        created_at: chrono::Utc::now().to_rfc3339(),
        source_id: super::repository_id(&src.common_dir),
        workspace: None,
    })
}

/// When devcell is root and the source belongs to another user, the clone is that user's (the
/// container user maps to them, and devcell's git in the clone runs as them): the folders above
/// it in devcell's state get search permission for others (`--x`, never read), so that user
/// can reach it; nothing else in the state folder becomes readable.
fn reachable_by_owner(state_root: &Path, folder: &Path, owner_of: &Path) -> Result<()> {
    use crate::config::ownership;
    if ownership::hand_over_to(ownership::process_ids(), ownership::owner(owner_of)).is_none() {
        return Ok(());
    }
    let mut chain = vec![folder.to_path_buf()];
    let mut at = folder;
    while let Some(parent) = at.parent() {
        chain.push(parent.to_path_buf());
        if parent == state_root {
            break;
        }
        at = parent;
    }
    for dir in chain {
        let mode = std::fs::metadata(&dir)
            .map_err(io(&dir))?
            .permissions()
            .mode();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode | 0o011))
            .map_err(io(&dir))?;
    }
    Ok(())
}

fn short(oid: &str) -> &str {
    &oid[..oid.len().min(12)]
}

/// A clone task with `--runtime host` is refused, for a run and a plan alike (issue 27): the
/// clone lives in devcell's state and is the agent's only workspace, so a host runtime would
/// run the agent on the host, as the user, inside devcell's own state folder, with nothing
/// between it and the rest of the host; isolation by clone means nothing without the
/// container's wall. `reason` `clone_runtime_host`, `config_invalid`.
///
/// Errors: [`TaskError::Refused`].
pub fn refuse_host_runtime(opts: &HandoffOptions) -> Result<()> {
    if opts.runtime == Some(AgentRuntime::Host) {
        return Err(TaskError::Refused {
            reason: "clone_runtime_host",
            source_repo: opts.workspace_folder.clone(),
            message: "`--isolation clone` runs the agent in a container; `--runtime host` has no sandbox to clone into".into(),
            hint: "drop `--runtime host`, or use `--isolation worktree`".into(),
        });
    }
    Ok(())
}

/// `handoff --isolation clone` against the engine at `DOCKER_HOST`.
///
/// Errors: as [`handoff_with`]; the engine's when none answers; [`cache_root`]'s.
pub async fn handoff(
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<HandoffResult> {
    refuse_host_runtime(opts)?;
    let engine = crate::engine::connect().await?;
    let cache = cache_root()?;
    handoff_with(&*engine, opts, &cache, streams, stop, reporter).await
}

/// A clone task's handoff through `engine`, with the mirrors under `cache`: [`open_task`], then
/// [`crate::handoff::agent::handoff_with`] with the clone as the workspace folder (its own
/// container, session and state), then [`fetch::fetch`] whatever the handoff's outcome (a
/// failure to fetch is a warning: the clone stays, `devcell fetch --task` retries).
///
/// Errors: [`open_task`]'s, then the handoff's.
pub async fn handoff_with(
    engine: &dyn Engine,
    opts: &HandoffOptions,
    cache: &Path,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<HandoffResult> {
    let state = state_root(opts.state_root.as_deref())?;
    // held until the fetch back is done: the task cannot be deleted or opened again meanwhile
    let (mut records, _lock) = open_task(opts, &state, cache, reporter)?;
    let multi = records[0].workspace.is_some();
    let mut task_opts = opts.clone();
    task_opts.workspace_folder = records[0].workspace_folder();
    // the mail channel to the repository's other tasks, opened by the handoff once its
    // session has begun, for as long as the agent runs
    let mut sandbox = sandbox_of(&records);
    if opts.mail_channel_wanted() {
        task_opts.mail = Some(super::mail::request(
            &state,
            &records[0],
            opts.mail_group.as_ref(),
        )?);
        sandbox.mail = Some(super::mail::agent_text());
    }
    task_opts.sandbox = Some(sandbox);
    // a Compose configuration gets a project of the task's own (spec-note 0437)
    task_opts.env.insert(
        super::compose::PROJECT_VARIABLE.into(),
        super::compose::project_name(&records[0]),
    );
    // a multi-repository workspace chooses its primary as the worktree mode does (0160)
    if !multi {
        task_opts.primary = None;
    }
    task_opts.state_root = Some(state);
    let result =
        crate::handoff::agent::handoff_with(engine, &task_opts, streams, stop, reporter).await;
    if let Err(not_stopped) =
        stopped_before_fetch(engine, &task_opts.workspace_folder, &records[0].task).await
    {
        return match result {
            Ok(_) => Err(not_stopped),
            Err(e) => {
                reporter.report(Event::Status(format!("warning: {not_stopped}")));
                Err(e)
            }
        };
    }
    let budget = crate::handoff::container_git::FetchBudget::from_settings(&opts.settings.handoff);
    let fetched: Vec<_> = records
        .iter_mut()
        .map(|r| fetch::fetch_within(r, &budget))
        .collect();
    let mut r = match result {
        Ok(r) => r,
        // stopped by a signal: as it is (devcell exits with 128 + the signal)
        Err(e) if crate::handoff::session::Stopped::signal_of(&e).is_some() => return Err(e),
        // the task is kept: the error says which, and how to go on (issue 27)
        Err(e) => {
            let record = &records[0];
            return Err(failed(
                e,
                &record.task,
                &opts.agent,
                record.workspace.clone().unwrap_or(record.source.clone()),
                Some(record.folder()),
                records
                    .iter()
                    .map(|r| mirror::mirror_path(cache, &source_key(&r.source_git_dir)))
                    .collect(),
            )
            .into());
        }
    };
    let mut reports = Vec::new();
    for (record, fetched) in records.iter().zip(fetched) {
        match fetched {
            Ok(f) => {
                reporter.report(Event::Status(fetch_line(&f)));
                reports.push(f);
            }
            Err(e) => {
                let message = format!(
                    "task `{}`: the branch `{}` of `{}` was not fetched: {e}; the clone is kept, `devcell fetch --task {}` retries",
                    record.task, record.branch, record.repo, record.task
                );
                reporter.report(Event::Status(format!("warning: {message}")));
                r.warnings.push(message);
                reports.push(fetch::report(record, fetch::clone_tip(record), false));
            }
        }
    }
    if multi {
        r.tasks = reports;
    } else {
        r.task = reports.pop();
    }
    Ok(r)
}

/// Nothing of the task's workspace runs when its clone is read: the handoff stops its
/// containers at its end, and one it could not stop (or a peer of it) is stopped now and
/// confirmed (spec-note 0400, F3). Not confirmed, the fetch is refused and the clone kept for
/// `devcell fetch --task`.
///
/// Errors: [`crate::handoff::quiesce::NotStopped`].
async fn stopped_before_fetch(
    engine: &dyn Engine,
    folder: &Path,
    task: &str,
) -> crate::ops::error::Result<()> {
    let root = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
    crate::handoff::quiesce::stop_running_workspace(engine, &root)
        .await
        .map(|_| ())
        .map_err(|why| {
            crate::handoff::quiesce::NotStopped {
                why,
                task: Some(task.to_string()),
            }
            .into()
        })
}

/// The options `handoff --plan` plans a clone task with: the source's, with the Compose
/// project name the task's handoff will set ([`super::compose::project_name`] of the task
/// folder it opens, issue 27). Nothing is created. A task not named with `--task` gets a
/// derived name here; the handoff derives its own. Options that cannot be resolved (not a
/// repository) are returned as they are: the plan reports why.
pub fn plan_options(opts: &HandoffOptions) -> HandoffOptions {
    let mut planned = opts.clone();
    let Ok(state) = state_root(opts.state_root.as_deref()) else {
        return planned;
    };
    let Ok((sources, workspace)) =
        source::inspect_all(&opts.workspace_folder, opts.base.as_deref())
    else {
        return planned;
    };
    let key = match &workspace {
        Some(root) => super::workspace_key(root),
        None => source_key(&sources[0].common_dir),
    };
    let name = opts
        .task
        .clone()
        .unwrap_or_else(|| derive_task_name(&opts.agent));
    let base = workspace.as_deref().and_then(Path::file_name).map_or_else(
        || sources[0].name.clone(),
        |n| n.to_string_lossy().into_owned(),
    );
    let folder = tasks_root(&state, &key).join(&name);
    if opts.mail_channel_wanted()
        && let (Ok(group), Ok(task)) = (
            opts.mail_group.clone().map_or_else(
                || crate::mail::GroupName::new(&source_key(&sources[0].common_dir)),
                Ok,
            ),
            crate::mail::TaskName::new(&name),
        )
    {
        // the channel's binds, as `super::mail::request` makes them for the record
        planned.mail = Some(crate::handoff::door::DoorRequest::planned(
            &state,
            group,
            task,
            Some(branch_of(&name)),
        ));
    }
    planned.env.insert(
        super::compose::PROJECT_VARIABLE.into(),
        super::compose::project_name_of(&base, &name, &folder),
    );
    planned
}

/// One line for people about a fetch.
pub fn fetch_line(f: &TaskFetch) -> String {
    let line = fetch_line_of(f);
    match &f.repo {
        Some(repo) => format!("{repo}: {line}"),
        None => line,
    }
}

fn fetch_line_of(f: &TaskFetch) -> String {
    match (&f.tip, &f.fetched) {
        (None, _) => format!(
            "task `{}`: no branch `devcell/{}` in its clone; nothing fetched",
            f.task, f.task
        ),
        (Some(_), Some(at)) if f.updated => format!(
            "task `{}`: fetched `{}` at {} ({} commit(s) ahead of the base {})",
            f.task,
            f.ref_name,
            short(at),
            f.ahead.map_or("?".to_string(), |n| n.to_string()),
            short(&f.base)
        ),
        (Some(tip), Some(at)) if tip == at => {
            format!(
                "task `{}`: `{}` is up to date at {}",
                f.task,
                f.ref_name,
                short(at)
            )
        }
        (Some(tip), _) if *tip == f.base => format!(
            "task `{}`: no commits on the task branch yet (at the base {})",
            f.task,
            short(tip)
        ),
        (Some(tip), _) => format!(
            "task `{}`: the branch is at {} and not fetched",
            f.task,
            short(tip)
        ),
    }
}

/// The record of task `task` of the repository at `workspace`.
///
/// Errors: [`TaskError::NoSuchTask`]; [`source::locate`]'s.
pub fn load_task(workspace: &Path, task: &str, state_root: &Path) -> Result<Vec<TaskRecord>> {
    let (root, key) = source::locate(workspace)?;
    if !valid_task_name(task) {
        return Err(TaskError::InvalidName {
            name: task.to_string(),
        });
    }
    let folder = tasks_root(state_root, &key).join(task);
    if !super::is_made(&folder) {
        return Err(TaskError::NoSuchTask {
            task: task.to_string(),
            workspace: root,
        });
    }
    let records = super::load_folder(&folder)?;
    // a task of the repository that was at this path before is not this one's
    if !records.iter().all(TaskRecord::same_repository) {
        return Err(TaskError::NoSuchTask {
            task: task.to_string(),
            workspace: root,
        });
    }
    Ok(records)
}

/// What `fetch --task` did: one repository's fetch (as before), or each repository's of a
/// multi-repository task.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Fetched {
    /// A single repository.
    One(Box<TaskFetch>),
    /// A multi-repository workspace, one per repository.
    Many {
        /// Each repository's fetch.
        repositories: Vec<TaskFetch>,
    },
}

impl Fetched {
    /// Lines for people, one per repository.
    pub fn lines(&self) -> String {
        match self {
            Fetched::One(f) => format!("{}\n", fetch_line(f)),
            Fetched::Many { repositories } => repositories
                .iter()
                .map(|f| format!("{}\n", fetch_line(f)))
                .collect(),
        }
    }
}

/// `devcell fetch --task NAME`: the task branch of each repository fetched into its
/// `refs/devcell/tasks/<task>`, within `budget` (`[handoff] fetch_back_max_bytes`, what is
/// copied; `fetch_back_max_inflated_bytes` and `fetch_back_max_object_bytes`, what the host
/// inflates).
///
/// Errors: [`load_task`]'s, the first [`fetch::fetch_within`] error (every repository is
/// tried).
pub fn fetch_task(
    workspace: &Path,
    task: &str,
    state_root: &Path,
    budget: &crate::handoff::container_git::FetchBudget,
) -> Result<Fetched> {
    let mut records = load_task(workspace, task, state_root)?;
    let multi = records[0].workspace.is_some();
    let results: Vec<_> = records
        .iter_mut()
        .map(|r| fetch::fetch_within(r, budget))
        .collect();
    let mut fetched = results.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(if multi {
        Fetched::Many {
            repositories: fetched,
        }
    } else {
        Fetched::One(Box::new(fetched.remove(0)))
    })
}

/// What `delete --task` removed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDeleted {
    /// The task.
    pub task: String,
    /// The clone removed (for a multi-repository workspace, the folder of its clones).
    pub clone: PathBuf,
    /// The fetched ref, kept in the user's repository (`null`: never fetched).
    pub kept_ref: Option<String>,
    /// The commit dropped unfetched (`--force`; `<repo>: <commit>` for each repository of a
    /// multi-repository workspace).
    pub dropped: Option<String>,
    /// The clone workspace's teardown (container, volumes, session state).
    pub teardown: crate::handoff::delete::DeleteResult,
}

/// `delete --task NAME`: takes the task's lock ([`TaskError::InUse`] while a handoff uses
/// it), refuses while a repository's branch has commits the user's repository does not hold
/// (unless `force`), then removes the task's container, volumes and session state
/// ([`crate::handoff::delete::delete_with`] of the clone), then the clones, records and lock.
/// The fetched refs stay.
///
/// Errors: [`TaskError::InUse`], [`TaskError::Unfetched`], [`TaskError::UnreadableRefs`],
/// [`load_task`]'s, the teardown's.
pub async fn delete_task(
    engine: &dyn Engine,
    workspace: &Path,
    task: &str,
    force: bool,
    state_root: &Path,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<TaskDeleted> {
    let (records, lock, dropped) = prepare_delete(workspace, task, force, state_root)?;
    remove_task(engine, records, lock, dropped, state_root, reporter).await
}

/// The part of [`delete_task`] before anything is removed: the records loaded, the task's lock
/// taken, the task judged deletable ([`check_deletable`]).
///
/// Errors: [`load_task`]'s, [`TaskError::InUse`], [`TaskError::Unfetched`],
/// [`TaskError::UnreadableRefs`].
pub fn prepare_delete(
    workspace: &Path,
    task: &str,
    force: bool,
    state_root: &Path,
) -> Result<(Vec<TaskRecord>, TaskLock, Option<String>)> {
    let records = match load_task(workspace, task, state_root) {
        Ok(records) => records,
        // no task of the repository at `workspace` (or no repository there): a task of the
        // one that was there before is removed too (`status --all` marks it)
        Err(
            e @ (TaskError::NoSuchTask { .. }
            | TaskError::Io(_)
            | TaskError::Refused {
                reason: "clone_not_a_repository",
                ..
            }),
        ) => left_task(workspace, task, state_root).ok_or(e)?,
        Err(e) => return Err(e),
    };
    let lock = TaskLock::take(&record_root(&records[0]), &records[0].task)?;
    let dropped = check_deletable(&records, force)?;
    Ok((records, lock, dropped))
}

/// The task `task` made from the repository (or multi-repository workspace) that was at
/// `workspace` and is replaced by another or gone since ([`RepositoryState`]): found by the
/// path its records name, under any key (a gone repository has no key to compute). `None`
/// for an invalid name or when there is no such task. Reads devcell's state only: nothing
/// at `workspace` is asked.
fn left_task(workspace: &Path, task: &str, state_root: &Path) -> Option<Vec<TaskRecord>> {
    if !valid_task_name(task) {
        return None;
    }
    let at = resolved(workspace);
    std::fs::read_dir(state_root.join("tasks"))
        .ok()?
        .flatten()
        .filter(|key| key.file_type().is_ok_and(|t| t.is_dir()))
        .map(|key| key.path().join(task))
        .filter(|folder| super::is_made(folder))
        .filter_map(|folder| super::load_folder(&folder).ok())
        .find(|records| {
            let owner = records[0].workspace.as_ref().unwrap_or(&records[0].source);
            *owner == at && RepositoryState::of(records) != RepositoryState::Present
        })
}

/// `path` canonical as far as it exists (a gone repository's path is compared with the
/// canonical path its task recorded), the rest joined as given.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => resolved(parent).join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// The tasks folder a record's task folder is in.
fn record_root(record: &TaskRecord) -> PathBuf {
    record
        .folder()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// `Ok(dropped)` when the task of `records` may be deleted (`dropped`: what `force` drops),
/// else the refusal of the first repository holding unfetched work.
fn check_deletable(records: &[TaskRecord], force: bool) -> Result<Option<String>> {
    let mut dropped = Vec::new();
    for record in records {
        let state = record.repository_state();
        if state != RepositoryState::Present {
            // the repository at its path is not the task's: judged by the clone alone
            let left = fetch::left_unfetched(record);
            match (left, force) {
                (Some(tip), false) => {
                    return Err(TaskError::LeftUnfetched {
                        task: record.task.clone(),
                        branch: record.branch.clone(),
                        repository: record.workspace.clone().unwrap_or(record.source.clone()),
                        state,
                        tip,
                        clone: record.clone.clone(),
                    });
                }
                (Some(tip), true) => dropped.push(match record.workspace {
                    Some(_) => format!("{}: {tip}", record.repo),
                    None => tip,
                }),
                (None, _) => {}
            }
            continue;
        }
        let not_fetched = fetch::unfetched(record);
        if let (Some(why), false) = (&not_fetched, force) {
            return Err(refusal(record, why));
        }
        if let Some(n) = not_fetched {
            let what = match n {
                fetch::NotFetched::Commits { tip, .. } => tip,
                fetch::NotFetched::Unreadable(why) => format!("(unreadable refs: {why})"),
            };
            dropped.push(match record.workspace {
                Some(_) => format!("{}: {what}", record.repo),
                None => what,
            });
        }
    }
    Ok((!dropped.is_empty()).then(|| dropped.join(", ")))
}

/// Removes a task whose lock is held and which was judged deletable: the clone workspace's
/// teardown, then the task folder, then the lock file.
async fn remove_task(
    engine: &dyn Engine,
    records: Vec<TaskRecord>,
    lock: TaskLock,
    dropped: Option<String>,
    state_root: &Path,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<TaskDeleted> {
    let record = &records[0];
    let teardown = crate::handoff::delete::delete_with(
        engine,
        &crate::handoff::delete::DeleteOptions::of_task(record.workspace_folder(), state_root),
        reporter,
    )
    .await?;
    let folder = record.folder();
    std::fs::remove_dir_all(&folder).map_err(io(&folder))?;
    super::mail::forget_channel(state_root, record);
    lock.remove();
    Ok(TaskDeleted {
        task: record.task.clone(),
        clone: record.workspace_folder(),
        // (the repository at a replaced one's path is not asked: it is not the task's)
        kept_ref: (RepositoryState::of(&records) == RepositoryState::Present
            && records.iter().any(|r| fetch::host_ref(r).is_some()))
        .then(|| fetched_ref_of(&record.task)),
        dropped,
        teardown,
    })
}

/// `delete` without `--task`: every task of the repository (or multi-repository workspace)
/// at `workspace` (none when it is neither or has none), all or nothing: every task's lock is
/// taken and every task judged before the first is removed, so one in use or with unfetched
/// commits (unless `force`) refuses the whole delete with nothing removed.
///
/// Errors: the first task's [`TaskError::InUse`], [`TaskError::Unfetched`] or
/// [`TaskError::UnreadableRefs`]; a teardown's.
pub async fn delete_all_tasks(
    engine: &dyn Engine,
    workspace: &Path,
    force: bool,
    state_root: &Path,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<Vec<TaskDeleted>> {
    // no task anywhere: no git asked about the workspace
    if std::fs::read_dir(state_root.join("tasks"))
        .map(|mut d| d.next().is_none())
        .unwrap_or(true)
    {
        return Ok(Vec::new());
    }
    let Ok((_, key)) = source::locate(workspace) else {
        return Ok(Vec::new());
    };
    let root = tasks_root(state_root, &key);
    let mut judged = Vec::new();
    for records in super::list_tasks(state_root, &key) {
        let lock = TaskLock::take(&root, &records[0].task)?;
        let dropped = check_deletable(&records, force)?;
        judged.push((records, lock, dropped));
    }
    let mut removed = Vec::new();
    for (records, lock, dropped) in judged {
        removed.push(remove_task(engine, records, lock, dropped, state_root, reporter).await?);
    }
    Ok(removed)
}

/// The refusal to delete `record` while its work is not in the user's repository.
fn refusal(record: &TaskRecord, why: &fetch::NotFetched) -> TaskError {
    match why {
        fetch::NotFetched::Commits { tip, host } => {
            // named when they can be listed; the refusal stands either way
            let (commits, total) = match fetch::unfetched_commits(record, tip, host.as_deref()) {
                Ok((commits, total)) => (commits, Some(total)),
                Err(_) => (Vec::new(), None),
            };
            TaskError::Unfetched {
                task: record.task.clone(),
                branch: record.branch.clone(),
                tip: tip.clone(),
                fetched: host.as_ref().map_or_else(
                    || {
                        format!(
                            "and `{}` is not in the repository",
                            fetched_ref_of(&record.task)
                        )
                    },
                    |f| format!("`{}` holds {}", fetched_ref_of(&record.task), short(f)),
                ),
                listed: Box::new(super::Unlisted { commits, total }),
            }
        }
        fetch::NotFetched::Unreadable(why) => TaskError::UnreadableRefs {
            task: record.task.clone(),
            clone: record.clone.clone(),
            why: why.clone(),
        },
    }
}

/// `delete --task` against the engine at `DOCKER_HOST`.
///
/// Errors: as [`delete_task`]; the engine's when none answers.
pub async fn delete(
    workspace: &Path,
    task: &str,
    force: bool,
    state: Option<&Path>,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<TaskDeleted> {
    let state = state_root(state)?;
    let engine = crate::engine::connect().await?;
    delete_task(&*engine, workspace, task, force, &state, reporter).await
}

/// What `delete` without `--task` removed: the workspace's teardown (its fields, as before)
/// and every clone task of the repository (`tasks`, absent when there was none).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceDeleted {
    /// The workspace's teardown.
    #[serde(flatten)]
    pub workspace: crate::handoff::delete::DeleteResult,
    /// The tasks removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskDeleted>,
}

/// `delete` without `--task` against the engine at `DOCKER_HOST`: [`delete_all_tasks`], then
/// the workspace's own teardown ([`crate::handoff::delete::delete_with`]).
///
/// Errors: as [`delete_all_tasks`] (nothing removed), then the teardown's; the engine's when
/// none answers.
pub async fn delete_workspace(
    opts: &crate::handoff::delete::DeleteOptions,
    force: bool,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<WorkspaceDeleted> {
    let engine = crate::engine::connect().await?;
    let state = state_root(opts.state_root.as_deref()).ok();
    let tasks = match &state {
        Some(state) => {
            delete_all_tasks(&*engine, &opts.workspace_folder, force, state, reporter).await?
        }
        None => Vec::new(),
    };
    let mut workspace = crate::handoff::delete::delete_with(&*engine, opts, reporter).await?;
    // the mail log is the workspace's history: kept, and named (spec-note 0534)
    workspace.kept.mail_log = state
        .as_deref()
        .and_then(|state| super::mail::log_of(&opts.workspace_folder, state));
    Ok(WorkspaceDeleted { workspace, tasks })
}

/// Every task of the repository (or multi-repository workspace, one entry per repository) at
/// `workspace` with its fetch state (ahead/behind counted in the user's repository); empty
/// when it is neither or has none.
pub fn statuses(workspace: &Path, state_root: &Path) -> Vec<TaskFetch> {
    let Ok((_, key)) = source::locate(workspace) else {
        return Vec::new();
    };
    super::list(state_root, &key)
        .iter()
        .map(|r| fetch::report(r, fetch::clone_tip(r), false))
        .collect()
}

#[cfg(test)]
mod tests;
