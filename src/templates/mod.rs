//! L1: Dev Container Templates (spec-distilled §6, the reference CLI's `templates` commands).
//!
//! - [`fetch`]: a Template is an OCI artifact (`application/vnd.devcontainers` config, one
//!   `…layer.v1+tar` layer, its `devcontainer-template.json` in the `dev.containers.metadata`
//!   annotation), fetched through the generic [`crate::oci::artifact::ArtifactFetcher`] that
//!   Features use: the same cache, `--offline`, mirrors and tag revalidation.
//! - [`options`]: `--template-args` checked against the Template's option schema, defaults
//!   filled in, and `${templateOption:NAME}` substituted (spec-note 0640).
//! - [`publish`]: a collection packaged and pushed as the reference CLI does, with its
//!   metadata completed (spec-note 0643).
//! - [`apply`]: the archive extracted into a private staging folder, the omitted paths left out,
//!   and each remaining file written into the workspace folder and only there: no `..`, no
//!   absolute path, no link from the archive, and no link already in the workspace is
//!   followed; `--features` are added to the Template's devcontainer.json with its comments
//!   kept (spec-note 0641).
//!
//! Layering: uses `oci`, `features` (Feature references of `--features`) and L0.

pub mod apply;
pub mod fetch;
pub mod options;
pub mod publish;

use std::path::PathBuf;

use crate::oci::OciError;
use crate::oci::extract::ExtractError;

/// A Template's metadata file.
pub const TEMPLATE_FILE: &str = "devcontainer-template.json";

/// Files the reference CLI never applies from a Template (its documentation and metadata).
pub const ALWAYS_OMITTED: [&str; 3] = [TEMPLATE_FILE, "README.md", "NOTES.md"];

/// An error fetching or applying a Template. Messages name the Template, the file or the flag.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// A flag's value is not what it should be (`--template-args`, `--features`, `--omit-paths`).
    #[error("invalid `{flag}`: {reason}")]
    InvalidFlag {
        /// The flag.
        flag: &'static str,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// An option value does not fit the Template's option schema.
    #[error("invalid value for option `{option}` of Template `{template}`: {reason}")]
    InvalidOption {
        /// The Template reference.
        template: String,
        /// The option name.
        option: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// Registry, cache, credential or download failure.
    #[error("cannot fetch Template `{template}`")]
    Oci {
        /// The Template reference.
        template: String,
        /// The cause.
        #[source]
        source: OciError,
    },
    /// The artifact is not a Template (media types, layers).
    #[error("`{template}` is not a Template artifact: {reason}")]
    NotATemplate {
        /// The Template reference.
        template: String,
        /// What is wrong.
        reason: String,
    },
    /// The Template archive is unsafe or unreadable.
    #[error("cannot extract Template `{template}`")]
    Extract {
        /// The Template reference.
        template: String,
        /// The cause.
        #[source]
        source: ExtractError,
    },
    /// The Template would write where it must not (a link, a path outside the workspace).
    #[error("refusing to apply Template `{template}`: `{path}` {reason}")]
    Unsafe {
        /// The Template reference.
        template: String,
        /// The path inside the Template (or the workspace) involved.
        path: String,
        /// Why it is refused.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("cannot write `{}`", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Template folder cannot be packaged (`templates publish`).
    #[error("invalid Template at `{}`: {reason}", path.display())]
    InvalidTemplate {
        /// The Template folder or file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Pushing to the registry failed (`templates publish`).
    #[error("cannot publish `{reference}`")]
    Push {
        /// The repository.
        reference: String,
        /// The cause.
        #[source]
        source: OciError,
    },
    /// The Template's devcontainer.json cannot take the `--features` (not a JSONC object).
    #[error("cannot add Features to `{}`: {reason}", path.display())]
    Config {
        /// The devcontainer.json written from the Template.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl TemplateError {
    /// A one-line hint for the user, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            TemplateError::InvalidFlag { flag, .. } => Some(match *flag {
                "--template-args" => {
                    "give a JSON object of strings, e.g. '{\"imageVariant\":\"bookworm\"}'".into()
                }
                "--features" => {
                    "give a JSON array, e.g. '[{\"id\":\"ghcr.io/devcontainers/features/git:1\",\"options\":{}}]'"
                        .into()
                }
                _ => "give a JSON array of paths, e.g. '[\".github/*\",\"file.ts\"]'".into(),
            }),
            TemplateError::InvalidOption { .. } => Some(
                "`devcell templates metadata <template-id>` shows the Template's options".into(),
            ),
            TemplateError::Oci {
                source: OciError::OfflineMiss { .. },
                ..
            } => Some("run once without `--offline` to fill the cache".into()),
            TemplateError::Unsafe { .. } => Some(
                "nothing was written; remove the link (or ask the Template's author to)".into(),
            ),
            _ => None,
        }
    }
}

/// Result alias of this module.
pub type Result<T, E = TemplateError> = std::result::Result<T, E>;
