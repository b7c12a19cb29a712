//! The covers and read-only overlays of [`super::binds`] for the services of a resolved
//! Compose model: the volume entries to add to each service (spec-notes 0413, 0436).

use std::path::{Path, PathBuf};

use super::covers::{Cover, Covered, cover_bind};

/// The volume entries (Compose long syntax) to add to each service of a resolved Compose
/// `model` so the read-only `shields` (host source, container target of each read-only bind of
/// the command line: the handoff's git overlays) stay read-only through the services' own
/// binds (spec-note 0413), as [`keep_read_only`](super::keep_read_only) does for one container: a read-write bind
/// (`type: bind`, not `read_only`) whose source holds a shield gets a read-only bind of it at
/// the same place below the volume's target; a bind of a shield, or of a path inside one, gets
/// an entry with the same `target` and `read_only: true` (Compose merges a service's `volumes`
/// by target). `resolve` canonicalises a volume's source (symbolic links followed); the shields'
/// sources must already be canonical. A target the service already mounts something at gets no
/// overlay. Services that need nothing are left out.
pub fn compose_read_only_additions(
    model: &serde_json::Value,
    shields: &[(PathBuf, String)],
    resolve: impl Fn(&Path) -> PathBuf,
) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    let covers: Vec<Cover> = shields
        .iter()
        .map(|(s, _)| Cover {
            covered: s.clone(),
            source: s.clone(),
            read_only: true,
            folder: false,
        })
        .collect();
    compose_cover_additions(model, &covers, resolve)
}

/// [`compose_read_only_additions`] for [`Cover`]s, as [`keep_covered`](super::keep_covered) does for one container:
/// a service's bind (read-only or not) whose source holds a covered path gets the cover's bind
/// below its target (read-only when either is); a bind of a covered path or of a path inside
/// one gets an entry of the same target showing the cover's counterpart, `read_only: true`
/// (Compose merges a service's `volumes` by target; spec-note 0436).
pub fn compose_cover_additions(
    model: &serde_json::Value,
    covers: &[Cover],
    resolve: impl Fn(&Path) -> PathBuf,
) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    use serde_json::{Value, json};
    let mut out = std::collections::BTreeMap::new();
    if covers.is_empty() {
        return out;
    }
    let Some(services) = model.get("services").and_then(Value::as_object) else {
        return out;
    };
    for (name, service) in services {
        let volumes: &[Value] = service
            .get("volumes")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut taken: Vec<String> = volumes
            .iter()
            .filter_map(|v| v.get("target").and_then(Value::as_str))
            .map(|t| t.trim_end_matches('/').to_string())
            .collect();
        let mut added = Vec::new();
        for volume in volumes {
            let (Some(kind), Some(source), Some(target)) = (
                volume.get("type").and_then(Value::as_str),
                volume.get("source").and_then(Value::as_str),
                volume.get("target").and_then(Value::as_str),
            ) else {
                continue;
            };
            // a named volume whose driver options bind a host folder is that bind (attacks F6)
            let (source, backed) = match kind {
                "bind" => (source.to_string(), false),
                "volume" => match bind_backed_source(model, volume) {
                    Some(device) => (device, true),
                    None => continue,
                },
                _ => continue,
            };
            let read_only = volume.get("read_only").and_then(Value::as_bool) == Some(true);
            let resolved = resolve(Path::new(&source));
            match cover_bind(&resolved, read_only, covers) {
                Covered::Redirect(to) => {
                    if read_only && to == resolved && !backed {
                        continue;
                    }
                    // same target: Compose merges a service's `volumes` by target
                    let mut redirected = if backed {
                        json!({"type": "bind", "target": target})
                    } else {
                        volume.clone()
                    };
                    redirected["source"] = json!(to.to_string_lossy());
                    redirected["read_only"] = json!(true);
                    added.push(redirected);
                }
                Covered::Overlays(list) => {
                    for (rel, from, read_only) in list {
                        let overlay =
                            format!("{}/{}", target.trim_end_matches('/'), rel.to_string_lossy());
                        if taken.contains(&overlay) {
                            continue;
                        }
                        taken.push(overlay.clone());
                        added.push(json!({
                            "type": "bind",
                            "source": from.to_string_lossy(),
                            "target": overlay,
                            "read_only": read_only,
                        }));
                    }
                }
            }
        }
        if !added.is_empty() {
            out.insert(name.clone(), added);
        }
    }
    out
}

