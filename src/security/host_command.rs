//! What a grant of a host command covers: the command and the content of every workspace file
//! it names ([`cover_command`], [`cover_provider`]; spec-note 0410, attacks J7).
//!
//! The workspace is the repository's to change and, in a handoff, the agent's to write. A
//! `host-command:sha256:` grant that bound the command's text only (`sh .devcontainer/init.sh`)
//! ran whatever the agent later wrote into the script, on the host, nothing asked. So every
//! word of the command that names an existing regular file inside the workspace (relative to
//! the folder the command runs in, or absolute) is read here and its digest joins the grant's
//! ([`HostCommand::digest`]): a changed script is asked again. A word that names something a
//! grant cannot pin (a folder, a file that cannot be read, a link leaving the workspace) makes
//! the command one that is granted for one run only.
//!
//! Files are read through [`read_no_follow`] at their resolved path, so a link swapped in
//! after the resolution is not followed. What this cannot see: files the command's programs
//! read on their own (`make` reads `Makefile`), or files a covered script reads in turn;
//! docs/security.md says so and the request names what it covers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::security::host_path::{read_no_follow, resolve};
use crate::security::permissions::{CoveredFile, HostCommand};
use crate::security::policy::{is_within, normalize_path};

pub mod copies;
mod shape;
pub use shape::{MAX_DEPTH, PRINTS_ONLY, READS_PROJECT, RUNS_OTHERS, is_literal};

/// The largest workspace file a grant covers; a larger one named by a command makes it a
/// one-run grant.
pub const MAX_COVERED_BYTES: u64 = 16 * 1024 * 1024;

/// How many words of one command are looked at; past it the command is a one-run grant.
pub const MAX_WORDS: usize = 256;

/// Characters that end a path in a shell command line (operators, quotes, substitutions,
/// `--flag=path`, lists).
const SEPARATORS: &[char] = &[
    ';', '&', '|', '<', '>', '(', ')', '`', '$', '\'', '"', '=', ',', '{', '}',
];

/// The host command `command` (as its request shows it) that runs `argv` in the folder `cwd`,
/// with every workspace file its words name ([`HostCommand::files`]) and what it names that no
/// grant can cover ([`HostCommand::uncovered`]). `workspace` is the workspace folder. Each
/// argv element is a word, and so is each shell word and path-like piece of it (the string
/// form's `/bin/sh -c <string>`).
pub fn cover_command(
    command: String,
    argv: &[String],
    cwd: &Path,
    workspace: &Path,
) -> HostCommand {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = std::env::var_os("PATH");
    cover_command_with(
        command,
        argv,
        cwd,
        workspace,
        home.as_deref(),
        path.as_deref(),
    )
}

/// [`cover_command`] with the host's home folder given (`$HOME`, `~`; `None`: unknown, so a
/// word using it is not pinned) and its `PATH` (`None`: unknown, so no program is found by
/// name).
fn cover_command_with(
    command: String,
    argv: &[String],
    cwd: &Path,
    workspace: &Path,
    home: Option<&Path>,
    path: Option<&std::ffi::OsStr>,
) -> HostCommand {
    let site = Site {
        cwd,
        workspace,
        home,
        path,
    };
    let mut covered = judge_texts(command.clone(), argv, site);
    // What runs is a copy of each pinned file (attack O5): a file the command names in a way
    // the rewrite to its copy cannot reach makes it a one-run grant.
    let (_, roots) = roots_of(workspace);
    let unreachable = copies::unreachable_words(argv, &covered.files, &roots, |rewritten| {
        judge_texts(command, rewritten, site).files
    });
    for reason in unreachable {
        if !covered.uncovered.contains(&reason) {
            covered.uncovered.push(reason);
        }
    }
    covered
}

/// Where [`cover_command_with`] judges a command: the folder it runs in, the workspace, the
/// host's home and `PATH` (`None`: unknown).
#[derive(Clone, Copy)]
struct Site<'a> {
    cwd: &'a Path,
    workspace: &'a Path,
    home: Option<&'a Path>,
    path: Option<&'a std::ffi::OsStr>,
}

/// The judgement of [`cover_command_with`] before the rewrite to copies is checked.
fn judge_texts(command: String, argv: &[String], site: Site<'_>) -> HostCommand {
    let Site {
        cwd,
        workspace,
        home,
        path,
    } = site;
    let texts: Vec<String> = argv.iter().map(|a| expand_known(a, cwd, home)).collect();
    let words = words_of(texts.iter().map(String::as_str));
    let mut covered = cover(command, &words, &[cwd.to_path_buf()], workspace);
    let (root, roots) = roots_of(workspace);
    let place = shape::Place {
        cwd,
        root: &root,
        roots: &roots,
        path,
    };
    join(&mut covered, shape::judge_argv(&texts, &place));
    let expanded = expanded_when_run(texts.iter().map(String::as_str));
    if !expanded.is_empty() {
        let shown: Vec<String> = expanded
            .iter()
            .take(MAX_EXPANDED_SHOWN)
            .map(|w| format!("`{w}`"))
            .collect();
        covered.uncovered.push(format!(
            "{} {} expanded when the command runs (a variable, a substitution, a glob or `~`): \
             the files {} are not pinned",
            shown.join(", "),
            if expanded.len() == 1 { "is" } else { "are" },
            if expanded.len() == 1 {
                "it names"
            } else {
                "they name"
            },
        ));
    }
    covered
}

/// How many words [`expanded_when_run`] found are named in a request.
const MAX_EXPANDED_SHOWN: usize = 3;

