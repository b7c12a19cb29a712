//! Whose a Compose project's volumes and networks are (spec-note 0613, attacks G6).
//!
//! The project name is the reference CLI's (`<folder name>_devcontainer`, or the files'
//! `name:`), so two workspaces can name one project: `~/src/api` and a fork in
//! `~/review/api`, or any repository writing `name: api_devcontainer`. Compose's project label
//! says which *project* a volume is, not which workspace: under `hardened` a project volume
//! or network is this workspace's only when it also carries devcell's workspace label
//! ([`VOLUME_WORKSPACE_LABEL`], the host workspace folder, as on the volumes devcell creates
//! for devcontainer.json mounts), which devcell writes into the override file
//! ([`workspace_labels`]) so Compose creates them with it. Anything else the engine already
//! holds under a name of the model is [`Foreign`], a `volume:`/`network:` request.
//!
//! Pure: the caller inspects the engine.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::engine::compose::PROJECT_LABEL;
use crate::names::VOLUME_WORKSPACE_LABEL;

/// Why a volume or network the engine already holds is not this workspace's project's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Foreign {
    /// Another Compose project's (its project label), or no project's (`None`).
    OtherProject(Option<String>),
    /// This project's, made for another workspace (its host folder): the project name is
    /// shared (same folder name, or the files' `name:`).
    OtherWorkspace(String),
    /// This project's, without devcell's workspace label: made by hand, by another tool, or
    /// by devcell before it labelled project resources (spec-note 0613).
    Unlabelled,
}

impl Foreign {
    /// What the request's source says after the property (`volumes`, `networks`): whose it
    /// is, and for an unlabelled one what to do when it is this workspace's own.
    pub fn describe(&self) -> String {
        match self {
            Foreign::OtherProject(Some(project)) => format!("of the Compose project `{project}`"),
            Foreign::OtherProject(None) => "not made by Compose for this project".to_string(),
            Foreign::OtherWorkspace(folder) => format!("made for another workspace, `{folder}`"),
            Foreign::Unlabelled => format!(
                "this project's without devcell's `{VOLUME_WORKSPACE_LABEL}` label: made by hand, \
                 by another tool or by a devcell before 0613; if it is this workspace's, grant it, \
                 or remove it to have it made again labelled"
            ),
        }
    }
}

/// Whose a volume or network with `labels` is to `project` of the host workspace folder
/// `workspace` (`None` under `reference`: Compose's project label alone decides, as before).
/// `None` when it is this workspace's project's.
pub fn foreign_of(
    labels: &BTreeMap<String, String>,
    project: &str,
    workspace: Option<&Path>,
) -> Option<Foreign> {
    let owner = labels.get(PROJECT_LABEL).map(String::as_str);
    if owner != Some(project) {
        return Some(Foreign::OtherProject(owner.map(str::to_string)));
    }
    let workspace = workspace?.to_string_lossy();
    match labels.get(VOLUME_WORKSPACE_LABEL) {
        Some(folder) if *folder == workspace => None,
        Some(folder) => Some(Foreign::OtherWorkspace(folder.clone())),
        None => Some(Foreign::Unlabelled),
    }
}

/// The override file's additions that have Compose create the model's own volumes and
/// networks (not `external`) labelled for `workspace`: `{"volumes": {<key>: {"labels":
/// {<label>: <folder>}}}, "networks": …}` (unescaped: the caller escapes `$`). Compose keeps
/// an existing volume as it is (its labels cannot change), so one made before is still
/// judged by [`foreign_of`].
pub fn workspace_labels(model: &Value, workspace: &Path) -> Value {
    let mut out = Map::new();
    for top in ["volumes", "networks"] {
        let keys: Map<String, Value> = model
            .get(top)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(_, def)| def.get("external").and_then(Value::as_bool) != Some(true))
            .map(|(key, _)| {
                (
                    key.clone(),
                    json!({"labels": {VOLUME_WORKSPACE_LABEL: workspace.to_string_lossy()}}),
                )
            })
            .collect();
        if !keys.is_empty() {
            out.insert(top.to_string(), Value::Object(keys));
        }
    }
    Value::Object(out)
}
