//! Fetching Dev Container OCI artifacts (Features, Templates) through the content store.
//!
//! Every network read is cached by digest, tag resolutions too, so a second fetch of the same
//! pinned artifact makes no network request. A tag is revalidated against its registry with
//! one manifest request the first time a fetcher uses it, so a moved tag (`:1` after a new
//! release) is seen (spec-note 0451); `offline` forbids the network, serves tags from the
//! cache (one warning says so) and names the reference on a miss. When the registry cannot be
//! reached, a tag falls back to its cached resolution (said once, too) unless
//! `refresh_tags` forbids it.
//!
//! The kind-specific checks (media types, metadata files) stay with each kind
//! (`features::fetch`, `templates`); this module only moves bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest, OciManifest};

use crate::oci::registry::{Registry, RegistryOptions};
use crate::oci::store::Store;
use crate::oci::{OciError, Result};
use crate::progress::{Event, NoopReporter, Reporter};

/// Config media type of every Dev Container artifact (Features, Templates, collections).
pub const DEVCONTAINERS_CONFIG_MEDIA_TYPE: &str = "application/vnd.devcontainers";
/// Layer media type of a Feature or Template archive.
pub const DEVCONTAINERS_LAYER_MEDIA_TYPE: &str = "application/vnd.devcontainers.layer.v1+tar";
/// Manifest annotation holding the artifact's metadata file as a JSON string.
pub const METADATA_ANNOTATION: &str = "dev.containers.metadata";

/// How artifacts are fetched.
#[derive(Debug, Clone, Default)]
pub struct ArtifactOptions {
    /// Cache root; default `$XDG_CACHE_HOME/devcell`.
    pub cache_dir: Option<std::path::PathBuf>,
    /// Use only the cache; a miss is [`OciError::OfflineMiss`].
    pub offline: bool,
    /// Never fall back to a cached tag resolution when the registry cannot be reached.
    pub refresh_tags: bool,
    /// Registry access: mirrors, insecure registries, CA certificates, Docker config.
    pub registry: RegistryOptions,
}

/// What a fetcher did with tags: revalidated ones (asked once per fetcher), and the ones
/// served from the cache without asking, for the warnings of [`ArtifactFetcher::take_tag_warnings`].
#[derive(Debug, Default)]
struct TagNotes {
    revalidated: HashMap<String, String>,
    from_cache: Vec<String>,
    unreachable: Vec<String>,
}

/// Fetches manifests and blobs of OCI artifacts through one cache and one registry client.
pub struct ArtifactFetcher {
    store: Store,
    registry: Registry,
    options: ArtifactOptions,
    reporter: Arc<dyn Reporter>,
    tags: Mutex<TagNotes>,
}

impl std::fmt::Debug for ArtifactFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactFetcher")
            .field("store", &self.store)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// An artifact's image manifest with its digest (what pins it).
#[derive(Debug, Clone)]
pub struct ArtifactManifest {
    /// The parsed manifest.
    pub manifest: OciImageManifest,
    /// `sha256:<hex>` of the manifest bytes.
    pub digest: String,
    /// The manifest bytes as served.
    pub bytes: Bytes,
}

impl ArtifactManifest {
    /// The `dev.containers.metadata` annotation as a JSON object, when present and valid.
    pub fn metadata_annotation(&self) -> Option<serde_json::Value> {
        self.manifest
            .annotations
            .as_ref()
            .and_then(|a| a.get(METADATA_ANNOTATION))
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .filter(|v| v.is_object())
    }

    /// The single Dev Container layer of a Feature or Template artifact, after checking the
    /// config and layer media types; `Err` says what is wrong (for a "not a …" error).
    pub fn devcontainers_layer(&self) -> std::result::Result<&OciDescriptor, String> {
        if self.manifest.config.media_type != DEVCONTAINERS_CONFIG_MEDIA_TYPE {
            return Err(format!(
                "config media type is `{}`, expected `{DEVCONTAINERS_CONFIG_MEDIA_TYPE}`",
                self.manifest.config.media_type
            ));
        }
        let Some(layer) = self.manifest.layers.first() else {
            return Err("the manifest has no layers".into());
        };
        if layer.media_type != DEVCONTAINERS_LAYER_MEDIA_TYPE {
            return Err(format!(
                "layer media type is `{}`, expected `{DEVCONTAINERS_LAYER_MEDIA_TYPE}`",
                layer.media_type
            ));
        }
        Ok(layer)
    }
}

