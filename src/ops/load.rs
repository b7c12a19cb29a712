//! The one loading pipeline of the operations: discover → parse (JSONC, located) → judge the
//! file the repository supplies (spec-note 0400) → validate → substitute phase 1 and resolve
//! `workspaceFolder` / `workspaceMount` → migrate legacy properties, returning a
//! [`LoadedConfiguration`] (the JSON value and its typed view). `read-configuration`, `up`,
//! `exec`, `outdated`, `resolve-dependencies` and the lockfile all load through here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::config::{self, discover, jsonc, model};
use crate::diagnostics::Warning;
use crate::ops::error::{OpsError, Result};
use crate::security::host_path;

/// Parses `--additional-features` (a JSON object like devcontainer.json's `features`).
pub(crate) fn parse_additional_features(text: Option<&str>) -> Result<Vec<(String, Value)>> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let doc = jsonc::parse(Path::new("--additional-features"), text).map_err(|e| {
        OpsError::AdditionalFeatures {
            message: e.to_string(),
        }
    })?;
    match doc.value {
        Value::Object(map) => Ok(map.into_iter().collect()),
        other => Err(OpsError::AdditionalFeatures {
            message: format!(
                "expected a JSON object of Feature references to options, found `{other}`"
            ),
        }),
    }
}

/// Inputs of [`load_configuration`]: which workspace and config, and the host environment.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--workspace-folder` (made absolute against the current directory).
    pub workspace_folder: PathBuf,
    /// `--config`: an explicit config file.
    pub config: Option<PathBuf>,
    /// `--mount-workspace-git-root`.
    pub mount_workspace_git_root: bool,
    /// The host environment used for `${localEnv:…}`/`${env:…}`.
    pub env: HashMap<String, String>,
    /// Forces `workspaceMount` / `workspaceFolder` (for `handoff`, which mounts the whole
    /// workspace root at its own target); `None` keeps the config's or the defaults.
    pub workspace_override: Option<WorkspaceOverride>,
    /// `--override-config`: read the configuration's content from this file; paths keep the
    /// semantics of the real config (`config`, else the discovered one, else
    /// `<workspace>/.devcontainer/devcontainer.json`, which need not exist).
    pub override_config: Option<PathBuf>,
    /// `--additional-features`: a JSON object like `features`, added to the configuration's
    /// Features (keys it already has are ignored, as in the reference).
    pub additional_features: Option<String>,
    /// `--mount-git-worktree-common-dir`: a worktree's common git dir gets its own mount
    /// ([`LoadedConfiguration::additional_mount`]).
    pub mount_git_worktree_common_dir: bool,
    /// Under `hardened`, the user's grants: the configuration file the repository supplies
    /// (discovered, or a `--config` inside the workspace folder) must resolve inside the
    /// workspace folder, or be granted, before it is read (spec-note 0400). `None`: read as
    /// written (the reference CLI's behaviour).
    pub confine: Option<crate::security::Grants>,
}

/// A `workspaceMount` and `workspaceFolder` that replace the configuration's (as if the
/// devcontainer.json said so), before phase-1 substitution, so `${containerWorkspaceFolder}`
/// is the forced folder. Used by `handoff` (spec-notes/0200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceOverride {
    /// The workspace mount, typed to the engine call; `None`: no workspace mount (as an empty
    /// `workspaceMount` says). The configuration gets its `--mount` text.
    pub mount: Option<crate::engine::Mount>,
    /// The container workspace folder.
    pub folder: String,
    /// Where the registry judgement's committed side is read (attack K12).
    pub committed: CommittedSide,
}

/// Where the registry judgement (attack K12) reads the "committed side" of the files that
/// name images: the versions of them the user, not a container, wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CommittedSide {
    /// The workspace folder's own repository (`HEAD` and the before-agent records).
    #[default]
    Workspace,
    /// The workspace folder is a repository a container writes, whose `HEAD` is the agent's
    /// commit (a clone task's clone, attack 25, P6): the user's repository `repository` at the
    /// commit `revision` (the task's base, recorded when the task was made) stands for it.
    Source {
        /// The user's repository (its working tree).
        repository: PathBuf,
        /// The commit the task started at.
        revision: String,
    },
    /// No committed side: every registry a file names is asked (a multi-repository task).
    Nothing,
}

