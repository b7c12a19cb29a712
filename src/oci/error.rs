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

impl OciError {
    /// What to do about a failed registry request, in one line, by what failed (issue 28 item
    /// 5): the registry has no such repository or tag, it refused the credentials, or it
    /// cannot be reached from here. `None` for anything else (the message says enough).
    pub fn hint(&self) -> Option<String> {
        use oci_client::errors::OciDistributionError as E;
        let OciError::Registry {
            reference, source, ..
        } = self
        else {
            return None;
        };
        let host = reference.split('/').next().unwrap_or(reference);
        if crate::oci::registry::is_not_found_error(self) {
            return Some(format!(
                "the registry `{host}` has no `{reference}`: check the id and the tag (`devcell features info tags <id>` lists the tags it has); if `{host}` is a mirror in your settings file, the mirror lacks it"
            ));
        }
        match &**source {
            E::UnauthorizedError { .. }
            | E::AuthenticationFailure(_)
            | E::ServerError {
                code: 401 | 403, ..
            } => Some(format!(
                "the registry `{host}` refused the request as unauthorised: log in to it (`docker login {host}`: devcell reads `~/.docker/config.json`) or check the credentials' access to `{reference}`"
            )),
            E::RequestError(e) if e.is_connect() || e.is_timeout() => Some(format!(
                "the registry `{host}` cannot be reached from here: fetch once where it can and use `--offline` (the cache), or map `{host}` to a mirror you can reach in the settings file's `[registries] mirrors`"
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_client::errors::OciDistributionError as E;

    fn registry(source: E) -> OciError {
        OciError::Registry {
            operation: "pull manifest".into(),
            reference: "registry.test/features/hello:1".into(),
            source: Box::new(source),
        }
    }

    #[test]
    fn a_registry_failure_gets_a_hint_by_what_failed() {
        let not_found = registry(E::ServerError {
            code: 404,
            url: "https://registry.test/v2/features/hello/manifests/1".into(),
            message: "manifest unknown".into(),
        })
        .hint()
        .unwrap();
        assert!(
            not_found.starts_with(
                "the registry `registry.test` has no `registry.test/features/hello:1`"
            ),
            "{not_found}"
        );
        let unauthorised = registry(E::UnauthorizedError {
            url: "https://registry.test/v2/".into(),
        })
        .hint()
        .unwrap();
        assert!(
            unauthorised.contains("`docker login registry.test`"),
            "{unauthorised}"
        );
        let forbidden = registry(E::ServerError {
            code: 403,
            url: String::new(),
            message: String::new(),
        });
        assert_eq!(forbidden.hint(), Some(unauthorised));
        assert_eq!(
            registry(E::ServerError {
                code: 500,
                url: String::new(),
                message: String::new()
            })
            .hint(),
            None
        );
        assert_eq!(OciError::InvalidDigest { digest: "x".into() }.hint(), None);
    }
}
