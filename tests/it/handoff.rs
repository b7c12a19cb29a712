//! Handoff building blocks against real git repositories and worktrees (host-side, as Grove
//! creates them): workspace inspection, git directory mounts, the context file and its JSON
//! Schema, the generated `AGENTS.md`.
//!
//! git runs with a fixed identity through `-c` flags and an isolated environment; the user's
//! global git config is never read or written.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;
use crate::support::git::{git, hostgit_image};

use devcell::handoff::agents_md::{self, AgentsMdOutcome};
use devcell::handoff::context::{
    self, AgentInfo, ContextInputs, FeatureInfo, HandoffContext, HookResult, ImageInfo,
    SecurityInfo, Task,
};
use devcell::handoff::repository::{
    self, InspectOptions, Layout, MountPurpose, RepoKind, RepoRole, Workspace, WorkspaceError,
    WorkspaceMount,
};

/// A main repository at `dir` with one commit (and a `.devcontainer` when asked).
fn main_repo(dir: &Path, devcontainer: bool) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("README.md"), "hello\n").unwrap();
    if devcontainer {
        std::fs::create_dir(dir.join(".devcontainer")).unwrap();
        std::fs::write(
            dir.join(".devcontainer/devcontainer.json"),
            "{\"image\": \"devcell-test/busybox:1\"}\n",
        )
        .unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
}

/// A Grove-style workspace: main repos under `<tmp>/src/{api,web}`, worktrees on branch
/// `feat/x` under `<tmp>/ws/{api,web}`. Returns (tmp, ws root).
fn grove_workspace() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    main_repo(&src.join("api"), true);
    main_repo(&src.join("web"), false);
    for name in ["api", "web"] {
        let target = ws.join(name);
        git(
            &src.join(name),
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "feat/x",
                target.to_str().unwrap(),
            ],
        );
    }
    (tmp, ws)
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn grove_worktrees_are_a_multi_repo_workspace_with_their_git_dirs_mounted() {
    let (tmp, ws) = grove_workspace();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    assert_eq!(w.layout, Layout::MultiRepository);
    assert_eq!(w.root, canonical(&ws));
    assert_eq!(w.name, "ws");
    assert_eq!(w.container_root, "/workspace");
    let names: Vec<_> = w.repos.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["api", "web"]);

    let api = &w.repos[0];
    assert_eq!(api.role, RepoRole::Primary, "api holds the .devcontainer");
    assert_eq!(api.kind, RepoKind::Worktree);
    assert_eq!(api.container_path, "/workspace/api");
    assert_eq!(api.host_path, canonical(&ws.join("api")));
    assert_eq!(api.branch.as_deref(), Some("feat/x"));
    assert_eq!(
        api.head.as_deref(),
        Some(git(&ws.join("api"), &["rev-parse", "HEAD"]).as_str())
    );
    assert!(!api.dirty);
    assert_eq!(api.upstream, None);
    assert_eq!((api.ahead, api.behind), (None, None));
    let api_git = canonical(&tmp.path().join("src/api/.git"));
    assert_eq!(api.common_dir, api_git);
    assert_eq!(api.git_dir, api_git.join("worktrees/api"));
    assert_eq!(w.repos[1].role, RepoRole::Secondary);
    assert_eq!(w.config_folder.as_deref(), Some(api.host_path.as_path()));
    assert_eq!(w.branch(), Some("feat/x"));

    // exactly the two main git dirs, at their host paths; the worktree dirs fold into them
    let mounts: Vec<_> = w
        .git_mounts
        .iter()
        .map(|m| {
            (
                m.host_path.clone(),
                m.container_path.clone(),
                m.repos.clone(),
            )
        })
        .collect();
    let web_git = canonical(&tmp.path().join("src/web/.git"));
    assert_eq!(
        mounts,
        vec![
            (
                api_git.clone(),
                api_git.to_string_lossy().into_owned(),
                vec!["api".to_string()]
            ),
            (
                web_git.clone(),
                web_git.to_string_lossy().into_owned(),
                vec!["web".to_string()]
            ),
        ]
    );
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);

    // the whole mount list: the root at /workspace, the two git dirs, and read-only overlays of
    // their config, hooks and info, and of each worktree's commondir and gitdir links; nothing
    // else (spec-notes 0165, 0413)
    let all = w.mounts();
    assert_eq!(all.len(), 13, "{all:#?}");
    assert_eq!(all[0].source, w.root);
    assert_eq!(all[0].target, "/workspace");
    assert_eq!(all[0].purpose, MountPurpose::Workspace);
    assert!(all[..3].iter().all(|m| !m.read_only));
    assert!(
        all[1..3]
            .iter()
            .all(|m| m.purpose == MountPurpose::Git && m.target == m.source.to_string_lossy())
    );
    let protected: Vec<_> = all[3..]
        .iter()
        .map(|m| {
            assert!(m.read_only && m.purpose == MountPurpose::GitProtected);
            assert_eq!(m.target, m.source.to_string_lossy());
            m.source.clone()
        })
        .collect();
    assert_eq!(
        protected,
        [
            api_git.join("config"),
            api_git.join("hooks"),
            api_git.join("info"),
            api_git.join("worktrees/api/commondir"),
            api_git.join("worktrees/api/gitdir"),
            web_git.join("config"),
            web_git.join("hooks"),
            web_git.join("info"),
            web_git.join("worktrees/web/commondir"),
            web_git.join("worktrees/web/gitdir"),
        ]
    );
    assert_eq!(w.safe_directories(), ["/workspace/api", "/workspace/web"]);

    // an uncommitted file makes the repo dirty; git state is read without writing
    std::fs::write(ws.join("web/new.txt"), "x").unwrap();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    assert!(w.repos[1].dirty);
    assert!(!w.repos[0].dirty);
}

