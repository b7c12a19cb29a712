//! Results back by host fetch (spec-note 0437): the task branch's commit read from the clone as
//! data (no git ever runs with the clone's configuration, hooks or attributes, which are the
//! container's), its objects copied into a bare repository devcell makes, and fetched from there
//! into `refs/devcell/tasks/<task>` of the user's repository with object checking
//! ([`crate::handoff::container_git::import_refs`], shared with the container git directory's
//! fetch-back). Only that ref is written: the user's `HEAD`, index, working files and branches
//! are untouched.

use super::{Result, TaskError, TaskRecord, fetched_ref_of, git, kept_ref_of};
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
    let mut kept = None;
    if let Some(tip) = tip.as_ref().filter(|t| record.fetched.as_ref() != Some(*t)) {
        let host = HostRepo {
            work_tree: &record.source,
            git_dir: &record.source_git_dir,
            common_dir: &record.source_git_dir,
        };
        // Kept before the forced update, so a killed devcell loses nothing either; dropped
        // again below when the new tip still contains it.
        let before = host_ref(record);
        if let Some(old) = &before {
            keep(record, old)?;
        }
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
        if let Some(old) = &before {
            if contains(record, tip, old) {
                unkeep(record, old);
            } else {
                kept = Some(kept_ref_of(&record.task, old));
            }
        }
        record.fetched = Some(tip.clone());
        record.fetched_at = Some(chrono::Utc::now().to_rfc3339());
        record.save()?;
        updated = true;
    }
    let mut fetched = report(record, tip, updated);
    fetched.kept = kept;
    Ok(fetched)
}

/// Points [`kept_ref_of`] at `old` in the user's repository.
fn keep(record: &TaskRecord, old: &str) -> Result<()> {
    git(
        &record.source,
        Some(&record.source_git_dir),
        &[],
        &["update-ref", &kept_ref_of(&record.task, old), old],
    )
    .map(drop)
}

/// Removes [`kept_ref_of`] for `old` (best effort: a ref left is only a spare name).
fn unkeep(record: &TaskRecord, old: &str) {
    let _ = git(
        &record.source,
        Some(&record.source_git_dir),
        &[],
        &["update-ref", "-d", &kept_ref_of(&record.task, old)],
    );
}

/// Whether `tip` contains `old` (`merge-base --is-ancestor`, in the user's repository).
fn contains(record: &TaskRecord, tip: &str, old: &str) -> bool {
    git(
        &record.source,
        Some(&record.source_git_dir),
        &[],
        &["merge-base", "--is-ancestor", old, tip],
    )
    .is_ok()
}

/// The fetched ref's commit in the user's repository.
pub fn host_ref(record: &TaskRecord) -> Option<String> {
    super::git_quick(
        &record.source,
        Some(&record.source_git_dir),
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
    // `HEAD` in the source working tree's own git directory: a linked worktree's (the base
    // was resolved there too)
    let count = |range: String| {
        super::git_quick(
            &record.source,
            Some(record.head_git_dir()),
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
        kept: None,
    }
}

/// Whether the clone's task branch holds commits never fetched: its tip is neither the base
/// nor the fetched commit.
pub fn unfetched(record: &TaskRecord) -> Option<String> {
    let tip = clone_tip(record)?;
    (tip != record.base && record.fetched.as_ref() != Some(&tip)).then_some(tip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn plain_git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c"])
            .arg("init.defaultBranch=main")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn commit(dir: &Path, name: &str) -> String {
        std::fs::write(dir.join(name), name).unwrap();
        plain_git(dir, &["add", name]);
        plain_git(dir, &["commit", "-qm", name]);
        plain_git(dir, &["rev-parse", "HEAD"])
    }

    /// The agent rewrites its branch after a fetch: the forced update of the task ref keeps
    /// the commit fetched before under `refs/devcell/kept/tasks/…` (it would otherwise be
    /// unreachable and lost to the next gc); a fast-forward keeps nothing.
    #[test]
    fn a_rewritten_task_branch_never_makes_a_fetched_commit_unreachable() {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("src");
        std::fs::create_dir(&source).unwrap();
        plain_git(&source, &["init", "-q"]);
        let base = commit(&source, "a");
        let folder = tmp.path().join("task");
        std::fs::create_dir(&folder).unwrap();
        let clone = folder.join("src");
        plain_git(tmp.path(), &["clone", "-q", "src", "task/src"]);
        plain_git(&clone, &["checkout", "-qb", "devcell/t"]);
        let first = commit(&clone, "b");
        let mut record = TaskRecord {
            task: "t".into(),
            source: source.clone(),
            source_git_dir: source.join(".git"),
            source_head_git_dir: None,
            repo: "src".into(),
            clone: clone.clone(),
            branch: "devcell/t".into(),
            base_ref: "HEAD".into(),
            base: base.clone(),
            object_format: "sha1".into(),
            fetched: None,
            fetched_at: None,
            created_at: "2026-12-03T00:00:00Z".into(),
        };
        let got = fetch(&mut record).unwrap();
        assert_eq!(host_ref(&record).as_deref(), Some(first.as_str()));
        assert_eq!(got.kept, None);

        plain_git(&clone, &["reset", "-q", "--hard", &base]);
        let rewritten = commit(&clone, "c");
        let got = fetch(&mut record).unwrap();
        assert_eq!(host_ref(&record).as_deref(), Some(rewritten.as_str()));
        let kept = kept_ref_of("t", &first);
        assert_eq!(got.kept.as_deref(), Some(kept.as_str()));
        assert_eq!(plain_git(&source, &["rev-parse", &kept]), first);

        let forward = commit(&clone, "d");
        let got = fetch(&mut record).unwrap();
        assert_eq!(host_ref(&record).as_deref(), Some(forward.as_str()));
        assert_eq!(got.kept, None);
        let refs = plain_git(
            &source,
            &["for-each-ref", "--format=%(refname)", "refs/devcell/kept"],
        );
        assert_eq!(refs, kept, "only the rewritten commit is kept");
    }
}
