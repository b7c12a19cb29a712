//! The reference CLI's flags on devcell's drop-in commands (spec-note 0310): every flag of
//! `@devcontainers/cli` 0.89 parses (implemented, accepted, or refused with a devcell error
//! naming it, never clap's "unexpected argument"); `exec --container-id` against the real
//! engine; options before `exec`'s command are options.

use crate::support::deadline::Bounded as _;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::context::TestContext;
use crate::support::devcell;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::refcli::reference_cli;

/// The drop-in commands compared with the reference's `--help`.
const COMMANDS: &[&[&str]] = &[
    &["up"],
    &["exec"],
    &["run-user-commands"],
    &["set-up"],
    &["build"],
    &["read-configuration"],
    &["outdated"],
    &["upgrade"],
    &["features", "resolve-dependencies"],
    &["features", "package"],
    &["features", "publish"],
    &["features", "info"],
    &["features", "test"],
    &["templates", "apply"],
    &["templates", "metadata"],
];

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn last_json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text}"))
}

/// The long flags a `--help` text lists (`--name` at the start of an option line).
fn help_flags(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("-")
                .filter(|_| l.as_bytes().get(1) != Some(&b'-'))
                .map_or(l, |rest| {
                    rest.split_once(", ").map_or(rest, |(_, long)| long)
                });
            l.strip_prefix("--").map(|f| {
                f.split([' ', '=', '['])
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
        })
        .filter(|f| !f.is_empty() && f != "help" && f != "version")
        .collect()
}

#[test]
fn every_reference_flag_is_known_to_devcell() {
    let Some(cli) = reference_cli("every_reference_flag_is_known_to_devcell") else {
        return;
    };
    let mut missing = Vec::new();
    for command in COMMANDS {
        let reference = cli
            .command()
            .args(*command)
            .arg("--help")
            .long_output()
            .expect("reference CLI runs");
        let reference = String::from_utf8_lossy(&reference.stdout).into_owned();
        let flags = help_flags(&reference);
        assert!(
            flags.iter().any(|f| f == "log-level"),
            "{command:?}: no flags read from the reference help:\n{reference}"
        );
        let ours = devcell().args(*command).arg("--help").output().unwrap();
        assert!(ours.status.success(), "{command:?}: {}", stderr(&ours));
        let ours = help_flags(&String::from_utf8_lossy(&ours.stdout));
        for flag in flags {
            if !ours.contains(&flag) {
                missing.push(format!("{} --{flag}", command.join(" ")));
            }
        }
    }
    assert!(missing.is_empty(), "flags devcell lacks: {missing:#?}");
}

/// A workspace folder that does not exist: commands that get past parsing fail on it.
const NO_WORKSPACE: &str = "/nonexistent/devcell-compat-flags";

