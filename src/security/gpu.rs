//! GPUs as a permission: a device outside the hardened baseline, asked for by the
//! configuration's `hostRequirements.gpu` and granted by the user (`--allow gpu`, or `gpu` in
//! the `[security] allow` list of config.toml; spec-note 0646).
//!
//! A Compose service's GPU reservation is already the request `device:gpu`
//! ([`crate::security::compose`]); the same grant covers it, so one word grants GPUs whatever
//! kind of configuration asks.

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

// Tested with the policy that judges it (`policy/gpu_tests.rs`): `policy` imports this file.
