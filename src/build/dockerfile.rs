//! Pure helpers that write Dockerfile words and POSIX `sh` words safely.
//!
//! Dockerfile rules relied on (Docker's classic builder and BuildKit share the parser):
//! inside a double-quoted word `\"`, `\$` and `\\` stand for `"`, `$` and `\`; a physical line
//! may hold at most 65 535 bytes; a line ending in `\` continues on the next one, which is
//! joined without a separator (leading whitespace kept), and a continuation line starting with
//! `#` is dropped as a comment. See spec-note 0123.

/// Longest physical Dockerfile line we write before continuing on the next line (bytes).
/// Docker rejects lines longer than 65 535 bytes.
pub const MAX_LINE: usize = 16 * 1024;

/// Hard limit of Docker's Dockerfile parser for one physical line (bytes).
const PARSER_LINE_LIMIT: usize = 65_535;

/// Why a value cannot be written as a Dockerfile word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordError {
    /// The value holds a line break or another control character a Dockerfile cannot carry.
    ControlCharacter,
    /// The value has a run longer than a Dockerfile line without a place to break it.
    Unbreakable,
}

impl WordError {
    /// A lowercase reason, for error messages.
    pub fn reason(self) -> &'static str {
        match self {
            WordError::ControlCharacter => "contains a line break or control character",
            WordError::Unbreakable => "is too long to split over Dockerfile lines",
        }
    }
}

/// `value` as a double-quoted Dockerfile word: `"` and `\` escaped, `$` escaped too when
/// `literal_dollar` (so Docker does not expand `${VAR}`), long values continued over several
/// physical lines of at most [`MAX_LINE`] bytes (breaks fall before an ASCII letter or digit
/// that does not follow a backslash, so no continuation line starts with `#` or whitespace).
///
/// Errors: a control character (including a line break) or an unbreakable run.
pub fn quoted(value: &str, literal_dollar: bool) -> Result<String, WordError> {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    let mut line_len = 1usize;
    let mut prev: Option<char> = None;
    for c in value.chars() {
        if c.is_control() {
            return Err(WordError::ControlCharacter);
        }
        if line_len >= MAX_LINE && c.is_ascii_alphanumeric() && prev != Some('\\') {
            out.push_str("\\\n");
            line_len = 0;
        }
        if c == '"' || c == '\\' || (literal_dollar && c == '$') {
            out.push('\\');
            line_len += 1;
        }
        out.push(c);
        line_len += c.len_utf8();
        if line_len > PARSER_LINE_LIMIT - 64 {
            return Err(WordError::Unbreakable);
        }
        prev = Some(c);
    }
    out.push('"');
    Ok(out)
}

/// `args` in the Dockerfile exec (JSON array) form, e.g. `["a", "b"]`.
pub fn json_array(args: &[&str]) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| serde_json::Value::from(*a).to_string())
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Checks a user name for a `USER` instruction or a shell word: non-empty, no whitespace,
/// control characters, quotes, `$` or `\`. Returns the reason when it is not usable.
pub fn check_user(user: &str) -> Result<(), &'static str> {
    if user.is_empty() {
        return Err("is empty");
    }
    if user
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '$' | '\\' | '`'))
    {
        return Err("contains whitespace, a quote, `$`, `\\` or a backtick");
    }
    Ok(())
}

/// Checks an image reference for a `FROM` line: non-empty, only ASCII letters, digits and
/// `.` `_` `-` `/` `:` `@` (the characters of Docker references and image IDs).
pub fn check_reference(reference: &str) -> Result<(), &'static str> {
    if reference.is_empty() {
        return Err("is empty");
    }
    if !reference
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@'))
    {
        return Err("contains a character not allowed in an image reference");
    }
    Ok(())
}

/// Checks an environment variable name for an `ENV` instruction: non-empty, no `=`,
/// whitespace, control characters, quotes, `$` or `\`.
pub fn check_env_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("has an empty name");
    }
    if name.chars().any(|c| {
        c == '=' || c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '$' | '\\')
    }) {
        return Err("has a name with `=`, whitespace, a quote, `$` or `\\`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a double-quoted Dockerfile word back the way Docker's parser does (continuations
    /// joined, `\"` `\$` `\\` unescaped, other backslashes kept).
    fn unquote(word: &str) -> String {
        let joined = word.replace("\\\n", "");
        let inner = &joined[1..joined.len() - 1];
        let mut out = String::new();
        let mut chars = inner.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.peek() {
                    Some('"' | '$' | '\\') => out.push(chars.next().unwrap_or('\\')),
                    _ => out.push('\\'),
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn quoted_escapes_quotes_backslashes_and_dollar() {
        let v = r#"a"b\c$d ${PATH} `x` 'y' ü"#;
        let q = quoted(v, true).unwrap();
        assert_eq!(q, r#""a\"b\\c\$d \${PATH} `x` 'y' ü""#);
        assert_eq!(unquote(&q), v);
    }

    #[test]
    fn quoted_keeps_dollar_for_env_expansion() {
        assert_eq!(
            quoted("/opt/x/bin:${PATH}", false).unwrap(),
            "\"/opt/x/bin:${PATH}\""
        );
    }

    #[test]
    fn quoted_rejects_line_breaks() {
        assert_eq!(quoted("a\nb", true), Err(WordError::ControlCharacter));
        assert_eq!(quoted("a\rb", false), Err(WordError::ControlCharacter));
    }

    #[test]
    fn quoted_splits_long_values_at_safe_points() {
        let v = format!(
            "{}\\{}#{}",
            "a".repeat(20_000),
            "b".repeat(20_000),
            "c".repeat(30_000)
        );
        let q = quoted(&v, true).unwrap();
        assert!(q.lines().count() > 3);
        for line in q.lines() {
            assert!(line.len() <= MAX_LINE + 2, "line of {} bytes", line.len());
        }
        for line in q.lines().skip(1) {
            let first = line.chars().next().unwrap();
            assert!(
                first.is_ascii_alphanumeric(),
                "continuation starts with {first:?}"
            );
        }
        assert_eq!(unquote(&q), v);
    }

    #[test]
    fn quoted_rejects_unbreakable_runs() {
        assert_eq!(
            quoted(&"#".repeat(70_000), true),
            Err(WordError::Unbreakable)
        );
    }

    #[test]
    fn json_array_escapes() {
        assert_eq!(json_array(&["a b", "c\"d"]), r#"["a b", "c\"d"]"#);
    }

    #[test]
    fn user_and_env_names_checked() {
        assert!(check_user("vscode").is_ok());
        assert!(check_user("1000:1000").is_ok());
        assert!(check_user("").is_err());
        assert!(check_user("a b").is_err());
        assert!(check_user("$x").is_err());
        assert!(check_reference("ghcr.io/o/r:1@sha256:ab").is_ok());
        assert!(check_reference("sha256:0123").is_ok());
        assert!(check_reference("a b").is_err());
        assert!(check_reference("a\nRUN x").is_err());
        assert!(check_reference("").is_err());
        assert!(check_env_name("PATH").is_ok());
        assert!(check_env_name("A=B").is_err());
        assert!(check_env_name("").is_err());
        assert!(check_env_name("A B").is_err());
    }
}
