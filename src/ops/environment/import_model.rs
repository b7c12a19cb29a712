//! agent-runner's `mode: managed` execution environment definition (schema version 1), read
//! strictly: every object refuses a key it does not know, as agent-runner's own schema does
//! (spec-note 0523). Only the shape is here; what devcell makes of it is
//! [`super::import`].

use std::collections::BTreeMap;

use serde::Deserialize;

/// A `mode: managed` environment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ManagedEnvironment {
    /// Must be `1`.
    pub schema_version: u32,
    /// The definition's name (agent-runner otherwise names it by its file).
    pub name: Option<String>,
    /// Always `container`.
    pub kind: Kind,
    /// Only `managed` is imported: an `existing` definition names a container someone else
    /// owns (`handoff --container`).
    pub mode: Mode,
    /// `docker` (agent-runner's default) or `podman`.
    pub engine: Option<EngineName>,
    /// The backend's working folder (a template).
    pub cwd: String,
    /// Run-time inputs the templates may name (`{{name}}`).
    #[serde(default)]
    pub vars: BTreeMap<String, VarDef>,
    /// Variables of the container.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Arguments agent-runner appends to `exec`.
    #[serde(default)]
    pub extra_exec_args: Vec<String>,
    /// The image.
    pub image: String,
    /// `run` (default) or `group`.
    pub lifetime: Option<Lifetime>,
    /// The container's name (a template).
    pub container_name: Option<String>,
    /// Where the run's working folder is mounted.
    pub workspace: Option<Workspace>,
    /// Steps run once per container and once per workspace.
    pub lifecycle: Option<Lifecycle>,
    /// Backend session stores mounted at the same path (`backend` or a list of presets).
    pub session_mounts: Option<SessionMounts>,
    /// Extra host paths mounted into the container.
    #[serde(default)]
    pub mounts: Vec<MountDef>,
    /// `default`, `none`, `host`, `bridge` or a network's name.
    pub network: Option<String>,
    /// The engine's security knobs.
    pub security: Option<Security>,
    /// Raw arguments appended to the engine's `run`.
    #[serde(default)]
    pub extra_run_args: Vec<String>,
    /// When the container is removed.
    pub cleanup: Option<Cleanup>,
}

/// `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The only kind agent-runner has.
    Container,
}

/// `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// agent-runner creates and owns the container.
    Managed,
}

/// `engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineName {
    /// Docker.
    Docker,
    /// Podman.
    Podman,
}

/// `lifetime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lifetime {
    /// One container per run.
    Run,
    /// One container shared by a run group.
    Group,
}

/// One of `vars` (agent-runner's variable definition; both its `source` and later `sources`
/// spellings are read).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VarDef {
    /// `string`, `number`, `boolean` or `enum`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Whether a value must be given.
    pub required: Option<bool>,
    /// When a required value must be given.
    pub required_at: Option<String>,
    /// Where values come from.
    pub sources: Option<Vec<String>>,
    /// The environment variable a value comes from.
    pub env_name: Option<String>,
    /// The default value.
    pub default: Option<serde_yaml::Value>,
    /// For people.
    pub description: Option<String>,
    /// An `enum`'s values.
    pub values: Option<Vec<String>>,
}

/// `workspace`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Workspace {
    /// `run` (default) or `group`.
    pub scope: Option<Lifetime>,
    /// The host folder the run's workspace is made under (a template).
    pub host_root: Option<String>,
    /// The host workspace folder itself (a template).
    pub host_path: Option<String>,
    /// Where it is mounted in the container (a template).
    pub container_path: String,
    /// `ro` or `rw` (default).
    pub mode: Option<MountMode>,
    /// Whether agent-runner creates the host folder.
    pub create: Option<bool>,
}

/// `ro` or `rw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MountMode {
    /// Read-only.
    Ro,
    /// Read-write.
    Rw,
}

/// `lifecycle`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Lifecycle {
    /// Once per container, after it started.
    #[serde(default)]
    pub after_start: Vec<Step>,
    /// Once per host workspace.
    #[serde(default)]
    pub on_workspace_create: Vec<Step>,
}

/// One lifecycle step. Both kinds share one strict object here so that a misspelt key is
/// reported at its line; which keys a kind takes is checked after reading
/// ([`super::import`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    /// `command` or `git-clone`.
    pub kind: StepKind,
    /// `host` or `container`.
    pub target: Option<Target>,
    /// A command step's program.
    pub command: Option<String>,
    /// A command step's arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// A command step's variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A command step's working folder.
    pub cwd: Option<String>,
    /// The step's deadline.
    pub timeout_ms: Option<u64>,
    /// A container command step's user.
    pub user: Option<String>,
    /// A container command step left running.
    pub detach: Option<bool>,
    /// A git-clone step's repository (a template).
    pub source: Option<String>,
    /// A git-clone step's start.
    pub base_ref: Option<String>,
    /// A git-clone step's branch (a template).
    pub branch: Option<String>,
}

/// A step's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// A program with arguments.
    Command,
    /// A clone into the workspace.
    GitClone,
}

/// A step's `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// On the machine agent-runner runs on.
    Host,
    /// In the container.
    Container,
}

/// `sessionMounts`: `backend` or a list of presets.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum SessionMounts {
    /// The presets listed.
    Presets(Vec<SessionPreset>),
    /// `backend`: the run's backend's store.
    Backend(BackendWord),
}

/// The word `backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendWord {
    /// The run's backend.
    Backend,
}

/// A session store preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionPreset {
    /// `~/.claude/projects`.
    Claude,
    /// `~/.codex/sessions`.
    Codex,
    /// `~/.cursor/chats`.
    Cursor,
    /// opencode's data folder.
    Opencode,
    /// `$PI_HOME` or `~/.pi`.
    Pi,
}

/// Every preset, in agent-runner's order.
pub const SESSION_PRESETS: [SessionPreset; 5] = [
    SessionPreset::Claude,
    SessionPreset::Codex,
    SessionPreset::Cursor,
    SessionPreset::Opencode,
    SessionPreset::Pi,
];

/// One of `mounts`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MountDef {
    /// The host path (a template).
    pub host_path: String,
    /// The path in the container (a template).
    pub container_path: String,
    /// `ro` or `rw`.
    pub mode: MountMode,
}

/// `security`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Security {
    /// `keep-id` or `host`.
    pub userns: Option<String>,
    /// `disable`, `shared` or `private`.
    pub selinux_label: Option<String>,
    /// Whether the root file system is read-only.
    pub read_only_root_filesystem: Option<bool>,
    /// Capabilities dropped.
    #[serde(default)]
    pub cap_drop: Vec<String>,
    /// Capabilities added.
    #[serde(default)]
    pub cap_add: Vec<String>,
}

/// `cleanup`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Cleanup {
    /// `terminal` (default) or `manual`.
    pub policy: Option<CleanupPolicy>,
}

/// `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CleanupPolicy {
    /// Removed when the run (or the group's last run) ends.
    Terminal,
    /// Removed only when asked.
    Manual,
}
