//! The `devcontainer.metadata` image label and the spec's merge rules
//! ([spec: image metadata](https://containers.dev/implementors/spec/#image-metadata),
//! [merge logic](https://containers.dev/implementors/spec/#merge-logic)).
//!
//! The label holds a JSON array of entry objects (or one object): the base image's entries,
//! then one entry per Feature in install order (with `id`), then the `devcontainer.json`
//! entry. Entries are stored unsubstituted; callers substitute them when they are applied
//! ([`super::substitute`]). All functions here are pure.
//!
//! [`merge`] implements the merge table; [`merge_configuration`] lays the merged properties
//! over a `devcontainer.json` the way the reference CLI's `mergedConfiguration` does
//! (lifecycle hooks become `onCreateCommands` … arrays, `entrypoint` becomes `entrypoints`).

use serde_json::{Map, Value};

use crate::diagnostics::Warning;
use crate::formats::json;
use crate::names::METADATA_LABEL;

/// The five container lifecycle hooks, in spec order (never `initializeCommand`).
pub const LIFECYCLE_HOOKS: [&str; 5] = [
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
];

/// `devcontainer.json` properties written into the label entry, in entry order
/// (the 🏷 properties of the spec's property reference).
pub const CONFIG_PROPERTIES: [&str; 24] = [
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
    "waitFor",
    "customizations",
    "mounts",
    "containerEnv",
    "containerUser",
    "init",
    "privileged",
    "capAdd",
    "securityOpt",
    "remoteUser",
    "userEnvProbe",
    "remoteEnv",
    "overrideCommand",
    "portsAttributes",
    "otherPortsAttributes",
    "forwardPorts",
    "shutdownAction",
    "updateRemoteUserUID",
    "hostRequirements",
];

/// Feature (`devcontainer-feature.json`) properties written into the label entry after `id`.
/// A Feature's `containerEnv` is not among them: it is baked into the image as `ENV`.
pub const FEATURE_PROPERTIES: [&str; 12] = [
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
    "init",
    "privileged",
    "capAdd",
    "securityOpt",
    "entrypoint",
    "mounts",
    "customizations",
];

/// `devcontainer.json` properties re-applied over the label of an existing container that is
/// reused (the others need the container to be recreated).
pub const UPDATEABLE_PROPERTIES: [&str; 3] = ["remoteUser", "userEnvProbe", "remoteEnv"];

/// Properties of `devcontainer.json` that [`merge_configuration`] replaces by merged forms.
const REPLACED_PROPERTIES: [&str; 8] = [
    "customizations",
    "entrypoint",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
    "shutdownAction",
];

/// Parses a `devcontainer.metadata` label value into entries.
///
/// An array gives its object elements, an object gives one entry, an empty label gives none.
/// Invalid JSON or another JSON type gives no entries and a warning (bring-up goes on, as in the
/// reference CLI); non-object array elements are dropped with a warning.
pub fn parse_label(label: &str) -> (Vec<Value>, Option<Warning>) {
    if label.trim().is_empty() {
        return (Vec::new(), None);
    }
    let warning = |message: String| {
        Some(Warning {
            location: None,
            message,
        })
    };
    match serde_json::from_str::<Value>(label) {
        Ok(Value::Object(entry)) => (vec![Value::Object(entry)], None),
        Ok(Value::Array(items)) => {
            let total = items.len();
            let entries: Vec<Value> = items.into_iter().filter(Value::is_object).collect();
            let dropped = total - entries.len();
            let note = (dropped > 0).then(|| {
                format!(
                    "`{METADATA_LABEL}` label: ignored {dropped} of {total} entries that are not JSON objects"
                )
            });
            (entries, note.and_then(warning))
        }
        Ok(other) => (
            Vec::new(),
            warning(format!(
                "`{METADATA_LABEL}` label ignored: expected a JSON array or object, found {}",
                json::kind(&other)
            )),
        ),
        Err(error) => (
            Vec::new(),
            warning(format!(
                "`{METADATA_LABEL}` label ignored: invalid JSON: {error}"
            )),
        ),
    }
}

/// The label entry for a `devcontainer.json`: the [`CONFIG_PROPERTIES`] present in `config`
/// (in that order, values as written, unsubstituted when `config` is the raw config).
pub fn config_entry(config: &Value) -> Value {
    pick(None, config, &CONFIG_PROPERTIES)
}

/// The label entry for a Feature: `id` (the Feature reference as the user wrote it, e.g.
/// `ghcr.io/devcontainers/features/node:1` or `./local`) then the [`FEATURE_PROPERTIES`]
/// present in its `devcontainer-feature.json`, legacy top-level `extensions`/`settings` moved
/// into `customizations.vscode` first (spec-note 0006).
pub fn feature_entry(id: &str, feature_metadata: &Value) -> Value {
    match feature_metadata {
        Value::Object(map) if map.contains_key("extensions") || map.contains_key("settings") => {
            let mut migrated = map.clone();
            super::model::migrate_feature_legacy(&mut migrated);
            pick(Some(id), &Value::Object(migrated), &FEATURE_PROPERTIES)
        }
        _ => pick(Some(id), feature_metadata, &FEATURE_PROPERTIES),
    }
}

/// The entry appended to an existing container's label on reuse: the
/// [`UPDATEABLE_PROPERTIES`] present in `config`.
pub fn updateable_entry(config: &Value) -> Value {
    pick(None, config, &UPDATEABLE_PROPERTIES)
}

/// The entries of a label in spec order — base image entries, Feature entries (install
/// order), the `devcontainer.json` entry — without empty objects.
pub fn collect_entries(base: &[Value], features: &[Value], config: &Value) -> Vec<Value> {
    base.iter()
        .chain(features)
        .chain(std::iter::once(config))
        .filter(|entry| !is_empty_entry(entry))
        .cloned()
        .collect()
}

