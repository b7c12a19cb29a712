//! Host paths the repository influences, resolved before they are judged and used
//! (spec-note 0400, class 1).
//!
//! A repository can commit symbolic links (git stores them) and write `..` in any path its
//! `devcontainer.json` names, so the text of a path says nothing about where it lands. Every
//! host path devcell reads, packs or mounts for a repository goes through here:
//!
//! - [`resolve`] turns it into a canonical path (no symbolic link, no `..`), following links
//!   the way the kernel does, dangling ones included;
//! - [`Places::place`] / [`confine`] judge the *resolved* path (inside the workspace, the
//!   engine socket, the host home, `/`, elsewhere);
//! - the caller hands the resolved path on ([`resolve_binds`] rewrites a container's bind
//!   sources), so what was judged is what the engine uses and a link swapped after the check
//!   does not matter.
//!
//! devcell's own writes into the workspace (`.devcell/context.json`, `AGENTS.md`, the
//! Features lockfile) go through [`WorkspaceDir`]: every folder below the workspace root is
//! opened relative to its parent's handle with `O_NOFOLLOW`, and files are created and renamed
//! relative to that handle, so a `.devcell` or `AGENTS.md` that is (or becomes) a symbolic link
//! never makes a write land outside the workspace.

use std::ffi::OsStr;
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

use crate::config::ownership::{self, Ids};
use crate::config::workspace::normalize_lexically;
use crate::engine::{ContainerSpec, MountKind};

use super::error::{Result, SecurityError};
use super::policy::{Grants, Permission, is_engine_socket, is_within};

