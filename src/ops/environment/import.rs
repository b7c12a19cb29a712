//! `devcell env import FILE.yaml` (issue 29, item 6; spec-note 0523): an agent-runner
//! `mode: managed` execution environment mapped onto devcell.
//!
//! Steps: [`read_managed`] reads the file strictly ([`super::import_model`]: an unknown key
//! is an error at its line and column); [`check_tokens`] refuses a `{{token}}` agent-runner
//! would not know; [`map_environment`] makes the devcontainer.json (`image`, the workspace
//! mount, `containerEnv`, the lifecycle steps as hooks, and what the hardened profile does
//! not grant: `mounts`, `capAdd`, `runArgs`) and the notes on what has no devcell
//! equivalent; [`judge_requests`] judges the requests with devcell's own policy, so each is
//! refused unless the user grants it with `--allow`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::import_model::{
    CleanupPolicy, Lifetime, ManagedEnvironment, MountMode, SESSION_PRESETS, SessionMounts,
    SessionPreset, Step, StepKind, Target,
};
use crate::config::ConfigError;
use crate::diagnostics::SourceLocation;
use crate::engine::{ContainerSpec, Mount, MountKind};
use crate::ops::error::{OpsError, Result};
use crate::security::permissions::{Permission, PermissionRequest, RequestStatus, Source};
use crate::security::policy::{Grants, PolicyInput, configuration_requests, judge};
use crate::security::profile::SecurityProfile;

/// The largest file read (an environment definition is a page of YAML).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The variables agent-runner gives every template (its launcher variables).
const LAUNCHER_TOKENS: [&str; 7] = [
    "run_id",
    "run_group_id",
    "cwd",
    "config_dir",
    "state_dir",
    "assignment_name",
    "agent_runner_cmd",
];
/// Known once a `workspace` block resolves.
const WORKSPACE_TOKENS: [&str; 2] = ["workspace_host_path", "workspace_container_path"];
/// Known inside lifecycle steps.
const STEP_TOKENS: [&str; 3] = ["container_name", "container_id", "container_pid"];

/// What `env import` is asked.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The agent-runner file.
    pub file: PathBuf,
    /// The workspace folder the configuration is for (binds inside it are no request).
    pub workspace: PathBuf,
    /// Judge under the `reference` profile (else `hardened`).
    pub reference_profile: bool,
    /// The user's `--allow` values.
    pub allow: Vec<String>,
    /// The host's environment (`HOME` and the session stores' variables).
    pub env: BTreeMap<String, String>,
}

/// What `env import` made of the file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// The file read.
    pub file: String,
    /// Its `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The devcontainer.json it maps to.
    pub configuration: Value,
    /// `lifetime` and what devcell does for it.
    pub lifetime: Choice,
    /// `cleanup.policy` and what devcell does for it.
    pub cleanup: Choice,
    /// Everything the hardened profile does not grant, each judged.
    pub requests: Vec<ImportRequest>,
    /// What has no devcell equivalent, or changes meaning.
    pub notes: Vec<Note>,
    /// Where the configuration was written (`--write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
}

impl ImportReport {
    /// Whether any request is refused (the import then writes nothing and fails).
    pub fn refused(&self) -> bool {
        self.requests
            .iter()
            .any(|r| matches!(r.status, "refused" | "forbidden"))
    }
}

/// An agent-runner choice and devcell's counterpart.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    /// The file's value (its default when absent).
    pub value: &'static str,
    /// What devcell does.
    pub devcell: String,
}

/// A remark on one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// The key, as a property path.
    pub field: String,
    /// What devcell does with it.
    pub message: String,
}

/// A permission request, with the key of the file that asks for it.
#[derive(Debug, Clone, Serialize)]
pub struct ImportRequest {
    /// The key, as a property path.
    pub field: String,
    /// The permission's kind ([`Permission::kind`], or `writableRootFilesystem`).
    pub permission: String,
    /// Its value (a path, a capability), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The request for people.
    pub description: String,
    /// `granted`, `allowedByProfile`, `refused` or `forbidden`.
    pub status: &'static str,
    /// The flag that grants it, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
}

impl ImportRequest {
    fn of(field: &str, r: &PermissionRequest) -> Self {
        ImportRequest {
            field: field.to_string(),
            permission: r.permission.kind().to_string(),
            value: r.permission.value().map(str::to_string),
            description: r.permission.to_string(),
            status: r.status.as_str(),
            grant: r.permission.grant_flag(),
        }
    }
}

