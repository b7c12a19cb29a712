//! `devcell audit`.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::{AuditArgs, Format};
use crate::cli::commands::{Extras, finish, own_block_on_checked};
use crate::cli::output;
use crate::handoff::audit::{AuditOptions, AuditReport, FactsSource, Risk, audit};
use crate::handoff::envelope::{Envelope, ErrorBody, ErrorCode};

/// Exit code when the score is below `--min-score` (the report is still printed).
pub const BELOW_MIN_SCORE: u8 = 3;

/// Runs `audit`: the human table (or the envelope), exit [`BELOW_MIN_SCORE`] below
/// `--min-score`.
pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let opts = AuditOptions {
        container: args.container.clone(),
        workspace_folder: args.workspace_folder.clone(),
        probe: args.probe,
    };
    // `--config-file` is accepted like every devcell command's; read and checked first.
    let result = own_block_on_checked(args.config_file.as_deref(), audit(&opts));
    let min = match (&result, args.min_score) {
        (Ok(r), Some(min)) if !r.passes(min) => min,
        _ => {
            return Ok(finish(args.format, result, render_table, |_| {
                Extras::default()
            }));
        }
    };
    // Below `--min-score`: the report is still shown, and the gate's verdict is an error
    // (exit 3; `ok: false`, the report in `error.details`; spec-note 0323).
    let Ok(report) = result else {
        return Ok(ExitCode::from(BELOW_MIN_SCORE));
    };
    let message = format!(
        "score {}/{} is below --min-score {min}",
        report.score, report.max_score
    );
    if args.format == Format::Json {
        let details = serde_json::json!({
            "score": report.score,
            "maxScore": report.max_score,
            "minScore": min,
            "report": report,
        });
        let env: Envelope<()> = Envelope::failure(
            ErrorBody::new(ErrorCode::BelowMinScore, message.clone()).with_details(details),
        )
        .with_warning("below_min_score", message.clone());
        output::envelope(&env);
    } else {
        output::text(&render_table(&report));
    }
    output::stderr_line(&format!("error: {message}"));
    Ok(ExitCode::from(BELOW_MIN_SCORE))
}

/// The report as a human table: a header with the score, then one line per evidence, grouped
/// by control (the title and score on its first line).
pub fn render_table(report: &AuditReport) -> String {
    let mut out = String::new();
    let who = report.container.as_deref().unwrap_or("container");
    let src = match report.source {
        Some(FactsSource::Inspect) => "engine inspect",
        Some(FactsSource::Probe) => "probe inside the container",
        Some(FactsSource::ProbeWithInspect) => "probe inside the container + engine inspect",
        None => "given facts",
    };
    let _ = writeln!(
        out,
        "isolation audit of {who} ({src}): {}/{}",
        report.score, report.max_score
    );
    let _ = writeln!(
        out,
        "{:<18} {:>5}  {:<8} EVIDENCE",
        "CONTROL", "SCORE", "RISK"
    );
    for c in &report.controls {
        let score = format!("{}/{}", c.score, c.max);
        for (i, e) in c.evidence.iter().enumerate() {
            let (name, sc) = if i == 0 {
                (c.title.as_str(), score.as_str())
            } else {
                ("", "")
            };
            let risk = match e.risk {
                Risk::Critical => "CRITICAL",
                Risk::Weak => "weak",
                Risk::Safe => "ok",
            };
            let _ = writeln!(
                out,
                "{name:<18} {sc:>5}  {risk:<8} {}: {}",
                e.subject, e.detail
            );
        }
    }
    if let Some(mail) = &report.mail {
        let _ = writeln!(out, "{}", crate::handoff::audit::mail_line(mail));
    }
    if let Some(network) = &report.network {
        let _ = writeln!(out, "network: {network}");
    }
    for service in &report.services {
        out.push('\n');
        out.push_str(&render_table(service));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::audit::{Control, ControlScore, Evidence};

    fn evidence(subject: &str, risk: Risk) -> Evidence {
        Evidence {
            subject: subject.to_string(),
            detail: "why".to_string(),
            risk,
        }
    }

    /// A report as the audit returns it: every control with two pieces of evidence.
    fn report(source: Option<FactsSource>, worst: Risk) -> AuditReport {
        let controls: Vec<ControlScore> = Control::ALL
            .iter()
            .map(|&control| ControlScore {
                control,
                title: control.title().to_string(),
                score: worst.cap(),
                max: 2,
                evidence: vec![evidence("first", worst), evidence("second", Risk::Safe)],
            })
            .collect();
        AuditReport {
            container: Some("box".to_string()),
            source,
            score: controls.iter().map(|c| c.score).sum(),
            max_score: 16,
            controls,
            network: None,
            services: Vec::new(),
            mail: None,
        }
    }

    #[test]
    fn table_lists_every_control() {
        let t = render_table(&report(Some(FactsSource::Inspect), Risk::Safe));
        for c in Control::ALL {
            assert!(t.contains(c.title()), "{t}");
        }
        assert!(t.contains("16/16"));
    }

    #[test]
    fn table_shows_each_control_once_and_every_evidence() {
        let t = render_table(&report(Some(FactsSource::ProbeWithInspect), Risk::Critical));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "isolation audit of box (probe inside the container + engine inspect): 0/16"
        );
        assert_eq!(lines[1], "CONTROL            SCORE  RISK     EVIDENCE");
        assert_eq!(lines[2], "repo scope           0/2  CRITICAL first: why");
        assert_eq!(lines[3], "                          ok       second: why");
        assert_eq!(lines.len(), 2 + 2 * Control::ALL.len());
    }
}
