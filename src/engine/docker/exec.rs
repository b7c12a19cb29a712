//! Exec: run a process in a container with its input, output and TTY size.

use std::time::Duration;

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures_util::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::{DockerEngine, is_not_found};
use crate::diagnostics::LineSplitter;
use crate::engine::error::{EngineError, Result};
use crate::engine::spec::*;
use crate::progress::Event;

impl DockerEngine {
    /// [`Engine::exec`]; with a TTY and `sizes`, the TTY follows them (spec-note 0273): the
    /// initial size is given at creation (engines with API ≥ 1.42 use it) and sent with a
    /// resize right after the start (older engines), then each change is sent as it comes.
    #[tracing::instrument(level = "debug", skip_all, fields(id = %id, argv = ?request.argv.first()))]
    pub(super) async fn run_exec(
        &self,
        id: &str,
        request: &ExecRequest,
        input: ExecInput,
        output: ExecOutput<'_>,
        sizes: Option<tokio::sync::watch::Receiver<TtySize>>,
    ) -> Result<ExecResult> {
        let sizes = sizes.filter(|_| request.tty);
        let has_input = !matches!(input, ExecInput::None);
        let (exec, mut stream, stdin) = self
            .start_attached(id, request, has_input, sizes.as_ref())
            .await?;
        let io_err = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        let feed = feed_input(input, stdin);
        let mut result = ExecResult::default();
        let drain = self.drain_output(id, &mut stream, output, &mut result);
        // The output ends when the process exits; stop feeding stdin then (like `docker exec
        // -i`), so an input that never reaches end of file cannot keep the exec open. The TTY
        // size is followed until then.
        let (fed, drained) = {
            tokio::pin!(feed);
            tokio::pin!(drain);
            let mut fed = Ok(());
            let mut feeding = true;
            let resize = self.follow_sizes(&exec, sizes);
            tokio::pin!(resize);
            let drained = loop {
                tokio::select! {
                    result = &mut drain => break result,
                    result = &mut feed, if feeding => {
                        fed = result;
                        feeding = false;
                    }
                    () = &mut resize => {}
                }
            };
            (fed, drained)
        };
        drained?;
        // A process that exits without reading its stdin closes the pipe: not an error.
        if let Err(e) = fed
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(io_err(e));
        }
        result.exit_code = self.exit_code(&exec, id).await?;
        Ok(result)
    }

    /// Creates the exec of `request` in container `id` and starts it attached: its id, its
    /// output stream and its stdin.
    ///
    /// Errors: [`EngineError::NoSuchContainer`]; the engine's; [`EngineError::ExecIo`] when the
    /// engine detached the exec.
    async fn start_attached(
        &self,
        id: &str,
        request: &ExecRequest,
        has_input: bool,
        sizes: Option<&tokio::sync::watch::Receiver<TtySize>>,
    ) -> Result<(String, ExecStream, ExecStdin)> {
        let config = exec_config(request, has_input, sizes);
        let created = match self.docker.create_exec(id, config).await {
            Ok(c) => c,
            Err(e) if is_not_found(&e) => {
                return Err(EngineError::NoSuchContainer { id: id.to_string() });
            }
            Err(e) => return Err(self.api("create exec", id)(e)),
        };
        let started = self
            .docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: request.tty,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(self.api("start exec", id))?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(EngineError::ExecIo {
                container: id.to_string(),
                source: std::io::Error::other("the engine detached the exec"),
            });
        };
        Ok((created.id, output, input))
    }

    /// The exec's output until it ends, into `output`: collected into `result` (within
    /// [`COLLECT_CAP`] per stream), reported line
    /// by line (a last unterminated line of each stream reported at the end) or written and
    /// flushed as it comes.
    ///
    /// Errors: the engine's; [`EngineError::ExecIo`] when a writer fails.
    async fn drain_output(
        &self,
        id: &str,
        stream: &mut ExecStream,
        output: ExecOutput<'_>,
        result: &mut ExecResult,
    ) -> Result<()> {
        let io_err = |source| EngineError::ExecIo {
            container: id.to_string(),
            source,
        };
        // bounded lines in linear work, whatever the container prints (spec-note 0658)
        let mut lines_out = LineSplitter::default();
        let mut lines_err = LineSplitter::default();
        let mut sink = output;
        let tail = matches!(sink, ExecOutput::CollectTail);
        let mut collected_out = Collector::new(tail);
        let mut collected_err = Collector::new(tail);
        while let Some(item) = stream.next().await {
            let item = item.map_err(self.api("exec output", id))?;
            let (is_err, bytes) = match item {
                LogOutput::StdErr { message } => (true, message),
                LogOutput::StdOut { message } | LogOutput::Console { message } => (false, message),
                LogOutput::StdIn { .. } => continue,
            };
            match &mut sink {
                ExecOutput::Collect | ExecOutput::CollectTail => {
                    if is_err {
                        collected_err.push(&bytes);
                    } else {
                        collected_out.push(&bytes);
                    }
                }
                ExecOutput::Report(reporter) => {
                    let lines = if is_err {
                        &mut lines_err
                    } else {
                        &mut lines_out
                    };
                    lines.push(&bytes, |l| reporter.report(Event::Output(l)));
                }
                ExecOutput::Write { stdout, stderr } => {
                    let w: &mut (dyn AsyncWrite + Send + Unpin) =
                        if is_err { stderr } else { stdout };
                    w.write_all(&bytes).await.map_err(io_err)?;
                    w.flush().await.map_err(io_err)?;
                }
            }
        }
        let (stdout, out_cut) = collected_out.finish();
        let (stderr, err_cut) = collected_err.finish();
        (result.stdout, result.stderr, result.cut) = (stdout, stderr, out_cut || err_cut);
        if let ExecOutput::Report(reporter) = &sink {
            for mut lines in [lines_out, lines_err] {
                if let Some(tail) = lines.finish() {
                    reporter.report(Event::Output(tail));
                }
            }
        }
        Ok(())
    }

    /// The exec's exit code, once the engine has recorded it: the output stream can end a
    /// moment before (asked again every 10 ms, at most 200 times; then what it says, or -1).
    async fn exit_code(&self, exec: &str, id: &str) -> Result<i64> {
        let mut attempt = 0;
        loop {
            let inspect = self
                .docker
                .inspect_exec(exec)
                .await
                .map_err(self.api("inspect exec", id))?;
            match inspect.exit_code {
                Some(code) if inspect.running != Some(true) => return Ok(code),
                _ if attempt >= 200 => return Ok(inspect.exit_code.unwrap_or(-1)),
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
            attempt += 1;
        }
    }

    /// Sends the current size of `sizes` to the exec's TTY, then every change; never completes
    /// (pending at once without sizes, or once the sender is gone). A failed resize is logged
    /// and skipped: the process keeps its previous size.
    async fn follow_sizes(
        &self,
        exec_id: &str,
        sizes: Option<tokio::sync::watch::Receiver<TtySize>>,
    ) {
        if let Some(mut sizes) = sizes {
            loop {
                let size = *sizes.borrow_and_update();
                if !size.is_empty() {
                    let options = bollard::exec::ResizeExecOptions {
                        height: size.rows,
                        width: size.cols,
                    };
                    if let Err(e) = self.docker.resize_exec(exec_id, options).await {
                        tracing::debug!("resizing exec {exec_id} to {size:?} failed: {e}");
                    }
                }
                if sizes.changed().await.is_err() {
                    break;
                }
            }
        }
        std::future::pending::<()>().await
    }
}

