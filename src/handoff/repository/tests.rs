use super::git_mounts::prune_nested;
use super::*;
use crate::handoff::failure::GitFailed;

/// The worktree back-link rule of [`judge_git_links`] on files laid out by hand: git's
/// own two-way layout is trusted; a one-way link, a wrong back-link or a `commondir` in a
/// repository's own `.git` is not.
#[test]
fn only_the_two_way_worktree_link_is_trusted_outside_the_workspace() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let main = base.join("src/api/.git");
    for d in ["objects", "refs", "worktrees/api"] {
        std::fs::create_dir_all(main.join(d)).unwrap();
    }
    std::fs::write(main.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let ws = base.join("ws");
    let wt = ws.join("api");
    std::fs::create_dir_all(&wt).unwrap();
    let git_dir = main.join("worktrees/api");
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", git_dir.display())).unwrap();
    std::fs::write(git_dir.join("commondir"), "../..\n").unwrap();
    std::fs::write(
        git_dir.join("gitdir"),
        format!("{}\n", wt.join(".git").display()),
    )
    .unwrap();
    let judge = || judge_git_links(&wt, RepoKind::Worktree, &git_dir, &main, &ws);
    assert!(judge().is_empty(), "{:?}", judge());

    // the back-link names another worktree: untrusted, the git directory is requested
    std::fs::write(git_dir.join("gitdir"), "/elsewhere/.git\n").unwrap();
    let got = judge();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].0.clone(), got[0].1.clone()),
        (wt.join(".git"), git_dir.clone())
    );

    // a plain repository's own `.git` with a `commondir`, even pointing inside
    let repo = ws.join("web");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(repo.join(".git/commondir"), "../../api\n").unwrap();
    let got = judge_git_links(&repo, RepoKind::Repository, &repo.join(".git"), &wt, &ws);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, repo.join(".git/commondir"));
    assert_eq!(got[0].1, wt);
}

#[test]
fn porcelain_v2_branch_headers_parse() {
    let s = parse_status(
        "# branch.oid 1234abcd\n# branch.head feat/x\n# branch.upstream origin/feat/x\n# branch.ab +2 -5\n",
    );
    assert_eq!(
        s,
        Status {
            head: Some("1234abcd".into()),
            branch: Some("feat/x".into()),
            upstream: Some("origin/feat/x".into()),
            ahead: Some(2),
            behind: Some(5),
            dirty: false,
        }
    );
}

#[test]
fn initial_detached_and_dirty_are_recognised() {
    let s = parse_status("# branch.oid (initial)\n# branch.head (detached)\n? new.txt\n");
    assert_eq!(s.head, None);
    assert_eq!(s.branch, None);
    assert!(s.dirty);
    assert_eq!(s.ahead, None);
    let s = parse_status(
        "# branch.oid abc\n# branch.head main\n1 .M N... 100644 100644 100644 a b f.txt\n",
    );
    assert!(s.dirty);
}

#[test]
fn gone_upstream_has_no_counts() {
    let s = parse_status("# branch.oid abc\n# branch.head main\n# branch.upstream origin/main\n");
    assert_eq!(s.upstream.as_deref(), Some("origin/main"));
    assert_eq!((s.ahead, s.behind), (None, None));
}

#[test]
fn posix_paths_normalise() {
    assert_eq!(normalize_posix("/workspace/"), "/workspace");
    assert_eq!(
        normalize_posix("/workspace/api/../../src/api/.git"),
        "/src/api/.git"
    );
    assert_eq!(normalize_posix("/../../x"), "/x");
    assert_eq!(normalize_posix("//a/./b"), "/a/b");
    assert_eq!(normalize_posix("/"), "/");
}

#[test]
fn safe_relative_paths() {
    assert!(is_safe_relative(Path::new(".devcell/context.json")));
    assert!(is_safe_relative(Path::new(".grove/context.json")));
    assert!(!is_safe_relative(Path::new("/etc/passwd")));
    assert!(!is_safe_relative(Path::new("../x.json")));
    assert!(!is_safe_relative(Path::new("a/../../x.json")));
    assert!(!is_safe_relative(Path::new("")));
}

fn mount(host: &str, repos: &[&str]) -> GitMount {
    GitMount {
        host_path: host.into(),
        container_path: host.into(),
        repos: repos.iter().map(|r| r.to_string()).collect(),
    }
}

#[test]
fn nested_mounts_fold_into_their_parent() {
    let mut m = vec![
        mount("/src/api/.git/worktrees/api", &["api"]),
        mount("/src/api/.git", &["api"]),
        mount("/src/web/.git", &["web"]),
        mount("/src/api/.git/worktrees/api2", &["api2"]),
    ];
    prune_nested(&mut m);
    assert_eq!(
        m,
        vec![
            mount("/src/api/.git", &["api", "api2"]),
            mount("/src/web/.git", &["web"])
        ]
    );
}

#[test]
fn a_relative_link_mount_is_not_folded() {
    let mut relative = mount("/src/api/.git/worktrees/api", &["api"]);
    relative.container_path = "/src/api/.git/worktrees/api-elsewhere".into();
    let mut m = vec![mount("/src/api/.git", &["api"]), relative.clone()];
    prune_nested(&mut m);
    assert_eq!(m.len(), 2);
    assert_eq!(m[1], relative);
}

fn repo(name: &str, has_devcontainer: bool) -> Repo {
    Repo {
        name: name.into(),
        host_path: PathBuf::from("/w").join(name),
        container_path: format!("/workspace/{name}"),
        role: RepoRole::Secondary,
        kind: RepoKind::Worktree,
        branch: Some("main".into()),
        head: None,
        dirty: false,
        upstream: None,
        ahead: None,
        behind: None,
        git_dir: PathBuf::new(),
        common_dir: PathBuf::new(),
        has_devcontainer,
        git_error: None,
    }
}

