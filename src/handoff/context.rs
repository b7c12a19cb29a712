//! The handoff context file: a versioned, machine-readable description of the task's workspace,
//! written inside the mounted workspace (default `.devcell/context.json`, configurable with
//! `[handoff] context_path`, e.g. `.grove/context.json` for Grove) for the agent to read.
//!
//! Its JSON Schema is published at `schemas/context.schema.json` (draft 2020-12); a test
//! validates a produced context against it. Shape (`schemaVersion: 1`; every key always present,
//! unknown values are `null`):
//!
//! ```json
//! {"schemaVersion": 1, "generatedBy": "devcell 0.1.0", "createdAt": "2026-11-29T08:00:00Z",
//!  "task": {"provider": "github", "url": "https://…/pull/123", "title": "Add partial refunds"},
//!  "workspace": {"name": "partial-refunds", "root": "/workspace",
//!                "hostRoot": "/home/me/w/partial-refunds", "branch": "feat/partial-refunds"},
//!  "repos": [{"name": "api", "path": "/workspace/api", "role": "primary",
//!             "branch": "feat/partial-refunds", "baseCommit": "1a2b…"}],
//!  "verification": ["cargo test"],
//!  "security": {"profile": "hardened", "permissions": [], "network": "default",
//!               "isolation": "container"},
//!  "secrets": ["OPENAI_API_KEY"], "env": ["RUST_LOG"],
//!  "image": {"reference": "…", "digest": "sha256:…",
//!            "features": [{"id": "ghcr.io/devcontainers/features/node:1", "digest": "sha256:…"}]},
//!  "hooks": [{"hook": "postCreateCommand", "source": "devcontainer.json", "entry": null,
//!             "exitCode": 0, "durationMs": 812, "skipped": null}],
//!  "agent": {"name": "codex", "command": ["codex", "--full-auto"]},
//!  "contextPath": "/workspace/.devcell/context.json", "runtime": "container"}
//! ```
//!
//! With `handoff --runtime host` (spec-note 0251) `runtime` is `host`, `security.isolation` is
//! `none`, and every path (`workspace.root`, `repos[].path`, `contextPath`) is a host path.
//!
//! Secrets and environment variables appear by **name only**, never by value.
//!
//! # Writing
//! [`write()`] writes atomically (a temporary file in the same folder, then a rename). It creates
//! missing folders on the way (and, in a folder it creates, a `.gitignore` holding `*` so the
//! file never shows up in `git status`), and replaces an existing file only when devcell owns it
//! (a JSON object whose `generatedBy` starts with `devcell`). It never follows a symbolic link
//! inside the workspace. See spec note `spec-notes/0161-handoff-context-file.md`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::handoff::repository::{RepoRole, Workspace, is_safe_relative};
use crate::security::host_path::{Existing, WorkspaceDir, WriteError};

/// The context file's schema version.
pub const SCHEMA_VERSION: u32 = 1;

/// The `generatedBy` value devcell writes (and recognises as its own).
pub fn generated_by() -> String {
    format!("devcell {}", env!("CARGO_PKG_VERSION"))
}

/// A failure writing the context file (or another devcell-owned workspace file).
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The configured path is absolute, empty or leaves the workspace.
    #[error("context path `{path}` must be relative to the workspace root and stay inside it")]
    InvalidPath {
        /// The configured path.
        path: String,
    },
    /// Something on the path is a symbolic link or not a folder.
    #[error("refusing to write through `{}`: it is a symbolic link or not a regular folder/file", path.display())]
    Unsafe {
        /// The offending path.
        path: PathBuf,
    },
    /// A file devcell does not own is in the way.
    #[error("`{}` exists and was not written by devcell; it is left untouched", path.display())]
    NotOwned {
        /// The existing file.
        path: PathBuf,
    },
    /// Reading or writing failed.
    #[error("cannot write `{}`", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The context could not be serialised (a bug).
    #[error("cannot serialise the handoff context")]
    Serialize(#[source] serde_json::Error),
}

