//! Issue 27, item 4: several clone tasks over two repositories at once, started together:
//! four tasks of one multi-repository workspace (so four on each of its two repositories), and
//! two tasks on each of two separate workspaces (different repositories). Each agent sees only
//! its own branch and the base's history, commits in each of its repositories, and comes back
//! to `refs/devcell/tasks/<task>` of each; every mirror stays consistent and the user's
//! checkouts, indexes, configurations and branches are untouched.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{COMMIT, Host, ok, source_repo, two_repository_workspace, user_refs};
use crate::support;
use crate::support::docker::engine_ready;
use crate::support::git::{git, give_to_workspace_owner, hostgit_image};
use crate::support::hostile::HostTarget;

/// In each repository of the workspace (`/workspace` itself for one repository, else
/// `/workspace/app` and `/workspace/lib`): the clone holds exactly one ref, the task's own branch, and
/// no commit of any agent (another task's work would be one); then the agent's two commits.
/// (`test`, not `!`: `set -e` ignores a negated command.)
fn isolated_commit() -> String {
    format!(
        "set -e; if [ -d /workspace/.git ]; then set -- /workspace; else set -- /workspace/app /workspace/lib; fi; \
         for r in \"$@\"; do (cd $r; \
         test \"$(git for-each-ref --format='%(refname)')\" = \"$(git symbolic-ref HEAD)\"; \
         test -z \"$(git log --all --format=%s | grep agent-)\"; \
         {COMMIT}); done"
    )
}

/// One workspace of a run: the folder `--workspace-folder` names, its repositories in the
/// order the handoff's result lists them, and the tasks started on it.
struct Workspace {
    folder: PathBuf,
    repos: Vec<PathBuf>,
    tasks: Vec<String>,
}

/// Starts every task of every workspace at once (agent `iso`, [`isolated_commit`]), then
/// checks what each brought back, the mirrors (one per repository, `fsck --strict`) and that
/// the user's repositories are as they were.
fn all_at_once(host: &Host, workspaces: &[Workspace], target: &HostTarget) {
    let repos: Vec<&PathBuf> = workspaces.iter().flat_map(|w| &w.repos).collect();
    let files =
        |r: &Path| ["HEAD", "index", "config"].map(|f| std::fs::read(r.join(".git").join(f)).ok());
    let before: Vec<_> = repos.iter().map(|r| (files(r), user_refs(r))).collect();

    let started: Vec<(&Workspace, &String)> = workspaces
        .iter()
        .flat_map(|w| w.tasks.iter().map(move |t| (w, t)))
        .collect();
    let outs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = started
            .iter()
            .map(|(w, n)| s.spawn(move || host.handoff(&w.folder, "iso", &["--task", n])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // per repository, the tips of its tasks
    let mut tips: Vec<(&PathBuf, Vec<String>)> = Vec::new();
    for ((w, n), out) in started.iter().zip(&outs) {
        let r = ok(out);
        // one repository: `task`; several: `tasks`, one per repository
        let tasks = r["result"]["tasks"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![r["result"]["task"].clone()]);
        assert_eq!(tasks.len(), w.repos.len(), "{n}: {r:#}");
        for (repo, t) in w.repos.iter().zip(&tasks) {
            if w.repos.len() > 1 {
                assert_eq!(
                    t["repo"],
                    repo.file_name().unwrap().to_str().unwrap(),
                    "{t:#}"
                );
            }
            let tip = t["fetched"].as_str().expect("fetched").to_string();
            assert_eq!(
                git(repo, &["rev-parse", &format!("refs/devcell/tasks/{n}")]),
                tip,
                "{n} in {}",
                repo.display()
            );
            // the agent's two commits on the base, naming its own branch only
            assert_eq!(
                git(repo, &["rev-parse", &format!("{tip}~2")]),
                git(repo, &["rev-parse", "HEAD"])
            );
            assert_eq!(
                git(repo, &["show", &format!("{tip}:agent.txt")]),
                format!("refs/heads/devcell/{n}")
            );
            match tips.iter_mut().find(|(r, _)| *r == repo) {
                Some((_, t)) => t.push(tip),
                None => tips.push((repo, vec![tip])),
            }
        }
    }
    for (w, repo) in workspaces
        .iter()
        .flat_map(|w| w.repos.iter().map(move |r| (w, r)))
    {
        let (_, t) = tips.iter_mut().find(|(r, _)| *r == repo).unwrap();
        t.sort();
        t.dedup();
        assert_eq!(t.len(), w.tasks.len(), "each task its own commits");
    }
    let mirrors = host.mirrors();
    assert_eq!(mirrors.len(), repos.len(), "one mirror per repository");
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
        // (`fsck` reads the index: a `core.fsmonitor` would run, so it is off)
        git(
            repo,
            &["-c", "core.fsmonitor=false", "fsck", "--no-progress"],
        );
    }
    target.assert_untouched();
}

/// `n` task names `<prefix>0`, `<prefix>1`, ….
fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
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
    let workspace = Workspace {
        folder: ws,
        repos: vec![app, lib],
        tasks: names("q", 4),
    };
    all_at_once(&host, &[workspace], &target);
}

/// A second repository unlike [`source_repo`]'s (another history): `<at>/other`, one commit
/// of `other.txt` and the same `.devcontainer`, owned by the workspace owner.
fn other_repo(at: &Path) -> PathBuf {
    let repo = at.join("other");
    std::fs::create_dir_all(repo.join(".devcontainer")).unwrap();
    std::fs::write(
        repo.join(".devcontainer/devcontainer.json"),
        format!(
            r#"{{"image": "{}", "remoteUser": "nobody", "updateRemoteUserUID": true}}"#,
            hostgit_image()
        ),
    )
    .unwrap();
    std::fs::write(repo.join("other.txt"), "other\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "other"]);
    give_to_workspace_owner(&repo);
    repo
}

#[test]
fn two_clone_tasks_on_each_of_two_workspaces_at_once_each_come_back_alone() {
    if !engine_ready("clone_task_parallel_apart", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let agent = isolated_commit();
    let host = Host::new(&[("iso", agent.as_str())]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-apart-")
        .tempdir()
        .unwrap();
    let (one, two) = (source_repo(at.path(), &target), other_repo(at.path()));
    let workspaces = [
        Workspace {
            folder: one.clone(),
            repos: vec![one],
            tasks: names("a", 2),
        },
        Workspace {
            folder: two.clone(),
            repos: vec![two],
            tasks: names("b", 2),
        },
    ];
    all_at_once(&host, &workspaces, &target);
}
