//! The environment record (spec-note 0520, `schemas/environment.schema.json`): everything an
//! `up`, `build` or handoff resolved, so another machine (CI) can recreate the environment the
//! agent had, or be told exactly why it cannot.
//!
//! The record holds devcell's version, the configuration files' hashes (paths relative to the
//! workspace folder, so another checkout matches), the configuration as written and as merged,
//! the base image's registry digest (or a local image's id and why it cannot be pulled
//! elsewhere), every Feature's resolved digest, the image built, the security profile, grants
//! and network, and the verification commands (`customizations.devcell.verify`).
//!
//! Steps: [`record_up`] / [`record_build`] ([`collect`]) build a record from what the operation returned
//! and the engine's inspect; [`differences`] ([`drift`]) compares the inputs of two records (what must
//! match for a reproduction) and [`outcome_differences`] what only a build decides (the image
//! id); [`EnvironmentStore`] ([`store`]) keeps records under `<state>/environments/`.
//! The record itself is [`model`].

use std::path::{Path, PathBuf};

use crate::diagnostics::Warning;
use crate::ops::bring_up::{ContainerAction, UpResult};
use crate::ops::build::{BuildOptions, BuildResult};
use crate::ops::error::Result;
use crate::ops::options::UpOptions;
use crate::ops::secrets::{MaskingReporter, redact};
use crate::progress::Reporter;

pub mod collect;
pub mod drift;
pub mod export;
pub mod import;
pub mod import_model;
pub mod model;
pub mod pins;
pub mod store;

pub use crate::ops::error::Difference;
pub use collect::{
    RecordParts, base_image, configuration_record, feature_pins, record, record_build,
    record_external, record_up, security_record, verify_commands,
};
pub use drift::{check_drift, differences, outcome_differences, outcome_warnings};
pub use model::{
    BaseImage, BuiltImage, ConfigurationRecord, ENVIRONMENT_SCHEMA_VERSION, EnvironmentRecord,
    ExternalRecord, FeaturePin, MountRecord, SecurityRecord, read_record, sha256_of, write_record,
};
pub use pins::RecordedFeatures;
pub use store::EnvironmentStore;

/// What a command asks of the environment record besides its own work.
#[derive(Debug, Clone, Default)]
pub struct EnvironmentRequest {
    /// A record is wanted (`--environment-out`): failing to make it fails the command
    /// (otherwise it is a warning: the record kept in the state folder is a convenience).
    pub required: bool,
    /// Where records are kept (`None`: not kept).
    pub store: Option<EnvironmentStore>,
    /// `--environment FILE`: the record to recreate, and its file.
    pub recorded: Option<(PathBuf, EnvironmentRecord)>,
    /// `--allow-drift`: differences are warnings, not a refusal.
    pub allow_drift: bool,
}

/// The record of an operation's result, kept in the store ([`kept_record`]), then the
/// warnings of its outcome against the request ([`outcome_warnings`]) added to `warnings`.
///
/// Errors: the record's, when it is required.
fn finish_record(
    made: Result<EnvironmentRecord>,
    workspace: &Path,
    request: &EnvironmentRequest,
    warnings: &mut Vec<Warning>,
) -> Result<Option<EnvironmentRecord>> {
    let record = kept_record(made, workspace, request, warnings)?;
    warnings.extend(outcome_warnings(request, record.as_ref()));
    Ok(record)
}

/// The record of an operation's result, kept in the store; a failure to make it is an error
/// when the record is `required` (else only logged), a failure to keep it a warning when
/// required (else only logged).
///
/// Errors: the record's, when it is required.
fn kept_record(
    made: Result<EnvironmentRecord>,
    workspace: &Path,
    request: &EnvironmentRequest,
    warnings: &mut Vec<Warning>,
) -> Result<Option<EnvironmentRecord>> {
    let record = match made {
        Ok(record) => record,
        Err(e) if request.required => return Err(e),
        // a convenience nobody asked for: its failure does not change the command's output
        Err(e) => {
            tracing::debug!("no environment record: {e}");
            return Ok(None);
        }
    };
    if let Some(store) = &request.store
        && let Err(e) = store.store(workspace, &record)
    {
        if request.required {
            warnings.push(Warning {
                location: None,
                message: format!("the environment record was not kept: {e}"),
            });
        } else {
            tracing::debug!("the environment record was not kept: {e}");
        }
    }
    Ok(Some(record))
}

