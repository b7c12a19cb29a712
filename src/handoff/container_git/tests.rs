use super::host_git::checked_out_elsewhere;
use super::*;
use std::process::Command;

/// [`crate::config::hostgit::test_git`]'s output, trimmed.
fn git(dir: &Path, args: &[&str]) -> String {
    crate::config::hostgit::test_git(dir, args)
        .trim()
        .to_string()
}

/// The agent's `git`: on the container git directory, with the configuration the agent wrote
/// there (as in the container).
fn agent(cgd: &Path, work: &Path, args: &[&str]) -> String {
    let mut full = vec![
        "--git-dir".to_string(),
        cgd.to_string_lossy().into_owned(),
        "--work-tree".to_string(),
        work.to_string_lossy().into_owned(),
    ];
    full.extend(args.iter().map(|a| a.to_string()));
    let refs: Vec<&str> = full.iter().map(String::as_str).collect();
    git(work, &refs)
}

struct Fixture {
    _tmp: tempfile::TempDir,
    work: PathBuf,
    /// The host's git directory (and common directory), canonical.
    git: PathBuf,
    slot: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        Self::with_first_commit(true)
    }

    /// With `commit` false: a repository with no commit yet (`main` unborn).
    fn with_first_commit(commit: bool) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("repo");
        std::fs::create_dir(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        if commit {
            std::fs::write(work.join("a.txt"), "one\n").unwrap();
            git(&work, &["add", "a.txt"]);
            git(&work, &["commit", "-qm", "first"]);
            git(&work, &["branch", "side"]);
        }
        let slot = tmp.path().join("state/git/0");
        let git = std::fs::canonicalize(work.join(".git")).unwrap();
        Self {
            _tmp: tmp,
            work,
            git,
            slot,
        }
    }

    /// The repository as a handoff sees it, mounted at `/workspace` from slot 0.
    fn repo_git(&self) -> RepoGit {
        RepoGit {
            git_dir: self.git.clone(),
            common_dir: self.git.clone(),
            ..RepoGit::plain(
                "repo",
                &self.work,
                "/workspace",
                self.slot.clone(),
                "/run/devcell/git/0",
            )
        }
    }

    /// The host repository: its working tree and its (common) git directory.
    fn host_repo(&self) -> HostRepo<'_> {
        HostRepo {
            work_tree: &self.work,
            git_dir: &self.git,
            common_dir: &self.git,
        }
    }

    fn refresh(&self) -> (ContainerGitDir, Base) {
        let cgd = ContainerGitDir::new(&self.slot);
        let objects = self.git.join("objects").to_string_lossy().into_owned();
        let base = cgd.refresh(&self.host_repo(), &objects).unwrap();
        (cgd, base)
    }

    fn fetch_back(&self, cgd: &ContainerGitDir) -> FetchBack {
        cgd.fetch_back(&self.host_repo(), "s1").unwrap()
    }

    /// The agent commits 4 MiB of zeros (a few KB on disk) in the container git directory
    /// `dir`.
    fn agent_commits_zeros(&self, dir: &Path) {
        std::fs::write(self.work.join("zeros"), vec![0u8; 4 << 20]).unwrap();
        agent(dir, &self.work, &["add", "zeros"]);
        agent(dir, &self.work, &["commit", "-qm", "zeros"]);
    }

    /// The fetch-back of the agent's commit keeps `main` aside for `reason`: the host's branch
    /// and index stay, and the host's `git status` then runs nothing (`marker` not made; `what`
    /// says what would have run).
    fn assert_main_kept(
        &self,
        cgd: &ContainerGitDir,
        base: &Base,
        reason: KeptReason,
        marker: &Path,
        what: &str,
    ) {
        let report = self.fetch_back(cgd);
        assert_eq!(self.rev("main"), base.head_commit.clone().unwrap());
        assert!(
            report
                .kept
                .iter()
                .any(|k| k.name == "refs/heads/main" && k.reason == reason),
            "{report:?}"
        );
        assert!(!report.index_reset, "{report:?}");
        git(&self.work, &["status", "--porcelain"]);
        assert!(!marker.exists(), "{what}");
    }

    fn rev(&self, name: &str) -> String {
        git(&self.work, &["rev-parse", name])
    }
}

