//! The named steps that make a new dev container, shared by `up` ([`crate::ops::up`]) and each
//! Compose service ([`crate::ops::compose_up`]): the merged configuration and the uid layer,
//! the provenance label of the Features, the user whose home is judged, the image's passwd,
//! the identity labels and state mounts, and, once the container runs, the uid check and the
//! lockfile.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::{metadata, substitute};
use crate::diagnostics::Warning;
use crate::engine::{ContainerInfo, ContainerSpec, Engine};
use crate::ops::error::Result;
use crate::ops::hooks::add_state_mounts;
use crate::ops::image::{PendingLock, PreparedImage};
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UpOptions;
use crate::ops::target::inspect;
use crate::ops::users::{
    Account, image_passwd, judge_unreadable_passwd, passwd_account, provides_user,
    update_remote_user_uid, verify_uids_inside,
};
use crate::progress::{Event, Reporter};
use crate::security::{self, Grants, PermissionRequest, PolicyInput, SecurityProfile};

/// The configuration merged with the image's metadata `entries` (`${devcontainerId}`
/// substituted), with `image` replaced by its uid layer when `updateRemoteUserUID` applies,
/// and the user devcell provides in that layer for a root image with no user named
/// (`container_user` reads the container user the configuration names from the merged value:
/// `containerUser`, `runArgs -u`, a Compose service's `user:`; spec-note 0188).
///
/// Errors: the engine's or the build's, from the uid layer.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn merged_with_uid_layer(
    engine: &dyn Engine,
    image: &mut PreparedImage,
    entries: &[Value],
    loaded: &LoadedConfiguration,
    devcontainer_id: &str,
    opts: &UpOptions,
    who: &UserChoice<'_>,
    reporter: &dyn Reporter,
) -> Result<(Value, Option<String>)> {
    let mut merged = metadata::merge_configuration(&loaded.value, entries);
    substitute::substitute_devcontainer_id(&mut merged, devcontainer_id);
    let container_user = (who.container_user)(&merged);
    let provide = provides_user(
        engine,
        who.profile,
        who.grants,
        &merged,
        container_user.as_deref(),
        image,
    )
    .await;
    let uid_update = update_remote_user_uid(
        engine,
        image,
        &merged,
        loaded,
        opts.update_remote_user_uid_default,
        provide,
        opts.build.network.clone().flatten().as_deref(),
        reporter,
    )
    .await?;
    if let Some(updated) = uid_update.image {
        *image = updated;
    }
    Ok((merged, uid_update.provided))
}

/// What decides whether devcell provides its own user ([`merged_with_uid_layer`]).
pub(crate) struct UserChoice<'a> {
    /// The profile in force.
    pub profile: &'a SecurityProfile,
    /// The user's grants (`--allow root` keeps root).
    pub grants: &'a Grants,
    /// The container user the configuration names, read from the merged configuration.
    pub container_user: &'a (dyn Fn(&Value) -> Option<String> + Sync),
}

/// The labels that say where a new container comes from: the user devcell `provided`
/// ([`provided_user_label`]), the digests of the Features of `lock` ([`feature_digests_label`]),
/// the profile and the configuration's hash ([`origin_labels`]).
pub(crate) fn provenance_labels(
    spec: &mut ContainerSpec,
    (provided, lock): (Option<&String>, Option<&PendingLock>),
    profile: &SecurityProfile,
    loaded: &LoadedConfiguration,
) {
    provided_user_label(spec, provided);
    feature_digests_label(spec, lock);
    origin_labels(spec, profile, loaded);
}

/// Marks a container made with the user devcell provided (spec-note 0188).
pub(crate) fn provided_user_label(spec: &mut ContainerSpec, provided: Option<&String>) {
    if let Some(user) = provided {
        spec.labels
            .insert(crate::names::PROVIDED_USER_LABEL.to_string(), user.clone());
    }
}

/// Marks a container devcell created: the profile it was created under and the hash of its
/// `devcontainer.json` ([`crate::names::PROFILE_LABEL`], [`crate::names::CONFIG_SHA256_LABEL`];
/// an unreadable file gets no hash, spec-note 0521).
pub(crate) fn origin_labels(
    spec: &mut ContainerSpec,
    profile: &SecurityProfile,
    loaded: &crate::ops::load::LoadedConfiguration,
) {
    spec.labels.insert(
        crate::names::PROFILE_LABEL.to_string(),
        profile.name().to_string(),
    );
    if let Some(hash) = config_sha256(&loaded.config_file) {
        spec.labels
            .insert(crate::names::CONFIG_SHA256_LABEL.to_string(), hash);
    }
}

