//! Feature references: the keys of `features` in devcontainer.json and of `dependsOn` in
//! `devcontainer-feature.json` (spec-distilled §4.3, §5.1; spec-note 0040).
//!
//! Three kinds: OCI artifacts (`ghcr.io/owner/repo/name[:tag|@sha256:…]`), local folders
//! (`./name`, relative to the folder of the active devcontainer.json and inside `.devcontainer/`),
//! and direct HTTPS tarballs (`https://…/devcontainer-feature-<id>.tgz`).

use std::fmt;
use std::path::{Component, Path, PathBuf};

use super::error::{FeatureError, Result};

/// The tag used when an OCI reference has neither a tag nor a digest (spec: `latest`).
pub const DEFAULT_TAG: &str = "latest";

/// Legacy short ids the reference CLI maps to `ghcr.io/devcontainers/features/<id>:1`
/// (refcli §2.8). devcell rejects them with a hint naming that reference.
const LEGACY_SHORT_IDS: &[(&str, &str)] = &[
    ("aws-cli", "aws-cli"),
    ("azure-cli", "azure-cli"),
    ("desktop-lite", "desktop-lite"),
    ("docker-in-docker", "docker-in-docker"),
    ("docker-from-docker", "docker-outside-of-docker"),
    ("dotnet", "dotnet"),
    ("git", "git"),
    ("git-lfs", "git-lfs"),
    ("github-cli", "github-cli"),
    ("java", "java"),
    ("kubectl-helm-minikube", "kubectl-helm-minikube"),
    ("node", "node"),
    ("powershell", "powershell"),
    ("python", "python"),
    ("ruby", "ruby"),
    ("rust", "rust"),
    ("sshd", "sshd"),
    ("terraform", "terraform"),
    ("golang", "go"),
    ("common", "common-utils"),
    ("gradle", "java"),
    ("maven", "java"),
    ("jupyterlab", "python"),
];

/// The abandoned Feature owner the reference CLI redirects (`devcontainers-contrib`).
/// The error for a reference without `/` that is not `./`-relative.
const BARE_NAME: &str =
    "a bare name is not a Feature reference (legacy short ids are not supported)";

const CONTRIB_OWNER: &str = "devcontainers-contrib";
/// Its successor (`devcontainers-extra`).
const EXTRA_OWNER: &str = "devcontainers-extra";

/// The version part of an OCI Feature reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OciVersion {
    /// `:tag` (or the default `latest`).
    Tag(String),
    /// `@sha256:<64 hex>`; the string includes the `sha256:` prefix.
    Digest(String),
}

/// A parsed Feature reference (spec-distilled §4.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FeatureRef {
    /// An OCI artifact `<registry>/<namespace…>/<id>[:tag|@digest]`, lowercased.
    Oci {
        /// Registry host with optional port, e.g. `ghcr.io`, `localhost:5000`.
        registry: String,
        /// OCI repository name `namespace/id`, e.g. `devcontainers/features/go`.
        repository: String,
        /// The Feature id (last path segment).
        id: String,
        /// Tag or digest; `Tag("latest")` when neither was written.
        version: OciVersion,
        /// The reference as written, lowercased (the lockfile key).
        raw: String,
    },
    /// A local Feature folder, written `./name` (or `../x`), relative to the folder containing
    /// the active devcontainer.json.
    Local {
        /// The path as written (unix separators), e.g. `./my-feature`.
        path: String,
    },
    /// A direct HTTPS tarball `https://…/devcontainer-feature-<id>.tgz`.
    Tarball {
        /// The URL as written.
        url: String,
        /// The Feature id taken from the file name.
        id: String,
    },
}

