//! The typed `devcontainer.json` configuration: what [`super::validate()`] returns.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::{Map, Value};

/// Where the container comes from
/// ([spec: image, Dockerfile and Compose kinds](https://containers.dev/implementors/json_reference/#image-specific)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    /// `image`.
    Image,
    /// `build.dockerfile` or legacy `dockerFile`.
    Dockerfile,
    /// `dockerComposeFile` + `service`.
    Compose,
    /// No container source (only meaningful when attaching to an existing container).
    None,
}

/// A lifecycle hook command
/// ([spec: lifecycle scripts](https://containers.dev/implementors/json_reference/#lifecycle-scripts)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleCommand {
    /// Run with `/bin/sh -c`.
    Shell(String),
    /// Run as argv, without a shell.
    Exec(Vec<String>),
    /// Named entries run in parallel; each is a shell string or an argv.
    Parallel(IndexMap<String, ParallelEntry>),
}

/// One entry of the object form of a lifecycle hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParallelEntry {
    /// Run with `/bin/sh -c`.
    Shell(String),
    /// Run as argv, without a shell.
    Exec(Vec<String>),
}

/// The value of one `features` entry: a version string, `true`, or an options object.
#[derive(Debug, Clone, PartialEq)]
pub enum FeatureValue {
    /// `"1.18"`: shorthand for `{"version": "1.18"}`.
    Version(String),
    /// `true`/`false` (accepted by the reference CLI; `true` means default options).
    Enabled(bool),
    /// Option values by option id (strings or booleans per spec; other values are kept).
    Options(Map<String, Value>),
}

/// One `forwardPorts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardPort {
    /// A port of the primary container, 0-65535.
    Port(u16),
    /// `"host:port"`: a port of another compose service (or a value with a variable).
    HostPort(String),
}

/// One `appPort` entry: a number (published on `127.0.0.1`) or a Docker `-p` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppPort {
    /// `N` ⇒ `-p 127.0.0.1:N:N`.
    Port(u16),
    /// Passed to Docker unchanged.
    Spec(String),
}

/// One `mounts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// Docker `--mount` CSV syntax, kept verbatim.
    String(String),
    /// `{type, source?, target}`.
    Object(MountObject),
}

/// The object form of a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountObject {
    /// `bind` or `volume`.
    pub kind: String,
    /// Host path or volume name.
    pub source: Option<String>,
    /// Path in the container.
    pub target: String,
}

/// `build` (plus legacy top-level `dockerFile`/`context`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildOptions {
    /// Dockerfile path, relative to the folder of devcontainer.json.
    pub dockerfile: Option<String>,
    /// Build context, relative to the folder of devcontainer.json.
    pub context: Option<String>,
    /// `--build-arg` pairs.
    pub args: IndexMap<String, String>,
    /// Extra build CLI arguments.
    pub options: Vec<String>,
    /// Multi-stage target.
    pub target: Option<String>,
    /// `--cache-from` images.
    pub cache_from: Vec<String>,
}

/// `hostRequirements` ([spec](https://containers.dev/implementors/json_reference/#min-host-reqs)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRequirements {
    /// Minimum CPUs (≥ 1).
    pub cpus: Option<u64>,
    /// Minimum memory, e.g. `4gb` (units are powers of 1024).
    pub memory: Option<String>,
    /// Minimum storage, e.g. `32gb`.
    pub storage: Option<String>,
    /// GPU requirement.
    pub gpu: Option<GpuRequirement>,
}

/// `hostRequirements.gpu`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuRequirement {
    /// `true`/`false`.
    Required(bool),
    /// `"optional"`.
    Optional,
    /// `{cores?, memory?}`.
    Detailed {
        /// Minimum GPU cores.
        cores: Option<u64>,
        /// Minimum GPU memory.
        memory: Option<String>,
    },
}

/// A `portsAttributes` value or `otherPortsAttributes`
/// ([spec](https://containers.dev/implementors/json_reference/#port-attributes)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortAttributes {
    /// Display name.
    pub label: Option<String>,
    /// `http` or `https`.
    pub protocol: Option<String>,
    /// `notify`, `openBrowser`, `openBrowserOnce`, `openPreview`, `silent` or `ignore`.
    pub on_auto_forward: Option<String>,
    /// Require the same local port.
    pub require_local_port: Option<bool>,
    /// Elevate for privileged local ports.
    pub elevate_if_needed: Option<bool>,
}

/// A `secrets` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretInfo {
    /// What the secret is for.
    pub description: Option<String>,
    /// Where to learn more.
    pub documentation_url: Option<String>,
}

