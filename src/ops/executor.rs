//! [`EngineExecutor`]: lifecycle hooks run in a container through the engine's exec API.

use crate::engine::{Engine, ExecInput, ExecOutput};
use crate::lifecycle::{ExecRequest, ExecutorError, HookExecutor};
use crate::progress::Reporter;

/// Runs hook commands in `container_id` with [`Engine::exec`]: the argv without a shell, as
/// the request's user, in its working directory, with its environment passed as the exec's
/// `Env` (never on a command line), no stdin, each output line reported as it arrives.
#[derive(Clone, Copy)]
pub struct EngineExecutor<'a> {
    /// The engine.
    pub engine: &'a dyn Engine,
    /// The container the hooks run in.
    pub container_id: &'a str,
}

impl std::fmt::Debug for EngineExecutor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineExecutor")
            .field("container_id", &self.container_id)
            .finish()
    }
}

impl HookExecutor for EngineExecutor<'_> {
    async fn exec(
        &self,
        request: &ExecRequest,
        output: &dyn Reporter,
    ) -> Result<i64, ExecutorError> {
        let exec = crate::engine::ExecRequest {
            argv: request.argv.clone(),
            user: request.user.clone(),
            env: request.env.0.clone(),
            working_dir: request.working_dir.clone(),
            tty: false,
        };
        let result = self
            .engine
            .exec(
                self.container_id,
                &exec,
                ExecInput::None,
                ExecOutput::Report(output),
            )
            .await
            .map_err(|e| Box::new(e) as ExecutorError)?;
        Ok(result.exit_code)
    }

    async fn read_files(&self, folder: &str) -> Option<crate::lifecycle::executor::FilesResult> {
        Some(
            self.engine
                .read_folder(self.container_id, folder)
                .await
                .map(Option::unwrap_or_default)
                .map_err(|e| Box::new(e) as ExecutorError),
        )
    }

    async fn write_file(
        &self,
        folder: &str,
        name: &str,
        content: &[u8],
    ) -> Option<Result<(), ExecutorError>> {
        Some(
            self.engine
                .write_file(self.container_id, folder, name, content)
                .await
                .map_err(|e| Box::new(e) as ExecutorError),
        )
    }
}
