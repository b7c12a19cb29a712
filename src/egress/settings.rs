//! The user's egress settings in `config.toml` (issue 13, items 3 and 5), checked with their
//! locations (`network` is typed and checked when read, resolved by `security::choice`), `egress` entries
//! (`[security].egress` for every agent, then `[agents.NAME].egress`) and
//! `[agents.NAME.upstreams.ID]`. The settings layer reads them; the syntax is this layer's.

use std::path::{Path, PathBuf};

use crate::settings::{Located, Settings, SettingsError};

use super::policy::{Allowlist, Entry};
use super::upstream::{Upstream, UpstreamSpec, Upstreams, resolve_local_env};

fn file(settings: &Settings) -> PathBuf {
    settings
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from("config.toml"))
}

fn located_error(
    file: &Path,
    at: &Located<String>,
    property: &str,
    message: &str,
) -> SettingsError {
    SettingsError::at(file, at.line, at.column, property, message)
}

/// The user's allowlist for `agent`: `[security].egress`, then the agent's `egress`.
///
/// # Errors
/// [`SettingsError::Invalid`] at the entry's line and column, naming its property
/// (`agents.codex.egress[1]`) and what is wrong.
pub fn allowlist(settings: &Settings, agent: Option<&str>) -> Result<Allowlist, SettingsError> {
    let file = file(settings);
    let mut entries: Vec<(String, &Located<String>)> = settings
        .security
        .egress
        .iter()
        .enumerate()
        .map(|(i, e)| (format!("security.egress[{i}]"), e))
        .collect();
    if let Some(name) = agent
        && let Some(a) = settings.agents.get(name)
    {
        entries.extend(
            a.egress
                .iter()
                .enumerate()
                .map(|(i, e)| (format!("agents.{name}.egress[{i}]"), e)),
        );
    }
    for (property, entry) in &entries {
        Entry::parse(entry).map_err(|e| located_error(&file, entry, property, &e.to_string()))?;
    }
    let texts: Vec<&str> = entries.iter().map(|(_, e)| e.value.as_str()).collect();
    Allowlist::parse(&texts).map_err(|e| SettingsError::at(&file, 1, 1, "egress", &e.to_string()))
}

