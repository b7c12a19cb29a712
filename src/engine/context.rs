//! Build contexts: the tar archive sent to the engine's `/build`, honouring `.dockerignore`.
//!
//! `.dockerignore` follows Docker's rules: one pattern per line, `#` comments and blank lines
//! skipped, a leading `/` ignored, `*` and `?` never cross `/`, `**` matches any number of
//! folders, `!` re-includes; the last matching pattern decides, and a pattern that matches a
//! folder matches everything under it. The Dockerfile and `.dockerignore` are always sent.

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{CWD, Mode, OFlags, openat, readlinkat};

use globset::{GlobBuilder, GlobMatcher};

use super::error::{EngineError, Result};
use crate::config::listing::sorted_names;

/// The name a Dockerfile outside the context is sent under.
pub const OUTSIDE_DOCKERFILE_NAME: &str = ".devcell.Dockerfile";

/// Largest Dockerfile or `.dockerignore` read (bounded, no FIFO or device: spec-note 0433).
const MAX_SMALL_FILE_BYTES: u64 = crate::config::jsonc::MAX_FILE_BYTES as u64;

/// Parsed `.dockerignore` patterns.
#[derive(Debug, Clone, Default)]
pub struct Dockerignore {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    matcher: GlobMatcher,
    negated: bool,
}

impl Dockerignore {
    /// Parses the text of a `.dockerignore` file (`path` names it in errors).
    ///
    /// Errors: [`EngineError::Dockerignore`] for a pattern that is not a valid glob.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let mut rules = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negated, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            let cleaned = clean(pattern);
            if cleaned.is_empty() {
                continue;
            }
            let glob = GlobBuilder::new(&cleaned)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|source| EngineError::Dockerignore {
                    path: path.to_path_buf(),
                    pattern: line.to_string(),
                    source,
                })?;
            rules.push(Rule {
                matcher: glob.compile_matcher(),
                negated,
            });
        }
        Ok(Self { rules })
    }

    /// Reads `<context>/.dockerignore`; a missing file excludes nothing. A `.dockerignore`
    /// that is a symbolic link is followed only when it resolves inside the context: one
    /// pointing out of it (at a host file, whose lines an invalid pattern would echo) is an
    /// error and is not read; neither is anything but a regular file (a FIFO never blocks) or
    /// a file above 4 MiB (spec-note 0400).
    ///
    /// Errors: [`EngineError::BuildContext`] (unreadable, a link out, not a regular file, too
    /// large), [`EngineError::Dockerignore`].
    pub fn load(context: &Path) -> Result<Self> {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        const MAX_DOCKERIGNORE_BYTES: u64 = 4 * 1024 * 1024;
        let path = context.join(".dockerignore");
        let refused = |why: &str| EngineError::BuildContext {
            path: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string()),
        };
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(EngineError::BuildContext { path, source }),
        };
        let file = if meta.file_type().is_symlink() {
            match (fs::canonicalize(&path), fs::canonicalize(context)) {
                (Ok(real), Ok(root)) if real.starts_with(&root) => real,
                (Err(e), _) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Self::default());
                }
                _ => {
                    return Err(refused(
                        "a symbolic link that leaves the build context: devcell does not read it",
                    ));
                }
            }
        } else {
            path.clone()
        };
        let opened = fs::OpenOptions::new()
            .read(true)
            .custom_flags(
                rustix::fs::OFlags::NOFOLLOW.bits() as i32
                    | rustix::fs::OFlags::NONBLOCK.bits() as i32,
            )
            .open(&file)
            .map_err(|source| EngineError::BuildContext {
                path: path.clone(),
                source,
            })?;
        let meta = opened
            .metadata()
            .map_err(|source| EngineError::BuildContext {
                path: path.clone(),
                source,
            })?;
        if !meta.is_file() {
            return Err(refused("not a regular file: devcell does not read it"));
        }
        let mut text = String::new();
        opened
            .take(MAX_DOCKERIGNORE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|source| EngineError::BuildContext {
                path: path.clone(),
                source,
            })?;
        if text.len() as u64 > MAX_DOCKERIGNORE_BYTES {
            return Err(refused("larger than 4 MiB: devcell does not read it"));
        }
        Self::parse(&text, &path)
    }

    /// Whether `relative` (a `/`-separated path inside the context) is excluded.
    pub fn is_excluded(&self, relative: &str) -> bool {
        let mut excluded = false;
        for rule in &self.rules {
            if matches_or_parent_matches(&rule.matcher, relative) {
                excluded = !rule.negated;
            }
        }
        excluded
    }

    fn has_negations(&self) -> bool {
        self.rules.iter().any(|r| r.negated)
    }
}

