//! The user's security choices, resolved once: the flags ([`SecurityOptions`]), the agent's
//! `[agents.NAME]` settings and the `[security]` table meet here, through one fallback chain,
//! in a [`Choice`] that every operation receives (spec-note 0207).
//!
//! The chain, for each choice: the flag, else the agent's setting (a handoff names its agent),
//! else `[security]` as written, else the command's default. Only the network's default
//! differs between commands: `up` keeps the reference CLI's network ([`UP_NETWORK`]), a
//! handoff is closed ([`HANDOFF_NETWORK`], spec-note 0202). Profile and network strings are
//! parsed where they enter (clap, serde in `settings`), never here or after.

use crate::settings::{NetworkMode, Profile, Settings};

use super::{Grants, ProfileLimits, SecurityError, SecurityProfile};

/// The network of `up` (and `build`, `set-up`) when nothing is chosen: the engine's default,
/// as the reference CLI.
pub const UP_NETWORK: NetworkMode = NetworkMode::Default;
/// The network of a handoff when nothing is chosen: `none` (default-deny, spec-note 0202).
pub const HANDOFF_NETWORK: NetworkMode = NetworkMode::None;

/// The smallest memory limit the engine accepts (Docker: 6 MiB).
pub const MIN_MEMORY_BYTES: i64 = 6 << 20;
/// The CPU limit's range in CPUs (Docker's granularity is 0.01; the upper bound only keeps
/// the value in range, the engine refuses more CPUs than its host has).
pub const CPUS_RANGE: std::ops::RangeInclusive<f64> = 0.01..=4096.0;

/// Security choices of the user (flags); the user settings file fills what is not given.
#[derive(Debug, Clone, Default)]
pub struct SecurityOptions {
    /// `--security-profile hardened|reference`.
    pub profile: Option<Profile>,
    /// `--allow …` grants (repeatable), added to the settings file's `allow`.
    pub allow: Vec<String>,
    /// `--pids-limit`.
    pub pids_limit: Option<i64>,
    /// `--memory` (bytes with optional `k`/`m`/`g`/`t` suffix).
    pub memory: Option<String>,
    /// `--cpus`.
    pub cpus: Option<f64>,
    /// `--network default|none|allowlist`.
    pub network: Option<NetworkMode>,
    /// `--egress-allow DEST` (repeatable): allowlist entries added to the settings' `egress`
    /// under `--network allowlist` (spec-note 0502).
    pub egress_allow: Vec<String>,
    /// The agent whose `[agents.NAME]` settings (`profile`, `network`, `egress`, `upstreams`)
    /// apply (`handoff`; `None` for `up`).
    pub agent: Option<String>,
}

/// What the user chose, resolved once from flags, the agent's settings and `[security]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The profile, with [`Choice::limits`] under `hardened`.
    pub profile: SecurityProfile,
    /// The container's network.
    pub network: NetworkMode,
    /// The grants: `[security] allow`, then the `--allow` flags (never the repository's).
    pub grants: Grants,
    /// The resource limits, checked under every profile (a bad value is an error even where
    /// it is not applied); applied under `hardened`.
    pub limits: ProfileLimits,
}

/// A resource limit (`--pids-limit`, `--memory`, `--cpus` or its `[security]` setting) is
/// out of range or malformed (the operations' error keeps it as it is).
#[derive(Debug, thiserror::Error)]
#[error("invalid {what} `{value}`: {expected}")]
pub struct InvalidLimit {
    /// Which limit, naming the flag and setting.
    pub what: String,
    /// The value given.
    pub value: String,
    /// What is accepted.
    pub expected: String,
}

/// A choice that cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    /// A resource limit is out of range or malformed.
    #[error(transparent)]
    InvalidLimit(InvalidLimit),
    /// A grant is not known.
    #[error(transparent)]
    Security(#[from] SecurityError),
}

