//! Default and user-given `workspaceFolder` / `workspaceMount`, and phase-1 substitution of the
//! whole config ([spec: workspaceMount, workspaceFolder](https://containers.dev/implementors/json_reference/#image-specific)).
//!
//! Defaults, as the reference CLI computes them for image and Dockerfile configs:
//!
//! - host mount root: the git root of the workspace folder when `mount_workspace_git_root`
//!   (`git rev-parse --show-cdup` run in the folder, resolved against it lexically so symlinked
//!   paths are kept), else — or when that fails — the workspace folder itself;
//! - container mount root: `/workspaces/<basename(host mount root)>`;
//! - `workspaceFolder`: container mount root + the workspace folder's path below the host root;
//! - `workspaceMount`: `type=bind,source=<host root>,target=<container root>`, each of the
//!   `source=…`/`target=…` segments wrapped in double quotes when its path holds a comma.
//!
//! User-given values win (after substitution); the two defaults are computed independently.
//! Compose configs: `workspaceFolder` defaults to `/` and there is no `workspaceMount`.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::error::Result;
use super::substitute::{self, LocalContext};

/// Inputs of [`resolve`].
///
/// `Debug` shows the names of the environment variables, never their values (they may be
/// secrets).
#[derive(Clone)]
pub struct ResolveOptions {
    /// The opened host folder, absolute (`--workspace-folder`); `${localWorkspaceFolder}`.
    pub workspace_folder: PathBuf,
    /// The `devcontainer.json` in use (named in errors).
    pub config_file: PathBuf,
    /// Mount the git root of the workspace folder rather than the folder itself
    /// (`--mount-workspace-git-root`, default `true` in the CLI).
    pub mount_workspace_git_root: bool,
    /// Host environment for `${localEnv:…}` (usually `std::env::vars()`).
    pub env: HashMap<String, String>,
}

impl std::fmt::Debug for ResolveOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.env.keys().collect();
        names.sort();
        f.debug_struct("ResolveOptions")
            .field("workspace_folder", &self.workspace_folder)
            .field("config_file", &self.config_file)
            .field("mount_workspace_git_root", &self.mount_workspace_git_root)
            .field("env (names only)", &names)
            .finish()
    }
}

/// Where the workspace lives in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceConfig {
    /// The effective in-container workspace folder (`workspaceFolder`, substituted, or the
    /// default); also the value of `${containerWorkspaceFolder}`.
    pub workspace_folder: String,
    /// The `--mount` spec of the workspace: the user's `workspaceMount` (substituted; an empty
    /// string means "no workspace mount", as in the reference CLI) or the default bind mount.
    /// `None` for compose configs and for `"workspaceMount": null`.
    pub workspace_mount: Option<String>,
    /// Host folder the default mount binds: the git root or the workspace folder. When neither
    /// default is needed (both properties given) and for compose configs, git is not asked and
    /// this is the workspace folder.
    pub host_mount_root: PathBuf,
    /// The host variables phase 1 read, per property path (names only; spec-note 0440).
    pub host_env_reads: substitute::HostEnvReads,
}

/// Substitutes phase-1 variables in the whole `config` in place and computes the effective
/// `workspaceFolder` / `workspaceMount`.
///
/// `config` is the parsed `devcontainer.json` (an object; other values are substituted and get
/// the image-kind defaults). `${containerWorkspaceFolder}` is the effective workspace folder,
/// itself substituted first. A `workspaceFolder` that is empty after substitution counts as
/// unset (spec-notes/0025).
///
/// Runs `git rev-parse --show-cdup` (in the workspace folder) only when a default is needed
/// and `mount_workspace_git_root` is set; a missing git or a folder outside any repository
/// falls back to the workspace folder.
///
/// # Errors
/// [`super::ConfigError::Substitution`] when a variable cannot be resolved (`${localEnv}`).
pub fn resolve(config: &mut Value, opts: &ResolveOptions) -> Result<WorkspaceConfig> {
    resolve_with_worktree(config, opts, false).map(|(workspace, _)| workspace)
}

