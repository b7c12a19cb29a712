//! Clone tasks (`handoff --isolation clone`, spec-note 0437): each task gets a private clone of
//! the user's repository, made from a bare mirror devcell keeps in its cache ([`mirror`]),
//! made independent of that mirror before its container starts ([`clone`]), and mounted as the
//! container's whole workspace with its own `.git`. Nothing of the user's repository is
//! mounted. The agent's work comes back only when devcell's host fetches the task branch
//! `devcell/<task>` from the clone into `refs/devcell/tasks/<task>` of the user's repository,
//! reading the clone as untrusted data ([`fetch`]).
//!
//! Layout under the state root:
//!
//! ```text
//! <state>/tasks/<source key>/<task>/task.json   the TaskRecord
//! <state>/tasks/<source key>/<task>/<repo>/     the clone (the handoff's workspace folder)
//! <cache>/mirrors/<source key>.git              the bare mirror, <source key>.lock its lock
//! ```

pub mod clone;
pub mod compose;
pub mod fetch;
pub mod lock;
pub mod mail;
pub mod mirror;
pub mod orphans;
pub mod run;
pub mod source;

/// Plain git for the task modules' tests (a fixed identity and default branch).
#[cfg(test)]
pub(crate) mod test_git {
    use std::path::Path;
    use std::process::Command;

    /// Runs `git ARGS` in `dir`, asserts it succeeded, returns its trimmed stdout.
    pub fn plain_git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c"])
            .arg("init.defaultBranch=main")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Writes the file `name` (its text: its name) in `dir`, commits it as `name` and returns
    /// the commit.
    pub fn commit(dir: &Path, name: &str) -> String {
        std::fs::write(dir.join(name), name).unwrap();
        plain_git(dir, &["add", name]);
        plain_git(dir, &["commit", "-qm", name]);
        plain_git(dir, &["rev-parse", "HEAD"])
    }

    /// The record of task `t` of the repository `source` (its `.git` the git directory,
    /// named `src`), cloned at `clone` from `base`, never fetched.
    pub fn record_for(source: &Path, clone: &Path, base: &str) -> super::TaskRecord {
        super::TaskRecord {
            task: "t".into(),
            source: source.to_path_buf(),
            source_git_dir: source.join(".git"),
            source_head_git_dir: None,
            repo: "src".into(),
            clone: clone.to_path_buf(),
            branch: "devcell/t".into(),
            base_ref: "HEAD".into(),
            base: base.to_string(),
            object_format: "sha1".into(),
            fetched: None,
            fetched_at: None,
            refused: None,
            created_at: "2026-12-04T00:00:00Z".into(),
            source_id: None,
            workspace: None,
        }
    }

    /// A repository made at `dir` whose one commit (`a`) adds the file `a` holding `text`.
    pub fn repo_of_a(dir: &Path, text: &str) {
        std::fs::create_dir(dir).unwrap();
        plain_git(dir, &["init", "-q"]);
        std::fs::write(dir.join("a"), text).unwrap();
        plain_git(dir, &["add", "a"]);
        plain_git(dir, &["commit", "-qm", "a"]);
    }

    /// A repository made at `dir` with one empty commit.
    pub fn empty_repo(dir: &Path) {
        std::fs::create_dir(dir).unwrap();
        plain_git(dir, &["init", "-q"]);
        plain_git(dir, &["commit", "-q", "--allow-empty", "-m", "a"]);
    }

    /// A repository made at `dir` whose one commit holds a `.devcontainer/devcontainer.json`
    /// of the `busybox` image.
    pub fn devcontainer_repo(dir: &Path) {
        std::fs::create_dir_all(dir.join(".devcontainer")).unwrap();
        std::fs::write(
            dir.join(".devcontainer/devcontainer.json"),
            r#"{"image": "busybox"}"#,
        )
        .unwrap();
        plain_git(dir, &["init", "-q"]);
        plain_git(dir, &["add", "-A"]);
        plain_git(dir, &["commit", "-qm", "a"]);
    }
}

use crate::handoff::failure::GitFailed;
use crate::handoff::failure::IoFailed;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::hostgit;
pub use crate::handoff::context::Sandbox;

/// The branch of a task in its clone: `devcell/<task>`.
pub fn branch_of(task: &str) -> String {
    format!("devcell/{task}")
}

/// The ref of a task in the user's repository once fetched: `refs/devcell/tasks/<task>`.
pub fn fetched_ref_of(task: &str) -> String {
    format!("refs/devcell/tasks/{task}")
}

