//! Errors of the `handoff` layer (operations).

use crate::config::ConfigError;
use crate::diagnostics::{Hint, SourceLocation};

/// `Result` with [`HandoffError`].
pub type Result<T, E = HandoffError> = std::result::Result<T, E>;

/// An operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// The dev container configuration could not be found, read or validated.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Feature references, options or their install order are invalid.
    #[error(transparent)]
    Feature(#[from] crate::features::FeatureError),
    /// The workspace folder does not exist or is not a directory.
    #[error("workspace folder `{}` is not a directory", path.display())]
    WorkspaceFolder {
        /// The folder given.
        path: std::path::PathBuf,
    },
    /// Packaging or publishing Features failed.
    #[error(transparent)]
    Publish(#[from] crate::features::publish::PublishError),
    /// The async runtime could not be started.
    #[error("cannot start the async runtime")]
    Runtime {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `--additional-features` is not a JSON object.
    #[error("invalid `--additional-features`: {message}")]
    AdditionalFeatures {
        /// What is wrong.
        message: String,
    },
}

impl HandoffError {
    /// The source location of a config error, for rendering the offending line.
    pub fn location(&self) -> Option<&SourceLocation> {
        match self {
            HandoffError::Config(e) => e.location(),
            HandoffError::WorkspaceFolder { .. }
            | HandoffError::Feature(_)
            | HandoffError::Publish(_)
            | HandoffError::Runtime { .. }
            | HandoffError::AdditionalFeatures { .. } => None,
        }
    }
}

impl Hint for HandoffError {
    fn hint(&self) -> Option<String> {
        match self {
            HandoffError::Config(e) => e.hint(),
            HandoffError::Feature(e) => e.hint(),
            HandoffError::WorkspaceFolder { .. } => {
                Some("pass an existing folder with `--workspace-folder`".into())
            }
            HandoffError::Publish(_) | HandoffError::Runtime { .. } => None,
            HandoffError::AdditionalFeatures { .. } => Some(
                "pass a JSON object like `features` in devcontainer.json, e.g. `{\"ghcr.io/devcontainers/features/git:1\": {}}`".into(),
            ),
        }
    }
}
