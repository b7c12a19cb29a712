//! `prune`: remove the images devcell built that no container uses (spec-note 0272).
//!
//! devcell tags the images it builds `devcell/features:<key>` (Features layered on a base
//! image) and `devcell/uid:<key>` (`updateRemoteUserUID`), each key a hash of every input. A
//! changed input makes a new tag and leaves the old image behind. [`devcell_images`] lists them
//! with the containers that use each (directly, or through an image built on top of it, which
//! keeps its layers anyway); [`prune`] removes the tags of the unused ones. An image any
//! container uses is never removed: devcell skips it, and the engine's own check (`docker rmi`
//! without force) refuses it too if a container appears in between.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::build::features::FEATURES_IMAGE_REPOSITORY;
use crate::build::uid::UID_IMAGE_REPOSITORY;
use crate::engine::{Engine, EngineError};
use crate::ops::error::Result;

/// The repositories devcell builds into.
pub const DEVCELL_IMAGE_REPOSITORIES: &[&str] = &[FEATURES_IMAGE_REPOSITORY, UID_IMAGE_REPOSITORY];

/// One devcell-built image tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DevcellImage {
    /// The tag (`devcell/features:<key>`).
    pub reference: String,
    /// The image id (`sha256:…`).
    pub id: String,
    /// Size in bytes, shared base layers included (as `docker images` shows it).
    pub size: i64,
    /// Creation time, seconds since the Unix epoch.
    pub created: i64,
    /// Short ids of the containers that use it (empty: unused).
    pub used_by: Vec<String>,
}

/// Every devcell-built image tag, newest first, with the containers using each: a container
/// uses its image and every ancestor of it (the classic builder's `Parent` chain).
///
/// Errors: [`crate::ops::OpsError::Engine`].
pub async fn devcell_images(engine: &dyn Engine) -> Result<Vec<DevcellImage>> {
    let mut images = Vec::new();
    for repository in DEVCELL_IMAGE_REPOSITORIES {
        images.extend(engine.list_images(repository).await?);
    }
    let parents: HashMap<String, String> = images
        .iter()
        .map(|i| (i.id.clone(), i.parent_id.clone()))
        .collect();
    // image id → containers using it or a descendant.
    let mut users: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in engine.list_containers().await? {
        let short = c.id[..c.id.len().min(12)].to_string();
        let mut seen = HashSet::new();
        let mut id = c.image_id.clone();
        // Bounded: an image chain is at most a few hundred layers deep.
        for _ in 0..512 {
            if id.is_empty() || !seen.insert(id.clone()) {
                break;
            }
            users.entry(id.clone()).or_default().push(short.clone());
            // An image outside the listed repositories ends the chain: the engine's image
            // inspect answer names no parent (the Engine API model devcell reads has none).
            id = parents.get(&id).cloned().unwrap_or_default();
        }
    }
    let mut out: Vec<DevcellImage> = Vec::new();
    for image in images {
        for tag in image.repo_tags.iter().filter(|t| is_devcell_tag(t)) {
            if out.iter().any(|o| &o.reference == tag) {
                continue;
            }
            out.push(DevcellImage {
                reference: tag.clone(),
                id: image.id.clone(),
                size: image.size,
                created: image.created,
                used_by: users.get(&image.id).cloned().unwrap_or_default(),
            });
        }
    }
    out.sort_by(|a, b| {
        b.created
            .cmp(&a.created)
            .then(a.reference.cmp(&b.reference))
    });
    Ok(out)
}

/// Whether `tag` is in one of [`DEVCELL_IMAGE_REPOSITORIES`].
pub fn is_devcell_tag(tag: &str) -> bool {
    DEVCELL_IMAGE_REPOSITORIES.iter().any(|r| {
        tag.strip_prefix(r)
            .is_some_and(|rest| rest.starts_with(':'))
    })
}

/// Inputs of [`prune`].
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    /// `--dry-run`: list what would be removed, remove nothing.
    pub dry_run: bool,
    /// `--image REF` (repeatable): only these devcell images (tag, or image id / its prefix);
    /// empty = every unused one.
    pub images: Vec<String>,
}

/// An image tag `prune` removed (or would remove).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrunedImage {
    /// The tag.
    pub reference: String,
    /// The image id.
    pub id: String,
    /// Its size in bytes (shared layers included).
    pub size: i64,
    /// Whether the image itself was deleted (not only its tag: another tag or a child image
    /// keeps it). `false` in a dry run.
    pub deleted: bool,
}

/// An image `prune` left in place, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptImage {
    /// The tag (or the `--image` value that matched nothing).
    pub reference: String,
    /// The image id (empty when nothing matched).
    pub id: String,
    /// Why it was kept.
    pub reason: String,
    /// The containers using it.
    pub used_by: Vec<String>,
}

