//! The user's dotfiles repository exported on the host for the install inside the container
//! (spec-notes 0645, 0670): a one-commit bare clone of its `HEAD` in a folder of devcell's
//! state, bound read-only at [`SOURCE_TARGET`] and cloned from there by the dotfiles step;
//! emptied as soon as `up` is over. A handoff exports a host folder so (attack L10); `up`
//! exports a URL so under network `none`, where the container cannot reach it
//! ([`for_up`]). `set-up` and `run-user-commands` act on a container whose mounts cannot
//! change: under `none` the same export is copied into it through the engine's archive API
//! instead, and removed after the install ([`copy_into_existing`], spec-note 0685).

use std::path::{Path, PathBuf};

use crate::ops::error::Result;
use crate::ops::options::UpOptions;
use crate::settings::NetworkMode;

/// Where the export is bound (read-only) in the container.
pub const SOURCE_TARGET: &str = "/run/devcell/dotfiles";

/// How long devcell's host git may take to export a host folder's committed `HEAD`.
const EXPORT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// The export of a dotfiles repository for one `up` ([`stage_export`]): while it lives, the bind's
/// source holds a one-commit bare clone of the folder's `HEAD`; dropped, the source is emptied
/// (the folder itself stays: the container's bind keeps pointing at it, and the next `up` or
/// handoff fills it again), so the agent that runs after `up` finds nothing at [`SOURCE_TARGET`].
#[derive(Debug, Default)]
pub struct Staged {
    export: Option<PathBuf>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(export) = &self.export
            && let Err(e) = empty(export)
        {
            tracing::warn!("emptying the dotfiles export {}: {e}", export.display());
        }
    }
}

/// Where the repository to export comes from.
#[derive(Debug, Clone, Copy)]
pub enum ExportSource<'a> {
    /// A git repository's folder on the host: its git runs as the folder's owner when devcell
    /// is root (spec-note 0250), reading nothing of the folder's configuration.
    Folder(&'a Path),
    /// A URL (`https://`, `ssh://`, `git://`, `file://`, or `user@host:path`) the user gave,
    /// cloned by devcell's host git as devcell's user (spec-note 0670).
    Url(&'a str),
}

impl ExportSource<'_> {
    fn shown(&self) -> String {
        match self {
            Self::Folder(path) => path.display().to_string(),
            Self::Url(url) => crate::lifecycle::dotfiles::masked(url),
        }
    }
}

/// Fills `export` (the bind's source) with `source`'s committed `HEAD` and nothing else:
/// devcell's hardened host git ([`crate::config::hostgit::command`]) makes a bare clone of
/// depth 1, without tags, templates or its `origin` remote, in a private temporary folder; its
/// regular files are copied into the export folder (mode 0755/0644: the container's user
/// reads it through the bind; the folder above is devcell's, 0700). Returns the guard that
/// empties it, and a warning when the export failed (the source is then empty: the install
/// fails inside the container and `up` goes on, as any failed install).
pub fn stage_export(source: ExportSource<'_>, export: &Path) -> (Staged, Option<String>) {
    let staged = Staged {
        export: Some(export.to_path_buf()),
    };
    let warning = export_head(source, export).err().map(|why| {
        format!(
            "`--dotfiles-repository` `{}`: devcell could not export its committed HEAD ({why}); the dotfiles step finds nothing to install",
            source.shown()
        )
    });
    (staged, warning)
}

/// [`stage_export`]'s work: the export folder made (or emptied), the clone made and copied in.
fn export_head(source: ExportSource<'_>, export: &Path) -> std::result::Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    let shown = |e: std::io::Error, path: &Path| format!("{}: {e}", path.display());
    if let Some(parent) = export.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| shown(e, parent))?;
    }
    match std::fs::symlink_metadata(export) {
        Ok(m) if m.is_dir() => empty(export).map_err(|e| shown(e, export))?,
        Ok(_) => return Err(format!("{} is not a folder", export.display())),
        Err(_) => std::fs::create_dir(export).map_err(|e| shown(e, export))?,
    }
    std::fs::set_permissions(export, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| shown(e, export))?;
    let staging = tempfile::Builder::new()
        .prefix("devcell-dotfiles-")
        .tempdir()
        .map_err(|e| shown(e, &std::env::temp_dir()))?;
    let clone = staging.path().join("dots.git");
    let mut git = match source {
        ExportSource::Folder(folder) => {
            // a root devcell runs git as the folder's owner, who writes the clone (spec-note 0250)
            crate::config::ownership::hand_over(staging.path(), folder)
                .map_err(|e| shown(e, staging.path()))?;
            let file = [("protocol.file.allow".to_string(), "always".to_string())];
            let mut git = crate::config::hostgit::command(folder, &file);
            git.args(CLONE_ARGS).arg(folder);
            git
        }
        ExportSource::Url(url) => {
            let mut git = crate::config::hostgit::command(staging.path(), &url_protocols());
            git.args(CLONE_ARGS).arg(url);
            git
        }
    };
    git.arg(&clone);
    run(git, "clone")?;
    let mut forget = crate::config::hostgit::command(&clone, &[]);
    forget.args(["remote", "remove", "origin"]);
    run(forget, "remote remove origin")?;
    copy_tree(&clone, export).map_err(|e| shown(e, export))
}

