//! Materialise a Feature into a fresh directory, from any of the spec's three sources
//! (spec-distilled §4.3, §5.2, §5.5): an OCI artifact (through [`crate::oci::store`] and
//! [`crate::oci::registry`]), a direct `https://…/devcontainer-feature-<id>.tgz` tarball, or a
//! local folder.
//!
//! [`Fetcher::resolve`] reads a Feature's `devcontainer-feature.json` with as little I/O as
//! possible (for OCI, from the manifest annotation `dev.containers.metadata` when present,
//! checklist 54/55) and pins it (manifest digest / tarball sha256); [`Fetcher::fetch`] then
//! writes its files. OCI manifests and blobs go through the generic
//! [`crate::oci::artifact::ArtifactFetcher`] (cache, tag revalidation, `offline`, the
//! unreachable-registry fallback), which Templates share; tarballs are cached by URL here.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use indexmap::IndexMap;
use oci_client::Reference;
use oci_client::manifest::OciDescriptor;

use crate::oci::artifact::{ArtifactFetcher, ArtifactOptions};
use crate::oci::digest::sha256_digest;
use crate::oci::extract::{ExtractError, ExtractOptions};
use crate::oci::registry::{Registry, RegistryOptions, parse_reference};
use crate::oci::store::Store;
use crate::oci::{OciError, http};
use crate::progress::{Event, Reporter};

use super::FeatureMetadata;
use super::error::FeatureError;
use super::local::LocalFeatureRoot;
use super::lockfile::Lockfile;
use super::order::{self, InstallPlan};
use super::reference::{FeatureRef, OciVersion};

/// Config media type of a Feature artifact (spec-distilled §5.2, Appendix A).
pub const FEATURE_CONFIG_MEDIA_TYPE: &str = crate::oci::artifact::DEVCONTAINERS_CONFIG_MEDIA_TYPE;
/// Layer media type of a Feature artifact.
pub const FEATURE_LAYER_MEDIA_TYPE: &str = crate::oci::artifact::DEVCONTAINERS_LAYER_MEDIA_TYPE;
/// Manifest annotation holding the Feature's `devcontainer-feature.json` as a JSON string.
pub const METADATA_ANNOTATION: &str = crate::oci::artifact::METADATA_ANNOTATION;
/// Layer annotation with the file name of the layer.
pub const TITLE_ANNOTATION: &str = crate::oci::artifact::TITLE_ANNOTATION;
/// A Feature's metadata file.
pub const FEATURE_FILE: &str = "devcontainer-feature.json";
/// Upper bound on `devcontainer-feature.json`, in bytes.
const MAX_METADATA_BYTES: u64 = 4 * 1024 * 1024;

/// Where a Feature comes from. Built from the features reference parser's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeatureSource {
    /// An OCI artifact: `registry/namespace/id[:tag|@sha256:…]` (lowercased).
    Oci(String),
    /// A direct tarball URL (`https://…/devcontainer-feature-<id>.tgz`).
    Tarball(String),
    /// A local Feature folder (already resolved and validated by the reference parser).
    Local(PathBuf),
}

impl FeatureSource {
    /// The source of a parsed reference. Local references are resolved against
    /// `config_dir` (the folder of the active devcontainer.json) and must stay inside
    /// `devcontainer_dir` (see [`FeatureRef::local_dir`]).
    ///
    /// # Errors
    /// [`FeatureError::InvalidReference`] for a local path escaping `.devcontainer/`.
    pub fn from_ref(
        reference: &FeatureRef,
        config_dir: &Path,
        devcontainer_dir: &Path,
    ) -> Result<FeatureSource, FeatureError> {
        Ok(match reference {
            FeatureRef::Oci {
                registry,
                repository,
                version,
                ..
            } => FeatureSource::Oci(match version {
                OciVersion::Tag(t) => format!("{registry}/{repository}:{t}"),
                OciVersion::Digest(d) => format!("{registry}/{repository}@{d}"),
            }),
            FeatureRef::Tarball { url, .. } => FeatureSource::Tarball(url.clone()),
            FeatureRef::Local { .. } => {
                FeatureSource::Local(reference.local_dir(config_dir, devcontainer_dir)?)
            }
        })
    }
}

impl FeatureSource {
    /// The host this source is fetched from, lowercased with its port: an OCI reference's
    /// registry (its first component), a tarball URL's host (without credentials); `None` for
    /// a local folder.
    pub fn host(&self) -> Option<String> {
        match self {
            FeatureSource::Oci(reference) => {
                reference.split('/').next().map(|h| h.to_ascii_lowercase())
            }
            FeatureSource::Tarball(url) => Some(url_host(url)),
            FeatureSource::Local(_) => None,
        }
    }
}

/// The host of a URL (`scheme://[user@]host[:port]/…`), lowercased with its port (none when
/// it is the scheme's default), read as the HTTP client that fetches it reads it (WHATWG URL
/// rules): `https://evil.example\@registry.example/x.tgz` is fetched from `evil.example`, so that is its
/// host. A URL the client cannot parse (it cannot be fetched either) is read by hand.
pub fn url_host(url: &str) -> String {
    if let Ok(parsed) = reqwest::Url::parse(url)
        && let Some(host) = parsed.host_str()
    {
        let host = host.to_ascii_lowercase();
        return match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        };
    }
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.to_ascii_lowercase()
}