/// The one read of devcontainer.json's Dockerfile in an operation: the first
/// [`crate::ops::dockerfile_judge::judged_text`] of a configuration reads the file, every later one (the text's requests,
/// the registries, the `ONBUILD` bases, the build's archive: [`crate::ops::dockerfile_judge::judged_bytes`]) gets that same
/// text, so a process writing the workspace cannot have one Dockerfile judged and another
/// built (attack O3, spec-note 0655). Keyed by the Dockerfile's path as the configuration
/// names it; clones of a [`LoadedConfiguration`] share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct DockerfileRead(pub(crate) Arc<Mutex<Option<ReadDockerfile>>>);

/// The Dockerfile at `written` as it was read: as the requests name it, and its text (`None`:
/// it could not be read, or is not in the workspace and not granted).
pub(crate) type ReadDockerfile = (PathBuf, Option<(String, String)>);

/// A configuration read from disk, validated and substituted (phase 1), shared by
/// `read-configuration`, `up`, `exec` and the other operations.
#[derive(Debug, Clone)]
pub struct LoadedConfiguration {
    /// The absolute, normalised host workspace folder (`${localWorkspaceFolder}`).
    pub workspace_folder: PathBuf,
    /// The `devcontainer.json` that was read.
    pub config_file: PathBuf,
    /// The config as written (parsed JSONC, unsubstituted): what goes into the
    /// `devcontainer.metadata` label, which is stored raw.
    pub raw: Value,
    /// The config after phase-1 substitution and legacy migration.
    pub value: Value,
    /// The typed view of `value`.
    pub typed: model::DevContainerConfig,
    /// The effective `workspaceFolder` / `workspaceMount`.
    pub workspace: config::workspace::WorkspaceConfig,
    /// Non-fatal findings.
    pub warnings: Vec<Warning>,
    /// The mount of a worktree's common git dir (`--mount-git-worktree-common-dir`), mounted
    /// besides the workspace (parsed once here from the configuration's text).
    pub additional_mount: Option<crate::engine::Mount>,
    /// The user's grants the repository's files (the config, its lockfile, local Features)
    /// were judged with ([`LoadOptions::confine`], spec-note 0400); `None`: used as written
    /// (`reference`, or a `--config` the user names outside the workspace).
    pub confined: Option<crate::security::Grants>,
    /// The workspace mount and folder the caller forced ([`LoadOptions::workspace_override`]),
    /// whose typed mount the container gets as given.
    pub workspace_override: Option<WorkspaceOverride>,
    /// The one read of devcontainer.json's Dockerfile that the judgement and the build share
    /// ([`DockerfileRead`], spec-note 0655); clones share it.
    pub(crate) dockerfile_read: DockerfileRead,
}

impl LoadedConfiguration {
    /// No configuration (`exec`/`run-user-commands` given only `--container-id` or
    /// `--id-label`s): `{}`, no workspace; the container's metadata says everything.
    pub fn empty() -> Self {
        LoadedConfiguration {
            workspace_folder: PathBuf::new(),
            config_file: PathBuf::new(),
            raw: Value::Object(Map::new()),
            value: Value::Object(Map::new()),
            typed: model::DevContainerConfig::default(),
            workspace: config::workspace::WorkspaceConfig {
                workspace_folder: String::new(),
                workspace_mount: None,
                host_mount_root: PathBuf::new(),
                host_env_reads: Default::default(),
            },
            warnings: Vec::new(),
            additional_mount: None,
            confined: None,
            workspace_override: None,
            dockerfile_read: Default::default(),
        }
    }

