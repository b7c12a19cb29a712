//! Run-once markers: files in the remote user's data folder recording that a hook completed
//! for this container (or this start), compatible with the reference CLI's
//! (`~/.devcontainer/.onCreateCommandMarker` … holding the container's creation time;
//! `.postStartCommandMarker` holding its start time). devcell writes a marker only after the
//! hook succeeded, so a failed hook runs again next time (spec-notes/0101).

use std::collections::HashMap;

use super::hook_name::LifecycleHook;

/// Environment variable carrying the marker folder to the marker scripts (absent = the
/// default `$HOME/.devcontainer`).
pub const MARKER_FOLDER_ENV: &str = "DEVCELL_MARKER_FOLDER";
/// Environment variable carrying the folder of the hooks' pid files to the hook wrapper and
/// the reap script (absent = `<marker folder>/running`; spec-note 0423).
pub const RUNNING_FOLDER_ENV: &str = "DEVCELL_RUNNING_FOLDER";
/// Environment variable carrying the hook name to the marker write script.
pub const MARKER_NAME_ENV: &str = "DEVCELL_MARKER_NAME";
/// Environment variable carrying the marker content to the marker write script.
pub const MARKER_VALUE_ENV: &str = "DEVCELL_MARKER_VALUE";

/// The container facts markers are keyed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerContext {
    /// The container's creation time, exactly as the engine reports it (`Created` of
    /// `docker inspect`, e.g. `2026-11-29T08:00:00.123456789Z`): the content of the
    /// once-per-container markers. Use the engine's string verbatim so markers written by the
    /// reference CLI for the same container match.
    pub created_at: String,
    /// The container's last start time, verbatim (`State.StartedAt`): the content of the
    /// `postStartCommand` marker.
    pub started_at: String,
    /// The folder holding the markers, absolute; `None` = `$HOME/.devcontainer` of the user
    /// the hooks run as (the reference CLI's default user data folder). Must survive container
    /// restarts: when home is a tmpfs (hardened profile), use a persistent mount instead
    /// (spec-notes/0101).
    pub folder: Option<String>,
    /// The folder of the hooks' pid files ([`HOOK_WRAPPER_SCRIPT`]), absolute and writable by
    /// the hooks' user; `None` = `running` in the marker folder.
    pub running_folder: Option<String>,
}

impl MarkerContext {
    /// The content `hook`'s marker holds once the hook completed; `None` for hooks without a
    /// marker (`initializeCommand`, `postAttachCommand`).
    pub fn value_for(&self, hook: LifecycleHook) -> Option<&str> {
        match hook {
            LifecycleHook::OnCreateCommand
            | LifecycleHook::UpdateContentCommand
            | LifecycleHook::PostCreateCommand => Some(&self.created_at),
            LifecycleHook::PostStartCommand => Some(&self.started_at),
            LifecycleHook::InitializeCommand | LifecycleHook::PostAttachCommand => None,
        }
    }

    /// Environment for the marker scripts (the folders, when set).
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let folder = self.folder.iter().map(|f| (MARKER_FOLDER_ENV, f));
        let running = self.running_folder.iter().map(|f| (RUNNING_FOLDER_ENV, f));
        folder
            .chain(running)
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }
}

/// Hooks that have markers, in spec order.
pub const MARKED_HOOKS: [LifecycleHook; 4] = [
    LifecycleHook::OnCreateCommand,
    LifecycleHook::UpdateContentCommand,
    LifecycleHook::PostCreateCommand,
    LifecycleHook::PostStartCommand,
];

/// `/bin/sh` script printing one `<hook>=<first line of its marker>` line per marked hook
/// (empty after `=` when the marker is missing). Paths come from the environment, never from
/// the script text.
pub const READ_SCRIPT: &str = r#"d="${DEVCELL_MARKER_FOLDER:-$HOME/.devcontainer}"
for m in onCreateCommand updateContentCommand postCreateCommand postStartCommand; do
  v=
  if [ -f "$d/.${m}Marker" ]; then IFS= read -r v < "$d/.${m}Marker" || true; fi
  printf '%s=%s\n' "$m" "$v"
