//! devcell's integration tests: one binary, one module per area (see `support` for helpers).

mod audit;
mod config;
mod features;
mod handoff;
mod lifecycle;
mod oci;
mod support;
