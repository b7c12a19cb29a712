//! Hostile repositories: see `super`. A container keeps running after `up`: every command that
//! runs container code against the hardened workspace (`exec`, `run-user-commands`, a process
//! left running until `down`) can make a git directory where the user runs git. Each of those
//! commands moves aside what was made since `up` (spec-note 0466).

use crate::support::deadline::Bounded as _;
use crate::support::{docker::BUSYBOX_IMAGE, hostile::HostileRepo};

use super::workspace_git::host_git_status;

/// A script that makes, at its argument, a git directory whose `core.fsmonitor` touches
/// `marker` (on the host, if the host's git ever reads it).
fn plant_script(marker: &std::path::Path) -> String {
    format!(
        "mkdir -p $1/objects $1/refs && echo 'ref: refs/heads/main' > $1/HEAD && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch {m}; false\"\\n' > $1/config\n",
        m = marker.display()
    )
}

/// `devcell <command> --workspace-folder <repo> <rest…>` with `state` as devcell's state.
fn devcell_in<'a>(
    repo: &'a HostileRepo,
    state: &'a std::path::Path,
) -> impl Fn(&[&str]) -> crate::support::context::Run + 'a {
    move |args: &[&str]| {
        let (command, rest) = args.split_first().unwrap();
        repo.context()
            .command()
            .env("DEVCELL_STATE_DIR", state)
            .arg(command)
            .arg("--workspace-folder")
            .arg(repo.path())
            .args(rest)
            .long_output()
            .expect("devcell runs")
            .into()
    }
}

