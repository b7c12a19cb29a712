//! `handoff`: hand a workspace to a coding agent inside a hardened dev container (the Grove 1.2
//! RFC's golden path; spec-notes 0200-0206).
//!
//! Steps: resolve the agent (`[agents.NAME]` of the user settings), inspect the workspace
//! ([`crate::handoff::repository::inspect`]) and find its configuration (the primary repository's
//! `.devcontainer`, else the root's) → a structured [`HandoffPlan`] ([`plan`] stops here) →
//! start a session in the host-side state ([`super::state`]; a live session refuses the handoff
//! with `session_active` unless `replace`) → `up` ([`crate::ops::up::up_judged`]) with the workspace
//! root mounted whole at the workspace target (`/workspace`), the repositories' git directories
//! and read-only git config/hooks overlays, the agent's read-only credential mounts, the network
//! mode (`none` unless the agent or a flag asks for `default`) → the context file and
//! `AGENTS.md` (when absent) → the agent's argv run in the container as the remote user, in the
//! workspace root (or the primary repository with `--primary`), through the engine's exec.
//!
//! A Compose configuration is brought up through [`crate::ops::compose_up::up_compose`]: the
//! handoff's mounts go to the primary service (the workspace root at the workspace target),
//! the agent runs there; `none` and `allowlist` close the project networks
//! ([`crate::ops::compose_network`], spec-note 0606).
//!
//! The agent's environment is the probed user environment ⊕ `remoteEnv`, the agent's
//! passed-through host variables, its secrets (`env:NAME` / `file:PATH` references and
//! `--secrets-file`), and `safe.directory` entries for every repository given to git as
//! `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`. All of it travels in the exec
//! request's environment only: never in the container's configuration or labels, the context
//! file, the state, the log, or any host process's argv. Secret values are masked (`********`) in
//! everything devcell shows or keeps of the agent's output.
//!
//! The agent is started as `sh -c 'echo $$ > <pidfile>; exec "$@"' devcell-agent <argv…>` so a
//! replacing handoff (or a stop request) can signal exactly that process; its argv reaches it
//! unchanged (no shell interpretation of the agent's words).
//!
//! When the agent ends (or is stopped), the workspace container, and every Compose container
//! binding the workspace or a container git directory, is stopped and confirmed stopped before
//! the agent's commits are fetched back ([`super::quiesce`]): what the agent left running
//! writes nothing afterwards. The next handoff starts them again.
//!
//! With `runtime: Some(AgentRuntime::Host)` (`--runtime host`) the agent runs on the host
//! instead, unisolated and warned about ([`super::host`], spec-note 0251); an unreachable engine
//! is never a reason to do that silently.
//!
//! [`handoff_with`] is a list of named steps, in files by concept: before the container
//! (`begin`: plan, judgement, session, container git directories), the container (`container`:
//! `up`, what it is recorded as, the context file and `AGENTS.md`), the agent's run (`launch`),
//! and the end (`finish`: the workspace stopped, the fetch-back, the session ended).

mod begin;
mod container;
mod door;
mod external;
mod finish;
mod git_check;
mod group;
mod launch;
mod refused;
mod stop_first;

use crate::engine::{ContainerInfo, Engine};
use crate::handoff::context::AgentRuntime;
use crate::handoff::plan::HandoffOptions;
use crate::handoff::session::{
    AgentStreams, AgentsMdReport, HandoffResult, StopSignal, record_failure, record_stop,
};
use crate::handoff::state::{SessionOutcome, SessionStart, StateStore};
use crate::ops::error::{OpsError, Result};
use crate::progress::Reporter;
use crate::settings::NetworkMode;
pub use external::{EXTERNAL_ACTION, EXTERNAL_MOUNT, external_containers};
use indexmap::IndexMap;
use std::path::PathBuf;
use std::time::Duration;

