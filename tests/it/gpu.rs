//! GPUs (spec-note 0646, docs/drop-in.md#gpus) on an engine with none: `detect` finds none, so
//! a required GPU is a warning and the container has no device request; `"optional"` is quiet;
//! `--gpu-availability none` never asks; `all` is refused before anything is created. No test
//! here starts a container with a real device request.

use crate::support::deadline::Bounded as _;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;

/// Whether this engine shows a GPU (then these tests, written for an engine with none, skip).
fn engine_has_gpu() -> bool {
    let out = Command::new("docker")
        .args(["info", "--format", "{{json .}}"])
        .bounded_output()
        .expect("docker runs");
    let info: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let runtime = info["Runtimes"].get("nvidia").is_some();
    let cdi = info["DiscoveredDevices"].as_array().is_some_and(|d| {
        d.iter()
            .any(|d| d["ID"].as_str().is_some_and(|id| id.contains("/gpu=")))
    });
    runtime || cdi
}

/// `HostConfig.DeviceRequests` of container `id` (`null` when there is none).
fn device_requests(id: &str) -> Value {
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{json .HostConfig.DeviceRequests}}", id])
        .bounded_output()
        .expect("docker runs");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn gpu_context(test: &str, gpu: Value) -> Option<TestContext> {
    let ctx = TestContext::busybox(test)?;
    // written for an engine with no GPU: on one with a GPU these tests have nothing to check
    if engine_has_gpu() {
        return None;
    }
    Some(ctx.config_json(&json!({
        "image": BUSYBOX_IMAGE,
        "hostRequirements": {"gpu": gpu}
    })))
}

fn warnings(result: &Value) -> Vec<String> {
    result["devcell"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect()
}

fn gpu_warnings(result: &Value) -> Vec<String> {
    warnings(result)
        .into_iter()
        .filter(|w| w.contains("hostRequirements.gpu"))
        .collect()
}

#[test]
fn a_required_gpu_on_an_engine_without_one_warns_and_creates_no_device_request() {
    let Some(ctx) = gpu_context("gpu-required-none-found", json!(true)) else {
        return;
    };
    // detect (the default), hardened: no GPU found, so nothing to grant; a warning
    let result = ctx.up(&[]);
    let id = result["containerId"].as_str().unwrap();
    assert_eq!(device_requests(id), Value::Null, "{result}");
    let shown = gpu_warnings(&result);
    assert_eq!(shown.len(), 1, "{result}");
    assert!(shown[0].contains("no GPU"), "{shown:?}");
    let permissions = result["devcell"]["permissions"].as_array().cloned();
    assert!(
        permissions
            .iter()
            .flatten()
            .all(|p| p["permission"] != "gpu"),
        "{result}"
    );

    // none: the engine is not asked, no warning, no device request
    let result = ctx.up(&["--gpu-availability", "none", "--remove-existing-container"]);
    let id = result["containerId"].as_str().unwrap();
    assert_eq!(device_requests(id), Value::Null, "{result}");
    assert!(gpu_warnings(&result).is_empty(), "{result}");
}

#[test]
fn an_optional_gpu_on_an_engine_without_one_goes_on_quietly() {
    let Some(ctx) = gpu_context("gpu-optional-none-found", json!("optional")) else {
        return;
    };
    let result = ctx.up(&[]);
    let id = result["containerId"].as_str().unwrap();
    assert_eq!(device_requests(id), Value::Null, "{result}");
    assert!(gpu_warnings(&result).is_empty(), "{result}");
}

#[test]
fn gpu_availability_all_on_an_engine_without_one_is_refused_and_nothing_is_created() {
    let Some(ctx) = gpu_context("gpu-all-none-found", json!({"cores": 2})) else {
        return;
    };
    for grant in [&[][..], &["--allow", "gpu"][..]] {
        let mut args = vec!["--gpu-availability", "all"];
        args.extend_from_slice(grant);
        let run = ctx.run("up", &args);
        run.failed();
        let result = run.last_json();
        assert_eq!(result["outcome"], "error", "{result}");
        let message = result["message"].as_str().unwrap_or_default();
        assert!(message.contains("`--gpu-availability all`"), "{result}");
        assert!(message.contains("no GPU"), "{result}");
        assert!(message.contains(r#"{"cores":2}"#), "{result}");
        assert!(ctx.containers().is_empty(), "nothing is created");
    }
}

/// `runArgs: ["--gpus", "all"]` is the same GPU request as `hostRequirements.gpu: true`
/// (spec-note 0646): `up` accepts it (it was an unknown run argument), finds no GPU, warns
/// naming it and passes nothing to the engine; `all` is refused, naming it.
#[test]
fn a_gpus_run_arg_is_the_gpu_request_and_never_passed_by_itself() {
    let Some(ctx) = TestContext::busybox("gpu-run-arg-none-found") else {
        return;
    };
    if engine_has_gpu() {
        return;
    }
    let ctx = ctx.config_json(&json!({"image": BUSYBOX_IMAGE, "runArgs": ["--gpus", "all"]}));
    let result = ctx.up(&[]);
    let id = result["containerId"].as_str().unwrap();
    assert_eq!(device_requests(id), Value::Null, "{result}");
    let shown: Vec<String> = warnings(&result)
        .into_iter()
        .filter(|w| w.contains("`runArgs` asks for a GPU (`--gpus all`)"))
        .collect();
    assert_eq!(shown.len(), 1, "{result}");
    let run = ctx.run(
        "up",
        &[
            "--gpu-availability",
            "all",
            "--allow",
            "gpu",
            "--remove-existing-container",
        ],
    );
    run.failed();
    let message = run.last_json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("`--gpus all`"), "{message}");
}