#[test]
fn primary_flag_and_container_root_are_honoured() {
    let (_tmp, ws) = grove_workspace();
    let options = InspectOptions {
        container_root: "/work/".into(),
        primary: Some("web".into()),
        ..Default::default()
    };
    let w = repository::inspect(&ws, &options).unwrap();
    assert_eq!(w.repos[0].name, "web");
    assert_eq!(w.repos[0].role, RepoRole::Primary);
    assert_eq!(w.repos[0].container_path, "/work/web");
    assert_eq!(w.repos[1].role, RepoRole::Secondary);
    // web has no .devcontainer and the root neither: no config folder
    assert_eq!(w.config_folder, None);

    let err = repository::inspect(
        &ws,
        &InspectOptions {
            primary: Some("nope".into()),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::UnknownPrimary { .. }),
        "{err}"
    );
    assert_eq!(err.hint().as_deref(), Some("pass one of: api, web"));
}

#[test]
fn a_root_devcontainer_is_the_config_folder() {
    let (_tmp, ws) = grove_workspace();
    std::fs::create_dir(ws.join(".devcontainer")).unwrap();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    // api's own config still wins for the primary repo; without --primary api is primary
    assert_eq!(w.config_folder, Some(canonical(&ws.join("api"))));
    let w = repository::inspect(
        &ws,
        &InspectOptions {
            primary: Some("web".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(w.config_folder, Some(canonical(&ws)));
}

#[test]
fn ahead_and_behind_are_counted_against_the_upstream() {
    let tmp = tempfile::tempdir().unwrap();
    let main = tmp.path().join("src/api");
    main_repo(&main, false);
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let wt = ws.join("api");
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "--track",
            "-b",
            "feat/y",
            wt.to_str().unwrap(),
            "main",
        ],
    );
    git(&wt, &["commit", "-q", "--allow-empty", "-m", "mine 1"]);
    git(&wt, &["commit", "-q", "--allow-empty", "-m", "mine 2"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "theirs"]);
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let r = &w.repos[0];
    assert_eq!(r.role, RepoRole::Primary, "the only repo is primary");
    assert_eq!(r.upstream.as_deref(), Some("main"));
    assert_eq!((r.ahead, r.behind), (Some(2), Some(1)));
}

#[test]
fn a_single_repository_root_needs_no_mounts() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("proj");
    main_repo(&repo, true);
    let w = repository::inspect(&repo, &InspectOptions::default()).unwrap();
    assert_eq!(w.layout, Layout::Repository);
    assert_eq!(w.repos.len(), 1);
    assert_eq!(w.repos[0].name, "proj");
    assert_eq!(w.repos[0].container_path, "/workspace");
    assert_eq!(w.repos[0].kind, RepoKind::Repository);
    assert_eq!(w.repos[0].role, RepoRole::Primary);
    assert!(w.git_mounts.is_empty());
    assert_eq!(w.config_folder, Some(canonical(&repo)));
    let overlays: Vec<_> = w
        .protected
        .iter()
        .map(|m| m.container_path.as_str())
        .collect();
    assert_eq!(
        overlays,
        [
            "/workspace/.git/config",
            "/workspace/.git/hooks",
            "/workspace/.git/info"
        ]
    );

    // the context file inside the user's repository does not show up as a change
    let ctx = full_context(&w);
    assert_eq!(ctx.repos[0].path, "/workspace");
    context::write(&w.root, ".devcell/context.json", &ctx).unwrap();
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    let w = repository::inspect(&repo, &InspectOptions::default()).unwrap();
    assert!(!w.repos[0].dirty);
    // and no AGENTS.md is generated inside it
    assert_eq!(
        agents_md::write_if_absent(&w.root, &ctx).unwrap(),
        AgentsMdOutcome::SingleRepository
    );

    // detached HEAD: no branch
    git(&repo, &["checkout", "-q", "--detach"]);
    let w = repository::inspect(&repo, &InspectOptions::default()).unwrap();
    assert_eq!(w.repos[0].branch, None);
    assert!(w.repos[0].head.is_some());
}

