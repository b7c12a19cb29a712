//! The per-task lock (spec-note 0437): `<state>/tasks/<key>/<task>.lock`, an exclusive
//! `flock(2)` taken without waiting by whatever uses the task as a whole (a handoff, from
//! opening the task to its fetch back; `delete`; `prune --tasks`), so a task in use can be
//! neither deleted nor started twice. The kernel drops it with its holder: a killed devcell
//! leaves nothing held. A `.lock` name is never a task's (task names cannot end with it).

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use super::{Result, TaskError, io};

/// A task's lock, held until dropped (or [`TaskLock::remove`]d with the task).
#[derive(Debug)]
pub struct TaskLock {
    _file: File,
    path: PathBuf,
}

/// The lock file of task `task` in the tasks folder `root`: named by the task's name in ASCII
/// lower case, so names that differ only by case share one lock (on a case-insensitive file
/// system they would share a folder and a ref too; spec-note 0437).
pub fn lock_path(root: &Path, task: &str) -> PathBuf {
    root.join(format!("{}.lock", task.to_ascii_lowercase()))
}

pub use crate::ops::state_folder::{LOCK_GRACE, lock_within_grace};

impl TaskLock {
    /// Takes the lock of task `task` in the tasks folder `root` (which exists), waiting no
    /// longer than [`LOCK_GRACE`].
    ///
    /// Errors: [`TaskError::InUse`] while another process holds it; [`TaskError::Io`].
    pub fn take(root: &Path, task: &str) -> Result<TaskLock> {
        let path = lock_path(root, task);
        loop {
            let file =
                crate::ops::state_folder::open_lock_file_nofollow(&path).map_err(io(&path))?;
            if !lock_within_grace(&file).map_err(|e| io(&path)(e.into()))? {
                return Err(TaskError::InUse {
                    task: task.to_string(),
                });
            }
            // the holder before us may have deleted the task and its lock file: a lock on a
            // removed file guards nothing, so take the one the path names now
            let held = file.metadata().map_err(io(&path))?;
            match std::fs::symlink_metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    return Ok(TaskLock { _file: file, path });
                }
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(&path)(e)),
            }
        }
    }

    /// Removes the lock file while still holding it (the task is gone), then lets go.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One holder at a time; the second is told the task is in use; a removed lock file is
    /// not a lock (the next taker makes a new one).
    #[test]
    fn a_task_lock_has_one_holder_and_survives_its_files_removal() {
        let tmp = tempfile::tempdir().unwrap();
        let first = TaskLock::take(tmp.path(), "t").unwrap();
        assert!(matches!(
            TaskLock::take(tmp.path(), "t"),
            Err(TaskError::InUse { .. })
        ));
        let other = TaskLock::take(tmp.path(), "u").unwrap();
        first.remove();
        assert!(!lock_path(tmp.path(), "t").exists());
        let again = TaskLock::take(tmp.path(), "t").unwrap();
        assert!(matches!(
            TaskLock::take(tmp.path(), "t"),
            Err(TaskError::InUse { .. })
        ));
        drop(again);
        drop(other);
        TaskLock::take(tmp.path(), "t").unwrap();
    }

    /// A lock let go while a copy of its descriptor is still open for a moment (a child being
    /// started holds one until its `exec`) is taken once the copy closes, within the grace;
    /// the CI once failed on this (`a_task_in_use_cannot_be_deleted_or_started_twice`).
    #[test]
    fn a_lock_let_go_is_taken_though_a_copy_of_its_descriptor_lingers() {
        let tmp = tempfile::tempdir().unwrap();
        let held = TaskLock::take(tmp.path(), "t").unwrap();
        let copy = held._file.try_clone().unwrap();
        drop(held);
        let closer = std::thread::spawn(move || {
            std::thread::sleep(LOCK_GRACE / 4);
            drop(copy);
        });
        TaskLock::take(tmp.path(), "t").unwrap();
        closer.join().unwrap();
    }
}
