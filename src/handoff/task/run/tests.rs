//! Unit tests of `run.rs`: opening, failing, fetching and deleting clone tasks.

use super::*;

use crate::handoff::task::test_git::{commit, devcontainer_repo, empty_repo, plain_git, repo_of_a};

/// Agent `a` configured to run `true`.
fn with_true_agent(opts: &mut HandoffOptions) {
    opts.settings.agents.insert(
        "a".into(),
        crate::settings::AgentSettings {
            command: vec!["true".into()],
            ..crate::settings::AgentSettings::default()
        },
    );
}

/// Agent `a`'s handoff of the task `task` of the repository `source`.
fn task_options(source: &Path, task: &str) -> HandoffOptions {
    HandoffOptions {
        agent: "a".into(),
        task: Some(task.into()),
        workspace_folder: source.to_path_buf(),
        ..HandoffOptions::default()
    }
}

/// Issue 27: a clone task whose handoff fails once the task is made (here: its image cannot
/// be had) fails naming the task, the user's repository, the kept task folder and the
/// mirror, with the commands that go on; `status` then lists the task and `delete --task`
/// removes it. A task whose clone cannot be made (here: the mirror cannot be) leaves
/// nothing of itself and says so.
#[tokio::test]
async fn a_failed_clone_task_names_the_task_and_the_commands_that_recover_it() {
    use crate::handoff::session::{AgentStreams, StopSignal};
    use crate::ops::error::OpsError;
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let source = base.join("src");
    devcontainer_repo(&source);
    let (state, cache) = (base.join("state"), base.join("cache"));
    let mut opts = HandoffOptions {
        state_root: Some(state.clone()),
        ..task_options(&source, "t")
    };
    with_true_agent(&mut opts);
    let streams = || AgentStreams {
        stdin: None,
        stdout: Box::new(tokio::io::sink()),
        stderr: Box::new(tokio::io::sink()),
    };
    let stop = || -> StopSignal<'static> { Box::pin(futures_util::stream::pending()) };
    let quiet = crate::progress::NoopReporter;
    // the fake engine has no `busybox` image
    let engine = crate::engine::fake::FakeEngine::new();
    let e: OpsError = handoff_with(&engine, &opts, &cache, streams(), stop(), &quiet)
        .await
        .unwrap_err();
    let message = e.to_string();
    assert!(
        message.starts_with(&format!("clone task `t` of `{}`: ", source.display())),
        "{message}"
    );
    let details = e.details();
    let folder = tasks_root(&state, &source_key(&source.join(".git"))).join("t");
    assert_eq!(details["task"], "t", "{details:#}");
    assert_eq!(details["source"], source.to_str().unwrap(), "{details:#}");
    assert_eq!(details["kept"], true, "{details:#}");
    assert_eq!(
        details["taskFolder"],
        folder.to_str().unwrap(),
        "{details:#}"
    );
    let mirror = details["mirrors"][0].as_str().expect("a mirror");
    assert!(Path::new(mirror).join("HEAD").is_file(), "{details:#}");
    let hint = crate::diagnostics::Hint::hint(&e).unwrap_or_default();
    assert!(hint.contains("devcell delete --task t"), "{hint}");
    let actions = e.next_actions();
    let argvs: Vec<String> = actions.iter().map(|(_, argv)| argv.join(" ")).collect();
    let at = format!("--workspace-folder {}", source.display());
    for want in [
        format!("devcell status {at}"),
        format!("devcell handoff --isolation clone --task t --agent a {at}"),
        format!("devcell delete --task t {at}"),
    ] {
        assert!(argvs.contains(&want), "{want} in {argvs:#?}");
    }
    // recoverable: listed, then deleted
    let listed = statuses(&source, &state);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].task, "t");
    delete_task(&engine, &source, "t", false, &state, &quiet)
        .await
        .unwrap();
    assert!(!folder.exists());
    assert!(statuses(&source, &state).is_empty());

    // a mirror that cannot be made: nothing of the task is kept, and the error says so
    let blocked = base.join("blocked-cache");
    std::fs::write(&blocked, "not a folder").unwrap();
    let e = match open_task(&opts, &state, &blocked, &quiet) {
        Err(e) => OpsError::from(e),
        Ok(_) => panic!("made a task without a mirror"),
    };
    let details = e.details();
    assert_eq!(details["task"], "t", "{details:#}");
    assert_eq!(details["kept"], false, "{details:#}");
    assert_eq!(details["taskFolder"], serde_json::Value::Null);
    assert!(!folder.exists());
    let argvs: Vec<String> = e
        .next_actions()
        .into_iter()
        .map(|(_, a)| a.join(" "))
        .collect();
    assert_eq!(
        argvs,
        [format!(
            "devcell handoff --isolation clone --task t --agent a {at}"
        )]
    );
    assert!(
        crate::diagnostics::Hint::hint(&e)
            .unwrap_or_default()
            .contains("nothing of task `t` was kept"),
        "{e}"
    );
}