#[test]
fn unborn_repositories_hidden_folders_and_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("empty")).unwrap();
    git(&ws.join("empty"), &["init", "-q"]);
    std::fs::create_dir_all(ws.join(".hidden")).unwrap();
    git(&ws.join(".hidden"), &["init", "-q"]);
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    main_repo(&tmp.path().join("elsewhere"), false);
    std::os::unix::fs::symlink(tmp.path().join("elsewhere"), ws.join("linked")).unwrap();

    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    assert_eq!(w.layout, Layout::MultiRepository);
    let names: Vec<_> = w.repos.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["empty"]);
    assert_eq!(w.repos[0].head, None, "no commits yet");
    assert_eq!(w.repos[0].branch.as_deref(), Some("main"));
    assert!(
        w.git_mounts.is_empty(),
        "a repo inside the root needs no mount"
    );
    assert_eq!(w.warnings.len(), 1, "{:?}", w.warnings);
    assert_eq!(w.warnings[0].code, "symlink_skipped");

    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let w = repository::inspect(&plain, &InspectOptions::default()).unwrap();
    assert_eq!(w.layout, Layout::Plain);
    assert!(w.repos.is_empty());

    let err =
        repository::inspect(&tmp.path().join("missing"), &InspectOptions::default()).unwrap_err();
    assert!(matches!(err, WorkspaceError::Root { .. }), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn a_relative_gitdir_link_is_mounted_where_it_resolves_in_the_container() {
    let (tmp, ws) = grove_workspace();
    // rewrite api's absolute `gitdir:` as a relative one (as `worktree.useRelativePaths` does)
    std::fs::write(
        ws.join("api/.git"),
        "gitdir: ../../src/api/.git/worktrees/api\n",
    )
    .unwrap();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let api_git = canonical(&tmp.path().join("src/api/.git"));
    let api_mount = w
        .git_mounts
        .iter()
        .find(|m| m.repos == ["api"])
        .expect("api has a mount");
    assert_eq!(api_mount.host_path, api_git);
    // /workspace/api/../../src/api/.git/worktrees/api → common dir two levels up
    assert_eq!(api_mount.container_path, "/src/api/.git");
    assert_eq!(w.git_mounts.len(), 2);
}

#[test]
fn a_broken_git_file_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("api")).unwrap();
    std::fs::write(ws.join("api/.git"), "nonsense\n").unwrap();
    let err = repository::inspect(&ws, &InspectOptions::default()).unwrap_err();
    assert!(matches!(err, WorkspaceError::BadGitLink { .. }), "{err}");
    assert!(err.to_string().contains("gitdir:"), "{err}");
}