/// `up` ([`crate::ops::up::up_with`]) and its environment record ([`record_up`]); secret
/// values are masked in every event and error, as `up` masks them.
///
/// Errors: as `up`; the record's when it is required.
pub async fn up_recorded(
    opts: &UpOptions,
    request: &EnvironmentRequest,
    reporter: &dyn Reporter,
) -> Result<(UpResult, Option<EnvironmentRecord>)> {
    let reporter = MaskingReporter {
        inner: reporter,
        secrets: &opts.secrets,
    };
    // the record's Feature digests pin every resolution: the check's, the judgement's, the build's
    let opts = &UpOptions {
        recorded_features: RecordedFeatures::of(request),
        ..opts.clone()
    };
    let run = async {
        // under `none` a dotfiles URL is cloned on the host first (spec-note 0670)
        let (opts, _export) = crate::ops::dotfiles::exported_for_up(opts, &reporter)?;
        let opts = &*opts;
        let engine = crate::engine::connect().await?;
        let mut result = up_checked(&*engine, opts, request, &reporter).await?;
        // A warm `up` of a running container keeps the record made when it was created or
        // started: its engine calls stay within the warm budget (spec-note 0520).
        let asked = request.required || request.recorded.is_some();
        if !asked && result.action == ContainerAction::Running {
            return Ok((result, None));
        }
        let security = security_record(&result.profile, &opts.security, &opts.settings);
        let made = record_up(&*engine, "up", security, &result).await;
        let workspace = result.loaded.workspace_folder.clone();
        let record = finish_record(made, &workspace, request, &mut result.warnings)?;
        Ok((result, record))
    };
    run.await.map_err(|e| redact(e, &opts.secrets))
}

/// `up`, with `--environment FILE` checked against the record only once the configuration is
/// judged (spec-note 0400, F7): a refused configuration pulls no image and resolves no
/// Feature for the drift check, as it would not for `up` itself. `up`'s one flow
/// ([`crate::ops::up::up_with_check`]) runs the check.
///
/// Errors: as `up`; [`OpsError::EnvironmentDrift`](crate::ops::error::OpsError::EnvironmentDrift).
async fn up_checked(
    engine: &dyn crate::engine::Engine,
    opts: &UpOptions,
    request: &EnvironmentRequest,
    reporter: &dyn Reporter,
) -> Result<UpResult> {
    let check = request.recorded.as_ref().map(|_| request);
    crate::ops::up::up_with_check(engine, opts, check, reporter).await
}

/// The drift check of `--environment FILE` ([`check_drift`]), between `up`'s judgement and
/// its bring-up.
impl crate::ops::up::JudgedCheck for EnvironmentRequest {
    async fn check(
        &self,
        engine: &dyn crate::engine::Engine,
        opts: &UpOptions,
        reporter: &dyn Reporter,
    ) -> Result<Vec<Warning>> {
        check_drift(engine, opts, self, None, reporter).await
    }
}

/// `build` ([`crate::ops::build::build_with`]) and its environment record ([`record_build`]).
///
/// Errors: as `build`; the record's when it is required.
pub async fn build_recorded(
    opts: &BuildOptions,
    request: &EnvironmentRequest,
    reporter: &dyn Reporter,
) -> Result<(BuildResult, Option<EnvironmentRecord>)> {
    let opts = &BuildOptions {
        recorded_features: RecordedFeatures::of(request),
        ..opts.clone()
    };
    let engine = crate::engine::connect().await?;
    let as_up = UpOptions {
        target: opts.target.clone(),
        security: opts.security.clone(),
        settings: opts.settings.clone(),
        cache_dir: opts.cache_dir.clone(),
        lockfile: opts.lockfile,
        recorded_features: opts.recorded_features.clone(),
        ..UpOptions::default()
    };
    let drift = check_drift(&*engine, &as_up, request, None, reporter).await?;
    let mut result = crate::ops::build::build_with(&*engine, opts, reporter).await?;
    result.warnings.extend(drift);
    let security = security_record(&result.profile, &opts.security, &opts.settings);
    let made = record_build(&*engine, security, &result).await;
    let workspace = result.loaded.workspace_folder.clone();
    let record = finish_record(made, &workspace, request, &mut result.warnings)?;
    Ok((result, record))
}

#[cfg(test)]
pub(crate) mod fixtures;
