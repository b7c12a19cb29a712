//! Whether a stopped Compose project may be started as it is (spec-note 0681).
//!
//! `compose start` starts the containers that exist, with the mounts, users and commands they
//! were created with, in the dependency order of the files as they are now. devcell judges the
//! files as they are now, so a container made from other files (an agent in the container
//! edited them before `devcell down`, attack 30 H2) was judged by no one, and a sidecar first
//! in today's order may change what another container's old bind resolves to. A stopped
//! project is therefore started as it is only when every container of it is what the judged
//! files make, by Compose's own configuration hash; otherwise `up` goes the create way, where
//! Compose creates again each container whose configuration differs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::engine::compose::{CONFIG_HASH_LABEL, ONEOFF_LABEL, SERVICE_LABEL};
use crate::engine::{ContainerInfo, ContainerSummary, Engine};
use crate::ops::compose::{ComposeTarget, project_labels, recorded_files};
use crate::ops::error::Result;
use crate::ops::state_folder::StateFolder;
use crate::ops::target::short;

/// How a stopped project comes up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restart {
    /// Every container is what the judged files make: `compose start` with these files (the
    /// ones it was created with, devcell's override files among them).
    AsItIs(Vec<PathBuf>),
    /// Some container is not (the reason, for people): the project's containers are removed
    /// and it is brought up as a new one ([`remove_containers`]).
    Again(String),
}

/// How the project of the stopped primary container `info` comes up: [`Restart::AsItIs`] only
/// when the configuration names the files it was created with, every container of the
/// project carries Compose's hash of its service in those files as they are now, and no other
/// container binds a host path today's files do not ([`unjudged_binds`]).
///
/// Errors: the engine's; Compose's (`config --hash`).
pub(crate) async fn restart(
    engine: &dyn Engine,
    target: &ComposeTarget,
    info: &ContainerInfo,
    hardened: bool,
) -> Result<Restart> {
    let containers = engine
        .find_containers(&project_labels(&target.project.name))
        .await?;
    let sidecars = containers
        .iter()
        .filter(|c| c.id != info.id && !is_oneoff(c))
        .count();
    if hardened && sidecars > 0 {
        // What a sidecar keeps from its creation (its binds and volumes as they resolve now,
        // its place in the start order) is judged again by nothing short of creating it from
        // today's judged files: each narrower check was got round (attacks 32–34).
        return Ok(Restart::Again(format!(
            "under `hardened` its {sidecars} other container(s) are created from today's files, never started as they were made"
        )));
    }
    let mut others = Vec::new();
    for c in containers.iter().filter(|c| c.id != info.id) {
        others.extend(engine.inspect_container(&c.id).await?);
    }
    let again = Restart::Again;
    if let Some((_, reason)) = unjudged_binds(&target.model, info, &others).first() {
        return Ok(again(reason.clone()));
    }
    if let Some(reason) = swappable_primary_bind(target, info) {
        return Ok(again(reason));
    }
    let Some(recorded) = recorded_files(info) else {
        return Ok(again(
            "a file the project was created with is gone".to_string(),
        ));
    };
    let overrides = StateFolder::open_default()
        .map(|store| crate::ops::compose_builds::override_dir(&store, &target.project.name));
    if repository_files(&recorded, overrides.as_deref())
        != repository_files(&target.project.files, overrides.as_deref())
    {
        return Ok(again(
            "the configuration names other Compose files than the project was created with"
                .to_string(),
        ));
    }
    let hashes = target.with_files(recorded.clone()).config_hashes().await?;
    Ok(match diverged(&hashes, &containers) {
        Some(reason) => again(reason),
        None => Restart::AsItIs(recorded),
    })
}

/// Whether a container of the project may start before the stopped primary `info` and write
/// the folder above one of its binds (spec-note 0672's rule over the primary's binds as the
/// engine holds them, devcell's override binds among them, in today's start order): Compose's
/// hash leaves `depends_on` out, so the repository can reorder the start after the primary
/// was created, when the rule was decided for its `mounts` (attack 33, P1). The reason, for
/// people; `None` when no such pair exists (the model's own pairs were judged today).
fn swappable_primary_bind(target: &ComposeTarget, info: &ContainerInfo) -> Option<String> {
    let binds: Vec<(String, bool)> = info
        .mounts
        .iter()
        .filter(|m| m.kind == "bind")
        .map(|m| (m.source.clone(), !m.rw))
        .collect();
    let pairs = crate::security::compose::primary_bind_swaps(
        &crate::security::SecurityProfile::default(),
        &target.model,
        &target.service,
        &binds,
        &crate::security::Grants::default(),
    );
    pairs.first().map(|p| {
        format!(
            "another service may start before the primary and replace its bind source `{}` with a link",
            p.permission.value().unwrap_or_default()
        )
    })
}

