//! Registry credentials from the Docker client config (`~/.docker/config.json`, or
//! `$DOCKER_CONFIG/config.json`): `credHelpers`, `credsStore` and `auths`, in that order
//! (spec-distilled §5.6). Secrets never appear in `Debug` output or logs.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde::Deserialize;

use super::error::{OciError, Result};

/// Credentials for one registry. `Debug` redacts every secret.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Credentials {
    /// No credentials: anonymous pulls (a bearer token is still obtained when the registry
    /// challenges with `WWW-Authenticate: Bearer`).
    #[default]
    Anonymous,
    /// A user name and password (or personal access token), sent as HTTP basic auth or used
    /// to obtain a bearer token.
    Basic {
        /// The user name.
        username: String,
        /// The password or token.
        password: String,
    },
    /// An OAuth2 identity (refresh) token (`identitytoken`, or a helper's `<token>` user):
    /// exchanged for a scoped access token before each registry operation
    /// ([`crate::oci::token`]; spec-notes/0262).
    IdentityToken(String),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Credentials::IdentityToken(_) => {
                f.debug_tuple("IdentityToken").field(&"<redacted>").finish()
            }
        }
    }
}

impl Credentials {
    /// Converts to the `oci-client` representation. An identity token has none (it must be
    /// exchanged first, which [`crate::oci::registry::Registry`] does): anonymous.
    pub fn to_registry_auth(&self) -> oci_client::secrets::RegistryAuth {
        match self {
            Credentials::Anonymous | Credentials::IdentityToken(_) => {
                oci_client::secrets::RegistryAuth::Anonymous
            }
            Credentials::Basic { username, password } => {
                oci_client::secrets::RegistryAuth::Basic(username.clone(), password.clone())
            }
        }
    }
}

/// The parts of Docker's `config.json` devcell reads.
#[derive(Clone, Default, Deserialize)]
pub struct DockerConfig {
    /// `auths`: registry → stored credentials.
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    /// `credHelpers`: registry → helper suffix (`docker-credential-<suffix>`).
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    /// `credsStore`: the default helper suffix.
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
    /// Where helpers are looked up; `None` = `PATH`.
    #[serde(skip)]
    helper_dir: Option<PathBuf>,
}

impl fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DockerConfig")
            .field("auths", &self.auths.keys().collect::<Vec<_>>())
            .field("cred_helpers", &self.cred_helpers)
            .field("creds_store", &self.creds_store)
            .finish()
    }
}

#[derive(Clone, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

#[derive(Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username")]
    username: String,
    #[serde(rename = "Secret")]
    secret: String,
}

/// The Docker config file used when none is given: `$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`. `None` when neither can be named (no home directory).
pub fn default_docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    dirs::home_dir().map(|h| h.join(".docker").join("config.json"))
}

