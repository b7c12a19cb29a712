//! Whether a host command is one a standing grant may cover: every word of it understood and
//! safe (attacks M1, M2; spec-note 0410). The words a grant pins are only those the command
//! names; a command that reaches a workspace file some other way (`PATH=.devcontainer:…`,
//! `cd .. && sh ws/x.sh`, `env -C.devcontainer ./x`, `node -r./x.js`, `/proc/self/cwd/…`,
//! `find … -exec sh {} +`) ran whatever the agent later wrote there under a grant that pinned
//! nothing. So the judgement is inverted: a command is a standing grant only when each of its
//! simple commands has this shape, and anything else is a one-run grant whose request names
//! the word or shape that made it so.
//!
//! - **Shape**: simple commands joined by `&&`, `||`, `;`, `|` or a line break; each word
//!   unquoted plain text or `'…'`/`"…"` without `$`, a backquote, a backslash or `!` inside;
//!   redirections `<`, `>`, `>>` (an optional file descriptor number before, `>&N`). No
//!   assignment word (`NAME=value`), no control structure or keyword, no subshell, group,
//!   substitution, glob, extglob, brace, `~`, `&`, heredoc or comment-hidden quoting.
//! - **Program**: a path to a regular workspace file (pinned); or one of the [`PRINTS_ONLY`]
//!   builtins (`printf` with no option: `printf -v` assigns); or one of
//!   [`STANDING_PROGRAMS`] (programs known to read only the files their words name), a shell,
//!   `perl`/`ruby`, or an engine CLI with a subcommand of `ENGINE_STANDING` right after it,
//!   found on the host's `PATH` (devcell's) in an absolute folder outside the workspace before
//!   any relative or workspace entry, or named by an absolute path outside the workspace (not
//!   through `/proc` or `/dev`). A file outside the workspace must be one the container cannot
//!   write ([`trusted_outside`]) and be the kind of program its name says (a link named
//!   `mkdir` to `make` is not). Every other program is a one-run grant: [`RUNS_OTHERS`]
//!   (programs that run, find or re-aim other commands) and [`READS_PROJECT`] (programs that
//!   read project files from the folder they run in) say why by name; any program on no list
//!   may do either (attack 23: `prove`, `setarch x86_64 make`, npm's `npm-cli.js`).
//! - **Shells** (`sh`, `bash`, …): options, then `-c <string>` (the string judged the same way,
//!   up to [`MAX_DEPTH`] levels) or a script that is a pinned workspace file or a path outside
//!   the workspace. A pinned script's text is judged the same way one level deeper (attack
//!   24, O7: `. ./helper.sh` inside it ran the agent's helper), as is a pinned program file
//!   whose `#!` line names a shell (or that has none); `perl`/`ruby` scripts, other `#!`
//!   lines and binaries are one-run grants (spec-note 0456). `set -eu`/`-o pipefail` are read.
//! - **Arguments** (and redirection targets): a pinned workspace file, an absolute path outside
//!   the workspace (resolved, not through `/proc` or `/dev/fd`), a `--flag=value` or
//!   `key=value` whose value is one of these, or a literal ([`is_literal`]).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::security::host_path::{read_no_follow, resolve};
use crate::security::permissions::CoveredFile;
use crate::security::policy::{is_within, normalize_path};

use super::MAX_COVERED_BYTES;

/// How many shells deep a `sh -c "…"` string is judged; deeper is a one-run grant.
pub const MAX_DEPTH: usize = 4;

/// Builtins whose arguments are never read as paths nor run: they print or test strings and
/// file metadata (`echo`, `printf`, `true`, `false`, `:`, `test`, `[`). Their arguments are
/// free; their redirections are judged.
pub const PRINTS_ONLY: &[&str] = &["echo", "printf", "true", "false", ":", "test", "["];

/// Programs and builtins that run another command, find one, or change where or how it runs
/// or what the shell reads: what they run is not a word devcell can pin.
pub const RUNS_OTHERS: &[&str] = &[
    ".",
    "alias",
    "builtin",
    "busybox",
    "cd",
    "chroot",
    "chrt",
    "command",
    "coproc",
    "declare",
    "doas",
    "enable",
    "env",
    "eval",
    "exec",
    "export",
    "fakeroot",
    "find",
    "flock",
    "hash",
    "ionice",
    "local",
    "ltrace",
    "nice",
    "nohup",
    "nsenter",
    "parallel",
    "popd",
    "proot",
    "pushd",
    "read",
    "readonly",
    "run-parts",
    "runuser",
    "script",
    "set",
    "setsid",
    "sg",
    "shopt",
    "source",
    "stdbuf",
    "strace",
    "su",
    "sudo",
    "systemd-run",
    "taskset",
    "time",
    "timeout",
    "trap",
    "typeset",
    "ulimit",
    "umask",
    "unset",
    "unshare",
    "watch",
    "xargs",
];

/// Programs that read project files on their own from the folder they run in (a `Makefile`,
/// `package.json` and its scripts, `node_modules`, Python's current folder on `sys.path`,
/// `.git/config`, a build file, a tool-version file): a grant of their command line pins none
/// of what they run. Matched on the program's name; `python*`, `pip*` and `node*` by prefix.
pub const READS_PROJECT: &[&str] = &[
    "ansible-playbook",
    "ant",
    "asdf",
    "bazel",
    "bazelisk",
    "bun",
    "bundle",
    "bundler",
    "bunx",
    "cargo",
    "cmake",
    "composer",
    "corepack",
    "deno",
    "devcontainer",
    "direnv",
    "docker-compose",
    "dotnet",
    "git",
    "gmake",
    "go",
    "go-task",
    "gradle",
    "gradlew",
    "hatch",
    "java",
    "javac",
    "just",
    "kotlin",
    "lefthook",
    "make",
    "meson",
    "mise",
    "mix",
    "msbuild",
    "mvn",
    "mvnw",
    "ninja",
    "nix",
    "nix-shell",
    "npm",
    "npx",
    "pdm",
    "php",
    "pipenv",
    "pipx",
    "pnpm",
    "pnpx",
    "podman-compose",
    "poetry",
    "pre-commit",
    "pytest",
    "rake",
    "rustup",
    "sbt",
    "task",
    "terraform",
    "tox",
    "nox",
    "uv",
    "uvx",
    "yarn",
    "yarnpkg",
];

