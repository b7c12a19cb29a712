//! The one place that chooses the container engine backend: everything above `engine` asks
//! [`connect`] and talks to the [`Engine`] it returns, never to a backend type.
//!
//! Today the only backend is the Docker Engine API ([`DockerEngine`], at `DOCKER_HOST` or the
//! default socket); Podman answers through its Docker-compatible socket.

use std::sync::Arc;

use super::{DockerEngine, Engine, Result};

/// Connects to the container engine this host is configured for (`DOCKER_HOST`, else the
/// default socket) and returns it as an [`Engine`].
///
/// Errors: [`super::EngineError::NotRunning`] (with a hint on how to start one) when nothing
/// answers; [`super::EngineError::UnsupportedHost`] for an address scheme devcell cannot use.
pub async fn connect() -> Result<Arc<dyn Engine>> {
    Ok(Arc::new(DockerEngine::connect().await?))
}
