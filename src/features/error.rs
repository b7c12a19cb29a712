//! Errors of the `features` layer.

use std::path::PathBuf;

/// `Result` with [`FeatureError`].
pub type Result<T, E = FeatureError> = std::result::Result<T, E>;

/// An error resolving, validating or ordering Features
/// ([spec: Features](https://containers.dev/implementors/features/)).
#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    /// A key of `features` / `dependsOn` is not a valid Feature reference (spec-distilled §4.3).
    #[error("invalid Feature reference `{reference}`: {message}")]
    InvalidReference {
        /// The reference as written.
        reference: String,
        /// What is wrong with it.
        message: String,
        /// What the user probably meant, if known.
        hint: Option<String>,
    },
    /// A `devcontainer-feature.json` does not parse or violates the schema.
    #[error("invalid Feature metadata in `{}{}`: {message}", file.display(), location_suffix(*line, *column))]
    InvalidMetadata {
        /// The file (or a description such as `manifest annotation`).
        file: PathBuf,
        /// 1-based line, 0 when unknown.
        line: usize,
        /// 1-based column, 0 when unknown.
        column: usize,
        /// What was expected and what was found.
        message: String,
    },
    /// A user-provided option value is not acceptable for the Feature's declared option.
    #[error("Feature `{feature}`: option `{option}`: {message}")]
    InvalidOption {
        /// The Feature reference as written.
        feature: String,
        /// The option id.
        option: String,
        /// What was expected and what was found.
        message: String,
    },
    /// A Feature value in `features` / `dependsOn` has the wrong JSON type.
    #[error("Feature `{feature}`: {message}")]
    InvalidValue {
        /// The Feature reference as written.
        feature: String,
        /// What was expected and what was found.
        message: String,
    },
    /// The dependency graph cannot be ordered: a cycle through `dependsOn` / `installsAfter`.
    #[error("circular Feature dependency: {}", cycle.join(" -> "))]
    Cycle {
        /// The Features in the cycle, in edge order, the first repeated at the end.
        cycle: Vec<String>,
    },
    /// `overrideFeatureInstallOrder` holds an entry that is not a Feature resource.
    #[error("invalid `overrideFeatureInstallOrder` entry `{entry}`: {message}")]
    InvalidOverride {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        message: String,
    },
    /// Resolving one Feature (fetching its metadata) failed.
    #[error("cannot resolve Feature `{feature}`")]
    Resolve {
        /// The Feature reference as written.
        feature: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The lockfile does not parse, does not match, or would change in frozen mode.
    #[error("lockfile `{}`: {message}", path.display())]
    Lockfile {
        /// The lockfile path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `--frozen-lockfile` and the lockfile is missing (`missing`) or does not match: the
    /// reference CLI's message (`Lockfile does not exist.` / `Lockfile does not match.`, which
    /// tools match on), devcell's [`FeatureError::Lockfile`] naming the file and what differs
    /// as its cause.
    #[error("{}", if *missing { "Lockfile does not exist." } else { "Lockfile does not match." })]
    Frozen {
        /// Whether the lockfile is missing (else it differs).
        missing: bool,
        /// The file and what differs.
        #[source]
        source: Box<FeatureError>,
    },
    /// A Feature the lockfile pins could not be fetched at its locked digest (the registry no
    /// longer serves it, the network or the cache failed).
    #[error("cannot fetch Feature `{feature}` at its locked digest `{integrity}` (lockfile `{}`)", path.display())]
    Locked {
        /// The lock key (the reference as written, lowercased).
        feature: String,
        /// The locked digest.
        integrity: String,
        /// The lockfile path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A value cannot be written to an env file (it contains a NUL byte).
    #[error("cannot write `{name}` to an env file: {message}")]
    EnvValue {
        /// The variable name.
        name: String,
        /// Why.
        message: String,
    },
    /// A file could not be read or written.
    #[error("cannot access `{}`", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A Feature's registry host outside the hosts a registry judgement cleared (attack 23,
/// N14): the cause of [`super::fetch::FetchError::RegistryNotJudged`].
#[derive(Debug, thiserror::Error)]
#[error(
    "Feature `{feature}` is on registry `{host}`, which this run's registry judgement did not clear for a closed network: not fetched"
)]
pub struct UnjudgedRegistry {
    /// The Feature reference.
    pub feature: String,
    /// The registry host (lowercased, with its port).
    pub host: String,
}

/// The hint of a Feature refused for its registry host: the one-run grant that clears it.
pub fn registry_grant_hint(host: &str) -> String {
    format!(
        "under a closed network devcell fetches Features only from registries the committed configuration names or you grant; if you trust `{host}`, pass `--allow registry:{host}`"
    )
}

fn location_suffix(line: usize, column: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}:{column}")
    }
}

impl crate::diagnostics::Hint for FeatureError {
    fn hint(&self) -> Option<String> {
        match self {
            FeatureError::InvalidReference { hint, .. } => hint.clone(),
            // the registry failure behind it, found in the chain (a fetch error wraps it)
            FeatureError::Resolve { source, .. } => {
                let chain = || {
                    std::iter::successors(
                        Some(&**source as &(dyn std::error::Error + 'static)),
                        |e| e.source(),
                    )
                };
                // a host the registry judgement did not clear names its grant (attack 23, N14)
                chain()
                    .find_map(|e| e.downcast_ref::<UnjudgedRegistry>())
                    .map(|u| registry_grant_hint(&u.host))
                    .or_else(|| {
                        chain()
                            .find_map(|e| e.downcast_ref::<crate::oci::OciError>())
                            .and_then(crate::oci::registry::registry_hint)
                    })
            }
            FeatureError::Cycle { .. } => Some(
                "remove one `dependsOn` or `installsAfter` edge of the cycle, or check `overrideFeatureInstallOrder`".into(),
            ),
            FeatureError::Frozen { source, .. } => source.hint(),
            FeatureError::Lockfile { message, .. } if message.contains("--frozen-lockfile") => {
                Some("run without `--frozen-lockfile` to update the lockfile, or commit the lockfile that matches the configuration".into())
            }
            FeatureError::Lockfile { .. } => Some(
                "delete `devcontainer-lock.json` to re-resolve, or run without `--frozen-lockfile`".into(),
            ),
            FeatureError::Locked { .. } => Some(
                "the registry may no longer serve that digest: run `devcell upgrade` to lock what it serves now, or pass `--no-lockfile` to ignore the lockfile".into(),
            ),
            _ => None,
        }
    }
}
