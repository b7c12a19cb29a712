//! Features layered onto a base image: the generated build context and Dockerfile, and the
//! image tag that caches the result
//! ([spec: Features, installation](https://containers.dev/implementors/features/#installation);
//! spec-notes 0120–0124).
//!
//! [`plan`] is pure apart from reading the Feature folders: it renders the Dockerfile and the
//! small generated scripts in memory and computes the cache tag. When [`needs_build`] says the
//! tag is missing, [`FeaturesPlan::write_context`] writes a temporary build context that any
//! builder (the engine API, `docker build`) can build with the Dockerfile at its root.
//!
//! The Dockerfile, for Features `a` (index 0) and `b` (index 1) on an image whose `USER` is
//! `dev`:
//!
//! ```text
//! FROM <base reference>
//! USER root
//! COPY ["devcontainer-features.builtin.env", "devcell-user-homes.sh", "/tmp/dev-container-features/"]
//! RUN sh /tmp/dev-container-features/devcell-user-homes.sh && rm -f …/devcell-user-homes.sh
//! # Feature 0: a_0
//! ENV A_VAR="…"                       (its containerEnv, one ENV per variable, `$` kept)
//! COPY ["a_0", "/tmp/dev-container-features/a_0"]
//! RUN cd /tmp/dev-container-features/a_0 && sh ./devcontainer-features-install.sh && cd / && rm -rf /tmp/dev-container-features/a_0
//! # Feature 1: b_1
//! …
//! USER dev
//! LABEL devcontainer.metadata="[…]"
//! ```
//!
//! One instruction group per Feature, in install order, so the builder's layer cache reuses
//! every group before the first changed Feature.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use super::cache_key::{KeyHasher, tree_digest};
use super::dockerfile::{check_env_name, check_reference, check_user, json_array, quoted};
use super::error::{BuildError, Result};
use super::tree::{self, TreeEntry};
use crate::config::metadata;
use crate::features::options::{BuiltinEnv, ResolvedOptions, render_options_env};
use crate::formats::shell;
use crate::names::METADATA_LABEL;

/// devcell's own version of the generated Features layer. Part of every cache key: bump it
/// whenever the generated Dockerfile or scripts change meaning, so old images are not reused.
pub const FEATURES_LAYER_VERSION: u32 = 1;

/// Repository of the images [`plan`] tags: `devcell/features:<64 hex digits>`.
pub const FEATURES_IMAGE_REPOSITORY: &str = "devcell/features";

/// Folder in the image where Features are staged while they install (the reference CLI's).
pub const STAGING_DIR: &str = "/tmp/dev-container-features";

/// File name of the option variables in a Feature's staging folder.
pub const OPTIONS_ENV_FILE: &str = "devcontainer-features.env";

/// File name of the builtin variables (`_REMOTE_USER` …) in [`STAGING_DIR`].
pub const BUILTIN_ENV_FILE: &str = "devcontainer-features.builtin.env";

/// File name of the generated wrapper that runs `install.sh` in a Feature's staging folder.
pub const INSTALL_WRAPPER_FILE: &str = "devcontainer-features-install.sh";

/// File name of the generated script that appends the users' homes to [`BUILTIN_ENV_FILE`].
const USER_HOMES_FILE: &str = "devcell-user-homes.sh";

const INSTALL_WRAPPER_BODY: &str = include_str!("scripts/install-feature.sh");
const USER_HOMES_SCRIPT: &str = include_str!("scripts/user-homes.sh");

/// One Feature to install, materialised and with its options rendered, as the `features`
/// layer hands it over. A list of these is in install order.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureLayer {
    /// The Feature reference as the user wrote it (e.g. `ghcr.io/devcontainers/features/node:1`
    /// or `./local`): the `id` of its `devcontainer.metadata` entry.
    pub id_as_written: String,
    /// The materialised Feature folder (holding `install.sh` and `devcontainer-feature.json`).
    pub dir: PathBuf,
    /// The rendered `devcontainer-features.env` content (`NAME=value` lines, sourced by `sh`
    /// with `set -a`), written byte for byte.
    pub options_env: String,
    /// The Feature's `containerEnv`, in declaration order: written as `ENV` before its
    /// `install.sh` runs (Docker expands `${VAR}` in values; no devcontainer substitution).
    pub container_env: IndexMap<String, String>,
    /// The `devcontainer-feature.json` object (for the label entry, `id` and `name`).
    pub metadata: Value,
    /// The manifest digest (`sha256:…`) of an OCI Feature, or the tarball's digest; `None` for
    /// a local Feature, whose folder content is hashed instead.
    pub digest: Option<String>,
}

