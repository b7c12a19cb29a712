use super::*;

/// A tar of `(name, kind, data)`: kind `f` file, `l` symlink to `data`.
fn tar_of(entries: &[(&str, char, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data) in entries {
        let mut h = tar::Header::new_gnu();
        match kind {
            'l' => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                h.set_mode(0o777);
                b.append_link(&mut h, name, data).unwrap();
            }
            _ => {
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                h.set_cksum();
                b.append_data(&mut h, name, data.as_bytes()).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

fn values() -> OptionValues {
    [("variant".to_owned(), "bullseye".to_owned())]
        .into_iter()
        .collect()
}

fn run(archive: &[u8], ws: &Path, features: &[FeatureToAdd], omit: &[String]) -> Result<Applied> {
    let tmp = tempfile::tempdir().unwrap();
    let values = values();
    apply(&ApplyRequest {
        template: "t",
        archive,
        workspace_folder: ws,
        values: &values,
        features,
        omit_paths: omit,
        tmp_dir: Some(tmp.path()),
    })
}

/// Every path under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

const CONFIG: &str = "{\n\t// kept\n\t\"image\": \"base:${templateOption:variant}\"\n}\n";

#[test]
fn files_are_substituted_omitted_and_features_added_with_comments_kept() {
    let archive = tar_of(&[
        ("./devcontainer-template.json", 'f', "{}"),
        ("./README.md", 'f', "r"),
        ("./NOTES.md", 'f', "n"),
        ("./.devcontainer/devcontainer.json", 'f', CONFIG),
        ("./.github/ci.yml", 'f', "ci ${templateOption:variant}"),
        ("./src/a.txt", 'f', "a ${templateOption:none}."),
        ("./src/b.txt", 'f', "b"),
    ]);
    let ws = tempfile::tempdir().unwrap();
    let features = [FeatureToAdd {
        id: "ghcr.io/x/y:1".into(),
        options: serde_json::json!({"v": "1"}),
    }];
    let applied = run(
        &archive,
        ws.path(),
        &features,
        &[".github/*".into(), "src/b.txt".into()],
    )
    .unwrap();
    assert_eq!(
        applied.files,
        ["./.devcontainer/devcontainer.json", "./src/a.txt"]
    );
    assert!(applied.warnings.is_empty(), "{:?}", applied.warnings);
    assert_eq!(
        tree(ws.path()),
        [
            ".devcontainer",
            ".devcontainer/devcontainer.json",
            "src",
            "src/a.txt"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/a.txt")).unwrap(),
        "a ."
    );
    let config =
        std::fs::read_to_string(ws.path().join(".devcontainer/devcontainer.json")).unwrap();
    assert!(config.contains("// kept"), "{config}");
    let parsed = crate::config::jsonc::parse(Path::new("c"), &config)
        .unwrap()
        .value;
    assert_eq!(parsed["image"], "base:bullseye");
    assert_eq!(parsed["features"]["ghcr.io/x/y:1"]["v"], "1");
}

#[test]
fn a_link_in_the_template_writes_nothing() {
    let outside = tempfile::tempdir().unwrap();
    for target in [outside.path().to_str().unwrap(), "inside.txt"] {
        let archive = tar_of(&[
            ("./a.txt", 'f', "a"),
            ("./link", 'l', target),
            ("./z.txt", 'f', "z"),
        ]);
        let ws = tempfile::tempdir().unwrap();
        let e = run(&archive, ws.path(), &[], &[]).unwrap_err();
        assert!(
            matches!(
                &e,
                TemplateError::Unsafe { .. } | TemplateError::Extract { .. }
            ),
            "{e}"
        );
        assert!(tree(ws.path()).is_empty(), "{:?}", tree(ws.path()));
    }
    assert!(tree(outside.path()).is_empty());
}

#[test]
fn a_dot_dot_path_in_the_template_writes_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let ws = parent.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(1);
    h.set_mode(0o644);
    // `append_data` refuses `..`; write the name into the header directly.
    h.as_gnu_mut().unwrap().name[..11].copy_from_slice(b"../evil.txt");
    h.set_cksum();
    b.append(&h, &b"x"[..]).unwrap();
    let archive = b.into_inner().unwrap();
    let e = run(&archive, &ws, &[], &[]).unwrap_err();
    assert!(matches!(e, TemplateError::Extract { .. }), "{e}");
    assert_eq!(tree(parent.path()), ["ws"]);
    // A workspace folder that did not exist is not created for a refused Template.
    let absent = parent.path().join("absent");
    run(&tar_of(&[("./l", 'l', "x")]), &absent, &[], &[]).unwrap_err();
    assert!(!absent.exists());
    // It is for an accepted one.
    run(&tar_of(&[("./a.txt", 'f', "a")]), &absent, &[], &[]).unwrap();
    assert_eq!(tree(&absent), ["a.txt"]);
}

#[test]
fn a_link_in_the_workspace_is_not_written_through() {
    let outside = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join(".devcontainer")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("f"), ws.path().join("file.txt")).unwrap();
    for (name, bad) in [
        ("./.devcontainer/devcontainer.json", ".devcontainer"),
        ("./file.txt", "file.txt"),
    ] {
        let archive = tar_of(&[("./first.txt", 'f', "1"), (name, 'f', CONFIG)]);
        let e = run(&archive, ws.path(), &[], &[]).unwrap_err();
        assert!(
            matches!(&e, TemplateError::Unsafe { path, .. } if path == bad),
            "{e}"
        );
    }
    assert!(tree(outside.path()).is_empty());
    assert!(!ws.path().join("first.txt").exists(), "nothing is written");
}

#[test]
fn an_existing_file_is_overwritten_and_named() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "old").unwrap();
    let applied = run(&tar_of(&[("a.txt", 'f', "new")]), ws.path(), &[], &[]).unwrap();
    assert_eq!(applied.files, ["./a.txt"]);
    assert!(applied.warnings[0].message.contains("`a.txt`"));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "new"
    );
}

