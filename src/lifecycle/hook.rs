//! The typed model of lifecycle hooks: which hooks exist (in spec order) and the three command
//! forms ([spec: lifecycle scripts](https://containers.dev/implementors/json_reference/#lifecycle-scripts),
//! [parallel execution](https://containers.dev/implementors/spec/#parallel-lifecycle-script-execution)).

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;

use super::error::{LifecycleError, Result};
use super::hook_name::LifecycleHook;

/// One command that is not itself parallel: the string or array form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum SimpleCommand {
    /// String form: run as `/bin/sh -c <string>`.
    Shell(String),
    /// Array form: the argv, executed directly without a shell.
    Exec(Vec<String>),
}

impl SimpleCommand {
    /// The argv to execute: `["/bin/sh", "-c", s]` for [`Shell`](Self::Shell), the array itself
    /// for [`Exec`](Self::Exec).
    pub fn argv(&self) -> Vec<String> {
        match self {
            SimpleCommand::Shell(script) => {
                vec!["/bin/sh".to_string(), "-c".to_string(), script.clone()]
            }
            SimpleCommand::Exec(argv) => argv.clone(),
        }
    }

    /// A one-line human summary for logs and results: the script, or the argv joined by
    /// spaces with POSIX shell quoting where an element needs it (`sh -c 'echo a > b'`; the
    /// reference CLI joins without quoting, which misstates what runs). Newlines are shown as `⏎`, and the summary is cut at
    /// 200 characters with `…`.
    pub fn summary(&self) -> String {
        let text = match self {
            SimpleCommand::Shell(script) => script.trim().to_string(),
            SimpleCommand::Exec(argv) => {
                shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
            }
        };
        let one_line = text.replace("\r\n", "⏎").replace('\n', "⏎");
        if one_line.chars().count() > 200 {
            let cut: String = one_line.chars().take(199).collect();
            format!("{cut}…")
        } else {
            one_line
        }
    }
}

/// A lifecycle hook's value from one source, in one of the spec's three forms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum HookCommand {
    /// String form: run as `/bin/sh -c <string>`.
    Shell(String),
    /// Array form: argv executed directly without a shell.
    Exec(Vec<String>),
    /// Object form: every entry runs concurrently; the stage fails if any entry fails, after all
    /// entries have finished. Keys are labels (used to prefix output), in document order.
    Parallel(IndexMap<String, SimpleCommand>),
}

impl HookCommand {
    /// Parses one source's hook value.
    ///
    /// Accepted: a string; an array of strings; an object whose values are strings or arrays of
    /// strings. Returns `Ok(None)` for a no-op: `null`, a string that is empty after trimming,
    /// an empty array, or an object with no non-empty entries (object entries that are empty
    /// are dropped; spec-notes/0100). Anything else is [`LifecycleError::InvalidHook`], naming
    /// `path` (the property path of `value`) extended to the offending element.
    pub fn parse(hook: LifecycleHook, path: &str, value: &Value) -> Result<Option<HookCommand>> {
        match value {
            Value::Null => Ok(None),
            Value::Object(entries) => {
                let mut parallel = IndexMap::new();
                for (name, entry) in entries {
                    let entry_path = format!("{path}.{}", property_segment(name));
                    let parsed = match entry {
                        Value::String(_) | Value::Array(_) | Value::Null => {
                            parse_simple(hook, &entry_path, entry)?
                        }
                        other => {
                            return Err(invalid(
                                hook,
                                entry_path,
                                "a string or an array of strings",
                                other,
                            ));
                        }
                    };
                    if let Some(command) = parsed {
                        parallel.insert(name.clone(), command);
                    }
                }
                Ok((!parallel.is_empty()).then_some(HookCommand::Parallel(parallel)))
            }
            Value::String(_) | Value::Array(_) => {
                Ok(parse_simple(hook, path, value)?.map(|simple| match simple {
                    SimpleCommand::Shell(s) => HookCommand::Shell(s),
                    SimpleCommand::Exec(v) => HookCommand::Exec(v),
                }))
            }
            other => Err(invalid(
                hook,
                path.to_string(),
                "a string, an array of strings, or an object",
                other,
            )),
        }
    }

