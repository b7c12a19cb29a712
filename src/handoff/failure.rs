//! Failures several parts of the handoff share, each one type with one message: a host `git`
//! command that failed ([`GitFailed`]), a file that could not be read or written
//! ([`IoFailed`]).

use std::path::PathBuf;

/// A host `git` command that failed: where it ran, with what, and what it said (the `Git`
/// failure of a workspace inspection, of a clone task and of a container git directory).
#[derive(Debug, thiserror::Error)]
#[error("`git {args}` failed in `{}`: {stderr}", dir.display())]
pub struct GitFailed {
    /// Where it ran (the repository folder).
    pub dir: PathBuf,
    /// Its arguments, space-separated (for the message only).
    pub args: String,
    /// git's standard error, trimmed.
    pub stderr: String,
}

/// A file, folder or socket that could not be read, written or made (the `Io` failure of a
/// clone task, of a container git directory and of the mail door).
#[derive(Debug, thiserror::Error)]
#[error("`{}`: {source}", path.display())]
pub struct IoFailed {
    /// The file, folder or socket.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}
