//! Clone tasks (`handoff --isolation clone`, issue 27, spec-note 0437): a private clone per
//! task made from a bare mirror, the task branch fetched back by the host into
//! `refs/devcell/tasks/<task>`, nothing of the user's repository mounted or changed.
//!
//! Every repository here belongs to [`WORKSPACE_OWNER`] (devcell runs as root in CI), has a
//! hook and `core.fsmonitor` configured that would create the host marker, and devcell's host
//! git must never run them.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support;
use crate::support::docker::engine_ready;
use crate::support::git::{git, give_to_workspace_owner, hostgit_image};
use crate::support::hostile::HostTarget;

mod budget;
mod compose;
mod parallel;
mod recovery;

/// One test host: devcell's home, state and cache in a temporary folder, agents by name.
pub(crate) struct Host {
    tmp: tempfile::TempDir,
}

impl Host {
    /// `agents`: name → the shell script the agent runs (`sh -c`) in the workspace.
    pub(crate) fn new(agents: &[(&str, &str)]) -> Host {
        let tmp = tempfile::Builder::new()
            .prefix("devcell-clone-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let mut config = String::new();
        for (name, script) in agents {
            config.push_str(&format!(
                "[agents.{name}]\ncommand = {}\n\n",
                serde_json::to_string(&["sh", "-c", script]).unwrap()
            ));
        }
        std::fs::write(tmp.path().join("config.toml"), config).unwrap();
        Host { tmp }
    }

    /// The config file (`config.toml`) every command gets.
    pub(crate) fn config_file(&self) -> PathBuf {
        self.tmp.path().join("config.toml")
    }

    pub(crate) fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn cache(&self) -> PathBuf {
        self.tmp.path().join("cache")
    }

    fn mirrors(&self) -> Vec<PathBuf> {
        let dir = self.cache().join("devcell/mirrors");
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "git"))
            .collect()
    }

    /// `devcell <args>` with this host's folders and config.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        support::devcell()
            .env("HOME", self.tmp.path().join("home"))
            .env("DEVCELL_STATE_DIR", self.state())
            .env("XDG_CACHE_HOME", self.cache())
            .args(args)
            .arg("--config-file")
            .arg(self.tmp.path().join("config.toml"))
            .output()
            .expect("devcell runs")
    }

    /// `handoff --isolation clone --agent <agent> --format json <extra>` of `repo`.
    pub(crate) fn handoff(&self, repo: &Path, agent: &str, extra: &[&str]) -> Output {
        let mut args = vec![
            "handoff",
            "--isolation",
            "clone",
            "--workspace-folder",
            repo.to_str().unwrap(),
            "--agent",
            agent,
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    /// The clone of task `task` (its folder under the state's `tasks/<key>/`).
    pub(crate) fn clone_of(&self, task: &str) -> PathBuf {
        self.find_clone(task).unwrap_or_else(|| {
            panic!(
                "no task {task} under {}",
                self.state().join("tasks").display()
            )
        })
    }

    /// The clone of task `task`, once its record is written.
    pub(crate) fn find_clone(&self, task: &str) -> Option<PathBuf> {
        let tasks = self.state().join("tasks");
        for key in std::fs::read_dir(&tasks).ok()?.flatten() {
            let folder = key.path().join(task);
            if let Ok(record) = std::fs::read_to_string(folder.join("task.json"))
                && let Ok(v) = serde_json::from_str::<Value>(&record)
                && let Some(clone) = v["clone"].as_str()
            {
                return Some(PathBuf::from(clone));
            }
        }
        None
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // every container of every clone this host made
        let tasks = self.state().join("tasks");
        for key in std::fs::read_dir(&tasks).into_iter().flatten().flatten() {
            for task in std::fs::read_dir(key.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                for clone in std::fs::read_dir(task.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    if clone.path().is_dir() {
                        for id in containers_of(&clone.path()) {
                            let _ = std::process::Command::new("docker")
                                .args(["rm", "-f", "-v", &id])
                                .bounded_output();
                        }
                    }
                }
            }
        }
    }
}

pub(crate) use crate::support::docker::{containers_of, mount_sources};
pub(crate) use crate::support::envelope;

pub(crate) fn ok(out: &Output) -> Value {
    let v = envelope(out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{v:#}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

/// A repository at `<at>/repo`: history on `main`, a branch `side`, a linked worktree beside
/// it, a symlink, a `.devcontainer` on the hostgit image; its `.git/config` names hooks and
/// `core.fsmonitor` that would create `target`'s marker. Owned by the workspace owner.
pub(crate) fn source_repo(at: &Path, target: &HostTarget) -> PathBuf {
    let repo = at.join("repo");
    std::fs::create_dir_all(repo.join(".devcontainer")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(
        repo.join(".devcontainer/devcontainer.json"),
        format!(
            r#"{{"image": "{}", "remoteUser": "nobody", "updateRemoteUserUID": true}}"#,
            hostgit_image()
        ),
    )
    .unwrap();
    for i in 0..3 {
        std::fs::write(repo.join("a.txt"), format!("{i}\n")).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", &format!("commit {i}")]);
        if i == 0 {
            git(&repo, &["branch", "side"]);
        }
    }
    std::os::unix::fs::symlink("a.txt", repo.join("link")).unwrap();
    git(&repo, &["add", "link"]);
    git(&repo, &["commit", "-q", "-m", "a symlink"]);
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            at.join("wt").to_str().unwrap(),
            "side",
        ],
    );
    let marker = target.marker();
    let hooks = repo.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for h in [
        "post-checkout",
        "reference-transaction",
        "pre-auto-gc",
        "post-merge",
    ] {
        std::fs::write(
            hooks.join(h),
            format!("#!/bin/sh\ntouch {}\n", marker.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(hooks.join(h), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    git(
        &repo,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}", marker.display()),
        ],
    );
    give_to_workspace_owner(at);
    repo
}

/// The bytes of the user's `HEAD`, index, `.git/config` and working files.
fn snapshot(repo: &Path) -> Vec<(String, Vec<u8>)> {
    ["HEAD", ".git/HEAD", ".git/index", ".git/config", "a.txt"]
        .iter()
        .filter_map(|rel| {
            std::fs::read(repo.join(rel))
                .ok()
                .map(|b| (rel.to_string(), b))
        })
        .chain(std::iter::once((
            "link".to_string(),
            std::fs::read_link(repo.join("link"))
                .unwrap()
                .into_os_string()
                .into_encoded_bytes(),
        )))
        .collect()
}

/// Every ref of `repo` but devcell's task refs.
fn user_refs(repo: &Path) -> String {
    git(repo, &["for-each-ref", "--format=%(objectname) %(refname)"])
        .lines()
        .filter(|l| !l.contains(" refs/devcell/tasks/"))
        .collect::<Vec<_>>()
        .join("\n")
}

const COMMIT: &str = "set -e; git -c user.name=agent -c user.email=agent@devcell.invalid \
     -c commit.gpgsign=false commit -q --allow-empty -m agent-commit; \
     git symbolic-ref HEAD > agent.txt; git add agent.txt; \
     git -c user.name=agent -c user.email=agent@devcell.invalid -c commit.gpgsign=false \
     commit -q -m agent-file";

#[test]
fn a_clone_task_brings_the_agents_commits_back_and_leaves_the_repository_untouched() {
    if !engine_ready("clone_task_round_trip", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("commit", COMMIT), ("idle", "true")]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let before = snapshot(&repo);
    let refs_before = user_refs(&repo);
    let base = git(&repo, &["rev-parse", "HEAD"]);

    let r = ok(&host.handoff(&repo, "commit", &["--task", "t1"]));
    let task = &r["result"]["task"];
    assert_eq!(task["task"], "t1", "{r:#}");
    assert_eq!(task["ref"], "refs/devcell/tasks/t1");
    assert_eq!(task["base"], base.as_str());
    assert_eq!(task["ahead"], 2, "{task:#}");
    let tip = task["fetched"].as_str().expect("fetched").to_string();
    assert_eq!(task["tip"], tip.as_str());
    // the host has the agent's commits under the task ref, and nothing else changed
    assert_eq!(git(&repo, &["rev-parse", "refs/devcell/tasks/t1"]), tip);
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", &tip]),
        "agent-file"
    );
    assert_eq!(git(&repo, &["rev-parse", &format!("{tip}~2")]), base);
    assert_eq!(
        snapshot(&repo),
        before,
        "HEAD, index, config or files changed"
    );
    assert_eq!(user_refs(&repo), refs_before);
    assert!(!repo.join("agent.txt").exists());
    target.assert_untouched();

    // the container saw the clone only: nothing of the user's repository, worktree or mirror
    let clone = host.clone_of("t1");
    // the task's environment record is kept as its clone's (spec-note 0520)
    let shown = support::devcell()
        .env("DEVCELL_STATE_DIR", host.state())
        .args(["env", "show", "--format", "json", "--workspace-folder"])
        .arg(&clone)
        .output()
        .unwrap();
    assert_eq!(
        shown.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert_eq!(envelope(&shown)["result"]["command"], "handoff");
    // nor the host's identity in the clone's reflogs (git's default names the host account and
    // host name when devcell made the clone)
    let host_name = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let host_name = host_name.trim();
    if let Ok(log) = std::fs::read_to_string(clone.join(".git/logs/HEAD")) {
        assert!(
            host_name.is_empty() || !log.contains(&format!("@{host_name}")),
            "the clone's reflog names the host: {log}"
        );
    }
    let ids = containers_of(&clone);
    assert_eq!(ids.len(), 1, "one container for the task");
    let sources = mount_sources(&ids[0]);
    let mirrors = host.mirrors();
    assert_eq!(mirrors.len(), 1, "one mirror");
    for s in &sources {
        for forbidden in [&repo, &at.path().join("wt"), &mirrors[0]] {
            assert!(
                !Path::new(s).starts_with(forbidden),
                "{s} is under {}: {sources:?}",
                forbidden.display()
            );
        }
    }
    assert!(sources.iter().any(|s| Path::new(s) == clone), "{sources:?}");
    // the context file names the task, its branch and base
    let context: Value = serde_json::from_str(
        &std::fs::read_to_string(clone.join(".devcell/context.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(context["sandbox"]["branch"], "devcell/t1", "{context:#}");
    assert_eq!(context["sandbox"]["base"], base.as_str());

    // `status` of the repository lists the task: fetched, 2 ahead, 0 behind
    let st = ok(&host.run(&[
        "status",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let t = &st["result"]["tasks"][0];
    assert_eq!(t["task"], "t1", "{st:#}");
    assert_eq!(t["fetched"], tip.as_str());
    assert_eq!(t["ahead"], 2);
    assert_eq!(t["behind"], 0);

    // a second run of the task continues its clone; fetch is then up to date
    let r = ok(&host.handoff(&repo, "idle", &["--task", "t1"]));
    assert_eq!(r["result"]["task"]["updated"], false, "{r:#}");
    let f = ok(&host.run(&[
        "fetch",
        "--task",
        "t1",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(f["result"]["fetched"], tip.as_str());

    // a commit the host never fetched (devcell killed before its fetch): delete refuses and
    // names it, `fetch` recovers it, then delete removes the task and keeps the ref
    git(
        &clone,
        &["commit", "-q", "--allow-empty", "-m", "after the fetch"],
    );
    let late = git(&clone, &["rev-parse", "HEAD"]);
    let delete = |extra: &[&str]| {
        let mut args = vec![
            "delete",
            "--task",
            "t1",
            "--workspace-folder",
            repo.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        host.run(&args)
    };
    let refused = delete(&[]);
    let e = envelope(&refused);
    assert_eq!(refused.status.code(), Some(12), "{e:#}");
    assert_eq!(e["error"]["details"]["reason"], "task_unfetched");
    assert_eq!(e["error"]["details"]["tip"], late.as_str());
    // each unfetched commit named: short sha and subject
    assert_eq!(e["error"]["details"]["total"], 1, "{e:#}");
    let named = e["error"]["details"]["commits"][0]
        .as_str()
        .unwrap_or_default();
    assert!(
        named.ends_with(" after the fetch") && late.starts_with(named.split(' ').next().unwrap()),
        "{e:#}"
    );
    assert!(clone.exists(), "a refused delete removes nothing");
    let f = ok(&host.run(&[
        "fetch",
        "--task",
        "t1",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(f["result"]["fetched"], late.as_str());
    ok(&delete(&[]));
    assert!(!clone.exists());
    assert!(containers_of(&clone).is_empty());
    assert_eq!(git(&repo, &["rev-parse", "refs/devcell/tasks/t1"]), late);
    assert_eq!(snapshot(&repo), before);
    target.assert_untouched();
}

#[test]
fn a_hostile_agent_in_its_clone_gets_nothing_run_on_the_host_and_writes_only_the_task_ref() {
    if !engine_ready("clone_task_hostile", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let m = target.marker();
    let m = m.display();
    // commits, then plants everything git would run, a filter for every file, refs that try
    // to leave the namespace, and finally swaps `.git/config` for a symlink (to the same
    // hostile configuration, which it names on the host too)
    let hostile = format!(
        "{COMMIT}; \
         printf '[core]\\n\\tfsmonitor = touch {m}\\n\\thooksPath = hooks\\n\\tpager = touch {m}\\n[filter \"x\"]\\n\\tclean = touch {m}\\n\\tsmudge = touch {m}\\n\\tprocess = touch {m}\\n[include]\\n\\tpath = /workspace/evil.cfg\\n[includeIf \"gitdir:/\"]\\n\\tpath = /workspace/evil.cfg\\n' >> .git/config; \
         printf '[alias]\\n\\tfetch = !touch {m}\\n' > evil.cfg; \
         printf '* filter=x\\n' > .gitattributes; \
         mkdir -p .git/hooks; for h in pre-commit post-checkout reference-transaction post-merge pre-auto-gc fsmonitor-watchman; do printf '#!/bin/sh\\ntouch {m}\\n' > .git/hooks/$h; chmod +x .git/hooks/$h; done; \
         tip=$(git rev-parse HEAD); \
         printf '%s refs/heads/main\\n%s refs/devcell/tasks/other\\n%s refs/heads/../../escape\\n' $tip $tip $tip >> .git/packed-refs; \
         mkdir -p .git/refs/heads/devcell/t2x; echo $tip > .git/refs/heads/main.new; \
         cp .git/config evil-config; rm .git/config; ln -s ../evil-config .git/config"
    );
    let host = Host::new(&[("hostile", &hostile)]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let before = snapshot(&repo);
    let refs_before = user_refs(&repo);

    let r = ok(&host.handoff(&repo, "hostile", &["--task", "t2"]));
    let tip = r["result"]["task"]["fetched"]
        .as_str()
        .expect("fetched")
        .to_string();
    assert_eq!(git(&repo, &["rev-parse", "refs/devcell/tasks/t2"]), tip);
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", &tip]),
        "agent-file"
    );
    // only the task's ref was written: no other ref, no escape, no other task's ref
    assert_eq!(user_refs(&repo), refs_before);
    let devcell_refs = git(
        &repo,
        &["for-each-ref", "--format=%(refname)", "refs/devcell"],
    );
    assert_eq!(devcell_refs, "refs/devcell/tasks/t2");
    assert_eq!(snapshot(&repo), before);
    // `fetch` again, `status` and `delete --force`: devcell never runs the clone's config
    let f = ok(&host.run(&[
        "fetch",
        "--task",
        "t2",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(f["result"]["updated"], false);
    ok(&host.run(&[
        "delete",
        "--task",
        "t2",
        "--force",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]));
    // the human's own git in the repository (its own hooks and fsmonitor are the user's:
    // only check that the task ref did not bring anything of the agent's)
    target.assert_untouched();
}

/// Attack 25, P6: the registry judgement's committed side was read from the task's clone,
/// whose `HEAD` is the agent's commit: continuing a task whose container was removed pulled
/// the image the agent committed, from a registry the user never granted, under `--network
/// none` (its tag carried data out of the sandbox). The committed side is now the user's
/// repository at the task's base: the continued task asks for the registry, and a tripwire
/// registry on 127.0.0.1 sees no connection.
#[test]
fn a_continued_clone_task_never_pulls_from_a_registry_the_agent_committed() {
    if !engine_ready("clone_task_registry", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let tripwire = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tripwire.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for stream in tripwire.incoming() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    let agent = format!(
        "set -e; if ! grep -q exfil .devcontainer/devcontainer.json; then \
         printf '{{\"image\": \"127.0.0.1:{port}/exfil/z:secret-p6\"}}\\n' > .devcontainer/devcontainer.json; \
         git add -A; git -c user.name=agent -c user.email=agent@devcell.invalid \
         -c commit.gpgsign=false commit -q -m 'use our mirror'; fi"
    );
    let host = Host::new(&[("mirror", &agent)]);
    let target = HostTarget::new();
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    ok(&host.handoff(&repo, "mirror", &["--task", "p6"]));
    let clone = host.clone_of("p6");
    for id in containers_of(&clone) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", "-v", &id])
            .bounded_output();
    }
    let again = host.handoff(&repo, "mirror", &["--task", "p6"]);
    let v = envelope(&again);
    assert_eq!(
        seen.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the agent's registry was contacted: {v:#}"
    );
    assert_ne!(again.status.code(), Some(0), "{v:#}");
    assert!(
        v.to_string()
            .contains(&format!("registry:127.0.0.1:{port}")),
        "the agent's registry is asked for: {v:#}"
    );
    target.assert_untouched();
}

#[test]
fn a_task_survives_its_mirror_being_garbage_collected() {
    if !engine_ready("clone_task_gc", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("commit", COMMIT), ("idle", "true")]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    ok(&host.handoff(&repo, "idle", &["--task", "t3"]));
    let mirror = host.mirrors().pop().expect("a mirror");
    // every ref of the mirror dropped, then a pruning gc: its objects are gone
    for r in git(&mirror, &["for-each-ref", "--format=%(refname)"]).lines() {
        git(&mirror, &["update-ref", "-d", r]);
    }
    git(&mirror, &["reflog", "expire", "--expire=now", "--all"]);
    git(&mirror, &["gc", "-q", "--prune=now"]);
    assert_eq!(
        git(&mirror, &["count-objects", "-v"])
            .lines()
            .find(|l| l.starts_with("in-pack:"))
            .unwrap(),
        "in-pack: 0"
    );
    let r = ok(&host.handoff(&repo, "commit", &["--task", "t3"]));
    let tip = r["result"]["task"]["fetched"].as_str().expect("fetched");
    assert_eq!(git(&repo, &["rev-parse", "refs/devcell/tasks/t3"]), tip);
    // a new task refetches into the same mirror
    ok(&host.handoff(&repo, "idle", &["--task", "t3b"]));
    assert_eq!(host.mirrors().len(), 1);
    git(&mirror, &["fsck", "--no-progress"]);
    target.assert_untouched();
}

#[test]
fn sources_that_cannot_be_cloned_are_refused_before_anything_is_created() {
    if !engine_ready("clone_task_refusals", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("idle", "true")]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    // every source made first (root's), then given to the workspace owner
    let plain = at.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    git(&plain, &["init", "-q", "-b", "main"]);
    std::fs::write(plain.join("a.txt"), "a\n").unwrap();
    git(&plain, &["add", "-A"]);
    git(&plain, &["commit", "-q", "-m", "one"]);
    git(&plain, &["commit", "-q", "--allow-empty", "-m", "two"]);
    let url = format!("file://{}", plain.display());
    let shallow = at.path().join("shallow");
    git(
        at.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "1",
            &url,
            shallow.to_str().unwrap(),
        ],
    );
    let partial = at.path().join("partial");
    git(
        at.path(),
        &[
            "-c",
            "uploadpack.allowFilter=true",
            "clone",
            "-q",
            "--filter=blob:none",
            &url,
            partial.to_str().unwrap(),
        ],
    );
    let lfs = at.path().join("lfs");
    std::fs::create_dir_all(&lfs).unwrap();
    git(&lfs, &["init", "-q"]);
    std::fs::write(
        lfs.join(".gitattributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    git(&lfs, &["add", "-A"]);
    git(&lfs, &["commit", "-q", "-m", "lfs"]);
    let sub = at.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    git(&sub, &["commit", "-q", "--allow-empty", "-m", "empty"]);
    git(
        &sub,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &url,
            "inner",
        ],
    );
    git(&sub, &["commit", "-q", "-m", "submodule"]);
    give_to_workspace_owner(at.path());
    for (source, reason) in [
        (&shallow, "clone_shallow_source"),
        (&partial, "clone_partial_source"),
        (&lfs, "clone_lfs"),
        (&sub, "clone_submodules"),
    ] {
        let out = host.handoff(source, "idle", &[]);
        let e = envelope(&out);
        assert_eq!(out.status.code(), Some(10), "{reason}: {e:#}");
        assert_eq!(e["error"]["details"]["reason"], reason, "{e:#}");
        // the hint is the envelope's next action
        assert!(e["next_actions"][0]["description"].is_string(), "{e:#}");
    }
    assert!(host.mirrors().is_empty(), "no mirror was made");
    let tasks: Vec<_> = std::fs::read_dir(host.state().join("tasks"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|k| std::fs::read_dir(k.path()).into_iter().flatten().flatten())
        .collect();
    assert!(tasks.is_empty(), "no task folder: {tasks:?}");
    target.assert_untouched();
}

#[test]
fn parallel_clone_tasks_on_one_repository_each_get_their_own_clone_branch_and_ref() {
    if !engine_ready("clone_task_parallel", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("commit", COMMIT)]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let names: Vec<String> = (0..4).map(|i| format!("p{i}")).collect();
    let outs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|n| {
                let host = &host;
                let repo = &repo;
                s.spawn(move || host.handoff(repo, "commit", &["--task", n]))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut tips = Vec::new();
    for (n, out) in names.iter().zip(&outs) {
        let r = ok(out);
        let tip = r["result"]["task"]["fetched"]
            .as_str()
            .expect("fetched")
            .to_string();
        assert_eq!(
            git(&repo, &["rev-parse", &format!("refs/devcell/tasks/{n}")]),
            tip
        );
        tips.push(tip);
        let clone = host.clone_of(n);
        assert_eq!(containers_of(&clone).len(), 1, "{n}: its own container");
        assert_eq!(
            git(&clone, &["symbolic-ref", "HEAD"]),
            format!("refs/heads/devcell/{n}")
        );
    }
    tips.sort();
    tips.dedup();
    assert_eq!(tips.len(), names.len(), "each task its own commits");
    let mirrors = host.mirrors();
    assert_eq!(mirrors.len(), 1);
    git(&mirrors[0], &["fsck", "--no-progress"]);
    target.assert_untouched();
}

/// The handoff of task `name` on `repo` with the `commit` agent, checked to succeed; the
/// commit the task ref now holds.
fn committed_task(host: &Host, repo: &Path, name: &str) -> String {
    let r = ok(&host.handoff(repo, "commit", &["--task", name]));
    r["result"]["task"]["fetched"]
        .as_str()
        .expect("fetched")
        .to_string()
}

/// 8 clone tasks on one repository, 4 at a time, twice: every task's commits come back to its
/// own ref, the mirror is made once and stays consistent (`git fsck`), the user's checkout,
/// index, config and branches are untouched; then `delete` without `--task` removes every task
/// (their containers and clones; the refs stay).
#[test]
fn eight_clone_tasks_four_at_a_time_all_come_back_and_delete_removes_them_all() {
    if !engine_ready("clone_task_eight", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let host = Host::new(&[("commit", COMMIT)]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let before = snapshot(&repo);
    let refs_before = user_refs(&repo);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let names: Vec<String> = (0..8).map(|i| format!("e{i}")).collect();
    let mut tips = Vec::new();
    for wave in names.chunks(4) {
        let got: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = wave
                .iter()
                .map(|n| {
                    let (host, repo) = (&host, &repo);
                    s.spawn(move || committed_task(host, repo, n))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        tips.extend(got);
        assert_eq!(host.mirrors().len(), 1, "one mirror, reused");
    }
    for (n, tip) in names.iter().zip(&tips) {
        assert_eq!(
            git(&repo, &["rev-parse", &format!("refs/devcell/tasks/{n}")]),
            *tip,
            "{n}"
        );
        // the agent's two commits on the base
        assert_eq!(git(&repo, &["rev-parse", &format!("{tip}~2")]), base, "{n}");
        let file = git(&repo, &["show", &format!("{tip}:agent.txt")]);
        assert_eq!(file, format!("refs/heads/devcell/{n}"));
    }
    let mut distinct = tips.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 8, "each task its own commits");
    let mirrors = host.mirrors();
    git(&mirrors[0], &["fsck", "--no-progress", "--strict"]);
    // (`fsck` reads the index: the repository's `core.fsmonitor` would run, so it is off)
    git(
        &repo,
        &["-c", "core.fsmonitor=false", "fsck", "--no-progress"],
    );
    assert_eq!(snapshot(&repo), before, "the user's checkout is untouched");
    assert_eq!(
        user_refs(&repo),
        refs_before,
        "the user's refs are untouched"
    );

    // `delete` without `--task`: every task, all fetched, removed
    let clones: Vec<PathBuf> = names.iter().map(|n| host.clone_of(n)).collect();
    let out = host.run(&[
        "delete",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let r = ok(&out);
    assert_eq!(
        r["result"]["tasks"].as_array().map(Vec::len),
        Some(8),
        "{r:#}"
    );
    for clone in &clones {
        assert!(!clone.exists(), "{} removed", clone.display());
        assert!(containers_of(clone).is_empty(), "{}", clone.display());
    }
    for (n, tip) in names.iter().zip(&tips) {
        assert_eq!(
            git(&repo, &["rev-parse", &format!("refs/devcell/tasks/{n}")]),
            *tip,
            "the fetched ref stays"
        );
    }
    assert_eq!(snapshot(&repo), before);
    target.assert_untouched();
}

/// The agent commits, then devcell is killed with SIGKILL mid-task. While it ran, the task was
/// in use (`delete` and a second handoff refused with `task_in_use`, nothing removed); after
/// the kill the lock is gone with the process: `fetch` brings the commits back, and `delete`
/// removes the task cleanly (its container included).
#[test]
fn a_devcell_killed_mid_task_releases_the_task_and_the_next_command_recovers_it() {
    if !engine_ready("clone_task_sigkill", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let slow = format!("{COMMIT}; touch committed.flag; sleep 600");
    let host = Host::new(&[("slow", slow.as_str()), ("commit", COMMIT)]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-src-")
        .tempdir()
        .unwrap();
    let repo = source_repo(at.path(), &target);
    let before = snapshot(&repo);
    // a plain process (not the test harness's command) so it can be killed mid-task
    let mut devcell = std::process::Command::new(assert_cmd::cargo::cargo_bin("devcell"));
    devcell
        .env_clear()
        .env("USER", "tester")
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    if let Ok(docker_host) = std::env::var("DOCKER_HOST") {
        devcell.env("DOCKER_HOST", docker_host);
    }
    let mut devcell = devcell
        .env("HOME", host.tmp.path().join("home"))
        .env("DEVCELL_STATE_DIR", host.state())
        .env("XDG_CACHE_HOME", host.cache())
        .args([
            "handoff",
            "--isolation",
            "clone",
            "--workspace-folder",
            repo.to_str().unwrap(),
            "--agent",
            "slow",
            "--task",
            "k",
            "--format",
            "json",
            "--config-file",
        ])
        .arg(host.tmp.path().join("config.toml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("devcell starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(400);
    let clone = loop {
        let found = std::fs::read_dir(host.state().join("tasks"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|k| k.path().join("k"))
            .find(|f| f.join("task.json").is_file());
        if let Some(folder) = found {
            let clone = host.clone_of("k");
            if clone.join("committed.flag").exists() {
                break clone;
            }
            let _ = folder;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never committed"
        );
        if let Ok(Some(status)) = devcell.try_wait() {
            panic!("devcell ended early: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let agent_tip = git(&clone, &["rev-parse", "refs/heads/devcell/k"]);

    // in use: neither deleted nor started twice
    let e = envelope(&host.run(&[
        "delete",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--task",
        "k",
        "--force",
        "--format",
        "json",
    ]));
    assert_eq!(e["error"]["details"]["reason"], "task_in_use", "{e:#}");
    assert_eq!(e["error"]["code"], "session_active", "{e:#}");
    let again = host.handoff(&repo, "commit", &["--task", "k"]);
    let e = envelope(&again);
    assert_eq!(again.status.code(), Some(17), "{e:#}");
    assert_eq!(e["error"]["details"]["reason"], "task_in_use", "{e:#}");
    assert!(clone.join(".git").is_dir(), "nothing removed");

    devcell.kill().expect("SIGKILL");
    devcell.wait().unwrap();

    // the next commands: the commits come back, then the task goes cleanly
    let f = ok(&host.run(&[
        "fetch",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--task",
        "k",
        "--format",
        "json",
    ]));
    assert_eq!(f["result"]["fetched"], agent_tip.as_str(), "{f:#}");
    assert_eq!(
        git(&repo, &["rev-parse", "refs/devcell/tasks/k"]),
        agent_tip
    );
    let d = ok(&host.run(&[
        "delete",
        "--workspace-folder",
        repo.to_str().unwrap(),
        "--task",
        "k",
        "--format",
        "json",
    ]));
    assert_eq!(d["result"]["dropped"], Value::Null, "{d:#}");
    assert!(!clone.exists());
    assert!(containers_of(&clone).is_empty(), "its container is gone");
    assert_eq!(snapshot(&repo), before);
    target.assert_untouched();
}

/// A multi-repository workspace root `<at>/ws` of two repositories: `app` ([`source_repo`]:
/// the configuration, hooks and `core.fsmonitor`) and `lib` (one commit). Owned by the
/// workspace owner. Returns the root, `app` and `lib`.
pub(crate) fn two_repository_workspace(
    at: &Path,
    target: &HostTarget,
) -> (PathBuf, PathBuf, PathBuf) {
    let ws = at.join("ws");
    let app = source_repo(&ws.join("app-src"), target);
    std::fs::rename(&app, ws.join("app")).unwrap();
    std::fs::remove_dir_all(ws.join("app-src")).unwrap();
    let app = ws.join("app");
    // the `wt` worktree `source_repo` made is gone with its folder: forget it
    git(&app, &["worktree", "prune"]);
    let lib = ws.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    git(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.txt"), "lib\n").unwrap();
    git(&lib, &["add", "-A"]);
    git(&lib, &["commit", "-q", "-m", "lib"]);
    give_to_workspace_owner(at);
    (ws, app, lib)
}

/// A multi-repository workspace root (two repositories, the primary holding the configuration)
/// as a clone task: each repository gets its own mirror, clone and task branch, mounted at
/// `/workspace/<repo>`; the agent commits in both; both come back to
/// `refs/devcell/tasks/<task>` of their own repository; `status` and `fetch` speak per
/// repository; the hosts' `HEAD`, index and config are byte-identical; `delete` removes the task.
#[test]
fn a_multi_repository_clone_task_brings_back_the_commits_of_each_repository() {
    if !engine_ready("clone_task_multi", support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let target = HostTarget::new();
    let both = format!(
        "set -e; for r in /workspace/app /workspace/lib; do (cd $r && {COMMIT}); done; \
         test ! -e /workspace/repos; test ! -e /workspace/app/task.json"
    );
    let host = Host::new(&[("both", &both)]);
    let at = tempfile::Builder::new()
        .prefix("devcell-clone-multi-")
        .tempdir()
        .unwrap();
    let (ws, app, lib) = two_repository_workspace(at.path(), &target);
    let before: Vec<_> = [&app, &lib]
        .iter()
        .map(|r| {
            ["HEAD", "index", "config"].map(|f| std::fs::read(r.join(".git").join(f)).unwrap())
        })
        .collect();
    let bases: Vec<String> = [&app, &lib]
        .iter()
        .map(|r| git(r, &["rev-parse", "HEAD"]))
        .collect();

    let r = ok(&host.handoff(&ws, "both", &["--task", "m1"]));
    let tasks = r["result"]["tasks"].as_array().expect("tasks").clone();
    assert_eq!(tasks.len(), 2, "{r:#}");
    for ((t, repo), base) in tasks.iter().zip([&app, &lib]).zip(&bases) {
        let name = repo.file_name().unwrap().to_str().unwrap();
        assert_eq!(t["repo"], name, "{t:#}");
        assert_eq!(t["ref"], "refs/devcell/tasks/m1");
        assert_eq!(t["ahead"], 2, "{t:#}");
        let tip = t["fetched"].as_str().expect("fetched");
        assert_eq!(git(repo, &["rev-parse", "refs/devcell/tasks/m1"]), tip);
        assert_eq!(git(repo, &["rev-parse", &format!("{tip}~2")]), *base);
        assert_eq!(
            git(repo, &["show", &format!("{tip}:agent.txt")]),
            "refs/heads/devcell/m1"
        );
    }
    assert_eq!(host.mirrors().len(), 2, "one mirror per repository");
    let after: Vec<_> = [&app, &lib]
        .iter()
        .map(|r| {
            ["HEAD", "index", "config"].map(|f| std::fs::read(r.join(".git").join(f)).unwrap())
        })
        .collect();
    assert!(before == after, "a host's HEAD, index or config changed");
    target.assert_untouched();

    // the container saw the clones only, each at /workspace/<repo>
    let tasks_dir = host.state().join("tasks");
    let key = std::fs::read_dir(&tasks_dir)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let clones = key.join("m1/workspace");
    assert!(clones.join("app/.git").is_dir() && clones.join("lib/.git").is_dir());
    let ids = containers_of(&clones);
    assert_eq!(ids.len(), 1, "one container for the task");
    for s in mount_sources(&ids[0]) {
        assert!(
            !Path::new(&s).starts_with(&ws),
            "{s} is under the workspace"
        );
    }
    let context: Value = serde_json::from_str(
        &std::fs::read_to_string(clones.join(".devcell/context.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(context["sandbox"]["bases"]["lib"], bases[1].as_str());

    // `status` and `fetch` per repository
    let st = ok(&host.run(&[
        "status",
        "--workspace-folder",
        ws.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let listed: Vec<&str> = st["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["repo"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["app", "lib"], "{st:#}");
    let f = ok(&host.run(&[
        "fetch",
        "--task",
        "m1",
        "--workspace-folder",
        ws.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(
        f["result"]["repositories"].as_array().map(Vec::len),
        Some(2),
        "{f:#}"
    );
    let d = ok(&host.run(&[
        "delete",
        "--task",
        "m1",
        "--workspace-folder",
        ws.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(d["result"]["task"], "m1", "{d:#}");
    assert!(!key.join("m1").exists());
    assert!(containers_of(&clones).is_empty());
    target.assert_untouched();
}
