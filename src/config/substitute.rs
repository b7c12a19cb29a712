//! `${…}` variable substitution over a JSON configuration
//! ([spec: variables in devcontainer.json](https://containers.dev/implementors/json_reference/#variables-in-devcontainerjson)).
//!
//! A variable is `${name}` or `${name:arg}` or `${name:arg:default}`: the text between `${`
//! and the first `}` (a line break before the `}` means it is no variable). Substitution
//! applies to every string value of a JSON document, recursively through arrays and objects;
//! object keys are never substituted. Unknown variables (`${PATH}`, `${foo}`) and variables
//! whose phase has not come yet are left verbatim.
//!
//! Three phases, as in the reference CLI:
//!
//! 1. [`substitute_local`] when the config is read: `${localEnv:VAR[:default]}` (alias
//!    `${env:…}`), `${localWorkspaceFolder}`, `${localWorkspaceFolderBasename}`,
//!    `${containerWorkspaceFolder}`, `${containerWorkspaceFolderBasename}`.
//! 2. [`substitute_devcontainer_id`] once the container's id labels are known:
//!    `${devcontainerId}`.
//! 3. [`substitute_container_env`] once the container exists: `${containerEnv:VAR[:default]}`
//!    against the container's configured environment.
//!
//! Environment lookups: a set variable yields its value (also when empty); an unset one yields
//! the default when given, else the empty string. The default is everything after the second
//! colon, colons included (`${localEnv:URL:http://x:1}` defaults to `http://x:1`; the
//! reference CLI keeps only `http`, see spec-notes/0020).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use indexmap::IndexMap;
use serde_json::Value;

use super::error::{ConfigError, Result};

/// Values known in phase 1 (when the config is read on the host).
///
/// A `None` folder leaves its variables verbatim. `Debug` shows environment variable names,
/// never their values.
#[derive(Clone, Copy)]
pub struct LocalContext<'a> {
    /// Host path of the opened workspace folder (as given, not the git root):
    /// `${localWorkspaceFolder}`.
    pub local_workspace_folder: Option<&'a str>,
    /// The effective in-container workspace folder, already substituted:
    /// `${containerWorkspaceFolder}`.
    pub container_workspace_folder: Option<&'a str>,
    /// Host environment for `${localEnv:…}` / `${env:…}` (names are case-sensitive).
    pub env: &'a HashMap<String, String>,
    /// The config file, named in errors.
    pub config_file: Option<&'a Path>,
}

impl std::fmt::Debug for LocalContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.env.keys().collect();
        names.sort();
        f.debug_struct("LocalContext")
            .field("local_workspace_folder", &self.local_workspace_folder)
            .field(
                "container_workspace_folder",
                &self.container_workspace_folder,
            )
            .field("env (names only)", &names)
            .field("config_file", &self.config_file)
            .finish()
    }
}

/// One `${…}` occurrence, split into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable<'s> {
    /// The whole occurrence, `${` and `}` included.
    pub text: &'s str,
    /// The text before the first colon (`localEnv`).
    pub name: &'s str,
    /// The text between the first and second colon (`HOME`); `None` without a colon.
    pub arg: Option<&'s str>,
    /// Everything after the second colon, colons included; `None` without a second colon.
    pub default: Option<&'s str>,
}

impl<'s> Variable<'s> {
    fn parse(text: &'s str, inner: &'s str) -> Self {
        match inner.split_once(':') {
            None => Variable {
                text,
                name: inner,
                arg: None,
                default: None,
            },
            Some((name, rest)) => match rest.split_once(':') {
                None => Variable {
                    text,
                    name,
                    arg: Some(rest),
                    default: None,
                },
                Some((arg, default)) => Variable {
                    text,
                    name,
                    arg: Some(arg),
                    default: Some(default),
                },
            },
        }
    }
}

/// Why a variable could not be resolved (the walker adds the property path).
#[derive(Debug)]
struct VariableError {
    message: String,
    hint: Option<String>,
}

/// Phase 1: substitutes the host-side variables in every string value of `value`, in place.
///
/// # Errors
/// [`ConfigError::Substitution`] when `${localEnv}` / `${env}` names no variable
/// (`${localEnv}`, `${localEnv:}`), with the property path of the string.
pub fn substitute_local(value: &mut Value, ctx: &LocalContext<'_>) -> Result<()> {
    walk_located(value, ctx.config_file, &mut |var| {
        local_replacement(var, ctx)
    })
}

