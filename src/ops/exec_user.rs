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
}