impl FeatureRef {
    /// Parses a key of `features` or `dependsOn`.
    ///
    /// Errors ([`FeatureError::InvalidReference`], with a hint where one is known): empty
    /// strings, absolute paths, bare names without `./` (legacy short ids), `http://` or
    /// tarball URLs not named `devcontainer-feature-<id>.tgz`, GitHub-release references,
    /// registries that are not host names, invalid repository names, tags or digests, and a
    /// tag together with a digest (as the reference CLI, cli#825).
    pub fn parse(key: &str) -> Result<FeatureRef> {
        let err = |message: &str, hint: Option<String>| FeatureError::InvalidReference {
            reference: key.to_string(),
            message: message.to_string(),
            hint,
        };
        let trimmed = key.trim();
        if trimmed.is_empty() {
            return Err(err("the reference is empty", None));
        }
        if trimmed != key {
            return Err(err(
                "the reference has leading or trailing whitespace",
                None,
            ));
        }
        let lower = key.to_ascii_lowercase();
        if lower.starts_with("https://") {
            return parse_tarball(key, &err);
        }
        if lower.starts_with("http://") {
            return Err(err(
                "Feature tarballs must be fetched over `https://`",
                Some(format!("use `https{}`", &key[4..])),
            ));
        }
        if key.starts_with("./") || key.starts_with("../") || key == "." || key == ".." {
            return Ok(FeatureRef::Local {
                path: key.to_string(),
            });
        }
        if key.starts_with(".\\") || key.starts_with("..\\") {
            return Err(err(
                "local Feature paths use `/` separators",
                Some(format!("write `{}`", key.replace('\\', "/"))),
            ));
        }
        if key.starts_with('/') || key.starts_with('\\') || has_drive_letter(key) {
            return Err(err(
                "a local Feature must be a path relative to the `.devcontainer` folder, not an absolute path",
                Some(
                    "move the Feature into `.devcontainer/` and reference it as `./<folder>`"
                        .into(),
                ),
            ));
        }
        if !key.contains('/') {
            let legacy = LEGACY_SHORT_IDS.iter().find(|(short, _)| *short == lower);
            let hint = match legacy {
                Some((_, id)) => format!(
                    "`{key}` is a legacy short id; use `ghcr.io/devcontainers/features/{id}:1`"
                ),
                None => format!("for a local Feature folder write `./{key}`"),
            };
            // The reference's words for a name that is no legacy id, which tools match on.
            let message = match legacy {
                Some(_) => BARE_NAME.to_string(),
                None => {
                    format!("{BARE_NAME}; for a local Feature, prepend your Feature name with `./`")
                }
            };
            return Err(err(&message, Some(hint)));
        }
        parse_oci(key, &lower, &err)
    }

    /// The resource identity without version: `registry/repository` for OCI, the normalized
    /// path for local Features (`./a/../b` → `./b`), the URL for tarballs. Used to match
    /// `installsAfter` and `overrideFeatureInstallOrder` entries and as the first sort key.
    pub fn resource(&self) -> String {
        match self {
            FeatureRef::Oci {
                registry,
                repository,
                ..
            } => format!("{registry}/{repository}"),
            FeatureRef::Local { path } => normalize_local(path),
            FeatureRef::Tarball { url, .. } => url.clone(),
        }
    }

    /// The Feature id implied by the reference: OCI last segment, tarball file name id, local
    /// folder name (`None` for `.`/`..`-only paths).
    pub fn id(&self) -> Option<String> {
        match self {
            FeatureRef::Oci { id, .. } | FeatureRef::Tarball { id, .. } => Some(id.clone()),
            FeatureRef::Local { path } => {
                let norm = normalize_local(path);
                norm.rsplit('/')
                    .next()
                    .filter(|s| !s.is_empty() && *s != "." && *s != "..")
                    .map(str::to_string)
            }
        }
    }

    /// The tag of an OCI reference (`None` for digests and non-OCI references).
    pub fn tag(&self) -> Option<&str> {
        match self {
            FeatureRef::Oci {
                version: OciVersion::Tag(t),
                ..
            } => Some(t),
            _ => None,
        }
    }

    /// The digest of an OCI reference pinned with `@sha256:…`.
    pub fn digest(&self) -> Option<&str> {
        match self {
            FeatureRef::Oci {
                version: OciVersion::Digest(d),
                ..
            } => Some(d),
            _ => None,
        }
    }

