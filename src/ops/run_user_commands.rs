//! `run-user-commands`: run the lifecycle hooks of an existing dev container, as
//! `@devcontainers/cli run-user-commands` does.

use crate::lifecycle::{BringUpKind, LifecycleReport, PlanOptions, UserEnvProbe};
use crate::ops::attach::{attach_target, report_grants};
use crate::ops::error::Result;
use crate::ops::hooks::run_hooks;
use crate::ops::options::TargetOptions;
use crate::ops::secrets::{MaskingReporter, redact};
use crate::progress::Reporter;
use indexmap::IndexMap;

/// Inputs of [`run_user_commands`].
#[derive(Debug, Clone, Default)]
pub struct RunUserCommandsOptions {
    /// Workspace, config and container identity.
    pub target: TargetOptions,
    /// `--skip-post-create`, `--skip-post-attach`, `--skip-non-blocking-commands`, `--prebuild`.
    pub plan: PlanOptions,
    /// `--dotfiles-*`: installed after `postCreateCommand` unless installed before.
    pub dotfiles: Option<crate::lifecycle::Dotfiles>,
    /// `--remote-env NAME=VALUE`.
    pub remote_env: IndexMap<String, String>,
    /// Secrets (`--secrets-file`).
    pub secrets: IndexMap<String, String>,
    /// `--default-user-env-probe`.
    pub default_user_env_probe: UserEnvProbe,
    /// `--allow`: grants for what the re-read configuration uses beyond what `up` judged
    /// (spec-note 0443).
    pub allow: Vec<String>,
}

/// What [`run_user_commands`] did.
#[derive(Debug, Clone, Default)]
pub struct RunUserCommandsResult {
    /// The hooks that ran.
    pub lifecycle: LifecycleReport,
    /// Git entries the hooks made in the workspace since `up`, moved aside (spec-note 0466);
    /// shown as `devcell.quarantinedGit` when any.
    pub quarantined_git: Vec<crate::security::git_quarantine::Quarantined>,
}

/// `run-user-commands`: runs the lifecycle hooks in the existing, running dev container
/// (once-hooks only when their marker says they have not completed; `postAttachCommand`
/// always), the secrets in their exec environment and masked in every event and error.
/// Returns the hooks that ran and the git entries they made, moved aside (whether they
/// failed or not; a failure's are said on `reporter` only).
///
/// Errors: [`OpsError::NoContainer`], [`OpsError::NotRunning`],
/// [`OpsError::Lifecycle`], [`OpsError::Engine`], [`OpsError::Config`]; any of
/// them as [`OpsError::Redacted`] when its text held a secret value.
pub async fn run_user_commands(
    opts: &RunUserCommandsOptions,
    reporter: &dyn Reporter,
) -> Result<RunUserCommandsResult> {
    let reporter = MaskingReporter {
        inner: reporter,
        secrets: &opts.secrets,
    };
    let run = async {
        let engine = crate::engine::connect().await?;
        let (attached, requests) = attach_target(
            &*engine,
            &opts.target,
            &opts.allow,
            opts.default_user_env_probe,
        )
        .await?;
        report_grants(&requests, &reporter);
        let ran = run_hooks(
            &*engine,
            &attached,
            BringUpKind::Running,
            opts.plan,
            opts.dotfiles.as_ref(),
            &opts.remote_env,
            &opts.secrets,
            &[],
            &reporter,
        )
        .await;
        // what the hooks left in the host workspace, whether they failed or not (attack K11)
        crate::security::planted_after::after_command(
            &attached.container,
            &attached.workspace_folder,
            &reporter,
        );
        let quarantined_git = crate::ops::workspace_git::after_command(
            &attached.container.id,
            &opts.allow,
            &reporter,
        );
        Ok(RunUserCommandsResult {
            lifecycle: ran?,
            quarantined_git,
        })
    };
    run.await.map_err(|e| redact(e, &opts.secrets))
}