impl ContextError {
    /// The envelope error code: `config_invalid` for a bad `context_path` or a path taken by a
    /// file devcell does not own (the fix is in the config), `internal` otherwise.
    pub fn code(&self) -> crate::handoff::envelope::ErrorCode {
        use crate::handoff::envelope::ErrorCode;
        match self {
            ContextError::InvalidPath { .. }
            | ContextError::NotOwned { .. }
            | ContextError::Unsafe { .. } => ErrorCode::ConfigInvalid,
            _ => ErrorCode::Internal,
        }
    }

    /// A hint for the user, when a fix is known.
    pub fn hint(&self) -> Option<String> {
        match self {
            ContextError::NotOwned { .. } | ContextError::InvalidPath { .. } => {
                Some("set another `context_path` under `[handoff]` in devcell's config.toml".into())
            }
            _ => None,
        }
    }
}

impl crate::ops::error::ProductError for ContextError {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        ContextError::code(self)
    }
    fn hint(&self) -> Option<String> {
        ContextError::hint(self)
    }
}

/// The whole context file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffContext {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `devcell <version>` ([`generated_by`]); marks the file as devcell's.
    pub generated_by: String,
    /// When the context was produced (RFC 3339, UTC).
    pub created_at: String,
    /// The task handed over.
    pub task: Task,
    /// The workspace.
    pub workspace: WorkspaceInfo,
    /// Its repositories, the primary first.
    pub repos: Vec<RepoInfo>,
    /// Commands the agent must run (in the container, from the workspace root) and see succeed
    /// before calling the task done.
    pub verification: Vec<String>,
    /// The applied security posture.
    pub security: SecurityInfo,
    /// Names of secrets passed to the agent (never values).
    pub secrets: Vec<String>,
    /// Names of host environment variables passed to the agent (never values).
    pub env: Vec<String>,
    /// The container image.
    pub image: ImageInfo,
    /// Each lifecycle hook that ran, in order.
    pub hooks: Vec<HookResult>,
    /// The agent launched.
    pub agent: AgentInfo,
    /// Where this file is, in the container (on the host for the `host` runtime).
    pub context_path: String,
    /// Where the agent runs: `container` (the default) or `host` (`handoff --runtime host`:
    /// unisolated, every path in this file is a host path; spec-note 0251).
    #[serde(default)]
    pub runtime: AgentRuntime,
    /// A clone task's sandbox (`handoff --isolation clone`, spec-note 0437): absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
    /// The mail channel to the other tasks of the repository (clone task or worktree
    /// handoff; spec-note 0532): absent when the handoff has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mail: Option<ContextMail>,
}

/// `mail`: the agent's mail channel (spec-notes 0531, 0532).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextMail {
    /// The task name this sandbox sends as (others address it by this name).
    pub task: String,
    /// The command (on the agent's `PATH`).
    pub command: String,
    /// The socket it talks through, in the container.
    pub socket: String,
    /// How to use it, for the agent.
    pub usage: String,
}

/// `sandbox`: the clone task the agent works in, and how its results leave (spec-note 0437).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sandbox {
    /// `clone`.
    pub isolation: String,
    /// The task's name.
    pub task: String,
    /// The branch the agent must commit to (`devcell/<task>`).
    pub branch: String,
    /// The commit it started at.
    pub base: String,
    /// The ref devcell fetches the branch into, in the user's repository.
    pub fetched_ref: String,
    /// For a multi-repository workspace, each repository's base commit by its folder name
    /// (every repository has its own branch `branch`; `base` is the first's). Empty otherwise.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub bases: std::collections::BTreeMap<String, String>,
    /// How results leave the sandbox, for the agent.
    pub results: String,
    /// How to reach the other tasks of the repository (the mail channel, `devcell-mail`;
    /// spec-note 0531), for the agent; absent when the handoff has no channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mail: Option<String>,
    /// The user's repository a single-repository task was cloned from, where the registry
    /// judgement reads the committed side at [`Sandbox::base`] (attack 25, P6). devcell's
    /// own: never written for the agent.
    #[serde(skip)]
    pub source: Option<std::path::PathBuf>,
}

