//! GPUs for the dev container: `hostRequirements.gpu` of devcontainer.json and
//! `--gpu-availability`, as the reference CLI reads them (spec-note 0646).
//!
//! - Only devcontainer.json's own `hostRequirements.gpu` asks (not a Feature's or the image's
//!   metadata), and only a truthy one: `true`, `"optional"` or the object form.
//! - `--gpu-availability detect` (the default) asks the engine ([`Engine::gpu_available`]);
//!   `none` gives no GPU; `all` gives them without asking, but devcell refuses it clearly when
//!   the engine shows no GPU rather than let the engine fail at start.
//! - With no GPU found, a required GPU is a warning and the container comes up without one; an
//!   `"optional"` one goes on quietly.
//! - A GPU given is a permission request ([`crate::security::gpu`]): `--allow gpu` under
//!   `hardened`.
//!
//! [`resolve`] asks the engine once, before the configuration is judged; [`request`] then puts
//! the answer in each container request built from it (the judgement, `--plan`, the create).

use std::path::Path;

use serde_json::json;

use crate::config::model::{DevContainerConfig, GpuRequirement};
use crate::diagnostics::Warning;
use crate::engine::{Engine, GpuRequest};
use crate::ops::error::{OpsError, Result};
use crate::ops::options::{GpuAvailability, UpOptions};
use crate::progress::{Event, Reporter};

/// What devcontainer.json asks for a GPU, as written: its `hostRequirements.gpu` (`true`,
/// `"optional"`, `{"cores":2,"memory":"8gb"}`), else a `runArgs` GPU (`runArgs --gpus all`,
/// `runArgs --device nvidia.com/gpu=all`: the same request, spec-note 0646); `None` when it
/// asks for no GPU (both absent, or `hostRequirements.gpu: false` with no `runArgs` GPU).
pub fn asked(config: &DevContainerConfig) -> Option<String> {
    host_requirement(config).or_else(|| {
        crate::engine::run_args::gpu_run_arg(&config.run_args).map(|a| format!("runArgs {a}"))
    })
}

/// `hostRequirements.gpu` as written, when truthy.
fn host_requirement(config: &DevContainerConfig) -> Option<String> {
    let gpu = config.host_requirements.as_ref()?.gpu.as_ref()?;
    Some(match gpu {
        GpuRequirement::Required(false) => return None,
        GpuRequirement::Required(true) => "true".to_string(),
        GpuRequirement::Optional => "\"optional\"".to_string(),
        GpuRequirement::Detailed { cores, memory } => {
            let mut object = serde_json::Map::new();
            if let Some(cores) = cores {
                object.insert("cores".into(), json!(cores));
            }
            if let Some(memory) = memory {
                object.insert("memory".into(), json!(memory));
            }
            serde_json::Value::Object(object).to_string()
        }
    })
}

/// `availability` settled against the engine for `config`: `All` (the container gets every
/// GPU) or `None`. The engine is asked only when the configuration asks for a GPU and
/// `availability` is not `none`. No GPU found: a required GPU adds a warning to `warnings` (and
/// reports it), an `"optional"` one goes on quietly ([`settle`]).
///
/// Errors: [`OpsError::Unsupported`] for `all` when the engine shows no GPU (nothing was
/// created); the engine's when it cannot be asked.
pub async fn resolve(
    engine: &dyn Engine,
    availability: GpuAvailability,
    config: &DevContainerConfig,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) -> Result<GpuAvailability> {
    if availability == GpuAvailability::None || asked(config).is_none() {
        return Ok(GpuAvailability::None);
    }
    let (settled, warning) = settle(availability, config, gpu_found(engine).await?)?;
    if settled == GpuAvailability::All {
        reporter.report(Event::Status(
            "GPU found: the container gets every GPU".into(),
        ));
    }
    if let Some(message) = warning {
        reporter.report(Event::Status(format!("warning: {message}")));
        warnings.push(Warning {
            location: None,
            message,
        });
    }
    Ok(settled)
}

