//! Errors of the `egress` layer.

use std::path::PathBuf;

/// A bad allowlist entry, or the proxy or its channel could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// An allowlist entry does not parse.
    #[error(
        "egress allowlist entry `{entry}`: {why} (expected `host[:port][=address]`, e.g. `api.example.test`, `*.example.test:8443`, `web.test:8080=127.0.0.1`)"
    )]
    Entry {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        why: String,
    },
    /// A file or folder of the egress channel (socket folder, forwarder, decision log) could
    /// not be created or written.
    #[error("egress: {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl EgressError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> EgressError {
        let path = path.into();
        move |source| EgressError::Io { path, source }
    }
}
