//! `devcell doctor`.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::{DoctorArgs, Format};
use crate::cli::commands::{Extras, finish, own_block_on_checked};
use crate::cli::output;
use crate::handoff::doctor::{DoctorOptions, DoctorResult, doctor};
use crate::handoff::envelope::{Envelope, ErrorBody, ErrorCode};

/// Runs `doctor`: every check with its fix (`next_actions` in JSON). Exit 0 when healthy
/// (warnings allowed); exit 4 (`unhealthy`, spec-note 0455) when a finding is at error level,
/// an unreachable engine included: the report is still printed (text on stdout, or the
/// envelope with the report in `error.details`), and stderr names the failing checks.
/// `--config-file` is read and checked first (an invalid file is `config_invalid`).
pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let result = own_block_on_checked(
        args.config_file.as_deref(),
        doctor(&DoctorOptions::default()),
    );
    let report = match result {
        Ok(r) if !r.healthy => r,
        other => {
            return Ok(finish(args.format, other, render, |r| Extras {
                warnings: Vec::new(),
                next_actions: r.next_actions(),
            }));
        }
    };
    let failing: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| f.severity == crate::handoff::doctor::Severity::Error)
        .map(|f| f.code.as_str())
        .collect();
    let message = format!("not healthy: {}", failing.join(", "));
    if args.format == Format::Json {
        let details = serde_json::to_value(&report).unwrap_or_default();
        let mut env: Envelope<()> = Envelope::failure(
            ErrorBody::new(ErrorCode::Unhealthy, message.clone()).with_details(details),
        );
        env.next_actions = report.next_actions();
        output::envelope(&env);
    } else {
        output::text(&render(&report));
    }
    output::stderr_line(&format!("error: {message}"));
    Ok(ExitCode::from(ErrorCode::Unhealthy.exit_code() as u8))
}

fn render(r: &DoctorResult) -> String {
    let mut s = String::new();
    for f in &r.findings {
        let mark = match f.severity {
            crate::handoff::doctor::Severity::Error => "ERROR",
            crate::handoff::doctor::Severity::Warning => "warn ",
            crate::handoff::doctor::Severity::Ok => "ok   ",
        };
        let _ = writeln!(s, "{mark} {}: {}", f.code, f.message);
        if let Some(fix) = &f.fix {
            match &fix.command {
                Some(argv) => {
                    let _ = writeln!(s, "      fix: {} (`{}`)", fix.description, argv.join(" "));
                }
                None => {
                    let _ = writeln!(s, "      fix: {}", fix.description);
                }
            }
        }
    }
    let _ = writeln!(s, "{}", if r.healthy { "healthy" } else { "not healthy" });
    s
}