/// `sha256:<hex>` of a `devcontainer.json`, read bounded as the configuration is (spec-note
/// 0433); `None` when it cannot be read.
pub(crate) fn config_sha256(path: &std::path::Path) -> Option<String> {
    let bytes =
        crate::config::bounded::read(path, crate::config::jsonc::MAX_FILE_BYTES as u64).ok()?;
    Some(crate::oci::digest::sha256_digest(&bytes))
}

/// The digests of the Features installed, for the audit and the handoff context (compared
/// with the lockfile; spec-note 0281).
pub(crate) fn feature_digests_label(spec: &mut ContainerSpec, lock: Option<&PendingLock>) {
    if let Some(lock) = lock {
        spec.labels.insert(
            security::audit::FEATURE_DIGESTS_LABEL.to_string(),
            lock.digests_label(),
        );
    }
}

/// The user whose home becomes a tmpfs under `hardened`, as the policy picks it: the remote
/// user, else the container's, else the image's, else `root`.
pub(crate) fn home_user(
    remote_user: Option<&String>,
    spec_user: Option<&String>,
    image_user: Option<&String>,
) -> String {
    remote_user
        .or(spec_user)
        .or(image_user)
        .cloned()
        .unwrap_or_else(|| "root".to_string())
}

/// The image's passwd, read once under `hardened` (`None` otherwise): the policy judges users
/// by the uid it gives them and the home tmpfs is owned by the remote user's ids (spec-notes
/// 0185, 0420).
pub(crate) async fn hardened_passwd(
    engine: &dyn Engine,
    hardened: bool,
    image: &PreparedImage,
) -> Option<String> {
    if hardened {
        image_passwd(engine, Some(&image.info), &image.reference).await
    } else {
        None
    }
}

/// The users a new container's request is judged with: the remote user the merged
/// configuration names, the user the container starts as by default (the image's `USER`, a
/// Compose service's `user:`), the image's passwd read under `hardened`, and the account there
/// of the user whose home is judged ([`home_user`]).
pub(crate) struct ImageUsers {
    /// The merged `remoteUser`.
    pub(crate) remote_user: Option<String>,
    /// The user the container starts as when the request names none.
    pub(crate) image_user: Option<String>,
    /// The image's `/etc/passwd` ([`hardened_passwd`]).
    pub(crate) passwd: Option<String>,
    /// The home user's account in that passwd.
    pub(crate) account: Option<Account>,
}

/// Reads the [`ImageUsers`] of a new container under `profile` (the passwd only under
/// `hardened`): `spec` is its request (naming a user or not), `image_user` the user it
/// otherwise starts as.
pub(crate) async fn image_users(
    engine: &dyn Engine,
    profile: &SecurityProfile,
    (image, merged): (&PreparedImage, &Value),
    spec: &ContainerSpec,
    image_user: Option<String>,
) -> ImageUsers {
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    let remote_user = metadata::ConfiguredUsers::of(merged).remote_user;
    let home_user = home_user(
        remote_user.as_ref(),
        spec.user.as_ref(),
        image_user.as_ref(),
    );
    let passwd = hardened_passwd(engine, hardened, image).await;
    let account = passwd
        .as_deref()
        .and_then(|p| passwd_account(p, &home_user));
    ImageUsers {
        remote_user,
        image_user,
        passwd,
        account,
    }
}

/// What the policy judges a new container's request `spec` with: who asked for what (the
/// image metadata `entries`, the command line's mounts, devcell's own), its users, the judged
/// places (the host workspace, the host home and the engine's socket, as
/// [`crate::ops::permissions::judged_places`] gives them) and the label keys the repository
/// sets.
pub(crate) fn policy_input(
    (opts, loaded, entries): (&UpOptions, &LoadedConfiguration, &[Value]),
    users: ImageUsers,
    (workspace, host_home, engine_socket): (PathBuf, Option<PathBuf>, Option<PathBuf>),
    repository_labels: Vec<String>,
    spec: ContainerSpec,
) -> PolicyInput {
    PolicyInput {
        origins: crate::ops::permissions::with_owned(
            crate::ops::permissions::origins(
                entries,
                &crate::ops::permissions::cli_mounts(opts, loaded),
            ),
            opts,
        ),
        remote_user: users.remote_user,
        image_user: users.image_user,
        remote_home: users.account.as_ref().map(|a| a.home.clone()),
        remote_ids: users.account.as_ref().map(|a| (a.uid, a.gid)),
        workspace,
        host_home,
        engine_socket,
        passwd: users.passwd,
        repository_labels,
        spec,
    }
}

