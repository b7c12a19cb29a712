//! The container git directory (spec-note 0436): a git directory devcell makes on the host for
//! one repository of a handoff, which the container gets *instead of* the repository's own.
//!
//! A hostile agent controls everything the container can write. Any host git directory it can
//! write (or any folder holding one it can rename) lets it plant configuration (`core.fsmonitor`,
//! hooks, `commondir`) that the user's next `git status` on the host runs, and delete every
//! commit. So the container never sees the host's git directories: it gets a
//! [`ContainerGitDir`], which devcell writes ([`ContainerGitDir::refresh`]) with the host
//! repository's `HEAD`, every ref (`packed-refs`), a copy of its index, devcell's own `config`
//! (the repository format only, plus the data keys `git status` needs) and `objects/` empty but
//! for `objects/info/alternates`, which names where the host's `objects` folder is bind-mounted
//! read-only in the container. The agent may write it freely: the host never runs git with its
//! configuration.
//!
//! The agent's commits come back through [`ContainerGitDir::fetch_back`], which reads only data
//! from it (regular files of loose objects and packs, ref values it parses itself) into a fresh
//! bare repository devcell configures, and fetches from there into the host repository with
//! object checking on. Host branches only ever move forward from where the handoff left them;
//! anything else the agent did to a ref is kept aside under `refs/devcell/<session>/` and
//! reported.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::config::hostgit;

/// The most refs a fetch-back brings back (a container writing millions of refs gets an error,
/// not hours of work).
const MAX_CHANGED_REFS: usize = 10_000;
/// The most entries a walk of the container's `refs/` visits.
const MAX_REF_ENTRIES: usize = 200_000;
/// The largest `packed-refs` read (bytes).
const PACKED_REFS_MAX: u64 = 256 << 20;
/// The host namespace the agent's refs are fetched into.
pub const NAMESPACE: &str = "refs/devcell";

/// A failure making, refreshing or reading back a container git directory.
#[derive(Debug, thiserror::Error)]
pub enum ContainerGitError {
    /// A file could not be read or written.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The host repository could not be read safely.
    #[error(transparent)]
    Host(#[from] hostgit::PrivateGitDirError),
    /// A `git` command failed.
    #[error("`git {args}` failed in `{}`: {stderr}", dir.display())]
    Git {
        /// Where it ran.
        dir: PathBuf,
        /// Its arguments (for the message).
        args: String,
        /// git's standard error, trimmed.
        stderr: String,
    },
    /// The container changed more refs than devcell brings back.
    #[error("the container git directory `{}` changed more than {MAX_CHANGED_REFS} refs; none was brought back", path.display())]
    TooManyRefs {
        /// The container git directory.
        path: PathBuf,
    },
    /// The objects to stage for a fetch-back are larger than the budget: nothing was fetched.
    #[error(
        "the objects to bring back from `{}` are {size} bytes, more than the fetch-back budget of {budget} bytes",
        path.display()
    )]
    OverBudget {
        /// The untrusted git directory.
        path: PathBuf,
        /// Their size in bytes (at least this much, when they grew while being copied).
        size: u64,
        /// The budget in bytes.
        budget: u64,
    },
    /// A submodule devcell cannot cover: the handoff is refused before the container is made,
    /// since the agent could plant a git directory there that the host's `git status` enters
    /// (spec-note 0436, "Submodules").
    #[error("cannot hand off `{}`: {why}", path.display())]
    UncoverableSubmodule {
        /// The submodule's folder (or the superproject whose submodules are past a limit or
        /// whose index cannot be read).
        path: PathBuf,
        /// What is wrong.
        why: submodules::Uncoverable,
    },
}

impl crate::ops::error::ProductError for ContainerGitError {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        match self {
            ContainerGitError::UncoverableSubmodule { .. } => {
                crate::handoff::envelope::ErrorCode::InvalidArgument
            }
            _ => crate::handoff::envelope::ErrorCode::Internal,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ContainerGitError::UncoverableSubmodule { why, .. } => Some(why.hint().into()),
            ContainerGitError::Host(_) => Some(
                "devcell gives the container a copy of each repository's git directory and must read it first; fix the repository (or hand off a workspace without it)".into(),
            ),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, ContainerGitError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ContainerGitError + '_ {
    move |source| ContainerGitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The host repository a container git directory stands in for, as devcell judged it.
#[derive(Debug, Clone, Copy)]
pub struct HostRepo<'a> {
    /// The working tree.
    pub work_tree: &'a Path,
    /// Its git directory (a linked worktree's own, `<common>/worktrees/<name>`).
    pub git_dir: &'a Path,
    /// The common git directory (objects, refs, config).
    pub common_dir: &'a Path,
}

/// What the host held when the container git directory was last made or synchronised: the
/// base a fetch-back compares with. Kept beside the container git directory, never in it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Base {
    /// The host `HEAD` (`ref: refs/heads/<b>` or an object name), trimmed.
    pub head: String,
    /// The commit `HEAD` named, `None` in a repository without commits.
    pub head_commit: Option<String>,
    /// Every ref that is not symbolic, by name.
    pub refs: BTreeMap<String, String>,
    /// `sha1` or `sha256`.
    pub object_format: String,
}

/// Why a fetch-back left a host ref alone and kept the agent's value aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeptReason {
    /// The agent moved a branch to a commit that does not descend from where it was.
    Rewritten,
    /// The agent deleted the ref; the host keeps it.
    Deleted,
    /// The ref changed on the host during the handoff (or a new one exists there too).
    MovedOnHost,
    /// Not a branch (tags and other refs are never written on the host).
    NotABranch,
    /// Its object is missing or its name was refused.
    Invalid,
    /// Its commit adds a submodule (a gitlink) the branch did not have: the host's `git status`
    /// would enter the nested repository the agent made there and run what its configuration
    /// names (spec-note 0436).
    AddsSubmodule,
    /// Its commit has a submodule (a gitlink) at a path devcell did not cover in this session,
    /// and it is (or would become) the host's checked-out commit: the host's `HEAD`, index and
    /// checked-out branch do not follow it, since the host's `git status` would enter what the
    /// agent made there (spec-note 0436).
    UncoveredSubmodule,
    /// The branch is checked out in another worktree of the same repository: the host's `HEAD`
    /// does not follow the agent onto it and the branch does not move under that worktree
    /// (git itself refuses two worktrees on one branch and fetches into a checked-out one;
    /// spec-note 0436).
    CheckedOutElsewhere,
    /// The host could not write it: its name conflicts with a host ref (`refs/heads/main/x`
    /// while the host has `refs/heads/main`, or the other way round; spec-note 0400, attacks
    /// F4).
    Conflict,
}

/// A ref the agent changed that the host did not take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptRef {
    /// The ref's name in the container (e.g. `refs/heads/main`).
    pub name: String,
    /// The agent's value, `None` when it deleted the ref.
    pub value: Option<String>,
    /// Where the agent's value is on the host (`refs/devcell/<session>/…`), when it is.
    pub kept_as: Option<String>,
    /// Why.
    pub reason: KeptReason,
}

/// A host ref a fetch-back moved or created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefUpdate {
    /// The ref.
    pub name: String,
    /// Its value before, `None` for a new ref.
    pub old: Option<String>,
    /// Its value now.
    pub new: String,
}