/// Every property of `devContainer.base.schema.json`, typed. Absent properties are `None` or
/// empty. `unknown` holds properties the schema does not define (kept, with a warning).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevContainerConfig {
    /// `name`.
    pub name: Option<String>,
    /// `image`.
    pub image: Option<String>,
    /// `build`, with legacy top-level `dockerFile`/`context` folded in.
    pub build: Option<BuildOptions>,
    /// `dockerComposeFile` (a single string becomes one element).
    pub docker_compose_file: Option<Vec<String>>,
    /// `service`.
    pub service: Option<String>,
    /// `runServices`.
    pub run_services: Option<Vec<String>>,
    /// `workspaceFolder`.
    pub workspace_folder: Option<String>,
    /// `workspaceMount`.
    pub workspace_mount: Option<String>,
    /// `features`, in the author's order.
    pub features: IndexMap<String, FeatureValue>,
    /// `overrideFeatureInstallOrder`.
    pub override_feature_install_order: Option<Vec<String>>,
    /// `secrets`.
    pub secrets: IndexMap<String, SecretInfo>,
    /// `forwardPorts`.
    pub forward_ports: Vec<ForwardPort>,
    /// `portsAttributes`.
    pub ports_attributes: IndexMap<String, PortAttributes>,
    /// `otherPortsAttributes`.
    pub other_ports_attributes: Option<PortAttributes>,
    /// `appPort`.
    pub app_port: Vec<AppPort>,
    /// `containerEnv`.
    pub container_env: IndexMap<String, String>,
    /// `remoteEnv` (`None` values: `null` in the file).
    pub remote_env: IndexMap<String, Option<String>>,
    /// `remoteUser`.
    pub remote_user: Option<String>,
    /// `containerUser`.
    pub container_user: Option<String>,
    /// `updateRemoteUserUID`.
    pub update_remote_user_uid: Option<bool>,
    /// `userEnvProbe`.
    pub user_env_probe: Option<String>,
    /// `overrideCommand`.
    pub override_command: Option<bool>,
    /// `shutdownAction`.
    pub shutdown_action: Option<String>,
    /// `init`.
    pub init: Option<bool>,
    /// `privileged`.
    pub privileged: Option<bool>,
    /// `capAdd`.
    pub cap_add: Vec<String>,
    /// `securityOpt`.
    pub security_opt: Vec<String>,
    /// `mounts`.
    pub mounts: Vec<Mount>,
    /// `runArgs`.
    pub run_args: Vec<String>,
    /// `customizations`, opaque.
    pub customizations: Option<Map<String, Value>>,
    /// `hostRequirements`.
    pub host_requirements: Option<HostRequirements>,
    /// `initializeCommand`.
    pub initialize_command: Option<LifecycleCommand>,
    /// `onCreateCommand`.
    pub on_create_command: Option<LifecycleCommand>,
    /// `updateContentCommand`.
    pub update_content_command: Option<LifecycleCommand>,
    /// `postCreateCommand`.
    pub post_create_command: Option<LifecycleCommand>,
    /// `postStartCommand`.
    pub post_start_command: Option<LifecycleCommand>,
    /// `postAttachCommand`.
    pub post_attach_command: Option<LifecycleCommand>,
    /// `waitFor`.
    pub wait_for: Option<String>,
    /// Legacy top-level `extensions` (moved to `customizations.vscode` by
    /// [`migrate_legacy`](super::migrate_legacy)).
    pub extensions: Option<Vec<String>>,
    /// Legacy top-level `settings`.
    pub settings: Option<Map<String, Value>>,
    /// Legacy top-level `devPort`.
    pub dev_port: Option<u64>,
    /// Properties the schema does not define, kept as written.
    pub unknown: Map<String, Value>,
}

impl DevContainerConfig {
    /// The config's kind: `build.dockerfile`/`dockerFile` ⇒ Dockerfile, `image` ⇒ image,
    /// `dockerComposeFile` ⇒ compose (the reference CLI's order).
    pub fn kind(&self) -> ConfigKind {
        if self.build.as_ref().is_some_and(|b| b.dockerfile.is_some()) {
            ConfigKind::Dockerfile
        } else if self.image.is_some() {
            ConfigKind::Image
        } else if self.docker_compose_file.is_some() {
            ConfigKind::Compose
        } else {
            ConfigKind::None
        }
    }
}

impl DevContainerConfig {
    /// The Dockerfile of a Dockerfile config, resolved against the folder of `config_file`
    /// ([spec: `build.dockerfile`](https://containers.dev/implementors/json_reference/#image-specific)).
    pub fn dockerfile_path(&self, config_file: &Path) -> Option<PathBuf> {
        let dockerfile = self.build.as_ref()?.dockerfile.as_ref()?;
        Some(config_dir(config_file).join(dockerfile))
    }

    /// The build context of a Dockerfile config: `build.context` (or legacy `context`)
    /// resolved against the folder of `config_file`; without one, the Dockerfile's folder (the
    /// reference CLI's default; the spec text says `"."`, which is the same folder when the
    /// Dockerfile sits next to devcontainer.json — see `spec-notes/0005-build-context-default.md`).
    pub fn context_path(&self, config_file: &Path) -> Option<PathBuf> {
        let build = self.build.as_ref()?;
        match &build.context {
            Some(context) => Some(config_dir(config_file).join(context)),
            None => self
                .dockerfile_path(config_file)
                .map(|d| d.parent().map(Path::to_path_buf).unwrap_or_default()),
        }
    }

    /// The compose files of a compose config, resolved against the folder of `config_file`,
    /// in the order written (later files override earlier ones)
    /// ([spec: `dockerComposeFile`](https://containers.dev/implementors/json_reference/#compose-specific)).
    pub fn compose_files(&self, config_file: &Path) -> Vec<PathBuf> {
        let dir = config_dir(config_file);
        self.docker_compose_file
            .iter()
            .flatten()
            .map(|f| dir.join(f))
            .collect()
    }
}

fn config_dir(config_file: &Path) -> &Path {
    config_file.parent().unwrap_or(Path::new("/"))
}
