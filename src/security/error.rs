//! Errors of the `security` layer.

use crate::diagnostics::Hint;

use super::baseline::BaselineGap;
use super::permissions::{Permission, PermissionRequest, RequestStatus};

/// `Result` with [`SecurityError`].
pub type Result<T, E = SecurityError> = std::result::Result<T, E>;

/// The policy refused a configuration, or a grant could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// The configuration asks for permissions the user has not granted (or that the profile
    /// never allows). Lists every request, granted or not.
    #[error(
        "refusing to create the container under the `{profile}` profile: {}",
        refusal_summary(requests)
    )]
    Refused {
        /// The profile's name.
        profile: String,
        /// Every permission request with its status.
        requests: Vec<PermissionRequest>,
    },
    /// An existing container `up` found has more than the profile and the grants allow
    /// (spec-note 0270): it is not reused; nothing was started or changed.
    #[error(
        "refusing to reuse container `{container}` under the `{profile}` profile: it has more than the profile and your grants allow: {}",
        reuse_summary(requests, gaps)
    )]
    ReuseRefused {
        /// The container's short id.
        container: String,
        /// The profile's name.
        profile: String,
        /// Every permission the container has beyond the baseline, with its status.
        requests: Vec<PermissionRequest>,
        /// The baseline it lacks (no grant covers these).
        gaps: Vec<BaselineGap>,
    },
    /// `set-up` was asked to run lifecycle hooks in an existing container that can control
    /// the host (privileged mode not granted, an engine socket): nothing was run in it
    /// (spec-note 0291).
    #[error(
        "refusing to set up container `{container}` under the `{profile}` profile: it can control the host ({}), and its lifecycle hooks would run with that",
        set_up_summary(requests)
    )]
    SetUpRefused {
        /// The container's short id.
        container: String,
        /// The profile's name.
        profile: String,
        /// The requests that stopped it (privileged mode, engine sockets).
        requests: Vec<PermissionRequest>,
    },
    /// A `--allow` value (or user-config grant) is not understood.
    #[error("invalid grant `{value}`: {message}")]
    InvalidGrant {
        /// The grant as written.
        value: String,
        /// What was expected.
        message: String,
    },
    /// A host path the repository names (config file, Dockerfile, build context, local
    /// Feature) resolves outside the workspace under `hardened`: it was not read
    /// ([`super::host_path::confine`]).
    #[error(
        "`{what}` is `{}`, which resolves to `{}` ({place}): under the hardened profile devcell reads only files inside the workspace for the repository, and did not read it",
        written.display(),
        resolved.display()
    )]
    PathOutside {
        /// What the path is (`build.context`, `build.dockerfile`, …).
        what: String,
        /// The path as written (absolute).
        written: std::path::PathBuf,
        /// What it resolves to.
        resolved: std::path::PathBuf,
        /// Where that is ([`super::host_path::Place::describe`]).
        place: &'static str,
        /// The `--allow` flag that would allow it (`None`: never allowed).
        grant: Option<String>,
    },
    /// A host path the repository names cannot be resolved (a link loop, a folder devcell cannot
    /// search, a path through procfs): refused, never judged by its text.
    #[error("`{what}` is `{}`, which cannot be resolved: {message}", written.display())]
    PathUnresolvable {
        /// What the path is.
        what: String,
        /// The path as written.
        written: std::path::PathBuf,
        /// The failure.
        message: String,
    },
    /// Under `hardened`, `up` binds every git directory below the workspace read-only on
    /// itself (spec-note 0446): these git entries cannot be covered so (a `.git` link, a `.git`
    /// file naming a git directory elsewhere, a walk cut at its bound), and the user did not
    /// accept them with `uncovered-git:<path>`. Nothing was created.
    #[error(
        "refusing to create the container under the `hardened` profile: devcell cannot keep {} below the workspace `{}` read-only for the container (a lifecycle hook could change what the host's git runs there): {}",
        if items.len() == 1 { "this git entry" } else { "these git entries" },
        root.display(),
        super::git_cover::list(items)
    )]
    UncoveredGit {
        /// The workspace's host root.
        root: std::path::PathBuf,
        /// What cannot be covered.
        items: Vec<super::git_cover::Uncoverable>,
    },
    /// Under `hardened`, a running container devcell does not own binds the workspace (the
    /// folder or one inside it, or, for a container that runs a repository's code, a folder
    /// above it) writable: it could swap a folder devcell judged for a link to a host folder
    /// before the engine mounts it (attack 24, O4; attack 26, Q1; spec-note 0478), or one
    /// `build` reads (attack 28, F2; spec-note 0680). Nothing was created or built.
    #[error(
        "refusing to bring up or build the dev container under the `hardened` profile: {} devcell does not own can write the workspace `{}` ({}); it could replace a file or folder devcell judged (a bind source, the Dockerfile) with a link to a host folder or other text before the engine uses it",
        if containers.len() == 1 { "a running container" } else { "running containers" },
        workspace.display(),
        containers.join(", ")
    )]
    ForeignWriter {
        /// The workspace folder.
        workspace: std::path::PathBuf,
        /// Each container, `<name> (<id>) binds <host path>`.
        containers: Vec<String>,
    },
    /// After the start, the container's workspace mount is not the folder devcell judged (or
    /// cannot be compared inside a reachable root): the container was removed (spec-note
    /// 0663).
    #[error(
        "refusing the dev container: its workspace mount `{target}` is not the folder devcell judged, `{}` ({detail}); the container was removed",
        workspace.display()
    )]
    MountMismatch {
        /// The judged host folder.
        workspace: std::path::PathBuf,
        /// The mount's target in the container.
        target: String,
        /// What differed.
        detail: String,
    },
    /// The repository's `customizations.devcell.egress` is not a list of destinations.
    #[error("devcontainer.json `{property}`: {message}")]
    InvalidEgressRequest {
        /// The property path (`customizations.devcell.egress[2]`).
        property: String,
        /// What is wrong and what was expected.
        message: String,
    },
}

