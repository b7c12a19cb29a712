//! Multi-repo workspaces: what a workspace root holds, and which host git directories must be
//! mounted into the container so git works there.
//!
//! A workspace root is either **a repository** itself (it has a `.git` directory or file) or **a
//! folder of repositories**: its immediate children that are git repositories or git worktrees
//! (host-side, as Grove creates them with `git worktree add`). The whole root is mounted at the
//! workspace target (`/workspace` by default, [`crate::settings::HandoffSettings`]); each repo
//! appears at `<target>/<name>` (or at `<target>` for a single repository).
//!
//! A worktree's `.git` is a *file* (`gitdir: <main>/.git/worktrees/<name>`) whose `commondir`
//! points at the main repository's git directory, usually outside the workspace. Those git
//! directories are mounted at their **same host paths**, read-write, and nothing else of the host
//! ([`Workspace::git_mounts`]), so `git status`, `git diff` and `git commit` work in the container
//! while the repository stays on the host, usable by a human. See spec note
//! `spec-notes/0160-multi-repo-workspaces.md`.
//!
//! Inside those directories, each repository's `config` and `hooks` (which git on the host
//! executes from) are overlaid read-only ([`Workspace::protected`], spec note
//! `spec-notes/0165-git-config-and-hooks-read-only.md`). [`Workspace::mounts`] lists all of it.
//!
//! Git is queried with the `git` CLI (explicit argv, no shell), never writing: `status` runs with
//! `--no-optional-locks` so a concurrent human `git` on the host is never disturbed.
//!
//! The parts live beside this file: `error` (the error type), `git_links` (reading and judging
//! `.git` and `commondir` links), `git_mounts` (the mounts and read-only overlays), `warnings`
//! and `host_git` (the host `git` runs).

use crate::handoff::failure::GitFailed;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

mod error;
mod git_links;
mod git_mounts;
mod host_git;
mod warnings;

pub use error::WorkspaceError;
pub use git_links::judge_git_links;
use git_links::{canonical, link_target, read_commondir, read_gitdir_link};
use git_mounts::git_mounts_of;
use host_git::{GitPin, Status, git, parse_status, status_on_private_git_dir};
use warnings::{unreadable_warnings, untrusted_warning};

/// How the workspace root is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Layout {
    /// The root is itself a git repository or worktree.
    Repository,
    /// The root is a folder whose children are repositories or worktrees.
    MultiRepository,
    /// The root is neither a repository nor holds any (git state is not tracked).
    Plain,
}

impl Layout {
    /// For people: `repository`, `multi-repository` or `plain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Repository => "repository",
            Layout::MultiRepository => "multi-repository",
            Layout::Plain => "plain",
        }
    }
}

/// A repository's role in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RepoRole {
    /// The repository the task is about; its `.devcontainer` configures the container.
    Primary,
    /// Any other repository of the workspace.
    Secondary,
}

impl RepoRole {
    /// `primary` or `secondary`.
    pub fn as_str(self) -> &'static str {
        match self {
            RepoRole::Primary => "primary",
            RepoRole::Secondary => "secondary",
        }
    }
}

/// Whether a repository's `.git` is a directory or a link to a git directory elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RepoKind {
    /// `.git` is a directory.
    Repository,
    /// `.git` is a file (`gitdir: …`): a linked worktree (or an absorbed submodule).
    Worktree,
}