/// How long the request to stop the agent in its container may take.
const STOP_REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// How long a stopped agent gets to end before devcell records the stop and exits.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// How a handoff's `up` goes on: an image or Dockerfile configuration judged here, or a
/// Compose configuration that [`crate::ops::compose_up::up_compose`] judges with its services.
enum Judged {
    Single(Box<crate::ops::up::JudgedUp>),
    Compose(Box<crate::ops::permissions::UpChoice>),
}

/// Runs a handoff against the engine at `DOCKER_HOST` (see the module docs), or on the host
/// with `runtime: Some(Host)` ([`super::host::handoff_on_host`]). Returns when the agent has
/// ended; its exit status is in the result.
///
/// Errors: as [`handoff_with`]; [`OpsError::Engine`] (`engine_unavailable`) when no engine
/// answers for the container runtime (there is no silent fallback to the host).
pub async fn handoff(
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> Result<HandoffResult> {
    if opts.runtime == Some(AgentRuntime::Host) {
        // the engine, when there is one, only tells which recorded containers still run
        let engine = crate::engine::connect().await.ok();
        return super::host::handoff_on_host(engine.as_deref(), opts, streams, stop, reporter)
            .await;
    }
    let engine = crate::engine::connect().await?;
    handoff_with(&*engine, opts, streams, stop, reporter).await
}

/// `handoff --plan`: [`crate::handoff::plan::plan`], or, when `--container` names a running
/// container devcell did not create, the plan of a handoff into it, judged as the handoff
/// judges it and with nothing begun or run (spec-note 0526).
///
/// Errors: as [`crate::handoff::plan::plan`]; an external container's refusals as the
/// handoff's before its session.
pub async fn plan(opts: &HandoffOptions) -> Result<crate::handoff::plan::HandoffPlan> {
    if opts.container.is_some()
        && opts.runtime != Some(AgentRuntime::Host)
        && let Ok(engine) = crate::engine::connect().await
        && let Some(plan) = external::plan(&*engine, opts).await?
    {
        return Ok(plan);
    }
    crate::handoff::plan::plan(opts).await
}

/// [`handoff`] through `engine` (its host socket, [`Engine::host_socket`], never mountable).
///
/// Errors: the plan's errors; [`OpsError::Product`] (a `StateError`) with `SessionActive` when a session is
/// live (nothing was changed); `up`'s errors (the session is recorded as failed; the workspace
/// is untouched and the container, if any, left for inspection); [`OpsError::Product`] (a `ContextError`).
/// An error once `up` has brought the container up stops it and its Compose peers first
/// (`refused`; the error says whether the stop was confirmed).
pub async fn handoff_with(
    engine: &dyn Engine,
    opts: &HandoffOptions,
    streams: AgentStreams<'_>,
    stop: StopSignal<'_>,
    reporter: &dyn Reporter,
) -> Result<HandoffResult> {
    // a worktree handoff's mail channel, when asked for (a clone task's is set by its runner)
    if let Some(info) = external::foreign(engine, opts).await? {
        let h = Handoff {
            engine,
            opts,
            reporter,
            group: None,
        };
        return h.external(info, streams, stop).await;
    }
    let with_door;
    let opts = match crate::handoff::mail_worktree::request(opts)? {
        Some(door) => {
            with_door = HandoffOptions {
                mail: Some(door),
                ..opts.clone()
            };
            &with_door
        }
        None => opts,
    };
    let h = Handoff {
        engine,
        opts,
        reporter,
        group: None,
    };
    let mut stop = stop;
    let p = h.prepare(&mut stop).await?;
    // a group's member joins before its judgement (spec-note 0525); whatever becomes of the
    // handoff, it leaves the group, the last one under `on-exit` removing the container
    let Some(joined) = h.join_group(&p)? else {
        return h.in_container(p, streams, stop).await;
    };
    let h = Handoff {
        group: Some(&joined),
        ..h
    };
    let mut result = h.in_container(p, streams, stop).await;
    let left = joined.leave(engine, reporter).await;
    if let Ok(r) = &mut result {
        r.warnings.extend(left);
    } else {
        for w in left {
            reporter.report(crate::progress::Event::Status(format!("warning: {w}")));
        }
    }
    result
}

impl Handoff<'_> {
    /// The handoff in its container, from its plan `p` on (see the module docs).
    async fn in_container(
        self,
        p: crate::handoff::plan::Prepared,
        streams: AgentStreams<'_>,
        mut stop: StopSignal<'_>,
    ) -> Result<HandoffResult> {
        let (h, opts, engine) = (self, self.opts, self.engine);
        let (up_opts, mut judged) = h.judge(&p, &mut stop).await?;
        let drift =
            super::environment::check(engine, opts, &up_opts, p.network, h.reporter).await?;
        let compose = matches!(judged, Judged::Compose(_));
        h.report_plan(&p, compose);
        let (mut live, mut log) = h.begin_session(&p).await?;
        live.warnings.extend(drift);
        h.stop_what_runs(&mut judged, &live).await?;
        h.refresh_container_gits(&p, &mut live)?;
        let door = h.open_door(&mut live).await?;
        let up = h.bring_up(&up_opts, &p, judged, &live, &mut stop).await?;
        // from here, an error stops the container (and its peers) before it is returned
        let recorded = h
            .record_container(&up_opts, &p, &up, compose, &mut live)
            .await;
        let recorded = h.stopped_if_refused(&up, &mut live, recorded).await?;
        h.log_start(&mut log, &live, &up);
        let written = h.write_context_files(&p, &up, &recorded, &live).await;
        let written = h.stopped_if_refused(&up, &mut live, written).await?;
        let ran = h
            .run_agent(&p, &up, &mut live, log, streams, &mut stop)
            .await;
        let ran = h.stopped_if_refused(&up, &mut live, ran).await?;
        h.close_door(door, &mut live);
        let quiet = h.stop_workspace(&up, &mut live).await;
        let planted = h.scan_planted(&p, &mut live, quiet);
        h.fetch_back(&p, &mut live, quiet);
        let git_dirs = h.check_git_identity(&mut live);
        h.finish(p, up, live, recorded, written, ran, (planted, git_dirs))
    }
}

