//! Host paths as the policy compares them: lexically normalised absolute paths, "is within",
//! and whether a bind exposes an engine socket (the socket list is [`crate::security::known`]'s,
//! shared with the audit).

use std::path::{Component, Path};

use crate::security::known::{ENGINE_SOCKET_PATHS, is_engine_socket_name};

/// Lexically normalises an absolute path (`.`/`..`/duplicate `/` resolved, no trailing `/`);
/// `None` for a relative path.
pub fn normalize_path(path: &str) -> Option<String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    let mut parts: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    Some(format!("/{}", parts.join("/")))
}

pub(super) fn path_string(p: &Path) -> String {
    normalize_path(&p.to_string_lossy()).unwrap_or_else(|| p.to_string_lossy().into_owned())
}

/// Whether `path` is `base` or inside it (both normalised).
pub fn is_within(path: &str, base: &str) -> bool {
    if base == "/" {
        return true;
    }
    path == base
        || path
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether binding `path` exposes an engine socket: it is one (by name or known place, or the
/// socket devcell itself uses), or a folder containing one of those.
pub fn is_engine_socket(path: &str, engine_socket: Option<&Path>) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    if is_engine_socket_name(name) {
        return true;
    }
    let mut known: Vec<String> = ENGINE_SOCKET_PATHS.iter().map(|s| s.to_string()).collect();
    if let Some(s) = engine_socket {
        known.push(path_string(s));
    }
    known.iter().any(|s| is_within(s, path))
}