impl FeatureLayer {
    /// A layer from the `features` layer's values: the reference as written, the materialised
    /// folder, the `devcontainer-feature.json` object, the resolved options (rendered with
    /// [`render_options_env`]) and the digest (`None` for a local Feature). `containerEnv` is
    /// read from `metadata`.
    ///
    /// Errors: [`BuildError::InvalidContainerEnv`] for a non-string `containerEnv` value;
    /// [`BuildError::Feature`] when an option value cannot be rendered (a NUL byte).
    pub fn new(
        id_as_written: &str,
        dir: PathBuf,
        metadata: Value,
        options: &ResolvedOptions,
        digest: Option<String>,
    ) -> Result<FeatureLayer> {
        let mut container_env = IndexMap::new();
        if let Some(env) = metadata.get("containerEnv").and_then(Value::as_object) {
            for (name, value) in env {
                let Some(value) = value.as_str() else {
                    return Err(BuildError::InvalidContainerEnv {
                        feature: id_as_written.to_owned(),
                        name: name.clone(),
                        reason: "has a value that is not a string",
                    });
                };
                container_env.insert(name.clone(), value.to_owned());
            }
        }
        Ok(FeatureLayer {
            id_as_written: id_as_written.to_owned(),
            dir,
            options_env: render_options_env(options)?,
            container_env,
            metadata,
            digest,
        })
    }
}

/// The image the Features are layered onto.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BaseImage {
    /// The reference written after `FROM` (a tag, or the image ID to pin it exactly).
    pub reference: String,
    /// The image ID (`sha256:…`) of that reference, as the engine reports it: the cache key
    /// uses it, never a tag.
    pub id: String,
    /// The image's `Config.User` (`""` when unset, which means root).
    pub user: String,
    /// The entries of the image's `devcontainer.metadata` label, in order
    /// ([`metadata::parse_label`]).
    pub metadata: Vec<Value>,
}

/// Everything the Features layer depends on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FeaturesInput {
    /// The base image.
    pub base: BaseImage,
    /// The Features, in install order.
    pub features: Vec<FeatureLayer>,
    /// The `devcontainer.json` as written (unsubstituted): its label entry is
    /// [`metadata::config_entry`] of it.
    pub config: Value,
    /// The merged `containerUser` (image metadata and `devcontainer.json`), if any.
    pub container_user: Option<String>,
    /// The merged `remoteUser`, if any.
    pub remote_user: Option<String>,
}

/// The generated Features build: Dockerfile, label, users and cache tag. Build it with
/// [`FeaturesPlan::write_context`] when [`needs_build`] says so.
#[derive(Debug, Clone, PartialEq)]
pub struct FeaturesPlan {
    /// `devcell/features:<key>`.
    pub tag: String,
    /// The cache key: 64 hex digits of SHA-256 over, in this order (each field
    /// length-prefixed, see [`super::cache_key`]):
    /// 1. `devcell.build.features/<FEATURES_LAYER_VERSION>`;
    /// 2. the base image ID;
    /// 3. per Feature in install order: the reference as written; its digest, or for a local
    ///    Feature the digest of its folder ([`tree_digest`]: paths, kinds, normalised modes,
    ///    contents, in sorted order); its options env content;
    /// 4. every generated file (builtin env, scripts, wrappers) by context path and content;
    /// 5. the Dockerfile text (which holds each `containerEnv`, the users and the label).
    pub key: String,
    /// The generated Dockerfile.
    pub dockerfile: String,
    /// The `devcontainer.metadata` label value written by the Dockerfile: base entries ++ one
    /// entry per Feature ++ the `devcontainer.json` entry.
    pub label: String,
    /// `_CONTAINER_USER`: merged `containerUser`, else the image's `USER`, else `root`.
    pub container_user: String,
    /// `_REMOTE_USER`: merged `remoteUser`, else the container user.
    pub remote_user: String,
    files: Vec<GeneratedFile>,
    folders: Vec<FeatureFolder>,
}

#[derive(Debug, Clone, PartialEq)]
struct GeneratedFile {
    /// Path in the build context.
    rel: PathBuf,
    content: String,
}

