//! Errors of the operations (`ops`) and, through [`ProductError`], of the agent product
//! (`handoff`) above them: one error type, so every command renders one envelope.

use crate::config::ConfigError;
use crate::diagnostics::{Hint, SourceLocation};
use crate::engine::EngineError;
use crate::lifecycle::LifecycleError;
use crate::security::{Permission, RequestStatus, SecurityError};
use crate::settings::SettingsError;

/// `Result` with [`OpsError`].
pub type Result<T, E = OpsError> = std::result::Result<T, E>;

/// An operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The dev container configuration could not be found, read or validated.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The workspace folder does not exist or is not a directory. The message starts as the
    /// reference CLI's does (`Dev container config (…) not found.`, which tools match on;
    /// spec-note 0454), naming the first default location under the folder.
    #[error(
        "Dev container config ({}) not found. The workspace folder `{}` is not a directory",
        path.join(".devcontainer").join("devcontainer.json").display(),
        path.display()
    )]
    WorkspaceFolder {
        /// The folder given.
        path: std::path::PathBuf,
    },
    /// The container engine failed or refused a request.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The user settings file could not be read.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The Compose CLI could not be found or a Compose command failed (Compose
    /// configurations).
    #[error(transparent)]
    Compose(#[from] crate::engine::compose::ComposeError),
    /// A lifecycle hook failed (or could not be run) in the container `container_id`. When the
    /// engine could not be reached mid-way, the message ends with that engine error.
    #[error("{}", lifecycle_message(source))]
    Lifecycle {
        /// The dev container, left in place for inspection (empty for `initializeCommand`).
        container_id: String,
        /// What failed.
        #[source]
        source: LifecycleError,
    },
    /// The configuration asks for something devcell does not do (compose, an unmappable
    /// `build.options` flag, a malformed property value).
    #[error("{message}")]
    Unsupported {
        /// What is unsupported, naming the property or flag.
        message: String,
        /// How to get on.
        hint: Option<String>,
    },
    /// The security policy refused the configuration (nothing was created), or a grant is
    /// invalid.
    #[error(transparent)]
    Security(#[from] SecurityError),
    /// A Feature could not be resolved, fetched or ordered.
    #[error(transparent)]
    Feature(#[from] crate::features::FeatureError),
    /// The Feature cache or registry client could not be set up.
    #[error(transparent)]
    Fetch(#[from] crate::features::fetch::FetchError),
    /// `features test`: the collection is not as the flags say.
    #[error(transparent)]
    FeaturesTest(#[from] crate::features::test::TestError),
    /// A Template could not be fetched or applied (`templates apply`, `templates metadata`).
    #[error(transparent)]
    Template(#[from] crate::templates::TemplateError),
    /// The Features image could not be planned or built (a failing `install.sh`).
    #[error(transparent)]
    Build(#[from] crate::build::BuildError),
    /// The `--secrets-file` could not be read or is not a JSON object of strings.
    #[error("cannot use secrets file `{}`: {message}", path.display())]
    SecretsFile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No dev container has the labels (`exec`, `run-user-commands`), or
    /// `--expect-existing-container` was given and there is none.
    #[error("{} (labels {labels})", if *expected { "the expected container does not exist" } else { "no dev container found" })]
    NoContainer {
        /// The labels looked for, `k=v` joined by `,`.
        labels: String,
        /// `--expect-existing-container` was given: only then does the hint name it.
        expected: bool,
    },
    /// The dev container exists but is not running (for `exec`).
    #[error("dev container `{id}` is not running")]
    NotRunning {
        /// The container id.
        id: String,
    },
    /// The agent product failed: the context file (or `AGENTS.md`) could not be written, the
    /// host-side handoff state failed, or a session is already live.
    #[error(transparent)]
    Product(ProductFailure),
    /// `--agent` names no `[agents.NAME]` of the user settings.
    #[error("no agent `{name}` in devcell's config {config} (agents: {})", if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    UnknownAgent {
        /// The name given.
        name: String,
        /// The config file read (`` `PATH` ``), or `` `PATH` (not found) `` for the default
        /// location when it does not exist.
        config: String,
        /// The agents configured.
        available: Vec<String>,
    },
    /// An agent setting is unusable (empty command, a bad secret reference, a missing host
    /// variable).
    #[error("agent `{agent}`: {message}")]
    AgentConfig {
        /// The agent.
        agent: String,
        /// What is wrong (never a secret value).
        message: String,
    },
    /// Neither the primary repository nor the workspace root has a dev container configuration.
    #[error("no dev container configuration in `{}` (looked in the primary repository and the workspace root)", root.display())]
    NoConfiguration {
        /// The workspace root.
        root: std::path::PathBuf,
    },
    /// No environment record is kept for what was asked (spec-note 0520).
    #[error("no environment record for {what}")]
    NoEnvironment {
        /// The workspace or session asked for.
        what: String,
    },
    /// The workspace's configuration or an input no longer matches the environment record
    /// given (`--environment FILE`, spec-note 0520): nothing was created.
    #[error(
        "the environment no longer matches the record `{}`: {}",
        record.display(),
        differences.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    EnvironmentDrift {
        /// The record's file.
        record: std::path::PathBuf,
        /// Each difference.
        differences: Vec<Difference>,
    },
    /// A Feature the `--environment` record pins cannot be fetched at its recorded digest
    /// (its registry and the Feature cache no longer have it, spec-note 0520): the record
    /// cannot be recreated, and nothing was created.
    #[error(
        "cannot recreate the environment of the record `{}`: Feature `{feature}` is not available at its recorded digest `{digest}`",
        record.display()
    )]
    RecordedFeatureGone {
        /// The record's file.
        record: std::path::PathBuf,
        /// The Feature's lock key.
        feature: String,
        /// The recorded digest.
        digest: String,
        /// Why it could not be fetched (the registry's answer).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `handoff --container NAME` names a container the handoff cannot use (spec-note 0521):
    /// not found, not devcell's, another workspace's, another profile's or configuration's.
    #[error("cannot hand off to the container `{container}`: {reason}")]
    NamedContainer {
        /// The name or id given.
        container: String,
        /// Whether the engine has it.
        found: bool,
        /// Why it cannot be used.
        reason: String,
        /// What to do instead.
        hint: String,
    },
    /// The audit input could not be read (not a container, bad probe output).
    #[error(transparent)]
    Audit(#[from] crate::security::audit::AuditError),
    /// The container to audit does not exist (or the workspace has none).
    #[error("{}", match workspace {
        Some(w) => format!("no dev container of workspace `{}` to audit", w.display()),
        None => format!("no container `{id}` to audit"),
    })]
    NoSuchContainer {
        /// The name or id given (empty when looked up by workspace).
        id: String,
        /// `--workspace-folder`, when the container was looked up by workspace.
        workspace: Option<std::path::PathBuf>,
    },
    /// Packaging or publishing Features failed.
    #[error(transparent)]
    Publish(#[from] crate::features::publish::PublishError),
    /// `generate-docs` could not read the project folder or write a `README.md`.
    #[error("cannot generate docs in `{}`: {reason}", path.display())]
    GenerateDocs {
        /// The folder or item involved.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// The egress channel (`--network allowlist`) could not be set up: a bad entry, the
    /// forwarder, the socket folder or the host-side proxy.
    #[error(transparent)]
    Egress(#[from] crate::egress::EgressError),
    /// The async runtime could not be started.
    #[error("cannot start the async runtime")]
    Runtime {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The agent could not be started on the host (`handoff --runtime host`).
    #[error("cannot start agent `{agent}` on the host: `{program}`: {source}")]
    AgentStart {
        /// The agent.
        agent: String,
        /// Its program (`command[0]`).
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--additional-features` is not a JSON object.
    #[error("invalid `--additional-features`: {message}")]
    AdditionalFeatures {
        /// What is wrong.
        message: String,
    },
    /// A resource limit (`--pids-limit`, `--memory`, `--cpus`, or `[security]` in devcell's
    /// config) is out of range or malformed.
    #[error(transparent)]
    InvalidLimit(crate::security::InvalidLimit),
    /// A step after `up` created the container failed (start, inspect): the error as it is,
    /// with the container, left in place for its logs or removal (the reference CLI's
    /// `containerId` in the error result).
    #[error(transparent)]
    InContainer(Box<InContainer>),
    /// An error whose text contained a secret value, shown with every value masked
    /// (`********`); `message` is the whole cause chain ([`crate::ops::secrets::redact`]).
    #[error("{message}")]
    Redacted {
        /// The original error's code.
        code: crate::diagnostics::ErrorCode,
        /// The original message and causes, masked.
        message: String,
        /// The original hint, masked.
        hint: Option<String>,
    },
}

/// An error of the agent product (`handoff`) with what the envelope needs of it; `handoff`
/// converts its errors into [`OpsError::Product`], so the operations need not know their
/// types.
pub trait ProductError: std::error::Error + Send + Sync + 'static {
    /// The envelope error code.
    fn code(&self) -> crate::diagnostics::ErrorCode;
    /// The envelope `details` (`{}` unless the error has some).
    fn details(&self) -> serde_json::Value {
        serde_json::json!({})
    }
    /// How to fix it, when known.
    fn hint(&self) -> Option<String>;
    /// Commands that get the user on, as `(description, argv)` (the envelope's
    /// `next_actions`); none unless the error has some.
    fn next_actions(&self) -> Vec<(String, Vec<String>)> {
        Vec::new()
    }
}

/// [`OpsError::Product`]'s content: displays and chains as the product's error.
#[derive(Debug)]
pub struct ProductFailure(pub Box<dyn ProductError>);

impl std::fmt::Display for ProductFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ProductFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl<E: ProductError> From<E> for OpsError {
    fn from(error: E) -> Self {
        OpsError::Product(ProductFailure(Box::new(error)))
    }
}

/// [`OpsError::InContainer`]'s content: displays and chains as `error`.
#[derive(Debug)]
pub struct InContainer {
    /// The container `up` created.
    pub container_id: String,
    /// What failed.
    pub error: OpsError,
}

impl std::fmt::Display for InContainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for InContainer {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// The [`EngineError::NotRunning`] in `source`'s chain: the hook could not run (or its result
/// could not be read) because the engine went away.
pub fn engine_lost(source: &LifecycleError) -> Option<&EngineError> {
    let mut cur = std::error::Error::source(source);
    while let Some(e) = cur {
        if let Some(engine) = e.downcast_ref::<EngineError>()
            && matches!(engine, EngineError::NotRunning { .. })
        {
            return Some(engine);
        }
        cur = e.source();
    }
    None
}

fn lifecycle_message(source: &LifecycleError) -> String {
    match engine_lost(source) {
        Some(engine) => format!("{source}: {engine}"),
        None => source.to_string(),
    }
}

/// A choice that cannot be resolved keeps the error it always had: a bad limit is
/// [`OpsError::InvalidLimit`], an unknown grant [`OpsError::Security`].
impl From<crate::security::ChoiceError> for OpsError {
    fn from(e: crate::security::ChoiceError) -> Self {
        match e {
            crate::security::ChoiceError::InvalidLimit(e) => OpsError::InvalidLimit(e),
            crate::security::ChoiceError::Security(e) => OpsError::Security(e),
        }
    }
}

impl OpsError {
    /// This error, naming the container `up` created before it happened
    /// ([`OpsError::InContainer`]); an error that names one already is kept as it is.
    pub fn in_container(self, container_id: &str) -> OpsError {
        if self.container_id().is_some() {
            return self;
        }
        OpsError::InContainer(Box::new(InContainer {
            container_id: container_id.to_string(),
            error: self,
        }))
    }

    /// The `--format json` envelope error code of this error (spec-notes/0163).
    pub fn code(&self) -> crate::diagnostics::ErrorCode {
        use crate::diagnostics::ErrorCode;
        match self {
            OpsError::InContainer(e) => e.error.code(),
            OpsError::Config(_) | OpsError::Settings(_) | OpsError::Feature(_) => {
                ErrorCode::ConfigInvalid
            }
            OpsError::Unsupported { .. } | OpsError::AgentConfig { .. } => ErrorCode::ConfigInvalid,
            OpsError::WorkspaceFolder { .. }
            | OpsError::NoContainer { .. }
            | OpsError::NotRunning { .. }
            | OpsError::UnknownAgent { .. }
            | OpsError::NoConfiguration { .. }
            | OpsError::NoEnvironment { .. }
            | OpsError::NoSuchContainer { .. } => ErrorCode::NotFound,
            OpsError::NamedContainer { found: false, .. } => ErrorCode::NotFound,
            OpsError::NamedContainer { found: true, .. } => ErrorCode::InvalidArgument,
            OpsError::EnvironmentDrift { .. } | OpsError::RecordedFeatureGone { .. } => {
                ErrorCode::EnvironmentDrift
            }
            OpsError::Compose(crate::engine::compose::ComposeError::NotFound { .. })
            | OpsError::Compose(crate::engine::compose::ComposeError::V1 { .. }) => {
                ErrorCode::EngineUnavailable
            }
            OpsError::Compose(_) => ErrorCode::ContainerFailed,
            OpsError::Engine(e) => match e {
                EngineError::NotRunning { .. } | EngineError::UnsupportedHost { .. } => {
                    ErrorCode::EngineUnavailable
                }
                EngineError::Build { .. }
                | EngineError::BuildContext { .. }
                | EngineError::Dockerignore { .. }
                | EngineError::Pull { .. }
                | EngineError::InvalidReference { .. }
                | EngineError::UnsupportedBuildOption { .. }
                | EngineError::InvalidBuildOption { .. } => ErrorCode::BuildFailed,
                EngineError::UnsupportedRunArg { .. }
                | EngineError::InvalidRunArg { .. }
                | EngineError::InvalidMount { .. } => ErrorCode::ConfigInvalid,
                EngineError::NoSuchContainer { .. } => ErrorCode::NotFound,
                _ => ErrorCode::ContainerFailed,
            },
            OpsError::Lifecycle { source, .. } if engine_lost(source).is_some() => {
                ErrorCode::EngineUnavailable
            }
            OpsError::Lifecycle { .. } => ErrorCode::HookFailed,
            OpsError::Security(
                SecurityError::Refused { .. }
                | SecurityError::ReuseRefused { .. }
                | SecurityError::SetUpRefused { .. }
                | SecurityError::PathOutside { .. }
                | SecurityError::UncoveredGit { .. }
                | SecurityError::ForeignWriter { .. },
            ) => ErrorCode::PermissionRequired,
            OpsError::Security(SecurityError::MountMismatch { .. }) => ErrorCode::ContainerFailed,
            OpsError::Security(_) => ErrorCode::ConfigInvalid,
            OpsError::SecretsFile { .. }
            | OpsError::AdditionalFeatures { .. }
            | OpsError::InvalidLimit(_) => ErrorCode::InvalidArgument,
            OpsError::Redacted { code, .. } => *code,
            OpsError::Product(e) => e.0.code(),
            OpsError::Audit(_) => ErrorCode::InvalidArgument,
            OpsError::Egress(crate::egress::EgressError::Entry { .. }) => {
                ErrorCode::InvalidArgument
            }
            OpsError::Egress(_) => ErrorCode::Internal,
            OpsError::Publish(_) | OpsError::Fetch(_) | OpsError::Build(_) => {
                ErrorCode::BuildFailed
            }
            OpsError::GenerateDocs { .. } | OpsError::FeaturesTest(_) => ErrorCode::ConfigInvalid,
            OpsError::Template(e) => match e {
                crate::templates::TemplateError::InvalidFlag { .. }
                | crate::templates::TemplateError::InvalidOption { .. } => {
                    ErrorCode::InvalidArgument
                }
                crate::templates::TemplateError::Oci { .. }
                | crate::templates::TemplateError::Push { .. } => ErrorCode::BuildFailed,
                _ => ErrorCode::ConfigInvalid,
            },
            OpsError::Runtime { .. } => ErrorCode::Internal,
            OpsError::AgentStart { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => ErrorCode::NotFound,
                _ => ErrorCode::Internal,
            },
        }
    }

    /// The envelope `details` of this error: the live session for `session_active`, the
    /// container for a failed hook, every permission request (`{"permissions": […]}`, each
    /// with its status and the `--allow` flag that grants it) for `permission_required`, else
    /// `{}`.
    pub fn details(&self) -> serde_json::Value {
        match self {
            OpsError::InContainer(e) => {
                let mut details = e.error.details();
                if let Some(map) = details.as_object_mut() {
                    map.insert("containerId".into(), e.container_id.clone().into());
                }
                details
            }
            OpsError::Product(e) => e.0.details(),
            OpsError::Security(
                SecurityError::Refused { requests, .. }
                | SecurityError::ReuseRefused { requests, .. }
                | SecurityError::SetUpRefused { requests, .. },
            ) => serde_json::json!({ "permissions": requests }),
            OpsError::Security(SecurityError::UncoveredGit { items, .. }) => serde_json::json!({
                "uncovered": items.iter().map(|u| serde_json::json!({
                    "path": u.rel,
                    "why": u.why.to_string(),
                    "grant": u.grant(),
                })).collect::<Vec<_>>()
            }),
            OpsError::Security(SecurityError::ForeignWriter { containers, .. }) => {
                serde_json::json!({ "containers": containers })
            }
            OpsError::Lifecycle { container_id, .. } if !container_id.is_empty() => {
                serde_json::json!({ "containerId": container_id })
            }
            OpsError::EnvironmentDrift { differences, .. } => {
                serde_json::json!({ "differences": differences })
            }
            OpsError::NamedContainer { container, .. } => {
                serde_json::json!({ "container": container })
            }
            OpsError::RecordedFeatureGone {
                feature, digest, ..
            } => {
                serde_json::json!({ "feature": feature, "digest": digest })
            }
            _ => serde_json::json!({}),
        }
    }

    /// The commands that get the user on after this error, as `(description, argv)`
    /// ([`ProductError::next_actions`]); none for most errors.
    pub fn next_actions(&self) -> Vec<(String, Vec<String>)> {
        match self {
            OpsError::InContainer(e) => e.error.next_actions(),
            OpsError::Product(e) => e.0.next_actions(),
            _ => Vec::new(),
        }
    }

    /// The source location of a config error, for rendering the offending line.
    pub fn location(&self) -> Option<&SourceLocation> {
        match self {
            OpsError::InContainer(e) => e.error.location(),
            OpsError::Config(e) => e.location(),
            _ => None,
        }
    }

    /// The container concerned by a failure, when one exists (the reference CLI reports it in
    /// the error result).
    pub fn container_id(&self) -> Option<&str> {
        match self {
            OpsError::InContainer(e) => Some(&e.container_id),
            OpsError::Lifecycle { container_id, .. } if !container_id.is_empty() => {
                Some(container_id)
            }
            _ => None,
        }
    }
}

impl Hint for OpsError {
    fn hint(&self) -> Option<String> {
        match self {
            OpsError::InContainer(e) => e.error.hint(),
            OpsError::Config(e) => e.hint(),
            OpsError::WorkspaceFolder { .. } => {
                Some("pass an existing folder with `--workspace-folder`".into())
            }
            OpsError::Engine(e) => e.hint(),
            OpsError::Compose(e) => e.hint(),
            OpsError::Settings(_) => None,
            OpsError::Lifecycle { source, .. } => match engine_lost(source) {
                Some(engine) => engine.hint(),
                None => source.hint(),
            },
            OpsError::Unsupported { hint, .. } => hint.clone(),
            OpsError::Security(e) => {
                let mut hint = e.hint().unwrap_or_default();
                if let SecurityError::Refused { requests, .. } = e
                    && requests.iter().any(|r| {
                        r.permission == Permission::Root && r.status == RequestStatus::Refused
                    })
                {
                    hint.push_str(
                        "; to run as a non-root user instead, set a non-root `remoteUser` or `containerUser` in devcontainer.json, or name no user at all: devcell then provides its own non-root user for an image that runs as root (or add devcell's `agent-user` Feature, `features/src/agent-user` in its source, as a local Feature)",
                    );
                }
                (!hint.is_empty()).then_some(hint)
            }
            OpsError::Build(e) => e.hint(),
            OpsError::Feature(e) => e.hint(),
            OpsError::Fetch(e) => e.hint(),
            OpsError::FeaturesTest(_) => None,
            OpsError::Template(e) => e.hint(),
            OpsError::SecretsFile { .. } => {
                Some("the secrets file is a JSON object mapping names to string values".into())
            }
            // Hints name only flags the user gave or can give (spec-note 0455).
            OpsError::NoContainer { expected: true, .. } => {
                Some("run `devcell up` first, or drop `--expect-existing-container`".into())
            }
            OpsError::NoContainer { expected: false, .. } => Some(
                "run `devcell up` first, or name the container with `--container-id`".into(),
            ),
            OpsError::NotRunning { .. } => Some("run `devcell up` to start it".into()),
            OpsError::NoEnvironment { .. } => Some(
                "`devcell up`, `devcell build` and `devcell handoff` record one".into(),
            ),
            OpsError::EnvironmentDrift { .. } => Some(
                "restore the recorded inputs, or pass `--allow-drift` to go on with warnings".into(),
            ),
            OpsError::NamedContainer { hint, .. } => Some(hint.clone()),
            OpsError::RecordedFeatureGone { .. } => Some(
                "the registry (or its mirror) no longer serves that digest and the Feature cache does not hold it: push it back, point `--cache-dir` at a cache that holds it, or drop `--environment` to resolve the tags afresh (and record again)".into(),
            ),
            OpsError::Product(e) => e.0.hint(),
            OpsError::UnknownAgent { name, .. } => Some(format!(
                "add `[agents.{name}]` with `command = [\"…\"]` to devcell's config.toml (or pass `--config-file`)"
            )),
            OpsError::AgentConfig { .. } => {
                Some("fix the agent's entry in devcell's config.toml".into())
            }
            OpsError::NoConfiguration { .. } => Some(
                "add `.devcontainer/devcontainer.json` to the primary repository (or the workspace root), or choose the repository that has one with `--primary`".into(),
            ),
            OpsError::Audit(_) => None,
            OpsError::Egress(_) => None,
            OpsError::NoSuchContainer {
                workspace: Some(w), ..
            } => Some(format!(
                "create it with `devcell up --workspace-folder {}` (or `devcell handoff`), or pass a container name or id from `docker ps -a` instead of `--workspace-folder`",
                w.display()
            )),
            OpsError::NoSuchContainer { workspace: None, .. } => {
                Some("pass a container name or id from `docker ps -a`, or `--workspace-folder`".into())
            }
            OpsError::Publish(_) | OpsError::Runtime { .. } | OpsError::GenerateDocs { .. } => None,
            OpsError::InvalidLimit(_) => Some(
                "pass e.g. `--pids-limit 512`, `--memory 2g`, `--cpus 1.5` (or set `pids_limit`, `memory`, `cpus` under `[security]` in devcell's config.toml)".into(),
            ),
            OpsError::Redacted { hint, .. } => hint.clone(),
            OpsError::AgentStart { program, .. } => Some(format!(
                "install `{program}` on this host (it must be on `PATH` or an absolute path), or fix the agent's `command` in devcell's config.toml"
            )),
            OpsError::AdditionalFeatures { .. } => Some(
                "pass a JSON object like `features` in devcontainer.json, e.g. `{\"ghcr.io/devcontainers/features/git:1\": {}}`".into(),
            ),
        }
    }
}

/// Maps a lifecycle failure in `container_id` (empty: on the host) to
/// [`OpsError::Lifecycle`].
pub(crate) fn lifecycle_error(
    container_id: &str,
) -> impl Fn(crate::lifecycle::LifecycleError) -> OpsError {
    let container_id = container_id.to_string();
    move |source| OpsError::Lifecycle {
        container_id: container_id.clone(),
        source,
    }
}

/// One difference between a recorded environment and the current one (spec-note 0520; here,
/// below [`crate::ops::environment`], because [`OpsError::EnvironmentDrift`] carries it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// What differs, as a path into the record (`configuration.files.<path>`,
    /// `features.<key>`, `security.network`, …).
    pub field: String,
    /// The recorded value (`null`: absent).
    pub recorded: serde_json::Value,
    /// The current value (`null`: absent).
    pub current: serde_json::Value,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}`: recorded {}, now {}",
            self.field,
            short_value(&self.recorded),
            short_value(&self.current)
        )
    }
}

/// A value for a one-line message: strings bare, large values elided.
fn short_value(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "absent".into(),
        Value::String(s) => format!("`{s}`"),
        other => {
            let text = other.to_string();
            if text.chars().count() > 80 {
                "a different value".into()
            } else {
                text
            }
        }
    }
}

/// A registry, Feature or pull failure in one line (issue 28 item 5, spec-note 0653): when
/// `err`'s chain holds an [`crate::oci::OciError`] that says what failed, `top` (the error's
/// message) followed by what failed (`not found`, `unauthorised`, `no network to that
/// registry`, the offline cache's miss), and `hint`, else the registry's own hint.
pub fn registry_failure_line(
    top: &str,
    err: &(dyn std::error::Error + 'static),
    hint: Option<String>,
) -> Option<(String, Option<String>)> {
    let mut next = Some(err);
    let oci = std::iter::from_fn(|| {
        let current = next?;
        next = current.source();
        Some(current)
    })
    .find_map(|e| e.downcast_ref::<crate::oci::OciError>());
    let Some(oci) = oci else {
        return engine_pull_line(top, err, hint);
    };
    let failure = crate::oci::registry::registry_failure(oci)?;
    let hint = hint.or_else(|| crate::oci::registry::registry_hint(oci));
    let line = if top == oci.to_string() {
        failure
    } else {
        format!("{top}: {failure}")
    };
    Some((line, hint))
}

/// [`registry_failure_line`] for the engine's own pull ([`crate::engine::EngineError::Pull`],
/// found as itself or as [`OpsError::Engine`], which shows it transparently): the message with
/// what failed ([`crate::engine::error::pull_failure`]) and the pull's hint.
fn engine_pull_line(
    top: &str,
    err: &(dyn std::error::Error + 'static),
    hint: Option<String>,
) -> Option<(String, Option<String>)> {
    let mut next = Some(err);
    let pull = std::iter::from_fn(|| {
        let current = next?;
        next = current.source();
        Some(current)
    })
    .find_map(|e| match e.downcast_ref::<OpsError>() {
        Some(OpsError::Engine(engine)) => Some(engine),
        _ => e.downcast_ref::<EngineError>(),
    })?;
    let failure = crate::engine::error::pull_failure(pull)?;
    let message = pull.to_string();
    let line = if top == message {
        format!("{top}: {failure}")
    } else {
        format!("{top}: {message}: {failure}")
    };
    Some((line, hint.or_else(|| Hint::hint(pull))))
}