pub use super::error::registry_grant_hint;

impl std::fmt::Display for FeatureSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeatureSource::Oci(r) | FeatureSource::Tarball(r) => f.write_str(r),
            FeatureSource::Local(p) => write!(f, "{}", p.display()),
        }
    }
}

impl crate::diagnostics::Hint for FetchError {
    /// A failed registry request's hint ([`crate::oci::registry::registry_hint`]).
    fn hint(&self) -> Option<String> {
        match self {
            FetchError::Oci { source, .. } => crate::oci::registry::registry_hint(source),
            FetchError::RegistryNotJudged(u) => Some(registry_grant_hint(&u.host)),
            _ => None,
        }
    }
}

/// An error resolving or fetching a Feature. Messages name the Feature reference.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Registry, cache, credential or download failure.
    #[error("cannot fetch Feature `{feature}`")]
    Oci {
        /// The Feature reference.
        feature: String,
        /// The cause.
        #[source]
        source: OciError,
    },
    /// The Feature's registry host is not among the hosts the caller's registry judgement
    /// cleared ([`FetchOptions::allowed_hosts`]): nothing was fetched.
    #[error("cannot fetch Feature `{}`", .0.feature)]
    RegistryNotJudged(#[source] super::error::UnjudgedRegistry),
    /// The artifact is not a Feature (media types, layers, metadata).
    #[error("`{feature}` is not a Feature artifact: {reason}")]
    NotAFeature {
        /// The Feature reference.
        feature: String,
        /// What is wrong.
        reason: String,
    },
    /// A digest pin (lockfile `integrity`) does not match what the source serves.
    #[error(
        "Feature `{feature}` does not match its pinned digest: expected `{expected}`, got `{actual}`"
    )]
    PinMismatch {
        /// The Feature reference.
        feature: String,
        /// The pinned digest.
        expected: String,
        /// The digest found.
        actual: String,
    },
    /// The Feature's files could not be read, extracted or written.
    #[error("cannot materialise Feature `{feature}` at `{path}`")]
    Io {
        /// The Feature reference.
        feature: String,
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The Feature archive is unsafe or unreadable (see [`ExtractError`]).
    #[error("cannot extract Feature `{feature}`")]
    Extract {
        /// The Feature reference.
        feature: String,
        /// The cause.
        #[source]
        source: ExtractError,
    },
    /// `devcontainer-feature.json` is missing or not a JSON object.
    #[error("invalid `devcontainer-feature.json` in Feature `{feature}`: {reason}")]
    Metadata {
        /// The Feature reference.
        feature: String,
        /// What is wrong.
        reason: String,
    },
}

/// Result alias of this module.
pub type Result<T, E = FetchError> = std::result::Result<T, E>;

/// How Features are fetched. The CLI fills it from flags and the user settings file.
#[derive(Debug, Clone, Default)]
pub struct FetchOptions {
    /// Cache root (`--cache-dir`); default `$XDG_CACHE_HOME/devcell`.
    pub cache_dir: Option<PathBuf>,
    /// Use only the cache; a miss is an error naming the reference (`--offline`).
    pub offline: bool,
    /// Ignore cached tag → digest resolutions (still use cached blobs). Tags are revalidated
    /// once per fetcher anyway (spec-note 0451); this only forbids the fallback to the cached
    /// resolution when the registry cannot be reached.
    pub refresh_tags: bool,
    /// Registry access: mirrors, insecure registries, CA certificates, Docker config.
    pub registry: RegistryOptions,
    /// The registry hosts (lowercased, with their port) a Feature may be fetched from, when
    /// the caller's registry judgement bounds them (a closed network under `hardened`, attack
    /// K12; attack 23, N14); `None`: any host. A Feature on another host (a `dependsOn` the
    /// judgement did not see) is refused before anything is sent or read from the cache
    /// ([`FetchError::RegistryNotJudged`]).
    pub allowed_hosts: Option<std::collections::BTreeSet<String>>,
}

/// What an operation's flags choose about fetching Features; registry access is not among
/// them: it comes from the user's settings ([`Fetcher::for_operation`]).
#[derive(Debug, Clone, Default)]
pub struct FetchFlags {
    /// `--cache-dir`; default `$XDG_CACHE_HOME/devcell`.
    pub cache_dir: Option<PathBuf>,
    /// `--offline`: only the cache.
    pub offline: bool,
    /// Ignore cached tag → digest resolutions when the registry cannot be reached
    /// ([`FetchOptions::refresh_tags`]).
    pub refresh_tags: bool,
    /// The registry hosts Features may come from ([`FetchOptions::allowed_hosts`]).
    pub allowed_hosts: Option<std::collections::BTreeSet<String>>,
}

/// A resolved Feature: its metadata and what pins it.
#[derive(Debug, Clone)]
pub struct ResolvedFeature {
    /// Where it came from.
    pub source: FeatureSource,
    /// The `devcontainer-feature.json` object.
    pub metadata: serde_json::Value,
    /// Lockfile `resolved`: `registry/repository@sha256:<manifest digest>` (OCI) or the URL
    /// (tarball); `None` for local Features.
    pub resolved: Option<String>,
    /// Lockfile `integrity`: the manifest digest (OCI) or the tarball's sha256 (tarball);
    /// `None` for local Features.
    pub integrity: Option<String>,
    content: Content,
}

