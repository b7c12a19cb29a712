//! What a fetch-back reports: the [`Base`] it compares with, and what it did on the host
//! ([`FetchBack`]: refs moved, created, kept aside and why).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the host held when the container git directory was last made or synchronised: the
/// base a fetch-back compares with. Kept beside the container git directory, never in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Base {
    /// The host `HEAD` (`ref: refs/heads/<b>` or an object name), trimmed.
    pub head: String,
    /// The commit `HEAD` named, `None` in a repository without commits.
    pub head_commit: Option<String>,
    /// Every ref that is not symbolic, by name.
    pub refs: BTreeMap<String, String>,
    /// `sha1` or `sha256`.
    pub object_format: String,
}

/// Why a fetch-back left a host ref alone and kept the agent's value aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeptReason {
    /// The agent moved a branch to a commit that does not descend from where it was.
    Rewritten,
    /// The agent deleted the ref; the host keeps it.
    Deleted,
    /// The ref changed on the host during the handoff (or a new one exists there too).
    MovedOnHost,
    /// Not a branch (tags and other refs are never written on the host).
    NotABranch,
    /// Its object is missing or its name was refused.
    Invalid,
    /// Its commit adds a submodule (a gitlink) the branch did not have: the host's `git status`
    /// would enter the nested repository the agent made there and run what its configuration
    /// names (spec-note 0436).
    AddsSubmodule,
    /// Its commit has a submodule (a gitlink) at a path devcell did not cover in this session,
    /// and it is (or would become) the host's checked-out commit: the host's `HEAD`, index and
    /// checked-out branch do not follow it, since the host's `git status` would enter what the
    /// agent made there (spec-note 0436).
    UncoveredSubmodule,
    /// The branch is checked out in another worktree of the same repository: the host's `HEAD`
    /// does not follow the agent onto it and the branch does not move under that worktree
    /// (git itself refuses two worktrees on one branch and fetches into a checked-out one;
    /// spec-note 0436).
    CheckedOutElsewhere,
    /// The host could not write it: its name conflicts with a host ref (`refs/heads/main/x`
    /// while the host has `refs/heads/main`, or the other way round; spec-note 0400, attacks
    /// F4).
    Conflict,
    /// A new branch whose short name git could read as something the user means, now or
    /// after a fetch or a tag: a remote's branch (`origin/main`, found before
    /// `refs/remotes/origin/main`, even for a remote not fetched yet), a tag (`v1.1`), a `git
    /// describe` name or short object id, or a name git keeps in its own folder
    /// (`FETCH_HEAD`): the user's `git merge upstream/main` would take the agent's commits as
    /// upstream's (attacks K7, L5, M4; spec-note 0436).
    ShadowsRef,
}

/// A ref the agent changed that the host did not take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptRef {
    /// The ref's name in the container (e.g. `refs/heads/main`).
    pub name: String,
    /// The agent's value, `None` when it deleted the ref.
    pub value: Option<String>,
    /// Where the agent's value is on the host (`refs/devcell/<session>/…`), when it is.
    pub kept_as: Option<String>,
    /// Why.
    pub reason: KeptReason,
}

/// A host ref a fetch-back moved or created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefUpdate {
    /// The ref.
    pub name: String,
    /// Its value before, `None` for a new ref.
    pub old: Option<String>,
    /// Its value now.
    pub new: String,
}

/// What a fetch-back did on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchBack {
    /// Branches moved forward to the agent's commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fast_forwarded: Vec<RefUpdate>,
    /// Branches the agent created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<RefUpdate>,
    /// What the host did not take.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<KeptRef>,
    /// The branch the host `HEAD` now names, when it followed the agent's checkout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_moved_to: Option<String>,
    /// Whether the host index was reset to the new `HEAD` (the working tree is never touched).
    #[serde(default)]
    pub index_reset: bool,
    /// Why nothing was brought back when the container git directory was refused whole (more
    /// than [`MAX_CHANGED_REFS`](super::MAX_CHANGED_REFS) changed refs): it was set aside, not imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl FetchBack {
    /// Whether nothing changed on the host and nothing was kept aside.
    pub fn is_empty(&self) -> bool {
        self.fast_forwarded.is_empty()
            && self.created.is_empty()
            && self.kept.is_empty()
            && self.head_moved_to.is_none()
            && !self.index_reset
            && self.refused.is_none()
    }
}
