//! The container's users: the remote user's uid update (`updateRemoteUserUID`), the uids a process
//! inside really has, the image's `/etc/passwd`, home folders, and the workspace ownership warning.

use crate::engine::{ContainerInfo, Engine, ExecInput, ExecOutput, ExecRequest, ImageInfo};
use crate::ops::error::{OpsError, Result};
use crate::ops::image::PreparedImage;
use crate::ops::load::LoadedConfiguration;
use crate::ops::options::UidUpdateDefault;
use crate::ops::target::short;
use crate::progress::Reporter;
use crate::security::{
    self, Applied, Grants, PermissionRequest, PolicyInput, SecurityProfile, Source,
};
use serde_json::Value;
use std::path::Path;

/// `/bin/sh` script printing the real, effective, saved and filesystem uids of the shell
/// itself (`/proc/self/status`, `Uid:` line): shell built-ins only, so it needs nothing but
/// the `/bin/sh` the keep-alive entrypoint needs anyway.
pub const UID_SCRIPT: &str = r#"while read -r k r e s f; do [ "$k" = Uid: ] && echo "$r $e $s $f"; done < /proc/self/status; :"#;

/// After creation under `hardened`, before anything of the configuration runs in it: the
/// container's user and the remote user, as the engine resolves them, must not be uid 0
/// unless `--allow root` was given (spec-note 0420). The container's user is read from its
/// processes by the engine ([`Engine::process_uids`]: every process's four uids, from outside),
/// and with one exec of [`UID_SCRIPT`] where the engine cannot say; the remote user is
/// checked with one exec, only when it is spelled differently from `container_user`
/// (the user the container was created with): the engine resolves one spelling against one
/// `/etc/passwd` to one uid, so a second exec would print the same line (issue 12 item 8).
/// A uid 0, or a user the check cannot run as, removes the container (and its anonymous
/// volumes).
///
/// Errors: [`OpsError::Security`] (`Refused`, a `root` request) for uid 0;
/// [`OpsError::Unsupported`] when the check could not run; [`OpsError::Engine`].
pub(crate) async fn verify_uids_inside(
    engine: &dyn Engine,
    id: &str,
    container_user: Option<&str>,
    remote_user: Option<&str>,
    requests: &[PermissionRequest],
    grants: &Grants,
) -> Result<()> {
    if grants.allows(&security::Permission::Root) {
        return Ok(());
    }
    let mut users: Vec<Option<&str>> = vec![None];
    if let Some(r) = remote_user
        && Some(r) != container_user
    {
        users.push(Some(r));
    }
    for user in users {
        // The container's own processes, read by the engine from outside (kernel's ids, no
        // image binary asked), answer for the user it was created with (spec-note 0420). An
        // engine that cannot say, or cannot list them (the container already stopped), leaves
        // the answer to the exec, which removes the container when it cannot run either.
        if user.is_none()
            && let Some(processes) = engine.process_uids(id).await.ok().flatten()
        {
            if processes.iter().all(|ids| !ids.contains(&0)) {
                continue;
            }
            let _ = engine.remove_container(id, true).await;
            return Err(root_refused(requests, Source::ImageUser));
        }
        let request = ExecRequest {
            argv: vec!["/bin/sh".into(), "-c".into(), UID_SCRIPT.into()],
            user: user.map(str::to_string),
            ..ExecRequest::default()
        };
        let shown = user.map_or_else(|| "the container's user".to_string(), |u| format!("`{u}`"));
        let result = engine
            .exec(id, &request, ExecInput::None, ExecOutput::Collect)
            .await;
        let uids: Option<Vec<u32>> = match &result {
            // a cut answer is not read (spec-note 0658)
            Ok(r) if r.exit_code == 0 && !r.cut => {
                let text = r.stdout_text();
                let fields: Vec<&str> = text.split_whitespace().collect();
                let parsed: Option<Vec<u32>> = fields.iter().map(|f| f.parse().ok()).collect();
                parsed.filter(|p| p.len() == 4)
            }
            _ => None,
        };
        let problem = match uids {
            Some(uids) if !uids.contains(&0) => continue,
            Some(_) => None,
            None => Some(match result {
                Ok(r) if r.exit_code == 0 && r.cut => format!(
                    "its output passed {} KiB and was not read",
                    crate::engine::COLLECT_CAP / 1024
                ),
                Ok(r) if r.exit_code == 0 => format!(
                    "its output `{}` is not the four ids (real, effective, saved, filesystem) asked for",
                    r.stdout_text().trim().chars().take(200).collect::<String>()
                ),
                Ok(r) => format!("exit code {}: {}", r.exit_code, r.stderr_text().trim()),
                Err(e) => e.to_string(),
            }),
        };
        let _ = engine.remove_container(id, true).await;
        if let Some(problem) = problem {
            return Err(OpsError::Unsupported {
                message: format!(
                    "cannot check which uid {shown} runs as in container {} ({problem}); the container was removed",
                    short(id)
                ),
                hint: Some(
                    "the user must exist in the image's `/etc/passwd` (or be numeric) and the image needs `/bin/sh`".into(),
                ),
            });
        }
        return Err(root_refused(
            requests,
            if user.is_some() {
                Source::DevcontainerJson
            } else {
                Source::ImageUser
            },
        ));
    }
    Ok(())
}

