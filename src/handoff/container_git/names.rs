//! Which names a new branch the agent made may take on the host (spec-note 0436, "Names that
//! shadow a ref"; attacks K7, L5, M4).
//!
//! git reads a short name through a list of rules (`<name>`, `refs/<name>`,
//! `refs/tags/<name>`, `refs/heads/<name>`, `refs/remotes/<name>`,
//! `refs/remotes/<name>/HEAD`) and, before any of them, as a `git describe` name
//! (`<anything>-g<hex>`) or a short object id only when no ref matches. A branch the agent
//! names like one of those other things wins (or becomes ambiguous) silently, today or after
//! the user's next fetch or tag. So the rule is inverted: a new branch comes back under its own
//! name only when [`reads_as_another_name`] says that name cannot be read as anything else;
//! otherwise it stays under `refs/devcell/<session>/` and the user is told.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::HostRepo;
use crate::config::hostgit;

/// The refs git keeps in its own folder and finds before any branch of the same name.
const GIT_DIR_REFS: &[&str] = &[
    "HEAD",
    "FETCH_HEAD",
    "ORIG_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_HEAD",
    "AUTO_MERGE",
];

/// First components a new branch may not start with: the namespaces under `refs/` git or
/// devcell write (`refs/stash`, `refs/notes/…`, `refs/bisect/…`, worktree refs), and
/// `refs`/`heads`/`tags`/`remotes`, which git reads as a prefix in some places and as part of
/// the name in others.
const NAMESPACES: &[&str] = &[
    "refs",
    "heads",
    "tags",
    "remotes",
    "stash",
    "notes",
    "bisect",
    "replace",
    "prefetch",
    "rewritten",
    "worktree",
    "worktrees",
    "main-worktree",
    "devcell",
];

/// Remote names a repository very often gets after the handoff (`git clone` makes `origin`,
/// hosting guides add `upstream`): a branch under them would shadow that remote's branches
/// once it exists, so they count as remotes whether configured or not.
const CONVENTIONAL_REMOTES: &[&str] = &["origin", "upstream"];

/// The most entries [`host_remotes`] reads from the legacy `remotes/` and `branches/` folders.
const MAX_LEGACY_REMOTES: usize = 4096;

/// The host repository's remote names: every `remote.<name>.*` of its configuration, read with
/// devcell's host git (nothing a configuration names runs, within
/// [`hostgit::quick_deadline`]), plus the file names of the legacy `<common>/remotes/` and
/// `<common>/branches/` folders. `None` when the configuration cannot be read (a FIFO
/// included, a parse error): the caller then keeps every new branch aside.
pub(super) fn host_remotes(host: &HostRepo<'_>) -> Option<BTreeSet<String>> {
    let mut git = hostgit::command(host.work_tree, &[]);
    git.env("GIT_DIR", host.common_dir).args([
        "config",
        "-z",
        "--name-only",
        "--get-regexp",
        r"^remote\.",
    ]);
    let out = hostgit::output_within(&mut git, hostgit::quick_deadline()).ok()?;
    // 1: no key matched (no remote configured)
    if !out.status.success() && out.status.code() != Some(1) {
        return None;
    }
    let mut remotes: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter_map(remote_of_key)
        .collect();
    for legacy in ["remotes", "branches"] {
        remotes.extend(file_names(&host.common_dir.join(legacy)));
    }
    Some(remotes)
}

/// The remote a configuration key `remote.<name>.<key>` (as `git config --name-only` prints
/// it; `<name>` may hold dots) is about.
fn remote_of_key(key: &str) -> Option<String> {
    let rest = key.trim().strip_prefix("remote.")?;
    let (name, _) = rest.rsplit_once('.')?;
    (!name.is_empty()).then(|| name.to_string())
}

