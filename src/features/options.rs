//! Feature options: user values validated against a Feature's declared options, the spec's
//! environment-variable naming rule, and the env files sourced before `install.sh`
//! (spec-distilled §4.4, §4.5; spec-notes 0041, 0042).

use indexmap::IndexMap;
use serde_json::Value;

use super::error::{FeatureError, Result};
use super::metadata::{FeatureMetadata, OptionType, list};
use crate::diagnostics::Warning;

/// The options env file written next to each Feature's `install.sh`.
pub const OPTIONS_ENV_FILE: &str = "devcontainer-features.env";
/// The builtin env file written once in the Features staging folder.
pub const BUILTIN_ENV_FILE: &str = "devcontainer-features.builtin.env";

/// A resolved option value as it reaches `install.sh`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OptionValue {
    /// Rendered `true` / `false`.
    Bool(bool),
    /// Rendered verbatim.
    String(String),
}

impl OptionValue {
    /// The string `install.sh` sees.
    pub fn as_env(&self) -> String {
        match self {
            OptionValue::Bool(b) => b.to_string(),
            OptionValue::String(s) => s.clone(),
        }
    }

    /// The JSON form (bool or string).
    pub fn to_json(&self) -> Value {
        match self {
            OptionValue::Bool(b) => Value::Bool(*b),
            OptionValue::String(s) => Value::String(s.clone()),
        }
    }
}

/// Effective options of one Feature: declared options in declaration order (user value or
/// default), then user options the Feature does not declare, in the user's order.
pub type ResolvedOptions = IndexMap<String, OptionValue>;

/// Normalizes the value of a `features` / `dependsOn` entry to the user's option object.
///
/// - object → itself; `true`, `{}` or `null` → no options;
/// - a string (or number) → `{"version": value}` (spec shorthand; checklist 25; [`order`](super::order::order)
///   drops it with a warning when the Feature declares no `version` option, as the reference
///   CLI does);
/// - `false` → no options plus a warning (it does not disable a Feature).
///
/// Errors: [`FeatureError::InvalidValue`] for arrays and values nested in the object that are
/// neither strings, booleans nor numbers.
pub fn user_options(
    feature: &str,
    value: &Value,
    warnings: &mut Vec<Warning>,
) -> Result<IndexMap<String, Value>> {
    let map = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Value::Null | Value::Bool(true) => IndexMap::new(),
        Value::Bool(false) => {
            warnings.push(Warning {
                location: None,
                message: format!(
                    "Feature `{feature}`: `false` does not disable a Feature; it is installed with its defaults"
                ),
            });
            IndexMap::new()
        }
        Value::String(s) => IndexMap::from([("version".to_string(), Value::String(s.clone()))]),
        Value::Number(n) => IndexMap::from([("version".to_string(), Value::String(n.to_string()))]),
        Value::Array(_) => {
            return Err(FeatureError::InvalidValue {
                feature: feature.to_string(),
                message: "expected an options object, a version string or `true`, found an array"
                    .into(),
            });
        }
    };
    Ok(map)
}

