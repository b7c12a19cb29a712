//! devcell's own Features (`features/src/*`) run for real in `devcell-test/busybox:1`, with
//! the options env file rendered by `devcell::features::options`, sourced as the install
//! wrapper does (`set -a; . builtin.env; . devcontainer-features.env; set +a`).
//!
//! Needs the Docker engine: with `DEVCELL_TEST_ENGINE=1` a missing engine or image fails the
//! test; without it the tests return early with a note on stderr.

use crate::support::deadline::Bounded as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use devcell::features::metadata::FeatureMetadata;
use devcell::features::options::{
    BUILTIN_ENV_FILE, BuiltinEnv, OPTIONS_ENV_FILE, render_options_env, resolve_options,
    user_options,
};
use serde_json::{Value, json};

use crate::support::context::TestContext;
use crate::support::docker::engine_ready;

const IMAGE: &str = "devcell-test/busybox:1";

fn feature_dir(id: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("features/src")
        .join(id)
}

/// Renders the env files for `feature` with `value` (as written in devcontainer.json) and runs
/// `install.sh` in a fresh busybox container, followed by `after` (a shell snippet).
fn install(feature: &str, value: Value, runs: usize, setup: &str, after: &str) -> Output {
    install_in(IMAGE, feature, value, runs, setup, after)
}

/// [`install`] in another image.
fn install_in(
    image: &str,
    feature: &str,
    value: Value,
    runs: usize,
    setup: &str,
    after: &str,
) -> Output {
    let dir = feature_dir(feature);
    let metadata = FeatureMetadata::read_dir(&dir).unwrap();
    let mut warnings = Vec::new();
    let user = user_options(feature, &value, &mut warnings).unwrap();
    let options = resolve_options(feature, &metadata, &user, &mut warnings).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let env = tempfile::tempdir().unwrap();
    std::fs::write(
        env.path().join(OPTIONS_ENV_FILE),
        render_options_env(&options).unwrap(),
    )
    .unwrap();
    std::fs::write(
        env.path().join(BUILTIN_ENV_FILE),
        BuiltinEnv::new("root", None).render().unwrap(),
    )
    .unwrap();
    let install_once = format!(
        "(cd /tmp/f && set -a && . /env/{BUILTIN_ENV_FILE} && . /env/{OPTIONS_ENV_FILE} && set +a && ./install.sh)"
    );
    let installs = vec![install_once; runs].join(" && ");
    let script = format!(
        "set -e; {setup}\ncp -R /feature /tmp/f; chmod +x /tmp/f/install.sh; {installs}; echo '--- after'; {after}"
    );
    docker_run(image, &dir, env.path(), &script)
}