/// The names of the entries of `dir` (none when it cannot be read), at most
/// [`MAX_LEGACY_REMOTES`].
fn file_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .take(MAX_LEGACY_REMOTES)
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Whether the new branch `name` (`refs/heads/…`) could be read by the user's git as something
/// other than that branch, now or after a fetch or a tag; `remotes` are the host's remote
/// names (`None`: unknown, so every name could be). A branch comes back only when this is
/// `false`. It is `true` when the short name
/// - is one of git's own refs ([`GIT_DIR_REFS`]) or has their form (upper case and `_` only,
///   or ending `_HEAD`), or holds `@` (`@`, `@{…}` and `<branch>@{…}` are revision syntax);
/// - is, or starts with, a remote's name: configured (`git remote add upstream` before its
///   first fetch has no `refs/remotes/upstream/` yet), with `refs/remotes/<remote>/` on the
///   host, or conventional ([`CONVENTIONAL_REMOTES`]): `upstream/main` is found before
///   `refs/remotes/upstream/main` (K7, M4);
/// - starts with a namespace of [`NAMESPACES`] (`stash`, `tags/v1`; L5, M4);
/// - is the short name of a host ref outside `refs/heads/` (a tag `v1.0`; L5);
/// - is a name a tag could take: `v` or `V` followed by a digit (`v1.1`, `v2`), or digits and
///   dots only (`1.2.3`): the user's next fetch may bring that tag, and `git checkout v1.1`
///   then takes the branch. Names only starting with a digit (`123-fix`) are left alone;
/// - is all hexadecimal and at least 4 characters long (git's shortest abbreviation), or ends
///   `-g` and 4 or more hexadecimal digits (a `git describe` name such as `v1.0-1-gfc9fa2e`):
///   a ref of that name wins over the commit it abbreviates (`git reset --hard 589df1c`;
///   L5, M4).
pub(super) fn reads_as_another_name(
    name: &str,
    remotes: Option<&BTreeSet<String>>,
    host_refs: &BTreeMap<String, String>,
) -> bool {
    let Some(short) = name.strip_prefix("refs/heads/") else {
        return false;
    };
    let Some(remotes) = remotes else {
        return true;
    };
    let first = short.split('/').next().unwrap_or(short);
    let under = |prefix: &str| short == prefix || short.starts_with(&format!("{prefix}/"));
    git_dir_form(short)
        || NAMESPACES.contains(&first)
        || remotes
            .iter()
            .map(String::as_str)
            .chain(CONVENTIONAL_REMOTES.iter().copied())
            .any(under)
        || host_refs.keys().any(|r| {
            let remote = r
                .strip_prefix("refs/remotes/")
                .and_then(|rest| rest.split('/').next());
            let other_short = r
                .strip_prefix("refs/")
                .filter(|_| !r.starts_with("refs/heads/"))
                .map(|s| {
                    ["tags/", "remotes/"]
                        .iter()
                        .find_map(|p| s.strip_prefix(p))
                        .unwrap_or(s)
                });
            remote == Some(first) || other_short == Some(short)
        })
        || tag_like(short)
        || object_name_form(short)
}

/// `HEAD`-like: one of [`GIT_DIR_REFS`], upper case and `_` only, ending `_HEAD` (any case:
/// a case-insensitive file system finds `head` as `HEAD`), or holding `@`.
fn git_dir_form(short: &str) -> bool {
    let upper = short.to_ascii_uppercase();
    GIT_DIR_REFS.contains(&short)
        || upper == "HEAD"
        || upper.ends_with("_HEAD")
        || short.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
        || short.contains('@')
}

/// A name a tag could take: `v`/`V` then a digit, or digits and dots with at least one dot.
fn tag_like(short: &str) -> bool {
    let b = short.as_bytes();
    let versioned = matches!(b, [b'v' | b'V', d, ..] if d.is_ascii_digit());
    let dotted = short.contains('.') && b.iter().all(|c| c.is_ascii_digit() || *c == b'.');
    versioned || dotted
}