/// Validates user options against the Feature's declared options and fills in defaults.
///
/// Rules (spec-note 0041): a boolean option accepts `true`/`false` and the strings
/// `"true"`/`"false"`; a string option accepts strings and numbers (stringified); an `enum`
/// option accepts only its listed values (checklist 34); `proposals` are free-form. An option
/// the Feature does not declare is kept (as the reference CLI does) with a warning. Omitted
/// options get their declared default (checklist 26); options without a default are omitted.
///
/// Errors: [`FeatureError::InvalidOption`] naming the option, the found value and, for enum
/// violations, the allowed values.
pub fn resolve_options(
    feature: &str,
    metadata: &FeatureMetadata,
    user: &IndexMap<String, Value>,
    warnings: &mut Vec<Warning>,
) -> Result<ResolvedOptions> {
    let invalid = |option: &str, message: String| FeatureError::InvalidOption {
        feature: feature.to_string(),
        option: option.to_string(),
        message,
    };
    let mut out = ResolvedOptions::new();
    for (name, declared) in &metadata.options {
        let value = match user.get(name) {
            Some(v) => v,
            None => match &declared.default {
                Some(d) => d,
                None => continue,
            },
        };
        let resolved = match (declared.option_type, value) {
            (OptionType::Boolean, Value::Bool(b)) => OptionValue::Bool(*b),
            (OptionType::Boolean, Value::String(s)) if s == "true" || s == "false" => {
                OptionValue::Bool(s == "true")
            }
            (OptionType::Boolean, other) => {
                return Err(invalid(
                    name,
                    format!("expected a boolean (`true` or `false`), found `{other}`"),
                ));
            }
            (OptionType::String, Value::String(s)) => OptionValue::String(s.clone()),
            (OptionType::String, Value::Number(n)) => OptionValue::String(n.to_string()),
            (OptionType::String, other) => {
                return Err(invalid(name, format!("expected a string, found `{other}`")));
            }
        };
        if let (Some(allowed), OptionValue::String(s)) = (&declared.enum_values, &resolved)
            && !allowed.contains(s)
        {
            return Err(invalid(
                name,
                format!("`{s}` is not one of the allowed values {}", list(allowed)),
            ));
        }
        out.insert(name.clone(), resolved);
    }
    for (name, value) in user {
        if metadata.options.contains_key(name) {
            continue;
        }
        warnings.push(Warning {
            location: None,
            message: format!(
                "Feature `{feature}` has no option `{name}`; it is passed to `install.sh` as `{}`",
                option_env_name(name)
            ),
        });
        let v = match value {
            Value::Bool(b) => OptionValue::Bool(*b),
            Value::String(s) => OptionValue::String(s.clone()),
            Value::Number(n) => OptionValue::String(n.to_string()),
            other => {
                return Err(invalid(
                    name,
                    format!("expected a string or a boolean, found `{other}`"),
                ));
            }
        };
        out.insert(name.clone(), v);
    }
    Ok(out)
}

/// The spec's option-id → environment-variable rule (spec-distilled §4.4, checklist 27):
/// every character outside ASCII `[A-Za-z0-9_]` becomes `_`, a leading run of digits and
/// underscores becomes a single `_`, then ASCII uppercase.
///
/// `installZsh` → `INSTALLZSH`, `my-option` → `MY_OPTION`, `1name` → `_NAME`, `über` → `_BER`.
pub fn option_env_name(option_id: &str) -> String {
    let replaced: String = option_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let lead = replaced
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'_')
        .count();
    let name = if lead > 0 {
        format!("_{}", &replaced[lead..])
    } else {
        replaced
    };
    name.to_ascii_uppercase()
}

/// Quotes a value for POSIX `sh`: `'…'` with each `'` written `'\''`. The value reaches the
/// shell byte for byte (`"`, `$`, backticks, `\` and newlines included).
///
/// Errors: [`FeatureError::EnvValue`] when the value holds a NUL byte (an environment
/// variable cannot).
pub fn shell_quote(name: &str, value: &str) -> Result<String> {
    if crate::formats::shell::has_nul(value) {
        return Err(FeatureError::EnvValue {
            name: name.to_string(),
            message: "the value contains a NUL byte".into(),
        });
    }
    Ok(crate::formats::shell::quote(value))
}

/// Renders `devcontainer-features.env`: one `NAME='value'` line per option, in order, each
/// ending with a newline. Sourced with `set -a` by the install wrapper (spec-note 0042: we
/// quote where the reference CLI writes `NAME="value"` unescaped).
///
/// Errors: see [`shell_quote`].
pub fn render_options_env(options: &ResolvedOptions) -> Result<String> {
    let mut out = String::new();
    for (id, value) in options {
        let name = option_env_name(id);
        out.push_str(&name);
        out.push('=');
        out.push_str(&shell_quote(&name, &value.as_env())?);
        out.push('\n');
    }
    Ok(out)
}

/// The builtin variables every `install.sh` sees (spec-distilled §4.5, checklist 30).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BuiltinEnv {
    /// `_CONTAINER_USER`: the container user (last `containerUser`, else image user, else `root`).
    pub container_user: String,
    /// `_REMOTE_USER`: the remote user (last `remoteUser`, else the container user).
    pub remote_user: String,
    /// `_CONTAINER_USER_HOME`, when known before the build (else looked up in the image).
    pub container_user_home: Option<String>,
    /// `_REMOTE_USER_HOME`, when known before the build (else looked up in the image).
    pub remote_user_home: Option<String>,
}

