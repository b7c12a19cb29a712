//! The rules of agent-runner's environment schema that its key list does not say (spec-note
//! 0523, re-read against the published schema: `packages/core/src/core/config/schema.ts` of
//! agent-runner's repository, the `managedContainerEnvironmentSchema` and what it is built
//! from): required and non-empty strings, the enumerations kept as text here, the variable
//! definitions' rules, and the cross-field rules (`hostRoot` or `hostPath`,
//! `onWorkspaceCreate` needs `workspace`, every step names its `target`). A file agent-runner
//! refuses is refused here, at the key that breaks the rule.

use super::steps;
use crate::ops::environment::import_model::{ManagedEnvironment, StepKind, VarDef};

/// The first rule `e` breaks: the key's path (`vars.x.sources`), text to find it by in the
/// file, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation {
    /// The key's path.
    pub path: String,
    /// A text on the line to report (the key's last part).
    pub needle: String,
    /// What is wrong, in agent-runner's terms.
    pub message: String,
}

fn violation(path: impl Into<String>, needle: &str, message: impl Into<String>) -> Violation {
    Violation {
        path: path.into(),
        needle: needle.to_string(),
        message: message.into(),
    }
}

/// Where a variable's value may come from (agent-runner's `VAR_SOURCES`).
const VAR_SOURCES: [&str; 4] = ["cli", "web", "env", "parent"];
/// A variable's types.
const VAR_TYPES: [&str; 4] = ["string", "number", "boolean", "enum"];
/// When a required variable must be given.
const REQUIRED_AT: [&str; 2] = ["initial", "prepare"];

/// The first broken rule, in file order as far as it matters; `None` when `e` follows them.
pub(super) fn first_violation(e: &ManagedEnvironment) -> Option<Violation> {
    non_empty_strings(e)
        .or_else(|| {
            e.vars
                .iter()
                .find_map(|(name, def)| var_violation(name, def))
        })
        .or_else(|| workspace_violation(e))
        .or_else(|| step_violation(e))
}

/// Strings the schema asks to be non-empty once trimmed (`name` untrimmed), and list
/// entries likewise.
fn non_empty_strings(e: &ManagedEnvironment) -> Option<Violation> {
    let blank = |s: &str| s.trim().is_empty();
    if e.name.as_deref().is_some_and(str::is_empty) {
        return Some(violation("name", "name", "must not be empty"));
    }
    for (path, needle, value) in [("cwd", "cwd", &e.cwd), ("image", "image", &e.image)] {
        if blank(value) {
            return Some(violation(path, needle, "must not be empty"));
        }
    }
    if let Some(name) = e.container_name.as_deref().filter(|n| blank(n)) {
        let _ = name;
        return Some(violation(
            "containerName",
            "containerName",
            "must not be empty",
        ));
    }
    let lists: [(&str, &[String]); 2] = [
        ("extraExecArgs", &e.extra_exec_args),
        ("extraRunArgs", &e.extra_run_args),
    ];
    let security = e.security.clone().unwrap_or_default();
    let caps: [(&str, &[String]); 2] = [
        ("security.capDrop", &security.cap_drop),
        ("security.capAdd", &security.cap_add),
    ];
    for (key, list) in lists.into_iter().chain(caps) {
        if let Some(i) = list.iter().position(|s| blank(s)) {
            let needle = key.rsplit('.').next().unwrap_or(key);
            return Some(violation(
                format!("{key}[{i}]"),
                needle,
                "must not be empty",
            ));
        }
    }
    if e.env.keys().any(|k| blank(k)) {
        return Some(violation(
            "env",
            "env",
            "a variable's name must not be empty",
        ));
    }
    for (i, m) in e.mounts.iter().enumerate() {
        for (key, value) in [
            ("hostPath", &m.host_path),
            ("containerPath", &m.container_path),
        ] {
            if blank(value) {
                return Some(violation(
                    format!("mounts[{i}].{key}"),
                    key,
                    "must not be empty",
                ));
            }
        }
    }
    None
}

