//! Results back by host fetch (spec-note 0437): the task branch's commit read from the clone as
//! data (no git ever runs with the clone's configuration, hooks or attributes, which are the
//! container's), its objects copied into a bare repository devcell makes, and fetched from there
//! into `refs/devcell/tasks/<task>` of the user's repository with object checking
//! ([`crate::handoff::container_git::import_refs`], shared with the container git directory's
//! fetch-back). Only that ref is written: the user's `HEAD`, index, working files and branches
//! are untouched.

use crate::handoff::failure::GitFailed;
use std::path::Path;

use super::{Result, TaskError, TaskRecord, fetched_ref_of, git, kept_ref_of};
use crate::handoff::container_git::{ContainerGitError, FetchBudget, HostRepo, import_refs};

pub use crate::handoff::session::TaskFetch;

/// The most of a clone's `packed-refs` devcell reads (bytes).
const PACKED_REFS_MAX: u64 = 256 << 20;

/// The task branch in the clone, read as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tip {
    /// No such branch: neither a loose ref nor a `packed-refs` line names it.
    Missing,
    /// The branch's commit.
    At(String),
    /// The branch, or the files that would hold it, cannot be read as git writes them (a link
    /// at any step, a FIFO, a file devcell may not read, a value that is not an object name, a
    /// `.git` that is no folder): what is wrong. Never counted as fetched (spec-note 0437).
    Unreadable(String),
}

/// Reads the task branch of the clone as data (no git runs in it): the loose ref
/// `refs/heads/devcell/<task>`, else its `packed-refs` line, every step opened without
/// following a link and without waiting on a FIFO. Anything but a clean absence or an object
/// name of the record's format is [`Tip::Unreadable`].
pub fn read_tip(record: &TaskRecord) -> Tip {
    let hex = if record.object_format == "sha256" {
        64
    } else {
        40
    };
    let valid = |oid: &str| oid.len() == hex && crate::handoff::container_git::is_oid(oid);
    let full = format!("refs/heads/{}", record.branch);
    let parts: Vec<&str> = std::iter::once(".git").chain(full.split('/')).collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return Tip::Unreadable(format!("`{full}` is not a plain ref name"));
    }
    let shown = |rel: &[&str]| record.clone.join(rel.join("/")).display().to_string();
    match open_no_follow(&record.clone, &parts, 4096) {
        Ok(Some(bytes)) => {
            let text = String::from_utf8_lossy(&bytes);
            let oid = text.trim();
            return if valid(oid) {
                Tip::At(oid.to_ascii_lowercase())
            } else {
                Tip::Unreadable(format!(
                    "`{}` holds no object name (a symbolic ref or junk)",
                    shown(&parts)
                ))
            };
        }
        Ok(None) => {}
        Err(e) => return Tip::Unreadable(format!("`{}`: {e}", shown(&parts))),
    }
    let packed = [".git", "packed-refs"];
    let bytes = match open_no_follow(&record.clone, &packed, PACKED_REFS_MAX) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Tip::Missing,
        Err(e) => return Tip::Unreadable(format!("`{}`: {e}", shown(&packed))),
    };
    let text = String::from_utf8_lossy(&bytes);
    for line in text.lines() {
        if let Some((oid, name)) = line.split_once(' ')
            && name == full
        {
            return if valid(oid) {
                Tip::At(oid.to_ascii_lowercase())
            } else {
                Tip::Unreadable(format!(
                    "`{}` names `{full}` with no object name",
                    shown(&packed)
                ))
            };
        }
    }
    Tip::Missing
}

