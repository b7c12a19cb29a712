//! The user every process devcell starts in a `hardened` container runs as: explicit numeric
//! `uid:gid` (spec-note 0400, "the image's groups"). A user given to the engine by name (or as
//! a bare uid) also gets every supplementary group the image's `/etc/group` lists for it, and
//! the repository writes that file: a group such as `disk` (gid 6) lets the agent leave a
//! set-gid `disk` executable in the host workspace. With `uid:gid` the engine adds no
//! supplementary groups; extra groups stay a request (`runtime-option:group_add=...`).

use crate::engine::{ContainerInfo, Engine};
use crate::ops::load::LoadedConfiguration;

/// Whether `container` was created under `hardened` (its [`crate::names::PROFILE_LABEL`];
/// devcell sets that label itself and an image's copy is not carried under `hardened`, so a
/// forged label can only make the ids stricter).
pub(crate) fn is_hardened(container: &ContainerInfo) -> bool {
    container
        .labels
        .get(crate::names::PROFILE_LABEL)
        .is_some_and(|p| p == "hardened")
}

/// The primary group a process of `uid` gets: the passwd's `gid` when it is the user's own
/// group (equal to its uid, or to the workspace owner's gid, which the uid update gave it),
/// else the workspace owner's gid (else the uid; never 0 for a non-root user). A primary gid the image names otherwise
/// (0, or a host-meaningful group such as 6 `disk`) is the image's choice, not the user's: it
/// is replaced, never kept unasked.
pub fn judged_gid(uid: u32, gid: u32, workspace_gid: Option<u32>) -> u32 {
    // group 0 only for root: a set-gid file of group 0 is a set-gid-root file on the host
    if gid == uid || (gid != 0 && Some(gid) == workspace_gid) {
        return gid;
    }
    workspace_gid.filter(|g| *g != 0).unwrap_or(uid)
}

/// The numeric `uid:gid` the engine is to run `user` (a name, a uid, or `uid:gid`) as, looked
/// up in the image's `passwd` text; `None` when the user cannot be found (the engine then
/// resolves, or refuses, the name itself; the uid check after creation still judges it).
pub fn numeric_user(
    passwd: Option<&str>,
    user: &str,
    workspace_gid: Option<u32>,
) -> Option<String> {
    let (name, _) = user.split_once(':').unwrap_or((user, ""));
    let (uid, gid) = match (
        name.parse::<u32>(),
        passwd.and_then(|p| crate::ops::users::passwd_account(p, name)),
    ) {
        (_, Some(account)) => (account.uid, account.gid),
        (Ok(uid), None) => (uid, uid),
        (Err(_), None) => return None,
    };
    Some(format!("{uid}:{}", judged_gid(uid, gid, workspace_gid)))
}

/// The workspace owner's gid for `loaded` (the ids the uid update gives the remote user).
pub(crate) fn workspace_gid(loaded: &LoadedConfiguration) -> Option<u32> {
    crate::config::ownership::workspace_user_of(&loaded.workspace.host_mount_root).map(|i| i.gid)
}

/// The user every exec in `container` runs as under `hardened` (the attached container's
/// `exec_user`): `remote_user` as numeric `uid:gid` from the image's `/etc/passwd` (read by
/// the engine from the image, not from the container, which the agent may have changed).
/// `None` for a container not created under `hardened` (the name is used, as the reference
/// CLI does).
pub(crate) async fn resolve(
    engine: &dyn Engine,
    container: &ContainerInfo,
    remote_user: &str,
    loaded: &LoadedConfiguration,
) -> Option<String> {
    if !is_hardened(container) {
        return None;
    }
    let passwd = crate::ops::image_files::image_passwd_of(engine, container).await;
    numeric_user(passwd.as_deref(), remote_user, workspace_gid(loaded))
}

/// The user `set-up`'s execs run as in `container` (a running container devcell may not have
/// made): under the `hardened` profile `set-up` runs with, `remote_user` as numeric `uid:gid`
/// from the image's `/etc/passwd` (whatever the container mounts over it), as [`resolve`]
/// gives a container devcell made (the image's groups are the same danger whoever created the
/// container); the workspace owner's gid is the one of the container's
/// `devcontainer.local_folder`, when it has one. `None` under another profile, or when the
/// user cannot be found (the name is used).
pub(crate) async fn resolve_running(
    engine: &dyn Engine,
    container: &ContainerInfo,
    remote_user: &str,
    hardened: bool,
) -> Option<String> {
    if !hardened {
        return None;
    }
    let passwd = crate::ops::image_files::image_passwd_of(engine, container).await;
    let workspace_gid = container
        .labels
        .get(crate::names::LOCAL_FOLDER_LABEL)
        .and_then(|f| crate::config::ownership::workspace_user_of(std::path::Path::new(f)))
        .map(|i| i.gid);
    numeric_user(passwd.as_deref(), remote_user, workspace_gid)
}

