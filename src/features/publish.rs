//! `devcell features package` and `devcell features publish`: Features as OCI artifacts
//! (spec-distilled §5.2-5.4, Appendix A; spec-notes/0064, 0065).
//!
//! Each Feature becomes a manifest (`application/vnd.oci.image.manifest.v1+json`) with the
//! config blob `{}` of media type `application/vnd.devcontainers`, one layer
//! `devcontainer-feature-<id>.tgz` of media type `application/vnd.devcontainers.layer.v1+tar`
//! (a plain, reproducible tar, as the reference CLI publishes; spec-notes/0064), and
//! the annotation `dev.containers.metadata` holding its `devcontainer-feature.json`. It is
//! pushed to `<registry>/<namespace>/<id>` under the tags `X`, `X.Y`, `X.Y.Z`, `latest`, each
//! only when the version is the highest published for that tag; a version already published is
//! skipped. The collection (`devcontainer-collection.json`) goes to
//! `<registry>/<namespace>:latest`.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Value, json};

use super::fetch::{FEATURE_FILE, FEATURE_LAYER_MEDIA_TYPE, METADATA_ANNOTATION};
use crate::oci::OciError;
use crate::oci::digest::sha256_digest;
use crate::oci::registry::{Registry, parse_reference};
use crate::progress::{Event, NoopReporter, Reporter};

/// Layer media type of the collection metadata artifact.
pub const COLLECTION_LAYER_MEDIA_TYPE: &str =
    "application/vnd.devcontainers.collection.layer.v1+json";
/// File name of the collection metadata.
pub const COLLECTION_FILE: &str = "devcontainer-collection.json";
pub use crate::oci::artifact::{
    EMPTY_CONFIG, OCI_MANIFEST_MEDIA_TYPE, artifact_manifest, parse_version, tags_to_publish,
};

/// An error packaging or publishing Features. Messages name the Feature or folder.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The folder holds no Feature (no `devcontainer-feature.json` in it or its sub-folders).
    #[error("no Feature found in `{path}`: expected `{FEATURE_FILE}` in it or in its sub-folders")]
    NoFeatures {
        /// The folder.
        path: PathBuf,
    },
    /// A Feature's `devcontainer-feature.json` is invalid for publishing.
    #[error("invalid Feature at `{path}`: {reason}")]
    Invalid {
        /// The Feature folder.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Reading the Feature or writing the package failed.
    #[error("I/O failed at `{path}`")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A registry operation failed.
    #[error("cannot publish `{reference}`")]
    Registry {
        /// The repository or reference.
        reference: String,
        /// The cause.
        #[source]
        source: OciError,
    },
}

/// Result alias of this module.
pub type Result<T, E = PublishError> = std::result::Result<T, E>;

/// One packaged Feature.
#[derive(Debug, Clone)]
pub struct PackagedFeature {
    /// The Feature `id`.
    pub id: String,
    /// Its `version` (`X.Y.Z`).
    pub version: String,
    /// `legacyIds` (also published under these names).
    pub legacy_ids: Vec<String>,
    /// The `devcontainer-feature.json` object.
    pub metadata: Value,
    /// The layer: a plain tar of the Feature folder.
    pub archive: Bytes,
}

impl PackagedFeature {
    /// The layer file name, `devcontainer-feature-<id>.tgz`.
    pub fn file_name(&self) -> String {
        format!("devcontainer-feature-{}.tgz", self.id)
    }
}

/// The outcome of publishing one Feature, shaped like the reference CLI's JSON
/// (`{}` when the version was already published).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishOutcome {
    /// Tags pushed, in the order `X`, `X.Y`, `X.Y.Z`, `latest` (those that moved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_tags: Option<Vec<String>>,
    /// The manifest digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The version published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Legacy ids the Feature was also published under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_legacy_ids: Option<Vec<String>>,
}

