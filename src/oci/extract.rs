//! Safe extraction of Feature tarballs (spec-distilled §5.2, checklist 35, 36; spec-note 0045).
//!
//! Feature layers are POSIX tar, plain or gzip-compressed (sniffed by the `1f 8b` magic, as
//! the reference CLI publishes plain tar under a `.tgz` name). Extraction refuses, with an
//! error naming the entry: absolute paths, `..` components, symlinks whose target leaves the
//! extraction root, hard links to anything but an earlier regular file inside the root, paths
//! passing through a symlink, device and fifo nodes, and files or totals over the size limits.
//!
//! Everything is written into a fresh temporary folder next to the destination, which is
//! renamed into place only on success; on failure the temporary folder is removed, so nothing
//! is written outside the destination and nothing half-extracted remains.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

/// Default per-file and total size limit: 64 MiB.
pub const DEFAULT_SIZE_LIMIT: u64 = 64 * 1024 * 1024;
/// Default limit on the number of archive entries.
pub const DEFAULT_MAX_ENTRIES: usize = 10_000;
/// Default limit on the uncompressed archive stream: 128 MiB (headers, long names and pax
/// records included; bounds memory and CPU for gzip bombs the entry limits cannot see).
pub const DEFAULT_MAX_ARCHIVE_BYTES: u64 = 128 * 1024 * 1024;

/// Limits for [`extract`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractOptions {
    /// Largest regular file, in bytes (default [`DEFAULT_SIZE_LIMIT`]).
    pub max_file_bytes: u64,
    /// Largest sum of regular file sizes, in bytes (default [`DEFAULT_SIZE_LIMIT`]).
    pub max_total_bytes: u64,
    /// Most archive entries (default [`DEFAULT_MAX_ENTRIES`]).
    pub max_entries: usize,
    /// Largest uncompressed tar stream, in bytes (default [`DEFAULT_MAX_ARCHIVE_BYTES`]).
    pub max_archive_bytes: u64,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions {
            max_file_bytes: DEFAULT_SIZE_LIMIT,
            max_total_bytes: DEFAULT_SIZE_LIMIT,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_archive_bytes: DEFAULT_MAX_ARCHIVE_BYTES,
        }
    }
}

/// What [`extract`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExtractReport {
    /// Regular files written (hard links included).
    pub files: usize,
    /// Bytes of regular file content written.
    pub bytes: u64,
}