    /// The workspace mount as the engine takes it: a forced one as given (typed, never read
    /// back from its text), else the configuration's `workspaceMount` (or the default) parsed;
    /// `None`: no workspace mount (a Compose configuration, or an empty string).
    ///
    /// Errors: [`crate::ops::OpsError::Engine`] for a `workspaceMount` that does not parse.
    pub fn workspace_mount(&self) -> crate::ops::Result<Option<crate::engine::Mount>> {
        match (
            self.workspace.workspace_mount.as_deref(),
            &self.workspace_override,
        ) {
            (None, _) => Ok(None),
            (Some(_), Some(forced)) => Ok(forced.mount.clone()),
            (Some(""), None) => Ok(None),
            (Some(text), None) => Ok(Some(crate::engine::run_args::parse_mount(text)?)),
        }
    }
}

/// A config found, parsed and validated (no substitution yet): the first steps every command
/// shares.
pub(crate) struct ValidatedConfig {
    /// The workspace folder, made absolute.
    pub workspace_folder: PathBuf,
    /// The config file found ([`discover::discover`]).
    pub config_file: PathBuf,
    /// The parsed document, with its source locations.
    pub doc: jsonc::Document,
    /// The typed, validated configuration (before substitution).
    pub config: model::DevContainerConfig,
    /// Parser and validation warnings, in that order.
    pub warnings: Vec<Warning>,
    /// The grants the config file was judged with (`None`: read as written).
    pub confined: Option<crate::security::Grants>,
}

impl ValidatedConfig {
    /// Validates `doc` ([`model::validate`]); the warnings are the parser's, then the
    /// validation's.
    ///
    /// Errors: [`OpsError::Config`] for an invalid configuration (located).
    fn validate(
        workspace_folder: PathBuf,
        config_file: PathBuf,
        doc: jsonc::Document,
        confined: Option<crate::security::Grants>,
    ) -> Result<ValidatedConfig> {
        let mut warnings = doc.warnings.clone();
        let (config, model_warnings) = model::validate(&doc)?;
        warnings.extend(model_warnings);
        Ok(ValidatedConfig {
            workspace_folder,
            config_file,
            doc,
            config,
            warnings,
            confined,
        })
    }
}

/// The absolute workspace folder, which must exist.
///
/// Errors: [`OpsError::WorkspaceFolder`].
fn existing_workspace_folder(workspace_folder: &Path) -> Result<PathBuf> {
    let folder =
        std::path::absolute(workspace_folder).unwrap_or_else(|_| workspace_folder.to_path_buf());
    if !folder.is_dir() {
        return Err(OpsError::WorkspaceFolder { path: folder });
    }
    Ok(folder)
}

/// Finds ([`discover::discover`]), parses ([`jsonc::read`]) and validates
/// ([`model::validate`]) the configuration of `workspace_folder` (or `config` when given),
/// judged as every command without a `--security-profile` judges it (spec-note 0400): a
/// discovered config (or a `--config` inside the workspace folder) that resolves outside the
/// workspace is refused without being read, with no grant.
///
/// Errors: [`OpsError::WorkspaceFolder`] when the folder does not exist;
/// [`OpsError::Config`] for a missing, unreadable or invalid config (located);
/// [`OpsError::Security`] (`PathOutside`).
pub(crate) fn read_validated(
    workspace_folder: &Path,
    config: Option<&Path>,
) -> Result<ValidatedConfig> {
    read_validated_confined(
        workspace_folder,
        config,
        Some(&crate::security::Grants::default()),
    )
}

/// Whether the config file is the repository's (discovered, or a `--config` inside the
/// workspace folder) rather than one the user names outside it (the user's choice).
pub(crate) fn repository_supplied(
    workspace_folder: &Path,
    config: Option<&Path>,
    config_file: &Path,
) -> bool {
    config.is_none()
        || config::workspace::resolve_path(config_file)
            .starts_with(config::workspace::resolve_path(workspace_folder))
}

/// Reads the judged file `resolved` without following links ([`host_path::read_no_follow`]).
///
/// Errors: [`OpsError::Config`] (`Io`, or `Invalid` as [`jsonc::read`]).
pub(crate) fn read_judged(resolved: &Path) -> Result<jsonc::Document> {
    let io = |source| {
        OpsError::Config(config::ConfigError::Io {
            path: resolved.to_path_buf(),
            source,
        })
    };
    // the size first (without following a link), for the usual located error
    if let Ok(meta) = std::fs::symlink_metadata(resolved)
        && meta.is_file()
        && meta.len() > jsonc::MAX_FILE_BYTES as u64
    {
        return Err(jsonc::too_large(resolved, Some(meta.len())).into());
    }
    let bytes = host_path::read_no_follow(resolved, jsonc::MAX_FILE_BYTES as u64)
        .map_err(io)?
        .ok_or_else(|| io(std::io::ErrorKind::NotFound.into()))?;
    Ok(jsonc::parse_bytes(resolved, bytes)?)
}

