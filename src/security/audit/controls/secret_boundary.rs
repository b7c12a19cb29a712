//! Control "secret boundary": Which credentials are visible, and do they survive teardown? Looks at
//! credential-like environment variables (names only; values never kept), host credential folders
//! and agent sockets, credential volumes.

use super::{covers_home, is_workspace_bind, mount_subject, volume_owned};
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{ContainerFacts, MountKind};
use crate::security::audit::heuristics::{
    CREDENTIAL_DIRS, CREDENTIAL_FILES, components, matches_any,
};
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// The evidence for secret boundary.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    for e in &f.env {
        if e.token_value {
            out.push(ev(
                format!("env {}", e.name),
                "value looks like a long-lived token; it is stored in the container config (value not shown)",
                Risk::Critical,
            ));
        } else if e.credential_name {
            out.push(ev(
                format!("env {}", e.name),
                "name looks like a credential; it is stored in the container config where `docker inspect` shows it (value not shown)",
                Risk::Weak,
            ));
        }
    }
    for m in &f.mounts {
        let path_src = m.source.as_deref().filter(|_| m.kind == MountKind::Bind);
        if let Some(src) = path_src {
            if covers_home(src, ctx) {
                out.push(ev(
                    mount_subject(m),
                    "contains the host's credential folders (~/.ssh, ~/.aws, …)",
                    Risk::Critical,
                ));
                continue;
            }
            if is_workspace_bind(f, m, src, ctx) {
                continue;
            }
            if let Some((rel, _)) = matches_any(src, CREDENTIAL_DIRS) {
                out.push(ev(
                    mount_subject(m),
                    format!("host credential folder `{rel}`: long-lived host secrets"),
                    Risk::Critical,
                ));
                continue;
            }
            let name = components(src).last().cloned().unwrap_or_default();
            if name.contains("ssh-auth")
                || name == "S.gpg-agent"
                || (name.starts_with("agent.") && src.contains("ssh-"))
            {
                out.push(ev(
                    mount_subject(m),
                    "SSH or GPG agent socket: the host's keys can be used",
                    Risk::Critical,
                ));
                continue;
            }
            if CREDENTIAL_FILES.contains(&name.as_str()) {
                out.push(ev(
                    mount_subject(m),
                    format!("a credential file (`{name}`) from the host"),
                    Risk::Weak,
                ));
                continue;
            }
        }
        if m.kind == MountKind::Volume
            && let Some((rel, _)) = matches_any(&m.target, CREDENTIAL_DIRS)
        {
            out.push(ev(
                mount_subject(m),
                format!("volume holds `{rel}`: credentials persist across runs"),
                if volume_owned(m) {
                    Risk::Safe
                } else {
                    Risk::Weak
                },
            ));
        }
    }
    if !out.iter().any(|e| e.risk != Risk::Safe) {
        out.push(ev(
            "credentials",
            format!(
                "no credential-like variable {} and no credential folder mounted; secrets injected per exec are not part of the container",
                match f.env.len() {
                    0 => "(the container has no environment variables)".to_string(),
                    1 => "among its 1 environment variable".to_string(),
                    n => format!("among its {n} environment variables"),
                }
            ),
            Risk::Safe,
        ));
    }
    out
}
