//! L5: devcell's agent product, above the spec operations ([`crate::ops`]): the handoff
//! [`plan`], its container and host runtimes ([`agent`], [`host`]) running one [`session`],
//! the session state ([`state`]), the workspace's [`repository`] inspection, each repository's
//! [`container_git`] directory and [`git_identity`], every other `.git` below the workspace
//! covered ([`nested_git`]), the workspace stopped after the agent
//! ([`quiesce`]), the context file and `AGENTS.md`
//! ([`context`], [`agents_md`]), the environment record's check ([`environment`]), the JSON [`envelope`], and the product's own commands
//! ([`status`], [`delete`], [`doctor`], [`prune`], [`audit`]). Library code never prints:
//! results are values, progress goes to a `progress::Reporter`.

pub mod agent;
pub mod agents_md;
pub mod audit;
pub mod container_git;
pub mod context;
pub mod delete;
pub mod doctor;
pub mod door;
pub mod dotfiles;
pub mod envelope;
pub mod environment;
pub mod expect_mount;
pub mod failure;
#[cfg(test)]
mod fake_engine_tests;
pub mod git_identity;
pub mod group;
pub mod group_request;
pub mod host;
pub mod mail_host;
pub mod mail_worktree;
pub mod named_container;
pub mod nested_git;
pub mod plan;
pub mod prune;
/// Stopping the workspace: moved to `ops` (`up` stops a Compose project before judging it).
pub use crate::ops::quiesce;
pub mod repository;
pub mod session;
pub mod state;
pub mod status;
pub mod status_all;
pub mod steps;
pub mod task;
