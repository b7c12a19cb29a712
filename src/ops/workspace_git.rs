//! Under `hardened`, a plain `up` binds every git directory below the workspace read-only on
//! itself (spec-note 0446, attack M7): the primary `.git`, nested repositories, `.git` files,
//! folders laid out as git directories. Otherwise a lifecycle hook (the repository's
//! `postCreateCommand`, hostile by devcell's threat model) writes `.git/config`
//! (`core.fsmonitor`) or `.git/commondir`, and the user's next `git status` on the host runs it.
//!
//! The judgement is a handoff's ([`crate::security::git_cover`]); the binds become
//! [`UpOptions::mounts`] and [`UpOptions::covers`], so every other bind of the workspace (a
//! second bind, a Compose service's `..:/workspaces`) repeats them and a reused container made
//! without them is refused, as for a handoff. What cannot be covered is refused before anything
//! runs ([`crate::security::SecurityError::UncoveredGit`]) unless accepted with
//! `--allow uncovered-git:<path>`; `--allow workspace-git:rw` leaves them all writable (today's
//! behaviour, for users who commit inside the container), with a warning. Under `reference`
//! nothing changes.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::diagnostics::Warning;
use crate::engine::{Mount, MountKind};
use crate::ops::bring_up::UpResult;
use crate::ops::error::Result;
use crate::ops::options::UpOptions;
use crate::ops::permissions::UpChoice;
use crate::progress::{Event, Reporter};
use crate::security::SecurityProfile;
use crate::security::git_baseline;
use crate::security::git_cover::{self, Known, Plan, Walk};
use crate::security::git_quarantine;

/// Where the covers are bound when no workspace mount shows the root (a Compose configuration,
/// `"workspaceMount": ""`): outside the workspace; every bind of the root repeats them there.
const DETACHED_ROOT: &str = "/run/devcell/workspace-git";

/// `opts` with the workspace's git directories covered (see the module docs), and the warnings
/// to add to the result (an accepted uncovered entry, the `workspace-git:rw` grant). The notice
/// of what is read-only goes to `reporter` as a status line.
///
/// Errors: [`crate::security::SecurityError::UncoveredGit`] naming what cannot be covered;
/// [`crate::ops::OpsError::Engine`] for a `workspaceMount` that does not parse.
/// The third value is what [`after_hooks`] compares the workspace with once the container's
/// hooks ran (`None` when nothing is covered: not `hardened`, or `workspace-git:rw`).
pub(crate) fn covered(
    opts: &UpOptions,
    chosen: &UpChoice,
    reporter: &dyn Reporter,
) -> Result<(UpOptions, Vec<Warning>, Option<GitWatch>)> {
    let mut opts = opts.clone();
    if !matches!(chosen.profile, SecurityProfile::Hardened(_)) {
        return Ok((opts, Vec::new(), None));
    }
    if chosen.grants.workspace_git_rw {
        return Ok((
            opts,
            vec![warning(
                "the workspace's git directories are writable by the container (`--allow workspace-git:rw`): a lifecycle hook or anything run in it can change what the host's git runs (`core.fsmonitor`, hooks); check `.git/config` before running git on the host".to_string(),
            )],
            None,
        ));
    }
    let (root, container_root, attached) = root_of(chosen)?;
    let walk = Walk::of(&root);
    let watch = GitWatch {
        root: root.clone(),
        before: walk.found.iter().map(|f| f.rel.clone()).collect(),
        keep: chosen.grants.created_git.clone(),
    };
    // recorded for the container before its first hook runs (attack P9)
    opts.git_baseline = Some(watch.baseline());
    let accepts = |rel: &str| git_cover::accepted_by(Some(&chosen.grants.uncovered_git), rel);
    let refused = |items| crate::security::SecurityError::UncoveredGit {
        root: root.clone(),
        items,
    };
    let mut plan =
        git_cover::judge(&root, &Known::root_only(&root), &walk, &accepts).map_err(refused)?;
    // submodule folders not checked out, read-only (attack N7)
    git_cover::cover_gitlinks(&root, &walk, &mut plan, &accepts).map_err(refused)?;
    let warnings = plan
        .accepted
        .iter()
        .map(|u| {
            warning(format!(
                "`{}` below the workspace is not covered ({}; accepted with `{}`): the container can change what the host's git reads there; check it before running git in it",
                u.rel,
                u.why,
                u.grant()
            ))
        })
        .collect();
    if plan.entries.is_empty() {
        return Ok((opts, warnings, Some(watch)));
    }
    reporter.report(Event::Status(notice(&plan)));
    let binds = plan.binds(&root, &container_root);
    if attached {
        // the root is the workspace mount, bound on itself (spec-note 0436)
        opts.covers.push((root.clone(), container_root.clone()));
    }
    for b in binds {
        opts.covers.push((b.source.clone(), b.target.clone()));
        opts.mounts.push(Mount {
            kind: MountKind::Bind,
            source: Some(b.source.to_string_lossy().into_owned()),
            target: b.target,
            read_only: b.read_only,
        });
    }
    Ok((opts, warnings, Some(watch)))
}