/// The host folder a named volume binds through its driver options (`type: none`, `o: bind`,
/// `device: <path>`), if it does: such a volume is that bind for every rule (its request, the
/// covers of `.git`, the stop after the agent; spec-note 0400, attacks F6).
pub(crate) fn bind_backed_volume<'a>(
    model: &'a serde_json::Value,
    volume: &str,
) -> Option<&'a str> {
    let opts = model.get("volumes")?.get(volume)?.get("driver_opts")?;
    let o = opts
        .get("o")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    o.split(',')
        .any(|f| matches!(f.trim(), "bind" | "rbind"))
        .then(|| opts.get("device").and_then(serde_json::Value::as_str))
        .flatten()
}

/// The host folder a service's `type: volume` entry shows when its volume is bind-backed
/// ([`bind_backed_volume`]): the device, or with `volume.subpath` (Compose's long syntax,
/// mounted by Docker 26 and later) the folder `<device>/<subpath>` inside it, which is what
/// is judged and covered (spec-note 0400, attacks K5: a subpath of `.git` shows the host's
/// `.git` itself at the target). `None` for a volume that binds nothing.
pub(crate) fn bind_backed_source(
    model: &serde_json::Value,
    entry: &serde_json::Value,
) -> Option<String> {
    let volume = entry.get("source")?.as_str()?;
    let device = bind_backed_volume(model, volume)?;
    let subpath = entry
        .pointer("/volume/subpath")
        .and_then(serde_json::Value::as_str)
        .map(|s| s.trim_matches('/'))
        .filter(|s| !s.is_empty());
    Some(match subpath {
        Some(sub) => format!("{}/{sub}", device.trim_end_matches('/')),
        None => device.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::workspace::normalize_lexically;

    /// The handoff's read-only git overlays stay read-only through the repository's own binds
    /// of the workspace, of its `.git` and of the protected file itself.
    /// Attack (spec-note 0400, F6): a named volume whose driver options bind the workspace
    /// (`type: none, o: bind, device: <ws>`) is that bind: its target gets the cover of `.git`
    /// below it, and a volume binding `.git` itself shows the container git directory.
    #[test]
    fn a_bind_backed_volume_holding_dot_git_gets_the_cover() {
        use serde_json::json;
        let covers = vec![Cover {
            covered: PathBuf::from("/repo/.git"),
            source: PathBuf::from("/state/git/k"),
            read_only: false,
            folder: false,
        }];
        let backed =
            |device: &str| json!({"driver_opts": {"type": "none", "o": "bind", "device": device}});
        let model = json!({"services": {
            "app": {"volumes": [{"type": "volume", "source": "ws", "target": "/hostws"}]},
            "side": {"volumes": [
                {"type": "volume", "source": "gitdir", "target": "/g", "read_only": true},
                {"type": "volume", "source": "data", "target": "/data"}]},
        }, "volumes": {"ws": backed("/repo"), "gitdir": backed("/repo/.git"), "data": {}}});
        let added = compose_cover_additions(&model, &covers, |p: &Path| normalize_lexically(p));
        assert_eq!(
            added["app"],
            [
                json!({"type": "bind", "source": "/state/git/k", "target": "/hostws/.git", "read_only": false})
            ]
        );
        assert_eq!(
            added["side"],
            [json!({"type": "bind", "source": "/state/git/k", "target": "/g", "read_only": true})]
        );
    }

    /// Attack K5: a bind-backed volume of the workspace mounted with `volume.subpath: .git`
    /// shows the host's `.git` at its target; it is a bind of `<device>/.git`, so the target is
    /// redirected to the cover (never an overlay inside the host's `.git`), and a subpath
    /// beside `.git` gets no cover of its own.
    #[test]
    fn a_bind_backed_volume_with_a_subpath_of_dot_git_is_redirected() {
        use serde_json::json;
        let covers = vec![Cover {
            covered: PathBuf::from("/repo/.git"),
            source: PathBuf::from("/state/git/k"),
            read_only: false,
            folder: false,
        }];
        let model = json!({"services": {
            "app": {"volumes": [
                {"type": "volume", "source": "ws", "target": "/x", "volume": {"subpath": ".git"}},
                {"type": "volume", "source": "ws", "target": "/hooks", "volume": {"subpath": "./.git/hooks/"}},
                {"type": "volume", "source": "ws", "target": "/src", "volume": {"subpath": "src"}},
            ]},
        }, "volumes": {"ws": {"driver_opts": {"type": "none", "o": "bind", "device": "/repo/"}}}});
        let added = compose_cover_additions(&model, &covers, |p: &Path| normalize_lexically(p));
        assert_eq!(
            added["app"],
            [
                json!({"type": "bind", "target": "/x", "source": "/state/git/k", "read_only": true}),
                json!({"type": "bind", "target": "/hooks", "source": "/state/git/k/hooks", "read_only": true}),
            ]
        );
        let entry =
            |sub: &str| json!({"type": "volume", "source": "ws", "volume": {"subpath": sub}});
        assert_eq!(
            bind_backed_source(&model, &entry(".git")).as_deref(),
            Some("/repo/.git")
        );
        assert_eq!(
            bind_backed_source(&model, &json!({"source": "ws"})).as_deref(),
            Some("/repo/")
        );
        assert_eq!(
            bind_backed_source(&model, &json!({"source": "other"})),
            None
        );
    }

    #[test]
    fn compose_services_binds_keep_the_read_only_overlays_read_only() {
        use serde_json::json;
        let shields = vec![
            (
                PathBuf::from("/repo/.git/config"),
                "/workspace/.git/config".to_string(),
            ),
            (
                PathBuf::from("/repo/.git/hooks"),
                "/workspace/.git/hooks".to_string(),
            ),
        ];
        let bind = |source: &str, target: &str| json!({"type": "bind", "source": source, "target": target});
        let model = json!({"services": {
            "app": {"volumes": [bind("/repo", "/workspace"), bind("/link", "/ws2")]},
            "side": {"volumes": [
                bind("/repo/", "/w/"),
                bind("/repo/.git/config", "/cfg"),
                bind("/repo/.git/hooks/pre-commit", "/hook"),
                {"type": "bind", "source": "/repo", "target": "/ro", "read_only": true},
                {"type": "volume", "source": "data", "target": "/data"},
                bind("/elsewhere", "/e"),
            ]},
            "taken": {"volumes": [bind("/repo/.git", "/g"), {"type": "volume", "source": "v", "target": "/g/config"}]},
            "plain": {"image": "x"},
        }});
        // `/link` is a symbolic link to the repository
        let resolve = |p: &Path| {
            let p = normalize_lexically(p);
            if p == Path::new("/link") {
                PathBuf::from("/repo")
            } else {
                p
            }
        };
        let added = compose_read_only_additions(&model, &shields, resolve);
        let overlay = |shield: &str, target: &str| json!({"type": "bind", "source": shield, "target": target, "read_only": true});
        assert_eq!(
            added["app"],
            [
                overlay("/repo/.git/config", "/workspace/.git/config"),
                overlay("/repo/.git/hooks", "/workspace/.git/hooks"),
                overlay("/repo/.git/config", "/ws2/.git/config"),
                overlay("/repo/.git/hooks", "/ws2/.git/hooks"),
            ]
        );
        let mut cfg = bind("/repo/.git/config", "/cfg");
        cfg["read_only"] = json!(true);
        let mut hook = bind("/repo/.git/hooks/pre-commit", "/hook");
        hook["read_only"] = json!(true);
        assert_eq!(
            added["side"],
            [
                overlay("/repo/.git/config", "/w/.git/config"),
                overlay("/repo/.git/hooks", "/w/.git/hooks"),
                cfg,
                hook,
            ]
        );
        // a target the service already mounts something at gets no overlay
        assert_eq!(added["taken"], [overlay("/repo/.git/hooks", "/g/hooks")]);
        assert!(!added.contains_key("plain"));
        assert!(compose_read_only_additions(&model, &[], resolve).is_empty());
    }
}