fn matches_or_parent_matches(matcher: &GlobMatcher, relative: &str) -> bool {
    if matcher.is_match(relative) {
        return true;
    }
    let mut prefix = relative;
    while let Some((parent, _)) = prefix.rsplit_once('/') {
        if matcher.is_match(parent) {
            return true;
        }
        prefix = parent;
    }
    false
}

/// Lexically cleans a pattern like Go's `filepath.Clean`, without a leading `/`.
fn clean(pattern: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// A packed build context.
#[derive(Debug, Clone)]
pub struct PackedContext {
    /// The uncompressed tar archive.
    pub tar: Vec<u8>,
    /// The Dockerfile's name inside the archive (the `dockerfile` build parameter).
    pub dockerfile: String,
}

#[cfg(test)]
impl PackedContext {
    /// The content of every archive entry named as the Dockerfile (tests: one is expected).
    pub(crate) fn dockerfile_entries(&self) -> Vec<Vec<u8>> {
        let mut archive = tar::Archive::new(self.tar.as_slice());
        archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().unwrap().to_string_lossy() == self.dockerfile)
            .map(|mut e| {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
                bytes
            })
            .collect()
    }
}

/// The folder `path` resolves to, required inside `within`, opened from `/` one component at
/// a time without following a link ([`pack_within`]).
///
/// Errors: `path` resolves outside `within`; a component is a link now (it was swapped since
/// it was resolved); the file system's.
fn open_resolved_within(path: &Path, within: &Path) -> std::io::Result<rustix::fd::OwnedFd> {
    let real = std::fs::canonicalize(path)?;
    if !real.starts_with(within) {
        return Err(std::io::Error::other(format!(
            "the build context now resolves to `{}`, outside `{}` where it was judged",
            real.display(),
            within.display()
        )));
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut dir = openat(CWD, "/", flags, Mode::empty())?;
    for part in real.components().skip(1) {
        dir = openat(&dir, part.as_os_str(), flags, Mode::empty()).map_err(|e| {
            std::io::Error::other(format!(
                "`{}` changed while the build context was opened ({e}): a link appeared on its way",
                real.display()
            ))
        })?;
    }
    Ok(dir)
}

/// Packs `context` into a tar honouring `<context>/.dockerignore`. `dockerfile` may be inside
/// the context (sent under its relative path) or outside it (sent as
/// [`OUTSIDE_DOCKERFILE_NAME`]). Symbolic links are stored as links, not followed.
///
/// With `judged` (the Dockerfile's content as devcell judged it), the Dockerfile entry is a
/// regular file holding exactly those bytes, and whatever is at the Dockerfile's path in the
/// context now (a file changed since, a link, a folder) is left out: the builder builds the
/// Dockerfile that was judged, not one a process writing the workspace put there after the
/// judgement (attack O3, spec-note 0655).
///
/// Errors: [`EngineError::BuildContext`] naming the file that could not be read,
/// [`EngineError::Dockerignore`].
pub fn pack(context: &Path, dockerfile: &Path, judged: Option<&[u8]>) -> Result<PackedContext> {
    pack_within(context, dockerfile, judged, None)
}

/// [`pack`], the context required to resolve inside `within` (a [`BuildRequest`]'s
/// `context_within`, spec-note 0673): resolved now, refused when it resolves elsewhere, and
/// opened from `/` one folder at a time without following a link, so a folder of the
/// workspace swapped for a link to a host folder since the judgement is refused, never packed.
///
/// Errors: as [`pack`]; [`EngineError::BuildContext`] when the context resolves outside
/// `within` or a link appears on its path while it is opened.
///
/// [`BuildRequest`]: crate::engine::BuildRequest
pub fn pack_within(
    context: &Path,
    dockerfile: &Path,
    judged: Option<&[u8]>,
    within: Option<&Path>,
) -> Result<PackedContext> {
    let ignore = Dockerignore::load(context)?;
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EngineError::BuildContext { path, source }
    };
    let context_abs = absolute(context);
    let dockerfile_abs = absolute(dockerfile);
    let inside = dockerfile_abs
        .strip_prefix(&context_abs)
        .ok()
        .map(to_slash)
        .filter(|r| !r.is_empty());
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    let mut always = vec![".dockerignore".to_string()];
    if let Some(rel) = &inside {
        always.push(rel.clone());
    }
    let root_dir = match within {
        Some(within) => open_resolved_within(&context_abs, within).map_err(io_err(&context_abs))?,
        None => openat(
            CWD,
            &context_abs,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err(&context_abs)(e.into()))?,
    };
    // the judged Dockerfile replaces the entry at its path, whatever is there now
    let replaced = judged.and(inside.as_deref());
    let walked = Walk {
        root: &context_abs,
        ignore: &ignore,
        always: &always,
        replaced,
    };
    walk(&walked, &root_dir, &context_abs, &mut builder, &io_err)?;
    let name = match (inside, judged) {
        (Some(rel), None) => rel,
        (Some(rel), Some(bytes)) => {
            append_bytes(&mut builder, &rel, bytes).map_err(io_err(&dockerfile_abs))?;
            rel
        }
        (None, judged) => {
            let read;
            let bytes = match judged {
                Some(bytes) => bytes,
                None => {
                    read = crate::config::bounded::read(&dockerfile_abs, MAX_SMALL_FILE_BYTES)
                        .map_err(io_err(&dockerfile_abs))?;
                    read.as_slice()
                }
            };
            append_bytes(&mut builder, OUTSIDE_DOCKERFILE_NAME, bytes)
                .map_err(io_err(&dockerfile_abs))?;
            OUTSIDE_DOCKERFILE_NAME.to_string()
        }
    };
    let tar = builder.into_inner().map_err(io_err(&context_abs))?;
    Ok(PackedContext {
        tar,
        dockerfile: name,
    })
}

