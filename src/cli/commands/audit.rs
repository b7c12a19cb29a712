//! `devcell audit`.

use std::process::ExitCode;

use crate::cli::args::AuditArgs;
use crate::cli::commands::{Extras, finish, runtime};
use crate::handoff::HandoffError;
use crate::handoff::audit::{AuditOptions, audit};

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
    let result = runtime()
        .map_err(|e| HandoffError::Unsupported {
            message: e.to_string(),
            hint: None,
        })
        .and_then(|rt| rt.block_on(audit(&opts)));
    let below = match (&result, args.min_score) {
        (Ok(r), Some(min)) => !r.passes(min),
        _ => false,
    };
    let min = args.min_score.unwrap_or(0);
    let code = finish(
        args.format,
        result,
        |r| r.render_table(),
        |r| Extras {
            warnings: if r.passes(min) {
                Vec::new()
            } else {
                vec![(
                    "below_min_score".to_string(),
                    format!(
                        "score {}/{} is below --min-score {min}",
                        r.score, r.max_score
                    ),
                )]
            },
            next_actions: Vec::new(),
        },
    );
    Ok(if below {
        ExitCode::from(BELOW_MIN_SCORE)
    } else {
        code
    })
}
