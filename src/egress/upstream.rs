//! Model-provider upstreams whose credentials stay on the host (issue 13, item 5; spec-note
//! 0501). The agent talks plain HTTP to `http://127.0.0.1:<port>/upstreams/<id>/…` inside its
//! container (the forwarder's port: the same channel as the allowlist); the host-side
//! [`Proxy`](super::Proxy) strips any credential header the container sent, adds the
//! configured one, and forwards the request to the upstream's `url` over TLS (rustls,
//! verifying the certificate against the system roots and the user's CA files). Requests and
//! responses stream through unbuffered.
//!
//! The header's value lives only in this process: it is marked sensitive, shown as `********`
//! by `Debug`, and named in no error, record or log.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper::Uri;
use hyper::header::{HeaderName, HeaderValue};
use indexmap::IndexMap;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;

use super::error::EgressError;
use super::policy::{Allowlist, Entry, HostPattern};

/// The path prefix the proxy serves upstreams under (`/upstreams/<id>/…`).
pub const PATH_PREFIX: &str = "/upstreams/";

/// Request headers that carry credentials: never sent on from the container (the configured
/// header is added by the proxy instead).
pub const CREDENTIAL_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
];

/// One upstream, ready to serve: where to connect, how to verify it, which header to add.
#[derive(Clone)]
pub struct Upstream {
    /// The id (`[agents.NAME.upstreams.ID]`), a path segment of the in-container URL.
    pub id: String,
    /// The variable the agent's environment gets the in-container base URL in.
    pub env: String,
    /// `host:port` of the upstream, for the `Host` header.
    pub authority: String,
    /// The upstream URL's path without a trailing `/` (`/v1`), prefixed to each request's.
    pub base_path: String,
    /// The one destination this upstream may connect to (its host and port, with the pin).
    pub(crate) destination: Allowlist,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) server_name: ServerName<'static>,
    pub(crate) header: HeaderName,
    pub(crate) value: HeaderValue,
    pub(crate) tls: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("id", &self.id)
            .field("env", &self.env)
            .field(
                "url",
                &format!("https://{}{}", self.authority, self.base_path),
            )
            .field("header", &self.header)
            .field("value", &"********")
            .finish()
    }
}

/// What an upstream is made from (the user's `[agents.NAME.upstreams.ID]`, `value` already
/// resolved on the host).
#[derive(Clone)]
pub struct UpstreamSpec<'a> {
    /// The id.
    pub id: &'a str,
    /// `https://host[:port][/path]`.
    pub url: &'a str,
    /// The header's name.
    pub header: &'a str,
    /// The header's value (a secret).
    pub value: &'a str,
    /// The environment variable for the base URL.
    pub env: &'a str,
    /// A pinned address, if any.
    pub address: Option<&'a str>,
    /// Extra PEM CA files (the upstream's `ca`, then `[registries].ca_certs`).
    pub ca_files: &'a [PathBuf],
}