#[derive(Debug, Clone, PartialEq)]
struct FeatureFolder {
    /// Folder name in the build context and under [`STAGING_DIR`]: `<id>_<index>`.
    name: String,
    src: PathBuf,
    entries: Vec<TreeEntry>,
}

/// A written build context: a temporary folder (removed on drop) with the Dockerfile at its
/// root.
#[derive(Debug)]
pub struct BuildContext {
    dir: tempfile::TempDir,
}

impl BuildContext {
    pub(crate) fn new(dir: tempfile::TempDir) -> Self {
        BuildContext { dir }
    }

    /// The context folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<context>/Dockerfile`.
    pub fn dockerfile(&self) -> PathBuf {
        self.dir.path().join("Dockerfile")
    }
}

/// Whether the image `tag` has to be built: `false` when `image_exists(tag)` says it is
/// already there, in which case nothing is built at all.
pub fn needs_build(tag: &str, image_exists: impl FnOnce(&str) -> bool) -> bool {
    !image_exists(tag)
}

/// The folder name of a Feature in the context and under [`STAGING_DIR`]: its `id` from
/// `devcontainer-feature.json` (else the last path segment of the reference, without tag or
/// digest), characters outside `[A-Za-z0-9._-]` replaced by `_`, then `_<index>`.
pub fn folder_name(feature: &FeatureLayer, index: usize) -> String {
    let id = match feature.metadata.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => {
            let written = feature.id_as_written.split('@').next().unwrap_or_default();
            let last = written
                .rsplit(['/', '\\'])
                .next()
                .unwrap_or_default()
                .split(':')
                .next()
                .unwrap_or_default();
            last.to_owned()
        }
    };
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    let safe = if safe.is_empty() { "feature" } else { safe };
    format!("{safe}_{index}")
}

/// The users the builtin variables name: (`_CONTAINER_USER`, `_REMOTE_USER`).
/// Container user: `container_user`, else the image's `USER` (when set), else `root`;
/// remote user: `remote_user`, else the container user (spec: Features, installation).
pub fn install_users(
    container_user: Option<&str>,
    remote_user: Option<&str>,
    image_user: &str,
) -> (String, String) {
    let container = container_user
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| {
            if image_user.is_empty() {
                "root".to_owned()
            } else {
                image_user.to_owned()
            }
        });
    let remote = remote_user
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| container.clone());
    (container, remote)
}

/// Plans the Features build: reads each Feature folder, renders the Dockerfile, the builtin
/// env file, the wrappers and the label, and computes the cache key and tag.
///
/// Errors: a folder that cannot be read or lacks `install.sh`, a special file in it, a
/// `containerEnv` entry or image user that cannot be written into a Dockerfile, a label too
/// long to split over Dockerfile lines.
pub fn plan(input: &FeaturesInput) -> Result<FeaturesPlan> {
    plan_with_labels(input, &BTreeMap::new())
}

/// [`plan`] with extra image labels (`devcell build --label name=value`): written as `LABEL`
/// lines just before the `devcontainer.metadata` one (which therefore wins over a label of
/// that name). They are part of the Dockerfile, so of the cache key; none gives exactly
/// [`plan`]'s Dockerfile and key.
///
/// Errors: as [`plan`]; [`BuildError::InvalidImageLabel`] for an empty name, or a name or
/// value with a control character (a line break).
pub fn plan_with_labels(
    input: &FeaturesInput,
    labels: &BTreeMap<String, String>,
) -> Result<FeaturesPlan> {
    plan_with(input, labels, &[])
}

/// [`plan_with_labels`] plus `container_env` (devcontainer.json's `containerEnv`, already
/// substituted) as `ENV NAME="value"` lines after every Feature and before the labels, `$`
/// kept literal: devcontainer.json comes last in the merge, so its values win over the
/// Features' (devcontainers/cli#381). Part of the cache key; empty gives exactly
/// [`plan_with_labels`].
///
/// Errors: as [`plan_with_labels`]; [`BuildError::InvalidContainerEnv`] (feature
/// `devcontainer.json`) for a name or value that cannot be written.
pub fn plan_with(
    input: &FeaturesInput,
    labels: &BTreeMap<String, String>,
    container_env: &[(String, String)],
) -> Result<FeaturesPlan> {
    let base = &input.base;
    check_base(base)?;
    let (container_user, remote_user) = install_users(
        input.container_user.as_deref(),
        input.remote_user.as_deref(),
        &base.user,
    );
    let mut files = builtin_files(&container_user, &remote_user)?;
    let mut df = dockerfile_head(base);
    let mut folders = Vec::with_capacity(input.features.len());
    let mut key = KeyHasher::new(&format!("devcell.build.features/{FEATURES_LAYER_VERSION}"));
    key.field("base-image-id", base.id.as_bytes());
    for (index, feature) in input.features.iter().enumerate() {
        folders.push(feature_step(feature, index, &mut key, &mut files, &mut df)?);
    }
    let label = dockerfile_tail(input, labels, container_env, &mut df)?;
    let key = finish_key(key, &files, &df);
    Ok(FeaturesPlan {
        tag: format!("{FEATURES_IMAGE_REPOSITORY}:{key}"),
        key,
        dockerfile: df,
        label,
        container_user,
        remote_user,
        files,
        folders,
    })
}

