//! `up`: bring a dev container up the way `@devcontainers/cli up` does, under devcell's
//! security profile ([spec: lifecycle](https://containers.dev/implementors/spec/#lifecycle),
//! [container creation](https://containers.dev/implementors/spec/#container-creation)).
//!
//! Steps: load the configuration ([`load_configuration`]) → find the container by its id
//! labels → run `initializeCommand` on the host → (no container) inspect or pull the image /
//! build the Dockerfile → read the image's `devcontainer.metadata` label → merge entries
//! (image ++ devcontainer.json) → `${devcontainerId}` → [`container_spec`] → the security
//! policy ([`security::apply`]; refuse before creating anything) → create and start →
//! `${containerEnv:…}` against the container's environment → lifecycle hooks through the
//! engine's exec ([`EngineExecutor`]).
//!
//! An existing container is reused: running → nothing changes, stopped → started
//! (`postStartCommand` runs again). Its metadata comes from its own label plus the
//! `remoteUser`, `userEnvProbe` and `remoteEnv` of the current devcontainer.json, as in the
//! reference CLI.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use crate::config::model::ConfigKind;
use crate::config::{metadata, substitute};
use crate::diagnostics::Warning;
use crate::engine::{
    BuildRequest, ContainerInfo, DockerEngine, Engine, ExecInput, ExecOutput, ExecRequest,
    ImageInfo, Mount, MountKind,
};
use crate::features::lockfile::{Lockfile, LockfileMode, WriteOutcome};
use crate::handoff::container::{
    STATE_DIR, SpecInputs, container_spec, host_memory_bytes, unmet_host_requirements,
};
use crate::handoff::error::{HandoffError, Result};
use crate::handoff::executor::EngineExecutor;
use crate::handoff::lockfile_io::LockfileAt;
use crate::handoff::read_configuration::{
    LoadOptions, LoadedConfiguration, file_uri, load_configuration,
};
use crate::handoff::secrets::{MaskingReporter, redact};
use crate::lifecycle::{
    BringUpKind, DEFAULT_PROBE_TIMEOUT, HookContext, HookEnv, HookSources, LifecycleReport,
    MarkerContext, Plan, PlanOptions, UserEnvProbe, initialize_stage, probe_user_env,
    run_initialize_command, run_plan, wait_for,
};
use crate::names::METADATA_LABEL;
use crate::progress::{Event, Reporter};
use crate::security::host_path;
use crate::security::{
    self, Grants, Origins, PermissionRequest, PolicyInput, ProfileLimits, SecurityProfile, Source,
};
use crate::settings::Settings;