/// [`read_validated`], the config file judged first when `confine` holds the user's grants
/// ([`LoadOptions::confine`]): the file (and the folders on its way, `.devcontainer` among
/// them) resolved ([`host_path::confine`]) and, outside the workspace folder and not granted,
/// refused without being read. The file read is the resolved one.
///
/// Errors: as [`read_validated`]; [`OpsError::Security`] (`PathOutside`).
pub(crate) fn read_validated_confined(
    workspace_folder: &Path,
    config: Option<&Path>,
    confine: Option<&crate::security::Grants>,
) -> Result<ValidatedConfig> {
    let workspace_folder = existing_workspace_folder(workspace_folder)?;
    let config_file = discover::discover(&workspace_folder, config)?;
    // a `--config` the user names outside the workspace is the user's, not the repository's
    let confine = confine.filter(|_| repository_supplied(&workspace_folder, config, &config_file));
    let doc = match confine {
        Some(grants) => {
            let folder = config::workspace::resolve_path(&workspace_folder);
            let places = host_path::Places::new(&folder, None, None);
            let read_from = host_path::confine("devcontainer.json", &config_file, &places, grants)?;
            read_judged(&read_from)?
        }
        None => jsonc::read(&config_file)?,
    };
    ValidatedConfig::validate(workspace_folder, config_file, doc, confine.cloned())
}

/// Loads a configuration the way every command does: discover it ([`discover::discover`]),
/// parse it ([`jsonc::read`]), validate it ([`model::validate`]), substitute phase-1 variables
/// and compute `workspaceFolder` / `workspaceMount` ([`config::workspace::resolve`]), then
/// migrate legacy properties ([`model::migrate_legacy`]).
///
/// Errors: [`OpsError::WorkspaceFolder`] when the folder does not exist;
/// [`OpsError::Config`] for a missing, unreadable or invalid config (located).
pub fn load_configuration(opts: &LoadOptions) -> Result<LoadedConfiguration> {
    let additional = parse_additional_features(opts.additional_features.as_deref())?;
    let validated = match &opts.override_config {
        Some(file) => {
            let mut v = read_overridden(&opts.workspace_folder, opts.config.as_deref(), file)?;
            // the content is the user's; the lockfile and local Features beside the config
            // path are the repository's
            v.confined = opts.confine.clone().filter(|_| {
                repository_supplied(&v.workspace_folder, opts.config.as_deref(), &v.config_file)
            });
            v
        }
        None => read_validated_confined(
            &opts.workspace_folder,
            opts.config.as_deref(),
            opts.confine.as_ref(),
        )?,
    };
    // the commands that build judge local Features' folders before anything is read or packed
    if let Some(grants) = &validated.confined {
        confine_local_features(
            &validated.config,
            &validated.config_file,
            &validated.workspace_folder,
            grants,
        )?;
    }
    let mut value = validated.doc.value.clone();
    if let (Some(o), Value::Object(map)) = (&opts.workspace_override, &mut value) {
        let text = o.mount.as_ref().map(crate::engine::run_args::mount_string);
        map.insert(
            "workspaceMount".into(),
            Value::String(text.unwrap_or_default()),
        );
        map.insert("workspaceFolder".into(), Value::String(o.folder.clone()));
    }
    let (workspace, additional_mount) = resolve_workspace(
        &mut value,
        &validated,
        opts.mount_workspace_git_root,
        &opts.env,
        opts.mount_git_worktree_common_dir,
    )?;
    let ValidatedConfig {
        workspace_folder,
        config_file,
        doc,
        warnings,
        confined,
        ..
    } = validated;
    add_features(&mut value, &additional);
    // Substitution keeps the shape, so locations from `doc` still apply.
    let (typed, _) = model::validate_value(&doc, &value)?;

    if let Value::Object(c) = &mut value {
        model::migrate_legacy(c);
    }
    Ok(LoadedConfiguration {
        confined,
        workspace_folder: config::workspace::resolve_path(&workspace_folder),
        config_file,
        raw: doc.value,
        value,
        typed,
        workspace,
        warnings,
        additional_mount: additional_mount
            .as_deref()
            .map(crate::engine::run_args::parse_mount)
            .transpose()?,
        workspace_override: opts.workspace_override.clone(),
        dockerfile_read: Default::default(),
    })
}

