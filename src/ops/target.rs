//! Finding a target's dev container: load its configuration, its id labels, the container that
//! bears them, and the workspace folder it should mount.

use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, Engine, MountKind};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::{LoadOptions, LoadedConfiguration, load_configuration};
use crate::ops::options::TargetOptions;
use crate::security::{self, Grants};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Loads the configuration of `target` (see [`load_configuration`]) for a command without a
/// `--security-profile` (`exec`, `down`, `run-user-commands`): the repository's config file
/// is judged as under `hardened`, with no grant (spec-note 0400).
pub(crate) fn load(target: &TargetOptions) -> Result<LoadedConfiguration> {
    load_for(target, Some(Grants::default()))
}

/// [`load`], the configuration file judged first under `hardened` (`confine`: the user's
/// grants; [`LoadOptions::confine`], spec-note 0400).
pub(crate) fn load_for(
    target: &TargetOptions,
    confine: Option<Grants>,
) -> Result<LoadedConfiguration> {
    load_configuration(&LoadOptions {
        confine,
        workspace_folder: target.workspace_folder.clone(),
        config: target.config.clone(),
        mount_workspace_git_root: target.mount_workspace_git_root,
        env: target.env.clone(),
        workspace_override: target.workspace_override.clone(),
        override_config: target.override_config.clone(),
        additional_features: target.additional_features.clone(),
        mount_git_worktree_common_dir: target.mount_git_worktree_common_dir,
    })
}

/// The id labels: `--id-label`s when given, else the reference CLI's defaults.
pub(crate) fn id_labels(
    target: &TargetOptions,
    loaded: &LoadedConfiguration,
) -> BTreeMap<String, String> {
    if target.id_labels.is_empty() {
        crate::config::id::id_labels(&loaded.workspace_folder, &loaded.config_file)
    } else {
        target.id_labels.iter().cloned().collect()
    }
}