/// What a fetch-back did on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchBack {
    /// Branches moved forward to the agent's commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fast_forwarded: Vec<RefUpdate>,
    /// Branches the agent created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<RefUpdate>,
    /// What the host did not take.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<KeptRef>,
    /// The branch the host `HEAD` now names, when it followed the agent's checkout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_moved_to: Option<String>,
    /// Whether the host index was reset to the new `HEAD` (the working tree is never touched).
    #[serde(default)]
    pub index_reset: bool,
    /// Why nothing was brought back when the container git directory was refused whole (more
    /// than [`MAX_CHANGED_REFS`] changed refs): it was set aside, not imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl FetchBack {
    /// Whether nothing changed on the host and nothing was kept aside.
    pub fn is_empty(&self) -> bool {
        self.fast_forwarded.is_empty()
            && self.created.is_empty()
            && self.kept.is_empty()
            && self.head_moved_to.is_none()
            && !self.index_reset
            && self.refused.is_none()
    }
}

/// One repository's container git directory: `<slot>/git` (what the container mounts) and,
/// beside it, `<slot>/base.json` ([`Base`]), which the container never sees.
#[derive(Debug, Clone)]
pub struct ContainerGitDir {
    slot: PathBuf,
}

impl ContainerGitDir {
    /// The container git directory kept in `slot` (a folder of devcell's state that lives as
    /// long as the workspace's container).
    pub fn new(slot: impl Into<PathBuf>) -> Self {
        Self { slot: slot.into() }
    }

    /// The git directory the container mounts.
    pub fn git_dir(&self) -> PathBuf {
        self.slot.join("git")
    }

    fn base_path(&self) -> PathBuf {
        self.slot.join("base.json")
    }

    fn covered_path(&self) -> PathBuf {
        self.slot.join("submodules.json")
    }

    /// Records the gitlink paths (relative to the working tree) whose folders the handoff's
    /// container covers (spec-note 0436, "Submodules"): a fetch-back never makes a commit with
    /// a gitlink elsewhere the host's checked-out one.
    ///
    /// Errors: the record cannot be written.
    pub fn set_covered_submodules(&self, paths: &[String]) -> Result<()> {
        let path = self.covered_path();
        let bytes = serde_json::to_vec(paths).map_err(|e| ContainerGitError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        std::fs::create_dir_all(&self.slot).map_err(io(&self.slot))?;
        std::fs::write(&path, bytes).map_err(io(&path))
    }

    /// The gitlink paths recorded by [`ContainerGitDir::set_covered_submodules`]; none when
    /// there is no readable record (fail closed: no gitlink counts as covered).
    fn covered_submodules(&self) -> std::collections::BTreeSet<String> {
        std::fs::read(self.covered_path())
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<String>>(&b).ok())
            .unwrap_or_default()
            .into_iter()
            .collect()
    }