/// `git clone`'s arguments before the source: one commit of `HEAD`, bare (nothing checked
/// out, so no filter or hook of the repository runs), no tags, no template.
const CLONE_ARGS: &[&str] = &[
    "clone",
    "--quiet",
    "--bare",
    "--no-local",
    "--depth",
    "1",
    "--no-tags",
    "--template=",
    "--",
];

/// The transports a URL export may use, over the host git's `protocol.allow=never`: the
/// ones a user names a dotfiles repository with; never `ext::` (a command) or others.
fn url_protocols() -> Vec<(String, String)> {
    ["https", "http", "ssh", "git", "file"]
        .iter()
        .map(|p| (format!("protocol.{p}.allow"), "always".to_string()))
        .collect()
}

/// Runs a host git of [`export_head`] to its end, within [`EXPORT_DEADLINE`].
fn run(mut git: std::process::Command, what: &str) -> std::result::Result<(), String> {
    let out = crate::config::hostgit::output_within(&mut git, EXPORT_DEADLINE)
        .map_err(|e| format!("git {what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Copies the folders and regular files below `from` (git's fresh clone) into `to`, modes
/// 0755 and 0644; anything else (a link) is left out. Through descriptors, as every copy of a
/// repository's tree ([`crate::features::nofollow_copy`], spec-note 0680): nothing below
/// `from` is followed.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use crate::features::nofollow_copy::{CopyOptions, FileMode, Links, Root};
    let options = CopyOptions {
        links: Links::Skip,
        root: Root::AsGiven,
        dir_mode: 0o755,
        file_mode: FileMode::Fixed(0o644),
    };
    crate::features::nofollow_copy::copy_tree(from, to, &options)
        .map_err(|e| std::io::Error::new(e.source.kind(), e.to_string()))
}

/// Removes everything inside `folder` (not following links), keeping the folder.
fn empty(folder: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// `up`'s dotfiles under network `none` (spec-note 0670): a URL (or `owner/repo`) the
/// container cannot reach is cloned by devcell's host git instead, into
/// `<state_root>/dotfiles/up-<key of the workspace folder>` (`state_root`: devcell's state
/// folder, [`crate::ops::state_folder::default_root`]), bound read-only at [`SOURCE_TARGET`]
/// and named a `safe.directory`, the in-container step cloning from there. `None`: nothing to
/// change (no dotfiles, a path inside the container, or a network). The returned options are
/// `opts` with that mount, entry and repository; the guard empties the export when dropped
/// (after `up`); the warning says the export failed (the install then fails inside, and `up`
/// goes on).
///
/// Errors: [`crate::ops::OpsError::Unsupported`] when devcell has no state folder or the
/// workspace folder cannot be resolved.
pub fn for_up(
    opts: &UpOptions,
    network: NetworkMode,
    state_root: Option<&Path>,
) -> Result<Option<(UpOptions, Staged, Option<String>)>> {
    let Some(dotfiles) = &opts.dotfiles else {
        return Ok(None);
    };
    let url = dotfiles.clone_source();
    if network != NetworkMode::None || is_container_path(&url) {
        return Ok(None);
    }
    let export = export_folder(state_root, &opts.target.workspace_folder)?;
    let (staged, warning) = stage_export(ExportSource::Url(&url), &export);
    let mut changed = opts.clone();
    changed.mounts.push(crate::engine::Mount {
        kind: crate::engine::MountKind::Bind,
        source: Some(export.to_string_lossy().into_owned()),
        target: SOURCE_TARGET.to_string(),
        read_only: true,
    });
    changed.safe_directories.push(SOURCE_TARGET.to_string());
    if let Some(d) = changed.dotfiles.as_mut() {
        d.exported_from = Some(url);
        d.repository = SOURCE_TARGET.to_string();
    }
    Ok(Some((changed, staged, warning)))
}

/// [`for_up`] with devcell's state folder and the options' network: the options `up` runs
/// with (changed only when a URL was exported), and the export's guard, to be dropped when
/// `up` is over; the export's failure is reported as a warning to `reporter`.
///
/// Errors: as [`for_up`]; a bad security choice (as `up` would refuse it).
pub fn exported_for_up<'a>(
    opts: &'a UpOptions,
    reporter: &dyn crate::progress::Reporter,
) -> Result<(std::borrow::Cow<'a, UpOptions>, Option<Staged>)> {
    if opts.dotfiles.is_none() {
        return Ok((std::borrow::Cow::Borrowed(opts), None));
    }
    let network = crate::ops::permissions::security_choice(&opts.security, &opts.settings)?.network;
    let state_root = crate::ops::state_folder::default_root();
    Ok(match for_up(opts, network, state_root.as_deref())? {
        Some((changed, staged, warning)) => {
            if let Some(w) = warning {
                reporter.report(crate::progress::Event::Status(format!("warning: {w}")));
            }
            (std::borrow::Cow::Owned(changed), Some(staged))
        }
        None => (std::borrow::Cow::Borrowed(opts), None),
    })
}

/// Whether the in-container step's clone source is a path inside the container (nothing to
/// export), as [`crate::lifecycle::Dotfiles::clone_source`] keeps one.
fn is_container_path(url: &str) -> bool {
    url.starts_with('/') || url.starts_with("./") || url.starts_with("../")
}

/// The folder below a copy's base ([`copy_base`]) that holds each copy of
/// [`copy_into_existing`]: the remote user's, mode 0700, kept (in devcell's state volume the
/// remote user may not remove an entry of the volume's root, which is root's on Docker).
const COPY_PARENT: &str = "devcell-dotfiles";

/// Whether the existing `container` has no network (spec-note 0685): its `devcell.network`
/// label says `none` (a Compose primary whose project networks devcell closed), or its
/// `HostConfig.NetworkMode` is `none` and the label does not say `allowlist` (devcell's egress
/// channel, through which the clone inside goes as with a network).
pub(crate) fn has_no_network(container: &crate::engine::ContainerInfo) -> bool {
    match container
        .labels
        .get(crate::names::EGRESS_NETWORK_LABEL)
        .map(String::as_str)
    {
        Some("none") => true,
        Some(crate::ops::egress::ALLOWLIST) => false,
        _ => container.host.network_mode == "none",
    }
}

/// The URL [`copy_into_existing`] exports for `dotfiles` in `container`: a repository the
/// container would clone from a network (a URL or `owner/repo`, as its clone source) that was
/// not exported already, when the container has no network ([`has_no_network`]).
fn url_to_copy(
    dotfiles: &crate::lifecycle::Dotfiles,
    container: &crate::engine::ContainerInfo,
) -> Option<String> {
    let url = dotfiles.clone_source();
    (dotfiles.exported_from.is_none() && !is_container_path(&url) && has_no_network(container))
        .then_some(url)
}

/// Where in `container` the engine's archive API can put a copy the container's processes
/// see (spec-note 0685): devcell's state volume ([`crate::ops::container::STATE_DIR`]) when
/// the container has it writable (every container `up` made under `hardened`, whose root
/// filesystem is read-only: the engine refuses to write anywhere but on a volume, and a tmpfs
/// is beyond its reach), else `/tmp` when it is a writable volume or bind, or is on a
/// writable root filesystem without a tmpfs over it (the engine would write under the tmpfs,
/// where nothing in the container sees it). `None`: nowhere.
pub(crate) fn copy_base(container: &crate::engine::ContainerInfo) -> Option<&'static str> {
    let state = crate::ops::container::STATE_DIR;
    if container
        .mounts
        .iter()
        .any(|m| m.destination == state && m.rw && m.kind != "tmpfs")
    {
        return Some(state);
    }
    let tmp = container
        .mounts
        .iter()
        .find(|m| m.destination.trim_end_matches('/') == "/tmp");
    let tmp_ok = match tmp {
        Some(m) => m.rw && m.kind != "tmpfs",
        None => !container.host.read_only_rootfs && !container.host.tmpfs.contains_key("/tmp"),
    };
    tmp_ok.then_some("/tmp")
}

/// What the probe of [`copy_into_existing`] said.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    /// The dotfiles marker is there: nothing to install, nothing to copy.
    Marked,
    /// Not installed; the remote user's numeric ids (uid, gid), the copy's owner.
    Ids(u32, u32),
}

