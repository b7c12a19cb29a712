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
//! network = "default"             # or "none"
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
    pub profile: String,
    /// Permission grants, e.g. `privileged`, `root`, `cap:SYS_PTRACE`, `mount:/data`.
    pub allow: Vec<String>,
    /// Maximum number of processes in the container.
    pub pids_limit: i64,
    /// Memory limit, bytes with optional `k`/`m`/`g`/`t` suffix (powers of 1024).
    pub memory: String,
    /// CPU limit in CPUs (fractions allowed).
    pub cpus: f64,
    /// Network mode: `default` or `none`.
    pub network: String,
}

impl Default for SecuritySettings {
    fn default() -> Self {
        Self {
            profile: "hardened".into(),
            allow: Vec::new(),
            pids_limit: 1024,
            memory: "4g".into(),
            cpus: 2.0,
            network: "default".into(),
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
    pub profile: Option<String>,
    /// Overrides `[security].network` for this agent.
    pub network: Option<String>,
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

/// `[handoff]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffSettings {
    /// Context file path relative to the workspace root.
    pub context_path: String,
    /// Where the workspace root is mounted in the container.
    pub workspace_target: String,
}

impl Default for HandoffSettings {
    fn default() -> Self {
        Self {
            context_path: ".devcell/context.json".into(),
            workspace_target: "/workspace".into(),
        }
    }
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
    toml::from_str(text).map_err(|e| {
        let (line, column) = e
            .span()
            .map(|span| line_column(text, span.start))
            .unwrap_or((1, 1));
        SettingsError::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            message: e.message().to_string(),
        }
    })
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
    fn empty_file_gives_defaults() {
        let s = parse("", Path::new("c.toml")).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.security.profile, "hardened");
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
}
