//! Running exactly the judged bytes of a granted host command (attack O5, spec-note 0477).
//!
//! A grant pins each workspace file the command names by the digest of the bytes devcell read
//! when it judged ([`super::cover_command`]). The shell opens the file by path later, and a
//! container still running writes the workspace in between (`up` reuses a running container
//! and runs `initializeCommand` every time): the file it swapped in would run on the host. So
//! before the command runs, each pinned file it names is copied, from one no-follow read whose
//! digest must equal the judged one, into a private folder of devcell's, and every word of the
//! command that names the file is rewritten to name the copy ([`rewrite`]).
//!
//! The rewrite is lexical, so it does not depend on what the workspace holds when the command
//! runs: a word is rewritten when it spells the file's workspace path exactly (`P`, `./P`,
//! `$PWD/P`, `${PWD}/P`, or the workspace folder's path, as given or canonical, then `/P`),
//! standing between characters that end a shell word. The judgement checks that the rewritten
//! command names no pinned file any more ([`unreachable_words`]); a command that names one
//! another way (`scripts/'init'.sh`, a link, `~/…`) cannot run its judged copy and is granted
//! for one run only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::security::host_path::{read_no_follow, resolve};
use crate::security::permissions::CoveredFile;

/// Characters a copy's path may hold: none of them means anything to a shell at any nesting
/// level, so a rewritten word needs no quoting wherever it stands.
pub fn is_plain_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
}

/// Characters that end a shell word (or the value of `--flag=`) on either side of a rewritten
/// spelling.
const ENDS: &[char] = &[
    ' ', '\t', '\n', '\'', '"', ';', '&', '|', '<', '>', '(', ')', '`', '=', ',',
];

/// `text` with every spelling of each pinned file (`copies`: workspace-relative path → the
/// copy's path, which [`is_plain_path`]) replaced by its copy. `roots` are the workspace
/// folder as given and canonical.
pub fn rewrite(text: &str, copies: &BTreeMap<String, String>, roots: &[String]) -> String {
    // Longest spelling first: `./P` and `/ws/P` end with `P`.
    let mut spellings: Vec<(String, &str)> = Vec::new();
    for (path, copy) in copies {
        let mut add = |s: String| spellings.push((s, copy.as_str()));
        add(path.clone());
        add(format!("./{path}"));
        add(format!("$PWD/{path}"));
        add(format!("${{PWD}}/{path}"));
        for root in roots {
            add(format!("{}/{path}", root.trim_end_matches('/')));
        }
    }
    spellings.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    'scan: while at < text.len() {
        let starts_word = at == 0 || text[..at].ends_with(ENDS);
        if starts_word {
            for (spelling, copy) in &spellings {
                let rest = &text[at..];
                if rest.starts_with(spelling.as_str())
                    && (rest.len() == spelling.len() || rest[spelling.len()..].starts_with(ENDS))
                {
                    out.push_str(copy);
                    at += spelling.len();
                    continue 'scan;
                }
            }
        }
        let c = text[at..].chars().next().unwrap_or(' ');
        out.push(c);
        at += c.len_utf8();
    }
    out
}

/// A folder path no file is at, standing for the copies' folder when the judgement checks the
/// rewrite ([`unreachable_words`]).
const JUDGED_COPIES: &str = "/nonexistent/devcell-judged-copies";

/// The copies' paths [`rewrite`] uses for `files` under the folder `dir`: `<dir>/<n>/<name>`
/// (the file's own name when [`is_plain_path`], else `file`).
pub fn copy_paths(files: &[CoveredFile], dir: &str) -> BTreeMap<String, String> {
    files
        .iter()
        .enumerate()
        .map(|(n, f)| {
            let name = f.path.rsplit('/').next().unwrap_or("");
            let name = if is_plain_path(name) && !name.starts_with('.') {
                name
            } else {
                "file"
            };
            (f.path.clone(), format!("{dir}/{n}/{name}"))
        })
        .collect()
}

/// The pinned `files` that the command `argv` still names once rewritten to copies: `still`
/// judges a rewritten argv (the same judgement as the original's) and returns the workspace
/// files it names. Each is a reason the command is granted for one run only.
pub fn unreachable_words(
    argv: &[String],
    files: &[CoveredFile],
    roots: &[String],
    still: impl FnOnce(&[String]) -> Vec<CoveredFile>,
) -> Vec<String> {
    if files.is_empty() {
        return Vec::new();
    }
    let copies = copy_paths(files, JUDGED_COPIES);
    let rewritten: Vec<String> = argv.iter().map(|a| rewrite(a, &copies, roots)).collect();
    let named = still(&rewritten);
    files
        .iter()
        .filter(|f| named.iter().any(|n| n.path == f.path))
        .map(|f| {
            format!(
                "`{}` (named in a way devcell cannot point at the copy of the judged file it \
                 runs: spell it as a plain workspace path)",
                f.path
            )
        })
        .collect()
}

