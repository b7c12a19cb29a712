//! `devcell fetch --task NAME`.

use std::process::ExitCode;

use crate::cli::args::FetchArgs;
use crate::cli::commands::{Extras, finish, folder, own_block_on_checked};
use crate::handoff::task::run::{fetch_task, state_root};

/// Runs `fetch`: the clone task's branch fetched into `refs/devcell/tasks/<task>` of the
/// repository (spec-note 0437), one line (or the envelope) saying what moved.
pub fn run(args: FetchArgs) -> anyhow::Result<ExitCode> {
    let workspace = folder(args.workspace_folder.as_deref());
    let result = own_block_on_checked(args.config_file.as_deref(), async {
        let settings = crate::settings::load(args.config_file.as_deref())?;
        let state = state_root(None)?;
        let budget = crate::handoff::container_git::FetchBudget::from_settings(&settings.handoff);
        Ok(fetch_task(&workspace, &args.task, &state, &budget)?)
    });
    Ok(finish(
        args.format,
        result,
        |f| f.lines(),
        |_| Extras::default(),
    ))
}
