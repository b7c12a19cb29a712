//! The typed `devcontainer.json` model and its validation
//! ([spec: devcontainer.json reference](https://containers.dev/implementors/json_reference/),
//! schema `devContainer.base.schema.json`).
//!
//! [`validate`] checks a parsed [`Document`] against the schema's types and returns a
//! [`DevContainerConfig`] plus warnings. Every error is a located
//! [`ConfigError::Invalid`] (file, line, column, property path, what was expected, what was
//! found). Unknown properties are kept in the JSON value (and in
//! [`DevContainerConfig::unknown`]) with a warning; they are never dropped.
//!
//! Strings containing `${` are not checked against a pattern (mount syntax, `host:port`,
//! memory sizes): the variable may produce a valid value after substitution.
//!
//! [`migrate_legacy`] moves the legacy top-level `extensions`, `settings` and `devPort` into
//! `customizations.vscode`, as the reference CLI does.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::{Map, Value};

use crate::config::error::{ConfigError, Result};
use crate::config::jsonc::{Document, JsonPath};
use crate::diagnostics::Warning;

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
    /// Legacy top-level `extensions` (moved to `customizations.vscode` by [`migrate_legacy`]).
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

/// The lifecycle hook property names, in spec order.
pub const LIFECYCLE_HOOKS: [&str; 6] = [
    "initializeCommand",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
];

const USER_ENV_PROBE: &[&str] = &[
    "none",
    "interactiveShell",
    "loginShell",
    "loginInteractiveShell",
];
const SHUTDOWN_ACTION: &[&str] = &["none", "stopContainer", "stopCompose"];
const WAIT_FOR: &[&str] = &[
    "initializeCommand",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
];
const ON_AUTO_FORWARD: &[&str] = &[
    "notify",
    "openBrowser",
    "openBrowserOnce",
    "openPreview",
    "silent",
    "ignore",
];
const PROTOCOL: &[&str] = &["http", "https"];

/// Describes a JSON value for "found …" messages: strings and scalars verbatim (strings cut
/// to 60 characters), containers by kind.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            if s.chars().count() > 60 {
                let cut: String = s.chars().take(60).collect();
                format!("{}…", Value::String(cut))
            } else {
                Value::String(s.clone()).to_string()
            }
        }
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// The top-level properties of the current schema, which an unknown one is compared with for a
/// "did you mean" (the deprecated legacy ones are not suggested).
const TOP_LEVEL_PROPERTIES: &[&str] = &[
    "name",
    "image",
    "build",
    "dockerComposeFile",
    "service",
    "runServices",
    "workspaceFolder",
    "workspaceMount",
    "features",
    "overrideFeatureInstallOrder",
    "secrets",
    "forwardPorts",
    "portsAttributes",
    "otherPortsAttributes",
    "appPort",
    "containerEnv",
    "remoteEnv",
    "remoteUser",
    "containerUser",
    "updateRemoteUserUID",
    "userEnvProbe",
    "overrideCommand",
    "shutdownAction",
    "init",
    "privileged",
    "capAdd",
    "securityOpt",
    "mounts",
    "runArgs",
    "customizations",
    "hostRequirements",
    "initializeCommand",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
    "waitFor",
];

