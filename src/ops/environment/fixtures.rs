//! The sample record the submodules' tests share.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

/// A complete record of an image configuration with one OCI Feature.
pub(crate) fn sample() -> EnvironmentRecord {
    EnvironmentRecord {
        schema_version: ENVIRONMENT_SCHEMA_VERSION,
        devcell_version: "0.1.0".into(),
        command: "up".into(),
        configuration: ConfigurationRecord {
            file: ".devcontainer/devcontainer.json".into(),
            files: BTreeMap::from([(".devcontainer/devcontainer.json".into(), sha256_of(b"{}"))]),
            configuration: json!({"image": "127.0.0.1:5000/base:1"}),
            merged: json!({"image": "127.0.0.1:5000/base:1", "remoteUser": "dev"}),
        },
        base_image: BaseImage {
            reference: Some("127.0.0.1:5000/base:1".into()),
            digest: Some(format!("sha256:{}", "a".repeat(64))),
            ..BaseImage::default()
        },
        features: BTreeMap::from([(
            "127.0.0.1:5000/f/hello".into(),
            FeaturePin {
                digest: format!("sha256:{}", "b".repeat(64)),
                resolved: None,
                version: None,
            },
        )]),
        image: BuiltImage {
            id: format!("sha256:{}", "c".repeat(64)),
            references: vec!["devcell/features:x".into()],
            pushed: BTreeMap::new(),
        },
        security: SecurityRecord {
            profile: "hardened".into(),
            grants: vec![],
            network: "none".into(),
        },
        verify: vec!["true".into()],
        external: None,
    }
}
