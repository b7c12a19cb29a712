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

pub use crate::formats::host_tool::{OVERRIDES, harden_tool, tool_env};

/// Test support: `git -C dir args` reading no user or system configuration, with a fixed
/// identity (`t <t@t>`) and no stdin, for tests that make repositories. Returns its stdout.
///
/// Panics (a test's failure) when git cannot run or fails, with its output.
#[cfg(test)]
pub(crate) fn test_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .stdin(Stdio::null())
        .output()
        .expect("git must be installed for these tests");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

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
/// optional locks (`GIT_OPTIONAL_LOCKS=0`), no replace objects, no lazy fetch of a partial
/// clone's missing objects (`GIT_NO_LAZY_FETCH=1`), stdin closed, and
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
        .env("GIT_NO_LAZY_FETCH", "1")
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

/// How long a quick host git command (`rev-parse`, `config --get`) may take: a repository
/// whose configuration `[include]`s a FIFO (the container can make one in the workspace's git
/// folder) or whose `HEAD` is one would make git, and devcell with it, wait for ever
/// (spec-note 0433).
pub const QUICK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// [`QUICK_DEADLINE`], or less when `DEVCELL_GIT_DEADLINE_SECS` holds a smaller positive number
/// of seconds (the tests that make git wait on a FIFO use it so each call costs 1 s, not 10;
/// it can only shorten the bound, never lengthen it).
pub fn quick_deadline() -> std::time::Duration {
    std::env::var("DEVCELL_GIT_DEADLINE_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map_or(QUICK_DEADLINE, |s| {
            std::time::Duration::from_secs(s).min(QUICK_DEADLINE)
        })
}

/// Runs `git` (a [`command`]) to its end like [`Command::output`], but for at most `deadline`:
/// past it the process is killed and the result is an error of kind
/// [`std::io::ErrorKind::TimedOut`].
///
/// Errors: git cannot be started, or it did not end within `deadline`.
pub fn output_within(
    git: &mut Command,
    deadline: std::time::Duration,
) -> std::io::Result<std::process::Output> {
    // its own process group, killed with devcell (spec-note 0425)
    crate::process::output_within_std(git, None, deadline).map_err(|e| {
        if e.kind() == std::io::ErrorKind::TimedOut {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "git did not answer within {} s (is a file its configuration includes, or `HEAD`, a FIFO?)",
                    deadline.as_secs()
                ),
            )
        } else {
            e
        }
    })
}

/// The most of a repository's `config` devcell reads (bytes).
const CONFIG_MAX: u64 = 1 << 20;
/// The most of a `HEAD` devcell reads (bytes).
const HEAD_MAX: u64 = 4096;

/// Why a repository could not be prepared for [`PrivateGitDir`]; shown per repository.
#[derive(Debug, thiserror::Error)]
pub enum PrivateGitDirError {
    /// A file of the git directory could not be read or the private directory written.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The repository uses something the private git directory does not reproduce.
    #[error("`{}`: {message}", path.display())]
    Unsupported {
        /// The file that says so.
        path: std::path::PathBuf,
        /// What, and what devcell does instead.
        message: String,
    },
    /// `git config --list` refused devcell's own copy of the configuration.
    #[error("`git config --list` of the snapshot of `{}` failed: {stderr}", path.display())]
    Config {
        /// The repository's `config`.
        path: std::path::PathBuf,
        /// git's standard error, trimmed.
        stderr: String,
    },
}

/// A git directory devcell owns (a temporary directory, removed on drop) standing in for a
/// repository's own, so that the configuration a host `git` reads is exactly the one devcell
/// read, once (spec-note 0412): its `config` is written by devcell with only
/// `core.repositoryformatversion` and `extensions.*` from one bounded, no-follow read of the
/// repository's `config` (listed by git from devcell's copy with `--no-includes`), `HEAD` is a
/// bounded copy of the (worktree's) git directory's, `refs`, `packed-refs`, `info` and
/// `shallow` are symbolic links to the common directory's (data git reads, never runs),
/// objects come through `GIT_OBJECT_DIRECTORY` (alternates as the repository has them), the
/// index through `GIT_INDEX_FILE`, the working tree through `GIT_WORK_TREE`. The few other keys
/// that change what `status` reports ([`carried`]: line endings, file modes, case, sparse
/// checkout, the branch's upstream) travel as `GIT_CONFIG_KEY_n` values; nothing else of the
/// repository's configuration (no include, no driver, no `core.worktree`, no
/// `config.worktree`) reaches git.
pub struct PrivateGitDir {
    root: tempfile::TempDir,
    work_tree: std::path::PathBuf,
    index: std::path::PathBuf,
    objects: std::path::PathBuf,
    config: Vec<(String, String)>,
    format: String,
}

