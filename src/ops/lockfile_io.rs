//! The Features lockfile beside the configuration, read and written the way devcell treats
//! every file of the repository (spec-note 0400): when the configuration was judged
//! ([`LoadedConfiguration::confined`]) the lockfile is resolved and judged against the
//! workspace before it is read ([`host_path::confine`]: a link out is refused, not read), read
//! without following links ([`host_path::read_no_follow`]), and always written through a
//! no-follow workspace handle ([`WorkspaceDir`]), so a linked `.devcontainer` or lockfile never
//! makes a (root) write land outside. Under `reference` (or for a `--config` the user names)
//! the lockfile is read as written, as the reference CLI does, but still never written
//! through a link.

use std::path::{Path, PathBuf};

use crate::config;
use crate::features::error::FeatureError;
use crate::features::lockfile::WriteOutcome;
use crate::features::lockfile::{self, Decision, Lockfile, LockfileMode, LockfileState};
use crate::ops::error::{OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::security::Grants;
use crate::security::host_path::{self, Existing, Places, WorkspaceDir};

/// A lockfile bound larger than any real one (the same as `devcontainer.json`'s).
const MAX_LOCKFILE_BYTES: u64 = config::jsonc::MAX_FILE_BYTES as u64;

/// Where a configuration's lockfile is, and how it is judged.
#[derive(Debug, Clone)]
pub(crate) struct LockfileAt {
    /// The lockfile as the configuration's path names it (messages).
    pub path: PathBuf,
    /// The workspace places and grants it is judged with (`None`: used as written).
    judged: Option<(Places, Grants)>,
}

impl LockfileAt {
    /// The lockfile of a loaded configuration ([`lockfile::lockfile_path`]).
    pub(crate) fn of(loaded: &LoadedConfiguration) -> LockfileAt {
        LockfileAt::new(
            &loaded.config_file,
            &loaded.workspace_folder,
            loaded.confined.as_ref(),
        )
    }

    /// The lockfile beside `config_file`, judged against `workspace_folder` with `confined`
    /// (`None`: used as written).
    pub(crate) fn new(
        config_file: &Path,
        workspace_folder: &Path,
        confined: Option<&Grants>,
    ) -> LockfileAt {
        LockfileAt {
            path: lockfile::lockfile_path(config_file),
            judged: confined.map(|g| {
                (
                    Places::new(
                        &config::workspace::resolve_path(workspace_folder),
                        None,
                        None,
                    ),
                    g.clone(),
                )
            }),
        }
    }

    /// The file's text, `None` when there is none.
    ///
    /// Errors: [`OpsError::Security`] (`PathOutside`: a link out, not read);
    /// [`OpsError::Feature`] (`Io`: unreadable, a link swapped in, too large).
    fn text(&self) -> Result<Option<String>> {
        let io = |source| {
            OpsError::Feature(FeatureError::Io {
                path: self.path.clone(),
                source,
            })
        };
        let bytes = match &self.judged {
            Some((places, grants)) => {
                let resolved =
                    host_path::confine("devcontainer-lock.json", &self.path, places, grants)?;
                host_path::read_no_follow(&resolved, MAX_LOCKFILE_BYTES).map_err(io)?
            }
            None => match std::fs::read(&self.path) {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io(e)),
            },
        };
        bytes
            .map(|b| {
                String::from_utf8(b).map_err(|_| {
                    io(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "not UTF-8",
                    ))
                })
            })
            .transpose()
    }

    /// Reads it for `mode` ([`lockfile::read_for`]'s rules): not read under `Off`.
    ///
    /// Errors: as [`LockfileAt::text`]; [`FeatureError::Lockfile`] when it does not parse.
    pub(crate) fn read(&self, mode: LockfileMode) -> Result<LockfileState> {
        if !mode.reads() {
            return Ok(LockfileState::Missing);
        }
        match self.text()? {
            None => Ok(LockfileState::Missing),
            Some(text) => Ok(lockfile::parse(&text, &self.path)?),
        }
    }

    /// Applies `mode` to `lock` ([`lockfile::decide`]) and writes it when asked, through
    /// [`WorkspaceDir`]: the folder it resolves to (judged) or the configuration's folder is
    /// opened once and the file replaced by a rename relative to that handle, never through
    /// a link (a linked lockfile is left as it is: an error). A new file gets `0644` (a
    /// replaced one keeps its mode) and the workspace owner (spec-note 0250).
    ///
    /// Errors: as [`LockfileAt::read`]; [`FeatureError::Lockfile`] (frozen);
    /// [`FeatureError::Io`] when it cannot be written.
    pub(crate) fn apply(&self, lock: &Lockfile, mode: LockfileMode) -> Result<WriteOutcome> {
        if mode == LockfileMode::Off {
            return Ok(WriteOutcome::Skipped);
        }
        let existing = self.text()?;
        let text = match lockfile::decide(existing.as_deref(), lock, mode, &self.path)? {
            Decision::Done(outcome) => return Ok(outcome),
            Decision::Write(text) => text,
        };
        let io = |message: String| {
            OpsError::Feature(FeatureError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(message),
            })
        };
        let name = self
            .path
            .file_name()
            .ok_or_else(|| io("no file name".into()))?;
        let written_folder = self.path.parent().unwrap_or(Path::new("/"));
        // the folder it is written in: as judged (its links resolved, inside the workspace or
        // granted), else the configuration's folder as named
        let (root, rel) = match &self.judged {
            Some((places, grants)) => {
                let folder =
                    host_path::confine("devcontainer-lock.json", written_folder, places, grants)?;
                match folder.strip_prefix(&places.workspace) {
                    Ok(below) if !below.as_os_str().is_empty() => {
                        (places.workspace.clone(), below.join(name))
                    }
                    _ => (folder.clone(), PathBuf::from(name)),
                }
            }
            None => (written_folder.to_path_buf(), PathBuf::from(name)),
        };
        let mode_bits = std::fs::symlink_metadata(root.join(&rel))
            .ok()
            .filter(|m| m.file_type().is_file())
            .map_or(0o644, |m| {
                std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
            });
        let rel = rel.to_str().ok_or_else(|| io("not a UTF-8 path".into()))?;
        WorkspaceDir::open(&root)
            .and_then(|dir| dir.write(rel, text.as_bytes(), mode_bits, Existing::Replace, false))
            .map_err(|e| io(e.to_string()))?;
        Ok(WriteOutcome::Written)
    }
}
