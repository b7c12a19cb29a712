//! The drift check of `--environment FILE`: the inputs of a record compared with the inputs
//! now, before anything is created, and what a recreated environment produced differently.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::EnvironmentRequest;
use super::collect::{
    base_image, configuration_record, lock_digests, security_record, verify_commands,
};
use super::model::{BuiltImage, ENVIRONMENT_SCHEMA_VERSION, EnvironmentRecord, FeaturePin};
use super::pins::RecordedFeatures;
use crate::config::model::ConfigKind;
use crate::diagnostics::Warning;
use crate::engine::Engine;
use crate::ops::error::{Difference, OpsError, Result};
use crate::ops::load::LoadedConfiguration;
use crate::ops::lockfile_io::LockfileAt;
use crate::ops::options::UpOptions;
use crate::progress::Reporter;

/// What must be equal for a reproduction, as JSON paths and values: the configuration file
/// and files, the configuration as written, the base image, the Features, the security
/// choice. devcell's version, the merged configuration and the image are not inputs.
fn inputs(record: &EnvironmentRecord) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let c = &record.configuration;
    out.insert("configuration.file".into(), json!(c.file));
    for (path, hash) in &c.files {
        out.insert(format!("configuration.files.{path}"), json!(hash));
    }
    out.insert(
        "configuration.configuration".into(),
        c.configuration.clone(),
    );
    let base = &record.base_image;
    out.insert("baseImage.reference".into(), json!(base.reference));
    out.insert("baseImage.digest".into(), json!(base.digest));
    out.insert("baseImage.localId".into(), json!(base.local_id));
    for (key, pin) in &record.features {
        out.insert(format!("features.{key}"), json!(pin.digest));
    }
    let s = &record.security;
    out.insert("security.profile".into(), json!(s.profile));
    out.insert("security.grants".into(), json!(s.grants));
    out.insert("security.network".into(), json!(s.network));
    out
}

