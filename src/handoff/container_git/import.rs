//! Bringing objects and refs of an untrusted git directory into the host repository without
//! running git on it: its loose objects and packs copied as data into a bare repository
//! devcell makes ([`stage_objects`]), fetched from there with object checking
//! ([`import_refs`]). Shared by the fetch-back and the clone task's fetch.

use std::path::{Path, PathBuf};

use super::files::give_to_owner;
use super::host_git::run_git;
use super::inflated::{
    FetchBudget, LOOSE_MAX, NewObjects, OverInflated, fetch_memory_bounds, measure,
};
use super::nofollow;
use super::{ContainerGitError, HostRepo, Result, io};
use crate::config::hostgit;

/// Refs as `(name, object)` pairs.
pub(crate) type RefList = Vec<(String, String)>;

/// A fresh bare repository devcell makes in a temporary folder (removed with the returned
/// guard), holding a copy *as data* of the loose objects and packs of the untrusted git
/// directory `source` ([`copy_objects`], no link followed, at most `budget.copied` bytes and
/// [`LOOSE_MAX`] loose files), measured inflated against `budget` ([`measure`]: nothing the
/// host would inflate is over it) and only then borrowing the host's objects: git may run
/// there without reading anything `source` configures. Returns the guard, the repository's
/// path and what the host lacks of it.
///
/// Errors: files that cannot be read or written, a failing host `git init`, the budget's
/// refusals ([`ContainerGitError::OverBudget`], [`ContainerGitError::OverInflated`]).
pub(crate) fn stage_objects(
    source: &Path,
    host: &HostRepo<'_>,
    object_format: &str,
    budget: &FetchBudget,
) -> Result<(tempfile::TempDir, PathBuf, NewObjects)> {
    use std::os::unix::fs::PermissionsExt as _;
    // outside devcell's state folder, which the repository's owner (who runs the fetch
    // when devcell is root) may not be able to reach
    let staging = tempfile::Builder::new()
        .prefix("devcell-fetch-back-")
        .tempdir()
        .map_err(io(&std::env::temp_dir()))?;
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(io(staging.path()))?;
    let k = staging.path().join("k.git");
    let format = format!("--object-format={object_format}");
    let mut init = hostgit::command(staging.path(), &[]);
    init.args(["init", "--bare", "--quiet", "--template=", &format])
        .arg(&k);
    run_git(init, staging.path(), "init --bare")?;
    copy_objects(source, &k.join("objects"), budget.copied)?;
    // measured before the host's objects are borrowed: only the copies are listed
    let new = measure(&k, source, host, budget)?;
    let alternates = k.join("objects/info/alternates");
    std::fs::create_dir_all(k.join("objects/info")).map_err(io(&k))?;
    std::fs::write(
        &alternates,
        format!("{}\n", host.common_dir.join("objects").display()),
    )
    .map_err(io(&alternates))?;
    Ok((staging, k, new))
}

/// Brings the refs `refs` (name → object) of the untrusted git directory `source` into the host
/// repository `host` without running git on `source`: its loose objects and packs are copied
/// as data ([`copy_objects`], no link followed) into a fresh bare repository devcell makes
/// (borrowing the host's objects), the refs are set there (git refuses a missing object), and
/// the host fetches `refspec` from it with `transfer.fsckObjects` and its memory bounded
/// ([`fetch_memory_bounds`]). Shared by the container git directory's fetch-back and the clone
/// task's fetch (spec-notes 0436, 0437, 0438). Returns the refs imported and the ones refused
/// (their object missing or invalid).
///
/// Errors: files that cannot be read or written, a failing host `git fetch`, the budget's
/// refusals ([`stage_objects`]; nothing fetched).
pub(crate) fn import_refs(
    source: &Path,
    host: &HostRepo<'_>,
    object_format: &str,
    refs: &[(String, String)],
    refspec: &str,
    budget: &FetchBudget,
) -> Result<(RefList, RefList)> {
    let (_staging, k, _new) = stage_objects(source, host, object_format, budget)?;
    let mut imported = Vec::new();
    let mut refused = Vec::new();
    for (name, value) in refs {
        let mut update = hostgit::command(&k, &[]);
        update.env("GIT_DIR", &k).args(["update-ref", name, value]);
        let ok = hostgit::output_within(&mut update, hostgit::QUICK_DEADLINE)
            .is_ok_and(|o| o.status.success());
        if ok {
            imported.push((name.clone(), value.clone()));
        } else {
            refused.push((name.clone(), value.clone()));
        }
    }
    if imported.is_empty() {
        return Ok((imported, refused));
    }
    give_to_owner(&k, host.common_dir, false)?;
    let k_text = k.to_string_lossy().into_owned();
    let extra: Vec<(String, String)> = [
        ("protocol.file.allow", "always"),
        ("transfer.fsckObjects", "true"),
        ("fetch.fsckObjects", "true"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("fetch.writeCommitGraph", "false"),
        ("safe.directory", k_text.as_str()),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
    .chain(fetch_memory_bounds())
    .collect();
    let mut fetch = hostgit::command(host.work_tree, &extra);
    fetch
        .env("GIT_DIR", host.common_dir)
        .args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--no-auto-gc",
        ])
        .arg(&k)
        .arg(refspec);
    run_git(fetch, host.work_tree, "fetch <container objects>")?;
    Ok((imported, refused))
}