/// One repository of a workspace with its git state at inspection time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Repo {
    /// Folder name (the root's name for a single-repository workspace).
    pub name: String,
    /// Absolute, canonical host path of the working tree.
    pub host_path: PathBuf,
    /// Absolute POSIX path of the working tree in the container.
    pub container_path: String,
    /// Primary or secondary.
    pub role: RepoRole,
    /// Plain repository or linked worktree.
    pub kind: RepoKind,
    /// Checked-out branch (short name), `None` when HEAD is detached.
    pub branch: Option<String>,
    /// HEAD commit (full hex object name), `None` in a repository without commits. This is the
    /// task's *base commit* when recorded at handoff time.
    pub head: Option<String>,
    /// Whether the working tree has staged, unstaged or untracked changes.
    pub dirty: bool,
    /// The upstream branch (e.g. `origin/main`), when one is configured.
    pub upstream: Option<String>,
    /// Commits on HEAD not on the upstream; `None` without an upstream (or a gone one).
    pub ahead: Option<u32>,
    /// Commits on the upstream not on HEAD; `None` without an upstream (or a gone one).
    pub behind: Option<u32>,
    /// Absolute host path of this working tree's git directory.
    pub git_dir: PathBuf,
    /// Absolute host path of the repository's common git directory (objects, refs, config);
    /// equal to `git_dir` for a plain repository.
    pub common_dir: PathBuf,
    /// Whether this repository holds a dev container configuration (`.devcontainer/` or
    /// `.devcontainer.json`).
    pub has_devcontainer: bool,
    /// Why git could not describe the repository (e.g. git refused it for "dubious
    /// ownership"), with what to do; the git fields above are then empty (`branch`, `head`,
    /// `upstream`, `ahead`, `behind` `None`, `dirty` false). `None` when git answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_error: Option<String>,
}

/// A host git directory that must be bind-mounted, read-write, into the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitMount {
    /// Absolute, canonical host path (a git directory).
    pub host_path: PathBuf,
    /// Absolute path in the container: the same as `host_path`, except for a relative `gitdir:`
    /// link, where it is where the link resolves inside the container.
    pub container_path: String,
    /// The repositories that need it.
    pub repos: Vec<String>,
}

/// A non-fatal finding about a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceWarning {
    /// snake_case identifier: `symlink_skipped`, `non_utf8_name`, `alternates_outside`,
    /// `mount_shadows_workspace`.
    pub code: String,
    /// Human text.
    pub message: String,
}

/// An inspected workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// The root folder's name.
    pub name: String,
    /// Absolute, canonical host path of the root.
    pub root: PathBuf,
    /// Where the root is mounted in the container (POSIX path, e.g. `/workspace`).
    pub container_root: String,
    /// Single repository, folder of repositories, or neither.
    pub layout: Layout,
    /// The repositories, the primary first, then by name.
    pub repos: Vec<Repo>,
    /// The folder whose `.devcontainer` configures the container: the primary repository when
    /// it has one, else the root when it has one; `None` when neither does.
    pub config_folder: Option<PathBuf>,
    /// Host git directories that must be mounted for git to work in the container (usually
    /// host path = container path), sorted by host path, none nested in another same-path mount.
    /// Directories the workspace mount already shows at the right container path are left out.
    pub git_mounts: Vec<GitMount>,
    /// Read-only overlays inside the git directories: each repository's common `config` file
    /// and `hooks` folder, so the agent cannot plant configuration or hooks that git on the host
    /// would run (empty when [`InspectOptions::protect_git_config`] is off).
    pub protected: Vec<GitMount>,
    /// Git directories the repositories' links name outside the workspace without the
    /// worktree back-link that makes them trustworthy (spec-note 0411), granted or not. A
    /// repository whose git directory is not granted is not read with git and not mounted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted_git_dirs: Vec<UntrustedGitDir>,
    /// Non-fatal findings.
    pub warnings: Vec<WorkspaceWarning>,
}

/// A git directory a repository's link (`.git` file or symlink, `commondir`) names that devcell
/// does not trust on its own (spec-note 0411): a permission request
/// (`Permission::GitDir`, `--allow gitdir:<path>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UntrustedGitDir {
    /// The repository.
    pub repo: String,
    /// The link file that names it (host path).
    pub link: PathBuf,
    /// The git directory, resolved (canonical host path).
    pub path: PathBuf,
    /// Why it is not trusted.
    pub reason: String,
    /// Whether [`InspectOptions::trusted_git_dirs`] covers it (then git reads it and the
    /// handoff mounts it as before).
    pub granted: bool,
}

/// One bind mount a handoff needs, in engine-neutral form (for `up`, the plan and the audit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceMount {
    /// Absolute host path.
    pub source: PathBuf,
    /// Absolute container path.
    pub target: String,
    /// `true` for the [`MountPurpose::GitProtected`] overlays; the workspace and the git
    /// directories are read-write.
    pub read_only: bool,
    /// Why it is mounted: `workspace`, `git` (a repository's git directory) or `gitProtected`.
    pub purpose: MountPurpose,
}

