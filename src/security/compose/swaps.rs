//! Binds one service of a project can swap before another mounts them (attack 29, G1;
//! spec-note 0672). devcell judges each bind source where it resolves before `compose up`;
//! the engine resolves it again when it starts that service's container. A service started
//! earlier by the same `compose up` that writes a folder above another service's bind source
//! can replace that source with a link to a host folder in between (a healthcheck and
//! `depends_on: service_healthy` even wait for it), and the later service then mounts the
//! host folder. Stopping or refusing running writers (spec-note 0478) cannot see a writer
//! `compose up` starts itself.
//!
//! Decided: such a pair is a request on the later service's bind (`Permission::Mount` of its
//! source, `--allow mount:<source>` if the user accepts it), unless the bind's service is
//! started before the writer: it is among the writer's `depends_on`, directly or through
//! others (Compose starts dependencies first, and a started container's mounts are fixed).
//! The same folder bound by both is no swap (a mount point cannot be renamed from inside), nor
//! is a bind inside a service's own writable bind (it is mounted before its own processes run).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::fields::services_of;
use crate::security::policy::{Permission, Source};

/// One bind of a service: its source as it resolves on this host, where each entry on its
/// path as written lives (the folder it resolves in, and its name: a link on the way is an
/// entry too, attack 30, H1), and whether it is writable.
struct Bind {
    source: PathBuf,
    entries: Vec<PathBuf>,
    writable: bool,
}

/// The host locations of the entries on `written`'s path: each component's resolved parent
/// joined with its name, and each folder of the path it resolves to. A service that can
/// replace any of them (it writes the folder it is in) can make the engine mount elsewhere.
fn entries_on(written: &Path, resolved: &Path) -> Vec<PathBuf> {
    use std::path::Component;
    let resolve =
        |p: &Path| crate::security::host_path::resolve(p).unwrap_or_else(|_| p.to_path_buf());
    let mut entries = Vec::new();
    let mut walked = PathBuf::from("/");
    for part in written.components() {
        match part {
            Component::Normal(name) => {
                entries.push(resolve(&walked).join(name));
                walked.push(name);
            }
            Component::ParentDir => {
                walked.pop();
            }
            _ => {}
        }
    }
    entries.extend(resolved.ancestors().map(Path::to_path_buf));
    entries
}

/// A bind of `source` as written (an absolute host path).
fn bind_of(source: &str, writable: bool) -> Bind {
    let written = Path::new(source);
    let resolved =
        crate::security::host_path::resolve(written).unwrap_or_else(|_| written.to_path_buf());
    Bind {
        entries: entries_on(written, &resolved),
        source: resolved,
        writable,
    }
}

/// The binds of `service`: its binds and bind-backed volumes, the files of its `secrets` and
/// `configs` (read-only binds Compose makes; attack 30, H4), and what it mounts again through
/// `volumes_from` another service (its binds).
fn binds(model: &Value, service: &Value) -> Vec<Bind> {
    let mut out = own_binds(model, service);
    for (key, top) in [("secrets", "secrets"), ("configs", "configs")] {
        for entry in service
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = entry
                .get("source")
                .and_then(Value::as_str)
                .or_else(|| entry.as_str());
            let file = name
                .and_then(|n| model.get(top).and_then(|t| t.get(n)))
                .and_then(|d| d.get("file"))
                .and_then(Value::as_str);
            if let Some(file) = file {
                out.push(bind_of(file, false));
            }
        }
    }
    for from in service
        .get("volumes_from")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let holder = from.split(':').next().unwrap_or(from);
        if from.starts_with("container:") {
            continue;
        }
        if let Some(held) = model.get("services").and_then(|s| s.get(holder)) {
            out.extend(own_binds(model, held));
        }
    }
    out
}

/// The binds and bind-backed volumes (at their device) of `service` itself.
fn own_binds(model: &Value, service: &Value) -> Vec<Bind> {
    service
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let source = match v.get("type").and_then(Value::as_str) {
                Some("bind") => v.get("source").and_then(Value::as_str)?.to_string(),
                Some("volume") => crate::security::host_path::bind_backed_source(model, v)?,
                _ => return None,
            };
            let writable = v.get("read_only").and_then(Value::as_bool) != Some(true);
            Some(bind_of(&source, writable))
        })
        .collect()
}

