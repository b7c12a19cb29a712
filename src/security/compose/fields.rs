//! The small readings of Compose's resolved model the judgements share: a service's list
//! properties, whether a build context is remote, where a host path the repository names
//! lands ([`host_path_permission`]), what a volume's driver options mount. A leaf: it imports
//! nothing else of `compose`.

use std::path::Path;

use serde_json::Value;

use crate::formats::json;
use crate::security::host_path::{Place, Places, resolve};
use crate::security::policy::Permission;

/// Whether a build context of Compose's resolved model is fetched rather than read from a
/// host folder: Compose makes every local context absolute, so a context that is not an
/// absolute path is a URL (`https://…`, `git@host:repo`, `github.com/o/r`).
pub(super) fn is_remote_context(context: &str) -> bool {
    !Path::new(context).is_absolute()
}

/// The `services` of a Compose model (none when it has no such map).
pub(super) fn services_of(model: &Value) -> impl Iterator<Item = (&String, &Value)> {
    model
        .get("services")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// The strings of a list property of `value` (other items skipped).
pub(super) fn strings_of(value: &Value, key: &str) -> Vec<String> {
    json::strings(value.get(key))
}

/// The requests of one top-level `secrets`/`configs` definition: its host `file`, its host
/// `environment` variable.
pub(super) fn secret_requests(
    def: &Value,
    places: &Places,
    property: &str,
    push: &mut impl FnMut(Permission, &str),
) {
    if let Some(file) = def.get("file").and_then(Value::as_str)
        && let Some(p) = host_path_permission(file, places)
    {
        push(p, property);
    }
    if let Some(var) = def.get("environment").and_then(Value::as_str) {
        push(Permission::HostEnv(var.to_string()), property);
    }
}

/// The host folder of a BuildKit `type=local` cache entry (`type=local,src=/x`), by its
/// `field` (`src` for `cache_from`, `dest` for `cache_to`); `None` for other cache types.
pub(super) fn local_cache_path<'a>(entry: &'a str, field: &str) -> Option<&'a str> {
    let mut local = false;
    let mut path = None;
    for part in entry.split(',') {
        match part.trim().split_once('=') {
            Some(("type", "local")) => local = true,
            Some((k, v)) if k == field => path = Some(v),
            _ => {}
        }
    }
    local.then_some(path).flatten()
}

/// Whether a namespace mode joins another service of the project (`service:<name>`).
pub(super) fn mode_is_service(mode: Option<&str>) -> bool {
    mode.is_some_and(|m| m.starts_with("service:"))
}

/// The request of a named volume with driver options other than a bind: they mount what
/// they name, a host device (`type: ext4, device: /dev/vda`: a [`Permission::Mount`] of the
/// device) or an overlay of host folders (`o: lowerdir=…`: a [`Permission::Volume`] of the
/// volume, its options being no single path); `None` without driver options.
pub(super) fn driver_mounted_volume(model: &Value, volume: &str) -> Option<Permission> {
    let opts = model
        .get("volumes")?
        .get(volume)?
        .get("driver_opts")?
        .as_object()?;
    if opts.is_empty() {
        return None;
    }
    let device = opts
        .get("device")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(if device.starts_with('/') {
        Permission::Mount(device.to_string())
    } else {
        Permission::Volume(volume.to_string())
    })
}

/// The request a host path the repository names asks for, judged where it resolves: none
/// inside the workspace; never the engine socket or the home folder (or a folder holding it);
/// otherwise a grantable [`Permission::Mount`] of the resolved path.
pub(super) fn host_path_permission(written: &str, places: &Places) -> Option<Permission> {
    let path = Path::new(written);
    if !path.is_absolute() {
        // Compose resolves relative paths; one it left relative cannot be placed.
        return Some(Permission::Mount(written.to_string()));
    }
    // one devcell cannot resolve is never judged by its text (spec-note 0400, attacks F1/F2)
    let Ok(resolved) = resolve(path) else {
        return Some(Permission::UnresolvablePath(written.to_string()));
    };
    let text = resolved.to_string_lossy().into_owned();
    match places.place(&resolved) {
        Place::Workspace => None,
        Place::EngineSocket => Some(Permission::EngineSocket(text)),
        Place::Root => Some(Permission::HostHome(text)),
        Place::HostHome
            if places
                .home
                .as_deref()
                .is_some_and(|h| resolved.starts_with(h) && resolved != h) =>
        {
            Some(Permission::Mount(text))
        }
        Place::HostHome => Some(Permission::HostHome(text)),
        Place::Outside => Some(Permission::Mount(text)),
    }
}

/// A number Compose wrote as a number or a string (`"536870912"`, `"0.5"`).
pub(super) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

// `value` with every object's keys sorted (the model keeps the files' order).
pub(super) use crate::formats::json::sorted_keys as canonical;

/// The seconds of a duration in Compose's resolved model, which writes every duration as Go
/// prints one (`1000h0m0s`, `1m30s`, `500ms`, `1.5s`): numbers each followed by a unit (`h`,
/// `m`, `s`, `ms`, `us`/`µs`, `ns`). `None` for anything else.
pub(super) fn go_duration_seconds(text: &str) -> Option<f64> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    Some(total)
}