done"#;

/// `/bin/sh` script writing `$DEVCELL_MARKER_VALUE` and a newline to
/// `<folder>/.<$DEVCELL_MARKER_NAME>Marker`, creating the folder.
pub const WRITE_SCRIPT: &str = r#"d="${DEVCELL_MARKER_FOLDER:-$HOME/.devcontainer}"
mkdir -p "$d" && printf '%s\n' "$DEVCELL_MARKER_VALUE" > "$d/.${DEVCELL_MARKER_NAME}Marker""#;

/// Environment variable naming a hook command's pid file (`<running folder>/<id>.pid`) for
/// [`HOOK_WRAPPER_SCRIPT`].
pub const HOOK_ID_ENV: &str = "DEVCELL_HOOK_ID";

/// `$0` of [`HOOK_WRAPPER_SCRIPT`], so the wrapper is recognisable in a process list.
pub const HOOK_WRAPPER_NAME: &str = "devcell-hook";

/// `/bin/sh` script every container hook command runs under (`sh -c <this> devcell-hook
/// <argv…>`; spec-note 0423). An engine exec's process leads its own session and process
/// group, and this shell is that process: it records `<pid> <start time>` (`/proc/self/stat`
/// field 22) in `$DEVCELL_RUNNING_FOLDER/$DEVCELL_HOOK_ID.pid` (default `<folder>/running`), runs the command as its child (same
/// process group), removes the file (and the folder once empty, unless it is the
/// [`RUNNING_FOLDER_ENV`] one, so a normal run leaves the reference CLI's marker folder as it
/// was) and exits with the command's status. A devcell killed
/// while the hook runs leaves the file, and the process group, behind for
/// [`REAP_SCRIPT`]. Shell built-ins only (plus `mkdir`, `rm`, `rmdir`).
pub const HOOK_WRAPPER_SCRIPT: &str = r#"st() { [ $# -ge 20 ] && shift 19 && printf '%s' "$1"; }
d="${DEVCELL_RUNNING_FOLDER:-${DEVCELL_MARKER_FOLDER:-$HOME/.devcontainer}/running}"; f="$d/$DEVCELL_HOOK_ID.pid"
if mkdir -p "$d" 2>/dev/null && read -r l < /proc/$$/stat; then printf '%s %s\n' $$ "$(st ${l##*) })" > "$f" 2>/dev/null; fi
"$@"; rc=$?; rm -f "$f"; [ -n "$DEVCELL_RUNNING_FOLDER" ] || rmdir "$d" 2>/dev/null; exit $rc"#;

/// Environment variable carrying a token unique to one run of [`REAP_SCRIPT`]: every process
/// of that run inherits it, so [`STOP_REAP_SCRIPT`] can find them when the run is past its
/// deadline (spec-note 0662).
pub const REAP_TOKEN_ENV: &str = "DEVCELL_REAP_TOKEN";

/// Environment variable naming, to [`STOP_REAP_SCRIPT`], the token of the run to stop (another
/// name than [`REAP_TOKEN_ENV`], so the stopping script and its children never match it).
pub const REAP_STOP_ENV: &str = "DEVCELL_REAP_STOP";

