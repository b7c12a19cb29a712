//! The container an `up` finds for the workspace (or a Compose project's primary service),
//! settled before anything else: removed under `--remove-existing-container` (its workspace git
//! record with it, [`crate::ops::workspace_git::forget`]), required under
//! `--expect-existing-container`. Shared by [`crate::ops::up`] and [`crate::ops::compose_up`].

use crate::engine::{ContainerInfo, Engine};
use crate::ops::error::Result;
use crate::ops::options::UpOptions;
use crate::progress::{Event, Reporter};

/// The container found for the workspace (`up`) or its primary service (Compose), removed
/// first under `--remove-existing-container`; none under `--expect-existing-container` is an
/// error naming the `labels` it was looked up by.
///
/// Errors: [`crate::ops::error::OpsError::NoContainer`], the engine's.
pub(crate) async fn settle_existing(
    engine: &dyn Engine,
    existing: Option<ContainerInfo>,
    opts: &UpOptions,
    labels: &std::collections::BTreeMap<String, String>,
    reporter: &dyn Reporter,
) -> Result<Option<ContainerInfo>> {
    let mut existing = existing;
    if let Some(found) = &existing
        && opts.remove_existing_container
    {
        reporter.report(Event::Status(format!(
            "removing the existing container {}",
            crate::ops::target::short(&found.id)
        )));
        engine.remove_container(&found.id, true).await?;
        crate::ops::workspace_git::forget(&found.id);
        existing = None;
    }
    if existing.is_none() && opts.expect_existing_container {
        return Err(crate::ops::error::OpsError::NoContainer {
            labels: crate::ops::target::join_labels(labels),
            expected: true,
        });
    }
    Ok(existing)
}
