//! `templates apply` and `templates metadata` against the shared local registry
//! (spec-notes 0640, 0641):
//!
//! - a Template collection published by the reference CLI's `templates publish` is applied by
//!   both tools with the same options, Features and `--omit-paths`: the same `{"files": …}`,
//!   the same files with the same bytes (the devcontainer.json the same JSON: the reference
//!   reformats it when it adds Features, devcell keeps the author's layout), the same
//!   metadata; then again from the cache with `--offline`;
//! - a Template carrying a link, or a `../` path, pushed from the test, writes nothing at all.
//!
//! The reference CLI talks plain HTTP only to a registry named `localhost`, so both tools use
//! `localhost:<port>`.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::refcli::reference_cli;
use crate::support::{devcell, test_registry, unique};

/// The shared registry addressed as `localhost:<port>`.
fn localhost_registry() -> Option<String> {
    let reg = test_registry()?;
    let port = reg.rsplit(':').next().unwrap_or("5000");
    Some(format!("localhost:{port}"))
}

const TEMPLATE_JSON: &str = r#"{ "id": "hello", "version": "1.2.0", "name": "Hello",
  "description": "a test Template",
  "options": {
    "imageVariant": { "type": "string", "proposals": ["bookworm", "bullseye"], "default": "bookworm", "description": "variant" },
    "flag": { "type": "boolean", "default": true, "description": "a flag" },
    "strict": { "type": "string", "enum": ["a", "b"], "default": "a", "description": "one of two" }
  },
  "platforms": ["Any"] }"#;

const CONFIG: &str = "{\n\t// the author's comment\n\t\"name\": \"Hello ${templateOption:imageVariant}\",\n\t\"image\": \"debian:${templateOption:imageVariant}\",\n\t\"remoteEnv\": { \"FLAG\": \"${templateOption:flag}\", \"S\": \"${templateOption:strict}\", \"U\": \"${templateOption:undeclared}\" }\n}\n";

/// A Template collection (`src/hello`) in a fresh folder.
fn collection() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("src/hello");
    for (rel, text) in [
        ("devcontainer-template.json", TEMPLATE_JSON),
        (".devcontainer/devcontainer.json", CONFIG),
        ("README.md", "# Hello ${templateOption:imageVariant}\n"),
        ("NOTES.md", "notes\n"),
        (".github/workflows/ci.yml", "on: push\n"),
        (
            "scripts/setup.sh",
            "#!/bin/sh\necho ${templateOption:strict} ${templateOption: imageVariant }\n",
        ),
        ("keep.txt", "keep ${templateOption:flag}\n"),
        ("drop.txt", "dropped\n"),
    ] {
        let path = t.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    dir
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_owned());
            }
        }
    }
    out.sort();
    out
}

