//! Git entries a container made in the workspace are moved out of the host's git's way
//! (spec-note 0448; attack findings N7, N15; issue 25, class 1). Binds cover only the git
//! entries that existed when the container started (spec-notes 0436, 0446): a lifecycle hook
//! or an agent can still create `src/.git` in any folder (or lay a folder out as a git
//! directory), and the user's next `git status` there on the host runs its `core.fsmonitor`.
//! No bind can keep a name from appearing in every folder of the workspace, so when the
//! container's work ends (after `up`'s hooks, at a handoff's end) devcell walks the workspace
//! again and moves each git entry that was not there at the start, and that the user did not
//! accept (`--allow created-git:<path>`), into its own state:
//! `<state>/quarantine/<stamp>/<path>`. Nothing is deleted: the user checks it there and moves
//! it back if it is theirs.
//!
//! A `.git` entry is moved whole. A folder laid out as a git directory under another name
//! (attack L2: `HEAD` with `objects/` and `refs/` in a tracked folder) keeps the user's files:
//! only its `HEAD` is moved, which is what makes git take the folder as a git directory.
//! Each move is made relative to folder handles opened without following a link, so a folder
//! the container swaps for a link while devcell moves never sends a host file elsewhere into
//! quarantine. When the state folder is on another file system than the workspace (a rename
//! cannot cross it), the entry is renamed in its own folder to
//! `<name>.devcell-quarantine-<stamp>`, a name git never reads by itself.
//!
//! Each quarantine that moved something is recorded beside its folder,
//! `<state>/quarantine/<stamp>.json` ([`Record`]: the workspace, when, each entry and where it
//! went), so `status` can list what is still there for a workspace ([`still_present`]) to a
//! user who missed the one-time warning (spec-note 0661).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::security::git_entries::{self, EntryKind};

/// One git entry moved aside.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quarantined {
    /// The entry, relative to the workspace root (`src/.git`; `src/HEAD` for a folder laid
    /// out as a git directory).
    pub path: String,
    /// Where it is now (a host path).
    pub moved_to: PathBuf,
}

impl Quarantined {
    /// What was moved, where to, and what to do.
    pub fn message(&self) -> String {
        format!(
            "`{}` was created in the workspace by the container (it was not there when the container's work started) and git on this host would have read it (`core.fsmonitor`, hooks run as you); devcell moved it to `{}`; check it there, and if it is yours move it back and accept it with `--allow created-git:{}`",
            self.path,
            self.moved_to.display(),
            self.path
        )
    }
}

/// What [`quarantine_new`] did: the entries moved and those it could not move (with why).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Each entry moved aside.
    pub moved: Vec<Quarantined>,
    /// Each new entry left in place, with the reason (the user must not run git there).
    pub failed: Vec<(String, String)>,
    /// The folders the walk did not look into whole (relative; `*` for the whole workspace):
    /// past its bounds or unreadable, so a git entry the container made there is not known
    /// (attack O9).
    pub unwalked: Vec<String>,
}

impl Outcome {
    /// One warning line per moved or unmovable entry, naming where it went and what to do.
    pub fn messages(&self) -> Vec<String> {
        let moved = self
            .moved
            .iter()
            .map(|q| format!("git_dir_quarantined: {}", q.message()));
        let failed = self.failed.iter().map(|(rel, why)| {
            format!(
                "git_dir_created: `{rel}` was created in the workspace by the container and devcell could not move it aside ({why}): do not run git in it or below it before checking it (`git config --file <.git>/config --list`)"
            )
        });
        let unwalked = self
            .unwalked_message()
            .map(|m| format!("git_walk_incomplete: {m}"));
        moved.chain(failed).chain(unwalked).collect()
    }

    /// The warning for the folders the walk did not look into (without its code), if any.
    pub fn unwalked_message(&self) -> Option<String> {
        (!self.unwalked.is_empty()).then(|| {
            let shown: Vec<String> = self
                .unwalked
                .iter()
                .take(git_entries::MAX_CUT_SHOWN)
                .map(|rel| format!("`{rel}`"))
                .collect();
            let more = self.unwalked.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(
                "devcell could not look for git directories the container made in {}{more} (past the walk's bounds, or unreadable): do not run git in or below them before checking them (`find <folder> -name .git`)",
                shown.join(", ")
            )
        })
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.failed.is_empty() && self.unwalked.is_empty()
    }
}