impl DockerConfig {
    /// Reads a Docker config file. A missing file is an empty config.
    ///
    /// # Errors
    /// [`OciError::DockerConfig`] when the file exists but cannot be read or is not JSON of
    /// the expected shape.
    pub fn load(path: &Path) -> Result<DockerConfig> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(OciError::DockerConfig {
                    path: path.to_owned(),
                    source: Box::new(e),
                });
            }
        };
        Self::parse(&text).map_err(|e| OciError::DockerConfig {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }

    /// Parses the JSON text of a Docker config file.
    ///
    /// # Errors
    /// The JSON error when the text does not have the `config.json` shape.
    pub fn parse(text: &str) -> std::result::Result<DockerConfig, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Finds credentials for `registry` (`host[:port]`): `credHelpers[registry]`, else
    /// `credsStore`, else `auths[registry]`: its `identitytoken` (an OAuth2 refresh token,
    /// which takes precedence, as in Docker), else `auth` (base64 `user:password`), else
    /// `username`/`password`. A helper answering `Username: "<token>"` gives an identity token
    /// too. Anonymous when nothing matches or the helper has no entry (spec-notes/0062, 0262).
    ///
    /// # Errors
    /// [`OciError::CredentialHelper`] when a configured helper cannot run or answers garbage.
    pub fn credentials_for(&self, registry: &str) -> Result<Credentials> {
        if let Some(helper) = self.cred_helpers.get(registry) {
            return run_helper(self.helper_dir.as_deref(), helper, registry);
        }
        if let Some(helper) = &self.creds_store {
            let creds = run_helper(self.helper_dir.as_deref(), helper, registry)?;
            if creds != Credentials::Anonymous {
                return Ok(creds);
            }
        }
        let Some(entry) = self.find_auth(registry) else {
            return Ok(Credentials::Anonymous);
        };
        if let Some(token) = entry.identity_token.as_deref().filter(|t| !t.is_empty()) {
            return Ok(Credentials::IdentityToken(token.to_owned()));
        }
        if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()
                .and_then(|b| String::from_utf8(b).ok());
            if let Some((user, pass)) = decoded.as_deref().and_then(|d| d.split_once(':')) {
                return Ok(Credentials::Basic {
                    username: user.to_owned(),
                    password: pass.to_owned(),
                });
            }
            tracing::warn!(registry, "ignoring malformed `auth` entry in Docker config");
        }
        if let (Some(u), Some(p)) = (&entry.username, &entry.password) {
            return Ok(Credentials::Basic {
                username: u.clone(),
                password: p.clone(),
            });
        }
        Ok(Credentials::Anonymous)
    }

    /// Looks credential helpers up in `dir` instead of `PATH` (tests, sandboxes).
    pub fn with_helper_dir(mut self, dir: PathBuf) -> Self {
        self.helper_dir = Some(dir);
        self
    }

    fn find_auth(&self, registry: &str) -> Option<&AuthEntry> {
        if let Some(e) = self.auths.get(registry) {
            return Some(e);
        }
        // Keys may be URLs (`https://host/v1/`); docker.io is stored as index.docker.io.
        let wanted = if registry == "docker.io" || registry == "registry-1.docker.io" {
            "index.docker.io"
        } else {
            registry
        };
        self.auths
            .iter()
            .find(|(k, _)| normalize_key(k) == wanted)
            .map(|(_, v)| v)
    }
}

fn normalize_key(key: &str) -> &str {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k)
}

