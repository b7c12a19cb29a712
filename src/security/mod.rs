//! L3: security profiles (`hardened`, `reference`), permission requests and audit.

pub mod audit;
pub mod probe;