/// A variable definition's rules: its type, `requiredAt` and `sources` among agent-runner's
/// words, `sources` not empty and without repeats, an `enum` with values, a default of its
/// type.
fn var_violation(name: &str, def: &VarDef) -> Option<Violation> {
    let at = |key: &str| format!("vars.{name}.{key}");
    let kind = def.kind.as_deref().unwrap_or("string");
    if !VAR_TYPES.contains(&kind) {
        return Some(violation(
            at("type"),
            "type",
            format!("`{kind}` is not one of {}", VAR_TYPES.join(", ")),
        ));
    }
    if let Some(when) = def
        .required_at
        .as_deref()
        .filter(|w| !REQUIRED_AT.contains(w))
    {
        return Some(violation(
            at("requiredAt"),
            "requiredAt",
            format!("`{when}` is not one of {}", REQUIRED_AT.join(", ")),
        ));
    }
    if let Some(sources) = &def.sources {
        if sources.is_empty() {
            return Some(violation(at("sources"), "sources", "must not be empty"));
        }
        if let Some(bad) = sources.iter().find(|s| !VAR_SOURCES.contains(&s.as_str())) {
            return Some(violation(
                at("sources"),
                "sources",
                format!("`{bad}` is not one of {}", VAR_SOURCES.join(", ")),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if sources.iter().any(|s| !seen.insert(s)) {
            return Some(violation(
                at("sources"),
                "sources",
                "must not contain duplicates",
            ));
        }
    }
    if kind == "enum" && def.values.as_ref().is_none_or(Vec::is_empty) {
        return Some(violation(
            at("values"),
            name,
            "an `enum` variable needs a non-empty `values` list",
        ));
    }
    if let Some(default) = &def.default
        && !default_fits(default, kind, def.values.as_deref())
    {
        return Some(violation(
            at("default"),
            "default",
            format!("the default does not fit the variable's type `{kind}`"),
        ));
    }
    None
}

/// Whether `value` is a default of `kind` as agent-runner accepts it (a number or a numeric
/// string; a boolean or `true`/`false`/`1`/`0`; one of an `enum`'s values).
fn default_fits(value: &serde_yaml::Value, kind: &str, values: Option<&[String]>) -> bool {
    use serde_yaml::Value;
    match (kind, value) {
        ("string", Value::String(_)) => true,
        ("number", Value::Number(_)) => true,
        ("number", Value::String(s)) => !s.trim().is_empty() && s.trim().parse::<f64>().is_ok(),
        ("boolean", Value::Bool(_)) => true,
        ("boolean", Value::String(s)) => matches!(s.as_str(), "true" | "false" | "1" | "0"),
        ("enum", Value::String(s)) => values.is_some_and(|v| v.contains(s)),
        _ => false,
    }
}

/// `workspace` names `hostRoot` or `hostPath`, not both; a non-empty `onWorkspaceCreate`
/// needs a `workspace`.
fn workspace_violation(e: &ManagedEnvironment) -> Option<Violation> {
    if let Some(w) = &e.workspace {
        if w.host_root.is_some() && w.host_path.is_some() {
            return Some(violation(
                "workspace",
                "hostPath",
                "workspace cannot define both `hostRoot` and `hostPath`",
            ));
        }
        if w.container_path.trim().is_empty() {
            return Some(violation(
                "workspace.containerPath",
                "containerPath",
                "must not be empty",
            ));
        }
    }
    let creates = e
        .lifecycle
        .as_ref()
        .is_some_and(|l| !l.on_workspace_create.is_empty());
    (creates && e.workspace.is_none()).then(|| {
        violation(
            "lifecycle.onWorkspaceCreate",
            "onWorkspaceCreate",
            "`lifecycle.onWorkspaceCreate` requires `workspace`",
        )
    })
}

/// Every step names its `target` (a git-clone step too); a `timeoutMs` is positive.
fn step_violation(e: &ManagedEnvironment) -> Option<Violation> {
    steps(e).into_iter().find_map(|(key, step)| {
        if step.kind == StepKind::GitClone && step.target.is_none() {
            return Some(violation(
                format!("{key}.target"),
                "kind:",
                "a git-clone step needs `target` (`host` or `container`)",
            ));
        }
        (step.timeout_ms == Some(0)).then(|| {
            violation(
                format!("{key}.timeoutMs"),
                "timeoutMs",
                "must be a positive number of milliseconds",
            )
        })
    })
}
