//! `devcell delete`.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::DeleteArgs;
use crate::cli::commands::{Extras, finish, folder, own_block_on_checked};
use crate::cli::output::StderrReporter;
use crate::handoff::delete::{DeleteOptions, DeleteResult};
use crate::handoff::task::run::{TaskDeleted, WorkspaceDeleted, delete_workspace};

/// Runs `delete`: the teardown report (removed, kept, remaining, verified). Exit 0 only when
/// nothing labelled for the workspace remains (`verified`), else 1 with the report.
pub fn run(args: DeleteArgs) -> anyhow::Result<ExitCode> {
    if let Some(task) = &args.task {
        let workspace = folder(args.workspace_folder.as_deref());
        let result = own_block_on_checked(
            args.config_file.as_deref(),
            crate::handoff::task::run::delete(&workspace, task, args.force, None, &StderrReporter),
        );
        return Ok(finish(args.format, result, render_task, |_| {
            Extras::default()
        }));
    }
    // a settings file that cannot be read is reported by `own_block_on_checked` below, as
    // every command reports it (exit 10); the budget is then never used
    let fetch_budget = crate::settings::load(args.config_file.as_deref())
        .map(|s| crate::handoff::container_git::FetchBudget::from_settings(&s.handoff))
        .unwrap_or_default();
    let opts = DeleteOptions {
        workspace_folder: folder(args.workspace_folder.as_deref()),
        state_root: None,
        project_volumes: false,
        fetch_budget,
    };
    // `--config-file` is accepted like every devcell command's; read and checked first.
    let result = own_block_on_checked(
        args.config_file.as_deref(),
        delete_workspace(&opts, args.force, &StderrReporter),
    );
    let verified = result
        .as_ref()
        .map(|r| r.workspace.verified)
        .unwrap_or(true);
    let code = finish(args.format, result, render_workspace, |r| Extras {
        warnings: if r.workspace.verified {
            Vec::new()
        } else {
            vec![(
                "teardown_incomplete".to_string(),
                "objects labelled for the workspace remain (see result.remaining)".to_string(),
            )]
        },
        next_actions: Vec::new(),
    });
    Ok(if verified { code } else { ExitCode::from(1) })
}

fn render_workspace(r: &WorkspaceDeleted) -> String {
    let mut s = String::new();
    for t in &r.tasks {
        s.push_str(&render_task(t));
    }
    s.push_str(&render(&r.workspace));
    s
}

fn render_task(r: &TaskDeleted) -> String {
    let mut s = render(&r.teardown);
    let _ = writeln!(s, "removed task `{}` (clone {})", r.task, r.clone.display());
    if let Some(d) = &r.dropped {
        let _ = writeln!(s, "dropped unfetched commits up to {d} (--force)");
    }
    if let Some(k) = &r.kept_ref {
        let _ = writeln!(s, "kept `{k}` in the repository");
    }
    s
}

fn render(r: &DeleteResult) -> String {
    let mut s = String::new();
    for c in &r.removed.containers {
        let _ = writeln!(s, "removed container {c}");
    }
    for v in &r.removed.volumes {
        let _ = writeln!(s, "removed volume {v}");
    }
    if let Some(p) = &r.removed.state {
        let _ = writeln!(s, "removed state {}", p.display());
    }
    for e in &r.removed.environments {
        let _ = writeln!(s, "removed environment record {}", e.display());
    }
    for f in &r.kept.folders {
        let _ = writeln!(s, "kept {}", f.describe());
    }
    for l in &r.kept.logs {
        let _ = writeln!(s, "kept log {}", l.display());
    }
    for e in &r.kept.environments {
        let _ = writeln!(s, "kept environment record {}", e.display());
    }
    if let Some(l) = &r.kept.mail_log {
        let _ = writeln!(s, "kept mail log {} (the tasks' messages)", l.display());
    }
    for v in &r.kept.volumes {
        let _ = writeln!(s, "kept volume {v} (the repository's data)");
    }
    if r.verified {
        let _ = writeln!(s, "verified: nothing labelled {} remains", r.label);
    } else {
        let _ = writeln!(
            s,
            "NOT verified: remaining containers {:?}, volumes {:?}, networks {:?}",
            r.remaining.containers, r.remaining.volumes, r.remaining.networks
        );
    }
    s
}
