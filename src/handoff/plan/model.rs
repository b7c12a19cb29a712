//! The plan as `handoff --plan` prints it and the handoff result carries it: its repositories,
//! mounts, limits, services and warnings, and the lines shown before anything is created.

use crate::handoff::context::AgentRuntime;
use crate::handoff::repository;
use serde::Serialize;
use std::path::{Path, PathBuf};

use super::PlannedContainer;

/// One mount of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedMount {
    /// Host path.
    pub source: String,
    /// Container path.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
    /// `workspace`, `git`, `gitProtected` or `agentCredential`.
    pub purpose: String,
}

/// One service of a Compose configuration's plan (spec-note 0609).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedService {
    /// The service name.
    pub name: String,
    /// `primary` (the agent runs there) or `sidecar`.
    pub role: String,
    /// Compose's `image`, or `build <context>`.
    pub image: String,
    /// Whether the handoff starts it (`runServices`; the primary always).
    pub started: bool,
    /// `create`, `start` (exists, stopped) or `reuse` (running); `none` when not started.
    pub container: String,
    /// The existing container's id.
    pub id: Option<String>,
    /// Its requests (from the Compose files), judged; also in the plan's `permissions`.
    pub permissions: Vec<crate::security::PermissionRequest>,
}

/// The structured plan printed by `handoff --plan` and carried in the handoff result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffPlan {
    /// The agent's configured name.
    pub agent: String,
    /// The workspace root on the host.
    pub workspace: PathBuf,
    /// Where the root is mounted in the container.
    pub workspace_target: String,
    /// `repository`, `multiRepository` or `plain`.
    pub layout: repository::Layout,
    /// The repositories (name, container path, role, branch, head).
    pub repos: Vec<PlannedRepo>,
    /// The devcontainer.json used (`null` for the host runtime in a workspace without one).
    pub config_file: Option<PathBuf>,
    /// The image reference (image configs) or `build <Dockerfile>` (Dockerfile configs); empty
    /// for the host runtime.
    pub image: String,
    /// The Features the configuration asks for (ids as written).
    pub features: Vec<String>,
    /// `hardened` or `reference`; `none` for the host runtime.
    pub profile: String,
    /// `none`, `allowlist` or `default`; `host` for the host runtime.
    pub network: String,
    /// Under `allowlist`: the user's destinations (`[security].egress`, the agent's `egress`,
    /// `--egress-allow`); the repository's requests are among `permissions` (spec-note 0503).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    /// The resource limits of the `hardened` profile (`--pids-limit`, `--memory`, `--cpus`,
    /// else `[security]`); `null` under `reference`, which sets none.
    pub limits: Option<PlannedLimits>,
    /// The user's grants in effect (`--allow` and `[security] allow` words).
    pub grants: Vec<String>,
    /// Every permission request of the container, judged as the real handoff judges it
    /// (devcontainer.json, the Features' metadata, the image's metadata when the engine has
    /// the image; spec-note 0320): `{permission, value?, source, status, grant?}` with status
    /// `granted`, `allowedByProfile`, `refused` or `forbidden` and the `--allow` flag that
    /// grants it. A plan with a `refused` or `forbidden` request is not printed: `handoff
    /// --plan` fails with `permission_required` (exit 12), as the handoff would. Empty for the
    /// host runtime.
    pub permissions: Vec<crate::security::PermissionRequest>,
    /// What the plan could not judge without a pull or a build (the image's `USER` and
    /// metadata label, the Features' metadata), one sentence each.
    pub permission_notes: Vec<String>,
    /// The non-root user devcell provides because the image runs as root and the
    /// configuration names no user (spec-note 0188); also one of the `permission_notes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provided_user: Option<String>,
    /// Every mount the handoff adds.
    pub mounts: Vec<PlannedMount>,
    /// The user's dotfiles (`--dotfiles-repository`), installed once per container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dotfiles: Option<crate::handoff::dotfiles::PlannedDotfiles>,
    /// Names of the host variables passed to the agent (never values): its `env` allow-list.
    pub env: Vec<String>,
    /// The host variables the configuration sends into the container (`${localEnv:NAME}`,
    /// `runArgs -e NAME`), by name (never values), with the properties they go into; each is
    /// also a `hostEnv` permission request (spec-note 0440). Empty for the host runtime.
    pub host_env: Vec<crate::security::host_env::HostEnvUse>,
    /// Names of the secrets passed to hooks and the agent (never values).
    pub secrets: Vec<String>,
    /// The container (of a Compose configuration: the primary service's).
    pub container: PlannedContainer,
    /// A Compose configuration's services, the primary among them; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<PlannedService>,
    /// The agent's argv.
    pub command: Vec<String>,
    /// The agent's working folder in the container.
    pub cwd: String,
    /// The context file in the container.
    pub context_path: String,
    /// Verification commands written to the context file.
    pub verification: Vec<String>,
    /// Where the agent runs: `container` or `host` (spec-note 0251).
    pub runtime: AgentRuntime,
    /// What isolates it: `container`, or `none` on the host.
    pub isolation: String,
    /// A container devcell did not create (`--container`, spec-notes 0524 and 0526): who the
    /// agent runs as there and what becomes of git; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<PlannedExternal>,
    /// Non-fatal findings as envelope `(code, message)` pairs (the workspace's, a repository
    /// git could not read, a host variable not set); in the envelope's `warnings` only.
    #[serde(skip)]
    pub warnings: Vec<(String, String)>,
}

