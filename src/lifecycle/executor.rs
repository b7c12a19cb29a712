//! Where hook commands run: the [`HookExecutor`] boundary (implemented over the engine by the
//! `up` operation, and by [`HostExecutor`] for `initializeCommand` on the host).

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::process::Stdio;

use indexmap::IndexMap;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::error::ExecutorError;
use crate::progress::{Event, Reporter};

/// Environment variables for a hook process: the remote environment (probed user env ⊕
/// `remoteEnv`) and secrets, later entries winning.
///
/// Values may be secrets: `Debug` shows only the names, and executors must pass the values
/// to the process environment (e.g. the engine API's `Env`), never on a command line
/// (spec-notes/0104).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HookEnv(pub IndexMap<String, String>);

impl fmt::Debug for HookEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "<redacted>")))
            .finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for HookEnv {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        HookEnv(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// One command for an executor to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// The argv; never empty. Shell-form hooks arrive as `["/bin/sh", "-c", script]`.
    pub argv: Vec<String>,
    /// The user to run as (`remoteUser`); `None` = the container's default user (or, on the
    /// host, the invoking user — a host executor rejects `Some`).
    pub user: Option<String>,
    /// The working directory (`workspaceFolder` in the container; the local workspace folder
    /// on the host); `None` = the executor's default (the user's home in a container).
    pub working_dir: Option<String>,
    /// Environment variables added to the process's environment.
    pub env: HookEnv,
}

/// Runs one command somewhere (inside the container, or on the host) and reports its exit
/// code.
///
/// Implementations must: run `argv` without adding a shell; run as `user` in `working_dir`
/// with `env` added to the environment (never putting env values on a command line);
/// report each line of stdout and stderr, without its line ending, as
/// [`Event::Output`] to `output` while the command runs; give the command no stdin; and
/// return its exit code (128 + n for a process killed by signal n).
///
/// `Err` means the command could not be run at all (engine unreachable, container gone); a
/// command that runs and fails — including "executable not found" inside the container — is
/// an exit code. The future must be `Send`, so a plan's background stages can be spawned.
pub trait HookExecutor: Send + Sync {
    /// Runs `request`, streaming its output lines to `output`; returns the exit code.
    fn exec(
        &self,
        request: &ExecRequest,
        output: &dyn Reporter,
    ) -> impl Future<Output = Result<i64, ExecutorError>> + Send;

    /// The regular files directly in `folder` (absolute), by name, read without running a
    /// process (the engine's archive API); an absent folder has none. `None`: this executor
    /// cannot, and the runner runs the marker script instead (spec-note 0471).
    fn read_files(&self, folder: &str) -> impl Future<Output = Option<FilesResult>> + Send {
        let _ = folder;
        std::future::ready(None)
    }

    /// Writes `content` to `<folder>/<name>` without running a process; `None`: this
    /// executor cannot (the runner then runs the marker script).
    fn write_file(
        &self,
        folder: &str,
        name: &str,
        content: &[u8],
    ) -> impl Future<Output = Option<Result<(), ExecutorError>>> + Send {
        let _ = (folder, name, content);
        std::future::ready(None)
    }
}

/// What [`HookExecutor::write_file`] returns: `None` when the executor cannot write files
/// without a process.
pub type WriteResult = Option<Result<(), ExecutorError>>;

/// What [`HookExecutor::read_files`] returns: file name → content.
pub type FilesResult = Result<std::collections::BTreeMap<String, Vec<u8>>, ExecutorError>;

/// A reference or a shared pointer to an executor is that executor.
macro_rules! delegate_hook_executor {
    ($($pointer:ty),*) => {$(
        impl<T: HookExecutor> HookExecutor for $pointer {
            fn exec(
                &self,
                request: &ExecRequest,
                output: &dyn Reporter,
            ) -> impl Future<Output = Result<i64, ExecutorError>> + Send {
                (**self).exec(request, output)
            }

            fn read_files(&self, folder: &str) -> impl Future<Output = Option<FilesResult>> + Send {
                (**self).read_files(folder)
            }

            fn write_file(&self, folder: &str, name: &str, content: &[u8]) -> impl Future<Output = WriteResult> + Send {
                (**self).write_file(folder, name, content)
            }
        }
    )*};
}

delegate_hook_executor!(&T, std::sync::Arc<T>);

/// Runs hook commands on the host with `tokio::process` (for `initializeCommand`).
///
/// The process inherits the host environment plus [`ExecRequest::env`], runs in
/// [`ExecRequest::working_dir`] (or `default_working_dir`), with stdin closed. An argv whose
/// program cannot be found or executed yields exit code 127 or 126 (as a shell would) with a
/// line saying why, so it is reported like any failing hook.
#[derive(Debug, Clone, Default)]
pub struct HostExecutor {
    /// Directory used when a request has no working directory (normally the local workspace
    /// folder); `None` = the current directory.
    pub default_working_dir: Option<PathBuf>,
}

impl HookExecutor for HostExecutor {
    async fn exec(
        &self,
        request: &ExecRequest,
        output: &dyn Reporter,
    ) -> Result<i64, ExecutorError> {
        if let Some(user) = &request.user {
            return Err(
                format!("host commands run as the invoking user, cannot run as `{user}`").into(),
            );
        }
        let Some((program, args)) = request.argv.split_first() else {
            return Err("empty command".into());
        };
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .envs(&request.env.0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // its own process group, killed with devcell (spec-note 0425)
        crate::process::contain_tokio(&mut command);
        let dir = request
            .working_dir
            .as_ref()
            .map(PathBuf::from)
            .or_else(|| self.default_working_dir.clone());
        if let Some(dir) = &dir {
            command.current_dir(dir);
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(err) => {
                let code = match err.kind() {
                    std::io::ErrorKind::NotFound if dir.as_ref().is_some_and(|d| !d.is_dir()) => {
                        return Err(format!(
                            "working directory `{}` does not exist",
                            dir.as_ref()
                                .map(|d| d.display().to_string())
                                .unwrap_or_default()
                        )
                        .into());
                    }
                    std::io::ErrorKind::NotFound => 127,
                    std::io::ErrorKind::PermissionDenied => 126,
                    _ => return Err(Box::new(err)),
                };
                output.report(Event::Output(format!("`{program}`: {err}")));
                return Ok(code);
            }
        };
        let mut group = crate::process::GroupGuard::new(child.id());
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let ((), (), status) = tokio::join!(
            forward_lines(stdout, output),
            forward_lines(stderr, output),
            child.wait()
        );
        group.disarm();
        let status = status?;
        Ok(exit_code(status))
    }
}

/// Reads `stream` to its end, reporting each line (lossily decoded, line ending removed, cut
/// at [`crate::diagnostics::MAX_OUTPUT_LINE`]: spec-note 0658).
async fn forward_lines<R: AsyncRead + Unpin>(stream: Option<R>, output: &dyn Reporter) {
    let Some(mut stream) = stream else {
        return;
    };
    let mut lines = crate::diagnostics::LineSplitter::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => lines.push(&buf[..n], |l| output.report(Event::Output(l))),
        }
    }
    if let Some(last) = lines.finish() {
        output.report(Event::Output(last));
    }
}