fn docker_run(image: &str, feature: &Path, env: &Path, script: &str) -> Output {
    Command::new("docker")
        .args(["run", "--rm", "--network", "none", "-v"])
        .arg(format!("{}:/feature:ro", feature.display()))
        .arg("-v")
        .arg(format!("{}:/env:ro", env.display()))
        .args([image, "sh", "-c", script])
        .bounded_output()
        .expect("docker runs")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The output of an install that succeeded: (stdout, stderr).
fn succeeded(out: &Output) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The output of an install that failed: (stdout, stderr).
fn failed(out: &Output) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

fn after_marker(stdout: &str) -> String {
    stdout
        .split("--- after\n")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn agent_user_creates_user_with_uid_and_home() {
    if !engine_ready("agent_user_creates_user_with_uid_and_home", IMAGE) {
        return;
    }
    let out = install(
        "agent-user",
        json!({"username": "coder", "userUid": "1234"}),
        2,
        "",
        "id coder; ls -ldn /home/coder | awk '{print $1, $3, $4}'; grep '^coder:' /etc/passwd",
    );
    let (stdout, _) = succeeded(&out);
    assert!(stdout.contains("created user 'coder'"), "{stdout}");
    // busybox has no user tools: the passwd/group files are edited directly.
    assert!(stdout.contains("with files"), "{stdout}");
    // The second run is a no-op.
    assert!(
        stdout.contains("user 'coder' (UID 1234) already exists"),
        "{stdout}"
    );
    assert_eq!(
        after_marker(&stdout),
        "uid=1234(coder) gid=1234(coder) groups=1234(coder)\ndrwxr-x--- 1234 1234\ncoder:x:1234:1234::/home/coder:/bin/sh\n"
    );
}

/// Builds `devcell-test/busybox:1` plus the host's `useradd`/`groupadd` (Debian shadow
/// utilities) and the shared libraries they load, so the `useradd` branch runs for real.
fn shadow_image() -> String {
    let tag = "devcell-test/agent-user-shadow:1".to_string();
    let ctx = tempfile::tempdir().unwrap();
    let root = ctx.path().join("root");
    let mut files: Vec<PathBuf> = [
        "/usr/sbin/useradd",
        "/usr/sbin/groupadd",
        "/etc/login.defs",
        "/etc/default/useradd",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    for bin in ["/usr/sbin/useradd", "/usr/sbin/groupadd"] {
        let out = Command::new("ldd").arg(bin).output().expect("ldd runs");
        assert!(
            out.status.success(),
            "ldd {bin}: the host needs Debian's `passwd` package"
        );
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(path) = line.split_whitespace().find(|w| w.starts_with('/')) {
                files.push(PathBuf::from(path));
            }
        }
    }
    for file in &files {
        let real =
            std::fs::canonicalize(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let dest = root.join(file.strip_prefix("/").unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&real, &dest).unwrap();
    }
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!("FROM {IMAGE}\nCOPY root/ /\n"),
    )
    .unwrap();
    let out = Command::new("docker")
        .args(["build", "-q", "-t", &tag])
        .arg(ctx.path())
        .bounded_output()
        .expect("docker build runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tag
}

#[test]
fn agent_user_uses_useradd_when_present() {
    if !engine_ready("agent_user_uses_useradd_when_present", IMAGE) {
        return;
    }
    let image = shadow_image();
    let out = install_in(
        &image,
        "agent-user",
        json!({"username": "dev", "userUid": "4321", "userGid": "4000"}),
        2,
        "",
        "id dev; ls -ldn /home/dev | awk '{print $1, $3, $4}'; grep '^dev:' /etc/group",
    );
    let (stdout, _) = succeeded(&out);
    assert!(stdout.contains("with useradd"), "{stdout}");
    assert!(stdout.contains("already exists"), "{stdout}");
    assert_eq!(
        after_marker(&stdout),
        "uid=4321(dev) gid=4000(dev) groups=4000(dev)\ndrwxr-x--- 4321 4000\ndev:x:4000:\n"
    );
}

#[test]
fn agent_user_defaults_and_existing_group() {
    if !engine_ready("agent_user_defaults_and_existing_group", IMAGE) {
        return;
    }
    let out = install(
        "agent-user",
        json!({"userGid": "65534", "userHome": "/work/agent home", "userShell": "/bin/nope"}),
        1,
        "",
        "id agent; ls -ldn '/work/agent home' | awk '{print $3, $4}'",
    );
    let (stdout, stderr) = succeeded(&out);
    assert!(
        stderr.contains("shell '/bin/nope' does not exist"),
        "{stderr}"
    );
    assert_eq!(
        after_marker(&stdout),
        "uid=1000(agent) gid=65534(nogroup) groups=65534(nogroup)\n1000 65534\n"
    );
}

#[test]
fn agent_user_refuses_root_clashes_and_bad_names() {
    if !engine_ready("agent_user_refuses_root_clashes_and_bad_names", IMAGE) {
        return;
    }
    for (value, needle) in [
        (json!({"userUid": "0"}), "userUid 0 is root"),
        (json!({"userUid": "12a"}), "is not a number"),
        (
            json!({"username": "Bad;rm -rf"}),
            "invalid username 'Bad;rm -rf'",
        ),
        (
            json!({"username": "root", "userUid": "1000"}),
            "already exists with UID 0",
        ),
        (
            json!({"userUid": "65534"}),
            "UID 65534 is already used by user 'nobody'",
        ),
        (
            json!({"username": "nogroup", "userUid": "2000"}),
            "group 'nogroup' already exists with GID 65534",
        ),
    ] {
        let out = install("agent-user", value.clone(), 1, "", "true");
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{value}: {stdout}");
        assert!(stderr.contains(needle), "{value}: {stderr}");
    }
}

#[test]
fn packages_empty_list_is_a_no_op() {
    if !engine_ready("packages_empty_list_is_a_no_op", IMAGE) {
        return;
    }
    for value in [json!({}), json!({"packages": " , "})] {
        let out = install("packages", value, 1, "", "true");
        let (stdout, _) = succeeded(&out);
        assert!(stdout.contains("no packages requested"), "{stdout}");
    }
}

#[test]
fn packages_without_a_package_manager_fails_clearly() {
    if !engine_ready("packages_without_a_package_manager_fails_clearly", IMAGE) {
        return;
    }
    let out = install("packages", json!({"packages": "git, jq"}), 1, "", "true");
    let (_, stderr) = failed(&out);
    assert!(
        stderr.contains("no supported package manager (apt-get, apk, dnf, microdnf, yum) found; cannot install: git jq"),
        "{stderr}"
    );
}

#[test]
fn packages_passes_the_list_to_the_package_manager() {
    if !engine_ready("packages_passes_the_list_to_the_package_manager", IMAGE) {
        return;
    }
    // A stand-in `apk` records its argv: the option → env → argv path is what is under test.
    let fake = "mkdir -p /usr/local/bin; printf '#!/bin/sh\\necho \"$*\" >> /tmp/apk.log\\n' > /usr/local/bin/apk; chmod +x /usr/local/bin/apk";
    let out = install(
        "packages",
        json!({"packages": "git,ripgrep jq\tlibc6:amd64"}),
        1,
        fake,
        "cat /tmp/apk.log",
    );
    let (stdout, _) = succeeded(&out);
    assert_eq!(
        after_marker(&stdout),
        "add --no-cache git ripgrep jq libc6:amd64\n"
    );
}

#[test]
fn packages_refuses_flag_like_names() {
    if !engine_ready("packages_refuses_flag_like_names", IMAGE) {
        return;
    }
    for bad in ["--allow-untrusted", "git;id", "$(id)"] {
        let out = install("packages", json!({"packages": bad}), 1, "", "true");
        let (_, stderr) = failed(&out);
        assert!(stderr.contains("invalid package name"), "{bad}: {stderr}");
    }
}

#[test]
fn own_features_have_valid_metadata_and_layout() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("features/src");
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let metadata = FeatureMetadata::read_dir(&dir).unwrap();
        assert_eq!(
            dir.file_name().unwrap().to_str(),
            Some(metadata.id.as_str())
        );
        assert!(metadata.version.is_some() && metadata.name.is_some());
        assert!(dir.join("install.sh").is_file() && dir.join("README.md").is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("install.sh"))
                .unwrap()
                .permissions()
                .mode();
            assert!(
                mode & 0o111 != 0,
                "{} install.sh is not executable",
                metadata.id
            );
        }
        ids.push(metadata.id);
    }
    ids.sort();
    assert_eq!(ids, ["agent-user", "packages"]);
    for id in &ids {
        assert!(
            root.join("../test").join(id).join("test.sh").is_file(),
            "{id} has no test.sh"
        );
    }
}

