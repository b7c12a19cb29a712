//! The agent's part of a handoff: its settings (`[agents.NAME]`), secrets, passed-through
//! variables and working folder.

use crate::handoff::repository::Workspace;
use crate::ops::error::{OpsError, Result};
use crate::settings::AgentSettings;
use indexmap::IndexMap;
use std::path::Path;

use super::HandoffOptions;

/// The agent's settings (`[agents.NAME]`), with a command to run.
pub(super) fn resolve_agent(opts: &HandoffOptions) -> Result<AgentSettings> {
    let settings = &opts.settings;
    let agent =
        settings
            .agents
            .get(&opts.agent)
            .cloned()
            .ok_or_else(|| OpsError::UnknownAgent {
                name: opts.agent.clone(),
                config: match (&settings.file, settings.file_exists) {
                    (Some(f), true) => format!("`{}`", f.display()),
                    (Some(f), false) => format!("`{}` (not found)", f.display()),
                    (None, _) => "(no file)".to_string(),
                },
                available: settings.agents.keys().cloned().collect(),
            })?;
    if agent.command.is_empty() || agent.command[0].is_empty() {
        return Err(agent_err(opts, "`command` is empty: give the agent's argv, e.g. `command = [\"codex\", \"--full-auto\"]`".into()));
    }
    Ok(agent)
}

/// [`OpsError::AgentConfig`] for the handoff's agent.
pub(super) fn agent_err(opts: &HandoffOptions, message: String) -> OpsError {
    OpsError::AgentConfig {
        agent: opts.agent.clone(),
        message,
    }
}

/// The agent's secrets: its references (`env:NAME`, `file:PATH`), then `--secrets-file`
/// (which wins).
pub(super) fn resolve_secrets(
    opts: &HandoffOptions,
    agent: &AgentSettings,
    home: Option<&str>,
) -> Result<IndexMap<String, String>> {
    let mut secrets = IndexMap::new();
    for (name, reference) in &agent.secrets {
        let value = if let Some(var) = reference.strip_prefix("env:") {
            opts.env.get(var).cloned().ok_or_else(|| {
                agent_err(
                    opts,
                    format!("secret `{name}` refers to host variable `{var}`, which is not set"),
                )
            })?
        } else if let Some(path) = reference.strip_prefix("file:") {
            let path = expand_home(path, home).ok_or_else(|| {
                agent_err(opts, format!("secret `{name}`: `{path}` needs `HOME`"))
            })?;
            let text = crate::config::bounded::read_to_string(
                Path::new(&path),
                crate::config::jsonc::MAX_FILE_BYTES as u64,
            )
            .map_err(|e| agent_err(opts, format!("secret `{name}`: cannot read `{path}`: {e}")))?;
            text.trim_end_matches(['\n', '\r']).to_string()
        } else {
            return Err(agent_err(
                opts,
                format!(
                    "secret `{name}`: expected `env:NAME` or `file:PATH`, found a reference of another form"
                ),
            ));
        };
        secrets.insert(name.clone(), value);
    }
    secrets.extend(opts.secrets.clone());
    Ok(secrets)
}

/// The host variables the agent passes through (`env`); one not set is warned about.
pub(super) fn agent_env(
    opts: &HandoffOptions,
    agent: &AgentSettings,
    warnings: &mut Vec<String>,
) -> IndexMap<String, String> {
    let mut agent_env = IndexMap::new();
    for name in &agent.env {
        match opts.env.get(name) {
            Some(v) => {
                agent_env.insert(name.clone(), v.clone());
            }
            None => warnings.push(format!(
                "host variable `{name}` (agent `{}` env) is not set: not passed",
                opts.agent
            )),
        }
    }
    agent_env
}

/// Where the agent starts: the `--primary` repository's folder in the container, else the
/// workspace root's.
pub(super) fn agent_cwd(opts: &HandoffOptions, ws: &Workspace) -> String {
    match &opts.primary {
        Some(_) => ws
            .primary()
            .map(|r| r.container_path.clone())
            .unwrap_or_else(|| ws.container_root.clone()),
        None => ws.container_root.clone(),
    }
}

/// `~/x` → `<home>/x`; other paths unchanged; `None` when `~/` is used without a home.
pub(super) fn expand_home(path: &str, home: Option<&str>) -> Option<String> {
    match path.strip_prefix("~/") {
        Some(rest) => home.map(|h| format!("{}/{rest}", h.trim_end_matches('/'))),
        None if path == "~" => home.map(str::to_string),
        None => Some(path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::expand_home;

    #[test]
    fn home_expansion() {
        assert_eq!(
            expand_home("~/.codex/auth.json", Some("/home/me/")).as_deref(),
            Some("/home/me/.codex/auth.json")
        );
        assert_eq!(expand_home("/etc/x", None).as_deref(), Some("/etc/x"));
        assert_eq!(expand_home("~/x", None), None);
    }
}