    /// The OCI namespace (`owner/repo` of `ghcr.io/owner/repo/name`), `None` for other kinds.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            FeatureRef::Oci { repository, .. } => {
                Some(repository.rsplit_once('/').map_or("", |(ns, _)| ns))
            }
            _ => None,
        }
    }

    /// The lockfile key: the reference as written, lowercased (spec devcontainer-lockfile.md).
    pub fn lock_key(&self) -> String {
        match self {
            FeatureRef::Oci { raw, .. } => raw.clone(),
            FeatureRef::Local { path } => path.to_ascii_lowercase(),
            FeatureRef::Tarball { url, .. } => url.to_ascii_lowercase(),
        }
    }

    /// True when an OCI reference was redirected from `devcontainers-contrib/…` to
    /// `devcontainers-extra/…` (as the reference CLI does); callers may warn.
    pub fn is_redirected(&self) -> bool {
        match self {
            FeatureRef::Oci {
                registry,
                repository,
                raw,
                ..
            } => !raw.starts_with(&format!("{registry}/{repository}")),
            _ => false,
        }
    }

    /// True for local Features.
    pub fn is_local(&self) -> bool {
        matches!(self, FeatureRef::Local { .. })
    }

    /// Resolves a local reference to its folder.
    ///
    /// `config_dir` is the folder containing the active devcontainer.json; `devcontainer_dir`
    /// is `<workspace>/.devcontainer`. The path must stay inside `devcontainer_dir`, both
    /// lexically and (when it exists) after following symlinks. Returns the folder as it
    /// resolves (no link left in it) when it exists, so what was checked is what is read and
    /// packed (spec-note 0400); else the lexical path (reading it then fails).
    ///
    /// Errors: [`FeatureError::InvalidReference`] when the reference is not local or escapes.
    pub fn local_dir(&self, config_dir: &Path, devcontainer_dir: &Path) -> Result<PathBuf> {
        let FeatureRef::Local { path } = self else {
            return Err(FeatureError::InvalidReference {
                reference: self.to_string(),
                message: "not a local Feature".into(),
                hint: None,
            });
        };
        let escape = || FeatureError::InvalidReference {
            reference: path.clone(),
            message: format!(
                "the local Feature folder is outside `{}`",
                devcontainer_dir.display()
            ),
            hint: Some(
                "local Features must live in a sub-folder of the project's `.devcontainer` folder"
                    .into(),
            ),
        };
        let joined = lexical_normalize(&config_dir.join(path));
        let root = lexical_normalize(devcontainer_dir);
        if !joined.starts_with(&root) || joined == root {
            return Err(escape());
        }
        if let (Ok(real), Ok(real_root)) = (joined.canonicalize(), root.canonicalize()) {
            if !real.starts_with(&real_root) || real == real_root {
                return Err(escape());
            }
            return Ok(real);
        }
        Ok(joined)
    }
}

impl fmt::Display for FeatureRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureRef::Oci { raw, .. } => f.write_str(raw),
            FeatureRef::Local { path } => f.write_str(path),
            FeatureRef::Tarball { url, .. } => f.write_str(url),
        }
    }
}

fn has_drive_letter(key: &str) -> bool {
    let b = key.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b.len() == 2 || b[2] == b'\\' || b[2] == b'/')
}

fn parse_tarball(
    key: &str,
    err: &dyn Fn(&str, Option<String>) -> FeatureError,
) -> Result<FeatureRef> {
    let without_query = key.split(['?', '#']).next().unwrap_or(key);
    let file = without_query.rsplit('/').next().unwrap_or("");
    let id = file
        .strip_prefix("devcontainer-feature-")
        .and_then(|rest| rest.strip_suffix(".tgz"));
    match id {
        Some(id)
            if !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
        {
            Ok(FeatureRef::Tarball {
                url: key.to_string(),
                id: id.to_string(),
            })
        }
        _ => Err(err(
            &format!("the tarball file name `{file}` is not `devcontainer-feature-<id>.tgz`"),
            Some("name the file `devcontainer-feature-<id>.tgz`, where `<id>` uses only letters, digits, `_` and `-`".into()),
        )),
    }
}

