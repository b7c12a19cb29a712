//! The `devcontainer-feature.json` model (spec-distilled §4.2; spec devcontainer-features.md).
//!
//! Known properties are typed; unknown properties are kept in [`FeatureMetadata::extra`] so
//! the metadata can be re-emitted (image label, collection metadata) without loss.

use std::path::Path;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{FeatureError, Result};
use crate::config::jsonc::{self, JsonPath};

/// The metadata file name inside a Feature folder.
pub const FEATURE_FILE: &str = "devcontainer-feature.json";

/// Reads `<dir>/devcontainer-feature.json` of a local Feature folder without following a
/// link in its place (`O_NOFOLLOW`; a FIFO never blocks): a metadata file linked to a host
/// file is never read (spec-note 0400). At most [`jsonc::MAX_FILE_BYTES`].
///
/// Errors: the open or read failure; a link, a non-regular or too large file, as
/// `InvalidData` naming it.
pub fn read_feature_file(dir: &Path) -> std::io::Result<String> {
    read_collection_file(dir, FEATURE_FILE)
}

/// Reads the file `name` directly in a collection item's folder `dir` (a Feature's or a
/// Template's metadata file, its `NOTES.md`) as [`read_feature_file`] does: never through a
/// link, never blocking on a FIFO, at most [`jsonc::MAX_FILE_BYTES`].
///
/// Errors: as [`read_feature_file`].
pub fn read_collection_file(dir: &Path, name: &str) -> std::io::Result<String> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read as _;
    let file = dir.join(name);
    let refused = |why: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("`{}` {why}: not read", file.display()),
        )
    };
    let folder = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let fd = match rustix::fs::openat(
        &folder,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => return Err(refused("is a symbolic link")),
        Err(e) => return Err(e.into()),
    };
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(refused("is not a regular file"));
    }
    let max = jsonc::MAX_FILE_BYTES as u64;
    let mut text = String::new();
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(refused("is larger than 4 MiB"));
    }
    Ok(text)
}

/// A parsed `devcontainer-feature.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureMetadata {
    /// Required; unique in its collection, equal to the folder name.
    pub id: String,
    /// Required (semver `x.y.z` for publishing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Documentation URL.
    #[serde(
        default,
        rename = "documentationURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub documentation_url: Option<String>,
    /// License URL.
    #[serde(
        default,
        rename = "licenseURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub license_url: Option<String>,
    /// Search keywords.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// `optionId → option`, in declaration order.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub options: IndexMap<String, FeatureOption>,
    /// Baked as image `ENV` before this Feature's `install.sh` runs.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub container_env: IndexMap<String, String>,
    /// Mounts added at container creation (string or object form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<FeatureMount>,
    /// The container must run privileged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privileged: Option<bool>,
    /// The container needs an init process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<bool>,
    /// Capabilities to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cap_add: Vec<String>,
    /// Security options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_opt: Vec<String>,
    /// Script run at every container start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    /// Tool-specific customizations, kept as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customizations: Option<Value>,
    /// Hard dependencies: `featureRef → options` (object, string shorthand or `true`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub depends_on: IndexMap<String, Value>,
    /// Soft dependencies: Feature resources without version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub installs_after: Vec<String>,
    /// Previous ids of this Feature in the same namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub legacy_ids: Vec<String>,
    /// Informative: warn, still install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// `onCreateCommand` contributed by the Feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_create_command: Option<LifecycleCommand>,
    /// `updateContentCommand` contributed by the Feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_content_command: Option<LifecycleCommand>,
    /// `postCreateCommand` contributed by the Feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_create_command: Option<LifecycleCommand>,
    /// `postStartCommand` contributed by the Feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_start_command: Option<LifecycleCommand>,
    /// `postAttachCommand` contributed by the Feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_attach_command: Option<LifecycleCommand>,
    /// Unknown properties, kept verbatim in file order.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// The declared type of a Feature option (the spec allows only these two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionType {
    /// `"type": "boolean"`; values reach `install.sh` as `true`/`false`.
    Boolean,
    /// `"type": "string"`.
    String,
}

/// One entry of `options`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureOption {
    /// `boolean` or `string`.
    #[serde(rename = "type")]
    pub option_type: OptionType,
    /// The default value (a bool for boolean options, a string for string options).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Strict list of allowed values (string options).
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<String>>,
    /// Suggested values; free-form values are allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposals: Option<Vec<String>>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Unknown keys, kept verbatim.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// A Feature mount: the Docker `--mount` string form or the spec's object form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FeatureMount {
    /// `type=volume,source=x,target=/y`.
    String(String),
    /// `{"type": "bind"|"volume", "source"?: …, "target": …}`.
    Object {
        /// `bind` or `volume`.
        #[serde(rename = "type")]
        mount_type: String,
        /// Source (volume name or host path); absent for anonymous volumes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// Target path in the container.
        target: String,
        /// Other keys, kept verbatim.
        #[serde(flatten)]
        extra: IndexMap<String, Value>,
    },
}

