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

/// Added to a failed hook's hint when its output shows a write to a read-only file system.
const READ_ONLY_ROOT_HINT: &str = "; the hook wrote to a read-only file system: under the `hardened` profile the container's root file system is read-only, and the workspace, the remote user's home and `/tmp` are writable (a tmpfs), so write there, or bring it up with `--security-profile reference` if you trust this configuration";

/// Added to a failed hook's hint when its output shows a command that needed root (a package
/// manager's lock, "are you root?", "Permission denied"): under `hardened` hooks run as the
/// remote user, who is not root (for an image that runs as root with no user named, the user
/// devcell provides; spec-note 0188).
const NEEDS_ROOT_HINT: &str = "; the hook needed root: under the `hardened` profile hooks run as the non-root remote user (for an image that runs as root with no user named, the user devcell provides), so install packages with a Feature or in the Dockerfile, which run as root when the image is built";

/// Whether a line of a hook's output says it needed root.
fn needed_root(line: &str) -> bool {
    let line = line.to_ascii_lowercase();
    line.contains("are you root")
        || line.contains("permission denied")
        || line.contains("must be root")
        || line.contains("must be run as root")
        || line.contains("you need to be root")
        || line.contains("operation not permitted")
}

impl crate::diagnostics::Hint for LifecycleError {
    fn hint(&self) -> Option<String> {
        match self {
            LifecycleError::HookFailed(failure) if failure.hook != LifecycleHook::InitializeCommand => {
                let mut hint = "fix the hook and bring the container up again: the failed hook and the ones after it run again".to_string();
                // The hardened profile's read-only root is the usual cause of a hook that works
                // under the reference CLI, and the engine's message does not say so.
                if failure.failed_runs().any(|r| {
                    r.output_tail.iter().any(|l| l.contains("Read-only file system"))
                }) {
                    hint.push_str(READ_ONLY_ROOT_HINT);
                }
                if failure
                    .failed_runs()
                    .any(|r| r.output_tail.iter().any(|l| needed_root(l)))
                {
                    hint.push_str(NEEDS_ROOT_HINT);
                }
                Some(hint)
            }
            LifecycleError::InvalidHook { .. } => Some(
                "a lifecycle hook is a string (run by `/bin/sh -c`), an array of strings (run without a shell), or an object whose values are either".to_string(),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Hint;
    use crate::lifecycle::report::{HookRun, LifecycleReport};

    fn failure(output: &str) -> LifecycleError {
        LifecycleError::HookFailed(Box::new(HookFailure {
            hook: LifecycleHook::PostCreateCommand,
            source: 0,
            origin_label: "devcontainer.json".to_string(),
            report: LifecycleReport {
                runs: vec![HookRun {
                    hook: LifecycleHook::PostCreateCommand,
                    source: 0,
                    origin: "devcontainer.json".to_string(),
                    entry: None,
                    command: "touch /x".to_string(),
                    exit_code: 1,
                    duration_ms: 1,
                    output_tail: vec![output.to_string()],
                }],
                ..Default::default()
            },
        }))
    }

    #[test]
    fn a_hook_that_hit_the_read_only_root_is_told_where_it_may_write() {
        let hint = failure("touch: /x: Read-only file system").hint().unwrap();
        assert!(hint.starts_with("fix the hook"), "{hint}");
        assert!(hint.contains("root file system is read-only"), "{hint}");
        assert!(hint.contains("--security-profile reference"), "{hint}");
        let plain = failure("touch: /x: No such file or directory")
            .hint()
            .unwrap();
        assert!(!plain.contains("read-only"), "{plain}");
        assert!(!plain.contains("needed root"), "{plain}");
    }

    /// spec-note 0188: a hook that expected root (an `apt-get install` as the user devcell
    /// provides) is told to use a Feature or the Dockerfile.
    #[test]
    fn a_hook_that_needed_root_is_told_to_install_at_build_time() {
        for line in [
            "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)",
            "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?",
            "ERROR: Unable to lock database: Permission denied",
        ] {
            let hint = failure(line).hint().unwrap();
            assert!(
                hint.contains("the hook needed root")
                    && hint.contains("a Feature or in the Dockerfile"),
                "{line}: {hint}"
            );
        }
    }
}