impl ArtifactFetcher {
    /// Opens the cache and builds the registry client.
    ///
    /// # Errors
    /// [`OciError`] when the cache cannot be created or the Docker config or CA certificates
    /// cannot be read.
    pub fn new(options: ArtifactOptions) -> Result<ArtifactFetcher> {
        let store = Store::open(options.cache_dir.as_deref())?;
        let registry = Registry::new(options.registry.clone())?;
        Ok(ArtifactFetcher {
            store,
            registry,
            options,
            reporter: Arc::new(NoopReporter),
            tags: Mutex::new(TagNotes::default()),
        })
    }

    /// Sends progress events (`pulling …`) to `reporter`.
    pub fn with_reporter(mut self, reporter: Arc<dyn Reporter>) -> ArtifactFetcher {
        self.reporter = reporter;
        self
    }

    /// The cache in use.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The registry client in use.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Whether only the cache may be used.
    pub fn offline(&self) -> bool {
        self.options.offline
    }

    /// The progress reporter.
    pub fn reporter(&self) -> &Arc<dyn Reporter> {
        &self.reporter
    }

    /// The findings about tags since the last call, as at most two warnings naming `kind`
    /// (`Feature`, `Template`): tags served from the cache because of `offline` (not
    /// revalidated against their registry), and tags served from the cache because their
    /// registry could not be reached.
    pub fn take_tag_warnings(&self, kind: &str) -> Vec<crate::diagnostics::Warning> {
        let mut notes = self.tags.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        let mut say = |tags: &mut Vec<String>, what: String| {
            if !tags.is_empty() {
                tags.dedup();
                out.push(crate::diagnostics::Warning {
                    location: None,
                    message: format!("{what}: {}", tags.join(", ")),
                });
                tags.clear();
            }
        };
        say(
            &mut notes.from_cache,
            format!(
                "offline: {kind} tags resolved from the cache, not revalidated against their registry"
            ),
        );
        say(
            &mut notes.unreachable,
            format!("registry unreachable: {kind} tags resolved from the cache, not revalidated"),
        );
        out
    }

    /// A cached blob by digest; offline semantics: a miss is [`OciError::OfflineMiss`] naming
    /// `name@digest`.
    ///
    /// # Errors
    /// [`OciError::OfflineMiss`], [`OciError::Store`].
    pub fn cached_blob(&self, name: &str, digest: &str) -> Result<Bytes> {
        self.store
            .get_blob(digest)?
            .ok_or_else(|| OciError::OfflineMiss {
                reference: format!("{name}@{digest}"),
            })
    }

