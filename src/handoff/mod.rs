//! L5: devcell's agent product, above the spec operations ([`crate::ops`]): the handoff
//! [`plan`], its container and host runtimes ([`agent`], [`host`]) running one [`session`],
//! the session state ([`state`]),
//! the context file and `AGENTS.md` ([`context`], [`agents_md`]), and the product's own
//! commands ([`status`], [`delete`], [`doctor`], [`prune`]). Library code never prints:
//! results are values, progress goes to a `progress::Reporter`.

pub mod agent;
pub mod agents_md;
pub mod context;
pub mod delete;
pub mod doctor;
pub mod host;
pub mod plan;
pub mod prune;
pub mod session;
pub mod state;
pub mod status;
