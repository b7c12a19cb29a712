//! `read-configuration`: discover, parse, validate and substitute a `devcontainer.json` and
//! return the JSON document `@devcontainers/cli read-configuration` prints.
//!
//! Output shape (keys whose value is absent are omitted, as in the reference):
//!
//! ```json
//! {"configuration": {…, "configFilePath": {"$mid": 1, "fsPath": "…", "path": "…", "scheme": "vscode-fileHost"}},
//!  "workspace": {"workspaceFolder": "…", "workspaceMount": "…"},
//!  "mergedConfiguration": {…}, "featuresConfiguration": {…}}
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::config::{self, discover, jsonc, model};
use crate::diagnostics::Warning;
use crate::handoff::error::{HandoffError, Result};

/// Inputs of [`read_configuration`] (the `read-configuration` flags).
#[derive(Debug, Clone, Default)]
pub struct ReadConfigurationOptions {
    /// `--workspace-folder` (absolute; the cli defaults it to the current directory).
    pub workspace_folder: PathBuf,
    /// `--config`: an explicit config file (relative paths are taken against the current
    /// directory).
    pub config: Option<PathBuf>,
    /// `--mount-workspace-git-root` (default `true`): mount the git root of the workspace.
    pub mount_workspace_git_root: bool,
    /// `--include-merged-configuration`.
    pub include_merged_configuration: bool,
    /// `--include-features-configuration`.
    pub include_features_configuration: bool,
    /// The host environment used for `${localEnv:…}`/`${env:…}`.
    pub env: HashMap<String, String>,
}

/// The result of [`read_configuration`].
#[derive(Debug, Clone)]
pub struct ReadConfiguration {
    /// The JSON document to print (one line on stdout).
    pub output: Value,
    /// Non-fatal findings (unknown properties, duplicate keys), for stderr.
    pub warnings: Vec<Warning>,
    /// The config file that was read.
    pub config_file: PathBuf,
    /// The typed, substituted configuration.
    pub config: model::DevContainerConfig,
}

/// Reads the configuration of a workspace the way `devcontainer read-configuration` does.
///
/// Steps: discover the config ([`discover::discover`]), parse it ([`jsonc::read`]), validate
/// it ([`model::validate`]), substitute phase-1 variables and compute `workspaceFolder` /
/// `workspaceMount` ([`config::workspace::resolve`]), migrate legacy properties
/// ([`model::migrate_legacy`]), then build the output.
///
/// Errors: [`HandoffError::WorkspaceFolder`] when the folder does not exist;
/// [`HandoffError::Config`] for a missing, unreadable or invalid config (located).
pub fn read_configuration(opts: &ReadConfigurationOptions) -> Result<ReadConfiguration> {
    let workspace_folder = std::path::absolute(&opts.workspace_folder)
        .unwrap_or_else(|_| opts.workspace_folder.clone());
    if !workspace_folder.is_dir() {
        return Err(HandoffError::WorkspaceFolder {
            path: workspace_folder,
        });
    }
    let config_file = discover::discover(&workspace_folder, opts.config.as_deref())?;
    let doc = jsonc::read(&config_file)?;
    let mut warnings = doc.warnings.clone();
    let (_, model_warnings) = model::validate(&doc)?;
    warnings.extend(model_warnings);

    let mut value = doc.value.clone();
    let resolve = config::workspace::ResolveOptions {
        workspace_folder: workspace_folder.clone(),
        config_file: config_file.clone(),
        mount_workspace_git_root: opts.mount_workspace_git_root,
        env: opts.env.clone(),
    };
    let workspace =
        config::workspace::resolve(&mut value, &resolve).map_err(|e| locate(&doc, e))?;
    // Substitution keeps the shape, so locations from `doc` still apply.
    let (typed, _) = model::validate_value(&doc, &value)?;

    if let Value::Object(c) = &mut value {
        model::migrate_legacy(c);
    }
    let mut output = Map::new();
    let mut shown = value.clone();
    if let Value::Object(c) = &mut shown {
        c.insert("configFilePath".into(), file_uri(&config_file));
    }
    output.insert("configuration".into(), shown.clone());
    let mut ws = Map::new();
    ws.insert(
        "workspaceFolder".into(),
        Value::String(workspace.workspace_folder.clone()),
    );
    if let Some(mount) = &workspace.workspace_mount {
        ws.insert("workspaceMount".into(), Value::String(mount.clone()));
    }
    output.insert("workspace".into(), Value::Object(ws));
    if opts.include_features_configuration {
        output.insert(
            "featuresConfiguration".into(),
            features_configuration(&typed, &config_file),
        );
    }
    if opts.include_merged_configuration {
        let features = local_feature_entries(&typed, &config_file, &mut warnings);
        let entries = config::metadata::collect_entries(
            &[],
            &features,
            &config::metadata::config_entry(&value),
        );
        output.insert(
            "mergedConfiguration".into(),
            config::metadata::merge_configuration(&shown, &entries),
        );
    }
    Ok(ReadConfiguration {
        output: Value::Object(output),
        warnings,
        config_file,
        config: typed,
    })
}

/// Gives a substitution error (which knows its property path) the file position of that
/// property, so it renders like every other config error.
fn locate(doc: &jsonc::Document, err: config::ConfigError) -> config::ConfigError {
    match err {
        config::ConfigError::Substitution {
            path,
            message,
            hint,
            ..
        } => match jsonc::JsonPath::parse(&path) {
            Some(p) => config::ConfigError::Invalid {
                location: Box::new(doc.locate(&p)),
                message,
                hint,
            },
            None => config::ConfigError::Substitution {
                file: Some(doc.file.clone()),
                path,
                message,
                hint,
            },
        },
        other => other,
    }
}

