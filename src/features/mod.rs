//! L1: Feature references → ordered, fetched, validated Features
//! ([spec: Features](https://containers.dev/implementors/features/)).
pub mod fetch;
pub mod publish;
