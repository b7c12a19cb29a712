//! Enforces the layer rule: a module never imports a higher layer, only `engine` names
//! `bollard` or a backend type (everything above asks `engine::connect`), the agent product's
//! concepts live in `handoff`, not `ops`, and the files of one module import one another in one direction (no circles,
//! also none through a parent's `use` re-exports).
//! Fails with the offending file and line.

use std::fs;
use std::path::{Path, PathBuf};

/// The layer of each top-level module (see `src/lib.rs`).
fn layer_of(module: &str) -> Option<u8> {
    Some(match module {
        "config" | "diagnostics" | "formats" | "progress" | "process" | "names" | "settings" => 0,
        "oci" | "features" | "templates" => 1,
        "engine" => 2,
        "build" | "security" | "lifecycle" | "egress" | "mail" => 3,
        "ops" => 4,
        "handoff" => 5,
        "cli" => 6,
        _ => return None,
    })
}

fn allowed(from: &str, to: &str) -> bool {
    if from == to {
        return true;
    }
    let (Some(lf), Some(lt)) = (layer_of(from), layer_of(to)) else {
        return true;
    };
    match (lf, lt) {
        // L0: config may use the other L0 modules; the others use nothing of ours but L0 peers.
        (0, 0) => true,
        // L1: features may use oci, templates may use both, not the reverse.
        (1, 1) => matches!(
            (from, to),
            ("features", "oci") | ("templates", "oci" | "features")
        ),
        // L2 engine: L0 only.
        (2, t) => t == 0,
        // L3: never one another.
        (3, 3) => false,
        // L6 cli: the operations, the agent product and L0 only.
        (6, t) => t == 5 || t == 4 || t == 0,
        (f, t) => t < f,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_string())
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every top-level module named through `crate::` in `text`, with its 1-based line: a path
/// (`crate::a::b`) names `a`; a group (`use crate::{a, b::{c, d}}`, over any number of lines)
/// names each of its top-level items. Line comments are ignored; `$crate::` is not ours.
fn crate_uses(text: &str) -> Vec<(usize, String)> {
    let code: Vec<(usize, char)> = text
        .lines()
        .enumerate()
        .flat_map(|(n, line)| {
            let code = line.split("//").next().unwrap_or("");
            code.chars().chain(['\n']).map(move |c| (n + 1, c))
        })
        .collect();
    let word = |at: usize| -> String {
        code[at..]
            .iter()
            .map(|&(_, c)| c)
            .take_while(|&c| is_ident(c))
            .collect()
    };
    let mut uses = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let starts = code[i..]
            .iter()
            .map(|&(_, c)| c)
            .take(7)
            .eq("crate::".chars());
        let glued = i > 0 && (is_ident(code[i - 1].1) || code[i - 1].1 == '$');
        if !starts || glued {
            i += 1;
            continue;
        }
        i += "crate::".len();
        if code.get(i).map(|&(_, c)| c) != Some('{') {
            uses.push((code[i.min(code.len() - 1)].0, word(i)));
            continue;
        }
        // A group: the first segment of each item at depth 1.
        let mut depth = 0;
        let mut item_start = true;
        while i < code.len() {
            let (line, c) = code[i];
            match c {
                '{' => {
                    depth += 1;
                    item_start = depth == 1;
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => item_start = true,
                c if item_start && depth == 1 && is_ident(c) => {
                    uses.push((line, word(i)));
                    item_start = false;
                }
                _ => {}
            }
            i += 1;
        }
    }
    uses
}

/// The layer rule's violations in one file of module `from`, as `FILE:LINE: what`.
fn violations_in(label: &str, from: &str, text: &str) -> Vec<String> {
    let mut violations = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if code.contains("bollard") && from != "engine" {
            violations.push(format!("{label}:{}: only `engine` may name bollard", n + 1));
        }
        if code.contains("DockerEngine") && from != "engine" {
            violations.push(format!(
                "{label}:{}: only `engine` may name a backend (`DockerEngine`); ask `engine::connect`",
                n + 1
            ));
        }
    }
    for (line, to) in crate_uses(text) {
        if !allowed(from, &to) {
            violations.push(format!("{label}:{line}: `{from}` must not use `{to}`"));
        }
    }
    violations
}

