//! GPUs as a permission: a device outside the hardened baseline, asked for by the
//! configuration's `hostRequirements.gpu` and granted by the user (`--allow gpu`, or `gpu` in
//! the `[security] allow` list of config.toml; spec-note 0646).
//!
//! A Compose service's GPU reservation is the request `device:gpu`
//! ([`compose_device_requests`]); the same grant covers it, so one word grants GPUs whatever
//! kind of configuration asks. Only a reservation of a plain GPU's shape is that request: any
//! other device entry is its own request (attacks J9).

use serde_json::Value;

use crate::engine::GpuRequest;
use crate::security::permissions::Permission;

/// The name of a GPU in a [`Permission::Device`] request (a Compose service's reservation).
const GPU_DEVICE: &str = "gpu";

/// The permission a container's GPU request is: [`Permission::Gpu`] naming what the
/// configuration asked.
pub fn permission(gpu: &GpuRequest) -> Permission {
    Permission::Gpu(gpu.asked.clone())
}

/// Whether an `--allow` value grants GPUs: `gpu`, or `device:gpu` (the grant a Compose
/// service's GPU request names).
pub fn is_gpu_grant(value: &str) -> bool {
    value == "gpu" || value.strip_prefix("device:") == Some(GPU_DEVICE)
}

/// Whether a [`Permission::Device`] request is the GPU one.
pub fn is_gpu_device(device: &str) -> bool {
    device == GPU_DEVICE
}

/// The capabilities a GPU reservation may name and still be "the host's GPUs": `gpu`, and
/// `utility`/`compute` (`nvidia-smi`, CUDA), which the NVIDIA toolkit gives a GPU container
/// anyway. `graphics`, `display`, `video` and any other reach past it (spec-note 0646).
const GPU_CAPABILITIES: &[&str] = &["gpu", "utility", "compute"];

/// The prefixes of a [`Permission::Device`] that names a Compose device reservation that is not
/// a plain GPU request: `reservation:<entry>` (`deploy.resources.reservations.devices`) and
/// `gpus:<entry>`, the entry as canonical JSON (keys sorted).
const RESERVATION_PREFIXES: &[&str] = &["reservation:", "gpus:"];

/// Whether a `device:` grant's value names a device reservation ([`compose_device_requests`]):
/// granted exactly as written.
pub fn is_reservation_device(device: &str) -> bool {
    RESERVATION_PREFIXES.iter().any(|p| device.starts_with(p))
}

/// The requests of a Compose service's device reservations (`deploy.resources.reservations
/// .devices`, `gpus`), each with the property that asks: every entry of a plain GPU's shape
/// (driver unset or `nvidia`, capabilities among `gpu`/`utility`/`compute` with `gpu`, `count`
/// and GPU `device_ids`, no `options`) is the one request `device:gpu` that the `gpu` grant
/// covers; any other entry (a CDI id, another driver, another capability, driver options, an
/// unknown key) is its own request `device:reservation:<entry>` (or `device:gpus:<entry>`)
/// naming the entry, granted only by that exact value (attacks J9).
pub fn compose_device_requests(service: &Value) -> Vec<(Permission, &'static str)> {
    let mut out = Vec::new();
    let mut gpu = false;
    let reservations = service.pointer("/deploy/resources/reservations/devices");
    let entries = |v: Option<&Value>| -> Vec<Value> {
        match v {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => vec![other.clone()],
        }
    };
    for entry in entries(reservations) {
        if is_plain_gpu(&entry, false) {
            gpu = true;
        } else {
            let name = format!("reservation:{}", canonical(&entry));
            out.push((Permission::Device(name), "deploy.resources"));
        }
    }
    for entry in entries(service.get("gpus")) {
        if entry.as_str() == Some("all") || is_plain_gpu(&entry, true) {
            gpu = true;
        } else {
            out.push((
                Permission::Device(format!("gpus:{}", canonical(&entry))),
                "gpus",
            ));
        }
    }
    if gpu {
        out.insert(
            0,
            (
                Permission::Device(GPU_DEVICE.to_string()),
                "deploy.resources",
            ),
        );
    }
    out
}