/// The Feature folders of `dir`: `dir` itself when it holds `devcontainer-feature.json`,
/// else each sub-folder that does (a collection's `src/`), sorted by name.
///
/// # Errors
/// [`PublishError::NoFeatures`], [`PublishError::Io`].
pub fn discover(dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.join(FEATURE_FILE).is_file() {
        return Ok(vec![dir.to_owned()]);
    }
    let io = |source| PublishError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        // a linked sub-folder would pack (and publish) the host folder it names (spec-note 0400)
        if entry.file_type().map_err(io)?.is_symlink() {
            if path.join(FEATURE_FILE).is_file() {
                return Err(PublishError::Invalid {
                    path,
                    reason: "the Feature folder is a symbolic link: devcell packages only real \
                             folders (what it names is not packed)"
                        .into(),
                });
            }
            continue;
        }
        if path.is_dir() && path.join(FEATURE_FILE).is_file() {
            found.push(path);
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(PublishError::NoFeatures {
            path: dir.to_owned(),
        });
    }
    Ok(found)
}

/// Packages one Feature folder: validates `id` (`[a-z0-9_-]`, equal to the folder name when
/// part of a collection) and `version` (`X.Y.Z`), and tars the folder.
///
/// # Errors
/// [`PublishError::Invalid`], [`PublishError::Io`].
pub fn package_feature(dir: &Path, in_collection: bool) -> Result<PackagedFeature> {
    let invalid = |reason: String| PublishError::Invalid {
        path: dir.to_owned(),
        reason,
    };
    let file = dir.join(FEATURE_FILE);
    // never through a link, never waiting on a FIFO, bounded: a metadata file linked to a
    // host file is neither echoed nor published (spec-note 0400)
    let text = super::metadata::read_feature_file(dir).map_err(|source| PublishError::Io {
        path: file.clone(),
        source,
    })?;
    // JSONC (comments, trailing commas) like every other Dev Container file and the
    // reference CLI; what is published (annotation, collection) is plain JSON.
    let metadata: Value = crate::config::jsonc::parse(&file, &text)
        .map_err(|e| invalid(format!("`{FEATURE_FILE}` is invalid: {e}")))?
        .value;
    let id = metadata
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("`id` is missing or not a string".into()))?
        .to_owned();
    let valid_name = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    };
    if !valid_name(&id) {
        return Err(invalid(format!(
            "`id` `{id}` must be lowercase letters, digits, `-` or `_`"
        )));
    }
    if in_collection && dir.file_name().and_then(|n| n.to_str()) != Some(id.as_str()) {
        return Err(invalid(format!("`id` `{id}` must equal the folder name")));
    }
    let version = metadata
        .get("version")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("`version` is missing or not a string".into()))?
        .to_owned();
    if parse_version(&version).is_none() {
        return Err(invalid(format!(
            "`version` `{version}` is not `MAJOR.MINOR.PATCH` (plain numbers)"
        )));
    }
    let legacy_ids: Vec<String> = metadata
        .get("legacyIds")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(bad) = legacy_ids.iter().find(|l| !valid_name(l)) {
        return Err(invalid(format!("legacy id `{bad}` is not a valid id")));
    }
    // packed from a copy made through descriptors: no link swapped in is followed (G4)
    let copy = crate::features::nofollow_copy::snapshot(dir).map_err(|e| PublishError::Io {
        path: e.path,
        source: e.source,
    })?;
    let archive =
        crate::oci::artifact::tar_folder(copy.path(), &[]).map_err(|source| PublishError::Io {
            path: dir.to_owned(),
            source,
        })?;
    Ok(PackagedFeature {
        id,
        version,
        legacy_ids,
        metadata,
        archive: Bytes::from(archive),
    })
}

/// Packages every Feature under `dir` (see [`discover`]).
///
/// # Errors
/// As [`discover`] and [`package_feature`].
pub fn package_all(dir: &Path) -> Result<Vec<PackagedFeature>> {
    let dirs = discover(dir)?;
    let in_collection = !(dirs.len() == 1 && dirs[0] == dir);
    dirs.iter()
        .map(|d| package_feature(d, in_collection))
        .collect()
}

/// The collection metadata `{"sourceInformation": {…}, "features": [<metadata>…]}`.
pub fn collection_json(features: &[PackagedFeature]) -> Value {
    json!({
        "sourceInformation": {"source": "devcell", "version": env!("CARGO_PKG_VERSION")},
        "features": features.iter().map(|f| f.metadata.clone()).collect::<Vec<_>>(),
    })
}

/// The files `features package` writes for `features`, as `(file name, bytes)`: each
/// `devcontainer-feature-<id>.tgz`, then `devcontainer-collection.json`. Pure.
pub fn package_files(features: &[PackagedFeature]) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = features
        .iter()
        .map(|f| (f.file_name(), f.archive.to_vec()))
        .collect();
    let text = serde_json::to_vec_pretty(&collection_json(features)).unwrap_or_default();
    files.push((COLLECTION_FILE.to_owned(), text));
    files
}

