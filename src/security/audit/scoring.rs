//! How evidence becomes a score: the eight [`Control`]s, the [`Risk`] of each [`Evidence`] (a
//! control scores the lowest cap among its evidence) and the [`AuditReport`].

use serde::{Deserialize, Serialize};

use super::facts::FactsSource;

/// The highest score of one control.
pub const CONTROL_MAX: u8 = 2;

/// The highest total score (eight controls, two points each).
pub const MAX_SCORE: u8 = 16;

/// The blueprint's eight controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Control {
    /// What host files can the agent read?
    RepoScope,
    /// Can the agent reach the engine or otherwise control host-level resources?
    EngineSocket,
    /// Which credentials are visible, and do they survive teardown?
    SecretBoundary,
    /// Which destinations can the run reach?
    NetworkPolicy,
    /// Can one run influence another through cache state?
    CachePolicy,
    /// What browser account state is visible?
    BrowserIsolation,
    /// Can another machine recreate the workspace?
    Reproducibility,
    /// What proves the run is gone?
    Teardown,
}

impl Control {
    /// All controls, in the blueprint's order.
    pub const ALL: [Control; 8] = [
        Control::RepoScope,
        Control::EngineSocket,
        Control::SecretBoundary,
        Control::NetworkPolicy,
        Control::CachePolicy,
        Control::BrowserIsolation,
        Control::Reproducibility,
        Control::Teardown,
    ];

    /// Human title.
    pub fn title(self) -> &'static str {
        match self {
            Control::RepoScope => "repo scope",
            Control::EngineSocket => "engine socket",
            Control::SecretBoundary => "secret boundary",
            Control::NetworkPolicy => "network policy",
            Control::CachePolicy => "cache policy",
            Control::BrowserIsolation => "browser isolation",
            Control::Reproducibility => "reproducibility",
            Control::Teardown => "teardown",
        }
    }
}

/// How much one observation weakens its control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Caps the control at 0.
    Critical,
    /// Caps the control at 1.
    Weak,
    /// Does not lower the control.
    Safe,
}

impl Risk {
    /// The highest score a control can have with this evidence.
    pub fn cap(self) -> u8 {
        match self {
            Risk::Critical => 0,
            Risk::Weak => 1,
            Risk::Safe => 2,
        }
    }
}

/// One observation behind a score. Never contains an environment variable value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// What was looked at, e.g. `bind /home/me -> /home/me (rw)` or `env GITHUB_TOKEN`.
    pub subject: String,
    /// Why it is or is not a risk.
    pub detail: String,
    /// Its effect on the score.
    pub risk: Risk,
}

/// An [`Evidence`].
pub(super) fn ev(subject: impl Into<String>, detail: impl Into<String>, risk: Risk) -> Evidence {
    Evidence {
        subject: subject.into(),
        detail: detail.into(),
        risk,
    }
}

/// One control's score and evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlScore {
    /// Which control.
    pub control: Control,
    /// Its title.
    pub title: String,
    /// 0, 1 or 2: the lowest cap among the evidence.
    pub score: u8,
    /// Always 2.
    pub max: u8,
    /// Every observation considered.
    pub evidence: Vec<Evidence>,
}

/// The audit result: eight control scores out of 16, serialisable to JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// Container name (or id) when known.
    pub container: Option<String>,
    /// Where the facts came from.
    pub source: Option<FactsSource>,
    /// Sum of the control scores.
    pub score: u8,
    /// 16.
    pub max_score: u8,
    /// The eight controls in the blueprint's order.
    pub controls: Vec<ControlScore>,
    /// For a Compose workspace: what its services share and can reach on the network; absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// For a Compose workspace: the audit of each other container of the project (the
    /// sidecars); absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<AuditReport>,
    /// The container's mail channel to other tasks, when it has one (spec-note 0532); not
    /// scored: a read-only socket to devcell's mediator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mail: Option<MailChannel>,
}

/// A container's mail channel as the audit sees it (spec-note 0532): its binds, and what the
/// handoff session that ran there recorded of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MailChannel {
    /// The socket folder's host path.
    pub socket_folder: String,
    /// The socket's path in the container.
    pub socket: String,
    /// Whether the socket folder is bound read-only.
    pub read_only: bool,
    /// The in-container command, when bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The session's record of the channel (group, task, counts), when the state has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<serde_json::Value>,
}

impl AuditReport {
    /// Whether the total reaches `min` (`--min-score N`).
    pub fn passes(&self, min: u8) -> bool {
        self.score >= min
    }

    /// The score of one control.
    pub fn score_of(&self, control: Control) -> u8 {
        self.control(control).map_or(0, |c| c.score)
    }

    /// One control's entry.
    pub fn control(&self, control: Control) -> Option<&ControlScore> {
        self.controls.iter().find(|c| c.control == control)
    }
}
