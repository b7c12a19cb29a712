//! `handoff --dotfiles-repository` (and `--dotfiles-install-command`, `--dotfiles-target-path`):
//! the user's dotfiles installed in the handoff's container by the same step as `up`'s
//! ([`crate::lifecycle::dotfiles`], spec-note 0645): once per container, after
//! `postCreateCommand`, as the remote user (numeric under `hardened`).
//!
//! A handoff has no `--mount` and runs under network `none` by default, so a repository that
//! is a folder on the host is given to the container as what a URL clone would give it: its
//! committed `HEAD` only. devcell's host git makes a one-commit bare clone of it (no remote
//! URL, no other branch, tag, reflog, stash or ignored file: attack L10) into a folder of
//! devcell's state ([`stage`]), bound read-only at [`SOURCE_TARGET`] and cloned from there
//! inside the container; the folder is emptied as soon as `up` (and with it the install step)
//! is over, so the agent finds nothing there. No network is needed. A URL or `owner/repo` is
//! cloned inside the container, which needs a network that reaches it (under `none` the plan
//! warns, and the install fails without failing the handoff). The repository is the user's
//! flag, never the configuration's.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::handoff::repository::{MountPurpose, WorkspaceMount};
use crate::lifecycle::Dotfiles;
use crate::ops::error::{OpsError, Result};
use crate::settings::NetworkMode;

/// Where a host folder given as the repository is bound (read-only) in the container.
pub const SOURCE_TARGET: &str = "/run/devcell/dotfiles";

/// The dotfiles step of a handoff's plan (`dotfiles` in `handoff --plan --format json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedDotfiles {
    /// `--dotfiles-repository` as given (a URL carrying credentials is refused before).
    pub repository: String,
    /// A host folder given as the repository: its real path, whose committed `HEAD` is
    /// exported and bound read-only at [`SOURCE_TARGET`] for the install only ([`stage`]);
    /// `null` for a URL or `owner/repo`, cloned inside the container.
    pub host_source: Option<PathBuf>,
    /// `--dotfiles-target-path` (default `~/dotfiles`), in the container.
    pub target_path: String,
    /// `--dotfiles-install-command`; `null`: the first of the reference CLI's candidates.
    pub install_command: Option<String>,
}

/// What a handoff does with the user's dotfiles request: the plan's entry, the request `up`
/// runs in the container, and the read-only bind of a host folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffDotfiles {
    /// The plan's entry.
    pub planned: PlannedDotfiles,
    /// The request `up` runs: a host folder replaced by [`SOURCE_TARGET`].
    pub in_container: Dotfiles,
    /// The read-only bind of the export of a host folder (its source is the export folder in
    /// devcell's state, never the user's folder), else `None`.
    pub mount: Option<WorkspaceMount>,
}

impl HandoffDotfiles {
    /// The `safe.directory` entry git in the container needs to clone the bound folder (the
    /// host user owns it, not the remote user).
    pub fn safe_directory(&self) -> Option<String> {
        self.mount.as_ref().map(|m| m.target.clone())
    }
}

/// Whether `repository` names a folder on the host: an absolute path (the command line makes
/// `./`, `../` and `~/` absolute before), as `up` would take a path in the container.
fn host_path(repository: &str) -> Option<&Path> {
    repository.starts_with('/').then(|| Path::new(repository))
}