#[test]
fn accepted_reference_flags_parse() {
    let accepted: &[(&str, &[&str])] = &[
        (
            "up",
            &[
                "--docker-path=docker",
                "--docker-compose-path=docker-compose",
                "--user-data-folder=/tmp",
                "--container-data-folder=.data",
                "--container-system-data-folder=/var/devcontainer",
                "--container-session-data-folder=/tmp/s",
                "--workspace-mount-consistency=cached",
                "--gpu-availability=detect",
                "--mount-git-worktree-common-dir",
                "--override-config=/nonexistent/o.json",
                "--log-format=json",
                "--terminal-columns=80",
                "--terminal-rows=24",
                "--update-remote-user-uid-default=never",
                "--build-no-cache",
                "--cache-from=devcell-test/none:1",
                "--buildkit=never",
                "--additional-features={}",
                "--prebuild",
                "--dotfiles-repository=me/dots",
                "--dotfiles-install-command=./go",
                "--dotfiles-target-path=~/dots",
                "--skip-feature-auto-mapping",
                "--omit-config-remote-env-from-metadata",
                "--omit-syntax-directive",
                "--oci-auth-hardening",
                "--allow-cross-origin-auth-host=r.example=a.example",
            ],
        ),
        (
            "exec",
            &[
                "--docker-path=docker",
                "--user-data-folder=/tmp",
                "--container-data-folder=.data",
                "--container-system-data-folder=/x",
                "--mount-git-worktree-common-dir=false",
                "--override-config=/nonexistent/o.json",
                "--log-format=text",
                "--terminal-columns=80",
                "--terminal-rows=24",
                "true",
            ],
        ),
        (
            "run-user-commands",
            &[
                "--docker-compose-path=dc",
                "--container-session-data-folder=/tmp/s",
                "--prebuild",
                "--skip-post-attach",
                "--dotfiles-repository=/srv/dots.git",
                "--dotfiles-target-path=~/d",
                "--log-format=json",
            ],
        ),
        (
            "read-configuration",
            &["--skip-feature-auto-mapping", "--log-format=json"],
        ),
        ("outdated", &["--docker-path=docker", "--log-format=json"]),
        (
            "build",
            &[
                "--skip-persisting-customizations-from-features",
                "--omit-syntax-directive",
                "--terminal-columns=1",
                "--terminal-rows=1",
            ],
        ),
    ];
    for (command, flags) in accepted {
        let out = devcell()
            .arg(command)
            .arg("--workspace-folder")
            .arg(NO_WORKSPACE)
            .args(*flags)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{command}: {err}");
        assert!(!err.contains("unexpected argument"), "{command}: {err}");
        assert!(
            err.contains("does not exist")
                || err.contains("not a directory")
                || err.contains("not found"),
            "{command} got past parsing to the workspace: {err}"
        );
    }
}

#[test]
fn unsupported_reference_flags_are_refused_by_name() {
    let refused: &[(&[&str], &str)] = &[(
        &["up", "--cache-to", "type=local,dest=/tmp/c"],
        "--cache-to",
    )];
    for (args, flag) in refused {
        let out = devcell()
            .args(*args)
            .args(["--workspace-folder", NO_WORKSPACE])
            .output()
            .unwrap();
        // set-up has no --workspace-folder: it is a usage error there; run it without.
        let out = if args[0] == "set-up" {
            devcell().args(*args).output().unwrap()
        } else {
            out
        };
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let result = last_json(&out);
        assert_eq!(result["outcome"], "error");
        let message = result["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "`{flag}` is not supported by `devcell {}`",
                args[0]
            )),
            "{args:?}: {message}"
        );
        assert!(
            !result["description"]
                .as_str()
                .unwrap_or_default()
                .is_empty(),
            "{args:?}: no hint: {result}"
        );
    }
}

#[test]
fn exec_options_come_before_the_command() {
    // An unknown option before the command is a usage error, not the command.
    let out = devcell().args(["exec", "--bogus", "x"]).output().unwrap();
    // Usage errors of the reference's commands exit 1, as its yargs (spec-note 0454).
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("unexpected argument '--bogus'"),
        "{}",
        stderr(&out)
    );
    // `--container-id` needs a value and a command.
    let out = devcell()
        .args(["exec", "--container-id", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Usage: devcell exec"),
        "{}",
        stderr(&out)
    );
    // Hyphen values after the command are the command's (parsed by clap: the container is
    // then looked for, and not found).
    let out = devcell()
        .args([
            "exec",
            "--container-id",
            "devcell-compat-no-such-container",
            "sh",
            "-c",
            "ls -l",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!err.contains("unexpected argument"), "{err}");
    assert!(!err.contains("Usage:"), "{err}");
}

#[test]
fn usage_errors_name_the_way_out() {
    let out = devcell().arg("audit").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--workspace-folder"),
        "{}",
        stderr(&out)
    );

    let ws = tempfile::tempdir().unwrap();
    let run = |config: &str| {
        devcell()
            .current_dir(ws.path())
            .args(["read-configuration", "--config", config])
            .output()
            .unwrap()
    };
    let absolute = run("/nonexistent/devcell-compat/devcontainer.json");
    assert_eq!(absolute.status.code(), Some(1));
    assert!(
        stderr(&absolute).contains("not found"),
        "{}",
        stderr(&absolute)
    );
    assert!(
        !stderr(&absolute).contains("relative to the current directory"),
        "{}",
        stderr(&absolute)
    );
    let relative = run("nope/devcontainer.json");
    assert_eq!(relative.status.code(), Some(1));
    assert!(
        stderr(&relative).contains("`--config` is relative to the current directory"),
        "{}",
        stderr(&relative)
    );
}

