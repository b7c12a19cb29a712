//! The error of a workspace inspection ([`WorkspaceError`]), with its envelope code and hint.

use crate::handoff::failure::GitFailed;
use std::path::PathBuf;

/// A failure inspecting a workspace.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The workspace root does not exist or cannot be read.
    #[error("cannot read workspace folder `{}`", path.display())]
    Root {
        /// The folder given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The workspace root is not a directory.
    #[error("workspace folder `{}` is not a directory", path.display())]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A file or folder inside the workspace could not be read.
    #[error("cannot read `{}`", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The `git` executable could not be started.
    #[error("cannot run `git`")]
    GitUnavailable {
        /// The cause (usually: not installed).
        #[source]
        source: std::io::Error,
    },
    /// A `git` command failed.
    #[error(transparent)]
    Git(GitFailed),
    /// A `.git` file or a `commondir` file could not be understood.
    #[error("`{}` is not a valid git link: {message}", path.display())]
    BadGitLink {
        /// The `.git` or `commondir` file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// `--primary` names no repository of the workspace.
    #[error("`--primary {name}` is not a repository of the workspace (repositories: {})", available.join(", "))]
    UnknownPrimary {
        /// The name given.
        name: String,
        /// The repositories found.
        available: Vec<String>,
    },
    /// Several repositories hold a dev container configuration and none was chosen.
    #[error("several repositories have a `.devcontainer` configuration ({}); choose one with `--primary`", candidates.join(", "))]
    AmbiguousPrimary {
        /// The repositories with a configuration.
        candidates: Vec<String>,
    },
}

impl WorkspaceError {
    /// The envelope error code: `not_found` for a missing root or unknown `--primary`,
    /// `invalid_argument` for a non-directory root or an ambiguous primary, `internal` otherwise.
    pub fn code(&self) -> crate::handoff::envelope::ErrorCode {
        use crate::handoff::envelope::ErrorCode;
        match self {
            WorkspaceError::Root { .. } | WorkspaceError::UnknownPrimary { .. } => {
                ErrorCode::NotFound
            }
            WorkspaceError::NotADirectory { .. } | WorkspaceError::AmbiguousPrimary { .. } => {
                ErrorCode::InvalidArgument
            }
            _ => ErrorCode::Internal,
        }
    }

    /// A hint for the user, when a fix is known.
    pub fn hint(&self) -> Option<String> {
        match self {
            WorkspaceError::GitUnavailable { .. } => {
                Some("install git and make sure it is on `PATH`".into())
            }
            WorkspaceError::UnknownPrimary { available, .. } if !available.is_empty() => {
                Some(format!("pass one of: {}", available.join(", ")))
            }
            WorkspaceError::AmbiguousPrimary { candidates } => {
                candidates.first().map(|c| format!("e.g. `--primary {c}`"))
            }
            WorkspaceError::Root { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Some("pass the workspace root (the folder holding the repositories or worktrees) to `--workspace-folder`".into())
            }
            _ => None,
        }
    }
}

impl crate::ops::error::ProductError for WorkspaceError {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        WorkspaceError::code(self)
    }
    fn hint(&self) -> Option<String> {
        WorkspaceError::hint(self)
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::WorkspaceError;

    #[test]
    fn a_missing_workspace_root_has_a_hint() {
        let missing = WorkspaceError::Root {
            path: "/nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(missing.hint().unwrap().contains("--workspace-folder"));
        let denied = WorkspaceError::Root {
            path: "/nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert!(denied.hint().is_none());
    }
}