/// The probe's script: `marked` when the reference's marker is in the home, else the user's
/// uid and gid, a line each.
fn probe_script() -> String {
    format!(
        "if {}; then echo marked; else id -u && id -g; fi",
        crate::lifecycle::dotfiles::MARKED_SCRIPT
    )
}

/// Reads the probe's output ([`probe_script`]); `None` when it is neither answer.
fn parse_probe(stdout: &str) -> Option<Probe> {
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    match lines.as_slice() {
        ["marked"] => Some(Probe::Marked),
        [uid, gid] => Some(Probe::Ids(uid.parse().ok()?, gid.parse().ok()?)),
        _ => None,
    }
}

/// The entries of the copy of the bare repository `export` (the host export) as
/// `<COPY_PARENT>/<name>`: the two folders private (0700: the copy's owner only), below them
/// folders 0755 and regular files 0644 as in the export; anything else (a link) is left out,
/// nothing followed.
///
/// Errors: reading `export`; a file name that is not UTF-8 ([`std::io::ErrorKind::InvalidData`]).
fn tree_entries(export: &Path, name: &str) -> std::io::Result<Vec<crate::engine::TreeEntry>> {
    use crate::engine::TreeEntry;
    fn walk(dir: &Path, rel: &str, out: &mut Vec<TreeEntry>) -> std::io::Result<()> {
        let mut children: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
        children.sort_by_key(std::fs::DirEntry::file_name);
        for child in children {
            let file_name = child.file_name();
            let Some(file_name) = file_name.to_str() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a file name that is not UTF-8 in {}", dir.display()),
                ));
            };
            let path = format!("{rel}/{file_name}");
            let kind = child.file_type()?;
            if kind.is_dir() {
                out.push(TreeEntry {
                    path: path.clone(),
                    mode: 0o755,
                    content: None,
                });
                walk(&child.path(), &path, out)?;
            } else if kind.is_file() {
                out.push(TreeEntry {
                    path,
                    mode: 0o644,
                    content: Some(std::fs::read(child.path())?),
                });
            }
        }
        Ok(())
    }
    let top = format!("{COPY_PARENT}/{name}");
    let mut entries = vec![
        TreeEntry {
            path: COPY_PARENT.to_string(),
            mode: 0o700,
            content: None,
        },
        TreeEntry {
            path: top.clone(),
            mode: 0o700,
            content: None,
        },
    ];
    walk(export, &top, &mut entries)?;
    Ok(entries)
}

