//! The bare mirror of a source repository in devcell's cache (spec-note 0437): made on first
//! use, fetched from the user's repository before each task, under a per-mirror `flock(2)`
//! (exclusive to create and fetch; shared while a clone borrows its objects), never mounted
//! into any container.

use std::fs::File;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use super::source::Source;
use super::{Result, git, io};

/// `<cache>/mirrors`.
pub fn mirrors_root(cache_root: &Path) -> PathBuf {
    cache_root.join("mirrors")
}

/// `<cache>/mirrors/<key>.git`.
pub fn mirror_path(cache_root: &Path, key: &str) -> PathBuf {
    mirrors_root(cache_root).join(format!("{key}.git"))
}

/// A mirror's lock, held until dropped.
pub struct MirrorLock {
    file: File,
}

impl MirrorLock {
    /// Takes the lock of the mirror `key` (waits for it): `exclusive` to change the mirror,
    /// shared to read it.
    ///
    /// Errors: [`super::TaskError::Io`].
    pub fn take(cache_root: &Path, key: &str, exclusive: bool) -> Result<MirrorLock> {
        let root = mirrors_root(cache_root);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .map_err(io(&root))?;
        let path = root.join(format!("{key}.lock"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        let mut lock = MirrorLock { file };
        lock.set(exclusive).map_err(io(&path))?;
        Ok(lock)
    }

    /// Changes the lock to exclusive or shared (waits).
    pub fn set(&mut self, exclusive: bool) -> std::io::Result<()> {
        use rustix::fs::{FlockOperation, flock};
        let op = if exclusive {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::LockShared
        };
        flock(&self.file, op).map_err(std::io::Error::from)
    }
}

/// The configuration of every mirror fetch: nothing maintains the mirror on its own (a gc
/// could remove objects a clone is still borrowing).
fn fetch_config() -> Vec<(String, String)> {
    [
        ("protocol.file.allow", "always"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("fetch.writeCommitGraph", "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The `upload-pack` the mirror fetch runs in the user's repository. git gives a local
/// transport's `upload-pack` none of the caller's configuration (`GIT_CONFIG_COUNT` is dropped
/// for it), so its two settings travel on its command line: the repository is the user's
/// (`safe.directory`, when devcell runs as another user) and may serve the base commit by name.
fn upload_pack(source: &Source) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    format!(
        "git -c safe.directory={} -c uploadpack.allowAnySHA1InWant=true upload-pack",
        quote(&source.common_dir.to_string_lossy())
    )
}

/// Makes the mirror of `source` when it is missing (or not a bare repository), then fetches
/// the user's branches and tags into it, and the base commit when no branch holds it. The
/// caller holds the mirror's exclusive lock. Returns the mirror's path.
///
/// Errors: a failing host `git`, files that cannot be written.
pub fn update(cache_root: &Path, key: &str, source: &Source) -> Result<PathBuf> {
    let mirror = mirror_path(cache_root, key);
    if !mirror.join("HEAD").is_file() || !mirror.join("objects").is_dir() {
        if mirror.exists() {
            std::fs::remove_dir_all(&mirror).map_err(io(&mirror))?;
        }
        let format = format!("--object-format={}", source.object_format);
        let parent = mirrors_root(cache_root);
        git(
            &parent,
            None,
            &[],
            &[
                "init",
                "--bare",
                "--quiet",
                "--template=",
                &format,
                &mirror.to_string_lossy(),
            ],
        )?;
    }
    let config = fetch_config();
    let upload_pack = format!("--upload-pack={}", upload_pack(source));
    let from = source.common_dir.to_string_lossy().into_owned();
    let fetch = |prune: bool, refspecs: &[&str]| -> Result<String> {
        let mut args = vec!["fetch", "--quiet"];
        if prune {
            args.push("--prune");
        }
        args.extend([
            upload_pack.as_str(),
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--no-auto-gc",
            "--end-of-options",
            from.as_str(),
        ]);
        args.extend_from_slice(refspecs);
        git(&mirror, Some(&mirror), &config, &args)
    };
    fetch(
        true,
        &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
    )?;
    let spec = format!("{}^{{commit}}", source.base);
    if git(&mirror, Some(&mirror), &[], &["cat-file", "-e", &spec]).is_err() {
        let keep = format!("+{}:refs/devcell/bases/{}", source.base, source.base);
        fetch(false, &[&keep])?;
    }
    Ok(mirror)
}

/// The keys of every mirror a task in `state_root` uses: each record's repository's
/// [`super::source_key`]. A task folder without a record (being made) names none: its handoff
/// holds the mirror's lock while it needs the mirror.
fn used_keys(state_root: &Path) -> std::collections::BTreeSet<String> {
    super::subfolders(&state_root.join("tasks"))
        .flat_map(|key| super::subfolders(&key.path()))
        .filter_map(|task| super::load_folder(&task.path()).ok())
        .flatten()
        .map(|r| super::source_key(&r.source_git_dir))
        .collect()
}

/// Every mirror in `<cache>/mirrors` no task in `state_root` uses, by path (spec-note 0437).
pub fn unused(cache_root: &Path, state_root: &Path) -> Vec<PathBuf> {
    let used = used_keys(state_root);
    let mut out: Vec<PathBuf> = super::subfolders(&mirrors_root(cache_root))
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".git"))
                .is_some_and(|key| !used.contains(key))
        })
        .collect();
    out.sort();
    out
}

/// Removes the mirrors no task uses ([`unused`]), each under its exclusive lock taken without
/// waiting (one a handoff is fetching or cloning from is kept) and judged again under it; the
/// lock file stays (a handoff waiting on it must lock the same file). `dry_run` removes
/// nothing. Returns the mirrors removed (or that would be).
///
/// Errors: a mirror folder that cannot be removed.
pub fn prune_unused(cache_root: &Path, state_root: &Path, dry_run: bool) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for mirror in unused(cache_root, state_root) {
        if dry_run {
            removed.push(mirror);
            continue;
        }
        let lock_path = mirror.with_extension("lock");
        let Ok(file) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
        else {
            continue;
        };
        if !super::lock::lock_within_grace(&file).unwrap_or(false) {
            continue;
        }
        // judged again under the lock: a task may have been made from it meanwhile
        if !unused(cache_root, state_root).contains(&mirror) {
            continue;
        }
        std::fs::remove_dir_all(&mirror).map_err(io(&mirror))?;
        removed.push(mirror);
    }
    Ok(removed)
}
