//! What a fetch-back makes the host's git inflate, bounded before the host fetches anything
//! (spec-note 0438, attack H3).
//!
//! The copy budget (`[handoff] fetch_back_max_bytes`) counts the object files' bytes, but
//! git stores objects compressed and as deltas: one loose object of 1 MB is a 1 GiB blob
//! (zlib), and a pack of 8 KB whose delta repeats copy instructions over an 8 MiB base is a
//! 512 MiB blob the host's `index-pack` holds in memory while the fetch runs. So before the
//! host fetches, the staging repository (which holds only copies of the untrusted objects,
//! not yet borrowing the host's) lists every object with the size git *would* inflate it to,
//! read from the object's header (a loose object's `<type> <size>` header, a pack entry's
//! size, a delta's result size from the delta's own header: nothing is inflated whole), and
//! with the delta base of each packed delta. The objects the user's repository lacks are the
//! ones the fetch brings: none may be over [`FetchBudget::object`], nor all together over
//! [`FetchBudget::inflated`], nor more than [`NEW_OBJECTS_MAX`] of them. An object git cannot
//! describe (a delta whose base the pack's index does not name, which would make git inflate
//! an object that was never measured) refuses the whole fetch-back.

use crate::handoff::failure::GitFailed;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{ContainerGitError, HostRepo, Result, io};
use crate::config::hostgit;

/// The most objects one fetch-back may bring into the user's repository.
pub const NEW_OBJECTS_MAX: u64 = 1_000_000;

/// The most loose object files a fetch-back copies (each is a file opened and created; an
/// agent's `git gc` packs them).
pub const LOOSE_MAX: usize = 200_000;

/// How long listing the staged objects, or asking the host which it has, may take.
const LIST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// The bounds of one fetch-back (`[handoff]` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchBudget {
    /// The most bytes of object files copied (`fetch_back_max_bytes`).
    pub copied: u64,
    /// The most bytes the objects the host lacks hold inflated, all together
    /// (`fetch_back_max_inflated_bytes`).
    pub inflated: u64,
    /// The most bytes any one of them holds inflated (`fetch_back_max_object_bytes`).
    pub object: u64,
}

impl Default for FetchBudget {
    fn default() -> Self {
        Self::from_settings(&crate::settings::HandoffSettings::default())
    }
}

impl FetchBudget {
    /// The budget `[handoff]` sets.
    pub fn from_settings(handoff: &crate::settings::HandoffSettings) -> Self {
        Self {
            copied: handoff.fetch_back_max_bytes,
            inflated: handoff.fetch_back_max_inflated_bytes,
            object: handoff.fetch_back_max_object_bytes,
        }
    }

    /// The default budget with `copied` bytes of object files.
    pub fn copying(copied: u64) -> Self {
        Self {
            copied,
            ..Self::default()
        }
    }
}

/// Which inflated bound a fetch-back is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverInflated {
    /// One object is larger inflated than `fetch_back_max_object_bytes`.
    Object {
        /// Its name.
        oid: String,
        /// Its inflated size in bytes.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// The objects the host lacks are larger inflated, together, than
    /// `fetch_back_max_inflated_bytes`.
    Total {
        /// Their inflated size in bytes.
        size: u64,
        /// How many there are.
        count: u64,
        /// The bound.
        limit: u64,
    },
    /// More objects than [`NEW_OBJECTS_MAX`], or loose files than [`LOOSE_MAX`].
    Count {
        /// What was counted (`new objects`, `loose object files`).
        what: &'static str,
        /// How many (at least).
        count: u64,
        /// The bound.
        limit: u64,
    },
    /// An object git cannot describe without inflating something unmeasured (a delta whose
    /// base the pack's index does not name, a broken pack): what git said.
    Undescribed {
        /// git's line for it.
        line: String,
    },
}

impl OverInflated {
    /// The `[handoff]` setting that would let it in (none: a bound that is not a setting).
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            OverInflated::Object { .. } => Some("fetch_back_max_object_bytes"),
            OverInflated::Total { .. } => Some("fetch_back_max_inflated_bytes"),
            OverInflated::Count { .. } | OverInflated::Undescribed { .. } => None,
        }
    }

    /// The size a setting would need (bytes).
    pub fn size(&self) -> Option<u64> {
        match self {
            OverInflated::Object { size, .. } | OverInflated::Total { size, .. } => Some(*size),
            _ => None,
        }
    }
}

impl std::fmt::Display for OverInflated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OverInflated::Object { oid, size, limit } => write!(
                f,
                "object {oid} is {size} bytes inflated, more than `fetch_back_max_object_bytes` ({limit} bytes)"
            ),
            OverInflated::Total { size, count, limit } => write!(
                f,
                "the {count} object(s) to bring back are {size} bytes inflated, more than `fetch_back_max_inflated_bytes` ({limit} bytes)"
            ),
            OverInflated::Count { what, count, limit } => {
                write!(f, "more than {limit} {what} (at least {count})")
            }
            OverInflated::Undescribed { line } => write!(
                f,
                "git cannot describe an object without inflating something unmeasured (a delta whose base the pack's index does not name, or a broken pack): `{line}`"
            ),
        }
    }
}

/// What a fetch-back brings: the objects the user's repository lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewObjects {
    /// How many.
    pub count: u64,
    /// Their inflated size, together (bytes).
    pub inflated: u64,
    /// The largest, inflated (its name and size).
    pub largest: Option<(String, u64)>,
}

