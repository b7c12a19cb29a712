//! Registry credentials from the Docker client configuration (`$DOCKER_CONFIG/config.json`,
//! default `~/.docker/config.json`): inline `auths` entries, and the `credsStore` /
//! `credHelpers` credential helpers (`docker-credential-<name> get`).
//!
//! Secrets never appear in `Debug` output or errors.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde::Deserialize;

use super::error::{EngineError, Result};

/// The key Docker Hub credentials are stored under.
pub const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// The parts of `config.json` devcell reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientConfig {
    /// Registry → inline credentials.
    #[serde(default)]
    pub auths: BTreeMap<String, AuthEntry>,
    /// Default credential helper for every registry.
    #[serde(default)]
    pub creds_store: Option<String>,
    /// Registry → credential helper.
    #[serde(default)]
    pub cred_helpers: BTreeMap<String, String>,
}

/// One `auths` entry.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthEntry {
    /// base64 of `username:password`.
    #[serde(default)]
    pub auth: Option<String>,
    /// Plain username (rare).
    #[serde(default)]
    pub username: Option<String>,
    /// Plain password (rare).
    #[serde(default)]
    pub password: Option<String>,
    /// OAuth identity (refresh) token.
    #[serde(default)]
    pub identitytoken: Option<String>,
}

impl fmt::Debug for AuthEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthEntry")
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field(
                "identitytoken",
                &self.identitytoken.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Credentials for one registry.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub username: Option<String>,
    /// Password or token.
    pub password: Option<String>,
    /// OAuth identity token (instead of a password).
    pub identity_token: Option<String>,
    /// The registry address the credentials are for.
    pub server_address: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field(
                "identity_token",
                &self.identity_token.as_ref().map(|_| "<redacted>"),
            )
            .field("server_address", &self.server_address)
            .finish()
    }
}

/// The client configuration file: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
pub fn config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    dirs::home_dir().map(|h| h.join(".docker").join("config.json"))
}