#[derive(Debug, Clone)]
enum Content {
    Oci {
        reference: Box<Reference>,
        layer: Box<OciDescriptor>,
    },
    Tarball {
        digest: String,
    },
    Local(PathBuf),
}

impl ResolvedFeature {
    /// The Feature `id` from its metadata, if any.
    pub fn id(&self) -> Option<&str> {
        self.metadata.get("id").and_then(|v| v.as_str())
    }
    /// The Feature `version` from its metadata, if any.
    pub fn version(&self) -> Option<&str> {
        self.metadata.get("version").and_then(|v| v.as_str())
    }

    /// The Feature with its legacy top-level `extensions`/`settings` moved into
    /// `customizations.vscode`, as the reference CLI resolves every Feature: its
    /// `featuresConfiguration`, merged configuration and image label show them there
    /// (spec-note 0006).
    fn with_legacy_vscode_moved(mut self) -> Self {
        if let serde_json::Value::Object(map) = &mut self.metadata {
            crate::config::model::migrate_feature_legacy(map);
        }
        self
    }

    /// The metadata as the typed model.
    ///
    /// # Errors
    /// [`FeatureError::InvalidMetadata`] naming the source.
    pub fn feature_metadata(&self) -> Result<FeatureMetadata, FeatureError> {
        let text = serde_json::to_string(&self.metadata).unwrap_or_default();
        let file = match &self.source {
            FeatureSource::Local(p) => p.join(FEATURE_FILE),
            other => PathBuf::from(format!("{other} ({FEATURE_FILE})")),
        };
        FeatureMetadata::parse(&text, &file)
    }
}

/// Resolves and fetches Features through one cache and one registry client.
pub struct Fetcher {
    artifacts: ArtifactFetcher,
    options: FetchOptions,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("artifacts", &self.artifacts)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// Opens the cache and builds the registry client.
    ///
    /// # Errors
    /// [`FetchError::Oci`] (feature `*`) when the cache cannot be created or the Docker config
    /// or CA certificates cannot be read.
    pub fn new(options: FetchOptions) -> Result<Fetcher> {
        let wrap = |source| FetchError::Oci {
            feature: "*".into(),
            source,
        };
        let artifacts = ArtifactFetcher::new(ArtifactOptions {
            cache_dir: options.cache_dir.clone(),
            offline: options.offline,
            refresh_tags: options.refresh_tags,
            registry: options.registry.clone(),
        })
        .map_err(wrap)?;
        Ok(Fetcher { artifacts, options })
    }

    /// The fetcher of an operation (`up`, `outdated`, `upgrade`, `features
    /// resolve-dependencies`, ...): its `flags`, and registry access (mirrors, insecure
    /// registries, CA certificates) from the user's `[registries]` settings. Every operation
    /// builds its fetcher here, so none reaches a registry the user has mirrored.
    ///
    /// # Errors
    /// As [`Fetcher::new`].
    pub fn for_operation(
        registries: &crate::settings::RegistrySettings,
        flags: FetchFlags,
    ) -> Result<Fetcher> {
        Fetcher::new(FetchOptions {
            cache_dir: flags.cache_dir,
            offline: flags.offline,
            refresh_tags: flags.refresh_tags,
            registry: RegistryOptions::from_settings(registries),
            allowed_hosts: flags.allowed_hosts,
        })
    }

    /// The findings about tags since the last call, as at most two warnings: tags served from
    /// the cache because of `--offline` (not revalidated against their registry), and tags
    /// served from the cache because their registry could not be reached.
    pub fn take_warnings(&self) -> Vec<crate::diagnostics::Warning> {
        self.artifacts.take_tag_warnings("Feature")
    }

    /// Sends progress events (`pulling …`) to `reporter`.
    pub fn with_reporter(mut self, reporter: Arc<dyn Reporter>) -> Fetcher {
        self.artifacts = self.artifacts.with_reporter(reporter);
        self
    }

    /// The cache in use.
    pub fn store(&self) -> &Store {
        self.artifacts.store()
    }

    /// The registry client in use.
    pub fn registry(&self) -> &Registry {
        self.artifacts.registry()
    }

    /// The generic artifact fetcher underneath (Templates and `features info` share it).
    pub fn artifacts(&self) -> &ArtifactFetcher {
        &self.artifacts
    }

    /// Resolves `source`: reads its metadata and computes its pin. OCI metadata comes from
    /// the `dev.containers.metadata` annotation without downloading the layer when present.
    ///
    /// # Errors
    /// [`FetchError::Oci`] (network, digest, offline miss), [`FetchError::NotAFeature`],
    /// [`FetchError::Metadata`], [`FetchError::Io`].
    pub async fn resolve(&self, source: &FeatureSource) -> Result<ResolvedFeature> {
        self.check_host(source)?;
        match source {
            FeatureSource::Oci(r) => self.resolve_oci(source, r, None).await,
            FeatureSource::Tarball(url) => self.resolve_tarball(source, url, None).await,
            FeatureSource::Local(path) => resolve_local(source, path),
        }
        .map(ResolvedFeature::with_legacy_vscode_moved)
    }