/// Runs `docker-credential-<helper> get` with `registry` on stdin (the Docker credential
/// helper protocol). A helper answering "credentials not found" yields anonymous access.
fn run_helper(dir: Option<&Path>, helper: &str, registry: &str) -> Result<Credentials> {
    let fail = |reason: String| OciError::CredentialHelper {
        helper: helper.to_owned(),
        registry: registry.to_owned(),
        reason,
    };
    if helper.is_empty()
        || !helper
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(fail("invalid helper name".into()));
    }
    let program = format!("docker-credential-{helper}");
    let program = match dir {
        Some(d) => d.join(program),
        None => PathBuf::from(program),
    };
    let mut child = Command::new(program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot run it: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(registry.as_bytes())
            .map_err(|e| fail(format!("cannot write to it: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("cannot wait for it: {e}")))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).to_lowercase()
            + &String::from_utf8_lossy(&out.stderr).to_lowercase();
        if text.contains("credentials not found") {
            return Ok(Credentials::Anonymous);
        }
        return Err(fail(format!("exited with {}", out.status)));
    }
    let answer: HelperAnswer = serde_json::from_slice(&out.stdout)
        .map_err(|_| fail("answer is not `{\"Username\",\"Secret\"}` JSON".into()))?;
    if answer.username == "<token>" {
        return Ok(Credentials::IdentityToken(answer.secret));
    }
    Ok(Credentials::Basic {
        username: answer.username,
        password: answer.secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auths_entry_decodes_basic_credentials() {
        let cfg = DockerConfig::parse(
            r#"{"auths":{"127.0.0.1:5000":{"auth":"dXNlcjpwYTpzcw=="}}}"#, // user:pa:ss
        )
        .unwrap();
        assert_eq!(
            cfg.credentials_for("127.0.0.1:5000").unwrap(),
            Credentials::Basic {
                username: "user".into(),
                password: "pa:ss".into()
            }
        );
        assert_eq!(
            cfg.credentials_for("other.io").unwrap(),
            Credentials::Anonymous
        );
    }

    #[test]
    fn auths_url_keys_and_docker_io_alias_match() {
        let cfg = DockerConfig::parse(
            r#"{"auths":{"https://index.docker.io/v1/":{"auth":"YTpi"},"https://r.example/":{"username":"u","password":"p"}}}"#,
        )
        .unwrap();
        assert!(matches!(
            cfg.credentials_for("docker.io").unwrap(),
            Credentials::Basic { .. }
        ));
        assert!(matches!(
            cfg.credentials_for("r.example").unwrap(),
            Credentials::Basic { .. }
        ));
    }

    #[test]
    fn identity_token_takes_precedence_and_is_redacted() {
        // As `docker login` stores it: `auth` is `<token>:` with an empty password.
        let cfg = DockerConfig::parse(
            r#"{"auths":{"reg.example":{"auth":"PHRva2VuPjo=","identitytoken":"refresh-xyz"},
                "empty.example":{"auth":"dTpw","identitytoken":""}}}"#,
        )
        .unwrap();
        let creds = cfg.credentials_for("reg.example").unwrap();
        assert_eq!(creds, Credentials::IdentityToken("refresh-xyz".into()));
        assert!(!format!("{creds:?}").contains("refresh-xyz"));
        assert_eq!(
            creds.to_registry_auth(),
            oci_client::secrets::RegistryAuth::Anonymous
        );
        // An empty `identitytoken` is no token: `auth` applies.
        assert!(matches!(
            cfg.credentials_for("empty.example").unwrap(),
            Credentials::Basic { .. }
        ));
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let c = Credentials::Basic {
            username: "alice".into(),
            password: "hunter2".into(),
        };
        let shown = format!("{c:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
        let cfg =
            DockerConfig::parse(r#"{"auths":{"h":{"auth":"c2VjcmV0OnNlY3JldA=="}}}"#).unwrap();
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
    }

    #[test]
    fn credential_helper_protocol_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let helper = dir.path().join("docker-credential-devcelltest");
        std::fs::write(
            &helper,
            "#!/bin/sh\nread r\n[ \"$1\" = get ] || exit 3\n\
             if [ \"$r\" = known.example ]; then printf '{\"Username\":\"bob\",\"Secret\":\"s3\"}'; \
             elif [ \"$r\" = oauth.example ]; then printf '{\"Username\":\"<token>\",\"Secret\":\"rt\"}'; \
             else echo 'credentials not found in native keychain'; exit 1; fi\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cfg = DockerConfig::parse(
            r#"{"credsStore":"devcelltest","auths":{"other.example":{"auth":"YTpi"}}}"#,
        )
        .unwrap()
        .with_helper_dir(dir.path().to_owned());
        assert_eq!(
            cfg.credentials_for("known.example").unwrap(),
            Credentials::Basic {
                username: "bob".into(),
                password: "s3".into()
            }
        );
        // `<token>` as the user name: the secret is an identity token.
        assert_eq!(
            cfg.credentials_for("oauth.example").unwrap(),
            Credentials::IdentityToken("rt".into())
        );
        // Helper says "not found": fall through to `auths`, then anonymous.
        assert!(matches!(
            cfg.credentials_for("other.example").unwrap(),
            Credentials::Basic { .. }
        ));
        assert_eq!(
            cfg.credentials_for("unknown.example").unwrap(),
            Credentials::Anonymous
        );
        // A helper that is missing is an error naming it.
        let missing = DockerConfig::parse(r#"{"credHelpers":{"x.example":"nosuch"}}"#)
            .unwrap()
            .with_helper_dir(dir.path().to_owned());
        let err = missing
            .credentials_for("x.example")
            .unwrap_err()
            .to_string();
        assert!(err.contains("docker-credential-nosuch"), "{err}");
    }
}
