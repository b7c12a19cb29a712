//! The local files a Compose project's files make Compose read before devcell sees its model
//! (spec-note 0601): top-level `include` entries (`- path`, or `path:`, `project_directory:`,
//! `env_file:`), each service's `extends.file`, `env_file` and `label_file`, followed through
//! included and extended files. Compose resolves them away (`docker compose config` neither
//! keeps nor lists them), so they are read here, as YAML, before the first `config` runs, and
//! each one outside the workspace is a request ([`Permission::ComposeFile`]; a service's
//! `env_file` is a [`Permission::Mount`], as the resolved model's is judged).
//!
//! Base folders follow compose-go's loader: a project file's relative paths are taken against
//! the project folder (the first file's folder); an included file's against its include's
//! `project_directory` (default: the included file's folder), an include's `env_file` against
//! the including project's folder; an extended file's against its own folder. `~` is the host
//! home folder. A path written with `$` is not interpolated here: it is a request as written,
//! joined to its base folder (granted only by that exact `--allow compose-file:` value). Remote
//! resources (`git@…`, `…://…`) are left to Compose (its remote loaders are off under
//! `hardened`). A file outside the workspace is read (for what it names in turn) only when it
//! is granted; only regular files are read, each up to [`MAX_FILE_BYTES`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use super::error::SecurityError;
use super::host_path::{Place, Places, resolve};
use super::policy::{Grants, Permission, PermissionRequest, Source, judge};
use super::profile::SecurityProfile;

/// The most of one Compose file read here (a larger one is not followed; Compose reports it).
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// The most files followed (includes and extends of includes and extends).
const MAX_FILES: usize = 256;

/// How a file was reached, which sets the folder its relative paths are taken against.
#[derive(Debug, Clone)]
struct Pending {
    /// The file (absolute, as Compose would open it).
    path: PathBuf,
    /// The folder `include` and service paths of it are taken against.
    working_dir: PathBuf,
    /// Whether it was reached by `extends.file` (then service paths are taken against its
    /// own folder).
    extended: bool,
}

/// Every request the local files named by the Compose `files` (in order, absolute) ask for,
/// judged under `profile` with `grants`: `config_file` is devcontainer.json (the source of a
/// top-level file outside the workspace), `places` the workspace and home folder. Pure but for
/// reading the files and resolving symbolic links.
///
/// `env_file` is the project's env file ([`project_env_file`]): one that is, or links to, a
/// file outside the workspace is a request (`compose-file:`), as is the `.env` of an included
/// project's folder (compose-go reads it when the include names no `env_file`): Compose reads
/// their `key=value` lines as variables it interpolates into image tags and the containers'
/// environment (spec-note 0614, attacks N17).
pub fn compose_file_requests(
    profile: &SecurityProfile,
    config_file: &Path,
    files: &[PathBuf],
    env_file: &Path,
    places: &Places,
    grants: &Grants,
) -> Vec<PermissionRequest> {
    let mut asked: Vec<(Permission, Source)> = Vec::new();
    let Some(first) = files.first() else {
        return Vec::new();
    };
    let project_dir = first.parent().unwrap_or(Path::new("/")).to_path_buf();
    let shown_config = shown(config_file, places);
    if present(env_file) {
        judge_path(
            env_file,
            places,
            &mut asked,
            Source::ComposeFile {
                // as written (`shown` would name where the link points)
                file: env_file
                    .strip_prefix(&places.workspace)
                    .unwrap_or(env_file)
                    .to_string_lossy()
                    .into_owned(),
                key: "the project's env file".to_string(),
            },
            Kind::File,
        );
    }
    let mut pending: Vec<Pending> = Vec::new();
    for f in files {
        if let Some(p) = outside(f, places) {
            asked.push((
                Permission::ComposeFile(p),
                Source::ComposeFile {
                    file: shown_config.clone(),
                    key: "dockerComposeFile".to_string(),
                },
            ));
        }
        pending.push(Pending {
            path: f.clone(),
            working_dir: project_dir.clone(),
            extended: false,
        });
    }
    // a file outside the workspace is read only when granted (or under `reference`)
    let readable = |path: &Path| match outside(path, places) {
        None => true,
        Some(p) => {
            matches!(profile, SecurityProfile::Reference)
                || grants.allows(&Permission::ComposeFile(p))
        }
    };
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    while let Some(next) = pending.pop() {
        if seen.len() >= MAX_FILES {
            break;
        }
        let canonical = resolve(&next.path).unwrap_or_else(|_| next.path.clone());
        if !seen.insert(canonical.clone()) || !readable(&next.path) {
            continue;
        }
        let Some(docs) = read_documents(&canonical) else {
            continue;
        };
        let file = shown(&next.path, places);
        for doc in docs {
            // its top-level keys by the allow-list, `models` among them (attacks H5); an
            // extended file gives only its service
            if !next.extended
                && let Ok(json) = serde_json::to_value(&doc)
            {
                asked.extend(super::compose::top_level_requests(&json, &file));
            }
            file_paths(&doc, &next, &file, places, &mut asked, &mut pending);
        }
    }
    let mut requests: Vec<PermissionRequest> = Vec::new();
    for r in judge(profile, asked, grants) {
        if !requests.contains(&r) {
            requests.push(r);
        }
    }
    requests
}

