//! The Compose services' builds under a closed network (spec-note 0442, attacks K8): the
//! decision of [`security::compose::closed_builds`] written as a Compose file devcell adds
//! after the repository's, so `docker compose build <service>` (the primary's image) and the
//! `up` that builds the other services' images both build without a network.

use std::path::PathBuf;

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::ops::compose::ComposeTarget;
use crate::ops::error::{OpsError, Result};
use crate::ops::state_folder::StateFolder;
use crate::security::{self, Grants, PermissionRequest, SecurityProfile};

/// `target` with the closed-build file among its files when the project's network is `closed`
/// under `hardened` and a service builds (else `target` as it was); the services' build
/// network requests are added to `requests`.
///
/// Errors: [`crate::ops::OpsError::Security`] when a request is refused (nothing is built),
/// [`crate::ops::OpsError::Unsupported`] when the file cannot be written.
pub(crate) fn close_builds(
    target: ComposeTarget,
    (profile, grants): (&SecurityProfile, &Grants),
    closed: bool,
    requests: &mut Vec<PermissionRequest>,
) -> Result<ComposeTarget> {
    let decided = security::compose::closed_builds(profile, grants, &target.model, closed);
    if let Some(refused) = security::policy::refusal(profile, &decided.requests) {
        return Err(refused.into());
    }
    for request in decided.requests {
        if !requests.contains(&request) {
            requests.push(request);
        }
    }
    if decided.services.is_empty() {
        return Ok(target);
    }
    let mut file = json!({"services": Value::Object(decided.services)});
    crate::engine::compose::escape_interpolation(&mut file);
    let path = write_override(&target.project.name, &file)?;
    let mut files = target.project.files.clone();
    files.push(path);
    Ok(ComposeTarget {
        project: target.with_files(files),
        ..target
    })
}

/// The folder of `project`'s override files in the state folder `store`
/// (`<state>/compose/<project>`): a file in it is devcell's, not the repository's.
pub(crate) fn override_dir(store: &StateFolder, project: &str) -> PathBuf {
    store.root().join("compose").join(project)
}

/// Writes the override file into devcell's state folder
/// (`<state>/compose/<project>/docker-compose.devcell-<sha256 of content, 16 hex>.json`, or
/// `.yml` when a list replaces the repository's: [`override_text`]), where it stays for the
/// project's later `up`s (the container's config-files label names it).
///
/// Errors: [`OpsError::Unsupported`] when no state folder is known or it cannot be written.
pub(crate) fn write_override(project: &str, file: &Value) -> Result<PathBuf> {
    let failed = |message: String| OpsError::Unsupported {
        message,
        hint: Some(format!(
            "devcell keeps Compose override files in its state folder; set `{}` to a writable folder",
            crate::ops::state_folder::STATE_DIR_ENV
        )),
    };
    let store = StateFolder::open_default()
        .ok_or_else(|| failed("no state folder for the Compose override file".into()))?;
    let (text, extension) = override_text(file).map_err(failed)?;
    let digest = hex::encode(sha2::Sha256::digest(&text));
    let dir = override_dir(&store, project);
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("cannot create `{}`: {e}", dir.display())))?;
    let path = dir.join(format!(
        "docker-compose.devcell-{}.{extension}",
        &digest[..16]
    ));
    std::fs::write(&path, &text)
        .map_err(|e| failed(format!("cannot write `{}`: {e}", path.display())))?;
    Ok(path)
}

/// The override file's text and extension: JSON (`json`), unless a service property is a
/// one-entry object `{"!override": value}` ([`crate::security::compose::OVERRIDE_TAG`]: a list
/// that must replace the repository's, which Compose otherwise merges), written as YAML with
/// Compose's `!override` tag (`yml`; spec-note 0431).
///
/// Errors: the serialiser's, as text.
pub(crate) fn override_text(file: &Value) -> std::result::Result<(Vec<u8>, &'static str), String> {
    use crate::security::compose::OVERRIDE_TAG;
    use serde_yaml::value::{Tag, TaggedValue};
    // (service, property) of each `{"!override": value}`, found on the JSON once
    let tagged: Vec<(&String, &String)> = file
        .get("services")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, props)| Some((name, props.as_object()?)))
        .flat_map(|(name, props)| {
            props
                .iter()
                .filter(|(_, v)| {
                    v.as_object()
                        .is_some_and(|o| o.len() == 1 && o.contains_key(OVERRIDE_TAG))
                })
                .map(move |(key, _)| (name, key))
        })
        .collect();
    if tagged.is_empty() {
        let text = serde_json::to_vec_pretty(file).map_err(|e| e.to_string())?;
        return Ok((text, "json"));
    }
    let mut yaml: serde_yaml::Value = serde_yaml::to_value(file).map_err(|e| e.to_string())?;
    for (service, key) in tagged {
        let Some(value) = yaml
            .get_mut("services")
            .and_then(|s| s.get_mut(service.as_str()))
            .and_then(|p| p.get_mut(key.as_str()))
        else {
            continue;
        };
        if let Some(inner) = value.get(OVERRIDE_TAG).cloned() {
            *value = serde_yaml::Value::Tagged(Box::new(TaggedValue {
                tag: Tag::new("override"),
                value: inner,
            }));
        }
    }
    let text = serde_yaml::to_string(&yaml).map_err(|e| e.to_string())?;
    Ok((text.into_bytes(), "yml"))
}

#[cfg(test)]
mod override_text_tests {
    use super::*;

    /// spec-note 0431: a replacing list is written with Compose's `!override` tag (YAML);
    /// without one the file stays JSON.
    #[test]
    fn a_replacing_list_makes_the_override_yaml_with_its_tag() {
        let plain = serde_json::json!({"services": {"db": {"restart": "no"}}});
        let (text, extension) = override_text(&plain).unwrap();
        assert_eq!(extension, "json");
        assert_eq!(serde_json::from_slice::<Value>(&text).unwrap(), plain);
        let tagged = serde_json::json!({"services": {"db": {
            "restart": "no",
            "ports": {"!override": [{"target": 5432, "host_ip": "127.0.0.1"}]}
        }}});
        let (text, extension) = override_text(&tagged).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(extension, "yml");
        assert!(text.contains("ports: !override"), "{text}");
        let back: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            back["services"]["db"]["restart"].as_str(),
            Some("no"),
            "{text}"
        );
    }
}
