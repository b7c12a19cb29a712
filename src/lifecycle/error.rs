//! Errors of the `lifecycle` layer.

use super::hook_name::LifecycleHook;
use super::report::HookFailure;

/// `Result` with [`LifecycleError`].
pub type Result<T, E = LifecycleError> = std::result::Result<T, E>;

/// The error type a [`HookExecutor`](super::HookExecutor) returns when it cannot run a command
/// at all (engine unreachable, container gone, spawn failure). A command that runs and exits
/// non-zero is not an executor error: it is an exit code.
pub type ExecutorError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error planning or running lifecycle hooks
/// ([spec: lifecycle scripts](https://containers.dev/implementors/json_reference/#lifecycle-scripts)).
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// A hook value in the merged configuration has a form the spec does not define.
    ///
    /// `path` is the property path inside the merged configuration, e.g.
    /// `postCreateCommands[1].install[0]`.
    #[error("`{path}`: expected {expected}, found {found}")]
    InvalidHook {
        /// The hook whose value is malformed.
        hook: LifecycleHook,
        /// Property path of the offending value.
        path: String,
        /// What the spec allows there.
        expected: &'static str,
        /// What was found (a JSON type name, or a short description).
        found: String,
    },
    /// `waitFor` names something that is not a lifecycle hook.
    #[error(
        "`waitFor`: expected one of `initializeCommand`, `onCreateCommand`, `updateContentCommand`, `postCreateCommand`, `postStartCommand`, `postAttachCommand`, found {found}"
    )]
    InvalidWaitFor {
        /// The value found (JSON-encoded).
        found: String,
    },
    /// `userEnvProbe` is not one of the spec's values.
    #[error(
        "`userEnvProbe`: expected one of `none`, `loginShell`, `interactiveShell`, `loginInteractiveShell`, found {found}"
    )]
    InvalidUserEnvProbe {
        /// The value found (described).
        found: String,
    },
    /// A stage needs run-once markers but the caller gave no container timestamps.
    #[error(
        "cannot run `{hook}`: the container's creation and start times are needed for its run-once marker"
    )]
    MarkersUnavailable {
        /// The hook that needed a marker.
        hook: LifecycleHook,
    },
    /// Reading the run-once markers inside the container failed.
    #[error("cannot read the lifecycle markers in the container (exit code {exit_code})")]
    MarkerRead {
        /// Exit code of the marker read command.
        exit_code: i64,
        /// Last lines of its output.
        output_tail: Vec<String>,
    },
    /// The executor could not run a command (as opposed to the command failing).
    #[error("cannot run {what}")]
    Executor {
        /// What was being run, e.g. "`postCreateCommand` from devcontainer.json (source 1)".
        what: String,
        /// The cause.
        #[source]
        source: ExecutorError,
    },
    /// A hook command exited non-zero; the hooks after it were not run.
    #[error("{0}")]
    HookFailed(Box<HookFailure>),
}

impl crate::diagnostics::Hint for LifecycleError {
    fn hint(&self) -> Option<String> {
        match self {
            LifecycleError::HookFailed(failure) if failure.hook != LifecycleHook::InitializeCommand => Some(
                "fix the hook and bring the container up again: the failed hook and the ones after it run again"
                    .to_string(),
            ),
            LifecycleError::InvalidHook { .. } => Some(
                "a lifecycle hook is a string (run by `/bin/sh -c`), an array of strings (run without a shell), or an object whose values are either".to_string(),
            ),
            _ => None,
        }
    }
}
