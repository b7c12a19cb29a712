//! JSONC (JSON with comments) → [`serde_json::Value`], with source positions for every error.
//!
//! Implements the file format of
//! [spec: devcontainer.json reference](https://containers.dev/implementors/json_reference/):
//! `//` and `/* */` comments, trailing commas (accepted like the reference CLI, although the
//! schema says `allowTrailingCommas: false`; see `spec-notes/0001-jsonc-strictness.md`) and a
//! leading UTF-8 byte order mark. Everything else must be plain JSON: unlike the reference CLI,
//! which never reports a syntax error, devcell rejects missing commas, unquoted keys,
//! single-quoted strings, hexadecimal numbers, `NaN`/`Infinity` and unterminated strings with
//! the file, line, column and what was expected.
//!
//! Duplicate keys: the last value wins and keeps the position of the first occurrence (what
//! JavaScript object assignment does in the reference); each duplicate gives a [`Warning`].
//!
//! Key order is preserved (`serde_json` is built with `preserve_order`).
//!
//! Limits (each gives a located [`ConfigError::Invalid`], never a panic or a stack overflow):
//! files above [`MAX_FILE_BYTES`] and nesting deeper than [`MAX_DEPTH`].

use std::fmt;
use std::path::{Path, PathBuf};

use jsonc_parser::ast;
use jsonc_parser::common::Ranged;
use serde_json::{Map, Value};

use crate::config::error::{ConfigError, Result};
use crate::diagnostics::{SourceLocation, Warning};

/// Largest accepted config file, in bytes (4 MiB; real configs are a few KiB).
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// Deepest accepted nesting of arrays and objects (the root object is depth 1).
pub const MAX_DEPTH: usize = 128;

/// One step of a [`JsonPath`]: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A property name.
    Key(String),
    /// A 0-based array index.
    Index(usize),
}

/// A property path inside a document, displayed like `forwardPorts[0]` or
/// `features."ghcr.io/x/y:1".version` (keys that are not identifiers are double-quoted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct JsonPath(pub Vec<Segment>);

impl JsonPath {
    /// The empty path (the document root).
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// This path extended by property `key`.
    pub fn key(&self, key: &str) -> Self {
        let mut v = self.0.clone();
        v.push(Segment::Key(key.to_owned()));
        Self(v)
    }

    /// This path extended by array index `index`.
    pub fn index(&self, index: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Segment::Index(index));
        Self(v)
    }

    /// `true` for the document root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses the display form back (`a.b[0]."c.d"`); `None` when it is malformed.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        let mut segs = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'.' => i += 1,
                b'[' => {
                    let end = i + text[i..].find(']')?;
                    segs.push(Segment::Index(text[i + 1..end].parse().ok()?));
                    i = end + 1;
                }
                b'"' => {
                    let mut j = i + 1;
                    while j < bytes.len() && bytes[j] != b'"' {
                        j += if bytes[j] == b'\\' { 2 } else { 1 };
                    }
                    let raw = text.get(i..=j)?;
                    segs.push(Segment::Key(serde_json::from_str(raw).ok()?));
                    i = j + 1;
                }
                _ => {
                    let end = text[i..].find(['.', '[']).map_or(text.len(), |n| i + n);
                    segs.push(Segment::Key(text[i..end].to_owned()));
                    i = end;
                }
            }
        }
        Some(Self(segs))
    }
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if is_identifier(k) {
                        f.write_str(k)?;
                    } else {
                        // serde_json gives the JSON string form with escapes.
                        f.write_str(&Value::String(k.clone()).to_string())?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A parsed `devcontainer.json`: the value plus what is needed to locate any property in the
/// source text (the text is re-parsed on demand, so the happy path keeps no position table).
#[derive(Debug, Clone)]
pub struct Document {
    /// The file the text came from (used in every location).
    pub file: PathBuf,
    /// The text without a leading byte order mark.
    pub text: String,
    /// The value; the root is always an object.
    pub value: Value,
    /// Non-fatal findings of the parse (duplicate keys).
    pub warnings: Vec<Warning>,
}

/// Where a property is: the byte offsets of its name (when it is an object property) and of
/// its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the property name's opening quote, if the path ends in a key.
    pub key: Option<usize>,
    /// Byte offset of the first character of the value.
    pub value: usize,
}

