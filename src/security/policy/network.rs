//! Networks and published ports as permissions: which network modes are requests
//! (spec-note 0430), and the host addresses ports are published on (spec-note 0431).

use crate::security::permissions::Permission;

/// The permission a network mode asks for (spec-note 0430): `None` for the engine's default
/// bridge (`bridge`, `default`, empty) and `none`; [`Permission::HostNetwork`] for `host`;
/// [`Permission::Network`] for anything else, as written (`container:<x>`, a named network,
/// any other spelling the engine might accept).
pub fn network_permission(mode: &str) -> Option<Permission> {
    match mode {
        "" | "bridge" | "default" | "none" => None,
        "host" => Some(Permission::HostNetwork),
        other => Some(Permission::Network(other.to_string())),
    }
}

/// Splits a publish address `ip:port` / `[v6]:port` / `…:*` into its address (brackets kept)
/// and port; `None` when it is not of that form.
pub(super) fn split_publish_grant(text: &str) -> Option<(&str, &str)> {
    let (ip, port) = text.rsplit_once(':')?;
    let ip_ok = match ip.strip_prefix('[').and_then(|i| i.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => ip.parse::<std::net::Ipv4Addr>().is_ok(),
    };
    let port_ok = port == "*" || port.parse::<u16>().is_ok_and(|p| p > 0);
    (ip_ok && port_ok).then_some((ip, port))
}

/// The address a published port binds on the host, as [`Permission::PublishPort`] names it:
/// `0.0.0.0:8080`, `[::]:8080`, `192.168.1.5:*` (engine-chosen port).
pub fn publish_address(ip: &str, host_port: Option<u16>) -> String {
    let port = host_port.map_or_else(|| "*".to_string(), |p| p.to_string());
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// Whether a published port's host address is loopback (`127.0.0.0/8`, `::1`; the engine
/// takes IP addresses only, so a host name is not).
pub fn is_loopback_address(ip: &str) -> bool {
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    ip.parse::<std::net::IpAddr>()
        .is_ok_and(|a| a.is_loopback())
}

/// The host address `hardened` publishes ports on when none is given (spec-note 0431).
pub const LOOPBACK: &str = "127.0.0.1";