/// Every input that differs between `recorded` and `current` ([`inputs`]), in path order; a
/// field only one of them has is a difference with `null` on the other side.
pub fn differences(recorded: &EnvironmentRecord, current: &EnvironmentRecord) -> Vec<Difference> {
    let (before, now) = (inputs(recorded), inputs(current));
    let mut fields: Vec<&String> = before.keys().chain(now.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter_map(|field| {
            let (r, c) = (
                before.get(field).cloned().unwrap_or(Value::Null),
                now.get(field).cloned().unwrap_or(Value::Null),
            );
            (r != c).then(|| Difference {
                field: field.clone(),
                recorded: r,
                current: c,
            })
        })
        .collect()
}

/// What differs in what the operation produced rather than in its inputs: devcell's version
/// and the image's id (a rebuild that is not bit-for-bit the same is reported, not refused).
pub fn outcome_differences(
    recorded: &EnvironmentRecord,
    current: &EnvironmentRecord,
) -> Vec<Difference> {
    let mut out = Vec::new();
    if recorded.devcell_version != current.devcell_version {
        out.push(Difference {
            field: "devcellVersion".into(),
            recorded: json!(recorded.devcell_version),
            current: json!(current.devcell_version),
        });
    }
    if recorded.image.id != current.image.id {
        out.push(Difference {
            field: "image.id".into(),
            recorded: json!(recorded.image.id),
            current: json!(current.image.id),
        });
    }
    out
}

/// The Features a resolution of `loaded` gives now (the lockfile honoured as `opts` says),
/// by lock key: their metadata is fetched, not their layers.
///
/// Errors: the resolution's (a registry, a Feature, the lockfile).
async fn resolved_features(
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
) -> Result<BTreeMap<String, String>> {
    let parts = crate::ops::entries::FeatureRequestParts::of(loaded);
    if parts.features.is_empty() {
        return Ok(BTreeMap::new());
    }
    let lock_at = LockfileAt::of(loaded);
    let state = lock_at.read(opts.lockfile)?;
    let recorded = opts.recorded_features.as_ref();
    let honoured = RecordedFeatures::over(recorded, state.lockfile());
    let fetcher = crate::ops::entries::feature_fetcher(opts)?;
    let plan = fetcher
        .plan(&crate::features::fetch::PlanRequest {
            features: &parts.features,
            override_order: &parts.override_order,
            config_dir: &parts.config_dir,
            devcontainer_dir: &parts.devcontainer_dir,
            lockfile: honoured.as_ref().map(|l| (l, lock_at.path.as_path())),
        })
        .await
        .map_err(|e| RecordedFeatures::explain(recorded, e.into()))?;
    Ok(lock_digests(&plan.lockfile()))
}

/// The inputs of `opts`' environment now, before anything is created ([`inputs`] of the
/// record returned; its image is empty): the configuration loaded and judged as `up` loads
/// it, the base image as the engine has it (pulled first when missing, as `up` would), the
/// Features resolved, the security choice (with `network`, the network the command gives its
/// container instead of `up`'s choice: a handoff's).
///
/// Errors: as loading, pulling and resolving.
pub(super) async fn current_inputs(
    engine: &dyn Engine,
    opts: &UpOptions,
    network: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<EnvironmentRecord> {
    let choice = crate::ops::up::load_up(opts)?;
    let loaded = &choice.loaded;
    if let (ConfigKind::Image, Some(reference)) = (loaded.typed.kind(), &loaded.typed.image)
        && engine.inspect_image(reference).await?.is_none()
    {
        engine.pull_image(reference, reporter).await?;
    }
    let mut security = security_record(choice.profile.name(), &opts.security, &opts.settings);
    if let Some(network) = network {
        security.network = network.to_string();
    }
    Ok(EnvironmentRecord {
        schema_version: ENVIRONMENT_SCHEMA_VERSION,
        devcell_version: env!("CARGO_PKG_VERSION").to_string(),
        command: "check".into(),
        configuration: configuration_record(loaded, &Value::Null)?,
        base_image: base_image(engine, loaded).await?,
        features: resolved_features(
            loaded,
            &crate::ops::permissions::with_registry_hosts(engine, loaded, opts).await?,
        )
        .await?
        .into_iter()
        .map(|(key, digest)| {
            let pin = FeaturePin {
                digest,
                resolved: None,
                version: None,
            };
            (key, pin)
        })
        .collect(),
        image: BuiltImage::default(),
        security,
        verify: verify_commands(&loaded.value),
        external: None,
    })
}

/// With `--environment FILE`: the current inputs compared with the record's before anything
/// is created; a difference refuses ([`OpsError::EnvironmentDrift`]) or, with
/// `--allow-drift`, becomes a warning. `network`: as [`current_inputs`].
///
/// Errors: [`OpsError::EnvironmentDrift`]; as [`current_inputs`].
pub async fn check_drift(
    engine: &dyn Engine,
    opts: &UpOptions,
    request: &EnvironmentRequest,
    network: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<Vec<Warning>> {
    let Some((path, recorded)) = &request.recorded else {
        return Ok(Vec::new());
    };
    refuse_external(path, recorded)?;
    reporter.report(crate::progress::Event::Status(format!(
        "checking the environment against `{}`",
        path.display()
    )));
    let now = current_inputs(engine, opts, network, reporter).await?;
    let found = differences(recorded, &now);
    if !found.is_empty() && !request.allow_drift {
        return Err(OpsError::EnvironmentDrift {
            record: path.clone(),
            differences: found,
        });
    }
    Ok(found
        .iter()
        .map(|d| Warning {
            location: None,
            message: format!("environment drift (allowed): {d}"),
        })
        .collect())
}

/// A record of a handoff into a container devcell did not create describes it, and cannot be
/// recreated: its owner chose its image, mounts and user, none of which a configuration of
/// the workspace says (spec-note 0527).
///
/// Errors: [`OpsError::Unsupported`] naming the record and the container.
pub fn refuse_external(path: &std::path::Path, recorded: &EnvironmentRecord) -> Result<()> {
    let Some(external) = &recorded.external else {
        return Ok(());
    };
    Err(OpsError::Unsupported {
        message: format!(
            "the environment record `{}` is of a handoff into the container `{}` ({}), which devcell did not create: its owner chose its image, mounts and user, so devcell cannot recreate it",
            path.display(),
            external.name,
            crate::ops::target::short(&external.container)
        ),
        hint: Some(
            "hand off into that container again with `--container`, or record an environment devcell makes (`devcell up --environment-out FILE`)".into(),
        ),
    })
}

/// What the recreated environment produced differently from the record (the image id,
/// devcell's version): reported, never refused.
pub fn outcome_warnings(
    request: &EnvironmentRequest,
    made: Option<&EnvironmentRecord>,
) -> Vec<Warning> {
    let (Some((_, recorded)), Some(made)) = (&request.recorded, made) else {
        return Vec::new();
    };
    outcome_differences(recorded, made)
        .iter()
        .map(|d| Warning {
            location: None,
            message: format!("the recreated environment differs from the record: {d}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ops::environment::fixtures::sample;
    use crate::ops::environment::model::sha256_of;

    #[test]
    fn a_record_of_an_external_container_is_refused_by_name() {
        let path = std::path::Path::new("env.json");
        assert!(refuse_external(path, &sample()).is_ok());
        let mut record = sample();
        record.external = Some(crate::ops::environment::ExternalRecord {
            container: "0123456789abcdef".into(),
            name: "devbox".into(),
            user: "1000:1000".into(),
            exec_user: Some("1000:1000".into()),
            mounts: Vec::new(),
        });
        let e = refuse_external(path, &record).unwrap_err().to_string();
        assert!(
            e.contains("`env.json`") && e.contains("`devbox` (0123456789ab)"),
            "{e}"
        );
    }

    #[test]
    fn an_identical_record_has_no_differences() {
        assert!(differences(&sample(), &sample()).is_empty());
        assert!(outcome_differences(&sample(), &sample()).is_empty());
    }

    #[test]
    fn each_changed_input_is_named_with_both_values() {
        let recorded = sample();
        let mut current = sample();
        current
            .configuration
            .files
            .insert(".devcontainer/devcontainer.json".into(), sha256_of(b"{ }"));
        current.base_image.digest = Some(format!("sha256:{}", "d".repeat(64)));
        current.features.clear();
        current.security.network = "default".into();
        current.security.grants = vec!["root".into()];
        let found = differences(&recorded, &current);
        let fields: Vec<&str> = found.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "baseImage.digest",
                "configuration.files..devcontainer/devcontainer.json",
                "features.127.0.0.1:5000/f/hello",
                "security.grants",
                "security.network",
            ]
        );
        let feature = &found[2];
        assert_eq!(
            feature.recorded,
            json!(format!("sha256:{}", "b".repeat(64)))
        );
        assert_eq!(feature.current, Value::Null);
        assert_eq!(
            found[4].to_string(),
            "`security.network`: recorded `none`, now `default`"
        );
    }

    #[test]
    fn the_merged_configuration_image_and_version_are_not_inputs() {
        let recorded = sample();
        let mut current = sample();
        current.configuration.merged = json!({"other": "machine"});
        current.image.id = format!("sha256:{}", "e".repeat(64));
        current.devcell_version = "9.9.9".into();
        current.command = "handoff".into();
        assert!(differences(&recorded, &current).is_empty());
        let outcome: Vec<String> = outcome_differences(&recorded, &current)
            .into_iter()
            .map(|d| d.field)
            .collect();
        assert_eq!(outcome, ["devcellVersion", "image.id"]);
    }

    #[test]
    fn a_changed_configuration_as_written_is_a_difference() {
        let mut current = sample();
        current.configuration.configuration = json!({"image": "127.0.0.1:5000/base:2"});
        let found = differences(&sample(), &current);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].field, "configuration.configuration");
        assert!(found[0].to_string().contains("recorded {\"image\""));
    }
}
