//! The refs of an untrusted git directory read as data ([`read_refs`]), and the rules a ref
//! name and an object name must follow.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Result;
use super::nofollow;
use crate::config::hostgit;

/// The most entries a walk of the container's `refs/` visits.
const MAX_REF_ENTRIES: usize = 200_000;

/// The largest `packed-refs` read (bytes).
const PACKED_REFS_MAX: u64 = 256 << 20;

/// The refs of the container git directory `dir`, read as data: `packed-refs` lines, then loose
/// files under `refs/` (regular files only, no link followed), names that git would accept
/// ([`valid_ref_name`]), values of `hex_len` hexadecimal digits; symbolic refs are skipped.
pub(crate) fn read_refs(dir: &Path, hex_len: usize) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let valid = |name: &str, oid: &str| valid_ref_name(name) && oid.len() == hex_len && is_oid(oid);
    match hostgit::read_no_follow(&dir.join("packed-refs"), PACKED_REFS_MAX) {
        Ok(bytes) => {
            for line in String::from_utf8_lossy(&bytes).lines() {
                if line.starts_with('#') || line.starts_with('^') {
                    continue;
                }
                if let Some((oid, name)) = line.split_once(' ')
                    && valid(name, oid)
                {
                    out.insert(name.to_string(), oid.to_ascii_lowercase());
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => {}
    }
    let mut budget = MAX_REF_ENTRIES;
    // every step opened without following a link: a `refs` the container swapped for a link
    // to another repository's refs is not read (attacker's review of issue 25)
    let mut stack = vec![(PathBuf::from("refs"), "refs".to_string(), 0usize)];
    while let Some((folder, name, depth)) = stack.pop() {
        for (file, kind) in nofollow::list(dir, &folder) {
            if budget == 0 {
                return Ok(out);
            }
            budget -= 1;
            let child = format!("{name}/{file}");
            match kind {
                Some(true) if depth < 32 => stack.push((folder.join(&file), child, depth + 1)),
                Some(false) => {
                    let mut bytes = Vec::new();
                    let Ok(f) = nofollow::open_file(dir, &folder.join(&file)) else {
                        continue;
                    };
                    if std::io::Read::read_to_end(&mut std::io::Read::take(f, 4096), &mut bytes)
                        .is_err()
                    {
                        continue;
                    }
                    let text = String::from_utf8_lossy(&bytes);
                    let oid = text.trim();
                    if valid(&child, oid) {
                        out.insert(child, oid.to_ascii_lowercase());
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Whether `name` is a full ref name git accepts (`git check-ref-format` rules): under `refs/`,
/// no empty component, none starting with `.` or ending with `.lock`, no `..`, `@{`, control
/// characters, space, `~ ^ : ? * [ \`, not ending with `.` or `/`. Pure.
pub fn valid_ref_name(name: &str) -> bool {
    name.starts_with("refs/")
        && name.len() < 1024
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("@{")
        && !name
            .bytes()
            .any(|b| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b))
        && name
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"))
}

/// Whether `s` is an object name: 40 or 64 hexadecimal digits.
pub(crate) fn is_oid(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_names_follow_gits_rules() {
        for good in ["refs/heads/main", "refs/heads/a/b-c_d.e", "refs/tags/v1.0"] {
            assert!(valid_ref_name(good), "{good}");
        }
        for bad in [
            "HEAD",
            "refs/heads/",
            "refs/heads/a..b",
            "refs/heads/.hidden",
            "refs/heads/x.lock",
            "refs/heads/a b",
            "refs/heads/a~1",
            "refs/heads/a@{1}",
            "refs/heads//a",
            "refs/heads/a.",
            "refs/heads/a\\b",
        ] {
            assert!(!valid_ref_name(bad), "{bad}");
        }
    }
}
