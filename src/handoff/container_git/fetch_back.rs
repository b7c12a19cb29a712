//! [`ContainerGitDir::fetch_back`]: the agent's commits brought back into the host repository,
//! branches only ever moved forward, everything else kept aside and reported.

use std::collections::{BTreeMap, BTreeSet};

use super::dir::ContainerGitDir;
use super::host_git::{
    adds_gitlink, checked_out_elsewhere, host_git, host_refs, is_ancestor, read_head, run_git,
    uncovered_gitlinks,
};
use super::import::import_refs;
use super::inflated::FetchBudget;
use super::names::{host_remotes, reads_as_another_name};
use super::refs::read_refs;
use super::report::{Base, FetchBack, KeptReason, KeptRef, RefUpdate};
use super::{ContainerGitError, HostRepo, MAX_CHANGED_REFS, NAMESPACE, Result};
use crate::config::hostgit;
use crate::security::registries::BEFORE_AGENT;

impl ContainerGitDir {
    /// Brings the agent's commits back into the host repository `host` (see the module docs):
    /// never runs git with the container git directory's configuration; reads its loose
    /// objects, packs and ref values as data into a fresh bare repository devcell configures,
    /// and fetches from there with `transfer.fsckObjects` into `refs/devcell/<session>/…`.
    /// Then a new branch is created, a branch the host left where the handoff found it and the
    /// agent moved forward is fast-forwarded, and anything else is kept aside (the host ref
    /// untouched). The host `HEAD` follows the agent's checkout of another existing branch when
    /// the user did not move it; the host index is reset to a `HEAD` whose commit devcell
    /// changed (mixed: the working tree is never touched). Nothing happens before a
    /// [`ContainerGitDir::refresh`]. The base is updated, so a second call brings back only
    /// what changed since.
    ///
    /// Errors: files that cannot be read or written, git failures, too many changed refs. A
    /// failure leaves the host's branches as they were (only `refs/devcell/…` may have been
    /// written).
    pub fn fetch_back(&self, host: &HostRepo<'_>, session: &str) -> Result<FetchBack> {
        self.fetch_back_within(host, session, &FetchBudget::default())
    }