/// Where a fetched commit the task's branch no longer contains is kept (the agent rewrote the
/// branch after a fetch): `refs/devcell/kept/tasks/<task>/<commit>`, so the forced update of
/// [`fetched_ref_of`] never makes a fetched commit unreachable (spec-note 0437).
pub fn kept_ref_of(task: &str, commit: &str) -> String {
    format!("refs/devcell/kept/tasks/{task}/{commit}")
}

/// The commits a task's branch holds that were never fetched ([`TaskError::Unfetched`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unlisted {
    /// `<short sha> <subject>`, newest first, at most [`fetch::UNFETCHED_NAMED`].
    pub commits: Vec<String>,
    /// How many there are in all (`None`: they could not be counted).
    pub total: Option<u64>,
}

/// A clone task failed or was refused.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The task name is not one devcell accepts.
    #[error(
        "invalid task name `{name}`: use 1 to 64 letters, digits, `-`, `_` or `.`, starting with a letter or digit"
    )]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A new task's name differs from an existing task's of the repository only by case: on a
    /// case-insensitive file system they would share a folder and a ref.
    #[error("task `{name}` differs only by case from the existing task `{existing}`")]
    CaseClash {
        /// The name given.
        name: String,
        /// The existing task's name.
        existing: String,
    },
    /// The source cannot be cloned as it is (shallow, partial, submodules, LFS); nothing was
    /// created.
    #[error("cannot make a clone task of `{}`: {message}", source_repo.display())]
    Refused {
        /// The stable reason (`clone_shallow_source`, `clone_partial_source`,
        /// `clone_submodules`, `clone_lfs`, `clone_not_a_repository`, `clone_bad_base`,
        /// `clone_runtime_host`).
        reason: &'static str,
        /// The repository.
        source_repo: PathBuf,
        /// What is wrong.
        message: String,
        /// How to get on.
        hint: String,
    },
    /// No task of that name exists for the workspace.
    #[error("no clone task `{task}` for `{}`", workspace.display())]
    NoSuchTask {
        /// The task.
        task: String,
        /// The workspace.
        workspace: PathBuf,
    },
    /// `delete --task` while the task branch has commits never fetched.
    #[error(
        "task `{task}` has commits that were never fetched: branch `{branch}` is at {tip}, {fetched}{}",
        listing(&listed.commits, listed.total)
    )]
    Unfetched {
        /// The task.
        task: String,
        /// Its branch.
        branch: String,
        /// The branch's commit in the clone.
        tip: String,
        /// What was fetched (for the message).
        fetched: String,
        /// The commits not fetched, when they could be listed (boxed: the error stays small).
        listed: Box<Unlisted>,
    },
    /// `delete --task` of a task whose repository was replaced by another or removed since,
    /// while its clone's branch holds commits past the base: no repository at its path holds
    /// them, and `fetch` cannot bring them back.
    #[error(
        "task `{task}` has commits no repository holds: its repository `{}` is {}, and its branch `{branch}` is at {tip}",
        repository.display(),
        match state { RepositoryState::Replaced => "replaced by another", _ => "gone" }
    )]
    LeftUnfetched {
        /// The task.
        task: String,
        /// Its branch.
        branch: String,
        /// The repository (or multi-repository workspace) it was made from.
        repository: PathBuf,
        /// [`RepositoryState::Replaced`] or [`RepositoryState::Gone`].
        state: RepositoryState,
        /// The branch's commit in the clone (or what makes its refs unreadable).
        tip: String,
        /// Its clone.
        clone: PathBuf,
    },
    /// The clone's refs cannot be read as git writes them (a link, a FIFO, an unreadable file,
    /// junk): its branch is never counted as fetched, and nothing is fetched from it.
    #[error(
        "task `{task}`: the refs of its clone `{}` cannot be read: {why}",
        clone.display()
    )]
    UnreadableRefs {
        /// The task.
        task: String,
        /// Its clone.
        clone: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The clone's objects are more than the fetch-back may copy
    /// (`[handoff] fetch_back_max_bytes`): nothing was fetched, the clone is kept.
    #[error(
        "task `{task}`: its clone's objects are {size} bytes, more than the fetch-back budget of {budget} bytes (`fetch_back_max_bytes` under `[handoff]`); nothing was fetched"
    )]
    OverBudget {
        /// The task.
        task: String,
        /// Its clone.
        clone: PathBuf,
        /// The objects' size in bytes (at least).
        size: u64,
        /// The budget in bytes.
        budget: u64,
    },
    /// What the fetch-back would bring the host's git to inflate is over a bound
    /// (`[handoff] fetch_back_max_inflated_bytes`, `fetch_back_max_object_bytes`, the object
    /// counts) or cannot be measured: nothing was fetched, the clone is kept (spec-note 0438).
    #[error("task `{task}`: {why}; nothing was fetched")]
    OverInflated {
        /// The task.
        task: String,
        /// Its clone.
        clone: PathBuf,
        /// Which bound.
        why: crate::handoff::container_git::OverInflated,
    },
    /// The task is in use by another devcell (a running handoff, delete or prune of it).
    #[error("task `{task}` is in use by another devcell (a running handoff, delete or prune)")]
    InUse {
        /// The task.
        task: String,
    },
    /// A file could not be read or written.
    #[error(transparent)]
    Io(IoFailed),
    /// A `git` command failed.
    #[error(transparent)]
    Git(GitFailed),
    /// Reading the clone back failed.
    #[error(transparent)]
    FetchBack(#[from] crate::handoff::container_git::ContainerGitError),
    /// The task record could not be read.
    #[error("task record `{}` is not valid: {message}", path.display())]
    Corrupt {
        /// The record.
        path: PathBuf,
        /// The parse error.
        message: String,
    },
    /// No state or cache folder is known.
    #[error("no folder for devcell's state or cache (no home folder)")]
    NoFolder,
    /// A clone task's handoff failed once its name was claimed: while its clone was made
    /// (nothing of the task is kept: `folder` is `None`) or while it ran (the task is kept, for
    /// `status`, `fetch --task`, a retry or `delete --task`). It names the task, the user's
    /// repository and the mirrors, never only devcell's folder of the task (issue 27).
    #[error("clone task `{}` of `{}`: {}", .0.task, .0.source_repo.display(), .0.error)]
    Failed(Box<Failed>),
}