/// [`read_validated`] with `--override-config`: the content from `override_file`, the path
/// semantics of `config` (else the discovered config, else
/// `<workspace>/.devcontainer/devcontainer.json`, which need not exist).
///
/// Errors: as [`read_validated`], for `override_file`.
pub(crate) fn read_overridden(
    workspace_folder: &Path,
    config: Option<&Path>,
    override_file: &Path,
) -> Result<ValidatedConfig> {
    let workspace_folder = existing_workspace_folder(workspace_folder)?;
    let override_file =
        std::path::absolute(override_file).unwrap_or_else(|_| override_file.to_path_buf());
    let config_file = match config {
        Some(c) => std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf()),
        None => discover::discover(&workspace_folder, None).unwrap_or_else(|_| {
            let [first, _] = discover::default_locations(&workspace_folder);
            first
        }),
    };
    let doc = jsonc::read(&override_file)?;
    ValidatedConfig::validate(workspace_folder, config_file, doc, None)
}

/// The folder of each local (`./…`) Feature of `typed` (relative to the config's folder),
/// judged on what it resolves to ([`host_path::confine`], against the workspace folder), and
/// every symbolic link inside it ([`host_path::confine_links`]): a Feature folder whose
/// `install.sh`, `devcontainer-feature.json` or a sub-folder is a link out of the workspace
/// is refused before anything is read or packed (spec-note 0400). The Features module then
/// uses the resolved folder and reads its metadata without following links.
///
/// Errors: [`OpsError::Security`] (`PathOutside`, `PathUnresolvable`).
pub(crate) fn confine_local_features(
    typed: &model::DevContainerConfig,
    config_file: &Path,
    workspace_folder: &Path,
    grants: &crate::security::Grants,
) -> Result<()> {
    let dir = config_file.parent().unwrap_or(Path::new("/"));
    let places = host_path::Places::new(
        &config::workspace::resolve_path(workspace_folder),
        None,
        None,
    );
    for key in typed.features.keys() {
        if !(key.starts_with("./") || key.starts_with("../")) {
            continue;
        }
        let what = format!("local Feature `{key}`");
        let folder = host_path::confine(&what, &dir.join(key), &places, grants)?;
        host_path::confine_links(&what, &folder, &places, grants)?;
    }
    Ok(())
}

/// Adds `--additional-features` to `features` (keys the configuration has are kept as they
/// are, as in the reference).
pub(crate) fn add_features(value: &mut Value, additional: &[(String, Value)]) {
    if additional.is_empty() {
        return;
    }
    let Value::Object(map) = value else {
        return;
    };
    let features = map
        .entry("features")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(features) = features {
        for (key, options) in additional {
            if !features.contains_key(key) {
                features.insert(key.clone(), options.clone());
            }
        }
    }
}

/// The workspace folder and mount of `value` (the content of `validated`) resolved and
/// substituted in place ([`config::workspace::resolve_with_worktree`]) with the host
/// environment `env`: the workspace and the additional mount string
/// (`--mount-git-worktree-common-dir`). Errors are located in `validated.doc`, whose shape
/// the substitution keeps.
pub(crate) fn resolve_workspace(
    value: &mut Value,
    validated: &ValidatedConfig,
    mount_workspace_git_root: bool,
    env: &HashMap<String, String>,
    mount_git_worktree_common_dir: bool,
) -> Result<(config::workspace::WorkspaceConfig, Option<String>)> {
    let resolve = config::workspace::ResolveOptions {
        workspace_folder: validated.workspace_folder.clone(),
        config_file: validated.config_file.clone(),
        mount_workspace_git_root,
        env: env.clone(),
    };
    Ok(
        config::workspace::resolve_with_worktree(value, &resolve, mount_git_worktree_common_dir)
            .map_err(|e| locate(&validated.doc, e))?,
    )
}

