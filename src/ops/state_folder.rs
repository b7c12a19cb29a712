//! devcell's host-side state folder, where operations keep what outlives one process: the
//! bring-up locks (spec-note 0422), the image-file cache and the run-once marker records. The
//! agent product's sessions live in the same folder ([`crate::handoff::state`]).

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The environment variable overriding the state root.
pub const STATE_DIR_ENV: &str = "DEVCELL_STATE_DIR";

/// The default root: `$DEVCELL_STATE_DIR`, else `$XDG_STATE_HOME/devcell` (`dirs::state_dir`),
/// else `~/.local/state/devcell`.
pub fn default_root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(STATE_DIR_ENV).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    dirs::state_dir()
        .or_else(|| dirs::home_dir().map(|h| h.join(".local").join("state")))
        .map(|d| d.join("devcell"))
}

/// How long a lock found held is tried again before it is reported held: a process that has
/// just let go of a lock can still hold it through a child it was starting (the child has a
/// copy of the descriptor until its `exec` closes it), which under load lasts a moment.
pub const LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Takes an exclusive `flock(2)` on `file` without waiting longer than [`LOCK_GRACE`]:
/// `Ok(false)` when it is still held after that.
///
/// Errors: any `flock` error other than `EWOULDBLOCK`.
pub fn lock_within_grace(file: &File) -> rustix::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    let deadline = std::time::Instant::now() + LOCK_GRACE;
    loop {
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

/// A lock file or its folder that could not be opened or locked.
#[derive(Debug, thiserror::Error)]
#[error("cannot access devcell's state folder `{}`", path.display())]
pub struct LockError {
    /// The file or folder.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// A held bring-up lock ([`StateFolder::lock_bring_up`]); dropping it releases the lock.
#[derive(Debug)]
pub struct BringUpLock {
    _file: File,
}

/// The state folder rooted at one path (created on first write).
#[derive(Debug, Clone)]
pub struct StateFolder {
    root: PathBuf,
}

impl StateFolder {
    /// A state folder rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder at [`default_root`] (`None` when no home folder is known).
    pub fn open_default() -> Option<Self> {
        default_root().map(Self::new)
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/locks/<id>.lock`: the bring-up lock of one dev container identity (`id` is the
    /// `${devcontainerId}` of its id labels, or `container-<id>` for `set-up`).
    pub fn bring_up_lock_path(&self, id: &str) -> PathBuf {
        self.root.join("locks").join(format!("{id}.lock"))
    }

    /// Takes the bring-up lock of `id` ([`StateFolder::bring_up_lock_path`], `flock(2)`
    /// exclusive). With `wait`, blocks while another devcell holds it (call it off the async
    /// runtime's worker threads); without, returns `None` when it is held. Held until the
    /// returned guard is dropped or the process ends (the kernel releases it, so a killed
    /// devcell never leaves it taken).
    ///
    /// # Errors
    /// [`LockError`].
    pub fn lock_bring_up(&self, id: &str, wait: bool) -> Result<Option<BringUpLock>, LockError> {
        let path = self.bring_up_lock_path(id);
        let locks = self.root.join("locks");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&locks)
            .map_err(|source| LockError {
                path: locks.clone(),
                source,
            })?;
        let taken = if wait {
            lock_file(&path).map(Some)
        } else {
            try_lock_file(&path)
        };
        let file = taken.map_err(|source| LockError {
            path: path.clone(),
            source,
        })?;
        Ok(file.map(|file| BringUpLock { _file: file }))
    }
}

/// Opens the lock file `path` (created mode 0600, never truncated) and takes its `flock(2)`
/// exclusive lock, waiting while another process holds it (call it off the async runtime's
/// worker threads). Held until the file is closed: dropped, or the process ends (the kernel
/// releases it, so a killed devcell never leaves it taken).
///
/// Errors: the open's or the lock's.
pub(crate) fn lock_file(path: &Path) -> std::io::Result<File> {
    let file = open_lock_file(path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}

/// [`lock_file`] without waiting: `None` while another process holds the lock.
///
/// Errors: the open's or the lock's.
pub(crate) fn try_lock_file(path: &Path) -> std::io::Result<Option<File>> {
    let file = open_lock_file(path)?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The lock file `path`, opened for writing, created mode 0600, never truncated.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    lock_file_options().open(path)
}

/// [`open_lock_file`] refusing a symlink at `path` (`O_NOFOLLOW`): for the lock files of the
/// handoff's task and door folders.
///
/// Errors: the open's (`ELOOP` for a symlink).
pub(crate) fn open_lock_file_nofollow(path: &Path) -> std::io::Result<File> {
    lock_file_options()
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// How a lock file is opened: for writing, created mode 0600, never truncated.
fn lock_file_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false).mode(0o600);
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bring_up_lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateFolder::new(dir.path());
        let held = store.lock_bring_up("abc", true).unwrap().expect("taken");
        // A second taker (another open file, as another devcell) is refused while it is held.
        assert!(store.lock_bring_up("abc", false).unwrap().is_none());
        assert!(store.lock_bring_up("other", false).unwrap().is_some());
        drop(held);
        assert!(store.lock_bring_up("abc", false).unwrap().is_some());
        assert!(
            store
                .bring_up_lock_path("abc")
                .starts_with(dir.path().join("locks"))
        );
    }
}