/// An abbreviated object name (4+ hexadecimal digits) or a `git describe` name (ending
/// `-g<4+ hexadecimal digits>`), which git reads as the object when no ref has the name.
fn object_name_form(short: &str) -> bool {
    let hex = |s: &str| s.len() >= 4 && s.bytes().all(|b| b.is_ascii_hexdigit());
    hex(short) || short.rsplit_once("-g").is_some_and(|(_, tail)| hex(tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn remotes(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// Attack K7: a new branch named after a remote-tracking branch (or under a remote's
    /// name, before that branch is fetched) or after one of git's own refs shadows it; other
    /// names do not.
    #[test]
    fn a_new_branch_shadowing_a_remote_tracking_ref_is_kept_aside() {
        let refs = refs(&[
            ("refs/heads/main", "a"),
            ("refs/remotes/fork/main", "b"),
            ("refs/tags/v1", "c"),
        ]);
        let none = remotes(&[]);
        for name in [
            "refs/heads/fork/main",
            "refs/heads/fork/next",
            "refs/heads/fork",
            "refs/heads/FETCH_HEAD",
            "refs/heads/HEAD",
        ] {
            assert!(reads_as_another_name(name, Some(&none), &refs), "{name}");
        }
        for name in [
            "refs/heads/feature",
            "refs/heads/forks/x",
            "refs/heads/originals/x",
            "refs/heads/cafe-x",
            "refs/heads/abc",
            "refs/tags/origin/x",
        ] {
            assert!(!reads_as_another_name(name, Some(&none), &refs), "{name}");
        }
    }

    /// Attack L5: a new branch named after a tag (or any ref outside `refs/heads/`), under a
    /// namespace's name, or all-hex like a short commit id is kept aside: the user's
    /// `git checkout v1.0` or `git reset --hard 589df1c` would take the agent's branch.
    #[test]
    fn a_branch_named_after_a_tag_or_a_short_id_is_kept_aside() {
        let refs = refs(&[
            ("refs/heads/main", "a"),
            ("refs/tags/release-1", "c"),
            ("refs/stash", "d"),
            ("refs/notes/commits", "e"),
        ]);
        let none = remotes(&[]);
        for name in [
            "refs/heads/release-1",
            "refs/heads/stash",
            "refs/heads/589df1c",
            "refs/heads/DEADBEEF",
            "refs/heads/tags/v1.0",
            "refs/heads/refs/heads/main",
            "refs/heads/heads/x",
            "refs/heads/remotes/origin/main",
            "refs/heads/notes/commits",
        ] {
            assert!(reads_as_another_name(name, Some(&none), &refs), "{name}");
        }
        for name in [
            "refs/heads/release/v1.0",
            "refs/heads/fix",
            "refs/heads/123-fix-login",
        ] {
            assert!(!reads_as_another_name(name, Some(&none), &refs), "{name}");
        }
    }

    /// Attack M4: with no tag `v1.1`, no `refs/remotes/upstream/` (the remote is configured,
    /// never fetched) and no `refs/stash`, the names the agent chose are still kept aside: a
    /// `git describe` name, a configured remote's branch, a version a tag could take, a
    /// conventional remote's name, `stash`, `HEAD`-like and `@` forms. Names that cannot be
    /// read as anything else come back.
    #[test]
    fn names_that_could_be_read_as_something_else_later_are_kept_aside() {
        let refs = refs(&[("refs/heads/main", "a"), ("refs/tags/v1.0", "b")]);
        let configured = remotes(&["upstream", "my.fork"]);
        for name in [
            "refs/heads/upstream/main",
            "refs/heads/my.fork/main",
            "refs/heads/v1.0-1-gfc9fa2e",
            "refs/heads/feature-gABCD",
            "refs/heads/v1.1",
            "refs/heads/V2",
            "refs/heads/2.0.1",
            "refs/heads/origin",
            "refs/heads/origin/main",
            "refs/heads/stash",
            "refs/heads/NOTES_MERGE_HEAD",
            "refs/heads/head",
            "refs/heads/MY_REF",
            "refs/heads/main@x",
        ] {
            assert!(
                reads_as_another_name(name, Some(&configured), &refs),
                "{name}"
            );
        }
        for name in [
            "refs/heads/feature",
            "refs/heads/fix-gap",
            "refs/heads/fix-g12",
            "refs/heads/my/main",
            "refs/heads/upstreaming",
            "refs/heads/version-2",
            "refs/heads/Fix_Bug",
            "refs/heads/2024-cleanup",
        ] {
            assert!(
                !reads_as_another_name(name, Some(&configured), &refs),
                "{name}"
            );
        }
        // remotes unknown: every new branch is kept aside
        assert!(reads_as_another_name("refs/heads/feature", None, &refs));
    }

    #[test]
    fn a_remote_name_is_read_from_its_configuration_keys() {
        assert_eq!(
            remote_of_key("remote.upstream.url"),
            Some("upstream".into())
        );
        assert_eq!(
            remote_of_key("remote.my.fork.fetch\n"),
            Some("my.fork".into())
        );
        assert_eq!(remote_of_key("remote.url"), None);
        assert_eq!(remote_of_key("core.bare"), None);
    }
}
