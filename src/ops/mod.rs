//! L4: the Dev Container spec's operations, one file per reference CLI command ([`up`],
//! [`build`], [`exec`], [`set_up`], [`read_configuration`], [`run_user_commands`], [`down`],
//! [`outdated`], [`resolve_dependencies`], [`features_publish`], devcell's own [`ports`]), each a short list of named steps over the shared step modules:
//! [`load`] (the one loading pipeline), [`options`] (what the caller asks), [`target`] (find the container), [`attach`] (its merged
//! metadata, user, folder and remote environment), [`entries`] (the metadata entries merged
//! before anything exists), [`permissions`] and [`preview`] (the security decision), [`image`]
//! and [`dockerfile`] (the image and its Features), [`bring_up`] (what both `up`s share), [`users`]
//! (uids, passwd, ownership), [`hooks`] (lifecycle hooks, the bring-up lock), [`container`]
//! (the create request), plus [`secrets`], the [`state_folder`], the
//! [`audit_context`] `set-up` and `audit` share, the [`environment`] record (what an `up`,
//! `build` or handoff was made from, and the drift check of `--environment`), and the one
//! [`error`] type. Library code never prints: results are
//! values, progress goes to a `progress::Reporter`.

pub mod attach;
pub mod audit_context;
pub mod bring_up;
pub mod build;
pub(crate) mod compose;
pub(crate) mod compose_builds;
pub(crate) mod compose_judged;
pub(crate) mod compose_network;
pub(crate) mod compose_restart;
pub(crate) mod compose_up;
pub mod container;
pub(crate) mod create;
pub mod dockerfile;
pub(crate) mod dockerfile_judge;
pub mod dotfiles;
pub mod down;
pub mod egress;
pub mod entries;
pub mod environment;
pub mod error;
pub mod exec;
pub mod exec_user;
pub mod executor;
pub(crate) mod existing;
#[cfg(test)]
mod fake_engine_tests;
pub(crate) mod feature_registries;
pub mod features_info;
pub mod features_publish;
pub mod features_test;
pub(crate) mod foreign_writers;
pub mod generate_docs;
pub mod gpu;
pub mod hooks;
pub(crate) mod host_copies;
pub mod image;
pub mod image_files;
pub mod load;
pub(crate) mod lockfile_io;
pub mod marker_record;
pub mod options;
pub mod outdated;
pub mod permissions;
pub mod ports;
pub mod ports_detached;
pub mod ports_relay;
pub mod preview;
pub mod quiesce;
pub mod read_configuration;
pub mod resolve_dependencies;
pub mod run_user_commands;
pub mod secrets;
pub mod set_up;
pub mod state_folder;
pub mod target;
pub mod templates;
pub mod up;
pub mod users;
pub mod verify;
pub mod workspace_git;

pub use crate::lifecycle::Dotfiles;
pub use bring_up::{ContainerAction, UpResult};
pub use build::{BuildOptions, BuildResult, PushedImage, build};
pub use down::{DownOptions, DownResult, down};
pub use error::{OpsError, Result, registry_failure_line};
pub use exec::{ExecOptions, ExecStreams, exec};
pub use load::{LoadOptions, LoadedConfiguration, load_configuration};
pub use options::{ImageBuildOptions, SecurityOptions, TargetOptions, UidUpdateDefault, UpOptions};
pub use read_configuration::{
    ReadConfiguration, ReadConfigurationExtras, ReadConfigurationOptions, read_configuration,
    read_configuration_with,
};
pub use run_user_commands::{RunUserCommandsOptions, RunUserCommandsResult, run_user_commands};
pub use secrets::read_secrets_file;
pub use set_up::{SetUpOptions, SetUpResult, set_up};
pub use up::up;

/// Lifecycle types the command line fills in (re-exported so `cli` depends on `ops` only).
pub use crate::lifecycle::{PlanOptions, UserEnvProbe};

/// The terminal size `exec` and `handoff` forward to the container's TTY (re-exported so `cli`
/// depends on `ops` and `handoff` only).
pub use crate::engine::TtySize;
/// How `up`/`handoff` treat `devcontainer-lock.json` (re-exported for `cli`).
pub use crate::features::lockfile::LockfileMode;