/// The label value for `entries`: a compact JSON array, empty entries dropped.
pub fn label_value(entries: &[Value]) -> String {
    let kept: Vec<&Value> = entries.iter().filter(|e| !is_empty_entry(e)).collect();
    serde_json::to_string(&kept).unwrap_or_else(|_| "[]".to_owned())
}

/// Merges metadata entries (later entries are applied later; `devcontainer.json` last) with the
/// spec's merge table. Returns an object with the merged properties, in this order and shape:
///
/// | key | rule |
/// |---|---|
/// | `init`, `privileged` | `true` if any entry's is truthy (always present) |
/// | `capAdd`, `securityOpt` | union without duplicates, first-occurrence order |
/// | `entrypoints` | every Feature `entrypoint`, in entry order |
/// | `mounts` | all mounts; one per target, the last one, at its position (string mounts parsed: `src`→`source`, `dst`/`destination`→`target`); values kept as written |
/// | `customizations` | per top-level namespace, an array of each entry's value |
/// | `onCreateCommands` … `postAttachCommands` | every entry's hook value kept whole, in entry order (always present) |
/// | `waitFor`, `remoteUser`, `containerUser`, `userEnvProbe`, `otherPortsAttributes`, `shutdownAction` | last non-empty value |
/// | `remoteEnv`, `containerEnv`, `portsAttributes` | per key, last wins (whole attribute objects; always present). A `remoteEnv` value `null` is kept: it unsets the variable |
/// | `overrideCommand`, `updateRemoteUserUID` | last boolean (`false` counts) |
/// | `forwardPorts` | union; `N` ≡ `"localhost:N"` (emitted as `N`) |
/// | `hostRequirements` | max `cpus`; max `memory`/`storage` in bytes (`k`/`m`/`g`/`t` `b` = 2^10…2^40), emitted as byte strings; `gpu`: `false`/absent lose, `"optional"` only if all are optional, else `true` or an object with max `cores`/`memory` |
///
/// Keys marked optional above are absent when no entry contributes. Non-object entries are
/// ignored. "Truthy"/"non-empty" follows the reference CLI (JavaScript truthiness).
pub fn merge(entries: &[Value]) -> Value {
    let mut out = Map::new();
    for (key, value) in merged_properties(entries) {
        if let Some(value) = value {
            out.insert(key.to_owned(), value);
        }
    }
    Value::Object(out)
}

/// The users a merged configuration (or a [`merge`] of metadata entries) names: the spec's
/// `containerUser` and `remoteUser`, an empty string read as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredUsers {
    /// `containerUser`: the user the container's processes run as.
    pub container_user: Option<String>,
    /// `remoteUser`: the user tools and hooks run as.
    pub remote_user: Option<String>,
}

impl ConfiguredUsers {
    /// The users of `merged` (a JSON object; any other value names none).
    pub fn of(merged: &Value) -> ConfiguredUsers {
        let user = |key: &str| {
            merged
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        ConfiguredUsers {
            container_user: user("containerUser"),
            remote_user: user("remoteUser"),
        }
    }

    /// The user tools and hooks run as when the configuration says: `remoteUser`, which
    /// defaults to `containerUser` (spec: "remoteUser … defaults to the user the container
    /// as a whole is running as").
    pub fn remote(&self) -> Option<&str> {
        self.remote_user
            .as_deref()
            .or(self.container_user.as_deref())
    }
}

/// The typed view of a merged configuration ([`merge_configuration`] or [`merge`] output, or a
/// single metadata entry) for the properties the operations act on; the JSON value stays for
/// the JSON boundary (`read-configuration`'s output, labels). Values of the wrong JSON type
/// read as absent, as the merge treats them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergedConfiguration {
    /// `containerUser` and `remoteUser`.
    pub users: ConfiguredUsers,
    /// `updateRemoteUserUID` (`None`: not said).
    pub update_remote_user_uid: Option<bool>,
    /// `overrideCommand` (`None`: not said; the default depends on the configuration's kind).
    pub override_command: Option<bool>,
    /// `init` is `true`.
    pub init: bool,
    /// `privileged` is `true`.
    pub privileged: bool,
    /// `capAdd`, the strings as written.
    pub cap_add: Vec<String>,
    /// `securityOpt`, the strings as written.
    pub security_opt: Vec<String>,
    /// The Features' `entrypoint`s, in entry order (the merge's `entrypoints`).
    pub entrypoints: Vec<String>,
    /// `containerEnv` in order: a string as written, another non-null value as its JSON text;
    /// `null` left out.
    pub container_env: Vec<(String, String)>,
    /// `remoteEnv` in order: a string as written, `null` as `None` (it unsets the variable,
    /// spec-notes/0027), another value as its JSON text.
    pub remote_env: Vec<(String, Option<String>)>,
}

impl MergedConfiguration {
    /// The typed view of `merged` (a JSON object; any other value says nothing).
    pub fn of(merged: &Value) -> MergedConfiguration {
        let strings = |key: &str| -> Vec<String> {
            merged
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let flag = |key: &str| merged.get(key).and_then(Value::as_bool);
        let container_env = merged
            .get("containerEnv")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| match value {
                Value::Null => None,
                Value::String(s) => Some((name.clone(), s.clone())),
                other => Some((name.clone(), other.to_string())),
            })
            .collect();
        let remote_env = merged
            .get("remoteEnv")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, value)| {
                let value = match value {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                };
                (name.clone(), value)
            })
            .collect();
        MergedConfiguration {
            users: ConfiguredUsers::of(merged),
            update_remote_user_uid: flag("updateRemoteUserUID"),
            override_command: flag("overrideCommand"),
            init: flag("init") == Some(true),
            privileged: flag("privileged") == Some(true),
            cap_add: strings("capAdd"),
            security_opt: strings("securityOpt"),
            entrypoints: strings("entrypoints"),
            container_env,
            remote_env,
        }
    }
}

