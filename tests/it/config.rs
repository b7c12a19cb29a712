//! `devcell read-configuration` and the config layer on fixtures: the bad-input corpus
//! (`fixtures/bad/<case>`, each with the exact expected stderr) and the parsing and discovery
//! items 1-9 of the conformance checklist (spec-distilled.md §7).

use serde_json::json;

use crate::support::{assert_failed, fixture, read_configuration, stdout_json};
use devcell::config::{jsonc, model};

/// Runs `fixtures/bad/<case>` and compares stderr with its `expected-stderr.txt`, where
/// `${CONFIG}` stands for the absolute path of the case's devcontainer.json.
fn bad_case(case: &str) {
    let ws = fixture(&format!("bad/{case}"));
    let config = ws.join(".devcontainer/devcontainer.json");
    let expected = std::fs::read_to_string(ws.join("expected-stderr.txt"))
        .expect("expected-stderr.txt exists")
        .replace("${CONFIG}", &config.to_string_lossy());
    let out = read_configuration(&ws, &[]);
    let stderr = assert_failed(&out);
    assert_eq!(stderr, expected, "stderr of bad case `{case}`");
    // Every located error starts with `error: <file>:<line>:<column>: `.
    let first = stderr.lines().next().unwrap_or_default();
    let prefix = format!("error: {}:", config.display());
    assert!(first.starts_with(&prefix), "{first}");
}

macro_rules! bad_cases {
    ($($name:ident => $case:literal,)*) => {
        $(
            #[test]
            fn $name() {
                bad_case($case);
            }
        )*

        /// Every fixture folder under `fixtures/bad` has a test above.
        #[test]
        fn bad_corpus_every_case_is_tested() {
            let listed = [$($case),*];
            let mut on_disk: Vec<String> = std::fs::read_dir(fixture("bad"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            on_disk.sort();
            let mut listed: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
            listed.sort();
            assert_eq!(on_disk, listed);
            assert!(listed.len() >= 25);
        }
    };
}

bad_cases! {
    bad_bom_crlf_wrong_type => "bom-crlf-wrong-type",
    bad_comments_only => "comments-only",
    bad_compose_and_image => "compose-and-image",
    bad_compose_without_service => "compose-without-service",
    bad_container_env_number => "container-env-number",
    bad_deeply_nested_arrays => "deeply-nested-arrays",
    bad_empty_file => "empty-file",
    bad_feature_value_number => "feature-value-number",
    bad_features_array => "features-array",
    bad_hook_array_with_number => "hook-array-with-number",
    bad_hook_object_entry_number => "hook-object-entry-number",
    bad_hook_unknown_form => "hook-unknown-form",
    bad_host_requirements_memory => "host-requirements-memory",
    bad_image_and_dockerfile => "image-and-dockerfile",
    bad_image_and_legacy_dockerfile => "image-and-legacy-dockerfile",
    bad_mount_bad_string => "mount-bad-string",
    bad_mount_object_without_target => "mount-object-without-target",
    bad_not_utf8 => "not-utf8",
    bad_privileged_string => "privileged-string",
    bad_root_array => "root-array",
    bad_root_string => "root-string",
    bad_run_args_string => "run-args-string",
    bad_shutdown_action_wrong_kind => "shutdown-action-wrong-kind",
    bad_substitution_local_env_without_name => "substitution-local-env-without-name",
    bad_syntax_double_comma => "syntax-double-comma",
    bad_syntax_hex_number => "syntax-hex-number",
    bad_syntax_invalid_escape => "syntax-invalid-escape",
    bad_syntax_missing_colon => "syntax-missing-colon",
    bad_syntax_missing_comma => "syntax-missing-comma",
    bad_syntax_missing_value => "syntax-missing-value",
    bad_syntax_nan => "syntax-nan",
    bad_syntax_number_out_of_range => "syntax-number-out-of-range",
    bad_syntax_single_quoted_string => "syntax-single-quoted-string",
    bad_syntax_text_after_root => "syntax-text-after-root",
    bad_syntax_text_before_root => "syntax-text-before-root",
    bad_syntax_unquoted_key => "syntax-unquoted-key",
    bad_syntax_unterminated_comment => "syntax-unterminated-comment",
    bad_syntax_unterminated_object => "syntax-unterminated-object",
    bad_syntax_unterminated_string => "syntax-unterminated-string",
    bad_type_forward_port_out_of_range => "type-forward-port-out-of-range",
    bad_type_forward_ports_abc => "type-forward-ports-abc",
    bad_type_image_number => "type-image-number",
    bad_user_env_probe_unknown => "user-env-probe-unknown",
}

#[test]
fn bad_ten_megabyte_file_is_rejected_with_its_size() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".devcontainer");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("devcontainer.json");
    let big = format!(
        "{{\"image\": \"debian\", \"name\": \"{}\"}}",
        "a".repeat(10 * 1024 * 1024)
    );
    std::fs::write(&config, &big).unwrap();
    let stderr = assert_failed(&read_configuration(tmp.path(), &[]));
    assert_eq!(
        stderr.lines().next().unwrap(),
        format!(
            "error: {}:1:1: the file is {} bytes; expected at most 4194304 bytes (4 MiB) for a devcontainer.json",
            config.display(),
            big.len()
        )
    );
}

