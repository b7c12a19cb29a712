//! `features test`: each test of a Feature collection ([`crate::features::test::plan`]) run
//! through devcell's own `up` and `exec`, under the user's security profile (`hardened` by
//! default; spec-note 0650).
//!
//! Per test: a temporary workspace ([`crate::features::test::workspace`]) → `up` with the
//! reference's labels (`devcontainer.local_folder=<workspace>`,
//! `devcontainer.is_test_run=true`) as the container's identity → the test script run as the
//! remote user in the workspace folder, the test library on its `PATH` → pass when it exits
//! 0 → the container removed (`down --remove`) and the workspace deleted, unless
//! `--preserve-test-containers` keeps both. A test whose container does not come up fails
//! with the reason; the next test still runs.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use indexmap::IndexMap;
use tokio::io::AsyncWrite;

use crate::engine::Engine;
use crate::features::test::TestCase;
pub use crate::features::test::{Selection, TestKind};
use crate::ops::down::{DownOptions, down_with};
use crate::ops::error::Result;
use crate::ops::exec::{ExecOptions, ExecStreams, exec_with};
use crate::ops::options::{SecurityOptions, TargetOptions, UpOptions};
use crate::ops::up::up_with;
use crate::progress::{Event, Reporter};
use crate::settings::Settings;

/// The label the reference puts on every test container.
pub const TEST_RUN_LABEL: (&str, &str) = ("devcontainer.is_test_run", "true");

/// How many of a failed test's last output lines its outcome keeps.
const TAIL_LINES: usize = 20;

/// Inputs of [`features_test`].
#[derive(Debug, Clone, Default)]
pub struct FeaturesTestOptions {
    /// `--project-folder` (or the positional target): the collection (`src/`, `test/`).
    pub project_folder: PathBuf,
    /// Which tests, with which base image and remote user.
    pub selection: Selection,
    /// `--preserve-test-containers`: keep each container and its workspace.
    pub preserve_test_containers: bool,
    /// `--quiet`: no progress and no script output (the report only).
    pub quiet: bool,
    /// The security flags each test's `up` gets (`--security-profile`, `--allow`).
    pub security: SecurityOptions,
    /// Where the test scripts' stdout lines go (the command's stdout, as the reference
    /// prints them); `None`: to the reporter with their stderr lines.
    pub script_stdout: Option<LineSink>,
    /// The user settings file.
    pub settings: Settings,
    /// `--cache-dir`: the Feature cache.
    pub cache_dir: Option<PathBuf>,
}

/// Receives lines of output, one call per line (without its newline).
#[derive(Clone)]
pub struct LineSink(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for LineSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineSink")
    }
}

/// What became of one test.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestOutcome {
    /// The name in the report.
    pub name: String,
    /// Its kind.
    pub kind: TestKind,
    /// The Feature it belongs to (`None`: a global scenario).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
    /// Whether the script exited 0.
    pub passed: bool,
    /// The script's exit code (`None` when it did not run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Why it did not run (the container did not come up, the engine failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The test container (kept with `--preserve-test-containers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The test workspace, when kept (`--preserve-test-containers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// A failed test's last output lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_tail: Vec<String>,
}

/// Every test's outcome, in run order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct FeaturesTestReport {
    /// The outcomes.
    pub tests: Vec<TestOutcome>,
}

impl FeaturesTestReport {
    /// Whether every test passed (none ran counts as passed, as the reference).
    pub fn passed(&self) -> bool {
        self.tests.iter().all(|t| t.passed)
    }
}

/// Plans the tests of `opts.project_folder` and runs each through the engine `DOCKER_HOST`
/// names (see the module docs).
///
/// Errors: [`OpsError::FeaturesTest`](crate::ops::OpsError::FeaturesTest) when the collection is not as the flags say (nothing
/// ran); [`OpsError::Engine`](crate::ops::OpsError::Engine) when no engine answers. A test that fails is an outcome, not an
/// error.
pub async fn features_test(
    opts: &FeaturesTestOptions,
    reporter: &dyn Reporter,
) -> Result<FeaturesTestReport> {
    let cases = crate::features::test::plan(&opts.project_folder, &opts.selection)?;
    let engine = crate::engine::connect().await?;
    features_test_with(&*engine, opts, cases, reporter).await
}

