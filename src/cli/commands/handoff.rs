//! `devcell handoff`.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::process::ExitCode;

use futures_util::StreamExt as _;

use crate::cli::args::{Format, HandoffArgs};
use crate::cli::commands::{
    Extras, environment_request, exit, failure, finish, folder, runtime_own_signals, terminal_sizes,
};
use crate::cli::output::{self, StderrReporter};
use crate::handoff::agent::{handoff, plan};
use crate::handoff::context::AgentRuntime;
use crate::handoff::envelope::{Envelope, ErrorBody, ErrorCode, NextAction};
use crate::handoff::plan::{HandoffOptions, HandoffPlan};
use crate::handoff::session::AgentStreams;
use crate::ops::options::SecurityOptions;
use crate::ops::{LockfileMode, OpsError};

/// Runs `handoff`: with `--plan` the plan only; else the handoff, the agent's output streamed
/// (stdout, or stderr under `--format json`) and devcell's exit code the agent's.
pub fn run(args: HandoffArgs) -> anyhow::Result<ExitCode> {
    let opts = match options(&args).and_then(|o| {
        crate::handoff::environment::refuse_on_host(&o)?;
        crate::handoff::mail_worktree::refuse_on_host(&o)?;
        crate::handoff::named_container::refuse_combinations(
            o.container.as_deref(),
            o.runtime,
            o.effective_isolation(),
        )?;
        let mut o = o;
        // a group named only in config.toml does not apply where no group can (spec-note 0525)
        if args.group.is_none() && crate::handoff::group::refuse_combinations(&o).is_err() {
            o.group = None;
        }
        crate::handoff::group::refuse_combinations(&o)?;
        if o.mail_channel_wanted()
            && o.mail_group.is_none()
            && o.effective_isolation() != crate::settings::Isolation::Clone
        {
            o.mail_group = crate::handoff::mail_host::group_of(&o.workspace_folder, None).ok();
        }
        Ok(o)
    }) {
        Ok(o) => o,
        Err(e) => {
            return Ok(finish(
                args.format,
                Err::<(), _>(e),
                |_| String::new(),
                |_| Extras::default(),
            ));
        }
    };
    let rt = match runtime_own_signals() {
        Ok(rt) => rt,
        Err(e) => {
            let err = OpsError::Unsupported {
                message: e.to_string(),
                hint: None,
            };
            return Ok(finish(
                args.format,
                Err::<(), _>(err),
                |_| String::new(),
                |_| Extras::default(),
            ));
        }
    };
    if args.plan {
        let opts = match opts.effective_isolation() {
            crate::settings::Isolation::Clone => {
                crate::handoff::task::run::refuse_host_runtime(&opts)
                    .map(|()| crate::handoff::task::run::plan_options(&opts))
                    .map_err(Into::into)
            }
            crate::settings::Isolation::Worktree => {
                crate::handoff::mail_worktree::plan_options(&opts)
            }
        };
        let result = match opts {
            Ok(opts) => rt.block_on(plan(&opts)),
            Err(e) => Err(e),
        };
        return Ok(finish(args.format, result, render_plan, |p| Extras {
            warnings: p.coded_warnings(),
            next_actions: Vec::new(),
        }));
    }
    let json = args.format == Format::Json;
    // With a TTY the terminal is put in raw mode (restored on drop) and forwarded, so an
    // interactive agent gets every key (Ctrl-C included); a terminal without a TTY for the agent
    // is not forwarded (like `exec`), piped input always is.
    let raw = opts.tty.then(RawMode::enable).flatten();
    let opts = HandoffOptions {
        tty_size: if opts.tty {
            let _context = rt.enter();
            terminal_sizes()
        } else {
            None
        },
        ..opts
    };
    // Registered before anything else runs: a signal at any phase stops the handoff
    // (spec-note 0425).
    let stop = {
        let _context = rt.enter();
        stop_signals()
    };
    let result = rt.block_on(async {
        let streams = agent_streams(json, raw.is_none());
        if opts.effective_isolation() == crate::settings::Isolation::Clone {
            crate::handoff::task::run::handoff(&opts, streams, stop, &StderrReporter).await
        } else {
            handoff(&opts, streams, stop, &StderrReporter).await
        }
    });
    drop(raw);
    // nothing devcell started and waits for outlives it (they are all ended by now)
    crate::process::kill_running();
    rt.shutdown_background();
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            let signal = crate::handoff::session::Stopped::signal_of(&e);
            // a clone task has no host runtime to offer (issue 27)
            let offer_host = opts.effective_isolation() != crate::settings::Isolation::Clone;
            let code = failed(&args, e, offer_host);
            // stopped by a signal: 128 + its number, as the signal would have
            return Ok(match signal {
                Some(n) => exit(128 + n),
                None => code,
            });
        }
    };
    let mut r = r;
    if let Some(warning) = write_environment_out(&args, &r) {
        r.warnings.push(warning);
    }
    report_end(&r, json);
    Ok(exit(r.process_exit_code()))
}