/// Reads and parses a config file. See [`parse`] for the rules.
///
/// Errors: [`ConfigError::Io`] when the file cannot be read, [`ConfigError::Invalid`] when it
/// is too large, not UTF-8, or not valid JSONC with an object root.
pub fn read(file: &Path) -> Result<Document> {
    // Bounded, and never waiting on a FIFO or reading a device (spec-note 0433).
    let bytes = match crate::config::bounded::read(file, MAX_FILE_BYTES as u64) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            let len = std::fs::metadata(file).map(|m| m.len()).ok();
            return Err(too_large(file, len.filter(|l| *l > MAX_FILE_BYTES as u64)));
        }
        Err(source) => {
            return Err(ConfigError::Io {
                path: file.to_owned(),
                source,
            });
        }
    };
    parse_bytes(file, bytes)
}

/// [`read`] for bytes already read (e.g. without following links, spec-note 0400): the same
/// size, UTF-8 and syntax rules; `file` names them in locations.
///
/// Errors: [`ConfigError::Invalid`] as [`read`].
pub fn parse_bytes(file: &Path, bytes: Vec<u8>) -> Result<Document> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(too_large(file, Some(bytes.len() as u64)));
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let prefix = String::from_utf8_lossy(&bytes[..valid]).into_owned();
            let loc = Box::new(location_at(file, &prefix, prefix.len(), JsonPath::root()));
            return Err(ConfigError::Invalid {
                location: loc,
                message: "the file is not valid UTF-8".into(),
                hint: Some("save devcontainer.json as UTF-8".into()),
            });
        }
    };
    parse(file, &text)
}

/// The error for a config file above [`MAX_FILE_BYTES`] (`len`: its size, when known).
pub fn too_large(file: &Path, len: Option<u64>) -> ConfigError {
    let size = match len {
        Some(len) => format!("{len} bytes"),
        None => "larger than that".to_string(),
    };
    ConfigError::Invalid {
        location: Box::new(SourceLocation {
            file: file.to_owned(),
            line: 1,
            column: 1,
            path: String::new(),
            line_text: String::new(),
        }),
        message: format!(
            "the file is {size}; expected at most {MAX_FILE_BYTES} bytes (4 MiB) for a devcontainer.json"
        ),
        hint: Some("check that `--config` names the right file".into()),
    }
}

fn options() -> jsonc_parser::ParseOptions {
    jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: true,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

/// Parses JSONC `text` (read from `file`, used for locations) into a [`Document`].
///
/// A leading U+FEFF is skipped. The root must be an object. Errors are
/// [`ConfigError::Invalid`] with the 1-based line and column of the offending token, the
/// offending line, and what was expected.
pub fn parse(file: &Path, text: &str) -> Result<Document> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.len() > MAX_FILE_BYTES {
        return Err(too_large(file, Some(text.len() as u64)));
    }
    check_depth(file, text)?;
    let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), &options())
        .map_err(|e| syntax_error(file, text, &e))?;
    let Some(root) = parsed.value else {
        return Err(ConfigError::Invalid {
            location: Box::new(location_at(file, text, text.len(), JsonPath::root())),
            message: "the file is empty; expected a JSON object such as `{\"image\": \"debian\"}`"
                .into(),
            hint: None,
        });
    };
    let ast::Value::Object(_) = &root else {
        return Err(ConfigError::Invalid {
            location: Box::new(location_at(file, text, root.start(), JsonPath::root())),
            message: format!(
                "expected a JSON object at the root of devcontainer.json, found {}",
                ast_kind(&root)
            ),
            hint: Some("wrap the properties in `{ … }`".into()),
        });
    };
    let mut warnings = Vec::new();
    let value = convert(file, text, root, &mut warnings)?;
    Ok(Document {
        file: file.to_owned(),
        text: text.to_owned(),
        value,
        warnings,
    })
}