/// Runs `cases` through `engine`.
///
/// Errors: none today but a workspace that cannot be made ([`OpsError::FeaturesTest`](crate::ops::OpsError::FeaturesTest)).
pub async fn features_test_with(
    engine: &dyn Engine,
    opts: &FeaturesTestOptions,
    cases: Vec<TestCase>,
    reporter: &dyn Reporter,
) -> Result<FeaturesTestReport> {
    let quiet = Quiet {
        inner: reporter,
        quiet: opts.quiet,
    };
    let mut report = FeaturesTestReport::default();
    for case in cases {
        quiet.report(Event::Status(format!(
            "running {} test '{}'",
            kind_text(case.kind),
            case.name
        )));
        report
            .tests
            .push(run_case(engine, opts, &case, &quiet).await?);
    }
    Ok(report)
}

/// One test: workspace, `up`, script, clean-up.
async fn run_case(
    engine: &dyn Engine,
    opts: &FeaturesTestOptions,
    case: &TestCase,
    reporter: &dyn Reporter,
) -> Result<TestOutcome> {
    let dir = tempfile::Builder::new()
        .prefix("devcell-features-test-")
        .tempdir()
        .map_err(|source| crate::features::test::TestError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    crate::features::test::workspace::write(case, dir.path())?;
    let target = test_target(dir.path());
    let mut outcome = TestOutcome {
        name: case.name.clone(),
        kind: case.kind,
        feature: case.feature.clone(),
        passed: false,
        exit_code: None,
        error: None,
        container_id: None,
        workspace: None,
        output_tail: Vec::new(),
    };
    match up_with(engine, &up_options(opts, target.clone()), reporter).await {
        Ok(up) => {
            outcome.container_id = Some(up.container_id.clone());
            let tail = Arc::new(Mutex::new(Vec::new()));
            match run_script(
                engine,
                &target,
                case,
                &up.remote_workspace_folder,
                opts.script_stdout.as_ref().filter(|_| !opts.quiet),
                reporter,
                &tail,
            )
            .await
            {
                Ok(code) => {
                    outcome.exit_code = Some(code);
                    outcome.passed = code == 0;
                }
                Err(e) => outcome.error = Some(e.to_string()),
            }
            if !outcome.passed {
                outcome.output_tail = tail.lock().map(|t| t.clone()).unwrap_or_default();
            }
        }
        Err(e) => outcome.error = Some(e.to_string()),
    }
    if let Some(error) = &outcome.error {
        reporter.report(Event::Output(format!(
            "'{}' did not run: {error}",
            case.name
        )));
    }
    if opts.preserve_test_containers {
        outcome.workspace = Some(dir.keep());
    } else {
        clean_up(engine, target, reporter).await;
    }
    Ok(outcome)
}

/// The test workspace's identity: exactly the reference's two labels, the folder itself as
/// the workspace (no git root above it), the host environment for `${localEnv:…}`.
fn test_target(workspace: &Path) -> TargetOptions {
    TargetOptions {
        workspace_folder: workspace.to_owned(),
        mount_workspace_git_root: false,
        id_labels: vec![
            (
                "devcontainer.local_folder".into(),
                workspace.display().to_string(),
            ),
            (TEST_RUN_LABEL.0.into(), TEST_RUN_LABEL.1.into()),
        ],
        env: std::env::vars().collect(),
        workspace_folder_given: true,
        ..TargetOptions::default()
    }
}

/// `up`'s options for a test: the user's security flags and settings, no lockfile (the
/// workspace is thrown away).
fn up_options(opts: &FeaturesTestOptions, target: TargetOptions) -> UpOptions {
    UpOptions {
        target,
        security: opts.security.clone(),
        settings: opts.settings.clone(),
        cache_dir: opts.cache_dir.clone(),
        lockfile: crate::features::lockfile::LockfileMode::Off,
        ..UpOptions::default()
    }
}

/// Runs the test script as the remote user in the workspace folder, with the workspace
/// folder (where the test library is) at the end of `PATH`, so that `source
/// dev-container-features-test-lib` finds it from bash and from sh. Its output goes to
/// `reporter` line by line (its stdout to `stdout` when given); the last lines are kept in
/// `tail`.
async fn run_script(
    engine: &dyn Engine,
    target: &TargetOptions,
    case: &TestCase,
    folder: &str,
    stdout: Option<&LineSink>,
    reporter: &dyn Reporter,
    tail: &Arc<Mutex<Vec<String>>>,
) -> Result<i64> {
    let argv = [
        "/bin/sh",
        "-c",
        "PATH=\"$PATH:$1\"; export PATH; cd \"$1\" && exec \"./$2\"",
        "sh",
        folder,
        &case.script,
    ];
    let opts = ExecOptions {
        target: target.clone(),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        remote_env: case.env.iter().cloned().collect::<IndexMap<_, _>>(),
        ..ExecOptions::default()
    };
    let streams = ExecStreams {
        stdin: None,
        stdout: Box::new(LineWriter::new(reporter, tail.clone()).to(stdout.cloned())),
        stderr: Box::new(LineWriter::new(reporter, tail.clone())),
    };
    exec_with(engine, &opts, streams, reporter).await
}

/// Removes the test's container; a failure is reported, not fatal (the report still comes).
async fn clean_up(engine: &dyn Engine, target: TargetOptions, reporter: &dyn Reporter) {
    let down = DownOptions {
        target,
        remove: true,
        timeout: None,
    };
    if let Err(e) = down_with(engine, &down, reporter).await {
        reporter.report(Event::Status(format!(
            "warning: the test container was not removed: {e}"
        )));
    }
}

/// The kind as the progress line names it.
fn kind_text(kind: TestKind) -> &'static str {
    match kind {
        TestKind::Autogenerated => "autogenerated",
        TestKind::Scenario => "scenario",
        TestKind::Duplicate => "duplicate",
        TestKind::Global => "global scenario",
    }
}