/// Name prefixes of [`READS_PROJECT`] programs (`python3.12`, `pip3`, `nodejs`).
const READS_PROJECT_PREFIXES: &[&str] = &["python", "pip", "node"];

/// Programs a standing grant may run by name: each reads and writes only the files its words
/// name (pinned or judged) and runs no other program on its own (attack 23, N3, N8: a list of
/// programs known to read the project, such as `make`, missed `prove`, `setarch make`,
/// `ssh-agent make`; so the list is of programs known to leave the project alone, and any
/// other program is a one-run grant). [`READS_ONLY`] then [`WRITES_NAMED`]: each program is
/// named once, with what it does to the files its words name.
pub const STANDING_PROGRAMS: &[&str] =
    &joined::<{ READS_ONLY.len() + WRITES_NAMED.len() }>(READS_ONLY, WRITES_NAMED);

/// `a` then `b`, at compile time: [`STANDING_PROGRAMS`] from its two disjoint halves.
const fn joined<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    out
}

/// Programs of [`STANDING_PROGRAMS`] that only read the files their words name: every other
/// program ([`WRITES_NAMED`], a pinned program, an engine CLI) may write or replace a
/// workspace file its words name, which then must not also be run as a script by the same
/// command (attack 25, P4; [`Judged::written`]).
const READS_ONLY: &[&str] = &[
    "basename",
    "cat",
    "cmp",
    "cut",
    "date",
    "diff",
    "dirname",
    "grep",
    "head",
    "id",
    "ls",
    "md5sum",
    "printenv",
    "pwd",
    "readlink",
    "realpath",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "sleep",
    "stat",
    "tail",
    "tr",
    "uname",
    "wc",
    "whoami",
];

/// Programs of [`STANDING_PROGRAMS`] that may write or replace the files their words name
/// (`uniq IN OUT` writes OUT).
const WRITES_NAMED: &[&str] = &[
    "chmod", "cp", "ln", "mkdir", "mktemp", "mv", "rm", "rmdir", "tee", "touch", "uniq",
];

/// Multi-call programs a standard program may be a link to (the name it is called by picks
/// what it does).
const MULTI_CALL: &[&str] = &["busybox", "coreutils", "toybox"];

/// `docker`/`podman`/`nerdctl` subcommands a standing grant may run, given right after the
/// program: none reads a Compose file, a build context or another file of the folder it runs
/// in. A global option before the subcommand (`docker --log-level error compose`, attack 23,
/// N2) hides which subcommand runs, so it is a one-run grant.
const ENGINE_STANDING: &[&str] = &[
    "pull", "network", "volume", "info", "version", "inspect", "tag", "ps", "rm", "stop", "kill",
];

/// Folders where engines keep their volumes and container files: what a container writes
/// lands there on the host, so a program or script there is the container's to change
/// (attack 23, N12). `~` is the host user's home.
const ENGINE_DATA_ROOTS: &[&str] = &[
    "/var/lib/docker",
    "/var/lib/containers",
    "/var/lib/containerd",
    "/var/lib/nerdctl",
    "~/.local/share/docker",
    "~/.local/share/containers",
];

/// Shells whose command line devcell reads: options, then `-c <string>` or a script.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh",
];

/// Interpreters that run a script named right after the program.
const SCRIPT_RUNNERS: &[&str] = &["perl", "ruby"];

/// Shell words that open a control structure or are reserved.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "in", "!", "{", "}", "[[", "]]",
];

/// Where a command's words are judged.
pub struct Place<'a> {
    /// The folder the command runs in.
    pub cwd: &'a Path,
    /// The workspace folder, canonical.
    pub root: &'a Path,
    /// The workspace folder as given and canonical (a path lexically inside either is the
    /// workspace's).
    pub roots: &'a [String],
    /// The host's `PATH` as devcell sees it (`None`: unknown, so no plain name is found).
    pub path: Option<&'a OsStr>,
}

/// What the judgement found: the workspace files pinned and why the command cannot be a
/// standing grant (empty: it can).
#[derive(Default, Debug)]
pub struct Judged {
    /// Workspace files the command runs or reads by name, with their content's digest.
    pub files: BTreeSet<CoveredFile>,
    /// Each word or shape that makes the command a one-run grant, with why.
    pub reasons: BTreeSet<String>,
    /// Pinned workspace files (workspace-relative) some step of the command may write or
    /// replace: a `>`/`>>` target, an argument of a program not known to only read
    /// ([`READS_ONLY`]).
    written: BTreeSet<String>,
    /// Pinned workspace files (workspace-relative) the command runs as a script or program.
    run: BTreeSet<String>,
}

impl Judged {
    fn refuse(&mut self, word: &str, why: &str) {
        let shown: String = word.chars().take(80).collect();
        self.reasons.insert(format!("`{shown}` ({why})"));
    }

    /// Adds what `inner` judged (a script's text) to this judgement.
    fn absorb(&mut self, inner: Judged) {
        self.files.extend(inner.files);
        self.reasons.extend(inner.reasons);
        self.written.extend(inner.written);
        self.run.extend(inner.run);
    }

