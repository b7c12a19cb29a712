//! `devcell status`.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::cli::args::StatusArgs;
use crate::cli::commands::{Extras, finish, folder, own_block_on};
use crate::handoff::status::{StatusOptions, StatusResult, status};
use crate::handoff::status_all::{
    AllStatus, LastSession, RepositoryState, TaskEntry, TaskState, status_all,
};

/// Runs `status`: the workspace's container, sessions and git state.
pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    if args.all {
        return run_all(args);
    }
    let result = (|| {
        let settings = crate::settings::load(args.config_file.as_deref())?;
        let workspace_folder = folder(args.workspace_folder.as_deref());
        let mail_group = args
            .mail_group
            .as_deref()
            .map(|name| crate::handoff::mail_host::group_of(&workspace_folder, Some(name)))
            .transpose()?;
        let opts = StatusOptions {
            workspace_folder,
            settings,
            state_root: None,
            mail_group,
        };
        own_block_on(status(&opts))
    })();
    Ok(finish(args.format, result, render, |r| Extras {
        warnings: r.warnings.clone(),
        next_actions: r.next_actions(),
    }))
}

/// `status --all`: every workspace of devcell's state (spec-note 0439).
fn run_all(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let result = crate::settings::load(args.config_file.as_deref())
        .map_err(crate::ops::OpsError::from)
        .and_then(|_| status_all(None));
    Ok(finish(args.format, result, render_all, |r| Extras {
        warnings: r.warnings.clone(),
        next_actions: Vec::new(),
    }))
}