/// G8 (session 17): a clone task's plan does not warn that the clone's `.git` has no hooks
/// folder to protect (no host git runs hooks there); a worktree handoff of the same
/// folder still does.
#[tokio::test]
async fn a_clone_tasks_plan_has_no_hooks_warning_but_a_worktree_plan_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let source = base.join("src");
    devcontainer_repo(&source);
    let state = base.join("state");
    let mut opts = HandoffOptions {
        state_root: Some(state.clone()),
        ..task_options(&source, "t")
    };
    with_true_agent(&mut opts);
    let quiet = crate::progress::NoopReporter;
    let (records, _lock) = open_task(&opts, &state, &base.join("cache"), &quiet).unwrap();
    let hooks = records[0].clone.join(".git/hooks");
    let _ = std::fs::remove_dir_all(&hooks);
    let mut task_opts = opts.clone();
    task_opts.workspace_folder = records[0].workspace_folder();
    let codes = |opts: HandoffOptions| async move {
        let p = crate::handoff::plan::prepare(
            &opts,
            None,
            crate::handoff::context::AgentRuntime::Container,
        )
        .await
        .unwrap();
        p.plan
            .warnings
            .iter()
            .map(|(code, _)| code.clone())
            .collect::<Vec<_>>()
    };
    let worktree = codes(task_opts.clone()).await;
    assert!(
        worktree.iter().any(|c| c == "git_hooks_unprotected"),
        "{worktree:?}"
    );
    task_opts.sandbox = Some(sandbox_of(&records));
    let clone = codes(task_opts).await;
    assert!(
        !clone.iter().any(|c| c == "git_hooks_unprotected"),
        "{clone:?}"
    );
}

/// Issue 27: `handoff --plan --isolation clone` plans the Compose project name the task's
/// handoff sets (its task folder's), not the source's; nothing is created by planning.
#[test]
fn the_plan_of_a_clone_task_names_the_project_its_handoff_uses() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let source = base.join("src");
    empty_repo(&source);
    let state = base.join("state");
    let opts = HandoffOptions {
        state_root: Some(state.clone()),
        ..task_options(&source, "t")
    };
    let opts = HandoffOptions {
        isolation: Some(crate::settings::Isolation::Clone),
        ..opts
    };
    let planned = plan_options(&opts);
    assert!(!state.join("door").exists(), "planning creates nothing");
    let name = planned
        .env
        .get(super::super::compose::PROJECT_VARIABLE)
        .cloned();
    assert!(!state.join("tasks").exists(), "planning creates nothing");
    let quiet = crate::progress::NoopReporter;
    let (records, _lock) = open_task(&opts, &state, &base.join("cache"), &quiet).unwrap();
    assert_eq!(
        name,
        Some(super::super::compose::project_name(&records[0])),
        "the plan's project is the handoff's"
    );
    assert!(name.unwrap().starts_with("src-t-"));
    // issue 30: the plan lists the mail binds the task's handoff adds
    let run = super::super::mail::request(&state, &records[0], None).unwrap();
    assert_eq!(
        planned.mail.map(|d| d.container.binds),
        Some(run.container.binds)
    );
    // `--mail-group team`: the plan and the run join `team`, not the repository's group
    let team = crate::mail::GroupName::new("team").unwrap();
    let named = plan_options(&HandoffOptions {
        mail_group: Some(team.clone()),
        ..opts.clone()
    });
    let run = super::super::mail::request(&state, &records[0], Some(&team)).unwrap();
    assert_eq!(run.group, team);
    assert_eq!(named.mail.as_ref().map(|d| &d.group), Some(&team));
    assert_eq!(
        named.mail.map(|d| d.container.binds),
        Some(run.container.binds)
    );
}

