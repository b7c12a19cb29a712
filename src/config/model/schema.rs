//! Checking a parsed `devcontainer.json` against `devContainer.base.schema.json`'s types:
//! located errors, warnings for unknown properties (with a "did you mean").

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::types::*;
use crate::config::error::{ConfigError, Result};
use crate::config::jsonc::{Document, JsonPath};
use crate::diagnostics::Warning;

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
pub(super) const TOP_LEVEL_PROPERTIES: &[&str] = &[
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
pub(super) fn is_size(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let digits = lower.trim_end_matches(['k', 'm', 'g', 't', 'b']);
    let unit = &lower[digits.len()..];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && matches!(unit, "" | "kb" | "mb" | "gb" | "tb")
}

/// `^([a-z0-9-]+):(\d{1,5})$` with the port ≤ 65535.
pub(super) fn is_host_port(s: &str) -> bool {
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