/// `/bin/sh` script `SIGKILL`ing every process whose environment holds
/// `DEVCELL_REAP_TOKEN=$DEVCELL_REAP_STOP` (a [`REAP_SCRIPT`] run past its deadline and what it
/// started), as far as `/proc` shows them to the hooks' user; prints `killed <n>` and exits 0
/// when it killed any (spec-note 0662). Uses `tr` and `grep` beside the shell's built-ins.
pub const STOP_REAP_SCRIPT: &str = r#"t="DEVCELL_REAP_TOKEN=$DEVCELL_REAP_STOP"; n=0
[ -n "$DEVCELL_REAP_STOP" ] || exit 2
for e in /proc/[0-9]*/environ; do
  p=${e#/proc/}; p=${p%/environ}
  [ "$p" = "$$" ] && continue
  if tr '\000' '\n' < "$e" 2>/dev/null | grep -qxF "$t"; then kill -KILL "$p" 2>/dev/null && n=$((n+1)); fi
done
echo "killed $n"; [ "$n" -gt 0 ]"#;

/// `/bin/sh` script run before a bring-up's first container hook (spec-note 0423): for each
/// pid file [`HOOK_WRAPPER_SCRIPT`] left behind whose process is still the one recorded (same
/// start time, so a reused pid is never signalled), sends `SIGTERM` to its process group,
/// waits up to 10 s for it to end, then `SIGKILL`s what is left; prints
/// `stopped <id>` per group stopped; removes every stale file.
pub const REAP_SCRIPT: &str = r#"st() { [ $# -ge 20 ] && shift 19 && printf '%s' "$1"; }
d="${DEVCELL_RUNNING_FOLDER:-${DEVCELL_MARKER_FOLDER:-$HOME/.devcontainer}/running}"
for f in "$d"/*.pid; do
  [ -f "$f" ] || continue
  p= s=
  read -r p s < "$f" 2>/dev/null
  case "$p" in ''|*[!0-9]*) rm -f "$f"; continue ;; esac
  now=
  if read -r l < "/proc/$p/stat" 2>/dev/null; then now=$(st ${l##*) }); fi
  if [ -n "$now" ] && [ "$now" = "$s" ]; then
    kill -TERM "-$p" 2>/dev/null
    i=0
    while kill -0 "-$p" 2>/dev/null && [ $i -lt 10 ]; do sleep 1; i=$((i+1)); done
    kill -KILL "-$p" 2>/dev/null
    f2=${f##*/}; echo "stopped ${f2%.pid}"
  fi
  rm -f "$f"
done
[ -n "$DEVCELL_RUNNING_FOLDER" ] || rmdir "$d" 2>/dev/null; :"#;

