//! L0: devcell's own user configuration file (TOML), as opposed to a repository's
//! `devcontainer.json`.
//!
//! Location: `$XDG_CONFIG_HOME/devcell/config.toml` (usually `~/.config/devcell/config.toml`),
//! or the file given with `--config-file`. A missing default file means defaults; a missing
//! `--config-file` is an error. Only the user's file can grant permissions: nothing a repository
//! contains is read here.
//!
//! ```toml
//! [security]
//! profile = "hardened"            # or "reference"
//! allow = ["cap:SYS_PTRACE"]      # permission grants, same words as `--allow`
//! pids_limit = 1024
//! memory = "4g"                   # bytes with optional k/m/g/t suffix (powers of 1024)
//! cpus = 2.0
//! network = "default"             # or "none", or "allowlist" (only `egress` destinations);
//!                                 # unset: `default` for `up`, `none` for a handoff
//! egress = ["api.example.test"]   # `host[:port][=address]`, every agent (spec-note 0500)
//!
//! [registries]
//! mirrors = { "ghcr.io" = "127.0.0.1:5000" }
//! insecure = ["registry.internal:5000"]
//! ca_certs = ["/etc/ssl/private-ca.pem"]
//!
//! [agents.codex]
//! command = ["codex", "--full-auto"]   # an argv array, never a shell string
//! env = ["OPENAI_API_KEY"]             # names of host variables passed through
//! mounts = [{ source = "~/.codex/auth.json", target = "/home/agent/.codex/auth.json" }]
//! verify = ["cargo test"]
//! network = "allowlist"
//! egress = ["*.example.test:8443"]     # added to `[security].egress` for this agent
//!
//! group = "review"                   # overrides `[handoff].group` for this agent
//!
//! [agents.codex.upstreams.openai]      # model credentials that stay on the host (spec-note 0501)
//! url = "https://api.example.test/v1"
//! header = "Authorization"
//! value = "Bearer ${localEnv:OPENAI_API_KEY}"
//! env = "OPENAI_BASE_URL"
//!
//! [handoff]
//! group = "ci"                         # as `handoff --group ci` (the flag wins; spec-note 0525)
//! cleanup = "on-exit"                  # as `handoff --cleanup on-exit`
//!
//! [mail]                               # mail between tasks (docs/mail.md)
//! rules = [{ type = "contract-change", action = "hold" }]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// An error reading the user configuration file.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file could not be read.
    #[error("cannot read devcell config `{}`", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not match the schema.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected and found (from the TOML parser).
        message: String,
    },
}

/// The whole user configuration. Every section is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Security profile, grants and limits.
    pub security: SecuritySettings,
    /// Registry mirrors, insecure registries and CA certificates.
    pub registries: RegistrySettings,
    /// Agents by name (`[agents.NAME]`).
    pub agents: BTreeMap<String, AgentSettings>,
    /// Handoff defaults.
    pub handoff: HandoffSettings,
    /// The mediated channel between tasks (`[mail]`, docs/mail.md).
    pub mail: MailSettings,
    /// The file these settings were read from, or (`file_exists` false) the default location
    /// looked at and not found; `None` for settings not loaded from a file. For messages.
    #[serde(skip)]
    pub file: Option<PathBuf>,
    /// Whether `file` exists (it was read).
    #[serde(skip)]
    pub file_exists: bool,
}

/// `[security]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecuritySettings {
    /// `hardened` (default) or `reference`.
    pub profile: Profile,
    /// Permission grants, e.g. `privileged`, `root`, `cap:SYS_PTRACE`, `mount:/data`.
    pub allow: Vec<String>,
    /// Maximum number of processes in the container.
    pub pids_limit: i64,
    /// Memory limit, bytes with optional `k`/`m`/`g`/`t` suffix (powers of 1024).
    pub memory: String,
    /// CPU limit in CPUs (fractions allowed).
    pub cpus: f64,
    /// Network mode: `default`, `none` or `allowlist`; `None` when not written (then each
    /// command's own default applies: `default` for `up`, `none` for a handoff; spec-note 0207).
    pub network: Option<NetworkMode>,
    /// Egress allowlist entries (`host[:port][=address]`) for every agent under `allowlist`;
    /// checked by `egress::settings` (a higher layer owns the syntax).
    pub egress: Vec<Located<String>>,
}

