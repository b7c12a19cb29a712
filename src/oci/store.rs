//! The content-addressed cache under `$XDG_CACHE_HOME/devcell` (or a `cache_dir` the caller
//! gives, e.g. from `--cache-dir`).
//!
//! Layout (spec-notes/0061):
//! - `blobs/sha256/<hex>`: blobs and manifests, by digest. Written atomically (temporary file
//!   in the same directory, then rename), so two processes fetching the same blob at once both
//!   succeed and readers never see a partial file. Re-verified on every read: a corrupt file is
//!   evicted and reported as a miss.
//! - `refs/tags/<sha256 of "registry/repository:tag">`: JSON `{"reference","digest"}`, the
//!   tag → manifest digest resolution, so a second resolve needs no network.
//! - `refs/urls/<sha256 of url>`: JSON `{"url","digest"}` for direct tarball downloads.

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::digest::{parse_sha256, sha256_digest, verify};
use super::error::{OciError, Result};

/// The cache directory used when none is given: `$XDG_CACHE_HOME/devcell` (the platform
/// cache dir from the `dirs` crate, `~/.cache/devcell` on Linux).
pub fn default_cache_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("devcell"))
}

/// A content-addressed cache rooted at one directory. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct RefEntry {
    key: String,
    digest: String,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> OciError + '_ {
    move |source| OciError::Store {
        path: path.to_owned(),
        source,
    }
}

