//! `env import`: strict reading, tokens, the mapping and the requests (spec-note 0523).

use super::*;

/// The seed's managed example, with `capAdd` and a list of session mounts.
const MANAGED: &str = r#"schemaVersion: 1
name: dev-container
kind: container
mode: managed
engine: podman
image: node:22
lifetime: group
cwd: "{{workspace_host_path}}"
workspace:
  scope: group
  hostRoot: "{{state_dir}}/workspaces"
  containerPath: /workspace
  mode: rw
  create: true
lifecycle:
  afterStart:
    - kind: command
      target: container
      command: sh
      args: ["-c", "echo started > /tmp/started"]
  onWorkspaceCreate:
    - kind: git-clone
      target: container
      source: /host/repos/project.git
      baseRef: origin/main
      branch: "agent-runner/{{run_id}}"
    - kind: command
      target: container
      command: npm
      args: [install]
      cwd: "{{workspace_container_path}}"
sessionMounts: [codex]
security:
  capAdd: [SYS_PTRACE]
cleanup:
  policy: manual
"#;

fn options(dir: &Path, text: &str, allow: &[&str]) -> ImportOptions {
    let file = dir.join("env.yaml");
    std::fs::write(&file, text).unwrap();
    ImportOptions {
        file,
        workspace: dir.join("ws"),
        reference_profile: false,
        allow: allow.iter().map(|a| a.to_string()).collect(),
        env: BTreeMap::from([("HOME".to_string(), "/home/u".to_string())]),
    }
}

fn error_of(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    import(&options(dir.path(), text, &[]))
        .unwrap_err()
        .to_string()
}

/// The issue's test: a managed file with `capAdd` and `sessionMounts` lists both as requests
/// and refuses them by default; granted, both are applied to the configuration.
#[test]
fn cap_add_and_session_mounts_are_requests_refused_unless_granted() {
    let dir = tempfile::tempdir().unwrap();
    let report = import(&options(dir.path(), MANAGED, &[])).unwrap();
    assert!(report.refused());
    let asked: Vec<(&str, &str, &str)> = report
        .requests
        .iter()
        .map(|r| (r.field.as_str(), r.permission.as_str(), r.status))
        .collect();
    assert_eq!(
        asked,
        [
            ("security.capAdd[0]", "capability", "refused"),
            ("sessionMounts.codex", "mount", "refused"),
        ],
        "{:#?}",
        report.requests
    );
    let mount = report
        .requests
        .iter()
        .find(|r| r.permission == "mount")
        .unwrap();
    assert_eq!(mount.value.as_deref(), Some("/home/u/.codex/sessions"));
    assert_eq!(
        mount.grant.as_deref(),
        Some("--allow mount:/home/u/.codex/sessions")
    );

    let granted = import(&options(
        dir.path(),
        MANAGED,
        &["cap:SYS_PTRACE", "mount:/home/u/.codex/sessions"],
    ))
    .unwrap();
    assert!(!granted.refused(), "{:#?}", granted.requests);
    assert!(granted.requests.iter().all(|r| r.status == "granted"));
    let c = &granted.configuration;
    assert_eq!(c["capAdd"], json!(["SYS_PTRACE"]));
    assert_eq!(
        c["mounts"],
        json!(["type=bind,source=/home/u/.codex/sessions,target=/home/u/.codex/sessions"])
    );
}

/// The mapping: image, workspace, hooks in order with the workspace token carried as
/// devcell's variable, lifetime and cleanup reported, git-clone a note.
#[test]
fn the_configuration_carries_the_image_workspace_and_steps() {
    let dir = tempfile::tempdir().unwrap();
    let report = import(&options(dir.path(), MANAGED, &[])).unwrap();
    let c = &report.configuration;
    assert_eq!(c["image"], "node:22");
    assert_eq!(c["name"], "dev-container");
    assert_eq!(c["workspaceFolder"], "/workspace");
    assert_eq!(
        c["workspaceMount"],
        "type=bind,source=${localWorkspaceFolder},target=/workspace"
    );
    // agent-runner's phases are devcell's handoff steps (spec-note 0538), not spec hooks
    assert_eq!(
        c["customizations"]["devcell"]["afterStart"],
        json!(["('sh' '-c' 'echo started > /tmp/started')"])
    );
    assert_eq!(
        c["customizations"]["devcell"]["onWorkspaceCreate"],
        json!(["(cd '${containerWorkspaceFolder}' && 'npm' 'install')"])
    );
    assert!(c.get("onCreateCommand").is_none() && c.get("postCreateCommand").is_none());
    assert_eq!(report.lifetime.value, "group");
    assert_eq!(report.cleanup.value, "manual");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.field == "lifecycle.onWorkspaceCreate[0]"
                && n.message.contains("--isolation clone")),
        "{:#?}",
        report.notes
    );
}