/// The pid-file id of one hook command: `<hook>-<source index>[-<entry>]`, every character
/// but ASCII letters, digits, `-` and `_` replaced by `_` (an entry name is the repository's).
pub fn hook_id(hook: LifecycleHook, source: usize, entry: Option<&str>) -> String {
    let raw = match entry {
        Some(e) => format!("{}-{source}-{e}", hook.property()),
        None => format!("{}-{source}", hook.property()),
    };
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Parses the output lines of [`READ_SCRIPT`] into hook → marker content (trimmed; hooks
/// whose marker is missing or empty are absent). Unknown lines are ignored.
pub fn parse_read_output(lines: &[String]) -> HashMap<LifecycleHook, String> {
    lines
        .iter()
        .filter_map(|line| {
            let (name, value) = line.split_once('=')?;
            let hook = LifecycleHook::from_property(name.trim())?;
            let value = value.trim();
            (MARKED_HOOKS.contains(&hook) && !value.is_empty()).then(|| (hook, value.to_string()))
        })
        .collect()
}

/// The marker file of `hook` in the marker folder (`.postCreateCommandMarker`).
pub fn file_name(hook: LifecycleHook) -> String {
    format!(".{}Marker", hook.property())
}

/// The markers among the files of a marker folder (file name → content, as
/// [`HookExecutor::read_files`](super::HookExecutor::read_files) gives them): hook → first
/// line, trimmed, as [`parse_read_output`]. Empty or unreadable markers are absent.
pub fn parse_files(
    files: &std::collections::BTreeMap<String, Vec<u8>>,
) -> HashMap<LifecycleHook, String> {
    MARKED_HOOKS
        .iter()
        .filter_map(|hook| {
            let text = std::str::from_utf8(files.get(&file_name(*hook))?).ok()?;
            let value = text.lines().next().unwrap_or_default().trim();
            (!value.is_empty()).then(|| (*hook, value.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    /// Runs `script` with the host's `/bin/sh` and `envs`, asserts it succeeded, and returns
    /// its standard output.
    /// `argv` under the hook wrapper, as the executor runs a hook command.
    fn wrapped(argv: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", HOOK_WRAPPER_SCRIPT, HOOK_WRAPPER_NAME])
            .args(argv);
        cmd
    }

    fn run_script<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        script: &str,
        envs: impl IntoIterator<Item = (K, V)>,
    ) -> String {
        let output = std::process::Command::new("/bin/sh")
            .args(["-c", script])
            .envs(envs)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    }

    /// Spec-note 0662: the stop of a reap past its deadline kills the processes carrying the
    /// reap's token, and only those.
    #[test]
    fn the_stop_script_kills_the_processes_of_one_reap_only() {
        let spawn = |token: &str| {
            std::process::Command::new("/bin/sh")
                .args(["-c", "exec sleep 1000"]) // one process: nothing outlives the test
                .env(REAP_TOKEN_ENV, token)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        };
        let mut this = spawn("tok-1");
        let mut other = spawn("tok-12");
        let out = run_script(STOP_REAP_SCRIPT, [(REAP_STOP_ENV, "tok-1")]);
        assert!(out.starts_with("killed "), "{out}");
        let status = this.wait().unwrap();
        assert!(!status.success(), "{status:?}");
        assert!(
            other.try_wait().unwrap().is_none(),
            "another token's process was killed"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn marker_files_read_directly_parse_like_the_script_output() {
        let files = std::collections::BTreeMap::from([
            (
                ".postCreateCommandMarker".to_string(),
                b"2026-01-01T00:00:00Z\n".to_vec(),
            ),
            (".onCreateCommandMarker".to_string(), b"\n".to_vec()),
            (".postStartCommandMarker".to_string(), vec![0xff]),
            ("other".to_string(), b"x".to_vec()),
        ]);
        let markers = parse_files(&files);
        assert_eq!(
            markers,
            HashMap::from([(
                LifecycleHook::PostCreateCommand,
                "2026-01-01T00:00:00Z".to_string()
            )])
        );
        assert_eq!(
            file_name(LifecycleHook::UpdateContentCommand),
            ".updateContentCommandMarker"
        );
    }

    #[test]
    fn read_output_parses_present_markers_only() {
        let lines: Vec<String> = [
            "onCreateCommand=2026-11-29T08:00:00.1Z",
            "updateContentCommand=",
            "postCreateCommand=2026-11-29T08:00:00.1Z\r",
            "postStartCommand=2026-11-29T09:00:00Z",
            "garbage",
            "postAttachCommand=x",
        ]
        .map(String::from)
        .to_vec();
        let markers = parse_read_output(&lines);
        assert_eq!(markers.len(), 3);
        assert_eq!(
            markers[&LifecycleHook::PostCreateCommand],
            "2026-11-29T08:00:00.1Z"
        );
        assert!(!markers.contains_key(&LifecycleHook::UpdateContentCommand));
        assert!(!markers.contains_key(&LifecycleHook::PostAttachCommand));
    }

    #[test]
    fn marker_values_follow_the_reference_keys() {
        let ctx = MarkerContext {
            created_at: "c".into(),
            started_at: "s".into(),
            folder: None,
            running_folder: None,
        };
        assert_eq!(ctx.value_for(LifecycleHook::OnCreateCommand), Some("c"));
        assert_eq!(ctx.value_for(LifecycleHook::PostCreateCommand), Some("c"));
        assert_eq!(ctx.value_for(LifecycleHook::PostStartCommand), Some("s"));
        assert_eq!(ctx.value_for(LifecycleHook::PostAttachCommand), None);
        assert!(ctx.env().is_empty());
    }

    #[test]
    fn a_left_behind_hook_is_stopped_by_the_reap_script_and_a_reused_pid_is_not() {
        use std::os::unix::process::CommandExt as _;
        // The scripts are plain POSIX sh; run them with the host's /bin/sh.
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("markers");
        let hook = wrapped(&["sleep", "60"])
            .env(MARKER_FOLDER_ENV, &folder)
            .env(HOOK_ID_ENV, "postCreateCommand-0")
            .process_group(0) // as an engine exec: its own process group
            .spawn()
            .unwrap();
        let pidfile = folder.join("running/postCreateCommand-0.pid");
        for _ in 0..100 {
            if std::fs::read_to_string(&pidfile).is_ok_and(|t| t.ends_with('\n')) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let recorded = std::fs::read_to_string(&pidfile).unwrap();
        assert!(
            recorded.starts_with(&format!("{} ", hook.id())),
            "{recorded}"
        );
        // Waited for at once, as the engine's shim waits for an exec (no zombie lingers).
        let mut hook = hook;
        let waiter = std::thread::spawn(move || hook.wait().unwrap());
        // A file naming a live pid with another start time (a reused pid) is removed only.
        std::fs::write(
            folder.join("running/old.pid"),
            format!("{} 1\n", std::process::id()),
        )
        .unwrap();
        let reap = run_script(REAP_SCRIPT, [(MARKER_FOLDER_ENV, &folder)]);
        assert_eq!(reap, "stopped postCreateCommand-0\n");
        let status = waiter.join().unwrap();
        assert!(!status.success(), "the hook was stopped: {status:?}");
        assert!(!folder.join("running").exists(), "emptied and removed");
        // A hook that ends by itself removes its file and keeps its exit status.
        let done = wrapped(&["sh", "-c", "exit 3"])
            .env(MARKER_FOLDER_ENV, &folder)
            .env(HOOK_ID_ENV, "x")
            .status()
            .unwrap();
        assert_eq!(done.code(), Some(3));
        assert!(!folder.join("running").exists());
        assert_eq!(
            hook_id(LifecycleHook::PostCreateCommand, 1, Some("a b/../c")),
            "postCreateCommand-1-a_b____c"
        );
    }

    #[test]
    fn the_running_folder_holds_the_pid_files_and_outlives_the_hooks() {
        // Under `hardened` the pid files go to a tmpfs of their own (a mount point: the
        // scripts must not need to create or remove it) and never into the marker folder.
        let dir = tempfile::tempdir().unwrap();
        let markers = dir.path().join("markers");
        let running = dir.path().join("run");
        std::fs::create_dir(&running).unwrap();
        let ctx = MarkerContext {
            created_at: "c".into(),
            started_at: "s".into(),
            folder: Some(markers.display().to_string()),
            running_folder: Some(running.display().to_string()),
        };
        let env: Vec<(String, String)> = ctx.env();
        assert_eq!(
            env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            [MARKER_FOLDER_ENV, RUNNING_FOLDER_ENV]
        );
        let hook = wrapped(&["sh", "-c", "ls \"$0\"; exit 4", running.to_str().unwrap()])
            .envs(env.iter().cloned())
            .env(HOOK_ID_ENV, "postCreateCommand-0")
            .output()
            .unwrap();
        assert_eq!(hook.status.code(), Some(4));
        assert_eq!(
            String::from_utf8_lossy(&hook.stdout),
            "postCreateCommand-0.pid\n"
        );
        assert!(running.is_dir(), "the mount point stays");
        assert_eq!(std::fs::read_dir(&running).unwrap().count(), 0);
        assert!(!markers.exists(), "nothing written to the marker folder");
        std::fs::write(running.join("gone.pid"), "999999999 1\n").unwrap();
        run_script(REAP_SCRIPT, env.iter().cloned());
        assert_eq!(std::fs::read_dir(&running).unwrap().count(), 0);
    }

    #[test]
    fn scripts_run_in_a_real_shell() {
        // The scripts are plain POSIX sh; check them against the host's /bin/sh.
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("nested/.devcontainer");
        run_script(
            WRITE_SCRIPT,
            [
                (MARKER_FOLDER_ENV, folder.as_os_str()),
                (MARKER_NAME_ENV, OsStr::new("postStartCommand")),
                (MARKER_VALUE_ENV, OsStr::new("2026-11-29T09:00:00Z")),
            ],
        );
        assert_eq!(
            std::fs::read_to_string(folder.join(".postStartCommandMarker")).unwrap(),
            "2026-11-29T09:00:00Z\n"
        );
        let lines: Vec<String> = run_script(READ_SCRIPT, [(MARKER_FOLDER_ENV, &folder)])
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(lines.len(), 4);
        let markers = parse_read_output(&lines);
        assert_eq!(markers.len(), 1);
        assert_eq!(
            markers[&LifecycleHook::PostStartCommand],
            "2026-11-29T09:00:00Z"
        );
    }
}
