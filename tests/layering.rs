//! Enforces the layer rule: a module never imports a higher layer, and only `engine` names
//! `bollard`. Fails with the offending file and line.

use std::fs;
use std::path::{Path, PathBuf};

/// (module, layer, modules it may use besides lower layers' rules below)
fn layer_of(module: &str) -> Option<u8> {
    Some(match module {
        "config" | "diagnostics" | "formats" | "progress" | "names" | "settings" => 0,
        "oci" | "features" => 1,
        "engine" => 2,
        "build" | "security" | "lifecycle" | "egress" => 3,
        "handoff" => 4,
        "cli" => 5,
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
        // L5 cli: handoff and L0 only.
        (5, t) => t == 4 || t == 0,
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

fn first_segment(path: &str) -> String {
    path.trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
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
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("bollard") && from != "engine" {
                violations.push(format!(
                    "{}:{}: only `engine` may name bollard",
                    file.display(),
                    n + 1
                ));
            }
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                let targets: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                    // `use crate::{a, b::c}`: every first segment in the group (one line).
                    let group = group.split('}').next().unwrap_or("");
                    group.split(',').map(first_segment).collect()
                } else {
                    vec![first_segment(rest)]
                };
                for to in targets {
                    if !allowed(&from, &to) {
                        violations.push(format!(
                            "{}:{}: `{from}` must not use `{to}`",
                            file.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
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
    assert!(allowed("features", "oci"));
    assert!(allowed("handoff", "build"));
    assert!(allowed("engine", "formats") && allowed("oci", "formats"));
    assert!(!allowed("formats", "oci"));
    assert!(!allowed("egress", "security"));
    assert!(!allowed("engine", "egress"));
    assert!(allowed("egress", "engine"));
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
