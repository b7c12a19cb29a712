//! The plan of a Compose configuration: every service judged as the handoff judges it
//! (spec-note 0609).

use crate::engine::Engine;
use crate::ops::error::{OpsError, Result};

use super::container::up_options;
use super::{HandoffOptions, HandoffPlan, PlannedContainer, PlannedService, Prepared, listed_once};

/// [`super::plan`] of a Compose configuration: every service judged with the configuration and the workspace's
/// git directories ([`crate::ops::compose_up::preview_compose`]), the primary service's
/// container as the plan's `container`, and each service listed with its requests.
pub(super) async fn plan_compose(
    prepared: Prepared,
    opts: &HandoffOptions,
    engine: Option<&dyn Engine>,
) -> Result<HandoffPlan> {
    let config_file = prepared.plan.config_file.clone().unwrap_or_default();
    let Some(engine) = engine else {
        return Err(OpsError::Unsupported {
            message: format!(
                "`{}`: `handoff --plan` of a Docker Compose configuration needs the engine (it looks up the project's containers)",
                config_file.display()
            ),
            hint: Some("start the engine, or check `DOCKER_HOST`".into()),
        });
    };
    let mut up_opts = up_options(&prepared, opts);
    if let Some(mount) = prepared
        .target
        .workspace_override
        .as_ref()
        .and_then(|o| o.mount.as_ref())
    {
        up_opts.mounts.insert(0, mount.clone());
    }
    let choice = crate::ops::up::load_up(&up_opts)?;
    let preview =
        crate::ops::compose_up::preview_compose(engine, &up_opts, &choice, &prepared.git_requests)
            .await?;
    let action = |c: Option<&crate::engine::ContainerInfo>| match c {
        None => "create",
        Some(c) if c.running => "reuse",
        Some(_) => "start",
    };
    let mut plan = prepared.plan;
    plan.services = preview
        .services
        .iter()
        .map(|s| PlannedService {
            name: s.name.clone(),
            role: if s.primary { "primary" } else { "sidecar" }.to_string(),
            image: s.image.clone(),
            started: s.started,
            container: if s.started {
                action(s.container.as_ref()).to_string()
            } else {
                "none".to_string()
            },
            id: s.container.as_ref().map(|c| c.id.clone()),
            permissions: preview
                .requests
                .iter()
                .filter(|r| {
                    matches!(&r.source, crate::security::Source::ComposeService { service, .. } if *service == s.name)
                })
                .cloned()
                .collect(),
        })
        .collect();
    if let Some(primary) = preview.services.iter().find(|s| s.primary) {
        plan.container = PlannedContainer {
            action: action(primary.container.as_ref()).to_string(),
            id: primary.container.as_ref().map(|c| c.id.clone()),
            labels: crate::engine::compose::service_labels(&preview.project, &primary.name),
        };
    }
    plan.permissions = listed_once(preview.requests);
    plan.permission_notes.push(
        crate::ops::compose_network::ComposeNetwork::of(prepared.network)
            .note()
            .to_string(),
    );
    plan.permission_notes.push(
        "the primary service's image, its `USER` and its Features' metadata are judged when the handoff builds it, before its container exists".to_string(),
    );
    Ok(plan)
}