impl Store {
    /// Opens (creating if needed) the store at `cache_dir`, or at [`default_cache_dir`].
    ///
    /// # Errors
    /// [`OciError::NoCacheDir`] when no directory can be named; [`OciError::Store`] when it
    /// cannot be created.
    pub fn open(cache_dir: Option<&Path>) -> Result<Store> {
        let root = match cache_dir {
            Some(d) => d.to_owned(),
            None => default_cache_dir().ok_or(OciError::NoCacheDir)?,
        };
        for sub in ["blobs/sha256", "refs/tags", "refs/urls", "tmp"] {
            let p = root.join(sub);
            std::fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        Ok(Store { root })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A scratch directory inside the store (same filesystem, so renames out of it are
    /// atomic).
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The path a blob with `digest` is stored at.
    ///
    /// # Errors
    /// [`OciError::InvalidDigest`] unless `digest` is `sha256:<64 lowercase hex>`.
    pub fn blob_path(&self, digest: &str) -> Result<PathBuf> {
        let hex = parse_sha256(digest)?;
        Ok(self.root.join("blobs/sha256").join(hex))
    }

    /// Reads the blob `digest`, verifying it. `None` when absent; a file whose content does
    /// not hash to `digest` is deleted and reported as `None`.
    ///
    /// # Errors
    /// [`OciError::InvalidDigest`], [`OciError::Store`] on I/O errors other than "not found".
    pub fn get_blob(&self, digest: &str) -> Result<Option<Bytes>> {
        let path = self.blob_path(digest)?;
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let actual = sha256_digest(&data);
        if actual != digest {
            tracing::warn!(path = %path.display(), expected = digest, actual, "evicting corrupt cached blob");
            let _ = std::fs::remove_file(&path);
            return Ok(None);
        }
        Ok(Some(Bytes::from(data)))
    }

    /// Whether the blob `digest` is present (not verified).
    pub fn has_blob(&self, digest: &str) -> bool {
        self.blob_path(digest).is_ok_and(|p| p.is_file())
    }

    /// Stores `data` under its sha256 digest (atomic write) and returns the digest.
    ///
    /// # Errors
    /// [`OciError::Store`].
    pub fn put_blob(&self, data: &[u8]) -> Result<String> {
        let digest = sha256_digest(data);
        let path = self.blob_path(&digest)?;
        self.write_atomic(&path, data)?;
        Ok(digest)
    }

    /// Stores `data`, which must hash to `digest`.
    ///
    /// # Errors
    /// [`OciError::DigestMismatch`] (nothing is written), [`OciError::Store`].
    pub fn put_blob_verified(&self, digest: &str, data: &[u8]) -> Result<()> {
        parse_sha256(digest)?;
        verify(
            &format!("blob `{digest}` before caching"),
            digest,
            &sha256_digest(data),
        )?;
        self.put_blob(data).map(|_| ())
    }

    /// The cached manifest digest for `reference` (`registry/repository:tag`), if any.
    ///
    /// # Errors
    /// [`OciError::Store`] on I/O errors other than "not found".
    pub fn get_tag(&self, reference: &str) -> Result<Option<String>> {
        self.get_ref("tags", reference)
    }

    /// Records that `reference` (`registry/repository:tag`) resolved to `digest`.
    ///
    /// # Errors
    /// [`OciError::Store`], [`OciError::InvalidDigest`].
    pub fn put_tag(&self, reference: &str, digest: &str) -> Result<()> {
        self.put_ref("tags", reference, digest)
    }

    /// The cached content digest of the tarball downloaded from `url`, if any.
    ///
    /// # Errors
    /// [`OciError::Store`].
    pub fn get_url(&self, url: &str) -> Result<Option<String>> {
        self.get_ref("urls", url)
    }

    /// Records that `url` served the blob `digest`.
    ///
    /// # Errors
    /// [`OciError::Store`], [`OciError::InvalidDigest`].
    pub fn put_url(&self, url: &str, digest: &str) -> Result<()> {
        self.put_ref("urls", url, digest)
    }

    fn ref_path(&self, kind: &str, key: &str) -> PathBuf {
        let name = sha256_digest(key.as_bytes());
        let hex = name.trim_start_matches("sha256:");
        self.root.join("refs").join(kind).join(hex)
    }

    fn get_ref(&self, kind: &str, key: &str) -> Result<Option<String>> {
        let path = self.ref_path(kind, key);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        match serde_json::from_slice::<RefEntry>(&text) {
            Ok(entry) if entry.key == key && parse_sha256(&entry.digest).is_ok() => {
                Ok(Some(entry.digest))
            }
            _ => {
                let _ = std::fs::remove_file(&path);
                Ok(None)
            }
        }
    }

    fn put_ref(&self, kind: &str, key: &str, digest: &str) -> Result<()> {
        parse_sha256(digest)?;
        let path = self.ref_path(kind, key);
        let entry = RefEntry {
            key: key.to_owned(),
            digest: digest.to_owned(),
        };
        let data = serde_json::to_vec(&entry).unwrap_or_default();
        self.write_atomic(&path, &data)
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<()> {
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_err(dir))?;
        tmp.write_all(data).map_err(io_err(tmp.path()))?;
        tmp.as_file().sync_all().map_err(io_err(path))?;
        tmp.persist(path).map_err(|e| io_err(path)(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_corruption_is_evicted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Some(dir.path())).unwrap();
        let d = store.put_blob(b"hello").unwrap();
        let path = store.blob_path(&d).unwrap();
        assert!(path.ends_with(d.trim_start_matches("sha256:")));
        assert_eq!(store.get_blob(&d).unwrap().unwrap().as_ref(), b"hello");
        std::fs::write(&path, b"tampered").unwrap();
        assert!(store.get_blob(&d).unwrap().is_none());
        assert!(!path.exists(), "corrupt blob must be evicted");
    }

    #[test]
    fn put_blob_verified_refuses_wrong_digest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Some(dir.path())).unwrap();
        let wrong = sha256_digest(b"other");
        let err = store.put_blob_verified(&wrong, b"data").unwrap_err();
        assert!(matches!(err, OciError::DigestMismatch { .. }), "{err}");
        assert!(!store.has_blob(&wrong));
    }

    #[test]
    fn tags_and_urls_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Some(dir.path())).unwrap();
        let d = sha256_digest(b"m");
        assert_eq!(store.get_tag("r.io/a/b:1").unwrap(), None);
        store.put_tag("r.io/a/b:1", &d).unwrap();
        assert_eq!(store.get_tag("r.io/a/b:1").unwrap(), Some(d.clone()));
        assert_eq!(store.get_tag("r.io/a/b:2").unwrap(), None);
        store
            .put_url("https://x/devcontainer-feature-a.tgz", &d)
            .unwrap();
        assert_eq!(
            store
                .get_url("https://x/devcontainer-feature-a.tgz")
                .unwrap(),
            Some(d)
        );
    }

    #[test]
    fn concurrent_writers_of_one_blob_both_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![7u8; 1 << 20];
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let store = Store::open(Some(dir.path())).unwrap();
                let data = data.clone();
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        let d = store.put_blob(&data).unwrap();
                        assert_eq!(store.get_blob(&d).unwrap().unwrap().len(), data.len());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let store = Store::open(Some(dir.path())).unwrap();
        let entries = std::fs::read_dir(store.root().join("blobs/sha256"))
            .unwrap()
            .count();
        assert_eq!(entries, 1, "no temporary files left behind");
    }
}