fn stdout_json(out: &Output, who: &str) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
        panic!(
            "{who}: stdout is not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn apply_writes_the_reference_clis_files_and_metadata() {
    const TEST: &str = "apply_writes_the_reference_clis_files_and_metadata";
    let Some(reg) = localhost_registry() else {
        return;
    };
    let Some(refcli) = reference_cli(TEST) else {
        return;
    };
    let ns = unique("templates");
    let src = collection();
    let published = refcli
        .command()
        .args(["templates", "publish", "-r", &reg, "-n", &ns])
        .arg(src.path().join("src"))
        .long_output()
        .unwrap();
    assert!(
        published.status.success(),
        "{}",
        String::from_utf8_lossy(&published.stderr)
    );
    let id = format!("{reg}/{ns}/hello:1");
    let args = [
        "--template-id",
        id.as_str(),
        "--template-args",
        r#"{"imageVariant":"bullseye","strict":"b"}"#,
        "--features",
        r#"[{"id":"ghcr.io/devcontainers/features/git:1","options":{"version":"latest"}},{"id":"ghcr.io/devcontainers/features/node:1"}]"#,
        "--omit-paths",
        r#"[".github/*","drop.txt"]"#,
    ];
    let ws_ref = tempfile::tempdir().unwrap();
    let ws_dev = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let by_ref = refcli
        .command()
        .args(["templates", "apply", "--workspace-folder"])
        .arg(ws_ref.path())
        .args(args)
        .long_output()
        .unwrap();
    let by_dev = devcell()
        .args(["templates", "apply", "--workspace-folder"])
        .arg(ws_dev.path())
        .args(args)
        .arg("--cache-dir")
        .arg(cache.path())
        .output()
        .unwrap();
    assert!(by_ref.status.success() && by_dev.status.success());
    let listed = stdout_json(&by_dev, "devcell");
    assert_eq!(listed, stdout_json(&by_ref, "reference"));
    assert_eq!(
        files(ws_dev.path()),
        files(ws_ref.path()),
        "{listed} (devcell) against the reference"
    );
    assert_eq!(
        files(ws_dev.path()),
        [
            ".devcontainer/devcontainer.json",
            "keep.txt",
            "scripts/setup.sh"
        ]
        .map(PathBuf::from)
    );
    for rel in files(ws_ref.path()) {
        let (a, b) = (
            std::fs::read_to_string(ws_dev.path().join(&rel)).unwrap(),
            std::fs::read_to_string(ws_ref.path().join(&rel)).unwrap(),
        );
        if rel.ends_with("devcontainer.json") {
            let parse =
                |t: &str| -> Value { devcell::config::jsonc::parse(&rel, t).unwrap().value };
            assert_eq!(parse(&a), parse(&b), "{a}\n---\n{b}");
            assert!(a.contains("// the author's comment"), "{a}");
        } else {
            assert_eq!(a, b, "{}", rel.display());
        }
    }
    let config = devcell::config::jsonc::parse(
        Path::new("c"),
        &std::fs::read_to_string(ws_dev.path().join(".devcontainer/devcontainer.json")).unwrap(),
    )
    .unwrap()
    .value;
    assert_eq!(config["image"], "debian:bullseye");
    assert_eq!(
        config["remoteEnv"],
        serde_json::json!({"FLAG": "true", "S": "b", "U": ""})
    );

    // Metadata: the same JSON.
    let meta_ref = refcli
        .command()
        .args(["templates", "metadata", &id])
        .long_output()
        .unwrap();
    let meta_dev = devcell()
        .args(["templates", "metadata", &id, "--cache-dir"])
        .arg(cache.path())
        .output()
        .unwrap();
    assert_eq!(
        stdout_json(&meta_dev, "devcell"),
        stdout_json(&meta_ref, "reference")
    );

    // Again, from the cache only.
    let ws_offline = tempfile::tempdir().unwrap();
    let offline = devcell()
        .args(["templates", "apply", "--offline", "--workspace-folder"])
        .arg(ws_offline.path())
        .args(args)
        .arg("--cache-dir")
        .arg(cache.path())
        .output()
        .unwrap();
    assert_eq!(stdout_json(&offline, "devcell --offline"), listed);
    assert_eq!(files(ws_offline.path()), files(ws_dev.path()));
    refcli.assert_stayed_local();
}

/// Pushes a Template artifact whose archive is `archive` to `reference`.
fn push_template(reference: &str, archive: Vec<u8>) {
    use devcell::oci::registry::{Registry, RegistryOptions, parse_reference};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let r = Registry::new(RegistryOptions::default()).unwrap();
        let base = parse_reference(reference).unwrap();
        r.push_blob(&base, bytes::Bytes::from_static(b"{}"))
            .await
            .unwrap();
        let size = archive.len();
        let layer = r.push_blob(&base, archive.into()).await.unwrap();
        let manifest = devcell::features::publish::artifact_manifest(
            "application/vnd.devcontainers.layer.v1+tar",
            &layer,
            size,
            "devcontainer-template-evil.tgz",
            &Default::default(),
        );
        r.push_manifest(
            &base,
            manifest,
            "application/vnd.oci.image.manifest.v1+json",
        )
        .await
        .unwrap();
    });
}