/// The property of `known` that `key` most likely misspells: the closest by
/// Damerau-Levenshtein distance ignoring case (`remoteUsr` → `remoteUser`, `postcreatecommand`
/// → `postCreateCommand`), when that distance is at most a quarter of its length (at least 1,
/// at most 3); `None` when nothing is that close.
pub fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let key = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| {
            (
                strsim::damerau_levenshtein(&key, &k.to_ascii_lowercase()),
                *k,
            )
        })
        .filter(|(distance, k)| *distance <= (k.len() / 4).clamp(1, 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

struct Checker<'a> {
    doc: &'a Document,
    warnings: Vec<Warning>,
}

impl Checker<'_> {
    fn invalid(&self, path: &JsonPath, message: String, hint: Option<&str>) -> ConfigError {
        ConfigError::Invalid {
            location: Box::new(self.doc.locate(path)),
            message,
            hint: hint.map(str::to_owned),
        }
    }

    fn expected(&self, path: &JsonPath, what: &str, found: &Value) -> ConfigError {
        self.invalid(
            path,
            format!("expected {what}, found {}", describe(found)),
            None,
        )
    }

    /// An unknown property, with the known one (of `known`, the properties of that object)
    /// it most likely misspells (spec-note 0002).
    fn warn_unknown(&mut self, path: &JsonPath, key: &str, context: &str, known: &[&str]) {
        let suggestion = did_you_mean(key, known)
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default();
        self.warnings.push(Warning {
            location: Some(self.doc.locate_key(path)),
            message: format!(
                "unknown property `{key}`{context}{suggestion}; it is kept as written"
            ),
        });
    }

    /// A deprecated top-level property that devcell, as the reference CLI, still applies.
    fn warn_deprecated(&mut self, path: &JsonPath, key: &str, instead: &str) {
        self.warnings.push(Warning {
            location: Some(self.doc.locate_key(path)),
            message: format!(
                "deprecated property `{key}`: it is applied as `{instead}` (as the reference CLI does); write it there"
            ),
        });
    }

    fn string(&self, v: &Value, path: &JsonPath) -> Result<String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(self.expected(path, "a string", v)),
        }
    }

    fn boolean(&self, v: &Value, path: &JsonPath) -> Result<bool> {
        v.as_bool()
            .ok_or_else(|| self.expected(path, "`true` or `false`", v))
    }

    fn strings(&self, v: &Value, path: &JsonPath) -> Result<Vec<String>> {
        let Value::Array(items) = v else {
            return Err(self.expected(path, "an array of strings", v));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, s)| self.string(s, &path.index(i)))
            .collect()
    }

    fn string_or_strings(&self, v: &Value, path: &JsonPath) -> Result<Vec<String>> {
        match v {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(_) => self.strings(v, path),
            _ => Err(self.expected(path, "a string or an array of strings", v)),
        }
    }

    fn object<'v>(&self, v: &'v Value, path: &JsonPath) -> Result<&'v Map<String, Value>> {
        v.as_object()
            .ok_or_else(|| self.expected(path, "an object", v))
    }

    fn string_map(&self, v: &Value, path: &JsonPath) -> Result<IndexMap<String, String>> {
        let obj = self.object(v, path)?;
        obj.iter()
            .map(|(k, val)| Ok((k.clone(), self.string(val, &path.key(k))?)))
            .collect()
    }

    fn one_of(&self, v: &Value, path: &JsonPath, allowed: &[&str]) -> Result<String> {
        let list = allowed
            .iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ");
        match v {
            Value::String(s) if allowed.contains(&s.as_str()) => Ok(s.clone()),
            _ => Err(self.expected(path, &format!("one of {list}"), v)),
        }
    }

    fn port(&self, v: &Value, path: &JsonPath, what: &str) -> Result<u16> {
        v.as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .ok_or_else(|| self.expected(path, what, v))
    }

    fn size(&self, v: &Value, path: &JsonPath) -> Result<String> {
        let s = self.string(v, path)?;
        if !has_variable(&s) && !is_size(&s) {
            return Err(self.invalid(
                path,
                format!(
                    "expected a size such as \"8gb\" (digits with an optional `kb`, `mb`, `gb` or `tb`), found {}",
                    describe(v)
                ),
                None,
            ));
        }
        Ok(s)
    }

    fn lifecycle(&self, v: &Value, path: &JsonPath) -> Result<LifecycleCommand> {
        const WHAT: &str =
            "a command string, an array of strings (argv), or an object of named commands";
        match v {
            Value::String(s) => Ok(LifecycleCommand::Shell(s.clone())),
            Value::Array(_) => Ok(LifecycleCommand::Exec(
                self.strings(v, path)
                    .map_err(|_| self.array_error(v, path, "an array of strings (argv)"))?,
            )),
            Value::Object(map) => {
                let mut out = IndexMap::new();
                for (name, entry) in map {
                    let p = path.key(name);
                    let e = match entry {
                        Value::String(s) => ParallelEntry::Shell(s.clone()),
                        Value::Array(_) => {
                            ParallelEntry::Exec(self.strings(entry, &p).map_err(|_| {
                                self.array_error(entry, &p, "an array of strings (argv)")
                            })?)
                        }
                        _ => {
                            return Err(self.expected(
                                &p,
                                "a command string or an array of strings (argv)",
                                entry,
                            ));
                        }
                    };
                    out.insert(name.clone(), e);
                }
                Ok(LifecycleCommand::Parallel(out))
            }
            _ => Err(self.invalid(
                path,
                format!("expected {WHAT}, found {}", describe(v)),
                Some("e.g. \"npm install\", [\"npm\", \"install\"] or {\"deps\": \"npm install\"}"),
            )),
        }
    }

    /// Re-locates an array-of-strings error on the first bad element.
    fn array_error(&self, v: &Value, path: &JsonPath, what: &str) -> ConfigError {
        if let Value::Array(items) = v
            && let Some((i, bad)) = items.iter().enumerate().find(|(_, s)| !s.is_string())
        {
            return self.expected(
                &path.index(i),
                &format!("a string (element of {what})"),
                bad,
            );
        }
        self.expected(path, what, v)
    }

    fn port_attributes(
        &mut self,
        v: &Value,
        path: &JsonPath,
        on_auto_forward: &[&str],
    ) -> Result<PortAttributes> {
        let obj = self.object(v, path)?;
        let mut pa = PortAttributes::default();
        for (k, val) in obj {
            let p = path.key(k);
            match k.as_str() {
                "label" => pa.label = Some(self.string(val, &p)?),
                "protocol" => pa.protocol = Some(self.one_of(val, &p, PROTOCOL)?),
                "onAutoForward" => {
                    pa.on_auto_forward = Some(self.one_of(val, &p, on_auto_forward)?)
                }
                "requireLocalPort" => pa.require_local_port = Some(self.boolean(val, &p)?),
                "elevateIfNeeded" => pa.elevate_if_needed = Some(self.boolean(val, &p)?),
                _ => self.warn_unknown(
                    &p,
                    k,
                    " in port attributes",
                    &[
                        "label",
                        "protocol",
                        "onAutoForward",
                        "requireLocalPort",
                        "elevateIfNeeded",
                    ],
                ),
            }
        }
        Ok(pa)
    }

    fn mount(&mut self, v: &Value, path: &JsonPath) -> Result<Mount> {
        match v {
            Value::String(s) => {
                if !has_variable(s)
                    && let Err(why) = check_mount_string(s)
                {
                    return Err(self.invalid(
                        path,
                        format!(
                            "expected a Docker `--mount` string such as \"type=bind,source=/a,target=/b\", found {}: {why}",
                            describe(v)
                        ),
                        None,
                    ));
                }
                Ok(Mount::String(s.clone()))
            }
            Value::Object(obj) => {
                let mut kind = None;
                let mut source = None;
                let mut target = None;
                for (k, val) in obj {
                    let p = path.key(k);
                    match k.as_str() {
                        "type" => kind = Some(self.one_of(val, &p, &["bind", "volume"])?),
                        "source" => source = Some(self.string(val, &p)?),
                        "target" => target = Some(self.string(val, &p)?),
                        _ => self.warn_unknown(&p, k, " in a mount", &["type", "source", "target"]),
                    }
                }
                let Some(kind) = kind else {
                    return Err(self.invalid(
                        &path.key("type"),
                        "expected `type` (\"bind\" or \"volume\") in the mount object, found none"
                            .into(),
                        None,
                    ));
                };
                let Some(target) = target else {
                    return Err(self.invalid(
                        &path.key("target"),
                        "expected `target` (the path in the container) in the mount object, found none".into(),
                        None,
                    ));
                };
                Ok(Mount::Object(MountObject {
                    kind,
                    source,
                    target,
                }))
            }
            _ => Err(self.expected(path, "a mount string or a mount object", v)),
        }
    }

    fn feature_value(&self, v: &Value, path: &JsonPath) -> Result<FeatureValue> {
        match v {
            Value::String(s) => Ok(FeatureValue::Version(s.clone())),
            Value::Bool(b) => Ok(FeatureValue::Enabled(*b)),
            Value::Object(obj) => {
                // Option values are strings or booleans per spec; arrays and other values are
                // kept as written (real configs use them, e.g. `additionalVersions: [..]`).
                Ok(FeatureValue::Options(obj.clone()))
            }
            _ => Err(self.invalid(
                path,
                format!(
                    "expected an options object, a version string or `true` for a Feature, found {}",
                    describe(v)
                ),
                Some("use `{}` to install a Feature with its default options"),
            )),
        }
    }

    fn host_requirements(&mut self, v: &Value, path: &JsonPath) -> Result<HostRequirements> {
        let obj = self.object(v, path)?;
        let mut hr = HostRequirements::default();
        for (k, val) in obj {
            let p = path.key(k);
            match k.as_str() {
                "cpus" => {
                    hr.cpus = Some(
                        val.as_u64()
                            .filter(|&n| n >= 1)
                            .ok_or_else(|| self.expected(&p, "an integer ≥ 1", val))?,
                    )
                }
                "memory" => hr.memory = Some(self.size(val, &p)?),
                "storage" => hr.storage = Some(self.size(val, &p)?),
                "gpu" => {
                    hr.gpu = Some(match val {
                        Value::Bool(b) => GpuRequirement::Required(*b),
                        Value::String(s) if s == "optional" => GpuRequirement::Optional,
                        Value::Object(g) => {
                            let mut cores = None;
                            let mut memory = None;
                            for (gk, gv) in g {
                                let gp = p.key(gk);
                                match gk.as_str() {
                                    "cores" => {
                                        cores = Some(gv.as_u64().filter(|&n| n >= 1).ok_or_else(
                                            || self.expected(&gp, "an integer ≥ 1", gv),
                                        )?)
                                    }
                                    "memory" => memory = Some(self.size(gv, &gp)?),
                                    _ => self.warn_unknown(
                                        &gp,
                                        gk,
                                        " in `hostRequirements.gpu`",
                                        &["cores", "memory"],
                                    ),
                                }
                            }
                            GpuRequirement::Detailed { cores, memory }
                        }
                        _ => {
                            return Err(self.expected(
                                &p,
                                "`true`, `false`, \"optional\" or an object {\"cores\", \"memory\"}",
                                val,
                            ));
                        }
                    })
                }
                _ => self.warn_unknown(
                    &p,
                    k,
                    " in `hostRequirements`",
                    &["cpus", "memory", "storage", "gpu"],
                ),
            }
        }
        Ok(hr)
    }

    fn build(&mut self, v: &Value, path: &JsonPath, b: &mut BuildOptions) -> Result<()> {
        let obj = self.object(v, path)?;
        for (k, val) in obj {
            let p = path.key(k);
            match k.as_str() {
                "dockerfile" => b.dockerfile = Some(self.string(val, &p)?),
                "context" => b.context = Some(self.string(val, &p)?),
                "args" => b.args = self.string_map(val, &p)?,
                "options" => b.options = self.strings(val, &p)?,
                "target" => b.target = Some(self.string(val, &p)?),
                "cacheFrom" => b.cache_from = self.string_or_strings(val, &p)?,
                _ => self.warn_unknown(
                    &p,
                    k,
                    " in `build`",
                    &[
                        "dockerfile",
                        "context",
                        "args",
                        "options",
                        "target",
                        "cacheFrom",
                    ],
                ),
            }
        }
        Ok(())
    }
}