/// Which host variables phase 1 reads, per string value: property path (`containerEnv.TOKEN`,
/// `mounts[0]`, `build.args.KEY`, rendered as in substitution errors) → the names its
/// `${localEnv:NAME}` / `${env:NAME}` occurrences read (with or without a default; set or
/// not). Names only, never values: the security policy judges what crosses into the container
/// from this record instead of parsing strings again (spec-note 0440).
pub type HostEnvReads = BTreeMap<String, BTreeSet<String>>;

/// The host variables `value`'s string values would read in phase 1 ([`HostEnvReads`]),
/// found by the same scanner [`substitute_local`] uses. Occurrences without a name
/// (`${localEnv}`) are not reads: substitution refuses them.
pub fn local_env_reads(value: &Value) -> HostEnvReads {
    let mut reads = HostEnvReads::new();
    let mut segments = Vec::new();
    collect_reads(value, &mut segments, &mut reads);
    reads
}

/// Phase 1 as [`substitute_local`], returning what it read ([`local_env_reads`] of `value`
/// before substitution: replacement text is never rescanned, so that is all it read).
///
/// # Errors
/// As [`substitute_local`].
pub fn substitute_local_recorded(
    value: &mut Value,
    ctx: &LocalContext<'_>,
) -> Result<HostEnvReads> {
    let reads = local_env_reads(value);
    substitute_local(value, ctx)?;
    Ok(reads)
}

