//! Errors of the `build` layer.

use std::path::PathBuf;

use crate::diagnostics::Hint;
use crate::engine::EngineError;
use crate::features::FeatureError;

/// `Result` with [`BuildError`].
pub type Result<T, E = BuildError> = std::result::Result<T, E>;

/// Generating a Features build context or an `updateRemoteUserUID` layer failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The engine failed to inspect or build an image (a failing `install.sh` fails the build).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A Feature's options could not be rendered.
    #[error(transparent)]
    Feature(#[from] FeatureError),
    /// An image reference cannot be written after `FROM`.
    #[error("image reference `{reference}` {reason}")]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A file or folder could not be read or written.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// What was being done (`read`, `write`, `create`, …).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A materialised Feature folder has no `install.sh`
    /// ([spec: Features, folder structure](https://containers.dev/implementors/features/#folder-structure)).
    #[error("Feature `{feature}` has no `install.sh` in `{}`", dir.display())]
    MissingInstallScript {
        /// The Feature reference as written.
        feature: String,
        /// The Feature folder.
        dir: PathBuf,
    },
    /// A Feature folder holds something other than files, folders and symbolic links
    /// (a socket, a FIFO or a device), which cannot go into a build context.
    #[error("Feature `{feature}` contains `{}`, which is not a file, folder or symbolic link", path.display())]
    UnsupportedFile {
        /// The Feature reference as written.
        feature: String,
        /// The offending path.
        path: PathBuf,
    },
    /// A Feature's `containerEnv` entry cannot be written as a Dockerfile `ENV` instruction.
    #[error("Feature `{feature}`: `containerEnv` entry `{name}` {reason}")]
    InvalidContainerEnv {
        /// The Feature reference as written.
        feature: String,
        /// The variable name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The `devcontainer.metadata` label cannot be written into a Dockerfile `LABEL`.
    #[error("the `devcontainer.metadata` label {reason}")]
    InvalidLabel {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An image label (`build --label`) cannot be written into a Dockerfile `LABEL`.
    #[error("image label `{name}` {reason}")]
    InvalidImageLabel {
        /// The label's name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A user name (`remoteUser`, `containerUser`, the image's `USER`) cannot be used in a
    /// generated Dockerfile.
    #[error("user `{user}` {reason}")]
    InvalidUser {
        /// The user as given.
        user: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl Hint for BuildError {
    fn hint(&self) -> Option<String> {
        match self {
            BuildError::MissingInstallScript { .. } => {
                Some("a Feature folder needs `devcontainer-feature.json` and `install.sh`".into())
            }
            BuildError::InvalidContainerEnv { .. } => Some(
                "variable names may not contain `=`, whitespace, quotes, `$` or `\\`; values may not contain line breaks".into(),
            ),
            BuildError::Engine(e) => e.hint(),
            _ => None,
        }
    }
}

impl BuildError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| BuildError::Io {
            action,
            path,
            source,
        }
    }
}
