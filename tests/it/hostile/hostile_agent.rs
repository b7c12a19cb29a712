//! Hostile agents (issue 25, classes 1 and 5; spec-note 0436): the agent controls everything
//! it can write in the container. It must not get code run on the host through git, nor
//! destroy the user's commits. The container never sees the host's git directories: each
//! repository gets a container git directory devcell writes, and the agent's commits come
//! back by fetch.
//!
//! Every case ends with a human's git on the host, as the workspace's owner, with the
//! repository's own configuration: `status`, `commit`, `log`, `diff`, `fetch` in each
//! repository; the payload the agent planted (hooks, `core.fsmonitor`, aliases, a `commondir`
//! redirection) would create the host marker ([`HostTarget::marker`]), which must not exist.

use crate::support::deadline::Bounded as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::host_execution::{Host, envelope};
use crate::support::docker::engine_ready;
use crate::support::git::{WORKSPACE_OWNER, git, give_to_workspace_owner, hostgit_image};
use crate::support::hostile::HostTarget;

/// A shell function `plant <git dir>` for the agent: hooks git runs on `status`, `commit`,
/// `checkout`, `fetch` and `gc`, and `core.fsmonitor`, `core.hooksPath`, an alias and a
/// `core.pager` in its `config`, each creating `marker`.
fn plant_function(marker: &Path) -> String {
    let m = marker.display();
    format!(
        "plant() {{ mkdir -p \"$1/hooks\"; \
           for h in pre-commit commit-msg post-commit post-checkout post-merge post-index-change reference-transaction pre-auto-gc fsmonitor-watchman post-rewrite; do \
             printf '#!/bin/sh\\ntouch {m}\\n' > \"$1/hooks/$h\"; chmod +x \"$1/hooks/$h\"; \
           done; \
           printf '[core]\\n\\tfsmonitor = touch {m}\\n\\thooksPath = hooks\\n\\tpager = touch {m}\\n[alias]\\n\\tlog = !touch {m}\\n' >> \"$1/config\"; \
         }}; "
    )
}

/// The human's `git <args>` in `dir` on the host: as the workspace's owner, with the
/// repository's own configuration (no global or system file).
fn human_git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=human",
            "-c",
            "user.email=human@devcell.invalid",
        ])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", "/nonexistent")
        .uid(WORKSPACE_OWNER)
        .gid(WORKSPACE_OWNER)
        .output()
        .expect("git runs")
}

