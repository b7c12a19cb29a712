//! The container git directories of a handoff ([`repo_gits`]), the mounts that give them to
//! the container ([`mounts`]) and the host paths those mounts hide ([`covers`]).

use std::path::{Path, PathBuf};

use super::repo_git::{CONTAINER_BASE, RepoGit, slot_id};
use super::{Result, submodules};

/// The container git directories of a handoff of `ws`, kept under `slots_root` (one folder per
/// repository, named by a hash of its working tree's path): every repository devcell reads
/// (one whose git directory is untrusted and not granted is left out, as it is not mounted;
/// spec-note 0411), and every checked-out submodule of those ([`submodules::expand`]).
///
/// Errors: a submodule devcell cannot cover ([`ContainerGitError::UncoverableSubmodule`](super::ContainerGitError::UncoverableSubmodule));
/// a path of a repository's git directories devcell would mount or read that is a symbolic
/// link or reached through one ([`ContainerGitError::NotConfined`](super::ContainerGitError::NotConfined)).
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
    // what is mounted and read from each host git directory is judged before any container
    // is made (attack M11)
    for g in &gits {
        super::confine::check(g)?;
    }
    Ok(gits)
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
