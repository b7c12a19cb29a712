//! Orphaned clone tasks (spec-note 0437): task folders in devcell's state that no handoff can
//! use any more. `doctor` lists them ([`find`]); `prune --tasks` removes them ([`prune`]),
//! never one whose clone holds commits the user's repository does not, nor one in use.
//!
//! An orphan is a task folder
//! - with no record (`no_record`: a devcell killed while making the task, before any
//!   container saw it; records are written durably, so a missing one was never written),
//! - with a record devcell cannot read (`record_unreadable`: listed, never removed, since
//!   nothing says what its clone holds),
//! - whose clone is gone (`clone_gone`: nothing left to fetch), or
//! - whose source repository is gone (`repository_gone`: its common git directory is no
//!   repository any more, or a new one was made at its path, so nothing can be fetched into it).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::fetch;
use super::lock::TaskLock;
use super::{RepositoryState, TaskError, TaskRecord, io};
use crate::engine::Engine;
use crate::progress::Reporter;

/// One orphaned task folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrphanTask {
    /// The task folder (`<state>/tasks/<key>/<task>`).
    pub folder: PathBuf,
    /// The task's name (the folder's).
    pub task: String,
    /// The repository it was cloned from, when its record says.
    pub source: Option<PathBuf>,
    /// `no_record`, `record_unreadable`, `clone_gone` or `repository_gone`.
    pub reason: &'static str,
    /// What is wrong, for people.
    pub message: String,
    /// Commits removing it would lose: the clone branch's commit when it is not the base (the
    /// repository is gone: nothing can hold it), or what makes its refs unreadable.
    pub unfetched: Option<String>,
}

/// Every orphaned task folder under `<state_root>/tasks`, by folder.
pub fn find(state_root: &Path) -> Vec<OrphanTask> {
    let mut out = Vec::new();
    for key in entries(&state_root.join("tasks")) {
        for folder in entries(&key) {
            if let Some(orphan) = judge(&folder) {
                out.push(orphan);
            }
        }
    }
    out.sort_by(|a, b| a.folder.cmp(&b.folder));
    out
}

/// The folders (not links, not lock files) in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    super::subfolders(dir).map(|e| e.path()).collect()
}

/// Whether the task folder `folder` is an orphan, and why.
fn judge(folder: &Path) -> Option<OrphanTask> {
    let task = folder.file_name()?.to_string_lossy().into_owned();
    let orphan = |source, reason, message: String, unfetched| OrphanTask {
        folder: folder.to_path_buf(),
        task: task.clone(),
        source,
        reason,
        message,
        unfetched,
    };
    let records = match super::load_folder(folder) {
        Ok(records) => records,
        // written durably, so a record that exists but cannot be read is no half-made task:
        // its clone may hold the agent's commits, and nothing says where they belong
        Err(e) if super::is_made(folder) => {
            return Some(orphan(
                None,
                "record_unreadable",
                format!(
                    "task folder `{}` has a record devcell cannot read ({e})",
                    folder.display()
                ),
                None,
            ));
        }
        Err(e) => {
            return Some(orphan(
                None,
                "no_record",
                format!(
                    "task folder `{}` has no readable record ({e}): left half made",
                    folder.display()
                ),
                None,
            ));
        }
    };
    // a multi-repository task is judged by its first orphaned repository
    records
        .iter()
        .find_map(|record| judge_record(folder, &task, record))
}

/// Whether the repository of `record` in the task folder `folder` makes it an orphan.
fn judge_record(folder: &Path, task: &str, record: &TaskRecord) -> Option<OrphanTask> {
    let orphan = |source, reason, message: String, unfetched| OrphanTask {
        folder: folder.to_path_buf(),
        task: task.to_string(),
        source,
        reason,
        message,
        unfetched,
    };
    if record.folder() != folder || !record.clone.is_dir() {
        return Some(orphan(
            Some(record.source.clone()),
            "clone_gone",
            format!(
                "task `{task}` of `{}`: its clone `{}` is gone",
                record.source.display(),
                record.clone.display()
            ),
            None,
        ));
    }
    if record.repository_state() != RepositoryState::Present {
        return Some(orphan(
            Some(record.source.clone()),
            "repository_gone",
            format!(
                "task `{task}`: its repository `{}` is gone (or was replaced by another)",
                record.source.display()
            ),
            fetch::left_unfetched(record),
        ));
    }
    None
}

/// An orphan `prune --tasks` left in place, and why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptOrphan {
    /// The orphan.
    #[serde(flatten)]
    pub orphan: OrphanTask,
    /// Why it was kept.
    pub kept_because: String,
}