impl Upstream {
    /// Checks `spec` and builds the upstream (its TLS configuration included).
    ///
    /// # Errors
    /// [`EgressError::Upstream`] naming the field and what was expected (never the value);
    /// [`EgressError::Io`] for an unreadable CA file.
    pub fn new(spec: &UpstreamSpec<'_>) -> Result<Upstream, EgressError> {
        let bad = |field: &str, why: String| EgressError::Upstream {
            id: spec.id.to_string(),
            field: field.to_string(),
            why,
        };
        check_id(spec.id).map_err(|why| bad("id", why))?;
        let uri: Uri = spec
            .url
            .parse()
            .map_err(|e| bad("url", format!("not a URL ({e})")))?;
        if uri.scheme_str() != Some("https") {
            return Err(bad(
                "url",
                "expected `https://host[:port][/path]`: devcell opens TLS to the upstream".into(),
            ));
        }
        if uri.query().is_some() {
            return Err(bad("url", "a base URL has no query (`?…`)".into()));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| bad("url", "no host".into()))?;
        if authority.as_str().contains('@') {
            return Err(bad(
                "url",
                "credentials belong in `header`/`value`, not the URL".into(),
            ));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = authority.port_u16().unwrap_or(443);
        let mut entry = format!("{}:{port}", authority.host());
        if let Some(a) = spec.address {
            entry.push('=');
            entry.push_str(a);
        }
        let parsed = Entry::parse(&entry).map_err(|e| bad("url", e.to_string()))?;
        if matches!(parsed.host, HostPattern::Suffix(_)) {
            return Err(bad("url", "a wildcard is not a host".into()));
        }
        let destination = Allowlist::parse(&[entry]).map_err(|e| bad("address", e.to_string()))?;
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| bad("url", format!("not a TLS server name ({e})")))?;
        let header = HeaderName::try_from(spec.header).map_err(|_| {
            bad(
                "header",
                format!("`{}` is not an HTTP header name", spec.header),
            )
        })?;
        let mut value = HeaderValue::try_from(spec.value).map_err(|_| {
            bad(
                "value",
                "not a valid HTTP header value (a line break or control character?)".into(),
            )
        })?;
        if spec.value.trim().is_empty() {
            return Err(bad("value", "empty".into()));
        }
        value.set_sensitive(true);
        check_env_name(spec.env).map_err(|why| bad("env", why))?;
        Ok(Upstream {
            id: spec.id.to_string(),
            env: spec.env.to_string(),
            authority: authority.as_str().to_string(),
            base_path: uri.path().trim_end_matches('/').to_string(),
            destination,
            host: host.to_ascii_lowercase(),
            port,
            server_name,
            header,
            value,
            tls: Arc::new(client_config(spec.ca_files)?),
        })
    }

    /// The in-container base URL: `http://127.0.0.1:<port>/upstreams/<id>`.
    pub fn container_url(&self, port: u16) -> String {
        format!("http://127.0.0.1:{port}{PATH_PREFIX}{}", self.id)
    }
}

/// An agent's upstreams by id.
#[derive(Debug, Clone, Default)]
pub struct Upstreams {
    by_id: BTreeMap<String, Upstream>,
}

impl Upstreams {
    /// No upstream.
    pub fn new() -> Upstreams {
        Upstreams::default()
    }

    /// Adds (or replaces) an upstream.
    pub fn insert(&mut self, upstream: Upstream) {
        self.by_id.insert(upstream.id.clone(), upstream);
    }

    /// The upstream named `id`.
    pub fn get(&self, id: &str) -> Option<&Upstream> {
        self.by_id.get(id)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The upstreams, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Upstream> {
        self.by_id.values()
    }

    /// The agent's environment: each upstream's `env` → its in-container base URL (the only
    /// thing about an upstream the container learns).
    pub fn container_env(&self, port: u16) -> IndexMap<String, String> {
        self.by_id
            .values()
            .map(|u| (u.env.clone(), u.container_url(port)))
            .collect()
    }
}

/// Rustls client configuration: the system roots plus `ca_files`, HTTP/1.1 by ALPN.
fn client_config(ca_files: &[PathBuf]) -> Result<rustls::ClientConfig, EgressError> {
    let mut roots = rustls::RootCertStore::empty();
    // Roots that fail to load are skipped: an upstream they would have verified then fails
    // its handshake, which is the safe direction.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    for path in ca_files {
        add_pem(&mut roots, path)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| EgressError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn add_pem(roots: &mut rustls::RootCertStore, path: &Path) -> Result<(), EgressError> {
    let invalid = |why: String| EgressError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    };
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(format!("not a PEM file: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not a PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no PEM certificate in it".to_string()));
    }
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("not a usable CA certificate: {e}")))?;
    }
    Ok(())
}

fn check_id(id: &str) -> Result<(), String> {
    if !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && id != "."
        && id != ".."
    {
        Ok(())
    } else {
        Err(format!(
            "`{id}` must be a URL path segment: letters, digits, `-`, `_`, `.`"
        ))
    }
}