/// The reference CLI's `mergedConfiguration`: `config` without its lifecycle hooks,
/// `entrypoint`, `customizations` and `shutdownAction`, overlaid with [`merge`]`(entries)`
/// (a property the merge leaves out is removed; existing keys keep their position, new keys
/// follow in [`merge`]'s order). `entries` should already end with [`config_entry`]`(config)`.
pub fn merge_configuration(config: &Value, entries: &[Value]) -> Value {
    let mut out = match config {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for key in REPLACED_PROPERTIES {
        out.shift_remove(key);
    }
    for (key, value) in merged_properties(entries) {
        match value {
            Some(value) => {
                out.insert(key.to_owned(), value);
            }
            None => {
                out.shift_remove(key);
            }
        }
    }
    Value::Object(out)
}

/// The commands of one lifecycle hook across `entries`, each with its origin: the entry's `id`
/// (a Feature) or `"devcontainer.json"` (entries without `id`: the config and image entries
/// written from a devcontainer.json). Falsy hook values are skipped. Used to label hook output
/// and failures ([spec: Features contributing lifecycle scripts](https://containers.dev/implementors/features/#lifecycle-hooks)).
pub fn hook_commands(entries: &[Value], hook: &str) -> Vec<(String, Value)> {
    entries
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|entry| {
            let command = entry.get(hook).filter(|c| truthy(Some(c)))?;
            let origin = entry
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("devcontainer.json");
            Some((origin.to_owned(), command.clone()))
        })
        .collect()
}

/// Parses a Docker `--mount` string (`type=bind,source=/a,target=/b,readonly`) into an object,
/// its fields as [`crate::formats::mount::fields`] reads them (keys lowercased, aliases
/// resolved); a field without `=` becomes `key: true`.
pub fn parse_mount(mount: &str) -> Map<String, Value> {
    // An unterminated quote: no fields (the engine refuses the string).
    crate::formats::mount::fields(mount)
        .unwrap_or_default()
        .into_iter()
        .map(|f| (f.key, f.value.map_or(Value::Bool(true), Value::String)))
        .collect()
}

/// The `target` of a mount in string or object form (object keys normalised as in
/// [`parse_mount`]); `None` when it has none.
pub fn mount_target(mount: &Value) -> Option<String> {
    match mount {
        Value::String(text) => parse_mount(text)
            .get("target")
            .and_then(Value::as_str)
            .map(str::to_owned),
        Value::Object(map) => map
            .iter()
            .find(|(key, _)| crate::formats::mount::canonical_key(key) == "target")
            .and_then(|(_, value)| value.as_str())
            .map(str::to_owned),
        _ => None,
    }
}

/// Parses a `hostRequirements` size (`^\d+([tgmk]b)?$`, powers of 1024) into bytes; `None`
/// when it does not match. Saturates instead of overflowing.
pub fn parse_bytes(size: &str) -> Option<u128> {
    let (digits, unit) = match size.len().checked_sub(2).map(|i| size.split_at(i)) {
        Some((digits, suffix)) if suffix.len() == 2 && suffix.ends_with('b') => {
            let unit: u128 = match suffix.as_bytes()[0] {
                b'k' => 1 << 10,
                b'm' => 1 << 20,
                b'g' => 1 << 30,
                b't' => 1 << 40,
                _ => return None,
            };
            (digits, unit)
        }
        _ => (size, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number = digits.parse::<u128>().unwrap_or(u128::MAX);
    Some(number.saturating_mul(unit))
}

// ---------------------------------------------------------------------------------------------

fn pick(id: Option<&str>, source: &Value, keys: &[&str]) -> Value {
    let mut out = Map::new();
    if let Some(id) = id {
        out.insert("id".to_owned(), Value::String(id.to_owned()));
    }
    if let Value::Object(map) = source {
        for key in keys {
            if let Some(value) = map.get(*key) {
                out.insert((*key).to_owned(), value.clone());
            }
        }
    }
    Value::Object(out)
}

fn is_empty_entry(entry: &Value) -> bool {
    matches!(entry, Value::Object(map) if map.is_empty())
}

/// JavaScript truthiness, which the reference's merge uses to skip absent/empty values.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_) | Value::Object(_)) => true,
    }
}