/// The handoff's dotfiles step for `request` (`None`: no `--dotfiles-repository`); a host
/// folder's export goes to `export` (a folder of devcell's state for this workspace, made by
/// [`stage`], never here: the plan writes nothing).
///
/// Errors: [`OpsError::Unsupported`] with the host runtime (the agent runs in the user's own
/// home there), and for a host path that is not a folder.
pub fn plan(
    request: Option<&Dotfiles>,
    host_runtime: bool,
    network: NetworkMode,
    export: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<HandoffDotfiles>> {
    let Some(request) = request else {
        return Ok(None);
    };
    if host_runtime {
        return Err(OpsError::Unsupported {
            message: "`--dotfiles-repository` installs dotfiles in the handoff's container; with `--runtime host` the agent runs in your own home, with your own dotfiles".into(),
            hint: Some("leave out the `--dotfiles-*` flags, or run the agent in a container".into()),
        });
    }
    let mut in_container = request.clone();
    let mut mount = None;
    let host_source = match host_path(&request.repository) {
        Some(path) => {
            let real = std::fs::canonicalize(path)
                .ok()
                .filter(|p| p.is_dir())
                .ok_or_else(|| OpsError::Unsupported {
                    message: format!(
                        "`--dotfiles-repository` `{}` is not a folder on this host",
                        path.display()
                    ),
                    hint: Some(
                        "give a local git repository's folder, a URL, or `owner/repo`".into(),
                    ),
                })?;
            in_container.repository = SOURCE_TARGET.to_string();
            mount = Some(WorkspaceMount {
                source: export.to_path_buf(),
                target: SOURCE_TARGET.to_string(),
                read_only: true,
                purpose: MountPurpose::GitProtected,
            });
            Some(real)
        }
        None => {
            if network == NetworkMode::None {
                warnings.push(format!(
                    "`--dotfiles-repository` `{}` is cloned inside the container, which has no network under `--network none`: the install will fail (the handoff goes on); give a local clone's folder instead",
                    request.shown_source()
                ));
            }
            None
        }
    };
    Ok(Some(HandoffDotfiles {
        planned: PlannedDotfiles {
            repository: request.shown_source(),
            host_source,
            target_path: request.target_path.clone(),
            install_command: request.install_command.clone(),
        },
        in_container,
        mount,
    }))
}

/// The step in words: where the repository comes from, where it goes, who installs it.
pub fn describe(planned: &PlannedDotfiles) -> String {
    let from = match &planned.host_source {
        Some(source) => format!(
            "host folder {} (its committed HEAD only, bound read-only at {SOURCE_TARGET} for the install)",
            source.display()
        ),
        None => format!("{} (cloned inside the container)", planned.repository),
    };
    format!(
        "{from} into {}, installed once per container as the remote user",
        planned.target_path
    )
}

/// The plan's status line for the step.
pub fn plan_line(planned: &PlannedDotfiles) -> String {
    format!("plan: dotfiles from {}", describe(planned))
}

/// How long devcell's host git may take to export a host folder's committed `HEAD`.
const EXPORT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// The export of a host dotfiles folder for one `up` ([`stage`]): while it lives, the bind's
/// source holds a one-commit bare clone of the folder's `HEAD`; dropped, the source is emptied
/// (the folder itself stays: the container's bind keeps pointing at it, and the next handoff
/// fills it again), so the agent that runs after `up` finds nothing at [`SOURCE_TARGET`].
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

/// Fills the bind's source of `dotfiles` (a host folder's, else nothing to do) with the
/// folder's committed `HEAD` and nothing else: devcell's hardened host git
/// ([`crate::config::hostgit::command`], run as the folder's owner when devcell is root) makes
/// a bare clone of depth 1, without tags, templates or its `origin` remote, in a private
/// temporary folder; its regular files are copied into the export folder (mode 0755/0644: the
/// container's user reads it through the bind; the folder above is devcell's, 0700). Returns
/// the guard that empties it, and a warning when the export failed (the source is then empty:
/// the install fails inside the container and the handoff goes on, as any failed install).
pub fn stage(dotfiles: Option<&HandoffDotfiles>) -> (Staged, Option<String>) {
    let Some((source, export)) = dotfiles.and_then(|d| {
        Some((
            d.planned.host_source.as_deref()?,
            d.mount.as_ref()?.source.as_path(),
        ))
    }) else {
        return (Staged::default(), None);
    };
    let staged = Staged {
        export: Some(export.to_path_buf()),
    };
    let warning = export_head(source, export).err().map(|why| {
        format!(
            "`--dotfiles-repository` `{}`: devcell could not export its committed HEAD ({why}); the dotfiles step finds nothing to install",
            source.display()
        )
    });
    (staged, warning)
}

/// [`stage`]'s work: the export folder made (or emptied), the clone made and copied in.
fn export_head(source: &Path, export: &Path) -> std::result::Result<(), String> {
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
    // a root devcell runs git as the folder's owner, who writes the clone (spec-note 0250)
    crate::config::ownership::hand_over(staging.path(), source)
        .map_err(|e| shown(e, staging.path()))?;
    let clone = staging.path().join("dots.git");
    let file = [("protocol.file.allow".to_string(), "always".to_string())];
    let mut git = crate::config::hostgit::command(source, &file);
    git.args([
        "clone",
        "--quiet",
        "--bare",
        "--no-local",
        "--depth",
        "1",
        "--no-tags",
        "--template=",
        "--",
    ])
    .arg(source)
    .arg(&clone);
    run(git, "clone")?;
    let mut forget = crate::config::hostgit::command(&clone, &[]);
    forget.args(["remote", "remove", "origin"]);
    run(forget, "remote remove origin")?;
    copy_tree(&clone, export).map_err(|e| shown(e, export))
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
/// 0755 and 0644; anything else (a link) is left out.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::DirBuilder::new().mode(0o755).create(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644))?;
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(repository: &str) -> Dotfiles {
        Dotfiles::from_flags(Some(repository), Some("setup.sh"), None)
            .unwrap()
            .unwrap()
    }

    /// A request of `repository` and nothing else.
    pub(super) fn bare_request(repository: &str) -> Dotfiles {
        Dotfiles::from_flags(Some(repository), None, None)
            .unwrap()
            .unwrap()
    }

    /// `request` planned for a container under network `none`, exported to `export`.
    pub(super) fn planned(
        request: &Dotfiles,
        export: &Path,
        warnings: &mut Vec<String>,
    ) -> HandoffDotfiles {
        plan(Some(request), false, NetworkMode::None, export, warnings)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_host_folders_export_is_bound_read_only_and_cloned_from_inside() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let mut warnings = Vec::new();
        let d = planned(
            &request(dir.path().to_str().unwrap()),
            Path::new("/state/dotfiles/k"),
            &mut warnings,
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(d.in_container.repository, SOURCE_TARGET);
        assert_eq!(d.in_container.install_command.as_deref(), Some("setup.sh"));
        assert_eq!(d.planned.host_source.as_deref(), Some(real.as_path()));
        let m = d.mount.as_ref().unwrap();
        assert!(m.read_only);
        // the export folder is bound, never the user's folder (attack L10)
        assert_eq!(
            (m.source.as_path(), m.target.as_str()),
            (Path::new("/state/dotfiles/k"), SOURCE_TARGET)
        );
        assert_eq!(d.safe_directory().as_deref(), Some(SOURCE_TARGET));
        assert!(plan_line(&d.planned).contains("committed HEAD only"));
    }

    #[test]
    fn a_url_is_cloned_inside_and_warned_about_under_none() {
        let mut warnings = Vec::new();
        let d = planned(
            &request("me/dots"),
            Path::new("/state/dotfiles/k"),
            &mut warnings,
        );
        assert_eq!(d.mount, None);
        assert_eq!(d.in_container, request("me/dots"));
        assert_eq!(d.planned.host_source, None);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("no network"), "{warnings:?}");
        let mut quiet = Vec::new();
        plan(
            Some(&request("me/dots")),
            false,
            NetworkMode::Default,
            Path::new("/e"),
            &mut quiet,
        )
        .unwrap();
        assert!(quiet.is_empty());
    }

    #[test]
    fn the_host_runtime_and_a_missing_folder_are_refused() {
        let mut w = Vec::new();
        assert!(
            plan(None, true, NetworkMode::None, Path::new("/e"), &mut w)
                .unwrap()
                .is_none()
        );
        let err = plan(
            Some(&request("me/dots")),
            true,
            NetworkMode::None,
            Path::new("/e"),
            &mut w,
        )
        .unwrap_err();
        assert!(err.to_string().contains("--runtime host"), "{err}");
        let err = plan(
            Some(&request("/nonexistent/devcell-dots")),
            false,
            NetworkMode::None,
            Path::new("/e"),
            &mut w,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not a folder"), "{err}");
    }
}

/// Attack L10: what the container gets of a host dotfiles folder is its committed `HEAD` and
/// nothing else, and only while `up` runs.
#[cfg(test)]
mod export_tests {
    use super::tests::{bare_request, planned};
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
        let mut warnings = Vec::new();
        let d = planned(
            &bare_request(dots.to_str().unwrap()),
            &export,
            &mut warnings,
        );
        assert!(!export.exists(), "the plan writes nothing");
        let (staged, warning) = stage(Some(&d));
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
        let mut warnings = Vec::new();
        let d = planned(
            &bare_request(dir.path().to_str().unwrap()),
            &export,
            &mut warnings,
        );
        let (staged, warning) = stage(Some(&d));
        let warning = warning.expect("a warning");
        assert!(warning.contains("could not export"), "{warning}");
        assert_eq!(std::fs::read_dir(&export).unwrap().count(), 0);
        drop(staged);
        assert!(stage(None).1.is_none());
    }
}