/// A tar with `a.txt`, then `evil` (a symlink to `link_to`, or a file named `../escaped.txt`
/// when `link_to` is `None`), then `z.txt`.
fn hostile_archive(link_to: Option<&Path>) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let file = |b: &mut tar::Builder<Vec<u8>>, name: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        h.set_cksum();
        b.append(&h, &b"x"[..]).unwrap();
    };
    file(&mut b, b"./a.txt");
    match link_to {
        Some(target) => {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            h.set_mode(0o777);
            b.append_link(&mut h, "./.devcontainer", target).unwrap();
            file(&mut b, b"./.devcontainer/devcontainer.json");
        }
        None => file(&mut b, b"../escaped.txt"),
    }
    file(&mut b, b"./z.txt");
    b.into_inner().unwrap()
}

#[test]
fn a_template_with_a_link_or_a_dot_dot_path_writes_nothing() {
    let Some(reg) = test_registry() else {
        return;
    };
    let ns = unique("evil-templates");
    let parent = tempfile::tempdir().unwrap();
    let outside = parent.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    for (name, link) in [("link", Some(outside.as_path())), ("dotdot", None)] {
        let id = format!("{reg}/{ns}/{name}:1");
        push_template(&id, hostile_archive(link));
        let ws = parent.path().join(format!("ws-{name}"));
        std::fs::create_dir(&ws).unwrap();
        let out = devcell()
            .args([
                "templates",
                "apply",
                "--template-id",
                &id,
                "--workspace-folder",
            ])
            .arg(&ws)
            .arg("--cache-dir")
            .arg(parent.path().join("cache"))
            .arg("--tmp-dir")
            .arg(parent.path().join("tmp"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: {stderr}");
        assert!(stderr.contains("refusing"), "{name}: {stderr}");
        assert!(files(&ws).is_empty(), "{name}: {:?}", files(&ws));
        assert!(
            std::fs::read_dir(&ws).unwrap().next().is_none(),
            "{name}: nothing at all in the workspace"
        );
    }
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
    assert!(!parent.path().join("escaped.txt").exists());
    // The staging folders are gone.
    assert!(files(&parent.path().join("tmp")).is_empty());
}

/// Bad flags are refused before any request (the registry named does not exist), and an
/// offline cache miss says how to fill the cache. Needs no registry.
#[test]
fn bad_flags_and_an_offline_miss_are_clear_errors() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let apply = |extra: &[&str]| {
        devcell()
            .args([
                "templates",
                "apply",
                "--template-id",
                "127.0.0.1:9/none/t:1",
            ])
            .arg("--workspace-folder")
            .arg(ws.path())
            .arg("--cache-dir")
            .arg(cache.path())
            .args(extra)
            .output()
            .unwrap()
    };
    for (extra, expected) in [
        (
            ["--template-args", r#"{"flag":true}"#],
            "invalid `--template-args`: option `flag`: expected a string value, got a boolean",
        ),
        (
            ["--features", r#"{"id":"x"}"#],
            "invalid `--features`: expected a JSON array, got an object",
        ),
        (
            ["--omit-paths", "[1]"],
            "invalid `--omit-paths`: expected strings, got a number",
        ),
        (
            ["--offline", "--omit-paths=[]"],
            "run once without `--offline` to fill the cache",
        ),
    ] {
        let out = apply(&extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert!(
            !stderr.contains("127.0.0.1:9/v2") && !stderr.contains("pulling"),
            "{extra:?}: no request: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{extra:?}");
    }
    assert!(std::fs::read_dir(ws.path()).unwrap().next().is_none());
}

/// The manifest of `reference`, its `dev.containers.metadata` annotation (when any), and its
/// single layer's bytes.
fn pull_artifact(reference: &str) -> (Option<Value>, Vec<u8>) {
    use devcell::oci::registry::{Registry, RegistryOptions, parse_reference};
    use oci_client::manifest::OciManifest;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let r = Registry::new(RegistryOptions::default()).unwrap();
        let reference = parse_reference(reference).unwrap();
        let pulled = r.pull_manifest(&reference).await.unwrap();
        let OciManifest::Image(m) = pulled.manifest else {
            panic!("not an image manifest")
        };
        let meta = m
            .annotations
            .as_ref()
            .and_then(|a| a.get("dev.containers.metadata"))
            .map(|s| serde_json::from_str(s).unwrap());
        let layer = r.pull_blob(&reference, &m.layers[0]).await.unwrap();
        (meta, layer.to_vec())
    })
}

/// `(path without ./, bytes)` of each file of a tar, sorted.
fn tar_files(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut tar = tar::Archive::new(archive);
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        if !e.header().entry_type().is_file() {
            continue;
        }
        let path = e.path().unwrap().display().to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
        out.push((path.trim_start_matches("./").to_owned(), bytes));
    }
    out.sort();
    out
}

/// Metadata with `files` sorted (the reference lists them in directory-read order).
fn files_sorted(mut m: Value) -> Value {
    if let Some(files) = m.get_mut("files").and_then(Value::as_array_mut) {
        files.sort_by_key(|f| f.to_string());
    }
    m
}

/// `templates publish` (spec-note 0643): the same collection published by devcell and by the
/// reference CLI gives the same JSON (but digests), the same tags, the same completed metadata
/// (`type`, `files`, `fileCount`, `featureIds`, a narrowed `optionalPaths`), the same files in
/// the archive and the same collection; the reference applies what devcell published and
/// devcell reads what the reference published; publishing again pushes nothing (`{}`).
#[test]
fn publish_matches_the_reference_cli_and_each_applies_the_others() {
    const TEST: &str = "publish_matches_the_reference_cli_and_each_applies_the_others";
    let Some(reg) = localhost_registry() else {
        return;
    };
    let Some(refcli) = reference_cli(TEST) else {
        return;
    };
    let src = collection();
    let compose = src.path().join("src/compose");
    for (rel, text) in [
        (
            "devcontainer-template.json",
            r#"{"id":"compose","version":"0.3.1","name":"Compose","optionalPaths":[".github/*"]}"#,
        ),
        (
            ".devcontainer.json",
            r#"{"dockerComposeFile":"c.yml","service":"app","features":{"ghcr.io/devcontainers/features/git:1":{},"./local":{}}}"#,
        ),
        (".github/dependabot.yml", "version: 2\n"),
    ] {
        let path = compose.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    let (ns_ref, ns_dev) = (unique("tpub-ref"), unique("tpub-dev"));
    let publish_ref = || {
        refcli
            .command()
            .args(["templates", "publish", "-r", &reg, "-n", &ns_ref])
            .arg(src.path().join("src"))
            .long_output()
            .unwrap()
    };
    let publish_dev = || {
        devcell()
            .args(["templates", "publish", "-r", &reg, "-n", &ns_dev])
            .arg(src.path().join("src"))
            .output()
            .unwrap()
    };
    let (by_ref, by_dev) = (publish_ref(), publish_dev());
    assert!(
        by_dev.status.success(),
        "{}",
        String::from_utf8_lossy(&by_dev.stderr)
    );
    let (out_ref, out_dev) = (
        stdout_json(&by_ref, "reference"),
        stdout_json(&by_dev, "devcell"),
    );
    let without_digests = |mut v: Value| {
        for entry in v.as_object_mut().unwrap().values_mut() {
            entry.as_object_mut().unwrap().remove("digest");
        }
        v
    };
    assert_eq!(without_digests(out_dev.clone()), without_digests(out_ref));
    assert_eq!(
        out_dev["hello"]["publishedTags"],
        serde_json::json!(["1", "1.2", "1.2.0", "latest"])
    );

    for id in ["hello", "compose"] {
        let (meta_ref, layer_ref) = pull_artifact(&format!("{reg}/{ns_ref}/{id}:latest"));
        let (meta_dev, layer_dev) = pull_artifact(&format!("{reg}/{ns_dev}/{id}:latest"));
        let meta_dev = files_sorted(meta_dev.expect("devcell's metadata annotation"));
        assert_eq!(meta_dev, files_sorted(meta_ref.unwrap()), "{id}");
        let (files_ref, files_dev) = (tar_files(&layer_ref), tar_files(&layer_dev));
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&files_dev), names(&files_ref), "{id}");
        for ((name, a), (_, b)) in files_dev.iter().zip(&files_ref) {
            if name == "devcontainer-template.json" {
                let parse = |b: &[u8]| files_sorted(serde_json::from_slice(b).unwrap());
                assert_eq!(parse(a), parse(b), "{id}");
                assert_eq!(
                    parse(a),
                    meta_dev,
                    "{id}: the archive holds the completed file"
                );
            } else {
                assert_eq!(a, b, "{id}/{name}");
            }
        }
    }
    let compose_meta = pull_artifact(&format!("{reg}/{ns_dev}/compose:0"))
        .0
        .unwrap();
    assert_eq!(compose_meta["type"], "dockerCompose");
    assert_eq!(
        compose_meta["featureIds"],
        serde_json::json!(["ghcr.io/devcontainers/features/git"])
    );
    assert_eq!(
        compose_meta["optionalPaths"],
        serde_json::json!([".github/dependabot.yml"])
    );
    let (coll_ref, coll_dev) = (
        pull_artifact(&format!("{reg}/{ns_ref}:latest")).1,
        pull_artifact(&format!("{reg}/{ns_dev}:latest")).1,
    );
    let templates = |bytes: &[u8]| -> Vec<Value> {
        let v: Value = serde_json::from_slice(bytes).unwrap();
        v["templates"]
            .as_array()
            .unwrap()
            .iter()
            .cloned()
            .map(files_sorted)
            .collect()
    };
    assert_eq!(templates(&coll_dev), templates(&coll_ref));

    // Each tool applies and reads what the other published.
    let args = [
        "--template-args",
        r#"{"imageVariant":"bullseye"}"#,
        "--omit-paths",
        r#"[".github/*"]"#,
    ];
    let (ws_a, ws_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let applied_by_ref = refcli
        .command()
        .args([
            "templates",
            "apply",
            "--template-id",
            &format!("{reg}/{ns_dev}/hello:1"),
        ])
        .arg("--workspace-folder")
        .arg(ws_a.path())
        .args(args)
        .long_output()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let applied_by_dev = devcell()
        .args([
            "templates",
            "apply",
            "--template-id",
            &format!("{reg}/{ns_ref}/hello:1"),
        ])
        .arg("--workspace-folder")
        .arg(ws_b.path())
        .args(args)
        .arg("--cache-dir")
        .arg(cache.path())
        .output()
        .unwrap();
    assert!(
        applied_by_ref.status.success(),
        "{}",
        String::from_utf8_lossy(&applied_by_ref.stderr)
    );
    assert!(
        applied_by_dev.status.success(),
        "{}",
        String::from_utf8_lossy(&applied_by_dev.stderr)
    );
    assert_eq!(
        stdout_json(&applied_by_ref, "reference"),
        stdout_json(&applied_by_dev, "devcell")
    );
    assert_eq!(files(ws_a.path()), files(ws_b.path()));
    for rel in files(ws_a.path()) {
        assert_eq!(
            std::fs::read(ws_a.path().join(&rel)).unwrap(),
            std::fs::read(ws_b.path().join(&rel)).unwrap(),
            "{}",
            rel.display()
        );
    }
    let meta_of = |ns: &str| {
        let out = refcli
            .command()
            .args(["templates", "metadata", &format!("{reg}/{ns}/compose:0.3")])
            .long_output()
            .unwrap();
        files_sorted(stdout_json(&out, "reference metadata"))
    };
    assert_eq!(meta_of(&ns_dev), meta_of(&ns_ref));

    // Publishing the same versions again pushes nothing, as with the reference.
    let (again_ref, again_dev) = (publish_ref(), publish_dev());
    assert_eq!(
        stdout_json(&again_dev, "devcell"),
        stdout_json(&again_ref, "reference")
    );
    assert_eq!(
        stdout_json(&again_dev, "devcell"),
        serde_json::json!({"hello": {}, "compose": {}})
    );
    refcli.assert_stayed_local();
}

/// `templates generate-docs` and `features generate-docs` (spec-note 0644) write the same
/// `README.md` as the reference CLI, byte for byte, for a collection with options, notes, a
/// deprecated Feature with legacy ids and extensions, and an item without metadata (skipped);
/// a `README.md` that is a link to a host file is refused, never written through.
#[test]
fn generate_docs_writes_the_reference_clis_pages() {
    const TEST: &str = "generate_docs_writes_the_reference_clis_pages";
    let Some(refcli) = reference_cli(TEST) else {
        return;
    };
    let write = |root: &Path, rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let make = || {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("templates/src");
        write(&t, "hello/devcontainer-template.json", TEMPLATE_JSON);
        write(&t, "hello/NOTES.md", "## Notes\n\nsome notes\n");
        write(
            &t,
            "bare/devcontainer-template.json",
            r#"{"id":"bare","version":"1.0.0"}"#,
        );
        write(&t, "empty/readme.txt", "no metadata\n");
        let f = dir.path().join("features/src");
        write(
            &f,
            "old/devcontainer-feature.json",
            r#"{"id":"old","version":"2.3.4","name":"Old one","description":"An old Feature",
                "deprecated":true,"legacyIds":["older","oldest"],
                "options":{"v":{"type":"string","default":"","description":"empty default"},
                           "list":{"type":"string","enum":["a","b"],"default":"a"}},
                "customizations":{"vscode":{"extensions":["ms.one","ms.two"]}}}"#,
        );
        write(&f, "plain/devcontainer-feature.json", r#"{"id":"plain"}"#);
        write(&f, "plain/NOTES.md", "plain notes\n");
        dir
    };
    let (by_ref, by_dev) = (make(), make());
    let run_both = |kind: &str, folder: &str, extra: &[&str]| {
        let r = refcli
            .command()
            .current_dir(by_ref.path())
            .args([
                kind,
                "generate-docs",
                "-p",
                folder,
                "--github-owner",
                "own",
                "--github-repo",
                "rep",
            ])
            .args(extra)
            .long_output()
            .unwrap();
        let d = devcell()
            .current_dir(by_dev.path())
            .args([
                kind,
                "generate-docs",
                "-p",
                folder,
                "--github-owner",
                "own",
                "--github-repo",
                "rep",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(
            d.status.code(),
            r.status.code(),
            "{}",
            String::from_utf8_lossy(&d.stderr)
        );
        assert!(
            d.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&d.stdout)
        );
        String::from_utf8_lossy(&d.stderr).into_owned()
    };
    let stderr = run_both("templates", "templates/src", &[]);
    assert!(
        stderr.contains("empty"),
        "the folder without metadata is named: {stderr}"
    );
    run_both(
        "features",
        "./features/src",
        &["-n", "own/rep", "-r", "registry.example"],
    );
    assert_eq!(files(by_dev.path()), files(by_ref.path()));
    for rel in files(by_ref.path()) {
        let (a, b) = (
            std::fs::read_to_string(by_dev.path().join(&rel)).unwrap(),
            std::fs::read_to_string(by_ref.path().join(&rel)).unwrap(),
        );
        assert_eq!(a, b, "{}", rel.display());
    }
    assert!(by_dev.path().join("features/src/old/README.md").is_file());
    assert!(!by_dev.path().join("templates/src/empty/README.md").exists());

    // A README.md linked to a host file: refused, named, the host file untouched.
    let host = tempfile::tempdir().unwrap();
    let secret = host.path().join("secret.txt");
    std::fs::write(&secret, "host secret\n").unwrap();
    let readme = by_dev.path().join("templates/src/hello/README.md");
    std::fs::remove_file(&readme).unwrap();
    std::os::unix::fs::symlink(&secret, &readme).unwrap();
    let out = devcell()
        .current_dir(by_dev.path())
        .args(["templates", "generate-docs", "-p", "templates/src"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("hello/README.md") && stderr.contains("symbolic link"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "host secret\n");
    assert!(
        std::fs::symlink_metadata(&readme)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    refcli.assert_stayed_local();
}
