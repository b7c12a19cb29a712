//! `devcell env show`: a workspace's last environment record, or a handoff session's; and
//! `devcell verify`: its verification commands run in the container (spec-note 0520).

use std::path::Path;
use std::process::ExitCode;

use crate::cli::args::{EnvExportArgs, EnvShowArgs, Format, VerifyArgs};
use crate::cli::commands::{Extras, finish, folder, own_block_on, with_progress};
use crate::handoff::state::StateStore;
use crate::ops::environment::export::export_agent_runner;
use crate::ops::environment::{EnvironmentRecord, EnvironmentStore};
use crate::ops::exec::ExecOptions;
use crate::ops::verify::VerifyReport;
use crate::ops::{OpsError, TargetOptions};

/// Runs `env show`: the record as text, or as the envelope's `result` with `--format json`.
pub fn show(args: EnvShowArgs) -> anyhow::Result<ExitCode> {
    let workspace = folder(args.workspace_folder.as_deref());
    let result = shown(&workspace, args.session.as_deref());
    Ok(finish(args.format, result, render, |_| Extras::default()))
}

/// Runs `env export --format agent-runner`: the definition's YAML on stdout (spec-note 0522).
pub fn export(args: EnvExportArgs) -> anyhow::Result<ExitCode> {
    let crate::cli::args::ExportFormat::AgentRunner = args.format;
    let target = TargetOptions {
        workspace_folder: folder(args.workspace_folder.as_deref()),
        config: args.config.clone(),
        mount_workspace_git_root: true,
        env: std::env::vars().collect(),
        workspace_folder_given: true,
        ..TargetOptions::default()
    };
    let result = own_block_on(export_agent_runner(
        &target,
        args.name.as_deref(),
        args.allow_host_git,
    ))
    .and_then(|e| e.to_yaml());
    Ok(finish(Format::Text, result, String::clone, |_| {
        Extras::default()
    }))
}

/// The record asked for: the session's, else the workspace's last.
///
/// Errors: [`OpsError::NoEnvironment`] when none is kept; the state's and the record's.
fn shown(workspace: &Path, session: Option<&str>) -> Result<EnvironmentRecord, OpsError> {
    let root = StateStore::default_root().ok_or_else(|| OpsError::NoEnvironment {
        what: "this machine: no state folder".into(),
    })?;
    let records = EnvironmentStore::new(&root);
    let Some(id) = session else {
        return records
            .last(workspace)?
            .ok_or_else(|| OpsError::NoEnvironment {
                what: format!("workspace `{}`", workspace.display()),
            });
    };
    let state = StateStore::new(&root)
        .load(workspace)
        .map_err(OpsError::from)?;
    let hash = state
        .as_ref()
        .and_then(|s| s.session(id))
        .and_then(|s| s.environment.clone())
        .ok_or_else(|| OpsError::NoEnvironment {
            what: format!("session `{id}` of workspace `{}`", workspace.display()),
        })?;
    records.load(&hash)
}