/// A lifecycle command contributed by a Feature (spec-distilled §2.3, §2.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LifecycleCommand {
    /// Run with `/bin/sh -c`.
    Shell(String),
    /// Run as an argv without a shell.
    Args(Vec<String>),
    /// Named entries run in parallel; each a string or an argv.
    Parallel(IndexMap<String, LifecycleCommandEntry>),
}

/// One entry of a parallel lifecycle command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LifecycleCommandEntry {
    /// Run with `/bin/sh -c`.
    Shell(String),
    /// Run as an argv without a shell.
    Args(Vec<String>),
}

impl FeatureMetadata {
    /// Parses `devcontainer-feature.json` text. `file` names the source in errors (a path, or
    /// e.g. `<manifest annotation>`). Comments and trailing commas are accepted.
    ///
    /// Errors: [`FeatureError::InvalidMetadata`] with line/column for syntax and type errors,
    /// and for schema violations checked by [`FeatureMetadata::validate`].
    pub fn parse(text: &str, file: &Path) -> Result<FeatureMetadata> {
        let invalid = |line: usize, column: usize, message: String| FeatureError::InvalidMetadata {
            file: file.to_path_buf(),
            line,
            column,
            message,
        };
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(strict) => {
                // Tolerate JSONC (comments, trailing commas) like devcontainer.json.
                let options = jsonc_parser::ParseOptions::default();
                match jsonc_parser::parse_to_value(text, &options) {
                    Ok(Some(v)) => to_serde(v),
                    Ok(None) => return Err(invalid(0, 0, "the file is empty".into())),
                    Err(_) => {
                        return Err(invalid(strict.line(), strict.column(), unlocated(&strict)));
                    }
                }
            }
        };
        if !value.is_object() {
            return Err(invalid(1, 1, "expected a JSON object at the root".into()));
        }
        let metadata: FeatureMetadata = match serde_json::from_value(value) {
            Ok(m) => m,
            Err(e) => {
                // Re-run on the text for a location when the text is strict JSON.
                let (line, column) = match serde_json::from_str::<FeatureMetadata>(text) {
                    Err(located) => (located.line(), located.column()),
                    Ok(_) => (0, 0),
                };
                return Err(invalid(line, column, unlocated(&e)));
            }
        };
        if let Err((path, message)) = metadata.check() {
            let (line, column) = match jsonc::parse(file, text) {
                Ok(doc) => {
                    let loc = doc.locate(&path);
                    (loc.line, loc.column)
                }
                Err(_) => (0, 0),
            };
            return Err(invalid(line, column, message));
        }
        Ok(metadata)
    }

    /// The metadata with its legacy top-level `extensions`/`settings` (kept in `extra`) moved
    /// into `customizations.vscode`, as the reference CLI resolves a Feature (spec-note 0006).
    /// Values of other types stay where they are.
    pub fn with_legacy_vscode_moved(mut self) -> Self {
        if !(self.extra.contains_key("extensions") || self.extra.contains_key("settings")) {
            return self;
        }
        let mut map = serde_json::Map::new();
        for key in ["extensions", "settings"] {
            if let Some(v) = self.extra.shift_remove(key) {
                map.insert(key.to_owned(), v);
            }
        }
        if let Some(c) = self.customizations.take() {
            map.insert("customizations".into(), c);
        }
        crate::config::model::migrate_feature_legacy(&mut map);
        self.customizations = map.remove("customizations");
        self.extra.extend(map);
        self
    }

    /// Reads and parses `<dir>/devcontainer-feature.json`.
    ///
    /// Errors: [`FeatureError::Io`] when the file cannot be read; see [`FeatureMetadata::parse`].
    pub fn read_dir(dir: &Path) -> Result<FeatureMetadata> {
        let file = dir.join(FEATURE_FILE);
        let text = read_feature_file(dir).map_err(|source| FeatureError::Io {
            path: file.clone(),
            source,
        })?;
        FeatureMetadata::parse(&text, &file)
    }

    /// Checks the schema rules serde cannot: non-empty `id`, option defaults matching their
    /// type, and string defaults inside `enum`. Returns the message of the first violation.
    pub fn validate(&self) -> std::result::Result<(), String> {
        self.check().map_err(|(_, message)| message)
    }

    /// [`FeatureMetadata::validate`] with the JSON path of the offending value.
    fn check(&self) -> std::result::Result<(), (JsonPath, String)> {
        if self.id.trim().is_empty() {
            return Err((
                JsonPath::root().key("id"),
                "`id` must be a non-empty string".into(),
            ));
        }
        for (name, option) in &self.options {
            let at = JsonPath::root().key("options").key(name);
            match (option.option_type, &option.default) {
                (_, None) => {}
                (OptionType::Boolean, Some(Value::Bool(_))) => {}
                (OptionType::String, Some(Value::String(d))) => {
                    if let Some(allowed) = &option.enum_values
                        && !allowed.contains(d)
                    {
                        return Err((
                            at.key("default"),
                            format!(
                                "option `{name}`: default `{d}` is not one of its `enum` values {}",
                                list(allowed)
                            ),
                        ));
                    }
                }
                (t, Some(other)) => {
                    return Err((
                        at.key("default"),
                        format!(
                            "option `{name}`: default must be a {} (found `{other}`)",
                            match t {
                                OptionType::Boolean => "boolean",
                                OptionType::String => "string",
                            }
                        ),
                    ));
                }
            }
            if option.option_type == OptionType::Boolean && option.enum_values.is_some() {
                return Err((
                    at.key("enum"),
                    format!("option `{name}`: `enum` is only allowed on string options"),
                ));
            }
        }
        Ok(())
    }

    /// `[id, …legacyIds]`: the names this Feature answers to within its namespace.
    pub fn aliases(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.id.as_str()).chain(self.legacy_ids.iter().map(String::as_str))
    }
}