    /// A one-line summary (see [`SimpleCommand::summary`]); for the object form, the entries
    /// as `name: summary` separated by `; `.
    pub fn summary(&self) -> String {
        match self {
            HookCommand::Shell(s) => SimpleCommand::Shell(s.clone()).summary(),
            HookCommand::Exec(v) => SimpleCommand::Exec(v.clone()).summary(),
            HookCommand::Parallel(entries) => entries
                .iter()
                .map(|(name, command)| format!("{name}: {}", command.summary()))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// The commands to run, each with its entry name (`None` unless the object form).
    pub fn entries(&self) -> Vec<(Option<&str>, SimpleCommand)> {
        match self {
            HookCommand::Shell(s) => vec![(None, SimpleCommand::Shell(s.clone()))],
            HookCommand::Exec(v) => vec![(None, SimpleCommand::Exec(v.clone()))],
            HookCommand::Parallel(entries) => entries
                .iter()
                .map(|(name, command)| (Some(name.as_str()), command.clone()))
                .collect(),
        }
    }
}

/// Parses a string or array of strings; `Ok(None)` for the empty forms and `null`.
fn parse_simple(hook: LifecycleHook, path: &str, value: &Value) -> Result<Option<SimpleCommand>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(SimpleCommand::Shell(s.clone()))),
        Value::Array(items) => {
            if items.is_empty() {
                return Ok(None);
            }
            let mut argv = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => argv.push(s.clone()),
                    other => {
                        return Err(invalid(hook, format!("{path}[{i}]"), "a string", other));
                    }
                }
            }
            Ok(Some(SimpleCommand::Exec(argv)))
        }
        other => Err(invalid(
            hook,
            path.to_string(),
            "a string or an array of strings",
            other,
        )),
    }
}

fn invalid(
    hook: LifecycleHook,
    path: String,
    expected: &'static str,
    found: &Value,
) -> LifecycleError {
    LifecycleError::InvalidHook {
        hook,
        path,
        expected,
        found: describe(found),
    }
}

/// Describes a JSON value for an error message: its type, and short scalars verbatim.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "`null`".to_string(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => format!("number `{n}`"),
        Value::String(s) => format!("string `{s}`"),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