/// [`TaskError::Failed`]'s content.
#[derive(Debug)]
pub struct Failed {
    /// The task.
    pub task: String,
    /// The agent the handoff was for (its retry names it).
    pub agent: String,
    /// The user's repository, or multi-repository workspace root, the task is of.
    pub source_repo: PathBuf,
    /// The task's folder when the task is kept (`None`: it was removed, nothing is left).
    pub folder: Option<PathBuf>,
    /// The mirror of each repository (kept: the next task reuses them).
    pub mirrors: Vec<PathBuf>,
    /// What failed.
    pub error: crate::ops::error::OpsError,
}

impl Failed {
    /// `devcell <args> --workspace-folder <source>`.
    fn argv(&self, args: &[&str]) -> Vec<String> {
        let mut argv: Vec<String> = std::iter::once("devcell")
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        argv.push("--workspace-folder".into());
        argv.push(self.source_repo.to_string_lossy().into_owned());
        argv
    }

    /// What gets the user on: see the task, retry it, remove it (when kept); retry (when not).
    fn actions(&self) -> Vec<(String, Vec<String>)> {
        let retry = (
            format!("run task `{}` again", self.task),
            self.argv(&[
                "handoff",
                "--isolation",
                "clone",
                "--task",
                &self.task,
                "--agent",
                &self.agent,
            ]),
        );
        if self.folder.is_none() {
            return vec![retry];
        }
        vec![
            (
                "show the workspace's tasks, this one included".into(),
                self.argv(&["status"]),
            ),
            retry,
            (
                format!(
                    "remove task `{}` (its container and clone; refused while it holds commits never fetched)",
                    self.task
                ),
                self.argv(&["delete", "--task", &self.task]),
            ),
        ]
    }
}

impl crate::ops::error::ProductError for TaskError {
    fn code(&self) -> crate::handoff::envelope::ErrorCode {
        use crate::handoff::envelope::ErrorCode;
        match self {
            TaskError::InvalidName { .. } | TaskError::CaseClash { .. } => {
                ErrorCode::InvalidArgument
            }
            TaskError::Refused { .. } => ErrorCode::ConfigInvalid,
            TaskError::NoSuchTask { .. } => ErrorCode::NotFound,
            TaskError::Unfetched { .. }
            | TaskError::LeftUnfetched { .. }
            | TaskError::UnreadableRefs { .. }
            | TaskError::OverBudget { .. }
            | TaskError::OverInflated { .. } => ErrorCode::PermissionRequired,
            TaskError::InUse { .. } => ErrorCode::SessionActive,
            // what failed says which kind of failure it was
            TaskError::Failed(f) => f.error.code(),
            _ => ErrorCode::Internal,
        }
    }