/// What devcell says when the agent has ended: the warnings not shown yet, how the agent
/// ended, and under `--format json` the envelope (`agent_failed` unless it succeeded).
fn report_end(r: &crate::handoff::session::HandoffResult, json: bool) {
    for w in r.warnings.iter().filter(|w| !r.shown_warnings.contains(w)) {
        output::stderr_line(&format!("warning: {w}"));
    }
    let how = match (r.exit_code, r.signal) {
        (_, Some(s)) => format!("was killed by signal {s}"),
        (Some(c), None) => format!("exited with code {c}"),
        _ => "ended".to_string(),
    };
    output::stderr_line(&format!(
        "[devcell] agent `{}` {how} (session {}, log {})",
        r.plan.agent,
        r.session.id,
        r.session.log.display()
    ));
    if json {
        let status = NextAction::command(
            "show the workspace's container, sessions and git state",
            [
                "devcell".to_string(),
                "status".to_string(),
                "--workspace-folder".to_string(),
                r.plan.workspace.to_string_lossy().into_owned(),
            ],
        );
        if r.succeeded() {
            let mut env = Envelope::success(&r).with_next_action(status);
            for (code, w) in r.coded_warnings() {
                env = env.with_warning(code, w);
            }
            output::envelope(&env);
        } else {
            let mut details = serde_json::json!({
                "session": r.session.id,
                "containerId": r.container_id,
                "log": r.session.log,
            });
            match (r.exit_code, r.signal) {
                (_, Some(s)) => details["signal"] = s.into(),
                (Some(c), None) => details["exitCode"] = c.into(),
                _ => {}
            }
            let mut env: Envelope<()> = Envelope::failure(
                ErrorBody::new(
                    ErrorCode::AgentFailed,
                    format!("agent `{}` {how}", r.plan.agent),
                )
                .with_details(details),
            )
            .with_next_action(status);
            for (code, w) in r.coded_warnings() {
                env = env.with_warning(code, w);
            }
            output::envelope(&env);
        }
    }
}

/// The agent's streams: the terminal's input unless it is a terminal not forwarded (piped
/// input always is), its output to stdout (stderr under `--format json`), its errors to stderr.
fn agent_streams(json: bool, no_raw: bool) -> AgentStreams<'static> {
    let stdin: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>> =
        if std::io::stdin().is_terminal() && no_raw {
            None
        } else {
            Some(Box::new(tokio::io::stdin()))
        };
    let stdout: Box<dyn tokio::io::AsyncWrite + Send + Unpin> = if json {
        Box::new(tokio::io::stderr())
    } else {
        Box::new(tokio::io::stdout())
    };
    AgentStreams {
        stdin,
        stdout,
        stderr: Box::new(tokio::io::stderr()),
    }
}

/// `SIGTERM`, `SIGINT` and `SIGHUP` as a [`crate::handoff::session::StopSignal`], registered
/// now (needs a runtime context; a signal that cannot be registered is never seen).
fn stop_signals() -> crate::handoff::session::StopSignal<'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let streams: Vec<(tokio::signal::unix::Signal, i32)> = [
        (SignalKind::terminate(), 15),
        (SignalKind::interrupt(), 2),
        (SignalKind::hangup(), 1),
    ]
    .into_iter()
    .filter_map(|(kind, n)| signal(kind).ok().map(|s| (s, n)))
    .collect();
    let each = streams.into_iter().map(|(s, n)| {
        futures_util::stream::unfold(
            s,
            move |mut s| async move { s.recv().await.map(|()| (n, s)) },
        )
        .boxed()
    });
    Box::pin(futures_util::stream::select_all(each))
}

