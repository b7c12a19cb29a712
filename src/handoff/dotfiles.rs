//! `handoff --dotfiles-repository` (and `--dotfiles-install-command`, `--dotfiles-target-path`):
//! the user's dotfiles installed in the handoff's container by the same step as `up`'s
//! ([`crate::lifecycle::dotfiles`], spec-note 0645): once per container, after
//! `postCreateCommand`, as the remote user (numeric under `hardened`).
//!
//! A handoff has no `--mount` and runs under network `none` by default, so a repository that
//! is a folder on the host is bound read-only at [`SOURCE_TARGET`] and cloned from there
//! inside the container: nothing of it runs or is written on the host, and no network is
//! needed. A URL or `owner/repo` is cloned inside the container, which needs a network that
//! reaches it (under `none` the plan warns, and the install fails without failing the
//! handoff). The repository is the user's flag, never the configuration's.

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
    /// A host folder given as the repository: its real path, bound read-only at
    /// [`SOURCE_TARGET`]; `null` for a URL or `owner/repo`, cloned inside the container.
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
    /// The bind of a host folder (read-only), else `None`.
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

/// The handoff's dotfiles step for `request` (`None`: no `--dotfiles-repository`).
///
/// Errors: [`OpsError::Unsupported`] with the host runtime (the agent runs in the user's own
/// home there), and for a host path that is not a folder.
pub fn plan(
    request: Option<&Dotfiles>,
    host_runtime: bool,
    network: NetworkMode,
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
                source: real.clone(),
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
            "host folder {} (bound read-only at {SOURCE_TARGET})",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(repository: &str) -> Dotfiles {
        Dotfiles::from_flags(Some(repository), Some("setup.sh"), None)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_host_folder_is_bound_read_only_and_cloned_from_inside() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let mut warnings = Vec::new();
        let d = plan(
            Some(&request(dir.path().to_str().unwrap())),
            false,
            NetworkMode::None,
            &mut warnings,
        )
        .unwrap()
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(d.in_container.repository, SOURCE_TARGET);
        assert_eq!(d.in_container.install_command.as_deref(), Some("setup.sh"));
        assert_eq!(d.planned.host_source.as_deref(), Some(real.as_path()));
        let m = d.mount.as_ref().unwrap();
        assert!(m.read_only);
        assert_eq!(
            (m.source.as_path(), m.target.as_str()),
            (real.as_path(), SOURCE_TARGET)
        );
        assert_eq!(d.safe_directory().as_deref(), Some(SOURCE_TARGET));
        assert!(plan_line(&d.planned).contains("bound read-only"));
    }

    #[test]
    fn a_url_is_cloned_inside_and_warned_about_under_none() {
        let mut warnings = Vec::new();
        let d = plan(
            Some(&request("me/dots")),
            false,
            NetworkMode::None,
            &mut warnings,
        )
        .unwrap()
        .unwrap();
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
            &mut quiet,
        )
        .unwrap();
        assert!(quiet.is_empty());
    }

    #[test]
    fn the_host_runtime_and_a_missing_folder_are_refused() {
        let mut w = Vec::new();
        assert!(
            plan(None, true, NetworkMode::None, &mut w)
                .unwrap()
                .is_none()
        );
        let err = plan(Some(&request("me/dots")), true, NetworkMode::None, &mut w).unwrap_err();
        assert!(err.to_string().contains("--runtime host"), "{err}");
        let err = plan(
            Some(&request("/nonexistent/devcell-dots")),
            false,
            NetworkMode::None,
            &mut w,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not a folder"), "{err}");
    }
}