fn ran(result: &Value) -> Vec<String> {
    result["devcell"]["lifecycle"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["hook"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn exec_and_run_user_commands_by_container_id() {
    let Some(ctx) = TestContext::busybox("exec_and_run_user_commands_by_container_id") else {
        return;
    };
    // The real devcontainer.json is broken: `--override-config` gives the content.
    let ws = ctx.config("{ this is not json");
    let override_file = ws.path().join("override.json");
    std::fs::write(
        &override_file,
        r#"{"image": "IMAGE", "remoteUser": "nobody",
            "remoteEnv": {"FROM_LABEL": "label-${containerEnv:PATH}"},
            "onCreateCommand": "echo on-create",
            "updateContentCommand": "echo update-content",
            "postCreateCommand": "echo post-create",
            "postStartCommand": "echo post-start"}"#
            .replace("IMAGE", BUSYBOX_IMAGE),
    )
    .unwrap();
    let override_arg = override_file.to_str().unwrap();
    let out = ws.output(
        "up",
        &[
            "--override-config",
            override_arg,
            "--prebuild",
            "--update-remote-user-uid-default",
            "never",
            "--log-format",
            "json",
            "--build-no-cache",
        ],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "up failed: {err}");
    let result = last_json(&out);
    assert_eq!(result["outcome"], "success", "{result}");
    // --prebuild: onCreate and updateContent only.
    assert_eq!(ran(&result), ["onCreateCommand", "updateContentCommand"]);
    // --log-format json: stderr is JSON log events.
    for line in err.lines().filter(|l| !l.trim().is_empty()) {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stderr line is not a JSON event ({e}): {line}"));
        assert!(event.get("type").is_some(), "{line}");
    }
    let id = result["containerId"].as_str().unwrap().to_string();
    let name = Command::new("docker")
        .args(["inspect", "-f", "{{.Name}}", &id])
        .bounded_output()
        .unwrap();
    let name = String::from_utf8_lossy(&name.stdout)
        .trim()
        .trim_start_matches('/')
        .to_string();

    // From another folder, with no devcontainer.json at all: the container's label gives
    // remoteUser and remoteEnv; the command runs in the remote user's home.
    let elsewhere = tempfile::tempdir().unwrap();
    for target in [id.as_str(), name.as_str()] {
        let out = devcell()
            .current_dir(elsewhere.path())
            .args([
                "exec",
                "--container-id",
                target,
                "sh",
                "-c",
                "echo \"$(id -un) $FROM_LABEL $PWD\"",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "exec {target}: {}", stderr(&out));
        let home = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let parts: Vec<&str> = home.split(' ').collect();
        assert_eq!(parts.len(), 3, "{home}");
        assert_eq!(parts[0], "nobody", "{home}");
        assert!(parts[1].starts_with("label-"), "{home}");
        assert_ne!(
            parts[1], "label-",
            "${{containerEnv:PATH}} substituted: {home}"
        );
    }

    // `--container-id` with a `--config` and no `--workspace-folder`: still the remote user's
    // home (no `/workspaces/<current folder>` made up), unless the config names a
    // `workspaceFolder` (issue 12 item 11b).
    let pwd_with = |config: &str| {
        let file = elsewhere.path().join("given.json");
        std::fs::write(&file, config).unwrap();
        let out = devcell()
            .current_dir(elsewhere.path())
            .args(["exec", "--container-id", &id, "--config"])
            .arg(&file)
            .args(["sh", "-c", "echo \"$(id -un) $PWD\""])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let home_pwd = {
        let out = devcell()
            .current_dir(elsewhere.path())
            .args([
                "exec",
                "--container-id",
                &id,
                "sh",
                "-c",
                "echo \"$(id -un) $PWD\"",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let image_only = format!(r#"{{"image": "{BUSYBOX_IMAGE}"}}"#);
    let got = pwd_with(&image_only);
    assert_eq!(got, home_pwd, "ran in the remote user's home");
    assert!(!got.contains("/workspaces"), "{got}");
    let named = format!(r#"{{"image": "{BUSYBOX_IMAGE}", "workspaceFolder": "/tmp"}}"#);
    assert_eq!(pwd_with(&named), "nobody /tmp");

    // run-user-commands by id: the remaining hooks run (postCreate, postStart).
    let out = devcell()
        .current_dir(elsewhere.path())
        .args(["run-user-commands", "--container-id", &id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result = last_json(&out);
    assert_eq!(result["result"], "done");
    let hooks = ran(&result);
    assert!(
        hooks.contains(&"postCreateCommand".to_string()),
        "{hooks:?}"
    );
    assert!(!hooks.contains(&"onCreateCommand".to_string()), "{hooks:?}");

    // An unknown id: an error naming it.
    let out = devcell()
        .args(["exec", "--container-id", "devcell-flags-no-such", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("devcell-flags-no-such"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn up_adds_additional_features() {
    let Some(ctx) = TestContext::busybox("up_adds_additional_features") else {
        return;
    };
    let ws = ctx.config(r#"{"image": "IMAGE", "remoteUser": "nobody"}"#);
    let dir = ws.path().join(".devcontainer/extra");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("devcontainer-feature.json"),
        r#"{"id": "extra", "version": "1.0.0", "options": {"word": {"type": "string", "default": "no"}}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("install.sh"),
        "#!/bin/sh\nset -e\necho \"$WORD\" > /etc/extra-feature.txt\n",
    )
    .unwrap();
    let out = ws.output(
        "up",
        &["--additional-features", r#"{"./extra": {"word": "added"}}"#],
    );
    assert!(out.status.success(), "up failed: {}", stderr(&out));
    let result = last_json(&out);
    let id = result["containerId"].as_str().unwrap().to_string();
    let image = Command::new("docker")
        .args(["inspect", "-f", "{{.Config.Image}}", &id])
        .bounded_output()
        .unwrap();
    let image = String::from_utf8_lossy(&image.stdout).trim().to_string();
    let out = ws.output("exec", &["cat", "/etc/extra-feature.txt"]);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    drop(ws);
    if image.starts_with("devcell/") {
        let _ = Command::new("docker")
            .args(["rmi", &image])
            .bounded_output();
    }
    assert_eq!(text, "added");

    // Not JSON: an error naming the flag, nothing created.
    let ws = TestContext::new("flags").config(r#"{"image": "IMAGE"}"#);
    let out = ws.output("up", &["--additional-features", "[1]"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--additional-features"),
        "{}",
        stderr(&out)
    );
}

/// yargs' camel-case expansion: `--workspaceFolder` for `--workspace-folder`, for every dashed
/// long flag of every devcell command (hidden clap aliases; spec-note 0454).
fn camel(flag: &str) -> String {
    let mut parts = flag.split('-');
    let mut out = parts.next().unwrap_or_default().to_string();
    for p in parts {
        let mut c = p.chars();
        if let Some(first) = c.next() {
            out.push(first.to_ascii_uppercase());
            out.push_str(c.as_str());
        }
    }
    out
}

fn find_sub<'a>(cmd: &'a clap::Command, path: &[&str]) -> &'a clap::Command {
    path.iter().fold(cmd, |c, name| {
        c.find_subcommand(name)
            .unwrap_or_else(|| panic!("no subcommand {name}"))
    })
}

fn has_camel_alias(cmd: &clap::Command, flag: &str) -> bool {
    cmd.get_arguments().any(|a| {
        a.get_long() == Some(flag)
            && a.get_all_aliases()
                .is_some_and(|all| all.contains(&camel(flag).as_str()))
    })
}

#[test]
fn camel_case_spellings_of_every_flag_parse() {
    let mut root = devcell::cli::command();
    root.build();
    let mut missing = Vec::new();
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            if let Some(long) = a.get_long()
                && long.contains('-')
                && !has_camel_alias(cmd, long)
            {
                missing.push(format!("{path} --{long}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    walk(&root, "devcell", &mut missing);
    assert!(
        missing.is_empty(),
        "flags without a camelCase alias: {missing:#?}"
    );

    // Through the binary, the spellings the reference's own tests use: the same result.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    std::fs::write(
        ws.path().join(".devcontainer/devcontainer.json"),
        r#"{"image": "debian", "remoteEnv": {"A": "b"}}"#,
    )
    .unwrap();
    let w = ws.path().to_str().unwrap();
    let dashed = devcell()
        .args([
            "read-configuration",
            "--workspace-folder",
            w,
            "--include-merged-configuration",
        ])
        .args(["--skip-feature-auto-mapping", "--log-level", "info"])
        .output()
        .unwrap();
    let camel_out = devcell()
        .args([
            "read-configuration",
            "--workspaceFolder",
            w,
            "--includeMergedConfiguration",
        ])
        .args(["--skipFeatureAutoMapping", "--logLevel", "info"])
        .output()
        .unwrap();
    assert!(camel_out.status.success(), "{}", stderr(&camel_out));
    assert_eq!(last_json(&camel_out), last_json(&dashed));
    assert_eq!(
        last_json(&camel_out)["mergedConfiguration"]["remoteEnv"]["A"],
        "b"
    );

    // Every flag of the reference's `--help`, camelCased, is known to devcell.
    let Some(cli) = reference_cli("camel_case_spellings_of_every_flag_parse") else {
        return;
    };
    let mut unknown = Vec::new();
    for command in COMMANDS {
        let reference = cli
            .command()
            .args(*command)
            .arg("--help")
            .long_output()
            .unwrap();
        let sub = find_sub(&root, command);
        for flag in help_flags(&String::from_utf8_lossy(&reference.stdout)) {
            if flag.contains('-') && !has_camel_alias(sub, &flag) {
                unknown.push(format!("{} --{}", command.join(" "), camel(&flag)));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "camelCase flags devcell lacks: {unknown:#?}"
    );
}

/// Usage errors exit 1 for the reference's commands (its yargs does), 2 for devcell's own
/// (`invalid_argument`); conflicting flags are said the reference's way (spec-note 0454).
#[test]
fn usage_errors_exit_like_the_reference_and_conflicts_are_mutually_exclusive() {
    for args in [
        &["up", "--bogus"][..],
        &["read-configuration", "--workspace-folder"],
        &["features", "package", "--nope"],
        &["build", "--workspaceFolder"],
    ] {
        let out = devcell().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("For more information, try '--help'."),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    for args in [
        &["status", "--bogus"][..],
        &["doctor", "--nope"],
        &["prune", "--x"],
    ] {
        let out = devcell().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let ws = tempfile::tempdir().unwrap();
    let out = devcell()
        .args(["up", "--workspace-folder"])
        .arg(ws.path())
        .args(["--no-lockfile", "--frozen-lockfile"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(
        err.lines().next().unwrap(),
        "error: --no-lockfile and --frozen-lockfile are mutually exclusive.",
        "{err}"
    );
    assert!(err.contains("Usage: devcell up"), "{err}");
    if let Some(cli) = reference_cli("usage_errors_exit_like_the_reference") {
        let out = cli
            .command()
            .args(["up", "--workspace-folder"])
            .arg(ws.path())
            .args(["--no-lockfile", "--frozen-lockfile"])
            .long_output()
            .unwrap();
        cli.assert_stayed_local();
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("--no-lockfile and --frozen-lockfile are mutually exclusive."),
            "{}",
            stderr(&out)
        );
    }
}
