//! Errors of the `config` layer.

use crate::diagnostics::SourceLocation;

/// `Result` with [`ConfigError`].
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// An error reading, parsing or validating a `devcontainer.json`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file does not follow the JSONC grammar or the spec's schema at a known location.
    #[error("{location}: {}{message}", if location.path.is_empty() { String::new() } else { format!("{}: ", location.path) })]
    Invalid {
        /// Where it went wrong.
        location: SourceLocation,
        /// What was expected and what was found.
        message: String,
        /// How to fix it, if known.
        hint: Option<String>,
    },
    /// A file could not be read.
    #[error("cannot read `{}`", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
