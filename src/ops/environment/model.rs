//! The record model: what a record holds (`schemas/environment.schema.json`), and reading and
//! writing it as a file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ops::error::{OpsError, Result};

/// The record's schema version (`schemaVersion`); a record of another version is refused.
pub const ENVIRONMENT_SCHEMA_VERSION: u32 = 1;

/// Files devcell hashes are bounded as the configuration is (spec-note 0433).
pub(super) const MAX_HASHED_BYTES: u64 = crate::config::jsonc::MAX_FILE_BYTES as u64;

/// What an `up`, `build` or handoff resolved (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvironmentRecord {
    /// Always [`ENVIRONMENT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The devcell version that made the record.
    pub devcell_version: String,
    /// The command that made it: `up`, `build` or `handoff`.
    pub command: String,
    /// The configuration: its files' hashes, as written and as merged.
    pub configuration: ConfigurationRecord,
    /// The image the configuration starts from.
    pub base_image: BaseImage,
    /// Every OCI or tarball Feature installed, by lock key.
    pub features: BTreeMap<String, FeaturePin>,
    /// The image the container runs (`up`, handoff) or that was built (`build`).
    pub image: BuiltImage,
    /// The security profile, grants and network.
    pub security: SecurityRecord,
    /// `customizations.devcell.verify`: the commands `devcell verify` runs.
    pub verify: Vec<String>,
    /// A handoff into a container devcell did not create (`handoff --container`, spec-note
    /// 0527): what its owner made it with. Such a record describes, it cannot be recreated:
    /// `--environment` refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalRecord>,
}

/// The container of an external handoff's record, as the engine reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalRecord {
    /// The container's id.
    pub container: String,
    /// Its name.
    pub name: String,
    /// The user the agent ran as (the merged `remoteUser`, else the container's user).
    pub user: String,
    /// Under `hardened`: the numeric `uid:gid` the agent's exec ran as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_user: Option<String>,
    /// Its mounts as the host sees them (a bind-backed volume as the bind it is).
    pub mounts: Vec<MountRecord>,
}

/// One mount of an external container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MountRecord {
    /// `bind`, `volume`, `tmpfs`, … (`unresolved-volume`: a volume devcell could not resolve).
    #[serde(rename = "type")]
    pub kind: String,
    /// The host folder (a bind), the volume's name, or why it is unresolved.
    pub source: String,
    /// Where it is in the container.
    pub target: String,
    /// Whether it is read-only.
    pub read_only: bool,
}

/// The configuration part of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigurationRecord {
    /// The `devcontainer.json` read, relative to the workspace folder.
    pub file: String,
    /// `sha256:<hex>` of each file the environment is made from (the configuration, its
    /// lockfile, its Dockerfile), by path relative to the workspace folder.
    pub files: BTreeMap<String, String>,
    /// The configuration as written (unsubstituted: no host variable's value is recorded).
    pub configuration: Value,
    /// The merged configuration the container was made with (informational: it is never
    /// compared, it holds this machine's paths).
    pub merged: Value,
}

/// The base image and how far it can be recreated elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaseImage {
    /// The configuration's `image` (none for a Dockerfile or Compose configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Its registry digest (`sha256:<hex>`), when the engine knows one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// A local image's id, when it has no registry digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_id: Option<String>,
    /// Why this base cannot be recreated exactly on another machine (`None`: it can).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_reproducible: Option<String>,
}

/// One Feature's resolution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeaturePin {
    /// `sha256:<hex>`: the manifest digest (OCI) or the tarball's sha256.
    pub digest: String,
    /// `<registry>/<repository>@sha256:<hex>` or the tarball URL, when the lockfile says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// The Feature's own version, when the lockfile says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The image built or run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuiltImage {
    /// The engine's image id (`sha256:…`).
    pub id: String,
    /// The name the container was created from, or the names `build` tagged.
    pub references: Vec<String>,
    /// `build --push`: each name pushed with its registry digest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pushed: BTreeMap<String, String>,
}

