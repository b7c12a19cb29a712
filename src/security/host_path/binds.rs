//! The bind mounts of one container: sources replaced by what they resolve to
//! ([`resolve_binds`]), read-only overlays kept read-only ([`keep_read_only`]) and covers kept
//! in place ([`keep_covered`]) through every other bind.

use std::path::{Path, PathBuf};

use super::covers::{Cover, Covered, cover_bind};
use super::resolution::resolve;
use crate::engine::{ContainerSpec, MountKind};
use crate::security::error::{Result, SecurityError};

/// One bind source [`resolve_binds`] changed: as written and as resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBind {
    /// The container path.
    pub target: String,
    /// The source as the configuration wrote it.
    pub written: String,
    /// What it resolves to (now the mount's source).
    pub resolved: String,
}

/// Replaces every absolute bind source of `spec` by its resolved path ([`resolve`]), so the
/// policy judges, and the engine mounts, what the source points at rather than the link the
/// repository wrote. Relative sources are left (the policy treats them as outside the
/// workspace). Returns the sources that changed.
///
/// Errors: [`SecurityError::PathUnresolvable`] for a source that cannot be resolved (a link
/// loop, a folder devcell cannot search, a path through procfs): it fails closed, never judged
/// by its written text, since the engine (root, in its own process) would follow it somewhere
/// devcell never saw (spec-note 0400, attacks F1).
pub fn resolve_binds(spec: &mut ContainerSpec) -> Result<Vec<ResolvedBind>> {
    let mut changed = Vec::new();
    for m in spec.mounts.iter_mut().filter(|m| m.kind == MountKind::Bind) {
        let Some(source) = m.source.clone().filter(|s| s.starts_with('/')) else {
            continue;
        };
        let resolved =
            resolve(Path::new(&source)).map_err(|e| SecurityError::PathUnresolvable {
                what: format!("the bind mount source for `{}`", m.target),
                written: PathBuf::from(&source),
                message: e.to_string(),
            })?;
        let resolved = resolved.to_string_lossy().into_owned();
        if resolved != source {
            changed.push(ResolvedBind {
                target: m.target.clone(),
                written: source,
                resolved: resolved.clone(),
            });
            m.source = Some(resolved);
        }
    }
    Ok(changed)
}

/// A host path the command line mounts read-only (the handoff's overlays of each repository's
/// git `config`, `hooks`, `info/`, link files: spec-note 0413; or the user's own
/// `--mount …,readonly`) stays read-only through every other bind of `spec` (spec-note 0413,
/// sixth attacker's review): a read-write bind of a folder holding it gets a read-only overlay
/// of it at the same place below its target, and a bind of it, or of a path inside it, is made
/// read-only. `protected` are the targets of those read-only mounts; bind sources must already
/// be resolved ([`resolve_binds`]). Returns the targets it added or made read-only.
pub fn keep_read_only(spec: &mut ContainerSpec, protected: &[String]) -> Vec<String> {
    let shields: Vec<(PathBuf, String)> = spec
        .mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind && m.read_only && protected.contains(&m.target))
        .filter_map(|m| Some((PathBuf::from(m.source.as_deref()?), m.target.clone())))
        .collect();
    let mut changed = Vec::new();
    let mut overlays: Vec<crate::engine::Mount> = Vec::new();
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Bind && !m.read_only)
    {
        let Some(source) = m.source.as_deref().map(PathBuf::from) else {
            continue;
        };
        if shields.iter().any(|(shield, _)| source.starts_with(shield)) {
            m.read_only = true;
            changed.push(m.target.clone());
            continue;
        }
        for (shield, shield_target) in &shields {
            let Ok(rel) = shield.strip_prefix(&source) else {
                continue;
            };
            let target = format!(
                "{}/{}",
                m.target.trim_end_matches('/'),
                rel.to_string_lossy()
            );
            if target != *shield_target {
                overlays.push(crate::engine::Mount {
                    kind: MountKind::Bind,
                    source: Some(shield.to_string_lossy().into_owned()),
                    target,
                    read_only: true,
                });
            }
        }
    }
    for overlay in overlays {
        if !spec.mounts.iter().any(|m| m.target == overlay.target) {
            changed.push(overlay.target.clone());
            spec.mounts.push(overlay);
        }
    }
    changed
}