/// Reads at most `max` bytes of the regular file `root/<parts…>`, opening every step (the
/// first included) without following a link and the file without waiting on a FIFO: `None`
/// when a step is missing.
///
/// Errors: a link (`ELOOP`), a step that is no folder, a file that is not regular, cannot be
/// read, or is larger than `max`.
fn open_no_follow(root: &Path, parts: &[&str], max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use rustix::fs::{Mode, OFlags};
    let Some((leaf, folders)) = parts.split_last() else {
        return Ok(None);
    };
    let missing = |e: &rustix::io::Errno| *e == rustix::io::Errno::NOENT;
    let mut fd = match rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) if missing(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    for part in folders {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        fd = match rustix::fs::openat(&fd, *part, flags, Mode::empty()) {
            Ok(next) => next,
            Err(e) if missing(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(&fd, *leaf, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) if missing(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    crate::config::hostgit::read_regular(file, max).map(Some)
}

/// The task branch's commit in the clone ([`read_tip`]; `None`: missing or unreadable).
pub fn clone_tip(record: &TaskRecord) -> Option<String> {
    match read_tip(record) {
        Tip::At(tip) => Some(tip),
        Tip::Missing | Tip::Unreadable(_) => None,
    }
}

/// [`fetch_within`] the default budget (`[handoff] fetch_back_max_bytes` unset).
///
/// Errors: as [`fetch_within`].
pub fn fetch(record: &mut TaskRecord) -> Result<TaskFetch> {
    fetch_within(record, &FetchBudget::default())
}

/// Fetches the task branch into the user's repository (see the module docs) and records the
/// fetched commit in `record`, copying at most `budget.copied` bytes of the clone's objects and
/// bringing none the host would inflate past `budget` (spec-note 0438).
///
/// Errors: [`TaskError::OverBudget`] and [`TaskError::OverInflated`] (nothing fetched, nothing
/// of the user's repository changed); [`TaskError::FetchBack`] when the clone's objects cannot be read or the host fetch
/// fails (its object checking refused them included); [`TaskError::Git`]; [`TaskError::Io`].
pub fn fetch_within(record: &mut TaskRecord, budget: &FetchBudget) -> Result<TaskFetch> {
    let tip = match read_tip(record) {
        Tip::At(tip) => Some(tip),
        Tip::Missing => None,
        Tip::Unreadable(why) => {
            return Err(TaskError::UnreadableRefs {
                task: record.task.clone(),
                clone: record.clone.clone(),
                why,
            });
        }
    };
    let mut updated = false;
    let mut kept = None;
    // fetched means the user's repository holds the tip under the task ref now: a record
    // that says so is not enough (the ref may have been deleted since)
    let host_now = host_ref(record);
    if let Some(tip) = tip.as_ref().filter(|t| host_now.as_ref() != Some(*t)) {
        let host = HostRepo {
            work_tree: &record.source,
            git_dir: &record.source_git_dir,
            common_dir: &record.source_git_dir,
        };
        // over the budget: refused before anything of the user's repository is written (the
        // copy stops at the budget too, should the clone grow meanwhile)
        let size = crate::handoff::container_git::objects_size(&record.clone.join(".git"));
        if size > budget.copied {
            let over = TaskError::OverBudget {
                task: record.task.clone(),
                clone: record.clone.clone(),
                size,
                budget: budget.copied,
            };
            return Err(refused(record, over));
        }
        // Kept before the forced update, so a killed devcell loses nothing either; dropped
        // again below when the new tip still contains it.
        let before = host_now.clone();
        if let Some(old) = &before {
            keep(record, old)?;
        }
        let branch_ref = format!("refs/heads/{}", record.branch);
        let refspec = format!("+{branch_ref}:{}", fetched_ref_of(&record.task));
        let imported = import_refs(
            &record.clone.join(".git"),
            &host,
            &record.object_format,
            &[(branch_ref, tip.clone())],
            &refspec,
            budget,
        )
        .map_err(|e| over_budget(record, e));
        let (imported, _) = match imported {
            Ok(imported) => imported,
            Err(e) => return Err(refused(record, e)),
        };
        if imported.is_empty() {
            return Err(TaskError::Git(GitFailed {
                dir: record.clone.clone(),
                args: format!("update-ref {}", record.branch),
                stderr: format!(
                    "the branch's commit {tip} or an object it needs is missing from the clone"
                ),
            }));
        }
        let now = host_ref(record);
        if now.as_deref() != Some(tip.as_str()) {
            return Err(TaskError::Git(GitFailed {
                dir: record.source.clone(),
                args: format!("fetch {}", fetched_ref_of(&record.task)),
                stderr: format!("the ref holds {now:?} after the fetch, not {tip}"),
            }));
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
        record.refused = None;
        record.save()?;
        updated = true;
    }
    let mut fetched = report(record, tip, updated);
    fetched.kept = kept;
    Ok(fetched)
}

/// `e`, remembered in the record as why the fetch was refused when it is a budget's refusal
/// (`status` says so until a fetch brings the branch back; best effort: the record is only
/// evidence).
fn refused(record: &mut TaskRecord, e: TaskError) -> TaskError {
    if matches!(
        e,
        TaskError::OverBudget { .. } | TaskError::OverInflated { .. }
    ) {
        record.refused = Some(e.to_string());
        let _ = record.save();
    }
    e
}

/// The staging's error, a budget overrun named as the task's.
fn over_budget(record: &TaskRecord, e: ContainerGitError) -> TaskError {
    match e {
        ContainerGitError::OverInflated { why, .. } => TaskError::OverInflated {
            task: record.task.clone(),
            clone: record.clone.clone(),
            why,
        },
        ContainerGitError::OverBudget { size, budget, .. } => TaskError::OverBudget {
            task: record.task.clone(),
            clone: record.clone.clone(),
            size,
            budget,
        },
        other => other.into(),
    }
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

/// What [`fetch`] reports, for `status` too: the commit the task ref holds in the user's
/// repository now, ahead/behind counted there.
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
    let fetched = host_ref(record);
    let at = fetched.clone().unwrap_or_else(|| record.base.clone());
    let refused = record
        .refused
        .clone()
        .filter(|_| tip.is_some() && fetched != tip);
    TaskFetch {
        task: record.task.clone(),
        repo: record.workspace.as_ref().map(|_| record.repo.clone()),
        ref_name: fetched_ref_of(&record.task),
        tip,
        ahead: fetched
            .as_ref()
            .map_or(Some(0), |f| count(format!("{}..{f}", record.base))),
        fetched,
        updated,
        base: record.base.clone(),
        behind: count(format!("{at}..HEAD")),
        kept: None,
        refused,
    }
}

/// At most this many unfetched commits are named (`delete`'s refusal says how many more).
pub const UNFETCHED_NAMED: usize = 20;

/// The commits of the clone's branch at `tip` that the user's repository holds neither under
/// the task ref (`host`) nor as the base: `<short sha> <subject>` newest first, at most
/// [`UNFETCHED_NAMED`], and how many there are in all. Read as data: the clone's objects are
/// copied into a bare repository devcell makes ([`crate::handoff::container_git::stage_objects`])
/// and git runs only there; subjects are made terminal-safe (the agent wrote them).
///
/// Errors: the staging's; a failing host git (a tip whose objects are missing).
pub fn unfetched_commits(
    record: &TaskRecord,
    tip: &str,
    host: Option<&str>,
) -> Result<(Vec<String>, u64)> {
    use crate::formats::terminal::{Sgr, printable};
    let repo = HostRepo {
        work_tree: &record.source,
        git_dir: &record.source_git_dir,
        common_dir: &record.source_git_dir,
    };
    let (_guard, staged, _) = crate::handoff::container_git::stage_objects(
        &record.clone.join(".git"),
        &repo,
        &record.object_format,
        &FetchBudget::default(),
    )?;
    // object names only (read as such): `^` excludes, after `--end-of-options`
    let mut range = vec![tip.to_string(), format!("^{}", record.base)];
    range.extend(host.map(|h| format!("^{h}")));
    let in_staged = |args: &[&str]| git(&staged, Some(&staged), &[], args);
    let mut count_args = vec!["rev-list", "--count", "--end-of-options"];
    count_args.extend(range.iter().map(String::as_str));
    let total = in_staged(&count_args)?.trim().parse::<u64>().unwrap_or(0);
    let max = format!("--max-count={UNFETCHED_NAMED}");
    let mut log_args = vec![
        "log",
        "--no-decorate",
        "--format=%h %s",
        &max,
        "--end-of-options",
    ];
    log_args.extend(range.iter().map(String::as_str));
    let listed = in_staged(&log_args)?;
    let named = listed
        .lines()
        .map(|l| printable(l, Sgr::Escape).into_owned())
        .collect();
    Ok((named, total))
}

/// Why deleting the task would lose work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotFetched {
    /// The branch is at `tip`, neither the base nor what the user's repository holds under the
    /// task ref (never fetched, or the ref was lost since).
    Commits {
        /// The branch's commit in the clone.
        tip: String,
        /// What the task ref holds now.
        host: Option<String>,
    },
    /// The clone's refs cannot be read ([`Tip::Unreadable`]): what is wrong.
    Unreadable(String),
}

/// Whether the clone's task branch holds work the user's repository does not: its tip is
/// neither the base nor the commit the task ref holds now, or it cannot be read. A missing
/// branch holds nothing that would leave the clone.
pub fn unfetched(record: &TaskRecord) -> Option<NotFetched> {
    match read_tip(record) {
        Tip::Missing => None,
        Tip::Unreadable(why) => Some(NotFetched::Unreadable(why)),
        Tip::At(tip) => {
            if tip == record.base {
                return None;
            }
            let host = host_ref(record);
            (host.as_deref() != Some(tip.as_str())).then_some(NotFetched::Commits { tip, host })
        }
    }
}

/// What removing the task of `record`, whose repository is replaced or gone, would lose: the
/// clone branch's commit when it is not the base (no repository can hold it: the one it was
/// fetched into, if ever, is not at its path), or what makes its refs unreadable. Asks no
/// repository at the source path.
pub fn left_unfetched(record: &TaskRecord) -> Option<String> {
    match read_tip(record) {
        Tip::Missing => None,
        Tip::At(tip) => (tip != record.base).then_some(tip),
        Tip::Unreadable(why) => Some(format!("(unreadable refs: {why})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::handoff::task::test_git::{commit, plain_git, record_for};

    /// `[handoff] fetch_back_max_bytes`: a clone whose objects are over the budget is refused
    /// before anything of the user's repository is written (the refs, the objects, `HEAD` and
    /// the config as they were; no kept ref for the commit fetched before), naming the size,
    /// the budget and the setting; within a budget of that size the branch comes back.
    #[test]
    fn a_clone_over_the_fetch_back_budget_is_refused_and_the_repository_is_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let (source, clone, mut record) = task_with_clone(tmp.path());
        let first = commit(&clone, "b");
        fetch(&mut record).unwrap();
        // 256 KiB that do not compress, committed by the agent
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: Vec<u8> = (0..256 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(clone.join("big"), noise).unwrap();
        plain_git(&clone, &["add", "big"]);
        plain_git(&clone, &["commit", "-qm", "big"]);
        let tip = plain_git(&clone, &["rev-parse", "HEAD"]);
        let size = crate::handoff::container_git::objects_size(&clone.join(".git"));
        assert!(size > 256 * 1024, "{size}");
        let host = || {
            let mut objects: Vec<String> = walkdir(&source.join(".git/objects"));
            objects.sort();
            (
                plain_git(&source, &["for-each-ref"]),
                objects,
                std::fs::read(source.join(".git/HEAD")).unwrap(),
                std::fs::read(source.join(".git/config")).unwrap(),
            )
        };
        let before = host();

        let refused = fetch_within(&mut record, &FetchBudget::copying(size - 1)).unwrap_err();
        let TaskError::OverBudget {
            size: said, budget, ..
        } = &refused
        else {
            panic!("{refused:?}")
        };
        assert_eq!((*said, *budget), (size, size - 1));
        let message = refused.to_string();
        assert!(message.contains(&size.to_string()), "{message}");
        assert!(message.contains("fetch_back_max_bytes"), "{message}");
        use crate::ops::error::ProductError as _;
        assert_eq!(refused.code().as_str(), "permission_required");
        let details = refused.details();
        assert_eq!(details["reason"], "fetch_over_budget");
        assert_eq!(details["setting"], "handoff.fetch_back_max_bytes");
        assert!(refused.hint().unwrap().contains("devcell fetch --task t"));
        assert!(host() == before, "the user's repository changed");
        assert_eq!(host_ref(&record).as_deref(), Some(first.as_str()));
        assert_eq!(record.fetched.as_deref(), Some(first.as_str()));

        let got = fetch_within(&mut record, &FetchBudget::copying(size)).unwrap();
        assert_eq!(got.fetched.as_deref(), Some(tip.as_str()));
    }

    /// A source repository with one commit, its clone (`--no-local`: its own objects) on the
    /// task branch, and the record.
    fn task_with_clone(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf, TaskRecord) {
        cloned_task(tmp, &["--no-local"])
    }

    /// As [`task_with_clone`], the clone made with `clone_args` (`[]`: its objects hard
    /// linked).
    fn cloned_task(
        tmp: &Path,
        clone_args: &[&str],
    ) -> (std::path::PathBuf, std::path::PathBuf, TaskRecord) {
        let source = tmp.join("src");
        std::fs::create_dir(&source).unwrap();
        plain_git(&source, &["init", "-q"]);
        let base = commit(&source, "a");
        std::fs::create_dir(tmp.join("task")).unwrap();
        let clone = tmp.join("task/src");
        let args = [&["clone", "-q"][..], clone_args, &["src", "task/src"]].concat();
        plain_git(tmp, &args);
        plain_git(&clone, &["checkout", "-qb", "devcell/t"]);
        let record = record_for(&source, &clone, &base);
        (source, clone, record)
    }

    /// What of the user's repository a refused fetch must leave as it was: its refs, object
    /// files, `HEAD` and config.
    fn host_state(source: &Path) -> (String, Vec<String>, Vec<u8>, Vec<u8>) {
        let mut objects: Vec<String> = walkdir(&source.join(".git/objects"));
        objects.sort();
        (
            plain_git(source, &["for-each-ref"]),
            objects,
            std::fs::read(source.join(".git/HEAD")).unwrap(),
            std::fs::read(source.join(".git/config")).unwrap(),
        )
    }

    /// Attack H3 (spec-note 0438): the copy budget counts compressed bytes, but a loose object
    /// of a few KB is megabytes of blob (here 4 MiB of zeros is 4 KB on disk, well inside
    /// `fetch_back_max_bytes`). Over `fetch_back_max_object_bytes` the fetch is refused naming
    /// the object and its inflated size; over `fetch_back_max_inflated_bytes` (all the new
    /// objects together) too; nothing of the user's repository changes; within both it comes
    /// back. The objects the user's repository already has (the clone's history) never count.
    #[test]
    fn an_object_larger_inflated_than_the_budget_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (source, clone, mut record) = task_with_clone(tmp.path());
        std::fs::write(clone.join("big"), vec![0u8; 4 << 20]).unwrap();
        plain_git(&clone, &["add", "big"]);
        plain_git(&clone, &["commit", "-qm", "big"]);
        let tip = plain_git(&clone, &["rev-parse", "HEAD"]);
        let blob = plain_git(&clone, &["rev-parse", "HEAD:big"]);
        let on_disk = crate::handoff::container_git::objects_size(&clone.join(".git"));
        let before = host_state(&source);
        use crate::ops::error::ProductError as _;

        let per_object = FetchBudget {
            object: 1 << 20,
            ..FetchBudget::default()
        };
        assert!(on_disk < per_object.copied);
        let refused = fetch_within(&mut record, &per_object).unwrap_err();
        let TaskError::OverInflated { why, .. } = &refused else {
            panic!("{refused:?}")
        };
        assert_eq!(
            why,
            &crate::handoff::container_git::OverInflated::Object {
                oid: blob.clone(),
                size: 4 << 20,
                limit: 1 << 20
            }
        );
        let message = refused.to_string();
        assert!(message.contains(&blob), "{message}");
        assert!(message.contains("fetch_back_max_object_bytes"), "{message}");
        assert_eq!(refused.code().as_str(), "permission_required");
        assert_eq!(refused.details()["reason"], "fetch_inflated_over_budget");
        assert_eq!(
            refused.details()["setting"],
            "handoff.fetch_back_max_object_bytes"
        );
        assert!(refused.hint().unwrap().contains("devcell fetch --task t"));
        assert!(
            host_state(&source) == before,
            "the user's repository changed"
        );
        assert_eq!(host_ref(&record), None);
        assert_eq!(record.fetched, None);
        // `status` says why (from the saved record)
        let saved = TaskRecord::load(&record.folder()).unwrap();
        let said = report(&saved, Some(tip.clone()), false).refused.unwrap();
        assert!(said.contains(&blob), "{said}");

        let total = FetchBudget {
            inflated: 2 << 20,
            ..FetchBudget::default()
        };
        let refused = fetch_within(&mut record, &total).unwrap_err();
        let TaskError::OverInflated { why, .. } = &refused else {
            panic!("{refused:?}")
        };
        let crate::handoff::container_git::OverInflated::Total { size, count, limit } = why else {
            panic!("{why:?}")
        };
        // the blob, its tree and its commit: the clone's history is the user's already
        assert_eq!((*count, *limit), (3, 2 << 20));
        assert!(*size > 4 << 20 && *size < (4 << 20) + 4096, "{size}");
        assert!(
            host_state(&source) == before,
            "the user's repository changed"
        );

        let got = fetch_within(&mut record, &FetchBudget::default()).unwrap();
        assert_eq!(got.fetched.as_deref(), Some(tip.as_str()));
        assert_eq!(got.refused, None);
        assert_eq!(record.refused, None);
    }

    /// A pack entry in git's pack format (`kind` 3 a blob, 7 a delta on the object `base`),
    /// its data compressed.
    fn pack_entry(kind: u8, size: u64, base: Option<&[u8]>, data: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut out = vec![(kind << 4) | (size & 0x0f) as u8];
        let mut rest = size >> 4;
        while rest > 0 {
            *out.last_mut().unwrap() |= 0x80;
            out.push((rest & 0x7f) as u8);
            rest >>= 7;
        }
        out.extend_from_slice(base.unwrap_or_default());
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).unwrap();
        out.extend(z.finish().unwrap());
        out
    }

    /// A delta's size varint.
    fn delta_size(mut n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    /// Attack H3's second reproduction, smaller: a pack of a few KB the agent wrote by hand
    /// (a 1 MiB zero blob and a delta on it of 2-byte copy instructions, each copying the whole
    /// base, whose result is 16 MiB) is refused from the delta's own header, before the host
    /// fetches (and so before its `index-pack` would hold the 16 MiB): the refusal names the
    /// delta's object and its size; the user's repository is untouched.
    #[test]
    fn a_delta_bomb_pack_is_refused_before_the_host_inflates_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (source, clone, mut record) = task_with_clone(tmp.path());
        let base_len: u64 = 1 << 20;
        let copies: u64 = 16;
        let zeros = tmp.path().join("zeros");
        std::fs::write(&zeros, vec![0u8; base_len as usize]).unwrap();
        let base_oid = plain_git(tmp.path(), &["hash-object", "zeros"]);
        std::fs::write(&zeros, vec![0u8; (base_len * copies) as usize]).unwrap();
        let bomb_oid = plain_git(tmp.path(), &["hash-object", "zeros"]);
        let hex = |h: &str| -> Vec<u8> {
            (0..h.len() / 2)
                .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        };
        let mut delta = delta_size(base_len);
        delta.extend(delta_size(base_len * copies));
        for _ in 0..copies {
            // copy from offset 0, only the size's third byte: 0x10 << 16 = 1 MiB
            delta.extend([0x80 | 0x40, 0x10]);
        }
        let mut pack = b"PACK".to_vec();
        pack.extend(2u32.to_be_bytes());
        pack.extend(2u32.to_be_bytes());
        pack.extend(pack_entry(3, base_len, None, &vec![0u8; base_len as usize]));
        pack.extend(pack_entry(
            7,
            delta.len() as u64,
            Some(&hex(&base_oid)),
            &delta,
        ));
        let raw = tmp.path().join("bomb.pack");
        std::fs::write(&raw, &pack).unwrap();
        let sum = std::process::Command::new("sha1sum")
            .arg(&raw)
            .output()
            .unwrap();
        let sum = String::from_utf8_lossy(&sum.stdout);
        pack.extend(hex(sum.split_whitespace().next().unwrap()));
        std::fs::write(&raw, &pack).unwrap();
        assert!(pack.len() < 8192, "{}", pack.len());
        // the agent's own git indexes it in the clone
        let out = std::process::Command::new("git")
            .args(["index-pack", "--stdin"])
            .current_dir(&clone)
            .stdin(std::fs::File::open(&raw).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let info = format!("100644,{bomb_oid},big");
        plain_git(&clone, &["update-index", "--add", "--cacheinfo", &info]);
        plain_git(&clone, &["commit", "-qm", "bomb"]);
        let before = host_state(&source);

        let budget = FetchBudget {
            object: 4 << 20,
            ..FetchBudget::default()
        };
        let refused = fetch_within(&mut record, &budget).unwrap_err();
        let TaskError::OverInflated { why, .. } = &refused else {
            panic!("{refused:?}")
        };
        assert_eq!(
            why,
            &crate::handoff::container_git::OverInflated::Object {
                oid: bomb_oid.clone(),
                size: base_len * copies,
                limit: 4 << 20
            }
        );
        assert!(
            host_state(&source) == before,
            "the user's repository changed"
        );
        assert_eq!(host_ref(&record), None);
    }

    /// Every file below `dir`, as paths relative to it.
    fn walkdir(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else {
                    let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
                    out.push(rel.display().to_string());
                }
            }
        }
        out
    }

    /// The agent rewrites its branch after a fetch: the forced update of the task ref keeps
    /// the commit fetched before under `refs/devcell/kept/tasks/…` (it would otherwise be
    /// unreachable and lost to the next gc); a fast-forward keeps nothing.
    #[test]
    fn a_rewritten_task_branch_never_makes_a_fetched_commit_unreachable() {
        let tmp = tempfile::tempdir().unwrap();
        let (source, clone, mut record) = cloned_task(tmp.path(), &[]);
        let base = record.base.clone();
        let first = commit(&clone, "b");
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

    /// "Fetched" means the user's repository holds the clone's tip under the task ref now: a
    /// task ref lost on the host (the record still says fetched) counts as unfetched and is
    /// fetched again; refs in the clone that cannot be read as git writes them (a link to a
    /// ref, a linked `refs/heads/devcell`, a FIFO, junk, a linked or junk `packed-refs`, a
    /// linked `.git`) never count as fetched, so `delete` refuses, and fetch writes nothing.
    #[test]
    fn a_lost_task_ref_or_unreadable_refs_never_count_as_fetched() {
        let tmp = tempfile::tempdir().unwrap();
        let (source, clone, mut record) = cloned_task(tmp.path(), &[]);
        let first = commit(&clone, "b");
        fetch(&mut record).unwrap();
        assert_eq!(unfetched(&record), None);
        assert_eq!(
            report(&record, None, false).fetched.as_deref(),
            Some(first.as_str())
        );

        // the task ref lost on the host: not fetched any more, and fetched again
        plain_git(&source, &["update-ref", "-d", &fetched_ref_of("t")]);
        assert_eq!(record.fetched.as_deref(), Some(first.as_str()));
        assert_eq!(
            unfetched(&record),
            Some(NotFetched::Commits {
                tip: first.clone(),
                host: None
            })
        );
        assert_eq!(report(&record, None, false).fetched, None);
        let again = fetch(&mut record).unwrap();
        assert!(again.updated);
        assert_eq!(host_ref(&record).as_deref(), Some(first.as_str()));
        assert_eq!(unfetched(&record), None);

        // an unfetched commit, then the refs made unreadable in every way
        let second = commit(&clone, "c");
        let dot_git = clone.join(".git");
        let loose = dot_git.join("refs/heads/devcell/t");
        let set_loose = |text: &str| {
            let _ = std::fs::remove_file(&loose);
            std::fs::write(&loose, text).unwrap();
        };
        let unreadable = |record: &mut TaskRecord, what: &str| {
            assert!(
                matches!(read_tip(record), Tip::Unreadable(_)),
                "{what}: {:?}",
                read_tip(record)
            );
            assert!(
                matches!(unfetched(record), Some(NotFetched::Unreadable(_))),
                "{what}"
            );
            assert!(
                matches!(fetch(record), Err(TaskError::UnreadableRefs { .. })),
                "{what}"
            );
            assert_eq!(host_ref(record).as_deref(), Some(first.as_str()), "{what}");
        };
        std::fs::remove_file(&loose).unwrap();
        std::os::unix::fs::symlink(dot_git.join("refs/heads/main"), &loose).unwrap();
        unreadable(&mut record, "a loose ref linked to another");
        std::fs::remove_file(&loose).unwrap();
        std::os::unix::fs::symlink("/nonexistent/ref", &loose).unwrap();
        unreadable(&mut record, "a dangling link");
        std::fs::remove_file(&loose).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, &loose, rustix::fs::Mode::from(0o600)).unwrap();
        unreadable(&mut record, "a FIFO");
        set_loose("junk\n");
        unreadable(&mut record, "junk");
        set_loose("ref: refs/heads/main\n");
        unreadable(&mut record, "a symbolic ref");
        let devcell = dot_git.join("refs/heads/devcell");
        let aside = dot_git.join("refs/aside");
        std::fs::rename(&devcell, &aside).unwrap();
        std::os::unix::fs::symlink(&aside, &devcell).unwrap();
        unreadable(&mut record, "a linked `refs/heads/devcell`");
        std::fs::remove_file(&devcell).unwrap();
        std::fs::rename(&aside, &devcell).unwrap();

        // packed: read when it is a plain file, unreadable when linked or junk
        set_loose(&format!("{second}\n"));
        plain_git(&clone, &["pack-refs", "--all"]);
        assert!(!loose.exists());
        assert_eq!(read_tip(&record), Tip::At(second.clone()));
        assert!(matches!(
            unfetched(&record),
            Some(NotFetched::Commits { .. })
        ));
        let packed = dot_git.join("packed-refs");
        let text = std::fs::read_to_string(&packed).unwrap();
        std::fs::write(&packed, text.replace(&format!("{second} "), "0123456789 ")).unwrap();
        unreadable(&mut record, "a junk `packed-refs` line");
        let elsewhere = tmp.path().join("packed-refs");
        std::fs::write(&elsewhere, &text).unwrap();
        std::fs::remove_file(&packed).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &packed).unwrap();
        unreadable(&mut record, "a linked `packed-refs`");
        std::fs::remove_file(&packed).unwrap();
        std::fs::write(&packed, &text).unwrap();
        assert_eq!(read_tip(&record), Tip::At(second.clone()));

        // a `.git` swapped for a link to a real git directory
        let real = tmp.path().join("real-git");
        std::fs::rename(&dot_git, &real).unwrap();
        std::os::unix::fs::symlink(&real, &dot_git).unwrap();
        unreadable(&mut record, "a linked `.git`");
        std::fs::remove_file(&dot_git).unwrap();
        std::fs::rename(&real, &dot_git).unwrap();

        // readable again: fetched as it should be
        fetch(&mut record).unwrap();
        assert_eq!(host_ref(&record).as_deref(), Some(second.as_str()));
        assert_eq!(unfetched(&record), None);
    }
}