    /// The base recorded by the last [`ContainerGitDir::refresh`] or fetch-back, `None` before
    /// the first.
    ///
    /// Errors: an unreadable or damaged record.
    pub fn base(&self) -> Result<Option<Base>> {
        let path = self.base_path();
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| ContainerGitError::Io {
                        path,
                        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ContainerGitError::Io { path, source }),
        }
    }

    fn write_base(&self, base: &Base) -> Result<()> {
        let path = self.base_path();
        let tmp = self.slot.join("base.json.tmp");
        let bytes = serde_json::to_vec_pretty(base).map_err(|e| ContainerGitError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))
    }

    /// Makes the container git directory, or rewrites it in place (the folder itself stays: a
    /// running container has it mounted), from the host repository `host`: `HEAD`, every ref,
    /// the index, devcell's `config`, and `objects/info/alternates` naming `objects_target`,
    /// the container path where the host's `objects` folder is mounted read-only. Everything
    /// the container wrote there before is gone: fetch back first. Records and returns the
    /// [`Base`]. The files belong to the host git directory's owner (spec-note 0250).
    ///
    /// Errors: the host repository cannot be read safely ([`ContainerGitError::Host`]), git
    /// fails, a file cannot be written.
    pub fn refresh(&self, host: &HostRepo<'_>, objects_target: &str) -> Result<Base> {
        let private = hostgit::PrivateGitDir::new(host.git_dir, host.common_dir, host.work_tree)?;
        let run = |args: &[&str]| -> Result<(bool, String)> {
            let mut git = private.command(&[]);
            git.args(args);
            let out = hostgit::output_within(&mut git, hostgit::QUICK_DEADLINE)
                .map_err(io(host.work_tree))?;
            Ok((
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            ))
        };
        let object_format = match run(&["rev-parse", "--show-object-format"])? {
            (true, f) if f.trim() == "sha256" => "sha256".to_string(),
            _ => "sha1".to_string(),
        };
        let head_commit = match run(&["rev-parse", "--verify", "-q", "HEAD^{commit}"])? {
            (true, c) if is_oid(c.trim()) => Some(c.trim().to_string()),
            _ => None,
        };
        let (ok, listed) = run(&[
            "for-each-ref",
            "--format=%(objectname) %(refname) %(symref)",
        ])?;
        if !ok {
            return Err(ContainerGitError::Git {
                dir: host.work_tree.to_path_buf(),
                args: "for-each-ref".into(),
                stderr: String::new(),
            });
        }
        let mut refs = BTreeMap::new();
        let mut symrefs = Vec::new();
        for line in listed.lines() {
            let mut parts = line.splitn(3, ' ');
            let (Some(oid), Some(name)) = (parts.next(), parts.next()) else {
                continue;
            };
            let target = parts.next().unwrap_or("");
            if !valid_ref_name(name) || name.starts_with(&format!("{NAMESPACE}/")) {
                continue;
            }
            if !target.is_empty() && valid_ref_name(target) {
                symrefs.push((name.to_string(), target.to_string()));
            } else if target.is_empty() && is_oid(oid) {
                refs.insert(name.to_string(), oid.to_string());
            }
        }
        let head_path = host.git_dir.join("HEAD");
        let head = hostgit::read_no_follow(&head_path, 4096).map_err(io(&head_path))?;
        let head = String::from_utf8_lossy(&head).trim().to_string();
        if !hostgit::valid_head(&head) {
            return Err(ContainerGitError::Io {
                path: head_path,
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "is neither `ref: refs/…` nor an object name",
                ),
            });
        }

        let dir = self.git_dir();
        self.clear_or_create(&dir)?;
        let mut config = private.format_config().to_string();
        for (key, value) in private.carried_config() {
            // written by git itself (quoting); the keys are data (`hostgit::carried`)
            let mut git = hostgit::command(&self.slot, &[]);
            // in devcell's own slot, never in the folder the container writes (it could swap
            // the file for a link to a host file devcell would then read into `config`)
            git.args(["config", "--file"])
                .arg(self.slot.join("config.carried"))
                .arg("--add")
                .arg(key)
                .arg(value);
            let _ = hostgit::output_within(&mut git, hostgit::QUICK_DEADLINE);
        }
        let carried_path = self.slot.join("config.carried");
        if let Ok(carried) = std::fs::read_to_string(&carried_path) {
            config.push_str(&carried);
        }
        let _ = std::fs::remove_file(&carried_path);
        write_new(&dir.join("config"), config.as_bytes())?;
        write_new(&dir.join("HEAD"), format!("{head}\n").as_bytes())?;
        let packed: String = refs.iter().map(|(n, o)| format!("{o} {n}\n")).collect();
        write_new(
            &dir.join("packed-refs"),
            format!("# pack-refs with: sorted \n{packed}").as_bytes(),
        )?;
        // Below `dir` the container may be swapping folders for links while devcell writes (a
        // reused container runs): every nested folder and file is made through file
        // descriptors that never follow a link (spec-note 0436).
        for sub in [
            "refs/heads",
            "refs/tags",
            "objects/info",
            "objects/pack",
            "info",
        ] {
            nofollow::create_dirs(&dir, Path::new(sub))?;
        }
        for (name, target) in &symrefs {
            nofollow::write_new(&dir, Path::new(name), format!("ref: {target}\n").as_bytes())?;
        }
        nofollow::write_new(
            &dir,
            Path::new("objects/info/alternates"),
            format!("{objects_target}\n").as_bytes(),
        )?;
        // the index (and a split index's shared part), so `git status` there matches the host's
        for entry in std::fs::read_dir(host.git_dir).map_err(io(host.git_dir))? {
            let entry = entry.map_err(io(host.git_dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "index" || name == "shallow" || name.starts_with("sharedindex.") {
                copy_regular(&entry.path(), &dir.join(&*name), 0o644)?;
            }
        }
        if host.git_dir != host.common_dir {
            let shallow = host.common_dir.join("shallow");
            if shallow.exists() && !dir.join("shallow").exists() {
                copy_regular(&shallow, &dir.join("shallow"), 0o644)?;
            }
        }
        nofollow::give_to_owner(&dir, host.common_dir, true)?;
        let base = Base {
            head,
            head_commit,
            refs,
            object_format,
        };
        self.write_base(&base)?;
        Ok(base)
    }

    /// Empties `dir` (not following links: what the container left there is removed, never
    /// what it points at), or creates it.
    fn clear_or_create(&self, dir: &Path) -> Result<()> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        match dir.symlink_metadata() {
            Ok(m) if m.is_dir() => {
                for entry in std::fs::read_dir(dir).map_err(io(dir))? {
                    let entry = entry.map_err(io(dir))?;
                    let path = entry.path();
                    let is_dir = entry.file_type().map_err(io(&path))?.is_dir();
                    if is_dir {
                        std::fs::remove_dir_all(&path).map_err(io(&path))?;
                    } else {
                        std::fs::remove_file(&path).map_err(io(&path))?;
                    }
                }
            }
            Ok(_) => {
                std::fs::remove_file(dir).map_err(io(dir))?;
                std::fs::create_dir(dir).map_err(io(dir))?;
            }
            Err(_) => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.slot)
                    .map_err(io(&self.slot))?;
                std::fs::create_dir(dir).map_err(io(dir))?;
            }
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))
    }

    /// Brings the agent's commits back into the host repository `host` (see the module docs):
    /// never runs git with the container git directory's configuration; reads its loose
    /// objects, packs and ref values as data into a fresh bare repository devcell configures,
    /// and fetches from there with `transfer.fsckObjects` into `refs/devcell/<session>/…`.
    /// Then a new branch is created, a branch the host left where the handoff found it and the
    /// agent moved forward is fast-forwarded, and anything else is kept aside (the host ref
    /// untouched). The host `HEAD` follows the agent's checkout of another existing branch when
    /// the user did not move it; the host index is reset to a `HEAD` whose commit devcell
    /// changed (mixed: the working tree is never touched). Nothing happens before a
    /// [`ContainerGitDir::refresh`]. The base is updated, so a second call brings back only
    /// what changed since.
    ///
    /// Errors: files that cannot be read or written, git failures, too many changed refs. A
    /// failure leaves the host's branches as they were (only `refs/devcell/…` may have been
    /// written).
    pub fn fetch_back(&self, host: &HostRepo<'_>, session: &str) -> Result<FetchBack> {
        let Some(mut base) = self.base()? else {
            return Ok(FetchBack::default());
        };
        let dir = self.git_dir();
        let hex_len = if base.object_format == "sha256" {
            64
        } else {
            40
        };
        let theirs = read_refs(&dir, hex_len)?;
        let their_head = hostgit::read_no_follow(&dir.join("HEAD"), 4096)
            .ok()
            .map(|h| String::from_utf8_lossy(&h).trim().to_string())
            .filter(|h| hostgit::valid_head(h));
        let changed: Vec<(String, String)> = theirs
            .iter()
            .filter(|(n, v)| base.refs.get(*n) != Some(*v))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        if changed.len() > MAX_CHANGED_REFS {
            return Err(ContainerGitError::TooManyRefs { path: dir });
        }
        let deleted: Vec<String> = base
            .refs
            .keys()
            .filter(|n| !theirs.contains_key(*n))
            .cloned()
            .collect();
        let mut report = FetchBack::default();
        let namespace = format!("{NAMESPACE}/{session}");
        let imported = if changed.is_empty() {
            Vec::new()
        } else {
            self.import(host, &base, &changed, &namespace, &mut report)?
        };
        let mut host_refs = host_refs(host)?;
        let covered = self.covered_submodules();
        // the branches the host has checked out (when the handoff began, and now): a commit
        // with a gitlink devcell did not cover never becomes theirs
        let host_head = read_head(host)?;
        let checked_out: Vec<&str> = [base.head.as_str(), host_head.as_str()]
            .iter()
            .filter_map(|h| h.strip_prefix("ref: "))
            .collect();
        let elsewhere = checked_out_elsewhere(host);
        for (name, value) in &imported {
            let kept_as = format!("{namespace}/{}", name.trim_start_matches("refs/"));
            let was = base.refs.get(name);
            let now = host_refs.get(name);
            let keep = |reason| KeptRef {
                name: name.clone(),
                value: Some(value.clone()),
                kept_as: Some(kept_as.clone()),
                reason,
            };
            let outcome = if !name.starts_with("refs/heads/") {
                Err(keep(KeptReason::NotABranch))
            } else if was != now {
                Err(keep(KeptReason::MovedOnHost))
            } else if elsewhere.contains(name) {
                Err(keep(KeptReason::CheckedOutElsewhere))
            } else if adds_gitlink(host, was.or(base.head_commit.as_ref()), value)? {
                Err(keep(KeptReason::AddsSubmodule))
            } else if checked_out.contains(&name.as_str())
                && !uncovered_gitlinks(host, value, &covered)?.is_empty()
            {
                Err(keep(KeptReason::UncoveredSubmodule))
            } else if let Some(old) = was {
                if is_ancestor(host, old, value)? {
                    Ok(RefUpdate {
                        name: name.clone(),
                        old: Some(old.clone()),
                        new: value.clone(),
                    })
                } else {
                    Err(keep(KeptReason::Rewritten))
                }
            } else {
                Ok(RefUpdate {
                    name: name.clone(),
                    old: None,
                    new: value.clone(),
                })
            };
            match outcome {
                Ok(update) => {
                    let zero = "0".repeat(hex_len);
                    let old = update.old.clone().unwrap_or(zero);
                    // a name git refuses next to the host's refs (`main/x` beside `main`) is
                    // kept aside: one ref never stops this or any later fetch-back (F4)
                    if host_git(
                        host,
                        host.common_dir,
                        &["update-ref", "-m", "devcell: agent", name, value, &old],
                    )
                    .is_err()
                    {
                        report.kept.push(keep(KeptReason::Conflict));
                        base.refs.insert(name.clone(), value.clone());
                        continue;
                    }
                    let _ = host_git(host, host.common_dir, &["update-ref", "-d", &kept_as]);
                    host_refs.insert(name.clone(), value.clone());
                    if update.old.is_some() {
                        report.fast_forwarded.push(update);
                    } else {
                        report.created.push(update);
                    }
                }
                Err(kept) => report.kept.push(kept),
            }
            base.refs.insert(name.clone(), value.clone());
        }
        for name in deleted {
            report.kept.push(KeptRef {
                name: name.clone(),
                value: None,
                kept_as: None,
                reason: KeptReason::Deleted,
            });
            base.refs.remove(&name);
        }
        self.follow_head(
            host,
            &mut base,
            (their_head.as_deref(), &covered),
            &host_refs,
            &mut report,
        )?;
        self.write_base(&base)?;
        Ok(report)
    }

    /// Copies the container's objects into a fresh bare repository devcell configures, points
    /// the changed refs at them there (git refuses a missing object), and fetches those into
    /// `namespace` in the host repository with object checking. Returns the refs fetched;
    /// refused ones are reported as [`KeptReason::Invalid`].
    fn import(
        &self,
        host: &HostRepo<'_>,
        base: &Base,
        changed: &[(String, String)],
        namespace: &str,
        report: &mut FetchBack,
    ) -> Result<Vec<(String, String)>> {
        let (imported, refused) = import_refs(
            &self.git_dir(),
            host,
            &base.object_format,
            changed,
            &format!("+refs/*:{namespace}/*"),
            STAGING_MAX,
        )?;
        report
            .kept
            .extend(refused.into_iter().map(|(name, value)| KeptRef {
                name,
                value: Some(value),
                kept_as: None,
                reason: KeptReason::Invalid,
            }));
        Ok(imported)
    }

    /// Moves the host `HEAD` to the branch the container checked out (when it exists on the
    /// host now and the user left `HEAD` where the handoff found it), then resets the host
    /// index to `HEAD` when devcell changed its commit. Neither happens when the new commit
    /// has a gitlink at a path not in `covered` (the submodule folders the session covered):
    /// that is kept aside as [`KeptReason::UncoveredSubmodule`] (spec-note 0436).
    fn follow_head(
        &self,
        host: &HostRepo<'_>,
        base: &mut Base,
        (their_head, covered): (Option<&str>, &std::collections::BTreeSet<String>),
        host_refs: &BTreeMap<String, String>,
        report: &mut FetchBack,
    ) -> Result<()> {
        let host_head = read_head(host)?;
        if host_head != base.head {
            // the user moved HEAD during the handoff: theirs to keep
            return Ok(());
        }
        let uncovered = |commit: &str| -> Result<bool> {
            Ok(!uncovered_gitlinks(host, commit, covered)?.is_empty())
        };
        if let Some(branch) = their_head
            .and_then(|h| h.strip_prefix("ref: "))
            .filter(|b| b.starts_with("refs/heads/") && host_refs.contains_key(*b))
            && their_head != Some(base.head.as_str())
        {
            if checked_out_elsewhere(host).contains(branch) {
                report.kept.push(KeptRef {
                    name: "HEAD".into(),
                    value: their_head.map(str::to_string),
                    kept_as: None,
                    reason: KeptReason::CheckedOutElsewhere,
                });
                return Ok(());
            }
            if uncovered(&host_refs[branch])? {
                report.kept.push(KeptRef {
                    name: "HEAD".into(),
                    value: their_head.map(str::to_string),
                    kept_as: None,
                    reason: KeptReason::UncoveredSubmodule,
                });
                return Ok(());
            }
            host_git(host, host.git_dir, &["symbolic-ref", "HEAD", branch])?;
            report.head_moved_to = Some(branch.to_string());
            base.head = format!("ref: {branch}");
        }
        let commit = base
            .head
            .strip_prefix("ref: ")
            .map_or_else(|| Some(base.head.clone()), |b| host_refs.get(b).cloned());
        let devcell_moved = report.head_moved_to.is_some()
            || base.head.strip_prefix("ref: ").is_some_and(|b| {
                report
                    .fast_forwarded
                    .iter()
                    .chain(&report.created)
                    .any(|u| u.name == b)
            });
        if devcell_moved
            && let Some(new) = commit.as_deref()
            && commit != base.head_commit
            && !uncovered(new)?
        {
            // `--no-refresh`: no file of the working tree (the agent's) is re-read, so no
            // filter a `.gitattributes` there names runs
            let mut reset = hostgit::command(host.work_tree, &[]);
            reset
                .env("GIT_DIR", host.git_dir)
                .env("GIT_WORK_TREE", host.work_tree)
                .args(["reset", "--quiet", "--mixed", "--no-refresh"]);
            run_git(reset, host.work_tree, "reset --mixed")?;
            report.index_reset = true;
        }
        base.head_commit = commit;
        Ok(())
    }
}