/// Measures the objects of the staging repository `k` (before it borrows the host's objects)
/// that the host repository lacks, and refuses ([`ContainerGitError::OverInflated`]) when one
/// is over `budget.object`, all together over `budget.inflated`, there are more than
/// [`NEW_OBJECTS_MAX`], or git cannot describe one (see the module docs). `source` names the
/// untrusted git directory in errors. Nothing is inflated whole: git reads headers only.
///
/// Errors: the refusals above; a failing host git.
pub(crate) fn measure(
    k: &Path,
    source: &Path,
    host: &HostRepo<'_>,
    budget: &FetchBudget,
) -> Result<NewObjects> {
    let refuse = |why| ContainerGitError::OverInflated {
        path: source.to_path_buf(),
        why,
    };
    let staged = staged_sizes(k).map_err(refuse)?;
    let lacking = lacking_in_host(host, staged.keys())?;
    let mut new = NewObjects::default();
    for oid in &lacking {
        let size = staged[oid];
        if size > budget.object {
            return Err(refuse(OverInflated::Object {
                oid: oid.clone(),
                size,
                limit: budget.object,
            }));
        }
        new.count += 1;
        new.inflated = new.inflated.saturating_add(size);
        if new.largest.as_ref().is_none_or(|(_, s)| size > *s) {
            new.largest = Some((oid.clone(), size));
        }
    }
    if new.count > NEW_OBJECTS_MAX {
        return Err(refuse(OverInflated::Count {
            what: "new objects",
            count: new.count,
            limit: NEW_OBJECTS_MAX,
        }));
    }
    if new.inflated > budget.inflated {
        return Err(refuse(OverInflated::Total {
            size: new.inflated,
            count: new.count,
            limit: budget.inflated,
        }));
    }
    Ok(new)
}

/// Every object of the staging repository `k` (its own objects only: it borrows nothing
/// yet) with its inflated size, read from headers (`%(objectsize)`; a delta's from the
/// delta's header). Asking for each delta's base (`%(deltabase)`) makes git find the base
/// through the pack's index: a base it does not name fails, and the object is
/// [`OverInflated::Undescribed`], as is any line that is not `<oid> <size> <base>`.
fn staged_sizes(k: &Path) -> std::result::Result<BTreeMap<String, u64>, OverInflated> {
    let undescribed = |line: &str| OverInflated::Undescribed {
        line: crate::formats::terminal::printable(
            &line.chars().take(200).collect::<String>(),
            crate::formats::terminal::Sgr::Escape,
        )
        .into_owned(),
    };
    let mut git = hostgit::command(k, &[]);
    git.env("GIT_DIR", k).args([
        "cat-file",
        "--batch-all-objects",
        "--batch-check=%(objectname) %(objectsize) %(deltabase)",
    ]);
    let out =
        hostgit::output_within(&mut git, LIST_DEADLINE).map_err(|e| undescribed(&e.to_string()))?;
    if !out.status.success() {
        return Err(undescribed(String::from_utf8_lossy(&out.stderr).trim()));
    }
    let mut sizes = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut parts = line.split(' ');
        let (Some(oid), Some(size), Some(base), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(undescribed(line));
        };
        let Ok(size) = size.parse::<u64>() else {
            return Err(undescribed(line));
        };
        if !super::is_oid(oid) || !super::is_oid(base) {
            return Err(undescribed(line));
        }
        sizes.insert(oid.to_ascii_lowercase(), size);
    }
    Ok(sizes)
}

/// The objects of `oids` the host repository does not have (`cat-file --batch-check` there,
/// the names on its standard input).
///
/// Errors: a failing host git.
fn lacking_in_host<'a>(
    host: &HostRepo<'_>,
    oids: impl Iterator<Item = &'a String>,
) -> Result<BTreeSet<String>> {
    let mut input = Vec::new();
    for oid in oids {
        input.extend_from_slice(oid.as_bytes());
        input.push(b'\n');
    }
    if input.is_empty() {
        return Ok(BTreeSet::new());
    }
    let mut git = hostgit::command(host.work_tree, &[]);
    git.env("GIT_DIR", host.common_dir).args([
        "cat-file",
        "--buffer",
        "--batch-check=%(objectname)",
    ]);
    let out = crate::process::output_within_std(&mut git, Some(&input), LIST_DEADLINE)
        .map_err(io(host.work_tree))?;
    if !out.status.success() {
        return Err(ContainerGitError::Git(GitFailed {
            dir: host.work_tree.to_path_buf(),
            args: "cat-file --batch-check".into(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(" missing"))
        .map(str::to_string)
        .collect())
}

/// The configuration the host's `git fetch` from the staging repository runs with (inherited
/// by the `upload-pack`, `pack-objects` and `index-pack` it starts), bounding the memory each
/// holds beyond the one object it inflates: caches and pack windows small, blobs over 32 MiB
/// streamed rather than held, no new delta search in the staging repository.
pub(crate) fn fetch_memory_bounds() -> Vec<(String, String)> {
    [
        ("core.bigFileThreshold", "32m"),
        ("core.deltaBaseCacheLimit", "32m"),
        ("core.packedGitLimit", "256m"),
        ("core.packedGitWindowSize", "32m"),
        ("pack.deltaCacheSize", "32m"),
        ("pack.windowMemory", "64m"),
        ("pack.window", "0"),
        ("pack.threads", "1"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
    .collect()
}