fn ast_kind(v: &ast::Value<'_>) -> &'static str {
    match v {
        ast::Value::StringLit(_) => "a string",
        ast::Value::NumberLit(_) => "a number",
        ast::Value::BooleanLit(_) => "a boolean",
        ast::Value::Object(_) => "an object",
        ast::Value::Array(_) => "an array",
        ast::Value::NullKeyword(_) => "null",
    }
}

/// Turns the AST into a value, consuming it (strings are moved, not copied). Paths are only
/// computed (with [`path_at`]) for the rare error or warning, keeping the common path cheap.
fn convert(
    file: &Path,
    text: &str,
    node: ast::Value<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<Value> {
    Ok(match node {
        ast::Value::StringLit(s) => Value::String(s.value.into_owned()),
        ast::Value::BooleanLit(b) => Value::Bool(b.value),
        ast::Value::NullKeyword(_) => Value::Null,
        ast::Value::NumberLit(n) => match n.value.parse::<serde_json::Number>() {
            Ok(num) => Value::Number(num),
            Err(_) => {
                let path = path_at(text, n.range.start);
                return Err(ConfigError::Invalid {
                    location: Box::new(location_at(file, text, n.range.start, path)),
                    message: format!(
                        "expected a number within the range of a 64-bit float, found `{}`",
                        n.value
                    ),
                    hint: None,
                });
            }
        },
        ast::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.elements.len());
            for el in a.elements {
                out.push(convert(file, text, el, warnings)?);
            }
            Value::Array(out)
        }
        ast::Value::Object(o) => {
            let mut out = Map::with_capacity(o.properties.len());
            for prop in o.properties {
                let start = prop.range.start;
                let name = prop.name.into_string();
                let v = convert(file, text, prop.value, warnings)?;
                if out.contains_key(&name) {
                    let path = path_at(text, start).key(&name);
                    warnings.push(Warning {
                        location: Some(location_at(file, text, start, path)),
                        message: format!(
                            "duplicate property `{name}`; the last value wins (as in the reference CLI)"
                        ),
                    });
                }
                out.insert(name, v);
            }
            Value::Object(out)
        }
    })
}

/// Rejects nesting deeper than [`MAX_DEPTH`] before building a tree (no deep recursion).
fn check_depth(file: &Path, text: &str) -> Result<()> {
    #[derive(PartialEq)]
    enum State {
        Normal,
        Str,
        StrEscape,
        LineComment,
        BlockComment,
    }
    let bytes = text.as_bytes();
    // Fast path: with no more opening brackets than the limit (any real config), the limit
    // cannot be exceeded; counting is much cheaper than the scan below.
    if bytes.iter().filter(|&&b| b == b'[' || b == b'{').count() <= MAX_DEPTH {
        return Ok(());
    }
    let mut state = State::Normal;
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match state {
            State::Normal => match b {
                b'"' => state = State::Str,
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    state = State::LineComment;
                    i += 1;
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    state = State::BlockComment;
                    i += 1;
                }
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        // Name the top-level property only: the full path is 128 steps long.
                        let mut path = path_at(text, i);
                        path.0.truncate(1);
                        return Err(ConfigError::Invalid {
                            location: Box::new(location_at(file, text, i, path)),
                            message: format!(
                                "arrays and objects are nested more than {MAX_DEPTH} levels deep"
                            ),
                            hint: Some("a devcontainer.json needs only a few levels".into()),
                        });
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
            State::Str => match b {
                b'\\' => state = State::StrEscape,
                b'"' | b'\n' => state = State::Normal,
                _ => {}
            },
            State::StrEscape => state = State::Str,
            State::LineComment => {
                if b == b'\n' || b == b'\r' {
                    state = State::Normal;
                }
            }
            State::BlockComment => {
                if b == b'*' && bytes.get(i + 1) == Some(&b'/') {
                    state = State::Normal;
                    i += 1;
                }
            }
        }
        i += 1;
    }
    Ok(())
}

