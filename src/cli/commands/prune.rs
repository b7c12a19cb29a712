//! `devcell prune`.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::PruneArgs;
use crate::cli::commands::{Extras, finish, own_block_on_checked};
use crate::cli::output::StderrReporter;
use crate::handoff::prune::{PruneOptions, PruneResult, human_size, prune};
use crate::handoff::task::orphans::{TaskPruneResult, prune_tasks};
use crate::ops::environment::store::Pruned;

fn render_tasks(r: &TaskPruneResult) -> String {
    let mut s = String::new();
    let verb = if r.dry_run { "would remove" } else { "removed" };
    for o in &r.removed {
        let _ = writeln!(s, "{verb} {}", o.message);
    }
    for k in &r.kept {
        let _ = writeln!(s, "kept {}: {}", k.orphan.message, k.kept_because);
    }
    for m in &r.mirrors {
        let _ = writeln!(s, "{verb} unused mirror {}", m.display());
    }
    let _ = writeln!(
        s,
        "{verb} {} orphaned task(s) and {} unused mirror(s)",
        r.removed.len(),
        r.mirrors.len()
    );
    s
}

fn render_environments(r: &Pruned) -> String {
    let mut s = String::new();
    let verb = if r.dry_run { "would remove" } else { "removed" };
    for p in &r.removed {
        let _ = writeln!(
            s,
            "{verb} environment record {} ({}) {}",
            p.hash,
            p.command,
            p.path.display()
        );
    }
    for k in &r.kept {
        let _ = writeln!(s, "kept environment record {}: {}", k.hash, k.kept_because);
    }
    let _ = writeln!(
        s,
        "{verb} {} environment record(s), kept {}",
        r.removed.len(),
        r.kept.len()
    );
    s
}

/// Runs `prune`: the images (or, with `--tasks` / `--environments`, orphaned tasks or unnamed
/// environment records) removed (or, with `--dry-run`, to be removed) and those kept with
/// the reason. Exit 0 unless the engine cannot be reached.
pub fn run(args: PruneArgs) -> anyhow::Result<ExitCode> {
    if args.tasks {
        let result = own_block_on_checked(
            args.config_file.as_deref(),
            prune_tasks(args.dry_run, &StderrReporter),
        );
        return Ok(finish(args.format, result, render_tasks, |_| {
            Extras::default()
        }));
    }
    if args.environments {
        let result = own_block_on_checked(args.config_file.as_deref(), async {
            crate::handoff::environment::prune_environments(None, args.dry_run)
        });
        return Ok(finish(args.format, result, render_environments, |r| {
            Extras {
                warnings: Vec::new(),
                next_actions: if r.dry_run && !r.removed.is_empty() {
                    vec![crate::handoff::envelope::NextAction::command(
                        "remove them",
                        ["devcell", "prune", "--environments"].map(String::from),
                    )]
                } else {
                    Vec::new()
                },
            }
        }));
    }
    let opts = PruneOptions {
        dry_run: args.dry_run,
        images: args.image.clone(),
    };
    // `--config-file` is accepted like every devcell command's; read and checked first.
    let result = own_block_on_checked(args.config_file.as_deref(), prune(&opts));
    Ok(finish(args.format, result, render, |r| Extras {
        warnings: Vec::new(),
        next_actions: if r.dry_run && !r.removed.is_empty() {
            vec![crate::handoff::envelope::NextAction::command(
                "remove them",
                std::iter::once("devcell".to_string())
                    .chain(std::iter::once("prune".to_string()))
                    .chain(
                        args.image
                            .iter()
                            .flat_map(|i| ["--image".to_string(), i.clone()]),
                    ),
            )]
        } else {
            Vec::new()
        },
    }))
}

fn render(r: &PruneResult) -> String {
    let mut s = String::new();
    let verb = if r.dry_run { "would remove" } else { "removed" };
    for i in &r.removed {
        let _ = writeln!(s, "{verb} {} ({})", i.reference, human_size(i.size));
    }
    for k in &r.kept {
        let _ = writeln!(s, "kept {}: {}", k.reference, k.reason);
    }
    let _ = writeln!(
        s,
        "{} {} image(s), {}",
        verb,
        r.removed.len(),
        human_size(r.reclaimed_bytes)
    );
    s
}
