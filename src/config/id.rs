//! Container id labels and the `${devcontainerId}` value.
//!
//! Implements the spec's suggested algorithm
//! ([spec: devcontainer-id-variable](https://containers.dev/implementors/spec/#devcontainerid)):
//! the identifying container labels as a compact JSON object with sorted keys, UTF-8, SHA-256,
//! read as a big-endian unsigned integer, written in base 32 (digits `0-9a-v`), left-padded
//! with `0` to 52 characters.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::workspace::resolve_path;
use crate::names::{CONFIG_FILE_LABEL, LOCAL_FOLDER_LABEL};

/// Length of a `${devcontainerId}` value: 256 bits in base 32, rounded up.
pub const DEVCONTAINER_ID_LEN: usize = 52;

/// Digits of the base-32 rendering (JavaScript `BigInt.prototype.toString(32)`).
const BASE32_DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

/// The default id labels the reference CLI puts on a dev container:
/// `devcontainer.local_folder` = the host workspace folder (as given, not the git root) and
/// `devcontainer.config_file` = the path of the `devcontainer.json` in use.
///
/// Both paths are first made absolute and normalised like the reference's `path.resolve`
/// ([`super::workspace::resolve_path`]: `/w/ws/` and `/w/x/../ws` label as `/w/ws`). Paths that
/// are not valid UTF-8 are converted lossily (U+FFFD), as they would be in a label.
pub fn id_labels(local_folder: &Path, config_file: &Path) -> BTreeMap<String, String> {
    let text = |path: &Path| resolve_path(path).to_string_lossy().into_owned();
    BTreeMap::from([
        (LOCAL_FOLDER_LABEL.to_owned(), text(local_folder)),
        (CONFIG_FILE_LABEL.to_owned(), text(config_file)),
    ])
}

/// The `${devcontainerId}` for a set of id labels: 52 characters from `[0-9a-v]`.
///
/// Stable for equal label sets (across rebuilds), different for different workspace folders or
/// config files. Keys are sorted by UTF-16 code units, as JavaScript's `Array.prototype.sort`
/// does, and strings are escaped as `JSON.stringify` escapes them (`"`, `\`, control
/// characters; not `/`, not non-ASCII), so the value equals the reference CLI's for any labels.
pub fn devcontainer_id(labels: &BTreeMap<String, String>) -> String {
    let mut keys: Vec<&String> = labels.keys().collect();
    keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    let mut object = serde_json::Map::new();
    for key in keys {
        object.insert(key.clone(), serde_json::Value::String(labels[key].clone()));
    }
    let canonical = serde_json::Value::Object(object).to_string();
    let digest = Sha256::digest(canonical.as_bytes());
    base32_padded(&digest)
}

/// Renders a big-endian unsigned integer of 32 bytes as 52 base-32 digits (5 bits each, most
/// significant first; the leading digit holds the top 1 bit, so the padding is implicit).
fn base32_padded(bytes: &[u8]) -> String {
    let total_bits = bytes.len() * 8;
    let digits = total_bits.div_ceil(5);
    let mut out = String::with_capacity(digits);
    for digit in 0..digits {
        // Bit range of this digit, counted from the least significant end.
        let low = (digits - 1 - digit) * 5;
        let mut value = 0usize;
        for bit in (low..low + 5).rev() {
            value <<= 1;
            if bit < total_bits {
                let byte = bytes[bytes.len() - 1 - bit / 8];
                value |= usize::from((byte >> (bit % 8)) & 1);
            }
        }
        out.push(char::from(BASE32_DIGITS[value]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published test vector (spec-distilled.md §3), checklist item 17.
    #[test]
    fn devcontainer_id_matches_spec_test_vector() {
        let labels = id_labels(
            Path::new("/home/user/project"),
            Path::new("/home/user/project/.devcontainer/devcontainer.json"),
        );
        let id = devcontainer_id(&labels);
        assert_eq!(id, "0ns9efvs2cg80a2avksvk7nqv06jrab7n2918j79h49700ucligl");
    }

    /// Checklist item 17: only `[0-9a-v]`, always 52 characters.
    #[test]
    fn devcontainer_id_alphabet_and_length() {
        for folder in ["/a", "/home/ü ber/x,y", "", "/tmp/\"quoted\"\n"] {
            let id = devcontainer_id(&id_labels(Path::new(folder), Path::new("/c.json")));
            assert_eq!(id.len(), DEVCONTAINER_ID_LEN, "{folder:?}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'v').contains(&b)),
                "{id}"
            );
        }
    }

    /// Checklist item 16: same labels, same id; different workspace folder, different id.
    #[test]
    fn devcontainer_id_stable_and_distinct() {
        let cfg = Path::new("/w/.devcontainer/devcontainer.json");
        let a1 = devcontainer_id(&id_labels(Path::new("/w/a"), cfg));
        let a2 = devcontainer_id(&id_labels(Path::new("/w/a"), cfg));
        let b = devcontainer_id(&id_labels(Path::new("/w/b"), cfg));
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
    }

    #[test]
    fn id_labels_use_reference_names() {
        let labels = id_labels(Path::new("/ws"), Path::new("/ws/.devcontainer.json"));
        assert_eq!(labels.len(), 2);
        assert_eq!(labels["devcontainer.local_folder"], "/ws");
        assert_eq!(labels["devcontainer.config_file"], "/ws/.devcontainer.json");
        // Normalised like Node's `path.resolve`.
        let same = id_labels(
            Path::new("/x/../ws/"),
            Path::new("/ws/./.devcontainer.json"),
        );
        assert_eq!(same, labels);
    }

    #[test]
    fn base32_of_small_numbers() {
        let mut bytes = [0u8; 32];
        assert_eq!(base32_padded(&bytes), "0".repeat(52));
        bytes[31] = 33; // 33 = 1*32 + 1
        assert_eq!(base32_padded(&bytes), format!("{}11", "0".repeat(50)));
        let max = [0xffu8; 32];
        // 2^256 - 1: top digit holds one bit.
        assert_eq!(base32_padded(&max), format!("1{}", "v".repeat(51)));
    }

    /// Keys with characters outside the BMP sort by UTF-16 code units, as JavaScript sorts.
    #[test]
    fn key_order_is_utf16() {
        // U+FF01 (BMP, high) vs U+1F600 (surrogate pair D83D..): UTF-16 puts the emoji first,
        // byte order puts U+FF01 first.
        let labels = BTreeMap::from([
            ("\u{ff01}".to_owned(), "x".to_owned()),
            ("\u{1f600}".to_owned(), "y".to_owned()),
        ]);
        let mut reversed = serde_json::Map::new();
        reversed.insert("\u{1f600}".into(), "y".into());
        reversed.insert("\u{ff01}".into(), "x".into());
        let expected = base32_padded(&Sha256::digest(
            serde_json::Value::Object(reversed).to_string(),
        ));
        assert_eq!(devcontainer_id(&labels), expected);
    }
}
