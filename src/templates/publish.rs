//! `devcell templates publish`: a Template collection as OCI artifacts, as the reference CLI
//! publishes it (spec-note 0643).
//!
//! Each Template folder (`src/<id>/`, or the target itself when it holds
//! `devcontainer-template.json`) becomes an artifact like a Feature's: the `{}` config, one
//! plain tar layer `devcontainer-template-<id>.tgz`, and the `dev.containers.metadata`
//! annotation. The metadata is completed first, as the reference does, with what a tool shows
//! before applying: `type` (`image`, `dockerfile` or `dockerCompose`, from the Template's
//! devcontainer.json), `files` and `fileCount`, `featureIds` (the OCI Features it names), and
//! an `optionalPaths` entry `dir/*` naming a folder of one file replaced by that file. The
//! completed file is packed in place of the author's. Tags move as Features' do
//! ([`crate::oci::artifact::tags_to_publish`]); the collection metadata
//! (`{"templates": […]}`) goes to `<registry>/<namespace>:latest`.
//!
//! A Template is applied without links, `..` paths or `.git` entries (spec-note 0641): one that
//! carries any is refused here, before anything is pushed, rather than published unusable.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Value, json};

use crate::diagnostics::Warning;
use crate::features::publish::{PublishOutcome, publish_each, push_collection};
use crate::oci::artifact::{
    DEVCONTAINERS_LAYER_MEDIA_TYPE, METADATA_ANNOTATION, artifact_manifest, parse_version,
    push_artifact, tags_to_publish, tar_folder_dotted,
};
use crate::oci::digest::sha256_digest;
use crate::oci::registry::{Registry, parse_reference};
use crate::progress::Reporter;

use super::{Result, TEMPLATE_FILE, TemplateError};

/// One packaged Template.
#[derive(Debug, Clone)]
pub struct PackagedTemplate {
    /// The Template `id`.
    pub id: String,
    /// Its `version` (`X.Y.Z`).
    pub version: String,
    /// `devcontainer-template.json`, completed (`type`, `files`, `fileCount`, `featureIds`).
    pub metadata: Value,
    /// The layer: a plain tar of the Template folder with the completed metadata file.
    pub archive: Bytes,
}

impl PackagedTemplate {
    /// The layer file name, `devcontainer-template-<id>.tgz` (the reference's name; the
    /// archive is a plain tar).
    pub fn file_name(&self) -> String {
        format!("devcontainer-template-{}.tgz", self.id)
    }
}

/// What [`publish`] did: each Template's outcome (the reference CLI's JSON), and warnings
/// (folders skipped).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Published {
    /// `id → outcome`, in folder order (`{}` for a version already published).
    pub outcomes: IndexMap<String, PublishOutcome>,
    /// Folders of the collection that hold no Template.
    #[serde(skip)]
    pub warnings: Vec<Warning>,
}