/// Under `hardened`, before the container is created: when the image's `/etc/passwd` could not
/// be read as a regular file (`input.passwd` is `None`: a link to no regular file of the image,
/// no such file, or an engine error), a user that is a name cannot be judged by its uid, and
/// counts as root (spec-note 0420, [`crate::engine::passwd::unjudged_name`]): the engine
/// resolves it in a file devcell did not see, and the only check left after start would be a
/// process of the image answering for itself. The users are the container's as the policy set
/// it (`applied.spec.user`, else the image's `USER`) and the remote user. A numeric user, or
/// `--allow root`, passes.
///
/// Errors: [`OpsError::Security`] (`Refused`, a `root` request) listing `requests` first,
/// after one status line saying why.
pub(crate) fn judge_unreadable_passwd(
    input: &PolicyInput,
    applied: &Applied,
    requests: &[PermissionRequest],
    grants: &Grants,
    reporter: &dyn Reporter,
) -> Result<()> {
    let passwd = input.passwd.as_deref();
    if grants.allows(&security::Permission::Root) {
        return Ok(());
    }
    let container_user = applied.spec.user.as_deref();
    let candidates = [
        (container_user, Source::DevcontainerJson),
        (
            container_user
                .is_none()
                .then_some(input.image_user.as_deref())
                .flatten(),
            Source::ImageUser,
        ),
        (applied.remote_user.as_deref(), Source::DevcontainerJson),
    ];
    let Some((user, source)) = candidates.into_iter().find_map(|(u, source)| {
        u.filter(|u| crate::engine::passwd::unjudged_name(u, passwd))
            .map(|u| (u, source))
    }) else {
        return Ok(());
    };
    reporter.report(crate::progress::Event::Status(format!(
        "the image's `/etc/passwd` could not be read as a regular file (a link to no regular file, no such file, or an engine error): the user `{user}` cannot be judged by its uid and counts as root; make `/etc/passwd` a regular file in the image, use a numeric user, or grant `--allow root`"
    )));
    Err(root_refused(requests, source))
}

/// The `hardened` refusal of a uid 0 found inside: the requests so far plus a refused
/// `root`, from the source of an earlier `root` request when there is one, else `fallback`.
fn root_refused(requests: &[PermissionRequest], fallback: Source) -> OpsError {
    let source = requests
        .iter()
        .find(|r| r.permission == security::Permission::Root)
        .map(|r| r.source.clone())
        .unwrap_or(fallback);
    let mut all: Vec<PermissionRequest> = requests.to_vec();
    all.push(PermissionRequest {
        permission: security::Permission::Root,
        source,
        status: security::RequestStatus::Refused,
    });
    OpsError::Security(security::SecurityError::Refused {
        profile: "hardened".to_string(),
        requests: all,
    })
}

/// What [`update_remote_user_uid`] decided.
pub(crate) struct UidUpdate {
    /// The image with the UID layer, when one applies.
    pub(crate) image: Option<PreparedImage>,
    /// The user devcell provided in that layer (spec-note 0188), when it did.
    pub(crate) provided: Option<String>,
}

