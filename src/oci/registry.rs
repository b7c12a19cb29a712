//! A thin wrapper over [`oci_client::Client`]: pull manifests (by tag or digest; indexes with
//! platform selection), pull blobs verified against their digest, list tags, push blobs,
//! manifests and tags. Adds what devcell needs on top: one client per registry host with plain
//! HTTP for loopback and user-marked insecure registries, extra CA certificates, credentials
//! from the Docker config, and registry mirrors (OCI distribution spec; spec-distilled §5.1,
//! §5.6, §5.8).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use bytes::Bytes;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::manifest::{ImageIndexEntry, OciDescriptor, OciImageManifest, OciManifest};
use oci_client::{Client, Reference};

use crate::formats::image_reference::{DEFAULT_TAG, ImageReference};

use super::auth::{Credentials, DockerConfig, default_docker_config_path};
use super::digest::{sha256_digest, verify};
use super::error::{OciError, Result};
use super::transport::{install_crypto_provider, is_loopback};

/// Media types accepted when pulling a manifest: OCI and Docker manifests and indexes.
pub const MANIFEST_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// How devcell reaches registries. The CLI fills it from flags and the user settings file.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Registries (`host[:port]`) reached over plain HTTP. Loopback registries (`localhost`,
    /// `127.0.0.1`, `[::1]`, any port) always are.
    pub insecure_registries: Vec<String>,
    /// Loopback registries (`host:port`) reached over HTTPS nonetheless (a local registry
    /// with TLS, e.g. behind a self-signed CA given in `extra_ca_certificates`).
    pub secure_registries: Vec<String>,
    /// PEM files with extra CA certificates trusted for HTTPS registries.
    pub extra_ca_certificates: Vec<PathBuf>,
    /// Registry → mirror (`ghcr.io` → `127.0.0.1:5000`): every pull from the key registry goes
    /// to the mirror, same repository path. Pushes are never mirrored.
    pub mirrors: BTreeMap<String, String>,
    /// The Docker config file with credentials (default [`default_docker_config_path`]).
    pub docker_config: Option<PathBuf>,
    /// Where credential helpers are looked up (default: `PATH`).
    pub credential_helper_dir: Option<PathBuf>,
}

impl RegistryOptions {
    /// The registry access the user's `[registries]` settings ask for: their mirrors,
    /// insecure registries and CA certificate files; the Docker config and credential helpers
    /// at their defaults.
    pub fn from_settings(settings: &crate::settings::RegistrySettings) -> RegistryOptions {
        RegistryOptions {
            insecure_registries: settings.insecure.clone(),
            extra_ca_certificates: settings.ca_certs.clone(),
            mirrors: settings.mirrors.clone(),
            ..RegistryOptions::default()
        }
    }
}

/// A target platform for image index selection (GOOS/GOARCH names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// `linux`, `windows`, …
    pub os: String,
    /// `amd64`, `arm64`, `arm`, …
    pub architecture: String,
    /// `v7`, `v8`, … (`None`: any).
    pub variant: Option<String>,
}

impl Platform {
    /// The platform of this machine (`linux/amd64` on x86-64 Linux).
    pub fn host() -> Platform {
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            "powerpc64" => "ppc64le",
            other => other,
        };
        Platform {
            os: std::env::consts::OS.to_owned(),
            architecture: architecture.to_owned(),
            variant: None,
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// Picks the index entry for `platform`: the first entry whose `os`/`architecture` match and
/// whose `variant` matches when one is asked for (`arm64` without variant ≡ `v8`). Entries
/// without `platform`, `unknown/unknown` attestation entries and unknown media types are
/// skipped (spec-distilled §5.8, checklist 62).
pub fn select_platform<'a>(
    entries: &'a [ImageIndexEntry],
    platform: &Platform,
) -> Option<&'a ImageIndexEntry> {
    entries.iter().find(|e| {
        let Some(p) = &e.platform else { return false };
        if !MANIFEST_MEDIA_TYPES.contains(&e.media_type.as_str()) {
            return false;
        }
        let os = p.os.to_string();
        let arch = p.architecture.to_string();
        if os == "unknown"
            || arch == "unknown"
            || os != platform.os
            || arch != platform.architecture
        {
            return false;
        }
        match (&platform.variant, &p.variant) {
            (None, _) => true,
            (Some(want), Some(have)) => want == have,
            (Some(want), None) => platform.architecture == "arm64" && want == "v8",
        }
    })
}

