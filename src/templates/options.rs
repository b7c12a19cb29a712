//! A Template's options: `--template-args` checked against `devcontainer-template.json`'s
//! `options` schema, defaults filled in, and `${templateOption:NAME}` substituted
//! (spec-note 0640).
//!
//! The reference CLI checks only that `--template-args` is an object of strings. devcell also
//! refuses a value outside an option's `enum` and a boolean option that is not `"true"` or
//! `"false"` (the Template would be written with a value its author never allowed), and warns
//! about a name the Template does not declare (with the closest declared name).

use indexmap::IndexMap;
use serde_json::Value;

use crate::diagnostics::Warning;

use super::{Result, TemplateError};

/// The value of every option to substitute: given ones, then declared defaults.
pub type OptionValues = IndexMap<String, String>;

/// Parses `--template-args`: a JSON object whose values are strings.
///
/// # Errors
/// [`TemplateError::InvalidFlag`] naming what was found instead.
pub fn parse_args(text: &str) -> Result<IndexMap<String, String>> {
    let invalid = |reason: String| TemplateError::InvalidFlag {
        flag: "--template-args",
        reason,
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(invalid(format!(
            "expected a JSON object, got {}",
            crate::formats::json::kind(&value)
        )));
    };
    map.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            other => Err(invalid(format!(
                "option `{k}`: expected a string value, got {}",
                crate::formats::json::kind(&other)
            ))),
        })
        .collect()
}

/// The values to substitute for Template `template` with `metadata` (its
/// `devcontainer-template.json`, when known): each given argument checked against its
/// option's schema, then every declared option's default where none was given.
///
/// # Errors
/// [`TemplateError::InvalidOption`] for a value outside an `enum`, or a boolean option that
/// is not `"true"`/`"false"`.
pub fn values(
    template: &str,
    metadata: Option<&Value>,
    args: &IndexMap<String, String>,
    warnings: &mut Vec<Warning>,
) -> Result<OptionValues> {
    let declared = metadata
        .and_then(|m| m.get("options"))
        .and_then(Value::as_object);
    let mut out = OptionValues::new();
    for (name, value) in args {
        match declared.and_then(|d| d.get(name)) {
            Some(schema) => check(template, name, schema, value)?,
            None if declared.is_some() => {
                let names = declared.into_iter().flat_map(|d| d.keys());
                let closest = names
                    .map(|n| (strsim::jaro_winkler(n, name), n))
                    .filter(|(score, _)| *score > 0.8)
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, n)| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                warnings.push(Warning {
                    location: None,
                    message: format!(
                        "Template `{template}` declares no option `{name}`{closest}; it is ignored unless the Template names it"
                    ),
                });
            }
            None => {}
        }
        out.insert(name.clone(), value.clone());
    }
    for (name, schema) in declared.into_iter().flatten() {
        if out.contains_key(name) {
            continue;
        }
        let default = match schema.get("default") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        out.insert(name.clone(), default);
    }
    Ok(out)
}

/// Checks one given value against its option's schema.
fn check(template: &str, name: &str, schema: &Value, value: &str) -> Result<()> {
    let invalid = |reason: String| TemplateError::InvalidOption {
        template: template.to_owned(),
        option: name.to_owned(),
        reason,
    };
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        let allowed: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        if !allowed.contains(&value) {
            return Err(invalid(format!(
                "`{value}` is not one of {}",
                allowed
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    if schema.get("type").and_then(Value::as_str) == Some("boolean")
        && value != "true"
        && value != "false"
    {
        return Err(invalid(format!(
            "expected `true` or `false` (a boolean option), got `{value}`"
        )));
    }
    Ok(())
}

/// Replaces every `${templateOption:NAME}` (spaces allowed around `NAME`, which is made of
/// letters, digits and `_`) with its value, or with nothing when the option has none, as the
/// reference CLI does. Anything else is left as written.
pub fn substitute(text: &str, values: &OptionValues) -> String {
    const OPEN: &str = "${templateOption:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        match placeholder_name(after) {
            Some((name, used)) => {
                out.push_str(values.get(name).map(String::as_str).unwrap_or(""));
                rest = &after[used..];
            }
            None => {
                out.push_str(OPEN);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The option name at the start of `s` (after `${templateOption:`) and the bytes up to and
/// including the closing `}`; `None` when `s` does not continue a placeholder.
fn placeholder_name(s: &str) -> Option<(&str, usize)> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let start = s.len() - s.trim_start().len();
    let body = &s[start..];
    let len = body.find(|c: char| !word(c)).unwrap_or(body.len());
    if len == 0 {
        return None;
    }
    let name = &body[..len];
    let tail = &body[len..];
    let spaces = tail.len() - tail.trim_start().len();
    tail[spaces..]
        .starts_with('}')
        .then_some((name, start + len + spaces + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vals(pairs: &[(&str, &str)]) -> OptionValues {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn placeholders_are_replaced_and_unknown_ones_emptied() {
        let v = vals(&[("a", "1"), ("b_2", "x")]);
        assert_eq!(
            substitute(
                "${templateOption:a}-${templateOption: b_2 }-${templateOption:zz}",
                &v
            ),
            "1-x-"
        );
        // Not placeholders: left as written.
        assert_eq!(
            substitute("${templateOption:} ${templateOption:a-b} ${localEnv:X}", &v),
            "${templateOption:} ${templateOption:a-b} ${localEnv:X}"
        );
        assert_eq!(substitute("${templateOption:a", &v), "${templateOption:a");
    }

    #[test]
    fn args_must_be_an_object_of_strings() {
        assert!(parse_args(r#"{"a":"b"}"#).is_ok());
        for bad in [r#"{"a":true}"#, "[1]", "nope"] {
            let e = parse_args(bad).unwrap_err();
            assert!(matches!(e, TemplateError::InvalidFlag { .. }), "{bad}: {e}");
        }
        assert!(
            parse_args(r#"{"flag":true}"#)
                .unwrap_err()
                .to_string()
                .contains("expected a string value, got a boolean")
        );
    }

    #[test]
    fn values_follow_the_option_schema() {
        let meta = json!({"options": {
            "variant": {"type": "string", "proposals": ["a", "b"], "default": "a"},
            "strict": {"type": "string", "enum": ["x", "y"], "default": "x"},
            "flag": {"type": "boolean", "default": false},
        }});
        let mut w = Vec::new();
        let got = values("t", Some(&meta), &vals(&[("variant", "free")]), &mut w).unwrap();
        assert_eq!(
            got,
            vals(&[("variant", "free"), ("strict", "x"), ("flag", "false")])
        );
        assert!(w.is_empty());
        let e = values("t", Some(&meta), &vals(&[("strict", "z")]), &mut w).unwrap_err();
        assert!(e.to_string().contains("`z` is not one of `x`, `y`"), "{e}");
        let e = values("t", Some(&meta), &vals(&[("flag", "yes")]), &mut w).unwrap_err();
        assert!(matches!(e, TemplateError::InvalidOption { .. }));
        values("t", Some(&meta), &vals(&[("varaint", "b")]), &mut w).unwrap();
        assert!(w[0].message.contains("did you mean `variant`"), "{w:?}");
    }
}
