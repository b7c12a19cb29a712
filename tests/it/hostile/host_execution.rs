//! Hostile repositories: see `super`. Classes 2 and 3: what the repository names for the host
//! (`initializeCommand`) and devcell's own host-side git (spec-notes 0410-0413).
//!
//! Every case asserts the host side: the tripwire marker ([`HostTarget::marker`]) never comes
//! to exist, no container exists for the workspace (`docker ps -a` by its label), and a
//! planted folder is neither changed nor mounted (`docker inspect`); and each grant, given
//! with its `--allow`, does what it asks and is reported. Where a planted configuration is
//! meant to run, a control (the same git without devcell) shows it does.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
use crate::support::git::{git, give_to_workspace_owner};
use crate::support::hostile::{HostTarget, HostileRepo, recorded_state};
use crate::support::{self, tree_fingerprint};

/// devcell's folders for one test (fake home, state, cache, the user config with agent `a`),
/// and the containers of the workspaces it ran on, removed on drop.
pub(super) struct Host {
    tmp: tempfile::TempDir,
    workspaces: std::cell::RefCell<Vec<PathBuf>>,
}

impl Host {
    /// Agent `a` runs `agent` (an argv); `allow` goes to `[security] allow`.
    pub(super) fn new(agent: &[&str], allow: &[&str]) -> Host {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let config = format!(
            "[security]\nallow = {}\n\n[agents.a]\ncommand = {}\n",
            serde_json::to_string(allow).unwrap(),
            serde_json::to_string(agent).unwrap()
        );
        std::fs::write(tmp.path().join("config.toml"), config).unwrap();
        Host {
            tmp,
            workspaces: Default::default(),
        }
    }

    /// `devcell <args>` with this host's folders.
    pub(super) fn run(&self, ws: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        if !self.workspaces.borrow().iter().any(|w| w == ws) {
            self.workspaces.borrow_mut().push(ws.to_path_buf());
        }
        support::devcell()
            .env("HOME", self.tmp.path().join("home"))
            .env("DEVCELL_STATE_DIR", self.tmp.path().join("state"))
            .env("XDG_CACHE_HOME", self.tmp.path().join("cache"))
            .envs(env.iter().copied())
            .args(args)
            .output()
            .expect("devcell runs")
    }

    /// devcell's state folder for this host (`DEVCELL_STATE_DIR`).
    pub(super) fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn config(&self) -> String {
        self.tmp.path().join("config.toml").display().to_string()
    }

    /// `up --workspace-folder <ws> <extra…>`.
    pub(super) fn up(&self, ws: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let mut args = vec![
            "up",
            "--workspace-folder",
            ws.to_str().unwrap(),
            "--config-file",
        ];
        let config = self.config();
        args.push(&config);
        args.extend_from_slice(extra);
        self.run(ws, &args, env)
    }

    /// `handoff --workspace-folder <ws> --agent a --format json <extra…>`.
    pub(super) fn handoff(&self, ws: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let config = self.config();
        let mut args = vec![
            "handoff",
            "--workspace-folder",
            ws.to_str().unwrap(),
            "--agent",
            "a",
            "--config-file",
            &config,
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        self.run(ws, &args, env)
    }

    /// `status --workspace-folder <ws> --format json`.
    pub(super) fn status(&self, ws: &Path) -> Output {
        let config = self.config();
        self.run(
            ws,
            &[
                "status",
                "--workspace-folder",
                ws.to_str().unwrap(),
                "--config-file",
                &config,
                "--format",
                "json",
            ],
            &[],
        )
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for ws in self.workspaces.borrow().iter() {
            let _ = self.run(
                ws,
                &["delete", "--workspace-folder", ws.to_str().unwrap()],
                &[],
            );
            for id in containers_of(ws) {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "-f", "-v", &id])
                    .bounded_output();
            }
        }
    }
}

pub(super) use crate::support::docker::{containers_of, mount_sources};
pub(super) use crate::support::envelope;

/// The requests of kind `kind` in a JSON list of permission requests.
fn of_kind<'a>(requests: &'a Value, kind: &str) -> Vec<&'a Value> {
    requests
        .as_array()
        .unwrap_or_else(|| panic!("a list of requests: {requests}"))
        .iter()
        .filter(|r| r["permission"] == kind)
        .collect()
}

/// A hostile repository with `initializeCommand` = `init` (JSON), committed.
fn repo_with_initialize_command(init: &str) -> HostileRepo {
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "updateRemoteUserUID": false, "initializeCommand": {init}}}"#
    ))
    .commit();
    repo
}