impl Default for SecuritySettings {
    fn default() -> Self {
        Self {
            profile: Profile::Hardened,
            allow: Vec::new(),
            pids_limit: 1024,
            memory: "4g".into(),
            cpus: 2.0,
            network: None,
            egress: Vec::new(),
        }
    }
}

/// `[registries]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistrySettings {
    /// Registry host → mirror host (e.g. `ghcr.io` → `127.0.0.1:5000`).
    pub mirrors: BTreeMap<String, String>,
    /// Registries reached over plain HTTP (localhost and 127.0.0.1 always are).
    pub insecure: Vec<String>,
    /// Extra PEM CA certificate files trusted for registries.
    pub ca_certs: Vec<PathBuf>,
}

/// `[agents.NAME]`: how to launch one coding agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSettings {
    /// The agent's argv (never a shell string).
    pub command: Vec<String>,
    /// Names of host environment variables passed through (values never logged).
    pub env: Vec<String>,
    /// Secret references: variable name → `env:NAME` or `file:PATH`.
    pub secrets: BTreeMap<String, String>,
    /// Narrow read-only credential files mounted into the container.
    pub mounts: Vec<AgentMount>,
    /// Verification commands the agent must run before calling the task done.
    pub verify: Vec<String>,
    /// Overrides `[security].profile` for this agent.
    pub profile: Option<Profile>,
    /// Overrides `[security].network` for this agent (`default`, `none`, `allowlist`).
    pub network: Option<NetworkMode>,
    /// Egress allowlist entries added to `[security].egress` for this agent.
    pub egress: Vec<Located<String>>,
    /// Model-provider upstreams by id (`[agents.NAME.upstreams.ID]`): the proxy adds the
    /// credential header on the host (spec-note 0501).
    pub upstreams: BTreeMap<String, UpstreamSettings>,
    /// Overrides `[handoff].isolation` for this agent (`worktree` or `clone`).
    pub isolation: Option<Isolation>,
    /// Overrides `[handoff].group` for this agent (`handoff --group` wins over both).
    pub group: Option<GroupName>,
    /// Overrides `[handoff].cleanup` for this agent (`handoff --cleanup` wins over both).
    pub cleanup: Option<Cleanup>,
}

/// How a handoff gives the container its repositories (`handoff --isolation`, spec-note 0437).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// The user's worktrees mounted, each with a container git directory (the default).
    #[default]
    Worktree,
    /// A private clone per task, made from a bare mirror, results fetched back by the host.
    Clone,
}

impl Isolation {
    /// `worktree` or `clone`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Worktree => "worktree",
            Isolation::Clone => "clone",
        }
    }
}

impl std::str::FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "worktree" => Ok(Isolation::Worktree),
            "clone" => Ok(Isolation::Clone),
            other => Err(format!(
                "unknown isolation `{other}`: expected `worktree` or `clone`"
            )),
        }
    }
}

/// `[agents.NAME.upstreams.ID]`: an HTTPS endpoint the agent reaches at a plain-HTTP loopback
/// address in its container, with a credential header devcell adds on the host. Every field
/// is checked by `egress::settings` (URL, header name, `${localEnv:NAME}` references).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamSettings {
    /// Where devcell sends the requests: `https://host[:port][/base path]`.
    pub url: Located<String>,
    /// The credential header's name (e.g. `Authorization`).
    pub header: Located<String>,
    /// The header's value; `${localEnv:NAME}` is replaced on the host. Never sent into the
    /// container, never printed (`Debug` and `Serialize` show `********`).
    #[serde(serialize_with = "masked")]
    pub value: Located<String>,
    /// The variable set in the agent's environment to the in-container base URL.
    pub env: Located<String>,
    /// Pins the address connected to (like an egress entry's `=address`; loopback in tests).
    pub address: Option<Located<String>>,
    /// An extra PEM CA file trusted for this upstream (besides the system roots and
    /// `[registries].ca_certs`).
    pub ca: Option<PathBuf>,
}

