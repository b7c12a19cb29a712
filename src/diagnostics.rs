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

    /// A masker for one stream that arrives in pieces ([`StreamMask`]).
    pub fn stream(&self) -> StreamMask {
        StreamMask::new(&self.0)
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

/// Masks secret values in one stream of bytes that arrives in pieces (an agent's output), in
/// time linear in its length whatever it holds (issue 25, class 6; spec-note 0425): a value
/// split across pieces is masked; what could still be the start of a value is held back (at
/// most the longest value's length less one byte), everything else is passed on at once.
/// Values are found leftmost-longest and never overlap.
#[derive(Debug)]
pub struct StreamMask {
    finder: Option<aho_corasick::AhoCorasick>,
    values: Vec<Vec<u8>>,
    longest: usize,
    pending: Vec<u8>,
    stats: StreamMaskStats,
}

/// What a [`StreamMask`] did, for tests of its cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamMaskStats {
    /// Bytes searched for values, in total (each held byte is searched again once per piece).
    pub scanned: u64,
    /// The most bytes it held at once (held back plus the piece being looked at).
    pub max_pending: usize,
}

impl StreamMask {
    fn new(values: &[String]) -> StreamMask {
        let values: Vec<Vec<u8>> = values.iter().map(|v| v.as_bytes().to_vec()).collect();
        let finder = (!values.is_empty())
            .then(|| {
                aho_corasick::AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                    .build(&values)
                    .ok()
            })
            .flatten();
        StreamMask {
            longest: values.iter().map(Vec::len).max().unwrap_or(0),
            finder,
            values,
            pending: Vec::new(),
            stats: StreamMaskStats::default(),
        }
    }

    /// Takes the next piece; returns what can be shown now, values masked.
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(piece);
        self.stats.max_pending = self.stats.max_pending.max(self.pending.len());
        let decided = utf8_boundary(&self.pending, self.undecided_start());
        self.take(decided)
    }

    /// Everything held, values masked (the stream ended, or its reader shows what it has).
    pub fn flush(&mut self) -> Vec<u8> {
        let len = self.pending.len();
        self.take(len)
    }

    /// How many bytes are held back.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    /// What it did so far.
    pub fn stats(&self) -> StreamMaskStats {
        self.stats
    }

    /// Where the held bytes that could still begin a value start: the longest end of the
    /// pending bytes that is a proper beginning of a value (else their end).
    fn undecided_start(&self) -> usize {
        let len = self.pending.len();
        let most = self.longest.saturating_sub(1).min(len);
        for k in (1..=most).rev() {
            let tail = &self.pending[len - k..];
            if self
                .values
                .iter()
                .any(|v| v.len() > k && v.starts_with(tail))
            {
                return len - k;
            }
        }
        len
    }

    /// Masks and removes the pending bytes up to `decided` (further when a value that starts
    /// before it ends after it), returning them.
    fn take(&mut self, decided: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(decided);
        let mut at = 0;
        if let Some(finder) = &self.finder {
            self.stats.scanned += self.pending.len() as u64;
            for m in finder.find_iter(&self.pending) {
                if m.start() >= decided {
                    break;
                }
                out.extend_from_slice(&self.pending[at..m.start()]);
                out.extend_from_slice(SECRET_MASK.as_bytes());
                at = m.end();
            }
        }
        let cut = decided.max(at);
        out.extend_from_slice(&self.pending[at..cut]);
        self.pending.drain(..cut);
        out
    }
}

/// The longest output line devcell keeps or shows whole (hook, build and step output,
/// spec-note 0658): a longer one is cut there and marked with [`LINE_CUT_MARKER`].
pub const MAX_OUTPUT_LINE: usize = 64 * 1024;

/// What ends a line cut at [`MAX_OUTPUT_LINE`] (the rest of it, up to its newline, is dropped).
pub const LINE_CUT_MARKER: &str = " [devcell: line cut at 64 KiB]";

/// Splits one stream of output that arrives in pieces into lines, in work linear in its length
/// and in memory bounded by [`MAX_OUTPUT_LINE`] whatever it holds (issue 25, class 6; spec-note
/// 0658): only each new piece is searched for a newline, and a line longer than the bound is
/// passed on cut (its first [`MAX_OUTPUT_LINE`] bytes, at a character boundary, then
/// [`LINE_CUT_MARKER`]) and the rest of it dropped. The line-wise counterpart of
/// [`StreamMask`], for output shown line by line (prefixed, kept as a tail). A line's end
/// (`\n`, `\r\n`) is not part of it; invalid UTF-8 is shown as U+FFFD.
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    cutting: bool,
    stats: LineSplitterStats,
}