/// Under `hardened`, the container's main process runs as numeric `uid:gid`
/// ([`crate::ops::exec_user::numeric_container_user`]): by name it would get every group the
/// image's `/etc/group` lists (attacks K10).
pub(crate) fn numeric_user_when_hardened(
    hardened: bool,
    spec: &mut ContainerSpec,
    input: &PolicyInput,
    loaded: &LoadedConfiguration,
) {
    if hardened {
        crate::ops::exec_user::numeric_container_user(
            spec,
            input.image_user.as_deref(),
            input.passwd.as_deref(),
            crate::ops::exec_user::workspace_gid(loaded),
        );
    }
}

/// The policy applied to `input`: its requests are the policy's followed by `more` (the named
/// volumes', the image label's host variables); under `hardened` an unreadable passwd is judged
/// with all of them.
///
/// Errors: [`crate::ops::OpsError::Security`] (refused: nothing was created).
pub(crate) fn apply_policy(
    profile: &SecurityProfile,
    grants: &Grants,
    input: &PolicyInput,
    more: impl IntoIterator<Item = PermissionRequest>,
    reporter: &dyn Reporter,
) -> Result<security::Applied> {
    let mut applied = security::apply(profile, input, grants)?;
    applied.requests.extend(more);
    for p in &applied.freed_ports {
        reporter.report(Event::Warning(freed_port_warning(p)));
    }
    if matches!(profile, SecurityProfile::Hardened(_)) {
        judge_unreadable_passwd(input, &applied, &applied.requests, grants, reporter)?;
    }
    Ok(applied)
}

/// Says that a loopback port the repository numbered is published from a free host port
/// ([`security::Applied::freed_ports`], spec-note 0431), where to see it and how to keep the
/// number.
fn freed_port_warning(p: &crate::engine::PortBinding) -> Warning {
    let address =
        security::policy::publish_address(p.host_ip.as_deref().unwrap_or_default(), p.host_port);
    Warning {
        location: None,
        message: format!(
            "the repository publishes container port {}/{} on `{address}`: published from a free \
             host port instead (a host service that is not running there would have its \
             clients talk to the container); `docker port <container>` shows it, \
             `--allow publish:{address}` keeps the number",
            p.container_port, p.protocol
        ),
    }
}

/// The labels that tie the container to its user and its judged host variables, and, under
/// `hardened`, devcell's state mounts: the remote user's uid, the host variables `exec` and
/// `run-user-commands` may use later (spec-note 0443).
pub(crate) fn identity_labels(
    spec: &mut ContainerSpec,
    account: Option<&Account>,
    hardened: bool,
    early_requests: &[PermissionRequest],
    label_requests: &[PermissionRequest],
) {
    if let Some(account) = account {
        spec.labels.insert(
            crate::names::REMOTE_UID_LABEL.to_string(),
            account.uid.to_string(),
        );
    }
    if hardened {
        spec.labels.insert(
            crate::names::HOST_ENV_LABEL.to_string(),
            security::reattach::host_env_label(&[early_requests, label_requests].concat()),
        );
        add_state_mounts(spec);
    }
}

/// What a new container is checked against once it runs.
pub(crate) struct Started<'a> {
    /// The container.
    pub(crate) id: &'a str,
    /// The user it starts as, as created.
    pub(crate) container_user: Option<&'a str>,
    /// The remote user the policy settled on.
    pub(crate) remote_user: Option<&'a str>,
    /// Its permission requests, with the grants' say.
    pub(crate) permissions: &'a [PermissionRequest],
    /// The grants.
    pub(crate) grants: &'a Grants,
    /// Under `hardened`.
    pub(crate) hardened: bool,
}

/// After the start: under `hardened`, what the users resolved to inside, before anything runs
/// in it (a uid 0 the policy did not grant removes the container; spec-note 0420); then the
/// lockfile, which changes only once the container exists (a refused or failed `up` leaves
/// the workspace as it was; spec-note 0280); then the container, inspected.
///
/// Errors: the uid check's; the inspect's, naming the container.
pub(crate) async fn verify_and_finish(
    engine: &dyn Engine,
    started: Started<'_>,
    pending_lock: Option<PendingLock>,
    opts: &UpOptions,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<ContainerInfo> {
    let id = started.id;
    if started.hardened {
        verify_uids_inside(
            engine,
            id,
            started.container_user,
            started.remote_user,
            started.permissions,
            started.grants,
        )
        .await?;
    }
    if let Some(lock) = pending_lock
        && let Some(w) = lock.finish(opts.lockfile, reporter)
    {
        warnings.push(w);
    }
    inspect(engine, id).await.map_err(|e| e.in_container(id))
}
