//! What every connection devcell opens to a registry or a download host shares: the TLS crypto
//! provider, and the rule that only loopback hosts are reached over plain HTTP.

use std::sync::Once;

/// Installs rustls' `ring` crypto provider as the process default, once.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Whether `registry` (`host[:port]`) is a loopback address, reached over plain HTTP.
pub fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        registry.rsplit_once(':').map_or(registry, |(h, _)| h)
    };
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_are_detected() {
        assert!(is_loopback("127.0.0.1:5000"));
        assert!(is_loopback("localhost:5000"));
        assert!(is_loopback("localhost"));
        assert!(is_loopback("[::1]:5000"));
        assert!(!is_loopback("ghcr.io"));
        assert!(!is_loopback("localhost.example.com:5000"));
    }
}
