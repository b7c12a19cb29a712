//! `up --dotfiles-repository` end to end (spec-note 0645): a local bare repository bound into
//! the container, cloned **inside** it by the remote user and installed once, after
//! `postCreateCommand` and before `postStartCommand`; nothing is cloned on the host and no
//! network is used (`--network none`). The reference CLI cannot be compared on this image: its
//! dotfiles script, which splices the environment into the script text, fails with a shell
//! syntax error under busybox (spec-note 0645).

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::context::TestContext;
use crate::support::git::{git, hostgit_image};

/// `devcell-test/hostgit:1` with `git-upload-pack` (a link to git, which runs it as a
/// built-in), so the container's git can clone a local repository, and a system git config
/// trusting repositories other users own (the bound repository is the host's, owned by root).
fn dotfiles_image() -> &'static str {
    const IMAGE: &str = "devcell-test/hostgit-dotfiles:3";
    let base = hostgit_image();
    let ctx = tempfile::tempdir().unwrap();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!(
            "FROM {base}\nRUN git=$(command -v git) && ln -s \"$git\" \"${{git%/*}}/git-upload-pack\" \\\n  && for d in /etc \"${{git%/bin/*}}/etc\"; do mkdir -p \"$d\" && printf '[safe]\\n\\tdirectory = *\\n' > \"$d/gitconfig\"; done\n"
        ),
    )
    .unwrap();
    let out = Command::new("docker")
        .args(["build", "-q", "--network", "none", "-t", IMAGE])
        .arg(ctx.path())
        .bounded_output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "docker build of {IMAGE}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    IMAGE
}

/// A bare repository `<dir>/dots.git` (readable by every user) holding `files` (path, content,
/// executable), committed on `main`.
fn bare_repository(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let work = dir.join("dots-work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q"]);
    for (path, content) in files {
        let file = work.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, content).unwrap();
    }
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "dotfiles"]);
    let bare = dir.join("dots.git");
    git(
        dir,
        &["clone", "-q", "--bare", "dots-work", bare.to_str().unwrap()],
    );
    let status = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
    bare
}

/// The install script: records who ran it, from where, and when in the bring-up (mode 0644 in
/// the repository: the step makes it executable, as the reference does).
const INSTALL: &str = "#!/bin/sh\nset -e\necho \"dotfiles $(id -u) $(pwd) ${DOTFILES_GREETING-}\" >> \"$HOME/order\"\ncp .profile-extra \"$HOME/.profile-extra\"\n";

/// The remote environment reaches the dotfiles step (`DOTFILES_GREETING`).
const CONFIG: &str = r#"{
  "image": "IMAGE",
  "remoteUser": "nobody",
  "remoteEnv": {"DOTFILES_GREETING": "hello"},
  "postCreateCommand": "echo post-create >> \"$HOME/order\"",
  "postStartCommand": "echo post-start >> \"$HOME/order\""
}"#;