/// A workspace with `.devcontainer/devcontainer.json` = `config` and local Features
/// `.devcontainer/<id>/devcontainer-feature.json` = `metadata` (with `id` filled in).
fn workspace(config: Value, features: &[(&str, Value)]) -> TestContext {
    let ws = TestContext::new("features").config_json(&config);
    for (id, metadata) in features {
        let mut metadata = metadata.clone();
        metadata["id"] = json!(id);
        ws.write(
            &format!(".devcontainer/{id}/devcontainer-feature.json"),
            &metadata.to_string(),
        );
    }
    ws
}

fn resolve_dependencies(ws: &Path) -> Output {
    crate::support::devcell()
        .args(["features", "resolve-dependencies", "--workspace-folder"])
        .arg(ws)
        .output()
        .expect("devcell runs")
}

#[test]
fn resolve_dependencies_prints_install_order_of_local_features() {
    let ws = workspace(
        json!({
            "image": "devcell-test/busybox:1",
            "features": {"./zeta": {}, "./alpha": "1.2", "./beta": {"flag": true}},
            "overrideFeatureInstallOrder": ["./beta"]
        }),
        &[
            (
                "alpha",
                json!({"options": {"version": {"type": "string", "default": "x"}},
                             "dependsOn": {"./gamma": {"level": "high"}}}),
            ),
            (
                "beta",
                json!({"options": {"flag": {"type": "boolean", "default": false}}}),
            ),
            (
                "gamma",
                json!({"options": {"level": {"type": "string", "enum": ["low", "high"], "default": "low"}}}),
            ),
            ("zeta", json!({"installsAfter": ["./alpha"]})),
        ],
    );
    let out = resolve_dependencies(ws.path());
    let json = crate::support::stdout_json(&out);
    assert_eq!(
        json,
        json!({"installOrder": [
            {"id": "./beta", "options": {"flag": true}},
            {"id": "./gamma", "options": {"level": "high"}},
            {"id": "./alpha", "options": "1.2"},
            {"id": "./zeta", "options": {}},
        ]})
    );
}