/// Where a handoff runs its agent (`handoff --runtime`, spec-note 0251).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentRuntime {
    /// In the workspace's dev container, through the engine (the default).
    #[default]
    Container,
    /// Directly on the host, in the workspace folder: no isolation at all.
    Host,
}

impl AgentRuntime {
    /// `container` or `host`.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentRuntime::Container => "container",
            AgentRuntime::Host => "host",
        }
    }

    /// The isolation it gives the agent: `container` or `none`.
    pub fn isolation(self) -> &'static str {
        match self {
            AgentRuntime::Container => "container",
            AgentRuntime::Host => "none",
        }
    }
}

impl std::str::FromStr for AgentRuntime {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "container" => Ok(AgentRuntime::Container),
            "host" => Ok(AgentRuntime::Host),
            other => Err(format!(
                "unknown runtime `{other}`: expected `container` or `host`"
            )),
        }
    }
}

/// `task`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Where the task comes from (`github`, `linear`, …), derived from the URL or given.
    pub provider: Option<String>,
    /// The task or pull request URL.
    pub url: Option<String>,
    /// A one-line title.
    pub title: Option<String>,
}

impl Task {
    /// A task from an optional URL and title; the provider is guessed from the URL's host
    /// ([`provider_of`]).
    pub fn new(url: Option<String>, title: Option<String>) -> Self {
        let provider = url.as_deref().and_then(provider_of);
        Self {
            provider,
            url,
            title,
        }
    }
}

/// The provider named by a task URL's host: `github`, `gitlab`, `bitbucket`, `linear`, `jira`
/// (`*.atlassian.net`), else the host itself; `None` when it is not an `http(s)` URL.
pub fn provider_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?.split(':').next()?;
    let host = host.to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    let known = [
        ("github.com", "github"),
        ("gitlab.com", "gitlab"),
        ("bitbucket.org", "bitbucket"),
        ("linear.app", "linear"),
        ("atlassian.net", "jira"),
    ];
    for (suffix, name) in known {
        if host == suffix || host.ends_with(&format!(".{suffix}")) {
            return Some(name.to_string());
        }
    }
    Some(host)
}

/// `workspace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceInfo {
    /// The root folder's name.
    pub name: String,
    /// The root in the container (e.g. `/workspace`).
    pub root: String,
    /// The root on the host.
    pub host_root: String,
    /// The workspace branch ([`Workspace::branch`]).
    pub branch: Option<String>,
    /// `repository`, `multiRepository` or `plain`.
    pub layout: crate::handoff::repository::Layout,
}

/// One of `repos`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepoInfo {
    /// Folder name.
    pub name: String,
    /// Path in the container.
    pub path: String,
    /// `primary` or `secondary`.
    pub role: RepoRole,
    /// Branch at handoff, `null` when detached.
    pub branch: Option<String>,
    /// HEAD commit at handoff (the diff base of the agent's work), `null` without commits.
    pub base_commit: Option<String>,
}

/// `security`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityInfo {
    /// The applied profile (`hardened` or `reference`).
    pub profile: String,
    /// Permissions granted by the user (`--allow` / `[security] allow` words, e.g.
    /// `cap:SYS_PTRACE`).
    pub permissions: Vec<String>,
    /// Network mode (`default` or `none`; `host` for the `host` runtime).
    pub network: String,
    /// What isolates the agent: `container`, or `none` for the `host` runtime.
    #[serde(default = "container_isolation")]
    pub isolation: String,
}

fn container_isolation() -> String {
    AgentRuntime::Container.isolation().to_string()
}

/// `image`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    /// The image reference the container runs.
    pub reference: String,
    /// The image's digest (`sha256:…`), `null` when unknown (e.g. a local build).
    pub digest: Option<String>,
    /// The installed Features with their digests.
    pub features: Vec<FeatureInfo>,
}

/// One of `image.features`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureInfo {
    /// The Feature reference as configured.
    pub id: String,
    /// The resolved content digest (`sha256:…`), `null` for a local Feature.
    pub digest: Option<String>,
}