/// Appends every entry below the open folder `dir` (at `dir_path`, `root`-relative names) to
/// `builder`. Each entry is opened relative to its folder's handle without following a link
/// (`O_PATH|O_NOFOLLOW`), its type read from that handle, and a folder is entered through it:
/// a running container that turns a listed folder into a link to a host folder (attack O6)
/// can neither send the host folder's files nor make devcell read them. A file is read from a
/// handle checked to be the entry that was listed; a changed one fails the pack.
fn walk<F, G>(
    walked: &Walk<'_>,
    dir: &OwnedFd,
    dir_path: &Path,
    builder: &mut tar::Builder<Vec<u8>>,
    io_err: &F,
) -> Result<()>
where
    F: Fn(&Path) -> G,
    G: FnOnce(std::io::Error) -> EngineError,
{
    let Walk {
        root,
        ignore,
        always,
        replaced,
    } = *walked;
    for name in sorted_names(dir).map_err(io_err(dir_path))? {
        let path = dir_path.join(std::ffi::OsStr::from_bytes(name.as_bytes()));
        let rel = match path.strip_prefix(root) {
            Ok(r) => to_slash(r),
            Err(_) => continue,
        };
        if replaced == Some(rel.as_str()) {
            // the judged Dockerfile is appended in its place (spec-note 0655)
            continue;
        }
        let handle = openat(
            dir,
            name.as_c_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err(&path)(e.into()))?;
        let handle = fs::File::from(handle);
        let meta = handle.metadata().map_err(io_err(&path))?;
        let file_type = meta.file_type();
        let excluded = ignore.is_excluded(&rel) && !always.contains(&rel);
        if file_type.is_dir() {
            if excluded && !ignore.has_negations() {
                continue;
            }
            if !excluded {
                append_header(builder, &meta, &rel, std::io::empty()).map_err(io_err(&path))?;
            }
            let inner = openat(
                &handle,
                c".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io_err(&path)(e.into()))?;
            walk(walked, &inner, &path, builder, io_err)?;
        } else if excluded {
            continue;
        } else if file_type.is_symlink() {
            let target =
                readlinkat(&handle, c"", Vec::new()).map_err(|e| io_err(&path)(e.into()))?;
            let target = std::ffi::OsStr::from_bytes(target.as_bytes());
            let mut header = tar::Header::new_gnu();
            header.set_metadata(&meta);
            header.set_size(0);
            builder
                .append_link(&mut header, &rel, target)
                .map_err(io_err(&path))?;
        } else if file_type.is_file() {
            let (file, now) = open_listed(dir, &name, &meta).map_err(io_err(&path))?;
            // never more than the header says, even if the file grows meanwhile
            let data = std::io::Read::take(file, now.len());
            append_header(builder, &now, &rel, data).map_err(io_err(&path))?;
        } else if file_type.is_socket() {
            // a socket has no content to send (Docker's own archive skips it too)
            continue;
        } else {
            // FIFOs and device nodes: a header only, never opened
            append_header(builder, &meta, &rel, std::io::empty()).map_err(io_err(&path))?;
        }
    }
    Ok(())
}

/// What [`walk`] packs: the context's root, its `.dockerignore`, the names always sent, and
/// the Dockerfile's name when its judged bytes replace the entry there.
#[derive(Clone, Copy)]
struct Walk<'a> {
    root: &'a Path,
    ignore: &'a Dockerignore,
    always: &'a [String],
    replaced: Option<&'a str>,
}