/// Largest blob devcell pulls, in bytes (512 MiB); larger descriptors are refused.
pub const MAX_BLOB_BYTES: u64 = 512 * 1024 * 1024;

/// Collects a blob in memory and fails as soon as more bytes than the descriptor's `size`
/// arrive (a registry cannot make devcell buffer an unbounded body).
struct LimitedWriter {
    buf: Vec<u8>,
    limit: u64,
}

impl tokio::io::AsyncWrite for LimitedWriter {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.buf.len() as u64 + data.len() as u64 > this.limit {
            return std::task::Poll::Ready(Err(std::io::Error::other(format!(
                "blob is larger than its descriptor's {} bytes",
                this.limit
            ))));
        }
        this.buf.extend_from_slice(data);
        std::task::Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A manifest pulled from a registry, with its verified digest and exact bytes.
#[derive(Debug, Clone)]
pub struct PulledManifest {
    /// The parsed manifest (image manifest or index).
    pub manifest: OciManifest,
    /// `sha256:<hex>` of [`Self::bytes`].
    pub digest: String,
    /// The manifest bytes exactly as served (what the digest covers).
    pub bytes: Bytes,
}

/// Parses `registry/repository[:tag][@digest]` (Docker normalization for registry-less names).
///
/// # Errors
/// [`OciError::InvalidReference`].
pub fn parse_reference(reference: &str) -> Result<Reference> {
    ImageReference::parse(reference)
        .map(ImageReference::into_reference)
        .map_err(|e| OciError::InvalidReference {
            reference: e.reference,
            source: e.source,
        })
}

/// (registry, repository, push) of a cached access token.
type AccessTokenKey = (String, String, bool);

/// A registry client shared by every pull and push of one devcell operation.
///
/// Holds one [`oci_client::Client`] per registry host (each with its own protocol and token
/// cache) and the credentials found for each host.
pub struct Registry {
    options: RegistryOptions,
    docker_config: DockerConfig,
    certificates: Vec<Certificate>,
    clients: Mutex<HashMap<String, Client>>,
    credentials: Mutex<HashMap<String, Credentials>>,
    /// Access tokens obtained with an identity token, by (registry, repository, push), with
    /// the instant they stop being used.
    access_tokens: Mutex<HashMap<AccessTokenKey, (String, std::time::Instant)>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// Builds a registry client: reads the Docker config and the extra CA certificates.
    ///
    /// # Errors
    /// [`OciError::DockerConfig`] for an unreadable config, [`OciError::Certificate`] for an
    /// unreadable CA file.
    pub fn new(options: RegistryOptions) -> Result<Registry> {
        install_crypto_provider();
        let path = options
            .docker_config
            .clone()
            .or_else(default_docker_config_path);
        let mut docker_config = match &path {
            Some(p) => DockerConfig::load(p)?,
            None => DockerConfig::default(),
        };
        if let Some(dir) = &options.credential_helper_dir {
            docker_config = docker_config.with_helper_dir(dir.clone());
        }
        let mut certificates = Vec::new();
        for p in &options.extra_ca_certificates {
            let data = std::fs::read(p).map_err(|e| OciError::Certificate {
                path: p.clone(),
                source: Box::new(e),
            })?;
            certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        Ok(Registry {
            options,
            docker_config,
            certificates,
            clients: Mutex::new(HashMap::new()),
            credentials: Mutex::new(HashMap::new()),
            access_tokens: Mutex::new(HashMap::new()),
        })
    }

    /// The options this client was built with.
    pub fn options(&self) -> &RegistryOptions {
        &self.options
    }

    /// The reference actually contacted for a pull of `reference`: its registry replaced by
    /// the configured mirror, if any.
    pub fn mirrored(&self, reference: &Reference) -> Reference {
        match self.options.mirrors.get(reference.registry()) {
            Some(mirror) => match reference.digest() {
                Some(d) => Reference::with_digest(
                    mirror.clone(),
                    reference.repository().to_owned(),
                    d.to_owned(),
                ),
                None => Reference::with_tag(
                    mirror.clone(),
                    reference.repository().to_owned(),
                    reference.tag().unwrap_or(DEFAULT_TAG).to_owned(),
                ),
            },
            None => reference.clone(),
        }
    }

    /// Whether `registry` is reached over plain HTTP: loopback (unless listed secure) or
    /// listed insecure.
    fn plain_http(&self, registry: &str) -> bool {
        let listed = |list: &[String]| list.iter().any(|r| r == registry);
        (is_loopback(registry) && !listed(&self.options.secure_registries))
            || listed(&self.options.insecure_registries)
    }

    fn client_for(&self, registry: &str) -> Result<Client> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(registry) {
            return Ok(c.clone());
        }
        let plain = self.plain_http(registry);
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: self.certificates.clone(),
            platform_resolver: None,
            user_agent: concat!("devcell/", env!("CARGO_PKG_VERSION")),
            connect_timeout: Some(std::time::Duration::from_secs(30)),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|e| OciError::Client {
            source: Box::new(e),
        })?;
        clients.insert(registry.to_owned(), client.clone());
        Ok(client)
    }