/// Walks `root` now ([`git_entries::find`]) and moves aside each git entry not in `before`
/// (the relative paths of the entries found at the start) and not kept by `keep` (the
/// `created-git:` grants), into `into` (a fresh folder of devcell's state, [`folder_in`];
/// created when needed; `None` when there is no state folder: then each is renamed in its own
/// folder). See the module docs. Never fails: what cannot be moved is in
/// [`Outcome::failed`].
pub fn quarantine_new(
    root: &Path,
    before: &BTreeSet<String>,
    keep: &dyn Fn(&str) -> bool,
    into: Option<&Path>,
) -> Outcome {
    let mut out = Outcome::default();
    let walk = git_entries::find(root);
    out.unwalked = unwalked(&walk);
    let stamp = into
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| stamp().to_string());
    for entry in walk.entries {
        if before.contains(&entry.rel) || keep(&entry.rel) {
            continue;
        }
        // a folder laid out as a git directory keeps its files: only `HEAD` goes
        let rel = match entry.kind {
            EntryKind::DotGit => entry.rel.clone(),
            EntryKind::GitDir if entry.rel == "." => "HEAD".to_string(),
            EntryKind::GitDir => format!("{}/HEAD", entry.rel),
        };
        match move_aside(root, &rel, into, &stamp) {
            Ok(moved_to) => out.moved.push(Quarantined {
                path: rel,
                moved_to,
            }),
            Err(why) => out.failed.push((rel, why)),
        }
    }
    if let Some(into) = into
        && !out.moved.is_empty()
    {
        // best effort: the warning is said in any case; without the record `status` cannot
        // list the entries again
        let _ = write_record(root, into, &out.moved);
    }
    out
}

/// A quarantine's record, `<state>/quarantine/<stamp>.json` beside its folder: what `status`
/// lists of a workspace ([`still_present`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The workspace root the entries were in (canonical when it resolved).
    pub workspace: PathBuf,
    /// When they were moved (RFC 3339, UTC).
    pub at: String,
    /// Each entry moved, and where to.
    pub entries: Vec<Quarantined>,
}

/// A quarantined git entry still where devcell moved it, as `status` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StillQuarantined {
    /// The entry, relative to the workspace root (where it was).
    pub path: String,
    /// Where it is now (a host path).
    pub moved_to: PathBuf,
    /// When it was moved (RFC 3339, UTC).
    pub at: String,
}

/// At most this many quarantine records are read by [`still_present`] (the newest by name,
/// which starts with the seconds since the epoch): `status` stays bounded however many
/// quarantines a state folder holds (issue 25, class 6).
pub const MAX_RECORDS_READ: usize = 512;

/// A record larger than this is not read (devcell writes a few hundred bytes per entry).
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// `<into>.json`: the record of the quarantine folder `into`.
fn record_path(into: &Path) -> PathBuf {
    let mut name = into.file_name().unwrap_or_default().to_os_string();
    name.push(".json");
    into.with_file_name(name)
}

/// Writes the record of `moved` (entries of the workspace `root`) beside `into`.
fn write_record(root: &Path, into: &Path, moved: &[Quarantined]) -> std::io::Result<()> {
    let record = Record {
        workspace: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        entries: moved.to_vec(),
    };
    if let Some(parent) = into.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let bytes = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
    std::fs::write(record_path(into), bytes)
}

/// The entries quarantined from the workspace `workspace` (compared canonical) that are still
/// where devcell moved them (`moved_to` exists, as a link or otherwise), read from the records
/// below `state_root` (at most [`MAX_RECORDS_READ`], the newest), oldest first. An unreadable
/// or malformed record is skipped: this is a reminder, the warning was given when they moved.
pub fn still_present(state_root: &Path, workspace: &Path) -> Vec<StillQuarantined> {
    use std::io::Read as _;
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let Ok(dir) = std::fs::read_dir(state_root.join("quarantine")) else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort_by_key(|p| std::cmp::Reverse(sort_key(p)));
    names.truncate(MAX_RECORDS_READ);
    let mut out = Vec::new();
    for path in names {
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_RECORD_BYTES + 1).read_to_end(&mut bytes));
        if read.is_err() || bytes.len() as u64 > MAX_RECORD_BYTES {
            continue;
        }
        let Ok(record) = serde_json::from_slice::<Record>(&bytes) else {
            continue;
        };
        if record.workspace != workspace {
            continue;
        }
        out.extend(
            record
                .entries
                .into_iter()
                .filter(|q| std::fs::symlink_metadata(&q.moved_to).is_ok())
                .map(|q| StillQuarantined {
                    path: q.path,
                    moved_to: q.moved_to,
                    at: record.at.clone(),
                }),
        );
    }
    out.sort_by(|a, b| (&a.at, &a.path).cmp(&(&b.at, &b.path)));
    out
}