/// A property-path segment: bare when it is an identifier, else quoted.
fn property_segment(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_string()
    } else {
        serde_json::to_string(name).unwrap_or_else(|_| name.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<Option<HookCommand>> {
        HookCommand::parse(
            LifecycleHook::PostCreateCommand,
            "postCreateCommand",
            &value,
        )
    }

    #[test]
    fn hooks_are_ordered_as_the_spec_runs_them() {
        let mut shuffled = vec![
            LifecycleHook::PostAttachCommand,
            LifecycleHook::OnCreateCommand,
            LifecycleHook::PostStartCommand,
            LifecycleHook::InitializeCommand,
            LifecycleHook::PostCreateCommand,
            LifecycleHook::UpdateContentCommand,
        ];
        shuffled.sort();
        assert_eq!(shuffled, LifecycleHook::ALL.to_vec());
        assert_eq!(&LifecycleHook::ALL[1..], &LifecycleHook::CONTAINER[..]);
    }

    #[test]
    fn hook_names_round_trip() {
        for hook in LifecycleHook::ALL {
            assert_eq!(LifecycleHook::from_property(hook.property()), Some(hook));
            assert_eq!(serde_json::to_value(hook).unwrap(), json!(hook.property()));
        }
        assert_eq!(LifecycleHook::from_property("postCreateCommands"), None);
        assert_eq!(
            LifecycleHook::PostStartCommand.merged_property(),
            Some("postStartCommands")
        );
        assert_eq!(LifecycleHook::InitializeCommand.merged_property(), None);
    }

    #[test]
    fn parse_string_is_shell_form() {
        assert_eq!(
            parse(json!("npm ci && npm test")).unwrap(),
            Some(HookCommand::Shell("npm ci && npm test".into()))
        );
        assert_eq!(
            SimpleCommand::Shell("echo $((1+1))".into()).argv(),
            vec!["/bin/sh", "-c", "echo $((1+1))"]
        );
    }

    #[test]
    fn parse_array_is_exec_form_without_shell() {
        let parsed = parse(json!(["echo", "a'b"])).unwrap();
        assert_eq!(
            parsed,
            Some(HookCommand::Exec(vec!["echo".into(), "a'b".into()]))
        );
        assert_eq!(
            SimpleCommand::Exec(vec!["echo".into(), "a'b".into()]).argv(),
            vec!["echo", "a'b"]
        );
    }

    #[test]
    fn parse_object_is_parallel_form_in_document_order() {
        let parsed = parse(json!({"b": "make", "a": ["npm", "ci"]}))
            .unwrap()
            .unwrap();
        let HookCommand::Parallel(entries) = &parsed else {
            panic!("expected the object form, got {parsed:?}");
        };
        assert_eq!(entries.keys().collect::<Vec<_>>(), vec!["b", "a"]);
        assert_eq!(entries["b"], SimpleCommand::Shell("make".into()));
        assert_eq!(
            entries["a"],
            SimpleCommand::Exec(vec!["npm".into(), "ci".into()])
        );
        assert_eq!(parsed.summary(), "b: make; a: npm ci");
    }

    #[test]
    fn parse_empty_forms_are_no_ops() {
        for value in [json!(""), json!("  \n"), json!([]), json!({}), json!(null)] {
            assert_eq!(parse(value.clone()).unwrap(), None, "{value}");
        }
        // An object whose entries are all empty is a no-op; empty entries are dropped.
        assert_eq!(parse(json!({"a": "", "b": []})).unwrap(), None);
        assert_eq!(
            parse(json!({"a": "", "b": "true"})).unwrap(),
            Some(HookCommand::Parallel(IndexMap::from([(
                "b".to_string(),
                SimpleCommand::Shell("true".into())
            )])))
        );
    }

    #[test]
    fn parse_unknown_forms_name_path_expected_and_found() {
        let cases = [
            (
                json!(42),
                "postCreateCommand",
                "a string, an array of strings, or an object",
                "number `42`",
            ),
            (
                json!(true),
                "postCreateCommand",
                "a string, an array of strings, or an object",
                "boolean `true`",
            ),
            (
                json!(["echo", 1]),
                "postCreateCommand[1]",
                "a string",
                "number `1`",
            ),
            (
                json!({"x": {"y": "z"}}),
                "postCreateCommand.x",
                "a string or an array of strings",
                "an object",
            ),
            (
                json!({"a b": ["ok", null]}),
                "postCreateCommand.\"a b\"[1]",
                "a string",
                "`null`",
            ),
        ];
        for (value, want_path, want_expected, want_found) in cases {
            let err = parse(value.clone()).unwrap_err();
            let LifecycleError::InvalidHook {
                hook,
                path,
                expected,
                found,
            } = &err
            else {
                panic!("unexpected error {err:?}");
            };
            assert_eq!(*hook, LifecycleHook::PostCreateCommand);
            assert_eq!(path, want_path, "{value}");
            assert_eq!(*expected, want_expected, "{value}");
            assert_eq!(found, want_found, "{value}");
            assert!(
                err.to_string()
                    .starts_with(&format!("`{want_path}`: expected"))
            );
        }
    }

    #[test]
    fn summary_is_one_line_and_bounded() {
        assert_eq!(SimpleCommand::Shell("a\nb".into()).summary(), "a⏎b");
        let exec = SimpleCommand::Exec(vec!["sh".into(), "-c".into(), "echo a > /tmp/b".into()]);
        assert_eq!(exec.summary(), "sh -c 'echo a > /tmp/b'");
        let long = SimpleCommand::Shell("x".repeat(500)).summary();
        assert_eq!(long.chars().count(), 200);
        assert!(long.ends_with('…'));
    }
}