#[test]
fn modules_respect_the_layer_rule() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    for file in &files {
        let Some(from) = top_module(&src, file) else {
            continue;
        };
        if layer_of(&from).is_none() {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        violations.extend(violations_in(&file.display().to_string(), &from, &text));
    }
    assert!(
        violations.is_empty(),
        "layer rule violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_rule_can_fail() {
    assert!(!allowed("config", "engine"));
    assert!(!allowed("engine", "features"));
    assert!(!allowed("build", "security"));
    assert!(!allowed("cli", "engine"));
    assert!(!allowed("oci", "features"));
    assert!(!allowed("ops", "handoff"));
    assert!(!allowed("security", "ops"));
    assert!(!allowed("cli", "build"));
    assert!(allowed("features", "oci"));
    assert!(allowed("engine", "formats") && allowed("oci", "formats"));
    assert!(!allowed("formats", "oci"));
    assert!(!allowed("egress", "security"));
    assert!(!allowed("engine", "egress"));
    assert!(allowed("egress", "engine"));
    assert!(allowed("ops", "build"));
    assert!(allowed("handoff", "ops"));
    assert!(allowed("cli", "ops"));
    assert!(allowed("cli", "handoff"));
}

#[test]
fn only_the_engine_names_a_backend() {
    let text = "//! an ops file\nlet e = crate::engine::DockerEngine::connect().await?;\n";
    assert_eq!(
        violations_in("src/ops/x.rs", "ops", text),
        vec![
            "src/ops/x.rs:2: only `engine` may name a backend (`DockerEngine`); ask `engine::connect`"
                .to_string()
        ]
    );
    assert!(violations_in("src/engine/connect.rs", "engine", text).is_empty());
}

/// The agent product's concepts (workspace inspection, container git directories, the audit
/// adapter, the JSON envelope) live in `handoff`; `ops` holds the spec's operations.
#[test]
fn the_product_is_not_in_ops() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let misplaced: Vec<&str> = [
        "ops/repository.rs",
        "ops/container_audit.rs",
        "ops/envelope.rs",
        "ops/container_git.rs",
        "ops/git_identity.rs",
    ]
    .into_iter()
    .filter(|f| src.join(f).exists())
    .collect();
    assert!(
        misplaced.is_empty(),
        "product files in `ops`: {misplaced:?}"
    );
    for f in [
        "handoff/repository.rs",
        "handoff/audit.rs",
        "handoff/envelope.rs",
        "handoff/container_git.rs",
        "handoff/git_identity.rs",
    ] {
        assert!(src.join(f).is_file(), "missing `{f}`");
    }
}

#[test]
fn the_parser_reads_paths_and_groups_over_lines() {
    let text = "use crate::config::model;\n\
                use crate::{\n\
                    engine::{Engine, ExecRequest},\n\
                    ops::up, // crate::cli in a comment\n\
                    names,\n\
                };\n\
                let x = crate::security::audit(&$crate::ignored);\n";
    assert_eq!(
        crate_uses(text),
        vec![
            (1, "config".to_string()),
            (3, "engine".to_string()),
            (4, "ops".to_string()),
            (5, "names".to_string()),
            (7, "security".to_string()),
        ]
    );
}

#[test]
fn a_violation_names_its_file_and_line() {
    let text = "//! an engine file\nuse crate::{\n    names,\n    ops::up,\n};\n";
    assert_eq!(
        violations_in("src/engine/x.rs", "engine", text),
        vec!["src/engine/x.rs:4: `engine` must not use `ops`".to_string()]
    );
}

/// A file's module path below `src`: `ops/up.rs` → `[ops, up]`, `security/policy/mod.rs` →
/// `[security, policy]`, `lib.rs` and `main.rs` → `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") || path == ["lib"] || path == ["main"] {
        path.pop();
    }
    path
}

/// The code of `text` as (1-based line, char), line comments removed.
fn code_chars(text: &str) -> Vec<(usize, char)> {
    text.lines()
        .enumerate()
        .flat_map(|(n, line)| {
            let code = line.split("//").next().unwrap_or("");
            code.chars().chain(['\n']).map(move |c| (n + 1, c))
        })
        .collect()
}

