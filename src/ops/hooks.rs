//! Running the lifecycle hooks of a bring-up: the plan, the run-once markers, the bring-up lock and
//! devcell's state folder in the container.

use crate::engine::ContainerInfo;
use crate::engine::{Engine, ExecInput, ExecOutput, ExecRequest};
use crate::lifecycle::{
    BringUpKind, Dotfiles, HookContext, HookEnv, HookSources, LifecycleReport, MarkerContext, Plan,
    PlanOptions, run_plan_with_dotfiles, wait_for,
};
use crate::ops::attach::{Attached, append_safe_directories, probed_remote_env};
use crate::ops::container::{RUN_DIR, RUN_DIR_TMPFS, STATE_DIR};
use crate::ops::error::lifecycle_error;
use crate::ops::error::{OpsError, Result};
use crate::ops::executor::EngineExecutor;
use crate::ops::state_folder::{BringUpLock, LockError, StateFolder};
use crate::ops::target::short;
use crate::progress::{Event, Reporter};
use indexmap::IndexMap;

/// Plans and runs the container hooks of `attached` for a bring-up of `kind`, with the user's
/// `dotfiles` after `postCreateCommand` when the flags reach that step
/// ([`PlanOptions::personalizes`]); their environment also names `safe_directories` for git
/// ([`append_safe_directories`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_hooks(
    engine: &dyn Engine,
    attached: &Attached,
    kind: BringUpKind,
    options: PlanOptions,
    dotfiles: Option<&Dotfiles>,
    cli_remote_env: &IndexMap<String, String>,
    secrets: &IndexMap<String, String>,
    safe_directories: &[String],
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    let id = attached.container.id.as_str();
    let sources =
        HookSources::from_metadata(&attached.entries, None).map_err(lifecycle_error(id))?;
    let wait = wait_for(&attached.merged).map_err(lifecycle_error(id))?;
    let plan = Plan::new(&sources, wait, kind, options);
    let dotfiles = dotfiles.filter(|_| options.personalizes(wait));
    if plan.stages().next().is_none() && dotfiles.is_none() {
        return Ok(LifecycleReport {
            runs: Vec::new(),
            skipped: plan.skipped,
            dotfiles: None,
        });
    }
    let executor = EngineExecutor {
        engine,
        container_id: id,
    };
    let markers = MarkerContext {
        created_at: attached.container.created.clone(),
        started_at: attached.container.started_at.clone(),
        folder: attached.marker_folder.clone(),
        running_folder: running_folder(&attached.container),
    };
    // Hooks that already ran are skipped without a process in the container (spec-note 0471);
    // the dotfiles' own marker is in the container, so with dotfiles there is no shortcut.
    use crate::ops::marker_record;
    if dotfiles.is_none() {
        if let Some(report) = marker_record::already_ran(id, &plan, &markers) {
            return Ok(report);
        }
        if let Some(report) = crate::lifecycle::already_ran(&executor, &plan, &markers).await {
            marker_record::remember(id, &plan, &markers, &report);
            return Ok(report);
        }
    }
    let mut env = probed_remote_env(engine, attached, cli_remote_env, reporter).await?;
    append_safe_directories(&mut env.0, safe_directories);
    let context = HookContext {
        user: Some(attached.exec_user()),
        working_dir: Some(attached.workspace_folder.clone()),
        env,
        secrets: HookEnv(secrets.clone()),
        markers: Some(markers),
        new_container: kind == BringUpKind::Created,
    };
    // `set-up` and `run-user-commands` under network `none`: a URL is exported on the host
    // and copied in, as the container's mounts cannot change (spec-note 0685)
    let user = attached.exec_user();
    let copied = match dotfiles {
        Some(d) => {
            crate::ops::dotfiles::copy_into_existing(
                engine,
                &attached.container,
                d,
                (&user, &context.env.0),
                reporter,
            )
            .await
        }
        None => None,
    };
    let dotfiles = copied.as_ref().map(|c| &c.dotfiles).or(dotfiles);
    let report = run_plan_with_dotfiles(&executor, &plan, &context, dotfiles, reporter).await;
    if let Some(copied) = copied {
        copied
            .remove(engine, id, (&user, &context.env.0), reporter)
            .await;
    }
    let report = report.map_err(lifecycle_error(id))?;
    if let Some(markers) = &context.markers {
        marker_record::remember(id, &plan, markers, &report);
    }
    Ok(report)
}

