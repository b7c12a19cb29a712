//! The per-task clone (spec-note 0437): a repository devcell makes in the task's folder that
//! borrows the mirror's objects (`objects/info/alternates`, as `git clone --shared` or
//! `--reference` would), holds only the task branch `devcell/<task>` at the base commit, and is
//! then made independent of the mirror (`git repack -a -d`, the alternates file removed,
//! `git fsck --connectivity-only`) before its working files are checked out, so a later gc or
//! removal of the mirror cannot break it. Its configuration is git's default: no remote, no
//! path of the host in it.

use crate::handoff::failure::GitFailed;
use std::path::Path;

use super::source::Source;
use super::{Result, TaskError, git, io};

/// Makes the clone at `clone` (which must not exist) from `mirror` for `source`'s base, on the
/// branch `branch`; gives it to the source repository's owner when devcell is root. On error
/// the partial clone is removed.
///
/// Errors: a failing host `git`, files that cannot be written.
pub fn make(mirror: &Path, source: &Source, clone: &Path, branch: &str) -> Result<()> {
    let made = make_inner(mirror, source, clone, branch);
    if made.is_err() {
        let _ = std::fs::remove_dir_all(clone);
    }
    made
}

fn make_inner(mirror: &Path, source: &Source, clone: &Path, branch: &str) -> Result<()> {
    let parent = clone.parent().unwrap_or(Path::new("/"));
    let format = format!("--object-format={}", source.object_format);
    git(
        parent,
        None,
        &[],
        &[
            "init",
            "--quiet",
            "--template=",
            &format,
            "--initial-branch",
            branch,
            &clone.to_string_lossy(),
        ],
    )?;
    let dot_git = clone.join(".git");
    let alternates = dot_git.join("objects/info/alternates");
    std::fs::create_dir_all(dot_git.join("objects/info")).map_err(io(&dot_git))?;
    std::fs::write(
        &alternates,
        format!("{}\n", mirror.join("objects").display()),
    )
    .map_err(io(&alternates))?;
    let full = format!("refs/heads/{branch}");
    let in_clone = |args: &[&str]| git(clone, Some(&dot_git), &[], args);
    in_clone(&["update-ref", &full, &source.base])?;
    in_clone(&["symbolic-ref", "HEAD", &full])?;
    // independence: every object the branch reaches copied into the clone's own pack
    in_clone(&["repack", "-a", "-d", "-q"])?;
    std::fs::remove_file(&alternates).map_err(io(&alternates))?;
    in_clone(&[
        "fsck",
        "--connectivity-only",
        "--no-dangling",
        "--no-progress",
    ])
    .map_err(|e| {
        TaskError::Git(GitFailed {
            dir: clone.to_path_buf(),
            args: "fsck --connectivity-only (the clone is not independent of the mirror)".into(),
            stderr: e.to_string(),
        })
    })?;
    // `GIT_DIR` set and `-C <clone>`: the clone is the work tree; no filter or hook is
    // configured in it, so checking out runs nothing
    in_clone(&["reset", "--hard", "--quiet"])?;
    // the reflogs name the host account and host name (git's default identity): not the
    // container's to read
    let logs = dot_git.join("logs");
    if logs.exists() {
        std::fs::remove_dir_all(&logs).map_err(io(&logs))?;
    }
    give_to_owner(clone, &source.work_tree)
}

/// Gives the fresh clone (no container has seen it yet) to the owner of `owner_of` when devcell
/// is root: the container user is mapped to that owner (spec-note 0250).
fn give_to_owner(clone: &Path, owner_of: &Path) -> Result<()> {
    let mut stack = vec![clone.to_path_buf()];
    crate::config::ownership::hand_over(clone, owner_of).map_err(io(clone))?;
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).map_err(io(&folder))?.flatten() {
            let path = entry.path();
            crate::config::ownership::hand_over(&path, owner_of).map_err(io(&path))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    Ok(())
}
