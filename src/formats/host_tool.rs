//! The environment of the host programs devcell starts that are not its own host git
//! (Compose, the Docker CLI and its plugins, credential helpers, devcell's helper processes):
//! nothing they start runs what a repository's or a container's git configuration names
//! (spec-note 0414). devcell's own host git is `config::hostgit` (spec-note 0412), which shares
//! [`OVERRIDES`].

use std::process::Command;

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

/// What git reads from the environment that [`harden_tool`] removes from a host program's
/// environment: configuration passed as `-c` (`GIT_CONFIG_PARAMETERS`, which would otherwise
/// be read alongside the overrides) and anything that points git at another repository or
/// configuration than the one it discovers.
const TOOL_GIT_UNSET: &[&str] = &[
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
];

/// The environment [`harden_tool`] sets (spec-note 0414): the builders' git
/// provenance off (Compose's built-in builder and `buildx` run `git` in every local build
/// context, whose `.git` the repository writes: `BUILDX_GIT_INFO`, `BUILDX_GIT_LABELS`,
/// `BUILDX_GIT_CHECK_DIRTY`), and every git such a program might still start reading no
/// system or global configuration, fetching nothing lazily (a partial clone's missing object
/// would make `git show` fetch through a transport the repository configures), prompting for
/// nothing, and with [`OVERRIDES`] as highest-precedence configuration, but for the two that
/// a git fetch the user granted needs (`protocol.allow` stays git's default, `core.sshCommand`
/// is plain `ssh`).
pub fn tool_env() -> Vec<(String, String)> {
    let fixed = [
        ("BUILDX_GIT_INFO", "0"),
        ("BUILDX_GIT_LABELS", "0"),
        ("BUILDX_GIT_CHECK_DIRTY", "0"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_CONFIG_SYSTEM", "/dev/null"),
        ("GIT_NO_LAZY_FETCH", "1"),
        ("GIT_PROTOCOL_FROM_USER", "0"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("GIT_NO_REPLACE_OBJECTS", "1"),
        ("GIT_ATTR_NOSYSTEM", "1"),
        ("GIT_PAGER", "cat"),
        ("GIT_EDITOR", "true"),
    ];
    let overrides: Vec<(&str, &str)> = OVERRIDES
        .iter()
        .filter(|(k, _)| *k != "protocol.allow")
        .map(|&(k, v)| {
            if k == "core.sshCommand" {
                (k, "ssh")
            } else {
                (k, v)
            }
        })
        .collect();
    let mut env: Vec<(String, String)> = fixed
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    env.push(("GIT_CONFIG_COUNT".to_string(), overrides.len().to_string()));
    for (i, (key, value)) in overrides.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), (*key).to_string()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), (*value).to_string()));
    }
    env
}

/// Hardens a host program devcell starts that is not git itself (Compose, the Docker CLI and
/// its plugins, a credential helper, devcell's own helper processes): [`tool_env`] set over
/// whatever environment it has, [`TOOL_GIT_UNSET`] removed. The one place every such spawn
/// goes through, so neither the program nor anything it starts runs what a repository's or a
/// container's git configuration names (spec-note 0414). Works for
/// `tokio::process::Command` through `as_std_mut`.
pub fn harden_tool(command: &mut Command) -> &mut Command {
    for name in TOOL_GIT_UNSET {
        command.env_remove(name);
    }
    command.envs(tool_env())
}
