//! L1: OCI registries, the content-addressed cache, and safe archive extraction.
//!
//! - [`registry`]: pull/push manifests, blobs and tags over the OCI distribution API (a
//!   wrapper over `oci-client`), with plain HTTP for loopback registries, mirrors and CA
//!   certificates.
//! - [`artifact`]: fetching Dev Container artifacts (Features, Templates) through the cache.
//! - [`auth`]: credentials from the Docker config and credential helpers.
//! - [`token`]: identity (OAuth2 refresh) tokens exchanged for scoped access tokens.
//! - [`store`]: the content-addressed cache (`blobs/sha256/<hex>`, tag resolutions).
//! - [`digest`]: `sha256:<hex>` digests.
//! - [`http`]: plain HTTPS downloads (direct Feature tarballs).
//! - [`transport`]: the TLS crypto provider and the loopback-only plain HTTP rule.
//! - [`extract`]: safe extraction of Feature archives.

pub mod artifact;
pub mod auth;
pub mod digest;
pub mod error;
pub mod extract;
pub mod http;
pub mod registry;
pub mod store;
pub mod token;
pub mod transport;

pub use error::{OciError, Result};