    fn credentials_for(&self, registry: &str) -> Result<Credentials> {
        let mut creds = self.credentials.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = creds.get(registry) {
            return Ok(c.clone());
        }
        let c = self.docker_config.credentials_for(registry)?;
        tracing::debug!(registry, credentials = ?c, "registry credentials");
        creds.insert(registry.to_owned(), c.clone());
        Ok(c)
    }

    /// The `oci-client` credentials for `op` on `target`'s repository. An identity token is
    /// exchanged (once per repository and operation while the access token is valid) for a
    /// scoped access token, which is handed to `client` as a bearer token for that repository.
    async fn auth_for(
        &self,
        client: &Client,
        target: &Reference,
        operation: oci_client::RegistryOperation,
    ) -> Result<oci_client::secrets::RegistryAuth> {
        let creds = self.credentials_for(target.registry())?;
        let Credentials::IdentityToken(refresh_token) = &creds else {
            return Ok(creds.to_registry_auth());
        };
        let push = matches!(operation, oci_client::RegistryOperation::Push);
        let key = (
            target.registry().to_owned(),
            target.repository().to_owned(),
            push,
        );
        let now = std::time::Instant::now();
        let cached = self
            .access_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .filter(|(_, until)| *until > now)
            .map(|(token, _)| token.clone());
        let token = match cached {
            Some(token) => token,
            None => {
                // No redirects: a 307/308 would resend the refresh token to another URL.
                let http = super::http::client_builder(&self.options.extra_ca_certificates)?
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| OciError::Client {
                        source: Box::new(e),
                    })?;
                let scheme = if self.plain_http(target.registry()) {
                    "http"
                } else {
                    "https"
                };
                let base = format!("{scheme}://{}", target.registry());
                let access = super::token::exchange_refresh_token(
                    &http,
                    target.registry(),
                    &base,
                    target.repository(),
                    push,
                    refresh_token,
                )
                .await?;
                // Renewed a little before it expires.
                let until = now
                    + access
                        .expires_in
                        .saturating_sub(std::time::Duration::from_secs(5));
                self.access_tokens
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, (access.token.clone(), until));
                access.token
            }
        };
        let auth = oci_client::secrets::RegistryAuth::Bearer(token);
        // Caches the bearer token in `client` for this repository (no request is made): for
        // `op`, and a push token also for the pulls a push makes (`blob_exists`), since
        // `oci-client` would otherwise reuse the first bearer token it saw for the registry.
        let ops: &[oci_client::RegistryOperation] = if push {
            &[
                oci_client::RegistryOperation::Push,
                oci_client::RegistryOperation::Pull,
            ]
        } else {
            &[oci_client::RegistryOperation::Pull]
        };
        for op in ops {
            client
                .auth(target, &auth, *op)
                .await
                .map_err(|e| Self::registry_error("authenticate", target, e))?;
        }
        Ok(auth)
    }

    fn registry_error(
        operation: &str,
        reference: &Reference,
        e: oci_client::errors::OciDistributionError,
    ) -> OciError {
        if let oci_client::errors::OciDistributionError::DigestError(
            oci_client::errors::DigestError::VerificationError { expected, actual },
        ) = &e
        {
            return OciError::DigestMismatch {
                subject: format!("{operation} of `{reference}`"),
                expected: expected.clone(),
                actual: actual.clone(),
            };
        }
        OciError::Registry {
            operation: operation.to_owned(),
            reference: reference.whole(),
            source: Box::new(e),
        }
    }

    /// Pulls the manifest (or index) of `reference` (mirror applied) without platform
    /// selection. The digest is computed from the bytes; when `reference` names a digest the
    /// bytes must hash to it (checklist 21, 63).
    ///
    /// # Errors
    /// [`OciError::Registry`] (network, 404, 401, …), [`OciError::DigestMismatch`],
    /// [`OciError::InvalidManifest`].
    pub async fn pull_manifest(&self, reference: &Reference) -> Result<PulledManifest> {
        let target = self.mirrored(reference);
        let client = self.client_for(target.registry())?;
        let auth = self
            .auth_for(&client, &target, oci_client::RegistryOperation::Pull)
            .await?;
        let (bytes, _) = client
            .pull_manifest_raw(&target, &auth, MANIFEST_MEDIA_TYPES)
            .await
            .map_err(|e| Self::registry_error("pull manifest", &target, e))?;
        let digest = sha256_digest(&bytes);
        if let Some(want) = reference.digest() {
            verify(&format!("manifest of `{reference}`"), want, &digest)?;
        }
        let manifest: OciManifest =
            serde_json::from_slice(&bytes).map_err(|e| OciError::InvalidManifest {
                reference: reference.whole(),
                reason: e.to_string(),
            })?;
        Ok(PulledManifest {
            manifest,
            digest,
            bytes,
        })
    }

    /// Pulls the image manifest of `reference` for `platform`: an index is resolved to the
    /// entry [`select_platform`] picks, which is then pulled by digest and verified.
    ///
    /// Returns the image manifest and its digest.
    ///
    /// # Errors
    /// As [`Self::pull_manifest`], plus [`OciError::NoPlatformMatch`].
    pub async fn pull_image_manifest(
        &self,
        reference: &Reference,
        platform: &Platform,
    ) -> Result<(OciImageManifest, String)> {
        let mut current = reference.clone();
        // Nested indexes are followed, a few levels deep.
        for _ in 0..4 {
            let pulled = self.pull_manifest(&current).await?;
            match pulled.manifest {
                OciManifest::Image(m) => return Ok((m, pulled.digest)),
                OciManifest::ImageIndex(index) => {
                    let entry = select_platform(&index.manifests, platform).ok_or_else(|| {
                        OciError::NoPlatformMatch {
                            reference: reference.whole(),
                            platform: platform.to_string(),
                        }
                    })?;
                    current = current.clone_with_digest(entry.digest.clone());
                }
            }
        }
        Err(OciError::InvalidManifest {
            reference: reference.whole(),
            reason: "image indexes nested too deeply".into(),
        })
    }

    /// Pulls the blob `descriptor` of `reference`'s repository (mirror applied), checking its
    /// size and its sha256 against `descriptor.digest`.
    ///
    /// # Errors
    /// [`OciError::Registry`], [`OciError::DigestMismatch`], [`OciError::InvalidDigest`].
    pub async fn pull_blob(
        &self,
        reference: &Reference,
        descriptor: &OciDescriptor,
    ) -> Result<Bytes> {
        super::digest::parse_sha256(&descriptor.digest)?;
        let target = self.mirrored(reference);
        let client = self.client_for(target.registry())?;
        let auth = self
            .auth_for(&client, &target, oci_client::RegistryOperation::Pull)
            .await?;
        client.store_auth_if_needed(target.registry(), &auth).await;
        let limit = match u64::try_from(descriptor.size) {
            Ok(n) if n <= MAX_BLOB_BYTES => n,
            _ => {
                return Err(OciError::InvalidManifest {
                    reference: reference.whole(),
                    reason: format!(
                        "blob `{}` declares {} bytes; at most {MAX_BLOB_BYTES} are accepted",
                        descriptor.digest, descriptor.size
                    ),
                });
            }
        };
        let mut out = LimitedWriter {
            buf: Vec::with_capacity(limit.min(1 << 24) as usize),
            limit,
        };
        client
            .pull_blob(&target, descriptor, &mut out)
            .await
            .map_err(|e| {
                Self::registry_error(&format!("pull blob {}", descriptor.digest), &target, e)
            })?;
        let out = out.buf;
        let actual = sha256_digest(&out);
        verify(
            &format!("blob of `{reference}`"),
            &descriptor.digest,
            &actual,
        )?;
        if out.len() as u64 != limit {
            return Err(OciError::InvalidManifest {
                reference: reference.whole(),
                reason: format!(
                    "blob `{}` has {} bytes, descriptor says {}",
                    descriptor.digest,
                    out.len(),
                    descriptor.size
                ),
            });
        }
        Ok(Bytes::from(out))
    }

    /// Lists every tag of `reference`'s repository (mirror applied), following pagination.
    /// A repository the registry does not know has no tags.
    ///
    /// # Errors
    /// [`OciError::Registry`].
    pub async fn list_tags(&self, reference: &Reference) -> Result<Vec<String>> {
        self.list_tags_at(&self.mirrored(reference)).await
    }

    /// As [`Self::list_tags`] but never mirrored (used before pushing).
    ///
    /// # Errors
    /// [`OciError::Registry`].
    pub async fn list_tags_unmirrored(&self, reference: &Reference) -> Result<Vec<String>> {
        self.list_tags_at(reference).await
    }

    async fn list_tags_at(&self, target: &Reference) -> Result<Vec<String>> {
        const PAGE: usize = 1000;
        let client = self.client_for(target.registry())?;
        let auth = self
            .auth_for(&client, target, oci_client::RegistryOperation::Pull)
            .await?;
        let mut tags: Vec<String> = Vec::new();
        loop {
            let last = tags.last().cloned();
            let page = match client
                .list_tags(target, &auth, Some(PAGE), last.as_deref())
                .await
            {
                Ok(p) => p,
                Err(e) if is_not_found(&e) => break,
                Err(e) => return Err(Self::registry_error("list tags", target, e)),
            };
            let n = page.tags.len();
            tags.extend(page.tags);
            if n < PAGE {
                break;
            }
        }
        Ok(tags)
    }

    /// Pushes `data` as a blob into `reference`'s repository unless the registry has it.
    /// Returns its digest (`sha256:<hex>`).
    ///
    /// # Errors
    /// [`OciError::Registry`].
    pub async fn push_blob(&self, reference: &Reference, data: Bytes) -> Result<String> {
        let client = self.client_for(reference.registry())?;
        let auth = self
            .auth_for(&client, reference, oci_client::RegistryOperation::Push)
            .await?;
        let digest = sha256_digest(&data);
        client
            .auth(reference, &auth, oci_client::RegistryOperation::Push)
            .await
            .map_err(|e| Self::registry_error("authenticate for push", reference, e))?;
        let exists = client
            .blob_exists(reference, &digest)
            .await
            .map_err(|e| Self::registry_error("check blob", reference, e))?;
        if !exists {
            client
                .push_blob(reference, data, &digest)
                .await
                .map_err(|e| Self::registry_error(&format!("push blob {digest}"), reference, e))?;
        }
        Ok(digest)
    }

    /// Pushes manifest `bytes` (of `media_type`) to `reference` (its tag, or its digest).
    /// Returns the manifest digest.
    ///
    /// # Errors
    /// [`OciError::Registry`].
    pub async fn push_manifest(
        &self,
        reference: &Reference,
        bytes: Bytes,
        media_type: &str,
    ) -> Result<String> {
        let client = self.client_for(reference.registry())?;
        let auth = self
            .auth_for(&client, reference, oci_client::RegistryOperation::Push)
            .await?;
        client
            .auth(reference, &auth, oci_client::RegistryOperation::Push)
            .await
            .map_err(|e| Self::registry_error("authenticate for push", reference, e))?;
        let digest = sha256_digest(&bytes);
        let content_type = media_type.parse().map_err(|_| OciError::InvalidManifest {
            reference: reference.whole(),
            reason: format!("media type `{media_type}` is not a valid header value"),
        })?;
        client
            .push_manifest_raw(reference, bytes, content_type)
            .await
            .map_err(|e| Self::registry_error("push manifest", reference, e))?;
        Ok(digest)
    }
}