    /// The judgement done: a pinned file one step may write and another runs is a one-run
    /// grant. The judge pins the file's text as it is on disk, but what runs is the text the
    /// earlier step wrote (`printf '. ./x.sh' > env.sh; sh env.sh`, `cp a b; sh b`: attack 25,
    /// P4), at whatever level each step was judged.
    fn finish(mut self) -> Self {
        let both: Vec<String> = self.written.intersection(&self.run).cloned().collect();
        for path in both {
            self.refuse(
                &path,
                "the command writes or replaces this file and runs it as a script: what runs \
                 is the text a step wrote, not the text judged",
            );
        }
        self
    }
}

/// Judges the argv `argv` run directly (no shell reads it; the first element is the program).
pub fn judge_argv(argv: &[String], place: &Place<'_>) -> Judged {
    let mut out = Judged::default();
    let words: Vec<Word> = argv
        .iter()
        .map(|a| Word {
            text: a.clone(),
            quoted: true,
        })
        .collect();
    simple(&words, &[], place, 0, &mut out);
    out.finish()
}

/// Judges a Compose provider's `type` when that is a path (a plain name is a program Compose
/// looks up itself, never in the folder it runs in). Its `options` are values Compose hands to
/// the program (a model name `ai/small`), judged by the words they name only (the module
/// docs of [`super`]): no shell reads them.
pub fn judge_provider(program_word: &str, place: &Place<'_>) -> Judged {
    let mut out = Judged::default();
    if program_word.contains('/') {
        if let Some(Program {
            file: Some(file), ..
        }) = program(program_word, place, &mut out)
        {
            program_file(program_word, &file, place, 0, &mut out);
        }
    } else if ENGINE_CLIS.contains(&program_word) {
        // `docker compose …` is Compose again, with its plugins and the project files of the
        // folder it runs in: what it runs is not pinned (attack 24's review)
        out.refuse(
            program_word,
            "a provider program that is an engine or Compose CLI: it runs Compose and its \
             plugins again, and what they run is not pinned",
        );
    } else if SHELLS.contains(&program_word)
        || SCRIPT_RUNNERS.contains(&program_word)
        || RUNS_OTHERS.contains(&program_word)
        || reads_project(program_word)
    {
        // Compose runs `<type> compose …`: a shell or an interpreter reads a file named
        // `compose`, a build tool its project file, from the folder Compose runs in (`type: sh`
        // ran the workspace's `compose`: attack 23, N19). devcell runs Compose in a folder of
        // its own now; such a program is still granted per run only.
        out.refuse(
            program_word,
            "a provider program that reads files of the folder Compose runs in: what it runs \
             is not pinned",
        );
    }
    out.finish()
}

/// Engine and Compose CLIs as a Compose provider `type`: each runs `<type> compose …`, that is
/// Compose (or its plugins) again, so a grant of one pins nothing; one-run only.
const ENGINE_CLIS: &[&str] = &[
    "docker",
    "podman",
    "nerdctl",
    "docker-compose",
    "podman-compose",
];

/// One shell word after quote removal.
#[derive(Debug, Clone)]
struct Word {
    text: String,
    /// Whether any part of it was quoted (a quoted word is never a keyword nor an assignment).
    quoted: bool,
}

/// A redirection's target word (`None` for `>&N`, a descriptor).
#[derive(Debug)]
struct Redirect {
    target: Option<Word>,
    /// Whether the redirection writes its target (`>`, `>>`), not only reads it (`<`).
    writes: bool,
}

/// One simple command: its words and redirections.
#[derive(Debug, Default)]
struct Simple {
    words: Vec<Word>,
    redirects: Vec<Redirect>,
}

/// Judges the shell string `text` (what `sh -c` runs).
fn shell(text: &str, place: &Place<'_>, depth: usize, out: &mut Judged) {
    if depth >= MAX_DEPTH {
        out.refuse(text, "a shell string nested deeper than devcell reads");
        return;
    }
    match lex(text) {
        Ok(commands) => {
            for command in commands {
                simple(&command.words, &command.redirects, place, depth, out);
            }
        }
        Err((word, why)) => out.refuse(&word, why),
    }
}

/// Reads a quoted run up to its closing `quote` into `w` (marked quoted). Inside double quotes
/// `$`, `` ` ``, `\` and `!` are the shell's to expand, which devcell does not read.
fn read_quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    w: &mut Word,
    quote: char,
) -> Result<(), (String, &'static str)> {
    w.quoted = true;
    loop {
        match chars.next() {
            Some(q) if q == quote => return Ok(()),
            Some(q @ ('$' | '`' | '\\' | '!')) if quote == '"' => {
                return Err((q.to_string(), "expanded when the command runs"));
            }
            Some(q) => w.text.push(q),
            None => return Err((quote.to_string(), "an unterminated quote")),
        }
    }
}

