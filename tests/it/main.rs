//! devcell's integration tests: one binary, one module per area (see `support` for helpers).

mod audit;
mod build;
mod build_command;
mod compat_flags;
mod config;
mod config_compat;
mod egress;
mod engine;
mod features;
mod handoff;
mod handoff_e2e;
mod handoff_ux;
mod hostile;
mod interop;
mod lifecycle;
mod lockfile;
mod logging;
mod oci;
mod outdated;
mod robust;
mod security;
mod set_up;
mod support;
mod up;