fn parse_oci(
    key: &str,
    lower: &str,
    err: &dyn Fn(&str, Option<String>) -> FeatureError,
) -> Result<FeatureRef> {
    // Digest: text after the last `@`.
    let (rest, digest) = match lower.rsplit_once('@') {
        Some((rest, d)) => {
            if !d.starts_with("sha256:") {
                return Err(err(
                    &format!("`@{d}` is not a `sha256:` digest"),
                    Some("GitHub-release references (`owner/repo/feature@v1`) are not supported; use an OCI reference such as `ghcr.io/owner/repo/feature:1`".into()),
                ));
            }
            let hex = &d["sha256:".len()..];
            if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(err(
                    "the digest must be `sha256:` followed by 64 hex digits",
                    None,
                ));
            }
            (rest, Some(d.to_string()))
        }
        None => (lower, None),
    };
    // Tag: text after the last `:` only if it follows the last `/`.
    let last_slash = rest.rfind('/').unwrap_or(0);
    let (path, tag) = match rest.rfind(':') {
        Some(colon) if colon > last_slash => (&rest[..colon], Some(&rest[colon + 1..])),
        _ => (rest, None),
    };
    if tag.is_some() && digest.is_some() {
        return Err(err(
            "a reference cannot have both a tag and a digest",
            Some("keep only the `@sha256:…` digest".into()),
        ));
    }
    if let Some(tag) = tag
        && !valid_tag(tag)
    {
        return Err(err(
            &format!("`{tag}` is not a valid tag (letters, digits, `_`, `.`, `-`; at most 128)"),
            None,
        ));
    }
    let Some((registry, repository)) = path.split_once('/') else {
        return Err(err("expected `<registry>/<namespace>/<id>`", None));
    };
    let registry_ok = registry.contains('.')
        || registry.contains(':')
        || registry == "localhost"
        || registry.starts_with("localhost:");
    if !registry_ok {
        return Err(err(
            &format!("`{registry}` is not a registry host name"),
            Some(format!(
                "OCI Features are written `<registry>/<namespace>/<id>`, e.g. `ghcr.io/{path}`; GitHub-release references are not supported"
            )),
        ));
    }
    if !valid_registry(registry) {
        return Err(err(
            &format!("`{registry}` is not a valid registry host"),
            None,
        ));
    }
    if !repository.contains('/') {
        return Err(err(
            "expected `<registry>/<namespace>/<id>` (the namespace is missing)",
            None,
        ));
    }
    if !valid_repository(repository) {
        return Err(err(
            &format!("`{repository}` is not a valid OCI repository name"),
            None,
        ));
    }
    let id = repository
        .rsplit('/')
        .next()
        .unwrap_or(repository)
        .to_string();
    let _ = key;
    // The reference CLI redirects the abandoned `devcontainers-contrib` owner to its successor
    // `devcontainers-extra` (the old packages are gone); the reference as written is kept.
    let repository = match repository.strip_prefix(CONTRIB_OWNER) {
        Some(rest) if rest.starts_with('/') => format!("{EXTRA_OWNER}{rest}"),
        _ => repository.to_string(),
    };
    Ok(FeatureRef::Oci {
        registry: registry.to_string(),
        repository,
        id,
        version: match digest {
            Some(d) => OciVersion::Digest(d),
            None => OciVersion::Tag(tag.unwrap_or(DEFAULT_TAG).to_string()),
        },
        raw: lower.to_string(),
    })
}

/// OCI tag grammar `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
fn valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() || c == '_' => {}
        _ => return false,
    }
    tag.len() <= 128 && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn valid_registry(registry: &str) -> bool {
    let (host, port) = match registry.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (registry, None),
    };
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// OCI distribution name grammar: components `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` joined by `/`.
fn valid_repository(repository: &str) -> bool {
    repository.split('/').all(valid_component)
}

fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_alnum(b[0]) || !is_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: `.`, `_`, `__` or `-+`, followed by an alphanumeric.
        let start = i;
        while i < b.len() && !is_alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.chars().all(|ch| ch == '-');
        if !ok {
            return false;
        }
    }
    true
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `./a/./b/../c` → `./a/c`; keeps leading `..` segments.
fn normalize_local(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if matches!(out.last(), Some(s) if *s != "..") {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            s => out.push(s),
        }
    }
    if out.first() == Some(&"..") {
        out.join("/")
    } else {
        format!("./{}", out.join("/"))
    }
}

