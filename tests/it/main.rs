//! devcell's integration tests: one binary, one module per area (see `support` for helpers).

mod config;
mod oci;
mod support;