/// Whether the engine can give a GPU: its `info` shows one ([`Engine::gpu_available`]), or it
/// is Podman, whose `info` lists no CDI devices, and a CDI GPU spec is in Podman's spec folders
/// on this host ([`crate::engine::gpu::CDI_SPEC_DIRS`]; a Podman on another machine is not
/// seen: no GPU found, as without a runtime). Spec-note 0646.
///
/// Errors: the engine's.
async fn gpu_found(engine: &dyn Engine) -> Result<bool> {
    let spec_dirs = crate::engine::gpu::CDI_SPEC_DIRS.map(Path::new);
    found_with_cdi_specs(engine, &spec_dirs).await
}

/// [`gpu_found`] with the CDI spec folders to read.
async fn found_with_cdi_specs(engine: &dyn Engine, spec_dirs: &[&Path]) -> Result<bool> {
    if engine.gpu_available().await? {
        return Ok(true);
    }
    Ok(engine.is_podman().await? && crate::engine::gpu::cdi_gpu_in_spec_dirs(spec_dirs))
}

/// [`resolve`] once the engine answered `found`: the settled availability and the warning to
/// give, if any.
///
/// Errors: [`OpsError::Unsupported`] for `all` with no GPU found.
pub fn settle(
    availability: GpuAvailability,
    config: &DevContainerConfig,
    found: bool,
) -> Result<(GpuAvailability, Option<String>)> {
    let Some(asked) = asked(config).filter(|_| availability != GpuAvailability::None) else {
        return Ok((GpuAvailability::None, None));
    };
    if found {
        return Ok((GpuAvailability::All, None));
    }
    if availability == GpuAvailability::All {
        return Err(OpsError::Unsupported {
            message: format!(
                "`--gpu-availability all`, but the engine shows no GPU (no `nvidia` runtime, no CDI GPU device), and {}",
                shown_ask(&asked)
            ),
            hint: Some(
                "install the GPU's container runtime, or use `--gpu-availability detect` to go on without a GPU".into(),
            ),
        });
    }
    let optional = matches!(
        config
            .host_requirements
            .as_ref()
            .and_then(|h| h.gpu.as_ref()),
        Some(GpuRequirement::Optional)
    );
    let warning = (!optional).then(|| {
        format!(
            "{} but the engine shows no GPU: the container gets none (write `hostRequirements.gpu: \"optional\"` if it can do without)",
            shown_ask(&asked)
        )
    });
    Ok((GpuAvailability::None, warning))
}

/// What asked, in a sentence: `` `hostRequirements.gpu` is true `` or `` `runArgs --gpus all` ``.
fn shown_ask(asked: &str) -> String {
    match asked.strip_prefix("runArgs ") {
        Some(flag) => format!("`runArgs` asks for a GPU (`{flag}`)"),
        None => format!("`hostRequirements.gpu` is {asked}"),
    }
}

/// The GPU request of a container built from `config` under `availability` as [`resolve`]
/// settled it: only `all` gives one (an unsettled `detect` gives none: no GPU is asked for
/// without asking the engine first).
pub fn request(config: &DevContainerConfig, availability: GpuAvailability) -> Option<GpuRequest> {
    if availability != GpuAvailability::All {
        return None;
    }
    asked(config).map(|asked| GpuRequest { asked })
}

/// `opts` with its `--gpu-availability` settled for `config` ([`resolve`]), and the warning
/// it gave.
///
/// Errors: as [`resolve`].
pub async fn settled_options(
    engine: &dyn Engine,
    opts: &UpOptions,
    config: &DevContainerConfig,
    reporter: &dyn Reporter,
) -> Result<(UpOptions, Vec<Warning>)> {
    let mut warnings = Vec::new();
    let gpu_availability = resolve(
        engine,
        opts.gpu_availability,
        config,
        &mut warnings,
        reporter,
    )
    .await?;
    let settled = UpOptions {
        gpu_availability,
        ..opts.clone()
    };
    Ok((settled, warnings))
}