impl PrivateGitDir {
    /// Prepares the private git directory for the repository whose (worktree's) git directory
    /// is `git_dir`, common directory `common_dir` (both as judged by the caller) and working
    /// tree `work_tree`.
    ///
    /// Errors: [`PrivateGitDirError::Io`] for a `config` or `HEAD` that is a link, a FIFO,
    /// a device, larger than its bound or unreadable, or a private directory that cannot be
    /// written; [`PrivateGitDirError::Unsupported`] for a repository format devcell does not
    /// reproduce (format version above 1, the reftable ref storage, an extension value that
    /// is not a plain word, a `HEAD` that is neither a ref nor an object name);
    /// [`PrivateGitDirError::Config`] when git cannot list the copy.
    pub fn new(
        git_dir: &Path,
        common_dir: &Path,
        work_tree: &Path,
    ) -> Result<Self, PrivateGitDirError> {
        use std::os::unix::fs::PermissionsExt as _;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| PrivateGitDirError::Io { path, source }
        };
        let config_path = common_dir.join("config");
        let config_bytes = read_no_follow(&config_path, CONFIG_MAX).map_err(io(&config_path))?;
        let head_path = git_dir.join("HEAD");
        let head = read_no_follow(&head_path, HEAD_MAX).map_err(io(&head_path))?;
        let head = String::from_utf8(head)
            .ok()
            .filter(|h| valid_head(h))
            .ok_or_else(|| PrivateGitDirError::Unsupported {
                path: head_path.clone(),
                message: "is neither `ref: refs/…` nor an object name".into(),
            })?;

        let root = tempfile::Builder::new()
            .prefix("devcell-git-")
            .tempdir()
            .map_err(io(&std::env::temp_dir()))?;
        // a root devcell runs git as the repository's owner (0250): it must read, not write
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(io(root.path()))?;
        let snapshot = root.path().join("snapshot.config");
        write_file(&snapshot, &config_bytes)?;
        let mut list = command(root.path(), &[]);
        // no repository is looked for above devcell's own directory
        let ceiling = root.path().parent().unwrap_or(root.path());
        list.env("GIT_CEILING_DIRECTORIES", ceiling)
            .args(["config", "--no-includes", "--list", "-z", "--file"])
            .arg(&snapshot);
        let listed = list.output().map_err(io(&snapshot))?;
        if !listed.status.success() {
            return Err(PrivateGitDirError::Config {
                path: config_path,
                stderr: String::from_utf8_lossy(&listed.stderr).trim().to_string(),
            });
        }
        let entries = parse_list(&String::from_utf8_lossy(&listed.stdout));
        let format =
            repository_format(&entries).map_err(|message| PrivateGitDirError::Unsupported {
                path: config_path.clone(),
                message,
            })?;