/// The host side of [`copy_into_existing`]: `url` exported by devcell's hardened host git
/// ([`stage_export`]) into a fresh private temporary folder, read as the copy's entries
/// ([`tree_entries`]), the folder removed. Returns the entries and the copy's fresh name (the
/// temporary folder's random one).
///
/// Errors: the export's warning, or why the export could not be read.
fn export_entries(
    url: &str,
) -> std::result::Result<(Vec<crate::engine::TreeEntry>, String), String> {
    let staging = tempfile::Builder::new()
        .prefix("devcell-dotfiles-")
        .tempdir()
        .map_err(|e| format!("{}: {e}", std::env::temp_dir().display()))?;
    let name = staging
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "devcell-dotfiles".to_string());
    let export = staging.path().join("dots.git");
    let (staged, warning) = stage_export(ExportSource::Url(url), &export);
    if let Some(warning) = warning {
        return Err(warning);
    }
    let entries = tree_entries(&export, &name).map_err(|e| {
        format!(
            "`--dotfiles-repository` `{}`: reading its export: {e}",
            crate::lifecycle::dotfiles::masked(url)
        )
    })?;
    drop(staged);
    Ok((entries, name))
}

/// A copy of the exported repository in an existing container ([`copy_into_existing`]):
/// [`Self::dotfiles`] clones from it; [`Self::remove`] removes it.
#[derive(Debug)]
pub(crate) struct CopiedIn {
    /// The request pointed at the copy, [`crate::lifecycle::Dotfiles::exported_from`] naming
    /// the user's URL (what the result shows).
    pub(crate) dotfiles: crate::lifecycle::Dotfiles,
    /// The copy's folder in the container.
    folder: String,
}

impl CopiedIn {
    /// Removes the copy, as `user` (its owner) with `env` (the hooks' environment): `rm -rf`
    /// of the folder, in the container. A failure is a warning on `reporter`: the private
    /// folder is the remote user's alone.
    pub(crate) async fn remove(
        self,
        engine: &dyn crate::engine::Engine,
        container_id: &str,
        (user, env): (&str, &indexmap::IndexMap<String, String>),
        reporter: &dyn crate::progress::Reporter,
    ) {
        let request = crate::engine::ExecRequest {
            argv: vec![
                "rm".to_string(),
                "-rf".to_string(),
                "--".to_string(),
                self.folder.clone(),
            ],
            user: Some(user.to_string()),
            env: env.clone(),
            working_dir: None,
            tty: false,
        };
        let removed = engine
            .exec(
                container_id,
                &request,
                crate::engine::ExecInput::None,
                crate::engine::ExecOutput::Collect,
            )
            .await;
        let why = match removed {
            Ok(r) if r.exit_code == 0 => return,
            Ok(r) => String::from_utf8_lossy(&r.stderr).trim().to_string(),
            Err(e) => e.to_string(),
        };
        reporter.report(crate::progress::Event::Status(format!(
            "warning: removing the dotfiles copy {} from the container: {why}",
            self.folder
        )));
    }
}

