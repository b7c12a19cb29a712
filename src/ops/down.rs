//! `down`: stop the dev container of a workspace; with `remove`, remove it and its
//! devcell-owned (anonymous) volumes. The workspace is never touched.

use std::time::Duration;

use crate::engine::{DockerEngine, Engine};
use crate::ops::error::Result;
use crate::ops::options::TargetOptions;
use crate::ops::target::{id_labels, load, short};
use crate::progress::{Event, Reporter};

/// Inputs of [`down`].
#[derive(Debug, Clone, Default)]
pub struct DownOptions {
    /// Workspace, config and container identity.
    pub target: TargetOptions,
    /// `--remove`: remove the container and its anonymous volumes after stopping it.
    pub remove: bool,
    /// Seconds to wait for the container to stop before killing it (`None` = engine default).
    pub timeout: Option<Duration>,
}

/// What [`down`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownResult {
    /// The containers stopped (and removed, with `remove`).
    pub container_ids: Vec<String>,
    /// Whether they were removed.
    pub removed: bool,
}

impl DownResult {
    /// `{"outcome":"success","containerIds":[…],"removed":bool}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "outcome": "success",
            "containerIds": self.container_ids,
            "removed": self.removed,
        })
    }
}

/// Stops (and with `remove`, removes) every container carrying the workspace's id labels.
/// No container is not an error.
///
/// Errors: `Config` for the configuration, `Engine` when the engine fails.
pub async fn down(opts: &DownOptions, reporter: &dyn Reporter) -> Result<DownResult> {
    let engine = DockerEngine::connect().await?;
    down_with(&engine, opts, reporter).await
}

/// [`down`] through `engine`.
///
/// Errors: as [`down`].
pub async fn down_with(
    engine: &dyn Engine,
    opts: &DownOptions,
    reporter: &dyn Reporter,
) -> Result<DownResult> {
    let loaded = load(&opts.target)?;
    let labels = id_labels(&opts.target, &loaded);
    let mut result = DownResult {
        container_ids: Vec::new(),
        removed: opts.remove,
    };
    for container in engine.find_containers(&labels).await? {
        if opts.remove {
            reporter.report(Event::Status(format!(
                "removing container {}",
                short(&container.id)
            )));
            engine.remove_container(&container.id, true).await?;
        } else {
            reporter.report(Event::Status(format!(
                "stopping container {}",
                short(&container.id)
            )));
            engine.stop_container(&container.id, opts.timeout).await?;
        }
        result.container_ids.push(container.id);
    }
    Ok(result)
}