#[test]
fn the_container_git_dir_mirrors_the_host_repository_and_git_status_agrees() {
    let f = Fixture::new();
    let (cgd, base) = f.refresh();
    assert_eq!(base.head, "ref: refs/heads/main");
    assert_eq!(base.head_commit.as_deref(), Some(f.rev("main").as_str()));
    assert_eq!(base.refs.len(), 2);
    let dir = cgd.git_dir();
    assert_eq!(agent(&dir, &f.work, &["rev-parse", "side"]), f.rev("side"));
    assert_eq!(agent(&dir, &f.work, &["status", "--porcelain"]), "");
    // no object of its own: everything comes through the alternates
    assert!(
        std::fs::read_dir(dir.join("objects/pack"))
            .unwrap()
            .next()
            .is_none()
    );
    let config = std::fs::read_to_string(dir.join("config")).unwrap();
    assert!(config.contains("repositoryformatversion"), "{config}");
    assert!(!config.contains("hooksPath") && !config.contains("fsmonitor"));
}

#[test]
fn a_commit_comes_back_as_a_fast_forward_and_a_new_branch_is_created() {
    let f = Fixture::new();
    let (cgd, base) = f.refresh();
    let dir = cgd.git_dir();
    std::fs::write(f.work.join("a.txt"), "two\n").unwrap();
    agent(&dir, &f.work, &["commit", "-qam", "agent"]);
    agent(&dir, &f.work, &["branch", "feature"]);
    let new = agent(&dir, &f.work, &["rev-parse", "HEAD"]);
    let report = f.fetch_back(&cgd);
    assert_eq!(f.rev("main"), new);
    assert_eq!(f.rev("feature"), new);
    assert_eq!(
        report.fast_forwarded,
        vec![RefUpdate {
            name: "refs/heads/main".into(),
            old: base.head_commit.clone(),
            new: new.clone()
        }]
    );
    assert_eq!(report.created.len(), 1);
    assert!(report.kept.is_empty(), "{report:?}");
    assert!(report.index_reset);
    // the host's index follows HEAD; the working tree was the agent's already
    assert_eq!(git(&f.work, &["status", "--porcelain"]), "");
    // nothing left in devcell's namespace for what the host took
    assert_eq!(
        git(&f.work, &["for-each-ref", "refs/devcell/s1/"]),
        "",
        "{report:?}"
    );
    // what the user had before is recorded, and the registry judgement's committed side reads
    // it beside `HEAD` (attack K12): the agent's `a.txt` is not the only committed version
    let old = base.head_commit.clone().unwrap();
    assert_eq!(f.rev("refs/devcell/before-agent/heads/main"), old);
    assert_eq!(f.rev("refs/devcell/before-agent/heads/feature"), old);
    assert_eq!(
        crate::security::registries::committed_texts(&f.work.join("a.txt"), &f.work),
        vec![Some("two\n".to_string()), Some("one\n".to_string())]
    );
    // a second fetch-back has nothing more to do
    assert!(f.fetch_back(&cgd).is_empty());
}

/// Attack H3 in the worktree mode (spec-note 0438): the agent commits 4 MiB of zeros (a few
/// KB on disk) in the container git directory; over a 1 MiB `fetch_back_max_object_bytes` the
/// fetch-back is refused naming the blob, nothing of the host's refs or its namespace is
/// written; within the default bounds it comes back.
#[test]
fn an_object_larger_inflated_than_the_budget_is_not_brought_back() {
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    f.agent_commits_zeros(&dir);
    let blob = agent(&dir, &f.work, &["rev-parse", "HEAD:zeros"]);
    let refs_before = git(&f.work, &["for-each-ref"]);
    let host = f.host_repo();
    let budget = FetchBudget {
        object: 1 << 20,
        ..FetchBudget::default()
    };
    let err = cgd.fetch_back_within(&host, "s1", &budget).unwrap_err();
    let ContainerGitError::OverInflated { why, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        why,
        &OverInflated::Object {
            oid: blob,
            size: 4 << 20,
            limit: 1 << 20
        }
    );
    assert_eq!(git(&f.work, &["for-each-ref"]), refs_before);
    let new = agent(&dir, &f.work, &["rev-parse", "HEAD"]);
    f.fetch_back(&cgd);
    assert_eq!(f.rev("main"), new);
}

/// The `[handoff]` settings reach a worktree handoff's fetch-back (it used the defaults):
/// the next handoff's `prepare` with `fetch_back_max_object_bytes = 1 MiB` refuses the agent's
/// 4 MiB blob, as the settings' budget says, and writes nothing of the host's refs.
#[test]
fn the_handoff_settings_bound_the_fetch_back_of_the_next_prepare() {
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    f.agent_commits_zeros(&dir);
    let refs_before = git(&f.work, &["for-each-ref"]);
    let repo = f.repo_git();
    let settings = crate::settings::HandoffSettings {
        fetch_back_max_object_bytes: 1 << 20,
        ..crate::settings::HandoffSettings::default()
    };
    let err = repo
        .prepare("s2", &FetchBudget::from_settings(&settings))
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ContainerGitError::OverInflated {
                why: OverInflated::Object { limit, .. },
                ..
            } if *limit == 1 << 20
        ),
        "{err:?}"
    );
    assert_eq!(git(&f.work, &["for-each-ref"]), refs_before);
}

