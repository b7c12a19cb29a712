use std::path::Path;

use serde_json::json;

use super::schema::{TOP_LEVEL_PROPERTIES, is_host_port, is_size};
use super::*;
use crate::config::error::Result;
use crate::config::jsonc;
use crate::diagnostics::Warning;

fn check(text: &str) -> Result<(DevContainerConfig, Vec<Warning>)> {
    let doc = jsonc::parse(Path::new("/w/devcontainer.json"), text)?;
    validate(&doc)
}

fn err(text: &str) -> String {
    match check(text) {
        Ok(_) => panic!("expected an error for {text}"),
        Err(e) => {
            let loc = e.location().unwrap();
            let text = e.to_string();
            let rest = text.strip_prefix(&format!("{loc}: ")).unwrap().to_owned();
            format!("{}:{}: {rest}", loc.line, loc.column)
        }
    }
}

#[test]
fn validate_kinds() {
    assert_eq!(
        check(r#"{"image": "a"}"#).unwrap().0.kind(),
        ConfigKind::Image
    );
    assert_eq!(
        check(r#"{"build": {"dockerfile": "D"}}"#).unwrap().0.kind(),
        ConfigKind::Dockerfile
    );
    assert_eq!(
        check(r#"{"dockerFile": "D", "context": ".."}"#)
            .unwrap()
            .0
            .kind(),
        ConfigKind::Dockerfile
    );
    assert_eq!(
        check(r#"{"dockerComposeFile": "c.yml", "service": "s"}"#)
            .unwrap()
            .0
            .kind(),
        ConfigKind::Compose
    );
    assert_eq!(check(r#"{}"#).unwrap().0.kind(), ConfigKind::None);
}

#[test]
fn validate_forward_ports_message() {
    assert_eq!(
        err("{\n  \"forwardPorts\": [\"abc\"]\n}"),
        "2:20: forwardPorts[0]: expected an integer 0-65535 or \"host:port\", found \"abc\""
    );
    assert!(check(r#"{"forwardPorts": [3000, "db:5432", "${localEnv:P}"]}"#).is_ok());
    assert!(err(r#"{"forwardPorts": [70000]}"#).contains("found 70000"));
}

#[test]
fn validate_lifecycle_forms() {
    let (c, _) =
        check(r#"{"postCreateCommand": {"a": "x", "b": ["y", "z"]}, "onCreateCommand": ["a"]}"#)
            .unwrap();
    assert!(
        matches!(c.post_create_command, Some(LifecycleCommand::Parallel(ref m)) if m.len() == 2)
    );
    assert_eq!(
        c.on_create_command,
        Some(LifecycleCommand::Exec(vec!["a".into()]))
    );
    assert!(
        err(r#"{"postStartCommand": 5}"#)
            .starts_with("1:22: postStartCommand: expected a command string")
    );
    assert!(
        err(r#"{"postStartCommand": {"a": 5}}"#)
            .contains("postStartCommand.a: expected a command string or an array")
    );
}

#[test]
fn validate_unknown_property_warns_and_keeps() {
    let (c, w) = check("{\"image\": \"a\",\n \"fooBar\": 1}").unwrap();
    assert_eq!(c.unknown.get("fooBar"), Some(&json!(1)));
    assert_eq!(w.len(), 1);
    assert!(
        w[0].to_string()
            .contains("2:2: fooBar: unknown property `fooBar`"),
        "{}",
        w[0]
    );
}

/// Issue 28 item 5: a typo gets the property it most likely means; something unlike any
/// property gets none; a deprecated legacy property says where it goes.
#[test]
fn unknown_properties_suggest_the_closest_and_deprecated_ones_say_where_they_go() {
    let (_, w) = check(
        r#"{"image": "a", "remoteUsr": "x", "postcreatecommand": "y", "zzz": 1,
            "hostRequirements": {"cpu": 2}, "extensions": ["a.b"]}"#,
    )
    .unwrap();
    let all: Vec<String> = w.iter().map(|w| w.message.clone()).collect();
    assert_eq!(
        all,
        [
            "unknown property `remoteUsr` (did you mean `remoteUser`?); it is kept as written",
            "unknown property `postcreatecommand` (did you mean `postCreateCommand`?); it is kept as written",
            "unknown property `zzz`; it is kept as written",
            "unknown property `cpu` in `hostRequirements` (did you mean `cpus`?); it is kept as written",
            "deprecated property `extensions`: it is applied as `customizations.vscode.extensions` (as the reference CLI does); write it there",
        ]
    );
    assert_eq!(did_you_mean("image", &["name", "image"]), Some("image"));
    assert_eq!(did_you_mean("foo", TOP_LEVEL_PROPERTIES), None);
}

#[test]
fn validate_mount_strings() {
    assert!(check(r#"{"mounts": ["source=a,target=/b,type=volume", {"type": "bind", "source": "/x", "target": "/y"}]}"#).is_ok());
    assert!(
        err(r#"{"mounts": ["/a:/b"]}"#).contains("mounts[0]: expected a Docker `--mount` string")
    );
    assert!(err(r#"{"mounts": [{"type": "bind", "source": "/x"}]}"#).contains("expected `target`"));
}

#[test]
fn validate_image_and_dockerfile_conflict() {
    assert_eq!(
        err("{\"image\": \"a\",\n \"build\": {\"dockerfile\": \"D\"}}"),
        "2:26: build.dockerfile: expected either `image` or `build.dockerfile`, found both"
    );
}

#[test]
fn validate_shutdown_action_matches_kind() {
    assert!(check(r#"{"image": "a", "shutdownAction": "stopContainer"}"#).is_ok());
    assert_eq!(
        err(r#"{"image": "a", "shutdownAction": "stopCompose"}"#),
        "1:34: shutdownAction: expected \"none\" or \"stopContainer\" for an image or Dockerfile config, found \"stopCompose\""
    );
    assert!(
        check(r#"{"dockerComposeFile": "c", "service": "s", "shutdownAction": "stopCompose"}"#)
            .is_ok()
    );
}

#[test]
fn validate_compose_requires_service() {
    assert_eq!(
        err(r#"{"dockerComposeFile": "c.yml"}"#),
        "1:23: dockerComposeFile: expected `service` (the compose service to connect to) with `dockerComposeFile`, found none"
    );
}

#[test]
fn validate_host_requirements() {
    let (c, _) =
        check(r#"{"hostRequirements": {"cpus": 4, "memory": "8gb", "gpu": "optional"}}"#).unwrap();
    assert_eq!(
        c.host_requirements.unwrap().gpu,
        Some(GpuRequirement::Optional)
    );
    assert!(err(r#"{"hostRequirements": {"memory": "8 GB"}}"#).contains("expected a size"));
    assert!(err(r#"{"hostRequirements": {"cpus": 0}}"#).contains("expected an integer ≥ 1"));
}

#[test]
fn migrate_legacy_moves_vscode_properties() {
    let mut v = json!({"extensions": ["a"], "settings": {"x": 1, "y": 1}, "devPort": 5,
        "customizations": {"vscode": {"extensions": ["b"], "settings": {"y": 2}}}});
    migrate_legacy(v.as_object_mut().unwrap());
    assert_eq!(
        v,
        json!({"customizations": {"vscode": {"extensions": ["b", "a"], "settings": {"x": 1, "y": 2}, "devPort": 5}}})
    );
}

#[test]
fn migrate_feature_legacy_moves_extensions_and_settings_but_not_dev_port() {
    let mut v = json!({"id": "f", "extensions": ["a"], "settings": {"x": 1, "y": 1}, "devPort": 5,
        "customizations": {"vscode": {"extensions": ["b"], "settings": {"y": 2}}}});
    migrate_feature_legacy(v.as_object_mut().unwrap());
    assert_eq!(
        v,
        json!({"id": "f", "devPort": 5, "customizations": {"vscode": {"extensions": ["b", "a"], "settings": {"x": 1, "y": 2}}}})
    );
    let mut plain = json!({"id": "f", "devPort": 5});
    migrate_feature_legacy(plain.as_object_mut().unwrap());
    assert_eq!(plain, json!({"id": "f", "devPort": 5}));
}

#[test]
fn size_and_host_port_patterns() {
    assert!(is_size("16gb") && is_size("1024") && !is_size("gb") && !is_size("1pb"));
    assert!(is_host_port("db:5432") && !is_host_port("DB:5432") && !is_host_port("a:99999"));
}