impl HandoffPlan {
    /// One human line per permission request. The git directories and agent credential files
    /// the handoff mounts itself, on the user's behalf (as if by `--mount`), are named by what
    /// they are rather than as "from command line".
    pub fn permission_lines(&self) -> Vec<String> {
        use crate::security::{Permission, Source};
        self.permissions
            .iter()
            .map(|perm| {
                let purpose = match &perm.permission {
                    Permission::Mount(path) if perm.source == Source::CommandLine => {
                        self.mounts
                            .iter()
                            .find(|m| &m.source == path)
                            .and_then(|m| match m.purpose.as_str() {
                                "git" | "gitProtected" | "gitObjects" | "containerGit"
                                | "gitLink" => Some("git directory of a workspace repository"),
                                "agentCredential" => Some("the agent's credential file"),
                                "dotfiles" => Some("your `--dotfiles-repository`, read-only"),
                                _ => None,
                            })
                    }
                    _ => None,
                };
                match purpose {
                    Some(purpose) => format!(
                        "{} ({purpose}; devcell mounts it for the handoff)",
                        perm.permission
                    ),
                    // a container devcell did not create keeps what it has: `set-up` warns
                    // about it (refusing only host control, which fails the plan), so "grant
                    // with" would offer a grant that changes nothing (spec-note 0526)
                    None if self.external.is_some()
                        && perm.status == crate::security::RequestStatus::Refused =>
                    {
                        format!(
                            "{} (from {}), already in the container: reported, not removed (devcell never changes a container it did not create; a grant changes nothing)",
                            perm.permission, perm.source
                        )
                    }
                    None => perm.to_string(),
                }
            })
            .collect()
    }
}

/// What the plan of a handoff into a container devcell did not create adds (spec-note 0526):
/// `set-up`'s judgement of it, made without running anything in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedExternal {
    /// The container's name.
    pub name: String,
    /// Who the hooks and the agent run as: the merged `remoteUser` (its `devcontainer.metadata`
    /// label), else the container's user, else `root`.
    pub remote_user: String,
    /// Under `hardened`: the numeric `uid:gid` every exec runs as (`null`: by name).
    pub exec_user: Option<String>,
    /// Whether that user is root (uid 0). Under `hardened` such an agent is refused unless
    /// `--allow root` grants it, and then the plan fails as the handoff would.
    pub root: bool,
    /// What becomes of the workspace's git: one sentence.
    pub git: String,
    /// What devcell does with the container and what it never does (start, stop, remove):
    /// one sentence.
    pub lifecycle: String,
}

