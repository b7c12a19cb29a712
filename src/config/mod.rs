//! L0: `devcontainer.json` → typed, substituted, merged configuration.
//!
//! Sub-modules: [`discover`] (where configs live), [`jsonc`] (JSONC with located errors),
//! [`model`] (typed properties), [`substitute`] (`${…}` variables), [`id`] (`${devcontainerId}`),
//! [`workspace`] (default `workspaceFolder`/`workspaceMount`), [`metadata`] (the
//! `devcontainer.metadata` label and the spec's merge rules), [`ownership`] (host uids: the
//! workspace user for `updateRemoteUserUID`, host-side git and devcell's own files), [`hostgit`]
//! (devcell's own host `git`, run so that nothing a repository configures can execute),
//! [`listing`] (a folder's names, read through a descriptor opened without following links).

pub mod bounded;
pub mod discover;
pub mod error;
pub mod hostgit;
pub mod id;
pub mod jsonc;
pub mod listing;
pub mod metadata;
pub mod model;
pub mod ownership;
pub mod substitute;
pub mod workspace;

pub use error::{ConfigError, Result};