/// What a [`LineSplitter`] did, for tests of its cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineSplitterStats {
    /// Bytes searched for a newline, in total.
    pub scanned: u64,
    /// The most bytes of an unfinished line it held at once.
    pub max_pending: usize,
    /// Lines cut at the bound.
    pub cut: u64,
}

impl LineSplitter {
    /// Takes the next piece; `each` gets every line it completes (or cuts).
    pub fn push(&mut self, mut piece: &[u8], mut each: impl FnMut(String)) {
        while !piece.is_empty() {
            let newline = piece.iter().position(|&b| b == b'\n');
            let (part, rest) = match newline {
                Some(i) => (&piece[..i], &piece[i + 1..]),
                None => (piece, &[][..]),
            };
            self.stats.scanned += (piece.len() - rest.len()) as u64;
            if !self.cutting {
                let room = MAX_OUTPUT_LINE - self.pending.len();
                if part.len() <= room {
                    self.pending.extend_from_slice(part);
                } else {
                    self.pending.extend_from_slice(&part[..room]);
                    self.stats.max_pending = self.stats.max_pending.max(self.pending.len());
                    let whole = utf8_boundary(&self.pending, self.pending.len());
                    self.pending.truncate(whole);
                    let mut line = String::from_utf8_lossy(&self.pending).into_owned();
                    line.push_str(LINE_CUT_MARKER);
                    each(line);
                    self.pending.clear();
                    self.cutting = true;
                    self.stats.cut += 1;
                }
            }
            self.stats.max_pending = self.stats.max_pending.max(self.pending.len());
            if newline.is_some() {
                if !self.cutting {
                    each(self.take_line());
                }
                self.pending.clear();
                self.cutting = false;
            }
            piece = rest;
        }
    }

    /// The unfinished last line, if any (the stream ended); a cut one was passed on already.
    pub fn finish(&mut self) -> Option<String> {
        let cutting = std::mem::take(&mut self.cutting);
        if cutting || self.pending.is_empty() {
            self.pending.clear();
            return None;
        }
        Some(self.take_line())
    }

    /// What it did so far.
    pub fn stats(&self) -> LineSplitterStats {
        self.stats
    }

    /// The pending bytes as a line (a `\r` before its newline dropped), emptied.
    fn take_line(&mut self) -> String {
        let end = self
            .pending
            .iter()
            .rposition(|&b| b != b'\r')
            .map_or(0, |i| i + 1);
        let line = String::from_utf8_lossy(&self.pending[..end]).into_owned();
        self.pending.clear();
        line
    }
}

/// `at`, or the start of the character it would cut when the bytes before it end in an
/// unfinished UTF-8 sequence.
fn utf8_boundary(bytes: &[u8], at: usize) -> usize {
    let head = &bytes[..at];
    let Some(start) = (head.len().saturating_sub(4)..head.len())
        .rev()
        .find(|&i| head[i] & 0xC0 != 0x80)
    else {
        return at;
    };
    let needs = match head[start] {
        b if b >= 0xF0 => 4,
        b if b >= 0xE0 => 3,
        b if b >= 0xC0 => 2,
        _ => 1,
    };
    if head.len() - start < needs {
        start
    } else {
        at
    }
}

/// Stable error codes of the envelope (serialised as snake_case strings).
///
/// See `handoff::envelope`'s documentation for the exit code of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A bug or an unexpected I/O failure. Exit 1.
    Internal,
    /// A flag or argument is wrong. Exit 2.
    InvalidArgument,
    /// `audit --min-score N` scored below N: `details` holds `score`, `maxScore`, `minScore`
    /// and the whole `report`. Exit 3.
    BelowMinScore,
    /// `doctor` found something at error level (the engine unreachable included): `details`
    /// holds the whole report. Exit 4.
    Unhealthy,
    /// `devcontainer.json` or devcell's `config.toml` is invalid. Exit 10.
    ConfigInvalid,
    /// A workspace, agent, repository, container or session does not exist. Exit 11.
    NotFound,
    /// The configuration asks for a permission the user has not granted. Exit 12.
    PermissionRequired,
    /// No container engine is reachable. Exit 13.
    EngineUnavailable,
    /// The image or a Feature failed to build. Exit 14.
    BuildFailed,
    /// The container could not be created or started. Exit 15.
    ContainerFailed,
    /// A lifecycle hook exited non-zero. Exit 16.
    HookFailed,
    /// A handoff session is already live for the workspace. Exit 17.
    SessionActive,
    /// The configuration or an input no longer matches the environment record given
    /// (`--environment`): `details.differences` names each. Exit 18.
    EnvironmentDrift,
    /// The agent exited non-zero or was killed: exit with its code, or 128 + signal.
    AgentFailed,
}

