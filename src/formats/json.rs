//! Small readers of `serde_json` values that several layers use to explain and pick apart
//! loosely typed JSON (Docker inspect output, Compose models, devcontainer.json properties).

use serde_json::Value;

/// The JSON type of `value` in words, for error messages: `null`, `a boolean`, `a number`,
/// `a string`, `an array`, `an object`.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The string items of `value` when it is an array, in order (other items skipped); empty
/// when it is absent or not an array.
pub fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `value` with every object's keys sorted, at every depth (arrays keep their order): the
/// canonical form of a model that keeps its files' key order, to compare or digest.
pub fn sorted_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_keys(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_keys_sorts_every_object_and_keeps_array_order() {
        let value = json!({"b": [{"z": 1, "a": 2}, 3, 1], "a": {"y": null, "x": true}});
        assert_eq!(
            sorted_keys(&value).to_string(),
            r#"{"a":{"x":true,"y":null},"b":[{"a":2,"z":1},3,1]}"#
        );
    }

    #[test]
    fn kinds_name_each_json_type() {
        let cases = [
            (json!(null), "null"),
            (json!(true), "a boolean"),
            (json!(1.5), "a number"),
            (json!("x"), "a string"),
            (json!([]), "an array"),
            (json!({}), "an object"),
        ];
        for (value, want) in cases {
            assert_eq!(kind(&value), want, "{value}");
        }
    }

    #[test]
    fn strings_keep_the_string_items_only() {
        let cases = [
            (Some(json!(["a", 1, "b", null])), vec!["a", "b"]),
            (Some(json!("a")), vec![]),
            (None, vec![]),
        ];
        for (value, want) in cases {
            assert_eq!(strings(value.as_ref()), want, "{value:?}");
        }
    }
}