/// The base image's reference and user go into the Dockerfile as words: checked first.
///
/// Errors: [`BuildError::InvalidReference`], [`BuildError::InvalidUser`].
fn check_base(base: &BaseImage) -> Result<()> {
    check_reference(&base.reference).map_err(|reason| BuildError::InvalidReference {
        reference: base.reference.clone(),
        reason,
    })?;
    if !base.user.is_empty() {
        check_user(&base.user).map_err(|reason| BuildError::InvalidUser {
            user: base.user.clone(),
            reason,
        })?;
    }
    Ok(())
}

/// The files every Features layer copies in first: the builtin environment (the install
/// users) and the script that makes their homes.
///
/// Errors: [`BuildError::InvalidUser`] for a user with a NUL byte.
fn builtin_files(container_user: &str, remote_user: &str) -> Result<Vec<GeneratedFile>> {
    Ok(vec![
        GeneratedFile {
            rel: BUILTIN_ENV_FILE.into(),
            content: BuiltinEnv::new(container_user, Some(remote_user))
                .render()
                .map_err(|_| BuildError::InvalidUser {
                    user: format!("{container_user}/{remote_user}"),
                    reason: "contains a NUL byte",
                })?,
        },
        GeneratedFile {
            rel: USER_HOMES_FILE.into(),
            content: USER_HOMES_SCRIPT.to_owned(),
        },
    ])
}

/// The Dockerfile up to the first Feature: the base, root for the installs, the builtin
/// files copied and the users' homes made.
fn dockerfile_head(base: &BaseImage) -> String {
    let mut df = String::new();
    df.push_str(&format!(
        "# Generated by devcell (Features layer v{FEATURES_LAYER_VERSION}); do not edit.\n"
    ));
    df.push_str(&format!("FROM {}\n", base.reference));
    if !base.user.is_empty() {
        df.push_str("USER root\n");
    }
    df.push_str(&format!(
        "COPY {}\n",
        json_array(&[
            BUILTIN_ENV_FILE,
            USER_HOMES_FILE,
            &format!("{STAGING_DIR}/")
        ])
    ));
    df.push_str(&format!(
        "RUN sh {STAGING_DIR}/{USER_HOMES_FILE} && rm -f {STAGING_DIR}/{USER_HOMES_FILE}\n"
    ));
    df
}

