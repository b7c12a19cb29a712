//! L3: lifecycle hooks (`initializeCommand`, `onCreateCommand` … `postAttachCommand`) in spec
//! order ([spec: lifecycle](https://containers.dev/implementors/spec/#lifecycle)).
//!
//! - [`hook_name`]: [`LifecycleHook`], the six hooks in spec order.
//! - [`hook`]: the typed model — the three command forms
//!   ([`HookCommand`]: string via `/bin/sh -c`, array without a shell, object run concurrently).
//! - [`plan`]: which hooks a bring-up runs ([`BringUpKind`], [`PlanOptions`]), split at `waitFor`.
//! - [`runner`]: runs a plan through a [`HookExecutor`], stopping at the first failing stage, with
//!   run-once [`marker`]s written only on success.
//! - [`report`]: what a run did ([`LifecycleReport`]) and the failed stage ([`HookFailure`]).
//! - [`executor`]: the [`HookExecutor`] boundary; [`HostExecutor`] runs `initializeCommand`.
//! - [`dotfiles`]: the user's dotfiles, installed after `postCreateCommand` ([`run_plan_with_dotfiles`]).
//! - [`probe`]: `userEnvProbe`, the user's shell environment for hooks ([`probe_user_env`]).
//!
//! Input is the reference CLI's merged configuration as a `serde_json::Value` (hook arrays
//! `onCreateCommands` … `postAttachCommands`, plus `initializeCommand` and `waitFor`), or the
//! image metadata entries.
//!
//! Typical use by `up`:
//!
//! ```no_run
//! # async fn demo(executor: impl devcell::lifecycle::HookExecutor, merged: serde_json::Value,
//! #   context: devcell::lifecycle::HookContext) -> Result<(), devcell::lifecycle::LifecycleError> {
//! use devcell::lifecycle::{BringUpKind, Plan, PlanOptions, run_stages};
//! use devcell::progress::NoopReporter;
//! let plan = Plan::from_merged_configuration(&merged, BringUpKind::Created, PlanOptions::default())?;
//! let blocking = run_stages(&executor, &plan.blocking, &context, &NoopReporter).await?;
//! // … report ready / hand off to the agent …
//! let background = run_stages(&executor, &plan.background, &context, &NoopReporter).await?;
//! # let _ = (blocking, background); Ok(()) }
//! ```

pub mod dotfiles;
pub mod error;
pub mod executor;
pub mod hook;
pub mod hook_name;
pub mod marker;
pub mod plan;
pub mod probe;
pub mod report;
pub mod runner;

pub use dotfiles::{
    Dotfiles, DotfilesOutcome, DotfilesRun, INSTALL_SCRIPT as DOTFILES_INSTALL_SCRIPT,
    MARKED_SCRIPT as DOTFILES_MARKED_SCRIPT, run_plan_with_dotfiles,
};
pub use error::{ExecutorError, LifecycleError, Result};
pub use executor::{ExecRequest, HookEnv, HookExecutor, HostExecutor};
pub use hook::{HookCommand, SimpleCommand};
pub use hook_name::LifecycleHook;
pub use marker::MarkerContext;
pub use plan::{
    BringUpKind, HookSources, Plan, PlanOptions, RunCondition, SourcedCommand, Stage,
    initialize_stage, wait_for,
};
pub use probe::{DEFAULT_PROBE_TIMEOUT, UserEnvProbe, probe_user_env};
pub use report::{HookFailure, HookRun, LifecycleReport, SkipReason, SkippedHook};
pub use runner::{HookContext, already_ran, run_initialize_command, run_plan, run_stages};