impl Choice {
    /// Resolves every choice of `flags` through the one chain (flag, the agent's setting,
    /// `[security]`, the default); `default_network` is the command's ([`UP_NETWORK`],
    /// [`HANDOFF_NETWORK`]).
    ///
    /// Errors: [`ChoiceError::InvalidLimit`], [`ChoiceError::Security`] for an unknown grant.
    pub fn resolve(
        flags: &SecurityOptions,
        settings: &Settings,
        default_network: NetworkMode,
    ) -> Result<Choice, ChoiceError> {
        let limits = limits(flags, settings)?;
        let profile = SecurityProfile::with_limits(profile(flags, settings), limits);
        standing_grants_name_their_host_command(&settings.security.allow)?;
        standing_grants_name_no_service(&settings.security.allow)?;
        standing_grants_name_no_variable(&settings.security.allow)?;
        let mut grants = Grants::parse(&settings.security.allow)?;
        for value in &flags.allow {
            grants.add(value)?;
        }
        Ok(Choice {
            profile,
            network: network(flags, settings, default_network),
            grants,
            limits,
        })
    }

    /// Whether the container gets devcell's egress channel (`allowlist`).
    pub fn is_allowlist(&self) -> bool {
        self.network == NetworkMode::Allowlist
    }
}

/// Refuses a bare `host-command` among the settings file's grants: a grant that stays must be
/// bound to the command it granted (`host-command:sha256:<hex>`), or a repository, or an agent
/// that can write the configuration, would change the command and still be granted (issue
/// 25; spec-note 0410). `--allow host-command` on the command line is one run's decision and
/// keeps granting that run's commands.
///
/// Errors: [`SecurityError::InvalidGrant`].
fn standing_grants_name_their_host_command(allow: &[String]) -> Result<(), SecurityError> {
    match allow.iter().find(|v| v.as_str() == "host-command") {
        Some(value) => Err(SecurityError::InvalidGrant {
            value: value.clone(),
            message: "a standing grant in the settings file must name the command it grants: \
                      `host-command:sha256:<hex>`, as the refusal shows it (so a changed \
                      command is asked again); `--allow host-command` on the command line \
                      grants one run"
                .into(),
        }),
        None => Ok(()),
    }
}

/// The grants keyed on a Compose service's name (or on no name at all) that give a container
/// root-equivalent reach into what it mounts: a standing one would cover every repository
/// that names a service so (attack H4: `keep_image_user=db` kept for one's own database gave
/// another repository's `db` root over the workspace). They are one run's decision, on the
/// command line.
const SERVICE_KEYED_GRANTS: &[&str] = &[
    "runtime-option:keep_image_user=",
    "runtime-option:compose_hook=",
    "runtime-option:group_add=",
    "namespace:volumes_from:",
];

/// Refuses a [`SERVICE_KEYED_GRANTS`] grant among the settings file's (spec-note 0611).
///
/// Errors: [`SecurityError::InvalidGrant`].
fn standing_grants_name_no_service(allow: &[String]) -> Result<(), SecurityError> {
    match allow
        .iter()
        .find(|v| SERVICE_KEYED_GRANTS.iter().any(|p| v.starts_with(p)))
    {
        Some(value) => Err(SecurityError::InvalidGrant {
            value: value.clone(),
            message: format!(
                "a grant keyed on a Compose service's name cannot stand in the settings file: \
                 it would apply to every repository that names a service so; give it for the \
                 run that needs it, `--allow {value}`"
            ),
        }),
        None => Ok(()),
    }
}

/// Refuses, among the settings file's grants, a `registry:` or `runtime-option:build_fetch=`
/// grant holding a `$`: a host only the builder decides (a variable devcell cannot expand), so
/// a grant that stood would let whatever value the repository or agent gives it later be
/// fetched from (attack 23, N20). It is one run's decision, on the command line.
///
/// Errors: [`SecurityError::InvalidGrant`].
fn standing_grants_name_no_variable(allow: &[String]) -> Result<(), SecurityError> {
    match allow.iter().find(|v| {
        (v.starts_with("registry:") || v.starts_with("runtime-option:build_fetch="))
            && v.contains('$')
    }) {
        Some(value) => Err(SecurityError::InvalidGrant {
            value: value.clone(),
            message: format!(
                "a grant of a host only the build decides (it holds a variable) cannot stand in \
                 the settings file: the variable's value may change after the grant; give it \
                 for the run that needs it, `--allow {value}`"
            ),
        }),
        None => Ok(()),
    }
}