    /// Manifest bytes and digest for `reference`, from the cache when possible.
    ///
    /// # Errors
    /// [`OciError::OfflineMiss`] offline without a cached copy, registry and store errors.
    pub async fn manifest(&self, reference: &Reference) -> Result<(Bytes, String)> {
        let tag = reference.whole();
        let revalidated = reference.digest().is_none() && !self.options.offline && {
            let notes = self.tags.lock().unwrap_or_else(|e| e.into_inner());
            notes.revalidated.contains_key(&tag)
        };
        let digest = match reference.digest() {
            Some(d) => Some(d.to_owned()),
            // A tag is asked for once per fetcher (spec-note 0451); offline, the cache answers.
            None if self.options.offline || revalidated => self.store.get_tag(&tag)?,
            None => None,
        };
        if let Some(d) = &digest
            && let Some(bytes) = self.store.get_blob(d)?
        {
            tracing::debug!(reference = %reference, digest = %d, "manifest from cache");
            if reference.digest().is_none() && self.options.offline {
                let mut notes = self.tags.lock().unwrap_or_else(|e| e.into_inner());
                if !notes.from_cache.contains(&tag) {
                    notes.from_cache.push(tag);
                }
            }
            return Ok((bytes, d.clone()));
        }
        if self.options.offline {
            return Err(OciError::OfflineMiss {
                reference: reference.whole(),
            });
        }
        self.reporter
            .report(Event::Status(format!("pulling manifest {reference}")));
        let pulled = match self.registry.pull_manifest(reference).await {
            Ok(p) => p,
            Err(e) if reference.digest().is_none() && !self.options.refresh_tags => {
                // Revalidation could not reach the registry: the cached resolution, said once.
                return match self.unreachable_fallback(&tag, &e)? {
                    Some(hit) => Ok(hit),
                    None => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        self.store
            .put_blob_verified(&pulled.digest, &pulled.bytes)?;
        if reference.digest().is_none() {
            self.store.put_tag(&tag, &pulled.digest)?;
            let mut notes = self.tags.lock().unwrap_or_else(|e| e.into_inner());
            notes.revalidated.insert(tag, pulled.digest.clone());
        }
        Ok((pulled.bytes, pulled.digest))
    }

    /// [`Self::manifest`], parsed as an image manifest (an index is not an artifact).
    ///
    /// # Errors
    /// As [`Self::manifest`], plus [`OciError::InvalidManifest`].
    pub async fn image_manifest(&self, reference: &Reference) -> Result<ArtifactManifest> {
        let (bytes, digest) = self.manifest(reference).await?;
        let invalid = |reason: String| OciError::InvalidManifest {
            reference: reference.whole(),
            reason,
        };
        match serde_json::from_slice::<OciManifest>(&bytes) {
            Ok(OciManifest::Image(manifest)) => Ok(ArtifactManifest {
                manifest,
                digest,
                bytes,
            }),
            Ok(OciManifest::ImageIndex(_)) => Err(invalid("the manifest is an image index".into())),
            Err(e) => Err(invalid(format!("invalid manifest: {e}"))),
        }
    }

    /// The cached manifest of `tag` when `error` says the registry could not be reached
    /// (connection refused, DNS, timeout); `None` for any other error (a registry that
    /// answers, e.g. `404` for a deleted tag, is believed) or without a cached resolution.
    fn unreachable_fallback(&self, tag: &str, error: &OciError) -> Result<Option<(Bytes, String)>> {
        let unreachable = matches!(error, OciError::Registry { source, .. }
            if matches!(source.as_ref(),
                oci_client::errors::OciDistributionError::RequestError(r)
                    if r.is_connect() || r.is_timeout()));
        if !unreachable {
            return Ok(None);
        }
        let Some(d) = self.store.get_tag(tag)? else {
            return Ok(None);
        };
        let Some(bytes) = self.store.get_blob(&d)? else {
            return Ok(None);
        };
        let mut notes = self.tags.lock().unwrap_or_else(|e| e.into_inner());
        if !notes.unreachable.iter().any(|t| t == tag) {
            notes.unreachable.push(tag.to_owned());
        }
        notes.revalidated.insert(tag.to_owned(), d.clone());
        Ok(Some((bytes, d)))
    }

    /// A blob of `reference`'s repository, from the cache when possible.
    ///
    /// # Errors
    /// [`OciError::OfflineMiss`] offline without a cached copy, registry and store errors
    /// (the blob is verified against its digest).
    pub async fn blob(&self, reference: &Reference, descriptor: &OciDescriptor) -> Result<Bytes> {
        if let Some(b) = self.store.get_blob(&descriptor.digest)? {
            return Ok(b);
        }
        if self.options.offline {
            return Err(OciError::OfflineMiss {
                reference: format!("{}@{}", reference.whole(), descriptor.digest),
            });
        }
        self.reporter.report(Event::Status(format!(
            "pulling {} of {reference}",
            descriptor.digest
        )));
        let data = self.registry.pull_blob(reference, descriptor).await?;
        self.store.put_blob_verified(&descriptor.digest, &data)?;
        Ok(data)
    }
}
// ---------------------------------------------------------------------------------------------
// Publishing: the pieces Features and Templates share (`features publish`, `templates publish`).

/// OCI image manifest media type.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config blob pushed with every Dev Container artifact (`{}`, as the reference CLI does).
pub const EMPTY_CONFIG: &[u8] = b"{}";
/// Layer annotation naming the archive's file.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// Parses `X.Y.Z` (plain numbers only; spec-distilled §5.3, cli#557).
pub fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let mut it = v.split('.');
    let (a, b, c) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    let num = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    Some((num(a)?, num(b)?, num(c)?))
}

/// The tags to push for `version` given the tags already `published`, in the order `X`,
/// `X.Y`, `X.Y.Z`, `latest`; `None` when `X.Y.Z` itself is already published.
///
/// `X.Y.Z` is always pushed; `X` only when the version is above every published `X.*.*`;
/// `X.Y` only when above every published `X.Y.*`; `latest` only when above every published
/// version (checklist 59).
pub fn tags_to_publish(version: (u64, u64, u64), published: &[String]) -> Option<Vec<String>> {
    let (x, y, z) = version;
    let full = format!("{x}.{y}.{z}");
    if published.contains(&full) {
        return None;
    }
    let versions: Vec<_> = published.iter().filter_map(|t| parse_version(t)).collect();
    let above = |pred: &dyn Fn(&(u64, u64, u64)) -> bool| {
        versions.iter().filter(|v| pred(v)).all(|v| *v < version)
    };
    let mut tags = Vec::new();
    if above(&|v| v.0 == x) {
        tags.push(x.to_string());
    }
    if above(&|v| v.0 == x && v.1 == y) {
        tags.push(format!("{x}.{y}"));
    }
    tags.push(full);
    if above(&|_| true) {
        tags.push("latest".into());
    }
    Some(tags)
}

/// The manifest bytes of an artifact with the `{}` config of media type
/// `application/vnd.devcontainers` and one layer.
pub fn artifact_manifest(
    layer_media_type: &str,
    layer_digest: &str,
    layer_size: usize,
    title: &str,
    annotations: &indexmap::IndexMap<String, String>,
) -> Bytes {
    let mut manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": DEVCONTAINERS_CONFIG_MEDIA_TYPE,
            "digest": crate::oci::digest::sha256_digest(EMPTY_CONFIG),
            "size": EMPTY_CONFIG.len(),
        },
        "layers": [{
            "mediaType": layer_media_type,
            "digest": layer_digest,
            "size": layer_size,
            "annotations": {TITLE_ANNOTATION: title},
        }],
    });
    if !annotations.is_empty() {
        manifest["annotations"] = serde_json::json!(annotations);
    }
    Bytes::from(serde_json::to_vec(&manifest).unwrap_or_default())
}

