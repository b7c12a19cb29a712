//! `userEnvProbe`: the environment the remote user's shell startup files produce, captured once
//! so hooks (and other injected processes) see the same `PATH` etc. as an interactive terminal
//! ([spec: `userEnvProbe`](https://containers.dev/implementors/json_reference/#general-properties),
//! spec-notes/0106).

use std::time::Duration;

use serde_json::Value;

use super::error::{LifecycleError, Result};
use super::executor::{ExecRequest, HookEnv, HookExecutor};
use super::hook::describe;
use super::runner::Capture;
use crate::progress::{Event, Reporter};

/// How to start the user's shell to read its environment (the spec's `userEnvProbe` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserEnvProbe {
    /// `none`: no probe; hooks get the container environment plus `remoteEnv`.
    None,
    /// `loginShell`: `<shell> -lc`.
    LoginShell,
    /// `interactiveShell`: `<shell> -ic`.
    InteractiveShell,
    /// `loginInteractiveShell`: `<shell> -lic` (the reference CLI's default).
    #[default]
    LoginInteractiveShell,
}

impl UserEnvProbe {
    /// Parses a spec value (`"loginInteractiveShell"` …).
    pub fn from_property(value: &str) -> Option<UserEnvProbe> {
        Some(match value {
            "none" => UserEnvProbe::None,
            "loginShell" => UserEnvProbe::LoginShell,
            "interactiveShell" => UserEnvProbe::InteractiveShell,
            "loginInteractiveShell" => UserEnvProbe::LoginInteractiveShell,
            _ => return None,
        })
    }

    /// Reads `userEnvProbe` from a merged configuration; `default` (the CLI's
    /// `--default-user-env-probe`) when absent or `null`.
    ///
    /// Errors: [`LifecycleError::InvalidUserEnvProbe`] for any other value.
    pub fn from_merged_configuration(
        merged: &Value,
        default: UserEnvProbe,
    ) -> Result<UserEnvProbe> {
        match merged.get("userEnvProbe") {
            None | Some(Value::Null) => Ok(default),
            Some(Value::String(s)) => {
                UserEnvProbe::from_property(s).ok_or_else(|| LifecycleError::InvalidUserEnvProbe {
                    found: format!("`{s}`"),
                })
            }
            Some(other) => Err(LifecycleError::InvalidUserEnvProbe {
                found: describe(other),
            }),
        }
    }

    /// The shell flags, e.g. `-lic`; `None` for [`UserEnvProbe::None`].
    pub fn shell_flags(self) -> Option<&'static str> {
        match self {
            UserEnvProbe::None => None,
            UserEnvProbe::LoginShell => Some("-lc"),
            UserEnvProbe::InteractiveShell => Some("-ic"),
            UserEnvProbe::LoginInteractiveShell => Some("-lic"),
        }
    }
}

/// How long a probe may take before devcell continues without it (as the reference CLI).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Delimits the environment dump in the probe's output (startup files may print anything).
const MARK: &str = "DEVCELL5e1f0c7aPROBE";

/// Delimits the container's own `PATH` (before any startup file ran) in the probe's output,
/// for [`merge_paths`].
const CONTAINER_MARK: &str = "DEVCELL5e1f0c7aCPATH";

/// The probe, run by `/bin/sh -c` as the remote user: picks the shell (`$SHELL`, else the user's
/// `/etc/passwd` entry, else `/bin/sh`; a `nologin` or `false` entry, as system users such as
/// `nobody` have, also means `/bin/sh`), then runs it with `$DEVCELL_PROBE_FLAGS` printing the
/// marked environment (`/proc/self/environ`, NUL-separated; `printenv` if unreadable). First it
/// prints the `PATH` the exec got from the container (image `ENV`, Feature `containerEnv`),
/// which a login shell's `/etc/profile` may reset.
const PROBE_SCRIPT: &str = r#"f="$DEVCELL_PROBE_FLAGS"; unset DEVCELL_PROBE_FLAGS
printf '%s%s%s' CMARK "${PATH:-}" CMARK
s="${SHELL:-}"
if [ -z "$s" ]; then
  u="$(id -un 2>/dev/null || true)"
  while IFS=: read -r n _ _ _ _ _ sh; do
    if [ "$n" = "$u" ]; then s="$sh"; break; fi
  done < /etc/passwd 2>/dev/null
