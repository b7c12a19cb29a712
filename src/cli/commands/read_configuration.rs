//! `devcell read-configuration`.

use std::process::ExitCode;

use crate::cli::args::ReadConfigurationArgs;

/// Runs `read-configuration`.
pub fn run(_args: ReadConfigurationArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("read-configuration is not implemented yet")
}