/// The security choice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityRecord {
    /// `hardened` or `reference`.
    pub profile: String,
    /// Every `--allow` value in force (settings and flags), sorted.
    pub grants: Vec<String>,
    /// `none`, `allowlist` or `default`.
    pub network: String,
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_of(bytes: &[u8]) -> String {
    crate::oci::digest::sha256_digest(bytes)
}

/// Reads a record a user names (`--environment FILE`): bounded, strict (unknown fields are
/// errors), of this schema version.
///
/// Errors: [`OpsError::Unsupported`] naming the file and what is wrong.
pub fn read_record(path: &Path) -> Result<EnvironmentRecord> {
    let bad = |message: String| OpsError::Unsupported {
        message: format!("environment record `{}`: {message}", path.display()),
        hint: Some("write one with `devcell up --environment-out FILE`".into()),
    };
    let text = crate::config::bounded::read_to_string(path, MAX_HASHED_BYTES)
        .map_err(|e| bad(e.to_string()))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    match value.get("schemaVersion").and_then(Value::as_u64) {
        Some(v) if v == u64::from(ENVIRONMENT_SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(bad(format!(
                "schema version {v}; this devcell reads version {ENVIRONMENT_SCHEMA_VERSION}"
            )));
        }
        None => return Err(bad("no `schemaVersion`".into())),
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// Writes `record` to `path` (`--environment-out`), pretty-printed, replacing it atomically.
///
/// Errors: [`OpsError::Unsupported`] naming the file.
pub fn write_record(path: &Path, record: &EnvironmentRecord) -> Result<()> {
    let fail = |e: std::io::Error| OpsError::Unsupported {
        message: format!("cannot write environment record `{}`: {e}", path.display()),
        hint: None,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    serde_json::to_writer_pretty(&mut file, record).map_err(|e| fail(e.into()))?;
    std::io::Write::write_all(&mut file, b"\n").map_err(fail)?;
    file.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ops::environment::fixtures::sample;

    #[test]
    fn a_record_round_trips_and_validates_against_its_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("env.json");
        write_record(&path, &sample()).unwrap();
        assert_eq!(read_record(&path).unwrap(), sample());

        let schema: Value = serde_json::from_str(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("schemas/environment.schema.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let mut external = sample();
        external.external = Some(ExternalRecord {
            container: "0123456789abcdef".into(),
            name: "devbox".into(),
            user: "1000:1000".into(),
            exec_user: Some("1000:1000".into()),
            mounts: vec![MountRecord {
                kind: "bind".into(),
                source: "/h/ws".into(),
                target: "/src".into(),
                read_only: false,
            }],
        });
        write_record(&path, &external).unwrap();
        assert_eq!(read_record(&path).unwrap(), external);
        for record in [external, sample()] {
            let value = serde_json::to_value(record).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{errors:?}");
        }
        let value = serde_json::to_value(sample()).unwrap();
        let mut extra = value.clone();
        extra["surprise"] = json!(1);
        assert!(!validator.is_valid(&extra));
    }

    #[test]
    fn a_record_of_another_version_or_with_unknown_fields_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("env.json");
        let mut value = serde_json::to_value(sample()).unwrap();
        value["schemaVersion"] = json!(2);
        std::fs::write(&path, value.to_string()).unwrap();
        let e = read_record(&path).unwrap_err().to_string();
        assert!(e.contains("schema version 2"), "{e}");

        let mut value = serde_json::to_value(sample()).unwrap();
        value["security"]["extra"] = json!(true);
        std::fs::write(&path, value.to_string()).unwrap();
        let e = read_record(&path).unwrap_err().to_string();
        assert!(e.contains("unknown field"), "{e}");

        std::fs::write(&path, "not json").unwrap();
        assert!(read_record(&path).is_err());
    }
}