/// Under `hardened`, the workspace container is created as numeric `uid:gid` too: its main
/// process (devcell's keep-alive, the Features' entrypoints, the image's own `ENTRYPOINT` with
/// `overrideCommand: false`) runs what the repository wrote, and by name it would carry every
/// group the image's `/etc/group` lists. The user it runs as (`spec.user`, else the image's
/// `USER`, else `root`) is resolved in the image's `passwd`; its name as the engine would have
/// reported it in `Config.User` (the asked user, else the image's `USER`, else `""`) is kept in
/// [`crate::names::CREATED_USER_LABEL`], which the container's readers report
/// ([`crate::engine::created_user`]), so results and checks see the name as before. Unchanged
/// when the user cannot be found there (the uid check after start judges it).
pub(crate) fn numeric_container_user(
    spec: &mut crate::engine::ContainerSpec,
    image_user: Option<&str>,
    passwd: Option<&str>,
    workspace_gid: Option<u32>,
) {
    let named = spec
        .user
        .as_deref()
        .filter(|u| !u.is_empty())
        .or(image_user.filter(|u| !u.is_empty()))
        .unwrap_or_default()
        .to_string();
    let user = Some(named.as_str())
        .filter(|u| !u.is_empty())
        .unwrap_or("root");
    if let Some(numeric) = numeric_user(passwd, user, workspace_gid) {
        spec.labels
            .insert(crate::names::CREATED_USER_LABEL.to_string(), named);
        spec.user = Some(numeric);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0::/root:/bin/sh\ndev:x:1000:1000::/home/dev:/bin/sh\ndisk:x:1001:6::/home/disk:/bin/sh\n";

    #[test]
    fn a_name_becomes_its_numeric_ids_and_a_foreign_primary_group_is_replaced() {
        assert_eq!(
            numeric_user(Some(PASSWD), "dev", Some(1000)).as_deref(),
            Some("1000:1000")
        );
        // gid 6 is not the user's own group: the workspace owner's gid replaces it
        assert_eq!(
            numeric_user(Some(PASSWD), "disk", Some(1002)).as_deref(),
            Some("1001:1002")
        );
        assert_eq!(
            numeric_user(Some(PASSWD), "disk", None).as_deref(),
            Some("1001:1001")
        );
        // a `:group` the configuration names is judged the same way
        assert_eq!(
            numeric_user(Some(PASSWD), "1000:6", Some(1000)).as_deref(),
            Some("1000:1000")
        );
        assert_eq!(
            numeric_user(None, "1234", None).as_deref(),
            Some("1234:1234")
        );
        assert_eq!(numeric_user(None, "dev", None), None);
        // root (granted) keeps group 0; a non-root user never gets it
        assert_eq!(
            numeric_user(Some(PASSWD), "root", Some(1000)).as_deref(),
            Some("0:0")
        );
        assert_eq!(judged_gid(1000, 0, Some(0)), 1000);
    }

    /// The container is created numeric and keeps the name asked for in its label, which is
    /// what its readers report (a forged label without devcell's `hardened` profile counts
    /// for nothing).
    #[test]
    fn the_container_is_created_numeric_and_reports_the_name_asked_for() {
        use crate::engine::{ContainerSpec, created_user};
        use crate::names::{CREATED_USER_LABEL, PROFILE_LABEL};
        let mut spec = ContainerSpec {
            user: Some("dev".into()),
            ..ContainerSpec::default()
        };
        numeric_container_user(&mut spec, Some("root"), Some(PASSWD), Some(1000));
        assert_eq!(spec.user.as_deref(), Some("1000:1000"));
        spec.labels.insert(PROFILE_LABEL.into(), "hardened".into());
        assert_eq!(created_user(&spec.labels, "1000:1000".into()), "dev");
        // the image's user: named as the engine would have reported it (`Config.User`)
        let mut spec = ContainerSpec::default();
        numeric_container_user(&mut spec, Some("disk"), Some(PASSWD), Some(1002));
        assert_eq!(spec.user.as_deref(), Some("1001:1002"));
        spec.labels.insert(PROFILE_LABEL.into(), "hardened".into());
        assert_eq!(created_user(&spec.labels, "1001:1002".into()), "disk");
        // no user anywhere: root, reported as the empty `Config.User` it would have had
        let mut spec = ContainerSpec::default();
        numeric_container_user(&mut spec, None, Some(PASSWD), Some(1002));
        assert_eq!(spec.user.as_deref(), Some("0:0"));
        spec.labels.insert(PROFILE_LABEL.into(), "hardened".into());
        assert_eq!(created_user(&spec.labels, "0:0".into()), "");
        // a user the passwd does not name stays as asked, with no label
        let mut spec = ContainerSpec {
            user: Some("ghost".into()),
            ..ContainerSpec::default()
        };
        numeric_container_user(&mut spec, None, Some(PASSWD), None);
        assert_eq!(spec.user.as_deref(), Some("ghost"));
        assert!(!spec.labels.contains_key(CREATED_USER_LABEL));
        // outside `hardened` the label is not read
        let mut labels = std::collections::BTreeMap::new();
        labels.insert(CREATED_USER_LABEL.to_string(), "dev".to_string());
        assert_eq!(created_user(&labels, "root".into()), "root");
        labels.insert(PROFILE_LABEL.into(), "reference".into());
        assert_eq!(created_user(&labels, "root".into()), "root");
    }
}
