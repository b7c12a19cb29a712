//! Options shared by the operations: which workspace and container (`TargetOptions`), the security
//! profile and grants, the image build, the uid update.

use crate::features::lockfile::LockfileMode;
use crate::lifecycle::{PlanOptions, UserEnvProbe};
use crate::settings::Settings;
use indexmap::IndexMap;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

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
    pub workspace_override: Option<crate::ops::load::WorkspaceOverride>,
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
    /// `--docker-compose-path`: the Compose v2 CLI for Compose configurations (`None`: the
    /// `docker compose` plugin, then `docker-compose`).
    pub docker_compose_path: Option<String>,
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

/// `--gpu-availability`: whether GPUs are there for a configuration that asks for one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuAvailability {
    /// GPUs are there (devcell checks that the engine shows one).
    All,
    /// Ask the engine (the default).
    #[default]
    Detect,
    /// No GPU for the container.
    None,
}

/// Security choices of the user (flags), resolved into a [`crate::security::Choice`].
pub use crate::security::SecurityOptions;

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
    /// `--dotfiles-repository` and its two flags: installed after `postCreateCommand`.
    pub dotfiles: Option<crate::lifecycle::Dotfiles>,
    /// `--include-configuration`.
    pub include_configuration: bool,
    /// `--include-merged-configuration`.
    pub include_merged_configuration: bool,
    /// `--remote-env NAME=VALUE` (repeatable; the config's `remoteEnv` wins).
    pub remote_env: IndexMap<String, String>,
    /// Secrets (`--secrets-file`): given to hooks as environment, masked in output.
    pub secrets: IndexMap<String, String>,
    /// `--mount` (repeatable): extra mounts, granted by being asked for on the command line;
    /// parsed once where they are given (the command line, a handoff's plan).
    pub mounts: Vec<crate::engine::Mount>,
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
    /// Host paths the command line's mounts hide (covered host path, the container target of
    /// what covers it): a handoff's repositories' `.git` and host git directories, covered by
    /// their container git directories; kept covered through every other bind under
    /// `hardened` ([`crate::security::host_path::keep_covered`], spec-note 0436).
    pub covers: Vec<(PathBuf, String)>,
    /// The workspace's git entries that are the user's, as `up` walked them before anything of
    /// the workspace ran ([`crate::ops::workspace_git::covered`]): recorded for the container
    /// as soon as it exists, before its first hook (attack P9: a hook that fails, or a devcell
    /// interrupted during the hooks, left a container no later command walked; spec-note 0466).
    /// `None`: nothing is recorded (not `hardened`, `--allow workspace-git:rw`, a handoff).
    pub git_baseline: Option<crate::security::git_baseline::Baseline>,
    /// Host folders devcell made for this container (a handoff's container git directories):
    /// their binds are not permission requests (spec-note 0436).
    pub owned_sources: Vec<PathBuf>,
    /// `--environment FILE`: the Feature digests the record pins, laid over the lockfile in
    /// every resolution (spec-note 0520).
    pub recorded_features: Option<RecordedFeatures>,
    /// `--gpu-availability all|detect|none` (default `detect`), settled against the engine
    /// before the configuration is judged ([`crate::ops::gpu::resolve`]).
    pub gpu_availability: GpuAvailability,
    /// The registry hosts this run's registry judgement cleared (committed or granted;
    /// [`crate::ops::permissions::judged_registries`], attack K12): under `hardened` with a
    /// closed network the only hosts Features are fetched from
    /// ([`crate::ops::entries::feature_fetcher`]; attack 23, N14). `None` until a judgement
    /// ran: then no Feature is fetched from any registry under a closed network.
    pub registry_hosts: Option<std::collections::BTreeSet<String>>,
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
    /// `--omit-config-remote-env-from-metadata`: the `devcontainer.json` entry of the
    /// `devcontainer.metadata` label (image or container) leaves out `remoteEnv` (values that
    /// may be secrets stay out of `docker inspect`); the hooks and `exec` still get them from
    /// the configuration (spec-note 0310).
    pub omit_config_remote_env: bool,
    /// `build --skip-persisting-customizations-from-features`: the Features' entries of the
    /// image's label leave out `customizations` (spec-note 0310).
    pub omit_feature_customizations: bool,
}

/// The Feature digests an environment record pins, and the record's file (for errors); built
/// and laid over the lockfile by `ops::environment::pins` (defined here, below it, so that the
/// options need not import the environment).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedFeatures {
    /// The record's file (`--environment FILE`).
    pub record: std::path::PathBuf,
    /// Lock key → the recorded digest, as lockfile entries.
    pub pins: crate::features::lockfile::Lockfile,
}

/// The command line's `--mount` values (Docker's `--mount` syntax) as typed mounts, parsed once
/// where they are given.
///
/// Errors: [`crate::ops::OpsError::Engine`] (`InvalidMount`) for one that does not parse.
pub fn parse_mounts(texts: &[String]) -> crate::ops::Result<Vec<crate::engine::Mount>> {
    texts
        .iter()
        .map(|m| crate::engine::run_args::parse_mount(m).map_err(Into::into))
        .collect()
}