/// One of `hooks`: a lifecycle hook's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookResult {
    /// The hook's spec name (`onCreateCommand`, `postCreateCommand`, …).
    pub hook: String,
    /// Where the command came from (`devcontainer.json`, a Feature id, `image metadata`).
    pub source: String,
    /// The entry name of an object-form (parallel) command, else `null`.
    pub entry: Option<String>,
    /// Its exit code (128 + N when killed by signal N), `null` when skipped.
    pub exit_code: Option<i32>,
    /// Wall time in milliseconds (0 when skipped).
    pub duration_ms: u64,
    /// Why it did not run (`alreadyRan`, or the flag that excluded it, e.g.
    /// `--skip-post-attach`), else `null`.
    pub skipped: Option<String>,
}

/// The `hooks` of a context from a lifecycle report: every command that ran, in order, then
/// every hook skipped for a reason other than not being configured.
pub fn hooks_from_report(report: &crate::lifecycle::LifecycleReport) -> Vec<HookResult> {
    use crate::lifecycle::SkipReason;
    let mut out: Vec<HookResult> = report
        .runs
        .iter()
        .map(|r| HookResult {
            hook: r.hook.property().to_string(),
            source: r.origin.clone(),
            entry: r.entry.clone(),
            exit_code: Some(i32::try_from(r.exit_code).unwrap_or(i32::MAX)),
            duration_ms: r.duration_ms,
            skipped: None,
        })
        .collect();
    for s in &report.skipped {
        let reason = match s.reason {
            SkipReason::NotConfigured => continue,
            SkipReason::AlreadyRan => "alreadyRan".to_string(),
            SkipReason::Flag(flag) => flag.to_string(),
        };
        out.push(HookResult {
            hook: s.hook.property().to_string(),
            source: String::new(),
            entry: None,
            exit_code: None,
            duration_ms: 0,
            skipped: Some(reason),
        });
    }
    out
}

/// `agent`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInfo {
    /// The configured agent name (`[agents.NAME]`).
    pub name: String,
    /// Its argv.
    pub command: Vec<String>,
}

/// Everything a context needs besides the inspected workspace.
#[derive(Debug, Clone, Default)]
pub struct ContextInputs {
    /// The task.
    pub task: Task,
    /// Verification commands.
    pub verification: Vec<String>,
    /// Security posture.
    pub security: SecurityInfo,
    /// Secret names.
    pub secrets: Vec<String>,
    /// Environment variable names.
    pub env: Vec<String>,
    /// Image.
    pub image: ImageInfo,
    /// Lifecycle hook results.
    pub hooks: Vec<HookResult>,
    /// Agent.
    pub agent: AgentInfo,
    /// The context path relative to the workspace root (`[handoff] context_path`).
    pub context_path: String,
    /// Where the agent runs (also sets `security.isolation`).
    pub runtime: AgentRuntime,
}

impl ContextInputs {
    /// Inputs from devcell's user settings for agent `agent`: its argv, the names of its env
    /// variables and secrets, its verification commands followed by `extra_verification` (e.g.
    /// from flags; duplicates dropped), the profile and network (the agent's overrides, else
    /// `[security]`), the granted permissions, and `[handoff] context_path`. `None` when no
    /// `[agents.<agent>]` exists. Task, image and hooks are left empty for the caller.
    pub fn from_settings(
        settings: &crate::settings::Settings,
        agent: &str,
        extra_verification: &[String],
    ) -> Option<Self> {
        let a = settings.agents.get(agent)?;
        let flags = crate::security::SecurityOptions {
            agent: Some(agent.to_string()),
            ..Default::default()
        };
        let mut verification: Vec<String> = Vec::new();
        for v in a.verify.iter().chain(extra_verification) {
            if !verification.contains(v) {
                verification.push(v.clone());
            }
        }
        Some(Self {
            verification,
            security: SecurityInfo {
                profile: crate::security::choice::profile(&flags, settings).to_string(),
                permissions: settings.security.allow.clone(),
                network: crate::security::choice::network(
                    &flags,
                    settings,
                    crate::security::choice::HANDOFF_NETWORK,
                )
                .to_string(),
                isolation: container_isolation(),
            },
            secrets: a.secrets.keys().cloned().collect(),
            env: a.env.clone(),
            agent: AgentInfo {
                name: agent.to_string(),
                command: a.command.clone(),
            },
            context_path: settings.handoff.context_path.clone(),
            ..Default::default()
        })
    }
}