/// `true` when `s` contains a `${…}` variable reference.
fn has_variable(s: &str) -> bool {
    s.contains("${")
}

/// `^\d+([tgmk]b)?$` (case-insensitive unit, as the reference CLI parses it).
fn is_size(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let digits = lower.trim_end_matches(['k', 'm', 'g', 't', 'b']);
    let unit = &lower[digits.len()..];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && matches!(unit, "" | "kb" | "mb" | "gb" | "tb")
}

/// `^([a-z0-9-]+):(\d{1,5})$` with the port ≤ 65535.
fn is_host_port(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else {
        return false;
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u32>().is_ok_and(|p| p <= 65535)
}

/// Checks Docker `--mount` CSV syntax: comma-separated `key=value` fields (or a bare
/// `readonly`/`ro`), with a `target`/`destination`/`dst` field.
pub fn check_mount_string(s: &str) -> std::result::Result<(), String> {
    if s.trim().is_empty() {
        return Err("the mount is empty".into());
    }
    let mut has_target = false;
    for field in s.split(',') {
        let field = field.trim().trim_matches('"');
        match field.split_once('=') {
            Some((k, _)) => {
                let k = k.trim().trim_matches('"').to_ascii_lowercase();
                if k.is_empty() {
                    return Err(format!("field `{field}` has no name"));
                }
                if matches!(k.as_str(), "target" | "destination" | "dst") {
                    has_target = true;
                }
            }
            None if matches!(field.to_ascii_lowercase().as_str(), "readonly" | "ro") => {}
            None => return Err(format!("field `{field}` is not `key=value`")),
        }
    }
    if !has_target {
        return Err("it has no `target=` field".into());
    }
    Ok(())
}

/// Validates a parsed document against the devcontainer.json schema and returns the typed
/// config and warnings (unknown properties).
///
/// Errors: [`ConfigError::Invalid`] located at the offending property for wrong types, values
/// outside an enum, bad `forwardPorts`/`mounts`/sizes, an unknown lifecycle hook form, `image`
/// together with a Dockerfile, and a compose config without `service`.
pub fn validate(doc: &Document) -> Result<(DevContainerConfig, Vec<Warning>)> {
    validate_value(doc, &doc.value)
}

/// Like [`validate`] but over `value`, a transformed copy of `doc.value` with the same shape
/// (e.g. after variable substitution); locations still come from `doc`.
pub fn validate_value(doc: &Document, value: &Value) -> Result<(DevContainerConfig, Vec<Warning>)> {
    let mut ck = Checker {
        doc,
        warnings: Vec::new(),
    };
    let root = JsonPath::root();
    let obj = ck.object(value, &root)?;
    let mut c = DevContainerConfig::default();
    let mut build = BuildProperties::default();
    for (k, v) in obj {
        ck.property(k, v, &root.key(k), &mut c, &mut build)?;
    }
    // As in the reference CLI, a legacy top-level `dockerFile` takes its `context` from the
    // top level too, and wins over `build.dockerfile`/`build.context`.
    if let Some(dockerfile) = build.legacy_dockerfile {
        build.options.dockerfile = Some(dockerfile);
        build.options.context = build.legacy_context;
        build.present = true;
    }
    if build.present {
        c.build = Some(build.options);
    }
    check_kind(&ck, obj, &c)?;
    Ok((c, ck.warnings))
}

/// The build properties as they are read: `build`, and the legacy top-level `dockerFile` and
/// `context` that win over it once every property is read.
#[derive(Default)]
struct BuildProperties {
    options: BuildOptions,
    present: bool,
    legacy_dockerfile: Option<String>,
    legacy_context: Option<String>,
}

impl Checker<'_> {
    /// One top-level property `k` of devcontainer.json checked into `c` (the build ones into
    /// `build`); an unknown one is a warning and kept.
    ///
    /// Errors: [`ConfigError::Invalid`] located at the property.
    fn property(
        &mut self,
        k: &str,
        v: &Value,
        p: &JsonPath,
        c: &mut DevContainerConfig,
        build: &mut BuildProperties,
    ) -> Result<()> {
        let ck = self;
        let p = p.clone();
        match k {
            "$schema" => {
                ck.string(v, &p)?;
            }
            "name" => c.name = Some(ck.string(v, &p)?),
            "image" => c.image = Some(ck.string(v, &p)?),
            "build" => {
                ck.build(v, &p, &mut build.options)?;
                build.present = true;
            }
            "dockerFile" => build.legacy_dockerfile = Some(ck.string(v, &p)?),
            "context" => build.legacy_context = Some(ck.string(v, &p)?),
            "dockerComposeFile" => c.docker_compose_file = Some(ck.string_or_strings(v, &p)?),
            "service" => c.service = Some(ck.string(v, &p)?),
            "runServices" => c.run_services = Some(ck.strings(v, &p)?),
            "workspaceFolder" => c.workspace_folder = Some(ck.string(v, &p)?),
            "workspaceMount" => c.workspace_mount = Some(ck.string(v, &p)?),
            "features" => {
                for (fk, fv) in ck.object(v, &p)? {
                    c.features
                        .insert(fk.clone(), ck.feature_value(fv, &p.key(fk))?);
                }
            }
            "overrideFeatureInstallOrder" => {
                c.override_feature_install_order = Some(ck.strings(v, &p)?)
            }
            "secrets" => c.secrets = ck.secrets(v, &p)?,
            "forwardPorts" => c.forward_ports = ck.forward_ports(v, &p)?,
            "portsAttributes" => {
                for (pk, pv) in ck.object(v, &p)? {
                    let pa = ck.port_attributes(pv, &p.key(pk), ON_AUTO_FORWARD)?;
                    c.ports_attributes.insert(pk.clone(), pa);
                }
            }
            "otherPortsAttributes" => {
                c.other_ports_attributes = Some(ck.port_attributes(v, &p, ON_AUTO_FORWARD)?)
            }
            "appPort" => c.app_port = ck.app_port(v, &p)?,
            "containerEnv" => c.container_env = ck.string_map(v, &p)?,
            "remoteEnv" => {
                for (ek, ev) in ck.object(v, &p)? {
                    let val = match ev {
                        Value::Null => None,
                        Value::String(s) => Some(s.clone()),
                        _ => return Err(ck.expected(&p.key(ek), "a string or null", ev)),
                    };
                    c.remote_env.insert(ek.clone(), val);
                }
            }
            "remoteUser" => c.remote_user = Some(ck.string(v, &p)?),
            "containerUser" => c.container_user = Some(ck.string(v, &p)?),
            "updateRemoteUserUID" => c.update_remote_user_uid = Some(ck.boolean(v, &p)?),
            "userEnvProbe" => c.user_env_probe = Some(ck.one_of(v, &p, USER_ENV_PROBE)?),
            "overrideCommand" => c.override_command = Some(ck.boolean(v, &p)?),
            "shutdownAction" => c.shutdown_action = Some(ck.one_of(v, &p, SHUTDOWN_ACTION)?),
            "init" => c.init = Some(ck.boolean(v, &p)?),
            "privileged" => c.privileged = Some(ck.boolean(v, &p)?),
            "capAdd" => c.cap_add = ck.strings(v, &p)?,
            "securityOpt" => c.security_opt = ck.strings(v, &p)?,
            "mounts" => {
                let Value::Array(items) = v else {
                    return Err(ck.expected(&p, "an array of mounts", v));
                };
                for (i, item) in items.iter().enumerate() {
                    let m = ck.mount(item, &p.index(i))?;
                    c.mounts.push(m);
                }
            }
            "runArgs" => c.run_args = ck.strings(v, &p)?,
            "customizations" => c.customizations = Some(ck.object(v, &p)?.clone()),
            "hostRequirements" => c.host_requirements = Some(ck.host_requirements(v, &p)?),
            "initializeCommand" => c.initialize_command = Some(ck.lifecycle(v, &p)?),
            "onCreateCommand" => c.on_create_command = Some(ck.lifecycle(v, &p)?),
            "updateContentCommand" => c.update_content_command = Some(ck.lifecycle(v, &p)?),
            "postCreateCommand" => c.post_create_command = Some(ck.lifecycle(v, &p)?),
            "postStartCommand" => c.post_start_command = Some(ck.lifecycle(v, &p)?),
            "postAttachCommand" => c.post_attach_command = Some(ck.lifecycle(v, &p)?),
            "waitFor" => c.wait_for = Some(ck.one_of(v, &p, WAIT_FOR)?),
            "extensions" => {
                c.extensions = Some(ck.strings(v, &p)?);
                ck.warn_deprecated(&p, k, "customizations.vscode.extensions");
            }
            "settings" => {
                c.settings = Some(ck.object(v, &p)?.clone());
                ck.warn_deprecated(&p, k, "customizations.vscode.settings");
            }
            "devPort" => {
                ck.warn_deprecated(&p, k, "customizations.vscode.devPort");
                c.dev_port = Some(
                    v.as_u64()
                        .ok_or_else(|| ck.expected(&p, "a non-negative integer", v))?,
                )
            }
            _ => {
                ck.warn_unknown(&p, k, "", TOP_LEVEL_PROPERTIES);
                c.unknown.insert(k.to_string(), v.clone());
            }
        }
        Ok(())
    }

    /// `secrets`: names as environment variable names, each with an optional description and
    /// documentation URL (other keys are warnings).
    ///
    /// Errors: [`ConfigError::Invalid`] at a bad name or value.
    fn secrets(&mut self, v: &Value, p: &JsonPath) -> Result<IndexMap<String, SecretInfo>> {
        let mut secrets = IndexMap::new();
        for (sk, sv) in self.object(v, p)? {
            let sp = p.key(sk);
            if !is_env_name(sk) {
                return Err(self.invalid(
                    &sp,
                    format!(
                        "expected a secret name matching `^[a-zA-Z_][a-zA-Z0-9_]*$`, found \"{sk}\""
                    ),
                    None,
                ));
            }
            let mut info = SecretInfo::default();
            for (ik, iv) in self.object(sv, &sp)? {
                match ik.as_str() {
                    "description" => info.description = Some(self.string(iv, &sp.key(ik))?),
                    "documentationUrl" => {
                        info.documentation_url = Some(self.string(iv, &sp.key(ik))?)
                    }
                    _ => self.warn_unknown(
                        &sp.key(ik),
                        ik,
                        " in a secret",
                        &["description", "documentationUrl"],
                    ),
                }
            }
            secrets.insert(sk.clone(), info);
        }
        Ok(secrets)
    }

    /// `forwardPorts`: each a port number or `"host:port"` (or a string with a variable).
    ///
    /// Errors: [`ConfigError::Invalid`] at the bad item.
    fn forward_ports(&self, v: &Value, p: &JsonPath) -> Result<Vec<ForwardPort>> {
        let Value::Array(items) = v else {
            return Err(self.expected(p, "an array of ports", v));
        };
        let mut ports = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let ip = p.index(i);
            const WHAT: &str = "an integer 0-65535 or \"host:port\"";
            ports.push(match item {
                Value::Number(_) => ForwardPort::Port(self.port(item, &ip, WHAT)?),
                Value::String(s) if has_variable(s) || is_host_port(s) => {
                    ForwardPort::HostPort(s.clone())
                }
                _ => return Err(self.expected(&ip, WHAT, item)),
            });
        }
        Ok(ports)
    }

    /// `appPort`: one port or spec, or an array of them.
    ///
    /// Errors: [`ConfigError::Invalid`] at the bad item.
    fn app_port(&self, v: &Value, p: &JsonPath) -> Result<Vec<AppPort>> {
        let items: Vec<(JsonPath, &Value)> = match v {
            Value::Array(a) => a.iter().enumerate().map(|(i, x)| (p.index(i), x)).collect(),
            _ => vec![(p.clone(), v)],
        };
        let mut ports = Vec::new();
        for (ip, item) in items {
            ports.push(match item {
                Value::Number(_) => AppPort::Port(self.port(
                    &item.clone(),
                    &ip,
                    "an integer 0-65535 or a string",
                )?),
                Value::String(s) => AppPort::Spec(s.clone()),
                _ => return Err(self.expected(&ip, "an integer 0-65535 or a string", item)),
            });
        }
        Ok(ports)
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Cross-property rules of the schema's `oneOf` over the three kinds.
fn check_kind(ck: &Checker<'_>, obj: &Map<String, Value>, c: &DevContainerConfig) -> Result<()> {
    let root = JsonPath::root();
    let dockerfile_key = if obj.get("build").and_then(|b| b.get("dockerfile")).is_some() {
        Some(root.key("build").key("dockerfile"))
    } else if obj.contains_key("dockerFile") {
        Some(root.key("dockerFile"))
    } else {
        None
    };
    if let (Some(_), Some(df)) = (&c.image, &dockerfile_key) {
        return Err(ck.invalid(
            df,
            format!(
                "expected either `image` or `{}`, found both",
                df
            ),
            Some("an image config uses `image`; a Dockerfile config uses `build.dockerfile`; remove one"),
        ));
    }
    if let Some(action) = &c.shutdown_action {
        let compose = c.docker_compose_file.is_some();
        let wrong = if compose {
            "stopContainer"
        } else {
            "stopCompose"
        };
        if action == wrong {
            let (kind, allowed) = if compose {
                ("a compose config", "\"none\" or \"stopCompose\"")
            } else {
                (
                    "an image or Dockerfile config",
                    "\"none\" or \"stopContainer\"",
                )
            };
            return Err(ck.invalid(
                &root.key("shutdownAction"),
                format!("expected {allowed} for {kind}, found \"{action}\""),
                None,
            ));
        }
    }
    if c.docker_compose_file.is_some() {
        if c.service.is_none() {
            return Err(ck.invalid(
                &root.key("dockerComposeFile"),
                "expected `service` (the compose service to connect to) with `dockerComposeFile`, found none".into(),
                Some("add `\"service\": \"<name of the service in the compose file>\"`"),
            ));
        }
        if let Some(source) = c
            .image
            .as_ref()
            .map(|_| "image")
            .or(dockerfile_key.as_ref().map(|_| "build.dockerfile"))
        {
            return Err(ck.invalid(
                &root.key(source.split('.').next().unwrap_or(source)),
                format!("expected either `dockerComposeFile` or `{source}`, found both"),
                Some("for a compose config, set the image or build in the compose file"),
            ));
        }
    }
    Ok(())
}

/// Moves legacy top-level `extensions`, `settings` and `devPort` into
/// `customizations.vscode`, as the reference CLI does: `extensions` are appended to
/// `customizations.vscode.extensions`; `settings` are merged under
/// `customizations.vscode.settings` (the latter win); `devPort` moves only when
/// `customizations.vscode.devPort` is absent. Values of other types are left in place.
pub fn migrate_legacy(config: &mut Map<String, Value>) {
    move_legacy_vscode(config, true);
}

/// Moves a Feature's legacy top-level `extensions` and `settings` (its
/// `devcontainer-feature.json` from before `customizations`) into `customizations.vscode`
/// with [`migrate_legacy`]'s rules, as the reference CLI does for every Feature it resolves.
/// A Feature has no `devPort`: that key is left alone (spec-note 0006).
pub fn migrate_feature_legacy(feature: &mut Map<String, Value>) {
    move_legacy_vscode(feature, false);
}

/// [`migrate_legacy`] and [`migrate_feature_legacy`]; `with_dev_port` also moves `devPort`.
fn move_legacy_vscode(config: &mut Map<String, Value>, with_dev_port: bool) {
    let ext = config.get("extensions").filter(|v| v.is_array()).is_some();
    let set = config.get("settings").filter(|v| v.is_object()).is_some();
    let dev = with_dev_port && config.contains_key("devPort");
    if !(ext || set || dev) {
        return;
    }
    let mut vscode = config
        .get("customizations")
        .and_then(|c| c.get("vscode"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if ext && let Some(Value::Array(legacy)) = config.shift_remove("extensions") {
        let mut list = match vscode.get("extensions") {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        list.extend(legacy);
        vscode.insert("extensions".into(), Value::Array(list));
    }
    if set && let Some(Value::Object(mut legacy)) = config.shift_remove("settings") {
        if let Some(Value::Object(current)) = vscode.get("settings") {
            for (k, v) in current {
                legacy.insert(k.clone(), v.clone());
            }
        }
        vscode.insert("settings".into(), Value::Object(legacy));
    }
    if dev
        && !vscode.contains_key("devPort")
        && let Some(port) = config.shift_remove("devPort")
    {
        vscode.insert("devPort".into(), port);
    }
    let customizations = config
        .entry("customizations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !customizations.is_object() {
        *customizations = Value::Object(Map::new());
    }
    if let Value::Object(c) = customizations {
        c.insert("vscode".into(), Value::Object(vscode));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::jsonc;
    use serde_json::json;

    fn check(text: &str) -> Result<(DevContainerConfig, Vec<Warning>)> {
        let doc = jsonc::parse(Path::new("/w/devcontainer.json"), text)?;
        validate(&doc)
    }

    fn err(text: &str) -> String {
        match check(text) {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => {
                let loc = e.location().unwrap();
                let text = e.to_string();
                let rest = text.strip_prefix(&format!("{loc}: ")).unwrap().to_owned();
                format!("{}:{}: {rest}", loc.line, loc.column)
            }
        }
    }

    #[test]
    fn validate_kinds() {
        assert_eq!(
            check(r#"{"image": "a"}"#).unwrap().0.kind(),
            ConfigKind::Image
        );
        assert_eq!(
            check(r#"{"build": {"dockerfile": "D"}}"#).unwrap().0.kind(),
            ConfigKind::Dockerfile
        );
        assert_eq!(
            check(r#"{"dockerFile": "D", "context": ".."}"#)
                .unwrap()
                .0
                .kind(),
            ConfigKind::Dockerfile
        );
        assert_eq!(
            check(r#"{"dockerComposeFile": "c.yml", "service": "s"}"#)
                .unwrap()
                .0
                .kind(),
            ConfigKind::Compose
        );
        assert_eq!(check(r#"{}"#).unwrap().0.kind(), ConfigKind::None);
    }

    #[test]
    fn validate_forward_ports_message() {
        assert_eq!(
            err("{\n  \"forwardPorts\": [\"abc\"]\n}"),
            "2:20: forwardPorts[0]: expected an integer 0-65535 or \"host:port\", found \"abc\""
        );
        assert!(check(r#"{"forwardPorts": [3000, "db:5432", "${localEnv:P}"]}"#).is_ok());
        assert!(err(r#"{"forwardPorts": [70000]}"#).contains("found 70000"));
    }

    #[test]
    fn validate_lifecycle_forms() {
        let (c, _) = check(
            r#"{"postCreateCommand": {"a": "x", "b": ["y", "z"]}, "onCreateCommand": ["a"]}"#,
        )
        .unwrap();
        assert!(
            matches!(c.post_create_command, Some(LifecycleCommand::Parallel(ref m)) if m.len() == 2)
        );
        assert_eq!(
            c.on_create_command,
            Some(LifecycleCommand::Exec(vec!["a".into()]))
        );
        assert!(
            err(r#"{"postStartCommand": 5}"#)
                .starts_with("1:22: postStartCommand: expected a command string")
        );
        assert!(
            err(r#"{"postStartCommand": {"a": 5}}"#)
                .contains("postStartCommand.a: expected a command string or an array")
        );
    }

    #[test]
    fn validate_unknown_property_warns_and_keeps() {
        let (c, w) = check("{\"image\": \"a\",\n \"fooBar\": 1}").unwrap();
        assert_eq!(c.unknown.get("fooBar"), Some(&json!(1)));
        assert_eq!(w.len(), 1);
        assert!(
            w[0].to_string()
                .contains("2:2: fooBar: unknown property `fooBar`"),
            "{}",
            w[0]
        );
    }

    /// Issue 28 item 5: a typo gets the property it most likely means; something unlike any
    /// property gets none; a deprecated legacy property says where it goes.
    #[test]
    fn unknown_properties_suggest_the_closest_and_deprecated_ones_say_where_they_go() {
        let (_, w) = check(
            r#"{"image": "a", "remoteUsr": "x", "postcreatecommand": "y", "zzz": 1,
                "hostRequirements": {"cpu": 2}, "extensions": ["a.b"]}"#,
        )
        .unwrap();
        let all: Vec<String> = w.iter().map(|w| w.message.clone()).collect();
        assert_eq!(
            all,
            [
                "unknown property `remoteUsr` (did you mean `remoteUser`?); it is kept as written",
                "unknown property `postcreatecommand` (did you mean `postCreateCommand`?); it is kept as written",
                "unknown property `zzz`; it is kept as written",
                "unknown property `cpu` in `hostRequirements` (did you mean `cpus`?); it is kept as written",
                "deprecated property `extensions`: it is applied as `customizations.vscode.extensions` (as the reference CLI does); write it there",
            ]
        );
        assert_eq!(did_you_mean("image", &["name", "image"]), Some("image"));
        assert_eq!(did_you_mean("foo", TOP_LEVEL_PROPERTIES), None);
    }

    #[test]
    fn validate_mount_strings() {
        assert!(check(r#"{"mounts": ["source=a,target=/b,type=volume", {"type": "bind", "source": "/x", "target": "/y"}]}"#).is_ok());
        assert!(
            err(r#"{"mounts": ["/a:/b"]}"#)
                .contains("mounts[0]: expected a Docker `--mount` string")
        );
        assert!(
            err(r#"{"mounts": [{"type": "bind", "source": "/x"}]}"#).contains("expected `target`")
        );
    }

    #[test]
    fn validate_image_and_dockerfile_conflict() {
        assert_eq!(
            err("{\"image\": \"a\",\n \"build\": {\"dockerfile\": \"D\"}}"),
            "2:26: build.dockerfile: expected either `image` or `build.dockerfile`, found both"
        );
    }

    #[test]
    fn validate_shutdown_action_matches_kind() {
        assert!(check(r#"{"image": "a", "shutdownAction": "stopContainer"}"#).is_ok());
        assert_eq!(
            err(r#"{"image": "a", "shutdownAction": "stopCompose"}"#),
            "1:34: shutdownAction: expected \"none\" or \"stopContainer\" for an image or Dockerfile config, found \"stopCompose\""
        );
        assert!(
            check(r#"{"dockerComposeFile": "c", "service": "s", "shutdownAction": "stopCompose"}"#)
                .is_ok()
        );
    }

    #[test]
    fn validate_compose_requires_service() {
        assert_eq!(
            err(r#"{"dockerComposeFile": "c.yml"}"#),
            "1:23: dockerComposeFile: expected `service` (the compose service to connect to) with `dockerComposeFile`, found none"
        );
    }

    #[test]
    fn validate_host_requirements() {
        let (c, _) =
            check(r#"{"hostRequirements": {"cpus": 4, "memory": "8gb", "gpu": "optional"}}"#)
                .unwrap();
        assert_eq!(
            c.host_requirements.unwrap().gpu,
            Some(GpuRequirement::Optional)
        );
        assert!(err(r#"{"hostRequirements": {"memory": "8 GB"}}"#).contains("expected a size"));
        assert!(err(r#"{"hostRequirements": {"cpus": 0}}"#).contains("expected an integer ≥ 1"));
    }

    #[test]
    fn migrate_legacy_moves_vscode_properties() {
        let mut v = json!({"extensions": ["a"], "settings": {"x": 1, "y": 1}, "devPort": 5,
            "customizations": {"vscode": {"extensions": ["b"], "settings": {"y": 2}}}});
        migrate_legacy(v.as_object_mut().unwrap());
        assert_eq!(
            v,
            json!({"customizations": {"vscode": {"extensions": ["b", "a"], "settings": {"x": 1, "y": 2}, "devPort": 5}}})
        );
    }

    #[test]
    fn migrate_feature_legacy_moves_extensions_and_settings_but_not_dev_port() {
        let mut v = json!({"id": "f", "extensions": ["a"], "settings": {"x": 1, "y": 1}, "devPort": 5,
            "customizations": {"vscode": {"extensions": ["b"], "settings": {"y": 2}}}});
        migrate_feature_legacy(v.as_object_mut().unwrap());
        assert_eq!(
            v,
            json!({"id": "f", "devPort": 5, "customizations": {"vscode": {"extensions": ["b", "a"], "settings": {"x": 1, "y": 2}}}})
        );
        let mut plain = json!({"id": "f", "devPort": 5});
        migrate_feature_legacy(plain.as_object_mut().unwrap());
        assert_eq!(plain, json!({"id": "f", "devPort": 5}));
    }

    #[test]
    fn size_and_host_port_patterns() {
        assert!(is_size("16gb") && is_size("1024") && !is_size("gb") && !is_size("1pb"));
        assert!(is_host_port("db:5432") && !is_host_port("DB:5432") && !is_host_port("a:99999"));
    }
}