/// How many symbolic links [`resolve`] follows before giving up (Linux's `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// The canonical form of `path`: absolute (relative paths are taken against the current
/// directory), every symbolic link followed and every `.`/`..` applied in the order the kernel
/// applies them (`a/link/..` is the parent of the link's *target*). A part that does not exist
/// is kept as written (lexically normalised), so a bind source the engine would create is
/// judged where it would be created; a dangling link is followed to where it points.
///
/// A path through procfs (`/proc/self/cwd`, `/proc/<pid>/root`, `/dev/fd/3`, `/dev/stdin`,
/// or a link in any other procfs mount) is an error: its magic links name what *the process
/// that follows them* sees, so devcell's view says nothing of what the engine daemon mounts
/// (spec-note 0400, attacks F2).
///
/// Errors: `ELOOP` after [`MAX_LINKS`] links; `EACCES` for a path through procfs; any other
/// error reading a link or a folder (`EACCES` for a folder devcell cannot search: the caller
/// refuses, never judging the written text; spec-note 0400, attacks F1).
pub fn resolve(path: &Path) -> io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    if through_procfs(&absolute) {
        return Err(procfs_error());
    }
    let mut pending: Vec<PathBuf> = Vec::new();
    push_components(&mut pending, &absolute);
    let mut resolved = PathBuf::from("/");
    let mut links = 0usize;
    let mut missing = false;
    while let Some(part) = pending.pop() {
        match part.as_os_str().as_bytes() {
            b"" | b"." => {}
            b".." => {
                resolved.pop();
            }
            _ => {
                resolved.push(&part);
                if missing {
                    continue;
                }
                if through_procfs(&resolved) {
                    return Err(procfs_error());
                }
                match std::fs::symlink_metadata(&resolved) {
                    Ok(m) if m.file_type().is_symlink() => {
                        if resolved.parent().is_some_and(is_procfs) {
                            return Err(procfs_error());
                        }
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(io::Error::from_raw_os_error(libc_eloop()));
                        }
                        let target = std::fs::read_link(&resolved)?;
                        resolved.pop();
                        if target.is_absolute() {
                            resolved = PathBuf::from("/");
                        }
                        push_components(&mut pending, &target);
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => missing = true,
                    Err(e)
                        if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
                    {
                        missing = true
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(resolved)
}

/// Whether `path` lies in `/proc` or is one of the `/dev` links into it, by its text.
fn through_procfs(path: &Path) -> bool {
    [
        "/proc",
        "/dev/fd",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// Whether the folder `dir` is on a procfs mount (one mounted somewhere else than `/proc`).
fn is_procfs(dir: &Path) -> bool {
    const PROC_SUPER_MAGIC: u64 = 0x9fa0;
    rustix::fs::statfs(dir).is_ok_and(|s| s.f_type as u64 == PROC_SUPER_MAGIC)
}

/// The error for a path through procfs.
fn procfs_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "it goes through procfs (/proc, /dev/fd), whose links name what the process following them sees, not what devcell sees",
    )
}

fn libc_eloop() -> i32 {
    rustix::io::Errno::LOOP.raw_os_error()
}

/// Pushes `path`'s parts onto the stack `pending` so they pop in order.
fn push_components(pending: &mut Vec<PathBuf>, path: &Path) {
    let parts: Vec<PathBuf> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(PathBuf::from(s)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

/// The host places a resolved path is judged against, themselves resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// The workspace folder (canonical).
    pub workspace: PathBuf,
    /// The host user's home folder (canonical), if known.
    pub home: Option<PathBuf>,
    /// The engine socket devcell talks to (canonical), if any.
    pub engine_socket: Option<PathBuf>,
}

impl Places {
    /// Resolves each place ([`resolve`]; a place that cannot be resolved is kept as given).
    pub fn new(workspace: &Path, home: Option<&Path>, engine_socket: Option<&Path>) -> Places {
        let canonical = |p: &Path| resolve(p).unwrap_or_else(|_| p.to_path_buf());
        Places {
            workspace: canonical(workspace),
            home: home.map(canonical),
            engine_socket: engine_socket.map(canonical),
        }
    }

    /// Where the resolved path `resolved` lies.
    pub fn place(&self, resolved: &Path) -> Place {
        let text = resolved.to_string_lossy();
        if text == "/" {
            return Place::Root;
        }
        if is_engine_socket(&text, self.engine_socket.as_deref()) {
            return Place::EngineSocket;
        }
        if is_within(&text, &self.workspace.to_string_lossy()) {
            return Place::Workspace;
        }
        if let Some(home) = &self.home {
            let home = home.to_string_lossy();
            if is_within(&text, &home) || is_within(&home, &text) {
                return Place::HostHome;
            }
        }
        Place::Outside
    }
}

/// Where a resolved host path lies ([`Places::place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The workspace folder or inside it.
    Workspace,
    /// An engine socket or a folder holding one ([`is_engine_socket`]).
    EngineSocket,
    /// The host home folder, inside it, or a folder holding it.
    HostHome,
    /// The host's root folder.
    Root,
    /// Anywhere else on the host.
    Outside,
}

impl Place {
    /// A few words for messages: `the workspace`, `the host's root folder`, ….
    pub fn describe(self) -> &'static str {
        match self {
            Place::Workspace => "inside the workspace",
            Place::EngineSocket => "the container engine's socket (or a folder holding it)",
            Place::HostHome => "the host home folder",
            Place::Root => "the host's root folder",
            Place::Outside => "outside the workspace",
        }
    }
}

/// Judges a host path the repository names that devcell would *read or pack* (the
/// `devcontainer.json` itself, `build.dockerfile`, `build.context`, a local Feature folder):
/// `what` names it in errors (`build.context`), `written` is the path as written (made
/// absolute by the caller). Returns the resolved path, to be used instead of `written`.
///
/// Inside the workspace: allowed. Outside: allowed only when `grants` holds
/// `--allow mount:<resolved path>` (or a folder above it); never for an engine socket, the
/// host's root folder or a folder holding the home folder. Nothing is read here but link
/// targets.
///
/// Errors: [`SecurityError::PathOutside`] naming `what`, the path as written, what it
/// resolves to and where that is; [`SecurityError::PathUnresolvable`] for a link loop.
pub fn confine(what: &str, written: &Path, places: &Places, grants: &Grants) -> Result<PathBuf> {
    let resolved = resolve(written).map_err(|e| SecurityError::PathUnresolvable {
        what: what.to_string(),
        written: written.to_path_buf(),
        message: e.to_string(),
    })?;
    let place = places.place(&resolved);
    let grantable = match place {
        Place::Workspace => return Ok(resolved),
        Place::Outside => true,
        // a grant of the home folder itself may read files below it, never above it
        Place::HostHome => places
            .home
            .as_deref()
            .is_some_and(|h| resolved.starts_with(h)),
        Place::EngineSocket | Place::Root => false,
    };
    let permission = Permission::Mount(resolved.to_string_lossy().into_owned());
    if grantable && grants.allows(&permission) {
        return Ok(resolved);
    }
    Err(SecurityError::PathOutside {
        what: what.to_string(),
        written: written.to_path_buf(),
        resolved,
        place: place.describe(),
        grant: grantable.then(|| permission.grant_flag()).flatten(),
    })
}

/// Reads the file at the canonical path `resolved` (what [`confine`] returned) without
/// following any symbolic link: every folder from `/` down is opened relative to its parent
/// with `O_NOFOLLOW`, then the file itself, so a link swapped in after the judgement makes the
/// read fail instead of reaching another file. At most `max` bytes: a larger file (or a FIFO,
/// a device: anything but a regular file) is an error, never a hang. `Ok(None)`: no such file.
///
/// Errors: `ELOOP`/`ENOTDIR` (a part became a symbolic link; the message says so),
/// `InvalidData` for a file above `max` bytes or not a regular file, any other read error.
pub fn read_no_follow(resolved: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    let linked = |e: rustix::io::Errno| -> io::Error {
        if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
            io::Error::other(format!(
                "`{}`: a part of the path is a symbolic link (changed after it was judged): not read",
                resolved.display()
            ))
        } else {
            e.into()
        }
    };
    if !resolved.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` is not an absolute path", resolved.display()),
        ));
    }
    let parts: Vec<&OsStr> = resolved
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    let Some((name, folders)) = parts.split_last() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "`/` is not a file",
        ));
    };
    let mut dir = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for folder in folders {
        dir = match rustix::fs::openat(
            &dir,
            *folder,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(linked(e)),
        };
    }
    let fd = match rustix::fs::openat(
        &dir,
        *name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(linked(e)),
    };
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("`{}` is not a regular file: not read", resolved.display()),
        ));
    }
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is larger than {max} bytes: not read",
                resolved.display()
            ),
        )
    };
    if stat.st_size as u64 > max {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(Some(bytes))
}

/// Judges every symbolic link below the folder `dir` (the folder itself judged by the caller
/// with [`confine`]), without following any: each link is resolved ([`resolve`]) and must land
/// inside the workspace or be granted, as [`confine`] decides; `what` names the folder in
/// errors (`local Feature `./f``). Real sub-folders are walked; links never are, so the walk
/// ends. Used where a folder's content is packed for a build (local Features): a link out of
/// the workspace would carry a host path into an image.
///
/// Errors: as [`confine`], naming the link; [`SecurityError::PathUnresolvable`] for a folder
/// that cannot be read.
pub fn confine_links(what: &str, dir: &Path, places: &Places, grants: &Grants) -> Result<()> {
    let unreadable = |path: &Path, e: io::Error| SecurityError::PathUnresolvable {
        what: what.to_string(),
        written: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(&folder, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| unreadable(&folder, e))?;
            let kind = entry
                .file_type()
                .map_err(|e| unreadable(&entry.path(), e))?;
            if kind.is_symlink() {
                let rel = entry
                    .path()
                    .strip_prefix(dir)
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|_| entry.path());
                confine(
                    &format!("{what}: `{}`", rel.display()),
                    &entry.path(),
                    places,
                    grants,
                )?;
            } else if kind.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    Ok(())
}

/// One bind source [`resolve_binds`] changed: as written and as resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBind {
    /// The container path.
    pub target: String,
    /// The source as the configuration wrote it.
    pub written: String,
    /// What it resolves to (now the mount's source).
    pub resolved: String,
}

/// Replaces every absolute bind source of `spec` by its resolved path ([`resolve`]), so the
/// policy judges, and the engine mounts, what the source points at rather than the link the
/// repository wrote. Relative sources are left (the policy treats them as outside the
/// workspace). Returns the sources that changed.
///
/// Errors: [`SecurityError::PathUnresolvable`] for a source that cannot be resolved (a link
/// loop, a folder devcell cannot search, a path through procfs): it fails closed, never judged
/// by its written text, since the engine (root, in its own process) would follow it somewhere
/// devcell never saw (spec-note 0400, attacks F1).
pub fn resolve_binds(spec: &mut ContainerSpec) -> Result<Vec<ResolvedBind>> {
    let mut changed = Vec::new();
    for m in spec.mounts.iter_mut().filter(|m| m.kind == MountKind::Bind) {
        let Some(source) = m.source.clone().filter(|s| s.starts_with('/')) else {
            continue;
        };
        let resolved =
            resolve(Path::new(&source)).map_err(|e| SecurityError::PathUnresolvable {
                what: format!("the bind mount source for `{}`", m.target),
                written: PathBuf::from(&source),
                message: e.to_string(),
            })?;
        let resolved = resolved.to_string_lossy().into_owned();
        if resolved != source {
            changed.push(ResolvedBind {
                target: m.target.clone(),
                written: source,
                resolved: resolved.clone(),
            });
            m.source = Some(resolved);
        }
    }
    Ok(changed)
}

/// A host path the command line mounts read-only (the handoff's overlays of each repository's
/// git `config`, `hooks`, `info/`, link files: spec-note 0413; or the user's own
/// `--mount …,readonly`) stays read-only through every other bind of `spec` (spec-note 0413,
/// sixth attacker's review): a read-write bind of a folder holding it gets a read-only overlay
/// of it at the same place below its target, and a bind of it, or of a path inside it, is made
/// read-only. `protected` are the targets of those read-only mounts; bind sources must already
/// be resolved ([`resolve_binds`]). Returns the targets it added or made read-only.
pub fn keep_read_only(spec: &mut ContainerSpec, protected: &[String]) -> Vec<String> {
    let shields: Vec<(PathBuf, String)> = spec
        .mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind && m.read_only && protected.contains(&m.target))
        .filter_map(|m| Some((PathBuf::from(m.source.as_deref()?), m.target.clone())))
        .collect();
    let mut changed = Vec::new();
    let mut overlays: Vec<crate::engine::Mount> = Vec::new();
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Bind && !m.read_only)
    {
        let Some(source) = m.source.as_deref().map(PathBuf::from) else {
            continue;
        };
        if shields.iter().any(|(shield, _)| source.starts_with(shield)) {
            m.read_only = true;
            changed.push(m.target.clone());
            continue;
        }
        for (shield, shield_target) in &shields {
            let Ok(rel) = shield.strip_prefix(&source) else {
                continue;
            };
            let target = format!(
                "{}/{}",
                m.target.trim_end_matches('/'),
                rel.to_string_lossy()
            );
            if target != *shield_target {
                overlays.push(crate::engine::Mount {
                    kind: MountKind::Bind,
                    source: Some(shield.to_string_lossy().into_owned()),
                    target,
                    read_only: true,
                });
            }
        }
    }
    for overlay in overlays {
        if !spec.mounts.iter().any(|m| m.target == overlay.target) {
            changed.push(overlay.target.clone());
            spec.mounts.push(overlay);
        }
    }
    changed
}

/// A host path the handoff shows the container something else in place of (spec-note 0436):
/// `covered` (a repository's `.git`, its host git directories) is hidden under a bind of
/// `source` (its container git directory, or devcell's `.git` file), read-write or not; or, for
/// a `folder` cover, `covered` is a folder bound on itself (the workspace, a repository's or a
/// submodule's working tree, a folder above a submodule): a mount point, which cannot be renamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    /// The host path hidden (canonical).
    pub covered: PathBuf,
    /// What the container sees instead (host path).
    pub source: PathBuf,
    /// Whether that bind is read-only.
    pub read_only: bool,
    /// Whether `covered` is a folder bound on itself (only what holds it needs the same bind).
    pub folder: bool,
}

impl Cover {
    /// Whether a bind of a path inside `covered` must be redirected to the cover: every cover
    /// but a read-write folder bound on itself (what is inside it is ordinary content).
    pub fn hides_inside(&self) -> bool {
        !self.folder || self.read_only
    }
}

/// What one bind (host `source`, read-only or not) becomes under `covers` (spec-note 0436).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Covered {
    /// The bind shows (a path inside) a covered path: it shows the same path of the cover
    /// instead, read-only (never the host's git directory, not even to read its `config`).
    Redirect(PathBuf),
    /// The bind holds covered paths: each cover's bind below its target (relative path,
    /// cover source, read-only); empty when the bind touches no cover.
    Overlays(Vec<(PathBuf, PathBuf, bool)>),
}

/// Judges a bind of `source` (read-only when `read_only`) against `covers`; see [`Covered`].
pub fn cover_bind(source: &Path, read_only: bool, covers: &[Cover]) -> Covered {
    if let Some(c) = covers
        .iter()
        .find(|c| c.hides_inside() && source.starts_with(&c.covered))
    {
        let rel = source.strip_prefix(&c.covered).unwrap_or(Path::new(""));
        let to = if rel.as_os_str().is_empty() {
            c.source.clone()
        } else {
            c.source.join(rel)
        };
        return Covered::Redirect(to);
    }
    let mut overlays = Vec::new();
    for c in covers {
        // through a read-only bind nothing can be renamed and a path shown as itself is the same
        if read_only && c.source == c.covered {
            continue;
        }
        match c.covered.strip_prefix(source) {
            Ok(rel) if !rel.as_os_str().is_empty() => overlays.push((
                rel.to_path_buf(),
                c.source.clone(),
                c.read_only || read_only,
            )),
            _ => {}
        }
    }
    Covered::Overlays(overlays)
}

/// Keeps every [`Cover`] in place through every other bind of `spec` (sources resolved), read-only
/// or not: a bind whose source holds a covered path gets the cover's bind at the same place
/// below its own target (`/ws2/.git` for a second bind of the workspace at `/ws2`, `/w/ws` for a
/// bind of the workspace's parent); a bind of a covered path, or of a path inside one
/// (`.git/hooks`), shows the cover's counterpart instead, read-only: the container never sees
/// the host's git directory, not even to read its `config` (spec-note 0436). Binds at `skip`
/// (devcell's own) are left as they are. Returns the targets added or changed.
pub fn keep_covered(spec: &mut ContainerSpec, covers: &[Cover], skip: &[String]) -> Vec<String> {
    let mut changed = Vec::new();
    let mut overlays: Vec<crate::engine::Mount> = Vec::new();
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Bind && !skip.contains(&m.target))
    {
        let Some(source) = m.source.as_deref().map(PathBuf::from) else {
            continue;
        };
        match cover_bind(&source, m.read_only, covers) {
            Covered::Redirect(to) => {
                m.source = Some(to.to_string_lossy().into_owned());
                m.read_only = true;
                changed.push(m.target.clone());
            }
            Covered::Overlays(list) => {
                for (rel, from, read_only) in list {
                    overlays.push(crate::engine::Mount {
                        kind: MountKind::Bind,
                        source: Some(from.to_string_lossy().into_owned()),
                        target: format!(
                            "{}/{}",
                            m.target.trim_end_matches('/'),
                            rel.to_string_lossy()
                        ),
                        read_only,
                    });
                }
            }
        }
    }
    for overlay in overlays {
        if !spec.mounts.iter().any(|m| m.target == overlay.target) {
            changed.push(overlay.target.clone());
            spec.mounts.push(overlay);
        }
    }
    changed
}

/// The volume entries (Compose long syntax) to add to each service of a resolved Compose
/// `model` so the read-only `shields` (host source, container target of each read-only bind of
/// the command line: the handoff's git overlays) stay read-only through the services' own
/// binds (spec-note 0413), as [`keep_read_only`] does for one container: a read-write bind
/// (`type: bind`, not `read_only`) whose source holds a shield gets a read-only bind of it at
/// the same place below the volume's target; a bind of a shield, or of a path inside one, gets
/// an entry with the same `target` and `read_only: true` (Compose merges a service's `volumes`
/// by target). `resolve` canonicalises a volume's source (symbolic links followed); the shields'
/// sources must already be canonical. A target the service already mounts something at gets no
/// overlay. Services that need nothing are left out.
pub fn compose_read_only_additions(
    model: &serde_json::Value,
    shields: &[(PathBuf, String)],
    resolve: impl Fn(&Path) -> PathBuf,
) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    let covers: Vec<Cover> = shields
        .iter()
        .map(|(s, _)| Cover {
            covered: s.clone(),
            source: s.clone(),
            read_only: true,
            folder: false,
        })
        .collect();
    compose_cover_additions(model, &covers, resolve)
}

/// [`compose_read_only_additions`] for [`Cover`]s, as [`keep_covered`] does for one container:
/// a service's bind (read-only or not) whose source holds a covered path gets the cover's bind
/// below its target (read-only when either is); a bind of a covered path or of a path inside
/// one gets an entry of the same target showing the cover's counterpart, `read_only: true`
/// (Compose merges a service's `volumes` by target; spec-note 0436).
pub fn compose_cover_additions(
    model: &serde_json::Value,
    covers: &[Cover],
    resolve: impl Fn(&Path) -> PathBuf,
) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    use serde_json::{Value, json};
    let mut out = std::collections::BTreeMap::new();
    if covers.is_empty() {
        return out;
    }
    let Some(services) = model.get("services").and_then(Value::as_object) else {
        return out;
    };
    for (name, service) in services {
        let volumes: &[Value] = service
            .get("volumes")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut taken: Vec<String> = volumes
            .iter()
            .filter_map(|v| v.get("target").and_then(Value::as_str))
            .map(|t| t.trim_end_matches('/').to_string())
            .collect();
        let mut added = Vec::new();
        for volume in volumes {
            let (Some(kind), Some(source), Some(target)) = (
                volume.get("type").and_then(Value::as_str),
                volume.get("source").and_then(Value::as_str),
                volume.get("target").and_then(Value::as_str),
            ) else {
                continue;
            };
            // a named volume whose driver options bind a host folder is that bind (attacks F6)
            let (source, backed) = match kind {
                "bind" => (source, false),
                "volume" => match bind_backed_volume(model, source) {
                    Some(device) => (device, true),
                    None => continue,
                },
                _ => continue,
            };
            let read_only = volume.get("read_only").and_then(Value::as_bool) == Some(true);
            let resolved = resolve(Path::new(source));
            match cover_bind(&resolved, read_only, covers) {
                Covered::Redirect(to) => {
                    if read_only && to == resolved && !backed {
                        continue;
                    }
                    // same target: Compose merges a service's `volumes` by target
                    let mut redirected = if backed {
                        json!({"type": "bind", "target": target})
                    } else {
                        volume.clone()
                    };
                    redirected["source"] = json!(to.to_string_lossy());
                    redirected["read_only"] = json!(true);
                    added.push(redirected);
                }
                Covered::Overlays(list) => {
                    for (rel, from, read_only) in list {
                        let overlay =
                            format!("{}/{}", target.trim_end_matches('/'), rel.to_string_lossy());
                        if taken.contains(&overlay) {
                            continue;
                        }
                        taken.push(overlay.clone());
                        added.push(json!({
                            "type": "bind",
                            "source": from.to_string_lossy(),
                            "target": overlay,
                            "read_only": read_only,
                        }));
                    }
                }
            }
        }
        if !added.is_empty() {
            out.insert(name.clone(), added);
        }
    }
    out
}

/// A workspace folder opened once; devcell's writes below it are made relative to this handle
/// and never follow a symbolic link below it (see the module docs).
#[derive(Debug)]
pub struct WorkspaceDir {
    fd: OwnedFd,
    root: PathBuf,
}

/// Why a write below a [`WorkspaceDir`] was not made.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A part of the path is a symbolic link or not a folder/file: nothing was written.
    #[error("`{}` is a symbolic link or not a regular file or folder: devcell does not write through it", path.display())]
    Unsafe {
        /// The offending path.
        path: PathBuf,
    },
    /// The path is absolute or holds `..`.
    #[error("`{path}` is not a relative path inside the workspace")]
    InvalidPath {
        /// The path as given.
        path: String,
    },
    /// The file exists and devcell must not replace it.
    #[error("`{}` exists and was not written by devcell: left as it is", path.display())]
    NotOwned {
        /// The file.
        path: PathBuf,
    },
    /// The file exists (a no-clobber write).
    #[error("`{}` exists", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A system call failed.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
}

/// How [`WorkspaceDir::write`] treats an existing file.
pub enum Existing<'a> {
    /// Replace it only when the predicate, given its bytes (at most 16 MiB), says devcell wrote
    /// it.
    ReplaceIfOwned(&'a dyn Fn(&[u8]) -> bool),
    /// Replace it (e.g. the lockfile).
    Replace,
    /// Never replace it: [`WriteError::Exists`].
    Keep,
}

const MAX_OWNED_READ: u64 = 16 * 1024 * 1024;

fn errno_io(path: &Path) -> impl Fn(rustix::io::Errno) -> WriteError + '_ {
    move |e| {
        if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
            WriteError::Unsafe {
                path: path.to_path_buf(),
            }
        } else {
            WriteError::Io {
                path: path.to_path_buf(),
                source: e.into(),
            }
        }
    }
}

impl WorkspaceDir {
    /// Opens the workspace folder `root` (the user's choice: a link there is followed once).
    ///
    /// Errors: [`WriteError::Io`].
    pub fn open(root: &Path) -> std::result::Result<WorkspaceDir, WriteError> {
        let fd = rustix::fs::open(
            root,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WriteError::Io {
            path: root.to_path_buf(),
            source: e.into(),
        })?;
        Ok(WorkspaceDir {
            fd,
            root: root.to_path_buf(),
        })
    }

    /// The workspace folder as opened.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `bytes` to `rel` (below the root) atomically: missing folders are created (the
    /// first one created gets a `.gitignore` holding `*` when `ignore_new_folders`), a
    /// temporary file is made in the target's folder and renamed into place, all relative to
    /// folder handles opened with `O_NOFOLLOW`. A root devcell gives every folder and file it
    /// creates to the workspace's owner (spec-note 0250). Returns the written file's path.
    ///
    /// Errors: [`WriteError::InvalidPath`], [`WriteError::Unsafe`] (a part is a symbolic link
    /// or of the wrong type), [`WriteError::NotOwned`] / [`WriteError::Exists`] (per
    /// `existing`), [`WriteError::Io`].
    pub fn write(
        &self,
        rel: &str,
        bytes: &[u8],
        mode: u32,
        existing: Existing<'_>,
        ignore_new_folders: bool,
    ) -> std::result::Result<PathBuf, WriteError> {
        let parts = relative_parts(rel)?;
        let (name, folders) = parts.split_last().expect("not empty");
        let owner = self.new_files_owner();
        let opened = self.open_folders(folders, owner)?;
        if ignore_new_folders && let Some((first, first_path)) = &opened.first_created {
            let ignore = first_path.join(".gitignore");
            self.create_file(first, OsStr::new(".gitignore"), &ignore, 0o644, owner)
                .and_then(|fd| {
                    write_all(
                        fd,
                        b"# created by devcell: keep its files out of git\n*\n",
                        &ignore,
                    )
                })?;
        }
        check_existing(&opened.dir, name, &opened.path.join(name), &existing)?;
        self.replace(&opened, name, bytes, mode, &existing, owner)
    }

    /// Who devcell's new folders and files go to: the workspace's owner when devcell runs as
    /// root, else nobody (they stay the process's).
    fn new_files_owner(&self) -> Option<Ids> {
        ownership::hand_over_to(
            ownership::process_ids(),
            rustix::fs::fstat(&self.fd).ok().map(|s| Ids {
                uid: s.st_uid,
                gid: s.st_gid,
            }),
        )
    }

    /// Opens (creating the missing ones) `folders` below the root, each relative to its
    /// parent's handle with `O_NOFOLLOW`.
    fn open_folders(
        &self,
        folders: &[&OsStr],
        owner: Option<Ids>,
    ) -> std::result::Result<OpenedFolder, WriteError> {
        let mut dir: Option<OwnedFd> = None;
        let mut path = self.root.clone();
        let mut first_created: Option<(OwnedFd, PathBuf)> = None;
        for folder in folders {
            path.push(folder);
            let parent = dir.as_ref().unwrap_or(&self.fd);
            let open = || {
                rustix::fs::openat(
                    parent,
                    *folder,
                    OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            let fd = match open() {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT) => {
                    match rustix::fs::mkdirat(parent, *folder, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(errno_io(&path)(e)),
                    }
                    let fd = open().map_err(errno_io(&path))?;
                    give(owner, &fd, &path)?;
                    if first_created.is_none() {
                        let dup =
                            rustix::io::fcntl_dupfd_cloexec(&fd, 0).map_err(errno_io(&path))?;
                        first_created = Some((dup, path.clone()));
                    }
                    fd
                }
                Err(e) => return Err(errno_io(&path)(e)),
            };
            dir = Some(fd);
        }
        let dir = dir
            .unwrap_or(rustix::io::fcntl_dupfd_cloexec(&self.fd, 0).map_err(errno_io(&self.root))?);
        Ok(OpenedFolder {
            dir,
            path,
            first_created,
        })
    }

    /// Writes `bytes` to a temporary file in `folder` and renames it to `name` (never over an
    /// existing file when [`Existing::Keep`]); the temporary file is removed when that fails.
    fn replace(
        &self,
        folder: &OpenedFolder,
        name: &OsStr,
        bytes: &[u8],
        mode: u32,
        existing: &Existing<'_>,
        owner: Option<Ids>,
    ) -> std::result::Result<PathBuf, WriteError> {
        let dir = &folder.dir;
        let target = folder.path.join(name);
        // a temporary name only devcell uses, created exclusively (never through a link)
        let tmp_name = format!(
            ".devcell-tmp-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let tmp_path = folder.path.join(&tmp_name);
        let fd = self.create_file(dir, OsStr::new(&tmp_name), &tmp_path, mode, owner)?;
        let written = write_all(fd, bytes, &tmp_path);
        let renamed = written.and_then(|()| {
            let flags = match existing {
                Existing::Keep => RenameFlags::NOREPLACE,
                _ => RenameFlags::empty(),
            };
            rustix::fs::renameat_with(dir, tmp_name.as_str(), dir, name, flags).map_err(|e| {
                if e == rustix::io::Errno::EXIST {
                    WriteError::Exists {
                        path: target.clone(),
                    }
                } else {
                    errno_io(&target)(e)
                }
            })
        });
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        }
        renamed.map(|()| target)
    }

    /// Creates `name` in `dir` exclusively (`O_EXCL|O_NOFOLLOW`), mode `mode`, owned as
    /// devcell's files are.
    fn create_file(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        path: &Path,
        mode: u32,
        owner: Option<Ids>,
    ) -> std::result::Result<OwnedFd, WriteError> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(errno_io(path))?;
        // the umask must not narrow what the agent (another uid) needs to read
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(errno_io(path))?;
        give(owner, &fd, path)?;
        Ok(fd)
    }
}

/// The folder a [`WorkspaceDir::write`] writes into, opened.
struct OpenedFolder {
    /// Its handle.
    dir: OwnedFd,
    /// Its path.
    path: PathBuf,
    /// The first folder the write created, if it created one (for its `.gitignore`).
    first_created: Option<(OwnedFd, PathBuf)>,
}

/// The parts of a write's relative path: normal names only, at least one.
fn relative_parts(rel: &str) -> std::result::Result<Vec<&OsStr>, WriteError> {
    Path::new(rel)
        .components()
        .map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect::<Option<_>>()
        .filter(|p: &Vec<&OsStr>| !p.is_empty())
        .ok_or_else(|| WriteError::InvalidPath {
            path: rel.to_string(),
        })
}

/// Gives `fd` to `owner` (see [`WorkspaceDir::write`]); nothing when there is none.
fn give(owner: Option<Ids>, fd: &OwnedFd, path: &Path) -> std::result::Result<(), WriteError> {
    match owner {
        Some(ids) => rustix::fs::fchown(
            fd,
            Some(rustix::fs::Uid::from_raw(ids.uid)),
            Some(rustix::fs::Gid::from_raw(ids.gid)),
        )
        .map_err(errno_io(path)),
        None => Ok(()),
    }
}

/// Whether `name` in `dir` may be replaced: absent, or a regular file `existing` allows to
/// replace (read without following a link, at most [`MAX_OWNED_READ`] bytes).
fn check_existing(
    dir: &OwnedFd,
    name: &OsStr,
    target: &Path,
    existing: &Existing<'_>,
) -> std::result::Result<(), WriteError> {
    let target = target.to_path_buf();
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                return Err(WriteError::Unsafe { path: target });
            }
            match existing {
                Existing::Keep => Err(WriteError::Exists { path: target }),
                Existing::Replace => Ok(()),
                Existing::ReplaceIfOwned(owned) => {
                    let fd = rustix::fs::openat(
                        dir,
                        name,
                        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
                        Mode::empty(),
                    )
                    .map_err(errno_io(&target))?;
                    let stat = rustix::fs::fstat(&fd).map_err(errno_io(&target))?;
                    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
                        || stat.st_size as u64 > MAX_OWNED_READ
                    {
                        return Err(WriteError::NotOwned { path: target });
                    }
                    let mut bytes = Vec::new();
                    std::fs::File::from(fd)
                        .take(MAX_OWNED_READ)
                        .read_to_end(&mut bytes)
                        .map_err(|source| WriteError::Io {
                            path: target.clone(),
                            source,
                        })?;
                    if owned(&bytes) {
                        Ok(())
                    } else {
                        Err(WriteError::NotOwned { path: target })
                    }
                }
            }
        }
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(errno_io(&target)(e)),
    }
}

/// A folder devcell writes its own output files into that a repository may have laid out,
/// such as `features package`'s default `./output` (spec-note 0400): a folder below the
/// current folder `cwd` is written relative to `cwd`'s handle ([`WorkspaceDir`]: no folder or
/// file below `cwd` is followed when it is a symbolic link, a file in the way is replaced,
/// never written through); any other folder (the user's own path, created when missing) is
/// the handle itself, so its files are still never written through a link.
///
/// Errors: [`WriteError::Unsafe`] when a folder from `cwd` down to `folder` exists as a
/// symbolic link (its files would land where the repository points); [`WriteError::Io`].
#[derive(Debug)]
pub struct OutputDir {
    dir: WorkspaceDir,
    rel: PathBuf,
}

impl OutputDir {
    /// Opens `folder` (relative to `cwd` unless absolute) as described on [`OutputDir`].
    ///
    /// Errors: as [`OutputDir`].
    pub fn open(cwd: &Path, folder: &Path) -> std::result::Result<OutputDir, WriteError> {
        let absolute = normalize_lexically(&cwd.join(folder));
        if let Ok(rel) = absolute.strip_prefix(cwd)
            && !rel.as_os_str().is_empty()
        {
            let mut path = cwd.to_path_buf();
            for part in rel.components() {
                path.push(part);
                if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(WriteError::Unsafe { path });
                }
            }
            return Ok(OutputDir {
                dir: WorkspaceDir::open(cwd)?,
                rel: rel.to_path_buf(),
            });
        }
        std::fs::create_dir_all(&absolute).map_err(|source| WriteError::Io {
            path: absolute.clone(),
            source,
        })?;
        Ok(OutputDir {
            dir: WorkspaceDir::open(&absolute)?,
            rel: PathBuf::new(),
        })
    }

    /// The folder's path.
    pub fn path(&self) -> PathBuf {
        self.dir.root().join(&self.rel)
    }

    /// Writes `bytes` as `name` in the folder (mode 0644), replacing a regular file of that
    /// name and refusing anything else in its place ([`WorkspaceDir::write`]).
    ///
    /// Errors: as [`WorkspaceDir::write`].
    pub fn write(&self, name: &str, bytes: &[u8]) -> std::result::Result<PathBuf, WriteError> {
        let rel = self.rel.join(name);
        self.dir.write(
            &rel.to_string_lossy(),
            bytes,
            0o644,
            Existing::Replace,
            false,
        )
    }
}

fn write_all(fd: OwnedFd, bytes: &[u8], path: &Path) -> std::result::Result<(), WriteError> {
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|source| WriteError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// The host folder a named volume binds through its driver options (`type: none`, `o: bind`,
/// `device: <path>`), if it does: such a volume is that bind for every rule (its request, the
/// covers of `.git`, the stop after the agent; spec-note 0400, attacks F6).
pub(crate) fn bind_backed_volume<'a>(
    model: &'a serde_json::Value,
    volume: &str,
) -> Option<&'a str> {
    let opts = model.get("volumes")?.get(volume)?.get("driver_opts")?;
    let o = opts
        .get("o")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    o.split(',')
        .any(|f| matches!(f.trim(), "bind" | "rbind"))
        .then(|| opts.get("device").and_then(serde_json::Value::as_str))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Mount;
    use std::os::unix::fs::symlink;

    /// A temp tree: `ws/` (the workspace, with `sub/`), `host/secret.txt` outside it.
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let ws = base.join("ws");
        let host = base.join("host");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(&host).unwrap();
        std::fs::write(host.join("secret.txt"), "s").unwrap();
        (t, ws, host)
    }

    fn places(ws: &Path) -> Places {
        Places::new(
            ws,
            Some(Path::new("/root")),
            Some(Path::new("/run/docker.sock")),
        )
    }

    #[test]
    fn links_and_dots_resolve_like_the_kernel() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("out")).unwrap();
        symlink("../host", ws.join("rel")).unwrap();
        symlink("out", ws.join("nested")).unwrap();
        symlink("/", ws.join("root")).unwrap();
        assert_eq!(resolve(&ws.join("out")).unwrap(), host);
        assert_eq!(
            resolve(&ws.join("rel/secret.txt")).unwrap(),
            host.join("secret.txt")
        );
        assert_eq!(resolve(&ws.join("nested")).unwrap(), host);
        assert_eq!(resolve(&ws.join("root")).unwrap(), Path::new("/"));
        // `..` after a link is the parent of its target, not of the link
        assert_eq!(resolve(&ws.join("out/..")).unwrap(), host.parent().unwrap());
        assert_eq!(resolve(&ws.join("sub/../sub/./")).unwrap(), ws.join("sub"));
        assert_eq!(
            resolve(&ws.join("../..")).unwrap(),
            ws.parent().unwrap().parent().unwrap()
        );
    }

    #[test]
    fn missing_parts_are_kept_and_dangling_links_followed() {
        let (_t, ws, host) = tree();
        assert_eq!(resolve(&ws.join("new/dir")).unwrap(), ws.join("new/dir"));
        symlink(host.join("not-yet"), ws.join("dangling")).unwrap();
        assert_eq!(
            resolve(&ws.join("dangling/x")).unwrap(),
            host.join("not-yet/x")
        );
    }

    #[test]
    fn link_loops_are_an_error() {
        let (_t, ws, _) = tree();
        symlink("b", ws.join("a")).unwrap();
        symlink("a", ws.join("b")).unwrap();
        let e = resolve(&ws.join("a")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc_eloop()));
    }

    #[test]
    fn places_are_judged_on_the_resolved_path() {
        let (_t, ws, host) = tree();
        let p = places(&ws);
        assert_eq!(p.place(&ws.join("sub")), Place::Workspace);
        assert_eq!(p.place(&host), Place::Outside);
        assert_eq!(p.place(Path::new("/")), Place::Root);
        assert_eq!(p.place(Path::new("/run")), Place::EngineSocket);
        assert_eq!(p.place(Path::new("/root/.ssh")), Place::HostHome);
    }

    #[test]
    fn confine_refuses_outside_names_both_paths_and_honours_a_mount_grant() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("ctx")).unwrap();
        let p = places(&ws);
        assert_eq!(
            confine("build.context", &ws.join("sub"), &p, &Grants::default()).unwrap(),
            ws.join("sub")
        );
        let err = confine("build.context", &ws.join("ctx"), &p, &Grants::default()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&ws.join("ctx").display().to_string()),
            "{text}"
        );
        assert!(text.contains(&host.display().to_string()), "{text}");
        let hint = crate::diagnostics::Hint::hint(&err).unwrap();
        assert!(
            hint.contains(&format!("--allow mount:{}", host.display())),
            "{hint}"
        );
        let grants = Grants::parse(&[format!("mount:{}", host.display())]).unwrap();
        assert_eq!(
            confine("build.context", &ws.join("ctx"), &p, &grants).unwrap(),
            host
        );
        // `/` and the engine socket's folder are never granted
        symlink("/", ws.join("r")).unwrap();
        let all = Grants::parse(&["mount:/"]).unwrap();
        assert!(confine("build.context", &ws.join("r"), &p, &all).is_err());
        assert!(confine("build.context", Path::new("/run"), &p, &all).is_err());
    }

    #[test]
    fn binds_are_rewritten_to_what_they_resolve_to() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("out")).unwrap();
        let bind = |s: &str, t: &str| Mount {
            kind: MountKind::Bind,
            source: Some(s.into()),
            target: t.into(),
            read_only: false,
        };
        let mut spec = ContainerSpec {
            mounts: vec![
                bind(&ws.display().to_string(), "/workspace"),
                bind(&ws.join("out").display().to_string(), "/x"),
                bind("relative", "/r"),
            ],
            ..ContainerSpec::default()
        };
        let changed = resolve_binds(&mut spec).unwrap();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].target, "/x");
        assert_eq!(
            spec.mounts[1].source.as_deref(),
            Some(&*host.to_string_lossy())
        );
        assert_eq!(spec.mounts[2].source.as_deref(), Some("relative"));
    }

    /// Attack (spec-note 0400, F1/F2): a bind source devcell cannot resolve (a link loop, a
    /// folder it cannot search, a path through procfs whose links name what the *engine*
    /// sees) is refused, never judged by its written text inside the workspace, and the spec
    /// is left for no engine to mount.
    #[test]
    fn a_bind_whose_resolution_fails_is_refused_not_judged_as_written() {
        let (_t, ws, _host) = tree();
        symlink("loop", ws.join("loop")).unwrap();
        symlink("/proc/self/cwd", ws.join("cwd")).unwrap();
        symlink("/dev/fd/0", ws.join("fd")).unwrap();
        let mut sources = vec![ws.join("loop/x"), ws.join("cwd"), ws.join("fd")];
        sources.push(PathBuf::from("/proc/1/root"));
        if !rustix::process::geteuid().is_root() {
            // the attack's own shape: a link below a folder devcell cannot search
            std::fs::create_dir(ws.join("d")).unwrap();
            symlink("/", ws.join("d/link")).unwrap();
            std::fs::set_permissions(
                ws.join("d"),
                std::os::unix::fs::PermissionsExt::from_mode(0o000),
            )
            .unwrap();
            sources.push(ws.join("d/link"));
        }
        for source in &sources {
            let mut spec = ContainerSpec {
                mounts: vec![Mount {
                    kind: MountKind::Bind,
                    source: Some(source.display().to_string()),
                    target: "/host".into(),
                    read_only: true,
                }],
                ..ContainerSpec::default()
            };
            let err = resolve_binds(&mut spec).unwrap_err();
            assert!(
                matches!(&err, SecurityError::PathUnresolvable { written, .. } if written == source),
                "{source:?}: {err:?}"
            );
            assert!(resolve(source).is_err(), "{source:?}");
            // the judgement of a path devcell reads fails closed the same way
            assert!(
                matches!(
                    confine("x", source, &places(&ws), &Grants::default()),
                    Err(SecurityError::PathUnresolvable { .. })
                ),
                "{source:?}"
            );
        }
        if ws.join("d").exists() {
            std::fs::set_permissions(
                ws.join("d"),
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            )
            .unwrap();
        }
        // nothing on the host was touched: the workspace holds only what the test made
        let mut names: Vec<String> = std::fs::read_dir(&ws)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.retain(|n| n != "d" && n != "sub");
        assert_eq!(names, ["cwd", "fd", "loop"]);
    }

    /// `features package`'s output folder: a linked folder below the current folder is refused,
    /// a linked file in it is an error (never written through), a real folder is written, and
    /// a folder outside the current folder is created and written from its own handle.
    #[test]
    fn output_folders_never_write_through_links() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("out")).unwrap();
        assert!(matches!(
            OutputDir::open(&ws, Path::new("out")),
            Err(WriteError::Unsafe { .. })
        ));
        std::fs::remove_file(ws.join("out")).unwrap();
        std::fs::create_dir(ws.join("out")).unwrap();
        symlink(host.join("secret.txt"), ws.join("out/f.json")).unwrap();
        let out = OutputDir::open(&ws, Path::new("./out")).unwrap();
        assert!(matches!(
            out.write("f.json", b"x"),
            Err(WriteError::Unsafe { .. })
        ));
        assert_eq!(std::fs::read(host.join("secret.txt")).unwrap(), b"s");
        out.write("g.json", b"g").unwrap();
        assert_eq!(std::fs::read(ws.join("out/g.json")).unwrap(), b"g");
        let elsewhere = OutputDir::open(&ws, &host.join("new")).unwrap();
        elsewhere.write("h.json", b"h").unwrap();
        assert_eq!(std::fs::read(host.join("new/h.json")).unwrap(), b"h");
    }

    #[test]
    fn writes_never_follow_a_link_below_the_root() {
        let (_t, ws, host) = tree();
        let dir = WorkspaceDir::open(&ws).unwrap();
        let path = dir
            .write(
                ".devcell/context.json",
                b"{}",
                0o644,
                Existing::Replace,
                true,
            )
            .unwrap();
        assert_eq!(path, ws.join(".devcell/context.json"));
        assert!(
            std::fs::read_to_string(ws.join(".devcell/.gitignore"))
                .unwrap()
                .ends_with("\n*\n")
        );
        // a linked folder, a linked file
        symlink(&host, ws.join("linked")).unwrap();
        let e = dir
            .write("linked/context.json", b"{}", 0o644, Existing::Replace, true)
            .unwrap_err();
        assert!(matches!(e, WriteError::Unsafe { .. }), "{e}");
        symlink(host.join("secret.txt"), ws.join("AGENTS.md")).unwrap();
        let e = dir
            .write("AGENTS.md", b"x", 0o644, Existing::Keep, false)
            .unwrap_err();
        assert!(matches!(e, WriteError::Unsafe { .. }), "{e}");
        assert_eq!(
            std::fs::read_to_string(host.join("secret.txt")).unwrap(),
            "s"
        );
        assert_eq!(std::fs::read_dir(&host).unwrap().count(), 1);
        // owned check, keep, invalid paths
        let owned = |b: &[u8]| b == b"{}";
        dir.write(
            ".devcell/context.json",
            b"{}",
            0o644,
            Existing::ReplaceIfOwned(&owned),
            true,
        )
        .unwrap();
        std::fs::write(ws.join("mine"), "user").unwrap();
        assert!(matches!(
            dir.write(
                "mine",
                b"{}",
                0o644,
                Existing::ReplaceIfOwned(&owned),
                false
            ),
            Err(WriteError::NotOwned { .. })
        ));
        assert!(matches!(
            dir.write("mine", b"{}", 0o644, Existing::Keep, false),
            Err(WriteError::Exists { .. })
        ));
        for bad in ["../x", "/etc/x", ""] {
            assert!(matches!(
                dir.write(bad, b"", 0o644, Existing::Replace, false),
                Err(WriteError::InvalidPath { .. })
            ));
        }
        assert_eq!(
            std::fs::metadata(ws.join(".devcell/context.json"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o644
        );
    }

    #[test]
    fn reads_never_follow_a_link_swapped_in_after_the_judgement() {
        let (_t, ws, host) = tree();
        std::fs::write(ws.join("sub/lock.json"), "{}").unwrap();
        assert_eq!(
            read_no_follow(&ws.join("sub/lock.json"), 1024).unwrap(),
            Some(b"{}".to_vec())
        );
        assert_eq!(read_no_follow(&ws.join("sub/missing"), 1024).unwrap(), None);
        assert_eq!(
            read_no_follow(&ws.join("nope/missing"), 1024).unwrap(),
            None
        );
        // the file, or a folder on its way, is a link (swapped after `confine`): not read
        symlink(host.join("secret.txt"), ws.join("link.json")).unwrap();
        let e = read_no_follow(&ws.join("link.json"), 1024).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        symlink(&host, ws.join("dir")).unwrap();
        let e = read_no_follow(&ws.join("dir/secret.txt"), 1024).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // bounded, regular files only (a FIFO never blocks the read)
        std::fs::write(ws.join("big"), vec![b'x'; 2048]).unwrap();
        assert!(read_no_follow(&ws.join("big"), 1024).is_err());
        assert!(read_no_follow(Path::new("/dev/zero"), 1024).is_err());
        assert!(read_no_follow(&ws.join("sub"), 1024).is_err());
    }

    #[test]
    fn links_below_a_folder_are_judged_where_they_end() {
        let (_t, ws, host) = tree();
        let p = places(&ws);
        std::fs::create_dir_all(ws.join("f/deep")).unwrap();
        std::fs::write(ws.join("shared.sh"), "x").unwrap();
        symlink("../shared.sh", ws.join("f/ok.sh")).unwrap();
        assert!(
            confine_links("local Feature `./f`", &ws.join("f"), &p, &Grants::default()).is_ok()
        );
        symlink(host.join("secret.txt"), ws.join("f/deep/install.sh")).unwrap();
        let e = confine_links("local Feature `./f`", &ws.join("f"), &p, &Grants::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("deep/install.sh") && e.contains(&host.display().to_string()),
            "{e}"
        );
        let grants = Grants::parse(&[format!("mount:{}", host.display())]).unwrap();
        assert!(confine_links("local Feature `./f`", &ws.join("f"), &p, &grants).is_ok());
    }

    /// The handoff's read-only git overlays stay read-only through the repository's own binds
    /// of the workspace, of its `.git` and of the protected file itself.
    /// Attack (spec-note 0400, F6): a named volume whose driver options bind the workspace
    /// (`type: none, o: bind, device: <ws>`) is that bind: its target gets the cover of `.git`
    /// below it, and a volume binding `.git` itself shows the container git directory.
    #[test]
    fn a_bind_backed_volume_holding_dot_git_gets_the_cover() {
        use serde_json::json;
        let covers = vec![Cover {
            covered: PathBuf::from("/repo/.git"),
            source: PathBuf::from("/state/git/k"),
            read_only: false,
            folder: false,
        }];
        let backed =
            |device: &str| json!({"driver_opts": {"type": "none", "o": "bind", "device": device}});
        let model = json!({"services": {
            "app": {"volumes": [{"type": "volume", "source": "ws", "target": "/hostws"}]},
            "side": {"volumes": [
                {"type": "volume", "source": "gitdir", "target": "/g", "read_only": true},
                {"type": "volume", "source": "data", "target": "/data"}]},
        }, "volumes": {"ws": backed("/repo"), "gitdir": backed("/repo/.git"), "data": {}}});
        let added = compose_cover_additions(&model, &covers, |p: &Path| normalize_lexically(p));
        assert_eq!(
            added["app"],
            [
                json!({"type": "bind", "source": "/state/git/k", "target": "/hostws/.git", "read_only": false})
            ]
        );
        assert_eq!(
            added["side"],
            [json!({"type": "bind", "source": "/state/git/k", "target": "/g", "read_only": true})]
        );
    }

    #[test]
    fn compose_services_binds_keep_the_read_only_overlays_read_only() {
        use serde_json::json;
        let shields = vec![
            (
                PathBuf::from("/repo/.git/config"),
                "/workspace/.git/config".to_string(),
            ),
            (
                PathBuf::from("/repo/.git/hooks"),
                "/workspace/.git/hooks".to_string(),
            ),
        ];
        let bind = |source: &str, target: &str| json!({"type": "bind", "source": source, "target": target});
        let model = json!({"services": {
            "app": {"volumes": [bind("/repo", "/workspace"), bind("/link", "/ws2")]},
            "side": {"volumes": [
                bind("/repo/", "/w/"),
                bind("/repo/.git/config", "/cfg"),
                bind("/repo/.git/hooks/pre-commit", "/hook"),
                {"type": "bind", "source": "/repo", "target": "/ro", "read_only": true},
                {"type": "volume", "source": "data", "target": "/data"},
                bind("/elsewhere", "/e"),
            ]},
            "taken": {"volumes": [bind("/repo/.git", "/g"), {"type": "volume", "source": "v", "target": "/g/config"}]},
            "plain": {"image": "x"},
        }});
        // `/link` is a symbolic link to the repository
        let resolve = |p: &Path| {
            let p = normalize_lexically(p);
            if p == Path::new("/link") {
                PathBuf::from("/repo")
            } else {
                p
            }
        };
        let added = compose_read_only_additions(&model, &shields, resolve);
        let overlay = |shield: &str, target: &str| json!({"type": "bind", "source": shield, "target": target, "read_only": true});
        assert_eq!(
            added["app"],
            [
                overlay("/repo/.git/config", "/workspace/.git/config"),
                overlay("/repo/.git/hooks", "/workspace/.git/hooks"),
                overlay("/repo/.git/config", "/ws2/.git/config"),
                overlay("/repo/.git/hooks", "/ws2/.git/hooks"),
            ]
        );
        let mut cfg = bind("/repo/.git/config", "/cfg");
        cfg["read_only"] = json!(true);
        let mut hook = bind("/repo/.git/hooks/pre-commit", "/hook");
        hook["read_only"] = json!(true);
        assert_eq!(
            added["side"],
            [
                overlay("/repo/.git/config", "/w/.git/config"),
                overlay("/repo/.git/hooks", "/w/.git/hooks"),
                cfg,
                hook,
            ]
        );
        // a target the service already mounts something at gets no overlay
        assert_eq!(added["taken"], [overlay("/repo/.git/hooks", "/g/hooks")]);
        assert!(!added.contains_key("plain"));
        assert!(compose_read_only_additions(&model, &[], resolve).is_empty());
    }

    #[test]
    fn covered_git_dirs_stay_covered_through_every_other_bind() {
        let bind = |source: &str, target: &str, read_only: bool| Mount {
            kind: MountKind::Bind,
            source: Some(source.into()),
            target: target.into(),
            read_only,
        };
        let mut spec = ContainerSpec {
            mounts: vec![
                bind("/h/ws", "/workspace", false),
                bind("/state/git/1/git", "/workspace/.git", false),
                bind("/h/ws/libs/sub", "/workspace/libs/sub", false),
                // the repository's own
                bind("/h/ws", "/ws2", false),
                bind("/h/ws/.git", "/g", false),
                bind("/h/ws/.git/hooks", "/hooks", false),
                bind("/h/ws/.git", "/g-ro", true),
                bind("/h/ws/src", "/src", false),
                bind("/h", "/all", true),
                bind("/h/ws/libs/sub/x", "/x", false),
            ],
            ..ContainerSpec::default()
        };
        let folder = |p: &str| Cover {
            covered: p.into(),
            source: p.into(),
            read_only: false,
            folder: true,
        };
        let covers = [
            Cover {
                covered: "/h/ws/.git".into(),
                source: "/state/git/1/git".into(),
                read_only: false,
                folder: false,
            },
            folder("/h/ws"),
            folder("/h/ws/libs/sub"),
        ];
        let skip = ["/workspace", "/workspace/.git", "/workspace/libs/sub"].map(String::from);
        let changed = keep_covered(&mut spec, &covers, &skip);
        let got: Vec<(String, String, bool)> = spec
            .mounts
            .iter()
            .map(|m| (m.source.clone().unwrap(), m.target.clone(), m.read_only))
            .collect();
        let own = |s: &str, t: &str, ro| (s.to_string(), t.to_string(), ro);
        assert_eq!(
            got,
            [
                own("/h/ws", "/workspace", false),
                own("/state/git/1/git", "/workspace/.git", false),
                own("/h/ws/libs/sub", "/workspace/libs/sub", false),
                own("/h/ws", "/ws2", false),
                // a bind of the covered `.git`, or inside it, read-only or not: the container
                // git directory's counterpart, read-only (the host `config` is never read)
                own("/state/git/1/git", "/g", true),
                own("/state/git/1/git/hooks", "/hooks", true),
                own("/state/git/1/git", "/g-ro", true),
                // inside a folder bound on itself: ordinary content
                own("/h/ws/src", "/src", false),
                own("/h", "/all", true),
                own("/h/ws/libs/sub/x", "/x", false),
                // the second bind of the workspace gets the same covers
                own("/state/git/1/git", "/ws2/.git", false),
                own("/h/ws/libs/sub", "/ws2/libs/sub", false),
                // a read-only bind above the workspace too, read-only (nothing can be
                // renamed through it: no folder cover needed)
                own("/state/git/1/git", "/all/ws/.git", true),
            ]
        );
        assert_eq!(
            changed,
            [
                "/g",
                "/hooks",
                "/g-ro",
                "/ws2/.git",
                "/ws2/libs/sub",
                "/all/ws/.git",
            ]
        );
    }

    #[test]
    fn read_only_overlays_cover_every_other_bind_of_their_folders() {
        let bind = |source: &str, target: &str, read_only: bool| Mount {
            kind: MountKind::Bind,
            source: Some(source.into()),
            target: target.into(),
            read_only,
        };
        let mut spec = ContainerSpec {
            mounts: vec![
                bind("/h/ws", "/workspace", false),
                bind("/h/ws/.git/config", "/workspace/.git/config", true),
                bind("/h/ws/.git/hooks", "/workspace/.git/hooks", true),
                // the repository's own
                bind("/h/ws", "/ws2", false),
                bind("/h/ws/.git", "/g/", false),
                bind("/h/ws/.git/hooks/pre-commit", "/hook", false),
                bind("/h/ws/src", "/src", false),
                bind("/h/wsx", "/other", false),
                Mount {
                    kind: MountKind::Volume,
                    source: Some("v".into()),
                    target: "/v".into(),
                    read_only: false,
                },
            ],
            ..ContainerSpec::default()
        };
        let protected = [
            "/workspace/.git/config".to_string(),
            "/workspace/.git/hooks".into(),
        ];
        let changed = keep_read_only(&mut spec, &protected);
        let got: Vec<(String, String, bool)> = spec
            .mounts
            .iter()
            .map(|m| (m.source.clone().unwrap(), m.target.clone(), m.read_only))
            .collect();
        let own = |s: &str, t: &str, ro| (s.to_string(), t.to_string(), ro);
        assert_eq!(
            got,
            [
                own("/h/ws", "/workspace", false),
                own("/h/ws/.git/config", "/workspace/.git/config", true),
                own("/h/ws/.git/hooks", "/workspace/.git/hooks", true),
                own("/h/ws", "/ws2", false),
                own("/h/ws/.git", "/g/", false),
                own("/h/ws/.git/hooks/pre-commit", "/hook", true),
                own("/h/ws/src", "/src", false),
                own("/h/wsx", "/other", false),
                own("v", "/v", false),
                own("/h/ws/.git/config", "/ws2/.git/config", true),
                own("/h/ws/.git/hooks", "/ws2/.git/hooks", true),
                own("/h/ws/.git/config", "/g/config", true),
                own("/h/ws/.git/hooks", "/g/hooks", true),
            ]
        );
        assert_eq!(changed.len(), 5, "{changed:?}");
        // nothing protected: nothing changes
        let before = spec.clone();
        assert!(keep_read_only(&mut spec, &[]).is_empty());
        assert_eq!(spec, before);
    }

    use std::os::unix::fs::PermissionsExt as _;
}