/// A path into our crate that a file names: its 1-based line, the absolute path, and, when
/// the path stands in a `use` declaration, the name it binds there and the module that name
/// lives in (the file's module, or the inline `mod x { … }` the declaration stands in).
#[derive(Debug)]
struct Named {
    line: usize,
    path: Vec<String>,
    binds: Option<(Vec<String>, String)>,
}

/// Every path into our crate that `text` names, resolved to an absolute module path, with its
/// 1-based line: `crate::a::b`, `super::b` and `self::b` (relative to `module`, the file's
/// module path, and to the inline `mod x { … }` the path stands in), and each item of a group
/// (`use super::{a, b::{c, d}}`, over any number of lines).
fn crate_paths(text: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    named_paths(text, module)
        .into_iter()
        .map(|named| (named.line, named.path))
        .collect()
}

/// `crate_paths`, plus the relative `use a::b` (a child module, or a name another `use`
/// bound; a path into another crate resolves to no module of ours and is dropped later), and
/// the name each `use` binds (`use a::B` binds `B`, `use a::{self as c}` binds `c`; a glob and
/// `as _` bind nothing we follow). A `use` inside a function counts for its module.
fn named_paths(text: &str, module: &[String]) -> Vec<Named> {
    let code = code_chars(text);
    let chars: Vec<char> = code.iter().map(|&(_, c)| c).collect();
    let word_at = |at: usize| -> String {
        chars[at.min(chars.len())..]
            .iter()
            .take_while(|&&c| is_ident(c))
            .collect()
    };
    let starts_word = |at: usize| at == 0 || !(is_ident(chars[at - 1]) || chars[at - 1] == '$');
    let skip_space = |mut at: usize| {
        while at < chars.len() && chars[at].is_whitespace() {
            at += 1;
        }
        at
    };
    // The word that ends just before `at`, over whitespace: `use` marks a declaration.
    let word_before = |at: usize| -> String {
        let mut end = at;
        while end > 0 && chars[end - 1].is_whitespace() {
            end -= 1;
        }
        let mut start = end;
        while start > 0 && is_ident(chars[start - 1]) {
            start -= 1;
        }
        chars[start..end].iter().collect()
    };
    // Inline modules: (start, end, name) of each `mod name { … }` body.
    let mut inline = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if starts_word(i) && word_at(i) == "mod" {
            let name_at = skip_space(i + 3);
            let name = word_at(name_at);
            let brace = skip_space(name_at + name.len());
            if !name.is_empty() && chars.get(brace) == Some(&'{') {
                let mut depth = 0;
                let mut end = brace;
                while end < chars.len() {
                    match chars[end] {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    end += 1;
                }
                inline.push((brace, end, name));
            }
        }
        i += 1;
    }
    let scope_at = |at: usize| -> Vec<String> {
        let mut scope = module.to_vec();
        scope.extend(
            inline
                .iter()
                .filter(|(start, end, _)| *start < at && at < *end)
                .map(|(_, _, name)| name.clone()),
        );
        scope
    };
    // The items of the use-tree at `at` below `base`: `a::b`, `a::{…}`, `a::*`, `self`, each
    // with the name it binds.
    type Item = (usize, Vec<String>, Option<String>);
    fn tree(chars: &[char], mut at: usize, base: Vec<String>, out: &mut Vec<Item>) -> usize {
        let word_at = |at: usize| -> String {
            chars[at.min(chars.len())..]
                .iter()
                .take_while(|&&c| is_ident(c))
                .collect()
        };
        let skip_space = |mut at: usize| {
            while at < chars.len() && chars[at].is_whitespace() {
                at += 1;
            }
            at
        };
        let mut path = base;
        loop {
            at = skip_space(at);
            if chars.get(at) == Some(&'{') {
                at += 1;
                loop {
                    while at < chars.len() && (chars[at].is_whitespace() || chars[at] == ',') {
                        at += 1;
                    }
                    if at >= chars.len() || chars[at] == '}' {
                        return at + 1;
                    }
                    let next = tree(chars, at, path.clone(), out);
                    at = next.max(at + 1);
                }
            }
            let word = word_at(at);
            if word.is_empty() {
                out.push((at, path, None));
                return at;
            }
            let word_start = at;
            at += word.len();
            if word != "self" {
                path.push(word);
            }
            if chars.get(at) == Some(&':') && chars.get(at + 1) == Some(&':') {
                at += 2;
                continue;
            }
            let mut binds = path.last().cloned();
            let after = skip_space(at);
            if word_at(after) == "as" {
                let alias = word_at(skip_space(after + 2));
                binds = (!alias.is_empty() && alias != "_").then_some(alias);
            }
            out.push((word_start, path, binds));
            // Past an `as name` or anything else up to the item's end.
            while at < chars.len() && !matches!(chars[at], ',' | '}' | ';' | '(' | ')' | '\n') {
                at += 1;
            }
            return at;
        }
    }
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let first = word_at(i);
        let prefix = matches!(first.as_str(), "crate" | "super" | "self")
            && starts_word(i)
            && (i == 0 || chars[i - 1] != ':')
            && chars.get(i + first.len()) == Some(&':')
            && chars.get(i + first.len() + 1) == Some(&':');
        // `use a::b`: relative to the module the declaration stands in.
        let relative = first == "use" && starts_word(i) && {
            let at = skip_space(i + 3);
            let next = word_at(at);
            at > i + 3
                && !next.is_empty()
                && !matches!(next.as_str(), "crate" | "super" | "self")
                && !next.starts_with(|c: char| c.is_ascii_digit())
        };
        if !prefix && !relative {
            i += 1;
            continue;
        }
        let scope = scope_at(i);
        let in_use = relative || word_before(i) == "use";
        let (mut at, mut base) = (i, scope.clone());
        if relative {
            at = skip_space(i + 3);
        } else {
            loop {
                match word_at(at).as_str() {
                    "crate" => base.clear(),
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                let next = at + word_at(at).len();
                if chars.get(next) != Some(&':') || chars.get(next + 1) != Some(&':') {
                    break;
                }
                at = next + 2;
            }
        }
        let mut found = Vec::new();
        let end = tree(&chars, at, base, &mut found);
        paths.extend(found.into_iter().map(|(at, path, binds)| Named {
            line: code[at.min(code.len() - 1)].0,
            path,
            binds: binds.filter(|_| in_use).map(|name| (scope.clone(), name)),
        }));
        i = end.max(i + 1);
    }
    paths
}

