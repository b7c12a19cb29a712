//! Whether a Compose build's Dockerfile mounts a BuildKit cache (spec-note 0612): the
//! Dockerfile read without following links and bounded, its instructions joined as BuildKit
//! joins them.

use std::path::Path;

use serde_json::Value;

use super::fields::is_remote_context;
use crate::security::host_path::resolve;

/// The most of a Dockerfile read for cache mounts (bytes).
pub(super) const DOCKERFILE_MAX: u64 = 4 << 20;

/// Whether a build's Dockerfile (`dockerfile_inline`, or `dockerfile` in its local context,
/// read without following links, bounded) has a `RUN --mount=type=cache`: a cache the engine
/// shares with every other build that names the same id (another workspace's builds). A
/// Dockerfile that cannot be read (a link, not a regular file, above [`DOCKERFILE_MAX`], a
/// read error) counts as one: what it holds is unknown (fail closed). A missing one has no
/// cache mount (the build fails without it), but a missing default `Dockerfile` has its
/// lowercase `dockerfile` judged, which a builder may take instead.
pub(super) fn build_uses_cache_mount(build: &Value) -> bool {
    match build_dockerfile(build) {
        Ok(Some(text)) => has_cache_mount(&text),
        Ok(None) => false,
        Err(()) => true,
    }
}

/// The text of a build's Dockerfile: `dockerfile_inline`, else `dockerfile` (default
/// `Dockerfile`, then `dockerfile`) in its local context, read without following links and
/// bounded. `Ok(None)`: none, or a remote context (a request of its own, `build-context:`:
/// granting it trusts what the URL holds); `Err`: it cannot be read.
pub(super) fn build_dockerfile(build: &Value) -> std::result::Result<Option<String>, ()> {
    if let Some(inline) = build.get("dockerfile_inline").and_then(Value::as_str) {
        return Ok(Some(inline.to_string()));
    }
    let Some(context) = build.get("context").and_then(Value::as_str) else {
        return Ok(None);
    };
    if is_remote_context(context) {
        return Ok(None);
    }
    let file = build
        .get("dockerfile")
        .and_then(Value::as_str)
        .unwrap_or("Dockerfile");
    let mut names = vec![file];
    if file == "Dockerfile" {
        names.push("dockerfile");
    }
    for name in names {
        if let Some(text) = read_dockerfile(&Path::new(context).join(name))? {
            return Ok(Some(text));
        }
    }
    Ok(None)
}

/// The frontend a build names beside its Dockerfile's text (attacks G9): the Dockerfile's
/// `# syntax=` parser directive, or the `BUILDKIT_SYNTAX` build argument. BuildKit hands the
/// whole build to that image, which can turn any text into any build, cache mounts included.
pub fn frontend_of(build: &Value, text: Option<&str>) -> Option<String> {
    let from_arg = build
        .pointer("/args/BUILDKIT_SYNTAX")
        .and_then(Value::as_str)
        .map(str::to_string);
    from_arg.or_else(|| text.and_then(syntax_directive))
}

/// The `# syntax=` parser directive among the directives that open a Dockerfile.
fn syntax_directive(text: &str) -> Option<String> {
    for line in text.lines() {
        let directive = line.trim().strip_prefix('#')?;
        let (key, value) = directive.split_once('=')?;
        if key.trim().eq_ignore_ascii_case("syntax") {
            return Some(value.trim().to_string());
        }
    }
    None
}

/// The images a Dockerfile's stages build `FROM` (not `scratch`, not an earlier stage), in
/// order, with `${NAME}`/`$NAME` replaced by the build's `args`, else the `ARG` defaults
/// before the first `FROM`; a name still holding a `$` is left out (what it names is the
/// build's to decide). BuildKit runs each one's `ONBUILD` triggers (attacks G9). Pure.
pub fn base_images(text: &str, args: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    let escape = escape_char(text);
    let mut defaults = args.clone();
    let mut stages: Vec<String> = Vec::new();
    let mut bases: Vec<String> = Vec::new();
    let mut seen_from = false;
    for instruction in dockerfile_instructions(text, escape) {
        let mut words = instruction.split_whitespace();
        let Some(keyword) = words.next() else {
            continue;
        };
        if keyword.eq_ignore_ascii_case("arg") && !seen_from {
            for word in words {
                if let Some((name, value)) = word.split_once('=') {
                    defaults
                        .entry(name.to_string())
                        .or_insert_with(|| value.trim_matches('"').to_string());
                }
            }
            continue;
        }
        if !keyword.eq_ignore_ascii_case("from") {
            continue;
        }
        seen_from = true;
        let rest: Vec<&str> = words.filter(|w| !w.starts_with("--")).collect();
        let Some(image) = rest.first() else {
            continue;
        };
        let image = expand(image, &defaults);
        let earlier = stages.contains(&image.to_ascii_lowercase());
        if let [_, as_word, stage, ..] = rest.as_slice()
            && as_word.eq_ignore_ascii_case("as")
        {
            stages.push(stage.to_ascii_lowercase());
        }
        let unknown = image.contains('$') || image.eq_ignore_ascii_case("scratch");
        if !unknown && !earlier && !bases.contains(&image) {
            bases.push(image);
        }
    }
    bases
}

/// `word` with `${NAME}` and `$NAME` of `values` replaced (others left as written).
fn expand(word: &str, values: &std::collections::BTreeMap<String, String>) -> String {
    let mut out = word.to_string();
    for (name, value) in values {
        out = out
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}"), value);
    }
    out
}

/// The text of the Dockerfile at `path`, read without following links and at most
/// [`DOCKERFILE_MAX`] bytes; `Ok(None)` when there is none, `Err` when it cannot be read.
fn read_dockerfile(path: &Path) -> std::result::Result<Option<String>, ()> {
    let resolved = resolve(path).map_err(|_| ())?;
    match crate::security::host_path::read_no_follow(&resolved, DOCKERFILE_MAX) {
        Ok(bytes) => Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned())),
        Err(_) => Err(()),
    }
}

/// Whether Dockerfile `text` mounts a BuildKit cache (`--mount=type=cache`, any spelling of
/// the flag's case, quoting and escaping), judged on its instructions as BuildKit joins them:
/// lines ending in the escape character (`\`, or the `# escape=` directive's) continue on
/// the next, comment and blank lines inside an instruction left out. A `--mount` whose
/// value holds a `$` (a build argument BuildKit expands) counts too. Pure.
pub fn has_cache_mount(text: &str) -> bool {
    let escape = escape_char(text);
    dockerfile_instructions(text, escape)
        .iter()
        .any(|instruction| mounts_a_cache(instruction, escape))
}

/// The escape character of a Dockerfile: the `# escape=` parser directive among the
/// directives that open it, else `\`.
fn escape_char(text: &str) -> char {
    for line in text.lines() {
        let Some(directive) = line.trim().strip_prefix('#') else {
            break;
        };
        let Some((key, value)) = directive.split_once('=') else {
            break;
        };
        if key.trim().eq_ignore_ascii_case("escape") {
            return match value.trim() {
                "`" => '`',
                _ => '\\',
            };
        }
    }
    '\\'
}

/// The instructions of a Dockerfile, continued lines joined (the escape character and line
/// break dropped), comment and blank lines inside an instruction left out.
fn dockerfile_instructions(text: &str, escape: char) -> Vec<String> {
    let mut instructions = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_some() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        let mut part = current.take().unwrap_or_default();
        match line.trim_end().strip_suffix(escape) {
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
