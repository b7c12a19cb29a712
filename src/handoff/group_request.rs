//! `--group NAME` and `--cleanup on-exit|manual` as the user gives them (spec-note 0525): the
//! request a handoff's options carry, below [`crate::handoff::plan`] and
//! [`crate::handoff::group`], which both read it.

pub use crate::settings::{Cleanup, GroupName};

/// `--group NAME` with its `--cleanup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRequest {
    /// The group.
    pub name: GroupName,
    /// The policy asked for (the group's, once it exists: another one is refused).
    pub cleanup: Cleanup,
}

/// The handoff's group and policy: `--group NAME`, else `group` in `[agents.AGENT]`, else
/// in `[handoff]`; `--cleanup POLICY`, else `cleanup` in `[agents.AGENT]`, else in
/// `[handoff]`, else `manual` (each field on its own, as `isolation` is; spec-note 0525).
/// `None` when no group is named anywhere (a `--cleanup` alone then asks for nothing).
///
/// # Errors
/// [`crate::ops::OpsError::Unsupported`] for a bad name or policy given as a flag (those in
/// config.toml were checked when it was read).
pub fn resolve(
    group: Option<&str>,
    cleanup: Option<&str>,
    settings: &crate::settings::Settings,
    agent: &str,
) -> Result<Option<GroupRequest>, crate::ops::OpsError> {
    let bad = |message: String| crate::ops::OpsError::Unsupported {
        message,
        hint: None,
    };
    let agent = settings.agents.get(agent);
    let name = match group {
        Some(name) => GroupName::try_from(name.to_string()).map_err(bad)?,
        None => match agent
            .and_then(|a| a.group.clone())
            .or_else(|| settings.handoff.group.clone())
        {
            Some(name) => name,
            None => return Ok(None),
        },
    };
    let cleanup = match cleanup {
        Some(policy) => policy.parse().map_err(bad)?,
        None => agent
            .and_then(|a| a.cleanup)
            .or(settings.handoff.cleanup)
            .unwrap_or_default(),
    };
    Ok(Some(GroupRequest { name, cleanup }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Settings, parse};

    fn settings(toml: &str) -> Settings {
        parse(toml, std::path::Path::new("config.toml")).unwrap()
    }

    fn resolved(flags: (Option<&str>, Option<&str>), s: &Settings) -> Option<(String, Cleanup)> {
        resolve(flags.0, flags.1, s, "codex")
            .unwrap()
            .map(|r| (r.name.to_string(), r.cleanup))
    }

    #[test]
    fn the_flag_wins_over_the_agents_setting_which_wins_over_handoffs() {
        let both = settings(
            "[handoff]\ngroup = \"all\"\ncleanup = \"on-exit\"\n\
             [agents.codex]\ngroup = \"mine\"\ncleanup = \"manual\"\n",
        );
        assert_eq!(
            resolved((None, None), &both),
            Some(("mine".into(), Cleanup::Manual))
        );
        assert_eq!(
            resolved((Some("flag"), Some("on-exit")), &both),
            Some(("flag".into(), Cleanup::OnExit))
        );
        // each field on its own: the flag's name with the agent's policy
        assert_eq!(
            resolved((Some("flag"), None), &both),
            Some(("flag".into(), Cleanup::Manual))
        );
        // another agent gets `[handoff]`'s
        assert_eq!(
            resolve(None, None, &both, "other").unwrap(),
            Some(GroupRequest {
                name: GroupName::try_from("all".to_string()).unwrap(),
                cleanup: Cleanup::OnExit
            })
        );
        let global =
            settings("[handoff]\ngroup = \"all\"\n[agents.codex]\ncleanup = \"on-exit\"\n");
        assert_eq!(
            resolved((None, None), &global),
            Some(("all".into(), Cleanup::OnExit))
        );
        assert_eq!(
            resolved((None, Some("manual")), &global),
            Some(("all".into(), Cleanup::Manual))
        );
    }

    #[test]
    fn no_group_anywhere_is_none_and_a_cleanup_alone_asks_nothing() {
        let s = settings("[handoff]\ncleanup = \"on-exit\"\n");
        assert_eq!(resolved((None, None), &s), None);
        assert_eq!(
            resolved((None, Some("on-exit")), &Settings::default()),
            None
        );
        assert_eq!(
            resolved((Some("g"), None), &Settings::default()),
            Some(("g".into(), Cleanup::Manual))
        );
    }

    #[test]
    fn bad_names_and_policies_are_errors_where_they_are_written() {
        assert!(resolve(Some(".x"), None, &Settings::default(), "codex").is_err());
        assert!(resolve(Some("g"), Some("never"), &Settings::default(), "codex").is_err());
        let err = parse(
            "[handoff]\ngroup = \"-bad\"\n",
            std::path::Path::new("config.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("config.toml:2:"), "{err}");
        assert!(err.contains("invalid group name"), "{err}");
        let err = parse(
            "[agents.a]\ncleanup = \"always\"\n",
            std::path::Path::new("config.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("config.toml:2:"), "{err}");
    }
}
