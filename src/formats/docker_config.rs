//! Registry credentials from the Docker client configuration (`$DOCKER_CONFIG/config.json`,
//! default `~/.docker/config.json`): the one reader, for the engine's pulls, pushes and builds
//! and for devcell's own registry client (spec-distilled §5.6).
//!
//! For a registry (`host[:port]`, or `docker.io`): its `credHelpers` helper, else the
//! `credsStore` helper, else its `auths` entry; a helper that has no entry falls through to
//! `auths`. An `auths` entry gives its `identitytoken` (an OAuth2 refresh token, which takes
//! precedence, as in Docker), else `auth` (base64 `user:password`), else `username` and
//! `password` (spec-notes/0062, 0262). Secrets never appear in `Debug` output or errors.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use serde::Deserialize;

/// The key Docker Hub credentials are stored under (and sent to helpers as).
pub const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// Credentials for one registry. `Debug` redacts every secret.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Credentials {
    /// No credentials: anonymous access.
    #[default]
    Anonymous,
    /// A user name and password (or personal access token).
    Basic {
        /// The user name.
        username: String,
        /// The password or token.
        password: String,
    },
    /// An OAuth2 identity (refresh) token (`identitytoken`, or a helper's `<token>` user).
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

/// What went wrong reading credentials.
#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read Docker client configuration `{}`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of the `config.json` shape.
    #[error("invalid Docker client configuration `{}`", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A configured credential helper cannot run or answered garbage.
    #[error("credential helper `docker-credential-{helper}` failed for `{registry}`: {reason}")]
    Helper {
        /// The helper suffix (`pass`, `desktop`, …).
        helper: String,
        /// The registry asked about.
        registry: String,
        /// What went wrong (never the secret).
        reason: String,
    },
}

/// The parts of `config.json` devcell reads.
#[derive(Clone, Default, Deserialize)]
pub struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
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

/// The client configuration file: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`;
/// `None` when neither can be named (no home directory).
pub fn default_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    dirs::home_dir().map(|h| h.join(".docker").join("config.json"))
}

/// The address Docker stores and asks helpers for `registry` under: [`DOCKER_HUB_KEY`] for
/// `docker.io` and its aliases, else the registry itself.
pub fn server_address(registry: &str) -> String {
    candidate_keys(registry).swap_remove(0)
}

