//! L4: operations (`read-configuration`, `up`, `exec`, agent handoff). Library code never prints.

pub mod agents_md;
pub mod context;
pub mod envelope;
pub mod state;
pub mod workspace;