/// Gives a substitution error (which knows its property path) the file position of that
/// property, so it renders like every other config error.
pub(crate) fn locate(doc: &jsonc::Document, err: config::ConfigError) -> config::ConfigError {
    match err {
        config::ConfigError::Substitution {
            path,
            message,
            hint,
            ..
        } => match jsonc::JsonPath::parse(&path) {
            Some(p) => config::ConfigError::Invalid {
                location: Box::new(doc.locate(&p)),
                message,
                hint,
            },
            None => config::ConfigError::Substitution {
                file: Some(doc.file.clone()),
                path,
                message,
                hint,
            },
        },
        other => other,
    }
}

/// Shows the configuration's own warnings (unknown properties with a "did you mean",
/// duplicate and deprecated ones; spec-note 0002) on `reporter` as they are found, before
/// anything is judged, pulled or built, so a typo such as `remoteUsr` is seen even when the
/// run then fails (issue 28 item 5). The caller's result still lists them, as its first
/// `loaded.warnings.len()` warnings, and prints only the others at the end.
pub(crate) fn report_warnings(
    loaded: &LoadedConfiguration,
    reporter: &dyn crate::progress::Reporter,
) -> usize {
    for warning in &loaded.warnings {
        reporter.report(crate::progress::Event::Warning(warning.clone()));
    }
    loaded.warnings.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Mount, MountKind};

    fn workspace(config: &str) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".devcontainer")).unwrap();
        std::fs::write(tmp.path().join(".devcontainer/devcontainer.json"), config).unwrap();
        tmp
    }

    /// A forced workspace mount reaches the container as given: typed, never read back from
    /// the text the configuration gets (which phase-1 substitution rewrites); a
    /// configuration's own `workspaceMount` is parsed.
    #[test]
    fn a_forced_workspace_mount_stays_typed_and_a_configured_one_is_parsed() {
        let forced = Mount {
            kind: MountKind::Bind,
            source: Some("/w/${localEnv:HOME}/a,b".into()),
            target: "/workspace".into(),
            read_only: false,
        };
        let tmp = workspace(r#"{"image": "x"}"#);
        let opts = LoadOptions {
            workspace_folder: tmp.path().to_path_buf(),
            env: HashMap::from([("HOME".to_string(), "/home/u".to_string())]),
            workspace_override: Some(WorkspaceOverride {
                mount: Some(forced.clone()),
                folder: "/workspace".into(),
                committed: CommittedSide::Workspace,
            }),
            ..LoadOptions::default()
        };
        let loaded = load_configuration(&opts).unwrap();
        assert_eq!(loaded.workspace_mount().unwrap(), Some(forced));
        assert_eq!(loaded.workspace.workspace_folder, "/workspace");

        let none = LoadOptions {
            workspace_override: Some(WorkspaceOverride {
                mount: None,
                folder: "/workspace".into(),
                committed: CommittedSide::Workspace,
            }),
            ..opts.clone()
        };
        let loaded = load_configuration(&none).unwrap();
        assert_eq!(loaded.workspace_mount().unwrap(), None);
        assert_eq!(loaded.value["workspaceMount"], "");

        let tmp = workspace(
            r#"{"image": "x", "workspaceMount": "type=bind,source=${localEnv:HOME},target=/t,readonly"}"#,
        );
        let configured = LoadOptions {
            workspace_folder: tmp.path().to_path_buf(),
            workspace_override: None,
            ..opts
        };
        let loaded = load_configuration(&configured).unwrap();
        assert_eq!(
            loaded.workspace_mount().unwrap(),
            Some(Mount {
                kind: MountKind::Bind,
                source: Some("/home/u".into()),
                target: "/t".into(),
                read_only: true,
            })
        );
    }
}
