//! Control "reproducibility": Can another machine recreate the workspace? Looks at how the image is
//! pinned (a verified digest-pinned base counts), whether Features match the lockfile, a read-only
//! root file system.

use crate::names;
use crate::security::audit::context::AuditContext;
use crate::security::audit::facts::{BASE_IMAGE_LABEL, ContainerFacts, feature_digests};
use crate::security::audit::heuristics::{is_digest_pinned, is_image_id, is_local_feature};
use crate::security::audit::scoring::{Evidence, Risk, ev};

/// The evidence for reproducibility.
pub(in crate::security::audit) fn evidence(
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Vec<Evidence> {
    let mut out = Vec::new();
    match f.image.as_deref() {
        Some(image) => {
            let base = f
                .labels
                .as_ref()
                .and_then(|l| l.get(BASE_IMAGE_LABEL))
                .map(String::as_str);
            if is_digest_pinned(image) {
                out.push(ev(format!("image {image}"), "pinned by digest", Risk::Safe));
            } else if let Some(b) = base.filter(|b| is_digest_pinned(b)) {
                out.push(base_evidence(image, b, f));
            } else if is_image_id(image) {
                out.push(ev(
                    format!("image {image}"),
                    "a local image ID: exact on this engine, but another machine cannot pull it; pin a registry digest (`<image>@sha256:…`)",
                    Risk::Weak,
                ));
            } else if let Some(d) = f.image_repo_digests.first() {
                out.push(ev(
                    format!("image {image}"),
                    format!("named by tag; the image has registry digest `{d}`, but a re-pull of the tag can drift; pin it as `{d}`"),
                    Risk::Weak,
                ));
            } else if f
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(names::METADATA_LABEL))
            {
                out.push(ev(
                    format!("image {image}"),
                    "built from a devcontainer configuration, base not pinned by digest: rebuilds can drift",
                    Risk::Weak,
                ));
            } else {
                out.push(ev(
                    format!("image {image}"),
                    "a tag with no registry digest and no recorded recipe: a pet image",
                    Risk::Critical,
                ));
            }
        }
        None => out.push(ev(
            "image",
            "image identity is not observable from inside",
            Risk::Weak,
        )),
    }
    match f.feature_ids() {
        Some(ids) if ids.is_empty() => {
            out.push(ev("Features", "none installed", Risk::Safe));
        }
        Some(ids) if ids.iter().all(|id| is_local_feature(id)) => {
            out.push(ev(
                format!("Features {}", ids.join(",")),
                "local Features: in the configuration's folder, versioned with it (nothing to lock)",
                Risk::Safe,
            ));
        }
        Some(ids) => {
            let subject = format!("Features {}", ids.join(","));
            match ctx.features_lockfile {
                Some(true) => out.push(lock_evidence(subject, &ids, f, ctx)),
                Some(false) => out.push(ev(
                    subject,
                    "no devcontainer-lock.json: Feature versions can drift",
                    Risk::Weak,
                )),
                None => out.push(ev(subject, "lockfile not checked", Risk::Weak)),
            }
        }
        None => out.push(ev("Features", "not observable from inside", Risk::Weak)),
    }
    match f.read_only_rootfs {
        Some(true) => out.push(ev(
            "root file system",
            "read-only: the container cannot drift from its image",
            Risk::Safe,
        )),
        Some(false) => out.push(ev(
            "root file system",
            "writable: state can drift from the image (a pet container)",
            Risk::Weak,
        )),
        None => out.push(ev("root file system", "not observable", Risk::Weak)),
    }
    out
}

/// The evidence for Features when a lockfile exists: "locked" only when every non-local Feature
/// the container's metadata label lists was installed (its [`FEATURE_DIGESTS_LABEL`]) at the
/// digest the lockfile holds for it (spec-note 0281).
fn lock_evidence(
    subject: String,
    ids: &[String],
    f: &ContainerFacts,
    ctx: &AuditContext,
) -> Evidence {
    let Some(locked) = &ctx.locked_features else {
        return ev(
            subject,
            "devcontainer-lock.json is not a valid lockfile: Feature versions can drift",
            Risk::Weak,
        );
    };
    let Some(installed) = f.labels.as_ref().and_then(feature_digests) else {
        return ev(
            subject,
            "devcontainer-lock.json exists, but the container does not record the digests its Features were installed at (not created by `devcell up`/`handoff`): whether they match the lockfile cannot be checked",
            Risk::Weak,
        );
    };
    let mut problems = Vec::new();
    let mut matched = 0;
    for id in ids.iter().filter(|id| !is_local_feature(id)) {
        let key = crate::features::FeatureRef::parse(id)
            .map(|r| r.lock_key())
            .unwrap_or_else(|_| id.to_ascii_lowercase());
        match (installed.get(&key), locked.get(&key)) {
            (Some(i), Some(l)) if i == l => matched += 1,
            (Some(i), Some(l)) => {
                problems.push(format!("`{id}` installed at `{i}`, locked to `{l}`"))
            }
            (_, None) => problems.push(format!("`{id}` is not in devcontainer-lock.json")),
            (None, Some(_)) => problems.push(format!("`{id}`: installed digest not recorded")),
        }
    }
    if problems.is_empty() {
        ev(
            subject,
            format!(
                "locked by devcontainer-lock.json: the {matched} installed Feature digest(s) match it"
            ),
            Risk::Safe,
        )
    } else {
        ev(
            subject,
            format!(
                "the container does not match devcontainer-lock.json ({}): recreate it (`devcell up --remove-existing-container`)",
                problems.join("; ")
            ),
            Risk::Weak,
        )
    }
}

/// The evidence for an image devcell layered on the digest-pinned base `base`: safe only when
/// the base is present and its layers are the first layers of the image (the label's claim is
/// checked, not trusted).
fn base_evidence(image: &str, base: &str, f: &ContainerFacts) -> Evidence {
    let subject = format!("image {image}");
    match &f.base_image_layers {
        Some(layers) if !f.image_layers.is_empty() && f.image_layers.starts_with(layers) => ev(
            subject,
            format!(
                "built locally on base `{base}` pinned by digest (its {} layer(s) are the image's first)",
                layers.len()
            ),
            Risk::Safe,
        ),
        Some(_) if !f.image_layers.is_empty() => ev(
            subject,
            format!(
                "label `{BASE_IMAGE_LABEL}` claims base `{base}`, but the image is not built on that base's layers"
            ),
            Risk::Critical,
        ),
        _ => ev(
            subject,
            format!(
                "label `{BASE_IMAGE_LABEL}` names base `{base}`, which is not on this engine: the claim cannot be checked"
            ),
            Risk::Weak,
        ),
    }
}