/// The most bytes of objects a worktree handoff's fetch-back stages (its container git
/// directory borrows the host's objects, so it holds only what the agent made).
pub const STAGING_MAX: u64 = crate::settings::FETCH_BACK_MAX_DEFAULT;

/// Copies, from the container's `objects` folder `from` into `to`, only regular files named as
/// git names loose objects (`xx/<38 or 62 hex>`) or packs (`pack/pack-<hex>.{pack,idx}`: no
/// reverse index, git computes its own from the index); no link is followed. At most `budget`
/// bytes: their sizes are added up first, and the copy stops when they grew past it meanwhile
/// ([`ContainerGitError::OverBudget`]; a sparse file counts at its full length, which is what a
/// copy writes); at most [`LOOSE_MAX`] loose files ([`ContainerGitError::OverInflated`]).
/// Returns how many files were copied.
fn copy_objects(dir: &Path, to: &Path, budget: u64) -> Result<usize> {
    let over = |size: u64| ContainerGitError::OverBudget {
        path: dir.to_path_buf(),
        size,
        budget,
    };
    let (files, loose) = object_files(dir);
    if loose > LOOSE_MAX {
        return Err(ContainerGitError::OverInflated {
            path: dir.to_path_buf(),
            why: OverInflated::Count {
                what: "loose object files",
                count: loose as u64,
                limit: LOOSE_MAX as u64,
            },
        });
    }
    let listed = files_size(dir, &files);
    if listed > budget {
        return Err(over(listed));
    }
    let mut used = 0u64;
    let mut copied = 0;
    for rel in files {
        let (Some(name), Some(file_name)) =
            (rel.parent().and_then(Path::file_name), rel.file_name())
        else {
            continue;
        };
        let target_dir = to.join(name);
        std::fs::create_dir_all(&target_dir).map_err(io(&target_dir))?;
        let target = target_dir.join(file_name);
        if target.exists() {
            continue;
        }
        // a file the container swapped for something else since the listing is skipped
        let Ok(source) = nofollow::open_file(dir, &rel) else {
            continue;
        };
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut target_file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&target)
            .map_err(io(&target))?;
        let left = budget - used;
        match std::io::copy(&mut source.take(left.saturating_add(1)), &mut target_file) {
            Ok(n) if n > left => {
                let _ = std::fs::remove_file(&target);
                return Err(over(used.saturating_add(n)));
            }
            Ok(n) => {
                used += n;
                copied += 1;
            }
            Err(_) => {
                let _ = std::fs::remove_file(&target);
            }
        }
    }
    Ok(copied)
}

/// The bytes of the objects [`copy_objects`] would copy from the untrusted git directory
/// `dir` (each file's length: a sparse file counts whole).
pub(crate) fn objects_size(dir: &Path) -> u64 {
    files_size(dir, &object_files(dir).0)
}

/// The bytes of `files` below `dir` (each file's length, opened without following a link).
fn files_size(dir: &Path, files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|rel| nofollow::open_file(dir, rel).ok()?.metadata().ok())
        .map(|m| m.len())
        .fold(0, u64::saturating_add)
}

/// The files of the container's `objects` folder [`copy_objects`] copies, relative to `dir`
/// (`objects/<fan-out or pack>/<file>`), each a regular file when listed, and how many entries
/// the loose objects' fan-out folders hold (listing stops past [`LOOSE_MAX`]: the count is
/// then `LOOSE_MAX + 1`, and the files listed are not all).
fn object_files(dir: &Path) -> (Vec<PathBuf>, usize) {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut files = Vec::new();
    let mut loose = 0usize;
    // every step opened without following a link: an `objects` the container swapped for a
    // link to another repository's objects is not read (attacker's review of issue 25)
    let objects = Path::new("objects");
    for (name, kind) in nofollow::list(dir, objects) {
        if kind != Some(true) {
            continue;
        }
        let fan_out = name.len() == 2 && hex(&name);
        if !fan_out && name != "pack" {
            continue;
        }
        let room = if fan_out {
            LOOSE_MAX + 1 - loose
        } else {
            usize::MAX
        };
        for (file_name, kind) in nofollow::list_at_most(dir, &objects.join(&name), room) {
            // every entry of a fan-out folder counts, junk included: each costs a look
            if fan_out {
                loose += 1;
            }
            let wanted = if fan_out {
                matches!(file_name.len(), 38 | 62) && hex(&file_name)
            } else {
                file_name
                    .strip_prefix("pack-")
                    .and_then(|rest| rest.rsplit_once('.'))
                    .is_some_and(|(id, ext)| {
                        matches!(id.len(), 40 | 64) && hex(id) && matches!(ext, "pack" | "idx")
                    })
            };
            if wanted && kind == Some(false) {
                files.push(objects.join(&name).join(&file_name));
            }
        }
        if loose > LOOSE_MAX {
            break;
        }
    }
    (files, loose)
}