/// Refs as `(name, object)` pairs.
pub(crate) type RefList = Vec<(String, String)>;

/// A fresh bare repository devcell makes in a temporary folder (removed with the returned
/// guard), borrowing the host's objects, holding a copy *as data* of the loose objects and
/// packs of the untrusted git directory `source` ([`copy_objects`], no link followed): git may
/// run there without reading anything `source` configures. Returns the guard and the
/// repository's path.
///
/// Errors: files that cannot be read or written, a failing host `git init`.
pub(crate) fn stage_objects(
    source: &Path,
    host: &HostRepo<'_>,
    object_format: &str,
    budget: u64,
) -> Result<(tempfile::TempDir, PathBuf)> {
    use std::os::unix::fs::PermissionsExt as _;
    // outside devcell's state folder, which the repository's owner (who runs the fetch
    // when devcell is root) may not be able to reach
    let staging = tempfile::Builder::new()
        .prefix("devcell-fetch-back-")
        .tempdir()
        .map_err(io(&std::env::temp_dir()))?;
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(io(staging.path()))?;
    let k = staging.path().join("k.git");
    let format = format!("--object-format={object_format}");
    let mut init = hostgit::command(staging.path(), &[]);
    init.args(["init", "--bare", "--quiet", "--template=", &format])
        .arg(&k);
    run_git(init, staging.path(), "init --bare")?;
    let alternates = k.join("objects/info/alternates");
    std::fs::create_dir_all(k.join("objects/info")).map_err(io(&k))?;
    std::fs::write(
        &alternates,
        format!("{}\n", host.common_dir.join("objects").display()),
    )
    .map_err(io(&alternates))?;
    copy_objects(source, &k.join("objects"), budget)?;
    Ok((staging, k))
}