fn check_env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not an environment variable name (letters, digits, `_`)"
        ))
    }
}

/// Replaces each `${localEnv:NAME}` (or `${localEnv:NAME:default}`) in `template` with the
/// host variable from `lookup`. Errors name the variable, never a value.
pub fn resolve_local_env(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    const OPEN: &str = "${localEnv:";
    let mut out = String::new();
    let mut rest = template;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let end = after
            .find('}')
            .ok_or_else(|| "`${localEnv:` is not closed with `}`".to_string())?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        check_env_name(name)?;
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!("the host variable `{name}` is not set"));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(url: &'a str, value: &'a str) -> UpstreamSpec<'a> {
        UpstreamSpec {
            id: "openai",
            url,
            header: "Authorization",
            value,
            env: "OPENAI_BASE_URL",
            address: None,
            ca_files: &[],
        }
    }

    #[test]
    fn an_upstream_gives_the_container_only_its_base_url() {
        let u = Upstream::new(&spec("https://api.example.test/v1/", "Bearer sk-secret")).unwrap();
        assert_eq!(u.base_path, "/v1");
        assert_eq!(u.port, 443);
        assert!(u.value.is_sensitive());
        let mut ups = Upstreams::new();
        ups.insert(u);
        let env = ups.container_env(3128);
        assert_eq!(
            env["OPENAI_BASE_URL"],
            "http://127.0.0.1:3128/upstreams/openai"
        );
        let shown = format!("{ups:?}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(!format!("{env:?}").contains("sk-secret"));
    }

    #[test]
    fn bad_fields_are_named_without_the_value() {
        let cases = [
            (
                spec("http://api.example.test/v1", "Bearer sk-secret"),
                "url",
            ),
            (
                spec("https://u:p@api.example.test/", "Bearer sk-secret"),
                "url",
            ),
            (spec("https://*.example.test/", "Bearer sk-secret"), "url"),
            (
                spec("https://api.example.test/", "Bearer sk-secret\nX: y"),
                "value",
            ),
            (spec("https://api.example.test/", " "), "value"),
            (
                UpstreamSpec {
                    header: "Bad Header",
                    ..spec("https://api.example.test/", "Bearer sk-secret")
                },
                "header",
            ),
            (
                UpstreamSpec {
                    env: "1X",
                    ..spec("https://api.example.test/", "Bearer sk-secret")
                },
                "env",
            ),
            (
                UpstreamSpec {
                    id: "a/b",
                    ..spec("https://api.example.test/", "Bearer sk-secret")
                },
                "id",
            ),
            (
                UpstreamSpec {
                    address: Some("nowhere"),
                    ..spec("https://api.example.test/", "Bearer sk-secret")
                },
                "url",
            ),
        ];
        for (s, field) in cases {
            let err = Upstream::new(&s).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(&err, EgressError::Upstream { field: f, .. } if f == field),
                "{field}: {text}"
            );
            assert!(!text.contains("sk-secret"), "{text}");
        }
    }

    #[test]
    fn local_env_references_resolve_on_the_host() {
        let lookup = |n: &str| (n == "KEY").then(|| "sk-1".to_string());
        assert_eq!(
            resolve_local_env("Bearer ${localEnv:KEY}", &lookup).unwrap(),
            "Bearer sk-1"
        );
        assert_eq!(
            resolve_local_env("${localEnv:NOPE:dflt}/${localEnv:KEY}", &lookup).unwrap(),
            "dflt/sk-1"
        );
        assert_eq!(resolve_local_env("plain", &lookup).unwrap(), "plain");
        let err = resolve_local_env("Bearer ${localEnv:NOPE}", &lookup).unwrap_err();
        assert!(err.contains("`NOPE` is not set"), "{err}");
        assert!(resolve_local_env("${localEnv:KEY", &lookup).is_err());
    }
}
