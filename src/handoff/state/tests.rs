use super::*;

fn running(_: &str) -> bool {
    true
}
fn stopped(_: &str) -> bool {
    false
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir, StateStore) {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let store = StateStore::new(state.path());
    (state, ws, store)
}

/// Begins a session of `codex` in `ws` (no `--replace`), which succeeds.
fn begin(
    store: &StateStore,
    ws: &Path,
    container: Option<&str>,
    probe: &dyn ContainerProbe,
) -> SessionStart {
    try_begin(store, ws, "codex", container, false, probe).unwrap()
}

/// Begins a session of `agent` in `ws` for this process, earlier sessions judged by `probe`
/// and [`process_alive`].
fn try_begin(
    store: &StateStore,
    ws: &Path,
    agent: &str,
    container: Option<&str>,
    replace: bool,
    probe: &dyn ContainerProbe,
) -> Result<SessionStart, StateError> {
    store.begin_session(
        ws,
        NewSession::in_container(agent, container, replace),
        probe,
        SessionProcess::current(),
    )
}

/// Begins a session of `codex` in `ws` for the devcell process `pid`, earlier sessions'
/// processes judged by `alive`; it succeeds.
fn begin_with(
    store: &StateStore,
    ws: &Path,
    container: Option<&str>,
    pid: u32,
    alive: &dyn Fn(u32, Option<u64>) -> bool,
) -> SessionStart {
    store
        .begin_session(
            ws,
            NewSession::in_container("codex", container, false),
            &running,
            SessionProcess {
                pid,
                pid_start: None,
                alive,
            },
        )
        .unwrap()
}