/// Which workspace and config, and how to find its container (flags shared by `up`, `exec`,
/// `run-user-commands` and `down`).
#[derive(Debug, Clone, Default)]
pub struct TargetOptions {
    /// `--workspace-folder` (absolute; the cli defaults it to the current directory).
    pub workspace_folder: PathBuf,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--mount-workspace-git-root` (default `true`).
    pub mount_workspace_git_root: bool,
    /// `--id-label name=value` (repeatable): when given, exactly these labels identify the
    /// container (the defaults are then not used, as in the reference CLI).
    pub id_labels: Vec<(String, String)>,
    /// The host environment (`${localEnv:…}`, `runArgs` `-e NAME`).
    pub env: HashMap<String, String>,
    /// Forces the workspace mount and folder (`handoff`); `None` for the spec's behaviour.
    pub workspace_override: Option<crate::handoff::read_configuration::WorkspaceOverride>,
    /// `--override-config`: the configuration's content comes from this file (paths keep the
    /// semantics of the real config location).
    pub override_config: Option<PathBuf>,
    /// `--additional-features` (`up`): a JSON object like `features`, added to the
    /// configuration's Features.
    pub additional_features: Option<String>,
    /// `--mount-git-worktree-common-dir`: a worktree's common git dir is mounted too.
    pub mount_git_worktree_common_dir: bool,
    /// `--container-id` (`exec`, `run-user-commands`): this container (id or name) instead
    /// of a lookup by the id labels.
    pub container_id: Option<String>,
    /// No configuration is read (`exec`/`run-user-commands` given `--container-id` or
    /// `--id-label` but no `--workspace-folder`, `--config` or `--override-config`, as the
    /// reference): the container's `devcontainer.metadata` label says everything.
    pub no_configuration: bool,
    /// `--workspace-folder` was given (the cli otherwise defaults it to the current
    /// directory): without it, `exec`/`run-user-commands` with `--container-id` run in the
    /// remote user's home unless the configuration names a `workspaceFolder`.
    pub workspace_folder_given: bool,
}

/// `--update-remote-user-uid-default`: what `updateRemoteUserUID` means when the merged
/// configuration does not say (spec: `updateRemoteUserUID`, default `true` on Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UidUpdateDefault {
    /// Update unless the configuration says `false` (the reference's default).
    #[default]
    On,
    /// Update only when the configuration says `true`.
    Off,
    /// Never update, whatever the configuration says.
    Never,
}

/// Security choices of the user (flags); the user settings file fills what is not given.
#[derive(Debug, Clone, Default)]
pub struct SecurityOptions {
    /// `--security-profile hardened|reference`.
    pub profile: Option<String>,
    /// `--allow …` grants (repeatable), added to the settings file's `allow`.
    pub allow: Vec<String>,
    /// `--pids-limit`.
    pub pids_limit: Option<i64>,
    /// `--memory` (bytes with optional `k`/`m`/`g`/`t` suffix).
    pub memory: Option<String>,
    /// `--cpus`.
    pub cpus: Option<f64>,
    /// `--network default|none`.
    pub network: Option<String>,
}

/// Inputs of [`up`] (the `up` flags).
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// Workspace, config and container identity.
    pub target: TargetOptions,
    /// `--remove-existing-container`.
    pub remove_existing_container: bool,
    /// `--expect-existing-container`.
    pub expect_existing_container: bool,
    /// `--skip-post-create`, `--skip-post-attach`, `--skip-non-blocking-commands`.
    pub plan: PlanOptions,
    /// `--include-configuration`.
    pub include_configuration: bool,
    /// `--include-merged-configuration`.
    pub include_merged_configuration: bool,
    /// `--remote-env NAME=VALUE` (repeatable; the config's `remoteEnv` wins).
    pub remote_env: IndexMap<String, String>,
    /// Secrets (`--secrets-file`): given to hooks as environment, masked in output.
    pub secrets: IndexMap<String, String>,
    /// `--mount` (repeatable): extra mounts, granted by being asked for on the command line.
    pub mounts: Vec<String>,
    /// How images are built (`build`'s flags; the defaults for `up`).
    pub build: ImageBuildOptions,
    /// `--default-user-env-probe` (default `loginInteractiveShell`).
    pub default_user_env_probe: UserEnvProbe,
    /// Security flags.
    pub security: SecurityOptions,
    /// The user settings file (`--config-file` or the default location).
    pub settings: Settings,
    /// `--cache-dir`: the Feature cache (default `$XDG_CACHE_HOME/devcell`).
    pub cache_dir: Option<PathBuf>,
    /// `devcontainer-lock.json` handling when Features are resolved (a new container):
    /// honoured when present; written after the container is created (`Write`, the default),
    /// `--frozen-lockfile` (`Frozen`), `--no-lockfile` (`Off`), or `ReadOnly` (`handoff`)
    /// (spec-note 0280).
    pub lockfile: LockfileMode,
    /// Container paths given to git as `safe.directory` in the lifecycle hooks' environment
    /// ([`append_safe_directories`]; `handoff` passes its repositories and git directories).
    pub safe_directories: Vec<String>,
    /// `--update-remote-user-uid-default never|on|off` (default `on`).
    pub update_remote_user_uid_default: UidUpdateDefault,
}

/// What happened to the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ContainerAction {
    /// Created and started.
    Created,
    /// Found stopped and started again.
    Started,
    /// Found running; reused as it is.
    Running,
}

/// The result of [`up`].
#[derive(Debug, Clone)]
pub struct UpResult {
    /// The container id.
    pub container_id: String,
    /// The user hooks and `exec` run as.
    pub remote_user: String,
    /// The workspace folder in the container.
    pub remote_workspace_folder: String,
    /// Created, started or reused.
    pub action: ContainerAction,
    /// The security profile in effect (`hardened`/`reference`).
    pub profile: String,
    /// Every permission request (for a new container) and what was done with it.
    pub permissions: Vec<PermissionRequest>,
    /// The host variables the configuration sent into the container, by name, with the
    /// properties they went into (spec-note 0440).
    pub host_env: Vec<security::host_env::HostEnvUse>,
    /// The hooks that ran or were skipped.
    pub lifecycle: LifecycleReport,
    /// Non-fatal findings (unmet `hostRequirements`, config warnings).
    pub warnings: Vec<Warning>,
    /// The configuration read (`--include-configuration`).
    pub configuration: Option<Value>,
    /// The merged configuration (`--include-merged-configuration`).
    pub merged_configuration: Option<Value>,
    /// The configuration as loaded and judged at the start of `up`: what a handoff attaches
    /// its agent with, never loaded a second time (spec-note 0400).
    pub(crate) loaded: LoadedConfiguration,
}

impl UpResult {
    /// The reference CLI's result line, with devcell's additions under `devcell`:
    /// `{"outcome":"success","containerId","remoteUser","remoteWorkspaceFolder",
    /// ["configuration"], ["mergedConfiguration"], "devcell":{"profile","container",
    /// "permissions":[…],"lifecycle":{…},"warnings":[…]}}`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("outcome".into(), json!("success"));
        out.insert("containerId".into(), json!(self.container_id));
        out.insert("remoteUser".into(), json!(self.remote_user));
        out.insert(
            "remoteWorkspaceFolder".into(),
            json!(self.remote_workspace_folder),
        );
        if let Some(c) = &self.configuration {
            out.insert("configuration".into(), c.clone());
        }
        if let Some(c) = &self.merged_configuration {
            out.insert("mergedConfiguration".into(), c.clone());
        }
        out.insert(
            "devcell".into(),
            json!({
                "profile": self.profile,
                "container": self.action,
                "permissions": self.permissions,
                "hostEnv": self.host_env,
                "lifecycle": self.lifecycle,
                "warnings": self.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
        );
        Value::Object(out)
    }
}

/// Connects to the engine (`DOCKER_HOST`) and runs [`up_with`]; secret values are masked in
/// every event and error (spec-note 0240).
///
/// Errors: as [`up_with`]; [`HandoffError::Engine`] when no engine answers;
/// [`HandoffError::Redacted`] when an error's text held a secret value.
pub async fn up(opts: &UpOptions, reporter: &dyn Reporter) -> Result<UpResult> {
    let reporter = MaskingReporter {
        inner: reporter,
        secrets: &opts.secrets,
    };
    let run = async {
        let engine = DockerEngine::connect().await?;
        let socket = engine.socket_path().map(PathBuf::from);
        up_with(&engine, socket.as_deref(), opts, &reporter).await
    };
    run.await.map_err(|e| redact(e, &opts.secrets))
}

/// Brings the dev container of `opts.target` up through `engine` (see the module docs).
/// `engine_socket` is the host path of the engine's socket (never mountable under
/// `hardened`). Progress and hook output go to `reporter`.
///
/// Errors: [`HandoffError::Config`] (config), [`HandoffError::Security`] (refused: nothing
/// was created), [`HandoffError::Engine`] (image, build, create), [`HandoffError::Lifecycle`]
/// (a hook failed: the container is left for inspection, and the failed hook runs again at
/// the next `up`), [`HandoffError::Unsupported`], [`HandoffError::NoContainer`].
pub async fn up_with(
    engine: &dyn Engine,
    engine_socket: Option<&Path>,
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<UpResult> {
    let (profile, grants) = security_choice(&opts.security, &opts.settings)?;
    // Loaded with the whole host environment (`initializeCommand` runs on the host and keeps
    // it); every read that reaches the container is judged right below.
    let loaded = load_for(&opts.target, confine_grants(&profile, &grants))?;
    let kind = loaded.typed.kind();
    if matches!(kind, ConfigKind::Compose | ConfigKind::None) {
        return Err(HandoffError::Unsupported {
            message: format!(
                "`{}`: devcell brings up `image` and `build.dockerfile` configurations; Docker Compose configurations are not supported",
                loaded.config_file.display()
            ),
            hint: Some("use `image` or `build.dockerfile` in devcontainer.json".into()),
        });
    }
    // Judged before anything is looked up, run, built or created (spec-notes 0440, 0442).
    // From here on only judged host variables are visible (image labels, Features, a reused
    // container's label, `runArgs -e NAME`), and the builds get the container's network.
    // Everything the configuration asks for is judged here, in one refusal, before anything
    // runs on the host or the engine (spec-notes 0400, 0410).
    let ConfigurationJudgement {
        early,
        init_stage,
        host_requests,
    } = judge_configuration(engine, engine_socket, opts, &loaded, &profile, &grants, &[]).await?;
    let opts = &judged_options(opts, &profile, &grants);
    let opts = &UpOptions {
        build: ImageBuildOptions {
            network: early.build_network.clone(),
            ..opts.build.clone()
        },
        ..opts.clone()
    };
    let id_labels = id_labels(&opts.target, &loaded);
    let devcontainer_id = crate::config::id::devcontainer_id(&id_labels);
    // One find-or-create (and one run of the create hooks) at a time per identity.
    let _lock = bring_up_lock(&devcontainer_id, reporter).await?;

    let mut warnings = loaded.warnings.clone();
    let expected = expected_workspace(&opts.target, &loaded);
    let mut existing =
        find_container(engine, &id_labels, expected.as_deref(), &mut warnings).await?;
    if let Some(found) = &existing
        && opts.remove_existing_container
    {
        reporter.report(Event::Status(format!(
            "removing the existing container {}",
            short(&found.id)
        )));
        engine.remove_container(&found.id, true).await?;
        existing = None;
    }
    if existing.is_none() && opts.expect_existing_container {
        return Err(HandoffError::NoContainer {
            labels: join_labels(&id_labels),
            expected: true,
        });
    }

    // Re-check what an existing container has against the current profile and grants before
    // running, starting or using anything (spec-note 0270).
    let mut reuse_permissions = Vec::new();
    if let Some(info) = &existing {
        let entries = existing_entries(info, &loaded, &opts.target.env, &mut Vec::new());
        reuse_permissions = check_existing(
            engine,
            info,
            &entries,
            &loaded,
            engine_socket,
            &profile,
            &grants,
            opts,
        )
        .await?;
    }

    // initializeCommand: on the host, at every `up`, before any image work (granted above).
    if let Some(stage) = &init_stage {
        run_initialize_command(
            stage,
            &loaded.workspace_folder,
            HookEnv::default(),
            reporter,
        )
        .await
        .map_err(lifecycle_error(""))?;
    }

    warnings.extend(early.warning.iter().map(|message| Warning {
        location: None,
        message: message.clone(),
    }));
    let mut permissions: Vec<PermissionRequest>;
    // The host variables of an image label built from the repository's Dockerfile.
    let mut label_env = Vec::new();
    let (container, entries, action) = match existing {
        Some(info) => {
            let entries = existing_entries(&info, &loaded, &opts.target.env, &mut warnings);
            permissions = std::mem::take(&mut reuse_permissions);
            let action = if info.running {
                ContainerAction::Running
            } else {
                reporter.report(Event::Status(format!(
                    "starting container {}",
                    short(&info.id)
                )));
                engine.start_container(&info.id).await?;
                ContainerAction::Started
            };
            (info, entries, action)
        }
        None => {
            let DevImage {
                mut image,
                entries,
                label,
                label_requests,
                label_host_env,
                lock: pending_lock,
            } = dev_image(engine, &loaded, kind, opts, reporter, &mut warnings).await?;
            let mut merged = metadata::merge_configuration(&loaded.value, &entries);
            substitute::substitute_devcontainer_id(&mut merged, &devcontainer_id);
            let uid_update = update_remote_user_uid(
                engine,
                &image,
                &merged,
                &loaded,
                opts.update_remote_user_uid_default,
                opts.build.network.clone().flatten().as_deref(),
                reporter,
            )
            .await?;
            if let Some(updated) = uid_update.image {
                image = updated;
            }
            for message in unmet_host_requirements(
                &merged,
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                host_memory_bytes(),
            ) {
                reporter.report(Event::Status(format!("warning: {message}")));
                warnings.push(Warning {
                    location: None,
                    message,
                });
            }
            let host_env = |name: &str| opts.target.env.get(name).cloned();
            let mut spec = container_spec(&SpecInputs {
                image: &image.reference,
                image_info: &image.info,
                merged: &merged,
                workspace_mount: loaded.workspace.workspace_mount.as_deref(),
                extra_mounts: &cli_mounts(opts, &loaded),
                id_labels: &id_labels,
                metadata_label: label,
                host_env: &host_env,
            })
            .map_err(|e| locate_run_arg_error(e, &loaded.config_file))?;
            if let Some(network) = network_mode(&opts.security, &opts.settings)? {
                spec.network_mode = Some(network);
            }
            // The digests of the Features installed, for the audit and the handoff context
            // (compared with the lockfile; spec-note 0281).
            if let Some(lock) = &pending_lock {
                spec.labels.insert(
                    security::audit::FEATURE_DIGESTS_LABEL.to_string(),
                    lock.digests_label(),
                );
            }
            // An image devcell layered (Features, updateRemoteUserUID) on a base the
            // configuration pins by digest: record that base for the audit, which checks it
            // against the image's layers (spec-note 0241).
            if let Some(base) = loaded
                .typed
                .image
                .as_deref()
                .filter(|b| kind == ConfigKind::Image && security::audit::is_digest_pinned(b))
                && image.reference != base
            {
                spec.labels.insert(
                    security::audit::BASE_IMAGE_LABEL.to_string(),
                    base.to_string(),
                );
            }
            let remote_user = merged
                .get("remoteUser")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            let image_user = image.info.user.clone().filter(|u| !u.is_empty());
            // The user whose home becomes a tmpfs under `hardened`, as the policy picks it.
            let home_user = remote_user
                .clone()
                .or_else(|| spec.user.clone())
                .or_else(|| image_user.clone())
                .unwrap_or_else(|| "root".to_string());
            let hardened = matches!(profile, SecurityProfile::Hardened(_));
            // The image's passwd, read once: the policy judges users by the uid it gives them
            // and the home tmpfs is owned by the remote user's ids (spec-notes 0185, 0420).
            let passwd = if hardened {
                image_passwd(engine, Some(&image.info), &image.reference).await
            } else {
                None
            };
            // Named volumes judged by what they are, before the binds are resolved: a
            // bind-backed one becomes a bind of its device (spec-note 0444).
            let (volume_requests, missing_volumes) = if hardened {
                judge_named_volumes(
                    engine,
                    &profile,
                    &grants,
                    &mut spec,
                    &loaded.workspace_folder,
                )
                .await?
            } else {
                Default::default()
            };
            if let Some(refused) = security::refusal(&profile, &volume_requests) {
                return Err(refused.into());
            }
            let (workspace, host_home, engine_socket) =
                judged_places(&profile, &mut spec, &loaded, opts, engine_socket);
            let account = passwd
                .as_deref()
                .and_then(|p| passwd_account(p, &home_user));
            // Identity labels an image carries (its Dockerfile is the repository's) are not
            // carried into the container's labels (spec-note 0421).
            if hardened {
                neutralise_image_identity_labels(&image.info, &mut spec, &mut warnings, reporter);
            }
            let input = PolicyInput {
                origins: origins(&entries, &cli_mounts(opts, &loaded)),
                remote_user,
                image_user,
                remote_home: account.as_ref().map(|a| a.home.clone()),
                remote_ids: account.as_ref().map(|a| (a.uid, a.gid)),
                workspace,
                host_home,
                engine_socket,
                passwd,
                repository_labels: crate::handoff::container::repository_labels(&merged),
                spec,
            };
            let applied = security::apply(&profile, &input, &grants)?;
            permissions = applied.requests.clone();
            permissions.extend(volume_requests);
            permissions.extend(label_requests.iter().cloned());
            security::host_env::merge(&mut label_env, label_host_env);
            let applied_remote = applied.remote_user.clone();
            let mut spec = applied.spec;
            if let Some(account) = &account {
                spec.labels.insert(
                    crate::names::REMOTE_UID_LABEL.to_string(),
                    account.uid.to_string(),
                );
            }
            if hardened {
                // What `exec` and `run-user-commands` may use later (spec-note 0443).
                spec.labels.insert(
                    crate::names::HOST_ENV_LABEL.to_string(),
                    security::reattach::host_env_label(
                        &[early.requests.as_slice(), label_requests.as_slice()].concat(),
                    ),
                );
                for name in &missing_volumes {
                    let labels = security::volumes::labels_for(&loaded.workspace_folder);
                    engine.create_volume(name, &labels).await?;
                }
                // Run-once markers must survive restarts; home is a tmpfs (spec-notes/0181).
                spec.mounts.push(Mount {
                    kind: MountKind::Volume,
                    source: None,
                    target: STATE_DIR.to_string(),
                    read_only: false,
                });
            }
            reporter.report(Event::Status(format!(
                "creating container from {}",
                image.reference
            )));
            let id = engine.create_container(&spec).await?;
            // From here on, a failure names the container (spec-note 0472).
            engine
                .start_container(&id)
                .await
                .map_err(|e| HandoffError::from(e).in_container(&id))?;
            if hardened {
                // What the users resolved to inside, before anything runs in it: a uid 0 the
                // policy did not grant removes the container (spec-note 0420).
                verify_uids_inside(
                    engine,
                    &id,
                    applied_remote.as_deref(),
                    &permissions,
                    &grants,
                )
                .await?;
                prepare_state_dir(engine, &id)
                    .await
                    .map_err(|e| e.in_container(&id))?;
            }
            // The lockfile changes only once the container exists (a refused or failed `up`
            // leaves the workspace as it was; spec-note 0280).
            if let Some(lock) = pending_lock
                && let Some(w) = lock.finish(opts.lockfile, reporter)
            {
                warnings.push(w);
            }
            let info = inspect(engine, &id)
                .await
                .map_err(|e| e.in_container(&id))?;
            (info, entries, ContainerAction::Created)
        }
    };
    permissions.splice(0..0, host_requests);
    // Re-read the container's times after a start. A container created by an `up` that
    // stopped before setting it up (the engine went away) gets its state folder prepared now
    // (idempotent).
    let container = if action == ContainerAction::Started {
        if container.mounts.iter().any(|m| m.destination == STATE_DIR) {
            prepare_state_dir(engine, &container.id)
                .await
                .map_err(|e| e.in_container(&container.id))?;
        }
        inspect(engine, &container.id)
            .await
            .map_err(|e| e.in_container(&container.id))?
    } else {
        container
    };

    let attached = attach(
        &container,
        &loaded,
        entries,
        &devcontainer_id,
        opts.default_user_env_probe,
    )?;
    // Whether the remote user can write the workspace, for a new or a reused container alike:
    // one warning, in `warnings` only (the caller shows it once; spec-note 0324).
    if let Some(message) = workspace_ownership_warning(
        engine,
        &container,
        &attached.merged,
        &loaded,
        &attached.remote_user,
        opts.update_remote_user_uid_default,
    )
    .await
    {
        warnings.push(Warning {
            location: None,
            message,
        });
    }
    let kind = match action {
        ContainerAction::Created => BringUpKind::Created,
        ContainerAction::Started => BringUpKind::Restarted,
        ContainerAction::Running => BringUpKind::Running,
    };
    let lifecycle = run_hooks(
        engine,
        &attached,
        kind,
        opts.plan,
        &opts.remote_env,
        &opts.secrets,
        &opts.safe_directories,
        reporter,
    )
    .await
    .inspect_err(|_| {
        // A failed hook ends `up` before its warnings are shown with the result: show them
        // now, as one of them (the remote user cannot write the workspace) is often the cause.
        for w in &warnings {
            reporter.report(Event::Status(format!("warning: {}", w.message)));
        }
    })?;

    let configuration = opts.include_configuration.then(|| {
        let mut shown = loaded.value.clone();
        // Substituted like `mergedConfiguration` (`${devcontainerId}`, `${containerEnv:…}`),
        // as the reference prints it (spec-note 0475); a value that cannot be is kept.
        substitute::substitute_devcontainer_id(&mut shown, &devcontainer_id);
        let container_env = substitute::env_from_list(&container.env);
        let mut substituted = shown.clone();
        if substitute::substitute_container_env(&mut substituted, &container_env).is_ok() {
            shown = substituted;
        }
        if let Value::Object(c) = &mut shown {
            c.insert("configFilePath".into(), file_uri(&loaded.config_file));
        }
        shown
    });
    Ok(UpResult {
        container_id: container.id.clone(),
        remote_user: attached.remote_user.clone(),
        remote_workspace_folder: attached.workspace_folder.clone(),
        action,
        profile: profile.name().to_string(),
        permissions: early.requests.into_iter().chain(permissions).collect(),
        host_env: {
            let mut all = early.host_env;
            security::host_env::merge(&mut all, label_env);
            all
        },
        lifecycle,
        warnings,
        configuration,
        merged_configuration: opts
            .include_merged_configuration
            .then(|| attached.merged.clone()),
        loaded,
    })
}

/// Inputs of [`run_user_commands`].
#[derive(Debug, Clone, Default)]
pub struct RunUserCommandsOptions {
    /// Workspace, config and container identity.
    pub target: TargetOptions,
    /// `--skip-post-create`, `--skip-post-attach`, `--skip-non-blocking-commands`, `--prebuild`.
    pub plan: PlanOptions,
    /// `--remote-env NAME=VALUE`.
    pub remote_env: IndexMap<String, String>,
    /// Secrets (`--secrets-file`).
    pub secrets: IndexMap<String, String>,
    /// `--default-user-env-probe`.
    pub default_user_env_probe: UserEnvProbe,
    /// `--allow`: grants for what the re-read configuration uses beyond what `up` judged
    /// (spec-note 0443).
    pub allow: Vec<String>,
}

/// Reports each granted request of `exec`/`run-user-commands` (spec-note 0443) as a status
/// line (`granted: …`).
pub(crate) fn report_grants(requests: &[PermissionRequest], reporter: &dyn Reporter) {
    for r in requests
        .iter()
        .filter(|r| r.status == security::RequestStatus::Granted)
    {
        reporter.report(Event::Status(format!("granted: {r}")));
    }
}

/// `run-user-commands`: runs the lifecycle hooks in the existing, running dev container
/// (once-hooks only when their marker says they have not completed; `postAttachCommand`
/// always), the secrets in their exec environment and masked in every event and error.
/// Returns the hooks that ran.
///
/// Errors: [`HandoffError::NoContainer`], [`HandoffError::NotRunning`],
/// [`HandoffError::Lifecycle`], [`HandoffError::Engine`], [`HandoffError::Config`]; any of
/// them as [`HandoffError::Redacted`] when its text held a secret value.
pub async fn run_user_commands(
    opts: &RunUserCommandsOptions,
    reporter: &dyn Reporter,
) -> Result<LifecycleReport> {
    let reporter = MaskingReporter {
        inner: reporter,
        secrets: &opts.secrets,
    };
    let run = async {
        let engine = DockerEngine::connect().await?;
        let (attached, requests) = attach_target(
            &engine,
            &opts.target,
            &opts.allow,
            opts.default_user_env_probe,
        )
        .await?;
        report_grants(&requests, &reporter);
        run_hooks(
            &engine,
            &attached,
            BringUpKind::Running,
            opts.plan,
            &opts.remote_env,
            &opts.secrets,
            &[],
            &reporter,
        )
        .await
    };
    run.await.map_err(|e| redact(e, &opts.secrets))
}

/// Finds the running dev container of `labels` and attaches to it (its label metadata plus the
/// current devcontainer.json's updateable properties, substituted).
///
/// Errors: [`HandoffError::NoContainer`], [`HandoffError::NotRunning`].
pub(crate) async fn attach_running(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    labels: &BTreeMap<String, String>,
    workspace: Option<&[PathBuf]>,
    env: &HashMap<String, String>,
    default_probe: UserEnvProbe,
) -> Result<Attached> {
    let container = find_container(engine, labels, workspace, &mut Vec::new())
        .await?
        .ok_or_else(|| HandoffError::NoContainer {
            labels: join_labels(labels),
            expected: false,
        })?;
    if !container.running {
        return Err(HandoffError::NotRunning { id: container.id });
    }
    let mut warnings = Vec::new();
    let entries = existing_entries(&container, loaded, env, &mut warnings);
    let devcontainer_id = crate::config::id::devcontainer_id(labels);
    attach(&container, loaded, entries, &devcontainer_id, default_probe)
}

/// A running dev container with its merged configuration: everything needed to run hooks or
/// commands in it.
#[derive(Debug, Clone)]
pub struct Attached {
    /// The container.
    pub container: ContainerInfo,
    /// The merged configuration, fully substituted (phases 1–3).
    pub merged: Value,
    /// The metadata entries, fully substituted (hook sources).
    pub entries: Vec<Value>,
    /// The user commands run as.
    pub remote_user: String,
    /// The workspace folder in the container.
    pub workspace_folder: String,
    /// The `userEnvProbe` in effect.
    pub probe: UserEnvProbe,
    /// The run-once marker folder (`None` = the remote user's `~/.devcontainer`).
    pub marker_folder: Option<String>,
}

/// [`security::check_reuse`] for the container `up` found: its image's `USER`, the merged
/// `remoteUser`, the workspace, the binds asked for on the command line and the network asked
/// for. Returns the granted requests.
///
/// Errors: [`HandoffError::Security`] (`ReuseRefused`), [`HandoffError::Engine`].
#[allow(clippy::too_many_arguments)]
async fn check_existing(
    engine: &dyn Engine,
    info: &ContainerInfo,
    entries: &[Value],
    loaded: &LoadedConfiguration,
    engine_socket: Option<&Path>,
    profile: &SecurityProfile,
    grants: &Grants,
    opts: &UpOptions,
) -> Result<Vec<PermissionRequest>> {
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return Ok(Vec::new());
    }
    let image_user = if info.user.is_empty() {
        engine
            .inspect_image(&info.image_id)
            .await?
            .and_then(|i| i.user)
    } else {
        None
    };
    let merged = metadata::merge_configuration(&loaded.value, entries);
    let remote_user = merged
        .get("remoteUser")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let binds = security::reuse::bind_sources(&cli_mounts(opts, loaded));
    let network = network_mode(&opts.security, &opts.settings)?;
    // its binds judged as what they resolve to now, like a new container's (spec-note 0400)
    let mut resolved = info.clone();
    for m in resolved.mounts.iter_mut().filter(|m| m.kind == "bind") {
        if let Ok(r) = host_path::resolve(Path::new(&m.source)) {
            m.source = r.to_string_lossy().into_owned();
        }
    }
    let info = &resolved;
    let workspace = host_path::Places::new(&loaded.workspace.host_mount_root, None, None).workspace;
    let passwd = reuse_passwd(engine, info, image_user.as_deref(), remote_user).await;
    let existing = security::ExistingContainer {
        info,
        image_user: image_user.as_deref(),
        remote_user,
        workspace: &workspace,
        command_line_binds: &binds,
        engine_socket,
        network: network.as_deref(),
        passwd: passwd.as_deref(),
    };
    Ok(security::check_reuse(profile, &existing, grants)?)
}

/// The container's `/etc/passwd` for the reuse re-check, read only when a user name could
/// hide uid 0 and was not checked from inside at creation (spec-note 0420): the remote user
/// differs from the user the container runs as (its `remoteUser` changed since), or the
/// container was not made by devcell under `hardened` (no state volume). The warm path of
/// devcell's own containers reads nothing.
async fn reuse_passwd(
    engine: &dyn Engine,
    info: &ContainerInfo,
    image_user: Option<&str>,
    remote_user: Option<&str>,
) -> Option<String> {
    use crate::engine::passwd::{Resolved, resolve};
    let runs_as = Some(info.user.as_str())
        .filter(|u| !u.is_empty())
        .or(image_user.filter(|u| !u.is_empty()))
        .unwrap_or("root");
    let unresolved = |u: &str| matches!(resolve(u, None), Resolved::Unresolved(_));
    let verified_at_creation = info.mounts.iter().any(|m| m.destination == STATE_DIR);
    let needed = remote_user.is_some_and(|r| r != runs_as && unresolved(r))
        || (!verified_at_creation && unresolved(runs_as));
    if !needed {
        return None;
    }
    let bytes = engine.read_file(&info.id, "/etc/passwd").await.ok()??;
    String::from_utf8(bytes).ok()
}

/// `initializeCommand` as a stage, and one [`security::Permission::HostCommand`] request per
/// argv it would run on the host (each entry of the object form; the string form is
/// `/bin/sh -c <string>`), judged by `profile` and `grants` (spec-note 0410). Only
/// devcontainer.json sets it (Features and image metadata cannot), so the source is always
/// devcontainer.json.
///
/// Errors: [`HandoffError::Lifecycle`] for a malformed `initializeCommand`.
pub(crate) fn host_commands(
    loaded: &LoadedConfiguration,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Result<(Option<crate::lifecycle::Stage>, Vec<PermissionRequest>)> {
    let sources = HookSources::from_metadata(&[], loaded.value.get("initializeCommand"))
        .map_err(lifecycle_error(""))?;
    let stage = initialize_stage(&sources);
    let asked: Vec<_> = stage
        .iter()
        .flat_map(|s| s.commands.iter())
        .flat_map(|c| c.command.entries())
        .map(|(_, command)| {
            let argv = command.argv();
            let text =
                shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "));
            (
                security::Permission::HostCommand(text),
                Source::DevcontainerJson,
            )
        })
        .collect();
    Ok((stage, security::judge(profile, asked, grants)))
}

/// The mounts asked for on the command line: `--mount`s, then the worktree's common git dir
/// (`--mount-git-worktree-common-dir`). Granted by being asked for.
fn cli_mounts(opts: &UpOptions, loaded: &LoadedConfiguration) -> Vec<String> {
    opts.mounts
        .iter()
        .cloned()
        .chain(loaded.additional_mount.clone())
        .collect()
}

/// Finds the running container `target` names and attaches to it: `--container-id` (an id or
/// a name), else the id labels (`--id-label`s, else the defaults of the workspace's config).
/// With [`TargetOptions::no_configuration`] no configuration is read: the container's
/// `devcontainer.metadata` label alone gives `remoteUser`, `remoteEnv`, …, `${devcontainerId}`
/// comes from the container's own `devcontainer.local_folder`/`devcontainer.config_file`
/// labels (else the `--id-label`s), and commands run in the remote user's home (`/` when it
/// does not exist), as in the reference CLI and `set-up`.
///
/// Errors: [`HandoffError::NoContainer`] (no container has the labels),
/// [`HandoffError::Engine`] (`NoSuchContainer` for a `--container-id` the engine does not
/// know), [`HandoffError::NotRunning`], [`HandoffError::Config`].
pub(crate) async fn attach_target(
    engine: &dyn Engine,
    target: &TargetOptions,
    allow: &[String],
    default_probe: UserEnvProbe,
) -> Result<(Attached, Vec<PermissionRequest>)> {
    let mut loaded = if target.no_configuration {
        LoadedConfiguration::empty()
    } else {
        load(target)?
    };
    let labels = if target.no_configuration {
        target.id_labels.iter().cloned().collect()
    } else {
        id_labels(target, &loaded)
    };
    let container = match &target.container_id {
        Some(id) => inspect(engine, id).await?,
        None => {
            let expected = expected_workspace(target, &loaded);
            let mut passed_over = Vec::new();
            find_container(engine, &labels, expected.as_deref(), &mut passed_over)
                .await?
                .ok_or_else(|| HandoffError::NoContainer {
                    labels: join_labels(&labels),
                    expected: false,
                })?
        }
    };
    if !container.running {
        return Err(HandoffError::NotRunning { id: container.id });
    }
    // A container `up` judged under `hardened`: the re-read configuration may use only the
    // host variables `up` let cross, unless granted now (spec-note 0443).
    let judged = security::reattach::JudgedAtCreation::from_labels(&container.labels);
    let grants = Grants::parse(allow)?;
    let mut requests = Vec::new();
    let env = match &judged {
        Some(judged) => {
            let uses = security::host_env::uses(&loaded.workspace.host_env_reads, &[]);
            requests = security::reattach::judge(judged, &grants, &uses, None);
            security::reattach::check(&requests)?;
            let env = security::reattach::visible_env(judged, &grants, &target.env);
            if !target.no_configuration {
                loaded = load(&TargetOptions {
                    env: env.clone(),
                    ..target.clone()
                })?;
            }
            env
        }
        None => target.env.clone(),
    };
    let mut warnings = Vec::new();
    let entries = existing_entries(&container, &loaded, &env, &mut warnings);
    let id_source = if target.no_configuration && target.id_labels.is_empty() {
        [
            crate::names::LOCAL_FOLDER_LABEL,
            crate::names::CONFIG_FILE_LABEL,
        ]
        .iter()
        .filter_map(|k| {
            container
                .labels
                .get(*k)
                .map(|v| ((*k).to_string(), v.clone()))
        })
        .collect()
    } else {
        labels
    };
    let devcontainer_id = crate::config::id::devcontainer_id(&id_source);
    let mut attached = attach(
        &container,
        &loaded,
        entries,
        &devcontainer_id,
        default_probe,
    )?;
    // Without a workspace folder (`--container-id`, no `--workspace-folder`) commands run in
    // the remote user's home unless the `--config` names a `workspaceFolder`, as the
    // reference does (issue 12 item 11b).
    let in_home = target.no_configuration
        || (target.container_id.is_some()
            && !target.workspace_folder_given
            && loaded.raw.get("workspaceFolder").is_none());
    if in_home {
        use crate::handoff::set_up::{home_of, usable_folder};
        let home = home_of(engine, &container, &attached.remote_user).await;
        attached.workspace_folder =
            usable_folder(engine, &container.id, &attached.remote_user, &home).await;
    }
    if let Some(judged) = &judged {
        // The remote user judged by the uid the engine will give it (spec-note 0420).
        let uid = remote_uid(engine, &container.id, &attached.remote_user).await;
        let root = security::reattach::judge(judged, &grants, &[], uid);
        security::reattach::check(&root)?;
        requests.extend(root);
    }
    Ok((attached, requests))
}

/// The uid the engine will run `user` as in the container `id`: a number as it is, a name
/// through the container's `/etc/passwd` as it is now (`None` when it cannot be told).
async fn remote_uid(engine: &dyn Engine, id: &str, user: &str) -> Option<u32> {
    use crate::engine::passwd::resolve;
    if let Some(uid) = resolve(user, None).uid() {
        return Some(uid);
    }
    let passwd = engine.read_file(id, "/etc/passwd").await.ok()??;
    resolve(user, Some(&String::from_utf8(passwd).ok()?)).uid()
}

/// What a handoff's (or `up`'s) container would ask for, judged as `up` judges it, without
/// building, pulling or creating anything (`handoff --plan`; spec-note 0320).
#[derive(Debug, Default)]
pub(crate) struct PermissionPreview {
    /// Every request with its status (`refused` ones included), as `up` would report them.
    pub(crate) requests: Vec<PermissionRequest>,
    /// What could not be judged without a pull or a build (the image's `USER` and metadata
    /// label, the Features' metadata), one sentence each.
    pub(crate) notes: Vec<String>,
    /// The refusal `up` would return (`permission_required`), when any request is not granted.
    pub(crate) refusal: Option<security::SecurityError>,
    /// The host variables the configuration would send into the container (spec-note 0440).
    pub(crate) host_env: Vec<security::host_env::HostEnvUse>,
}

/// Evaluates the permission requests of the container `up` would create (or re-checks the one
/// it would reuse, spec-note 0270) with the same policy ([`security::apply`] /
/// [`security::check_reuse`]) and the same inputs: devcontainer.json, the Features' metadata
/// (resolved, metadata only), the image's metadata label and `USER` when the image is already
/// on the engine (a Dockerfile image: its last build, when there is one), and `opts.mounts`.
/// What needs a pull or a build is named in [`PermissionPreview::notes`], and requests
/// attributed to an unknown image `USER` are left out.
///
/// Errors: [`HandoffError::Config`]; [`HandoffError::Security`] for a bad profile or grant;
/// [`HandoffError::Engine`] / [`HandoffError::Unsupported`] for a config whose container
/// request cannot be built (bad `runArgs`, mounts).
pub(crate) async fn preview_permissions(
    engine: Option<&dyn Engine>,
    engine_socket: Option<&Path>,
    opts: &UpOptions,
) -> Result<PermissionPreview> {
    let (profile, grants) = security_choice(&opts.security, &opts.settings)?;
    let mut preview = preview_container(engine, engine_socket, opts).await?;
    if matches!(
        preview.refusal,
        Some(security::SecurityError::PathOutside { .. })
    ) {
        // the configuration itself is refused: its commands are not read
        return Ok(preview);
    }
    let loaded = load_for(&opts.target, confine_grants(&profile, &grants))?;
    let (_, host) = host_commands(&loaded, &profile, &grants)?;
    if host.is_empty() {
        return Ok(preview);
    }
    preview.refusal =
        security::refusal_of_all(&profile, &host, preview.refusal.take(), &preview.requests);
    preview.requests.splice(0..0, host);
    Ok(preview)
}

/// [`preview_permissions`] for the container alone.
async fn preview_container(
    engine: Option<&dyn Engine>,
    engine_socket: Option<&Path>,
    opts: &UpOptions,
) -> Result<PermissionPreview> {
    let (profile, grants) = security_choice(&opts.security, &opts.settings)?;
    let mut preview = PermissionPreview::default();
    // a config file outside the workspace is refused by `up` before anything else
    let loaded = match load_for(&opts.target, confine_grants(&profile, &grants)) {
        Err(HandoffError::Security(e @ security::SecurityError::PathOutside { .. })) => {
            preview.refusal = Some(e);
            return Ok(preview);
        }
        other => other?,
    };
    let kind = loaded.typed.kind();
    if matches!(kind, ConfigKind::Compose | ConfigKind::None) {
        // `up` refuses these itself, before any permission is looked at
        return Ok(preview);
    }
    // As `up`: the host variables and the builds' network first, then only judged variables.
    let opts = &judged_options(opts, &profile, &grants);
    let early = early_requests(&loaded, opts, &profile, &grants)?;
    preview.host_env = early.host_env.clone();
    preview.notes.extend(early.warning.clone());
    let mut preview = preview_rest(
        engine,
        engine_socket,
        opts,
        &loaded,
        preview,
        &profile,
        &grants,
    )
    .await?;
    // One refusal for all of them, as `up` refuses (spec-note 0400).
    preview.refusal = security::refusal_of_all(
        &profile,
        &early.requests,
        preview.refusal.take(),
        &preview.requests,
    );
    preview.requests.splice(0..0, early.requests);
    Ok(preview)
}

/// [`preview_permissions`] after the early requests: the container's own requests.
#[allow(clippy::too_many_arguments)]
async fn preview_rest(
    engine: Option<&dyn Engine>,
    engine_socket: Option<&Path>,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    mut preview: PermissionPreview,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Result<PermissionPreview> {
    let kind = loaded.typed.kind();
    let id_labels = id_labels(&opts.target, loaded);

    // An existing container is re-checked, not re-created.
    if let Some(engine) = engine
        && let Ok(Some(info)) = find_container(
            engine,
            &id_labels,
            expected_workspace(&opts.target, loaded).as_deref(),
            &mut Vec::new(),
        )
        .await
    {
        let entries = existing_entries(&info, loaded, &opts.target.env, &mut Vec::new());
        match check_existing(
            engine,
            &info,
            &entries,
            loaded,
            engine_socket,
            profile,
            grants,
            opts,
        )
        .await
        {
            Ok(requests) => preview.requests = requests,
            Err(HandoffError::Security(e @ security::SecurityError::ReuseRefused { .. })) => {
                if let security::SecurityError::ReuseRefused { requests, .. } = &e {
                    preview.requests = requests.clone();
                }
                preview.refusal = Some(e);
            }
            Err(e) => return Err(e),
        }
        return Ok(preview);
    }

    // The base image, when the engine already has it.
    let (reference, image_info) = match kind {
        ConfigKind::Image => {
            let reference = loaded.typed.image.clone().unwrap_or_default();
            let info = match engine {
                Some(engine) => engine.inspect_image(&reference).await.ok().flatten(),
                None => None,
            };
            if info.is_none() {
                preview.notes.push(format!(
                    "image `{reference}` is not on the engine yet: its `USER` and `devcontainer.metadata` label are read when handoff pulls it, and may ask for more than listed here"
                ));
            }
            (reference, info)
        }
        _ => {
            // the Dockerfile and context `up` would refuse are refused here too, unread
            if let Some(grants) = confine_grants(profile, grants)
                && let Ok(mut request) = build_request(loaded, &opts.target.env)
                && let Err(HandoffError::Security(e)) = confine_build(&mut request, loaded, &grants)
            {
                preview.refusal = Some(e);
                return Ok(preview);
            }
            let tag = build_request(loaded, &opts.target.env)
                .ok()
                .and_then(|r| r.tags.first().cloned())
                .unwrap_or_default();
            let info = match engine {
                Some(engine) if !tag.is_empty() => engine.inspect_image(&tag).await.ok().flatten(),
                _ => None,
            };
            preview.notes.push(match &info {
                Some(_) => format!(
                    "the image's `USER` and `devcontainer.metadata` label are those of the last build (`{tag}`): handoff builds the Dockerfile again first"
                ),
                None => "the image is built from the Dockerfile by handoff: its `USER` and `devcontainer.metadata` label are known only after that build, and may ask for more than listed here".to_string(),
            });
            (tag, info)
        }
    };
    let mut ignored = Vec::new();
    let (raw_base, base) = image_info
        .as_ref()
        .map(|i| image_entries(i, loaded, &opts.target.env, &mut ignored))
        .unwrap_or_default();
    // The label of the last build of the repository's Dockerfile, judged as `up` judges it
    // (spec-note 0443).
    let mut label_requests = Vec::new();
    if kind == ConfigKind::Dockerfile && !raw_base.is_empty() {
        let reads = substitute::local_env_reads(&Value::Array(raw_base));
        let (uses, requests) = security::host_env::image_label(profile, grants, &reads);
        security::host_env::merge(&mut preview.host_env, uses);
        label_requests = requests;
    }

    // The Features' metadata (resolved, not downloaded where the registry has it apart).
    let mut feature_entries = Vec::new();
    if has_features(&loaded.value) {
        match preview_feature_entries(loaded, opts).await {
            Ok(entries) => feature_entries = entries,
            Err(e) => preview.notes.push(format!(
                "the Features' metadata could not be read ({e}): what they ask for is not listed"
            )),
        }
        substitute_entries(&mut feature_entries, loaded, &opts.target.env);
    }
    let entries = metadata::collect_entries(
        &base,
        &feature_entries,
        &metadata::config_entry(&loaded.value),
    );
    // The image's passwd, as `up` reads it, so a user name is judged by its uid here too
    // (spec-note 0420); read past the host record of image files, which a plan never writes.
    let passwd = match (engine, &image_info) {
        (Some(engine), Some(_)) if matches!(profile, SecurityProfile::Hardened(_)) => {
            image_passwd(engine, None, &reference).await
        }
        _ => None,
    };
    let mut requests = container_requests(
        &ContainerJudgement {
            profile,
            grants,
            opts,
            loaded,
            engine_socket,
            extra_mounts: &opts.mounts,
            volumes: engine,
        },
        &reference,
        image_info.as_ref(),
        &entries,
        passwd,
    )
    .await?;
    requests.extend(label_requests);
    if requests.iter().any(|r| {
        matches!(
            r.status,
            security::RequestStatus::Refused | security::RequestStatus::Forbidden
        )
    }) {
        preview.refusal = Some(security::SecurityError::Refused {
            profile: profile.name().to_string(),
            requests: requests.clone(),
        });
    }
    preview.requests = requests;
    Ok(preview)
}

/// What [`judge_configuration`] judged and `up` goes on with.
pub(crate) struct ConfigurationJudgement {
    /// The host variables and the builds' network ([`early_requests`]).
    pub(crate) early: EarlyRequests,
    /// `initializeCommand`, granted ([`host_commands`]).
    pub(crate) init_stage: Option<crate::lifecycle::Stage>,
    /// The host commands' requests.
    pub(crate) host_requests: Vec<PermissionRequest>,
}

/// Judges everything the configuration asks for before anything runs on the host or the
/// engine (spec-note 0400): `earlier` (a handoff's git directories), the host variables and
/// the builds' network ([`early_requests`]), the host commands ([`host_commands`]) and either
/// the re-check of the container that would be reused ([`check_existing`], spec-note 0270) or
/// the container devcontainer.json asks for on its own: mounts, networks, ports,
/// capabilities, users by spelling ([`container_requests`] without an image or Features,
/// whose requests are judged with them before the container is created). `opts` as given to
/// `up` (the whole host environment; judged here). Only engine reads happen.
///
/// Errors: [`HandoffError::Security`] with one [`security::SecurityError::Refused`] listing
/// every request when any is not granted, so one `--allow` list grants them all;
/// [`HandoffError::Lifecycle`] for a malformed `initializeCommand`; the container request's
/// errors (bad `runArgs`, mounts); [`HandoffError::Engine`] when the engine cannot be asked.
pub(crate) async fn judge_configuration(
    engine: &dyn Engine,
    engine_socket: Option<&Path>,
    opts: &UpOptions,
    loaded: &LoadedConfiguration,
    profile: &SecurityProfile,
    grants: &Grants,
    earlier: &[PermissionRequest],
) -> Result<ConfigurationJudgement> {
    let judged = judged_options(opts, profile, grants);
    let early = early_requests(loaded, &judged, profile, grants)?;
    let (init_stage, host_requests) = host_commands(loaded, profile, grants)?;
    let before: Vec<PermissionRequest> = earlier
        .iter()
        .chain(&early.requests)
        .chain(&host_requests)
        .cloned()
        .collect();
    let kind = loaded.typed.kind();
    let builds = matches!(kind, ConfigKind::Image | ConfigKind::Dockerfile);
    let found = if builds && !opts.remove_existing_container {
        find_container(
            engine,
            &id_labels(&opts.target, loaded),
            expected_workspace(&opts.target, loaded).as_deref(),
            &mut Vec::new(),
        )
        .await?
    } else {
        None
    };
    // The container a new one would be, or the re-check of the one that would be reused
    // (spec-note 0270): either is judged with the rest, in one refusal.
    let (reuse_refusal, container) = match &found {
        Some(info) => {
            let entries = existing_entries(info, loaded, &judged.target.env, &mut Vec::new());
            match check_existing(
                engine,
                info,
                &entries,
                loaded,
                engine_socket,
                profile,
                grants,
                &judged,
            )
            .await
            {
                Ok(requests) => (None, requests),
                Err(HandoffError::Security(e @ security::SecurityError::ReuseRefused { .. })) => {
                    (Some(e), Vec::new())
                }
                Err(e) => return Err(e),
            }
        }
        None if builds => {
            let reference = loaded.typed.image.clone().unwrap_or_default();
            let requests = container_requests(
                &ContainerJudgement {
                    profile,
                    grants,
                    opts: &judged,
                    loaded,
                    engine_socket,
                    extra_mounts: &cli_mounts(opts, loaded),
                    volumes: None,
                },
                &reference,
                None,
                &[metadata::config_entry(&loaded.value)],
                None,
            )
            .await?;
            (None, requests)
        }
        None => (None, Vec::new()),
    };
    if let Some(refused) = security::refusal_of_all(profile, &before, reuse_refusal, &container) {
        return Err(refused.into());
    }
    Ok(ConfigurationJudgement {
        early,
        init_stage,
        host_requests,
    })
}

/// What [`container_requests`] judges a container with, besides its image and entries.
struct ContainerJudgement<'a> {
    profile: &'a SecurityProfile,
    grants: &'a Grants,
    /// `up`'s options, the host environment already judged ([`judged_options`]).
    opts: &'a UpOptions,
    loaded: &'a LoadedConfiguration,
    engine_socket: Option<&'a Path>,
    /// The mounts asked for on the command line.
    extra_mounts: &'a [String],
    /// The engine to inspect the named volumes with, when they are judged here (`handoff
    /// --plan`; the run judges them when it creates the container, spec-note 0444).
    volumes: Option<&'a dyn Engine>,
}

/// The permission requests of the container `entries` (metadata entries, devcontainer.json's
/// last) ask for on image `reference`, the container request built as `up` builds it and
/// judged by the same policy. `image_info: None` is an image not known yet: its `USER` is not
/// judged ([`security::configuration_requests`]). Refused requests are returned, not an error.
///
/// Errors: [`HandoffError::Engine`] / [`HandoffError::Unsupported`] for a container request
/// that cannot be built (bad `runArgs`, mounts); [`HandoffError::Security`] for a policy
/// error other than a refusal.
async fn container_requests(
    judgement: &ContainerJudgement<'_>,
    reference: &str,
    image_info: Option<&ImageInfo>,
    entries: &[Value],
    passwd: Option<String>,
) -> Result<Vec<PermissionRequest>> {
    let ContainerJudgement {
        profile,
        grants,
        opts,
        loaded,
        engine_socket,
        extra_mounts,
        volumes,
    } = *judgement;
    let id_labels = id_labels(&opts.target, loaded);
    let mut merged = metadata::merge_configuration(&loaded.value, entries);
    substitute::substitute_devcontainer_id(
        &mut merged,
        &crate::config::id::devcontainer_id(&id_labels),
    );
    let host_env = |name: &str| opts.target.env.get(name).cloned();
    let unknown = ImageInfo::default();
    let mut spec = container_spec(&SpecInputs {
        image: reference,
        image_info: image_info.unwrap_or(&unknown),
        merged: &merged,
        workspace_mount: loaded.workspace.workspace_mount.as_deref(),
        extra_mounts,
        id_labels: &id_labels,
        metadata_label: None,
        host_env: &host_env,
    })
    .map_err(|e| locate_run_arg_error(e, &loaded.config_file))?;
    if let Some(network) = network_mode(&opts.security, &opts.settings)? {
        spec.network_mode = Some(network);
    }
    // Named volumes judged by what they are, as `up` judges them (spec-note 0444).
    let mut volume_requests = Vec::new();
    if let Some(engine) = volumes
        && matches!(profile, SecurityProfile::Hardened(_))
    {
        (volume_requests, _) =
            judge_named_volumes(engine, profile, grants, &mut spec, &loaded.workspace_folder)
                .await?;
    }
    let (workspace, host_home, engine_socket) =
        judged_places(profile, &mut spec, loaded, opts, engine_socket);
    let input = PolicyInput {
        passwd,
        repository_labels: crate::handoff::container::repository_labels(&merged),
        origins: origins(entries, extra_mounts),
        remote_user: merged
            .get("remoteUser")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        image_user: image_info
            .and_then(|i| i.user.clone())
            .filter(|u| !u.is_empty()),
        workspace,
        host_home,
        engine_socket,
        spec,
        ..PolicyInput::default()
    };
    let mut requests = if image_info.is_none() {
        // an unknown `USER` is not taken for root: it is judged once the image exists
        security::configuration_requests(profile, &input, grants)?
    } else {
        match security::apply(profile, &input, grants) {
            Ok(applied) => applied.requests,
            Err(security::SecurityError::Refused { requests, .. }) => requests,
            Err(other) => return Err(other.into()),
        }
    };
    requests.extend(volume_requests);
    Ok(requests)
}

/// The Features' metadata entries (install order, ids as written), as the image label of a
/// Features build would hold them: resolved through the Feature cache and registries
/// (metadata only), honouring the lockfile when present.
async fn preview_feature_entries(
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
) -> Result<Vec<Value>> {
    use crate::features::fetch::{Fetcher, PlanRequest};
    let parts = FeatureRequestParts::of(loaded);
    let lock_at = LockfileAt::of(loaded);
    let lock_path = lock_at.path.clone();
    let mode = match opts.lockfile {
        LockfileMode::Off => LockfileMode::Off,
        _ => LockfileMode::ReadOnly,
    };
    let lock_state = lock_at.read(mode)?;
    let fetcher = Fetcher::new(fetch_options(opts))?;
    let plan = fetcher
        .plan(&PlanRequest {
            features: &parts.features,
            override_order: &parts.override_order,
            config_dir: &parts.config_dir,
            devcontainer_dir: &parts.devcontainer_dir,
            lockfile: lock_state.lockfile().map(|l| (l, lock_path.as_path())),
        })
        .await?;
    Ok(plan
        .install
        .features
        .iter()
        .map(|f| {
            let metadata = plan
                .resolved
                .get(&f.reference)
                .map(|r| r.metadata.clone())
                .unwrap_or(Value::Null);
            metadata::feature_entry(&f.key, &metadata)
        })
        .collect())
}

/// The inputs of a Features resolution taken from a configuration.
struct FeatureRequestParts {
    features: IndexMap<String, Value>,
    override_order: Vec<String>,
    config_dir: PathBuf,
    devcontainer_dir: PathBuf,
}

impl FeatureRequestParts {
    fn of(loaded: &LoadedConfiguration) -> FeatureRequestParts {
        let features: IndexMap<String, Value> = loaded
            .value
            .get("features")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let override_order: Vec<String> = loaded
            .value
            .get("overrideFeatureInstallOrder")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let config_dir = loaded
            .config_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        // Local Features live under the `.devcontainer` folder that holds the configuration
        // (in a multi-repository handoff, the primary repository's, not the workspace root's).
        let devcontainer_dir = loaded
            .config_file
            .ancestors()
            .take_while(|a| {
                a.starts_with(&loaded.workspace_folder) && *a != loaded.workspace_folder
            })
            .find(|a| a.file_name().is_some_and(|n| n == ".devcontainer"))
            .map(Path::to_path_buf)
            .unwrap_or_else(|| loaded.workspace_folder.join(".devcontainer"));
        FeatureRequestParts {
            features,
            override_order,
            config_dir,
            devcontainer_dir,
        }
    }
}

/// The Feature fetcher's options of an `up`: its cache folder and the user's registry settings.
fn fetch_options(opts: &UpOptions) -> crate::features::fetch::FetchOptions {
    let registries = &opts.settings.registries;
    crate::features::fetch::FetchOptions {
        cache_dir: opts.cache_dir.clone(),
        registry: crate::oci::registry::RegistryOptions {
            insecure_registries: registries.insecure.clone(),
            extra_ca_certificates: registries.ca_certs.clone(),
            mirrors: registries.mirrors.clone(),
            ..Default::default()
        },
        ..crate::features::fetch::FetchOptions::default()
    }
}

/// An unsupported or invalid `runArgs` flag from the configuration file, located there: file,
/// line, column and the property path `runArgs[i]` of the first element that is the flag (or
/// `flag=value`). Errors for flags the file does not hold (image metadata) stay as they are.
fn locate_run_arg_error(error: HandoffError, config_file: &Path) -> HandoffError {
    use crate::config::jsonc::{JsonPath, Segment};
    use crate::engine::EngineError;
    let HandoffError::Engine(
        engine @ (EngineError::UnsupportedRunArg { .. } | EngineError::InvalidRunArg { .. }),
    ) = &error
    else {
        return error;
    };
    let flag = match engine {
        EngineError::UnsupportedRunArg { flag } | EngineError::InvalidRunArg { flag, .. } => {
            flag.clone()
        }
        _ => return error,
    };
    let Ok(text) = crate::config::bounded::read_to_string(
        config_file,
        crate::config::jsonc::MAX_FILE_BYTES as u64,
    ) else {
        return error;
    };
    let Ok(document) = crate::config::jsonc::parse(config_file, &text) else {
        return error;
    };
    let index = document
        .value
        .get("runArgs")
        .and_then(Value::as_array)
        .and_then(|args| {
            args.iter().position(|a| {
                a.as_str().is_some_and(|a| {
                    a == flag || a.split_once('=').is_some_and(|(name, _)| name == flag)
                })
            })
        });
    let Some(index) = index else {
        return error;
    };
    let location = document.locate(&JsonPath(vec![
        Segment::Key("runArgs".to_string()),
        Segment::Index(index),
    ]));
    HandoffError::Config(crate::config::ConfigError::Invalid {
        location: Box::new(location),
        message: engine.to_string(),
        hint: crate::diagnostics::Hint::hint(engine),
    })
}

/// What `up` judges before it looks anything up, runs, builds or creates (spec-notes 0440,
/// 0442): the host variables the configuration sends into the container and the builds'
/// network.
#[derive(Debug, Clone, Default)]
pub(crate) struct EarlyRequests {
    /// The [`security::Permission::HostEnv`] requests (one per name) and the
    /// [`security::Permission::BuildNetwork`] request, judged.
    pub(crate) requests: Vec<PermissionRequest>,
    /// The host variables that would cross, by name, with the properties they go into.
    pub(crate) host_env: Vec<security::host_env::HostEnvUse>,
    /// The network every build gets ([`ImageBuildOptions::network`]).
    pub(crate) build_network: Option<Option<String>>,
    /// A granted build argument persists in the image history: said once.
    pub(crate) warning: Option<String>,
}

/// `opts` with the host environment substitution and the engine may read
/// ([`security::host_env::visible_env`]: under `hardened` only granted and non-secret names).
pub(crate) fn judged_options(
    opts: &UpOptions,
    profile: &SecurityProfile,
    grants: &Grants,
) -> UpOptions {
    let mut judged = opts.clone();
    judged.target.env = security::host_env::visible_env(profile, grants, &opts.target.env);
    judged
}

/// The bare host-variable forms the engine resolves itself: `runArgs -e NAME`/`--env NAME`
/// and `build.options --build-arg NAME`, found by the parsers that apply them (a recording
/// lookup that resolves nothing). Parse errors are left to those parsers' real run.
fn bare_env_names(loaded: &LoadedConfiguration) -> Vec<(String, String)> {
    use security::host_env::{BUILD_OPTIONS_PROPERTY, RUN_ARGS_PROPERTY};
    let asked = std::cell::RefCell::new(Vec::new());
    let record = |property: &'static str| {
        let asked = &asked;
        move |name: &str| {
            asked
                .borrow_mut()
                .push((property.to_string(), name.to_string()));
            None
        }
    };
    let _ = crate::engine::run_args::apply_run_args(
        &mut crate::engine::ContainerSpec::default(),
        &loaded.typed.run_args,
        &record(RUN_ARGS_PROPERTY),
    );
    if let Some(build) = &loaded.typed.build {
        let _ = crate::engine::build_options::apply_build_options(
            &mut BuildRequest::default(),
            &build.options,
            &record(BUILD_OPTIONS_PROPERTY),
        );
    }
    asked.into_inner()
}

/// Judges the configuration's host variables and the builds' network ([`EarlyRequests`]).
/// The caller refuses when any request is refused
/// ([`security::host_env::check`]).
///
/// Errors: [`HandoffError::Unsupported`] for an unknown network setting.
pub(crate) fn early_requests(
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Result<EarlyRequests> {
    let host_env =
        security::host_env::uses(&loaded.workspace.host_env_reads, &bare_env_names(loaded));
    let mut requests = security::host_env::judge(profile, grants, &host_env);
    let warning = security::host_env::image_history_warning(&host_env, &requests);
    let container_network = network_mode(&opts.security, &opts.settings)?;
    let configured = build_request(loaded, &opts.target.env)
        .ok()
        .and_then(|r| r.network);
    let decided = security::build_network::decide(
        profile,
        grants,
        container_network.as_deref(),
        configured.as_deref(),
    );
    // Only a hardened container on `none` changes the builds' network; elsewhere each build
    // keeps its own (the Dockerfile the configured one, devcell's layers the default).
    let forced = matches!(profile, SecurityProfile::Hardened(_))
        && container_network.as_deref() == Some("none");
    requests.extend(decided.request);
    Ok(EarlyRequests {
        requests,
        host_env,
        build_network: forced.then_some(decided.network),
        warning,
    })
}

/// Loads the configuration of `target` (see [`load_configuration`]) for a command without a
/// `--security-profile` (`exec`, `down`, `run-user-commands`): the repository's config file
/// is judged as under `hardened`, with no grant (spec-note 0400).
pub(crate) fn load(target: &TargetOptions) -> Result<LoadedConfiguration> {
    load_for(target, Some(Grants::default()))
}

/// [`load`], the configuration file judged first under `hardened` (`confine`: the user's
/// grants; [`LoadOptions::confine`], spec-note 0400).
pub(crate) fn load_for(
    target: &TargetOptions,
    confine: Option<Grants>,
) -> Result<LoadedConfiguration> {
    load_configuration(&LoadOptions {
        confine,
        workspace_folder: target.workspace_folder.clone(),
        config: target.config.clone(),
        mount_workspace_git_root: target.mount_workspace_git_root,
        env: target.env.clone(),
        workspace_override: target.workspace_override.clone(),
        override_config: target.override_config.clone(),
        additional_features: target.additional_features.clone(),
        mount_git_worktree_common_dir: target.mount_git_worktree_common_dir,
    })
}

/// The user's grants when the profile judges the host paths a repository names (`hardened`);
/// `None` under `reference`, which uses them as written (spec-note 0400).
pub(crate) fn confine_grants(profile: &SecurityProfile, grants: &Grants) -> Option<Grants> {
    matches!(profile, SecurityProfile::Hardened(_)).then(|| grants.clone())
}

/// Judges `build.dockerfile` and the build context of `request` on what they resolve to
/// ([`host_path::confine`], against the mounted workspace folder) and makes the request use
/// the resolved paths: a Dockerfile or context outside the workspace is neither read nor packed
/// (nor echoed in a build error) unless granted (`--allow mount:<resolved path>`).
///
/// Errors: [`HandoffError::Security`] (`PathOutside`, `PathUnresolvable`).
pub(crate) fn confine_build(
    request: &mut BuildRequest,
    loaded: &LoadedConfiguration,
    grants: &Grants,
) -> Result<()> {
    let places = host_path::Places::new(&loaded.workspace.host_mount_root, None, None);
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    request.dockerfile = host_path::confine(
        "build.dockerfile",
        &absolute(&request.dockerfile),
        &places,
        grants,
    )?;
    request.context = host_path::confine(
        "build.context",
        &absolute(&request.context),
        &places,
        grants,
    )?;
    Ok(())
}

/// The workspace, host home and engine socket the policy judges `spec` against. Under
/// `hardened` they are resolved ([`host_path::Places`]) and every bind source of `spec` is
/// replaced by what it resolves to ([`host_path::resolve_binds`]): the policy judges, and the
/// engine mounts, the link's target, not the link (spec-note 0400). Under `reference` the
/// configuration's paths are kept as written.
fn judged_places(
    profile: &SecurityProfile,
    spec: &mut crate::engine::ContainerSpec,
    loaded: &LoadedConfiguration,
    opts: &UpOptions,
    engine_socket: Option<&Path>,
) -> (PathBuf, Option<PathBuf>, Option<PathBuf>) {
    let home = opts.target.env.get("HOME").map(PathBuf::from);
    if !matches!(profile, SecurityProfile::Hardened(_)) {
        return (
            loaded.workspace.host_mount_root.clone(),
            home,
            engine_socket.map(Path::to_path_buf),
        );
    }
    host_path::resolve_binds(spec);
    let places = host_path::Places::new(
        &loaded.workspace.host_mount_root,
        home.as_deref(),
        engine_socket,
    );
    (places.workspace, places.home, places.engine_socket)
}

/// The named volumes `spec` mounts, judged for the host workspace folder `workspace` under
/// `hardened` ([`security::volumes::classify`], spec-note 0444): a bind-backed one is turned
/// into a bind of its `device` (judged and resolved like every bind after this), a foreign one
/// is a [`security::Permission::Volume`] request. Returns the requests (judged) and the names
/// of the missing volumes, which devcell creates for this workspace once the policy accepts.
///
/// Errors: [`HandoffError::Engine`] when a volume cannot be inspected.
async fn judge_named_volumes(
    engine: &dyn Engine,
    profile: &SecurityProfile,
    grants: &Grants,
    spec: &mut crate::engine::ContainerSpec,
    workspace: &Path,
) -> Result<(Vec<PermissionRequest>, Vec<String>)> {
    use security::volumes::{VolumeUse, classify};
    let mut foreign: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Volume)
    {
        let Some(name) = m.source.clone() else {
            continue;
        };
        match classify(engine.inspect_volume(&name).await?.as_ref(), workspace) {
            VolumeUse::Missing if !missing.contains(&name) => missing.push(name),
            VolumeUse::Foreign if !foreign.contains(&name) => foreign.push(name),
            VolumeUse::BindBacked(device) => {
                m.kind = MountKind::Bind;
                m.source = Some(device);
            }
            _ => {}
        }
    }
    Ok((security::volumes::judge(profile, grants, &foreign), missing))
}

/// The id labels: `--id-label`s when given, else the reference CLI's defaults.
pub(crate) fn id_labels(
    target: &TargetOptions,
    loaded: &LoadedConfiguration,
) -> BTreeMap<String, String> {
    if target.id_labels.is_empty() {
        crate::config::id::id_labels(&loaded.workspace_folder, &loaded.config_file)
    } else {
        target.id_labels.iter().cloned().collect()
    }
}

/// The first container carrying every id label that is not being removed and, when
/// `workspace` names the folders it must bind ([`expected_workspace`]), binds one of them
/// ([`security::identity::binds_workspace`]): a container claiming this workspace's labels
/// without its bind is never reused, and nothing is sent to it (spec-note 0421); each one
/// passed over is a warning in `warnings`.
pub(crate) async fn find_container(
    engine: &dyn Engine,
    labels: &BTreeMap<String, String>,
    workspace: Option<&[PathBuf]>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<ContainerInfo>> {
    let found = engine.find_containers(labels).await?;
    for summary in found.iter().filter(|c| c.state != "removing") {
        let Some(info) = engine.inspect_container(&summary.id).await? else {
            continue;
        };
        if let Some(folders) = workspace
            && !security::identity::binds_workspace(&info, folders)
        {
            let binds = security::identity::bind_sources(&info);
            warnings.push(Warning {
                location: None,
                message: format!(
                    "container {} carries this workspace's labels but does not bind `{}` (its binds: {}): it is not used; remove it if it is not yours (`docker rm -f {}`)",
                    short(&info.id),
                    folders.first().map(|f| f.display().to_string()).unwrap_or_default(),
                    if binds.is_empty() { "none".to_string() } else { binds.join(", ") },
                    short(&info.id),
                ),
            });
            continue;
        }
        return Ok(Some(info));
    }
    Ok(None)
}

/// The host folders a container found by `target`'s id labels must bind to be this
/// workspace's: the workspace mount's source, the default mount root and the workspace folder
/// (a handoff binds its root at `/workspace`). `None` when the lookup is by `--id-label`s
/// (the user's own choice of identity) or the configuration has no bind workspace mount
/// (nothing to compare with; spec-note 0421).
pub(crate) fn expected_workspace(
    target: &TargetOptions,
    loaded: &LoadedConfiguration,
) -> Option<Vec<PathBuf>> {
    if !target.id_labels.is_empty() || target.no_configuration {
        return None;
    }
    let mount = loaded
        .workspace
        .workspace_mount
        .as_deref()
        .filter(|m| !m.is_empty())
        .and_then(|m| crate::engine::run_args::parse_mount(m).ok())
        .filter(|m| m.kind == MountKind::Bind)?;
    let mut folders: Vec<PathBuf> = mount.source.map(PathBuf::from).into_iter().collect();
    folders.push(loaded.workspace.host_mount_root.clone());
    folders.push(loaded.workspace_folder.clone());
    Some(folders)
}

async fn inspect(engine: &dyn Engine, id: &str) -> Result<ContainerInfo> {
    engine.inspect_container(id).await?.ok_or_else(|| {
        HandoffError::Engine(crate::engine::EngineError::NoSuchContainer { id: id.to_string() })
    })
}

/// The metadata entries of an existing container: its label (phase-1 substituted) plus the
/// updateable properties of the current devcontainer.json; a container without the label gets
/// the devcontainer.json entry.
fn existing_entries(
    info: &ContainerInfo,
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
    warnings: &mut Vec<Warning>,
) -> Vec<Value> {
    match info.labels.get(METADATA_LABEL) {
        Some(label) => {
            let (mut entries, warning) = metadata::parse_label(label);
            warnings.extend(warning);
            substitute_entries(&mut entries, loaded, env);
            entries.push(metadata::updateable_entry(&loaded.value));
            entries
        }
        None => vec![metadata::config_entry(&loaded.value)],
    }
}

/// The image's metadata entries: raw (for the label) and phase-1 substituted (for the merge).
fn image_entries(
    image: &ImageInfo,
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
    warnings: &mut Vec<Warning>,
) -> (Vec<Value>, Vec<Value>) {
    let Some(label) = image.metadata_label() else {
        return (Vec::new(), Vec::new());
    };
    let (raw, warning) = metadata::parse_label(label);
    warnings.extend(warning);
    let mut substituted = raw.clone();
    substitute_entries(&mut substituted, loaded, env);
    (raw, substituted)
}

fn substitute_entries(
    entries: &mut [Value],
    loaded: &LoadedConfiguration,
    env: &HashMap<String, String>,
) {
    let local = loaded.workspace_folder.to_string_lossy().into_owned();
    let ctx = substitute::LocalContext {
        local_workspace_folder: Some(&local),
        container_workspace_folder: Some(&loaded.workspace.workspace_folder),
        env,
        config_file: None,
    };
    for entry in entries {
        // An entry that cannot be substituted (`${localEnv}` without a name) is kept verbatim.
        let mut copy = entry.clone();
        if substitute::substitute_local(&mut copy, &ctx).is_ok() {
            *entry = copy;
        }
    }
}

/// Phases 2 and 3 over the entries and the merged configuration, and who/where/how commands
/// run in `container`.
pub(crate) fn attach(
    container: &ContainerInfo,
    loaded: &LoadedConfiguration,
    entries: Vec<Value>,
    devcontainer_id: &str,
    default_probe: UserEnvProbe,
) -> Result<Attached> {
    let container_env = substitute::env_from_list(&container.env);
    let mut entries = Value::Array(entries);
    substitute::substitute_devcontainer_id(&mut entries, devcontainer_id);
    substitute::substitute_container_env(&mut entries, &container_env)?;
    let entries = match entries {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    let mut merged = metadata::merge_configuration(&loaded.value, &entries);
    substitute::substitute_devcontainer_id(&mut merged, devcontainer_id);
    substitute::substitute_container_env(&mut merged, &container_env)?;
    let text = |key: &str| {
        merged
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let remote_user = text("remoteUser")
        .or_else(|| text("containerUser"))
        .or_else(|| Some(container.user.clone()).filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "root".to_string());
    let probe = UserEnvProbe::from_merged_configuration(&merged, default_probe)
        .map_err(lifecycle_error(&container.id))?;
    let marker_folder = container
        .mounts
        .iter()
        .any(|m| m.destination == STATE_DIR)
        .then(|| format!("{STATE_DIR}/markers"));
    Ok(Attached {
        container: container.clone(),
        merged,
        entries,
        remote_user,
        workspace_folder: workspace_folder_in(container, loaded),
        probe,
        marker_folder,
    })
}

/// The workspace folder commands run in: the configuration's, unless the configuration does
/// not set `workspaceFolder` and `container` mounts nothing at or above the default one but
/// bind-mounts the host workspace folder elsewhere (a `handoff` container, whose workspace root
/// is at `/workspace`, found by `exec` or `run-user-commands` through the same id labels): then
/// that mount's destination. A `workspaceFolder` the configuration names is used as it is,
/// covered by a mount or not, as the reference CLI does (spec-note 0474).
fn workspace_folder_in(container: &ContainerInfo, loaded: &LoadedConfiguration) -> String {
    let folder = &loaded.workspace.workspace_folder;
    let covered = container.mounts.iter().any(|m| {
        let d = m.destination.trim_end_matches('/');
        folder == d || folder.starts_with(&format!("{d}/"))
    });
    let configured = loaded
        .value
        .get("workspaceFolder")
        .and_then(Value::as_str)
        .is_some_and(|f| !f.is_empty());
    if covered || configured {
        return folder.clone();
    }
    let host = &loaded.workspace_folder;
    let canonical = std::fs::canonicalize(host).ok();
    container
        .mounts
        .iter()
        .find(|m| {
            m.kind == "bind"
                && (Path::new(&m.source) == host.as_path()
                    || canonical.as_deref() == Some(Path::new(&m.source)))
        })
        .map_or_else(|| folder.clone(), |m| m.destination.clone())
}

/// The remote environment: the probed user environment, then `--remote-env`, then the merged
/// `remoteEnv` (which wins; `null` unsets, spec-notes/0027).
pub(crate) fn remote_env(
    probed: HookEnv,
    cli: &IndexMap<String, String>,
    merged: &Value,
) -> HookEnv {
    let mut env = probed.0;
    env.extend(cli.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(Value::Object(remote)) = merged.get("remoteEnv") {
        for (name, value) in remote {
            match value {
                Value::String(s) => {
                    env.insert(name.clone(), s.clone());
                }
                Value::Null => {
                    env.shift_remove(name);
                }
                other => {
                    env.insert(name.clone(), other.to_string());
                }
            }
        }
    }
    HookEnv(env)
}

/// Adds `safe.directory` for each of `dirs` to git's environment configuration
/// (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, command-scope configuration that
/// git honours for `safe.directory`), after any entries already in `env`. Nothing when `dirs`
/// is empty.
pub(crate) fn append_safe_directories(env: &mut IndexMap<String, String>, dirs: &[String]) {
    if dirs.is_empty() {
        return;
    }
    let mut n: usize = env
        .get("GIT_CONFIG_COUNT")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    for dir in dirs {
        env.insert(format!("GIT_CONFIG_KEY_{n}"), "safe.directory".into());
        env.insert(format!("GIT_CONFIG_VALUE_{n}"), dir.clone());
        n += 1;
    }
    env.insert("GIT_CONFIG_COUNT".into(), n.to_string());
}

/// Plans and runs the container hooks of `attached` for a bring-up of `kind`; their
/// environment also names `safe_directories` for git ([`append_safe_directories`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_hooks(
    engine: &dyn Engine,
    attached: &Attached,
    kind: BringUpKind,
    options: PlanOptions,
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
    if plan.stages().next().is_none() {
        return Ok(LifecycleReport {
            runs: Vec::new(),
            skipped: plan.skipped,
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
    };
    // Hooks that already ran are skipped without a process in the container (spec-note 0471).
    use crate::handoff::marker_record;
    if let Some(report) = marker_record::already_ran(id, &plan, &markers) {
        return Ok(report);
    }
    if let Some(report) = crate::lifecycle::already_ran(&executor, &plan, &markers).await {
        marker_record::remember(id, &plan, &markers, &report);
        return Ok(report);
    }
    let probed = probe_user_env(
        &executor,
        attached.probe,
        Some(&attached.remote_user),
        DEFAULT_PROBE_TIMEOUT,
        reporter,
    )
    .await
    .map_err(lifecycle_error(id))?;
    let mut env = remote_env(probed, cli_remote_env, &attached.merged);
    append_safe_directories(&mut env.0, safe_directories);
    let context = HookContext {
        user: Some(attached.remote_user.clone()),
        working_dir: Some(attached.workspace_folder.clone()),
        env,
        secrets: HookEnv(secrets.clone()),
        markers: Some(markers),
    };
    let report = run_plan(&executor, &plan, &context, reporter)
        .await
        .map_err(lifecycle_error(id))?;
    if let Some(markers) = &context.markers {
        marker_record::remember(id, &plan, markers, &report);
    }
    Ok(report)
}

fn lifecycle_error(
    container_id: &str,
) -> impl Fn(crate::lifecycle::LifecycleError) -> HandoffError {
    let container_id = container_id.to_string();
    move |source| HandoffError::Lifecycle {
        container_id: container_id.clone(),
        source,
    }
}

/// Takes the bring-up lock of the dev container identity `id` in devcell's state folder
/// ([`crate::handoff::state::StateStore::lock_bring_up`]; spec-note 0422), so parallel `up`s,
/// handoffs and `run-user-commands` of one workspace find-or-create one container and run its
/// hooks once: the second waits (saying so) for the first to finish, then finds its
/// container. No state folder (no home) means no lock.
///
/// Errors: [`HandoffError::Unsupported`] when the lock file cannot be opened or locked.
pub(crate) async fn bring_up_lock(
    id: &str,
    reporter: &dyn Reporter,
) -> Result<Option<crate::handoff::state::BringUpLock>> {
    let Ok(store) = crate::handoff::state::StateStore::open_default() else {
        return Ok(None);
    };
    let failed = |e: crate::handoff::state::StateError| HandoffError::Unsupported {
        message: format!("cannot take the bring-up lock: {e}"),
        hint: Some(format!(
            "devcell keeps its locks in `{}`; check that it is writable",
            store.root().join("locks").display()
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
        .map_err(|e| HandoffError::Unsupported {
            message: format!("cannot take the bring-up lock: {e}"),
            hint: None,
        })?
        .map_err(failed)?;
    Ok(lock)
}

/// `/bin/sh` script printing the real, effective, saved and filesystem uids of the shell
/// itself (`/proc/self/status`, `Uid:` line): shell built-ins only, so it needs nothing but
/// the `/bin/sh` the keep-alive entrypoint needs anyway.
pub const UID_SCRIPT: &str = r#"while read -r k r e s f; do [ "$k" = Uid: ] && echo "$r $e $s $f"; done < /proc/self/status; :"#;

/// After creation under `hardened`, before anything of the configuration runs in it: the
/// container's user and the remote user, as the engine resolves them, must not be uid 0
/// unless `--allow root` was given (spec-note 0420). Each is checked with one exec of
/// [`UID_SCRIPT`]. A uid 0, or a user the check cannot run as, removes the container (and its
/// anonymous volumes).
///
/// Errors: [`HandoffError::Security`] (`Refused`, a `root` request) for uid 0;
/// [`HandoffError::Unsupported`] when the check could not run; [`HandoffError::Engine`].
async fn verify_uids_inside(
    engine: &dyn Engine,
    id: &str,
    remote_user: Option<&str>,
    requests: &[PermissionRequest],
    grants: &Grants,
) -> Result<()> {
    if grants.allows(&security::Permission::Root) {
        return Ok(());
    }
    let mut users: Vec<Option<&str>> = vec![None];
    if let Some(r) = remote_user {
        users.push(Some(r));
    }
    for user in users {
        let request = ExecRequest {
            argv: vec!["/bin/sh".into(), "-c".into(), UID_SCRIPT.into()],
            user: user.map(str::to_string),
            ..ExecRequest::default()
        };
        let shown = user.map_or_else(|| "the container's user".to_string(), |u| format!("`{u}`"));
        let result = engine
            .exec(id, &request, ExecInput::None, ExecOutput::Collect)
            .await;
        let uids: Option<Vec<u32>> = match &result {
            Ok(r) if r.exit_code == 0 => {
                let text = r.stdout_text();
                let fields: Vec<&str> = text.split_whitespace().collect();
                let parsed: Option<Vec<u32>> = fields.iter().map(|f| f.parse().ok()).collect();
                parsed.filter(|p| p.len() == 4)
            }
            _ => None,
        };
        let problem = match uids {
            Some(uids) if !uids.contains(&0) => continue,
            Some(_) => None,
            None => Some(match result {
                Ok(r) => format!("exit code {}: {}", r.exit_code, r.stderr_text().trim()),
                Err(e) => e.to_string(),
            }),
        };
        let _ = engine.remove_container(id, true).await;
        if let Some(problem) = problem {
            return Err(HandoffError::Unsupported {
                message: format!(
                    "cannot check which uid {shown} runs as in container {} ({problem}); the container was removed",
                    short(id)
                ),
                hint: Some(
                    "the user must exist in the image's `/etc/passwd` (or be numeric) and the image needs `/bin/sh`".into(),
                ),
            });
        }
        let source = requests
            .iter()
            .find(|r| r.permission == security::Permission::Root)
            .map(|r| r.source.clone())
            .unwrap_or(if user.is_some() {
                Source::DevcontainerJson
            } else {
                Source::ImageUser
            });
        let mut all: Vec<PermissionRequest> = requests.to_vec();
        all.push(PermissionRequest {
            permission: security::Permission::Root,
            source,
            status: security::RequestStatus::Refused,
        });
        return Err(HandoffError::Security(security::SecurityError::Refused {
            profile: "hardened".to_string(),
            requests: all,
        }));
    }
    Ok(())
}

/// Under `hardened`, every label of the image in the identity namespaces
/// ([`crate::names::is_identity_label`]) but `devcontainer.metadata` that devcell does not set
/// itself is overridden with an empty value on the container (a container inherits its
/// image's labels, and the image may come from the repository's Dockerfile): an empty value
/// matches no lookup. Each is a warning (spec-note 0421).
fn neutralise_image_identity_labels(
    image: &ImageInfo,
    spec: &mut crate::engine::ContainerSpec,
    warnings: &mut Vec<Warning>,
    reporter: &dyn Reporter,
) {
    for key in image.labels.keys() {
        if !crate::names::is_identity_label(key)
            || key == METADATA_LABEL
            || spec.labels.contains_key(key)
        {
            continue;
        }
        spec.labels.insert(key.clone(), String::new());
        let message = format!(
            "the image's label `{key}` is in a namespace devcell identifies containers by: the container gets it empty"
        );
        reporter.report(Event::Status(format!("warning: {message}")));
        warnings.push(Warning {
            location: None,
            message,
        });
    }
}

/// Makes devcell's state volume writable by every user (sticky, like `/tmp`). The hardened
/// profile drops `CAP_CHOWN` and `CAP_FOWNER`, so only the volume's owner may change its mode,
/// and engines differ on who owns a fresh anonymous volume: root on Docker, the container's user
/// on Podman (it gives new volumes to the user the container runs as). `chmod` runs as root
/// first, then, when that is refused, as the container's user (spec-notes/0181). Errors:
/// [`HandoffError::Unsupported`] when neither may, with the last `chmod`'s output.
async fn prepare_state_dir(engine: &dyn Engine, id: &str) -> Result<()> {
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
    Err(HandoffError::Unsupported {
        message: format!(
            "cannot prepare devcell's state folder `{STATE_DIR}` in container {} (exit code {code}): {stderr}",
            short(id),
        ),
        hint: Some(
            "the image needs a `chmod` program (busybox or coreutils), and the volume must be owned by root or the container's user".into(),
        ),
    })
}

/// An image ready to run: its reference and what the engine knows about it.
pub(crate) struct PreparedImage {
    /// The reference (a tag, or the image id).
    pub(crate) reference: String,
    /// What the engine knows about it.
    pub(crate) info: ImageInfo,
}

/// How images are built: `build`'s flags (`up` uses the defaults).
#[derive(Debug, Clone, Default)]
pub struct ImageBuildOptions {
    /// `--no-cache`: the Dockerfile is built without the layer cache (pulling its base
    /// images) and the Features layer is built again without cache.
    pub no_cache: bool,
    /// `--cache-from` (repeatable): images to use as layer cache for the Dockerfile, before
    /// `build.cacheFrom`.
    pub cache_from: Vec<String>,
    /// `--label name=value` (repeatable): labels of the final image (the Features layer).
    pub labels: BTreeMap<String, String>,
    /// Write the `devcontainer.metadata` label into an image even without Features, and
    /// devcontainer.json's `containerEnv` as `ENV` after the Features' (`build`: the image
    /// must stand on its own; `up` sets `containerEnv` on the container instead).
    pub bake_metadata_label: bool,
    /// Every build (the Dockerfile, the Features layer, the `updateRemoteUserUID` layer) runs
    /// on this network (`Some(None)`: the engine's default) instead of the configured one
    /// (spec-note 0442: a container on `none` is built on `none`).
    pub network: Option<Option<String>>,
}

/// Image kind: inspect, pull when missing. Dockerfile kind: build through the engine.
async fn prepare_image(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    kind: ConfigKind,
    host_env: &HashMap<String, String>,
    build: &ImageBuildOptions,
    confine: Option<&Grants>,
    reporter: &dyn Reporter,
) -> Result<PreparedImage> {
    if kind == ConfigKind::Image {
        let reference = loaded.typed.image.clone().unwrap_or_default();
        let info = engine.ensure_image(&reference, reporter).await?;
        return Ok(PreparedImage { reference, info });
    }
    let mut request = build_request(loaded, host_env)?;
    if let Some(grants) = confine {
        confine_build(&mut request, loaded, grants)?;
    }
    if let Some(network) = &build.network {
        request.network = network.clone();
    }
    if build.no_cache {
        request.no_cache = true;
        request.pull = true;
    }
    request
        .cache_from
        .splice(0..0, build.cache_from.iter().cloned());
    reporter.report(Event::Status(format!(
        "building {} from {}",
        request
            .tags
            .first()
            .map(String::as_str)
            .unwrap_or("the image"),
        request.dockerfile.display()
    )));
    let info = engine.build_image(&request, reporter).await?;
    Ok(PreparedImage {
        reference: request.tags.first().cloned().unwrap_or(info.id.clone()),
        info,
    })
}

/// The image of a new dev container (before `updateRemoteUserUID`) and its metadata.
pub(crate) struct DevImage {
    /// The image.
    pub(crate) image: PreparedImage,
    /// The metadata entries to merge, phase-1 substituted: base image ++ Features ++
    /// devcontainer.json.
    pub(crate) entries: Vec<Value>,
    /// The `devcontainer.metadata` label the container must carry itself (raw); `None` when
    /// the image carries it.
    pub(crate) label: Option<String>,
    /// The host variables the label of an image built from the repository's Dockerfile
    /// names, judged like devcontainer.json's (none refused; spec-note 0443).
    pub(crate) label_requests: Vec<PermissionRequest>,
    /// The host variables of `label_requests`, with the label properties they go into.
    pub(crate) label_host_env: Vec<security::host_env::HostEnvUse>,
    /// The Features resolution's lockfile, to write once the result exists (`None` without
    /// Features).
    pub(crate) lock: Option<PendingLock>,
}

/// Prepares the image of a new dev container, as `up` and `build` do: the `image` (inspected,
/// pulled when missing) or the built `build.dockerfile` ([`prepare_image`]), with the
/// configuration's Features layered on ([`build_features`]; the image's label then holds base
/// ++ Features ++ devcontainer.json entries). Without Features the label is returned for the
/// container, unless `opts.build.bake_metadata_label` asks for an image carrying it (`build`;
/// a layer without Features).
///
/// Errors: as [`prepare_image`] and [`build_features`].
pub(crate) async fn dev_image(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    kind: ConfigKind,
    opts: &UpOptions,
    reporter: &dyn Reporter,
    warnings: &mut Vec<Warning>,
) -> Result<DevImage> {
    let (profile, grants) = security_choice(&opts.security, &opts.settings)?;
    let mut image = prepare_image(
        engine,
        loaded,
        kind,
        &opts.target.env,
        &opts.build,
        confine_grants(&profile, &grants).as_ref(),
        reporter,
    )
    .await?;
    let (raw_base, base) = image_entries(&image.info, loaded, &opts.target.env, warnings);
    // The label of an image built from the repository's Dockerfile is the repository's: its
    // host variables are requests like devcontainer.json's (spec-note 0443).
    let (label_host_env, label_requests) = if kind == ConfigKind::Dockerfile {
        let reads = substitute::local_env_reads(&Value::Array(raw_base.clone()));
        let (uses, requests) = security::host_env::image_label(&profile, &grants, &reads);
        security::host_env::check(&profile, &requests)?;
        (uses, requests)
    } else {
        Default::default()
    };
    let with_features = has_features(&loaded.value);
    let mut lock = None;
    // A plain Dockerfile's image carries the label too, as the reference's does (spec-note 0473).
    let (entries, label) =
        if with_features || opts.build.bake_metadata_label || kind == ConfigKind::Dockerfile {
            // The built image's label holds base ++ Features ++ devcontainer.json entries; the
            // container inherits it from the image.
            image = if with_features {
                let (built, pending) =
                    build_features(engine, loaded, image, raw_base, &base, opts, reporter).await?;
                lock = Some(pending);
                built
            } else {
                let built = layer_features(
                    engine,
                    loaded,
                    &image,
                    raw_base,
                    &base,
                    Vec::new(),
                    opts,
                    reporter,
                )
                .await?;
                reporter.report(Event::Status(if built.built {
                    format!("built {}", built.tag)
                } else {
                    format!("using cached {}", built.tag)
                }));
                PreparedImage {
                    reference: built.tag,
                    info: built.image,
                }
            };
            let (_, entries) = image_entries(&image.info, loaded, &opts.target.env, warnings);
            (entries, None)
        } else {
            let entries =
                metadata::collect_entries(&base, &[], &metadata::config_entry(&loaded.value));
            let label = metadata::label_value(&metadata::collect_entries(
                &raw_base,
                &[],
                &metadata::config_entry(&loaded.raw),
            ));
            (entries, Some(label))
        };
    Ok(DevImage {
        image,
        entries,
        label,
        label_requests,
        label_host_env,
        lock,
    })
}

/// What [`update_remote_user_uid`] decided.
struct UidUpdate {
    /// The image with the UID layer, when one applies.
    image: Option<PreparedImage>,
}

/// `updateRemoteUserUID` (spec: Linux hosts, default on, when the workspace is a bind mount):
/// the remote user gets the *workspace user's* UID/GID in a small cached layer
/// ([`crate::build::ensure_uid_image`]): the host user's, or, when devcell runs as root, the
/// owner of the workspace folder when that is not root (spec-note 0250). Nothing is built when
/// everything is root (the remote user keeps its ids), the remote user is root or numeric, or
/// the property is `false`.
async fn update_remote_user_uid(
    engine: &dyn Engine,
    image: &PreparedImage,
    merged: &Value,
    loaded: &LoadedConfiguration,
    default: UidUpdateDefault,
    network: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<UidUpdate> {
    let mut outcome = UidUpdate { image: None };
    let (applies, target) = uid_target(merged, loaded, default);
    if !applies {
        return Ok(outcome);
    }
    let Some(target) = target else {
        return Ok(outcome);
    };
    let text = |key: &str| {
        merged
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let image_user = image.info.user.clone().unwrap_or_default();
    let remote_user = text("remoteUser")
        .or_else(|| text("containerUser"))
        .unwrap_or_else(|| image_user.clone());
    let input = crate::build::UidInput {
        image: image.reference.clone(),
        image_id: image.info.id.clone(),
        image_user,
        remote_user,
        host_uid: target.uid,
        host_gid: target.gid,
    };
    outcome.image = crate::build::ensure_uid_image(engine, &input, network, reporter)
        .await?
        .map(|built| PreparedImage {
            reference: built.tag,
            info: built.image,
        });
    Ok(outcome)
}

/// Whether `updateRemoteUserUID` applies (Linux, not `false`, a bind-mounted workspace) and
/// the ids the remote user should get: the workspace user (spec-note 0250); `None` when
/// everything is root.
fn uid_target(
    merged: &Value,
    loaded: &LoadedConfiguration,
    default: UidUpdateDefault,
) -> (bool, Option<crate::config::ownership::Ids>) {
    // `--update-remote-user-uid-default`: `never` wins over the configuration; otherwise the
    // configuration's `updateRemoteUserUID`, else the default (`on`).
    let wanted = match (
        default,
        merged.get("updateRemoteUserUID").and_then(Value::as_bool),
    ) {
        (UidUpdateDefault::Never, _) => false,
        (_, Some(said)) => said,
        (UidUpdateDefault::On, None) => true,
        (UidUpdateDefault::Off, None) => false,
    };
    if !cfg!(target_os = "linux")
        || !wanted
        || !loaded
            .workspace
            .workspace_mount
            .as_deref()
            .is_some_and(|m| m.contains("type=bind"))
    {
        return (false, None);
    }
    (
        true,
        crate::config::ownership::workspace_user_of(&loaded.workspace.host_mount_root),
    )
}

/// The envelope warning code of the "the remote user cannot write the root-owned workspace"
/// warning ([`ownership_warning`]).
pub const WORKSPACE_NOT_WRITABLE_CODE: &str = "workspace_not_writable";
/// The envelope warning code of the "files the remote user writes will belong to another uid"
/// warning ([`ownership_warning`]).
pub const WORKSPACE_OWNER_MISMATCH_CODE: &str = "workspace_owner_mismatch";

const NOT_WRITABLE_PREFIX: &str = "devcell runs as root and the workspace";
const MISMATCH_PREFIX: &str = "the remote user `";

/// The envelope code of one of `up`'s warnings, when it has a specific one
/// ([`WORKSPACE_NOT_WRITABLE_CODE`], [`WORKSPACE_OWNER_MISMATCH_CODE`]).
pub fn warning_code(message: &str) -> Option<&'static str> {
    if message.starts_with(NOT_WRITABLE_PREFIX) {
        Some(WORKSPACE_NOT_WRITABLE_CODE)
    } else if message.starts_with(MISMATCH_PREFIX) && message.contains("updateRemoteUserUID") {
        Some(WORKSPACE_OWNER_MISMATCH_CODE)
    } else {
        None
    }
}

/// [`ownership_warning`] for the running `container`: the remote user's uid from its
/// [`crate::names::REMOTE_UID_LABEL`], else read from its `/etc/passwd`. `None` when all is
/// well or it cannot be told.
async fn workspace_ownership_warning(
    engine: &dyn Engine,
    container: &ContainerInfo,
    merged: &Value,
    loaded: &LoadedConfiguration,
    remote_user: &str,
    default: UidUpdateDefault,
) -> Option<String> {
    let (applies, target) = uid_target(merged, loaded, default);
    if !applies {
        return None;
    }
    // The uid recorded at creation when devcell made the container (a file read through the
    // engine costs ~40 ms, too much for a warm `up`), else the container's `/etc/passwd`.
    let recorded = container
        .labels
        .get(crate::names::REMOTE_UID_LABEL)
        .and_then(|uid| uid.parse().ok())
        .map(|uid| Account {
            uid,
            gid: uid,
            home: String::new(),
        });
    let account = match recorded {
        Some(account) => account,
        None => {
            let passwd = engine
                .read_file(&container.id, "/etc/passwd")
                .await
                .ok()??;
            passwd_account(&String::from_utf8(passwd).ok()?, remote_user)?
        }
    };
    ownership_warning(
        remote_user,
        &account,
        target,
        &loaded.workspace.host_mount_root,
    )
}

/// A warning when files the remote user `user` (its final `account`) writes in the workspace
/// `workspace` will not belong to the workspace user `target` (spec-note 0250): its uid could
/// not be changed (another user of the image has it), or everything is root and the remote
/// user keeps its non-root ids in a workspace only root can write. `None` when all is well (or
/// the user is root: the non-root rule speaks for that).
fn ownership_warning(
    user: &str,
    account: &Account,
    target: Option<crate::config::ownership::Ids>,
    workspace: &Path,
) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    if account.uid == 0 {
        return None;
    }
    match target {
        Some(t) if t.uid != account.uid => Some(format!(
            "{MISMATCH_PREFIX}{user}` keeps uid {} (updateRemoteUserUID could not give it uid {}: another user of the image has it, or the user is numeric or missing from `/etc/passwd`): files it writes in `{}` will belong to uid {}",
            account.uid,
            t.uid,
            workspace.display(),
            account.uid
        )),
        Some(_) => None,
        None => {
            let meta = std::fs::metadata(workspace).ok()?;
            (meta.uid() == 0 && meta.mode() & 0o002 == 0).then(|| format!(
                "{NOT_WRITABLE_PREFIX} `{}` belongs to root: the remote user `{user}` keeps uid {} and cannot write it; give the workspace to the user who should own the agent's files (`chown -R`; devcell then maps `{user}` to that user), or run devcell as that user",
                workspace.display(),
                account.uid
            ))
        }
    }
}

/// A user's `/etc/passwd` entry: ids and home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Numeric user id.
    pub uid: u32,
    /// Numeric primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
}

/// Finds `user` (a name, or a numeric uid; a `:group` suffix is ignored) in `/etc/passwd`
/// text the way the engine resolves it ([`crate::engine::passwd::lookup`]). `None` when it has
/// no entry.
pub fn passwd_account(passwd: &str, user: &str) -> Option<Account> {
    crate::engine::passwd::lookup(passwd, user).map(|e| Account {
        uid: e.uid,
        gid: e.gid,
        home: e.home,
    })
}

/// The image's `/etc/passwd` text: from the host record of the image's files when `image` is
/// given (spec-note 0471; recorded there after a read), else read from a container that is created and removed without
/// being started (spec-note 0185). `None` when it cannot be read: names are then judged from
/// inside the container after creation (spec-note 0420), and the policy derives the home.
pub(crate) async fn image_passwd(
    engine: &dyn Engine,
    image: Option<&ImageInfo>,
    reference: &str,
) -> Option<String> {
    let bytes = match image {
        Some(info) => {
            crate::handoff::image_files::read(engine, reference, &info.id, "/etc/passwd").await
        }
        None => engine.read_image_file(reference, "/etc/passwd").await,
    };
    String::from_utf8(bytes.ok()??).ok()
}

/// Whether the configuration lists any Feature.
fn has_features(config: &Value) -> bool {
    config
        .get("features")
        .and_then(Value::as_object)
        .is_some_and(|f| !f.is_empty())
}

/// The lockfile of a resolution, written (or checked) once the container (`build`: the image)
/// exists.
pub(crate) struct PendingLock {
    path: PathBuf,
    lockfile: Lockfile,
    at: LockfileAt,
}

impl PendingLock {
    /// The [`security::audit::FEATURE_DIGESTS_LABEL`] value: `{"<lock key>": "sha256:…"}` for
    /// the OCI and tarball Features installed (local Features have no digest).
    fn digests_label(&self) -> String {
        let digests: BTreeMap<&str, &str> = self
            .lockfile
            .features
            .iter()
            .map(|(k, f)| (k.as_str(), f.integrity.as_str()))
            .collect();
        serde_json::to_string(&digests).unwrap_or_else(|_| "{}".into())
    }

    /// Applies `mode` ([`lockfile::apply`]); returns a warning for a lockfile that could not be
    /// written or that a read-only run left stale.
    pub(crate) fn finish(&self, mode: LockfileMode, reporter: &dyn Reporter) -> Option<Warning> {
        // judged and written through the workspace's handle, owned by the workspace's owner
        // (spec-notes 0400, 0250)
        let message = match self.at.apply(&self.lockfile, mode) {
            Ok(WriteOutcome::Written) => {
                reporter.report(Event::Status(format!("wrote {}", self.path.display())));
                return None;
            }
            Ok(WriteOutcome::Stale) => format!(
                "`{}` does not match the Features resolved for this container; it is left unchanged (run `devcell up` or `devcell upgrade` to update it)",
                self.path.display()
            ),
            Ok(_) => return None,
            Err(e) => format!("cannot write `{}`: {e}", self.path.display()),
        };
        reporter.report(Event::Status(format!("warning: {message}")));
        Some(Warning {
            location: None,
            message,
        })
    }
}

/// Resolves, orders and fetches the configuration's Features ([`crate::features::fetch`]) and
/// layers them onto `base_image` ([`crate::build::ensure_features_image`]): built only when its
/// cache tag (a hash of every input) is missing, so an unchanged second `up` builds nothing.
///
/// The lockfile beside the configuration pins OCI and tarball Features when present (unless
/// `opts.lockfile` is `Off`); under `Frozen` the resolution must equal it before anything is
/// built. Returns the image and the resolution's lockfile, to write once the container exists.
async fn build_features(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    base_image: PreparedImage,
    raw_base: Vec<Value>,
    base: &[Value],
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<(PreparedImage, PendingLock)> {
    use crate::build::FeatureLayer;
    use crate::features::fetch::{Fetcher, PlanRequest};

    let FeatureRequestParts {
        features,
        override_order,
        config_dir,
        devcontainer_dir,
    } = FeatureRequestParts::of(loaded);
    let lock_at = LockfileAt::of(loaded);
    let lock_path = lock_at.path.clone();
    let lock_state = lock_at.read(opts.lockfile)?;
    let locked = lock_state.lockfile();
    reporter.report(Event::Status(format!(
        "resolving {} Feature(s){}",
        features.len(),
        if locked.is_some() {
            format!(" pinned by {}", lock_path.display())
        } else {
            String::new()
        }
    )));
    let staging = tempfile::tempdir().map_err(|e| HandoffError::Unsupported {
        message: format!("cannot create a temporary folder for Features: {e}"),
        hint: None,
    })?;
    // The fetcher keeps an owned reporter: its pull progress is forwarded to `reporter` while
    // it works (the forwarding ends when the fetcher is dropped).
    let (fetch_progress, fetch_events) = crate::progress::channel();
    let fetched = async {
        let fetcher = Fetcher::new(fetch_options(opts))?.with_reporter(fetch_progress);
        let plan = fetcher
            .plan(&PlanRequest {
                features: &features,
                override_order: &override_order,
                config_dir: &config_dir,
                devcontainer_dir: &devcontainer_dir,
                lockfile: locked.map(|l| (l, lock_path.as_path())),
            })
            .await?;
        if opts.lockfile == LockfileMode::Frozen {
            // Before any download or build: a frozen lockfile that does not match stops here.
            lock_at.apply(&plan.lockfile(), LockfileMode::Frozen)?;
        }
        let dirs = fetcher.fetch_plan(&plan, staging.path()).await?;
        Ok::<_, HandoffError>((plan, dirs))
    };
    let (fetched, ()) = tokio::join!(fetched, fetch_events.forward_to(reporter));
    let (plan, dirs) = fetched?;
    let pending = PendingLock {
        path: lock_path.clone(),
        lockfile: plan.lockfile(),
        at: lock_at,
    };
    for warning in &plan.install.warnings {
        reporter.report(Event::Status(format!("warning: {warning}")));
    }
    let mut layers = Vec::with_capacity(dirs.len());
    for (feature, dir) in plan.install.features.iter().zip(dirs) {
        let metadata = plan
            .resolved
            .get(&feature.reference)
            .map(|r| r.metadata.clone())
            .unwrap_or(Value::Null);
        layers.push(FeatureLayer::new(
            &feature.key,
            dir,
            metadata,
            &feature.options,
            feature.canonical.clone(),
        )?);
    }
    let built = layer_features(
        engine,
        loaded,
        &base_image,
        raw_base,
        base,
        layers,
        opts,
        reporter,
    )
    .await?;
    reporter.report(Event::Status(if built.built {
        format!("built {}", built.tag)
    } else {
        format!("using cached {}", built.tag)
    }));
    Ok((
        PreparedImage {
            reference: built.tag,
            info: built.image,
        },
        pending,
    ))
}

/// Layers `layers` (Features in install order, materialised; none to only write the label)
/// onto `base_image` with the `devcontainer.metadata` label (`raw_base` ++ Features ++
/// devcontainer.json) and `opts.build`'s labels ([`crate::build::ensure_features_image_with`]):
/// built only when its cache tag is missing, unless `opts.build.no_cache`.
///
/// Errors: [`HandoffError::Build`] (planning, or the engine's build failed).
#[allow(clippy::too_many_arguments)]
async fn layer_features(
    engine: &dyn Engine,
    loaded: &LoadedConfiguration,
    base_image: &PreparedImage,
    raw_base: Vec<Value>,
    base: &[Value],
    layers: Vec<crate::build::FeatureLayer>,
    opts: &UpOptions,
    reporter: &dyn Reporter,
) -> Result<crate::build::BuiltImage> {
    use crate::build::{BaseImage, FeaturesInput, ImageOptions, ensure_features_image_with};

    let users = metadata::merge(&metadata::collect_entries(
        base,
        &[],
        &metadata::config_entry(&loaded.value),
    ));
    let user = |key: &str| {
        users
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let input = FeaturesInput {
        base: BaseImage {
            reference: base_image.reference.clone(),
            id: base_image.info.id.clone(),
            user: base_image.info.user.clone().unwrap_or_default(),
            metadata: raw_base,
        },
        features: layers,
        config: loaded.raw.clone(),
        container_user: user("containerUser"),
        remote_user: user("remoteUser"),
    };
    // `build` bakes devcontainer.json's containerEnv after the Features' (spec-note 0473).
    let container_env = if opts.build.bake_metadata_label {
        loaded
            .value
            .get("containerEnv")
            .and_then(Value::as_object)
            .map(|env| {
                env.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let options = ImageOptions {
        labels: opts.build.labels.clone(),
        no_cache: opts.build.no_cache,
        network: opts.build.network.clone().flatten(),
        container_env,
    };
    Ok(ensure_features_image_with(engine, &input, &options, reporter).await?)
}

/// The build request of a Dockerfile config: `build.dockerfile`, `context`, `args`, `target`,
/// `cacheFrom`, and the `build.options` the engine maps
/// ([`crate::engine::build_options::apply_build_options`]); any other option is an error
/// naming it. The image is named like the reference CLI's: `vsc-<folder>-<sha256 of its path>`.
pub fn build_request(
    loaded: &LoadedConfiguration,
    host_env: &HashMap<String, String>,
) -> Result<BuildRequest> {
    let build = loaded.typed.build.clone().unwrap_or_default();
    let dockerfile = loaded
        .typed
        .dockerfile_path(&loaded.config_file)
        .unwrap_or_default();
    let context = loaded
        .typed
        .context_path(&loaded.config_file)
        .unwrap_or_default();
    let mut request = BuildRequest {
        context,
        dockerfile,
        tags: vec![image_name(&loaded.workspace_folder)],
        args: build.args.clone(),
        target: build.target.clone(),
        cache_from: build.cache_from.clone(),
        ..BuildRequest::default()
    };
    crate::engine::build_options::apply_build_options(&mut request, &build.options, &|name| {
        host_env.get(name).cloned()
    })?;
    Ok(request)
}

/// `vsc-<basename>-<sha256 hex of the workspace path>`, lowercased, other characters removed.
pub(crate) fn image_name(workspace: &Path) -> String {
    use sha2::{Digest, Sha256};
    let base: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    let hash = hex::encode(Sha256::digest(workspace.to_string_lossy().as_bytes()));
    format!("vsc-{base}-{hash}")
}

/// Who asked for what, from the metadata entries (image label entries, Feature entries with
/// `id`, the devcontainer.json entry last) and the `--mount` flags.
pub(crate) fn origins(entries: &[Value], cli_mounts: &[String]) -> Origins {
    let mut origins = Origins::default();
    let last = entries.len().saturating_sub(1);
    for (index, entry) in entries.iter().enumerate() {
        let source = match entry.get("id").and_then(Value::as_str) {
            Some(id) => Source::Feature(id.to_string()),
            None if index == last => Source::DevcontainerJson,
            None => Source::ImageMetadata,
        };
        if entry.get("privileged").and_then(Value::as_bool) == Some(true)
            && origins.privileged.is_none()
        {
            origins.privileged = Some(source.clone());
        }
        for cap in entry
            .get("capAdd")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            origins
                .capabilities
                .entry(security::policy::normalize_cap(cap))
                .or_insert_with(|| source.clone());
        }
        for opt in entry
            .get("securityOpt")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            origins
                .security_opts
                .entry(opt.to_string())
                .or_insert_with(|| source.clone());
        }
        for mount in entry
            .get("mounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(target) = metadata::mount_target(mount) {
                origins.mounts.insert(target, source.clone());
            }
        }
        if entry.get("containerUser").and_then(Value::as_str).is_some() {
            origins.container_user = Some(source.clone());
        }
        if entry.get("remoteUser").and_then(Value::as_str).is_some() {
            origins.remote_user = Some(source.clone());
        }
    }
    for mount in cli_mounts {
        if let Some(target) = metadata::mount_target(&Value::String(mount.clone())) {
            origins.mounts.insert(target, Source::CommandLine);
        }
    }
    origins
}

/// The profile (flag, else settings file; default `hardened`) with its limits, and the grants
/// (settings file `allow` plus `--allow` flags — never anything from the repository).
///
/// Errors: [`HandoffError::Security`] for an unknown profile or grant;
/// [`HandoffError::Unsupported`] for an invalid `--memory`.
pub fn security_choice(
    opts: &SecurityOptions,
    settings: &Settings,
) -> Result<(SecurityProfile, Grants)> {
    let name = opts
        .profile
        .clone()
        .unwrap_or_else(|| settings.security.profile.clone());
    let mut profile: SecurityProfile = name.parse()?;
    // Checked under every profile: a bad value is an error even where it is not applied.
    let chosen = limits(opts, settings)?;
    if let SecurityProfile::Hardened(limits) = &mut profile {
        *limits = chosen;
    }
    let mut grants = Grants::parse(&settings.security.allow)?;
    for value in &opts.allow {
        grants.add(value)?;
    }
    Ok((profile, grants))
}

/// The smallest memory limit the engine accepts (Docker: 6 MiB).
pub const MIN_MEMORY_BYTES: i64 = 6 << 20;
/// The CPU limit's range in CPUs (Docker's granularity is 0.01; the upper bound only keeps
/// the value in range, the engine refuses more CPUs than its host has).
pub const CPUS_RANGE: std::ops::RangeInclusive<f64> = 0.01..=4096.0;

/// The `hardened` profile's limits: each flag (`--pids-limit`, `--memory`, `--cpus`), else
/// the `[security]` setting (`pids_limit`, `memory`, `cpus`; defaults 1024, `4g`, 2).
///
/// Errors: [`HandoffError::InvalidLimit`] for a pids limit below 1, a memory size that is not
/// bytes with an optional `k`/`m`/`g`/`t` suffix or is below 6 MiB, or CPUs outside
/// [`CPUS_RANGE`].
pub fn limits(opts: &SecurityOptions, settings: &Settings) -> Result<ProfileLimits> {
    let invalid = |what: &str, value: String, expected: &str| HandoffError::InvalidLimit {
        what: what.to_string(),
        value,
        expected: expected.to_string(),
    };
    let pids = opts.pids_limit.unwrap_or(settings.security.pids_limit);
    if pids < 1 {
        return Err(invalid(
            "pids limit (`--pids-limit`, `[security] pids_limit`)",
            pids.to_string(),
            "expected a whole number of processes, at least 1",
        ));
    }
    let memory_text = opts
        .memory
        .clone()
        .unwrap_or_else(|| settings.security.memory.clone());
    let memory_what = "memory limit (`--memory`, `[security] memory`)";
    let memory = crate::settings::parse_size(&memory_text)
        .and_then(|m| i64::try_from(m).ok())
        .ok_or_else(|| {
            invalid(
                memory_what,
                memory_text.clone(),
                "expected bytes with an optional `k`, `m`, `g` or `t` suffix (powers of 1024), e.g. `4g`",
            )
        })?;
    if memory < MIN_MEMORY_BYTES {
        return Err(invalid(
            memory_what,
            memory_text,
            "expected at least `6m` (the engine's minimum)",
        ));
    }
    let cpus = opts.cpus.unwrap_or(settings.security.cpus);
    if !CPUS_RANGE.contains(&cpus) {
        return Err(invalid(
            "CPU limit (`--cpus`, `[security] cpus`)",
            cpus.to_string(),
            "expected a number of CPUs from 0.01 to 4096, e.g. `2` or `1.5`",
        ));
    }
    Ok(ProfileLimits {
        pids,
        memory_bytes: memory,
        nano_cpus: (cpus * 1e9).round() as i64,
    })
}

fn network_mode(opts: &SecurityOptions, settings: &Settings) -> Result<Option<String>> {
    let network = opts
        .network
        .clone()
        .unwrap_or_else(|| settings.security.network.clone());
    match network.as_str() {
        "default" | "" => Ok(None),
        "none" => Ok(Some("none".into())),
        other => Err(HandoffError::Unsupported {
            message: format!("unknown network setting `{other}`: expected `default` or `none`"),
            hint: None,
        }),
    }
}

/// Reads a `--secrets-file`: a JSON object of string values (`{"TOKEN": "…"}`), the
/// reference CLI's format, of at most [`crate::config::jsonc::MAX_FILE_BYTES`] (a regular file
/// or a pipe such as `<(pass show x)`; a device or a FIFO nobody finishes writing is an error
/// within seconds). Names must be usable as environment variable names (non-empty, no `=` or
/// NUL); values must not contain NUL.
///
/// Errors: [`HandoffError::SecretsFile`] naming the file and the key (never a value).
pub fn read_secrets_file(path: &Path) -> Result<IndexMap<String, String>> {
    let bad = |message: String| HandoffError::SecretsFile {
        path: path.to_path_buf(),
        message,
    };
    // Bounded like devcontainer.json; a FIFO or device never hangs devcell (spec-note 0433).
    let text =
        crate::config::bounded::read_to_string(path, crate::config::jsonc::MAX_FILE_BYTES as u64)
            .map_err(|e| bad(e.to_string()))?;
    if text.trim().is_empty() {
        return Err(bad("the file is empty; expected a JSON object".into()));
    }
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("invalid JSON at line {}", e.line())))?;
    let Value::Object(map) = value else {
        return Err(bad("expected a JSON object".into()));
    };
    map.into_iter()
        .map(|(k, v)| {
            // An exec's environment entry is `NAME=value`: a name with `=` (or NUL) would set
            // another variable, a NUL cannot cross `execve`.
            if k.is_empty() || k.contains(['=', '\0']) {
                return Err(bad(format!(
                    "`{}` is not an environment variable name (non-empty, without `=` or NUL)",
                    k.escape_debug()
                )));
            }
            match v {
                Value::String(s) if s.contains('\0') => {
                    Err(bad(format!("the value of `{k}` contains a NUL character")))
                }
                Value::String(s) => Ok((k, s)),
                _ => Err(bad(format!("the value of `{k}` is not a string"))),
            }
        })
        .collect()
}

pub(crate) fn join_labels(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_identity_labels_are_emptied_on_the_container_with_a_warning() {
        struct Quiet;
        impl Reporter for Quiet {
            fn report(&self, _: Event) {}
        }
        let image = ImageInfo {
            labels: BTreeMap::from([
                (
                    "devcontainer.local_folder".to_string(),
                    "/other".to_string(),
                ),
                ("devcell.feature_digests".to_string(), "{}".to_string()),
                (METADATA_LABEL.to_string(), "[]".to_string()),
                (
                    "org.opencontainers.image.title".to_string(),
                    "x".to_string(),
                ),
            ]),
            ..ImageInfo::default()
        };
        let mut spec = crate::engine::ContainerSpec::default();
        spec.labels
            .insert("devcontainer.local_folder".into(), "/mine".into());
        let mut warnings = Vec::new();
        neutralise_image_identity_labels(&image, &mut spec, &mut warnings, &Quiet);
        // devcell's own value stays; the image's other identity label is emptied; the
        // metadata label and labels outside the namespaces are inherited as they are.
        assert_eq!(spec.labels["devcontainer.local_folder"], "/mine");
        assert_eq!(spec.labels["devcell.feature_digests"], "");
        assert!(!spec.labels.contains_key(METADATA_LABEL));
        assert!(!spec.labels.contains_key("org.opencontainers.image.title"));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].message.contains("`devcell.feature_digests`"));
    }

    #[test]
    fn passwd_entries_by_name_or_uid() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nbad line\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
        let nobody = passwd_account(passwd, "nobody").unwrap();
        assert_eq!(
            (nobody.uid, nobody.gid, nobody.home.as_str()),
            (65534, 65534, "/nonexistent")
        );
        assert_eq!(passwd_account(passwd, "0:0").unwrap().home, "/root");
        assert_eq!(passwd_account(passwd, "agent"), None);
    }

    #[test]
    fn remote_env_layers_and_null_unsets() {
        let probed: HookEnv = [("PATH", "/bin"), ("X", "probe")].into_iter().collect();
        let cli = IndexMap::from([
            ("X".to_string(), "cli".to_string()),
            ("Y".into(), "cli".into()),
        ]);
        let merged = json!({"remoteEnv": {"Y": "config", "PATH": null}});
        let env = remote_env(probed, &cli, &merged);
        assert_eq!(env.0.get("X").map(String::as_str), Some("cli"));
        assert_eq!(env.0.get("Y").map(String::as_str), Some("config"));
        assert!(!env.0.contains_key("PATH"));
    }

    #[test]
    fn origins_name_features_image_and_config() {
        let entries = vec![
            json!({"capAdd": ["SYS_ADMIN"]}),
            json!({"id": "./f", "capAdd": ["CAP_SYS_PTRACE"], "privileged": true}),
            json!({"mounts": ["type=bind,source=/data,target=/data"], "remoteUser": "me"}),
        ];
        let o = origins(&entries, &["type=volume,source=x,target=/x".into()]);
        assert_eq!(o.capabilities["SYS_ADMIN"], Source::ImageMetadata);
        assert_eq!(o.capabilities["SYS_PTRACE"], Source::Feature("./f".into()));
        assert_eq!(o.privileged, Some(Source::Feature("./f".into())));
        assert_eq!(o.mounts["/data"], Source::DevcontainerJson);
        assert_eq!(o.mounts["/x"], Source::CommandLine);
        assert_eq!(o.remote_user, Some(Source::DevcontainerJson));
    }

    #[test]
    fn security_choice_combines_settings_and_flags() {
        let mut settings = Settings::default();
        settings.security.allow = vec!["cap:NET_ADMIN".into()];
        let opts = SecurityOptions {
            allow: vec!["root".into()],
            pids_limit: Some(64),
            ..SecurityOptions::default()
        };
        let (profile, grants) = security_choice(&opts, &settings).unwrap();
        let SecurityProfile::Hardened(limits) = profile else {
            panic!("hardened by default")
        };
        assert_eq!(limits.pids, 64);
        assert_eq!(limits.memory_bytes, 4 << 30);
        assert!(grants.root && grants.capabilities.contains("NET_ADMIN"));
        let reference = SecurityOptions {
            profile: Some("reference".into()),
            ..SecurityOptions::default()
        };
        assert_eq!(
            security_choice(&reference, &settings).unwrap().0.name(),
            "reference"
        );
        let bad = SecurityOptions {
            allow: vec!["everything".into()],
            ..SecurityOptions::default()
        };
        assert!(security_choice(&bad, &settings).is_err());
    }

    #[test]
    fn limits_come_from_flags_then_settings_and_bad_values_are_refused() {
        let settings = Settings::default();
        let defaults = limits(&SecurityOptions::default(), &settings).unwrap();
        assert_eq!(defaults, ProfileLimits::default());
        let flags = SecurityOptions {
            pids_limit: Some(77),
            memory: Some("1g".into()),
            cpus: Some(1.5),
            ..SecurityOptions::default()
        };
        assert_eq!(
            limits(&flags, &settings).unwrap(),
            ProfileLimits {
                pids: 77,
                memory_bytes: 1 << 30,
                nano_cpus: 1_500_000_000
            }
        );
        let bytes = SecurityOptions {
            memory: Some("536870912".into()),
            ..SecurityOptions::default()
        };
        assert_eq!(limits(&bytes, &settings).unwrap().memory_bytes, 512 << 20);
        let bad = |opts: SecurityOptions, needle: &str| {
            let err = limits(&opts, &settings).unwrap_err();
            assert!(matches!(err, HandoffError::InvalidLimit { .. }), "{err}");
            assert_eq!(
                err.code(),
                crate::handoff::envelope::ErrorCode::InvalidArgument
            );
            assert!(err.to_string().contains(needle), "{err}");
        };
        for pids in [0, -1] {
            bad(
                SecurityOptions {
                    pids_limit: Some(pids),
                    ..SecurityOptions::default()
                },
                "--pids-limit",
            );
        }
        for memory in ["lots", "1x", "", "5m", "0"] {
            bad(
                SecurityOptions {
                    memory: Some(memory.into()),
                    ..SecurityOptions::default()
                },
                "--memory",
            );
        }
        for cpus in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.001, 5000.0] {
            bad(
                SecurityOptions {
                    cpus: Some(cpus),
                    ..SecurityOptions::default()
                },
                "--cpus",
            );
        }
        // the settings file is checked too
        let mut zero = Settings::default();
        zero.security.pids_limit = 0;
        assert!(limits(&SecurityOptions::default(), &zero).is_err());
        // and under `reference`, where the limits are not applied
        let reference = SecurityOptions {
            profile: Some("reference".into()),
            cpus: Some(0.0),
            ..SecurityOptions::default()
        };
        assert!(security_choice(&reference, &settings).is_err());
    }

    #[test]
    fn secrets_file_names_must_be_env_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        std::fs::write(&file, r#"{"A": "x", "B_2": ""}"#).unwrap();
        assert_eq!(read_secrets_file(&file).unwrap().len(), 2);
        for (text, needle) in [
            (r#"{"A=B": "v3ry-s3cret"}"#, "A=B"),
            (r#"{"": "v3ry-s3cret"}"#, "environment variable name"),
            (r#"{"A": "v3ry\u0000s3cret"}"#, "NUL"),
            (r#"{"A": 1}"#, "not a string"),
            (r#"["v3ry-s3cret"]"#, "JSON object"),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = read_secrets_file(&file).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
            assert!(!err.contains("v3ry"), "a value leaked: {err}");
        }
    }

    #[test]
    fn image_name_is_like_the_reference() {
        let name = image_name(Path::new("/w/My Repo"));
        assert!(name.starts_with("vsc-myrepo-"), "{name}");
        assert_eq!(name.len(), "vsc-myrepo-".len() + 64);
    }
}
