use std::path::Path;

use super::*;
use crate::handoff::plan::HandoffOptions;
use crate::handoff::task::test_git::{commit, empty_repo, plain_git};
use crate::mail::test_support::{escalate_rule, open_mediator};
use crate::mail::{Draft, MessageType, TaskName};
use crate::settings::MailSettings;

/// Agent `a`'s handoff of the task `task` of `source`, its state under `state`.
fn task_options(source: &Path, task: &str, state: &Path) -> HandoffOptions {
    let mut opts = HandoffOptions {
        agent: "a".into(),
        task: Some(task.into()),
        workspace_folder: source.to_path_buf(),
        state_root: Some(state.to_path_buf()),
        ..HandoffOptions::default()
    };
    opts.settings.agents.insert(
        "a".into(),
        crate::settings::AgentSettings {
            command: vec!["true".into()],
            ..crate::settings::AgentSettings::default()
        },
    );
    opts
}

/// Makes the clone task `task` of `source` (no engine: the clone and its record) and returns
/// its records.
fn make_task(source: &Path, task: &str, base: &Path) -> Vec<TaskRecord> {
    let state = base.join("state");
    let opts = task_options(source, task, &state);
    let quiet = crate::progress::NoopReporter;
    let (records, _lock) =
        crate::handoff::task::run::open_task(&opts, &state, &base.join("cache"), &quiet).unwrap();
    records
}

/// Records in `state` a session of `workspace` by the process `pid` (ended with exit 0 when
/// `ended`), its container `container`.
fn record_session(state: &Path, workspace: &Path, pid: u32, container: &str, ended: bool) {
    let session: Session = serde_json::from_value(serde_json::json!({
        "id": format!("s-{pid}"),
        "agent": "a",
        "pid": pid,
        "pidStart": crate::handoff::state::process_start_time(pid),
        "containerId": container,
        "startedAt": "2026-12-05T10:00:00Z",
        "endedAt": ended.then_some("2026-12-05T10:05:00Z"),
        "outcome": ended.then(|| serde_json::json!({"kind": "exited", "exitCode": 0})),
        "log": "/l",
    }))
    .unwrap();
    StateStore::new(state)
        .update(workspace, |s| {
            s.container_id = Some(container.to_string());
            s.sessions.push(session);
            Ok(())
        })
        .unwrap();
}

/// A mediator of `group` in `state` escalating every `handoff` message, tasks `from` and `to`
/// registered, and one such message from `from` to `to` held for the user.
fn hold_one(state: &Path, group: &str, from: &str, to: &str) {
    let settings = MailSettings {
        rules: vec![escalate_rule("*", "*", "handoff")],
        ..MailSettings::default()
    };
    let m = open_mediator(state, group, &settings);
    let t = |n: &str| TaskName::new(n).unwrap();
    m.register(&t(from), None).unwrap();
    m.register(&t(to), None).unwrap();
    m.send(
        &t(from),
        Draft::new(vec![t(to)], MessageType::Handoff, "take it", "b"),
    )
    .unwrap();
}