/// Publishes one packaged Feature to `<registry>/<namespace>/<name>` for its id and each
/// legacy id.
///
/// # Errors
/// [`PublishError::Registry`].
pub async fn publish_feature(
    registry: &Registry,
    target_registry: &str,
    namespace: &str,
    feature: &PackagedFeature,
) -> Result<PublishOutcome> {
    let Some(version) = parse_version(&feature.version) else {
        return Err(PublishError::Invalid {
            path: PathBuf::from(&feature.id),
            reason: format!("`version` `{}` is not `MAJOR.MINOR.PATCH`", feature.version),
        });
    };
    let layer_digest = sha256_digest(&feature.archive);
    let mut annotations = IndexMap::new();
    annotations.insert(
        METADATA_ANNOTATION.to_owned(),
        serde_json::to_string(&feature.metadata).unwrap_or_default(),
    );
    annotations.insert(
        "com.github.package.type".to_owned(),
        "devcontainer_feature".to_owned(),
    );
    let manifest = artifact_manifest(
        FEATURE_LAYER_MEDIA_TYPE,
        &layer_digest,
        feature.archive.len(),
        &feature.file_name(),
        &annotations,
    );
    let mut outcome = PublishOutcome::default();
    let mut legacy_published = Vec::new();
    let names = std::iter::once(&feature.id).chain(feature.legacy_ids.iter());
    for (i, name) in names.enumerate() {
        let repository = format!("{target_registry}/{namespace}/{name}");
        // every registry error names the repository
        let registry_error = |source: OciError| PublishError::Registry {
            reference: repository.clone(),
            source,
        };
        let reference =
            parse_reference(&format!("{repository}:latest")).map_err(&registry_error)?;
        let published = registry
            .list_tags_unmirrored(&reference)
            .await
            .map_err(&registry_error)?;
        let Some(tags) = tags_to_publish(version, &published) else {
            tracing::info!(%repository, version = %feature.version, "version already published; skipping");
            continue;
        };
        let digest = crate::oci::artifact::push_artifact(
            registry,
            &repository,
            feature.archive.clone(),
            manifest.clone(),
            &tags,
        )
        .await
        .map_err(&registry_error)?;
        if i == 0 {
            outcome.published_tags = Some(tags);
            outcome.digest = Some(digest);
            outcome.version = Some(feature.version.clone());
        } else {
            legacy_published.push(name.clone());
        }
    }
    if !legacy_published.is_empty() {
        outcome.published_legacy_ids = Some(legacy_published);
    }
    Ok(outcome)
}

/// `devcell features publish DIR --registry R --namespace NS`: packages every Feature under
/// `dir`, publishes each, then the collection metadata to `<registry>/<namespace>:latest`.
/// Returns `id → outcome` in folder order.
///
/// # Errors
/// As [`package_all`] and [`publish_feature`].
pub async fn publish(
    registry: &Registry,
    dir: &Path,
    target_registry: &str,
    namespace: &str,
) -> Result<IndexMap<String, PublishOutcome>> {
    publish_with_reporter(registry, dir, target_registry, namespace, &NoopReporter).await
}

/// As [`publish`], reporting each step to `reporter` as [`Event::Status`] lines
/// (`publishing <registry>/<namespace>/<id> <version>`, `publishing the collection …`).
///
/// # Errors
/// As [`publish`].
pub async fn publish_with_reporter(
    registry: &Registry,
    dir: &Path,
    target_registry: &str,
    namespace: &str,
    reporter: &dyn Reporter,
) -> Result<IndexMap<String, PublishOutcome>> {
    let features = package_all(dir)?;
    let at = (target_registry, namespace);
    let id_version = |f: &PackagedFeature| (f.id.clone(), f.version.clone());
    let out = publish_each(&features, at, reporter, id_version, async |f| {
        publish_feature(registry, target_registry, namespace, f).await
    })
    .await?;
    let annotations = IndexMap::from([(
        "com.github.package.type".to_owned(),
        "devcontainer_collection".to_owned(),
    )]);
    let collection = collection_json(&features);
    push_collection(registry, at, &collection, &annotations, reporter)
        .await
        .map_err(|source| PublishError::Registry {
            reference: format!("{target_registry}/{namespace}"),
            source,
        })?;
    Ok(out)
}