/// Pushes one artifact (the `{}` config, the layer, the manifest) to `repository` under each
/// of `tags`. Returns the manifest digest.
///
/// # Errors
/// An invalid repository name, registry errors.
pub async fn push_artifact(
    registry: &Registry,
    repository: &str,
    layer: Bytes,
    manifest: Bytes,
    tags: &[String],
) -> Result<String> {
    let base = crate::oci::registry::parse_reference(&format!("{repository}:latest"))?;
    registry
        .push_blob(&base, Bytes::from_static(EMPTY_CONFIG))
        .await?;
    registry.push_blob(&base, layer).await?;
    let mut digest = crate::oci::digest::sha256_digest(&manifest);
    for tag in tags {
        let reference = crate::oci::registry::parse_reference(&format!("{repository}:{tag}"))?;
        digest = registry
            .push_manifest(&reference, manifest.clone(), OCI_MANIFEST_MEDIA_TYPE)
            .await?;
    }
    Ok(digest)
}

/// As [`tar_folder`], with every name `./`-prefixed, the folder itself as `./` first and the
/// entries breadth first, the way the reference CLI packs a Template (its `templates apply` lists the names as packed:
/// `./.devcontainer/devcontainer.json`). Regular files and folders only: anything else is an
/// `InvalidInput` error naming it (a Template is applied without links).
///
/// # Errors
/// Reading the folder; a link or special file.
pub fn tar_folder_dotted(
    dir: &std::path::Path,
    replaced: &[(&std::path::Path, &[u8])],
) -> std::io::Result<Vec<u8>> {
    use std::path::PathBuf;
    // breadth first, each folder's entries sorted by name: the reference's order
    let mut entries = vec![PathBuf::new()];
    let mut queue = std::collections::VecDeque::from([PathBuf::new()]);
    while let Some(rel) = queue.pop_front() {
        let mut children: Vec<PathBuf> = std::fs::read_dir(dir.join(&rel))?
            .map(|e| e.map(|e| rel.join(e.file_name())))
            .collect::<std::io::Result<_>>()?;
        children.sort();
        for child in children {
            let meta = std::fs::symlink_metadata(dir.join(&child))?;
            if meta.is_dir() {
                queue.push_back(child.clone());
            } else if !meta.is_file() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("`{}` is a link or not a regular file", child.display()),
                ));
            }
            entries.push(child);
        }
    }
    let mut builder = tar::Builder::new(Vec::new());
    for rel in entries {
        let full = dir.join(&rel);
        let meta = std::fs::symlink_metadata(&full)?;
        let mut header = tar::Header::new_gnu();
        header.set_metadata_in_mode(&meta, tar::HeaderMode::Deterministic);
        let mut name = format!("./{}", rel.display());
        if meta.is_dir() {
            if !rel.as_os_str().is_empty() {
                name.push('/');
            }
            append_named(&mut builder, header, &name, std::io::empty())?;
        } else if let Some((_, bytes)) = replaced.iter().find(|(p, _)| *p == rel.as_path()) {
            header.set_size(bytes.len() as u64);
            append_named(&mut builder, header, &name, *bytes)?;
        } else {
            append_named(&mut builder, header, &name, std::fs::File::open(&full)?)?;
        }
    }
    builder.into_inner()
}