/// The env file Compose reads for a project's interpolation when it is given none: `.env` in
/// the first of `files`' folder (compose-go's project folder), or `explicit` (the reference
/// CLI's `<workspace>/.env` for an empty `dockerComposeFile`, spec-note 0608). `None`
/// without files.
pub fn project_env_file(files: &[PathBuf], explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(e) = explicit {
        return Some(e.to_path_buf());
    }
    Some(files.first()?.parent()?.join(".env"))
}

/// Reads the project's env file `path` ([`project_env_file`]) for devcell to hand Compose as
/// its own copy (`--env-file`), so Compose never opens a path the repository chose (spec-note
/// 0614): resolved first; inside the workspace, or outside and granted
/// (`--allow compose-file:<resolved>`, or the `reference` profile), the resolved file is read
/// without following a link swapped in since ([`super::host_path::read_no_follow`], at most
/// [`MAX_FILE_BYTES`]). No file, or a folder (Compose skips both): empty.
///
/// Errors: [`SecurityError::PathOutside`] for a file (or a link to one) outside the workspace
/// not granted; [`SecurityError::PathUnresolvable`] for one that cannot be resolved or read
/// (a link swapped in after it was resolved, not a regular file, too large).
pub fn read_project_env(
    profile: &SecurityProfile,
    path: &Path,
    places: &Places,
    grants: &Grants,
) -> Result<Vec<u8>, SecurityError> {
    let what = "the Compose project's env file (`.env`)";
    let unresolvable = |message: String| SecurityError::PathUnresolvable {
        what: what.to_string(),
        written: path.to_path_buf(),
        message,
    };
    if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(Vec::new());
    }
    let resolved = resolve(path).map_err(|e| unresolvable(e.to_string()))?;
    let place = places.place(&resolved);
    let permission = Permission::ComposeFile(resolved.to_string_lossy().into_owned());
    let grantable = matches!(place, Place::Outside | Place::HostHome);
    let allowed = place == Place::Workspace
        || matches!(profile, SecurityProfile::Reference)
        || (grantable && grants.allows(&permission));
    if !allowed {
        return Err(SecurityError::PathOutside {
            what: what.to_string(),
            written: path.to_path_buf(),
            resolved,
            place: place.describe(),
            grant: grantable.then(|| permission.grant_flag()).flatten(),
        });
    }
    if std::fs::symlink_metadata(&resolved).is_ok_and(|m| m.is_dir()) {
        return Ok(Vec::new());
    }
    match super::host_path::read_no_follow(&resolved, MAX_FILE_BYTES) {
        Ok(bytes) => Ok(bytes.unwrap_or_default()),
        Err(e) => Err(unresolvable(e.to_string())),
    }
}