#[test]
fn resolve_dependencies_reports_cycles_and_bad_references() {
    let ws = workspace(
        json!({"image": "x", "features": {"./a": {}}}),
        &[
            ("a", json!({"dependsOn": {"./b": {}}})),
            (
                "b",
                json!({"installsAfter": ["./a"], "dependsOn": {"./c": {}}}),
            ),
            ("c", json!({"dependsOn": {"./a": {}}})),
        ],
    );
    let out = resolve_dependencies(ws.path());
    let stderr = crate::support::assert_failed(&out);
    assert!(
        stderr.contains("error: circular Feature dependency: ./a -> ./b -> ./c -> ./a"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");

    let ws = workspace(
        json!({"image": "x", "features": {"docker-in-docker": {}}}),
        &[],
    );
    let stderr = crate::support::assert_failed(&resolve_dependencies(ws.path()));
    assert!(
        stderr.contains("invalid Feature reference `docker-in-docker`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: `docker-in-docker` is a legacy short id; use `ghcr.io/devcontainers/features/docker-in-docker:1`"),
        "{stderr}"
    );

    let ws = workspace(
        json!({"image": "x", "features": {"./g": {"level": "extreme"}}}),
        &[(
            "g",
            json!({"options": {"level": {"type": "string", "enum": ["low", "high"], "default": "low"}}}),
        )],
    );
    let stderr = crate::support::assert_failed(&resolve_dependencies(ws.path()));
    assert!(
        stderr.contains("option `level`: `extreme` is not one of the allowed values `low`, `high`"),
        "{stderr}"
    );

    let ws = workspace(json!({"image": "x", "features": {"../outside": {}}}), &[]);
    let stderr = crate::support::assert_failed(&resolve_dependencies(ws.path()));
    assert!(stderr.contains("outside"), "{stderr}");
}

#[test]
fn own_feature_tests_pass_after_install_with_defaults() {
    if !engine_ready("own_feature_tests_pass_after_install_with_defaults", IMAGE) {
        return;
    }
    for id in ["agent-user", "packages"] {
        let test = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("features/test")
            .join(id)
            .join("test.sh");
        let script = std::fs::read_to_string(&test).unwrap();
        let after = format!("sh <<'DEVCELL_TEST_EOF'\n{script}\nDEVCELL_TEST_EOF\n");
        let out = install(id, json!({}), 1, "", &after);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{id}: {stdout}\n{stderr}");
        assert!(after_marker(&stdout).contains("ok: "), "{id}: {stdout}");
        assert!(!stdout.contains("FAILED"), "{id}: {stdout}");
    }
}

#[test]
fn hostile_option_values_reach_install_sh_unchanged_in_busybox() {
    if !engine_ready(
        "hostile_option_values_reach_install_sh_unchanged_in_busybox",
        IMAGE,
    ) {
        return;
    }
    // Spec-note 0042: values the reference CLI would let the shell interpret.
    let values = [
        "dq\"inside\"",
        "sq'inside'",
        "$HOME ${PATH} $(id -u)",
        "`id -u`",
        "back\\slash\\",
        "line1\nline2\n",
        "semi; echo pwned",
        "*",
        "ünïcødé",
        "",
    ];
    let feature = tempfile::tempdir().unwrap();
    let options: serde_json::Map<String, Value> = (0..values.len())
        .map(|i| (format!("opt-{i}"), json!({"type": "string", "default": ""})))
        .collect();
    std::fs::write(
        feature.path().join("devcontainer-feature.json"),
        json!({"id": "echo", "version": "1.0.0", "options": options}).to_string(),
    )
    .unwrap();
    let printf: String = (0..values.len())
        .map(|i| format!("printf '%s\\0' \"$OPT_{i}\"\n"))
        .collect();
    std::fs::write(
        feature.path().join("install.sh"),
        format!("#!/bin/sh\nset -e\n{printf}"),
    )
    .unwrap();
    let metadata = FeatureMetadata::read_dir(feature.path()).unwrap();
    let user: serde_json::Map<String, Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("opt-{i}"), json!(v)))
        .collect();
    let mut warnings = Vec::new();
    let user = user_options("echo", &Value::Object(user), &mut warnings).unwrap();
    let resolved = resolve_options("echo", &metadata, &user, &mut warnings).unwrap();
    let env = tempfile::tempdir().unwrap();
    std::fs::write(
        env.path().join(OPTIONS_ENV_FILE),
        render_options_env(&resolved).unwrap(),
    )
    .unwrap();
    let out = docker_run(
        IMAGE,
        feature.path(),
        env.path(),
        &format!("cd /feature && set -a && . /env/{OPTIONS_ENV_FILE} && set +a && sh ./install.sh"),
    );
    let (stdout, _) = succeeded(&out);
    let mut got: Vec<&str> = stdout.split('\0').collect();
    assert_eq!(got.pop(), Some(""));
    assert_eq!(got, values);
}

