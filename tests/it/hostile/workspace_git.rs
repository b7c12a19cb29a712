//! Hostile repositories: see `super`. The workspace's git folder is writable from the
//! container (all of it but `config`, `hooks`, `info/` and the link files, spec-note 0413): a
//! `HEAD` it replaces with a FIFO, or a configuration of a repository it creates that
//! `[include]`s one, must not make the host's git, and every devcell command with it, wait for
//! ever (spec-note 0433).

use std::time::Duration;

use crate::support::{self, docker::BUSYBOX_IMAGE, hostile::HostileRepo};

fn mkfifo(path: &std::path::Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from(0o644)).unwrap();
}

#[test]
fn a_fifo_in_the_workspaces_git_folder_does_not_hang_devcell() {
    // a repository whose `HEAD` the container replaced with a FIFO
    let head = HostileRepo::new();
    head.config(&format!("{{\"image\": \"{BUSYBOX_IMAGE}\"}}"))
        .commit();
    std::fs::remove_file(head.path().join(".git/HEAD")).unwrap();
    mkfifo(&head.path().join(".git/HEAD"));

    // a plain workspace in which the container made a repository including a FIFO
    let plain = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(plain.path().join(".devcontainer")).unwrap();
    std::fs::write(
        plain.path().join(".devcontainer/devcontainer.json"),
        format!("{{\"image\": \"{BUSYBOX_IMAGE}\"}}"),
    )
    .unwrap();
    support::git::git(plain.path(), &["init", "-q"]);
    mkfifo(&plain.path().join(".git/pipe"));
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(plain.path().join(".git/config"))
        .unwrap();
    std::io::Write::write_all(&mut config, b"[include]\n\tpath = pipe\n").unwrap();

    for ws in [head.path(), plain.path()] {
        for command in ["read-configuration", "status"] {
            let out = support::devcell()
                .arg(command)
                .arg("--workspace-folder")
                .arg(ws)
                // each git call that waits on the FIFO is killed after 1 s (the variable only
                // shortens devcell's 10 s deadline); far above that, a hang is killed
                .env("DEVCELL_GIT_DEADLINE_SECS", "1")
                .timeout(Duration::from_secs(150))
                .output()
                .expect("devcell runs");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.code().is_some(),
                "`{command}` in {} was killed: it waited on the FIFO: {stderr}",
                ws.display()
            );
            assert!(
                out.status.success(),
                "`{command}` in {}: {stderr}",
                ws.display()
            );
        }
    }
}