/// Removes `.` and resolves `..` without touching the file system.
fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oci(key: &str) -> (String, String, String, OciVersion) {
        match FeatureRef::parse(key).unwrap() {
            FeatureRef::Oci {
                registry,
                repository,
                id,
                version,
                ..
            } => (registry, repository, id, version),
            other => panic!("not OCI: {other:?}"),
        }
    }

    fn reject(key: &str) -> (String, Option<String>) {
        match FeatureRef::parse(key) {
            Err(FeatureError::InvalidReference { message, hint, .. }) => (message, hint),
            other => panic!("`{key}` not rejected: {other:?}"),
        }
    }

    #[test]
    fn oci_without_tag_defaults_to_latest() {
        // checklist 19
        let (reg, repo, id, v) = oci("ghcr.io/owner/repo/name");
        assert_eq!(reg, "ghcr.io");
        assert_eq!(repo, "owner/repo/name");
        assert_eq!(id, "name");
        assert_eq!(v, OciVersion::Tag("latest".into()));
    }

    #[test]
    fn oci_tag_and_namespace() {
        let r = FeatureRef::parse("ghcr.io/owner/repo/name:1.2.3").unwrap();
        assert_eq!(r.tag(), Some("1.2.3"));
        assert_eq!(r.namespace(), Some("owner/repo"));
        assert_eq!(r.resource(), "ghcr.io/owner/repo/name");
    }

    #[test]
    fn oci_digest() {
        let d = format!("sha256:{}", "a".repeat(64));
        let r = FeatureRef::parse(&format!("ghcr.io/o/r/f@{d}")).unwrap();
        assert_eq!(r.digest(), Some(d.as_str()));
        assert_eq!(r.tag(), None);
        assert_eq!(r.resource(), "ghcr.io/o/r/f");
    }

    #[test]
    fn oci_registry_port_is_not_a_tag() {
        // checklist 57
        let (reg, repo, _, v) = oci("localhost:5000/ns/f");
        assert_eq!(reg, "localhost:5000");
        assert_eq!(repo, "ns/f");
        assert_eq!(v, OciVersion::Tag("latest".into()));
        let (reg, repo, id, v) = oci("localhost:5000/ns/name:1");
        assert_eq!(
            (reg.as_str(), repo.as_str(), id.as_str()),
            ("localhost:5000", "ns/name", "name")
        );
        assert_eq!(v, OciVersion::Tag("1".into()));
        let (reg, _, _, _) = oci("127.0.0.1:5000/ns/x");
        assert_eq!(reg, "127.0.0.1:5000");
    }

    #[test]
    fn oci_letter_case_is_normalized() {
        // checklist 20
        let a = FeatureRef::parse("GHCR.io/Owner/Repo/Name:LATEST").unwrap();
        let b = FeatureRef::parse("ghcr.io/owner/repo/name:latest").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.lock_key(), "ghcr.io/owner/repo/name:latest");
    }

    #[test]
    fn contrib_owner_redirects_to_extra() {
        let r = FeatureRef::parse("ghcr.io/devcontainers-contrib/features/zsh-plugins:0").unwrap();
        assert_eq!(
            r.resource(),
            "ghcr.io/devcontainers-extra/features/zsh-plugins"
        );
        assert_eq!(
            r.lock_key(),
            "ghcr.io/devcontainers-contrib/features/zsh-plugins:0"
        );
        assert!(r.is_redirected());
        let r = FeatureRef::parse("ghcr.io/devcontainers-contribx/features/a").unwrap();
        assert!(!r.is_redirected());
        assert_eq!(r.resource(), "ghcr.io/devcontainers-contribx/features/a");
        assert!(!FeatureRef::parse("ghcr.io/o/r/f").unwrap().is_redirected());
    }

    #[test]
    fn oci_invalid_forms_rejected() {
        let d = "a".repeat(64);
        assert!(
            reject(&format!("ghcr.io/o/r/f:1@sha256:{d}"))
                .0
                .contains("both")
        );
        assert!(reject("ghcr.io/o/r/f@sha256:abc").0.contains("64 hex"));
        assert!(reject("ghcr.io/o/r/f:+x").0.contains("tag"));
        assert!(reject("ghcr.io/o/r/f:1.0.0+build").0.contains("tag"));
        assert!(reject("ghcr.io/o/r//f").0.contains("repository"));
        assert!(reject("ghcr.io/o/r/f__-x").0.contains("repository"));
        assert!(reject("ghcr.io/f").0.contains("namespace"));
        let (msg, hint) = reject("owner/repo/feature@v1");
        assert!(msg.contains("sha256"), "{msg}");
        assert!(hint.unwrap().contains("GitHub-release"));
        let (msg, _) = reject("owner/repo/feature");
        assert!(msg.contains("registry host"), "{msg}");
    }

    #[test]
    fn bare_names_rejected_with_hints() {
        let (_, hint) = reject("docker-in-docker");
        assert_eq!(
            hint.unwrap(),
            "`docker-in-docker` is a legacy short id; use `ghcr.io/devcontainers/features/docker-in-docker:1`"
        );
        let (_, hint) = reject("golang");
        assert!(hint.unwrap().contains("features/go:1"));
        let (message, hint) = reject("myFeature");
        assert_eq!(
            hint.unwrap(),
            "for a local Feature folder write `./myFeature`"
        );
        // The reference's words, which tools match on (its own suite does).
        assert!(
            message.ends_with("prepend your Feature name with `./`"),
            "{message}"
        );
    }

    #[test]
    fn tarball_names() {
        // checklist 22
        let r = FeatureRef::parse("https://example.com/x/devcontainer-feature-go.tgz").unwrap();
        assert_eq!(
            r,
            FeatureRef::Tarball {
                url: "https://example.com/x/devcontainer-feature-go.tgz".into(),
                id: "go".into()
            }
        );
        assert!(
            reject("https://example.com/x/go.tgz")
                .0
                .contains("devcontainer-feature-<id>.tgz")
        );
        assert!(
            reject("https://example.com/x/devcontainer-feature-.tgz")
                .0
                .contains("file name")
        );
        assert!(
            reject("https://example.com/devcontainer-feature-a.b.tgz")
                .0
                .contains("file name")
        );
        assert!(
            reject("http://example.com/devcontainer-feature-go.tgz")
                .0
                .contains("https")
        );
    }

    #[test]
    fn local_absolute_rejected() {
        // checklist 23
        assert!(reject("/abs/feature").0.contains("absolute"));
        assert!(reject("C:\\features\\x").0.contains("absolute"));
    }

    #[test]
    fn local_paths_resolve_inside_devcontainer_only() {
        // checklist 24
        let dir = tempfile::tempdir().unwrap();
        let dc = dir.path().join(".devcontainer");
        std::fs::create_dir_all(dc.join("a")).unwrap();
        let r = FeatureRef::parse("./a").unwrap();
        assert_eq!(r.local_dir(&dc, &dc).unwrap(), dc.join("a"));
        assert_eq!(r.id().as_deref(), Some("a"));
        for bad in ["../x", "./a/../../x", ".", "./a/.."] {
            let r = FeatureRef::parse(bad).unwrap();
            let e = r.local_dir(&dc, &dc).unwrap_err();
            assert!(e.to_string().contains("outside"), "{bad}: {e}");
        }
        // A sub-folder config (`.devcontainer/sub/devcontainer.json`) may reach `../shared`.
        let sub = dc.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let r = FeatureRef::parse("../a").unwrap();
        assert_eq!(r.local_dir(&sub, &dc).unwrap(), dc.join("a"));
        // A root `.devcontainer.json` references `./.devcontainer/a`.
        let r = FeatureRef::parse("./.devcontainer/a").unwrap();
        assert_eq!(r.local_dir(dir.path(), &dc).unwrap(), dc.join("a"));
        let r = FeatureRef::parse("./a").unwrap();
        assert!(r.local_dir(dir.path(), &dc).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn local_symlink_escape_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let dc = dir.path().join(".devcontainer");
        std::fs::create_dir_all(&dc).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), dc.join("link")).unwrap();
        let r = FeatureRef::parse("./link").unwrap();
        assert!(
            r.local_dir(&dc, &dc)
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        // a link inside `.devcontainer`: the folder it resolves to is what is used
        std::fs::create_dir_all(dc.join("real")).unwrap();
        std::os::unix::fs::symlink("real", dc.join("alias")).unwrap();
        let r = FeatureRef::parse("./alias").unwrap();
        assert_eq!(
            r.local_dir(&dc, &dc).unwrap(),
            dc.canonicalize().unwrap().join("real")
        );
    }

    #[test]
    fn short_strings_never_panic_and_oci_round_trips() {
        // Every string of up to 4 characters over an alphabet of the separators, a letter, a
        // digit and non-ASCII: parse never panics, and an OCI result is consistent.
        let alphabet = ['a', '1', '.', '/', ':', '@', '\\', 'ü', '-'];
        let mut inputs = vec![String::new()];
        for _ in 0..4 {
            let next: Vec<String> = inputs
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            inputs.extend(next);
        }
        inputs.sort();
        inputs.dedup();
        for input in &inputs {
            for key in [input.clone(), format!("h.io/{input}"), format!("./{input}")] {
                if let Ok(r @ FeatureRef::Oci { .. }) = FeatureRef::parse(&key) {
                    assert_eq!(FeatureRef::parse(&r.to_string()).unwrap(), r, "{key}");
                    assert!(r.resource().starts_with("h.io/"), "{key}");
                    assert_eq!(r.id().as_deref(), r.resource().rsplit('/').next(), "{key}");
                }
            }
        }
    }

    #[test]
    fn local_resource_is_normalized() {
        assert_eq!(
            FeatureRef::parse("./a/./b/../c").unwrap().resource(),
            "./a/c"
        );
        assert_eq!(FeatureRef::parse("../x").unwrap().resource(), "../x");
    }
}