/// Issue 25 class 1, after `up`: a repository's `postAttachCommand` (run by `up` and again by
/// each `run-user-commands`), an `exec`, and a process an `exec` left running until `down`
/// each make a git directory with `core.fsmonitor` in a new folder. Each command moves what
/// was made since `up` into devcell's state and says so (`quarantinedGit` in the JSON of
/// `run-user-commands` and `down`, a `git_dir_quarantined` warning for `exec`); the user's
/// `git status` at the root and in each folder runs nothing.
#[test]
fn git_directories_made_after_up_are_moved_aside_by_exec_run_user_commands_and_down() {
    let Some(repo) = HostileRepo::busybox(
        "git_directories_made_after_up_are_moved_aside_by_exec_run_user_commands_and_down",
    ) else {
        return;
    };
    let target = crate::support::hostile::HostTarget::new();
    let plant = plant_script(&target.marker());
    // a new folder each time the hook runs
    let hook =
        "n=$(cat .n 2>/dev/null || echo 0); n=$((n+1)); echo $n > .n; sh plant.sh hook$n/.git";
    repo.config(
        &serde_json::json!({"image": BUSYBOX_IMAGE, "postAttachCommand": hook}).to_string(),
    )
    .file("plant.sh", &plant);
    repo.commit();
    let state = tempfile::tempdir().unwrap();
    let devcell = devcell_in(&repo, state.path());
    let moved_paths = |json: &serde_json::Value| -> Vec<String> {
        json["quarantinedGit"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|q| q["path"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let up = devcell(&["up"]);
    up.ok();
    assert_eq!(
        moved_paths(&up.last_json()["devcell"]),
        ["hook1/.git"],
        "{}",
        up.stderr
    );

    // exec
    let exec = devcell(&[
        "exec",
        "sh",
        "-c",
        "sh plant.sh viaexec/.git && echo planted",
    ]);
    exec.ok();
    assert!(exec.stdout.contains("planted"), "{}", exec.stderr);
    assert!(
        !repo.path().join("viaexec/.git").exists(),
        "{}",
        exec.stderr
    );
    assert!(
        exec.stderr.contains("git_dir_quarantined"),
        "{}",
        exec.stderr
    );
    assert!(exec.stderr.contains("viaexec/.git"), "{}", exec.stderr);

    // run-user-commands
    let ruc = devcell(&["run-user-commands"]);
    ruc.ok();
    assert!(
        repo.path().join("hook2").is_dir(),
        "the hook ran: {}",
        ruc.stderr
    );
    assert!(!repo.path().join("hook2/.git").exists(), "{}", ruc.stderr);
    assert_eq!(
        moved_paths(&ruc.last_json()["devcell"]),
        ["hook2/.git"],
        "{}",
        ruc.stderr
    );

    // a process left running plants once the exec is over; `down` finds it
    let left = devcell(&[
        "exec",
        "sh",
        "-c",
        "setsid sh -c 'while [ ! -f go ]; do sleep 0.1; done; sh plant.sh late/.git; touch planted' </dev/null >/dev/null 2>&1 &",
    ]);
    left.ok();
    std::fs::write(repo.path().join("go"), "").unwrap();
    let planted = repo.path().join("planted");
    for _ in 0..600 {
        if planted.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(planted.exists(), "the left process planted");
    assert!(repo.path().join("late/.git/config").is_file());
    let down = devcell(&["down"]);
    down.ok();
    assert_eq!(
        moved_paths(&down.last_json()),
        ["late/.git"],
        "{}",
        down.stderr
    );
    assert!(!repo.path().join("late/.git").exists());
    for moved in ["hook1/.git", "viaexec/.git", "hook2/.git", "late/.git"] {
        assert!(!repo.path().join(moved).exists(), "{moved}");
    }

    for dir in ["", "hook1", "viaexec", "hook2", "late"] {
        let dir = repo.path().join(dir);
        if dir.is_dir() {
            host_git_status(&dir);
        }
    }
    target.assert_untouched();
}

/// Issue 25 class 1, `set-up`: the hooks of a container devcell did not create (so could not
/// cover) make a git directory with `core.fsmonitor` in the workspace it binds; under
/// `hardened` it is moved into devcell's state once they ran and named in the result's
/// `devcell.quarantinedGit` (spec-note 0466); the user's `git status` runs nothing.
#[test]
fn a_git_directory_set_ups_hooks_make_is_moved_aside() {
    let Some(ctx) = crate::support::context::TestContext::busybox(
        "a_git_directory_set_ups_hooks_make_is_moved_aside",
    ) else {
        return;
    };
    let ctx = ctx.isolated();
    let target = crate::support::hostile::HostTarget::new();
    ctx.write("plant.sh", &plant_script(&target.marker()));
    crate::support::git::git(ctx.path(), &["init", "-q"]);
    crate::support::git::git(ctx.path(), &["add", "-A"]);
    crate::support::git::git(ctx.path(), &["commit", "-q", "-m", "c1"]);
    let ws = std::fs::canonicalize(ctx.path()).unwrap();
    let c = crate::support::docker::TestContainer::run_with(
        &[
            "--network",
            "none",
            "-v",
            &format!("{}:/workspace", ws.display()),
        ],
        BUSYBOX_IMAGE,
        &["sleep", "600"],
    );
    let config = ctx.tmp().join("set-up.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "workspaceFolder": "/workspace",
            "postAttachCommand": "sh plant.sh viasetup/.git && echo planted",
        })
        .to_string(),
    )
    .unwrap();
    let out = ctx
        .command()
        .args(["set-up", "--container-id", &c.id, "--config"])
        .arg(&config)
        .long_output()
        .expect("devcell runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let result: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert!(
        stderr.contains("planted") && ws.join("viasetup").is_dir(),
        "the hook ran: {stderr}"
    );
    assert!(!ws.join("viasetup/.git").exists(), "{stderr}");
    assert_eq!(
        result["devcell"]["quarantinedGit"][0]["path"], "viasetup/.git",
        "{result}"
    );
    for dir in [ws.clone(), ws.join("viasetup")] {
        host_git_status(&dir);
    }
    target.assert_untouched();
}

/// Attack O1: a process a hook left running makes `late/.git` after `up` returned; the next
/// `up` (reusing the running container) moves it aside before its own walk, which would
/// otherwise take it as the user's, bind it read-only as such and record it. The user's
/// `git status` there runs nothing.
#[test]
fn the_next_up_moves_aside_what_a_process_left_running_made() {
    late_plant_moved_aside(
        "the_next_up_moves_aside_what_a_process_left_running_made",
        "",
        &["up"],
    );
}

/// Attack P9: the hook that left the process running then fails, so `up` fails and leaves the
/// container running. `up` records the workspace's git entries before the first hook runs, so
/// the next `exec` still moves aside what the process made; without the record nothing ever
/// walked that container again.
#[test]
fn a_failed_up_still_records_so_exec_moves_aside_what_its_hook_left() {
    late_plant_moved_aside(
        "a_failed_up_still_records_so_exec_moves_aside_what_its_hook_left",
        " exit 1",
        &["exec", "true"],
    );
}

/// A `postStartCommand` (`hook_tail` appended) leaves a process that makes `late/.git` once
/// the test says go; `then` (a devcell command) moves it aside and says so; the user's
/// `git status` there runs nothing.
fn late_plant_moved_aside(name: &str, hook_tail: &str, then: &[&str]) {
    let Some(repo) = HostileRepo::busybox(name) else {
        return;
    };
    let target = crate::support::hostile::HostTarget::new();
    let plant = plant_script(&target.marker());
    let hook = format!(
        "setsid sh -c 'while [ ! -f go ]; do sleep 0.1; done; sh plant.sh late/.git; touch planted' </dev/null >/dev/null 2>&1 &{hook_tail}"
    );
    repo.config(&serde_json::json!({"image": BUSYBOX_IMAGE, "postStartCommand": hook}).to_string())
        .file("plant.sh", &plant);
    repo.commit();
    let state = tempfile::tempdir().unwrap();
    let devcell = devcell_in(&repo, state.path());
    let up = devcell(&["up"]);
    assert_eq!(up.code == Some(0), hook_tail.is_empty(), "{}", up.stderr);
    std::fs::write(repo.path().join("go"), "").unwrap();
    let planted = repo.path().join("planted");
    for _ in 0..600 {
        if planted.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(planted.exists(), "the left process planted");
    assert!(repo.path().join("late/.git/config").is_file());
    let again = devcell(then);
    again.ok();
    assert!(!repo.path().join("late/.git").exists(), "{}", again.stderr);
    let said = format!("{}{}", again.stdout, again.stderr);
    assert!(said.contains("git_dir_quarantined"), "{said}");
    assert!(said.contains("late/.git"), "{said}");
    host_git_status(&repo.path().join("late"));
    host_git_status(repo.path());
    let _ = devcell(&["down", "--remove"]);
    target.assert_untouched();
}

/// Attacks P2 and P7: a process the old container left running re-makes `src/.git` every
/// millisecond while `up --remove-existing-container` reads the workspace (4,000 folders walked
/// before `src` widen the window). The old container is now stopped before the first walk, so
/// what it made is moved aside and never taken as the user's: no record of the workspace names
/// `src/.git`, and the new container does not get it covered read-only as the user's.
#[test]
fn remove_existing_container_stops_the_old_container_before_walking_the_workspace() {
    let Some(repo) = HostileRepo::busybox(
        "remove_existing_container_stops_the_old_container_before_walking_the_workspace",
    ) else {
        return;
    };
    let target = crate::support::hostile::HostTarget::new();
    let plant = plant_script(&target.marker());
    let hook = "setsid sh -c 'while :; do if [ ! -e src/.git ]; then sh plant.sh src/.gx && mv src/.gx src/.git; fi; usleep 1000; done' </dev/null >/dev/null 2>&1 &";
    repo.config(&serde_json::json!({"image": BUSYBOX_IMAGE, "postStartCommand": hook}).to_string())
        .file("plant.sh", &plant)
        .file("src/main.c", "int main(void) { return 0; }\n");
    repo.commit();
    for n in 0..4000 {
        std::fs::create_dir_all(repo.path().join(format!("aaa/d{n}"))).unwrap();
    }
    let state = tempfile::tempdir().unwrap();
    let devcell = devcell_in(&repo, state.path());
    devcell(&["up"]).ok();
    let again = devcell(&["up", "--remove-existing-container"]);
    again.ok();
    assert!(
        again.stderr.contains("before reading the workspace"),
        "{}",
        again.stderr
    );
    let notice = again
        .stderr
        .lines()
        .find(|l| l.contains("are read-only in the container"))
        .unwrap_or_default();
    assert!(!notice.contains("src/.git"), "{}", again.stderr);
    let records = std::fs::read_dir(state.path().join("git-baseline")).unwrap();
    for record in records {
        let text = std::fs::read_to_string(record.unwrap().path()).unwrap();
        assert!(!text.contains("src/.git"), "taken as the user's: {text}");
    }
    let _ = devcell(&["down", "--remove"]);
}