/// `set-up` and `run-user-commands` under network `none` (spec-note 0685): the existing
/// container cannot clone the user's URL (or `owner/repo`) and its mounts cannot change, so
/// devcell's hardened host git exports it on the host as `up` does ([`stage_export`]: the
/// same transports allowed, the same refusals) and the export is copied into the container
/// through the engine's archive API ([`crate::engine::Engine::copy_tree`]: folders and regular
/// files only, owned by the remote user, in a fresh folder that only they can enter, below
/// [`copy_base`]); the in-container step clones from there.
///
/// First one process, as `user` with `env` (the hooks' user and environment), asks whether
/// the reference's dotfiles marker is in the home (then nothing is exported: the step says
/// they are installed) and the user's ids. `None`: nothing to copy (no network needed, a
/// marker found) or the copy failed (a warning on `reporter`: the step then clones inside
/// and fails, as before). Call [`CopiedIn::remove`] after the step.
pub(crate) async fn copy_into_existing(
    engine: &dyn crate::engine::Engine,
    container: &crate::engine::ContainerInfo,
    dotfiles: &crate::lifecycle::Dotfiles,
    (user, env): (&str, &indexmap::IndexMap<String, String>),
    reporter: &dyn crate::progress::Reporter,
) -> Option<CopiedIn> {
    let url = url_to_copy(dotfiles, container)?;
    let warn = |why: String| {
        reporter.report(crate::progress::Event::Status(format!(
            "warning: `--dotfiles-repository` `{}` under network `none`: {why}; the dotfiles step clones inside the container, which has no network",
            crate::lifecycle::dotfiles::masked(&url)
        )));
    };
    let Some(base) = copy_base(container) else {
        warn("the container has no folder devcell can copy the repository exported on the host into (a read-only root filesystem without devcell's state volume, or `/tmp` a tmpfs)".to_string());
        return None;
    };
    let request = crate::engine::ExecRequest {
        argv: vec!["/bin/sh".to_string(), "-c".to_string(), probe_script()],
        user: Some(user.to_string()),
        env: env.clone(),
        working_dir: None,
        tty: false,
    };
    let probe = engine
        .exec(
            &container.id,
            &request,
            crate::engine::ExecInput::None,
            crate::engine::ExecOutput::Collect,
        )
        .await;
    let (uid, gid) = match probe.as_ref().map(|r| {
        (
            r.exit_code,
            parse_probe(&String::from_utf8_lossy(&r.stdout)),
        )
    }) {
        Ok((_, Some(Probe::Marked))) => return None,
        Ok((0, Some(Probe::Ids(uid, gid)))) => (uid, gid),
        Ok(_) => {
            warn("devcell could not read the remote user's ids in the container".to_string());
            return None;
        }
        Err(e) => {
            warn(format!(
                "devcell could not read the remote user's ids in the container: {e}"
            ));
            return None;
        }
    };
    reporter.report(crate::progress::Event::Status(format!(
        "cloning the dotfiles repository {} on the host for a container without network",
        crate::lifecycle::dotfiles::masked(&url)
    )));
    let owned = url.clone();
    let exported = tokio::task::spawn_blocking(move || export_entries(&owned))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
    let (entries, name) = match exported {
        Ok(exported) => exported,
        Err(why) => {
            warn(why);
            return None;
        }
    };
    let tree = crate::engine::TreeCopy {
        into: base.to_string(),
        entries,
        uid,
        gid,
    };
    if let Err(e) = engine.copy_tree(&container.id, &tree).await {
        warn(format!(
            "copying the repository exported on the host into the container: {e}"
        ));
        return None;
    }
    let folder = format!("{base}/{COPY_PARENT}/{name}");
    let mut changed = dotfiles.clone();
    changed.exported_from = Some(url);
    changed.repository = folder.clone();
    Some(CopiedIn {
        dotfiles: changed,
        folder,
    })
}

/// `<state>/dotfiles/up-<hex of the workspace folder's canonical path's SHA-256, 16 digits>`:
/// one folder per workspace, kept (a container's bind points at it), apart from a handoff's.
///
/// Errors: no state folder, or a workspace folder that cannot be resolved.
fn export_folder(state_root: Option<&Path>, workspace_folder: &Path) -> Result<PathBuf> {
    use sha2::{Digest as _, Sha256};
    let unsupported = |message: String| {
        crate::ops::OpsError::Unsupported {
        message,
        hint: Some("set `DEVCELL_STATE_DIR` or `XDG_STATE_HOME`, or give the container a network for the dotfiles".into()),
    }
    };
    let root = state_root.ok_or_else(|| {
        unsupported("devcell has no state folder to export the dotfiles repository to".into())
    })?;
    let real = std::fs::canonicalize(workspace_folder).map_err(|e| {
        unsupported(format!(
            "cannot resolve {}: {e}",
            workspace_folder.display()
        ))
    })?;
    let digest = Sha256::digest(real.as_os_str().as_encoded_bytes());
    let key: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Ok(root.join("dotfiles").join(format!("up-{key}")))
}

/// Attack L10: what the container gets of a host dotfiles folder is its committed `HEAD` and
/// nothing else, and only while `up` runs.
#[cfg(test)]
mod export_tests {
    use super::*;

    use crate::config::hostgit::test_git as git;

