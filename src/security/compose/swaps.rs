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

/// One bind of a service: its source as it resolves on this host, and whether it is
/// writable.
struct Bind {
    source: PathBuf,
    writable: bool,
}

/// The binds (and bind-backed volumes, at their device) of `service`.
fn binds(model: &Value, service: &Value) -> Vec<Bind> {
    let resolve = |s: &str| {
        let p = Path::new(s);
        crate::security::host_path::resolve(p).unwrap_or_else(|_| p.to_path_buf())
    };
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
            Some(Bind {
                source: resolve(&source),
                writable: v.get("read_only").and_then(Value::as_bool) != Some(true),
            })
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
                    if bind.source != folder.source && bind.source.starts_with(&folder.source) {
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
}
