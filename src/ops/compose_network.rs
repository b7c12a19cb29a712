//! The networks of a Compose configuration under `--network none` and `--network allowlist`
//! (issue 14 item 4; spec-notes 0604, 0606).
//!
//! `default` keeps Compose's project networks as the reference CLI does. The two closed modes
//! write every project network (not `external`) into devcell's override file as an internal
//! bridge whose gateway address is never put on the host (`internal: true`, IPv6 off, the
//! bridge driver's `com.docker.network.bridge.inhibit_ipv4`): the services reach each other by
//! name through the engine's DNS, and have no address to reach the host or anything beyond it.
//! `internal: true` alone is not enough on an engine run with `--iptables=false` (the one this
//! project tests on): the host keeps the gateway address on the bridge, the container keeps a
//! default route to it, and every host address answers (spec-note 0500). The sidecars also lose
//! `NET_RAW`, so no raw frame reaches the address-less host bridge (its IPv6 link-local
//! address). Under `allowlist` the primary service also gets devcell's egress channel (the
//! forwarder and the proxy socket, spec-note 0502) beside the project network; a sidecar gets
//! no way out (there is no grant for one: `--network default` is the choice that gives the
//! sidecars the network).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::engine::{ContainerSpec, Engine};
use crate::ops::error::{OpsError, Result};
use crate::settings::NetworkMode;

/// The bridge driver option that keeps the network's gateway address off the host.
pub(crate) const INHIBIT_IPV4: &str = "com.docker.network.bridge.inhibit_ipv4";

/// The network of a Compose configuration's services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ComposeNetwork {
    /// Compose's project networks as the files define them (`--network default`).
    Project,
    /// Closed project networks (`--network none`).
    Closed,
    /// Closed project networks and devcell's egress channel for the primary service
    /// (`--network allowlist`).
    Allowlist,
}

impl ComposeNetwork {
    /// The mode the user chose (spec-notes 0502, 0207).
    pub(crate) fn of(network: NetworkMode) -> Self {
        match network {
            NetworkMode::Default => ComposeNetwork::Project,
            NetworkMode::Allowlist => ComposeNetwork::Allowlist,
            NetworkMode::None => ComposeNetwork::Closed,
        }
    }

    /// The mode a primary container was created with (its `devcell.network` label).
    pub(crate) fn of_labels(labels: &BTreeMap<String, String>) -> Self {
        match labels
            .get(crate::names::EGRESS_NETWORK_LABEL)
            .map(String::as_str)
        {
            Some(crate::ops::egress::ALLOWLIST) => ComposeNetwork::Allowlist,
            Some(CLOSED) => ComposeNetwork::Closed,
            _ => ComposeNetwork::Project,
        }
    }

    /// The network mode this is (`--network`'s value).
    pub(crate) fn mode(self) -> NetworkMode {
        match self {
            ComposeNetwork::Project => NetworkMode::Default,
            ComposeNetwork::Closed => NetworkMode::None,
            ComposeNetwork::Allowlist => NetworkMode::Allowlist,
        }
    }

    /// The network's name as `--network` spells it.
    pub(crate) fn name(self) -> &'static str {
        self.mode().as_str()
    }

    /// Whether the project networks are closed.
    pub(crate) fn closed(self) -> bool {
        self != ComposeNetwork::Project
    }

    /// What the services can reach, said in the plan, the handoff's warnings and `audit`.
    pub(crate) fn note(self) -> &'static str {
        match self {
            ComposeNetwork::Project => crate::ops::compose::COMPOSE_NETWORK_NOTE,
            ComposeNetwork::Closed => CLOSED_NOTE,
            ComposeNetwork::Allowlist => ALLOWLIST_NOTE,
        }
    }
}

/// The `devcell.network` label value of a primary container under [`ComposeNetwork::Closed`].
const CLOSED: &str = "none";

/// [`ComposeNetwork::note`] of `none`.
pub(crate) const CLOSED_NOTE: &str = "Compose project network, closed (`--network none`): every project network is internal with no host address on it, so the primary service and the sidecars reach each other by service name (the engine's DNS at 127.0.0.11 answers those names) and nothing else: not the host, not the engine's bridge, not beyond (other names are forwarded by the engine from the service's own network namespace, where they have no route); the sidecars run without NET_RAW; a granted external network, `network_mode` or published port is the user's own way out";

/// [`ComposeNetwork::note`] of `allowlist`.
pub(crate) const ALLOWLIST_NOTE: &str = "Compose project network, closed, with an allowlist for the primary service (`--network allowlist`): the services reach each other by service name and nothing else, as under `none`; the primary service's only way out is devcell's host-side proxy (its allowlist, every decision recorded); the sidecars have no way out (no grant exists for a sidecar's egress: hand off with `--network default` if one needs the network)";

