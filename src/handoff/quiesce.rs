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
//! Which containers: the primary (the agent's), and every other container of its Compose
//! project with a bind whose host source holds, or lies inside, the workspace or a container
//! git directory (a sidecar binding `..:/w` can write both). A sidecar that binds neither
//! (a database on a named volume) keeps running: it cannot write what the fetch-back reads. The
//! next handoff starts the stopped containers again (`starting the stopped workspace
//! container`; Compose's `start` starts every container of the project).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::Engine;

/// How long the engine lets the workspace's processes end on SIGTERM before it kills them.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long stopping and confirming may take in all, whatever the engine does.
const QUIESCE_DEADLINE: Duration = Duration::from_secs(60);

/// Stops the primary container `primary` and every container of its Compose project with a
/// bind overlapping one of `guarded` (the workspace root, each repository's working tree and
/// container git directory), then confirms with the engine that none of them runs.
///
/// Returns the ids stopped, primary first. Errors: a sentence for people when a container
/// could not be stopped or confirmed stopped (then the fetch-back must not read its git).
pub async fn stop_workspace(
    engine: &dyn Engine,
    primary: &str,
    guarded: &[PathBuf],
) -> Result<Vec<String>, String> {
    match tokio::time::timeout(QUIESCE_DEADLINE, stop_and_confirm(engine, primary, guarded)).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the workspace container {} was not confirmed stopped within {} s",
            short(primary),
            QUIESCE_DEADLINE.as_secs()
        )),
    }
}

async fn stop_and_confirm(
    engine: &dyn Engine,
    primary: &str,
    guarded: &[PathBuf],
) -> Result<Vec<String>, String> {
    let ids = writers(engine, primary, guarded).await?;
    for id in &ids {
        match engine.stop_container(id, Some(STOP_TIMEOUT)).await {
            // a container removed meanwhile writes nothing any more
            Ok(()) | Err(crate::engine::EngineError::NoSuchContainer { .. }) => {}
            Err(e) => {
                return Err(format!(
                    "the container {} could not be stopped: {e}",
                    short(id)
                ));
            }
        }
    }
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

/// The primary, then the running containers of its Compose project (when it has one) whose
/// binds overlap `guarded`.
async fn writers(
    engine: &dyn Engine,
    primary: &str,
    guarded: &[PathBuf],
) -> Result<Vec<String>, String> {
    let info = engine.inspect_container(primary).await.map_err(|e| {
        format!(
            "the container {} could not be inspected: {e}",
            short(primary)
        )
    })?;
    let mut ids = vec![primary.to_string()];
    let Some(project) = info
        .as_ref()
        .and_then(|i| i.labels.get(crate::engine::compose::PROJECT_LABEL))
    else {
        return Ok(ids);
    };
    let labels = std::collections::BTreeMap::from([(
        crate::engine::compose::PROJECT_LABEL.to_string(),
        project.clone(),
    )]);
    let others = engine.find_containers(&labels).await.map_err(|e| {
        format!("the containers of Compose project `{project}` could not be listed: {e}")
    })?;
    for c in others {
        if c.id == primary || ids.contains(&c.id) {
            continue;
        }
        let Ok(Some(other)) = engine.inspect_container(&c.id).await else {
            continue; // gone meanwhile
        };
        if other.running
            && other
                .mounts
                .iter()
                .any(|m| m.kind == "bind" && overlaps(Path::new(&m.source), guarded))
        {
            ids.push(c.id);
        }
    }
    Ok(ids)
}

/// Whether `source` holds, equals or lies inside one of `guarded`.
fn overlaps(source: &Path, guarded: &[PathBuf]) -> bool {
    guarded
        .iter()
        .any(|g| source.starts_with(g) || g.starts_with(source))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_above_inside_or_at_a_guarded_path_overlaps() {
        let guarded = vec![PathBuf::from("/h/ws"), PathBuf::from("/state/git/k1")];
        assert!(overlaps(Path::new("/h"), &guarded), "above");
        assert!(overlaps(Path::new("/h/ws"), &guarded), "at");
        assert!(overlaps(Path::new("/h/ws/api/data"), &guarded), "inside");
        assert!(overlaps(Path::new("/state/git/k1/git"), &guarded));
        assert!(!overlaps(Path::new("/h/ws2"), &guarded), "a sibling");
        assert!(!overlaps(Path::new("/var/lib/db"), &guarded));
    }
}