    fn details(&self) -> serde_json::Value {
        match self {
            TaskError::Refused { reason, .. } => serde_json::json!({ "reason": reason }),
            TaskError::Unfetched {
                task,
                branch,
                tip,
                listed,
                ..
            } => serde_json::json!({
                "reason": "task_unfetched",
                "task": task,
                "branch": branch,
                "tip": tip,
                "commits": listed.commits,
                "total": listed.total,
            }),
            TaskError::LeftUnfetched {
                task,
                branch,
                repository,
                state,
                tip,
                clone,
            } => serde_json::json!({
                "reason": "task_repository_left",
                "task": task,
                "branch": branch,
                "repository": repository,
                "repositoryState": state,
                "tip": tip,
                "clone": clone,
            }),
            TaskError::UnreadableRefs { task, clone, why } => serde_json::json!({
                "reason": "task_refs_unreadable",
                "task": task,
                "clone": clone,
                "why": why,
            }),
            TaskError::CaseClash { name, existing } => serde_json::json!({
                "reason": "task_name_case_clash",
                "task": name,
                "existing": existing,
            }),
            TaskError::InUse { task } => serde_json::json!({
                "reason": "task_in_use",
                "task": task,
            }),
            TaskError::OverBudget {
                task,
                clone,
                size,
                budget,
            } => serde_json::json!({
                "reason": "fetch_over_budget",
                "task": task,
                "clone": clone,
                "size": size,
                "budget": budget,
                "setting": "handoff.fetch_back_max_bytes",
            }),
            TaskError::OverInflated { task, clone, why } => serde_json::json!({
                "reason": "fetch_inflated_over_budget",
                "task": task,
                "clone": clone,
                "why": why.to_string(),
                "size": why.size(),
                "setting": why.setting().map(|s| format!("handoff.{s}")),
            }),
            TaskError::Failed(f) => {
                let mut details = f.error.details();
                if let Some(map) = details.as_object_mut() {
                    map.insert("task".into(), f.task.clone().into());
                    map.insert("source".into(), serde_json::json!(f.source_repo));
                    map.insert("kept".into(), f.folder.is_some().into());
                    map.insert("taskFolder".into(), serde_json::json!(f.folder));
                    map.insert("mirrors".into(), serde_json::json!(f.mirrors));
                    // the inner error's causes, which the envelope would otherwise lose: its
                    // text is this error's message, so its chain is no source of this one
                    let causes: Vec<String> =
                        std::iter::successors(std::error::Error::source(&f.error), |e| e.source())
                            .map(ToString::to_string)
                            .collect();
                    if !causes.is_empty() {
                        map.entry("causes").or_insert_with(|| causes.into());
                    }
                }
                details
            }
            _ => serde_json::json!({}),
        }
    }

    fn next_actions(&self) -> Vec<(String, Vec<String>)> {
        match self {
            TaskError::Failed(f) => f.actions(),
            _ => Vec::new(),
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            TaskError::Refused { hint, .. } => Some(hint.clone()),
            TaskError::Unfetched { task, .. } => Some(format!(
                "run `devcell fetch --task {task}` first, or pass `--force` to drop them"
            )),
            TaskError::LeftUnfetched {
                task,
                repository,
                clone,
                ..
            } => Some(format!(
                "`devcell fetch` cannot bring them back (the repository they were made from is no longer at `{}`): copy what you want out of the clone `{}` (it is the agent's: run no git there that reads its configuration), then pass `--force` to drop task `{task}`",
                repository.display(),
                clone.display()
            )),
            TaskError::UnreadableRefs { task, clone, .. } => Some(format!(
                "look at the clone `{}` (its branch is not fetched), or pass `--force` to drop task `{task}` as it is",
                clone.display()
            )),
            TaskError::OverBudget {
                task, clone, size, ..
            } => Some(format!(
                "look at what the agent committed in `{}`; to bring it back, set `fetch_back_max_bytes = {size}` (or more) under `[handoff]` in config.toml and run `devcell fetch --task {task}`",
                clone.display()
            )),
            TaskError::OverInflated { task, clone, why } => Some(match (why.setting(), why.size()) {
                (Some(setting), Some(size)) => format!(
                    "look at what the agent committed in `{}` (the clone is the agent's: run no git there that reads its configuration); to bring it back, set `{setting} = {size}` (or more) under `[handoff]` in config.toml and run `devcell fetch --task {task}`",
                    clone.display()
                ),
                _ => format!(
                    "look at the clone `{}`: its objects cannot be brought back as they are (the task's commits stay there until `devcell delete --task {task} --force`)",
                    clone.display()
                ),
            }),
            TaskError::CaseClash { existing, .. } => Some(format!(
                "continue the existing task with `--task {existing}`, or choose a name that differs by more than case"
            )),
            TaskError::InUse { .. } => Some(
                "wait for the other devcell to end (`devcell status` lists the task); a killed devcell holds nothing".into(),
            ),
            TaskError::NoSuchTask { .. } => {
                Some("`devcell status` lists the workspace's tasks".into())
            }
            TaskError::Failed(f) => {
                let way_on = match &f.folder {
                    Some(folder) => format!(
                        "task `{}` is kept in `{}`: `devcell status` lists it, `devcell handoff --isolation clone --task {}` runs it again, `devcell delete --task {}` removes it",
                        f.task,
                        folder.display(),
                        f.task,
                        f.task
                    ),
                    None => format!(
                        "nothing of task `{}` was kept (the mirrors are, for the next task): `devcell handoff --isolation clone --task {}` tries again",
                        f.task, f.task
                    ),
                };
                Some(match crate::diagnostics::Hint::hint(&f.error) {
                    Some(first) => format!("{first}; {way_on}"),
                    None => way_on,
                })
            }
            _ => None,
        }
    }
}