#[test]
fn primary_choice_rules() {
    let multi = Layout::MultiRepository;
    let repos = [repo("api", false), repo("web", true)];
    assert_eq!(choose_primary(multi, &repos, None, false).unwrap(), Some(1));
    assert_eq!(
        choose_primary(multi, &repos, Some("api"), false).unwrap(),
        Some(0)
    );
    let err = choose_primary(multi, &repos, Some("nope"), false).unwrap_err();
    assert!(err.to_string().contains("`--primary nope`"), "{err}");
    assert_eq!(err.hint().unwrap(), "pass one of: api, web");

    let both = [repo("api", true), repo("web", true)];
    let err = choose_primary(multi, &both, None, false).unwrap_err();
    assert!(
        matches!(err, WorkspaceError::AmbiguousPrimary { .. }),
        "{err}"
    );
    assert_eq!(choose_primary(multi, &both, None, true).unwrap(), None);

    let none = [repo("api", false), repo("web", false)];
    assert_eq!(choose_primary(multi, &none, None, false).unwrap(), None);
    assert_eq!(
        choose_primary(multi, &none[..1], None, false).unwrap(),
        Some(0)
    );
    assert_eq!(
        choose_primary(Layout::Repository, &none[..1], None, false).unwrap(),
        Some(0)
    );
}

#[test]
fn mount_strings_quote_awkward_paths() {
    let mut m = WorkspaceMount {
        source: "/home/me/ws".into(),
        target: "/workspace".into(),
        read_only: false,
        purpose: MountPurpose::Workspace,
    };
    assert_eq!(
        m.to_mount_string(),
        "type=bind,source=/home/me/ws,target=/workspace"
    );
    m.source = "/home/me/a,b \"c\"".into();
    m.read_only = true;
    assert_eq!(
        m.to_mount_string(),
        r#"type=bind,"source=/home/me/a,b ""c""",target=/workspace,readonly"#
    );
}

/// The typed mount a handoff hands to the engine is the one its `--mount` text named before
/// mounts were typed, awkward paths included.
#[test]
fn the_typed_mount_is_the_one_its_text_names() {
    for (source, read_only) in [("/home/me/ws", false), ("/home/me/a,b \"c\"", true)] {
        let m = WorkspaceMount {
            source: source.into(),
            target: "/workspace/.git".into(),
            read_only,
            purpose: MountPurpose::GitProtected,
        };
        assert_eq!(
            crate::engine::run_args::parse_mount(&m.to_mount_string()).unwrap(),
            m.to_mount()
        );
    }
}

#[test]
fn options_follow_the_settings() {
    let settings = crate::settings::parse(
        "[handoff]\nworkspace_target = \"/src\"\n",
        Path::new("c.toml"),
    )
    .unwrap();
    let o = InspectOptions::from_settings(&settings, Some("api".into()));
    assert_eq!(o.container_root, "/src");
    assert_eq!(o.primary.as_deref(), Some("api"));
    assert!(o.protect_git_config);
}

#[test]
fn errors_map_to_envelope_codes() {
    use crate::handoff::envelope::ErrorCode;
    let unknown = WorkspaceError::UnknownPrimary {
        name: "x".into(),
        available: vec![],
    };
    assert_eq!(unknown.code(), ErrorCode::NotFound);
    assert_eq!(unknown.hint(), None);
    let ambiguous = WorkspaceError::AmbiguousPrimary {
        candidates: vec!["api".into(), "web".into()],
    };
    assert_eq!(ambiguous.code(), ErrorCode::InvalidArgument);
    assert_eq!(ambiguous.hint().as_deref(), Some("e.g. `--primary api`"));
    let git = WorkspaceError::Git(GitFailed {
        dir: "/w".into(),
        args: "status".into(),
        stderr: "fatal: boom".into(),
    });
    assert_eq!(git.code(), ErrorCode::Internal);
    assert_eq!(git.to_string(), "`git status` failed in `/w`: fatal: boom");
}

#[test]
fn workspace_branch_prefers_agreement_then_primary() {
    let mut ws = Workspace {
        repos: vec![repo("api", false), repo("web", false)],
        ..Workspace::bare("w", Path::new("/w"), "/workspace", Layout::MultiRepository)
    };
    assert_eq!(ws.branch(), Some("main"));
    ws.repos[1].branch = Some("other".into());
    assert_eq!(ws.branch(), None);
    ws.repos[1].role = RepoRole::Primary;
    assert_eq!(ws.branch(), Some("other"));
}

/// The index git reads for `status` is the container's to write: a FIFO there made git, and
/// devcell's `status`/`handoff` with it, wait for a writer for ever. The status is bounded by
/// the quick git deadline and ends with an error naming the wait.
#[test]
fn a_fifo_index_ends_the_status_with_an_error_instead_of_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = std::fs::canonicalize(tmp.path()).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&repo)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "a"]);
    let dot_git = repo.join(".git");
    std::fs::remove_file(dot_git.join("index")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        dot_git.join("index"),
        rustix::fs::Mode::from(0o600),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let got = host_git::status_within(&repo, &dot_git, &dot_git, std::time::Duration::from_secs(1));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    match got {
        Err(WorkspaceError::Git(GitFailed { stderr, .. })) => {
            assert!(stderr.contains("did not answer"), "{stderr}")
        }
        other => panic!("expected a git error, got {other:?}"),
    }
    // the FIFO is still there, untouched
    let meta = std::fs::symlink_metadata(dot_git.join("index")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
}