/// The four forms of `initializeCommand` that would create `marker`, with the argv text each
/// is shown as; the `${localEnv:…}` form needs `DEVCELL_HOSTILE_MARKER` set to the marker.
fn initialize_forms(marker: &Path) -> Vec<(&'static str, String, Vec<String>)> {
    let m = marker.display().to_string();
    vec![
        (
            "string",
            serde_json::to_string(&format!("touch {m}")).unwrap(),
            vec![format!("/bin/sh -c 'touch {m}'")],
        ),
        (
            "array",
            serde_json::to_string(&["touch", &m]).unwrap(),
            vec![format!("touch {m}")],
        ),
        (
            "object",
            serde_json::json!({"a": format!("touch {m}"), "b": ["touch", &m]}).to_string(),
            vec![format!("/bin/sh -c 'touch {m}'"), format!("touch {m}")],
        ),
        // named as written: a refusal never shows a host variable's value (spec-note 0440)
        (
            "localEnv",
            serde_json::to_string("touch ${localEnv:DEVCELL_HOSTILE_MARKER}").unwrap(),
            vec!["/bin/sh -c 'touch ${localEnv:DEVCELL_HOSTILE_MARKER}'".to_string()],
        ),
    ]
}

#[test]
fn initialize_command_is_refused_before_anything_happens() {
    if !engine_ready(
        "initialize_command_is_refused_before_anything_happens",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    let marker = target.marker();
    let env = [("DEVCELL_HOSTILE_MARKER", marker.to_str().unwrap())];
    let host = Host::new(&["true"], &[]);
    for (form, init, argvs) in initialize_forms(&marker) {
        let repo = repo_with_initialize_command(&init);
        let before = repo.fingerprint();

        let up = host.up(repo.path(), &[], &env);
        let text = String::from_utf8_lossy(&up.stdout);
        assert_eq!(up.status.code(), Some(1), "{form}: {text}");
        assert!(text.contains("--allow host-command"), "{form}: {text}");
        assert!(
            text.contains(&argvs[0]),
            "{form}: the argv is named: {text}"
        );

        let plan = host.handoff(repo.path(), &["--plan"], &env);
        let p = envelope(&plan);
        assert_eq!(plan.status.code(), Some(12), "{form}: {p}");
        assert_eq!(p["error"]["code"], "permission_required", "{form}");
        let listed = of_kind(&p["error"]["details"]["permissions"], "hostCommand");
        let values: Vec<&str> = listed.iter().filter_map(|r| r["value"].as_str()).collect();
        assert_eq!(values, argvs, "{form}: the exact argv of each command");
        for r in &listed {
            assert_eq!(r["status"], "refused", "{form}");
            assert!(
                r["grant"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("--allow host-command:sha256:"),
                "{form}: the grant is bound to the command: {r}"
            );
            assert_eq!(r["source"], "devcontainer.json", "{form}");
        }

        let real = host.handoff(repo.path(), &[], &env);
        let r = envelope(&real);
        assert_eq!(real.status.code(), Some(12), "{form}: {r}");
        assert_eq!(r["error"]["code"], "permission_required", "{form}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("--allow host-command"),
            "{form}: {r}"
        );

        target.assert_untouched();
        assert!(
            containers_of(repo.path()).is_empty(),
            "{form}: a container was created"
        );
        assert_eq!(repo.fingerprint(), before, "{form}: the repository changed");
        // the handoff stopped before devcell recorded anything
        let recorded = recorded_state(&host.tmp.path().join("state"));
        assert!(
            recorded.is_empty(),
            "{form}: a session was started: {recorded:?}"
        );
    }
}

#[test]
fn a_granted_initialize_command_runs_and_is_reported() {
    if !engine_ready(
        "a_granted_initialize_command_runs_and_is_reported",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    let marker = target.marker();
    let env = [("DEVCELL_HOSTILE_MARKER", marker.to_str().unwrap())];
    let host = Host::new(&["true"], &[]);
    let forms = initialize_forms(&marker);
    let (_, init, argvs) = &forms[3];
    let repo = repo_with_initialize_command(init);

    // up, granted on the command line: it runs, and the result says so
    let up = host.up(repo.path(), &["--allow", "host-command"], &env);
    let v = support::stdout_json(&up);
    assert!(marker.exists(), "the granted command did not run");
    let listed = of_kind(&v["devcell"]["permissions"], "hostCommand");
    assert_eq!(listed.len(), 1, "{v}");
    assert_eq!(listed[0]["value"], argvs[0].as_str());
    assert_eq!(listed[0]["status"], "granted");
    std::fs::remove_file(&marker).unwrap();

    // handoff --plan lists it granted; the handoff runs it and its envelope reports it
    let repo = repo_with_initialize_command(init);
    let plan = host.handoff(repo.path(), &["--plan", "--allow", "host-command"], &env);
    let p = envelope(&plan);
    assert_eq!(plan.status.code(), Some(0), "{p}");
    assert_eq!(
        of_kind(&p["result"]["permissions"], "hostCommand")[0]["status"],
        "granted"
    );
    assert!(!marker.exists(), "the plan ran the command");
    let real = host.handoff(repo.path(), &["--allow", "host-command"], &env);
    let r = envelope(&real);
    assert_eq!(real.status.code(), Some(0), "{r}");
    assert!(marker.exists(), "the granted handoff did not run it");
    let listed = of_kind(&r["result"]["permissions"], "hostCommand");
    assert_eq!(listed[0]["status"], "granted", "{r}");
    assert_eq!(listed[0]["value"], argvs[0].as_str());
    std::fs::remove_file(&marker).unwrap();

    // the user's config file grants it too (never the repository), bound to the command: the
    // grant the refusal names
    let fresh = repo_with_initialize_command(init);
    let plan = host.handoff(fresh.path(), &["--plan"], &env);
    let p = envelope(&plan);
    let grant = of_kind(&p["error"]["details"]["permissions"], "hostCommand")[0]["grant"]
        .as_str()
        .unwrap()
        .trim_start_matches("--allow ")
        .to_string();
    let by_config = Host::new(&["true"], &[grant.as_str()]);
    let up = by_config.up(fresh.path(), &[], &env);
    support::stdout_json(&up);
    assert!(marker.exists(), "granted in config.toml, it did not run");
    std::fs::remove_file(&marker).unwrap();

    // the command changed after the grant (by the repository, or an agent that wrote the
    // configuration): asked again, nothing runs, the new command's own grant named
    let changed = repo_with_initialize_command(
        &serde_json::to_string(&format!("touch {}; true", marker.display())).unwrap(),
    );
    let up = by_config.up(changed.path(), &[], &env);
    let text = String::from_utf8_lossy(&up.stdout);
    assert_eq!(up.status.code(), Some(1), "{text}");
    assert!(text.contains("--allow host-command:sha256:"), "{text}");
    assert!(
        !text.contains(&grant),
        "the old grant is not the new one's: {text}"
    );
    target.assert_untouched();
    assert!(
        !marker.exists(),
        "a changed command ran under the old grant"
    );

    // a bare standing grant would grant whatever comes next: refused, naming the bound form
    let bare = Host::new(&["true"], &["host-command"]);
    let up = bare.up(changed.path(), &[], &env);
    assert_ne!(up.status.code(), Some(0));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    assert!(all.contains("host-command:sha256:"), "{all}");
    assert!(!marker.exists(), "the bare standing grant ran it");

    // reference profile: the spec's behaviour, reported as allowed by the profile
    let reference = repo_with_initialize_command(init);
    let up = host.up(reference.path(), &["--security-profile", "reference"], &env);
    let v = support::stdout_json(&up);
    assert!(marker.exists(), "reference did not run initializeCommand");
    assert_eq!(
        of_kind(&v["devcell"]["permissions"], "hostCommand")[0]["status"],
        "allowedByProfile"
    );
}

/// One way a repository's git configuration runs a command: the config lines (`{m}`: the
/// marker), the files the repository commits for it, and the host git command that runs it
/// (the control).
struct Variant {
    name: &'static str,
    config: &'static str,
    committed: &'static [(&'static str, &'static str)],
    control: &'static [&'static str],
}

const VARIANTS: &[Variant] = &[
    Variant {
        name: "fsmonitor",
        config: "[core]\n\tfsmonitor = \"touch {m}; false\"\n",
        committed: &[],
        control: &["status", "--porcelain"],
    },
    Variant {
        name: "filter",
        config: "[filter \"x\"]\n\tclean = \"touch {m}; cat\"\n",
        committed: &[(".gitattributes", "*.txt filter=x\n")],
        control: &["diff"],
    },
    Variant {
        name: "textconv",
        config: "[diff \"x\"]\n\ttextconv = \"touch {m}; cat\"\n",
        committed: &[(".gitattributes", "*.txt diff=x\n")],
        control: &["diff"],
    },
    Variant {
        name: "hooks",
        config: "[core]\n\thooksPath = {hooks}\n",
        committed: &[],
        control: &["status", "--porcelain"],
    },
];

/// A hostile repository (a devcontainer.json, `a.txt`, the variant's committed files), plus a
/// planted git directory elsewhere on the host that holds a copy of the repository's own git
/// state and the variant's configuration (a `post-index-change` hook for `hooks`). `a.txt` is
/// changed after the commit, so git has something to re-read.
fn planted(
    variant: &Variant,
    marker: &Path,
    uid_update: bool,
) -> (HostileRepo, tempfile::TempDir, PathBuf) {
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "updateRemoteUserUID": {uid_update}}}"#
    ))
    .file("a.txt", "a\n")
    .file("b.txt", "b\n");
    for (rel, text) in variant.committed {
        repo.file(rel, text);
    }
    repo.commit();
    std::fs::write(repo.path().join("a.txt"), "changed\n").unwrap();
    // same content, older time: a status refreshes the index entry and writes the index
    let touched = std::process::Command::new("touch")
        .args(["-d", "2001-01-01"])
        .arg(repo.path().join("b.txt"))
        .status()
        .unwrap();
    assert!(touched.success());
    let dir = tempfile::Builder::new()
        .prefix("devcell-planted-")
        .tempdir()
        .unwrap();
    let planted = dir.path().join("git");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(repo.path().join(".git"))
        .arg(&planted)
        .status()
        .unwrap();
    assert!(status.success());
    let hooks = dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("post-index-change");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = variant
        .config
        .replace("{m}", &marker.display().to_string())
        .replace("{hooks}", &hooks.display().to_string());
    let mut text = std::fs::read_to_string(planted.join("config")).unwrap();
    text.push_str(&config);
    std::fs::write(planted.join("config"), text).unwrap();
    give_to_workspace_owner(dir.path());
    give_to_workspace_owner(repo.path());
    (repo, dir, planted)
}