    /// [`ContainerGitDir::fetch_back`] within `budget` (what is copied and what the host
    /// inflates, spec-note 0438).
    ///
    /// Errors: as [`ContainerGitDir::fetch_back`]; [`ContainerGitError::OverBudget`] and
    /// [`ContainerGitError::OverInflated`] (nothing fetched, the host's refs as they were).
    pub fn fetch_back_within(
        &self,
        host: &HostRepo<'_>,
        session: &str,
        budget: &FetchBudget,
    ) -> Result<FetchBack> {
        let Some(mut base) = self.base()? else {
            return Ok(FetchBack::default());
        };
        let dir = self.git_dir();
        let hex_len = if base.object_format == "sha256" {
            64
        } else {
            40
        };
        let theirs = read_refs(&dir, hex_len)?;
        let their_head = hostgit::read_no_follow(&dir.join("HEAD"), 4096)
            .ok()
            .map(|h| String::from_utf8_lossy(&h).trim().to_string())
            .filter(|h| hostgit::valid_head(h));
        let changed: Vec<(String, String)> = theirs
            .iter()
            .filter(|(n, v)| base.refs.get(*n) != Some(*v))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        if changed.len() > MAX_CHANGED_REFS {
            return Err(ContainerGitError::TooManyRefs { path: dir });
        }
        let deleted: Vec<String> = base
            .refs
            .keys()
            .filter(|n| !theirs.contains_key(*n))
            .cloned()
            .collect();
        let mut report = FetchBack::default();
        let namespace = format!("{NAMESPACE}/{session}");
        let imported = if changed.is_empty() {
            Vec::new()
        } else {
            self.import(host, (&base, budget), &changed, &namespace, &mut report)?
        };
        let mut host_refs = host_refs(host)?;
        let covered = self.covered_submodules();
        // the branches the host has checked out (when the handoff began, and now): a commit
        // with a gitlink devcell did not cover never becomes theirs
        let host_head = read_head(host)?;
        let checked_out: Vec<&str> = [base.head.as_str(), host_head.as_str()]
            .iter()
            .filter_map(|h| h.strip_prefix("ref: "))
            .collect();
        let rules = Rules {
            host,
            checked_out,
            elsewhere: checked_out_elsewhere(host),
            covered: &covered,
            remotes: host_remotes(host),
        };
        for (name, value) in &imported {
            let kept_as = format!("{namespace}/{}", name.trim_start_matches("refs/"));
            match rules.judge(&base, &host_refs, name, value, &kept_as)? {
                Ok(update) => {
                    if move_host_ref(host, &update, &kept_as, hex_len) {
                        record_before_agent(host, &update, base.head_commit.as_ref(), hex_len);
                        host_refs.insert(name.clone(), value.clone());
                        if update.old.is_some() {
                            report.fast_forwarded.push(update);
                        } else {
                            report.created.push(update);
                        }
                    } else {
                        let kept = KeptRef {
                            name: name.clone(),
                            value: Some(value.clone()),
                            kept_as: Some(kept_as),
                            reason: KeptReason::Conflict,
                        };
                        record_kept_before_agent(host, &kept, &base, hex_len);
                        report.kept.push(kept);
                    }
                }
                Err(kept) => {
                    record_kept_before_agent(host, &kept, &base, hex_len);
                    report.kept.push(kept);
                }
            }
            base.refs.insert(name.clone(), value.clone());
        }
        for name in deleted {
            report.kept.push(KeptRef {
                name: name.clone(),
                value: None,
                kept_as: None,
                reason: KeptReason::Deleted,
            });
            base.refs.remove(&name);
        }
        self.follow_head(
            host,
            &mut base,
            (their_head.as_deref(), &covered),
            &host_refs,
            &mut report,
        )?;
        self.write_base(&base)?;
        Ok(report)
    }

    /// Copies the container's objects into a fresh bare repository devcell configures, points
    /// the changed refs at them there (git refuses a missing object), and fetches those into
    /// `namespace` in the host repository with object checking. Returns the refs fetched;
    /// refused ones are reported as [`KeptReason::Invalid`].
    fn import(
        &self,
        host: &HostRepo<'_>,
        (base, budget): (&Base, &FetchBudget),
        changed: &[(String, String)],
        namespace: &str,
        report: &mut FetchBack,
    ) -> Result<Vec<(String, String)>> {
        let (imported, refused) = import_refs(
            &self.git_dir(),
            host,
            &base.object_format,
            changed,
            &format!("+refs/*:{namespace}/*"),
            budget,
        )?;
        report
            .kept
            .extend(refused.into_iter().map(|(name, value)| KeptRef {
                name,
                value: Some(value),
                kept_as: None,
                reason: KeptReason::Invalid,
            }));
        Ok(imported)
    }