/// The first of the Compose `files` (regular, at most [`MAX_FILE_BYTES`]) whose aliases expand
/// beyond serde_yaml's repetition or recursion limit: a YAML alias bomb ("billion laughs"),
/// which Compose would expand for minutes and gigabytes (spec-note 0425). Only the files
/// given are read here; one they include is stopped by Compose's deadline.
pub fn alias_bomb(files: &[PathBuf]) -> Option<PathBuf> {
    use serde::Deserialize as _;
    files.iter().find_map(|path| {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        for de in serde_yaml::Deserializer::from_str(&text) {
            if let Err(e) = Value::deserialize(de) {
                let message = e.to_string();
                return (message.contains("repetition limit exceeded")
                    || message.contains("recursion limit exceeded"))
                .then(|| path.clone());
            }
        }
        None
    })
}

/// The YAML documents of a regular file of at most [`MAX_FILE_BYTES`], merge keys applied;
/// `None` when it is not one or does not parse (Compose reports that).
fn read_documents(path: &Path) -> Option<Vec<Value>> {
    use serde::Deserialize as _;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let mut docs = Vec::new();
    for de in serde_yaml::Deserializer::from_str(&text) {
        let mut v = Value::deserialize(de).ok()?;
        v.apply_merge().ok()?;
        docs.push(v);
    }
    Some(docs)
}

/// The paths one document names, pushed to `asked` (when outside the workspace) and, for
/// files Compose loads in turn, to `pending`.
fn file_paths(
    doc: &Value,
    from: &Pending,
    file: &str,
    places: &Places,
    asked: &mut Vec<(Permission, Source)>,
    pending: &mut Vec<Pending>,
) {
    let own_dir = from.path.parent().unwrap_or(Path::new("/")).to_path_buf();
    // an extended file's service paths are its own folder's (compose-go resolves them there)
    let service_dir = if from.extended {
        own_dir.clone()
    } else {
        from.working_dir.clone()
    };
    if !from.extended
        && let Some(Value::Sequence(entries)) = doc.get("include")
    {
        for (i, entry) in entries.iter().enumerate() {
            include_paths(i, entry, from, (file, &own_dir), places, asked, pending);
        }
    }
    let Some(Value::Mapping(services)) = doc.get("services") else {
        return;
    };
    for (name, service) in services {
        let name = name.as_str().unwrap_or_default();
        if let Some(f) = service
            .get("extends")
            .and_then(|e| e.get("file"))
            .and_then(Value::as_str)
            && !is_remote(f)
        {
            let base = if from.extended {
                &own_dir
            } else {
                &from.working_dir
            };
            let path = absolute(f, base, places);
            judge_path(
                &path,
                places,
                asked,
                file_source(file, format!("services.{name}.extends.file")),
                Kind::File,
            );
            pending.push(Pending {
                working_dir: path.parent().unwrap_or(Path::new("/")).to_path_buf(),
                path,
                extended: true,
            });
        }
        for (field, kind) in [("env_file", Kind::Mount), ("label_file", Kind::File)] {
            let Some(value) = service.get(field) else {
                continue;
            };
            let list = !matches!(value, Value::String(_));
            let entries: Vec<String> = match value {
                Value::Sequence(items) => items
                    .iter()
                    .filter_map(|item| match item {
                        Value::String(s) => Some(s.clone()),
                        other => other.get("path").and_then(Value::as_str).map(String::from),
                    })
                    .collect(),
                other => strings(Some(other)),
            };
            for (j, e) in entries.iter().enumerate() {
                let path = absolute(e, &service_dir, places);
                let key = if list {
                    format!("services.{name}.{field}[{j}]")
                } else {
                    format!("services.{name}.{field}")
                };
                judge_path(&path, places, asked, file_source(file, key), kind);
            }
        }
    }
}

/// Whether there is something at `path` (a file, or a link, dangling or not) that Compose
/// would read as an env file (a folder it skips).
fn present(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_dir())
}