/// The control: the variant's git command, run on the host without devcell, runs the planted
/// configuration (so the tests above could fail).
fn assert_control_runs(variant: &Variant, ws: &Path, target: &HostTarget) {
    let marker = target.marker();
    assert!(!marker.exists());
    git(ws, variant.control);
    assert!(
        marker.exists(),
        "{}: the control did not run the planted configuration",
        variant.name
    );
    std::fs::remove_file(&marker).unwrap();
}

#[test]
fn a_commondir_redirect_to_a_planted_git_dir_is_never_run_nor_mounted() {
    if !engine_ready(
        "a_commondir_redirect_to_a_planted_git_dir_is_never_run_nor_mounted",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let host = Host::new(&["true"], &[]);
    for variant in VARIANTS {
        let target = HostTarget::new();
        let (repo, dir, planted) = planted(variant, &target.marker(), false);
        // the redirection: the repository's own `.git` names the planted folder as its
        // common git directory
        std::fs::write(
            repo.path().join(".git/commondir"),
            format!("{}\n", planted.display()),
        )
        .unwrap();
        give_to_workspace_owner(&repo.path().join(".git/commondir"));
        let planted_before = tree_fingerprint(dir.path());
        let name = variant.name;
        let planted_text = std::fs::canonicalize(&planted).unwrap();
        let planted_text = planted_text.to_str().unwrap();

        let status = host.status(repo.path());
        let s = envelope(&status);
        assert_eq!(status.status.code(), Some(0), "{name}: {s}");
        let repo_state = &s["result"]["repos"][0];
        assert!(repo_state["head"].is_null(), "{name}: git ran: {s}");
        assert!(
            repo_state["error"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("--allow gitdir:{planted_text}")),
            "{name}: {s}"
        );

        let plan = host.handoff(repo.path(), &["--plan"], &[]);
        let p = envelope(&plan);
        assert_eq!(plan.status.code(), Some(12), "{name}: {p}");
        let listed = of_kind(&p["error"]["details"]["permissions"], "gitDir");
        assert_eq!(listed.len(), 1, "{name}: {p}");
        assert_eq!(listed[0]["value"], planted_text);
        assert_eq!(listed[0]["status"], "refused");
        assert_eq!(
            listed[0]["grant"],
            format!("--allow gitdir:{planted_text}").as_str()
        );

        let real = host.handoff(repo.path(), &[], &[]);
        let r = envelope(&real);
        assert_eq!(real.status.code(), Some(12), "{name}: {r}");
        assert_eq!(r["error"]["code"], "permission_required");

        target.assert_untouched();
        assert!(containers_of(repo.path()).is_empty(), "{name}: created");
        assert_eq!(tree_fingerprint(dir.path()), planted_before, "{name}");

        // the human's own git on the host would run it: the threat is real
        assert_control_runs(variant, repo.path(), &target);
    }
}

#[test]
fn a_worktree_link_to_a_planted_git_dir_is_untrusted_and_a_grant_still_runs_nothing() {
    if !engine_ready(
        "a_worktree_link_to_a_planted_git_dir_is_untrusted_and_a_grant_still_runs_nothing",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let host = Host::new(&["true"], &[]);
    for variant in &VARIANTS[..2] {
        let target = HostTarget::new();
        let (repo, dir, planted) = planted(variant, &target.marker(), false);
        // the repository's `.git` becomes a worktree link to the planted folder
        std::fs::remove_dir_all(repo.path().join(".git")).unwrap();
        std::fs::write(
            repo.path().join(".git"),
            format!("gitdir: {}\n", planted.display()),
        )
        .unwrap();
        give_to_workspace_owner(repo.path());
        let planted_before = tree_fingerprint(dir.path());
        let name = variant.name;
        let canonical = std::fs::canonicalize(&planted).unwrap();
        let grant = format!("gitdir:{}", canonical.display());

        let s = envelope(&host.status(repo.path()));
        assert!(s["result"]["repos"][0]["head"].is_null(), "{name}: {s}");
        let plan = host.handoff(repo.path(), &["--plan"], &[]);
        assert_eq!(plan.status.code(), Some(12), "{name}");
        let real = host.handoff(repo.path(), &[], &[]);
        assert_eq!(real.status.code(), Some(12), "{name}");
        assert!(containers_of(repo.path()).is_empty(), "{name}");
        target.assert_untouched();

        // granted in the user's config: git reads it (nothing it configures runs), the
        // handoff mounts it and reports the grant
        let granted = Host::new(&["true"], &[&grant]);
        let s = envelope(&granted.status(repo.path()));
        assert!(s["result"]["repos"][0]["head"].is_string(), "{name}: {s}");
        // the plan lists the granted git directory once: a `gitDir` request and a mount,
        // not also a `mount` request of its own mount
        let plan = envelope(&granted.handoff(repo.path(), &["--plan"], &[]));
        let p = &plan["result"];
        assert_eq!(of_kind(&p["permissions"], "gitDir").len(), 1, "{name}: {p}");
        assert!(
            of_kind(&p["permissions"], "mount")
                .iter()
                .all(|r| Path::new(r["value"].as_str().unwrap()) != canonical),
            "{name}: the git mount is listed twice: {p}"
        );
        assert!(
            // its objects, read-only: the container never sees a host git directory (0436)
            p["mounts"].as_array().unwrap().iter().any(|m| {
                std::fs::canonicalize(m["source"].as_str().unwrap())
                    .is_ok_and(|s| s.starts_with(&canonical))
            }),
            "{name}: {p}"
        );
        let real = granted.handoff(repo.path(), &[], &[]);
        let r = envelope(&real);
        assert_eq!(real.status.code(), Some(0), "{name}: {r}");
        let listed = of_kind(&r["result"]["permissions"], "gitDir");
        assert_eq!(listed[0]["status"], "granted", "{name}: {r}");
        let id = r["result"]["containerId"].as_str().unwrap().to_string();
        assert!(
            mount_sources(&id)
                .iter()
                .any(|m| Path::new(m) == canonical.join("objects")),
            "{name}: the granted git directory's objects are mounted"
        );
        let s = envelope(&granted.status(repo.path()));
        assert!(s["result"]["repos"][0]["head"].is_string(), "{name}: {s}");
        target.assert_untouched();
        drop(granted);
        // the planted folder changed only by git's own writes (index, logs), never by a
        // command it configures
        let _ = planted_before;

        assert_control_runs(variant, repo.path(), &target);
    }
}

/// The container writes a `commondir` redirection (and `config`, `info/`, a hook) into the
/// `.git` it sees: since spec-note 0436 that is its container git directory, so none of it
/// reaches the host's `.git`; devcell's next `status` and `handoff` read the repository as
/// before, and a human's git on the host runs nothing. The control plants the same
/// redirection on the host itself: a human's git would run it.
#[test]
fn a_redirection_the_container_writes_is_not_run_by_the_next_status() {
    if !engine_ready(
        "a_redirection_the_container_writes_is_not_run_by_the_next_status",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    let variant = &VARIANTS[0];
    let (repo, dir, planted) = planted(variant, &target.marker(), true);
    let host_git = repo.path().join(".git");
    let fingerprint = tree_fingerprint(&host_git.join("hooks"));
    let config = std::fs::read(host_git.join("config")).unwrap();
    let script = format!(
        "echo {p} > /workspace/.git/commondir; \
         for f in config info/exclude hooks/post-index-change; do \
           mkdir -p $(dirname /workspace/.git/$f); \
           if echo x >> /workspace/.git/$f 2>/dev/null; then echo \"wrote $f\"; fi; \
         done > /workspace/agent-wrote.txt; true",
        p = planted.display()
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    let real = host.handoff(repo.path(), &[], &[]);
    let r = envelope(&real);
    assert_eq!(real.status.code(), Some(0), "{r}");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("agent-wrote.txt")).unwrap(),
        "wrote config\nwrote info/exclude\nwrote hooks/post-index-change\n",
        "the container may write its own git directory"
    );
    assert!(
        !host_git.join("commondir").exists(),
        "no redirection on the host"
    );
    assert_eq!(std::fs::read(host_git.join("config")).unwrap(), config);
    assert_eq!(tree_fingerprint(&host_git.join("hooks")), fingerprint);
    let id = r["result"]["containerId"].as_str().unwrap().to_string();
    let canonical = std::fs::canonicalize(&planted).unwrap();
    assert!(
        !mount_sources(&id)
            .iter()
            .any(|m| Path::new(m).starts_with(dir.path()) || Path::new(m) == canonical),
        "the planted folder is not mounted"
    );

    // devcell's next status and handoff read the repository as before
    let status = host.status(repo.path());
    let s = envelope(&status);
    assert_eq!(status.status.code(), Some(0), "{s}");
    assert!(s["result"]["repos"][0]["head"].is_string(), "{s}");
    target.assert_untouched();
    let again = host.handoff(repo.path(), &[], &[]);
    assert_eq!(again.status.code(), Some(0), "{}", envelope(&again));
    target.assert_untouched();
    // and a human's git runs nothing
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--porcelain"])
        .current_dir(repo.path())
        .output();
    target.assert_untouched();

    // the control: the same redirection written on the host is run by a human's git
    std::fs::write(
        host_git.join("commondir"),
        format!("{}\n", planted.display()),
    )
    .unwrap();
    assert_control_runs(variant, repo.path(), &target);
}

/// The handoff mounts each repository's git `config` and `hooks` read-only (spec-note 0413),
/// but the repository's own `mounts` may bind the workspace (or its `.git`) a second time: the
/// agent then wrote `core.fsmonitor` into the host's `.git/config` through that bind, and a
/// human's next `git status` on the host ran it. The read-only overlays now cover every other
/// bind of the folders holding them.
#[test]
fn a_second_bind_of_the_workspace_does_not_make_its_git_config_writable() {
    if !engine_ready(
        "a_second_bind_of_the_workspace_does_not_make_its_git_config_writable",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    let repo = HostileRepo::new();
    repo.config(&format!(
        r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "updateRemoteUserUID": true,
            "mounts": ["type=bind,source=${{localWorkspaceFolder}},target=/ws2",
                       "type=bind,source=${{localWorkspaceFolder}}/.git,target=/gitrw"]}}"#
    ))
    .commit();
    let config = repo.path().join(".git/config");
    let before = std::fs::read(&config).unwrap();
    let hooks = tree_fingerprint(&repo.path().join(".git/hooks"));
    let script = format!(
        "for f in /ws2/.git/config /gitrw/config; do \
           printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> $f 2>/dev/null && echo \"wrote $f\"; \
         done; \
         echo x > /gitrw/hooks/post-index-change 2>/dev/null && echo wrote-hook; \
         echo reached > /ws2/reached.txt; true",
        m = target.marker().display()
    );
    let host = Host::new(&["sh", "-c", &script], &[]);
    let out = host.handoff(repo.path(), &[], &[]);
    let r = envelope(&out);
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("reached.txt")).unwrap(),
        "reached\n",
        "the second bind is there and writable"
    );
    assert_eq!(
        std::fs::read(&config).unwrap(),
        before,
        "the host's .git/config is unchanged"
    );
    assert_eq!(
        tree_fingerprint(&repo.path().join(".git/hooks")),
        hooks,
        "no hook planted"
    );
    // and a human's git on the host runs nothing
    let _ = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "status", "--porcelain"])
        .current_dir(repo.path())
        .output();
    target.assert_untouched();
}

