//! Operations `features package` and `features publish` (spec-distilled §5.2-5.4): options the
//! CLI fills, results it renders.

use std::path::PathBuf;

use crate::features::publish;
use crate::oci::registry::{Registry, RegistryOptions};
use crate::security::host_path::{OutputDir, WriteError};

use super::error::Result;

/// Options of `devcell features package`.
#[derive(Debug, Clone)]
pub struct PackageOptions {
    /// A Feature folder, or a collection folder (`src/`) with one sub-folder per Feature.
    pub target: PathBuf,
    /// Where the `.tgz` files and `devcontainer-collection.json` are written.
    pub output_folder: PathBuf,
    /// Empty the output folder first (only files devcell would write are removed).
    pub force_clean_output_folder: bool,
}

/// Packages Features; returns the files written.
///
/// # Errors
/// [`OpsError::Publish`].
pub fn package_features(options: &PackageOptions) -> Result<Vec<PathBuf>> {
    let features = publish::package_all(&options.target)?;
    let io = |path: PathBuf, e: WriteError| publish::PublishError::Io {
        path,
        source: std::io::Error::other(e.to_string()),
    };
    // the output folder and its files may be the repository's links: never written through
    // (spec-note 0400)
    let cwd = std::env::current_dir().map_err(|e| {
        io(
            options.output_folder.clone(),
            WriteError::Io {
                path: ".".into(),
                source: e,
            },
        )
    })?;
    let out = OutputDir::open(&cwd, &options.output_folder)
        .map_err(|e| io(options.output_folder.clone(), e))?;
    if options.force_clean_output_folder
        && let Ok(entries) = std::fs::read_dir(out.path())
    {
        // Nothing is lost: only remove what packaging itself produces.
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if (name.starts_with("devcontainer-feature-") && name.ends_with(".tgz"))
                || name == publish::COLLECTION_FILE
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let mut written = Vec::new();
    for (name, bytes) in publish::package_files(&features) {
        out.write(&name, &bytes)
            .map_err(|e| io(out.path().join(&name), e))?;
        written.push(options.output_folder.join(&name));
    }
    Ok(written)
}

/// Options of `devcell features publish` and `devcell templates publish`.
#[derive(Debug, Clone, Default)]
pub struct PublishOptions {
    /// A Feature folder or a collection folder.
    pub target: PathBuf,
    /// Registry host (`ghcr.io`, `127.0.0.1:5000`).
    pub registry: String,
    /// Namespace (`owner/repo`); Features go to `<registry>/<namespace>/<id>`.
    pub namespace: String,
    /// Registries reached over plain HTTP besides loopback ones.
    pub insecure_registries: Vec<String>,
    /// Loopback registries reached over HTTPS nonetheless.
    pub secure_registries: Vec<String>,
    /// Extra CA certificates (PEM files).
    pub extra_ca_certificates: Vec<PathBuf>,
    /// Docker config file with credentials (default `~/.docker/config.json`).
    pub docker_config: Option<PathBuf>,
}

/// The registry client a publish uses: the flags' registry settings (no mirrors: a publish
/// goes to the registry named).
pub(crate) fn publish_registry(
    options: &PublishOptions,
) -> std::result::Result<Registry, crate::oci::OciError> {
    Registry::new(RegistryOptions {
        insecure_registries: options.insecure_registries.clone(),
        secure_registries: options.secure_registries.clone(),
        extra_ca_certificates: options.extra_ca_certificates.clone(),
        docker_config: options.docker_config.clone(),
        ..RegistryOptions::default()
    })
}

/// Publishes Features; returns the reference CLI's JSON shape
/// `{"<id>": {"publishedTags": […], "digest": "sha256:…", "version": "x.y.z"}}`
/// (`{}` for an id whose version was already published).
///
/// # Errors
/// [`OpsError::Publish`].
pub async fn publish_features(options: &PublishOptions) -> Result<serde_json::Value> {
    publish_features_with(options, &crate::progress::NoopReporter).await
}

/// As [`publish_features`], reporting progress (one status line per Feature) to `reporter`.
///
/// # Errors
/// As [`publish_features`].
pub async fn publish_features_with(
    options: &PublishOptions,
    reporter: &dyn crate::progress::Reporter,
) -> Result<serde_json::Value> {
    let registry = publish_registry(options).map_err(|source| publish::PublishError::Registry {
        reference: options.registry.clone(),
        source,
    })?;
    let namespace = options.namespace.trim_matches('/');
    let out = publish::publish_with_reporter(
        &registry,
        &options.target,
        &options.registry,
        namespace,
        reporter,
    )
    .await?;
    Ok(serde_json::to_value(out).unwrap_or_default())
}