    /// As [`Self::resolve`], but the Feature must match `integrity` (a lockfile pin: the OCI
    /// manifest digest or the tarball sha256). OCI Features are then fetched by that digest.
    ///
    /// # Errors
    /// As [`Self::resolve`], plus [`FetchError::PinMismatch`].
    pub async fn resolve_pinned(
        &self,
        source: &FeatureSource,
        integrity: &str,
    ) -> Result<ResolvedFeature> {
        self.check_host(source)?;
        match source {
            FeatureSource::Oci(r) => self.resolve_oci(source, r, Some(integrity)).await,
            FeatureSource::Tarball(url) => self.resolve_tarball(source, url, Some(integrity)).await,
            FeatureSource::Local(path) => resolve_local(source, path),
        }
        .map(ResolvedFeature::with_legacy_vscode_moved)
    }

    /// Writes the Feature's files into `dest`, which must not exist yet: they are extracted
    /// into a temporary sibling directory, then renamed to `dest`.
    ///
    /// # Errors
    /// [`FetchError::Oci`], [`FetchError::Extract`] (unsafe archive, or `dest` exists),
    /// [`FetchError::Io`].
    pub async fn fetch(&self, feature: &ResolvedFeature, dest: &Path) -> Result<()> {
        let name = feature.source.to_string();
        let io = |path: &Path| {
            let path = path.to_owned();
            let name = name.clone();
            move |source| FetchError::Io {
                feature: name,
                path,
                source,
            }
        };
        let parent = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        let staging = tempfile::Builder::new()
            .prefix(".devcell-feature-")
            .tempdir_in(parent)
            .map_err(io(parent))?;
        match &feature.content {
            Content::Oci { reference, layer } => {
                drop(staging);
                let data = self.blob(&name, reference, layer).await?;
                return extract_into(&name, &data, dest);
            }
            Content::Tarball { digest } => {
                drop(staging);
                let data = self.cached_blob(&name, digest)?;
                return extract_into(&name, &data, dest);
            }
            // through descriptors, never a path again: a running container of the workspace
            // may swap a folder of it for a link to a host folder meanwhile (attack 28, F2)
            Content::Local(src) => {
                super::nofollow_copy::copy_tree(src, staging.path(), &LOCAL_COPY)
                    .map_err(|e| io(&e.path)(e.source))?
            }
        }
        let staged = staging.keep();
        std::fs::rename(&staged, dest).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            io(dest)(e)
        })?;
        Ok(())
    }

    /// [`Self::resolve`] then [`Self::fetch`].
    ///
    /// # Errors
    /// As both.
    pub async fn resolve_and_fetch(
        &self,
        source: &FeatureSource,
        dest: &Path,
    ) -> Result<ResolvedFeature> {
        let resolved = self.resolve(source).await?;
        self.fetch(&resolved, dest).await?;
        Ok(resolved)
    }

    /// Refuses `source` when its registry host is outside [`FetchOptions::allowed_hosts`]
    /// (a local Feature has none).
    fn check_host(&self, source: &FeatureSource) -> Result<()> {
        let (Some(allowed), Some(host)) = (&self.options.allowed_hosts, source.host()) else {
            return Ok(());
        };
        if allowed.contains(&host) {
            return Ok(());
        }
        Err(FetchError::RegistryNotJudged(
            super::error::UnjudgedRegistry {
                feature: source.to_string(),
                host,
            },
        ))
    }

    fn oci_err(feature: &str) -> impl FnOnce(OciError) -> FetchError + '_ {
        move |source| FetchError::Oci {
            feature: feature.to_owned(),
            source,
        }
    }

    fn cached_blob(&self, feature: &str, digest: &str) -> Result<Bytes> {
        self.artifacts
            .cached_blob(feature, digest)
            .map_err(Self::oci_err(feature))
    }

    /// A blob of `reference`'s repository, from the cache when possible.
    async fn blob(
        &self,
        feature: &str,
        reference: &Reference,
        descriptor: &OciDescriptor,
    ) -> Result<Bytes> {
        self.artifacts
            .blob(reference, descriptor)
            .await
            .map_err(Self::oci_err(feature))
    }

    async fn resolve_oci(
        &self,
        source: &FeatureSource,
        text: &str,
        pin: Option<&str>,
    ) -> Result<ResolvedFeature> {
        let feature = text;
        let mut reference = parse_reference(text).map_err(Self::oci_err(feature))?;
        if let Some(pin) = pin {
            if let Some(d) = reference.digest()
                && d != pin
            {
                return Err(FetchError::PinMismatch {
                    feature: feature.to_owned(),
                    expected: pin.to_owned(),
                    actual: d.to_owned(),
                });
            }
            crate::oci::digest::parse_sha256(pin).map_err(Self::oci_err(feature))?;
            reference = reference.clone_with_digest(pin.to_owned());
        }
        let not_feature = |reason: String| FetchError::NotAFeature {
            feature: feature.to_owned(),
            reason,
        };
        let artifact = match self.artifacts.image_manifest(&reference).await {
            Ok(a) => a,
            Err(OciError::InvalidManifest { reason, .. }) => return Err(not_feature(reason)),
            Err(e) => return Err(Self::oci_err(feature)(e)),
        };
        let layer = artifact.devcontainers_layer().map_err(not_feature)?.clone();
        let digest = artifact.digest.clone();
        let metadata = match artifact.metadata_annotation() {
            Some(m) => m,
            None => {
                let data = self.blob(feature, &reference, &layer).await?;
                read_metadata(feature, &data)?
            }
        };
        let repo = format!("{}/{}", reference.registry(), reference.repository());
        Ok(ResolvedFeature {
            source: source.clone(),
            metadata,
            resolved: Some(format!("{repo}@{digest}")),
            integrity: Some(digest),
            content: Content::Oci {
                reference: Box::new(reference),
                layer: Box::new(layer),
            },
        })
    }

    async fn resolve_tarball(
        &self,
        source: &FeatureSource,
        url: &str,
        pin: Option<&str>,
    ) -> Result<ResolvedFeature> {
        let err = Self::oci_err(url);
        let cached = match pin {
            Some(p) => Some(p.to_owned()),
            None => self.store().get_url(url).map_err(err)?,
        };
        let cached = match cached {
            Some(d) => self
                .store()
                .get_blob(&d)
                .map_err(Self::oci_err(url))?
                .map(|b| (b, d)),
            None => None,
        };
        let (data, digest) = match cached {
            Some(hit) => hit,
            None => {
                if self.options.offline {
                    return Err(FetchError::Oci {
                        feature: url.to_owned(),
                        source: OciError::OfflineMiss {
                            reference: url.to_owned(),
                        },
                    });
                }
                self.artifacts
                    .reporter()
                    .report(Event::Status(format!("downloading {url}")));
                let data = http::download(url, &self.options.registry.extra_ca_certificates)
                    .await
                    .map_err(Self::oci_err(url))?;
                let digest = sha256_digest(&data);
                if let Some(p) = pin
                    && p != digest
                {
                    return Err(FetchError::PinMismatch {
                        feature: url.to_owned(),
                        expected: p.to_owned(),
                        actual: digest,
                    });
                }
                self.store().put_blob(&data).map_err(Self::oci_err(url))?;
                self.store()
                    .put_url(url, &digest)
                    .map_err(Self::oci_err(url))?;
                (data, digest)
            }
        };
        let metadata = read_metadata(url, &data)?;
        Ok(ResolvedFeature {
            source: source.clone(),
            metadata,
            resolved: Some(url.to_owned()),
            integrity: Some(digest.clone()),
            content: Content::Tarball { digest },
        })
    }
}

