//! Whether an engine can give a container GPUs, read from its `docker info` answer.
//!
//! Docker gives GPUs through the NVIDIA container runtime (listed under `Runtimes` as
//! `nvidia`) or through CDI devices it discovered (`DiscoveredDevices`, Docker 28 and later:
//! `{"Source": "cdi", "ID": "nvidia.com/gpu=0"}`). The reference CLI asks only for the runtime
//! (`docker info -f {{.Runtimes.nvidia}}`); a CDI GPU counts here too (spec-note 0646).

use serde_json::Value;

/// Whether `info` (the engine's `docker info` JSON) shows a GPU runtime or a CDI GPU device.
/// Anything else, including an answer without those keys (an older engine, Podman), is no GPU.
pub fn gpus_in_info(info: &Value) -> bool {
    let runtime = info
        .get("Runtimes")
        .and_then(Value::as_object)
        .is_some_and(|runtimes| runtimes.contains_key("nvidia"));
    let cdi = info
        .get("DiscoveredDevices")
        .and_then(Value::as_array)
        .is_some_and(|devices| devices.iter().any(is_cdi_gpu));
    runtime || cdi
}

/// A CDI device whose kind is a GPU (`<vendor>/gpu=<name>`, as `nvidia.com/gpu=all`).
fn is_cdi_gpu(device: &Value) -> bool {
    let source = device.get("Source").and_then(Value::as_str);
    let id = device.get("ID").and_then(Value::as_str).unwrap_or_default();
    let kind = id.split_once('=').map_or(id, |(kind, _)| kind);
    source == Some("cdi")
        && kind
            .rsplit_once('/')
            .is_some_and(|(_, class)| class == "gpu")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_gpu_is_the_nvidia_runtime_or_a_cdi_gpu_device() {
        let runc = json!({"runc": {"path": "runc"}});
        assert!(!gpus_in_info(&json!({"Runtimes": runc})));
        assert!(!gpus_in_info(&json!({})));
        assert!(!gpus_in_info(
            &json!({"Runtimes": null, "DiscoveredDevices": null})
        ));
        assert!(gpus_in_info(&json!({
            "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}}
        })));
        assert!(gpus_in_info(&json!({
            "Runtimes": runc,
            "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"}]
        })));
        assert!(gpus_in_info(&json!({
            "DiscoveredDevices": [{"Source": "cdi", "ID": "amd.com/gpu=all"}]
        })));
        // other CDI devices, and a `gpu` that is not a CDI kind, are no GPU
        assert!(!gpus_in_info(&json!({
            "DiscoveredDevices": [
                {"Source": "cdi", "ID": "vendor.example/fpga=0"},
                {"Source": "other", "ID": "nvidia.com/gpu=0"},
                {"Source": "cdi", "ID": "gpu"}
            ]
        })));
    }
}