#[test]
fn a_worktree_whose_main_repository_vanished_says_so() {
    let (tmp, ws) = grove_workspace();
    std::fs::rename(tmp.path().join("src/web"), tmp.path().join("src/web-moved")).unwrap();
    let err = repository::inspect(&ws, &InspectOptions::default()).unwrap_err();
    assert!(matches!(err, WorkspaceError::BadGitLink { .. }), "{err}");
    assert!(err.to_string().contains("git worktree repair"), "{err}");
    // nothing in the workspace was touched
    assert!(ws.join("web/README.md").is_file());
    assert!(ws.join("api/.git").is_file());
}

fn full_context(w: &Workspace) -> HandoffContext {
    HandoffContext::new(
        w,
        ContextInputs {
            task: Task::new(
                Some("https://github.com/acme/api/pull/123".into()),
                Some("Add partial refunds".into()),
            ),
            verification: vec!["cargo test".into(), "npm test".into()],
            security: SecurityInfo {
                profile: "hardened".into(),
                permissions: vec!["cap:SYS_PTRACE".into()],
                network: "default".into(),
                ..Default::default()
            },
            secrets: vec!["OPENAI_API_KEY".into()],
            env: vec!["RUST_LOG".into()],
            image: ImageInfo {
                reference: "devcell-test/busybox:1".into(),
                digest: Some(format!("sha256:{}", "a".repeat(64))),
                features: vec![
                    FeatureInfo {
                        id: "ghcr.io/devcontainers/features/node:1".into(),
                        digest: Some(format!("sha256:{}", "b".repeat(64))),
                    },
                    FeatureInfo {
                        id: "./local-feature".into(),
                        digest: None,
                    },
                ],
            },
            hooks: vec![
                HookResult {
                    hook: "postCreateCommand".into(),
                    source: "devcontainer.json".into(),
                    entry: Some("deps".into()),
                    exit_code: Some(0),
                    duration_ms: 812,
                    skipped: None,
                },
                HookResult {
                    hook: "postAttachCommand".into(),
                    source: String::new(),
                    entry: None,
                    exit_code: None,
                    duration_ms: 0,
                    skipped: Some("--skip-post-attach".into()),
                },
            ],
            agent: AgentInfo {
                name: "reference".into(),
                command: vec!["/workspace/agent.sh".into(), "--fast".into()],
            },
            context_path: ".devcell/context.json".into(),
            ..Default::default()
        },
    )
}

fn schema() -> serde_json::Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/context.schema.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn schema_errors(instance: &serde_json::Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&schema()).expect("the schema is valid");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn a_written_context_validates_against_the_published_schema() {
    let (_tmp, ws) = grove_workspace();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let ctx = full_context(&w);
    let path = context::write(&w.root, ".devcell/context.json", &ctx).unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(schema_errors(&written), Vec::<String>::new());
    assert_eq!(written["schemaVersion"], 1);
    assert_eq!(written["repos"][0]["name"], "api");
    assert_eq!(written["repos"][0]["role"], "primary");
    assert_eq!(written["repos"][1]["path"], "/workspace/web");
    assert_eq!(
        written["repos"][0]["baseCommit"],
        git(&ws.join("api"), &["rev-parse", "HEAD"])
    );
    assert_eq!(written["workspace"]["branch"], "feat/x");
    assert_eq!(written["contextPath"], "/workspace/.devcell/context.json");
    // names only: no value of any variable appears
    assert_eq!(written["secrets"], serde_json::json!(["OPENAI_API_KEY"]));

    // the workspace's repos do not see the context file as a change
    let w2 = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    assert!(w2.repos.iter().all(|r| !r.dirty));

    // a minimal context (no task, no hooks, no digests) validates too
    let mut minimal = ctx.clone();
    minimal.task = Task::default();
    minimal.hooks.clear();
    minimal.image.digest = None;
    minimal.image.features.clear();
    let v = serde_json::to_value(&minimal).unwrap();
    assert_eq!(schema_errors(&v), Vec::<String>::new());
}