/// The override file's top-level `networks` for a closed mode: every project network the
/// services use (the implicit `default` too), not `external`, as an internal bridge without a
/// host address (see the module docs). Keys are the model's; values merge over the files'
/// own definitions (Compose lets the later file win for each key).
///
/// Errors: [`OpsError::Unsupported`] for a project network with another driver than
/// `bridge` (its own options could give it a way out; it is not rewritten), and for a service
/// whose `network_mode` is the engine's own bridge (`bridge`, `default`): that network is not
/// the project's, is open, and is no permission request (spec-note 0480).
pub(crate) fn closed_networks(model: &Value) -> Result<Map<String, Value>> {
    let top = model.get("networks").and_then(Value::as_object);
    let mut keys: Vec<String> = top.map(|t| t.keys().cloned().collect()).unwrap_or_default();
    for (name, service) in services(model) {
        if let Some(mode) = service.get("network_mode").and_then(Value::as_str)
            && matches!(mode, "" | "bridge" | "default")
        {
            return Err(OpsError::Unsupported {
                message: format!(
                    "the Compose service `{name}` sets `network_mode: {mode}`, the engine's open bridge network: under network `none` or `allowlist` devcell closes only the project's own networks"
                ),
                hint: Some(
                    "remove that `network_mode` (the service then joins the project network), or hand off with `--network default`"
                        .into(),
                ),
            });
        }
        match service.get("networks").and_then(Value::as_object) {
            Some(nets) => keys.extend(nets.keys().cloned()),
            None if service.get("network_mode").is_none() => keys.push("default".to_string()),
            None => {}
        }
    }
    keys.sort();
    keys.dedup();
    let mut out = Map::new();
    for key in keys {
        let def = top.and_then(|t| t.get(&key));
        if def.and_then(|d| d.get("external")).and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(driver) = def.and_then(|d| d.get("driver")).and_then(Value::as_str)
            && driver != "bridge"
        {
            return Err(OpsError::Unsupported {
                message: format!(
                    "the Compose network `{key}` uses the driver `{driver}`: under network `none` or `allowlist` devcell closes only `bridge` networks"
                ),
                hint: Some(
                    "drop its `driver` (or set `bridge`), or hand off with `--network default`"
                        .into(),
                ),
            });
        }
        out.insert(
            key,
            json!({
                "driver": "bridge",
                "internal": true,
                "enable_ipv6": false,
                "driver_opts": {INHIBIT_IPV4: "true"},
            }),
        );
    }
    Ok(out)
}

