//! The legacy top-level VS Code properties (`extensions`, `settings`, `devPort`), moved into
//! `customizations.vscode` as the reference CLI does.

use serde_json::{Map, Value};

/// Moves legacy top-level `extensions`, `settings` and `devPort` into
/// `customizations.vscode`, as the reference CLI does: `extensions` are appended to
/// `customizations.vscode.extensions`; `settings` are merged under
/// `customizations.vscode.settings` (the latter win); `devPort` moves only when
/// `customizations.vscode.devPort` is absent. Values of other types are left in place.
pub fn migrate_legacy(config: &mut Map<String, Value>) {
    move_legacy_vscode(config, true);
}

/// Moves a Feature's legacy top-level `extensions` and `settings` (its
/// `devcontainer-feature.json` from before `customizations`) into `customizations.vscode`
/// with [`migrate_legacy`]'s rules, as the reference CLI does for every Feature it resolves.
/// A Feature has no `devPort`: that key is left alone (spec-note 0006).
pub fn migrate_feature_legacy(feature: &mut Map<String, Value>) {
    move_legacy_vscode(feature, false);
}

/// [`migrate_legacy`] and [`migrate_feature_legacy`]; `with_dev_port` also moves `devPort`.
fn move_legacy_vscode(config: &mut Map<String, Value>, with_dev_port: bool) {
    let ext = config.get("extensions").filter(|v| v.is_array()).is_some();
    let set = config.get("settings").filter(|v| v.is_object()).is_some();
    let dev = with_dev_port && config.contains_key("devPort");
    if !(ext || set || dev) {
        return;
    }
    let mut vscode = config
        .get("customizations")
        .and_then(|c| c.get("vscode"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if ext && let Some(Value::Array(legacy)) = config.shift_remove("extensions") {
        let mut list = match vscode.get("extensions") {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        list.extend(legacy);
        vscode.insert("extensions".into(), Value::Array(list));
    }
    if set && let Some(Value::Object(mut legacy)) = config.shift_remove("settings") {
        if let Some(Value::Object(current)) = vscode.get("settings") {
            for (k, v) in current {
                legacy.insert(k.clone(), v.clone());
            }
        }
        vscode.insert("settings".into(), Value::Object(legacy));
    }
    if dev
        && !vscode.contains_key("devPort")
        && let Some(port) = config.shift_remove("devPort")
    {
        vscode.insert("devPort".into(), port);
    }
    let customizations = config
        .entry("customizations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !customizations.is_object() {
        *customizations = Value::Object(Map::new());
    }
    if let Value::Object(c) = customizations {
        c.insert("vscode".into(), Value::Object(vscode));
    }
}