fn invalid(path: &Path, reason: impl Into<String>) -> TemplateError {
    TemplateError::InvalidTemplate {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> TemplateError + '_ {
    move |source| TemplateError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The Template folders of `dir`: `dir` itself when it holds `devcontainer-template.json`,
/// else each sub-folder not starting with `.` that does, sorted by name; a sub-folder without
/// it is skipped with a warning (as the reference does), a linked one refuses the collection.
///
/// # Errors
/// [`TemplateError::InvalidTemplate`] (no Template at all, a linked folder),
/// [`TemplateError::Io`].
pub fn discover(dir: &Path) -> Result<(Vec<PathBuf>, Vec<Warning>)> {
    if dir.join(TEMPLATE_FILE).is_file() {
        return Ok((vec![dir.to_owned()], Vec::new()));
    }
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<std::io::Result<_>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_symlink() {
            // a linked sub-folder would pack (and publish) the host folder it names
            return Err(invalid(
                &path,
                "the Template folder is a symbolic link: devcell packages only real folders",
            ));
        }
        if !kind.is_dir() {
            continue;
        }
        if path.join(TEMPLATE_FILE).is_file() {
            found.push(path);
        } else {
            warnings.push(Warning {
                location: None,
                message: format!("`{}` has no `{TEMPLATE_FILE}`: skipped", path.display()),
            });
        }
    }
    if found.is_empty() {
        return Err(invalid(
            dir,
            format!("no Template found: expected `{TEMPLATE_FILE}` in it or in its sub-folders"),
        ));
    }
    Ok((found, warnings))
}

/// The Template's files, relative, `/`-separated: each folder's files (sorted) before its
/// sub-folders' (sorted). A link, a special file or a `.git` entry refuses the Template.
fn list_files(root: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<String>) -> Result<()> {
        let here = root.join(rel);
        let mut entries: Vec<_> = std::fs::read_dir(&here)
            .map_err(io(&here))?
            .collect::<std::io::Result<_>>()
            .map_err(io(&here))?;
        entries.sort_by_key(|e| e.file_name());
        let mut folders = Vec::new();
        for entry in entries {
            let child = rel.join(entry.file_name());
            let path = root.join(&child);
            if super::apply::is_git_name(&entry.file_name()) {
                return Err(invalid(
                    &path,
                    "a Template must not carry a `.git` entry (`templates apply` refuses it)",
                ));
            }
            let kind = entry.file_type().map_err(io(&path))?;
            if kind.is_dir() {
                folders.push(child);
            } else if kind.is_file() {
                out.push(
                    child
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/"),
                );
            } else {
                return Err(invalid(
                    &path,
                    "is a symbolic link or not a regular file: a Template is applied without \
                     links (`templates apply` refuses it); copy the file instead",
                ));
            }
        }
        for folder in folders {
            walk(root, &folder, out)?;
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, Path::new(""), &mut out)?;
    Ok(out)
}

/// `image`, `dockerfile` or `dockerCompose`: what the Template's devcontainer.json builds from.
fn config_type(config: &Value) -> Option<&'static str> {
    if config.get("image").is_some() {
        Some("image")
    } else if config.get("dockerFile").is_some()
        || config
            .get("build")
            .is_some_and(|b| b.get("dockerfile").is_some() || b.get("dockerFile").is_some())
    {
        Some("dockerfile")
    } else if config.get("dockerComposeFile").is_some() {
        Some("dockerCompose")
    } else {
        None
    }
}

/// `registry/repository` of each OCI Feature under `features` (local and tarball Features are
/// not listed, as the reference lists them).
fn feature_ids(config: &Value) -> Vec<String> {
    let Some(features) = config.get("features").and_then(Value::as_object) else {
        return Vec::new();
    };
    features
        .keys()
        .filter_map(
            |key| match crate::features::reference::FeatureRef::parse(key) {
                Ok(r @ crate::features::reference::FeatureRef::Oci { .. }) => Some(r.resource()),
                _ => None,
            },
        )
        .collect()
}

/// An `optionalPaths` entry `dir/*` whose folder holds a single file names that file instead
/// (the reference's rule, so a tool offers the file itself).
fn narrow_optional_paths(metadata: &mut Value, files: &[String]) {
    let Some(paths) = metadata
        .get_mut("optionalPaths")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for entry in paths.iter_mut() {
        let Some(text) = entry.as_str() else { continue };
        let Some(prefix) = text.strip_suffix("/*").filter(|p| !p.is_empty()) else {
            continue;
        };
        let inside: Vec<&String> = files.iter().filter(|f| f.starts_with(prefix)).collect();
        if let [only] = inside.as_slice() {
            *entry = Value::String((*only).clone());
        }
    }
}

