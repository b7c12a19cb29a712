//! `devcell down`.

use std::process::ExitCode;

use crate::cli::args::DownArgs;
use crate::cli::commands::{block_on, target};
use crate::cli::output::{self, StderrReporter};
use crate::ops::{DownOptions, down};

/// Runs `down`: `{"outcome":"success","containerIds":[…],"removed":…}` on stdout.
pub fn run(args: DownArgs) -> anyhow::Result<ExitCode> {
    let opts = DownOptions {
        target: target(&args.container, None)?,
        remove: args.remove,
        timeout: None,
    };
    let result = block_on(down(&opts, &StderrReporter))??;
    output::json(&result.to_json());
    Ok(ExitCode::SUCCESS)
}