impl WorkspaceMount {
    /// The mount as the engine takes it: a bind of `source` at `target`.
    pub fn to_mount(&self) -> crate::engine::Mount {
        crate::engine::Mount {
            kind: crate::engine::MountKind::Bind,
            source: Some(self.source.to_string_lossy().into_owned()),
            target: self.target.clone(),
            read_only: self.read_only,
        }
    }

    /// The mount in Docker's `--mount` syntax (the form `devcontainer.json`'s `mounts` and
    /// `workspaceMount` strings use): `type=bind,source=<host>,target=<container>[,readonly]`,
    /// quoted as [`crate::engine::run_args::mount_string`] does.
    pub fn to_mount_string(&self) -> String {
        crate::engine::run_args::mount_string(&self.to_mount())
    }
}

/// Why a [`WorkspaceMount`] exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MountPurpose {
    /// The workspace root.
    Workspace,
    /// A git directory outside the root ([`Workspace::git_mounts`]).
    Git,
    /// A repository's git `config` or `hooks`, read-only ([`Workspace::protected`]).
    GitProtected,
    /// A repository's working tree, bound on its own in a multi-repository workspace (a mount
    /// point cannot be renamed: no repository folder can be swapped; spec-note 0436).
    Repository,
    /// A repository's container git directory, read-write (spec-note 0436).
    ContainerGit,
    /// devcell's `.git` file naming a linked worktree's container git directory, read-only.
    GitLink,
    /// A repository's host `objects` folder, read-only (the container git directory's
    /// alternates).
    GitObjects,
}

impl MountPurpose {
    /// The plan's name for it (camelCase).
    pub fn as_str(self) -> &'static str {
        match self {
            MountPurpose::Workspace => "workspace",
            MountPurpose::Git => "git",
            MountPurpose::GitProtected => "gitProtected",
            MountPurpose::Repository => "repository",
            MountPurpose::ContainerGit => "containerGit",
            MountPurpose::GitLink => "gitLink",
            MountPurpose::GitObjects => "gitObjects",
        }
    }
}

