//! devcell: a native Rust implementation of the [Dev Container spec](https://containers.dev).
//!
//! It turns a repository with a `.devcontainer` configuration into a hardened, reproducible
//! container workspace and hands it to a coding agent.
//!
//! # Layers
//!
//! Modules are layered; a lower layer never imports a higher one (enforced by
//! `tests/layering.rs`), and only [`engine`] names `bollard`:
//!
//! | layer | modules | may use |
//! |---|---|---|
//! | L0 | [`config`], [`diagnostics`], [`progress`], [`names`], [`settings`] | external crates |
//! | L1 | [`oci`], [`features`] | L0; `features` may use `oci` |
//! | L2 | [`engine`] | L0 |
//! | L3 | [`build`], [`security`], [`lifecycle`] | L2, L1, L0; never one another |
//! | L4 | [`handoff`] | L3, L2, L1, L0 |
//! | L5 | [`cli`] | `handoff`, L0 |

pub mod build;
pub mod cli;
pub mod config;
pub mod diagnostics;
pub mod engine;
pub mod features;
pub mod handoff;
pub mod lifecycle;
pub mod names;
pub mod oci;
pub mod ops;
pub mod progress;
pub mod security;
pub mod settings;