/// What every step of a container handoff reads: the engine, the options, where progress goes.
#[derive(Clone, Copy)]
struct Handoff<'a> {
    engine: &'a dyn Engine,
    opts: &'a HandoffOptions,
    reporter: &'a dyn Reporter,
    /// The handoff's group, once joined (`--group`, spec-note 0525).
    group: Option<&'a group::Joined>,
}

impl Handoff<'_> {
    /// When other members of this handoff's group still run: a sentence naming them and the
    /// group. The container is theirs too then: this handoff neither stops it nor touches the
    /// container git directories their agents use (spec-note 0525).
    fn shared_with_others(&self) -> Option<String> {
        let joined = self.group?;
        let others = joined.others_live();
        (!others.is_empty()).then(|| {
            format!(
                "other members of handoff group `{}` still run in it ({})",
                joined.name(),
                others.join(", ")
            )
        })
    }

    /// The bounds of every fetch-back of this handoff: the `[handoff]` settings (spec-note
    /// 0438), never the defaults behind the user's back.
    fn fetch_budget(&self) -> crate::handoff::container_git::FetchBudget {
        crate::handoff::container_git::FetchBudget::from_settings(&self.opts.settings.handoff)
    }
}

/// The session a handoff runs, once begun: where it is recorded, and the warnings gathered so
/// far. A failure from here on is recorded as the session's end ([`Live::fail`],
/// [`Live::signaled`]).
struct Live {
    store: StateStore,
    /// The workspace root (the state's key).
    root: PathBuf,
    start: SessionStart,
    /// The session's id.
    id: String,
    /// Masked in the recorded failure.
    secrets: IndexMap<String, String>,
    /// The plan's warnings, then each step's.
    warnings: Vec<String>,
    /// Whether the workspace folder was writable by every local user when the session began
    /// (a root-owned shared workspace whose agent is another uid relies on it, spec-note
    /// 0250): then the post-agent scan leaves `o+w` as the user chose it (spec-note 0400, K6).
    root_open_to_others: bool,
}