/// Why the project's containers are created again when today's primary service has none
/// (`None` when the project has no container but `compose run` ones).
///
/// Errors: the engine's.
pub(crate) async fn left_without_primary(
    engine: &dyn Engine,
    target: &ComposeTarget,
) -> Result<Option<String>> {
    let left = engine
        .find_containers(&project_labels(&target.project.name))
        .await?
        .into_iter()
        .filter(|c| {
            c.labels
                .get(ONEOFF_LABEL)
                .is_none_or(|v| !v.eq_ignore_ascii_case("true"))
        })
        .count();
    Ok((left > 0).then(|| {
        format!("{left} container(s) of the project are left without today's primary service")
    }))
}

/// Removes every container of the project (`compose run` ones left out) with its anonymous
/// volumes, so that `compose up` creates each from today's judged files. Compose's own
/// re-creation (`--force-recreate`) would hand the new container whatever the old one had
/// mounted at a path today's files or the image make an anonymous volume, a bind included
/// (attack 35, R1), and each narrower check of what a container kept was got round.
///
/// Errors: the engine's.
pub(crate) async fn remove_containers(engine: &dyn Engine, target: &ComposeTarget) -> Result<()> {
    for c in engine
        .find_containers(&project_labels(&target.project.name))
        .await?
        .iter()
        .filter(|c| !is_oneoff(c))
    {
        engine.remove_container(&c.id, true).await?;
    }
    Ok(())
}

/// Whether `c` is a `compose run` container (which `start` never starts).
fn is_oneoff(c: &ContainerSummary) -> bool {
    c.labels
        .get(ONEOFF_LABEL)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The host paths today's judged `model` binds: its services' bind sources, and its
/// `secrets`' and `configs`' files (Compose binds them read-only; attack 32, N1).
fn judged_sources(model: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for service in model
        .get("services")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|s| s.values())
    {
        for volume in service
            .get("volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| v.get("type").and_then(Value::as_str) == Some("bind"))
        {
            out.extend(
                volume
                    .get("source")
                    .and_then(Value::as_str)
                    .map(String::from),
            );
        }
    }
    for top in ["secrets", "configs"] {
        for entry in model
            .get(top)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            out.extend(
                entry
                    .1
                    .get("file")
                    .and_then(Value::as_str)
                    .map(String::from),
            );
        }
    }
    out
}

/// The containers of `others` (a stopped project's, the primary `primary` left out) holding a
/// bind whose source is neither one today's judged `model` binds ([`judged_sources`]) nor
/// one of the primary's (judged again by `recheck_existing`; the sidecars repeat its
/// read-only covers): their ids, each with a reason for people. Compose's configuration hash
/// leaves the top-level `secrets:` and `configs:` out, so a sidecar created with a secret's
/// file that the repository has since renamed (the old path made a link to a host file)
/// passes the hash and would mount the host file again when it starts (attack 32, N1).
fn unjudged_binds(
    model: &Value,
    primary: &ContainerInfo,
    others: &[ContainerInfo],
) -> Vec<(String, String)> {
    let mut judged = judged_sources(model);
    judged.extend(
        primary
            .mounts
            .iter()
            .filter(|m| m.kind == "bind")
            .map(|m| m.source.clone()),
    );
    others
        .iter()
        .filter_map(|c| {
            let bind = c
                .mounts
                .iter()
                .find(|m| m.kind == "bind" && !judged.contains(&m.source))?;
            Some((
                c.id.clone(),
                format!(
                    "container {} binds `{}`, which today's files do not",
                    short(&c.id),
                    bind.source
                ),
            ))
        })
        .collect()
}

/// The files of `files` that are not devcell's override files (those in `overrides`), made
/// absolute as Compose records them.
fn repository_files(files: &[PathBuf], overrides: Option<&Path>) -> Vec<PathBuf> {
    files
        .iter()
        .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.clone()))
        .filter(|f| overrides.is_none_or(|dir| f.parent() != Some(dir)))
        .collect()
}