/// As [`resolve`], with `--mount-git-worktree-common-dir`: when `mount_git_worktree_common_dir`
/// and `opts.mount_workspace_git_root` are set and a default is computed, a host mount root
/// whose `.git` is a file with a *relative* `gitdir:` is laid out by
/// [`worktree_common_dir_layout`] (container paths keep the worktree's position relative to
/// its repository). Returns the workspace and the extra bind mount of the common git dir
/// (`additionalMountString` in the reference), if any.
///
/// # Errors
/// As [`resolve`].
pub fn resolve_with_worktree(
    config: &mut Value,
    opts: &ResolveOptions,
    mount_git_worktree_common_dir: bool,
) -> Result<(WorkspaceConfig, Option<String>)> {
    let local_folder = resolve_path(&opts.workspace_folder)
        .to_string_lossy()
        .into_owned();
    let base_ctx = LocalContext {
        local_workspace_folder: Some(&local_folder),
        container_workspace_folder: None,
        env: &opts.env,
        config_file: Some(&opts.config_file),
    };

    let compose = config.get("dockerComposeFile").is_some();
    let user_folder = match config.get("workspaceFolder").and_then(Value::as_str) {
        Some(raw) if !raw.is_empty() => {
            Some(substitute::substitute_local_str(raw, &base_ctx)?).filter(|s| !s.is_empty())
        }
        _ => None,
    };
    let mount_given = config.get("workspaceMount").is_some();

    // Defaults only when needed, as the reference does (each one computed independently).
    let mut additional_mount = None;
    let defaults = (!compose && (user_folder.is_none() || !mount_given)).then(|| {
        let mut d = defaults(opts);
        if mount_git_worktree_common_dir
            && opts.mount_workspace_git_root
            && let Some(layout) = worktree_common_dir_layout(&d.host_mount_root)
        {
            let folder = resolve_path(&opts.workspace_folder);
            let relative: Vec<String> = folder
                .strip_prefix(&d.host_mount_root)
                .map(|rel| {
                    rel.components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            d.workspace_folder = relative
                .iter()
                .fold(layout.container_mount_root.clone(), |acc, seg| {
                    posix_join(&acc, seg)
                });
            let host = d.host_mount_root.to_string_lossy().into_owned();
            d.workspace_mount = format!(
                "type=bind,{},{}",
                quote_if_comma(&format!("source={host}"), &host),
                quote_if_comma(
                    &format!("target={}", layout.container_mount_root),
                    &layout.container_mount_root
                ),
            );
            d.container_mount_root = layout.container_mount_root;
            additional_mount = Some(layout.additional_mount);
        }
        d
    });
    let workspace_folder = match (user_folder, &defaults) {
        (Some(folder), _) => folder,
        (None, Some(defaults)) => defaults.workspace_folder.clone(),
        // Compose: the spec's default.
        (None, None) => "/".to_owned(),
    };

    let ctx = LocalContext {
        container_workspace_folder: Some(&workspace_folder),
        ..base_ctx
    };
    let host_env_reads = substitute::substitute_local_recorded(config, &ctx)?;

    let workspace_mount = if mount_given {
        config
            .get("workspaceMount")
            .and_then(Value::as_str)
            .map(str::to_owned)
    } else {
        defaults.as_ref().map(|d| d.workspace_mount.clone())
    };
    Ok((
        WorkspaceConfig {
            workspace_folder,
            workspace_mount,
            host_mount_root: defaults
                .map(|d| d.host_mount_root)
                .unwrap_or_else(|| opts.workspace_folder.clone()),
            host_env_reads,
        },
        additional_mount,
    ))
}

/// The container layout of a git worktree for `--mount-git-worktree-common-dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeLayout {
    /// Where the host mount root goes: `/workspaces/<segments>`, the segments being the host
    /// root's path below the deepest folder that also holds the common git dir.
    pub container_mount_root: String,
    /// `type=bind,source=<common git dir>,target=<its container path>` (comma-holding segments
    /// quoted).
    pub additional_mount: String,
}

/// For a host mount root whose `.git` is a file with a relative `gitdir:` (a worktree made
/// with `git worktree add --relative-paths`): the common git dir is `gitdir/../..`; the
/// container keeps the worktree and the common dir at the same relative positions, and the
/// common dir gets its own bind mount. `None` for anything else (no `.git` file, absolute
/// `gitdir`).
pub fn worktree_common_dir_layout(host_root: &Path) -> Option<WorktreeLayout> {
    let text = crate::config::bounded::read_to_string(&host_root.join(".git"), 64 * 1024).ok()?;
    let gitdir = text.lines().find_map(|line| {
        let rest = line.strip_prefix("gitdir:")?;
        let value = rest.trim_start().trim_end_matches('\r');
        (!value.is_empty()).then(|| value.to_owned())
    })?;
    if Path::new(&gitdir).is_absolute() {
        return None;
    }
    let common = normalize_lexically(&host_root.join(&gitdir).join("..").join(".."));
    let mut segments: Vec<String> = Vec::new();
    let mut current = host_root.to_path_buf();
    loop {
        let parent = current.parent().map(Path::to_path_buf);
        let inside = common.starts_with(&current) && common != current;
        if inside || parent.is_none() {
            break;
        }
        if let Some(name) = current.file_name() {
            segments.insert(0, name.to_string_lossy().into_owned());
        }
        current = parent.unwrap_or_default();
    }
    let container_root = segments
        .iter()
        .fold("/workspaces".to_owned(), |acc, seg| posix_join(&acc, seg));
    let container_common = normalize_lexically(
        &Path::new(&container_root)
            .join(&gitdir)
            .join("..")
            .join(".."),
    )
    .to_string_lossy()
    .into_owned();
    let common_text = common.to_string_lossy().into_owned();
    Some(WorktreeLayout {
        additional_mount: format!(
            "type=bind,{},{}",
            quote_if_comma(&format!("source={common_text}"), &common_text),
            quote_if_comma(&format!("target={container_common}"), &container_common),
        ),
        container_mount_root: container_root,
    })
}

/// The default workspace paths for image and Dockerfile configs (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceDefaults {
    /// The host folder that is mounted (git root or the workspace folder).
    pub host_mount_root: PathBuf,
    /// `/workspaces/<basename(host_mount_root)>`.
    pub container_mount_root: String,
    /// The container mount root plus the workspace folder's path below the host root.
    pub workspace_folder: String,
    /// `type=bind,source=<host root>,target=<container root>` (comma-holding segments quoted).
    pub workspace_mount: String,
}

