//! `updateRemoteUserUID`: a small extra layer giving the remote user the host user's UID and
//! GID, so files in a bind-mounted workspace keep their owner
//! ([spec: `updateRemoteUserUID`](https://containers.dev/implementors/json_reference/#image-specific);
//! spec-note 0125).
//!
//! The generated Dockerfile (image `USER` `dev`, remote user `dev`, host 1000:1000):
//!
//! ```text
//! FROM <image>
//! USER root
//! COPY ["devcell-update-uid.sh", "/tmp/devcell-update-uid.sh"]
//! RUN sh /tmp/devcell-update-uid.sh 'dev' 1000 1000 && rm -f /tmp/devcell-update-uid.sh
//! USER dev
//! ```
//!
//! The script edits `/etc/passwd` and `/etc/group` with `awk` (no `usermod` needed) and
//! `chown -R`s the user's home; it leaves the image unchanged when the ids already match. Over an
//! image pinned by digest (`FROM repo@sha256:…`) the layer also gets
//! `LABEL devcell.base_image="repo@sha256:…"`, so the audit still counts it as pinned.
//!
//! The ids are the *workspace user's* (the caller decides them: the host user, or when devcell
//! runs as root the workspace folder's non-root owner; spec-note 0250).
//!
//! The same layer creates the user devcell provides for an image that runs as root when the
//! configuration names no user (`UidInput::provide`, spec-note 0188): its own script adds the
//! user (the workspace user's ids, duplicates allowed; else the first free ids from 1000), a
//! group when none has the GID, and a home folder, and the layer ends with `USER <that user>`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::cache_key::KeyHasher;
use super::dockerfile::{check_reference, check_user, json_array};
use super::error::{BuildError, Result};
use super::features::BuildContext;
use crate::formats::shell;
use crate::names::BASE_IMAGE_LABEL;

/// devcell's own version of the generated UID layer (part of its cache key).
pub const UID_LAYER_VERSION: u32 = 1;

/// Repository of the images [`plan_uid_update`] tags: `devcell/uid:<64 hex digits>`.
pub const UID_IMAGE_REPOSITORY: &str = "devcell/uid";

const SCRIPT_FILE: &str = "devcell-update-uid.sh";
const SCRIPT: &str = include_str!("scripts/update-uid.sh");
const PROVIDE_FILE: &str = "devcell-provide-user.sh";
const PROVIDE_SCRIPT: &str = include_str!("scripts/provide-user.sh");

/// What the UID layer depends on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UidInput {
    /// The reference written after `FROM` (e.g. the Features image tag).
    pub image: String,
    /// Its image ID (`sha256:…`), for the cache key.
    pub image_id: String,
    /// The image's `Config.User` (`""` when unset), restored at the end.
    pub image_user: String,
    /// The user to update: merged `remoteUser`, else the `containerUser`, else the image's
    /// `USER` (the caller resolves this).
    pub remote_user: String,
    /// The UID to give the user: the workspace user's (the host user's, or the workspace
    /// owner's when devcell runs as root; spec-note 0250).
    pub host_uid: u32,
    /// The GID to give the user (as `host_uid`).
    pub host_gid: u32,
    /// Create `remote_user` (devcell's own user, spec-note 0188) and make it the image's
    /// `USER`. `host_uid` 0 then means "no workspace user": the script takes the first free
    /// ids from 1000.
    pub provide: bool,
}

/// A planned UID layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UidPlan {
    /// `devcell/uid:<key>`.
    pub tag: String,
    /// 64 hex digits of SHA-256 over, in order: `devcell.build.uid/<UID_LAYER_VERSION>`, the
    /// image ID, the script, the Dockerfile (which holds the image reference, the user, the
    /// ids and the restored `USER`).
    pub key: String,
    /// The generated Dockerfile.
    pub dockerfile: String,
    /// The build context's scripts (file name, content).
    scripts: Vec<(&'static str, &'static str)>,
}

/// Whether `user` names root or is numeric (`0`, `1000`, `1000:1000`): such users are not
/// updated (as in the reference CLI, a numeric user has no `/etc/passwd` entry to edit).
/// Numeric as the engine reads it ([`crate::engine::passwd::resolve`]: `+0`, `-0`, `00` too).
pub fn is_root_or_numeric(user: &str) -> bool {
    use crate::engine::passwd::{Resolved, resolve};
    !matches!(resolve(user, None), Resolved::Unresolved(_))
}