fi
case "$s" in */nologin|*/false) s=/bin/sh ;; esac
if [ -z "$s" ] || [ ! -x "$s" ]; then s=/bin/sh; fi
exec "$s" "$f" 'printf %s MARK; cat /proc/self/environ 2>/dev/null || printenv; printf %s MARK' 2>/dev/null"#;

/// The probe's exec: [`PROBE_SCRIPT`] with its marks, run by `/bin/sh -c` as `user` with the
/// shell `flags` (`-lic`, …).
fn probe_request(flags: &str, user: Option<&str>) -> ExecRequest {
    ExecRequest {
        argv: vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            PROBE_SCRIPT
                .replace("CMARK", CONTAINER_MARK)
                .replace("MARK", MARK),
        ],
        user: user.map(str::to_string),
        working_dir: None,
        env: [("DEVCELL_PROBE_FLAGS", flags)].into_iter().collect(),
    }
}

/// Runs the probe as `user` and returns the shell's environment, without `PWD`.
///
/// Returns an empty environment, after reporting a `Status` warning, when the probe is
/// [`UserEnvProbe::None`] (no warning then), exceeds `timeout`, exits non-zero or prints no
/// environment: bring-up continues, as with the reference CLI.
///
/// Errors: [`LifecycleError::Executor`] when the executor cannot run it at all.
pub async fn probe_user_env<E: HookExecutor>(
    executor: &E,
    probe: UserEnvProbe,
    user: Option<&str>,
    timeout: Duration,
    reporter: &dyn Reporter,
) -> Result<HookEnv> {
    let Some(flags) = probe.shell_flags() else {
        return Ok(HookEnv::default());
    };
    let request = probe_request(flags, user);
    let capture = Capture::default();
    let exit_code = match tokio::time::timeout(timeout, executor.exec(&request, &capture)).await {
        Err(_elapsed) => {
            reporter.report(Event::Status(format!(
                "warning: userEnvProbe took longer than {} s (a shell startup file may wait for input); continuing without it",
                timeout.as_secs()
            )));
            return Ok(HookEnv::default());
        }
        Ok(result) => result.map_err(|source| LifecycleError::Executor {
            what: "the userEnvProbe".to_string(),
            source,
        })?,
    };
    let output = capture.into_lines();
    let output = output.join("\n");
    let mut env = parse_probe_output(&output);
    if exit_code != 0 || env.0.is_empty() {
        reporter.report(Event::Status(format!(
            "warning: userEnvProbe printed no environment (exit code {exit_code}); continuing without it"
        )));
        return Ok(HookEnv::default());
    }
    // The container's PATH entries the startup files dropped come back (spec-note 0470).
    if let (Some(container_path), Some(shell_path)) =
        (container_path(&output), env.0.get_mut("PATH"))
    {
        *shell_path = merge_paths(shell_path, container_path);
    }
    Ok(env)
}

/// The `PATH` the probe printed between [`CONTAINER_MARK`]s: the process environment's `PATH`
/// before any startup file ran. `None` when absent or empty.
fn container_path(output: &str) -> Option<&str> {
    let start = output.find(CONTAINER_MARK)? + CONTAINER_MARK.len();
    let len = output[start..].find(CONTAINER_MARK)?;
    let path = &output[start..start + len];
    (!path.is_empty()).then_some(path)
}