#[test]
fn dotfiles_are_cloned_inside_the_container_and_installed_once_as_the_remote_user() {
    let Some(ctx) =
        TestContext::busybox("dotfiles_are_cloned_inside_the_container_and_installed_once")
    else {
        return;
    };
    let image = dotfiles_image();
    let ctx = ctx.config(&CONFIG.replace("IMAGE", image));
    let repos = tempfile::tempdir().unwrap();
    let bare = bare_repository(
        repos.path(),
        &[
            ("install.sh", INSTALL),
            (".profile-extra", "export FROM_DOTFILES=1\n"),
        ],
    );
    let mount = format!("type=bind,source={},target=/srv/dots.git", bare.display());
    let args = [
        "--network",
        "none",
        "--mount",
        &mount,
        "--dotfiles-repository",
        "/srv/dots.git",
    ];
    let first = ctx.up(&args);
    let dotfiles = &first["devcell"]["lifecycle"]["dotfiles"];
    assert_eq!(dotfiles["outcome"], "installed", "{first}");
    assert_eq!(dotfiles["repository"], "/srv/dots.git");
    assert_eq!(dotfiles["targetPath"], "~/dotfiles");
    let (code, order, err) = ctx.sh("cat \"$HOME/order\"; id -u; echo $HOME");
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = order.lines().collect();
    let (uid, home) = (lines[lines.len() - 2], lines[lines.len() - 1]);
    assert_ne!(uid, "0", "the remote user is not root: {order}");
    // After postCreateCommand, before postStartCommand; as the remote user, in the clone,
    // with the remote environment.
    assert_eq!(
        &lines[..3],
        &[
            "post-create",
            &format!("dotfiles {uid} {home}/dotfiles hello"),
            "post-start"
        ],
        "{order}"
    );
    let (code, marker, err) = ctx.sh(
        "test -f \"$HOME/.devcontainer/.dotfilesMarker\" && cat \"$HOME/.profile-extra\" && git -C \"$HOME/dotfiles\" log --format=%s",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(marker, "export FROM_DOTFILES=1\ndotfiles\n");

    // A second `up` finds the marker: nothing is installed again.
    let second = ctx.up(&args);
    assert_eq!(
        second["devcell"]["lifecycle"]["dotfiles"]["outcome"], "alreadyInstalled",
        "{second}"
    );
    let (_, order, _) = ctx.sh("grep -c dotfiles \"$HOME/order\"");
    assert_eq!(order.trim(), "1");
    // Nothing was cloned on the host: the repositories' folder holds only what the test made.
    let mut names: Vec<String> = std::fs::read_dir(repos.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["dots-work", "dots.git"]);
}

#[test]
fn a_failing_dotfiles_install_is_reported_and_up_goes_on() {
    let Some(ctx) = TestContext::busybox("a_failing_dotfiles_install_is_reported") else {
        return;
    };
    let image = dotfiles_image();
    let ctx = ctx.config(&CONFIG.replace("IMAGE", image));
    let repos = tempfile::tempdir().unwrap();
    let bare = bare_repository(
        repos.path(),
        &[("setup.sh", "#!/bin/sh\necho setting up\nexit 3\n")],
    );
    let mount = format!("type=bind,source={},target=/srv/dots.git", bare.display());
    let result = ctx.up(&[
        "--network",
        "none",
        "--mount",
        &mount,
        "--dotfiles-repository",
        "/srv/dots.git",
        "--dotfiles-target-path",
        "/tmp/dots",
    ]);
    let dotfiles = &result["devcell"]["lifecycle"]["dotfiles"];
    assert_eq!(dotfiles["outcome"], "failed", "{result}");
    assert_eq!(dotfiles["exitCode"], 3);
    assert!(
        dotfiles["outputTail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "setting up"),
        "{result}"
    );
    // postStartCommand still ran, and no marker was written (it runs again next time).
    let (code, out, err) = ctx.sh(
        "cat \"$HOME/order\"; test -f \"$HOME/.devcontainer/.dotfilesMarker\" || echo unmarked",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "post-create\npost-start\nunmarked\n");
}

/// spec-note 0670 (issue 28): under `--network none` a dotfiles URL the container cannot reach
/// is cloned by devcell's host git, bound read-only for the install and emptied after `up`:
/// the install ran as the remote user, the result names the user's URL, and the container
/// finds `/run/devcell/dotfiles` empty afterwards. Without the export the clone inside fails
/// (`outcome` `failed`: there is no network).
#[test]
fn up_under_network_none_installs_dotfiles_from_a_url_cloned_on_the_host() {
    let Some(ctx) = TestContext::busybox("up_under_network_none_installs_dotfiles_from_a_url")
    else {
        return;
    };
    let image = dotfiles_image();
    let ctx = ctx.isolated().config(&CONFIG.replace("IMAGE", image));
    let repos = tempfile::tempdir().unwrap();
    let bare = bare_repository(
        repos.path(),
        &[
            ("install.sh", INSTALL),
            (".profile-extra", "export FROM_DOTFILES=1\n"),
        ],
    );
    let url = format!("file://{}", bare.display());
    let result = ctx.up(&["--network", "none", "--dotfiles-repository", &url]);
    let dotfiles = &result["devcell"]["lifecycle"]["dotfiles"];
    assert_eq!(dotfiles["outcome"], "installed", "{result}");
    assert_eq!(dotfiles["repository"], url.as_str(), "{result}");
    let (code, out, err) = ctx.sh(
        "grep -c '^dotfiles ' \"$HOME/order\"; cat \"$HOME/.profile-extra\"; ls -A /run/devcell/dotfiles | wc -l",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out, "1\nexport FROM_DOTFILES=1\n0\n",
        "installed once; the export emptied"
    );
    // the repositories' folder holds only what the test made
    let mut names: Vec<String> = std::fs::read_dir(repos.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["dots-work", "dots.git"]);
}

/// `set-up` or `run-user-commands` (`run` gives the command's result line for a
/// `--dotfiles-repository`) on a container `up --network none` made without dotfiles
/// (spec-note 0685): its mounts cannot change, so the `file://` URL is cloned by devcell's
/// host git and copied into the container through the engine's archive API, owned by the
/// remote user in a private folder, cloned from there and installed once as the remote user;
/// the copy is removed afterwards and a second run finds the marker. The result names the
/// user's URL. Before this change the clone ran inside and failed (no network).
fn existing_container_without_network_installs_dotfiles_from_a_url(
    test: &str,
    run: fn(&TestContext, &str, &str) -> serde_json::Value,
) {
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let image = dotfiles_image();
    let ctx = ctx.isolated().config(&CONFIG.replace("IMAGE", image));
    let repos = tempfile::tempdir().unwrap();
    let bare = bare_repository(
        repos.path(),
        &[
            ("install.sh", INSTALL),
            (".profile-extra", "export FROM_DOTFILES=1\n"),
        ],
    );
    let url = format!("file://{}", bare.display());
    let up = ctx.up(&["--network", "none"]);
    let id = up["containerId"]
        .as_str()
        .expect("a container id")
        .to_string();
    let first = run(&ctx, &id, &url);
    let dotfiles = &first["devcell"]["lifecycle"]["dotfiles"];
    assert_eq!(dotfiles["outcome"], "installed", "{first}");
    assert_eq!(dotfiles["repository"], url.as_str(), "{first}");
    let (code, out, err) = ctx.sh(
        "grep '^dotfiles ' \"$HOME/order\" | cut -d' ' -f2; id -u; cat \"$HOME/.profile-extra\"; \
         d=/var/lib/devcell/devcell-dotfiles; [ -d $d ] || d=/tmp/devcell-dotfiles; \
         stat -c '%u %a' $d; ls -A $d | wc -l",
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    let uid = lines[1];
    assert_ne!(uid, "0", "the remote user is not root: {out}");
    assert_eq!(
        lines,
        [
            uid,
            uid,
            "export FROM_DOTFILES=1",
            &format!("{uid} 700"),
            "0"
        ],
        "installed once as the remote user; the copy was the user's, private, and is gone"
    );
    let second = run(&ctx, &id, &url);
    assert_eq!(
        second["devcell"]["lifecycle"]["dotfiles"]["outcome"], "alreadyInstalled",
        "{second}"
    );
    let (code, out, err) = ctx.sh("grep -c '^dotfiles ' \"$HOME/order\"");
    assert_eq!((code, out.trim()), (0, "1"), "{err}");
}

#[test]
fn set_up_under_network_none_installs_dotfiles_from_a_url_cloned_on_the_host() {
    existing_container_without_network_installs_dotfiles_from_a_url(
        "set_up_under_network_none_installs_dotfiles_from_a_url",
        |ctx, id, url| {
            let run = ctx.devcell(&["set-up", "--container-id", id, "--dotfiles-repository", url]);
            run.ok().last_json()
        },
    );
}

#[test]
fn run_user_commands_under_network_none_installs_dotfiles_from_a_url_cloned_on_the_host() {
    existing_container_without_network_installs_dotfiles_from_a_url(
        "run_user_commands_under_network_none_installs_dotfiles_from_a_url",
        |ctx, _, url| {
            let run = ctx.run("run-user-commands", &["--dotfiles-repository", url]);
            run.ok().last_json()
        },
    );
}

/// A handoff workspace (`<tmp>/repo`, a committed git repository with `devcontainer`) in an
/// isolated context, and its settings file: agent `a` runs `agent`.
fn handoff_workspace(ctx: TestContext, devcontainer: &str, agent: &str) -> (TestContext, PathBuf) {
    let ctx = ctx.isolated().at("repo").delete_on_drop();
    ctx.write(".devcontainer/devcontainer.json", devcontainer);
    git(ctx.path(), &["init", "-q"]);
    git(ctx.path(), &["add", "-A"]);
    git(ctx.path(), &["commit", "-q", "-m", "initial"]);
    let config = ctx.tmp().join("config.toml");
    std::fs::write(&config, format!("[agents.a]\ncommand = {agent}\n")).unwrap();
    (ctx, config)
}

fn handoff(ctx: &TestContext, config: &Path, extra: &[&str]) -> std::process::Output {
    ctx.command()
        .args(["handoff", "--workspace-folder"])
        .arg(ctx.path())
        .args(["--agent", "a", "--config-file"])
        .arg(config)
        .args(extra)
        .output()
        .expect("devcell runs")
}

/// `handoff --plan` carries the dotfiles step (spec-note 0645): a host folder is named in the
/// plan, and the export of its committed HEAD (in devcell's state, not made by the plan) is
/// bound read-only at `/run/devcell/dotfiles`; `--runtime host` refuses the flags.
#[test]
fn the_handoff_plan_binds_a_host_dotfiles_folder_read_only() {
    let (ctx, config) = handoff_workspace(
        TestContext::new("handoff-dotfiles-plan"),
        r#"{"image": "devcell-test/busybox:1", "remoteUser": "nobody"}"#,
        r#"["true"]"#,
    );
    let repos = tempfile::tempdir().unwrap();
    let bare = bare_repository(repos.path(), &[("install.sh", INSTALL)]);
    let bare_arg = bare.to_str().unwrap();
    let out = handoff(
        &ctx,
        &config,
        &[
            "--plan",
            "--format",
            "json",
            "--dotfiles-repository",
            bare_arg,
        ],
    );
    let v = crate::support::envelope(&out);
    let real = std::fs::canonicalize(&bare).unwrap();
    assert_eq!(
        v["result"]["dotfiles"],
        serde_json::json!({
            "repository": bare_arg,
            "hostSource": real,
            "targetPath": "~/dotfiles",
            "installCommand": null,
            "clonedOnHost": true,
        }),
        "{v}"
    );
    // the export of its committed HEAD is bound, never the folder itself (attack L10)
    let mounts = v["result"]["mounts"].as_array().unwrap();
    let bound = mounts
        .iter()
        .find(|m| m["target"] == "/run/devcell/dotfiles")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(bound["readOnly"], true, "{v}");
    assert_eq!(bound["purpose"], "dotfiles", "{v}");
    let source = bound["source"].as_str().unwrap();
    assert!(
        source != real.to_str().unwrap() && source.contains("/dotfiles/"),
        "{v}"
    );
    assert!(!Path::new(source).exists(), "the plan writes nothing: {v}");
    let text = handoff(
        &ctx,
        &config,
        &["--plan", "--dotfiles-repository", bare_arg],
    );
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("  dotfiles   host folder") && stdout.contains("committed HEAD only"),
        "{stdout}"
    );
    // a URL under `none` (the handoff's default) is cloned by the host git into the same
    // export (spec-note 0670)
    let url = format!("file://{}", bare.display());
    let out = handoff(
        &ctx,
        &config,
        &["--plan", "--format", "json", "--dotfiles-repository", &url],
    );
    let v = crate::support::envelope(&out);
    assert_eq!(
        v["result"]["dotfiles"]["hostSource"],
        serde_json::Value::Null
    );
    assert_eq!(v["result"]["dotfiles"]["clonedOnHost"], true, "{v}");
    assert_eq!(v["result"]["dotfiles"]["repository"], url.as_str(), "{v}");
    assert!(
        v["result"]["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["target"] == "/run/devcell/dotfiles" && m["readOnly"] == true),
        "{v}"
    );
    let host = handoff(
        &ctx,
        &config,
        &["--runtime", "host", "--dotfiles-repository", bare_arg],
    );
    assert!(!host.status.success());
    let err = String::from_utf8_lossy(&host.stderr);
    assert!(err.contains("--runtime host"), "{err}");
}

/// `handoff --dotfiles-repository <host folder>` end to end under network `none`: the folder is
/// bound read-only, cloned inside the container and its `install.sh` run there once, as the
/// remote user's numeric ids; the agent (same ids) finds the install's marker in its home, and
/// nothing is written on the host.
#[test]
fn a_handoff_installs_dotfiles_from_a_host_folder_inside_the_container() {
    let Some(ctx) = TestContext::busybox("a_handoff_installs_dotfiles_from_a_host") else {
        return;
    };
    let image = dotfiles_image();
    // the agent passes only when the marker is in its own home, written by its own ids
    let (ctx, config) = handoff_workspace(
        ctx,
        &format!(r#"{{"image": "{image}", "remoteUser": "nobody"}}"#),
        r#"["sh", "-c", "grep -qx \"ran $(id -u):$(id -g) $HOME/dotfiles\" \"$HOME/dotfiles-ran\" || { cat \"$HOME/dotfiles-ran\"; id; exit 9; }"]"#,
    );
    let repos = tempfile::tempdir().unwrap();
    let bare = bare_repository(
        repos.path(),
        &[(
            "install.sh",
            "#!/bin/sh\necho \"ran $(id -u):$(id -g) $(pwd)\" > \"$HOME/dotfiles-ran\"\n",
        )],
    );
    let out = handoff(
        &ctx,
        &config,
        &[
            "--format",
            "json",
            "--dotfiles-repository",
            bare.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Installing dotfiles from /run/devcell/dotfiles"),
        "{err}"
    );
    let v = crate::support::envelope(&out);
    assert_eq!(v["result"]["exitCode"], 0, "{v}");
    // Nothing of it on the host: no marker anywhere under the test's folders, and the
    // repositories' folder holds only what the test made.
    let found = Command::new("find")
        .args([ctx.tmp(), repos.path()])
        .args(["-name", "dotfiles-ran"])
        .output()
        .unwrap();
    assert!(found.stdout.is_empty(), "{found:?}");
    let mut names: Vec<String> = std::fs::read_dir(repos.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["dots-work", "dots.git"]);
}

/// Attack L10: a host dotfiles folder is not shown to the agent. The folder (a working
/// repository) has a token in its remote URL, an ignored `private.env`, an older commit with a
/// secret and another branch: the install (inside the container) gets its committed HEAD and
/// runs, and the agent, afterwards, finds `/run/devcell/dotfiles` empty and none of the rest
/// anywhere it can read.
#[test]
fn dotfiles_host_folder_is_not_visible_to_the_agent() {
    let Some(ctx) = TestContext::busybox("dotfiles_host_folder_is_not_visible") else {
        return;
    };
    let image = dotfiles_image();
    let (ctx, config) = handoff_workspace(
        ctx,
        &format!(r#"{{"image": "{image}", "remoteUser": "nobody"}}"#),
        r#"["sh", "-c", "test -f \"$HOME/dotfiles-ran\" || exit 7; test -z \"$(ls -A /run/devcell/dotfiles)\" || { ls -la /run/devcell/dotfiles; exit 8; }; if grep -rsl -e tok3nSECRET -e IGNORED_SECRET -e OLD_SECRET -e other-branch /run/devcell \"$HOME\" /tmp; then exit 9; fi"]"#,
    );
    let repos = tempfile::tempdir().unwrap();
    let dots = repos.path().join("dots");
    std::fs::create_dir(&dots).unwrap();
    git(&dots, &["init", "-q"]);
    std::fs::write(
        dots.join("install.sh"),
        "#!/bin/sh\necho OLD_SECRET > /dev/null\n",
    )
    .unwrap();
    std::fs::write(dots.join(".gitignore"), "private.env\n").unwrap();
    std::fs::write(dots.join("private.env"), "IGNORED_SECRET=1\n").unwrap();
    git(&dots, &["add", "install.sh", ".gitignore"]);
    git(&dots, &["commit", "-q", "-m", "first"]);
    std::fs::write(
        dots.join("install.sh"),
        "#!/bin/sh\necho \"ran $(id -u)\" > \"$HOME/dotfiles-ran\"\n",
    )
    .unwrap();
    git(&dots, &["commit", "-q", "-am", "second"]);
    git(&dots, &["branch", "other-branch"]);
    git(
        &dots,
        &[
            "remote",
            "add",
            "origin",
            "https://me:tok3nSECRET@example.com/dots.git",
        ],
    );
    let before = std::fs::read(dots.join(".git/config")).unwrap();
    let out = handoff(
        &ctx,
        &config,
        &[
            "--format",
            "json",
            "--dotfiles-repository",
            dots.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let v = crate::support::envelope(&out);
    assert_eq!(
        v["result"]["exitCode"], 0,
        "the agent saw something: {v}\n{err}"
    );
    // nothing happened to the user's folder
    assert_eq!(std::fs::read(dots.join(".git/config")).unwrap(), before);
    assert!(dots.join("private.env").is_file());
}

/// `run-user-commands --stop-for-personalization` (spec-note 0645): the hooks up to
/// `postCreateCommand`, then the dotfiles, then it stops (no `postStartCommand`), and says so.
#[test]
fn run_user_commands_stops_for_personalization_after_the_dotfiles() {
    let Some(ctx) = TestContext::busybox("run_user_commands_stops_for_personalization") else {
        return;
    };
    let image = dotfiles_image();
    let ctx = ctx.config(&CONFIG.replace("IMAGE", image));
    let repos = tempfile::tempdir().unwrap();
    let bare = bare_repository(
        repos.path(),
        &[
            ("install.sh", INSTALL),
            (".profile-extra", "export FROM_DOTFILES=1\n"),
        ],
    );
    let mount = format!("type=bind,source={},target=/srv/dots.git", bare.display());
    // `--skip-post-create`: `up` runs no hook, so `run-user-commands` runs them all
    ctx.up(&["--network", "none", "--mount", &mount, "--skip-post-create"]);
    let run = ctx.run(
        "run-user-commands",
        &[
            "--stop-for-personalization",
            "--dotfiles-repository",
            "/srv/dots.git",
        ],
    );
    let result = run.ok().last_json();
    assert_eq!(result["result"], "stopForPersonalization", "{result}");
    assert_eq!(
        result["devcell"]["lifecycle"]["dotfiles"]["outcome"], "installed",
        "{result}"
    );
    let (code, order, err) = ctx.sh("cat \"$HOME/order\"");
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = order.lines().collect();
    assert_eq!(lines.len(), 2, "{order}");
    assert_eq!(lines[0], "post-create");
    assert!(lines[1].starts_with("dotfiles "), "{order}");
}