/// Inputs of [`Fetcher::plan`]: one configuration's Features.
#[derive(Debug, Clone, Copy)]
pub struct PlanRequest<'a> {
    /// devcontainer.json `features` (key → value, in file order).
    pub features: &'a IndexMap<String, serde_json::Value>,
    /// `overrideFeatureInstallOrder`.
    pub override_order: &'a [String],
    /// The folder of the active devcontainer.json (local references are relative to it).
    pub config_dir: &'a Path,
    /// `<workspace>/.devcontainer` (local Features must stay inside it).
    pub devcontainer_dir: &'a Path,
    /// The lockfile to honour (`None`: resolve tags freshly) and its path, for errors.
    pub lockfile: Option<(&'a Lockfile, &'a Path)>,
}

/// The result of [`Fetcher::plan`].
#[derive(Debug, Clone)]
pub struct Plan {
    /// Features in install order (see [`order::order`]).
    pub install: InstallPlan,
    /// What each reference resolved to (for [`Fetcher::fetch`] and the lockfile).
    pub resolved: HashMap<FeatureRef, ResolvedFeature>,
}

impl Plan {
    /// The lockfile for this plan ([`Lockfile::from_plan`]); write it with
    /// [`super::lockfile::write`].
    pub fn lockfile(&self) -> Lockfile {
        Lockfile::from_plan(&self.install)
    }
}

impl Fetcher {
    /// Resolves every Feature of a configuration, `dependsOn` included, and orders them with
    /// the spec's algorithm ([`order::order`]). Each distinct reference is resolved once
    /// (metadata only: OCI layers are not downloaded when the manifest carries
    /// `dev.containers.metadata`). With a lockfile, locked references are fetched by their
    /// locked digest and anything else is an error (checklist 60).
    ///
    /// # Errors
    /// [`FeatureError::Resolve`] wrapping [`FetchError`] (network, offline miss, not a
    /// Feature), [`FeatureError::Lockfile`] on a pin mismatch, and every error of
    /// [`order::order`] (invalid references/options, cycles).
    pub async fn plan(&self, request: &PlanRequest<'_>) -> Result<Plan, FeatureError> {
        let mut resolved: HashMap<FeatureRef, (ResolvedFeature, FeatureMetadata)> = HashMap::new();
        // `order` is synchronous and asks for metadata through a callback: run it, collect
        // the references it is missing, resolve those (async), and run it again. Each round
        // resolves at least one new reference, so this ends.
        loop {
            let mut missing: Vec<FeatureRef> = Vec::new();
            let result = order::order(
                request.features,
                request.override_order,
                &mut |reference: &FeatureRef| match resolved.get(reference) {
                    Some((r, metadata)) => Ok(order::ResolvedFeature {
                        metadata: metadata.clone(),
                        canonical: r.integrity.clone(),
                    }),
                    None => {
                        missing.push(reference.clone());
                        Err(FeatureError::Resolve {
                            feature: reference.to_string(),
                            source: "not resolved yet".into(),
                        })
                    }
                },
            );
            if missing.is_empty() {
                let mut install = result?;
                install.warnings.extend(self.take_warnings());
                return Ok(Plan {
                    install,
                    resolved: resolved.into_iter().map(|(k, (r, _))| (k, r)).collect(),
                });
            }
            for reference in missing {
                if resolved.contains_key(&reference) {
                    continue;
                }
                let r = self.resolve_ref(&reference, request).await?;
                let metadata = r.feature_metadata()?;
                resolved.insert(reference, (r, metadata));
            }
        }
    }