/// One Feature's part of the layer: its folder walked and keyed (by digest, else by its
/// tree), its options and install wrapper files, and its `ENV`, `COPY` and `RUN` lines.
///
/// Errors: [`BuildError::MissingInstallScript`], an unreadable folder or special file in it,
/// [`BuildError::InvalidContainerEnv`].
fn feature_step(
    feature: &FeatureLayer,
    index: usize,
    key: &mut KeyHasher,
    files: &mut Vec<GeneratedFile>,
    df: &mut String,
) -> Result<FeatureFolder> {
    let name = folder_name(feature, index);
    if !feature.dir.join("install.sh").is_file() {
        return Err(BuildError::MissingInstallScript {
            feature: feature.id_as_written.clone(),
            dir: feature.dir.clone(),
        });
    }
    let entries = tree::walk(&feature.dir, &feature.id_as_written)?;
    key.field("feature", feature.id_as_written.as_bytes());
    match &feature.digest {
        Some(digest) => key.field("digest", digest.as_bytes()),
        None => key.field("tree", tree_digest(&feature.dir, &entries)?.as_bytes()),
    };
    key.field("options-env", feature.options_env.as_bytes());

    let display_id = feature
        .metadata
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or(&feature.id_as_written);
    let display_name = feature
        .metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(display_id);
    files.push(GeneratedFile {
        rel: Path::new(&name).join(OPTIONS_ENV_FILE),
        content: feature.options_env.clone(),
    });
    files.push(GeneratedFile {
        rel: Path::new(&name).join(INSTALL_WRAPPER_FILE),
        content: format!(
            "#!/bin/sh\ndevcell_feature_id={}\ndevcell_feature_name={}\n{INSTALL_WRAPPER_BODY}",
            shell::quote(&feature.id_as_written),
            shell::quote(display_name)
        ),
    });

    df.push_str(&format!("# Feature {index}: {name}\n"));
    for (var, value) in &feature.container_env {
        let invalid = |reason| BuildError::InvalidContainerEnv {
            feature: feature.id_as_written.clone(),
            name: var.clone(),
            reason,
        };
        check_env_name(var).map_err(invalid)?;
        let value = quoted(value, false).map_err(|e| invalid(e.reason()))?;
        df.push_str(&format!("ENV {var}={value}\n"));
    }
    let staged = format!("{STAGING_DIR}/{name}");
    df.push_str(&format!("COPY {}\n", json_array(&[&name, &staged])));
    df.push_str(&format!(
        "RUN cd {staged} && sh ./{INSTALL_WRAPPER_FILE} && cd / && rm -rf {staged}\n"
    ));
    Ok(FeatureFolder {
        name,
        src: feature.dir.clone(),
        entries,
    })
}

/// The Dockerfile after the Features: the image's user back, devcontainer.json's
/// `containerEnv`, the `--label`s and last the `devcontainer.metadata` label (returned).
///
/// Errors: [`BuildError::InvalidContainerEnv`], [`BuildError::InvalidImageLabel`],
/// [`BuildError::InvalidLabel`].
fn dockerfile_tail(
    input: &FeaturesInput,
    labels: &BTreeMap<String, String>,
    container_env: &[(String, String)],
    df: &mut String,
) -> Result<String> {
    if !input.base.user.is_empty() {
        df.push_str(&format!("USER {}\n", input.base.user));
    }
    let feature_entries: Vec<Value> = input
        .features
        .iter()
        .map(|f| metadata::feature_entry(&f.id_as_written, &f.metadata))
        .collect();
    let entries = metadata::collect_entries(
        &input.base.metadata,
        &feature_entries,
        &metadata::config_entry(&input.config),
    );
    for (name, value) in container_env {
        let invalid = |reason| BuildError::InvalidContainerEnv {
            feature: "devcontainer.json".to_string(),
            name: name.clone(),
            reason,
        };
        check_env_name(name).map_err(invalid)?;
        let value_word = quoted(value, true).map_err(|e| invalid(e.reason()))?;
        df.push_str(&format!("ENV {name}={value_word}\n"));
    }
    for (name, value) in labels {
        let invalid = |e: super::dockerfile::WordError| BuildError::InvalidImageLabel {
            name: name.clone(),
            reason: e.reason(),
        };
        if name.is_empty() {
            return Err(BuildError::InvalidImageLabel {
                name: name.clone(),
                reason: "has an empty name",
            });
        }
        let name_word = quoted(name, true).map_err(invalid)?;
        let value_word = quoted(value, true).map_err(invalid)?;
        df.push_str(&format!("LABEL {name_word}={value_word}\n"));
    }
    let label = metadata::label_value(&entries);
    let label_word =
        quoted(&label, true).map_err(|e| BuildError::InvalidLabel { reason: e.reason() })?;
    df.push_str(&format!("LABEL {METADATA_LABEL}={label_word}\n"));
    Ok(label)
}

/// The cache key: what was keyed so far, then every generated file by path, then the
/// Dockerfile.
fn finish_key(mut key: KeyHasher, files: &[GeneratedFile], df: &str) -> String {
    let mut sorted: Vec<&GeneratedFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.rel.cmp(&b.rel));
    for file in sorted {
        key.field("file-path", file.rel.as_os_str().as_encoded_bytes());
        key.field("file-content", file.content.as_bytes());
    }
    key.field("dockerfile", df.as_bytes());
    key.finish()
}

impl FeaturesPlan {
    /// Whether this plan's image has to be built (see [`needs_build`]).
    pub fn needs_build(&self, image_exists: impl FnOnce(&str) -> bool) -> bool {
        needs_build(&self.tag, image_exists)
    }