/// Copies each pinned file `argv` names (`pinned`: workspace-relative path → judged SHA-256)
/// into `dir` (a private folder of devcell's, [`is_plain_path`]) from one no-follow read of
/// it in the canonical `workspace`, checks the copy's digest is the judged one, and returns
/// `argv` rewritten to the copies. A file `argv` does not spell is not copied.
///
/// Errors: a message naming the file when it changed since it was judged or cannot be read
/// or copied.
pub fn run_copies(
    argv: &[String],
    pinned: &BTreeMap<String, String>,
    workspace: &Path,
    dir: &Path,
) -> Result<Vec<String>, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let root = resolve(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let roots = [text(workspace), text(&root)];
    let dir_text = text(dir);
    if !is_plain_path(&dir_text) {
        return Err(format!(
            "devcell's folder for the judged copies `{dir_text}` holds a character a shell reads \
             (set DEVCELL_STATE_DIR to a plain path)"
        ));
    }
    let files: Vec<CoveredFile> = pinned
        .iter()
        .map(|(path, sha256)| CoveredFile {
            path: path.clone(),
            sha256: sha256.clone(),
        })
        .collect();
    let all = copy_paths(&files, &dir_text);
    // Only the files the command spells: a rewrite with one file at a time shows it.
    let mut used = BTreeMap::new();
    for (path, copy) in &all {
        let one = BTreeMap::from([(path.clone(), copy.clone())]);
        if argv.iter().any(|a| rewrite(a, &one, &roots) != *a) {
            used.insert(path.clone(), copy.clone());
        }
    }
    for (path, copy) in &used {
        let source = root.join(path);
        let bytes = read_no_follow(&source, super::MAX_COVERED_BYTES)
            .map_err(|e| format!("`{path}` cannot be read: {e}"))?
            .ok_or_else(|| format!("`{path}` is gone since devcell judged it"))?;
        let digest = hex::encode(Sha256::digest(&bytes));
        if Some(&digest) != pinned.get(path) {
            return Err(format!(
                "`{path}` changed since devcell judged it (sha256 {} then, {} now): run again",
                short(pinned.get(path).map_or("", String::as_str)),
                short(&digest)
            ));
        }
        let copy = PathBuf::from(copy);
        let write = || -> std::io::Result<()> {
            use std::io::Write as _;
            if let Some(parent) = copy.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o700)
                .open(&copy)?;
            file.write_all(&bytes)?;
            file.sync_all()
        };
        write().map_err(|e| format!("`{path}` cannot be copied to `{}`: {e}", copy.display()))?;
    }
    Ok(argv.iter().map(|a| rewrite(a, &used, &roots)).collect())
}

/// The first 12 hex digits of a digest.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// A path as text (lossy).
fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copies(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn every_plain_spelling_is_rewritten_and_nothing_else() {
        let c = copies(&[("scripts/init.sh", "/c/0/init.sh")]);
        let roots = ["/ws".to_string(), "/real/ws".to_string()];
        let r = |t: &str| rewrite(t, &c, &roots);
        assert_eq!(r("sh scripts/init.sh"), "sh /c/0/init.sh");
        assert_eq!(r("./scripts/init.sh a"), "/c/0/init.sh a");
        assert_eq!(r("sh \"$PWD/scripts/init.sh\""), "sh \"/c/0/init.sh\"");
        assert_eq!(r("sh ${PWD}/scripts/init.sh"), "sh /c/0/init.sh");
        assert_eq!(r("sh /real/ws/scripts/init.sh;x"), "sh /c/0/init.sh;x");
        assert_eq!(r("sh </ws/scripts/init.sh"), "sh </c/0/init.sh");
        assert_eq!(r("sh -c 'sh scripts/init.sh'"), "sh -c 'sh /c/0/init.sh'");
        assert_eq!(r("--file=scripts/init.sh"), "--file=/c/0/init.sh");
        // not the file's spelling: left alone (the judgement sees it still named)
        assert_eq!(r("sh x/scripts/init.sh"), "sh x/scripts/init.sh");
        assert_eq!(r("sh scripts/init.shx"), "sh scripts/init.shx");
        assert_eq!(r("sh scripts/'init'.sh"), "sh scripts/'init'.sh");
        assert_eq!(r("é scripts/init.sh"), "é /c/0/init.sh");
    }

    #[test]
    fn a_copy_path_holds_nothing_a_shell_reads() {
        assert!(is_plain_path(
            "/home/a.b/.local/state/devcell/host-commands/run-1-x"
        ));
        for bad in ["/a b", "/a$b", "/a'b", "/a*b", "/a;b", ""] {
            assert!(!is_plain_path(bad), "{bad}");
        }
        let files = [CoveredFile {
            path: "s/my script.sh".into(),
            sha256: String::new(),
        }];
        assert_eq!(copy_paths(&files, "/c")["s/my script.sh"], "/c/0/file");
    }

    #[test]
    fn the_copy_runs_the_judged_bytes_and_a_changed_file_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("scripts")).unwrap();
        let script = ws.path().join("scripts/init.sh");
        std::fs::write(&script, "echo judged").unwrap();
        let judged = hex::encode(Sha256::digest(b"echo judged"));
        let pinned = BTreeMap::from([("scripts/init.sh".to_string(), judged)]);
        let argv: Vec<String> = ["/bin/sh", "-c", "sh scripts/init.sh"]
            .map(String::from)
            .to_vec();
        let root = resolve(dir.path()).unwrap();
        let run = run_copies(&argv, &pinned, ws.path(), &root).unwrap();
        let copy = root.join("0/init.sh");
        assert_eq!(run[2], format!("sh {}", copy.display()));
        assert_eq!(std::fs::read_to_string(&copy).unwrap(), "echo judged");
        // swapped after the judgement: refused, nothing copied
        std::fs::write(&script, "echo swapped").unwrap();
        let dir2 = tempfile::tempdir().unwrap();
        let err = run_copies(&argv, &pinned, ws.path(), &resolve(dir2.path()).unwrap());
        assert!(err.unwrap_err().contains("changed since devcell judged it"));
        assert!(!dir2.path().join("0").exists());
    }
}