    async fn resolve_ref(
        &self,
        reference: &FeatureRef,
        request: &PlanRequest<'_>,
    ) -> Result<ResolvedFeature, FeatureError> {
        if reference.is_local() {
            // Same validation as everywhere else for local Features (id = folder name, …).
            LocalFeatureRoot {
                config_dir: request.config_dir.to_owned(),
                devcontainer_dir: request.devcontainer_dir.to_owned(),
            }
            .resolve(reference)?;
        }
        let source =
            FeatureSource::from_ref(reference, request.config_dir, request.devcontainer_dir)?;
        let wrap = |e: FetchError| FeatureError::Resolve {
            feature: reference.lock_key(),
            source: Box::new(e),
        };
        let locked = request
            .lockfile
            .and_then(|(l, path)| l.get(reference).map(|e| (l, path, e)));
        match locked {
            Some((lockfile, path, entry)) => {
                let mismatch = |actual: &str| FeatureError::Lockfile {
                    path: path.to_owned(),
                    message: format!(
                        "Feature `{}` is locked to `{}` but `{actual}` was fetched",
                        reference.lock_key(),
                        entry.integrity
                    ),
                };
                let r = match self.resolve_pinned(&source, &entry.integrity).await {
                    Ok(r) => r,
                    Err(FetchError::PinMismatch { actual, .. }) => return Err(mismatch(&actual)),
                    // The registry (or a mirror) answered the locked digest with other bytes.
                    Err(FetchError::Oci {
                        source:
                            OciError::DigestMismatch {
                                subject, actual, ..
                            },
                        ..
                    }) if subject.contains("manifest") => return Err(mismatch(&actual)),
                    Err(e) => {
                        return Err(FeatureError::Locked {
                            feature: reference.lock_key(),
                            integrity: entry.integrity.clone(),
                            path: path.to_owned(),
                            source: Box::new(e),
                        });
                    }
                };
                if let Some(d) = &r.integrity {
                    lockfile.verify(path, reference, d)?;
                }
                Ok(r)
            }
            None => self.resolve(&source).await.map_err(wrap),
        }
    }

    /// Materialises every Feature of `plan` under `root` as `<id>_<index>` (install order),
    /// the reference CLI's folder naming. Returns the folders.
    ///
    /// # Errors
    /// [`FeatureError::Resolve`] wrapping [`FetchError`].
    pub async fn fetch_plan(&self, plan: &Plan, root: &Path) -> Result<Vec<PathBuf>, FeatureError> {
        let mut dirs = Vec::new();
        for (i, f) in plan.install.features.iter().enumerate() {
            let wrap = |source: Box<dyn std::error::Error + Send + Sync>| FeatureError::Resolve {
                feature: f.key.clone(),
                source,
            };
            let r = plan
                .resolved
                .get(&f.reference)
                .ok_or_else(|| wrap("missing from the plan".into()))?;
            let dir = root.join(format!("{}_{i}", f.metadata.id));
            self.fetch(r, &dir).await.map_err(|e| wrap(Box::new(e)))?;
            dirs.push(dir);
        }
        Ok(dirs)
    }
}

fn resolve_local(source: &FeatureSource, path: &Path) -> Result<ResolvedFeature> {
    let feature = path.display().to_string();
    let file = path.join(FEATURE_FILE);
    let text = super::metadata::read_feature_file(path).map_err(|e| FetchError::Io {
        feature: feature.clone(),
        path: file.clone(),
        source: e,
    })?;
    let metadata = parse_metadata(&feature, text.as_bytes())?;
    Ok(ResolvedFeature {
        source: source.clone(),
        metadata,
        resolved: None,
        integrity: None,
        content: Content::Local(path.to_owned()),
    })
}

fn parse_metadata(feature: &str, bytes: &[u8]) -> Result<serde_json::Value> {
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        // JSONC (comments, trailing commas), as devcontainer.json: let the model parse it.
        Err(_) => {
            let text = String::from_utf8_lossy(bytes);
            let parsed = FeatureMetadata::parse(&text, Path::new(FEATURE_FILE)).map_err(|e| {
                FetchError::Metadata {
                    feature: feature.to_owned(),
                    reason: e.to_string(),
                }
            })?;
            serde_json::to_value(parsed).unwrap_or_default()
        }
    };
    if !value.is_object() {
        return Err(FetchError::Metadata {
            feature: feature.to_owned(),
            reason: "not a JSON object".into(),
        });
    }
    Ok(value)
}