/// The services `name` waits for before it starts (`depends_on`, transitively).
fn started_before(model: &Value, name: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut pending = vec![name.to_string()];
    while let Some(next) = pending.pop() {
        let deps = model
            .pointer(&format!(
                "/services/{}/depends_on",
                next.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_object);
        for dep in deps.into_iter().flat_map(|d| d.keys()) {
            if seen.insert(dep.clone()) {
                pending.push(dep.clone());
            }
        }
    }
    seen
}

/// The requests of every bind another service could swap first (the module's rule), on the
/// service whose bind it is.
pub(super) fn swap_requests(model: &Value) -> Vec<(Permission, Source)> {
    let all: BTreeMap<&String, Vec<Bind>> = services_of(model)
        .map(|(name, service)| (name, binds(model, service)))
        .collect();
    let mut asked = Vec::new();
    for (writer, writer_binds) in &all {
        let first = started_before(model, writer);
        for folder in writer_binds.iter().filter(|b| b.writable) {
            for (mounter, mounter_binds) in &all {
                if mounter == writer || first.contains(mounter.as_str()) {
                    continue;
                }
                for bind in mounter_binds {
                    let swappable = bind
                        .entries
                        .iter()
                        .any(|e| *e != folder.source && e.starts_with(&folder.source));
                    if swappable {
                        asked.push((
                            Permission::Mount(bind.source.display().to_string()),
                            Source::ComposeService {
                                service: (*mounter).clone(),
                                property: format!(
                                    "volumes: service `{writer}` writes `{}` and may start first, so it could replace `{}` with a link to a host folder before `{mounter}` mounts it (make `{writer}` depend on `{mounter}`, or bind it read-only)",
                                    folder.source.display(),
                                    bind.source.display()
                                ),
                            },
                        ));
                    }
                }
            }
        }
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bind(source: &str, read_only: bool) -> Value {
        json!({"type": "bind", "source": source, "target": "/x", "read_only": read_only})
    }

    /// spec-note 0672 (attack 29, G1): a sidecar writing the workspace swaps the primary's
    /// `data` before the primary (which waits for it) mounts it: a request on the primary's
    /// bind. Started the other way round (the writer depends on the bind's service), read-only,
    /// or the same folder: none.
    #[test]
    fn a_bind_another_service_can_swap_first_is_a_request() {
        let ws = "/nonexistent/devcell-ws";
        let data = format!("{ws}/data");
        let model = json!({"services": {
            "app": {"volumes": [bind(&data, false)], "depends_on": {"side": {"condition": "service_healthy"}}},
            "side": {"volumes": [bind(ws, false)]}
        }});
        let asked = swap_requests(&model);
        assert_eq!(asked.len(), 1, "{}", asked.len());
        assert_eq!(asked[0].0, Permission::Mount(data.clone()));
        assert!(matches!(&asked[0].1, Source::ComposeService { service, .. } if service == "app"));

        // the usual shape: the primary writes the workspace and waits for its database,
        // which binds a folder inside it
        let usual = json!({"services": {
            "app": {"volumes": [bind(ws, false)], "depends_on": {"db": {"condition": "service_started"}}},
            "db": {"volumes": [bind(&format!("{ws}/.data/pg"), false)]}
        }});
        assert!(swap_requests(&usual).is_empty());
        let read_only = json!({"services": {
            "app": {"volumes": [bind(&data, false)]},
            "side": {"volumes": [bind(ws, true)]}
        }});
        assert!(swap_requests(&read_only).is_empty());
        let same = json!({"services": {
            "app": {"volumes": [bind(ws, false)]},
            "side": {"volumes": [bind(ws, false)]}
        }});
        assert!(swap_requests(&same).is_empty());
        // no order between them: either may start first
        let parallel = json!({"services": {
            "app": {"volumes": [bind(ws, false)]},
            "docs": {"volumes": [bind(&format!("{ws}/docs"), true)]}
        }});
        assert_eq!(swap_requests(&parallel).len(), 1);
    }

    /// Attack 30, H1 and H4 (spec-note 0672): a bind reached through a link whose folder
    /// another service writes (`../a/lnk` resolving to `b`, the writer writing `a` only), a
    /// secret's file, and a bind inherited through `volumes_from` are each a request too.
    #[test]
    fn links_on_the_way_secrets_and_inherited_binds_count() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join("a")).unwrap();
        std::fs::create_dir_all(ws.join("b")).unwrap();
        std::os::unix::fs::symlink(ws.join("b"), ws.join("a/lnk")).unwrap();
        let (a, lnk) = (ws.join("a"), ws.join("a/lnk"));
        let (a, lnk) = (a.to_str().unwrap(), lnk.to_str().unwrap());
        let linked = json!({"services": {
            "app": {"volumes": [bind(lnk, false)]},
            "side": {"volumes": [bind(a, false)]}
        }});
        assert_eq!(swap_requests(&linked).len(), 1, "a link on the way");
        let tok = ws.join("a/tok");
        let secret = json!({
            "services": {
                "app": {"secrets": [{"source": "tok", "target": "/run/secrets/tok"}]},
                "side": {"volumes": [bind(a, false)]}
            },
            "secrets": {"tok": {"file": tok.to_str().unwrap()}}
        });
        assert_eq!(swap_requests(&secret).len(), 1, "a secret's file");
        let data = ws.join("a/data");
        let inherited = json!({"services": {
            "holder": {"volumes": [bind(data.to_str().unwrap(), true)]},
            "app": {"volumes_from": ["holder:ro"], "depends_on": {"holder": {}}},
            "side": {"volumes": [bind(a, false)], "depends_on": {"holder": {}}}
        }});
        let asked = swap_requests(&inherited);
        assert!(
            asked.iter().any(
                |(_, s)| matches!(s, Source::ComposeService { service, .. } if service == "app")
            ),
            "app mounts holder's bind again when it starts"
        );
    }
}