    /// Writes the build context into a new temporary folder under the system temp folder
    /// (see [`FeaturesPlan::write_context_in`]).
    pub fn write_context(&self) -> Result<BuildContext> {
        self.write_context_in(&std::env::temp_dir())
    }

    /// Writes the build context into a new folder `devcell-features-*` under `parent`
    /// (removed when the returned [`BuildContext`] is dropped): the Dockerfile, the builtin
    /// env file and homes script, and per Feature a folder `<id>_<index>` with the Feature's
    /// files (modes normalised, links kept as links), its options env file and wrapper.
    ///
    /// Errors: [`BuildError::Io`] when something cannot be read or written.
    pub fn write_context_in(&self, parent: &Path) -> Result<BuildContext> {
        let dir = tempfile::Builder::new()
            .prefix("devcell-features-")
            .tempdir_in(parent)
            .map_err(BuildError::io("create", parent))?;
        let root = dir.path();
        for folder in &self.folders {
            let dst = root.join(&folder.name);
            fs::create_dir(&dst).map_err(BuildError::io("create", &dst))?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(0o755))
                .map_err(BuildError::io("write", &dst))?;
            tree::copy(&folder.src, &folder.entries, &dst)?;
        }
        for file in &self.files {
            write_file(&root.join(&file.rel), file.content.as_bytes())?;
        }
        write_file(&root.join("Dockerfile"), self.dockerfile.as_bytes())?;
        Ok(BuildContext { dir })
    }
}