/// Reads `devcontainer-feature.json` from a Feature archive (gzip or plain tar) in memory.
fn read_metadata(feature: &str, archive: &[u8]) -> Result<serde_json::Value> {
    let io = |source| FetchError::Io {
        feature: feature.to_owned(),
        path: PathBuf::from(FEATURE_FILE),
        source,
    };
    let reader: Box<dyn Read + '_> = if archive.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(archive))
    } else {
        Box::new(archive)
    };
    let mut tar = tar::Archive::new(reader);
    for entry in tar.entries().map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path().map_err(io)?.into_owned();
        let normal: PathBuf = path
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect();
        if normal == Path::new(FEATURE_FILE) && entry.header().entry_type().is_file() {
            let mut buf = Vec::new();
            entry
                .take(MAX_METADATA_BYTES)
                .read_to_end(&mut buf)
                .map_err(io)?;
            return parse_metadata(feature, &buf);
        }
    }
    Err(FetchError::Metadata {
        feature: feature.to_owned(),
        reason: format!("the archive has no `{FEATURE_FILE}`"),
    })
}

/// Extracts a Feature archive (tar or tar+gzip) into `dest` with [`crate::oci::extract`].
fn extract_into(feature: &str, archive: &[u8], dest: &Path) -> Result<()> {
    crate::oci::extract::extract(archive, dest, &ExtractOptions::default())
        .map(|_| ())
        .map_err(|source| FetchError::Extract {
            feature: feature.to_owned(),
            source,
        })
}

