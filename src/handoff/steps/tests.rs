use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

fn alive(_: u32, _: Option<u64>) -> bool {
    true
}

fn gone(_: u32, _: Option<u64>) -> bool {
    false
}

fn holder(pid: u32, taken_at: u64) -> Holder {
    Holder {
        pid,
        pid_start: None,
        taken_at,
        token: format!("t{pid}"),
    }
}

/// Two threads (two holders) take one workspace's lock at once: never both inside, the
/// second waits for the first, and the step the first marks done is not run by the second.
#[test]
fn two_takers_at_once_run_the_step_once_the_second_waiting_for_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("lock.json");
    let marker = dir.path().join("workspace.json");
    let inside = Arc::new(AtomicBool::new(false));
    let ran = Arc::new(AtomicUsize::new(0));
    let waited = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (record, marker) = (record.clone(), marker.clone());
            let (inside, ran, waited) = (inside.clone(), ran.clone(), waited.clone());
            std::thread::spawn(move || {
                let me = Holder::current();
                let rules = LockRules::default();
                let (lock, takeover) = loop {
                    match try_lock(&record, &me, rules).unwrap() {
                        Ok(taken) => break taken,
                        Err(h) => {
                            assert_ne!(h.token, me.token);
                            waited.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                };
                assert!(takeover.is_none(), "a live holder is never taken over");
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                if !marker.exists() {
                    std::thread::sleep(Duration::from_millis(300));
                    ran.fetch_add(1, Ordering::SeqCst);
                    std::fs::write(&marker, "done").unwrap();
                }
                inside.store(false, Ordering::SeqCst);
                drop(lock);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the step ran once");
    assert!(waited.load(Ordering::SeqCst) > 0, "the second waited");
    assert!(!record.exists(), "the last holder let go");
}

/// A holder whose process is gone, or who held the lock past the bound, is taken over and
/// the takeover names it; a live holder within the bound is waited for.
#[test]
fn a_stale_holder_is_taken_over_and_named_a_live_one_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("lock.json");
    let now = unix_now();
    std::fs::write(&record, serde_json::to_vec(&holder(4242, now)).unwrap()).unwrap();
    let live = LockRules {
        alive,
        ..LockRules::default()
    };
    let me = Holder::current();
    let held = try_lock(&record, &me, live).unwrap().unwrap_err();
    assert_eq!(held.pid, 4242, "live and fresh: waited for");

    let dead = LockRules {
        alive: gone,
        ..LockRules::default()
    };
    let (lock, takeover) = try_lock(&record, &me, dead).unwrap().unwrap();
    let takeover = takeover.expect("taken over");
    assert_eq!(takeover.reason, Stale::Gone);
    assert_eq!(takeover.holder.as_ref().map(|h| h.pid), Some(4242));
    assert!(
        takeover.sentence().contains("4242"),
        "{}",
        takeover.sentence()
    );
    assert!(
        takeover.sentence().contains("gone"),
        "{}",
        takeover.sentence()
    );
    drop(lock);
    assert!(!record.exists());

    // alive, but older than the bound
    std::fs::write(
        &record,
        serde_json::to_vec(&holder(4243, now - STALE_AFTER.as_secs() - 1)).unwrap(),
    )
    .unwrap();
    let (_lock, takeover) = try_lock(&record, &me, live).unwrap().unwrap();
    assert_eq!(takeover.unwrap().reason, Stale::Expired);

    // an unreadable record is taken over too
    let other = dir.path().join("other.json");
    std::fs::write(&other, "not json").unwrap();
    let (_l, takeover) = try_lock(&other, &me, live).unwrap().unwrap();
    assert_eq!(takeover.unwrap().reason, Stale::Unreadable);
}

/// A holder whose lock was taken over does not remove its successor's record when it lets go.
#[test]
fn letting_go_after_a_takeover_keeps_the_successors_lock() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("lock.json");
    let first = holder(1, unix_now() - STALE_AFTER.as_secs() - 10);
    let (first_lock, _) = try_lock(&record, &first, LockRules::default())
        .unwrap()
        .unwrap();
    let second = Holder::current();
    let (second_lock, takeover) = try_lock(
        &record,
        &second,
        LockRules {
            alive,
            ..LockRules::default()
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(takeover.unwrap().reason, Stale::Expired);
    drop(first_lock);
    assert_eq!(read_holder(&record).unwrap(), Some(second.clone()));
    drop(second_lock);
    assert!(!record.exists());
}

#[test]
fn steps_are_a_string_or_a_list_and_anything_else_is_named() {
    let v = serde_json::json!({"customizations": {"devcell": {
        "afterStart": "echo a", "onWorkspaceCreate": ["echo b", "echo c"]}}});
    let s = Steps::of(&v).unwrap();
    assert_eq!(s.after_start, ["echo a"]);
    assert_eq!(s.on_workspace_create, ["echo b", "echo c"]);
    assert!(Steps::of(&serde_json::json!({})).unwrap().is_empty());
    let bad = serde_json::json!({"customizations": {"devcell": {"onWorkspaceCreate": [1]}}});
    let e = Steps::of(&bad).unwrap_err().to_string();
    assert!(
        e.contains("customizations.devcell.onWorkspaceCreate"),
        "{e}"
    );
}

/// The markers live in the state folder given, keyed by container for `afterStart`; a
/// changed list is not done.
#[test]
fn markers_are_per_container_and_per_workspace_and_keyed_by_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = records_folder(dir.path(), "k").unwrap();
    assert!(d.starts_with(dir.path().join("steps")));
    let a = marker_path(&d, AFTER_START, "abc/../x");
    assert_eq!(a, d.join("containers").join("abcx.json"));
    let w = marker_path(&d, ON_WORKSPACE_CREATE, "abc");
    let m = Marker {
        commands: digest(&["echo b".into()]),
        container_id: "abc".into(),
        done_at: String::new(),
    };
    std::fs::write(&w, serde_json::to_vec(&m).unwrap()).unwrap();
    assert!(done(&w, &["echo b".into()]));
    assert!(!done(&w, &["echo c".into()]));
    assert!(!done(&a, &["echo b".into()]));
}

/// A failing step that printed 5 MiB (attack 26 Q3: 400 MB made devcell hold 4 GB) yields
/// the end of its output, within the bound and marked cut; its argv stops through the pid file.
#[tokio::test]
async fn a_failing_steps_flood_is_kept_to_its_end_within_the_bound() {
    let engine = crate::engine::fake::FakeEngine::new();
    let id = engine.add_container(&crate::engine::ContainerSpec::default(), true);
    let mut stdout = vec![b'a'; 5 * 1024 * 1024];
    stdout.extend_from_slice(b"\nthe last words\n");
    engine.reply_to_execs(crate::engine::ExecResult {
        exit_code: 3,
        stdout,
        ..Default::default()
    });
    let target = StepTarget {
        container_id: &id,
        user: "1000:1000".into(),
        working_dir: "/workspaces/w",
        env: IndexMap::new(),
        pidfile: "/tmp/.devcell-step-s.pid".into(),
    };
    let commands = vec!["flood".to_string()];
    let err = run_phase(
        &engine,
        AFTER_START,
        &commands,
        &target,
        &crate::progress::NoopReporter,
    )
    .await
    .unwrap_err();
    let StepError::Failed { output_tail, .. } = err else {
        panic!("{err}")
    };
    assert_eq!(output_tail.first().map(String::as_str), Some(CUT_NOTE));
    assert_eq!(
        output_tail.last().map(String::as_str),
        Some("the last words")
    );
    let kept: usize = output_tail.iter().map(String::len).sum();
    assert!(
        kept <= 2 * crate::diagnostics::MAX_OUTPUT_LINE,
        "kept {kept}"
    );
    let argv = &engine.execs()[0].request.argv;
    assert_eq!(argv[3..], ["/tmp/.devcell-step-s.pid", "flood"]);
}
