//! `features generate-docs` and `templates generate-docs`: a `README.md` for each Feature or
//! Template of a collection folder, as the reference CLI writes it (spec-note 0644).
//!
//! This module reads and renders; writing the files (never through a link) is the caller's.
//! The page: an "important note" for a deprecated Feature or one with `legacyIds`, the title
//! `Name (id)`, the description, for a Feature an example of its use
//! (`<registry>/<namespace>/<id>:<major>`), the options table, for a Feature its VS Code
//! extensions, the item's `NOTES.md`, and a footer linking the metadata file on GitHub when
//! an owner and a repository are given.
//!
//! Where devcell differs: an option without a `default` shows `-` (the reference prints
//! `undefined`), and every placeholder is filled once from the metadata as written (the
//! reference fills them in turn, so a description holding `#{Name}` is filled again).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::diagnostics::Warning;

use super::metadata::read_collection_file;

/// Which kind of collection, and what a Feature's example needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocsKind {
    /// Features: the example names `<registry>/<namespace>/<id>:<major>`.
    Feature {
        /// `--registry`.
        registry: String,
        /// `--namespace`.
        namespace: String,
    },
    /// Templates.
    Template,
}

impl DocsKind {
    /// The metadata file of an item of this kind.
    pub fn metadata_file(&self) -> &'static str {
        match self {
            DocsKind::Feature { .. } => super::metadata::FEATURE_FILE,
            DocsKind::Template => "devcontainer-template.json",
        }
    }
}

/// Where the footer links: `https://github.com/<owner>/<repo>/blob/main/<folder>/<item>/<file>`
/// when both are given, else the file name.
#[derive(Debug, Clone, Default)]
pub struct RepoLink {
    /// `--github-owner`.
    pub owner: String,
    /// `--github-repo`.
    pub repo: String,
}

/// One page to write: `<folder>/<item>/README.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The item's folder.
    pub item: PathBuf,
    /// The Markdown.
    pub text: String,
}

/// The pages of every item of `folder` (each sub-folder not starting with `.`, sorted), and
/// warnings for the sub-folders skipped: no metadata file, one that is not JSONC or has no
/// `id`, or a link (its metadata is not read).
///
/// # Errors
/// Reading `folder`.
pub fn pages(
    folder: &Path,
    folder_as_given: &str,
    kind: &DocsKind,
    link: &RepoLink,
) -> std::io::Result<(Vec<Page>, Vec<Warning>)> {
    let mut entries: Vec<_> = std::fs::read_dir(folder)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    let file = kind.metadata_file();
    let mut pages = Vec::new();
    let mut warnings = Vec::new();
    let mut warn = |message: String| {
        warnings.push(Warning {
            location: None,
            message,
        })
    };
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.file_type()?.is_dir() {
            continue;
        }
        let item = entry.path();
        let text = match read_collection_file(&item, file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                warn(format!(
                    "`{file}` not found in `{}`: skipped",
                    item.display()
                ));
                continue;
            }
            Err(e) => {
                warn(format!("`{}`: {e}: skipped", item.join(file).display()));
                continue;
            }
        };
        let metadata = match crate::config::jsonc::parse(&item.join(file), &text) {
            Ok(doc) if doc.value.get("id").and_then(Value::as_str).is_some() => doc.value,
            Ok(_) => {
                warn(format!("`{file}` of `{name}` has no `id`: skipped"));
                continue;
            }
            Err(e) => {
                warn(format!(
                    "cannot parse `{}`: {e}: skipped",
                    item.join(file).display()
                ));
                continue;
            }
        };
        let notes = read_collection_file(&item, "NOTES.md").unwrap_or_default();
        let repo_url = if link.owner.is_empty() || link.repo.is_empty() {
            file.to_owned()
        } else {
            let folder = folder_as_given
                .strip_prefix("./")
                .unwrap_or(folder_as_given);
            format!(
                "https://github.com/{}/{}/blob/main/{folder}/{name}/{file}",
                link.owner, link.repo
            )
        };
        pages.push(Page {
            text: render(&metadata, kind, &notes, &repo_url),
            item,
        });
    }
    Ok((pages, warnings))
}

/// A JSON value as the page shows it: strings as written, arrays comma-joined.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// The options table (empty when the metadata has no `options` object).
fn options_table(metadata: &Value) -> String {
    let Some(options) = metadata.get("options").and_then(Value::as_object) else {
        return String::new();
    };
    let mut table = String::from(
        "## Options\n\n| Options Id | Description | Type | Default Value |\n|-----|-----|-----|-----|\n",
    );
    let rows: Vec<String> = options
        .iter()
        .map(|(id, option)| {
            let field = |key: &str| match option.get(key) {
                None | Some(Value::Null) => "-".to_owned(),
                Some(Value::String(s)) if s.is_empty() => "-".to_owned(),
                Some(v) => shown(v),
            };
            let default = match option.get("default") {
                None => "-".to_owned(),
                Some(Value::String(s)) if s.is_empty() => "-".to_owned(),
                Some(v) => shown(v),
            };
            format!(
                "| {id} | {} | {} | {default} |",
                field("description"),
                field("type")
            )
        })
        .collect();
    table.push_str(&rows.join("\n"));
    table
}