/// Packages one Template folder: checks `id` (`[a-z0-9_-]`, equal to the folder name in a
/// collection), `version` (`X.Y.Z`) and `name`, reads its devcontainer.json
/// (`.devcontainer/devcontainer.json` or `.devcontainer.json`), completes the metadata and tars
/// the folder.
///
/// # Errors
/// [`TemplateError::InvalidTemplate`], [`TemplateError::Io`].
pub fn package_template(dir: &Path, in_collection: bool) -> Result<PackagedTemplate> {
    let file = dir.join(TEMPLATE_FILE);
    let text =
        crate::features::metadata::read_collection_file(dir, TEMPLATE_FILE).map_err(io(&file))?;
    let mut metadata = crate::config::jsonc::parse(&file, &text)
        .map_err(|e| invalid(dir, format!("`{TEMPLATE_FILE}` is invalid: {e}")))?
        .value;
    if !metadata.is_object() {
        return Err(invalid(
            dir,
            format!("`{TEMPLATE_FILE}` is not a JSON object"),
        ));
    }
    let string = |key: &str| metadata.get(key).and_then(Value::as_str).map(str::to_owned);
    let id = string("id").ok_or_else(|| invalid(dir, "`id` is missing or not a string"))?;
    let valid_name = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !valid_name {
        return Err(invalid(
            dir,
            format!("`id` `{id}` must be lowercase letters, digits, `-` or `_`"),
        ));
    }
    if in_collection && dir.file_name().and_then(|n| n.to_str()) != Some(id.as_str()) {
        return Err(invalid(
            dir,
            format!("`id` `{id}` must equal the folder name"),
        ));
    }
    let version =
        string("version").ok_or_else(|| invalid(dir, "`version` is missing or not a string"))?;
    if parse_version(&version).is_none() {
        return Err(invalid(
            dir,
            format!("`version` `{version}` is not `MAJOR.MINOR.PATCH` (plain numbers)"),
        ));
    }
    if string("name").is_none() {
        return Err(invalid(dir, "`name` is missing or not a string"));
    }
    let files = list_files(dir)?;
    let config_rel = [".devcontainer.json", ".devcontainer/devcontainer.json"]
        .into_iter()
        .find(|rel| files.iter().any(|f| f == rel))
        .ok_or_else(|| {
            invalid(
                dir,
                "the Template has no `.devcontainer/devcontainer.json` (or `.devcontainer.json`)",
            )
        })?;
    let config_path = dir.join(config_rel);
    let config_text = std::fs::read_to_string(&config_path).map_err(io(&config_path))?;
    let config = crate::config::jsonc::parse(&config_path, &config_text)
        .map_err(|e| invalid(&config_path, format!("not valid JSONC: {e}")))?
        .value;
    let kind = config_type(&config).ok_or_else(|| {
        invalid(
            &config_path,
            "names none of `image`, `dockerFile` (or `build.dockerfile`) and `dockerComposeFile`",
        )
    })?;
    metadata["type"] = json!(kind);
    metadata["files"] = json!(files);
    metadata["fileCount"] = json!(files.len());
    metadata["featureIds"] = json!(feature_ids(&config));
    narrow_optional_paths(&mut metadata, &files);
    let completed = pretty4(&metadata);
    // packed from a copy made through descriptors: no link swapped in is followed (attack
    // 29, G4)
    let copy =
        crate::features::nofollow_copy::snapshot(dir).map_err(|e| io(&e.path.clone())(e.source))?;
    let archive = tar_folder_dotted(copy.path(), &[(Path::new(TEMPLATE_FILE), &completed)])
        .map_err(io(dir))?;
    Ok(PackagedTemplate {
        id,
        version,
        metadata,
        archive: Bytes::from(archive),
    })
}

/// JSON with four-space indentation (the layout the reference packs).
fn pretty4(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(
        &mut out,
        serde_json::ser::PrettyFormatter::with_indent(b"    "),
    );
    let _ = value.serialize(&mut ser);
    out
}

/// Packages every Template under `dir` (see [`discover`]).
///
/// # Errors
/// As [`discover`] and [`package_template`].
pub fn package_all(dir: &Path) -> Result<(Vec<PackagedTemplate>, Vec<Warning>)> {
    let (dirs, warnings) = discover(dir)?;
    let in_collection = !(dirs.len() == 1 && dirs[0] == dir);
    let templates = dirs
        .iter()
        .map(|d| package_template(d, in_collection))
        .collect::<Result<_>>()?;
    Ok((templates, warnings))
}

