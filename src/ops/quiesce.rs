//! Stopping the workspace once the agent has ended, before its commits are fetched back
//! (issue 25; spec-note 0436, "after the agent"), and before `up --remove-existing-container`
//! judges a Compose project (attack O4: a running sidecar swapped a judged bind source for a
//! link before the engine mounted it), and before any `up` that will start or create a
//! container reads the workspace ([`before_reading`], attacks P2, P5, P7).
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

use std::collections::BTreeMap;
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

/// Stops every container of the workspace `root` (those carrying its folder label that bind
/// it) that runs or has a running Compose peer, each with its peers first
/// ([`stop_workspace`]), and confirms. Called before devcell reads what a container could
/// write, when no handoff stopped it: the start-of-handoff fetch-back of what an earlier
/// session left, a clone task's fetch (spec-note 0400, F3). A container already running then
/// (a crashed devcell's, one `up` started, a replaced session's) could go on writing the
/// container git directory while it is read, and a peer left running when its primary ended
/// holds the workspace without the cover over `.git`.
///
/// Returns the ids stopped. Errors: a sentence for people when one could not be listed,
/// stopped or confirmed stopped (then nothing of the workspace's git may be read).
pub async fn stop_running_workspace(
    engine: &dyn Engine,
    root: &std::path::Path,
) -> Result<Vec<String>, String> {
    let labels = std::collections::BTreeMap::from([(
        crate::names::LOCAL_FOLDER_LABEL.to_string(),
        root.to_string_lossy().into_owned(),
    )]);
    let listed = |e: crate::engine::EngineError| {
        format!("the workspace's containers could not be listed: {e}")
    };
    let found = engine.find_containers(&labels).await.map_err(listed)?;
    let (bound, _) =
        crate::security::identity::bound_to_workspace(engine, found, &[root.to_path_buf()])
            .await
            .map_err(listed)?;
    let mut stopped = Vec::new();
    for c in bound {
        let running = engine
            .inspect_container(&c.id)
            .await
            .map_err(listed)?
            .is_some_and(|i| i.running);
        if running || !peers(engine, &c.id).await?.is_empty() {
            stopped.extend(stop_workspace(engine, &c.id).await?);
        }
    }
    Ok(stopped)
}