impl std::fmt::Debug for UpstreamSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSettings")
            .field("url", &self.url.value)
            .field("header", &self.header.value)
            .field("value", &"********")
            .field("env", &self.env.value)
            .field("address", &self.address.as_ref().map(|a| &a.value))
            .field("ca", &self.ca)
            .finish()
    }
}

fn masked<S: serde::Serializer>(_: &Located<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("********")
}

/// A value with where it was written (1-based line and column; 0 when not read from a file),
/// for the errors of checks made after reading (egress entries, upstreams).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// 1-based line (0: unknown).
    #[serde(skip)]
    pub line: usize,
    /// 1-based column (0: unknown).
    #[serde(skip)]
    pub column: usize,
    /// Byte offset in the file, until [`parse`] turns it into `line` and `column`.
    #[serde(skip)]
    offset: usize,
}

impl<T> Located<T> {
    /// A value with no location (built in code, not read).
    pub fn new(value: T) -> Located<T> {
        Located {
            value,
            line: 0,
            column: 0,
            offset: 0,
        }
    }

    fn locate(&mut self, text: &str) {
        (self.line, self.column) = line_column(text, self.offset);
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = toml::Spanned::<T>::deserialize(d)?;
        let offset = spanned.span().start;
        Ok(Located {
            value: spanned.into_inner(),
            line: 0,
            column: 0,
            offset,
        })
    }
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// The container's network, as the user chose it (`--network`, `network` in `[agents.NAME]`
/// or `[security]`). Parsed once: by clap for the flag, by serde when config.toml is read;
/// everything after receives this value (resolved by `security::choice`, spec-note 0207).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// The engine's default network (its bridge): what the reference CLI gives. `up`'s default.
    Default,
    /// Loopback only (network `none`). The handoff's default (spec-note 0202).
    None,
    /// Network `none` plus devcell's host-side egress proxy: only the allowlisted
    /// destinations (spec-note 0502).
    Allowlist,
}

impl NetworkMode {
    /// `default`, `none` or `allowlist`.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Default => "default",
            NetworkMode::None => "none",
            NetworkMode::Allowlist => "allowlist",
        }
    }

    /// The engine's network mode for the container: `None` for the engine's default, else
    /// `none` (`allowlist` is network `none` plus devcell's channel, spec-note 0502).
    pub fn engine_mode(self) -> Option<&'static str> {
        match self {
            NetworkMode::Default => Option::None,
            NetworkMode::None | NetworkMode::Allowlist => Some("none"),
        }
    }

    /// Whether the container is closed (network `none`, with or without the allowlist).
    pub fn closed(self) -> bool {
        self != NetworkMode::Default
    }
}

/// `--network`'s values, without per-value help (the flag's own help says what each does).
impl clap::ValueEnum for NetworkMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            NetworkMode::Default,
            NetworkMode::None,
            NetworkMode::Allowlist,
        ]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

impl std::fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for NetworkMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "default" => Ok(NetworkMode::Default),
            "none" => Ok(NetworkMode::None),
            "allowlist" => Ok(NetworkMode::Allowlist),
            other => Err(format!(
                "unknown network `{other}`: expected `default`, `none` or `allowlist`"
            )),
        }
    }
}

impl<'de> Deserialize<'de> for NetworkMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(|_| {
            serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&text),
                &"`default`, `none` or `allowlist`",
            )
        })
    }
}

/// The security profile's name, as `--security-profile` and config.toml spell it. Parsed
/// once (clap, serde); `security::SecurityProfile` adds the limits to `Hardened`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Non-root, capabilities dropped, read-only root, limits; anything more is a grant.
    #[default]
    Hardened,
    /// The configuration as written, like the reference CLI.
    Reference,
}

impl Profile {
    /// `hardened` or `reference`.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Hardened => "hardened",
            Profile::Reference => "reference",
        }
    }
}