/// Appends an entry under `name` exactly as given (the `tar` crate's own path setters drop a
/// leading `./`), with a GNU long-name entry first when it does not fit the header.
fn append_named(
    builder: &mut tar::Builder<Vec<u8>>,
    mut header: tar::Header,
    name: &str,
    data: impl std::io::Read,
) -> std::io::Result<()> {
    let bytes = name.as_bytes();
    let field_len = header.as_old().name.len();
    if bytes.len() > field_len {
        let mut long = tar::Header::new_gnu();
        long.set_entry_type(tar::EntryType::GNULongName);
        long.set_size(bytes.len() as u64 + 1);
        long.set_mode(0o644);
        let marker = b"././@LongLink";
        long.as_old_mut().name[..marker.len()].copy_from_slice(marker);
        long.set_cksum();
        let mut data = bytes.to_vec();
        data.push(0);
        builder.append(&long, data.as_slice())?;
    }
    let field = &mut header.as_old_mut().name;
    field.fill(0);
    let n = bytes.len().min(field_len);
    field[..n].copy_from_slice(&bytes[..n]);
    header.set_cksum();
    builder.append(&header, data)
}

/// A reproducible plain tar of `dir`: entries sorted, relative to the folder (the `tar` crate
/// normalises away a `./` prefix; readers accept both), owner 0:0, mtime 0, modes kept (so
/// `install.sh` stays executable), symlinks kept as symlinks. Each `(relative path, bytes)` of
/// `replaced` is packed with those bytes instead of the file's (a Template's completed
/// metadata file).
///
/// # Errors
/// Reading the folder.
pub fn tar_folder(
    dir: &std::path::Path,
    replaced: &[(&std::path::Path, &[u8])],
) -> std::io::Result<Vec<u8>> {
    use std::path::PathBuf;
    let mut builder = tar::Builder::new(Vec::new());
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    let mut stack = vec![PathBuf::new()];
    let mut entries = Vec::new();
    while let Some(rel) = stack.pop() {
        let mut children: Vec<_> = std::fs::read_dir(dir.join(&rel))?
            .map(|e| e.map(|e| rel.join(e.file_name())))
            .collect::<std::io::Result<_>>()?;
        children.sort();
        for c in children.into_iter().rev() {
            let meta = std::fs::symlink_metadata(dir.join(&c))?;
            if meta.is_dir() {
                stack.push(c.clone());
            }
            entries.push(c);
        }
    }
    entries.sort();
    for rel in entries {
        match replaced.iter().find(|(path, _)| *path == rel.as_path()) {
            Some((_, bytes)) => {
                let mut header = tar::Header::new_gnu();
                header.set_size(bytes.len() as u64);
                header.set_mode(0o644);
                header.set_mtime(0);
                header.set_uid(0);
                header.set_gid(0);
                header.set_entry_type(tar::EntryType::Regular);
                builder.append_data(&mut header, &rel, *bytes)?;
            }
            None => builder.append_path_with_name(dir.join(&rel), &rel)?,
        }
    }
    builder.into_inner()
}