/// The unfetched commits for [`TaskError::Unfetched`]'s message: one indented line each, then
/// how many more there are.
fn listing(commits: &[String], total: Option<u64>) -> String {
    let mut out = String::new();
    if commits.is_empty() {
        return out;
    }
    let total = total.unwrap_or(commits.len() as u64);
    out.push_str(&format!("; {total} commit(s):"));
    for c in commits {
        out.push_str("\n  ");
        out.push_str(c);
    }
    let more = total.saturating_sub(commits.len() as u64);
    if more > 0 {
        out.push_str(&format!("\n  … and {more} more"));
    }
    out
}

/// `Result` with [`TaskError`].
pub type Result<T, E = TaskError> = std::result::Result<T, E>;

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TaskError + '_ {
    move |source| {
        TaskError::Io(IoFailed {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// How long one host git command of a clone task may take (a mirror fetch or a repack of a
/// large repository included).
const GIT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1800);

/// Runs devcell's safe host git ([`hostgit::command`]) in `dir` with `extra` configuration
/// and `GIT_DIR` = `git_dir` when given; its standard output.
pub(crate) fn git(
    dir: &Path,
    git_dir: Option<&Path>,
    extra: &[(String, String)],
    args: &[&str],
) -> Result<String> {
    git_within(dir, git_dir, extra, args, GIT_DEADLINE)
}

/// [`git`] for a quick question about the user's repository (`rev-parse`, `rev-list --count`)
/// asked by `status` too: bounded by [`hostgit::quick_deadline`], since a configuration that
/// `[include]`s a FIFO would make git wait for ever (spec-note 0433).
pub(crate) fn git_quick(dir: &Path, git_dir: Option<&Path>, args: &[&str]) -> Result<String> {
    git_within(dir, git_dir, &[], args, hostgit::quick_deadline())
}

fn git_within(
    dir: &Path,
    git_dir: Option<&Path>,
    extra: &[(String, String)],
    args: &[&str],
    deadline: std::time::Duration,
) -> Result<String> {
    let mut cmd = hostgit::command(dir, extra);
    if let Some(g) = git_dir {
        cmd.env("GIT_DIR", g);
    }
    cmd.args(args);
    let out = hostgit::output_within(&mut cmd, deadline).map_err(io(dir))?;
    if !out.status.success() {
        return Err(TaskError::Git(GitFailed {
            dir: dir.to_path_buf(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `name` is a task name: 1–64 of `[A-Za-z0-9._-]`, starting with a letter or digit,
/// not ending in `.` or `.lock`, no `..` (so `devcell/<name>` is a valid branch and the name a
/// plain folder name). Pure.
pub fn valid_task_name(name: &str) -> bool {
    // the mail's names are the task names, but for a git ref's `.lock`
    crate::mail::model::valid_name(name) && !name.ends_with(".lock")
}

/// A new task name: `<agent>-<UTC time>-<4 random hex digits>` (unique per repository: the
/// caller retries on a clash). Only the characters [`valid_task_name`] accepts are kept.
pub fn derive_task_name(agent: &str) -> String {
    let agent: String = agent
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(24)
        .collect();
    let agent = if agent.is_empty() {
        "task".to_string()
    } else {
        agent
    };
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let random: u16 = rand_u16();
    format!("{agent}-{stamp}-{random:04x}")
}

fn rand_u16() -> u16 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.write_u32(std::process::id());
    h.finish() as u16
}

/// What devcell remembers about one clone task (`task.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    /// The task's name.
    pub task: String,
    /// The user's repository (its working tree) the task was cloned from.
    pub source: PathBuf,
    /// Its common git directory (where the fetched ref is written).
    pub source_git_dir: PathBuf,
    /// The source working tree's own git directory, whose `HEAD` the task was based on and
    /// `behind` is counted against (a linked worktree's differs from the common directory);
    /// absent in records written before it was kept: the common directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_head_git_dir: Option<PathBuf>,
    /// The repository's folder name (the clone's folder name).
    pub repo: String,
    /// The clone (the handoff's workspace folder).
    pub clone: PathBuf,
    /// The task branch (`devcell/<task>`).
    pub branch: String,
    /// What `--base` named (`HEAD` by default).
    pub base_ref: String,
    /// The commit the branch started at.
    pub base: String,
    /// `sha1` or `sha256`.
    pub object_format: String,
    /// The branch's commit last fetched into the user's repository.
    #[serde(default)]
    pub fetched: Option<String>,
    /// When it was fetched (RFC 3339).
    #[serde(default)]
    pub fetched_at: Option<String>,
    /// Why the last fetch of the branch was refused (a fetch-back bound, spec-note 0438);
    /// cleared by the next fetch that brings it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// When the task was created (RFC 3339).
    pub created_at: String,
    /// Which repository the common git directory was when the task was made
    /// ([`repository_id`]): a new repository made at the same path later is another one, and
    /// does not inherit the task. Absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// For a repository of a multi-repository workspace: the workspace root the task was made
    /// from. Its clone is then `<task folder>/workspace/<repo>` (the workspace folder holds
    /// only the clones, so no record is visible in the container) and its record
    /// `<task folder>/repos/<repo>.json`. Absent for a single repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
}

/// The identity of the repository whose common git directory is `common_dir`: the folder's
/// device, inode and birth time (when the file system keeps one). A repository removed and made
/// again at the same path gets a new one, even when its inode number is reused.
pub fn repository_id(common_dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(common_dir).ok()?;
    let born = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Some(format!("{}:{}:{born}", meta.dev(), meta.ino()))
}

/// Whether a task's repository is still the one it was made from (`status --all`'s
/// `repository`; what lets `delete --task` remove a task of a repository replaced since).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RepositoryState {
    /// The repository the task was made from (every repository of a multi-repository task).
    Present,
    /// Another repository is at its path now (removed and made again, or moved there).
    Replaced,
    /// No repository is at its path.
    Gone,
}

impl RepositoryState {
    /// The state of the repositories of `records`: the first not present, else present.
    pub fn of(records: &[TaskRecord]) -> RepositoryState {
        records
            .iter()
            .map(TaskRecord::repository_state)
            .find(|s| *s != RepositoryState::Present)
            .unwrap_or(RepositoryState::Present)
    }
}

impl TaskRecord {
    /// The git directory whose `HEAD` is the source working tree's
    /// ([`TaskRecord::source_head_git_dir`], else the common directory).
    pub fn head_git_dir(&self) -> &Path {
        self.source_head_git_dir
            .as_deref()
            .unwrap_or(&self.source_git_dir)
    }

    /// Whether the repository the task was made from is still at its path: no git directory
    /// there is [`RepositoryState::Gone`], another repository's is
    /// [`RepositoryState::Replaced`]. Reads only the git directory's metadata.
    pub fn repository_state(&self) -> RepositoryState {
        let git_dir = &self.source_git_dir;
        if !(git_dir.join("objects").is_dir() && git_dir.join("HEAD").is_file()) {
            RepositoryState::Gone
        } else if !self.same_repository() {
            RepositoryState::Replaced
        } else {
            RepositoryState::Present
        }
    }

    /// Whether the repository at [`TaskRecord::source_git_dir`] is still the one the task was
    /// made from ([`repository_id`]; records without an identity are taken to be).
    pub fn same_repository(&self) -> bool {
        self.source_id
            .as_deref()
            .is_none_or(|id| repository_id(&self.source_git_dir).as_deref() == Some(id))
    }

    /// `<task folder>/task.json`, or `<task folder>/repos/<repo>.json` for a repository of a
    /// multi-repository workspace.
    pub fn path(&self) -> PathBuf {
        if self.workspace.is_some() {
            self.folder()
                .join(REPOS_FOLDER)
                .join(format!("{}.json", self.repo))
        } else {
            self.folder().join("task.json")
        }
    }

    /// The folder the handoff mounts as its workspace: the clone for a single repository, the
    /// folder of every clone (`<task folder>/workspace`) for a multi-repository workspace.
    pub fn workspace_folder(&self) -> PathBuf {
        if self.workspace.is_some() {
            self.clone
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default()
        } else {
            self.clone.clone()
        }
    }

    /// The task's folder (the clone's parent; for a multi-repository workspace its
    /// grandparent).
    pub fn folder(&self) -> PathBuf {
        self.workspace_folder()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// Writes the record durably ([`write_durably`]).
    ///
    /// Errors: [`TaskError::Io`].
    pub fn save(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        write_durably(&self.path(), text.as_bytes())
    }

    /// Reads `<folder>/task.json`.
    ///
    /// Errors: [`TaskError::Io`], [`TaskError::Corrupt`].
    pub fn load(folder: &Path) -> Result<TaskRecord> {
        let path = folder.join("task.json");
        let bytes = crate::config::bounded::read(&path, 1 << 20).map_err(io(&path))?;
        serde_json::from_slice(&bytes).map_err(|e| TaskError::Corrupt {
            path,
            message: e.to_string(),
        })
    }
}

/// Writes `path` so that after a crash it is either its old content or all of `bytes`, never
/// empty or cut short: a new temporary file beside it, written and synced, renamed into place,
/// then its folder synced (the rename itself on disk). A task record that cannot be read
/// keeps its task from `prune --tasks` (spec-note 0437): only a record never written means a
/// task no container saw.
///
/// Errors: [`TaskError::Io`].
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".record-")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io(tmp.path()))?;
    tmp.persist(path).map_err(|e| {
        TaskError::Io(IoFailed {
            path: path.to_path_buf(),
            source: e.error,
        })
    })?;
    sync_folder(dir)
}

/// Syncs the folder `dir` (the names created or renamed in it reach the disk).
///
/// Errors: [`TaskError::Io`].
pub fn sync_folder(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// The folder of a multi-repository task's records (`<task folder>/repos`).
pub const REPOS_FOLDER: &str = "repos";

/// The folder of a multi-repository task's clones (`<task folder>/workspace`), the handoff's
/// workspace folder.
pub const WORKSPACE_FOLDER: &str = "workspace";

/// Every record of the task folder `folder`: its `task.json` (a single repository), else each
/// `repos/*.json` by repository name (a multi-repository workspace; an empty `repos` is no
/// task).
///
/// Errors: [`TaskError::Io`] (no record at all), [`TaskError::Corrupt`].
pub fn load_folder(folder: &Path) -> Result<Vec<TaskRecord>> {
    let single = folder.join("task.json");
    if single.exists() || !folder.join(REPOS_FOLDER).is_dir() {
        return Ok(vec![TaskRecord::load(folder)?]);
    }
    let repos = folder.join(REPOS_FOLDER);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&repos)
        .map_err(io(&repos))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(TaskError::Io(IoFailed {
            path: repos,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no repository record"),
        }));
    }
    paths
        .iter()
        .map(|path| {
            let bytes = crate::config::bounded::read(path, 1 << 20).map_err(io(path))?;
            serde_json::from_slice(&bytes).map_err(|e| TaskError::Corrupt {
                path: path.clone(),
                message: e.to_string(),
            })
        })
        .collect()
}

/// Whether the task folder `folder` was made whole: its `task.json`, or its `repos` folder
/// (renamed into place once every record in it was written).
pub fn is_made(folder: &Path) -> bool {
    folder.join("task.json").exists() || folder.join(REPOS_FOLDER).is_dir()
}

/// The key of a multi-repository workspace root (its canonical path), distinct from any
/// repository's [`source_key`].
pub fn workspace_key(root: &Path) -> String {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"workspace:");
    hasher.update(root.as_os_str().as_encoded_bytes());
    hex::encode(&hasher.finalize()[..16])
}

/// The key of a source repository: sha256 of its canonical common git directory, as hex (16
/// bytes). Mirrors and task folders are named by it.
pub fn source_key(common_dir: &Path) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(common_dir.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..16])
}