/// `--security-profile`'s values, without per-value help (the flag's own help says them).
impl clap::ValueEnum for Profile {
    fn value_variants<'a>() -> &'a [Self] {
        &[Profile::Hardened, Profile::Reference]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hardened" => Ok(Profile::Hardened),
            "reference" => Ok(Profile::Reference),
            other => Err(format!(
                "unknown security profile `{other}`: expected `hardened` or `reference`"
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Profile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(|_| {
            serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&text),
                &"`hardened` or `reference`",
            )
        })
    }
}

/// A read-only file or folder mounted for an agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentMount {
    /// Host path (`~/` expands to the user's home).
    pub source: String,
    /// Absolute path in the container.
    pub target: String,
}

/// What happens to a group's container when its members end (`--cleanup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cleanup {
    /// An agent's exit removes nothing; `devcell delete` removes the container (Grove: an
    /// agent's exit never deletes the workspace).
    #[default]
    Manual,
    /// The container (and its anonymous volumes) is removed when the group's last live member
    /// ends; never the workspace, its worktrees or git directories.
    OnExit,
}

impl Cleanup {
    /// `manual` or `on-exit`, as the flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Cleanup::Manual => "manual",
            Cleanup::OnExit => "on-exit",
        }
    }
}

impl std::fmt::Display for Cleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Cleanup {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "manual" => Ok(Cleanup::Manual),
            "on-exit" => Ok(Cleanup::OnExit),
            other => Err(format!(
                "unknown cleanup policy `{other}` (expected `on-exit` or `manual`)"
            )),
        }
    }
}

/// A group's name: 1–64 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-` (it names the
/// record's file).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GroupName(String);

impl GroupName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for GroupName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && !s.starts_with(['.', '-'])
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(GroupName(s))
        } else {
            Err(format!(
                "invalid group name `{s}`: 1 to 64 of letters, digits, `.`, `_` and `-`, not starting with `.` or `-`"
            ))
        }
    }
}

impl From<GroupName> for String {
    fn from(n: GroupName) -> String {
        n.0
    }
}

impl std::fmt::Display for GroupName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `[handoff] fetch_back_max_bytes` when not set: 8 GiB.
pub const FETCH_BACK_MAX_DEFAULT: u64 = 8 << 30;

/// `[handoff] fetch_back_max_inflated_bytes` when not set: 1 GiB.
pub const FETCH_BACK_INFLATED_MAX_DEFAULT: u64 = 1 << 30;

/// `[handoff] fetch_back_max_object_bytes` when not set: 256 MiB.
pub const FETCH_BACK_OBJECT_MAX_DEFAULT: u64 = 256 << 20;

/// `[handoff]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffSettings {
    /// Context file path relative to the workspace root.
    pub context_path: String,
    /// Where the workspace root is mounted in the container.
    pub workspace_target: String,
    /// `worktree` (default) or `clone` (spec-note 0437).
    pub isolation: Isolation,
    /// The most bytes of a clone task's objects its fetch-back copies (the clone is the
    /// agent's: a pack may be any size); over it the fetch is refused (spec-note 0437).
    pub fetch_back_max_bytes: u64,
    /// The most bytes the objects a fetch-back brings (those the user's repository lacks)
    /// may hold once inflated, all together; a few KB of pack can inflate to any size
    /// (spec-note 0438).
    pub fetch_back_max_inflated_bytes: u64,
    /// The most bytes any one object a fetch-back brings may hold once inflated (spec-note
    /// 0438).
    pub fetch_back_max_object_bytes: u64,
    /// The group every handoff joins unless `--group` names another (spec-note 0525); it
    /// does not apply where a group cannot (`--runtime host`, `--isolation clone`,
    /// `--container`).
    pub group: Option<GroupName>,
    /// The cleanup policy of the handoff's group unless `--cleanup` names one (default
    /// `manual`).
    pub cleanup: Option<Cleanup>,
}