/// Whether a device entry is a plain GPU request (see [`compose_device_requests`]); `implied`:
/// the `gpus` field, where the `gpu` capability goes without saying.
fn is_plain_gpu(entry: &Value, implied: bool) -> bool {
    let Some(map) = entry.as_object() else {
        return false;
    };
    let known = ["capabilities", "driver", "count", "device_ids", "options"];
    if map.keys().any(|k| !known.contains(&k.as_str())) {
        return false;
    }
    let driver_ok = match map.get("driver") {
        None | Some(Value::Null) => true,
        Some(Value::String(d)) => d.is_empty() || d == "nvidia",
        _ => false,
    };
    let capabilities: Option<Vec<&str>> = match map.get("capabilities") {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(c)) => c.iter().map(Value::as_str).collect(),
        _ => None,
    };
    let capabilities_ok = capabilities.is_some_and(|c| {
        c.iter().all(|c| GPU_CAPABILITIES.contains(c)) && (implied || c.contains(&"gpu"))
    });
    let options_ok = match map.get("options") {
        None | Some(Value::Null) => true,
        Some(Value::Object(o)) => o.is_empty(),
        _ => false,
    };
    // a GPU's index or UUID (`0`, `GPU-…`, `MIG-…`): a CDI name has `/` and `=`
    let ids_ok = match map.get("device_ids") {
        None | Some(Value::Null) => true,
        Some(Value::Array(ids)) => ids.iter().all(|id| {
            id.as_str().is_some_and(|id| {
                !id.is_empty()
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':')
            })
        }),
        _ => false,
    };
    driver_ok && capabilities_ok && options_ok && ids_ok
}

/// `value` as JSON text with every object's keys sorted (the model keeps the files' order).
fn canonical(value: &Value) -> String {
    crate::formats::json::sorted_keys(value).to_string()
}

// The grants of these requests are tested with the policy that judges them
// (`policy/gpu_tests.rs`): `policy` imports this file.

#[cfg(test)]
mod tests {
    use super::*;

    /// The `gpu` grant covers a reservation of a plain GPU only: a CDI device, another driver,
    /// another capability, driver options or an unknown key is a request of its own naming the
    /// entry, granted by exactly that value (attacks J9).
    #[test]
    fn a_cdi_or_other_device_request_is_not_covered_by_the_gpu_grant() {
        use serde_json::json;
        let asked = |service: Value| -> Vec<String> {
            compose_device_requests(&service)
                .into_iter()
                .map(|(p, _)| p.value().unwrap_or_default().to_string())
                .collect()
        };
        let reserve =
            |entry: Value| json!({"deploy": {"resources": {"reservations": {"devices": [entry]}}}});
        // plain GPUs: the one `gpu` request
        for plain in [
            json!({"capabilities": ["gpu"], "count": "all"}),
            json!({"driver": "nvidia", "capabilities": ["gpu", "utility", "compute"], "count": 1}),
            json!({"capabilities": ["gpu"], "device_ids": ["0", "GPU-8a1c"]}),
        ] {
            assert_eq!(asked(reserve(plain.clone())), ["gpu"], "{plain}");
        }
        assert_eq!(asked(json!({"gpus": "all"})), ["gpu"]);
        assert_eq!(asked(json!({"gpus": [{"count": 2}]})), ["gpu"]);
        // anything else names itself
        for other in [
            json!({"driver": "cdi", "device_ids": ["vendor.example/class=name"], "capabilities": ["gpu"]}),
            json!({"driver": "nvidia", "capabilities": ["gpu", "display"]}),
            json!({"capabilities": ["gpu"], "options": {"virtualization": "true"}}),
            json!({"capabilities": ["gpu"], "device_ids": ["nvidia.com/gpu=all"]}),
            json!({"capabilities": ["tpu"]}),
            json!({"capabilities": ["gpu"], "extra": 1}),
        ] {
            let got = asked(reserve(other.clone()));
            assert_eq!(got.len(), 1, "{other}: {got:?}");
            assert!(got[0].starts_with("reservation:{"), "{other}: {got:?}");
            assert!(!is_gpu_device(&got[0]) && is_reservation_device(&got[0]));
        }
        let cdi = asked(json!({"gpus": [{"driver": "cdi", "device_ids": ["a.example/b=c"]}]}));
        assert_eq!(
            cdi,
            [r#"gpus:{"device_ids":["a.example/b=c"],"driver":"cdi"}"#]
        );
        // a plain GPU beside another entry: both asked
        let both = json!({"deploy": {"resources": {"reservations": {"devices": [
            {"capabilities": ["gpu"]}, {"driver": "cdi", "device_ids": ["x.example/y=z"]}
        ]}}}});
        assert_eq!(asked(both).len(), 2);
        assert!(asked(json!({})).is_empty());
    }
}