#[test]
fn the_schema_rejects_drift_in_either_direction() {
    let (_tmp, ws) = grove_workspace();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let good = serde_json::to_value(full_context(&w)).unwrap();

    let mut extra = good.clone();
    extra["surprise"] = serde_json::json!(true);
    assert!(
        !schema_errors(&extra).is_empty(),
        "unknown keys are rejected"
    );

    let mut missing = good.clone();
    missing["repos"][0]
        .as_object_mut()
        .unwrap()
        .remove("baseCommit");
    assert!(
        !schema_errors(&missing).is_empty(),
        "missing keys are rejected"
    );

    let mut version = good.clone();
    version["schemaVersion"] = serde_json::json!(2);
    assert!(!schema_errors(&version).is_empty());

    let mut role = good;
    role["repos"][1]["role"] = serde_json::json!("related");
    assert!(!schema_errors(&role).is_empty());
}

#[test]
fn agents_md_is_generated_once_and_user_content_survives() {
    let (_tmp, ws) = grove_workspace();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let ctx = full_context(&w);
    let out = agents_md::write_if_absent(&w.root, &ctx).unwrap();
    let path = w.root.join("AGENTS.md");
    assert_eq!(out, AgentsMdOutcome::Created(path.clone()));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("| api | `/workspace/api` | primary |"),
        "{text}"
    );
    assert!(
        text.contains("`/workspace/.devcell/context.json`"),
        "{text}"
    );

    std::fs::write(&path, "# Our own rules\n").unwrap();
    let out = agents_md::write_if_absent(&w.root, &ctx).unwrap();
    assert_eq!(out, AgentsMdOutcome::Exists(path.clone()));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Our own rules\n");
}

fn envelope_errors(instance: &serde_json::Value) -> Vec<String> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/envelope.schema.json"),
    )
    .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema is valid");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn envelopes_validate_against_the_published_schema() {
    use devcell::handoff::envelope::{Envelope, ErrorBody, ErrorCode, NextAction};
    let ok = Envelope::success(serde_json::json!({"containerId": "abc"}))
        .with_warning("stale_session", "an older session was abandoned");
    let ok = serde_json::to_value(&ok).unwrap();
    assert_eq!(envelope_errors(&ok), Vec::<String>::new());

    for code in ErrorCode::ALL {
        let failed: Envelope<()> = Envelope::failure(
            ErrorBody::new(code, "it failed").with_details(serde_json::json!({"x": 1})),
        )
        .with_next_action(NextAction::command("retry", ["devcell", "status"]))
        .with_next_action(NextAction::manual("edit the config"));
        let v = serde_json::to_value(&failed).unwrap();
        assert_eq!(envelope_errors(&v), Vec::<String>::new(), "{code}");
    }

    // the schema is not vacuous: both result and error, or an unknown code, are rejected
    let mut both = ok.clone();
    both["error"] = serde_json::json!({"code": "internal", "message": "m", "details": {}});
    assert!(!envelope_errors(&both).is_empty());
    let mut unknown = both.clone();
    unknown.as_object_mut().unwrap().remove("result");
    unknown["ok"] = serde_json::json!(false);
    assert_eq!(envelope_errors(&unknown), Vec::<String>::new());
    unknown["error"]["code"] = serde_json::json!("oops");
    assert!(!envelope_errors(&unknown).is_empty());
    let mut shell = ok;
    shell["next_actions"] = serde_json::json!([{"description": "d", "command": "devcell status"}]);
    assert!(
        !envelope_errors(&shell).is_empty(),
        "shell strings are rejected"
    );
}

/// Starts a container of `image` with exactly `mounts` (source:target, read-write) and nothing
/// else of the host.
fn container_with(image: &str, mounts: &[WorkspaceMount]) -> support::docker::TestContainer {
    let mut cmd = Command::new("docker");
    cmd.args(["run", "-d", "--rm", "--label", "devcell.test=1"]);
    for m in mounts {
        cmd.arg("--mount").arg(m.to_mount_string());
    }
    let out = cmd
        .args([image, "sleep", "600"])
        .bounded_output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "docker run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    support::docker::TestContainer {
        id: String::from_utf8_lossy(&out.stdout).trim().to_string(),
    }
}

