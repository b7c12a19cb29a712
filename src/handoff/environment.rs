//! A handoff's environment record (spec-note 0520): `handoff --environment FILE` checked
//! before a session exists, as `up --environment` is, and what the recreated environment
//! produced differently reported after it was recorded.

use crate::engine::Engine;
use crate::handoff::plan::HandoffOptions;
use crate::ops::OpsError;
use crate::ops::environment::{EnvironmentStore, check_drift, outcome_warnings};
use crate::progress::Reporter;
use crate::settings::NetworkMode;

/// With `--environment FILE`: the handoff's inputs now (its configuration, base image,
/// Features, profile, grants, and `network`, the network its container gets) compared with the
/// record's before a session, a container or an image exists; a difference refuses
/// ([`OpsError::EnvironmentDrift`], exit 18) or, with `--allow-drift`, is returned as a warning.
///
/// Errors: [`OpsError::EnvironmentDrift`]; loading, pulling the base and resolving the
/// Features, as `up --environment`.
pub async fn check(
    engine: &dyn Engine,
    opts: &HandoffOptions,
    up_opts: &crate::ops::UpOptions,
    network: NetworkMode,
    reporter: &dyn Reporter,
) -> Result<Vec<String>, OpsError> {
    let found = check_drift(
        engine,
        up_opts,
        &opts.environment,
        Some(network.as_str()),
        reporter,
    )
    .await?;
    Ok(found.into_iter().map(|w| w.message).collect())
}

/// After the handoff recorded its environment under `hash`: what differs from the
/// `--environment` record in what only the run decides (the image id, devcell's version),
/// as warnings.
pub fn outcome(opts: &HandoffOptions, store: &EnvironmentStore, hash: &str) -> Vec<String> {
    if opts.environment.recorded.is_none() {
        return Vec::new();
    }
    let made = store.load(hash).ok();
    outcome_warnings(&opts.environment, made.as_ref())
        .into_iter()
        .map(|w| w.message)
        .collect()
}

/// `--environment` and `--allow-drift` need the container runtime: the host runtime makes no
/// container, so there is no environment to recreate.
///
/// Errors: [`OpsError::Unsupported`] when both are asked for.
pub fn refuse_on_host(opts: &HandoffOptions) -> Result<(), OpsError> {
    let host = opts.runtime == Some(crate::handoff::context::AgentRuntime::Host);
    if host && (opts.environment.recorded.is_some() || opts.environment.required) {
        return Err(OpsError::Unsupported {
            message: "`--environment` and `--environment-out` describe a container; `--runtime host` makes none".into(),
            hint: Some("drop `--runtime host`".into()),
        });
    }
    Ok(())
}