/// The first container carrying every id label that is not being removed and, when
/// `workspace` names the folders it must bind ([`expected_workspace`]), binds one of them
/// ([`security::identity::binds_workspace`]): a container claiming this workspace's labels
/// without its bind is never reused, and nothing is sent to it (spec-note 0421); each one
/// passed over is a warning in `warnings`.
pub(crate) async fn find_container(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
    workspace: Option<&[PathBuf]>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<ContainerInfo>> {
    let found = engine.find_containers(labels).await?;
    for summary in found.iter().filter(|c| c.state != "removing") {
        let Some(info) = engine.inspect_container(&summary.id).await? else {
            continue;
        };
        if let Some(folders) = workspace
            && !security::identity::binds_workspace(&info, folders)
        {
            let binds = security::identity::bind_sources(&info);
            let why = format!(
                "carries this workspace's labels but does not bind `{}` (its binds: {})",
                folders
                    .first()
                    .map(|f| f.display().to_string())
                    .unwrap_or_default(),
                if binds.is_empty() {
                    "none".to_string()
                } else {
                    binds.join(", ")
                },
            );
            warnings.push(passed_over(&info, &why));
            continue;
        }
        // the image's labels, read once per image id (spec-note 0421)
        let image = match (labels.is_empty(), info.image_id.is_empty()) {
            (false, false) => crate::ops::image_files::image_labels(engine, &info.image_id).await?,
            _ => None,
        };
        if !set_at_creation(&info.labels, labels, image.as_ref()) {
            warnings.push(passed_over(
                &info,
                "carries the labels asked for but no dev container label set when it was created (devcell and the reference CLI set `devcontainer.*`/`devcell.*` labels, which a repository cannot)",
            ));
            continue;
        }
        if claimed_by_its_image(labels, image.as_ref()) {
            let why = format!(
                "carries this workspace's labels only because its image `{}` does (they were not set when it was created), so it is not this workspace's container",
                info.image
            );
            warnings.push(passed_over(&info, &why));
            continue;
        }
        return Ok(Some(info));
    }
    Ok(None)
}

/// The warning for a container the lookup passed over: `container <id> <why>: it is not
/// used; remove it if it is not yours (docker rm -f <id>)`.
fn passed_over(info: &ContainerInfo, why: &str) -> Warning {
    let id = short(&info.id);
    Warning {
        location: None,
        message: format!(
            "container {id} {why}: it is not used; remove it if it is not yours (`docker rm -f {id}`)"
        ),
    }
}

/// Whether a container (its `own` labels) found by `labels` that include a key of the user's
/// own choosing (`--id-label`, outside the `devcontainer.*`/`devcell.*` namespaces a
/// repository cannot set: spec-note 0421) was made by devcell or the reference CLI for those
/// labels: it carries at least one label of those namespaces that its image (`image`, its
/// labels; `None`: unknown, none) does not give it (set when it was created; another
/// repository's Compose service can set any other label, attack 29 G2), and, when devcell
/// made it (a `devcell.*` label set at creation), the id labels devcell recorded at its
/// creation ([`crate::names::ID_LABELS_LABEL`]) hold every one of `labels` (another
/// repository's dev container given the key by its `runArgs`, attack 31 M3). Lookups by the
/// identity namespaces only are [`claimed_by_its_image`]'s.
fn set_at_creation(
    own: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
    image: Option<&BTreeMap<String, String>>,
) -> bool {
    if labels.keys().all(|k| crate::names::is_identity_label(k)) {
        return true;
    }
    let created = |k: &String, v: &String| image.and_then(|i| i.get(k)) != Some(v);
    if !own
        .iter()
        .any(|(k, v)| crate::names::is_identity_label(k) && created(k, v))
    {
        return false;
    }
    let made_by_devcell = own
        .iter()
        .any(|(k, v)| k.starts_with("devcell.") && created(k, v));
    if !made_by_devcell {
        return true;
    }
    let recorded: Option<BTreeMap<String, String>> = own
        .get(crate::names::ID_LABELS_LABEL)
        .filter(|v| created(&crate::names::ID_LABELS_LABEL.to_string(), v))
        .and_then(|v| serde_json::from_str(v).ok());
    recorded.is_some_and(|recorded| labels.iter().all(|(k, v)| recorded.get(k) == Some(v)))
}

/// Whether every one of `labels` (the identity labels a container was found by) is one its
/// image (`image`, its labels; `None`: unknown) gives every container made from it: Docker
/// merges an image's `LABEL`s into its containers', so any image (a Compose sidecar's built by
/// another repository) can claim a workspace; devcell and the reference CLI set the labels
/// when they create the container (attack 28, F4; spec-note 0421).
fn claimed_by_its_image(
    labels: &BTreeMap<String, String>,
    image: Option<&BTreeMap<String, String>>,
) -> bool {
    image.is_some_and(|image| {
        !labels.is_empty() && labels.iter().all(|(k, v)| image.get(k) == Some(v))
    })
}

/// A value for [`crate::names::CREATION_LABEL`] unique to this creation: the process, the
/// time and `devcontainer_id`, hashed (not a secret: a container that copies it after the
/// fact makes two, which [`created_container`] refuses).
pub(crate) fn creation_token(devcontainer_id: &str) -> String {
    use sha2::Digest as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!(
        "{}-{now}-{}-{devcontainer_id}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    hex::encode(&sha2::Sha256::digest(seed.as_bytes())[..16])
}

/// The one container, among `found` (the containers carrying `labels` and
/// [`crate::names::CREATION_LABEL`] = `token`), that devcell created with `token`: none is
/// `None`; more than one is an error, since a container that copied the label after the fact
/// cannot be told from ours, and nothing is sent to either.
///
/// Errors: [`OpsError::Unsupported`] when more than one carries `token`.
pub(crate) fn the_created<'a>(
    found: &'a [crate::engine::ContainerSummary],
    labels: &BTreeMap<String, String>,
    token: &str,
) -> Result<Option<&'a crate::engine::ContainerSummary>> {
    let ours: Vec<_> = found
        .iter()
        .filter(|c| c.state != "removing")
        .filter(|c| labels.iter().all(|(k, v)| c.labels.get(k) == Some(v)))
        .filter(|c| {
            c.labels
                .get(crate::names::CREATION_LABEL)
                .map(String::as_str)
                == Some(token)
        })
        .collect();
    match ours.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        many => Err(OpsError::Unsupported {
            message: format!(
                "{} containers carry the labels of the container devcell just created ({}, {}={token}): {}; none is used",
                many.len(),
                join_labels(labels),
                crate::names::CREATION_LABEL,
                many.iter().map(|c| short(&c.id)).collect::<Vec<_>>().join(", ")
            ),
            hint: Some(
                "another program copied the new container's labels; remove the containers that are not yours, then run `up` again".into(),
            ),
        }),
    }
}

/// The container devcell created with `token` ([`the_created`]) among those carrying
/// `labels`, inspected: found by the token, never by the labels alone, which another
/// container (slipped in while an old one was replaced, or forged by its image) may carry.
///
/// Errors: as [`the_created`]; the engine's.
pub(crate) async fn created_container(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
    token: &str,
) -> Result<Option<ContainerInfo>> {
    let mut filter = labels.clone();
    filter.insert(crate::names::CREATION_LABEL.to_string(), token.to_string());
    let found = engine.find_containers(&filter).await?;
    match the_created(&found, labels, token)? {
        Some(c) => Ok(engine.inspect_container(&c.id).await?),
        None => Ok(None),
    }
}