/// Reads, checks and maps the file, and judges its requests. Nothing is written.
///
/// Errors: the file cannot be read; [`ConfigError::Invalid`] for YAML or schema errors, an
/// unknown `{{token}}`, a value devcell cannot carry (file, line, column, key).
pub fn import(opts: &ImportOptions) -> Result<ImportReport> {
    let grants = Grants::parse(&opts.allow)?;
    let profile = if opts.reference_profile {
        SecurityProfile::Reference
    } else {
        SecurityProfile::default()
    };
    let (text, environment) = read_managed(&opts.file)?;
    let at = Locator {
        file: &opts.file,
        text: &text,
    };
    check_tokens(&environment, &at)?;
    check_steps(&environment, &at)?;
    check_rules(&environment, &at)?;
    let mut mapped = map_environment(&environment, &opts.env, &at)?;
    let requests = judge_requests(&mut mapped, opts, &profile, &grants)?;
    Ok(ImportReport {
        file: opts.file.display().to_string(),
        name: environment.name.clone(),
        configuration: Value::Object(mapped.config),
        lifetime: lifetime_choice(&environment),
        cleanup: cleanup_choice(&environment),
        requests,
        notes: mapped.notes,
        written: None,
    })
}

/// Writes the configuration as `<workspace>/.devcontainer/devcontainer.json`, never over an
/// existing file.
///
/// Errors: [`OpsError::Unsupported`] when the file exists or cannot be written.
pub fn write_configuration(workspace: &Path, configuration: &Value) -> Result<PathBuf> {
    let folder = workspace.join(".devcontainer");
    let path = folder.join("devcontainer.json");
    let failed = |e: std::io::Error| OpsError::Unsupported {
        message: format!("cannot write `{}`: {e}", path.display()),
        hint: None,
    };
    std::fs::create_dir_all(&folder).map_err(failed)?;
    let mut text = serde_json::to_string_pretty(configuration).unwrap_or_default();
    text.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => OpsError::Unsupported {
                message: format!(
                    "`{}` exists; `env import --write` never replaces it",
                    path.display()
                ),
                hint: Some(
                    "run without `--write` to print the configuration, and merge it by hand".into(),
                ),
            },
            _ => failed(e),
        })?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(failed)?;
    Ok(path)
}

/// Reads `path` as a `mode: managed` definition.
///
/// Errors: the file cannot be read or is too large; [`ConfigError::Invalid`] at the parser's
/// line and column for YAML that does not parse or does not follow the schema.
pub fn read_managed(path: &Path) -> Result<(String, ManagedEnvironment)> {
    let io = |source: std::io::Error| {
        OpsError::from(ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, MAX_FILE_BYTES + 1),
        &mut text,
    )
    .map_err(io)?;
    let at = Locator {
        file: path,
        text: &text,
    };
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(at.error(1, 1, "", "the file is larger than 1 MiB".into()));
    }
    let environment: ManagedEnvironment = serde_yaml::from_str(&text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((1, 1));
        let message = e.to_string();
        let message = match message.rsplit_once(" at line ") {
            Some((m, _)) => m.to_string(),
            None => message,
        };
        at.error_with_hint(
            line,
            column,
            "",
            message,
            "devcell imports agent-runner's `mode: managed` environments (schema version 1); see docs/environment.md",
        )
    })?;
    if environment.schema_version != 1 {
        let (line, column) = at.find("schemaVersion");
        return Err(at.error(
            line,
            column,
            "schemaVersion",
            format!("expected `1`, found `{}`", environment.schema_version),
        ));
    }
    Ok((text, environment))
}

/// Where in the file a key or value is, for errors.
struct Locator<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    /// The line and column (1-based) of the first `needle` outside a comment line, or 1:1.
    fn find(&self, needle: &str) -> (usize, usize) {
        self.text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim_start().starts_with('#'))
            .find_map(|(n, l)| l.find(needle).map(|c| (n + 1, l[..c].chars().count() + 1)))
            .unwrap_or((1, 1))
    }

    fn error(&self, line: usize, column: usize, path: &str, message: String) -> OpsError {
        self.located(line, column, path, message, None)
    }

    fn error_with_hint(
        &self,
        line: usize,
        column: usize,
        path: &str,
        message: String,
        hint: &str,
    ) -> OpsError {
        self.located(line, column, path, message, Some(hint.to_string()))
    }

    fn located(
        &self,
        line: usize,
        column: usize,
        path: &str,
        message: String,
        hint: Option<String>,
    ) -> OpsError {
        OpsError::from(ConfigError::Invalid {
            location: Box::new(SourceLocation {
                file: self.file.to_path_buf(),
                line,
                column,
                path: path.to_string(),
                line_text: self
                    .text
                    .lines()
                    .nth(line.saturating_sub(1))
                    .unwrap_or_default()
                    .to_string(),
            }),
            message,
            hint,
        })
    }
}

