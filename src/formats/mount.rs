//! Docker `--mount` strings (`type=bind,source=/a,target=/b,readonly`), as devcontainer.json
//! `mounts` and `runArgs` write them: the one reader, so every layer sees the same fields (the
//! target the security rules judge is the target the engine mounts).
//!
//! A string is one CSV record: `,` separates fields; `"` opens and closes a quoted run anywhere
//! in a field (`""` inside one is a literal quote), so `"source=/a,b"` is one field. Each field
//! is `key=value` (split at the first `=`) or a bare `key` (a flag such as `readonly`).

/// One field of a `--mount` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountField {
    /// The key, trimmed and lowercased, with Docker's aliases resolved: `src` → `source`,
    /// `dst` and `destination` → `target`, `ro` → `readonly`.
    pub key: String,
    /// The value after the first `=`; `None` for a bare key.
    pub value: Option<String>,
}

/// A `--mount` string that is not one CSV record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unterminated quote")]
pub struct MountSyntaxError;

/// The fields of a `--mount` string, in order; empty fields (`a=1,,b=2`) are skipped.
///
/// # Errors
/// [`MountSyntaxError`] for a quote that is never closed.
pub fn fields(text: &str) -> Result<Vec<MountField>, MountSyntaxError> {
    Ok(split_csv(text)?
        .into_iter()
        .filter(|f| !f.trim().is_empty())
        .map(|field| {
            let (key, value) = match field.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (field.as_str(), None),
            };
            MountField {
                key: canonical_key(&key.trim().to_ascii_lowercase()).to_string(),
                value,
            }
        })
        .collect())
}

/// The value of the last field named `key` (canonical, as in [`MountField::key`]).
pub fn value<'a>(fields: &'a [MountField], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .rev()
        .find(|f| f.key == key)
        .and_then(|f| f.value.as_deref())
}

/// A mount key with Docker's aliases resolved (`src` → `source`, `dst`/`destination` →
/// `target`, `ro` → `readonly`); other keys as given. Also for the keys of mount objects.
pub fn canonical_key(key: &str) -> &str {
    match key {
        "src" => "source",
        "dst" | "destination" => "target",
        "ro" => "readonly",
        other => other,
    }
}

/// Splits one CSV record (commas; `"…"` quoting with `""` for a quote).
fn split_csv(text: &str) -> Result<Vec<String>, MountSyntaxError> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    if quoted {
        return Err(MountSyntaxError);
    }
    fields.push(field);
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, Option<String>)> {
        fields(text)
            .unwrap()
            .into_iter()
            .map(|f| (f.key, f.value))
            .collect()
    }

    #[test]
    fn fields_resolve_aliases_and_quotes() {
        assert_eq!(
            pairs(r#"Type=bind,src=/a,DST=/b,ro,"consistency=x""y",,source=/c=d"#),
            vec![
                ("type".into(), Some("bind".into())),
                ("source".into(), Some("/a".into())),
                ("target".into(), Some("/b".into())),
                ("readonly".into(), None),
                ("consistency".into(), Some("x\"y".into())),
                ("source".into(), Some("/c=d".into())),
            ]
        );
        assert_eq!(
            pairs(r#""source=/a,b",target=/x"#)[0],
            ("source".into(), Some("/a,b".into()))
        );
        let f = fields("target=/a,destination=/b").unwrap();
        assert_eq!(value(&f, "target"), Some("/b"));
        assert_eq!(fields(r#"target="/x"#), Err(MountSyntaxError));
    }
}
