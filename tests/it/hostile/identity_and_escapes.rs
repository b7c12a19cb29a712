//! Hostile repositories: see `super`.

/// Classes 4 (root recognised by spelling) and 7 (a container claiming another workspace's
/// identity), and from class 8 parallel `up`s of one workspace and a killed devcell's hook
/// (spec-notes 0420–0423).
mod identity {
    use std::path::Path;
    use std::process::{Command, Output, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use crate::support::docker::{BUSYBOX_IMAGE, engine_ready};
    use crate::support::hostile::{HostTarget, HostileRepo};
    use crate::support::{devcell, git};

    /// Force-removes (with anonymous volumes) every container labelled with one of the
    /// folders, also when the test panics; removes the images it was given.
    struct Cleanup {
        folders: Vec<String>,
        images: Vec<String>,
    }

    impl Drop for Cleanup {
        fn drop(&mut self) {
            for folder in &self.folders {
                for id in containers_of(folder) {
                    let _ = Command::new("docker").args(["rm", "-fv", &id]).output();
                }
            }
            for image in &self.images {
                let _ = Command::new("docker").args(["rmi", "-f", image]).output();
            }
        }
    }

    fn cleanup(paths: &[&Path]) -> Cleanup {
        Cleanup {
            folders: paths.iter().map(|p| p.display().to_string()).collect(),
            images: Vec::new(),
        }
    }

    /// `docker ps -aq` of the containers labelled `devcontainer.local_folder=<folder>`.
    fn containers_of(folder: &str) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "-aq", "--no-trunc", "--filter"])
            .arg(format!("label=devcontainer.local_folder={folder}"))
            .output()
            .expect("docker runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// `devcell up --workspace-folder <repo>` as a child process (the environment of
    /// [`devcell`]), to run several at once or kill one.
    fn spawn_up(repo: &Path, output: fn() -> Stdio) -> std::process::Child {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("devcell"));
        cmd.env_clear()
            .env("HOME", "/home/tester")
            .env("USER", "tester")
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            cmd.env("DOCKER_HOST", host);
        }
        cmd.arg("up")
            .arg("--workspace-folder")
            .arg(repo)
            .stdout(output())
            .stderr(output())
            .spawn()
            .expect("devcell runs")
    }

    fn run(repo: &Path, command: &str, args: &[&str]) -> Output {
        devcell()
            .arg(command)
            .arg("--workspace-folder")
            .arg(repo)
            .args(args)
            .output()
            .expect("devcell runs")
    }

    fn last_json(out: &Output) -> Value {
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_else(|| {
            panic!(
                "no result line; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn up_ok(repo: &Path, args: &[&str]) -> Value {
        let out = run(repo, "up", args);
        assert!(
            out.status.success(),
            "up failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        last_json(&out)
    }

    /// `up` must fail with all of `wanted` in its message, create (or leave) no container of
    /// the repository, and leave the hook's marker (`drop/ran` in the workspace) absent.
    fn assert_refused_and_nothing_ran(repo: &HostileRepo, args: &[&str], wanted: &[&str]) {
        let out = run(repo.path(), "up", args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result = last_json(&out);
        assert_eq!(result["outcome"], "error", "{result}");
        let text = format!("{} {}", result["message"], result["description"]);
        for w in wanted {
            assert!(text.contains(w), "missing `{w}` in {text}");
        }
        let folder = repo.path().display().to_string();
        assert!(
            containers_of(&folder).is_empty(),
            "a container of {folder} exists"
        );
        assert!(
            !repo.path().join("drop/ran").exists(),
            "a hook of the repository ran"
        );
    }

    fn docker(args: &[&str]) -> String {
        let out = Command::new("docker").args(args).output().expect("docker");
        assert!(
            out.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Builds `tag` from `devcell-test/busybox:1` with `/etc/passwd` = busybox's plus an
    /// `admin` account of uid 0, and `dockerfile_tail` appended (`USER …`, a symlinked
    /// passwd, …).
    fn build_admin_image(tag: &str, passwd_path: &str, dockerfile_tail: &str) {
        let context = tempfile::tempdir().unwrap();
        let mut passwd = docker(&["run", "--rm", BUSYBOX_IMAGE, "cat", "/etc/passwd"]);
        passwd.push_str("\nadmin:x:0:0:admin:/home/admin:/bin/sh\n");
        std::fs::write(context.path().join("passwd"), passwd).unwrap();
        std::fs::write(
            context.path().join("Dockerfile"),
            format!("FROM {BUSYBOX_IMAGE}\nCOPY passwd {passwd_path}\n{dockerfile_tail}\n"),
        )
        .unwrap();
        docker(&[
            "build",
            "-q",
            "--network",
            "none",
            "-t",
            tag,
            &context.path().display().to_string(),
        ]);
    }

    /// A committed repository with `config`, and a folder `drop/` anyone may write (a hook
    /// running as root without capabilities can write nothing else of a workspace owned by
    /// [`git::WORKSPACE_OWNER`]), where hooks leave markers.
    fn repo_with(config: &str) -> HostileRepo {
        use std::os::unix::fs::PermissionsExt as _;
        let repo = HostileRepo::new();
        repo.config(&config.replace("IMAGE", BUSYBOX_IMAGE));
        repo.commit();
        let drop = repo.path().join("drop");
        std::fs::create_dir(&drop).unwrap();
        std::fs::set_permissions(&drop, std::fs::Permissions::from_mode(0o777)).unwrap();
        repo
    }

    #[test]
    fn every_spelling_of_root_is_refused_under_hardened_before_anything_runs() {
        if !engine_ready(
            "every_spelling_of_root_is_refused_under_hardened_before_anything_runs",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let host = HostTarget::new();
        let cases = [
            r#""containerUser": "00", "remoteUser": "nobody""#,
            r#""containerUser": "+0", "remoteUser": "nobody""#,
            r#""remoteUser": "-0""#,
            r#""remoteUser": "0000:1000""#,
            r#""remoteUser": "nobody", "runArgs": ["-u", "0:0"]"#,
            r#""remoteUser": "nobody", "runArgs": ["--user=root:nogroup"]"#,
        ];
        for case in cases {
            let repo = repo_with(&format!(
                r#"{{"image": "IMAGE", {case}, "postCreateCommand": "touch drop/ran"}}"#
            ));
            let _c = cleanup(&[repo.path()]);
            assert_refused_and_nothing_ran(&repo, &[], &["running as root", "--allow root"]);
        }
        host.assert_untouched();
    }

    #[test]
    fn a_passwd_name_with_uid_zero_is_root_and_allow_root_grants_it() {
        if !engine_ready(
            "a_passwd_name_with_uid_zero_is_root_and_allow_root_grants_it",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let tag = format!("devcell-test/hostile-admin:{}", std::process::id());
        build_admin_image(&tag, "/etc/passwd", "");
        let user_tag = format!("devcell-test/hostile-admin-user:{}", std::process::id());
        build_admin_image(&user_tag, "/etc/passwd", "USER admin");

        // `remoteUser: admin` (uid 0 in the image's passwd) and an image whose `USER` is admin.
        let remote = repo_with(&format!(
            r#"{{"image": "{tag}", "remoteUser": "admin", "postCreateCommand": "touch drop/ran"}}"#
        ));
        let image_user = repo_with(&format!(
            r#"{{"image": "{user_tag}", "postCreateCommand": "touch drop/ran"}}"#
        ));
        let mut guard = cleanup(&[remote.path(), image_user.path()]);
        guard.images = vec![tag.clone(), user_tag.clone()];
        assert_refused_and_nothing_ran(&remote, &[], &["running as root", "--allow root"]);
        assert_refused_and_nothing_ran(&image_user, &[], &["image `USER`", "--allow root"]);

        // Granted: the container runs, the hooks run as uid 0, and the grant is reported.
        let result = up_ok(remote.path(), &["--allow", "root"]);
        let permissions = &result["devcell"]["permissions"];
        assert!(
            permissions.as_array().unwrap().iter().any(|p| {
                p["permission"] == "root"
                    && p["status"] == "granted"
                    && p["grant"] == "--allow root"
            }),
            "{permissions}"
        );
        assert!(
            remote.path().join("drop/ran").exists(),
            "the granted hook ran"
        );
        let out = run(remote.path(), "exec", &["id", "-u"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    }

    #[test]
    fn root_the_passwd_read_cannot_see_is_caught_from_inside_and_the_container_removed() {
        if !engine_ready(
            "root_the_passwd_read_cannot_see_is_caught_from_inside_and_the_container_removed",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        // `/etc/passwd` is a symbolic link: devcell's read of the image's file gets no text,
        // the engine follows the link and resolves `admin` to uid 0.
        let tag = format!("devcell-test/hostile-admin-link:{}", std::process::id());
        build_admin_image(
            &tag,
            "/etc/passwd.real",
            "USER root\nRUN [\"/bin/ln\", \"-sf\", \"/etc/passwd.real\", \"/etc/passwd\"]",
        );
        let repo = repo_with(&format!(
            r#"{{"image": "{tag}", "remoteUser": "admin", "postCreateCommand": "touch drop/ran"}}"#
        ));
        let mut guard = cleanup(&[repo.path()]);
        guard.images = vec![tag.clone()];
        assert_refused_and_nothing_ran(&repo, &[], &["running as root", "--allow root"]);
        // With the grant, the same image comes up.
        up_ok(repo.path(), &["--allow", "root"]);
        assert!(repo.path().join("drop/ran").exists());
    }

    #[test]
    fn a_repository_cannot_set_identity_labels() {
        if !engine_ready("a_repository_cannot_set_identity_labels", BUSYBOX_IMAGE) {
            return;
        }
        let victim = HostileRepo::new();
        victim.config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#
        ));
        victim.commit();
        let v = victim.path().display().to_string();
        let v_config = format!("{v}/.devcontainer/devcontainer.json");
        let cases = [
            format!(
                r#"["--label", "devcontainer.local_folder={v}", "--label", "devcontainer.config_file={v_config}"]"#
            ),
            format!(r#"["-l", "devcontainer.local_folder={v}"]"#),
            format!(r#"["--label=devcontainer.config_file={v_config}"]"#),
            r#"["-ldevcell.remote_uid=0"]"#.to_string(),
        ];
        for run_args in cases {
            let attacker = repo_with(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "runArgs": {run_args}, "postCreateCommand": "touch drop/ran"}}"#
            ));
            let _c = cleanup(&[attacker.path(), victim.path()]);
            assert_refused_and_nothing_ran(&attacker, &[], &["identity label", "never allowed"]);
            assert!(containers_of(&v).is_empty(), "a container claims {v}");
        }
        // A `--label-file` is not accepted at all.
        let attacker = repo_with(
            r#"{"image": "IMAGE", "remoteUser": "nobody", "runArgs": ["--label-file", "labels"]}"#,
        );
        let _c = cleanup(&[attacker.path()]);
        assert_refused_and_nothing_ran(&attacker, &[], &["--label-file"]);
        // `reference` applies the configuration as written (the reference CLI's behaviour).
        let attacker = repo_with(r#"{"image": "IMAGE", "runArgs": ["-l", "devcell.claim=x"]}"#);
        let _c = cleanup(&[attacker.path()]);
        let result = up_ok(attacker.path(), &["--security-profile", "reference"]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(
            docker(&[
                "inspect",
                "-f",
                "{{index .Config.Labels \"devcell.claim\"}}",
                id
            ]),
            "x"
        );
    }

    #[test]
    fn a_container_claiming_this_workspace_without_its_bind_gets_nothing() {
        if !engine_ready(
            "a_container_claiming_this_workspace_without_its_bind_gets_nothing",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let victim = HostileRepo::new();
        victim.config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody",
                "postAttachCommand": "printf %s \"$VICTIM_SECRET\" > got-secret"}}"#
        ));
        victim.commit();
        let v = victim.path().display().to_string();
        let name = victim
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        // The decoy folder bound where the victim's workspace would be: inside the victim's
        // workspace, so the hardened re-check alone (spec-note 0270) would let it be reused.
        let decoy = victim.path().join("decoy");
        std::fs::create_dir(&decoy).unwrap();
        git::give_to_workspace_owner(&decoy);
        let decoy_before = crate::support::tree_fingerprint(&decoy);
        let _c = cleanup(&[victim.path()]);
        // A container with the victim's id labels that would pass the hardened re-check
        // (read-only root, no capabilities, no-new-privileges, limits, a non-root user, the
        // state volume), but binding the decoy instead of the workspace.
        let crafted = docker(&[
            "run",
            "-d",
            "--label",
            &format!("devcontainer.local_folder={v}"),
            "--label",
            &format!("devcontainer.config_file={v}/.devcontainer/devcontainer.json"),
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges:true",
            "--pids-limit",
            "1024",
            "--memory",
            "1g",
            "--cpus",
            "1",
            "--network",
            "none",
            "-u",
            &git::WORKSPACE_OWNER.to_string(),
            "-v",
            "/var/lib/devcell",
            "-v",
            &format!("{}:/workspaces/{name}", decoy.display()),
            "--entrypoint",
            "/bin/sh",
            BUSYBOX_IMAGE,
            "-c",
            "while sleep 1; do :; done",
        ]);
        let secrets = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secrets.path(), r#"{"VICTIM_SECRET": "victim-secret-51c"}"#).unwrap();
        let secrets_arg = secrets.path().display().to_string();

        let result = up_ok(victim.path(), &["--secrets-file", &secrets_arg]);
        let id = result["containerId"].as_str().unwrap();
        assert_ne!(id, crafted, "the crafted container was reused");
        assert_eq!(result["devcell"]["container"], "created");
        let warnings = result["devcell"]["warnings"].to_string();
        assert!(
            warnings.contains(&crafted[..12]) && warnings.contains("not used"),
            "{warnings}"
        );
        // The victim's hook and secret went to its own container, bound to its own folder.
        assert_eq!(
            std::fs::read_to_string(victim.path().join("got-secret")).unwrap(),
            "victim-secret-51c"
        );
        // `exec` too finds the victim's container, not the crafted one.
        let out = run(
            victim.path(),
            "exec",
            &[
                "--secrets-file",
                &secrets_arg,
                "sh",
                "-c",
                "printf %s \"$VICTIM_SECRET\" > exec-secret; hostname",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), &id[..12]);
        assert!(victim.path().join("exec-secret").exists());
        // Nothing reached the crafted container: its bound folder is unchanged, and no process
        // but its own entrypoint ever ran in it.
        assert_eq!(crate::support::tree_fingerprint(&decoy), decoy_before);
        let execs = docker(&["inspect", "-f", "{{len .ExecIDs}}", &crafted]);
        assert!(
            execs == "0" || execs == "<no value>",
            "execs in the crafted container: {execs}"
        );
        let _ = Command::new("docker")
            .args(["rm", "-fv", &crafted])
            .output();
    }

    #[test]
    fn parallel_ups_of_one_workspace_make_one_container_and_run_post_create_once() {
        if !engine_ready(
            "parallel_ups_of_one_workspace_make_one_container_and_run_post_create_once",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let repo = repo_with(
            r#"{"image": "IMAGE", "remoteUser": "nobody",
                "postCreateCommand": "echo run >> count; sleep 2"}"#,
        );
        let _c = cleanup(&[repo.path()]);
        let children: Vec<_> = (0..3)
            .map(|_| spawn_up(repo.path(), Stdio::piped))
            .collect();
        let ids: Vec<String> = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                last_json(&out)["containerId"].as_str().unwrap().to_string()
            })
            .collect();
        assert!(ids.iter().all(|i| i == &ids[0]), "{ids:?}");
        assert_eq!(
            containers_of(&repo.path().display().to_string()),
            [ids[0].clone()]
        );
        assert_eq!(
            std::fs::read_to_string(repo.path().join("count")).unwrap(),
            "run\n",
            "postCreateCommand ran more than once"
        );
    }

    #[test]
    fn a_killed_devcells_hook_is_stopped_before_the_next_up_starts_it_again() {
        if !engine_ready(
            "a_killed_devcells_hook_is_stopped_before_the_next_up_starts_it_again",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        // Each run records its start; a run that finds an earlier run still alive records an
        // overlap; the first run then waits long, the second ends at once.
        let script = "echo start >> starts; \
             for p in $(cat pids 2>/dev/null); do \
               if [ -d /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status; then echo $p >> overlaps; fi; \
             done; \
             echo $$ >> pids; \
             if [ ! -e first ]; then touch first; sleep 120; fi";
        let repo = repo_with(
            &serde_json::json!({
                "image": BUSYBOX_IMAGE,
                "remoteUser": "nobody",
                "postCreateCommand": script,
            })
            .to_string(),
        );
        let _c = cleanup(&[repo.path()]);
        let mut first = spawn_up(repo.path(), Stdio::null);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !repo.path().join("pids").exists() {
            assert!(Instant::now() < deadline, "the first hook never started");
            assert!(
                first.try_wait().unwrap().is_none(),
                "the first up ended early"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        first.kill().unwrap(); // SIGKILL: no cleanup in devcell
        first.wait().unwrap();
        let id = containers_of(&repo.path().display().to_string()).remove(0);
        let ps = docker(&["exec", &id, "ps", "-o", "args"]);
        assert!(ps.contains("sleep 120"), "the hook keeps running: {ps}");

        let out = run(repo.path(), "up", &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("left running by an interrupted devcell"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(repo.path().join("starts")).unwrap(),
            "start\nstart\n"
        );
        assert!(
            !repo.path().join("overlaps").exists(),
            "the second run started while the first was alive: {:?}",
            std::fs::read_to_string(repo.path().join("overlaps"))
        );
        let ps = docker(&["exec", &id, "ps", "-o", "args"]);
        assert!(
            !ps.contains("sleep 120"),
            "the first hook is still running: {ps}"
        );
        // Completed now: a third `up` runs it no more.
        up_ok(repo.path(), &[]);
        assert_eq!(
            std::fs::read_to_string(repo.path().join("starts")).unwrap(),
            "start\nstart\n"
        );
    }
}