/// The merged properties in output order; `None` = left out.
fn merged_properties(entries: &[Value]) -> Vec<(&'static str, Option<Value>)> {
    let objects: Vec<&Map<String, Value>> = entries.iter().filter_map(Value::as_object).collect();
    let field = |key: &'static str| objects.iter().map(move |entry| entry.get(key));
    let last_truthy = |key: &'static str| {
        objects
            .iter()
            .rev()
            .filter_map(|entry| entry.get(key))
            .find(|value| truthy(Some(value)))
            .cloned()
    };
    let last_bool = |key: &'static str| {
        objects
            .iter()
            .rev()
            .filter_map(|entry| entry.get(key))
            .find(|value| value.is_boolean())
            .cloned()
    };
    let any = |key: &'static str| Some(Value::Bool(field(key).any(truthy)));
    let collect = |key: &'static str| -> Vec<Value> {
        field(key)
            .filter(|value| truthy(*value))
            .flatten()
            .cloned()
            .collect()
    };
    let non_empty = |values: Vec<Value>| (!values.is_empty()).then_some(Value::Array(values));
    let assign = |key: &'static str| {
        let mut out = Map::new();
        for value in field(key).flatten() {
            if let Value::Object(map) = value {
                for (k, v) in map {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        Some(Value::Object(out))
    };

    let mut props: Vec<(&'static str, Option<Value>)> = vec![
        ("init", any("init")),
        ("privileged", any("privileged")),
        ("capAdd", union(field("capAdd"))),
        ("securityOpt", union(field("securityOpt"))),
        ("entrypoints", non_empty(collect("entrypoint"))),
        ("mounts", merge_mounts(field("mounts"))),
        (
            "customizations",
            merge_customizations(field("customizations")),
        ),
    ];
    for (hook, merged) in LIFECYCLE_HOOKS.iter().zip([
        "onCreateCommands",
        "updateContentCommands",
        "postCreateCommands",
        "postStartCommands",
        "postAttachCommands",
    ]) {
        props.push((merged, Some(Value::Array(collect(hook)))));
    }
    props.extend([
        ("waitFor", last_truthy("waitFor")),
        ("remoteUser", last_truthy("remoteUser")),
        ("containerUser", last_truthy("containerUser")),
        ("userEnvProbe", last_truthy("userEnvProbe")),
        ("remoteEnv", assign("remoteEnv")),
        ("containerEnv", assign("containerEnv")),
        ("overrideCommand", last_bool("overrideCommand")),
        ("portsAttributes", assign("portsAttributes")),
        ("otherPortsAttributes", last_truthy("otherPortsAttributes")),
        ("forwardPorts", merge_forward_ports(field("forwardPorts"))),
        ("shutdownAction", last_truthy("shutdownAction")),
        ("updateRemoteUserUID", last_bool("updateRemoteUserUID")),
        (
            "hostRequirements",
            merge_host_requirements(field("hostRequirements")),
        ),
    ]);
    props
}

/// The items of an array-valued property; a lone truthy non-array value counts as one item.
fn items(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Array(items)) => items.iter().collect(),
        other if truthy(other) => other.into_iter().collect(),
        _ => Vec::new(),
    }
}