/// Brings the refs `refs` (name → object) of the untrusted git directory `source` into the host
/// repository `host` without running git on `source`: its loose objects and packs are copied
/// as data ([`copy_objects`], no link followed) into a fresh bare repository devcell makes
/// (borrowing the host's objects), the refs are set there (git refuses a missing object), and
/// the host fetches `refspec` from it with `transfer.fsckObjects`. Shared by the container git
/// directory's fetch-back and the clone task's fetch (spec-notes 0436, 0437). Returns the refs
/// imported and the ones refused (their object missing or invalid).
///
/// Errors: files that cannot be read or written, a failing host `git fetch`.
pub(crate) fn import_refs(
    source: &Path,
    host: &HostRepo<'_>,
    object_format: &str,
    refs: &[(String, String)],
    refspec: &str,
    budget: u64,
) -> Result<(RefList, RefList)> {
    let (_staging, k) = stage_objects(source, host, object_format, budget)?;
    let mut imported = Vec::new();
    let mut refused = Vec::new();
    for (name, value) in refs {
        let mut update = hostgit::command(&k, &[]);
        update.env("GIT_DIR", &k).args(["update-ref", name, value]);
        let ok = hostgit::output_within(&mut update, hostgit::QUICK_DEADLINE)
            .is_ok_and(|o| o.status.success());
        if ok {
            imported.push((name.clone(), value.clone()));
        } else {
            refused.push((name.clone(), value.clone()));
        }
    }
    if imported.is_empty() {
        return Ok((imported, refused));
    }
    give_to_owner(&k, host.common_dir, false)?;
    let k_text = k.to_string_lossy().into_owned();
    let extra: Vec<(String, String)> = [
        ("protocol.file.allow", "always"),
        ("transfer.fsckObjects", "true"),
        ("fetch.fsckObjects", "true"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("fetch.writeCommitGraph", "false"),
        ("safe.directory", k_text.as_str()),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
    .collect();
    let mut fetch = hostgit::command(host.work_tree, &extra);
    fetch
        .env("GIT_DIR", host.common_dir)
        .args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--no-auto-gc",
        ])
        .arg(&k)
        .arg(refspec);
    run_git(fetch, host.work_tree, "fetch <container objects>")?;
    Ok((imported, refused))
}

/// The most bytes of objects a worktree handoff's fetch-back stages (its container git
/// directory borrows the host's objects, so it holds only what the agent made).
pub const STAGING_MAX: u64 = crate::settings::FETCH_BACK_MAX_DEFAULT;

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
    pub folders: Vec<submodules::FolderBind>,
    /// The gitlink paths (relative to its working tree) whose folders the handoff covers:
    /// every gitlink of its index (spec-note 0436, "Submodules").
    pub submodules: Vec<String>,
    /// Whether it is a submodule of another repository of the handoff.
    pub nested: bool,
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

    /// Fetches back what the container left from an earlier session, then rewrites the
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
    pub fn prepare(&self, session: &str) -> Result<FetchBack> {
        let dir = self.dir();
        let back = match dir.fetch_back(&self.host(), session) {
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

/// The container git directories of a handoff of `ws`, kept under `slots_root` (one folder per
/// repository, named by a hash of its working tree's path): every repository devcell reads
/// (one whose git directory is untrusted and not granted is left out, as it is not mounted;
/// spec-note 0411), and every checked-out submodule of those ([`submodules::expand`]).
///
/// Errors: a submodule devcell cannot cover ([`ContainerGitError::UncoverableSubmodule`]).
pub fn repo_gits(
    ws: &crate::handoff::repository::Workspace,
    slots_root: &Path,
) -> Result<Vec<RepoGit>> {
    let mut gits: Vec<RepoGit> = ws
        .repos
        .iter()
        .filter(|r| {
            !ws.untrusted_git_dirs
                .iter()
                .any(|u| u.repo == r.name && !u.granted)
        })
        .map(|r| {
            let id = slot_id(&r.host_path);
            let linked = !r
                .host_path
                .join(".git")
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir());
            RepoGit {
                repo: r.name.clone(),
                work_tree: r.host_path.clone(),
                git_dir: r.git_dir.clone(),
                common_dir: r.common_dir.clone(),
                container_path: r.container_path.clone(),
                slot: slots_root.join(&id),
                mount_base: format!("{CONTAINER_BASE}/{id}"),
                linked,
                folders: Vec::new(),
                submodules: Vec::new(),
                nested: false,
            }
        })
        .collect();
    submodules::expand(&mut gits, slots_root)?;
    Ok(gits)
}

/// The id of a working tree's container git directory: a hash of its host path.
fn slot_id(work_tree: &Path) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(work_tree.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..8])
}

/// The mounts of a handoff whose repositories get container git directories (spec-note
/// 0436): the workspace root read-write; in a multi-repository workspace each repository's
/// working tree on its own, read-write; each container git directory read-write over the
/// repository's `.git` (or, for a linked repository, devcell's `.git` file read-only there and
/// the directory at [`RepoGit::git_target`]); each host `objects` folder read-only. No host git
/// directory is mounted otherwise.
pub fn mounts(
    ws: &crate::handoff::repository::Workspace,
    gits: &[RepoGit],
) -> Vec<crate::handoff::repository::WorkspaceMount> {
    use crate::handoff::repository::{Layout, MountPurpose, WorkspaceMount};
    let mut out = vec![WorkspaceMount {
        source: ws.root.clone(),
        target: ws.container_root.clone(),
        read_only: false,
        purpose: MountPurpose::Workspace,
    }];
    if ws.layout == Layout::MultiRepository {
        out.extend(ws.repos.iter().map(|r| WorkspaceMount {
            source: r.host_path.clone(),
            target: r.container_path.clone(),
            read_only: false,
            purpose: MountPurpose::Repository,
        }));
    }
    for g in gits {
        // a submodule's folder and the folders above it, before what is mounted inside them
        out.extend(g.folders.iter().map(|f| WorkspaceMount {
            source: f.source.clone(),
            target: f.target.clone(),
            read_only: f.read_only,
            purpose: MountPurpose::Repository,
        }));
        if g.linked {
            out.push(WorkspaceMount {
                source: g.link_file(),
                target: format!("{}/.git", g.container_path.trim_end_matches('/')),
                read_only: true,
                purpose: MountPurpose::GitLink,
            });
        }
        out.push(WorkspaceMount {
            source: g.dir().git_dir(),
            target: g.git_target(),
            read_only: false,
            purpose: MountPurpose::ContainerGit,
        });
        out.push(WorkspaceMount {
            source: g.common_dir.join("objects"),
            target: g.objects_target(),
            read_only: true,
            purpose: MountPurpose::GitObjects,
        });
    }
    out
}