#[cfg(test)]
impl Workspace {
    /// Test support: workspace `name` at `root`, at `container_root` in the container, of
    /// `layout`, with nothing in it (no repositories, git mounts, overlays or warnings).
    pub(crate) fn bare(name: &str, root: &Path, container_root: &str, layout: Layout) -> Self {
        Workspace {
            name: name.into(),
            root: root.to_path_buf(),
            container_root: container_root.into(),
            layout,
            repos: Vec::new(),
            config_folder: None,
            git_mounts: Vec::new(),
            protected: Vec::new(),
            untrusted_git_dirs: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

impl Workspace {
    /// Every mount the workspace needs: the root at the container root, then each git directory
    /// (read-write, at the same path unless a relative link says otherwise), then the read-only
    /// overlays of [`Workspace::protected`]. Nothing else of the host is ever in this list.
    /// Overlays are nested in earlier mounts: the engine must apply mounts shallowest target
    /// first (Docker sorts them so).
    pub fn mounts(&self) -> Vec<WorkspaceMount> {
        let mut out = vec![WorkspaceMount {
            source: self.root.clone(),
            target: self.container_root.clone(),
            read_only: false,
            purpose: MountPurpose::Workspace,
        }];
        out.extend(self.git_mounts.iter().map(|m| WorkspaceMount {
            source: m.host_path.clone(),
            target: m.container_path.clone(),
            read_only: false,
            purpose: MountPurpose::Git,
        }));
        out.extend(self.protected.iter().map(|m| WorkspaceMount {
            source: m.host_path.clone(),
            target: m.container_path.clone(),
            read_only: true,
            purpose: MountPurpose::GitProtected,
        }));
        out
    }

    /// Container paths to declare as git `safe.directory` inside the container (each repository's
    /// working tree), so git's ownership check passes when the container user's uid differs from
    /// the host owner's.
    pub fn safe_directories(&self) -> Vec<String> {
        self.repos
            .iter()
            .map(|r| r.container_path.clone())
            .collect()
    }

    /// The primary repository, if any.
    pub fn primary(&self) -> Option<&Repo> {
        self.repos.iter().find(|r| r.role == RepoRole::Primary)
    }

    /// The workspace's branch: the branch every repository is on when they agree, else the
    /// primary repository's, else `None`.
    pub fn branch(&self) -> Option<&str> {
        let mut branches = self.repos.iter().filter_map(|r| r.branch.as_deref());
        if let Some(first) = branches.next()
            && branches.all(|b| b == first)
        {
            return Some(first);
        }
        self.primary().and_then(|r| r.branch.as_deref())
    }
}

/// What to inspect.
#[derive(Debug, Clone)]
pub struct InspectOptions {
    /// Where the root is mounted in the container (default `/workspace`).
    pub container_root: String,
    /// The primary repository's name (`--primary`), if given.
    pub primary: Option<String>,
    /// Mount each repository's git `config` and `hooks` read-only (default `true`); see
    /// [`Workspace::protected`].
    pub protect_git_config: bool,
    /// Git directories the user trusts beyond the workspace's own (`--allow gitdir:<path>`,
    /// covering what is under each); `None` trusts every one (the `reference` profile).
    /// Default: none.
    pub trusted_git_dirs: Option<Vec<PathBuf>>,
    /// Git entries an agent created that the user has not accepted (attack M8): never taken as
    /// a repository of the workspace (devcell runs no git there), each named by a
    /// `git_dir_created` warning. Default: none.
    pub created_git: crate::handoff::git_identity::CreatedGits,
}

impl InspectOptions {
    /// Options from devcell's user settings (`[handoff] workspace_target`, `[security]`
    /// `profile` and the `gitdir:` grants of `allow`) and `--primary`.
    pub fn from_settings(settings: &crate::settings::Settings, primary: Option<String>) -> Self {
        Self {
            container_root: settings.handoff.workspace_target.clone(),
            primary,
            trusted_git_dirs: trusted_git_dirs(settings.security.profile, &settings.security.allow),
            ..Self::default()
        }
    }
}

impl Default for InspectOptions {
    fn default() -> Self {
        Self {
            container_root: crate::settings::HandoffSettings::default().workspace_target,
            primary: None,
            protect_git_config: true,
            trusted_git_dirs: Some(Vec::new()),
            created_git: Default::default(),
        }
    }
}

/// [`InspectOptions::trusted_git_dirs`] for a profile and `--allow` values: `None` under
/// `reference`, else the `gitdir:` grants (values that are not grants are skipped: they are
/// reported where the grants are parsed).
pub fn trusted_git_dirs<S: AsRef<str>>(
    profile: crate::settings::Profile,
    allow: &[S],
) -> Option<Vec<PathBuf>> {
    if profile == crate::settings::Profile::Reference {
        return None;
    }
    Some(
        allow
            .iter()
            .filter_map(|a| a.as_ref().strip_prefix("gitdir:"))
            .filter_map(crate::security::policy::normalize_path)
            .map(PathBuf::from)
            .collect(),
    )
}

/// Inspects the workspace at `root`: layout, repositories with their git state, the primary
/// repository, the configuration folder and the git directories to mount.
///
/// Children are scanned one level deep, sorted by name; hidden children (`.devcell`, `.grove`,
/// …) and symbolic links are skipped (a skipped symlink is a warning).
///
/// # Errors
/// [`WorkspaceError::Root`]/[`WorkspaceError::NotADirectory`] for a bad root,
/// [`WorkspaceError::GitUnavailable`]/[`WorkspaceError::Git`] when git cannot describe a repo,
/// [`WorkspaceError::BadGitLink`] for an unreadable `.git` file, [`WorkspaceError::UnknownPrimary`]
/// and [`WorkspaceError::AmbiguousPrimary`] for the primary choice.
pub fn inspect(root: &Path, options: &InspectOptions) -> Result<Workspace, WorkspaceError> {
    let root = std::fs::canonicalize(root).map_err(|source| WorkspaceError::Root {
        path: root.to_path_buf(),
        source,
    })?;
    if !root.is_dir() {
        return Err(WorkspaceError::NotADirectory { path: root });
    }
    let container_root = normalize_posix(&options.container_root);
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workspace".into());
    let mut warnings = Vec::new();
    let root_has_config = has_devcontainer(&root);

    let mut untrusted_git_dirs = Vec::new();
    let (layout, mut repos) = find_repos(
        &root,
        &name,
        &container_root,
        options,
        &mut untrusted_git_dirs,
        &mut warnings,
    )?;
    warnings.extend(unreadable_warnings(&repos));
    let primary = choose_primary(layout, &repos, options.primary.as_deref(), root_has_config)?;
    if let Some(index) = primary {
        repos[index].role = RepoRole::Primary;
        let p = repos.remove(index);
        repos.insert(0, p);
    }
    let config_folder = match repos.first() {
        Some(p) if p.role == RepoRole::Primary && p.has_devcontainer => Some(p.host_path.clone()),
        _ if root_has_config => Some(root.clone()),
        _ => None,
    };
    warnings.extend(untrusted_git_dirs.iter().map(untrusted_warning));
    let (git_mounts, protected) = git_mounts_of(
        &repos,
        &root,
        &container_root,
        options,
        &untrusted_git_dirs,
        &mut warnings,
    )?;

    Ok(Workspace {
        name,
        root,
        container_root,
        layout,
        repos,
        config_folder,
        git_mounts,
        protected,
        untrusted_git_dirs,
        warnings,
    })
}

/// The workspace's layout and its repositories, described ([`describe`]): the root when it is
/// one, else each child that is one. A `.git` an agent created is none of the workspace's
/// repositories until accepted (a warning says so).
///
/// Errors: as [`describe`] and [`children`].
fn find_repos(
    root: &Path,
    name: &str,
    container_root: &str,
    options: &InspectOptions,
    untrusted_git_dirs: &mut Vec<UntrustedGitDir>,
    warnings: &mut Vec<WorkspaceWarning>,
) -> Result<(Layout, Vec<Repo>), WorkspaceError> {
    let mut repos = Vec::new();
    let mut describe = |dir: &Path, name: String, container_path: String| {
        describe(
            dir,
            name,
            container_path,
            root,
            options.trusted_git_dirs.as_deref(),
            untrusted_git_dirs,
        )
    };
    // a `.git` an agent created is none of the workspace's repositories until accepted
    let adopted = |rel: &str, path: &Path, warnings: &mut Vec<WorkspaceWarning>| {
        if path.join(".git").symlink_metadata().is_err() {
            return false;
        }
        if !options.created_git.is_created(rel) {
            return true;
        }
        warnings.push(WorkspaceWarning {
            code: "git_dir_created".into(),
            message: crate::handoff::git_identity::created_message(rel),
        });
        false
    };
    let layout = if adopted(".git", root, warnings) {
        repos.push(describe(
            root,
            name.to_string(),
            container_root.to_string(),
        )?);
        Layout::Repository
    } else if root.join(".git").symlink_metadata().is_ok() {
        // the root's own `.git` was created: nothing is a repository of the workspace
        Layout::Plain
    } else {
        for (child_name, path) in children(root, warnings)? {
            if adopted(&format!("{child_name}/.git"), &path, warnings) {
                let container_path =
                    format!("{}/{}", container_root.trim_end_matches('/'), child_name);
                repos.push(describe(&path, child_name, container_path)?);
            }
        }
        if repos.is_empty() {
            Layout::Plain
        } else {
            Layout::MultiRepository
        }
    };
    Ok((layout, repos))
}

/// The immediate, non-hidden, non-symlink child folders of `root`, sorted by name.
fn children(
    root: &Path,
    warnings: &mut Vec<WorkspaceWarning>,
) -> Result<Vec<(String, PathBuf)>, WorkspaceError> {
    let io = |source| WorkspaceError::Io {
        path: root.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).map_err(io)? {
        let entry = entry.map_err(io)?;
        let file_name = entry.file_name();
        let Some(child_name) = file_name.to_str() else {
            warnings.push(WorkspaceWarning {
                code: "non_utf8_name".into(),
                message: format!(
                    "skipped `{}`: its name is not UTF-8",
                    entry.path().display()
                ),
            });
            continue;
        };
        if child_name.starts_with('.') {
            continue;
        }
        let file_type = entry.file_type().map_err(io)?;
        if file_type.is_symlink() {
            if entry.path().join(".git").exists() {
                warnings.push(WorkspaceWarning {
                    code: "symlink_skipped".into(),
                    message: format!(
                        "skipped `{child_name}`: a symbolic link to a repository does not resolve inside the container"
                    ),
                });
            }
            continue;
        }
        if file_type.is_dir() {
            out.push((child_name.to_string(), entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn has_devcontainer(dir: &Path) -> bool {
    dir.join(".devcontainer").is_dir() || dir.join(".devcontainer.json").is_file()
}

fn choose_primary(
    layout: Layout,
    repos: &[Repo],
    explicit: Option<&str>,
    root_has_config: bool,
) -> Result<Option<usize>, WorkspaceError> {
    if let Some(name) = explicit {
        return repos
            .iter()
            .position(|r| r.name == name)
            .map(Some)
            .ok_or_else(|| WorkspaceError::UnknownPrimary {
                name: name.to_string(),
                available: repos.iter().map(|r| r.name.clone()).collect(),
            });
    }
    if layout == Layout::Repository {
        return Ok(Some(0));
    }
    let with_config: Vec<usize> = (0..repos.len())
        .filter(|&i| repos[i].has_devcontainer)
        .collect();
    match with_config.as_slice() {
        [one] => Ok(Some(*one)),
        [] if repos.len() == 1 => Ok(Some(0)),
        [] => Ok(None),
        _ if root_has_config => Ok(None),
        many => Err(WorkspaceError::AmbiguousPrimary {
            candidates: many.iter().map(|&i| repos[i].name.clone()).collect(),
        }),
    }
}

/// Describes one repository (role is set by the caller). Its git links are judged first
/// ([`judge_git_links`]): when one names a git directory that is neither trusted nor covered
/// by `trusted` (`None`: every one is), it is added to `untrusted` and git is not run there.
fn describe(
    dir: &Path,
    name: String,
    container_path: String,
    root: &Path,
    trusted: Option<&[PathBuf]>,
    untrusted: &mut Vec<UntrustedGitDir>,
) -> Result<Repo, WorkspaceError> {
    let (kind, git_dir) = git_dir_of(dir)?;
    let common_dir = read_commondir(&git_dir)?;
    let judged = judge_links(dir, &name, kind, &git_dir, &common_dir, root, trusted);
    // git is not run where a link names a git directory not granted
    let refused: Vec<PathBuf> = judged
        .iter()
        .filter(|u| !u.granted)
        .map(|u| u.path.clone())
        .collect();
    untrusted.extend(judged);
    let (parsed, git_error) = read_status(dir, &git_dir, &common_dir, &refused)?;
    Ok(Repo {
        name,
        host_path: dir.to_path_buf(),
        container_path,
        role: RepoRole::Secondary,
        kind,
        branch: parsed.branch,
        head: parsed.head,
        dirty: parsed.dirty,
        upstream: parsed.upstream,
        ahead: parsed.ahead,
        behind: parsed.behind,
        git_dir,
        common_dir,
        has_devcontainer: has_devcontainer(dir),
        git_error,
    })
}

/// What `<dir>/.git` is and the git directory it names (canonical): a directory, a symbolic
/// link to a git directory kept elsewhere, or a worktree's `gitdir:` file.
///
/// Errors: [`WorkspaceError::Io`], [`WorkspaceError::BadGitLink`].
fn git_dir_of(dir: &Path) -> Result<(RepoKind, PathBuf), WorkspaceError> {
    let dot_git = dir.join(".git");
    let meta = dot_git
        .symlink_metadata()
        .map_err(|source| WorkspaceError::Io {
            path: dot_git.clone(),
            source,
        })?;
    if meta.is_dir() {
        return Ok((RepoKind::Repository, canonical(&dot_git)?));
    }
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&dot_git).map_err(|source| WorkspaceError::Io {
            path: dot_git.clone(),
            source,
        })?;
        let resolved = link_target(&dot_git, &dir.join(target))?;
        if !resolved.is_dir() {
            return Err(WorkspaceError::BadGitLink {
                path: dot_git,
                message: "a symbolic link `.git` must point at a git directory".into(),
            });
        }
        return Ok((RepoKind::Repository, resolved));
    }
    let (target, _) = read_gitdir_link(&dot_git)?;
    let resolved = dir.join(target);
    Ok((RepoKind::Worktree, link_target(&dot_git, &resolved)?))
}

/// The git directories repository `name`'s links name that devcell does not trust on its own
/// ([`judge_git_links`]), each granted when `trusted` (`None`: everything) covers it.
fn judge_links(
    dir: &Path,
    name: &str,
    kind: RepoKind,
    git_dir: &Path,
    common_dir: &Path,
    root: &Path,
    trusted: Option<&[PathBuf]>,
) -> Vec<UntrustedGitDir> {
    judge_git_links(dir, kind, git_dir, common_dir, root)
        .into_iter()
        .map(|(link, path, reason)| UntrustedGitDir {
            repo: name.to_string(),
            granted: trusted.is_none_or(|t| t.iter().any(|t| path.starts_with(t))),
            link,
            path,
            reason,
        })
        .collect()
}

/// The repository's `git status`, or, when git is not run (`refused` is not empty) or refuses
/// it, an unknown status and the reason for people (spec-note 0322): git refusing one
/// repository (ownership, a damaged index) leaves the rest of the workspace described.
///
/// Errors: [`WorkspaceError::GitUnavailable`] and the failures that are not git's.
fn read_status(
    dir: &Path,
    git_dir: &Path,
    common_dir: &Path,
    refused: &[PathBuf],
) -> Result<(Status, Option<String>), WorkspaceError> {
    let pin = GitPin {
        work_tree: dir,
        common_dir,
    };
    let status = if refused.is_empty() {
        // git's ownership check (0322) on the repository as discovered; `rev-parse` runs
        // nothing the configuration could name beyond the fixed overrides
        git(&pin, &["rev-parse", "--git-dir"], &[]).and_then(|_| {
            // `status` reads only the configuration devcell read, once (spec-note 0412)
            status_on_private_git_dir(dir, git_dir, common_dir)
        })
    } else {
        Err(WorkspaceError::Git(GitFailed {
            dir: dir.to_path_buf(),
            args: "status".into(),
            stderr: String::new(),
        }))
    };
    match status {
        Ok(status) => Ok((parse_status(&status), None)),
        Err(WorkspaceError::Git(_)) if !refused.is_empty() => Ok((
            Status::default(),
            Some(format!(
                "not read with git: its git directory `{}` is outside the workspace and not trusted (grant with `--allow gitdir:{}`)",
                refused[0].display(),
                refused[0].display()
            )),
        )),
        Err(WorkspaceError::Git(GitFailed { stderr, .. })) => Ok((
            Status::default(),
            Some(explain_git_failure(&stderr, dir, git_dir, common_dir)),
        )),
        Err(e) => Err(e),
    }
}

/// What to tell the user when `git status` fails in `dir`: git's first line, and for git's
/// ownership check ("detected dubious ownership") the owners involved and the fix devcell
/// suggests, giving them one owner; never git's own advice to change the global git config
/// (devcell never touches the user's git config).
fn explain_git_failure(stderr: &str, dir: &Path, git_dir: &Path, common_dir: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let first = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("git failed without a message");
    if !stderr.contains("dubious ownership") {
        return format!("git cannot read the repository: {first}");
    }
    let owner = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.uid().to_string())
            .unwrap_or_else(|_| "?".to_string())
    };
    format!(
        "git refuses the repository (`detected dubious ownership`): the working tree `{}` belongs to uid {}, its git directory `{}` to uid {} and `{}` to uid {}; give them one owner (e.g. `chown -R` the worktree and its main repository to the same user)",
        dir.display(),
        owner(dir),
        git_dir.display(),
        owner(git_dir),
        common_dir.display(),
        owner(common_dir)
    )
}

/// Lexically normalises a POSIX path: collapses `//`, `.` and `..` (never above `/`), drops a
/// trailing `/`. Relative input is taken from `/`.
pub fn normalize_posix(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Whether `rel` is a safe path relative to a workspace root: non-empty, relative, only normal
/// components (no `..`, no `.`, no root or prefix).
pub fn is_safe_relative(rel: &Path) -> bool {
    !rel.as_os_str().is_empty()
        && rel
            .components()
            .all(|c| matches!(c, Component::Normal(p) if p != OsStr::new("")))
}

#[cfg(test)]
mod tests;
