//! L1: Feature references → ordered, validated Features
//! ([spec: Features](https://containers.dev/implementors/features/)).
//!
//! - [`reference`](mod@reference): the keys of `features` / `dependsOn` ([`FeatureRef`]).
//! - [`metadata`]: the `devcontainer-feature.json` model ([`FeatureMetadata`]).
//! - [`options`]: user options validated against a Feature's options; env files.
//! - [`order`]: the spec's round-based install order (pure; metadata comes from a resolver).
//! - [`local`]: local Feature folders (`./name`).
//! - [`lockfile`]: `devcontainer-lock.json` read/write/verify.
//! - [`fetch`]: resolve and materialise Features (OCI, tarball, local) through the cache.
//! - [`nofollow_copy`]: copying a repository folder through descriptors, never following a link.
//! - [`publish`]: `features package` / `features publish`.
//! - [`docs`]: `features generate-docs` / `templates generate-docs` pages.
//! - [`test`](mod@test): `features test`'s tests of a collection and their workspaces.

pub mod docs;
pub mod error;
pub mod fetch;
pub mod local;
pub mod lockfile;
pub mod metadata;
pub mod nofollow_copy;
pub mod options;
pub mod order;
pub mod publish;
pub mod reference;
pub mod test;

pub use error::{FeatureError, Result};
pub use metadata::FeatureMetadata;
pub use reference::FeatureRef;