        let dir = root.path().join("git");
        std::fs::create_dir(&dir).map_err(io(&dir))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(io(&dir))?;
        write_file(&dir.join("config"), format.as_bytes())?;
        let format_text = format.clone();
        write_file(&dir.join("HEAD"), head.as_bytes())?;
        for name in ["refs", "packed-refs", "info", "shallow"] {
            let real = common_dir.join(name);
            if real.symlink_metadata().is_ok() {
                std::os::unix::fs::symlink(&real, dir.join(name)).map_err(io(&dir.join(name)))?;
            }
        }
        // a split index names its shared part in the (worktree's) git directory
        for entry in std::fs::read_dir(git_dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with("sharedindex.") {
                let link = dir.join(&name);
                std::os::unix::fs::symlink(entry.path(), &link).map_err(io(&link))?;
            }
        }
        let config = entries
            .into_iter()
            .filter(|(key, _)| carried(key))
            .map(|(key, value)| {
                let value = value.unwrap_or_else(|| "true".into());
                // the container reads this copy: a token in a remote URL stays on the host
                let value = if key.to_ascii_lowercase().ends_with(".url") {
                    without_credentials(&value)
                } else {
                    value
                };
                (key, value)
            })
            .collect();
        Ok(Self {
            root,
            work_tree: work_tree.to_path_buf(),
            index: git_dir.join("index"),
            objects: common_dir.join("objects"),
            config,
            format: format_text,
        })
    }

    /// [`command`] in the working tree, on this git directory: `GIT_DIR`, `GIT_WORK_TREE`,
    /// `GIT_INDEX_FILE`, `GIT_OBJECT_DIRECTORY` set, `--no-optional-locks` (nothing written),
    /// no lazy fetch of a partial clone's missing objects, and the carried keys plus `extra`
    /// as configuration.
    pub fn command(&self, extra: &[(String, String)]) -> Command {
        let all: Vec<(String, String)> = self.config.iter().chain(extra).cloned().collect();
        let mut git = command(&self.work_tree, &all);
        git.arg("--no-optional-locks")
            .env("GIT_DIR", self.root.path().join("git"))
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_INDEX_FILE", &self.index)
            .env("GIT_OBJECT_DIRECTORY", &self.objects)
            .env("GIT_NO_LAZY_FETCH", "1");
        git
    }

    /// The `config` devcell wrote for it: the repository format (version, `extensions.*`,
    /// `bare = false`) and nothing else.
    pub fn format_config(&self) -> &str {
        &self.format
    }

    /// The repository's keys passed on as configuration ([`carried`]), with their values.
    pub fn carried_config(&self) -> &[(String, String)] {
        &self.config
    }

    /// The private git directory (for tests and diagnostics).
    pub fn git_dir(&self) -> std::path::PathBuf {
        self.root.path().join("git")
    }
}

/// Reads at most `max` bytes of the regular file `path`, refusing a symbolic link (`O_NOFOLLOW`),
/// a FIFO, a device or a folder, never waiting for a writer.
///
/// Errors: the open or read failure; [`std::io::ErrorKind::InvalidInput`] for what is not a
/// regular file, [`std::io::ErrorKind::FileTooLarge`] past `max`.
pub fn read_no_follow(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
        .open(path)?;
    read_regular(file, max)
}

/// Reads at most `max` bytes of the open `file`, refusing what is not a regular file.
///
/// Errors: as [`read_no_follow`], past the open.
pub fn read_regular(file: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is not a regular file",
        ));
    }
    let mut out = Vec::new();
    file.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("is larger than {max} bytes"),
        ));
    }
    Ok(out)
}

/// Writes a new file (`0644`, readable by the repository's owner when devcell is root).
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), PrivateGitDirError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|source| PrivateGitDirError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// `HEAD` as git writes it: `ref: refs/<name>` or a hexadecimal object name (SHA-1 or
/// SHA-256), one line. Pure.
pub fn valid_head(head: &str) -> bool {
    let line = head.strip_suffix('\n').unwrap_or(head);
    if line.contains(['\n', '\r', '\0']) {
        return false;
    }
    match line.strip_prefix("ref: ") {
        Some(name) => name.starts_with("refs/") && !name.contains(char::is_whitespace),
        None => matches!(line.len(), 40 | 64) && line.bytes().all(|b| b.is_ascii_hexdigit()),
    }
}

/// The entries of `git config --list -z` (`key\nvalue\0`, or `key\0` for a key without a
/// value) in order. Pure.
fn parse_list(text: &str) -> Vec<(String, Option<String>)> {
    text.split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once('\n') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (e.to_string(), None),
        })
        .collect()
}

/// The private `config`: `core.repositoryformatversion` (0 or 1) and each `extensions.*`
/// whose name and value are plain words (git itself refuses an extension it does not know).
/// Errors (the message): a format version above 1, the reftable ref storage (its tables are
/// not reproduced), an extension name or value that is not a plain word. Pure.
fn repository_format(entries: &[(String, Option<String>)]) -> Result<String, String> {
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    let mut version = "0".to_string();
    let mut extensions = Vec::new();
    for (key, value) in entries {
        let lower = key.to_ascii_lowercase();
        if lower == "core.repositoryformatversion" {
            let v = value.as_deref().unwrap_or("").trim();
            if !matches!(v, "0" | "1") {
                return Err(format!(
                    "repository format version `{v}` is not supported (0 or 1)"
                ));
            }
            version = v.to_string();
        } else if let Some(name) = lower.strip_prefix("extensions.") {
            let value = value.as_deref().unwrap_or("true");
            if !plain(name) || !plain(value) {
                return Err(format!("extension `{key}` = `{value}` is not supported"));
            }
            if name == "refstorage" && !value.eq_ignore_ascii_case("files") {
                return Err(format!(
                    "the `{value}` ref storage is not supported by devcell's host inspection (only `files`)"
                ));
            }
            extensions.push(format!("\t{name} = {value}\n"));
        }
    }
    let mut out = format!("[core]\n\trepositoryformatversion = {version}\n\tbare = false\n");
    if !extensions.is_empty() {
        out.push_str("[extensions]\n");
        out.extend(extensions);
    }
    Ok(out)
}

