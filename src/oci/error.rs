//! Errors of the `oci` module: registry requests, digests, the content store, credentials.

use std::path::PathBuf;

/// Result alias for the `oci` module.
pub type Result<T, E = OciError> = std::result::Result<T, E>;

/// An error talking to an OCI registry, reading credentials, or using the content store.
///
/// Messages start lowercase, name the subject (reference, digest, path) and never contain
/// credentials.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// A reference string is not a valid OCI reference.
    #[error("invalid OCI reference `{reference}`")]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// Why it did not parse.
        #[source]
        source: oci_client::ParseError,
    },
    /// A digest string is not `sha256:<64 lowercase hex>`.
    #[error("invalid digest `{digest}`: expected `sha256:` followed by 64 lowercase hex digits")]
    InvalidDigest {
        /// The digest as given.
        digest: String,
    },
    /// A registry request failed (network, HTTP status, protocol).
    #[error("registry request `{operation}` for `{reference}` failed")]
    Registry {
        /// What was attempted (`pull manifest`, `pull blob sha256:…`, `push manifest`, …).
        operation: String,
        /// The reference, as contacted (after any mirror mapping).
        reference: String,
        /// The client error.
        #[source]
        source: Box<oci_client::errors::OciDistributionError>,
    },
    /// Content did not hash to the digest it was requested or announced by.
    #[error("digest mismatch for {subject}: expected `{expected}`, got `{actual}`")]
    DigestMismatch {
        /// What was checked (`manifest of …`, `blob … of …`, `cached blob …`).
        subject: String,
        /// The digest asked for.
        expected: String,
        /// The digest of the bytes received.
        actual: String,
    },
    /// A manifest could not be decoded or has an unexpected shape.
    #[error("invalid manifest for `{reference}`: {reason}")]
    InvalidManifest {
        /// The reference the manifest was pulled for.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// An image index has no entry for the requested platform.
    #[error("no manifest for platform `{platform}` in the index of `{reference}`")]
    NoPlatformMatch {
        /// The reference of the index.
        reference: String,
        /// The platform looked for (`os/architecture[/variant]`).
        platform: String,
    },
    /// Offline mode is on and the content is not in the cache.
    #[error("`{reference}` is not in the cache and offline mode is on")]
    OfflineMiss {
        /// The reference (or URL) that would need the network.
        reference: String,
    },
    /// A file of the content store could not be read or written.
    #[error("cache I/O failed at `{path}`")]
    Store {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No cache directory: neither `cache_dir` nor the XDG cache dir is known.
    #[error("no cache directory: set `--cache-dir` or `XDG_CACHE_HOME`")]
    NoCacheDir,
    /// The Docker config file (`config.json`) could not be read or parsed.
    #[error("cannot read Docker config `{path}`")]
    DockerConfig {
        /// The config file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A credential helper failed or answered garbage.
    #[error(
        "credential helper `docker-credential-{helper}` failed for registry `{registry}`: {reason}"
    )]
    CredentialHelper {
        /// The helper suffix (`pass`, `secretservice`, …).
        helper: String,
        /// The registry asked for.
        registry: String,
        /// What went wrong (never the secret).
        reason: String,
    },
    /// An extra CA certificate file could not be read or parsed.
    #[error("cannot load CA certificate `{path}`")]
    Certificate {
        /// The PEM file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A download URL is not acceptable (not a URL, scheme not allowed, body too large).
    #[error("refusing to download `{url}`: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// An HTTP download (direct tarball) failed.
    #[error("download of `{url}` failed")]
    Http {
        /// The URL.
        url: String,
        /// The client error.
        #[source]
        source: reqwest::Error,
    },
    /// An identity token could not be exchanged for an access token (the token itself is
    /// never part of the message).
    #[error("cannot exchange the identity token for registry `{registry}`: {reason}")]
    TokenExchange {
        /// The registry (`host[:port]`).
        registry: String,
        /// What went wrong.
        reason: String,
    },
    /// An HTTP client could not be built.
    #[error("cannot build the HTTP client")]
    Client {
        /// The client error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