/// An archive that cannot be extracted safely, or an I/O failure while extracting.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// An entry would write outside the destination or is of a refused kind.
    #[error("refusing archive entry `{entry}`: {reason}")]
    Unsafe {
        /// The entry path as stored in the archive.
        entry: String,
        /// Why it is refused.
        reason: String,
    },
    /// An entry or the archive exceeds a size limit.
    #[error(
        "refusing archive entry `{entry}`: {what} of {size} bytes exceeds the limit of {limit} bytes"
    )]
    TooLarge {
        /// The entry path as stored in the archive.
        entry: String,
        /// `file size` or `total size`.
        what: &'static str,
        /// The size reached, in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The uncompressed archive stream is larger than allowed.
    #[error("the uncompressed archive exceeds the limit of {limit} bytes")]
    ArchiveTooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The archive has more entries than allowed.
    #[error("the archive has more than {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: usize,
    },
    /// The destination already exists (extraction never overwrites).
    #[error("extraction destination `{}` already exists", path.display())]
    DestinationExists {
        /// The destination.
        path: PathBuf,
    },
    /// The archive is not a readable tar (or gzip) stream.
    #[error("cannot read the archive")]
    Archive {
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Writing to the file system failed.
    #[error("cannot write `{}`", path.display())]
    Io {
        /// The path being written.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Extracts a tar or tar+gzip stream into `dest`, which must not exist yet (its parent is
/// created if missing).
///
/// Errors: see [`ExtractError`]; on any error `dest` is not created and the temporary folder
/// is removed.
pub fn extract(
    archive: impl Read,
    dest: &Path,
    options: &ExtractOptions,
) -> Result<ExtractReport, ExtractError> {
    if fs::symlink_metadata(dest).is_ok() {
        return Err(ExtractError::DestinationExists {
            path: dest.to_path_buf(),
        });
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|source| ExtractError::Io {
        path: parent.clone(),
        source,
    })?;
    let tmp = tempfile::Builder::new()
        .prefix(".devcell-extract-")
        .tempdir_in(&parent)
        .map_err(|source| ExtractError::Io {
            path: parent.clone(),
            source,
        })?;
    let report = unpack(archive, tmp.path(), options)?;
    let tmp_path = tmp.keep();
    if let Err(source) = fs::rename(&tmp_path, dest) {
        let _ = fs::remove_dir_all(&tmp_path);
        return Err(if fs::symlink_metadata(dest).is_ok() {
            ExtractError::DestinationExists {
                path: dest.to_path_buf(),
            }
        } else {
            ExtractError::Io {
                path: dest.to_path_buf(),
                source,
            }
        });
    }
    Ok(report)
}

/// Like [`extract`], reading the archive from a file.
///
/// Errors: [`ExtractError::Io`] when the file cannot be opened; see [`extract`].
pub fn extract_file(
    archive: &Path,
    dest: &Path,
    options: &ExtractOptions,
) -> Result<ExtractReport, ExtractError> {
    let file = fs::File::open(archive).map_err(|source| ExtractError::Io {
        path: archive.to_path_buf(),
        source,
    })?;
    extract(file, dest, options)
}

/// True when `bytes` starts with the gzip magic `1f 8b`.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Unpacks `archive` (a tar stream, gzip-compressed or not) under `root`, entry by entry,
/// refusing what [`ExtractOptions`] bounds and what could leave `root`.
fn unpack(
    archive: impl Read,
    root: &Path,
    options: &ExtractOptions,
) -> Result<ExtractReport, ExtractError> {
    let limit = options.max_archive_bytes;
    let archive_error = |source| archive_error(source, limit);
    let mut tar = tar::Archive::new(decompressed(archive, limit)?);
    let mut report = ExtractReport::default();
    let mut count = 0usize;
    let entries = tar.entries().map_err(archive_error)?;
    for entry in entries {
        let mut entry = entry.map_err(archive_error)?;
        count += 1;
        if count > options.max_entries {
            return Err(ExtractError::TooManyEntries {
                limit: options.max_entries,
            });
        }
        let raw_name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let unsafe_entry = |reason: String| ExtractError::Unsafe {
            entry: raw_name.clone(),
            reason,
        };
        let kind = entry.header().entry_type();
        if matches!(kind, tar::EntryType::XGlobalHeader) {
            continue;
        }
        let rel = relative_path(&raw_name).map_err(&unsafe_entry)?;
        if rel.as_os_str().is_empty() {
            if kind.is_dir() {
                continue;
            }
            return Err(unsafe_entry("the entry has no name".into()));
        }
        let target = root.join(&rel);
        check_no_symlink_parents(root, &rel).map_err(&unsafe_entry)?;
        let io = |source| ExtractError::Io {
            path: target.clone(),
            source,
        };
        if let Some(p) = target.parent() {
            fs::create_dir_all(p).map_err(|source| ExtractError::Io {
                path: p.to_path_buf(),
                source,
            })?;
        }
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().unwrap_or(u64::MAX);
                check_file_size(&raw_name, size, report.bytes, options)?;
                replace_existing(&target).map_err(&unsafe_entry)?;
                let mut file = fs::File::create(&target).map_err(io)?;
                let written = std::io::copy(&mut (&mut entry).take(size), &mut file)
                    .map_err(archive_error)?;
                set_mode(&target, mode).map_err(io)?;
                report.files += 1;
                report.bytes = report.bytes.saturating_add(written);
            }
            tar::EntryType::Directory => {
                if fs::symlink_metadata(&target).is_ok_and(|m| !m.is_dir()) {
                    return Err(unsafe_entry("a directory replaces a file or link".into()));
                }
                fs::create_dir_all(&target).map_err(io)?;
                set_mode(&target, mode | 0o700).map_err(io)?;
            }
            tar::EntryType::Symlink => {
                let link = link_name(&entry);
                check_symlink_target(&rel, &link).map_err(&unsafe_entry)?;
                replace_existing(&target).map_err(&unsafe_entry)?;
                make_symlink(&link, &target).map_err(io)?;
            }
            tar::EntryType::Link => {
                let source = hard_link_source(root, &link_name(&entry)).map_err(&unsafe_entry)?;
                replace_existing(&target).map_err(&unsafe_entry)?;
                fs::hard_link(&source, &target).map_err(io)?;
                report.files += 1;
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                return Err(unsafe_entry("device nodes are not allowed".into()));
            }
            tar::EntryType::Fifo => {
                return Err(unsafe_entry("fifos are not allowed".into()));
            }
            other => {
                return Err(unsafe_entry(format!("unsupported entry type `{other:?}`")));
            }
        }
    }
    Ok(report)
}