/// The reference CLI's serialised `vscode-uri` for a local file.
pub fn file_uri(path: &Path) -> Value {
    let p = path.to_string_lossy();
    json!({"$mid": 1, "fsPath": p, "path": p, "scheme": "vscode-fileHost"})
}

/// How a `features` key refers to a Feature
/// ([spec: referencing Features](https://containers.dev/implementors/features-distribution/#referencing-a-feature)).
fn feature_source(key: &str, config_dir: &Path) -> Value {
    if key.starts_with("./") || key.starts_with("../") || key.starts_with('/') {
        // `components()` drops `.` segments: `/w/.devcontainer/./a` → `/w/.devcontainer/a`.
        let resolved: PathBuf = config_dir.join(key).components().collect();
        json!({"type": "file-path", "userFeatureId": key, "resolvedFilePath": resolved.to_string_lossy()})
    } else if key.starts_with("https://") || key.starts_with("http://") {
        json!({"type": "direct-tarball", "userFeatureId": key, "tarballUri": key})
    } else if !key.contains('/') && !key.contains('\\') {
        json!({"type": "legacy-short-id", "userFeatureId": key})
    } else {
        let lower = key.to_lowercase();
        let (name, digest) = match lower.split_once('@') {
            Some((n, d)) => (n.to_owned(), Some(d.to_owned())),
            None => (lower.clone(), None),
        };
        let last_slash = name.rfind('/').unwrap_or(0);
        let (resource, tag) = match name[last_slash..].rfind(':') {
            Some(i) if digest.is_none() => (
                name[..last_slash + i].to_owned(),
                Some(name[last_slash + i + 1..].to_owned()),
            ),
            _ => (name.clone(), None),
        };
        let (registry, path) = resource.split_once('/').unwrap_or(("", &resource));
        let id = path.rsplit('/').next().unwrap_or(path);
        let mut v = json!({"type": "oci", "userFeatureId": key, "registry": registry,
            "path": path, "resource": resource, "id": id});
        if let Some(map) = v.as_object_mut() {
            match (&digest, &tag) {
                (Some(d), _) => {
                    map.insert("digest".into(), json!(d));
                }
                (None, Some(t)) => {
                    map.insert("tag".into(), json!(t));
                }
                (None, None) => {
                    map.insert("tag".into(), json!("latest"));
                }
            }
        }
        v
    }
}

/// `featuresConfiguration`: one Feature set per `features` entry, as written, with its
/// parsed source kind. (Resolution, options and ordering belong to the `features` module.)
fn features_configuration(config: &model::DevContainerConfig, config_file: &Path) -> Value {
    let dir = config_file.parent().unwrap_or(Path::new("/"));
    let sets: Vec<Value> = config
        .features
        .iter()
        .map(|(key, value)| {
            let value = match value {
                model::FeatureValue::Version(v) => json!(v),
                model::FeatureValue::Enabled(b) => json!(b),
                model::FeatureValue::Options(o) => Value::Object(o.clone()),
            };
            json!({"features": [{"id": key, "value": value, "included": true}],
                "sourceInformation": feature_source(key, dir)})
        })
        .collect();
    json!({"featureSets": sets})
}

/// Image-metadata-like entries of local (`./…`) Features that can be read from disk, for the
/// merged configuration without an engine. Unreadable ones are skipped with a warning.
fn local_feature_entries(
    config: &model::DevContainerConfig,
    config_file: &Path,
    warnings: &mut Vec<Warning>,
) -> Vec<Value> {
    let dir = config_file.parent().unwrap_or(Path::new("/"));
    let mut out = Vec::new();
    for key in config.features.keys() {
        if !(key.starts_with("./") || key.starts_with("../")) {
            continue;
        }
        let file: PathBuf = dir
            .join(key)
            .join("devcontainer-feature.json")
            .components()
            .collect();
        match jsonc::read(&file) {
            Ok(doc) => out.push(config::metadata::feature_entry(key, &doc.value)),
            Err(e) => warnings.push(Warning {
                location: None,
                message: match std::error::Error::source(&e) {
                    Some(cause) => format!(
                        "local Feature `{key}` skipped in the merged configuration: {e}: {cause}"
                    ),
                    None => {
                        format!("local Feature `{key}` skipped in the merged configuration: {e}")
                    }
                },
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_source_kinds() {
        let d = Path::new("/w/.devcontainer");
        assert_eq!(feature_source("./a", d)["type"], "file-path");
        assert_eq!(feature_source("node", d)["type"], "legacy-short-id");
        assert_eq!(
            feature_source("https://x/devcontainer-feature-a.tgz", d)["type"],
            "direct-tarball"
        );
        let oci = feature_source("ghcr.io/devcontainers/features/node:1", d);
        assert_eq!(oci["resource"], "ghcr.io/devcontainers/features/node");
        assert_eq!(oci["tag"], "1");
        assert_eq!(oci["id"], "node");
        let local = feature_source("localhost:5000/ns/f", d);
        assert_eq!(local["registry"], "localhost:5000");
        assert_eq!(local["tag"], "latest");
        let dig = feature_source("ghcr.io/o/r/f@sha256:abc", d);
        assert_eq!(dig["digest"], "sha256:abc");
    }
}
