//! Building the planned images through the engine: inspect the cache tag first, build only
//! when it is missing (spec-note 0121).

use std::collections::BTreeMap;

use crate::config::metadata;
use crate::diagnostics::Warning;
use crate::engine::{BuildRequest, Engine, ImageInfo};
use crate::progress::{Event, Reporter};

use super::error::Result;
use super::features::{BaseImage, BuildContext, FeaturesInput, plan_with};
use super::uid::{UidInput, plan_uid_update};

/// An image devcell made (or found already made) for a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltImage {
    /// The cache tag (`devcell/features:<key>` or `devcell/uid:<key>`).
    pub tag: String,
    /// `true` when it was built now, `false` when the tag already existed (nothing built).
    pub built: bool,
    /// The image as the engine reports it.
    pub image: ImageInfo,
}

impl BaseImage {
    /// The base image as the engine reports it: `reference` for `FROM`, its ID, `USER`, and
    /// the entries of its `devcontainer.metadata` label (an invalid label gives no entries
    /// and a warning, as in [`metadata::parse_label`]).
    pub fn from_image(reference: &str, image: &ImageInfo) -> (BaseImage, Option<Warning>) {
        let (entries, warning) = match image.metadata_label() {
            Some(label) => metadata::parse_label(label),
            None => (Vec::new(), None),
        };
        (
            BaseImage {
                reference: reference.to_owned(),
                id: image.id.clone(),
                user: image.user.clone().unwrap_or_default(),
                metadata: entries,
            },
            warning,
        )
    }
}

/// Plans the Features image and builds it through `engine` unless its tag exists already.
/// Build output goes to `reporter` as [`Event::Output`] lines.
///
/// Errors: planning errors ([`super::BuildError`]), and engine errors: a failing
/// `install.sh` fails the build ([`super::BuildError::Engine`]) and leaves no tag.
pub async fn ensure_features_image(
    engine: &dyn Engine,
    input: &FeaturesInput,
    reporter: &dyn Reporter,
) -> Result<BuiltImage> {
    ensure_features_image_with(engine, input, &ImageOptions::default(), reporter).await
}

/// How [`ensure_features_image_with`] builds, beyond the inputs (`devcell build`'s flags; the
/// default is [`ensure_features_image`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageOptions {
    /// Extra image labels ([`plan_with_labels`]): part of the cache key.
    pub labels: BTreeMap<String, String>,
    /// `--no-cache`: build even when the tag exists, without the builder's layer cache (the
    /// tag then names the new image).
    pub no_cache: bool,
    /// The build's network mode (`none`; `None`: the engine's default). Not part of the cache
    /// key: a cached image was built already (spec-note 0442).
    pub network: Option<String>,
    /// devcontainer.json's `containerEnv` (substituted), written as `ENV` lines after the
    /// Features' (`devcell build`: the image shows the merged values; spec-note 0473).
    pub container_env: Vec<(String, String)>,
}

/// [`ensure_features_image`] with `options`: extra labels, and a forced build without cache.
///
/// Errors: as [`ensure_features_image`].
pub async fn ensure_features_image_with(
    engine: &dyn Engine,
    input: &FeaturesInput,
    options: &ImageOptions,
    reporter: &dyn Reporter,
) -> Result<BuiltImage> {
    let plan = plan_with(input, &options.labels, &options.container_env)?;
    ensure(
        engine,
        &plan.tag,
        || plan.write_context(),
        options.no_cache,
        options.network.as_deref(),
        reporter,
    )
    .await
}

/// Plans the `updateRemoteUserUID` image and builds it unless its tag exists; `None` when no
/// UID layer is needed ([`plan_uid_update`]). `network` is the build's network mode (`None`:
/// the engine's default).
///
/// Errors: as [`ensure_features_image`].
pub async fn ensure_uid_image(
    engine: &dyn Engine,
    input: &UidInput,
    network: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<Option<BuiltImage>> {
    let Some(plan) = plan_uid_update(input)? else {
        return Ok(None);
    };
    ensure(
        engine,
        &plan.tag,
        || plan.write_context(),
        false,
        network,
        reporter,
    )
    .await
    .map(Some)
}

/// The image `tag`: the one the engine has (unless `no_cache`), else built from the context
/// `write_context` writes (without the builder's layer cache when `no_cache`).
async fn ensure(
    engine: &dyn Engine,
    tag: &str,
    write_context: impl FnOnce() -> Result<BuildContext>,
    no_cache: bool,
    network: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<BuiltImage> {
    if !no_cache && let Some(image) = engine.inspect_image(tag).await? {
        return Ok(BuiltImage {
            tag: tag.to_owned(),
            built: false,
            image,
        });
    }
    // One build of a tag at a time on this host: two devcells building the same missing tag
    // at once (parallel clone tasks of one repository) would each tag their own build, and
    // the first would then start a container of the second's image, which it never judged.
    // The second waits, then finds the first's image.
    let _lock = take_build_lock(tag).await;
    if !no_cache && let Some(image) = engine.inspect_image(tag).await? {
        return Ok(BuiltImage {
            tag: tag.to_owned(),
            built: false,
            image,
        });
    }
    build(engine, tag, write_context()?, no_cache, network, reporter).await
}

/// `<cache>/locks/build-<sha256 of tag>.lock`, `flock(2)` exclusive, waited for off the async
/// workers; released when dropped or when the process ends. `None` when it cannot be taken
/// (no cache folder, a file error): the build goes ahead unserialised, as before.
async fn take_build_lock(tag: &str) -> Option<std::fs::File> {
    use sha2::Digest as _;
    let dir = crate::oci::store::default_cache_dir()?.join("locks");
    let key = hex::encode(&sha2::Sha256::digest(tag.as_bytes())[..16]);
    let path = dir.join(format!("build-{key}.lock"));
    tokio::task::spawn_blocking(move || {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .ok()?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .ok()?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
        Some(file)
    })
    .await
    .ok()
    .flatten()
}

async fn build(
    engine: &dyn Engine,
    tag: &str,
    context: BuildContext,
    no_cache: bool,
    network: Option<&str>,
    reporter: &dyn Reporter,
) -> Result<BuiltImage> {
    reporter.report(Event::Status(format!("building {tag}")));
    let request = BuildRequest {
        context: context.path().to_owned(),
        dockerfile: context.dockerfile(),
        tags: vec![tag.to_owned()],
        no_cache,
        network: network.map(str::to_owned),
        ..BuildRequest::default()
    };
    let image = engine.build_image(&request, reporter).await?;
    Ok(BuiltImage {
        tag: tag.to_owned(),
        built: true,
        image,
    })
}
