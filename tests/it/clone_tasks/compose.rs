//! Clone tasks of a Compose workspace (spec-note 0437, "Per-task Compose projects"): each task
//! gets a project of its own, so two tasks of one repository are up at once without sharing a
//! container, network or volume, and each task's `delete` removes only its own.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Host, containers_of, ok};
use crate::support;
use crate::support::docker::engine_ready;
use crate::support::git::{git, give_to_workspace_owner};

/// The agent waits (at most 5 minutes) until the test drops `.go` into its clone.
const WAIT_FOR_GO: &str =
    "i=0; while [ ! -e .go ] && [ $i -lt 300 ]; do sleep 1; i=$((i+1)); done; test -e .go";

/// `app` (the primary service) and `db`, which keeps data in the named volume `data`. The
/// repository's `.env` names a project, as a repository may: every clone holds it alike.
const COMPOSE: &str = r#"services:
  app:
    image: IMAGE
    command: ["sleep", "100000"]
  db:
    image: IMAGE
    command: ["sh", "-c", "hostname > /data/who; sleep 100000"]
    volumes:
      - data:/data
volumes:
  data: {}
"#;

/// `docker ARGS`, its stdout's non-empty lines.
fn docker(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker")
        .args(args)
        .bounded_output()
        .expect("docker");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The project's containers (`<service> <state>`), networks and volumes.
fn project_objects(project: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let filter = format!("label=com.docker.compose.project={project}");
    let mut containers = docker(&[
        "ps",
        "-a",
        "--filter",
        &filter,
        "--format",
        "{{.Label \"com.docker.compose.service\"}} {{.State}}",
    ]);
    containers.sort();
    let networks = docker(&[
        "network",
        "ls",
        "--filter",
        &filter,
        "--format",
        "{{.Name}}",
    ]);
    let volumes = docker(&["volume", "ls", "-q", "--filter", &filter]);
    (containers, networks, volumes)
}

/// Removes what is left of the projects when the test ends, passed or not.
struct Projects(Vec<String>);

impl Drop for Projects {
    fn drop(&mut self) {
        for project in &self.0 {
            let filter = format!("label=com.docker.compose.project={project}");
            for id in docker(&["ps", "-aq", "--filter", &filter]) {
                let _ = Command::new("docker")
                    .args(["rm", "-f", "-v", &id])
                    .bounded_output();
            }
            for n in docker(&["network", "ls", "-q", "--filter", &filter]) {
                let _ = Command::new("docker")
                    .args(["network", "rm", &n])
                    .bounded_output();
            }
            for v in docker(&["volume", "ls", "-q", "--filter", &filter]) {
                let _ = Command::new("docker")
                    .args(["volume", "rm", &v])
                    .bounded_output();
            }
        }
    }
}

/// A repository at `<at>/svc` whose configuration is the [`COMPOSE`] project, owned by the
/// workspace owner.
fn compose_repo(at: &Path) -> PathBuf {
    let repo = at.join("svc");
    std::fs::create_dir_all(repo.join(".devcontainer")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(
        repo.join(".devcontainer/docker-compose.yml"),
        COMPOSE.replace("IMAGE", support::docker::BUSYBOX_IMAGE),
    )
    .unwrap();
    std::fs::write(
        repo.join(".devcontainer/devcontainer.json"),
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "runServices": ["db"],
            "workspaceFolder": "/workspace", "overrideCommand": true, "remoteUser": "nobody"}"#,
    )
    .unwrap();
    std::fs::write(repo.join(".env"), "COMPOSE_PROJECT_NAME=shared\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "compose"]);
    give_to_workspace_owner(at);
    repo
}

/// The Compose project of the running primary container of the task's clone, once there is one.
fn running_project(host: &Host, task: &str) -> Option<String> {
    let clone = host.find_clone(task)?;
    let id = containers_of(&clone).into_iter().next()?;
    let out = docker(&[
        "inspect",
        "--format",
        "{{.State.Running}} {{index .Config.Labels \"com.docker.compose.project\"}}",
        &id,
    ]);
    let line = out.first()?;
    line.strip_prefix("true ").map(str::to_string)
}

/// Two clone tasks of one Compose repository are up at the same time, each with its own
/// project (neither the repository's `.env` name nor the other's): its own `app` and `db`
/// containers, network and `data` volume. `delete --task` of the first removes its project
/// whole (its named volume included: the project is the task's) and leaves the second's
/// running project untouched; then the second goes the same way.
#[test]
fn two_compose_clone_tasks_run_at_once_in_their_own_projects_and_delete_removes_only_their_own() {
    if !engine_ready("clone_task_compose", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let host = Host::new(&[("wait", WAIT_FOR_GO)]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-compose-")
        .tempdir()
        .unwrap();
    let repo = compose_repo(at.path());
    let mut guard = Projects(vec!["shared".into()]);
    let tasks = ["ca", "cb"];
    // what each task's project held while both agents ran: (project, containers, networks,
    // volumes); asserted once the agents were let go, so a failure does not leave them waiting
    let (outs, seen) = std::thread::scope(|s| {
        let handles: Vec<_> = tasks
            .iter()
            .map(|t| {
                let (host, repo) = (&host, &repo);
                s.spawn(move || host.handoff(repo, "wait", &["--task", t]))
            })
            .collect();
        // both projects up at once (their sidecars started too), then both agents let go
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let seen = loop {
            let seen: Vec<_> = tasks
                .iter()
                .filter_map(|t| running_project(&host, t))
                .map(|p| {
                    let (c, n, v) = project_objects(&p);
                    (p, c, n, v)
                })
                .collect();
            let up = |s: &(String, Vec<String>, Vec<String>, Vec<String>)| {
                s.1 == ["app running", "db running"]
            };
            if (seen.len() == 2 && seen.iter().all(up))
                || std::time::Instant::now() > deadline
                || handles.iter().any(|h| h.is_finished())
            {
                break seen;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        };
        guard.0.extend(seen.iter().map(|s| s.0.clone()));
        for t in tasks {
            if let Some(clone) = host.find_clone(t) {
                std::fs::write(clone.join(".go"), "").unwrap();
            }
        }
        let outs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (outs, seen)
    });
    assert_eq!(
        seen.len(),
        2,
        "both tasks' primaries running at once: {seen:?}"
    );
    for (p, containers, networks, volumes) in &seen {
        assert_eq!(*containers, ["app running", "db running"], "{p}");
        assert_eq!(*networks, [format!("{p}_default")], "{p}");
        assert_eq!(*volumes, [format!("{p}_data")], "{p}");
    }
    let projects: Vec<String> = seen.into_iter().map(|s| s.0).collect();
    for out in &outs {
        ok(out);
    }
    assert_eq!(
        projects.len(),
        2,
        "both tasks' primaries were running at once"
    );
    assert_ne!(projects[0], projects[1]);
    for p in &projects {
        assert!(p.starts_with("svc-c"), "{p}");
    }
    assert!(
        project_objects("shared").0.is_empty(),
        "the repository's own project name is not used"
    );

    let delete = |task: &str| {
        ok(&host.run(&[
            "delete",
            "--task",
            task,
            "--workspace-folder",
            repo.to_str().unwrap(),
            "--format",
            "json",
        ]))
    };
    let d = delete("ca");
    assert_eq!(d["result"]["teardown"]["verified"], true, "{d:#}");
    let (containers, networks, volumes) = project_objects(&projects[0]);
    assert!(
        containers.is_empty() && networks.is_empty() && volumes.is_empty(),
        "{containers:?} {networks:?} {volumes:?}"
    );
    // the second task's project is as it was (stopped when its agent ended)
    let (containers, networks, volumes) = project_objects(&projects[1]);
    assert_eq!(containers, ["app exited", "db exited"]);
    assert_eq!(networks, [format!("{}_default", projects[1])]);
    assert_eq!(volumes, [format!("{}_data", projects[1])]);

    let d = delete("cb");
    assert_eq!(d["result"]["teardown"]["verified"], true, "{d:#}");
    let (containers, networks, volumes) = project_objects(&projects[1]);
    assert!(
        containers.is_empty() && networks.is_empty() && volumes.is_empty(),
        "{containers:?} {networks:?} {volumes:?}"
    );
}