    /// Moves the host `HEAD` to the branch the container checked out (when it exists on the
    /// host now and the user left `HEAD` where the handoff found it), then resets the host
    /// index to `HEAD` when devcell changed its commit. Neither happens when the new commit
    /// has a gitlink at a path not in `covered` (the submodule folders the session covered):
    /// that is kept aside as [`KeptReason::UncoveredSubmodule`] (spec-note 0436).
    fn follow_head(
        &self,
        host: &HostRepo<'_>,
        base: &mut Base,
        (their_head, covered): (Option<&str>, &std::collections::BTreeSet<String>),
        host_refs: &BTreeMap<String, String>,
        report: &mut FetchBack,
    ) -> Result<()> {
        let host_head = read_head(host)?;
        if host_head != base.head {
            // the user moved HEAD during the handoff: theirs to keep
            return Ok(());
        }
        let uncovered = |commit: &str| -> Result<bool> {
            Ok(!uncovered_gitlinks(host, commit, covered)?.is_empty())
        };
        if let Some(branch) = their_head
            .and_then(|h| h.strip_prefix("ref: "))
            .filter(|b| b.starts_with("refs/heads/") && host_refs.contains_key(*b))
            && their_head != Some(base.head.as_str())
        {
            if checked_out_elsewhere(host).contains(branch) {
                report.kept.push(KeptRef {
                    name: "HEAD".into(),
                    value: their_head.map(str::to_string),
                    kept_as: None,
                    reason: KeptReason::CheckedOutElsewhere,
                });
                return Ok(());
            }
            if uncovered(&host_refs[branch])? {
                report.kept.push(KeptRef {
                    name: "HEAD".into(),
                    value: their_head.map(str::to_string),
                    kept_as: None,
                    reason: KeptReason::UncoveredSubmodule,
                });
                return Ok(());
            }
            host_git(host, host.git_dir, &["symbolic-ref", "HEAD", branch])?;
            report.head_moved_to = Some(branch.to_string());
            base.head = format!("ref: {branch}");
        }
        let commit = base
            .head
            .strip_prefix("ref: ")
            .map_or_else(|| Some(base.head.clone()), |b| host_refs.get(b).cloned());
        let devcell_moved = report.head_moved_to.is_some()
            || base.head.strip_prefix("ref: ").is_some_and(|b| {
                report
                    .fast_forwarded
                    .iter()
                    .chain(&report.created)
                    .any(|u| u.name == b)
            });
        if devcell_moved
            && let Some(new) = commit.as_deref()
            && commit != base.head_commit
            && !uncovered(new)?
        {
            // `--no-refresh`: no file of the working tree (the agent's) is re-read, so no
            // filter a `.gitattributes` there names runs
            let mut reset = hostgit::command(host.work_tree, &[]);
            reset
                .env("GIT_DIR", host.git_dir)
                .env("GIT_WORK_TREE", host.work_tree)
                .args(["reset", "--quiet", "--mixed", "--no-refresh"]);
            run_git(reset, host.work_tree, "reset --mixed")?;
            report.index_reset = true;
        }
        base.head_commit = commit;
        Ok(())
    }
}

/// What decides whether an imported ref moves the host's: the branches the host has checked
/// out (when the handoff began, and now), those checked out in its other worktrees, and the
/// gitlink paths this session covered, and the host's remote names.
struct Rules<'a> {
    host: &'a HostRepo<'a>,
    checked_out: Vec<&'a str>,
    elsewhere: BTreeSet<String>,
    covered: &'a BTreeSet<String>,
    /// The host's remote names ([`host_remotes`]; `None`: unreadable).
    remotes: Option<BTreeSet<String>>,
}

impl Rules<'_> {
    /// The host update the agent's `value` of `name` makes, or why it is kept aside at
    /// `kept_as`: a branch the host left where `base` recorded it, not checked out elsewhere,
    /// adding no gitlink (nor, when checked out, one not covered), moved forward, or created
    /// under a name git cannot read as anything else ([`reads_as_another_name`]).
    fn judge(
        &self,
        base: &Base,
        host_refs: &BTreeMap<String, String>,
        name: &str,
        value: &str,
        kept_as: &str,
    ) -> Result<std::result::Result<RefUpdate, KeptRef>> {
        let host = self.host;
        let was = base.refs.get(name);
        let now = host_refs.get(name);
        let keep = |reason| KeptRef {
            name: name.to_string(),
            value: Some(value.to_string()),
            kept_as: Some(kept_as.to_string()),
            reason,
        };
        Ok(if !name.starts_with("refs/heads/") {
            Err(keep(KeptReason::NotABranch))
        } else if was != now {
            Err(keep(KeptReason::MovedOnHost))
        } else if self.elsewhere.contains(name) {
            Err(keep(KeptReason::CheckedOutElsewhere))
        } else if adds_gitlink(host, was.or(base.head_commit.as_ref()), value)? {
            Err(keep(KeptReason::AddsSubmodule))
        } else if self.checked_out.contains(&name)
            && !uncovered_gitlinks(host, value, self.covered)?.is_empty()
        {
            Err(keep(KeptReason::UncoveredSubmodule))
        } else if was.is_none() && reads_as_another_name(name, self.remotes.as_ref(), host_refs) {
            Err(keep(KeptReason::ShadowsRef))
        } else if let Some(old) = was {
            if is_ancestor(host, old, value)? {
                Ok(RefUpdate {
                    name: name.to_string(),
                    old: Some(old.clone()),
                    new: value.to_string(),
                })
            } else {
                Err(keep(KeptReason::Rewritten))
            }
        } else {
            Ok(RefUpdate {
                name: name.to_string(),
                old: None,
                new: value.to_string(),
            })
        })
    }
}