/// `text` with the expansions whose value devcell knows when it judges put in: `$PWD` and
/// `${PWD}` (the folder the command runs in), `$HOME`, `${HOME}` and a word's leading `~`
/// (the host's home, when known). A real configuration's `"${PWD}/tools/init"` then names
/// its file, and the grant pins it (K1).
fn expand_known(text: &str, cwd: &Path, home: Option<&Path>) -> String {
    let mut known: Vec<(&str, String)> = vec![("PWD", self::text(cwd))];
    if let Some(home) = home {
        known.push(("HOME", self::text(home)));
    }
    let mut out = text.to_string();
    for (name, value) in &known {
        out = out.replace(&format!("${{{name}}}"), value);
        out = replace_variable(&out, name, value);
    }
    if let Some(home) = home {
        let home = self::text(home);
        let mut words: Vec<String> = Vec::new();
        for word in out.split(' ') {
            words.push(match word.strip_prefix('~') {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{home}{rest}"),
                _ => word.to_string(),
            });
        }
        out = words.join(" ");
    }
    out
}

/// `text` with each `$name` not followed by a character of a longer name replaced by `value`.
fn replace_variable(text: &str, name: &str, value: &str) -> String {
    let needle = format!("${name}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&needle) {
        let after = &rest[at + needle.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            out.push_str(&needle);
        } else {
            out.push_str(value);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The shell words of `texts` that a shell would still expand when the command runs (a
/// variable or substitution left after [`expand_known`], a glob, a leading `~`): what they
/// name is decided then, not when the grant is judged, so no grant can pin it (K1: a glob
/// over `.devcontainer/init.d/*.sh` ran a script the agent added), bash's brace expansion
/// (`ini{t,}.sh`, L1), and a token still quoted after [`MAX_NESTING`] readings. Quotes are
/// not considered: a quoted `$` is counted too, which only asks once more.
fn expanded_when_run<'a>(texts: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for text in texts {
        for token in nested_tokens(text) {
            // `[` alone is the test builtin, not a glob
            let glob_bracket = token.contains('[') && !matches!(token.text.as_str(), "[" | "]");
            let expands = token.contains(['$', '`', '*', '?'])
                || glob_bracket
                || token.starts_with('~')
                || token.contains("=~")
                || brace_expansion(&token);
            let unread = token.level >= MAX_NESTING && token.contains(QUOTING);
            if (expands || unread) && token.len() <= 4096 {
                found.insert(token.text);
            }
        }
    }
    found
}

/// Whether bash would expand braces in `token` (`a{b,c}`, `{1..3}`): a `{` followed by a `}`
/// with a `,` or `..` between them. Read wide: a quoted brace counts too.
fn brace_expansion(token: &str) -> bool {
    let Some(open) = token.find('{') else {
        return false;
    };
    let Some(close) = token[open..].rfind('}') else {
        return false;
    };
    let inner = &token[open..open + close];
    inner.contains(',') || inner.contains("..")
}

/// How many times a token is read again as a shell string (the string of a nested `sh -c
/// "…"` or `eval`, whose quotes and backslashes an inner shell removes once more): past it, a
/// token still quoted is counted as expanded when run (attack L1).
const MAX_NESTING: usize = 4;

/// What an inner shell would read again: whitespace, quotes and backslashes.
const QUOTING: &[char] = &[' ', '\t', '\n', '\'', '"', '\\'];

/// One shell token of a command and how many shells deep it was found.
struct Token {
    /// The token after its shell's quote removal.
    text: String,
    /// 0 for the command's own words, 1 for the words of a token read again, and so on.
    level: usize,
}

impl std::ops::Deref for Token {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

/// Every shell token of `text` (its whitespace-separated parts when it is not valid shell),
/// and, for each token still holding whitespace, quotes or backslashes, that token's tokens in
/// turn, up to [`MAX_NESTING`] levels. Which token a program hands to another shell (`sh -c`,
/// `bash -c`, `eval`, `su -c`, `xargs sh -c`, …) is not known here, so every such token is read
/// again: `sh -c "sh .devcontainer/in''it.sh"` then names `.devcontainer/init.sh` (attack
/// L1, where the script hid behind one more level of quote removal).
fn nested_tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut pending = vec![(text.to_string(), 0usize)];
    while let Some((text, level)) = pending.pop() {
        let tokens = shlex::split(&text)
            .unwrap_or_else(|| text.split_whitespace().map(str::to_string).collect());
        for token in tokens {
            if token.contains(QUOTING) && level < MAX_NESTING && out.len() < MAX_TOKENS {
                pending.push((token.clone(), level + 1));
            }
            if out.len() < MAX_TOKENS {
                out.push(Token { text: token, level });
            }
        }
    }
    out
}

/// The most tokens [`nested_tokens`] reads from one text (a bound on work, not on safety:
/// past it the words left unread are still counted by [`cover`]'s own bound).
const MAX_TOKENS: usize = 4096;

/// The host command of a Compose `provider` (`command` as its request shows it): the program
/// its `type` names when that is a path (Compose runs a `type` with a `/` as a path, relative
/// to the folder Compose runs in, which is devcell's, and the workspace is also tried), and
/// each string of its `options` (Compose passes them to the program as arguments).
pub fn cover_provider(command: String, provider: &Value, workspace: &Path) -> HostCommand {
    let program = provider.get("type").and_then(Value::as_str).unwrap_or("");
    let mut texts: Vec<&str> = Vec::new();
    if program.contains('/') {
        texts.push(program);
    }
    if let Some(options) = provider.get("options") {
        strings(options, &mut texts);
    }
    let words = words_of(texts.into_iter());
    let mut bases = vec![workspace.to_path_buf()];
    if let Ok(here) = std::env::current_dir() {
        bases.push(here);
    }
    let mut covered = cover(command, &words, &bases, workspace);
    let (root, roots) = roots_of(workspace);
    let place = shape::Place {
        cwd: workspace,
        root: &root,
        roots: &roots,
        path: None,
    };
    join(&mut covered, shape::judge_provider(program, &place));
    covered
}

/// The workspace folder canonical, and as given and canonical (as text).
fn roots_of(workspace: &Path) -> (PathBuf, [String; 2]) {
    let root = resolve(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let roots = [text(workspace), text(&root)];
    (root, roots)
}

/// Adds what [`shape`] judged to `covered`: its pinned files, and why the command is a one-run
/// grant (each reason an entry of [`HostCommand::uncovered`]).
fn join(covered: &mut HostCommand, judged: shape::Judged) {
    let mut files: BTreeSet<CoveredFile> = covered.files.drain(..).collect();
    files.extend(judged.files);
    covered.files = files.into_iter().collect();
    for reason in judged.reasons {
        if !covered.uncovered.contains(&reason) {
            covered.uncovered.push(reason);
        }
    }
}

/// Every string in `value`, in order.
fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// The words that may name a path: each text itself, its shell words at every nesting level
/// ([`nested_tokens`]), its whitespace-separated parts, and each of those split at
/// [`SEPARATORS`].
fn words_of<'a>(texts: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    for text in texts {
        let mut add = |w: &str| {
            if !w.is_empty() && !w.contains('\0') && w.len() <= 4096 {
                words.insert(w.to_string());
            }
        };
        add(text);
        let tokens = nested_tokens(text).into_iter().map(|t| t.text);
        let plain = text.split_whitespace().map(str::to_string);
        for token in tokens.chain(plain) {
            add(&token);
            for piece in token.split(SEPARATORS) {
                add(piece);
            }
        }
    }
    words
}

/// Judges each word against every base folder (see [`cover_command`]).
fn cover(
    command: String,
    words: &BTreeSet<String>,
    bases: &[PathBuf],
    workspace: &Path,
) -> HostCommand {
    let root = resolve(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let roots = [text(workspace), text(&root)];
    let mut files: BTreeSet<CoveredFile> = BTreeSet::new();
    let mut uncovered: BTreeSet<String> = BTreeSet::new();
    if words.len() > MAX_WORDS {
        uncovered.insert(format!(
            "more than {MAX_WORDS} words that may be paths (devcell did not look at them all)"
        ));
    }
    for word in words.iter().take(MAX_WORDS) {
        for base in bases {
            let path = base.join(word);
            match judge_word(&path, &root, &roots) {
                Named::Nothing => {}
                Named::File(path, sha256) => {
                    files.insert(CoveredFile { path, sha256 });
                }
                Named::Uncoverable(why) => {
                    uncovered.insert(format!("`{word}` ({why})"));
                }
            }
        }
    }
    HostCommand {
        command,
        files: files.into_iter().collect(),
        uncovered: uncovered.into_iter().collect(),
        text_only_grant: false,
    }
}

/// What one word names.
enum Named {
    /// Nothing in the workspace (or nothing that exists).
    Nothing,
    /// A regular file of the workspace: its workspace-relative path and content digest.
    File(String, String),
    /// Something in the workspace a grant cannot pin, with why.
    Uncoverable(String),
}

/// Judges the path `path` a word names: `root` is the canonical workspace folder, `roots` the
/// workspace folder as given and canonical (a path lexically inside either is the workspace's).
fn judge_word(path: &Path, root: &Path, roots: &[String]) -> Named {
    let lexical = normalize_path(&text(path)).unwrap_or_default();
    let lexically_inside = roots.iter().any(|r| is_within(&lexical, r));
    let resolved = match resolve(path) {
        Ok(resolved) => resolved,
        Err(e) if lexically_inside => {
            return Named::Uncoverable(format!("devcell cannot resolve it: {e}"));
        }
        Err(_) => return Named::Nothing,
    };
    if !is_within(&text(&resolved), &text(root)) {
        return if lexically_inside {
            Named::Uncoverable("a symbolic link leaving the workspace".into())
        } else {
            Named::Nothing
        };
    }
    let relative = match resolved.strip_prefix(root) {
        Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
        Ok(r) => text(r),
        Err(_) => text(&resolved),
    };
    let Ok(meta) = std::fs::symlink_metadata(&resolved) else {
        return Named::Nothing;
    };
    if meta.is_dir() {
        return Named::Uncoverable(format!(
            "`{relative}` is a folder of the workspace: its content is not pinned"
        ));
    }
    if !meta.is_file() {
        return Named::Uncoverable(format!("`{relative}` is not a regular file"));
    }
    match read_no_follow(&resolved, MAX_COVERED_BYTES) {
        Ok(Some(bytes)) => Named::File(relative, hex::encode(Sha256::digest(&bytes))),
        Ok(None) => Named::Nothing,
        Err(e) => Named::Uncoverable(format!("`{relative}` cannot be read: {e}")),
    }
}

/// A path as text (lossy: a path devcell cannot show exactly is still judged by its bytes'
/// best text, and a non-UTF-8 name simply does not match a word).
fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), s.into()]
    }

    /// This machine's `PATH` (the shells and tools the tests name are on it).
    fn path() -> Option<std::ffi::OsString> {
        std::env::var_os("PATH")
    }

    /// The `sh -c` string `line` judged in the workspace `ws` (its own working folder, no
    /// known home) with this machine's `PATH`.
    fn covered(line: &str, ws: &Path) -> HostCommand {
        cover_command_with(line.into(), &argv(line), ws, ws, None, path().as_deref())
    }

    /// The workspace paths `c` pins, in its order.
    fn pinned_paths(c: &HostCommand) -> Vec<&str> {
        c.files.iter().map(|f| f.path.as_str()).collect()
    }

    /// `c`, the cover of `line`, is a one-run grant whose request names a word starting
    /// with `word`.
    #[track_caller]
    fn assert_one_run_naming(c: &HostCommand, line: &str, word: &str) {
        assert!(c.digest().is_none(), "{line}: {c:?}");
        assert!(
            c.uncovered.iter().any(|u| u.starts_with(word)),
            "{line}: {word} not named in {c:?}"
        );
    }

    /// A temporary folder holding the workspace `ws` with `files` (path under `ws`, content).
    fn workspace_of(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        for (file, body) in files {
            std::fs::create_dir_all(ws.join(file).parent().unwrap()).unwrap();
            std::fs::write(ws.join(file), body).unwrap();
        }
        (dir, ws)
    }

    /// Writes `body` to `path`, executable by everyone (mode 0755).
    fn write_executable(path: &Path, body: impl AsRef<[u8]>) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(path, body).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The words of a shell string that name workspace files are covered, with their
    /// content's digest; words naming nothing, or something outside, are not.
    #[test]
    fn a_command_covers_the_workspace_files_its_words_name() {
        let (dir, ws) =
            workspace_of(&[(".devcontainer/init.sh", "echo v1\n"), ("cfg.env", "A=1\n")]);
        std::fs::write(dir.path().join("outside.sh"), "x").unwrap();
        let outside = dir.path().join("outside.sh");
        let line = format!(
            "sh .devcontainer/init.sh --env=cfg.env && sh {} ; echo missing.sh",
            outside.display()
        );
        let c = cover_command(line.clone(), &argv(&line), &ws, &ws);
        let paths = pinned_paths(&c);
        assert_eq!(paths, [".devcontainer/init.sh", "cfg.env"], "{c:?}");
        assert!(c.uncovered.is_empty(), "{c:?}");
        assert_eq!(c.files[0].sha256, hex::encode(Sha256::digest(b"echo v1\n")),);
        // an absolute path inside the workspace is covered the same
        let abs = format!("sh {}", ws.join(".devcontainer/init.sh").display());
        let c = cover_command(abs.clone(), &argv(&abs), &ws, &ws);
        assert_eq!(c.files[0].path, ".devcontainer/init.sh");
    }

    /// A folder of the workspace, or a link leaving it, cannot be pinned: the command is a
    /// one-run grant, and its request says which word.
    #[test]
    fn a_folder_or_a_link_out_is_not_coverable() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("tools")).unwrap();
        std::fs::write(dir.path().join("host.sh"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("host.sh"), ws.join("out.sh")).unwrap();
        for (line, word) in [("cd tools && make", "`tools`"), ("sh out.sh", "`out.sh`")] {
            let c = cover_command(line.into(), &argv(line), &ws, &ws);
            assert!(c.digest().is_none(), "{c:?}");
            assert!(c.uncovered.iter().any(|u| u.starts_with(word)), "{c:?}");
        }
        // a link inside the workspace to a file inside it is covered as that file
        std::fs::write(ws.join("tools/real.sh"), "y").unwrap();
        std::os::unix::fs::symlink("tools/real.sh", ws.join("in.sh")).unwrap();
        let c = cover_command("sh in.sh".into(), &argv("sh in.sh"), &ws, &ws);
        assert_eq!(c.files.len(), 1, "{c:?}");
        assert_eq!(c.files[0].path, "tools/real.sh");
    }

    /// A provider `type` that is a path into the workspace, and a workspace file its options
    /// name, are covered; a program found on `PATH` is not a workspace file.
    #[test]
    fn a_provider_path_into_the_workspace_is_covered() {
        let (_dir, ws) = workspace_of(&[("bin/prov", "#!/bin/sh\n"), ("prov.yaml", "a: 1\n")]);
        let provider =
            serde_json::json!({"type": "./bin/prov", "options": {"config": "prov.yaml"}});
        let c = cover_provider("p".into(), &provider, &ws);
        let paths = pinned_paths(&c);
        assert_eq!(paths, ["bin/prov", "prov.yaml"], "{c:?}");
        let c = cover_provider("p".into(), &serde_json::json!({"type": "awsprov"}), &ws);
        assert!(c.files.is_empty() && c.uncovered.is_empty(), "{c:?}");
        // a shell, an interpreter or a build tool reads a file of the folder Compose runs in:
        // `sh` ran the workspace's `compose` (attack 23, N19), so no grant of it stands
        // `docker` ran Compose again: a standing grant of it pinned nothing (attack 24's
        // review); engine and Compose CLIs are one-run grants too
        for program in ["sh", "make", "npx", "docker", "podman", "docker-compose"] {
            let c = cover_provider("p".into(), &serde_json::json!({"type": program}), &ws);
            assert!(c.files.is_empty() && c.digest().is_none(), "{c:?}");
            assert!(
                c.uncovered
                    .iter()
                    .any(|u| u.starts_with(&format!("`{program}`"))),
                "{c:?}"
            );
        }
    }

    /// Attack 23: a program on no list, a wrapper, `printf -v`, an engine CLI's global option,
    /// a program behind another name and a script the container can write were standing
    /// grants pinning nothing; each ran the agent's code on the host. Each is a one-run grant
    /// now, naming the word.
    #[test]
    fn programs_not_known_to_leave_the_project_alone_are_one_run_grants() {
        use std::os::unix::fs::PermissionsExt as _;
        let (dir, ws) = attack_workspace();
        // npm's real file, called by its own name
        let npm_cli = dir.path().join("npm-cli.js");
        write_executable(&npm_cli, "#!/bin/sh\n");
        let npm_line = format!("{} run -s init", npm_cli.display());
        // a link named like a standard program to a shell
        let links = dir.path().join("links");
        std::fs::create_dir_all(&links).unwrap();
        std::os::unix::fs::symlink("/bin/sh", links.join("mkdir")).unwrap();
        let link_line = format!("{}/mkdir -p x", links.display());
        // a script in a folder other users can write (a volume's `_data`, as the host sees it)
        let volume = dir.path().join("volume");
        std::fs::create_dir_all(&volume).unwrap();
        std::fs::write(volume.join("init.sh"), "true\n").unwrap();
        std::fs::set_permissions(&volume, std::fs::Permissions::from_mode(0o777)).unwrap();
        let volume_line = format!("sh {}/init.sh", volume.display());
        let volume_word = format!("`{}/init.sh`", volume.display());
        for (line, word) in [
            ("bash -c 'printf -v PATH %s%s too ls; ls'", "`printf`"),
            ("docker --log-level error compose run app", "`docker`"),
            ("podman --root /x compose up", "`podman`"),
            ("docker run --rm busybox", "`docker`"),
            ("prove -Q", "`prove`"),
            ("setarch x86_64 make -s", "`setarch`"),
            ("ssh-agent make", "`ssh-agent`"),
            (npm_line.as_str(), "`"),
            (link_line.as_str(), "`"),
            (volume_line.as_str(), volume_word.as_str()),
            (
                "sh /var/lib/docker/volumes/v/_data/init.sh",
                "`/var/lib/docker",
            ),
        ] {
            assert_one_run_naming(&covered(line, &ws), line, word);
        }
        let c = covered(&npm_line, &ws);
        assert!(
            c.uncovered.iter().any(|u| u.contains("npm-cli.js")),
            "{c:?}"
        );
        let c = covered(&link_line, &ws);
        assert!(
            c.uncovered
                .iter()
                .any(|u| u.contains("not the program its name says")),
            "{c:?}"
        );
    }

    /// The script's content is what the grant binds: rewriting it (what an agent did, J7)
    /// changes the digest a grant names; the same content gives the same digest.
    #[test]
    fn a_rewritten_script_changes_the_grant() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".devcontainer")).unwrap();
        let script = ws.join(".devcontainer/init.sh");
        let line = "sh .devcontainer/init.sh";
        let digest = || {
            cover_command(line.into(), &argv(line), &ws, &ws)
                .digest()
                .unwrap()
        };
        std::fs::write(&script, "echo v1\n").unwrap();
        let granted = digest();
        assert_eq!(digest(), granted);
        assert_ne!(
            granted,
            crate::security::permissions::host_command_digest(line)
        );
        std::fs::write(&script, "echo AGENT\n").unwrap();
        assert_ne!(digest(), granted);
        std::fs::write(&script, "echo v1\n").unwrap();
        assert_eq!(digest(), granted);
    }

    /// K1: a glob, a variable or a substitution is expanded when the command runs, so the
    /// files it names are not pinned and a standing grant would run what the agent adds or
    /// rewrites: the command is a one-run grant, and the request names the words. `$PWD`,
    /// `${PWD}`, `$HOME` and `~` are known when devcell judges: their files are pinned.
    #[test]
    fn a_glob_or_a_variable_naming_a_workspace_path_is_a_one_run_grant() {
        let (dir, ws) = workspace_of(&[
            (".devcontainer/init.d/10-setup.sh", "echo v1\n"),
            (".devcontainer/init.sh", "echo v1\n"),
        ]);
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("x.sh"), "echo home\n").unwrap();
        let cover = |line: &str| {
            cover_command_with(
                line.into(),
                &argv(line),
                &ws,
                &ws,
                Some(&home),
                path().as_deref(),
            )
        };
        for (line, word) in [
            (
                "for f in .devcontainer/init.d/*.sh; do sh \"$f\"; done",
                "init.d/*.sh",
            ),
            (
                "sh .devcontainer/init.d/1?-setup.sh",
                "`.devcontainer/init.d/1?-setup.sh`",
            ),
            (
                "sh \"$WS/.devcontainer/init.sh\"",
                "`$WS/.devcontainer/init.sh`",
            ),
            (
                "sh $(pwd)/.devcontainer/init.sh",
                "`$(pwd)/.devcontainer/init.sh`",
            ),
            ("sh `pwd`/.devcontainer/init.sh", "pwd`/"),
        ] {
            let c = cover(line);
            assert!(c.digest().is_none(), "{line}: {c:?}");
            assert!(
                c.uncovered
                    .iter()
                    .any(|u| u.contains(word) && u.contains("not pinned")),
                "{line}: {c:?}"
            );
        }
        // the known expansions name their files, which the grant then pins
        for line in [
            "sh \"$PWD/.devcontainer/init.sh\"",
            "sh ${PWD}/.devcontainer/init.sh",
        ] {
            let c = cover(line);
            assert!(c.uncovered.is_empty(), "{line}: {c:?}");
            let paths = pinned_paths(&c);
            assert_eq!(paths, [".devcontainer/init.sh"], "{line}: {c:?}");
        }
        for line in ["sh ~/x.sh", "sh $HOME/x.sh", "mkdir -p ${HOME}/.tabby"] {
            let c = cover(line);
            assert!(
                c.uncovered.is_empty() && c.digest().is_some(),
                "{line}: {c:?}"
            );
        }
        // `$PWDX` is another variable, not `$PWD`
        assert!(cover("sh $PWDX/init.sh").digest().is_none());
        // without a known home, `~` is not pinned
        let c = cover_command_with(
            "sh ~/x.sh".into(),
            &argv("sh ~/x.sh"),
            &ws,
            &ws,
            None,
            path().as_deref(),
        );
        assert!(c.digest().is_none(), "{c:?}");
    }

    /// L1: a script named inside a nested shell string, behind one more quote removal (`''`,
    /// `""`, a backslash, `eval`), is still named and pinned; bash's brace expansion is
    /// expanded when run, so the command is a one-run grant; either way no standing grant
    /// covers the command text alone.
    #[test]
    fn a_script_named_in_a_nested_shell_string_is_pinned_or_a_one_run_grant() {
        let (_dir, ws) = workspace_of(&[(".devcontainer/init.sh", "echo v1\n")]);
        for line in [
            r#"sh -c "sh .devcontainer/in''it.sh""#,
            r#"sh -c "sh .devcontainer/in\"\"it.sh""#,
            r#"sh -c "sh .devcontainer/init\.sh""#,
            r#"eval sh .devcontainer/in\\it.sh"#,
            r#"sh -c 'sh -c "bash -c \"sh .devcontainer/in'"''"'it.sh\""'"#,
        ] {
            let c = covered(line, &ws);
            let paths = pinned_paths(&c);
            assert!(
                paths == [".devcontainer/init.sh"] || c.digest().is_none(),
                "{line}: {c:?}"
            );
            assert!(
                !c.files.is_empty() || !c.uncovered.is_empty(),
                "{line}: {c:?}"
            );
        }
        for line in [
            r#"bash -c "sh .devcontainer/ini{t,}.sh""#,
            "bash -c 'sh .devcontainer/{init,x}.sh'",
        ] {
            let c = covered(line, &ws);
            assert!(c.digest().is_none(), "{line}: {c:?}");
        }
        // plain nested commands stay standing grants that pin their script; a `cd` in one
        // does not (M2)
        let c = covered(
            "bash -c 'cd /tmp && sh \"$PWD/x\"' ; sh -c 'sh .devcontainer/init.sh'",
            &ws,
        );
        assert!(c.uncovered.iter().any(|u| u.starts_with("`cd`")), "{c:?}");
        let c = covered("sh -c 'sh .devcontainer/init.sh'", &ws);
        assert!(c.digest().is_some(), "{c:?}");
        assert_eq!(c.files.len(), 1, "{c:?}");
        // a token quoted deeper than devcell reads is expanded when run
        let mut deep = "sh .devcontainer/init.sh".to_string();
        for _ in 0..=MAX_NESTING + 1 {
            deep = format!("sh -c {}", shlex::try_quote(&deep).unwrap());
        }
        assert!(covered(&deep, &ws).digest().is_none());
    }

    /// A workspace with `.devcontainer/init.sh`, `.devcontainer/init-tool`, `tools/init.py`,
    /// `x.js` and `sub/x.sh`, and a judge of string commands run in it with this machine's
    /// `PATH`.
    fn attack_workspace() -> (tempfile::TempDir, PathBuf) {
        workspace_of(&[
            (".devcontainer/init.sh", "echo v1\n"),
            (".devcontainer/init-tool", "#!/bin/sh\necho v1\n"),
            (".devcontainer/x.js", "1\n"),
            (".devcontainer/scripts/x.sh", "echo v1\n"),
            ("tools/init.py", "print(1)\n"),
            ("tools/__init__.py", "\n"),
            ("sub/x.sh", "echo v1\n"),
        ])
    }

    /// Attacks M1 and M2: a command that reaches a workspace file some way its words do not
    /// name (a colon list, a `cd` glued to a flag, extglob, an option value glued to its
    /// flag, a module name, `/proc/self/cwd`, `cd ..`, a program that searches on its own)
    /// got a standing grant that pinned nothing, and the agent's rewrite of the file ran on
    /// the host. Each is now a one-run grant whose request names the word that made it so.
    #[test]
    fn a_command_reaching_a_workspace_file_by_another_way_is_a_one_run_grant() {
        let (dir, ws) = attack_workspace();
        let ws_name = ws.file_name().unwrap().to_str().unwrap().to_string();
        let dotdot = format!("cd .. && sh {ws_name}/.devcontainer/init.sh");
        for (line, word) in [
            ("PATH=.devcontainer:/usr/bin:/bin init-tool", "`PATH="),
            ("CDPATH=:.devcontainer cd sub && ./x", "`CDPATH="),
            ("LD_LIBRARY_PATH=lib:/usr/lib true", "`LD_LIBRARY_PATH="),
            ("env -C.devcontainer ./init.sh", "`env`"),
            ("bash -O extglob -c \"sh .devcontainer/@(init).sh\"", "`(`"),
            ("perl -I.devcontainer -Minit -e1", "`perl`"),
            ("node -r./.devcontainer/x.js -e1", "`node`"),
            ("python3 -m tools.init", "`python3`"),
            (
                "sh /proc/self/cwd/.devcontainer/init.sh",
                "`/proc/self/cwd/",
            ),
            (dotdot.as_str(), "`cd`"),
            ("find -name init.sh -exec sh {} +", "`{`"),
            ("find -name init.sh -print", "`find`"),
            ("init-tool", "`init-tool`"),
            ("sh init-tool", "`init-tool`"),
            (
                "cat .devcontainer/missing.conf",
                "`.devcontainer/missing.conf`",
            ),
            ("cp -r .devcontainer /tmp/x", "`.devcontainer`"),
            ("make -C tools", "`make`"),
            ("npm run init", "`npm`"),
            ("git submodule update --init", "`git`"),
            ("docker compose up -d", "`docker`"),
            ("sh -s < /dev/stdin", "`/dev/stdin`"),
            ("echo hi &", "`&`"),
            ("if true; then sh .devcontainer/init.sh; fi", "`if`"),
            ("eval sh .devcontainer/init.sh", "`eval`"),
            ("xargs sh < list", "`xargs`"),
            (
                "sh .devcontainer/init.sh :.devcontainer",
                "`:.devcontainer`",
            ),
            ("ls --hide=lib:.", "`lib:.`"),
        ] {
            assert_one_run_naming(&covered(line, &ws), line, word);
        }
        // a `PATH` searching a relative folder or the workspace first is not trusted
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for entries in [
            format!(".devcontainer:{}", bin.display()),
            format!("{}:{}", ws.join(".devcontainer").display(), bin.display()),
            format!(":{}", bin.display()),
        ] {
            let c = cover_command_with(
                "true".into(),
                &["mytool".to_string()],
                &ws,
                &ws,
                None,
                Some(std::ffi::OsStr::new(&entries)),
            );
            assert!(
                c.uncovered.iter().any(|u| u.contains("`PATH` searches")),
                "{entries}: {c:?}"
            );
        }
    }

    /// What stays a standing grant: a shell or a path running a pinned workspace script (its
    /// digest joins the grant), programs found on `PATH` outside the workspace with literal
    /// words, absolute paths outside the workspace, what prints only.
    #[test]
    fn plain_commands_stay_standing_grants_that_pin_their_script() {
        let (dir, ws) = attack_workspace();
        let outside = dir.path().join("host.sh");
        std::fs::write(&outside, "x").unwrap();
        let abs_outside = format!("sh {} --fast", outside.display());
        let abs_inside = format!("sh {}", ws.join(".devcontainer/init.sh").display());
        for (line, pinned) in [
            ("sh .devcontainer/init.sh", Some(".devcontainer/init.sh")),
            (
                "bash .devcontainer/scripts/x.sh arg",
                Some(".devcontainer/scripts/x.sh"),
            ),
            ("./.devcontainer/init.sh", Some(".devcontainer/init.sh")),
            (
                "bash -e .devcontainer/init.sh 1.2.3 --name=x",
                Some(".devcontainer/init.sh"),
            ),
            (".devcontainer/init-tool", Some(".devcontainer/init-tool")),
            (abs_inside.as_str(), Some(".devcontainer/init.sh")),
            (
                "sh -c 'sh .devcontainer/init.sh' && echo done",
                Some(".devcontainer/init.sh"),
            ),
            (
                "mkdir -p /tmp/x && sh .devcontainer/init.sh > /dev/null 2>&1",
                Some(".devcontainer/init.sh"),
            ),
            ("echo hi", None),
            ("echo 'Setting up the workspace...'", None),
            ("mkdir -p /tmp/x", None),
            ("true", None),
            ("[ -f .env ] || echo missing", None),
            (abs_outside.as_str(), None),
            ("docker pull busybox", None),
        ] {
            let c = covered(line, &ws);
            assert!(c.uncovered.is_empty(), "{line}: {c:?}");
            assert!(c.digest().is_some(), "{line}: {c:?}");
            let paths = pinned_paths(&c);
            match pinned {
                Some(file) => assert_eq!(paths, [file], "{line}: {c:?}"),
                None => assert!(paths.is_empty(), "{line}: {c:?}"),
            }
        }
        // the array form: argv run directly
        let argv = ["bash".to_string(), ".devcontainer/init.sh".to_string()];
        let c = cover_command_with("x".into(), &argv, &ws, &ws, None, path().as_deref());
        assert!(c.uncovered.is_empty() && c.files.len() == 1, "{c:?}");
        let argv = [
            "touch".to_string(),
            dir.path().join("m").display().to_string(),
        ];
        let c = cover_command_with("x".into(), &argv, &ws, &ws, None, path().as_deref());
        assert!(c.uncovered.is_empty() && c.files.is_empty(), "{c:?}");
    }

    /// Attack 24, O7: a standing grant of `sh scripts/init.sh` pinned the script, whose text
    /// then sourced `./scripts/helper.sh`: the agent's rewrite of the helper ran as root on
    /// every later `up`. A pinned shell script's text is judged as `sh -c` text: what it
    /// reaches by name is pinned too, anything else (`.`, `make`, `PATH=…`, a script in a
    /// language devcell does not read, a binary) makes the command a one-run grant.
    #[test]
    fn what_a_pinned_script_runs_is_pinned_or_a_one_run_grant() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("scripts")).unwrap();
        let write = |file: &str, body: &[u8]| write_executable(&ws.join(file), body);
        write("scripts/helper.sh", b"echo helper-ok\n");
        for (body, word) in [
            ("#!/bin/sh\nmkdir -p /tmp/x\n. ./scripts/helper.sh\n", "`.`"),
            ("source scripts/helper.sh\n", "`source`"),
            ("make\n", "`make`"),
            ("PATH=scripts:/usr/bin:/bin helper.sh\n", "`PATH="),
            ("./tools/missing\n", "`./tools/missing`"),
            ("sh scripts/helper.sh \"$@\"\n", "`$`"),
            ("set -k\n", "`set`"),
            ("sh scripts/init.sh\n", "nested deeper"),
        ] {
            write("scripts/init.sh", body.as_bytes());
            let c = covered("sh scripts/init.sh", &ws);
            assert!(c.digest().is_none(), "{body}: {c:?}");
            assert!(
                c.uncovered.iter().any(|u| u.contains(word)),
                "{body}: {word} not named in {c:?}"
            );
        }
        // a script reaching a workspace file by name (to run it, read it or feed it in) opens
        // the workspace's file, not devcell's copy, which a running container can swap between
        // the judgement and the run (attack 25, P1): the file is named and pinned, and the
        // command is a one-run grant
        for body in [
            "#!/bin/sh\nset -eu\n# the helper\nsh scripts/helper.sh\n",
            "cat scripts/helper.sh\n",
            "sh -c 'sh scripts/helper.sh'\n",
            "grep x < scripts/helper.sh\n",
        ] {
            write("scripts/init.sh", body.as_bytes());
            let c = covered("sh scripts/init.sh", &ws);
            let paths = pinned_paths(&c);
            assert_eq!(
                paths,
                ["scripts/helper.sh", "scripts/init.sh"],
                "{body}: {c:?}"
            );
            assert!(c.digest().is_none(), "{body}: {c:?}");
            assert!(
                c.uncovered
                    .iter()
                    .any(|u| u.contains("runs or reads `scripts/helper.sh` from the workspace")),
                "{body}: {c:?}"
            );
        }
        // interpreters devcell does not read, and program files it does not read
        write("scripts/x.pl", b"use lib 'lib'; require 'helper.pl';\n");
        write(
            "scripts/perl-tool",
            b"#!/usr/bin/perl\nrequire 'helper.pl';\n",
        );
        write("scripts/binary", b"\x7fELF\x02\x01\x01\0\0\0");
        write("scripts/env-perl", b"#!/usr/bin/env perl\n1;\n");
        for line in [
            "perl scripts/x.pl",
            "./scripts/perl-tool",
            "./scripts/binary",
            "./scripts/env-perl",
        ] {
            let c = covered(line, &ws);
            assert!(c.digest().is_none(), "{line}: {c:?}");
        }
    }

    /// What a pinned script of plain commands (comments, `set -eu`, builtins that print,
    /// programs that leave the project alone) stays: a standing grant pinning the script.
    #[test]
    fn a_pinned_script_of_plain_commands_stays_a_standing_grant() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("scripts")).unwrap();
        let body = "#!/bin/sh\n# prepare\nset -eu\nset -o pipefail\necho 'setting up'\n\
                    mkdir -p /tmp/x && touch /tmp/x/y\nprintf done\n";
        for (file, first) in [
            ("scripts/init.sh", ""),
            ("scripts/tool", "#!/usr/bin/env bash\n"),
            ("scripts/plain", ""),
        ] {
            write_executable(&ws.join(file), format!("{first}{body}"));
        }
        for (line, pinned) in [
            ("sh scripts/init.sh", "scripts/init.sh"),
            ("bash -e scripts/init.sh", "scripts/init.sh"),
            ("./scripts/init.sh", "scripts/init.sh"),
            ("./scripts/tool --fast", "scripts/tool"),
            ("./scripts/plain", "scripts/plain"),
        ] {
            let c = covered(line, &ws);
            assert!(c.uncovered.is_empty(), "{line}: {c:?}");
            let paths = pinned_paths(&c);
            assert_eq!(paths, [pinned], "{line}: {c:?}");
            assert!(c.digest().is_some(), "{line}: {c:?}");
        }
    }

    /// Attack 25, P4: the judge pins a script by its text on disk, but an earlier step of the
    /// same command may write that file (`printf '. ./helper.sh' > env.sh; sh env.sh`, `cp`,
    /// `cat >`, `tee`, `mv`, `ln -sf`), so what runs is not the text judged; and a shell's
    /// keyword argument (`bash -k x.sh BASH_ENV=e.sh`) names a file it sources. Each is a
    /// one-run grant, at the hook's own level, inside a `sh -c` string or inside a script.
    #[test]
    fn a_file_the_command_writes_and_runs_is_a_one_run_grant() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("scripts")).unwrap();
        for (file, body) in [
            ("scripts/a.sh", "echo a\n"),
            ("scripts/b.sh", "echo b\n"),
            ("scripts/e.sh", "echo e\n"),
            (
                "scripts/init.sh",
                "# regenerate the loader, run it, put the template back\n\
                 printf '\\056 \\056/scripts/e\\056sh\\n' > scripts/b.sh\n\
                 sh scripts/b.sh\nprintf 'echo b\\n' > scripts/b.sh\n",
            ),
        ] {
            std::fs::write(ws.join(file), body).unwrap();
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(ws.join(file), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let cover = |line: &str| {
            cover_command_with(line.into(), &argv(line), &ws, &ws, None, path().as_deref())
        };
        for (line, word) in [
            ("printf 'x' > scripts/b.sh; sh scripts/b.sh", "scripts/b.sh"),
            ("printf x >> scripts/b.sh && ./scripts/b.sh", "scripts/b.sh"),
            (
                "cp scripts/a.sh scripts/b.sh && sh scripts/b.sh",
                "scripts/b.sh",
            ),
            (
                "cat scripts/a.sh > scripts/b.sh; sh scripts/b.sh",
                "scripts/b.sh",
            ),
            (
                "cat scripts/a.sh | tee scripts/b.sh; sh scripts/b.sh",
                "scripts/b.sh",
            ),
            (
                "mv scripts/a.sh scripts/b.sh; sh scripts/b.sh",
                "scripts/b.sh",
            ),
            (
                "ln -sf /bin/true scripts/b.sh; sh scripts/b.sh",
                "scripts/b.sh",
            ),
            ("touch scripts/b.sh; bash scripts/b.sh", "scripts/b.sh"),
            (
                "sh -c 'cp scripts/a.sh scripts/b.sh' && sh scripts/b.sh",
                "scripts/b.sh",
            ),
            ("sh scripts/init.sh", "scripts/b.sh"),
            ("bash -k scripts/b.sh BASH_ENV=scripts/e.sh", "BASH_ENV="),
            ("sh scripts/b.sh ENV=scripts/e.sh", "ENV="),
        ] {
            let c = cover(line);
            assert!(c.digest().is_none(), "{line}: {c:?}");
            assert!(
                c.uncovered.iter().any(|u| u.contains(word)),
                "{line}: {word} not named in {c:?}"
            );
        }
        // writing or copying a file that is not run, and running one nothing writes: standing
        for line in [
            "cat scripts/a.sh > /tmp/devcell-x; sh scripts/b.sh",
            "cp scripts/a.sh /tmp/devcell-y && sh scripts/b.sh",
            "sh scripts/b.sh < scripts/e.sh",
        ] {
            let c = cover(line);
            assert!(c.uncovered.is_empty(), "{line}: {c:?}");
        }
    }

    /// The literal rule: what cannot name a path a program looks up.
    #[test]
    fn a_literal_word_holds_no_path_character() {
        for word in ["hi", "-p", "--force", "1.2.3", "a_b-c+d,e@f%g", "", "KEY=v"] {
            assert!(is_literal(word), "{word}");
        }
        for word in [
            "init.sh",
            ".",
            "..",
            "a/b",
            "a:b",
            "-I.devcontainer",
            "tools.init",
            "~",
            "*",
            "@(x)",
            "$X",
            "a b",
            "x?",
        ] {
            assert!(!is_literal(word), "{word}");
        }
    }
}
