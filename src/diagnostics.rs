//! L0: shared diagnostic types: where in a file something went wrong, hints, and the mask
//! that keeps secret values out of what devcell shows.

use std::fmt;
use std::path::PathBuf;

/// A position in a source file, with the JSON property path at that position.
///
/// `line` and `column` are 1-based; `column` counts Unicode scalar values.
/// `path` is a property path such as `forwardPorts[0]` or `features."ghcr.io/x/y:1".version`
/// (empty for the document root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLocation {
    /// The file the location is in.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column number.
    pub column: usize,
    /// JSON property path (empty for the root).
    pub path: String,
    /// The full text of the offending line, without its line ending (for display).
    pub line_text: String,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

impl SourceLocation {
    /// Renders the offending line with a caret under the column, e.g.
    ///
    /// ```text
    ///    3 |   "forwardPorts": ["abc"],
    ///      |                    ^
    /// ```
    pub fn snippet(&self) -> String {
        let number = self.line.to_string();
        let pad = " ".repeat(number.len());
        let caret_pad: String = self
            .line_text
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{number} | {}\n{pad} | {caret_pad}^", self.line_text)
    }
}

/// A non-fatal finding reported alongside a successful result (e.g. an unknown property).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Where the finding is, when it concerns a file.
    pub location: Option<SourceLocation>,
    /// What was found, lowercase, no trailing period.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(loc) if loc.path.is_empty() => write!(f, "{loc}: {}", self.message),
            Some(loc) => write!(f, "{loc}: {}: {}", loc.path, self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Errors that know how the user can fix them.
pub trait Hint {
    /// A one-line suggestion, shown after the error as `hint: …`.
    fn hint(&self) -> Option<String> {
        None
    }
}

/// What a secret value is replaced by wherever devcell shows text (the reference CLI's mask).
pub const SECRET_MASK: &str = "********";

/// Secret values to hide in text devcell shows (hook and agent output, logs, messages):
/// non-empty values, longest first (so a value containing another is masked whole), each once.
///
/// Exact matches only, by design: a value split across lines or writes, encoded (base64, hex,
/// escaped) or otherwise transformed by the command is not masked (spec-note 0240).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretMask(Vec<String>);

impl SecretMask {
    /// The mask of `values` (empty ones are ignored).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a String>) -> Self {
        let mut values: Vec<String> = values
            .into_iter()
            .filter(|v| !v.is_empty())
            .cloned()
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        SecretMask(values)
    }

    /// `text` with every value replaced by [`SECRET_MASK`].
    pub fn apply(&self, text: &str) -> String {
        let mut text = text.to_string();
        for value in &self.0 {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), SECRET_MASK);
            }
        }
        text
    }
}
