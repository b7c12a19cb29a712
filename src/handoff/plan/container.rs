//! The container of a handoff's plan: the target `up` brings up, the image, Features and
//! container the configuration names, and the `up` a container handoff runs.

use crate::config::model::ConfigKind;
use crate::engine::Engine;
use crate::features::lockfile::LockfileMode;
use crate::handoff::repository::Workspace;
use crate::ops::error::Result;
use crate::ops::load::{CommittedSide, WorkspaceOverride};
use crate::ops::options::{SecurityOptions, TargetOptions, UpOptions};
use crate::ops::target::{find_container, id_labels};
use crate::settings::Profile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{HandoffOptions, PlannedContainer, Prepared, safe_directories};

/// The plan's `image` for a Compose configuration: `compose service <name>`.
pub(crate) const COMPOSE_PLAN_PREFIX: &str = "compose service ";

/// The target a handoff brings up: the workspace root, the configuration found, the
/// caller's environment and the handoff's workspace mount and folder.
pub(super) fn handoff_target(
    opts: &HandoffOptions,
    ws: &Workspace,
    config: Option<PathBuf>,
    mount: Option<crate::engine::Mount>,
) -> TargetOptions {
    TargetOptions {
        workspace_folder: ws.root.clone(),
        config,
        mount_workspace_git_root: false,
        id_labels: Vec::new(),
        env: opts.env.clone(),
        workspace_override: Some(WorkspaceOverride {
            mount,
            folder: ws.container_root.clone(),
            committed: committed_side(opts),
        }),
        ..TargetOptions::default()
    }
}

/// Where the registry judgement reads the user's committed side: a clone task's clone is the
/// agent's to commit in, so its `HEAD` is not the user's (attack 25, P6); the user's repository
/// at the task's base stands for it (no committed side for a multi-repository task).
pub(super) fn committed_side(opts: &HandoffOptions) -> CommittedSide {
    match &opts.sandbox {
        None => CommittedSide::Workspace,
        Some(sandbox) => match &sandbox.source {
            Some(repository) => CommittedSide::Source {
                repository: repository.clone(),
                revision: sandbox.base.clone(),
            },
            None => CommittedSide::Nothing,
        },
    }
}

/// What a handoff's configuration makes of the plan's container: the image, the Features, the
/// container and the configuration's own warnings.
pub(super) struct ConfiguredContainer {
    /// The image reference, `build <Dockerfile>` or `compose service <name>` (empty without a
    /// configuration or on the host).
    pub(super) image: String,
    /// The Features the configuration asks for, as written.
    pub(super) features: Vec<String>,
    /// The container (its action, id and identity labels).
    pub(super) container: PlannedContainer,
    /// The configuration's own warnings (unknown, duplicate, deprecated properties).
    pub(super) warnings: Vec<crate::diagnostics::Warning>,
}

/// The image, Features, container and configuration warnings of the plan
/// ([`planned_container`]; none on the host or without a configuration), with `--container`'s
/// named container checked against it.
///
/// Errors: as [`planned_container`]; the named container's refusal.
pub(super) async fn plan_container(
    opts: &HandoffOptions,
    engine: Option<&dyn Engine>,
    target: &TargetOptions,
    host: bool,
    confine: Option<crate::security::Grants>,
    profile: Profile,
) -> Result<ConfiguredContainer> {
    let configured = match &target.config {
        Some(_) if !host => planned_container(target, engine, confine).await?,
        _ => ConfiguredContainer {
            image: String::new(),
            features: Vec::new(),
            container: PlannedContainer {
                action: "none".into(),
                id: None,
                labels: BTreeMap::new(),
            },
            warnings: Vec::new(),
        },
    };
    if let Some(named) = &opts.container {
        crate::handoff::named_container::check_planned(
            engine,
            named,
            &configured.container,
            configured.image.starts_with(COMPOSE_PLAN_PREFIX),
            profile,
        )
        .await?;
    }
    Ok(configured)
}

/// The image (reference, or `build <Dockerfile>`), the Features as written, the container
/// (asked of `engine` when there is one) of a container handoff's plan, and the
/// configuration's own warnings.
pub(super) async fn planned_container(
    target: &TargetOptions,
    engine: Option<&dyn Engine>,
    confine: Option<crate::security::Grants>,
) -> Result<ConfiguredContainer> {
    let loaded = crate::ops::target::load_for(target, confine)?;
    // A Compose configuration is brought up through Compose (spec-note 0606); no other
    // kind the steps refuse gets a container in the plan.
    if loaded.typed.kind() != ConfigKind::Compose {
        crate::ops::up::supported_kind(&loaded)?;
    }
    let labels = id_labels(target, &loaded);
    let image = match loaded.typed.kind() {
        ConfigKind::Image => loaded.typed.image.clone().unwrap_or_default(),
        ConfigKind::Dockerfile => format!(
            "build {}",
            loaded
                .typed
                .dockerfile_path(&loaded.config_file)
                .unwrap_or_default()
                .display()
        ),
        ConfigKind::Compose => format!(
            "{COMPOSE_PLAN_PREFIX}{}",
            loaded.typed.service.clone().unwrap_or_default()
        ),
        _ => String::new(),
    };
    let features = loaded.typed.features.keys().cloned().collect();
    let found = match engine {
        Some(engine) => find_container(
            engine,
            &labels,
            crate::ops::target::expected_workspace(target, &loaded).as_deref(),
            &mut Vec::new(),
        )
        .await
        .ok(),
        None => None,
    };
    let (action, id) = match found {
        Some(Some(info)) => (if info.running { "reuse" } else { "start" }, Some(info.id)),
        Some(None) => ("create", None),
        // no engine, or it did not answer
        None => ("unknown", None),
    };
    Ok(ConfiguredContainer {
        image,
        features,
        container: PlannedContainer {
            action: action.into(),
            id,
            labels,
        },
        warnings: loaded.warnings,
    })
}

/// The `up` a container handoff runs: the hardened profile, the handoff's mounts, network,
/// secrets and `safe.directory` entries; the lockfile honoured, never written.
pub(crate) fn up_options(p: &Prepared, opts: &HandoffOptions) -> UpOptions {
    UpOptions {
        target: p.target.clone(),
        secrets: p.secrets.clone(),
        mounts: p.extra_mounts.clone(),
        security: SecurityOptions {
            profile: Some(p.profile),
            network: Some(p.network),
            ..opts.security.clone()
        },
        settings: opts.settings.clone(),
        lockfile: match opts.lockfile {
            LockfileMode::Write => LockfileMode::ReadOnly,
            other => other,
        },
        safe_directories: safe_directories(&p.workspace, &p.gits)
            .into_iter()
            .chain(p.dotfiles.iter().filter_map(|d| d.safe_directory()))
            .collect(),
        dotfiles: p.dotfiles.as_ref().map(|d| d.in_container.clone()),
        covers: crate::handoff::container_git::covers(
            (&p.workspace.root, &p.workspace.container_root),
            &p.gits,
        )
        .into_iter()
        .chain(p.nested.covers())
        .collect(),
        owned_sources: p
            .gits
            .iter()
            .filter_map(|g| g.slot.parent().map(Path::to_path_buf))
            .take(1)
            .collect(),
        recorded_features: crate::ops::environment::RecordedFeatures::of(&opts.environment),
        // `--container`: the named container (checked in the plan), never one made in its place
        expect_existing_container: opts.container.is_some(),
        ..UpOptions::default()
    }
}