#[test]
fn bad_hundred_thousand_nested_arrays_do_not_overflow_the_stack() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(".devcontainer");
    std::fs::create_dir_all(&dir).unwrap();
    let text = format!(
        "{{\"runArgs\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(dir.join("devcontainer.json"), text).unwrap();
    let stderr = assert_failed(&read_configuration(tmp.path(), &[]));
    assert!(
        stderr.contains(":1:140: runArgs"),
        "error names the first bracket beyond the limit: {stderr}"
    );
    assert!(
        stderr.contains("nested more than 128 levels deep"),
        "{stderr}"
    );
}

#[test]
fn bad_missing_config_lists_where_it_looked() {
    let tmp = tempfile::tempdir().unwrap();
    let stderr = assert_failed(&read_configuration(tmp.path(), &[]));
    let ws = tmp.path().display();
    assert_eq!(
        stderr.lines().next().unwrap(),
        format!(
            "error: Dev container config ({ws}/.devcontainer/devcontainer.json) not found. Looked for `{ws}/.devcontainer/devcontainer.json` and `{ws}/.devcontainer.json` in `{ws}`"
        )
    );
    // devcell's hint after the reference's text (spec-note 0454).
    assert!(
        stderr.contains("\nhint: create `.devcontainer/devcontainer.json`"),
        "{stderr}"
    );
}

#[test]
fn bad_missing_explicit_config() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.json");
    let out = read_configuration(tmp.path(), &["--config", missing.to_str().unwrap()]);
    let stderr = assert_failed(&out);
    // The reference CLI's text (spec-note 0454).
    assert!(
        stderr.starts_with(&format!(
            "error: Dev container config ({}) not found.\n",
            missing.display()
        )),
        "{stderr}"
    );
}

// Checklist 1: `.devcontainer/devcontainer.json` wins over `.devcontainer.json`.
#[test]
fn checklist_01_devcontainer_folder_wins_over_root_file() {
    let ws = fixture("configs/both-locations");
    let v = stdout_json(&read_configuration(&ws, &[]));
    assert_eq!(
        v["configuration"]["name"],
        "from .devcontainer/devcontainer.json"
    );
    let path = ws.join(".devcontainer/devcontainer.json");
    assert_eq!(
        v["configuration"]["configFilePath"]["path"],
        path.to_string_lossy().as_ref()
    );
    assert_eq!(
        v["configuration"]["configFilePath"]["scheme"],
        "vscode-fileHost"
    );

    let root = fixture("configs/root-file");
    let v = stdout_json(&read_configuration(&root, &[]));
    assert_eq!(v["configuration"]["name"], "root file");
}