#[test]
fn features_and_omit_paths_flags_are_checked() {
    assert_eq!(
        parse_features(r#"[{"id":"a"},{"id":"b","options":{"x":1}}]"#).unwrap()[0].options,
        serde_json::json!({})
    );
    for bad in [
        r#"{"id":"a"}"#,
        r#"[{"options":{}}]"#,
        r#"[{"id":"a","options":1}]"#,
    ] {
        assert!(parse_features(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_omit_paths(r#"["a/*"]"#).unwrap(), ["a/*"]);
    assert!(parse_omit_paths("[1]").is_err());
    assert!(omitted("a/b/c", &["./a/*".into()]));
    assert!(!omitted("ab/c", &["a/*".into()]));
    assert!(omitted("README.md", &[]));
    assert!(!omitted("docs/README.md", &[]));
}

#[test]
fn a_file_inside_the_workspaces_git_folder_refuses_the_template() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    for (name, bad) in [
        ("./.git/config", ".git/config"),
        ("./.git/hooks/pre-commit", ".git/hooks/pre-commit"),
        ("./sub/.GIT/config", "sub/.GIT/config"),
        ("./.git./config", ".git./config"),
    ] {
        let archive = tar_of(&[
            ("./first.txt", 'f', "1"),
            (name, 'f', "[core]\nfsmonitor = x\n"),
        ]);
        let e = run(&archive, ws.path(), &[], &[]).unwrap_err();
        assert!(
            matches!(&e, TemplateError::Unsafe { path, .. } if path == bad),
            "{name}: {e}"
        );
        // Nothing was written: not the first file, and the git configuration is unchanged.
        assert!(!ws.path().join("first.txt").exists(), "{name}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join(".git/config")).unwrap(),
            "[core]\n"
        );
    }
    // A name that only starts with `.git` is an ordinary file.
    run(
        &tar_of(&[("./.gitignore", 'f', "target\n")]),
        ws.path(),
        &[],
        &[],
    )
    .unwrap();
    assert!(ws.path().join(".gitignore").is_file());
}

/// `--features` go to the configuration `up` uses, never through a link: a workspace whose
/// `.devcontainer/devcontainer.json` is a link to a host file outside it refuses the Template
/// before anything is written, and the outside file is unchanged (before, the first file
/// named `*devcontainer.json` was rewritten with `fs::write`, which follows links).
#[test]
fn features_never_go_through_a_link_to_a_file_outside_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    let host_file = outside.path().join("host.json");
    std::fs::write(&host_file, "{\"host\": true}\n").unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    std::os::unix::fs::symlink(
        &host_file,
        ws.path().join(".devcontainer/devcontainer.json"),
    )
    .unwrap();
    let features = [FeatureToAdd {
        id: "ghcr.io/x/y:1".into(),
        options: serde_json::json!({}),
    }];
    let archive = tar_of(&[("./.devcontainer.json", 'f', CONFIG), ("./a.txt", 'f', "a")]);
    let e = run(&archive, ws.path(), &features, &[]).unwrap_err();
    assert!(
        matches!(&e, TemplateError::Unsafe { path, reason, .. }
            if path == ".devcontainer/devcontainer.json" && reason.contains("symbolic link")),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&host_file).unwrap(),
        "{\"host\": true}\n"
    );
    assert!(!ws.path().join("a.txt").exists(), "nothing is written");
    assert!(!ws.path().join(".devcontainer.json").exists());

    // A link to a folder on the way is refused the same way.
    let ws = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join(".devcontainer")).unwrap();
    std::fs::write(outside.path().join("devcontainer.json"), "{}").unwrap();
    let e = run(&archive, ws.path(), &features, &[]).unwrap_err();
    assert!(
        matches!(&e, TemplateError::Unsafe { path, .. } if path == ".devcontainer"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("devcontainer.json")).unwrap(),
        "{}"
    );
}

/// The Features go to the file `up` would pick, not the first one named `*devcontainer.json`
/// in archive order, and it is written anew (renamed into place): a hard link to it from
/// outside the workspace keeps its old content.
#[test]
fn features_go_to_the_configuration_up_uses_written_as_a_new_file() {
    let features = [FeatureToAdd {
        id: "ghcr.io/x/y:1".into(),
        options: serde_json::json!({"v": "2"}),
    }];
    let archive = tar_of(&[
        ("./docs/devcontainer.json", 'f', "{}"),
        ("./.devcontainer/devcontainer.json", 'f', CONFIG),
    ]);
    let ws = tempfile::tempdir().unwrap();
    run(&archive, ws.path(), &features, &[]).unwrap();
    let docs = std::fs::read_to_string(ws.path().join("docs/devcontainer.json")).unwrap();
    assert_eq!(docs, "{}");
    let config =
        std::fs::read_to_string(ws.path().join(".devcontainer/devcontainer.json")).unwrap();
    assert!(
        config.contains("ghcr.io/x/y:1") && config.contains("// kept"),
        "{config}"
    );

    // The workspace's own `.devcontainer/devcontainer.json` wins over the Template's
    // `.devcontainer.json`, as in `up`; a hard link to it elsewhere is not written through.
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".devcontainer")).unwrap();
    let own = ws.path().join(".devcontainer/devcontainer.json");
    std::fs::write(&own, "{\"image\": \"own\"}").unwrap();
    std::fs::hard_link(&own, outside.path().join("linked.json")).unwrap();
    let archive = tar_of(&[("./.devcontainer.json", 'f', CONFIG)]);
    run(&archive, ws.path(), &features, &[]).unwrap();
    let own = std::fs::read_to_string(&own).unwrap();
    assert!(
        own.contains("ghcr.io/x/y:1") && own.contains("own"),
        "{own}"
    );
    assert!(
        !std::fs::read_to_string(ws.path().join(".devcontainer.json"))
            .unwrap()
            .contains("ghcr.io/x/y:1")
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("linked.json")).unwrap(),
        "{\"image\": \"own\"}"
    );

    // A Template with only one `.devcontainer/<name>/devcontainer.json` gets them there.
    let ws = tempfile::tempdir().unwrap();
    let archive = tar_of(&[("./.devcontainer/py/devcontainer.json", 'f', CONFIG)]);
    let applied = run(&archive, ws.path(), &features, &[]).unwrap();
    assert!(applied.warnings.is_empty(), "{:?}", applied.warnings);
    let py = std::fs::read_to_string(ws.path().join(".devcontainer/py/devcontainer.json")).unwrap();
    assert!(py.contains("ghcr.io/x/y:1"), "{py}");
}