/// Unknown keys are errors at their line and column, at any depth; so is `mode: existing`
/// and another schema version.
#[test]
fn unknown_keys_and_other_modes_are_errors_at_their_line() {
    let e = error_of(&MANAGED.replace("  capAdd:", "  capAd:"));
    assert!(e.contains("env.yaml:34:3:"), "{e}");
    assert!(e.contains("unknown field `capAd`"), "{e}");
    let e = error_of(&format!("{MANAGED}extra: 1\n"));
    assert!(e.contains("unknown field `extra`"), "{e}");
    let e = error_of(&MANAGED.replace(
        "      target: container\n      command: npm",
        "      target: container\n      comand: npm",
    ));
    assert!(e.contains("unknown field `comand`"), "{e}");
    let e = error_of(&MANAGED.replace("mode: managed", "mode: existing"));
    assert!(e.contains("env.yaml:4:") && e.contains("existing"), "{e}");
    let e = error_of(&MANAGED.replace("schemaVersion: 1", "schemaVersion: 2"));
    assert!(
        e.contains("schemaVersion") && e.contains("expected `1`"),
        "{e}"
    );
    let e = error_of("schemaVersion: [");
    assert!(e.contains("env.yaml:1:"), "{e}");
}

/// An unknown `{{token}}` is an error naming the key and where it is; a declared var and the
/// step's own tokens are known; a known token devcell has no value for is refused where it
/// would be carried into the configuration.
#[test]
fn unknown_tokens_are_errors_with_their_place() {
    let e = error_of(&MANAGED.replace("{{run_id}}", "{{run_idd}}"));
    assert!(e.contains("env.yaml:26:29:"), "{e}");
    assert!(e.contains("lifecycle.onWorkspaceCreate[0].branch"), "{e}");
    assert!(e.contains("unknown token `{{run_idd}}`"), "{e}");

    let declared = MANAGED.replace("{{run_id}}", "{{ticket}}").replace(
        "lifetime: group",
        "lifetime: group\nvars:\n  ticket:\n    type: string",
    );
    let dir = tempfile::tempdir().unwrap();
    import(&options(dir.path(), &declared, &[])).unwrap();

    let e = error_of(&MANAGED.replace("image: node:22", "image: \"node:{{run_id}}\""));
    assert!(e.contains("image") && e.contains("no devcell value"), "{e}");
    let e = error_of(&MANAGED.replace(
        "cwd: \"{{workspace_host_path}}\"",
        "cwd: \"{{container_id}}\"",
    ));
    assert!(e.contains("unknown token `{{container_id}}`"), "{e}");
    let e = error_of(&MANAGED.replace("echo started", "echo ${localEnv:HOME}"));
    assert!(
        e.contains("lifecycle.afterStart[0].args[1]") && e.contains("${"),
        "{e}"
    );
}

/// Host network, extra run args, a writable root and a host step are each a request; the
/// writable root only the reference profile allows; a bind inside the workspace is none.
#[test]
fn the_rest_of_what_hardened_does_not_grant_is_requested() {
    let text = MANAGED
        .replace("sessionMounts: [codex]\n", "")
        .replace("  capAdd: [SYS_PTRACE]\n", "  readOnlyRootFilesystem: false\n")
        .replace(
            "cleanup:",
            "network: host\nextraRunArgs: [\"--privileged\"]\nmounts:\n  - hostPath: \"{{workspace_host_path}}/cache\"\n    containerPath: /cache\n    mode: ro\ncleanup:",
        )
        .replace(
            "      command: sh\n",
            "      command: sh\n    - kind: command\n      target: host\n      command: make\n      args: [prepare]\n",
        )
        .replace("      command: sh\n    - kind", "      command: sh\n      args: [\"-c\", \"true\"]\n    - kind")
        .replace("      args: [\"-c\", \"echo started > /tmp/started\"]\n", "");
    let dir = tempfile::tempdir().unwrap();
    let report = import(&options(dir.path(), &text, &[])).unwrap();
    let mut asked: Vec<(&str, &str, &str)> = report
        .requests
        .iter()
        .map(|r| (r.field.as_str(), r.permission.as_str(), r.status))
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [
            ("extraRunArgs", "privileged", "refused"),
            ("lifecycle.afterStart[1]", "hostCommand", "refused"),
            ("network", "hostNetwork", "refused"),
            (
                "security.readOnlyRootFilesystem",
                "writableRootFilesystem",
                "refused"
            ),
        ],
        "{:#?}",
        report.requests
    );
    let c = &report.configuration;
    assert_eq!(c["runArgs"], json!(["--network=host", "--privileged"]));
    assert_eq!(
        c["mounts"],
        json!(["type=bind,source=${localWorkspaceFolder}/cache,target=/cache,readonly"])
    );
    let mut reference = options(dir.path(), &text, &[]);
    reference.reference_profile = true;
    let report = import(&reference).unwrap();
    assert!(!report.refused(), "{:#?}", report.requests);
}