/// Writes `content` to `path` with mode `0644`, replacing what is there (a link is removed,
/// never followed, so a Feature cannot make devcell write outside the context).
fn write_file(path: &Path, content: &[u8]) -> Result<()> {
    if fs::symlink_metadata(path).is_ok() {
        fs::remove_file(path).map_err(BuildError::io("write", path))?;
    }
    fs::write(path, content).map_err(BuildError::io("write", path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644))
        .map_err(BuildError::io("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feature_dir(install: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("install.sh"), install).unwrap();
        fs::write(
            dir.path().join("devcontainer-feature.json"),
            r#"{"id":"x","version":"1.0.0"}"#,
        )
        .unwrap();
        dir
    }

    fn layer(id: &str, dir: &Path, options: &str) -> FeatureLayer {
        FeatureLayer {
            id_as_written: format!("./{id}"),
            dir: dir.to_owned(),
            options_env: options.to_owned(),
            container_env: IndexMap::new(),
            metadata: json!({"id": id, "version": "1.0.0", "name": format!("The {id}"), "postCreateCommand": "echo hi"}),
            digest: None,
        }
    }

    fn input(features: Vec<FeatureLayer>) -> FeaturesInput {
        FeaturesInput {
            base: BaseImage {
                reference: "example/base:1".into(),
                id: "sha256:1111".into(),
                user: "dev".into(),
                metadata: vec![json!({"remoteUser": "dev"})],
            },
            features,
            config: json!({"image": "example/base:1", "postStartCommand": "echo start", "features": {}}),
            container_user: None,
            remote_user: None,
        }
    }

    #[test]
    fn dockerfile_has_one_group_per_feature_in_order() {
        let a = feature_dir("echo a");
        let b = feature_dir("echo b");
        let mut fa = layer("a", a.path(), "X=\"1\"");
        fa.container_env
            .insert("PATH".into(), "/opt/a/bin:${PATH}".into());
        fa.container_env.insert("Q".into(), "say \"hi\"".into());
        let p = plan(&input(vec![fa, layer("b", b.path(), "")])).unwrap();
        let df = &p.dockerfile;
        let lines: Vec<&str> = df.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(lines[0], "FROM example/base:1");
        assert_eq!(lines[1], "USER root");
        assert_eq!(
            lines[4..],
            [
                "ENV PATH=\"/opt/a/bin:${PATH}\"",
                "ENV Q=\"say \\\"hi\\\"\"",
                "COPY [\"a_0\", \"/tmp/dev-container-features/a_0\"]",
                "RUN cd /tmp/dev-container-features/a_0 && sh ./devcontainer-features-install.sh && cd / && rm -rf /tmp/dev-container-features/a_0",
                "COPY [\"b_1\", \"/tmp/dev-container-features/b_1\"]",
                "RUN cd /tmp/dev-container-features/b_1 && sh ./devcontainer-features-install.sh && cd / && rm -rf /tmp/dev-container-features/b_1",
                "USER dev",
                &format!(
                    "LABEL devcontainer.metadata={}",
                    quoted(&p.label, true).unwrap()
                ),
            ]
        );
        assert!(p.tag.starts_with("devcell/features:"));
        assert_eq!(p.tag.len(), "devcell/features:".len() + 64);
    }

    #[test]
    fn label_is_base_then_features_then_config() {
        let a = feature_dir("echo a");
        let p = plan(&input(vec![layer("a", a.path(), "")])).unwrap();
        let label: Value = serde_json::from_str(&p.label).unwrap();
        assert_eq!(
            label,
            json!([
                {"remoteUser": "dev"},
                {"id": "./a", "postCreateCommand": "echo hi"},
                {"postStartCommand": "echo start"}
            ])
        );
    }

    #[test]
    fn root_image_gets_no_user_instructions() {
        let a = feature_dir("echo a");
        let mut i = input(vec![layer("a", a.path(), "")]);
        i.base.user = String::new();
        let p = plan(&i).unwrap();
        assert!(!p.dockerfile.contains("\nUSER "));
        assert_eq!(
            (p.container_user.as_str(), p.remote_user.as_str()),
            ("root", "root")
        );
    }

    #[test]
    fn users_follow_precedence() {
        assert_eq!(
            install_users(None, None, ""),
            ("root".into(), "root".into())
        );
        assert_eq!(
            install_users(None, None, "dev"),
            ("dev".into(), "dev".into())
        );
        assert_eq!(
            install_users(Some("c"), None, "dev"),
            ("c".into(), "c".into())
        );
        assert_eq!(
            install_users(None, Some("r"), "dev"),
            ("dev".into(), "r".into())
        );
    }

    #[test]
    fn labels_go_before_the_metadata_label_and_into_the_key() {
        let a = feature_dir("echo a");
        let input = input(vec![layer("a", a.path(), "X=1")]);
        let plain = plan(&input).unwrap();
        assert_eq!(plan_with_labels(&input, &BTreeMap::new()).unwrap(), plain);
        let labels = BTreeMap::from([
            (
                "org.example.team".to_string(),
                "core \"x\" $HOME".to_string(),
            ),
            ("b".to_string(), String::new()),
        ]);
        let labelled = plan_with_labels(&input, &labels).unwrap();
        assert_ne!(labelled.key, plain.key);
        let lines: Vec<&str> = labelled.dockerfile.lines().collect();
        let n = lines.len();
        assert_eq!(lines[n - 3], r#"LABEL "b"="""#);
        assert_eq!(
            lines[n - 2],
            r#"LABEL "org.example.team"="core \"x\" \$HOME""#
        );
        assert!(lines[n - 1].starts_with("LABEL devcontainer.metadata="));
        for bad in [("", "v"), ("k", "two\nlines")] {
            let labels = BTreeMap::from([(bad.0.to_string(), bad.1.to_string())]);
            let err = plan_with_labels(&input, &labels).unwrap_err();
            assert!(matches!(err, BuildError::InvalidImageLabel { .. }), "{err}");
        }
    }

    #[test]
    fn key_is_stable_and_tracks_every_input() {
        let a = feature_dir("echo a");
        let b = feature_dir("echo b");
        let base = || {
            input(vec![
                layer("a", a.path(), "X=1"),
                layer("b", b.path(), "Y=1"),
            ])
        };
        let first = plan(&base()).unwrap();
        assert_eq!(plan(&base()).unwrap().key, first.key);

        let mut changed = base();
        changed.features[1].options_env = "Y=2".into();
        assert_ne!(plan(&changed).unwrap().key, first.key, "options");

        let mut changed = base();
        changed.base.id = "sha256:2222".into();
        assert_ne!(plan(&changed).unwrap().key, first.key, "base id");

        let mut changed = base();
        changed.remote_user = Some("other".into());
        assert_ne!(plan(&changed).unwrap().key, first.key, "remote user");

        let mut changed = base();
        changed.config = json!({"postStartCommand": "echo other"});
        assert_ne!(plan(&changed).unwrap().key, first.key, "config entry");

        let mut pinned = base();
        pinned.features[0].digest = Some("sha256:abcd".into());
        let pinned_key = plan(&pinned).unwrap().key;
        assert_ne!(pinned_key, first.key, "digest");

        fs::write(a.path().join("install.sh"), "echo A").unwrap();
        assert_ne!(
            plan(&base()).unwrap().key,
            first.key,
            "local folder content"
        );
        // A Feature with a digest is identified by it: its (content-addressed) folder is not
        // hashed again.
        assert_eq!(plan(&pinned).unwrap().key, pinned_key, "digest wins");
    }

    #[test]
    fn missing_install_sh_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = plan(&input(vec![layer("a", dir.path(), "")])).unwrap_err();
        assert!(
            matches!(err, BuildError::MissingInstallScript { .. }),
            "{err}"
        );
    }

    #[test]
    fn bad_container_env_is_an_error() {
        let a = feature_dir("echo a");
        let mut f = layer("a", a.path(), "");
        f.container_env.insert("A B".into(), "x".into());
        let err = plan(&input(vec![f.clone()])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Feature `./a`: `containerEnv` entry `A B` has a name with `=`, whitespace, a quote, `$` or `\\`"
        );
        f.container_env.clear();
        f.container_env.insert("A".into(), "x\ny".into());
        assert!(matches!(
            plan(&input(vec![f])).unwrap_err(),
            BuildError::InvalidContainerEnv { .. }
        ));
    }

    #[test]
    fn folder_names_are_safe() {
        let d = Path::new("/x");
        let mut f = layer("a", d, "");
        f.metadata = json!({});
        f.id_as_written = "ghcr.io/o/r/node:1".into();
        assert_eq!(folder_name(&f, 2), "node_2");
        f.id_as_written = "ghcr.io/o/r/node@sha256:ab".into();
        assert_eq!(folder_name(&f, 0), "node_0");
        f.metadata = json!({"id": "../evil id"});
        assert_eq!(folder_name(&f, 1), "_evil_id_1");
    }

    #[test]
    fn context_holds_dockerfile_features_and_generated_files() {
        let a = feature_dir("echo a");
        // A link named like a generated file must not be followed when writing.
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, a.path().join(OPTIONS_ENV_FILE)).unwrap();
        let p = plan(&input(vec![layer("a", a.path(), "X='1'")])).unwrap();
        let ctx = p.write_context().unwrap();
        let root = ctx.path().to_owned();
        assert_eq!(fs::read_to_string(ctx.dockerfile()).unwrap(), p.dockerfile);
        assert_eq!(
            fs::read_to_string(root.join("a_0").join(OPTIONS_ENV_FILE)).unwrap(),
            "X='1'"
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
        assert!(root.join("a_0/install.sh").is_file());
        assert!(root.join("a_0").join(INSTALL_WRAPPER_FILE).is_file());
        assert_eq!(
            fs::read_to_string(root.join(BUILTIN_ENV_FILE)).unwrap(),
            "_CONTAINER_USER='dev'\n_REMOTE_USER='dev'\n"
        );
        drop(ctx);
        assert!(!root.exists(), "context removed on drop");
    }

    #[test]
    fn layer_from_features_values() {
        use crate::features::options::OptionValue;
        let mut options = ResolvedOptions::new();
        options.insert("my-opt".into(), OptionValue::String("a'b".into()));
        options.insert("flag".into(), OptionValue::Bool(true));
        let meta = json!({"id": "x", "containerEnv": {"A": "1", "PATH": "/x:${PATH}"}});
        let layer =
            FeatureLayer::new("./x", "/tmp/x".into(), meta.clone(), &options, None).unwrap();
        assert_eq!(layer.options_env, "MY_OPT='a'\\''b'\nFLAG='true'\n");
        assert_eq!(
            layer.container_env.iter().collect::<Vec<_>>(),
            [
                (&"A".to_owned(), &"1".to_owned()),
                (&"PATH".to_owned(), &"/x:${PATH}".to_owned())
            ]
        );
        let bad = json!({"id": "x", "containerEnv": {"A": 1}});
        assert!(matches!(
            FeatureLayer::new("./x", "/tmp/x".into(), bad, &options, None),
            Err(BuildError::InvalidContainerEnv { .. })
        ));
    }

    #[test]
    fn bad_base_reference_is_an_error() {
        let a = feature_dir("echo a");
        let mut i = input(vec![layer("a", a.path(), "")]);
        i.base.reference = "x\nRUN evil".into();
        assert!(matches!(plan(&i), Err(BuildError::InvalidReference { .. })));
    }

    #[test]
    fn needs_build_asks_for_the_tag() {
        assert!(needs_build("t", |_| false));
        assert!(!needs_build("t", |tag| tag == "t"));
    }
}