/// Computes [`WorkspaceDefaults`] for `opts.workspace_folder` (runs git when
/// `opts.mount_workspace_git_root`).
pub fn defaults(opts: &ResolveOptions) -> WorkspaceDefaults {
    let folder = resolve_path(&opts.workspace_folder);
    let host_root = if opts.mount_workspace_git_root {
        git_root(&folder).unwrap_or_else(|| folder.clone())
    } else {
        folder.clone()
    };
    let host_root_text = host_root.to_string_lossy().into_owned();
    let basename = host_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let container_root = posix_join("/workspaces", &basename);
    let relative: Vec<String> = folder
        .strip_prefix(&host_root)
        .map(|rel| {
            rel.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let workspace_folder = relative
        .iter()
        .fold(container_root.clone(), |acc, seg| posix_join(&acc, seg));
    let workspace_mount = format!(
        "type=bind,{},{}",
        quote_if_comma(&format!("source={host_root_text}"), &host_root_text),
        quote_if_comma(&format!("target={container_root}"), &container_root),
    );
    WorkspaceDefaults {
        host_mount_root: host_root,
        container_mount_root: container_root,
        workspace_folder,
        workspace_mount,
    }
}

/// The git root of `folder` via `git rev-parse --show-cdup` (keeps symlinked paths, unlike
/// `--show-toplevel`); `None` when git is missing, fails, or prints no usable path. Run through
/// [`super::hostgit::command`] (no system or global configuration, nothing the repository's
/// configuration names can run; as the folder's owner when devcell is root).
pub fn git_root(folder: &Path) -> Option<PathBuf> {
    if !may_be_in_repository(folder) {
        return None;
    }
    // nothing the repository's configuration names may run (spec-note 0412); as the folder's
    // owner when devcell is root (spec-note 0250)
    let mut git = super::hostgit::command(folder, &[]);
    git.args(["rev-parse", "--show-cdup"]);
    let output = super::hostgit::output_within(&mut git, super::hostgit::quick_deadline()).ok()?;
    if !output.status.success() {
        return None;
    }
    let cdup = String::from_utf8(output.stdout).ok()?;
    let root = normalize_lexically(&folder.join(cdup.trim()));
    // `core.worktree` in the repository's own (container-writable) `.git/config` moves the
    // "top level" to any folder above the workspace (the home folder): the root counts only
    // when git finds this same repository from it (spec-note 0400, attacks).
    if root != normalize_lexically(folder) && absolute_git_dir(&root)? != absolute_git_dir(folder)?
    {
        return None;
    }
    Some(root)
}

/// Whether git's discovery could find a repository for `folder`: false only when no folder
/// from `folder` up to `/` holds a `.git` or `HEAD` entry (of any type) and every one of them
/// could be looked at. Git finds a repository only through those names (a `.git` folder or
/// gitfile, or a folder that is itself a git directory, which holds `HEAD`); the host `git` of
/// [`super::hostgit::command`] reads no `GIT_DIR` or ceiling from the environment. So `false`
/// is exactly git's "not a git repository", decided without starting a process (a warm `up`
/// outside any repository spends no `git`); anything else runs git as before. Both the path
/// as given and its canonical form are walked: git walks the physical folders (it works from
/// `getcwd` after `-C`), so a symlinked workspace's repository is above its target.
fn may_be_in_repository(folder: &Path) -> bool {
    let Ok(physical) = folder.canonicalize() else {
        return true;
    };
    let lexical = normalize_lexically(&std::path::absolute(folder).unwrap_or_default());
    for dir in physical.ancestors().chain(lexical.ancestors()) {
        for name in [".git", "HEAD"] {
            match std::fs::symlink_metadata(dir.join(name)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // present, or not knowable (a folder devcell cannot search): let git judge
                _ => return true,
            }
        }
    }
    false
}

/// `git rev-parse --absolute-git-dir` run in `dir` ([`super::hostgit::command`]).
fn absolute_git_dir(dir: &Path) -> Option<String> {
    let mut git = super::hostgit::command(dir, &[]);
    git.args(["rev-parse", "--absolute-git-dir"]);
    let output = super::hostgit::output_within(&mut git, super::hostgit::quick_deadline()).ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(text.trim().to_string())
}

/// Makes `path` absolute (against the current directory) and resolves `.`, `..`, repeated and
/// trailing separators lexically, like Node's `path.resolve` in the reference CLI. Use it for
/// `--workspace-folder` / `--config` so `${localWorkspaceFolder}` and the id labels (hence
/// `${devcontainerId}` and container lookup) equal the reference's: `./ws/` and `ws/../ws`
/// both give `<cwd>/ws`. Symlinks are kept (not canonicalised).
pub fn resolve_path(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    normalize_lexically(&absolute)
}

/// Resolves `.` and `..` without touching the file system (like Node's `path.resolve`);
/// `..` above the root stays at the root, a relative path keeps its leading `..`. A trailing
/// `/` is dropped.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `..` at the root stays at the root; a relative path keeps it.
                if !out.pop() && !out.has_root() {
                    out.push("..");
                }
            }
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component.as_os_str());
            }
        }
    }
    out
}