/// `--write` writes `.devcontainer/devcontainer.json` and never replaces one.
#[test]
fn write_never_replaces_a_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_configuration(dir.path(), &json!({"image": "x"})).unwrap();
    assert_eq!(path, dir.path().join(".devcontainer/devcontainer.json"));
    let e = write_configuration(dir.path(), &json!({"image": "y"})).unwrap_err();
    assert!(e.to_string().contains("never replaces"), "{e}");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(kept, json!({"image": "x"}));
}

#[test]
fn tokens_are_read_with_spacing_and_bad_ones_refused() {
    assert_eq!(tokens("a{{ x }}b{{y_1}}").unwrap(), ["x", "y_1"]);
    assert!(tokens("a{{x").is_err());
    assert!(tokens("{{a-b}}").is_err());
    assert_eq!(replace_token("{{ x }}/{{y}}", "x", "$X"), "$X/{{y}}");
}

/// spec-note 0523, re-read against agent-runner's published schema: what it refuses beyond its
/// keys is refused here, at the key; the seed's example passes.
#[test]
fn the_published_schemas_rules_beyond_its_keys_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    import(&options(dir.path(), MANAGED, &[])).unwrap();
    let minimal = "schemaVersion: 1\nkind: container\nmode: managed\nimage: busybox\ncwd: /w\n";
    let cases: [(String, &str, &str); 9] = [
        (
            minimal.replace("busybox", "\"  \""),
            "image",
            "must not be empty",
        ),
        (
            format!("{minimal}vars:\n  x:\n    type: text\n"),
            "vars.x.type",
            "is not one of",
        ),
        (
            format!("{minimal}vars:\n  x:\n    sources: [cli, cli]\n"),
            "vars.x.sources",
            "duplicates",
        ),
        (
            format!("{minimal}vars:\n  x:\n    sources: [shell]\n"),
            "vars.x.sources",
            "is not one of",
        ),
        (
            format!("{minimal}vars:\n  x:\n    type: enum\n"),
            "vars.x.values",
            "non-empty `values`",
        ),
        (
            format!("{minimal}vars:\n  x:\n    type: boolean\n    default: maybe\n"),
            "vars.x.default",
            "does not fit",
        ),
        (
            format!("{minimal}workspace:\n  hostRoot: /a\n  hostPath: /b\n  containerPath: /w\n"),
            "workspace",
            "both `hostRoot` and `hostPath`",
        ),
        (
            format!(
                "{minimal}lifecycle:\n  onWorkspaceCreate:\n    - kind: command\n      target: container\n      command: \"true\"\n"
            ),
            "lifecycle.onWorkspaceCreate",
            "requires `workspace`",
        ),
        (
            format!(
                "{minimal}workspace:\n  containerPath: /w\nlifecycle:\n  onWorkspaceCreate:\n    - kind: git-clone\n      source: /r.git\n      baseRef: main\n      branch: t\n"
            ),
            "lifecycle.onWorkspaceCreate[0].target",
            "needs `target`",
        ),
    ];
    for (text, path, message) in cases {
        let e = error_of(&text);
        assert!(e.contains(path) && e.contains(message), "{path}: {e}");
    }
    // the singular `source` of a variable is no key of the schema
    let e = error_of(&format!("{minimal}vars:\n  x:\n    source: cli\n"));
    assert!(e.contains("unknown field `source`"), "{e}");
}
