//! `templates apply`: a Template's files written into the workspace folder (spec-note 0641).
//!
//! The steps:
//! 1. [`stage`]: the archive is extracted into a private staging folder with
//!    [`crate::oci::extract`] (no absolute path, no `..`, no device, bounded sizes);
//! 2. [`entries`]: its files are listed in archive order, the always-omitted ones
//!    ([`super::ALWAYS_OMITTED`]) and `--omit-paths` left out; a link among the rest refuses
//!    the Template (links are never applied);
//! 3. [`check_targets`]: every destination is checked before anything is written: no folder on
//!    the way and no destination may be a link (the workspace's own links are not followed
//!    either), or something other than a file;
//! 4. [`write_files`]: each file is written with `${templateOption:…}` substituted (text
//!    files only; a binary file is copied as is), opened without following a link; a file
//!    that was already there is overwritten and named in a warning;
//! 5. [`add_features`]: `--features` are added to the configuration `up` will use
//!    ([`features_target`], decided before step 4; a link there refuses the Template) with its
//!    comments and layout kept, written as a new file renamed into place.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::Value;

use crate::diagnostics::Warning;
use crate::oci::extract::ExtractOptions;

use super::options::{OptionValues, substitute};
use super::{ALWAYS_OMITTED, Result, TemplateError};

/// A Feature to add to the Template's devcontainer.json (`--features`).
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureToAdd {
    /// The Feature reference (the key under `features`).
    pub id: String,
    /// Its options (the value under `features`; `{}` when none).
    pub options: Value,
}

/// What to apply where.
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    /// The Template reference (for messages).
    pub template: &'a str,
    /// The Template's archive (tar or tar+gzip).
    pub archive: &'a [u8],
    /// The workspace folder: nothing is written outside it.
    pub workspace_folder: &'a Path,
    /// The option values to substitute.
    pub values: &'a OptionValues,
    /// `--features`.
    pub features: &'a [FeatureToAdd],
    /// `--omit-paths`: files, or folders written `dir/*`.
    pub omit_paths: &'a [String],
    /// `--tmp-dir`: where the archive is staged (default: the system's temporary folder).
    pub tmp_dir: Option<&'a Path>,
}

/// What [`apply`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// The files written, as the archive names them (`./.devcontainer/devcontainer.json`), in
    /// archive order: the reference CLI's `{"files": […]}`.
    pub files: Vec<String>,
    /// Files overwritten, Features without a devcontainer.json to go to, and the like.
    pub warnings: Vec<Warning>,
}

/// Parses `--features`: a JSON array of `{"id": "<reference>", "options": {…}}`.
///
/// # Errors
/// [`TemplateError::InvalidFlag`].
pub fn parse_features(text: &str) -> Result<Vec<FeatureToAdd>> {
    let invalid = |reason: String| TemplateError::InvalidFlag {
        flag: "--features",
        reason,
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
    let Value::Array(items) = value else {
        return Err(invalid(format!(
            "expected a JSON array, got {}",
            crate::formats::json::kind(&value)
        )));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let id = item.get("id").and_then(Value::as_str).ok_or_else(|| {
                invalid(format!("item {i}: expected an object with a string `id`"))
            })?;
            let options = match item.get("options") {
                None | Some(Value::Null) => Value::Object(Default::default()),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(other) => {
                    return Err(invalid(format!(
                        "item {i} (`{id}`): `options` must be an object, got {}",
                        crate::formats::json::kind(other)
                    )));
                }
            };
            Ok(FeatureToAdd {
                id: id.to_owned(),
                options,
            })
        })
        .collect()
}

/// Parses `--omit-paths`: a JSON array of strings.
///
/// # Errors
/// [`TemplateError::InvalidFlag`].
pub fn parse_omit_paths(text: &str) -> Result<Vec<String>> {
    let invalid = |reason: String| TemplateError::InvalidFlag {
        flag: "--omit-paths",
        reason,
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
    match value {
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                other => Err(invalid(format!(
                    "expected strings, got {}",
                    crate::formats::json::kind(&other)
                ))),
            })
            .collect(),
        other => Err(invalid(format!(
            "expected a JSON array, got {}",
            crate::formats::json::kind(&other)
        ))),
    }
}