fn syntax_error(file: &Path, text: &str, e: &jsonc_parser::errors::ParseError) -> ConfigError {
    use jsonc_parser::errors::ParseErrorKind as K;
    let start = e.range().start.min(text.len());
    let found = found_token(text, start);
    let (message, hint): (String, Option<&str>) = match e.kind() {
        K::ExpectedColonAfterObjectKey => (
            format!("expected `:` after the property name, found {found}"),
            None,
        ),
        K::ExpectedObjectValue => (format!("expected a value after `:`, found {found}"), None),
        K::ExpectedStringObjectProperty => (
            format!("expected a property name in double quotes, found {found}"),
            Some("JSON property names are written in double quotes: `\"name\": …`"),
        ),
        K::ExpectedComma => (
            format!("expected `,` after this value, found {found}"),
            Some("separate properties and array elements with commas"),
        ),
        K::MultipleRootJsonValues => (
            format!("expected the end of the file after the root object, found {found}"),
            Some("a devcontainer.json holds exactly one object"),
        ),
        K::UnexpectedCloseBrace => (format!("expected a value, found {found}"), None),
        K::UnexpectedCloseBracket => (format!("expected a value, found {found}"), None),
        K::UnexpectedColon => (format!("expected a value, found {found}"), None),
        K::UnexpectedComma => (
            format!("expected a value, found {found}"),
            Some("remove the extra comma"),
        ),
        K::UnexpectedWord => (
            format!(
                "expected a value (string, number, object, array, `true`, `false` or `null`), found {found}"
            ),
            Some("strings are written in double quotes"),
        ),
        K::UnexpectedToken | K::UnexpectedTokenInObject => {
            (format!("expected a value, found {found}"), None)
        }
        K::UnterminatedArray => (
            "expected `]` to close the array, found the end of the file".into(),
            None,
        ),
        K::UnterminatedObject => (
            "expected `}` to close the object, found the end of the file".into(),
            None,
        ),
        K::UnterminatedCommentBlock => (
            "expected `*/` to close the comment, found the end of the file".into(),
            None,
        ),
        K::SingleQuotedStringsNotAllowed => (
            "expected a string in double quotes, found a single-quoted string".into(),
            Some("JSON strings use double quotes"),
        ),
        K::HexadecimalNumbersNotAllowed => {
            (format!("expected a decimal number, found {found}"), None)
        }
        K::UnaryPlusNumbersNotAllowed
        | K::BareDecimalPointNumbersNotAllowed
        | K::NonFiniteNumbersNotAllowed
        | K::ExpectedDigit
        | K::ExpectedDigitFollowingNegativeSign
        | K::ExpectedPlusMinusOrDigitInNumberLiteral => (
            format!(
                "expected a JSON number ({}), found {found}",
                e.kind().to_string().to_lowercase()
            ),
            None,
        ),
        K::NestingDepthExceeded => (
            format!("arrays and objects are nested more than {MAX_DEPTH} levels deep"),
            None,
        ),
        K::String(s) => (
            format!("invalid string: {}", lower_first(&s.to_string())),
            match s {
                jsonc_parser::ParseStringErrorKind::UnterminatedStringLiteral => {
                    Some("close the string with `\"` on the same line")
                }
                _ => Some("valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"),
            },
        ),
        K::CommentsNotAllowed | K::TrailingCommasNotAllowed => {
            (lower_first(&e.kind().to_string()), None)
        }
        #[allow(unreachable_patterns)]
        other => (lower_first(&other.to_string()), None),
    };
    ConfigError::Invalid {
        location: Box::new(location_at(file, text, start, path_at(text, start))),
        message,
        hint: hint.map(str::to_owned),
    }
}

