//! What devcell takes from a repository's host git directories for its container git directory
//! (the `objects` folder it mounts; the refs, `packed-refs`, `info`, `shallow`, `HEAD` and
//! index it reads and copies; the `commondir` and alternates files git reads on the way),
//! judged before any container is made (attack M11, spec-note 0436).
//!
//! The repository's git directory and common directory are canonical (judged by
//! `handoff::repository`, a `gitdir:` request when outside the workspace), but what is inside
//! them is whatever was written there, by the user or by an agent of an earlier session: an
//! `objects` that is a symbolic link to another repository's objects (or to `~`) was bound
//! into the container as that folder, and a `refs` link copied another repository's branches
//! into the container git directory. The engine and git follow links; devcell does not: each
//! such path must be the kind of entry git makes there and must resolve to itself
//! ([`crate::security::host_path::resolve`]), the rule the reuse check applies to an existing
//! container's binds (a bind's resolved source against what devcell asked for), applied
//! before a container is made. No grant makes a linked one acceptable: the fix is the folder
//! itself in its place.

use std::path::{Path, PathBuf};

use super::repo_git::RepoGit;
use super::{ContainerGitError, Result};

/// What an entry git makes in a git directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Folder,
    File,
}

/// Every path of `g`'s host git directories devcell mounts or reads for its container git
/// directory: `(path, kind, required)`.
fn paths(g: &RepoGit) -> Vec<(PathBuf, Kind, bool)> {
    let common = |name: &str, kind, required| (g.common_dir.join(name), kind, required);
    let own = |name: &str, kind| (g.git_dir.join(name), kind, false);
    vec![
        common("objects", Kind::Folder, true),
        common("objects/info/alternates", Kind::File, false),
        common("refs", Kind::Folder, false),
        common("packed-refs", Kind::File, false),
        common("info", Kind::Folder, false),
        common("shallow", Kind::File, false),
        own("commondir", Kind::File),
        own("HEAD", Kind::File),
        own("index", Kind::File),
        own("shallow", Kind::File),
    ]
}

/// Checks every path of `g`'s host git directories devcell mounts or reads ([`paths`]): each
/// present is the kind of entry git makes there, not a symbolic link, and resolves to itself
/// (no link on the way: it is inside the repository's own git directory); `objects` is
/// present; nothing below `refs` is a link.
///
/// Errors: [`ContainerGitError::NotConfined`] naming the path and what it is.
pub(super) fn check(g: &RepoGit) -> Result<()> {
    let refuse = |path: &Path, why: String| ContainerGitError::NotConfined {
        repo: g.repo.clone(),
        path: path.to_path_buf(),
        why,
    };
    for (path, kind, required) in paths(g) {
        let meta = match path.symlink_metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => continue,
            Err(e) => return Err(refuse(&path, format!("cannot be read ({e})"))),
        };
        if let Some(why) = not_git_made(&path, &meta, kind) {
            return Err(refuse(&path, why));
        }
        match crate::security::host_path::resolve(&path) {
            Ok(resolved) if resolved == path => {}
            Ok(resolved) => {
                return Err(refuse(
                    &path,
                    format!(
                        "is reached through a symbolic link: it is `{}`, not inside the repository's git directory",
                        resolved.display()
                    ),
                ));
            }
            Err(e) => return Err(refuse(&path, format!("cannot be resolved ({e})"))),
        }
    }
    no_link_below(&g.common_dir.join("refs")).map_err(|(path, why)| refuse(&path, why))
}

/// Why the entry at `path` (its `meta`, not followed) is not what git makes there, if it is not.
fn not_git_made(path: &Path, meta: &std::fs::Metadata, kind: Kind) -> Option<String> {
    let t = meta.file_type();
    if t.is_symlink() {
        let target = std::fs::read_link(path)
            .map(|t| format!(" to `{}`", t.display()))
            .unwrap_or_default();
        return Some(format!("is a symbolic link{target}"));
    }
    match kind {
        Kind::Folder if !t.is_dir() => Some("is not a folder".into()),
        Kind::File if !t.is_file() => Some("is not a regular file".into()),
        _ => None,
    }
}