/// The agent's upstreams, each `value` resolved on the host with `lookup` (the host
/// environment: `|n| std::env::var(n).ok()`). `[registries].ca_certs` are trusted for every
/// upstream besides its own `ca` and the system roots.
///
/// # Errors
/// [`SettingsError::Invalid`] at the field's line and column, naming its property
/// (`agents.codex.upstreams.openai.url`) and what is wrong; never the value.
pub fn upstreams(
    settings: &Settings,
    agent: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Upstreams, SettingsError> {
    let file = file(settings);
    let mut out = Upstreams::new();
    let Some(a) = settings.agents.get(agent) else {
        return Ok(out);
    };
    for (id, up) in &a.upstreams {
        let prefix = format!("agents.{agent}.upstreams.{id}");
        for (name, field) in [
            ("url", &up.url),
            ("header", &up.header),
            ("value", &up.value),
            ("env", &up.env),
        ] {
            if field.value.is_empty() {
                return Err(SettingsError::at(
                    &file,
                    first_line(up),
                    1,
                    &format!("{prefix}.{name}"),
                    "missing (an upstream needs `url`, `header`, `value` and `env`)",
                ));
            }
        }
        let value = resolve_local_env(&up.value, lookup)
            .map_err(|why| located_error(&file, &up.value, &format!("{prefix}.value"), &why))?;
        let mut ca_files: Vec<PathBuf> = up.ca.iter().cloned().collect();
        ca_files.extend(settings.registries.ca_certs.iter().cloned());
        let upstream = Upstream::new(&UpstreamSpec {
            id,
            url: &up.url,
            header: &up.header,
            value: &value,
            env: &up.env,
            address: up.address.as_ref().map(|a| a.value.as_str()),
            ca_files: &ca_files,
        })
        .map_err(|e| {
            let (field, why) = match &e {
                super::EgressError::Upstream { field, why, .. } => (field.clone(), why.clone()),
                other => ("ca".to_string(), other.to_string()),
            };
            let at = match field.as_str() {
                "header" => &up.header,
                "value" => &up.value,
                "env" => &up.env,
                "address" => up.address.as_ref().unwrap_or(&up.url),
                _ => &up.url,
            };
            let property = if field == "id" {
                prefix.clone()
            } else {
                format!("{prefix}.{field}")
            };
            located_error(&file, at, &property, &why)
        })?;
        out.insert(upstream);
    }
    Ok(out)
}

fn first_line(up: &crate::settings::UpstreamSettings) -> usize {
    [&up.url, &up.header, &up.value, &up.env]
        .iter()
        .map(|f| f.line)
        .filter(|l| *l > 0)
        .min()
        .unwrap_or(1)
}

/// Checks every egress setting of the file (all agents), without resolving any
/// `${localEnv:…}`: what `doctor` and the start of an operation call.
///
/// # Errors
/// The first problem, located (see [`allowlist`] and [`upstreams`]).
pub fn check(settings: &Settings) -> Result<(), SettingsError> {
    allowlist(settings, None)?;
    for name in settings.agents.keys() {
        allowlist(settings, Some(name))?;
        // Any variable resolves to a placeholder: only the shape is checked here.
        upstreams(settings, name, &|_| Some("x".to_string()))?;
    }
    Ok(())
}

/// The normalised form of a destination a repository requests (`host:port[=address]`), for
/// [`crate::security::egress_requests`]'s `normalise` (called by the operations, which may
/// name both layers).
pub fn normalise_request(text: &str) -> Result<String, String> {
    Entry::parse(text)
        .map(|e| e.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::FakeResolver;

    fn parse(text: &str) -> Settings {
        let mut s = crate::settings::parse(text, Path::new("c.toml")).unwrap();
        s.file = Some(PathBuf::from("c.toml"));
        s
    }

    #[tokio::test]
    async fn global_and_agent_entries_make_the_allowlist() {
        let s = parse(
            r#"
[security]
network = "allowlist"
egress = ["api.example.test"]
[agents.codex]
egress = ["web.test:8080=127.0.0.1"]
"#,
        );
        assert_eq!(
            s.security.network,
            Some(crate::settings::NetworkMode::Allowlist)
        );
        let all = allowlist(&s, Some("codex")).unwrap();
        assert_eq!(all.entries().len(), 2);
        let r = FakeResolver::new();
        assert!(all.decide("web.test", 8080, &r).await.is_ok());
        assert!(
            allowlist(&s, None)
                .unwrap()
                .decide("web.test", 8080, &r)
                .await
                .is_err()
        );
        check(&s).unwrap();
    }

    #[test]
    fn a_bad_entry_is_located_with_its_property() {
        let s = parse(
            "[agents.codex]\nnetwork = \"none\"\negress = [\"ok.test\",\n  \"bad.test:99999\"]\n",
        );
        let err = allowlist(&s, Some("codex")).unwrap_err().to_string();
        assert!(
            err.starts_with("c.toml:4:3: `agents.codex.egress[1]`"),
            "{err}"
        );
        assert!(err.contains("bad.test:99999"), "{err}");
        assert!(check(&s).is_err());
    }

    #[test]
    fn an_unknown_network_mode_is_located() {
        let err = crate::settings::parse("[security]\nnetwork = \"open\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.toml:2:"), "{err}");
        assert!(err.contains("allowlist"), "{err}");
        let err = crate::settings::parse("[agents.a]\n\nnetwork = \"host\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.toml:3:"), "{err}");
    }

    const UPSTREAM: &str = r#"
[agents.codex.upstreams.openai]
url = "https://api.example.test/v1"
header = "Authorization"
value = "Bearer ${localEnv:TEST_KEY}"
env = "OPENAI_BASE_URL"
"#;

    #[test]
    fn upstreams_resolve_their_value_on_the_host() {
        let s = parse(UPSTREAM);
        let lookup = |n: &str| (n == "TEST_KEY").then(|| "sk-secret-1".to_string());
        let ups = upstreams(&s, "codex", &lookup).unwrap();
        let up = ups.get("openai").unwrap();
        assert_eq!(up.value.to_str().unwrap(), "Bearer sk-secret-1");
        assert_eq!(
            ups.container_env(3128)["OPENAI_BASE_URL"],
            "http://127.0.0.1:3128/upstreams/openai"
        );
        assert!(
            !format!("{s:?}").contains("localEnv"),
            "Debug masks the value"
        );
        assert!(!format!("{ups:?}").contains("sk-secret-1"));
        assert!(upstreams(&s, "other", &lookup).unwrap().is_empty());
        check(&s).unwrap();
    }

    #[test]
    fn upstream_errors_are_located_and_never_show_the_value() {
        let s = parse(UPSTREAM);
        let err = upstreams(&s, "codex", &|_| None).unwrap_err().to_string();
        assert!(
            err.starts_with("c.toml:5:9: `agents.codex.upstreams.openai.value`"),
            "{err}"
        );
        assert!(err.contains("`TEST_KEY` is not set"), "{err}");
        let s = parse(&UPSTREAM.replace("https://", "http://"));
        let err = upstreams(&s, "codex", &|_| Some("sk-secret-2".into()))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.toml:3:7: `agents.codex.upstreams.openai.url`"),
            "{err}"
        );
        let s = parse(&UPSTREAM.replace("\"Authorization\"", "\"Bad Name\""));
        let err = upstreams(&s, "codex", &|_| Some("sk-secret-2".into()))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.toml:4:10: `agents.codex.upstreams.openai.header`"),
            "{err}"
        );
        assert!(!err.contains("sk-secret-2"), "{err}");
        let s = parse("[agents.codex.upstreams.x]\nurl = \"https://a.test\"\n");
        let err = upstreams(&s, "codex", &|_| None).unwrap_err().to_string();
        assert!(
            err.contains("`agents.codex.upstreams.x.header`: missing"),
            "{err}"
        );
    }

    #[test]
    fn requests_normalise_through_the_entry_syntax() {
        assert_eq!(
            normalise_request("API.example.test").unwrap(),
            "api.example.test:443"
        );
        assert_eq!(
            normalise_request("web.test:8080=127.0.0.1").unwrap(),
            "web.test:8080=127.0.0.1"
        );
        assert!(normalise_request("bad.test:0").is_err());
    }
}
