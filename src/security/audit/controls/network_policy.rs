//! Control "network policy": Which destinations can the run reach? Looks at the network mode and
//! attached networks (internal ones have no route out), proxies, published ports.

use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::ContainerFacts;
use crate::security::audit::heuristics::is_proxy_name;
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// What an allowlist does not stop, said with every allowlist's evidence.
const ALLOWLIST_LIMITS: &str = "does not stop exfiltration to an allowed destination (or through a broad `*.suffix` entry), domain fronting behind an allowed name, or timing and volume channels; contents are not recorded";

/// The evidence for network policy.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    let proxy: Vec<&str> = f
        .env
        .iter()
        .filter(|e| is_proxy_name(&e.name))
        .map(|e| e.name.as_str())
        .collect();
    let mode = f.network_mode.as_deref();
    let allowlist = f
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::names::EGRESS_NETWORK_LABEL))
        .is_some_and(|v| v == "allowlist");
    match mode {
        Some("none") if allowlist => {
            out.push(ev(
                "network allowlist",
                proxy_evidence(ctx, "network none"),
                Risk::Safe,
            ));
            out.push(ev(
                "allowlist limits",
                ALLOWLIST_LIMITS,
                Risk::Safe,
            ));
        }
        Some("none") => out.push(ev(
            "network none",
            "no interface but loopback: default-deny",
            Risk::Safe,
        )),
        Some("host") => out.push(ev(
            "network host",
            "the host's network stack: every destination the host can reach, and host-local services",
            Risk::Critical,
        )),
        Some(m) if m.starts_with("container:") => out.push(ev(
            format!("network {m}"),
            "shares another container's network namespace, whose policy is not audited here",
            Risk::Critical,
        )),
        Some(m) => {
            let nets: Vec<&str> = if f.networks.is_empty() {
                vec![m]
            } else {
                f.networks.iter().map(String::as_str).collect()
            };
            let all_internal = !ctx.internal_networks.is_empty()
                && nets.iter().all(|n| ctx.internal_networks.iter().any(|i| i == n));
            if all_internal && allowlist {
                out.push(ev(
                    format!("network {} (allowlist)", nets.join(",")),
                    proxy_evidence(
                        ctx,
                        "closed networks only (peers on them are reachable by name)",
                    ),
                    Risk::Safe,
                ));
                out.push(ev(
                    "allowlist limits",
                    ALLOWLIST_LIMITS,
                    Risk::Safe,
                ));
            } else if all_internal {
                out.push(ev(
                    format!("network {}", nets.join(",")),
                    "closed networks only (internal, no host address on them): no route out; peers on those networks are reachable",
                    Risk::Safe,
                ));
            } else if !proxy.is_empty() {
                out.push(ev(
                    format!("network {}", nets.join(",")),
                    format!(
                        "outbound access through a proxy ({}); advisory only: processes may ignore it",
                        proxy.join(",")
                    ),
                    Risk::Weak,
                ));
            } else {
                let seen = f
                    .network_interfaces
                    .as_ref()
                    .map(|i| format!(" (interfaces: {})", i.join(",")))
                    .unwrap_or_default();
                out.push(ev(
                    format!("network {}", nets.join(",")),
                    format!("unrestricted egress: any destination the host can reach{seen}"),
                    Risk::Critical,
                ));
            }
        }
        None => out.push(ev("network", "not observable", Risk::Weak)),
    }
    out.extend(ports_evidence(f));
    out
}

/// The published ports: each one's host address (all interfaces is reachable from other
/// machines) and `--publish-all`; not observable from inside.
fn ports_evidence(f: &ContainerFacts) -> Vec<Evidence> {
    let mut out = Vec::new();
    match &f.ports {
        Some(ports) => {
            for p in ports {
                let all = matches!(p.host_ip.as_str(), "" | "0.0.0.0" | "::" | "[::]");
                out.push(ev(
                    format!(
                        "port {}:{} -> {}",
                        if p.host_ip.is_empty() {
                            "0.0.0.0"
                        } else {
                            &p.host_ip
                        },
                        p.host_port,
                        p.container_port
                    ),
                    if all {
                        "published on all interfaces: reachable from other machines"
                    } else {
                        "published on one host address"
                    },
                    if all { Risk::Weak } else { Risk::Safe },
                ));
            }
            if f.publish_all_ports {
                out.push(ev(
                    "publish-all",
                    "every exposed port is published on all interfaces",
                    Risk::Weak,
                ));
            }
        }
        None => out.push(ev(
            "ports",
            "published ports are not observable from inside",
            Risk::Safe,
        )),
    }
    out
}

/// What an `allowlist` container's proxy serves and decided, after `what` (its network).
fn proxy_evidence(ctx: &AuditContext, what: &str) -> String {
    let list = |l: &[String], empty: &str| {
        if l.is_empty() {
            empty.to_string()
        } else {
            l.join(", ")
        }
    };
    match &ctx.egress {
        Some(e) => format!(
            "{what}; the only way out is devcell's host-side proxy ({}), which allows {} and records every decision in {}: allowed {}; refused {}",
            if e.proxy_running {
                "running"
            } else {
                "stopped: nothing leaves"
            },
            list(&e.entries, "nothing"),
            e.record.display(),
            list(&e.allowed, "none"),
            list(&e.refused, "none"),
        ),
        None => format!(
            "{what}; the only way out is devcell's host-side proxy (its record was not found on this host)"
        ),
    }
}