/// Takes the bring-up lock of the dev container identity `id` in devcell's state folder
/// ([`StateFolder::lock_bring_up`]; spec-note 0422), so parallel `up`s,
/// handoffs and `run-user-commands` of one workspace find-or-create one container and run its
/// hooks once: the second waits (saying so) for the first to finish, then finds its
/// container. No state folder (no home) means no lock.
///
/// Errors: [`OpsError::Unsupported`] when the lock file cannot be opened or locked.
pub(crate) async fn bring_up_lock(
    id: &str,
    reporter: &dyn Reporter,
) -> Result<Option<BringUpLock>> {
    let Some(store) = StateFolder::open_default() else {
        return Ok(None);
    };
    let failed = |e: LockError| OpsError::Unsupported {
        message: format!("cannot take the bring-up lock: {e}: {}", e.source),
        hint: Some(format!(
            "devcell keeps its locks in `{}`; make that folder writable, or set `{}` to a writable folder of your own",
            store.root().join("locks").display(),
            crate::ops::state_folder::STATE_DIR_ENV
        )),
    };
    if let Some(lock) = store.lock_bring_up(id, false).map_err(failed)? {
        return Ok(Some(lock));
    }
    reporter.report(Event::Status(
        "waiting for another devcell bringing up this workspace's container".to_string(),
    ));
    let owned = id.to_string();
    let waited = store.clone();
    let lock = tokio::task::spawn_blocking(move || waited.lock_bring_up(&owned, true))
        .await
        .map_err(|e| OpsError::Unsupported {
            message: format!("cannot take the bring-up lock: {e}"),
            hint: None,
        })?
        .map_err(failed)?;
    Ok(lock)
}

/// The folder of the hooks' pid files in `container`: devcell's [`RUN_DIR`] tmpfs when the
/// container has it (spec-note 0471), else `None` (`running` in the marker folder).
pub(crate) fn running_folder(container: &ContainerInfo) -> Option<String> {
    (container.host.tmpfs.contains_key(RUN_DIR)
        || container.mounts.iter().any(|m| m.destination == RUN_DIR))
    .then(|| RUN_DIR.to_string())
}

/// Adds devcell's per-container state to a hardened container's `spec`: the state volume at
/// [`STATE_DIR`] (run-once markers, which must survive restarts while the home is a tmpfs;
/// spec-note 0181), written and read as root through the engine's archive API, and the
/// [`RUN_DIR`] tmpfs, created sticky and world-writable, for the hooks' pid files
/// (spec-note 0423). Both are made with their owner and mode, so no process runs for them
/// after the start (spec-note 0471).
pub(crate) fn add_state_mounts(spec: &mut crate::engine::ContainerSpec) {
    spec.mounts.push(crate::engine::Mount {
        kind: crate::engine::MountKind::Volume,
        source: None,
        target: STATE_DIR.to_string(),
        read_only: false,
    });
    spec.tmpfs
        .insert(RUN_DIR.to_string(), RUN_DIR_TMPFS.to_string());
}

/// Whether `container` is one an older devcell made, whose hooks keep their pid files in the
/// state volume: that volume must then be made writable by every user
/// ([`prepare_state_dir`]) after a start.
pub(crate) fn needs_state_dir_mode(container: &ContainerInfo) -> bool {
    container.mounts.iter().any(|m| m.destination == STATE_DIR)
        && running_folder(container).is_none()
}

/// After a start: [`prepare_state_dir`] when `container` needs it ([`needs_state_dir_mode`]),
/// a failure naming the container.
///
/// Errors: as [`prepare_state_dir`], in the container.
pub(crate) async fn prepare_state_dir_if_needed(
    engine: &dyn Engine,
    container: &ContainerInfo,
) -> Result<()> {
    if needs_state_dir_mode(container) {
        prepare_state_dir(engine, &container.id)
            .await
            .map_err(|e| e.in_container(&container.id))?;
    }
    Ok(())
}

/// Makes devcell's state volume writable by every user (sticky, like `/tmp`), for containers
/// an older devcell made without the [`RUN_DIR`] tmpfs ([`needs_state_dir_mode`]). The hardened
/// profile drops `CAP_CHOWN` and `CAP_FOWNER`, so only the volume's owner may change its mode,
/// and engines differ on who owns a fresh anonymous volume: root on Docker, the container's user
/// on Podman (it gives new volumes to the user the container runs as). `chmod` runs as root
/// first, then, when that is refused, as the container's user (spec-notes/0181). Errors:
/// [`OpsError::Unsupported`] when neither may, with the last `chmod`'s output.
pub(crate) async fn prepare_state_dir(engine: &dyn Engine, id: &str) -> Result<()> {
    let mut result = None;
    for user in [Some("0".to_string()), None] {
        let request = ExecRequest {
            argv: vec!["chmod".into(), "1777".into(), STATE_DIR.into()],
            user,
            ..ExecRequest::default()
        };
        let r = engine
            .exec(id, &request, ExecInput::None, ExecOutput::Collect)
            .await?;
        if r.exit_code == 0 {
            return Ok(());
        }
        result = Some(r);
    }
    let (code, stderr) = result.map_or((-1, String::new()), |r| {
        (r.exit_code, r.stderr_text().trim().to_string())
    });
    Err(OpsError::Unsupported {
        message: format!(
            "cannot prepare devcell's state folder `{STATE_DIR}` in container {} (exit code {code}): {stderr}",
            short(id),
        ),
        hint: Some(
            "the image needs a `chmod` program (busybox or coreutils), and the volume must be owned by root or the container's user".into(),
        ),
    })
}