impl Default for HandoffSettings {
    fn default() -> Self {
        Self {
            context_path: ".devcell/context.json".into(),
            workspace_target: "/workspace".into(),
            isolation: Isolation::Worktree,
            fetch_back_max_bytes: FETCH_BACK_MAX_DEFAULT,
            fetch_back_max_inflated_bytes: FETCH_BACK_INFLATED_MAX_DEFAULT,
            fetch_back_max_object_bytes: FETCH_BACK_OBJECT_MAX_DEFAULT,
            group: None,
            cleanup: None,
        }
    }
}

/// `[mail]`: the mediator's policy and bounds (docs/mail.md). Rules are checked in order; the
/// first whose `from`, `to` and `type` all match decides, else `default`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MailSettings {
    /// What happens to a message no rule matches.
    pub default: MailAction,
    /// Rules, first match wins.
    pub rules: Vec<MailRule>,
    /// Largest subject + body + thread fields of one message, in bytes.
    pub max_message_bytes: usize,
    /// Messages one task may send per minute.
    pub messages_per_minute: u32,
    /// Largest size of a group's log, in bytes.
    pub max_log_bytes: u64,
    /// Seconds a read message stays out of the inbox before it is redelivered, unless
    /// acknowledged.
    pub lease_seconds: u64,
    /// Whether worktree handoffs get the mail channel too (clone tasks always do; `handoff
    /// --mail` / `--no-mail` decide for one handoff; spec-note 0532).
    pub worktrees: bool,
    /// The host command run once per escalated message (argv, never a shell string; empty:
    /// none). Only the user's file can name it (spec-note 0533).
    pub escalate_command: Vec<String>,
    /// Its deadline in seconds (1–50, default 10); past it its process group is killed.
    pub escalate_timeout_seconds: u64,
}

impl Default for MailSettings {
    fn default() -> Self {
        Self {
            default: MailAction::Forward,
            rules: Vec::new(),
            max_message_bytes: 64 * 1024,
            messages_per_minute: 30,
            max_log_bytes: 64 * 1024 * 1024,
            lease_seconds: 300,
            worktrees: false,
            escalate_command: Vec::new(),
            escalate_timeout_seconds: 10,
        }
    }
}

/// One `[[mail.rules]]` entry: glob patterns over task names (`*` matches any) and a type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MailRule {
    /// Sender task name pattern (default `*`).
    #[serde(default = "any")]
    pub from: String,
    /// Recipient task name pattern (default `*`).
    #[serde(default = "any")]
    pub to: String,
    /// Message type (`notice`, `request`, `reply`, `contract-change`, `handoff`) or `*`.
    #[serde(default = "any", rename = "type")]
    pub kind: String,
    /// What to do.
    pub action: MailAction,
}

fn any() -> String {
    "*".to_string()
}

/// What the mediator does with a message for one recipient.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MailAction {
    /// Deliver it.
    #[default]
    Forward,
    /// Keep it for the host user to forward or reject.
    Hold,
    /// Hold it and surface it (`status`).
    Escalate,
    /// Do not deliver it; the log records it.
    Drop,
}

/// The default location: `$XDG_CONFIG_HOME/devcell/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("devcell").join("config.toml"))
}

/// Loads settings from `explicit` (must exist) or the default location (may be absent).
///
/// # Errors
/// [`SettingsError::Io`] when the file cannot be read, [`SettingsError::Invalid`] with line and
/// column when it is not valid TOML or has unknown keys or wrong types.
pub fn load(explicit: Option<&Path>) -> Result<Settings, SettingsError> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => match default_path() {
            Some(p) if p.exists() => p,
            looked_at => {
                return Ok(Settings {
                    file: looked_at,
                    ..Settings::default()
                });
            }
        },
    };
    // Bounded; a FIFO or device never hangs devcell (spec-note 0433).
    let text =
        crate::config::bounded::read_to_string(&path, crate::config::jsonc::MAX_FILE_BYTES as u64)
            .map_err(|source| SettingsError::Io {
                path: path.clone(),
                source,
            })?;
    let mut settings = parse(&text, &path)?;
    settings.file = Some(path);
    settings.file_exists = true;
    Ok(settings)
}