/// Plans the UID layer, or `None` when there is nothing to do: the target is root
/// (`host_uid` 0: then the remote user keeps its ids, spec-notes 0125, 0250), or the remote user is
/// root or numeric. When the user's ids already equal the host's, the layer still builds (once,
/// cached by its tag) and leaves the image unchanged. With `provide` there is always a layer:
/// it creates the user first (spec-note 0188).
///
/// Whether the layer applies at all is the caller's decision (the spec's conditions: a Linux
/// host, `up`, merged `updateRemoteUserUID` not `false`, a bind-mounted workspace).
///
/// Errors: [`BuildError::InvalidUser`] for a user name, [`BuildError::InvalidReference`] for an
/// image reference, that cannot go into a Dockerfile.
pub fn plan_uid_update(input: &UidInput) -> Result<Option<UidPlan>> {
    if !input.provide && (input.host_uid == 0 || is_root_or_numeric(&input.remote_user)) {
        return Ok(None);
    }
    if input.provide && is_root_or_numeric(&input.remote_user) {
        return Err(BuildError::InvalidUser {
            user: input.remote_user.clone(),
            reason: "the user devcell provides must be a name",
        });
    }
    check_reference(&input.image).map_err(|reason| BuildError::InvalidReference {
        reference: input.image.clone(),
        reason,
    })?;
    for user in [&input.remote_user, &input.image_user] {
        if !user.is_empty() {
            check_user(user).map_err(|reason| BuildError::InvalidUser {
                user: user.clone(),
                reason,
            })?;
        }
    }
    let name = input.remote_user.split(':').next().unwrap_or_default();
    let mut scripts = vec![(SCRIPT_FILE, SCRIPT)];
    if input.provide {
        scripts.insert(0, (PROVIDE_FILE, PROVIDE_SCRIPT));
    }
    let mut df = format!(
        "# Generated by devcell (updateRemoteUserUID layer v{UID_LAYER_VERSION}); do not edit.\nFROM {}\n",
        input.image
    );
    if !input.image_user.is_empty() {
        df.push_str("USER root\n");
    }
    let staged = |file: &str| format!("/tmp/{file}");
    for (file, _) in &scripts {
        df.push_str(&format!("COPY {}\n", json_array(&[file, &staged(file)])));
    }
    let mut steps = Vec::new();
    if input.provide {
        // "" lets the script choose free ids (no workspace user to give the user's ids to)
        let id = |id: u32| {
            if input.host_uid == 0 {
                "''".to_string()
            } else {
                id.to_string()
            }
        };
        steps.push(format!(
            "sh {} {} {} {}",
            staged(PROVIDE_FILE),
            shell::quote(name),
            id(input.host_uid),
            id(input.host_gid)
        ));
    }
    if input.host_uid != 0 {
        steps.push(format!(
            "sh {} {} {} {}",
            staged(SCRIPT_FILE),
            shell::quote(name),
            input.host_uid,
            input.host_gid
        ));
    }
    let files: Vec<String> = scripts.iter().map(|(f, _)| staged(f)).collect();
    steps.push(format!("rm -f {}", files.join(" ")));
    df.push_str(&format!("RUN {}\n", steps.join(" && ")));
    if input.provide {
        df.push_str(&format!("USER {name}\n"));
    } else if !input.image_user.is_empty() {
        df.push_str(&format!("USER {}\n", input.image_user));
    }
    if input.image.contains("@sha256:") {
        // the layer is a local build: name its pinned base for the audit (spec-note 0250)
        df.push_str(&format!("LABEL {BASE_IMAGE_LABEL}=\"{}\"\n", input.image));
    }
    let mut key = KeyHasher::new(&format!("devcell.build.uid/{UID_LAYER_VERSION}"));
    key.field("image-id", input.image_id.as_bytes());
    for (_, content) in &scripts {
        key.field("script", content.as_bytes());
    }
    key.field("dockerfile", df.as_bytes());
    let key = key.finish();
    Ok(Some(UidPlan {
        tag: format!("{UID_IMAGE_REPOSITORY}:{key}"),
        key,
        dockerfile: df,
        scripts,
    }))
}

impl UidPlan {
    /// Whether this plan's image has to be built: `false` when `image_exists(tag)` says it is
    /// there (see [`super::features::needs_build`]).
    pub fn needs_build(&self, image_exists: impl FnOnce(&str) -> bool) -> bool {
        super::features::needs_build(&self.tag, image_exists)
    }

