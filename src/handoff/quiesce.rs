//! Stopping the workspace once the agent has ended, before its commits are fetched back
//! (issue 25; spec-note 0436, "after the agent").
//!
//! The agent's argv ending does not end what it started: `setsid sh -c 'while :; do …; done' &`
//! outlives the exec and keeps writing into the container git directory and the workspace.
//! Killing "every process of the agent's user" inside the container is not enough (a root
//! agent, a process that changed user, a Compose sidecar), so devcell stops the containers
//! themselves: the engine ends every process in them, whoever runs it. The fetch-back reads a
//! container git directory only once every container that can write it is confirmed stopped.
//!
//! Which containers: every running container of the primary's Compose project, the peers
//! first and all at once, then the primary (spec-note 0400, attacks F0/F3). A sidecar needs no
//! bind of the workspace to write it: one in the primary's pid namespace reaches the primary's
//! mounts through `/proc/<pid>/root`, one given a folder's descriptor over a socket keeps it,
//! one on a named volume that binds the workspace shows as a volume. And stopping the primary
//! first tears down its mount namespace, with the cover over `<ws>/.git`, while such a peer
//! still holds the workspace bind: it would then see the host's own `.git`. So no peer runs
//! when the primary stops. The next handoff starts them all again (Compose's `start` starts
//! every container of the project).

use std::time::Duration;

use crate::engine::Engine;

/// How long the engine lets the workspace's processes end on SIGTERM before it kills them.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long stopping and confirming may take in all, whatever the engine does.
const QUIESCE_DEADLINE: Duration = Duration::from_secs(60);

/// Stops every running container of `primary`'s Compose project but `primary`, all at once,
/// then `primary`, then confirms with the engine that none of them runs. A peer is stopped
/// whatever it binds.
///
/// Returns the ids stopped, primary last. Errors: a sentence for people when a container
/// could not be stopped or confirmed stopped (then the fetch-back must not read its git).
pub async fn stop_workspace(engine: &dyn Engine, primary: &str) -> Result<Vec<String>, String> {
    match tokio::time::timeout(QUIESCE_DEADLINE, stop_and_confirm(engine, primary)).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the workspace container {} was not confirmed stopped within {} s",
            short(primary),
            QUIESCE_DEADLINE.as_secs()
        )),
    }
}

async fn stop_and_confirm(engine: &dyn Engine, primary: &str) -> Result<Vec<String>, String> {
    let peers = peers(engine, primary).await?;
    // the peers together (one grace period for all, however many), then the primary
    let stopped = futures_util::future::join_all(peers.iter().map(|id| stop(engine, id))).await;
    stopped.into_iter().collect::<Result<Vec<()>, String>>()?;
    stop(engine, primary).await?;
    let ids = stop_order(primary, &peers);
    for id in &ids {
        match engine.inspect_container(id).await {
            Ok(Some(info)) if info.running => {
                return Err(format!(
                    "the container {} still runs after it was stopped",
                    short(id)
                ));
            }
            Ok(_) => {}
            Err(e) => {
                return Err(format!(
                    "the container {} could not be confirmed stopped: {e}",
                    short(id)
                ));
            }
        }
    }
    Ok(ids)
}

/// Stops one container; one removed meanwhile writes nothing any more.
async fn stop(engine: &dyn Engine, id: &str) -> Result<(), String> {
    match engine.stop_container(id, Some(STOP_TIMEOUT)).await {
        Ok(()) | Err(crate::engine::EngineError::NoSuchContainer { .. }) => Ok(()),
        Err(e) => Err(format!(
            "the container {} could not be stopped: {e}",
            short(id)
        )),
    }
}

/// The order containers are stopped in: every peer, then the primary (never the primary while
/// a peer runs).
fn stop_order(primary: &str, peers: &[String]) -> Vec<String> {
    let mut ids: Vec<String> = peers.iter().filter(|p| *p != primary).cloned().collect();
    ids.dedup();
    ids.push(primary.to_string());
    ids
}

/// The running containers of the primary's Compose project (when it has one) other than the
/// primary, whatever they bind.
async fn peers(engine: &dyn Engine, primary: &str) -> Result<Vec<String>, String> {
    let info = engine.inspect_container(primary).await.map_err(|e| {
        format!(
            "the container {} could not be inspected: {e}",
            short(primary)
        )
    })?;
    let Some(project) = info
        .as_ref()
        .and_then(|i| i.labels.get(crate::engine::compose::PROJECT_LABEL))
    else {
        return Ok(Vec::new());
    };
    let labels = std::collections::BTreeMap::from([(
        crate::engine::compose::PROJECT_LABEL.to_string(),
        project.clone(),
    )]);
    let others = engine.find_containers(&labels).await.map_err(|e| {
        format!("the containers of Compose project `{project}` could not be listed: {e}")
    })?;
    let mut ids: Vec<String> = Vec::new();
    for c in others {
        if c.id == primary || ids.contains(&c.id) {
            continue;
        }
        if let Ok(Some(other)) = engine.inspect_container(&c.id).await
            && other.running
        {
            ids.push(c.id);
        }
    }
    Ok(ids)
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attack (spec-note 0400, F0/F3): every peer is stopped, the primary last, whatever the
    /// peers bind (a pid namespace, a descriptor, a bind-backed volume reach the workspace
    /// without a bind of it).
    #[test]
    fn every_running_container_of_the_project_is_a_writer() {
        let peers = vec!["db".to_string(), "side".to_string()];
        assert_eq!(stop_order("app", &peers), ["db", "side", "app"]);
        assert_eq!(stop_order("app", &[]), ["app"]);
        assert_eq!(stop_order("app", &["app".to_string()]), ["app"]);
    }
}