impl Live {
    /// The session `start` of the workspace `root` in `store`, begun for plan `p` (its secrets
    /// to mask, its warnings first).
    fn new(
        p: &crate::handoff::plan::Prepared,
        (store, root, start): (StateStore, PathBuf, SessionStart),
        root_open_to_others: bool,
    ) -> Self {
        Live {
            id: start.session.id.clone(),
            root_open_to_others,
            store,
            root,
            start,
            secrets: p.secrets.clone(),
            warnings: p.warnings.clone(),
        }
    }

    /// `e`, with the session recorded as failed (secret values masked).
    fn fail(&self, e: OpsError) -> OpsError {
        record_failure(&self.store, &self.root, &self.id, &self.secrets, e)
    }

    /// Whether a later session replaced this one (`--replace`, recorded as this session's
    /// outcome): the container is its successor's. (A later session of the same handoff group
    /// is no replacement: it runs beside this one.)
    fn replaced(&self) -> bool {
        self.store
            .load(&self.root)
            .ok()
            .flatten()
            .and_then(|s| s.session(&self.id).cloned())
            .is_some_and(|s| {
                matches!(
                    s.outcome,
                    Some(crate::handoff::state::SessionOutcome::Replaced { .. })
                )
            })
    }

    /// Records `fact` on the session ([`StateStore::record_fact`]).
    fn record(
        &self,
        fact: crate::handoff::state::SessionFact,
    ) -> std::result::Result<(), crate::handoff::state::StateError> {
        self.store.record_fact(&self.root, &self.id, fact)
    }

    /// A stop `signal`, recorded as the session's end (`signaled`).
    fn signaled(&self, signal: i32) -> OpsError {
        record_stop(&self.store, &self.root, &self.id, signal)
    }
}

/// What the container brought up for the agent is, as recorded in the session.
struct Recorded {
    /// The container's engine view (`None` when the engine did not answer).
    info: Option<ContainerInfo>,
    /// The container's image.
    image: String,
    /// The network the container really has (a reused one keeps its own).
    network: NetworkMode,
}

/// The context file and `AGENTS.md`, as written for the agent.
struct Written {
    context_file: PathBuf,
    agents_md: AgentsMdReport,
}

/// How the agent's run ended.
struct Ran {
    remote_user: String,
    exit_code: Option<i32>,
    signal: Option<i32>,
    outcome: SessionOutcome,
    /// The egress proxy's decisions made during the session (spec-note 0504).
    egress: Option<crate::ops::egress::EgressSummary>,
}

