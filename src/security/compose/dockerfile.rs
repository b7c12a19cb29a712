//! A Compose build's Dockerfile (spec-note 0612): found from the service's `build` (inline, or
//! in its local context, read without following links and bounded) and judged by the shared
//! [`crate::security::dockerfile`] readings.

use std::path::Path;

use serde_json::Value;

use super::fields::is_remote_context;
use crate::security::dockerfile::{frontend, has_cache_mount, read_dockerfile};

/// Whether a build's Dockerfile (`dockerfile_inline`, or `dockerfile` in its local context,
/// read without following links, bounded) has a `RUN --mount=type=cache`: a cache the engine
/// shares with every other build that names the same id (another workspace's builds). A
/// Dockerfile that cannot be read (a link, not a regular file, above
/// [`crate::security::dockerfile::DOCKERFILE_MAX`], a read error) counts as one: what it holds
/// is unknown (fail closed). A missing one has no cache mount (the build fails without it),
/// but a missing default `Dockerfile` has its lowercase `dockerfile` judged, which a builder
/// may take instead.
pub(super) fn build_uses_cache_mount(build: &Value) -> bool {
    match build_dockerfile(build) {
        Ok(Some(text)) => has_cache_mount(&text),
        Ok(None) => false,
        Err(()) => true,
    }
}

/// The text of a build's Dockerfile: `dockerfile_inline`, else `dockerfile` (default
/// `Dockerfile`, then `dockerfile`) in its local context, read without following links and
/// bounded. `Ok(None)`: none, or a remote context (a request of its own, `build-context:`:
/// granting it trusts what the URL holds); `Err`: it cannot be read.
pub(super) fn build_dockerfile(build: &Value) -> std::result::Result<Option<String>, ()> {
    if let Some(inline) = build.get("dockerfile_inline").and_then(Value::as_str) {
        return Ok(Some(inline.to_string()));
    }
    let Some(context) = build.get("context").and_then(Value::as_str) else {
        return Ok(None);
    };
    if is_remote_context(context) {
        return Ok(None);
    }
    let file = build
        .get("dockerfile")
        .and_then(Value::as_str)
        .unwrap_or("Dockerfile");
    let mut names = vec![file];
    if file == "Dockerfile" {
        names.push("dockerfile");
    }
    for name in names {
        if let Some(text) = read_dockerfile(&Path::new(context).join(name))? {
            return Ok(Some(text));
        }
    }
    Ok(None)
}

/// The string values of a Compose `build`'s `args` (as Compose passes them; an argument
/// without a value, taken from Compose's environment, is left out: the builder's to decide).
pub(super) fn build_args(build: &Value) -> std::collections::BTreeMap<String, String> {
    build
        .get("args")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

/// The frontend a Compose build names beside its Dockerfile's text (attacks G9): the
/// `BUILDKIT_SYNTAX` build argument, else the Dockerfile's `# syntax=` directive
/// ([`frontend`]).
pub fn frontend_of(build: &Value, text: Option<&str>) -> Option<String> {
    frontend(
        build
            .pointer("/args/BUILDKIT_SYNTAX")
            .and_then(Value::as_str),
        text,
    )
}
