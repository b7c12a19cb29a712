//! A handoff's environment record (spec-note 0520): `handoff --environment FILE` checked
//! before a session exists, as `up --environment` is, and what the recreated environment
//! produced differently reported after it was recorded.

use crate::engine::Engine;
use crate::handoff::plan::HandoffOptions;
use crate::ops::OpsError;
use crate::ops::environment::store::Pruned;
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

/// `prune --environments` (spec-note 0520): removes (unless `dry_run`) the environment records
/// of the state folder `state_root` (`None`: the default) that no workspace has as its last
/// record and no handoff session names ([`EnvironmentStore::prune`]). A clone task's handoffs
/// are sessions of its clone's workspace, so they count as any other.
///
/// Errors: no state folder; a handoff state that cannot be read (then nothing is removed:
/// its sessions might name a record); the store's ([`EnvironmentStore::prune`]).
pub fn prune_environments(
    state_root: Option<&std::path::Path>,
    dry_run: bool,
) -> Result<Pruned, OpsError> {
    let store = match state_root {
        Some(root) => crate::handoff::state::StateStore::new(root),
        None => crate::handoff::state::StateStore::open_default()?,
    };
    let (states, unreadable) = store.list()?;
    if let Some(e) = unreadable.into_iter().next() {
        return Err(OpsError::Unsupported {
            message: format!("nothing pruned: a handoff state cannot be read ({e})"),
            hint: Some(
                "its sessions may name a record: `devcell doctor` names it; repair or remove it"
                    .into(),
            ),
        });
    }
    let named = states
        .into_iter()
        .flat_map(|s| s.sessions.into_iter().filter_map(|s| s.environment))
        .collect();
    EnvironmentStore::new(store.root()).prune(&named, dry_run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::state::{SessionProcess, StateStore};

    /// A record stored for `workspace` with `verify` as its only command, made an hour old.
    fn old_record(store: &EnvironmentStore, workspace: &std::path::Path, verify: &str) -> String {
        let mut record = crate::ops::environment::fixtures::sample();
        record.verify = vec![verify.into()];
        let hash = store.store(workspace, &record).unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(store.path_of(&hash))
            .unwrap();
        file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
            .unwrap();
        hash
    }

    #[test]
    fn pruning_keeps_the_records_sessions_name_and_refuses_while_a_state_cannot_be_read() {
        let state = tempfile::tempdir().unwrap();
        let done = prune_environments(Some(state.path()), true).unwrap();
        assert!(done.removed.is_empty() && done.dry_run, "no store: nothing");

        let workspace = tempfile::tempdir().unwrap();
        let records = EnvironmentStore::new(state.path());
        let sessions = StateStore::new(state.path());
        let in_session = old_record(&records, workspace.path(), "session");
        let unnamed = old_record(&records, workspace.path(), "unnamed");
        let last = old_record(&records, workspace.path(), "last");
        let stopped = |_: &str| false;
        let start = sessions
            .begin_session(
                workspace.path(),
                crate::handoff::state::NewSession::in_container("codex", None, false),
                &stopped,
                SessionProcess::current(),
            )
            .unwrap();
        sessions
            .record_fact(
                workspace.path(),
                &start.session.id,
                crate::handoff::state::SessionFact::Environment(in_session.clone()),
            )
            .unwrap();

        let done = prune_environments(Some(state.path()), false).unwrap();
        let removed: Vec<&str> = done.removed.iter().map(|r| r.hash.as_str()).collect();
        assert_eq!(removed, [unnamed.as_str()]);
        assert!(records.load(&in_session).is_ok() && records.load(&last).is_ok());

        let broken = state.path().join("workspaces/broken.json");
        std::fs::write(&broken, "not json").unwrap();
        let e = prune_environments(Some(state.path()), false).unwrap_err();
        assert!(e.to_string().contains("nothing pruned"), "{e}");
    }
}