fn union<'v>(values: impl Iterator<Item = Option<&'v Value>>) -> Option<Value> {
    let mut out: Vec<Value> = Vec::new();
    for item in values.flat_map(items) {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

fn merge_mounts<'v>(values: impl Iterator<Item = Option<&'v Value>>) -> Option<Value> {
    let all: Vec<&Value> = values.flat_map(items).collect();
    let targets: Vec<Option<String>> = all.iter().map(|m| mount_target(m)).collect();
    // Keep an item when no later item has the same target (mounts without a target form one
    // group, as in the reference).
    let kept: Vec<Value> = all
        .iter()
        .enumerate()
        .filter(|(index, _)| !targets[index + 1..].contains(&targets[*index]))
        .map(|(_, mount)| (*mount).clone())
        .collect();
    (!kept.is_empty()).then_some(Value::Array(kept))
}

fn merge_customizations<'v>(values: impl Iterator<Item = Option<&'v Value>>) -> Option<Value> {
    let mut out: Map<String, Value> = Map::new();
    for value in values.flatten() {
        if let Value::Object(namespaces) = value {
            for (namespace, customization) in namespaces {
                match out.get_mut(namespace) {
                    Some(Value::Array(list)) => list.push(customization.clone()),
                    _ => {
                        out.insert(namespace.clone(), Value::Array(vec![customization.clone()]));
                    }
                }
            }
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

fn merge_forward_ports<'v>(values: impl Iterator<Item = Option<&'v Value>>) -> Option<Value> {
    let mut seen: Vec<String> = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    for port in values.flat_map(items) {
        let key = match port {
            Value::Number(n) => Some(format!("localhost:{n}")),
            Value::String(s) => Some(s.clone()),
            _ => None,
        };
        match key {
            Some(key) if seen.contains(&key) => {}
            Some(key) => {
                let value = key
                    .strip_prefix("localhost:")
                    .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse::<u64>().ok())
                    .map_or_else(|| port.clone(), Value::from);
                seen.push(key);
                out.push(value);
            }
            None => out.push(port.clone()),
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

/// A size property as bytes: strings by [`parse_bytes`], numbers as bytes, else 0.
fn size_of(value: Option<&Value>) -> u128 {
    match value {
        Some(Value::String(s)) => parse_bytes(s).unwrap_or(0),
        Some(Value::Number(n)) => n.as_u64().map_or(0, u128::from),
        _ => 0,
    }
}

fn count_of(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

fn merge_host_requirements<'v>(values: impl Iterator<Item = Option<&'v Value>>) -> Option<Value> {
    let mut cpus = 0u64;
    let mut memory = 0u128;
    let mut storage = 0u128;
    let mut gpu: Option<Value> = None;
    for requirements in values.flatten() {
        let Value::Object(req) = requirements else {
            continue;
        };
        cpus = cpus.max(count_of(req.get("cpus")));
        memory = memory.max(size_of(req.get("memory")));
        storage = storage.max(size_of(req.get("storage")));
        gpu = merge_gpu(gpu, req.get("gpu"));
    }
    if cpus == 0 && memory == 0 && storage == 0 && !truthy(gpu.as_ref()) {
        return None;
    }
    let mut out = Map::new();
    if cpus > 0 {
        out.insert("cpus".into(), Value::from(cpus));
    }
    if memory > 0 {
        out.insert("memory".into(), Value::String(memory.to_string()));
    }
    if storage > 0 {
        out.insert("storage".into(), Value::String(storage.to_string()));
    }
    if let Some(gpu) = gpu {
        out.insert("gpu".into(), gpu);
    }
    Some(Value::Object(out))
}

/// GPU requirement order: absent/`false` < `"optional"` < `true` < `{cores, memory}` (merged by
/// field maximum). `true` stands for "required, no minimum" (the reference emits `{}`).
fn merge_gpu(current: Option<Value>, next: Option<&Value>) -> Option<Value> {
    let weak = |v: Option<&Value>| matches!(v, None | Some(Value::Null | Value::Bool(false)));
    if weak(current.as_ref()) {
        return next.filter(|v| !v.is_null()).cloned().or(current);
    }
    if weak(next) {
        return current;
    }
    let optional = |v: Option<&Value>| v.and_then(Value::as_str) == Some("optional");
    if optional(current.as_ref()) && optional(next) {
        return Some(Value::String("optional".into()));
    }
    let fields = |v: Option<&Value>| match v {
        Some(Value::Object(map)) => (count_of(map.get("cores")), size_of(map.get("memory"))),
        _ => (0, 0),
    };
    let (cores_a, memory_a) = fields(current.as_ref());
    let (cores_b, memory_b) = fields(next);
    let (cores, memory) = (cores_a.max(cores_b), memory_a.max(memory_b));
    if cores == 0 && memory == 0 {
        return Some(Value::Bool(true));
    }
    let mut out = Map::new();
    if cores > 0 {
        out.insert("cores".into(), Value::from(cores));
    }
    if memory > 0 {
        out.insert("memory".into(), Value::String(memory.to_string()));
    }
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(entries: &[Value]) -> Value {
        merge(entries)
    }

    // --- label parsing (checklist 65, 66) ---

    #[test]
    fn label_object_is_one_entry() {
        let (single, w1) = parse_label(r#"{"remoteUser":"vscode"}"#);
        let (array, w2) = parse_label(r#"[{"remoteUser":"vscode"}]"#);
        assert_eq!(single, array);
        assert_eq!(single, vec![json!({"remoteUser": "vscode"})]);
        assert!(w1.is_none() && w2.is_none());
        assert_eq!(merged(&single), merged(&array));
    }

    #[test]
    fn label_invalid_is_ignored_with_warning() {
        for (label, fragment) in [
            ("{not json", "invalid JSON"),
            ("42", "found a number"),
            ("\"text\"", "found a string"),
            ("null", "found null"),
        ] {
            let (entries, warning) = parse_label(label);
            assert!(entries.is_empty(), "{label}");
            let message = warning.expect("warning").message;
            assert!(message.contains(fragment), "{message}");
            assert!(message.contains("`devcontainer.metadata`"), "{message}");
        }
        let (entries, warning) = parse_label(r#"[{"init":true}, 3, "x"]"#);
        assert_eq!(entries, vec![json!({"init": true})]);
        assert!(warning.unwrap().message.contains("ignored 2 of 3"));
        assert_eq!(parse_label(""), (Vec::new(), None));
        assert_eq!(parse_label("[]"), (Vec::new(), None));
    }

    // --- writing entries (checklist 76, 77) ---

    #[test]
    fn config_entry_picks_label_properties_only() {
        let config = json!({
            "name": "n", "image": "img", "build": {"dockerfile": "D"}, "runArgs": ["--x"],
            "appPort": 3000, "workspaceMount": "m", "workspaceFolder": "/w",
            "initializeCommand": "echo", "features": {"a": {}},
            "remoteUser": "u", "postCreateCommand": "make", "forwardPorts": [1],
            "hostRequirements": {"cpus": 2}, "containerEnv": {"A": "${localEnv:A}"},
            "unknownProp": 1
        });
        let entry = config_entry(&config);
        assert_eq!(
            entry,
            json!({
                "postCreateCommand": "make", "containerEnv": {"A": "${localEnv:A}"},
                "remoteUser": "u", "forwardPorts": [1], "hostRequirements": {"cpus": 2}
            })
        );
        // Order follows the pick list.
        let keys: Vec<_> = entry.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "postCreateCommand",
                "containerEnv",
                "remoteUser",
                "forwardPorts",
                "hostRequirements"
            ]
        );
        for absent in [
            "name",
            "image",
            "build",
            "runArgs",
            "appPort",
            "workspaceMount",
            "workspaceFolder",
            "initializeCommand",
            "features",
        ] {
            assert!(entry.get(absent).is_none(), "{absent}");
        }
    }

    #[test]
    fn feature_entry_moves_legacy_vscode_properties_into_customizations() {
        let feature = json!({"id": "f", "extensions": ["x.y"], "settings": {"s": 1},
            "customizations": {"vscode": {"extensions": ["first"]}}});
        assert_eq!(
            feature_entry("./f", &feature),
            json!({"id": "./f", "customizations": {"vscode": {"extensions": ["first", "x.y"], "settings": {"s": 1}}}})
        );
    }

    #[test]
    fn feature_entry_picks_feature_properties() {
        let feature = json!({
            "id": "node", "version": "1.0.0", "name": "Node", "options": {},
            "containerEnv": {"PATH": "/x:${PATH}"}, "privileged": true,
            "entrypoint": "/usr/local/share/start.sh", "postCreateCommand": "x",
            "mounts": [{"type": "volume", "source": "s", "target": "/t"}],
            "remoteUser": "ignored", "initializeCommand": "never"
        });
        let entry = feature_entry("ghcr.io/devcontainers/features/node:1", &feature);
        assert_eq!(
            entry,
            json!({
                "id": "ghcr.io/devcontainers/features/node:1",
                "postCreateCommand": "x", "privileged": true,
                "entrypoint": "/usr/local/share/start.sh",
                "mounts": [{"type": "volume", "source": "s", "target": "/t"}]
            })
        );
        assert_eq!(
            updateable_entry(&json!({"remoteUser": "a", "remoteEnv": {"X": null}, "init": true})),
            json!({"remoteUser": "a", "remoteEnv": {"X": null}})
        );
    }

    /// Checklist 76: base entries, Feature entries, devcontainer.json entry; empties dropped.
    #[test]
    fn collected_entries_and_label_value() {
        let base = vec![json!({"remoteUser": "base"}), json!({})];
        let features = vec![
            feature_entry("./a", &json!({"init": true})),
            feature_entry("./b", &json!({"version": "1"})),
        ];
        let entries = collect_entries(&base, &features, &config_entry(&json!({"image": "x"})));
        assert_eq!(
            entries,
            vec![
                json!({"remoteUser": "base"}),
                json!({"id": "./a", "init": true}),
                json!({"id": "./b"}),
            ]
        );
        let label = label_value(&[json!({"a": "q\"$"}), json!({})]);
        assert_eq!(label, r#"[{"a":"q\"$"}]"#);
        assert_eq!(parse_label(&label).0, vec![json!({"a": "q\"$"})]);
    }

    /// Checklist 18: entries are stored raw and substituted when applied.
    #[test]
    fn label_entries_substituted_at_apply_time() {
        use super::super::substitute::{LocalContext, substitute_local};
        let raw = json!({"image": "x", "containerEnv": {"TOKEN_DIR": "${localEnv:HOME}/t"}});
        let label = label_value(&[config_entry(&raw)]);
        assert!(label.contains("${localEnv:HOME}"), "{label}");
        let env = std::collections::HashMap::from([("HOME".to_owned(), "/h2".to_owned())]);
        let ctx = LocalContext {
            local_workspace_folder: None,
            container_workspace_folder: None,
            env: &env,
            config_file: None,
        };
        let (mut entries, _) = parse_label(&label);
        for entry in &mut entries {
            substitute_local(entry, &ctx).unwrap();
        }
        assert_eq!(merged(&entries)["containerEnv"]["TOKEN_DIR"], "/h2/t");
    }

    // --- merge table (checklist 67-75) ---

    /// Checklist 67.
    #[test]
    fn init_privileged_or() {
        let cases = [
            (vec![], false),
            (vec![json!({"privileged": false})], false),
            (
                vec![json!({"privileged": true}), json!({"privileged": false})],
                true,
            ),
            (
                vec![json!({"id": "f", "privileged": true}), json!({})],
                true,
            ),
        ];
        for (entries, expected) in cases {
            let m = merged(&entries);
            assert_eq!(m["privileged"], expected, "{entries:?}");
            assert_eq!(m["init"], false);
        }
        assert_eq!(
            merged(&[json!({"init": true}), json!({"init": false})])["init"],
            true
        );
    }

    /// Checklist 68.
    #[test]
    fn cap_add_security_opt_union() {
        let m = merged(&[
            json!({"capAdd": ["SYS_PTRACE", "NET_ADMIN"], "securityOpt": ["seccomp=unconfined"]}),
            json!({"capAdd": ["NET_ADMIN", "SYS_ADMIN"]}),
            json!({"capAdd": ["SYS_PTRACE"], "securityOpt": ["seccomp=unconfined", "label=disable"]}),
        ]);
        assert_eq!(m["capAdd"], json!(["SYS_PTRACE", "NET_ADMIN", "SYS_ADMIN"]));
        assert_eq!(
            m["securityOpt"],
            json!(["seccomp=unconfined", "label=disable"])
        );
        let none = merged(&[json!({"capAdd": []})]);
        assert!(none.get("capAdd").is_none());
    }

    /// Checklist 69: last value wins; devcontainer.json is last.
    #[test]
    fn single_values_last_wins() {
        let image = json!({
            "remoteUser": "img", "containerUser": "img", "waitFor": "onCreateCommand",
            "userEnvProbe": "none", "shutdownAction": "none", "overrideCommand": true,
            "updateRemoteUserUID": true, "otherPortsAttributes": {"onAutoForward": "silent"}
        });
        let feature = json!({"id": "f", "remoteUser": "feat"});
        let config = json!({
            "remoteUser": "json", "containerUser": "json", "waitFor": "postCreateCommand",
            "userEnvProbe": "loginShell", "shutdownAction": "stopContainer",
            "overrideCommand": false, "updateRemoteUserUID": false,
            "otherPortsAttributes": {"label": "x"}
        });
        let m = merged(&[image.clone(), feature.clone(), config]);
        for (key, expected) in [
            ("remoteUser", json!("json")),
            ("containerUser", json!("json")),
            ("waitFor", json!("postCreateCommand")),
            ("userEnvProbe", json!("loginShell")),
            ("shutdownAction", json!("stopContainer")),
            ("overrideCommand", json!(false)),
            ("updateRemoteUserUID", json!(false)),
            ("otherPortsAttributes", json!({"label": "x"})),
        ] {
            assert_eq!(m[key], expected, "{key}");
        }
        // Absent (or empty) in devcontainer.json: earlier entries win.
        let m = merged(&[
            image,
            feature,
            json!({"remoteUser": "", "overrideCommand": null}),
        ]);
        assert_eq!(m["remoteUser"], "feat");
        assert_eq!(m["containerUser"], "img");
        assert_eq!(m["overrideCommand"], true);
        // Nobody sets it: absent.
        let m = merged(&[json!({})]);
        for key in [
            "remoteUser",
            "waitFor",
            "overrideCommand",
            "updateRemoteUserUID",
        ] {
            assert!(m.get(key).is_none(), "{key}");
        }
    }

    /// Checklist 70 and the `remoteEnv: null` rule (spec-notes/0027).
    #[test]
    fn env_per_key_last_wins() {
        let m = merged(&[
            json!({"containerEnv": {"A": "img", "B": "img"}, "remoteEnv": {"R": "img", "S": "img"}}),
            json!({"id": "f", "containerEnv": {"C": "feat"}}),
            json!({"containerEnv": {"A": "json"}, "remoteEnv": {"S": null}}),
        ]);
        assert_eq!(
            m["containerEnv"],
            json!({"A": "json", "B": "img", "C": "feat"})
        );
        assert_eq!(m["remoteEnv"], json!({"R": "img", "S": null}));
        assert_eq!(merged(&[])["remoteEnv"], json!({}));
    }

    /// Checklist 71: same target ⇒ only the later one, in its position.
    #[test]
    fn mounts_dedupe_by_target() {
        let m = merged(&[
            json!({"mounts": ["type=volume,src=a,dst=/data", "source=b,target=/other,type=bind"]}),
            json!({"id": "f", "mounts": [{"type": "volume", "source": "c", "target": "/cache"}]}),
            json!({"mounts": [
                "type=bind,source=/host,destination=/data",
                {"type": "volume", "source": "d", "target": "/cache"}
            ]}),
        ]);
        assert_eq!(
            m["mounts"],
            json!([
                "source=b,target=/other,type=bind",
                "type=bind,source=/host,destination=/data",
                {"type": "volume", "source": "d", "target": "/cache"}
            ])
        );
        // Quoted fields (as in the default workspaceMount) parse whole.
        let m = merged(&[
            json!({"mounts": ["type=bind,\"source=/a,b\",\"target=/w/a,b\""]}),
            json!({"mounts": ["type=volume,source=v,\"target=/w/a,b\""]}),
            // Unquoted, the comma ends the target: `/w/a` is another target.
            json!({"mounts": ["type=volume,source=u,target=/w/a,b"]}),
        ]);
        assert_eq!(
            m["mounts"],
            json!([
                "type=volume,source=v,\"target=/w/a,b\"",
                "type=volume,source=u,target=/w/a,b"
            ])
        );
    }

    #[test]
    fn mount_parsing() {
        let parsed = parse_mount("Type=bind,src=/a,dst=/b,readonly,\"consistency=x\"\"y\"");
        assert_eq!(
            Value::Object(parsed),
            json!({"type": "bind", "source": "/a", "target": "/b", "readonly": true, "consistency": "x\"y"})
        );
        assert_eq!(
            parse_mount("source=/a=b,target=/c")["source"],
            json!("/a=b")
        );
        assert_eq!(mount_target(&json!({"dst": "/x"})), Some("/x".into()));
        assert_eq!(mount_target(&json!("type=tmpfs")), None);
        assert_eq!(mount_target(&json!(3)), None);
    }

    /// Checklist 72.
    #[test]
    fn forward_ports_union() {
        let m = merged(&[
            json!({"forwardPorts": [3000, "db:5432"]}),
            json!({"forwardPorts": ["localhost:3000", 8080, "db:5432", "localhost:9000"]}),
        ]);
        assert_eq!(m["forwardPorts"], json!([3000, "db:5432", 8080, 9000]));
        assert!(
            merged(&[json!({"forwardPorts": []})])
                .get("forwardPorts")
                .is_none()
        );
    }

    /// Checklist 73.
    #[test]
    fn ports_attributes_whole_object_per_port() {
        let m = merged(&[
            json!({"portsAttributes": {"3000": {"label": "a", "onAutoForward": "silent"}, "4000": {"label": "x"}}}),
            json!({"portsAttributes": {"3000": {"protocol": "https"}}}),
        ]);
        assert_eq!(
            m["portsAttributes"],
            json!({"3000": {"protocol": "https"}, "4000": {"label": "x"}})
        );
    }

    /// Checklist 74 and the GPU rules (spec-notes/0028).
    #[test]
    fn host_requirements_max() {
        let m = merged(&[
            json!({"hostRequirements": {"cpus": 2, "memory": "2048mb", "storage": "64gb"}}),
            json!({"hostRequirements": {"cpus": 4, "memory": "4gb"}}),
            json!({"hostRequirements": {"cpus": 1, "storage": "1tb"}}),
        ]);
        assert_eq!(
            m["hostRequirements"],
            json!({"cpus": 4, "memory": "4294967296", "storage": "1099511627776"})
        );
        assert!(
            merged(&[json!({"hostRequirements": {}})])
                .get("hostRequirements")
                .is_none()
        );
        let gpu = |values: &[Value]| -> Value {
            let entries: Vec<Value> = values
                .iter()
                .map(|g| json!({"hostRequirements": {"gpu": g}}))
                .collect();
            merged(&entries)
                .get("hostRequirements")
                .map_or(Value::Null, |h| h["gpu"].clone())
        };
        let cases = [
            (vec![json!(false)], Value::Null),
            (vec![json!(true)], json!(true)),
            (vec![json!(false), json!("optional")], json!("optional")),
            (vec![json!("optional"), json!(false)], json!("optional")),
            (
                vec![json!("optional"), json!("optional")],
                json!("optional"),
            ),
            (vec![json!("optional"), json!(true)], json!(true)),
            (vec![json!(true), json!(true)], json!(true)),
            (
                vec![
                    json!({"cores": 2}),
                    json!({"cores": 4, "memory": "8gb"}),
                    json!(true),
                ],
                json!({"cores": 4, "memory": "8589934592"}),
            ),
            (
                vec![json!("optional"), json!({"memory": "1kb"})],
                json!({"memory": "1024"}),
            ),
        ];
        for (values, expected) in cases {
            assert_eq!(gpu(&values), expected, "{values:?}");
        }
    }

    #[test]
    fn byte_sizes() {
        for (text, bytes) in [
            ("0", Some(0)),
            ("512", Some(512)),
            ("1kb", Some(1024)),
            ("2mb", Some(2 << 20)),
            ("4gb", Some(4 << 30)),
            ("1tb", Some(1 << 40)),
            ("4GB", None),
            ("4g", None),
            ("kb", None),
            ("", None),
            ("-1", None),
            ("1.5gb", None),
        ] {
            assert_eq!(parse_bytes(text), bytes, "{text}");
        }
        assert_eq!(parse_bytes(&"9".repeat(60)), Some(u128::MAX));
    }

    /// Checklist 75: every hook from every source is kept, whole, in order.
    #[test]
    fn lifecycle_hooks_accumulate() {
        let m = merged(&[
            json!({"postCreateCommand": "base"}),
            json!({"id": "f", "postCreateCommand": ["feat", "arg"], "onCreateCommand": {"a": "x", "b": ["y"]}}),
            json!({"postCreateCommand": "json", "postStartCommand": ""}),
        ]);
        assert_eq!(
            m["postCreateCommands"],
            json!(["base", ["feat", "arg"], "json"])
        );
        assert_eq!(m["onCreateCommands"], json!([{"a": "x", "b": ["y"]}]));
        assert_eq!(m["postStartCommands"], json!([]));
        assert_eq!(m["updateContentCommands"], json!([]));
        assert!(m.get("postCreateCommand").is_none());
    }

    #[test]
    fn entrypoints_and_customizations() {
        let m = merged(&[
            json!({"id": "a", "entrypoint": "/a.sh", "customizations": {"vscode": {"extensions": ["x"]}}}),
            json!({"id": "b", "entrypoint": ""}),
            json!({"id": "c", "entrypoint": "/c.sh"}),
            json!({"customizations": {"vscode": {"settings": {}}, "devcell": {"agent": "y"}}}),
        ]);
        assert_eq!(m["entrypoints"], json!(["/a.sh", "/c.sh"]));
        assert_eq!(
            m["customizations"],
            json!({"vscode": [{"extensions": ["x"]}, {"settings": {}}], "devcell": [{"agent": "y"}]})
        );
        let empty = merged(&[json!({})]);
        assert!(empty.get("entrypoints").is_none() && empty.get("customizations").is_none());
    }

    #[test]
    fn merge_ignores_junk_entries() {
        let m = merged(&[json!(3), json!(null), json!({"init": true}), json!("x")]);
        assert_eq!(m["init"], true);
    }

    /// The reference's `mergedConfiguration` shape: config keys kept in place, hooks replaced
    /// by arrays, merged-away properties removed.
    #[test]
    fn merge_configuration_shape() {
        let config = json!({
            "name": "n", "image": "img", "postCreateCommand": "make",
            "customizations": {"vscode": {}}, "shutdownAction": "none",
            "capAdd": [], "remoteUser": "me", "init": false
        });
        let feature = json!({"id": "f", "init": true, "postCreateCommand": "feat"});
        let entries = vec![feature, config_entry(&config)];
        let out = merge_configuration(&config, &entries);
        let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "name",
                "image",
                "remoteUser",
                "init",
                "privileged",
                "customizations",
                "onCreateCommands",
                "updateContentCommands",
                "postCreateCommands",
                "postStartCommands",
                "postAttachCommands",
                "remoteEnv",
                "containerEnv",
                "portsAttributes",
                "shutdownAction",
            ]
        );
        assert_eq!(out["init"], true);
        assert_eq!(out["postCreateCommands"], json!(["feat", "make"]));
        assert_eq!(out["customizations"], json!({"vscode": [{}]}));
        assert_eq!(out["shutdownAction"], "none");
        assert!(out.get("capAdd").is_none());
    }

    #[test]
    fn hook_commands_with_origins() {
        let entries = [
            json!({"postStartCommand": "base"}),
            json!({"id": "ghcr.io/o/f:1", "postStartCommand": ["a", "b"]}),
            json!({"id": "./g", "postStartCommand": ""}),
            json!({"postStartCommand": {"x": "y"}}),
        ];
        assert_eq!(
            hook_commands(&entries, "postStartCommand"),
            vec![
                ("devcontainer.json".to_owned(), json!("base")),
                ("ghcr.io/o/f:1".to_owned(), json!(["a", "b"])),
                ("devcontainer.json".to_owned(), json!({"x": "y"})),
            ]
        );
        assert!(hook_commands(&entries, "onCreateCommand").is_empty());
    }

    #[test]
    fn configured_users_default_remote_to_container_and_ignore_empty_strings() {
        let cases = [
            (
                json!({"remoteUser": "dev", "containerUser": "app"}),
                Some("dev"),
            ),
            (
                json!({"remoteUser": "", "containerUser": "app"}),
                Some("app"),
            ),
            (json!({"containerUser": "app"}), Some("app")),
            (json!({"remoteUser": 1, "containerUser": ""}), None),
            (json!(null), None),
        ];
        for (merged, want) in cases {
            assert_eq!(ConfiguredUsers::of(&merged).remote(), want, "{merged}");
        }
    }

    #[test]
    fn merged_configuration_reads_the_merge_typed() {
        let entries = [
            json!({"id": "f", "init": true, "capAdd": ["SYS_PTRACE"], "entrypoint": "/f.sh",
                   "containerEnv": {"A": "1", "N": 2}}),
            json!({"remoteUser": "dev", "updateRemoteUserUID": false, "overrideCommand": true,
                   "securityOpt": ["seccomp=unconfined", 3], "containerEnv": {"U": null},
                   "remoteEnv": {"P": "/bin", "Q": null, "R": true}}),
        ];
        let typed = MergedConfiguration::of(&merge(&entries));
        assert_eq!(
            typed,
            MergedConfiguration {
                users: ConfiguredUsers {
                    container_user: None,
                    remote_user: Some("dev".into()),
                },
                update_remote_user_uid: Some(false),
                override_command: Some(true),
                init: true,
                privileged: false,
                cap_add: vec!["SYS_PTRACE".into()],
                security_opt: vec!["seccomp=unconfined".into()],
                entrypoints: vec!["/f.sh".into()],
                container_env: vec![("A".into(), "1".into()), ("N".into(), "2".into())],
                remote_env: vec![
                    ("P".into(), Some("/bin".into())),
                    ("Q".into(), None),
                    ("R".into(), Some("true".into())),
                ],
            }
        );
        // Wrong JSON types say nothing.
        let junk = json!({"init": "yes", "overrideCommand": 1, "capAdd": "X", "containerEnv": []});
        assert_eq!(
            MergedConfiguration::of(&junk),
            MergedConfiguration::default()
        );
        assert_eq!(
            MergedConfiguration::of(&json!(null)),
            MergedConfiguration::default()
        );
    }
}
