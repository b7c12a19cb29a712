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
    /// An upstream (`[agents.NAME.upstreams.ID]`) is not usable; `why` never contains the
    /// credential's value.
    #[error("egress upstream `{id}`: `{field}`: {why}")]
    Upstream {
        /// The upstream's id.
        id: String,
        /// The field at fault (`url`, `header`, `value`, `env`, `address`, `id`).
        field: String,
        /// What is wrong and what was expected.
        why: String,
    },
    /// The TLS client configuration could not be built.
    #[error("egress: TLS: {0}")]
    Tls(String),
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