/// `<state>/tasks/<key>`: the task folders of one source repository.
pub fn tasks_root(state_root: &Path, key: &str) -> PathBuf {
    state_root.join("tasks").join(key)
}

/// Every task of the source repository with key `key`, by name; unreadable records and those
/// of a repository that was at the same path before ([`TaskRecord::same_repository`]) are
/// skipped.
pub fn list(state_root: &Path, key: &str) -> Vec<TaskRecord> {
    list_tasks(state_root, key).into_iter().flatten().collect()
}

/// Every task of the source with key `key`, by name, each as its records (one per repository,
/// by repository name); as [`list`], a task one of whose repositories is not the one it was
/// made from is skipped.
pub fn list_tasks(state_root: &Path, key: &str) -> Vec<Vec<TaskRecord>> {
    list_all_tasks(state_root, key)
        .into_iter()
        // the tasks of a repository that was at this path before are not this one's
        .filter(|records| records.iter().all(TaskRecord::same_repository))
        .collect()
}

/// The folders directly in `dir` (not links to folders), read as far as they can be: none
/// when `dir` cannot be read, an entry that cannot be read skipped. The task and mirror sweeps
/// share it so that they agree on what a folder is.
pub(crate) fn subfolders(dir: &Path) -> impl Iterator<Item = std::fs::DirEntry> + use<> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
}