impl BuiltinEnv {
    /// Builds the builtins; `remote_user` `None` means "same as the container user".
    pub fn new(container_user: &str, remote_user: Option<&str>) -> BuiltinEnv {
        BuiltinEnv {
            container_user: container_user.to_string(),
            remote_user: remote_user.unwrap_or(container_user).to_string(),
            container_user_home: None,
            remote_user_home: None,
        }
    }

    /// Renders `devcontainer-features.builtin.env` (`_NAME='value'` lines, newline-terminated).
    /// Unknown homes are omitted; the build step appends them from the image's passwd database.
    ///
    /// Errors: see [`shell_quote`].
    pub fn render(&self) -> Result<String> {
        let mut entries = vec![
            ("_CONTAINER_USER", Some(&self.container_user)),
            ("_REMOTE_USER", Some(&self.remote_user)),
        ];
        entries.push(("_CONTAINER_USER_HOME", self.container_user_home.as_ref()));
        entries.push(("_REMOTE_USER_HOME", self.remote_user_home.as_ref()));
        let mut out = String::new();
        for (name, value) in entries {
            if let Some(v) = value {
                out.push_str(&format!("{name}={}\n", shell_quote(name, v)?));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn meta() -> FeatureMetadata {
        FeatureMetadata::parse(
            r#"{"id": "f", "options": {
                "version": {"type": "string", "proposals": ["latest"], "default": "latest"},
                "installZsh": {"type": "boolean", "default": true},
                "flavor": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "noDefault": {"type": "string"}
            }}"#,
            Path::new("f.json"),
        )
        .unwrap()
    }

    fn resolve(value: Value) -> Result<(ResolvedOptions, Vec<Warning>)> {
        let mut w = Vec::new();
        let user = user_options("f", &value, &mut w)?;
        let r = resolve_options("f", &meta(), &user, &mut w)?;
        Ok((r, w))
    }

    #[test]
    fn string_shorthand_equals_version_object() {
        // checklist 25
        assert_eq!(
            resolve(json!("1.18")).unwrap(),
            resolve(json!({"version": "1.18"})).unwrap()
        );
        assert_eq!(
            resolve(json!("1.18")).unwrap().0["version"],
            OptionValue::String("1.18".into())
        );
    }

    #[test]
    fn omitted_options_get_defaults() {
        // checklist 26
        let (r, w) = resolve(json!(true)).unwrap();
        assert!(w.is_empty());
        assert_eq!(
            r,
            ResolvedOptions::from([
                ("version".into(), OptionValue::String("latest".into())),
                ("installZsh".into(), OptionValue::Bool(true)),
                ("flavor".into(), OptionValue::String("a".into())),
            ])
        );
        assert_eq!(resolve(json!({})).unwrap(), resolve(json!(null)).unwrap());
    }

    #[test]
    fn enum_violation_names_allowed_values() {
        // checklist 34
        let e = resolve(json!({"flavor": "c"})).unwrap_err().to_string();
        assert_eq!(
            e,
            "Feature `f`: option `flavor`: `c` is not one of the allowed values `a`, `b`"
        );
        // proposals are free-form
        assert!(resolve(json!({"version": "anything"})).is_ok());
    }

    #[test]
    fn wrong_types_rejected() {
        assert!(
            resolve(json!({"installZsh": "yes"}))
                .unwrap_err()
                .to_string()
                .contains("expected a boolean")
        );
        assert!(
            resolve(json!({"version": true}))
                .unwrap_err()
                .to_string()
                .contains("expected a string")
        );
        assert!(resolve(json!({"version": [1]})).is_err());
        assert!(
            resolve(json!(["x"]))
                .unwrap_err()
                .to_string()
                .contains("array")
        );
        let (r, _) = resolve(json!({"installZsh": "false", "version": 3})).unwrap();
        assert_eq!(r["installZsh"], OptionValue::Bool(false));
        assert_eq!(r["version"], OptionValue::String("3".into()));
    }

    #[test]
    fn unknown_option_warns_and_is_kept() {
        let (r, w) = resolve(json!({"other-opt": "x"})).unwrap();
        assert_eq!(r["other-opt"], OptionValue::String("x".into()));
        assert_eq!(w.len(), 1);
        assert!(w[0].message.contains("`OTHER_OPT`"), "{}", w[0].message);
    }

    #[test]
    fn env_names_follow_the_spec_rule() {
        // checklist 27; vectors from spec-distilled §4.4
        for (id, env) in [
            ("version", "VERSION"),
            ("installZsh", "INSTALLZSH"),
            ("my-option", "MY_OPTION"),
            ("opt.name", "OPT_NAME"),
            ("1name", "_NAME"),
            ("_private", "_PRIVATE"),
            ("__x", "_X"),
            ("9", "_"),
            ("über", "_BER"),
            ("2nd.opt", "_ND_OPT"),
            ("a_1", "A_1"),
        ] {
            assert_eq!(option_env_name(id), env, "{id}");
        }
    }

    #[test]
    fn booleans_render_as_true_false() {
        // checklist 28
        let (r, _) = resolve(json!({"installZsh": false})).unwrap();
        let env = render_options_env(&r).unwrap();
        assert!(env.contains("INSTALLZSH='false'\n"), "{env}");
    }

    #[test]
    fn nul_bytes_rejected() {
        let r = ResolvedOptions::from([("x".into(), OptionValue::String("a\0b".into()))]);
        assert!(
            render_options_env(&r)
                .unwrap_err()
                .to_string()
                .contains("NUL")
        );
    }

    const HOSTILE: &[&str] = &[
        "plain",
        "",
        "with space",
        "dq\"inside\"",
        "sq'inside'",
        "'",
        "''",
        "$HOME ${PATH} $(id)",
        "`id`",
        "back\\slash\\",
        "line1\nline2\n",
        "\n",
        "tab\tend",
        "semi; rm -rf /tmp/nope",
        "*glob?",
        "ünïcødé",
        "trailing\\",
        "'\\''",
    ];

    /// Sources the rendered file with /bin/sh and prints each variable NUL-separated.
    fn source_with_sh(file_text: &str, names: &[String]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("test.env");
        std::fs::write(&path, file_text).unwrap();
        let mut script = String::from("set -a; . \"$1\"; set +a; ");
        for n in names {
            script.push_str(&format!("printf '%s\\0' \"${n}\"; "));
        }
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(&path)
            .env_clear()
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut parts: Vec<String> = out
            .stdout
            .split(|b| *b == 0)
            .map(|p| String::from_utf8(p.to_vec()).unwrap())
            .collect();
        parts.pop();
        parts
    }

    #[test]
    fn options_env_values_reach_sh_unchanged() {
        let options: ResolvedOptions = HOSTILE
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("opt-{i}"), OptionValue::String(v.to_string())))
            .chain([("flag".to_string(), OptionValue::Bool(true))])
            .collect();
        let text = render_options_env(&options).unwrap();
        let names: Vec<String> = options.keys().map(|k| option_env_name(k)).collect();
        let got = source_with_sh(&text, &names);
        let want: Vec<String> = options.values().map(OptionValue::as_env).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn builtin_env_values_reach_sh_unchanged() {
        let mut b = BuiltinEnv::new("root", None);
        assert_eq!(b.remote_user, "root");
        b.remote_user = "we'ird $user`x`\"\\\n".into();
        b.container_user_home = Some("/root".into());
        b.remote_user_home = Some("/home/$(x)".into());
        let text = b.render().unwrap();
        let names: Vec<String> = [
            "_CONTAINER_USER",
            "_REMOTE_USER",
            "_CONTAINER_USER_HOME",
            "_REMOTE_USER_HOME",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got = source_with_sh(&text, &names);
        assert_eq!(got, ["root", b.remote_user.as_str(), "/root", "/home/$(x)"]);
    }

    #[test]
    fn builtin_env_omits_unknown_homes() {
        let text = BuiltinEnv::new("root", Some("vscode")).render().unwrap();
        assert_eq!(text, "_CONTAINER_USER='root'\n_REMOTE_USER='vscode'\n");
    }
}