/// An attached exec's output, as the engine streams it.
type ExecStream = std::pin::Pin<
    Box<
        dyn futures_util::Stream<Item = std::result::Result<LogOutput, bollard::errors::Error>>
            + Send,
    >,
>;

/// An attached exec's stdin.
type ExecStdin = std::pin::Pin<Box<dyn AsyncWrite + Send>>;

/// Writes `input` to the exec's stdin, then closes it (the process sees end of file).
async fn feed_input(input: ExecInput, mut stdin: ExecStdin) -> std::io::Result<()> {
    match input {
        ExecInput::None => Ok(()),
        ExecInput::Bytes(bytes) => {
            stdin.write_all(&bytes).await?;
            stdin.shutdown().await
        }
        ExecInput::Stream(mut reader) => {
            tokio::io::copy(&mut reader, &mut stdin).await?;
            stdin.shutdown().await
        }
    }
}

/// The exec's creation request: its argv, user, folder and environment, stdin attached when
/// there is input, and with a TTY of a known size that size (engines with API ≥ 1.42 use it).
fn exec_config(
    request: &ExecRequest,
    has_input: bool,
    sizes: Option<&tokio::sync::watch::Receiver<TtySize>>,
) -> bollard::models::ExecConfig {
    let config = CreateExecOptions::<String> {
        attach_stdin: Some(has_input),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(request.tty),
        env: (!request.env.is_empty()).then(|| {
            request
                .env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        }),
        cmd: Some(request.argv.clone()),
        user: request.user.clone(),
        working_dir: request.working_dir.clone(),
        ..CreateExecOptions::default()
    };
    let mut config = bollard::models::ExecConfig::from(config);
    if let Some(size) = sizes.map(|s| *s.borrow()).filter(|s| !s.is_empty()) {
        config.console_size = Some(vec![usize::from(size.rows), usize::from(size.cols)]);
    }
    config
}