/// The collection metadata `{"sourceInformation": {…}, "templates": [<metadata>…]}`.
pub fn collection_json(templates: &[PackagedTemplate]) -> Value {
    json!({
        "sourceInformation": {"source": "devcell", "version": env!("CARGO_PKG_VERSION")},
        "templates": templates.iter().map(|t| t.metadata.clone()).collect::<Vec<_>>(),
    })
}

/// Publishes one packaged Template to `<registry>/<namespace>/<id>`: `{}` when its version is
/// already there.
///
/// # Errors
/// [`TemplateError::Push`].
pub async fn publish_template(
    registry: &Registry,
    target_registry: &str,
    namespace: &str,
    template: &PackagedTemplate,
) -> Result<PublishOutcome> {
    let repository = format!("{target_registry}/{namespace}/{}", template.id);
    let push = |source| TemplateError::Push {
        reference: repository.clone(),
        source,
    };
    let version = parse_version(&template.version)
        .ok_or_else(|| invalid(Path::new(&template.id), "`version` is not `X.Y.Z`"))?;
    let reference = parse_reference(&format!("{repository}:latest")).map_err(push)?;
    let published = registry
        .list_tags_unmirrored(&reference)
        .await
        .map_err(push)?;
    let Some(tags) = tags_to_publish(version, &published) else {
        return Ok(PublishOutcome::default());
    };
    let mut annotations = IndexMap::new();
    annotations.insert(
        METADATA_ANNOTATION.to_owned(),
        serde_json::to_string(&template.metadata).unwrap_or_default(),
    );
    let manifest = artifact_manifest(
        DEVCONTAINERS_LAYER_MEDIA_TYPE,
        &sha256_digest(&template.archive),
        template.archive.len(),
        &template.file_name(),
        &annotations,
    );
    let digest = push_artifact(
        registry,
        &repository,
        template.archive.clone(),
        manifest,
        &tags,
    )
    .await
    .map_err(push)?;
    Ok(PublishOutcome {
        published_tags: Some(tags),
        digest: Some(digest),
        version: Some(template.version.clone()),
        published_legacy_ids: None,
    })
}