/// The alias the brief and the issue use for policy failures.
pub type PolicyError = SecurityError;

fn refusal_summary(requests: &[PermissionRequest]) -> String {
    let refused: Vec<String> = requests
        .iter()
        .filter(|r| matches!(r.status, RequestStatus::Refused | RequestStatus::Forbidden))
        .map(|r| r.to_string())
        .collect();
    format!(
        "{} permission request(s) not granted: {}",
        refused.len(),
        refused.join("; ")
    )
}

fn set_up_summary(requests: &[PermissionRequest]) -> String {
    requests
        .iter()
        .map(|r| r.permission.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

fn reuse_summary(requests: &[PermissionRequest], gaps: &[BaselineGap]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut caps: Vec<String> = Vec::new();
    for r in requests
        .iter()
        .filter(|r| matches!(r.status, RequestStatus::Refused | RequestStatus::Forbidden))
    {
        match &r.permission {
            Permission::Capability(c) => caps.push(format!("`{c}`")),
            p if r.status == RequestStatus::Forbidden => parts.push(format!("{p} (never allowed)")),
            p => parts.push(p.to_string()),
        }
    }
    if !caps.is_empty() {
        parts.push(format!("capabilities {}", caps.join(", ")));
    }
    parts.extend(gaps.iter().map(ToString::to_string));
    parts.join("; ")
}

impl Hint for SecurityError {
    fn hint(&self) -> Option<String> {
        match self {
            SecurityError::Refused { requests, .. } => {
                let flags: Vec<String> = requests
                    .iter()
                    .filter(|r| r.status == RequestStatus::Refused)
                    .filter_map(|r| r.permission.grant_flag())
                    .collect();
                let forbidden: Vec<&PermissionRequest> = requests
                    .iter()
                    .filter(|r| r.status == RequestStatus::Forbidden)
                    .collect();
                let mut hint = String::new();
                if !flags.is_empty() {
                    hint.push_str(&format!(
                        "if you trust this configuration, grant with `{}` (or the same in \
                         `[security] allow` of your devcell user config); a repository cannot \
                         grant itself permissions",
                        flags.join(" ")
                    ));
                }
                // a hint per kind never allowed: only the engine socket may be run as written
                // under `reference`; a forged identity label must go (attack 29, G7)
                let labels = forbidden
                    .iter()
                    .any(|r| matches!(r.permission, Permission::IdentityLabel(_)));
                let others = forbidden
                    .iter()
                    .any(|r| !matches!(r.permission, Permission::IdentityLabel(_)));
                if labels {
                    if !hint.is_empty() {
                        hint.push_str("; ");
                    }
                    hint.push_str(
                        "a `devcontainer.*` or `devcell.*` label set by the configuration claims \
                         a dev container's identity and is never allowed: remove it from the \
                         configuration (another profile would let it pass for another workspace's \
                         container)",
                    );
                }
                if others {
                    if !hint.is_empty() {
                        hint.push_str("; ");
                    }
                    hint.push_str(
                        "mounting an engine socket, the home folder or a path that does not resolve is never allowed under \
                         `hardened`: use `--security-profile reference` to run the configuration \
                         as written",
                    );
                }
                Some(hint)
            }
            SecurityError::ReuseRefused { requests, gaps, .. } => {
                let flags: Vec<String> = requests
                    .iter()
                    .filter(|r| r.status == RequestStatus::Refused)
                    .filter_map(|r| r.permission.grant_flag())
                    .collect();
                let mut hint = "recreate it under the current profile with `devcell up \
                                --remove-existing-container` (before a handoff: `devcell delete`; \
                                the workspace is kept), or reuse it as it is with \
                                `--security-profile reference`"
                    .to_string();
                if gaps.is_empty()
                    && !flags.is_empty()
                    && !requests
                        .iter()
                        .any(|r| r.status == RequestStatus::Forbidden)
                {
                    hint.push_str(&format!(
                        "; or, if you trust it, grant what it has with `{}`",
                        flags.join(" ")
                    ));
                }
                Some(hint)
            }
            SecurityError::SetUpRefused { requests, .. } => {
                let mut hint = String::new();
                if requests
                    .iter()
                    .any(|r| r.permission == Permission::Privileged)
                {
                    hint.push_str(
                        "if you trust the container, its image and this configuration, grant \
                         privileged mode with `--allow privileged`; ",
                    );
                }
                hint.push_str(
                    "to run the hooks in it as the reference CLI does, pass \
                     `--security-profile reference`; or bring a hardened container up with \
                     `devcell up`",
                );
                Some(hint)
            }
            SecurityError::UncoveredGit { items, .. } => Some(format!(
                "remove or fix it, or accept it, writable by the container, with {}; or, if you commit inside the container, leave every git directory writable with `--allow workspace-git:rw` (or hand the workspace to an agent with `devcell handoff`, which gives it container git directories)",
                items
                    .iter()
                    .map(|u| format!("`{}`", u.grant()))
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            SecurityError::InvalidGrant { .. } => Some(
                "grant what a refusal names, for instance `privileged`, `root`, `network:host`, \
                 `cap:<NAME>`, `mount:<host path>`, `security-opt:<option>`, `device:<host path>`, \
                 `gitdir:<host path>`, `namespace:<kind>:<mode>` or \
                 `host-command:sha256:<hex>` (one host command; docs/security.md lists every grant)"
                    .to_string(),
            ),
            SecurityError::PathOutside { what, .. } if what == "devcontainer.json" => Some(
                "keep the configuration inside the workspace, or, if you trust that file, name it yourself with `--config <the path it resolves to>` (for `up` and `handoff` also `--allow mount:<that path>`)".to_string(),
            ),
            SecurityError::PathOutside { grant, .. } => Some(match grant {
                Some(flag) => format!(
                    "keep the path inside the workspace; if you trust this repository with that host path, grant it with `{flag}`, or use `--security-profile reference` to run the configuration as written"
                ),
                None => "keep the path inside the workspace (the host's root folder, a folder holding the home folder and the engine socket are never read for a repository under `hardened`), or use `--security-profile reference` to run the configuration as written".to_string(),
            }),
            SecurityError::PathUnresolvable { .. } => Some(
                "point the path at a folder devcell can read, without going through /proc or /dev/fd (a link loop, too many links, or a folder devcell cannot search cannot be judged, so it is never mounted or read)".to_string(),
            ),
            SecurityError::MountMismatch { .. } => Some(
                "something replaced the workspace folder (or a folder on its path) between devcell's judgement and the engine's mount: check what runs beside the workspace, then run `up` again".to_string(),
            ),
            SecurityError::ForeignWriter { .. } => Some(
                "stop that container (`docker stop <name>`), or make its bind of the workspace read-only, then run the command again; or use `--security-profile reference`".to_string(),
            ),
            SecurityError::InvalidEgressRequest { .. } => Some(
                "write `\"customizations\": {\"devcell\": {\"egress\": [\"api.example.test\", \"web.example.test:8080\"]}}`: each entry `host[:port][=address]`, a request the user grants with `--allow egress:DEST`".to_string(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bare `host-command` in `config.toml` is refused since grants name their command
    /// (issue 25): the hint must show the bound form the user now writes.
    #[test]
    fn the_hint_of_an_invalid_grant_names_the_bound_host_command_form() {
        let err = SecurityError::InvalidGrant {
            value: "host-command".into(),
            message: "expected `host-command:sha256:<64 hex digits>`".into(),
        };
        let hint = err.hint().unwrap();
        assert!(hint.contains("`host-command:sha256:<hex>`"), "{hint}");
        assert!(hint.contains("`gitdir:<host path>`"), "{hint}");
    }
}