// Checklist 2: `.devcontainer/<name>/devcontainer.json` is discoverable (listed, chosen with
// `--config`); `.devcontainer/a/b/devcontainer.json` is not.
#[test]
fn checklist_02_subfolder_configs_are_listed_and_selectable() {
    let ws = fixture("configs/subfolders");
    let stderr = assert_failed(&read_configuration(&ws, &[]));
    let node = ws.join(".devcontainer/node/devcontainer.json");
    let python = ws.join(".devcontainer/python/devcontainer.json");
    assert!(
        stderr.contains(&format!(
            "hint: choose one of these configs with `--config`: `{}`, `{}`",
            node.display(),
            python.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("nested"), "{stderr}");
    let listed = devcell::config::discover::list(&ws);
    assert_eq!(listed, [node.clone(), python]);

    let v = stdout_json(&read_configuration(
        &ws,
        &["--config", node.to_str().unwrap()],
    ));
    assert_eq!(v["configuration"]["name"], "node");
}

// Checklist 3: `//` and `/* */` comments parse; comment-like text in strings is kept.
#[test]
fn checklist_03_comments_parse() {
    let v = stdout_json(&read_configuration(&fixture("configs/comments"), &[]));
    assert_eq!(
        v["configuration"]["name"],
        "http://example.com/a//b /* not a comment */"
    );
    assert_eq!(v["configuration"]["remoteEnv"], json!({"KEPT": "yes"}));
}

// Checklist 4: trailing commas parse (no warning needed).
#[test]
fn checklist_04_trailing_commas_parse() {
    let out = read_configuration(&fixture("configs/trailing-commas"), &[]);
    let v = stdout_json(&out);
    assert_eq!(v["configuration"]["forwardPorts"], json!([3000, 8080]));
    assert_eq!(v["configuration"]["runArgs"], json!(["--init"]));
}

// Checklist 5: a non-object root is rejected with an error naming the file.
#[test]
fn checklist_05_non_object_root_names_the_file() {
    for case in ["root-array", "root-string"] {
        let ws = fixture(&format!("bad/{case}"));
        let stderr = assert_failed(&read_configuration(&ws, &[]));
        assert!(
            stderr.contains(
                &ws.join(".devcontainer/devcontainer.json")
                    .display()
                    .to_string()
            ),
            "{stderr}"
        );
        assert!(
            stderr.contains("expected a JSON object at the root"),
            "{stderr}"
        );
    }
}

fn typed(case: &str) -> (model::DevContainerConfig, std::path::PathBuf) {
    let file = fixture(&format!("configs/{case}/.devcontainer/devcontainer.json"));
    let doc = jsonc::read(&file).unwrap();
    (model::validate(&doc).unwrap().0, file)
}

// Checklist 6: the kind follows `image` / `build.dockerfile` or `dockerFile` / `dockerComposeFile`.
#[test]
fn checklist_06_config_kinds() {
    assert_eq!(typed("kind-image").0.kind(), model::ConfigKind::Image);
    assert_eq!(
        typed("kind-dockerfile").0.kind(),
        model::ConfigKind::Dockerfile
    );
    assert_eq!(
        typed("kind-legacy-dockerfile").0.kind(),
        model::ConfigKind::Dockerfile
    );
    assert_eq!(typed("kind-compose").0.kind(), model::ConfigKind::Compose);
}

// Checklist 7: a compose config without `service` is rejected before any container operation.
#[test]
fn checklist_07_compose_without_service_is_rejected() {
    let stderr = assert_failed(&read_configuration(
        &fixture("bad/compose-without-service"),
        &[],
    ));
    assert!(
        stderr.contains("dockerComposeFile: expected `service`"),
        "{stderr}"
    );
}

// Checklist 8: `build.dockerfile`/`build.context` resolve against the config's folder; the
// context defaults to the Dockerfile's folder (spec-notes/0005).
#[test]
fn checklist_08_dockerfile_and_context_paths() {
    let (c, file) = typed("kind-dockerfile");
    let dir = file.parent().unwrap();
    assert_eq!(c.dockerfile_path(&file).unwrap(), dir.join("Dockerfile"));
    assert_eq!(c.context_path(&file).unwrap(), dir);
    assert!(c.dockerfile_path(&file).unwrap().is_file());

    let (c, file) = typed("kind-legacy-dockerfile");
    let dir = file.parent().unwrap();
    assert_eq!(
        c.dockerfile_path(&file).unwrap(),
        dir.join("../Dockerfile.dev")
    );
    assert_eq!(c.context_path(&file).unwrap(), dir.join(".."));

    let (c, file) = typed("dockerfile-outside");
    let dir = file.parent().unwrap();
    assert_eq!(c.context_path(&file).unwrap(), dir.join("../docker"));
}

// Checklist 9: `dockerComposeFile` paths resolve against the config's folder, in array order.
#[test]
fn checklist_09_compose_files_in_order() {
    let (c, file) = typed("kind-compose");
    let dir = file.parent().unwrap();
    let files = c.compose_files(&file);
    assert_eq!(
        files,
        [
            dir.join("../docker-compose.yml"),
            dir.join("docker-compose.dev.yml")
        ]
    );
    assert!(files.iter().all(|f| f.is_file()));
}

#[test]
fn bom_and_crlf_are_accepted() {
    let v = stdout_json(&read_configuration(&fixture("configs/bom-crlf"), &[]));
    assert_eq!(v["configuration"]["name"], "bom and crlf");
}

#[test]
fn unknown_properties_are_kept_with_a_warning() {
    let ws = fixture("configs/unknown-properties");
    let out = read_configuration(&ws, &[]);
    let v = stdout_json(&out);
    assert_eq!(v["configuration"]["fooBar"], json!({"kept": [1, 2]}));
    assert_eq!(v["configuration"]["hostRequirements"]["tpu"], json!(true));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = ws.join(".devcontainer/devcontainer.json");
    assert!(
        stderr.contains(&format!(
            "warning: {}:3:3: fooBar: unknown property `fooBar`; it is kept as written",
            file.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("hostRequirements.tpu: unknown property `tpu` in `hostRequirements`"),
        "{stderr}"
    );
}

#[test]
fn duplicate_keys_last_wins_with_a_warning() {
    let out = read_configuration(&fixture("configs/duplicate-keys"), &[]);
    let v = stdout_json(&out);
    assert_eq!(v["configuration"]["image"], "second");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(":4:3: image: duplicate property `image`")
    );
}

#[test]
fn key_order_is_preserved_in_output() {
    let out = read_configuration(&fixture("configs/key-order"), &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(
            r#"{"configuration":{"remoteUser":"z","image":"debian","name":"order","containerEnv":{"Z":"1","A":"2","M":"3"},"configFilePath":"#
        ),
        "{text}"
    );
}

#[test]
fn legacy_vscode_properties_move_to_customizations() {
    let v = stdout_json(&read_configuration(&fixture("configs/legacy-vscode"), &[]));
    let c = &v["configuration"];
    assert!(
        c.get("extensions").is_none() && c.get("settings").is_none() && c.get("devPort").is_none()
    );
    assert_eq!(
        c["customizations"]["vscode"],
        json!({"extensions": ["new.ext", "legacy.ext"], "settings": {"a": 1, "b": 2}, "devPort": 8000})
    );
}

/// A Feature's legacy top-level `extensions`/`settings` are shown under its
/// `customizations.vscode` in the Features configuration, as the reference CLI shows them
/// (spec-note 0006; issue 28 item 8).
#[test]
fn a_features_legacy_vscode_properties_move_to_its_customizations() {
    let tmp = tempfile::tempdir().unwrap();
    let dc = tmp.path().join(".devcontainer");
    std::fs::create_dir_all(dc.join("feat")).unwrap();
    std::fs::write(
        dc.join("devcontainer.json"),
        r#"{"image": "debian", "features": {"./feat": {}}}"#,
    )
    .unwrap();
    std::fs::write(
        dc.join("feat/devcontainer-feature.json"),
        r#"{"id": "feat", "version": "1.0.0", "extensions": ["x.y", "a.b"], "settings": {"s": 1, "t": 2},
            "customizations": {"vscode": {"extensions": ["first"], "settings": {"t": 3}}}}"#,
    )
    .unwrap();
    std::fs::write(dc.join("feat/install.sh"), "#!/bin/sh\n").unwrap();
    let v = stdout_json(&read_configuration(
        tmp.path(),
        &["--include-features-configuration"],
    ));
    let feature = &v["featuresConfiguration"]["featureSets"][0]["features"][0];
    assert!(feature.get("extensions").is_none() && feature.get("settings").is_none());
    assert_eq!(
        feature["customizations"]["vscode"],
        json!({"extensions": ["first", "x.y", "a.b"], "settings": {"s": 1, "t": 3}})
    );
}

/// Resolving the Features configuration parses every reference before fetching anything: the
/// legacy short id fails with its hint and no registry is asked (spec-note 0452).
#[test]
fn features_configuration_refuses_a_legacy_short_id_before_fetching() {
    let ws = fixture("configs/features-kinds");
    let out = read_configuration(&ws, &["--include-features-configuration"]);
    let err = crate::support::assert_failed(&out);
    assert!(
        err.contains("`git` is a legacy short id; use `ghcr.io/devcontainers/features/git:1`"),
        "{err}"
    );
    assert!(!err.contains("pulling"), "{err}");
}

#[test]
fn merged_configuration_is_included_on_request() {
    let ws = fixture("configs/features-kinds");
    let v = stdout_json(&read_configuration(
        &ws,
        &["--include-merged-configuration"],
    ));
    let merged = &v["mergedConfiguration"];
    // The local Feature's metadata is merged before the devcontainer.json entry.
    assert_eq!(merged["capAdd"], json!(["SYS_PTRACE"]), "{v}");
    assert_eq!(merged["postCreateCommands"], json!(["echo feature"]), "{v}");
    assert_eq!(merged["image"], "debian");
    assert!(merged["configFilePath"]["path"].is_string());
    let plain = stdout_json(&read_configuration(&ws, &[]));
    assert!(plain.get("mergedConfiguration").is_none());
    assert!(plain.get("featuresConfiguration").is_none());
}

#[test]
fn workspace_folder_defaults_to_the_current_directory() {
    let ws = fixture("configs/kind-image");
    let out = crate::support::devcell()
        .arg("read-configuration")
        .current_dir(&ws)
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert!(
        v["configuration"]["configFilePath"]["path"]
            .as_str()
            .unwrap()
            .ends_with("kind-image/.devcontainer/devcontainer.json")
    );
}

/// `--mount-workspace-git-root` (default true) mounts the git root and opens the sub-folder;
/// `--mount-workspace-git-root false` mounts the folder itself. The flag also takes no value.
#[test]
fn mount_workspace_git_root_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let sub = repo.join("sub");
    std::fs::create_dir_all(sub.join(".devcontainer")).unwrap();
    std::fs::write(
        sub.join(".devcontainer/devcontainer.json"),
        r#"{"image": "debian"}"#,
    )
    .unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&repo)
        .status()
        .expect("git is installed");
    assert!(git.success());

    for extra in [
        &[][..],
        &["--mount-workspace-git-root"][..],
        &["--mount-workspace-git-root", "true"][..],
    ] {
        let v = stdout_json(&read_configuration(&sub, extra));
        assert_eq!(
            v["workspace"]["workspaceFolder"], "/workspaces/repo/sub",
            "{extra:?}"
        );
        assert_eq!(
            v["workspace"]["workspaceMount"],
            format!(
                "type=bind,source={},target=/workspaces/repo",
                repo.display()
            ),
            "{extra:?}"
        );
    }
    let v = stdout_json(&read_configuration(
        &sub,
        &["--mount-workspace-git-root", "false"],
    ));
    assert_eq!(v["workspace"]["workspaceFolder"], "/workspaces/sub");
    assert_eq!(
        v["workspace"]["workspaceMount"],
        format!("type=bind,source={},target=/workspaces/sub", sub.display())
    );
}