/// A piece devcell does not read, as written, with why.
type Unread = (String, &'static str);

/// `c` as the piece devcell does not read, with why.
fn unread<T>(c: char, why: &'static str) -> Result<T, Unread> {
    Err((c.to_string(), why))
}

/// The characters of a shell string, one look ahead.
type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// What [`lex`] has read so far.
struct Lexer {
    /// The simple commands, the last one being read.
    commands: Vec<Simple>,
    /// The word being read.
    word: Option<Word>,
    /// A redirection waiting for its target, as written.
    pending: Option<String>,
}

impl Lexer {
    /// The word being read ends: it is the pending redirection's target, else the current
    /// command's next word.
    fn finish_word(&mut self) {
        if let Some(w) = self.word.take() {
            let current = self.commands.last_mut().expect("one command");
            match self.pending.take() {
                Some(op) => current.redirects.push(Redirect {
                    target: Some(w),
                    writes: op.contains('>'),
                }),
                None => current.words.push(w),
            }
        }
    }

    /// The word being read, begun (`quoted` or not) when there is none.
    fn word(&mut self, quoted: bool) -> &mut Word {
        self.word.get_or_insert_with(|| Word {
            text: String::new(),
            quoted,
        })
    }

    /// `\n` or `;`: the next command (`;;` is not read).
    fn separator(&mut self, c: char, chars: &mut Chars<'_>) -> Result<(), Unread> {
        self.finish_word();
        if c == ';' && chars.peek() == Some(&';') {
            return unread(c, "`;;` belongs to a control structure");
        }
        if self.pending.is_some() {
            return unread(c, "a redirection without its target");
        }
        self.commands.push(Simple::default());
        Ok(())
    }

    /// `&&`, `||` or `|`: the next command (`|&` and `&` are not read).
    fn control(&mut self, c: char, chars: &mut Chars<'_>) -> Result<(), Unread> {
        self.finish_word();
        if self.pending.is_some() {
            return unread(c, "a redirection without its target");
        }
        match (c, chars.peek()) {
            ('&', Some('&')) | ('|', Some('|')) => {
                chars.next();
            }
            ('|', Some('&')) => return unread(c, "`|&` is not read by devcell"),
            ('|', _) => {}
            _ => return unread(c, "a command run in the background"),
        }
        self.commands.push(Simple::default());
        Ok(())
    }

    /// `<`, `>` or `>>` (after an unquoted descriptor word, if any), waiting for its target;
    /// `>&N` (a descriptor, complete). Heredocs and other redirections are not read.
    fn redirection(&mut self, c: char, chars: &mut Chars<'_>) -> Result<(), Unread> {
        let fd = match &self.word {
            Some(w) if !w.quoted && w.text.chars().all(|d| d.is_ascii_digit()) => {
                self.word.take().map(|w| w.text)
            }
            _ => None,
        };
        self.finish_word();
        if self.pending.is_some() {
            return unread(c, "a redirection without its target");
        }
        let mut op = fd.unwrap_or_default();
        op.push(c);
        match (c, chars.peek().copied()) {
            ('>', Some('>')) => {
                op.push('>');
                chars.next();
            }
            ('>', Some('&')) => {
                chars.next();
                let mut to = String::new();
                while let Some(d) = chars.peek().copied().filter(|d| d.is_ascii_digit()) {
                    to.push(d);
                    chars.next();
                }
                if to.is_empty() {
                    return unread(c, "a redirection devcell does not read");
                }
                self.commands
                    .last_mut()
                    .expect("one command")
                    .redirects
                    .push(Redirect {
                        target: None,
                        writes: false,
                    });
                return Ok(());
            }
            (_, Some('<' | '>' | '&' | '|' | '(')) => {
                return unread(c, "a heredoc or redirection devcell does not read");
            }
            _ => {}
        }
        self.pending = Some(op);
        Ok(())
    }
}

/// The simple commands of `text`, or the first piece devcell does not read with why.
fn lex(text: &str) -> Result<Vec<Simple>, Unread> {
    let mut lx = Lexer {
        commands: vec![Simple::default()],
        word: None,
        pending: None,
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => lx.finish_word(),
            '\n' | ';' => lx.separator(c, &mut chars)?,
            '&' | '|' => lx.control(c, &mut chars)?,
            '<' | '>' => lx.redirection(c, &mut chars)?,
            '\'' | '"' => read_quoted(&mut chars, lx.word(true), c)?,
            '#' if lx.word.is_none() => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
                lx.commands.push(Simple::default());
            }
            '$' | '`' | '*' | '?' | '~' | '!' => {
                return unread(
                    c,
                    "expanded when the command runs (a variable, a substitution, a glob or `~`)",
                );
            }
            '[' | ']' if lx.word.is_none() && matches!(chars.peek(), None | Some(' ' | '\t')) => {
                lx.word = Some(Word {
                    text: c.to_string(),
                    quoted: false,
                });
            }
            '(' | ')' | '{' | '}' | '[' | ']' | '\\' => {
                return unread(
                    c,
                    "a subshell, a group, a glob, brace expansion or an escape devcell does not read",
                );
            }
            c => lx.word(false).text.push(c),
        }
    }
    lx.finish_word();
    if lx.pending.is_some() {
        return Err(("<>".into(), "a redirection without its target"));
    }
    Ok(lx
        .commands
        .into_iter()
        .filter(|c| !c.words.is_empty() || !c.redirects.is_empty())
        .collect())
}

/// Judges one simple command.
fn simple(
    words: &[Word],
    redirects: &[Redirect],
    place: &Place<'_>,
    depth: usize,
    out: &mut Judged,
) {
    for redirect in redirects {
        if let Some(target) = &redirect.target {
            argument(&target.text, place, depth, out);
            if redirect.writes {
                mark_written(&target.text, place, out);
            }
        }
    }
    let Some(first) = words.first() else {
        return;
    };
    let args = &words[1..];
    if !first.quoted && KEYWORDS.contains(&first.text.as_str()) {
        return out.refuse(&first.text, "a control structure devcell does not read");
    }
    if !first.quoted && is_assignment(&first.text) {
        return out.refuse(
            &first.text,
            "an assignment: it changes where the shell or the program finds what it runs",
        );
    }
    let Some(Program { name, pinned, file }) = program(&first.text, place, out) else {
        return;
    };
    if let Some(file) = file {
        // what runs is the file's text, whatever its name says (attack 24, O7)
        program_file(&first.text, &file, place, depth, out);
        return args.iter().for_each(|a| {
            argument(&a.text, place, depth, out);
            mark_written(&a.text, place, out);
        });
    }
    if !first.quoted && name == "set" && !first.text.contains('/') {
        return set_options(&first.text, args, out);
    }
    if name == "printf" && args.first().is_some_and(|a| a.text.starts_with('-')) {
        // bash's `printf -v NAME` assigns a variable (`printf -v PATH …`: attack 23, N1)
        return out.refuse(
            &first.text,
            "`printf` given an option: `printf -v` assigns a variable, as `NAME=value` does",
        );
    }
    if PRINTS_ONLY.contains(&name.as_str()) && !first.text.contains('/') {
        return;
    }
    if RUNS_OTHERS.contains(&name.as_str()) {
        return out.refuse(
            &first.text,
            "it runs, finds or re-aims other commands: what runs is not a word a grant pins",
        );
    }
    if reads_project(&name) {
        return out.refuse(
            &first.text,
            "it reads project files on its own from the folder it runs in, which a grant does \
             not pin",
        );
    }
    if SHELLS.contains(&name.as_str()) {
        return shell_command(&first.text, args, place, depth, out);
    }
    if is_engine(&name) {
        return engine_command(&first.text, args, place, depth, out);
    }
    if !pinned
        && !STANDING_PROGRAMS.contains(&name.as_str())
        && !SCRIPT_RUNNERS.contains(&name.as_str())
    {
        return out.refuse(
            &first.text,
            "a program devcell does not know to leave the project alone: it may read or run \
             files of the folder it runs in, which a grant does not pin",
        );
    }
    if SCRIPT_RUNNERS.contains(&name.as_str()) {
        return match args.split_first() {
            Some((script, rest)) if !script.text.starts_with('-') => {
                script_word(&script.text, place, Reader::Unread, depth, out);
                rest.iter()
                    .for_each(|a| argument(&a.text, place, depth, out));
            }
            _ => out.refuse(
                &first.text,
                "an interpreter given options or no script: what it loads is not pinned",
            ),
        };
    }
    let writes = !READS_ONLY.contains(&name.as_str());
    for arg in args {
        argument(&arg.text, place, depth, out);
        if writes {
            mark_written(&arg.text, place, out);
        }
    }
}

