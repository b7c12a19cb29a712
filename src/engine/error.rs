//! Errors of the `engine` layer.

use std::path::PathBuf;

use crate::diagnostics::Hint;

/// `Result` with [`EngineError`].
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// How to start an engine, shown as the hint of [`EngineError::NotRunning`].
pub const START_ENGINE_HINT: &str = "start the Docker engine (`dockerd`, or `systemctl start docker`), \
or point `DOCKER_HOST` at a running engine (Podman: `systemctl --user start podman.socket` and \
`DOCKER_HOST=unix://$XDG_RUNTIME_DIR/podman/podman.sock`)";

/// An error talking to the container engine, or a bad engine request (`runArgs`, `--mount`).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `DOCKER_HOST` names a scheme devcell cannot connect to.
    #[error("cannot connect to the container engine at `{host}`: unsupported address")]
    UnsupportedHost {
        /// The address (`DOCKER_HOST` or the default socket).
        host: String,
        /// The cause.
        #[source]
        source: bollard::errors::Error,
    },
    /// No engine answers at the address.
    #[error("cannot reach the container engine at `{host}`: is it running?")]
    NotRunning {
        /// The address (`DOCKER_HOST` or the default socket).
        host: String,
        /// The cause.
        #[source]
        source: bollard::errors::Error,
    },
    /// An engine API call failed.
    #[error("engine request `{operation}` failed for `{subject}`")]
    Api {
        /// What devcell asked for (`inspect image`, `create container`, …).
        operation: &'static str,
        /// The image, container or exec the request concerned.
        subject: String,
        /// The engine's answer.
        #[source]
        source: bollard::errors::Error,
    },
    /// An image does not exist locally and could not be pulled.
    #[error("cannot pull image `{reference}`")]
    Pull {
        /// The image reference.
        reference: String,
        /// The engine's answer.
        #[source]
        source: bollard::errors::Error,
    },
    /// An image could not be pushed to its registry (refused, unreachable, not logged in).
    #[error("cannot push image `{reference}`: {message}")]
    Push {
        /// The image reference (`registry/repository:tag`).
        reference: String,
        /// The engine's or the registry's message.
        message: String,
    },
    /// An image reference could not be parsed.
    #[error("invalid image reference `{reference}`: {message}")]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        message: String,
    },
    /// An image build failed (a Dockerfile step, or the engine refused the build).
    #[error("image build failed: {message}")]
    Build {
        /// The engine's error message (e.g. the failing step and its exit code).
        message: String,
    },
    /// The build context could not be read or packed.
    #[error("cannot pack build context `{}`", path.display())]
    BuildContext {
        /// The file or folder that failed.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A `.dockerignore` pattern is not a valid glob.
    #[error("invalid `.dockerignore` pattern `{pattern}` in `{}`", path.display())]
    Dockerignore {
        /// The `.dockerignore` file.
        path: PathBuf,
        /// The pattern.
        pattern: String,
        /// The cause.
        #[source]
        source: globset::Error,
    },
    /// A Docker client configuration (`~/.docker/config.json`) could not be read.
    #[error("cannot read Docker client configuration `{}`", path.display())]
    ClientConfig {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Docker client configuration is not valid JSON of the expected shape.
    #[error("invalid Docker client configuration `{}`", path.display())]
    ClientConfigJson {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A credential helper (`docker-credential-<name>`) failed.
    #[error("credential helper `docker-credential-{helper}` failed for `{registry}`: {message}")]
    CredentialHelper {
        /// The helper's name.
        helper: String,
        /// The registry asked about.
        registry: String,
        /// What went wrong.
        message: String,
    },
    /// A container does not exist.
    #[error("no container `{id}`")]
    NoSuchContainer {
        /// The container id or name.
        id: String,
    },
    /// The engine refused to remove an image because a container uses it.
    #[error("image `{reference}` is in use: {message}")]
    ImageInUse {
        /// The image reference.
        reference: String,
        /// The engine's message (naming the container).
        message: String,
    },
    /// A `runArgs` flag devcell does not map to the engine's fields.
    #[error("unsupported `runArgs` flag `{flag}`")]
    UnsupportedRunArg {
        /// The flag as written.
        flag: String,
    },
    /// A `runArgs` flag has a missing or invalid value.
    #[error("invalid `runArgs` value for `{flag}`: {message}")]
    InvalidRunArg {
        /// The flag.
        flag: String,
        /// What was expected and what was found.
        message: String,
    },
    /// A `build.options` flag devcell does not map to the engine's build parameters.
    #[error("unsupported `build.options` flag `{flag}`")]
    UnsupportedBuildOption {
        /// The flag as written.
        flag: String,
    },
    /// A `build.options` flag has a missing or invalid value.
    #[error("invalid `build.options` value for `{flag}`: {message}")]
    InvalidBuildOption {
        /// The flag.
        flag: String,
        /// What was expected and what was found.
        message: String,
    },
    /// A `--mount` / `mounts` string is invalid.
    #[error("invalid mount `{spec}`: {message}")]
    InvalidMount {
        /// The mount string as written.
        spec: String,
        /// What was expected and what was found.
        message: String,
    },
    /// Writing to or reading from an exec stream failed.
    #[error("exec stream failed in container `{container}`")]
    ExecIo {
        /// The container.
        container: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Hint for EngineError {
    fn hint(&self) -> Option<String> {
        match self {
            EngineError::NotRunning { .. } => Some(START_ENGINE_HINT.to_string()),
            EngineError::UnsupportedHost { .. } => Some(
                "set `DOCKER_HOST` to `unix:///path/to/socket` or `tcp://host:port`".to_string(),
            ),
            EngineError::UnsupportedRunArg { .. } => Some(
                "remove the flag from `runArgs`, or use a devcontainer.json property instead"
                    .to_string(),
            ),
            EngineError::UnsupportedBuildOption { .. } => Some(
                "supported: `--build-arg`, `--target`, `--cache-from`, `--label`, `--no-cache`, \
                 `--pull`, `--tag`, `--network`, `--platform`; move the rest into the Dockerfile"
                    .to_string(),
            ),
            EngineError::Pull { .. } => Some(
                "check the reference, and log in with `docker login <registry>` if it is private"
                    .to_string(),
            ),
            EngineError::Build { .. } => Some(BUILD_FAILED_HINT.to_string()),
            EngineError::Push { .. } => Some(
                "name the image `<registry>/<repository>:<tag>`, check the registry is reachable, \
                 and log in with `docker login <registry>` if it needs credentials"
                    .to_string(),
            ),
            EngineError::Api { source, .. } if is_missing_init_binary(source) => {
                Some(MISSING_INIT_HINT.to_string())
            }
            _ => None,
        }
    }
}

/// The hint for a failed image build: the reference CLI's description first (tools match on
/// it), then where the step's output is and the one network cause devcell adds (spec-note
/// 0442).
pub const BUILD_FAILED_HINT: &str = "An error occurred building the image. The failing step's \
output is above on stderr; a step that downloads needs a network, and under the hardened profile \
a container without one is built without one too unless you give `--allow build-network`";

/// The hint for an engine that cannot find the init process it runs for `init` (the hardened
/// profile sets it): Podman's `catatonit`, which Debian's podman only recommends.
pub const MISSING_INIT_HINT: &str = "the engine cannot find its init binary (`init` is part of \
the hardened profile): install it (Debian: `apt-get install catatonit`), or point Podman's \
`init_path` in containers.conf's `[containers]` at an init such as `/usr/bin/tini`";

/// Whether the engine's answer says its init binary is missing (Podman: `container-init binary
/// not found on the host: stat /usr/libexec/podman/catatonit: no such file or directory`).
pub fn is_missing_init_binary(error: &bollard::errors::Error) -> bool {
    let text = error.to_string();
    text.contains("container-init binary not found") || text.contains("catatonit: no such file")
}

/// How many times a start is tried when the runtime fails transiently (see
/// [`is_transient_runtime_failure`]).
pub const START_ATTEMPTS: u64 = 3;

/// Whether the engine's answer says the OCI runtime's shim failed before the container's
/// process ran (containerd: `failed to create shim task: ttrpc: closed`), a failure seen under
/// load that a second start does not repeat. Errors the container's own configuration causes
/// (`OCI runtime create failed: ... no such file`) are not transient.
pub fn is_transient_runtime_failure(error: &bollard::errors::Error) -> bool {
    let bollard::errors::Error::DockerResponseServerError {
        status_code: 500,
        message,
    } = error
    else {
        return false;
    };
    message.contains("failed to create shim task")
        && (message.contains("ttrpc: closed") || message.contains("ttrpc: connection reset"))
}

/// Whether a container create failed because its image is gone (Docker: 404 `No such image`;
/// Podman: `image not known`): removed between its preparation and the create, by a
/// concurrent `prune` or `rmi` of a cache tag devcell built. Preparing the image again and
/// creating once more mends it (spec-note 0659).
pub fn is_image_missing_at_create(error: &EngineError) -> bool {
    let EngineError::Api {
        operation: "create container",
        source:
            bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                message,
            },
        ..
    } = error
    else {
        return false;
    };
    let message = message.to_ascii_lowercase();
    message.contains("no such image") || message.contains("image not known")
}

/// What failed in an engine pull ([`EngineError::Pull`]), in the words of the registry
/// failures (spec-note 0653): `not found`, `unauthorised`, `not found or unauthorised` (Docker's
/// `pull access denied`, which does not say which), or `no network to that registry`; `None`
/// for another error (its causes stay the message).
pub fn pull_failure(error: &EngineError) -> Option<&'static str> {
    let EngineError::Pull { source, .. } = error else {
        return None;
    };
    let text = match source {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        bollard::errors::Error::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
    .to_ascii_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    if any(&["pull access denied"]) {
        Some("not found or unauthorised")
    } else if any(&[
        "unauthorized",
        "authentication required",
        "403 forbidden",
        "denied:",
    ]) {
        Some("unauthorised")
    } else if any(&["manifest unknown", "name unknown", "not found"]) {
        Some("not found")
    } else if any(&[
        "dial tcp",
        "no such host",
        "connection refused",
        "i/o timeout",
        "network is unreachable",
        "tls handshake timeout",
        "client.timeout exceeded",
        "server misbehaving",
    ]) {
        Some("no network to that registry")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(message: &str) -> bollard::errors::Error {
        bollard::errors::Error::DockerResponseServerError {
            status_code: 500,
            message: message.to_string(),
        }
    }

    #[test]
    fn a_missing_podman_init_binary_gets_the_install_hint() {
        let e = EngineError::Api {
            operation: "start container",
            subject: "c1".to_string(),
            source: server_error(
                "container-init binary not found on the host: stat /usr/libexec/podman/catatonit: \
                 no such file or directory",
            ),
        };
        let hint = e.hint().expect("a hint");
        assert!(hint.contains("apt-get install catatonit"), "{hint}");
        let other = EngineError::Api {
            operation: "start container",
            subject: "c1".to_string(),
            source: server_error("port is already allocated"),
        };
        assert_eq!(other.hint(), None);
    }

    #[test]
    fn only_a_dead_runtime_shim_is_transient() {
        assert!(is_transient_runtime_failure(&server_error(
            "failed to create shim task: ttrpc: closed: unknown"
        )));
        assert!(!is_transient_runtime_failure(&server_error(
            "failed to create shim task: OCI runtime create failed: runc create failed: \
             unable to start container process: exec: \"/nope\": no such file or directory"
        )));
        assert!(!is_transient_runtime_failure(&server_error(
            "port is already allocated"
        )));
        assert!(!is_transient_runtime_failure(
            &bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                message: "failed to create shim task: ttrpc: closed".to_string(),
            }
        ));
    }

    /// Only a create whose image is gone is mended by preparing the image again.
    #[test]
    fn only_a_create_without_its_image_is_a_missing_image() {
        let api = |operation, status_code, message: &str| EngineError::Api {
            operation,
            subject: "devcell/uid:k".into(),
            source: bollard::errors::Error::DockerResponseServerError {
                status_code,
                message: message.into(),
            },
        };
        assert!(is_image_missing_at_create(&api(
            "create container",
            404,
            "No such image: devcell/uid:k"
        )));
        assert!(is_image_missing_at_create(&api(
            "create container",
            404,
            "devcell/uid:k: image not known"
        )));
        assert!(!is_image_missing_at_create(&api(
            "create container",
            404,
            "No such container: x"
        )));
        assert!(!is_image_missing_at_create(&api(
            "inspect image",
            404,
            "No such image: devcell/uid:k"
        )));
        assert!(!is_image_missing_at_create(&api(
            "create container",
            500,
            "No such image: devcell/uid:k"
        )));
    }

    /// The engine's pull answers, each in one word of what failed; another error keeps none.
    #[test]
    fn an_engine_pull_failure_is_named_in_a_few_words() {
        let pull = |source| EngineError::Pull {
            reference: "127.0.0.1:5000/x:nope".into(),
            source,
        };
        let cases = [
            (
                "manifest for 127.0.0.1:5000/x:nope not found: manifest unknown: manifest unknown",
                Some("not found"),
            ),
            (
                "pull access denied for x, repository does not exist or may require 'docker login'",
                Some("not found or unauthorised"),
            ),
            (
                "Head \"https://r/v2/x/manifests/1\": unauthorized: authentication required",
                Some("unauthorised"),
            ),
            (
                "Get \"http://127.0.0.1:5999/v2/\": dial tcp 127.0.0.1:5999: connect: connection refused",
                Some("no network to that registry"),
            ),
            ("something else entirely", None),
        ];
        for (message, expected) in cases {
            let e = pull(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                message: message.into(),
            });
            assert_eq!(pull_failure(&e), expected, "{message}");
        }
        let stream = pull(bollard::errors::Error::DockerStreamError {
            error: "manifest unknown".into(),
        });
        assert_eq!(pull_failure(&stream), Some("not found"));
        let other = EngineError::Api {
            operation: "pull",
            subject: "x".into(),
            source: server_error("manifest unknown"),
        };
        assert_eq!(pull_failure(&other), None, "only a pull");
    }
}