/// The first entry below the folder `dir` (not following links) that is neither a folder nor
/// a regular file (a ref that is a link names another repository's ref file), with what it
/// is; none when `dir` is absent.
fn no_link_below(dir: &Path) -> std::result::Result<(), (PathBuf, String)> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && folder == dir => return Ok(()),
            Err(e) => return Err((folder, format!("cannot be listed ({e})"))),
        };
        for entry in entries {
            let entry = entry.map_err(|e| (folder.clone(), format!("cannot be listed ({e})")))?;
            let path = entry.path();
            let meta = path
                .symlink_metadata()
                .map_err(|e| (path.clone(), format!("cannot be read ({e})")))?;
            let t = meta.file_type();
            if t.is_dir() {
                stack.push(path);
            } else if let Some(why) = not_git_made(&path, &meta, Kind::File) {
                return Err((path, why));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository's git directory `<tmp>/ws/.git` as git makes it, and its [`RepoGit`].
    fn repo(tmp: &Path) -> RepoGit {
        let work_tree = tmp.join("ws");
        let git_dir = work_tree.join(".git");
        for d in [
            "objects/info",
            "objects/pack",
            "refs/heads",
            "refs/tags",
            "info",
        ] {
            std::fs::create_dir_all(git_dir.join(d)).unwrap();
        }
        std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            git_dir.join("refs/heads/main"),
            format!("{}\n", "a".repeat(40)),
        )
        .unwrap();
        std::fs::write(git_dir.join("packed-refs"), "").unwrap();
        std::fs::write(git_dir.join("index"), "DIRC").unwrap();
        RepoGit::plain(
            "ws",
            &work_tree,
            "/workspaces/ws",
            tmp.join("state/1"),
            "/run/devcell/git/1",
        )
    }

    /// A folder outside the repository holding a private file (another repository's objects,
    /// the home's `.ssh`).
    fn secret(tmp: &Path) -> PathBuf {
        let secret = tmp.join("secret");
        std::fs::create_dir_all(secret.join("heads")).unwrap();
        std::fs::write(secret.join("id_rsa"), "PRIVATE").unwrap();
        std::fs::write(secret.join("heads/main"), format!("{}\n", "b".repeat(40))).unwrap();
        secret
    }

    /// Attack M11: a repository as git makes it passes; an `objects` or `refs` that is a
    /// symbolic link out of it, a link to a file as `packed-refs`, `commondir` or the
    /// alternates, a link inside `refs`, a missing `objects` are each refused, naming the path.
    #[test]
    fn a_link_where_devcell_mounts_or_reads_git_data_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(tmp.path()).unwrap();
        let g = repo(&tmp);
        check(&g).unwrap();
        let secret = secret(&tmp);
        let git = g.git_dir.clone();
        let swap = |name: &str, to: &Path| {
            let path = git.join(name);
            let aside = tmp.join("aside");
            std::fs::rename(&path, &aside).unwrap();
            std::os::unix::fs::symlink(to, &path).unwrap();
            let e = check(&g).unwrap_err();
            std::fs::remove_file(&path).unwrap();
            std::fs::rename(&aside, &path).unwrap();
            e
        };
        for name in ["objects", "refs", "info"] {
            let e = swap(name, &secret);
            assert!(
                matches!(&e, ContainerGitError::NotConfined { path, why, .. }
                    if *path == git.join(name) && why.contains("symbolic link")),
                "{e}"
            );
            assert!(e.to_string().contains(&secret.display().to_string()), "{e}");
        }
        for name in ["packed-refs", "index", "HEAD"] {
            let e = swap(name, &secret.join("id_rsa"));
            assert!(
                matches!(&e, ContainerGitError::NotConfined { path, .. } if *path == git.join(name)),
                "{e}"
            );
        }
        check(&g).unwrap();
        // files that only sometimes exist
        for name in ["commondir", "shallow", "objects/info/alternates"] {
            std::os::unix::fs::symlink(secret.join("id_rsa"), git.join(name)).unwrap();
            let e = check(&g).unwrap_err();
            assert!(
                matches!(&e, ContainerGitError::NotConfined { path, .. } if *path == git.join(name)),
                "{e}"
            );
            std::fs::remove_file(git.join(name)).unwrap();
        }
        // a ref, or a folder of refs, that is a link to another repository's
        std::os::unix::fs::symlink(secret.join("heads/main"), git.join("refs/heads/x")).unwrap();
        let e = check(&g).unwrap_err();
        assert!(
            matches!(&e, ContainerGitError::NotConfined { path, .. } if *path == git.join("refs/heads/x")),
            "{e}"
        );
        std::fs::remove_file(git.join("refs/heads/x")).unwrap();
        std::os::unix::fs::symlink(secret.join("heads"), git.join("refs/tags/t")).unwrap();
        assert!(check(&g).is_err());
        std::fs::remove_file(git.join("refs/tags/t")).unwrap();
        check(&g).unwrap();
        // an `objects` that is a file, or absent
        std::fs::rename(git.join("objects"), tmp.join("objects")).unwrap();
        assert!(check(&g).is_err());
        std::fs::write(git.join("objects"), "").unwrap();
        assert!(check(&g).is_err());
    }

    /// Attack M11: the git directory reached through a link above it (a common directory whose
    /// `objects` is a real folder of another repository) resolves elsewhere: refused, naming
    /// where it leads.
    #[test]
    fn a_git_path_reached_through_a_link_above_it_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let tmp = std::fs::canonicalize(tmp.path()).unwrap();
        let mut g = repo(&tmp);
        std::os::unix::fs::symlink(&g.git_dir, tmp.join("alias")).unwrap();
        g.common_dir = tmp.join("alias");
        let e = check(&g).unwrap_err();
        assert!(
            matches!(&e, ContainerGitError::NotConfined { path, why, .. }
                if *path == tmp.join("alias/objects") && why.contains("reached through a symbolic link")),
            "{e}"
        );
    }
}