/// Records the pinned workspace file `word` names (itself, or the value of `--flag=value`) as
/// one a step of the command may write ([`Judged::written`]).
fn mark_written(word: &str, place: &Place<'_>, out: &mut Judged) {
    let value = word.split_once('=').map(|(_, v)| v);
    for w in std::iter::once(word).chain(value) {
        if let PathWord::Pinned(file) = path_word(w, place) {
            out.written.insert(file.path);
        }
    }
}

/// Whether `word` is an assignment word (`NAME=value`).
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '[' || c == ']')
}

/// Whether the program `name` reads project files on its own (`make`, `npm`, `git`, …).
fn reads_project(name: &str) -> bool {
    READS_PROJECT.contains(&name) || READS_PROJECT_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether `name` is an engine's CLI.
fn is_engine(name: &str) -> bool {
    matches!(name, "docker" | "podman" | "nerdctl")
}

/// Judges an engine CLI's command: a subcommand of [`ENGINE_STANDING`] right after the
/// program, then its arguments; anything else is a one-run grant.
fn engine_command(program: &str, args: &[Word], place: &Place<'_>, depth: usize, out: &mut Judged) {
    match args.split_first() {
        Some((sub, rest)) if ENGINE_STANDING.contains(&sub.text.as_str()) => {
            for arg in rest {
                argument(&arg.text, place, depth, out);
                mark_written(&arg.text, place, out);
            }
        }
        Some((sub, _)) if sub.text.starts_with('-') => out.refuse(
            program,
            "an engine command with a global option before its subcommand: which subcommand \
             runs, and what it reads, is not a word a grant pins",
        ),
        _ => out.refuse(
            program,
            "an engine subcommand that may read project files (a Compose file, a build \
             context) or run a container from them, which a grant does not pin",
        ),
    }
}

/// The program a command's first word runs.
struct Program {
    /// The name it is called by (its last path part).
    name: String,
    /// Whether it is a workspace file the grant pins.
    pinned: bool,
    /// That workspace file, when it is one: its text is judged too ([`program_file`]).
    file: Option<CoveredFile>,
}

/// The program `word` runs, or `None` (and a reason) when it is not one a standing grant may
/// cover. A workspace file is pinned; a file outside the workspace must be one the container
/// cannot write ([`trusted_outside`]) and be what its name says ([`same_kind`]).
fn program(word: &str, place: &Place<'_>, out: &mut Judged) -> Option<Program> {
    let name = word.rsplit('/').next().unwrap_or(word).to_string();
    let found = if word.contains('/') {
        match path_word(word, place) {
            PathWord::Pinned(file) => {
                out.files.insert(file.clone());
                out.run.insert(file.path.clone());
                return Some(Program {
                    name,
                    pinned: true,
                    file: Some(file),
                });
            }
            PathWord::Outside => Ok(place.cwd.join(word)),
            PathWord::Refused(why) => Err(why),
            PathWord::Missing => Err("no such file in the workspace to pin".to_string()),
        }
    } else if PRINTS_ONLY.contains(&word) || RUNS_OTHERS.contains(&word) || KEYWORDS.contains(&word)
    {
        return Some(Program {
            name,
            pinned: false,
            file: None,
        });
    } else {
        on_path(word, place)
    };
    let checked = found.and_then(|file| {
        // judged once: the kind is read from the file whose folders were judged
        let resolved = trusted_outside(&file)?;
        same_kind(&name, &file, &resolved)
    });
    match checked {
        Ok(()) => Some(Program {
            name,
            pinned: false,
            file: None,
        }),
        Err(why) => {
            out.refuse(word, &why);
            None
        }
    }
}

/// What kind of program a name is, for [`same_kind`].
#[derive(PartialEq, Eq)]
enum Kind {
    Shell,
    ScriptRunner,
    Engine,
    Standing,
    Other,
}

fn kind(name: &str) -> Kind {
    if SHELLS.contains(&name) {
        Kind::Shell
    } else if SCRIPT_RUNNERS.contains(&name) {
        Kind::ScriptRunner
    } else if is_engine(name) {
        Kind::Engine
    } else if STANDING_PROGRAMS.contains(&name) || PRINTS_ONLY.contains(&name) {
        Kind::Standing
    } else {
        Kind::Other
    }
}

/// Whether the file `file`, `resolved` (links followed, as [`trusted_outside`] resolved it), is
/// the kind of program its name `name` says: a link `/tmp/x/mkdir` to `make`, or npm's
/// `npm-cli.js` behind `npm`, is judged by what runs (attack 23, N11). A link to a multi-call
/// program ([`MULTI_CALL`]) does what its name says.
fn same_kind(name: &str, file: &Path, resolved: &Path) -> Result<(), String> {
    let real = resolved
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let wanted = kind(name);
    if real == name
        || MULTI_CALL.contains(&real.as_str())
        || (wanted != Kind::Other && kind(&real) == wanted)
    {
        return Ok(());
    }
    Err(format!(
        "`{}` is `{real}`, not the program its name says: what runs is judged by what it is",
        file.display()
    ))
}

/// Whether `file`, outside the workspace, is one the container cannot write: it exists, is
/// owned by root or by devcell's user, as is each folder above it, none of them writable by
/// another user (a folder with the sticky bit, such as `/tmp`, keeps others' files out), and
/// it is under no folder where an engine keeps container data ([`ENGINE_DATA_ROOTS`]).
/// A script in a named volume's `_data` folder was the container's to change (attack 23,
/// N12). Answers the file resolved (links followed): the one judged, and the one to read.
///
/// Errors: why the container could write it (or it cannot be resolved or read).
pub fn trusted_outside(file: &Path) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::MetadataExt as _;
    let shown = file.display();
    let resolved = resolve(file).map_err(|e| format!("devcell cannot resolve `{shown}`: {e}"))?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    for root in ENGINE_DATA_ROOTS {
        let root = match (root.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            (Some(_), None) => continue,
            (None, _) => Path::new(root).to_path_buf(),
        };
        if resolved.starts_with(&root) {
            return Err(format!(
                "`{shown}` is under `{}`, where an engine keeps what containers write",
                root.display()
            ));
        }
    }
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    let mut at = Some(resolved.as_path());
    while let Some(path) = at {
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| format!("`{}` cannot be read: {e}", path.display()))?;
        if meta.uid() != 0 && Some(meta.uid()) != me {
            return Err(format!(
                "`{}` is owned by uid {}, neither root nor devcell's user",
                path.display(),
                meta.uid()
            ));
        }
        let others_write = meta.mode() & 0o022 != 0;
        let sticky_folder = meta.is_dir() && meta.mode() & 0o1000 != 0;
        if others_write && !(sticky_folder && path != resolved.as_path()) {
            return Err(format!("`{}` is writable by other users", path.display()));
        }
        at = path.parent();
    }
    Ok(resolved)
}