/// Appends a regular file `name` holding `bytes` (mode 0644).
fn append_bytes(
    builder: &mut tar::Builder<Vec<u8>>,
    name: &str,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    builder.append_data(&mut header, name, bytes)
}

/// Opens the regular file `name` in `dir` for reading, without following a link and without
/// blocking, and checks it is the entry `listed` describes (same device and inode); with its
/// metadata now.
fn open_listed(
    dir: &OwnedFd,
    name: &std::ffi::CStr,
    listed: &fs::Metadata,
) -> std::io::Result<(fs::File, fs::Metadata)> {
    let fd = openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = fs::File::from(fd);
    let now = file.metadata()?;
    if now.dev() != listed.dev() || now.ino() != listed.ino() || !now.file_type().is_file() {
        return Err(std::io::Error::other(
            "it changed while the build context was packed (a running container writes the context?); stop the workspace's containers and build again",
        ));
    }
    Ok((file, now))
}

/// Appends one entry whose header is made from `meta`, with `data` as its content.
fn append_header(
    builder: &mut tar::Builder<Vec<u8>>,
    meta: &fs::Metadata,
    rel: &str,
    data: impl std::io::Read,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_metadata(meta);
    let kind = meta.file_type();
    if kind.is_char_device() || kind.is_block_device() {
        let device = meta.rdev();
        header.set_device_major(rustix::fs::major(device))?;
        header.set_device_minor(rustix::fs::minor(device))?;
    }
    builder.append_data(&mut header, rel, data)
}

