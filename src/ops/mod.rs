//! L4: the Dev Container spec's operations, one file per reference CLI command (`up`, `build`,
//! `exec`, `set-up`, `read-configuration`, `run-user-commands`, `down`, `outdated`,
//! `features resolve-dependencies`, `features publish`) and devcell's `audit`, over shared
//! steps (the container request, the executor, secrets, the lockfile, the state folder). Library
//! code never prints: results are values, progress goes to a `progress::Reporter`.

pub mod build;
pub mod container;
pub mod container_audit;
pub mod down;
pub mod envelope;
pub mod error;
pub mod exec;
pub mod executor;
pub mod features_publish;
pub mod image_files;
pub(crate) mod lockfile_io;
pub mod marker_record;
pub mod outdated;
pub mod read_configuration;
pub mod repository;
pub mod resolve_dependencies;
pub mod secrets;
pub mod set_up;
pub mod state_folder;
pub mod up;

pub use build::{BuildOptions, BuildResult, PushedImage, build};
pub use down::{DownOptions, DownResult, down};
pub use error::{HandoffError, Result};
pub use exec::{ExecOptions, ExecStreams, exec};
pub use read_configuration::{
    LoadOptions, LoadedConfiguration, ReadConfiguration, ReadConfigurationExtras,
    ReadConfigurationOptions, load_configuration, read_configuration, read_configuration_with,
};
pub use set_up::{SetUpOptions, SetUpResult, set_up};
pub use up::{
    ContainerAction, ImageBuildOptions, RunUserCommandsOptions, SecurityOptions, TargetOptions,
    UidUpdateDefault, UpOptions, UpResult, read_secrets_file, run_user_commands, up,
};

/// Lifecycle types the command line fills in (re-exported so `cli` depends on `ops` only).
pub use crate::lifecycle::{PlanOptions, UserEnvProbe};

/// The terminal size `exec` and `handoff` forward to the container's TTY (re-exported so `cli`
/// depends on `ops` and `handoff` only).
pub use crate::engine::TtySize;
/// How `up`/`handoff` treat `devcontainer-lock.json` (re-exported for `cli`).
pub use crate::features::lockfile::LockfileMode;