/// Before `up` walks the workspace (attack O1): a container of this workspace may have left a
/// process running that made a git entry since the last command; the walk would take it as
/// the user's, cover it and record it. Each such entry (not in the record of a container of
/// this workspace, [`git_baseline`]) is moved aside first, each move a warning. Records go
/// with their containers when devcell removes them; no engine call is made here (a warm `up`
/// makes no more than before). Nothing under `reference` or `--allow workspace-git:rw`, or
/// when no record covers the workspace.
pub(crate) fn before_up(chosen: &UpChoice) -> Result<Vec<Warning>> {
    if !matches!(chosen.profile, SecurityProfile::Hardened(_)) || chosen.grants.workspace_git_rw {
        return Ok(Vec::new());
    }
    let Some(state) = crate::ops::state_folder::default_root() else {
        return Ok(Vec::new());
    };
    let (root, _, _) = root_of(chosen)?;
    let mut warnings = Vec::new();
    for id in git_baseline::containers_of(&state, &root) {
        if let Some(outcome) =
            git_baseline::quarantine_since(&state, &id, &chosen.grants.created_git)
        {
            warnings.extend(outcome.messages().into_iter().map(warning));
        }
    }
    Ok(warnings)
}

/// Forgets the workspace git record of a container devcell removed (spec-note 0466): the next
/// `up` compares only with the records of containers that may still run. Nothing when there is
/// no state folder or no record.
pub(crate) fn forget(container_id: &str) {
    if let Some(state) = crate::ops::state_folder::default_root() {
        git_baseline::forget(&state, container_id);
    }
}

/// The git entries of the workspace when `up` started, to compare with once its hooks ran
/// ([`after_hooks`], spec-note 0448).
#[derive(Debug, Clone)]
pub(crate) struct GitWatch {
    /// The covered root (canonical).
    root: PathBuf,
    /// The git entries found there at the start (relative).
    before: BTreeSet<String>,
    /// The entries the user accepted (`--allow created-git:<path>`).
    keep: BTreeSet<String>,
}

impl GitWatch {
    /// The record of the user's entries: found at the start, or accepted.
    fn baseline(&self) -> git_baseline::Baseline {
        git_baseline::Baseline {
            root: self.root.clone(),
            entries: self.before.union(&self.keep).cloned().collect(),
        }
    }

