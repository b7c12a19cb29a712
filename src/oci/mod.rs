//! L1: OCI registries, the content-addressed cache, and safe archive extraction.

pub mod extract;