/// The modules that `path` lands in, each with the re-export it came through: the module it
/// names, then, while its next segment is a name a `use` binds in that module (`aliases`: the
/// name's path → what it names), the module that name leads to, and so on. So `super::B`,
/// where the parent has `pub use b::B`, lands in the parent and in `b`.
fn lands_in(
    path: &[String],
    modules: &std::collections::BTreeSet<&[String]>,
    aliases: &std::collections::BTreeMap<Vec<String>, Vec<String>>,
) -> Vec<(Vec<String>, Option<String>)> {
    let mut current = path.to_vec();
    let mut through = None;
    let mut out = Vec::new();
    // A bound on the hops: re-exports can name one another in a ring.
    for _ in 0..8 {
        let Some(k) = (0..=current.len())
            .rev()
            .find(|&k| modules.contains(&current[..k]))
        else {
            break;
        };
        out.push((current[..k].to_vec(), through.clone()));
        if k == current.len() {
            break;
        }
        let Some(target) = aliases.get(&current[..=k]) else {
            break;
        };
        through = Some(current[..=k].join("::"));
        let mut next = target.clone();
        next.extend_from_slice(&current[k + 1..]);
        if next == current {
            break;
        }
        current = next;
    }
    out
}

/// The import circles between the files of one module: for each folder, its files and
/// subfolders (a subfolder counts as one, with everything below it) must import one another
/// in one direction only. `files` holds (label, module path, text); each circle is named with
/// the file and line of every import in it.
fn circles(files: &[(String, Vec<String>, String)]) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let modules: BTreeSet<&[String]> = files.iter().map(|(_, m, _)| m.as_slice()).collect();
    // parent module → from child → to child → where.
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    let named: Vec<Vec<Named>> = files
        .iter()
        .map(|(_, module, text)| named_paths(text, module))
        .collect();
    // What each name a `use` binds names: `x::B` → `x::b::B` for `pub use b::B` in `x`.
    let aliases: BTreeMap<Vec<String>, Vec<String>> = named
        .iter()
        .flatten()
        .filter_map(|n| {
            let (scope, name) = n.binds.as_ref()?;
            let mut alias = scope.clone();
            alias.push(name.clone());
            (alias != n.path).then(|| (alias, n.path.clone()))
        })
        .collect();
    for ((label, from, _), named) in files.iter().zip(&named) {
        for Named { line, path, .. } in named {
            for (to, through) in lands_in(path, &modules, &aliases) {
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common < from.len() && common < to.len() {
                    let through = through
                        .map(|t| format!(" through `{t}`"))
                        .unwrap_or_default();
                    edges
                        .entry(from[..common].to_vec())
                        .or_default()
                        .entry(from[common].clone())
                        .or_default()
                        .entry(to[common].clone())
                        .or_insert_with(|| format!("{label}:{line}{through}"));
                }
            }
        }
    }
    let mut found = Vec::new();
    for (parent, graph) in &edges {
        let mut seen: BTreeSet<BTreeSet<String>> = BTreeSet::new();
        // Depth-first from every child; a step back onto the current path closes a circle.
        fn walk(
            node: &str,
            graph: &BTreeMap<String, BTreeMap<String, String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
            out: &mut Vec<Vec<String>>,
        ) {
            path.push(node.to_string());
            for next in graph.get(node).into_iter().flat_map(|m| m.keys()) {
                if let Some(at) = path.iter().position(|p| p == next) {
                    out.push(path[at..].to_vec());
                } else if !done.contains(next) {
                    walk(next, graph, path, done, out);
                }
            }
            path.pop();
            done.insert(node.to_string());
        }
        let mut done = BTreeSet::new();
        let mut cycles = Vec::new();
        for start in graph.keys() {
            if !done.contains(start) {
                walk(start, graph, &mut Vec::new(), &mut done, &mut cycles);
            }
        }
        for cycle in cycles {
            if !seen.insert(cycle.iter().cloned().collect()) {
                continue;
            }
            let steps: Vec<String> = cycle
                .iter()
                .zip(cycle.iter().cycle().skip(1))
                .map(|(a, b)| format!("{a} → {b} ({})", graph[a][b]))
                .collect();
            let folder = if parent.is_empty() {
                "src".to_string()
            } else {
                format!("src/{}", parent.join("/"))
            };
            found.push(format!("{folder}: {}", steps.join(", ")));
        }
    }
    found
}