fn exit_code(status: std::process::ExitStatus) -> i64 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => 128 + i64::from(signal),
        (None, None) => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);
    impl Reporter for Lines {
        fn report(&self, event: Event) {
            if let Event::Output(line) = event {
                self.0.lock().unwrap().push(line);
            }
        }
    }

    fn request(argv: &[&str]) -> ExecRequest {
        ExecRequest {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            user: None,
            working_dir: None,
            env: HookEnv::default(),
        }
    }

    #[test]
    fn hook_env_debug_hides_values() {
        let env: HookEnv = [("TOKEN", "s3cret")].into_iter().collect();
        let shown = format!("{env:?}");
        assert!(shown.contains("TOKEN"));
        assert!(!shown.contains("s3cret"));
    }

    #[tokio::test]
    async fn host_executor_streams_lines_and_returns_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let lines = Lines::default();
        let mut req = request(&[
            "/bin/sh",
            "-c",
            "pwd; echo \"$GREETING\"; echo err >&2; exit 3",
        ]);
        req.env = [("GREETING", "hi there")].into_iter().collect();
        req.working_dir = Some(dir.path().display().to_string());
        let code = HostExecutor::default().exec(&req, &lines).await.unwrap();
        assert_eq!(code, 3);
        let mut got = lines.0.into_inner().unwrap();
        got.sort();
        let pwd = dir.path().canonicalize().unwrap().display().to_string();
        let mut want = vec![pwd, "hi there".to_string(), "err".to_string()];
        want.sort();
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn host_executor_missing_program_is_exit_127() {
        let lines = Lines::default();
        let code = HostExecutor::default()
            .exec(&request(&["/nonexistent/devcell-no-such-program"]), &lines)
            .await
            .unwrap();
        assert_eq!(code, 127);
        assert_eq!(lines.0.into_inner().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn host_executor_reports_signals_as_128_plus_n() {
        let code = HostExecutor::default()
            .exec(
                &request(&["/bin/sh", "-c", "kill -9 $$"]),
                &Lines::default(),
            )
            .await
            .unwrap();
        assert_eq!(code, 137);
    }

    #[tokio::test]
    async fn host_executor_refuses_a_user_and_a_missing_directory() {
        let as_root = ExecRequest {
            user: Some("root".into()),
            ..request(&["true"])
        };
        let in_missing_dir = ExecRequest {
            working_dir: Some("/nonexistent/devcell-dir".into()),
            ..request(&["true"])
        };
        for (req, needle) in [(as_root, "`root`"), (in_missing_dir, "does not exist")] {
            let err = HostExecutor::default()
                .exec(&req, &Lines::default())
                .await
                .unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
}