    /// The record to keep for `container_id` once `up` ran its hooks. For a running container
    /// `up` reused, its walk ran while the container did, so an entry the container re-made
    /// between `before_up`'s moves and that walk would be taken as the user's (review of
    /// session 25, attack P2's class): only what its earlier record already held (and what
    /// the user accepts) stays. A created or started container is recorded from the walk, made
    /// while nothing of the workspace ran.
    fn baseline_for(
        &self,
        state: &std::path::Path,
        container_id: &str,
        action: crate::ops::bring_up::ContainerAction,
    ) -> git_baseline::Baseline {
        let mut baseline = self.baseline();
        if action == crate::ops::bring_up::ContainerAction::Running
            && let Some(earlier) = git_baseline::load(state, container_id)
        {
            baseline
                .entries
                .retain(|e| earlier.entries.contains(e) || self.keep.contains(e));
        }
        baseline
    }
}

/// Once `up`'s lifecycle hooks ran (or failed): each git entry the container created in the
/// workspace is moved into devcell's state (`<state>/quarantine/<stamp>/<path>`,
/// [`crate::security::git_quarantine`]; attack N7, spec-note 0448), said as a warning and an
/// entry of the result's `quarantinedGit`, or, when `up` failed, as an `error:` status line.
/// `result` is returned otherwise unchanged.
///
/// Errors: `result`'s own.
pub(crate) fn after_hooks(
    watch: Option<&GitWatch>,
    result: Result<UpResult>,
    reporter: &dyn Reporter,
) -> Result<UpResult> {
    let Some(watch) = watch else {
        return result;
    };
    let into = crate::ops::state_folder::default_root().map(|r| git_quarantine::folder_in(&r));
    let keep = |rel: &str| watch.keep.contains(rel);
    let outcome =
        git_quarantine::quarantine_new(&watch.root, &watch.before, &keep, into.as_deref());
    let messages = outcome.messages();
    let mut result = match result {
        Ok(result) => result,
        Err(e) => {
            // no result to carry them: said now
            for m in &messages {
                reporter.report(Event::Status(format!("error: {m}")));
            }
            return Err(e);
        }
    };
    result.warnings.extend(messages.into_iter().map(warning));
    result.quarantined_git = outcome.moved;
    // what later commands compare the workspace with (spec-note 0466); written again for a
    // reused container, which `up` did not record before its hooks
    if let Some(state) = crate::ops::state_folder::default_root()
        && let Err(e) = git_baseline::record(
            &state,
            &result.container_id,
            &watch.baseline_for(&state, &result.container_id, result.action),
        )
    {
        result.warnings.push(warning(format!(
                "the workspace's git entries could not be recorded in devcell's state ({e}): `exec`, `run-user-commands` and `down` will not move aside a git directory the container creates; check with `devcell status` before running git on the host"
            )));
    }
    Ok(result)
}

/// After a command ran container code against the workspace of `container_id` (`exec`,
/// `run-user-commands`, `down`): each git entry made since `up` recorded the workspace
/// ([`git_baseline::quarantine_since`], spec-note 0466) is moved aside, each move or failure a
/// warning on `reporter`. `allow` is the command's `--allow` (its `created-git:<path>` grants
/// keep an entry). Returns what was moved (empty when the container has no record).
pub(crate) fn after_command(
    container_id: &str,
    allow: &[String],
    reporter: &dyn Reporter,
) -> Vec<git_quarantine::Quarantined> {
    let Some(state) = crate::ops::state_folder::default_root() else {
        return Vec::new();
    };
    let keep = crate::security::Grants::parse(allow)
        .map(|g| g.created_git)
        .unwrap_or_default();
    let Some(outcome) = git_baseline::quarantine_since(&state, container_id, &keep) else {
        return Vec::new();
    };
    for m in outcome.messages() {
        reporter.report(Event::Status(format!("warning: {m}")));
    }
    outcome.moved
}