/// Applies a Template: the steps of the module documentation.
///
/// # Errors
/// [`TemplateError::Extract`] (unsafe or unreadable archive), [`TemplateError::Unsafe`] (a
/// link in the Template or on the way in the workspace; nothing is written then),
/// [`TemplateError::Io`], [`TemplateError::Config`].
pub fn apply(request: &ApplyRequest<'_>) -> Result<Applied> {
    let staging = stage(request)?;
    let root = staging.path().join("t");
    let files = entries(request, &root)?;
    let overwritten = check_targets(request, &files)?;
    let config = features_target(request, &files)?;
    // Only once the Template is accepted: a refused one leaves no folder behind either.
    std::fs::create_dir_all(request.workspace_folder).map_err(|source| TemplateError::Io {
        path: request.workspace_folder.to_owned(),
        source,
    })?;
    let mut applied = Applied::default();
    for rel in &overwritten {
        applied.warnings.push(Warning {
            location: None,
            message: format!(
                "`{}` was already in the workspace and is overwritten by the Template",
                rel.display()
            ),
        });
    }
    write_files(request, &root, &files)?;
    add_features(request, config.as_deref(), &mut applied.warnings)?;
    applied.files = files
        .iter()
        .map(|rel| format!("./{}", rel.display()))
        .collect();
    Ok(applied)
}

/// Step 1: the archive extracted into a fresh private folder (`<staging>/t`).
fn stage(request: &ApplyRequest<'_>) -> Result<tempfile::TempDir> {
    let parent = request
        .tmp_dir
        .map(Path::to_owned)
        .unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&parent).map_err(|source| TemplateError::Io {
        path: parent.clone(),
        source,
    })?;
    let staging = tempfile::Builder::new()
        .prefix("devcell-template-")
        .tempdir_in(&parent)
        .map_err(|source| TemplateError::Io {
            path: parent.clone(),
            source,
        })?;
    crate::oci::extract::extract(
        request.archive,
        &staging.path().join("t"),
        &ExtractOptions::default(),
    )
    .map_err(|source| TemplateError::Extract {
        template: request.template.to_owned(),
        source,
    })?;
    Ok(staging)
}

/// Whether `rel` (a normalised relative path with `/`) is left out.
fn omitted(rel: &str, omit_paths: &[String]) -> bool {
    let strip = |p: &str| p.trim_start_matches("./").to_owned();
    ALWAYS_OMITTED.contains(&rel)
        || omit_paths.iter().any(|p| match p.strip_suffix("/*") {
            Some(dir) => rel.starts_with(&format!("{}/", strip(dir))),
            None => strip(p) == rel,
        })
}

/// Whether a path component names git's own folder or file: `.git`, in any case and with
/// trailing dots or spaces (which case-insensitive or Windows-like file systems fold away).
pub(crate) fn is_git_name(component: &std::ffi::OsStr) -> bool {
    component
        .to_string_lossy()
        .trim_end_matches(['.', ' '])
        .eq_ignore_ascii_case(".git")
}

/// Step 2: the files to apply, relative, in archive order. The archive was extracted safely
/// already, so its names are relative and free of `..`.
fn entries(request: &ApplyRequest<'_>, root: &Path) -> Result<Vec<PathBuf>> {
    let io = |source| TemplateError::Io {
        path: PathBuf::from(request.template),
        source,
    };
    let reader: Box<dyn Read + '_> = if crate::oci::extract::is_gzip(request.archive) {
        Box::new(flate2::read::GzDecoder::new(request.archive))
    } else {
        Box::new(request.archive)
    };
    let mut tar = tar::Archive::new(reader);
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in tar.entries().map_err(io)? {
        let entry = entry.map_err(io)?;
        let rel: PathBuf = entry
            .path()
            .map_err(io)?
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        let name = rel.to_string_lossy().into_owned();
        if rel.as_os_str().is_empty() || omitted(&name, request.omit_paths) {
            continue;
        }
        if rel.components().any(|c| is_git_name(c.as_os_str())) {
            return Err(TemplateError::Unsafe {
                template: request.template.to_owned(),
                path: name,
                reason: "is inside a `.git` folder or file; git runs what its configuration \
                         and hooks name, so a Template never writes them"
                    .into(),
            });
        }
        let kind = entry.header().entry_type();
        if kind.is_symlink() {
            return Err(TemplateError::Unsafe {
                template: request.template.to_owned(),
                path: name,
                reason: "is a symbolic link; links in a Template are never applied".into(),
            });
        }
        // Regular files and hard links (the extractor made them copies of files in the root).
        if (kind.is_file() || kind.is_hard_link())
            && root.join(&rel).is_file()
            && !files.contains(&rel)
        {
            files.push(rel);
        }
    }
    Ok(files)
}