/// The host paths the handoff's mounts hide, with the container target of what hides them
/// ([`crate::ops::options::UpOptions::covers`]): each repository's `.git` (covered by its
/// container git directory or devcell's `.git` file) and its host git directories (covered,
/// wherever another bind would show them, by its container git directory), a path inside
/// another of these left out; and every folder the handoff binds on itself (the workspace
/// `root` at `container_root`, each repository's working tree, each submodule folder and
/// folder above one), which another bind holding it must repeat (spec-note 0436).
pub fn covers(root: (&Path, &str), gits: &[RepoGit]) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for g in gits {
        let dot_git = g.work_tree.join(".git");
        out.push((
            dot_git,
            format!("{}/.git", g.container_path.trim_end_matches('/')),
        ));
        for dir in [&g.common_dir, &g.git_dir] {
            out.push((dir.clone(), g.git_target()));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    let all = out.clone();
    out.retain(|(p, _)| !all.iter().any(|(q, _)| q != p && p.starts_with(q)));
    let mut folders = vec![(root.0.to_path_buf(), root.1.to_string())];
    for g in gits {
        if !g.nested {
            folders.push((g.work_tree.clone(), g.container_path.clone()));
        }
        folders.extend(
            g.folders
                .iter()
                .map(|f| (f.source.clone(), f.target.clone())),
        );
    }
    for f in folders {
        if !out.iter().any(|(p, _)| *p == f.0) {
            out.push(f);
        }
    }
    out
}

/// The paths of the gitlinks (submodule entries, mode 160000) in `commit`'s tree.
fn gitlinks(host: &HostRepo<'_>, commit: &str) -> Result<std::collections::BTreeSet<String>> {
    let listed = host_git(host, host.common_dir, &["ls-tree", "-r", "-z", commit])?;
    Ok(listed
        .split('\0')
        .filter(|entry| entry.starts_with("160000 "))
        .filter_map(|entry| entry.split_once('\t').map(|(_, path)| path.to_string()))
        .collect())
}

/// Whether `new` has a gitlink at a path where `old` (none: the host's `HEAD` had no commit)
/// has none. Existing submodules moving to other commits are not counted.
fn adds_gitlink(host: &HostRepo<'_>, old: Option<&String>, new: &str) -> Result<bool> {
    let before = match old {
        Some(old) => gitlinks(host, old)?,
        None => Default::default(),
    };
    Ok(gitlinks(host, new)?.iter().any(|p| !before.contains(p)))
}

/// The gitlink paths of `commit` that are not in `covered` (a commit that cannot be read
/// is an error).
fn uncovered_gitlinks(
    host: &HostRepo<'_>,
    commit: &str,
    covered: &std::collections::BTreeSet<String>,
) -> Result<Vec<String>> {
    Ok(gitlinks(host, commit)?
        .into_iter()
        .filter(|p| !covered.contains(p))
        .collect())
}

/// The host `HEAD` (`git_dir/HEAD`, read without following a link), trimmed.
fn read_head(host: &HostRepo<'_>) -> Result<String> {
    let head_path = host.git_dir.join("HEAD");
    hostgit::read_no_follow(&head_path, 4096)
        .map(|h| String::from_utf8_lossy(&h).trim().to_string())
        .map_err(io(&head_path))
}

/// The most linked worktrees [`checked_out_elsewhere`] reads.
const MAX_WORKTREES: usize = 4096;

/// The branches checked out in the other worktrees of `host`'s repository: the `HEAD` of its
/// common git directory (the main worktree, unless that is `host` itself) and of each
/// `<common>/worktrees/<name>/` but `host`'s own, read as data (no link followed, no git run).
/// A `HEAD` that cannot be read names nothing; a folder past [`MAX_WORKTREES`] is not read.
fn checked_out_elsewhere(host: &HostRepo<'_>) -> std::collections::BTreeSet<String> {
    let same = |dir: &Path| {
        dir == host.git_dir
            || std::fs::canonicalize(dir).ok().as_deref()
                == std::fs::canonicalize(host.git_dir).ok().as_deref()
    };
    let mut dirs = Vec::new();
    if !is_bare(host) {
        dirs.push(host.common_dir.to_path_buf());
    }
    if let Ok(entries) = std::fs::read_dir(host.common_dir.join("worktrees")) {
        dirs.extend(
            entries
                .take(MAX_WORKTREES)
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    dirs.into_iter()
        .filter(|d| !same(d))
        .filter_map(|d| hostgit::read_no_follow(&d.join("HEAD"), 4096).ok())
        .map(|h| String::from_utf8_lossy(&h).trim().to_string())
        .filter_map(|h| h.strip_prefix("ref: ").map(str::to_string))
        .collect()
}

/// Whether the common git directory's own `config` says `core.bare = true` (read with
/// `--file`: no include followed, nothing run; a bare repository's `HEAD` is checked out
/// nowhere). Unreadable is not bare, so its `HEAD` counts as checked out.
fn is_bare(host: &HostRepo<'_>) -> bool {
    let mut git = hostgit::command(host.work_tree, &[]);
    git.arg("config")
        .arg("--file")
        .arg(host.common_dir.join("config"))
        .args(["--type", "bool", "--get", "core.bare"]);
    hostgit::output_within(&mut git, hostgit::quick_deadline())
        .is_ok_and(|o| o.status.success() && o.stdout.trim_ascii() == b"true")
}

/// `git <args>` in the host repository, `GIT_DIR` = `git_dir`; standard output.
fn host_git(host: &HostRepo<'_>, git_dir: &Path, args: &[&str]) -> Result<String> {
    let mut git = hostgit::command(host.work_tree, &[]);
    git.env("GIT_DIR", git_dir).args(args);
    run_git(git, host.work_tree, &args.join(" "))
}

pub(crate) fn run_git(mut git: Command, dir: &Path, what: &str) -> Result<String> {
    let out =
        hostgit::output_within(&mut git, std::time::Duration::from_secs(600)).map_err(io(dir))?;
    if !out.status.success() {
        return Err(ContainerGitError::Git {
            dir: dir.to_path_buf(),
            args: what.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The host repository's refs that are not symbolic (outside devcell's namespace).
fn host_refs(host: &HostRepo<'_>) -> Result<BTreeMap<String, String>> {
    let listed = host_git(
        host,
        host.common_dir,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname) %(symref)",
        ],
    )?;
    Ok(listed
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let oid = parts.next()?;
            let name = parts.next()?;
            (parts.next().unwrap_or("").is_empty() && is_oid(oid))
                .then(|| (name.to_string(), oid.to_string()))
        })
        .collect())
}

fn is_ancestor(host: &HostRepo<'_>, old: &str, new: &str) -> Result<bool> {
    let mut git = hostgit::command(host.work_tree, &[]);
    git.env("GIT_DIR", host.common_dir)
        .args(["merge-base", "--is-ancestor", old, new]);
    let out = hostgit::output_within(&mut git, std::time::Duration::from_secs(120))
        .map_err(io(host.work_tree))?;
    Ok(out.status.success())
}

/// The refs of the container git directory `dir`, read as data: `packed-refs` lines, then loose
/// files under `refs/` (regular files only, no link followed), names that git would accept
/// ([`valid_ref_name`]), values of `hex_len` hexadecimal digits; symbolic refs are skipped.
pub(crate) fn read_refs(dir: &Path, hex_len: usize) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let valid = |name: &str, oid: &str| valid_ref_name(name) && oid.len() == hex_len && is_oid(oid);
    match hostgit::read_no_follow(&dir.join("packed-refs"), PACKED_REFS_MAX) {
        Ok(bytes) => {
            for line in String::from_utf8_lossy(&bytes).lines() {
                if line.starts_with('#') || line.starts_with('^') {
                    continue;
                }
                if let Some((oid, name)) = line.split_once(' ')
                    && valid(name, oid)
                {
                    out.insert(name.to_string(), oid.to_ascii_lowercase());
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => {}
    }
    let mut budget = MAX_REF_ENTRIES;
    // every step opened without following a link: a `refs` the container swapped for a link
    // to another repository's refs is not read (attacker's review of issue 25)
    let mut stack = vec![(PathBuf::from("refs"), "refs".to_string(), 0usize)];
    while let Some((folder, name, depth)) = stack.pop() {
        for (file, kind) in nofollow::list(dir, &folder) {
            if budget == 0 {
                return Ok(out);
            }
            budget -= 1;
            let child = format!("{name}/{file}");
            match kind {
                Some(true) if depth < 32 => stack.push((folder.join(&file), child, depth + 1)),
                Some(false) => {
                    let mut bytes = Vec::new();
                    let Ok(f) = nofollow::open_file(dir, &folder.join(&file)) else {
                        continue;
                    };
                    if std::io::Read::read_to_end(&mut std::io::Read::take(f, 4096), &mut bytes)
                        .is_err()
                    {
                        continue;
                    }
                    let text = String::from_utf8_lossy(&bytes);
                    let oid = text.trim();
                    if valid(&child, oid) {
                        out.insert(child, oid.to_ascii_lowercase());
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Whether `name` is a full ref name git accepts (`git check-ref-format` rules): under `refs/`,
/// no empty component, none starting with `.` or ending with `.lock`, no `..`, `@{`, control
/// characters, space, `~ ^ : ? * [ \`, not ending with `.` or `/`. Pure.
pub fn valid_ref_name(name: &str) -> bool {
    name.starts_with("refs/")
        && name.len() < 1024
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("@{")
        && !name
            .bytes()
            .any(|b| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b))
        && name
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"))
}

pub(crate) fn is_oid(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Copies, from the container's `objects` folder `from` into `to`, only regular files named as
/// git names loose objects (`xx/<38 or 62 hex>`) or packs (`pack/pack-<hex>.{pack,idx,rev}`);
/// no link is followed. At most `budget` bytes: their sizes are added up first, and the copy
/// stops when they grew past it meanwhile ([`ContainerGitError::OverBudget`]; a sparse file
/// counts at its full length, which is what a copy writes). Returns how many files were copied.
fn copy_objects(dir: &Path, to: &Path, budget: u64) -> Result<usize> {
    let over = |size: u64| ContainerGitError::OverBudget {
        path: dir.to_path_buf(),
        size,
        budget,
    };
    let listed = objects_size(dir);
    if listed > budget {
        return Err(over(listed));
    }
    let mut used = 0u64;
    let mut copied = 0;
    for rel in object_files(dir) {
        let (Some(name), Some(file_name)) =
            (rel.parent().and_then(Path::file_name), rel.file_name())
        else {
            continue;
        };
        let target_dir = to.join(name);
        std::fs::create_dir_all(&target_dir).map_err(io(&target_dir))?;
        let target = target_dir.join(file_name);
        if target.exists() {
            continue;
        }
        // a file the container swapped for something else since the listing is skipped
        let Ok(source) = nofollow::open_file(dir, &rel) else {
            continue;
        };
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut target_file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&target)
            .map_err(io(&target))?;
        let left = budget - used;
        match std::io::copy(&mut source.take(left.saturating_add(1)), &mut target_file) {
            Ok(n) if n > left => {
                let _ = std::fs::remove_file(&target);
                return Err(over(used.saturating_add(n)));
            }
            Ok(n) => {
                used += n;
                copied += 1;
            }
            Err(_) => {
                let _ = std::fs::remove_file(&target);
            }
        }
    }
    Ok(copied)
}

/// The bytes of the objects [`copy_objects`] would copy from the untrusted git directory
/// `dir` (each file's length: a sparse file counts whole).
pub(crate) fn objects_size(dir: &Path) -> u64 {
    object_files(dir)
        .iter()
        .filter_map(|rel| nofollow::open_file(dir, rel).ok()?.metadata().ok())
        .map(|m| m.len())
        .fold(0, u64::saturating_add)
}

/// The files of the container's `objects` folder [`copy_objects`] copies, relative to `dir`
/// (`objects/<fan-out or pack>/<file>`), each a regular file when listed.
fn object_files(dir: &Path) -> Vec<PathBuf> {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut files = Vec::new();
    // every step opened without following a link: an `objects` the container swapped for a
    // link to another repository's objects is not read (attacker's review of issue 25)
    let objects = Path::new("objects");
    for (name, kind) in nofollow::list(dir, objects) {
        if kind != Some(true) {
            continue;
        }
        let fan_out = name.len() == 2 && hex(&name);
        if !fan_out && name != "pack" {
            continue;
        }
        for (file_name, kind) in nofollow::list(dir, &objects.join(&name)) {
            let wanted = if fan_out {
                matches!(file_name.len(), 38 | 62) && hex(&file_name)
            } else {
                file_name
                    .strip_prefix("pack-")
                    .and_then(|rest| rest.rsplit_once('.'))
                    .is_some_and(|(id, ext)| {
                        matches!(id.len(), 40 | 64)
                            && hex(id)
                            && matches!(ext, "pack" | "idx" | "rev")
                    })
            };
            if wanted && kind == Some(false) {
                files.push(objects.join(&name).join(&file_name));
            }
        }
    }
    files
}

/// Copies the regular file `from` (opened without following a link, never waiting on a FIFO)
/// to the new file `to`.
fn copy_regular(from: &Path, to: &Path, mode: u32) -> Result<()> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut source = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
        .open(from)
        .map_err(io(from))?;
    if !source.metadata().map_err(io(from))?.is_file() {
        return Err(ContainerGitError::Io {
            path: from.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        });
    }
    let mut target = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(to)
        .map_err(io(to))?;
    std::io::copy(&mut source, &mut target).map_err(io(to))?;
    target.flush().map_err(io(to))
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))
}

/// Gives everything under `dir` (which devcell just wrote) to the owner of `owner_of` when
/// devcell is root and that owner is not: the container user maps to that uid (spec-note 0250).
/// When `owner_of` is writable by everyone (a root-owned workspace shared that way), so is
/// `dir`: the container user may write where it could write the host's.
fn give_to_owner(dir: &Path, owner_of: &Path, may_share: bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let shared =
        may_share && std::fs::metadata(owner_of).is_ok_and(|m| m.permissions().mode() & 0o002 != 0);
    let share = |path: &Path, is_dir: bool| -> Result<()> {
        if shared {
            let mode = if is_dir { 0o777 } else { 0o666 };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(io(path))?;
        }
        Ok(())
    };
    crate::config::ownership::hand_over(dir, owner_of).map_err(io(dir))?;
    share(dir, true)?;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).map_err(io(&folder))?.flatten() {
            let path = entry.path();
            crate::config::ownership::hand_over(&path, owner_of).map_err(io(&path))?;
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            share(&path, is_dir)?;
            if is_dir {
                stack.push(path);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

pub mod submodules;

/// Writing inside the container git directory, which a running container may change while
/// devcell writes: every step goes through a file descriptor opened without following a link
/// (`openat` with `O_NOFOLLOW`), so a folder the container swaps for a link to a host path
/// makes the step fail instead of reaching that path (spec-note 0436). The top folder itself
/// is devcell's own and a mount point in the container (it cannot be replaced from there).
mod nofollow {
    use super::{ContainerGitError, Result, io};
    use rustix::fs::{AtFlags, Mode, OFlags};
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStrExt as _;
    use std::path::{Component, Path};

    fn open_dir(parent: Option<&OwnedFd>, name: &Path) -> std::io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(match parent {
            Some(fd) => rustix::fs::openat(fd, name, flags, Mode::empty())?,
            None => rustix::fs::open(name, flags, Mode::empty())?,
        })
    }

    fn invalid(path: std::path::PathBuf, why: &str) -> ContainerGitError {
        ContainerGitError::Io {
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string()),
        }
    }

    /// The folder `root/rel`, each missing folder made (mode 0755), none followed as a link.
    fn dirs(root: &Path, rel: &Path) -> Result<OwnedFd> {
        let whole = root.join(rel);
        let mut fd = open_dir(None, root).map_err(io(root))?;
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return Err(invalid(whole, "not a plain relative path"));
            };
            match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io(&whole)(e.into())),
            }
            fd = open_dir(Some(&fd), Path::new(name)).map_err(io(&whole))?;
        }
        Ok(fd)
    }

    /// The folder `root/rel`, opened without following a link at any step; `None` when it is
    /// missing or any step is not a folder.
    fn existing_dir(root: &Path, rel: &Path) -> Option<OwnedFd> {
        let mut fd = open_dir(None, root).ok()?;
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return None;
            };
            fd = open_dir(Some(&fd), Path::new(name)).ok()?;
        }
        Some(fd)
    }

    /// The entries of the folder `root/rel` with whether each is a folder (`Some(true)`), a
    /// regular file (`Some(false)`) or anything else (`None`), none followed as a link; empty
    /// when the folder is missing or reached through a link.
    pub(super) fn list(root: &Path, rel: &Path) -> Vec<(String, Option<bool>)> {
        let Some(fd) = existing_dir(root, rel) else {
            return Vec::new();
        };
        let Ok(listing) = rustix::fs::Dir::read_from(&fd) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in listing.map_while(std::result::Result::ok) {
            let Ok(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let kind = rustix::fs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode))
                .and_then(|k| match k {
                    rustix::fs::FileType::Directory => Some(true),
                    rustix::fs::FileType::RegularFile => Some(false),
                    _ => None,
                });
            out.push((name, kind));
        }
        out
    }

    /// The regular file `root/rel`, opened for reading without following a link at any step
    /// and without waiting on a FIFO.
    pub(super) fn open_file(root: &Path, rel: &Path) -> std::io::Result<std::fs::File> {
        let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let (Some(parent), Some(leaf)) = (rel.parent(), rel.file_name()) else {
            return Err(not_found());
        };
        let dir = existing_dir(root, parent).ok_or_else(not_found)?;
        let fd = rustix::fs::openat(
            &dir,
            leaf,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let file = std::fs::File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(file)
    }

    /// Makes the folders of `rel` below `root` (see the module docs).
    pub(super) fn create_dirs(root: &Path, rel: &Path) -> Result<()> {
        dirs(root, rel).map(drop)
    }

    /// Creates the new file `root/rel` (its folders made as by [`create_dirs`]) holding
    /// `bytes`; an existing entry, a link included, is an error.
    pub(super) fn write_new(root: &Path, rel: &Path, bytes: &[u8]) -> Result<()> {
        use std::io::Write as _;
        let whole = root.join(rel);
        let (Some(parent), Some(leaf)) = (rel.parent(), rel.file_name()) else {
            return Err(invalid(whole, "no file name"));
        };
        let dir = dirs(root, parent)?;
        let fd = rustix::fs::openat(
            &dir,
            leaf,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| io(&whole)(e.into()))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes).map_err(io(&whole))
    }

    /// Gives everything under `dir` to the owner of `owner_of` when devcell is root and that
    /// owner is not (and makes it writable by everyone when `may_share` and `owner_of` is), as
    /// `super::give_to_owner` does for devcell's private folders, but for a folder the
    /// container can change: each entry is given away relative to its folder's descriptor
    /// (`AT_SYMLINK_NOFOLLOW`), and only folders opened without following a link are entered,
    /// so no host file outside `dir` changes owner or mode whatever the container swaps.
    pub(super) fn give_to_owner(dir: &Path, owner_of: &Path, may_share: bool) -> Result<()> {
        use crate::config::ownership::{hand_over_to, owner, process_ids};
        use std::os::unix::fs::PermissionsExt as _;
        let ids = hand_over_to(process_ids(), owner(owner_of));
        let shared = may_share
            && std::fs::metadata(owner_of).is_ok_and(|m| m.permissions().mode() & 0o002 != 0);
        if ids.is_none() && !shared {
            return Ok(());
        }
        let top = open_dir(None, dir).map_err(io(dir))?;
        give(&top, dir, ids, shared)?;
        if let Some(ids) = ids {
            rustix::fs::fchown(
                &top,
                Some(rustix::fs::Uid::from_raw(ids.uid)),
                Some(rustix::fs::Gid::from_raw(ids.gid)),
            )
            .map_err(|e| io(dir)(e.into()))?;
        }
        if shared {
            rustix::fs::fchmod(&top, Mode::from_raw_mode(0o777)).map_err(|e| io(dir)(e.into()))?;
        }
        Ok(())
    }

    fn give(
        folder: &OwnedFd,
        path: &Path,
        ids: Option<crate::config::ownership::Ids>,
        shared: bool,
    ) -> Result<()> {
        let mut names = Vec::new();
        let listing = rustix::fs::Dir::read_from(folder).map_err(|e| io(path)(e.into()))?;
        for entry in listing {
            let entry = entry.map_err(|e| io(path)(e.into()))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
            }
        }
        for name in names {
            let here = path.join(&name);
            if let Some(ids) = ids {
                rustix::fs::chownat(
                    folder,
                    name.as_os_str(),
                    Some(rustix::fs::Uid::from_raw(ids.uid)),
                    Some(rustix::fs::Gid::from_raw(ids.gid)),
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(|e| io(&here)(e.into()))?;
            }
            let Ok(stat) = rustix::fs::statat(folder, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            let kind = rustix::fs::FileType::from_raw_mode(stat.st_mode);
            if kind == rustix::fs::FileType::Directory {
                // a folder swapped for a link since the `statat` is not entered (NOFOLLOW)
                let Ok(child) = open_dir(Some(folder), Path::new(&name)) else {
                    continue;
                };
                give(&child, &here, ids, shared)?;
                if shared {
                    rustix::fs::fchmod(&child, Mode::from_raw_mode(0o777))
                        .map_err(|e| io(&here)(e.into()))?;
                }
            } else if shared && kind == rustix::fs::FileType::RegularFile {
                let Ok(file) = rustix::fs::openat(
                    folder,
                    name.as_os_str(),
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                    Mode::empty(),
                ) else {
                    continue;
                };
                rustix::fs::fchmod(&file, Mode::from_raw_mode(0o666))
                    .map_err(|e| io(&here)(e.into()))?;
            }
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A folder the container swapped for a link to a host folder: nothing is written
        /// there and nothing there changes owner.
        #[test]
        fn links_inside_the_container_git_directory_are_never_followed() {
            use std::os::unix::fs::MetadataExt as _;
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("secret"), "s").unwrap();
            let dir = tempfile::tempdir().unwrap();
            std::os::unix::fs::symlink(outside.path(), dir.path().join("refs")).unwrap();

            assert!(write_new(dir.path(), Path::new("refs/remotes/HEAD"), b"x").is_err());
            assert!(create_dirs(dir.path(), Path::new("refs/heads")).is_err());
            assert!(!outside.path().join("remotes").exists());
            assert!(!outside.path().join("heads").exists());

            write_new(dir.path(), Path::new("info/exclude"), b"x").unwrap();
            assert_eq!(
                std::fs::read(dir.path().join("info/exclude")).unwrap(),
                b"x"
            );
            assert!(write_new(dir.path(), Path::new("info/exclude"), b"y").is_err());

            // given to another owner only when devcell is root (as in CI); the link's target
            // keeps its owner either way
            let owner_of = tempfile::tempdir().unwrap();
            let root = rustix::process::getuid().is_root();
            if root {
                std::os::unix::fs::chown(owner_of.path(), Some(4242), Some(4242)).unwrap();
            }
            let before = std::fs::metadata(outside.path().join("secret"))
                .unwrap()
                .uid();
            give_to_owner(dir.path(), owner_of.path(), false).unwrap();
            let after = std::fs::metadata(outside.path().join("secret"))
                .unwrap()
                .uid();
            assert_eq!(before, after);
            if root {
                let exclude = std::fs::metadata(dir.path().join("info/exclude")).unwrap();
                assert_eq!(exclude.uid(), 4242);
                let link = std::fs::symlink_metadata(dir.path().join("refs")).unwrap();
                assert_eq!(link.uid(), 4242);
            }
        }
    }
}
