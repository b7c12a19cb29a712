//! A Compose service's loopback ports with the repository's host port numbers, published from
//! free host ports instead (attack 25, P3's class; spec-note 0431): a repository must not
//! claim a loopback port a host service would use (a local registry, a database) and receive
//! its clients' credentials. The single container's `appPort` and `runArgs -p` moved in
//! session 26 ([`crate::security::policy`]); here the same rule for every service's `ports:`.

use serde_json::{Map, Value};

use super::fields::services_of;
use crate::security::policy::{Grants, Permission, is_loopback_address, publish_address};

pub use crate::engine::compose::OVERRIDE_TAG;

/// One port moved: the service, the address the repository named, and where it is published
/// now (an engine-chosen port on the same address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedPort {
    /// The service.
    pub service: String,
    /// `127.0.0.1:5432` (the repository's host address and port).
    pub address: String,
}

impl MovedPort {
    /// The warning `up` prints and reports.
    pub fn warning(&self) -> String {
        format!(
            "Compose service `{}` publishes {} (its `ports:`): published from a free host port instead, so it cannot take a port a host service uses; `--allow publish:{}` keeps the number (`docker port <container>` shows where it went)",
            self.service, self.address, self.address
        )
    }
}

/// For each service of the resolved `model` publishing a loopback address with a fixed host
/// port the user did not grant (`publish:<ip>:<port>`, `publish:<ip>:*`, `publish:*`), its
/// whole `ports` list with those entries' `published` removed (the engine chooses), wrapped
/// as `{"!override": [...]}` ([`OVERRIDE_TAG`]); and each port moved (a range of host ports
/// too). Ports beyond loopback are requests judged elsewhere.
pub fn free_loopback_ports(model: &Value, grants: &Grants) -> (Map<String, Value>, Vec<MovedPort>) {
    let mut lists = Map::new();
    let mut moved = Vec::new();
    for (name, service) in services_of(model) {
        let Some(ports) = service.get("ports").and_then(Value::as_array) else {
            continue;
        };
        let mut changed = false;
        let mut list = Vec::with_capacity(ports.len());
        for port in ports {
            let mut port = port.clone();
            if let Some(address) = fixed_loopback(&port)
                && !grants.allows(&Permission::PublishPort(address.clone()))
                && let Value::Object(entry) = &mut port
            {
                entry.remove("published");
                changed = true;
                moved.push(MovedPort {
                    service: name.clone(),
                    address,
                });
            }
            list.push(port);
        }
        if changed {
            let mut wrapped = Map::new();
            wrapped.insert(OVERRIDE_TAG.to_string(), Value::Array(list));
            lists.insert(name.clone(), Value::Object(wrapped));
        }
    }
    (lists, moved)
}

/// `<ip>:<port>` (or `<ip>:<first>-<last>`) of a long-syntax port entry on a loopback address
/// with a host port the repository chose: any `published` but none, empty or `0`, a range of
/// host ports included (a one-port range `5097-5097` is the port 5097: attack 29, G3).
fn fixed_loopback(port: &Value) -> Option<String> {
    let ip = port.get("host_ip").and_then(Value::as_str)?;
    if !is_loopback_address(ip) {
        return None;
    }
    let published = match port.get("published")? {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    if published.is_empty() || published == "0" {
        return None;
    }
    Some(match published.parse::<u16>() {
        Ok(single) => publish_address(ip, Some(single)),
        // a range: the grant names its address as written
        Err(_) => publish_address(ip, None).replace('*', &published),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// spec-note 0431: a service's loopback port with a fixed host port moves to a free one
    /// unless granted; other entries of its list are kept, other services untouched.
    #[test]
    fn a_compose_services_numbered_loopback_port_moves_unless_granted() {
        let model = json!({"services": {
            "db": {"ports": [
                {"mode": "ingress", "host_ip": "127.0.0.1", "target": 5432, "published": "5432", "protocol": "tcp"},
                {"mode": "ingress", "host_ip": "127.0.0.1", "target": 9000, "protocol": "tcp"}
            ]},
            "web": {"ports": [
                {"mode": "ingress", "host_ip": "127.0.0.1", "target": 80, "published": "8080", "protocol": "tcp"}
            ]},
            "plain": {"image": "x"}
        }});
        let none = Grants::parse::<&str>(&[]).unwrap();
        let (lists, moved) = free_loopback_ports(&model, &none);
        assert_eq!(
            moved.iter().map(|m| m.address.as_str()).collect::<Vec<_>>(),
            ["127.0.0.1:5432", "127.0.0.1:8080"]
        );
        let db = lists["db"][OVERRIDE_TAG].as_array().unwrap();
        assert_eq!(db.len(), 2);
        assert!(db[0].get("published").is_none());
        assert_eq!(db[0]["target"], 5432);
        assert_eq!(db[1], model["services"]["db"]["ports"][1]);
        assert!(
            moved[0]
                .warning()
                .contains("--allow publish:127.0.0.1:5432")
        );

        // attack 29, G3: a one-port range is that port, a range is the repository's too
        let ranges = json!({"services": {"web": {"ports": [
            {"host_ip": "127.0.0.1", "target": 8080, "published": "5097-5097"},
            {"host_ip": "127.0.0.1", "target": 8081, "published": "5000-5010"},
            {"host_ip": "127.0.0.1", "target": 8082, "published": "0"}
        ]}}});
        let (lists, moved) = free_loopback_ports(&ranges, &none);
        assert_eq!(moved.len(), 2, "{moved:?}");
        let web = lists["web"][OVERRIDE_TAG].as_array().unwrap();
        assert!(
            web.iter()
                .all(|p| p.get("published").is_none() || p["published"] == "0")
        );

        let granted = Grants::parse(&["publish:127.0.0.1:8080".to_string()]).unwrap();
        let (lists, moved) = free_loopback_ports(&model, &granted);
        assert_eq!(moved.len(), 1);
        assert!(lists.get("web").is_none(), "the granted number is kept");
    }
}
