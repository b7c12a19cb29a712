//! [`TestContext`]: the one workspace builder, engine gate, cleanup guard and `devcell` runner the
//! integration tests share.
//!
//! A context owns a temporary folder laid out as
//!
//! ```text
//! <tmp>/            the workspace folder (`--workspace-folder`), `.devcontainer/` in it
//! <tmp>.home/       HOME        (only with [`TestContext::isolated`])
//! <tmp>.state/      DEVCELL_STATE_DIR, XDG_CACHE_HOME likewise
//! ```
//!
//! and, on drop (also when the test panics), force-removes what the test made on the engine:
//! every container labelled `devcontainer.local_folder=<workspace>` (and its anonymous volumes),
//! then what its [`Cleanup`] names: containers, volumes, networks and everything carrying one of
//! [`TestContext::clean_label`]'s labels, every image given to [`TestContext::remove_image`] /
//! [`TestContext::remove_images_matching`]. Nothing else: the engine is shared by concurrent
//! test runs. Tests without a workspace use a [`Cleanup`] of their own.

use crate::support::deadline::Bounded as _;
use std::cell::RefCell;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::docker::{BUSYBOX_IMAGE, engine_ready};

/// What one `devcell` run printed and how it ended.
#[derive(Debug, Clone)]
pub struct Run {
    /// The exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Everything on stdout, lossily decoded.
    pub stdout: String,
    /// Everything on stderr, lossily decoded.
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Whether the run exited 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Asserts exit 0 (showing both streams otherwise); returns `self` for chaining.
    #[track_caller]
    pub fn ok(&self) -> &Run {
        assert!(
            self.success(),
            "devcell exited {:?}\nstdout: {}\nstderr: {}",
            self.code,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts a failed run (exit 1, no panic); returns stderr.
    #[track_caller]
    pub fn failed(&self) -> &str {
        assert_eq!(
            self.code,
            Some(1),
            "expected exit 1\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        assert!(
            !self.stderr.contains("panicked"),
            "devcell panicked: {}",
            self.stderr
        );
        &self.stderr
    }

    /// The whole of stdout as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// A copy with every `from` in stdout and stderr replaced by `to` (a value only this run
    /// knows, such as a container's generated name, before a snapshot).
    pub fn redact(&self, from: &str, to: &str) -> Run {
        Run {
            code: self.code,
            stdout: self.stdout.replace(from, to),
            stderr: self.stderr.replace(from, to),
        }
    }

    /// The last line of stdout as JSON (the result line of `up`, `build`, `set-up`, …).
    #[track_caller]
    pub fn last_json(&self) -> Value {
        let line = self.stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "the last line of stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// Every line of stderr that is a JSON object (the `--log-format json` records).
    pub fn stderr_json(&self) -> Vec<Value> {
        self.stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect()
    }
}

/// A temporary workspace, the environment `devcell` runs in, and what to remove afterwards.
pub struct TestContext {
    dir: tempfile::TempDir,
    root: PathBuf,
    isolated: bool,
    env: Vec<(OsString, OsString)>,
    delete_on_drop: bool,
    // Dropped after `Drop for TestContext` has removed the workspace's containers.
    cleanup: Cleanup,
}

impl TestContext {
    /// An empty workspace folder (prefix `devcell-<name>-`) with the default environment of
    /// [`super::devcell`] (`HOME=/home/tester`, `USER`, `PATH`, `DOCKER_HOST`).
    pub fn new(name: &str) -> TestContext {
        let dir = tempfile::Builder::new()
            .prefix(&format!("devcell-{name}-"))
            .tempdir()
            .expect("temp dir");
        let root = dir.path().to_path_buf();
        TestContext {
            dir,
            root,
            isolated: false,
            env: Vec::new(),
            delete_on_drop: false,
            cleanup: Cleanup::default(),
        }
    }

    /// [`Self::new`] when the engine and `image` are there (the engine gate: panics when
    /// `DEVCELL_TEST_ENGINE=1` and they are not, `None` with a note otherwise).
    pub fn engine(test: &str, image: &str) -> Option<TestContext> {
        // A bounded prefix of `-`-separated words: the folder's name ends up in image names
        // (`vsc-<folder>-…`), where `_-` is not allowed.
        let prefix: String = test
            .chars()
            .take(24)
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        engine_ready(test, image).then(|| TestContext::new(&prefix))
    }

    /// [`Self::engine`] with `devcell-test/busybox:1`.
    pub fn busybox(test: &str) -> Option<TestContext> {
        Self::engine(test, BUSYBOX_IMAGE)
    }

    /// Gives `devcell` its own `HOME`, state folder (`DEVCELL_STATE_DIR`) and cache
    /// (`XDG_CACHE_HOME`) next to the workspace, so agent-product state never leaks between
    /// tests, and no `USER`.
    pub fn isolated(mut self) -> TestContext {
        self.isolated = true;
        std::fs::create_dir_all(self.home()).expect("mkdir home");
        self
    }

    /// Runs `devcell delete --workspace-folder <workspace>` on drop (before the engine cleanup):
    /// the agent product's own teardown of its container, volumes and state.
    pub fn delete_on_drop(mut self) -> TestContext {
        self.delete_on_drop = true;
        self
    }

    /// Moves the workspace folder to `<tmp>/<rel>` (e.g. a repository inside a parent folder),
    /// creating it.
    pub fn at(mut self, rel: &str) -> TestContext {
        let root = self.dir.path().join(rel);
        std::fs::create_dir_all(&root).expect("mkdir workspace");
        self.root = root;
        self
    }

    /// Sets an environment variable for every later `devcell` run.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> TestContext {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Writes `.devcontainer/devcontainer.json`, with `IMAGE` replaced by the busybox test image.
    pub fn config(self, json: &str) -> TestContext {
        self.write(
            ".devcontainer/devcontainer.json",
            &json.replace("IMAGE", BUSYBOX_IMAGE),
        );
        self
    }

    /// Writes `.devcontainer/devcontainer.json` from a JSON value (compact, one line, so error
    /// positions are columns of line 1).
    pub fn config_json(self, config: &Value) -> TestContext {
        self.write(".devcontainer/devcontainer.json", &config.to_string());
        self
    }

    /// Writes `<workspace>/<rel>`, creating its parent folders.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// A local Feature `./<id>` in `.devcontainer/`: its `devcontainer-feature.json` and an
    /// `install.sh` of `#!/bin/sh`, `set -e` and `install`.
    pub fn feature(&self, id: &str, metadata: &str, install: &str) {
        self.write(
            &format!(".devcontainer/{id}/devcontainer-feature.json"),
            metadata,
        );
        self.write(
            &format!(".devcontainer/{id}/install.sh"),
            &format!("#!/bin/sh\nset -e\n{install}\n"),
        );
    }

    /// The workspace folder.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The temporary folder that holds the workspace (and, when isolated, home and state).
    pub fn tmp(&self) -> &Path {
        self.dir.path()
    }

    /// `HOME` of an isolated context.
    pub fn home(&self) -> PathBuf {
        self.tmp().join(".home")
    }

    /// `DEVCELL_STATE_DIR` of an isolated context.
    pub fn state(&self) -> PathBuf {
        self.tmp().join(".state")
    }

    /// A `devcell` command with this context's environment (nothing else of the caller's).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("devcell"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null());
        if self.isolated {
            cmd.env("HOME", self.home())
                .env("DEVCELL_STATE_DIR", self.state())
                .env("XDG_CACHE_HOME", self.tmp().join(".cache"));
        } else {
            cmd.env("HOME", "/home/tester").env("USER", "tester");
        }
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            cmd.env("DOCKER_HOST", host);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `devcell <args…>` as given.
    pub fn devcell(&self, args: &[&str]) -> Run {
        self.command()
            .args(args)
            .long_output()
            .expect("devcell runs")
            .into()
    }

    /// Runs `devcell <command> --workspace-folder <workspace> <args…>`.
    pub fn run(&self, command: &str, args: &[&str]) -> Run {
        self.command()
            .args(command.split(' '))
            .arg("--workspace-folder")
            .arg(self.path())
            .args(args)
            .long_output()
            .expect("devcell runs")
            .into()
    }

    /// [`Self::run`], as the raw [`Output`] (for tests that look at bytes or the exit status).
    pub fn output(&self, command: &str, args: &[&str]) -> Output {
        self.command()
            .args(command.split(' '))
            .arg("--workspace-folder")
            .arg(self.path())
            .args(args)
            .long_output()
            .expect("devcell runs")
    }

    /// `devcell up <args…>` that must succeed with `outcome: success`; returns the result line.
    #[track_caller]
    pub fn up(&self, args: &[&str]) -> Value {
        let run = self.run("up", args);
        run.ok();
        let result = run.last_json();
        assert_eq!(result["outcome"], "success", "{result}");
        result
    }

    /// `devcell exec … sh -c <script>`: (exit code, stdout, stderr).
    pub fn sh(&self, script: &str) -> (i32, String, String) {
        let run = self.run("exec", &["sh", "-c", script]);
        (run.code.unwrap_or(-1), run.stdout, run.stderr)
    }

    /// Ids of the containers labelled `devcontainer.local_folder=<workspace>`.
    pub fn containers(&self) -> Vec<String> {
        docker_lines(&[
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            &format!("label=devcontainer.local_folder={}", self.path().display()),
        ])
    }

    /// What else this context removes on drop (see [`Cleanup`]).
    pub fn cleanup(&self) -> &Cleanup {
        &self.cleanup
    }

    /// Removes the image (by reference) on drop.
    pub fn remove_image(&self, image: &str) {
        self.cleanup.image(image);
    }

    /// Removes, on drop, every image matching `pattern` (`docker images --filter
    /// reference=<pattern>`: `*` matches within a path component, e.g. `vsc-<folder>-*`).
    pub fn remove_images_matching(&self, pattern: &str) {
        self.cleanup.images_matching(pattern);
    }

    /// Removes, on drop, every container, volume and network labelled `label` (`key=value`).
    pub fn clean_label(&self, label: &str) {
        self.cleanup.label(label);
    }
}

/// What a test made outside its workspace, force-removed on drop (also when the test panics),
/// in this order: containers (with their anonymous volumes), everything carrying a label,
/// volumes, networks, images (the latest first, so an image goes before the one it was built
/// on), images matching a pattern or carrying a label; host files too. Only what was named here: the engine is
/// shared. [`TestContext`] holds one; tests without a workspace use their own.
#[derive(Default)]
pub struct Cleanup {
    containers: RefCell<Vec<String>>,
    labels: RefCell<Vec<String>>,
    volumes: RefCell<Vec<String>>,
    networks: RefCell<Vec<String>>,
    images: RefCell<Vec<String>>,
    image_patterns: RefCell<Vec<String>>,
    image_labels: RefCell<Vec<String>>,
    files: RefCell<Vec<PathBuf>>,
}

impl Cleanup {
    /// Removes the container (name or id) and its anonymous volumes.
    pub fn container(&self, name: &str) -> &Cleanup {
        self.containers.borrow_mut().push(name.to_string());
        self
    }

    /// Removes every container, volume and network labelled `label` (`key=value`).
    pub fn label(&self, label: &str) -> &Cleanup {
        self.labels.borrow_mut().push(label.to_string());
        self
    }

    /// Removes the named volume.
    pub fn volume(&self, name: &str) -> &Cleanup {
        self.volumes.borrow_mut().push(name.to_string());
        self
    }

    /// Removes the network (name or id).
    pub fn network(&self, name: &str) -> &Cleanup {
        self.networks.borrow_mut().push(name.to_string());
        self
    }

    /// Removes the image (reference or id).
    pub fn image(&self, image: &str) -> &Cleanup {
        self.images.borrow_mut().push(image.to_string());
        self
    }

    /// Removes the layers a classic `docker build` printed (` ---> <12 hex digits>`): a failed
    /// build keeps the steps that succeeded as untagged images.
    pub fn build_layers(&self, build_output: &str) -> &Cleanup {
        for line in build_output.lines() {
            if let Some(id) = line.trim().strip_prefix("---> ")
                && id.len() == 12
                && id.chars().all(|c| c.is_ascii_hexdigit())
            {
                self.image(id);
            }
        }
        self
    }

    /// Removes every image matching `pattern` (see [`remove_images_matching`]).
    pub fn images_matching(&self, pattern: &str) -> &Cleanup {
        self.image_patterns.borrow_mut().push(pattern.to_string());
        self
    }

    /// Removes every image labelled `label` (`key=value`, e.g. set by a test's Dockerfile and
    /// inherited by devcell's layers on top).
    pub fn images_labelled(&self, label: &str) -> &Cleanup {
        self.image_labels.borrow_mut().push(label.to_string());
        self
    }

    /// Removes a file the test wrote on the host outside its temporary folders.
    pub fn file(&self, path: &Path) -> &Cleanup {
        self.files.borrow_mut().push(path.to_path_buf());
        self
    }

    fn engine_work(&self) -> bool {
        !(self.containers.borrow().is_empty()
            && self.labels.borrow().is_empty()
            && self.volumes.borrow().is_empty()
            && self.networks.borrow().is_empty()
            && self.images.borrow().is_empty()
            && self.image_patterns.borrow().is_empty()
            && self.image_labels.borrow().is_empty())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for path in self.files.take() {
            let _ = std::fs::remove_file(path);
        }
        if !self.engine_work()
            || Command::new("docker")
                .arg("--version")
                .bounded_output()
                .is_err()
        {
            return;
        }
        for name in self.containers.take() {
            docker_quiet(&["rm", "-f", "-v", &name]);
        }
        for label in self.labels.take() {
            remove_labelled(&label);
        }
        for name in self.volumes.take() {
            docker_quiet(&["volume", "rm", "-f", &name]);
        }
        for name in self.networks.take() {
            docker_quiet(&["network", "rm", &name]);
        }
        for image in self.images.take().iter().rev() {
            docker_quiet(&["rmi", "-f", image]);
        }
        for pattern in self.image_patterns.take() {
            remove_images_matching(&pattern);
        }
        for label in self.image_labels.take() {
            let filter = format!("label={label}");
            for id in docker_lines(&["images", "-q", "--no-trunc", "--filter", &filter]) {
                docker_quiet(&["rmi", "-f", &id]);
            }
        }
    }
}

/// The non-empty lines `docker <args…>` printed on stdout (empty when docker fails).
pub fn docker_lines(args: &[&str]) -> Vec<String> {
    Command::new("docker")
        .args(args)
        .bounded_output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn docker_quiet(args: &[&str]) {
    let _ = Command::new("docker").args(args).bounded_output();
}

/// Removes what carries `label` (`key=value`): containers (with their anonymous volumes), then
/// volumes and networks. The cleanup guard's one routine, also for tests without a context.
pub fn remove_labelled(label: &str) {
    let filter = format!("label={label}");
    for id in docker_lines(&["ps", "-aq", "--no-trunc", "--filter", &filter]) {
        docker_quiet(&["rm", "-f", "-v", &id]);
    }
    for name in docker_lines(&["volume", "ls", "-q", "--filter", &filter]) {
        docker_quiet(&["volume", "rm", "-f", &name]);
    }
    for id in docker_lines(&["network", "ls", "-q", "--filter", &filter]) {
        docker_quiet(&["network", "rm", &id]);
    }
}

/// Removes every image matching `pattern` (a `docker images --filter reference=` pattern).
pub fn remove_images_matching(pattern: &str) {
    for image in docker_lines(&[
        "images",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        "--filter",
        &format!("reference={pattern}"),
    ]) {
        docker_quiet(&["rmi", "-f", &image]);
    }
}

/// Runs [`remove_images_matching`] on drop.
pub struct ImagePatternGuard(pub String);

impl Drop for ImagePatternGuard {
    fn drop(&mut self) {
        remove_images_matching(&self.0);
    }
}

/// Force-removes the named volume on drop.
pub struct VolumeGuard(pub String);

impl Drop for VolumeGuard {
    fn drop(&mut self) {
        docker_quiet(&["volume", "rm", "-f", &self.0]);
    }
}

/// A guard that runs [`remove_labelled`] for each label on drop.
pub struct LabelGuard(pub Vec<String>);

impl LabelGuard {
    /// For what devcell made for the workspace folder `folder`
    /// (`devcontainer.local_folder=<folder>`).
    pub fn workspace(folder: &Path) -> LabelGuard {
        LabelGuard(vec![format!(
            "devcontainer.local_folder={}",
            folder.display()
        )])
    }
}

impl Drop for LabelGuard {
    fn drop(&mut self) {
        for label in &self.0 {
            remove_labelled(label);
        }
    }
}

impl Drop for TestContext {
    fn drop(&mut self) {
        if self.delete_on_drop {
            let _ = self.run("delete", &[]);
        }
        // Only touch the engine when the test may have used it; `cleanup` goes next.
        if !self.path().join(".devcontainer").exists()
            || Command::new("docker")
                .arg("--version")
                .bounded_output()
                .is_err()
        {
            return;
        }
        for id in self.containers() {
            docker_quiet(&["rm", "-f", "-v", &id]);
        }
    }
}