    /// Every byte of the regular files below `dir`, as text.
    fn all_text(dir: &Path) -> String {
        let mut out = String::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                out.push_str(&all_text(&entry.path()));
            } else {
                out.push_str(&entry.file_name().to_string_lossy());
                out.push_str(&String::from_utf8_lossy(
                    &std::fs::read(entry.path()).unwrap(),
                ));
            }
        }
        out
    }

    #[test]
    fn the_export_holds_the_committed_head_only_and_is_emptied_after() {
        let dir = tempfile::tempdir().unwrap();
        let dots = dir.path().join("dots");
        std::fs::create_dir(&dots).unwrap();
        git(&dots, &["init", "-q"]);
        std::fs::write(dots.join(".bashrc"), "old-secret-line\n").unwrap();
        std::fs::write(dots.join(".gitignore"), "private.env\n").unwrap();
        std::fs::write(dots.join("private.env"), "IGNORED_SECRET=1\n").unwrap();
        git(&dots, &["add", ".bashrc", ".gitignore"]);
        git(&dots, &["commit", "-q", "-m", "first"]);
        std::fs::write(dots.join(".bashrc"), "alias ll='ls -l'\n").unwrap();
        git(&dots, &["commit", "-q", "-am", "second"]);
        git(&dots, &["branch", "other-branch"]);
        git(
            &dots,
            &[
                "remote",
                "add",
                "origin",
                "https://me:tok3n@example.com/dots.git",
            ],
        );
        let export = dir.path().join("state/dotfiles/key");
        let (staged, warning) = stage_export(ExportSource::Folder(&dots), &export);
        assert_eq!(warning, None);
        let text = all_text(&export);
        assert!(text.contains("HEAD"), "a bare repository: {text}");
        for absent in [
            "tok3n",
            "example.com",
            "IGNORED_SECRET",
            "other-branch",
            "private.env",
        ] {
            assert!(!text.contains(absent), "{absent} in the export");
        }
        // one commit, the last: the first one's blob is not there
        let log = std::process::Command::new("git")
            .args(["--git-dir"])
            .arg(&export)
            .args(["log", "--format=%s", "HEAD"])
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&log.stdout), "second\n");
        drop(staged);
        assert!(export.is_dir(), "the bind's source stays");
        assert_eq!(std::fs::read_dir(&export).unwrap().count(), 0);
        // the user's folder is untouched
        assert!(dots.join("private.env").is_file());
    }

    #[test]
    fn a_folder_that_is_no_repository_leaves_the_export_empty_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let export = dir.path().join("state/dotfiles/key");
        let (staged, warning) = stage_export(ExportSource::Folder(dir.path()), &export);
        let warning = warning.expect("a warning");
        assert!(warning.contains("could not export"), "{warning}");
        assert_eq!(std::fs::read_dir(&export).unwrap().count(), 0);
        drop(staged);
    }

    /// A repository made in `dir/dots` with one commit of `.bashrc`.
    fn dots_repository(dir: &Path) -> PathBuf {
        let dots = dir.join("dots");
        std::fs::create_dir(&dots).unwrap();
        git(&dots, &["init", "-q"]);
        std::fs::write(dots.join(".bashrc"), "alias ll='ls -l'\n").unwrap();
        git(&dots, &["add", ".bashrc"]);
        git(&dots, &["commit", "-q", "-m", "only"]);
        dots
    }

    /// spec-note 0670: a URL is exported by the host git as a folder is; `ext::` (a command
    /// git would run) is refused by the transports allowed.
    #[test]
    fn a_url_is_exported_and_a_command_transport_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dots = dots_repository(dir.path());
        let url = format!("file://{}", dots.display());
        let export = dir.path().join("state/dotfiles/up-k");
        let (staged, warning) = stage_export(ExportSource::Url(&url), &export);
        assert_eq!(warning, None);
        assert!(export.join("HEAD").is_file());
        drop(staged);
        assert_eq!(std::fs::read_dir(&export).unwrap().count(), 0);

        let ran = dir.path().join("ext-ran");
        let ext = format!("ext::sh -c touch% {}", ran.display());
        let (_staged, warning) = stage_export(ExportSource::Url(&ext), &export);
        assert!(warning.is_some());
        assert!(!ran.exists(), "git ran the ext:: command");
    }

    fn up_options(workspace: &Path, repository: &str) -> UpOptions {
        UpOptions {
            target: crate::ops::options::TargetOptions {
                workspace_folder: workspace.to_path_buf(),
                ..Default::default()
            },
            dotfiles: crate::lifecycle::Dotfiles::from_flags(Some(repository), None, None).unwrap(),
            ..Default::default()
        }
    }

    /// spec-note 0670: only under `none`, only a repository the container would clone from a
    /// network, is the export bound and the in-container step pointed at it.
    #[test]
    fn up_exports_a_url_only_under_network_none() {
        let dir = tempfile::tempdir().unwrap();
        let dots = dots_repository(dir.path());
        let url = format!("file://{}", dots.display());
        let opts = up_options(dir.path(), &url);
        let state = dir.path().join("state");
        let root = Some(state.as_path());
        assert!(for_up(&opts, NetworkMode::Default, root).unwrap().is_none());
        let inside = up_options(dir.path(), "/home/me/dots");
        assert!(for_up(&inside, NetworkMode::None, root).unwrap().is_none());
        let none = UpOptions::default();
        assert!(for_up(&none, NetworkMode::None, root).unwrap().is_none());
        let err = for_up(&opts, NetworkMode::None, None).unwrap_err();
        assert!(err.to_string().contains("no state folder"), "{err}");
        {
            let (changed, staged, warning) =
                for_up(&opts, NetworkMode::None, root).unwrap().unwrap();
            assert_eq!(warning, None);
            let dotfiles = changed.dotfiles.as_ref().unwrap();
            assert_eq!(dotfiles.repository, SOURCE_TARGET);
            assert_eq!(
                dotfiles.shown_source(),
                url,
                "the result names the user's URL"
            );
            let mount = changed.mounts.last().unwrap();
            assert!(mount.read_only);
            assert_eq!(mount.target, SOURCE_TARGET);
            let source = PathBuf::from(mount.source.as_deref().unwrap());
            assert!(source.starts_with(state.join("dotfiles")));
            assert!(source.join("HEAD").is_file(), "exported before up");
            assert!(
                changed
                    .safe_directories
                    .contains(&SOURCE_TARGET.to_string())
            );
            drop(staged);
            assert_eq!(std::fs::read_dir(&source).unwrap().count(), 0);
        }
    }
}