/// Before `up` reads the workspace to judge it (the git walks, the bind sources, the
/// Dockerfile): when `up` will create or start a container, no container of the workspace may
/// run meanwhile, or a process a hook left running would change what was read between the
/// judgement and its use (attacks O3, O4, P2, P5, P7: a re-planted `src/.git` taken as the
/// user's, a judged folder swapped for a link to a host folder before the engine bound it).
/// So the workspace's primaries (found by `id_labels`) and their running Compose peers are
/// stopped and confirmed stopped ([`stop_workspace`]):
/// - under `--remove-existing-container` (`remove_existing`), whatever the configuration;
/// - for a Compose configuration (`compose`) under `hardened` (`hardened`) when no primary
///   of the configured `service` runs: Compose will start or create one, and the engine
///   resolves its binds then (a running primary of another service is stopped too).
///
/// A running single container or Compose primary that `up` reuses is left running: it is not
/// bound again. No engine call is made for a single container without
/// `--remove-existing-container` (a warm `up` makes no more than before).
///
/// For a Compose configuration the running containers of a project devcell's own `up` of this
/// workspace brought up are stopped too ([`workspace_projects`]), whose primary was removed
/// by hand (attack P5 with the primary removed: nothing found the sidecar through its
/// primary; spec-note 0657). A running container of a project not provably the workspace's
/// is not stopped (it may be another workspace's): the project is not this workspace's to
/// bring up (`ops::compose::claim_project`), and a hardened `up` refuses a container devcell
/// does not own that binds the workspace writable (`ops::foreign_writers`).
///
/// Returns how many containers were stopped. Errors: [`NotStopped`] (nothing was judged).
pub(crate) async fn before_reading(
    engine: &dyn Engine,
    id_labels: &BTreeMap<String, String>,
    (compose, hardened, remove_existing): (bool, bool, bool),
    service: Option<&str>,
) -> Result<usize, NotStopped> {
    if !(remove_existing || compose && hardened) {
        return Ok(0);
    }
    let not_stopped = |why| NotStopped { why, task: None };
    // the workspace's primaries by their identity labels, whatever they bind: a sidecar
    // needs no bind of the primary's to write the workspace
    let primaries = engine.find_containers(id_labels).await.map_err(|e| {
        not_stopped(format!(
            "the workspace's containers could not be listed: {e}"
        ))
    })?;
    // only the configured service's running primary is reused as it is; one of another
    // service (the repository renamed its primary: attack 30, H3) keeps writing while `up`
    // creates the new one, so it is stopped with its peers
    let primary_runs = primaries.iter().any(|p| {
        p.state == "running"
            && (!compose
                || service.is_none_or(|s| {
                    p.labels
                        .get(crate::engine::compose::SERVICE_LABEL)
                        .map(String::as_str)
                        == Some(s)
                }))
    });
    if !remove_existing && primary_runs {
        return Ok(0);
    }
    let mut stopped = 0;
    for primary in primaries {
        let running = primary.state == "running";
        if running
            || !peers(engine, &primary.id)
                .await
                .map_err(not_stopped)?
                .is_empty()
        {
            stopped += stop_workspace(engine, &primary.id)
                .await
                .map_err(not_stopped)?
                .len();
        }
    }
    if compose {
        // a sidecar whose primary was removed by hand: no primary leads to it
        let listed = engine.list_containers().await.map_err(|e| {
            not_stopped(format!(
                "the workspace's containers could not be listed: {e}"
            ))
        })?;
        for id in workspace_projects(id_labels, &listed) {
            stopped += stop_workspace(engine, &id)
                .await
                .map_err(not_stopped)?
                .len();
        }
    }
    Ok(stopped)
}

/// One running container of each Compose project among `listed` that is provably the
/// workspace's (`id_labels`): devcell's own `up` of this workspace brought it up
/// ([`crate::ops::compose::brought_up_by_this_workspace`]: the config-files label ends with
/// devcell's override file for its project, which labels a service with every one of
/// `id_labels`). A project the repository names after another workspace's is never reached
/// this way; nor one brought up by hand.
fn workspace_projects(
    id_labels: &BTreeMap<String, String>,
    listed: &[crate::engine::ContainerSummary],
) -> Vec<String> {
    let mut projects: Vec<&str> = Vec::new();
    let mut ids = Vec::new();
    for c in listed {
        let Some(project) = c.labels.get(crate::engine::compose::PROJECT_LABEL) else {
            continue;
        };
        if !matches!(c.state.as_str(), "running" | "restarting" | "paused")
            || projects.contains(&project.as_str())
            || !crate::ops::compose::brought_up_by_this_workspace(&c.labels, id_labels)
        {
            continue;
        }
        // one per project: stopping it stops its running peers ([`stop_workspace`])
        projects.push(project);
        ids.push(c.id.clone());
    }
    ids
}

/// The workspace's containers could not be confirmed stopped before devcell was to read what
/// they can write (a container git directory, a clone task's clone): nothing was read.
#[derive(Debug, thiserror::Error)]
#[error("{why}; nothing the workspace's containers can write was read")]
pub struct NotStopped {
    /// What failed, for people.
    pub why: String,
    /// The clone task whose fetch was refused, if any.
    pub task: Option<String>,
}

impl crate::ops::error::ProductError for NotStopped {
    fn code(&self) -> crate::diagnostics::ErrorCode {
        crate::diagnostics::ErrorCode::ContainerFailed
    }

    fn hint(&self) -> Option<String> {
        Some(match &self.task {
            Some(task) => format!(
                "stop the task's containers (`docker stop`), then `devcell fetch --task {task}` brings its branch back; the clone is kept as it is"
            ),
            None => "stop the workspace's containers (`docker stop`), then run the handoff again; the container git directories are kept as they are, so nothing is lost".to_string(),
        })
    }
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