impl HandoffContext {
    /// Builds the context for `workspace` (repos, branch, base commits from its git state),
    /// stamped now.
    pub fn new(workspace: &Workspace, inputs: ContextInputs) -> Self {
        let repos = workspace
            .repos
            .iter()
            .map(|r| RepoInfo {
                name: r.name.clone(),
                path: r.container_path.clone(),
                role: r.role,
                branch: r.branch.clone(),
                base_commit: r.head.clone(),
            })
            .collect();
        let context_path = crate::handoff::repository::normalize_posix(&format!(
            "{}/{}",
            workspace.container_root, inputs.context_path
        ));
        Self {
            schema_version: SCHEMA_VERSION,
            generated_by: generated_by(),
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            runtime: inputs.runtime,
            task: inputs.task,
            workspace: WorkspaceInfo {
                name: workspace.name.clone(),
                root: workspace.container_root.clone(),
                host_root: workspace.root.to_string_lossy().into_owned(),
                branch: workspace.branch().map(str::to_string),
                layout: workspace.layout,
            },
            repos,
            verification: inputs.verification,
            security: SecurityInfo {
                isolation: inputs.runtime.isolation().to_string(),
                ..inputs.security
            },
            secrets: inputs.secrets,
            env: inputs.env,
            image: inputs.image,
            hooks: inputs.hooks,
            agent: inputs.agent,
            context_path,
            sandbox: None,
            mail: None,
        }
    }
}

/// The context file of session `session` when it is a member of a handoff group, relative to
/// the workspace root: in `sessions/<session>/` beside `[handoff] context_path`'s file
/// (`.devcell/context.json` → `.devcell/sessions/<session>/context.json`), so that the members
/// sharing a workspace never replace each other's file (spec-note 0161). `session` is a
/// session id devcell made (`<UTC time>-<pid>[-n]`), a plain file name.
pub fn member_path(context_path: &str, session: &str) -> String {
    match context_path.rsplit_once('/') {
        Some((folder, file)) => format!("{folder}/sessions/{session}/{file}"),
        None => format!("sessions/{session}/{context_path}"),
    }
}

/// The variable naming the agent's own context file, as a path where the agent runs (the
/// container's path; the host's under `--runtime host`).
pub const CONTEXT_VARIABLE: &str = "DEVCELL_CONTEXT";

/// Writes `context` to `root/rel_path` atomically and returns the file's host path.
///
/// # Errors
/// [`ContextError::InvalidPath`] for a path that is not a plain relative path,
/// [`ContextError::Unsafe`] when a component is a symbolic link or not a folder,
/// [`ContextError::NotOwned`] when a file devcell did not write is there, [`ContextError::Io`].
pub fn write(
    root: &Path,
    rel_path: &str,
    context: &HandoffContext,
) -> Result<PathBuf, ContextError> {
    let mut text = serde_json::to_vec_pretty(context).map_err(ContextError::Serialize)?;
    text.push(b'\n');
    write_owned_file(root, rel_path, &text, is_devcell_context)
}