/// What a fetch-back did, for people: one line per branch moved or created and per ref kept
/// aside (spec-note 0436).
pub(crate) fn fetch_back_lines(
    repo: &str,
    back: &crate::handoff::container_git::FetchBack,
) -> Vec<String> {
    use crate::handoff::container_git::KeptReason;
    let short = |o: &str| o[..o.len().min(12)].to_string();
    let mut out = Vec::new();
    for u in &back.fast_forwarded {
        out.push(format!(
            "repository `{repo}`: `{}` fast-forwarded to the agent's {} (from {})",
            u.name,
            short(&u.new),
            short(u.old.as_deref().unwrap_or(""))
        ));
    }
    for u in &back.created {
        out.push(format!(
            "repository `{repo}`: the agent's branch `{}` created at {}",
            u.name,
            short(&u.new)
        ));
    }
    for k in &back.kept {
        let why = match k.reason {
            KeptReason::Rewritten => "the agent rewrote it (not a fast-forward)",
            KeptReason::Deleted => "the agent deleted it",
            KeptReason::MovedOnHost => "it changed on the host meanwhile",
            KeptReason::NotABranch => "not a branch",
            KeptReason::Invalid => "its object is missing or its name is refused",
            KeptReason::AddsSubmodule => {
                "it adds a submodule, whose nested repository the host's git would enter"
            }
            KeptReason::CheckedOutElsewhere => {
                "the branch is checked out in another worktree of the repository"
            }
            KeptReason::Conflict => {
                "the host could not write it (its name conflicts with a host ref)"
            }
            KeptReason::ShadowsRef => {
                "its name could be read as something else (a remote's branch, a tag, a `git describe` name, a short commit id or one of git's own refs)"
            }
            KeptReason::UncoveredSubmodule => {
                "its commit has a submodule at a path devcell did not cover in this session, whose nested repository the host's git would enter"
            }
        };
        let kept = match &k.kept_as {
            Some(r) => format!("; the agent's value is kept as `{r}`"),
            None => String::new(),
        };
        out.push(format!(
            "repository `{repo}`: `{}` left as it is on the host: {why}{kept}",
            k.name
        ));
    }
    if let Some(why) = &back.refused {
        out.push(format!("repository `{repo}`: {why}"));
    }
    if let Some(b) = &back.head_moved_to {
        out.push(format!(
            "repository `{repo}`: HEAD now names `{b}`, the branch the agent checked out"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::SecretMask;
    use crate::handoff::plan::*;
    use crate::handoff::repository::{self, Workspace};
    use crate::handoff::session::split_status;
    use crate::ops::attach::append_safe_directories;

    #[test]
    fn statuses_above_128_are_signals() {
        assert_eq!(split_status(0, false), (Some(0), None));
        assert_eq!(split_status(3, false), (Some(3), None));
        assert_eq!(split_status(137, false), (None, Some(9)));
        assert_eq!(split_status(143, true), (None, Some(15)));
        assert_eq!(split_status(255, false), (Some(255), None));
    }

    #[test]
    fn masks_longest_first() {
        let secrets = IndexMap::from([
            ("A".to_string(), "abc".to_string()),
            ("B".to_string(), "abcdef".to_string()),
            ("C".to_string(), String::new()),
        ]);
        assert_eq!(
            SecretMask::new(secrets.values()).apply("x abcdef abc y"),
            "x ******** ******** y"
        );
    }

    #[test]
    fn safe_directories_append_to_existing_git_config_entries() {
        let ws = Workspace {
            git_mounts: vec![repository::GitMount {
                host_path: "/h/src/api/.git".into(),
                container_path: "/h/src/api/.git".into(),
                repos: vec!["api".into()],
            }],
            ..Workspace::bare(
                "w",
                std::path::Path::new("/h/w"),
                "/workspace",
                repository::Layout::Plain,
            )
        };
        let gits =
            crate::handoff::container_git::repo_gits(&ws, std::path::Path::new("/state")).unwrap();
        assert!(gits.is_empty());
        let gits = vec![crate::handoff::container_git::RepoGit::plain(
            "api",
            std::path::Path::new("/h/w/api"),
            "/workspace/api",
            "/state/1",
            "/run/devcell/git/1",
        )];
        let mut env = IndexMap::from([("GIT_CONFIG_COUNT".to_string(), "1".to_string())]);
        append_safe_directories(&mut env, &safe_directories(&ws, &gits));
        assert_eq!(env["GIT_CONFIG_COUNT"], "3");
        assert_eq!(env["GIT_CONFIG_KEY_1"], "safe.directory");
        assert_eq!(env["GIT_CONFIG_VALUE_1"], "/workspace/api/.git");
        assert_eq!(env["GIT_CONFIG_VALUE_2"], "/run/devcell/git/1/objects");
    }
}
