//! [`RepoGit`]: one repository of a handoff with its container git directory, where devcell
//! keeps it and where the container sees it, and its preparation for a session
//! ([`RepoGit::prepare`]).

use std::path::{Path, PathBuf};

use super::dir::ContainerGitDir;
use super::files::write_new;
use super::inflated::FetchBudget;
use super::report::FetchBack;
use super::{ContainerGitError, HostRepo, MAX_CHANGED_REFS, Result, io};

/// Where the container sees the container git directories and the host objects:
/// `<CONTAINER_BASE>/<id>/{git,objects}` (outside any workspace target).
pub const CONTAINER_BASE: &str = "/run/devcell/git";

/// One repository of a handoff with its container git directory: where devcell keeps it and
/// where the container sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoGit {
    /// The repository's name.
    pub repo: String,
    /// Its working tree on the host.
    pub work_tree: PathBuf,
    /// Its host git directory.
    pub git_dir: PathBuf,
    /// Its host common git directory.
    pub common_dir: PathBuf,
    /// Its working tree in the container.
    pub container_path: String,
    /// The state folder of its container git directory.
    pub slot: PathBuf,
    /// `<CONTAINER_BASE>/<id>`: a stable id per repository path.
    pub mount_base: String,
    /// Whether its `.git` is a file or link (a linked worktree, a submodule): the container
    /// then gets devcell's own `.git` file, read-only, naming the container git directory.
    pub linked: bool,
    /// Folders of its working tree bound on themselves: each of its submodules' folders and
    /// every folder above one (spec-note 0436, "Submodules").
    pub folders: Vec<FolderBind>,
    /// The gitlink paths (relative to its working tree) whose folders the handoff covers:
    /// every gitlink of its index (spec-note 0436, "Submodules").
    pub submodules: Vec<String>,
    /// Whether it is a submodule of another repository of the handoff.
    pub nested: bool,
}

#[cfg(test)]
impl RepoGit {
    /// Test support: repository `repo` at `work_tree` with its git directory `.git` there (not
    /// linked, no submodules, not nested), at `container_path` in the container, its container
    /// git directory in `slot` and mounted under `mount_base`.
    pub(crate) fn plain(
        repo: &str,
        work_tree: &Path,
        container_path: &str,
        slot: impl Into<PathBuf>,
        mount_base: &str,
    ) -> Self {
        RepoGit {
            repo: repo.into(),
            work_tree: work_tree.to_path_buf(),
            git_dir: work_tree.join(".git"),
            common_dir: work_tree.join(".git"),
            container_path: container_path.into(),
            slot: slot.into(),
            mount_base: mount_base.into(),
            linked: false,
            folders: Vec::new(),
            submodules: Vec::new(),
            nested: false,
        }
    }
}

impl RepoGit {
    /// Its container git directory.
    pub fn dir(&self) -> ContainerGitDir {
        ContainerGitDir::new(&self.slot)
    }

    /// The host repository.
    pub fn host(&self) -> HostRepo<'_> {
        HostRepo {
            work_tree: &self.work_tree,
            git_dir: &self.git_dir,
            common_dir: &self.common_dir,
        }
    }

    /// Where the host's `objects` folder is mounted (read-only) in the container.
    pub fn objects_target(&self) -> String {
        format!("{}/objects", self.mount_base)
    }

    /// Where the container git directory is in the container: `<repo>/.git`, or for a linked
    /// repository `<mount_base>/git` (named by devcell's `.git` file).
    pub fn git_target(&self) -> String {
        if self.linked {
            format!("{}/git", self.mount_base)
        } else {
            format!("{}/.git", self.container_path.trim_end_matches('/'))
        }
    }

    /// devcell's `.git` file for a linked repository (`<slot>/dotgit`).
    pub fn link_file(&self) -> PathBuf {
        self.slot.join("dotgit")
    }

    /// Fetches back (within `budget`, the `[handoff]` settings) what the container left from
    /// an earlier session, then rewrites the
    /// container git directory from the host (and, for a linked repository, devcell's `.git`
    /// file). Returns the fetch-back.
    ///
    /// Errors: as [`ContainerGitDir::fetch_back`] and [`ContainerGitDir::refresh`].
    ///
    /// A container git directory with more changed refs than devcell brings back
    /// ([`ContainerGitError::TooManyRefs`]) is refused whole: nothing is imported, the host's
    /// refs stay as they are, and it is moved aside to `<slot>/refused` (replacing an earlier
    /// one) so that this handoff (and every later one) goes on; the result says so in
    /// [`FetchBack::refused`].
    pub fn prepare(&self, session: &str, budget: &FetchBudget) -> Result<FetchBack> {
        let dir = self.dir();
        let back = match dir.fetch_back_within(&self.host(), session, budget) {
            Err(ContainerGitError::TooManyRefs { path }) => {
                let aside = self.slot.join("refused");
                if std::fs::symlink_metadata(&aside).is_ok() {
                    // `remove_dir_all` follows no link
                    std::fs::remove_dir_all(&aside).map_err(io(&aside))?;
                }
                std::fs::rename(&path, &aside).map_err(io(&path))?;
                FetchBack {
                    refused: Some(format!(
                        "the container git directory changed more than {MAX_CHANGED_REFS} refs; none was brought back and your refs are untouched; it is kept at `{}`",
                        aside.display()
                    )),
                    ..FetchBack::default()
                }
            }
            other => other?,
        };
        dir.refresh(&self.host(), &self.objects_target())?;
        // what this session's container covers, which its fetch-back compares with
        dir.set_covered_submodules(&self.submodules)?;
        if self.linked {
            let link = self.link_file();
            let _ = std::fs::remove_file(&link);
            write_new(&link, format!("gitdir: {}\n", self.git_target()).as_bytes())?;
            // git's ownership check looks at the `.git` file's owner too
            crate::config::ownership::hand_over(&link, &self.common_dir).map_err(io(&link))?;
        }
        Ok(back)
    }
}

/// A folder of a working tree bound on itself in the container: a mount point, which cannot be
/// renamed or removed from inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderBind {
    /// The folder on the host.
    pub source: PathBuf,
    /// The same folder in the container.
    pub target: String,
    /// Read-only (a gitlink devcell gives no container git directory).
    pub read_only: bool,
}

/// The id of a working tree's container git directory: a hash of its host path.
pub(super) fn slot_id(work_tree: &Path) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(work_tree.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..8])
}