/// Parses settings text; `path` is used in error messages only.
///
/// # Errors
/// [`SettingsError::Invalid`] with the 1-based line and column of the problem.
pub fn parse(text: &str, path: &Path) -> Result<Settings, SettingsError> {
    let mut settings: Settings = toml::from_str(text).map_err(|e| {
        let (line, column) = e
            .span()
            .map(|span| line_column(text, span.start))
            .unwrap_or((1, 1));
        SettingsError::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            message: with_table_hint(e.message()),
        }
    })?;
    for entry in &mut settings.security.egress {
        entry.locate(text);
    }
    for agent in settings.agents.values_mut() {
        for entry in &mut agent.egress {
            entry.locate(text);
        }
        for up in agent.upstreams.values_mut() {
            for field in [&mut up.url, &mut up.header, &mut up.value, &mut up.env] {
                field.locate(text);
            }
            if let Some(a) = &mut up.address {
                a.locate(text);
            }
        }
    }
    Ok(settings)
}

/// The keys of `[security]`: written at the top level (where a newcomer may put them) they
/// are unknown fields, and the parser's message alone does not say where they belong.
const SECURITY_KEYS: [&str; 7] = [
    "profile",
    "allow",
    "pids_limit",
    "memory",
    "cpus",
    "network",
    "egress",
];

/// The TOML parser's `message`, plus where an unknown top-level key of `[security]` belongs.
fn with_table_hint(message: &str) -> String {
    let key = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .map(|(key, _)| key);
    match key {
        Some(key)
            if SECURITY_KEYS.contains(&key) && message.contains("expected one of `security`") =>
        {
            format!("{message}; `{key}` belongs in the `[security]` table")
        }
        _ => message.to_string(),
    }
}

impl SettingsError {
    /// An error found after reading, at `line`/`column` of `file` (`property` is the TOML path,
    /// e.g. `agents.codex.egress[1]`).
    pub fn at(file: &Path, line: usize, column: usize, property: &str, message: &str) -> Self {
        SettingsError::Invalid {
            path: file.to_path_buf(),
            line: line.max(1),
            column: column.max(1),
            message: format!("`{property}`: {message}"),
        }
    }
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Parses a size such as `4g`, `512m`, `4gb` or `1024` into bytes (k/m/g/t are powers of 1024).
///
/// Returns `None` for anything else.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (digits, shift) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 10),
        'm' => (&t[..t.len() - 1], 20),
        'g' => (&t[..t.len() - 1], 30),
        't' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_globally_and_per_agent() {
        let s = parse(
            "[handoff]\nisolation = \"clone\"\n[agents.a]\ncommand = [\"x\"]\nisolation = \"worktree\"\n[agents.b]\ncommand = [\"y\"]\n",
            Path::new("config.toml"),
        )
        .unwrap();
        assert_eq!(s.handoff.isolation, Isolation::Clone);
        assert_eq!(s.agents["a"].isolation, Some(Isolation::Worktree));
        assert_eq!(s.agents["b"].isolation, None);
        assert_eq!(Settings::default().handoff.isolation, Isolation::Worktree);
        assert!(parse("[handoff]\nisolation = \"vm\"\n", Path::new("c.toml")).is_err());
        assert_eq!("clone".parse::<Isolation>(), Ok(Isolation::Clone));
        assert!("vm".parse::<Isolation>().is_err());
    }