/// The host folders a container found by `target`'s id labels must bind to be this
/// workspace's: the workspace mount's source, the default mount root and the workspace folder
/// (a handoff binds its root at `/workspace`). `None` when the lookup is by `--id-label`s
/// (the user's own choice of identity) or the configuration has no bind workspace mount
/// (nothing to compare with; spec-note 0421).
pub(crate) fn expected_workspace(
    target: &TargetOptions,
    loaded: &LoadedConfiguration,
) -> Option<Vec<PathBuf>> {
    if !target.id_labels.is_empty() || target.no_configuration {
        return None;
    }
    let mount = loaded
        .workspace_mount()
        .ok()
        .flatten()
        .filter(|m| m.kind == MountKind::Bind)?;
    let mut folders: Vec<PathBuf> = mount.source.map(PathBuf::from).into_iter().collect();
    folders.push(loaded.workspace.host_mount_root.clone());
    folders.push(loaded.workspace_folder.clone());
    Some(folders)
}

pub(crate) async fn inspect(engine: &dyn Engine, id: &str) -> Result<ContainerInfo> {
    engine.inspect_container(id).await?.ok_or_else(|| {
        OpsError::Engine(crate::engine::EngineError::NoSuchContainer { id: id.to_string() })
    })
}

pub(crate) fn join_labels(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod creation_tests {
    use super::*;
    use crate::engine::ContainerSummary;

    fn container(id: &str, labels: &[(&str, &str)]) -> ContainerSummary {
        ContainerSummary {
            id: id.to_string(),
            state: "running".to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            ..Default::default()
        }
    }

    /// The `--remove-existing-container` window: while the old primary was being replaced, a
    /// container with the project's labels (or an image that forged them) appeared. It is not
    /// taken for the new one; one that copied the token too makes the result ambiguous, and
    /// then neither is used.
    #[test]
    fn the_created_container_is_found_by_its_token_not_by_its_labels() {
        let labels = BTreeMap::from([
            ("com.docker.compose.project".to_string(), "p".to_string()),
            ("com.docker.compose.service".to_string(), "app".to_string()),
        ]);
        let project = [
            ("com.docker.compose.project", "p"),
            ("com.docker.compose.service", "app"),
        ];
        let slipped_in = container("aaaa", &project);
        let token = creation_token("dcid");
        assert_ne!(token, creation_token("dcid"), "each creation has its own");
        let mut ours_labels = project.to_vec();
        ours_labels.push((crate::names::CREATION_LABEL, &token));
        let ours = container("bbbb", &ours_labels);
        let found = [slipped_in.clone(), ours.clone()];
        assert_eq!(
            the_created(&found, &labels, &token)
                .unwrap()
                .map(|c| c.id.as_str()),
            Some("bbbb")
        );
        assert!(
            the_created(&[slipped_in], &labels, &token)
                .unwrap()
                .is_none()
        );
        let copied = container("cccc", &ours_labels);
        let err = the_created(&[ours.clone(), copied], &labels, &token).unwrap_err();
        assert!(err.to_string().contains("2 containers"), "{err}");
        let mut gone = ours;
        gone.state = "removing".to_string();
        assert!(the_created(&[gone], &labels, &token).unwrap().is_none());
    }

    /// spec-note 0421 (attacks 28 F4, 29 G2): labels its image gives every container claim
    /// nothing; a lookup by a user's own label needs an identity label set at creation.
    #[test]
    fn image_labels_claim_nothing_and_a_user_label_needs_one_set_at_creation() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let ids = map(&[("devcontainer.local_folder", "/w")]);
        assert!(claimed_by_its_image(&ids, Some(&ids)));
        assert!(!claimed_by_its_image(&ids, Some(&map(&[]))));
        assert!(!claimed_by_its_image(&ids, None));
        let user = map(&[("owner", "w")]);
        let recorded = r#"{"owner":"w","team":"t"}"#;
        let own = map(&[
            ("owner", "w"),
            ("devcell.profile", "hardened"),
            ("devcell.id_labels", recorded),
        ]);
        assert!(set_at_creation(&own, &user, Some(&map(&[]))));
        assert!(set_at_creation(&own, &user, None));
        assert!(!set_at_creation(
            &own,
            &user,
            Some(&map(&[
                ("devcell.profile", "hardened"),
                ("devcell.id_labels", recorded)
            ]))
        ));
        // attack 31 M3: another workspace's dev container given the key by its `runArgs`
        let other = map(&[
            ("owner", "w"),
            ("devcell.profile", "hardened"),
            ("devcell.id_labels", r#"{"devcontainer.local_folder":"/x"}"#),
        ]);
        assert!(!set_at_creation(&other, &user, None));
        let unrecorded = map(&[("owner", "w"), ("devcell.profile", "hardened")]);
        assert!(!set_at_creation(&unrecorded, &user, None));
        // the reference CLI's container: its `devcontainer.*` label set at creation
        let reference = map(&[("owner", "w"), ("devcontainer.metadata", "[]")]);
        assert!(set_at_creation(&reference, &user, None));
        assert!(!set_at_creation(&map(&[("owner", "w")]), &user, None));
        assert!(
            set_at_creation(&map(&[]), &ids, None),
            "identity labels: the image decides"
        );
    }
}