/// Records the commit the user had before the agent's commits came into the branch of
/// `update`, at [`BEFORE_AGENT`]`/heads/<branch>`: its old value, or for a new branch the
/// host `HEAD`'s commit when the handoff began (`head_commit`), or, in a repository that had
/// no commit, the empty tree. Written only when absent, so it stays at the user's commit through later
/// sessions until the user deletes it; the registry judgement reads the committed side there
/// too (attack K12, spec-note 0400). A record git refuses is not written: the fetch-back goes
/// on.
fn record_before_agent(
    host: &HostRepo<'_>,
    update: &RefUpdate,
    head_commit: Option<&String>,
    hex_len: usize,
) {
    let Some(short) = update.name.strip_prefix("refs/") else {
        return;
    };
    // a repository with no commit before the agent: the record is the empty tree (the user
    // had no file), so no committed version names a registry host (spec-note 0467)
    let empty_tree;
    let user = match update.old.as_ref().or(head_commit) {
        Some(user) => user,
        None => match host_git(host, host.common_dir, &["mktree"]) {
            Ok(tree) => {
                empty_tree = tree.trim().to_string();
                &empty_tree
            }
            Err(_) => return,
        },
    };
    let record = format!("{BEFORE_AGENT}/{short}");
    let absent = "0".repeat(hex_len);
    let _ = host_git(
        host,
        host.common_dir,
        &[
            "update-ref",
            "-m",
            "devcell: before the agent",
            &record,
            user,
            &absent,
        ],
    );
}

/// Records, for a ref kept aside at `refs/devcell/<session>/…`, the commit the user had before
/// (the ref's value when the handoff began, else the host `HEAD`'s), at
/// [`BEFORE_AGENT`]`/devcell/<session>/…`, as [`record_before_agent`] does for a branch: the
/// repository then has a record, so a `HEAD` the user checks out at the kept commit is read
/// with the user's version below it, and one below no record counts as the agent's
/// (spec-note 0467).
fn record_kept_before_agent(host: &HostRepo<'_>, kept: &KeptRef, base: &Base, hex_len: usize) {
    let (Some(kept_as), Some(value)) = (&kept.kept_as, &kept.value) else {
        return;
    };
    let update = RefUpdate {
        name: kept_as.clone(),
        old: base.refs.get(&kept.name).cloned(),
        new: value.clone(),
    };
    record_before_agent(host, &update, base.head_commit.as_ref(), hex_len);
}

/// Applies `update` to the host ref (only if it still holds the old value) and removes the
/// copy kept at `kept_as`; `false` when git refuses the name next to the host's refs
/// (`main/x` beside `main`): kept aside, so one ref never stops this or any later fetch-back
/// (spec-note 0400, attacks F4).
fn move_host_ref(host: &HostRepo<'_>, update: &RefUpdate, kept_as: &str, hex_len: usize) -> bool {
    let zero = "0".repeat(hex_len);
    let old = update.old.clone().unwrap_or(zero);
    if host_git(
        host,
        host.common_dir,
        &[
            "update-ref",
            "-m",
            "devcell: agent",
            &update.name,
            &update.new,
            &old,
        ],
    )
    .is_err()
    {
        return false;
    }
    let _ = host_git(host, host.common_dir, &["update-ref", "-d", kept_as]);
    true
}