/// The keys a registry may be stored under, most specific first.
fn candidate_keys(registry: &str) -> Vec<String> {
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

/// The host of an `auths` key (`https://host/v1/` → `host`).
fn key_host(key: &str) -> &str {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

impl DockerConfig {
    /// Reads a client configuration; a missing file is an empty configuration.
    ///
    /// # Errors
    /// [`DockerConfigError::Read`] (unreadable), [`DockerConfigError::Json`].
    pub fn load(path: &Path) -> Result<DockerConfig, DockerConfigError> {
        match std::fs::read(path) {
            Ok(bytes) => Self::parse_bytes(&bytes).map_err(|source| DockerConfigError::Json {
                path: path.to_path_buf(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DockerConfig::default()),
            Err(source) => Err(DockerConfigError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Reads the configuration at [`default_path`]; none there (or no home) is an empty one.
    ///
    /// # Errors
    /// As [`DockerConfig::load`].
    pub fn load_default() -> Result<DockerConfig, DockerConfigError> {
        match default_path() {
            Some(path) => Self::load(&path),
            None => Ok(DockerConfig::default()),
        }
    }

    /// Parses the JSON text of a client configuration.
    ///
    /// # Errors
    /// The JSON error when the text does not have the `config.json` shape.
    pub fn parse(text: &str) -> Result<DockerConfig, serde_json::Error> {
        Self::parse_bytes(text.as_bytes())
    }

    fn parse_bytes(bytes: &[u8]) -> Result<DockerConfig, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Looks credential helpers up in `dir` instead of `PATH` (tests, sandboxes).
    pub fn with_helper_dir(mut self, dir: PathBuf) -> Self {
        self.helper_dir = Some(dir);
        self
    }

    /// Credentials for `registry` (`host[:port]`, or `docker.io`), in the order the module
    /// documents. A `credHelpers` helper that is not installed is an error naming it; a
    /// `credsStore` helper that is not installed (a configuration copied from another machine)
    /// is skipped.
    ///
    /// # Errors
    /// [`DockerConfigError::Helper`] when a configured helper cannot run or answers garbage.
    pub fn credentials_for(&self, registry: &str) -> Result<Credentials, DockerConfigError> {
        let server = server_address(registry);
        let explicit = candidate_keys(registry)
            .iter()
            .find_map(|k| self.cred_helpers.get(k))
            .cloned();
        let helper = explicit
            .as_ref()
            .map(|h| (h, true))
            .or(self.creds_store.as_ref().map(|h| (h, false)));
        if let Some((helper, required)) = helper {
            match run_helper(self.helper_dir.as_deref(), helper, &server, required)? {
                Credentials::Anonymous => {}
                found => return Ok(found),
            }
        }
        Ok(self.stored_credentials(registry).unwrap_or_default())
    }

    /// The `auths` credentials for `registry`, if any; helpers are not consulted.
    pub fn stored_credentials(&self, registry: &str) -> Option<Credentials> {
        let keys = candidate_keys(registry);
        let entry = keys.iter().find_map(|k| self.auths.get(k)).or_else(|| {
            let wanted = key_host(&keys[0]);
            self.auths
                .iter()
                .find(|(k, _)| key_host(k) == wanted)
                .map(|(_, e)| e)
        })?;
        entry_credentials(registry, entry)
    }

    /// Every `auths` entry with usable credentials, by its key as written (what the engine
    /// wants for a build, whose base images may come from any registry).
    pub fn all_stored_credentials(&self) -> BTreeMap<String, Credentials> {
        self.auths
            .iter()
            .filter_map(|(key, entry)| Some((key.clone(), entry_credentials(key, entry)?)))
            .collect()
    }
}

fn entry_credentials(registry: &str, entry: &AuthEntry) -> Option<Credentials> {
    if let Some(token) = entry.identity_token.as_deref().filter(|t| !t.is_empty()) {
        return Some(Credentials::IdentityToken(token.to_owned()));
    }
    if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        if let Some((user, pass)) = decoded.as_deref().and_then(|d| d.split_once(':')) {
            return Some(Credentials::Basic {
                username: user.to_owned(),
                password: pass.to_owned(),
            });
        }
        tracing::warn!(registry, "ignoring malformed `auth` entry in Docker config");
    }
    match (&entry.username, &entry.password) {
        (Some(u), Some(p)) => Some(Credentials::Basic {
            username: u.clone(),
            password: p.clone(),
        }),
        _ => None,
    }
}

/// Runs `docker-credential-<helper> get` with `server` on stdin (the Docker credential helper
/// protocol). An answer of "credentials not found", or a helper that is not installed when it
/// is not `required`, means anonymous.
fn run_helper(
    dir: Option<&Path>,
    helper: &str,
    server: &str,
    required: bool,
) -> Result<Credentials, DockerConfigError> {
    let fail = |reason: String| DockerConfigError::Helper {
        helper: helper.to_owned(),
        registry: server.to_owned(),
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
    let mut command = Command::new(program);
    // the user's helper, but what it might start runs nothing a repository configures
    super::host_tool::harden_tool(&mut command);
    // in its own process group, killed with devcell and at its deadline (spec-note 0425)
    let out = match crate::process::output_within_std(
        command.arg("get"),
        Some(server.as_bytes()),
        crate::process::CREDENTIAL_HELPER_TIMEOUT,
    ) {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            return Ok(Credentials::Anonymous);
        }
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(fail(e.to_string())),
        Err(e) => return Err(fail(format!("cannot run it: {e}"))),
    };
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).to_lowercase()
            + &String::from_utf8_lossy(&out.stderr).to_lowercase();
        if text.contains("not found") {
            return Ok(Credentials::Anonymous);
        }
        return Err(fail(format!("exited with {}", out.status)));
    }
    let answer: HelperAnswer = serde_json::from_slice(&out.stdout)
        .map_err(|_| fail("answer is not `{\"Username\",\"Secret\"}` JSON".into()))?;
    // Helpers answer `<token>` as the user name for identity tokens.
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

    fn config(json: &str) -> DockerConfig {
        DockerConfig::parse(json).unwrap()
    }

    fn basic(user: &str, pass: &str) -> Credentials {
        Credentials::Basic {
            username: user.into(),
            password: pass.into(),
        }
    }

    #[test]
    fn auths_entries_decode_and_match_by_host() {
        // base64("user:pa:ss")
        let c = config(r#"{"auths":{"127.0.0.1:5000":{"auth":"dXNlcjpwYTpzcw=="}}}"#);
        assert_eq!(
            c.credentials_for("127.0.0.1:5000").unwrap(),
            basic("user", "pa:ss")
        );
        assert_eq!(
            c.credentials_for("other.io").unwrap(),
            Credentials::Anonymous
        );
        let c = config(
            r#"{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"},
                "https://ghcr.io/v2/token":{"auth":"dTpw"},
                "https://r.example/":{"username":"a","password":"b"}}}"#,
        );
        assert_eq!(c.stored_credentials("docker.io"), Some(basic("u", "p")));
        assert_eq!(c.stored_credentials("ghcr.io"), Some(basic("u", "p")));
        assert_eq!(c.stored_credentials("r.example"), Some(basic("a", "b")));
        assert_eq!(c.stored_credentials("quay.io"), None);
        assert_eq!(c.all_stored_credentials().len(), 3);
        assert_eq!(server_address("docker.io"), DOCKER_HUB_KEY);
        assert_eq!(server_address("ghcr.io"), "ghcr.io");
    }

    #[test]
    fn identity_token_takes_precedence_and_secrets_are_redacted() {
        // As `docker login` stores it: `auth` is `<token>:` with an empty password.
        let c = config(
            r#"{"auths":{"reg.example":{"auth":"PHRva2VuPjo=","identitytoken":"refresh-xyz"},
                "empty.example":{"auth":"dTpw","identitytoken":""},
                "h":{"auth":"c2VjcmV0OnNlY3JldA=="}}}"#,
        );
        let creds = c.credentials_for("reg.example").unwrap();
        assert_eq!(creds, Credentials::IdentityToken("refresh-xyz".into()));
        assert!(!format!("{creds:?}").contains("refresh-xyz"));
        assert_eq!(c.credentials_for("empty.example").unwrap(), basic("u", "p"));
        let shown = format!("{:?} {c:?}", basic("alice", "hunter2"));
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
    }

    #[test]
    fn unknown_fields_are_ignored_and_bad_json_is_an_error() {
        assert!(DockerConfig::parse(r#"{"psFormat":"x","auths":{}}"#).is_ok());
        assert!(DockerConfig::parse(r#"{"auths":[]}"#).is_err());
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
        let c = config(r#"{"credsStore":"devcelltest","credHelpers":{"ghcr.io":"gh"},"auths":{"other.example":{"auth":"YTpi"}}}"#)
            .with_helper_dir(dir.path().to_owned());
        assert_eq!(
            c.credentials_for("known.example").unwrap(),
            basic("bob", "s3")
        );
        // `<token>` as the user name: the secret is an identity token.
        assert_eq!(
            c.credentials_for("oauth.example").unwrap(),
            Credentials::IdentityToken("rt".into())
        );
        // The helper says "not found": `auths`, then anonymous.
        assert_eq!(c.credentials_for("other.example").unwrap(), basic("a", "b"));
        assert_eq!(
            c.credentials_for("unknown.example").unwrap(),
            Credentials::Anonymous
        );
        // An explicit `credHelpers` helper that is missing is an error naming it.
        let err = c.credentials_for("ghcr.io").unwrap_err().to_string();
        assert!(err.contains("docker-credential-gh"), "{err}");
        // A missing `credsStore` helper is skipped.
        let c = config(r#"{"credsStore":"devcell-test-no-such-helper"}"#);
        assert_eq!(
            c.credentials_for("quay.io").unwrap(),
            Credentials::Anonymous
        );
        // A helper name that is not a plain word is refused before anything runs.
        let c = config(r#"{"credHelpers":{"x.example":"../../bin/sh"}}"#);
        assert!(c.credentials_for("x.example").is_err());
    }
}