impl ErrorCode {
    /// Every code, in table order.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::Internal,
        ErrorCode::InvalidArgument,
        ErrorCode::BelowMinScore,
        ErrorCode::Unhealthy,
        ErrorCode::ConfigInvalid,
        ErrorCode::NotFound,
        ErrorCode::PermissionRequired,
        ErrorCode::EngineUnavailable,
        ErrorCode::BuildFailed,
        ErrorCode::ContainerFailed,
        ErrorCode::HookFailed,
        ErrorCode::SessionActive,
        ErrorCode::EnvironmentDrift,
        ErrorCode::AgentFailed,
    ];

    /// The stable string (`config_invalid`, …), identical to the serialised form.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Internal => "internal",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::BelowMinScore => "below_min_score",
            ErrorCode::Unhealthy => "unhealthy",
            ErrorCode::ConfigInvalid => "config_invalid",
            ErrorCode::NotFound => "not_found",
            ErrorCode::PermissionRequired => "permission_required",
            ErrorCode::EngineUnavailable => "engine_unavailable",
            ErrorCode::BuildFailed => "build_failed",
            ErrorCode::ContainerFailed => "container_failed",
            ErrorCode::HookFailed => "hook_failed",
            ErrorCode::SessionActive => "session_active",
            ErrorCode::EnvironmentDrift => "environment_drift",
            ErrorCode::AgentFailed => "agent_failed",
        }
    }

    /// The documented exit code. For [`ErrorCode::AgentFailed`] this is the fallback (1) used
    /// when the agent's own status is unknown; prefer `ErrorBody::exit_code` (`handoff::envelope`).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorCode::Internal => 1,
            ErrorCode::InvalidArgument => 2,
            ErrorCode::BelowMinScore => 3,
            ErrorCode::Unhealthy => 4,
            ErrorCode::ConfigInvalid => 10,
            ErrorCode::NotFound => 11,
            ErrorCode::PermissionRequired => 12,
            ErrorCode::EngineUnavailable => 13,
            ErrorCode::BuildFailed => 14,
            ErrorCode::ContainerFailed => 15,
            ErrorCode::HookFailed => 16,
            ErrorCode::SessionActive => 17,
            ErrorCode::EnvironmentDrift => 18,
            ErrorCode::AgentFailed => 1,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ErrorCode {
    type Err = String;

    /// Parses a stable string; the error names the unknown code.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown error code `{s}`"))
    }
}

#[cfg(test)]
mod stream_mask_tests {
    use super::*;

    fn mask(values: &[&str]) -> SecretMask {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        SecretMask::new(values.iter())
    }

    /// The whole stream through `pieces`, each piece at most `size` bytes.
    fn streamed(m: &mut StreamMask, input: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in input.chunks(size) {
            out.extend(m.push(piece));
        }
        out.extend(m.flush());
        out
    }

    #[test]
    fn a_value_split_at_any_point_is_masked() {
        let secrets = mask(&["s3cr3t-value", "s3cr3t", "tok"]);
        let input = b"a s3cr3t-value b s3cr3t c tok d s3cr3t-val e";
        let expected = b"a ******** b ******** c ******** d ********-val e";
        for size in 1..input.len() {
            let mut m = secrets.stream();
            assert_eq!(streamed(&mut m, input, size), expected, "pieces of {size}");
        }
    }