/// serde_json's message without its ` at line L column C` suffix (we print the location).
fn unlocated(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Converts a jsonc-parser value to a serde_json value (numbers keep their JSON text).
fn to_serde(value: jsonc_parser::JsonValue<'_>) -> Value {
    use jsonc_parser::JsonValue as J;
    match value {
        J::String(s) => Value::String(s.into_owned()),
        J::Number(n) => serde_json::from_str(n).unwrap_or_else(|_| Value::String(n.to_string())),
        J::Boolean(b) => Value::Bool(b),
        J::Null => Value::Null,
        J::Array(items) => Value::Array(items.into_iter().map(to_serde).collect()),
        J::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k.into_owned(), to_serde(v)))
                .collect(),
        ),
    }
}

/// Renders `["a", "b"]` as `` `a`, `b` `` for messages.
pub(crate) fn list(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_metadata_file_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        std::fs::write(host.path().join("x.json"), r#"{"id": "host-secret"}"#).unwrap();
        std::os::unix::fs::symlink(host.path().join("x.json"), dir.path().join(FEATURE_FILE))
            .unwrap();
        let e = read_feature_file(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("symbolic link") && !e.contains("host-secret"),
            "{e}"
        );
        assert!(FeatureMetadata::read_dir(dir.path()).is_err());
        std::fs::remove_file(dir.path().join(FEATURE_FILE)).unwrap();
        std::fs::write(dir.path().join(FEATURE_FILE), r#"{"id": "f"}"#).unwrap();
        assert_eq!(FeatureMetadata::read_dir(dir.path()).unwrap().id, "f");
    }

    const DIND: &str = r#"{
        "id": "docker-in-docker",
        "version": "2.12.0",
        "name": "Docker (Docker-in-Docker)",
        "documentationURL": "https://example.com/dind",
        "options": {
            "version": {"type": "string", "proposals": ["latest", "20.10"], "default": "latest"},
            "moby": {"type": "boolean", "default": true, "description": "Install OSS Moby?"},
            "dockerDashComposeVersion": {"type": "string", "enum": ["none", "v1", "v2"], "default": "v2"}
        },
        "entrypoint": "/usr/local/share/docker-init.sh",
        "privileged": true,
        "containerEnv": {"DOCKER_BUILDKIT": "1"},
        "mounts": [
            {"source": "dind-var-lib-docker-${devcontainerId}", "target": "/var/lib/docker", "type": "volume"},
            "type=bind,source=/var/run/docker.sock,target=/var/run/docker-host.sock"
        ],
        "capAdd": ["SYS_PTRACE"],
        "securityOpt": ["seccomp=unconfined"],
        "init": true,
        "customizations": {"vscode": {"extensions": ["ms-azuretools.vscode-docker"]}},
        "dependsOn": {"ghcr.io/devcontainers/features/common-utils:2": {"installZsh": false}, "./x": "1"},
        "installsAfter": ["ghcr.io/devcontainers/features/common-utils"],
        "legacyIds": ["docker-from-docker"],
        "deprecated": false,
        "postCreateCommand": {"a": "echo a", "b": ["echo", "b"]},
        "postStartCommand": ["echo", "start"],
        "onCreateCommand": "echo create",
        "x-unknown": {"kept": [1, 2]}
    }"#;

    #[test]
    fn legacy_vscode_properties_move_into_customizations() {
        let m = FeatureMetadata::parse(
            r#"{"id": "f", "extensions": ["a"], "settings": {"s": 1}, "other": 2,
                "customizations": {"vscode": {"extensions": ["b"]}, "x": {}}}"#,
            Path::new("f.json"),
        )
        .unwrap()
        .with_legacy_vscode_moved();
        assert_eq!(
            m.customizations,
            Some(
                serde_json::json!({"vscode": {"extensions": ["b", "a"], "settings": {"s": 1}}, "x": {}})
            )
        );
        assert_eq!(m.extra.keys().collect::<Vec<_>>(), ["other"]);
    }

    #[test]
    fn parses_every_property_and_keeps_unknown_keys() {
        let m = FeatureMetadata::parse(DIND, Path::new("f.json")).unwrap();
        assert_eq!(m.id, "docker-in-docker");
        assert_eq!(m.version.as_deref(), Some("2.12.0"));
        assert_eq!(m.options.len(), 3);
        assert_eq!(m.options["moby"].option_type, OptionType::Boolean);
        assert_eq!(
            m.options["dockerDashComposeVersion"].enum_values.as_deref(),
            Some(&["none".to_string(), "v1".into(), "v2".into()][..])
        );
        assert_eq!(m.mounts.len(), 2);
        assert!(
            matches!(&m.mounts[0], FeatureMount::Object { mount_type, .. } if mount_type == "volume")
        );
        assert!(matches!(&m.mounts[1], FeatureMount::String(_)));
        assert_eq!(m.privileged, Some(true));
        assert_eq!(m.init, Some(true));
        assert_eq!(m.cap_add, ["SYS_PTRACE"]);
        assert_eq!(m.security_opt, ["seccomp=unconfined"]);
        assert_eq!(m.depends_on.len(), 2);
        assert_eq!(
            m.installs_after,
            ["ghcr.io/devcontainers/features/common-utils"]
        );
        assert_eq!(m.legacy_ids, ["docker-from-docker"]);
        assert!(
            matches!(m.post_create_command, Some(LifecycleCommand::Parallel(ref p)) if p.len() == 2)
        );
        assert!(matches!(
            m.post_start_command,
            Some(LifecycleCommand::Args(_))
        ));
        assert!(matches!(
            m.on_create_command,
            Some(LifecycleCommand::Shell(_))
        ));
        assert_eq!(m.extra["x-unknown"], serde_json::json!({"kept": [1, 2]}));
        assert_eq!(
            m.aliases().collect::<Vec<_>>(),
            ["docker-in-docker", "docker-from-docker"]
        );
        // Round trip keeps everything, including unknown keys.
        let again: FeatureMetadata =
            serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn syntax_error_is_located() {
        let e = FeatureMetadata::parse(
            "{\n  \"id\": \"x\",\n  \"version\" 1\n}",
            Path::new("f.json"),
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("f.json:3:"), "{s}");
    }

    #[test]
    fn type_error_is_located() {
        let e = FeatureMetadata::parse(
            "{\n  \"id\": \"x\",\n  \"privileged\": \"yes\"\n}",
            Path::new("f.json"),
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("f.json:3:"), "{s}");
        assert!(s.contains("expected a boolean"), "{s}");
    }

    #[test]
    fn comments_and_trailing_commas_accepted() {
        let m = FeatureMetadata::parse("{ // c\n \"id\": \"x\", }", Path::new("f.json")).unwrap();
        assert_eq!(m.id, "x");
    }

    #[test]
    fn schema_violations_are_located() {
        let text = "{\n  \"id\": \"x\",\n  \"options\": {\n    \"o\": {\"type\": \"string\", \"enum\": [\"a\"], \"default\": \"b\"}\n  }\n}";
        let e = FeatureMetadata::parse(text, Path::new("f.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid Feature metadata in `f.json:4:"),
            "{e}"
        );
        assert!(
            e.contains("default `b` is not one of its `enum` values `a`"),
            "{e}"
        );
    }

    #[test]
    fn schema_violations_rejected() {
        for (text, needle) in [
            (r#"{"id": ""}"#, "`id`"),
            (r#"{"version": "1"}"#, "missing field `id`"),
            (
                r#"{"id": "x", "options": {"o": {"type": "number", "default": 1}}}"#,
                "unknown variant",
            ),
            (
                r#"{"id": "x", "options": {"o": {"type": "boolean", "default": "true"}}}"#,
                "must be a boolean",
            ),
            (
                r#"{"id": "x", "options": {"o": {"type": "string", "default": true}}}"#,
                "must be a string",
            ),
            (
                r#"{"id": "x", "options": {"o": {"type": "string", "enum": ["a"], "default": "b"}}}"#,
                "not one of",
            ),
            ("[]", "JSON object"),
        ] {
            let e = FeatureMetadata::parse(text, Path::new("f.json"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