/// Keeps every [`Cover`] in place through every other bind of `spec` (sources resolved), read-only
/// or not: a bind whose source holds a covered path gets the cover's bind at the same place
/// below its own target (`/ws2/.git` for a second bind of the workspace at `/ws2`, `/w/ws` for a
/// bind of the workspace's parent); a bind of a covered path, or of a path inside one
/// (`.git/hooks`), shows the cover's counterpart instead, read-only: the container never sees
/// the host's git directory, not even to read its `config` (spec-note 0436). Binds at `skip`
/// (devcell's own) are left as they are. Returns the targets added or changed.
pub fn keep_covered(spec: &mut ContainerSpec, covers: &[Cover], skip: &[String]) -> Vec<String> {
    let mut changed = Vec::new();
    let mut overlays: Vec<crate::engine::Mount> = Vec::new();
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Bind && !skip.contains(&m.target))
    {
        let Some(source) = m.source.as_deref().map(PathBuf::from) else {
            continue;
        };
        match cover_bind(&source, m.read_only, covers) {
            Covered::Redirect(to) => {
                m.source = Some(to.to_string_lossy().into_owned());
                m.read_only = true;
                changed.push(m.target.clone());
            }
            Covered::Overlays(list) => {
                for (rel, from, read_only) in list {
                    overlays.push(crate::engine::Mount {
                        kind: MountKind::Bind,
                        source: Some(from.to_string_lossy().into_owned()),
                        target: format!(
                            "{}/{}",
                            m.target.trim_end_matches('/'),
                            rel.to_string_lossy()
                        ),
                        read_only,
                    });
                }
            }
        }
    }
    for overlay in overlays {
        if !spec.mounts.iter().any(|m| m.target == overlay.target) {
            changed.push(overlay.target.clone());
            spec.mounts.push(overlay);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Mount;
    use crate::security::host_path::confine;
    use crate::security::host_path::fixtures::{places, tree};
    use crate::security::policy::Grants;
    use std::os::unix::fs::symlink;

    /// A bind of `source` at `target`.
    /// Each mount of `spec` as (source, target, read-only).
    fn triples(spec: &ContainerSpec) -> Vec<(String, String, bool)> {
        spec.mounts
            .iter()
            .map(|m| (m.source.clone().unwrap(), m.target.clone(), m.read_only))
            .collect()
    }

    /// One expected (source, target, read-only).
    fn own(source: &str, target: &str, read_only: bool) -> (String, String, bool) {
        (source.to_string(), target.to_string(), read_only)
    }

    fn bind(source: &str, target: &str, read_only: bool) -> Mount {
        Mount {
            kind: MountKind::Bind,
            source: Some(source.into()),
            target: target.into(),
            read_only,
        }
    }

    #[test]
    fn binds_are_rewritten_to_what_they_resolve_to() {
        let (_t, ws, host) = tree();
        symlink(&host, ws.join("out")).unwrap();
        let bind = |s: &str, t: &str| Mount {
            kind: MountKind::Bind,
            source: Some(s.into()),
            target: t.into(),
            read_only: false,
        };
        let mut spec = ContainerSpec {
            mounts: vec![
                bind(&ws.display().to_string(), "/workspace"),
                bind(&ws.join("out").display().to_string(), "/x"),
                bind("relative", "/r"),
            ],
            ..ContainerSpec::default()
        };
        let changed = resolve_binds(&mut spec).unwrap();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].target, "/x");
        assert_eq!(
            spec.mounts[1].source.as_deref(),
            Some(&*host.to_string_lossy())
        );
        assert_eq!(spec.mounts[2].source.as_deref(), Some("relative"));
    }

    /// Attack (spec-note 0400, F1/F2): a bind source devcell cannot resolve (a link loop, a
    /// folder it cannot search, a path through procfs whose links name what the *engine*
    /// sees) is refused, never judged by its written text inside the workspace, and the spec
    /// is left for no engine to mount.
    #[test]
    fn a_bind_whose_resolution_fails_is_refused_not_judged_as_written() {
        let (_t, ws, _host) = tree();
        symlink("loop", ws.join("loop")).unwrap();
        symlink("/proc/self/cwd", ws.join("cwd")).unwrap();
        symlink("/dev/fd/0", ws.join("fd")).unwrap();
        let mut sources = vec![ws.join("loop/x"), ws.join("cwd"), ws.join("fd")];
        sources.push(PathBuf::from("/proc/1/root"));
        if !rustix::process::geteuid().is_root() {
            // the attack's own shape: a link below a folder devcell cannot search
            std::fs::create_dir(ws.join("d")).unwrap();
            symlink("/", ws.join("d/link")).unwrap();
            std::fs::set_permissions(
                ws.join("d"),
                std::os::unix::fs::PermissionsExt::from_mode(0o000),
            )
            .unwrap();
            sources.push(ws.join("d/link"));
        }
        for source in &sources {
            let mut spec = ContainerSpec {
                mounts: vec![Mount {
                    kind: MountKind::Bind,
                    source: Some(source.display().to_string()),
                    target: "/host".into(),
                    read_only: true,
                }],
                ..ContainerSpec::default()
            };
            let err = resolve_binds(&mut spec).unwrap_err();
            assert!(
                matches!(&err, SecurityError::PathUnresolvable { written, .. } if written == source),
                "{source:?}: {err:?}"
            );
            assert!(resolve(source).is_err(), "{source:?}");
            // the judgement of a path devcell reads fails closed the same way
            assert!(
                matches!(
                    confine("x", source, &places(&ws), &Grants::default()),
                    Err(SecurityError::PathUnresolvable { .. })
                ),
                "{source:?}"
            );
        }
        if ws.join("d").exists() {
            std::fs::set_permissions(
                ws.join("d"),
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            )
            .unwrap();
        }
        // nothing on the host was touched: the workspace holds only what the test made
        let mut names: Vec<String> = std::fs::read_dir(&ws)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.retain(|n| n != "d" && n != "sub");
        assert_eq!(names, ["cwd", "fd", "loop"]);
    }

    #[test]
    fn covered_git_dirs_stay_covered_through_every_other_bind() {
        let mut spec = ContainerSpec {
            mounts: vec![
                bind("/h/ws", "/workspace", false),
                bind("/state/git/1/git", "/workspace/.git", false),
                bind("/h/ws/libs/sub", "/workspace/libs/sub", false),
                // the repository's own
                bind("/h/ws", "/ws2", false),
                bind("/h/ws/.git", "/g", false),
                bind("/h/ws/.git/hooks", "/hooks", false),
                bind("/h/ws/.git", "/g-ro", true),
                bind("/h/ws/src", "/src", false),
                bind("/h", "/all", true),
                bind("/h/ws/libs/sub/x", "/x", false),
            ],
            ..ContainerSpec::default()
        };
        let folder = |p: &str| Cover {
            covered: p.into(),
            source: p.into(),
            read_only: false,
            folder: true,
        };
        let covers = [
            Cover {
                covered: "/h/ws/.git".into(),
                source: "/state/git/1/git".into(),
                read_only: false,
                folder: false,
            },
            folder("/h/ws"),
            folder("/h/ws/libs/sub"),
        ];
        let skip = ["/workspace", "/workspace/.git", "/workspace/libs/sub"].map(String::from);
        let changed = keep_covered(&mut spec, &covers, &skip);
        let got = triples(&spec);
        assert_eq!(
            got,
            [
                own("/h/ws", "/workspace", false),
                own("/state/git/1/git", "/workspace/.git", false),
                own("/h/ws/libs/sub", "/workspace/libs/sub", false),
                own("/h/ws", "/ws2", false),
                // a bind of the covered `.git`, or inside it, read-only or not: the container
                // git directory's counterpart, read-only (the host `config` is never read)
                own("/state/git/1/git", "/g", true),
                own("/state/git/1/git/hooks", "/hooks", true),
                own("/state/git/1/git", "/g-ro", true),
                // inside a folder bound on itself: ordinary content
                own("/h/ws/src", "/src", false),
                own("/h", "/all", true),
                own("/h/ws/libs/sub/x", "/x", false),
                // the second bind of the workspace gets the same covers
                own("/state/git/1/git", "/ws2/.git", false),
                own("/h/ws/libs/sub", "/ws2/libs/sub", false),
                // a read-only bind above the workspace too, read-only (nothing can be
                // renamed through it: no folder cover needed)
                own("/state/git/1/git", "/all/ws/.git", true),
            ]
        );
        assert_eq!(
            changed,
            [
                "/g",
                "/hooks",
                "/g-ro",
                "/ws2/.git",
                "/ws2/libs/sub",
                "/all/ws/.git",
            ]
        );
    }

    #[test]
    fn read_only_overlays_cover_every_other_bind_of_their_folders() {
        let mut spec = ContainerSpec {
            mounts: vec![
                bind("/h/ws", "/workspace", false),
                bind("/h/ws/.git/config", "/workspace/.git/config", true),
                bind("/h/ws/.git/hooks", "/workspace/.git/hooks", true),
                // the repository's own
                bind("/h/ws", "/ws2", false),
                bind("/h/ws/.git", "/g/", false),
                bind("/h/ws/.git/hooks/pre-commit", "/hook", false),
                bind("/h/ws/src", "/src", false),
                bind("/h/wsx", "/other", false),
                Mount {
                    kind: MountKind::Volume,
                    source: Some("v".into()),
                    target: "/v".into(),
                    read_only: false,
                },
            ],
            ..ContainerSpec::default()
        };
        let protected = [
            "/workspace/.git/config".to_string(),
            "/workspace/.git/hooks".into(),
        ];
        let changed = keep_read_only(&mut spec, &protected);
        let got = triples(&spec);
        assert_eq!(
            got,
            [
                own("/h/ws", "/workspace", false),
                own("/h/ws/.git/config", "/workspace/.git/config", true),
                own("/h/ws/.git/hooks", "/workspace/.git/hooks", true),
                own("/h/ws", "/ws2", false),
                own("/h/ws/.git", "/g/", false),
                own("/h/ws/.git/hooks/pre-commit", "/hook", true),
                own("/h/ws/src", "/src", false),
                own("/h/wsx", "/other", false),
                own("v", "/v", false),
                own("/h/ws/.git/config", "/ws2/.git/config", true),
                own("/h/ws/.git/hooks", "/ws2/.git/hooks", true),
                own("/h/ws/.git/config", "/g/config", true),
                own("/h/ws/.git/hooks", "/g/hooks", true),
            ]
        );
        assert_eq!(changed.len(), 5, "{changed:?}");
        // nothing protected: nothing changes
        let before = spec.clone();
        assert!(keep_read_only(&mut spec, &[]).is_empty());
        assert_eq!(spec, before);
    }
}