/// A live container session `id` of agent `a` by process `pid`, recorded nowhere.
fn session(id: &str, pid: u32) -> Session {
    Session {
        id: id.into(),
        agent: "a".into(),
        pid,
        runtime: AgentRuntime::Container,
        ..Session::default()
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn keys_are_stable_and_canonical() {
    let ws = tempfile::tempdir().unwrap();
    let a = workspace_key(ws.path()).unwrap();
    let b = workspace_key(&ws.path().join(".")).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 32);
    assert!(workspace_key(Path::new("/nonexistent/devcell/ws")).is_err());
}

#[test]
fn a_host_session_has_no_container_and_lives_with_its_devcell() {
    let (_s, ws, store) = setup();
    let first = begin(&store, ws.path(), None, &running);
    store
        .set_container(ws.path(), Some(&first.session.id), "c0ffee", None)
        .unwrap();
    store
        .end_session(ws.path(), &first.session.id, SessionOutcome::Abandoned)
        .unwrap();
    // the workspace's recorded container is not the host session's
    let host = store
        .begin_session(
            ws.path(),
            NewSession::on_host("codex", false),
            &stopped,
            SessionProcess::current(),
        )
        .unwrap();
    assert_eq!(host.session.container_id, None);
    assert_eq!(host.session.runtime, AgentRuntime::Host);
    let state = store.load(ws.path()).unwrap().unwrap();
    let saved = state.session(&host.session.id).unwrap();
    assert_eq!(saved.runtime, AgentRuntime::Host);
    // live while this devcell runs, whatever the engine says of containers
    assert_eq!(
        session_status(saved, &stopped, &process_alive),
        SessionStatus::Live
    );
    assert!(matches!(
        try_begin(&store, ws.path(), "other", None, false, &stopped),
        Err(StateError::SessionActive { .. })
    ));
    // a session written before the field existed reads as a container session
    let old: Session = serde_json::from_value(serde_json::json!({
        "id": "s", "agent": "a", "pid": 1, "containerId": null,
        "startedAt": "", "endedAt": null, "outcome": null, "log": "/l"
    }))
    .unwrap();
    assert_eq!(old.runtime, AgentRuntime::Container);
}

#[test]
fn a_session_is_recorded_and_ended() {
    let (_s, ws, store) = setup();
    assert_eq!(store.load(ws.path()).unwrap(), None);
    let start = begin(&store, ws.path(), None, &running);
    assert!(start.abandoned.is_empty() && start.replaced.is_none());
    assert_eq!(start.session.pid, std::process::id());
    assert_eq!(
        start.session.log,
        store
            .root()
            .join("logs")
            .join(format!("{}.log", start.session.id))
    );
    store
        .set_container(ws.path(), Some(&start.session.id), "c0ffee", Some("img:1"))
        .unwrap();
    let state = store.load(ws.path()).unwrap().unwrap();
    assert_eq!(state.container_id.as_deref(), Some("c0ffee"));
    assert_eq!(state.image.as_deref(), Some("img:1"));
    assert_eq!(state.sessions[0].container_id.as_deref(), Some("c0ffee"));
    assert_eq!(
        session_status(&state.sessions[0], &running, &process_alive),
        SessionStatus::Live
    );

    let ended = store
        .end_session(
            ws.path(),
            &start.session.id,
            SessionOutcome::Signaled { signal: 9 },
        )
        .unwrap();
    assert!(ended.ended_at.is_some());
    let state = store.load(ws.path()).unwrap().unwrap();
    assert_eq!(
        state.sessions[0].outcome,
        Some(SessionOutcome::Signaled { signal: 9 })
    );
    let json = serde_json::to_value(&state).unwrap();
    assert_eq!(
        json["sessions"][0]["outcome"],
        serde_json::json!({"kind": "signaled", "signal": 9})
    );
    assert_eq!(json["containerId"], "c0ffee");
    // no temporary files left next to the state
    let names: Vec<_> = std::fs::read_dir(store.root().join("workspaces"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with(".tmp-")), "{names:?}");
}

#[test]
fn a_second_handoff_to_a_live_session_is_refused() {
    let (_s, ws, store) = setup();
    let first = begin(&store, ws.path(), Some("c1"), &running);
    let err = try_begin(&store, ws.path(), "claude", Some("c1"), false, &running).unwrap_err();
    let StateError::SessionActive { session } = &err else {
        panic!("expected SessionActive, got {err}")
    };
    assert_eq!(session.id, first.session.id);
    assert!(err.to_string().contains("agent `codex`"), "{err}");
    assert!(err.hint().unwrap().contains("--replace"));
    // the refused attempt changed nothing
    assert_eq!(store.load(ws.path()).unwrap().unwrap().sessions.len(), 1);

    let second = try_begin(&store, ws.path(), "claude", Some("c1"), true, &running).unwrap();
    let replaced = second.replaced.unwrap();
    assert_eq!(replaced.id, first.session.id);
    assert_eq!(
        replaced.outcome,
        Some(SessionOutcome::Replaced {
            by: second.session.id.clone()
        })
    );
}

#[test]
fn a_session_whose_devcell_died_is_stale_and_abandoned() {
    let (_s, ws, store) = setup();
    let dead = |_: u32, _: Option<u64>| false;
    let alive = |_: u32, _: Option<u64>| true;
    let old = begin_with(&store, ws.path(), Some("c1"), 4_000_000, &alive);
    let state = store.load(ws.path()).unwrap().unwrap();
    assert_eq!(
        session_status(&state.sessions[0], &running, &dead),
        SessionStatus::Stale
    );
    assert_eq!(
        session_status(&state.sessions[0], &stopped, &alive),
        SessionStatus::Stale
    );
    let new = begin_with(&store, ws.path(), Some("c1"), 4_000_001, &dead);
    assert_eq!(new.abandoned.len(), 1);
    assert_eq!(new.abandoned[0].id, old.session.id);
    // the old devcell comes back and records the real exit over `abandoned`
    let ended = store
        .end_session(
            ws.path(),
            &old.session.id,
            SessionOutcome::Exited { exit_code: 0 },
        )
        .unwrap();
    assert_eq!(ended.outcome, Some(SessionOutcome::Exited { exit_code: 0 }));
    // but a real recorded end is not overwritten
    let again = store
        .end_session(
            ws.path(),
            &old.session.id,
            SessionOutcome::Exited { exit_code: 5 },
        )
        .unwrap();
    assert_eq!(again.outcome, Some(SessionOutcome::Exited { exit_code: 0 }));
}

#[test]
fn a_session_without_container_yet_is_live_while_devcell_runs() {
    let (_s, ws, store) = setup();
    begin(&store, ws.path(), None, &stopped);
    let err = try_begin(&store, ws.path(), "codex", None, false, &stopped).unwrap_err();
    assert!(matches!(err, StateError::SessionActive { .. }));
}

#[test]
fn a_recycled_pid_is_not_the_session_process() {
    let me = std::process::id();
    let start = process_start_time(me);
    assert!(start.is_some(), "Linux exposes /proc/<pid>/stat");
    assert!(process_alive(me, start));
    assert!(process_alive(me, None));
    assert!(!process_alive(me, start.map(|s| s + 1)));
    let (_s, ws, store) = setup();
    let first = begin(&store, ws.path(), None, &running);
    assert_eq!(first.session.pid_start, start);
    let mut recycled = first.session.clone();
    recycled.pid_start = start.map(|s| s + 1);
    assert_eq!(
        session_status(&recycled, &running, &process_alive),
        SessionStatus::Stale
    );
}

#[test]
fn only_the_newest_ended_sessions_are_kept() {
    let session = |id: usize, ended: bool| Session {
        outcome: ended.then_some(SessionOutcome::Abandoned),
        ..session(&id.to_string(), 1)
    };
    // the oldest is unended (e.g. a live one): it survives, the next ended ones go
    let mut sessions: Vec<_> = (0..MAX_SESSIONS + 3).map(|i| session(i, i != 0)).collect();
    prune_sessions(&mut sessions);
    assert_eq!(sessions.len(), MAX_SESSIONS);
    let ids: Vec<_> = sessions.iter().take(2).map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["0", "4"]);
    assert_eq!(sessions.last().unwrap().id, (MAX_SESSIONS + 2).to_string());
}