/// `devcell templates publish DIR --registry R --namespace NS`: packages every Template under
/// `dir` (nothing is pushed when one is invalid), publishes each, then the collection metadata
/// to `<registry>/<namespace>:latest`, reporting each step to `reporter`.
///
/// # Errors
/// As [`package_all`] and [`publish_template`].
pub async fn publish(
    registry: &Registry,
    dir: &Path,
    target_registry: &str,
    namespace: &str,
    reporter: &dyn Reporter,
) -> Result<Published> {
    let (templates, warnings) = package_all(dir)?;
    let at = (target_registry, namespace);
    let id_version = |t: &PackagedTemplate| (t.id.clone(), t.version.clone());
    let outcomes = publish_each(&templates, at, reporter, id_version, async |t| {
        publish_template(registry, target_registry, namespace, t).await
    })
    .await?;
    let collection = collection_json(&templates);
    push_collection(registry, at, &collection, &IndexMap::new(), reporter)
        .await
        .map_err(|source| TemplateError::Push {
            reference: format!("{target_registry}/{namespace}"),
            source,
        })?;
    Ok(Published { outcomes, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn collection() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("alpha");
        write(
            &a,
            TEMPLATE_FILE,
            r#"{ // comment
              "id": "alpha", "version": "1.2.3", "name": "Alpha",
              "optionalPaths": [".github/*", "docs/*"] }"#,
        );
        write(
            &a,
            ".devcontainer/devcontainer.json",
            r#"{ "build": {"dockerfile": "Dockerfile"},
                 "features": {"ghcr.io/devcontainers/features/git:1": {}, "./local": {},
                              "127.0.0.1:5000/a/b/c@sha256:0000000000000000000000000000000000000000000000000000000000000000": {}} }"#,
        );
        write(&a, "NOTES.md", "notes\n");
        write(&a, ".github/workflows/ci.yml", "on: push\n");
        write(&a, "docs/a.md", "a\n");
        write(&a, "docs/b.md", "b\n");
        write(dir.path(), "no-template/readme.txt", "x\n");
        dir
    }

    /// The completed metadata: type, files (folder files before sub-folders), fileCount,
    /// featureIds (OCI only, without version), and `dir/*` of one file narrowed to the file.
    #[test]
    fn metadata_is_completed_as_the_reference_completes_it() {
        let dir = collection();
        let (templates, warnings) = package_all(dir.path()).unwrap();
        assert_eq!(templates.len(), 1);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].message.contains("no-template"), "{warnings:?}");
        let m = &templates[0].metadata;
        assert_eq!(m["type"], "dockerfile");
        assert_eq!(
            m["files"],
            json!([
                "NOTES.md",
                "devcontainer-template.json",
                ".devcontainer/devcontainer.json",
                ".github/workflows/ci.yml",
                "docs/a.md",
                "docs/b.md"
            ])
        );
        assert_eq!(m["fileCount"], 6);
        assert_eq!(
            m["featureIds"],
            json!(["ghcr.io/devcontainers/features/git", "127.0.0.1:5000/a/b/c"])
        );
        assert_eq!(
            m["optionalPaths"],
            json!([".github/workflows/ci.yml", "docs/*"])
        );
        // the archive carries the completed file, four-space indented, and is reproducible
        let mut tar = tar::Archive::new(templates[0].archive.as_ref());
        let mut found = None;
        for e in tar.entries().unwrap() {
            let mut e = e.unwrap();
            if e.path().unwrap() == Path::new("./devcontainer-template.json") {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut e, &mut s).unwrap();
                found = Some(s);
            }
        }
        let packed = found.unwrap();
        assert!(packed.contains("\n    \"id\": \"alpha\""), "{packed}");
        assert_eq!(serde_json::from_str::<Value>(&packed).unwrap(), *m);
        let again = package_all(dir.path()).unwrap().0;
        assert_eq!(again[0].archive, templates[0].archive);
        let coll = collection_json(&templates);
        assert_eq!(coll["templates"][0]["id"], "alpha");
    }

    #[test]
    fn invalid_templates_are_refused_with_the_reason() {
        let cases: &[(&str, &str, &str)] = &[
            (
                r#"{"id":"t","version":"1.0"}"#,
                r#"{"image":"x"}"#,
                "MAJOR.MINOR.PATCH",
            ),
            (
                r#"{"id":"t","version":"1.0.0"}"#,
                r#"{"image":"x"}"#,
                "`name`",
            ),
            (
                r#"{"id":"T","version":"1.0.0","name":"n"}"#,
                r#"{"image":"x"}"#,
                "lowercase",
            ),
            (
                r#"{"id":"t","version":"1.0.0","name":"n"}"#,
                r#"{"name":"x"}"#,
                "dockerComposeFile",
            ),
        ];
        for (meta, config, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), TEMPLATE_FILE, meta);
            write(dir.path(), ".devcontainer.json", config);
            let err = package_all(dir.path()).unwrap_err().to_string();
            assert!(err.contains(expected), "{meta} {config}: {err}");
        }
    }

    /// A link or a `.git` entry in a Template refuses it before anything is packed: `apply`
    /// would refuse it, and the link could name a host file.
    #[test]
    fn a_link_or_git_entry_refuses_the_template() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        write(
            &t,
            TEMPLATE_FILE,
            r#"{"id":"t","version":"1.0.0","name":"T"}"#,
        );
        write(&t, ".devcontainer.json", r#"{"image":"x"}"#);
        std::os::unix::fs::symlink("/etc/passwd", t.join("passwd")).unwrap();
        let err = package_all(dir.path()).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::remove_file(t.join("passwd")).unwrap();
        write(&t, ".git/config", "[core]\n");
        let err = package_all(dir.path()).unwrap_err().to_string();
        assert!(err.contains(".git"), "{err}");
        std::fs::remove_dir_all(t.join(".git")).unwrap();
        assert_eq!(package_all(dir.path()).unwrap().0.len(), 1);
    }
}