#[test]
fn rewritten_and_deleted_refs_never_touch_the_host_and_are_kept_aside() {
    let f = Fixture::new();
    std::fs::write(f.work.join("a.txt"), "two\n").unwrap();
    git(&f.work, &["commit", "-qam", "second"]);
    let main = f.rev("main");
    let side = f.rev("side");
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    // the agent destroys history as far as it can
    agent(&dir, &f.work, &["reset", "-q", "--hard", "HEAD~1"]);
    std::fs::write(f.work.join("b.txt"), "x\n").unwrap();
    agent(&dir, &f.work, &["add", "b.txt"]);
    agent(&dir, &f.work, &["commit", "-qm", "replacement"]);
    agent(&dir, &f.work, &["branch", "-D", "side"]);
    agent(
        &dir,
        &f.work,
        &["reflog", "expire", "--expire=now", "--all"],
    );
    agent(&dir, &f.work, &["gc", "-q", "--prune=now"]);
    let rewritten = agent(&dir, &f.work, &["rev-parse", "HEAD"]);
    let report = f.fetch_back(&cgd);
    assert_eq!(f.rev("main"), main);
    assert_eq!(f.rev("side"), side);
    git(&f.work, &["cat-file", "-e", &format!("{main}^{{commit}}")]);
    let kept: Vec<(&str, KeptReason)> = report
        .kept
        .iter()
        .map(|k| (k.name.as_str(), k.reason))
        .collect();
    assert!(
        kept.contains(&("refs/heads/main", KeptReason::Rewritten)),
        "{report:?}"
    );
    assert!(
        kept.contains(&("refs/heads/side", KeptReason::Deleted)),
        "{report:?}"
    );
    assert_eq!(f.rev("refs/devcell/s1/heads/main"), rewritten);
    assert!(!report.index_reset);
}