/// Whether the plain program name `name` is found on `PATH` in an absolute folder outside the
/// workspace before any entry that is relative, empty (the current folder) or in the
/// workspace (where the shell would look first, and the agent can write).
fn on_path(name: &str, place: &Place<'_>) -> Result<std::path::PathBuf, String> {
    let Some(path) = place.path else {
        return Err("`PATH` is unknown: devcell cannot tell which program runs".into());
    };
    for entry in std::env::split_paths(path) {
        let shown = entry.display().to_string();
        if !entry.is_absolute() {
            return Err(format!(
                "`PATH` searches `{shown}`, relative to the workspace, before the program"
            ));
        }
        let resolved = resolve(&entry).unwrap_or_else(|_| entry.clone());
        if place.roots.iter().any(|r| is_within(&shown, r))
            || is_within(&text(&resolved), &text(place.root))
        {
            return Err(format!(
                "`PATH` searches `{shown}`, in the workspace, before the program"
            ));
        }
        let candidate = entry.join(name);
        if let Ok(meta) = std::fs::metadata(&candidate)
            && meta.is_file()
        {
            use std::os::unix::fs::PermissionsExt as _;
            if meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
        }
    }
    Err("not a program found on the host's `PATH` outside the workspace".into())
}

/// Judges the arguments of a shell: options, then `-c <string>` (judged as a shell string) or
/// a script (pinned), then the script's arguments.
fn shell_command(program: &str, args: &[Word], place: &Place<'_>, depth: usize, out: &mut Judged) {
    if let Some(keyword) = args.iter().find(|a| is_assignment(&a.text)) {
        // `bash -k x.sh BASH_ENV=e.sh` (or `-o keyword`, `set -k` in an rc file) puts it in the
        // environment: `BASH_ENV`/`ENV` name a file the shell sources (attack 25, P4)
        return out.refuse(
            &keyword.text,
            "an assignment among a shell's arguments: with `-k` the shell puts it in the \
             environment, where `BASH_ENV`/`ENV` name a file it sources",
        );
    }
    let mut rest = args.iter();
    let mut command_string = false;
    while let Some(arg) = rest.next() {
        let a = arg.text.as_str();
        if matches!(a, "-o" | "+o" | "-O" | "+O") {
            match rest.next() {
                Some(v) if is_literal(&v.text) => continue,
                _ => return out.refuse(a, "a shell option devcell does not read"),
            }
        }
        if a == "--" {
            break;
        }
        if matches!(
            a,
            "--norc" | "--noprofile" | "--login" | "--posix" | "--restricted"
        ) {
            continue;
        }
        let flags = a.strip_prefix('-').or_else(|| a.strip_prefix('+'));
        match flags {
            Some(f) if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphabetic()) => {
                if f.contains('s') {
                    return out.refuse(a, "the shell reads its commands from standard input");
                }
                command_string |= f.contains('c');
            }
            Some(_) => return out.refuse(a, "a shell option devcell does not read"),
            None => {
                if command_string {
                    shell(a, place, depth + 1, out);
                } else {
                    script_word(a, place, Reader::Shell, depth, out);
                }
                for arg in rest {
                    argument(&arg.text, place, depth, out);
                }
                return;
            }
        }
    }
    match rest.next() {
        Some(a) if command_string => shell(&a.text, place, depth + 1, out),
        Some(a) => script_word(&a.text, place, Reader::Shell, depth, out),
        None => out.refuse(program, "the shell reads its commands from standard input"),
    }
    for arg in rest {
        argument(&arg.text, place, depth, out);
    }
}

