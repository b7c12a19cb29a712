//! Text made safe for a terminal (spec-note 0434).
//!
//! Much of what devcell prints comes from the repository or the container: property names and
//! values in warnings and errors, the offending line of a `devcontainer.json`, Feature ids,
//! container names and labels in `status` and `audit`, hook output. A terminal acts on the
//! control characters in it: `ESC ] 52` writes the clipboard, `ESC [ 8 m` hides every line after
//! it, `CR` and `ESC [ 2 K` overwrite a warning with another text, some query sequences make the
//! terminal type an answer into its input. [`printable`] writes every such character as a
//! visible escape (`\u{1b}`), keeping `\n` and `\t`; [`Sgr::Keep`] keeps colour sequences (`ESC
//! [ <digits;:> m`) for output that is meant to be coloured (hook and build output) and resets
//! the colours at the end, so they cannot leak into the next line.
//!
//! Pure.

use std::borrow::Cow;
use std::fmt::Write as _;

/// What [`printable`] does with colour sequences (SGR, `ESC [ … m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sgr {
    /// Escape them like any other control sequence (devcell's own messages).
    Escape,
    /// Keep them, and end the text with a reset when it kept one (hook and build output).
    Keep,
}

/// The reset sequence appended after kept colour sequences.
const RESET: &str = "\u{1b}[0m";

/// Whether a terminal acts on `c`: C0 controls but `\n` and `\t`, DEL, C1 controls, and the
/// bidirectional overrides and isolates that reorder what is shown.
fn acts_on(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' => true,
        _ => false,
    }
}

/// The length in bytes of a colour sequence at the start of `s` (`ESC [`, parameters of
/// digits, `;` and `:`, then `m`), if `s` starts with one.
fn sgr_len(s: &str) -> Option<usize> {
    let rest = s.strip_prefix("\u{1b}[")?;
    let params = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';' || *b == b':')
        .count();
    (rest.as_bytes().get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// `text` with every character a terminal acts on written as `\u{…}` (colour sequences kept
/// when `sgr` is [`Sgr::Keep`]). Borrows when nothing needs escaping.
pub fn printable(text: &str, sgr: Sgr) -> Cow<'_, str> {
    if !text.chars().any(acts_on) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut kept = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if sgr == Sgr::Keep
            && let Some(len) = sgr_len(rest)
        {
            out.push_str(&rest[..len]);
            kept = true;
            rest = &rest[len..];
            continue;
        }
        if acts_on(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    if kept {
        out.push_str(RESET);
    }
    Cow::Owned(out)
}

/// A [`serde_json::ser::Formatter`] writing compact JSON whose strings also escape, as
/// `\uXXXX`, the characters a terminal acts on that JSON itself leaves raw (C1 controls, DEL,
/// bidirectional overrides): the same JSON value, safe to print on a terminal. serde_json
/// already escapes C0 controls.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonFormatter;

impl serde_json::ser::Formatter for JsonFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if acts_on(c) {
                writer.write_all(&fragment.as_bytes()[start..at])?;
                write!(writer, "\\u{:04x}", c as u32)?;
                start = at + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// `value` as one line of compact JSON through [`JsonFormatter`].
///
/// Errors: those of `value`'s `Serialize` implementation, or of `writer`.
pub fn write_json<W: std::io::Write, T: serde::Serialize + ?Sized>(
    writer: W,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(writer, JsonFormatter);
    value.serialize(&mut ser)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "warning: unknown property `x`\n\tline 2 — ünïcode";
        assert!(matches!(printable(text, Sgr::Escape), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn control_sequences_become_visible_escapes() {
        let hostile =
            "name\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}\r\u{1b}[2Kok\u{1b}[8m\u{9b}6n\u{202e}x";
        let shown = printable(hostile, Sgr::Escape);
        assert_eq!(
            shown,
            "name\\u{1b}]52;c;ZWNobyBwd25lZA==\\u{7}\\u{d}\\u{1b}[2Kok\\u{1b}[8m\\u{9b}6n\\u{202e}x"
        );
        assert!(!shown.chars().any(acts_on));
    }

    #[test]
    fn kept_colours_are_reset_and_other_sequences_still_escaped() {
        let line = "\u{1b}[1;31mred\u{1b}[0m \u{1b}]0;title\u{7} \u{1b}[2J";
        assert_eq!(
            printable(line, Sgr::Keep),
            "\u{1b}[1;31mred\u{1b}[0m \\u{1b}]0;title\\u{7} \\u{1b}[2J\u{1b}[0m"
        );
        assert_eq!(printable("\u{1b}[", Sgr::Keep), "\\u{1b}[");
        assert_eq!(printable("plain", Sgr::Keep), "plain");
    }

    #[test]
    fn json_escapes_what_a_terminal_acts_on_and_keeps_the_value() {
        let value = serde_json::json!({"k\u{9b}": "a\u{1b}[8m\u{7f}\u{202e}é\"\\"});
        let mut out = Vec::new();
        write_json(&mut out, &value).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, r#"{"k\u009b":"a\u001b[8m\u007f\u202eé\"\\"}"#);
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