/// Passes events on, but under `--quiet` only warnings.
struct Quiet<'a> {
    inner: &'a dyn Reporter,
    quiet: bool,
}

impl Reporter for Quiet<'_> {
    fn report(&self, event: Event) {
        if !self.quiet || matches!(event, Event::Warning(_)) {
            self.inner.report(event);
        }
    }
}

/// An exec stream cut into lines: each line goes to `sink` when there is one, else to the
/// reporter as [`Event::Output`], and into a shared tail of the last [`TAIL_LINES`] lines.
struct LineWriter<'a> {
    reporter: &'a dyn Reporter,
    sink: Option<LineSink>,
    pending: Vec<u8>,
    tail: Arc<Mutex<Vec<String>>>,
}

impl<'a> LineWriter<'a> {
    fn new(reporter: &'a dyn Reporter, tail: Arc<Mutex<Vec<String>>>) -> Self {
        LineWriter {
            reporter,
            sink: None,
            pending: Vec::new(),
            tail,
        }
    }

    /// Sends the lines to `sink` instead of the reporter, when there is one.
    fn to(mut self, sink: Option<LineSink>) -> Self {
        self.sink = sink;
        self
    }

    fn emit(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line)
            .trim_end_matches('\r')
            .to_owned();
        if let Ok(mut tail) = self.tail.lock() {
            tail.push(line.clone());
            let excess = tail.len().saturating_sub(TAIL_LINES);
            tail.drain(..excess);
        }
        match &self.sink {
            Some(sink) => (sink.0)(&line),
            None => self.reporter.report(Event::Output(line)),
        }
    }
}

impl AsyncWrite for LineWriter<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.pending.extend_from_slice(buf);
        while let Some(end) = this.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = this.pending.drain(..=end).collect();
            this.emit(&line[..end]);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.pending.is_empty() {
            let rest = std::mem::take(&mut this.pending);
            this.emit(&rest);
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        // a last line without a newline, when the engine did not shut the stream down
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(&rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Collect;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn output_is_cut_into_lines_and_the_tail_kept() {
        let reporter = Collect::default();
        let tail = Arc::new(Mutex::new(Vec::new()));
        {
            let mut w = LineWriter::new(&reporter, tail.clone());
            w.write_all(b"one\ntw").await.unwrap();
            w.write_all(b"o\r\n").await.unwrap();
            for i in 0..30 {
                w.write_all(format!("{i}\n").as_bytes()).await.unwrap();
            }
            w.write_all(b"last").await.unwrap();
        }
        let lines: Vec<String> = reporter
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|e| match e {
                Event::Output(l) => l.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(lines[..2], ["one", "two"]);
        assert_eq!(lines.last().unwrap(), "last");
        let tail = tail.lock().unwrap();
        assert_eq!(tail.len(), TAIL_LINES);
        assert_eq!(tail.last().unwrap(), "last");
    }

    #[test]
    fn quiet_keeps_only_warnings() {
        let inner = Collect::default();
        let quiet = Quiet {
            inner: &inner,
            quiet: true,
        };
        quiet.report(Event::Status("s".into()));
        quiet.report(Event::Output("o".into()));
        assert!(inner.0.lock().unwrap().is_empty());
    }

    #[test]
    fn the_target_is_the_workspace_with_the_references_labels() {
        let t = test_target(Path::new("/tmp/ws"));
        assert_eq!(
            t.id_labels,
            vec![
                ("devcontainer.local_folder".into(), "/tmp/ws".into()),
                ("devcontainer.is_test_run".into(), "true".into()),
            ]
        );
        assert!(!t.mount_workspace_git_root);
    }
}
