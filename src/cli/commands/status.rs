//! `devcell status`.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::StatusArgs;
use crate::cli::commands::{Extras, finish, folder, own_block_on};
use crate::handoff::status::{StatusOptions, StatusResult, status};

/// Runs `status`: the workspace's container, sessions and git state.
pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let result = (|| {
        let settings = crate::settings::load(args.config_file.as_deref())?;
        let opts = StatusOptions {
            workspace_folder: folder(args.workspace_folder.as_deref()),
            settings,
            state_root: None,
        };
        own_block_on(status(&opts))
    })();
    Ok(finish(args.format, result, render, |r| Extras {
        warnings: r.warnings.clone(),
        next_actions: r.next_actions(),
    }))
}

fn render(r: &StatusResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "workspace {} ({})",
        r.workspace.display(),
        r.layout.as_str()
    );
    match &r.container {
        Some(c) => {
            let _ = writeln!(
                s,
                "container {} {} ({})",
                &c.id[..c.id.len().min(12)],
                c.state,
                c.image
            );
        }
        None if r.engine_reachable => {
            let _ = writeln!(s, "container none");
        }
        None => {
            let _ = writeln!(s, "container unknown (no engine)");
        }
    }
    for x in &r.services {
        let c = &x.container;
        let _ = writeln!(
            s,
            "service {} container {} {} ({})",
            x.service,
            &c.id[..c.id.len().min(12)],
            c.state,
            c.image
        );
    }
    for x in &r.sessions {
        let _ = writeln!(
            s,
            "session {} agent `{}` on {}: {}, started {}{}",
            x.session.id,
            x.session.agent,
            x.session.runtime.as_str(),
            x.status.as_str(),
            x.session.started_at,
            x.session
                .outcome
                .as_ref()
                .map(|o| format!(", ended: {o}"))
                .unwrap_or_default()
        );
    }
    for repo in &r.repos {
        if let Some(error) = &repo.error {
            let _ = writeln!(s, "repo {}: git state unknown: {error}", repo.name);
            continue;
        }
        let _ = writeln!(
            s,
            "repo {} {} {}{}{}",
            repo.name,
            repo.branch.as_deref().unwrap_or("(detached)"),
            if repo.dirty == Some(true) {
                "dirty"
            } else {
                "clean"
            },
            repo.ahead
                .map(|a| format!(" ahead {a}"))
                .unwrap_or_default(),
            repo.behind
                .map(|b| format!(" behind {b}"))
                .unwrap_or_default(),
        );
    }
    // a repository git refused is shown on its own line above
    for (_, w) in r.warnings.iter().filter(|(c, _)| c != "git_unreadable") {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
