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
//! cloned inside the container when it has a network; under `none` devcell's host git clones
//! its `HEAD` into the same export instead (spec-note 0670). The repository is the user's
//! flag, never the configuration's.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::handoff::repository::{MountPurpose, WorkspaceMount};
use crate::lifecycle::Dotfiles;
use crate::ops::error::{OpsError, Result};
use crate::settings::NetworkMode;

pub use crate::ops::dotfiles::{SOURCE_TARGET, Staged};

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
    /// Whether devcell's host git exports the repository (a host folder, or a URL under
    /// network `none`, spec-note 0670) for the install, bound read-only at [`SOURCE_TARGET`];
    /// `false`: cloned inside the container.
    pub cloned_on_host: bool,
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
    // a host folder, or a URL under `none`: exported on the host and bound read-only
    let mut exported = false;
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
            exported = true;
            Some(real)
        }
        // under `none` the container cannot reach a URL: devcell's host git clones it into the
        // export instead, as `up` does (spec-note 0670)
        None if network == NetworkMode::None => {
            in_container.exported_from = Some(request.clone_source());
            exported = true;
            None
        }
        None => None,
    };
    let mount = exported.then(|| {
        in_container.repository = SOURCE_TARGET.to_string();
        WorkspaceMount {
            source: export.to_path_buf(),
            target: SOURCE_TARGET.to_string(),
            read_only: true,
            purpose: MountPurpose::GitProtected,
        }
    });
    Ok(Some(HandoffDotfiles {
        planned: PlannedDotfiles {
            repository: request.shown_source(),
            host_source,
            target_path: request.target_path.clone(),
            install_command: request.install_command.clone(),
            cloned_on_host: mount.is_some(),
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
        None if planned.cloned_on_host => format!(
            "{} (its HEAD cloned by devcell's host git: the container has no network; bound read-only at {SOURCE_TARGET} for the install)",
            planned.repository
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

/// Fills the bind's source of `dotfiles` (a host folder's, or a URL's under network `none`;
/// else nothing to do) with the repository's committed `HEAD` and nothing else
/// ([`crate::ops::dotfiles::stage_export`], git run as a folder's owner when devcell is root). Returns the guard that empties it after
/// `up`, and a warning when the export failed (the install then fails inside the container
/// and the handoff goes on, as any failed install).
pub fn stage(dotfiles: Option<&HandoffDotfiles>) -> (Staged, Option<String>) {
    use crate::ops::dotfiles::{ExportSource, stage_export};
    let Some((d, export)) = dotfiles.and_then(|d| Some((d, d.mount.as_ref()?.source.as_path())))
    else {
        return (Staged::default(), None);
    };
    match (&d.planned.host_source, &d.in_container.exported_from) {
        (Some(folder), _) => stage_export(ExportSource::Folder(folder), export),
        (None, Some(url)) => stage_export(ExportSource::Url(url), export),
        (None, None) => (Staged::default(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(repository: &str) -> Dotfiles {
        Dotfiles::from_flags(Some(repository), Some("setup.sh"), None)
            .unwrap()
            .unwrap()
    }

    /// `request` planned for a container under network `none`, exported to `export`.
    fn planned(request: &Dotfiles, export: &Path) -> HandoffDotfiles {
        plan(Some(request), false, NetworkMode::None, export)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_host_folders_export_is_bound_read_only_and_cloned_from_inside() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let d = planned(
            &request(dir.path().to_str().unwrap()),
            Path::new("/state/dotfiles/k"),
        );
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
    fn a_url_is_cloned_inside_or_on_the_host_under_none() {
        let d = planned(&request("me/dots"), Path::new("/state/dotfiles/k"));
        let m = d.mount.as_ref().expect("the export is bound under none");
        assert!(m.read_only);
        assert_eq!(
            (m.source.as_path(), m.target.as_str()),
            (Path::new("/state/dotfiles/k"), SOURCE_TARGET)
        );
        assert_eq!(d.in_container.repository, SOURCE_TARGET);
        assert_eq!(
            d.in_container.exported_from.as_deref(),
            Some("https://github.com/me/dots.git")
        );
        assert_eq!(d.planned.host_source, None);
        assert!(d.planned.cloned_on_host);
        assert!(
            plan_line(&d.planned).contains("host git"),
            "{}",
            plan_line(&d.planned)
        );
        let inside = plan(
            Some(&request("me/dots")),
            false,
            NetworkMode::Default,
            Path::new("/e"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(inside.mount, None);
        assert_eq!(inside.in_container, request("me/dots"));
        assert!(!inside.planned.cloned_on_host);
    }

    #[test]
    fn the_host_runtime_and_a_missing_folder_are_refused() {
        assert!(
            plan(None, true, NetworkMode::None, Path::new("/e"))
                .unwrap()
                .is_none()
        );
        let refused = |repository: &str, host: bool| {
            plan(
                Some(&request(repository)),
                host,
                NetworkMode::None,
                Path::new("/e"),
            )
            .unwrap_err()
            .to_string()
        };
        let err = refused("me/dots", true);
        assert!(err.contains("--runtime host"), "{err}");
        let err = refused("/nonexistent/devcell-dots", false);
        assert!(err.contains("not a folder"), "{err}");
    }
}