/// Step 3: checks every destination before anything is written. Returns the files that exist
/// already (to be overwritten).
///
/// # Errors
/// [`TemplateError::Unsafe`] for a link or a non-folder on the way, or a destination that is
/// a link or not a regular file.
fn check_targets(request: &ApplyRequest<'_>, files: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut overwritten = Vec::new();
    for rel in files {
        if check_target(request, rel)? {
            overwritten.push(rel.clone());
        }
    }
    Ok(overwritten)
}

/// Checks one destination `rel` (relative to the workspace folder): no link and nothing but
/// folders on the way, and the destination, when it exists, a regular file (not a link).
/// Returns whether it exists.
///
/// # Errors
/// [`TemplateError::Unsafe`].
fn check_target(request: &ApplyRequest<'_>, rel: &Path) -> Result<bool> {
    let unsafe_at = |path: &Path, reason: &str| TemplateError::Unsafe {
        template: request.template.to_owned(),
        path: path.display().to_string(),
        reason: reason.to_owned(),
    };
    let mut at = PathBuf::new();
    let parts: Vec<_> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let last = i + 1 == parts.len();
        let Ok(meta) = std::fs::symlink_metadata(request.workspace_folder.join(&at)) else {
            return Ok(false); // Missing: created later, so nothing further down exists either.
        };
        if meta.file_type().is_symlink() {
            return Err(unsafe_at(
                &at,
                "is a symbolic link in the workspace; devcell does not write through it",
            ));
        }
        match (last, meta.is_dir(), meta.is_file()) {
            (false, true, _) => {}
            (false, false, _) => return Err(unsafe_at(&at, "is in the way: not a folder")),
            (true, _, true) => return Ok(true),
            (true, _, false) => {
                return Err(unsafe_at(&at, "is in the way: not a regular file"));
            }
        }
    }
    Ok(false)
}

/// Step 4: writes each file, substituted, without following a link: its folder is opened
/// (and made) through descriptors from the workspace folder, the file created beside it and
/// renamed into place ([`nofollow`]).
fn write_files(request: &ApplyRequest<'_>, root: &Path, files: &[PathBuf]) -> Result<()> {
    for rel in files {
        let from = root.join(rel);
        let to = request.workspace_folder.join(rel);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| TemplateError::Io { path, source }
        };
        let data = std::fs::read(&from).map_err(io(&from))?;
        let data = match String::from_utf8(data) {
            Ok(text) => substitute(&text, request.values).into_bytes(),
            Err(binary) => binary.into_bytes(),
        };
        let mode = std::fs::metadata(&from)
            .map_err(io(&from))?
            .permissions()
            .mode()
            & 0o777;
        let (dir, name) = open_parent(request, rel, true)?;
        nofollow::write_at(&dir, name, &data, mode | 0o600).map_err(io(&to))?;
    }
    Ok(())
}

/// The folder of `rel` (a file's path inside the workspace folder) opened through
/// descriptors, made when `create` ([`nofollow::open_dir`]), and the file's name in it.
///
/// # Errors
/// [`TemplateError::Unsafe`] for a link or a file on the way (one could have appeared since
/// [`check_targets`]); [`TemplateError::Io`].
fn open_parent<'a>(
    request: &ApplyRequest<'_>,
    rel: &'a Path,
    create: bool,
) -> Result<(std::os::fd::OwnedFd, &'a std::ffi::OsStr)> {
    let path = request.workspace_folder.join(rel);
    let Some(name) = rel.file_name() else {
        return Err(TemplateError::Unsafe {
            template: request.template.to_owned(),
            path: path.display().to_string(),
            reason: "names no file".into(),
        });
    };
    let parent = rel.parent().unwrap_or(Path::new(""));
    match nofollow::open_dir(request.workspace_folder, parent, create) {
        Ok(dir) => Ok((dir, name)),
        Err(e) if nofollow::is_link_met(&e) => Err(TemplateError::Unsafe {
            template: request.template.to_owned(),
            path: request.workspace_folder.join(parent).display().to_string(),
            reason: "has a link or a file on the way; devcell does not write through it (files written before it stay)"
                .into(),
        }),
        Err(source) => Err(TemplateError::Io { path, source }),
    }
}