/// A bounded, fixed-seed randomized test (runs in every `cargo test`, next to the cargo-fuzz
/// target in `fuzz/`): mutations of every corpus config must parse, validate and substitute
/// without a panic; errors are fine.
#[test]
fn randomized_mutations_of_corpus_configs_never_panic() {
    use devcell::config::workspace;
    let mut files = Vec::new();
    for case in std::fs::read_dir(crate::support::repo().join("tests/corpus")).unwrap() {
        let ws = case.unwrap().path().join("ws");
        files.extend(devcell::config::discover::list(&ws));
    }
    assert!(files.len() >= 60, "corpus configs found: {}", files.len());
    let mut seed: u64 = 0x5eed_d0c5;
    let mut next = move || {
        // xorshift64*
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    const PIECES: [&str; 12] = [
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "${localEnv:",
        "${",
        "//",
        "/*",
        "\\",
    ];
    let mut parsed = 0;
    for round in 0..1500 {
        let file = &files[round % files.len()];
        let mut bytes = std::fs::read(file).unwrap();
        for _ in 0..(1 + next() % 4) {
            let at = (next() as usize) % (bytes.len() + 1);
            match next() % 3 {
                0 if !bytes.is_empty() => {
                    let end = (at + (next() % 8) as usize).min(bytes.len());
                    bytes.drain(at.min(end)..end);
                }
                1 => {
                    let piece = PIECES[(next() as usize) % PIECES.len()];
                    bytes.splice(at..at, piece.bytes());
                }
                _ => {
                    if let Some(b) = bytes.get_mut(at) {
                        *b = (next() % 128) as u8;
                    }
                }
            }
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let Ok(doc) = jsonc::parse(file, &text) else {
            continue;
        };
        parsed += 1;
        if model::validate(&doc).is_err() {
            continue;
        }
        let mut value = doc.value.clone();
        let opts = workspace::ResolveOptions {
            workspace_folder: "/w/ws".into(),
            config_file: file.clone(),
            mount_workspace_git_root: false,
            env: Default::default(),
        };
        if workspace::resolve(&mut value, &opts).is_ok() {
            let _ = model::validate_value(&doc, &value);
        }
    }
    assert!(parsed > 100, "some mutations still parse: {parsed}");
}

#[test]
fn bad_workspace_folder_that_does_not_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let stderr = assert_failed(&read_configuration(&missing, &[]));
    assert_eq!(
        stderr,
        format!(
            "error: Dev container config ({}) not found. The workspace folder `{}` is not a directory\n\nhint: pass an existing folder with `--workspace-folder`\n",
            missing
                .join(".devcontainer")
                .join("devcontainer.json")
                .display(),
            missing.display()
        )
    );
}