#[test]
fn fetch_back_runs_nothing_the_container_git_dir_configures() {
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    let marker = f.work.parent().unwrap().join("ran");
    let cmd = format!("touch {}", marker.display());
    std::fs::write(
        dir.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {cmd}\n\thooksPath = hooks\n[uploadpack]\n\tpackObjectsHook = {cmd}\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    for hook in [
        "post-checkout",
        "reference-transaction",
        "post-index-change",
    ] {
        let path = dir.join("hooks").join(hook);
        std::fs::write(&path, format!("#!/bin/sh\n{cmd}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // control: git run on that directory does run it
    agent(&dir, &f.work, &["status", "--porcelain"]);
    assert!(marker.exists(), "the planted fsmonitor is live");
    std::fs::remove_file(&marker).unwrap();
    // a commit made without the planted configuration (as if the agent wrote it before)
    std::fs::write(f.work.join("a.txt"), "two\n").unwrap();
    let quiet = [
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
    ];
    agent(
        &dir,
        &f.work,
        &[&quiet[..], &["commit", "-qam", "agent"]].concat(),
    );
    let _ = std::fs::remove_file(&marker);
    // a ref to a missing object and a ref through a symbolic link
    std::fs::write(
        dir.join("refs/heads/ghost"),
        format!("{}\n", "1".repeat(40)),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        f.work.join(".git/refs/heads/main"),
        dir.join("refs/heads/linked"),
    )
    .unwrap();
    let report = f.fetch_back(&cgd);
    assert!(
        !marker.exists(),
        "fetch-back ran the container's configuration"
    );
    assert!(
        report
            .kept
            .iter()
            .any(|k| k.name == "refs/heads/ghost" && k.reason == KeptReason::Invalid),
        "{report:?}"
    );
    assert!(!report.kept.iter().any(|k| k.name == "refs/heads/linked"));
    assert_eq!(report.fast_forwarded.len(), 1, "{report:?}");
    assert!(
        git(&f.work, &["for-each-ref", "--format=%(refname)"])
            .lines()
            .all(|r| r != "refs/heads/ghost" && r != "refs/heads/linked")
    );
}

#[test]
fn head_follows_the_agents_checkout_and_a_branch_the_user_moved_is_left_alone() {
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    agent(&dir, &f.work, &["checkout", "-q", "side"]);
    std::fs::write(f.work.join("a.txt"), "agent\n").unwrap();
    agent(&dir, &f.work, &["commit", "-qam", "on side"]);
    agent(&dir, &f.work, &["checkout", "-q", "-b", "topic"]);
    let topic = agent(&dir, &f.work, &["rev-parse", "HEAD"]);
    let report = f.fetch_back(&cgd);
    assert_eq!(report.head_moved_to.as_deref(), Some("refs/heads/topic"));
    assert_eq!(git(&f.work, &["symbolic-ref", "HEAD"]), "refs/heads/topic");
    assert_eq!(f.rev("HEAD"), topic);
    assert!(report.index_reset);
    assert_eq!(git(&f.work, &["status", "--porcelain"]), "");

    // the user commits on `side` on the host while the agent commits on it too
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    agent(
        &dir,
        &f.work,
        &["commit", "-q", "--allow-empty", "-m", "agent"],
    );
    git(&f.work, &["commit", "-q", "--allow-empty", "-m", "user"]);
    let user = f.rev("main");
    let report = f.fetch_back(&cgd);
    assert_eq!(f.rev("main"), user);
    assert_eq!(report.kept[0].reason, KeptReason::MovedOnHost, "{report:?}");
    assert!(!report.index_reset);
}

/// The agent makes a nested repository whose configuration names a command and commits it as a
/// submodule (a gitlink): fast-forwarding would make the host's `git status` enter it and run
/// the command. The branch is kept aside instead, the host's branch and index stay, and the
/// host's `git status` runs nothing (attacker's review of issue 25).
#[test]
fn a_commit_that_adds_a_submodule_is_kept_aside() {
    let f = Fixture::new();
    let (cgd, base) = f.refresh();
    let dir = cgd.git_dir();
    let sub = f.work.join("sub");
    std::fs::create_dir(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    git(&sub, &["commit", "-q", "--allow-empty", "-m", "s"]);
    let marker = f.work.parent().unwrap().join("ran");
    git(
        &sub,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}; false", marker.display()),
        ],
    );
    agent(&dir, &f.work, &["add", "sub"]);
    agent(&dir, &f.work, &["commit", "-qm", "x"]);
    f.assert_main_kept(
        &cgd,
        &base,
        KeptReason::AddsSubmodule,
        &marker,
        "the host's git status ran the nested repository's command",
    );
}

/// The agent swaps its container git directory's `refs` and `objects` for links to another
/// repository's on the host: the fetch-back reads neither (every step opens without following
/// a link), so no ref or object of that repository reaches the user's (attacker's review of
/// issue 25).
#[test]
fn refs_and_objects_behind_links_are_not_read() {
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    let other = f.work.parent().unwrap().join("other");
    std::fs::create_dir(&other).unwrap();
    git(&other, &["init", "-q", "-b", "main"]);
    git(&other, &["commit", "-q", "--allow-empty", "-m", "private"]);
    git(&other, &["branch", "secret"]);
    std::fs::remove_dir_all(dir.join("refs")).unwrap();
    std::fs::remove_dir_all(dir.join("objects")).unwrap();
    std::os::unix::fs::symlink(other.join(".git/refs"), dir.join("refs")).unwrap();
    std::os::unix::fs::symlink(other.join(".git/objects"), dir.join("objects")).unwrap();
    let report = f.fetch_back(&cgd);
    let refs = git(&f.work, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("secret"), "{refs}\n{report:?}");
    assert!(report.created.is_empty(), "{report:?}");
    assert!(report.fast_forwarded.is_empty(), "{report:?}");
}

/// A nested repository at `work/path` whose configuration names a command that leaves a
/// marker (what a hostile agent makes where the host's git would enter); returns the marker.
fn hostile_nested_repo(work: &Path, path: &str) -> PathBuf {
    let sub = work.join(path);
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    git(&sub, &["commit", "-q", "--allow-empty", "-m", "s"]);
    let marker = work.parent().unwrap().join("ran");
    git(
        &sub,
        &[
            "config",
            "core.fsmonitor",
            &format!("touch {}; false", marker.display()),
        ],
    );
    marker
}

/// A commit on `branch` (not checked out) with a gitlink at `path` and no folder for it.
fn commit_gitlink_on(work: &Path, branch: &str, path: &str) {
    let main = git(work, &["rev-parse", "HEAD"]);
    let index = work.parent().unwrap().join("other-index");
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(work)
            .args(args)
            .env("GIT_INDEX_FILE", &index)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    run(&["read-tree", branch]);
    run(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{main},{path}"),
    ]);
    let tree = run(&["write-tree"]);
    let commit = git(
        work,
        &["commit-tree", &tree, "-p", branch, "-m", "add a submodule"],
    );
    git(
        work,
        &["update-ref", &format!("refs/heads/{branch}"), &commit],
    );
    let _ = std::fs::remove_file(&index);
}

/// The agent checks out a host branch with a submodule at a path the session did not cover,
/// after planting a nested repository there: the host `HEAD` does not follow (the host's
/// `git status` would enter it and run its command); with the path covered, it does
/// (security review of the submodule covers).
#[test]
fn head_does_not_follow_to_a_branch_with_an_uncovered_submodule() {
    let f = Fixture::new();
    commit_gitlink_on(&f.work, "side", "libfoo");
    let (cgd, base) = f.refresh();
    cgd.set_covered_submodules(&[]).unwrap();
    let dir = cgd.git_dir();
    let marker = hostile_nested_repo(&f.work, "libfoo");
    agent(&dir, &f.work, &["checkout", "-q", "side"]);
    let report = f.fetch_back(&cgd);
    assert_eq!(git(&f.work, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(f.rev("HEAD"), base.head_commit.clone().unwrap());
    assert!(
        report.head_moved_to.is_none() && !report.index_reset,
        "{report:?}"
    );
    assert!(
        report
            .kept
            .iter()
            .any(|k| k.name == "HEAD" && k.reason == KeptReason::UncoveredSubmodule),
        "{report:?}"
    );
    git(&f.work, &["status", "--porcelain"]);
    assert!(
        !marker.exists(),
        "the host's git status ran the agent's command"
    );

    // the same checkout, the path covered in the session: HEAD follows
    let f = Fixture::new();
    commit_gitlink_on(&f.work, "side", "libfoo");
    let (cgd, _) = f.refresh();
    cgd.set_covered_submodules(&["libfoo".to_string()]).unwrap();
    std::fs::create_dir(f.work.join("libfoo")).unwrap();
    agent(&cgd.git_dir(), &f.work, &["checkout", "-q", "side"]);
    let report = f.fetch_back(&cgd);
    assert_eq!(report.head_moved_to.as_deref(), Some("refs/heads/side"));
    assert_eq!(git(&f.work, &["symbolic-ref", "HEAD"]), "refs/heads/side");
}

/// The checked-out branch's commit has a gitlink the host's index (so the session) did not
/// cover; the agent plants a nested repository there and commits on the branch: the branch is
/// not fast-forwarded and the host index not reset (security review of the submodule covers).
#[test]
fn the_checked_out_branch_does_not_move_to_a_commit_with_an_uncovered_submodule() {
    let f = Fixture::new();
    commit_gitlink_on(&f.work, "main", "libfoo");
    let (cgd, base) = f.refresh();
    cgd.set_covered_submodules(&[]).unwrap();
    let dir = cgd.git_dir();
    let marker = hostile_nested_repo(&f.work, "libfoo");
    agent(&dir, &f.work, &["add", "libfoo"]);
    agent(&dir, &f.work, &["commit", "-qm", "x"]);
    f.assert_main_kept(
        &cgd,
        &base,
        KeptReason::UncoveredSubmodule,
        &marker,
        "the host's git status ran the agent's command",
    );
}

#[test]
fn head_does_not_follow_onto_a_branch_checked_out_in_another_worktree() {
    let f = Fixture::new();
    let other = f.work.with_file_name("other");
    git(
        &f.work,
        &["worktree", "add", "-q", other.to_str().unwrap(), "side"],
    );
    let side = f.rev("side");
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    // the agent checks out `side` (checked out in the other worktree) and commits there
    agent(&dir, &f.work, &["checkout", "-q", "side"]);
    agent(
        &dir,
        &f.work,
        &["commit", "-q", "--allow-empty", "-m", "agent on side"],
    );
    let report = f.fetch_back(&cgd);
    assert_eq!(report.head_moved_to, None, "{report:?}");
    assert_eq!(git(&f.work, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(f.rev("side"), side, "the other worktree's branch stays");
    let reasons: Vec<(&str, KeptReason)> = report
        .kept
        .iter()
        .map(|k| (k.name.as_str(), k.reason))
        .collect();
    assert!(
        reasons.contains(&("refs/heads/side", KeptReason::CheckedOutElsewhere))
            && reasons.contains(&("HEAD", KeptReason::CheckedOutElsewhere)),
        "{report:?}"
    );
    let kept = report.kept.iter().find(|k| k.name == "refs/heads/side");
    let kept_as = kept.and_then(|k| k.kept_as.clone()).unwrap();
    assert_eq!(
        git(&f.work, &["log", "-1", "--format=%s", &kept_as]),
        "agent on side"
    );
    // git agrees: both worktrees are where they were, each on its own branch
    assert_eq!(git(&other, &["symbolic-ref", "HEAD"]), "refs/heads/side");
    assert_eq!(git(&other, &["status", "--porcelain"]), "");
    assert_eq!(git(&f.work, &["status", "--porcelain"]), "");

    // seen from the linked worktree, the main worktree's branch is the one checked out elsewhere
    let git_dir = std::fs::canonicalize(f.work.join(".git/worktrees/other")).unwrap();
    let common = std::fs::canonicalize(f.work.join(".git")).unwrap();
    let host = HostRepo {
        work_tree: &other,
        git_dir: &git_dir,
        common_dir: &common,
    };
    assert_eq!(
        checked_out_elsewhere(&host),
        std::collections::BTreeSet::from(["refs/heads/main".to_string()])
    );
    // a bare repository's `HEAD` is checked out nowhere
    git(&common, &["config", "core.bare", "true"]);
    assert!(checked_out_elsewhere(&host).is_empty());
}

#[test]
fn ten_thousand_and_one_refs_are_refused_whole_and_later_handoffs_go_on() {
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    let head = f.rev("main");
    let before = git(
        &f.work,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    );
    // the agent makes 10,001 branches (one `packed-refs` line each)
    let mut packed = std::fs::read_to_string(dir.join("packed-refs")).unwrap();
    for i in 0..=MAX_CHANGED_REFS {
        packed.push_str(&format!("{head} refs/heads/flood/{i:05}\n"));
    }
    std::fs::write(dir.join("packed-refs"), packed).unwrap();
    let host = f.host_repo();
    let err = cgd.fetch_back(&host, "s1").unwrap_err();
    assert!(
        matches!(err, ContainerGitError::TooManyRefs { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("more than 10000 refs; none was brought back")
    );
    let unchanged = || {
        assert_eq!(
            git(
                &f.work,
                &["for-each-ref", "--format=%(refname) %(objectname)"]
            ),
            before,
            "nothing imported, the user's refs untouched"
        );
    };
    unchanged();

    // the next handoff's prepare refuses it whole, sets it aside, and goes on
    let repo = f.repo_git();
    let back = repo.prepare("s2", &FetchBudget::default()).unwrap();
    assert!(
        back.refused
            .as_deref()
            .is_some_and(|r| r.contains("none was brought back")),
        "{back:?}"
    );
    assert!(back.fast_forwarded.is_empty() && back.created.is_empty());
    unchanged();
    assert!(f.slot.join("refused/packed-refs").is_file(), "kept aside");
    // the container git directory is the host's again, and the one after has nothing to say
    assert_eq!(
        agent(&dir, &f.work, &["for-each-ref", "--format=%(refname)"])
            .lines()
            .count(),
        2
    );
    assert!(
        repo.prepare("s3", &FetchBudget::default())
            .unwrap()
            .is_empty()
    );
}

/// Attack (spec-note 0400, F4): a new branch whose name conflicts with a host branch
/// (`main/x` beside `main`) is kept aside with the others brought back, and later fetch-backs
/// (the next handoff's `prepare`) go on; the host's `main` is untouched.
#[test]
fn a_new_branch_conflicting_with_a_host_branch_is_kept_and_later_handoffs_go_on() {
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    let main = f.rev("main");
    // the packed form: a loose `main` file and a `main/` folder cannot both exist
    agent(&dir, &f.work, &["pack-refs", "--all"]);
    let packed = std::fs::read_to_string(dir.join("packed-refs")).unwrap();
    std::fs::write(
        dir.join("packed-refs"),
        format!("{packed}{main} refs/heads/main/x\n"),
    )
    .unwrap();
    agent(&dir, &f.work, &["branch", "feature"]);
    let report = f.fetch_back(&cgd);
    assert!(
        report
            .kept
            .iter()
            .any(|k| k.name == "refs/heads/main/x" && k.reason == KeptReason::Conflict),
        "{report:?}"
    );
    assert_eq!(report.created.len(), 1, "{report:?}");
    assert_eq!(f.rev("main"), main);
    // the next fetch-back has nothing more to do, and fails on nothing
    let again = f.fetch_back(&cgd);
    assert!(
        again.created.is_empty() && again.fast_forwarded.is_empty(),
        "{again:?}"
    );
}

/// Attack M4: in a workspace with a tag `v1.0`, a commit after it and a remote `upstream`
/// (and `mirror`) configured but never fetched, the agent's new branches named like a `git describe` name,
/// those remotes' branches, a version a tag could take, a conventional remote and `stash` are
/// kept aside under `refs/devcell/s1/`, not created: the host's `git describe` name still
/// names the user's commit. A plain name still comes back.
#[test]
fn new_branches_named_like_describe_names_or_unfetched_remotes_are_kept_aside() {
    let f = Fixture::new();
    git(&f.work, &["tag", "v1.0"]);
    std::fs::write(f.work.join("a.txt"), "two\n").unwrap();
    git(&f.work, &["commit", "-qam", "second"]);
    git(
        &f.work,
        &[
            "remote",
            "add",
            "upstream",
            "https://example.invalid/up.git",
        ],
    );
    let described = git(&f.work, &["describe", "--tags"]);
    assert!(described.starts_with("v1.0-1-g"), "{described}");
    let second = f.rev("HEAD");
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    std::fs::write(f.work.join("a.txt"), "agent\n").unwrap();
    agent(&dir, &f.work, &["commit", "-qam", "agent"]);
    let theirs = agent(&dir, &f.work, &["rev-parse", "HEAD"]);
    let names = [
        "upstream/main",
        described.as_str(),
        "v1.1",
        "origin",
        "stash",
    ];
    for name in names.iter().chain(&["feature"]) {
        agent(
            &dir,
            &f.work,
            &["update-ref", &format!("refs/heads/{name}"), &theirs],
        );
    }
    let report = f.fetch_back(&cgd);
    for name in names {
        let full = format!("refs/heads/{name}");
        assert!(
            report.kept.iter().any(|k| k.name == full
                && k.reason == KeptReason::ShadowsRef
                && k.kept_as.as_deref() == Some(&format!("refs/devcell/s1/heads/{name}"))),
            "{name}: {report:?}"
        );
        assert!(!report.created.iter().any(|u| u.name == full), "{report:?}");
        assert_eq!(git(&f.work, &["for-each-ref", &full]), "", "{name}");
        assert_eq!(f.rev(&format!("refs/devcell/s1/heads/{name}")), theirs);
    }
    assert_eq!(f.rev(&described), second);
    assert_eq!(f.rev("feature"), theirs);
}

/// K12 (a)'s limits (spec-note 0467): the committed side of the registry judgement after a
/// fetch-back still reads the user's version when `HEAD` is detached at the agent's commit,
/// when the user renamed or deleted the branch, when the agent renamed it, and when the refs
/// are packed; in a repository that had no commit before the agent there is no committed
/// version that names anything (the record is the empty tree).
#[test]
fn the_users_version_still_counts_after_detach_rename_delete_and_packing() {
    use crate::security::registries::{committed_texts, named_by_every};
    let names = |texts: &[Option<String>]| {
        named_by_every(texts, |_, t| {
            t.lines()
                .map(str::to_string)
                .collect::<std::collections::BTreeSet<_>>()
        })
    };
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    std::fs::write(f.work.join("a.txt"), "evil.example.test\n").unwrap();
    agent(&dir, &f.work, &["commit", "-qam", "agent"]);
    f.fetch_back(&cgd);
    let a = f.work.join("a.txt");
    let both = vec![
        Some("evil.example.test\n".to_string()),
        Some("one\n".to_string()),
    ];
    assert_eq!(committed_texts(&a, &f.work), both);
    git(&f.work, &["checkout", "-q", "--detach", "main"]);
    assert_eq!(committed_texts(&a, &f.work), both, "detached");
    git(&f.work, &["checkout", "-q", "-b", "renamed"]);
    git(&f.work, &["branch", "-D", "main"]);
    assert!(names(&committed_texts(&a, &f.work)).is_empty(), "renamed");
    git(&f.work, &["pack-refs", "--all"]);
    assert!(names(&committed_texts(&a, &f.work)).is_empty(), "packed");

    // the agent renames the branch and packs its refs
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    std::fs::write(f.work.join("a.txt"), "evil.example.test\n").unwrap();
    agent(&dir, &f.work, &["commit", "-qam", "agent"]);
    agent(&dir, &f.work, &["branch", "-m", "main", "agents"]);
    agent(&dir, &f.work, &["pack-refs", "--all"]);
    let report = f.fetch_back(&cgd);
    assert_eq!(report.created.len(), 1, "{report:?}");
    git(&f.work, &["checkout", "-q", "agents"]);
    let a = f.work.join("a.txt");
    assert_eq!(committed_texts(&a, &f.work), both);
    assert!(
        names(&committed_texts(&a, &f.work)).is_empty(),
        "{report:?}"
    );

    // no commit before the agent
    let f = Fixture::with_first_commit(false);
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    std::fs::write(f.work.join("a.txt"), "evil.example.test\n").unwrap();
    agent(&dir, &f.work, &["add", "a.txt"]);
    agent(&dir, &f.work, &["commit", "-qm", "agent"]);
    let report = f.fetch_back(&cgd);
    assert_eq!(report.created.len(), 1, "{report:?}");
    let a = f.work.join("a.txt");
    assert_eq!(
        git(
            &f.work,
            &["cat-file", "-t", "refs/devcell/before-agent/heads/main"]
        ),
        "tree"
    );
    let texts = committed_texts(&a, &f.work);
    assert_eq!(
        texts.first(),
        Some(&Some("evil.example.test\n".to_string()))
    );
    assert!(names(&texts).is_empty(), "{texts:?}");
}

/// An orphan branch the agent makes, and a commit of the agent's kept aside under
/// `refs/devcell/<session>/…` that the user checks out, descend from none of the user's
/// before-agent records: nothing committed there counts as the user's (every host is asked,
/// and the request says why), while a kept commit above the user's still reads the user's
/// version below it (spec-note 0467).
#[test]
fn a_head_below_no_before_agent_record_is_the_agents() {
    use crate::security::registries::{committed_texts, head_outside_records, named_by_every};
    let names = |texts: &[Option<String>]| {
        named_by_every(texts, |_, t| {
            t.lines()
                .map(str::to_string)
                .collect::<std::collections::BTreeSet<_>>()
        })
    };
    let evil = "evil.example.test\n";
    // an orphan branch, created on the host by the fetch-back
    let f = Fixture::new();
    let (cgd, _) = f.refresh();
    let dir = cgd.git_dir();
    agent(&dir, &f.work, &["checkout", "-q", "--orphan", "fresh"]);
    std::fs::write(f.work.join("a.txt"), evil).unwrap();
    agent(&dir, &f.work, &["add", "a.txt"]);
    agent(&dir, &f.work, &["commit", "-qm", "orphan"]);
    let report = f.fetch_back(&cgd);
    assert!(
        report.created.iter().any(|u| u.name == "refs/heads/fresh"),
        "{report:?}"
    );
    let a = f.work.join("a.txt");
    // the host `HEAD` followed the agent onto `fresh`
    assert_eq!(git(&f.work, &["symbolic-ref", "HEAD"]), "refs/heads/fresh");
    git(&f.work, &["checkout", "-q", "-f", "main"]);
    assert!(!head_outside_records(&f.work), "on main: the user's");
    git(&f.work, &["checkout", "-q", "-f", "fresh"]);
    let texts = committed_texts(&a, &f.work);
    assert_eq!(texts.first(), Some(&Some(evil.to_string())));
    assert!(names(&texts).is_empty(), "orphan: {texts:?}");
    assert!(head_outside_records(&f.work));

    // the agent rewrites main (kept aside), the user checks the kept commit out
    let f = Fixture::new();
    let (cgd, base) = f.refresh();
    let dir = cgd.git_dir();
    std::fs::write(f.work.join("a.txt"), evil).unwrap();
    agent(
        &dir,
        &f.work,
        &["commit", "-q", "--amend", "-am", "rewritten"],
    );
    let report = f.fetch_back(&cgd);
    let kept = "refs/devcell/s1/heads/main";
    assert!(
        report
            .kept
            .iter()
            .any(|k| k.kept_as.as_deref() == Some(kept)),
        "{report:?}"
    );
    assert_eq!(
        f.rev("refs/devcell/before-agent/devcell/s1/heads/main"),
        base.head_commit.clone().unwrap()
    );
    git(&f.work, &["checkout", "-q", "-f", "--detach", kept]);
    let a = f.work.join("a.txt");
    let texts = committed_texts(&a, &f.work);
    assert_eq!(texts.first(), Some(&Some(evil.to_string())));
    assert!(names(&texts).is_empty(), "kept, rewritten: {texts:?}");
    assert!(head_outside_records(&f.work));

    // a kept commit above the user's (the user moved main meanwhile): the user's version
    // below it counts with it
    let f = Fixture::new();
    let (cgd, base) = f.refresh();
    let dir = cgd.git_dir();
    std::fs::write(f.work.join("a.txt"), evil).unwrap();
    agent(&dir, &f.work, &["commit", "-qam", "agent"]);
    git(
        &f.work,
        &["commit", "-q", "--allow-empty", "-m", "user meanwhile"],
    );
    let report = f.fetch_back(&cgd);
    assert!(
        report
            .kept
            .iter()
            .any(|k| k.reason == KeptReason::MovedOnHost),
        "{report:?}"
    );
    git(&f.work, &["checkout", "-q", "-f", "--detach", kept]);
    let a = f.work.join("a.txt");
    assert!(!head_outside_records(&f.work));
    assert_eq!(
        committed_texts(&a, &f.work),
        vec![Some(evil.to_string()), Some("one\n".to_string())]
    );
    assert_eq!(
        f.rev("refs/devcell/before-agent/devcell/s1/heads/main"),
        base.head_commit.unwrap()
    );
}