/// The tar stream of `archive`: gunzipped when it starts with the gzip magic, and read at
/// most `limit` bytes (uncompressed) through [`LimitedReader`].
///
/// Errors: [`ExtractError::Archive`] when the first bytes cannot be read.
fn decompressed<'a>(
    archive: impl Read + 'a,
    limit: u64,
) -> Result<LimitedReader<Box<dyn Read + 'a>>, ExtractError> {
    let mut reader = BufReader::new(archive);
    let head = reader
        .fill_buf()
        .map_err(|source| ExtractError::Archive { source })?;
    let stream: Box<dyn Read + 'a> = if is_gzip(head) {
        Box::new(flate2::read::GzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    Ok(LimitedReader {
        inner: stream,
        remaining: limit,
    })
}

/// A read error of the archive stream: [`ExtractError::ArchiveTooLarge`] when it is the
/// stream passing `limit` ([`StreamLimitExceeded`]), else [`ExtractError::Archive`].
fn archive_error(source: std::io::Error, limit: u64) -> ExtractError {
    if source
        .get_ref()
        .is_some_and(|inner| inner.is::<StreamLimitExceeded>())
    {
        ExtractError::ArchiveTooLarge { limit }
    } else {
        ExtractError::Archive { source }
    }
}

/// A regular file entry `entry` of `size` bytes, after `so_far` bytes of files, within
/// [`ExtractOptions::max_file_bytes`] and [`ExtractOptions::max_total_bytes`].
///
/// Errors: [`ExtractError::TooLarge`], saying which limit.
fn check_file_size(
    entry: &str,
    size: u64,
    so_far: u64,
    options: &ExtractOptions,
) -> Result<(), ExtractError> {
    if size > options.max_file_bytes {
        return Err(ExtractError::TooLarge {
            entry: entry.to_string(),
            what: "file size",
            size,
            limit: options.max_file_bytes,
        });
    }
    let total = so_far.saturating_add(size);
    if total > options.max_total_bytes {
        return Err(ExtractError::TooLarge {
            entry: entry.to_string(),
            what: "total size",
            size: total,
            limit: options.max_total_bytes,
        });
    }
    Ok(())
}

/// The link target a symlink or hard link entry names (lossy UTF-8; empty when none).
fn link_name<R: Read>(entry: &tar::Entry<'_, R>) -> String {
    entry
        .link_name_bytes()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Where a hard link entry naming `link` points under `root`: a relative path through no
/// symlink to an earlier regular file of the archive.
///
/// Errors: the reason the link is refused.
fn hard_link_source(root: &Path, link: &str) -> Result<PathBuf, String> {
    let source_rel = relative_path(link).map_err(|r| format!("hard link target `{link}`: {r}"))?;
    check_no_symlink_parents(root, &source_rel)
        .map_err(|r| format!("hard link target `{link}`: {r}"))?;
    let source = root.join(&source_rel);
    match fs::symlink_metadata(&source) {
        Ok(m) if m.is_file() => Ok(source),
        _ => Err(format!(
            "hard link target `{link}` is not an earlier regular file of the archive"
        )),
    }
}

/// Marker error: the uncompressed stream passed [`ExtractOptions::max_archive_bytes`].
#[derive(Debug)]
struct StreamLimitExceeded;

impl std::fmt::Display for StreamLimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("archive stream limit exceeded")
    }
}

impl std::error::Error for StreamLimitExceeded {}

/// Fails reads once more than `remaining` bytes were produced.
struct LimitedReader<R> {
    inner: R,
    remaining: u64,
}

impl<R: Read> Read for LimitedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.remaining == 0 {
            // Allow a clean end of stream exactly at the limit.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(StreamLimitExceeded)),
            };
        }
        let max = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// Archive path → relative path without `.`; refuses absolute paths and `..`.
fn relative_path(name: &str) -> Result<PathBuf, String> {
    if name.starts_with('/') || name.starts_with('\\') {
        return Err("absolute paths are not allowed".into());
    }
    let mut out = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(part) => {
                if part.to_string_lossy().contains('\\') {
                    return Err("backslashes are not allowed in entry names".into());
                }
                out.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => return Err("`..` components are not allowed".into()),
            Component::RootDir | Component::Prefix(_) => {
                return Err("absolute paths are not allowed".into());
            }
        }
    }
    Ok(out)
}