#[test]
fn the_files_of_a_module_import_one_another_in_one_direction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    let files: Vec<(String, Vec<String>, String)> = paths
        .iter()
        .map(|p| {
            (
                p.display().to_string(),
                module_path(&src, p),
                fs::read_to_string(p).unwrap(),
            )
        })
        .collect();
    let found = circles(&files);
    assert!(
        found.is_empty(),
        "import circles between the files of one module (move what both sides use into a file \
         below them):\n{}",
        found.join("\n")
    );
}

#[test]
fn paths_resolve_through_super_self_groups_and_inline_modules() {
    let module = |m: &str| m.split("::").map(str::to_string).collect::<Vec<_>>();
    let text = "use super::image::{self, PreparedImage};\n\
                use crate::{\n\
                    engine::Engine,\n\
                    ops::{entries::has_features, target as t},\n\
                };\n\
                fn f() { super::super::names::x(); self::inner::g(); } // super::ignored\n\
                mod tests {\n\
                    use super::*;\n\
                    use super::super::users::Account;\n\
                }\n";
    assert_eq!(
        crate_paths(text, &module("ops::attach")),
        vec![
            (1, module("ops::image")),
            (1, module("ops::image::PreparedImage")),
            (3, module("engine::Engine")),
            (4, module("ops::entries::has_features")),
            (4, module("ops::target")),
            (6, module("names::x")),
            (6, module("ops::attach::inner::g")),
            (8, module("ops::attach")),
            (9, module("ops::users::Account")),
        ]
    );
}

