//! The private folder a granted host command's judged files are copied into before it runs
//! (attack O5, spec-note 0477; [`crate::security::host_command::copies`]).
//!
//! `<state root>/host-commands/run-<pid>-<random>/` (mode 0700), one per run of
//! `initializeCommand`, removed once the command ended. A folder whose devcell was killed
//! before removing it is swept by the next run (its process is gone). The copies hold
//! workspace files only, never a secret.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;

use crate::lifecycle::{HookCommand, LifecycleError, SimpleCommand, Stage};
use crate::security::{Permission, PermissionRequest};

/// The folder under the state root holding the per-run folders.
const FOLDER: &str = "host-commands";

/// The per-run folder's name prefix; the process id follows.
const PREFIX: &str = "run-";

/// One run's private folder, removed when dropped.
pub(crate) struct JudgedCopies {
    dir: tempfile::TempDir,
}

impl JudgedCopies {
    /// A new private folder under `root` (the state root), after removing the folders of
    /// devcell processes that are gone.
    ///
    /// Errors: the folder cannot be created.
    pub(crate) fn new(root: &Path) -> std::io::Result<Self> {
        let base = root.join(FOLDER);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&base)?;
        crate::process::sweep_dead_pid_folders(&base, PREFIX);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&base)?;
        Ok(Self { dir })
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Every workspace file the judged host commands pin (workspace-relative path → SHA-256).
///
/// Errors: one path judged with two digests (it changed while the commands were judged).
pub(crate) fn pinned_files(
    requests: &[PermissionRequest],
) -> Result<BTreeMap<String, String>, String> {
    let mut pinned = BTreeMap::new();
    for request in requests {
        let Permission::HostCommand(command) = &request.permission else {
            continue;
        };
        for file in &command.files {
            if let Some(earlier) = pinned.insert(file.path.clone(), file.sha256.clone())
                && earlier != file.sha256
            {
                return Err(format!(
                    "`{}` changed while devcell judged it: run again",
                    file.path
                ));
            }
        }
    }
    Ok(pinned)
}

/// `stage` with each command rewritten to run the copies in `dir` of the `pinned` files it
/// names ([`crate::security::host_command::copies::run_copies`]), read from `workspace`.
///
/// Errors: [`LifecycleError::Executor`] naming the file that changed since it was judged or
/// could not be copied.
pub(crate) fn rewrite_stage(
    stage: &Stage,
    pinned: &BTreeMap<String, String>,
    workspace: &Path,
    dir: &Path,
) -> Result<Stage, LifecycleError> {
    use crate::security::host_command::copies::run_copies;
    let what = format!("`{}`", stage.hook);
    let failed = |message: String| LifecycleError::Executor {
        what: what.clone(),
        source: message.into(),
    };
    let simple = |command: &SimpleCommand| -> Result<SimpleCommand, LifecycleError> {
        Ok(match command {
            SimpleCommand::Shell(script) => {
                let argv = run_copies(std::slice::from_ref(script), pinned, workspace, dir)
                    .map_err(&failed)?;
                SimpleCommand::Shell(argv.into_iter().next().unwrap_or_default())
            }
            SimpleCommand::Exec(argv) => {
                SimpleCommand::Exec(run_copies(argv, pinned, workspace, dir).map_err(&failed)?)
            }
        })
    };
    let mut out = stage.clone();
    for sourced in &mut out.commands {
        sourced.command = match &sourced.command {
            HookCommand::Shell(script) => match simple(&SimpleCommand::Shell(script.clone()))? {
                SimpleCommand::Shell(s) => HookCommand::Shell(s),
                SimpleCommand::Exec(a) => HookCommand::Exec(a),
            },
            HookCommand::Exec(argv) => match simple(&SimpleCommand::Exec(argv.clone()))? {
                SimpleCommand::Shell(s) => HookCommand::Shell(s),
                SimpleCommand::Exec(a) => HookCommand::Exec(a),
            },
            HookCommand::Parallel(entries) => {
                let mut rewritten = entries.clone();
                for command in rewritten.values_mut() {
                    *command = simple(command)?;
                }
                HookCommand::Parallel(rewritten)
            }
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_runs_folder_is_swept_and_a_live_one_kept() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join(FOLDER);
        // a pid above the kernel's limit never runs; our own pid does
        let dead = base.join(format!("{PREFIX}4294967294-x"));
        let own = base.join(format!("{PREFIX}{}-y", std::process::id()));
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::create_dir_all(&own).unwrap();
        let copies = JudgedCopies::new(root.path()).unwrap();
        assert!(!dead.exists());
        assert!(own.exists());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(copies.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let path = copies.path().to_path_buf();
        drop(copies);
        assert!(!path.exists());
    }
}
