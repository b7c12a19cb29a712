//! L3: egress allowlisting (`--network allowlist`, issue 13; spec-note 0500).
//!
//! An `allowlist` container has network `none`: no interface but loopback, no route, no
//! resolver. Its only way out is a Unix socket served on the host by a [`Proxy`] that enforces
//! the user's [`Allowlist`] and records every [`Decision`]; inside, a static forwarder relays
//! `127.0.0.1:<port>` to that socket ([`channel`]). Enforcement is the topology, not rules
//! inside the container: nothing there needs a capability, and the proxy environment variables
//! are a convenience, not a control.
//!
//! - [`policy`]: entries `host[:port][=address]`, the decision on resolved addresses, the
//!   [`Resolver`] trait (host resolver, fake for tests).
//! - [`proxy`]: the HTTP forward proxy and `CONNECT` with SNI = host, on tokio + hyper + rustls.
//! - [`record`]: the decision log (JSON lines).
//! - [`channel`]: the forwarder, the socket folder, and what the container needs
//!   ([`ContainerEgress`]).
//! - [`upstream`]: model-provider upstreams whose credential header the proxy adds on the
//!   host ([`Upstream`]; spec-note 0501).
//! - [`settings`]: the user's `network`, `egress` and `upstreams` settings, checked with
//!   their locations.
//! - [`session`]: all of it started in one call for a workspace ([`EgressSession`]).

pub mod channel;
pub mod error;
pub mod policy;
pub mod proxy;
pub mod record;
pub mod session;
pub mod settings;
pub mod upstream;

pub use channel::{ContainerEgress, SocketFolder, install_forwarder};
pub use error::EgressError;
pub use policy::{Allowed, Allowlist, Entry, FakeResolver, HostResolver, Refusal, Resolver};
pub use proxy::Proxy;
pub use record::{Decision, DecisionLog, Via};
pub use session::EgressSession;
pub use upstream::{Upstream, Upstreams};