/// The repository's configuration keys a [`PrivateGitDir`] passes on (as
/// `GIT_CONFIG_KEY_n`): data that changes what `git status` reports and names nothing git
/// runs or reads elsewhere: `core.` file modes, symbolic links, case and Unicode handling,
/// line endings, stat checks, sparse checkout, split index and untracked cache; `index.sparse`;
/// a branch's `remote`/`merge` and a remote's `url`/`fetch` (the upstream and ahead/behind).
/// Pure.
pub fn carried(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let Some((section, rest)) = lower.split_once('.') else {
        return false;
    };
    let (sub, last) = match rest.rsplit_once('.') {
        Some((sub, last)) => (Some(sub), last),
        None => (None, rest),
    };
    match (section, sub, last) {
        ("core", None, name) => [
            "filemode",
            "symlinks",
            "ignorecase",
            "precomposeunicode",
            "protecthfs",
            "protectntfs",
            "autocrlf",
            "eol",
            "safecrlf",
            "checkstat",
            "trustctime",
            "sparsecheckout",
            "sparsecheckoutcone",
            "splitindex",
            "untrackedcache",
            "quotepath",
        ]
        .contains(&name),
        ("index", None, name) => name == "sparse",
        ("branch", Some(_), name) => name == "remote" || name == "merge",
        ("remote", Some(_), name) => name == "url" || name == "fetch",
        _ => false,
    }
}