/// A repository asking for three kinds of things at once: a host variable
/// (`${localEnv:DEVCELL_HOSTILE_TOKEN}`), a host command (`initializeCommand` creating
/// `marker`) and a bind of `target` (a container request): one refusal lists all three before
/// anything runs, and one `--allow` list grants them all (spec-note 0400).
#[test]
fn every_request_is_judged_at_once_before_anything_runs() {
    let Some(repo) = HostileRepo::busybox("every_request_is_judged_at_once_before_anything_runs")
    else {
        return;
    };
    let target = HostTarget::new();
    let marker = target.marker();
    let source = target.path().canonicalize().unwrap();
    let env = [("DEVCELL_HOSTILE_TOKEN", HostTarget::SECRET)];
    let host = Host::new(&["true"], &[]);
    repo.config(
        &serde_json::json!({
            "image": BUSYBOX_IMAGE,
            "remoteUser": "nobody",
            "updateRemoteUserUID": false,
            "initializeCommand": ["touch", marker.to_str().unwrap()],
            "containerEnv": {"TOKEN": "${localEnv:DEVCELL_HOSTILE_TOKEN}"},
            "mounts": [format!("type=bind,source={},target=/host,readonly", source.display())],
        })
        .to_string(),
    )
    .commit();
    let kinds = ["hostEnv", "hostCommand", "mount"];
    let grants = [
        "env:DEVCELL_HOSTILE_TOKEN".to_string(),
        "host-command".to_string(),
        format!("mount:{}", source.display()),
    ];
    let nothing_happened = |what: &str| {
        target.assert_untouched();
        assert!(
            containers_of(repo.path()).is_empty(),
            "{what}: a container was created"
        );
        let recorded = recorded_state(&host.tmp.path().join("state"));
        assert!(
            recorded.is_empty(),
            "{what}: devcell recorded something: {recorded:?}"
        );
    };

    let up = host.up(repo.path(), &[], &env);
    let text = String::from_utf8_lossy(&up.stdout);
    assert_eq!(up.status.code(), Some(1), "{text}");
    for grant in &grants {
        assert!(
            text.contains(&format!("--allow {grant}")),
            "up names `{grant}`: {text}"
        );
    }
    nothing_happened("up");

    for (what, extra) in [("plan", &["--plan"][..]), ("handoff", &[][..])] {
        let out = host.handoff(repo.path(), extra, &env);
        let v = envelope(&out);
        assert_eq!(out.status.code(), Some(12), "{what}: {v}");
        assert_eq!(v["error"]["code"], "permission_required", "{what}");
        let listed = &v["error"]["details"]["permissions"];
        for kind in kinds {
            let of = of_kind(listed, kind);
            assert_eq!(of.len(), 1, "{what}: one `{kind}` request: {v}");
            assert_eq!(of[0]["status"], "refused", "{what}: {v}");
        }
        nothing_happened(what);
    }

    // one list grants them all: the command runs, and the result reports each as granted
    let mut args = Vec::new();
    for grant in &grants {
        args.extend(["--allow", grant.as_str()]);
    }
    let plan = host.handoff(repo.path(), &[&["--plan"][..], &args].concat(), &env);
    let p = envelope(&plan);
    assert_eq!(plan.status.code(), Some(0), "{p}");
    assert!(!marker.exists(), "the plan ran the command");
    let up = host.up(repo.path(), &args, &env);
    let v = support::stdout_json(&up);
    assert!(marker.exists(), "the granted command did not run");
    for kind in kinds {
        let of = of_kind(&v["devcell"]["permissions"], kind);
        assert!(
            !of.is_empty() && of.iter().all(|r| r["status"] == "granted"),
            "`{kind}` granted: {v}"
        );
    }
    std::fs::remove_file(&marker).unwrap();
}

