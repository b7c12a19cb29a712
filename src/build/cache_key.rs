//! Cache keys: a SHA-256 over a documented, ordered list of length-prefixed fields.
//!
//! Each field is written as `<name>\0<len as u64 big-endian><bytes>`, so no two different
//! field lists give the same byte stream. The lists themselves are documented where keys are
//! made ([`super::features::FeaturesPlan::tag`], [`super::uid::UidPlan::tag`]); see
//! spec-note 0121.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::{BuildError, Result};
use super::tree::{EntryKind, TreeEntry};

/// Incrementally hashes named fields into a hex SHA-256 key.
#[derive(Debug, Clone, Default)]
pub struct KeyHasher(Sha256);

impl KeyHasher {
    /// A hasher whose first field is `domain` (e.g. `devcell.build.features/1`), so keys of
    /// different kinds never collide.
    pub fn new(domain: &str) -> Self {
        let mut h = KeyHasher(Sha256::new());
        h.field("domain", domain.as_bytes());
        h
    }

    /// Adds one named field.
    pub fn field(&mut self, name: &str, value: &[u8]) -> &mut Self {
        self.0.update(name.as_bytes());
        self.0.update([0u8]);
        self.0.update((value.len() as u64).to_be_bytes());
        self.0.update(value);
        self
    }

    /// The key: 64 lowercase hex digits.
    pub fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// `sha256:<hex>` over a folder's entries as listed by [`super::tree::walk`], in that order:
/// for each entry its relative path, its kind and normalised mode, and its content (files) or
/// link target (symbolic links). Used for local Features, which have no digest.
///
/// Errors: [`BuildError::Io`] when a file cannot be read.
pub fn tree_digest(dir: &Path, entries: &[TreeEntry]) -> Result<String> {
    let mut h = KeyHasher::new("devcell.tree/1");
    for entry in entries {
        h.field("path", entry.rel.as_os_str().as_bytes());
        match &entry.kind {
            EntryKind::Dir => {
                h.field("dir", format!("{:o}", entry.kind.mode()).as_bytes());
            }
            EntryKind::File { .. } => {
                let path = dir.join(&entry.rel);
                let content = fs::read(&path).map_err(BuildError::io("read", &path))?;
                h.field("file", format!("{:o}", entry.kind.mode()).as_bytes());
                h.field("content", &content);
            }
            EntryKind::Symlink(target) => {
                h.field("symlink", target.as_os_str().as_bytes());
            }
        }
    }
    Ok(format!("sha256:{}", h.finish()))
}

#[cfg(test)]
mod tests {
    use super::super::tree::walk;
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn fields_are_length_prefixed() {
        let mut a = KeyHasher::new("d");
        a.field("x", b"ab").field("y", b"c");
        let mut b = KeyHasher::new("d");
        b.field("x", b"a").field("y", b"bc");
        assert_ne!(a.finish(), b.finish());
    }

    #[test]
    fn tree_digest_changes_with_content_mode_and_name_only() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("install.sh"), "echo hi").unwrap();
        fs::write(d.join("devcontainer-feature.json"), "{}").unwrap();
        let digest = |d: &Path| tree_digest(d, &walk(d, "f").unwrap()).unwrap();
        let first = digest(d);
        assert!(first.starts_with("sha256:") && first.len() == 71);
        // Same content, rewritten (new mtime): same digest.
        fs::write(d.join("install.sh"), "echo hi").unwrap();
        assert_eq!(digest(d), first);
        // Execute bit: different.
        fs::set_permissions(d.join("install.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        let exec = digest(d);
        assert_ne!(exec, first);
        // Content: different.
        fs::write(d.join("install.sh"), "echo ho").unwrap();
        assert_ne!(digest(d), exec);
        // A copy elsewhere with the same entries: same digest.
        let other = tempfile::tempdir().unwrap();
        super::super::tree::copy(d, &walk(d, "f").unwrap(), other.path()).unwrap();
        assert_eq!(digest(other.path()), digest(d));
    }
}
