//! Recreating from a record fetches each Feature by the digest the record names, not by its
//! tag (spec-note 0520): a tag that moved since the record still recreates the recorded
//! Feature while its registry (or a mirror, or the Feature cache) has that digest, and a
//! digest that is gone refuses with [`OpsError::RecordedFeatureGone`].
//!
//! The record's digests are a lockfile laid over the workspace's own
//! ([`RecordedFeatures::over`]): every resolution of the command honours it (the permission
//! judgement's metadata preview, the drift check, the build), so what is judged is what is
//! installed.

use std::path::PathBuf;

use super::EnvironmentRequest;
use super::model::EnvironmentRecord;
use crate::features::error::FeatureError;
use crate::features::lockfile::{LockedFeature, Lockfile};
use crate::ops::error::OpsError;

pub use crate::ops::options::RecordedFeatures;

impl RecordedFeatures {
    /// The pins of `record`, read from `file`: each Feature's recorded digest (with its
    /// `resolved` and `version` when the record has them).
    pub fn of_record(file: PathBuf, record: &EnvironmentRecord) -> RecordedFeatures {
        let mut pins = Lockfile::default();
        for (key, pin) in &record.features {
            let entry = LockedFeature {
                version: pin.version.clone().unwrap_or_default(),
                resolved: pin.resolved.clone().unwrap_or_default(),
                integrity: pin.digest.clone(),
                depends_on: None,
            };
            pins.features.insert(key.clone(), entry);
        }
        RecordedFeatures { record: file, pins }
    }

    /// The pins of the `--environment` record a command was given (`None`: none given, or a
    /// record without Features).
    pub fn of(request: &EnvironmentRequest) -> Option<RecordedFeatures> {
        let (file, record) = request.recorded.as_ref()?;
        let pins = RecordedFeatures::of_record(file.clone(), record);
        (!pins.pins.features.is_empty()).then_some(pins)
    }

    /// The lockfile a resolution honours: `workspace`'s entries with the recorded digests
    /// over them (a Feature added since the record keeps the workspace's pin, if any).
    pub fn over(
        recorded: Option<&RecordedFeatures>,
        workspace: Option<&Lockfile>,
    ) -> Option<Lockfile> {
        let Some(recorded) = recorded else {
            return workspace.cloned();
        };
        let mut lock = workspace.cloned().unwrap_or_default();
        lock.features.extend(
            recorded
                .pins
                .features
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        Some(lock)
    }

    /// `e`, said in the record's words when it is a recorded Feature that could not be
    /// fetched at its recorded digest ([`OpsError::RecordedFeatureGone`]); any other error as
    /// it is.
    pub fn explain(recorded: Option<&RecordedFeatures>, e: OpsError) -> OpsError {
        let Some(recorded) = recorded else {
            return e;
        };
        match e {
            OpsError::Feature(FeatureError::Locked {
                feature,
                integrity,
                source,
                ..
            }) if recorded.pins.features.contains_key(&feature) => OpsError::RecordedFeatureGone {
                record: recorded.record.clone(),
                feature,
                digest: integrity,
                source,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::environment::fixtures::sample;

    const KEY: &str = "127.0.0.1:5000/f/hello";

    #[test]
    fn a_records_digests_are_laid_over_the_workspaces_lockfile() {
        let recorded = RecordedFeatures::of_record("env.json".into(), &sample());
        let digest = format!("sha256:{}", "b".repeat(64));
        assert_eq!(recorded.pins.features[KEY].integrity, digest);

        let mut workspace = Lockfile::default();
        let locked = |integrity: &str| LockedFeature {
            version: "1.0.0".into(),
            resolved: String::new(),
            integrity: integrity.into(),
            depends_on: None,
        };
        workspace
            .features
            .insert(KEY.into(), locked(&format!("sha256:{}", "0".repeat(64))));
        workspace
            .features
            .insert("other/f/added".into(), locked("sha256:added"));
        let over = RecordedFeatures::over(Some(&recorded), Some(&workspace)).unwrap();
        // the record wins for its Features; one added since keeps the workspace's pin
        assert_eq!(over.features[KEY].integrity, digest);
        assert_eq!(over.features["other/f/added"].integrity, "sha256:added");
        // no record: the workspace's lockfile as it is; a record alone pins on its own
        assert_eq!(
            RecordedFeatures::over(None, Some(&workspace)),
            Some(workspace)
        );
        assert_eq!(RecordedFeatures::over(None, None), None);
        assert_eq!(
            RecordedFeatures::over(Some(&recorded), None).unwrap(),
            recorded.pins
        );
    }

    #[test]
    fn a_recorded_digest_that_cannot_be_fetched_is_said_in_the_records_words() {
        let recorded = RecordedFeatures::of_record("ci/env.json".into(), &sample());
        let gone = |feature: &str| {
            OpsError::Feature(FeatureError::Locked {
                feature: feature.into(),
                integrity: "sha256:gone".into(),
                path: "devcontainer-lock.json".into(),
                source: "manifest unknown".into(),
            })
        };
        let e = RecordedFeatures::explain(Some(&recorded), gone(KEY));
        assert!(matches!(e, OpsError::RecordedFeatureGone { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains("ci/env.json"), "{text}");
        assert!(text.contains(KEY) && text.contains("sha256:gone"), "{text}");
        assert_eq!(
            e.code(),
            crate::diagnostics::ErrorCode::EnvironmentDrift,
            "exit 18, as every refusal of a record"
        );
        let hint = crate::diagnostics::Hint::hint(&e).unwrap();
        assert!(hint.contains("--environment"), "{hint}");
        // a Feature the record does not pin (the workspace's lockfile pins it): unchanged
        let other = RecordedFeatures::explain(Some(&recorded), gone("other/f/x"));
        assert!(matches!(other, OpsError::Feature(_)));
        let none = RecordedFeatures::explain(None, gone(KEY));
        assert!(matches!(none, OpsError::Feature(_)));
    }
}