/// Issue 27: a deleted task's socket folder (`door/<key>`) is removed, unless a channel of
/// its name is open now (then it is left alone, its socket live).
#[test]
fn a_deleted_tasks_socket_folder_is_removed_unless_its_channel_is_open() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let repo = base.join("repo");
    empty_repo(&repo);
    let state = base.join("state");
    let opts = task_options(&repo, "t");
    let quiet = crate::progress::NoopReporter;
    let (records, _lock) = open_task(&opts, &state, &base.join("cache"), &quiet).unwrap();
    let door = super::super::mail::request(&state, &records[0], None).unwrap();
    let folder = door.record().host_socket;
    let key_folder = folder.parent().unwrap().parent().unwrap().to_path_buf();
    let open = door
        .open(
            &crate::settings::MailSettings::default(),
            std::time::Duration::ZERO,
        )
        .unwrap();
    super::super::mail::forget_channel(&state, &records[0]);
    assert!(folder.exists(), "an open channel's socket is left alone");
    drop(open);
    assert!(key_folder.is_dir());
    super::super::mail::forget_channel(&state, &records[0]);
    assert!(!key_folder.exists(), "removed once the channel is closed");
    assert!(state.join("door").is_dir(), "the shared folder stays");
    super::super::mail::forget_channel(&state, &records[0]);
}

fn mail_options(repo: &std::path::Path, state: &std::path::Path) -> HandoffOptions {
    let mut opts = HandoffOptions {
        agent: "a".into(),
        workspace_folder: repo.to_path_buf(),
        state_root: Some(state.to_path_buf()),
        mail_channel: Some(true),
        mail_group: Some(crate::mail::GroupName::new("g").unwrap()),
        ..HandoffOptions::default()
    };
    with_true_agent(&mut opts);
    opts
}

/// Issue 30: `handoff --plan --mail` of a worktree lists the two read-only binds a real
/// run adds (`devcell-mail` and the task's socket folder), at the paths the run uses, and
/// makes neither.
#[tokio::test]
async fn the_plan_lists_the_mail_mounts_a_run_adds_and_makes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let repo = base.join("repo");
    devcontainer_repo(&repo);
    let state = base.join("state");
    let opts = mail_options(&repo, &state);
    let planned = crate::handoff::mail_worktree::plan_options(&opts).unwrap();
    let p = crate::handoff::plan::prepare(
        &planned,
        None,
        crate::handoff::context::AgentRuntime::Container,
    )
    .await
    .unwrap();
    let mail: Vec<_> = p
        .plan
        .mounts
        .iter()
        .filter(|m| m.purpose == "mailChannel")
        .map(|m| (m.source.clone(), m.target.clone(), m.read_only))
        .collect();
    assert!(!state.join("door").exists(), "planning makes nothing");
    let run = crate::handoff::mail_worktree::request(&opts)
        .unwrap()
        .unwrap();
    let expected: Vec<_> = run
        .container
        .binds
        .iter()
        .map(|(s, t)| (s.to_string_lossy().into_owned(), t.clone(), true))
        .collect();
    assert_eq!(mail.len(), 2, "{:?}", p.plan.mounts);
    assert_eq!(mail, expected);
    assert!(
        std::path::Path::new(&mail[0].0).is_file(),
        "the run installs it"
    );
}