/// The page of one item.
pub fn render(metadata: &Value, kind: &DocsKind, notes: &str, repo_url: &str) -> String {
    let text = |key: &str| metadata.get(key).and_then(Value::as_str).unwrap_or("");
    let id = text("id");
    let title = match metadata.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => format!("{name} ({id})"),
        _ => id.to_owned(),
    };
    let mut page = String::new();
    if let DocsKind::Feature { .. } = kind {
        let deprecated = metadata
            .get("deprecated")
            .is_some_and(|d| !matches!(d, Value::Bool(false) | Value::Null));
        let legacy: Vec<String> = metadata
            .get("legacyIds")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|v| format!("'{}'", shown(v))).collect())
            .unwrap_or_default();
        if deprecated || !legacy.is_empty() {
            page.push_str("### **IMPORTANT NOTE**\n");
            if deprecated {
                page.push_str("- **This Feature is deprecated, and will no longer receive any further updates/support.**\n");
            }
            if !legacy.is_empty() {
                page.push_str(&format!(
                    "- **Ids used to publish this Feature in the past - {}**\n",
                    legacy.join(", ")
                ));
            }
        }
    }
    page.push_str(&format!("\n# {title}\n\n{}\n\n", text("description")));
    match kind {
        DocsKind::Feature {
            registry,
            namespace,
        } => {
            let major = metadata
                .get("version")
                .and_then(Value::as_str)
                .map(|v| v.split('.').next().unwrap_or(v).to_owned())
                .unwrap_or_else(|| "latest".to_owned());
            let extensions: Vec<String> = metadata
                .pointer("/customizations/vscode/extensions")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|e| format!("- `{}`", shown(e))).collect())
                .unwrap_or_default();
            let customizations = if extensions.is_empty() {
                String::new()
            } else {
                format!(
                    "\n## Customizations\n\n### VS Code Extensions\n\n{}\n",
                    extensions.join("\n")
                )
            };
            page.push_str(&format!(
                "## Example Usage\n\n```json\n\"features\": {{\n    \"{registry}/{namespace}/{id}:{major}\": {{}}\n}}\n```\n\n{}\n{customizations}\n{notes}\n",
                options_table(metadata)
            ));
        }
        DocsKind::Template => {
            page.push_str(&format!("{}\n\n{notes}\n", options_table(metadata)));
        }
    }
    page.push_str(&format!(
        "\n---\n\n_Note: This file was auto-generated from the [{}]({repo_url}).  Add additional notes to a `NOTES.md`._\n",
        kind.metadata_file()
    ));
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_page_has_the_reference_layout() {
        let m = json!({"id": "alpha", "name": "Alpha", "description": "The alpha",
            "options": {"v": {"type": "string", "description": "Variant", "default": "a"},
                        "f": {"type": "boolean", "default": true},
                        "l": {"type": "string", "proposals": ["x"]}}});
        let page = render(
            &m,
            &DocsKind::Template,
            "# notes\n",
            "devcontainer-template.json",
        );
        assert_eq!(
            page,
            "\n# Alpha (alpha)\n\nThe alpha\n\n## Options\n\n| Options Id | Description | Type | Default Value |\n|-----|-----|-----|-----|\n| v | Variant | string | a |\n| f | - | boolean | true |\n| l | - | string | - |\n\n# notes\n\n\n---\n\n_Note: This file was auto-generated from the [devcontainer-template.json](devcontainer-template.json).  Add additional notes to a `NOTES.md`._\n"
        );
    }

    #[test]
    fn a_feature_page_names_its_use_legacy_ids_and_extensions() {
        let m = json!({"id": "hello", "version": "2.1.0", "deprecated": true,
            "legacyIds": ["old"], "customizations": {"vscode": {"extensions": ["a.b"]}}});
        let kind = DocsKind::Feature {
            registry: "r.example".into(),
            namespace: "o/f".into(),
        };
        let page = render(&m, &kind, "", "u");
        assert!(
            page.starts_with("### **IMPORTANT NOTE**\n- **This Feature is deprecated"),
            "{page}"
        );
        assert!(
            page.contains(
                "- **Ids used to publish this Feature in the past - 'old'**\n\n# hello\n"
            ),
            "{page}"
        );
        assert!(page.contains("\"r.example/o/f/hello:2\": {}"), "{page}");
        assert!(
            page.contains("### VS Code Extensions\n\n- `a.b`\n"),
            "{page}"
        );
    }
}