/// [`list_tasks`] with the tasks of a repository that was replaced or removed since
/// (`status --all` lists them, marked, so they can be removed).
pub fn list_all_tasks(state_root: &Path, key: &str) -> Vec<Vec<TaskRecord>> {
    let root = tasks_root(state_root, key);
    let mut out: Vec<Vec<TaskRecord>> = subfolders(&root)
        .filter_map(|e| load_folder(&e.path()).ok())
        .collect();
    out.sort_by(|a, b| a[0].task.cmp(&b[0].task));
    out
}

/// The context file's `sandbox` of a task's `records` (one per repository; spec-note 0437).
pub fn sandbox_of(records: &[TaskRecord]) -> Sandbox {
    let record = &records[0];
    let multi = record.workspace.is_some();
    let results = if multi {
        format!(
            "in each repository, commit your work to its branch `{}`: when you end, devcell fetches that branch (and only it) of each repository into the user's repository as `{}`; nothing else in these clones leaves them, uncommitted changes included",
            record.branch,
            fetched_ref_of(&record.task)
        )
    } else {
        format!(
            "commit your work to the branch `{}`: when you end, devcell fetches that branch (and only it) into the user's repository as `{}`; nothing else in this clone leaves it, uncommitted changes included",
            record.branch,
            fetched_ref_of(&record.task)
        )
    };
    Sandbox {
        isolation: "clone".into(),
        task: record.task.clone(),
        branch: record.branch.clone(),
        base: record.base.clone(),
        fetched_ref: fetched_ref_of(&record.task),
        bases: if multi {
            records
                .iter()
                .map(|r| (r.repo.clone(), r.base.clone()))
                .collect()
        } else {
            Default::default()
        },
        results,
        mail: None,
        source: (!multi).then(|| record.source.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_the_agent_which_wins_over_handoff() {
        use crate::handoff::plan::HandoffOptions;
        use crate::settings::{AgentSettings, Isolation};
        let mut opts = HandoffOptions {
            agent: "a".into(),
            ..HandoffOptions::default()
        };
        assert_eq!(opts.effective_isolation(), Isolation::Worktree);
        opts.settings.handoff.isolation = Isolation::Clone;
        assert_eq!(opts.effective_isolation(), Isolation::Clone);
        opts.settings.agents.insert(
            "a".into(),
            AgentSettings {
                isolation: Some(Isolation::Worktree),
                ..AgentSettings::default()
            },
        );
        assert_eq!(opts.effective_isolation(), Isolation::Worktree);
        opts.isolation = Some(Isolation::Clone);
        assert_eq!(opts.effective_isolation(), Isolation::Clone);
    }

    #[test]
    fn task_names() {
        for ok in ["a", "fix-login", "T.1_x", &"a".repeat(64)] {
            assert!(valid_task_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-x",
            ".x",
            "a/b",
            "a..b",
            "x.lock",
            "x.",
            "a b",
            &"a".repeat(65),
            "é",
        ] {
            assert!(!valid_task_name(bad), "{bad}");
        }
        let derived = derive_task_name("co/dex agent");
        assert!(valid_task_name(&derived), "{derived}");
        assert!(derived.starts_with("codexagent-"), "{derived}");
    }
}
