//! `features generate-docs` and `templates generate-docs` (spec-note 0644): a `README.md` for
//! each item of the project folder, rendered by [`crate::features::docs`] and written without
//! following a link (a `README.md` that is a link is replaced, never written through).

use std::path::{Path, PathBuf};

use crate::diagnostics::Warning;
use crate::features::docs::pages;
pub use crate::features::docs::{DocsKind, RepoLink};
use crate::security::host_path::{Existing, WorkspaceDir};

use super::error::{OpsError, Result};

/// Inputs of [`generate_docs`]: the reference CLI's flags.
#[derive(Debug, Clone)]
pub struct GenerateDocsOptions {
    /// `--project-folder` as given: the folder whose sub-folders are the items (`src`).
    pub project_folder: String,
    /// Features (with `--registry`/`--namespace` for the example) or Templates.
    pub kind: DocsKind,
    /// `--github-owner` / `--github-repo`.
    pub link: RepoLink,
}

/// What [`generate_docs`] wrote, and the items it skipped.
#[derive(Debug, Clone, Default)]
pub struct GeneratedDocs {
    /// Each `README.md` written.
    pub written: Vec<PathBuf>,
    /// Items skipped (no or unreadable metadata), named.
    pub warnings: Vec<Warning>,
}

/// Writes `<item>/README.md` for every item of the project folder.
///
/// Errors: [`OpsError::GenerateDocs`], naming the folder or item (the folder cannot be
/// read, a `README.md` cannot be written: a link on the way, a folder in its place).
pub fn generate_docs(options: &GenerateDocsOptions) -> Result<GeneratedDocs> {
    let folder = Path::new(&options.project_folder);
    let fail = |path: &Path, reason: String| OpsError::GenerateDocs {
        path: path.to_owned(),
        reason,
    };
    let (pages, warnings) = pages(
        folder,
        &options.project_folder,
        &options.kind,
        &options.link,
    )
    .map_err(|e| fail(folder, e.to_string()))?;
    let root = WorkspaceDir::open(folder).map_err(|e| fail(folder, e.to_string()))?;
    let mut written = Vec::new();
    for page in pages {
        let name = page
            .item
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = root
            .write(
                &format!("{name}/README.md"),
                page.text.as_bytes(),
                0o644,
                Existing::Replace,
                false,
            )
            .map_err(|e| fail(&page.item, e.to_string()))?;
        written.push(path);
    }
    Ok(GeneratedDocs { written, warnings })
}
