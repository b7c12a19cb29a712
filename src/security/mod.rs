//! L3: security profiles (`hardened`, `reference`), permission requests and audit.