/// What `prune --tasks` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPruneResult {
    /// `--dry-run`: nothing was removed, `removed` is what would be.
    pub dry_run: bool,
    /// The orphans removed.
    pub removed: Vec<OrphanTask>,
    /// The orphans kept.
    pub kept: Vec<KeptOrphan>,
    /// The mirrors no task uses any more, removed (or that would be), after the orphans.
    pub mirrors: Vec<PathBuf>,
}

/// An orphan [`prune`] may remove, with its lock held.
pub type Removable = (OrphanTask, TaskLock);

/// The orphans `prune --tasks` may remove, each with its lock held, and those it keeps: one in
/// use (its lock is held elsewhere) or that would lose commits ([`OrphanTask::unfetched`]).
///
/// Errors: a lock file that cannot be made.
pub fn plan(state_root: &Path) -> super::Result<(Vec<Removable>, Vec<KeptOrphan>)> {
    let mut removable = Vec::new();
    let mut kept = Vec::new();
    for orphan in find(state_root) {
        let root = orphan.folder.parent().unwrap_or(state_root).to_path_buf();
        let lock = match TaskLock::take(&root, &orphan.task) {
            Ok(lock) => lock,
            Err(TaskError::InUse { .. }) => {
                kept.push(KeptOrphan {
                    orphan,
                    kept_because: "in use by another devcell".into(),
                });
                continue;
            }
            Err(e) => return Err(e),
        };
        // judged again under the lock: a handoff may have finished making it meanwhile
        let Some(orphan) = judge(&orphan.folder) else {
            continue;
        };
        if orphan.reason == "record_unreadable" {
            let kept_because = format!(
                "its record cannot be read, so devcell cannot tell what its clone holds: look at `{}`, then remove the folder",
                orphan.folder.display()
            );
            kept.push(KeptOrphan {
                orphan,
                kept_because,
            });
            continue;
        }
        if let Some(commits) = &orphan.unfetched {
            let kept_because = format!(
                "its clone holds commits never fetched ({commits}): copy them out of `{}`, then remove the folder",
                orphan.folder.display()
            );
            kept.push(KeptOrphan {
                orphan,
                kept_because,
            });
            continue;
        }
        removable.push((orphan, lock));
    }
    Ok((removable, kept))
}