/// How a local Feature's folder is copied ([`super::nofollow_copy`]): its folder was resolved
/// and judged (`local_dir`, `host_path::confine_links`), so a link on its path now is a swap
/// and is refused; links inside stay links, as they always were (spec-notes 0066, 0680).
const LOCAL_COPY: super::nofollow_copy::CopyOptions = super::nofollow_copy::CopyOptions {
    links: super::nofollow_copy::Links::Keep,
    root: super::nofollow_copy::Root::Resolved,
    dir_mode: 0o755,
    file_mode: super::nofollow_copy::FileMode::Own,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A tarball URL's host is the one the HTTP client connects to (review of session 25: a
    /// `\` before `@` made the hand reading say `registry.example` while the client went to
    /// `evil.example`, past the registry judgement and the fetcher's host bound).
    #[test]
    fn a_urls_host_is_the_one_the_client_connects_to() {
        for (url, host) in [
            (
                "https://evil.example\\@registry.example/x/f.tgz",
                "evil.example",
            ),
            ("https://user@Example.COM:8443/f.tgz", "example.com:8443"),
            ("https://example.com:443/f.tgz", "example.com"),
            ("http://127.0.0.1:5000/f.tgz", "127.0.0.1:5000"),
        ] {
            assert_eq!(url_host(url), host, "{url}");
        }
    }

    fn tar_of(files: &[(&str, &[u8])], gzip: bool) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o755);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        let raw = b.into_inner().unwrap();
        if gzip {
            use std::io::Write;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), Default::default());
            gz.write_all(&raw).unwrap();
            gz.finish().unwrap()
        } else {
            raw
        }
    }

    #[test]
    fn metadata_is_read_from_plain_and_gzip_archives() {
        for gzip in [false, true] {
            let a = tar_of(
                &[
                    ("./install.sh", b"#!/bin/sh\n"),
                    (
                        "./devcontainer-feature.json",
                        br#"{"id":"x","version":"1.0.0"}"#,
                    ),
                ],
                gzip,
            );
            let m = read_metadata("t", &a).unwrap();
            assert_eq!(m["id"], "x");
        }
        let a = tar_of(&[("install.sh", b"")], false);
        assert!(matches!(
            read_metadata("t", &a),
            Err(FetchError::Metadata { .. })
        ));
    }

    #[tokio::test]
    async fn local_feature_is_copied_into_a_fresh_dir() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(
            src.path().join(FEATURE_FILE),
            r#"{"id":"loc", "version":"0.1.0"}"#,
        )
        .unwrap();
        std::fs::create_dir(src.path().join("lib")).unwrap();
        std::fs::write(src.path().join("lib/a.sh"), "echo a").unwrap();
        let cache = tempfile::tempdir().unwrap();
        let f = Fetcher::new(FetchOptions {
            cache_dir: Some(cache.path().to_owned()),
            offline: true,
            ..Default::default()
        })
        .unwrap();
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("loc_0");
        let r = f
            .resolve_and_fetch(&FeatureSource::Local(src.path().to_owned()), &dest)
            .await
            .unwrap();
        assert_eq!(r.id(), Some("loc"));
        assert_eq!(r.resolved, None);
        assert_eq!(
            std::fs::read_to_string(dest.join("lib/a.sh")).unwrap(),
            "echo a"
        );
        // A second fetch into the same place refuses to overwrite.
        assert!(f.fetch(&r, &dest).await.is_err());
    }

    /// Attack 28, F2: a process in the workspace's running container flips a local Feature's
    /// sub-folder between a folder and a link to a host folder while devcell copies the
    /// Feature. However the race falls, no host file is in the copy (a copy may fail instead).
    /// The listing's types with copies by path put the host file in most of these copies.
    #[tokio::test]
    async fn a_local_feature_never_copies_a_host_folder_swapped_in_while_copying() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let base = tempfile::tempdir().unwrap();
        let base_path = std::fs::canonicalize(base.path()).unwrap();
        let host = base_path.join("host");
        std::fs::create_dir(&host).unwrap();
        std::fs::write(host.join("secret.txt"), "HOST-SECRET").unwrap();
        let src = base_path.join("feat");
        std::fs::create_dir_all(src.join("aaa")).unwrap();
        for i in 0..300 {
            std::fs::write(src.join(format!("aaa/{i}")), "x").unwrap();
        }
        std::fs::create_dir(src.join("sub")).unwrap();
        std::fs::write(src.join("sub/note.txt"), "ok").unwrap();
        std::fs::write(src.join(FEATURE_FILE), r#"{"id":"feat","version":"1.0.0"}"#).unwrap();
        let f = Fetcher::new(FetchOptions {
            cache_dir: Some(base_path.join("cache")),
            offline: true,
            ..Default::default()
        })
        .unwrap();
        let resolved = f.resolve(&FeatureSource::Local(src.clone())).await.unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let (stop, src, host) = (stop.clone(), src.clone(), host.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::rename(src.join("sub"), src.join("sub.real"));
                    let _ = std::os::unix::fs::symlink(&host, src.join("sub"));
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(src.join("sub"));
                    let _ = std::fs::rename(src.join("sub.real"), src.join("sub"));
                    std::thread::yield_now();
                }
            })
        };
        let mut copied = 0;
        let mut leaked = 0;
        for i in 0..150 {
            let dest = base_path.join(format!("out/{i}"));
            if f.fetch(&resolved, &dest).await.is_err() {
                continue;
            }
            copied += 1;
            if std::fs::read_to_string(dest.join("sub/secret.txt")).is_ok()
                && !std::fs::symlink_metadata(dest.join("sub"))
                    .unwrap()
                    .file_type()
                    .is_symlink()
            {
                leaked += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        flipper.join().unwrap();
        assert_eq!(
            leaked, 0,
            "a host file was copied {leaked} times of {copied}"
        );
        assert!(copied > 0, "no copy succeeded");
    }

    /// Attack 23, N14 (defence in depth): a fetcher bounded to the judged registry hosts
    /// refuses a Feature on any other host, OCI or tarball, pinned or not, naming the host
    /// and its grant, and sends nothing (a tripwire listener on that host sees no
    /// connection); a judged host and a local Feature pass the check.
    #[tokio::test]
    async fn a_feature_on_a_host_the_judgement_did_not_clear_is_refused_unsent() {
        let tripwire = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tripwire.set_nonblocking(true).unwrap();
        let host = format!("127.0.0.1:{}", tripwire.local_addr().unwrap().port());
        let cache = tempfile::tempdir().unwrap();
        let f = Fetcher::new(FetchOptions {
            cache_dir: Some(cache.path().to_owned()),
            allowed_hosts: Some(["registry.example".to_string()].into()),
            ..Default::default()
        })
        .unwrap();
        let sources = [
            FeatureSource::Oci(format!("{host}/exfil/f:secret")),
            FeatureSource::Tarball(format!("http://u@{host}/devcontainer-feature-f.tgz")),
        ];
        for source in &sources {
            let refused = f.resolve(source).await.unwrap_err();
            assert!(
                matches!(&refused, FetchError::RegistryNotJudged(u) if u.host == host),
                "{refused:?}"
            );
            let all = format!("{refused} {}", std::error::Error::source(&refused).unwrap());
            assert!(all.contains(&host), "{all}");
            let hint = crate::diagnostics::Hint::hint(&refused).unwrap();
            assert!(hint.contains(&format!("--allow registry:{host}")), "{hint}");
            let pin = format!("sha256:{}", "0".repeat(64));
            assert!(matches!(
                f.resolve_pinned(source, &pin).await,
                Err(FetchError::RegistryNotJudged(_))
            ));
        }
        // the error a plan returns names the grant too
        let wrapped = FeatureError::Resolve {
            feature: sources[0].to_string(),
            source: Box::new(f.resolve(&sources[0]).await.unwrap_err()),
        };
        let hint = crate::diagnostics::Hint::hint(&wrapped).unwrap();
        assert!(hint.contains(&format!("--allow registry:{host}")), "{hint}");
        assert!(
            matches!(tripwire.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the fetcher connected to the host it refused"
        );
        assert_eq!(
            FeatureSource::Oci("Registry.EXAMPLE/a/b:1".into())
                .host()
                .as_deref(),
            Some("registry.example")
        );
        assert!(
            f.check_host(&FeatureSource::Oci("registry.example/a/b:1".into()))
                .is_ok()
        );
        assert!(f.check_host(&FeatureSource::Local("/x".into())).is_ok());
    }
}