/// Reads a context file back (e.g. for `status`).
///
/// # Errors
/// [`ContextError::Io`] when it cannot be read or is not a valid context.
pub fn read(path: &Path) -> Result<HandoffContext, ContextError> {
    // The container can write the workspace: bounded, no FIFO or device (spec-note 0433).
    let text = crate::config::bounded::read(path, 16 * 1024 * 1024).map_err(|source| {
        ContextError::Io {
            path: path.to_path_buf(),
            source,
        }
    })?;
    serde_json::from_slice(&text).map_err(|e| ContextError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// Whether `bytes` is a file devcell wrote: a JSON object whose `generatedBy` starts with
/// `devcell`.
pub fn is_devcell_context(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| {
            v.get("generatedBy")?
                .as_str()
                .map(|s| s.starts_with("devcell"))
        })
        .unwrap_or(false)
}

/// Writes `bytes` to `root/rel_path` atomically, creating missing folders (each folder devcell
/// creates gets a `.gitignore` holding `*` when it is the first one created), and replacing an
/// existing file only when `owned(existing bytes)` says devcell wrote it. Never follows a
/// symbolic link below `root`. When devcell runs as root and `root` belongs to another user,
/// every folder and file it creates is given to that user ([`hand_over`], spec-note 0250).
///
/// # Errors
/// As [`write()`].
pub fn write_owned_file(
    root: &Path,
    rel_path: &str,
    bytes: &[u8],
    owned: impl Fn(&[u8]) -> bool,
) -> Result<PathBuf, ContextError> {
    if !is_safe_relative(Path::new(rel_path)) {
        return Err(ContextError::InvalidPath {
            path: rel_path.to_string(),
        });
    }
    // relative to a handle of the root, never through a link (spec-note 0400)
    let dir = WorkspaceDir::open(root).map_err(|e| from_write_error(e, rel_path))?;
    dir.write(
        rel_path,
        bytes,
        0o644,
        Existing::ReplaceIfOwned(&owned),
        true,
    )
    .map_err(|e| from_write_error(e, rel_path))
}

/// The [`ContextError`] of a [`WorkspaceDir`] write.
pub(crate) fn from_write_error(e: WriteError, rel_path: &str) -> ContextError {
    match e {
        WriteError::Unsafe { path } => ContextError::Unsafe { path },
        WriteError::InvalidPath { .. } => ContextError::InvalidPath {
            path: rel_path.to_string(),
        },
        WriteError::NotOwned { path } | WriteError::Exists { path } => {
            ContextError::NotOwned { path }
        }
        WriteError::Io { path, source } => ContextError::Io { path, source },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::handoff::repository::{Layout, Repo, RepoKind};

    pub(crate) fn sample_workspace(root: &Path) -> Workspace {
        let repo = |name: &str, role| Repo {
            name: name.into(),
            host_path: root.join(name),
            container_path: format!("/workspace/{name}"),
            role,
            kind: RepoKind::Worktree,
            branch: Some("feat/x".into()),
            head: Some("0123456789abcdef0123456789abcdef01234567".into()),
            dirty: false,
            upstream: None,
            ahead: None,
            behind: None,
            git_dir: PathBuf::from("/src")
                .join(name)
                .join(".git/worktrees")
                .join(name),
            common_dir: PathBuf::from("/src").join(name).join(".git"),
            has_devcontainer: role == RepoRole::Primary,
            git_error: None,
        };
        Workspace {
            name: "task".into(),
            root: root.to_path_buf(),
            container_root: "/workspace".into(),
            layout: Layout::MultiRepository,
            repos: vec![
                repo("api", RepoRole::Primary),
                repo("web", RepoRole::Secondary),
            ],
            config_folder: Some(root.join("api")),
            git_mounts: vec![],
            protected: vec![],
            untrusted_git_dirs: Vec::new(),
            warnings: vec![],
        }
    }

    fn sample(root: &Path) -> HandoffContext {
        HandoffContext::new(
            &sample_workspace(root),
            ContextInputs {
                task: Task::new(Some("https://github.com/acme/api/pull/1".into()), None),
                verification: vec!["cargo test".into()],
                context_path: ".devcell/context.json".into(),
                ..Default::default()
            },
        )
    }

    #[test]
    fn context_is_built_from_the_workspace() {
        let ctx = sample(Path::new("/w/task"));
        assert_eq!(ctx.workspace.root, "/workspace");
        assert_eq!(ctx.workspace.host_root, "/w/task");
        assert_eq!(ctx.workspace.branch.as_deref(), Some("feat/x"));
        assert_eq!(ctx.repos[0].role, RepoRole::Primary);
        assert_eq!(ctx.repos[1].path, "/workspace/web");
        assert_eq!(ctx.context_path, "/workspace/.devcell/context.json");
        assert_eq!(ctx.task.provider.as_deref(), Some("github"));
        let v = serde_json::to_value(&ctx).unwrap();
        assert_eq!(
            v["repos"][0]["baseCommit"],
            ctx.repos[0].base_commit.clone().unwrap()
        );
        assert_eq!(v["repos"][1]["role"], "secondary");
        assert_eq!(v["task"]["title"], serde_json::Value::Null);
        assert!(is_devcell_context(&serde_json::to_vec(&ctx).unwrap()));
    }

    #[test]
    fn inputs_come_from_the_agent_settings_without_values() {
        let settings = crate::settings::parse(
            r#"
[security]
allow = ["cap:SYS_PTRACE"]
[agents.codex]
command = ["codex", "--full-auto"]
env = ["OPENAI_API_KEY"]
secrets = { GH_TOKEN = "env:MY_GH_TOKEN" }
verify = ["cargo test"]
network = "none"
[handoff]
context_path = ".grove/context.json"
"#,
            Path::new("c.toml"),
        )
        .unwrap();
        let extra = ["cargo test".to_string(), "cargo clippy".to_string()];
        let i = ContextInputs::from_settings(&settings, "codex", &extra).unwrap();
        assert_eq!(i.agent.command, ["codex", "--full-auto"]);
        assert_eq!(i.verification, ["cargo test", "cargo clippy"]);
        assert_eq!(i.env, ["OPENAI_API_KEY"]);
        assert_eq!(
            i.secrets,
            ["GH_TOKEN"],
            "names, never the reference or value"
        );
        assert_eq!(i.security.profile, "hardened");
        assert_eq!(i.security.network, "none");
        assert_eq!(i.security.permissions, ["cap:SYS_PTRACE"]);
        assert_eq!(i.context_path, ".grove/context.json");
        assert!(ContextInputs::from_settings(&settings, "claude", &[]).is_none());
    }

    #[test]
    fn hooks_come_from_the_lifecycle_report() {
        use crate::lifecycle::{LifecycleHook, LifecycleReport, SkipReason, SkippedHook};
        let run = |hook, origin: &str, entry: Option<&str>, exit_code| crate::lifecycle::HookRun {
            hook,
            source: 0,
            origin: origin.into(),
            entry: entry.map(str::to_string),
            command: "x".into(),
            exit_code,
            duration_ms: 7,
            output_tail: vec![],
        };
        let report = LifecycleReport {
            runs: vec![
                run(
                    LifecycleHook::OnCreateCommand,
                    "Feature 'ghcr.io/x/y:1'",
                    None,
                    0,
                ),
                run(
                    LifecycleHook::PostCreateCommand,
                    "devcontainer.json",
                    Some("npm"),
                    137,
                ),
            ],
            skipped: vec![
                SkippedHook {
                    hook: LifecycleHook::UpdateContentCommand,
                    reason: SkipReason::NotConfigured,
                },
                SkippedHook {
                    hook: LifecycleHook::PostAttachCommand,
                    reason: SkipReason::Flag("--skip-post-attach"),
                },
                SkippedHook {
                    hook: LifecycleHook::PostStartCommand,
                    reason: SkipReason::AlreadyRan,
                },
            ],
            dotfiles: None,
        };
        let hooks = hooks_from_report(&report);
        let v = serde_json::to_value(&hooks).unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                {"hook": "onCreateCommand", "source": "Feature 'ghcr.io/x/y:1'", "entry": null,
                 "exitCode": 0, "durationMs": 7, "skipped": null},
                {"hook": "postCreateCommand", "source": "devcontainer.json", "entry": "npm",
                 "exitCode": 137, "durationMs": 7, "skipped": null},
                {"hook": "postAttachCommand", "source": "", "entry": null,
                 "exitCode": null, "durationMs": 0, "skipped": "--skip-post-attach"},
                {"hook": "postStartCommand", "source": "", "entry": null,
                 "exitCode": null, "durationMs": 0, "skipped": "alreadyRan"},
            ])
        );
    }

    #[test]
    fn providers_come_from_the_host() {
        assert_eq!(
            provider_of("https://github.com/a/b/pull/1").as_deref(),
            Some("github")
        );
        assert_eq!(
            provider_of("https://acme.atlassian.net/browse/X-1").as_deref(),
            Some("jira")
        );
        assert_eq!(
            provider_of("http://user@Tracker.Example:8080/x").as_deref(),
            Some("tracker.example")
        );
        assert_eq!(provider_of("linear.app/x"), None);
        assert_eq!(provider_of("https:///x"), None);
    }

    #[test]
    fn a_group_members_file_is_its_sessions_beside_the_configured_one() {
        assert_eq!(
            member_path(".devcell/context.json", "20261205T130000Z-42"),
            ".devcell/sessions/20261205T130000Z-42/context.json"
        );
        assert_eq!(member_path("ctx.json", "s-1"), "sessions/s-1/ctx.json");
        assert_ne!(
            member_path(".grove/context.json", "a"),
            member_path(".grove/context.json", "b")
        );
    }

    #[test]
    fn write_creates_folder_with_gitignore_and_replaces_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = sample(dir.path());
        let path = write(dir.path(), ".devcell/context.json", &ctx).unwrap();
        assert_eq!(path, dir.path().join(".devcell/context.json"));
        assert_eq!(read(&path).unwrap(), ctx);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o644,
            "readable by a container user of another uid"
        );
        let ignore = std::fs::read_to_string(dir.path().join(".devcell/.gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "*"));
        // second write replaces devcell's own file
        let mut ctx2 = ctx.clone();
        ctx2.verification = vec!["make check".into()];
        write(dir.path(), ".devcell/context.json", &ctx2).unwrap();
        assert_eq!(read(&path).unwrap().verification, ["make check"]);
        // no temp files left behind
        let names: Vec<_> = std::fs::read_dir(dir.path().join(".devcell"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn an_existing_folder_gets_no_gitignore() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".grove")).unwrap();
        write(dir.path(), ".grove/context.json", &sample(dir.path())).unwrap();
        assert!(!dir.path().join(".grove/.gitignore").exists());
    }

    #[test]
    fn a_user_file_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".grove")).unwrap();
        let user = dir.path().join(".grove/context.json");
        std::fs::write(&user, "{\"schemaVersion\": 1, \"mine\": true}").unwrap();
        let err = write(dir.path(), ".grove/context.json", &sample(dir.path())).unwrap_err();
        assert!(matches!(err, ContextError::NotOwned { .. }), "{err}");
        assert!(err.hint().is_some());
        assert_eq!(
            err.code(),
            crate::handoff::envelope::ErrorCode::ConfigInvalid
        );
        assert_eq!(
            std::fs::read_to_string(&user).unwrap(),
            "{\"schemaVersion\": 1, \"mine\": true}"
        );
    }

    #[test]
    fn symlinks_and_escaping_paths_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".devcell")).unwrap();
        let err = write(dir.path(), ".devcell/context.json", &sample(dir.path())).unwrap_err();
        assert!(matches!(err, ContextError::Unsafe { .. }), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".devcell")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("x.json"),
            dir.path().join(".devcell/context.json"),
        )
        .unwrap();
        let err = write(dir.path(), ".devcell/context.json", &sample(dir.path())).unwrap_err();
        assert!(matches!(err, ContextError::Unsafe { .. }), "{err}");
        assert!(!outside.path().join("x.json").exists());

        for bad in ["/etc/x.json", "../x.json", ""] {
            let err = write(dir.path(), bad, &sample(dir.path())).unwrap_err();
            assert!(
                matches!(err, ContextError::InvalidPath { .. }),
                "{bad}: {err}"
            );
        }
    }
}
