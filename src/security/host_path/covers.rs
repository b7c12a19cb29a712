//! [`Cover`]: a host path the handoff shows the container something else in place of, and
//! what one bind becomes under the covers ([`cover_bind`]; spec-note 0436).

use std::path::{Path, PathBuf};

/// A host path the handoff shows the container something else in place of (spec-note 0436):
/// `covered` (a repository's `.git`, its host git directories) is hidden under a bind of
/// `source` (its container git directory, or devcell's `.git` file), read-write or not; or, for
/// a `folder` cover, `covered` is a folder bound on itself (the workspace, a repository's or a
/// submodule's working tree, a folder above a submodule): a mount point, which cannot be renamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    /// The host path hidden (canonical).
    pub covered: PathBuf,
    /// What the container sees instead (host path).
    pub source: PathBuf,
    /// Whether that bind is read-only.
    pub read_only: bool,
    /// Whether `covered` is a folder bound on itself (only what holds it needs the same bind).
    pub folder: bool,
}

impl Cover {
    /// Whether a bind of a path inside `covered` must be redirected to the cover: every cover
    /// but a read-write folder bound on itself (what is inside it is ordinary content).
    pub fn hides_inside(&self) -> bool {
        !self.folder || self.read_only
    }
}

/// What one bind (host `source`, read-only or not) becomes under `covers` (spec-note 0436).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Covered {
    /// The bind shows (a path inside) a covered path: it shows the same path of the cover
    /// instead, read-only (never the host's git directory, not even to read its `config`).
    Redirect(PathBuf),
    /// The bind holds covered paths: each cover's bind below its target (relative path,
    /// cover source, read-only); empty when the bind touches no cover.
    Overlays(Vec<(PathBuf, PathBuf, bool)>),
}

/// Judges a bind of `source` (read-only when `read_only`) against `covers`; see [`Covered`].
pub fn cover_bind(source: &Path, read_only: bool, covers: &[Cover]) -> Covered {
    if let Some(c) = covers
        .iter()
        .find(|c| c.hides_inside() && source.starts_with(&c.covered))
    {
        let rel = source.strip_prefix(&c.covered).unwrap_or(Path::new(""));
        let to = if rel.as_os_str().is_empty() {
            c.source.clone()
        } else {
            c.source.join(rel)
        };
        return Covered::Redirect(to);
    }
    let mut overlays = Vec::new();
    for c in covers {
        // through a read-only bind nothing can be renamed and a path shown as itself is the same
        if read_only && c.source == c.covered {
            continue;
        }
        match c.covered.strip_prefix(source) {
            Ok(rel) if !rel.as_os_str().is_empty() => overlays.push((
                rel.to_path_buf(),
                c.source.clone(),
                c.read_only || read_only,
            )),
            _ => {}
        }
    }
    Covered::Overlays(overlays)
}