/// A remote URL without the user information of its authority (`https://user:token@host/x` →
/// `https://host/x`), so a credential written into the URL never reaches a copy of the
/// configuration the container reads. scp-like `user@host:path` spellings carry no secret (the
/// ssh user name) and are kept. Pure.
pub fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://{}{path}", &authority[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_remote_url_are_not_carried() {
        for (url, want) in [
            (
                "https://x:ghp_secret@example.test/o/r.git",
                "https://example.test/o/r.git",
            ),
            (
                "https://ghp_secret@example.test/o/r",
                "https://example.test/o/r",
            ),
            (
                "https://a@b:c@example.test:8443/r",
                "https://example.test:8443/r",
            ),
            ("ssh://git@example.test/o/r", "ssh://example.test/o/r"),
            ("https://example.test/o/r", "https://example.test/o/r"),
            ("git@example.test:o/r.git", "git@example.test:o/r.git"),
            ("/srv/git/r.git", "/srv/git/r.git"),
            ("https://example.test/p@th", "https://example.test/p@th"),
        ] {
            assert_eq!(without_credentials(url), want, "{url}");
        }
    }

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

    /// A repository planted the way a build context ships one (ordinary files): a planted
    /// `core.fsmonitor`, and a partial clone whose `HEAD` is missing with an `ssh` promisor
    /// whose `core.sshCommand` touches a marker. A program hardened by [`harden_tool`] runs
    /// the git commands Compose's provenance runs (`show HEAD`) and `status`: neither marker
    /// appears; the same commands unhardened (the control) run both.
    #[test]
    fn a_hardened_tool_s_git_runs_nothing_the_repository_configures() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("ctx");
        std::fs::create_dir(&repo).unwrap();
        std::fs::write(repo.join("Dockerfile"), "FROM scratch\n").unwrap();
        test_git(&repo, &["init", "-q"]);
        test_git(&repo, &["add", "."]);
        test_git(&repo, &["commit", "-qm", "x"]);
        let fsmonitor = dir.path().join("fsmonitor-ran");
        let ssh = dir.path().join("ssh-ran");
        for (k, v) in [
            (
                "core.fsmonitor",
                format!("touch {}; false", fsmonitor.display()),
            ),
            ("core.repositoryformatversion", "1".into()),
            ("extensions.partialClone", "origin".into()),
            ("remote.origin.url", "ssh://127.0.0.1/x".into()),
            ("remote.origin.promisor", "true".into()),
            ("core.sshCommand", format!("touch {}; false", ssh.display())),
        ] {
            test_git(&repo, &["config", k, &v]);
        }
        std::fs::write(repo.join("Dockerfile"), "FROM busybox\n").unwrap();
        let head = test_git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]);
        let head_ref = repo.join(".git/refs/heads").join(head.trim());
        let commit = std::fs::read(&head_ref).unwrap();
        let run = |hardened: bool, args: &[&str]| {
            let mut git = Command::new("git");
            git.args(args)
                .current_dir(&repo)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if hardened {
                harden_tool(&mut git);
            }
            let _ = git.status().unwrap();
        };
        for hardened in [true, false] {
            run(hardened, &["status", "--porcelain"]);
            std::fs::write(&head_ref, format!("{}\n", "1".repeat(40))).unwrap();
            run(hardened, &["show", "--format=%H", "HEAD", "--quiet", "--"]);
            std::fs::write(&head_ref, &commit).unwrap();
            if hardened {
                assert!(!fsmonitor.exists(), "a hardened git ran core.fsmonitor");
                assert!(
                    !ssh.exists(),
                    "a hardened git fetched lazily through core.sshCommand"
                );
            }
        }
        assert!(
            fsmonitor.exists(),
            "the control did not run the planted fsmonitor"
        );
        assert!(ssh.exists(), "the control did not fetch lazily");
    }

    /// What `tool_env` sets: provenance off, no system or global configuration, no lazy fetch,
    /// and the fixed overrides but `protocol.allow` (a granted fetch still works) with `ssh`
    /// as the ssh command.
    #[test]
    fn the_tool_environment_turns_off_provenance_and_git_s_configured_commands() {
        let env: std::collections::HashMap<String, String> = tool_env().into_iter().collect();
        for (k, v) in [
            ("BUILDX_GIT_INFO", "0"),
            ("BUILDX_GIT_LABELS", "0"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_NO_LAZY_FETCH", "1"),
            ("GIT_PROTOCOL_FROM_USER", "0"),
        ] {
            assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
        }
        let count: usize = env["GIT_CONFIG_COUNT"].parse().unwrap();
        let pairs: Vec<(&str, &str)> = (0..count)
            .map(|i| {
                (
                    env[&format!("GIT_CONFIG_KEY_{i}")].as_str(),
                    env[&format!("GIT_CONFIG_VALUE_{i}")].as_str(),
                )
            })
            .collect();
        assert!(pairs.contains(&("core.fsmonitor", "false")));
        assert!(pairs.contains(&("core.hooksPath", "/dev/null")));
        assert!(pairs.contains(&("core.sshCommand", "ssh")));
        assert!(pairs.contains(&("protocol.ext.allow", "never")));
        assert!(!pairs.iter().any(|(k, _)| *k == "protocol.allow"));
    }

    const STATUS: &[&str] = &[
        "status",
        "--porcelain=v2",
        "--branch",
        "--untracked-files=normal",
        "--ignore-submodules=dirty",
    ];

    fn private_status(git_dir: &Path, common: &Path, work: &Path) -> String {
        let private = PrivateGitDir::new(git_dir, common, work).unwrap();
        let out = private.command(&[]).args(STATUS).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// A repository with an upstream two commits behind, a modified and an untracked file,
    /// and a linked worktree on another branch: status on the private git directory reports
    /// exactly what git reports on the repository itself, and writes nothing to it.
    #[test]
    fn status_on_the_private_git_dir_equals_git_status() {
        let tmp = tempfile::tempdir().unwrap();
        let up = tmp.path().join("up");
        std::fs::create_dir(&up).unwrap();
        test_git(&up, &["init", "-q", "-b", "main"]);
        std::fs::write(up.join("a.txt"), "a\n").unwrap();
        test_git(&up, &["add", "."]);
        test_git(&up, &["commit", "-qm", "one"]);
        test_git(tmp.path(), &["clone", "-q", "up", "r"]);
        let repo = tmp.path().join("r");
        for n in ["two", "three"] {
            std::fs::write(up.join("a.txt"), n).unwrap();
            test_git(&up, &["commit", "-qam", n]);
        }
        test_git(&repo, &["fetch", "-q"]);
        test_git(&repo, &["config", "core.fileMode", "false"]);
        std::fs::write(repo.join("a.txt"), "changed\n").unwrap();
        std::fs::write(repo.join("new.txt"), "n\n").unwrap();
        test_git(&repo, &["worktree", "add", "-q", "-b", "side", "../wt"]);
        let wt = tmp.path().join("wt");
        std::fs::write(wt.join("b.txt"), "b\n").unwrap();

        let git_dir = repo.join(".git");
        let index_before = std::fs::read(git_dir.join("index")).unwrap();
        let got = private_status(&git_dir, &git_dir, &repo);
        assert!(got.contains("# branch.upstream origin/main"), "{got}");
        assert!(got.contains("# branch.ab +0 -2"), "{got}");
        assert_eq!(got, test_git(&repo, STATUS));
        assert_eq!(std::fs::read(git_dir.join("index")).unwrap(), index_before);

        let wt_git_dir = git_dir.join("worktrees").join("wt");
        let got = private_status(&wt_git_dir, &git_dir, &wt);
        assert!(got.contains("# branch.head side"), "{got}");
        assert!(got.contains("? b.txt"), "{got}");
        assert_eq!(got, test_git(&wt, STATUS));
    }

    /// The private configuration is devcell's one read: an `[include]` (here of a file that
    /// defines the filter `.gitattributes` names) is not followed, the drivers and
    /// `core.worktree` of the repository's own `config` are not passed, and the private
    /// directory is gone once dropped. The control (git on the repository) runs the filter.
    #[test]
    fn the_private_git_dir_reads_no_include_and_no_driver() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        let marker = tmp.path().join("marker");
        std::fs::create_dir(&repo).unwrap();
        test_git(&repo, &["init", "-q"]);
        std::fs::write(repo.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        test_git(&repo, &["add", "."]);
        test_git(&repo, &["commit", "-qm", "x"]);
        let git_dir = repo.join(".git");
        let script = format!("touch {}; cat", marker.display());
        std::fs::write(
            git_dir.join("evil.inc"),
            format!("[filter \"evil\"]\n\tclean = {script}\n"),
        )
        .unwrap();
        test_git(&repo, &["config", "include.path", "evil.inc"]);
        test_git(&repo, &["config", "diff.evil.textconv", &script]);
        test_git(&repo, &["config", "core.worktree", "/"]);
        test_git(
            &repo,
            &[
                "remote",
                "add",
                "origin",
                "https://u:tok3n@example.test/r.git",
            ],
        );
        std::fs::write(repo.join("a.txt"), "b\n").unwrap();

        let private = PrivateGitDir::new(&git_dir, &git_dir, &repo).unwrap();
        // carried into the container git directory: the URL without its credential
        assert!(
            private
                .carried_config()
                .iter()
                .any(|(k, v)| k == "remote.origin.url" && v == "https://example.test/r.git")
        );
        assert!(
            !private
                .carried_config()
                .iter()
                .any(|(_, v)| v.contains("tok3n"))
        );
        let dir = private.git_dir();
        let config = std::fs::read_to_string(dir.join("config")).unwrap();
        assert!(
            !config.contains("evil") && !config.contains("worktree"),
            "{config}"
        );
        assert!(private.config.iter().all(|(k, _)| carried(k)));
        let out = private.command(&[]).args(STATUS).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(" a.txt"));
        let diff = private
            .command(&[])
            .args(["diff", "--no-ext-diff"])
            .output()
            .unwrap();
        assert!(diff.status.success(), "{diff:?}");
        assert!(!marker.exists(), "the repository's configuration ran");
        drop(private);
        assert!(!dir.exists());

        let work = repo.to_str().unwrap();
        test_git(&repo, &["--work-tree", work, "status", "--porcelain"]);
        assert!(
            marker.exists(),
            "the control did not run the included filter"
        );
    }

    /// A `config` or `HEAD` that is a FIFO or a link is refused (never waited on), and so is
    /// the reftable ref storage, each with an error naming the file.
    #[test]
    fn what_the_private_git_dir_cannot_reproduce_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("r");
        std::fs::create_dir(&repo).unwrap();
        test_git(&repo, &["init", "-q"]);
        let git_dir = repo.join(".git");
        let config = git_dir.join("config");
        let saved = std::fs::read(&config).unwrap();

        std::fs::rename(&config, git_dir.join("real")).unwrap();
        std::os::unix::fs::symlink("real", &config).unwrap();
        let err = PrivateGitDir::new(&git_dir, &git_dir, &repo).err().unwrap();
        assert!(err.to_string().contains("config"), "{err}");
        std::fs::remove_file(&config).unwrap();

        assert!(
            Command::new("mkfifo")
                .arg(&config)
                .status()
                .unwrap()
                .success()
        );
        let err = PrivateGitDir::new(&git_dir, &git_dir, &repo).err().unwrap();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        std::fs::remove_file(&config).unwrap();

        let mut reftable = saved.clone();
        reftable.extend(b"[extensions]\n\trefStorage = reftable\n");
        std::fs::write(&config, &reftable).unwrap();
        let err = PrivateGitDir::new(&git_dir, &git_dir, &repo).err().unwrap();
        assert!(err.to_string().contains("reftable"), "{err}");
        std::fs::write(&config, &saved).unwrap();

        std::fs::write(git_dir.join("HEAD"), "ref: ../../etc\n").unwrap();
        let err = PrivateGitDir::new(&git_dir, &git_dir, &repo).err().unwrap();
        assert!(err.to_string().contains("HEAD"), "{err}");
    }

    #[test]
    fn only_status_data_keys_are_carried() {
        for key in [
            "core.fileMode",
            "core.autocrlf",
            "core.sparseCheckout",
            "index.sparse",
            "branch.Main.remote",
            "branch.a.b.merge",
            "remote.origin.url",
            "remote.origin.fetch",
        ] {
            assert!(carried(key), "{key}");
        }
        for key in [
            "core.fsmonitor",
            "core.worktree",
            "core.bare",
            "core.excludesFile",
            "core.attributesFile",
            "core.hooksPath",
            "include.path",
            "includeIf.gitdir:/.path",
            "filter.evil.clean",
            "remote.origin.uploadpack",
            "branch.remote",
            "extensions.objectformat",
        ] {
            assert!(!carried(key), "{key}");
        }
    }

    #[test]
    fn the_private_config_holds_the_format_and_plain_extensions_only() {
        let e = |k: &str, v: Option<&str>| (k.to_string(), v.map(str::to_string));
        let got = repository_format(&[
            e("core.repositoryformatversion", Some("1")),
            e("extensions.objectformat", Some("sha256")),
            e("extensions.worktreeconfig", None),
            e("core.fsmonitor", Some("x")),
        ])
        .unwrap();
        assert_eq!(
            got,
            "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = sha256\n\tworktreeconfig = true\n"
        );
        assert!(repository_format(&[e("core.repositoryformatversion", Some("2"))]).is_err());
        assert!(repository_format(&[e("extensions.x", Some("a\"b"))]).is_err());
        assert!(repository_format(&[e("extensions.refstorage", Some("reftable"))]).is_err());
        assert_eq!(
            parse_list("core.bare\nfalse\0extensions.worktreeconfig\0a.b\nx\ny\0"),
            [
                e("core.bare", Some("false")),
                e("extensions.worktreeconfig", None),
                e("a.b", Some("x\ny"))
            ]
        );
        assert!(valid_head("ref: refs/heads/main\n"));
        assert!(valid_head(&"a".repeat(40)));
        assert!(!valid_head("ref: HEAD\n"));
        assert!(!valid_head("ref: refs/heads/a\nref: refs/heads/b\n"));
    }

    /// A repository configuration that `[include]`s a FIFO nobody writes: `rev-parse` waits in
    /// `open` for ever; [`output_within`] kills it at the deadline and says why.
    #[test]
    fn a_git_waiting_on_a_fifo_is_stopped_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        assert!(
            command(repo, &[])
                .args(["init", "-q"])
                .status()
                .unwrap()
                .success()
        );
        let fifo = repo.join(".git/pipe");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let mut config = std::fs::OpenOptions::new()
            .append(true)
            .open(repo.join(".git/config"))
            .unwrap();
        std::io::Write::write_all(&mut config, b"[include]\n\tpath = pipe\n").unwrap();
        let mut git = command(repo, &[]);
        git.args(["rev-parse", "--show-cdup"]);
        let err = output_within(&mut git, std::time::Duration::from_millis(500)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
        assert!(err.to_string().contains("FIFO"), "{err}");

        // a git that ends in time gives its output as `Command::output` would
        std::fs::remove_file(&fifo).unwrap();
        std::fs::write(&fifo, "").unwrap();
        let mut git = command(repo, &[]);
        git.args(["rev-parse", "--absolute-git-dir"]);
        let out = output_within(&mut git, QUICK_DEADLINE).unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .ends_with(".git")
        );
    }
}
