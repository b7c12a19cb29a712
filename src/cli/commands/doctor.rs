//! `devcell doctor`.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::DoctorArgs;
use crate::cli::commands::{Extras, finish, runtime};
use crate::handoff::HandoffError;
use crate::handoff::doctor::{DoctorOptions, DoctorResult, doctor};

/// Runs `doctor`: every check with its fix (`next_actions` in JSON). Exit 0 even when findings
/// are errors: `result.healthy` says whether handoffs can work.
pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let result = runtime()
        .map_err(|e| HandoffError::Unsupported {
            message: e.to_string(),
            hint: None,
        })
        .and_then(|rt| rt.block_on(doctor(&DoctorOptions::default())));
    Ok(finish(args.format, result, render, |r| Extras {
        warnings: Vec::new(),
        next_actions: r.next_actions(),
    }))
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