/// The first container of `containers` (a project's, `compose run` ones left out: `start`
/// never starts them) whose configuration hash is not `hashes`' for its service (a service
/// the files no longer have included), as a reason for people; `None` when all match.
fn diverged(hashes: &BTreeMap<String, String>, containers: &[ContainerSummary]) -> Option<String> {
    containers
        .iter()
        .filter(|c| {
            c.labels
                .get(ONEOFF_LABEL)
                .is_none_or(|v| !v.eq_ignore_ascii_case("true"))
        })
        .find_map(|c| {
            let service = c.labels.get(SERVICE_LABEL).map(String::as_str);
            let name = c.names.first().map_or(c.id.as_str(), String::as_str);
            match (service, c.labels.get(CONFIG_HASH_LABEL)) {
                (Some(service), Some(hash)) if hashes.get(service) == Some(hash) => None,
                (Some(service), _) if !hashes.contains_key(service) => Some(format!(
                    "container {name} is of service `{service}`, which the files no longer have"
                )),
                (Some(service), _) => Some(format!(
                    "container {name} of service `{service}` was created from other files than today's"
                )),
                (None, _) => Some(format!("container {name} names no service")),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, service: Option<&str>, hash: Option<&str>) -> ContainerSummary {
        let mut labels = BTreeMap::new();
        if let Some(s) = service {
            labels.insert(SERVICE_LABEL.to_string(), s.to_string());
        }
        if let Some(h) = hash {
            labels.insert(CONFIG_HASH_LABEL.to_string(), h.to_string());
        }
        ContainerSummary {
            id: format!("id-{name}"),
            names: vec![name.to_string()],
            image: String::new(),
            image_id: String::new(),
            state: "exited".to_string(),
            labels,
        }
    }

    fn hashes() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("app".to_string(), "h-app".to_string()),
            ("side".to_string(), "h-side".to_string()),
        ])
    }

    /// Attack 30 H2: a sidecar created from yesterday's files (another hash), one of a service
    /// the files dropped, and one with no hash are not started as they are; matching ones and
    /// `compose run` containers are.
    #[test]
    fn only_containers_of_todays_files_are_started_as_they_are() {
        let same = [
            container("p-app-1", Some("app"), Some("h-app")),
            container("p-side-1", Some("side"), Some("h-side")),
        ];
        assert_eq!(diverged(&hashes(), &same), None);
        let mut oneoff = container("p-side-run-1", Some("side"), Some("old"));
        oneoff
            .labels
            .insert(ONEOFF_LABEL.to_string(), "True".to_string());
        assert_eq!(diverged(&hashes(), &[oneoff]), None);
        let old = container("p-side-1", Some("side"), Some("h-old"));
        assert!(diverged(&hashes(), &[old]).unwrap().contains("p-side-1"));
        let gone = container("p-db-1", Some("db"), Some("h-db"));
        assert!(diverged(&hashes(), &[gone]).unwrap().contains("no longer"));
        let unhashed = container("p-app-1", Some("app"), None);
        assert!(diverged(&hashes(), &[unhashed]).is_some());
        assert!(diverged(&hashes(), &[container("x", None, Some("h-app"))]).is_some());
    }

    fn with_binds(id: &str, sources: &[&str]) -> ContainerInfo {
        ContainerInfo {
            id: id.to_string(),
            mounts: sources
                .iter()
                .map(|s| crate::engine::MountInfo {
                    kind: "bind".to_string(),
                    source: s.to_string(),
                    name: None,
                    destination: "/x".to_string(),
                    rw: false,
                })
                .collect(),
            ..ContainerInfo::default()
        }
    }

    /// Attack 32, N1: Compose's hash leaves the top-level `secrets:` out, so a sidecar whose
    /// secret's file the repository renamed since (the old path linked to a host file) binds a
    /// path today's files do not: it is created again, never started as it is. Binds of today's services,
    /// secrets and configs, and the primary's own (its covers, repeated read-only) are judged.
    #[test]
    fn a_sidecar_binding_what_todays_files_do_not_is_removed() {
        let model = serde_json::json!({
            "services": {
                "app": {"volumes": [{"type": "bind", "source": "/w", "target": "/workspace"}]},
                "side": {"secrets": ["s"]}
            },
            "secrets": {"s": {"file": "/w/other.txt"}},
            "configs": {"c": {"file": "/w/conf.txt"}}
        });
        let primary = with_binds("app", &["/w", "/w/.git/hooks"]);
        let fine = with_binds("side", &["/w/other.txt", "/w/conf.txt", "/w/.git/hooks"]);
        assert!(unjudged_binds(&model, &primary, std::slice::from_ref(&fine)).is_empty());
        let old = with_binds("side-old", &["/w/harmless.txt"]);
        let found = unjudged_binds(&model, &primary, &[fine, old]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "side-old");
        assert!(found[0].1.contains("/w/harmless.txt"), "{}", found[0].1);
    }

    /// devcell's override files (in the project's override folder) are not the repository's;
    /// the rest is compared as Compose records it, absolute.
    #[test]
    fn override_files_are_left_out_of_the_repositorys_files() {
        let dir = Path::new("/state/compose/p");
        let files = [
            PathBuf::from("/w/.devcontainer/compose.yml"),
            dir.join("docker-compose.devcell-0123.json"),
        ];
        assert_eq!(
            repository_files(&files, Some(dir)),
            vec![PathBuf::from("/w/.devcontainer/compose.yml")]
        );
        assert_eq!(repository_files(&files, None).len(), 2);
        assert_ne!(
            repository_files(&files[..1], Some(dir)),
            repository_files(&[PathBuf::from("/w/.devcontainer/other.yml")], Some(dir))
        );
    }
}
