//! Issue 27, item 4: several clone tasks over two repositories at once. Four tasks of one
//! multi-repository workspace (so four on each of its two repositories), started together:
//! each sees only its own branch and the base's history, commits in both repositories, and
//! comes back to `refs/devcell/tasks/<task>` of each; both mirrors stay consistent and the
//! user's checkouts, indexes, configurations and branches are untouched.

use std::path::PathBuf;
use std::process::Output;

use super::{COMMIT, Host, ok, two_repository_workspace, user_refs};
use crate::support;
use crate::support::docker::engine_ready;
use crate::support::git::git;
use crate::support::hostile::HostTarget;

/// In each repository: the clone holds exactly one ref, the task's own branch, and no commit
/// of any agent (another task's work would be one); then the agent's two commits. (`test`,
/// not `!`: `set -e` ignores a negated command.)
fn isolated_commit() -> String {
    format!(
        "set -e; for r in /workspace/app /workspace/lib; do (cd $r; \
         test \"$(git for-each-ref --format='%(refname)')\" = \"$(git symbolic-ref HEAD)\"; \
         test -z \"$(git log --all --format=%s | grep agent-)\"; \
         {COMMIT}); done"
    )
}

#[test]
fn four_clone_tasks_on_a_two_repository_workspace_at_once_each_come_back_alone() {
    if !engine_ready("clone_task_parallel_two", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let agent = isolated_commit();
    let host = Host::new(&[("iso", agent.as_str())]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-par-")
        .tempdir()
        .unwrap();
    let (ws, app, lib) = two_repository_workspace(at.path(), &target);
    let repos: [&PathBuf; 2] = [&app, &lib];
    let files = |r: &PathBuf| {
        ["HEAD", "index", "config"].map(|f| std::fs::read(r.join(".git").join(f)).ok())
    };
    let before: Vec<_> = repos.iter().map(|r| (files(r), user_refs(r))).collect();
    let bases: Vec<String> = repos
        .iter()
        .map(|r| git(r, &["rev-parse", "HEAD"]))
        .collect();

    let names: Vec<String> = (0..4).map(|i| format!("q{i}")).collect();
    let outs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|n| {
                let (host, ws) = (&host, &ws);
                s.spawn(move || host.handoff(ws, "iso", &["--task", n]))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // per repository, the tips of the four tasks
    let mut tips: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for (n, out) in names.iter().zip(&outs) {
        let r = ok(out);
        let tasks = r["result"]["tasks"].as_array().expect("tasks").clone();
        assert_eq!(tasks.len(), 2, "{n}: {r:#}");
        for (i, t) in tasks.iter().enumerate() {
            let repo = repos[i];
            assert_eq!(
                t["repo"],
                repo.file_name().unwrap().to_str().unwrap(),
                "{t:#}"
            );
            let tip = t["fetched"].as_str().expect("fetched").to_string();
            assert_eq!(
                git(repo, &["rev-parse", &format!("refs/devcell/tasks/{n}")]),
                tip,
                "{n} in {}",
                repo.display()
            );
            // the agent's two commits on the base, naming its own branch only
            assert_eq!(git(repo, &["rev-parse", &format!("{tip}~2")]), bases[i]);
            assert_eq!(
                git(repo, &["show", &format!("{tip}:agent.txt")]),
                format!("refs/heads/devcell/{n}")
            );
            tips[i].push(tip);
        }
    }
    for t in &mut tips {
        t.sort();
        t.dedup();
        assert_eq!(t.len(), 4, "each task its own commits");
    }
    let mirrors = host.mirrors();
    assert_eq!(mirrors.len(), 2, "one mirror per repository");
    for m in &mirrors {
        git(m, &["fsck", "--no-progress", "--strict"]);
    }
    for (repo, (files_before, refs_before)) in repos.iter().zip(&before) {
        assert!(
            files(repo) == *files_before,
            "{}: HEAD, index or config changed",
            repo.display()
        );
        assert_eq!(user_refs(repo), *refs_before, "{}", repo.display());
        // (`fsck` reads the index: `app`'s `core.fsmonitor` would run, so it is off)
        git(
            repo,
            &["-c", "core.fsmonitor=false", "fsck", "--no-progress"],
        );
    }
    target.assert_untouched();
}