/// Git works in each repository of `w` inside `c`, on the branch named with it.
fn assert_branches(c: &support::docker::TestContainer, w: &Workspace, branches: &[(&str, &str)]) {
    for (repo, branch) in branches {
        let out = container_git(c, w, repo, "rev-parse --abbrev-ref HEAD");
        assert!(
            out.status.success(),
            "git in {repo}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), *branch);
    }
}

fn container_git(
    c: &support::docker::TestContainer,
    w: &Workspace,
    repo: &str,
    args: &str,
) -> Output {
    let mut safe = String::new();
    for dir in w.safe_directories() {
        safe.push_str(&format!(" -c safe.directory={dir}"));
    }
    Command::new("docker")
        .args([
            "exec",
            "-w",
            &format!("/workspace/{repo}"),
            &c.id,
            "sh",
            "-c",
        ])
        .arg(format!(
            "git --no-pager -c user.name=agent -c user.email=agent@devcell.invalid{safe} {args}"
        ))
        .bounded_output()
        .expect("docker runs")
}

#[test]
fn git_works_in_a_container_that_mounts_only_the_workspace_and_its_git_dirs() {
    let test = "git_works_in_a_container_that_mounts_only_the_workspace_and_its_git_dirs";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let image = hostgit_image();
    let (tmp, ws) = grove_workspace();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let mounts = w.mounts();
    assert_eq!(
        mounts.len(),
        13,
        "root, two git dirs, ten overlays: {mounts:?}"
    );

    // control: with the workspace alone, git in a worktree cannot find its repository
    let bare = container_with(image, &mounts[..1]);
    let out = container_git(&bare, &w, "api", "status");
    assert!(!out.status.success(), "git must fail without the git dirs");
    drop(bare);

    let c = container_with(image, &mounts);
    for repo in ["api", "web"] {
        let out = container_git(&c, &w, repo, "status --porcelain");
        assert!(
            out.status.success(),
            "git status in {repo}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        c.sh(&format!(
            "echo 'from the agent' > /workspace/{repo}/agent.txt"
        ));
        let out = container_git(
            &c,
            &w,
            repo,
            "add agent.txt && git --no-pager -c user.name=agent -c user.email=agent@devcell.invalid commit -q -m 'agent change'",
        );
        assert!(
            out.status.success(),
            "git commit in {repo}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = container_git(&c, &w, repo, "diff HEAD~1 --stat");
        assert!(String::from_utf8_lossy(&out.stdout).contains("agent.txt"));
    }
    // the agent cannot change what git on the host runs: config and hooks are read-only
    for repo in ["api", "web"] {
        let out = container_git(
            &c,
            &w,
            repo,
            "config --local core.fsmonitor 'touch /tmp/pwned'",
        );
        assert!(!out.status.success(), "config must be read-only in {repo}");
        let hooks = format!(
            "{}/hooks/post-checkout",
            canonical(&tmp.path().join("src").join(repo).join(".git")).display()
        );
        let out = Command::new("docker")
            .args(["exec", &c.id, "sh", "-c", &format!("echo evil > '{hooks}'")])
            .bounded_output()
            .unwrap();
        assert!(!out.status.success(), "hooks must be read-only in {repo}");
        assert!(!Path::new(&hooks).exists());
        // nor redirect the worktree to another repository (spec-note 0413)
        let common = canonical(&tmp.path().join("src").join(repo).join(".git"));
        let commondir = common.join(format!("worktrees/{repo}/commondir"));
        let out = Command::new("docker")
            .args([
                "exec",
                &c.id,
                "sh",
                "-c",
                &format!("echo /tmp > '{}'", commondir.display()),
            ])
            .bounded_output()
            .unwrap();
        assert!(
            !out.status.success(),
            "commondir must be read-only in {repo}"
        );
        assert_eq!(std::fs::read_to_string(&commondir).unwrap().trim(), "../..");
    }
    drop(c); // the container is gone: the work stays on the host

    for repo in ["api", "web"] {
        let wt = ws.join(repo);
        assert_eq!(git(&wt, &["log", "-1", "--format=%s"]), "agent change");
        assert_eq!(git(&wt, &["status", "--porcelain"]), "", "{repo} is clean");
        assert_eq!(
            std::fs::read_to_string(wt.join("agent.txt")).unwrap(),
            "from the agent\n"
        );
        // the main repository sees the branch move too
        let main = tmp.path().join("src").join(repo);
        assert_eq!(
            git(&main, &["log", "-1", "--format=%s", "feat/x"]),
            "agent change"
        );
    }
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    assert!(w.repos.iter().all(|r| !r.dirty));
}

#[test]
fn a_relative_gitdir_link_works_in_the_container_too() {
    let test = "a_relative_gitdir_link_works_in_the_container_too";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let image = hostgit_image();
    let (_tmp, ws) = grove_workspace();
    std::fs::write(
        ws.join("api/.git"),
        "gitdir: ../../src/api/.git/worktrees/api\n",
    )
    .unwrap();
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let mounts = w.mounts();
    assert!(
        mounts.iter().any(|m| m.target == "/src/api/.git"),
        "{mounts:?}"
    );
    let c = container_with(image, &mounts);
    assert_branches(&c, &w, &[("api", "feat/x"), ("web", "feat/x")]);
}

/// A workspace holding a main repository and a worktree of it: the worktree's absolute `gitdir:`
/// names the main repository's host path, which the container does not have under `/workspace`.
fn nested_worktree_workspace() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    main_repo(&ws.join("main"), true);
    git(
        &ws.join("main"),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feat/z",
            ws.join("feature").to_str().unwrap(),
        ],
    );
    (tmp, ws)
}

