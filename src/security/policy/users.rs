//! Users under `hardened` (spec-notes 0083, 0084): root judged by uid, an image that runs as
//! root by default run as its non-root remote user instead, and the remote user's home.

use crate::engine::passwd;

use super::input::PolicyInput;

/// Whether a user spec (`name`, `uid`, `name:group`, `uid:gid`) is uid 0 without a passwd to
/// look names up in: any numeric spelling of 0 (`00`, `+0`, `0:0`), `root`, or empty (the
/// engine's default). [`passwd::is_root`] with the image's passwd is the full judgement.
pub fn is_root_user(user: &str) -> bool {
    passwd::is_root(user, None, true)
}

/// Whether devcell provides its own non-root user ([`crate::names::PROVIDED_USER`],
/// spec-note 0188) instead of refusing root: under `hardened`, without `--allow root` (a user
/// who grants root gets root, as asked), when the configuration names no container user
/// (`containerUser`, `runArgs -u`, a Compose service's `user:`) and no remote user, and the
/// image runs as root: no `USER`, or one that resolves to uid 0 in `passwd` (the image's
/// `/etc/passwd`, when read). A user named explicitly, root included, is never replaced: root
/// named by the configuration stays a request (`--allow root`). Pure.
pub fn provides_user(
    hardened: bool,
    root_granted: bool,
    container_user: Option<&str>,
    remote_user: Option<&str>,
    image_user: Option<&str>,
    passwd: Option<&str>,
) -> bool {
    let named = |u: Option<&str>| u.is_some_and(|u| !u.is_empty());
    hardened
        && !root_granted
        && !named(container_user)
        && !named(remote_user)
        && image_user
            .filter(|u| !u.is_empty())
            .is_none_or(|u| passwd::is_root(u, passwd, true))
}

/// The container and remote users under `hardened` (spec-note 0083): an image that would run
/// as root by default runs as the non-root remote user instead.
pub(super) fn effective_users(input: &PolicyInput) -> (Option<String>, Option<String>) {
    let remote = input.remote_user.clone();
    let container = match &input.spec.user {
        Some(u) => Some(u.clone()),
        None => {
            let image_root = input.image_user.as_deref().is_none_or(|u| input.is_root(u));
            match &remote {
                Some(r) if image_root && !input.is_root(r) => Some(r.clone()),
                _ => None,
            }
        }
    };
    (container, remote)
}

/// The remote user's home (spec-note 0084): the caller's answer, else `/root` for root,
/// `/home/<name>` for a named user, none for a bare uid.
pub(super) fn remote_home(input: &PolicyInput, user: Option<&str>) -> Option<String> {
    if let Some(h) = &input.remote_home {
        return Some(h.clone());
    }
    let user = user.map(|u| u.split(':').next().unwrap_or(u))?;
    if input.is_root(user) {
        return Some("/root".to_string());
    }
    if user.is_empty() || user.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(format!("/home/{user}"))
}
