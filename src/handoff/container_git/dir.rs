//! [`ContainerGitDir`]: where a repository's container git directory is kept, its recorded
//! [`Base`], and how it is made from the host repository ([`ContainerGitDir::refresh`]).

use crate::handoff::failure::GitFailed;
use crate::handoff::failure::IoFailed;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::files::{copy_regular, write_new};
use super::nofollow;
use super::refs::{is_oid, valid_ref_name};
use super::report::Base;
use super::{ContainerGitError, HostRepo, NAMESPACE, Result, io};
use crate::config::hostgit;

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

    pub(super) fn base_path(&self) -> PathBuf {
        self.slot.join("base.json")
    }

    pub(super) fn covered_path(&self) -> PathBuf {
        self.slot.join("submodules.json")
    }

    /// Records the gitlink paths (relative to the working tree) whose folders the handoff's
    /// container covers (spec-note 0436, "Submodules"): a fetch-back never makes a commit with
    /// a gitlink elsewhere the host's checked-out one.
    ///
    /// Errors: the record cannot be written.
    pub fn set_covered_submodules(&self, paths: &[String]) -> Result<()> {
        let path = self.covered_path();
        let bytes = serde_json::to_vec(paths).map_err(|e| {
            ContainerGitError::Io(IoFailed {
                path: path.clone(),
                source: std::io::Error::other(e),
            })
        })?;
        std::fs::create_dir_all(&self.slot).map_err(io(&self.slot))?;
        std::fs::write(&path, bytes).map_err(io(&path))
    }

    /// The gitlink paths recorded by [`ContainerGitDir::set_covered_submodules`]; none when
    /// there is no readable record (fail closed: no gitlink counts as covered).
    pub(super) fn covered_submodules(&self) -> std::collections::BTreeSet<String> {
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
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                ContainerGitError::Io(IoFailed {
                    path,
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                })
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ContainerGitError::Io(IoFailed { path, source })),
        }
    }

    pub(super) fn write_base(&self, base: &Base) -> Result<()> {
        let path = self.base_path();
        let tmp = self.slot.join("base.json.tmp");
        let bytes = serde_json::to_vec_pretty(base).map_err(|e| {
            ContainerGitError::Io(IoFailed {
                path: path.clone(),
                source: std::io::Error::other(e),
            })
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
        let read = read_host(&private, host)?;
        let dir = self.git_dir();
        self.clear_or_create(&dir)?;
        self.write_config(&dir, &private)?;
        write_new(&dir.join("HEAD"), format!("{}\n", read.head).as_bytes())?;
        let packed: String = read
            .refs
            .iter()
            .map(|(n, o)| format!("{o} {n}\n"))
            .collect();
        write_new(
            &dir.join("packed-refs"),
            format!("# pack-refs with: sorted \n{packed}").as_bytes(),
        )?;
        write_layout(&dir, &read.symrefs, objects_target)?;
        copy_index(host, &dir)?;
        nofollow::give_to_owner(&dir, host.common_dir, true)?;
        let base = Base {
            head: read.head,
            head_commit: read.head_commit,
            refs: read.refs,
            object_format: read.object_format,
        };
        self.write_base(&base)?;
        Ok(base)
    }

    /// Writes devcell's `config` into `dir`: the repository format and the data keys `git
    /// status` needs ([`hostgit::PrivateGitDir::carried_config`]), written by git itself.
    fn write_config(&self, dir: &Path, private: &hostgit::PrivateGitDir) -> Result<()> {
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
        write_new(&dir.join("config"), config.as_bytes())
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
}

/// What [`ContainerGitDir::refresh`] reads from the host repository.
struct HostState {
    /// `sha1` or `sha256`.
    object_format: String,
    /// The commit `HEAD` names, if any.
    head_commit: Option<String>,
    /// Every ref that is not symbolic (outside devcell's namespace).
    refs: BTreeMap<String, String>,
    /// The symbolic refs, name and target.
    symrefs: Vec<(String, String)>,
    /// The host `HEAD`, trimmed.
    head: String,
}

/// Reads the host repository's object format, `HEAD` commit and refs through `private`
/// (git with none of the repository's programs), and its `HEAD` file without following a
/// link.
fn read_host(private: &hostgit::PrivateGitDir, host: &HostRepo<'_>) -> Result<HostState> {
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
        return Err(ContainerGitError::Git(GitFailed {
            dir: host.work_tree.to_path_buf(),
            args: "for-each-ref".into(),
            stderr: String::new(),
        }));
    }
    let (refs, symrefs) = parse_refs(&listed);
    let head_path = host.git_dir.join("HEAD");
    let head = hostgit::read_no_follow(&head_path, 4096).map_err(io(&head_path))?;
    let head = String::from_utf8_lossy(&head).trim().to_string();
    if !hostgit::valid_head(&head) {
        return Err(ContainerGitError::Io(IoFailed {
            path: head_path,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "is neither `ref: refs/…` nor an object name",
            ),
        }));
    }
    Ok(HostState {
        object_format,
        head_commit,
        refs,
        symrefs,
        head,
    })
}

/// The refs (name → object) and symbolic refs (name, target) of `for-each-ref` lines
/// `<object> <name> <symref>`, names git would accept outside devcell's namespace only.
fn parse_refs(listed: &str) -> (BTreeMap<String, String>, Vec<(String, String)>) {
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
    (refs, symrefs)
}

/// The folders, symbolic refs and `objects/info/alternates` (naming `objects_target`) of the
/// container git directory `dir`. Below `dir` the container may be swapping folders for links
/// while devcell writes (a reused container runs): every nested folder and file is made
/// through file descriptors that never follow a link (spec-note 0436).
fn write_layout(dir: &Path, symrefs: &[(String, String)], objects_target: &str) -> Result<()> {
    for sub in [
        "refs/heads",
        "refs/tags",
        "objects/info",
        "objects/pack",
        "info",
    ] {
        nofollow::create_dirs(dir, Path::new(sub))?;
    }
    for (name, target) in symrefs {
        nofollow::write_new(dir, Path::new(name), format!("ref: {target}\n").as_bytes())?;
    }
    nofollow::write_new(
        dir,
        Path::new("objects/info/alternates"),
        format!("{objects_target}\n").as_bytes(),
    )
}

/// Copies the host's index (and a split index's shared part, and `shallow`) into `dir`, so
/// `git status` there matches the host's.
fn copy_index(host: &HostRepo<'_>, dir: &Path) -> Result<()> {
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
    Ok(())
}