/// `features package` and `features publish` read `devcontainer-feature.json` as JSONC
/// (comments, trailing commas), like the reference CLI, and what they write is plain JSON
/// (spec-note 0453).
#[test]
fn package_and_publish_read_jsonc_feature_metadata() {
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("commented");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("devcontainer-feature.json"),
        "{\n  // the reference's own fixtures carry comments\n  \"id\": \"commented\",\n  \"version\": \"1.2.3\", /* block */\n  \"options\": {\"o\": {\"type\": \"string\", \"default\": \"d\",},},\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("install.sh"), "#!/bin/sh\necho ok\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    let packaged = crate::support::devcell()
        .args(["features", "package"])
        .arg(&dir)
        .arg("-o")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        packaged.status.success(),
        "{}",
        String::from_utf8_lossy(&packaged.stderr)
    );
    assert!(
        out.path()
            .join("devcontainer-feature-commented.tgz")
            .is_file()
    );
    let collection: Value = serde_json::from_slice(
        &std::fs::read(out.path().join("devcontainer-collection.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        collection["features"][0],
        json!({"id": "commented", "version": "1.2.3", "options": {"o": {"type": "string", "default": "d"}}})
    );

    // A syntax error is still an error, located.
    let bad = src.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("devcontainer-feature.json"),
        "{\"id\": \"bad\",\n \"version\": }",
    )
    .unwrap();
    let failed = crate::support::devcell()
        .args(["features", "package"])
        .arg(&bad)
        .arg("-o")
        .arg(out.path().join("bad-out"))
        .output()
        .unwrap();
    let err = crate::support::assert_failed(&failed);
    assert!(
        err.contains("devcontainer-feature.json` is invalid"),
        "{err}"
    );
    assert!(err.contains(":2:"), "{err}");

    let Some(reg) = crate::support::test_registry() else {
        return;
    };
    let ns = format!("{}/features", crate::support::unique("jsonc"));
    let published = crate::support::publish(&dir, &reg, &ns);
    assert_eq!(
        published["commented"]["publishedTags"],
        json!(["1", "1.2", "1.2.3", "latest"])
    );
    let manifest = Command::new("curl")
        .args([
            "-sf",
            "-H",
            "Accept: application/vnd.oci.image.manifest.v1+json",
        ])
        .arg(format!("http://{reg}/v2/{ns}/commented/manifests/1.2.3"))
        .output()
        .unwrap();
    let manifest: Value = serde_json::from_slice(&manifest.stdout).unwrap();
    let annotation: Value = serde_json::from_str(
        manifest["annotations"]["dev.containers.metadata"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(annotation["id"], "commented");
    assert_eq!(annotation["options"]["o"]["default"], "d");
}

/// Registry failures where the user looks (issue 28 item 5, spec-note 0653): a Feature whose
/// tag the local registry lacks, one whose repository it lacks, and one on a loopback port
/// nothing listens on each fail `up` with one `error:` line saying what failed (`not found`,
/// `no network to that registry`) and a hint; the `caused by:` chain only with
/// `--log-level debug`. Only the local registry and `127.0.0.1` are contacted.
#[test]
fn registry_failures_are_one_line_with_a_hint_and_the_chain_under_debug() {
    let Some(ctx) = TestContext::busybox("registry_failures_one_line") else {
        return;
    };
    let registry =
        std::env::var("DEVCELL_TEST_REGISTRY").unwrap_or_else(|_| "127.0.0.1:5000".into());
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let ctx = ctx.isolated();
    let cases = [
        (
            format!("{registry}/devcell-test/hostgit:no-such-tag"),
            "not found",
            "has no",
        ),
        (
            format!("{registry}/devcell-test/no-such-repository-28:1"),
            "not found",
            "has no",
        ),
        (
            format!("127.0.0.1:{closed}/devcell-test/f:1"),
            "no network to that registry",
            "cannot be reached",
        ),
    ];
    for (reference, failure, hint) in &cases {
        ctx.write(
            ".devcontainer/devcontainer.json",
            &json!({
                "image": crate::support::docker::BUSYBOX_IMAGE,
                "features": {reference.as_str(): {}}
            })
            .to_string(),
        );
        let run = ctx.run("up", &[]);
        assert_ne!(run.code, Some(0), "{}", run.stderr);
        let line = format!(
            "error: cannot resolve Feature `{reference}`: {failure} (pull manifest `{reference}`)"
        );
        assert!(
            run.stderr.lines().any(|l| l == line),
            "{line}\n{}",
            run.stderr
        );
        assert!(!run.stderr.contains("caused by:"), "{}", run.stderr);
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with("hint: ") && l.contains(hint)),
            "{}",
            run.stderr
        );
        let debug = ctx.run("up", &["--log-level", "debug"]);
        assert!(debug.stderr.contains("  caused by: "), "{}", debug.stderr);
    }
}