/// Whether devcell provides its own user for `image` ([`security::provides_user`], spec-note
/// 0188): under `hardened`, without `--allow root`, when `container_user` (the configuration's
/// `containerUser`, `runArgs -u` or a Compose service's `user:`) and the merged `remoteUser`
/// name no user and the image runs as root. The image's `/etc/passwd` is read only when its
/// `USER` is a name other than `root` (an image `USER admin` with uid 0 is a root image too).
pub(crate) async fn provides_user(
    engine: &dyn Engine,
    profile: &SecurityProfile,
    grants: &Grants,
    merged: &Value,
    container_user: Option<&str>,
    image: &PreparedImage,
) -> bool {
    let hardened = matches!(profile, SecurityProfile::Hardened(_));
    let root_granted = grants.allows(&security::Permission::Root);
    let remote = crate::config::metadata::ConfiguredUsers::of(merged).remote_user;
    let image_user = image.info.user.as_deref();
    let decide = |passwd: Option<&str>| {
        security::provides_user(
            hardened,
            root_granted,
            container_user,
            remote.as_deref(),
            image_user,
            passwd,
        )
    };
    if decide(None) {
        return true;
    }
    let a_name = image_user.is_some_and(|u| {
        matches!(
            crate::engine::passwd::resolve(u, None),
            crate::engine::passwd::Resolved::Unresolved(_)
        )
    });
    if !(hardened && !root_granted && a_name) {
        return false;
    }
    let passwd = image_passwd(engine, Some(&image.info), &image.reference).await;
    passwd.is_some() && decide(passwd.as_deref())
}

/// `updateRemoteUserUID` (spec: Linux hosts, default on, when the workspace is a bind mount):
/// the remote user gets the *workspace user's* UID/GID in a small cached layer
/// ([`crate::build::ensure_uid_image`]): the host user's, or, when devcell runs as root, the
/// owner of the workspace folder when that is not root (spec-note 0250). Nothing is built when
/// everything is root (the remote user keeps its ids), the remote user is root or numeric, or
/// the property is `false`. With `provide` ([`provides_user`]) the layer creates devcell's own
/// user first and makes it the image's `USER` (spec-note 0188): with the workspace user's ids
/// where `updateRemoteUserUID` applies, else the first free ones from 1000.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn update_remote_user_uid(
    engine: &dyn Engine,
    image: &PreparedImage,
    merged: &Value,
    loaded: &LoadedConfiguration,
    default: UidUpdateDefault,
    provide: bool,
    network: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<UidUpdate> {
    let mut outcome = UidUpdate {
        image: None,
        provided: None,
    };
    let (applies, target) = uid_target(merged, loaded, default);
    let target = target.filter(|_| applies);
    let image_user = image.info.user.clone().unwrap_or_default();
    let remote_user = if provide {
        crate::names::PROVIDED_USER.to_string()
    } else {
        let Some(_) = target else {
            return Ok(outcome);
        };
        crate::config::metadata::ConfiguredUsers::of(merged)
            .remote()
            .map_or_else(|| image_user.clone(), str::to_string)
    };
    if provide {
        reporter.report(crate::progress::Event::Status(format!(
            "the image runs as root and the configuration names no user: devcell provides the non-root user `{remote_user}` (set `remoteUser` to choose one, or `remoteUser: root` with `--allow root` for root)"
        )));
        outcome.provided = Some(remote_user.clone());
    }
    let input = crate::build::UidInput {
        image: image.reference.clone(),
        image_id: image.info.id.clone(),
        image_user,
        remote_user,
        host_uid: target.map_or(0, |t| t.uid),
        host_gid: target.map_or(0, |t| t.gid),
        provide,
    };
    outcome.image = crate::build::ensure_uid_image(engine, &input, network, reporter)
        .await?
        .map(|built| PreparedImage {
            reference: built.tag,
            info: built.image,
        });
    Ok(outcome)
}