/// `prune --tasks`: the removable orphans of [`plan`] removed (the container, volumes and
/// session state of a clone a record names, then the task folder and its lock); `dry_run`
/// removes nothing.
///
/// Errors: [`plan`]'s; a teardown's; a folder that cannot be removed.
pub async fn prune(
    engine: &dyn Engine,
    state_root: &Path,
    dry_run: bool,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<TaskPruneResult> {
    let (removable, kept) = plan(state_root)?;
    let mut removed = Vec::new();
    for (orphan, lock) in removable {
        if !dry_run {
            let record = super::load_folder(&orphan.folder)
                .ok()
                .and_then(|r| r.into_iter().next());
            if let Some(record) = &record {
                crate::handoff::delete::delete_with(
                    engine,
                    // what comes back goes into the orphan's clone, removed next
                    &crate::handoff::delete::DeleteOptions::of_task(
                        record.workspace_folder(),
                        state_root,
                    ),
                    reporter,
                )
                .await?;
            }
            std::fs::remove_dir_all(&orphan.folder).map_err(io(&orphan.folder))?;
            if let Some(record) = &record {
                super::mail::forget_channel(state_root, record);
            }
            lock.remove();
        }
        removed.push(orphan);
    }
    let mirrors = match super::run::cache_root() {
        Ok(cache) => super::mirror::prune_unused(&cache, state_root, dry_run)?,
        Err(_) => Vec::new(),
    };
    Ok(TaskPruneResult {
        dry_run,
        removed,
        kept,
        mirrors,
    })
}

/// `prune --tasks` against the engine at `DOCKER_HOST`, in the default state folder.
///
/// Errors: as [`prune`]; no state folder; the engine's when none answers.
pub async fn prune_tasks(
    dry_run: bool,
    reporter: &dyn Reporter,
) -> crate::ops::error::Result<TaskPruneResult> {
    let state = super::run::state_root(None)?;
    let engine = crate::engine::connect().await?;
    prune(&*engine, &state, dry_run, reporter).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::plan::HandoffOptions;

    use crate::handoff::task::test_git::plain_git;

    fn repo(dir: &Path) {
        std::fs::create_dir(dir).unwrap();
        plain_git(dir, &["init", "-q"]);
        std::fs::write(dir.join("a"), "a").unwrap();
        plain_git(dir, &["add", "a"]);
        plain_git(dir, &["commit", "-qm", "a"]);
    }

    /// A half-made task, a task whose clone is gone and tasks whose repository is gone (or was
    /// replaced by a new one at its path) are orphans; a healthy task is not. Of those whose repository is gone, the one whose clone
    /// holds a commit never fetched is never prunable.
    #[test]
    fn orphaned_task_folders_are_found_and_those_with_unfetched_commits_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (state, cache) = (base.join("state"), base.join("cache"));
        let quiet = crate::progress::NoopReporter;
        let open = |source: &Path, task: &str| {
            let opts = HandoffOptions {
                agent: "a".into(),
                task: Some(task.into()),
                workspace_folder: source.to_path_buf(),
                ..HandoffOptions::default()
            };
            super::super::run::open_task(&opts, &state, &cache, &quiet)
                .unwrap()
                .0
                .remove(0)
        };
        let kept_repo = base.join("kept");
        repo(&kept_repo);
        let healthy = open(&kept_repo, "healthy");
        let half = open(&kept_repo, "half");
        std::fs::remove_file(half.path()).unwrap();
        let cloneless = open(&kept_repo, "cloneless");
        std::fs::remove_dir_all(&cloneless.clone).unwrap();
        let gone_repo = base.join("gone");
        repo(&gone_repo);
        let clean = open(&gone_repo, "clean");
        let worked = open(&gone_repo, "worked");
        std::fs::write(worked.clone.join("b"), "b").unwrap();
        plain_git(&worked.clone, &["add", "b"]);
        plain_git(&worked.clone, &["commit", "-qm", "b"]);
        std::fs::remove_dir_all(&gone_repo).unwrap();
        // a repository removed and made again at the same path: another repository
        let replaced_repo = base.join("replaced");
        repo(&replaced_repo);
        open(&replaced_repo, "replaced");
        std::fs::remove_dir_all(&replaced_repo).unwrap();
        repo(&replaced_repo);

        let found = find(&state);
        let by_task = |t: &str| found.iter().find(|o| o.task == t);
        assert!(by_task(&healthy.task).is_none(), "{found:?}");
        assert_eq!(by_task("half").unwrap().reason, "no_record");
        assert_eq!(by_task("cloneless").unwrap().reason, "clone_gone");
        assert_eq!(by_task("clean").unwrap().reason, "repository_gone");
        assert_eq!(by_task("clean").unwrap().unfetched, None);
        let w = by_task("worked").unwrap();
        assert_eq!(w.reason, "repository_gone");
        assert!(w.unfetched.is_some(), "{w:?}");
        assert_eq!(by_task("replaced").unwrap().reason, "repository_gone");
        assert_eq!(found.len(), 5, "{found:?}");
        assert_eq!(clean.folder(), by_task("clean").unwrap().folder);

        // what prune would do: `worked` kept (a commit nothing holds), `half` kept while a
        // devcell holds it, the others removable
        let held = TaskLock::take(half.folder().parent().unwrap(), "half").unwrap();
        let (removable, kept) = plan(&state).unwrap();
        let mut names: Vec<&str> = removable.iter().map(|(o, _)| o.task.as_str()).collect();
        names.sort();
        assert_eq!(names, ["clean", "cloneless", "replaced"]);
        let mut kept_names: Vec<(&str, bool)> = kept
            .iter()
            .map(|k| {
                (
                    k.orphan.task.as_str(),
                    k.kept_because.contains("never fetched"),
                )
            })
            .collect();
        kept_names.sort();
        assert_eq!(kept_names, [("half", false), ("worked", true)]);
        drop((removable, held));
        assert!(worked.clone.join("b").is_file(), "planning removes nothing");
    }

    /// Attack (spec-note 0400, F8): a task whose record exists but cannot be read (cut short
    /// by a crash, or junk) is listed and never pruned, its clone's commits kept; a record is
    /// written whole through a synced temporary file, which leaves nothing behind.
    #[test]
    fn a_task_whose_record_cannot_be_read_is_reported_and_never_pruned() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let (state, cache) = (base.join("state"), base.join("cache"));
        let source = base.join("repo");
        repo(&source);
        let opts = HandoffOptions {
            agent: "a".into(),
            task: Some("cut".into()),
            workspace_folder: source.clone(),
            ..HandoffOptions::default()
        };
        let quiet = crate::progress::NoopReporter;
        let record = super::super::run::open_task(&opts, &state, &cache, &quiet)
            .unwrap()
            .0
            .remove(0);
        let names = |dir: &Path| {
            let mut n: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        assert!(
            !names(&record.folder()).iter().any(|n| n.starts_with('.')),
            "a temporary file left: {:?}",
            names(&record.folder())
        );
        std::fs::write(record.path(), b"{\"task\": \"cut\", \"clo").unwrap();
        std::fs::write(record.clone.join("work"), "w").unwrap();

        let found = find(&state);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].reason, "record_unreadable");
        let (removable, kept) = plan(&state).unwrap();
        assert!(removable.is_empty(), "removable: {removable:?}");
        assert_eq!(kept.len(), 1);
        assert!(kept[0].kept_because.contains("cannot be read"), "{kept:?}");
        assert!(record.clone.join("work").is_file());
    }
}
