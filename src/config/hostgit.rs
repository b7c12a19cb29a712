//! devcell's own `git` on the host, run so that nothing a repository's configuration names can
//! execute (spec-note 0412).
//!
//! A repository's git directory is written by whoever controls it (an attacker's repository, a
//! container that had it mounted), and git *executes* what its configuration names:
//! `core.fsmonitor` (run by every `git status`), filter drivers (`filter.<d>.clean`/`process`,
//! run by `git status` when it re-hashes a file), hooks, pagers, credential helpers, diff and
//! merge drivers, `core.sshCommand`, `gpg.program`, remote `uploadpack`/`receivepack`, the
//! `ext::` transport. [`command`] builds a `git` that reads no system or global configuration,
//! has a cleared environment, and overrides every such key with a value that runs nothing
//! ([`OVERRIDES`], and per repository [`neutralize`] for the keys whose names the
//! configuration chooses). Overrides travel as `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/
//! `GIT_CONFIG_VALUE_n` (the environment form of `-c`, highest precedence, inherited by git's
//! child processes, and safe for any key name).

use std::path::Path;
use std::process::{Command, Stdio};

/// Keys overridden for every host `git`, with the value that disables them.
pub const OVERRIDES: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.askPass", ""),
    ("core.sshCommand", ""),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("gpg.program", ""),
    ("gpg.openpgp.program", ""),
    ("gpg.x509.program", ""),
    ("gpg.ssh.program", ""),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("uploadpack.packObjectsHook", ""),
    ("protocol.allow", "never"),
    ("protocol.ext.allow", "never"),
    ("submodule.recurse", "false"),
];

/// The last part of a configuration key (lower case) whose value git runs as a command, in a
/// section whose subsection the configuration names: `filter.<d>.clean|smudge|process`,
/// `diff.<d>.command|textconv`, `merge.<d>.driver`, `credential.<url>.helper`,
/// `gpg.<fmt>.program`, `remote.<r>.uploadpack|receivepack|vcs`, `difftool.<t>.cmd`,
/// `mergetool.<t>.cmd`, `browser.<t>.cmd`, `man.<t>.cmd`, `trailer.<t>.command|cmd`,
/// `submodule.<s>.update` (`!command`), `pager.<cmd>` and `alias.<name>` (`!command`).
const COMMAND_KEYS: &[(&str, &[&str])] = &[
    ("filter", &["clean", "smudge", "process"]),
    ("diff", &["command", "textconv"]),
    ("merge", &["driver"]),
    ("credential", &["helper"]),
    ("gpg", &["program"]),
    ("remote", &["uploadpack", "receivepack", "vcs"]),
    ("difftool", &["cmd"]),
    ("mergetool", &["cmd"]),
    ("browser", &["cmd"]),
    ("man", &["cmd"]),
    ("trailer", &["command", "cmd"]),
    ("submodule", &["update"]),
];

/// The overrides for the configuration keys `keys` (as `git config --list --name-only`
/// prints them): every key that names a command in a section of [`COMMAND_KEYS`], plus
/// `pager.*` and `alias.*`, set to the empty value (git then runs nothing for it: an empty
/// filter or driver is no filter or driver). Pure.
pub fn neutralize<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for key in keys {
        let lower = key.to_ascii_lowercase();
        let Some((section, rest)) = lower.split_once('.') else {
            continue;
        };
        let last = rest.rsplit('.').next().unwrap_or(rest);
        let runs = matches!(section, "pager" | "alias")
            || (rest.contains('.')
                && COMMAND_KEYS
                    .iter()
                    .any(|(s, names)| *s == section && names.contains(&last)));
        if runs && !out.iter().any(|(k, _)| k == key) {
            out.push((key.to_string(), String::new()));
        }
    }
    out
}

/// `git --no-pager -C <dir>` with a cleared environment (only `PATH`, `LC_ALL=C`), no system
/// or global configuration (`GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`,
/// `GIT_CONFIG_SYSTEM=/dev/null`), no prompts (`GIT_TERMINAL_PROMPT=0`, no askpass), no
/// optional locks (`GIT_OPTIONAL_LOCKS=0`), no replace objects, stdin closed, and
/// [`OVERRIDES`] plus `extra` as configuration of the highest precedence. Run as the folder's
/// owner when devcell is root and the owner is not ([`super::ownership::run_as_owner`]).
pub fn command(dir: &Path, extra: &[(String, String)]) -> Command {
    let mut git = Command::new("git");
    git.arg("--no-pager")
        .arg("-C")
        .arg(dir)
        .env_clear()
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_PAGER", "cat")
        .env("GIT_EDITOR", "true")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_PROTOCOL_FROM_USER", "0")
        .stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        git.env("PATH", path);
    }
    let all: Vec<(String, String)> = OVERRIDES
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .chain(extra.iter().cloned())
        .collect();
    git.env("GIT_CONFIG_COUNT", all.len().to_string());
    for (i, (key, value)) in all.iter().enumerate() {
        git.env(format!("GIT_CONFIG_KEY_{i}"), key);
        git.env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    // a root devcell in a user's repository runs git as that user (spec-note 0250)
    super::ownership::run_as_owner(&mut git, dir);
    git
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_keys_the_configuration_names_are_neutralized() {
        let keys = [
            "core.bare",
            "filter.lfs.clean",
            "filter.Evil.Process",
            "filter.x.required",
            "diff.pdf.textconv",
            "diff.pdf.command",
            "merge.ours.driver",
            "credential.https://example.test.helper",
            "remote.origin.url",
            "remote.origin.uploadpack",
            "pager.status",
            "alias.st",
            "gpg.ssh.program",
            "user.name",
        ];
        let got: Vec<String> = neutralize(keys).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            got,
            [
                "filter.lfs.clean",
                "filter.Evil.Process",
                "diff.pdf.textconv",
                "diff.pdf.command",
                "merge.ours.driver",
                "credential.https://example.test.helper",
                "remote.origin.uploadpack",
                "pager.status",
                "alias.st",
                "gpg.ssh.program",
            ]
        );
        assert!(neutralize(["filter.lfs.clean"])[0].1.is_empty());
    }

    /// A repository whose configuration names an fsmonitor and a filter that would create a
    /// marker: `git status` through [`command`] runs neither; plain git does (the control).
    #[test]
    fn status_runs_nothing_the_repository_configures() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r");
        let marker = dir.path().join("marker");
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        std::fs::create_dir(&repo).unwrap();
        run(&["init", "-q"]);
        std::fs::write(repo.join(".gitattributes"), "* filter=evil\n").unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        run(&["add", "."]);
        run(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "x",
        ]);
        let script = format!("touch {}", marker.display());
        run(&["config", "core.fsmonitor", &script]);
        run(&["config", "filter.evil.clean", &format!("{script}; cat")]);
        std::fs::write(repo.join("a.txt"), "changed\n").unwrap();

        let keys = command(&repo, &[])
            .args(["config", "--list", "--name-only"])
            .output()
            .unwrap();
        let keys = String::from_utf8(keys.stdout).unwrap();
        let extra = neutralize(keys.lines());
        let out = command(&repo, &extra)
            .args(["status", "--porcelain=v2"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(!marker.exists(), "the repository's configuration ran");

        // control: the same status with git's defaults runs the planted commands
        run(&["status", "--porcelain"]);
        assert!(
            marker.exists(),
            "the control did not run the planted fsmonitor"
        );
    }
}
