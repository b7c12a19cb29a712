//! The typed `devcontainer.json` model and its validation
//! ([spec: devcontainer.json reference](https://containers.dev/implementors/json_reference/),
//! schema `devContainer.base.schema.json`).
//!
//! [`validate`] checks a parsed [`Document`](crate::config::jsonc::Document) against the
//! schema's types and returns a [`DevContainerConfig`] plus warnings. Every error is a located
//! [`ConfigError::Invalid`](crate::config::error::ConfigError::Invalid) (file, line, column,
//! property path, what was expected, what was found). Unknown properties are kept in the JSON
//! value (and in [`DevContainerConfig::unknown`]) with a warning; they are never dropped.
//!
//! Strings containing `${` are not checked against a pattern (mount syntax, `host:port`,
//! memory sizes): the variable may produce a valid value after substitution.
//!
//! [`migrate_legacy`] moves the legacy top-level `extensions`, `settings` and `devPort` into
//! `customizations.vscode`, as the reference CLI does.
//!
//! Files: `types.rs` (the typed configuration), `schema.rs` (the schema's checks, "did you
//! mean" for unknown properties, the mount string check), `legacy.rs` (the legacy VS Code
//! properties moved into `customizations.vscode`).

mod legacy;
mod schema;
mod types;

pub use legacy::{migrate_feature_legacy, migrate_legacy};
pub use schema::{check_mount_string, describe, did_you_mean, validate, validate_value};
pub use types::*;

#[cfg(test)]
mod tests;
