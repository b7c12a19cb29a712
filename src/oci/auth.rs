//! Registry credentials for devcell's registry client: the Docker client configuration as
//! [`crate::formats::docker_config`] reads it (the one reader, shared with the engine), and
//! their `oci-client` form.

pub use crate::formats::docker_config::{
    Credentials, DockerConfig, DockerConfigError, default_path as default_docker_config_path,
};

use super::error::OciError;

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

impl From<DockerConfigError> for OciError {
    fn from(e: DockerConfigError) -> Self {
        match e {
            DockerConfigError::Read { path, source } => OciError::DockerConfig {
                path,
                source: Box::new(source),
            },
            DockerConfigError::Json { path, source } => OciError::DockerConfig {
                path,
                source: Box::new(source),
            },
            DockerConfigError::Helper {
                helper,
                registry,
                reason,
            } => OciError::CredentialHelper {
                helper,
                registry,
                reason,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_tokens_are_anonymous_to_oci_client() {
        assert_eq!(
            Credentials::IdentityToken("t".into()).to_registry_auth(),
            oci_client::secrets::RegistryAuth::Anonymous
        );
        assert_eq!(
            Credentials::Basic {
                username: "u".into(),
                password: "p".into()
            }
            .to_registry_auth(),
            oci_client::secrets::RegistryAuth::Basic("u".into(), "p".into())
        );
    }
}