/// The agent's settings named by `flags`, if any.
fn agent<'s>(
    flags: &SecurityOptions,
    settings: &'s Settings,
) -> Option<&'s crate::settings::AgentSettings> {
    flags.agent.as_deref().and_then(|a| settings.agents.get(a))
}

/// The profile: `--security-profile`, else the agent's `profile`, else `[security] profile`
/// (default `hardened`).
pub fn profile(flags: &SecurityOptions, settings: &Settings) -> Profile {
    flags
        .profile
        .or_else(|| agent(flags, settings).and_then(|a| a.profile))
        .unwrap_or(settings.security.profile)
}

/// The network: `--network`, else the agent's `network`, else `[security] network` as
/// written, else `default_network` (the command's).
pub fn network(
    flags: &SecurityOptions,
    settings: &Settings,
    default_network: NetworkMode,
) -> NetworkMode {
    flags
        .network
        .or_else(|| agent(flags, settings).and_then(|a| a.network))
        .or(settings.security.network)
        .unwrap_or(default_network)
}

/// The `hardened` profile's limits: each flag (`--pids-limit`, `--memory`, `--cpus`), else
/// the `[security]` setting (`pids_limit`, `memory`, `cpus`; defaults 1024, `4g`, 2).
///
/// Errors: [`ChoiceError::InvalidLimit`] for a pids limit below 1, a memory size that is not
/// bytes with an optional `k`/`m`/`g`/`t` suffix or is below 6 MiB, or CPUs outside
/// [`CPUS_RANGE`].
pub fn limits(flags: &SecurityOptions, settings: &Settings) -> Result<ProfileLimits, ChoiceError> {
    let invalid = |what: &str, value: String, expected: &str| {
        ChoiceError::InvalidLimit(InvalidLimit {
            what: what.to_string(),
            value,
            expected: expected.to_string(),
        })
    };
    let pids = flags.pids_limit.unwrap_or(settings.security.pids_limit);
    if pids < 1 {
        return Err(invalid(
            "pids limit (`--pids-limit`, `[security] pids_limit`)",
            pids.to_string(),
            "expected a whole number of processes, at least 1",
        ));
    }
    let memory_text = flags
        .memory
        .clone()
        .unwrap_or_else(|| settings.security.memory.clone());
    let memory_what = "memory limit (`--memory`, `[security] memory`)";
    let memory = crate::settings::parse_size(&memory_text)
        .and_then(|m| i64::try_from(m).ok())
        .ok_or_else(|| {
            invalid(
                memory_what,
                memory_text.clone(),
                "expected bytes with an optional `k`, `m`, `g` or `t` suffix (powers of 1024), e.g. `4g`",
            )
        })?;
    if memory < MIN_MEMORY_BYTES {
        return Err(invalid(
            memory_what,
            memory_text,
            "expected at least `6m` (the engine's minimum)",
        ));
    }
    let cpus = flags.cpus.unwrap_or(settings.security.cpus);
    if !CPUS_RANGE.contains(&cpus) {
        return Err(invalid(
            "CPU limit (`--cpus`, `[security] cpus`)",
            cpus.to_string(),
            "expected a number of CPUs from 0.01 to 4096, e.g. `2` or `1.5`",
        ));
    }
    Ok(ProfileLimits {
        pids,
        memory_bytes: memory,
        nano_cpus: (cpus * 1e9).round() as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn settings(toml: &str) -> Settings {
        crate::settings::parse(toml, Path::new("config.toml")).unwrap()
    }

    fn flags(network: Option<NetworkMode>, agent: Option<&str>) -> SecurityOptions {
        SecurityOptions {
            network,
            agent: agent.map(str::to_string),
            ..SecurityOptions::default()
        }
    }

    #[test]
    fn nothing_chosen_up_is_open_and_a_handoff_is_closed() {
        let s = settings("[agents.a]\ncommand = [\"a\"]\n");
        assert_eq!(
            network(&flags(None, None), &s, UP_NETWORK),
            NetworkMode::Default
        );
        assert_eq!(
            network(&flags(None, Some("a")), &s, HANDOFF_NETWORK),
            NetworkMode::None
        );
        // the `[security]` defaults written nowhere do not open a handoff
        assert_eq!(Settings::default().security.network, None);
    }

    #[test]
    fn the_network_chain_is_flag_agent_security_default() {
        let s = settings(
            "[security]\nnetwork = \"allowlist\"\n[agents.a]\ncommand = [\"a\"]\nnetwork = \"default\"\n[agents.b]\ncommand = [\"b\"]\n",
        );
        let none = Some(NetworkMode::None);
        // the flag wins over everything
        assert_eq!(
            network(&flags(none, Some("a")), &s, UP_NETWORK),
            NetworkMode::None
        );
        // the agent's over `[security]`
        assert_eq!(
            network(&flags(None, Some("a")), &s, HANDOFF_NETWORK),
            NetworkMode::Default
        );
        // `[security]` as written over the command's default, for `up` and a handoff alike
        assert_eq!(
            network(&flags(None, Some("b")), &s, HANDOFF_NETWORK),
            NetworkMode::Allowlist
        );
        assert_eq!(
            network(&flags(None, None), &s, UP_NETWORK),
            NetworkMode::Allowlist
        );
        // `up` names no agent: an agent's network never reaches it
        let only_agent = settings("[agents.a]\ncommand = [\"a\"]\nnetwork = \"none\"\n");
        assert_eq!(
            network(&flags(None, None), &only_agent, UP_NETWORK),
            NetworkMode::Default
        );
    }

    #[test]
    fn the_profile_chain_is_flag_agent_security_hardened() {
        let s = settings(
            "[security]\nprofile = \"reference\"\n[agents.a]\ncommand = [\"a\"]\nprofile = \"hardened\"\n",
        );
        assert_eq!(profile(&flags(None, None), &s), Profile::Reference);
        assert_eq!(profile(&flags(None, Some("a")), &s), Profile::Hardened);
        let flag = SecurityOptions {
            profile: Some(Profile::Reference),
            agent: Some("a".into()),
            ..SecurityOptions::default()
        };
        assert_eq!(profile(&flag, &s), Profile::Reference);
        assert_eq!(
            profile(&flags(None, None), &Settings::default()),
            Profile::Hardened
        );
    }

    #[test]
    fn resolve_puts_the_limits_in_hardened_and_joins_the_grants() {
        let s = settings("[security]\nallow = [\"cap:SYS_PTRACE\"]\npids_limit = 64\n");
        let choice = Choice::resolve(
            &SecurityOptions {
                allow: vec!["root".into()],
                ..SecurityOptions::default()
            },
            &s,
            UP_NETWORK,
        )
        .unwrap();
        assert_eq!(choice.limits.pids, 64);
        assert_eq!(choice.profile, SecurityProfile::Hardened(choice.limits));
        assert!(choice.grants.root);
        assert!(choice.grants.capabilities.contains("SYS_PTRACE"));
        assert_eq!(choice.network, NetworkMode::Default);
        assert!(!choice.is_allowlist());
        // a bad limit is an error under `reference` too
        let bad = SecurityOptions {
            profile: Some(Profile::Reference),
            pids_limit: Some(0),
            ..SecurityOptions::default()
        };
        assert!(matches!(
            Choice::resolve(&bad, &s, UP_NETWORK),
            Err(ChoiceError::InvalidLimit(_))
        ));
    }

    #[test]
    fn config_toml_names_are_checked_when_read() {
        for (toml, expected) in [
            (
                "[security]\nprofile = \"strict\"\n",
                "`hardened` or `reference`",
            ),
            ("[agents.a]\nprofile = \"x\"\n", "`hardened` or `reference`"),
            (
                "[security]\nnetwork = \"bridge\"\n",
                "`default`, `none` or `allowlist`",
            ),
        ] {
            let err = crate::settings::parse(toml, Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("c.toml:2:"), "{err}");
            assert!(err.contains(expected), "{err}");
        }
    }

    /// `value` in config.toml's `[security] allow` is refused, naming the `--allow` form; the
    /// same grant as `--allow` is accepted.
    fn refused_standing_accepted_as_a_flag(value: &str) {
        let mut settings = Settings::default();
        settings.security.allow = vec![value.into()];
        let e = Choice::resolve(&SecurityOptions::default(), &settings, UP_NETWORK).unwrap_err();
        let ChoiceError::Security(SecurityError::InvalidGrant { message, .. }) = &e else {
            panic!("{e:?}");
        };
        assert!(message.contains(&format!("--allow {value}")), "{message}");
        let flags = SecurityOptions {
            allow: vec![value.into()],
            ..SecurityOptions::default()
        };
        Choice::resolve(&flags, &Settings::default(), UP_NETWORK).unwrap();
    }

    /// Attack H4: a standing `keep_image_user=db` (and the other service-keyed grants) would
    /// cover another repository's `db`: refused in the settings file, naming the command-line
    /// form; the same grant on the command line is accepted.
    #[test]
    fn a_standing_grant_keyed_on_a_service_name_is_refused() {
        for value in [
            "runtime-option:keep_image_user=db",
            "runtime-option:compose_hook=post_start",
            "runtime-option:group_add=db:6",
            "namespace:volumes_from:app",
        ] {
            refused_standing_accepted_as_a_flag(value);
        }
    }

    /// Attack 23, N20: a standing `build_fetch=${SRC}` (or `registry:${reg}`) pinned no host:
    /// the agent's later value for the variable was fetched from. Refused in the settings
    /// file, naming the command-line form, which is accepted; a pinned host stands.
    #[test]
    fn a_standing_grant_of_a_host_holding_a_variable_is_refused() {
        for value in [
            "runtime-option:build_fetch=${SRC}",
            "runtime-option:build_fetch=app:$SRC",
            "registry:${reg:-docker.io}",
        ] {
            refused_standing_accepted_as_a_flag(value);
        }
        let mut settings = Settings::default();
        settings.security.allow = vec![
            "runtime-option:build_fetch=127.0.0.1:18423".into(),
            "registry:docker.io".into(),
        ];
        Choice::resolve(&SecurityOptions::default(), &settings, UP_NETWORK).unwrap();
    }

    /// A bare `host-command` in the settings file would grant whatever command the
    /// configuration names later: refused, naming the bound form; a bound one and the command
    /// line's bare one are accepted (issue 25, spec-note 0410).
    #[test]
    fn a_standing_host_command_grant_must_name_its_command() {
        let mut settings = Settings::default();
        settings.security.allow = vec!["host-command".into()];
        let e = Choice::resolve(&SecurityOptions::default(), &settings, UP_NETWORK).unwrap_err();
        assert!(e.to_string().contains("host-command"), "{e}");
        let ChoiceError::Security(SecurityError::InvalidGrant { message, .. }) = &e else {
            panic!("{e:?}");
        };
        assert!(message.contains("host-command:sha256:"), "{message}");

        let digest = crate::security::permissions::host_command_digest("true");
        settings.security.allow = vec![format!("host-command:sha256:{digest}")];
        let flags = SecurityOptions {
            allow: vec!["host-command".into()],
            ..SecurityOptions::default()
        };
        let choice = Choice::resolve(&flags, &settings, UP_NETWORK).unwrap();
        assert!(choice.grants.host_command);
        assert!(choice.grants.host_commands.contains(&digest));
    }
}
