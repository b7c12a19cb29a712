//! Errors of the `config` layer.

use std::path::PathBuf;

use crate::diagnostics::{Hint, SourceLocation};

/// `Result` with [`ConfigError`].
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// An error reading, parsing or validating a `devcontainer.json`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file does not follow the JSONC grammar or the spec's schema at a known location.
    ///
    /// Displayed as `<file>:<line>:<column>: <property path>: <message>`.
    #[error("{location}: {}{message}", if location.path.is_empty() { String::new() } else { format!("{}: ", location.path) })]
    Invalid {
        /// Where it went wrong (boxed: keeps `Result`s small).
        location: Box<SourceLocation>,
        /// What was expected and what was found.
        message: String,
        /// How to fix it, if known.
        hint: Option<String>,
    },
    /// A `${…}` variable cannot be resolved, e.g. `${localEnv}` naming no variable
    /// ([spec: variables](https://containers.dev/implementors/json_reference/#variables-in-devcontainerjson)).
    #[error("{}{}{message}", file.as_ref().map(|f| format!("{}: ", f.display())).unwrap_or_default(), if path.is_empty() { String::new() } else { format!("{path}: ") })]
    Substitution {
        /// The config file, when known.
        file: Option<std::path::PathBuf>,
        /// JSON property path of the string holding the variable (empty for the root).
        path: String,
        /// What is wrong, naming the variable.
        message: String,
        /// How to fix it.
        hint: Option<String>,
    },
    /// A file could not be read.
    #[error("cannot read `{}`", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No `devcontainer.json` was found at the default locations
    /// ([spec: devcontainer.json location](https://containers.dev/implementors/spec/#devcontainerjson)).
    // The reference CLI's text first (tools match on it), then what else devcell looked for.
    #[error("Dev container config ({}) not found. Looked for {} in `{}`", searched.first().unwrap_or(workspace_folder).display(), searched.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(" and "), workspace_folder.display())]
    NotFound {
        /// The workspace folder searched.
        workspace_folder: PathBuf,
        /// The paths tried, in order.
        searched: Vec<PathBuf>,
        /// Configs found one level below `.devcontainer/` (selectable with `--config`).
        candidates: Vec<PathBuf>,
    },
    /// The file given with `--config` does not exist.
    #[error("Dev container config ({}) not found.", path.display())]
    ConfigMissing {
        /// The path given, made absolute.
        path: PathBuf,
        /// The path was given relative (to the current directory): the hint says so.
        relative: bool,
    },
}

impl Hint for ConfigError {
    fn hint(&self) -> Option<String> {
        match self {
            ConfigError::Invalid { hint, .. } => hint.clone(),
            ConfigError::NotFound { candidates, .. } if !candidates.is_empty() => Some(format!(
                "choose one of these configs with `--config`: {}",
                candidates
                    .iter()
                    .map(|p| format!("`{}`", p.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            ConfigError::NotFound { .. } => Some(
                "create `.devcontainer/devcontainer.json`, or pass `--workspace-folder`/`--config`"
                    .into(),
            ),
            ConfigError::ConfigMissing { relative: true, .. } => {
                Some("`--config` is relative to the current directory".into())
            }
            ConfigError::ConfigMissing {
                relative: false, ..
            } => None,
            ConfigError::Substitution { hint, .. } => hint.clone(),
            ConfigError::Io { .. } => None,
        }
    }
}

impl ConfigError {
    /// The source location, for errors that have one.
    pub fn location(&self) -> Option<&SourceLocation> {
        match self {
            ConfigError::Invalid { location, .. } => Some(location.as_ref()),
            _ => None,
        }
    }
}