/// The `{{name}}` tokens of `value`, in order.
///
/// Errors: a `{{` with no `}}`, or a name that is empty or not `[A-Za-z0-9_]`.
pub fn tokens(value: &str) -> std::result::Result<Vec<String>, String> {
    let mut found = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("`{{{{` without `}}}}` in `{value}`"))?;
        let name = after[..end].trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "`{{{{{}}}}}` is not a variable name",
                &after[..end]
            ));
        }
        found.push(name.to_string());
        rest = &after[end + 2..];
    }
    Ok(found)
}

/// Every template value of the file with its key and whether it is inside a lifecycle step.
fn templates(e: &ManagedEnvironment) -> Vec<(String, String, bool)> {
    let mut out = vec![
        ("cwd".to_string(), e.cwd.clone(), false),
        ("image".to_string(), e.image.clone(), false),
    ];
    let mut add = |key: String, value: &str, step: bool| out.push((key, value.to_string(), step));
    if let Some(name) = &e.container_name {
        add("containerName".into(), name, false);
    }
    for (k, v) in &e.env {
        add(format!("env.{k}"), v, false);
    }
    if let Some(w) = &e.workspace {
        if let Some(v) = &w.host_root {
            add("workspace.hostRoot".into(), v, false);
        }
        if let Some(v) = &w.host_path {
            add("workspace.hostPath".into(), v, false);
        }
        add("workspace.containerPath".into(), &w.container_path, false);
    }
    for (i, m) in e.mounts.iter().enumerate() {
        add(format!("mounts[{i}].hostPath"), &m.host_path, false);
        add(
            format!("mounts[{i}].containerPath"),
            &m.container_path,
            false,
        );
    }
    for (phase, step) in steps(e) {
        let mut field = |key: &str, value: &str| add(format!("{phase}.{key}"), value, true);
        for (key, value) in [
            ("command", &step.command),
            ("cwd", &step.cwd),
            ("user", &step.user),
            ("source", &step.source),
            ("baseRef", &step.base_ref),
            ("branch", &step.branch),
        ] {
            if let Some(v) = value {
                field(key, v);
            }
        }
        for (i, a) in step.args.iter().enumerate() {
            field(&format!("args[{i}]"), a);
        }
        for (k, v) in &step.env {
            field(&format!("env.{k}"), v);
        }
    }
    out
}

/// Every lifecycle step with its key (`lifecycle.afterStart[0]`).
fn steps(e: &ManagedEnvironment) -> Vec<(String, &Step)> {
    let Some(l) = &e.lifecycle else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, s) in l.after_start.iter().enumerate() {
        out.push((format!("lifecycle.afterStart[{i}]"), s));
    }
    for (i, s) in l.on_workspace_create.iter().enumerate() {
        out.push((format!("lifecycle.onWorkspaceCreate[{i}]"), s));
    }
    out
}

