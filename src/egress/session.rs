//! One workspace's egress, started in one call: what `up`/`handoff` add for
//! `--network allowlist` (the forwarder installed, the socket folder, the proxy serving it in
//! this process's runtime, the container's part).

use std::path::Path;
use std::sync::Arc;

use super::channel::{ContainerEgress, SocketFolder, install_forwarder};
use super::error::EgressError;
use super::policy::{Allowlist, Resolver};
use super::proxy::Proxy;
use super::record::DecisionLog;
use super::upstream::Upstreams;

/// A running proxy for one workspace; it stops when dropped (or with [`EgressSession::stop`]).
#[derive(Debug)]
pub struct EgressSession {
    container: ContainerEgress,
    folder: SocketFolder,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl EgressSession {
    /// Installs the forwarder under `state`, binds `state/egress/<key>/socket/proxy.sock`
    /// (replacing a stale socket), and serves `allowlist` there, recording every decision in
    /// `log` (a file of the session's record). `port` is the forwarder's loopback port in the
    /// container. Must be called inside a tokio runtime, which then runs the proxy.
    pub fn start(
        state: &Path,
        key: &str,
        allowlist: Allowlist,
        resolver: Arc<dyn Resolver>,
        log: &Path,
        port: u16,
    ) -> Result<EgressSession, EgressError> {
        Self::start_with_upstreams(state, key, allowlist, Upstreams::new(), resolver, log, port)
    }

    /// [`EgressSession::start`] that also serves the agent's `upstreams` (spec-note 0501): the
    /// container's environment gets each upstream's `env` = its in-container base URL.
    pub fn start_with_upstreams(
        state: &Path,
        key: &str,
        allowlist: Allowlist,
        upstreams: Upstreams,
        resolver: Arc<dyn Resolver>,
        log: &Path,
        port: u16,
    ) -> Result<EgressSession, EgressError> {
        let forwarder = install_forwarder(state)?;
        let folder = SocketFolder::create(state, key)?;
        let log = DecisionLog::open(log)?;
        let listener = folder.bind()?;
        let mut container = ContainerEgress::new(&forwarder, &folder, port);
        container.env.extend(upstreams.container_env(port));
        let proxy =
            Proxy::with_upstreams(allowlist, resolver, log, upstreams).with_local_port(port);
        let task = tokio::spawn(async move { proxy.serve_unix(listener).await });
        Ok(EgressSession {
            container,
            folder,
            task,
        })
    }

    /// What the container needs (network `none`, mounts, env, the forwarder's argv).
    pub fn container(&self) -> &ContainerEgress {
        &self.container
    }

    /// The socket folder on the host.
    pub fn folder(&self) -> &SocketFolder {
        &self.folder
    }

    /// Stops serving and removes the socket (connections in flight end with the runtime).
    pub fn stop(self) {}
}

impl Drop for EgressSession {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(self.folder.socket());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::policy::FakeResolver;

    #[tokio::test]
    async fn a_session_serves_its_socket_until_dropped() {
        let state = tempfile::tempdir().unwrap();
        let log = state.path().join("decisions.jsonl");
        let session = EgressSession::start(
            state.path(),
            "ws",
            Allowlist::parse(&["web.test:8080=127.0.0.1"]).unwrap(),
            Arc::new(FakeResolver::new()),
            &log,
            3128,
        )
        .unwrap();
        let socket = session.folder().socket();
        assert!(tokio::net::UnixStream::connect(&socket).await.is_ok());
        assert_eq!(session.container().network_mode, "none");
        session.stop();
        assert!(
            !socket.exists(),
            "the socket is removed when the session stops"
        );
        assert!(tokio::net::UnixStream::connect(&socket).await.is_err());
    }

    #[tokio::test]
    async fn a_session_gives_the_container_each_upstreams_base_url_and_never_its_value() {
        let state = tempfile::tempdir().unwrap();
        let mut upstreams = Upstreams::new();
        upstreams.insert(
            crate::egress::Upstream::new(&crate::egress::upstream::UpstreamSpec {
                id: "openai",
                url: "https://api.example.test/v1",
                header: "Authorization",
                value: "Bearer sk-session-secret",
                env: "OPENAI_BASE_URL",
                address: None,
                ca_files: &[],
            })
            .unwrap(),
        );
        let session = EgressSession::start_with_upstreams(
            state.path(),
            "ws",
            Allowlist::default(),
            upstreams,
            Arc::new(FakeResolver::new()),
            &state.path().join("decisions.jsonl"),
            3128,
        )
        .unwrap();
        let c = session.container();
        assert_eq!(
            c.env["OPENAI_BASE_URL"],
            "http://127.0.0.1:3128/upstreams/openai"
        );
        assert!(!format!("{c:?}").contains("sk-session-secret"));
    }
}
