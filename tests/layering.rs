//! Enforces the layer rule: a module never imports a higher layer, and only `engine` names
//! `bollard`. Fails with the offending file and line.

use std::fs;
use std::path::{Path, PathBuf};

/// The layer of each top-level module (see `src/lib.rs`).
fn layer_of(module: &str) -> Option<u8> {
    Some(match module {
        "config" | "diagnostics" | "formats" | "progress" | "names" | "settings" => 0,
        "oci" | "features" => 1,
        "engine" => 2,
        "build" | "security" | "lifecycle" | "egress" => 3,
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
        // L1: features may use oci, not the reverse.
        (1, 1) => from == "features" && to == "oci",
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
