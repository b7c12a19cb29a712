//! `handoff --container ID` (spec-note 0521): hand a workspace to an agent in a container
//! devcell already created for it, named by the user, instead of the one the workspace's labels
//! find or a new one.
//!
//! The named container must be one devcell created ([`crate::names::PROFILE_LABEL`]), for this
//! workspace and configuration (its id labels are the handoff's), the one devcell uses for them
//! (no other container with the same labels wins), under the handoff's profile, and from the
//! configuration as it is now ([`crate::names::CONFIG_SHA256_LABEL`]). Anything else is refused
//! before a session, an image or a container exists; the handoff never creates one in its
//! place (`expect_existing_container`). The container is then reused as any handoff reuses
//! its workspace's container (re-checked against the profile and grants, spec-note 0270).

use crate::engine::{ContainerInfo, Engine};
use std::collections::BTreeMap;

use serde::Serialize;

use crate::handoff::context::AgentRuntime;
use crate::names::{CONFIG_FILE_LABEL, CONFIG_SHA256_LABEL, LOCAL_FOLDER_LABEL, PROFILE_LABEL};
use crate::ops::OpsError;
use crate::settings::Isolation;

/// The container the plan uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedContainer {
    /// `create`, `start` (exists, stopped) or `reuse` (running); `unknown` without an engine;
    /// `none` for the host runtime.
    pub action: String,
    /// The existing container's id.
    pub id: Option<String>,
    /// The labels that identify it.
    pub labels: BTreeMap<String, String>,
}

/// What the named container is checked against: what the handoff would use.
#[derive(Debug, Clone)]
pub struct Expected<'a> {
    /// The container the workspace's labels find (its id) and those labels.
    pub planned: &'a PlannedContainer,
    /// The profile the handoff runs under (`hardened`, `reference`).
    pub profile: &'a str,
    /// The `sha256:<hex>` of the configuration now (`None`: unreadable).
    pub config_sha256: Option<String>,
    /// The configuration is a Compose one (its containers are Compose's: not handed off by
    /// name).
    pub compose: bool,
}

/// `--container` with what it cannot go with: the host runtime (no container) and clone
/// isolation (a task gets its own container).
///
/// Errors: [`OpsError::Unsupported`] naming both flags.
pub fn refuse_combinations(
    container: Option<&str>,
    runtime: Option<AgentRuntime>,
    isolation: Isolation,
) -> Result<(), OpsError> {
    if container.is_none() {
        return Ok(());
    }
    if runtime == Some(AgentRuntime::Host) {
        return Err(OpsError::Unsupported {
            message: "`--container` names a container; `--runtime host` uses none".into(),
            hint: Some("drop `--runtime host` or `--container`".into()),
        });
    }
    if isolation == Isolation::Clone {
        return Err(OpsError::Unsupported {
            message: "`--container` cannot be used with `--isolation clone`: each clone task gets its own container".into(),
            hint: Some("drop `--container`, or hand off with `--isolation worktree`".into()),
        });
    }
    Ok(())
}

/// Checks the container `named` against what the handoff would use ([`judge`]).
///
/// Errors: [`OpsError::NamedContainer`] (refused or not found); the engine's.
pub async fn check(
    engine: Option<&dyn Engine>,
    named: &str,
    expected: &Expected<'_>,
) -> Result<(), OpsError> {
    let Some(engine) = engine else {
        return Err(refused(
            named,
            true,
            "no container engine answered to look it up".into(),
            "start the container engine, or drop `--container`".into(),
        ));
    };
    let info = engine.inspect_container(named).await?;
    judge(named, info.as_ref(), expected)
}

/// [`check`] in the plan: `planned` is the container the workspace's labels find, `compose`
/// whether the plan's configuration is a Compose one, `profile` the handoff's.
///
/// Errors: as [`check`].
pub(crate) async fn check_planned(
    engine: Option<&dyn Engine>,
    named: &str,
    planned: &PlannedContainer,
    compose: bool,
    profile: crate::settings::Profile,
) -> Result<(), OpsError> {
    let config_sha256 = planned
        .labels
        .get(CONFIG_FILE_LABEL)
        .and_then(|file| crate::ops::create::config_sha256(std::path::Path::new(file)));
    let expected = Expected {
        planned,
        profile: profile.as_str(),
        config_sha256,
        compose,
    };
    check(engine, named, &expected).await
}

/// The refusal of `named`, `found` or not.
fn refused(named: &str, found: bool, reason: String, hint: String) -> OpsError {
    OpsError::NamedContainer {
        container: named.to_string(),
        found,
        reason,
        hint,
    }
}