    #[test]
    fn a_security_key_at_the_top_level_says_where_it_belongs() {
        let e = parse("allow = [\"root\"]\n", Path::new("c.toml")).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("c.toml:1:1: unknown field `allow`"),
            "{text}"
        );
        assert!(
            text.ends_with("; `allow` belongs in the `[security]` table"),
            "{text}"
        );
        // any other unknown key keeps the parser's message alone
        let e = parse("nonsense = 1\n", Path::new("c.toml")).unwrap_err();
        assert!(!e.to_string().contains("belongs in"), "{e}");
        // a key of `[security]` is not suggested for itself inside `[agents.x]`
        let e = parse(
            "[agents.x]\ncommand = [\"a\"]\nallow = [\"root\"]\n",
            Path::new("c.toml"),
        )
        .unwrap_err();
        assert!(!e.to_string().contains("belongs in"), "{e}");
    }

    #[test]
    fn empty_file_gives_defaults() {
        let s = parse("", Path::new("c.toml")).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.security.profile, Profile::Hardened);
        assert_eq!(s.security.pids_limit, 1024);
        assert_eq!(s.handoff.workspace_target, "/workspace");
    }

    #[test]
    fn agents_and_mirrors_parse() {
        let s = parse(
            r#"
[registries]
mirrors = { "ghcr.io" = "127.0.0.1:5000" }
[agents.codex]
command = ["codex", "--full-auto"]
env = ["OPENAI_API_KEY"]
"#,
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(s.registries.mirrors["ghcr.io"], "127.0.0.1:5000");
        assert_eq!(s.agents["codex"].command, ["codex", "--full-auto"]);
    }

    #[test]
    fn shell_string_command_is_rejected_with_location() {
        let err = parse(
            "[agents.x]\ncommand = \"codex --full-auto\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err();
        let SettingsError::Invalid { line, message, .. } = err else {
            panic!("expected Invalid")
        };
        assert_eq!(line, 2);
        assert!(message.contains("sequence"), "{message}");
    }

    #[test]
    fn unknown_key_is_rejected() {
        let err = parse("[security]\nprofil = \"x\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("c.toml:2:1"), "{err}");
        assert!(err.to_string().contains("profil"), "{err}");
    }

    #[test]
    fn sizes_use_powers_of_1024() {
        assert_eq!(parse_size("4g"), Some(4 << 30));
        assert_eq!(parse_size("4gb"), Some(4 << 30));
        assert_eq!(parse_size("2048mb"), Some(2048 << 20));
        assert_eq!(parse_size("17"), Some(17));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn egress_and_upstreams_parse_with_their_locations() {
        let s = parse(
            r#"[security]
network = "allowlist"
egress = ["api.example.test", "web.test:8080=127.0.0.1"]
[agents.codex]
network = "none"
egress = ["*.example.test:8443"]
[agents.codex.upstreams.openai]
url = "https://api.example.test/v1"
header = "Authorization"
value = "Bearer ${localEnv:OPENAI_API_KEY}"
env = "OPENAI_BASE_URL"
address = "127.0.0.1"
ca = "ca.pem"
"#,
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(s.security.network, Some(NetworkMode::Allowlist));
        let e = &s.security.egress[1];
        assert_eq!(
            (e.value.as_str(), e.line, e.column),
            ("web.test:8080=127.0.0.1", 3, 31)
        );
        let codex = &s.agents["codex"];
        assert_eq!(codex.network, Some(NetworkMode::None));
        assert_eq!((codex.egress[0].line, codex.egress[0].column), (6, 11));
        let up = &codex.upstreams["openai"];
        assert_eq!(up.url.value, "https://api.example.test/v1");
        assert_eq!((up.value.line, up.value.column), (10, 9));
        assert_eq!(
            up.address.as_ref().map(|a| a.value.as_str()),
            Some("127.0.0.1")
        );
        assert_eq!(up.ca.as_deref(), Some(Path::new("ca.pem")));
        // The value (even the template) is masked wherever settings are shown.
        assert!(!format!("{s:?}").contains("OPENAI_API_KEY"));
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("OPENAI_API_KEY"), "{json}");
        assert!(json.contains("\"value\":\"********\""), "{json}");
    }

    #[test]
    fn an_unknown_upstream_key_or_network_is_rejected_with_location() {
        let err = parse(
            "[agents.a.upstreams.x]\nurl = \"https://a.test\"\nkey = \"k\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("c.toml:3:1"), "{err}");
        let err = parse("[security]\nnetwork = \"bridge\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.toml:2:11"), "{err}");
        assert!(err.contains("`default`, `none` or `allowlist`"), "{err}");
    }
}
