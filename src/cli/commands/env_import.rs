//! `devcell env import FILE.yaml`: an agent-runner `mode: managed` environment as a
//! devcontainer.json, with what the hardened profile does not grant listed and refused unless
//! granted (spec-note 0523, `ops::environment::import`).

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::{EnvImportArgs, Format};
use crate::cli::commands::{Extras, exit, finish, folder};
use crate::cli::output;
use crate::diagnostics::ErrorCode;
use crate::handoff::envelope::{Envelope, ErrorBody};
use crate::ops::OpsError;
use crate::ops::environment::import::{ImportOptions, ImportReport, import, write_configuration};

/// Runs `env import`: the report (text, or the envelope's `result`); a refusal is
/// `permission_required` with the report as the error's `details`, and nothing is written.
pub fn run(args: EnvImportArgs) -> anyhow::Result<ExitCode> {
    let workspace = folder(args.workspace_folder.as_deref());
    let result = options(&args, &workspace).and_then(|opts| import(&opts));
    let report = match result {
        Ok(report) if report.refused() => return Ok(refuse(args.format, &report)),
        Ok(mut report) if args.write => {
            write_configuration(&workspace, &report.configuration).map(|path| {
                report.written = Some(path.display().to_string());
                report
            })
        }
        other => other,
    };
    Ok(finish(args.format, report, render, |_| Extras::default()))
}

/// What [`import`] is asked: the file, the workspace, the profile and the `--allow` values.
fn options(args: &EnvImportArgs, workspace: &std::path::Path) -> Result<ImportOptions, OpsError> {
    Ok(ImportOptions {
        file: args.file.clone(),
        workspace: workspace.to_path_buf(),
        reference_profile: args.security_profile == Some(crate::settings::Profile::Reference),
        allow: args.allow.clone(),
        env: std::env::vars().collect(),
    })
}

/// The refusal: each request refused, with its grant, on stderr (and the envelope with the
/// report as `details`); exit `permission_required`.
fn refuse(format: Format, report: &ImportReport) -> ExitCode {
    let refused: Vec<String> = report
        .requests
        .iter()
        .filter(|r| matches!(r.status, "refused" | "forbidden"))
        .map(|r| match &r.grant {
            Some(g) => format!("`{}`: {} (grant with `{g}`)", r.field, r.description),
            None => format!("`{}`: {} (never allowed)", r.field, r.description),
        })
        .collect();
    let message = format!(
        "`{}` asks for what the hardened profile does not grant: {}",
        report.file,
        refused.join("; ")
    );
    let body = ErrorBody::new(ErrorCode::PermissionRequired, message.clone())
        .with_details(serde_json::to_value(report).unwrap_or_default());
    let env: Envelope<()> = Envelope::failure(body);
    if format == Format::Json {
        output::envelope(&env);
    }
    output::stderr_line(&format!("error: {message}"));
    exit(env.exit_code())
}

/// The report for people: the configuration, then the choices, requests and notes.
fn render(report: &ImportReport) -> String {
    let mut out = String::new();
    match &report.written {
        Some(path) => {
            let _ = writeln!(out, "wrote {path}");
        }
        None => {
            let json = serde_json::to_string_pretty(&report.configuration).unwrap_or_default();
            let _ = writeln!(out, "{json}");
        }
    }
    let _ = writeln!(
        out,
        "lifetime {}: {}",
        report.lifetime.value, report.lifetime.devcell
    );
    let _ = writeln!(
        out,
        "cleanup {}: {}",
        report.cleanup.value, report.cleanup.devcell
    );
    for r in &report.requests {
        let _ = writeln!(out, "request {}: {} ({})", r.field, r.description, r.status);
    }
    if !report.requests.is_empty() {
        let _ = writeln!(
            out,
            "`devcell up` and `devcell handoff` judge these again: pass the same `--allow` there"
        );
    }
    for n in &report.notes {
        let _ = writeln!(out, "note {}: {}", n.field, n.message);
    }
    out
}
