//! Registry credentials for the engine's pulls, pushes and builds: the Docker client
//! configuration as [`crate::formats::docker_config`] reads it (the one reader, shared with
//! devcell's registry client), in the engine's form.

use std::collections::HashMap;

use bollard::auth::DockerCredentials;

use super::error::{EngineError, Result};
use crate::formats::docker_config::{Credentials, DockerConfig, DockerConfigError, server_address};

/// The engine's credentials for `registry` (a host, or `docker.io`), `None` for anonymous.
///
/// # Errors
/// [`EngineError::ClientConfig`], [`EngineError::ClientConfigJson`] for an unreadable
/// configuration; [`EngineError::CredentialHelper`] when a configured helper fails.
pub fn for_registry(registry: &str) -> Result<Option<DockerCredentials>> {
    let creds = DockerConfig::load_default()?.credentials_for(registry)?;
    Ok(to_engine(creds, server_address(registry)))
}

/// The engine's credentials for a build: every `auths` entry with usable credentials, by its
/// key (a build's base images may come from any registry); `None` when there are none.
///
/// # Errors
/// As [`for_registry`], without helpers.
pub fn for_build() -> Result<Option<HashMap<String, DockerCredentials>>> {
    let all: HashMap<String, DockerCredentials> = DockerConfig::load_default()?
        .all_stored_credentials()
        .into_iter()
        .filter_map(|(key, creds)| Some((key.clone(), to_engine(creds, key)?)))
        .collect();
    Ok((!all.is_empty()).then_some(all))
}

fn to_engine(creds: Credentials, server: String) -> Option<DockerCredentials> {
    let (username, password, identitytoken) = match creds {
        Credentials::Anonymous => return None,
        Credentials::Basic { username, password } => (Some(username), Some(password), None),
        Credentials::IdentityToken(token) => (None, None, Some(token)),
    };
    Some(DockerCredentials {
        username,
        password,
        identitytoken,
        serveraddress: Some(server),
        ..DockerCredentials::default()
    })
}

impl From<DockerConfigError> for EngineError {
    fn from(e: DockerConfigError) -> Self {
        match e {
            DockerConfigError::Read { path, source } => EngineError::ClientConfig { path, source },
            DockerConfigError::Json { path, source } => {
                EngineError::ClientConfigJson { path, source }
            }
            DockerConfigError::Helper {
                helper,
                registry,
                reason,
            } => EngineError::CredentialHelper {
                helper,
                registry,
                message: reason,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_credentials_name_their_server() {
        let basic = Credentials::Basic {
            username: "u".into(),
            password: "p".into(),
        };
        let c = to_engine(basic, server_address("docker.io")).unwrap();
        assert_eq!(c.username.as_deref(), Some("u"));
        assert_eq!(
            c.serveraddress.as_deref(),
            Some(crate::formats::docker_config::DOCKER_HUB_KEY)
        );
        let c = to_engine(Credentials::IdentityToken("t".into()), "r".into()).unwrap();
        assert_eq!((c.identitytoken.as_deref(), c.username), (Some("t"), None));
        assert!(to_engine(Credentials::Anonymous, "r".into()).is_none());
    }
}