/// spec-note 0685: `set-up` and `run-user-commands` under network `none` copy the host export
/// into the existing container.
#[cfg(test)]
mod copy_tests {
    use super::*;

    use crate::config::hostgit::test_git as git;
    use crate::engine::{ContainerInfo, ContainerSpec, Engine as _, ExecResult, MountInfo};

    fn container(network_mode: &str, label: Option<&str>) -> ContainerInfo {
        let mut info = ContainerInfo::default();
        info.host.network_mode = network_mode.to_string();
        if let Some(label) = label {
            info.labels.insert(
                crate::names::EGRESS_NETWORK_LABEL.to_string(),
                label.to_string(),
            );
        }
        info
    }

    fn mount(kind: &str, destination: &str, rw: bool) -> MountInfo {
        MountInfo {
            kind: kind.to_string(),
            source: String::new(),
            name: None,
            destination: destination.to_string(),
            rw,
        }
    }

    fn request(repository: &str) -> crate::lifecycle::Dotfiles {
        crate::lifecycle::Dotfiles::from_flags(Some(repository), None, None)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn no_network_is_mode_none_without_the_egress_channel_or_a_closed_compose_project() {
        assert!(has_no_network(&container("none", None)));
        assert!(!has_no_network(&container("none", Some("allowlist"))));
        assert!(has_no_network(&container(
            "devcell-proj_default",
            Some("none")
        )));
        assert!(!has_no_network(&container("bridge", None)));
        assert!(!has_no_network(&container("", None)));
        assert!(!has_no_network(&container("host", None)));
    }

    #[test]
    fn only_a_network_repository_not_exported_yet_is_copied_into_a_container_without_network() {
        let none = container("none", None);
        let url = "file:///srv/dots.git";
        assert_eq!(url_to_copy(&request(url), &none).as_deref(), Some(url));
        assert_eq!(
            url_to_copy(&request("me/dots"), &none),
            Some(request("me/dots").clone_source())
        );
        assert_eq!(url_to_copy(&request(url), &container("bridge", None)), None);
        for path in ["/srv/dots.git", "./dots", "../dots"] {
            assert_eq!(url_to_copy(&request(path), &none), None, "{path}");
        }
        let mut exported = request(SOURCE_TARGET);
        exported.exported_from = Some(url.to_string());
        assert_eq!(url_to_copy(&exported, &none), None, "up's bind");
    }

    #[test]
    fn the_copy_goes_where_the_archive_api_reaches_and_the_container_sees_it() {
        let mut hardened = container("none", None);
        hardened.host.read_only_rootfs = true;
        hardened.host.tmpfs.insert("/tmp".into(), "rw".into());
        assert_eq!(copy_base(&hardened), None, "a tmpfs on a read-only root");
        hardened
            .mounts
            .push(mount("volume", crate::ops::container::STATE_DIR, true));
        assert_eq!(copy_base(&hardened), Some(crate::ops::container::STATE_DIR));

        let plain = container("none", None);
        assert_eq!(copy_base(&plain), Some("/tmp"), "a writable root");
        let mut tmpfs = plain.clone();
        tmpfs.host.tmpfs.insert("/tmp".into(), String::new());
        assert_eq!(copy_base(&tmpfs), None, "the engine writes under a tmpfs");
        let mut tmpfs_mount = plain.clone();
        tmpfs_mount.mounts.push(mount("tmpfs", "/tmp", true));
        assert_eq!(copy_base(&tmpfs_mount), None);
        let mut volume = plain.clone();
        volume.host.read_only_rootfs = true;
        volume.mounts.push(mount("volume", "/tmp", true));
        assert_eq!(copy_base(&volume), Some("/tmp"));
        let mut read_only = volume.clone();
        read_only.mounts[0].rw = false;
        assert_eq!(copy_base(&read_only), None);
    }

    #[test]
    fn the_probe_says_marked_or_the_ids() {
        assert_eq!(parse_probe("marked\n"), Some(Probe::Marked));
        assert_eq!(parse_probe("1000\n1001\n"), Some(Probe::Ids(1000, 1001)));
        assert_eq!(parse_probe(""), None);
        assert_eq!(parse_probe("1000\n"), None);
        assert_eq!(parse_probe("x\ny\n"), None);
        assert!(probe_script().contains(crate::lifecycle::dotfiles::MARKED_SCRIPT));
    }

    #[test]
    fn the_entries_are_private_folders_then_the_tree_without_links() {
        let dir = tempfile::tempdir().unwrap();
        let export = dir.path().join("dots.git");
        std::fs::create_dir_all(export.join("refs/heads")).unwrap();
        std::fs::write(export.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(export.join("refs/heads/main"), "abc\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", export.join("link")).unwrap();
        let entries = tree_entries(&export, "n1").unwrap();
        let shown: Vec<(&str, u32, bool)> = entries
            .iter()
            .map(|e| (e.path.as_str(), e.mode, e.content.is_some()))
            .collect();
        assert_eq!(
            shown,
            [
                ("devcell-dotfiles", 0o700, false),
                ("devcell-dotfiles/n1", 0o700, false),
                ("devcell-dotfiles/n1/HEAD", 0o644, true),
                ("devcell-dotfiles/n1/refs", 0o755, false),
                ("devcell-dotfiles/n1/refs/heads", 0o755, false),
                ("devcell-dotfiles/n1/refs/heads/main", 0o644, true),
            ]
        );
        assert!(entries.iter().all(crate::engine::TreeEntry::has_plain_path));
    }

    /// A running container without network on the fake engine, its execs answering `reply`.
    fn fake_container(reply: &str) -> (crate::engine::fake::FakeEngine, ContainerInfo) {
        let engine = crate::engine::fake::FakeEngine::new();
        let spec = ContainerSpec {
            image: "img".into(),
            network_mode: Some("none".into()),
            ..ContainerSpec::default()
        };
        let id = engine.add_container(&spec, true);
        engine.reply_to_execs(ExecResult {
            exit_code: 0,
            stdout: reply.as_bytes().to_vec(),
            ..ExecResult::default()
        });
        let info = engine.container(&id).unwrap();
        (engine, info)
    }

    fn statuses(reporter: &crate::progress::Collect) -> String {
        reporter
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|e| format!("{e:?}\n"))
            .collect()
    }

    #[tokio::test]
    async fn a_url_is_exported_on_the_host_copied_in_as_the_remote_user_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dots = dir.path().join("dots");
        std::fs::create_dir(&dots).unwrap();
        git(&dots, &["init", "-q"]);
        std::fs::write(dots.join("install.sh"), "echo hi\n").unwrap();
        git(&dots, &["add", "install.sh"]);
        git(&dots, &["commit", "-q", "-m", "only"]);
        let url = format!("file://{}", dots.display());
        let (engine, info) = fake_container("1000\n1001\n");
        let reporter = crate::progress::Collect::default();
        let env = indexmap::IndexMap::from([("HOME".to_string(), "/home/me".to_string())]);
        let copied = copy_into_existing(
            &engine,
            &info,
            &request(&url),
            ("1000:1001", &env),
            &reporter,
        )
        .await
        .expect("copied");
        assert_eq!(
            copied.dotfiles.shown_source(),
            url,
            "the result names the URL"
        );
        let folder = copied.dotfiles.repository.clone();
        assert!(
            folder.starts_with("/tmp/devcell-dotfiles/devcell-dotfiles-"),
            "{folder}"
        );
        let head = engine
            .read_file(&info.id, &format!("{folder}/HEAD"))
            .await
            .unwrap();
        assert!(head.is_some(), "the bare clone's HEAD is in the container");
        assert!(
            engine
                .calls()
                .iter()
                .any(|c| c.starts_with(&format!("copy {} /tmp 1000:1001 ", info.id))),
            "{:?}",
            engine.calls()
        );
        let probe = &engine.execs()[0].request;
        assert_eq!(probe.user.as_deref(), Some("1000:1001"));
        assert_eq!(probe.env.get("HOME").map(String::as_str), Some("/home/me"));
        copied
            .remove(&engine, &info.id, ("1000:1001", &env), &reporter)
            .await;
        let removal = &engine.execs()[1].request;
        assert_eq!(removal.argv, ["rm", "-rf", "--", folder.as_str()]);
        assert_eq!(removal.user.as_deref(), Some("1000:1001"));
        assert!(
            !statuses(&reporter).contains("warning"),
            "{}",
            statuses(&reporter)
        );
    }

    #[tokio::test]
    async fn a_marker_or_a_refused_transport_copies_nothing() {
        let env = indexmap::IndexMap::new();
        let (engine, info) = fake_container("marked\n");
        let reporter = crate::progress::Collect::default();
        let url = "file:///nowhere/dots.git";
        assert!(
            copy_into_existing(&engine, &info, &request(url), ("me", &env), &reporter)
                .await
                .is_none()
        );
        assert!(!engine.calls().iter().any(|c| c.starts_with("copy ")));
        assert_eq!(statuses(&reporter), "", "installed already: nothing said");

        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ext-ran");
        let ext = format!("ext::sh -c touch% {}", ran.display());
        let (engine, info) = fake_container("1000\n1000\n");
        assert!(
            copy_into_existing(&engine, &info, &request(&ext), ("me", &env), &reporter)
                .await
                .is_none()
        );
        assert!(!ran.exists(), "git ran the ext:: command");
        assert!(!engine.calls().iter().any(|c| c.starts_with("copy ")));
        assert!(
            statuses(&reporter).contains("could not export"),
            "{}",
            statuses(&reporter)
        );
    }
}