/// Joins two `/`-separated paths (an empty `tail` leaves `head` as is).
fn posix_join(head: &str, tail: &str) -> String {
    if tail.is_empty() {
        head.to_owned()
    } else if head.ends_with('/') {
        format!("{head}{tail}")
    } else {
        format!("{head}/{tail}")
    }
}

fn quote_if_comma(segment: &str, path: &str) -> String {
    if path.contains(',') {
        format!("\"{segment}\"")
    } else {
        segment.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::process::{Command, Stdio};

    use crate::config::hostgit::test_git as git;

    fn opts(folder: &Path, git_root: bool) -> ResolveOptions {
        ResolveOptions {
            workspace_folder: folder.to_path_buf(),
            config_file: folder.join(".devcontainer/devcontainer.json"),
            mount_workspace_git_root: git_root,
            env: HashMap::from([("USER_X".to_owned(), "alice".to_owned())]),
        }
    }

    /// A temp dir with a canonical path (no symlinks in the prefix).
    fn tempdir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().canonicalize().expect("canonical temp dir");
        (dir, path)
    }

    /// Checklist item 93 and 13: no properties ⇒ `/workspaces/<basename>` and a bind mount.
    #[test]
    fn defaults_without_git_repo() {
        let (_t, root) = tempdir();
        let ws = root.join("proj");
        std::fs::create_dir(&ws).unwrap();
        let mut config = json!({"image": "x", "remoteEnv": {"W": "${containerWorkspaceFolder}"}});
        let got = resolve(&mut config, &opts(&ws, true)).unwrap();
        assert_eq!(got.workspace_folder, "/workspaces/proj");
        assert_eq!(
            got.workspace_mount.as_deref(),
            Some(format!("type=bind,source={},target=/workspaces/proj", ws.display()).as_str())
        );
        assert_eq!(got.host_mount_root, ws);
        assert_eq!(config["remoteEnv"]["W"], "/workspaces/proj");
    }

    /// Git root detection with a real repository: the workspace is a sub-folder.
    #[test]
    fn defaults_in_git_subfolder() {
        let (_t, root) = tempdir();
        let repo = root.join("repo");
        let ws = repo.join("sub/inner");
        std::fs::create_dir_all(&ws).unwrap();
        git(&repo, &["init", "-q"]);
        assert_eq!(git_root(&ws), Some(repo.clone()));
        let mut config = json!({
            "image": "x",
            "name": "${localWorkspaceFolderBasename} in ${containerWorkspaceFolderBasename}",
            "postCreateCommand": "ls ${containerWorkspaceFolder}",
        });
        let got = resolve(&mut config, &opts(&ws, true)).unwrap();
        assert_eq!(got.workspace_folder, "/workspaces/repo/sub/inner");
        assert_eq!(
            got.workspace_mount.unwrap(),
            format!(
                "type=bind,source={},target=/workspaces/repo",
                repo.display()
            )
        );
        assert_eq!(got.host_mount_root, repo);
        assert_eq!(config["name"], "inner in inner");
        assert_eq!(config["postCreateCommand"], "ls /workspaces/repo/sub/inner");

        // --mount-workspace-git-root=false: the folder itself.
        let mut config = json!({"image": "x"});
        let got = resolve(&mut config, &opts(&ws, false)).unwrap();
        assert_eq!(got.workspace_folder, "/workspaces/inner");
        assert_eq!(
            got.workspace_mount.unwrap(),
            format!("type=bind,source={},target=/workspaces/inner", ws.display())
        );
    }

    #[test]
    fn a_core_worktree_above_the_repository_is_not_its_root() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().join("home");
        let ws = parent.join("src").join("proj");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        git(&ws, &["init", "-q"]);
        assert_eq!(git_root(&ws.join("sub")), Some(ws.clone()));
        git(&ws, &["config", "core.worktree", &parent.to_string_lossy()]);
        assert_eq!(git_root(&ws), None);
        assert_eq!(git_root(&ws.join("sub")), None);
        // A repository of its own above it (a dotfiles repository in the home folder) is not
        // this repository either.
        git(&parent, &["init", "-q"]);
        assert_eq!(git_root(&ws), None);
    }

    #[test]
    fn workspace_at_git_root() {
        let (_t, root) = tempdir();
        git(&root, &["init", "-q"]);
        assert_eq!(git_root(&root), Some(root.clone()));
        let got = resolve(&mut json!({"image": "x"}), &opts(&root, true)).unwrap();
        let base = root.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(got.workspace_folder, format!("/workspaces/{base}"));
    }

    /// `--show-cdup` keeps the symlinked path (the reference's reason to use it).
    #[test]
    fn git_root_keeps_symlinked_path() {
        let (_t, root) = tempdir();
        let repo = root.join("real");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        git(&repo, &["init", "-q"]);
        let link = root.join("link");
        std::os::unix::fs::symlink(&repo, &link).unwrap();
        assert_eq!(git_root(&link.join("sub")), Some(link.clone()));
        let got = resolve(&mut json!({}), &opts(&link.join("sub"), true)).unwrap();
        assert_eq!(got.workspace_folder, "/workspaces/link/sub");
    }

    /// The in-process "not a git repository" agrees with git: no marker, no repository; any
    /// marker (a gitfile, a git directory's `HEAD`, a repository above a symlink's target)
    /// leaves the judgement to git.
    #[test]
    fn no_git_marker_is_decided_without_git_and_any_marker_is_left_to_git() {
        let (_t, root) = tempdir();
        let plain = root.join("plain/sub");
        std::fs::create_dir_all(&plain).unwrap();
        if may_be_in_repository(&root) {
            // the machine's temporary folder is itself inside a repository: nothing to decide
            return;
        }
        assert!(!may_be_in_repository(&plain));
        let status = Command::new("git")
            .args(["rev-parse", "--show-cdup"])
            .current_dir(&plain)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "git finds a repository without a marker");

        let gitfile = root.join("gitfile/sub");
        std::fs::create_dir_all(&gitfile).unwrap();
        std::fs::write(root.join("gitfile/.git"), "gitdir: /elsewhere\n").unwrap();
        assert!(may_be_in_repository(&gitfile));

        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        git(&repo, &["init", "-q"]);
        assert!(may_be_in_repository(&repo.join(".git/refs")));
        let link = root.join("plain/link");
        std::os::unix::fs::symlink(repo.join("sub"), &link).unwrap();
        assert!(may_be_in_repository(&link));
    }

    #[test]
    fn git_root_outside_repo_is_none() {
        let (_t, root) = tempdir();
        assert_eq!(git_root(&root), None);
        assert_eq!(git_root(&root.join("missing")), None);
    }

    /// Commas and spaces: the reference quotes `source=`/`target=` segments holding a comma.
    #[test]
    fn paths_with_commas_and_spaces() {
        let (_t, root) = tempdir();
        let repo = root.join("my repo, v2");
        let ws = repo.join("a b");
        std::fs::create_dir_all(&ws).unwrap();
        git(&repo, &["init", "-q"]);
        let mut config =
            json!({"image": "x", "containerEnv": {"B": "${localWorkspaceFolderBasename}"}});
        let got = resolve(&mut config, &opts(&ws, true)).unwrap();
        assert_eq!(got.workspace_folder, "/workspaces/my repo, v2/a b");
        assert_eq!(
            got.workspace_mount.unwrap(),
            format!(
                "type=bind,\"source={}\",\"target=/workspaces/my repo, v2\"",
                repo.display()
            )
        );
        assert_eq!(config["containerEnv"]["B"], "a b");

        // Spaces only: no quotes.
        let spaced = root.join("with space");
        std::fs::create_dir(&spaced).unwrap();
        let got = resolve(&mut json!({}), &opts(&spaced, false)).unwrap();
        assert_eq!(
            got.workspace_mount.unwrap(),
            format!(
                "type=bind,source={},target=/workspaces/with space",
                spaced.display()
            )
        );
    }

    /// Checklist item 94 and user values: both given, substituted, no git involved.
    #[test]
    fn user_values_win_after_substitution() {
        let ws = Path::new("/nonexistent/ws");
        let mut config = json!({
            "image": "x",
            "workspaceFolder": "/home/${localEnv:USER_X}/src",
            "workspaceMount": "source=${localWorkspaceFolder},target=/home/${localEnv:USER_X}/src,type=bind",
            "remoteEnv": {"D": "${containerWorkspaceFolderBasename}"}
        });
        let got = resolve(&mut config, &opts(ws, true)).unwrap();
        assert_eq!(got.workspace_folder, "/home/alice/src");
        assert_eq!(
            got.workspace_mount.as_deref(),
            Some("source=/nonexistent/ws,target=/home/alice/src,type=bind")
        );
        assert_eq!(config["workspaceFolder"], "/home/alice/src");
        assert_eq!(config["remoteEnv"]["D"], "src");
        assert_eq!(got.host_mount_root, ws);
    }

    /// Defaults are computed independently (reference behaviour, spec-notes/0026).
    #[test]
    fn defaults_are_independent() {
        let (_t, root) = tempdir();
        let repo = root.join("r");
        let ws = repo.join("sub");
        std::fs::create_dir_all(&ws).unwrap();
        git(&repo, &["init", "-q"]);

        // Only workspaceFolder: the git root is still mounted at /workspaces/r.
        let got = resolve(
            &mut json!({"image": "x", "workspaceFolder": "/app"}),
            &opts(&ws, true),
        )
        .unwrap();
        assert_eq!(got.workspace_folder, "/app");
        assert_eq!(
            got.workspace_mount.unwrap(),
            format!("type=bind,source={},target=/workspaces/r", repo.display())
        );

        // Only workspaceMount: the folder default still points into /workspaces/r.
        let got = resolve(
            &mut json!({"image": "x", "workspaceMount": "type=volume,source=v,target=/v"}),
            &opts(&ws, true),
        )
        .unwrap();
        assert_eq!(got.workspace_folder, "/workspaces/r/sub");
        assert_eq!(
            got.workspace_mount.as_deref(),
            Some("type=volume,source=v,target=/v")
        );
    }

    /// Compose: folder defaults to `/`, no mount; a given folder is substituted.
    #[test]
    fn compose_configs() {
        let ws = Path::new("/nonexistent/ws");
        let got = resolve(
            &mut json!({"dockerComposeFile": "c.yml", "service": "s"}),
            &opts(ws, true),
        )
        .unwrap();
        assert_eq!(got.workspace_folder, "/");
        assert_eq!(got.workspace_mount, None);

        let mut config = json!({
            "dockerComposeFile": ["c.yml"], "service": "s",
            "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
            "postStartCommand": ["ls", "${containerWorkspaceFolder}"]
        });
        let got = resolve(&mut config, &opts(ws, true)).unwrap();
        assert_eq!(got.workspace_folder, "/workspaces/ws");
        assert_eq!(got.workspace_mount, None);
        assert_eq!(config["postStartCommand"][1], "/workspaces/ws");
    }

    /// An empty (or emptied) workspaceFolder counts as unset (spec-notes/0025); an empty
    /// workspaceMount is kept (no workspace mount), null gives none.
    #[test]
    fn empty_values() {
        let (_t, root) = tempdir();
        let ws = root.join("e");
        std::fs::create_dir(&ws).unwrap();
        for folder in ["", "${localEnv:UNSET_FOR_TEST}"] {
            let mut config = json!({"image": "x", "workspaceFolder": folder, "workspaceMount": ""});
            let got = resolve(&mut config, &opts(&ws, false)).unwrap();
            assert_eq!(got.workspace_folder, "/workspaces/e", "{folder:?}");
            assert_eq!(got.workspace_mount.as_deref(), Some(""));
        }
        let got = resolve(
            &mut json!({"image": "x", "workspaceMount": null}),
            &opts(&ws, false),
        )
        .unwrap();
        assert_eq!(got.workspace_mount, None);
        let got = resolve(
            &mut json!({"dockerComposeFile": "c.yml", "workspaceFolder": ""}),
            &opts(&ws, false),
        )
        .unwrap();
        assert_eq!(got.workspace_folder, "/");
    }

    #[test]
    fn substitution_errors_propagate_with_file() {
        let ws = Path::new("/nonexistent/ws");
        let err = resolve(
            &mut json!({"image": "x", "containerEnv": {"A": "${localEnv}"}}),
            &opts(ws, false),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "/nonexistent/ws/.devcontainer/devcontainer.json: containerEnv.A: `${localEnv}` names no environment variable"
        );
        let err = resolve(
            &mut json!({"image": "x", "workspaceFolder": "/${env}"}),
            &opts(ws, false),
        )
        .unwrap_err();
        assert!(err.to_string().contains("`${env}`"), "{err}");
    }

    #[test]
    fn filesystem_root_workspace() {
        let got = defaults(&opts(Path::new("/"), false));
        assert_eq!(got.workspace_folder, "/workspaces");
        assert_eq!(got.workspace_mount, "type=bind,source=/,target=/workspaces");
    }

    /// `${localWorkspaceFolder}` and the defaults use the resolved path, as the reference's
    /// `path.resolve` of `--workspace-folder` does.
    #[test]
    fn workspace_folder_is_resolved_like_node() {
        let ws = Path::new("/nonexistent/a/../ws/./");
        let mut config = json!({"image": "x", "name": "${localWorkspaceFolder}|${localWorkspaceFolderBasename}"});
        let got = resolve(&mut config, &opts(ws, false)).unwrap();
        assert_eq!(config["name"], "/nonexistent/ws|ws");
        assert_eq!(got.workspace_folder, "/workspaces/ws");
        assert_eq!(
            got.workspace_mount.unwrap(),
            "type=bind,source=/nonexistent/ws,target=/workspaces/ws"
        );
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(resolve_path(Path::new("x/../y/")), cwd.join("y"));
    }

    #[test]
    fn debug_hides_environment_values() {
        let mut o = opts(Path::new("/w"), false);
        o.env.insert("API_TOKEN".into(), "s3cr3t-value".into());
        let text = format!("{o:?}");
        assert!(text.contains("API_TOKEN"), "{text}");
        assert!(
            !text.contains("s3cr3t-value") && !text.contains("alice"),
            "{text}"
        );
    }

    #[test]
    fn lexical_normalization() {
        for (input, expected) in [
            ("/a/b/../c", "/a/c"),
            ("/a/./b/", "/a/b"),
            ("/a/b/../../..", "/"),
            ("/a/b/", "/a/b"),
        ] {
            assert_eq!(
                normalize_lexically(Path::new(input)),
                PathBuf::from(expected)
            );
        }
    }
}
