//! Results back by host fetch (spec-note 0437): the task branch's commit read from the clone as
//! data (no git ever runs with the clone's configuration, hooks or attributes, which are the
//! container's), its objects copied into a bare repository devcell makes, and fetched from there
//! into `refs/devcell/tasks/<task>` of the user's repository with object checking
//! ([`crate::handoff::container_git::import_refs`], shared with the container git directory's
//! fetch-back). Only that ref is written: the user's `HEAD`, index, working files and branches
//! are untouched.

use super::{Result, TaskError, TaskRecord, fetched_ref_of, git};
use crate::handoff::container_git::{HostRepo, import_refs, read_refs};

pub use crate::handoff::session::TaskFetch;

/// The task branch's commit in the clone, read as data (`None`: missing, unreadable, or the
/// clone's `.git` is not a plain folder any more).
pub fn clone_tip(record: &TaskRecord) -> Option<String> {
    let hex = if record.object_format == "sha256" {
        64
    } else {
        40
    };
    let refs = read_refs(&record.clone.join(".git"), hex).ok()?;
    refs.get(&format!("refs/heads/{}", record.branch)).cloned()
}

/// Fetches the task branch into the user's repository (see the module docs) and records the
/// fetched commit in `record`.
///
/// Errors: [`TaskError::FetchBack`] when the clone's objects cannot be read or the host fetch
/// fails (its object checking refused them included); [`TaskError::Git`]; [`TaskError::Io`].
pub fn fetch(record: &mut TaskRecord) -> Result<TaskFetch> {
    let tip = clone_tip(record);
    let mut updated = false;
    if let Some(tip) = tip.as_ref().filter(|t| record.fetched.as_ref() != Some(*t)) {
        let host = HostRepo {
            work_tree: &record.source,
            git_dir: &record.source_git_dir,
            common_dir: &record.source_git_dir,
        };
        let branch_ref = format!("refs/heads/{}", record.branch);
        let refspec = format!("+{branch_ref}:{}", fetched_ref_of(&record.task));
        let (imported, _) = import_refs(
            &record.clone.join(".git"),
            &host,
            &record.object_format,
            &[(branch_ref, tip.clone())],
            &refspec,
        )?;
        if imported.is_empty() {
            return Err(TaskError::Git {
                dir: record.clone.clone(),
                args: format!("update-ref {}", record.branch),
                stderr: format!(
                    "the branch's commit {tip} or an object it needs is missing from the clone"
                ),
            });
        }
        let now = host_ref(record);
        if now.as_deref() != Some(tip.as_str()) {
            return Err(TaskError::Git {
                dir: record.source.clone(),
                args: format!("fetch {}", fetched_ref_of(&record.task)),
                stderr: format!("the ref holds {now:?} after the fetch, not {tip}"),
            });
        }
        record.fetched = Some(tip.clone());
        record.fetched_at = Some(chrono::Utc::now().to_rfc3339());
        record.save()?;
        updated = true;
    }
    Ok(report(record, tip, updated))
}

/// The fetched ref's commit in the user's repository.
pub fn host_ref(record: &TaskRecord) -> Option<String> {
    git(
        &record.source,
        Some(&record.source_git_dir),
        &[],
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &fetched_ref_of(&record.task),
        ],
    )
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
}

/// What [`fetch`] reports, for `status` too: ahead/behind counted in the user's repository.
pub fn report(record: &TaskRecord, tip: Option<String>, updated: bool) -> TaskFetch {
    let count = |range: String| {
        git(
            &record.source,
            Some(&record.source_git_dir),
            &[],
            &["rev-list", "--count", &range],
        )
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let at = record
        .fetched
        .clone()
        .unwrap_or_else(|| record.base.clone());
    TaskFetch {
        task: record.task.clone(),
        ref_name: fetched_ref_of(&record.task),
        tip,
        fetched: record.fetched.clone(),
        updated,
        base: record.base.clone(),
        ahead: record
            .fetched
            .as_ref()
            .map_or(Some(0), |f| count(format!("{}..{f}", record.base))),
        behind: count(format!("{at}..HEAD")),
    }
}

/// Whether the clone's task branch holds commits never fetched: its tip is neither the base
/// nor the fetched commit.
pub fn unfetched(record: &TaskRecord) -> Option<String> {
    let tip = clone_tip(record)?;
    (tip != record.base && record.fetched.as_ref() != Some(&tip)).then_some(tip)
}