/// A task in use (a handoff holds its lock from opening it to its fetch back) can be
/// neither opened a second time nor deleted (`task_in_use`, nothing removed); once its
/// holder lets go (ends, or is killed: the kernel drops the lock), it can. A task folder
/// left without its record (a devcell killed while making it) is made again.
#[test]
fn a_task_in_use_cannot_be_deleted_or_started_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let source = base.join("src");
    repo_of_a(&source, "a");
    let state = base.join("state");
    let cache = base.join("cache");
    let opts = task_options(&source, "t");
    let quiet = crate::progress::NoopReporter;
    let (mut records, lock) = open_task(&opts, &state, &cache, &quiet).unwrap();
    let record = records.remove(0);
    assert!(record.clone.join("a").is_file());

    let again = open_task(&opts, &state, &cache, &quiet).unwrap_err();
    assert!(matches!(again, TaskError::InUse { .. }), "{again:?}");
    let code = crate::ops::error::ProductError::code(&again);
    assert_eq!(code.as_str(), "session_active");
    assert_eq!(
        crate::ops::error::ProductError::details(&again)["reason"],
        "task_in_use"
    );
    let refused = prepare_delete(&source, "t", true, &state).unwrap_err();
    assert!(matches!(refused, TaskError::InUse { .. }), "{refused:?}");
    assert!(record.clone.join(".git").is_dir(), "nothing removed");

    drop(lock);
    // (see the retry below: a forked child may hold a dropped lock for a moment)
    let mut tries = 0;
    let (_, delete_lock, dropped) = loop {
        match prepare_delete(&source, "t", false, &state) {
            Err(TaskError::InUse { .. }) if tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(dropped, None, "no commit on the branch");
    let busy = open_task(&opts, &state, &cache, &quiet).unwrap_err();
    assert!(matches!(busy, TaskError::InUse { .. }), "{busy:?}");
    drop(delete_lock);

    // a name that differs only by case: refused, nothing made; it shares the lock too
    let upper = HandoffOptions {
        task: Some("T".into()),
        ..opts.clone()
    };
    let clash = open_task(&upper, &state, &cache, &quiet).unwrap_err();
    assert!(matches!(clash, TaskError::CaseClash { .. }), "{clash:?}");
    assert_eq!(
        crate::ops::error::ProductError::details(&clash)["reason"],
        "task_name_case_clash"
    );
    assert!(!record.folder().with_file_name("T").exists());
    let held = TaskLock::take(&record_root(&record), "T").unwrap();
    let busy = prepare_delete(&source, "t", false, &state).unwrap_err();
    assert!(matches!(busy, TaskError::InUse { .. }), "{busy:?}");
    drop(held);

    // a half-made task (killed devcell): made again under the lock
    std::fs::remove_file(record.path()).unwrap();
    std::fs::remove_dir_all(&record.clone).unwrap();
    // Other tests of this process fork children (git) while a lock file is open here; a
    // child holds the lock's open file until its exec closes it, so a lock just dropped
    // can read as in use for that moment. Retry briefly; a real holder never lets go.
    let mut tries = 0;
    let (remade, _lock) = loop {
        match open_task(&opts, &state, &cache, &quiet) {
            Err(TaskError::InUse { .. }) if tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => break other.unwrap(),
        }
    };
    assert!(remade[0].clone.join("a").is_file());
    assert!(remade[0].path().is_file());
}

/// `delete` refusing a task with unfetched commits names each (short sha and subject,
/// newest first, terminal-safe), at most [`fetch::UNFETCHED_NAMED`] with how many more; a
/// fetched part is not named again; `--force` drops them.
#[test]
fn a_refused_delete_names_each_unfetched_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let source = base.join("src");
    repo_of_a(&source, "a");
    let (state, cache) = (base.join("state"), base.join("cache"));
    let opts = task_options(&source, "t");
    let quiet = crate::progress::NoopReporter;
    let (mut records, lock) = open_task(&opts, &state, &cache, &quiet).unwrap();
    drop(lock);
    let clone = records[0].clone.clone();
    let commit = |msg: &str| {
        plain_git(&clone, &["commit", "-q", "--allow-empty", "-m", msg]);
        plain_git(&clone, &["rev-parse", "--short", "HEAD"])
    };
    commit("fetched one");
    fetch::fetch(&mut records[0]).unwrap();
    let mut shas = Vec::new();
    for i in 0..24 {
        shas.push(commit(&format!("work {i}")));
    }
    let last = commit("evil \u{1b}[31m subject");
    let refused = loop {
        match prepare_delete(&source, "t", false, &state) {
            Err(TaskError::InUse { .. }) => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            other => break other.unwrap_err(),
        }
    };
    let TaskError::Unfetched { listed, .. } = &refused else {
        panic!("{refused:?}")
    };
    let commits = &listed.commits;
    assert_eq!(listed.total, Some(25));
    assert_eq!(commits.len(), fetch::UNFETCHED_NAMED);
    assert!(commits[0].starts_with(&last), "{commits:?}");
    assert!(!commits[0].contains('\u{1b}'), "{commits:?}");
    assert_eq!(commits[1], format!("{} work 23", shas[23]));
    assert!(commits.iter().all(|c| !c.contains("fetched one")));
    let message = refused.to_string();
    assert!(message.contains("25 commit(s):"), "{message}");
    assert!(
        message.contains(&format!("\n  {} work 23", shas[23])),
        "{message}"
    );
    assert!(message.ends_with("… and 5 more"), "{message}");
    let details = crate::ops::error::ProductError::details(&refused);
    assert_eq!(details["total"], 25);
    assert_eq!(details["commits"].as_array().map(Vec::len), Some(20));
    let (_, _lock, dropped) = prepare_delete(&source, "t", true, &state).unwrap();
    assert!(dropped.is_some(), "--force drops them");
}