/// Refuses a `{{token}}` agent-runner would not know where it is written: its launcher
/// variables, the file's `vars`, the workspace's two once there is a `workspace`, and the
/// container's three inside lifecycle steps.
///
/// Errors: [`ConfigError::Invalid`] at the token's first appearance in the file.
fn check_tokens(e: &ManagedEnvironment, at: &Locator<'_>) -> Result<()> {
    let mut known: BTreeSet<&str> = LAUNCHER_TOKENS.into_iter().collect();
    known.extend(e.vars.keys().map(String::as_str));
    if e.workspace.is_some() {
        known.extend(WORKSPACE_TOKENS);
    }
    for (key, value, in_step) in templates(e) {
        let names = tokens(&value).map_err(|m| {
            let (line, column) = at.find(&value);
            at.error(line, column, &key, m)
        })?;
        for name in names {
            if known.contains(name.as_str()) || (in_step && STEP_TOKENS.contains(&name.as_str())) {
                continue;
            }
            let (line, column) = at.find(&format!("{{{{{name}"));
            let mut names: Vec<&str> = known.iter().copied().collect();
            if in_step {
                names.extend(STEP_TOKENS);
            }
            return Err(at.error_with_hint(
                line,
                column,
                &key,
                format!("unknown token `{{{{{name}}}}}`"),
                &format!(
                    "agent-runner knows {} here; declare others under `vars`",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a step with a key its kind does not take, or without one it needs (agent-runner's
/// rules: a command step names its `target` and `command`; `user` and `detach` only in the
/// container; a git-clone step names `source`, `baseRef` and `branch`, neither ref starting
/// with `-`).
///
/// Errors: [`ConfigError::Invalid`] at the step's `kind`.
fn check_steps(e: &ManagedEnvironment, at: &Locator<'_>) -> Result<()> {
    for (key, step) in steps(e) {
        let problem = match step.kind {
            StepKind::Command => {
                let stray = [
                    ("source", step.source.is_some()),
                    ("baseRef", step.base_ref.is_some()),
                    ("branch", step.branch.is_some()),
                ];
                if let Some((k, _)) = stray.iter().find(|(_, set)| *set) {
                    Some(format!("a command step has no `{k}`"))
                } else if step.target.is_none() {
                    Some("a command step needs `target` (`host` or `container`)".into())
                } else if step.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    Some("a command step needs `command`".into())
                } else if step.target == Some(Target::Host)
                    && (step.user.is_some() || step.detach.is_some())
                {
                    Some("`user` and `detach` are for `target: container` only".into())
                } else {
                    None
                }
            }
            StepKind::GitClone => {
                let stray = [
                    ("command", step.command.is_some()),
                    ("args", !step.args.is_empty()),
                    ("env", !step.env.is_empty()),
                    ("cwd", step.cwd.is_some()),
                    ("user", step.user.is_some()),
                    ("detach", step.detach.is_some()),
                ];
                if let Some((k, _)) = stray.iter().find(|(_, set)| *set) {
                    Some(format!("a git-clone step has no `{k}`"))
                } else if step.source.is_none() || step.base_ref.is_none() || step.branch.is_none()
                {
                    Some("a git-clone step needs `source`, `baseRef` and `branch`".into())
                } else if [&step.base_ref, &step.branch]
                    .iter()
                    .any(|r| r.as_deref().is_some_and(|r| r.starts_with('-')))
                {
                    Some("`baseRef` and `branch` cannot start with `-`".into())
                } else {
                    None
                }
            }
        };
        if let Some(message) = problem {
            let (line, column) = at.find("kind:");
            return Err(at.error(line, column, &key, message));
        }
    }
    Ok(())
}

/// Refuses what agent-runner's schema refuses beyond its keys ([`rules::first_violation`]),
/// at the key.
///
/// Errors: [`ConfigError::Invalid`] at the first broken rule.
fn check_rules(e: &ManagedEnvironment, at: &Locator<'_>) -> Result<()> {
    match rules::first_violation(e) {
        Some(v) => {
            let (line, column) = at.find(&v.needle);
            Err(at.error(line, column, &v.path, v.message))
        }
        None => Ok(()),
    }
}

/// The configuration being made, the container the policy judges, and the notes.
#[derive(Debug, Default)]
struct Mapped {
    /// The devcontainer.json.
    config: Map<String, Value>,
    /// What the policy judges: the binds, capabilities, network and `runArgs` asked for.
    spec: ContainerSpec,
    /// Which key asked for each bind target, capability and the network.
    fields: Vec<(Permission, String)>,
    /// Host-targeted steps (`host-command` requests), with their keys.
    host_steps: Vec<(String, String)>,
    /// `security.readOnlyRootFilesystem: false`.
    writable_root: bool,
    /// Remarks.
    notes: Vec<Note>,
}

impl Mapped {
    fn note(&mut self, field: &str, message: impl Into<String>) {
        self.notes.push(Note {
            field: field.to_string(),
            message: message.into(),
        });
    }
}

/// A value for devcontainer.json: agent-runner's workspace tokens become devcell's
/// variables (`{{workspace_container_path}}` → `${containerWorkspaceFolder}`,
/// `{{workspace_host_path}}` and `{{cwd}}` → `${localWorkspaceFolder}`).
///
/// Errors: [`ConfigError::Invalid`] for any other token (devcell has no value for it) or a
/// `${` (devcell would substitute it: the text cannot be carried as written).
fn carried(value: &str, key: &str, at: &Locator<'_>) -> Result<String> {
    if value.contains("${") {
        let (line, column) = at.find(value);
        return Err(at.error(
            line,
            column,
            key,
            format!("`{value}` holds `${{`, which devcell would read as one of its variables"),
        ));
    }
    let mut out = value.to_string();
    for name in tokens(value).unwrap_or_default() {
        let devcell = match name.as_str() {
            "workspace_container_path" => "${containerWorkspaceFolder}",
            "workspace_host_path" | "cwd" => "${localWorkspaceFolder}",
            _ => {
                let (line, column) = at.find(&format!("{{{{{name}"));
                return Err(at.error_with_hint(
                    line,
                    column,
                    key,
                    format!("`{{{{{name}}}}}` has no devcell value here"),
                    "write the value itself: devcell has no agent-runner run to take it from",
                ));
            }
        };
        out = replace_token(&out, &name, devcell);
    }
    Ok(out)
}

/// `value` with each `{{ name }}` (any spacing) replaced by `with`.
fn replace_token(value: &str, name: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push_str(&rest[..start]);
        if after[..end].trim() == name {
            out.push_str(with);
        } else {
            out.push_str(&rest[start..start + 2 + end + 2]);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The devcontainer.json, the container to judge, and the notes (see the module's steps).
///
/// Errors: [`ConfigError::Invalid`] for a value devcell cannot carry ([`carried`]) or an
/// `extraRunArgs` devcell's engine does not take.
fn map_environment(
    e: &ManagedEnvironment,
    env: &BTreeMap<String, String>,
    at: &Locator<'_>,
) -> Result<Mapped> {
    let mut m = Mapped::default();
    if let Some(name) = &e.name {
        m.config.insert("name".into(), json!(name));
    }
    m.config
        .insert("image".into(), json!(carried(&e.image, "image", at)?));
    map_workspace(e, &mut m, at)?;
    map_env(e, &mut m, at)?;
    map_lifecycle(e, &mut m, at)?;
    map_mounts(e, env, &mut m, at)?;
    map_security(e, &mut m, at)?;
    map_notes(e, &mut m);
    Ok(m)
}

/// `workspace.containerPath` → `workspaceFolder` and `workspaceMount`; the host side is
/// devcell's workspace folder.
fn map_workspace(e: &ManagedEnvironment, m: &mut Mapped, at: &Locator<'_>) -> Result<()> {
    let Some(w) = &e.workspace else {
        m.note(
            "workspace",
            "none: the workspace folder is mounted where devcell mounts it (`/workspaces/<name>`)",
        );
        return Ok(());
    };
    let target = carried(&w.container_path, "workspace.containerPath", at)?;
    if target.contains("${") || !target.starts_with('/') {
        let (line, column) = at.find(&w.container_path);
        return Err(at.error(
            line,
            column,
            "workspace.containerPath",
            format!(
                "expected an absolute path in the container, found `{}`",
                w.container_path
            ),
        ));
    }
    let mount = Mount {
        kind: MountKind::Bind,
        source: Some("${localWorkspaceFolder}".into()),
        target: target.clone(),
        read_only: w.mode == Some(MountMode::Ro),
    };
    m.config.insert(
        "workspaceMount".into(),
        json!(crate::engine::run_args::mount_string(&mount)),
    );
    m.config.insert("workspaceFolder".into(), json!(target));
    if w.host_root.is_some() || w.host_path.is_some() || w.create.is_some() {
        m.note(
            "workspace.hostRoot",
            "the host side is the workspace folder devcell is given (`--workspace-folder`); agent-runner's host folder is not used",
        );
    }
    if w.scope == Some(Lifetime::Group) {
        m.note(
            "workspace.scope",
            "`group`: one workspace folder shared by a run group; with devcell, hand off the same folder",
        );
    }
    Ok(())
}

/// `env` → `containerEnv`.
fn map_env(e: &ManagedEnvironment, m: &mut Mapped, at: &Locator<'_>) -> Result<()> {
    if e.env.is_empty() {
        return Ok(());
    }
    let mut vars = Map::new();
    for (k, v) in &e.env {
        vars.insert(k.clone(), json!(carried(v, &format!("env.{k}"), at)?));
    }
    m.config.insert("containerEnv".into(), Value::Object(vars));
    Ok(())
}

/// `lifecycle.afterStart` → `customizations.devcell.afterStart` (once per container) and
/// `lifecycle.onWorkspaceCreate` → `customizations.devcell.onWorkspaceCreate` (once per host
/// workspace), the steps `devcell handoff` runs with its markers in devcell's state (spec-note
/// 0538): one `sh` line per container step, in order (the handoff stops at the first
/// failure); host steps become `host-command` requests; git-clone steps are notes
/// (`handoff --isolation clone`).
fn map_lifecycle(e: &ManagedEnvironment, m: &mut Mapped, at: &Locator<'_>) -> Result<()> {
    let Some(l) = &e.lifecycle else {
        return Ok(());
    };
    let mut devcell = Map::new();
    for (phase, list) in [
        ("afterStart", &l.after_start),
        ("onWorkspaceCreate", &l.on_workspace_create),
    ] {
        let mut lines = Vec::new();
        for (i, step) in list.iter().enumerate() {
            let key = format!("lifecycle.{phase}[{i}]");
            if step.kind == StepKind::GitClone {
                m.note(
                    &key,
                    "git-clone: not run; `devcell handoff --isolation clone` gives the agent its own clone on a task branch",
                );
                continue;
            }
            let line = step_line(step, &key, at)?;
            if step.target == Some(Target::Host) {
                m.host_steps.push((key, line));
                continue;
            }
            if let Some(user) = &step.user {
                m.note(
                    &key,
                    format!("`user: {user}` is not kept: steps run as the remote user"),
                );
            }
            if step.timeout_ms.is_some() {
                m.note(&key, "`timeoutMs` is not kept: a step runs to its end");
            }
            lines.push(json!(line));
        }
        if !lines.is_empty() {
            devcell.insert(phase.into(), Value::Array(lines));
            m.note(
                &format!("lifecycle.{phase}"),
                format!(
                    "`customizations.devcell.{phase}`: run by `devcell handoff` ({}), not by `devcell up`",
                    if phase == "afterStart" {
                        "once per container, after it started"
                    } else {
                        "once per host workspace, its marker in devcell's state"
                    }
                ),
            );
        }
    }
    if !devcell.is_empty() {
        let customizations = m
            .config
            .entry("customizations")
            .or_insert_with(|| json!({}));
        if let Some(c) = customizations.as_object_mut() {
            let ours = c.entry("devcell").or_insert_with(|| json!({}));
            if let Some(ours) = ours.as_object_mut() {
                ours.extend(devcell);
            }
        }
    }
    Ok(())
}

/// One command step as a parenthesised `sh` line: `cd`, `env K=V`, the argv, each word
/// quoted; `detach` runs it in the background.
fn step_line(step: &Step, key: &str, at: &Locator<'_>) -> Result<String> {
    let q = crate::formats::shell::quote;
    let mut words = Vec::new();
    for (k, v) in &step.env {
        let v = carried(v, &format!("{key}.env.{k}"), at)?;
        words.push(q(&format!("{k}={v}")));
    }
    if !words.is_empty() {
        words.insert(0, "env".into());
    }
    let command = step.command.clone().unwrap_or_default();
    words.push(q(&carried(&command, &format!("{key}.command"), at)?));
    for (i, a) in step.args.iter().enumerate() {
        words.push(q(&carried(a, &format!("{key}.args[{i}]"), at)?));
    }
    let mut line = words.join(" ");
    if let Some(cwd) = &step.cwd {
        line = format!(
            "cd {} && {line}",
            q(&carried(cwd, &format!("{key}.cwd"), at)?)
        );
    }
    Ok(if step.detach == Some(true) {
        format!("({line}) &")
    } else {
        format!("({line})")
    })
}

/// The host folder of a session store preset, as agent-runner resolves it from the host's
/// environment (`None` when `HOME` is unknown).
pub fn session_store(preset: SessionPreset, env: &BTreeMap<String, String>) -> Option<String> {
    let var = |n: &str| env.get(n).filter(|v| !v.is_empty()).cloned();
    let home = var("HOME");
    let under_home = |p: &str| {
        home.as_ref()
            .map(|h| format!("{}/{p}", h.trim_end_matches('/')))
    };
    match preset {
        SessionPreset::Claude => under_home(".claude/projects"),
        SessionPreset::Codex => under_home(".codex/sessions"),
        SessionPreset::Cursor => under_home(".cursor/chats"),
        SessionPreset::Opencode => var("AGENT_RUNNER_OPENCODE_DATA_DIR")
            .or_else(|| var("OPENCODE_DATA_DIR"))
            .or_else(|| var("XDG_DATA_HOME").map(|d| format!("{d}/opencode")))
            .or_else(|| under_home(".local/share/opencode")),
        SessionPreset::Pi => var("PI_HOME").or_else(|| under_home(".pi")),
    }
}

/// `sessionMounts` and `mounts` → devcontainer.json `mounts` (binds; session stores at the
/// same path, read-write) and the binds the policy judges.
fn map_mounts(
    e: &ManagedEnvironment,
    env: &BTreeMap<String, String>,
    m: &mut Mapped,
    at: &Locator<'_>,
) -> Result<()> {
    let mut binds: Vec<(String, Mount)> = Vec::new();
    match &e.session_mounts {
        None => {}
        Some(SessionMounts::Backend(_)) => {
            m.note(
                "sessionMounts",
                "`backend`: agent-runner mounts the run's backend's store; devcell does not know the backend, so every preset's store is asked for",
            );
            for p in SESSION_PRESETS {
                push_session(p, env, &mut binds, at)?;
            }
        }
        Some(SessionMounts::Presets(list)) => {
            for p in list {
                push_session(*p, env, &mut binds, at)?;
            }
        }
    }
    for (i, d) in e.mounts.iter().enumerate() {
        let key = format!("mounts[{i}]");
        let source = carried(&d.host_path, &format!("{key}.hostPath"), at)?;
        let target = carried(&d.container_path, &format!("{key}.containerPath"), at)?;
        binds.push((
            key,
            Mount {
                kind: MountKind::Bind,
                source: Some(source),
                target,
                read_only: d.mode == MountMode::Ro,
            },
        ));
    }
    if binds.is_empty() {
        return Ok(());
    }
    let strings: Vec<Value> = binds
        .iter()
        .map(|(_, b)| json!(crate::engine::run_args::mount_string(b)))
        .collect();
    m.config.insert("mounts".into(), Value::Array(strings));
    let workspace = "${localWorkspaceFolder}";
    for (key, bind) in binds {
        let source = bind.source.clone().unwrap_or_default();
        // a bind inside the workspace is the workspace's own: no request
        if source == workspace || source.starts_with(&format!("{workspace}/")) {
            continue;
        }
        m.fields.push((Permission::Mount(source), key));
        m.spec.mounts.push(bind);
    }
    Ok(())
}

/// A session store's bind, at the same path.
fn push_session(
    preset: SessionPreset,
    env: &BTreeMap<String, String>,
    binds: &mut Vec<(String, Mount)>,
    at: &Locator<'_>,
) -> Result<()> {
    let name = format!("{preset:?}").to_lowercase();
    let Some(path) = session_store(preset, env) else {
        let (line, column) = at.find("sessionMounts");
        return Err(at.error(
            line,
            column,
            "sessionMounts",
            format!("cannot place the `{name}` session store: `HOME` is not set"),
        ));
    };
    binds.push((
        format!("sessionMounts.{name}"),
        Mount {
            kind: MountKind::Bind,
            source: Some(path.clone()),
            target: path,
            read_only: false,
        },
    ));
    Ok(())
}

/// `network`, `security` and `extraRunArgs` → `runArgs`, `capAdd`, and the container the
/// policy judges.
///
/// Errors: [`ConfigError::Invalid`] for an `extraRunArgs` devcell's engine does not take.
fn map_security(e: &ManagedEnvironment, m: &mut Mapped, at: &Locator<'_>) -> Result<()> {
    let mut run_args: Vec<String> = Vec::new();
    match e.network.as_deref() {
        None | Some("default") | Some("bridge") => {}
        Some(network) => {
            run_args.push(format!("--network={network}"));
            if let Some(p) = crate::security::policy::network_permission(network) {
                m.fields.push((p, "network".into()));
            }
        }
    }
    let security = e.security.clone().unwrap_or_default();
    if !security.cap_add.is_empty() {
        m.config.insert("capAdd".into(), json!(security.cap_add));
        for (i, c) in security.cap_add.iter().enumerate() {
            let cap = crate::security::policy::normalize_cap(c);
            m.fields
                .push((Permission::Capability(cap), format!("security.capAdd[{i}]")));
        }
        m.spec.cap_add = security.cap_add.clone();
    }
    if !security.cap_drop.is_empty() {
        m.note(
            "security.capDrop",
            "not needed: the hardened profile drops every capability",
        );
    }
    if security.read_only_root_filesystem == Some(false) {
        m.writable_root = true;
    }
    match security.selinux_label.as_deref() {
        Some("disable") => run_args.push("--security-opt=label=disable".into()),
        Some(other) => m.note(
            "security.selinuxLabel",
            format!("`{other}` is not kept: devcell labels nothing"),
        ),
        None => {}
    }
    if let Some(userns) = &security.userns {
        m.note(
            "security.userns",
            format!("`{userns}` is not kept: devcell runs as the image's user by its numeric ids"),
        );
    }
    run_args.extend(e.extra_run_args.iter().cloned());
    let mut judged = ContainerSpec::default();
    let no_env = |_: &str| None;
    crate::engine::run_args::apply_run_args(&mut judged, &run_args, &no_env).map_err(|err| {
        let (line, column) = at.find("extraRunArgs");
        at.error_with_hint(
            line,
            column,
            "extraRunArgs",
            err.to_string(),
            "devcell takes the `runArgs` flags docs/security.md lists",
        )
    })?;
    if !e.extra_run_args.is_empty() {
        m.note(
            "extraRunArgs",
            "kept as `runArgs`: each is judged as a repository's `runArgs` are",
        );
    }
    m.spec.network_mode = judged.network_mode;
    m.spec.privileged = judged.privileged;
    m.spec.cap_add.extend(judged.cap_add);
    m.spec.security_opt = judged.security_opt;
    m.spec.devices = judged.devices;
    m.spec.mounts.extend(judged.mounts);
    m.spec.user = judged.user;
    if !run_args.is_empty() {
        m.config.insert("runArgs".into(), json!(run_args));
    }
    Ok(())
}

/// Notes on the keys with no devcell equivalent.
fn map_notes(e: &ManagedEnvironment, m: &mut Mapped) {
    if let Some(engine) = e.engine {
        m.note(
            "engine",
            format!("`{engine:?}`: devcell uses the engine it is set up for").to_lowercase(),
        );
    }
    if e.container_name.is_some() {
        m.note(
            "containerName",
            "not kept: devcell finds its containers by their labels",
        );
    }
    if !e.extra_exec_args.is_empty() {
        m.note(
            "extraExecArgs",
            "not kept: devcell runs every command as the remote user by its numeric ids",
        );
    }
    if !e.vars.is_empty() {
        m.note(
            "vars",
            "agent-runner's run-time inputs: only checked as token names",
        );
    }
    m.note(
        "cwd",
        "the agent starts in the workspace folder in the container",
    );
}

/// Judges the requests with devcell's policy under `opts.profile` and `opts.grants`: the
/// binds, capabilities, network and `runArgs` as a repository's devcontainer.json would be
/// judged, host-targeted steps as host commands, and a writable root (which no `--allow`
/// grants: only the `reference` profile has one).
///
/// Errors: the policy's own (not a refusal: a refused request is a result).
fn judge_requests(
    m: &mut Mapped,
    opts: &ImportOptions,
    profile: &SecurityProfile,
    grants: &Grants,
) -> Result<Vec<ImportRequest>> {
    let input = PolicyInput {
        spec: std::mem::take(&mut m.spec),
        workspace: opts.workspace.clone(),
        host_home: opts.env.get("HOME").map(PathBuf::from),
        remote_user: Some("devcell-import".into()),
        image_user: Some("devcell-import".into()),
        ..PolicyInput::default()
    };
    let judged = configuration_requests(profile, &input, grants)?;
    let mut out: Vec<ImportRequest> = judged
        .iter()
        .map(|r| {
            let field = m
                .fields
                .iter()
                .find(|(p, _)| same_request(p, &r.permission))
                .map(|(_, k)| k.clone())
                .unwrap_or_else(|| "extraRunArgs".to_string());
            ImportRequest::of(&field, r)
        })
        .collect();
    let host = judge(
        profile,
        m.host_steps.iter().map(|(_, line)| {
            (
                Permission::HostCommand(line.as_str().into()),
                Source::DevcontainerJson,
            )
        }),
        grants,
    );
    for ((key, _), r) in m.host_steps.iter().zip(&host) {
        out.push(ImportRequest::of(key, r));
    }
    if m.writable_root {
        let reference = *profile == SecurityProfile::Reference;
        out.push(ImportRequest {
            field: "security.readOnlyRootFilesystem".into(),
            permission: "writableRootFilesystem".into(),
            value: None,
            description: "a writable root file system (the hardened profile's root is read-only, with writable tmpfs where programs write)".into(),
            status: if reference {
                RequestStatus::AllowedByProfile.as_str()
            } else {
                RequestStatus::Refused.as_str()
            },
            grant: (!reference).then(|| "--security-profile reference".to_string()),
        });
    }
    Ok(out)
}

/// Whether the policy's `judged` request is the one the file's key asked for (a bind is
/// judged by its resolved path or the home folder holding it).
fn same_request(asked: &Permission, judged: &Permission) -> bool {
    match (asked, judged) {
        (
            Permission::Mount(a),
            Permission::Mount(j)
            | Permission::HostHome(j)
            | Permission::EngineSocket(j)
            | Permission::UnresolvablePath(j),
        ) => {
            a == j
                || crate::security::policy::is_within(a, j)
                || crate::security::policy::is_within(j, a)
        }
        _ => asked == judged,
    }
}

/// `lifetime` and devcell's counterpart.
fn lifetime_choice(e: &ManagedEnvironment) -> Choice {
    match e.lifetime.unwrap_or(Lifetime::Run) {
        Lifetime::Run => Choice {
            value: "run",
            devcell: "the workspace's container: each handoff of the workspace uses it".into(),
        },
        Lifetime::Group => Choice {
            value: "group",
            devcell:
                "one container shared by a group's handoffs: hand off the same workspace folder"
                    .into(),
        },
    }
}

/// `cleanup.policy` and devcell's counterpart.
fn cleanup_choice(e: &ManagedEnvironment) -> Choice {
    match e
        .cleanup
        .as_ref()
        .and_then(|c| c.policy)
        .unwrap_or(CleanupPolicy::Terminal)
    {
        CleanupPolicy::Terminal => Choice {
            value: "terminal",
            devcell: "remove the container when the work ends: `devcell down` (or `devcell delete`) after the handoff; an agent's exit removes nothing".into(),
        },
        CleanupPolicy::Manual => Choice {
            value: "manual",
            devcell: "devcell's default: an agent's exit removes nothing; `devcell delete` removes the container".into(),
        },
    }
}

mod rules;

#[cfg(test)]
mod tests;
