//! The user's dotfiles repository exported on the host for the install inside the container
//! (spec-notes 0645, 0670): a one-commit bare clone of its `HEAD` in a folder of devcell's
//! state, bound read-only at [`SOURCE_TARGET`] and cloned from there by the dotfiles step;
//! emptied as soon as `up` is over. A handoff exports a host folder so (attack L10); `up`
//! exports a URL so under network `none`, where the container cannot reach it
//! ([`for_up`]).

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
    let in_container_path = url.starts_with('/') || url.starts_with("./") || url.starts_with("../");
    if network != NetworkMode::None || in_container_path {
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
