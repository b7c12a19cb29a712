//! The handoff's last look at the workspace's `.git` entries: what changed since its start is
//! said in its own result and on stderr, not only by the next `status` (spec-note 0400, K4).

use super::{Handoff, Live};
use crate::handoff::git_identity::{GitDirChange, compare, record};
use crate::progress::Event;

impl Handoff<'_> {
    /// Compares the `.git` entries below the workspace with the record made at the handoff's
    /// start (after the agent stopped and its commits came back): each `git_dir_changed` /
    /// `git_dir_created` is a warning line now, a warning of the result, and an entry of its
    /// `gitDirChanges`.
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
        let found = compare(&before, &record(&live.root));
        found
            .into_iter()
            .map(|(code, message)| {
                self.reporter
                    .report(Event::Status(format!("warning: {code}: {message}")));
                live.warnings.push(format!("{code}: {message}"));
                GitDirChange { code, message }
            })
            .collect()
    }
}