/// Merges the container's `PATH` into the one the user's shell ended with: the shell's entries
/// keep their order, and each container entry the shell lacks is inserted right after the
/// container entry before it that the shell has (at the front when none), so
/// `/opt/tool/bin:${PATH}` stays first. Every container entry comes back, `sbin` folders too,
/// for every user: the reference CLI patches `/etc/profile` so that a login shell keeps the
/// container's `PATH` whole (Debian's would give a non-root user no `sbin`), and devcell, which
/// never patches the image's files, gets the same entries this way (spec-note 0470). Empty
/// entries are ignored.
pub fn merge_paths(shell_path: &str, container_path: &str) -> String {
    let mut result: Vec<&str> = shell_path.split(':').collect();
    let mut insert_at = 0;
    for entry in container_path.split(':').filter(|e| !e.is_empty()) {
        match result.iter().position(|e| *e == entry) {
            Some(i) => insert_at = i + 1,
            None => {
                result.insert(insert_at, entry);
                insert_at += 1;
            }
        }
    }
    result.join(":")
}

/// Extracts the environment between the first and last [`MARK`]: `NAME=value` entries separated
/// by NUL (or by newlines when there is no NUL: the `printenv` fallback). `PWD` is dropped.
fn parse_probe_output(output: &str) -> HookEnv {
    let (Some(first), Some(last)) = (output.find(MARK), output.rfind(MARK)) else {
        return HookEnv::default();
    };
    let start = first + MARK.len();
    if last < start {
        return HookEnv::default();
    }
    let dump = &output[start..last];
    let separator = if dump.contains('\0') { '\0' } else { '\n' };
    dump.split(separator)
        .filter_map(|entry| entry.split_once('='))
        .filter(|(name, _)| !name.is_empty() && *name != "PWD")
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::HostExecutor;
    use crate::progress::NoopReporter;
    use serde_json::json;

    #[test]
    fn probe_values_parse_and_default() {
        let default = UserEnvProbe::default();
        assert_eq!(default, UserEnvProbe::LoginInteractiveShell);
        assert_eq!(
            UserEnvProbe::from_merged_configuration(&json!({}), UserEnvProbe::LoginShell).unwrap(),
            UserEnvProbe::LoginShell
        );
        assert_eq!(
            UserEnvProbe::from_merged_configuration(&json!({"userEnvProbe": "none"}), default)
                .unwrap(),
            UserEnvProbe::None
        );
        let err =
            UserEnvProbe::from_merged_configuration(&json!({"userEnvProbe": "login"}), default)
                .unwrap_err();
        assert!(err.to_string().ends_with("found `login`"), "{err}");
        assert_eq!(UserEnvProbe::InteractiveShell.shell_flags(), Some("-ic"));
        assert_eq!(UserEnvProbe::None.shell_flags(), None);
    }

    #[test]
    fn output_between_marks_is_parsed_nul_or_newline_separated() {
        let nul = format!("motd line\n{MARK}PATH=/a:/b\0PWD=/x\0MULTI=one\ntwo\0EMPTY=\0{MARK}");
        let env = parse_probe_output(&nul);
        assert_eq!(env.0["PATH"], "/a:/b");
        assert_eq!(env.0["MULTI"], "one\ntwo");
        assert_eq!(env.0["EMPTY"], "");
        assert!(!env.0.contains_key("PWD"));

        let lines = format!("{MARK}A=1\nB=x=y\n{MARK}\n");
        let env = parse_probe_output(&lines);
        assert_eq!(env.0.len(), 2);
        assert_eq!(env.0["B"], "x=y");

        assert!(parse_probe_output("no marks").0.is_empty());
        assert!(parse_probe_output(MARK).0.is_empty());
    }

    #[tokio::test]
    async fn host_probe_returns_the_shell_environment_without_pwd_or_own_variables() {
        let env = probe_user_env(
            &HostExecutor::default(),
            UserEnvProbe::LoginShell,
            None,
            DEFAULT_PROBE_TIMEOUT,
            &NoopReporter,
        )
        .await
        .unwrap();
        assert!(env.0.contains_key("PATH"), "{env:?}");
        assert!(!env.0.contains_key("PWD"));
        assert!(
            env.0.keys().all(|k| !k.starts_with("DEVCELL_PROBE")),
            "{env:?}"
        );
    }

    #[test]
    fn container_path_entries_the_profile_dropped_come_back_in_place() {
        let debian_user = "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games";
        let container = "/opt/tool/bin:/opt/image/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        // a non-root user keeps the container's `sbin` folders, as under the reference CLI
        // (its patched `/etc/profile` keeps the container's PATH whole)
        assert_eq!(
            merge_paths(debian_user, container),
            "/opt/tool/bin:/opt/image/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/games:/usr/games"
        );
        assert_eq!(
            merge_paths("/usr/bin:/bin", container),
            "/opt/tool/bin:/opt/image/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        );
        // An entry after a kept one goes right after it; nothing is duplicated.
        assert_eq!(merge_paths("/a:/b", "/b:/c:/a"), "/a:/b:/c");
        assert_eq!(merge_paths("/a", "/a::/x/sbin/tool"), "/a:/x/sbin/tool");
        assert_eq!(merge_paths("/a:/b", "/a:/b"), "/a:/b");
    }

    #[test]
    fn the_container_path_is_read_from_its_marks() {
        let out =
            format!("{CONTAINER_MARK}/opt/x/bin:/bin{CONTAINER_MARK}motd\n{MARK}PATH=/bin\0{MARK}");
        assert_eq!(container_path(&out), Some("/opt/x/bin:/bin"));
        assert_eq!(parse_probe_output(&out).0["PATH"], "/bin");
        assert_eq!(
            container_path(&format!("{CONTAINER_MARK}{CONTAINER_MARK}")),
            None
        );
        assert_eq!(container_path("nothing"), None);
    }

    #[tokio::test]
    async fn none_probe_runs_nothing() {
        let env = probe_user_env(
            &HostExecutor {
                default_working_dir: Some("/nonexistent/never-used".into()),
            },
            UserEnvProbe::None,
            None,
            DEFAULT_PROBE_TIMEOUT,
            &NoopReporter,
        )
        .await
        .unwrap();
        assert!(env.0.is_empty());
    }

    /// A shell that writes to stderr while the environment is dumped (busybox's interactive
    /// `sh`: "can't access tty; job control turned off") leaves every value as it is: found
    /// as a Compose test's multi-line `containerEnv` value with that line inside it.
    #[tokio::test]
    async fn the_shells_stderr_never_lands_inside_a_value() {
        use crate::lifecycle::executor::HookExecutor;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let write = |path: &std::path::Path, text: &str| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(path, text).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        // the "environment": a multi-line value, then (while the shell writes to stderr) the rest
        write(
            &bin.join("cat"),
            "#!/bin/sh\nprintf 'MULTI=one\\ntwo\\0'\nsleep 0.6\nprintf 'B=2\\0'\n",
        );
        let shell = dir.path().join("shell");
        write(
            &shell,
            &format!(
                "#!/bin/sh\necho notice >&2\n(sleep 0.3; echo 'job control turned off' >&2) &\nPATH={}:$PATH exec /bin/sh -c \"$2\"\n",
                bin.display()
            ),
        );
        let mut request = probe_request("-lic", None);
        request
            .env
            .0
            .insert("SHELL".to_string(), shell.display().to_string());
        let capture = Capture::default();
        let code = HostExecutor::default()
            .exec(&request, &capture)
            .await
            .unwrap();
        assert_eq!(code, 0);
        let env = parse_probe_output(&capture.into_lines().join("\n"));
        assert_eq!(env.0["MULTI"], "one\ntwo", "{env:?}");
        assert_eq!(env.0["B"], "2");
    }
}