/// Step 3b: the configuration `--features` go to, relative to the workspace folder, decided
/// before anything is written: the one `up` picks once the Template's files are there
/// (`.devcontainer/devcontainer.json`, then `.devcontainer.json`; spec-note 0003), whether the
/// Template writes it or the workspace has it; else the Template's one
/// `.devcontainer/<name>/devcontainer.json` (the file a user passes with `--config`). `None`
/// when there are no Features or no such file.
///
/// # Errors
/// [`TemplateError::Unsafe`] when that configuration is a link, is not a regular file, or
/// has a link on the way: devcell never edits through one.
fn features_target(request: &ApplyRequest<'_>, files: &[PathBuf]) -> Result<Option<PathBuf>> {
    if request.features.is_empty() {
        return Ok(None);
    }
    for location in crate::config::discover::default_locations(Path::new("")) {
        if check_target(request, &location)? || files.contains(&location) {
            return Ok(Some(location));
        }
    }
    let mut subfolder = files.iter().filter(|rel| {
        let parts: Vec<_> = rel.components().collect();
        parts.len() == 3
            && parts[0].as_os_str() == ".devcontainer"
            && parts[2].as_os_str() == "devcontainer.json"
    });
    match (subfolder.next(), subfolder.next()) {
        (Some(only), None) => Ok(Some(only.clone())),
        _ => Ok(None),
    }
}

/// Step 5: adds `--features` to `config` (from [`features_target`]), its comments and layout
/// kept, read without following a link and written anew through its folder's descriptor
/// ([`nofollow`]).
fn add_features(
    request: &ApplyRequest<'_>,
    config: Option<&Path>,
    warnings: &mut Vec<Warning>,
) -> Result<()> {
    if request.features.is_empty() {
        return Ok(());
    }
    let Some(rel) = config else {
        warnings.push(Warning {
            location: None,
            message: format!(
                "Template `{}` has no devcontainer.json that `up` would use to add the Features to; they were not added",
                request.template
            ),
        });
        return Ok(());
    };
    // Again now: a link could have appeared on the way since the check before writing.
    check_target(request, rel)?;
    let path = request.workspace_folder.join(rel);
    let config = |reason: String| TemplateError::Config {
        path: path.clone(),
        reason,
    };
    let io = |source| TemplateError::Io {
        path: path.clone(),
        source,
    };
    let (dir, name) = open_parent(request, rel, false)?;
    let (bytes, mode) = nofollow::read_at(&dir, name).map_err(|e| {
        if nofollow::is_link_met(&e)
            || e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error())
        {
            config("not a regular file (or a link)".into())
        } else {
            io(e)
        }
    })?;
    let text = String::from_utf8(bytes).map_err(|_| config("not UTF-8".into()))?;
    let root = CstRootNode::parse(&text, &Default::default())
        .map_err(|e| config(format!("not valid JSONC: {e}")))?;
    let object = root
        .object_value()
        .ok_or_else(|| config("its root is not an object".into()))?;
    let features = object.object_value_or_set("features");
    for feature in request.features {
        let value = to_cst(&feature.options);
        match features.get(&feature.id) {
            Some(existing) => existing.set_value(value),
            None => {
                features.append(&feature.id, value);
            }
        }
    }
    nofollow::write_at(&dir, name, root.to_string().as_bytes(), mode).map_err(io)
}

/// A JSON value as the JSONC editor's input.
fn to_cst(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(to_cst).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), to_cst(v))).collect())
        }
    }
}

mod nofollow;
#[cfg(test)]
mod tests;
