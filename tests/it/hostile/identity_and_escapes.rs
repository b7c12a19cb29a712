//! Hostile repositories: see `super`.

/// Classes 4 (root recognised by spelling) and 7 (a container claiming another workspace's
/// identity), and from class 8 parallel `up`s of one workspace and a killed devcell's hook
/// (spec-notes 0420–0423).
mod identity {
    use crate::support::deadline::Bounded as _;
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
                    let _ = Command::new("docker")
                        .args(["rm", "-fv", &id])
                        .bounded_output();
                }
            }
            for image in &self.images {
                let _ = Command::new("docker")
                    .args(["rmi", "-f", image])
                    .bounded_output();
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
            .bounded_output()
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
    /// Returns what `up` printed.
    fn assert_refused_and_nothing_ran(
        repo: &HostileRepo,
        args: &[&str],
        wanted: &[&str],
    ) -> Output {
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
        out
    }

    /// A second `up` of `repo` (whose container exists) must be refused for running as root,
    /// `exec` must not run, and the marker (`drop/ran`) stays absent; `what` names the case.
    fn assert_reuse_and_exec_refused(repo: &HostileRepo, what: &str) {
        let out = run(repo.path(), "up", &[]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        assert!(
            text.contains("running as root") && text.contains("--allow root"),
            "{what}: {text}"
        );
        let out = run(repo.path(), "exec", &["touch", "drop/ran"]);
        assert_ne!(out.status.code(), Some(0), "{what}: exec ran");
        assert!(
            !repo.path().join("drop/ran").exists(),
            "{what}: a command of the repository ran"
        );
    }

    fn docker(args: &[&str]) -> String {
        let out = Command::new("docker")
            .args(args)
            .bounded_output()
            .expect("docker");
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
        build_admin_image_with(tag, passwd_path, dockerfile_tail, &[]);
    }

    /// [`build_admin_image`] with `files` (name, content; mode 0755) in the build context.
    fn build_admin_image_with(
        tag: &str,
        passwd_path: &str,
        dockerfile_tail: &str,
        files: &[(&str, &str)],
    ) {
        use std::os::unix::fs::PermissionsExt as _;
        let context = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = context.path().join(name);
            std::fs::write(&path, content).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
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
            // past the uid range: runc would take an entry with that id and truncate it to 0
            r#""containerUser": "65534", "remoteUser": "4294967296""#,
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
        let tag = format!("devcell-test/hostile-admin:{}", crate::support::run_token());
        build_admin_image(&tag, "/etc/passwd", "");
        let user_tag = format!(
            "devcell-test/hostile-admin-user:{}",
            crate::support::run_token()
        );
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
        // An image whose `USER` is `admin` (uid 0) with no user named is a root image: it runs
        // as the non-root user devcell provides, never as uid 0 (spec-note 0188).
        let provided = up_ok(image_user.path(), &[]);
        assert_eq!(provided["devcell"]["providedUser"], "devcell", "{provided}");
        assert!(image_user.path().join("drop/ran").exists(), "the hook ran");
        let out = run(image_user.path(), "exec", &["id", "-u"]);
        let uid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(uid.parse::<u32>().is_ok_and(|u| u != 0), "{uid}");

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

    /// `/etc/passwd` is a symbolic link whose target is no file in the image (a tmpfs path at
    /// run time): no passwd devcell can read, so the named remote user cannot be judged and
    /// counts as root, before any container exists.
    #[test]
    fn a_name_no_readable_passwd_resolves_is_refused_before_a_container_exists() {
        if !engine_ready(
            "a_name_no_readable_passwd_resolves_is_refused_before_a_container_exists",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let tag = format!(
            "devcell-test/hostile-admin-dangling:{}",
            crate::support::run_token()
        );
        build_admin_image(
            &tag,
            "/etc/passwd.real",
            "USER root\nRUN [\"/bin/ln\", \"-sf\", \"/tmp/passwd\", \"/etc/passwd\"]",
        );
        let repo = repo_with(&format!(
            r#"{{"image": "{tag}", "containerUser": "65534", "remoteUser": "admin", "updateRemoteUserUID": false, "postCreateCommand": "touch drop/ran"}}"#
        ));
        let mut guard = cleanup(&[repo.path()]);
        guard.images = vec![tag.clone()];
        let out = assert_refused_and_nothing_ran(&repo, &[], &["running as root", "--allow root"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("`/etc/passwd` could not be read as a regular file"),
            "{stderr}"
        );
    }

    /// `/etc/passwd` is a symbolic link to a regular file of the image (as in images that keep
    /// their passwd elsewhere): devcell reads the file the link resolves to, as the engine does,
    /// so a non-root name is judged by its uid and comes up; a uid-0 name is refused.
    #[test]
    fn a_linked_passwd_is_read_where_the_engine_reads_it() {
        if !engine_ready(
            "a_linked_passwd_is_read_where_the_engine_reads_it",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let tag = format!("devcell-test/hostile-admin-link:{}", std::process::id());
        build_admin_image(
            &tag,
            "/etc/passwd.real",
            "USER root\nRUN [\"/bin/ln\", \"-sf\", \"passwd.real\", \"/etc/passwd\"]",
        );
        let repo = repo_with(&format!(
            r#"{{"image": "{tag}", "remoteUser": "admin", "postCreateCommand": "touch drop/ran"}}"#
        ));
        let mut guard = cleanup(&[repo.path()]);
        guard.images = vec![tag.clone()];
        assert_refused_and_nothing_ran(&repo, &[], &["running as root", "--allow root"]);
        // `nobody` (65534 in the same linked file) is no permission request
        let repo = repo_with(&format!(
            r#"{{"image": "{tag}", "remoteUser": "nobody", "postCreateCommand": "id -u > drop/ran"}}"#
        ));
        let _c = cleanup(&[repo.path()]);
        up_ok(repo.path(), &[]);
        // 65534, or the workspace owner's uid the `updateRemoteUserUID` layer gives `nobody`
        let uid = std::fs::read_to_string(repo.path().join("drop/ran")).unwrap();
        assert!(uid.trim().parse::<u32>().is_ok_and(|u| u != 0), "{uid}");
    }

    #[test]
    fn a_lying_shell_cannot_hide_the_root_a_linked_passwd_gives_the_remote_user() {
        if !engine_ready(
            "a_lying_shell_cannot_hide_the_root_a_linked_passwd_gives_the_remote_user",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let tag = format!("devcell-test/hostile-lying-sh:{}", std::process::id());
        let lying_sh = "#!/bin/busybox ash\ncase \"$2\" in *proc/self/status*) echo '65534 65534 65534 65534'; exit 0;; esac\nexec /bin/busybox ash \"$@\"\n";
        build_admin_image_with(
            &tag,
            "/etc/passwd.real",
            "USER root\nRUN [\"/bin/ln\", \"-sf\", \"/etc/passwd.real\", \"/etc/passwd\"]\nRUN [\"/bin/rm\", \"-f\", \"/bin/sh\"]\nCOPY sh /bin/sh",
            &[("sh", lying_sh)],
        );
        // the lie works: as uid 0, the shell says 65534
        let said = docker(&[
            "run",
            "--rm",
            "--network",
            "none",
            &tag,
            "/bin/sh",
            "-c",
            devcell::ops::users::UID_SCRIPT,
        ]);
        assert_eq!(said.trim(), "65534 65534 65534 65534");
        let repo = repo_with(&format!(
            r#"{{"image": "{tag}", "containerUser": "65534", "remoteUser": "admin", "postCreateCommand": "touch drop/ran"}}"#
        ));
        let mut guard = cleanup(&[repo.path()]);
        guard.images = vec![tag.clone()];
        // judged from the file the link resolves to (uid 0), not by the lying shell
        assert_refused_and_nothing_ran(&repo, &[], &["running as root", "--allow root"]);
    }

    /// A container that came up without a remote user, from an image whose `/etc/passwd` is a
    /// link (to a file giving `admin` uid 0 and `big` the uid 4294967296, which runc truncates
    /// to 0): a later configuration naming either as `remoteUser` cannot reuse it, and `exec`
    /// cannot run as them; no hook or command of theirs runs.
    #[test]
    fn a_reused_container_judges_a_new_remote_user_it_cannot_read_as_root() {
        if !engine_ready(
            "a_reused_container_judges_a_new_remote_user_it_cannot_read_as_root",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let tag = format!("devcell-test/hostile-admin-reuse:{}", std::process::id());
        build_admin_image(
            &tag,
            "/etc/passwd.real",
            "USER root\nRUN [\"/bin/sh\", \"-c\", \"echo big:x:4294967296:4294967296::/tmp:/bin/sh >> /etc/passwd.real && ln -sf /etc/passwd.real /etc/passwd\"]\nUSER 65534",
        );
        let repo = repo_with(&format!(r#"{{"image": "{tag}"}}"#));
        let mut guard = cleanup(&[repo.path()]);
        guard.images = vec![tag.clone()];
        let first = up_ok(repo.path(), &[]);
        let id = first["containerId"].as_str().unwrap().to_string();
        for user in ["admin", "4294967296"] {
            repo.config(&format!(
                r#"{{"image": "{tag}", "remoteUser": "{user}", "postAttachCommand": "touch drop/ran"}}"#
            ));
            assert_reuse_and_exec_refused(&repo, user);
        }
        // the container is the one the first `up` made, left as it was
        assert_eq!(containers_of(&repo.path().display().to_string()), [id]);
    }

    /// The repository binds its own `/etc/passwd` over the image's (where `admin` is uid 0) to
    /// say `admin` is 1000: the engine resolves exec users in the image's file, not the mount.
    /// A later `remoteUser: admin` cannot reuse the container, and `exec` cannot run as it.
    #[test]
    fn a_passwd_the_repository_mounts_does_not_vouch_for_the_remote_user() {
        if !engine_ready(
            "a_passwd_the_repository_mounts_does_not_vouch_for_the_remote_user",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let tag = format!("devcell-test/hostile-admin-mounted:{}", std::process::id());
        build_admin_image(&tag, "/etc/passwd", "USER 65534");
        let repo = repo_with("{}");
        let fake = docker(&["run", "--rm", BUSYBOX_IMAGE, "cat", "/etc/passwd"])
            + "\nadmin:x:1000:1000::/tmp:/bin/sh\n";
        std::fs::write(repo.path().join("drop/passwd"), fake).unwrap();
        let mount = r#""mounts": [{"type": "bind", "source": "${localWorkspaceFolder}/drop/passwd", "target": "/etc/passwd"}]"#;
        repo.config(&format!(r#"{{"image": "{tag}", {mount}}}"#));
        let mut guard = cleanup(&[repo.path()]);
        guard.images = vec![tag.clone()];
        let first = up_ok(repo.path(), &[]);
        let id = first["containerId"].as_str().unwrap().to_string();
        repo.config(&format!(
            r#"{{"image": "{tag}", {mount}, "remoteUser": "admin", "postAttachCommand": "touch drop/ran"}}"#
        ));
        assert_reuse_and_exec_refused(&repo, "mounted passwd");
        assert_eq!(containers_of(&repo.path().display().to_string()), [id]);
    }

    #[test]
    fn a_repository_cannot_set_identity_labels() {
        let Some(victim) = HostileRepo::busybox("a_repository_cannot_set_identity_labels") else {
            return;
        };
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
        let Some(victim) = HostileRepo::busybox(
            "a_container_claiming_this_workspace_without_its_bind_gets_nothing",
        ) else {
            return;
        };
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
        let local_folder = format!("devcontainer.local_folder={v}");
        let config_file = format!("devcontainer.config_file={v}/.devcontainer/devcontainer.json");
        let mut crafted_run = vec![
            "run",
            "-d",
            "--label",
            &local_folder,
            "--label",
            &config_file,
        ];
        crafted_run.extend(crate::support::engine::PASSES_THE_REUSE_RECHECK);
        let owner = git::WORKSPACE_OWNER.to_string();
        let decoy_bind = format!("{}:/workspaces/{name}:ro", decoy.display());
        crafted_run.extend([
            "-u",
            &owner,
            "-v",
            "/var/lib/devcell",
            // read-only: a running container writing a folder of the workspace is a foreign
            // writer that refuses the `up` (attack 28, F1); this test is about the lookup
            "-v",
            &decoy_bind,
            "--entrypoint",
            "/bin/sh",
            BUSYBOX_IMAGE,
            "-c",
            "while sleep 1; do :; done",
        ]);
        let crafted = docker(&crafted_run);
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
            .bounded_output();
    }

    /// `down`, `status`, `delete` and `audit` act on this workspace's container only: one that
    /// carries its identity labels but binds another folder is not stopped, removed, reported
    /// or scored as the workspace's (spec-note 0421).
    #[test]
    fn teardown_and_reports_leave_a_container_claiming_this_workspace_without_its_bind_alone() {
        let Some(victim) = HostileRepo::busybox(
            "teardown_and_reports_leave_a_container_claiming_this_workspace_without_its_bind_alone",
        ) else {
            return;
        };
        victim.config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#
        ));
        victim.commit();
        let v = victim.path().display().to_string();
        let decoy = HostTarget::new();
        let _c = cleanup(&[victim.path()]);
        let crafted = docker(&[
            "run",
            "-d",
            "--label",
            &format!("devcontainer.local_folder={v}"),
            "--label",
            &format!("devcontainer.config_file={v}/.devcontainer/devcontainer.json"),
            "--network",
            "none",
            "-v",
            &format!("{}:/workspace:ro", decoy.path().display()),
            "--entrypoint",
            "/bin/sh",
            BUSYBOX_IMAGE,
            "-c",
            "while sleep 1; do :; done",
        ]);
        let state = tempfile::tempdir().unwrap();
        let cmd = |args: &[&str]| {
            devcell()
                .env("DEVCELL_STATE_DIR", state.path())
                .args(args)
                .output()
                .expect("devcell runs")
        };
        let running = || docker(&["inspect", "-f", "{{.State.Running}}", &crafted]);

        for remove in [false, true] {
            let mut args = vec!["down", "--workspace-folder", &v];
            if remove {
                args.push("--remove");
            }
            let out = cmd(&args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let result = last_json(&out);
            assert_eq!(result["containerIds"], serde_json::json!([]), "{result}");
            assert_eq!(running(), "true", "down --remove={remove} stopped it");
        }
        let out = cmd(&["status", "--workspace-folder", &v, "--format", "json"]);
        let status = String::from_utf8_lossy(&out.stdout);
        assert!(
            !status.contains(&crafted[..12]),
            "status reports it: {status}"
        );
        let out = cmd(&["audit", "--workspace-folder", &v, "--format", "json"]);
        let audit = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "audit scored it: {audit}");
        assert!(!audit.contains(&crafted[..12]), "audit names it: {audit}");
        let out = cmd(&["delete", "--workspace-folder", &v, "--format", "json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(running(), "true", "delete removed it");
        assert!(containers_of(&v).contains(&crafted));
        decoy.assert_untouched();
        let _ = Command::new("docker")
            .args(["rm", "-fv", &crafted])
            .bounded_output();
    }

    /// Attack 27, R3: a container carrying this workspace's identity labels that reaches the
    /// workspace only through a bind-backed named volume (`o=bind`, `device=<workspace>`, as a
    /// Compose primary's `driver_opts` make it) is the workspace's: `status` reports it and
    /// `delete` removes it (before: "container none", and `delete` verified nothing remained
    /// while it ran).
    #[test]
    fn status_and_delete_find_a_container_reaching_the_workspace_through_a_bind_backed_volume() {
        let Some(victim) = HostileRepo::busybox(
            "status_and_delete_find_a_container_reaching_the_workspace_through_a_bind_backed_volume",
        ) else {
            return;
        };
        victim.config(&format!(
            r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody"}}"#
        ));
        victim.commit();
        let v = victim.path().display().to_string();
        let _c = cleanup(&[victim.path()]);
        let volume = format!("devcell-test-r3-{}", crate::support::run_token());
        let engine_cleanup = crate::support::context::Cleanup::default();
        engine_cleanup.volume(&volume);
        let device = format!("device={v}");
        docker(&[
            "volume",
            "create",
            "--driver",
            "local",
            "--opt",
            "type=none",
            "--opt",
            "o=bind",
            "--opt",
            &device,
            &volume,
        ]);
        let primary = docker(&[
            "run",
            "-d",
            "--label",
            &format!("devcontainer.local_folder={v}"),
            "--label",
            &format!("devcontainer.config_file={v}/.devcontainer/devcontainer.json"),
            "--network",
            "none",
            "-v",
            &format!("{volume}:/workspace"),
            "--entrypoint",
            "/bin/sh",
            BUSYBOX_IMAGE,
            "-c",
            "while sleep 1; do :; done",
        ]);
        engine_cleanup.container(&primary);
        let state = tempfile::tempdir().unwrap();
        let cmd = |args: &[&str]| {
            devcell()
                .env("DEVCELL_STATE_DIR", state.path())
                .args(args)
                .output()
                .expect("devcell runs")
        };
        let out = cmd(&["status", "--workspace-folder", &v, "--format", "json"]);
        let status: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(
            status["result"]["container"]["id"].as_str(),
            Some(primary.as_str()),
            "status: {status}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = cmd(&["delete", "--workspace-folder", &v, "--format", "json"]);
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !containers_of(&v).contains(&primary),
            "delete left it: {}",
            String::from_utf8_lossy(&out.stdout)
        );
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

/// Class 8 of the issue: other network namespaces and networks, published ports, unbounded
/// inputs and in-memory file systems (spec-notes 0430–0433). Each refusal is checked by
/// `docker ps -a` on the workspace's label (nothing created), each grant by `docker inspect`.
mod escapes {
    use std::path::Path;
    use std::process::Output;
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use crate::support::docker::{BUSYBOX_IMAGE, TestContainer, engine_ready};
    use crate::support::engine::docker;
    use crate::support::hostile::{HostTarget, HostileRepo};
    use crate::support::{devcell, free_port, unique};

    /// A committed hostile repository whose `devcontainer.json` is `config` (`IMAGE` replaced
    /// by the test image; no uid layer, so nothing but the container is made); every container
    /// labelled with its folder is removed on drop.
    struct Attack {
        repo: HostileRepo,
    }

    impl Attack {
        fn new(config: &str) -> Attack {
            let repo = HostileRepo::new();
            repo.config(&config.replace("IMAGE", BUSYBOX_IMAGE))
                .commit();
            Attack { repo }
        }

        fn path(&self) -> &Path {
            self.repo.path()
        }

        /// `devcell up --workspace-folder <repo> <args…>`, killed after 60 s.
        fn up(&self, args: &[&str]) -> Output {
            devcell()
                .arg("up")
                .arg("--workspace-folder")
                .arg(self.path())
                .args(args)
                .timeout(Duration::from_secs(60))
                .output()
                .expect("devcell runs")
        }

        /// `up` that must succeed: its result line.
        fn up_ok(&self, args: &[&str]) -> Value {
            let out = self.up(args);
            assert!(
                out.status.success(),
                "up failed: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            let result = last_json(&out);
            assert_eq!(result["outcome"], "success", "{result}");
            result
        }

        /// `up` that must be refused: exit 1, the text names every `wanted`, and no container
        /// carries the workspace's label. Returns the text.
        fn up_refused(&self, args: &[&str], wanted: &[&str]) -> String {
            let out = self.up(args);
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(1), "{text}");
            assert!(!text.contains("panicked"), "{text}");
            for w in wanted {
                assert!(text.contains(w), "missing `{w}` in {text}");
            }
            assert!(
                self.containers().is_empty(),
                "a container was created: {text}"
            );
            text
        }

        /// `docker ps -a` ids labelled with this workspace folder.
        fn containers(&self) -> Vec<String> {
            let (ok, out) = docker(&[
                "ps",
                "-aq",
                "--no-trunc",
                "--filter",
                &format!("label=devcontainer.local_folder={}", self.path().display()),
            ]);
            assert!(ok, "{out}");
            out.lines().map(str::to_string).collect()
        }
    }

    impl Drop for Attack {
        fn drop(&mut self) {
            for id in self.containers() {
                let _ = docker(&["rm", "-f", "-v", &id]);
            }
        }
    }

    fn last_json(out: &Output) -> Value {
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text}"))
    }

    fn inspect(id: &str, format: &str) -> String {
        let (ok, out) = docker(&["inspect", "-f", format, id]);
        assert!(ok, "{out}");
        out.trim().to_string()
    }

    /// The request for `permission` in the `up` result, which must be granted with `grant`.
    fn assert_granted(result: &Value, permission: &str, value: &str) {
        let found = result["devcell"]["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["permission"] == permission && p["value"] == value)
            .unwrap_or_else(|| panic!("no {permission} {value} in {result}"))
            .clone();
        assert_eq!(found["status"], "granted", "{found}");
        assert_eq!(
            found["grant"],
            format!(
                "--allow {}:{value}",
                if permission == "network" {
                    "network"
                } else {
                    "publish"
                }
            )
        );
    }

    /// A docker network made for one test, removed on drop.
    struct TestNetwork(String);

    impl Drop for TestNetwork {
        fn drop(&mut self) {
            let _ = docker(&["network", "rm", &self.0]);
        }
    }

    #[test]
    fn other_network_namespaces_and_named_networks_are_requests() {
        if !engine_ready(
            "other_network_namespaces_and_named_networks_are_requests",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let host = HostTarget::new();
        // Another container (someone else's workspace) whose namespace the attacker wants.
        let victim = TestContainer::run(BUSYBOX_IMAGE, &["sleep", "600"]);
        let name = inspect(&victim.id, "{{.Name}}");
        let name = name.trim_start_matches('/');
        for (run_args, mode) in [
            (
                format!(r#""--network", "container:{name}""#),
                format!("container:{name}"),
            ),
            (
                format!(r#""--network=container:{name}""#),
                format!("container:{name}"),
            ),
            (
                format!(r#""--net", "container:{}""#, victim.id),
                format!("container:{}", victim.id),
            ),
            (
                format!(r#""--net=container:{name}""#),
                format!("container:{name}"),
            ),
        ] {
            let attack = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                    "runArgs": [{run_args}]}}"#
            ));
            attack.up_refused(
                &[],
                &[
                    &format!("network `{mode}`"),
                    &format!("--allow network:{mode}"),
                ],
            );
            // The grant does what it asks: the container shares the victim's namespace.
            let result = attack.up_ok(&["--allow", &format!("network:{mode}")]);
            let id = result["containerId"].as_str().unwrap();
            assert_eq!(
                inspect(id, "{{.HostConfig.NetworkMode}}"),
                format!("container:{}", victim.id),
                "{mode}"
            );
            assert_granted(&result, "network", &mode);
            // A grant for another container does not cover it.
            let again = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                    "runArgs": [{run_args}]}}"#
            ));
            again.up_refused(&["--allow", "network:container:someone-else"], &[&mode]);
        }

        // A named network.
        let net = TestNetwork(unique("devcell-test-net"));
        let (ok, out) = docker(&["network", "create", "--label", "devcell.test=1", &net.0]);
        assert!(ok, "{out}");
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "runArgs": ["--network", "{}"]}}"#,
            net.0
        ));
        attack.up_refused(&[], &[&format!("--allow network:{}", net.0)]);
        let result = attack.up_ok(&["--allow", &format!("network:{}", net.0)]);
        let id = result["containerId"].as_str().unwrap();
        // the networks it joined (Podman reports a named network's mode as `bridge`)
        assert_eq!(
            inspect(
                id,
                "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}"
            ),
            net.0
        );
        assert_granted(&result, "network", &net.0);

        // The other namespaces cannot be shared at all, nor every port published.
        for flag in [
            r#""--pid", "host""#,
            r#""--pid=container:x""#,
            r#""--ipc=host""#,
            r#""--uts", "host""#,
            r#""--userns=host""#,
            r#""--cgroupns", "host""#,
            r#""-P""#,
            r#""--publish-all""#,
        ] {
            let attack = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                    "runArgs": [{flag}]}}"#
            ));
            attack.up_refused(&[], &["unsupported `runArgs` flag"]);
        }
        host.assert_untouched();
    }

    /// Whether the engine is Podman (its Docker-compatible API names itself in `version`).
    fn engine_is_podman() -> bool {
        let (ok, out) = docker(&["version", "--format", "{{json .Server}}"]);
        assert!(ok, "{out}");
        out.contains("Podman")
    }

    /// The engine's bridge address (its gateway, or the subnet's first address, which the
    /// engine gives its bridge when IPAM names no gateway): a non-loopback host address tests
    /// may bind.
    fn bridge_gateway() -> String {
        let (ok, out) = docker(&[
            "network",
            "inspect",
            "bridge",
            "-f",
            "{{range .IPAM.Config}}{{.Gateway}} {{.Subnet}}{{end}}",
        ]);
        assert!(ok, "{out}");
        // Podman prints `<nil>` for a network without a gateway
        let mut parts = out.split_whitespace().filter(|p| *p != "<nil>");
        let first = parts.next().unwrap_or_default();
        let gateway = match first.split_once('/') {
            // No gateway: `first` is the subnet.
            Some((net, _)) => {
                let mut ip: std::net::Ipv4Addr = net.parse().unwrap();
                ip = std::net::Ipv4Addr::from(u32::from(ip) + 1);
                ip.to_string()
            }
            None => first.to_string(),
        };
        let ip: std::net::IpAddr = gateway.parse().unwrap_or_else(|_| panic!("{out}"));
        assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
        gateway
    }

    #[test]
    fn published_ports_stay_on_loopback_unless_granted() {
        if !engine_ready(
            "published_ports_stay_on_loopback_unless_granted",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let (p1, p2, p3, p4) = (free_port(), free_port(), free_port(), free_port());
        // No host address: the engine would publish on every interface; devcell uses loopback.
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "appPort": [{p1}, "{p2}:81"],
                "runArgs": ["-p", "{p3}:80", "--publish=82"]}}"#
        ));
        let result = attack.up_ok(&[]);
        let id = result["containerId"].as_str().unwrap();
        let bindings: Value =
            serde_json::from_str(&inspect(id, "{{json .HostConfig.PortBindings}}")).unwrap();
        let mut seen = Vec::new();
        for (port, list) in bindings.as_object().unwrap() {
            for b in list.as_array().unwrap() {
                // every host port is engine-chosen (the repository's numbers are not kept,
                // spec-note 0431): Docker leaves it empty here, Podman names the one it chose
                let host_port = b["HostPort"].as_str().unwrap();
                assert!(
                    ![p1, p2, p3].iter().any(|p| p.to_string() == host_port),
                    "{bindings}"
                );
                seen.push(format!("{}->{port}", b["HostIp"].as_str().unwrap()));
            }
        }
        seen.sort();
        let mut want = vec![
            format!("127.0.0.1->{p1}/tcp"),
            "127.0.0.1->81/tcp".to_string(),
            "127.0.0.1->80/tcp".to_string(),
            "127.0.0.1->82/tcp".to_string(),
        ];
        want.sort();
        assert_eq!(seen, want, "{bindings}");
        // What the engine actually bound: loopback only.
        let (ok, ports) = docker(&["port", id]);
        assert!(ok, "{ports}");
        assert!(!ports.is_empty());
        for line in ports.lines() {
            assert!(line.contains("-> 127.0.0.1:"), "{ports}");
        }
        assert!(
            result["devcell"]["permissions"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{result}"
        );

        // Every interface, in each spelling: refused, nothing created.
        for (config, value) in [
            (
                format!(r#""appPort": ["0.0.0.0:{p4}:80"]"#),
                format!("0.0.0.0:{p4}"),
            ),
            (
                format!(r#""runArgs": ["-p", "0.0.0.0:{p4}:80"]"#),
                format!("0.0.0.0:{p4}"),
            ),
            (
                format!(r#""runArgs": ["--publish=[::]:{p4}:80"]"#),
                format!("[::]:{p4}"),
            ),
            (
                r#""runArgs": ["-p0.0.0.0::80/udp"]"#.to_string(),
                "0.0.0.0:*".to_string(),
            ),
        ] {
            let attack = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false, {config}}}"#
            ));
            attack.up_refused(&[], &[&format!("--allow publish:{value}")]);
        }

        // Granted on another address than loopback (the engine's bridge, never every
        // interface): published there, and reported.
        let gateway = bridge_gateway();
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "runArgs": ["-p", "{gateway}:{p4}:80"]}}"#
        ));
        attack.up_refused(&[], &[&format!("--allow publish:{gateway}:{p4}")]);
        attack.up_refused(&["--allow", &format!("publish:{gateway}:{}", p4 ^ 1)], &[]);
        if engine_is_podman() {
            // The Podman pass's service has only loopback in its network namespace (its
            // network is internal, without a gateway): the grant reaches the engine, which
            // cannot bind the address, and nothing is published.
            let out = attack.up(&["--allow", &format!("publish:{gateway}:*")]);
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            assert!(!out.status.success(), "{text}");
            assert!(
                text.contains(&format!("{gateway}:{p4}"))
                    && text.contains("cannot assign requested address"),
                "{text}"
            );
            for id in attack.containers() {
                assert_ne!(inspect(&id, "{{.State.Running}}"), "true", "{text}");
            }
            return;
        }
        let result = attack.up_ok(&["--allow", &format!("publish:{gateway}:*")]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(
            inspect(
                id,
                "{{range $p, $b := .HostConfig.PortBindings}}{{range $b}}{{.HostIp}}:{{.HostPort}}{{end}}{{end}}"
            ),
            format!("{gateway}:{p4}")
        );
        assert_granted(&result, "publishPort", &format!("{gateway}:{p4}"));
    }

    /// Attack 25's P3 class for published ports (spec-note 0431): a loopback port the
    /// repository numbered (`appPort`, `runArgs -p`) is published from a free host port, so a
    /// host service that is not running at that moment (a local package registry, a
    /// database) never has its clients talk to the container; the user's grant keeps the
    /// number. A host service's port that is held stays the host's either way.
    #[test]
    fn a_repository_loopback_port_is_published_from_a_free_port_unless_granted() {
        if !engine_ready(
            "a_repository_loopback_port_is_published_from_a_free_port_unless_granted",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        use std::io::{Read, Write};
        let service = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let held = service.local_addr().unwrap().port();
        let idle = free_port();
        for (port, ports) in [
            (held, format!(r#""appPort": [{held}]"#)),
            (idle, format!(r#""appPort": [{idle}]"#)),
            (idle, format!(r#""runArgs": ["-p", "127.0.0.1:{idle}:80"]"#)),
        ] {
            let attack = Attack::new(&format!(
                r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                    "overrideCommand": true, {ports}}}"#
            ));
            let out = attack.up(&[]);
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{text}");
            assert!(
                text.contains(&format!("--allow publish:127.0.0.1:{port}")),
                "{text}"
            );
            let (ok, published) = docker(&["port", &attack.containers()[0]]);
            assert!(ok, "{published}");
            for line in published.lines() {
                assert!(line.contains("-> 127.0.0.1:"), "{published}");
                assert!(!line.ends_with(&format!(":{port}")), "{published}");
            }
            if port == held {
                // a host client reaches the host service
                let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                client.write_all(b"ping").unwrap();
                let (mut accepted, _) = service.accept().unwrap();
                let mut got = [0u8; 4];
                accepted.read_exact(&mut got).unwrap();
                assert_eq!(&got, b"ping", "{text}");
            } else {
                // nothing listens where the host service would
                assert!(
                    std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
                    "{published}"
                );
            }
        }
        // granted: the number is kept
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "overrideCommand": true, "appPort": [{idle}]}}"#
        ));
        attack.up_ok(&["--allow", &format!("publish:127.0.0.1:{idle}")]);
        let (ok, published) = docker(&["port", &attack.containers()[0]]);
        assert!(ok, "{published}");
        assert!(
            published.contains(&format!("-> 127.0.0.1:{idle}")),
            "{published}"
        );
    }

    /// Runs `devcell <args…>` with a 30 s kill switch; returns (output, elapsed).
    fn timed(args: &[&str]) -> (Output, Duration) {
        let start = Instant::now();
        let out = devcell()
            .args(args)
            .timeout(Duration::from_secs(30))
            .output()
            .expect("devcell runs");
        (out, start.elapsed())
    }

    #[test]
    fn unbounded_inputs_fail_fast_with_a_clear_error() {
        let Some(repo) = HostileRepo::busybox("unbounded_inputs_fail_fast_with_a_clear_error")
        else {
            return;
        };
        let attack = Attack::new(
            r#"{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false}"#,
        );
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("secrets.fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o600)).unwrap();
        let silent = dir.path().join("silent.fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &silent, rustix::fs::Mode::from(0o600)).unwrap();
        // A writer that holds the FIFO open and never writes.
        let _writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&silent)
            .unwrap();
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(100 << 20)
            .unwrap();
        let ws = attack.path().to_str().unwrap();
        for (file, wanted) in [
            (
                Path::new("/dev/zero"),
                "is a character device, not a regular file",
            ),
            (fifo.as_path(), "the file is empty"),
            (
                silent.as_path(),
                "is a pipe whose writer sent no end of file",
            ),
            (big.as_path(), "is larger than 4194304 bytes (4 MiB)"),
        ] {
            for command in ["up", "run-user-commands", "exec"] {
                let mut args = vec![command, "--workspace-folder", ws, "--secrets-file"];
                args.push(file.to_str().unwrap());
                if command == "exec" {
                    args.push("true");
                }
                let (out, took) = timed(&args);
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(
                    !out.status.success(),
                    "{command} {}: {text}",
                    file.display()
                );
                assert!(took < Duration::from_secs(15), "{command} took {took:?}");
                assert!(
                    text.contains(&format!("cannot use secrets file `{}`", file.display())),
                    "{text}"
                );
                assert!(
                    text.contains(wanted),
                    "{command} {}: {text}",
                    file.display()
                );
                assert!(!text.contains("panicked"), "{text}");
            }
        }
        assert!(attack.containers().is_empty(), "a container was created");

        // The same bound for devcontainer.json: named by the user (`--config`), or committed
        // by the repository as a symlink to a device.
        for file in [Path::new("/dev/zero"), fifo.as_path(), big.as_path()] {
            let (out, took) = timed(&[
                "read-configuration",
                "--workspace-folder",
                ws,
                "--config",
                file.to_str().unwrap(),
            ]);
            assert!(!out.status.success());
            assert!(took < Duration::from_secs(15), "{took:?}");
        }
        repo.symlink(".devcontainer/devcontainer.json", "/dev/zero")
            .commit();
        let (out, took) = timed(&["up", "--workspace-folder", repo.path().to_str().unwrap()]);
        assert!(!out.status.success());
        assert!(took < Duration::from_secs(15), "{took:?}");
        // The user's settings file too.
        let (out, took) = timed(&["up", "--workspace-folder", ws, "--config-file", "/dev/zero"]);
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success());
        assert!(text.contains("not a regular file"), "{text}");
        assert!(took < Duration::from_secs(15), "{took:?}");
        assert!(attack.containers().is_empty(), "a container was created");
    }

    /// The `size=` option of the tmpfs at `path` of container `id` (Podman appends its own
    /// defaults to the options given: `size=4g,rw,rprivate,…`).
    fn tmpfs_size(id: &str, path: &str) -> String {
        let options = inspect(id, &format!(r#"{{{{index .HostConfig.Tmpfs "{path}"}}}}"#));
        options
            .split(',')
            .find(|o| o.starts_with("size="))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no size for {path}: {options}"))
    }

    #[test]
    fn shm_and_tmpfs_sizes_are_bounded_by_the_memory_limit() {
        if !engine_ready(
            "shm_and_tmpfs_sizes_are_bounded_by_the_memory_limit",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let config = r#"{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
            "runArgs": ["--shm-size", "100g", "--tmpfs", "/x:size=100g", "--tmpfs", "/y",
                        "--mount", "type=tmpfs,target=/z,tmpfs-size=100g",
                        "--mount", "type=tmpfs,target=/w,tmpfs-size=8m"]}"#;
        let attack = Attack::new(config);
        let result = attack.up_ok(&[]);
        let id = result["containerId"].as_str().unwrap();
        let gib4 = (4_i64 << 30).to_string();
        assert_eq!(inspect(id, "{{.HostConfig.ShmSize}}"), gib4);
        // the `size` option (Podman adds its defaults after it: `rw,rprivate,…`)
        assert_eq!(tmpfs_size(id, "/x"), "size=4g");
        assert_eq!(tmpfs_size(id, "/y"), "size=1g");
        let mounts: Value =
            serde_json::from_str(&inspect(id, "{{json .HostConfig.Mounts}}")).unwrap();
        // Podman 4.3 does not report `HostConfig.Mounts` (null): the sizes inside, below,
        // are checked on both engines
        if let Some(mounts) = mounts.as_array() {
            let size = |target: &str| {
                mounts
                    .iter()
                    .find(|m| m["Target"] == target)
                    .unwrap_or_else(|| panic!("no {target} in {mounts:?}"))["TmpfsOptions"]
                    ["SizeBytes"]
                    .as_i64()
            };
            assert_eq!(size("/z"), Some(4 << 30));
            assert_eq!(size("/w"), Some(8 << 20), "a smaller request is kept");
        }
        // From inside: what the kernel mounted (1 KiB blocks).
        let (ok, df) = docker(&["exec", id, "df", "-k", "/dev/shm", "/x", "/y", "/z", "/w"]);
        assert!(ok, "{df}");
        let sizes: Vec<&str> = df
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        assert_eq!(
            sizes,
            ["4194304", "4194304", "1048576", "4194304", "8192"],
            "{df}"
        );

        // A lower memory limit (the user's) lowers them all.
        let small = Attack::new(config);
        let result = small.up_ok(&["--memory", "512m"]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(
            inspect(id, "{{.HostConfig.ShmSize}}"),
            (512_i64 << 20).to_string()
        );
        assert_eq!(tmpfs_size(id, "/y"), "size=512m");
        assert_eq!(tmpfs_size(id, "/tmp"), "size=512m");
        // the profile's own options are kept (Podman appends its defaults after them)
        let tmp = inspect(id, r#"{{index .HostConfig.Tmpfs "/tmp"}}"#);
        assert!(
            tmp.starts_with("rw,nosuid,nodev,exec,size=512m,mode=1777"),
            "{tmp}"
        );

        // reference: as written.
        let reference = Attack::new(config);
        let result = reference.up_ok(&["--security-profile", "reference"]);
        let id = result["containerId"].as_str().unwrap();
        assert_eq!(
            inspect(id, "{{.HostConfig.ShmSize}}"),
            (100_i64 << 30).to_string()
        );
        // no `size` (Podman lists its default options, Docker none)
        let y = inspect(id, r#"{{index .HostConfig.Tmpfs "/y"}}"#);
        assert!(!y.split(',').any(|o| o.starts_with("size=")), "{y}");
    }

    /// `devcell handoff --workspace-folder <repo> --agent a --format json <extra…>` with a
    /// settings file naming agent `a` (`true`), a fake home and state folder under `home`.
    fn handoff(repo: &Path, home: &Path, extra: &[&str]) -> (Option<i32>, Value) {
        let settings = home.join("config.toml");
        std::fs::write(&settings, "[agents.a]\ncommand = [\"true\"]\n").unwrap();
        let out = devcell()
            .env("HOME", home)
            .env("DEVCELL_STATE_DIR", home.join("state"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .args(["handoff", "--workspace-folder"])
            .arg(repo)
            .args(["--agent", "a", "--format", "json", "--config-file"])
            .arg(&settings)
            .args(extra)
            .timeout(Duration::from_secs(120))
            .output()
            .expect("devcell runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    }

    /// `(permission, value, status)` of each request in `v`, sorted.
    fn listed(v: &Value) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = v
            .as_array()
            .unwrap_or_else(|| panic!("requests: {v}"))
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                (s("permission"), s("value"), s("status"))
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_handoff_plan_judges_networks_and_ports_as_the_handoff_does() {
        if !engine_ready(
            "the_handoff_plan_judges_networks_and_ports_as_the_handoff_does",
            BUSYBOX_IMAGE,
        ) {
            return;
        }
        let victim = TestContainer::run(BUSYBOX_IMAGE, &["sleep", "600"]);
        let port = free_port();
        let attack = Attack::new(&format!(
            r#"{{"image": "IMAGE", "remoteUser": "nobody", "updateRemoteUserUID": false,
                "appPort": ["0.0.0.0:{port}:80"],
                "runArgs": ["--network", "container:{}"]}}"#,
            victim.id
        ));
        let home = tempfile::tempdir().unwrap();
        let network = format!("container:{}", victim.id);
        let address = format!("0.0.0.0:{port}");
        let want = |status: &str| {
            vec![
                ("network".to_string(), network.clone(), status.to_string()),
                (
                    "publishPort".to_string(),
                    address.clone(),
                    status.to_string(),
                ),
            ]
        };
        // With the bridge (`--network default`) the configuration's network stands: both are
        // requests, in the plan exactly as in the handoff, and nothing is created.
        let (plan_code, plan) = handoff(
            attack.path(),
            home.path(),
            &["--network", "default", "--plan"],
        );
        let (code, real) = handoff(attack.path(), home.path(), &["--network", "default"]);
        assert_eq!(code, Some(12), "{real}");
        assert_eq!(plan_code, code, "{plan}");
        assert_eq!(real["error"]["code"], "permission_required");
        assert_eq!(
            listed(&plan["error"]["details"]["permissions"]),
            want("refused")
        );
        assert_eq!(
            listed(&real["error"]["details"]["permissions"]),
            want("refused")
        );
        assert!(attack.containers().is_empty(), "a container was created");
        // Granted: the plan says so.
        let grants = [
            "--network",
            "default",
            "--plan",
            "--allow",
            &format!("network:{network}"),
            "--allow",
            &format!("publish:{address}"),
        ];
        let (code, plan) = handoff(attack.path(), home.path(), &grants);
        assert_eq!(code, Some(0), "{plan}");
        assert_eq!(
            listed(&plan["result"]["permissions"]),
            want("granted"),
            "{plan}"
        );
        assert!(
            attack.containers().is_empty(),
            "the plan created a container"
        );
    }
}