/// Reads a client configuration; a missing file is an empty configuration.
///
/// Errors: [`EngineError::ClientConfig`] (unreadable), [`EngineError::ClientConfigJson`].
pub fn load(path: &Path) -> Result<ClientConfig> {
    match std::fs::read(path) {
        Ok(bytes) => parse(&bytes).map_err(|source| EngineError::ClientConfigJson {
            path: path.to_path_buf(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ClientConfig::default()),
        Err(source) => Err(EngineError::ClientConfig {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parses the JSON text of a client configuration.
pub fn parse(bytes: &[u8]) -> std::result::Result<ClientConfig, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// The keys a registry host may be stored under, most specific first. `docker.io` (and its
/// aliases) map to [`DOCKER_HUB_KEY`].
pub fn candidate_keys(registry: &str) -> Vec<String> {
    if matches!(
        registry,
        "docker.io" | "index.docker.io" | "registry-1.docker.io"
    ) {
        return vec![
            DOCKER_HUB_KEY.to_string(),
            "index.docker.io".to_string(),
            "docker.io".to_string(),
        ];
    }
    vec![
        registry.to_string(),
        format!("https://{registry}"),
        format!("http://{registry}"),
        format!("https://{registry}/v1/"),
        format!("https://{registry}/v2/"),
    ]
}

/// Strips a scheme and path from an `auths` key (`https://host/v1/` → `host`).
fn key_host(key: &str) -> &str {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

impl ClientConfig {
    /// The inline credentials for `registry` (a host such as `ghcr.io` or `127.0.0.1:5000`,
    /// or `docker.io`), if any. Pure: helpers are not consulted.
    pub fn inline_credentials(&self, registry: &str) -> Option<Credentials> {
        let keys = candidate_keys(registry);
        let entry = keys
            .iter()
            .find_map(|k| self.auths.get(k).map(|e| (k.clone(), e)))
            .or_else(|| {
                let wanted = key_host(&keys[0]).to_string();
                self.auths
                    .iter()
                    .find(|(k, _)| key_host(k) == wanted)
                    .map(|(k, e)| (k.clone(), e))
            })?;
        let (key, entry) = entry;
        let mut creds = Credentials {
            username: entry.username.clone(),
            password: entry.password.clone(),
            identity_token: entry.identitytoken.clone(),
            server_address: key,
        };
        if let Some(auth) = &entry.auth {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()
                .and_then(|b| String::from_utf8(b).ok());
            if let Some((user, pass)) = decoded.as_deref().and_then(|d| d.split_once(':')) {
                creds.username = Some(user.to_string());
                creds.password = Some(pass.to_string());
            }
        }
        if creds.username.is_none() && creds.identity_token.is_none() {
            return None;
        }
        Some(creds)
    }

    /// The credential helper configured for `registry`, if any.
    pub fn helper_for(&self, registry: &str) -> Option<&str> {
        candidate_keys(registry)
            .iter()
            .find_map(|k| self.cred_helpers.get(k))
            .or(self.creds_store.as_ref())
            .map(String::as_str)
    }

    /// Credentials for `registry`: the registry's credential helper when configured, else the
    /// inline `auths` entry. `Ok(None)` = anonymous.
    ///
    /// Errors: [`EngineError::CredentialHelper`] when a configured helper fails other than by
    /// saying it has no credentials.
    pub fn credentials(&self, registry: &str) -> Result<Option<Credentials>> {
        if let Some(helper) = self.helper_for(registry) {
            let server = candidate_keys(registry)
                .into_iter()
                .next()
                .unwrap_or_default();
            if let Some(creds) = run_helper(helper, &server)? {
                return Ok(Some(creds));
            }
        }
        Ok(self.inline_credentials(registry))
    }
}

#[derive(Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username")]
    username: String,
    #[serde(rename = "Secret")]
    secret: String,
}

/// Runs `docker-credential-<helper> get` with `server` on stdin. A helper that is not installed,
/// or that answers "credentials not found", means no credentials.
fn run_helper(helper: &str, server: &str) -> Result<Option<Credentials>> {
    let fail = |message: String| EngineError::CredentialHelper {
        helper: helper.to_string(),
        registry: server.to_string(),
        message,
    };
    let program = format!("docker-credential-{helper}");
    let mut child = match Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(e.to_string())),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(server.as_bytes())
            .map_err(|e| fail(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        if text.to_ascii_lowercase().contains("not found") {
            return Ok(None);
        }
        return Err(fail(format!("exit status {}", out.status)));
    }
    let answer: HelperAnswer =
        serde_json::from_slice(&out.stdout).map_err(|e| fail(format!("invalid answer: {e}")))?;
    // Helpers answer `<token>` as the user name for identity tokens.
    if answer.username == "<token>" {
        return Ok(Some(Credentials {
            identity_token: Some(answer.secret),
            server_address: server.to_string(),
            ..Credentials::default()
        }));
    }
    Ok(Some(Credentials {
        username: Some(answer.username),
        password: Some(answer.secret),
        identity_token: None,
        server_address: server.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> ClientConfig {
        parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn decodes_inline_auth_for_a_host() {
        // base64("alice:s3cret")
        let c = config(r#"{"auths":{"127.0.0.1:5000":{"auth":"YWxpY2U6czNjcmV0"}}}"#);
        let creds = c.inline_credentials("127.0.0.1:5000").unwrap();
        assert_eq!(creds.username.as_deref(), Some("alice"));
        assert_eq!(creds.password.as_deref(), Some("s3cret"));
        assert!(!format!("{creds:?}").contains("s3cret"));
    }

    #[test]
    fn docker_hub_uses_the_index_key() {
        let c = config(r#"{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"}}}"#);
        assert_eq!(
            c.inline_credentials("docker.io")
                .unwrap()
                .username
                .as_deref(),
            Some("u")
        );
        assert!(c.inline_credentials("ghcr.io").is_none());
    }

    #[test]
    fn matches_keys_with_scheme_and_path() {
        let c = config(r#"{"auths":{"https://ghcr.io/v2/token":{"auth":"dTpw"}}}"#);
        assert!(c.inline_credentials("ghcr.io").is_some());
    }

    #[test]
    fn helper_lookup_prefers_cred_helpers_over_store() {
        let c = config(r#"{"credsStore":"desktop","credHelpers":{"ghcr.io":"gh"}}"#);
        assert_eq!(c.helper_for("ghcr.io"), Some("gh"));
        assert_eq!(c.helper_for("quay.io"), Some("desktop"));
    }

    #[test]
    fn missing_helper_binary_means_anonymous() {
        let c = config(r#"{"credsStore":"devcell-test-no-such-helper"}"#);
        assert!(c.credentials("quay.io").unwrap().is_none());
    }

    #[test]
    fn unknown_fields_are_ignored_and_bad_json_is_an_error() {
        assert!(parse(br#"{"psFormat":"x","auths":{}}"#).is_ok());
        assert!(parse(br#"{"auths":[]}"#).is_err());
    }
}