/// Refuses paths whose existing ancestors (inside the root) include a symlink.
fn check_no_symlink_parents(root: &Path, rel: &Path) -> Result<(), String> {
    let mut current = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        current.push(part.as_os_str());
        match fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "the path passes through the symlink `{}`",
                    current.strip_prefix(root).unwrap_or(&current).display()
                ));
            }
            Ok(m) if !m.is_dir() => {
                return Err(format!(
                    "`{}` is not a directory",
                    current.strip_prefix(root).unwrap_or(&current).display()
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A symlink at `rel` pointing to `link` must stay inside the root (lexically; symlinked
/// parents are refused separately).
fn check_symlink_target(rel: &Path, link: &str) -> Result<(), String> {
    if link.is_empty() {
        return Err("the symlink has an empty target".into());
    }
    if link.starts_with('/') {
        return Err(format!("symlink target `{link}` is absolute"));
    }
    let mut depth: i64 = rel.components().count() as i64 - 1;
    for c in Path::new(link).components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!(
                        "symlink target `{link}` points outside the Feature"
                    ));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("symlink target `{link}` is absolute"));
            }
        }
    }
    Ok(())
}

/// Removes an earlier file or symlink at `target` (later archive entries win); refuses to
/// replace a directory.
fn replace_existing(target: &Path) -> Result<(), String> {
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => Err("the entry would replace a directory".into()),
        Ok(_) => fs::remove_file(target).map_err(|e| format!("cannot replace earlier entry: {e}")),
        Err(_) => Ok(()),
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn make_symlink(link: &str, target: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(link, target)
}

#[cfg(not(unix))]
fn make_symlink(_link: &str, _target: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "symlinks are not supported on this platform",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Builds a tar with raw names (bypassing the tar crate's own path checks).
    struct Tar(tar::Builder<Vec<u8>>);

    impl Tar {
        fn new() -> Tar {
            Tar(tar::Builder::new(Vec::new()))
        }

        fn raw(
            mut self,
            kind: tar::EntryType,
            name: &str,
            link: &str,
            data: &[u8],
            mode: u32,
        ) -> Tar {
            let mut h = tar::Header::new_gnu();
            {
                let old = h.as_old_mut();
                old.name = [0; 100];
                old.name[..name.len()].copy_from_slice(name.as_bytes());
                old.linkname = [0; 100];
                old.linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            h.set_entry_type(kind);
            h.set_size(data.len() as u64);
            h.set_mode(mode);
            h.set_cksum();
            self.0.append(&h, data).unwrap();
            self
        }

        fn file(self, name: &str, data: &[u8]) -> Tar {
            self.raw(tar::EntryType::Regular, name, "", data, 0o644)
        }

        fn dir(self, name: &str) -> Tar {
            self.raw(tar::EntryType::Directory, name, "", b"", 0o755)
        }

        fn symlink(self, name: &str, target: &str) -> Tar {
            self.raw(tar::EntryType::Symlink, name, target, b"", 0o777)
        }

        fn link(self, name: &str, target: &str) -> Tar {
            self.raw(tar::EntryType::Link, name, target, b"", 0o644)
        }

        /// A device node or fifo.
        fn special(self, kind: tar::EntryType, name: &str) -> Tar {
            self.raw(kind, name, "", b"", 0o666)
        }

        fn bytes(self) -> Vec<u8> {
            self.0.into_inner().unwrap()
        }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    /// A sandbox: `<root>/outside.txt` (a sentinel) and `<root>/cache/` (the dest parent).
    struct Sandbox {
        dir: tempfile::TempDir,
    }

    impl Sandbox {
        fn new() -> Sandbox {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("outside.txt"), "sentinel").unwrap();
            fs::create_dir(dir.path().join("cache")).unwrap();
            Sandbox { dir }
        }

        fn dest(&self) -> PathBuf {
            self.dir.path().join("cache").join("feature")
        }

        fn run(
            &self,
            archive: &[u8],
            options: &ExtractOptions,
        ) -> Result<ExtractReport, ExtractError> {
            extract(archive, &self.dest(), options)
        }

        /// Asserts the failed extraction left nothing behind anywhere.
        fn assert_untouched(&self) {
            let mut top: Vec<_> = fs::read_dir(self.dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            top.sort();
            assert_eq!(top, ["cache", "outside.txt"]);
            assert_eq!(
                fs::read_to_string(self.dir.path().join("outside.txt")).unwrap(),
                "sentinel"
            );
            assert_eq!(
                fs::read_dir(self.dir.path().join("cache")).unwrap().count(),
                0
            );
            assert!(!self.dir.path().parent().unwrap().join("evil").exists());
        }

        /// Each archive is refused with an error containing its needle.
        fn refuse_each<const N: usize>(&self, cases: [(Tar, &str); N]) {
            for (tar, needle) in cases {
                self.refuse(&tar.bytes(), needle);
            }
        }

        fn refuse(&self, archive: &[u8], needle: &str) {
            self.refuse_with(archive, &ExtractOptions::default(), needle);
        }

        fn refuse_with(&self, archive: &[u8], options: &ExtractOptions, needle: &str) {
            let e = self.run(archive, options).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
            self.assert_untouched();
        }
    }

    fn feature_tar() -> Tar {
        Tar::new()
            .dir("./")
            .file(
                "./devcontainer-feature.json",
                br#"{"id": "x", "version": "1.0.0"}"#,
            )
            .raw(
                tar::EntryType::Regular,
                "./install.sh",
                "",
                b"#!/bin/sh\necho hi\n",
                0o755,
            )
            .dir("./lib/")
            .file("./lib/a.sh", b"a")
            .symlink("./lib/b.sh", "a.sh")
            .symlink("./lib/up.sh", "../install.sh")
            .link("./copy.sh", "./lib/a.sh")
    }

    fn check_feature(dest: &Path) {
        assert!(dest.join("devcontainer-feature.json").is_file());
        assert_eq!(fs::read_to_string(dest.join("lib/b.sh")).unwrap(), "a");
        assert_eq!(
            fs::read_to_string(dest.join("lib/up.sh")).unwrap(),
            "#!/bin/sh\necho hi\n"
        );
        assert_eq!(fs::read_to_string(dest.join("copy.sh")).unwrap(), "a");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dest.join("install.sh"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        let leftovers: Vec<_> = fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, [dest.file_name().unwrap()]);
    }

    #[test]
    fn plain_tar_extracts() {
        // checklist 35
        let s = Sandbox::new();
        let report = s
            .run(&feature_tar().bytes(), &ExtractOptions::default())
            .unwrap();
        assert_eq!(report.files, 4);
        check_feature(&s.dest());
    }

    #[test]
    fn gzip_tar_extracts() {
        // checklist 35
        let s = Sandbox::new();
        let gz = gzip(&feature_tar().bytes());
        assert!(is_gzip(&gz));
        s.run(&gz, &ExtractOptions::default()).unwrap();
        check_feature(&s.dest());
    }

    #[test]
    fn existing_destination_is_never_overwritten() {
        let s = Sandbox::new();
        fs::create_dir(s.dest()).unwrap();
        fs::write(s.dest().join("mine"), "keep").unwrap();
        let e = s
            .run(&feature_tar().bytes(), &ExtractOptions::default())
            .unwrap_err();
        assert!(matches!(e, ExtractError::DestinationExists { .. }), "{e}");
        assert_eq!(fs::read_to_string(s.dest().join("mine")).unwrap(), "keep");
        assert_eq!(fs::read_dir(s.dir.path().join("cache")).unwrap().count(), 1);
    }

    #[test]
    fn traversal_refused() {
        // checklist 36
        let s = Sandbox::new();
        s.refuse(
            &Tar::new().file("ok", b"1").file("../../evil", b"x").bytes(),
            "`..` components",
        );
        s.refuse(
            &gzip(&Tar::new().file("a/../../evil", b"x").bytes()),
            "`..`",
        );
    }

    #[test]
    fn absolute_path_refused() {
        // checklist 36
        let s = Sandbox::new();
        let outside = s.dir.path().join("abs-evil");
        s.refuse(
            &Tar::new().file(outside.to_str().unwrap(), b"x").bytes(),
            "absolute paths",
        );
    }

    #[test]
    fn escaping_symlink_refused() {
        // checklist 36
        Sandbox::new().refuse_each([
            (
                Tar::new().symlink("link", "../../outside.txt"),
                "points outside",
            ),
            (
                Tar::new().symlink("a/b/link", "../../../x"),
                "points outside",
            ),
            (Tar::new().symlink("link", "/etc"), "absolute"),
            // A symlink inside the root used as a path prefix: refused (it could be re-pointed).
            (
                Tar::new().symlink("x", ".").symlink("x/l", "../evil"),
                "passes through the symlink `x`",
            ),
            // Writing a file through an (inside) symlink: refused.
            (
                Tar::new().dir("d/").symlink("l", "d").file("l/f", b"x"),
                "passes through the symlink",
            ),
        ]);
    }

    #[test]
    fn hard_link_outside_refused() {
        // checklist 36
        let s = Sandbox::new();
        let abs = s.dir.path().join("outside.txt");
        s.refuse_each([
            (
                Tar::new().link("h", abs.to_str().unwrap()),
                "hard link target",
            ),
            (
                Tar::new().link("h", "../../outside.txt"),
                "hard link target",
            ),
            (
                Tar::new().link("h", "missing"),
                "not an earlier regular file",
            ),
            // A hard link to a symlink that points at an inside file is also refused.
            (
                Tar::new().file("f", b"x").symlink("s", "f").link("h", "s"),
                "not an earlier regular file",
            ),
        ]);
    }

    #[test]
    fn device_and_fifo_refused() {
        Sandbox::new().refuse_each([
            (
                Tar::new().special(tar::EntryType::Char, "null"),
                "device nodes",
            ),
            (
                Tar::new().special(tar::EntryType::Block, "sda"),
                "device nodes",
            ),
            (Tar::new().special(tar::EntryType::Fifo, "p"), "fifos"),
        ]);
    }

    #[test]
    fn huge_files_refused() {
        let s = Sandbox::new();
        let small = ExtractOptions {
            max_file_bytes: 1024,
            max_total_bytes: 1500,
            max_entries: 10,
            max_archive_bytes: 1 << 20,
        };
        s.refuse_with(
            &Tar::new().file("big", &[0u8; 2048]).bytes(),
            &small,
            "file size of 2048 bytes exceeds the limit of 1024",
        );
        s.refuse_with(
            &Tar::new()
                .file("a", &[0u8; 1000])
                .file("b", &[0u8; 1000])
                .bytes(),
            &small,
            "total size of 2000 bytes",
        );
        let many = (0..11)
            .fold(Tar::new(), |t, i| t.file(&format!("f{i}"), b"x"))
            .bytes();
        s.refuse_with(&many, &small, "more than 10 entries");
        // A header claiming 1 TiB (data absent) is refused from the header, before reading.
        let mut h = tar::Header::new_gnu();
        h.set_path("huge").unwrap();
        h.set_size(1 << 40);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        let mut bytes = h.as_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 1024]);
        s.refuse(&bytes, "exceeds the limit of 67108864");
    }

    #[test]
    fn gzip_bomb_in_a_long_name_is_refused() {
        // A GNU long-name record the tar reader would buffer whole: 8 MiB of zeros (8 KiB
        // compressed) against a 1 MiB stream limit.
        let s = Sandbox::new();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::GNULongName);
        h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        h.set_size(8 << 20);
        h.set_cksum();
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(h.as_bytes()).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..8 {
            e.write_all(&zeros).unwrap();
        }
        let bomb = e.finish().unwrap();
        assert!(bomb.len() < 64 * 1024);
        let options = ExtractOptions {
            max_archive_bytes: 1 << 20,
            ..ExtractOptions::default()
        };
        s.refuse_with(
            &bomb,
            &options,
            "the uncompressed archive exceeds the limit of 1048576 bytes",
        );
        // The limit counts the stream: a normal Feature fits in a small one.
        let ok = ExtractOptions {
            max_archive_bytes: 64 * 1024,
            ..ExtractOptions::default()
        };
        s.run(&gzip(&feature_tar().bytes()), &ok).unwrap();
    }

    #[test]
    fn garbage_is_an_archive_error() {
        let s = Sandbox::new();
        let e = s.run(
            &gzip(b"not a tar at all, definitely not"),
            &ExtractOptions::default(),
        );
        assert!(e.is_err());
        s.assert_untouched();
    }

    #[test]
    fn setuid_bits_are_dropped() {
        let s = Sandbox::new();
        s.run(
            &Tar::new()
                .raw(tar::EntryType::Regular, "suid", "", b"x", 0o4755)
                .bytes(),
            &ExtractOptions::default(),
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(s.dest().join("suid"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o7777, 0o755);
        }
    }
}