/// `git gc --prune=now` on the mirror (every ref dropped first, so nothing of it is
/// reachable) after three clones were made: every task still commits and fetches, and a
/// new task of the repository is made again from the refilled mirror. Then `prune`'s
/// mirror step: a mirror no task uses is listed (`doctor`) and removed; a used one, or one
/// whose lock a handoff holds, is kept.
#[test]
fn mirrors_gc_and_prune_never_break_a_task() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let repo = |name: &str| {
        let dir = base.join(name);
        repo_of_a(&dir, name);
        dir
    };
    let (one, two) = (repo("one"), repo("two"));
    let (state, cache) = (base.join("state"), base.join("cache"));
    let quiet = crate::progress::NoopReporter;
    let open = |source: &Path, task: &str| {
        let opts = task_options(source, task);
        open_task(&opts, &state, &cache, &quiet)
            .unwrap()
            .0
            .remove(0)
    };
    let mut tasks: Vec<TaskRecord> = ["t1", "t2", "t3"].iter().map(|t| open(&one, t)).collect();
    let mirror_one =
        super::super::mirror::mirror_path(&cache, &source_key(&tasks[0].source_git_dir));
    let refs = plain_git(&mirror_one, &["for-each-ref", "--format=%(refname)"]);
    for r in refs.lines() {
        plain_git(&mirror_one, &["update-ref", "-d", r]);
    }
    plain_git(&mirror_one, &["gc", "--quiet", "--prune=now"]);
    for record in &mut tasks {
        plain_git(
            &record.clone,
            &["commit", "-q", "--allow-empty", "-m", "work"],
        );
        let tip = plain_git(&record.clone, &["rev-parse", "HEAD"]);
        let got = fetch::fetch(record).unwrap();
        assert_eq!(
            got.fetched.as_deref(),
            Some(tip.as_str()),
            "{}",
            record.task
        );
    }
    let again = open(&one, "t4");
    assert!(again.clone.join("a").is_file());

    // `two`'s only task removed: its mirror is unused, `one`'s is not
    let gone = open(&two, "u1");
    std::fs::remove_dir_all(gone.folder()).unwrap();
    let mirror_two = super::super::mirror::mirror_path(&cache, &source_key(&gone.source_git_dir));
    assert_eq!(
        super::super::mirror::unused(&cache, &state),
        std::slice::from_ref(&mirror_two)
    );
    let dry = super::super::mirror::prune_unused(&cache, &state, true).unwrap();
    assert_eq!(dry, std::slice::from_ref(&mirror_two));
    assert!(mirror_two.is_dir(), "a dry run removes nothing");
    // a handoff making a clone from it holds its lock: kept
    let held = MirrorLock::take(&cache, &source_key(&gone.source_git_dir), false).unwrap();
    assert!(
        super::super::mirror::prune_unused(&cache, &state, false)
            .unwrap()
            .is_empty()
    );
    assert!(mirror_two.is_dir());
    drop(held);
    let removed = super::super::mirror::prune_unused(&cache, &state, false).unwrap();
    assert_eq!(removed, std::slice::from_ref(&mirror_two));
    assert!(!mirror_two.exists() && mirror_one.is_dir());
    // doctor lists nothing now; a new task of `two` makes its mirror again
    assert!(super::super::mirror::unused(&cache, &state).is_empty());
    assert!(open(&two, "u2").clone.join("a").is_file());
}