/// A container that would be reused: a host-variable refusal (the configuration changed since
/// the container was made) lists the reuse re-check's requests too, in one refusal, so one
/// `--allow` list is enough; nothing runs in the container (spec-notes 0270, 0400).
#[test]
fn a_refusal_before_a_reuse_lists_the_reuse_recheck_too() {
    let Some(repo) = HostileRepo::busybox("a_refusal_before_a_reuse_lists_the_reuse_recheck_too")
    else {
        return;
    };
    let target = HostTarget::new();
    let source = target.path().canonicalize().unwrap();
    let mount = format!("mount:{}", source.display());
    let env = [("DEVCELL_HOSTILE_TOKEN", HostTarget::SECRET)];
    let host = Host::new(&["true"], &[]);
    let config = |extra: serde_json::Value| {
        let mut c = serde_json::json!({
            "image": BUSYBOX_IMAGE,
            "remoteUser": "nobody",
            "updateRemoteUserUID": false,
            "mounts": [format!("type=bind,source={},target=/granted,readonly", source.display())],
        });
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c.to_string()
    };
    repo.config(&config(serde_json::json!({}))).commit();
    let first = host.handoff(repo.path(), &["--allow", &mount], &env);
    assert_eq!(first.status.code(), Some(0), "{}", envelope(&first));
    let created = containers_of(repo.path());
    assert_eq!(created.len(), 1);
    let marker = target.marker();
    repo.config(&config(serde_json::json!({
        "remoteEnv": {"STOLEN": "${localEnv:DEVCELL_HOSTILE_TOKEN}"},
        "postAttachCommand": ["touch", "/granted/never"],
        "initializeCommand": ["touch", marker.to_str().unwrap()],
    })))
    .commit();
    let out = host.handoff(repo.path(), &["--allow", &mount], &env);
    let v = envelope(&out);
    assert_eq!(out.status.code(), Some(12), "{v}");
    let listed = &v["error"]["details"]["permissions"];
    for kind in ["hostEnv", "hostCommand"] {
        assert_eq!(of_kind(listed, kind)[0]["status"], "refused", "{kind}: {v}");
    }
    let reused = of_kind(listed, "mount");
    assert!(
        reused.iter().any(|r| r["status"] == "granted"
            && Path::new(r["value"].as_str().unwrap()) == source
            && r["source"]
                .as_str()
                .unwrap()
                .starts_with("existing container")),
        "the reused container's granted mount is listed with the refusal: {v}"
    );
    assert!(!v.to_string().contains(HostTarget::SECRET), "{v}");
    assert_eq!(
        containers_of(repo.path()),
        created,
        "the container is kept as it was"
    );
    target.assert_untouched();
}

