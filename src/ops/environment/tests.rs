use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::features::lockfile::LockedFeature;

/// A complete record of an image configuration with one OCI Feature.
fn sample() -> EnvironmentRecord {
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
    }
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

#[test]
fn feature_pins_take_resolved_and_version_only_from_a_matching_lock_entry() {
    let digest = format!("sha256:{}", "b".repeat(64));
    let installed = BTreeMap::from([
        ("r/f/a".to_string(), digest.clone()),
        ("r/f/b".to_string(), digest.clone()),
    ]);
    let mut lock = Lockfile::default();
    lock.features.insert(
        "r/f/a".into(),
        LockedFeature {
            version: "1.2.0".into(),
            resolved: format!("r/f/a@{digest}"),
            integrity: digest.clone(),
            depends_on: None,
        },
    );
    lock.features.insert(
        "r/f/b".into(),
        LockedFeature {
            version: "2.0.0".into(),
            resolved: "r/f/b@sha256:other".into(),
            integrity: format!("sha256:{}", "f".repeat(64)),
            depends_on: None,
        },
    );
    let pins = feature_pins(&installed, Some(&lock));
    assert_eq!(
        pins["r/f/a"].resolved.as_deref(),
        Some(&*format!("r/f/a@{digest}"))
    );
    assert_eq!(pins["r/f/a"].version.as_deref(), Some("1.2.0"));
    // the lockfile pins another digest than the one installed: not borrowed
    assert_eq!(pins["r/f/b"].resolved, None);
    assert_eq!(pins["r/f/b"].digest, digest);
}

#[test]
fn verify_commands_are_a_list_or_one_string() {
    let list = json!({"customizations": {"devcell": {"verify": ["cargo test", "make lint"]}}});
    assert_eq!(verify_commands(&list), ["cargo test", "make lint"]);
    let one = json!({"customizations": {"devcell": {"verify": "npm test"}}});
    assert_eq!(verify_commands(&one), ["npm test"]);
    assert!(verify_commands(&json!({})).is_empty());
}

#[test]
fn the_security_record_unites_settings_and_flags_sorted() {
    let mut settings = Settings::default();
    settings.security.allow = vec!["root".into(), "env:A".into()];
    settings.security.network = Some(crate::settings::NetworkMode::None);
    let flags = SecurityOptions {
        allow: vec!["env:A".into(), "build-network".into()],
        ..SecurityOptions::default()
    };
    let record = security_record("hardened", &flags, &settings);
    assert_eq!(record.grants, ["build-network", "env:A", "root"]);
    assert_eq!(record.network, "none");
    let flags = SecurityOptions {
        network: Some(crate::settings::NetworkMode::Allowlist),
        ..SecurityOptions::default()
    };
    assert_eq!(
        security_record("hardened", &flags, &settings).network,
        "allowlist"
    );
}

#[test]
fn a_tag_gets_its_own_repositorys_digest_or_is_a_local_image() {
    use crate::formats::image_reference::ImageReference;
    let reference = "127.0.0.1:5000/base:1";
    let parsed = ImageReference::parse(reference).unwrap();
    let digest = format!("sha256:{}", "a".repeat(64));
    let info = crate::engine::ImageInfo {
        id: format!("sha256:{}", "9".repeat(64)),
        repo_digests: vec![
            format!("other/repo@sha256:{}", "0".repeat(64)),
            format!("127.0.0.1:5000/base@{digest}"),
        ],
        ..Default::default()
    };
    let base = base_from_inspect(reference.into(), Some(&parsed), Some(&info));
    assert_eq!(base.digest.as_deref(), Some(&*digest));
    assert_eq!(base.not_reproducible, None);

    let local = crate::engine::ImageInfo {
        repo_digests: vec![],
        ..info
    };
    let base = base_from_inspect(reference.into(), Some(&parsed), Some(&local));
    assert_eq!(base.digest, None);
    assert_eq!(base.local_id.as_deref(), Some(&*local.id));
    assert!(base.not_reproducible.unwrap().contains("another machine"));
}

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
    let value = serde_json::to_value(sample()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
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

#[test]
fn the_store_keeps_each_record_by_hash_and_the_last_per_workspace() {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let store = EnvironmentStore::new(state.path());
    assert_eq!(store.last(workspace.path()).unwrap(), None);
    let first = store.store(workspace.path(), &sample()).unwrap();
    let mut second = sample();
    second.command = "build".into();
    let hash = store.store(workspace.path(), &second).unwrap();
    assert_ne!(first, hash);
    assert_eq!(store.load(&first).unwrap(), sample());
    assert_eq!(store.last(workspace.path()).unwrap(), Some(second));
    assert!(store.load("../x").is_err());
}

#[test]
fn the_configuration_record_hashes_files_relative_to_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let dc = ws.path().join(".devcontainer");
    std::fs::create_dir(&dc).unwrap();
    std::fs::write(dc.join("devcontainer.json"), r#"{"image":"x:1"}"#).unwrap();
    std::fs::write(dc.join("devcontainer-lock.json"), r#"{"features":{}}"#).unwrap();
    let loaded = crate::ops::load::load_configuration(&crate::ops::load::LoadOptions {
        workspace_folder: ws.path().to_path_buf(),
        ..Default::default()
    })
    .unwrap();
    let record = configuration_record(&loaded, &json!({})).unwrap();
    assert_eq!(record.file, ".devcontainer/devcontainer.json");
    assert_eq!(
        record.files.keys().collect::<Vec<_>>(),
        [
            ".devcontainer/devcontainer-lock.json",
            ".devcontainer/devcontainer.json"
        ]
    );
    assert_eq!(
        record.files[".devcontainer/devcontainer.json"],
        sha256_of(br#"{"image":"x:1"}"#)
    );
    assert_eq!(record.configuration, json!({"image": "x:1"}));
}
