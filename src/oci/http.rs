//! Plain HTTP(S) downloads with `reqwest`, for direct Feature tarballs
//! (spec-distilled §5.5). `https://` only, except `http://` to loopback hosts (tests, local
//! mirrors).

use std::path::PathBuf;

use bytes::Bytes;

use super::error::{OciError, Result};
use super::transport::{install_crypto_provider, is_loopback};

/// Upper bound on a downloaded tarball, in bytes (256 MiB).
pub const MAX_DOWNLOAD_BYTES: u64 = 256 * 1024 * 1024;

/// A `reqwest` client with devcell's user agent and connect timeout, trusting
/// `extra_ca_certificates` (PEM files) in addition to the platform roots.
///
/// # Errors
/// [`OciError::Certificate`] for an unreadable CA file, [`OciError::Client`] when the client
/// cannot be built.
pub fn client(extra_ca_certificates: &[PathBuf]) -> Result<reqwest::Client> {
    client_builder(extra_ca_certificates)?
        .build()
        .map_err(|e| OciError::Client {
            source: Box::new(e),
        })
}

/// The builder behind [`client`], for callers that change a setting (e.g. no redirects).
///
/// # Errors
/// [`OciError::Certificate`] for an unreadable CA file.
pub fn client_builder(extra_ca_certificates: &[PathBuf]) -> Result<reqwest::ClientBuilder> {
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("devcell/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(30));
    let mut certs = Vec::new();
    for p in extra_ca_certificates {
        let data = std::fs::read(p).map_err(|e| OciError::Certificate {
            path: p.clone(),
            source: Box::new(e),
        })?;
        let cert = reqwest::Certificate::from_pem(&data).map_err(|e| OciError::Certificate {
            path: p.clone(),
            source: Box::new(e),
        })?;
        certs.push(cert);
    }
    if !certs.is_empty() {
        builder = builder.tls_certs_merge(certs);
    }
    Ok(builder)
}

/// Downloads `url` into memory. `extra_ca_certificates` are PEM files trusted in addition to
/// the platform roots.
///
/// # Errors
/// [`OciError::Http`] on network errors and non-2xx statuses; [`OciError::InvalidUrl`] for a
/// disallowed scheme or a body over [`MAX_DOWNLOAD_BYTES`]; [`OciError::Certificate`] for an
/// unreadable CA file.
pub async fn download(url: &str, extra_ca_certificates: &[PathBuf]) -> Result<Bytes> {
    install_crypto_provider();
    let parsed = reqwest::Url::parse(url).map_err(|_| OciError::InvalidUrl {
        url: url.to_owned(),
        reason: "not a URL".into(),
    })?;
    let host = parsed.host_str().unwrap_or_default().to_owned();
    let allowed = parsed.scheme() == "https" || (parsed.scheme() == "http" && is_loopback(&host));
    if !allowed {
        return Err(OciError::InvalidUrl {
            url: url.to_owned(),
            reason: "only `https://` URLs (or `http://` to loopback hosts) are fetched".into(),
        });
    }
    let client = client(extra_ca_certificates)?;
    let http = |source| OciError::Http {
        url: url.to_owned(),
        source,
    };
    let response = client
        .get(parsed)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(http)?;
    if response
        .content_length()
        .is_some_and(|n| n > MAX_DOWNLOAD_BYTES)
    {
        return Err(OciError::InvalidUrl {
            url: url.to_owned(),
            reason: format!("larger than {MAX_DOWNLOAD_BYTES} bytes"),
        });
    }
    let body = response.bytes().await.map_err(http)?;
    if body.len() as u64 > MAX_DOWNLOAD_BYTES {
        return Err(OciError::InvalidUrl {
            url: url.to_owned(),
            reason: format!("larger than {MAX_DOWNLOAD_BYTES} bytes"),
        });
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn plain_http_is_refused_except_to_loopback() {
        for url in [
            "http://example.invalid/devcontainer-feature-x.tgz",
            "ftp://example.invalid/x.tgz",
            "not a url",
        ] {
            let err = download(url, &[]).await.unwrap_err();
            assert!(matches!(err, OciError::InvalidUrl { .. }), "{url}: {err}");
        }
        // Loopback plain HTTP is allowed (and fails here only because nothing listens).
        let err = download("http://127.0.0.1:9/x.tgz", &[]).await.unwrap_err();
        assert!(matches!(err, OciError::Http { .. }), "{err}");
    }
}