/// Adds to every sidecar's additions what a closed mode takes away: `NET_RAW` (a raw frame
/// needs no address). Sidecars without additions yet get a map of their own.
pub(crate) fn close_sidecars(model: &Value, primary: &str, sidecars: &mut Map<String, Value>) {
    for (name, _) in services(model).filter(|(n, _)| n.as_str() != primary) {
        let entry = sidecars
            .entry(name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(add) = entry {
            let drop = add
                .entry("cap_drop".to_string())
                .or_insert_with(|| json!([]));
            if let Value::Array(list) = drop
                && !list.iter().any(|c| c == "NET_RAW")
            {
                list.push(json!("NET_RAW"));
            }
        }
    }
}

/// Refuses, under `allowlist`, a project where a sidecar would share the primary service's
/// network namespace (`network_mode: service:<primary>`, directly or through another service)
/// and so its forwarder and proxy, or where the primary service shares a sidecar's: a
/// sidecar's egress has no grant (spec-note 0606).
///
/// Errors: [`OpsError::Unsupported`] naming the service.
pub(crate) fn check_allowlist_namespaces(model: &Value, primary: &str) -> Result<()> {
    let shares = |service: &Value| {
        service
            .get("network_mode")
            .and_then(Value::as_str)
            .and_then(|m| m.strip_prefix("service:"))
            .map(str::to_string)
    };
    let by_name: BTreeMap<&String, &Value> = services(model).collect();
    if let Some(other) = by_name.get(&primary.to_string()).and_then(|s| shares(s)) {
        return Err(namespace_refusal(&format!(
            "the primary service `{primary}` shares the network namespace of `{other}` (`network_mode: service:{other}`), which would reach its egress proxy"
        )));
    }
    for name in by_name.keys().filter(|n| n.as_str() != primary) {
        // follow `service:` links (bounded: a cycle is Compose's error, not a loop here)
        let mut at = name.to_string();
        for _ in 0..by_name.len() {
            let Some(next) = by_name.get(&at).and_then(|s| shares(s)) else {
                break;
            };
            if next == primary {
                return Err(namespace_refusal(&format!(
                    "the sidecar `{name}` shares the primary service's network namespace (`network_mode: service:…`), which would give it the primary service's egress proxy"
                )));
            }
            at = next;
        }
    }
    Ok(())
}

fn namespace_refusal(message: &str) -> OpsError {
    OpsError::Unsupported {
        message: format!(
            "{message}; under network `allowlist` only the primary service gets a way out, and no grant exists for a sidecar's"
        ),
        hint: Some(
            "remove that `network_mode`, or hand off with `--network none` or `--network default`"
                .into(),
        ),
    }
}

/// Marks the primary service's container request with its network mode (the
/// `devcell.network` label; `allowlist` sets it with the channel) and, under `allowlist`,
/// keeps it on the project network (the channel's `none` is for a single container) with the
/// project's service names in `NO_PROXY`, so a request to a sidecar by name goes straight to it.
pub(crate) fn mark_primary(spec: &mut ContainerSpec, mode: ComposeNetwork, model: &Value) {
    match mode {
        ComposeNetwork::Project => {}
        ComposeNetwork::Closed => {
            spec.labels.insert(
                crate::names::EGRESS_NETWORK_LABEL.to_string(),
                CLOSED.to_string(),
            );
        }
        ComposeNetwork::Allowlist => {
            spec.network_mode = None;
            let names: Vec<&str> = services(model).map(|(n, _)| n.as_str()).collect();
            for key in ["NO_PROXY", "no_proxy"] {
                if let Some(value) = spec.env.get_mut(key) {
                    for name in &names {
                        value.push(',');
                        value.push_str(name);
                    }
                }
            }
        }
    }
}

/// When [`refuse_open`] checks a closed project's networks, which decides what its refusal
/// says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NetworkCheck {
    /// Before a closed project is created, a project network (`networks`' keys) must not
    /// already exist open: Compose joins an existing network of the project's name as it is,
    /// so one left by an earlier `--network default` run would silently give the services its
    /// way out.
    BeforeCreate,
    /// Once Compose created the project, each of its closed networks must be closed as the
    /// engine reports it (an engine that ignores [`INHIBIT_IPV4`] would leave the host's
    /// address on it): nothing is claimed that the engine did not apply. A refusal leaves the
    /// project for inspection; `devcell delete` removes it.
    AfterCreate,
}

impl NetworkCheck {
    /// The refusal's message and hint for the open network `name` of the Compose project
    /// `project`.
    fn refusal(self, project: &str, name: &str) -> (String, Option<String>) {
        match self {
            NetworkCheck::BeforeCreate => (
                format!(
                    "the Compose project `{project}`'s network `{name}` already exists and is not closed (made by an earlier run with network `default`): Compose would join it as it is"
                ),
                Some(format!(
                    "remove it (`devcell delete`, or `docker network rm {name}` once no container uses it), then hand off again"
                )),
            ),
            NetworkCheck::AfterCreate => (
                format!(
                    "the engine did not close the Compose project `{project}`'s network `{name}` (internal, with `{INHIBIT_IPV4}`): network `none`/`allowlist` is not applied on this engine"
                ),
                Some(
                    "remove the project (`devcell delete`), then hand off with `--network default` on this engine".into(),
                ),
            ),
        }
    }
}