/// The paths the `include` entry `i` of a document names (its `path`s, `project_directory`
/// and `env_file`s), pushed to `asked` (when outside the workspace); the included files to
/// `pending`, with the folder their own relative paths are resolved from.
fn include_paths(
    i: usize,
    entry: &Value,
    from: &Pending,
    (file, own_dir): (&str, &Path),
    places: &Places,
    asked: &mut Vec<(Permission, Source)>,
    pending: &mut Vec<Pending>,
) {
    let (paths, project_directory, env_files) = match entry {
        Value::String(p) => (vec![p.clone()], None, Vec::new()),
        Value::Mapping(_) => (
            strings(entry.get("path")),
            entry.get("project_directory").and_then(Value::as_str),
            strings(entry.get("env_file")),
        ),
        _ => return,
    };
    let key = |field: &str, j: Option<usize>| match (entry, j) {
        (Value::String(_), _) => format!("include[{i}]"),
        (_, Some(j)) => format!("include[{i}].{field}[{j}]"),
        (_, None) => format!("include[{i}].{field}"),
    };
    let single = |field: &str| {
        entry
            .get(field)
            .is_some_and(|v| matches!(v, Value::String(_)))
    };
    let local: Vec<(usize, PathBuf)> = paths
        .iter()
        .enumerate()
        .filter(|(_, p)| !is_remote(p))
        .map(|(j, p)| (j, absolute(p, &from.working_dir, places)))
        .collect();
    // the included files' folder for their own relative paths (and their `.env`)
    let project_dir = match project_directory {
        Some(d) => {
            let d = absolute(d, &from.working_dir, places);
            let k = key("project_directory", None);
            judge_path(&d, places, asked, file_source(file, k), Kind::File);
            d
        }
        None => local
            .first()
            .and_then(|(_, p)| p.parent())
            .unwrap_or(own_dir)
            .to_path_buf(),
    };
    for (j, path) in local {
        let k = key("path", (!single("path")).then_some(j));
        judge_path(&path, places, asked, file_source(file, k), Kind::File);
        pending.push(Pending {
            path,
            working_dir: project_dir.clone(),
            extended: false,
        });
    }
    for (j, e) in env_files.iter().enumerate() {
        if e == "/dev/null" {
            continue;
        }
        let path = absolute(e, &from.working_dir, places);
        let k = key("env_file", (!single("env_file")).then_some(j));
        judge_path(&path, places, asked, file_source(file, k), Kind::File);
    }
    // without `env_file`, compose-go reads the `.env` of the included project's folder
    let dot_env = project_dir.join(".env");
    if env_files.is_empty() && present(&dot_env) {
        let k = format!("include[{i}] (its folder's `.env`)");
        judge_path(&dot_env, places, asked, file_source(file, k), Kind::File);
    }
}

/// The source of a request: the key `key` of the Compose file `file` (as shown).
fn file_source(file: &str, key: String) -> Source {
    Source::ComposeFile {
        file: file.to_string(),
        key,
    }
}

/// What a path outside the workspace asks for.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Read by Compose as configuration: [`Permission::ComposeFile`].
    File,
    /// A service's env file, whose values go into the container: [`Permission::Mount`].
    Mount,
}

/// Pushes the request `path` makes, if it is outside the workspace.
fn judge_path(
    path: &Path,
    places: &Places,
    asked: &mut Vec<(Permission, Source)>,
    source: Source,
    kind: Kind,
) {
    let Some(p) = outside(path, places) else {
        return;
    };
    let permission = match kind {
        Kind::File => Permission::ComposeFile(p),
        Kind::Mount => Permission::Mount(p),
    };
    asked.push((permission, source));
}

/// The resolved path `path` lands on when that is outside the workspace (a path written with
/// `$` as written: it cannot be placed before Compose interpolates it).
fn outside(path: &Path, places: &Places) -> Option<String> {
    let text = path.to_string_lossy();
    if text.contains('$') {
        return Some(text.into_owned());
    }
    // one devcell cannot resolve is outside: never judged by its text (spec-note 0400, F1)
    let Ok(resolved) = resolve(path) else {
        return Some(text.into_owned());
    };
    match places.place(&resolved) {
        Place::Workspace => None,
        _ => Some(resolved.to_string_lossy().into_owned()),
    }
}

/// `written` as Compose opens it: `~` the home folder, a relative path against `base`.
fn absolute(written: &str, base: &Path, places: &Places) -> PathBuf {
    let home = places.home.as_deref().unwrap_or(Path::new("/"));
    if written == "~" {
        return home.to_path_buf();
    }
    if let Some(rest) = written.strip_prefix("~/") {
        return home.join(rest);
    }
    base.join(written)
}

