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