/// Issue 27 item 6: `status --all` lists every workspace of the state folder (one with its own
/// session and a task, one with tasks only), each task with its state, branch, container and
/// fetch, each workspace's held mail, and a mail group no workspace names; a task's clone is
/// never listed as a workspace of its own, and nothing is created or changed.
#[test]
fn status_all_lists_every_workspace_with_its_tasks_and_mail() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let state = base.join("state");
    let (api, web) = (base.join("api"), base.join("web"));
    empty_repo(&api);
    empty_repo(&web);
    record_session(&state, &api, 2_000_000_000, "c-api", true);
    // `fix`: its devcell was killed (a pid no process has), one commit not fetched
    let fix = make_task(&api, "fix", &base);
    let tip = commit(&fix[0].clone, "work.txt");
    record_session(
        &state,
        &fix[0].workspace_folder(),
        2_000_000_000,
        "c-fix",
        false,
    );
    // `live`: its devcell runs (this process); `idle`: never run
    let live = make_task(&web, "live", &base);
    record_session(
        &state,
        &live[0].workspace_folder(),
        std::process::id(),
        "c-live",
        false,
    );
    make_task(&web, "idle", &base);
    let api_key = task::source_key(&fix[0].source_git_dir);
    hold_one(&state, &api_key, "fix", "other");
    hold_one(&state, "custom", "x", "y");
    let before = plain_git(&api, &["for-each-ref"]);

    let all = status_all(Some(&state)).unwrap();
    assert!(all.warnings.is_empty(), "{:?}", all.warnings);
    let v = serde_json::to_value(&all).unwrap();
    let ws = v["workspaces"].as_array().unwrap();
    let paths: Vec<&str> = ws
        .iter()
        .map(|w| w["workspace"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        vec![api.to_str().unwrap(), web.to_str().unwrap()],
        "the two repositories, never a task's clone: {v:#}"
    );
    let (a, w) = (&ws[0], &ws[1]);
    assert_eq!(a["exists"], true);
    assert_eq!(a["container"], "c-api");
    assert_eq!(a["lastSession"]["status"], "ended");
    assert_eq!(a["lastSession"]["outcome"]["exitCode"], 0);
    let t = &a["tasks"][0];
    assert_eq!(t["task"], "fix");
    assert_eq!(t["state"], "stale", "its devcell is gone: {t:#}");
    assert_eq!(t["branch"], "devcell/fix");
    assert_eq!(t["container"], "c-fix");
    assert_eq!(t["repos"][0]["tip"], tip.as_str());
    assert_eq!(t["repos"][0]["fetched"], serde_json::Value::Null);
    assert_eq!(t["repos"][0]["fetchedAt"], serde_json::Value::Null);
    assert_eq!(t["repos"][0]["ref"], "refs/devcell/tasks/fix");
    assert_eq!(a["mail"][0]["task"], "other");
    assert_eq!(a["mail"][0]["held"], 1);
    assert_eq!(
        a["escalations"].as_array().unwrap().len(),
        0,
        "no command set"
    );

    assert_eq!(w["container"], serde_json::Value::Null);
    assert_eq!(w["lastSession"], serde_json::Value::Null);
    let states: Vec<(&str, &str)> = w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["task"].as_str().unwrap(), t["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, vec![("idle", "new"), ("live", "live")]);
    assert_eq!(w["tasks"][1]["container"], "c-live");
    assert!(w["mail"].as_array().unwrap().is_empty());

    assert_eq!(v["mailGroups"][0]["group"], "custom");
    assert_eq!(v["mailGroups"][0]["mail"][0]["task"], "y");
    assert_eq!(
        plain_git(&api, &["for-each-ref"]),
        before,
        "nothing fetched"
    );
}

/// A state folder devcell never wrote lists nothing and is not made.
#[test]
fn status_all_of_an_empty_state_folder_lists_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let all = status_all(Some(&state)).unwrap();
    assert!(all.workspaces.is_empty() && all.mail_groups.is_empty());
    assert!(!state.exists());
}

/// Issue 27: a task whose repository was replaced by another at its path, or removed, is
/// still listed (so it can be removed), marked `replaced` or `gone`, its fetch state as
/// recorded; a task of the repository now at the path is `present`.
#[test]
fn status_all_lists_tasks_of_a_replaced_or_removed_repository_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let state = base.join("state");
    let (a, b) = (base.join("a"), base.join("b"));
    empty_repo(&a);
    empty_repo(&b);
    make_task(&a, "old", &base);
    make_task(&b, "lost", &base);
    std::fs::remove_dir_all(&a).unwrap();
    empty_repo(&a);
    make_task(&a, "new", &base);
    std::fs::remove_dir_all(&b).unwrap();

    let all = status_all(Some(&state)).unwrap();
    let v = serde_json::to_value(&all).unwrap();
    let tasks_of = |w: &Path| -> Vec<(String, String)> {
        let entry = all
            .workspaces
            .iter()
            .find(|e| e.workspace == w)
            .unwrap_or_else(|| panic!("{} not listed: {v:#}", w.display()));
        entry
            .tasks
            .iter()
            .map(|t| {
                let state = serde_json::to_value(t.repository).unwrap();
                (t.task.clone(), state.as_str().unwrap().to_string())
            })
            .collect()
    };
    assert_eq!(
        tasks_of(&a),
        [
            ("new".to_string(), "present".to_string()),
            ("old".to_string(), "replaced".to_string())
        ],
        "{v:#}"
    );
    assert_eq!(
        tasks_of(&b),
        [("lost".to_string(), "gone".to_string())],
        "{v:#}"
    );
    let lost = &all.workspaces.iter().find(|e| e.workspace == b).unwrap();
    assert!(!lost.exists);
    assert_eq!(
        lost.tasks[0].repos[0].fetch.behind, None,
        "no repository asked"
    );
}