/// Issue 28 item 5 (spec-note 0653): the engine's own pull of a missing image tag from the
/// local registry is one line saying what failed, with the pull's hint and no `caused by:`,
/// which `--log-level debug` brings back; the JSON result's `description` keeps the chain.
#[test]
fn an_engine_pull_failure_is_one_line_and_the_chain_under_debug() {
    let Some(ctx) = TestContext::busybox("engine_pull_one_line") else {
        return;
    };
    let registry =
        std::env::var("DEVCELL_TEST_REGISTRY").unwrap_or_else(|_| "127.0.0.1:5000".into());
    let ctx = ctx.isolated();
    let reference = format!(
        "{registry}/devcell-test/no-such-image-{}:nope",
        crate::support::run_token()
    );
    ctx.write(
        ".devcontainer/devcontainer.json",
        &json!({ "image": reference }).to_string(),
    );
    let run = ctx.run("up", &[]);
    assert_ne!(run.code, Some(0), "{}", run.stderr);
    let line = format!("error: cannot pull image `{reference}`: not found");
    assert!(
        run.stderr.lines().any(|l| l == line),
        "{line}\n{}",
        run.stderr
    );
    assert!(!run.stderr.contains("caused by:"), "{}", run.stderr);
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("hint: ") && l.contains("check the reference")),
        "{}",
        run.stderr
    );
    let result: Value = serde_json::from_str(run.stdout.lines().last().unwrap_or("{}")).unwrap();
    assert!(
        result["description"]
            .as_str()
            .is_some_and(|d| d.contains("manifest unknown")),
        "{result}"
    );
    let debug = ctx.run("up", &["--log-level", "debug"]);
    assert!(
        debug.stderr.contains("  caused by: ") && debug.stderr.contains("manifest unknown"),
        "{}",
        debug.stderr
    );
}