    #[test]
    fn what_cannot_begin_a_value_is_passed_on_at_once() {
        let mut m = mask(&["secret"]).stream();
        assert_eq!(m.push(b"plain text\n"), b"plain text\n");
        assert_eq!(m.push(b"and a se"), b"and a ");
        assert_eq!(m.held(), 2);
        assert_eq!(m.push(b"cret!"), b"********!");
        assert_eq!(m.push(b"se"), b"");
        assert_eq!(m.push(b"a"), b"sea");
        // a character cut between pieces is passed on whole
        let mut m = mask(&[]).stream();
        let text = "é".as_bytes();
        assert_eq!(m.push(&text[..1]), b"");
        assert_eq!(m.push(&text[1..]), text);
    }

    #[test]
    fn eight_mib_without_a_newline_costs_linear_work() {
        let secret = "tok-0123456789abcdef";
        let mut m = mask(&[secret]).stream();
        let piece = 16 * 1024;
        let mut input = Vec::new();
        while input.len() < 8 << 20 {
            input.extend_from_slice(
                b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx tok-0123",
            );
            input.extend_from_slice(b"456789abcdef ");
        }
        let out = streamed(&mut m, &input, piece);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains(secret));
        assert_eq!(
            text.matches(SECRET_MASK).count(),
            String::from_utf8_lossy(&input).matches(secret).count()
        );
        let stats = m.stats();
        // held back: less than one value; searched: each byte once, plus the held bytes again
        assert!(stats.max_pending < piece + secret.len(), "{stats:?}");
        let pieces = input.len().div_ceil(piece) as u64;
        assert!(
            stats.scanned <= input.len() as u64 + pieces * secret.len() as u64,
            "{stats:?}"
        );
    }
}

#[cfg(test)]
mod line_splitter_tests {
    use super::*;

    fn split(pieces: &[&[u8]]) -> Vec<String> {
        let mut splitter = LineSplitter::default();
        let mut lines = Vec::new();
        for piece in pieces {
            splitter.push(piece, |l| lines.push(l));
        }
        lines.extend(splitter.finish());
        lines
    }

    #[test]
    fn lines_are_split_across_pieces_and_a_partial_last_one_is_kept() {
        assert_eq!(split(&[b"a\nb", b"c\r\nd\n"]), ["a", "bc", "d"]);
        assert_eq!(split(&[b"a\n\nb"]), ["a", "", "b"]);
        // a character split across pieces is whole
        assert_eq!(
            split(&["é\n".as_bytes()[..1].as_ref(), &"é\n".as_bytes()[1..]]),
            ["é"]
        );
    }

    /// 32 MiB without a newline in 4 KiB pieces (attack 26 Q2: the old splitter held the whole
    /// line and searched all of it again at every piece): the held bytes never pass the bound,
    /// every byte is searched once, and the line is passed on cut, marked, its rest dropped.
    #[test]
    fn output_without_newlines_is_cut_at_the_bound_in_linear_work() {
        let total = 32 * 1024 * 1024;
        let piece = vec![b'a'; 4096];
        let mut splitter = LineSplitter::default();
        let mut lines = Vec::new();
        for _ in 0..total / piece.len() {
            splitter.push(&piece, |l| lines.push(l));
            assert!(splitter.stats().max_pending <= MAX_OUTPUT_LINE);
        }
        splitter.push(b"\nnext\n", |l| lines.push(l));
        assert_eq!(splitter.finish(), None);
        let stats = splitter.stats();
        assert_eq!(stats.scanned, total as u64 + 6, "each byte searched once");
        assert_eq!(stats.max_pending, MAX_OUTPUT_LINE);
        assert_eq!(stats.cut, 1);
        assert_eq!(lines.len(), 2, "the cut line, then the next one");
        assert!(lines[0].ends_with(LINE_CUT_MARKER));
        assert_eq!(lines[0].len(), MAX_OUTPUT_LINE + LINE_CUT_MARKER.len());
        assert_eq!(lines[1], "next");
    }

    #[test]
    fn a_cut_falls_on_a_character_boundary_and_a_line_of_exactly_the_bound_is_whole() {
        let mut long = vec![b'a'; MAX_OUTPUT_LINE - 1];
        long.extend_from_slice("é".as_bytes());
        let lines = split(&[&long]);
        assert_eq!(lines[0].len(), MAX_OUTPUT_LINE - 1 + LINE_CUT_MARKER.len());
        let exact = vec![b'b'; MAX_OUTPUT_LINE];
        let lines = split(&[&exact, b"\n"]);
        assert_eq!(lines, [String::from_utf8(exact).unwrap()]);
    }
}
