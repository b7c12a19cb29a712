//! L3: the isolation audit. Scores any container, made by devcell or not, against the eight
//! controls of the containerized agent workspace blueprint (repo scope, engine socket, secret
//! boundary, network policy, cache policy, browser isolation, reproducibility, teardown), 0 to 2
//! points each, 16 in all, with the evidence behind every score.
//!
//! The audit is a pure function over a neutral description of a container, [`ContainerFacts`],
//! which is filled either from the JSON of `docker inspect <container>` (the Docker Engine API
//! `ContainerInspect` shape, [`ContainerFacts::from_docker_inspect`]) or from what a process
//! inside the container observes ([`crate::security::probe`]). Nothing here talks to the engine.
//!
//! Scoring rule (spec-notes 0140-0146): every observation becomes an [`Evidence`] with a
//! [`Risk`]; a control scores the lowest cap among its evidence (`critical` caps at 0, `weak` at
//! 1, `safe` leaves 2). Environment variable values are dropped when facts are read: only names,
//! and flags saying whether a name or value looks like a credential, are kept.
//!
//! Layout: `facts` (what is scored, read from `docker inspect`), `context` (the host side),
//! `heuristics` (names, values and paths the controls recognise), one file per control under
//! `controls`, and `scoring` (evidence → score → report). The engine socket paths and
//! capability names are the policy's too ([`crate::security::known`]). Rendering the report for
//! people is the CLI's.

use std::path::PathBuf;

use serde_json::Value;

use crate::names;

mod context;
mod controls;
mod facts;
mod heuristics;
mod scoring;
#[cfg(test)]
mod tests;

pub use crate::security::known::{
    CAPABILITY_BITS, DOCKER_DEFAULT_CAPS, ENGINE_SOCKET_NAMES, ENGINE_SOCKET_PATHS,
};
pub use context::{AuditContext, EgressEvidence};
pub use facts::{
    AuditError, BASE_IMAGE_LABEL, ContainerFacts, DeviceFact, EnvFact, FEATURE_DIGESTS_LABEL,
    FactsSource, MountFact, MountKind, OWNED_VOLUME_PREFIX, PortFact, Seccomp, caps_from_mask,
    effective_caps, feature_digests,
};
pub use heuristics::{is_credential_name, is_digest_pinned, is_image_id, is_sha256_hex};
pub use scoring::{
    AuditReport, CONTROL_MAX, Control, ControlScore, Evidence, MAX_SCORE, MailChannel, Risk,
};

/// Audits the JSON of `docker inspect <container>` (and, optionally, of `docker image inspect`
/// of its image, for `RepoDigests`): the seam for `devcell audit CONTAINER`.
///
/// # Errors
/// [`AuditError::NotAContainer`] when `container` is not one container object.
pub fn audit_inspect_json(
    container: &Value,
    image: Option<&Value>,
    ctx: &AuditContext,
) -> Result<AuditReport, AuditError> {
    let mut facts = ContainerFacts::from_docker_inspect(container)?;
    if let Some(image) = image {
        facts = facts.with_image_inspect(image);
    }
    Ok(audit(&facts, ctx))
}

/// Scores `facts` against the blueprint's eight controls. Pure: no I/O.
///
/// Rules per control are documented in spec-notes 0140-0147; in short a control scores the lowest
/// cap among its evidence (critical → 0, weak → 1, safe → 2).
pub fn audit(facts: &ContainerFacts, ctx: &AuditContext) -> AuditReport {
    let mut ctx = ctx.clone();
    if ctx.workspace.is_none() {
        ctx.workspace = facts
            .labels
            .as_ref()
            .and_then(|l| l.get(names::LOCAL_FOLDER_LABEL))
            .map(PathBuf::from);
    }
    let controls: Vec<ControlScore> = Control::ALL
        .iter()
        .map(|&control| {
            let mut evidence = match control {
                Control::RepoScope => controls::repo_scope::evidence(facts, &ctx),
                Control::EngineSocket => controls::engine_socket::evidence(facts, &ctx),
                Control::SecretBoundary => controls::secret_boundary::evidence(facts, &ctx),
                Control::NetworkPolicy => controls::network_policy::evidence(facts, &ctx),
                Control::CachePolicy => controls::cache_policy::evidence(facts, &ctx),
                Control::BrowserIsolation => controls::browser_isolation::evidence(facts, &ctx),
                Control::Reproducibility => controls::reproducibility::evidence(facts, &ctx),
                Control::Teardown => controls::teardown::evidence(facts, &ctx),
            };
            // Worst first, keeping the rules' order otherwise.
            evidence.sort_by_key(|e| e.risk);
            let score = evidence
                .iter()
                .map(|e| e.risk.cap())
                .min()
                .unwrap_or(CONTROL_MAX);
            ControlScore {
                control,
                title: control.title().to_string(),
                score,
                max: CONTROL_MAX,
                evidence,
            }
        })
        .collect();
    AuditReport {
        container: facts.name.clone().or_else(|| facts.id.clone()),
        source: facts.source,
        score: controls.iter().map(|c| c.score).sum(),
        max_score: MAX_SCORE,
        controls,
        network: None,
        services: Vec::new(),
        mail: None,
    }
}