/// The result of [`prune`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneResult {
    /// Nothing was removed (`--dry-run`).
    pub dry_run: bool,
    /// Removed (or, in a dry run, to be removed).
    pub removed: Vec<PrunedImage>,
    /// Kept: in use, refused by the engine, or `--image` values that matched no devcell image.
    pub kept: Vec<KeptImage>,
    /// The sum of the removed images' sizes, in bytes (an upper bound: shared layers count).
    pub reclaimed_bytes: i64,
}

/// Connects to the engine (`DOCKER_HOST`) and runs [`prune_with`].
///
/// Errors: as [`prune_with`].
pub async fn prune(opts: &PruneOptions) -> Result<PruneResult> {
    let engine = crate::engine::connect().await?;
    prune_with(&*engine, opts).await
}

/// Removes the tags of the devcell-built images no container uses (only those matching
/// `opts.images` when given); in a dry run, lists them. An image in use is kept with the
/// containers using it; an engine refusal is kept with the engine's reason.
///
/// Errors: [`crate::ops::OpsError::Engine`] when the engine cannot be reached or
/// listed.
pub async fn prune_with(engine: &dyn Engine, opts: &PruneOptions) -> Result<PruneResult> {
    let all = devcell_images(engine).await?;
    let selected: Vec<&DevcellImage> = if opts.images.is_empty() {
        all.iter().collect()
    } else {
        all.iter()
            .filter(|i| opts.images.iter().any(|want| matches(i, want)))
            .collect()
    };
    let mut result = PruneResult {
        dry_run: opts.dry_run,
        removed: Vec::new(),
        kept: Vec::new(),
        reclaimed_bytes: 0,
    };
    for want in &opts.images {
        if !all.iter().any(|i| matches(i, want)) {
            result.kept.push(KeptImage {
                reference: want.clone(),
                id: String::new(),
                reason: "no devcell-built image (`devcell/features:*`, `devcell/uid:*`) matches"
                    .to_string(),
                used_by: Vec::new(),
            });
        }
    }
    for image in selected {
        if !image.used_by.is_empty() {
            result.kept.push(KeptImage {
                reference: image.reference.clone(),
                id: image.id.clone(),
                reason: format!("used by container(s) {}", image.used_by.join(", ")),
                used_by: image.used_by.clone(),
            });
            continue;
        }
        if opts.dry_run {
            result.reclaimed_bytes += image.size;
            result.removed.push(PrunedImage {
                reference: image.reference.clone(),
                id: image.id.clone(),
                size: image.size,
                deleted: false,
            });
            continue;
        }
        match engine.remove_image(&image.reference).await {
            Ok(deleted) => {
                let deleted = deleted.iter().any(|d| d == &image.id);
                if deleted {
                    result.reclaimed_bytes += image.size;
                }
                result.removed.push(PrunedImage {
                    reference: image.reference.clone(),
                    id: image.id.clone(),
                    size: image.size,
                    deleted,
                });
            }
            Err(e @ EngineError::ImageInUse { .. }) => result.kept.push(KeptImage {
                reference: image.reference.clone(),
                id: image.id.clone(),
                reason: e.to_string(),
                used_by: Vec::new(),
            }),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(result)
}

/// `want` is the image's tag, its id, or a prefix of its id (at least 12 hex digits, with or
/// without `sha256:`).
fn matches(image: &DevcellImage, want: &str) -> bool {
    if image.reference == want || image.id == want {
        return true;
    }
    let hex = want.strip_prefix("sha256:").unwrap_or(want);
    hex.len() >= 12
        && image
            .id
            .strip_prefix("sha256:")
            .is_some_and(|id| id.starts_with(hex))
}

/// `1.99 MB` (decimal units, like `docker images`).
pub fn human_size(bytes: i64) -> String {
    let b = bytes.max(0) as f64;
    match b {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.2} kB", b / 1e3),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(reference: &str, id: &str) -> DevcellImage {
        DevcellImage {
            reference: reference.into(),
            id: id.into(),
            size: 1,
            created: 0,
            used_by: Vec::new(),
        }
    }

    #[test]
    fn devcell_tags_only() {
        assert!(is_devcell_tag("devcell/features:abc"));
        assert!(is_devcell_tag("devcell/uid:abc"));
        assert!(!is_devcell_tag("devcell/featuresx:abc"));
        assert!(!is_devcell_tag("devcell-test/busybox:1"));
        assert!(!is_devcell_tag("127.0.0.1:5000/devcell/features:abc"));
    }

    #[test]
    fn image_selection_by_tag_or_id_prefix() {
        let i = image("devcell/features:k", "sha256:0123456789abcdef0123");
        assert!(matches(&i, "devcell/features:k"));
        assert!(matches(&i, "sha256:0123456789abcdef0123"));
        assert!(matches(&i, "0123456789ab"));
        assert!(matches(&i, "sha256:0123456789ab"));
        assert!(!matches(&i, "0123"), "too short a prefix");
        assert!(!matches(&i, "devcell/features:other"));
    }

    #[test]
    fn sizes_read_like_docker_images() {
        assert_eq!(human_size(1_990_000), "1.99 MB");
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(3_200_000_000), "3.20 GB");
    }
}