/// Publishes each of `items` in order with `publish_one`, reporting `publishing
/// <registry>/<namespace>/<id> <version>` (`at`, `id_version`) before each; the outcomes by
/// id. `features publish` and `templates publish` both go through it.
///
/// # Errors
/// The first of `publish_one`'s: the items after it are not published.
pub(crate) async fn publish_each<T, E>(
    items: &[T],
    (target_registry, namespace): (&str, &str),
    reporter: &dyn Reporter,
    id_version: impl Fn(&T) -> (String, String),
    publish_one: impl AsyncFn(&T) -> std::result::Result<PublishOutcome, E>,
) -> std::result::Result<IndexMap<String, PublishOutcome>, E> {
    let mut out = IndexMap::new();
    for item in items {
        let (id, version) = id_version(item);
        reporter.report(Event::Status(format!(
            "publishing {target_registry}/{namespace}/{id} {version}"
        )));
        let outcome = publish_one(item).await?;
        out.insert(id, outcome);
    }
    Ok(out)
}

/// Pushes a collection's metadata `collection` (`devcontainer-collection.json`) to
/// `<registry>/<namespace>:latest` (`at`), its manifest carrying `annotations`, reporting the
/// step to `reporter`; `features publish` and `templates publish` end with it.
///
/// # Errors
/// As [`crate::oci::artifact::push_artifact`].
pub(crate) async fn push_collection(
    registry: &Registry,
    (target_registry, namespace): (&str, &str),
    collection: &Value,
    annotations: &IndexMap<String, String>,
    reporter: &dyn Reporter,
) -> std::result::Result<String, OciError> {
    reporter.report(Event::Status(format!(
        "publishing the collection {target_registry}/{namespace}"
    )));
    let collection = Bytes::from(serde_json::to_vec(collection).unwrap_or_default());
    let manifest = artifact_manifest(
        COLLECTION_LAYER_MEDIA_TYPE,
        &sha256_digest(&collection),
        collection.len(),
        COLLECTION_FILE,
        annotations,
    );
    crate::oci::artifact::push_artifact(
        registry,
        &format!("{target_registry}/{namespace}"),
        collection,
        manifest,
        &["latest".to_owned()],
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::artifact::TITLE_ANNOTATION;

    fn tags(v: &str, published: &[&str]) -> Option<Vec<String>> {
        let p: Vec<String> = published.iter().map(|s| s.to_string()).collect();
        tags_to_publish(parse_version(v).unwrap(), &p)
    }

    #[test]
    fn first_publish_pushes_all_four_tags() {
        assert_eq!(tags("1.2.3", &[]).unwrap(), ["1", "1.2", "1.2.3", "latest"]);
    }

    #[test]
    fn older_patch_moves_only_its_minor_tag_checklist_59() {
        let published = ["1", "1.2", "1.2.3", "1.3", "1.3.0", "latest"];
        assert_eq!(tags("1.2.4", &published).unwrap(), ["1.2", "1.2.4"]);
        // 1.2.3 when 1.3.0 exists: pushes 1.2.3 and 1.2 (no higher 1.2.x), neither 1 nor latest.
        assert_eq!(
            tags("1.2.3", &["1", "1.3", "1.3.0", "latest"]).unwrap(),
            ["1.2", "1.2.3"]
        );
        assert_eq!(tags("1.2.3", &published), None);
        assert_eq!(
            tags("2.0.0", &published).unwrap(),
            ["2", "2.0", "2.0.0", "latest"]
        );
        assert_eq!(tags("0.9.0", &published).unwrap(), ["0", "0.9", "0.9.0"]);
    }

    #[test]
    fn versions_must_be_plain_x_y_z() {
        assert_eq!(parse_version("1.2.3"), Some((1, 2, 3)));
        for bad in [
            "1.2",
            "1.2.3.4",
            "1.2.3-rc1",
            "1.2.3+b",
            "v1.2.3",
            "1..3",
            "",
        ] {
            assert_eq!(parse_version(bad), None, "{bad}");
        }
    }

    #[test]
    fn package_is_reproducible_and_layout_matches_the_spec() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("hello");
        std::fs::create_dir(&f).unwrap();
        std::fs::write(
            f.join(FEATURE_FILE),
            r#"{"id":"hello","version":"1.0.0","name":"Hello"}"#,
        )
        .unwrap();
        std::fs::write(f.join("install.sh"), "#!/bin/sh\necho hi\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f.join("install.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let a = package_all(dir.path()).unwrap();
        let b = package_all(dir.path()).unwrap();
        assert_eq!(a[0].archive, b[0].archive);
        assert_eq!(a[0].file_name(), "devcontainer-feature-hello.tgz");
        let mut tar = tar::Archive::new(a[0].archive.as_ref());
        let names: Vec<(String, u32)> = tar
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().display().to_string(),
                    e.header().mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(),
            ["devcontainer-feature.json", "install.sh"]
        );
        assert_eq!(names[1].1 & 0o111, 0o111, "install.sh stays executable");

        let files = package_files(&a);
        assert_eq!(files[0].0, "devcontainer-feature-hello.tgz");
        assert_eq!(files[1].0, COLLECTION_FILE);
        let coll: Value = serde_json::from_slice(&files[1].1).unwrap();
        assert_eq!(coll["features"][0]["id"], "hello");
        assert_eq!(files.len(), 2);
    }

    #[test]
    fn package_rejects_id_not_matching_folder_and_bad_versions() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a");
        std::fs::create_dir(&f).unwrap();
        std::fs::write(f.join(FEATURE_FILE), r#"{"id":"b","version":"1.0.0"}"#).unwrap();
        std::fs::create_dir(dir.path().join("c")).unwrap();
        std::fs::write(
            dir.path().join("c").join(FEATURE_FILE),
            r#"{"id":"c","version":"1.0"}"#,
        )
        .unwrap();
        let err = package_all(dir.path()).unwrap_err().to_string();
        assert!(err.contains("folder name"), "{err}");
        let err = package_feature(&dir.path().join("c"), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("MAJOR.MINOR.PATCH"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            package_all(empty.path()),
            Err(PublishError::NoFeatures { .. })
        ));
    }

    /// A collection sub-folder that is a link to a host folder, and a metadata file that is a
    /// link to a host file: neither is read nor packed (spec-note 0400).
    #[test]
    fn links_to_host_folders_and_files_are_not_packaged() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        std::fs::create_dir(&host).unwrap();
        std::fs::write(
            host.join(FEATURE_FILE),
            r#"{"id":"host","version":"1.0.0"}"#,
        )
        .unwrap();
        std::fs::write(host.join("secret.txt"), "host-secret").unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("good")).unwrap();
        std::fs::write(
            src.join("good").join(FEATURE_FILE),
            r#"{"id":"good","version":"1.0.0"}"#,
        )
        .unwrap();
        symlink(&host, src.join("host")).unwrap();
        let err = package_all(&src).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::remove_file(src.join("host")).unwrap();
        std::fs::create_dir(src.join("linked")).unwrap();
        std::fs::write(host.join("passwd"), "hostsecret:x:0:0\n").unwrap();
        symlink(host.join("passwd"), src.join("linked").join(FEATURE_FILE)).unwrap();
        let err = package_all(&src).unwrap_err();
        let err = format!("{err} {err:?}");
        assert!(err.contains("symbolic link"), "{err}");
        assert!(
            !err.contains("hostsecret"),
            "the host file is echoed: {err}"
        );
        std::fs::remove_dir_all(src.join("linked")).unwrap();
        assert_eq!(package_all(&src).unwrap().len(), 1);
    }

    #[test]
    fn manifest_has_spec_media_types_and_annotations() {
        let mut ann = IndexMap::new();
        ann.insert(METADATA_ANNOTATION.to_owned(), "{}".to_owned());
        let m = artifact_manifest(
            FEATURE_LAYER_MEDIA_TYPE,
            &sha256_digest(b"x"),
            1,
            "devcontainer-feature-x.tgz",
            &ann,
        );
        let v: Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(v["mediaType"], OCI_MANIFEST_MEDIA_TYPE);
        assert_eq!(v["config"]["mediaType"], "application/vnd.devcontainers");
        assert_eq!(
            v["config"]["digest"],
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            v["layers"][0]["annotations"][TITLE_ANNOTATION],
            "devcontainer-feature-x.tgz"
        );
        assert_eq!(v["annotations"][METADATA_ANNOTATION], "{}");
    }
}