    /// Writes the build context (Dockerfile and script) into a new temporary folder
    /// `devcell-uid-*` under `parent`, removed when the returned context is dropped.
    ///
    /// Errors: [`BuildError::Io`].
    pub fn write_context_in(&self, parent: &Path) -> Result<BuildContext> {
        let dir = tempfile::Builder::new()
            .prefix("devcell-uid-")
            .tempdir_in(parent)
            .map_err(BuildError::io("create", parent))?;
        let files = std::iter::once(("Dockerfile", self.dockerfile.as_str()))
            .chain(self.scripts.iter().copied());
        for (name, content) in files {
            let path = dir.path().join(name);
            fs::write(&path, content).map_err(BuildError::io("write", &path))?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644))
                .map_err(BuildError::io("write", &path))?;
        }
        Ok(BuildContext::new(dir))
    }

    /// [`UidPlan::write_context_in`] the system temp folder.
    pub fn write_context(&self) -> Result<BuildContext> {
        self.write_context_in(&std::env::temp_dir())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> UidInput {
        UidInput {
            image: "devcell/features:abc".into(),
            image_id: "sha256:1".into(),
            image_user: "dev".into(),
            remote_user: "dev".into(),
            host_uid: 1000,
            host_gid: 1001,
            provide: false,
        }
    }

    /// spec-note 0188: the provided user is created first, then given the workspace user's
    /// ids, and becomes the image's `USER`; with no workspace user the script picks the ids.
    #[test]
    fn a_provided_user_is_created_and_becomes_the_images_user() {
        let mut i = input();
        i.image_user = "root".into();
        i.remote_user = "devcell".into();
        i.provide = true;
        let p = plan_uid_update(&i).unwrap().unwrap();
        let lines: Vec<&str> = p.dockerfile.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "FROM devcell/features:abc",
                "USER root",
                "COPY [\"devcell-provide-user.sh\", \"/tmp/devcell-provide-user.sh\"]",
                "COPY [\"devcell-update-uid.sh\", \"/tmp/devcell-update-uid.sh\"]",
                "RUN sh /tmp/devcell-provide-user.sh 'devcell' 1000 1001 && sh /tmp/devcell-update-uid.sh 'devcell' 1000 1001 && rm -f /tmp/devcell-provide-user.sh /tmp/devcell-update-uid.sh",
                "USER devcell",
            ]
        );
        // everything root: no ids to give, the script chooses; still a layer
        i.host_uid = 0;
        i.host_gid = 0;
        i.image_user = String::new();
        let q = plan_uid_update(&i).unwrap().unwrap();
        assert!(
            q.dockerfile.contains(
                "RUN sh /tmp/devcell-provide-user.sh 'devcell' '' '' && rm -f /tmp/devcell-provide-user.sh /tmp/devcell-update-uid.sh\nUSER devcell\n"
            ),
            "{}",
            q.dockerfile
        );
        assert!(!q.dockerfile.contains("USER root"), "{}", q.dockerfile);
        assert_ne!(p.key, q.key);
        // a root or numeric name cannot be provided
        i.remote_user = "0".into();
        assert!(plan_uid_update(&i).is_err());
        // the context holds both scripts
        let dir = tempfile::tempdir().unwrap();
        let ctx = p.write_context_in(dir.path()).unwrap();
        for file in [
            "Dockerfile",
            "devcell-provide-user.sh",
            "devcell-update-uid.sh",
        ] {
            assert!(ctx.path().join(file).is_file(), "{file}");
        }
    }

    #[test]
    fn skipped_for_root_host_and_root_or_numeric_users() {
        let mut i = input();
        i.host_uid = 0;
        assert_eq!(plan_uid_update(&i).unwrap(), None);
        for user in ["root", "0", "1000", "1000:1000", "", "+0", "-0", "00:1"] {
            let mut i = input();
            i.remote_user = user.into();
            assert_eq!(plan_uid_update(&i).unwrap(), None, "{user}");
        }
    }

    #[test]
    fn dockerfile_runs_script_as_root_and_restores_user() {
        let p = plan_uid_update(&input()).unwrap().unwrap();
        let lines: Vec<&str> = p.dockerfile.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "FROM devcell/features:abc",
                "USER root",
                "COPY [\"devcell-update-uid.sh\", \"/tmp/devcell-update-uid.sh\"]",
                "RUN sh /tmp/devcell-update-uid.sh 'dev' 1000 1001 && rm -f /tmp/devcell-update-uid.sh",
                "USER dev",
            ]
        );
        assert!(p.tag.starts_with("devcell/uid:"));
    }

    #[test]
    fn key_tracks_ids_and_image() {
        let first = plan_uid_update(&input()).unwrap().unwrap().key;
        let mut i = input();
        i.host_gid = 7;
        assert_ne!(plan_uid_update(&i).unwrap().unwrap().key, first);
        let mut i = input();
        i.image_id = "sha256:2".into();
        assert_ne!(plan_uid_update(&i).unwrap().unwrap().key, first);
        assert_eq!(plan_uid_update(&input()).unwrap().unwrap().key, first);
    }

    #[test]
    fn a_pinned_base_is_named_in_a_label() {
        let mut i = input();
        i.image = "127.0.0.1:5000/x/y@sha256:abcd".into();
        let p = plan_uid_update(&i).unwrap().unwrap();
        assert_eq!(
            p.dockerfile.lines().last(),
            Some("LABEL devcell.base_image=\"127.0.0.1:5000/x/y@sha256:abcd\"")
        );
        let p = plan_uid_update(&input()).unwrap().unwrap();
        assert!(!p.dockerfile.contains("LABEL"), "{}", p.dockerfile);
    }

    #[test]
    fn bad_user_is_an_error() {
        let mut i = input();
        i.remote_user = "a b".into();
        assert!(matches!(
            plan_uid_update(&i),
            Err(BuildError::InvalidUser { .. })
        ));
    }
}