/// The property path at byte `offset` of a possibly malformed text, found by a forgiving scan
/// of the brackets, keys and commas before it (used to name the property of a syntax error).
pub fn path_at(text: &str, offset: usize) -> JsonPath {
    enum Frame {
        Object {
            key: Option<String>,
            expect_key: bool,
        },
        Array {
            index: usize,
        },
    }
    let bytes = text.as_bytes();
    let end = offset.min(bytes.len());
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < end {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let raw = text.get(start..(i + 1).min(text.len())).unwrap_or("");
                if let Some(Frame::Object { key, expect_key }) = stack.last_mut()
                    && *expect_key
                {
                    let name = serde_json::from_str::<String>(raw)
                        .unwrap_or_else(|_| raw.trim_matches('"').to_owned());
                    *key = Some(name);
                    *expect_key = false;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'{' => stack.push(Frame::Object {
                key: None,
                expect_key: true,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { key, expect_key }) => {
                    *key = None;
                    *expect_key = true;
                }
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    let mut path = JsonPath::root();
    for frame in &stack {
        match frame {
            Frame::Object { key: Some(k), .. } => path = path.key(k),
            Frame::Object { key: None, .. } => break,
            Frame::Array { index } => path = path.index(*index),
        }
    }
    path
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Describes the text at `offset` for "found …" messages.
fn found_token(text: &str, offset: usize) -> String {
    let rest = text.get(offset..).unwrap_or("");
    let rest = rest.trim_start();
    let Some(c) = rest.chars().next() else {
        return "the end of the file".into();
    };
    if c.is_alphanumeric() || c == '_' || c == '-' || c == '+' || c == '.' {
        let word: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'))
            .take(40)
            .collect();
        return format!("`{word}`");
    }
    if c == '"' {
        let s: String = rest
            .chars()
            .skip(1)
            .take_while(|&c| c != '"' && c != '\n')
            .take(40)
            .collect();
        return format!("\"{s}\"");
    }
    format!("`{c}`")
}

/// Builds a [`SourceLocation`] for byte `offset` of `text` (clamped to the text).
pub fn location_at(file: &Path, text: &str, offset: usize, path: JsonPath) -> SourceLocation {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = text[line_start..offset].chars().count() + 1;
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let line_text = text[line_start..line_end].trim_end_matches('\r').to_owned();
    SourceLocation {
        file: file.to_owned(),
        line,
        column,
        path: path.to_string(),
        line_text,
    }
}

impl Document {
    /// The location of the value at `path` (its first character), or of the nearest existing
    /// ancestor when the path does not exist (e.g. a missing required property is reported at
    /// its parent object).
    pub fn locate(&self, path: &JsonPath) -> SourceLocation {
        let span = self.span(path);
        location_at(&self.file, &self.text, span.value, path.clone())
    }

    /// The location of the property name at the end of `path` (falls back to the value).
    pub fn locate_key(&self, path: &JsonPath) -> SourceLocation {
        let span = self.span(path);
        location_at(
            &self.file,
            &self.text,
            span.key.unwrap_or(span.value),
            path.clone(),
        )
    }

    /// Finds the byte offsets of `path` by re-parsing the text (cheap; only used for messages).
    pub fn span(&self, path: &JsonPath) -> Span {
        let Ok(parsed) = jsonc_parser::parse_to_ast(&self.text, &Default::default(), &options())
        else {
            return Span {
                key: None,
                value: 0,
            };
        };
        let Some(mut node) = parsed.value.as_ref() else {
            return Span {
                key: None,
                value: 0,
            };
        };
        let mut key = None;
        for seg in &path.0 {
            let next = match (seg, node) {
                (Segment::Key(k), ast::Value::Object(o)) => o
                    .properties
                    .iter()
                    .rev()
                    .find(|p| p.name.as_str() == k)
                    .map(|p| (Some(p.range.start), &p.value)),
                (Segment::Index(i), ast::Value::Array(a)) => a.elements.get(*i).map(|v| (None, v)),
                _ => None,
            };
            match next {
                Some((k, v)) => {
                    key = k;
                    node = v;
                }
                None => break,
            }
        }
        Span {
            key,
            value: node.start(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Document> {
        parse(Path::new("/x/devcontainer.json"), text)
    }

    fn err(text: &str) -> String {
        match p(text) {
            Ok(_) => panic!("expected an error for {text:?}"),
            Err(ConfigError::Invalid {
                location, message, ..
            }) => format!("{}:{}: {}", location.line, location.column, message),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parse_accepts_comments_trailing_commas_and_bom() {
        let d = p("\u{feff}{\n // c\n \"a\": [1, 2,], /* b */ \"b\": {\"c\": true,},\n}").unwrap();
        assert_eq!(d.value, serde_json::json!({"a": [1, 2], "b": {"c": true}}));
    }

    #[test]
    fn parse_keeps_key_order() {
        let d = p(r#"{"z": 1, "a": 2, "m": 3}"#).unwrap();
        let keys: Vec<_> = d.value.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    #[test]
    fn parse_duplicate_key_last_wins_first_position_with_warning() {
        let d = p("{\"a\": 1, \"b\": 2, \"a\": 3}").unwrap();
        assert_eq!(d.value.to_string(), r#"{"a":3,"b":2}"#);
        assert_eq!(d.warnings.len(), 1);
        let w = d.warnings[0].to_string();
        assert!(w.contains("1:18: a: duplicate property `a`"), "{w}");
    }

    #[test]
    fn parse_errors_are_located() {
        assert_eq!(
            err(""),
            "1:1: the file is empty; expected a JSON object such as `{\"image\": \"debian\"}`"
        );
        assert_eq!(
            err("[1]"),
            "1:1: expected a JSON object at the root of devcontainer.json, found an array"
        );
        assert_eq!(
            err("{\n  \"a\": 1\n  \"b\": 2\n}"),
            "2:9: expected `,` after this value, found \"b\""
        );
        assert_eq!(
            err("{\"a\": 0x10}"),
            "1:7: expected a decimal number, found `0x10`"
        );
        assert_eq!(
            err("{a: 1}"),
            "1:2: expected a property name in double quotes, found `a`"
        );
        assert_eq!(
            err("{\"a\": 1"),
            "1:1: expected `}` to close the object, found the end of the file"
        );
    }

    #[test]
    fn parse_rejects_deep_nesting_without_overflow() {
        let text = format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(err(&text).contains("nested more than 128 levels"));
        let ok = format!("{{\"a\": {}{}}}", "[".repeat(100), "]".repeat(100));
        assert!(p(&ok).is_ok());
    }

    #[test]
    fn depth_check_ignores_brackets_in_strings_and_comments() {
        let text = format!(
            "{{\"a\": \"{}\" // {}\n}}",
            "[".repeat(500),
            "{".repeat(500)
        );
        assert!(p(&text).is_ok());
    }

    #[test]
    fn path_at_names_the_property_of_a_syntax_error() {
        let text = "{\"a\": {\"b\": [1, 2, /* ] */ \"x\" 3]}}";
        let at = text.find(" 3").unwrap();
        assert_eq!(path_at(text, at).to_string(), "a.b[2]");
        assert_eq!(path_at("{\"k\": ", 7).to_string(), "k");
        assert_eq!(path_at("{\"k\": 1, ", 10).to_string(), "");
    }

    #[test]
    fn json_path_parse_round_trips() {
        for p in [
            "",
            "a",
            "forwardPorts[0]",
            "features.\"ghcr.io/x/y:1\".version",
            "a[1][2].b",
            "\"a\\\"b\".c",
        ] {
            assert_eq!(JsonPath::parse(p).unwrap().to_string(), p, "{p}");
        }
    }

    #[test]
    fn json_path_display() {
        let path = JsonPath::root()
            .key("features")
            .key("ghcr.io/x/y:1")
            .key("version");
        assert_eq!(path.to_string(), "features.\"ghcr.io/x/y:1\".version");
        assert_eq!(
            JsonPath::root().key("forwardPorts").index(0).to_string(),
            "forwardPorts[0]"
        );
    }

    #[test]
    fn locate_finds_nested_values() {
        let d = p("{\n  \"forwardPorts\": [\n    1,\n    \"abc\"\n  ]\n}").unwrap();
        let loc = d.locate(&JsonPath::root().key("forwardPorts").index(1));
        assert_eq!((loc.line, loc.column), (4, 5));
        assert_eq!(loc.line_text, "    \"abc\"");
        assert_eq!(loc.path, "forwardPorts[1]");
        let key = d.locate_key(&JsonPath::root().key("forwardPorts"));
        assert_eq!((key.line, key.column), (2, 3));
    }
}
