//! devcell: a native Rust implementation of the [Dev Container spec](https://containers.dev).
//!
//! It turns a repository with a `.devcontainer` configuration into a hardened, reproducible
//! container workspace and hands it to a coding agent.
//!
//! # Layers
//!
//! Modules are layered; a lower layer never imports a higher one, the files of one module
//! import one another in one direction only (both enforced by `tests/layering.rs`), and only
//! [`engine`] names `bollard` or a backend (everything above asks `engine::connect` for an
//! `Arc<dyn Engine>`):
//!
//! | layer | modules | what | may use |
//! |---|---|---|---|
//! | L0 | [`config`], [`diagnostics`], [`formats`], [`progress`], [`process`], [`names`], [`settings`] | devcontainer.json → merged configuration; programs devcell waits for (deadlines, killed with devcell); shared formats (Docker credentials, image references, mount fields, shell quoting, JSON values, terminal-safe text); errors, events, names, user settings (the typed `NetworkMode` and `Profile`) | external crates |
//! | L1 | [`oci`], [`features`], [`templates`] | registries, content store, archives; Features; Templates | L0; `features` may use `oci`, `templates` may use both |
//! | L2 | [`engine`] | the `Engine` trait, its one factory, the Docker backend, the Compose CLI, typed mounts (`Mount`; `--mount` text only where it is written); in unit tests an in-memory engine the operations run against | L0 |
//! | L3 | [`build`], [`security`], [`lifecycle`], [`egress`], [`mail`] | image builds; the profile, the user's choices resolved once (`security::choice`), policy and audit; hooks; the egress allowlist proxy; the mediated channel between tasks | L2, L1, L0; never one another |
//! | L4 | [`ops`] | the spec's operations (`up`, `build`, `exec`, `set-up`, …), one file each, over shared steps (one create pipeline for `up` and Compose); `OpsError` | L3–L0 |
//! | L5 | [`handoff`] | the agent product: workspace inspection, plan, runtimes, session, state, context, audit, envelope | L4–L0 |
//! | L6 | [`cli`] | the terminal | `handoff`, `ops`, L0 |

pub mod build;
pub mod cli;
pub mod config;
pub mod diagnostics;
pub mod egress;
pub mod engine;
pub mod features;
pub mod formats;
pub mod handoff;
pub mod lifecycle;
pub mod mail;
pub mod names;
pub mod oci;
pub mod ops;
pub mod process;
pub mod progress;
pub mod security;
pub mod settings;
pub mod templates;