fn is_not_found(e: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode as C};
    match e {
        E::RegistryError { envelope, .. } => envelope.errors.iter().any(|x| {
            matches!(
                x.code,
                C::NameUnknown | C::NotFound | C::ManifestUnknown | C::BlobUnknown
            )
        }),
        E::ServerError { code, .. } => *code == 404,
        _ => false,
    }
}

/// What to do about a failed registry request, in one line, by what failed (issue 28 item
/// 5): the registry has no such repository or tag, it refused the credentials, or it
/// cannot be reached from here. `None` for anything else (the message says enough).
pub fn registry_hint(err: &OciError) -> Option<String> {
    use oci_client::errors::OciDistributionError as E;
    let OciError::Registry {
        reference, source, ..
    } = err
    else {
        return None;
    };
    let host = reference.split('/').next().unwrap_or(reference);
    if crate::oci::registry::is_not_found_error(err) {
        return Some(format!(
            "the registry `{host}` has no `{reference}`: check the id and the tag (`devcell features info tags <id>` lists the tags it has); if `{host}` is a mirror in your settings file, the mirror lacks it"
        ));
    }
    match &**source {
        E::UnauthorizedError { .. }
        | E::AuthenticationFailure(_)
        | E::ServerError {
            code: 401 | 403, ..
        } => Some(format!(
            "the registry `{host}` refused the request as unauthorised: log in to it (`docker login {host}`: devcell reads `~/.docker/config.json`) or check the credentials' access to `{reference}`"
        )),
        E::RequestError(e) if e.is_connect() || e.is_timeout() => Some(format!(
            "the registry `{host}` cannot be reached from here: fetch once where it can and use `--offline` (the cache), or map `{host}` to a mirror you can reach in the settings file's `[registries] mirrors`"
        )),
        _ => None,
    }
}

