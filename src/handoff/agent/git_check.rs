//! The handoff's last look at the workspace's `.git` entries: what changed since its start is
//! said in its own result and on stderr, not only by the next `status` (spec-note 0400, K4).

use super::{Handoff, Live};
use crate::handoff::git_identity::{GitDirChange, compare_changes, record};
use crate::progress::Event;

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
        let found = compare_changes(&before, &record(&live.root));
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
}