/// Walks `value` outermost-first (`segments` is the path so far) recording env reads.
fn collect_reads(value: &Value, segments: &mut Vec<Segment>, reads: &mut HostEnvReads) {
    match value {
        Value::String(text) => {
            let mut names = BTreeSet::new();
            let _ = replace_variables(text, &mut |var: &Variable<'_>| {
                if matches!(var.name, "localEnv" | "env")
                    && let Some(name) = var.arg.filter(|n| !n.is_empty())
                {
                    names.insert(name.to_owned());
                }
                Ok(None)
            });
            if !names.is_empty() {
                let innermost_first: Vec<&Segment> = segments.iter().rev().collect();
                reads
                    .entry(render_path_refs(&innermost_first))
                    .or_default()
                    .extend(names);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                segments.push(Segment::Index(index));
                collect_reads(item, segments, reads);
                segments.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                segments.push(Segment::Key(key.clone()));
                collect_reads(item, segments, reads);
                segments.pop();
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Phase 1 on a single string (e.g. the `workspaceFolder` before the rest of the config).
///
/// # Errors
/// As [`substitute_local`], with an empty property path.
pub fn substitute_local_str(text: &str, ctx: &LocalContext<'_>) -> Result<String> {
    let mut value = Value::String(text.to_owned());
    substitute_local(&mut value, ctx)?;
    Ok(match value {
        Value::String(s) => s,
        _ => text.to_owned(),
    })
}

/// Phase 2: replaces `${devcontainerId}` with `id` in every string value of `value`.
///
/// `id` is [`super::id::devcontainer_id`] of the container's id labels. Applied to the whole
/// config (the reference CLI's scope, a superset of the spec's property list; see
/// spec-notes/0024). Never fails.
pub fn substitute_devcontainer_id(value: &mut Value, id: &str) {
    let result = walk(value, &mut |var| {
        Ok((var.name == "devcontainerId").then(|| id.to_owned()))
    });
    debug_assert!(result.is_ok(), "devcontainerId substitution cannot fail");
}

/// Phase 3: substitutes `${containerEnv:VAR[:default]}` in every string value of `value`,
/// against the container's configured environment (Docker inspect `Config.Env`, see
/// [`env_from_list`]).
///
/// # Errors
/// [`ConfigError::Substitution`] when `${containerEnv}` names no variable.
pub fn substitute_container_env(
    value: &mut Value,
    container_env: &IndexMap<String, String>,
) -> Result<()> {
    walk_located(value, None, &mut |var| {
        if var.name == "containerEnv" {
            lookup(var, |name| container_env.get(name).map(String::as_str)).map(Some)
        } else {
            Ok(None)
        }
    })
}

/// Turns a `NAME=value` list (Docker's `Config.Env`) into a map; the value is everything after
/// the first `=`, an entry without `=` maps to the empty string, later duplicates win.
pub fn env_from_list<S: AsRef<str>>(list: &[S]) -> IndexMap<String, String> {
    list.iter()
        .map(|entry| {
            let entry = entry.as_ref();
            match entry.split_once('=') {
                Some((name, value)) => (name.to_owned(), value.to_owned()),
                None => (entry.to_owned(), String::new()),
            }
        })
        .collect()
}

/// Replaces the variables of one string: `replace` returns `Some(text)` to substitute,
/// `None` to keep the occurrence verbatim. Returns `None` when nothing changed.
fn replace_variables<F>(
    text: &str,
    replace: &mut F,
) -> std::result::Result<Option<String>, VariableError>
where
    F: FnMut(&Variable<'_>) -> std::result::Result<Option<String>, VariableError>,
{
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find("${") {
        let start = search + found;
        let inner_start = start + 2;
        let Some(stop) = text[inner_start..].find(['}', '\n', '\r', '\u{2028}', '\u{2029}']) else {
            break;
        };
        let close = inner_start + stop;
        if !text[close..].starts_with('}') {
            // A line break inside: this `${` starts no variable; a later one may.
            search = start + 1;
            continue;
        }
        let variable = Variable::parse(&text[start..=close], &text[inner_start..close]);
        if let Some(replacement) = replace(&variable)? {
            let buffer = out.get_or_insert_with(|| String::with_capacity(text.len()));
            buffer.push_str(&text[copied..start]);
            buffer.push_str(&replacement);
            copied = close + 1;
        }
        search = close + 1;
    }
    if let Some(buffer) = out.as_mut() {
        buffer.push_str(&text[copied..]);
    }
    Ok(out)
}

/// One step of a property path, collected while an error propagates.
enum Segment {
    Key(String),
    Index(usize),
}

struct LocatedError {
    segments: Vec<Segment>,
    error: VariableError,
}

fn walk<F>(value: &mut Value, replace: &mut F) -> std::result::Result<(), LocatedError>
where
    F: FnMut(&Variable<'_>) -> std::result::Result<Option<String>, VariableError>,
{
    match value {
        Value::String(text) => match replace_variables(text, replace) {
            Ok(Some(new)) => *text = new,
            Ok(None) => {}
            Err(error) => {
                return Err(LocatedError {
                    segments: Vec::new(),
                    error,
                });
            }
        },
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                walk(item, replace).map_err(|mut e| {
                    e.segments.push(Segment::Index(index));
                    e
                })?;
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                walk(item, replace).map_err(|mut e| {
                    e.segments.push(Segment::Key(key.clone()));
                    e
                })?;
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
    Ok(())
}

fn walk_located<F>(value: &mut Value, file: Option<&Path>, replace: &mut F) -> Result<()>
where
    F: FnMut(&Variable<'_>) -> std::result::Result<Option<String>, VariableError>,
{
    walk(value, replace).map_err(|located| ConfigError::Substitution {
        file: file.map(Path::to_path_buf),
        path: render_path(&located.segments),
        message: located.error.message,
        hint: located.error.hint,
    })
}

/// Renders segments collected innermost-first as `a.b[0]."x.y"`.
fn render_path(segments: &[Segment]) -> String {
    render_path_refs(&segments.iter().collect::<Vec<_>>())
}

/// [`render_path`] over borrowed segments (innermost first).
fn render_path_refs(segments: &[&Segment]) -> String {
    let mut path = String::new();
    for segment in segments.iter().rev() {
        match *segment {
            Segment::Index(index) => path.push_str(&format!("[{index}]")),
            Segment::Key(key) => {
                if !path.is_empty() {
                    path.push('.');
                }
                let plain = key
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
                if plain {
                    path.push_str(key);
                } else {
                    path.push_str(&Value::String(key.clone()).to_string());
                }
            }
        }
    }
    path
}

fn local_replacement(
    var: &Variable<'_>,
    ctx: &LocalContext<'_>,
) -> std::result::Result<Option<String>, VariableError> {
    Ok(match var.name {
        "localEnv" | "env" => Some(lookup(var, |name| ctx.env.get(name).map(String::as_str))?),
        "localWorkspaceFolder" => ctx.local_workspace_folder.map(str::to_owned),
        "localWorkspaceFolderBasename" => ctx
            .local_workspace_folder
            .map(|folder| posix_basename(folder).to_owned()),
        "containerWorkspaceFolder" => ctx.container_workspace_folder.map(str::to_owned),
        "containerWorkspaceFolderBasename" => ctx
            .container_workspace_folder
            .map(|folder| posix_basename(folder).to_owned()),
        _ => None,
    })
}

/// An environment lookup: the value when set (even empty), else the default, else `""`.
fn lookup<'e>(
    var: &Variable<'_>,
    get: impl Fn(&str) -> Option<&'e str>,
) -> std::result::Result<String, VariableError> {
    match var.arg {
        Some(name) if !name.is_empty() => {
            Ok(get(name).or(var.default).unwrap_or_default().to_owned())
        }
        _ => Err(VariableError {
            message: format!("`{}` names no environment variable", var.text),
            hint: Some(format!(
                "write `${{{}:NAME}}` or `${{{}:NAME:default}}`",
                var.name, var.name
            )),
        }),
    }
}

/// The last segment of a `/`-separated path, ignoring trailing slashes (`/` gives `""`).
pub(crate) fn posix_basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    match trimmed.rfind('/') {
        Some(slash) => &trimmed[slash + 1..],
        None => trimmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env() -> HashMap<String, String> {
        HashMap::from([
            ("HOME".to_owned(), "/home/me".to_owned()),
            ("EMPTY".to_owned(), String::new()),
            ("URL".to_owned(), "https://set.example:8443/p".to_owned()),
            ("lower".to_owned(), "case".to_owned()),
        ])
    }

    fn ctx(env: &HashMap<String, String>) -> LocalContext<'_> {
        LocalContext {
            local_workspace_folder: Some("/src/my project"),
            container_workspace_folder: Some("/workspaces/my project/sub"),
            env,
            config_file: Some(Path::new("/src/my project/.devcontainer/devcontainer.json")),
        }
    }

    /// Every phase-1 form, one row each (checklist items 10-13, 15).
    #[test]
    fn local_variable_forms() {
        let env = env();
        let cases: &[(&str, &str)] = &[
            // item 10
            ("${localEnv:HOME}", "/home/me"),
            ("${localEnv:UNSET_VAR}", ""),
            // item 11
            ("${localEnv:UNSET_VAR:fallback}", "fallback"),
            ("${localEnv:HOME:fallback}", "/home/me"),
            ("${localEnv:EMPTY:fallback}", ""),
            ("${localEnv:EMPTY}", ""),
            ("${localEnv:UNSET_VAR:}", ""),
            // colon defaults kept whole (spec-notes/0020)
            ("${localEnv:UNSET_VAR:http://a:1/b}", "http://a:1/b"),
            ("${localEnv:URL:http://a:1/b}", "https://set.example:8443/p"),
            ("${localEnv:UNSET_VAR:a:b:c}", "a:b:c"),
            // names are case-sensitive
            ("${localEnv:LOWER}", ""),
            ("${localEnv:lower}", "case"),
            // `env` alias (spec-notes/0021)
            ("${env:HOME}", "/home/me"),
            ("${env:UNSET_VAR:d}", "d"),
            // item 12
            ("${localWorkspaceFolder}", "/src/my project"),
            ("${localWorkspaceFolderBasename}", "my project"),
            // item 13
            ("${containerWorkspaceFolder}", "/workspaces/my project/sub"),
            ("${containerWorkspaceFolderBasename}", "sub"),
            // item 15: unknown and deferred variables stay verbatim
            ("${PATH}", "${PATH}"),
            ("${foo}", "${foo}"),
            ("${workspaceFolder}/x", "${workspaceFolder}/x"),
            ("${containerEnv:PATH}", "${containerEnv:PATH}"),
            ("${containerEnv:PATH:/bin}", "${containerEnv:PATH:/bin}"),
            ("${devcontainerId}", "${devcontainerId}"),
            ("${LOCALENV:HOME}", "${LOCALENV:HOME}"),
            // several in one string, surrounding text kept
            (
                "a-${localEnv:HOME}-${PATH}-${localWorkspaceFolderBasename}-z",
                "a-/home/me-${PATH}-my project-z",
            ),
            ("${localEnv:HOME}${localEnv:HOME}", "/home/me/home/me"),
            // no variable syntax
            ("$HOME", "$HOME"),
            ("${", "${"),
            ("${localEnv:HOME", "${localEnv:HOME"),
            ("}${}", "}${}"),
            ("plain", "plain"),
            ("", ""),
            // non-greedy: the first `}` closes; no nesting
            // inner text `localEnv:${localEnv:HOME`: variable `${localEnv`, unset, default `HOME`
            ("${localEnv:${localEnv:HOME}}", "HOME}"),
            // a line break inside means no variable; the next `${` still counts
            (
                "${local\nEnv:HOME} ${localEnv:HOME}",
                "${local\nEnv:HOME} /home/me",
            ),
            // replacement text is not substituted again
            ("${localEnv:UNSET:${foo}", "${foo"),
            // unicode around variables
            ("ü${localEnv:HOME}ß", "ü/home/meß"),
        ];
        for (input, expected) in cases {
            let got = substitute_local_str(input, &ctx(&env)).unwrap();
            assert_eq!(&got, expected, "input {input:?}");
        }
    }

    /// Every `${localEnv:…}`/`${env:…}` read is recorded by property path, names only
    /// (spec-note 0440).
    #[test]
    fn local_env_reads_are_recorded_per_value() {
        let env = env();
        let mut value = json!({
            "containerEnv": {"TOKEN": "${localEnv:GH_TOKEN}", "PLAIN": "x ${localWorkspaceFolder}"},
            "mounts": ["source=${localEnv:HOME}/.x,target=/x", {"source": "${env:SRC:/d}"}],
            "build": {"args": {"K": "${localEnv:A}-${localEnv:B:dflt}-${localEnv:A}"}},
            "odd.key": ["${localEnv:C}"],
            "bad": "${localEnv:}",
            "later": "${containerEnv:PATH} ${devcontainerId}"
        });
        let reads = local_env_reads(&value);
        let expect = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(reads.len(), 5, "{reads:?}");
        assert_eq!(reads["containerEnv.TOKEN"], expect(&["GH_TOKEN"]));
        assert_eq!(reads["mounts[0]"], expect(&["HOME"]));
        assert_eq!(reads["mounts[1].source"], expect(&["SRC"]));
        assert_eq!(reads["build.args.K"], expect(&["A", "B"]));
        assert_eq!(reads[r#""odd.key"[0]"#], expect(&["C"]));
        // the values never appear
        assert!(!format!("{reads:?}").contains("/home/me"));
        value.as_object_mut().unwrap().remove("bad");
        let recorded = substitute_local_recorded(&mut value, &ctx(&env)).unwrap();
        assert_eq!(recorded, reads);
        assert_eq!(value["mounts"][0], "source=/home/me/.x,target=/x");
    }

    #[test]
    fn local_variables_without_context_stay_verbatim() {
        let env = env();
        let none = LocalContext {
            local_workspace_folder: None,
            container_workspace_folder: None,
            env: &env,
            config_file: None,
        };
        for input in [
            "${localWorkspaceFolder}",
            "${localWorkspaceFolderBasename}",
            "${containerWorkspaceFolder}",
            "${containerWorkspaceFolderBasename}",
        ] {
            assert_eq!(substitute_local_str(input, &none).unwrap(), input);
        }
    }

    /// `${localEnv}` without a name is an error naming the property (spec-notes/0022).
    #[test]
    fn local_env_without_name_is_an_error() {
        let env = env();
        for bad in ["${localEnv}", "${localEnv:}", "${env}", "x ${localEnv::d}"] {
            let mut value = json!({"remoteEnv": {"A": ["ok", bad]}});
            let err = substitute_local(&mut value, &ctx(&env)).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("remoteEnv.A[1]: `${"), "{text}");
            assert!(text.contains("names no environment variable"), "{text}");
            assert!(text.starts_with("/src/my project/.devcontainer/devcontainer.json: "));
            match err {
                ConfigError::Substitution { hint, .. } => {
                    assert!(hint.unwrap().contains(":NAME}"));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    /// All string values, recursively; keys, numbers, booleans and null untouched.
    #[test]
    fn substitutes_values_not_keys() {
        let env = env();
        let mut value = json!({
            "${localEnv:HOME}": "${localEnv:HOME}",
            "n": 1, "b": true, "z": null,
            "list": ["${localWorkspaceFolderBasename}", 2, ["${localEnv:HOME}"]],
            "features": {"ghcr.io/x/y:1": {"version": "${localEnv:UNSET:latest}"}},
            "customizations": {"vscode": {"settings": {"p": "${containerWorkspaceFolder}"}}}
        });
        substitute_local(&mut value, &ctx(&env)).unwrap();
        assert_eq!(
            value,
            json!({
                "${localEnv:HOME}": "/home/me",
                "n": 1, "b": true, "z": null,
                "list": ["my project", 2, ["/home/me"]],
                "features": {"ghcr.io/x/y:1": {"version": "latest"}},
                "customizations": {"vscode": {"settings": {"p": "/workspaces/my project/sub"}}}
            })
        );
        // key order is preserved
        let keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "${localEnv:HOME}",
                "n",
                "b",
                "z",
                "list",
                "features",
                "customizations"
            ]
        );
    }

    #[test]
    fn error_path_quotes_unusual_keys() {
        let env = env();
        let mut value = json!({"features": {"ghcr.io/x/y:1": {"opt": "${localEnv}"}}});
        let err = substitute_local(&mut value, &ctx(&env)).unwrap_err();
        assert!(
            err.to_string()
                .contains(r#"features."ghcr.io/x/y:1".opt: `${localEnv}`"#),
            "{err}"
        );
    }

    /// Checklist item 14 (pure part): `${containerEnv:…}` in phase 3.
    #[test]
    fn container_env_forms() {
        let container_env = env_from_list(&["PATH=/usr/bin:/bin", "EMPTY=", "EQ=a=b", "NOVALUE"]);
        let cases: &[(&str, &str)] = &[
            ("${containerEnv:PATH}:/x", "/usr/bin:/bin:/x"),
            ("${containerEnv:UNSET}", ""),
            ("${containerEnv:UNSET:/d:/e}", "/d:/e"),
            ("${containerEnv:EMPTY:d}", ""),
            ("${containerEnv:EQ}", "a=b"),
            ("${containerEnv:NOVALUE:d}", ""),
            ("${localEnv:HOME}", "${localEnv:HOME}"),
            ("${devcontainerId}", "${devcontainerId}"),
            ("${PATH}", "${PATH}"),
        ];
        for (input, expected) in cases {
            let mut value = json!({"remoteEnv": {"PATH": input}});
            substitute_container_env(&mut value, &container_env).unwrap();
            assert_eq!(value["remoteEnv"]["PATH"], *expected, "input {input:?}");
        }
        let mut bad = json!(["${containerEnv}"]);
        let err = substitute_container_env(&mut bad, &container_env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "[0]: `${containerEnv}` names no environment variable"
        );
    }

    #[test]
    fn devcontainer_id_everywhere() {
        let mut value = json!({
            "name": "n-${devcontainerId}",
            "mounts": [{"source": "vol-${devcontainerId}", "target": "/x"}],
            "x": "${devcontainerId:ignored} ${devcontainerid} ${localEnv:HOME}"
        });
        substitute_devcontainer_id(&mut value, "abc");
        assert_eq!(
            value,
            json!({
                "name": "n-abc",
                "mounts": [{"source": "vol-abc", "target": "/x"}],
                "x": "abc ${devcontainerid} ${localEnv:HOME}"
            })
        );
    }

    /// Every string of up to 5 characters over a syntax-heavy alphabet (multi-byte characters
    /// and line breaks included): no panic, and with no known variable name the text is kept.
    #[test]
    fn exhaustive_short_strings_keep_unknown_text() {
        let env = env();
        let alphabet = ['$', '{', '}', ':', '\n', '\u{2028}', 'é', 'x'];
        let mut current = vec![String::new()];
        for _ in 0..5 {
            let mut next = Vec::with_capacity(current.len() * alphabet.len());
            for prefix in &current {
                for c in alphabet {
                    let text = format!("{prefix}{c}");
                    let got = substitute_local_str(&text, &ctx(&env)).unwrap();
                    assert_eq!(got, text);
                    let mut value = Value::String(text.clone());
                    substitute_devcontainer_id(&mut value, "id");
                    assert_eq!(value, Value::String(text.clone()));
                    next.push(text);
                }
            }
            current = next;
        }
    }

    #[test]
    fn debug_hides_environment_values() {
        let env = env();
        let text = format!("{:?}", ctx(&env));
        assert!(
            text.contains("HOME") && !text.contains("/home/me"),
            "{text}"
        );
    }

    #[test]
    fn variable_parse_parts() {
        let v = Variable::parse("${a:b:c:d}", "a:b:c:d");
        assert_eq!((v.name, v.arg, v.default), ("a", Some("b"), Some("c:d")));
        let v = Variable::parse("${a}", "a");
        assert_eq!((v.name, v.arg, v.default), ("a", None, None));
        let v = Variable::parse("${a:}", "a:");
        assert_eq!((v.name, v.arg, v.default), ("a", Some(""), None));
    }

    #[test]
    fn basename_rules() {
        for (path, base) in [
            ("/a/b", "b"),
            ("/a/b/", "b"),
            ("/", ""),
            ("b", "b"),
            ("/a/x,y z", "x,y z"),
        ] {
            assert_eq!(posix_basename(path), base, "{path}");
        }
    }
}
