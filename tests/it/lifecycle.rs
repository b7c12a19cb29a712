//! Lifecycle hooks against a real container: `devcell::lifecycle` driven through a
//! `HookExecutor` that uses the `docker` CLI (`docker exec`), so the forms, concurrency,
//! stop-on-failure and run-once markers are observed inside a real container.

use std::process::Stdio;
use std::sync::Mutex;

use devcell::lifecycle::{
    BringUpKind, DEFAULT_PROBE_TIMEOUT, ExecRequest, ExecutorError, HookContext, HookExecutor,
    LifecycleError, LifecycleHook, MarkerContext, Plan, PlanOptions, SkipReason, UserEnvProbe,
    probe_user_env, run_plan,
};
use devcell::progress::{Event, Reporter};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::support::docker::{BUSYBOX_IMAGE, TestContainer, engine_ready};

/// Runs hook commands with `docker exec`. Env values reach the process through the docker
/// CLI's own environment (`-e NAME` without a value), never through its argv.
struct DockerExec {
    container: String,
}

impl HookExecutor for DockerExec {
    async fn exec(
        &self,
        request: &ExecRequest,
        output: &dyn Reporter,
    ) -> Result<i64, ExecutorError> {
        let mut command = tokio::process::Command::new("docker");
        command.arg("exec");
        if let Some(user) = &request.user {
            command.args(["-u", user]);
        }
        if let Some(dir) = &request.working_dir {
            command.args(["-w", dir]);
        }
        for (name, value) in &request.env.0 {
            command.args(["-e", name]).env(name, value);
        }
        command
            .arg(&self.container)
            .args(&request.argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // its own process group, killed when dropped: at the deadline below, or with the test
        devcell::process::contain_tokio(&mut command);
        let named = format!("docker exec {} {}", self.container, request.argv.join(" "));
        let mut child = command.spawn()?;
        let mut group = devcell::process::GroupGuard::new(child.id());
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let deadline = crate::support::deadline::cli_deadline();
        let run = async {
            tokio::join!(
                forward(stdout, output),
                forward(stderr, output),
                child.wait()
            )
        };
        // a `docker exec` whose container's shim died never returns (CI hung on one)
        let ((), (), status) = tokio::time::timeout(deadline, run).await.map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "`{named}` did not finish within {} and was killed",
                    devcell::process::shown(deadline)
                ),
            )
        })?;
        group.disarm();
        Ok(i64::from(status?.code().unwrap_or(-1)))
    }
}

async fn forward<R: AsyncRead + Unpin>(stream: Option<R>, output: &dyn Reporter) {
    let Some(stream) = stream else { return };
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        output.report(Event::Output(line));
    }
}

/// Collects output lines.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Reporter for Lines {
    fn report(&self, event: Event) {
        if let Event::Output(line) = event {
            self.0.lock().unwrap().push(line);
        }
    }
}

