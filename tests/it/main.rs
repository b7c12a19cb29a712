//! devcell's integration tests: one binary, one module per area (see `support` for helpers).

mod build;
mod config;
mod engine;
mod security;
mod support;