/// [`settled_options`] for a `--plan`: settled when there is an engine to ask (its warning a
/// note of the plan), else `opts` as they are (an unsettled `detect` shows no GPU).
///
/// Errors: as [`resolve`].
pub async fn planned_options(
    engine: Option<&dyn Engine>,
    opts: &UpOptions,
    config: &DevContainerConfig,
    notes: &mut Vec<String>,
) -> Result<UpOptions> {
    let Some(engine) = engine else {
        return Ok(opts.clone());
    };
    let reporter = crate::progress::NoopReporter;
    let (settled, warnings) = settled_options(engine, opts, config, &reporter).await?;
    notes.extend(warnings.into_iter().map(|w| w.message));
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CDI GPU spec in the folders counts only for Podman: Docker lists its CDI devices in
    /// `info` itself (the fake engine is Docker with an empty `info`).
    #[tokio::test]
    async fn cdi_spec_folders_count_only_for_podman() {
        let specs = tempfile::tempdir().unwrap();
        std::fs::write(
            specs.path().join("nvidia.yaml"),
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n",
        )
        .unwrap();
        let docker = crate::engine::fake::FakeEngine::new();
        assert!(
            !found_with_cdi_specs(&docker, &[specs.path()])
                .await
                .unwrap()
        );
        assert!(crate::engine::gpu::cdi_gpu_in_spec_dirs(&[specs.path()]));
    }
    use crate::config::model::HostRequirements;

    fn config(gpu: Option<GpuRequirement>) -> DevContainerConfig {
        DevContainerConfig {
            host_requirements: Some(HostRequirements {
                gpu,
                ..HostRequirements::default()
            }),
            ..DevContainerConfig::default()
        }
    }

    #[test]
    fn the_request_names_what_the_configuration_asked() {
        let detailed = GpuRequirement::Detailed {
            cores: Some(2),
            memory: Some("8gb".into()),
        };
        for (gpu, expected) in [
            (None, None),
            (Some(GpuRequirement::Required(false)), None),
            (Some(GpuRequirement::Required(true)), Some("true")),
            (Some(GpuRequirement::Optional), Some("\"optional\"")),
            (Some(detailed), Some(r#"{"cores":2,"memory":"8gb"}"#)),
        ] {
            let c = config(gpu);
            assert_eq!(asked(&c).as_deref(), expected);
            assert_eq!(
                request(&c, GpuAvailability::All)
                    .map(|r| r.asked)
                    .as_deref(),
                expected
            );
            // unsettled or off: no GPU
            assert_eq!(request(&c, GpuAvailability::Detect), None);
            assert_eq!(request(&c, GpuAvailability::None), None);
        }
        assert_eq!(asked(&DevContainerConfig::default()), None);
    }

    /// `runArgs --gpus all` (or CDI's `--device nvidia.com/gpu=all`) is the same GPU request
    /// as `hostRequirements.gpu: true`: settled and judged the same way, never passed on by
    /// itself (spec-note 0646).
    #[test]
    fn a_gpu_in_run_args_is_the_same_request() {
        for (args, expected) in [
            (vec!["--gpus", "all"], "runArgs --gpus all"),
            (
                vec!["--device=nvidia.com/gpu=all"],
                "runArgs --device nvidia.com/gpu=all",
            ),
        ] {
            let c = DevContainerConfig {
                run_args: args.iter().map(|a| a.to_string()).collect(),
                ..DevContainerConfig::default()
            };
            assert_eq!(asked(&c).as_deref(), Some(expected));
            assert_eq!(
                request(&c, GpuAvailability::All)
                    .map(|r| r.asked)
                    .as_deref(),
                Some(expected)
            );
            assert_eq!(request(&c, GpuAvailability::Detect), None);
            let (_, warning) = settle(GpuAvailability::Detect, &c, false).unwrap();
            assert!(
                warning.unwrap().contains("`runArgs` asks for a GPU"),
                "{expected}"
            );
            let err = settle(GpuAvailability::All, &c, false).unwrap_err();
            assert!(err.to_string().contains("`runArgs` asks"), "{err}");
        }
        // `hostRequirements.gpu` names it when both ask
        let both = DevContainerConfig {
            run_args: vec!["--gpus".into(), "all".into()],
            ..config(Some(GpuRequirement::Optional))
        };
        assert_eq!(asked(&both).as_deref(), Some("\"optional\""));
    }

    /// `detect` follows the engine; with no GPU, `true` (and the object form) warns and
    /// `"optional"` is quiet; `none` never asks; `all` with no GPU is refused clearly.
    #[test]
    fn settling_follows_the_engine_and_warns_as_the_reference_does() {
        use GpuAvailability::{All, Detect, None as Off};
        let required = config(Some(GpuRequirement::Required(true)));
        let optional = config(Some(GpuRequirement::Optional));
        let none = config(None);

        assert_eq!(settle(Detect, &required, true).unwrap(), (All, None));
        assert_eq!(settle(Detect, &optional, true).unwrap(), (All, None));
        assert_eq!(settle(All, &required, true).unwrap(), (All, None));
        assert_eq!(settle(Off, &required, true).unwrap(), (Off, None));
        assert_eq!(settle(Detect, &none, true).unwrap(), (Off, None));
        assert_eq!(settle(All, &none, false).unwrap(), (Off, None));

        let (settled, warning) = settle(Detect, &required, false).unwrap();
        assert_eq!(settled, Off);
        let warning = warning.expect("a required GPU that is missing is a warning");
        assert!(
            warning.contains("`hostRequirements.gpu` is true"),
            "{warning}"
        );
        assert!(warning.contains("\"optional\""), "{warning}");
        assert_eq!(settle(Detect, &optional, false).unwrap(), (Off, None));
        assert_eq!(settle(Off, &required, false).unwrap(), (Off, None));

        let err = settle(All, &optional, false).unwrap_err();
        assert!(
            err.to_string().contains("`--gpu-availability all`"),
            "{err}"
        );
        assert!(err.to_string().contains("no GPU"), "{err}");
        let OpsError::Unsupported {
            hint: Some(hint), ..
        } = err
        else {
            panic!("expected a hint");
        };
        assert!(hint.contains("--gpu-availability detect"), "{hint}");
    }

    fn parsed(text: &str) -> crate::config::Result<DevContainerConfig> {
        let file = std::path::Path::new("/w/.devcontainer/devcontainer.json");
        let doc = crate::config::jsonc::parse(file, text)?;
        crate::config::model::validate(&doc).map(|(config, _)| config)
    }

    /// Every form of `hostRequirements.gpu` reads into the request it makes; a bad value is an
    /// error naming the file, the property path and what was expected.
    #[test]
    fn gpu_values_parse_and_bad_ones_name_the_property() {
        for (text, expected) in [
            (r#"{"hostRequirements": {"gpu": true}}"#, Some("true")),
            (r#"{"hostRequirements": {"gpu": false}}"#, None),
            (
                r#"{"hostRequirements": {"gpu": "optional"}}"#,
                Some("\"optional\""),
            ),
            (
                r#"{"hostRequirements": {"gpu": {"cores": 2, "memory": "4gb"}}}"#,
                Some(r#"{"cores":2,"memory":"4gb"}"#),
            ),
            (r#"{"hostRequirements": {"gpu": {}}}"#, Some("{}")),
        ] {
            let config = parsed(text).unwrap();
            assert_eq!(asked(&config).as_deref(), expected, "{text}");
        }
        for (text, path, expected) in [
            (
                r#"{"hostRequirements": {"gpu": "yes"}}"#,
                "hostRequirements.gpu",
                "\"optional\"",
            ),
            (
                r#"{"hostRequirements": {"gpu": 1}}"#,
                "hostRequirements.gpu",
                "an object",
            ),
            (
                r#"{"hostRequirements": {"gpu": {"cores": 0}}}"#,
                "hostRequirements.gpu.cores",
                "an integer ≥ 1",
            ),
            (
                r#"{"hostRequirements": {"gpu": {"memory": "lots"}}}"#,
                "hostRequirements.gpu.memory",
                "a size",
            ),
        ] {
            let err = parsed(text).unwrap_err();
            let shown = err.to_string();
            assert!(shown.contains("devcontainer.json"), "{shown}");
            assert!(shown.contains(path), "{text}: {shown}");
            assert!(shown.contains(expected), "{text}: {shown}");
        }
    }
}