/// Attack 24, O7: a standing grant of `initializeCommand: "sh scripts/init.sh"` pinned the
/// script, whose text then ran `scripts/helper.sh`: the agent rewrote the helper and the next
/// `up` ran it on the host, nothing asked. Now a script's text is judged: a helper it sources
/// makes the command a one-run grant that no config grant covers, and so does one it runs by
/// name (attack 25, P1: the script's copy opens the workspace's helper, which a container can
/// swap after the judgement). Nothing the rewritten helper does happens on the host.
#[test]
fn a_helper_a_granted_script_runs_is_pinned_or_the_grant_is_one_run() {
    if !engine_ready(
        "a_helper_a_granted_script_runs_is_pinned_or_the_grant_is_one_run",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let target = HostTarget::new();
    let marker = target.marker();
    let init = r#""sh scripts/init.sh""#;
    let pwned = format!("touch {}\n", marker.display());
    for (script, why) in [
        (
            "#!/bin/sh\necho init-ok\nsh scripts/helper.sh\n",
            "runs or reads `scripts/helper.sh`",
        ),
        ("#!/bin/sh\necho init-ok\n. ./scripts/helper.sh\n", "`.`"),
    ] {
        let repo = HostileRepo::new();
        repo.file("scripts/init.sh", script)
            .file("scripts/helper.sh", "echo helper-ok\n")
            .config(&format!(
                r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "updateRemoteUserUID": false, "initializeCommand": {init}}}"#
            ))
            .commit();
        let host = Host::new(&["true"], &[]);
        let plan = host.handoff(repo.path(), &["--plan"], &[]);
        let p = envelope(&plan);
        let request = of_kind(&p["error"]["details"]["permissions"], "hostCommand")[0].clone();
        let grant = request["grant"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches("--allow ")
            .to_string();
        let uncovered = request["uncovered"].to_string();
        assert!(uncovered.contains(why), "{script}: {request}");
        // the grant the refusal names, kept in the user's config as a standing grant
        let by_config = Host::new(&["true"], &[grant.as_str()]);
        let up = by_config.up(repo.path(), &[], &[]);
        let first = String::from_utf8_lossy(&up.stdout).to_string();
        assert_ne!(up.status.code(), Some(0), "{script}: {first}");
        // the agent rewrites the helper; the next `up` with the same grant runs nothing
        std::fs::write(repo.path().join("scripts/helper.sh"), &pwned).unwrap();
        let up = by_config.up(repo.path(), &[], &[]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&up.stdout),
            String::from_utf8_lossy(&up.stderr)
        );
        assert_ne!(up.status.code(), Some(0), "{script}: {text}");
        assert!(text.contains("host-command"), "{script}: {text}");
        assert!(
            !marker.exists(),
            "{script}: the rewritten helper ran on the host under the grant"
        );
    }
    target.assert_untouched();
}