/// What failed in a registry request, in a few words, for the one-line error (issue 28 item
/// 5): `not found` (no such repository, tag, manifest or blob), `unauthorised`, `no network to
/// that registry` (it could not be connected to: a name that does not resolve, a refused or
/// timed-out connection), or the offline cache's miss. `None` for anything else.
pub fn registry_failure(err: &OciError) -> Option<String> {
    use oci_client::errors::OciDistributionError as E;
    match err {
        OciError::OfflineMiss { .. } => Some("not in the cache, and offline mode is on".into()),
        OciError::Registry {
            operation,
            reference,
            source,
        } => {
            let what = if is_not_found_error(err) {
                "not found"
            } else {
                match &**source {
                    E::UnauthorizedError { .. }
                    | E::AuthenticationFailure(_)
                    | E::ServerError {
                        code: 401 | 403, ..
                    } => "unauthorised",
                    E::RequestError(e) if e.is_connect() || e.is_timeout() => {
                        "no network to that registry"
                    }
                    _ => return None,
                }
            };
            Some(format!("{what} ({operation} `{reference}`)"))
        }
        _ => None,
    }
}

/// Whether `err` is a registry "not found" (unknown repository, tag, manifest or blob).
pub fn is_not_found_error(err: &OciError) -> bool {
    match err {
        OciError::Registry { source, .. } => is_not_found(source),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(os: &str, arch: &str, variant: Option<&str>, digest: &str) -> ImageIndexEntry {
        serde_json::from_value(serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest,
            "size": 1,
            "platform": {"os": os, "architecture": arch, "variant": variant},
        }))
        .unwrap()
    }

    #[test]
    fn select_platform_skips_attestations_and_matches_variant() {
        let entries = vec![
            entry("unknown", "unknown", None, "sha256:att"),
            entry("linux", "arm", Some("v6"), "sha256:armv6"),
            entry("linux", "arm", Some("v7"), "sha256:armv7"),
            entry("linux", "arm64", None, "sha256:arm64"),
            entry("linux", "amd64", None, "sha256:amd64"),
        ];
        let pick = |os: &str, arch: &str, v: Option<&str>| {
            select_platform(
                &entries,
                &Platform {
                    os: os.into(),
                    architecture: arch.into(),
                    variant: v.map(Into::into),
                },
            )
            .map(|e| e.digest.clone())
        };
        assert_eq!(
            pick("linux", "amd64", None).as_deref(),
            Some("sha256:amd64")
        );
        assert_eq!(
            pick("linux", "arm", Some("v7")).as_deref(),
            Some("sha256:armv7")
        );
        assert_eq!(
            pick("linux", "arm64", Some("v8")).as_deref(),
            Some("sha256:arm64")
        );
        assert_eq!(pick("windows", "amd64", None), None);
        assert_eq!(pick("unknown", "unknown", None), None);
    }

    #[test]
    fn mirror_keeps_repository_and_tag_or_digest() {
        let mut options = RegistryOptions::default();
        options
            .mirrors
            .insert("ghcr.io".into(), "127.0.0.1:5000".into());
        options.docker_config = Some(PathBuf::from("/nonexistent/config.json"));
        let r = Registry::new(options).unwrap();
        let m = r.mirrored(&parse_reference("ghcr.io/a/b/c:1").unwrap());
        assert_eq!(m.whole(), "127.0.0.1:5000/a/b/c:1");
        let d = format!("sha256:{}", "a".repeat(64));
        let m = r.mirrored(&parse_reference(&format!("ghcr.io/a/c@{d}")).unwrap());
        assert_eq!(m.whole(), format!("127.0.0.1:5000/a/c@{d}"));
        let m = r.mirrored(&parse_reference("example.io/a/c").unwrap());
        assert_eq!(m.registry(), "example.io");
    }
}

#[cfg(test)]
mod hint_tests {
    use super::*;
    use oci_client::errors::OciDistributionError as E;

    fn hint(source: E) -> Option<String> {
        registry_hint(&OciError::Registry {
            operation: "pull manifest".into(),
            reference: "registry.test/features/hello:1".into(),
            source: Box::new(source),
        })
    }

    fn server(code: u16) -> E {
        E::ServerError {
            code,
            url: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn a_registry_failure_gets_a_hint_by_what_failed() {
        let not_found = hint(server(404)).unwrap();
        assert!(
            not_found.starts_with(
                "the registry `registry.test` has no `registry.test/features/hello:1`"
            ),
            "{not_found}"
        );
        let unauthorised = hint(E::UnauthorizedError { url: String::new() }).unwrap();
        assert!(
            unauthorised.contains("`docker login registry.test`"),
            "{unauthorised}"
        );
        assert_eq!(hint(server(403)), Some(unauthorised));
        assert_eq!(hint(server(500)), None);
        assert_eq!(
            registry_hint(&OciError::InvalidDigest { digest: "x".into() }),
            None
        );
    }
}
