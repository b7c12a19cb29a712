//! `devcell env show`: a workspace's last environment record, or a handoff session's
//! (spec-note 0520).

use std::path::Path;
use std::process::ExitCode;

use crate::cli::args::EnvShowArgs;
use crate::cli::commands::{Extras, finish, folder};
use crate::handoff::state::StateStore;
use crate::ops::OpsError;
use crate::ops::environment::{EnvironmentRecord, EnvironmentStore};

/// Runs `env show`: the record as text, or as the envelope's `result` with `--format json`.
pub fn show(args: EnvShowArgs) -> anyhow::Result<ExitCode> {
    let workspace = folder(args.workspace_folder.as_deref());
    let result = shown(&workspace, args.session.as_deref());
    Ok(finish(args.format, result, render, |_| Extras::default()))
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
    line(&mut out, "configuration", &record.configuration.file);
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
