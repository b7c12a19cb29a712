//! The handoff's last look at the workspace's `.git` entries: what changed since its start is
//! said in its own result and on stderr, not only by the next `status` (spec-note 0400, K4).

use super::{Handoff, Live};
use crate::handoff::git_identity::{GitDirChange, GitIdentity, compare_changes, record};
use crate::progress::Event;
use crate::security::git_quarantine;

impl Handoff<'_> {
    /// Compares the `.git` entries below the workspace with the record made at the handoff's
    /// start (after the agent stopped and its commits came back): each `git_dir_changed` /
    /// `git_dir_created` is a warning line now, a warning of the result, and an entry of its
    /// `gitDirChanges`; a folder that became a git directory under another name than `.git`
    /// (attack L2) is an `error:` line and `loud` in the result (spec-note 0400).
    pub(super) fn check_git_identity(&self, live: &mut Live) -> Vec<GitDirChange> {
        let Some(before) = live
            .store
            .load(&live.root)
            .ok()
            .flatten()
            .and_then(|s| s.git_identity)
        else {
            return Vec::new();
        };
        // what the agent created is moved aside first (attack N15, spec-note 0448)
        let mut found = self.quarantine_created(&before, live);
        found.extend(compare_changes(&before, &record(&live.root)));
        for change in &found {
            let level = if change.loud { "error" } else { "warning" };
            self.reporter.report(Event::Status(format!(
                "{level}: {}: {}",
                change.code, change.message
            )));
            live.warnings
                .push(format!("{}: {}", change.code, change.message));
        }
        found
    }

    /// Moves each git entry made since the handoff's start (not in `before`) and not accepted
    /// (`--allow created-git:<path>`) into `<state>/quarantine/<stamp>/`
    /// ([`crate::security::git_quarantine`], shared with `up`): a loud `git_dir_quarantined`
    /// change each. One that cannot be moved stays, and the comparison names it
    /// (`git_dir_created`).
    fn quarantine_created(&self, before: &GitIdentity, live: &Live) -> Vec<GitDirChange> {
        let allow: Vec<String> = self
            .opts
            .settings
            .security
            .allow
            .iter()
            .chain(self.opts.security.allow.iter())
            .filter_map(|a| a.strip_prefix("created-git:"))
            .map(|p| p.trim_end_matches('/').to_string())
            .collect();
        let keep = |rel: &str| allow.iter().any(|a| a == rel);
        let into = git_quarantine::folder_in(live.store.root());
        let before = before.entries.keys().cloned().collect();
        let outcome = git_quarantine::quarantine_new(&live.root, &before, &keep, Some(&into));
        let unwalked = outcome.unwalked_message().map(|message| GitDirChange {
            // attack O9: what the walk could not see is said, not taken as clean
            code: "git_walk_incomplete".into(),
            message,
            loud: true,
        });
        outcome
            .moved
            .iter()
            .map(|q| GitDirChange {
                code: "git_dir_quarantined".into(),
                message: q.message(),
                loud: true,
            })
            .chain(unwalked)
            .collect()
    }
}