#[test]
fn a_circle_is_named_with_its_files_and_lines() {
    let file = |label: &str, module: &str, text: &str| {
        (
            label.to_string(),
            module.split("::").map(str::to_string).collect::<Vec<_>>(),
            text.to_string(),
        )
    };
    let files = vec![
        file("src/x/a.rs", "x::a", "use super::b::B;\n"),
        file(
            "src/x/b.rs",
            "x::b",
            "//! b\nuse crate::x::{\n    c::C,\n};\n",
        ),
        file("src/x/c/mod.rs", "x::c", "mod d;\n"),
        file(
            "src/x/c/d.rs",
            "x::c::d",
            "use crate::x::a::A;\nuse super::super::a;\n",
        ),
        // Parent and child, and children of another folder, are no circle.
        file("src/x/mod.rs", "x", "use self::a::A;\n"),
        file("src/y/mod.rs", "y", "use crate::x::a;\n"),
        file(
            "src/y/e.rs",
            "y::e",
            "use super::f;\n#[cfg(test)]\nmod tests { use super::*; }\n",
        ),
        file("src/y/f.rs", "y::f", "use super::E;\n"),
    ];
    assert_eq!(
        circles(&files),
        vec![
            "src/x: a → b (src/x/a.rs:1), b → c (src/x/b.rs:3), c → a (src/x/c/d.rs:1)".to_string()
        ]
    );
    assert!(circles(&files[..2]).is_empty());
}

/// A circle through a parent's re-exports: `x` re-exports its grandchild `c::d` at the old
/// path `x::d` and `y` re-exports `b::B`; a sibling that imports through the parent imports
/// the child behind it.
#[test]
fn a_circle_through_a_re_export_is_seen() {
    let file = |label: &str, module: &str, text: &str| {
        (
            label.to_string(),
            module.split("::").map(str::to_string).collect::<Vec<_>>(),
            text.to_string(),
        )
    };
    let files = vec![
        file(
            "src/x/mod.rs",
            "x",
            "mod a;\nmod c;\npub use self::c::d;\nuse std::fs;\n",
        ),
        file("src/x/a.rs", "x::a", "//! a\nuse super::d::D;\n"),
        file("src/x/c/mod.rs", "x::c", "pub mod d;\n"),
        file("src/x/c/d.rs", "x::c::d", "use super::super::a::A;\n"),
        file(
            "src/y/mod.rs",
            "y",
            "mod a;\nmod b;\npub(crate) use b::{B as Bee, C};\n",
        ),
        file(
            "src/y/a.rs",
            "y::a",
            "fn f() -> crate::y::Bee { todo!() }\n",
        ),
        file("src/y/b.rs", "y::b", "use crate::y::a;\n"),
        // Through a name bound only in an inline module, or bound to another crate: no circle.
        file(
            "src/z/mod.rs",
            "z",
            "mod a;\nmod b;\nmod tests { use super::b::B; }\nuse serde::B;\n",
        ),
        file("src/z/a.rs", "z::a", "use super::B;\n"),
        file("src/z/b.rs", "z::b", "use super::a::A;\n"),
    ];
    assert_eq!(
        circles(&files),
        vec![
            "src/x: a → c (src/x/a.rs:2 through `x::d`), c → a (src/x/c/d.rs:1)".to_string(),
            "src/y: a → b (src/y/a.rs:1 through `y::Bee`), b → a (src/y/b.rs:1)".to_string(),
        ]
    );
}

/// `rust-version` in Cargo.toml is at least what every locked dependency declares (issue 12,
/// item 12): read from `cargo metadata --locked --offline`, so an install with `--locked` on
/// the stated toolchain does not fail on a dependency. Filtered to the host platform: offline,
/// a fresh machine has only the packages this platform's build downloaded.
#[test]
fn rust_version_covers_the_locked_dependencies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let verbose = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let verbose = String::from_utf8_lossy(&verbose.stdout);
    let host = verbose
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host triple");
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", host])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Padded to major.minor.patch: `1.88` and `1.88.0` are the same version.
    let version = |v: &str| -> Vec<u64> {
        let mut parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
        parts.resize(3, 0);
        parts
    };
    let ours = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "devcell")
        .and_then(|p| p["rust_version"].as_str())
        .expect("devcell states a rust-version")
        .to_owned();
    let needed = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["rust_version"].as_str()?, p["name"].as_str()?)))
        .max_by_key(|(v, _)| version(v))
        .unwrap();
    assert!(
        version(&ours) >= version(needed.0),
        "rust-version {ours} is below {} needed by {}",
        needed.0,
        needed.1
    );
}
