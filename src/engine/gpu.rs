//! Whether an engine can give a container GPUs, from what it reports about its host.
//!
//! Docker gives GPUs through the NVIDIA container runtime (listed under `Runtimes` as
//! `nvidia`) or through CDI devices it discovered (`DiscoveredDevices`, Docker 28 and later:
//! `{"Source": "cdi", "ID": "nvidia.com/gpu=0"}`). The reference CLI asks only for the runtime
//! (`docker info -f {{.Runtimes.nvidia}}`); a CDI GPU counts here too (spec-note 0646). A
//! backend fills [`crate::engine::EngineInfo::gpu`] with [`gpus_in`].

use serde_json::Value;

/// Whether an engine offering `runtimes` and having discovered `devices` (`(source, id)`
/// pairs) can give a GPU: the `nvidia` runtime, or a CDI GPU device. Anything else, including
/// an engine that reports neither (an older engine, Podman), is no GPU.
pub fn gpus_in<'a>(
    runtimes: &[String],
    mut devices: impl Iterator<Item = (&'a str, &'a str)>,
) -> bool {
    runtimes.iter().any(|r| r == "nvidia") || devices.any(|(source, id)| is_cdi_gpu(source, id))
}

/// A CDI device whose kind is a GPU (`<vendor>/gpu=<name>`, as `nvidia.com/gpu=all`).
fn is_cdi_gpu(source: &str, id: &str) -> bool {
    let kind = id.split_once('=').map_or(id, |(kind, _)| kind);
    source == "cdi"
        && kind
            .rsplit_once('/')
            .is_some_and(|(_, class)| class == "gpu")
}

/// The folders Podman reads CDI specs from (its default `cdi_spec_dirs`): the static specs an
/// administrator generated (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`) and the
/// ones a service writes at boot.
pub const CDI_SPEC_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];

/// The largest CDI spec file read (specs list device nodes and mounts: a few KiB).
const CDI_SPEC_MAX: u64 = 1024 * 1024;

/// Whether one of `dirs` holds a CDI spec (`*.json`, `*.yaml`, `*.yml`) whose `kind` is a GPU
/// (`<vendor>/gpu`, as `nvidia.com/gpu`) with at least one device: what Podman, whose `info`
/// lists no CDI devices, can give a container as `--device nvidia.com/gpu=all` (spec-note
/// 0646). Unreadable folders and files, links, and specs that do not parse are skipped.
pub fn cdi_gpu_in_spec_dirs(dirs: &[&std::path::Path]) -> bool {
    dirs.iter().any(|dir| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|entry| {
            let path = entry.path();
            let spec_file = matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml" | "yml")
            );
            spec_file
                && entry.file_type().is_ok_and(|t| t.is_file())
                && read_spec(&path).is_some_and(|spec| is_gpu_spec(&spec))
        })
    })
}

/// A CDI spec file parsed (YAML, of which JSON is a subset), at most [`CDI_SPEC_MAX`] bytes.
fn read_spec(path: &std::path::Path) -> Option<Value> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(CDI_SPEC_MAX)
        .read_to_string(&mut text)
        .ok()?;
    serde_yaml::from_str(&text).ok()
}

/// A spec whose `kind` is `<vendor>/gpu` and whose `devices` list is not empty.
fn is_gpu_spec(spec: &Value) -> bool {
    let kind = spec.get("kind").and_then(Value::as_str).unwrap_or_default();
    let devices = spec
        .get("devices")
        .and_then(Value::as_array)
        .is_some_and(|d| !d.is_empty());
    devices
        && kind
            .rsplit_once('/')
            .is_some_and(|(_, class)| class == "gpu")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(runtimes: &[&str], devices: &[(&str, &str)]) -> bool {
        let runtimes: Vec<String> = runtimes.iter().map(|r| r.to_string()).collect();
        gpus_in(&runtimes, devices.iter().copied())
    }

    #[test]
    fn a_cdi_gpu_spec_in_podmans_spec_folders_is_a_gpu() {
        let etc = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let dirs = [etc.path(), run.path()];
        assert!(!cdi_gpu_in_spec_dirs(&dirs));
        // another kind, a GPU spec without devices, a file that is no spec: no GPU
        std::fs::write(
            etc.path().join("fpga.json"),
            r#"{"cdiVersion": "0.6.0", "kind": "vendor.example/fpga", "devices": [{"name": "0"}]}"#,
        )
        .unwrap();
        std::fs::write(
            etc.path().join("empty.yaml"),
            "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: []\n",
        )
        .unwrap();
        std::fs::write(etc.path().join("notes.txt"), "kind: nvidia.com/gpu").unwrap();
        std::fs::write(etc.path().join("broken.yaml"), ": : :\n\t-").unwrap();
        std::fs::create_dir(etc.path().join("dir.yaml")).unwrap();
        assert!(!cdi_gpu_in_spec_dirs(&dirs));
        // as `nvidia-ctk cdi generate` writes it
        std::fs::write(
            run.path().join("nvidia.yaml"),
            "---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n",
        )
        .unwrap();
        assert!(cdi_gpu_in_spec_dirs(&dirs));
        assert!(!cdi_gpu_in_spec_dirs(&[std::path::Path::new(
            "/nonexistent/cdi"
        )]));
    }

    #[test]
    fn a_gpu_is_the_nvidia_runtime_or_a_cdi_gpu_device() {
        assert!(!gpus(&["runc"], &[]));
        assert!(!gpus(&[], &[]));
        assert!(gpus(&["nvidia", "runc"], &[]));
        assert!(gpus(&["runc"], &[("cdi", "nvidia.com/gpu=0")]));
        assert!(gpus(&[], &[("cdi", "amd.com/gpu=all")]));
        // other CDI devices, and a `gpu` that is not a CDI kind, are no GPU
        assert!(!gpus(
            &[],
            &[
                ("cdi", "vendor.example/fpga=0"),
                ("other", "nvidia.com/gpu=0"),
                ("cdi", "gpu")
            ]
        ));
    }
}