/// A record's order: its stamp's seconds since the epoch (`<secs>-<pid>.json`), then its name.
fn sort_key(path: &Path) -> (u64, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let secs = name
        .split(['-', '.'])
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (secs, name)
}

/// What `walk` did not look into: its cut and unlisted folders, or `*` when it was cut in
/// more folders than it names.
fn unwalked(walk: &git_entries::GitEntries) -> Vec<String> {
    let mut folders: Vec<String> = walk.cut.iter().chain(&walk.unlisted).cloned().collect();
    if walk.truncated && walk.cut.is_empty() {
        folders.insert(0, "*".to_string());
    }
    folders.sort();
    folders.dedup();
    folders
}

/// A fresh quarantine folder below `state_root`: `quarantine/<seconds since the epoch>-<pid>`
/// (not created yet).
pub fn folder_in(state_root: &Path) -> PathBuf {
    state_root.join("quarantine").join(stamp())
}

/// `<seconds since the epoch>-<pid>`.
fn stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{secs}-{}", std::process::id())
}

/// Moves `rel` (below `root`) to `into/<rel>`, every folder on the way opened without
/// following a link; across file systems (or with no `into`), renames it in its own folder
/// instead.
fn move_aside(root: &Path, rel: &str, into: Option<&Path>, stamp: &str) -> Result<PathBuf, String> {
    let parts: Vec<&OsStr> = Path::new(rel)
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(format!("`{rel}` is not a plain relative path")),
        })
        .collect::<Result<_, _>>()?;
    let (name, folders) = parts.split_last().ok_or("an empty path")?;
    let errno = |what: &str, e: rustix::io::Errno| format!("{what}: {}", std::io::Error::from(e));
    let mut dir: OwnedFd = rustix::fs::open(
        root,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| errno("cannot open the workspace folder", e))?;
    for folder in folders {
        dir = rustix::fs::openat(
            &dir,
            *folder,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| errno("a folder on its way cannot be opened or is a link", e))?;
    }
    let beside = || {
        let mut beside = name.to_os_string();
        beside.push(format!(".devcell-quarantine-{stamp}"));
        rustix::fs::renameat(&dir, *name, &dir, beside.as_os_str())
            .map_err(|e| errno("cannot rename it", e))?;
        Ok(root.join(rel).with_file_name(beside))
    };
    let Some(into) = into else {
        return beside();
    };
    let target = into.join(rel);
    let target_dir = target.parent().unwrap_or(into);
    std::fs::create_dir_all(target_dir)
        .map_err(|e| format!("cannot create `{}`: {e}", target_dir.display()))?;
    let target_fd = rustix::fs::open(
        target_dir,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| errno("cannot open the quarantine folder", e))?;
    match rustix::fs::renameat(&dir, *name, &target_fd, *name) {
        Ok(()) => Ok(target),
        Err(rustix::io::Errno::XDEV) => beside(),
        Err(e) => Err(errno("cannot move it", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attacks N7, N15: a `.git` made in a tracked folder and a folder laid out as a git
    /// directory after the start are moved into the quarantine folder (the folder's own files
    /// stay); what was there at the start and what the user accepted stay where they are.
    #[test]
    fn new_git_entries_are_moved_aside_and_old_or_accepted_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        for d in [".git/objects", "tools/.git", "src", "kept/.git", "lib"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let before: BTreeSet<String> = git_entries::find(&root)
            .entries
            .into_iter()
            .map(|e| e.rel)
            .collect();
        // what the container makes
        std::fs::create_dir_all(root.join("src/.git/objects")).unwrap();
        std::fs::write(root.join("src/.git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        std::fs::write(root.join("src/main.c"), "int main;\n").unwrap();
        for d in ["objects", "refs"] {
            std::fs::create_dir_all(root.join("lib").join(d)).unwrap();
        }
        std::fs::write(root.join("lib/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(root.join("mine/.git")).unwrap();
        let into = folder_in(&tmp.path().join("state"));
        let out = quarantine_new(&root, &before, &|rel| rel == "mine/.git", Some(&into));
        assert!(out.failed.is_empty(), "{:?}", out.failed);
        let mut moved: Vec<&str> = out.moved.iter().map(|q| q.path.as_str()).collect();
        moved.sort();
        assert_eq!(moved, ["lib/HEAD", "src/.git"]);
        assert!(!root.join("src/.git").exists());
        assert!(root.join("src/main.c").exists());
        assert!(into.join("src/.git/config").is_file());
        assert!(into.join("lib/HEAD").is_file());
        assert!(!git_entries::is_git_directory(&root.join("lib")));
        for kept in [".git", "tools/.git", "kept/.git", "mine/.git"] {
            assert!(root.join(kept).is_dir(), "{kept}");
        }
        assert_eq!(out.messages().len(), 2);
        assert!(out.messages()[0].contains("--allow created-git:"));
    }

    /// A folder on the way that is a link is never followed: the entry is left and named.
    /// Spec-note 0661: a quarantine that moved something is recorded, and `status` lists
    /// what is still there for that workspace only: an entry moved back (or removed) by the
    /// user is not listed, nor another workspace's.
    #[test]
    fn what_is_still_in_quarantine_is_listed_for_its_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let other = tmp.path().join("other");
        let state = tmp.path().join("state");
        for root in [&ws, &other] {
            std::fs::create_dir_all(root.join("a/.git")).unwrap();
            std::fs::create_dir_all(root.join("b/.git")).unwrap();
        }
        assert!(still_present(&state, &ws).is_empty(), "no record yet");
        let into = state.join("quarantine").join("100-1");
        let out = quarantine_new(&ws, &BTreeSet::new(), &|_| false, Some(&into));
        assert_eq!(out.moved.len(), 2, "{out:?}");
        let into_other = state.join("quarantine").join("101-1");
        quarantine_new(&other, &BTreeSet::new(), &|_| false, Some(&into_other));
        // the user moved `b/.git` back
        std::fs::rename(into.join("b/.git"), ws.join("b/.git")).unwrap();
        let listed = still_present(&state, &ws);
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].path, "a/.git");
        assert_eq!(listed[0].moved_to, into.join("a/.git"));
        assert!(listed[0].at.ends_with('Z'), "{}", listed[0].at);
        // a malformed record is skipped, not an error
        std::fs::write(state.join("quarantine").join("102-1.json"), b"{").unwrap();
        assert_eq!(still_present(&state, &ws), listed);
    }

    #[test]
    fn a_link_on_the_way_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join(".git")).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let into = folder_in(&tmp.path().join("state"));
        std::os::unix::fs::symlink(&elsewhere, root.join("sub")).unwrap();
        let err = move_aside(&root, "sub/.git", Some(&into), "1").unwrap_err();
        assert!(err.contains("link"), "{err}");
        assert!(elsewhere.join(".git").is_dir());
    }

    /// Attack O9: a `.git` the container makes past the walk's depth bound is not found, and
    /// the walk says so: the outcome names the folder it did not enter, as a warning.
    #[test]
    fn a_walk_cut_by_its_bounds_is_said() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let before: BTreeSet<String> = [".git".to_string()].into();
        let deep: PathBuf = (0..git_entries::MAX_DEPTH + 2).map(|_| "d").collect();
        std::fs::create_dir_all(root.join(&deep).join(".git")).unwrap();
        let into = folder_in(&tmp.path().join("state"));
        let out = quarantine_new(&root, &before, &|_| false, Some(&into));
        assert!(out.moved.is_empty(), "{:?}", out.moved);
        assert!(!out.unwalked.is_empty());
        assert!(!out.is_empty());
        let messages = out.messages();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(
            messages[0].starts_with("git_walk_incomplete:"),
            "{messages:?}"
        );
        assert!(messages[0].contains("`d/d/"), "{messages:?}");
        // a walk within its bounds says nothing
        std::fs::remove_dir_all(root.join("d")).unwrap();
        let out = quarantine_new(&root, &before, &|_| false, Some(&into));
        assert!(out.is_empty(), "{out:?}");
    }
}