fn render_all(r: &AllStatus) -> String {
    let mut s = String::new();
    if r.workspaces.is_empty() && r.mail_groups.is_empty() {
        let _ = writeln!(s, "no workspaces in {}", r.state_root.display());
    }
    for w in &r.workspaces {
        let _ = writeln!(
            s,
            "workspace {}{}: container {}{}",
            w.workspace.display(),
            if w.exists { "" } else { " (folder gone)" },
            w.container.as_deref().map_or("none".to_string(), short_id),
            w.last_session
                .as_ref()
                .map(|x| format!(", {}", session_words(x)))
                .unwrap_or_default()
        );
        for t in &w.tasks {
            let _ = writeln!(s, "  {}", task_all_line(t, &w.workspace));
        }
        mail_lines(&mut s, "  ", &w.mail, &w.escalations);
    }
    for g in &r.mail_groups {
        let _ = writeln!(s, "mail group {} (no workspace listed):", g.group);
        mail_lines(&mut s, "  ", &g.mail, &g.escalations);
    }
    for (_, w) in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// The first 12 characters of a container id.
fn short_id(id: &str) -> String {
    id.chars().take(12).collect()
}

/// `session ID agent `A` live, started T[, ended: OUTCOME]`.
fn session_words(x: &LastSession) -> String {
    format!(
        "session {} agent `{}` {}, started {}{}",
        x.id,
        x.agent,
        x.status.as_str(),
        x.started_at,
        x.outcome
            .as_ref()
            .map(|o| format!(", ended: {o}"))
            .unwrap_or_default()
    )
}

/// One task of `status --all` (of the workspace `workspace`): name, state, branch, container,
/// and per repository what was fetched and when.
fn task_all_line(t: &TaskEntry, workspace: &std::path::Path) -> String {
    let short = |o: &str| o[..o.len().min(12)].to_string();
    let repos: Vec<String> = t
        .repos
        .iter()
        .map(|r| {
            let f = &r.fetch;
            let what = match (&f.fetched, &f.tip) {
                (Some(x), Some(tip)) if x == tip => format!("fetched {}", short(x)),
                (Some(x), _) => format!("fetched {}, NOT the branch's latest commit", short(x)),
                (None, Some(tip)) if *tip == f.base => "no commits yet".to_string(),
                (None, Some(_)) => "NOT fetched".to_string(),
                (None, None) => "branch unreadable".to_string(),
            };
            let at = r
                .fetched_at
                .as_deref()
                .map(|a| format!(" (last fetch {a})"))
                .unwrap_or_default();
            match &f.repo {
                Some(repo) => format!("{repo}: {what}{at}"),
                None => format!("{what}{at}"),
            }
        })
        .collect();
    let left = |how: &str| {
        format!(
            " [its repository {how}: `devcell prune --tasks` removes it once nothing would be lost; `devcell delete --task {} --workspace-folder {}` removes it now, refusing while its clone holds commits (`--force` drops them)]",
            t.task,
            workspace.display()
        )
    };
    let repository = match t.repository {
        RepositoryState::Present => String::new(),
        RepositoryState::Replaced => left("was REPLACED by another"),
        RepositoryState::Gone => left("is GONE"),
    };
    format!(
        "task {} {} on {}, container {}: {}{repository}",
        t.task,
        match t.state {
            TaskState::New => "new",
            TaskState::Live => "live",
            TaskState::Ended => "ended",
            TaskState::Stale =>
                "stale (devcell was killed: `devcell fetch --task` brings its commits back)",
        },
        t.branch,
        t.container.as_deref().map_or("none".to_string(), short_id),
        repos.join("; ")
    )
}

/// The mail and escalation lines of a workspace or a group, each after `indent`.
fn mail_lines(
    s: &mut String,
    indent: &str,
    mail: &[crate::handoff::task::mail::TaskMail],
    escalations: &[crate::handoff::task::mail::PendingEscalation],
) {
    for m in mail {
        let _ = writeln!(
            s,
            "{indent}mail {}: {} unacknowledged, {} held for you ({} escalated)",
            m.task, m.unacknowledged, m.held, m.escalated
        );
    }
    for e in escalations {
        let _ = writeln!(s, "{indent}{}", escalation_line(e));
    }
}

fn render(r: &StatusResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "workspace {} ({})",
        r.workspace.display(),
        r.layout.as_str()
    );
    task_lines(&mut s, r);
    if let Some(group) = &r.mail_group {
        let _ = writeln!(s, "mail group {group}:");
    }
    for m in &r.mail {
        let _ = writeln!(
            s,
            "mail {}: {} unacknowledged, {} held for you ({} escalated; `devcell mail list`)",
            m.task, m.unacknowledged, m.held, m.escalated
        );
    }
    for e in &r.escalations {
        let _ = writeln!(s, "{}", escalation_line(e));
    }
    container_lines(&mut s, r);
    if let Some(e) = &r.egress {
        let _ = writeln!(s, "{}", egress_line(e));
    }
    session_and_repo_lines(&mut s, r);
    for q in &r.quarantined_git {
        let _ = writeln!(s, "{}", quarantine_line(q));
    }
    // a repository git refused is shown on its own line above
    for (_, w) in r.warnings.iter().filter(|(c, _)| c != "git_unreadable") {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// One line a clone task: its base, its branch's tip, what was fetched (or refused), ahead
/// and behind.
fn task_lines(s: &mut String, r: &StatusResult) {
    let short = |o: &str| o[..o.len().min(12)].to_string();
    for t in &r.tasks {
        let fetched = match (&t.fetched, &t.tip) {
            (Some(f), Some(tip)) if f == tip => format!("fetched {}", short(f)),
            (Some(f), _) => format!("fetched {}, NOT the branch's latest commit", short(f)),
            (None, Some(tip)) if *tip == t.base => "no commits yet".to_string(),
            (None, _) => "not fetched".to_string(),
        };
        let fetched = match &t.refused {
            Some(why) => format!("{fetched} (REFUSED: {why})"),
            None => fetched,
        };
        let _ = writeln!(
            s,
            "task {} base {} branch at {}: {fetched}; {} ahead, {} behind (`{}`)",
            t.task,
            short(&t.base),
            t.tip.as_deref().map_or("(unreadable)".to_string(), short),
            t.ahead.map_or("?".to_string(), |n| n.to_string()),
            t.behind.map_or("?".to_string(), |n| n.to_string()),
            t.ref_name
        );
    }
}

/// The workspace's container (or why it is not known), the external containers and the
/// Compose services' containers.
fn container_lines(s: &mut String, r: &StatusResult) {
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
    for c in &r.external_containers {
        let _ = writeln!(
            s,
            "external container {} {} ({}): someone else's; devcell never starts, stops or removes it",
            &c.id[..c.id.len().min(12)],
            c.state,
            c.image
        );
    }
    for g in &r.groups {
        let _ = writeln!(s, "{}", g.line());
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
}

/// One line a session, then one a repository (its branch and state, or why git could not
/// tell).
fn session_and_repo_lines(s: &mut String, r: &StatusResult) {
    for x in &r.sessions {
        let _ = writeln!(
            s,
            "session {} agent `{}` on {}{}: {}, started {}{}",
            x.session.id,
            x.session.agent,
            x.session.runtime.as_str(),
            if x.session.external {
                " (external)"
            } else {
                ""
            },
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
}

/// One git entry still in quarantine (spec-note 0661): where it was, where it is, when, and
/// what to do.
fn quarantine_line(q: &crate::handoff::status::StillQuarantined) -> String {
    format!(
        "quarantined git `{}` (made in the workspace by the container; moved by devcell at {}) is at `{}`: check it there; if it is yours, move it back and accept it with `--allow created-git:{}`",
        q.path,
        q.at,
        q.moved_to.display(),
        q.path
    )
}

/// One escalation command not run yet or without an outcome (`devcell mail show ID` has the
/// message).
fn escalation_line(e: &crate::handoff::task::mail::PendingEscalation) -> String {
    format!(
        "mail escalation {} ({} from {} to {}): {}",
        e.id,
        e.kind,
        e.from,
        e.to.join(","),
        e.description
    )
}

/// The allowlist's line: what the proxy serves and what it decided (the JSON's `egress`), so
/// a refused destination shows without `--format json`.
fn egress_line(e: &crate::ops::egress::EgressSummary) -> String {
    let list = |d: &[crate::ops::egress::DestinationSummary]| {
        if d.is_empty() {
            return "none".to_string();
        }
        d.iter()
            .map(|x| {
                let reasons = if x.allowed || x.reasons.is_empty() {
                    String::new()
                } else {
                    format!(", {}", x.reasons.join(", "))
                };
                format!("{}:{} ({}{reasons})", x.destination, x.port, x.count)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut more = String::new();
    if e.omitted > 0 {
        more.push_str(&format!("; {} more decisions not listed", e.omitted));
    }
    if e.dropped > 0 {
        more.push_str(&format!(
            "; {} older decisions dropped from the bounded record",
            e.dropped
        ));
    }
    format!(
        "egress {} {} (proxy {}): allowed {}; refused {}{more}",
        e.network,
        if e.entries.is_empty() {
            "(no entries)".to_string()
        } else {
            e.entries.join(", ")
        },
        if e.proxy_running {
            "running"
        } else {
            "stopped"
        },
        list(&e.allowed),
        list(&e.refused)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::egress::{DestinationSummary, EgressSummary};

    #[test]
    fn a_quarantined_entry_says_where_it_was_where_it_is_and_when() {
        let q = crate::handoff::status::StillQuarantined {
            path: "src/.git".into(),
            moved_to: "/s/quarantine/1-2/src/.git".into(),
            at: "2026-12-05T20:00:00Z".into(),
        };
        let line = quarantine_line(&q);
        for part in [
            "`src/.git`",
            "`/s/quarantine/1-2/src/.git`",
            "2026-12-05T20:00:00Z",
            "--allow created-git:src/.git",
        ] {
            assert!(line.contains(part), "{part}: {line}");
        }
    }

    #[test]
    fn the_egress_line_names_the_entries_and_each_decision() {
        let d = |destination: &str, allowed: bool, reason: &str| DestinationSummary {
            destination: destination.into(),
            port: 18766,
            allowed,
            reasons: vec![reason.into()],
            count: 1,
            bytes_sent: 0,
            bytes_received: 0,
        };
        let e = EgressSummary {
            network: "allowlist".into(),
            entries: vec!["web.test:18766=127.0.0.1".into()],
            record: "/s/decisions.jsonl".into(),
            proxy_running: true,
            allowed: vec![d("web.test", true, "allowed")],
            refused: vec![d("other.test", false, "not-listed")],
            omitted: 0,
            dropped: 0,
        };
        assert_eq!(
            egress_line(&e),
            "egress allowlist web.test:18766=127.0.0.1 (proxy running): allowed web.test:18766 (1); refused other.test:18766 (1, not-listed)"
        );
        let quiet = EgressSummary {
            proxy_running: false,
            allowed: vec![],
            refused: vec![],
            ..e
        };
        assert!(
            egress_line(&quiet).ends_with("(proxy stopped): allowed none; refused none"),
            "{}",
            egress_line(&quiet)
        );
        let flooded = EgressSummary {
            omitted: 7,
            dropped: 9,
            ..quiet
        };
        assert!(
            egress_line(&flooded).ends_with(
                "refused none; 7 more decisions not listed; 9 older decisions dropped from the bounded record"
            ),
            "{}",
            egress_line(&flooded)
        );
    }
}
