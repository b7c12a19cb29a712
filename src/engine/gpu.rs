//! Whether an engine can give a container GPUs, from what it reports about its host.
//!
//! Docker gives GPUs through the NVIDIA container runtime (listed under `Runtimes` as
//! `nvidia`) or through CDI devices it discovered (`DiscoveredDevices`, Docker 28 and later:
//! `{"Source": "cdi", "ID": "nvidia.com/gpu=0"}`). The reference CLI asks only for the runtime
//! (`docker info -f {{.Runtimes.nvidia}}`); a CDI GPU counts here too (spec-note 0646). A
//! backend fills [`crate::engine::EngineInfo::gpu`] with [`gpus_in`].

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

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(runtimes: &[&str], devices: &[(&str, &str)]) -> bool {
        let runtimes: Vec<String> = runtimes.iter().map(|r| r.to_string()).collect();
        gpus_in(&runtimes, devices.iter().copied())
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