/// Refuses the first of `networks` (model keys) that exists on the engine and is not closed,
/// by its engine name (`name`, else `<project>_<key>`), with the refusal `check` words for
/// that name. One no started service uses does not exist, and is not open.
///
/// Errors: [`OpsError::Unsupported`] naming the network; [`OpsError::Engine`].
pub(crate) async fn refuse_open(
    engine: &dyn Engine,
    target: &crate::ops::compose::ComposeTarget,
    networks: &Map<String, Value>,
    check: NetworkCheck,
) -> Result<()> {
    for key in networks.keys() {
        let name = target
            .model
            .pointer(&format!("/networks/{key}/name"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}_{key}", target.project.name));
        if engine
            .inspect_network(&name)
            .await?
            .is_some_and(|info| !is_closed(&info))
        {
            let (message, hint) = check.refusal(&target.project.name, &name);
            return Err(OpsError::Unsupported { message, hint });
        }
    }
    Ok(())
}

/// Whether a network is closed on this engine: internal, with no gateway address on the host.
pub(crate) fn is_closed(n: &crate::engine::NetworkInfo) -> bool {
    n.internal && n.options.get(INHIBIT_IPV4).map(String::as_str) == Some("true")
}

fn services(model: &Value) -> impl Iterator<Item = (&String, &Value)> {
    model
        .get("services")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_project_network_is_closed_and_external_ones_are_left_alone() {
        let model = json!({
            "services": {
                "app": {"image": "a"},
                "db": {"image": "d", "networks": {"back": null, "ext": null}},
                "side": {"image": "s", "network_mode": "service:db"}
            },
            "networks": {
                "back": {"name": "p_back", "driver": "bridge", "enable_ipv6": true,
                         "driver_opts": {INHIBIT_IPV4: "false"}},
                "ext": {"name": "shared", "external": true}
            }
        });
        let nets = closed_networks(&model).unwrap();
        assert_eq!(nets.keys().collect::<Vec<_>>(), ["back", "default"]);
        for net in nets.values() {
            assert_eq!(net["internal"], true);
            assert_eq!(net["enable_ipv6"], false);
            assert_eq!(net["driver_opts"][INHIBIT_IPV4], "true");
        }
        let other = json!({"services": {"app": {"image": "a", "networks": {"mac": null}}},
                           "networks": {"mac": {"driver": "macvlan"}}});
        let err = closed_networks(&other).unwrap_err().to_string();
        assert!(err.contains("`mac`") && err.contains("macvlan"), "{err}");
    }

    #[test]
    fn a_service_on_the_engines_bridge_is_refused_when_the_networks_are_closed() {
        for (service, mode) in [("side", "bridge"), ("app", "default"), ("side", "")] {
            let mut model = json!({"services": {"app": {"image": "a"}, "side": {"image": "s"}}});
            model["services"][service]["network_mode"] = json!(mode);
            let err = closed_networks(&model).unwrap_err().to_string();
            assert!(
                err.contains(&format!("`{service}` sets `network_mode: {mode}`")),
                "{err}"
            );
        }
        // a namespace of its own or another service's is not the bridge
        let model = json!({"services": {"app": {"image": "a"},
                                        "side": {"image": "s", "network_mode": "none"},
                                        "more": {"image": "s", "network_mode": "service:app"}}});
        assert_eq!(
            closed_networks(&model).unwrap().keys().collect::<Vec<_>>(),
            ["default"]
        );
    }

    #[test]
    fn sidecars_lose_net_raw_once_and_the_primary_keeps_its_own_request() {
        let model = json!({"services": {"app": {}, "db": {}, "cache": {}}});
        let mut sidecars = Map::new();
        sidecars.insert(
            "db".into(),
            json!({"cap_drop": ["NET_RAW"], "pids_limit": 5}),
        );
        close_sidecars(&model, "app", &mut sidecars);
        assert_eq!(
            sidecars["db"],
            json!({"cap_drop": ["NET_RAW"], "pids_limit": 5})
        );
        assert_eq!(sidecars["cache"], json!({"cap_drop": ["NET_RAW"]}));
        assert!(sidecars.get("app").is_none());
    }

    #[test]
    fn under_allowlist_no_sidecar_shares_the_primary_services_namespace() {
        let ok = json!({"services": {"app": {}, "db": {"network_mode": "service:cache"},
                                     "cache": {}}});
        check_allowlist_namespaces(&ok, "app").unwrap();
        let chained = json!({"services": {"app": {}, "db": {"network_mode": "service:cache"},
                                          "cache": {"network_mode": "service:app"}}});
        let err = check_allowlist_namespaces(&chained, "app")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`cache`") || err.contains("`db`"), "{err}");
        let primary = json!({"services": {"app": {"network_mode": "service:db"}, "db": {}}});
        let err = check_allowlist_namespaces(&primary, "app")
            .unwrap_err()
            .to_string();
        assert!(err.contains("primary service `app`"), "{err}");
    }

    #[test]
    fn the_mode_is_read_back_from_the_primary_containers_label() {
        let labels = |v: &str| {
            BTreeMap::from([(
                crate::names::EGRESS_NETWORK_LABEL.to_string(),
                v.to_string(),
            )])
        };
        assert_eq!(
            ComposeNetwork::of_labels(&labels("none")),
            ComposeNetwork::Closed
        );
        assert_eq!(
            ComposeNetwork::of_labels(&labels("allowlist")),
            ComposeNetwork::Allowlist
        );
        assert_eq!(
            ComposeNetwork::of_labels(&BTreeMap::new()),
            ComposeNetwork::Project
        );
        let mut spec = ContainerSpec {
            network_mode: Some("none".into()),
            ..ContainerSpec::default()
        };
        spec.env.insert("NO_PROXY".into(), "localhost".into());
        mark_primary(
            &mut spec,
            ComposeNetwork::Allowlist,
            &json!({"services": {"app": {}, "db": {}}}),
        );
        assert_eq!(spec.network_mode, None);
        assert_eq!(spec.env["NO_PROXY"], "localhost,app,db");
    }
}