#[test]
fn terminate_signals_only_the_recorded_process() {
    use std::os::unix::process::ExitStatusExt as _;
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    let session = Session {
        pid_start: process_start_time(pid),
        ..session("s", pid)
    };
    // a recycled pid (other start time) is left alone
    let mut other = session.clone();
    other.pid_start = session.pid_start.map(|s| s + 1);
    assert!(!terminate(&other).unwrap());
    assert!(child.try_wait().unwrap().is_none(), "still running");

    assert!(terminate(&session).unwrap());
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(15));
    assert!(!terminate(&session).unwrap(), "gone now");
}

#[test]
fn pid_liveness() {
    assert!(pid_alive(std::process::id()));
    assert!(!pid_alive(0));
    assert!(!pid_alive(u32::MAX));
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    assert!(!pid_alive(pid), "a reaped child is gone");
}

#[test]
fn corrupt_state_is_reported_with_a_hint_and_listed_apart() {
    let (_s, ws, store) = setup();
    begin(&store, ws.path(), None, &running);
    let path = store.state_path(ws.path()).unwrap();
    std::fs::write(&path, "{not json").unwrap();
    let err = store.load(ws.path()).unwrap_err();
    assert!(matches!(err, StateError::Corrupt { .. }), "{err}");
    assert!(err.hint().unwrap().contains("move"));
    let (states, errors) = store.list().unwrap();
    assert!(states.is_empty());
    assert_eq!(errors.len(), 1);
    // a failed update leaves the corrupt file as it was
    assert!(store.clear_container(ws.path()).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
}

#[test]
fn doctor_findings_list_stale_sessions_gone_workspaces_and_corrupt_files() {
    let (_s, ws, store) = setup();
    let gone = tempfile::tempdir().unwrap();
    let alive = |pid: u32, _: Option<u64>| pid != 1111;
    begin_with(&store, ws.path(), Some("c1"), 1111, &alive);
    begin_with(&store, gone.path(), None, 2222, &alive);
    store.set_container(gone.path(), None, "c2", None).unwrap();
    let gone_key = workspace_key(gone.path()).unwrap();
    drop(gone);
    std::fs::write(store.root().join("workspaces/zzzz.json"), "[]").unwrap();

    let findings = store.findings(&running, &alive).unwrap();
    let codes: Vec<_> = findings.iter().map(StateFinding::code).collect();
    assert_eq!(codes.len(), 3, "{findings:?}");
    assert!(codes.contains(&"stale_session"));
    assert!(codes.contains(&"workspace_gone"));
    assert!(codes.contains(&"corrupt_state"));
    for f in &findings {
        assert!(!f.message().is_empty() && !f.fix().is_empty());
    }
    let gone_finding = findings
        .iter()
        .find(|f| f.code() == "workspace_gone")
        .unwrap();
    assert!(
        gone_finding.message().contains("`c2`"),
        "{}",
        gone_finding.message()
    );

    store.remove_key(&gone_key).unwrap();
    store.remove_key(&gone_key).unwrap();
    let codes: Vec<_> = store
        .findings(&running, &alive)
        .unwrap()
        .iter()
        .map(|f| f.code())
        .collect();
    assert_eq!(codes, ["stale_session", "corrupt_state"]);
}

#[test]
fn session_active_maps_to_the_envelope() {
    let (_s, ws, store) = setup();
    begin(&store, ws.path(), None, &running);
    let err = try_begin(&store, ws.path(), "codex", None, false, &running).unwrap_err();
    assert_eq!(
        err.code(),
        crate::handoff::envelope::ErrorCode::SessionActive
    );
    assert_eq!(err.details()["session"]["agent"], "codex");
    assert_eq!(err.details()["session"]["pid"], std::process::id());
}

#[test]
fn status_pairs_sessions_with_their_status_and_reads_leave_no_file() {
    let (_s, ws, store) = setup();
    assert_eq!(store.status(ws.path(), &running).unwrap(), None);
    store.clear_container(ws.path()).unwrap();
    assert!(
        !store.state_path(ws.path()).unwrap().exists(),
        "a no-op update writes nothing"
    );
    let first = begin(&store, ws.path(), None, &running);
    store
        .end_session(
            ws.path(),
            &first.session.id,
            SessionOutcome::Exited { exit_code: 3 },
        )
        .unwrap();
    begin(&store, ws.path(), Some("c9"), &running);
    let (state, statuses) = store.status(ws.path(), &running).unwrap().unwrap();
    assert_eq!(state.sessions.len(), 2);
    assert_eq!(statuses, [SessionStatus::Ended, SessionStatus::Live]);
    let (_, statuses) = store.status(ws.path(), &stopped).unwrap().unwrap();
    assert_eq!(statuses, [SessionStatus::Ended, SessionStatus::Stale]);
}

#[test]
fn unknown_sessions_are_errors() {
    let (_s, ws, store) = setup();
    let err = store
        .end_session(ws.path(), "nope", SessionOutcome::Abandoned)
        .unwrap_err();
    assert!(matches!(err, StateError::NoSuchSession { .. }), "{err}");
}

#[test]
fn logs_are_private() {
    let (_s, _ws, store) = setup();
    let mut f = store.create_log("s1").unwrap();
    writeln!(f, "hello").unwrap();
    assert_eq!(mode(&store.log_path("s1")), 0o600);
    assert_eq!(mode(&store.root().join("logs")), 0o700);
}

#[test]
fn concurrent_updates_do_not_lose_sessions() {
    let (_s, ws, store) = setup();
    let alive = |_: u32, _: Option<u64>| false; // every earlier session looks stale: no refusal
    std::thread::scope(|scope| {
        for t in 0..8u32 {
            let store = store.clone();
            let ws = ws.path().to_path_buf();
            scope.spawn(move || {
                store
                    .begin_session(
                        &ws,
                        NewSession::in_container("a", None, false),
                        &running,
                        SessionProcess {
                            pid: 1000 + t,
                            pid_start: None,
                            alive: &alive,
                        },
                    )
                    .unwrap();
            });
        }
    });
    assert_eq!(store.load(ws.path()).unwrap().unwrap().sessions.len(), 8);
}

#[test]
fn the_current_session_process_is_this_one_and_judged_alive() {
    let me = SessionProcess::current();
    assert_eq!(me.pid, std::process::id());
    assert_eq!(me.pid_start, process_start_time(std::process::id()));
    assert!((me.alive)(me.pid, me.pid_start));
    assert!(!(me.alive)(me.pid, me.pid_start.map(|s| s + 1)));
}

#[test]
fn a_session_log_keeps_its_cap_then_a_marker_and_devcells_own_lines() {
    use std::io::Write as _;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("s.log");
    let mut log = SessionLog::new(std::fs::File::create(&path).unwrap(), 1 << 20);
    let chunk = vec![b'x'; 300 * 1024];
    for _ in 0..10 {
        // every write is taken whole, whatever the cap (the agent is never blocked)
        assert_eq!(log.write(&chunk).unwrap(), chunk.len());
    }
    assert_eq!(log.dropped(), 10 * 300 * 1024 - (1 << 20));
    log.note("# devcell: agent ended");
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.len() < (1 << 20) + 200, "{}", text.len());
    assert_eq!(text.bytes().filter(|b| *b == b'x').count(), 1 << 20);
    assert_eq!(text.matches("the log reached its cap of 1 MiB").count(), 1);
    assert!(text.ends_with("# devcell: agent ended\n"));
    // the cap every session log gets
    let store = StateStore::new(tmp.path());
    let _ = store.create_log("s1").unwrap();
    assert_eq!(LOG_CAP, 64 << 20);
}