/// Who reads a pinned script's text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// A shell: devcell judges the text as it judges `sh -c <text>`.
    Shell,
    /// An interpreter whose language devcell does not read (`perl`, `ruby`).
    Unread,
}

/// Judges a script an interpreter runs: a pinned workspace file (whose text a shell's script
/// is judged by, [`script_text`]; another interpreter's makes it a one-run grant) or a file
/// outside it.
fn script_word(word: &str, place: &Place<'_>, reader: Reader, depth: usize, out: &mut Judged) {
    match path_word(word, place) {
        PathWord::Pinned(file) => {
            out.files.insert(file.clone());
            out.run.insert(file.path.clone());
            match reader {
                Reader::Shell => script_text(word, &file, place, depth, out),
                Reader::Unread => out.refuse(
                    word,
                    "a script in a language devcell does not read: what it loads or runs \
                     (`require`, `use lib`, another program) is not pinned",
                ),
            }
        }
        PathWord::Outside if word.starts_with('/') => {
            if let Err(why) = trusted_outside(Path::new(word)) {
                out.refuse(word, &why);
            }
        }
        PathWord::Outside | PathWord::Missing => {
            out.refuse(word, "a script that is no workspace file devcell can pin")
        }
        PathWord::Refused(why) => out.refuse(word, &why),
    }
}

/// Judges the text of the pinned shell script `file` (named `word`) as a `sh -c` string one
/// level deeper: what it runs or reads by name is pinned too, anything else makes the command
/// a one-run grant. Pinning the script alone let `. ./helper.sh` inside it run whatever the
/// agent wrote into `helper.sh` under a standing grant (attack 24, O7). The text read is the
/// one pinned: a file that changed since its digest was taken is refused.
fn script_text(word: &str, file: &CoveredFile, place: &Place<'_>, depth: usize, out: &mut Judged) {
    let bytes = match read_no_follow(&place.root.join(&file.path), MAX_COVERED_BYTES) {
        Ok(Some(bytes)) if hex::encode(Sha256::digest(&bytes)) == file.sha256 => bytes,
        _ => return out.refuse(word, "a script that changed while devcell read it"),
    };
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) if !text.contains('\0') => text,
        _ => return out.refuse(word, "a script that is not text devcell reads"),
    };
    let mut inner = Judged::default();
    shell(text, place, depth + 1, &mut inner);
    // What runs is devcell's copy of this script (spec-note 0477), but the copy's own words
    // still open the workspace files they name, which a running container can swap between
    // the judgement and the run (attack 25, P1): such a script is granted for one run only.
    let reached: Vec<String> = inner
        .files
        .iter()
        .map(|f| format!("`{}`", f.path))
        .collect();
    if !reached.is_empty() {
        out.refuse(
            word,
            &format!(
                "a script that runs or reads {} from the workspace, not from devcell's copy: \
                 a running container can change it between the judgement and the run",
                reached.join(", ")
            ),
        );
    }
    out.absorb(inner);
}

/// Judges a pinned workspace file run as a program (`./tools/init`): the kernel runs it by its
/// first line. A `#!` line naming a shell outside the workspace (directly or through `env`),
/// or no `#!` line and text (a shell runs such a file itself), is judged as a shell script
/// ([`script_text`]); any other file (another interpreter's script, a binary) does what
/// devcell cannot read, so the command is a one-run grant (attack 24, O7).
fn program_file(word: &str, file: &CoveredFile, place: &Place<'_>, depth: usize, out: &mut Judged) {
    let bytes = match read_no_follow(&place.root.join(&file.path), MAX_COVERED_BYTES) {
        Ok(Some(bytes)) => bytes,
        _ => return out.refuse(word, "a program file devcell cannot read"),
    };
    let first_line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let shell_script = match first_line.strip_prefix(b"#!") {
        Some(line) => shebang_is_shell(&String::from_utf8_lossy(line), place),
        None => !bytes.starts_with(b"\x7fELF"),
    };
    if shell_script {
        script_text(word, file, place, depth, out);
    } else {
        out.refuse(
            word,
            "a program file devcell does not read (a binary or another interpreter's script): \
             what it runs or loads is not pinned",
        );
    }
}

/// Whether the `#!` line `line` (without `#!`) runs a shell: an absolute path outside the
/// workspace to a shell, or `env` so found and then a shell's plain name found on `PATH`
/// ([`program`]'s rules), with options only after it.
fn shebang_is_shell(line: &str, place: &Place<'_>) -> bool {
    let mut words = line.split_whitespace();
    let Some(interpreter) = words.next().filter(|w| w.starts_with('/')) else {
        return false;
    };
    let mut scratch = Judged::default();
    let Some(found) = program(interpreter, place, &mut scratch) else {
        return false;
    };
    let shell = if found.name == "env" && !found.pinned {
        match words
            .next()
            .filter(|w| !w.contains('/') && !w.starts_with('-'))
        {
            Some(name) => program(name, place, &mut scratch)
                .is_some_and(|p| !p.pinned && SHELLS.contains(&p.name.as_str())),
            None => false,
        }
    } else {
        !found.pinned && SHELLS.contains(&found.name.as_str())
    };
    shell
        && scratch.reasons.is_empty()
        && words.all(|w| w.starts_with('-') && w[1..].chars().all(|c| c.is_ascii_alphabetic()))
}