fn to_slash(path: &Path) -> String {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn absolute(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ig(text: &str) -> Dockerignore {
        Dockerignore::parse(text, Path::new(".dockerignore")).unwrap()
    }

    #[test]
    fn star_does_not_cross_folders_and_root_anchored() {
        let i = ig("*.log\n");
        assert!(i.is_excluded("a.log"));
        assert!(!i.is_excluded("sub/a.log"));
    }

    #[test]
    fn double_star_matches_any_depth() {
        let i = ig("**/*.log");
        assert!(i.is_excluded("a.log"));
        assert!(i.is_excluded("x/y/a.log"));
    }

    #[test]
    fn folder_pattern_excludes_contents() {
        let i = ig("node_modules\n/target/");
        assert!(i.is_excluded("node_modules/x/y.js"));
        assert!(i.is_excluded("target/debug/app"));
        assert!(!i.is_excluded("src/node_modules.rs"));
    }

    #[test]
    fn negation_reincludes_and_last_match_wins() {
        let i = ig("# comment\n\n*.md\n!README.md\n");
        assert!(i.is_excluded("CHANGES.md"));
        assert!(!i.is_excluded("README.md"));
        let i = ig("!README.md\n*.md");
        assert!(i.is_excluded("README.md"));
    }

    #[test]
    fn invalid_pattern_is_an_error_naming_it() {
        let err = Dockerignore::parse("[unclosed", Path::new("ctx/.dockerignore")).unwrap_err();
        assert!(err.to_string().contains("`[unclosed`"), "{err}");
    }

    fn names(tar: &[u8]) -> Vec<String> {
        let mut a = tar::Archive::new(tar);
        a.entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn pack_honours_dockerignore_and_keeps_the_dockerfile() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join("secret")).unwrap();
        fs::write(root.join("src/main.rs"), "fn main(){}").unwrap();
        fs::write(root.join("secret/key"), "k").unwrap();
        fs::write(root.join("app.log"), "l").unwrap();
        fs::write(root.join("Dockerfile"), "FROM scratch").unwrap();
        fs::write(root.join(".dockerignore"), "secret\n*.log\nDockerfile\n").unwrap();
        let packed = pack(root, &root.join("Dockerfile"), None).unwrap();
        let names = names(&packed.tar);
        assert_eq!(packed.dockerfile, "Dockerfile");
        assert!(names.contains(&"src/main.rs".to_string()), "{names:?}");
        assert!(names.contains(&"Dockerfile".to_string()), "{names:?}");
        assert!(names.contains(&".dockerignore".to_string()), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("secret")), "{names:?}");
        assert!(!names.contains(&"app.log".to_string()), "{names:?}");
    }

    #[test]
    fn pack_sends_an_outside_dockerfile_under_a_generated_name() {
        let ctx = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        fs::write(ctx.path().join("f"), "x").unwrap();
        fs::write(other.path().join("Dockerfile"), "FROM scratch").unwrap();
        let packed = pack(ctx.path(), &other.path().join("Dockerfile"), None).unwrap();
        assert_eq!(packed.dockerfile, OUTSIDE_DOCKERFILE_NAME);
        assert!(names(&packed.tar).contains(&OUTSIDE_DOCKERFILE_NAME.to_string()));
    }

    /// Attack O3: with the judged bytes, the archive's Dockerfile entry is exactly them, once,
    /// whatever is at the Dockerfile's path now (other text, a link to a host file).
    #[test]
    fn pack_sends_the_judged_dockerfile_bytes_not_the_file() {
        let ctx = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        fs::write(host.path().join("secret"), "HOST-SECRET").unwrap();
        fs::write(
            ctx.path().join("Dockerfile"),
            "FROM registry.example/swapped",
        )
        .unwrap();
        let judged = b"FROM registry.example/judged\n".as_slice();
        let packed = pack(ctx.path(), &ctx.path().join("Dockerfile"), Some(judged)).unwrap();
        assert_eq!(packed.dockerfile, "Dockerfile");
        assert_eq!(packed.dockerfile_entries(), vec![judged.to_vec()]);
        fs::remove_file(ctx.path().join("Dockerfile")).unwrap();
        std::os::unix::fs::symlink(host.path().join("secret"), ctx.path().join("Dockerfile"))
            .unwrap();
        let packed = pack(ctx.path(), &ctx.path().join("Dockerfile"), Some(judged)).unwrap();
        assert_eq!(packed.dockerfile_entries(), vec![judged.to_vec()]);
        // one outside the context too
        let packed = pack(ctx.path(), &host.path().join("Dockerfile"), Some(judged)).unwrap();
        assert_eq!(packed.dockerfile, OUTSIDE_DOCKERFILE_NAME);
        assert_eq!(packed.dockerfile_entries(), vec![judged.to_vec()]);
    }

    #[test]
    fn a_dockerignore_linked_out_of_the_context_is_not_read() {
        let ctx = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        fs::write(other.path().join("ignore"), "[host-line\n").unwrap();
        std::os::unix::fs::symlink(
            other.path().join("ignore"),
            ctx.path().join(".dockerignore"),
        )
        .unwrap();
        let err = Dockerignore::load(ctx.path()).unwrap_err();
        let text = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(text.contains("leaves the build context"), "{text}");
        assert!(!text.contains("host-line"), "{text}");
        // a link inside the context is followed; a FIFO is refused, never read
        fs::remove_file(ctx.path().join(".dockerignore")).unwrap();
        fs::write(ctx.path().join("ignore.txt"), "*.log\n").unwrap();
        std::os::unix::fs::symlink("ignore.txt", ctx.path().join(".dockerignore")).unwrap();
        assert!(Dockerignore::load(ctx.path()).unwrap().is_excluded("a.log"));
        fs::remove_file(ctx.path().join(".dockerignore")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            ctx.path().join(".dockerignore"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        assert!(Dockerignore::load(ctx.path()).is_err());
    }

    #[test]
    fn pack_reports_a_missing_context() {
        let err = pack(
            Path::new("/nonexistent/ctx"),
            Path::new("/nonexistent/ctx/Dockerfile"),
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ctx"), "{err}");
    }

    /// Attack O6: a container that writes the context turns a listed folder into a link to a
    /// host folder while devcell packs. However the race falls, no file of the host folder is
    /// ever in the archive (a pack may fail instead). With the listing's types and path-based
    /// reads, most of these packs held the host file.
    #[test]
    fn pack_never_follows_a_folder_swapped_for_a_link_while_packing() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let ctx = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        fs::write(host.path().join("id_rsa"), "HOST-SECRET").unwrap();
        let root = ctx.path().to_path_buf();
        fs::create_dir_all(root.join("aaa")).unwrap();
        for i in 0..300 {
            fs::write(root.join(format!("aaa/{i}")), "x").unwrap();
        }
        fs::create_dir_all(root.join("zzz")).unwrap();
        fs::write(root.join("zzz/README"), "ok").unwrap();
        fs::write(root.join("Dockerfile"), "FROM scratch").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let (stop, root, host) = (stop.clone(), root.clone(), host.path().to_path_buf());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = fs::rename(root.join("zzz"), root.join("zzz.real"));
                    let _ = std::os::unix::fs::symlink(&host, root.join("zzz"));
                    std::thread::yield_now();
                    let _ = fs::remove_file(root.join("zzz"));
                    let _ = fs::rename(root.join("zzz.real"), root.join("zzz"));
                    std::thread::yield_now();
                }
            })
        };
        let mut packed_ok = 0;
        for _ in 0..150 {
            let Ok(packed) = pack(&root, &root.join("Dockerfile"), None) else {
                continue;
            };
            packed_ok += 1;
            let names = names(&packed.tar);
            let outside: Vec<_> = names.iter().filter(|n| n.ends_with("id_rsa")).collect();
            assert!(outside.is_empty(), "a host file was packed: {outside:?}");
        }
        stop.store(true, Ordering::Relaxed);
        flipper.join().unwrap();
        assert!(packed_ok > 0, "no pack succeeded");
    }

    /// spec-note 0673 (attack 29, G6): a context folder of the workspace swapped for a link to
    /// a host folder is refused when it is packed within the workspace; the real folder packs;
    /// without `within` (a context the user granted outside) the link is followed as before.
    #[test]
    fn a_context_swapped_for_a_link_outside_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, outside) = (real.join("ws"), real.join("outside"));
        std::fs::create_dir_all(ws.join("ctx")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "TRIPWIRE").unwrap();
        std::fs::write(ws.join("ctx/Dockerfile"), "FROM scratch\n").unwrap();
        let (ctx, dockerfile) = (ws.join("ctx"), ws.join("ctx/Dockerfile"));
        let packed = pack_within(&ctx, &dockerfile, None, Some(&ws)).unwrap();
        assert!(!packed.tar.is_empty());

        std::fs::remove_dir_all(&ctx).unwrap();
        std::os::unix::fs::symlink(&outside, &ctx).unwrap();
        std::fs::write(outside.join("Dockerfile"), "FROM scratch\n").unwrap();
        let Err(err) = pack_within(&ctx, &dockerfile, Some(b"FROM scratch\n"), Some(&ws)) else {
            panic!("a context resolving outside the workspace was packed");
        };
        let text = format!("{err} {:?}", std::error::Error::source(&err));
        assert!(text.contains("outside"), "{text}");
        // as given (no `within`): the link is followed, the secret packed
        let followed = pack(&ctx, &dockerfile, Some(b"FROM scratch\n")).unwrap();
        let names: Vec<String> = tar::Archive::new(followed.tar.as_slice())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().any(|n| n == "secret.txt"), "{names:?}");
    }
}
