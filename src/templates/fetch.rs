//! A Template as an OCI artifact: its manifest, metadata and archive, through the generic
//! artifact fetcher (the Features' cache, `--offline`, mirrors, tag revalidation).

use std::io::Read;

use bytes::Bytes;
use oci_client::Reference;
use oci_client::manifest::OciDescriptor;

use crate::oci::OciError;
use crate::oci::artifact::ArtifactFetcher;
use crate::oci::registry::parse_reference;

use super::{Result, TEMPLATE_FILE, TemplateError};

/// Upper bound on `devcontainer-template.json`, in bytes.
const MAX_METADATA_BYTES: u64 = 4 * 1024 * 1024;

/// A Template whose manifest was read: what to download, and its metadata.
#[derive(Debug, Clone)]
pub struct ResolvedTemplate {
    /// The reference as given (`--template-id`).
    pub id: String,
    /// `sha256:` digest of the manifest (what pins it).
    pub digest: String,
    /// `devcontainer-template.json` (from the manifest annotation, else from the archive);
    /// `None` when neither has it.
    pub metadata: Option<serde_json::Value>,
    reference: Reference,
    layer: OciDescriptor,
}

/// Reads the manifest of Template `id` and its metadata. The archive is downloaded only when
/// the manifest carries no `dev.containers.metadata` annotation.
///
/// # Errors
/// [`TemplateError::Oci`] (invalid reference, network, offline miss),
/// [`TemplateError::NotATemplate`].
pub async fn resolve(artifacts: &ArtifactFetcher, id: &str) -> Result<ResolvedTemplate> {
    let oci = |source| TemplateError::Oci {
        template: id.to_owned(),
        source,
    };
    let not_template = |reason: String| TemplateError::NotATemplate {
        template: id.to_owned(),
        reason,
    };
    let reference = parse_reference(id).map_err(oci)?;
    let artifact = match artifacts.image_manifest(&reference).await {
        Ok(a) => a,
        Err(OciError::InvalidManifest { reason, .. }) => return Err(not_template(reason)),
        Err(e) => return Err(oci(e)),
    };
    let layer = artifact
        .devcontainers_layer()
        .map_err(not_template)?
        .clone();
    let mut resolved = ResolvedTemplate {
        id: id.to_owned(),
        digest: artifact.digest.clone(),
        metadata: artifact.metadata_annotation(),
        reference,
        layer,
    };
    if resolved.metadata.is_none() {
        let archive = archive(artifacts, &resolved).await?;
        resolved.metadata = read_metadata(&archive);
    }
    Ok(resolved)
}

/// The Template's archive (tar, or tar+gzip), from the cache when possible.
///
/// # Errors
/// [`TemplateError::Oci`].
pub async fn archive(artifacts: &ArtifactFetcher, template: &ResolvedTemplate) -> Result<Bytes> {
    artifacts
        .blob(&template.reference, &template.layer)
        .await
        .map_err(|source| TemplateError::Oci {
            template: template.id.clone(),
            source,
        })
}

/// `devcontainer-template.json` at the archive's top, as a JSON object (JSONC accepted);
/// `None` when missing or unreadable (the metadata is informational for `apply`).
fn read_metadata(archive: &[u8]) -> Option<serde_json::Value> {
    let reader: Box<dyn Read + '_> = if crate::oci::extract::is_gzip(archive) {
        Box::new(flate2::read::GzDecoder::new(archive))
    } else {
        Box::new(archive)
    };
    let mut tar = tar::Archive::new(reader);
    for entry in tar.entries().ok()? {
        let entry = entry.ok()?;
        let path = entry.path().ok()?.into_owned();
        let normal: std::path::PathBuf = path
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect();
        if normal == std::path::Path::new(TEMPLATE_FILE) && entry.header().entry_type().is_file() {
            let mut text = String::new();
            entry
                .take(MAX_METADATA_BYTES)
                .read_to_string(&mut text)
                .ok()?;
            return parse_jsonc_object(&text);
        }
    }
    None
}

/// A JSONC text as a JSON object, or `None`.
pub(crate) fn parse_jsonc_object(text: &str) -> Option<serde_json::Value> {
    crate::config::jsonc::parse(std::path::Path::new(TEMPLATE_FILE), text)
        .ok()
        .map(|d| d.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_read_from_the_archive_top_as_jsonc() {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in [
            ("./sub/devcontainer-template.json", &br#"{"id":"no"}"#[..]),
            (
                "./devcontainer-template.json",
                &b"{ // c\n \"id\": \"t\", }"[..],
            ),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, data).unwrap();
        }
        let m = read_metadata(&b.into_inner().unwrap()).unwrap();
        assert_eq!(m["id"], "t");
    }
}