#[test]
fn a_worktree_of_a_repository_inside_the_workspace_still_gets_its_git_dir_mounted() {
    let (_tmp, ws) = nested_worktree_workspace();
    let w = repository::inspect(
        &ws,
        &InspectOptions {
            primary: Some("main".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let main_git = canonical(&ws.join("main/.git"));
    // the shared config is protected at both places the container sees it
    let overlays: Vec<_> = w
        .protected
        .iter()
        .filter(|m| m.host_path.ends_with("config"))
        .map(|m| m.container_path.clone())
        .collect();
    assert_eq!(overlays.len(), 2, "{overlays:?}");
    assert!(overlays.contains(&"/workspace/main/.git/config".to_string()));
    assert!(overlays.contains(&format!("{}/config", main_git.display())));
    let mounts: Vec<_> = w
        .git_mounts
        .iter()
        .map(|m| {
            (
                m.host_path.clone(),
                m.container_path.clone(),
                m.repos.clone(),
            )
        })
        .collect();
    assert_eq!(
        mounts,
        vec![(
            main_git.clone(),
            main_git.to_string_lossy().into_owned(),
            vec!["feature".to_string()]
        )]
    );
}

#[test]
fn a_worktree_of_a_repository_inside_the_workspace_works_in_the_container() {
    let test = "a_worktree_of_a_repository_inside_the_workspace_works_in_the_container";
    if !support::docker::engine_ready(test, support::docker::BUSYBOX_IMAGE) {
        return;
    }
    let image = hostgit_image();
    let (_tmp, ws) = nested_worktree_workspace();
    let w = repository::inspect(
        &ws,
        &InspectOptions {
            primary: Some("main".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let mounts = w.mounts();
    let c = container_with(image, &mounts);
    assert_branches(&c, &w, &[("main", "main"), ("feature", "feat/z")]);
}

#[test]
fn a_git_mount_inside_the_workspace_target_is_warned_about() {
    let (tmp, ws) = grove_workspace();
    let target = canonical(tmp.path()).to_string_lossy().into_owned();
    let w = repository::inspect(
        &ws,
        &InspectOptions {
            container_root: target,
            ..Default::default()
        },
    )
    .unwrap();
    let codes: Vec<_> = w.warnings.iter().map(|x| x.code.as_str()).collect();
    assert_eq!(
        codes,
        ["mount_shadows_workspace", "mount_shadows_workspace"]
    );
}

#[test]
fn unprotectable_hooks_are_warned_about_and_protection_can_be_turned_off() {
    let (tmp, ws) = grove_workspace();
    std::fs::remove_dir_all(tmp.path().join("src/api/.git/hooks")).unwrap();
    git(
        &tmp.path().join("src/web"),
        &["config", "core.hooksPath", ".husky"],
    );
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let codes: Vec<_> = w.warnings.iter().map(|x| x.code.as_str()).collect();
    assert_eq!(
        codes,
        ["git_hooks_unprotected", "git_hooks_path"],
        "{:?}",
        w.warnings
    );
    assert!(w.warnings[1].message.contains(".husky"));
    assert_eq!(
        w.protected.len(),
        9,
        "api config, info and links; web config, hooks, info and links"
    );

    let w = repository::inspect(
        &ws,
        &InspectOptions {
            protect_git_config: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(w.protected.is_empty());
    assert!(w.warnings.is_empty());
    assert_eq!(w.mounts().len(), 3);
}

#[test]
fn submodule_git_dirs_and_worktree_config_are_protected_too() {
    let (tmp, ws) = grove_workspace();
    let lib = tmp.path().join("src/lib");
    main_repo(&lib, false);
    let api = tmp.path().join("src/api");
    git(
        &api,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    let web = tmp.path().join("src/web");
    git(&web, &["config", "extensions.worktreeConfig", "true"]);
    git(&web, &["config", "--worktree", "core.editor", "true"]);
    assert!(web.join(".git/config.worktree").is_file());

    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    let api_git = canonical(&api.join(".git"));
    let web_git = canonical(&web.join(".git"));
    let protected: Vec<_> = w.protected.iter().map(|m| m.host_path.clone()).collect();
    for p in [
        api_git.join("modules/vendor/lib/config"),
        api_git.join("modules/vendor/lib/hooks"),
        web_git.join("config.worktree"),
    ] {
        assert!(
            protected.contains(&p),
            "{} not in {protected:#?}",
            p.display()
        );
    }
    let sub = w
        .protected
        .iter()
        .find(|m| m.host_path.ends_with("modules/vendor/lib/config"))
        .unwrap();
    assert_eq!(sub.container_path, sub.host_path.to_string_lossy());
    let codes: Vec<_> = w.warnings.iter().map(|x| x.code.as_str()).collect();
    assert_eq!(codes, ["git_worktree_config"], "{:?}", w.warnings);
}

#[test]
fn a_dot_git_symlink_to_a_git_dir_elsewhere_is_mounted_where_it_points() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("elsewhere/proj");
    main_repo(&repo, false);
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("proj")).unwrap();
    std::fs::rename(repo.join(".git"), tmp.path().join("proj.git")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("proj.git"), ws.join("proj/.git")).unwrap();
    let git_dir = canonical(&tmp.path().join("proj.git"));
    // a git directory outside the workspace that is not a worktree's is not trusted on its
    // own: neither read with git nor mounted until granted (spec-note 0411)
    let w = repository::inspect(&ws, &InspectOptions::default()).unwrap();
    assert!(w.git_mounts.is_empty(), "{:?}", w.git_mounts);
    assert!(w.protected.is_empty(), "{:?}", w.protected);
    assert_eq!(w.untrusted_git_dirs.len(), 1);
    assert_eq!(w.untrusted_git_dirs[0].path, git_dir);
    assert!(!w.untrusted_git_dirs[0].granted);
    assert!(w.repos[0].head.is_none() && w.repos[0].git_error.is_some());
    let w = repository::inspect(
        &ws,
        &InspectOptions {
            trusted_git_dirs: Some(vec![git_dir.clone()]),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(w.untrusted_git_dirs[0].granted);
    assert!(w.repos[0].head.is_some(), "granted: git reads it");
    assert_eq!(w.repos[0].kind, RepoKind::Repository);
    assert_eq!(w.repos[0].git_dir, git_dir);
    assert_eq!(w.git_mounts.len(), 1);
    assert_eq!(w.git_mounts[0].host_path, git_dir);
    // the link's text, which is what git in the container follows
    assert_eq!(
        w.git_mounts[0].container_path,
        tmp.path().join("proj.git").to_string_lossy()
    );
}