/// Whether `updateRemoteUserUID` applies (Linux, not `false`, a bind-mounted workspace or a
/// Compose configuration) and
/// the ids the remote user should get: the workspace user (spec-note 0250); `None` when
/// everything is root.
pub(crate) fn uid_target(
    merged: &Value,
    loaded: &LoadedConfiguration,
    default: UidUpdateDefault,
) -> (bool, Option<crate::config::ownership::Ids>) {
    // `--update-remote-user-uid-default`: `never` wins over the configuration; otherwise the
    // configuration's `updateRemoteUserUID`, else the default (`on`).
    let said = crate::config::metadata::MergedConfiguration::of(merged).update_remote_user_uid;
    let wanted = match (default, said) {
        (UidUpdateDefault::Never, _) => false,
        (_, Some(said)) => said,
        (UidUpdateDefault::On, None) => true,
        (UidUpdateDefault::Off, None) => false,
    };
    // A Compose service binds the workspace through its own `volumes` (there is no
    // `workspaceMount`); the reference updates the remote user's uid there too.
    let bound = loaded.typed.kind() == crate::config::model::ConfigKind::Compose
        || loaded
            .workspace_mount()
            .ok()
            .flatten()
            .is_some_and(|m| m.kind == crate::engine::MountKind::Bind);
    if !cfg!(target_os = "linux") || !wanted || !bound {
        return (false, None);
    }
    (
        true,
        crate::config::ownership::workspace_user_of(&loaded.workspace.host_mount_root),
    )
}

/// The envelope warning code of the "the remote user cannot write the root-owned workspace"
/// warning ([`ownership_warning`]).
pub const WORKSPACE_NOT_WRITABLE_CODE: &str = "workspace_not_writable";
/// The envelope warning code of the "files the remote user writes will belong to another uid"
/// warning ([`ownership_warning`]).
pub const WORKSPACE_OWNER_MISMATCH_CODE: &str = "workspace_owner_mismatch";

pub(crate) const NOT_WRITABLE_PREFIX: &str = "devcell runs as root and the workspace";
pub(crate) const MISMATCH_PREFIX: &str = "the remote user `";

/// The envelope code of one of `up`'s warnings, when it has a specific one
/// ([`WORKSPACE_NOT_WRITABLE_CODE`], [`WORKSPACE_OWNER_MISMATCH_CODE`]).
pub fn warning_code(message: &str) -> Option<&'static str> {
    if message.starts_with(NOT_WRITABLE_PREFIX) {
        Some(WORKSPACE_NOT_WRITABLE_CODE)
    } else if message.starts_with(MISMATCH_PREFIX) && message.contains("updateRemoteUserUID") {
        Some(WORKSPACE_OWNER_MISMATCH_CODE)
    } else {
        None
    }
}

/// [`ownership_warning`] for the running `container`: the remote user's uid from its
/// [`crate::names::REMOTE_UID_LABEL`], else read from its `/etc/passwd`. `None` when all is
/// well or it cannot be told.
pub(crate) async fn workspace_ownership_warning(
    engine: &dyn Engine,
    container: &ContainerInfo,
    merged: &Value,
    loaded: &LoadedConfiguration,
    remote_user: &str,
    default: UidUpdateDefault,
) -> Option<String> {
    let (applies, target) = uid_target(merged, loaded, default);
    if !applies {
        return None;
    }
    // The uid recorded at creation when devcell made the container (a file read through the
    // engine costs ~40 ms, too much for a warm `up`), else the container's `/etc/passwd`.
    let recorded = crate::names::remote_uid(&container.labels).map(|uid| Account {
        uid,
        gid: uid,
        home: String::new(),
    });
    let account = match recorded {
        Some(account) => account,
        None => passwd_account(&container_passwd(engine, &container.id).await?, remote_user)?,
    };
    ownership_warning(
        remote_user,
        &account,
        target,
        &loaded.workspace.host_mount_root,
    )
}

/// A warning when files the remote user `user` (its final `account`) writes in the workspace
/// `workspace` will not belong to the workspace user `target` (spec-note 0250): its uid could
/// not be changed (another user of the image has it, or the container was created for another
/// workspace owner and is reused), or everything is root and the remote
/// user keeps its non-root ids in a workspace only root can write. `None` when all is well (or
/// the user is root: the non-root rule speaks for that).
pub(crate) fn ownership_warning(
    user: &str,
    account: &Account,
    target: Option<crate::config::ownership::Ids>,
    workspace: &Path,
) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    if account.uid == 0 {
        return None;
    }
    match target {
        Some(t) if t.uid != account.uid => Some(format!(
            "{MISMATCH_PREFIX}{user}` keeps uid {} (updateRemoteUserUID could not give it uid {}: another user of the image has it, the user is numeric or missing from `/etc/passwd`, or the container was created before the workspace had this owner: remove it with `devcell down --remove` to recreate it): files it writes in `{}` will belong to uid {}",
            account.uid,
            t.uid,
            workspace.display(),
            account.uid
        )),
        Some(_) => None,
        None => {
            let meta = std::fs::metadata(workspace).ok()?;
            (meta.uid() == 0 && meta.mode() & 0o002 == 0).then(|| format!(
                "{NOT_WRITABLE_PREFIX} `{}` belongs to root: the remote user `{user}` keeps uid {} and cannot write it; give the workspace to the user who should own the agent's files (`chown -R`; devcell then maps `{user}` to that user), or run devcell as that user",
                workspace.display(),
                account.uid
            ))
        }
    }
}

