//! `devcell audit`.

use std::process::ExitCode;

use crate::cli::args::{AuditArgs, Format};
use crate::cli::commands::{Extras, finish, runtime};
use crate::cli::output;
use crate::ops::HandoffError;
use crate::ops::container_audit::{AuditOptions, audit};
use crate::ops::envelope::{Envelope, ErrorBody, ErrorCode};

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
    let result = crate::settings::load(args.config_file.as_deref())
        .map_err(HandoffError::from)
        .and_then(|_| {
            runtime().map_err(|e| HandoffError::Unsupported {
                message: e.to_string(),
                hint: None,
            })
        })
        .and_then(|rt| rt.block_on(audit(&opts)));
    let min = match (&result, args.min_score) {
        (Ok(r), Some(min)) if !r.passes(min) => min,
        _ => {
            return Ok(finish(
                args.format,
                result,
                |r| r.render_table(),
                |_| Extras::default(),
            ));
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
        output::text(&report.render_table());
    }
    output::stderr_line(&format!("error: {message}"));
    Ok(ExitCode::from(BELOW_MIN_SCORE))
}