/// The first 12 characters of a container id, as `docker ps` shows it.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The named container (`info`, `None`: not found) judged against `expected`: each reason
/// to refuse, first one wins (see the module docs).
///
/// Errors: [`OpsError::NamedContainer`].
pub fn judge(
    named: &str,
    info: Option<&ContainerInfo>,
    expected: &Expected<'_>,
) -> Result<(), OpsError> {
    let Some(info) = info else {
        return Err(refused(
            named,
            false,
            "no such container".into(),
            "name a container `devcell status` or `docker ps -a` lists".into(),
        ));
    };
    if expected.compose {
        return Err(refused(
            named,
            true,
            "the configuration is a Docker Compose one: its containers are Compose's".into(),
            "drop `--container`: the handoff brings the Compose project up itself".into(),
        ));
    }
    let Some(profile) = info.labels.get(PROFILE_LABEL) else {
        return Err(refused(
            named,
            true,
            format!("devcell did not create it (it has no `{PROFILE_LABEL}` label)"),
            "name a container devcell created for this workspace (`devcell up` or an earlier handoff made it), or drop `--container`".into(),
        ));
    };
    for (key, wanted) in &expected.planned.labels {
        let has = info.labels.get(key).map(String::as_str).unwrap_or("");
        if has != wanted {
            let what = match key.as_str() {
                LOCAL_FOLDER_LABEL => "workspace",
                CONFIG_FILE_LABEL => "configuration",
                _ => "workspace or configuration",
            };
            return Err(refused(
                named,
                true,
                format!(
                    "it belongs to another {what}: its `{key}` is `{has}`, this handoff's is `{wanted}`"
                ),
                "name this workspace's container (`devcell status` shows it), or hand off the workspace it belongs to".into(),
            ));
        }
    }
    if let Some(used) = expected.planned.id.as_deref().filter(|u| *u != info.id) {
        return Err(refused(
            named,
            true,
            format!(
                "another container of this workspace, `{}`, is the one devcell uses",
                short(used)
            ),
            "name that container, or remove the other one first".into(),
        ));
    }
    if profile != expected.profile {
        return Err(refused(
            named,
            true,
            format!(
                "it was created under the `{profile}` profile; this handoff runs under `{}`",
                expected.profile
            ),
            format!(
                "hand off under `--security-profile {profile}`, or drop `--container` to have the container recreated under `{}` (after `devcell delete`)",
                expected.profile
            ),
        ));
    }
    let made_from = info.labels.get(CONFIG_SHA256_LABEL);
    if made_from.is_none() || made_from != expected.config_sha256.as_ref() {
        return Err(refused(
            named,
            true,
            format!(
                "its configuration changed since it was created (`{CONFIG_SHA256_LABEL}` is `{}`, the configuration's is `{}`)",
                made_from.map(String::as_str).unwrap_or("missing"),
                expected.config_sha256.as_deref().unwrap_or("unreadable"),
            ),
            "recreate it with `devcell up --remove-existing-container` and name the new one, or drop `--container`".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    fn planned() -> PlannedContainer {
        PlannedContainer {
            action: "reuse".into(),
            id: Some(ID.into()),
            labels: BTreeMap::from([
                (LOCAL_FOLDER_LABEL.into(), "/w".into()),
                (
                    CONFIG_FILE_LABEL.into(),
                    "/w/.devcontainer/devcontainer.json".into(),
                ),
            ]),
        }
    }

    fn devcells() -> ContainerInfo {
        let mut labels = planned().labels;
        labels.insert(PROFILE_LABEL.into(), "hardened".into());
        labels.insert(CONFIG_SHA256_LABEL.into(), "sha256:c".into());
        ContainerInfo {
            id: ID.into(),
            labels,
            ..ContainerInfo::default()
        }
    }

    fn reason(info: Option<&ContainerInfo>, expected: &Expected<'_>) -> String {
        match judge("mine", info, expected) {
            Err(OpsError::NamedContainer { reason, .. }) => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_this_workspaces_devcell_container_under_the_same_profile_and_configuration_passes() {
        let planned = planned();
        let expected = Expected {
            planned: &planned,
            profile: "hardened",
            config_sha256: Some("sha256:c".into()),
            compose: false,
        };
        judge("mine", Some(&devcells()), &expected).unwrap();

        let e = judge("gone", None, &expected).unwrap_err();
        assert_eq!(e.code(), crate::diagnostics::ErrorCode::NotFound);
        assert!(e.to_string().contains("`gone`"), "{e}");

        // made by someone else: the id labels alone (the reference CLI writes them) are not enough
        let mut other = devcells();
        other.labels.remove(PROFILE_LABEL);
        let r = reason(Some(&other), &expected);
        assert!(r.contains("devcell did not create it"), "{r}");

        let mut elsewhere = devcells();
        elsewhere
            .labels
            .insert(LOCAL_FOLDER_LABEL.into(), "/other".into());
        let r = reason(Some(&elsewhere), &expected);
        assert!(
            r.contains("another workspace") && r.contains("/other"),
            "{r}"
        );

        let mut twin = devcells();
        twin.id = "fedcba9876543210".into();
        let r = reason(Some(&twin), &expected);
        assert!(r.contains("`0123456789ab`"), "{r}");

        let mut reference = devcells();
        reference
            .labels
            .insert(PROFILE_LABEL.into(), "reference".into());
        let r = reason(Some(&reference), &expected);
        assert!(
            r.contains("`reference` profile") && r.contains("`hardened`"),
            "{r}"
        );

        let changed = Expected {
            config_sha256: Some("sha256:d".into()),
            ..expected.clone()
        };
        let r = reason(Some(&devcells()), &changed);
        assert!(r.contains("configuration changed"), "{r}");
        let mut old = devcells();
        old.labels.remove(CONFIG_SHA256_LABEL);
        let r = reason(Some(&old), &expected);
        assert!(r.contains("`missing`"), "{r}");

        let compose = Expected {
            compose: true,
            ..expected.clone()
        };
        assert!(reason(Some(&devcells()), &compose).contains("Compose"));
        let e = judge("mine", Some(&other), &expected).unwrap_err();
        assert_eq!(e.code(), crate::diagnostics::ErrorCode::InvalidArgument);
        assert!(crate::diagnostics::Hint::hint(&e).is_some());
    }

    #[test]
    fn container_goes_with_neither_the_host_runtime_nor_clone_isolation() {
        let host = Some(AgentRuntime::Host);
        assert!(refuse_combinations(Some("c"), host, Isolation::Worktree).is_err());
        assert!(refuse_combinations(Some("c"), None, Isolation::Clone).is_err());
        refuse_combinations(Some("c"), None, Isolation::Worktree).unwrap();
        refuse_combinations(None, host, Isolation::Clone).unwrap();
    }
}