/// The record for people: one line per fact.
fn render(record: &EnvironmentRecord) -> String {
    let mut out = format!(
        "environment record of `{}` (devcell {})\n",
        record.command, record.devcell_version
    );
    let line = |out: &mut String, key: &str, value: &str| {
        out.push_str(&format!("{key:<14}{value}\n"));
    };
    // a container devcell did not create (spec-note 0527): it, not a configuration
    if let Some(x) = &record.external {
        line(
            &mut out,
            "external",
            &format!(
                "container {} ({}), devcell did not create it: this record describes it and cannot recreate it",
                x.container, x.name
            ),
        );
        let user = match &x.exec_user {
            Some(exec) => format!("{} as {exec}", x.user),
            None => x.user.clone(),
        };
        line(&mut out, "  user", &user);
        for m in &x.mounts {
            let ro = if m.read_only { ", ro" } else { "" };
            line(
                &mut out,
                "  mount",
                &format!("{} -> {} ({}{ro})", m.source, m.target, m.kind),
            );
        }
    } else {
        line(&mut out, "configuration", &record.configuration.file);
    }
    for (path, hash) in &record.configuration.files {
        line(&mut out, "  file", &format!("{path} {hash}"));
    }
    let base = &record.base_image;
    let named = base.reference.as_deref().unwrap_or("(none)");
    match (&base.digest, &base.not_reproducible) {
        (Some(digest), _) => line(&mut out, "base image", &format!("{named} @ {digest}")),
        (None, Some(why)) => line(&mut out, "base image", &format!("{named}: {why}")),
        (None, None) => line(&mut out, "base image", named),
    }
    for (key, pin) in &record.features {
        line(&mut out, "feature", &format!("{key} @ {}", pin.digest));
    }
    line(
        &mut out,
        "image",
        &format!(
            "{} ({})",
            record.image.id,
            record.image.references.join(", ")
        ),
    );
    let s = &record.security;
    let grants = if s.grants.is_empty() {
        "none".to_string()
    } else {
        s.grants.join(", ")
    };
    line(
        &mut out,
        "security",
        &format!(
            "profile {}, network {}, grants {grants}",
            s.profile, s.network
        ),
    );
    for command in &record.verify {
        line(&mut out, "verify", command);
    }
    out
}

/// Runs `verify`: each command's result (text lines, or the envelope's `result` with
/// `--format json`); exit 1 when any failed or none was configured.
pub fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let workspace = folder(args.workspace_folder.as_deref());
    let target = TargetOptions {
        workspace_folder: workspace.clone(),
        config: args.config.clone(),
        mount_workspace_git_root: true,
        env: std::env::vars().collect(),
        workspace_folder_given: true,
        ..TargetOptions::default()
    };
    let timeout = std::time::Duration::from_secs(args.timeout);
    let result = verify_commands(&target, args.environment.as_deref()).and_then(|commands| {
        let opts = ExecOptions {
            target,
            ..ExecOptions::default()
        };
        with_progress(|reporter| async move {
            crate::ops::verify::verify(&opts, &commands, timeout, &*reporter).await
        })
        .map_err(|e| OpsError::Unsupported {
            message: e.to_string(),
            hint: None,
        })?
    });
    let passed = result.as_ref().is_ok_and(VerifyReport::passed);
    let code = finish(args.format, result, render_verify, |_| Extras::default());
    Ok(if passed || code != ExitCode::SUCCESS {
        code
    } else {
        ExitCode::from(1)
    })
}

/// The commands to run: the record's `verify`, else the configuration's.
///
/// Errors: the record or the configuration cannot be read; [`OpsError::Unsupported`] when
/// there is no command.
fn verify_commands(target: &TargetOptions, record: Option<&Path>) -> Result<Vec<String>, OpsError> {
    let commands = match record {
        Some(path) => crate::ops::environment::read_record(path)?.verify,
        None => {
            let loaded = crate::ops::load::load_configuration(&crate::ops::load::LoadOptions {
                workspace_folder: target.workspace_folder.clone(),
                config: target.config.clone(),
                env: target.env.clone(),
                ..Default::default()
            })?;
            crate::ops::environment::verify_commands(&loaded.value)
        }
    };
    if commands.is_empty() {
        return Err(OpsError::Unsupported {
            message: "no verification commands to run".into(),
            hint: Some("list them in devcontainer.json as `customizations.devcell.verify`".into()),
        });
    }
    Ok(commands)
}

/// Each command's result on a line, with the failures' output tails.
fn render_verify(report: &VerifyReport) -> String {
    let mut out = String::new();
    for r in &report.results {
        let verdict = if r.exit_code == 0 { "ok  " } else { "FAIL" };
        if r.timed_out {
            out.push_str(&format!(
                "{verdict} {} (timed out after {} ms and stopped; see --timeout)\n",
                r.command, r.duration_ms
            ));
        } else {
            out.push_str(&format!(
                "{verdict} {} (exit {}, {} ms)\n",
                r.command, r.exit_code, r.duration_ms
            ));
        }
        if r.exit_code != 0 && !r.output_tail.is_empty() {
            for line in r.output_tail.lines() {
                out.push_str(&format!("     {line}\n"));
            }
        }
    }
    out
}
