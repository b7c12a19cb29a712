//! The attacker's side of the hostile-repository tests (`tests/it/hostile`): a repository
//! committed with git (symbolic links included, as git stores them), owned by the test
//! workspace user, and host-side tripwires that prove nothing happened on the host.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::{self, git};

/// A hostile repository: the workspace folder of a [`TestContext`] whose `.devcontainer/…`
/// files and symbolic links are written by the attacker, committed with git, then handed to
/// [`git::WORKSPACE_OWNER`]. On drop the context removes the folder and everything labelled
/// `devcontainer.local_folder=<repository>` (containers, volumes, networks).
pub struct HostileRepo {
    ctx: TestContext,
}

impl HostileRepo {
    /// An empty repository (`git init`, no commit yet), for tests without the engine.
    pub fn new() -> HostileRepo {
        HostileRepo::of(TestContext::new("hostile"))
    }

    /// [`Self::new`] behind the engine gate of [`TestContext::engine`] (`image` present).
    pub fn engine(test: &str, image: &str) -> Option<HostileRepo> {
        TestContext::engine(test, image).map(HostileRepo::of)
    }

    /// [`Self::engine`] with the busybox test image.
    pub fn busybox(test: &str) -> Option<HostileRepo> {
        HostileRepo::engine(test, BUSYBOX_IMAGE)
    }

    /// [`Self::busybox`] with the repository at `<private folder>/<rel>`: for a test that
    /// binds the folder above the repository, which must not be the shared temporary folder
    /// (every other test's workspace is in it: a running bind of it is their foreign writer).
    pub fn busybox_at(test: &str, rel: &str) -> Option<HostileRepo> {
        TestContext::busybox(test).map(|ctx| HostileRepo::of(ctx.at(rel)))
    }

    fn of(ctx: TestContext) -> HostileRepo {
        git::git(ctx.path(), &["init", "-q"]);
        ctx.clean_label(&format!(
            "devcontainer.local_folder={}",
            ctx.path().display()
        ));
        HostileRepo { ctx }
    }

    /// The context that owns the repository (its `devcell` runner and cleanup guard).
    pub fn context(&self) -> &TestContext {
        &self.ctx
    }

    /// The repository's folder (the workspace folder given to devcell).
    pub fn path(&self) -> &Path {
        self.ctx.path()
    }

    /// Writes `rel` (parents created) with `text`.
    pub fn file(&self, rel: &str, text: &str) -> &HostileRepo {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self
    }

    /// `.devcontainer/devcontainer.json` with `text`.
    pub fn config(&self, text: &str) -> &HostileRepo {
        self.file(".devcontainer/devcontainer.json", text)
    }

    /// A symbolic link at `rel` (parents created) pointing at `target`, as written (absolute or
    /// relative).
    pub fn symlink(&self, rel: &str, target: impl AsRef<Path>) -> &HostileRepo {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target.as_ref(), &path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self
    }

    /// `git add -A && git commit`, then gives the whole tree to [`git::WORKSPACE_OWNER`]
    /// (devcell, run as root, treats that user as the workspace user).
    pub fn commit(&self) -> &HostileRepo {
        git::git(self.path(), &["add", "-A"]);
        git::git(
            self.path(),
            &["commit", "-q", "--allow-empty", "-m", "attacker"],
        );
        git::give_to_workspace_owner(self.path());
        self
    }

    /// [`support::tree_fingerprint`] of the repository.
    pub fn fingerprint(&self) -> String {
        support::tree_fingerprint(self.path())
    }
}

impl Default for HostileRepo {
    fn default() -> Self {
        HostileRepo::new()
    }
}

/// A host folder outside every workspace, holding a secret file: what an attack would read,
/// mount or write. [`HostTarget::assert_untouched`] checks its tree is byte-identical;
/// [`HostTarget::marker`] is a path that must never come to exist (a command the repository
/// names that ran on the host would create it).
pub struct HostTarget {
    dir: tempfile::TempDir,
    before: String,
}

impl HostTarget {
    /// A folder with `secret.txt` (content [`HostTarget::SECRET`]).
    pub fn new() -> HostTarget {
        let dir = tempfile::Builder::new()
            .prefix("devcell-host-target-")
            .tempdir()
            .expect("temp dir");
        std::fs::write(dir.path().join("secret.txt"), HostTarget::SECRET).unwrap();
        let before = support::tree_fingerprint(dir.path());
        HostTarget { dir, before }
    }

    /// The content of `secret.txt`: a test may search for it where it must not appear.
    pub const SECRET: &'static str = "host-secret-7f3a91c2";

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A path in a sibling folder (not under [`HostTarget::path`], so the fingerprint is not
    /// changed by creating it) that must never exist: `<tmp>/<folder name>.marker`.
    pub fn marker(&self) -> PathBuf {
        let name = self
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        std::env::temp_dir().join(format!("{name}.marker"))
    }

    /// Panics when the folder changed or [`HostTarget::marker`] exists.
    pub fn assert_untouched(&self) {
        assert_eq!(
            support::tree_fingerprint(self.path()),
            self.before,
            "the host folder {} changed",
            self.path().display()
        );
        let marker = self.marker();
        assert!(
            !marker.exists(),
            "{} exists: a command named by the repository ran on the host",
            marker.display()
        );
    }
}

impl Default for HostTarget {
    fn default() -> Self {
        HostTarget::new()
    }
}

impl Drop for HostTarget {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.marker());
    }
}

/// What devcell recorded in the state folder `state` (`DEVCELL_STATE_DIR`): every file but the
/// bring-up locks (`locks/<id>.lock`, empty), which `up` and `handoff` take before they judge
/// the configuration (spec-note 0400). Empty when nothing was recorded.
pub fn recorded_state(state: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(state, &mut files);
    let locks = state.join("locks");
    files.retain(|f| {
        let lock = f.parent() == Some(locks.as_path())
            && f.extension().is_some_and(|e| e == "lock")
            && std::fs::metadata(f).is_ok_and(|m| m.len() == 0);
        !lock
    });
    files
}