/// A repository removed and made again at the same path (the same task key) is another
/// repository: the old tasks are not listed, loaded or continued for it (continuing one
/// is refused, `clone_replaced_repository`); `doctor` reports them as orphans
/// (`orphans::tests::orphaned_task_folders_are_found_and_those_with_unfetched_commits_are_kept`).
#[test]
fn a_new_repository_at_the_same_path_does_not_inherit_old_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let source = base.join("src");
    let make_repo = |file: &str| {
        std::fs::create_dir(&source).unwrap();
        plain_git(&source, &["init", "-q"]);
        commit(&source, file);
    };
    make_repo("a");
    let (state, cache) = (base.join("state"), base.join("cache"));
    let opts = task_options(&source, "t");
    let quiet = crate::progress::NoopReporter;
    let (mut records, lock) = open_task(&opts, &state, &cache, &quiet).unwrap();
    let record = records.remove(0);
    drop(lock);
    assert!(record.same_repository());
    assert_eq!(statuses(&source, &state).len(), 1);

    std::fs::remove_dir_all(&source).unwrap();
    make_repo("z");
    let (_, key) = source::locate(&source).unwrap();
    assert!(
        super::super::list(&state, &key).is_empty(),
        "no old task listed"
    );
    assert!(statuses(&source, &state).is_empty());
    let gone = load_task(&source, "t", &state).unwrap_err();
    assert!(matches!(gone, TaskError::NoSuchTask { .. }), "{gone:?}");
    let refused = open_task(&opts, &state, &cache, &quiet).unwrap_err();
    assert!(
        matches!(
            refused,
            TaskError::Refused {
                reason: "clone_replaced_repository",
                ..
            }
        ),
        "{refused:?}"
    );
    assert!(record.clone.join("a").is_file(), "the old clone is kept");
    // `doctor` reporting it: `orphans::tests`
}

/// Every file under `dir` with its bytes (links as their target), by path.
fn tree_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_symlink() {
                let to = std::fs::read_link(e.path()).unwrap();
                out.push((e.path(), to.into_os_string().into_encoded_bytes()));
            } else {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Issue 27: `delete --task NAME` removes a task of the repository that was at the workspace
/// path before (replaced by another since) or of one that is gone, as `status --all` lists
/// them: a task at its base goes at once; one whose clone holds commits past the base is
/// refused (`LeftUnfetched`, naming the commit and the clone) until `--force`, which drops
/// them. The repository now at the path is never read or written (its `.git` byte for byte),
/// and a name no task has is still `NoSuchTask`.
#[tokio::test]
async fn delete_task_removes_a_task_of_a_replaced_or_gone_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (source, lost) = (base.join("src"), base.join("lost"));
    empty_repo(&source);
    empty_repo(&lost);
    let (state, cache) = (base.join("state"), base.join("cache"));
    let quiet = crate::progress::NoopReporter;
    let make = |repo: &Path, task: &str| {
        let (mut records, _lock) =
            open_task(&task_options(repo, task), &state, &cache, &quiet).unwrap();
        records.remove(0)
    };
    let (worked, idle, gone) = (make(&source, "w"), make(&source, "i"), make(&lost, "g"));
    let tip = crate::handoff::task::test_git::commit(&worked.clone, "agent");
    std::fs::remove_dir_all(&source).unwrap();
    empty_repo(&source);
    std::fs::remove_dir_all(&lost).unwrap();
    let before = tree_bytes(&source.join(".git"));
    let engine = crate::engine::fake::FakeEngine::new();

    // at its base: removed, nothing kept in any repository
    let deleted = delete_task(&engine, &source, "i", false, &state, &quiet)
        .await
        .unwrap();
    assert!(!idle.folder().exists());
    assert_eq!((deleted.kept_ref, deleted.dropped), (None, None));
    // its clone holds a commit: refused, named, kept; `--force` drops it
    let refused = prepare_delete(&source, "w", false, &state).unwrap_err();
    match &refused {
        TaskError::LeftUnfetched {
            tip: named,
            state: RepositoryState::Replaced,
            clone,
            ..
        } => assert_eq!((named, clone), (&tip, &worked.clone)),
        other => panic!("{other:?}"),
    }
    let hint = crate::diagnostics::Hint::hint(&crate::ops::error::OpsError::from(refused));
    assert!(hint.unwrap_or_default().contains("--force"));
    assert!(worked.clone.join("agent").is_file());
    let deleted = delete_task(&engine, &source, "w", true, &state, &quiet)
        .await
        .unwrap();
    assert_eq!(deleted.dropped.as_deref(), Some(tip.as_str()));
    assert!(!worked.folder().exists());
    // a gone repository's task, found by the path it was made from
    delete_task(&engine, &lost, "g", false, &state, &quiet)
        .await
        .unwrap();
    assert!(!gone.folder().exists());
    assert_eq!(
        tree_bytes(&source.join(".git")),
        before,
        "the new repository untouched"
    );
    let none = prepare_delete(&source, "w", false, &state).unwrap_err();
    assert!(matches!(none, TaskError::NoSuchTask { .. }), "{none:?}");
}