/// The `hardened` profile's resource limits in the plan (a configuration's lower `runArgs`
/// values still win, spec-note 0085).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedLimits {
    /// Maximum number of processes.
    pub pids: i64,
    /// Memory limit in bytes.
    pub memory_bytes: i64,
    /// CPU limit in CPUs.
    pub cpus: f64,
}

/// One repository in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedRepo {
    /// Folder name.
    pub name: String,
    /// Path in the container.
    pub path: String,
    /// `primary` or `secondary`.
    pub role: repository::RepoRole,
    /// Branch, `null` when detached.
    pub branch: Option<String>,
    /// HEAD commit.
    pub head: Option<String>,
}

/// The envelope warning code of the host runtime's warning.
pub const UNISOLATED_CODE: &str = "unisolated";

/// The warning every host-runtime handoff (and its plan) carries, on stderr before the agent
/// starts and in the envelope's `warnings` (code [`UNISOLATED_CODE`]).
pub fn unisolated_warning(agent: &str, root: &Path) -> String {
    format!(
        "UNISOLATED: agent `{agent}` runs directly on this host (`--runtime host`), in `{}`: no container, no security profile, no network policy; it can read, change and delete anything your user can, use your credentials, and reach any network",
        root.display()
    )
}

impl HandoffPlan {
    /// The plan's warnings as envelope `(code, message)` pairs: the unisolated warning first
    /// for the host runtime, then [`HandoffPlan::warnings`].
    pub fn coded_warnings(&self) -> Vec<(String, String)> {
        let mut out = match self.runtime {
            AgentRuntime::Host => vec![(
                UNISOLATED_CODE.to_string(),
                unisolated_warning(&self.agent, &self.workspace),
            )],
            AgentRuntime::Container => Vec::new(),
        };
        out.extend(self.warnings.iter().cloned());
        out
    }
}

/// The envelope warning code of the configuration's own warnings in a plan (unknown,
/// duplicate and deprecated properties; spec-note 0002).
pub const CONFIG_WARNING_CODE: &str = "configuration";

/// The plan in a few status lines (shown before anything is created).
pub(in crate::handoff) fn plan_lines(p: &HandoffPlan) -> Vec<String> {
    let mut out = vec![
        format!(
            "plan: agent `{}` {:?} in {} as the workspace `{}` ({} {})",
            p.agent,
            p.command,
            p.cwd,
            p.workspace.display(),
            p.repos.len(),
            if p.repos.len() == 1 {
                "repository"
            } else {
                "repositories"
            }
        ),
        match p.runtime {
            AgentRuntime::Container => format!(
                "plan: image {} ({} Features), profile {}, network {}, container: {}",
                p.image,
                p.features.len(),
                p.profile,
                p.network,
                p.container.action
            ),
            AgentRuntime::Host => {
                "plan: runtime host: no image, no container, no isolation, the host's network"
                    .to_string()
            }
        },
    ];
    if p.network == crate::ops::egress::ALLOWLIST {
        out.push(format!(
            "plan: egress allowlist {:?} (through devcell's host-side proxy; the repository's requests are listed as permissions)",
            p.egress
        ));
    }
    out.extend(p.dotfiles.iter().map(crate::handoff::dotfiles::plan_line));
    out.extend(p.permissions.iter().map(|perm| format!("plan: {perm}")));
    if !p.env.is_empty() || !p.secrets.is_empty() || !p.host_env.is_empty() {
        let from_config: Vec<&str> = p.host_env.iter().map(|u| u.name.as_str()).collect();
        out.push(format!(
            "plan: env {:?}, host variables from the configuration {from_config:?}, secrets {:?} (names only)",
            p.env, p.secrets
        ));
    }
    out
}