/// The host root whose git entries are covered (canonical), where the container sees it, and
/// whether that is the workspace mount: the workspace mount's source and target when it is a
/// bind, else the host mount root at [`DETACHED_ROOT`].
fn root_of(chosen: &UpChoice) -> Result<(PathBuf, String, bool)> {
    let loaded = &chosen.loaded;
    let mount = loaded
        .workspace_mount()?
        .filter(|m| m.kind == MountKind::Bind)
        .and_then(|m| Some((PathBuf::from(m.source?), m.target)));
    let (root, target, attached) = match mount {
        Some((source, target)) => (source, target, true),
        None => (
            loaded.workspace.host_mount_root.clone(),
            DETACHED_ROOT.to_string(),
            false,
        ),
    };
    // judged as the engine will mount it: the link's target (spec-note 0400); one that cannot
    // be resolved is refused where the binds are resolved
    let root = crate::security::host_path::resolve(&root).unwrap_or(root);
    Ok((root, target, attached))
}

/// The notice line: what is read-only, what fails, and what to use instead.
fn notice(plan: &Plan) -> String {
    let shown: Vec<String> = plan
        .entries
        .iter()
        .take(4)
        .map(|rel| format!("`{rel}`"))
        .collect();
    let more = plan.entries.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "the workspace's git directories ({}{more}) are read-only in the container: git there can read (status, log, diff), but a commit fails with a read-only file system error; commit on the host, hand the workspace to an agent with `devcell handoff` (container git directories, commits fetched back), or leave them writable with `--allow workspace-git:rw`",
        shown.join(", ")
    )
}