impl Lines {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn context(container: &TestContainer) -> HookContext {
    HookContext {
        user: Some("root".into()),
        working_dir: Some("/tmp".into()),
        env: [("DEVCELL_IT_ENV", "remote-env-value")]
            .into_iter()
            .collect(),
        secrets: [("DEVCELL_IT_SECRET", "it-secret-value")]
            .into_iter()
            .collect(),
        markers: Some(MarkerContext {
            created_at: container.inspect("{{.Created}}"),
            started_at: container.inspect("{{.State.StartedAt}}"),
            folder: None,
            running_folder: None,
        }),
        new_container: false,
    }
}

fn plan(config: &Value, kind: BringUpKind) -> Plan {
    Plan::from_merged_configuration(config, kind, PlanOptions::default()).unwrap()
}

#[tokio::test]
async fn hook_forms_run_as_the_spec_says_in_a_real_container() {
    if !engine_ready(
        "hook_forms_run_as_the_spec_says_in_a_real_container",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let container = TestContainer::run(BUSYBOX_IMAGE, &["sleep", "600"]);
    let executor = DockerExec {
        container: container.id.clone(),
    };
    let entry = |name: &str| {
        format!("echo {name}-start >> /tmp/order.log; sleep 2; echo {name}-end >> /tmp/order.log")
    };
    let config = json!({
        // String form: through /bin/sh -c. Array form: no shell, argv verbatim.
        "onCreateCommands": ["echo $((1+1))", ["echo", "a'b"], ["echo", "$((1+1))"]],
        // Object form: entries run concurrently.
        "updateContentCommands": [{"a": entry("a"), "b": ["/bin/sh", "-c", entry("b")]}],
        // Env, working directory.
        "postCreateCommands": ["echo \"env=$DEVCELL_IT_ENV\"; pwd; echo \"$DEVCELL_IT_SECRET\" > /tmp/secret"],
    });
    let lines = Lines::default();
    let report = run_plan(
        &executor,
        &plan(&config, BringUpKind::Created),
        &context(&container),
        &lines,
    )
    .await
    .unwrap();
    let output = lines.take();
    assert_eq!(
        output,
        vec!["2", "a'b", "$((1+1))", "env=remote-env-value", "/tmp"],
        "object-form entries print nothing; the rest in order"
    );
    assert_eq!(report.runs.len(), 6);
    // The secret reached the hook's environment.
    assert_eq!(container.sh("cat /tmp/secret"), "it-secret-value\n");
    assert!(report.runs.iter().all(|r| r.exit_code == 0));

    // Both entries started before either ended: they overlapped.
    let order: Vec<String> = container
        .sh("cat /tmp/order.log")
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(order.len(), 4, "{order:?}");
    let mut starts = order[..2].to_vec();
    starts.sort();
    assert_eq!(starts, vec!["a-start", "b-start"], "order: {order:?}");
    let mut ends = order[2..].to_vec();
    ends.sort();
    assert_eq!(ends, vec!["a-end", "b-end"], "order: {order:?}");

    // Hooks run as the given user.
    let mut as_nobody = context(&container);
    as_nobody.user = Some("nobody".into());
    let attach = json!({"postAttachCommands": ["id -u"]});
    run_plan(
        &executor,
        &plan(&attach, BringUpKind::Running),
        &as_nobody,
        &lines,
    )
    .await
    .unwrap();
    assert_eq!(lines.take(), vec!["65534"]);
}

#[tokio::test]
async fn failed_post_create_stops_the_sequence_and_markers_prevent_reruns() {
    if !engine_ready(
        "failed_post_create_stops_the_sequence_and_markers_prevent_reruns",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let container = TestContainer::run(BUSYBOX_IMAGE, &["sleep", "600"]);
    let executor = DockerExec {
        container: container.id.clone(),
    };
    let config = json!({
        "onCreateCommands": ["echo onCreate >> /tmp/runs"],
        "updateContentCommands": [["/bin/sh", "-c", "echo updateContent >> /tmp/runs"]],
        "postCreateCommands": [
            "echo postCreate-feature >> /tmp/runs",
            "echo postCreate >> /tmp/runs; echo about to fail; test -f /tmp/allow && exit 0; exit 3",
        ],
        "postStartCommands": ["echo postStart >> /tmp/runs"],
        "postAttachCommands": ["echo postAttach >> /tmp/runs"],
    });
    let runs = |c: &TestContainer| -> Vec<String> {
        c.sh("cat /tmp/runs").lines().map(String::from).collect()
    };
    let lines = Lines::default();

    // 1. New container: postCreate's second source fails; postStart and postAttach don't run.
    let err = run_plan(
        &executor,
        &plan(&config, BringUpKind::Created),
        &context(&container),
        &lines,
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`postCreateCommand` from `postCreateCommands[1]` (source 1) failed with exit code 3"
    );
    let LifecycleError::HookFailed(failure) = &err else {
        panic!("unexpected error {err:?}");
    };
    assert_eq!(failure.hook, LifecycleHook::PostCreateCommand);
    assert_eq!(failure.exit_code(), 3);
    assert_eq!(
        failure.failed_runs().next().unwrap().output_tail,
        vec!["about to fail"]
    );
    assert_eq!(
        runs(&container),
        vec![
            "onCreate",
            "updateContent",
            "postCreate-feature",
            "postCreate"
        ]
    );
    // Markers exist for the hooks that succeeded only.
    let markers = container.sh("ls -A /root/.devcontainer");
    assert_eq!(
        markers.split_whitespace().collect::<Vec<_>>(),
        vec![".onCreateCommandMarker", ".updateContentCommandMarker"]
    );
    assert_eq!(
        container
            .sh("cat /root/.devcontainer/.onCreateCommandMarker")
            .trim(),
        container.inspect("{{.Created}}")
    );

    // 2. Next bring-up on the running container: the failed postCreate is retried (both
    //    sources), then postStart and postAttach; onCreate/updateContent are not rerun.
    container.sh("touch /tmp/allow; : > /tmp/runs");
    let report = run_plan(
        &executor,
        &plan(&config, BringUpKind::Running),
        &context(&container),
        &lines,
    )
    .await
    .unwrap();
    assert_eq!(
        runs(&container),
        vec![
            "postCreate-feature",
            "postCreate",
            "postStart",
            "postAttach"
        ]
    );
    assert_eq!(
        report
            .skipped
            .iter()
            .filter(|s| s.reason == SkipReason::AlreadyRan)
            .map(|s| s.hook)
            .collect::<Vec<_>>(),
        vec![
            LifecycleHook::OnCreateCommand,
            LifecycleHook::UpdateContentCommand
        ]
    );

    // 3. Re-attach again: only postAttach.
    container.sh(": > /tmp/runs");
    run_plan(
        &executor,
        &plan(&config, BringUpKind::Running),
        &context(&container),
        &lines,
    )
    .await
    .unwrap();
    assert_eq!(runs(&container), vec!["postAttach"]);

    // 4. Restart: postStart (new start time) and postAttach; once-hooks stay done.
    container.restart();
    container.sh(": > /tmp/runs");
    run_plan(
        &executor,
        &plan(&config, BringUpKind::Restarted),
        &context(&container),
        &lines,
    )
    .await
    .unwrap();
    assert_eq!(runs(&container), vec!["postStart", "postAttach"]);
    assert_eq!(
        container
            .sh("cat /root/.devcontainer/.postStartCommandMarker")
            .trim(),
        container.inspect("{{.State.StartedAt}}")
    );
}

/// Collects status lines.
#[derive(Default)]
struct Statuses(Mutex<Vec<String>>);

impl Reporter for Statuses {
    fn report(&self, event: Event) {
        if let Event::Status(line) = event {
            self.0.lock().unwrap().push(line);
        }
    }
}

#[tokio::test]
async fn user_env_probe_reads_the_login_shell_environment() {
    if !engine_ready(
        "user_env_probe_reads_the_login_shell_environment",
        BUSYBOX_IMAGE,
    ) {
        return;
    }
    let container = TestContainer::run(BUSYBOX_IMAGE, &["sleep", "600"]);
    let executor = DockerExec {
        container: container.id.clone(),
    };
    container.sh(
        "printf '%s\\n' 'echo welcome from profile' 'export DEVCELL_FROM_PROFILE=\"yes it is\"' > /etc/profile",
    );
    let statuses = Statuses::default();
    let env = probe_user_env(
        &executor,
        UserEnvProbe::LoginShell,
        Some("root"),
        DEFAULT_PROBE_TIMEOUT,
        &statuses,
    )
    .await
    .unwrap();
    assert_eq!(
        env.0.get("DEVCELL_FROM_PROFILE").map(String::as_str),
        Some("yes it is"),
        "{:?}",
        env.0.keys().collect::<Vec<_>>()
    );
    assert!(env.0.contains_key("PATH"));
    assert!(!env.0.contains_key("PWD"));
    assert!(statuses.0.lock().unwrap().is_empty());

    // A non-login shell does not read /etc/profile.
    let env = probe_user_env(
        &executor,
        UserEnvProbe::InteractiveShell,
        Some("root"),
        DEFAULT_PROBE_TIMEOUT,
        &statuses,
    )
    .await
    .unwrap();
    assert!(env.0.contains_key("PATH"));
    assert!(!env.0.contains_key("DEVCELL_FROM_PROFILE"));

    // A system user whose passwd shell is `/bin/false` (busybox's `nobody`) is probed with
    // `/bin/sh`, not reported as a failed probe.
    let env = probe_user_env(
        &executor,
        UserEnvProbe::LoginShell,
        Some("nobody"),
        DEFAULT_PROBE_TIMEOUT,
        &statuses,
    )
    .await
    .unwrap();
    assert_eq!(
        env.0.get("DEVCELL_FROM_PROFILE").map(String::as_str),
        Some("yes it is")
    );
    assert!(statuses.0.lock().unwrap().is_empty());

    // A startup file that hangs: the probe gives up and bring-up continues without it.
    container.sh("echo 'sleep 30' >> /etc/profile");
    let env = probe_user_env(
        &executor,
        UserEnvProbe::LoginShell,
        Some("root"),
        std::time::Duration::from_secs(1),
        &statuses,
    )
    .await
    .unwrap();
    assert!(env.0.is_empty());
    let statuses = statuses.0.lock().unwrap();
    assert_eq!(statuses.len(), 1);
    assert!(
        statuses[0].contains("userEnvProbe took longer than 1 s"),
        "{statuses:?}"
    );
}
