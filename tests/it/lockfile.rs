//! `devcontainer-lock.json` in `up` and `handoff` (spec-notes 0280-0282), against the real local
//! registry and engine: a Feature published by devcell, its tag moved by a second publish, and
//! the lockfile pinning, verifying, staying frozen, or being ignored.
//!
//! Needs `DEVCELL_TEST_REGISTRY` and the engine (both required under `DEVCELL_TEST_ENGINE=1`).

use crate::support::deadline::Bounded as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::context::TestContext;
use crate::support::docker::BUSYBOX_IMAGE;
use crate::support::{devcell, free_port, publish, test_registry, unique};

const LOCK: &str = ".devcontainer/devcontainer-lock.json";
const CONFIG: &str = ".devcontainer/devcontainer.json";
const SHOWN: &str = "/usr/local/share/lockdemo.txt";

/// A Feature `lockdemo` at `version` whose `install.sh` writes `text` to [`SHOWN`].
fn feature(version: &str, text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("lockdemo");
    std::fs::create_dir(&f).unwrap();
    std::fs::write(
        f.join("devcontainer-feature.json"),
        format!(r#"{{"id": "lockdemo", "version": "{version}", "name": "Lock demo"}}"#),
    )
    .unwrap();
    std::fs::write(
        f.join("install.sh"),
        format!("#!/bin/sh\nset -e\nmkdir -p /usr/local/share\necho {text} > {SHOWN}\n"),
    )
    .unwrap();
    dir
}

/// Publishes `lockdemo` at `version` to `<registry>/<namespace>` and returns its manifest digest.
fn publish_lockdemo(registry: &str, namespace: &str, version: &str, text: &str) -> String {
    let dir = feature(version, text);
    let out = publish(&dir.path().join("lockdemo"), registry, namespace);
    out["lockdemo"]["digest"]
        .as_str()
        .unwrap_or_else(|| panic!("publish result: {out}"))
        .to_string()
}

/// A workspace whose devcontainer.json asks for `feature`; its [`TestContext`] removes the
/// containers and the images they run on drop.
struct Workspace {
    ctx: TestContext,
}

impl Workspace {
    /// `ctx` from the engine gate.
    fn new(ctx: TestContext, feature: &str) -> Workspace {
        std::fs::create_dir(ctx.path().join(".devcontainer")).unwrap();
        ctx.write("README.md", "the user's file\n");
        let ws = Workspace { ctx };
        ws.configure(feature);
        ws
    }

    fn path(&self) -> &Path {
        self.ctx.path()
    }

    fn configure(&self, feature: &str) {
        std::fs::write(
            self.path().join(CONFIG),
            format!(
                r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "features": {{"{feature}": {{}}}}}}"#
            ),
        )
        .unwrap();
    }

    fn lock(&self) -> Option<Vec<u8>> {
        std::fs::read(self.path().join(LOCK)).ok()
    }

    fn run(&self, command: &str, args: &[&str]) -> Output {
        self.ctx.output(command, args)
    }

    /// `up --remove-existing-container <args>` (so Features are resolved every time): the
    /// result line and stderr.
    fn up(&self, args: &[&str]) -> (Option<i32>, Value, String) {
        let mut all = vec!["--remove-existing-container"];
        all.extend(args);
        let out = self.run("up", &all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let text = String::from_utf8_lossy(&out.stdout);
        let result: Value = serde_json::from_str(text.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("no result line ({e}): {text}\n{stderr}"));
        if let Some(id) = result["containerId"].as_str() {
            let image = docker(&["inspect", "-f", "{{.Config.Image}}", id]);
            self.ctx.remove_image(&image);
        }
        (out.status.code(), result, stderr)
    }

    /// A successful `up`: the text the Feature installed.
    fn up_shows(&self, args: &[&str]) -> String {
        let (code, result, stderr) = self.up(args);
        assert_eq!(code, Some(0), "{result}\n{stderr}");
        let out = self.run("exec", &["cat", SHOWN]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn containers(&self) -> Vec<String> {
        self.ctx.containers()
    }

    /// Every file but the lockfile, by path.
    fn files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        walk(self.path(), self.path(), &mut out);
        out.remove(Path::new(LOCK));
        out
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            out.insert(rel, std::fs::read(&path).unwrap());
        }
    }
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .bounded_output()
        .expect("docker");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn mtime(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// The Reproducibility evidence of `devcell audit` for the workspace's container, as text.
fn reproducibility(ws: &Workspace) -> String {
    let out = devcell()
        .args(["audit", "--format", "json", "--workspace-folder"])
        .arg(ws.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let controls = v["result"]["controls"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"));
    let c = controls
        .iter()
        .find(|c| c["control"] == "reproducibility")
        .unwrap_or_else(|| panic!("{v}"));
    c.to_string()
}

#[test]
fn up_writes_pins_verifies_and_freezes_the_lockfile() {
    let Some(ctx) = TestContext::busybox("up_writes_pins_verifies_and_freezes_the_lockfile") else {
        return;
    };
    let Some(registry) = test_registry() else {
        return;
    };
    let ns = unique("lock");
    let one = publish_lockdemo(&registry, &ns, "1.0.0", "one");
    let key = format!("{registry}/{ns}/lockdemo:1");
    let ws = Workspace::new(ctx, &key);
    let user_files = ws.files();
    let lock_path = ws.path().join(LOCK);
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap();

    // Mutually exclusive flags: a usage error, nothing written or created.
    let out = ws.run("up", &["--no-lockfile", "--frozen-lockfile"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--no-lockfile and --frozen-lockfile are mutually exclusive.")
    );
    assert!(ws.lock().is_none() && ws.containers().is_empty());

    // 1. `up` writes the lockfile with the manifest digest (the deprecated flag only warns).
    let (code, result, stderr) = ws.up(&["--cache-dir", cache_arg, "--experimental-lockfile"]);
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    assert!(
        stderr.contains("`--experimental-lockfile` is deprecated"),
        "{stderr}"
    );
    let written = ws.lock().expect("up wrote the lockfile");
    let expected = format!(
        "{{\n  \"features\": {{\n    \"{key}\": {{\n      \"version\": \"1.0.0\",\n      \"resolved\": \"{registry}/{ns}/lockdemo@{one}\",\n      \"integrity\": \"{one}\"\n    }}\n  }}\n}}\n"
    );
    assert_eq!(String::from_utf8_lossy(&written), expected);
    let id = result["containerId"].as_str().unwrap();
    let label = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"devcell.feature_digests\"}}",
        id,
    ]);
    assert_eq!(label, format!(r#"{{"{key}":"{one}"}}"#));
    let evidence = reproducibility(&ws);
    assert!(evidence.contains("digest(s) match"), "{evidence}");
    let written_at = mtime(&lock_path);

    // 2. The tag moves to different content.
    let two = publish_lockdemo(&registry, &ns, "1.0.1", "two");
    assert_ne!(one, two);

    // 3. With the lockfile, a fresh cache still installs the locked content; the file is not
    //    rewritten.
    let fresh = tempfile::tempdir().unwrap();
    let fresh_arg = fresh.path().to_str().unwrap();
    assert_eq!(ws.up_shows(&["--cache-dir", fresh_arg]), "one");
    assert_eq!(ws.lock().unwrap(), written);
    assert_eq!(
        mtime(&lock_path),
        written_at,
        "an unchanged lockfile is not rewritten"
    );
    // `features resolve-dependencies` honours it too (and never writes it).
    let out = devcell()
        .args(["features", "resolve-dependencies", "--workspace-folder"])
        .arg(ws.path())
        .args(["--cache-dir", fresh_arg])
        .output()
        .unwrap();
    let order = crate::support::stdout_json(&out);
    assert_eq!(
        order["installOrder"][0]["id"],
        format!("{registry}/{ns}/lockdemo@{one}"),
        "{order}"
    );
    assert_eq!(mtime(&lock_path), written_at);

    // 4. `--no-lockfile` resolves the tag afresh and writes nothing; the audit sees the
    //    container no longer matches the lockfile.
    assert_eq!(
        ws.up_shows(&["--cache-dir", fresh_arg, "--no-lockfile"]),
        "two"
    );
    assert_eq!(ws.lock().unwrap(), written);
    let evidence = reproducibility(&ws);
    assert!(
        evidence.contains("does not match devcontainer-lock.json")
            && evidence.contains(&one)
            && evidence.contains(&two),
        "{evidence}"
    );

    // 5. `--frozen-lockfile` with a changed configuration fails before building, naming the
    //    difference; the lockfile is byte-identical and no container is left.
    let changed = format!("{registry}/{ns}/lockdemo:1.0");
    ws.configure(&changed);
    let (code, result, _) = ws.up(&["--cache-dir", fresh_arg, "--frozen-lockfile"]);
    assert_eq!(code, Some(1), "{result}");
    let text = result.to_string();
    assert!(text.contains("lockfile does not match"), "{text}");
    assert!(
        text.contains(&format!("`{changed}` is not in the lockfile")),
        "{text}"
    );
    assert!(
        text.contains(&format!("`{key}` is locked but no longer used")),
        "{text}"
    );
    assert_eq!(ws.lock().unwrap(), written);
    assert!(ws.containers().is_empty());
    ws.configure(&key);

    // 6. A frozen lockfile matching the configuration works and is not written (here through
    //    the deprecated alias, which warns).
    let (code, result, stderr) =
        ws.up(&["--cache-dir", fresh_arg, "--experimental-frozen-lockfile"]);
    assert_eq!(code, Some(0), "{result}\n{stderr}");
    assert!(stderr.contains("use `--frozen-lockfile`"), "{stderr}");
    assert_eq!(mtime(&lock_path), written_at);

    // 7. `--frozen-lockfile` without a lockfile fails and creates none.
    let aside = ws.path().join("lock.aside");
    std::fs::rename(&lock_path, &aside).unwrap();
    let (code, result, _) = ws.up(&["--cache-dir", fresh_arg, "--frozen-lockfile"]);
    assert_eq!(code, Some(1), "{result}");
    assert!(
        result.to_string().contains("lockfile does not exist"),
        "{result}"
    );
    assert!(ws.lock().is_none());

    // 8. `--no-lockfile` without a lockfile creates none either.
    assert_eq!(
        ws.up_shows(&["--cache-dir", fresh_arg, "--no-lockfile"]),
        "two"
    );
    assert!(ws.lock().is_none());
    std::fs::rename(&aside, &lock_path).unwrap();

    // 9. A locked digest the registry does not have: a clear error naming the Feature and the
    //    digest; the lockfile is left as it is.
    let gone = format!("sha256:{}", "0".repeat(64));
    let edited = String::from_utf8(written.clone())
        .unwrap()
        .replace(&one, &gone);
    std::fs::write(&lock_path, &edited).unwrap();
    let empty_cache = tempfile::tempdir().unwrap();
    let (code, result, _) = ws.up(&["--cache-dir", empty_cache.path().to_str().unwrap()]);
    assert_eq!(code, Some(1), "{result}");
    let text = result.to_string();
    assert!(
        text.contains(&format!("`{key}` at its locked digest `{gone}`")),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&lock_path).unwrap(), edited);
    std::fs::write(&lock_path, &written).unwrap();

    // 10. With the lockfile and a warm cache no registry is needed: the registry is mapped to
    //     a closed port and `up` still works; a cold cache then fails (the proof).
    let settings = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        settings.path(),
        format!(
            "[registries]\nmirrors = {{ \"{registry}\" = \"127.0.0.1:{}\" }}\n",
            free_port()
        ),
    )
    .unwrap();
    let settings_arg = settings.path().to_str().unwrap();
    assert_eq!(
        ws.up_shows(&["--cache-dir", cache_arg, "--config-file", settings_arg]),
        "one"
    );
    let cold = tempfile::tempdir().unwrap();
    let (code, result, _) = ws.up(&[
        "--cache-dir",
        cold.path().to_str().unwrap(),
        "--config-file",
        settings_arg,
    ]);
    assert_eq!(code, Some(1), "{result}");

    // 11. An empty lockfile asks to be initialised: written from a fresh resolution.
    std::fs::write(&lock_path, "").unwrap();
    assert_eq!(ws.up_shows(&["--cache-dir", fresh_arg]), "two");
    let initialised = String::from_utf8(ws.lock().unwrap()).unwrap();
    assert!(
        initialised.contains(&format!("\"integrity\": \"{two}\"")),
        "{initialised}"
    );

    // The user's other files never changed.
    assert_eq!(ws.files(), user_files);
}

/// A single-repository workspace handed to an agent that copies what the Feature installed into
/// the workspace (`seen.txt`).
struct HandoffEnv {
    /// Isolated, the workspace in `repo/`; deleted on drop.
    ctx: TestContext,
    repo: PathBuf,
}

impl HandoffEnv {
    /// `ctx` from the engine gate.
    fn new(ctx: TestContext, feature: &str) -> HandoffEnv {
        let ctx = ctx.isolated().at("repo").delete_on_drop();
        let repo = ctx.path().to_path_buf();
        std::fs::create_dir_all(repo.join(".devcontainer")).unwrap();
        std::fs::write(
            repo.join(CONFIG),
            format!(
                r#"{{"image": "{BUSYBOX_IMAGE}", "remoteUser": "nobody", "features": {{"{feature}": {{}}}}}}"#
            ),
        )
        .unwrap();
        std::fs::write(repo.join("README.md"), "repo\n").unwrap();
        crate::support::git::git(&repo, &["init", "-q"]);
        crate::support::git::git(&repo, &["add", "-A"]);
        crate::support::git::git(&repo, &["commit", "-q", "-m", "initial"]);
        std::fs::write(
            ctx.tmp().join("config.toml"),
            format!(
                "[agents.show]\ncommand = [\"sh\", \"-c\", \"cat {SHOWN} > /workspace/seen.txt\"]\n"
            ),
        )
        .unwrap();
        // The container user (nobody) writes the workspace.
        let status = Command::new("chmod")
            .args(["-R", "a+rwX"])
            .arg(ctx.tmp())
            .status()
            .unwrap();
        assert!(status.success());
        HandoffEnv {
            repo: std::fs::canonicalize(&repo).unwrap(),
            ctx,
        }
    }

    fn devcell(&self, args: &[&str]) -> Output {
        let out = self
            .ctx
            .command()
            .args(args)
            .long_output()
            .expect("devcell runs");
        let image = docker(&[
            "ps",
            "-a",
            "--filter",
            &format!("label=devcontainer.local_folder={}", self.repo.display()),
            "--format",
            "{{.Image}}",
        ]);
        for image in image.lines() {
            self.ctx.remove_image(image);
        }
        out
    }

    /// `handoff` (after deleting any container, so Features are resolved) → (exit code, envelope).
    fn handoff(&self, extra: &[&str]) -> (Option<i32>, Value) {
        self.delete();
        let repo = self.repo.to_str().unwrap();
        let config = self.ctx.tmp().join("config.toml");
        let mut args = vec![
            "handoff",
            "--workspace-folder",
            repo,
            "--agent",
            "show",
            "--config-file",
            config.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend(extra);
        let out = self.devcell(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
            panic!(
                "no envelope ({e}): {text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), v)
    }

    fn delete(&self) {
        self.devcell(&["delete", "--workspace-folder", self.repo.to_str().unwrap()]);
    }

    fn seen(&self) -> String {
        std::fs::read_to_string(self.repo.join("seen.txt"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// The Feature digests of the context file.
    fn context_digests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.repo.join(".devcell/context.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        v["image"]["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["digest"].clone())
            .collect()
    }
}

/// `--frozen-lockfile` without a lockfile, or with an empty one, fails with the reference CLI's
/// message (`Lockfile does not exist.` / `Lockfile does not match.`, devcell's detail after it)
/// before any registry is asked: the Feature's registry here is a closed local port, which
/// would otherwise be the error. Spec-note 0454.
#[test]
fn frozen_without_a_lockfile_fails_before_any_registry_request() {
    let Some(ctx) = TestContext::busybox("lockfile_frozen_early") else {
        return;
    };
    let port = free_port();
    let ctx = ctx.isolated().config(&format!(
        r#"{{"image": "IMAGE", "features": {{"127.0.0.1:{port}/devcell/none:1": {{}}}}}}"#
    ));
    let lock = ctx.path().join(".devcontainer/devcontainer-lock.json");
    let missing = ctx.run("build", &["--frozen-lockfile"]);
    missing.failed();
    let v = missing.json();
    assert_eq!(v["message"], "Lockfile does not exist.", "{v}");
    assert!(
        v["description"].to_string().contains("forbids creating it"),
        "{v}"
    );
    assert!(
        !missing.stderr.contains(&port.to_string()),
        "{}",
        missing.stderr
    );
    assert!(!lock.exists());

    std::fs::write(&lock, "").unwrap();
    let empty = ctx.run("build", &["--frozen-lockfile"]);
    empty.failed();
    let v = empty.json();
    assert_eq!(v["message"], "Lockfile does not match.", "{v}");
    assert!(
        v["description"]
            .to_string()
            .contains("the lockfile is empty"),
        "{v}"
    );
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "");
}

#[test]
fn handoff_honours_the_lockfile_and_never_writes_it() {
    let Some(ctx) = TestContext::busybox("handoff_honours_the_lockfile_and_never_writes_it") else {
        return;
    };
    let Some(registry) = test_registry() else {
        return;
    };
    let ns = unique("hlock");
    let one = publish_lockdemo(&registry, &ns, "1.0.0", "one");
    let two = publish_lockdemo(&registry, &ns, "1.0.1", "two");
    let key = format!("{registry}/{ns}/lockdemo:1");
    let env = HandoffEnv::new(ctx, &key);
    let lock_path = env.repo.join(LOCK);

    // Without a lockfile: `--frozen-lockfile` fails and creates none; a plain handoff installs
    // the tag's current content and writes no lockfile either.
    let (code, v) = env.handoff(&["--frozen-lockfile"]);
    assert_ne!(code, Some(0), "{v}");
    assert!(v.to_string().contains("lockfile does not exist"), "{v}");
    assert!(!lock_path.exists());
    let (code, v) = env.handoff(&[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(env.seen(), "two");
    assert!(!lock_path.exists(), "handoff wrote a lockfile");
    assert_eq!(env.context_digests(), vec![Value::String(two.clone())]);

    // A committed lockfile pinning the older digest: installed, verified, left byte-identical,
    // and the context file names the locked digest.
    let lock = format!(
        "{{\n  \"features\": {{\n    \"{key}\": {{\n      \"version\": \"1.0.0\",\n      \"resolved\": \"{registry}/{ns}/lockdemo@{one}\",\n      \"integrity\": \"{one}\"\n    }}\n  }}\n}}\n"
    );
    std::fs::write(&lock_path, &lock).unwrap();
    for flags in [&[][..], &["--frozen-lockfile"][..]] {
        let (code, v) = env.handoff(flags);
        assert_eq!(code, Some(0), "{flags:?}: {v}");
        assert_eq!(env.seen(), "one", "{flags:?}");
        assert_eq!(env.context_digests(), vec![Value::String(one.clone())]);
        assert_eq!(std::fs::read_to_string(&lock_path).unwrap(), lock);
    }

    // A lockfile that does not match (another tag in the configuration): a plain handoff warns
    // and leaves it; `--frozen-lockfile` refuses.
    let stale = lock.replace(
        &format!("{key}\""),
        &format!("{registry}/{ns}/lockdemo:1.0\""),
    );
    std::fs::write(&lock_path, &stale).unwrap();
    let (code, v) = env.handoff(&[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(env.seen(), "two");
    assert!(v["warnings"].to_string().contains("does not match"), "{v}");
    let (code, v) = env.handoff(&["--frozen-lockfile"]);
    assert_ne!(code, Some(0), "{v}");
    assert!(v.to_string().contains("lockfile does not match"), "{v}");
    assert_eq!(std::fs::read_to_string(&lock_path).unwrap(), stale);
}

/// The reference CLI (`DEVCELL_TEST_REFCLI`, else `/opt/refcli/…` when installed); `None` skips
/// with a note.
fn reference_cli(test: &str) -> Option<PathBuf> {
    if let Ok(path) = std::env::var("DEVCELL_TEST_REFCLI") {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{test}: DEVCELL_TEST_REFCLI names no file");
        return Some(path);
    }
    let default = PathBuf::from("/opt/refcli/node_modules/.bin/devcontainer");
    if default.is_file() {
        return Some(default);
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("note: {test} skipped: no reference CLI (set DEVCELL_TEST_REFCLI)");
    }
    None
}

#[test]
fn lockfiles_are_interchangeable_with_the_reference_cli() {
    let test = "lockfiles_are_interchangeable_with_the_reference_cli";
    let Some(ctx) = TestContext::busybox(test) else {
        return;
    };
    let Some(registry) = test_registry() else {
        return;
    };
    let Some(cli) = reference_cli(test) else {
        return;
    };
    // The reference CLI speaks plain HTTP only to `localhost`.
    let port = registry.rsplit(':').next().unwrap();
    let ns = unique("reflock");
    let one = publish_lockdemo(&registry, &ns, "1.0.0", "one");
    let key = format!("localhost:{port}/{ns}/lockdemo:1");
    let ws = Workspace::new(ctx, &key);
    let base = ws
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    let reference_build = |frozen: bool| {
        let mut cmd = Command::new(&cli);
        cmd.args(["build", "--workspace-folder"]).arg(ws.path());
        if frozen {
            cmd.arg("--frozen-lockfile");
        }
        let out = cmd.long_output().expect("the reference CLI runs");
        let text = String::from_utf8_lossy(&out.stdout);
        for image in docker(&[
            "images",
            "--format",
            "{{.Repository}}",
            "--filter",
            &format!("reference=vsc-{base}-*"),
        ])
        .lines()
        {
            ws.ctx.remove_image(image);
        }
        (out.status.success(), text.into_owned())
    };

    // devcell and the reference write the same bytes.
    assert_eq!(ws.up_shows(&[]), "one");
    let ours = ws.lock().expect("devcell wrote the lockfile");
    assert!(String::from_utf8_lossy(&ours).contains(&one));
    std::fs::remove_file(ws.path().join(LOCK)).unwrap();
    let (ok, text) = reference_build(false);
    assert!(ok, "reference build: {text}");
    assert_eq!(
        String::from_utf8_lossy(&ws.lock().expect("the reference wrote the lockfile")),
        String::from_utf8_lossy(&ours)
    );

    // After the tag moves, each accepts the other's lockfile as frozen and installs the
    // locked content.
    publish_lockdemo(&registry, &ns, "1.0.1", "two");
    let (ok, text) = reference_build(true);
    assert!(ok, "reference build --frozen-lockfile: {text}");
    assert_eq!(ws.up_shows(&["--frozen-lockfile"]), "one");
    assert_eq!(ws.lock().unwrap(), ours);
}
