//! `features info manifest|tags|dependencies|verbose` against the shared local registry,
//! compared with the reference CLI (spec-note 0642): the same stdout byte for byte in text and
//! JSON, and the same exit code, for a published Feature with a `dependsOn`, and for one that
//! is not there. The dependency graph's node ids are the only difference (the reference hashes
//! its internal state; devcell the reference), so they are normalised before comparing.
//!
//! The reference CLI talks plain HTTP only to a registry named `localhost`, so both tools use
//! `localhost:<port>`.

use crate::support::deadline::Bounded as _;
use std::process::Output;

use serde_json::Value;

use crate::support::refcli::reference_cli;
use crate::support::{copy_tree, devcell, fixture, publish, test_registry, unique};

fn localhost_registry() -> Option<String> {
    let reg = test_registry()?;
    let port = reg.rsplit(':').next().unwrap_or("5000");
    Some(format!("localhost:{port}"))
}

/// Mermaid node ids (`<6 hex>[`) replaced by `ID[`.
fn without_node_ids(text: &str) -> String {
    text.lines()
        .map(|line| {
            let mut out = String::new();
            let mut rest = line;
            while let Some(at) = rest.find('[') {
                let (head, tail) = rest.split_at(at);
                let id_start = head.len().saturating_sub(6);
                let id = &head[id_start..];
                if id.len() == 6 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    out.push_str(&head[..id_start]);
                    out.push_str("ID");
                } else {
                    out.push_str(head);
                }
                out.push('[');
                rest = &tail[1..];
            }
            out.push_str(rest);
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn show(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn info_prints_what_the_reference_prints() {
    const TEST: &str = "info_prints_what_the_reference_prints";
    let Some(reg) = localhost_registry() else {
        return;
    };
    let Some(refcli) = reference_cli(TEST) else {
        return;
    };
    let ns = unique("info");
    publish(&fixture("features/collection/src/hello"), &reg, &ns);
    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &fixture("features/collection/src/greeter"),
        &dir.path().join("greeter"),
    );
    let path = dir.path().join("greeter/devcontainer-feature.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["dependsOn"] = serde_json::json!({ format!("{reg}/{ns}/hello:1"): {} });
    std::fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    publish(&dir.path().join("greeter"), &reg, &ns);
    let cache = tempfile::tempdir().unwrap();

    for feature in ["greeter:2", "hello:1", "missing:1"] {
        let feature = format!("{reg}/{ns}/{feature}");
        for mode in ["manifest", "tags", "dependencies", "verbose"] {
            for format in ["text", "json"] {
                let args = [
                    "features",
                    "info",
                    mode,
                    &feature,
                    "--output-format",
                    format,
                ];
                let theirs = refcli.command().args(args).long_output().unwrap();
                let ours = devcell()
                    .args(args)
                    .arg("--cache-dir")
                    .arg(cache.path())
                    .output()
                    .unwrap();
                let what = format!("{mode} {feature} {format}");
                assert_eq!(
                    ours.status.code(),
                    theirs.status.code(),
                    "{what}\nours: {}\ntheirs: {}",
                    show(&ours),
                    show(&theirs)
                );
                let (a, b) = (
                    String::from_utf8_lossy(&ours.stdout),
                    String::from_utf8_lossy(&theirs.stdout),
                );
                assert_eq!(
                    without_node_ids(&a),
                    without_node_ids(&b),
                    "{what}\nours: {}\ntheirs: {}",
                    show(&ours),
                    show(&theirs)
                );
            }
        }
    }
    refcli.assert_stayed_local();
}