/// Attack M8: a git entry that appeared since the last baseline (the agent's `tools/.git`)
/// is recorded as created when the next baseline is taken, survives every later baseline (and
/// `delete`, which keeps the state), is never adopted as a repository by discovery, and only
/// `created-git:<path>` accepts it (into the baseline, for good); a removed one is forgotten.
#[test]
fn a_created_git_entry_is_remembered_until_accepted() {
    let git_init = |dir: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(["init", "-q"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    use crate::handoff::git_identity::record;
    use crate::handoff::repository::{InspectOptions, inspect};
    let (_state, ws, store) = setup();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    git_init(&root.join("api"));
    store.set_git_identity(&root, record(&root)).unwrap();
    // the agent made `tools/.git`
    git_init(&root.join("tools"));
    let created = store.created_gits(&root, &[] as &[&str]).unwrap();
    assert!(created.is_created("tools/.git") && !created.is_created("api/.git"));
    let options = InspectOptions {
        created_git: created,
        ..InspectOptions::default()
    };
    let found = inspect(&root, &options).unwrap();
    let names: Vec<&str> = found.repos.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["api"], "tools is not adopted");
    assert!(
        found
            .warnings
            .iter()
            .any(|w| w.code == "git_dir_created" && w.message.contains("created-git:tools/.git")),
        "{:?}",
        found.warnings
    );
    // the next baseline records it, and every later one keeps it
    store.set_git_identity(&root, record(&root)).unwrap();
    store.set_git_identity(&root, record(&root)).unwrap();
    let state = store.load(&root).unwrap().unwrap();
    assert_eq!(state.created_git.iter().collect::<Vec<_>>(), ["tools/.git"]);
    assert!(
        store
            .created_gits(&root, &["created-git:api/.git"])
            .unwrap()
            .is_created("tools/.git")
    );
    // accepted: into the baseline, never created again
    let accepted = store
        .created_gits(&root, &["created-git:tools/.git"])
        .unwrap();
    assert!(!accepted.is_created("tools/.git"), "{accepted:?}");
    store.set_git_identity(&root, record(&root)).unwrap();
    assert!(
        !store
            .created_gits(&root, &[] as &[&str])
            .unwrap()
            .is_created("tools/.git")
    );
    // one removed is forgotten
    git_init(&root.join("more"));
    store.set_git_identity(&root, record(&root)).unwrap();
    assert!(
        store
            .load(&root)
            .unwrap()
            .unwrap()
            .created_git
            .contains("more/.git")
    );
    std::fs::remove_dir_all(root.join("more")).unwrap();
    store.set_git_identity(&root, record(&root)).unwrap();
    assert!(store.load(&root).unwrap().unwrap().created_git.is_empty());
}