/// Whether Compose fetches `path` instead of opening a local file.
fn is_remote(path: &str) -> bool {
    path.contains("://") || path.starts_with("git@")
}

/// A string, or the strings of a list (other items skipped).
fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(|i| i.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// `path` as shown in a request's source (resolved): relative to the workspace when it is
/// inside it.
fn shown(path: &Path, places: &Places) -> String {
    let path = resolve(path).unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&places.workspace)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::policy::RequestStatus;

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
    }

    impl Tree {
        fn new() -> Tree {
            let dir = tempfile::tempdir().unwrap();
            let root = resolve(dir.path()).unwrap();
            std::fs::create_dir_all(root.join("repo/.devcontainer")).unwrap();
            std::fs::create_dir_all(root.join("outside")).unwrap();
            Tree { _dir: dir, root }
        }
        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let p = self.root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            p
        }
        fn places(&self) -> Places {
            Places::new(&self.root.join("repo"), Some(&self.root.join("home")), None)
        }
        /// (grant flag, source) of every request not granted, for `compose.yml`.
        fn refused(&self, grants: &[&str]) -> Vec<(String, String)> {
            let grants = Grants::parse(grants).unwrap();
            compose_file_requests(
                &SecurityProfile::default(),
                &self.root.join("repo/.devcontainer/devcontainer.json"),
                &[self.root.join("repo/.devcontainer/compose.yml")],
                &self.root.join("repo/.devcontainer/.env"),
                &self.places(),
                &grants,
            )
            .into_iter()
            .filter(|r| r.status != RequestStatus::Granted)
            .map(|r| (r.permission.grant_flag().unwrap(), r.source.to_string()))
            .collect()
        }
    }

    #[test]
    fn files_outside_the_workspace_are_requests_naming_file_and_key() {
        let t = Tree::new();
        let out = t.root.join("outside");
        t.write(
            "outside/x.yml",
            "services: {evil: {image: a, privileged: true}}\n",
        );
        t.write("outside/base.yml", "services: {b: {image: a}}\n");
        std::os::unix::fs::symlink(out.join("x.yml"), t.root.join("repo/link.yml")).unwrap();
        t.write(
            "repo/.devcontainer/compose.yml",
            &format!(
                "include:\n  - ../../outside/x.yml\n  - path: [{abs}]\n    env_file: ../../outside/i.env\n  - ../link.yml\n  - inner/inc.yml\n\
                 services:\n  app:\n    image: a\n    extends: {{file: ../../outside/base.yml, service: b}}\n    env_file:\n      - ../../outside/app.env\n      - {{path: ok.env, required: false}}\n",
                abs = out.join("abs.yml").display()
            ),
        );
        // nested: an included file's own include, relative to its folder
        t.write(
            "repo/.devcontainer/inner/inc.yml",
            "include: [../../../outside/nested.yml]\n",
        );
        let f = |p: &str| format!("--allow compose-file:{}", out.join(p).display());
        let got = t.refused(&[]);
        let want = vec![
            (
                f("x.yml"),
                "Compose file `.devcontainer/compose.yml` (`include[0]`)".to_string(),
            ),
            (
                f("abs.yml"),
                "Compose file `.devcontainer/compose.yml` (`include[1].path[0]`)".into(),
            ),
            (
                f("i.env"),
                "Compose file `.devcontainer/compose.yml` (`include[1].env_file`)".into(),
            ),
            (
                f("x.yml"),
                "Compose file `.devcontainer/compose.yml` (`include[2]`)".into(),
            ),
            (
                f("base.yml"),
                "Compose file `.devcontainer/compose.yml` (`services.app.extends.file`)".into(),
            ),
            (
                format!("--allow mount:{}", out.join("app.env").display()),
                "Compose file `.devcontainer/compose.yml` (`services.app.env_file[0]`)".into(),
            ),
            (
                f("nested.yml"),
                "Compose file `.devcontainer/inner/inc.yml` (`include[0]`)".into(),
            ),
        ];
        for w in &want {
            assert!(got.contains(w), "missing {w:?} in {got:#?}");
        }
        assert_eq!(got.len(), want.len(), "{got:#?}");
        // all granted: nothing refused
        let all = [
            format!("compose-file:{}", out.display()),
            format!("mount:{}", out.display()),
        ];
        assert!(t.refused(&[&all[0], &all[1]]).is_empty());
    }

    #[test]
    fn inside_the_workspace_is_no_request_and_granted_files_are_followed() {
        let t = Tree::new();
        t.write(
            "repo/common.yml",
            "services: {b: {image: a, env_file: b.env}}\n",
        );
        t.write(
            "repo/.devcontainer/compose.yml",
            "include: [{path: ../common.yml, project_directory: ..}]\nservices:\n  app: {image: a, extends: {file: ../common.yml, service: b}, env_file: a.env}\n",
        );
        assert!(t.refused(&[]).is_empty());
        // a granted outside file is read, and what it names is judged in turn
        let t = Tree::new();
        let out = t.root.join("outside");
        t.write(
            "outside/x.yml",
            "services: {b: {image: a, extends: {file: deeper.yml, service: c}}}\n",
        );
        t.write(
            "repo/.devcontainer/compose.yml",
            "services: {app: {image: a, extends: {file: ../../outside/x.yml, service: b}}}\n",
        );
        let grant = format!("compose-file:{}", out.join("x.yml").display());
        assert_eq!(
            t.refused(&[&grant]),
            [(
                format!("--allow compose-file:{}", out.join("deeper.yml").display()),
                format!(
                    "Compose file `{}` (`services.b.extends.file`)",
                    out.join("x.yml").display()
                )
            )]
        );
    }

    #[test]
    fn interpolated_home_and_top_level_paths() {
        let t = Tree::new();
        t.write(
            "repo/.devcontainer/compose.yml",
            "include: ['${X}/a.yml', '~/.config/c.yml']\nservices: {app: {image: a}}\n",
        );
        let dc = t.root.join("repo/.devcontainer");
        let written = format!("{}/${{X}}/a.yml", dc.display());
        let got = t.refused(&[]);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert_eq!(got[0].0, format!("--allow compose-file:{written}"));
        assert_eq!(
            got[1].0,
            format!(
                "--allow compose-file:{}",
                t.root.join("home/.config/c.yml").display()
            )
        );
        // an interpolated path is granted only as written, never by a folder
        let folder = format!("compose-file:{}", dc.display());
        assert_eq!(t.refused(&[&folder]).len(), 2);
        let exact = format!("compose-file:{written}");
        assert_eq!(t.refused(&[&exact]).len(), 1);
        // a top-level file outside the workspace
        let other = t.write("outside/top.yml", "services: {app: {image: a}}\n");
        let r = compose_file_requests(
            &SecurityProfile::default(),
            &dc.join("devcontainer.json"),
            std::slice::from_ref(&other),
            &t.root.join("outside/.env"),
            &t.places(),
            &Grants::default(),
        );
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].permission,
            Permission::ComposeFile(other.display().to_string())
        );
        assert_eq!(
            r[0].source.to_string(),
            "Compose file `.devcontainer/devcontainer.json` (`dockerComposeFile`)"
        );
        assert_eq!(
            compose_file_requests(
                &SecurityProfile::Reference,
                &dc.join("devcontainer.json"),
                &[other],
                &t.root.join("outside/.env"),
                &t.places(),
                &Grants::default()
            )[0]
            .status,
            RequestStatus::AllowedByProfile
        );
    }

    /// Attack (issue 25, N17): `.devcontainer/.env -> ~/.aws/credentials`. Compose (on the
    /// host) read it and interpolated its values into an image tag: a host secret left in a
    /// registry request. The project's env file linking out of the workspace is a request, as
    /// is an included project's `.env`; devcell's own read of it refuses the link unless
    /// granted, and reads a workspace file (or a link within the workspace) as it is.
    #[test]
    fn a_project_env_file_linking_out_of_the_workspace_is_a_request_and_never_read() {
        let t = Tree::new();
        let secret = t.write(
            "home/.aws/credentials",
            "aws_secret_access_key=HOSTSECRET\n",
        );
        t.write(
            "repo/.devcontainer/compose.yml",
            "include: [sub/inc.yml]\nservices: {app: {image: a}}\n",
        );
        t.write(
            "repo/.devcontainer/sub/inc.yml",
            "services: {b: {image: b}}\n",
        );
        let env = t.root.join("repo/.devcontainer/.env");
        std::os::unix::fs::symlink(&secret, &env).unwrap();
        std::os::unix::fs::symlink(&secret, t.root.join("repo/.devcontainer/sub/.env")).unwrap();
        let flag = format!("--allow compose-file:{}", secret.display());
        let refused = t.refused(&[]);
        assert_eq!(
            refused,
            [
                (
                    flag.clone(),
                    "Compose file `.devcontainer/.env` (`the project's env file`)".to_string()
                ),
                (
                    flag.clone(),
                    "Compose file `.devcontainer/compose.yml` (`include[0] (its folder's `.env`)`)"
                        .to_string()
                ),
            ]
        );
        let places = t.places();
        let hardened = SecurityProfile::default();
        let err = read_project_env(&hardened, &env, &places, &Grants::default()).unwrap_err();
        assert!(
            matches!(&err, SecurityError::PathOutside { grant: Some(g), .. } if *g == flag),
            "{err}"
        );
        assert!(!err.to_string().contains("HOSTSECRET"), "{err}");
        // granted (or under `reference`), the file it resolves to is read
        let grant = Grants::parse(&[&flag["--allow ".len()..]]).unwrap();
        let read = read_project_env(&hardened, &env, &places, &grant).unwrap();
        assert_eq!(read, b"aws_secret_access_key=HOSTSECRET\n");
        let reference = SecurityProfile::Reference;
        let read = read_project_env(&reference, &env, &places, &Grants::default()).unwrap();
        assert_eq!(read, b"aws_secret_access_key=HOSTSECRET\n");
        // within the workspace: a file, a link to one; none, or a folder: empty
        std::fs::remove_file(&env).unwrap();
        assert!(t.refused(&[]).len() == 1);
        t.write("repo/.env.dev", "K=v\n");
        std::os::unix::fs::symlink("../.env.dev", &env).unwrap();
        assert_eq!(t.refused(&[]).len(), 1);
        let read = read_project_env(&hardened, &env, &places, &Grants::default()).unwrap();
        assert_eq!(read, b"K=v\n");
        std::fs::remove_file(&env).unwrap();
        let read = read_project_env(&hardened, &env, &places, &Grants::default()).unwrap();
        assert!(read.is_empty());
        std::fs::create_dir(&env).unwrap();
        let read = read_project_env(&hardened, &env, &places, &Grants::default()).unwrap();
        assert!(read.is_empty());
        // a dangling link out of the workspace is judged where it points
        std::fs::remove_dir(&env).unwrap();
        std::os::unix::fs::symlink(t.root.join("home/none"), &env).unwrap();
        assert!(read_project_env(&hardened, &env, &places, &Grants::default()).is_err());
        assert_eq!(
            project_env_file(&[t.root.join("repo/.devcontainer/compose.yml")], None),
            Some(env.clone())
        );
        assert_eq!(
            project_env_file(&[], Some(&t.root.join("repo/.env"))),
            Some(t.root.join("repo/.env"))
        );
        assert_eq!(project_env_file(&[], None), None);
    }

    #[test]
    fn an_alias_bomb_is_found_and_ordinary_aliases_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut lines =
            vec![r#"x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]"#.to_string()];
        let mut previous = 'a';
        for level in "bcdefghi".chars() {
            let refs = vec![format!("*{previous}"); 9].join(",");
            lines.push(format!("x-{level}: &{level} [{refs}]"));
            previous = level;
        }
        lines.push(format!(
            "services:\n  app:\n    image: x\n    labels:\n      bomb: *{previous}"
        ));
        let bomb = dir.path().join("bomb.yml");
        std::fs::write(&bomb, lines.join("\n")).unwrap();
        let fine = dir.path().join("fine.yml");
        std::fs::write(
            &fine,
            "x-env: &env {A: b}\nservices:\n  app:\n    image: x\n    environment: *env\n",
        )
        .unwrap();
        assert_eq!(alias_bomb(std::slice::from_ref(&fine)), None);
        assert_eq!(alias_bomb(&[fine, bomb.clone()]), Some(bomb));
    }
}