/// `status`, `commit`, `log`, `diff` and `fetch` (from `origin`) in each repository, as the
/// human would, then: nothing ran on the host.
fn human_session(repos: &[&Path], origin: &Path, target: &HostTarget) {
    for repo in repos {
        let origin = origin.to_str().unwrap();
        for args in [
            &["status"][..],
            &["commit", "-q", "--allow-empty", "-m", "human"],
            &["log", "-1"],
            &["diff", "HEAD"],
            &["fetch", "-q", origin],
        ] {
            let out = human_git(repo, args);
            assert!(
                out.status.success(),
                "git {args:?} in {}: {}",
                repo.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    target.assert_untouched();
}

/// A repository at `dir` with two commits on `main` and a branch `side`, owned by the
/// workspace owner; with `config`, a `.devcontainer/devcontainer.json` (committed).
fn repo_at(dir: &Path, config: Option<&str>) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    if let Some(config) = config {
        std::fs::create_dir_all(dir.join(".devcontainer")).unwrap();
        std::fs::write(dir.join(".devcontainer/devcontainer.json"), config).unwrap();
    }
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    git(dir, &["branch", "side"]);
    std::fs::write(dir.join("a.txt"), "two\n").unwrap();
    git(dir, &["commit", "-q", "-am", "second"]);
    // git on the host must not find the test's own repository above it
}

fn config() -> String {
    format!(
        r#"{{"image": "{}", "remoteUser": "nobody", "updateRemoteUserUID": true}}"#,
        hostgit_image()
    )
}

/// A bare clone of `repo` beside it, owned by the workspace owner (what the human fetches).
fn origin_of(repo: &Path, at: &Path) -> PathBuf {
    let origin = at.join("origin.git");
    git(
        at,
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            origin.to_str().unwrap(),
        ],
    );
    give_to_workspace_owner(&origin);
    origin
}

fn handoff_ok(host: &Host, ws: &Path) -> Value {
    let out = host.handoff(ws, &[], &[]);
    let r = envelope(&out);
    let log = r["error"]["details"]["log"]
        .as_str()
        .and_then(|l| std::fs::read_to_string(l).ok())
        .unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{r}\nagent log:\n{log}");
    r
}

/// The last session of `ws` in `status --format json`.
fn last_session(host: &Host, ws: &Path) -> Value {
    let out = host.status(ws);
    let s = envelope(&out);
    assert_eq!(out.status.code(), Some(0), "{s}");
    s["result"]["sessions"]
        .as_array()
        .and_then(|a| a.last())
        .cloned()
        .unwrap_or_else(|| panic!("a session: {s}"))
}

#[test]
fn renaming_dot_git_and_planting_a_new_one_runs_nothing_on_the_host() {
    let test = "renaming_dot_git_and_planting_a_new_one_runs_nothing_on_the_host";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let host_config = std::fs::read(ws.join(".git/config")).unwrap();
    let script = format!(
        "{plant}cd /workspace; \
         mv .git .git-old 2>/dev/null && echo renamed-git >> agent.log; \
         mv /workspace /workspace-old 2>/dev/null && echo renamed-root >> /workspace-old/agent.log; \
         for d in .git-old .git; do [ -d $d ] && plant $d; done; \
         mkdir -p .git 2>/dev/null; plant .git; \
         echo {evil} > .git/commondir; echo planted >> agent.log; true",
        plant = plant_function(&target.marker()),
        evil = target.path().display(),
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    handoff_ok(&host, &ws);
    assert_eq!(
        std::fs::read_to_string(ws.join("agent.log")).unwrap(),
        "planted\n",
        "neither `.git` nor the workspace could be renamed"
    );
    assert!(ws.join(".git").is_dir() && !ws.join(".git/commondir").exists());
    assert!(!ws.join(".git-old").exists());
    assert_eq!(std::fs::read(ws.join(".git/config")).unwrap(), host_config);
    human_session(&[&ws], &origin, &target);
}

#[test]
fn renaming_a_repository_folder_of_a_multi_repo_workspace_runs_nothing_on_the_host() {
    let test = "renaming_a_repository_folder_of_a_multi_repo_workspace_runs_nothing_on_the_host";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    repo_at(&ws.join("api"), Some(&config()));
    repo_at(&ws.join("web"), None);
    let origin = origin_of(&ws.join("api"), tmp.path());
    give_to_workspace_owner(tmp.path());
    let script = format!(
        "{plant}cd /workspace; \
         for r in api web; do \
           mv $r $r-old 2>/dev/null && echo renamed-$r >> agent.log; \
           mv $r/.git $r/git-old 2>/dev/null && echo renamed-$r-git >> agent.log; \
           mkdir -p $r/.git; plant $r/.git; echo {evil} > $r/.git/commondir; \
         done; echo planted >> agent.log; true",
        plant = plant_function(&target.marker()),
        evil = target.path().display(),
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    handoff_ok(&host, &ws);
    assert_eq!(
        std::fs::read_to_string(ws.join("agent.log")).unwrap(),
        "planted\n",
        "no repository folder and no `.git` could be renamed"
    );
    human_session(&[&ws.join("api"), &ws.join("web")], &origin, &target);
}

#[test]
fn a_grove_worktree_workspace_keeps_the_main_repositories_out_of_reach() {
    let test = "a_grove_worktree_workspace_keeps_the_main_repositories_out_of_reach";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    repo_at(&src.join("api"), Some(&config()));
    repo_at(&src.join("web"), None);
    for r in ["api", "web"] {
        git(
            &src.join(r),
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "task",
                ws.join(r).to_str().unwrap(),
            ],
        );
    }
    let origin = origin_of(&src.join("api"), tmp.path());
    give_to_workspace_owner(tmp.path());
    let links: Vec<String> = ["api", "web"]
        .iter()
        .map(|r| std::fs::read_to_string(ws.join(r).join(".git")).unwrap())
        .collect();
    let script = format!(
        "{plant}cd /workspace; \
         for r in api web; do \
           echo 'gitdir: /workspace/evil' > $r/.git 2>/dev/null && echo relinked-$r >> agent.log; \
           mv $r/.git $r/git-old 2>/dev/null && echo renamed-$r-git >> agent.log; \
           g=$(cd $r && git rev-parse --absolute-git-dir); plant $g; echo {evil} > $g/commondir; \
           touch $(dirname $g)/objects/x 2>/dev/null && echo wrote-objects >> agent.log; \
         done; echo planted >> agent.log; true",
        plant = plant_function(&target.marker()),
        evil = target.path().display(),
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    handoff_ok(&host, &ws);
    assert_eq!(
        std::fs::read_to_string(ws.join("agent.log")).unwrap(),
        "planted\n",
        "the worktrees' `.git` files and the host objects are read-only, mount points stay"
    );
    for (r, link) in ["api", "web"].iter().zip(&links) {
        assert_eq!(
            &std::fs::read_to_string(ws.join(r).join(".git")).unwrap(),
            link
        );
        assert!(
            !src.join(r)
                .join(".git/worktrees/")
                .join(r)
                .join("x")
                .exists()
        );
    }
    human_session(
        &[
            &ws.join("api"),
            &ws.join("web"),
            &src.join("api"),
            &src.join("web"),
        ],
        &origin,
        &target,
    );
}

#[test]
fn an_agent_that_destroys_history_deletes_no_host_commit() {
    let test = "an_agent_that_destroys_history_deletes_no_host_commit";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let main = git(&ws, &["rev-parse", "main"]);
    let side = git(&ws, &["rev-parse", "side"]);
    let script = "cd /workspace; G='git -c user.name=agent -c user.email=agent@devcell.invalid'; \
         $G reset -q --hard HEAD~1 && $G commit -q --allow-empty -m replacement && \
         $G branch -D side && $G reflog expire --expire=now --all && $G gc -q --prune=now && \
         echo destroyed > destroyed.txt";
    let host = Host::new(&["sh", "-c", script], &[]);
    handoff_ok(&host, &ws);
    assert!(
        ws.join("destroyed.txt").exists(),
        "the agent ran its commands"
    );
    assert_eq!(git(&ws, &["rev-parse", "main"]), main);
    assert_eq!(git(&ws, &["rev-parse", "side"]), side);
    git(&ws, &["cat-file", "-e", &format!("{main}^{{commit}}")]);
    let session = last_session(&host, &ws);
    let kept = &session["git"][0]["kept"];
    let reasons: Vec<(String, String)> = kept
        .as_array()
        .unwrap_or_else(|| panic!("status names the kept refs: {session}"))
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_string(),
                k["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        reasons.contains(&("refs/heads/main".into(), "rewritten".into())),
        "{session}"
    );
    assert!(
        reasons.contains(&("refs/heads/side".into(), "deleted".into())),
        "{session}"
    );
    let id = session["id"].as_str().unwrap();
    let kept_main = git(
        &ws,
        &["rev-parse", &format!("refs/devcell/{id}/heads/main")],
    );
    assert_eq!(
        git(&ws, &["log", "-1", "--format=%s", &kept_main]),
        "replacement"
    );
    human_session(&[&ws], &origin, &target);
}

#[test]
fn an_agents_commit_comes_back_as_a_fast_forward_and_its_new_branch_appears() {
    let test = "an_agents_commit_comes_back_as_a_fast_forward_and_its_new_branch_appears";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let before = git(&ws, &["rev-parse", "main"]);
    let script = "cd /workspace; G='git -c user.name=agent -c user.email=agent@devcell.invalid'; \
         echo agent > agent.txt && $G add agent.txt && $G commit -q -m 'agent work' && \
         $G branch topic";
    let host = Host::new(&["sh", "-c", script], &[]);
    handoff_ok(&host, &ws);
    let after = git(&ws, &["rev-parse", "main"]);
    assert_ne!(after, before, "main moved");
    assert_eq!(
        git(&ws, &["log", "-1", "--format=%s", "main"]),
        "agent work"
    );
    assert_eq!(git(&ws, &["rev-parse", &format!("{after}~1")]), before);
    assert_eq!(git(&ws, &["rev-parse", "topic"]), after);
    // the host's index follows the new HEAD: nothing staged, nothing changed
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
    let session = last_session(&host, &ws);
    assert_eq!(
        session["git"][0]["fastForwarded"][0]["name"], "refs/heads/main",
        "{session}"
    );
    assert_eq!(
        session["git"][0]["created"][0]["name"], "refs/heads/topic",
        "{session}"
    );
    human_session(&[&ws], &origin, &target);
}

/// Attack N15: a git directory the agent creates in the workspace (`tool/.git` in a new
/// folder, `src/.git` in a tracked one, each with `core.fsmonitor`) is moved at the handoff's
/// end into devcell's state and named loudly (`git_dir_quarantined`, spec-note 0448): the
/// human's `git status` in `src` and in `tool` runs nothing, and `status` has nothing left to
/// name.
#[test]
fn a_git_directory_the_agent_creates_is_moved_aside() {
    let test = "a_git_directory_the_agent_creates_is_moved_aside";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.c"), "int main;\n").unwrap();
    git(&ws, &["add", "src"]);
    git(&ws, &["commit", "-q", "-m", "src"]);
    give_to_workspace_owner(tmp.path());
    let script = format!(
        "cd /workspace; for d in tool/.git src/.git; do mkdir -p $d/objects $d/refs && \
         echo 'ref: refs/heads/main' > $d/HEAD && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {}; false\"\\n' > $d/config; done",
        target.marker().display()
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    let r = handoff_ok(&host, &ws);
    let changes = r["result"]["gitDirChanges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for rel in ["tool/.git", "src/.git"] {
        assert!(!ws.join(rel).exists(), "{rel} is moved aside: {r}");
        assert!(
            changes.iter().any(|c| c["code"] == "git_dir_quarantined"
                && c["loud"] == true
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&format!("`{rel}`")))),
            "{r}"
        );
    }
    assert!(ws.join("src/main.c").exists());
    for dir in [ws.join("src"), ws.join("tool")] {
        let _ = human_git(&dir, &["status"]);
    }
    target.assert_untouched();
    let out = host.status(&ws);
    let s = envelope(&out);
    assert_eq!(out.status.code(), Some(0), "{s}");
    assert!(
        !s["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "git_dir_created"),
        "{s}"
    );
}

/// A superproject at `ws` (as [`repo_at`]) with a checked-out submodule at `libs/sub` (its git
/// directory absorbed in `.git/modules/libs/sub`, its `.git` a file), committed.
fn superproject_with_submodule(tmp: &Path, ws: &Path) {
    let sub_src = tmp.join("sub-src");
    repo_at(&sub_src, None);
    repo_at(ws, Some(&config()));
    git(
        ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub_src.to_str().unwrap(),
            "libs/sub",
        ],
    );
    git(ws, &["commit", "-q", "-m", "add the submodule"]);
    assert!(ws.join("libs/sub/.git").is_file());
}

/// Issue 25 class 1 for submodules (spec-note 0436): an existing submodule's `.git` file, its
/// folder and the folders above it are working-tree content. The agent replaces the `.git`
/// file with a git directory of its own, renames the submodule's folder (and `libs/`) to plant
/// one in its place, and writes the superproject's `modules/` in the container: the human's
/// git in the superproject (which enters the submodule) and in the submodule runs none of it.
/// git works in the submodule in the container, and the agent's submodule commit comes back.
#[test]
fn a_submodules_git_file_and_folder_cannot_be_replaced_and_its_commits_come_back() {
    let test = "a_submodules_git_file_and_folder_cannot_be_replaced_and_its_commits_come_back";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    superproject_with_submodule(tmp.path(), &ws);
    let sub = ws.join("libs/sub");
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let sub_before = git(&sub, &["rev-parse", "HEAD"]);
    let dot_git_before = std::fs::read(sub.join(".git")).unwrap();
    let script = format!(
        "{plant}cd /workspace; G='git -c user.name=agent -c user.email=agent@devcell.invalid'; \
         evil() {{ mkdir -p \"$1/objects\" \"$1/refs/heads\" && echo 'ref: refs/heads/main' > \"$1/HEAD\" && plant \"$1\"; }}; \
         $G -C libs/sub status >/dev/null 2>&1 && echo sub-git-ok >> agent.log; \
         $G -C libs/sub commit -q --allow-empty -m 'agent in sub' 2>/dev/null; \
         mv libs/sub/.git libs/sub/git-old 2>/dev/null && echo renamed-sub-git >> agent.log; \
         rm -f libs/sub/.git 2>/dev/null && echo removed-sub-git >> agent.log; \
         evil libs/sub/.git 2>/dev/null && echo replaced-sub-git >> agent.log; \
         mv libs/sub libs/sub-old 2>/dev/null && echo renamed-sub >> agent.log; \
         mv libs libs-old 2>/dev/null && echo renamed-libs >> agent.log; \
         evil libs/sub/.git 2>/dev/null; \
         mkdir -p .git/modules/libs/sub; evil .git/modules/libs/sub; \
         for d in $(ls -d /run/devcell/git/*/git 2>/dev/null); do plant $d; done; \
         echo planted >> agent.log; true",
        plant = plant_function(&target.marker()),
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    handoff_ok(&host, &ws);
    assert_eq!(
        std::fs::read_to_string(ws.join("agent.log")).unwrap(),
        "sub-git-ok\nplanted\n",
        "git works in the submodule; neither its `.git`, its folder nor `libs` could be replaced"
    );
    assert_eq!(std::fs::read(sub.join(".git")).unwrap(), dot_git_before);
    assert!(!ws.join("libs-old").exists() && !ws.join("libs/sub-old").exists());
    assert_eq!(
        git(&sub, &["log", "-1", "--format=%s", "main"]),
        "agent in sub",
        "the agent's submodule commit came back"
    );
    assert_eq!(git(&sub, &["rev-parse", "main~1"]), sub_before);
    human_session(&[&ws, &sub], &origin, &target);
}

/// Whether the container `id` runs (`docker inspect`).
fn container_running(id: &str) -> bool {
    let out = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", id])
        .bounded_output()
        .expect("docker runs");
    String::from_utf8_lossy(&out.stdout).trim() == "true"
}

/// The agent's argv exits, but a `setsid` loop it started keeps committing into the container
/// git directory and writing the workspace. The handoff stops the workspace container before
/// its fetch-back, so nothing the loop does lands afterwards: the workspace file stops growing,
/// and the next handoff (which starts the container again) brings back no commit made after
/// the first fetch-back.
#[test]
fn processes_the_agent_leaves_running_cannot_write_after_the_fetch_back() {
    let test = "processes_the_agent_leaves_running_cannot_write_after_the_fetch_back";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    // the first session leaves the loop behind; a later one (late.txt exists) only ends
    let script = "cd /workspace; [ -e late.txt ] && exit 0; \
         G='git -c user.name=agent -c user.email=agent@devcell.invalid'; \
         setsid sh -c \"while :; do echo x >> late.txt; $G commit -q --allow-empty -m late; \
         sleep 0.2; done\" </dev/null >/dev/null 2>&1 & \
         sleep 1; echo left > left.txt";
    let host = Host::new(&["sh", "-c", script], &[]);
    let first = handoff_ok(&host, &ws);
    let container = first["result"]["containerId"].as_str().unwrap().to_string();
    assert!(
        !container_running(&container),
        "the handoff stops its container"
    );
    assert!(ws.join("left.txt").is_file(), "the agent ran");
    let main = git(&ws, &["rev-parse", "main"]);
    assert_eq!(
        git(&ws, &["log", "-1", "--format=%s", "main"]),
        "late",
        "what the loop committed before the stop came back"
    );
    let late = std::fs::read(ws.join("late.txt")).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        std::fs::read(ws.join("late.txt")).unwrap(),
        late,
        "nothing writes the workspace after the handoff"
    );
    let out = host.handoff(&ws, &[], &[]);
    let second = envelope(&out);
    assert_eq!(out.status.code(), Some(0), "{second}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("starting the stopped workspace container"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(second["result"]["containerId"], container.as_str());
    assert_eq!(second["result"]["containerAction"], "started");
    assert_eq!(
        git(&ws, &["rev-parse", "main"]),
        main,
        "no commit made after the first fetch-back came back"
    );
    assert_eq!(std::fs::read(ws.join("late.txt")).unwrap(), late);
    assert!(!container_running(&container));
    human_session(&[&ws], &origin, &target);
}

/// F3: the workspace container is already running when a handoff starts (started again by
/// hand after the last one, with a loop writing the workspace, as a crashed devcell or `up`
/// would leave it). The handoff stops it, confirmed, before its start-of-handoff fetch-back
/// reads the container git directory, then starts it again: the loop is gone while the agent
/// runs (the file it wrote no longer grows), and the handoff says what it stopped.
#[test]
fn a_container_already_running_when_a_handoff_starts_is_stopped_before_the_fetch_back() {
    let test = "a_container_already_running_when_a_handoff_starts_is_stopped_before_the_fetch_back";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    // the first session does nothing; the second watches the loop's file for 1.5 s
    let script = "cd /workspace; [ -e late.txt ] || exit 0; a=$(wc -c < late.txt); sleep 1.5; \
         b=$(wc -c < late.txt); [ \"$a\" = \"$b\" ] && echo still > still.txt; true";
    let host = Host::new(&["sh", "-c", script], &[]);
    let first = handoff_ok(&host, &ws);
    let container = first["result"]["containerId"].as_str().unwrap().to_string();
    assert!(!container_running(&container));
    let docker = |args: &[&str]| {
        let out = Command::new("docker").args(args).bounded_output().unwrap();
        assert!(out.status.success(), "docker {args:?}: {out:?}");
    };
    docker(&["start", &container]);
    let owner = WORKSPACE_OWNER.to_string();
    docker(&[
        "exec",
        "-d",
        "-u",
        &owner,
        &container,
        "sh",
        "-c",
        "while :; do echo x >> /workspace/late.txt; sleep 0.1; done",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ws.join("late.txt").exists() {
        assert!(std::time::Instant::now() < deadline, "the loop never wrote");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = host.handoff(&ws, &[], &[]);
    let second = envelope(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{second}\n{stderr}");
    assert!(stderr.contains("already running"), "{stderr}");
    assert!(
        ws.join("still.txt").is_file(),
        "the loop still wrote the workspace while the agent ran: {stderr}"
    );
    assert!(!container_running(&container));
    human_session(&[&ws], &origin, &target);
}

/// G8 (session 17): a handoff refused after its container started (the agent of the last
/// session replaced `.devcell` with a link, so the context file cannot be written) stops the
/// container before it returns the refusal, and its error says so; whatever the container
/// runs does not outlive the refused handoff.
#[test]
fn a_handoff_refused_after_its_container_started_stops_the_container() {
    let test = "a_handoff_refused_after_its_container_started_stops_the_container";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let script = "cd /workspace; rm -rf .devcell; ln -s /tmp .devcell";
    let host = Host::new(&["sh", "-c", script], &[]);
    let first = handoff_ok(&host, &ws);
    let container = first["result"]["containerId"].as_str().unwrap().to_string();
    assert!(ws.join(".devcell").is_symlink(), "the agent ran");
    let out = host.handoff(&ws, &[], &[]);
    let refused = envelope(&out);
    assert_ne!(out.status.code(), Some(0), "{refused}");
    assert_ne!(out.status.code(), Some(1), "its own exit status: {refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("refusing to write through"), "{refused}");
    assert!(message.contains("was stopped"), "{refused}");
    assert_eq!(
        refused["error"]["details"]["containerStopped"], true,
        "{refused}"
    );
    assert_eq!(
        refused["error"]["details"]["containerId"],
        container.as_str()
    );
    assert!(
        !container_running(&container),
        "the refused handoff left its container running"
    );
    human_session(&[&ws], &origin, &target);
}

/// A commit made in the container after the handoff's fetch-back (the container started again
/// by hand, git run in it) is never lost by `delete`: with the container gone, `delete` brings
/// it back onto the branch, and only then removes devcell's container git directories
/// (`<state>/git/<key>`).
#[test]
fn delete_brings_back_commits_no_handoff_fetched_then_removes_devcells_copy() {
    let test = "delete_brings_back_commits_no_handoff_fetched_then_removes_devcells_copy";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    give_to_workspace_owner(tmp.path());
    let host = Host::new(&["true"], &[]);
    let first = handoff_ok(&host, &ws);
    let container = first["result"]["containerId"].as_str().unwrap().to_string();
    let before = git(&ws, &["rev-parse", "main"]);
    let docker = |args: &[&str]| {
        let out = Command::new("docker").args(args).bounded_output().unwrap();
        assert!(
            out.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    docker(&["start", &container]);
    let owner = WORKSPACE_OWNER.to_string();
    docker(&[
        "exec",
        "-u",
        &owner,
        "-w",
        "/workspace",
        &container,
        "git",
        "-c",
        "user.name=late",
        "-c",
        "user.email=late@devcell.invalid",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "after the fetch-back",
    ]);
    let git_state = host.state().join("git");
    let slots: Vec<_> = std::fs::read_dir(&git_state).unwrap().flatten().collect();
    assert_eq!(slots.len(), 1, "one workspace's container git directories");
    let out = host.run(
        &ws,
        &[
            "delete",
            "--workspace-folder",
            ws.to_str().unwrap(),
            "--format",
            "json",
        ],
        &[],
    );
    let v = envelope(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(
        git(&ws, &["log", "-1", "--format=%s", "main"]),
        "after the fetch-back",
        "{v}"
    );
    assert_eq!(git(&ws, &["rev-parse", "main~1"]), before);
    assert_eq!(
        v["result"]["removed"]["containerGit"],
        slots[0].path().to_str().unwrap(),
        "{v}"
    );
    assert!(!slots[0].path().exists(), "devcell's copy is gone");
}

/// `fixtures/fdpass/fdpass.rs` built as a static executable at `out` (it runs in busybox).
fn build_fdpass(out: &Path) {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fdpass/fdpass.rs");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let built = Command::new(rustc)
        .args(["--edition=2024", "-C", "target-feature=+crt-static"])
        .args(["-C", "panic=abort", "-C", "opt-level=1", "-o"])
        .arg(out)
        .arg(src)
        .output()
        .expect("rustc runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
}

/// Attack (spec-note 0611, attacks G5): a sidecar that binds nothing of the host, only a named
/// volume it shares with the primary (`sock:/sock`), starts as root from its image and waits
/// on a Unix socket there. The agent (here `docker exec` in the primary) opens a
/// world-writable folder of the workspace and hands its descriptor over the socket; through it
/// the sidecar tries a root-owned set-uid/set-gid file, block and character device nodes and a
/// folder given to root. Under `hardened` it runs as the workspace user without the file
/// capabilities: on the host nothing under the folder is a device or another user's. The grant
/// `runtime-option:keep_image_user=side` keeps its root, and then it does plant them (the
/// control: the descriptor did reach it).
#[test]
fn a_root_sidecar_handed_a_workspace_descriptor_plants_no_set_uid_file_or_device() {
    use super::compose_projects::{CONFIG, own_project, project_containers};
    use crate::support::context::{TestContext, docker_lines};
    use crate::support::docker::BUSYBOX_IMAGE;
    let Some(ctx) = TestContext::busybox("hostile_fd_to_sidecar") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = own_project(&ctx);
    build_fdpass(&ctx.path().join("tools/fdpass"));
    let side =
        "until [ -x /sock/fdpass ]; do sleep 0.2; done; /sock/fdpass recv /sock/s; sleep 100000";
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    image: {BUSYBOX_IMAGE}\n    command: [\"sleep\", \"100000\"]\n    \
             volumes: [\"..:/ws\", \"sock:/sock\"]\n  side:\n    image: {BUSYBOX_IMAGE}\n    \
             volumes: [\"sock:/sock\"]\n    command: {}\nvolumes:\n  sock: {{}}\n",
            serde_json::to_string(&["sh", "-c", side]).unwrap()
        ),
    );
    ctx.write("out/.keep", "");
    let ctx = ctx.config(&CONFIG.replace("SERVICE", "app"));
    give_to_workspace_owner(ctx.path());
    let out = ctx.path().join("out");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let container = |service: &str| {
        project_containers(&project)
            .into_iter()
            .find(|l| l.split(' ').nth(1) == Some(service))
            .and_then(|l| l.split(' ').next().map(str::to_string))
            .unwrap_or_else(|| panic!("no `{service}`: {:?}", project_containers(&project)))
    };
    // the agent's part: the program onto the shared volume, the folder's descriptor to the socket
    let hand_over = || {
        let app = container("app");
        // a shared folder both may write (a sidecar image can ship its volume folder `1777`)
        docker_lines(&["exec", "-u", "0", &app, "chmod", "1777", "/sock"]);
        let sent = docker_lines(&[
            "exec",
            &app,
            "sh",
            "-c",
            "cp /ws/tools/fdpass /sock/fdpass.new && mv -f /sock/fdpass.new /sock/fdpass && \
             /sock/fdpass send /sock/s /ws/out",
        ]);
        assert!(sent.iter().any(|l| l.ends_with("done")), "{sent:?}");
        let side = container("side");
        let logs = || {
            let out = Command::new("docker")
                .args(["logs", &side])
                .bounded_output()
                .unwrap();
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        };
        // (a loaded CI machine once took longer than 30 s here; what the sidecar said is kept)
        for _ in 0..900 {
            let seen = logs();
            if seen.contains("finished") {
                return seen;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!(
            "the sidecar did not finish: {:?}\n{}",
            project_containers(&project),
            logs()
        );
    };

    ctx.up(&[]);
    let logs = hand_over();
    assert!(logs.contains("got fd"), "{logs}");
    assert!(!logs.contains("euid=0"), "the sidecar ran as root: {logs}");
    let planted = super::compose_projects::foreign_entries(&out, WORKSPACE_OWNER);
    assert!(
        planted.is_empty(),
        "the sidecar left on the host: {planted:#?}\n{logs}"
    );

    // control: with the grant the same sidecar keeps root and plants them through the descriptor
    for line in project_containers(&project) {
        docker_lines(&["rm", "-f", line.split(' ').next().unwrap()]);
    }
    for name in ["suid", "d"] {
        let _ = std::fs::remove_file(out.join(name));
        let _ = std::fs::remove_dir(out.join(name));
    }
    ctx.run("up", &["--allow", "runtime-option:keep_image_user=side"])
        .ok();
    let logs = hand_over();
    let planted = super::compose_projects::foreign_entries(&out, WORKSPACE_OWNER);
    for name in ["suid", "blk", "chr", "d"] {
        assert!(
            planted.iter().any(|f| f.contains(&format!("out/{name}"))),
            "the control planted no `{name}`: {planted:#?}\n{logs}"
        );
    }
    for line in project_containers(&project) {
        docker_lines(&["rm", "-f", line.split(' ').next().unwrap()]);
    }
    for name in ["suid", "blk", "chr"] {
        let _ = std::fs::remove_file(out.join(name));
    }
    let _ = std::fs::remove_dir(out.join("d"));
}

/// Every entry below `dir` (not following links) with a set-uid or set-gid bit.
fn set_id_entries(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.mode() & 0o6000 != 0 && !meta.file_type().is_dir() {
            out.push(format!("{} (mode {:o})", path.display(), meta.mode()));
        }
        if meta.file_type().is_dir() {
            out.extend(set_id_entries(&path));
        }
    }
    out
}

/// A repository whose image puts its user `dev` in group 6 (`disk` on most hosts) through its
/// own `/etc/group`, with the agent `agent`, as the finding that found it (H1 of the 18th
/// review): `remoteUser`/`containerUser` `dev`.
fn image_group_repo(ws: &Path, config: &str) {
    repo_at(ws, Some(config));
    std::fs::write(
        ws.join(".devcontainer/Dockerfile"),
        format!(
            "FROM {}\n\
             RUN echo 'dev:x:1000:1000::/home/dev:/bin/sh' >> /etc/passwd && echo 'dev:x:1000:' >> /etc/group \
             && echo 'disk6:x:6:dev,devcell' >> /etc/group && mkdir -p /home/dev && chown 1000:1000 /home/dev\n\
             USER dev\n",
            crate::support::docker::BUSYBOX_IMAGE
        ),
    )
    .unwrap();
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "image"]);
}

/// The agent's script for the image-group cases: prints its ids into the workspace, then tries
/// to leave a set-gid-6 copy of its shell there.
const SET_GID_AGENT: &str = "cd /workspace; id > id.txt; cp /bin/busybox sg-helper; \
     chgrp 6 sg-helper; chmod 2755 sg-helper; ls -ln sg-helper >> id.txt; true";

/// Asserts the agent of [`SET_GID_AGENT`] had no group 6 and left nothing set-id or of
/// another group in `ws`: the set-gid bit it could set on its own file was cleared once the
/// container stopped, and the handoff's result names the file (`setIdFilesAndDevices`).
fn assert_no_image_group(ws: &Path, result: &Value) {
    let set_id = set_id_entries(ws);
    assert!(set_id.is_empty(), "set-id files on the host: {set_id:#?}");
    let named = result["result"]["setIdFilesAndDevices"].to_string();
    assert!(
        named.contains("sg-helper") && named.contains("\"cleared\":true"),
        "the result names the cleared file: {result}"
    );
    let ids = std::fs::read_to_string(ws.join("id.txt")).unwrap_or_default();
    assert!(ids.contains("uid="), "the agent ran: {ids}");
    assert_no_group_6(&ids, "the agent");
    assert_nothing_foreign(ws, &ids);
}

/// Asserts the first line of `ids` (an `id` output) shows no group 6.
fn assert_no_group_6(ids: &str, who: &str) {
    let groups = ids.lines().next().unwrap_or_default();
    assert!(
        !groups.contains("6(") && !groups.contains("=6,") && !groups.contains(",6,"),
        "{who} had the image's group 6: {ids}"
    );
}

/// Asserts nothing in `ws` belongs to anyone but the workspace owner (`ids` for the message).
fn assert_nothing_foreign(ws: &Path, ids: &str) {
    let foreign = super::compose_projects::foreign_entries(ws, WORKSPACE_OWNER);
    assert!(
        foreign.is_empty(),
        "foreign entries on the host: {foreign:#?}\n{ids}"
    );
}

/// H1 of the 18th review (spec-note 0400, "the image's groups"): the image lists the remote
/// user in group 6 of its `/etc/group`; run by name, the agent would get that group and leave
/// a set-gid `disk` executable in the host workspace. Under `hardened` every process runs as
/// numeric `uid:gid`: no supplementary group, and `chgrp 6` is refused.
#[test]
fn an_image_group_gives_the_agent_no_set_gid_file_on_the_host() {
    let test = "an_image_group_gives_the_agent_no_set_gid_file_on_the_host";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    image_group_repo(
        &ws,
        r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev", "containerUser": "dev"}"#,
    );
    give_to_workspace_owner(tmp.path());
    let host = Host::new(&["sh", "-c", SET_GID_AGENT], &[]);
    let result = handoff_ok(&host, &ws);
    assert_no_image_group(&ws, &result);
}

/// J6 of the 19th review: a repository mount over `/etc/passwd` (a file in the workspace, so
/// nothing is asked) once made devcell give up the numeric ids and run every exec by name,
/// with the image's groups. The ids come from the image's own file, whatever is mounted over
/// it: the agent still gets no group 6.
#[test]
fn a_mount_over_etc_passwd_gives_the_agent_no_image_group() {
    let test = "a_mount_over_etc_passwd_gives_the_agent_no_image_group";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    image_group_repo(
        &ws,
        r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev", "containerUser": "dev",
            "mounts": [{"source": "${localWorkspaceFolder}/etcx/passwd", "target": "/etc/passwd", "type": "bind"}]}"#,
    );
    std::fs::create_dir_all(ws.join("etcx")).unwrap();
    std::fs::write(
        ws.join("etcx/passwd"),
        "root:x:0:0::/root:/bin/sh\ndev:x:1000:1000::/home/dev:/bin/sh\n",
    )
    .unwrap();
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "passwd"]);
    give_to_workspace_owner(tmp.path());
    let host = Host::new(&["sh", "-c", SET_GID_AGENT], &[]);
    let result = handoff_ok(&host, &ws);
    assert_no_image_group(&ws, &result);
}

/// The same with a configuration that names no user: devcell's own user (whose name the
/// repository can predict, and lists in group 6) gets no image group either.
#[test]
fn an_image_group_gives_devcells_own_user_no_set_gid_file_on_the_host() {
    let test = "an_image_group_gives_devcells_own_user_no_set_gid_file_on_the_host";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(r#"{"build": {"dockerfile": "Dockerfile"}}"#));
    std::fs::write(
        ws.join(".devcontainer/Dockerfile"),
        format!(
            "FROM {}\nRUN echo 'disk6:x:6:devcell' >> /etc/group\n",
            crate::support::docker::BUSYBOX_IMAGE
        ),
    )
    .unwrap();
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "image"]);
    give_to_workspace_owner(tmp.path());
    let host = Host::new(&["sh", "-c", SET_GID_AGENT], &[]);
    let result = handoff_ok(&host, &ws);
    assert_no_image_group(&ws, &result);
}

/// The image's own `ENTRYPOINT` (run with `overrideCommand: false`): records its ids into the
/// workspace and tries to leave a set-gid-6 copy of its shell there, then waits to be stopped.
const GROUP_ENTRYPOINT: &str = "cd /workspace || exit 1\n\
     id > entry-id.txt\n\
     cp /bin/busybox ep-helper; chgrp 6 ep-helper; chmod 2755 ep-helper\n\
     ls -ln ep-helper >> entry-id.txt\n\
     trap 'exit 0' TERM\n\
     while sleep 1 & wait $!; do :; done\n";

/// Issue 25 (spec-note 0400, "the image's groups"): the workspace container itself is created
/// as numeric `uid:gid` under `hardened`, not only its execs: the image's `ENTRYPOINT` (the
/// repository's code, run as the container's main process) gets no group the image's
/// `/etc/group` lists for its user, so it cannot `chgrp 6` a file in the host workspace.
#[test]
fn the_images_entrypoint_gets_no_image_group() {
    use std::os::unix::fs::MetadataExt as _;
    let test = "the_images_entrypoint_gets_no_image_group";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(
        &ws,
        Some(
            r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev", "containerUser": "dev", "overrideCommand": false}"#,
        ),
    );
    std::fs::write(ws.join(".devcontainer/entry.sh"), GROUP_ENTRYPOINT).unwrap();
    std::fs::write(
        ws.join(".devcontainer/Dockerfile"),
        format!(
            "FROM {}\n\
             RUN echo 'dev:x:1000:1000::/home/dev:/bin/sh' >> /etc/passwd && echo 'dev:x:1000:' >> /etc/group \
             && echo 'disk6:x:6:dev,devcell' >> /etc/group && mkdir -p /home/dev && chown 1000:1000 /home/dev\n\
             COPY entry.sh /entry.sh\n\
             USER dev\n\
             ENTRYPOINT [\"/bin/sh\", \"/entry.sh\"]\n",
            crate::support::docker::BUSYBOX_IMAGE
        ),
    )
    .unwrap();
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "image"]);
    give_to_workspace_owner(tmp.path());
    // the agent waits (bounded) for the entrypoint's record, so both ran before the checks
    let host = Host::new(
        &[
            "sh",
            "-c",
            "for i in $(seq 100); do grep -q ep-helper /workspace/entry-id.txt 2>/dev/null && break; sleep 0.1; done; true",
        ],
        &[],
    );
    let result = handoff_ok(&host, &ws);
    let ids = std::fs::read_to_string(ws.join("entry-id.txt")).unwrap_or_default();
    assert!(ids.contains("uid="), "the entrypoint ran: {ids}\n{result}");
    assert_no_group_6(&ids, "the image's entrypoint");
    let helper = std::fs::symlink_metadata(ws.join("ep-helper")).unwrap();
    assert_ne!(helper.gid(), 6, "the entrypoint left a group-6 file: {ids}");
    let set_id = set_id_entries(&ws);
    assert!(set_id.is_empty(), "set-id files on the host: {set_id:#?}");
    assert_nothing_foreign(&ws, &ids);
}

/// Attack K10 (spec-note 0400, "the image's groups"): a Compose primary's main process (the
/// service's `command`, the repository's) ran by its `user:` name, with every group the
/// image's `/etc/group` lists for it, and left a `chgrp 6` file in the host workspace after
/// `up` returned. The primary is now created as numeric `uid:gid` too, its name kept in
/// devcell's label: its `id` shows no group 6 and nothing it leaves is of another group.
#[test]
fn a_compose_primarys_main_process_gets_no_image_group() {
    use crate::support::context::{TestContext, docker_lines};
    use std::os::unix::fs::MetadataExt as _;
    let Some(ctx) = TestContext::busybox("hostile_compose_groups") else {
        return;
    };
    let ctx = ctx.isolated();
    let project = super::compose_projects::own_project(&ctx);
    ctx.remove_images_matching(&format!("{project}-*"));
    ctx.write(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {}\n\
             RUN echo 'dev:x:1000:1000::/home/dev:/bin/sh' >> /etc/passwd && echo 'dev:x:1000:' >> /etc/group \
             && echo 'disk6:x:6:dev' >> /etc/group && mkdir -p /home/dev && chown 1000:1000 /home/dev\n",
            crate::support::docker::BUSYBOX_IMAGE
        ),
    );
    let main = "sleep 1; id > /ws/main-ids; cp /bin/busybox /ws/late-sg; chgrp 6 /ws/late-sg; \
                chmod 2755 /ws/late-sg; ls -ln /ws/late-sg >> /ws/main-ids; touch /ws/done; \
                exec sleep 100000";
    let command = serde_json::to_string(&["sh", "-c", main]).unwrap();
    ctx.write(
        ".devcontainer/docker-compose.yml",
        &format!(
            "services:\n  app:\n    build: {{context: ., dockerfile: Dockerfile}}\n    user: dev\n    command: {command}\n    volumes: [\"..:/ws\"]\n"
        ),
    );
    let ctx = ctx.config(
        r#"{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/ws", "remoteUser": "dev"}"#,
    );
    give_to_workspace_owner(ctx.path());
    let result = ctx.up(&[]);
    let id = result["containerId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for image in docker_lines(&["inspect", "--format", "{{.Config.Image}}", &id]) {
        ctx.remove_images_matching(&image);
    }
    let done = ctx.path().join("done");
    for _ in 0..600 {
        if done.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let ids = std::fs::read_to_string(ctx.path().join("main-ids")).unwrap_or_default();
    assert!(
        ids.contains("uid="),
        "the main process ran: {ids}\n{result}"
    );
    assert_no_group_6(&ids, "the Compose primary's main process");
    // what it left in the host workspace is of the workspace owner's group, not group 6
    let left = std::fs::symlink_metadata(ctx.path().join("late-sg")).unwrap();
    assert_eq!(
        (left.uid(), left.gid()),
        (WORKSPACE_OWNER, WORKSPACE_OWNER),
        "{ids}"
    );
    // created numeric, reported by the name the service asked for
    let user = docker_lines(&[
        "inspect",
        "--format",
        "{{.Config.User}} {{index .Config.Labels \"devcell.user\"}}",
        &id,
    ]);
    let owner = WORKSPACE_OWNER;
    assert_eq!(user, [format!("{owner}:{owner} dev")], "{result}");
    assert_eq!(result["remoteUser"], "dev", "{result}");
    ctx.run("down", &["--remove"]).ok();
}

/// Waits (bounded, 60 s) until `path` exists.
fn wait_for(path: &Path) {
    for _ in 0..600 {
        if path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{} never appeared", path.display());
}

/// The permission bits of `path` (set-id bits included).
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// Attack K11 (spec-note 0400): a `postStartCommand` (or a `devcell exec`) leaves a `setsid`
/// process that plants a set-uid copy of a shell in the host workspace after `up`'s one scan;
/// any local user would run it as the workspace owner. `status` names it (and changes
/// nothing), the next `exec` clears it after its command (and what that command left), and
/// `down` clears one planted after the last `exec`, naming it in its result.
#[test]
fn a_set_uid_file_planted_after_up_is_named_by_status_and_cleared_by_exec_and_down() {
    let test = "a_set_uid_file_planted_after_up_is_named_by_status_and_cleared_by_exec_and_down";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    let plant = |name: &str, done: &str| {
        format!(
            "setsid sh -c 'sleep 2; cp /bin/busybox {name} && chmod 4755 {name}; touch {done}' </dev/null >/dev/null 2>&1 &"
        )
    };
    let config = serde_json::json!({
        "image": crate::support::docker::BUSYBOX_IMAGE,
        "remoteUser": "nobody",
        "updateRemoteUserUID": true,
        "postStartCommand": plant("late-su", "planted1"),
    });
    repo_at(&ws, Some(&config.to_string()));
    give_to_workspace_owner(tmp.path());
    let host = Host::new(&["true"], &[]);
    let w = ws.to_str().unwrap();
    let up = host.run(&ws, &["up", "--workspace-folder", w], &[]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    wait_for(&ws.join("planted1"));
    assert_eq!(
        mode_of(&ws.join("late-su")),
        0o4755,
        "planted after up's scan"
    );

    // `status` names it and changes nothing
    let status = host.status(&ws);
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        said.contains("set_id_file_or_device") && said.contains("late-su"),
        "{said}"
    );
    assert_eq!(mode_of(&ws.join("late-su")), 0o4755);

    // `exec` clears it after its command, and what the command itself left
    let exec = host.run(
        &ws,
        &[
            "exec",
            "--workspace-folder",
            w,
            "sh",
            "-c",
            "cp /bin/busybox by-exec && chmod 4755 by-exec",
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&exec.stderr);
    assert!(exec.status.success(), "{stderr}");
    assert!(
        stderr.contains("late-su") && stderr.contains("by-exec"),
        "{stderr}"
    );
    assert_eq!(mode_of(&ws.join("late-su")), 0o755);
    assert_eq!(mode_of(&ws.join("by-exec")), 0o755);

    // one planted after the last `exec` returned: `down` clears it once the container stopped
    let exec = host.run(
        &ws,
        &[
            "exec",
            "--workspace-folder",
            w,
            "sh",
            "-c",
            &plant("late-3", "planted3"),
        ],
        &[],
    );
    assert!(exec.status.success());
    wait_for(&ws.join("planted3"));
    let down = host.run(&ws, &["down", "--workspace-folder", w], &[]);
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    let result: Value = serde_json::from_slice(&down.stdout).unwrap_or_default();
    assert!(
        result["setIdFilesAndDevices"]
            .to_string()
            .contains("late-3"),
        "{result}"
    );
    let set_id = set_id_entries(&ws);
    assert!(set_id.is_empty(), "set-id files on the host: {set_id:#?}");
}

/// Attacks J7: the user granted `initializeCommand: "sh .devcontainer/init.sh"` for good (the
/// grant its refusal names, in config.toml); the agent rewrites the script during a handoff.
/// The grant covered the script's content, so the next handoff is asked again and refused:
/// the agent's script never runs on the host (its marker does not exist).
#[test]
fn an_agent_rewriting_the_granted_initialize_script_runs_nothing_on_the_host() {
    granted_initialize_script_rewritten(
        "an_agent_rewriting_the_granted_initialize_script_runs_nothing_on_the_host",
        "sh .devcontainer/init.sh",
    );
}

/// Attack L1: the same, with the script named inside a nested shell string behind one more
/// quote removal (`sh -c "sh .devcontainer/in''it.sh"`): its grant was the command's text
/// alone, and the agent's rewritten script ran on the host at the next handoff. Since attack
/// 24 O5 what runs is a copy of each pinned file, and a name the rewrite to the copy cannot
/// reach (`in''it.sh`) makes the command a one-run grant: no standing grant covers it, so
/// nothing of the agent's runs without the user granting that very run.
#[test]
fn an_agent_rewriting_a_script_named_in_a_nested_shell_string_runs_nothing_on_the_host() {
    let test =
        "an_agent_rewriting_a_script_named_in_a_nested_shell_string_runs_nothing_on_the_host";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    let command = initialize_request(&ws, "sh -c \"sh .devcontainer/in''it.sh\"");
    assert_eq!(command["grant"], "--allow host-command", "{command}");
    assert!(command.to_string().contains("in''it.sh"), "{command}");
}

/// The `hostCommand` request a `--plan` handoff names for a repository at `ws` (a folder
/// below a temporary one) whose `initializeCommand` is `initialize` and whose committed
/// `.devcontainer/init.sh` is `true`.
fn initialize_request(ws: &Path, initialize: &str) -> serde_json::Value {
    let config = serde_json::json!({
        "image": hostgit_image(),
        "remoteUser": "nobody",
        "updateRemoteUserUID": true,
        "initializeCommand": initialize,
    })
    .to_string();
    repo_at(ws, Some(&config));
    std::fs::write(ws.join(".devcontainer/init.sh"), "true\n").unwrap();
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "init script"]);
    give_to_workspace_owner(ws.parent().unwrap());
    let asking = Host::new(&["true"], &[]);
    let plan = asking.handoff(ws, &["--plan", "--network", "none"], &[]);
    let p = envelope(&plan);
    p["error"]["details"]["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["permission"] == "hostCommand")
        .unwrap_or_else(|| panic!("a host command request: {p}"))
        .clone()
}

/// J7 and L1: `initialize` is granted for good as its refusal names it, the agent rewrites
/// `.devcontainer/init.sh`, and nothing of the agent's runs on the host afterwards.
fn granted_initialize_script_rewritten(test: &str, initialize: &str) {
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let marker = target.marker();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    let none = ["--network", "none"];

    // the grant the refusal names covers the script, and says so
    let command = initialize_request(&ws, initialize);
    assert_eq!(
        command["covers"][0]["path"], ".devcontainer/init.sh",
        "{command}"
    );
    let grant = command["grant"]
        .as_str()
        .unwrap()
        .trim_start_matches("--allow ")
        .to_string();

    // granted for good, the agent rewrites the script the grant was given for
    let rewrite = format!(
        "printf '#!/bin/sh\\ntouch {}\\n' > .devcontainer/init.sh",
        marker.display()
    );
    let host = Host::new(&["sh", "-c", &rewrite], &[grant.as_str()]);
    let first = host.handoff(&ws, &none, &[]);
    assert_eq!(first.status.code(), Some(0), "{}", envelope(&first));
    let script = std::fs::read_to_string(ws.join(".devcontainer/init.sh")).unwrap();
    assert!(
        script.contains("touch"),
        "the agent could not rewrite the script: {script}"
    );
    assert!(
        !marker.exists(),
        "the agent's script ran during its own handoff"
    );

    // the next handoff and up are asked again: nothing of the agent's runs on the host
    let second = host.handoff(&ws, &none, &[]);
    let r = envelope(&second);
    assert_eq!(second.status.code(), Some(12), "{r}");
    assert!(r.to_string().contains(".devcontainer/init.sh"), "{r}");
    assert!(
        !r.to_string().contains(&grant),
        "the old grant is named again: {r}"
    );
    let up = host.run(
        &ws,
        &[
            "up",
            "--workspace-folder",
            ws.to_str().unwrap(),
            "--network",
            "none",
        ],
        &[],
    );
    assert_ne!(up.status.code(), Some(0));
    assert!(!marker.exists(), "the agent's script ran on the host");
    target.assert_untouched();
}

/// `.gitignore` `<ignored>` committed in the repository at `ws`.
fn ignore(ws: &Path, ignored: &str) {
    std::fs::write(ws.join(".gitignore"), format!("{ignored}\n")).unwrap();
    git(ws, &["add", ".gitignore"]);
    git(ws, &["commit", "-q", "-m", "ignore"]);
}

/// Attack K2 (spec-note 0400): an existing nested repository that is no submodule (a
/// gitignored clone `vendor/lib`) was workspace content, read-write: the agent wrote its
/// `hooks/` and `config`, and the human's next `git commit` there ran them. It is now bound
/// read-only on itself, and `vendor/lib` and `vendor` on themselves: nothing in its git
/// directory can be written, nor it or a folder above it renamed to plant another.
#[test]
fn a_nested_repository_that_is_not_a_submodule_gets_no_hook() {
    let test = "a_nested_repository_that_is_not_a_submodule_gets_no_hook";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    ignore(&ws, "vendor/");
    let lib = ws.join("vendor/lib");
    repo_at(&lib, None);
    let origin = origin_of(&lib, tmp.path());
    give_to_workspace_owner(tmp.path());
    let lib_git_before = crate::support::tree_fingerprint(&lib.join(".git"));
    let script = format!(
        "{plant}cd /workspace; \
         evil() {{ mkdir -p \"$1/objects\" \"$1/refs/heads\" && echo 'ref: refs/heads/main' > \"$1/HEAD\" && plant \"$1\"; }}; \
         plant vendor/lib/.git 2>/dev/null && echo planted-hooks >> agent.log; \
         echo {evil} > vendor/lib/.git/commondir 2>/dev/null && echo wrote-commondir >> agent.log; \
         mv vendor/lib/.git vendor/lib/git-old 2>/dev/null && echo renamed-git >> agent.log; \
         mv vendor/lib vendor/lib-old 2>/dev/null && echo renamed-lib >> agent.log; \
         mv vendor vendor-old 2>/dev/null && echo renamed-vendor >> agent.log; \
         evil vendor/lib/.git 2>/dev/null; \
         echo planted >> agent.log; true",
        plant = plant_function(&target.marker()),
        evil = target.path().display(),
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    let r = handoff_ok(&host, &ws);
    assert_eq!(
        std::fs::read_to_string(ws.join("agent.log")).unwrap(),
        "planted\n",
        "nothing in `vendor/lib/.git` could be written, nor it, `vendor/lib` or `vendor` renamed"
    );
    assert_eq!(
        crate::support::tree_fingerprint(&lib.join(".git")),
        lib_git_before
    );
    assert!(r["result"]["gitDirChanges"].is_null(), "{r}");
    human_session(&[&ws, &lib], &origin, &target);
}

/// Attack K4 (spec-note 0400): a linked worktree checked out inside the workspace
/// (`git worktree add .wt/feat`) kept its `.git` file writable: the agent re-pointed it to a
/// git directory it planted, and the human's `git status` there ran its `core.fsmonitor`.
/// The file is now bound read-only on itself, `.wt/feat` and `.wt` on themselves.
#[test]
fn a_linked_worktree_inside_the_workspace_cannot_be_repointed() {
    let test = "a_linked_worktree_inside_the_workspace_cannot_be_repointed";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    ignore(&ws, ".wt/");
    git(&ws, &["worktree", "add", "-q", ".wt/feat", "-b", "feat"]);
    let feat = ws.join(".wt/feat");
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let dot_git_before = std::fs::read(feat.join(".git")).unwrap();
    let script = format!(
        "{plant}cd /workspace; \
         evil() {{ mkdir -p \"$1/objects\" \"$1/refs/heads\" && echo 'ref: refs/heads/feat' > \"$1/HEAD\" && plant \"$1\"; }}; \
         evil .wt/feat/.e 2>/dev/null; \
         echo 'gitdir: .e' > .wt/feat/.git 2>/dev/null && echo repointed >> agent.log; \
         rm -f .wt/feat/.git 2>/dev/null && echo removed >> agent.log; \
         mv .wt/feat .wt/feat-old 2>/dev/null && echo renamed-feat >> agent.log; \
         mv .wt .wt-old 2>/dev/null && echo renamed-wt >> agent.log; \
         mkdir -p .wt/feat 2>/dev/null; echo 'gitdir: .e' > .wt/feat/.git 2>/dev/null; \
         echo planted >> agent.log; true",
        plant = plant_function(&target.marker()),
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    let r = handoff_ok(&host, &ws);
    assert_eq!(
        std::fs::read_to_string(ws.join("agent.log")).unwrap(),
        "planted\n",
        "the worktree's `.git` file could not be re-pointed or removed, nor `.wt/feat` or `.wt` renamed"
    );
    assert_eq!(std::fs::read(feat.join(".git")).unwrap(), dot_git_before);
    assert!(!ws.join(".wt-old").exists() && !ws.join(".wt/feat-old").exists());
    // the folder the agent laid out as a git directory is named, loudly (attack L2)
    let changes = r["result"]["gitDirChanges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(changes.len(), 1, "{r}");
    // moved aside (its `HEAD`) at the end (spec-note 0448)
    assert_eq!(changes[0]["code"], "git_dir_quarantined", "{r}");
    assert_eq!(changes[0]["loud"], true, "{r}");
    assert!(
        changes[0]["message"]
            .as_str()
            .unwrap()
            .contains(".wt/feat/.e"),
        "{r}"
    );
    human_session(&[&ws, &feat], &origin, &target);
}

/// Attack L2: the agent lays out a folder of the user's own repository (`docs`) as a git
/// directory with no `.git` name (`HEAD`, `objects/`, `refs/`, a `config` with
/// `core.worktree = ..` and `core.fsmonitor`): git's discovery would take it as the repository
/// of `docs` before it reaches the workspace's `.git`. The handoff moves its `HEAD` aside at
/// its end (the folder's files stay) and says so loudly (`git_dir_quarantined`, spec-note
/// 0448): the human's git in `docs` is the repository's again and runs nothing.
#[test]
fn a_folder_the_agent_makes_bare_repository_shaped_is_named_loudly() {
    let test = "a_folder_the_agent_makes_bare_repository_shaped_is_named_loudly";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::fs::write(ws.join("docs/readme.md"), "docs\n").unwrap();
    git(&ws, &["add", "docs"]);
    git(&ws, &["commit", "-q", "-m", "docs"]);
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let script = format!(
        "cd /workspace/docs && mkdir -p objects refs && echo 'ref: refs/heads/main' > HEAD && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = touch {}\\n' > config",
        target.marker().display()
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    let r = handoff_ok(&host, &ws);
    assert!(!ws.join("docs/HEAD").exists(), "moved aside: {r}");
    assert!(ws.join("docs/readme.md").exists() && ws.join("docs/config").exists());
    let changes = r["result"]["gitDirChanges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        changes.iter().any(|c| c["code"] == "git_dir_quarantined"
            && c["loud"] == true
            && c["message"]
                .as_str()
                .is_some_and(|m| m.contains("`docs/HEAD`"))),
        "{r}"
    );
    let out = human_git(&ws.join("docs"), &["status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.assert_untouched();
    human_session(&[&ws], &origin, &target);
}

/// Attack L3: an existing bare repository in the workspace (`upstream.git`, a local remote
/// the user pushes to) is a git directory under another name: it is covered read-only whole,
/// as a `.git` folder is, so the agent cannot write its `hooks/` or `config`, nor rename it
/// or a folder above it; the human's push to it runs nothing.
#[test]
fn a_bare_repository_in_the_workspace_gets_no_hook() {
    let test = "a_bare_repository_in_the_workspace_gets_no_hook";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    ignore(&ws, "remotes/");
    let bare = ws.join("remotes/upstream.git");
    std::fs::create_dir_all(ws.join("remotes")).unwrap();
    git(&ws, &["init", "-q", "--bare", "remotes/upstream.git"]);
    git(&ws, &["remote", "add", "up", "./remotes/upstream.git"]);
    git(&ws, &["push", "-q", "up", "main"]);
    let origin = origin_of(&ws, tmp.path());
    give_to_workspace_owner(tmp.path());
    let before = crate::support::tree_fingerprint(&bare.join("hooks"));
    let config_before = std::fs::read(bare.join("config")).unwrap();
    let m = target.marker();
    let script = format!(
        "{plant}cd /workspace; \
         printf '#!/bin/sh\\ntouch {m}\\n' > remotes/upstream.git/hooks/post-receive 2>/dev/null && echo wrote-hook >> agent.log; \
         plant remotes/upstream.git 2>/dev/null && echo planted-config >> agent.log; \
         mv remotes/upstream.git remotes/old.git 2>/dev/null && echo renamed-bare >> agent.log; \
         mv remotes remotes-old 2>/dev/null && echo renamed-remotes >> agent.log; \
         echo planted >> agent.log; true",
        plant = plant_function(&m),
        m = m.display(),
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    let r = handoff_ok(&host, &ws);
    assert_eq!(
        std::fs::read_to_string(ws.join("agent.log")).unwrap(),
        "planted\n",
        "nothing in `remotes/upstream.git` could be written, nor it or `remotes` renamed"
    );
    assert_eq!(
        crate::support::tree_fingerprint(&bare.join("hooks")),
        before
    );
    assert_eq!(std::fs::read(bare.join("config")).unwrap(), config_before);
    assert!(r["result"]["gitDirChanges"].is_null(), "{r}");
    human_session(&[&ws], &origin, &target);
    let out = human_git(&ws, &["push", "-q", "up", "main"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.assert_untouched();
}

/// Attack M11: a workspace repository whose `.git/objects` is a symbolic link to a folder
/// outside the workspace (another repository's objects, `~`; what an agent of an earlier
/// session could leave in a repository it made) was bound into the container as that folder.
/// The handoff refuses before any container is made (exit 2), naming the link; no container
/// exists and the folder it names is untouched. Fails without the check: the handoff ran and
/// the container had the folder at `/run/devcell/git/<id>/objects`.
#[test]
fn a_repository_whose_objects_is_a_link_out_of_the_workspace_is_refused_before_a_container_is_made()
{
    let test = "a_repository_whose_objects_is_a_link_out_of_the_workspace_is_refused";
    if !engine_ready(test, crate::support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("repo");
    repo_at(&ws, Some(&config()));
    // the repository's objects moved outside the workspace, beside a private file, and linked
    let secret = tmp.path().join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::rename(ws.join(".git/objects"), secret.join("objects")).unwrap();
    std::fs::write(secret.join("objects/marker"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(secret.join("objects"), ws.join(".git/objects")).unwrap();
    give_to_workspace_owner(tmp.path());
    let script = "cat /run/devcell/git/*/objects/marker > /workspace/loot";
    let host = Host::new(&["sh", "-c", script], &[]);
    let out = host.handoff(&ws, &[], &[]);
    let r = envelope(&out);
    assert_eq!(out.status.code(), Some(2), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&ws.join(".git/objects").display().to_string())
            && message.contains("symbolic link"),
        "{r}"
    );
    assert!(
        super::host_execution::containers_of(&ws).is_empty(),
        "a container was made: {r}"
    );
    assert_eq!(
        std::fs::read_to_string(secret.join("objects/marker")).unwrap(),
        "TOP-SECRET"
    );
    assert!(!ws.join("loot").exists(), "the agent read the folder");
}