/// A user's `/etc/passwd` entry: ids and home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Numeric user id.
    pub uid: u32,
    /// Numeric primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
}

/// Finds `user` (a name, or a numeric uid; a `:group` suffix is ignored) in `/etc/passwd`
/// text the way the engine resolves it ([`crate::engine::passwd::lookup`]). `None` when it has
/// no entry.
pub fn passwd_account(passwd: &str, user: &str) -> Option<Account> {
    crate::engine::passwd::lookup(passwd, user).map(|e| Account {
        uid: e.uid,
        gid: e.gid,
        home: e.home,
    })
}

/// The image's `/etc/passwd` text: from the host record of the image's files when `image` is
/// given (spec-note 0471; recorded there after a read), else read from a container that is created and removed without
/// being started (spec-note 0185). `None` when it cannot be read: names are then judged from
/// inside the container after creation (spec-note 0420), and the policy derives the home.
pub(crate) async fn image_passwd(
    engine: &dyn Engine,
    image: Option<&ImageInfo>,
    reference: &str,
) -> Option<String> {
    let bytes = match image {
        Some(info) => {
            crate::ops::image_files::read(engine, reference, &info.id, "/etc/passwd").await
        }
        None => engine.read_image_file(reference, "/etc/passwd").await,
    };
    Some(crate::engine::passwd::text_of(&bytes.ok()??))
}

/// The running container `id`'s `/etc/passwd` text as it is now; `None` when it cannot be
/// read (no such file, an engine error) or is not UTF-8.
pub(crate) async fn container_passwd(engine: &dyn Engine, id: &str) -> Option<String> {
    Some(crate::engine::passwd::text_of(
        &engine.read_file(id, "/etc/passwd").await.ok()??,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer to the uid check that passed the collection bound (an image's `/bin/sh`
    /// flooding it: attack 26 Q3) is not read, even when its beginning looks right, and the
    /// container is removed (spec-note 0658).
    #[tokio::test]
    async fn a_cut_uid_answer_is_refused_not_read() {
        let engine = crate::engine::fake::FakeEngine::new();
        let id = engine.add_container(&crate::engine::ContainerSpec::default(), true);
        let mut stdout = b"1000 1000 1000 1000\n".to_vec();
        stdout.extend(vec![b' '; 2 * crate::engine::COLLECT_CAP]);
        engine.reply_to_execs(crate::engine::ExecResult {
            exit_code: 0,
            stdout,
            ..Default::default()
        });
        let err = verify_uids_inside(&engine, &id, None, Some("dev"), &[], &Grants::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("passed 1024 KiB"), "{err}");
        assert!(engine.container(&id).is_none(), "removed");
    }

    #[test]
    fn a_uid_mismatch_names_every_cause_and_the_way_to_recreate_the_container() {
        let account = Account {
            uid: 65534,
            gid: 65534,
            home: String::new(),
        };
        let target = Some(crate::config::ownership::Ids {
            uid: 1000,
            gid: 1000,
        });
        let message = ownership_warning("nobody", &account, target, Path::new("/w")).unwrap();
        assert!(
            message.starts_with("the remote user `nobody` keeps uid 65534"),
            "{message}"
        );
        // A container an earlier `up` made for a root-owned workspace is reused as it is.
        assert!(
            message.contains("the container was created before the workspace had this owner")
                && message.contains("remove it with `devcell down --remove` to recreate it"),
            "{message}"
        );
        assert_eq!(warning_code(&message), Some(WORKSPACE_OWNER_MISMATCH_CODE));
        assert_eq!(
            ownership_warning(
                "nobody",
                &account,
                Some(crate::config::ownership::Ids {
                    uid: 65534,
                    gid: 65534
                }),
                Path::new("/w")
            ),
            None
        );
    }
}