/// Judges `set` with the options of a script's prologue only (`set -eu`, `set -o pipefail`):
/// they change how the shell stops and reports, never what it runs. Any other use (`set --`,
/// `set -k`, an option devcell does not list) is a one-run grant.
fn set_options(word: &str, args: &[Word], out: &mut Judged) {
    const FLAGS: &str = "euxvCf";
    const NAMED: &[&str] = &[
        "errexit",
        "nounset",
        "pipefail",
        "xtrace",
        "verbose",
        "noclobber",
    ];
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let a = arg.text.as_str();
        let ok = match a.strip_prefix('-').or_else(|| a.strip_prefix('+')) {
            Some("o") => rest
                .next()
                .is_some_and(|v| NAMED.contains(&v.text.as_str())),
            Some(f) => !f.is_empty() && f.chars().all(|c| FLAGS.contains(c)),
            None => false,
        };
        if !ok {
            return out.refuse(
                word,
                "`set` with an option or argument devcell does not read",
            );
        }
    }
}

/// Judges one argument (or redirection target): see the module docs.
fn argument(word: &str, place: &Place<'_>, depth: usize, out: &mut Judged) {
    match path_word(word, place) {
        PathWord::Pinned(file) => {
            out.files.insert(file);
            return;
        }
        PathWord::Outside if word.starts_with('/') => return,
        PathWord::Refused(why) => return out.refuse(word, &why),
        PathWord::Outside | PathWord::Missing => {}
    }
    if is_literal(word) {
        return;
    }
    if let Some((key, value)) = word.split_once('=')
        && is_literal(key.trim_start_matches('-'))
        && depth < MAX_DEPTH
        && !value.is_empty()
    {
        return argument(value, place, depth + 1, out);
    }
    out.refuse(
        word,
        "a word that may name a path devcell cannot pin (a relative path, `.`, `:` or a \
         character a program may read as one)",
    );
}

/// Whether `word` is a literal that cannot name a path a program would look up: ASCII
/// letters, digits and `- _ + , @ % ^ =` only (no `/`, no `:` (a `PATH`-like list, `host:path`),
/// no glob, extglob or brace character, no `~`, `$`, quote or space), and a `.` only in a word
/// made of digits and dots (a version, `1.2.3`): `init.sh`, `.devcontainer`, `tools.init`
/// (`python -m`), `-I.devcontainer` and `..` all hold one. A word like `init` could still
/// name a file in the workspace's root; one that does now is pinned, and a program that runs
/// a file it is given (a shell, an interpreter) is judged by its script word instead.
pub fn is_literal(word: &str) -> bool {
    let plain = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_+,@%^=".contains(c));
    let version = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_digit() || c == '.')
        && word.chars().any(|c| c.is_ascii_digit());
    plain || version
}

/// What a word names as a path.
enum PathWord {
    /// A regular workspace file: pinned.
    Pinned(CoveredFile),
    /// Something that exists outside the workspace, or an absolute path that would be outside
    /// it.
    Outside,
    /// Nothing (relative, not existing).
    Missing,
    /// Something no grant can pin, with why.
    Refused(String),
}

/// Judges `word` as a path relative to the command's folder (or absolute).
fn path_word(word: &str, place: &Place<'_>) -> PathWord {
    if word.is_empty() || word.len() > 4096 || word.contains('\0') {
        return PathWord::Missing;
    }
    if ["/proc", "/dev/fd", "/dev/std"]
        .iter()
        .any(|p| word.starts_with(p))
    {
        return PathWord::Refused(
            "a path through `/proc` or `/dev`: it names what the running shell sees".into(),
        );
    }
    let path = place.cwd.join(word);
    let lexical = normalize_path(&text(&path)).unwrap_or_default();
    let lexically_inside = place.roots.iter().any(|r| is_within(&lexical, r));
    let resolved = match resolve(&path) {
        Ok(r) => r,
        Err(e) => return PathWord::Refused(format!("devcell cannot resolve it: {e}")),
    };
    let resolved_text = text(&resolved);
    if is_within(&resolved_text, "/proc") {
        return PathWord::Refused("a path through `/proc`".into());
    }
    let inside = is_within(&resolved_text, &text(place.root));
    let Ok(meta) = std::fs::symlink_metadata(&resolved) else {
        return match (inside || lexically_inside, word.starts_with('/')) {
            (false, true) => PathWord::Outside,
            (true, true) => PathWord::Refused("no such file in the workspace to pin".into()),
            _ => PathWord::Missing,
        };
    };
    if !inside {
        return if lexically_inside {
            PathWord::Refused("a symbolic link leaving the workspace".into())
        } else {
            PathWord::Outside
        };
    }
    let relative = match resolved.strip_prefix(place.root) {
        Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
        Ok(r) => text(r),
        Err(_) => resolved_text.clone(),
    };
    if meta.is_dir() {
        return PathWord::Refused(format!(
            "`{relative}` is a folder of the workspace: its content is not pinned"
        ));
    }
    if !meta.is_file() {
        return PathWord::Refused(format!("`{relative}` is not a regular file"));
    }
    match read_no_follow(&resolved, MAX_COVERED_BYTES) {
        Ok(Some(bytes)) => PathWord::Pinned(CoveredFile {
            path: relative,
            sha256: hex::encode(Sha256::digest(&bytes)),
        }),
        Ok(None) => PathWord::Missing,
        Err(e) => PathWord::Refused(format!("`{relative}` cannot be read: {e}")),
    }
}

/// A path as text (lossy).
fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each standing program is named once: a reader is not also a writer, and the joined
    /// list holds both halves whole.
    #[test]
    fn standing_programs_are_the_readers_then_the_writers() {
        assert!(READS_ONLY.iter().all(|p| !WRITES_NAMED.contains(p)));
        assert_eq!(
            STANDING_PROGRAMS,
            [READS_ONLY, WRITES_NAMED].concat().as_slice()
        );
        assert!(STANDING_PROGRAMS.contains(&"uniq") && STANDING_PROGRAMS.contains(&"basename"));
    }
}