fn warning(message: String) -> Warning {
    Warning {
        location: None,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack M7: a plain `up`'s plan binds the primary `.git`, a nested repository's `.git`
    /// and a `.git` file read-only on themselves, and the folders above a nested one on
    /// themselves; a `.git` file naming a git directory outside the workspace is refused,
    /// naming its grant.
    #[test]
    fn the_workspace_git_directories_are_bound_read_only_on_themselves() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        for dir in [".git/hooks", "vendor/lib/.git", "tools/sub"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(
            root.join("tools/sub/.git"),
            "gitdir: ../../vendor/lib/.git\n",
        )
        .unwrap();
        let plan = git_cover::judge(&root, &Known::root_only(&root), &Walk::of(&root), &|_| {
            false
        })
        .unwrap();
        let mut binds: Vec<(String, bool)> = plan
            .binds(&root, "/workspaces/ws")
            .into_iter()
            .map(|b| {
                assert_eq!(
                    PathBuf::from(&b.target)
                        .strip_prefix("/workspaces/ws")
                        .unwrap(),
                    b.source.strip_prefix(&root).unwrap()
                );
                (b.target, b.read_only)
            })
            .collect();
        binds.sort();
        assert_eq!(
            binds,
            [
                ("/workspaces/ws/.git".to_string(), true),
                ("/workspaces/ws/tools".to_string(), false),
                ("/workspaces/ws/tools/sub".to_string(), false),
                ("/workspaces/ws/tools/sub/.git".to_string(), true),
                ("/workspaces/ws/vendor".to_string(), false),
                ("/workspaces/ws/vendor/lib".to_string(), false),
                ("/workspaces/ws/vendor/lib/.git".to_string(), true),
            ]
        );
        assert!(notice(&plan).contains("`.git`"));
        // a `.git` file naming a git directory outside: refused unless accepted
        let outside = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(
            root.join("tools/sub/.git"),
            format!("gitdir: {}\n", outside.display()),
        )
        .unwrap();
        let refused = git_cover::judge(&root, &Known::root_only(&root), &Walk::of(&root), &|_| {
            false
        })
        .unwrap_err();
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].grant(), "--allow uncovered-git:tools/sub/.git");
        let grants = crate::security::Grants::parse(&["uncovered-git:tools/sub/.git"]).unwrap();
        let plan = git_cover::judge(&root, &Known::root_only(&root), &Walk::of(&root), &|rel| {
            git_cover::accepted_by(Some(&grants.uncovered_git), rel)
        })
        .unwrap();
        assert_eq!(plan.accepted.len(), 1);
        assert!(!plan.entries.contains(&"tools/sub/.git".to_string()));
        assert!(
            crate::security::Grants::parse(&["workspace-git:rw"])
                .unwrap()
                .workspace_git_rw
        );
        assert!(crate::security::Grants::parse(&["workspace-git:ro"]).is_err());
    }

    /// Attack N7: a submodule (gitlink) folder that is not checked out is bound read-only on
    /// itself (a hook cannot make `lib/.git` there for the host's `git status` to enter), the
    /// folders above it on themselves; a gitlink with no folder is refused, naming its grant.
    #[test]
    fn a_submodule_folder_not_checked_out_is_bound_read_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::create_dir_all(root.join("deps/x")).unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&root)
                .args(args)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        for p in ["lib", "deps/x/sub"] {
            let info = format!("160000,{},{p}", "1".repeat(40));
            git(&["update-index", "--add", "--cacheinfo", &info]);
        }
        let walk = Walk::of(&root);
        let judge = |accepts: &dyn Fn(&str) -> bool| {
            let mut plan =
                git_cover::judge(&root, &Known::root_only(&root), &walk, accepts).unwrap();
            git_cover::cover_gitlinks(&root, &walk, &mut plan, accepts).map(|()| plan)
        };
        let refused = judge(&|_| false).unwrap_err();
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].grant(), "--allow uncovered-git:deps/x/sub");
        std::fs::create_dir_all(root.join("deps/x/sub")).unwrap();
        let plan = judge(&|_| false).unwrap();
        let binds: Vec<(String, bool)> = plan
            .binds(&root, "/w")
            .into_iter()
            .map(|b| (b.target, b.read_only))
            .collect();
        for want in [
            ("/w/.git", true),
            ("/w/lib", true),
            ("/w/deps/x/sub", true),
            ("/w/deps", false),
            ("/w/deps/x", false),
        ] {
            assert!(
                binds.contains(&(want.0.to_string(), want.1)),
                "{want:?} in {binds:?}"
            );
        }
        // checked out: its own `.git` is the walk's entry, the folder stays writable
        std::fs::create_dir_all(root.join("lib/.git")).unwrap();
        let walk = Walk::of(&root);
        let mut plan =
            git_cover::judge(&root, &Known::root_only(&root), &walk, &|_| false).unwrap();
        git_cover::cover_gitlinks(&root, &walk, &mut plan, &|_| false).unwrap();
        assert!(plan.entries.contains(&"lib/.git".to_string()));
        assert!(!plan.entries.contains(&"lib".to_string()));
    }

    /// Review of session 25 (attack P2's class, a reused container): the record a running
    /// container keeps after `up` holds only what its earlier record held, or the user
    /// accepts; a created container's record is the walk's.
    #[test]
    fn a_reused_running_containers_record_never_gains_an_entry() {
        use crate::ops::bring_up::ContainerAction;
        let state = tempfile::tempdir().unwrap();
        let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let earlier = git_baseline::Baseline {
            root: PathBuf::from("/w"),
            entries: set(&[".git"]),
        };
        git_baseline::record(state.path(), "c1", &earlier).unwrap();
        let watch = GitWatch {
            root: PathBuf::from("/w"),
            before: set(&[".git", "src/.git", "lib/.git"]),
            keep: set(&["lib/.git"]),
        };
        let running = watch.baseline_for(state.path(), "c1", ContainerAction::Running);
        assert_eq!(running.entries, set(&[".git", "lib/.git"]));
        let created = watch.baseline_for(state.path(), "c1", ContainerAction::Created);
        assert_eq!(created.entries, set(&[".git", "src/.git", "lib/.git"]));
        // a running container with no earlier record (an older devcell's): the walk's
        let unknown = watch.baseline_for(state.path(), "c2", ContainerAction::Running);
        assert_eq!(unknown.entries, created.entries);
    }
}