fn options(args: &HandoffArgs) -> Result<HandoffOptions, OpsError> {
    let settings = crate::settings::load(args.config_file.as_deref())?;
    let secrets = match &args.secrets_file {
        Some(path) => crate::ops::read_secrets_file(path)?,
        None => Default::default(),
    };
    let runtime = args
        .runtime
        .as_deref()
        .map(str::parse::<AgentRuntime>)
        .transpose()
        .map_err(|message| OpsError::Unsupported {
            message,
            hint: None,
        })?;
    let json = args.format == Format::Json;
    let out_is_tty = if json {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    let group = crate::handoff::group_request::resolve(
        args.group.as_deref(),
        args.cleanup.as_deref(),
        &settings,
        &args.agent,
    )?;
    Ok(HandoffOptions {
        workspace_folder: folder(args.workspace_folder.as_deref()),
        agent: args.agent.clone(),
        task_url: args.task_url.clone(),
        task_title: args.task_title.clone(),
        task_provider: args.task_provider.clone(),
        primary: args.primary.clone(),
        replace: args.replace,
        verify: args.verify.clone(),
        security: SecurityOptions {
            profile: args.security_profile,
            allow: args.allow.clone(),
            network: args.network,
            pids_limit: args.limits.pids_limit,
            memory: args.limits.memory.clone(),
            cpus: args.limits.cpus,
            egress_allow: args.egress_allow.clone(),
            agent: Some(args.agent.clone()),
        },
        secrets,
        settings,
        env: std::env::vars().collect(),
        // the host runtime gives the agent pipes (logged, masked), never the terminal
        tty: std::io::stdin().is_terminal() && out_is_tty && runtime != Some(AgentRuntime::Host),
        tty_size: None,
        state_root: None,
        lockfile: if args.frozen_lockfile {
            LockfileMode::Frozen
        } else if args.no_lockfile {
            LockfileMode::Off
        } else {
            LockfileMode::ReadOnly
        },
        runtime,
        isolation: args
            .isolation
            .as_deref()
            .map(str::parse::<crate::settings::Isolation>)
            .transpose()
            .map_err(|message| OpsError::Unsupported {
                message,
                hint: None,
            })?,
        task: args.task.clone(),
        base: args.base.clone(),
        sandbox: None,
        mail: None,
        // a group named here is the channel's, for a worktree handoff and a clone task alike
        mail_group: args
            .mail_group
            .as_deref()
            // (a named group is only its name checked: no folder is read)
            .map(|name| crate::handoff::mail_host::group_of(std::path::Path::new("."), Some(name)))
            .transpose()?,
        mail_channel: match (args.mail || args.mail_group.is_some(), args.no_mail) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        environment: environment_request(&args.environment)?,
        container: args.container.clone(),
        expect_mounts: crate::handoff::expect_mount::parse_all(&args.expect_mount)?,
        dotfiles: handoff_dotfiles(&args.dotfiles)?,
        group,
    })
}

/// The dotfiles flags of `handoff`: a path (`./`, `../`, `~/` or absolute) is a host folder,
/// made absolute here ([`crate::handoff::dotfiles`]).
fn handoff_dotfiles(
    args: &crate::cli::args::HandoffDotfilesArgs,
) -> Result<Option<crate::ops::Dotfiles>, OpsError> {
    let repository = args.dotfiles_repository.as_deref().map(|r| {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let path = match (r.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => Some(home.join(rest)),
            _ if r.starts_with("./") || r.starts_with("../") || r == "." => {
                std::env::current_dir().ok().map(|cwd| cwd.join(r))
            }
            _ => None,
        };
        path.map_or_else(|| r.to_string(), |p| p.to_string_lossy().into_owned())
    });
    crate::ops::Dotfiles::from_flags(
        repository.as_deref(),
        args.dotfiles_install_command.as_deref(),
        args.dotfiles_target_path.as_deref(),
    )
    .map_err(|message| OpsError::Unsupported {
        message,
        hint: Some(
            "give a local git repository's folder, a URL, or `owner/repo` for GitHub".into(),
        ),
    })
}

/// `--environment-out FILE`: the session's record written there; `Some` warning when it could
/// not be (the agent has run: its result stands).
fn write_environment_out(
    args: &HandoffArgs,
    r: &crate::handoff::session::HandoffResult,
) -> Option<String> {
    let path = args.environment.environment_out.as_ref()?;
    let written = r
        .session
        .environment
        .as_deref()
        .ok_or_else(|| "the session has no environment record".to_string())
        .and_then(|hash| {
            let store = crate::ops::environment::EnvironmentStore::open_default()
                .ok_or_else(|| "no state folder".to_string())?;
            let record = store.load(hash).map_err(|e| e.to_string())?;
            crate::ops::environment::write_record(path, &record).map_err(|e| e.to_string())
        });
    written.err().map(|why| {
        format!(
            "`--environment-out {}` was not written: {why}",
            path.display()
        )
    })
}

/// A handoff that failed before its agent ran: the error's envelope (and stderr); when no
/// engine answered, `--runtime` was not given and the handoff could run on the host
/// (`offer_host`: not a clone task), a next action offers `--runtime host` (never taken on its
/// own).
fn failed(args: &HandoffArgs, err: OpsError, offer_host: bool) -> ExitCode {
    if args.runtime.is_some() || !offer_host || err.code() != ErrorCode::EngineUnavailable {
        return finish(
            args.format,
            Err::<(), _>(err),
            |_| String::new(),
            |_| Extras::default(),
        );
    }
    let mut argv = vec!["devcell".to_string()];
    argv.extend(std::env::args().skip(1));
    argv.extend(["--runtime".to_string(), "host".to_string()]);
    let action = NextAction::command(
        "run the agent on this host instead, WITHOUT ANY ISOLATION (no container: it can do anything your user can)",
        argv,
    );
    let env = failure(&err).with_next_action(action);
    if args.format == Format::Json {
        output::envelope(&env);
    }
    output::error(&anyhow::Error::new(err));
    output::stderr_line(
        "hint: to run the agent on this host without isolation instead, add `--runtime host`",
    );
    exit(env.exit_code())
}

/// The plan as `handoff --plan` prints it in text, one section after another.
fn render_plan(p: &HandoffPlan) -> String {
    let mut s = String::new();
    render_plan_workspace(&mut s, p);
    render_plan_security(&mut s, p);
    render_plan_mounts(&mut s, p);
    render_plan_container(&mut s, p);
    render_plan_command(&mut s, p);
    s
}

/// The plan's first lines: what is handed to which agent, the runtime, the warnings, the
/// configuration, the layout and the repositories.
fn render_plan_workspace(s: &mut String, p: &HandoffPlan) {
    let _ = writeln!(
        s,
        "plan: hand `{}` to agent `{}`",
        p.workspace.display(),
        p.agent
    );
    let _ = writeln!(
        s,
        "  runtime    {} (isolation {})",
        p.runtime.as_str(),
        p.isolation
    );
    for (code, warning) in p.coded_warnings() {
        if code == crate::handoff::plan::UNISOLATED_CODE {
            let _ = writeln!(s, "  WARNING    {warning}");
        } else {
            let _ = writeln!(s, "  warning    {warning}");
        }
    }
    let _ = writeln!(
        s,
        "  config     {}",
        p.config_file
            .as_deref()
            .map_or_else(|| "(none)".to_string(), |c| c.display().to_string())
    );
    let _ = writeln!(s, "  layout     {}", p.layout.as_str());
    if p.repos.is_empty() {
        let _ = writeln!(s, "  repo       (none)");
    }
    for r in &p.repos {
        let _ = writeln!(
            s,
            "  repo       {} at {} ({}, {}{})",
            r.name,
            r.path,
            r.role.as_str(),
            r.branch
                .as_deref()
                .map_or_else(|| "detached HEAD".to_string(), |b| format!("branch {b}")),
            r.head
                .as_deref()
                .map(|h| format!(" @ {}", &h[..h.len().min(12)]))
                .unwrap_or_default()
        );
    }
}

/// The image, its Features and what the container may do: the profile and network, the egress
/// destinations, the limits, grants, permissions and their notes.
fn render_plan_security(s: &mut String, p: &HandoffPlan) {
    let _ = writeln!(s, "  image      {}", p.image);
    let _ = writeln!(
        s,
        "  features   {}",
        if p.features.is_empty() {
            "(none)".to_string()
        } else {
            p.features.join(", ")
        }
    );
    let _ = writeln!(s, "  profile    {} (network {})", p.profile, p.network);
    // The user's destinations under `allowlist` (the repository's requests are permissions).
    for e in &p.egress {
        let _ = writeln!(s, "  egress     {e}");
    }
    if let Some(l) = &p.limits {
        let _ = writeln!(
            s,
            "  limits     {} pids, {} MiB memory, {} CPUs",
            l.pids,
            l.memory_bytes >> 20,
            l.cpus
        );
    }
    for g in &p.grants {
        let _ = writeln!(s, "  grant      {g}");
    }
    for line in p.permission_lines() {
        let _ = writeln!(s, "  permission {line}");
    }
    for note in &p.permission_notes {
        let _ = writeln!(s, "  note       {note}");
    }
}

/// The mounts, the agent's variables and secrets (names only) and the dotfiles.
fn render_plan_mounts(s: &mut String, p: &HandoffPlan) {
    for m in &p.mounts {
        let _ = writeln!(
            s,
            "  mount      {} -> {} ({}{})",
            m.source,
            m.target,
            m.purpose,
            if m.read_only { ", ro" } else { "" }
        );
    }
    let _ = writeln!(s, "  env        {}", list_or_none(&p.env));
    let _ = writeln!(s, "  secrets    {}", list_or_none(&p.secrets));
    if let Some(d) = &p.dotfiles {
        let _ = writeln!(s, "  dotfiles   {}", crate::handoff::dotfiles::describe(d));
    }
}

/// The container (and Compose services), or the user's own container devcell did not create.
fn render_plan_container(s: &mut String, p: &HandoffPlan) {
    let _ = writeln!(
        s,
        "  container  {}{}",
        p.container.action,
        short_id(p.container.id.as_deref())
    );
    for svc in &p.services {
        let _ = writeln!(
            s,
            "  service    {} ({}, {}): {}{}{}",
            svc.name,
            svc.role,
            svc.image,
            svc.container,
            short_id(svc.id.as_deref()),
            match svc.permissions.len() {
                0 => String::new(),
                1 => ", 1 permission".to_string(),
                n => format!(", {n} permissions"),
            }
        );
    }
    if let Some(x) = &p.external {
        let _ = writeln!(
            s,
            "  user       {}{}{} (container {}, devcell did not create it)",
            x.remote_user,
            x.exec_user
                .as_deref()
                .map(|u| format!(" as {u}"))
                .unwrap_or_default(),
            if x.root { ", root" } else { "" },
            x.name
        );
        let _ = writeln!(s, "  git        {}", x.git);
        let _ = writeln!(s, "  lifecycle  {}", x.lifecycle);
    }
}

/// The agent's command and folder, the context file and the verification commands.
fn render_plan_command(s: &mut String, p: &HandoffPlan) {
    let _ = writeln!(s, "  command    {:?} in {}", p.command, p.cwd);
    let _ = writeln!(s, "  context    {}", p.context_path);
    if p.verification.is_empty() {
        let _ = writeln!(s, "  verify     (none)");
    }
    for v in &p.verification {
        let _ = writeln!(s, "  verify     {v}");
    }
}

/// ` <first 12 characters of id>`, or nothing without an id.
fn short_id(id: Option<&str>) -> String {
    id.map(|i| format!(" {}", &i[..i.len().min(12)]))
        .unwrap_or_default()
}

/// `a, b` or `(none)`.
fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_string()
    } else {
        items.join(", ")
    }
}

/// The terminal on stdin in raw mode until dropped (then restored); `exec` uses it too.
pub(crate) struct RawMode {
    saved: rustix::termios::Termios,
}

impl RawMode {
    /// Raw mode on stdin; `None` when stdin is not a terminal or cannot be changed.
    pub(crate) fn enable() -> Option<RawMode> {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &raw).ok()?;
        Some(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}
